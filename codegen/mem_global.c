/* mem_global.c - layer 1: global memory <-> registers, and the load and
 * store entry of every kernel kind. A register tile is loaded or stored
 * straight from or to the accumulator layout, row by row through a row map
 * (mem_rows.c): a missing row reads 0, and is not written. Tiles for the
 * tensor cores go to shared memory (mem_stage.c).
 */
#include <stdlib.h>

#include "codegen/mem.h"
#include "mlir-c/BuiltinTypes.h"

/* Loads the tile op reads from t straight into the accumulator layout:
 * row_at gives each element's row offset and presence (as for
 * lw_store_rows); a missing row reads 0. A 1 x C tile of a rank 3 tensor
 * (the backward's per-query LSE and D along a transposed score tile) reads
 * row row0 + c for its column c. */
void lw_load_rows(Lowerer *L, const Op *op, const TensorRef *t, LwRowAt row_at, void *ctx) {
  CgBuilder *b = &L->b;
  Type rt = op->results[0]->type;
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return;
  CgVal *r = lw_tile(L, rt, &g);
  int *mi = malloc(3 * sizeof(int) * (size_t)(r->ne > 0 ? r->ne : 1));
  if (!mi) {
    lw_error(L, op, "out of memory");
    return;
  }
  int *ni = mi + r->ne, *e = ni + r->ne;
  lw_positions(&g, mi, ni, e);
  MlirValue zero = cg_const_float(b, t->et, 0.0);
  /* A 1 x C tile of a rank 3 tensor holds positions along its columns:
   * element c is the tensor's row row0 + c. */
  bool along_cols = t->cols == 1 && g.cls == TC_COLV;
  for (int k = 0; k < r->ne; k++) {
    MlirValue off, ok;
    if (along_cols) {
      row_at(L, ctx, lw_elem_col(L, &g, ni[k], e[k]), &off, &ok);
    } else {
      row_at(L, ctx, lw_elem_row(L, &g, mi[k], e[k]), &off, &ok);
      if (g.cls == TC_FULL || g.cls == TC_COLV)
        off = cg_addi(b, off, cg_int_cast(b, lw_elem_col(L, &g, ni[k], e[k]), b->i64));
    }
    MlirValue v = cg_load(b, cg_gep(b, t->base, off, t->et), t->et, t->elem == ELEM_F32 ? 4 : 2);
    r->e[k] = cg_float_cast(b, cg_select(b, ok, v, zero), lw_elem_type(L, rt.elem));
  }
  free(mi);
  lw_set(L, op->results[0], r);
}

/* One row (mi, h) of a thread's share added into f32 tensor t: one
 * red.global.add per element (the backward's dQ, which the blocks of every
 * K/V tile add into; the order of the adds is the hardware's). */
static void add_row(Lowerer *L, const TensorRef *t, const CgVal *x, MlirValue off, int mi, int h) {
  CgBuilder *b = &L->b;
  const TileGeom *g = &x->g;
  for (int ni = 0; ni < g->nn; ni++)
    for (int j = 0; j < 2; j++) {
      MlirValue v = cg_float_cast(b, lw_elem(L, x, TC_FULL, mi, ni, 2 * h + j), b->f32);
      MlirValue col = cg_int_cast(b, lw_elem_col(L, g, ni, j), b->i64);
      MlirValue args[2] = {cg_gep(b, t->base, cg_addi(b, off, col), t->et), v};
      cg_ptx(b, "red.global.add.f32 [$0], $1;", args, "l,f", 2, NULL, 0);
    }
}

/* One row (mi, h) of a thread's share: the n8 fragments' two adjacent
 * elements are stored together. */
static void store_row(Lowerer *L, const TensorRef *t, const CgVal *x, MlirValue off, int mi, int h) {
  CgBuilder *b = &L->b;
  const TileGeom *g = &x->g;
  if (L->store_add) {
    add_row(L, t, x, off, mi, h);
    return;
  }
  if (g->cls == TC_ROWV || g->cls == TC_ONE) {
    MlirValue v = cg_float_cast(b, lw_elem(L, x, g->cls, mi, 0, 2 * h), t->et);
    cg_store(b, v, cg_gep(b, t->base, off, t->et), t->elem == ELEM_F32 ? 4 : 2);
    return;
  }
  MlirType v2 = mlirVectorTypeGet(1, (int64_t[]){2}, t->et);
  int align = t->elem == ELEM_F32 ? 8 : 4;
  for (int ni = 0; ni < g->nn; ni++) {
    MlirValue e2[2] = {cg_float_cast(b, lw_elem(L, x, TC_FULL, mi, ni, 2 * h), t->et),
                       cg_float_cast(b, lw_elem(L, x, TC_FULL, mi, ni, 2 * h + 1), t->et)};
    MlirValue col = cg_int_cast(b, lw_elem_col(L, g, ni, 0), b->i64);
    MlirValue p = cg_gep(b, t->base, cg_addi(b, off, col), t->et);
    cg_store(b, cg_vector_from(b, e2, 2, v2), p, align);
  }
}

/* The tile a store writes (operand 4) checked against a tensor of `cols`
 * columns, and *only: the predicate that keeps one copy of replicated data
 * (lane q = 0 of a quad for row vectors, warp 0 when every warp holds the
 * whole tile). NULL after an error. */
