/* mem_bulk.c - layer 1: register tiles to global memory through shared
 * memory and the TMA unit. Each warp writes its rows to a staging buffer of
 * its own, then one lane a row (cp.async.bulk: a warp-specialized forward's
 * O; cp.reduce.async.bulk add.f32: the backward's dQ) or one lane a warp
 * (cp.reduce.async.bulk.tensor through the tensor map tmap_dq_acc: the
 * atomic backward's dQ at d128) hands them to the TMA unit. mem_global.c's
 * stores choose this path where these functions say it applies.
 */
#include <string.h>

#include "codegen/mem.h"
#include "mlir-c/BuiltinTypes.h"

/* Can the f32 tile x be added into t by bulk reductions (lw_tile_rows_bulk)?
 * sm_90; whole fragments whose rows the warps split (or one warp), at most
 * 32 rows a warp (a lane a row), rows of 16-byte multiples; tensors of at
 * most 128 columns (dQ's accumulator at d256 measured 2-4% slower this way
 * than with red.v4, perf-log P79: its kernel has no shared memory to spare). */
bool lw_bulk_addable(const Lowerer *L, const TensorRef *t, const TileGeom *g) {
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

/* The bytes between two rows of a warp's staging buffer (lw_tile_rows_bulk):
 * f32 rows padded by 4 floats, 16-bit rows by 8 elements, so that the
 * fragments' pair stores of a warp hit 32 banks. */
static int bulk_row_pitch(bool add, int cols) { return add ? (cols + 4) * 4 : (cols + 8) * 2; }

/* Can the 16-bit tile x of a store go out through shared memory and bulk
 * copies (lw_tile_rows_bulk)? A warp-specialized forward on sm_90 (its
 * output tile, O: one block an SM, so shared memory no other block wants),
 * whole rows of 16-byte multiples split over the warps, at most 32 rows a
 * warp (a lane a row), and the warps' buffers fit beside what the kernel
 * holds already (the store is its last use of shared memory). */
bool lw_bulk_storable(const Lowerer *L, const TensorRef *t, const TileGeom *g, int col0) {
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
void lw_tile_rows_bulk(Lowerer *L, const TensorRef *t, const CgVal *x, int col0,
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
  lw_window_row_at(L, row_at, ctx, row, col0, &off, &ok);
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
 * through lw_add_tile_tma, else 0: sm_90, `store {reduce = add}` of a whole
 * f32 tile into the backward's dq_acc (rank 4, contiguous, the runtime's
 * tensor map `tmap_dq_acc`, docs/abi.md), its rows split over the warps
 * (or one warp), each warp's columns whole 32-column boxes (128 bytes, the
 * 128-byte swizzle), at most 128 columns (as lw_bulk_addable). Also decides
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
 * where lw_tile_rows_bulk issues one a row, one lane after the other
 * (perf-log P109: a third of the atomic backward's consumer time). Rows
 * past the map's extent are dropped by the TMA unit; the buffer is reused
 * once the warp's earlier reductions have read it. */
void lw_add_tile_tma(Lowerer *L, const Op *op, const Rows *m, const CgVal *x, int col0) {
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
