/* runtime.c - contexts, modules and launches through the CUDA driver API.
 *
 * The driver is opened with dlopen at context creation rather than linked,
 * so the library (and every GPU-free part of it: metadata, validation) works
 * on machines without a driver. cuda.h is used for its types only.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- the driver's entry points ------------------------------------------ */

/* The versioned symbol names are what cuda.h's macros map the plain names to
 * for this ABI (e.g. cuMemAlloc -> cuMemAlloc_v2). */
typedef struct Driver {
  void *lib;
  CUresult (*Init)(unsigned);
  CUresult (*GetErrorName)(CUresult, const char **);
  CUresult (*GetErrorString)(CUresult, const char **);
  CUresult (*DeviceGetCount)(int *);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*PrimaryCtxRelease)(CUdevice);
  CUresult (*CtxPush)(CUcontext);
  CUresult (*CtxPop)(CUcontext *);
  CUresult (*CtxSynchronize)(void);
  CUresult (*ModuleLoadDataEx)(CUmodule *, const void *, unsigned, CUjit_option *, void **);
  CUresult (*ModuleUnload)(CUmodule);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*FuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*FuncGetAttribute)(int *, CUfunction_attribute, CUfunction);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, CUstream, void **, void **);
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  /* A varlen launch's prefix sums read back for validation (fa_forward). */
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
  /* Optional (CUDA 11.8+): NULL on older drivers, which launch the combine
   * kernel the plain way. */
  CUresult (*LaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
  /* Optional too: a fused decode kernel's counters are zeroed with it (a
   * driver without it refuses those launches, nothing else). */
  CUresult (*MemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
} Driver;

struct fa_context {
  Driver cu;
  int device;
  CUdevice dev;
  CUcontext ctx;
  int max_smem_optin;      /* bytes of dynamic shared memory a block may opt into */
  int sm_count;            /* multiprocessors, for decode's split = auto */
  int cc_major;            /* compute capability: griddepcontrol needs 9.0 */
  atomic_int refs;         /* 1 for the caller's handle + 1 per live module */
  char errmsg[24576];      /* room for a JIT error log */
};

struct fa_module {
  fa_context *ctx;
  CUmodule mod;
  CUfunction fn;
  CUfunction combine;      /* decode: the split-KV combine kernel, or NULL */
  CUfunction wide;         /* decode: the small-batch variant, or NULL */
  int last_nsplit;         /* decode: nsplit of the last launch */
  int last_wide;           /* decode: the last launch ran the small-batch variant */
  fa_kernel_info info;     /* kernels[0]'s: the kernel fa_forward / fa_decode launch */
  int nkernels;            /* the kernels the metadata describes (fa_meta_parse_module) */
  fa_kernel_info kernels[FA_MODULE_MAX_KERNELS];
  CUfunction fns[FA_MODULE_MAX_KERNELS]; /* fns[0] == fn */
  CUdeviceptr scratch;     /* LSE scratch + workspace, see fa_forward */
  size_t scratch_bytes;
  CUdeviceptr lists;       /* the block lists fa_forward / fa_backward build (blocks.c) */
  size_t lists_bytes;
  uint64_t serial;         /* unique per load: an fa_blocks names its module by it */
  size_t zero_bytes;       /* the scratch's first zero_bytes are zero (fused decode counters) */
  char *jit_log;
  char errmsg[1024];
};

static const char *no_handle = "NULL handle";

/* "cuFoo: CUDA_ERROR_BAR (text)" into buf. */
static void cuda_msg(const Driver *cu, char *buf, size_t len, const char *call, CUresult r) {
  const char *name = NULL, *text = NULL;
  if (cu->GetErrorName) cu->GetErrorName(r, &name);
  if (cu->GetErrorString) cu->GetErrorString(r, &text);
  fa_fmt(buf, len, "%s failed: %s (CUresult %d: %s)", call, name ? name : "unnamed error",
         (int)r, text ? text : "no description");
}

static fa_status load_symbols(Driver *cu, char *err, size_t errlen) {
  struct { void **slot; const char *name; } syms[] = {
    {(void **)&cu->Init, "cuInit"},
    {(void **)&cu->GetErrorName, "cuGetErrorName"},
    {(void **)&cu->GetErrorString, "cuGetErrorString"},
    {(void **)&cu->DeviceGetCount, "cuDeviceGetCount"},
    {(void **)&cu->DeviceGet, "cuDeviceGet"},
    {(void **)&cu->DeviceGetAttribute, "cuDeviceGetAttribute"},
    {(void **)&cu->PrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
    {(void **)&cu->PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
    {(void **)&cu->CtxPush, "cuCtxPushCurrent_v2"},
    {(void **)&cu->CtxPop, "cuCtxPopCurrent_v2"},
    {(void **)&cu->CtxSynchronize, "cuCtxSynchronize"},
    {(void **)&cu->ModuleLoadDataEx, "cuModuleLoadDataEx"},
    {(void **)&cu->ModuleUnload, "cuModuleUnload"},
    {(void **)&cu->ModuleGetFunction, "cuModuleGetFunction"},
    {(void **)&cu->FuncSetAttribute, "cuFuncSetAttribute"},
    {(void **)&cu->FuncGetAttribute, "cuFuncGetAttribute"},
    {(void **)&cu->LaunchKernel, "cuLaunchKernel"},
    {(void **)&cu->MemAlloc, "cuMemAlloc_v2"},
    {(void **)&cu->MemFree, "cuMemFree_v2"},
    {(void **)&cu->StreamSynchronize, "cuStreamSynchronize"},
    {(void **)&cu->MemcpyDtoH, "cuMemcpyDtoH_v2"},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    /* POSIX's way to turn dlsym's void * into a function pointer. */
    *syms[i].slot = dlsym(cu->lib, syms[i].name);
    if (!*syms[i].slot) {
      fa_fmt(err, errlen, "the CUDA driver lacks %s (driver too old?)", syms[i].name);
      return FA_ERR_NO_DEVICE;
    }
  }
  /* Not in the list above: a driver without it still runs everything. */
  *(void **)&cu->LaunchKernelEx = dlsym(cu->lib, "cuLaunchKernelEx");
  *(void **)&cu->MemsetD32Async = dlsym(cu->lib, "cuMemsetD32Async");
  return FA_OK;
}

static fa_status open_driver(Driver *cu, char *err, size_t errlen) {
  const char *path = getenv("FLASHC_LIBCUDA");
  if (!path || !*path) path = "libcuda.so.1";
  cu->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!cu->lib) {
    const char *why = dlerror();
    fa_fmt(err, errlen, "no CUDA driver: cannot load %s (%s); is an NVIDIA GPU and driver "
           "installed on this machine?", path, why ? why : "unknown error");
    return FA_ERR_NO_DEVICE;
  }
  return load_symbols(cu, err, errlen);
}

/* cuInit's answers that mean "no usable GPU here" rather than a failure. */
static int means_no_device(CUresult r) {
  return r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_STUB_LIBRARY ||
         r == CUDA_ERROR_NOT_INITIALIZED || r == CUDA_ERROR_DEVICE_UNAVAILABLE ||
         r == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH || r == CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE;
}

static fa_status open_device(fa_context *c, int device, char *err, size_t errlen) {
  Driver *cu = &c->cu;
  CUresult r = cu->Init(0);
  if (r != CUDA_SUCCESS) {
    cuda_msg(cu, err, errlen, "cuInit", r);
    return means_no_device(r) ? FA_ERR_NO_DEVICE : FA_ERR_CUDA;
  }
  int count = 0;
  if ((r = cu->DeviceGetCount(&count)) != CUDA_SUCCESS) {
    cuda_msg(cu, err, errlen, "cuDeviceGetCount", r);
    return FA_ERR_CUDA;
  }
  if (device >= count) {
    fa_fmt(err, errlen, "device %d does not exist: this machine has %d CUDA device%s", device,
           count, count == 1 ? "" : "s");
    return FA_ERR_NO_DEVICE;
  }
  if ((r = cu->DeviceGet(&c->dev, device)) != CUDA_SUCCESS) {
    cuda_msg(cu, err, errlen, "cuDeviceGet", r);
    return FA_ERR_CUDA;
  }
  if ((r = cu->PrimaryCtxRetain(&c->ctx, c->dev)) != CUDA_SUCCESS) {
    cuda_msg(cu, err, errlen, "cuDevicePrimaryCtxRetain", r);
    c->ctx = NULL;
    return FA_ERR_CUDA;
  }
  c->max_smem_optin = 0;
  cu->DeviceGetAttribute(&c->max_smem_optin,
                         CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, c->dev);
  c->sm_count = 0;
  cu->DeviceGetAttribute(&c->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->dev);
  c->cc_major = 0;
  cu->DeviceGetAttribute(&c->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->dev);
  return FA_OK;
}

static void context_free(fa_context *c) {
  if (c->ctx) c->cu.PrimaryCtxRelease(c->dev);
  if (c->cu.lib) dlclose(c->cu.lib);
  free(c);
}

static void context_unref(fa_context *c) {
  if (atomic_fetch_sub(&c->refs, 1) == 1) context_free(c);
}

fa_status fa_context_create(int device, fa_context **out, char *err, size_t errlen) {
  fa_fmt(err, errlen, "%s", "");
  if (!out) {
    fa_fmt(err, errlen, "fa_context_create: out is NULL");
    return FA_ERR_NULL_POINTER;
  }
  *out = NULL;
  if (device < 0) {
    fa_fmt(err, errlen, "device ordinal %d is negative", device);
    return FA_ERR_INVALID_ARGUMENT;
  }
  fa_context *c = calloc(1, sizeof *c);
  if (!c) {
    fa_fmt(err, errlen, "out of host memory");
    return FA_ERR_OUT_OF_MEMORY;
  }
  c->device = device;
  atomic_init(&c->refs, 1);
  fa_status st = open_driver(&c->cu, err, errlen);
  if (st == FA_OK) st = open_device(c, device, err, errlen);
  if (st != FA_OK) {
    context_free(c);
    return st;
  }
  *out = c;
  return FA_OK;
}

void fa_context_destroy(fa_context *ctx) {
  if (ctx) context_unref(ctx);
}

const char *fa_context_errmsg(const fa_context *ctx) { return ctx ? ctx->errmsg : no_handle; }

void fa_context_set_errmsg(fa_context *ctx, const char *msg) {
  if (ctx) fa_fmt(ctx->errmsg, sizeof ctx->errmsg, "%s", msg ? msg : "");
}

int fa_context_device(const fa_context *ctx) { return ctx ? ctx->device : -1; }

/* ---- modules ------------------------------------------------------------ */

/* Makes ctx's context current on this thread for the scope of a call. */
static fa_status push(fa_context *c, char *msg, size_t len) {
  CUresult r = c->cu.CtxPush(c->ctx);
  if (r == CUDA_SUCCESS) return FA_OK;
  cuda_msg(&c->cu, msg, len, "cuCtxPushCurrent", r);
  return FA_ERR_CUDA;
}

static void pop(fa_context *c) {
  CUcontext dummy;
  c->cu.CtxPop(&dummy);
}

#define JIT_LOG_BYTES 16384

/* cuModuleLoadDataEx with the JIT's logs captured. On failure the context's
 * message holds the driver's error and both logs. */
static fa_status jit_load(fa_context *c, const void *image, fa_module *m) {
  char *elog = calloc(1, JIT_LOG_BYTES), *ilog = calloc(1, JIT_LOG_BYTES);
  if (!elog || !ilog) {
    free(elog), free(ilog);
    fa_fmt(c->errmsg, sizeof c->errmsg, "out of host memory");
    return FA_ERR_OUT_OF_MEMORY;
  }
  CUjit_option opt[5] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_LOG_VERBOSE};
  void *val[5] = {elog, (void *)(uintptr_t)JIT_LOG_BYTES, ilog,
                  (void *)(uintptr_t)JIT_LOG_BYTES, (void *)(uintptr_t)1};
  CUresult r = c->cu.ModuleLoadDataEx(&m->mod, image, 5, opt, val);
  elog[JIT_LOG_BYTES - 1] = ilog[JIT_LOG_BYTES - 1] = '\0';
  if (r != CUDA_SUCCESS) {
    char head[256];
    cuda_msg(&c->cu, head, sizeof head, "cuModuleLoadDataEx", r);
    fa_fmt(c->errmsg, sizeof c->errmsg, "kernel %s: %s\nJIT error log:\n%s\nJIT info log:\n%s",
           m->info.kernel, head, elog[0] ? elog : "(empty)", ilog[0] ? ilog : "(empty)");
    m->mod = NULL;
    free(elog), free(ilog);
    return FA_ERR_LOAD;
  }
  free(elog);
  m->jit_log = ilog;
  return FA_OK;
}

/* Resolves entry point `name` into *fn and fits its launch resources to the
 * metadata's smem_bytes and threads (what `key` names in the messages).
 * Every entry the metadata names is resolved at load, so that a module
 * without one fails to load rather than at its first launch. */
static fa_status prepare_entry(fa_context *c, fa_module *m, const char *name, const char *key,
                               int smem, int threads, CUfunction *fn) {
  char *msg = c->errmsg;
  size_t len = sizeof c->errmsg;
  CUresult r = c->cu.ModuleGetFunction(fn, m->mod, name);
  if (r != CUDA_SUCCESS) {
    fa_fmt(msg, len, "the module has no entry point '%s' (named by the metadata key %s)", name,
           key);
    return FA_ERR_LOAD;
  }
  int static_smem = 0, max_threads = 0;
  c->cu.FuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, *fn);
  if (c->max_smem_optin > 0 && smem + static_smem > c->max_smem_optin) {
    fa_fmt(msg, len,
           "kernel %s needs %d bytes of dynamic + %d of static shared memory; device %d allows "
           "%d per block",
           name, smem, static_smem, c->device, c->max_smem_optin);
    return FA_ERR_LOAD;
  }
  /* Above 48 KiB a kernel must opt in; raising it always is harmless. */
  r = c->cu.FuncSetAttribute(*fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem);
  if (r != CUDA_SUCCESS) {
    char head[256];
    cuda_msg(&c->cu, head, sizeof head, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", r);
    fa_fmt(msg, len, "kernel %s: %s for %d bytes", name, head, smem);
    return FA_ERR_LOAD;
  }
  /* All of the SM's unified L1/shared memory as shared: with the driver's
   * own carveout a second or third block of a 56-112 KB kernel may not fit,
   * and co-resident blocks are what hide one block's softmax behind another's
   * matmuls. A hint: a driver that refuses it changes nothing. A kernel
   * without shared memory (decode's combine) keeps the driver's L1. */
  if (smem > 0)
    c->cu.FuncSetAttribute(*fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                           CU_SHAREDMEM_CARVEOUT_MAX_SHARED);
  c->cu.FuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, *fn);
  if (max_threads > 0 && threads > max_threads) {
    fa_fmt(msg, len,
           "kernel %s: the metadata asks for %d threads per block but the compiled function "
           "allows at most %d (too many registers?)",
           name, threads, max_threads);
    return FA_ERR_LOAD;
  }
  return FA_OK;
}

