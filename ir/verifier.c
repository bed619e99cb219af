/* verifier.c - checks the invariants of the tile IR after every pass.
 *
 * What it checks, per kernel:
 *  - structure: ops linked into their block (parent/prev/next), only for/if
 *    own regions, yields end for/if regions, the body ends with `return`, no
 *    op after a terminator;
 *  - operand and result counts and types of every op kind (elementwise ops
 *    broadcast as broadcast_type says; dist is codegen's business and is not
 *    compared, except that `partial` values may only feed xwarp_reduce:
 *    a partial sum is no value of its own, while a `warp` value is one per
 *    warp and may feed anything);
 *  - required attributes (const/full value, cmp pred, iota axis, tile_size
 *    dim, xwarp_reduce kind, for kind);
 *  - dominance: an operand is defined earlier in the same block, in an
 *    enclosing block, or is an argument of an enclosing region;
 *  - use lists: every operand appears exactly once in its value's uses, and
 *    every use names a live op that really has the value at that index;
 *  - types well formed; symbolic Br/Bc only before tiling (no `tile_q`).
 *
 * Messages: `verifier: after <pass>: @kernel: <op summary> (line:col): msg`.
 */
#include <stdarg.h>
#include <string.h>

#include "ir/ir_internal.h"

typedef struct Verifier {
  const Func *f;
  const char *after;
  FILE *diag;
  int nerrors;
  ValueNames names;
  PtrMap visible; /* Value* -> 1 while it may be used, 0 after its scope */
  bool symbolic_ok;
} Verifier;

