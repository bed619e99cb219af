/* persistent.c - the `persistent` pass: a warp-specialized forward kernel
 * whose CTAs each walk many (batch, head, Q tile) work tiles.
 *
 * One CTA per tile pays its prologue (barrier init, Q's and the first K/V
 * tiles' latency) and its epilogue unoverlapped; with 4-8 K/V steps a tile
 * (512-1k rows) that is what separates the short rows from cuDNN's
 * (docs/hopper-pipeline.md §11). A persistent kernel launches %nctas CTAs
 * (the runtime: min(tiles, SMs)), each taking tiles cta, cta + nctas, ...
 * (FlashAttention-3's static persistent scheduler: Q tiles fastest, then
 * heads, then batches, so CTAs running together share a head's K/V in L2).
 *
 * Tiles of unequal work (a role's step count depends on the Q tile: a
 * causal mask's narrowed loop) are walked in mirrored pairs: a block takes
 * tiles two by two, pair p = cta, cta + nctas, ..., and a head's Q tiles
 * are dealt 0, n-1, 1, n-2, ..., so under a causal mask every pair holds
 * the same steps (n + 1 tiles of K/V) and the blocks' shares stay within a
 * pair of each other while the blocks running together still share a
 * head's K/V in L2. (With an odd count of Q tiles a pair may span two
 * heads and weigh less. With fewer pairs than blocks, a launch of 1-2
 * tiles a block, the walk takes tiles one by one as for equal work:
 * pairs would leave blocks idle.) Every plain static order measured slower than
 * one block a tile, whose blocks the hardware hands out as SMs free up
 * (P101, d128 causal 16k: the stride 413 TFLOP/s, 3x spread of steps
 * between CTAs; Q tile slowest dealt in a snake 547, its waves spanning
 * every head; the same by L2 sections of heads 482; one block a tile
 * 578); the pairs: 562-566 there, +11% at 512 rows (P104).
 *
 * The rewrite, on the nest warp-specialize leaves:
 *
 *   for %b parallel { for %h parallel { [%hk = ...] for %i parallel {
 *     %r = ring ...                           (the K/V rings)
 *     warp_roles { P(b, h, i) } consumer { C(b, h, i) } } } }
 * =>
 *   %ntiles = nb * nh * ni
 *   for %cta = 0 to %nctas parallel {
 *     %r = ring ...                           (once per CTA: barriers too)
 *     warp_roles {
 *       for %u = 0 to ceildiv(ntiles - cta, nctas) iter_args(%base = 0) {
 *         t = cta + u nctas; i = t % ni; h = t / ni % nh; b = t / (ni nh)
 *         (unequal tiles, at least a pair a block: t = 2 (cta + (u / 2)
 *          nctas) + u % 2, and i = j / 2 or ni - 1 - j / 2 for j = t % ni
 *          even or odd; `mine` counts both)
 *         P(b, h, i) with every ring step s as select(s < 0, s, base + s)
 *         yield base + (P's step count)
 *       } } consumer { the same walk over C }
 *   }
 *
 * Codegen takes a ring's slot and phase from the step (slot = step mod
 * stages, phase = step / stages), so steps that keep counting across tiles
 * carry the rings' state from tile to tile as FA3's PipelineState does; a
 * negative step stays the zero slot (overlap-softmax's step -1). A role's
 * step count is the upper bound of its step loop (the loop holding its
 * ring ops, from 0: mask-skip trims only the upper bound of a forward's);
 * both roles compute it from the same tile, so their bases agree.
 *
 * Q's tile goes through the producer too (walked kernels only): a ring of
 * one stage, %qt_ring, whose step is the walk's tile count u; the producer
 * puts tile u's Q first in its tile, the consumers get it where they
 * loaded it and release it after their step loop (the tile's last QK^T),
 * so tile u + 1's Q copies while the consumers finish tile u (its last
 * P V, the epilogue) instead of after it (FA3's Q barrier; P102). By TMA
 * where K and V are (the runtime's map of Q), else by cp.async up to 32 KB
 * of Q (head dim 128): see q_through_producer.
 *
 * It fires on forward kernels with warp roles whose attribute `persistent`
 * is 1 or unset (wants_walk), not varlen, without
 * block lists or pingpong's turns, and leaves any other nest alone. The
 * runtime launches what it made persistent (docs/abi.md).
 */
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

