/* verifier_compute.c - the verifier's rules for reduce, matmul and
 * mma_wait, grad, the row reductions, mask, rescale and xwarp_reduce
 * (verifier.c). */
#include <string.h>

#include "ir/verifier_internal.h"

/* reduce {kind = max|min|sum} tile -> scalar of its element type */
void check_reduce(Verifier *v, const Op *op) {
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

void check_matmul(Verifier *v, const Op *op) {
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
  /* a column split over warp groups (passes/group_dq.c): A^T read whole by
   * every group, no accumulator to split */
  if (res(op, 0).kind == TYPE_TILE && res(op, 0).dist == DIST_GROUP_COLS &&
      (!trans_a || trans || op->noperands != 2))
    report(v, op, "a group_cols result needs transpose_a, an untransposed B and no accumulator");
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
 * N (the codegen's wait depth) at most the async matmuls issued between
 * them: deeper, the wait would not complete x. Shallower waits for more
 * than x: 0 after an earlier wait of a later matmul, where nothing is in
 * flight (ptxas serializes every wgmma of a kernel at a wait deeper than
 * the groups in flight, docs/perf-log.md P139). */
void check_mma_wait(Verifier *v, const Op *op) {
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
  else if (pa->i > between)
    report(v, op, "'pending = %lld' but only %d async matmuls are issued after the one it waits for",
           (long long)pa->i, between);
}

/* grad y, x -> dy/dx: float values, the result shaped as y. */
void check_grad(Verifier *v, const Op *op) {
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

void check_rowreduce(Verifier *v, const Op *op) {
  if (!want_counts(v, op, 1, 1))
    return;
  Type x = opnd(op, 0);
  if (!is_tile(x) || !is_float_elem(x.elem)) {
    report(v, op, "operand must be a float tile");
    return;
  }
  want_result(v, op, type_tile(x.elem, x.rows, 1, DIST_NONE));
}

void check_mask(Verifier *v, const Op *op) {
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

void check_rescale(Verifier *v, const Op *op) {
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

void check_xwarp(Verifier *v, const Op *op) {
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
