/* warp_split_kv.c - split-KV inside a block: the warps take disjoint keys of
 * every K/V tile, each with its own softmax state, merged once after the loop.
 *
 * A decode Q tile has few live rows (q_len x the GQA group: 4 at q_len 1 and
 * GQA 32/8, 1 for MHA), so its 16-row MMA slice cannot be split by rows over
 * 4 warps (partition-warps leaves such kernels alone). In the FA1 split-K form
 * the warps already split each tile's keys, but every step reduces the row
 * max, the row sum and P V across the warps through shared memory (three
 * barriers and a 16 x dv exchange a step). Flash-Decoding's identity says the
 * warps need not agree on anything until the end: warp w keeps its own
 * (m_w, l_w, O_w) over its own keys, and after the loop
 *   M = max_w m_w,  a_w = e^{m_w - M}  (0 for m_w = -inf),
 *   l = sum_w a_w l_w,  O = sum_w a_w O_w        (O still unnormalised),
 * which is the state of one softmax over all the keys.
 *
 * Rewrite of the K/V loop (defer-rescale's form: O unnormalised in the loop)
 * carrying O (full 0), l (full 0), m (full -inf):
 *  - its xwarp_reduce ops go (their uses take the operand);
 *  - the per-warp row statistics and P V (`partial` there) become `warp`
 *    values, and so does every value of the step computed from them that is
 *    a row vector or has their shape, the iter args and the loop results:
 *    the scores S and P stay `cols` (each warp its own keys);
 *  - `add acc, (matmul P, V)` carries acc in the MMA accumulator;
 *  - after the loop, the merge above (two xwarp_reduce of row vectors and
 *    one of O) replaces the loop's O, l, m for the epilogue.
 * The values are those of the one-softmax program (the interpreter, which
 * ignores placement, computes a_w = 1); only placement and the order of the
 * sums change. Runs where the rows cannot be split (tile_q < 16 x warps),
 * so forward kernels (and partition-warps-disabled ablations) keep their
 * meaning. Disabled, such a kernel keeps the per-step reductions.
 */
#include <math.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

typedef struct KvLoop {
  Op *loop;
  int io, il, im; /* iter-arg positions of O, l, m */
} KvLoop;

static bool is_tile(const Value *v) { return v->type.kind == TYPE_TILE; }

/* A sequential loop carrying O, l, m whose step reduces across warps and
 * keeps O unnormalised (no recip: defer-rescale ran). */
static bool match(KvLoop *k, Op *op) {
  if (op->kind != OP_FOR || for_is_parallel(op) || op->nresults < 3)
    return false;
  k->loop = op;
  Block *body = for_body(op);
  return kv_loop_state(op, &k->io, &k->il, &k->im) && block_has_op(body, OP_XWARP_REDUCE) &&
         !block_has_op(body, OP_RECIP);
}

typedef struct Find {
  KvLoop k;
  bool found;
} Find;

static void find_fn(Op *op, void *ctx) {
  Find *fd = ctx;
  if (!fd->found)
    fd->found = match(&fd->k, op);
}

/* --------------------------------------------------------- retyping */

static bool set_warp(Value *v) {
  if (!is_tile(v) || v->type.dist == DIST_WARP)
    return false;
  v->type.dist = DIST_WARP;
  return true;
}

/* A result is per warp when an operand is and the result is a row vector or
 * has that operand's shape (a per-warp row vector broadcast over the warp's
 * own columns of S keeps S's `cols`). */
static bool op_result_warp(const Op *op, const Value *r) {
  for (int i = 0; i < op->noperands; i++) {
    const Value *x = op->operands[i];
    if (is_tile(x) && x->type.dist == DIST_WARP &&
        (r->type.cols == 1 || (r->type.rows == x->type.rows && r->type.cols == x->type.cols)))
      return true;
  }
  return false;
}

static bool retype_block(Block *b);

/* An if's result i is per warp when either region yields a per-warp value. */
static bool retype_if(Op *op) {
  bool changed = false;
  for (int r = 0; r < op->nregions; r++)
    changed |= retype_block(op->regions[r]);
  for (int r = 0; r < op->nregions; r++) {
    Op *y = block_terminator(op->regions[r]);
    for (int i = 0; y && i < y->noperands && i < op->nresults; i++)
      if (is_tile(y->operands[i]) && y->operands[i]->type.dist == DIST_WARP)
        changed |= set_warp(op->results[i]);
  }
  return changed;
}

