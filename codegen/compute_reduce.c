/* compute_reduce.c - layer 2: every reduction.
 *   - rowmax / rowsum: within the thread over its fragments, then over the
 *     quad of lanes sharing a row (shuffle xor 1, 2);
 *   - xwarp_reduce: partial tiles every warp holds, summed (or maxed) over
 *     the warps through a shared-memory scratch area;
 *   - reduce: a tile to one value for the block: an i1 tile to one flag with
 *     one bar.red.and/or, other tiles through warp shuffles and one slot per
 *     warp in shared memory.
 * All of them fold with lw_combine.
 */
#include <string.h>

#include "codegen/cg_math.h"
#include "codegen/compute.h"

MlirValue lw_combine(Lowerer *L, RKind k, ElemType et, MlirValue a, MlirValue c) {
  CgBuilder *b = &L->b;
  if (et == ELEM_I1)
    return cg_arith2(b, k == RK_MIN ? "arith.andi" : "arith.ori", a, c);
  if (et == ELEM_F32) {
    if (k == RK_SUM)
      return cg_addf(b, a, c);
    return k == RK_MAX ? cg_maxnumf(b, a, c) : cg_minnumf(b, a, c);
  }
  return k == RK_SUM ? cg_addi(b, a, c) : cg_arith2(b, k == RK_MAX ? "arith.maxsi" : "arith.minsi", a, c);
}

/* --------------------------------------------------- row reductions */

/* rowmax / rowsum: within the thread over its fragments, then over the
 * quad of lanes sharing a row (shuffle xor 1, 2). */
void lw_reduce_rows(Lowerer *L, const Op *op) {
  RKind k = op->kind == OP_ROWMAX ? RK_MAX : RK_SUM;
  const CgVal *x = lw_get(L, op->operands[0]);
  Type rt = op->results[0]->type;
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return;
  if (x->kind != CV_TILE || x->g.cls != TC_FULL || g.cls != TC_ROWV || x->g.nm != g.nm ||
      x->g.row_split != g.row_split) {
    lw_error(L, op, "expects an R x C register tile and gives R x 1 with the same rows");
    return;
  }
  CgVal *r = lw_tile(L, rt, &g);
  for (int mi = 0; mi < g.nm; mi++)
    for (int h = 0; h < 2; h++) {
      MlirValue acc = lw_elem(L, x, TC_FULL, mi, 0, 2 * h);
      for (int ni = 0; ni < x->g.nn; ni++)
        for (int c = 0; c < 2; c++)
          if (ni || c)
            acc = lw_combine(L, k, ELEM_F32, acc, lw_elem(L, x, TC_FULL, mi, ni, 2 * h + c));
      acc = lw_combine(L, k, ELEM_F32, acc, cg_shuffle_xor(&L->b, acc, 1));
      acc = lw_combine(L, k, ELEM_F32, acc, cg_shuffle_xor(&L->b, acc, 2));
      r->e[mi * 2 + h] = acc;
    }
  lw_set(L, op->results[0], r);
}

/* ------------------------------------------------ cross-warp reduce */

/* Scratch row stride in floats: padded so that the 8 row groups of a warp
 * do not all hit one bank. */
static int scratch_stride(int cols) { return cols + 4; }

typedef struct ScratchCtx {
  Lowerer *L;
  int bytes;
} ScratchCtx;

static void scratch_need(Op *op, void *ctx) {
  ScratchCtx *s = ctx;
  if (op->kind != OP_XWARP_REDUCE || op->noperands < 1)
    return;
  Type t = op->operands[0]->type;
  int W = s->L->warps, need;
  if (t.cols == 1)
    need = W * t.rows * 4;
  else
    need = W * 16 * scratch_stride(t.cols) * 4;
  if (need > s->bytes)
    s->bytes = need;
}

