/* async_matmuls.c - the `async-matmuls` pass: in the backward's kernels a
 * step's matmuls are issued asynchronously as soon as their operands are
 * ready, and each is waited for only right before its first use, so that
 * independent matmuls run back to back on the tensor cores and under the
 * elementwise work between them (FlashAttention-3's backward overlaps dP
 * with the exponentials of S the same way).
 *
 * The K/V-outer step at d256 (dV in a kernel of its own: split-dkdv),
 * before and after:
 *
 *   %st = matmul %kt, %qt {transpose_b = 1}   %st = matmul %kt, %qt {transpose_b = 1, async = 1}
 *   ... %p = exp(%st - lse) ...               %dpt = matmul %vt, %dot {transpose_b = 1, async = 1}
 *   %dpt = matmul %vt, %dot {transpose_b = 1} %st_w = mma_wait %st {pending = 1}
 *   %dz = mul %p, (sub %dpt, %dl)             ... %p = exp(%st_w - lse) ...
 *   %dsc = cast %dz                           %dpt_w = mma_wait %dpt {pending = 0}
 *   %dk_n = matmul %dsc, %qt, %dk             %dz = mul %p, (sub %dpt_w, %dl)
 *   yield %dk_n                               %dsc = cast %dz
 *                                             %dk_n = matmul %dsc, %qt, %dk {async = 1}
 *                                             %dk_w = mma_wait %dk_n {pending = 0}
 *                                             yield %dk_w
 *
 * How: every matmul of a block that holds two or more becomes async, with
 * an mma_wait that takes over its uses; then the block is list-scheduled:
 * of the ops whose inputs are ready, a matmul goes first, else the one due
 * first: the others in program order, a wait right before the first op
 * that needs it. So matmuls move up and waits down, and nothing else moves
 * past a wait (ops hoisted above one would hold their registers beside the
 * accumulators in flight: the dropout keep mask's Philox rounds spilled
 * so, docs/perf-log.md P88). Orders kept besides the values': the matmuls
 * among themselves (wgmma groups complete in order, and a wait's depth
 * counts the matmuls issued after its own), the ops with effects among
 * themselves (stores, staged loads, ring ops, loops, ifs that hold any),
 * each matmul after every such op before it, and each such op after the
 * wait of every matmul before it: no store, ring release or loop runs
 * beside a matmul still in flight, so no shared memory a running wgmma
 * reads is rewritten under it. A release of a ring no matmul reads
 * (stage-inputs' bias tile, cast to registers) only follows the ops that
 * read its slot: the Q-outer step still issues dP right after S. Values do not change (the interpreter
 * completes a matmul where it is issued; so does mma.sync, where the waits
 * lower to nothing).
 *
 * Where: the warp-specialized kernels of the backward (`mode = backward`,
 * `warp_roles`: head dims past 64) for sm_90a unless the codegen is told
 * -mma=sync, in the steps whose loop carries at most 256 bytes of register
 * tiles a consumer thread (one 64 x 128 f32 accumulator: the Q-outer
 * kernel's dQ at d128) or whose warpgroup has its SM to itself
 * (`blocks_per_sm = 1`: d256). Measured on the H100 (docs/perf-log.md P87,
 * P88): d256 +3-10%, d128 (its Q-outer kernel) +0-2%, the dropout rows
 * +1-5%; d128's K/V-outer kernel (dK and dV carried, 512 bytes) -10-15%:
 * the accumulators and A fragments in flight live longer and its 232
 * registers spill; d64 (no producer, two or three blocks an SM that fill
 * the tensor cores under each other's exponentials, as the forward's
 * overlap found in P64) flat to -2%. The other heavy steps, those of the
 * atomic launch's main kernel (two warpgroups, dQ a group_cols product
 * added to dq_acc), take one change only: dQ issued before dK, both async,
 * dK waited for after dQ's store (issue_dq_first; its store is the one op
 * with effects beside a matmul in flight, and touches only its own staging
 * bytes): +1-4% on the H200 (P122), and dV before them async, waited for
 * last (+1-3%, P141), where making S^T and dP^T async there too spilled
 * and lost 2-10% on the full rows (P121; dP^T alone, after P140: flat,
 * P141). Not in
 * blocks that hold async matmuls already nor in kernels whose warpgroups
 * take turns (mma_turn: pingpong's order).
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

/* Names wait w after its matmul's result: %x_w. */
static void name_wait(Module *m, Op *w) {
  const Value *x = w->operands[0];
  if (x->name) {
    char name[96];
    snprintf(name, sizeof name, "%s_w", x->name);
    w->results[0]->name = module_strdup(m, name);
  }
}

/* A wait for async matmul mm right before op `before`, which takes over
 * mm's uses. */