enum { MAX_NEST = 3, Q_RING_MAX_BYTES = 32 << 10 };

typedef struct Nest {
  Op *loop[MAX_NEST]; /* outermost first: parallel, from 0 */
  int n;
  Op *roles;          /* the warp_roles in the innermost body */
} Nest;

/* Are the ops of blk, but `keep`, its terminator and ring ops, pure scalar
 * ops (what may move into both roles' walks)? */
static bool only_scalars_besides(Block *blk, Op *keep, bool rings_ok) {
  for (Op *o = blk->first; o; o = o->next) {
    if (o == keep || o == block_terminator(blk) || (rings_ok && o->kind == OP_RING))
      continue;
    if (!op_is_pure(o) || o->nregions || o->nresults != 1 || o->results[0]->type.kind != TYPE_SCALAR)
      return false;
  }
  return true;
}

static bool from_zero(Op *loop) {
  double lo;
  return value_const(loop->operands[0], &lo) && lo == 0;
}

/* The nest of parallel loops (from 0, no results) down to a body holding
 * the rings and the warp_roles; false when the kernel is not that shape. */
static bool find_nest(Func *f, Nest *n) {
  Block *blk = f->body;
  Op *par = NULL;
  for (Op *o = blk->first; o; o = o->next)
    if (o->kind == OP_FOR && for_is_parallel(o))
      par = o;
  n->n = 0;
  while (par) {
    if (n->n == MAX_NEST || !from_zero(par) || par->nresults || par->noperands != 2 ||
        !value_defined_outside(par->operands[1], n->n ? n->loop[0] : par))
      return false;
    n->loop[n->n++] = par;
    Block *body = for_body(par);
    Op *next = NULL, *roles = NULL;
    for (Op *o = body->first; o; o = o->next) {
      if (o->kind == OP_FOR && for_is_parallel(o))
        next = o;
      if (o->kind == OP_WARP_ROLES)
        roles = o;
    }
    if (next && !roles && only_scalars_besides(body, next, false)) {
      par = next;
      continue;
    }
    if (!next && roles && only_scalars_besides(body, roles, true)) {
      n->roles = roles;
      return true;
    }
    return false;
  }
  return false;
}

/* The loop of a role's region holding its ring ops (directly, or in ifs);
 * NULL unless there is exactly one and it starts at 0. */
static Op *step_loop(Block *role) {
  Op *found = NULL;
  for (Op *o = role->first; o; o = o->next) {
    if (o->kind != OP_FOR)
      continue;
    Block *b = for_body(o);
    if (!block_has_op(b, OP_RING_PUT) && !block_has_op(b, OP_RING_GET))
      continue;
    if (found || !from_zero(o))
      return NULL;
    found = o;
  }
  return found;
}

/* The ring ops inside blk (at any depth). */
static void ring_ops(Block *blk, OpList *out) {
  for (Op *o = blk->first; o; o = o->next) {
    for (int r = 0; r < o->nregions; r++)
      ring_ops(o->regions[r], out);
    if (o->kind == OP_RING_PUT || o->kind == OP_RING_GET || o->kind == OP_RING_RELEASE)
      oplist_push(out, o);
  }
}

/* Every ring step s inside blk becomes select(s < 0, s, base + s), one
 * value per s (made where s is: a get and its release keep naming the same
 * step, as the verifier asks); q_ring's steps become the walk's u. */