static const CgVal *store_begin(Lowerer *L, const Op *op, int cols, MlirValue *only) {
  CgBuilder *b = &L->b;
  CgVal *x = lw_get(L, op->operands[4]);
  if (x->kind != CV_TILE) {
    lw_error(L, op, "only register tiles can be stored");
    return NULL;
  }
  const TileGeom *g = &x->g;
  if ((g->cls == TC_FULL) != (cols > 1) || (g->cls == TC_FULL && g->cols != cols && !g->col_split)) {
    lw_error(L, op, "tile shape does not match the tensor");
    return NULL;
  }
  *only = cg_const_int(b, b->i1, 1);
  if (g->cls == TC_ROWV || g->cls == TC_ONE)
    *only = cg_cmpi(b, "eq", L->lq, cg_const_i32(b, 0));
  if (!g->row_split && !g->col_split && L->warps > 1)
    *only = cg_arith2(b, "arith.andi", *only, cg_cmpi(b, "eq", L->warp, cg_const_i32(b, 0)));
  return x;
}

/* Stores the tile of op (operand 4) into t row by row: row_at gives the
 * element offset of the thread's row r of the tile (an i32 from
 * lw_elem_row) and whether that row exists; replicated copies are skipped. */
void lw_store_rows(Lowerer *L, const Op *op, const TensorRef *t, LwRowAt row_at, void *ctx) {
  CgBuilder *b = &L->b;
  MlirValue only;
  const CgVal *x = store_begin(L, op, t->cols, &only);
  if (!x)
    return;
  const TileGeom *g = &x->g;
  int nm = g->cls == TC_ONE ? 1 : g->nm, nh = g->cls == TC_ONE ? 1 : 2;
  for (int mi = 0; mi < nm; mi++)
    for (int h = 0; h < nh; h++) {
      MlirValue rr = g->cls == TC_ONE ? cg_const_i32(b, 0) : lw_elem_row(L, g, mi, 2 * h);
      MlirValue off, ok;
      row_at(L, ctx, rr, &off, &ok);
      MlirBlock then_block, outer = b->block;
      cg_if(b, cg_arith2(b, "arith.andi", only, ok), NULL, 0, false, &then_block, NULL);
      cg_builder_set_block(b, then_block);
      store_row(L, t, x, off, mi, h);
      cg_yield(b, NULL, 0);
      cg_builder_set_block(b, outer);
    }
}

/* ------------------------------------------------------------ entries */

static void rows_load_at(Lowerer *L, void *ctx, MlirValue r, MlirValue *off, MlirValue *ok) {
  lw_row_at(L, ctx, r, false, off, ok);
}

static void rows_store_at(Lowerer *L, void *ctx, MlirValue r, MlirValue *off, MlirValue *ok) {
  lw_row_at(L, ctx, r, true, off, ok);
}

/* A 1 x C tile of a rank 3 tensor (positions along the columns). */
static bool along_cols(const Op *op, Type tile) {
  return op->operands[0]->type.rank == 3 && tile.rows == 1 && tile.cols != 1;
}

void lw_load(Lowerer *L, const Op *op, Rows *m) {
  Type rt = op->results[0]->type;
  if (rt.kind != TYPE_TILE) {
    lw_error(L, op, "the result must be a tile");
    return;
  }
  if (along_cols(op, rt) && lw_is_staged_type(rt)) {
    lw_error(L, op, "a 1 x C load of a rank 3 tensor must be a register tile");
    return;
  }
  if (!lw_is_staged_type(rt)) {
    lw_load_rows(L, op, &m->t, rows_load_at, m);
    return;
  }
  if (rt.cols % 8 || rt.cols != m->t.cols || (m->t.elem != ELEM_BF16 && m->t.elem != ELEM_F16)) {
    lw_error(L, op, "a tile staged for the tensor cores must be whole f16/bf16 rows, 8-aligned");
    return;
  }
  CgVal *s = lw_stage_begin(L, op);
  lw_stage_rows(L, m, s);
  lw_stage_end(L, op, s);
}

void lw_store(Lowerer *L, const Op *op, Rows *m) {
  if (along_cols(op, op->operands[4]->type)) {
    lw_error(L, op, "1 x C stores of rank 3 tensors are not supported");
    return;
  }
  bool add = attr_get(&op->attrs, "reduce") != NULL;
  if (add && (m->t.elem != ELEM_F32 || lw_get(L, op->operands[4])->g.cls != TC_FULL)) {
    lw_error(L, op, "a store with reduce = add needs a full f32 register tile and tensor");
    return;
  }
  L->store_add = add;
  lw_store_rows(L, op, &m->t, rows_store_at, m);
  L->store_add = false;
}

void lw_load_scalar(Lowerer *L, const Op *op, MlirValue p) {
  CgBuilder *b = &L->b;
  const Value *t = op->operands[0];
  MlirValue i = lw_scalar_operand(L, op, 1);
  if (L->failed)
    return;
  if (mlirValueIsNull(p) || t->type.elem != ELEM_I32 || t->type.rank != 1) {
    lw_error(L, op, "reads only the kernel's rank 1 i32 tensors (cache_seqlens)");
    return;
  }
  MlirValue g = cg_gep(b, cg_addrspacecast(b, p, b->gptr), i, b->i32);
  MlirValue v = cg_int_cast(b, cg_load(b, g, b->i32, 4), b->i64);
  lw_set(L, op->results[0], lw_scalar(L, op->results[0]->type, v));
}
