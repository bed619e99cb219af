/* async_matmuls.c - the `async-matmuls` pass: in the backward's kernels a
 * step's matmuls are issued asynchronously as soon as their operands are
 * ready, and each is waited for only right before its first use, so that
 * independent matmuls run back to back on the tensor cores and under the
 * elementwise work between them (FlashAttention-3's backward overlaps dP
 * with the exponentials of S the same way).
 *
 * The K/V-outer step (docs/backward.md), before and after:
 *
 *   %st = matmul %kt, %qt {transpose_b = 1}   %st = matmul %kt, %qt {transpose_b = 1, async = 1}
 *   ... %p = exp(%st - lse) ...               %dpt = matmul %vt, %dot {transpose_b = 1, async = 1}
 *   %dpt = matmul %vt, %dot {transpose_b = 1} %st_w = mma_wait %st {pending = 1}
 *   %dz = mul %p, (sub %dpt, %dl)             ... %p = exp(%st_w - lse) ...
 *   %ptc = cast %p                            %ptc = cast %p
 *   %dv_n = matmul %ptc, %dot, %dv            %dv_n = matmul %ptc, %dot, %dv {async = 1}
 *   %dsc = cast %dz                           %dpt_w = mma_wait %dpt {pending = 1}
 *   %dk_n = matmul %dsc, %qt, %dk             %dz = mul %p, (sub %dpt_w, %dl)
 *   yield %dk_n, %dv_n                        %dsc = cast %dz
 *                                             %dk_n = matmul %dsc, %qt, %dk {async = 1}
 *                                             %dv_w = mma_wait %dv_n {pending = 1}
 *                                             %dk_w = mma_wait %dk_n {pending = 0}
 *                                             yield %dk_w, %dv_w
 *
 * How: every matmul of a block that holds two or more becomes async, with
 * an mma_wait that takes over its uses; then the block is list-scheduled:
 * of the ops whose inputs are ready, a matmul goes first, then any other op
 * in program order, and a wait only when nothing else can go (the oldest
 * first). Orders kept besides the values': the matmuls among themselves
 * (wgmma groups complete in order, and a wait's depth counts the matmuls
 * issued after its own), the ops with effects among themselves (stores,
 * staged loads, ring ops, loops, ifs that hold any), each matmul after
 * every such op before it, and each such op after the wait of every matmul
 * before it: no store, ring release or loop runs beside a matmul still in
 * flight, so no shared memory a running wgmma reads is rewritten under it.
 * Values do not change (the interpreter completes a matmul where it is
 * issued; so does mma.sync, where the waits lower to nothing).
 *
 * Where: kernels of the backward (`mode = backward`) for sm_90a unless the
 * codegen is told -mma=sync, whose one consumer warpgroup has its SM to
 * itself (warp-specialize's `blocks_per_sm = 1`: d256): no other warpgroup
 * fills the tensor cores while it computes elementwise, so its own matmuls
 * must (+3-6% there). With two blocks an SM (d64, d128) the other block
 * already does, and the pass measured 0 to -15% (the A fragments and
 * accumulators in flight live longer: the d128 consumers spill;
 * docs/perf-log.md P87), as overlap-softmax did for the forward (P64). Not
 * in blocks that hold async matmuls already nor in kernels whose
 * warpgroups take turns (mma_turn: pingpong's order).
 */
#include <stdlib.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

/* An op whose place among the others' effects must stay: what it does is
 * more than the values it makes. Matmuls and waits have rules of their own. */
static bool has_effects(const Op *op) {
  if (op->kind == OP_MATMUL || op->kind == OP_MMA_WAIT)
    return false;
  if (op_is_staged_load(op)) /* codegen's cp.async groups complete in issue order */
    return true;
  return !op_is_pure(op) && !op_is_pure_if(op);
}

static bool is_sync_matmul(const Op *op) {
  return op->kind == OP_MATMUL && attr_int(&op->attrs, "async", 0) == 0;
}

/* The block's ops to schedule: all but its terminator, in program order. */
typedef struct Sched {
  Op **ops;
  int n;
  unsigned char *need; /* need[i * n + j]: op j must go before op i */
} Sched;

/* Marks what op `user` (scheduled as ops[i]) and the ops of its regions
 * read from ops of the scheduled block. */
static void need_values(Sched *s, int i, const Op *user, const Block *blk) {
  for (int k = 0; k < user->noperands; k++) {
    const Op *d = user->operands[k]->def;
    if (d && d->parent == blk && d->id >= 0 && d->id < s->n && s->ops[d->id] == d)
      s->need[i * s->n + d->id] = 1;
  }
  for (int r = 0; r < user->nregions; r++)
    for (const Op *o = user->regions[r]->first; o; o = o->next)
      need_values(s, i, o, blk);
}

/* Makes each of blk's matmuls async with a wait right after it (the wait
 * reads the matmul and everything else reads the wait); returns false when
 * the block has fewer than two, or async ones already. */
static bool add_waits(Module *m, Block *blk) {
  int sync = 0;
  for (Op *o = blk->first; o; o = o->next) {
    if (o->kind == OP_MATMUL && !is_sync_matmul(o))
      return false;
    sync += is_sync_matmul(o);
  }
  if (sync < 2)
    return false;
  for (Op *o = blk->first; o; o = o->next) {
    if (!is_sync_matmul(o))
      continue;
    op_set_attr_int(o, "async", 1);
    Builder b = builder_after(m, o);
    Value *x = o->results[0];
    Op *w = build_op(&b, OP_MMA_WAIT, &x, 1, &x->type, 1, 0);
    op_set_attr_int(w, "pending", 0);
    if (x->name) {
      char name[96];
      snprintf(name, sizeof name, "%s_w", x->name);
      w->results[0]->name = module_strdup(m, name);
    }
    replace_uses_except(x, w->results[0], &w, 1);
    o = w;
  }
  return true;
}

