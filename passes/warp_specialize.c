/* warp_specialize.c - the `warp-specialize` pass: a producer warpgroup
 * loads the K/V tiles of the forward's loop into rings of shared-memory
 * slots, the kernel's warps (the consumers) only compute
 * (FlashAttention-3's producer/consumer split; docs/hopper-pipeline.md §5-§6).
 *
 * In the FA2 kernel every warp issues its share of the next tiles' copies
 * between its matmuls and waits for them with the whole block. Here the
 * copies move to warps of their own, which run ahead by the ring's stages,
 * and each consumer step waits only for its own tiles:
 *
 *   before (one Q tile's body)              after
 *   %jhi = ...                              %kt_ring = ring {stages = 2} : ring<tile<..>>
 *   %qt = load %q, ...                      %vt_ring = ring {stages = 2} : ring<tile<..>>
 *   %r:3 = for %j = %c0 to %jhi             warp_roles {producer_warps = 4} {
 *       iter_args(%ot, %lt, %mt) {            %jhi' = ... (the bounds' scalar slice, cloned)
 *     %kt = load %k, %b, %hk, (%j * %bc)      for %j = %c0 to %jhi' sequential {
 *     %vt = load %v, %b, %hk, (%j * %bc)        %kt = load %k, ...(%j); ring_put %kt_ring, %j, %kt
 *     ... the step (reads %kt, %vt) ...         %vt = load %v, ...(%j); ring_put %vt_ring, %j, %vt
 *     yield ...                               }
 *   }                                       } {
 *   store %o, ...                             %jhi = ...; %qt = load %q, ...
 *                                             %r:3 = for %j = %c0 to %jhi iter_args(...) {
 *                                               %kt = ring_get %kt_ring, %j
 *                                               %vt = ring_get %vt_ring, %j
 *                                               ... the step ...
 *                                               ring_release %kt_ring, %j
 *                                               ring_release %vt_ring, %j
 *                                             }
 *                                             store %o, ...
 *                                           }
 *
 * Every step gets and releases its tiles on every path (a step mask-skip
 * skips too): the producer loads every step of the same bounds, and a slot
 * not released would stop it two steps later. Steps count from 0 (the
 * induction variable minus the loop's lower bound).
 *
 * The pass fires unless the spec's schedule says `producer = 0`, on forward
 * kernels for sm_90a whose matmuls run on wgmma (head dims multiples of 64,
 * two warpgroups, not -mma=sync), for a K/V loop that is the sequential
 * loop of a parallel loop's body carrying O, l, m, with no staged tile
 * carried (it runs before overlap-softmax, which then takes V from its
 * ring), no nested loop, and staged loads whose rows are computed from the
 * step by scalar ops (and the bounds from the Q tile's scalars, through
 * pure ifs and loops of scalars: mask-skip's binary searches for a
 * document mask's first and last steps, which the producer runs too): what
 * the producer can compute alone. Also on the backward's K/V-outer and Q-outer
 * kernels past head dim 64 (docs/hopper-pipeline.md §10): their step loop
 * carries the gradient tiles, and bwd_kv's sits in a sequential loop over
 * a K/V head's query heads, which the producer copies, both roles counting
 * steps across it (count_mid_steps). Anything else is left to the pipeline
 * pass. It runs before `pipeline`, which then finds nothing to prefetch in
 * either loop.
 */
#include <stdio.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

enum { MAX_RINGS = 8, PRODUCER_WARPS = 4 };

/* The loop to split and what moves. */
typedef struct Split {
  Op *loop;   /* the step loop, whose staged loads move */
  Op *mid;    /* a sequential loop between it and the tile loop (the
                 backward's loop over a K/V head's query heads), or NULL */
  Block *tbody; /* the parallel tile loop's body */
  Op *loads[MAX_RINGS]; /* the step's staged loads, in program order */
  int nloads;
  int input_stages;     /* ring_stages: the input rings' stages */
  bool ok;
} Split;

