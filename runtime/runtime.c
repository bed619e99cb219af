/* runtime.c - contexts and modules through the CUDA driver API: opening the
 * driver, a device's context, loading a module and its entry points
 * (driver.h: the handles' insides; launch.c: device memory and launches).
 *
 * The driver is opened with dlopen at context creation rather than linked,
 * so the library (and every GPU-free part of it: metadata, validation) works
 * on machines without a driver. cuda.h is used for its types only.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

/* ---- the driver's entry points ------------------------------------------ */

static const char *no_handle = "NULL handle";

/* "cuFoo: CUDA_ERROR_BAR (text)" into buf. */
void fa_cuda_msg_(const Driver *cu, char *buf, size_t len, const char *call, CUresult r) {
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
  *(void **)&cu->TensorMapEncodeTiled = dlsym(cu->lib, "cuTensorMapEncodeTiled");
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
    fa_cuda_msg_(cu, err, errlen, "cuInit", r);
    return means_no_device(r) ? FA_ERR_NO_DEVICE : FA_ERR_CUDA;
  }
  int count = 0;
  if ((r = cu->DeviceGetCount(&count)) != CUDA_SUCCESS) {
    fa_cuda_msg_(cu, err, errlen, "cuDeviceGetCount", r);
    return FA_ERR_CUDA;
  }
  if (device >= count) {
    fa_fmt(err, errlen, "device %d does not exist: this machine has %d CUDA device%s", device,
           count, count == 1 ? "" : "s");
    return FA_ERR_NO_DEVICE;
  }
  if ((r = cu->DeviceGet(&c->dev, device)) != CUDA_SUCCESS) {
    fa_cuda_msg_(cu, err, errlen, "cuDeviceGet", r);
    return FA_ERR_CUDA;
  }
  if ((r = cu->PrimaryCtxRetain(&c->ctx, c->dev)) != CUDA_SUCCESS) {
    fa_cuda_msg_(cu, err, errlen, "cuDevicePrimaryCtxRetain", r);
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

void fa_context_retain_(fa_context *c) { atomic_fetch_add(&c->refs, 1); }

void fa_context_release_(fa_context *c) { context_unref(c); }

/* ---- modules ------------------------------------------------------------ */

/* Makes ctx's context current on this thread for the scope of a call. */
fa_status fa_context_push_(fa_context *c, char *msg, size_t len) {
  CUresult r = c->cu.CtxPush(c->ctx);
  if (r == CUDA_SUCCESS) return FA_OK;
  fa_cuda_msg_(&c->cu, msg, len, "cuCtxPushCurrent", r);
  return FA_ERR_CUDA;
}

void fa_context_pop_(fa_context *c) {
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
    fa_cuda_msg_(&c->cu, head, sizeof head, "cuModuleLoadDataEx", r);
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
    fa_cuda_msg_(&c->cu, head, sizeof head, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", r);
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
  if (c && (m->mod || m->scratch || m->lists) &&
      fa_context_push_(c, m->errmsg, sizeof m->errmsg) == FA_OK) {
    if (m->scratch) c->cu.MemFree(m->scratch);
    if (m->lists) c->cu.MemFree(m->lists);
    if (m->mod) c->cu.ModuleUnload(m->mod);
    fa_context_pop_(c);
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
  if ((st = fa_context_push_(ctx, ctx->errmsg, sizeof ctx->errmsg)) != FA_OK) {
    module_release(m);
    return st;
  }
  st = jit_load(ctx, image, m);
  if (st == FA_OK) st = prepare_function(ctx, m);
  fa_context_pop_(ctx);
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