int lw_scratch_bytes(Lowerer *L) {
  ScratchCtx s = {L, 0};
  func_walk((Func *)L->f, scratch_need, &s);
  return s.bytes;
}

typedef struct AliasCtx {
  bool seen_xwarp, ok;
} AliasCtx;

static bool in_sequential_loop(const Op *op) {
  for (const Block *b = op->parent; b && b->parent_op; b = b->parent_op->parent)
    if (b->parent_op->kind == OP_FOR && !for_is_parallel(b->parent_op))
      return true;
  return false;
}

static void alias_scan(Op *op, void *ctx) {
  AliasCtx *a = ctx;
  if (op->kind == OP_XWARP_REDUCE) {
    a->seen_xwarp = true;
    a->ok &= !in_sequential_loop(op);
  } else if ((op->kind == OP_LOAD || op->kind == OP_LOAD_PAGED) && op->nresults == 1 &&
             lw_is_staged_type(op->results[0]->type)) {
    a->ok &= !a->seen_xwarp;
  }
}

bool lw_scratch_can_alias(Lowerer *L) {
  AliasCtx a = {false, true};
  func_walk((Func *)L->f, alias_scan, &a);
  return a.ok && a.seen_xwarp;
}

static MlirValue scratch_ptr(Lowerer *L, MlirValue float_index) {
  CgBuilder *b = &L->b;
  MlirValue byte = cg_addi_c(b, cg_muli_c(b, float_index, 4), L->scratch_off);
  return cg_gep(b, L->smem, byte, b->i8);
}

/* Every warp holds a partial R x 1 vector; all warps end with the total. */
static void xwarp_rowv(Lowerer *L, const Op *op, const CgVal *x, CgVal *r, RKind k) {
  CgBuilder *b = &L->b;
  int R = x->g.rows;
  lw_barrier(L);
  /* One lane per quad writes: the quad's four lanes hold the same rows. */
  MlirBlock wr;
  cg_if(b, cg_cmpi(b, "eq", L->lq, cg_const_i32(b, 0)), NULL, 0, false, &wr, NULL);
  MlirBlock outer = b->block;
  cg_builder_set_block(b, wr);
  for (int mi = 0; mi < x->g.nm; mi++)
    for (int h = 0; h < 2; h++) {
      MlirValue row = lw_elem_row(L, &x->g, mi, 2 * h);
      MlirValue idx = cg_addi(b, cg_muli_c(b, L->warp, R), row);
      cg_store(b, lw_elem(L, x, TC_ROWV, mi, 0, 2 * h), scratch_ptr(L, idx), 4);
    }
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
  lw_sync(L);
  for (int mi = 0; mi < r->g.nm; mi++)
    for (int h = 0; h < 2; h++) {
      MlirValue row = lw_elem_row(L, &r->g, mi, 2 * h);
      MlirValue acc = (MlirValue){NULL};
      for (int w = 0; w < L->warps; w++) {
        MlirValue v = cg_load(b, scratch_ptr(L, cg_addi_c(b, row, w * R)), b->f32, 4);
        acc = w ? lw_combine(L, k, ELEM_F32, acc, v) : v;
      }
      r->e[mi * 2 + h] = acc;
    }
  L->smem_read_since_barrier = true;
  (void)op;
}

/* Every warp holds a partial R x C tile; the result is column-split: each
 * warp sums its columns over the partials. One m16 row block at a time, to
 * keep the scratch at W x 16 x C floats. */