/* Resolves the entry points (every kernel the metadata describes; a decode
 * module's small-batch variant and combine kernel) and fits their launch
 * resources to the metadata. */
static fa_status prepare_function(fa_context *c, fa_module *m) {
  fa_status st = FA_OK;
  for (int i = 0; i < m->nkernels && st == FA_OK; i++)
    st = prepare_entry(c, m, m->kernels[i].kernel, "kernel", m->kernels[i].smem_bytes,
                       m->kernels[i].threads, &m->fns[i]);
  m->fn = m->fns[0];
  const fa_decode_info *d = &m->info.decode;
  if (st != FA_OK || m->info.mode != FA_MODE_DECODE)
    return st;
  if (d->wide_kernel[0])
    st = prepare_entry(c, m, d->wide_kernel, "wide_kernel", d->wide_smem_bytes, d->wide_threads,
                       &m->wide);
  if (st == FA_OK && d->combine_kernel[0])
    st = prepare_entry(c, m, d->combine_kernel, "combine_kernel", 0, d->combine_threads,
                       &m->combine);
  return st;
}

static void module_release(fa_module *m) {
  fa_context *c = m->ctx;
  if (c && (m->mod || m->scratch || m->lists) && push(c, m->errmsg, sizeof m->errmsg) == FA_OK) {
    if (m->scratch) c->cu.MemFree(m->scratch);
    if (m->lists) c->cu.MemFree(m->lists);
    if (m->mod) c->cu.ModuleUnload(m->mod);
    pop(c);
  }
  free(m->jit_log);
  if (c) context_unref(c);
  free(m);
}