static bool retype_block(Block *b) {
  bool changed = false;
  for (Op *op = b->first; op; op = op->next) {
    if (op->kind == OP_IF) {
      changed |= retype_if(op);
      continue;
    }
    if (op->kind == OP_FOR)
      changed |= retype_block(for_body(op));
    for (int i = 0; i < op->nresults; i++) {
      Value *r = op->results[i];
      if (!is_tile(r))
        continue;
      if (r->type.dist == DIST_PARTIAL || (r->type.dist != DIST_WARP && op_result_warp(op, r)))
        changed |= set_warp(r);
    }
  }
  return changed;
}

/* Removes the step's cross-warp reductions and makes the state per warp, to
 * a fixed point (an iter arg is per warp when its yield is). */
static void make_state_per_warp(Module *m, KvLoop *k) {
  Op *loop = k->loop;
  Block *body = for_body(loop);
  OpList xr = collect_ops_in(body, OP_XWARP_REDUCE);
  for (int i = 0; i < xr.n; i++) {
    value_replace_all_uses(xr.v[i]->results[0], xr.v[i]->operands[0]);
    op_erase(xr.v[i]);
  }
  oplist_free(&xr);
  set_warp(for_iter_arg(loop, k->io));
  set_warp(for_iter_arg(loop, k->il));
  set_warp(for_iter_arg(loop, k->im));
  Op *y = block_terminator(body);
  for (bool changed = true; changed;) {
    changed = retype_block(body);
    for (int i = 0; y && i < y->noperands && i < loop->nresults; i++)
      if (is_tile(y->operands[i]) && y->operands[i]->type.dist == DIST_WARP)
        changed |= set_warp(for_iter_arg(loop, i));
  }
  /* Inits and results take the iter args' types: a fresh full for each
   * retyped init (the old one may have other users). */
  Builder b = builder_before(m, loop);
  for (int i = 0; i < loop->nresults; i++) {
    Type t = for_iter_arg(loop, i)->type;
    Value *init = loop->operands[2 + i];
    double c;
    if (!type_eq(init->type, t) && value_const(init, &c)) {
      Value *n = build_full(&b, t, c);
      n->name = init->name;
      op_set_operand(loop, 2 + i, n);
    }
    loop->results[i]->type = t;
  }
}

/* ------------------------------------------------------------ merge */

static Value *xwarp(Builder *b, Value *x, Dist to, const char *kind) {
  Type t = x->type;
  t.dist = to;
  Op *op = build_op(b, OP_XWARP_REDUCE, &x, 1, &t, 1, 0);
  op_set_attr_word(op, "kind", kind);
  return op->results[0];
}

static void emit_merge(Module *m, KvLoop *k) {
  Op *loop = k->loop;
  Value *ow = loop->results[k->io], *lw = loop->results[k->il], *mw = loop->results[k->im];
  Builder b = builder_after(m, loop);
  Value *mx = xwarp(&b, mw, DIST_COLS, "max");
  mx->name = "mmerged";
  Value *ninf = build_const(&b, type_scalar(ELEM_F32), -INFINITY);
  Value *f0 = build_const(&b, type_scalar(ELEM_F32), 0.0);
  Value *safe = build_select(&b, build_cmp(&b, "eq", mx, ninf), f0, mx);
  Value *d = build_binary(&b, OP_SUB, mw, safe);
  Value *a = build_unary(&b, OP_EXP, d);
  a->name = "awarp";
  Value *lsc = build_binary(&b, OP_MUL, lw, a);
  Value *l = xwarp(&b, lsc, DIST_COLS, "sum");
  l->name = "lmerged";
  Value *rs_ops[2] = {ow, a};
  Value *osc = build_op(&b, OP_RESCALE, rs_ops, 2, &ow->type, 1, 0)->results[0];
  Value *o = xwarp(&b, osc, DIST_COLS, "sum");
  o->name = "omerged";
  replace_uses_except(mw, mx, (Op *[]){mx->def, d->def}, 2);
  replace_uses_except(lw, l, (Op *[]){lsc->def}, 1);
  replace_uses_except(ow, o, (Op *[]){osc->def}, 1);
}

int pass_warp_split_kv(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  long tile_q = attr_int(&f->attrs, "tile_q", 0), warps = attr_int(&f->attrs, "warps", 1);
  if (tile_q <= 0 || tile_q >= 16 * warps)
    return 0;
  Find fd = {{0}, false};
  func_walk(f, find_fn, &fd);
  if (!fd.found)
    return 0;
  make_state_per_warp(m, &fd.k);
  emit_merge(m, &fd.k);
  fuse_matmul_accumulators(m, f);
  dce_block(f->body);
  return 0;
}
