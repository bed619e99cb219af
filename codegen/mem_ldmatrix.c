/* mem_ldmatrix.c - layer 1: shared memory <-> registers. The lane addresses
 * of ldmatrix in a staged tile, padded or swizzled; a register tile written
 * to shared memory (lw_regs_to_smem) for an operand the tensor cores must
 * read transposed.
 *
 * Padded layout: `byte` is the lane's row address; an offset is a constant.
 * Swizzled layout (lw_swizzled_byte: 128-byte row blocks, chunk c of row r
 * at c ^ (r % 8)): the lane's row r = 8k + r8 and chunk c is 0 or 1. An
 * offset of whole 8-row groups keeps r8; an even chunk offset d keeps c, so
 * chunk (c + d) sits at ((d & 7) | c) ^ r8 = (d & 7) ^ lx with the lane
 * constant lx = c ^ r8 (in 16-byte units): one xor per ldmatrix. */
#include <stdlib.h>

#include "codegen/mem.h"
#include "mlir-c/BuiltinTypes.h"

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

CgVal *lw_regs_to_smem(Lowerer *L, const Op *op, const CgVal *x) {
  CgBuilder *b = &L->b;
  const TileGeom *g = &x->g;
  /* Written before in this block (whose code dominates here): every copy
   * has a buffer of its own, so it still holds x. */
  if (L->smem_copy_of == x && mlirBlockEqual(L->smem_copy_block, b->block))
    return L->smem_copy;
  if (x->kind != CV_TILE || x->splat || g->cls != TC_FULL || g->col_split ||
      (x->type.elem != ELEM_BF16 && x->type.elem != ELEM_F16) || x->type.cols % 8) {
    lw_error(L, op, "only a bf16/f16 register tile of whole rows per warp can go to shared memory");
    return NULL;
  }
  CgVal *s = lw_alloc(L, sizeof *s);
  s->kind = CV_SMEM;
  s->type = x->type;
  s->type.dist = DIST_NONE;
  s->ring = -1;
  s->async_seq = -1;
  /* mma.sync: padded, as warps address the columns at any 8-column block;
   * wgmma reads the swizzled layout only. */
  s->swizzled = L->wgmma;
  if (s->swizzled && x->type.cols % 64) {
    lw_error(L, op, "a register tile for wgmma must be whole 64-column blocks");
    return NULL;
  }
  s->smem_stride = s->swizzled ? x->type.cols : x->type.cols + SMEM_PAD_ELEMS;
  s->smem_off = lw_alloc_smem(L, x->type.rows * s->smem_stride * 2);
  if (L->smem_read_since_barrier) /* other warps may still read the last step's copy */
    lw_barrier(L);
  MlirType et = lw_elem_type(L, x->type.elem);
  MlirType v2 = mlirVectorTypeGet(1, (int64_t[]){2}, et);
  MlirValue ids[2];
  lw_lane_ids_opaque(L, ids);
  for (int mi = 0; mi < g->nm; mi++)
    for (int h = 0; h < 2; h++) {
      MlirValue row = lw_elem_row(L, g, mi, 2 * h);
      for (int ni = 0; ni < g->nn; ni++) {
        MlirValue col = lw_elem_col(L, g, ni, 0), byte;
        if (s->swizzled) {
          MlirValue chunk = cg_arith2(b, "arith.divui", col, cg_const_i32(b, 8));
          MlirValue in_chunk = cg_arith2(b, "arith.remui", col, cg_const_i32(b, 8));
          byte = cg_addi(b, lw_swizzled_byte(L, s, row, chunk), cg_muli_c(b, in_chunk, 2));
        } else {
          byte = cg_muli_c(b, cg_addi(b, cg_muli_c(b, row, s->smem_stride), col), 2);
        }
        MlirValue at = cg_gep(b, L->smem, lw_smem_base(L, s, byte), b->i8);
        MlirValue e2[2] = {lw_elem(L, x, TC_FULL, mi, ni, 2 * h),
                           lw_elem(L, x, TC_FULL, mi, ni, 2 * h + 1)};
        cg_store(b, cg_vector_from(b, e2, 2, v2), at, 4);
      }
    }
  lw_lane_ids_restore(L, ids);
  if (L->wgmma)
    cg_fence_proxy_async(b);
  lw_barrier(L);
  L->smem_copy_of = x;
  L->smem_copy = s;
  L->smem_copy_block = b->block;
  return s;
}

/* A staged tile read into a register tile (`cast` of a ring_get: stage-
 * inputs' bias tile): each thread loads its two adjacent columns (e, e + 1
 * of an n8 accumulator block) as one 32-bit word at their swizzled or
 * padded address, and converts both to the result's type. A warp's 32
 * words of one (m16, n8) position are 8 rows x 16 bytes in distinct
 * 16-byte chunks of the swizzle: no bank conflicts. */
/* The byte offset (i32, within the tile) of element (row, col) of staged
 * tile s, col a multiple of 8 (a 16-byte chunk, whole in either layout). */
static MlirValue staged_chunk_byte(Lowerer *L, const CgVal *s, MlirValue row, MlirValue col) {
  CgBuilder *b = &L->b;
  if (s->swizzled)
    return lw_swizzled_byte(L, s, row, cg_arith2(b, "arith.divui", col, cg_const_i32(b, 8)));
  return cg_muli_c(b, cg_addi(b, cg_muli_c(b, row, s->smem_stride), col), 2);
}

