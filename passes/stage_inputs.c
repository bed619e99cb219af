/* stage_inputs.c - the `stage-inputs` pass: a forward step's read of a
 * run-time input tile at the step's own (q, k) positions (a full additive
 * bias `bias[b, h, q, k]`) becomes a staged tile that warp-specialize's
 * producer copies with TMA, read by the consumers from shared memory,
 * instead of 64 scattered 2-byte global loads a thread and step with their
 * 64-bit address arithmetic (docs/perf-log.md P106: the bias row at 0.68x
 * FlexAttention with those gathers).
 *
 *   before (the K/V step)                      after
 *   %ki = add %iota1, %k0                      %ki = add %iota1, %k0
 *   %kc = max (min %ki, %seqlen_k - 1), 0      %bias_t = load %in_bias, %b, %h, %q0, %k0
 *   %x = gather %in_bias, %b, %h, %qc, %kc          {rect = 1} : tile<128x128xbf16>
 *       : tile<128x128xf32, rows>              %x = cast %bias_t : tile<128x128xf32, rows>
 *
 * with %qc = max(min(%iota0 + %q0, %seqlen_q - 1), 0) (or unclamped) and the
 * input's last two dims seqlen_q and seqlen_k. The values agree wherever
 * they are read: the rectangle reads 0 past seqlen_q and seqlen_k where the
 * gather read the clamped edge, and a forward kernel never stores a row past
 * seqlen_q (its rows are independent) and masks every column past seqlen_k
 * (the step's bounds mask `mask %sc, (cmp %ki, %seqlen_k {pred = lt})`,
 * which the pass requires) before anything reads it.
 *
 * The tensor map needs 16-byte aligned rows (a TMA constraint); a launch
 * whose input is not (odd seqlen_k, a base one element off, a stride 0 or
 * a strided last dim) runs a copy of the kernel made here before the
 * rewrite, @NAME_gathered {gather_of = "NAME"}, which every later pass
 * compiles like the kernel (runtime/launch.c picks it; docs/abi.md).
 *
 * Fires on forward kernels that warp-specialize will split with TMA rings
 * (sm_90a wgmma, two consumer warpgroups, producer and tma not turned off
 * in the schedule, padded layout) where one stage of each staged input fits
 * in shared memory beside two of K and V (warp-specialize gives the input
 * rings what is left: ring_stages).
 */
#include <stdio.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

enum { MAX_STAGED = 2 };

static bool is_const(const Value *v, double x) {
  double c;
  return v && value_const(v, &c) && c == x;
}

/* Is v `sub %extent, 1`? */
static bool is_extent_minus_one(const Value *v, const Value *extent) {
  return v && v->def && v->def->kind == OP_SUB && v->def->operands[0] == extent &&
         is_const(v->def->operands[1], 1);
}

/* v is `add %iota{axis}, %x` (either order) with %x an index scalar: *x. */
static bool iota_plus(Value *v, int axis, Value **x) {
  Op *d = v->def;
  if (!d || d->kind != OP_ADD)
    return false;
  for (int i = 0; i < 2; i++) {
    Op *io = d->operands[i]->def;
    Value *other = d->operands[1 - i];
    if (io && io->kind == OP_IOTA && attr_int(&io->attrs, "axis", -1) == axis &&
        !attr_get(&io->attrs, "and") && io->noperands == 0 &&
        other->type.kind == TYPE_SCALAR && other->type.elem == ELEM_INDEX) {
      *x = other;
      return true;
    }
  }
  return false;
}

/* The positions of one axis of the step: `%iota{axis} + %x`, or that clamped
 * to [0, extent - 1] (the frontend's max(min(i, extent - 1), 0)). Sets *x
 * (the tile's first position) and *pos (the unclamped positions). */
