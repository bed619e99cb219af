/* unified_max.c - FlashDecoding++'s asynchronized softmax with a unified
 * max value (§4.3; docs/decode.md), with an exact fallback.
 *
 * The online softmax rescales O and l whenever a K/V tile raises the running
 * max m: a max reduction, an exp of (m - m_new) and a multiply of all of O per
 * step, and a serial dependence between steps. When the scores of a model
 * stay in a known range, a fixed phi (the spec's `unified_max`) can stand in
 * for m: p = exp(s - phi), l += rowsum(p), O += p V, no rescale at all.
 *
 * That is only safe while exp(s - phi) neither overflows nor underflows in
 * the precision that holds p (f32, then the dtype for the P V product).
 * Each step therefore computes, from the tile itself, a scalar
 *   %ok = all rows: (rowmax(s) - phi in [LO, HI] or the row is fully masked)
 *                   and (m == phi or m == -inf: the state is phi-based or empty)
 * (`reduce {kind = min}` over the i1 tile) and becomes
 *   %x:3 = if %ok { unified step; m = phi } else { the original online step }
 * The fallback keeps (O, l, m) consistent for any m, so any mix of the two
 * kinds of steps is exact; after a fallback step m != phi and the rest of the
 * split stays on the ordinary path. HI / LO: bf16 40 / -40 (f32 p and l keep
 * n * e^40 finite for n < 2^20 keys), f16 11 / -9 (p must stay a normal f16:
 * e^11 < 65504, e^-9 > 2^-14).
 *
 * Matches the step whatever ran before: the row max of the scores S (the
 * only rowmax of the kernel) and the K/V loop around it carrying O, l, m
 * (inits full 0, full 0, full -inf). When defer-rescale did not run, O is
 * kept normalised (a `recip` in the step) and the unified step keeps it so.
 * Does nothing without `unified_max` in the kernel attributes, on forward
 * kernels, or in the FA1 loop order (no loop-carried state).
 */
#include <math.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

typedef struct Step {
  Op *rowmax, *loop, *yield;
  Value *s, *v;   /* the scores and the V tile */
  int io, il, im; /* iter-arg positions of O, l, m */
  bool normalized;
  bool per_warp;  /* the state is per warp (warp-split-kv) */
  double phi_value;
  Value *phi, *ninf, *hi, *lo;
  Value *rm; /* the tile's row max (emit_ok) */
} Step;

static bool is_decode(Func *f) {
  return strcmp(attr_str(&f->attrs, "mode", "forward"), "decode") == 0 &&
         !attr_get(&f->attrs, "combine_of");
}

static Op *enclosing_for(Op *op) {
  for (Block *b = op->parent; b && b->parent_op; b = b->parent_op->parent)
    if (b->parent_op->kind == OP_FOR)
      return b->parent_op;
  return NULL;
}

/* Result i of every op between the block and the loop is yielded at
 * position i by the block around it: the step's yield is the loop's. */
static bool yields_through(Block *b, Op *loop) {
  Op *term = block_terminator(b);
  if (!term || term->kind != OP_YIELD || term->noperands != loop->nresults)
    return false;
  while (b->parent_op != loop) {
    Op *iff = b->parent_op;
    Op *outer = iff ? block_terminator(iff->parent) : NULL;
    if (!iff || iff->kind != OP_IF || !outer || outer->noperands != iff->nresults)
      return false;
    for (int i = 0; i < iff->nresults; i++)
      if (outer->operands[i] != iff->results[i])
        return false;
    b = iff->parent;
  }
  return true;
}

/* The step's P V product (a matmul without transpose_b after the scores)
 * gives the V tile; a recip says O is kept normalised. */
static bool scan_slice(Step *st) {
  for (Op *o = st->rowmax; o && o != st->yield; o = o->next) {
    if (o->kind == OP_RECIP)
      st->normalized = true;
    if (o->kind == OP_MATMUL && !attr_int(&o->attrs, "transpose_b", 0) && !st->v)
      st->v = o->operands[1];
  }
  return st->v && st->v->type.kind == TYPE_TILE;
}

