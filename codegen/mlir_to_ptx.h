/* mlir_to_ptx.h - from the MLIR module codegen built to LLVM IR and PTX.
 *
 *   builtin.module { gpu.module { gpu.func ... } }
 *     --MLIR passes (cg_lower_gpu_module)-->  gpu.module holding llvm/nvvm ops
 *     --cg_translate: ops moved into a plain module, mlirTranslateModuleToLLVMIR-->
 *     LLVM IR --LLVM new pass manager, default<O3>--> --NVPTX backend--> PTX
 *
 * Why not gpu-module-to-binary: the same NVPTX backend runs either way, but
 * doing it here gives `-emit=llvm` the exact IR that becomes the PTX, lets us
 * time each stage, and needs no CUDA toolkit lookup inside MLIR (libdevice is
 * never linked: codegen emits no libdevice calls, only NVVM intrinsics).
 */
#ifndef FLASHC_MLIR_TO_PTX_H
#define FLASHC_MLIR_TO_PTX_H

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

/* The MLIR pass pipeline that cg_lower_gpu_module runs (text form). */
extern const char cg_mlir_pipeline[];

/* Runs cg_mlir_pipeline on `module` in place. Errors go to c's diagnostics.
 * Returns 0 on success. */
int cg_lower_gpu_module(CgContext *c, MlirOperation module, CgTimes *times);

/* Translates the (lowered) module's first gpu.module to LLVM IR for
 * nvptx64-nvidia-cuda / chip / features, optimizes it at opt_level (0..3),
 * then appends the optimized LLVM IR text to `llvm_ir` (when non-NULL) and
 * the PTX to `ptx` (when non-NULL). The module's gpu.module is emptied.
 * Returns 0 on success. */
int cg_translate(CgContext *c, MlirOperation module, const char *chip, const char *features,
                 int opt_level, CgStrBuf *llvm_ir, CgStrBuf *ptx, CgTimes *times);

/* Milliseconds from a monotonic clock. */
double cg_now_ms(void);

#endif
