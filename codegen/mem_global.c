/* mem_global.c - layer 1: global memory <-> registers, and the load and
 * store entry of every kernel kind. A register tile is loaded or stored
 * straight from or to the accumulator layout, row by row through a row map
 * (mem_rows.c): a missing row reads 0, and is not written. Tiles for the
 * tensor cores go to shared memory (mem_stage.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/mem.h"
#include "mlir-c/BuiltinTypes.h"

/* The values lane_holdable has met (a carry's cycle meets its own). */
typedef struct Seen {
  const Value *v[32];
  int n;
  bool carry; /* loop carries allowed (-lane-stats=carry) */
} Seen;

static bool lane_holdable_in(const Value *v, Seen *seen);

/* A load that lane_held_load's static checks take: a 1 x C f32 row vector,
 * C a multiple of 64, along a rank 3 f32 tensor. */
static bool lane_load(const Value *v) {
  const Op *d = v ? v->def : NULL;
  if (!d || d->kind != OP_LOAD || d->nresults != 1)
    return false;
  Type t = v->type, src = d->operands[0]->type;
  return t.kind == TYPE_TILE && t.rows == 1 && t.cols % 64 == 0 && t.elem == ELEM_F32 &&
         t.dist != DIST_COLS && src.rank == 3 && src.elem == ELEM_F32;
}

/* Carry k of loop `loop` (software_pipeline.c's vector carry: the row
 * vector loaded a step ahead): its init and its yield both lane loads
 * whose other uses hold it, and the body's argument and the loop's result
 * held so too. */
static bool lane_carry(const Op *loop, int k, Seen *seen) {
  Block *body = loop->regions[0];
  const Op *y = block_terminator(body);
  if (!y || y->kind != OP_YIELD || k >= y->noperands || 1 + k >= body->nargs)
    return false;
  const Value *init = loop->operands[2 + k], *next = y->operands[k];
  return lane_load(init) && lane_load(next) && lane_holdable_in(init, seen) &&
         lane_holdable_in(next, seen) && lane_holdable_in(body->args[1 + k], seen) &&
         lane_holdable_in(loop->results[k], seen);
}

static bool lane_holdable_in(const Value *v, Seen *seen) {
  for (int i = 0; i < seen->n; i++)
    if (seen->v[i] == v)
      return true; /* being checked further up */
  if (seen->n == 32)
    return false;
  seen->v[seen->n++] = v;
  for (int u = 0; u < v->nuses; u++) {
    const Op *user = v->uses[u].user;
    int at = v->uses[u].index;
    if (user->kind == OP_FOR && at >= 2 && seen->carry) {
      if (!lane_carry(user, at - 2, seen))
        return false;
      continue;
    }
    if (user->kind == OP_YIELD && seen->carry && user->parent->parent_op &&
        user->parent->parent_op->kind == OP_FOR) {
      if (!lane_carry(user->parent->parent_op, at, seen))
        return false;
      continue;
    }
    bool elementwise = (user->kind >= OP_ADD && user->kind <= OP_NOT) ||
                       user->kind == OP_SELECT || user->kind == OP_MASK;
    if (!elementwise || user->nresults != 1)
      return false;
    const Value *r = user->results[0];
    if (r->type.kind == TYPE_TILE && r->type.rows == 1 && r->type.cols > 1 &&
        !lane_holdable_in(r, seen))
      return false;
  }
  return true;
}

/* Can v, a row vector, be held across the lanes (cg_lowerer.h CgVal.lanes)?
 * Every use is an elementwise op of warp-uniform control flow whose other
 * operands come as they may (lw_elem shuffles the values a use in the
 * accumulator layout needs), and every row vector such an op makes is so
 * too, or (-lane-stats=carry) a sequential loop's carry whose both ends
 * are such loads (d64's software pipeline loads the vectors a step ahead:
 * walk.c carries the lane values): no if, store or reduction sees the
 * compact form. */
static bool lane_holdable(const Value *v, bool carry) {
  Seen seen = {.n = 0, .carry = carry};
  return lane_holdable_in(v, &seen);
}

/* The backward's LSE and delta of a transposed score tile's query columns:
 * 2 values a lane at 64 columns where the accumulator layout holds 16
 * (FlashAttention-3's shuffled statistics), loaded by 32 lanes at once. */