/* Shared by the PTX and cubin loaders: image is what the driver gets. */
static fa_status module_load(fa_context *ctx, const void *image, const char *meta,
                             size_t meta_len, fa_module **out) {
  if (!out) return FA_ERR_NULL_POINTER;
  *out = NULL;
  fa_module *m = calloc(1, sizeof *m);
  if (!m) {
    fa_fmt(ctx->errmsg, sizeof ctx->errmsg, "out of host memory");
    return FA_ERR_OUT_OF_MEMORY;
  }
  fa_status st = fa_meta_parse_module(meta, meta_len, m->kernels, &m->nkernels, ctx->errmsg,
                                      sizeof ctx->errmsg);
  if (st != FA_OK) {
    free(m);
    return st;
  }
  m->info = m->kernels[0];
  static atomic_uint_fast64_t serials = 1;
  m->serial = atomic_fetch_add(&serials, 1);
  atomic_fetch_add(&ctx->refs, 1);
  m->ctx = ctx;
  if ((st = push(ctx, ctx->errmsg, sizeof ctx->errmsg)) != FA_OK) {
    module_release(m);
    return st;
  }
  st = jit_load(ctx, image, m);
  if (st == FA_OK) st = prepare_function(ctx, m);
  pop(ctx);
  if (st != FA_OK) {
    module_release(m);
    return st;
  }
  ctx->errmsg[0] = '\0';
  *out = m;
  return FA_OK;
}

