/* mlir_to_ptx.h - from the MLIR module codegen built to LLVM IR and PTX.
 *
 *   builtin.module { gpu.module { gpu.func ... } }
 *     --cg_lower_gpu_module: MLIR passes, ops moved out of gpu.module-->
 *   builtin.module { llvm.func @kernel ... }  (llvm + nvvm dialects)
 *     --cg_translate: mlirTranslateModuleToLLVMIR--> LLVM IR
 *     --LLVM new pass manager, default<O3>--> --NVPTX backend--> PTX
 *
 * Why not gpu-module-to-binary: the same NVPTX backend runs either way, but
 * doing it here gives `-emit=llvm` the exact IR that becomes the PTX, lets us
 * time each stage, and needs no CUDA toolkit lookup inside MLIR (libdevice is
 * never linked: codegen emits no libdevice calls, only NVVM intrinsics).
 */
#ifndef FLASHC_MLIR_TO_PTX_H
#define FLASHC_MLIR_TO_PTX_H

#include <stdbool.h>

#include "codegen/cg_context.h"
#include "codegen/cg_strbuf.h"
#include "mlir-c/IR.h"

/* Milliseconds spent in each stage (for `flashc --stats`). */
typedef struct CgTimes {
  double build;        /* tile IR -> MLIR (codegen proper) */
  double mlir_passes;  /* MLIR pass pipeline to the llvm/nvvm dialects */
  double translate;    /* MLIR llvm dialect -> LLVM IR */
  double llvm_opt;     /* LLVM optimization pipeline */
  double llvm_codegen; /* NVPTX backend -> PTX */
  double ptxas;        /* ptxas -> cubin (when run) */
} CgTimes;

/* The MLIR pass pipelines (text form): the first runs on the gpu.module,
 * the second on the device module cut out of it. */
extern const char cg_mlir_pipeline[];
extern const char cg_mlir_pipeline2[];

/* Lowers `module` (builtin.module holding one gpu.module) to the llvm/nvvm
 * dialects: runs cg_mlir_pipeline, moves the gpu.module's ops into a new
 * builtin.module *device (the caller destroys it), runs cg_mlir_pipeline2
 * there. `module` keeps an empty gpu.module. Errors go to c's diagnostics.
 * Returns 0 on success. */
int cg_lower_gpu_module(CgContext *c, MlirOperation module, MlirModule *device,
                        CgTimes *times);

/* Translates the device module to LLVM IR for nvptx64-nvidia-cuda / chip /
 * features, optimizes it at opt_level (0..3), then appends the optimized
 * LLVM IR text to `llvm_ir` (when non-NULL) and the PTX to `ptx` (when
 * non-NULL). short_shared_ptr: shared-memory pointers are 32-bit (as nvcc
 * makes them) instead of 64-bit. Returns 0 on success. */
int cg_translate(CgContext *c, MlirModule device, const char *chip, const char *features,
                 int opt_level, bool short_shared_ptr, CgStrBuf *llvm_ir, CgStrBuf *ptx,
                 CgTimes *times);

/* Milliseconds from a monotonic clock. */
double cg_now_ms(void);

#endif