/* The staged loads of blk (at any depth) into sp; a nested loop, an async
 * matmul or too many loads: not splittable. */
static void find_loads(Split *sp, Block *blk) {
  for (Op *o = blk->first; o && sp->ok; o = o->next) {
    if (o->kind == OP_FOR || (o->kind == OP_MATMUL && attr_get(&o->attrs, "async")))
      sp->ok = false;
    if (op_is_staged_load(o)) {
      if (sp->nloads == MAX_RINGS)
        sp->ok = false;
      else
        sp->loads[sp->nloads++] = o;
    }
    for (int r = 0; r < o->nregions; r++)
      find_loads(sp, o->regions[r]);
  }
}

/* Is blk one of the blocks whose scalars the producer recomputes: the
 * tile loop's body, the mid loop's body? */
static bool level_block(const Split *sp, const Block *blk) {
  return blk == sp->tbody || (sp->mid && blk == for_body(sp->mid));
}

static bool region_reads_computable(Block *blk, const Split *sp, int depth);

/* Can v be computed by the producer, whose region sits at the top of the
 * tile loop's body? Values from outside that body's tree are visible to
 * it; the scalars of the body and of the mid loop's body are recomputed
 * (scalar ops and pure scalar ifs only), as are the loops' induction
 * variables; values inside other nested regions are not reachable. */
static bool producer_computable(Value *v, const Split *sp, int depth) {
  Op *tloop = sp->tbody->parent_op, *d = v->def;
  Block *home = d ? d->parent : v->block;
  if (!d && home == sp->tbody)
    return true; /* the tile loop's induction variable */
  if (!d && sp->mid && home == for_body(sp->mid))
    return v == for_iv(sp->mid);
  if (!level_block(sp, home))
    return d ? !op_is_inside(d, tloop) : !(home->parent_op && op_is_inside(home->parent_op, tloop));
  if (depth > 64 || v->type.kind != TYPE_SCALAR ||
      !(op_is_pure(d) || op_is_pure_if(d) || op_is_scalar_loop(d)))
    return false;
  for (int i = 0; i < d->noperands; i++)
    if (!producer_computable(d->operands[i], sp, depth + 1))
      return false;
  /* what a pure if's or a scalar loop's regions read from the levels */
  for (int r = 0; r < d->nregions; r++)
    if (!region_reads_computable(d->regions[r], sp, depth))
      return false;
  return true;
}

/* Whatever the ops of blk (at any depth) read from the levels the producer
 * can compute. */
static bool region_reads_computable(Block *blk, const Split *sp, int depth) {
  for (Op *o = blk->first; o; o = o->next) {
    for (int i = 0; i < o->noperands; i++) {
      Value *x = o->operands[i];
      if (x->def && level_block(sp, x->def->parent) && !producer_computable(x, sp, depth + 1))
        return false;
    }
    for (int r = 0; r < o->nregions; r++)
      if (!region_reads_computable(o->regions[r], sp, depth))
        return false;
  }
  return true;
}

/* A tile the tensor cores read from shared memory (a staged load's type). */
static bool staged_type(Type t) {
  return t.kind == TYPE_TILE && t.dist == DIST_NONE && (t.elem == ELEM_BF16 || t.elem == ELEM_F16);
}

/* The only `for` of blk is `loop`, besides loops of scalars (mask-skip's
 * binary searches for the step bounds, which the producer clones). */
static bool only_loop(Block *blk, const Op *loop) {
  for (Op *o = blk->first; o; o = o->next)
    if (o != loop && o->kind == OP_FOR && !op_is_scalar_loop(o))
      return false;
  return true;
}

/* Is loop the step loop of a tile the producer can feed? The forward's
 * K/V loop of a Q tile (carrying O, l, m), or a backward kernel's inner
 * loop (carrying its gradient tiles), right in the parallel tile loop's
 * body or in one sequential loop there (the K/V-outer kernels' loop over
 * the query heads of a K/V head's group). */
