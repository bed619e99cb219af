/* fold_scale.c - moves the softmax scale multiply past the masks and the
 * row max, so that codegen can fold it into the exponent (FA2's
 * exp2(s * scale * log2e - m * log2e): one FFMA per score element instead
 * of an FMUL and an FFMA).
 *
 * The frontend emits `%ss = mul %s, %scale` right after QK^T. With c > 0 a
 * constant, these rewrites are exact in floating point (x -> x * c is
 * monotone, also after rounding, and -inf * c = -inf):
 *   R1  mask(mul(x, c), cond)              -> mul(mask(x, cond), c)
 *   R2  if ... yield mul(x_k, c) (every branch, same position, same c)
 *                                          -> yield x_k; mul(result, c) after the if
 *   R3  rowmax(mul(x, c))                  -> mul(rowmax(x), c)   (R x 1: per row;
 *                                             not on a partial row max, split-K)
 * Nothing else is moved: with a score modifier (softcap, a bias) between the
 * scale and the mask, the mask's operand is not a `mul` by a constant and the
 * kernel is left as it is. What remains is `exp(sub(mul(x, c), m))`, which
 * codegen lowers as ex2(fma(x, c * log2e, -m * log2e)); the `mul` itself then
 * has no other use and disappears.
 */
#include "passes/pass_util.h"
#include "passes/passes.h"

/* v = mul(x, c) on an f32 tile with c a positive scalar constant. */
static bool scaled(Value *v, Value **x, Value **c) {
  Op *d = v->def;
  double k;
  if (!d || d->kind != OP_MUL || d->noperands != 2 || v->type.kind != TYPE_TILE ||
      v->type.elem != ELEM_F32)
    return false;
  Value *a = d->operands[0], *s = d->operands[1];
  if (s->type.kind != TYPE_SCALAR || s->type.elem != ELEM_F32 || !value_const(s, &k) || !(k > 0))
    return false;
  if (!type_eq(a->type, v->type))
    return false;
  *x = a;
  *c = s;
  return true;
}

static bool r1_mask(Module *m, Func *f) {
  bool changed = false;
  OpList l = collect_ops(f, OP_MASK);
  for (int i = 0; i < l.n; i++) {
    Op *mk = l.v[i];
    Value *x, *c;
    if (mk->noperands != 2 || !scaled(mk->operands[0], &x, &c))
      continue;
    Builder b = builder_before(m, mk);
    Value *ops[2] = {x, mk->operands[1]};
    Type rt = mk->results[0]->type;
    Op *nm = build_op(&b, OP_MASK, ops, 2, &rt, 1, 0);
    Value *mul = build_binary(&b, OP_MUL, nm->results[0], c);
    if (!type_eq(mul->type, rt)) {
      op_erase(mul->def);
      op_erase(nm);
      continue;
    }
    mul->name = mk->results[0]->name;
    value_replace_all_uses(mk->results[0], mul);
    op_erase(mk);
    changed = true;
  }
  oplist_free(&l);
  return changed;
}

static bool r2_if(Module *m, Func *f) {
  bool changed = false;
  OpList l = collect_ops(f, OP_IF);
  for (int i = 0; i < l.n; i++) {
    Op *ifop = l.v[i];
    if (ifop->nregions != 2)
      continue;
    Op *y0 = block_terminator(ifop->regions[0]), *y1 = block_terminator(ifop->regions[1]);
    if (!y0 || !y1 || y0->kind != OP_YIELD || y1->kind != OP_YIELD)
      continue;
    for (int r = 0; r < ifop->nresults; r++) {
      Value *x0, *c0, *x1, *c1;
      if (r >= y0->noperands || r >= y1->noperands || !scaled(y0->operands[r], &x0, &c0) ||
          !scaled(y1->operands[r], &x1, &c1) || c0 != c1 || !c0->def ||
          c0->def->parent != f->body)
        continue;
      Value *res = ifop->results[r];
      op_set_operand(y0, r, x0);
      op_set_operand(y1, r, x1);
      Builder b = builder_after(m, ifop);
      Value *mul = build_binary(&b, OP_MUL, res, c0);
      replace_uses_except(res, mul, &mul->def, 1);
      changed = true;
    }
  }
  oplist_free(&l);
  return changed;
}

static bool r3_rowmax(Module *m, Func *f) {
  bool changed = false;
  OpList l = collect_ops(f, OP_ROWMAX);
  for (int i = 0; i < l.n; i++) {
    Op *rm = l.v[i];
    Value *x, *c;
    /* A partial row max (split-K, partition-warps off) feeds xwarp_reduce,
     * which must take it directly: left as it is. */
    if (rm->noperands != 1 || rm->results[0]->type.dist == DIST_PARTIAL ||
        !scaled(rm->operands[0], &x, &c))
      continue;
    Builder b = builder_before(m, rm);
    Type rt = rm->results[0]->type;
    Op *nr = build_op(&b, OP_ROWMAX, &x, 1, &rt, 1, 0);
    Value *mul = build_binary(&b, OP_MUL, nr->results[0], c);
    if (!type_eq(mul->type, rt)) {
      op_erase(mul->def);
      op_erase(nr);
      continue;
    }
    mul->name = rm->results[0]->name;
    value_replace_all_uses(rm->results[0], mul);
    op_erase(rm);
    changed = true;
  }
  oplist_free(&l);
  return changed;
}

int pass_fold_scale(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  bool any = false;
  for (int round = 0; round < 8; round++) {
    bool c = r1_mask(m, f);
    c |= r2_if(m, f);
    any |= c;
    if (!c)
      break;
  }
  any |= r3_rowmax(m, f);
  if (any)
    dce_block(f->body);
  return 0;
}
