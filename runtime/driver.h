/* driver.h - the CUDA driver's entry points and the insides of the context
 * and module handles, shared by runtime.c (the driver, contexts, module
 * loading) and launch.c (device memory, launches, the services for
 * decode.c and blocks.c). Needs cuda.h: the runtime's sources only, never
 * its public header.
 */
#ifndef FLASHC_RUNTIME_DRIVER_H
#define FLASHC_RUNTIME_DRIVER_H

#include <cuda.h>
#include <stdatomic.h>

#include "internal.h"

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
  /* Optional (CUDA 12.0+): the tensor maps of kernels that copy K and V
   * with TMA (metadata tma); without it those launches are refused. */
  CUresult (*TensorMapEncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                   const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                   const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
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

/* "cuFoo: CUDA_ERROR_BAR (text)" into buf. */
void fa_cuda_msg_(const Driver *cu, char *buf, size_t len, const char *call, CUresult r);
/* Makes ctx's context current on this thread for the scope of a call. */
fa_status fa_context_push_(fa_context *c, char *msg, size_t len);
void fa_context_pop_(fa_context *c);

#endif
