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
 *
 * And on the deterministic backward's kernels that warp-specialize gives a
 * producer (kv, dv and q past head dim 64: four warps, two blocks an SM at
 * d128), whose steps recompute S with the bias (perf-log P110: the gathers
 * made bwd_kv 2.6x and bwd_q 2x the plain kernels' time). The Q-outer
 * kernel's step is [q, k] as the forward's; the K/V-outer kernels' is
 * S^T, [k, q]: the rectangle stays [q, k] (the tensor map's box) and its
 * cast {transpose = 1} reads it transposed (codegen: ldmatrix .trans).
 * Both extents' positions must be masked there (dK and dV sum over the
 * queries, dQ over the keys), which the backward's bounds mask does
 * (`and` of both compares), so the zeros past the edges are never read.
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

/* Does cond (directly, or through `and`s) mask the step, `mask _, cond`? */
static bool feeds_mask(Value *cond, int depth) {
  for (int j = 0; j < cond->nuses; j++) {
    Op *u = cond->uses[j].user;
    if (u && u->kind == OP_MASK && u->operands[1] == cond)
      return true;
    if (u && u->kind == OP_AND && depth < 4 && feeds_mask(u->results[0], depth + 1))
      return true;
  }
  return false;
}

/* Does the step mask the positions past extent, `mask _, (cmp %pos,
 * %extent {pred = lt})` (the condition maybe and-ed with others)? */
static bool masks_past(Value *pos, const Value *extent) {
  for (int i = 0; i < pos->nuses; i++) {
    Op *c = pos->uses[i].user;
    if (c && c->kind == OP_CMP && c->operands[0] == pos && c->operands[1] == extent &&
        strcmp(attr_str(&c->attrs, "pred", ""), "lt") == 0 && feeds_mask(c->results[0], 0))
      return true;
  }
  return false;
}

/* A gather the pass rewrites, the scalars of its rectangle, and whether the
 * step reads it transposed (its rows the keys). */
typedef struct Staged {
  Op *gather;
  Value *q0, *k0;
  bool transposed;
} Staged;

/* Is g a gather of a 2-byte input [.., seqlen_q, seqlen_k] at the step's
 * (q, k) positions, into a tile of the step's shape (queries along axis
 * q_axis)? The forward's rows are never stored past seqlen_q: its columns
 * past seqlen_k must be masked. A backward kernel's rows and columns both
 * feed its gradients (dK and dV sum over the queries): both masked. */
static bool match_gather(Func *f, Op *g, Type step, int q_axis, bool backward, Staged *s) {
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
  s->transposed = q_axis == 1;
  return axis_positions(g->operands[r - 1], q_axis, sq, &s->q0, &qpos) &&
         axis_positions(g->operands[r], 1 - q_axis, sk, &s->k0, &kpos) && masks_past(kpos, sk) &&
         (!backward || masks_past(qpos, sq));
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

/* Does loop hold a loop of tiles? */
static bool has_tile_loop(Op *loop) {
  OpList inner = collect_ops_in(for_body(loop), OP_FOR);
  bool any = false;
  for (int i = 0; i < inner.n && !any; i++)
    any = !op_is_scalar_loop(inner.v[i]);
  oplist_free(&inner);
  return any;
}

/* A backward kernel's step loop, as warp-specialize splits it: sequential,
 * in a parallel tile loop's body or in one sequential loop there (a
 * K/V-outer kernel's loop over a K/V head's query heads), with no loop of
 * tiles inside. */
static Op *backward_step_loop(Func *f) {
  OpList loops = collect_ops(f, OP_FOR);
  Op *found = NULL;
  for (int i = 0; i < loops.n && !found; i++) {
    Op *l = loops.v[i], *up = l->parent->parent_op;
    if (for_is_parallel(l) || op_is_scalar_loop(l) || has_tile_loop(l))
      continue;
    if (up && up->kind == OP_FOR && !for_is_parallel(up))
      up = up->parent->parent_op;
    if (up && up->kind == OP_FOR && for_is_parallel(up))
      found = l;
  }
  oplist_free(&loops);
  return found;
}

/* One stage of every staged input beside two of the step's loads (K, V),
 * the consumers' own staged tiles (Q) and the rings' overhead
 * (ring_overhead_bytes: V's zero slot, the barrier blocks), as
 * warp-specialize's budget (ring_stages) counts them, which gives the
 * input rings what is left. A backward kernel of four warps runs two
 * blocks an SM where its rings fit in half the shared memory: the input's
 * stage must fit there too, not take the second block's room. */
static bool fits(Func *f, Op *loop, const Staged *s, int n, bool backward) {
  long own = 0, per_stage = 0, last = 0, inputs = 0;
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
    inputs += tile_bytes(type_tile(s[i].gather->operands[0]->type.elem, rt.rows, rt.cols, DIST_NONE));
  }
  long rest = own + 2 * per_stage + ring_overhead_bytes(f, last, rings);
  long limit = tiling_smem_limit(attr_str(&f->attrs, "target", "sm_90a")), half = limit / 2 - 1024;
  if (backward && attr_int(&f->attrs, "warps", 4) == 4 && rest <= half)
    limit = half;
  return rest + inputs <= limit;
}

static void find_gathers(Func *f, Block *blk, Type step, int q_axis, bool backward, Staged *s,
                         int *n) {
  for (Op *o = blk->first; o; o = o->next) {
    if (o->kind == OP_GATHER && *n < MAX_STAGED && match_gather(f, o, step, q_axis, backward, &s[*n]))
      (*n)++;
    for (int r = 0; r < o->nregions; r++)
      find_gathers(f, o->regions[r], step, q_axis, backward, s, n);
  }
}

/* The gather becomes `load {rect = 1}` of its rectangle and a cast of that
 * staged tile to the gather's f32 register tile; a transposed step's
 * rectangle is [q, k] as the input's, its cast {transpose = 1}. */
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
  Type staged = s->transposed ? type_tile(t->type.elem, rt.cols, rt.rows, DIST_NONE)
                              : type_tile(t->type.elem, rt.rows, rt.cols, DIST_NONE);
  Op *ld = build_op(&b, OP_LOAD, ops, 1 + r, &staged, 1, 0);
  op_set_attr_int(ld, "rect", 1);
  size_t len = strlen(t->name) + 4;
  char *name = module_alloc(m, len);
  snprintf(name, len, "%s_t", t->name + 3); /* %in_bias -> %bias_t */
  ld->results[0]->name = name;
  Op *c = build_op(&b, OP_CAST, &ld->results[0], 1, &rt, 1, 0);
  if (s->transposed)
    op_set_attr_int(c, "transpose", 1);
  c->results[0]->name = g->results[0]->name;
  value_replace_all_uses(g->results[0], c->results[0]);
  op_erase(g);
}