static Op *add_wait_before(Module *m, Op *mm, Op *before, int pending) {
  Builder b = builder_before(m, before);
  Value *x = mm->results[0];
  Op *w = build_op(&b, OP_MMA_WAIT, &x, 1, &x->type, 1, 0);
  op_set_attr_int(w, "pending", pending);
  name_wait(m, w);
  replace_uses_except(x, w->results[0], &w, 1);
  return w;
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
    o = add_wait_before(m, o, o->next, 0);
  }
  return true;
}

/* Is op a ring_release of a ring whose tiles no matmul reads (stage-inputs'
 * bias ring: its tile is cast to registers)? Releasing it beside a matmul
 * in flight frees no shared memory that matmul reads. */
static bool releases_no_operand(const Op *op) {
  if (op->kind != OP_RING_RELEASE)
    return false;
  const Value *ring = op->operands[0];
  for (int i = 0; i < ring->nuses; i++) {
    const Op *get = ring->uses[i].user;
    if (!get || get->kind != OP_RING_GET)
      continue;
    for (int j = 0; j < get->results[0]->nuses; j++) {
      const Op *u = get->results[0]->uses[j].user;
      if (u && u->kind == OP_MATMUL)
        return false;
    }
  }
  return true;
}

/* Does op (or an op of its regions) read a ring_get of `ring`? */
static bool reads_ring(const Op *op, const Value *ring) {
  for (int k = 0; k < op->noperands; k++) {
    const Op *d = op->operands[k]->def;
    if (d && d->kind == OP_RING_GET && d->operands[0] == ring)
      return true;
  }
  for (int r = 0; r < op->nregions; r++)
    for (const Op *o = op->regions[r]->first; o; o = o->next)
      if (reads_ring(o, ring))
        return true;
  return false;
}

/* The orders kept (the header comment), over the ops in program order. A
 * release of a ring no matmul reads keeps its place among the effects and
 * after the ops reading its slot, not the matmuls' order. */
