/* compute_mma_sync.c - layer 2: the mma.sync engine (m16n8k16, sm_80 and
 * up). A and B fragments come from shared memory by ldmatrix
 * (mem_ldmatrix.c), or A from registers (the FA2 trick: two n8 accumulator
 * tiles of P are one k16 A operand); one mma.sync per m16 x n8 x k16.
 */
#include "codegen/compute.h"

/* A fragment for m16 tile mi, k step kk: ldmatrix x4 from shared memory, or
 * the FA2 register trick: two n8 accumulators of P are one k16 A operand. */
static void a_fragment(Lowerer *L, const MmaPlan *p, int mi, int kk, MlirValue *out) {
  if (p->a_smem && p->trans_a) { /* A^T [k][m]: .trans gives A's fragment */
    cg_ldmatrix(&L->b, lw_lane_at(L, p->a, &p->a_lane, kk * 16, mi * 16), 4, true, out);
    return;
  }
  if (p->a_smem) {
    cg_ldmatrix(&L->b, lw_lane_at(L, p->a, &p->a_lane, mi * 16, kk * 16), 4, false, out);
    return;
  }
  lw_a_fragment_regs(L, p->mt, p->a, mi, kk, out);
}

/* B fragments for n8 tiles ni (and ni+1 when pair) at k step kk. */
static void b_fragments(Lowerer *L, const MmaPlan *p, int ni, int kk, bool pair, MlirValue *out) {
  MlirValue at = p->trans_b ? lw_lane_at(L, p->bm, &p->b_lane, ni * 8, kk * 16) /* B^T [n][k] */
                            : lw_lane_at(L, p->bm, &p->b_lane, kk * 16, p->b_col0 + ni * 8);
  cg_ldmatrix(&L->b, at, pair ? 4 : 2, !p->trans_b, out);
}

/* The last 8 of a reduction of 8 mod 16 (plan_matmul: A and B in shared
 * memory, A not transposed): one m16n8k8 per m16 x n8 tile. The lane
 * addresses are the k16 ones at k = 16 * ksteps; the x2 / x1 forms read
 * only the lanes whose x4 address has no +8 column part: A x2 takes lanes
 * 0..15 (rows l % 16, column k0: a0 rows g, a1 rows g + 8); B x1 takes
 * lanes 0..7 (B^T [n][k]: rows n0 + l % 8 at column k0; B [k][n], .trans:
 * rows k0 + l % 8 at column n0). */
static void k8_tail(Lowerer *L, const MmaPlan *p, CgVal *r) {
  int k0 = p->ksteps * 16;
  MlirValue afr[64][2];
  for (int mi = 0; mi < p->nm; mi++)
    cg_ldmatrix(&L->b, lw_lane_at(L, p->a, &p->a_lane, mi * 16, k0), 2, false, afr[mi]);
  for (int ni = 0; ni < p->nn; ni++) {
    MlirValue at = p->trans_b ? lw_lane_at(L, p->bm, &p->b_lane, ni * 8, k0)
                              : lw_lane_at(L, p->bm, &p->b_lane, k0, p->b_col0 + ni * 8);
    MlirValue bfr;
    cg_ldmatrix(&L->b, at, 1, !p->trans_b, &bfr);
    for (int mi = 0; mi < p->nm; mi++) {
      MlirValue *d = &r->e[(mi * p->nn + ni) * 4];
      cg_mma_1688(&L->b, p->mt, afr[mi], &bfr, d, d);
    }
  }
}

/* Lane address parts for ldmatrix (lane l, matrices 0..3 = lanes 8i..8i+7):
 *   A [m][k], x4:            row l%16,                 col 8*(l/16)
 *   A^T [k][m], x4 .trans:    row l%8 + 8*(l/16),      col 8*((l/8)%2)
 *   B^T [n][k], x4 (no .trans): row l%8 + 8*(l/16),      col 8*((l/8)%2)
 *   B [k][n], x4 .trans:      row l%16,                 col 8*(l/16)
 * The x2 forms read lanes 0..15 of the same formulas. Row offsets (a_row0,
 * n0 or k0 as rows) are multiples of 8; a column offset (k0 or n0 as
 * columns) is 0 for a swizzled operand (plan_matmul). */
