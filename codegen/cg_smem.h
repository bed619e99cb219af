/* cg_smem.h - layer 0: shared-memory layout and swizzle, buffers, staged
 * loads (cg_smem.c); on top of the async state (cg_async.h). */
#ifndef FLASHC_CG_SMEM_H
#define FLASHC_CG_SMEM_H

#include "codegen/cg_async.h"

/* True for tile types codegen keeps in shared memory (loads for the MMA). */
bool lw_is_staged_type(Type t);
/* Chooses a staged tile's shared-memory layout (swizzled, smem_stride). */
void lw_staged_layout(Lowerer *L, CgVal *s, Type t);
/* Byte offset (i32) x + the tile's buffer start. */
MlirValue lw_smem_base(Lowerer *L, const CgVal *t, MlirValue x);
int lw_alloc_smem(Lowerer *L, int bytes);
/* Bytes (8-byte aligned) for mbarriers, packed into shared blocks of the
 * tiles' alignment instead of a block each (four rings' barriers beside a
 * bias ring's tiles at d128 are what decides whether they fit in 227 KB). */
int lw_alloc_small(Lowerer *L, int bytes);
/* Byte offset (i32) of 16-byte chunk `chunk` of row `row` in a swizzled
 * tile, from the tile's start. */
MlirValue lw_swizzled_byte(Lowerer *L, const CgVal *t, MlirValue row, MlirValue chunk);


/* A load staged for the tensor cores, in two halves around the copy: the
 * buffer (for a pipelined loop's load of a tile ahead, the ring's free
 * buffer), then the cp.async group's bookkeeping once the copies are issued
 * and committed. */
CgVal *lw_stage_begin(Lowerer *L, const Op *op);
void lw_stage_end(Lowerer *L, const Op *op, CgVal *s);

#endif