static bool axis_positions(Value *ix, int axis, const Value *extent, Value **x, Value **pos) {
  Op *mx = ix->def;
  if (mx && mx->kind == OP_MAX && is_const(mx->operands[1], 0)) {
    Op *mn = mx->operands[0]->def;
    if (!mn || mn->kind != OP_MIN || !is_extent_minus_one(mn->operands[1], extent))
      return false;
    ix = mn->operands[0];
  }
  *pos = ix;
  return iota_plus(ix, axis, x);
}

/* Does the step mask the columns past seqlen_k, `mask _, (cmp %pos,
 * %seqlen_k {pred = lt})`? */
static bool masks_past(Value *pos, const Value *seqlen_k) {
  for (int i = 0; i < pos->nuses; i++) {
    Op *c = pos->uses[i].user;
    if (!c || c->kind != OP_CMP || c->operands[0] != pos || c->operands[1] != seqlen_k ||
        strcmp(attr_str(&c->attrs, "pred", ""), "lt") != 0)
      continue;
    Value *cond = c->results[0];
    for (int j = 0; j < cond->nuses; j++)
      if (cond->uses[j].user && cond->uses[j].user->kind == OP_MASK)
        return true;
  }
  return false;
}

/* A gather the pass rewrites, and the scalars of its rectangle. */
typedef struct Staged {
  Op *gather;
  Value *q0, *k0;
} Staged;

/* Is g a gather of a 2-byte input [.., seqlen_q, seqlen_k] at the step's
 * (q, k) positions, into a tile of the step's shape? */
static bool match_gather(Func *f, Op *g, Type step, Staged *s) {
  Value *t = g->operands[0];
  Type tt = t->type, rt = g->results[0]->type;
  int r = tt.rank;
  Value *sq = func_arg(f, "seqlen_q"), *sk = func_arg(f, "seqlen_k"), *qpos, *kpos;
  if (!value_is_input_arg(t) || r < 2 || (tt.elem != ELEM_BF16 && tt.elem != ELEM_F16) ||
      tt.dims[r - 2] != DIM_SEQLEN_Q || tt.dims[r - 1] != DIM_SEQLEN_K || !sq || !sk ||
      rt.kind != TYPE_TILE || rt.rows != step.rows || rt.cols != step.cols ||
      rt.dist != step.dist || g->noperands != 1 + r)
    return false;
  for (int d = 1; d <= r - 2; d++)
    if (g->operands[d]->type.kind != TYPE_SCALAR)
      return false;
  s->gather = g;
  return axis_positions(g->operands[r - 1], 0, sq, &s->q0, &qpos) &&
         axis_positions(g->operands[r], 1, sk, &s->k0, &kpos) && masks_past(kpos, sk);
}

/* The forward's K/V step loop: sequential, carrying O, l, m, in a parallel
 * tile loop's body. */
static Op *step_loop(Func *f) {
  OpList loops = collect_ops(f, OP_FOR);
  Op *found = NULL;
  int io, il, im;
  for (int i = 0; i < loops.n && !found; i++) {
    Op *l = loops.v[i], *up = l->parent->parent_op;
    if (!for_is_parallel(l) && kv_loop_state(l, &io, &il, &im) && up && up->kind == OP_FOR &&
        for_is_parallel(up))
      found = l;
  }
  oplist_free(&loops);
  return found;
}

/* One stage of every staged input beside two of the step's loads (K, V),
 * the consumers' own staged tiles (Q) and the rings' overhead
 * (ring_overhead_bytes: V's zero slot, the barrier blocks), as
 * warp-specialize's budget (ring_stages) counts them, which gives the
 * input rings what is left. */