static bool match_split(Op *loop, Split *sp, bool backward) {
  memset(sp, 0, sizeof *sp);
  sp->loop = loop;
  sp->ok = true;
  int io, il, im;
  if (for_is_parallel(loop) || attr_get(&loop->attrs, "pipelined") || !loop->parent->parent_op)
    return false;
  if (!backward && !kv_loop_state(loop, &io, &il, &im))
    return false;
  Op *up = loop->parent->parent_op;
  if (backward && up->kind == OP_FOR && !for_is_parallel(up)) {
    sp->mid = up;
    up = up->parent->parent_op;
  }
  sp->tbody = (sp->mid ? sp->mid : loop)->parent;
  if (!up || up->kind != OP_FOR || !for_is_parallel(up))
    return false;
  for (int i = 2; i < loop->noperands; i++)
    if (staged_type(loop->operands[i]->type))
      return false; /* a carried staged tile (overlap-softmax's V, pipeline's) */
  find_loads(sp, for_body(loop));
  if (!sp->ok || sp->nloads == 0)
    return false;
  for (int k = 0; k < sp->nloads; k++)
    for (int i = 0; i < sp->loads[k]->noperands; i++) {
      Value *x = sp->loads[k]->operands[i];
      if (!loop_rebuildable(x, loop))
        return false;
    }
  /* The bounds and whatever the loads' rows read from outside the loop. */
  for (int i = 0; i < 2; i++)
    if (!producer_computable(loop->operands[i], sp, 0) ||
        (sp->mid && !producer_computable(sp->mid->operands[i], sp, 0)))
      return false;
  for (int k = 0; k < sp->nloads; k++)
    for (int i = 0; i < sp->loads[k]->noperands; i++) {
      Value *x = sp->loads[k]->operands[i];
      if (value_defined_outside(x, loop) && !producer_computable(x, sp, 0))
        return false;
    }
  /* One step loop per tile. */
  return only_loop(sp->tbody, sp->mid ? sp->mid : loop) && (!sp->mid || only_loop(for_body(sp->mid), loop));
}

/* ---- the producer's copy of the scalars it needs ------------------------ */

typedef struct Clone {
  Module *m;
  Block *consumer; /* where the tile's ops now are */
  Block *midbody;  /* the consumer's mid loop's body, or NULL */
  Builder pre;     /* the producer region, before its loops */
  Builder mid;     /* the producer's mid loop's body, before its step loop */
  Builder body;    /* the producer step loop's body */
  Op *loop;        /* the consumer's step loop */
  Value *iv;       /* the producer step loop's induction variable */
  ValueMap map;
} Clone;

static Value *clone_pre(Clone *c, Value *v);

/* What the ops of blk (at any depth) read from the consumer's levels,
 * cloned before the op that holds blk is. */
static void clone_region_reads(Clone *c, Block *blk) {
  for (Op *o = blk->first; o; o = o->next) {
    for (int i = 0; i < o->noperands; i++)
      clone_pre(c, o->operands[i]);
    for (int r = 0; r < o->nregions; r++)
      clone_region_reads(c, o->regions[r]);
  }
}

/* v as the producer computes it before its step loop: the scalars of the
 * consumer's tile body (and mid loop body) cloned, each before the
 * producer's loop at its level (pure ifs with what their regions read);
 * the rest as is. */
static Value *clone_pre(Clone *c, Value *v) {
  Op *d = v->def;
  Value *got = valuemap_get(&c->map, v);
  if (got != v || !d || (d->parent != c->consumer && d->parent != c->midbody))
    return got;
  for (int i = 0; i < d->noperands; i++)
    clone_pre(c, d->operands[i]);
  for (int r = 0; r < d->nregions; r++)
    clone_region_reads(c, d->regions[r]);
  Op *k = op_clone(d->parent == c->consumer ? &c->pre : &c->mid, d, &c->map);
  for (int r = 0; r < d->nresults; r++)
    valuemap_put(c->m, &c->map, d->results[r], k->results[r]);
  return k->results[v->result_index];
}

