/* builder.c - the typed builders on top of build_op (ir.h): constants and
 * full tiles, elementwise ops with their broadcast result types, compares,
 * selects, casts, and the for / if / yield structure. */
#include "ir/ir.h"

#include <assert.h>
#include <string.h>

/* A const or full op of type t and value v (an integer attribute for index
 * and i1 elements, a float otherwise). */
static Value *build_valued(Builder *b, OpKind kind, Type t, double v) {
  Op *op = build_op(b, kind, NULL, 0, &t, 1, 0);
  if (t.elem == ELEM_INDEX || t.elem == ELEM_I1 || t.elem == ELEM_U32)
    attr_set_int(b->m, &op->attrs, "value", (int64_t)v);
  else
    attr_set_float(b->m, &op->attrs, "value", v);
  return op->results[0];
}

Value *build_const(Builder *b, Type t, double v) { return build_valued(b, OP_CONST, t, v); }

Value *build_index(Builder *b, int64_t v) { return build_const(b, type_index(), (double)v); }

Value *build_full(Builder *b, Type tile, double v) { return build_valued(b, OP_FULL, tile, v); }

Value *build_unary(Builder *b, OpKind k, Value *x) {
  return build_op(b, k, &x, 1, &x->type, 1, 0)->results[0];
}

/* Broadcast of one extent: equal, or one side 1. */
static bool bcast_dim(int a, int b, int *out) {
  if (a == b) {
    *out = a;
    return true;
  }
  if (a == 1) {
    *out = b;
    return true;
  }
  if (b == 1) {
    *out = a;
    return true;
  }
  return false;
}

Type broadcast_type(Type x, Type y, ElemType elem) {
  if (x.kind == TYPE_SCALAR && y.kind == TYPE_SCALAR)
    return type_scalar(elem);
  if (x.kind == TYPE_SCALAR)
    return type_tile(elem, y.rows, y.cols, y.dist);
  if (y.kind == TYPE_SCALAR)
    return type_tile(elem, x.rows, x.cols, x.dist);
  if (x.kind != TYPE_TILE || y.kind != TYPE_TILE)
    return type_none();
  int r, c;
  if (!bcast_dim(x.rows, y.rows, &r) || !bcast_dim(x.cols, y.cols, &c))
    return type_none();
  /* The distribution of the larger operand wins. */
  Dist d = (x.rows == r && x.cols == c) ? x.dist : y.dist;
  return type_tile(elem, r, c, d);
}

Value *build_gather(Builder *b, Value *t, Value *const *idx, int n) {
  Value *ops[5] = {t};
  Type shape = type_index();
  for (int i = 0; i < n && i < 4; i++) {
    ops[1 + i] = idx[i];
    shape = broadcast_type(shape, idx[i]->type, ELEM_INDEX);
  }
  assert(shape.kind != TYPE_NONE && n == t->type.rank);
  shape.elem = t->type.elem == ELEM_I32 ? ELEM_INDEX : ELEM_F32;
  return build_op(b, OP_GATHER, ops, 1 + n, &shape, 1, 0)->results[0];
}

Value *build_binary(Builder *b, OpKind k, Value *x, Value *y) {
  Type t = broadcast_type(x->type, y->type, x->type.elem);
  assert(t.kind != TYPE_NONE);
  Value *ops[2] = {x, y};
  return build_op(b, k, ops, 2, &t, 1, 0)->results[0];
}

Value *build_cmp(Builder *b, const char *pred, Value *x, Value *y) {
  Type t = broadcast_type(x->type, y->type, ELEM_I1);
  assert(t.kind != TYPE_NONE);
  Value *ops[2] = {x, y};
  Op *op = build_op(b, OP_CMP, ops, 2, &t, 1, 0);
  attr_set_word(b->m, &op->attrs, "pred", pred);
  return op->results[0];
}

Value *build_select(Builder *b, Value *c, Value *x, Value *y) {
  Type t = broadcast_type(broadcast_type(c->type, x->type, x->type.elem), y->type, x->type.elem);
  assert(t.kind != TYPE_NONE);
  Value *ops[3] = {c, x, y};
  return build_op(b, OP_SELECT, ops, 3, &t, 1, 0)->results[0];
}

Value *build_cast(Builder *b, Value *x, ElemType to) {
  Type t = x->type;
  t.elem = to;
  return build_op(b, OP_CAST, &x, 1, &t, 1, 0)->results[0];
}

Op *build_for(Builder *b, Value *lo, Value *hi, bool parallel,
              Value *const *inits, int ninits, const char *iv_name) {
  Module *m = b->m;
  Value *ops[2 + 64];
  Type types[64] = {{0}}; /* zeroed: gcc -O2 warns (falsely) when ninits is 0 */
  assert(ninits <= 64);
  ops[0] = lo;
  ops[1] = hi;
  for (int i = 0; i < ninits; i++) {
    ops[2 + i] = inits[i];
    types[i] = inits[i]->type;
  }
  Op *op = build_op(b, OP_FOR, ops, 2 + ninits, types, ninits, 1);
  attr_set_word(m, &op->attrs, "kind", parallel ? "parallel" : "sequential");
  block_add_arg(m, op->regions[0], type_index(), iv_name);
  for (int i = 0; i < ninits; i++)
    block_add_arg(m, op->regions[0], inits[i]->type, NULL);
  return op;
}

Value *for_iv(Op *forop) { return forop->regions[0]->args[0]; }
Value *for_iter_arg(Op *forop, int i) { return forop->regions[0]->args[1 + i]; }
Block *for_body(Op *forop) { return forop->regions[0]; }

bool for_is_parallel(Op *forop) {
  return strcmp(attr_str(&forop->attrs, "kind", "sequential"), "parallel") == 0;
}

Op *build_if(Builder *b, Value *cond, const Type *result_types, int nresults) {
  return build_op(b, OP_IF, &cond, 1, result_types, nresults, 2);
}

Op *build_yield(Builder *b, Value *const *vals, int n) {
  return build_op(b, OP_YIELD, vals, n, NULL, 0, 0);
}
