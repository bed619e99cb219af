/* overlap_softmax.c - the `overlap-softmax` pass: the softmax of step j
 * runs while the tensor cores multiply step j-1's P V (FlashAttention-3's
 * intra-warpgroup overlap of GEMMs and softmax).
 *
 * In the FA2 step S = Q K^T, the softmax and O += P V follow each other:
 * each matmul is waited for before the next instruction that needs it, so
 * a warpgroup's tensor cores idle through its softmax. wgmma is
 * asynchronous and its groups complete in order; if the step issues its
 * own S first and then the P V of the step before, it can wait for S alone
 * (one group still running) and compute the softmax under that P V:
 *
 *   before                                  after
 *   for %j iter_args(%ot, ...) {            %vt_pro = load %v, ... (step lo)
 *     %kt = load %k, ...(j)                 for %j iter_args(%ot, ..., %pc_prev = 0,
 *     %vt = load %v, ...(j)                                  %vt_prev = %vt_pro) {
 *     %s = matmul %qt, %kt                    %vt = load %v, ...(j) {prefetch = 1}
 *     ... softmax(%s): %pc, %alpha ...        %kt = load %k, ...(j)
 *     %a = rescale %ot, %alpha                %s = matmul %qt, %kt {async = 1}
 *     %on = matmul %pc, %vt, %a               %o1 = matmul %pc_prev, %vt_prev, %ot {async = 1}
 *     yield %on, ...                          %sw = mma_wait %s {pending = 1}
 *   }                                         ... softmax(%sw): %pc, %alpha ...
 *                                             %o1w = mma_wait %o1 {pending = 0}
 *                                             %a = rescale %o1w, %alpha
 *                                             yield %a, ..., %pc, %vt
 *                                           }
 *                                           %on = matmul %r#pc, %r#vt, %r#o   (the last P V)
 *
 * The carried O is then "O before the pending P V": O_(j-1) = %ot +
 * %pc_prev %vt_prev at the top of step j, so the first step adds a P of
 * zeros (an empty product) and the loop's O is completed by one P V after
 * it. A step that mask-skip skips (its `if %empty` passes O through) adds
 * the pending P V there, synchronously, and carries zeros. V becomes a
 * tile carried one step (loaded at the top of the step that computes its P,
 * read by the next one): the pipeline pass leaves a load marked
 * {prefetch} alone and carries K as before, so V keeps two buffers.
 *
 * The pass fires where the spec's schedule says `overlap = 1` (it is off
 * otherwise: docs/perf-log.md P64), on sequential loops of forward kernels for sm_90a whose
 * tiles wgmma can take (head dims multiples of 64, whole warpgroups) unless
 * the codegen is told -mma=sync: there both matmuls are synchronous and the
 * reordering would only add the empty product. It needs the step's shape:
 * O, l, m carried (kv_loop_state), one O += P V matmul whose accumulator is
 * `rescale %ot, %alpha` and whose result flows to O's yield, an S matmul
 * before it in the same block, and a V load rebuildable at the top of the
 * step; anything else is left as it is.
 */
#include <stdio.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

/* The step's ops the rewrite moves. */
typedef struct Step {
  Op *loop;
  int io;        /* O's iter_arg position */
  Op *pv;        /* %on = matmul %pc, %vt, %a */
  Op *rescale;   /* %a = rescale %ot, %alpha */
  Op *s;         /* %s = matmul %qt, %kt (the first matmul of pv's block) */
  Op *vload;     /* %vt = load %v, ..., or %vt = ring_get %vt_ring, %j (warp_specialize.c) */
  Op *path[8];   /* the ifs from the loop's body down to pv's block */
  int npath;
} Step;

/* The operand position of the yield of blk that v is, or -1 (v used once). */
static int yielded_at(Block *blk, const Value *v) {
  Op *y = block_terminator(blk);
  if (!y || y->kind != OP_YIELD || v->nuses != 1 || v->uses[0].user != y)
    return -1;
  return v->uses[0].index;
}

/* Follows pv's result up through the ifs to the loop body's yield: it must
 * arrive at O's position, each if's other region passing %ot through. */
