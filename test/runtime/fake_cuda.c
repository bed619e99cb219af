/* fake_cuda.c - a stand-in for libcuda.so.1 for the runtime's GPU-free lit
 * tests (FLASHC_LIBCUDA=libfake_cuda.so): one device like the H100 (132
 * SMs, 227 KiB of shared memory a block, compute capability 9.0), modules
 * that load whatever text they are given (an entry point of any name),
 * "device memory" from malloc, and launches that run nothing. What the runtime asks of the driver at a
 * launch is printed on stdout, one `fake:` line a call, so a test can check
 * it: the kernel, grid, block and shared memory of each launch, each memset, and
 * every argument of cuTensorMapEncodeTiled (docs/abi.md "Tensor maps"). Built a second
 * time with FAKE_NO_TENSOR_MAPS as libfake_cuda_old.so: a driver older than
 * CUDA 12.0, without the encoder.
 *
 * Only the types' ABI is mirrored (CUresult and enums are int, handles are
 * pointers, CUdeviceptr is 64 bits); cuda.h is not needed.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
enum { OK = 0, ERR_INVALID_VALUE = 1 };

EXPORT CUresult cuInit(unsigned flags) { (void)flags; return OK; }

EXPORT CUresult cuGetErrorName(CUresult r, const char **s) {
  *s = r == OK ? "CUDA_SUCCESS" : "CUDA_ERROR_INVALID_VALUE";
  return OK;
}

EXPORT CUresult cuGetErrorString(CUresult r, const char **s) {
  *s = r == OK ? "no error" : "invalid argument";
  return OK;
}

EXPORT CUresult cuDeviceGetCount(int *n) { *n = 1; return OK; }

EXPORT CUresult cuDeviceGet(int *dev, int ordinal) {
  *dev = ordinal;
  return ordinal == 0 ? OK : ERR_INVALID_VALUE;
}

/* cuda.h's attribute numbers: 16 multiprocessors, 75 / 76 compute
 * capability, 97 opt-in shared memory a block. */
EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
  (void)dev;
  *v = attr == 16 ? 132 : attr == 75 ? 9 : attr == 76 ? 0 : attr == 97 ? 232448 : 0;
  return OK;
}

static int the_context;

EXPORT CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  (void)dev;
  *ctx = &the_context;
  return OK;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int dev) { (void)dev; return OK; }
EXPORT CUresult cuCtxPushCurrent_v2(void *ctx) { (void)ctx; return OK; }

EXPORT CUresult cuCtxPopCurrent_v2(void **ctx) {
  if (ctx)
    *ctx = &the_context;
  return OK;
}

EXPORT CUresult cuCtxSynchronize(void) { return OK; }

static int the_module;

/* Each entry point a handle of its own, which remembers its name: the
 * launch line says which kernel ran. */
enum { MAX_FUNCTIONS = 64, MAX_NAME = 128 };
static char function_names[MAX_FUNCTIONS][MAX_NAME];
static int nfunctions;

EXPORT CUresult cuModuleLoadDataEx(void **mod, const void *image, unsigned n, int *opts,
                                   void **vals) {
  (void)image, (void)n, (void)opts, (void)vals;
  *mod = &the_module;
  return OK;
}

EXPORT CUresult cuModuleUnload(void *mod) { (void)mod; return OK; }

EXPORT CUresult cuModuleGetFunction(void **fn, void *mod, const char *name) {
  (void)mod;
  int i = 0;
  while (i < nfunctions && strcmp(function_names[i], name) != 0)
    i++;
  if (i == nfunctions) {
    if (nfunctions == MAX_FUNCTIONS)
      return ERR_INVALID_VALUE;
    snprintf(function_names[nfunctions++], MAX_NAME, "%s", name);
  }
  *fn = function_names[i];
  return OK;
}

EXPORT CUresult cuFuncSetAttribute(void *fn, int attr, int v) {
  (void)fn, (void)attr, (void)v;
  return OK;
}

/* 0: max threads a block (1024); anything else (static shared memory): 0. */
EXPORT CUresult cuFuncGetAttribute(int *v, int attr, void *fn) {
  (void)fn;
  *v = attr == 0 ? 1024 : 0;
  return OK;
}

EXPORT CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned smem, void *stream,
                               void **params, void **extra) {
  (void)stream, (void)extra;
  printf("fake: launch %s grid %u %u %u block %u %u %u smem %u params %s\n", (const char *)fn, gx,
         gy, gz, bx, by, bz, smem, params ? "given" : "none");
  fflush(stdout);
  return OK;
}