static void offset_steps(Module *m, Block *blk, Value *base, Value *zero, const Value *q_ring,
                         Value *u) {
  OpList ops = {0};
  ring_ops(blk, &ops);
  ValueMap done = {0};
  for (int i = 0; i < ops.n; i++) {
    Op *o = ops.v[i];
    if (o->operands[0] == q_ring) { /* one step a tile: the tile's count */
      Value *was = o->operands[1];
      op_set_operand(o, 1, u);
      if (was->def && was->nuses == 0)
        op_erase(was->def);
      continue;
    }
    Value *s = o->operands[1], *t = valuemap_get(&done, s);
    if (t == s) {
      Builder b = s->def ? builder_after(m, s->def) : builder_at_end(m, s->block);
      if (!s->def)
        b = s->block->first ? builder_before(m, s->block->first) : b;
      b.loc = o->loc;
      Value *neg = build_cmp(&b, "lt", s, zero);
      t = build_select(&b, neg, s, build_binary(&b, OP_ADD, base, s));
      t->name = "gstep";
      valuemap_put(m, &done, s, t);
    }
    op_set_operand(o, 1, t);
  }
  oplist_free(&ops);
}

/* Does v's value come from x (through the ops that define it)? */
static bool depends_on(const Value *v, const Value *x, int depth) {
  if (v == x)
    return true;
  if (!v->def || depth > 64)
    return false;
  for (int i = 0; i < v->def->noperands; i++)
    if (depends_on(v->def->operands[i], x, depth + 1))
      return true;
  return false;
}

/* Tiles of unequal work: the role's step count depends on the innermost
 * (Q tile) loop's index. */
static bool unequal_tiles(const Nest *n, Block *role) {
  return depends_on(step_loop(role)->operands[1], for_iv(n->loop[n->n - 1]), 0);
}

/* Q tile j of a head's walk order as the nest's index: even j from the
 * first tile up, odd j from the last one down (j / 2 or n - 1 - j / 2), so
 * a pair of tiles 2p, 2p + 1 is a head's i-th and (n-1-i)-th: under a
 * causal mask (steps growing with the tile) every pair the same work. */
static Value *mirrored(Builder *b, Value *j, Value *nq) {
  Value *two = build_index(b, 2), *one = build_index(b, 1);
  Value *half = build_binary(b, OP_DIV, j, two);
  Value *even = build_cmp(b, "eq", build_binary(b, OP_REM, j, two), build_index(b, 0));
  Value *down = build_binary(b, OP_SUB, build_binary(b, OP_SUB, nq, one), half);
  return build_select(b, even, half, down);
}

/* The walk of one role region `role` (its ops moved into a tile loop):
 * the nest's induction variables become the decoded tile's, the ops
 * between the loops are copied in front (each role its own copy), the
 * steps offset by the loop-carried base. Tiles of unequal work are walked
 * `paired` (a block's tiles two by two, mirrored). */