/* The orders kept (the header comment), over the ops in program order. */
static void need_orders(Sched *s) {
  int n = s->n, last_mm = -1, last_fx = -1;
  for (int i = 0; i < n; i++) {
    Op *o = s->ops[i];
    if (o->kind == OP_MATMUL) {
      if (last_mm >= 0)
        s->need[i * n + last_mm] = 1;
      for (int j = 0; j < i; j++)
        if (has_effects(s->ops[j]))
          s->need[i * n + j] = 1;
      last_mm = i;
    } else if (has_effects(o)) {
      if (last_fx >= 0)
        s->need[i * n + last_fx] = 1;
      for (int j = 0; j < i; j++)
        if (s->ops[j]->kind == OP_MMA_WAIT)
          s->need[i * n + j] = 1;
      last_fx = i;
    }
  }
}

/* The next op to go: a ready matmul, else the first ready op that is not a
 * wait, else the first ready wait. */
static int pick(const Sched *s, const bool *done) {
  int best = -1, best_class = 3;
  for (int i = 0; i < s->n; i++) {
    if (done[i])
      continue;
    bool ready = true;
    for (int j = 0; ready && j < s->n; j++)
      ready = !s->need[i * s->n + j] || done[j];
    if (!ready)
      continue;
    Op *o = s->ops[i];
    int cls = o->kind == OP_MATMUL ? 0 : o->kind == OP_MMA_WAIT ? 2 : 1;
    if (cls < best_class)
      best = i, best_class = cls;
  }
  return best;
}

/* Each wait's depth: the async matmuls issued between its matmul and it. */
static void set_pending(Block *blk) {
  for (Op *w = blk->first; w; w = w->next) {
    if (w->kind != OP_MMA_WAIT)
      continue;
    int between = 0;
    for (Op *o = w->operands[0]->def->next; o && o != w; o = o->next)
      between += o->kind == OP_MATMUL && attr_int(&o->attrs, "async", 0) == 1;
    op_set_attr_int(w, "pending", between);
  }
}

static void schedule_block(Module *m, Block *blk) {
  if (!add_waits(m, blk))
    return;
  Sched s = {0};
  Op *term = block_terminator(blk);
  for (Op *o = blk->first; o && o != term; o = o->next)
    s.n++;
  s.ops = calloc((size_t)s.n, sizeof *s.ops);
  s.need = calloc((size_t)s.n * (size_t)s.n, 1);
  bool *done = calloc((size_t)s.n, sizeof *done);
  int *order = calloc((size_t)s.n, sizeof *order);
  int i = 0; /* op ids are scratch: they number the block's ops here */
  for (Op *o = blk->first; o && o != term; o = o->next, i++) {
    s.ops[i] = o;
    o->id = i;
  }
  for (i = 0; i < s.n; i++)
    need_values(&s, i, s.ops[i], blk);
  need_orders(&s);
  for (i = 0; i < s.n; i++) {
    int k = pick(&s, done);
    if (k < 0) /* cannot happen: program order satisfies every need */
      break;
    done[k] = true;
    order[i] = k;
  }
  if (i == s.n)
    for (i = 0; i < s.n; i++)
      op_move_to_end(s.ops[order[i]], blk);
  set_pending(blk);
  free(order);
  free(done);
  free(s.need);
  free(s.ops);
}

static void collect_blocks(Block *b, Block ***v, int *n, int *cap) {
  int matmuls = 0;
  for (Op *o = b->first; o; o = o->next) {
    matmuls += o->kind == OP_MATMUL;
    for (int r = 0; r < o->nregions; r++)
      collect_blocks(o->regions[r], v, n, cap);
  }
  if (matmuls < 2)
    return;
  if (*n == *cap) {
    *cap = *cap ? 2 * *cap : 8;
    *v = realloc(*v, (size_t)*cap * sizeof **v);
  }
  (*v)[(*n)++] = b;
}

/* Does f's one consumer warpgroup run alone on its SM (the header)? */
static bool alone_on_sm(Func *f) {
  OpList roles = collect_ops(f, OP_WARP_ROLES);
  bool alone = roles.n == 1 && attr_int(&roles.v[0]->attrs, "blocks_per_sm", 0) == 1 &&
               attr_int(&f->attrs, "warps", 4) == 4;
  oplist_free(&roles);
  return alone;
}

int pass_async_matmuls(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)diag;
  const char *target = attr_str(&f->attrs, "target", opts && opts->target ? opts->target : "sm_90a");
  if (strcmp(attr_str(&f->attrs, "mode", ""), "backward") != 0 || strcmp(target, "sm_90a") != 0 ||
      (opts && opts->mma_sync) || block_has_op(f->body, OP_MMA_TURN) || !alone_on_sm(f))
    return 0;
  Block **blocks = NULL;
  int n = 0, cap = 0;
  collect_blocks(f->body, &blocks, &n, &cap);
  for (int i = 0; i < n; i++)
    schedule_block(m, blocks[i]);
  free(blocks);
  return 0;
}