static bool match(Func *f, Step *st) {
  OpList rm = collect_ops(f, OP_ROWMAX);
  st->rowmax = rm.n == 1 ? rm.v[0] : NULL;
  oplist_free(&rm);
  if (!st->rowmax)
    return false;
  st->s = st->rowmax->operands[0];
  st->loop = enclosing_for(st->rowmax);
  if (!st->loop || for_is_parallel(st->loop) || st->loop->nresults != 3 ||
      !kv_loop_state(st->loop, &st->io, &st->il, &st->im))
    return false;
  if (!st->s->def || st->s->def->parent != st->rowmax->parent)
    return false;
  st->yield = block_terminator(st->rowmax->parent);
  return yields_through(st->rowmax->parent, st->loop) && scan_slice(st);
}

/* ---------------------------------------------------------------- rewrite */

/* rowmax / rowsum in the distribution of x: `cols` tiles give a partial
 * result that an xwarp_reduce combines (partition-warps not run), or, when
 * each warp keeps its own state over its own keys (warp-split-kv), the
 * warp's own row statistic. */
static Value *row_reduce(Builder *b, OpKind k, Value *x, const Step *st) {
  Type t = x->type;
  t.cols = 1;
  if (t.dist == DIST_COLS && st->per_warp) {
    t.dist = DIST_WARP;
    return build_op(b, k, &x, 1, &t, 1, 0)->results[0];
  }
  bool split = t.dist == DIST_COLS;
  if (split)
    t.dist = DIST_PARTIAL;
  Value *r = build_op(b, k, &x, 1, &t, 1, 0)->results[0];
  if (!split)
    return r;
  t.dist = DIST_COLS;
  Op *xr = build_op(b, OP_XWARP_REDUCE, &r, 1, &t, 1, 0);
  op_set_attr_word(xr, "kind", k == OP_ROWMAX ? "max" : "sum");
  return xr->results[0];
}

/* acc + P V: the accumulator goes into the MMA unless P V is a split-K
 * partial product (`cols`), which needs its xwarp_reduce first. */
static Value *pv_product(Builder *b, Value *p, Value *v, Value *acc) {
  Type ot = acc->type;
  Value *ops[3] = {build_cast(b, p, v->type.elem), v, acc};
  if (ot.dist != DIST_COLS)
    return build_op(b, OP_MATMUL, ops, 3, &ot, 1, 0)->results[0];
  Type t = ot;
  t.dist = DIST_PARTIAL;
  Value *r = build_op(b, OP_MATMUL, ops, 2, &t, 1, 0)->results[0];
  Op *xr = build_op(b, OP_XWARP_REDUCE, &r, 1, &ot, 1, 0);
  op_set_attr_word(xr, "kind", "sum");
  return build_binary(b, OP_ADD, acc, xr->results[0]);
}

/* %ok: every row in range (or fully masked) and the state phi-based or empty. */
static Value *emit_ok(Builder *b, Step *st) {
  Value *mt = for_iter_arg(st->loop, st->im);
  Value *rm = row_reduce(b, OP_ROWMAX, st->s, st);
  st->rm = rm;
  Value *d = build_binary(b, OP_SUB, rm, st->phi);
  /* one builder call per statement: C leaves the order of arguments open */
  Value *below = build_cmp(b, "le", d, st->hi);
  Value *above = build_cmp(b, "ge", d, st->lo);
  Value *in = build_binary(b, OP_AND, below, above);
  Value *row = build_binary(b, OP_OR, in, build_cmp(b, "eq", rm, st->ninf));
  Value *at_phi = build_cmp(b, "eq", mt, st->phi);
  Value *empty = build_cmp(b, "eq", mt, st->ninf);
  Value *state = build_binary(b, OP_OR, at_phi, empty);
  Value *all = build_binary(b, OP_AND, row, state);
  Type t = type_scalar(ELEM_I1);
  Op *red = build_op(b, OP_REDUCE, &all, 1, &t, 1, 0);
  op_set_attr_word(red, "kind", "min");
  red->results[0]->name = "unified";
  return red->results[0];
}