/* lane % 8 and 8 * ((lane / 8) % 2): the x4 patterns that take 8-row blocks. */
static void lane_rows8(CgBuilder *b, MlirValue lane, MlirValue *l8, MlirValue *mid) {
  *l8 = cg_arith2(b, "arith.remui", lane, cg_const_i32(b, 8));
  *mid = cg_muli_c(b, cg_arith2(b, "arith.remui",
                                cg_arith2(b, "arith.divui", lane, cg_const_i32(b, 8)),
                                cg_const_i32(b, 2)), 8);
}

static void plan_lanes(Lowerer *L, MmaPlan *p, MlirValue a_row0, MlirValue k0, MlirValue n0) {
  CgBuilder *b = &L->b;
  /* Swizzled operands: the lane id through an opaque copy, so that the
   * addresses are made where the matmul is. Else LLVM hoists each
   * ldmatrix's address (a distinct xor'd lane address plus a constant) out
   * of the K/V loop into a register of its own: 144 of them and 1.2 KB of
   * spills in a d256 decode kernel; here the constants fold into the
   * ldmatrix's immediate offset. */
  MlirValue lane = L->lane;
  if (p->bm->swizzled || (p->a_smem && p->a->swizzled))
    cg_ptx(b, "", NULL, "", 0, &lane, 1);
  MlirValue l16 = cg_arith2(b, "arith.remui", lane, cg_const_i32(b, 16));
  MlirValue hi8 = cg_muli_c(b, cg_arith2(b, "arith.divui", lane, cg_const_i32(b, 16)), 8);
  MlirValue l8, mid;
  if (p->a_smem && p->trans_a) { /* A^T [k][m], .trans: as B^T's lanes with k for n */
    lane_rows8(b, lane, &l8, &mid);
    p->a_lane = lw_lane_addr(L, p->a, cg_addi(b, k0, cg_addi(b, l8, hi8)), cg_addi(b, a_row0, mid));
  } else if (p->a_smem) {
    p->a_lane = lw_lane_addr(L, p->a, cg_addi(b, a_row0, l16), cg_addi(b, k0, hi8));
  }
  if (p->trans_b) {
    lane_rows8(b, lane, &l8, &mid);
    p->b_lane = lw_lane_addr(L, p->bm, cg_addi(b, n0, cg_addi(b, l8, hi8)), cg_addi(b, k0, mid));
  } else {
    p->b_lane = lw_lane_addr(L, p->bm, cg_addi(b, k0, l16), cg_addi(b, n0, hi8));
  }
}

bool lw_mma_sync_plan(Lowerer *L, const Op *op, const TileGeom *rg, MmaPlan *p, MlirValue k0,
                      bool k_split) {
  CgBuilder *b = &L->b;
  MlirValue a_row0 =
      rg->row_split ? cg_muli_c(b, lw_group_warp(L, rg), 16 * rg->nm) : cg_const_i32(b, 0);
  MlirValue n0 = rg->col_split ? cg_muli_c(b, L->warp, 8 * rg->nn) : cg_const_i32(b, 0);
  /* A warp's column offset into a swizzled operand would move its chunks
   * across the xor pattern; no schedule splits those columns over warps. */
  if (p->bm->swizzled && (p->trans_b ? k_split : rg->col_split)) {
    lw_error(L, op, "warps splitting the columns of a swizzled shared-memory operand");
    return false;
  }
  if (p->a_smem && p->trans_a && p->a->swizzled && rg->row_split) {
    lw_error(L, op, "warps splitting the columns of a swizzled shared-memory A^T");
    return false;
  }
  plan_lanes(L, p, a_row0, k0, n0);
  return true;
}

bool lw_mma_sync_matmul(Lowerer *L, const Op *op, const MmaPlan *p, CgVal *r) {
  MlirValue afr[64][4];
  if (p->nm > 64) {
    lw_error(L, op, "too many row tiles per warp");
    return false;
  }
  for (int kk = 0; kk < p->ksteps; kk++) {
    for (int mi = 0; mi < p->nm; mi++)
      a_fragment(L, p, mi, kk, afr[mi]);
    for (int ni = 0; ni < p->nn; ni += 2) {
      bool pair = ni + 1 < p->nn;
      MlirValue bfr[4];
      b_fragments(L, p, ni, kk, pair, bfr);
      for (int j = 0; j < (pair ? 2 : 1); j++)
        for (int mi = 0; mi < p->nm; mi++) {
          MlirValue *d = &r->e[(mi * p->nn + ni + j) * 4];
          cg_mma_16816(&L->b, p->mt, afr[mi], &bfr[2 * j], d, d);
        }
    }
  }
  if (p->ktail)
    k8_tail(L, p, r);
  return true;
}
