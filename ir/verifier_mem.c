/* verifier_mem.c - the verifier's rules for the memory ops: load, store,
 * load_scalar, gather, scatter, load_paged (verifier.c). */
#include <string.h>

#include "ir/verifier_internal.h"

/* The tile columns a load/store of tensor t moves: the head dim, or 1. */
static int tensor_cols(Type t) { return t.rank == 4 ? t.dims[3] : 1; }

/* A float tensor of rank 3 or 4 at operand `at`; the index operands after it
 * up to `last`. */
static bool check_float_tensor(Verifier *v, const Op *op, int at, int last) {
  Type t = opnd(op, at);
  if (t.kind != TYPE_TENSOR || t.elem == ELEM_I32) {
    report(v, op, "operand %d must be a float tensor", at);
    return false;
  }
  for (int i = at + 1; i <= last; i++)
    if (!is_index(opnd(op, i)))
      report(v, op, "operand %d must be index", i);
  return true;
}

/* {pack = G}, when present, is a group size >= 1 (docs/decode.md). */
static void check_pack(Verifier *v, const Op *op) {
  const Attr *a = attr_get(&op->attrs, "pack");
  if (a && (a->kind != ATTR_INT || a->i < 1))
    report(v, op, "'pack' must be an integer >= 1");
}

static bool pack_of(const Op *op) { return attr_get(&op->attrs, "pack") != NULL; }

static bool check_tensor_access(Verifier *v, const Op *op, Type tile, int last_index) {
  char a[160], b[160];
  if (!check_float_tensor(v, op, 0, last_index))
    return false;
  Type t = opnd(op, 0);
  check_pack(v, op);
  if (!is_tile(tile)) {
    report(v, op, "the %s must be a tile", op->kind == OP_LOAD ? "result" : "stored value");
    return false;
  }
  /* A rank 3 tensor holds one value per (b, h, position): R x 1 tiles, or
   * 1 x C tiles with the positions along the columns. */
  bool row_vector = t.rank == 3 && tile.rows == 1 && tile.cols != 1 && !pack_of(op);
  const Attr *c0 = op->kind == OP_STORE ? attr_get(&op->attrs, "col0") : NULL;
  if (c0) {
    /* a column window of a rank 4 tensor: columns col0 .. col0 + C - 1 */
    if (c0->kind != ATTR_INT || c0->i < 0 || c0->i % 8 || t.rank != 4 ||
        c0->i + tile.cols > tensor_cols(t) || tile.elem != t.elem)
      report(v, op, "'col0' must be a multiple of 8 with the tile's %d columns inside tensor %s",
             tile.cols, tstr(t, b));
    return true;
  }
  if (tile.elem != t.elem || (tile.cols != tensor_cols(t) && !row_vector))
    report(v, op, "tile %s does not match tensor %s (columns must be %d)", tstr(tile, a), tstr(t, b),
           tensor_cols(t));
  return true;
}

/* load tensor, i0 .. i(r-3), row0, col0 {rect = 1}: the R x C rectangle of
 * a rank r >= 2 run-time input of 2-byte floats at rows row0.. of its dim
 * r-2 and columns col0.. of its dim r-1 (stage-inputs' staged bias tile). */
static void check_rect_load(Verifier *v, const Op *op) {
  char a[160], b[160];
  Type t = op->noperands ? opnd(op, 0) : type_none();
  const Attr *r = attr_get(&op->attrs, "rect");
  if (!r || r->kind != ATTR_INT || r->i != 1)
    report(v, op, "'rect' must be 1");
  if (t.kind != TYPE_TENSOR || t.rank < 2 || (t.elem != ELEM_BF16 && t.elem != ELEM_F16)) {
    report(v, op, "a load {rect = 1} reads a bf16 or f16 tensor of rank 2 to 4");
    return;
  }
  if (!want_counts(v, op, 1 + t.rank, 1))
    return;
  for (int i = 1; i <= t.rank; i++)
    if (!is_index(opnd(op, i)))
      report(v, op, "operand %d must be index", i);
  Type tile = res(op, 0);
  if (!is_tile(tile) || tile.dist != DIST_NONE || tile.elem != t.elem)
    report(v, op, "the result %s must be a tile of the tensor's elements without a distribution "
           "(a staged tile of %s)", tstr(tile, a), tstr(t, b));
}

/* load tensor, b, h, row0 [, limit] */
void check_load(Verifier *v, const Op *op) {
  if (attr_get(&op->attrs, "rect"))
    check_rect_load(v, op);
  else if (op->noperands == 5 && want_counts(v, op, 5, 1))
    check_tensor_access(v, op, res(op, 0), 4);
  else if (want_counts(v, op, 4, 1))
    check_tensor_access(v, op, res(op, 0), 3);
}