/* The two 16-bit halves of word w as elements of type ft converted to to. */
static void word_halves(Lowerer *L, MlirValue w, MlirType ft, MlirType to, MlirValue *out) {
  CgBuilder *b = &L->b;
  MlirValue half[2] = {w, cg_arith2(b, "arith.shrui", w, cg_const_i32(b, 16))};
  for (int j = 0; j < 2; j++)
    out[j] = cg_float_cast(b, cg_bitcast(b, cg_op1(b, "arith.trunci", &half[j], 1, b->i16, NULL, 0), ft), to);
}

/* `cast {transpose = 1}`: the staged R x C tile s read as the C x R
 * register tile r. An 8 x 8 block of s read by `ldmatrix .trans` lands in
 * the accumulator layout of its transpose (lane l: row l / 4, columns
 * 2 (l % 4) and + 1), so an (m16, n8) position of r is two matrices: s's
 * rows n8.. (r's columns) at its columns m16.. and m16 + 8.. (r's rows).
 * One .x4 takes two such positions: matrix j = l / 8 of lane l at s's row
 * 8 (ni + j / 2) + l % 8, column m16 + 8 (j % 2). */
static void read_staged_transposed(Lowerer *L, const CgVal *s, CgVal *r, const TileGeom *g,
                                   ElemType from) {
  CgBuilder *b = &L->b;
  MlirType ft = lw_elem_type(L, from), to = lw_elem_type(L, r->type.elem);
  MlirValue lane_in = cg_arith2(b, "arith.remui", L->lane, cg_const_i32(b, 8));
  MlirValue j = cg_arith2(b, "arith.divui", L->lane, cg_const_i32(b, 8));
  MlirValue jrow = cg_muli_c(b, cg_arith2(b, "arith.divui", j, cg_const_i32(b, 2)), 8);
  MlirValue jcol = cg_muli_c(b, cg_arith2(b, "arith.remui", j, cg_const_i32(b, 2)), 8);
  MlirValue lane_row = cg_addi(b, lane_in, jrow);
  for (int mi = 0; mi < g->nm; mi++) {
    MlirValue lane_part;
    int c, align;
    MlirValue base = lw_elem_split(L, g, 0, mi, 0, &lane_part, &c, &align);
    MlirValue col = cg_addi(b, cg_addi_c(b, base, c), jcol);
    for (int ni = 0; ni < g->nn; ni += 2) {
      int num = ni + 1 < g->nn ? 4 : 2;
      MlirValue row = cg_addi_c(b, lane_row, 8 * ni);
      MlirValue at = cg_gep(b, L->smem, lw_smem_base(L, s, staged_chunk_byte(L, s, row, col)), b->i8);
      MlirValue w[4];
      cg_ldmatrix(b, at, num, true, w);
      for (int k = 0; k < num; k++) {
        int idx = lw_index_of(g, mi, ni + k / 2, 2 * (k % 2));
        word_halves(L, w[k], ft, to, &r->e[idx]);
      }
    }
  }
}

void lw_read_staged(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  const CgVal *s = lw_get(L, op->operands[0]);
  Type rt = op->results[0]->type;
  ElemType from = op->operands[0]->type.elem;
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return;
  if (g.cls != TC_FULL) {
    lw_error(L, op, "a staged tile is read into a full register tile only");
    return;
  }
  CgVal *r = lw_tile(L, rt, &g);
  if (attr_int(&op->attrs, "transpose", 0) == 1) {
    if (g.col_split || g.group_cols) {
      lw_error(L, op, "a staged tile is read transposed into a tile of whole rows per warp only");
      return;
    }
    read_staged_transposed(L, s, r, &g, from);
    lw_set(L, op->results[0], r);
    return;
  }
  int n = r->ne;
  int *mi = malloc(3 * sizeof(int) * (size_t)(n > 0 ? n : 1));
  if (!mi) {
    lw_error(L, op, "out of memory");
    return;
  }
  int *ni = mi + n, *e = ni + n;
  lw_positions(&g, mi, ni, e);
  MlirType ft = lw_elem_type(L, from), to = lw_elem_type(L, rt.elem);
  for (int k = 0; k + 1 < n; k += 2) {
    MlirValue row = lw_elem_row(L, &g, mi[k], e[k]);
    MlirValue col = lw_elem_col(L, &g, ni[k], e[k]); /* even */
    MlirValue byte =
        s->swizzled
            ? cg_addi(b, lw_swizzled_byte(L, s, row, cg_arith2(b, "arith.divui", col, cg_const_i32(b, 8))),
                      cg_muli_c(b, cg_arith2(b, "arith.remui", col, cg_const_i32(b, 8)), 2))
            : cg_muli_c(b, cg_addi(b, cg_muli_c(b, row, s->smem_stride), col), 2);
    MlirValue word = cg_load(b, cg_gep(b, L->smem, lw_smem_base(L, s, byte), b->i8), b->i32, 4);
    word_halves(L, word, ft, to, &r->e[k]);
  }
  free(mi);
  lw_set(L, op->results[0], r);
}
