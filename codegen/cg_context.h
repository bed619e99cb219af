/* cg_context.h - the one owner of flashc's MlirContext.
 *
 * A CgContext holds an MLIR context with only the dialects codegen uses
 * loaded (func, gpu, nvvm, nvgpu, scf, arith, math, memref, vector, llvm, cf),
 * the LLVM IR translations registered, and a diagnostic handler that collects
 * MLIR's errors as `file:line:col: error: message` lines. Codegen creates
 * every op with the tile IR's source location (mlirLocationFileLineColGet),
 * so a message from any MLIR pass points into the user's spec.
 *
 * cg_context_create / cg_context_destroy come in pairs; a context is used by
 * one thread at a time.
 */
#ifndef FLASHC_CG_CONTEXT_H
#define FLASHC_CG_CONTEXT_H

#include <stdio.h>

#include "mlir-c/IR.h"

typedef struct CgContext CgContext;

/* A kernel's (gpu.func) attribute: the indices (dense i32 array) of its
 * tensor-map arguments, which cg_lower_gpu_module turns into 128-byte byval
 * grid constants once the kernel is an llvm.func (MLIR's gpu-to-nvvm
 * conversion drops byval and refuses nvvm.grid_constant on a gpu.func). */
#define CG_TENSOR_MAPS_ATTR "flashc.tensor_maps"

/* Returns NULL only when out of memory. */
CgContext *cg_context_create(void);
void cg_context_destroy(CgContext *c); /* NULL is harmless */

MlirContext cg_context_mlir(CgContext *c);

/* Diagnostics MLIR reported since the last clear, one per line, each as
 * `file:line:col: error: message` (notes follow as `...: note: ...`).
 * Never NULL; "" when none. */
const char *cg_context_diagnostics(const CgContext *c);
int cg_context_error_count(const CgContext *c);
void cg_context_clear_diagnostics(CgContext *c);

/* Also echo each diagnostic to `out` as it arrives (NULL: collect only). */
void cg_context_set_echo(CgContext *c, FILE *out);

/* Appends a message of our own to the diagnostics (and echo), formatted like
 * MLIR's, at `loc`. Used for errors codegen itself detects. */
void cg_context_error(CgContext *c, MlirLocation loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
