/* mem_global.c - layer 1: global memory <-> registers, and the load and
 * store entry of every kernel kind. A register tile is loaded or stored
 * straight from or to the accumulator layout, row by row through a row map
 * (mem_rows.c): a missing row reads 0, and is not written. Tiles for the
 * tensor cores go to shared memory (mem_stage.c); stores that go out
 * through shared memory and the TMA unit are mem_bulk.c's, and which row
 * vectors a load holds across the lanes mem_lanes.c decides.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/mem.h"
#include "mlir-c/BuiltinTypes.h"

/* Loads the tile op reads from t straight into the accumulator layout:
 * row_at gives each element's row offset and presence (as for
 * lw_store_rows); a missing row reads 0. A 1 x C tile of a rank 3 tensor
 * (the backward's per-query LSE and D along a transposed score tile) reads
 * row row0 + c for its column c; lane_held (lw_lane_held_load): its
 * columns as lanes hold them instead. */
static CgVal *rows_tile(Lowerer *L, const Op *op, const TensorRef *t, LwRowAt row_at, void *ctx,
                        bool lane_held) {
  CgBuilder *b = &L->b;
  Type rt = op->results[0]->type;
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return NULL;
  CgVal *r = lw_tile(L, rt, &g);
  if (lane_held) {
    /* slot s of lane l: column 64 (s / 2) + 2 l + s % 2 */
    r->lanes = r->ne = g.cols / 32;
    MlirValue zero = cg_const_float(b, t->et, 0.0), l2 = cg_muli_c(b, L->lane, 2);
    for (int k = 0; k < r->lanes; k++) {
      MlirValue off, ok, col = cg_addi(b, l2, cg_const_i32(b, 64 * (k / 2) + (k & 1)));
      row_at(L, ctx, col, &off, &ok);
      MlirValue v = cg_load(b, cg_gep(b, t->base, off, t->et), t->et, 4);
      r->e[k] = cg_select(b, ok, v, zero);
    }
    return r;
  }
  int *mi = malloc(3 * sizeof(int) * (size_t)(r->ne > 0 ? r->ne : 1));
  if (!mi) {
    lw_error(L, op, "out of memory");
    return NULL;
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
  return r;
}

void lw_load_rows(Lowerer *L, const Op *op, const TensorRef *t, LwRowAt row_at, void *ctx) {
  CgVal *r = rows_tile(L, op, t, row_at, ctx, lw_lane_held_load(L, op->results[0]));
  if (r)
    lw_set(L, op->results[0], r);
}

/* One row (mi, h) of a thread's share added into f32 tensor t: one
 * red.global.add per element (the backward's dQ, which the blocks of every
 * K/V tile add into; the order of the adds is the hardware's). sm_80. */
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

void lw_window_row_at(Lowerer *L, LwRowAt row_at, void *ctx, MlirValue r, int col0,
                      MlirValue *off, MlirValue *ok) {
  row_at(L, ctx, r, off, ok);
  if (col0)
    *off = cg_addi(&L->b, *off, cg_const_i64(&L->b, col0));
}

/* m16 tile mi of a thread's share added into f32 tensor t four columns at a
 * time (sm_90's red.global.add.v4.f32: a quarter of the atomic operations,
 * which bound the backward's dQ). In an n8 fragment lane pair (q, q^1)
 * holds columns 2q..2q+3 of rows r and r+8; one exchange gives the even
 * lane row r's four and the odd lane row r+8's. The shuffles run on every
 * lane, before the per-row branch. */
static void add_rows_v4(Lowerer *L, const TensorRef *t, const CgVal *x, int mi, int col0,
                        LwRowAt row_at, void *ctx) {
  CgBuilder *b = &L->b;
  const TileGeom *g = &x->g;
  MlirValue ids[2];
  lw_lane_ids_opaque(L, ids);
  MlirValue odd = cg_cmpi(b, "ne", cg_arith2(b, "arith.andi", L->lq, cg_const_i32(b, 1)),
                          cg_const_i32(b, 0));
  MlirValue (*v)[4] = lw_alloc(L, sizeof *v * (size_t)g->nn);
  for (int ni = 0; ni < g->nn; ni++) {
    MlirValue a[2], c[2];
    for (int j = 0; j < 2; j++) {
      a[j] = cg_float_cast(b, lw_elem(L, x, TC_FULL, mi, ni, j), b->f32);
      c[j] = cg_float_cast(b, lw_elem(L, x, TC_FULL, mi, ni, 2 + j), b->f32);
    }
    for (int j = 0; j < 2; j++) {
      /* even lanes send row r+8's pair, odd lanes row r's */
      MlirValue got = cg_shuffle_xor(b, cg_select(b, odd, a[j], c[j]), 1);
      v[ni][j] = cg_select(b, odd, got, a[j]);
      v[ni][2 + j] = cg_select(b, odd, c[j], got);
    }
  }
  MlirValue row = cg_select(b, odd, lw_elem_row(L, g, mi, 2), lw_elem_row(L, g, mi, 0));
  MlirValue off, ok;
  lw_window_row_at(L, row_at, ctx, row, col0, &off, &ok);
  MlirBlock then_block, outer = b->block;
  cg_if(b, ok, NULL, 0, false, &then_block, NULL);
  cg_builder_set_block(b, then_block);
  MlirValue back2 = cg_select(b, odd, cg_const_i32(b, 2), cg_const_i32(b, 0));
  for (int ni = 0; ni < g->nn; ni++) {
    MlirValue col = cg_int_cast(b, cg_subi(b, lw_elem_col(L, g, ni, 0), back2), b->i64);
    MlirValue args[5] = {cg_gep(b, t->base, cg_addi(b, off, col), t->et), v[ni][0], v[ni][1],
                         v[ni][2], v[ni][3]};
    cg_ptx(b, "red.global.add.v4.f32 [$0], {$1, $2, $3, $4};", args, "l,f,f,f,f", 5, NULL, 0);
  }
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
  lw_lane_ids_restore(L, ids);
}

/* One row (mi, h) of a thread's share: the n8 fragments' two adjacent
 * elements are stored together. */
static void store_row(Lowerer *L, const TensorRef *t, const CgVal *x, MlirValue off, int mi, int h) {
  CgBuilder *b = &L->b;
  const TileGeom *g = &x->g;
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

enum { MAX_STORE_PAIRS = 64 }; /* n8 fragment pairs a lane's row (256 columns: 16) */

/* Can the 16-bit tile x be stored four columns a lane (store_rows_paired)?
 * Whole fragments of an even count, the window's first column a multiple of
 * 8 (8-byte aligned: rows start 16-byte aligned, runtime/tensor_check.c). */
static bool pair_storable(const TensorRef *t, const TileGeom *g, int col0) {
  return (t->elem == ELEM_BF16 || t->elem == ELEM_F16) && g->cls == TC_FULL && !g->group_cols &&
         g->nn % 2 == 0 && g->nn <= 2 * MAX_STORE_PAIRS && col0 % 8 == 0;
}

/* The 16-bit tile x stored into t row by row, eight bytes a lane: in each
 * pair of n8 fragments, lanes q and q ^ 1 of a quad swap one bf16x2 (the even
 * lane sends its pair of the second fragment, the odd lane its pair of the
 * first), so that each lane holds four adjacent columns and a quad a row's
 * 32 contiguous bytes: one whole sector a row a warp store, half the stores
 * of store_row's 4 bytes a lane (16 bytes of each 32-byte sector): d256's
 * forward +6-17% up to 4k rows (perf-log P120). The swaps run on every
 * lane before the rows' predicates (a shuffle needs the whole warp). */
static void store_rows_paired(Lowerer *L, const TensorRef *t, const CgVal *x, MlirValue only,
                              int col0, LwRowAt row_at, void *ctx) {
  CgBuilder *b = &L->b;
  const TileGeom *g = &x->g;
  MlirType v2 = mlirVectorTypeGet(1, (int64_t[]){2}, t->et), i32 = b->i32;
  MlirType v2i = mlirVectorTypeGet(1, (int64_t[]){2}, i32);
  MlirValue odd = cg_cmpi(b, "ne", cg_arith2(b, "arith.andi", L->lq, cg_const_i32(b, 1)),
                          cg_const_i32(b, 0));
  for (int mi = 0; mi < g->nm; mi++)
    for (int h = 0; h < 2; h++) {
      int np = g->nn / 2;
      MlirValue out[MAX_STORE_PAIRS][2], col[MAX_STORE_PAIRS];
      for (int p = 0; p < np; p++) {
        MlirValue w[2];
        for (int f = 0; f < 2; f++) {
          int ni = 2 * p + f;
          MlirValue e2[2] = {cg_float_cast(b, lw_elem(L, x, TC_FULL, mi, ni, 2 * h), t->et),
                             cg_float_cast(b, lw_elem(L, x, TC_FULL, mi, ni, 2 * h + 1), t->et)};
          w[f] = cg_bitcast(b, cg_vector_from(b, e2, 2, v2), i32);
        }
        MlirValue got = cg_shuffle_xor(b, cg_select(b, odd, w[0], w[1]), 1);
        /* even: (own first, partner's first); odd: (partner's second, own second) */
        out[p][0] = cg_select(b, odd, got, w[0]);
        out[p][1] = cg_select(b, odd, w[1], got);
        /* the even lane's own column, or the odd lane's partner's in the second fragment */
        MlirValue c0 = lw_elem_col(L, g, 2 * p, 0);
        MlirValue c1 = cg_subi(b, lw_elem_col(L, g, 2 * p + 1, 0), cg_const_i32(b, 2));
        col[p] = cg_int_cast(b, cg_select(b, odd, c1, c0), b->i64);
      }
      MlirValue rr = lw_elem_row(L, g, mi, 2 * h);
      MlirValue off, ok;
      lw_window_row_at(L, row_at, ctx, rr, col0, &off, &ok);
      MlirBlock then_block, outer = b->block;
      cg_if(b, cg_arith2(b, "arith.andi", only, ok), NULL, 0, false, &then_block, NULL);
      cg_builder_set_block(b, then_block);
      for (int p = 0; p < np; p++) {
        MlirValue ptr = cg_gep(b, t->base, cg_addi(b, off, col[p]), t->et);
        cg_store(b, cg_vector_from(b, out[p], 2, v2i), ptr, 8);
      }
      cg_yield(b, NULL, 0);
      cg_builder_set_block(b, outer);
    }
}

/* The tile a store writes (operand 4) checked against a tensor of `cols`
 * columns, and *only: the predicate that keeps one copy of replicated data
 * (lane q = 0 of a quad for row vectors, warp 0 when every warp holds the
 * whole tile). NULL after an error. */
static const CgVal *store_begin(Lowerer *L, const Op *op, int cols, MlirValue *only, int *col0) {
  CgBuilder *b = &L->b;
  CgVal *x = lw_get(L, op->operands[4]);
  if (x->kind != CV_TILE) {
    lw_error(L, op, "only register tiles can be stored");
    return NULL;
  }
  const TileGeom *g = &x->g;
  *col0 = (int)attr_int(&op->attrs, "col0", 0);
  if (attr_get(&op->attrs, "col0") && g->cls == TC_FULL && !g->col_split && *col0 >= 0 &&
      *col0 + g->cols <= cols)
    cols = g->cols; /* a window of the tensor's columns (verifier.c) */
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

/* Stores (add: adds, f32) the tile of op (operand 4) into t row by row:
 * row_at gives the element offset of the thread's row r of the tile (an
 * i32 from lw_elem_row) and whether that row exists; replicated copies are
 * skipped. */
static void rows_loop(Lowerer *L, const Op *op, const TensorRef *t, LwRowAt row_at, void *ctx,
                      bool add) {
  CgBuilder *b = &L->b;
  MlirValue only;
  int col0;
  const CgVal *x = store_begin(L, op, t->cols, &only, &col0);
  if (!x)
    return;
  const TileGeom *g = &x->g;
  if (add && !g->row_split && !g->col_split && L->warps > 1) {
    lw_error(L, op, "a store with reduce = add needs a tile split over the warps");
    return;
  }
  if (add ? lw_bulk_addable(L, t, g) : lw_bulk_storable(L, t, g, col0)) {
    lw_tile_rows_bulk(L, t, x, col0, row_at, ctx, add);
    return;
  }
  if (!add && pair_storable(t, g, col0)) {
    store_rows_paired(L, t, x, only, col0, row_at, ctx);
    return;
  }
  int nm = g->cls == TC_ONE ? 1 : g->nm, nh = g->cls == TC_ONE ? 1 : 2;
  for (int mi = 0; mi < nm; mi++) {
    if (add && L->sm90) {
      add_rows_v4(L, t, x, mi, col0, row_at, ctx);
      continue;
    }
    for (int h = 0; h < nh; h++) {
      MlirValue rr = g->cls == TC_ONE ? cg_const_i32(b, 0) : lw_elem_row(L, g, mi, 2 * h);
      MlirValue off, ok;
      lw_window_row_at(L, row_at, ctx, rr, col0, &off, &ok);
      MlirBlock then_block, outer = b->block;
      cg_if(b, cg_arith2(b, "arith.andi", only, ok), NULL, 0, false, &then_block, NULL);
      cg_builder_set_block(b, then_block);
      if (add)
        add_row(L, t, x, off, mi, h);
      else
        store_row(L, t, x, off, mi, h);
      cg_yield(b, NULL, 0);
      cg_builder_set_block(b, outer);
    }
  }
}

void lw_store_rows(Lowerer *L, const Op *op, const TensorRef *t, LwRowAt row_at, void *ctx) {
  rows_loop(L, op, t, row_at, ctx, false);
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

/* Row r of a tile that lies inside the extent: no compare, no clamp. */
static void inside_row_at(Lowerer *L, void *ctx, MlirValue r, MlirValue *off, MlirValue *ok) {
  const Rows *m = ctx;
  CgBuilder *b = &L->b;
  MlirValue row = cg_addi(b, m->row0, cg_int_cast(b, r, b->i64));
  *off = lw_row_offset(L, &m->t, m->b, m->h, row);
  *ok = cg_const_int(b, b->i1, 1);
}

/* A 1 x C register tile along a rank 3 tensor: the K/V-outer backward
 * kernels' LSE and D, one Q tile's worth every step. Element by element a
 * column costs a compare, a clamp, an address and a select (P41: about 250
 * of the ~710 instructions of a d64 step); when the whole tile lies inside
 * the extent (every step but a partial last one) one compare decides for
 * the tile and the elements sit at fixed offsets from one address. */
static void load_cols(Lowerer *L, const Op *op, Rows *m) {
  CgBuilder *b = &L->b;
  Type rt = op->results[0]->type;
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return;
  bool lane_held = lw_lane_held_load(L, op->results[0]);
  int ne = lane_held ? g.cols / 32 : lw_geom_count(&g);
  MlirType *types = malloc(sizeof(MlirType) * (size_t)(ne > 0 ? ne : 1));
  if (!types) {
    lw_error(L, op, "out of memory");
    return;
  }
  for (int k = 0; k < ne; k++)
    types[k] = lw_elem_type(L, rt.elem);
  MlirValue last = cg_addi(b, m->row0, cg_const_i64(b, rt.cols - 1));
  MlirBlock tb, eb, outer = b->block;
  MlirOperation ifop = cg_if(b, cg_cmpi(b, "slt", last, m->t.extent), types, ne, true, &tb, &eb);
  CgVal *paths[2] = {NULL, NULL};
  for (int i = 0; i < 2; i++) {
    cg_builder_set_block(b, i ? eb : tb);
    paths[i] = rows_tile(L, op, &m->t, i ? rows_load_at : inside_row_at, m, lane_held);
    if (!paths[i]) {
      free(types);
      cg_builder_set_block(b, outer);
      return;
    }
    cg_yield(b, paths[i]->e, ne);
  }
  cg_builder_set_block(b, outer);
  CgVal *r = paths[0];
  for (int k = 0; k < ne; k++)
    r->e[k] = cg_result(ifop, k);
  free(types);
  lw_set(L, op->results[0], r);
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
  if (along_cols(op, rt) && m->slice) {
    load_cols(L, op, m);
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
  m->skip_when_past = attr_int(&op->attrs, "skip_past", 0) != 0;
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
  if (add && L->tma_reduce_rows && lw_tma_reduce_rows(L, op) == L->tma_reduce_rows && !m->pack &&
      !m->page) {
    MlirValue only;
    int col0;
    const CgVal *x = store_begin(L, op, m->t.cols, &only, &col0);
    if (x)
      lw_add_tile_tma(L, op, m, x, col0);
    return;
  }
  rows_loop(L, op, &m->t, rows_store_at, m, add);
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

/* ------------------------------------------------------------- gather */

/* One element of a run-time input at i64 element offset off: loaded in its
 * own type, then made the gather's value type (index: i32 in tiles, i64 in
 * scalars; floats: f32). */
static MlirValue gather_element(Lowerer *L, MlirValue base, MlirValue off, ElemType et, bool tile) {
  CgBuilder *b = &L->b;
  MlirType lt = et == ELEM_I32 ? b->i32 : lw_elem_type(L, et);
  int bytes = et == ELEM_F16 || et == ELEM_BF16 ? 2 : 4;
  MlirValue v = cg_load(b, cg_gep(b, base, off, lt), lt, bytes);
  if (et == ELEM_I32)
    return tile ? v : cg_int_cast(b, v, b->i64);
  return et == ELEM_F32 ? v : cg_float_cast(b, v, b->f32);
}

/* gather %in_NAME, i0 .. i(r-1): per element of the result, the offset
 * sum(i_d * stride_d) in 64 bits and one load (docs/abi.md guarantees the
 * indices in range). Indices are scalars (i64) or index tiles (i32) that
 * broadcast onto the result's layout. */
void lw_gather(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  const Value *t = op->operands[0];
  int rank = t->type.rank;
  MlirValue base = t->name ? lw_param(L, t->name, true) : (MlirValue){NULL};
  MlirValue stride[4];
  for (int d = 0; d < rank && !mlirValueIsNull(base); d++) {
    char name[96];
    snprintf(name, sizeof name, "%s.s%d", t->name, d);
    stride[d] = lw_param(L, name, false);
    if (mlirValueIsNull(stride[d]))
      base = (MlirValue){NULL};
  }
  if (mlirValueIsNull(base) || op->noperands != 1 + rank) {
    lw_error(L, op, "reads only the kernel's run-time inputs (%%in_NAME arguments)");
    return;
  }
  base = cg_addrspacecast(b, base, b->gptr);
  Type rt = op->results[0]->type;
  const CgVal *ix[4];
  for (int d = 0; d < rank; d++)
    ix[d] = lw_get(L, op->operands[1 + d]);
  if (rt.kind == TYPE_SCALAR) {
    MlirValue off = cg_const_int(b, b->i64, 0);
    for (int d = 0; d < rank; d++)
      off = cg_addi(b, off, cg_muli(b, lw_scalar_operand(L, op, 1 + d), stride[d]));
    MlirValue v = gather_element(L, base, off, t->type.elem, false);
    lw_set(L, op->results[0], lw_scalar(L, rt, v));
    return;
  }
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return;
  for (int d = 0; d < rank; d++)
    if (ix[d]->kind == CV_TILE && !ix[d]->splat && !lw_compatible(&ix[d]->g, &g)) {
      lw_error(L, op, "index %d is distributed differently from the result", d);
      return;
    }
  CgVal *r = lw_tile(L, rt, &g);
  int *mi = malloc(3 * sizeof(int) * (size_t)(r->ne > 0 ? r->ne : 1));
  if (!mi) {
    lw_error(L, op, "out of memory");
    return;
  }
  int *ni = mi + r->ne, *e = ni + r->ne;
  lw_positions(&g, mi, ni, e);
  for (int k = 0; k < r->ne; k++) {
    MlirValue off = cg_const_int(b, b->i64, 0);
    for (int d = 0; d < rank; d++) {
      MlirValue i = lw_elem(L, ix[d], g.cls, mi[k], ni[k], e[k]);
      if (!mlirTypeEqual(mlirValueGetType(i), b->i64))
        i = cg_op1(b, "arith.extsi", &i, 1, b->i64, NULL, 0);
      off = cg_addi(b, off, cg_muli(b, i, stride[d]));
    }
    r->e[k] = gather_element(L, base, off, t->type.elem, true);
  }
  free(mi);
  lw_set(L, op->results[0], r);
}

/* scatter %blk_NAME, i0 .. i(r-1), %v: the element's offset as gather's,
 * and one i32 store by thread 0 (every thread holds the same scalars). */
void lw_scatter(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  const Value *t = op->operands[0];
  int rank = t->type.rank;
  MlirValue base = t->name ? lw_param(L, t->name, true) : (MlirValue){NULL};
  MlirValue off = cg_const_int(b, b->i64, 0);
  for (int d = 0; d < rank && !mlirValueIsNull(base); d++) {
    char name[96];
    snprintf(name, sizeof name, "%s.s%d", t->name, d);
    MlirValue stride = lw_param(L, name, false);
    if (mlirValueIsNull(stride))
      base = (MlirValue){NULL};
    else
      off = cg_addi(b, off, cg_muli(b, lw_scalar_operand(L, op, 1 + d), stride));
  }
  if (mlirValueIsNull(base) || op->noperands != 2 + rank || t->type.elem != ELEM_I32) {
    lw_error(L, op, "writes only the kernel's i32 block lists (%%blk_NAME arguments)");
    return;
  }
  base = cg_addrspacecast(b, base, b->gptr);
  MlirValue v = cg_int_cast(b, lw_scalar_operand(L, op, 1 + rank), b->i32);
  MlirBlock wr;
  cg_if(b, cg_cmpi(b, "eq", L->tid, cg_const_i32(b, 0)), NULL, 0, false, &wr, NULL);
  MlirBlock outer = b->block;
  cg_builder_set_block(b, wr);
  cg_store(b, v, cg_gep(b, base, off, b->i32), 4);
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
}