/* cuLaunchKernelEx's CUlaunchConfig and CUlaunchAttribute as cuda.h lays
 * them out (an id, padding to 8 bytes, a 64-byte value union). */
typedef struct LaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int i;
  } value;
} LaunchAttribute;
typedef struct LaunchConfig {
  unsigned gx, gy, gz, bx, by, bz, smem;
  void *stream;
  LaunchAttribute *attrs;
  unsigned nattrs;
} LaunchConfig;

/* As cuLaunchKernel's line, `launch-ex`, with each attribute as ID=VALUE
 * (6 = programmatic stream serialization: the decode combine's PDL). */
EXPORT CUresult cuLaunchKernelEx(const LaunchConfig *c, void *fn, void **params, void **extra) {
  (void)extra;
  printf("fake: launch-ex %s grid %u %u %u block %u %u %u smem %u params %s attrs", (const char *)fn,
         c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->smem, params ? "given" : "none");
  for (unsigned i = 0; i < c->nattrs; i++)
    printf(" %d=%d", c->attrs[i].id, c->attrs[i].value.i);
  printf("\n");
  fflush(stdout);
  return OK;
}

/* Prints the memset; writes nothing (the addresses may be the tests' fake
 * ones). */
EXPORT CUresult cuMemsetD32Async(uint64_t p, unsigned value, size_t n, void *stream) {
  (void)p, (void)stream;
  printf("fake: memset32 value %u count %zu\n", value, n);
  fflush(stdout);
  return OK;
}

EXPORT CUresult cuMemAlloc_v2(uint64_t *p, size_t bytes) {
  void *m = malloc(bytes ? bytes : 1);
  *p = (uint64_t)(uintptr_t)m;
  return m ? OK : ERR_INVALID_VALUE;
}

EXPORT CUresult cuMemFree_v2(uint64_t p) {
  free((void *)(uintptr_t)p);
  return OK;
}

EXPORT CUresult cuStreamSynchronize(void *stream) { (void)stream; return OK; }

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t bytes) {
  memcpy(dst, (const void *)(uintptr_t)src, bytes);
  return OK;
}

#ifndef FAKE_NO_TENSOR_MAPS
/* Prints its arguments; refuses what the real encoder refuses that a
 * runtime bug could produce (docs/hopper-pipeline.md §3): a map not 64-byte
 * aligned, an address not 16-byte aligned, a stride not a multiple of 16
 * or from 2^40, a dim 0, a box over 256 or over 128 bytes of columns with
 * the 128-byte swizzle (3); and everything when FAKE_CUDA_REFUSE_TENSOR_MAPS
 * is set (a driver that refuses a map: the runtime's message). The map is
 * filled with a recognizable byte. */
EXPORT CUresult cuTensorMapEncodeTiled(void *map, int dtype, uint32_t rank, void *addr,
                                       const uint64_t *dims, const uint64_t *strides,
                                       const uint32_t *box, const uint32_t *elem_strides,
                                       int interleave, int swizzle, int l2, int oob) {
  printf("fake: tensormap dtype %d rank %u addr 0x%" PRIxPTR " dims", dtype, rank,
         (uintptr_t)addr);
  for (uint32_t i = 0; i < rank; i++)
    printf("%s%" PRIu64, i ? "," : " ", dims[i]);
  printf(" strides");
  for (uint32_t i = 0; i + 1 < rank; i++)
    printf("%s%" PRIu64, i ? "," : " ", strides[i]);
  printf(" box");
  for (uint32_t i = 0; i < rank; i++)
    printf("%s%u", i ? "," : " ", box[i]);
  printf(" elem");
  for (uint32_t i = 0; i < rank; i++)
    printf("%s%u", i ? "," : " ", elem_strides[i]);
  printf(" interleave %d swizzle %d l2 %d oob %d\n", interleave, swizzle, l2, oob);
  fflush(stdout);
  bool bad = (uintptr_t)map % 64 || (uintptr_t)addr % 16 || rank < 1 || rank > 5 ||
             (swizzle == 3 && box[0] * (dtype == 7 ? 4 : 2) > 128);
  for (uint32_t i = 0; i < rank; i++)
    bad = bad || dims[i] == 0 || box[i] == 0 || box[i] > 256;
  for (uint32_t i = 0; i + 1 < rank; i++)
    bad = bad || strides[i] % 16 || strides[i] >= (UINT64_C(1) << 40);
  if (bad || getenv("FAKE_CUDA_REFUSE_TENSOR_MAPS"))
    return ERR_INVALID_VALUE;
  memset(map, 0x5a, 128);
  return OK;
}
#endif