fa_status fa_module_load_ptx(fa_context *ctx, const char *ptx, size_t len, fa_module **out) {
  if (out) *out = NULL;
  if (!ctx) return FA_ERR_NULL_POINTER;
  if (!ptx || !out) {
    fa_fmt(ctx->errmsg, sizeof ctx->errmsg, "fa_module_load_ptx: %s is NULL",
           ptx ? "out" : "ptx");
    return FA_ERR_NULL_POINTER;
  }
  /* The driver wants a NUL-terminated PTX string. */
  char *text = malloc(len + 1);
  if (!text) {
    fa_fmt(ctx->errmsg, sizeof ctx->errmsg, "out of host memory for %zu bytes of PTX", len);
    return FA_ERR_OUT_OF_MEMORY;
  }
  memcpy(text, ptx, len);
  text[len] = '\0';
  fa_status st = module_load(ctx, text, text, len, out);
  free(text);
  return st;
}

fa_status fa_module_load_ptx_file(fa_context *ctx, const char *path, fa_module **out) {
  if (out) *out = NULL;
  if (!ctx) return FA_ERR_NULL_POINTER;
  if (!path) {
    fa_fmt(ctx->errmsg, sizeof ctx->errmsg, "fa_module_load_ptx_file: path is NULL");
    return FA_ERR_NULL_POINTER;
  }
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  long n = -1;
  if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
    fclose(f);
    fa_status st = fa_module_load_ptx(ctx, buf, (size_t)n, out);
    free(buf);
    return st;
  }
  if (f) fclose(f);
  free(buf);
  fa_fmt(ctx->errmsg, sizeof ctx->errmsg, "cannot read PTX file %s", path);
  return FA_ERR_LOAD;
}

