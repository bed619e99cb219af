/* compute_matmul.c - layer 2: the matmul dispatcher. Checks the operands
 * and the result's geometry once, waits for the staged operands, starts the
 * accumulator, and hands the product to the kernel's engine: mma.sync
 * (compute_mma_sync.c) or wgmma (compute_wgmma.c, chosen per kernel by
 * lw_wgmma_plan).
 */
#include <string.h>

#include "codegen/compute.h"

static bool plan_matmul(Lowerer *L, const Op *op, const TileGeom *rg, MmaPlan *p) {
  CgBuilder *b = &L->b;
  memset(p, 0, sizeof *p);
  p->a = lw_get(L, op->operands[0]);
  p->bm = lw_get(L, op->operands[1]);
  p->trans_b = attr_int(&op->attrs, "transpose_b", 0) != 0;
  p->trans_a = attr_int(&op->attrs, "transpose_a", 0) != 0;
  p->b_col0 = (int)attr_int(&op->attrs, "b_col0", 0);
  /* A^T in registers (the backward's dS^T): through shared memory, where
   * ldmatrix .trans or wgmma's M-major descriptor reads it as A. */
  if (p->trans_a && p->a->kind == CV_TILE && !(p->a = lw_regs_to_smem(L, op, p->a)))
    return false;
  if (p->bm->kind != CV_SMEM) {
    lw_error(L, op, "the B operand must be a tile loaded from memory");
    return false;
  }
  ElemType be = p->bm->type.elem;
  if (be != ELEM_BF16 && be != ELEM_F16) {
    lw_error(L, op, "tensor-core operands must be bf16 or f16");
    return false;
  }
  p->mt = be == ELEM_BF16 ? CG_MMA_BF16 : CG_MMA_F16;
  int K = p->trans_b ? p->bm->type.cols : p->bm->type.rows;
  int N = p->trans_b ? p->bm->type.rows : p->bm->type.cols;
  if (attr_get(&op->attrs, "b_col0")) { /* a window of B's columns (the verifier checked it) */
    if (p->trans_b || p->b_col0 % 16 || p->b_col0 + rg->cols > N) {
      lw_error(L, op, "a B column window must be whole 16-column steps of an untransposed B");
      return false;
    }
    N = rg->cols;
  }
  if (rg->cls != TC_FULL || rg->cols != N) {
    lw_error(L, op, "result shape does not match B");
    return false;
  }
  p->nm = rg->nm;
  p->nn = rg->nn;
  MlirValue k0;
  bool k_split = false;
  p->a_smem = p->a->kind == CV_SMEM;
  /* group_cols (wgmma only): every group all of K, its share of the
   * columns (compute_wgmma.c) */
  if (rg->groups > 1 && (!p->a_smem || !p->trans_a || p->trans_b || !L->wgmma)) {
    lw_error(L, op, "a group_cols matmul needs wgmma, and A^T and B in shared memory");
    return false;
  }
  if (p->a_smem) {
    int ar = p->trans_a ? p->a->type.cols : p->a->type.rows;
    int ac = p->trans_a ? p->a->type.rows : p->a->type.cols;
    if (ac != K || ar != rg->rows) {
      lw_error(L, op, "A is %d x %d, expected %d x %d", ar, ac, rg->rows, K);
      return false;
    }
    k0 = cg_const_i32(b, 0);
    p->ksteps = K / 16;
  } else {
    const TileGeom *ag = &p->a->g;
    if (p->a->kind != CV_TILE || p->a->splat || ag->cls != TC_FULL || ag->nm != rg->nm ||
        ag->row_split != rg->row_split || ag->nn % 2) {
      lw_error(L, op, "A in registers must hold the result's rows and k in pairs of n8 tiles");
      return false;
    }
    k_split = ag->col_split;
    k0 = k_split ? cg_muli_c(b, L->warp, 8 * ag->nn) : cg_const_i32(b, 0);
    p->ksteps = ag->nn / 2;
    if (!ag->col_split && ag->cols != K) {
      lw_error(L, op, "A has %d columns, B has %d rows", ag->cols, K);
      return false;
    }
  }
  /* K = 8 mod 16 (a head dim of an odd number of 8s): mma.sync ends with
   * an m16n8k8 step, for operands in shared memory. */
  p->ktail = K % 16 == 8 && !L->wgmma && p->a_smem && !p->trans_a && !k_split;
  if (K % 16 && !p->ktail) {
    lw_error(L, op, "the reduction extent %d is not a multiple of 16%s", K,
             K % 8 ? "" : " (8 mod 16 needs mma.sync with both operands in shared memory)");
    return false;
  }
  if (L->wgmma)
    return true; /* no per-lane ldmatrix addresses: compute_wgmma.c */
  return lw_mma_sync_plan(L, op, rg, p, k0, k_split);
}

void lw_matmul(Lowerer *L, const Op *op) {
  Type rt = op->results[0]->type;
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return;
  MmaPlan p;
  if (!plan_matmul(L, op, &g, &p))
    return;
  CgVal *acc = op->noperands > 2 ? lw_get(L, op->operands[2]) : NULL;
  if (acc && acc->kind == CV_TILE && !acc->splat && !lw_compatible(&acc->g, &g)) {
    lw_error(L, op, "the accumulator is distributed differently from the result");
    return;
  }
  lw_smem_ready2(L, p.a_smem ? (CgVal *)p.a : NULL, (CgVal *)p.bm);
  for (int i = 0; i < 2; i++) {
    const CgVal *t = i ? p.bm : (p.a_smem ? p.a : NULL);
    if (t && t->ring >= 0)
      L->rings[t->ring].cur_read = true;
  }
  CgVal *r = lw_tile(L, rt, &g);
  MlirValue zero = cg_const_f32(&L->b, 0.0);
  for (int k = 0; k < r->ne; k++) {
    int mi = k / 4 / g.nn, ni = k / 4 % g.nn, e = k % 4;
    r->e[k] = acc ? lw_elem(L, acc, TC_FULL, mi, ni, e) : zero;
  }
  if (L->wgmma)
    lw_wgmma_matmul(L, op, r, &p, acc != NULL);
  else if (!lw_mma_sync_matmul(L, op, &p, r))
    return;
  L->smem_read_since_barrier = true;
  lw_set(L, op->results[0], r);
}

void lw_mma_wait(Lowerer *L, const Op *op) {
  CgVal *src = lw_get(L, op->operands[0]);
  if (src->kind != CV_TILE || src->splat) {
    lw_error(L, op, "mma_wait: the operand is not a matmul's register tile");
    return;
  }
  if (!src->mma_running) { /* mma.sync: the matmul completed where it was issued */
    lw_set(L, op->results[0], src);
    return;
  }
  CgVal *r = lw_tile(L, op->results[0]->type, &src->g);
  lw_wgmma_wait(L, op, src, r);
  lw_set(L, op->results[0], r);
}
