/* mem_ldmatrix.c - layer 1: shared memory -> registers. The lane addresses
 * of ldmatrix in a staged tile, padded or swizzled.
 *
 * Padded layout: `byte` is the lane's row address; an offset is a constant.
 * Swizzled layout (lw_swizzled_byte: 128-byte row blocks, chunk c of row r
 * at c ^ (r % 8)): the lane's row r = 8k + r8 and chunk c is 0 or 1. An
 * offset of whole 8-row groups keeps r8; an even chunk offset d keeps c, so
 * chunk (c + d) sits at ((d & 7) | c) ^ r8 = (d & 7) ^ lx with the lane
 * constant lx = c ^ r8 (in 16-byte units): one xor per ldmatrix. */
#include "codegen/mem.h"

/* The lane address of row `row`, column `col` (elements, a lane-uniform
 * offset included when padded; 0 or 8 when swizzled) of staged tile t. */
LaneAddr lw_lane_addr(Lowerer *L, const CgVal *t, MlirValue row, MlirValue col) {
  CgBuilder *b = &L->b;
  LaneAddr a = {{NULL}, {NULL}};
  if (!t->swizzled) {
    MlirValue el = cg_addi(b, cg_muli_c(b, row, t->smem_stride), col);
    a.byte = lw_smem_base(L, t, cg_muli_c(b, el, 2));
    return a;
  }
  MlirValue c16 = cg_muli_c(b, cg_arith2(b, "arith.divui", col, cg_const_i32(b, 8)), 16);
  MlirValue r16 = cg_muli_c(b, cg_arith2(b, "arith.andi", row, cg_const_i32(b, 7)), 16);
  a.lx = cg_arith2(b, "arith.xori", c16, r16);
  a.byte = lw_smem_base(L, t, cg_muli_c(b, row, 128));
  return a;
}

/* The ldmatrix address of a lane moved by `drow` rows (a multiple of 8) and
 * `dcol` columns (a multiple of 16, or of 8 when the layout is padded). */
MlirValue lw_lane_at(Lowerer *L, const CgVal *t, const LaneAddr *a, int drow, int dcol) {
  CgBuilder *b = &L->b;
  if (!t->swizzled)
    return cg_gep(b, L->smem, cg_addi_c(b, a->byte, (drow * t->smem_stride + dcol) * 2), b->i8);
  int d = dcol / 8;
  MlirValue off = cg_addi_c(b, cg_arith2(b, "arith.xori", a->lx, cg_const_i32(b, (d & 7) * 16)),
                            drow * 128 + (d / 8) * t->type.rows * 128);
  return cg_gep(b, L->smem, cg_addi(b, a->byte, off), b->i8);
}
