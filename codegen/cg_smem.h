/* cg_smem.h - layer 0: shared-memory layout and swizzle, buffers, cp.async
 * groups, barriers and pipelined rings (cg_smem.c). */
#ifndef FLASHC_CG_SMEM_H
#define FLASHC_CG_SMEM_H

#include "codegen/cg_lowerer.h"

/* True for tile types codegen keeps in shared memory (loads for the MMA). */
bool lw_is_staged_type(Type t);
/* Chooses a staged tile's shared-memory layout (swizzled, smem_stride). */
void lw_staged_layout(Lowerer *L, CgVal *s, Type t);
/* Byte offset (i32) x + the tile's buffer start. */
MlirValue lw_smem_base(Lowerer *L, const CgVal *t, MlirValue x);
int lw_alloc_smem(Lowerer *L, int bytes);
/* Byte offset (i32) of 16-byte chunk `chunk` of row `row` in a swizzled
 * tile, from the tile's start. */
MlirValue lw_swizzled_byte(Lowerer *L, const CgVal *t, MlirValue row, MlirValue chunk);

void lw_barrier(Lowerer *L);
/* Makes sure a staged tile's cp.async group has landed and is visible. */
void lw_smem_ready(Lowerer *L, CgVal *t);
/* Waits for both (either may be NULL) with one wait and one barrier. */
void lw_smem_ready2(Lowerer *L, CgVal *a, CgVal *b);
/* Waits for group seq (and older ones) when it is pending. */
void lw_wait_for_seq(Lowerer *L, int seq);
/* Waits for every group issued after `mark` (region exit). */
void lw_flush_async(Lowerer *L, int mark);
/* Waits for every cp.async of this thread (carried prefetches too). */
void lw_wait_all_async(Lowerer *L);

/* A load staged for the tensor cores, in two halves around the copy: the
 * buffer (for a pipelined loop's load of a tile ahead, the ring's free
 * buffer), then the cp.async group's bookkeeping once the copies are issued
 * and committed. */
CgVal *lw_stage_begin(Lowerer *L, const Op *op);
void lw_stage_end(Lowerer *L, const Op *op, CgVal *s);
/* The ring of the current pipelined loops whose next tile `op` loads, or NULL. */
CarryRing *lw_ring_of_load(Lowerer *L, const Op *op);

#endif