static bool walk_role(Module *m, const Nest *n, Block *role, Value *cta, Value *nctas,
                      Value *ntiles, Value *const *ext, const Value *q_ring, bool paired) {
  Op *steps = step_loop(role);
  Op *term = block_terminator(role);
  if (!steps || !term || term->noperands)
    return false;
  Builder b = builder_before(m, role->first);
  b.loc = n->roles->loc;
  Value *zero = build_index(&b, 0);
  Value *mine = build_binary(&b, OP_CEILDIV, build_binary(&b, OP_SUB, ntiles, cta), nctas);
  Value *pairs = NULL; /* paired and at least a pair a block: else one tile a block's turn */
  if (paired) { /* pairs 2p, 2p + 1 of cta, cta + nctas, ...: the first and the second tiles */
    Value *two = build_index(&b, 2);
    Value *firsts = build_binary(&b, OP_CEILDIV, ntiles, two);
    Value *seconds = build_binary(&b, OP_DIV, ntiles, two);
    Value *left1 = build_binary(&b, OP_MAX, build_binary(&b, OP_SUB, firsts, cta), zero);
    Value *left2 = build_binary(&b, OP_MAX, build_binary(&b, OP_SUB, seconds, cta), zero);
    Value *in_pairs = build_binary(&b, OP_ADD, build_binary(&b, OP_CEILDIV, left1, nctas),
                                   build_binary(&b, OP_CEILDIV, left2, nctas));
    pairs = build_cmp(&b, "ge", firsts, nctas);
    pairs->name = "pairs";
    mine = build_select(&b, pairs, in_pairs, mine);
  }
  Op *walk = build_for(&b, zero, mine, false, &zero, 1, "u");
  Block *body = for_body(walk);
  Value *base = for_iter_arg(walk, 0);
  base->name = "base";
  /* the role's ops (after the walk's own) go into the walk's body */
  while (walk->next != term)
    op_move_to_end(walk->next, body);
  /* t = cta + u nctas (paired: 2 (cta + (u / 2) nctas) + u mod 2),
   * decoded innermost loop fastest */
  Builder wb = body->first ? builder_before(m, body->first) : builder_at_end(m, body);
  wb.loc = n->roles->loc;
  Value *u = for_iv(walk);
  Value *t = build_binary(&wb, OP_ADD, cta, build_binary(&wb, OP_MUL, u, nctas));
  if (pairs) {
    Value *two = build_index(&wb, 2);
    Value *pair = build_binary(&wb, OP_ADD, cta,
                               build_binary(&wb, OP_MUL, build_binary(&wb, OP_DIV, u, two), nctas));
    Value *in_pair = build_binary(&wb, OP_ADD, build_binary(&wb, OP_MUL, pair, two),
                                  build_binary(&wb, OP_REM, u, two));
    t = build_select(&wb, pairs, in_pair, t);
  }
  t->name = "tile";
  ValueMap map = {0};
  for (int d = n->n - 1; d >= 0; d--) {
    Value *iv = for_iv(n->loop[d]);
    Value *x = d ? build_binary(&wb, OP_REM, t, ext[d]) : t;
    if (pairs && d == n->n - 1) /* Q tiles j = 0, 1, 2, ... are 0, n-1, 1, n-2, ... */
      x = build_select(&wb, pairs, mirrored(&wb, x, ext[d]), x);
    x->name = iv->name;
    valuemap_put(m, &map, iv, x);
    if (d)
      t = build_binary(&wb, OP_DIV, t, ext[d]);
  }
  /* the scalar ops between the loops, copied in order (outer first) */
  for (int d = 0; d < n->n; d++) {
    Block *lb = for_body(n->loop[d]);
    for (Op *o = lb->first; o; o = o->next) {
      if (o->kind == OP_FOR || o->kind == OP_WARP_ROLES || o->kind == OP_RING ||
          o == block_terminator(lb))
        continue;
      Op *c = op_clone(&wb, o, &map);
      c->results[0]->name = o->results[0]->name;
      valuemap_put(m, &map, o->results[0], c->results[0]);
    }
  }
  /* uses inside the walk body of the old values now read the new ones */
  for (int i = 0; i < map.n; i++) {
    Value *from = map.from[i];
    for (int u = from->nuses - 1; u >= 0; u--) {
      Op *user = from->uses[u].user;
      if (op_is_inside(user, walk))
        op_set_operand(user, from->uses[u].index, map.to[i]);
    }
  }
  offset_steps(m, body, base, zero, q_ring, for_iv(walk));
  Builder yb = builder_at_end(m, body);
  yb.loc = n->roles->loc;
  Value *next = build_binary(&yb, OP_ADD, base, steps->operands[1]);
  build_yield(&yb, &next, 1);
  return true;
}

/* v as the producer computes it: the ops of the consumer region `cons`
 * it comes from, cloned in order at b (each once: map). */
static Value *clone_scalars(Module *m, Builder *b, Block *cons, ValueMap *map, Value *v) {
  Value *got = valuemap_get(map, v);
  Op *d = v->def;
  if (got != v || !d || d->parent != cons)
    return got;
  for (int i = 0; i < d->noperands; i++)
    clone_scalars(m, b, cons, map, d->operands[i]);
  Op *k = op_clone(b, d, map);
  for (int r = 0; r < d->nresults; r++)
    valuemap_put(m, map, d->results[r], k->results[r]);
  return k->results[v->result_index];
}