static void xwarp_full(Lowerer *L, const Op *op, const CgVal *x, CgVal *r, RKind k) {
  CgBuilder *b = &L->b;
  int S = scratch_stride(x->g.cols);
  if (r->g.row_split || r->g.nm != x->g.nm) {
    lw_error(L, op, "a cross-warp reduction must keep every row in every warp");
    return;
  }
  MlirValue wbase = cg_muli_c(b, L->warp, 16 * S);
  for (int mi = 0; mi < x->g.nm; mi++) {
    lw_barrier(L);
    for (int ni = 0; ni < x->g.nn; ni++)
      for (int e = 0; e < 4; e++) {
        MlirValue row = cg_addi_c(b, L->lg, 8 * (e >> 1));
        MlirValue col = lw_elem_col(L, &x->g, ni, e);
        MlirValue idx = cg_addi(b, wbase, cg_addi(b, cg_muli_c(b, row, S), col));
        cg_store(b, lw_elem(L, x, TC_FULL, mi, ni, e), scratch_ptr(L, idx), 4);
      }
    lw_sync(L);
    for (int ni = 0; ni < r->g.nn; ni++)
      for (int e = 0; e < 4; e++) {
        MlirValue row = cg_addi_c(b, L->lg, 8 * (e >> 1));
        MlirValue col = lw_elem_col(L, &r->g, ni, e);
        MlirValue at = cg_addi(b, cg_muli_c(b, row, S), col);
        MlirValue acc = (MlirValue){NULL};
        for (int w = 0; w < L->warps; w++) {
          MlirValue v = cg_load(b, scratch_ptr(L, cg_addi_c(b, at, w * 16 * S)), b->f32, 4);
          acc = w ? lw_combine(L, k, ELEM_F32, acc, v) : v;
        }
        r->e[lw_index_of(&r->g, mi, ni, e)] = acc;
      }
    L->smem_read_since_barrier = true;
  }
}

void lw_xwarp_reduce(Lowerer *L, const Op *op) {
  const CgVal *x = lw_get(L, op->operands[0]);
  RKind k = strcmp(attr_str(&op->attrs, "kind", "sum"), "max") == 0 ? RK_MAX : RK_SUM;
  Type rt = op->results[0]->type;
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return;
  if (x->kind != CV_TILE || x->g.row_split || x->g.col_split) {
    lw_error(L, op, "expects a partial tile held whole by every warp");
    return;
  }
  if (x->splat) {
    lw_error(L, op, "a uniform partial tile has no cross-warp meaning here");
    return;
  }
  if (L->scratch_aliases && !L->scratch_claimed) {
    /* The staged tiles' bytes become scratch: no copy may still land in
     * them (a prefetch past the loop's end); the reduction's barrier then
     * orders every warp's last read of them before the first write. */
    lw_wait_all_async(L);
    L->scratch_claimed = true;
  }
  CgVal *r = lw_tile(L, rt, &g);
  if (x->g.cls == TC_ROWV && g.cls == TC_ROWV && !g.row_split && g.nm == x->g.nm)
    xwarp_rowv(L, op, x, r, k);
  else if (x->g.cls == TC_FULL && g.cls == TC_FULL)
    xwarp_full(L, op, x, r, k);
  else {
    lw_error(L, op, "unsupported shapes");
    return;
  }
  lw_set(L, op->results[0], r);
}

/* ------------------------------------------------------------ reduce */

/* This thread's fold of its elements. A sum counts each element once: a
 * row vector's quad, a column vector's row groups and a tile every warp
 * holds are copies. */
static MlirValue thread_fold(Lowerer *L, const CgVal *x, RKind k, ElemType et) {
  CgBuilder *b = &L->b;
  MlirValue acc = x->e[0];
  for (int i = 1; i < x->ne; i++)
    acc = lw_combine(L, k, et, acc, x->e[i]);
  if (k != RK_SUM)
    return acc;
  MlirValue own = cg_const_int(b, b->i1, 1);
  if (x->g.cls == TC_ROWV || x->g.cls == TC_ONE)
    own = cg_cmpi(b, "eq", L->lq, cg_const_i32(b, 0));
  if (x->g.cls == TC_COLV || x->g.cls == TC_ONE)
    own = cg_arith2(b, "arith.andi", own, cg_cmpi(b, "eq", L->lg, cg_const_i32(b, 0)));
  if (!x->g.row_split && !x->g.col_split)
    own = cg_arith2(b, "arith.andi", own, cg_cmpi(b, "eq", L->warp, cg_const_i32(b, 0)));
  MlirType t = mlirValueGetType(acc);
  MlirValue zero = et == ELEM_F32 ? cg_const_float(b, t, 0.0) : cg_const_int(b, t, 0);
  return cg_select(b, own, acc, zero);
}