fa_status fa_module_load_cubin(fa_context *ctx, const void *cubin, size_t cubin_len,
                               const char *meta, size_t meta_len, fa_module **out) {
  if (out) *out = NULL;
  if (!ctx) return FA_ERR_NULL_POINTER;
  if (!cubin || !meta || !out || cubin_len == 0) {
    fa_fmt(ctx->errmsg, sizeof ctx->errmsg, "fa_module_load_cubin: %s",
           !cubin || cubin_len == 0 ? "cubin is NULL or empty" : !meta ? "meta is NULL"
                                                                      : "out is NULL");
    return FA_ERR_NULL_POINTER;
  }
  return module_load(ctx, cubin, meta, meta_len, out);
}

void fa_module_destroy(fa_module *mod) {
  if (mod) module_release(mod);
}

const char *fa_module_errmsg(const fa_module *mod) { return mod ? mod->errmsg : no_handle; }

const char *fa_module_jit_log(const fa_module *mod) {
  return mod ? (mod->jit_log ? mod->jit_log : "") : NULL;
}

const fa_kernel_info *fa_module_info(const fa_module *mod) { return mod ? &mod->info : NULL; }

int fa_module_kernel_count(const fa_module *mod) { return mod ? mod->nkernels : 0; }

const fa_kernel_info *fa_module_kernel_info(const fa_module *mod, int i) {
  return mod && i >= 0 && i < mod->nkernels ? &mod->kernels[i] : NULL;
}

/* ---- launch ------------------------------------------------------------- */

/* cuMemAlloc of `bytes` into *p (context current); `what` names the memory
 * in a failure's message (in m). */
static fa_status alloc(fa_module *m, size_t bytes, CUdeviceptr *p, const char *what) {
  fa_context *c = m->ctx;
  CUresult r = c->cu.MemAlloc(p, bytes);
  if (r == CUDA_SUCCESS) return FA_OK;
  *p = 0;
  char call[96];
  fa_fmt(call, sizeof call, "cuMemAlloc (%s)", what);
  cuda_msg(&c->cu, m->errmsg, sizeof m->errmsg, call, r);
  fa_fmt(m->errmsg + strlen(m->errmsg), sizeof m->errmsg - strlen(m->errmsg), ": %zu bytes",
         bytes);
  return r == CUDA_ERROR_OUT_OF_MEMORY ? FA_ERR_OUT_OF_MEMORY : FA_ERR_CUDA;
}

/* Makes the grow-only buffer *p of *have bytes at least `bytes` long.
 * Growing synchronizes the context first: a launch still running may use
 * the old buffer. */
static fa_status grow(fa_module *m, CUdeviceptr *p, size_t *have, size_t bytes,
                      const char *what) {
  if (bytes <= *have) return FA_OK;
  fa_context *c = m->ctx;
  size_t want = (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1); /* whole MiB */
  if (*p) {
    CUresult r = c->cu.CtxSynchronize();
    if (r != CUDA_SUCCESS) {
      char call[96];
      fa_fmt(call, sizeof call, "cuCtxSynchronize (growing the %s)", what);
      cuda_msg(&c->cu, m->errmsg, sizeof m->errmsg, call, r);
      return FA_ERR_CUDA;
    }
    c->cu.MemFree(*p);
    *p = 0;
    *have = 0;
  }
  fa_status st = alloc(m, want, p, what);
  if (st == FA_OK) *have = want;
  return st;
}

/* Makes the scratch at least `bytes` long (its zeroed head is lost when it grows). */
static fa_status ensure_scratch(fa_module *m, size_t bytes) {
  if (bytes > m->scratch_bytes) m->zero_bytes = 0;
  return grow(m, &m->scratch, &m->scratch_bytes, bytes, "LSE/workspace scratch");
}

static CUdeviceptr devptr(const void *p) { return (CUdeviceptr)(uintptr_t)p; }

/* The module's kernel that fa_forward launches for args: the first, or
 * with dropout_p > 0 the one whose dropout_of names it; -1 (message in m)
 * when the module has none. */
static int forward_kernel(fa_module *m, const fa_forward_args *a) {
  if (a->dropout_p == 0) return 0;
  for (int i = 0; i < m->nkernels; i++)
    if (strcmp(m->kernels[i].dropout_of, m->info.kernel) == 0) return i;
  fa_fmt(m->errmsg, sizeof m->errmsg, "dropout_p is %g but kernel %s has no dropout kernel "
         "(compile its spec with `dropout = P;`)", a->dropout_p, m->info.kernel);
  return -1;
}

fa_status fa_forward_params(const fa_kernel_info *in, const fa_forward_args *a, uint64_t lse,
                            uint64_t ws, fa_param p[FA_BACKWARD_MAX_PARAMS], int *n) {
  return fa_forward_params_(in, a, lse, ws, NULL, p, n);
}

