/* cg_smem.c - layer 0: shared memory. The staged tiles' layouts (padded
 * rows, or the 128-byte swizzle wgmma reads and ldmatrix prefers), the
 * allocation of their buffers, and the two halves of a staged load around
 * its copies (the cp.async groups, waits and barriers are cg_async.c's).
 *
 * Swizzled layout (docs/tile-ir.md, "Staged tiles"): a tile of R rows and C
 * columns (C a multiple of 64) is stored as C/64 column blocks of R rows x
 * 128 bytes; in each row the eight 16-byte chunks are permuted by
 * chunk ^ (row % 8) - the tensor cores' 128-byte swizzle, which also keeps
 * the cp.async writes free of bank conflicts. Buffers are 1024-byte aligned
 * under wgmma (the swizzle is a function of the address bits).
 */
#include "codegen/cg_smem.h"

/* ------------------------------------------------------------- layout */

bool lw_is_staged_type(Type t) {
  return t.kind == TYPE_TILE && t.dist == DIST_NONE && (t.elem == ELEM_BF16 || t.elem == ELEM_F16);
}

/* wgmma reads only the swizzled layout. For ldmatrix it is the choice too
 * whenever rows are whole 128-byte blocks: no bank conflicts, and every row
 * starts 128-byte aligned. With the padded layout every other row starts 16
 * bytes off a 32-byte boundary, and there cp.async fetched the row's global
 * sectors twice from L2 (H100, docs/perf-log.md P20: 1.5x the L2 reads in
 * the decode kernels). */
void lw_staged_layout(Lowerer *L, CgVal *s, Type t) {
  s->swizzled = L->wgmma || t.cols % 64 == 0;
  s->smem_stride = s->swizzled ? t.cols : t.cols + SMEM_PAD_ELEMS;
}

MlirValue lw_smem_base(Lowerer *L, const CgVal *t, MlirValue x) {
  if (!mlirValueIsNull(t->smem_dyn))
    return cg_addi(&L->b, x, t->smem_dyn);
  return cg_addi_c(&L->b, x, t->smem_off);
}

int lw_alloc_smem(Lowerer *L, int bytes) {
  /* wgmma's swizzle is a function of the address: 1024-byte buffers. */
  int align = L->wgmma ? 1024 : 128;
  int top = L->smem_top;
  if (L->scratch_claimed && top < L->scratch_bytes)
    top = L->scratch_bytes; /* not inside the scratch once it is in use */
  int off = (top + align - 1) / align * align;
  L->smem_top = off + bytes;
  return off;
}

int lw_alloc_small(Lowerer *L, int bytes) {
  int block = L->wgmma ? 1024 : 128;
  bytes = (bytes + 7) / 8 * 8;
  if (bytes > L->small_left) {
    int size = bytes > block ? bytes : block;
    L->small_next = lw_alloc_smem(L, size);
    L->small_left = size;
  }
  int off = L->small_next;
  L->small_next += bytes;
  L->small_left -= bytes;
  return off;
}

MlirValue lw_swizzled_byte(Lowerer *L, const CgVal *t, MlirValue row, MlirValue chunk) {
  CgBuilder *b = &L->b;
  MlirValue c8 = cg_const_i32(b, 8);
  MlirValue block = cg_arith2(b, "arith.divui", chunk, c8);
  MlirValue in_row = cg_arith2(b, "arith.xori", cg_arith2(b, "arith.remui", chunk, c8),
                               cg_arith2(b, "arith.remui", row, c8));
  MlirValue off = cg_addi(b, cg_muli_c(b, block, t->type.rows * 128), cg_muli_c(b, row, 128));
  return cg_addi(b, off, cg_muli_c(b, in_row, 16));
}

/* ----------------------------------------------------- staged tiles */

CgVal *lw_stage_begin(Lowerer *L, const Op *op) {
  Type rt = op->results[0]->type;
  CgVal *s = lw_alloc(L, sizeof *s);
  s->kind = CV_SMEM;
  s->type = rt;
  s->ring = -1;
  lw_staged_layout(L, s, rt);
  CarryRing *cp = lw_ring_of_load(L, op);
  if (!mlirValueIsNull(L->put_slot)) {
    /* A ring_put's load (mem_ring.c): its slot, free since its wait. */
    s->smem_off = -1;
    s->smem_dyn = L->put_slot;
  } else if (cp) {
    /* The tile `depth` steps ahead of a pipelined loop: the buffer no body
     * argument holds. Its old contents (the previous step's cur) were read
     * before the barriers of that step: safe once a barrier ran in this
     * step, else the step must end with cur unread since its last barrier
     * (walk.c: lower_region). */
    s->smem_off = -1;
    s->smem_dyn = cg_const_i32(&L->b, cp->buf_sum);
    for (int d = 0; d < cp->depth; d++)
      s->smem_dyn = cg_subi(&L->b, s->smem_dyn, cp->held[d]);
    if (L->epoch == cp->entry_epoch)
      cp->wrote_before_barrier = true;
  } else {
    s->smem_off = lw_alloc_smem(L, rt.rows * s->smem_stride * 2);
    /* Other warps may still read this buffer (previous iteration). */
    if (L->smem_read_since_barrier)
      lw_barrier(L);
  }
  return s;
}

void lw_stage_end(Lowerer *L, const Op *op, CgVal *s) {
  if (!mlirValueIsNull(L->put_slot)) { /* a ring's full barrier tracks the copies */
    s->async_seq = -1;
    lw_set(L, op->results[0], s);
    return;
  }
  CarryRing *cp = lw_ring_of_load(L, op);
  s->async_seq = lw_async_issue(L, cp != NULL);
  lw_set(L, op->results[0], s);
}