/* Are the ops of `cons` that v comes from pure scalar ops (what the
 * producer may compute again)? */
static bool scalar_slice(Block *cons, const Value *v, int depth) {
  const Op *d = v->def;
  if (!d || d->parent != cons)
    return true;
  if (depth > 64 || !op_is_pure((Op *)d) || d->nregions || v->type.kind != TYPE_SCALAR)
    return false;
  for (int i = 0; i < d->noperands; i++)
    if (!scalar_slice(cons, d->operands[i], depth + 1))
      return false;
  return true;
}

/* The consumers' Q tile through the producer (see the top): the ring, in
 * front of the warp_roles; the producer's put first in its region, the
 * consumers' get in the load's place and their release after the step
 * loop, all at step 0 until the walks make it u. NULL (nothing changed)
 * where the consumers load no Q tile before their step loop from
 * scalars the producer can compute. */
static Value *q_through_producer(Module *m, const Func *f, const Nest *n, Block *prod,
                                 Block *cons) {
  Op *steps = step_loop(cons), *ld = NULL;
  for (Op *o = cons->first; o && o != steps; o = o->next)
    if (o->kind == OP_LOAD && op_is_staged_load(o) && o->operands[0]->name &&
        strcmp(o->operands[0]->name, "q") == 0)
      ld = o;
  /* By TMA where the runtime has Q's map (one thread, no registers); else
   * cp.async by the producer's 128 threads on few registers, where a 64
   * KB tile (d256) spilled and measured 2-8% slower, 32 KB (d128) +12% at
   * 512 rows (P102). */
  if (!ld)
    return NULL;
  Type qt = ld->results[0]->type;
  bool tma = pass_tma_load(f, ld);
  if (!tma && qt.rows * qt.cols * 2 > Q_RING_MAX_BYTES)
    return NULL;
  for (int i = 1; i < ld->noperands; i++)
    if (!scalar_slice(cons, ld->operands[i], 0))
      return NULL;
  Builder rb = builder_before(m, n->roles);
  rb.loc = ld->loc;
  Type rt = type_ring(ld->results[0]->type);
  Op *r = build_op(&rb, OP_RING, NULL, 0, &rt, 1, 0);
  op_set_attr_int(r, "stages", 1);
  if (tma)
    op_set_attr_int(r, "tma", 1);
  Value *ring = r->results[0];
  ring->name = "qt_ring";
  /* the producer: Q's load and put, first */
  Builder pb = prod->first ? builder_before(m, prod->first) : builder_at_end(m, prod);
  pb.loc = ld->loc;
  ValueMap map = {0};
  for (int i = 1; i < ld->noperands; i++)
    clone_scalars(m, &pb, cons, &map, ld->operands[i]);
  Op *pl = op_clone(&pb, ld, &map);
  Value *put[3] = {ring, build_index(&pb, 0), pl->results[0]};
  build_op(&pb, OP_RING_PUT, put, 3, NULL, 0, 0);
  /* the consumers: get where they loaded, release after the step loop */
  Builder cb = builder_before(m, ld);
  cb.loc = ld->loc;
  Value *get[2] = {ring, build_index(&cb, 0)};
  Op *g = build_op(&cb, OP_RING_GET, get, 2, &ld->results[0]->type, 1, 0);
  g->results[0]->name = ld->results[0]->name;
  value_replace_all_uses(ld->results[0], g->results[0]);
  op_erase(ld);
  Builder after = builder_after(m, steps);
  after.loc = steps->loc;
  build_op(&after, OP_RING_RELEASE, get, 2, NULL, 0, 0);
  return ring;
}