fa_status fa_forward_params_(const fa_kernel_info *in, const fa_forward_args *a, uint64_t lse,
                             uint64_t ws, const fa_block_lists *lists,
                             fa_param p[FA_BACKWARD_MAX_PARAMS], int *n) {
  static const char *const names[4] = {"q", "k", "v", "o"};
  static const char *const strides[4][3] = {{"q.sb", "q.ss", "q.sh"}, {"k.sb", "k.ss", "k.sh"},
                                            {"v.sb", "v.ss", "v.sh"}, {"o.sb", "o.ss", "o.sh"}};
  if (n) *n = 0;
  if (!in || !a || !p || !n) return FA_ERR_NULL_POINTER;
  if (in->varlen && !a->varlen) return FA_ERR_INVALID_ARGUMENT;
  const fa_tensor *t[4] = {&a->q, &a->k, &a->v, &a->o};
  fa_sizes sz = fa_launch_sizes_(in->varlen ? a->varlen : NULL, &a->q, &a->k);
  fa_plist l = {p, 0};
  for (int j = 0; j < 4; j++) fa_put_(&l, FA_PARAM_PTR, names[j], (int64_t)devptr(t[j]->data));
  fa_put_(&l, FA_PARAM_PTR, "lse", (int64_t)lse);
  fa_put_(&l, FA_PARAM_PTR, "workspace", (int64_t)ws);
  fa_put_(&l, FA_PARAM_I32, "batch", sz.batch);
  fa_put_(&l, FA_PARAM_I32, "seqlen_q", sz.seqlen_q);
  fa_put_(&l, FA_PARAM_I32, "seqlen_k", sz.seqlen_k);
  for (int j = 0; j < 4; j++)
    for (int d = 0; d < 3; d++) fa_put_(&l, FA_PARAM_I64, strides[j][d], t[j]->stride[d]);
  if (in->varlen) fa_put_varlen_(&l, a->varlen, &a->q, &a->k);
  if (in->dropout > 0) fa_put_dropout_(&l, a->dropout_p, a->seed, a->offset, in->dropout_torch);
  fa_put_inputs_(&l, in->inputs, in->ninputs, a->inputs, a->num_inputs);
  if (in->block_list[0]) {
    fa_block_lists visited = lists ? *lists : fa_visited_lists_(in, a->blocks, sz);
    fa_put_block_lists_(&l, &visited);
  }
  *n = l.n;
  return FA_OK;
}

/* Kernel i of the module launched on the current context, visiting
 * `lists` where it visits block lists. */
static fa_status launch(fa_module *m, int i, const fa_forward_args *a, CUdeviceptr lse,
                        CUdeviceptr ws, const fa_block_lists *lists) {
  const fa_kernel_info *in = &m->kernels[i];
  unsigned grid[3];
  fa_sizes sz = fa_launch_sizes_(a->varlen, &a->q, &a->k);
  fa_forward_grid(in, sz.batch, sz.seqlen_q, grid); /* checked by fa_forward_check */
  fa_param p[FA_BACKWARD_MAX_PARAMS];
  fa_param_values v;
  int n = 0;
  fa_forward_params_(in, a, lse, ws, lists, p, &n);
  fa_param_values_(p, n, &v);
  CUresult r = m->ctx->cu.LaunchKernel(m->fns[i], grid[0], grid[1], grid[2],
                                       (unsigned)in->threads, 1, 1, (unsigned)in->smem_bytes,
                                       (CUstream)a->stream, v.ptr, NULL);
  if (r != CUDA_SUCCESS) {
    char head[256];
    cuda_msg(&m->ctx->cu, head, sizeof head, "cuLaunchKernel", r);
    fa_fmt(m->errmsg, sizeof m->errmsg, "kernel %s, grid %u x %u x %u, block %d, smem %d: %s",
           in->kernel, grid[0], grid[1], grid[2], in->threads, in->smem_bytes, head);
    return FA_ERR_CUDA;
  }
  return FA_OK;
}

fa_status fa_forward(fa_module *mod, const fa_forward_args *args) {
  if (!mod) return FA_ERR_NULL_POINTER;
  fa_status st = fa_forward_check(&mod->info, args, mod->errmsg, sizeof mod->errmsg);
  if (st != FA_OK || (st = fa_blocks_of_module_(mod, args->blocks))) return st;
  int ki = forward_kernel(mod, args);
  if (ki < 0) return FA_ERR_UNSUPPORTED;
  const fa_kernel_info *in = &mod->kernels[ki];
  /* The dropout kernel has tiles (and so a grid) of its own: check it too. */
  if (ki > 0 && (st = fa_forward_check(in, args, mod->errmsg, sizeof mod->errmsg))) return st;
  if (fa_forward_empty_(args)) return FA_OK; /* nothing to compute */
  /* Scratch layout: [LSE rows when the caller wants none][workspace]. The
   * LSE's rows are q's (a varlen launch's: heads x total_q, dim 0 being 1),
   * the workspace's the padded batch's (num_seqs x heads x max_seqlen_q). */
  size_t rows = (size_t)args->q.dim[0] * (size_t)in->heads * (size_t)args->q.dim[1];
  fa_sizes sz = fa_launch_sizes_(args->varlen, &args->q, &args->k);
  size_t ws_rows = (size_t)sz.batch * (size_t)in->heads * (size_t)sz.seqlen_q;
  /* The workspace starts 256-byte aligned so kernels may use vector accesses. */
  size_t lse_bytes = args->lse ? 0 : (rows * sizeof(float) + 255) & ~(size_t)255;
  size_t ws_bytes = ws_rows * (size_t)in->workspace_floats_per_row * sizeof(float);
  fa_context *c = mod->ctx;
  if ((st = push(c, mod->errmsg, sizeof mod->errmsg)) != FA_OK) return st;
  st = fa_varlen_check_device_(mod, in, args->varlen, &args->q, &args->k, args->stream);
  if (st == FA_OK) st = ensure_scratch(mod, lse_bytes + ws_bytes);
  /* The lists the kernel visits: the caller's fa_blocks, or built here
   * (the classifier first on the same stream). */
  fa_block_lists lists = fa_visited_lists_(in, args->blocks, sz);
  if (st == FA_OK && in->block_list[0] && !args->blocks) {
    const char *name = in->block_list;
    fa_blocks_args ba = {sz.batch, sz.seqlen_q, sz.seqlen_k, args->inputs, args->num_inputs,
                         args->stream};
    st = fa_blocks_build_(mod, &name, 1, &ba, &lists);
  }
  if (st == FA_OK) {
    CUdeviceptr lse = args->lse ? devptr(args->lse) : mod->scratch;
    CUdeviceptr ws = ws_bytes ? mod->scratch + lse_bytes : 0;
    st = launch(mod, ki, args, lse, ws, &lists);
  }
  pop(c);
  return st;
}