/* v as the producer's step computes it: the step's scalar chain from the
 * producer's induction variable. */
static Value *clone_step(Clone *c, Value *v) {
  if (v == for_iv(c->loop))
    return c->iv;
  if (value_defined_outside(v, c->loop))
    return clone_pre(c, v);
  Value *got = valuemap_get(&c->map, v);
  if (got != v)
    return got;
  Op *d = v->def;
  for (int i = 0; i < d->noperands; i++)
    clone_step(c, d->operands[i]);
  Op *k = op_clone(&c->body, d, &c->map);
  valuemap_put(c->m, &c->map, v, k->results[0]);
  return k->results[0];
}

/* The step number of induction variable iv of a loop from lo: iv - lo, or
 * iv itself when lo is the constant 0. */
static Value *step_number(Builder *b, Value *iv, Value *lo) {
  if (lo->def && lo->def->kind == OP_CONST && attr_float(&lo->def->attrs, "value", 1) == 0)
    return iv;
  Value *s = build_binary(b, OP_SUB, iv, lo);
  s->name = "step";
  return s;
}

/* `%<name>_ring`. */
static const char *ring_name(Module *m, const Value *t) {
  const char *n = t->name ? t->name : "t";
  size_t len = strlen(n) + 6;
  char *s = module_alloc(m, len);
  snprintf(s, len, "%s_ring", n);
  return s;
}

/* A staged tile of a run-time input (stage-inputs' `load {rect = 1}`). */
static bool is_input_load(const Op *ld) { return attr_int(&ld->attrs, "rect", 0) == 1; }

/* The order of the producer's puts (indices into sp->loads): the step's
 * last load of Q/K/V (the forward's V, whose P V overlap-softmax defers to
 * the next step) after the run-time inputs' tiles, which the step reads
 * right after S. The producer puts in order, each put waiting for its
 * slot: put before V, whose slot frees only at the next step's end, an
 * input's next tile is issued a whole step before it is read instead of
 * half of one (the single-stage full bias, perf-log P110). */
static void put_order(const Split *sp, int *order) {
  int n = 0, last = -1;
  for (int k = 0; k < sp->nloads; k++)
    if (!is_input_load(sp->loads[k]))
      last = k;
  for (int pass = 0; pass < 3; pass++)
    for (int k = 0; k < sp->nloads; k++) {
      bool input = is_input_load(sp->loads[k]);
      if ((pass == 0 && !input && k != last) || (pass == 1 && input) || (pass == 2 && k == last))
        order[n++] = k;
    }
}

/* The ring's stages: the schedule's when it names them, else as many as
 * shared memory holds (at most 4, at least 2) beside the consumers' own
 * staged tiles (Q; the backward's K/V-outer K and V) and the rings'
 * barriers (1024-byte aligned blocks), for the blocks an SM runs: one with
 * two consumer warpgroups; with one (the backward's four warps) two where
 * two stages fit in half the shared memory, else one (*blocks_per_sm: 1;
 * codegen then gives the consumers more registers, walk.c lw_role_regs).
 * The producer runs that many steps ahead; d128 measured 2-10% faster
 * with 3 than with 2 (docs/perf-log.md P68). */