static bool lane_held_load(const Lowerer *L, const TensorRef *t, const TileGeom *g, Type rt,
                           const Value *v) {
  return L->lane_vectors && t->cols == 1 && g->cls == TC_COLV && !g->col_split &&
         !g->group_cols && rt.elem == ELEM_F32 && t->elem == ELEM_F32 && g->cols % 64 == 0 &&
         lane_holdable(v, L->lane_carry);
}

/* Loads the tile op reads from t straight into the accumulator layout:
 * row_at gives each element's row offset and presence (as for
 * lw_store_rows); a missing row reads 0. A 1 x C tile of a rank 3 tensor
 * (the backward's per-query LSE and D along a transposed score tile) reads
 * row row0 + c for its column c. */
static CgVal *rows_tile(Lowerer *L, const Op *op, const TensorRef *t, LwRowAt row_at, void *ctx) {
  CgBuilder *b = &L->b;
  Type rt = op->results[0]->type;
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return NULL;
  CgVal *r = lw_tile(L, rt, &g);
  if (lane_held_load(L, t, &g, rt, op->results[0])) {
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
  CgVal *r = rows_tile(L, op, t, row_at, ctx);
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

/* row_at for the thread's row r, moved to the tile's first column col0
 * (a store {col0}: the tile is a window of the tensor's columns). */
static void window_row_at(Lowerer *L, LwRowAt row_at, void *ctx, MlirValue r, int col0,
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
  window_row_at(L, row_at, ctx, row, col0, &off, &ok);
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

/* Can the f32 tile x be added into t by bulk reductions (tile_rows_bulk)?
 * sm_90; whole fragments whose rows the warps split (or one warp), at most
 * 32 rows a warp (a lane a row), rows of 16-byte multiples; tensors of at
 * most 128 columns (dQ's accumulator at d256 measured 2-4% slower this way
 * than with red.v4, perf-log P79: its kernel has no shared memory to spare). */
static bool bulk_addable(const Lowerer *L, const TensorRef *t, const TileGeom *g) {
  return L->sm90 && t->elem == ELEM_F32 && t->cols <= 128 && g->cls == TC_FULL &&
         !g->col_split && (g->row_split || L->warps == 1) && 16 * g->nm <= 32 &&
         g->cols % 4 == 0;
}

/* x's rows (a warp's) as elements of type et (es bytes) into its buffer
 * wbuf of rows `pitch` bytes apart, two elements a store. */
static void write_rows_smem(Lowerer *L, const CgVal *x, MlirValue wbuf, int pitch, MlirType et,
                            int es) {
  CgBuilder *b = &L->b;
  const TileGeom *g = &x->g;
  MlirType v2 = mlirVectorTypeGet(1, (int64_t[]){2}, et);
  for (int mi = 0; mi < g->nm; mi++)
    for (int h = 0; h < 2; h++) {
      MlirValue row = cg_addi_c(b, L->lg, mi * 16 + 8 * h);
      MlirValue rbuf = cg_addi(b, wbuf, cg_muli_c(b, row, pitch));
      for (int ni = 0; ni < g->nn; ni++) {
        MlirValue e2[2] = {cg_float_cast(b, lw_elem(L, x, TC_FULL, mi, ni, 2 * h), et),
                           cg_float_cast(b, lw_elem(L, x, TC_FULL, mi, ni, 2 * h + 1), et)};
        MlirValue col = cg_muli_c(b, cg_addi_c(b, cg_muli_c(b, L->lq, 2), ni * 8), es);
        MlirValue p = cg_gep(b, L->smem, cg_addi(b, rbuf, col), b->i8);
        cg_store(b, cg_vector_from(b, e2, 2, v2), p, 2 * es);
      }
    }
}

/* The columns of a warp's share of a tile of geometry g: a group_cols
 * tile's warp holds its group's share, any other all of them. */
static int warp_cols(const TileGeom *g) { return g->group_cols ? 8 * g->nn : g->cols; }

/* The warp's buffer (i32 byte offset) in the staging of the kernel's
 * reductions, warp_bytes a warp (one allocation, grown to the largest),
 * once the warp's earlier reductions have read it. */
static MlirValue reduction_buffer(Lowerer *L, int warp_bytes) {
  CgBuilder *b = &L->b;
  if (L->bulk_buf_bytes < L->warps * warp_bytes) {
    L->bulk_buf_off = lw_alloc_smem(L, L->warps * warp_bytes);
    L->bulk_buf_bytes = L->warps * warp_bytes;
  }
  MlirValue wbuf = cg_addi_c(b, cg_muli_c(b, L->warp, warp_bytes), L->bulk_buf_off);
  cg_bulk_wait(b, true);
  cg_syncwarp(b);
  return wbuf;
}

/* The bytes between two rows of a warp's staging buffer (tile_rows_bulk):
 * f32 rows padded by 4 floats, 16-bit rows by 8 elements, so that the
 * fragments' pair stores of a warp hit 32 banks. */
static int bulk_row_pitch(bool add, int cols) { return add ? (cols + 4) * 4 : (cols + 8) * 2; }

/* Can the 16-bit tile x of a store go out through shared memory and bulk
 * copies (tile_rows_bulk)? A warp-specialized forward on sm_90 (its
 * output tile, O: one block an SM, so shared memory no other block wants),
 * whole rows of 16-byte multiples split over the warps, at most 32 rows a
 * warp (a lane a row), and the warps' buffers fit beside what the kernel
 * holds already (the store is its last use of shared memory). */
static bool bulk_storable(const Lowerer *L, const TensorRef *t, const TileGeom *g, int col0) {
  if (!L->sm90 || !L->producer_threads || (t->elem != ELEM_BF16 && t->elem != ELEM_F16) ||
      strcmp(attr_str(&L->f->attrs, "mode", "forward"), "forward") != 0 ||
      g->cls != TC_FULL || g->col_split || g->group_cols || !g->row_split ||
      16 * g->nm > 32 || col0 != 0 || g->cols != t->cols || (g->cols * 2) % 16)
    return false;
  int need = L->warps * 16 * g->nm * bulk_row_pitch(false, g->cols);
  int top = (L->smem_top + 1023) / 1024 * 1024;
  return L->bulk_buf_bytes >= need || top + need <= CG_SMEM_LIMIT_SM90;
}

/* The tile x added (add: f32, bulk reductions) or stored (16-bit, bulk
 * copies) into t through shared memory and the TMA unit, a row a lane.
 * Adding is FlashAttention-3's dQ writer: each warp writes its rows of the
 * tile to a buffer of its own (rows padded by 4 floats: the fragments' v2
 * stores hit 32 banks), then lane l adds row l with one
 * `cp.reduce.async.bulk ... add.f32` of the row's cols x 4 contiguous
 * bytes. The L2 adds whole lines, where add_rows_v4's red.v4 came as 16
 * sectors a warp instruction (the atomic backward was bound by them on the
 * L2, docs/perf-log.md P35). Storing (bulk_storable: a warp-specialized
 * forward's O) pads rows by 16 bytes and copies each with one
 * `cp.async.bulk`: the fragments' own stores (store_row) write 4 bytes a
 * thread, 16 of each 32-byte sector a warp instruction, twice the sectors,
 * and the next tile's first instructions waited on their registers
 * (perf-log P118). Either way the warp goes on at once; before its next
 * write it waits until its copies have read the buffer, and the kernel's
 * end waits for them all (walk_kernel.c). No block barrier: each warp only
 * touches its rows. */
static void tile_rows_bulk(Lowerer *L, const TensorRef *t, const CgVal *x, int col0,
                           LwRowAt row_at, void *ctx, bool add) {
  CgBuilder *b = &L->b;
  const TileGeom *g = &x->g;
  int wcols = add ? warp_cols(g) : g->cols, es = add ? 4 : 2, wrows = 16 * g->nm;
  int pitch = bulk_row_pitch(add, wcols);
  MlirValue wbuf = reduction_buffer(L, wrows * pitch);
  write_rows_smem(L, x, wbuf, pitch, add ? b->f32 : t->et, es);
  cg_fence_proxy_async(b);
  cg_syncwarp(b);
  /* lane l < wrows: the warp's row l */
  MlirValue row = cg_addi(b, cg_subi(b, lw_elem_row(L, g, 0, 0), L->lg), L->lane);
  MlirValue off, ok;
  window_row_at(L, row_at, ctx, row, col0, &off, &ok);
  if (g->group_cols)
    off = cg_addi(b, off, cg_int_cast(b, cg_muli_c(b, lw_group(L, g), wcols), b->i64));
  ok = cg_arith2(b, "arith.andi", ok, cg_cmpi(b, "ult", L->lane, cg_const_i32(b, wrows)));
  MlirBlock then_block, outer = b->block;
  cg_if(b, ok, NULL, 0, false, &then_block, NULL);
  cg_builder_set_block(b, then_block);
  MlirValue src = cg_gep(b, L->smem, cg_addi(b, wbuf, cg_muli_c(b, L->lane, pitch)), b->i8);
  MlirValue dst = cg_gep(b, t->base, off, t->et);
  if (add)
    cg_bulk_reduce_add_f32(b, dst, cg_shared_addr32(b, src), wcols * 4);
  else
    cg_bulk_store(b, dst, cg_shared_addr32(b, src), wcols * 2);
  cg_bulk_commit(b);
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
}

/* The rows a warp adds with one TMA reduction box when store op can go
 * through add_tile_tma, else 0: sm_90, `store {reduce = add}` of a whole
 * f32 tile into the backward's dq_acc (rank 4, contiguous, the runtime's
 * tensor map `tmap_dq_acc`, docs/abi.md), its rows split over the warps
 * (or one warp), each warp's columns whole 32-column boxes (128 bytes, the
 * 128-byte swizzle), at most 128 columns (as bulk_addable). Also decides
 * the kernel's parameter (walk_kernel.c: L->tma_reduce_rows, the rows of
 * its map's box), so it reads only the IR. */
int lw_tma_reduce_rows(const Lowerer *L, const Op *op) {
  if (!L->sm90 || op->kind != OP_STORE || op->noperands != 5 || !attr_get(&op->attrs, "reduce"))
    return 0;
  const Value *t = op->operands[0];
  TileGeom g;
  if (!t->name || strcmp(t->name, "dq_acc") != 0 || t->type.kind != TYPE_TENSOR ||
      t->type.rank != 4 || t->type.elem != ELEM_F32 || t->type.dims[3] > 128 ||
      op->operands[4]->type.kind != TYPE_TILE || op->operands[4]->type.elem != ELEM_F32 ||
      !lw_geom_quiet(L, op->operands[4]->type, &g))
    return 0;
  int wcols = warp_cols(&g);
  if (g.cls != TC_FULL || g.col_split || (!g.row_split && L->warps > 1) || wcols % 32)
    return 0;
  return 16 * g.nm;
}

/* x's rows (a warp's) as f32 into wbuf in the shared layout of the tensor
 * map's boxes: 32-column boxes of `rows` rows of 128 bytes, one after the
 * other, the 16-byte chunk c of row r at chunk c ^ (r % 8) (the 128-byte
 * swizzle). A v2 store is served a half-warp (four rows) at a time; rows
 * r and r ^ 1 of one fragment fall on the same two chunks, so the lanes
 * of odd rows store fragment ni ^ 2 where the others store ni: the four
 * rows of a half-warp then cover all 32 banks once (perf-log P134: 2 -> 1
 * wavefront a half-warp). */
static void write_rows_swizzled(Lowerer *L, const CgVal *x, MlirValue wbuf, int rows) {
  CgBuilder *b = &L->b;
  const TileGeom *g = &x->g;
  MlirType v2 = mlirVectorTypeGet(1, (int64_t[]){2}, b->f32);
  /* lane (lg, lq) writes columns ni * 8 + 2 lq, + 1 of rows lg + 8 j: chunk
   * (2 (ni % 4) + lq / 2) ^ lg, byte 8 (lq % 2). Four addresses a thread,
   * one per ni % 4, hidden from LLVM (else their disjoint bits make its
   * adds ORs, which ptxas cannot fold into the stores' offsets: 16
   * addresses hoisted out of the loop and spilled); every store is one of
   * them plus a constant. */
  MlirValue half = cg_arith2(b, "arith.shrui", L->lq, cg_const_i32(b, 1));
  MlirValue odd = cg_cmpi(b, "ne", cg_arith2(b, "arith.andi", L->lg, cg_const_i32(b, 1)),
                          cg_const_i32(b, 0));
  MlirValue row0 = cg_addi(b, cg_addi(b, wbuf, cg_muli_c(b, L->lg, 128)),
                           cg_muli_c(b, cg_arith2(b, "arith.andi", L->lq, cg_const_i32(b, 1)), 8));
  MlirValue chunk[4], base[4];
  for (int k = 0; k < 4; k++)
    chunk[k] = cg_addi(b, row0, cg_muli_c(b, cg_arith2(b, "arith.xori", cg_addi_c(b, half, 2 * k),
                                                       L->lg), 16));
  bool swap = g->nn % 4 == 0; /* ni ^ 2 within each group of four fragments */
  for (int k = 0; k < 4; k++)
    base[k] = swap ? cg_select(b, odd, chunk[k ^ 2], chunk[k]) : chunk[k];
  cg_ptx(b, "", NULL, "", 0, base, 4);
  for (int mi = 0; mi < g->nm; mi++)
    for (int h = 0; h < 2; h++)
      for (int ni = 0; ni < g->nn; ni++) {
        MlirValue at = cg_addi_c(b, base[ni % 4], (ni / 4) * rows * 128 + (mi * 16 + 8 * h) * 128);
        MlirValue e2[2];
        for (int e = 0; e < 2; e++) {
          MlirValue mine = cg_float_cast(b, lw_elem(L, x, TC_FULL, mi, ni, 2 * h + e), b->f32);
          e2[e] = swap ? cg_select(b, odd, cg_float_cast(b, lw_elem(L, x, TC_FULL, mi, ni ^ 2,
                                                                     2 * h + e), b->f32), mine)
                       : mine;
        }
        cg_store(b, cg_vector_from(b, e2, 2, v2), cg_gep(b, L->smem, at, b->i8), 8);
      }
}

/* The f32 tile x added into dq_acc by the TMA unit (lw_tma_reduce_rows):
 * each warp writes its rows into a buffer of its own in the boxes' swizzled
 * layout, then one lane adds each 32-column box with one
 * `cp.reduce.async.bulk.tensor` through the tensor map: a reduction a box
 * where tile_rows_bulk issues one a row, one lane after the other
 * (perf-log P109: a third of the atomic backward's consumer time). Rows
 * past the map's extent are dropped by the TMA unit; the buffer is reused
 * once the warp's earlier reductions have read it. */
static void add_tile_tma(Lowerer *L, const Op *op, const Rows *m, const CgVal *x, int col0) {
  CgBuilder *b = &L->b;
  const TileGeom *g = &x->g;
  int wcols = warp_cols(g), rows = 16 * g->nm;
  MlirValue map = lw_param(L, "tmap_dq_acc", true);
  if (mlirValueIsNull(map)) {
    lw_error(L, op, "a TMA reduction needs the kernel's tmap_dq_acc parameter");
    return;
  }
  /* a warp's share: whole 1024-byte swizzle blocks */
  MlirValue wbuf = reduction_buffer(L, rows * wcols * 4);
  write_rows_swizzled(L, x, wbuf, rows);
  cg_fence_proxy_async(b);
  cg_syncwarp(b);
  /* the map's coordinates, innermost first: column, row, head, batch */
  MlirValue col = cg_const_i32(b, col0);
  if (g->group_cols)
    col = cg_addi(b, col, cg_muli_c(b, lw_group(L, g), wcols));
  MlirValue row = cg_addi(b, cg_int_cast(b, m->row0, b->i32),
                          cg_subi(b, lw_elem_row(L, g, 0, 0), L->lg));
  MlirValue coord[4] = {col, row, cg_int_cast(b, m->h, b->i32), cg_int_cast(b, m->b, b->i32)};
  MlirBlock then_block, outer = b->block;
  cg_if(b, cg_cmpi(b, "eq", L->lane, cg_const_i32(b, 0)), NULL, 0, false, &then_block, NULL);
  cg_builder_set_block(b, then_block);
  for (int c = 0; c < wcols / 32; c++) {
    MlirValue src = cg_gep(b, L->smem, cg_addi_c(b, wbuf, c * rows * 128), b->i8);
    MlirValue at[4] = {cg_addi_c(b, coord[0], 32 * c), coord[1], coord[2], coord[3]};
    cg_tma_reduce_add_4d(b, map, cg_shared_addr32(b, src), at);
  }
  cg_bulk_commit(b);
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
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
      window_row_at(L, row_at, ctx, rr, col0, &off, &ok);
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
  if (add ? bulk_addable(L, t, g) : bulk_storable(L, t, g, col0)) {
    tile_rows_bulk(L, t, x, col0, row_at, ctx, add);
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
      window_row_at(L, row_at, ctx, rr, col0, &off, &ok);
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
  int ne = lane_held_load(L, &m->t, &g, rt, op->results[0]) ? g.cols / 32 : lw_geom_count(&g);
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
    paths[i] = rows_tile(L, op, &m->t, i ? rows_load_at : inside_row_at, m);
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
      add_tile_tma(L, op, m, x, col0);
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