/* ---- services for decode.c (internal.h) ---------------------------------- */

fa_status fa_module_enter_(fa_module *m) { return push(m->ctx, m->errmsg, sizeof m->errmsg); }

void fa_module_leave_(fa_module *m) { pop(m->ctx); }

uint64_t fa_module_serial_(const fa_module *m) { return m->serial; }

fa_status fa_module_lists_scratch_(fa_module *m, size_t bytes, uint64_t *base) {
  fa_status st = grow(m, &m->lists, &m->lists_bytes, bytes, "block lists scratch");
  *base = (uint64_t)m->lists;
  return st;
}

fa_status fa_module_alloc_(fa_module *m, size_t bytes, uint64_t *addr) {
  CUdeviceptr p = 0;
  fa_status st = alloc(m, bytes, &p, "block lists");
  *addr = (uint64_t)p;
  return st;
}

fa_context *fa_module_context_(fa_module *m) { return m->ctx; }

void fa_context_retain_(fa_context *c) { atomic_fetch_add(&c->refs, 1); }

void fa_context_release_(fa_context *c) { context_unref(c); }

void fa_context_free_mem_(fa_context *c, uint64_t addr) {
  char msg[256];
  if (!addr || push(c, msg, sizeof msg) != FA_OK) return;
  c->cu.MemFree((CUdeviceptr)addr);
  pop(c);
}

fa_status fa_module_scratch_(fa_module *m, size_t bytes, uint64_t *base) {
  fa_status st = ensure_scratch(m, bytes);
  *base = (uint64_t)m->scratch;
  return st;
}

fa_status fa_module_memset_(fa_module *m, uint64_t dst, size_t bytes, void *stream,
                            const char *what) {
  Driver *cu = &m->ctx->cu;
  if (!cu->MemsetD32Async) {
    fa_fmt(m->errmsg, sizeof m->errmsg, "the CUDA driver lacks cuMemsetD32Async, which zeroing "
           "%s needs", what);
    return FA_ERR_CUDA;
  }
  CUresult r = cu->MemsetD32Async((CUdeviceptr)dst, 0, bytes / 4, (CUstream)stream);
  if (r == CUDA_SUCCESS) return FA_OK;
  char head[256];
  cuda_msg(cu, head, sizeof head, "cuMemsetD32Async", r);
  fa_fmt(m->errmsg, sizeof m->errmsg, "zeroing %s (%zu bytes at 0x%llx): %s", what, bytes,
         (unsigned long long)dst, head);
  return FA_ERR_CUDA;
}

fa_status fa_module_copy_i32_(fa_module *m, const int32_t *src, size_t n, void *stream,
                              int32_t *dst, const char *what) {
  Driver *cu = &m->ctx->cu;
  /* The caller may have written the array on its stream just before. */
  CUresult r = cu->StreamSynchronize((CUstream)stream);
  const char *call = "cuStreamSynchronize";
  if (r == CUDA_SUCCESS) {
    r = cu->MemcpyDtoH(dst, devptr(src), n * sizeof *dst);
    call = "cuMemcpyDtoH";
  }
  if (r == CUDA_SUCCESS) return FA_OK;
  char head[256];
  cuda_msg(cu, head, sizeof head, call, r);
  fa_fmt(m->errmsg, sizeof m->errmsg, "reading %s (%zu int32 at 0x%llx) to validate it: %s; pass "
         "its host copy (fa_varlen) to skip this read", what, n, (unsigned long long)devptr(src),
         head);
  return FA_ERR_CUDA;
}