static int ring_stages(Func *f, Split *sp, int *blocks_per_sm) {
  long own = 0, per_stage = 0;
  OpList loads = collect_ops_in(sp->tbody, OP_LOAD);
  for (int i = 0; i < loads.n; i++)
    if (op_is_staged_load(loads.v[i]) && !op_is_inside(loads.v[i], sp->loop))
      own += tile_bytes(loads.v[i]->results[0]->type);
  oplist_free(&loads);
  long inputs = 0; /* stage-inputs' tiles: their rings get what is left */
  const Op *last = NULL;
  for (int k = 0; k < sp->nloads; k++) {
    if (is_input_load(sp->loads[k])) {
      inputs += tile_bytes(sp->loads[k]->results[0]->type);
      continue;
    }
    per_stage += tile_bytes(sp->loads[k]->results[0]->type);
    last = sp->loads[k];
  }
  /* overlap-softmax (after this pass) gives V's ring a slot of zeros */
  own += ring_overhead_bytes(f, last ? tile_bytes(last->results[0]->type) : 0, sp->nloads);
  /* group-dq's main kernel (8 warps): the dS^T copy the dQ matmul reads
   * and the reductions' staging, a warp's 16 rows of its group's columns
   * each (codegen's lw_regs_to_smem, mem_ldmatrix.c, and add_tile_bulk's
   * padded rows, mem_global.c; add_tile_tma's unpadded boxes take less) */
  if (pass_grouped_main(f)) {
    long tq = attr_int(&f->attrs, "tile_q", 64), tkv = attr_int(&f->attrs, "tile_kv", 128);
    long warps = attr_int(&f->attrs, "warps", 8), groups = warps / (tq / 16);
    long d = attr_int(&f->attrs, "head_dim", 128);
    own += tkv * tq * 2 + warps * 16 * (d / groups + 4) * 4 + 2048;
  }
  const long sm = tiling_smem_limit(attr_str(&f->attrs, "target", "sm_90a")), half = sm / 2 - 1024;
  int given = attr_int(&f->attrs, "sched_stages", 0) > 0 ? (int)attr_int(&f->attrs, "stages", 2) : 0;
  if (given && given < 2)
    given = 2;
  *blocks_per_sm =
      attr_int(&f->attrs, "warps", 8) == 4 && own + (given ? given : 2) * per_stage <= half ? 2 : 1;
  long room = (*blocks_per_sm == 2 ? half : sm) - own;
  int stages = given;
  if (!given) {
    long fit = (room - inputs) / per_stage;
    stages = fit > 4 ? 4 : fit < 2 ? 2 : (int)fit;
  }
  /* the input rings: as many stages as the rest holds, at least 1, at most
   * the others' (stage-inputs checked that one fits beside two). The rest
   * counted exactly, as codegen lays it out: every ring's barriers in one
   * 1024-byte block (lw_alloc_small: 16 bytes a stage), not the block a
   * ring that `own` counts, and two blocks an
   * SM each (233472 - 2 x 1024) / 2 bytes, 1 KB of the SM's 228 KB being
   * reserved a block. A second stage of the d128 backward's bias then fits
   * beside two blocks an SM exactly (115712 bytes; bwd_q -10%, P129). */
  if (inputs) {
    long limit = *blocks_per_sm == 2 ? (sm + 1024) / 2 - 1024 : sm;
    long exact_own = own - 1024L * (sp->nloads - 1);
    long fit = (limit - exact_own - stages * per_stage) / inputs;
    sp->input_stages = fit > stages ? stages : fit < 1 ? 1 : (int)fit;
  }
  return stages;
}

/* The number of steps of a loop from lo to hi: max(hi - lo, 0). */
static Value *step_count(Builder *b, Value *lo, Value *hi) {
  return build_binary(b, OP_MAX, build_binary(b, OP_SUB, hi, lo), build_index(b, 0));
}

/* The consumers' mid loop counts the steps before its iteration in an
 * iter_arg %base (the producer's does the same): a step of the inner loop
 * is %base + (iv - lo), so the steps of all the mid loop's iterations
 * follow each other on the rings. Returns %base. */
static Value *count_mid_steps(Module *m, Op *mid, Op *loop) {
  Builder before = builder_before(m, mid);
  op_append_operand(m, mid, build_index(&before, 0));
  Value *base = block_add_arg(m, for_body(mid), type_scalar(ELEM_INDEX), "base");
  op_append_result(m, mid, type_scalar(ELEM_INDEX));
  Op *yield = block_terminator(for_body(mid));
  Builder end = builder_before(m, yield);
  end.loc = loop->loc;
  op_append_operand(m, yield, build_binary(&end, OP_ADD, base,
                                           step_count(&end, loop->operands[0], loop->operands[1])));
  return base;
}