/* Flags: one bar.red over the block (every thread's flag, AND or OR). */
static MlirValue reduce_flags(Lowerer *L, MlirValue flag, RKind k) {
  CgBuilder *b = &L->b;
  MlirValue ops[2] = {cg_const_i32(b, 0), flag};
  return cg_intrinsic(b, k == RK_MIN ? "llvm.nvvm.barrier.cta.red.and.aligned.all"
                                     : "llvm.nvvm.barrier.cta.red.or.aligned.all",
                      ops, 2, b->i1);
}

/* Numbers: shuffles within the warp, then one slot per warp in shared
 * memory (a buffer of its own: the block's scratch belongs to xwarp_reduce). */
static MlirValue reduce_values(Lowerer *L, MlirValue v, RKind k, ElemType et) {
  CgBuilder *b = &L->b;
  for (int mask = 16; mask >= 1; mask /= 2)
    v = lw_combine(L, k, et, v, cg_shuffle_xor(b, v, mask));
  if (L->warps == 1)
    return v;
  int off = lw_alloc_smem(L, 4 * L->warps);
  MlirType t = mlirValueGetType(v);
  if (L->smem_read_since_barrier)
    lw_barrier(L);
  MlirBlock wr, outer = b->block;
  cg_if(b, cg_cmpi(b, "eq", L->lane, cg_const_i32(b, 0)), NULL, 0, false, &wr, NULL);
  cg_builder_set_block(b, wr);
  MlirValue mine = cg_addi_c(b, cg_muli_c(b, L->warp, 4), off);
  cg_store(b, v, cg_gep(b, L->smem, mine, b->i8), 4);
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
  lw_barrier(L);
  MlirValue acc = (MlirValue){NULL};
  for (int w = 0; w < L->warps; w++) {
    MlirValue x = cg_load(b, cg_gep(b, L->smem, cg_const_i32(b, off + 4 * w), b->i8), t, 4);
    acc = w ? lw_combine(L, k, et, acc, x) : x;
  }
  L->smem_read_since_barrier = true;
  return acc;
}

void lw_reduce(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  const CgVal *x = lw_get(L, op->operands[0]);
  const char *ks = attr_str(&op->attrs, "kind", "max");
  RKind k = strcmp(ks, "min") == 0 ? RK_MIN : strcmp(ks, "sum") == 0 ? RK_SUM : RK_MAX;
  Type rt = op->results[0]->type;
  ElemType et = x->type.elem == ELEM_F16 || x->type.elem == ELEM_BF16 ? ELEM_F32 : x->type.elem;
  if (x->kind == CV_SCALAR) {
    lw_set(L, op->results[0], lw_scalar(L, rt, x->v));
    return;
  }
  if (x->kind != CV_TILE || (x->splat && k == RK_SUM) || (et == ELEM_I1 && k == RK_SUM)) {
    lw_error(L, op, "expects a register tile (and no sum of flags or of a uniform tile)");
    return;
  }
  MlirValue r;
  if (x->splat)
    r = x->v; /* every element is this value */
  else if (et == ELEM_I1)
    r = reduce_flags(L, thread_fold(L, x, k, et), k);
  else
    r = reduce_values(L, thread_fold(L, x, k, et), k, et);
  if (rt.elem == ELEM_INDEX && et == ELEM_INDEX)
    r = cg_int_cast(b, r, b->i64); /* index tiles hold i32 */
  lw_set(L, op->results[0], lw_scalar(L, rt, r));
}