/* p = exp(s - phi); l += rowsum p; O += p V; m = phi (O normalised again
 * when the kernel keeps it so). */
static void emit_unified(Builder *b, Step *st, Value **out) {
  Value *ot = for_iter_arg(st->loop, st->io), *lt = for_iter_arg(st->loop, st->il);
  Value *p = build_unary(b, OP_EXP, build_binary(b, OP_SUB, st->s, st->phi));
  p->name = "pu";
  Value *lnew = build_binary(b, OP_ADD, lt, row_reduce(b, OP_ROWSUM, p, st));
  Value *oacc = ot;
  if (st->normalized)
    oacc = build_op(b, OP_RESCALE, (Value *[]){ot, lt}, 2, &ot->type, 1, 0)->results[0];
  Value *onew = pv_product(b, p, st->v, oacc);
  if (st->normalized) {
    Value *inv = build_unary(b, OP_RECIP, lnew);
    onew = build_op(b, OP_RESCALE, (Value *[]){onew, inv}, 2, &ot->type, 1, 0)->results[0];
  }
  out[st->io] = onew;
  out[st->il] = lnew;
  /* m = phi only for rows this tile has keys for: a row that has seen none
   * keeps m = -inf, or a later fallback step would subtract phi from scores
   * far below it and underflow the whole row to l = 0 (LSE -inf). */
  Value *mt = for_iter_arg(st->loop, st->im);
  Value *masked = build_cmp(b, "eq", st->rm, st->ninf);
  Value *phi = build_full(b, mt->type, st->phi_value);
  out[st->im] = build_select(b, masked, mt, phi);
}

static void rewrite(Module *m, Func *f, Step *st) {
  bool f16 = strcmp(attr_str(&f->attrs, "dtype", "bf16"), "f16") == 0;
  Builder pb = builder_before(m, f->body->first);
  Type f32 = type_scalar(ELEM_F32);
  st->phi_value = attr_float(&f->attrs, "unified_max", 0);
  st->phi = build_const(&pb, f32, st->phi_value);
  st->phi->name = "phi";
  st->ninf = build_const(&pb, f32, -INFINITY);
  st->hi = build_const(&pb, f32, f16 ? 11 : 40);
  st->lo = build_const(&pb, f32, f16 ? -9 : -40);

  Op *first = st->s->def->next; /* the online step: from here to the yield */
  Builder b = builder_before(m, first);
  Value *ok = emit_ok(&b, st);
  Type types[3];
  for (int i = 0; i < 3; i++)
    types[i] = st->yield->operands[i]->type;
  Op *iff = build_if(&b, ok, types, 3);
  for (Op *o = first; o && o != st->yield;) {
    Op *next = o->next;
    op_move_to_end(o, iff->regions[1]);
    o = next;
  }
  Builder eb = builder_at_end(m, iff->regions[1]);
  build_yield(&eb, st->yield->operands, 3);
  Builder tb = builder_at_end(m, iff->regions[0]);
  Value *out[3];
  emit_unified(&tb, st, out);
  build_yield(&tb, out, 3);
  for (int i = 0; i < 3; i++)
    op_set_operand(st->yield, i, iff->results[i]);
}

int pass_unified_max(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  if (!is_decode(f) || !attr_get(&f->attrs, "unified_max") || attr_get(&f->attrs, "softmax"))
    return 0;
  Step st = {0};
  if (!match(f, &st))
    return 0;
  st.per_warp = for_iter_arg(st.loop, st.io)->type.dist == DIST_WARP;
  rewrite(m, f, &st);
  attr_set_word(m, &f->attrs, "softmax", "unified");
  return 0;
}