static bool fits(Func *f, Op *loop, const Staged *s, int n) {
  long own = 0, per_stage = 0, last = 0;
  int rings = n;
  OpList loads = collect_ops(f, OP_LOAD);
  for (int i = 0; i < loads.n; i++) {
    if (!op_is_staged_load(loads.v[i]))
      continue;
    long bytes = tile_bytes(loads.v[i]->results[0]->type);
    if (op_is_inside(loads.v[i], loop)) {
      per_stage += bytes;
      last = bytes;
      rings++;
    } else {
      own += bytes;
    }
  }
  oplist_free(&loads);
  for (int i = 0; i < n; i++) { /* the staged tile: the input's 2-byte elements */
    Type rt = s[i].gather->results[0]->type;
    own += tile_bytes(type_tile(s[i].gather->operands[0]->type.elem, rt.rows, rt.cols, DIST_NONE));
  }
  return own + 2 * per_stage + ring_overhead_bytes(f, last, rings) <=
         tiling_smem_limit(attr_str(&f->attrs, "target", "sm_90a"));
}

static void find_gathers(Func *f, Block *blk, Type step, Staged *s, int *n) {
  for (Op *o = blk->first; o; o = o->next) {
    if (o->kind == OP_GATHER && *n < MAX_STAGED && match_gather(f, o, step, &s[*n]))
      (*n)++;
    for (int r = 0; r < o->nregions; r++)
      find_gathers(f, o->regions[r], step, s, n);
  }
}

/* The gather becomes `load {rect = 1}` of its rectangle and a cast of that
 * staged tile to the gather's f32 register tile. */
static void rewrite(Module *m, Staged *s) {
  Op *g = s->gather;
  Value *t = g->operands[0];
  int r = t->type.rank;
  Type rt = g->results[0]->type;
  Builder b = builder_before(m, g);
  b.loc = g->loc;
  Value *ops[5];
  ops[0] = t;
  for (int d = 1; d <= r - 2; d++)
    ops[d] = g->operands[d];
  ops[r - 1] = s->q0;
  ops[r] = s->k0;
  Type staged = type_tile(t->type.elem, rt.rows, rt.cols, DIST_NONE);
  Op *ld = build_op(&b, OP_LOAD, ops, 1 + r, &staged, 1, 0);
  op_set_attr_int(ld, "rect", 1);
  size_t len = strlen(t->name) + 4;
  char *name = module_alloc(m, len);
  snprintf(name, len, "%s_t", t->name + 3); /* %in_bias -> %bias_t */
  ld->results[0]->name = name;
  Op *c = build_op(&b, OP_CAST, &ld->results[0], 1, &rt, 1, 0);
  c->results[0]->name = g->results[0]->name;
  value_replace_all_uses(g->results[0], c->results[0]);
  op_erase(g);
}

int pass_stage_inputs(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)diag;
  const AttrList *a = &f->attrs;
  int d = (int)attr_int(a, "head_dim", 0), dv = (int)attr_int(a, "v_head_dim", d);
  /* what warp-specialize splits with TMA rings (its and pass_tma_load's
   * conditions), the spec's plain forward kernel only */
  if (strcmp(attr_str(a, "mode", ""), "forward") != 0 || attr_int(a, "warps", 4) != 8 ||
      attr_int(a, "sched_producer", 1) != 1 || attr_int(a, "sched_tma", 1) != 1 ||
      strcmp(attr_str(a, "layout", "padded"), "padded") != 0 || d % 64 || dv % 64 ||
      !pass_targets_wgmma(f, opts) || pass_is_disabled(opts, "warp-specialize") ||
      func_companion_of(f) || attr_get(a, "gather_of"))
    return 0;
  Op *loop = step_loop(f);
  if (!loop)
    return 0;
  Staged s[MAX_STAGED];
  int n = 0;
  Type step = type_tile(ELEM_F32, (int)attr_int(a, "tile_q", 0), (int)attr_int(a, "tile_kv", 0),
                        DIST_ROWS);
  find_gathers(f, for_body(loop), step, s, &n);
  if (n == 0 || !fits(f, loop, s, n))
    return 0;
  /* the launches the tensor map cannot take run this copy */
  char name[256];
  snprintf(name, sizeof name, "%s_gathered", f->name);
  Func *copy = func_clone(m, f, name);
  attr_set_str(m, &copy->attrs, "gather_of", f->name);
  for (int i = 0; i < n; i++)
    rewrite(m, &s[i]);
  return 0;
}
