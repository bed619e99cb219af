/* verifier_elementwise.c - the verifier's rules for constants, iota and the
 * elementwise ops (verifier.c). */
#include <string.h>

#include "ir/verifier_internal.h"

static void check_value_attr(Verifier *v, const Op *op) {
  const Attr *a = attr_get(&op->attrs, "value");
  if (!a || (a->kind != ATTR_INT && a->kind != ATTR_FLOAT))
    report(v, op, "needs a numeric 'value' attribute");
}

void check_const(Verifier *v, const Op *op) {
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

void check_tile_size(Verifier *v, const Op *op) {
  static const char *const dims[] = {"q", "kv", NULL};
  if (!want_counts(v, op, 0, 1))
    return;
  if (!is_index(res(op, 0)))
    report(v, op, "result must be index");
  if (!word_in(op, "dim", dims))
    report(v, op, "needs 'dim' = q or kv");
}

/* iota {axis} [%base] [{and = M}]: (base + i) & M along axis. */
void check_iota(Verifier *v, const Op *op) {
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
void check_binary(Verifier *v, const Op *op) {
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
    static const char *const preds[] = {"lt", "le", "gt", "ge", "eq", "ne", "hlt", NULL};
    if (!word_in(op, "pred", preds))
      report(v, op, "needs 'pred' = lt, le, gt, ge, eq, ne or hlt");
    else if (!strcmp(attr_str(&op->attrs, "pred", ""), "hlt") && !bits)
      report(v, op, "'hlt' compares u32 operands (their low 16 bits as binary16)");
  }
  ElemType e = (op->kind == OP_CMP || logic) ? ELEM_I1 : x.elem; /* u32 and/or: u32 */
  Type t = broadcast_type(x, y, e);
  if (t.kind == TYPE_NONE)
    report(v, op, "operand shapes %s and %s do not broadcast", tstr(x, a), tstr(y, b));
  else
    want_result(v, op, t);
}

void check_unary(Verifier *v, const Op *op) {
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

void check_select(Verifier *v, const Op *op) {
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

void check_cast(Verifier *v, const Op *op) {
  if (!want_counts(v, op, 1, 1))
    return;
  const Attr *tr = attr_get(&op->attrs, "transpose");
  if (tr) {
    /* a staged R x C tile read as a C x R register tile (stage-inputs'
     * rectangle in the backward's K/V-outer kernels, whose S^T is [k, q]) */
    Type x = opnd(op, 0), r = res(op, 0);
    if (tr->kind != ATTR_INT || tr->i != 1)
      report(v, op, "'transpose' must be 1");
    else if (!is_tile(x) || x.dist != DIST_NONE || (x.elem != ELEM_BF16 && x.elem != ELEM_F16))
      report(v, op, "a cast {transpose = 1} reads a staged bf16 or f16 tile");
    else if (!is_tile(r) || r.dist == DIST_NONE || !is_float_elem(r.elem) || r.rows != x.cols ||
             r.cols != x.rows)
      report(v, op, "a cast {transpose = 1} of an R x C tile gives a C x R register tile of floats");
    return;
  }
  if (!is_value_type(opnd(op, 0)) || !same_shape(opnd(op, 0), res(op, 0)))
    report(v, op, "cast must keep the shape");
  /* u32 <-> index (modulo 2^32), u32 -> float; nothing else touches u32 */
  ElemType from = opnd(op, 0).elem, to = res(op, 0).elem;
  if ((from == ELEM_U32 && to != ELEM_U32 && to != ELEM_INDEX && !is_float_elem(to)) ||
      (to == ELEM_U32 && from != ELEM_U32 && from != ELEM_INDEX))
    report(v, op, "a cast touching u32 goes to or from index, or from u32 to a float");
}