fa_status fa_module_zero_head_(fa_module *m, size_t bytes, void *stream) {
  fa_status st = FA_OK;
  if (m->zero_bytes < bytes)
    st = fa_module_memset_(m, (uint64_t)m->scratch + m->zero_bytes, bytes - m->zero_bytes, stream,
                           "the fused decode kernel's counters");
  /* What follows the head is the launch's workspace and LSE rows: no
   * longer known to be zero. */
  m->zero_bytes = st == FA_OK ? bytes : 0;
  return st;
}

/* Programmatic dependent launch of the combine kernel (docs/decode.md): it
 * may start while the split kernel still runs, its griddepcontrol.wait
 * holding it until the split kernel has finished and its stores are
 * visible; what it saves is the launch gap between the two kernels.
 * Only when the kernel says it waits (metadata combine_pdl 1), the driver
 * has cuLaunchKernelEx, the device is sm_90 or later, and FLASHC_DECODE_PDL
 * is not "0" (an A/B switch). */
static int use_pdl(const fa_module *m) {
  static int env = -1; /* read once: getenv is not free in a launch path */
  if (env < 0) {
    const char *e = getenv("FLASHC_DECODE_PDL");
    env = !(e && strcmp(e, "0") == 0);
  }
  return env && m->info.decode.combine_pdl && m->ctx->cu.LaunchKernelEx && m->ctx->cc_major >= 9;
}

static CUresult launch_pdl(fa_module *m, CUfunction fn, const unsigned grid[3], unsigned block,
                           unsigned smem, void *stream, void **params) {
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg = {grid[0], grid[1], grid[2], block, 1, 1, smem, (CUstream)stream, &attr, 1};
  return m->ctx->cu.LaunchKernelEx(&cfg, fn, params, NULL);
}

/* Launches fn (entry point `name`), programmatically dependent when pdl. */
static fa_status launch_fn(fa_module *m, CUfunction fn, const char *name, int pdl,
                           const unsigned grid[3], unsigned block, unsigned smem, void *stream,
                           void **params) {
  if (!fn) {
    fa_fmt(m->errmsg, sizeof m->errmsg, "kernel %s: the module has no such entry point", name);
    return FA_ERR_INVALID_ARGUMENT;
  }
  CUresult r = CUDA_ERROR_NOT_SUPPORTED;
  if (pdl) r = launch_pdl(m, fn, grid, block, smem, stream, params);
  /* Refused (an old driver, or a stream that cannot take the attribute):
   * the plain launch is always correct, only without the overlap. */
  if (r == CUDA_ERROR_NOT_SUPPORTED)
    r = m->ctx->cu.LaunchKernel(fn, grid[0], grid[1], grid[2], block, 1, 1, smem,
                                (CUstream)stream, params, NULL);
  if (r == CUDA_SUCCESS) return FA_OK;
  char head[256];
  cuda_msg(&m->ctx->cu, head, sizeof head, "cuLaunchKernel", r);
  fa_fmt(m->errmsg, sizeof m->errmsg, "kernel %s, grid %u x %u x %u, block %u, smem %u: %s",
         name, grid[0], grid[1], grid[2], block, smem, head);
  return FA_ERR_CUDA;
}

fa_status fa_module_launch_(fa_module *m, fa_entry which, const unsigned grid[3], unsigned block,
                            unsigned smem, void *stream, void **params) {
  int combine = which == FA_ENTRY_COMBINE;
  CUfunction fn = combine ? m->combine : which == FA_ENTRY_WIDE ? m->wide : m->fn;
  const char *name = combine                  ? m->info.decode.combine_kernel
                     : which == FA_ENTRY_WIDE ? m->info.decode.wide_kernel
                                              : m->info.kernel;
  return launch_fn(m, fn, name, combine && use_pdl(m), grid, block, smem, stream, params);
}

const fa_kernel_info *fa_module_kernels_(const fa_module *m, int *n) {
  *n = m->nkernels;
  return m->kernels;
}

fa_status fa_module_launch_kernel_(fa_module *m, int i, const unsigned grid[3], unsigned block,
                                   unsigned smem, void *stream, void **params) {
  if (i < 0 || i >= m->nkernels) {
    fa_fmt(m->errmsg, sizeof m->errmsg, "kernel index %d: the module has %d kernels", i,
           m->nkernels);
    return FA_ERR_INVALID_ARGUMENT;
  }
  return launch_fn(m, m->fns[i], m->kernels[i].kernel, 0, grid, block, smem, stream, params);
}

int fa_module_sm_count_(const fa_module *m) { return m->ctx->sm_count; }

char *fa_module_msg_(fa_module *m, size_t *len) {
  *len = sizeof m->errmsg;
  return m->errmsg;
}

int *fa_module_last_nsplit_(fa_module *m) { return &m->last_nsplit; }

int fa_decode_last_nsplit(const fa_module *mod) { return mod ? mod->last_nsplit : 0; }

int *fa_module_last_wide_(fa_module *m) { return &m->last_wide; }

const char *fa_decode_last_kernel(const fa_module *mod) {
  if (!mod || mod->last_nsplit == 0) return "";
  return mod->last_wide ? mod->info.decode.wide_kernel : mod->info.kernel;
}