/* store tensor, b, h, row0, tile {reduce = add, col0}: adds into an f32
 * tensor; writes columns col0.. of it. */
void check_store(Verifier *v, const Op *op) {
  if (!want_counts(v, op, 5, 0) || !check_tensor_access(v, op, opnd(op, 4), 3))
    return;
  const Attr *r = attr_get(&op->attrs, "reduce");
  if (r && (r->kind != ATTR_WORD || strcmp(r->s, "add") != 0))
    report(v, op, "'reduce' must be add");
  else if (r && opnd(op, 0).elem != ELEM_F32)
    report(v, op, "a store with reduce = add needs an f32 tensor");
}

/* load_scalar i32-tensor<[n]>, i -> index */
void check_load_scalar(Verifier *v, const Op *op) {
  if (!want_counts(v, op, 2, 1))
    return;
  Type t = opnd(op, 0);
  if (t.kind != TYPE_TENSOR || t.elem != ELEM_I32 || t.rank != 1)
    report(v, op, "operand 0 must be a rank 1 i32 tensor");
  if (!is_index(opnd(op, 1)))
    report(v, op, "operand 1 must be index");
  if (!is_index(res(op, 0)))
    report(v, op, "result must be index");
}

/* gather tensor, i0 .. i(rank-1) -> scalar or tile: the indices' broadcast
 * shape, index for an i32 tensor, f32 for a float one. */
void check_gather(Verifier *v, const Op *op) {
  Type t = op->noperands ? opnd(op, 0) : type_none();
  if (t.kind != TYPE_TENSOR) {
    report(v, op, "operand 0 must be a tensor");
    return;
  }
  if (!want_counts(v, op, 1 + t.rank, 1))
    return;
  Type shape = type_index();
  for (int i = 1; i <= t.rank; i++) {
    Type x = opnd(op, i);
    if (x.elem != ELEM_INDEX || (x.kind != TYPE_SCALAR && x.kind != TYPE_TILE)) {
      report(v, op, "operand %d must be an index scalar or tile", i);
      return;
    }
    shape = broadcast_type(shape, x, ELEM_INDEX);
    if (shape.kind == TYPE_NONE) {
      report(v, op, "the indices' shapes do not broadcast");
      return;
    }
  }
  Type r = res(op, 0);
  ElemType want = t.elem == ELEM_I32 ? ELEM_INDEX : ELEM_F32;
  if (r.elem != want || r.kind != shape.kind ||
      (r.kind == TYPE_TILE && (r.rows != shape.rows || r.cols != shape.cols)))
    report(v, op, "result must be %s with the indices' shape",
           want == ELEM_INDEX ? "index" : "f32");
}

/* scatter tensor, i0 .. i(rank-1), value: an i32 tensor, index scalars */
void check_scatter(Verifier *v, const Op *op) {
  Type t = op->noperands ? opnd(op, 0) : type_none();
  if (t.kind != TYPE_TENSOR || t.elem != ELEM_I32) {
    report(v, op, "operand 0 must be an i32 tensor");
    return;
  }
  if (!want_counts(v, op, 2 + t.rank, 0))
    return;
  for (int i = 1; i <= t.rank + 1; i++)
    if (!is_index(opnd(op, i))) {
      report(v, op, "operand %d must be an index scalar", i);
      return;
    }
}

/* load_paged cache, block_table, b, h, row0, limit {page_size} -> tile */
void check_load_paged(Verifier *v, const Op *op) {
  char a[160], b[160];
  if (!want_counts(v, op, 6, 1) || !check_float_tensor(v, op, 0, 0))
    return;
  Type t = opnd(op, 0), bt = opnd(op, 1), tile = res(op, 0);
  if (bt.kind != TYPE_TENSOR || bt.elem != ELEM_I32 || bt.rank != 2)
    report(v, op, "operand 1 (the block table) must be a rank 2 i32 tensor");
  for (int i = 2; i <= 5; i++)
    if (!is_index(opnd(op, i)))
      report(v, op, "operand %d must be index", i);
  const Attr *ps = attr_get(&op->attrs, "page_size");
  if (!ps || ps->kind != ATTR_INT || ps->i < 1)
    report(v, op, "needs an integer 'page_size' >= 1");
  else if (t.rank != 4 || t.dims[1] != ps->i)
    report(v, op, "the cache must be [num_pages, %d, heads, dim]", (int)ps->i);
  if (!is_tile(tile) || tile.elem != t.elem || tile.cols != tensor_cols(t))
    report(v, op, "tile %s does not match tensor %s", tstr(tile, a), tstr(t, b));
}