static void need_orders(Sched *s) {
  int n = s->n, last_mm = -1, last_fx = -1;
  for (int i = 0; i < n; i++) {
    Op *o = s->ops[i];
    if (o->kind == OP_MATMUL) {
      if (last_mm >= 0)
        s->need[i * n + last_mm] = 1;
      for (int j = 0; j < i; j++)
        if (has_effects(s->ops[j]) && !releases_no_operand(s->ops[j]))
          s->need[i * n + j] = 1;
      last_mm = i;
    } else if (releases_no_operand(o)) {
      if (last_fx >= 0)
        s->need[i * n + last_fx] = 1;
      for (int j = 0; j < n; j++)
        if (j != i && reads_ring(s->ops[j], o->operands[0]))
          s->need[i * n + j] = 1;
      last_fx = i;
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

/* When each op is due: its place in program order (2 i), a wait right
 * before the first op that needs it (2 j - 1), or before the terminator. */
static void set_due(const Sched *s, int *due) {
  for (int i = 0; i < s->n; i++) {
    due[i] = 2 * i;
    if (s->ops[i]->kind != OP_MMA_WAIT)
      continue;
    due[i] = 2 * s->n;
    for (int j = i + 1; j < s->n; j++)
      if (s->need[j * s->n + i]) {
        due[i] = 2 * j - 1;
        break;
      }
  }
}

/* The next op to go: a ready matmul, else the ready op due first. */
static int pick(const Sched *s, const bool *done, const int *due) {
  int best = -1;
  bool best_mm = false;
  for (int i = 0; i < s->n; i++) {
    if (done[i])
      continue;
    bool ready = true;
    for (int j = 0; ready && j < s->n; j++)
      ready = !s->need[i * s->n + j] || done[j];
    if (!ready)
      continue;
    bool mm = s->ops[i]->kind == OP_MATMUL;
    if (best < 0 || (mm && !best_mm) || (mm == best_mm && due[i] < due[best]))
      best = i, best_mm = mm;
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
  int *order = calloc((size_t)s.n, sizeof *order), *due = calloc((size_t)s.n, sizeof *due);
  int i = 0; /* op ids are scratch: they number the block's ops here */
  for (Op *o = blk->first; o && o != term; o = o->next, i++) {
    s.ops[i] = o;
    o->id = i;
  }
  for (i = 0; i < s.n; i++)
    need_values(&s, i, s.ops[i], blk);
  need_orders(&s);
  set_due(&s, due);
  for (i = 0; i < s.n; i++) {
    int k = pick(&s, done, due);
    if (k < 0) /* cannot happen: program order satisfies every need */
      break;
    done[k] = true;
    order[i] = k;
  }
  if (i == s.n)
    for (i = 0; i < s.n; i++)
      op_move_to_end(s.ops[order[i]], blk);
  set_pending(blk);
  free(due);
  free(order);
  free(done);
  free(s.need);
  free(s.ops);
}

/* The accumulating matmul right before dK += dS^T Q in a heavy step
 * (dV += P^T dO), when it can stay in flight until dK is waited for:
 * synchronous, its result read only by the block's terminator (the loop
 * carries it), only pure ops between it and dK (dS's cast). Else NULL. */
static Op *loop_carried_matmul_before(Op *dk) {
  for (Op *o = dk->prev; o; o = o->prev) {
    if (o->kind == OP_MATMUL) {
      const Value *r = o->results[0];
      if (!is_sync_matmul(o) || o->noperands != 3 || r->nuses != 1 ||
          r->uses[0].user != o->parent->last)
        return NULL;
      return o;
    }
    if (has_effects(o))
      return NULL;
  }
  return NULL;
}

/* A heavy step (dK and dV carried) of the atomic launch's main kernel:
 * its dQ product (the group_cols matmul, read only by its store) is issued
 * before the accumulating matmul before it (dK += dS^T Q), both async; dQ
 * is waited for right before its store and dK right after it, so dK runs
 * on the tensor cores while the store stages dQ and issues its reductions
 * (FlashAttention-3's order; the store's staging buffer is no operand of
 * any matmul). Only dQ's 32 f32 registers a thread are live beside dK's
 * in flight, where async S^T and dP^T spilled (the header). dV += P^T dO
 * before them runs async too, waited for after dK: under dS's cast, the
 * dS^T copy and its barriers (P's registers live to its wait; with the LSE
 * and delta held across the lanes that fits, P140-P141). */
static void issue_dq_first(Module *m, Block *blk) {
  Op *dq = NULL, *dk = NULL;
  for (Op *o = blk->first; o; o = o->next)
    if (is_sync_matmul(o) && o->results[0]->type.dist == DIST_GROUP_COLS) {
      dq = o;
      break;
    }
  if (!dq)
    return;
  for (Op *o = dq->prev; o; o = o->prev)
    if (o->kind == OP_MATMUL) {
      dk = o;
      break;
    }
  if (!dk || !is_sync_matmul(dk) || dk->noperands != 3)
    return;
  for (int i = 0; i < dq->noperands; i++)
    for (Op *o = dk; o != dq; o = o->next)
      if (dq->operands[i]->def == o)
        return;
  Value *x = dq->results[0];
  if (x->nuses != 1 || x->uses[0].user->parent != blk)
    return;
  Op *st = x->uses[0].user;
  Op *dv = loop_carried_matmul_before(dk);
  op_move_before(dq, dk);
  op_set_attr_int(dq, "async", 1);
  op_set_attr_int(dk, "async", 1);
  add_wait_before(m, dq, st, 1);
  Op *dk_w = add_wait_before(m, dk, st->next, 0);
  if (dv) {
    /* after dK's wait none is in flight: pending 0, not the 2 issued after
     * it (a deeper wait makes ptxas serialize every wgmma, P139) */
    op_set_attr_int(dv, "async", 1);
    add_wait_before(m, dv, dk_w->next, 0);
  }
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

/* The warp roles of f (warp-specialize's), or NULL. */
static const Op *warp_roles_of(Func *f) {
  OpList roles = collect_ops(f, OP_WARP_ROLES);
  const Op *r = roles.n == 1 ? roles.v[0] : NULL;
  oplist_free(&roles);
  return r;
}

/* Is blk's step light enough for matmuls in flight (the header): its
 * innermost enclosing loop carries at most 256 bytes of register tiles a
 * consumer thread, or the consumers have the SM to themselves? */
enum { ASYNC_CARRY_MAX_BYTES = 256 };

static bool step_has_room(const Block *blk, const Op *roles, int threads) {
  if (attr_int(&roles->attrs, "blocks_per_sm", 0) == 1)
    return true;
  for (const Op *p = blk->parent_op; p; p = p->parent ? p->parent->parent_op : NULL)
    if (p->kind == OP_FOR)
      return loop_register_bytes(p, threads) <= ASYNC_CARRY_MAX_BYTES;
  return false;
}

int pass_async_matmuls(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)diag;
  if (strcmp(attr_str(&f->attrs, "mode", ""), "backward") != 0 || !pass_targets_wgmma(f, opts) ||
      block_has_op(f->body, OP_MMA_TURN))
    return 0;
  const Op *roles = warp_roles_of(f);
  if (!roles)
    return 0;
  int threads = 32 * (int)attr_int(&f->attrs, "warps", 4);
  Block **blocks = NULL;
  int n = 0, cap = 0;
  collect_blocks(f->body, &blocks, &n, &cap);
  for (int i = 0; i < n; i++)
    if (step_has_room(blocks[i], roles, threads))
      schedule_block(m, blocks[i]);
    else
      issue_dq_first(m, blocks[i]);
  free(blocks);
  return 0;
}