/* The op of the step's body (its top level) holding the only reader of an
 * input tile t got from its ring, when that reader is a cast to registers
 * (stage-inputs' form); NULL otherwise. */
static Op *is_input_load_read(Value *t, Block *body) {
  if (t->nuses != 1 || !t->uses[0].user || t->uses[0].user->kind != OP_CAST)
    return NULL;
  Op *o = t->uses[0].user;
  while (o && o->parent != body)
    o = o->parent ? o->parent->parent_op : NULL;
  return o;
}

static void split_roles(Module *m, Func *f, Split *sp) {
  Op *loop = sp->loop;
  Block *tbody = sp->tbody;
  Op *tterm = block_terminator(tbody);
  int blocks_per_sm;
  int stages = ring_stages(f, sp, &blocks_per_sm);

  /* The rings and the roles, first in the tile's body. */
  Builder top = builder_before(m, tbody->first);
  top.loc = loop->loc;
  Value *rings[MAX_RINGS];
  for (int k = 0; k < sp->nloads; k++) {
    Value *t = sp->loads[k]->results[0];
    Type rt = type_ring(t->type);
    Op *r = build_op(&top, OP_RING, NULL, 0, &rt, 1, 0);
    op_set_attr_int(r, "stages", is_input_load(sp->loads[k]) ? sp->input_stages : stages);
    if (pass_tma_load(f, sp->loads[k]))
      op_set_attr_int(r, "tma", 1);
    r->results[0]->name = ring_name(m, t);
    rings[k] = r->results[0];
  }
  Op *roles = build_op(&top, OP_WARP_ROLES, NULL, 0, NULL, 0, 2);
  op_set_attr_int(roles, "producer_warps", PRODUCER_WARPS);
  if (attr_int(&f->attrs, "warps", 8) == 4)
    op_set_attr_int(roles, "blocks_per_sm", blocks_per_sm);
  Block *producer = roles->regions[0], *consumer = roles->regions[1];
  producer->parent_op = consumer->parent_op = roles;

  /* Everything else of the tile's body goes to the consumers. */
  for (Op *o = roles->next; o && o != tterm;) {
    Op *next = o->next;
    op_move_to_end(o, consumer);
    o = next;
  }
  Builder cend = builder_at_end(m, consumer);
  build_yield(&cend, NULL, 0);

  /* The producer: the bounds, then one put per load and step; each loop's
   * scalars are cloned before it (the builder of its level moves there). */
  Clone c = {.m = m, .consumer = consumer, .midbody = sp->mid ? for_body(sp->mid) : NULL,
             .loop = loop};
  c.pre = builder_at_end(m, producer);
  c.pre = builder_before(m, build_yield(&c.pre, NULL, 0));
  c.pre.loc = loop->loc;
  Value *base = NULL, *pbase = NULL;
  if (sp->mid) {
    Value *mlo = clone_pre(&c, sp->mid->operands[0]), *mhi = clone_pre(&c, sp->mid->operands[1]);
    Value *zero = build_index(&c.pre, 0);
    Op *pmid = build_for(&c.pre, mlo, mhi, false, &zero, 1, for_iv(sp->mid)->name);
    for_iter_arg(pmid, 0)->name = "base";
    pbase = for_iter_arg(pmid, 0);
    valuemap_put(m, &c.map, for_iv(sp->mid), for_iv(pmid));
    c.mid = builder_at_end(m, for_body(pmid));
    c.mid.loc = loop->loc;
    c.pre = builder_before(m, pmid);
    c.pre.loc = loop->loc;
  }
  Builder *level = sp->mid ? &c.mid : &c.pre;
  Value *lo = clone_pre(&c, loop->operands[0]), *hi = clone_pre(&c, loop->operands[1]);
  Op *ploop = build_for(level, lo, hi, false, NULL, 0, "j");
  if (sp->mid) {
    Value *next = build_binary(level, OP_ADD, pbase, step_count(level, lo, hi));
    build_yield(level, &next, 1);
  }
  *level = builder_before(m, ploop);
  level->loc = loop->loc;
  c.iv = for_iv(ploop);
  valuemap_put(m, &c.map, for_iv(loop), c.iv);
  c.body = builder_at_end(m, for_body(ploop));
  c.body.loc = loop->loc;
  Value *pstep = step_number(&c.body, c.iv, lo);
  if (pbase)
    pstep = build_binary(&c.body, OP_ADD, pbase, pstep);
  int order[MAX_RINGS];
  put_order(sp, order);
  for (int n = 0; n < sp->nloads; n++) {
    int k = order[n];
    Op *ld = sp->loads[k];
    for (int i = 0; i < ld->noperands; i++)
      clone_step(&c, ld->operands[i]);
    c.body.loc = ld->loc;
    Op *pl = op_clone(&c.body, ld, &c.map);
    pl->results[0]->name = ld->results[0]->name;
    Value *ops[3] = {rings[k], pstep, pl->results[0]};
    build_op(&c.body, OP_RING_PUT, ops, 3, NULL, 0, 0);
  }
  build_yield(&c.body, NULL, 0);

  /* The consumers: get at the top of the step, release at its end. */
  if (sp->mid)
    base = count_mid_steps(m, sp->mid, loop);
  Block *body = for_body(loop);
  Builder get = builder_before(m, body->first);
  get.loc = loop->loc;
  Value *cstep = step_number(&get, for_iv(loop), loop->operands[0]);
  if (base)
    cstep = build_binary(&get, OP_ADD, base, cstep);
  Builder rel = builder_before(m, block_terminator(body));
  rel.loc = loop->loc;
  for (int k = 0; k < sp->nloads; k++) {
    Op *ld = sp->loads[k];
    Value *ops[2] = {rings[k], cstep};
    get.loc = ld->loc;
    Op *g = build_op(&get, OP_RING_GET, ops, 2, &ld->results[0]->type, 1, 0);
    g->results[0]->name = ld->results[0]->name;
    value_replace_all_uses(ld->results[0], g->results[0]);
    op_erase(ld);
    Op *read = is_input_load_read(g->results[0], body);
    if (read) {
      /* its one reader copies it to registers: the slot is free after it,
       * which lets a ring of one stage refill while the step computes */
      Builder after = builder_after(m, read);
      after.loc = loop->loc;
      build_op(&after, OP_RING_RELEASE, ops, 2, NULL, 0, 0);
    } else {
      build_op(&rel, OP_RING_RELEASE, ops, 2, NULL, 0, 0);
    }
  }
}

int pass_warp_specialize(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)diag;
  const char *mode = attr_str(&f->attrs, "mode", "");
  int d = (int)attr_int(&f->attrs, "head_dim", 0);
  int dv = (int)attr_int(&f->attrs, "v_head_dim", d);
  int warps = (int)attr_int(&f->attrs, "warps", 4);
  bool backward = strcmp(mode, "backward") == 0;
  /* On unless the spec's schedule says `producer = 0`: +15-25% at d128 and
   * d256 on the H100 (docs/perf-log.md P68); the forward's two consumer
   * warpgroups, the backward's one or two. */
  if (attr_int(&f->attrs, "sched_producer", 1) != 1 ||
      !(strcmp(mode, "forward") == 0 ? warps == 8 : backward ? pass_backward_warp_roles(f) : false) ||
      !pass_targets_wgmma(f, opts) || d % 64 || dv % 64)
    return 0;
  if (block_has_op(f->body, OP_WARP_ROLES))
    return 0;
  OpList loops = collect_ops(f, OP_FOR);
  Split sp;
  for (int i = 0; i < loops.n; i++)
    if (match_split(loops.v[i], &sp, backward)) {
      split_roles(m, f, &sp);
      break;
    }
  oplist_free(&loops);
  return 0;
}