static void report(Verifier *v, const Op *op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report(Verifier *v, const Op *op, const char *fmt, ...) {
  v->nerrors++;
  if (!v->diag)
    return;
  fputs("verifier: ", v->diag);
  if (v->after)
    fprintf(v->diag, "after %s: ", v->after);
  fprintf(v->diag, "@%s: ", v->f->name ? v->f->name : "");
  if (op) {
    char sum[256];
    op_summary(sum, sizeof sum, op, &v->names);
    fprintf(v->diag, "%s (%d:%d): ", sum, op->loc.line, op->loc.col);
  }
  va_list ap;
  va_start(ap, fmt);
  vfprintf(v->diag, fmt, ap);
  va_end(ap);
  fputc('\n', v->diag);
}

static const char *tstr(Type t, char *buf) { return type_str(t, buf, 160); }

/* -------------------------------------------------------------- types */

static bool valid_tile_dim(Verifier *v, int d) {
  return d > 0 || ((d == DIM_BR || d == DIM_BC) && v->symbolic_ok);
}

static bool valid_tensor_dim(int d) {
  return d > 0 || (d <= DIM_BATCH && d >= DIM_LIST_LEN);
}

/* Reports a malformed type of a value that op defines (or a kernel arg). */
static void check_type(Verifier *v, const Op *op, Type t, const char *what) {
  char b[160];
  switch (t.kind) {
  case TYPE_SCALAR:
    if (t.elem == ELEM_NONE)
      report(v, op, "%s has no element type", what);
    return;
  case TYPE_TILE:
    if (t.elem == ELEM_NONE)
      report(v, op, "%s has no element type", what);
    if (!valid_tile_dim(v, t.rows) || !valid_tile_dim(v, t.cols)) {
      if ((t.rows == DIM_BR || t.rows == DIM_BC || t.cols == DIM_BR || t.cols == DIM_BC) && !v->symbolic_ok)
        report(v, op, "%s has symbolic extent in %s but the kernel is tiled (tile_q is set)", what, tstr(t, b));
      else
        report(v, op, "%s has a bad tile shape %s", what, tstr(t, b));
    }
    return;
  case TYPE_TENSOR:
    if (t.elem == ELEM_U32) {
      report(v, op, "%s is a tensor of u32 (u32 is for values only)", what);
      return;
    }
    if (t.rank < 1 || t.rank > 4) {
      report(v, op, "%s is a tensor of rank %d (1 to 4 expected)", what, t.rank);
      return;
    }
    for (int i = 0; i < t.rank; i++)
      if (!valid_tensor_dim(t.dims[i]))
        report(v, op, "%s has a bad tensor extent %d", what, t.dims[i]);
    if (op)
      report(v, op, "%s is a tensor: only kernel arguments are tensors", what);
    return;
  default:
    report(v, op, "%s has no type", what);
  }
}

static bool is_tile(Type t) { return t.kind == TYPE_TILE; }
static bool is_index(Type t) { return t.kind == TYPE_SCALAR && t.elem == ELEM_INDEX; }
static bool is_value_type(Type t) { return t.kind == TYPE_SCALAR || t.kind == TYPE_TILE; }
static bool is_float_elem(ElemType e) { return e == ELEM_F16 || e == ELEM_BF16 || e == ELEM_F32; }

/* Same kind, element type and extents; dist is not compared. */
static bool same_shape_elem(Type a, Type b) {
  if (a.kind != b.kind || a.elem != b.elem)
    return false;
  return a.kind != TYPE_TILE || (a.rows == b.rows && a.cols == b.cols);
}

static bool same_shape(Type a, Type b) {
  if (a.kind != b.kind)
    return false;
  return a.kind != TYPE_TILE || (a.rows == b.rows && a.cols == b.cols);
}

/* --------------------------------------------------------- op rules */

static bool want_counts(Verifier *v, const Op *op, int nops, int nres) {
  bool ok = true;
  if (nops >= 0 && op->noperands != nops) {
    report(v, op, "expects %d operand%s, has %d", nops, nops == 1 ? "" : "s", op->noperands);
    ok = false;
  }
  if (op->nresults != nres) {
    report(v, op, "expects %d result%s, has %d", nres, nres == 1 ? "" : "s", op->nresults);
    ok = false;
  }
  return ok;
}

static Type opnd(const Op *op, int i) { return op->operands[i]->type; }
static Type res(const Op *op, int i) { return op->results[i]->type; }

static void want_result(Verifier *v, const Op *op, Type expect) {
  char a[160], b[160];
  if (!same_shape_elem(res(op, 0), expect))
    report(v, op, "result type %s, expected %s", tstr(res(op, 0), a), tstr(expect, b));
}

static bool word_in(const Op *op, const char *key, const char *const *words) {
  const Attr *a = attr_get(&op->attrs, key);
  if (!a || a->kind != ATTR_WORD)
    return false;
  for (; *words; words++)
    if (strcmp(a->s, *words) == 0)
      return true;
  return false;
}

static void check_value_attr(Verifier *v, const Op *op) {
  const Attr *a = attr_get(&op->attrs, "value");
  if (!a || (a->kind != ATTR_INT && a->kind != ATTR_FLOAT))
    report(v, op, "needs a numeric 'value' attribute");
}

static void check_const(Verifier *v, const Op *op) {
  if (!want_counts(v, op, 0, 1))
    return;
  check_value_attr(v, op);
  const Attr *a = attr_get(&op->attrs, "value");
  if (a && res(op, 0).elem == ELEM_U32 && (a->kind != ATTR_INT || a->i < 0 || a->i > 0xffffffffLL))
    report(v, op, "a u32 'value' must be an integer in 0 .. 4294967295");
  bool tile = op->kind == OP_FULL;
  if (tile ? !is_tile(res(op, 0)) : res(op, 0).kind != TYPE_SCALAR)
    report(v, op, "result must be a %s", tile ? "tile" : "scalar");
}

static void check_tile_size(Verifier *v, const Op *op) {
  static const char *const dims[] = {"q", "kv", NULL};
  if (!want_counts(v, op, 0, 1))
    return;
  if (!is_index(res(op, 0)))
    report(v, op, "result must be index");
  if (!word_in(op, "dim", dims))
    report(v, op, "needs 'dim' = q or kv");
}

/* iota {axis} [%base] [{and = M}]: (base + i) & M along axis. */
static void check_iota(Verifier *v, const Op *op) {
  if (!want_counts(v, op, op->noperands > 0 ? 1 : 0, 1))
    return;
  Type t = res(op, 0);
  if (op->noperands == 1 && !is_index(opnd(op, 0)))
    report(v, op, "base must be an index scalar");
  const Attr *m = attr_get(&op->attrs, "and");
  if (m && m->kind != ATTR_INT)
    report(v, op, "'and' must be an integer");
  const Attr *a = attr_get(&op->attrs, "axis");
  if (!a || a->kind != ATTR_INT || (a->i != 0 && a->i != 1)) {
    report(v, op, "needs 'axis' = 0 or 1");
    return;
  }
  if (!is_tile(t) || t.elem != ELEM_INDEX)
    report(v, op, "result must be an index tile");
  else if (a->i == 0 ? t.cols != 1 : t.rows != 1)
    report(v, op, "axis %d gives a %s tile", (int)a->i, a->i == 0 ? "R x 1" : "1 x C");
}

/* add, sub, ..., cmp, and, or: two operands broadcasting to the result. */
static void check_binary(Verifier *v, const Op *op) {
  char a[160], b[160];
  if (!want_counts(v, op, 2, 1))
    return;
  Type x = opnd(op, 0), y = opnd(op, 1);
  if (!is_value_type(x) || !is_value_type(y) || x.elem != y.elem) {
    report(v, op, "operand types %s and %s differ in element type", tstr(x, a), tstr(y, b));
    return;
  }
  bool bits = x.elem == ELEM_U32;
  bool logic = (op->kind == OP_AND || op->kind == OP_OR) && !bits;
  bool u32_only = op->kind == OP_XOR || op->kind == OP_MULHI || op->kind == OP_SHR;
  if ((op->kind == OP_AND || op->kind == OP_OR) && x.elem != ELEM_I1 && !bits)
    report(v, op, "operands must be i1 or u32");
  else if (u32_only && !bits)
    report(v, op, "operands must be u32");
  else if (bits && (op->kind == OP_DIV || op->kind == OP_REM || op->kind == OP_CEILDIV))
    report(v, op, "no division on u32");
  if (!logic && x.elem == ELEM_I1 && op->kind != OP_CMP)
    report(v, op, "arithmetic on i1");
  if (op->kind == OP_CEILDIV && x.elem != ELEM_INDEX)
    report(v, op, "operands must be index");
  if (op->kind == OP_CMP) {
    static const char *const preds[] = {"lt", "le", "gt", "ge", "eq", "ne", NULL};
    if (!word_in(op, "pred", preds))
      report(v, op, "needs 'pred' = lt, le, gt, ge, eq or ne");
  }
  ElemType e = (op->kind == OP_CMP || logic) ? ELEM_I1 : x.elem; /* u32 and/or: u32 */
  Type t = broadcast_type(x, y, e);
  if (t.kind == TYPE_NONE)
    report(v, op, "operand shapes %s and %s do not broadcast", tstr(x, a), tstr(y, b));
  else
    want_result(v, op, t);
}

static void check_unary(Verifier *v, const Op *op) {
  if (!want_counts(v, op, 1, 1))
    return;
  Type x = opnd(op, 0);
  if (!is_value_type(x)) {
    report(v, op, "operand must be a scalar or a tile");
    return;
  }
  if (op->kind == OP_NOT && x.elem != ELEM_I1)
    report(v, op, "operand must be i1");
  else if ((op->kind == OP_NEG || op->kind == OP_ABS) && (x.elem == ELEM_I1 || x.elem == ELEM_U32))
    report(v, op, "%s on %s", op->kind == OP_NEG ? "negation" : "abs", elem_name(x.elem));
  else if (op->kind != OP_NOT && op->kind != OP_NEG && op->kind != OP_ABS && !is_float_elem(x.elem))
    report(v, op, "operand must be a float");
  want_result(v, op, x);
}

static void check_select(Verifier *v, const Op *op) {
  char a[160], b[160];
  if (!want_counts(v, op, 3, 1))
    return;
  Type c = opnd(op, 0), x = opnd(op, 1), y = opnd(op, 2);
  if (!is_value_type(c) || c.elem != ELEM_I1)
    report(v, op, "condition must be i1");
  if (!is_value_type(x) || !is_value_type(y) || x.elem != y.elem) {
    report(v, op, "operand types %s and %s differ in element type", tstr(x, a), tstr(y, b));
    return;
  }
  Type t = broadcast_type(broadcast_type(c, x, x.elem), y, x.elem);
  if (t.kind == TYPE_NONE)
    report(v, op, "operand shapes do not broadcast");
  else
    want_result(v, op, t);
}

static void check_cast(Verifier *v, const Op *op) {
  if (!want_counts(v, op, 1, 1))
    return;
  if (!is_value_type(opnd(op, 0)) || !same_shape(opnd(op, 0), res(op, 0)))
    report(v, op, "cast must keep the shape");
  /* u32 <-> index (modulo 2^32), u32 -> float; nothing else touches u32 */
  ElemType from = opnd(op, 0).elem, to = res(op, 0).elem;
  if ((from == ELEM_U32 && to != ELEM_U32 && to != ELEM_INDEX && !is_float_elem(to)) ||
      (to == ELEM_U32 && from != ELEM_U32 && from != ELEM_INDEX))
    report(v, op, "a cast touching u32 goes to or from index, or from u32 to a float");
}

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

/* load tensor, b, h, row0 [, limit] */
static void check_load(Verifier *v, const Op *op) {
  if (op->noperands == 5 && want_counts(v, op, 5, 1))
    check_tensor_access(v, op, res(op, 0), 4);
  else if (want_counts(v, op, 4, 1))
    check_tensor_access(v, op, res(op, 0), 3);
}

/* store tensor, b, h, row0, tile {reduce = add, col0}: adds into an f32
 * tensor; writes columns col0.. of it. */
static void check_store(Verifier *v, const Op *op) {
  if (!want_counts(v, op, 5, 0) || !check_tensor_access(v, op, opnd(op, 4), 3))
    return;
  const Attr *r = attr_get(&op->attrs, "reduce");
  if (r && (r->kind != ATTR_WORD || strcmp(r->s, "add") != 0))
    report(v, op, "'reduce' must be add");
  else if (r && opnd(op, 0).elem != ELEM_F32)
    report(v, op, "a store with reduce = add needs an f32 tensor");
}

/* load_scalar i32-tensor<[n]>, i -> index */
static void check_load_scalar(Verifier *v, const Op *op) {
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
static void check_gather(Verifier *v, const Op *op) {
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
static void check_scatter(Verifier *v, const Op *op) {
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
static void check_load_paged(Verifier *v, const Op *op) {
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

/* reduce {kind = max|min|sum} tile -> scalar of its element type */
static void check_reduce(Verifier *v, const Op *op) {
  static const char *const kinds[] = {"max", "min", "sum", NULL};
  if (!want_counts(v, op, 1, 1))
    return;
  if (!word_in(op, "kind", kinds))
    report(v, op, "needs 'kind' = max, min or sum");
  Type x = opnd(op, 0);
  if (!is_tile(x))
    report(v, op, "operand must be a tile");
  else if (res(op, 0).kind != TYPE_SCALAR || res(op, 0).elem != x.elem)
    report(v, op, "result must be a scalar of the operand's element type");
}

static void check_matmul(Verifier *v, const Op *op) {
  char a[160], b[160];
  if (op->noperands != 2 && op->noperands != 3) {
    report(v, op, "expects 2 or 3 operands, has %d", op->noperands);
    return;
  }
  if (!want_counts(v, op, -1, 1))
    return;
  Type x = opnd(op, 0), y = opnd(op, 1);
  if (!is_tile(x) || !is_tile(y) || !is_float_elem(x.elem) || x.elem != y.elem) {
    report(v, op, "operands %s and %s must be float tiles of one element type", tstr(x, a), tstr(y, b));
    return;
  }
  const Attr *ta = attr_get(&op->attrs, "transpose_a"), *tb = attr_get(&op->attrs, "transpose_b");
  if ((ta && (ta->kind != ATTR_INT || (ta->i != 0 && ta->i != 1))) ||
      (tb && (tb->kind != ATTR_INT || (tb->i != 0 && tb->i != 1)))) {
    report(v, op, "'transpose_a' and 'transpose_b' must be 0 or 1");
    return;
  }
  bool trans_a = ta && ta->i == 1, trans = tb && tb->i == 1;
  int m = trans_a ? x.cols : x.rows, ka = trans_a ? x.rows : x.cols;
  int k = trans ? y.cols : y.rows, n = trans ? y.rows : y.cols;
  const Attr *bc = attr_get(&op->attrs, "b_col0");
  if (bc) {
    /* B's columns b_col0 .. b_col0 + N - 1, N the result's width */
    int w = res(op, 0).kind == TYPE_TILE ? res(op, 0).cols : 0;
    if (bc->kind != ATTR_INT || trans || bc->i < 0 || bc->i % 16 || w < 1 || bc->i + w > n) {
      report(v, op, "'b_col0' must be a multiple of 16 with the result's columns inside B %s "
             "(not transposed)", tstr(y, b));
      return;
    }
    n = w;
  }
  if (ka != k)
    report(v, op, "inner extents differ: %s%s times %s%s", tstr(x, a), trans_a ? " transposed" : "",
           tstr(y, b), trans ? " transposed" : "");
  Type want = type_tile(ELEM_F32, m, n, DIST_NONE);
  if (op->noperands == 3 && !same_shape_elem(opnd(op, 2), want))
    report(v, op, "accumulator %s, expected %s", tstr(opnd(op, 2), a), tstr(want, b));
  want_result(v, op, want);
  const Attr *as = attr_get(&op->attrs, "async");
  if (as && (as->kind != ATTR_INT || (as->i != 0 && as->i != 1)))
    report(v, op, "'async' must be 0 or 1");
  else if (as && as->i == 1)
    for (int u = 0; u < op->results[0]->nuses; u++)
      if (op->results[0]->uses[u].user->kind != OP_MMA_WAIT) {
        report(v, op, "the result of an async matmul is read by %s (only mma_wait may read it)",
               op_name(op->results[0]->uses[u].user->kind));
        break;
      }
}

/* How many async matmuls of blk lie strictly between ops a and b (a before
 * b), or -1 when a does not precede b in blk. */
static int async_between(const Op *a, const Op *b) {
  int n = 0;
  for (const Op *o = a->next; o; o = o->next) {
    if (o == b)
      return n;
    n += o->kind == OP_MATMUL && attr_int(&o->attrs, "async", 0) == 1;
  }
  return -1;
}

/* mma_wait x {pending = N}: x an async matmul's result in the same block,
 * N the async matmuls issued between them (the codegen's wait depth). */
static void check_mma_wait(Verifier *v, const Op *op) {
  if (!want_counts(v, op, 1, 1))
    return;
  const Op *mm = op->operands[0]->def;
  if (!mm || mm->kind != OP_MATMUL || attr_int(&mm->attrs, "async", 0) != 1) {
    report(v, op, "operand must be the result of an async matmul");
    return;
  }
  if (!type_eq(res(op, 0), opnd(op, 0)))
    report(v, op, "result must have the type of operand 0");
  const Attr *pa = attr_get(&op->attrs, "pending");
  int between = mm->parent == op->parent ? async_between(mm, op) : -1;
  if (!pa || pa->kind != ATTR_INT || pa->i < 0)
    report(v, op, "needs 'pending' >= 0");
  else if (between < 0)
    report(v, op, "the matmul must precede its wait in the same block");
  else if (pa->i != between)
    report(v, op, "'pending = %lld' but %d async matmuls are issued after the one it waits for",
           (long long)pa->i, between);
}

/* grad y, x -> dy/dx: float values, the result shaped as y. */
static void check_grad(Verifier *v, const Op *op) {
  if (!want_counts(v, op, 2, 1))
    return;
  Type y = opnd(op, 0), x = opnd(op, 1);
  if (!is_value_type(y) || !is_float_elem(y.elem) || !is_value_type(x) || !is_float_elem(x.elem)) {
    report(v, op, "operands must be float scalars or tiles");
    return;
  }
  if (!type_eq(res(op, 0), y))
    report(v, op, "result must have the type of operand 0");
}

static void check_rowreduce(Verifier *v, const Op *op) {
  if (!want_counts(v, op, 1, 1))
    return;
  Type x = opnd(op, 0);
  if (!is_tile(x) || !is_float_elem(x.elem)) {
    report(v, op, "operand must be a float tile");
    return;
  }
  want_result(v, op, type_tile(x.elem, x.rows, 1, DIST_NONE));
}

static void check_mask(Verifier *v, const Op *op) {
  char a[160], b[160];
  if (!want_counts(v, op, 2, 1))
    return;
  Type s = opnd(op, 0), c = opnd(op, 1);
  if (!is_tile(s) || !is_float_elem(s.elem)) {
    report(v, op, "operand 0 must be a float tile");
    return;
  }
  if (!is_value_type(c) || c.elem != ELEM_I1) {
    report(v, op, "condition must be i1");
    return;
  }
  Type t = broadcast_type(s, c, s.elem);
  if (t.kind == TYPE_NONE || t.rows != s.rows || t.cols != s.cols)
    report(v, op, "condition %s does not broadcast to %s", tstr(c, a), tstr(s, b));
  want_result(v, op, s);
}

static void check_rescale(Verifier *v, const Op *op) {
  char a[160], b[160];
  if (!want_counts(v, op, 2, 1))
    return;
  Type o = opnd(op, 0), s = opnd(op, 1);
  if (!is_tile(o) || !is_tile(s) || !is_float_elem(o.elem) || s.elem != o.elem || s.cols != 1 ||
      s.rows != o.rows) {
    report(v, op, "expects an R x C tile and an R x 1 tile of one float type, has %s and %s", tstr(o, a),
           tstr(s, b));
    return;
  }
  want_result(v, op, o);
}

static void check_xwarp(Verifier *v, const Op *op) {
  static const char *const kinds[] = {"max", "sum", NULL};
  if (!want_counts(v, op, 1, 1))
    return;
  if (!word_in(op, "kind", kinds))
    report(v, op, "needs 'kind' = max or sum");
  if (!is_tile(opnd(op, 0)))
    report(v, op, "operand must be a tile");
  else
    want_result(v, op, opnd(op, 0));
}

/* A yield ending a for/if region: its values match the op's results. */
static void check_region_yield(Verifier *v, const Op *op, const Block *blk, const char *which) {
  char a[160], b[160];
  const Op *y = blk->last;
  if (!y || y->kind != OP_YIELD) {
    report(v, op, "%s does not end with yield", which);
    return;
  }
  if (y->noperands != op->nresults) {
    report(v, op, "%s yields %d value%s for %d result%s", which, y->noperands, y->noperands == 1 ? "" : "s",
           op->nresults, op->nresults == 1 ? "" : "s");
    return;
  }
  for (int i = 0; i < y->noperands; i++)
    if (y->operands[i] && !type_eq(y->operands[i]->type, res(op, i)))
      report(v, op, "%s yields %s for result %d of type %s", which, tstr(y->operands[i]->type, a), i,
             tstr(res(op, i), b));
}

static void check_for(Verifier *v, const Op *op) {
  char a[160], b[160];
  static const char *const kinds[] = {"parallel", "sequential", NULL};
  if (op->noperands < 2 || op->nregions != 1) {
    report(v, op, "expects lo, hi and one region");
    return;
  }
  if (!is_index(opnd(op, 0)) || !is_index(opnd(op, 1)))
    report(v, op, "bounds must be index");
  if (!word_in(op, "kind", kinds))
    report(v, op, "needs 'kind' = parallel or sequential");
  int n = op->noperands - 2;
  if (op->nresults != n) {
    report(v, op, "has %d iter_args but %d results", n, op->nresults);
    return;
  }
  const Block *body = op->regions[0];
  if (body->nargs != 1 + n) {
    report(v, op, "body has %d arguments, expected %d (iv and iter_args)", body->nargs, 1 + n);
    return;
  }
  if (!is_index(body->args[0]->type))
    report(v, op, "induction variable must be index");
  for (int i = 0; i < n; i++) {
    Type init = opnd(op, 2 + i);
    if (!type_eq(body->args[1 + i]->type, init))
      report(v, op, "iter_arg %d has type %s but its init %s", i, tstr(body->args[1 + i]->type, a), tstr(init, b));
    if (!type_eq(res(op, i), init))
      report(v, op, "result %d has type %s but its init %s", i, tstr(res(op, i), a), tstr(init, b));
  }
  check_region_yield(v, op, body, "body");
}

static void check_if(Verifier *v, const Op *op) {
  if (op->noperands != 1 || op->nregions != 2) {
    report(v, op, "expects a condition and two regions");
    return;
  }
  Type c = opnd(op, 0);
  if (c.kind != TYPE_SCALAR || c.elem != ELEM_I1)
    report(v, op, "condition must be an i1 scalar");
  for (int r = 0; r < 2; r++) {
    if (op->regions[r]->nargs)
      report(v, op, "%s region has arguments", r ? "else" : "then");
    check_region_yield(v, op, op->regions[r], r ? "else region" : "then region");
  }
}

static void check_terminator(Verifier *v, const Op *op) {
  const Block *blk = op->parent;
  if (op->kind == OP_RETURN) {
    want_counts(v, op, 0, 0);
    if (!blk->parent_func || blk->parent_op)
      report(v, op, "return outside the kernel body");
    return;
  }
  want_counts(v, op, -1, 0);
  const Op *p = blk->parent_op;
  if (!p || (p->kind != OP_FOR && p->kind != OP_IF))
    report(v, op, "yield outside a for/if region");
}

static void check_kind_rules(Verifier *v, const Op *op) {
  if (op->nregions != 0 && op->kind != OP_FOR && op->kind != OP_IF)
    report(v, op, "only for and if have regions");
  switch (op->kind) {
  case OP_CONST: case OP_FULL: check_const(v, op); break;
  case OP_TILE_SIZE: check_tile_size(v, op); break;
  case OP_IOTA: check_iota(v, op); break;
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_REM: case OP_CEILDIV:
  case OP_MIN: case OP_MAX: case OP_CMP: case OP_AND: case OP_OR:
  case OP_XOR: case OP_MULHI: case OP_SHR:
    check_binary(v, op);
    break;
  case OP_NEG: case OP_EXP: case OP_EXP2: case OP_LOG: case OP_LOG2: case OP_TANH:
  case OP_SQRT: case OP_ABS: case OP_FLOOR: case OP_RECIP: case OP_NOT:
    check_unary(v, op);
    break;
  case OP_SELECT: check_select(v, op); break;
  case OP_CAST: check_cast(v, op); break;
  case OP_LOAD: check_load(v, op); break;
  case OP_STORE: check_store(v, op); break;
  case OP_LOAD_SCALAR: check_load_scalar(v, op); break;
  case OP_LOAD_PAGED: check_load_paged(v, op); break;
  case OP_GATHER: check_gather(v, op); break;
  case OP_SCATTER: check_scatter(v, op); break;
  case OP_REDUCE: check_reduce(v, op); break;
  case OP_MATMUL: check_matmul(v, op); break;
  case OP_MMA_WAIT: check_mma_wait(v, op); break;
  case OP_ROWMAX: case OP_ROWSUM: check_rowreduce(v, op); break;
  case OP_MASK: check_mask(v, op); break;
  case OP_RESCALE: check_rescale(v, op); break;
  case OP_XWARP_REDUCE: check_xwarp(v, op); break;
  case OP_GRAD: check_grad(v, op); break;
  case OP_FOR: check_for(v, op); break;
  case OP_IF: check_if(v, op); break;
  case OP_YIELD: case OP_RETURN: check_terminator(v, op); break;
  default: report(v, op, "unknown op kind %d", (int)op->kind);
  }
}

/* ------------------------------------------ operands, uses, dominance */

/* Every use recorded on value x names a live op of this kernel that holds x
 * at that operand index. */
static void check_value_uses(Verifier *v, const Op *where, const Value *x) {
  for (int i = 0; i < x->nuses; i++) {
    const Use *u = &x->uses[i];
    if (!u->user || u->index < 0 || u->index >= u->user->noperands || u->user->operands[u->index] != x ||
        op_func(u->user) != v->f) {
      report(v, where, "use list of %s holds a stale use (operand %d of a %s)", names_get(&v->names, x),
             u->index, u->user ? op_name(u->user->kind) : "null op");
      return;
    }
  }
}

static void check_operands(Verifier *v, const Op *op) {
  for (int i = 0; i < op->noperands; i++) {
    const Value *x = op->operands[i];
    if (!x) {
      report(v, op, "operand %d is null", i);
      continue;
    }
    int n = 0;
    for (int u = 0; u < x->nuses; u++)
      n += x->uses[u].user == op && x->uses[u].index == i;
    if (n != 1)
      report(v, op, "operand %d (%s) appears %d times in its use list", i, names_get(&v->names, x), n);
    if (ptrmap_get(&v->visible, x, 0) != 1)
      report(v, op, "operand %d (%s) does not dominate this use", i, names_get(&v->names, x));
    if (x->type.kind == TYPE_TILE && x->type.dist == DIST_PARTIAL && op->kind != OP_XWARP_REDUCE)
      report(v, op, "partial value %s used by %s (only xwarp_reduce may use it)", names_get(&v->names, x),
             op_name(op->kind));
  }
}

static void verify_block(Verifier *v, const Block *b, int depth);

static void verify_op(Verifier *v, const Op *op, int depth) {
  check_operands(v, op);
  check_kind_rules(v, op);
  for (int i = 0; i < op->nresults; i++) {
    Value *r = op->results[i];
    if (!r || r->def != op || r->result_index != i) {
      report(v, op, "result %d does not point back to its op", i);
      continue;
    }
    check_type(v, op, r->type, "result");
  }
  for (int r = 0; r < op->nregions; r++) {
    const Block *blk = op->regions[r];
    if (!blk || blk->parent_op != op) {
      report(v, op, "region %d does not point back to its op", r);
      continue;
    }
    verify_block(v, blk, depth + 1);
  }
  for (int i = 0; i < op->nresults; i++)
    if (op->results[i]) {
      check_value_uses(v, op, op->results[i]);
      ptrmap_put(&v->visible, op->results[i], 1);
    }
}

/* Checks a block's args and ops; values it defines are visible to the ops
 * after them and to nested regions, and hidden again at the end. */
static void verify_block(Verifier *v, const Block *b, int depth) {
  if (depth > 1000) {
    report(v, NULL, "regions nested too deeply (a cycle?)");
    return;
  }
  const Op *owner = b->parent_op;
  for (int i = 0; i < b->nargs; i++) {
    Value *a = b->args[i];
    if (a->block != b || a->arg_index != i || a->def)
      report(v, owner, "block argument %d does not point back to its block", i);
    check_type(v, owner, a->type, "block argument");
    check_value_uses(v, owner, a);
    ptrmap_put(&v->visible, a, 1);
  }
  const Op *prev = NULL;
  for (const Op *o = b->first; o; prev = o, o = o->next) {
    if (o->parent != b || o->prev != prev) {
      report(v, o, "op is not linked into its block correctly");
      break;
    }
    if (prev && (prev->kind == OP_YIELD || prev->kind == OP_RETURN))
      report(v, o, "op after the block's terminator");
    verify_op(v, o, depth);
  }
  if (prev != b->last)
    report(v, owner, "block's last op is not the end of its op list");
  for (int i = 0; i < b->nargs; i++)
    ptrmap_put(&v->visible, b->args[i], 0);
  for (const Op *o = b->first; o; o = o->next) {
    for (int i = 0; i < o->nresults; i++)
      if (o->results[i])
        ptrmap_put(&v->visible, o->results[i], 0);
    if (o == prev)
      break;
  }
}

/* `layout = varlen` (packed sequences, docs/abi.md): the kernel's rows are
 * found through cu_seqlens, which forward and backward kernels take and
 * whose batch is the outermost parallel loop (codegen binds each block's
 * sequence from blockIdx.z). */
static void check_layout(Verifier *v, const Func *f) {
  const Attr *a = attr_get(&f->attrs, "layout");
  if (!a)
    return;
  const char *l = attr_str(&f->attrs, "layout", "");
  const char *mode = attr_str(&f->attrs, "mode", "forward");
  if (strcmp(l, "varlen") != 0 && strcmp(l, "padded") != 0)
    report(v, NULL, "layout must be varlen or padded; got '%s'", l);
  else if (strcmp(l, "varlen") == 0 && strcmp(mode, "forward") != 0 &&
           strcmp(mode, "backward") != 0)
    report(v, NULL, "layout = varlen needs a forward or backward kernel (mode = %s)", mode);
}

static int verify_func(const Func *f, const char *after, FILE *diag) {
  Verifier v = {.f = f, .after = after, .diag = diag};
  v.symbolic_ok = attr_get(&f->attrs, "tile_q") == NULL;
  names_init_func(&v.names, f);
  if (!f->body || f->body->parent_func != f) {
    report(&v, NULL, "kernel body does not point back to its kernel");
  } else {
    for (int i = 0; i < f->nargs; i++) {
      Type t = f->args[i]->type;
      bool scalar = t.kind == TYPE_SCALAR &&
                    (t.elem == ELEM_INDEX || t.elem == ELEM_U32 || t.elem == ELEM_F32);
      if (t.kind != TYPE_TENSOR && !scalar)
        report(&v, NULL, "kernel argument %s must be a tensor or an index, u32 or f32 scalar",
               names_get(&v.names, f->args[i]));
    }
    check_layout(&v, f);
    verify_block(&v, f->body, 0);
    const Op *t = f->body->last;
    if (!t || t->kind != OP_RETURN)
      report(&v, t, "kernel body does not end with return");
  }
  names_free(&v.names);
  ptrmap_free(&v.visible);
  return v.nerrors;
}

int module_verify(const Module *m, const char *after, FILE *diag) {
  int n = 0;
  for (int i = 0; i < m->nfuncs; i++)
    n += verify_func(m->funcs[i], after, diag);
  return n;
}