/* Is f a kernel warp-specialize splits with TMA rings (its and
 * pass_tma_load's conditions): the spec's plain forward kernel, or a
 * backward kernel of four warps it gives a producer (the deterministic
 * launch's kv, dv and q)? */
static bool staged_kind(Func *f, const PassOptions *opts, bool *backward) {
  const AttrList *a = &f->attrs;
  int d = (int)attr_int(a, "head_dim", 0), dv = (int)attr_int(a, "v_head_dim", d);
  const char *mode = attr_str(a, "mode", "");
  *backward = strcmp(mode, "backward") == 0;
  bool kind = *backward ? pass_backward_warp_roles(f) && attr_int(a, "warps", 4) == 4
                        : strcmp(mode, "forward") == 0 && attr_int(a, "warps", 4) == 8 &&
                              !func_companion_of(f);
  return kind && attr_int(a, "sched_producer", 1) == 1 && attr_int(a, "sched_tma", 1) == 1 &&
         strcmp(attr_str(a, "layout", "padded"), "padded") == 0 && d % 64 == 0 && dv % 64 == 0 &&
         pass_targets_wgmma(f, opts) && !pass_is_disabled(opts, "warp-specialize") &&
         !attr_get(a, "gather_of");
}

int pass_stage_inputs(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)diag;
  const AttrList *a = &f->attrs;
  bool backward;
  if (!staged_kind(f, opts, &backward))
    return 0;
  Op *loop = backward ? backward_step_loop(f) : step_loop(f);
  if (!loop)
    return 0;
  Staged s[MAX_STAGED];
  int n = 0;
  /* the step's tile: [q, k], or [k, q] in the K/V-outer backward kernels */
  int tq = (int)attr_int(a, "tile_q", 0), tk = (int)attr_int(a, "tile_kv", 0);
  int q_axis = backward && strcmp(attr_str(a, "role", ""), "q") != 0 ? 1 : 0;
  Type step = q_axis ? type_tile(ELEM_F32, tk, tq, DIST_ROWS) : type_tile(ELEM_F32, tq, tk, DIST_ROWS);
  find_gathers(f, for_body(loop), step, q_axis, backward, s, &n);
  if (n == 0 || !fits(f, loop, s, n, backward))
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