static bool trace_to_yield(Step *st) {
  Block *body = for_body(st->loop);
  Value *ot = for_iter_arg(st->loop, st->io);
  Value *v = st->pv->results[0];
  Block *blk = st->pv->parent;
  Op *ifs[8];
  int n = 0;
  while (blk != body) {
    Op *parent = blk->parent_op;
    int at = yielded_at(blk, v);
    if (!parent || parent->kind != OP_IF || at < 0 || n == 8 || parent->nregions != 2)
      return false;
    Block *other = parent->regions[0] == blk ? parent->regions[1] : parent->regions[0];
    Op *oy = block_terminator(other);
    if (!oy || oy->kind != OP_YIELD || oy->operands[at] != ot)
      return false;
    ifs[n++] = parent;
    v = parent->results[at];
    blk = parent->parent;
  }
  if (yielded_at(body, v) != st->io)
    return false;
  st->npath = n;
  for (int i = 0; i < n; i++)
    st->path[i] = ifs[n - 1 - i]; /* outermost first */
  return true;
}

/* %ot's uses are the rescale and the pass-through yields of the path. */
static bool ot_uses_ok(const Step *st) {
  Value *ot = for_iter_arg(st->loop, st->io);
  for (int u = 0; u < ot->nuses; u++) {
    Op *user = ot->uses[u].user;
    if (user == st->rescale)
      continue;
    bool through = false;
    for (int i = 0; i < st->npath; i++)
      for (int r = 0; r < 2; r++)
        through |= user == block_terminator(st->path[i]->regions[r]);
    if (!through)
      return false;
  }
  return true;
}

typedef struct Found {
  Op *loop;
  OpList matmuls;
  bool nested_loop;
} Found;

static void find_matmuls(Found *fd, Block *blk) {
  for (Op *o = blk->first; o; o = o->next) {
    if (o->kind == OP_FOR)
      fd->nested_loop = true;
    if (o->kind == OP_MATMUL)
      oplist_push(&fd->matmuls, o);
    for (int r = 0; r < o->nregions; r++)
      find_matmuls(fd, o->regions[r]);
  }
}

/* The ring_release of get's ring and step in get's block, or NULL. */
static Op *ring_release_of(Op *get) {
  for (Op *o = get->next; o; o = o->next)
    if (o->kind == OP_RING_RELEASE && o->operands[0] == get->operands[0] &&
        o->operands[1] == get->operands[1])
      return o;
  return NULL;
}

/* Recognizes the step (see the header); false leaves the loop alone. */
static bool match_step(Op *loop, Step *st) {
  memset(st, 0, sizeof *st);
  st->loop = loop;
  int il, im;
  if (attr_get(&loop->attrs, "pipelined") || !kv_loop_state(loop, &st->io, &il, &im))
    return false;
  Found fd = {.loop = loop};
  find_matmuls(&fd, for_body(loop));
  bool ok = !fd.nested_loop && fd.matmuls.n == 2;
  if (ok) {
    st->s = fd.matmuls.v[0];
    st->pv = fd.matmuls.v[1];
  }
  oplist_free(&fd.matmuls);
  if (!ok || st->s->parent != st->pv->parent || !op_precedes(st->s, st->pv) ||
      st->s->noperands != 2 || st->pv->noperands != 3 || attr_get(&st->s->attrs, "async") ||
      attr_get(&st->pv->attrs, "async") || attr_int(&st->pv->attrs, "transpose_a", 0) ||
      attr_int(&st->pv->attrs, "transpose_b", 0) || attr_get(&st->pv->attrs, "b_col0"))
    return false;
  Value *ot = for_iter_arg(loop, st->io);
  st->rescale = st->pv->operands[2]->def;
  if (!st->rescale || st->rescale->kind != OP_RESCALE || st->rescale->operands[0] != ot ||
      st->rescale->parent != st->pv->parent || st->rescale->results[0]->nuses != 1)
    return false;
  /* P in registers, made in the step; V a staged load used by P V only. */
  Value *pc = st->pv->operands[0];
  st->vload = st->pv->operands[1]->def;
  if (pc->type.kind != TYPE_TILE || pc->type.dist != DIST_ROWS || !pc->def ||
      !op_is_inside(pc->def, loop) || !st->vload || st->vload->results[0]->nuses != 1)
    return false;
  if (st->vload->kind == OP_RING_GET)
    return st->vload->parent == for_body(loop) && ring_release_of(st->vload) &&
           st->vload->operands[0]->def && trace_to_yield(st) && ot_uses_ok(st);
  if (!op_is_staged_load(st->vload) || !op_is_inside(st->vload, loop))
    return false;
  for (int i = 0; i < st->vload->noperands; i++)
    if (!loop_rebuildable(st->vload->operands[i], loop))
      return false;
  return trace_to_yield(st) && ot_uses_ok(st);
}