/* Erases op and everything in its regions, users before what they use. */
static void erase_tree(Op *op) {
  for (int r = 0; r < op->nregions; r++)
    for (Op *o = op->regions[r]->last; o;) {
      Op *prev = o->prev;
      erase_tree(o);
      o = prev;
    }
  op_erase(op);
}

/* Walk unless the schedule says `persistent = 0`. On the H100
 * (alternating rounds, docs/perf-log.md P103-P104), d128 non-causal: +13%
 * at 512 rows, +8% at 1k, +1-4% to 8k, 16k within the spread; d128 causal
 * (mirrored pairs): +11% / +7% / +4% / +3% / +1.5% at 512 / 1k / 2k / 4k /
 * 8k, -1.5% at 16k (the static walk's last round of pairs: 7.8 pairs a
 * block is 8 for some). d256 on the H200 (four rounds, P118): +3-12% at
 * 512 rows, +2-7% causal to 4k, within the spread on full 1k-8k, -1..-4%
 * at causal 16k; on the H100 it had measured -7..+5% (P103), before the
 * walk's pairs and the Q ring by TMA.
 * d64 kernels have no warp roles (the pass never fires). */
static bool wants_walk(const Func *f) {
  return attr_int(&f->attrs, "persistent", 1) == 1;
}

int pass_persistent(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  if (strcmp(attr_str(&f->attrs, "mode", "forward"), "forward") != 0 || !wants_walk(f))
    return 0;
  /* varlen kernels find their sequence from blockIdx.z (codegen's
   * mem_varlen.c), block-list kernels their list from the tile's block:
   * not walked (yet) */
  if (strcmp(attr_str(&f->attrs, "layout", "padded"), "varlen") == 0)
    return 0;
  for (int i = 0; i < f->nargs; i++)
    if (value_is_block_list_arg(f->args[i]))
      return 0;
  /* pingpong's turns start once, at the top of the consumer region; a walk
   * would start them every tile (the named barriers' counts break) */
  if (block_has_op(f->body, OP_MMA_TURN))
    return 0;
  Nest n = {0};
  if (!find_nest(f, &n) || n.roles->nregions != 2)
    return 0;
  Block *roles[2] = {n.roles->regions[0], n.roles->regions[1]};
  bool unequal = false; /* then walked in mirrored pairs (see the top) */
  for (int r = 0; r < 2; r++) {
    if (!step_loop(roles[r]))
      return 0;
    unequal |= unequal_tiles(&n, roles[r]);
  }
  Op *outer = n.loop[0];
  Builder b = builder_before(m, outer);
  b.loc = outer->loc;
  Value *ext[MAX_NEST];
  Value *ntiles = NULL;
  for (int d = 0; d < n.n; d++) {
    ext[d] = n.loop[d]->operands[1];
    ntiles = d ? build_binary(&b, OP_MUL, ntiles, ext[d]) : ext[d];
    if (d)
      ntiles->name = "ntiles";
  }
  Value *q_ring = q_through_producer(m, f, &n, roles[0], roles[1]);
  Value *nctas = block_add_arg(m, f->body, type_index(), "nctas");
  Op *ctas = build_for(&b, build_index(&b, 0), nctas, true, NULL, 0, "cta");
  Block *cb = for_body(ctas);
  /* rings and the warp_roles move into the CTA loop */
  Block *inner = for_body(n.loop[n.n - 1]);
  for (Op *o = inner->first; o;) {
    Op *next = o->next;
    if (o->kind == OP_RING || o == n.roles)
      op_move_to_end(o, cb);
    o = next;
  }
  Builder yb = builder_at_end(m, cb);
  yb.loc = outer->loc;
  build_yield(&yb, NULL, 0);
  for (int r = 0; r < 2; r++)
    if (!walk_role(m, &n, roles[r], for_iv(ctas), nctas, ntiles, ext, q_ring, unequal))
      return 0; /* checked above: cannot happen */
  erase_tree(n.loop[0]); /* what is left of the nest: the scalars the walks copied */
  return 0;
}
