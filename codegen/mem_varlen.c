/* mem_varlen.c - layer 1: packed sequences of different lengths
 * (`layout = varlen`, docs/abi.md "Variable-length batches").
 *
 * A varlen kernel is the padded kernel with each block's sequence bound at
 * entry: the batch loop runs on grid z (the walker's default grid, one
 * sequence per block), so the block reads cu_seqlens_q[b], [b+1] and
 * cu_seqlens_k[b], [b+1] once and then
 *   - seqlen_q, seqlen_k become this sequence's lengths: every row extent,
 *     mask, loop bound and grid guard (iv < ceil(seqlen / tile)) of the IR
 *     is per sequence, with no change to the IR;
 *   - the packed tensors' pointers move to the sequence's first row and
 *     their batch strides become 0: q, o, dout, dq by the Q start, k, v,
 *     dk, dv by the K start; the LSE is [heads, total_q] (FlashAttention's
 *     varlen layout);
 *   - workspaces keep the padded layout of the launch's largest sequence
 *     (max_seqlen_q, max_seqlen_k: the kind's seqlen parameters), kept in
 *     L->max_seqlen_q / _k for their strides (mem_rows.c).
 * The offsets are clamped to [0, total] and the lengths to the launch's
 * maxima, so that cu_seqlens the runtime did not check cannot move an
 * access outside the tensors.
 */
#include <string.h>

#include "codegen/mem.h"

bool lw_is_varlen(const Func *f) {
  return strcmp(attr_str(&f->attrs, "layout", "padded"), "varlen") == 0;
}

/* cu[b] as i64 (an i32 load). */
static MlirValue cu_at(CgBuilder *b, MlirValue cu, MlirValue i) {
  MlirValue p = cg_gep(b, cg_addrspacecast(b, cu, b->gptr), i, b->i32);
  return cg_int_cast(b, cg_load(b, p, b->i32, 4), b->i64);
}

/* Sequence bz's first row (clamped to [0, total]) into *start and its
 * length (clamped to [0, max_len]), from the prefix sums cu. */
static MlirValue sequence(CgBuilder *b, MlirValue cu, MlirValue bz, MlirValue total,
                          MlirValue max_len, MlirValue *start) {
  MlirValue zero = cg_const_i64(b, 0);
  MlirValue lo = cu_at(b, cu, bz), hi = cu_at(b, cu, cg_addi_c(b, bz, 1));
  lo = cg_arith2(b, "arith.minsi", cg_arith2(b, "arith.maxsi", lo, zero), total);
  hi = cg_arith2(b, "arith.minsi", cg_arith2(b, "arith.maxsi", hi, lo), total);
  *start = lo;
  return cg_arith2(b, "arith.minsi", cg_subi(b, hi, lo), max_len);
}

/* ptr + rows * row_stride elements of et: the sequence's first row. */
static MlirValue shifted(CgBuilder *b, MlirValue ptr, MlirValue rows, MlirValue row_stride,
                         MlirType et) {
  return cg_gep(b, ptr, cg_muli(b, rows, row_stride), et);
}

/* A tensor of the kind's own (dout, dq, dk, dv): pointer and batch stride
 * rebound, where the kind has it. */
static void shift_own(Lowerer *L, const char *name, const char *sb, const char *ss,
                      MlirValue rows) {
  CgBuilder *b = &L->b;
  MlirValue p = lw_param(L, name, true), s = lw_param(L, ss, false);
  if (mlirValueIsNull(p) || mlirValueIsNull(s))
    return;
  lw_bind_param(L, name, shifted(b, p, rows, s, lw_elem_type(L, L->dtype)), true);
  lw_bind_param(L, sb, cg_const_i64(b, 0), false);
}

void lw_varlen_bind(Lowerer *L) {
  CgBuilder *b = &L->b;
  MlirValue cq = lw_param(L, "cu_seqlens_q", true), ck = lw_param(L, "cu_seqlens_k", true);
  MlirValue tq = lw_param(L, "total_q", false), tk = lw_param(L, "total_k", false);
  if (mlirValueIsNull(cq) || mlirValueIsNull(ck) || mlirValueIsNull(tq) || mlirValueIsNull(tk) ||
      mlirValueIsNull(L->seqlen_q) || mlirValueIsNull(L->seqlen_k)) {
    lw_error(L, NULL, "a varlen kernel needs cu_seqlens_q/k, total_q/k and seqlen_q/k");
    return;
  }
  MlirValue bz = cg_int_cast(b, cg_block_id(b, "z"), b->i64), q0, k0;
  L->max_seqlen_q = L->seqlen_q;
  L->max_seqlen_k = L->seqlen_k;
  L->seqlen_q = sequence(b, cq, bz, tq, L->max_seqlen_q, &q0);
  L->seqlen_k = sequence(b, ck, bz, tk, L->max_seqlen_k, &k0);
  L->total_q = tq;
  /* q, k, v, o: the walker's fields */
  MlirValue *ptr[4] = {&L->p_q, &L->p_k, &L->p_v, &L->p_o};
  MlirValue start[4] = {q0, k0, k0, q0};
  for (int i = 0; i < 4; i++) {
    if (mlirValueIsNull(*ptr[i]) || mlirValueIsNull(L->strides[i][1]))
      continue;
    *ptr[i] = shifted(b, *ptr[i], start[i], L->strides[i][1], lw_elem_type(L, L->dtype));
    L->strides[i][0] = cg_const_i64(b, 0);
  }
  if (!mlirValueIsNull(L->p_lse)) /* [heads, total_q]: row t of head h at h * total_q + t */
    L->p_lse = shifted(b, L->p_lse, q0, cg_const_i64(b, 1), b->f32);
  shift_own(L, "dout", "dout.sb", "dout.ss", q0);
  shift_own(L, "dq", "dq.sb", "dq.ss", q0);
  shift_own(L, "dk", "dk.sb", "dk.ss", k0);
  shift_own(L, "dv", "dv.sb", "dv.ss", k0);
}