static Value *build_matmul(Builder *b, Value *a, Value *bm, Value *acc, bool async) {
  Value *ops[3] = {a, bm, acc};
  Op *mm = build_op(b, OP_MATMUL, ops, 3, &acc->type, 1, 0);
  if (async)
    op_set_attr_int(mm, "async", 1);
  return mm->results[0];
}

/* mma_wait x {pending}, named x's name + "_done". */
static Value *build_mma_wait(Builder *b, Value *x, int pending) {
  Op *w = build_op(b, OP_MMA_WAIT, &x, 1, &x->type, 1, 0);
  op_set_attr_int(w, "pending", pending);
  if (x->name) {
    size_t n = strlen(x->name) + 8;
    char *name = module_alloc(b->m, n);
    snprintf(name, n, "%s_done", x->name);
    w->results[0]->name = name;
  }
  return w->results[0];
}

/* `%name = sub step, 1`. */
static Value *step_before(Builder *b, Value *step, const char *name) {
  Value *s = build_binary(b, OP_SUB, step, build_index(b, 1));
  s->name = name;
  return s;
}

/* `%name = ring_get %ring, %step : t`. */
static Value *build_ring_get(Builder *b, Value *ring, Value *step, Type t, const char *name) {
  Value *ops[2] = {ring, step};
  Op *g = build_op(b, OP_RING_GET, ops, 2, &t, 1, 0);
  g->results[0]->name = name;
  return g->results[0];
}

static void rewrite_step(Module *m, Step *st) {
  Op *loop = st->loop;
  Block *body = for_body(loop);
  Op *term = block_terminator(body);
  Value *ot = for_iter_arg(loop, st->io);
  Value *pc = st->pv->operands[0];
  Type pct = pc->type, vtt = st->vload->results[0]->type;

  bool ring = st->vload->kind == OP_RING_GET;

  /* Before the loop: the zero P and (loads) the first V tile (step lo). */
  Builder pre = builder_before(m, loop);
  pre.loc = st->pv->loc;
  Value *pc_zero = build_full(&pre, pct, 0.0);
  pc_zero->name = "pc_zero";
  op_append_operand(m, loop, pc_zero);
  Value *pc_prev = block_add_arg(m, body, pct, "pc_prev");
  Value *r_pc = op_append_result(m, loop, pct);
  Value *vt_prev, *vt = NULL, *r_vt = NULL;
  if (ring) {
    /* V of the step before from the ring (step -1: the ring's zero tile),
     * released once the P V that reads it is done; this step's V is got
     * by the next step. */
    Value *rv = st->vload->operands[0], *step = st->vload->operands[1];
    Builder top = builder_before(m, st->vload);
    top.loc = st->vload->loc;
    Value *jm1 = step_before(&top, step, "step_prev");
    vt_prev = build_ring_get(&top, rv, jm1, vtt, "vt_prev");
    op_set_operand(ring_release_of(st->vload), 1, jm1);
    op_set_attr_int(rv->def, "zero", 1);
  } else {
    pre.loc = st->vload->loc;
    Value *vt_pro = clone_load_at(&pre, st->vload, loop, loop->operands[0]);
    vt_pro->name = "vt_pro";
    op_append_operand(m, loop, vt_pro);
    vt_prev = block_add_arg(m, body, vtt, "vt_prev");
    r_vt = op_append_result(m, loop, vtt);
    /* This step's V at the top of the step, carried to the next. */
    Builder top = builder_before(m, body->first);
    top.loc = st->vload->loc;
    vt = clone_load_at(&top, st->vload, loop, for_iv(loop));
    vt->name = "vt";
    op_set_attr_int(vt->def, "prefetch", 1);
  }

  /* S, then the step before's P V, then wait for S alone. */
  op_set_attr_int(st->s, "async", 1);
  Builder at_s = builder_after(m, st->s);
  at_s.loc = st->pv->loc;
  Value *o1 = build_matmul(&at_s, pc_prev, vt_prev, ot, true);
  o1->name = "o_pv";
  Value *sw = build_mma_wait(&at_s, st->s->results[0], 1);
  Op *keep = sw->def;
  replace_uses_except(st->s->results[0], sw, &keep, 1);

  /* O rescaled once the P V is in. */
  Builder at_r = builder_before(m, st->rescale);
  at_r.loc = st->pv->loc;
  Value *o1w = build_mma_wait(&at_r, o1, 0);
  op_set_operand(st->rescale, 0, o1w);
  value_replace_all_uses(st->pv->results[0], st->rescale->results[0]);
  op_erase(st->pv);
  if (st->vload->results[0]->nuses == 0)
    op_erase(st->vload);

  /* P down the path's yields; a skipping region adds the pending P V and
   * carries zeros. */
  Value *p_out = pc;
  Block *blk = st->rescale->parent;
  for (int i = st->npath - 1; i >= 0; i--) {
    Op *iff = st->path[i];
    op_append_operand(m, block_terminator(blk), p_out);
    Block *other = iff->regions[0] == blk ? iff->regions[1] : iff->regions[0];
    Op *oy = block_terminator(other);
    Builder fb = builder_before(m, oy);
    fb.loc = st->pv->loc;
    for (int k = 0; k < oy->noperands; k++)
      if (oy->operands[k] == ot)
        op_set_operand(oy, k, build_matmul(&fb, pc_prev, vt_prev, ot, false));
    op_append_operand(m, oy, pc_zero);
    p_out = op_append_result(m, iff, pct);
    blk = iff->parent;
  }
  op_append_operand(m, term, p_out);
  if (vt)
    op_append_operand(m, term, vt);

  /* After the loop: the last step's P V (rings: V of the last step, got
   * and released here; of step -1, the zero tile, when the loop ran no
   * step, P being zeros then). */
  Value *o_loop = loop->results[st->io];
  Builder post = builder_after(m, loop);
  post.loc = st->pv->loc;
  Op *last_release_after = NULL;
  if (ring) {
    Value *rv = vt_prev->def->operands[0], *lo = loop->operands[0], *hi = loop->operands[1];
    double lo0 = -1;
    Value *n = value_const(lo, &lo0) && lo0 == 0 ? hi : build_binary(&post, OP_SUB, hi, lo);
    r_vt = build_ring_get(&post, rv, step_before(&post, n, "step_last"), vtt, "vt_last");
    last_release_after = r_vt->def;
  }
  Value *o_fin = build_matmul(&post, r_pc, r_vt, o_loop, false);
  if (last_release_after) {
    Value *rops[2] = {last_release_after->operands[0], last_release_after->operands[1]};
    build_op(&post, OP_RING_RELEASE, rops, 2, NULL, 0, 0);
  }
  o_fin->name = "o_last";
  Op *fin = o_fin->def;
  replace_uses_except(o_loop, o_fin, &fin, 1);
}

int pass_overlap_softmax(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)diag;
  int d = (int)attr_int(&f->attrs, "head_dim", 0);
  int dv = (int)attr_int(&f->attrs, "v_head_dim", d);
  /* Without a producer warpgroup only where the schedule asks (`overlap =
   * 1`): alone it measured flat to -30% on the H100 (docs/perf-log.md P64),
   * the second warpgroup already filling the tensor cores during a
   * warpgroup's softmax. Over rings it is on by default up to dv 128 (P70). */
  if (!overlap_softmax_wanted(f, block_has_op(f->body, OP_WARP_ROLES)) ||
      strcmp(attr_str(&f->attrs, "mode", ""), "forward") != 0 ||
      !pass_targets_wgmma(f, opts) || d % 64 || dv % 64 ||
      attr_int(&f->attrs, "warps", 4) % 4)
    return 0;
  OpList loops = collect_ops(f, OP_FOR);
  for (int i = 0; i < loops.n; i++) {
    Step st;
    if (!for_is_parallel(loops.v[i]) && match_step(loops.v[i], &st))
      rewrite_step(m, &st);
  }
  oplist_free(&loops);
  return 0;
}
