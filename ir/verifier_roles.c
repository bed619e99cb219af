/* verifier_roles.c - the verifier's rules for warp specialization: ring,
 * warp_roles, ring_put, ring_get, ring_release (ir.h, docs/tile-ir.md
 * "Warp specialization").
 *
 * Codegen lowers a ring to shared-memory slots with full/empty mbarriers
 * whose phases both roles derive from the step count; a step that one role
 * skips, or does twice, desynchronizes them and deadlocks the kernel
 * (docs/hopper-pipeline.md §5). So beyond operand types the rules make the
 * protocol hold by construction: puts only in a warp_roles' producer region,
 * gets and releases only in its consumer region, and each step one put (in
 * the producer) and one get followed by one release (in the consumer), each
 * at the top level of a block that runs once per step: the region itself or
 * a sequential for's body, never an if's branch, which only one path runs.
 */
#include <string.h>

#include "ir/verifier_internal.h"

static bool is_ring_op(OpKind k) { return k == OP_RING_PUT || k == OP_RING_GET || k == OP_RING_RELEASE; }

/* The warp_roles whose region holds op (at any depth), with *region 0 for
 * the producer's, 1 for the consumer's; NULL when op is in none. */
static const Op *enclosing_roles(const Op *op, int *region) {
  for (const Block *b = op->parent; b && b->parent_op; b = b->parent_op->parent) {
    const Op *p = b->parent_op;
    if (p->kind == OP_WARP_ROLES) {
      *region = p->nregions > 1 && p->regions[1] == b;
      return p;
    }
  }
  return NULL;
}

/* The first top-level op of blk of kind k on ring r, at or after `from`
 * (NULL: blk's first op); NULL when there is none. */
static const Op *find_on_ring(const Block *blk, const Op *from, OpKind k, const Value *r) {
  for (const Op *o = from ? from : blk->first; o; o = o->next)
    if (o->kind == k && o->noperands > 0 && o->operands[0] == r)
      return o;
  return NULL;
}

/* A block that runs once per step of a ring: a warp_roles region, or the
 * body of a sequential for (a parallel one has no order of steps). */
static bool step_block(const Block *b) {
  const Op *p = b->parent_op;
  return p && (p->kind == OP_WARP_ROLES || (p->kind == OP_FOR && !for_is_parallel((Op *)p)));
}

/* ------------------------------------------------------------ ring ops */

/* Every use of ring op's result is operand 0 of a put, get or release, and
 * all of them are in one warp_roles, which the ring's definition encloses:
 * the slots and barriers exist before either role starts. */
static void check_ring_uses(Verifier *v, const Op *op) {
  Value *r = op->results[0];
  const Op *roles = NULL;
  for (int i = 0; i < r->nuses; i++) {
    const Op *user = r->uses[i].user;
    int region;
    if (!user)
      continue; /* a stale use: check_value_uses reports it */
    if (!is_ring_op(user->kind) || r->uses[i].index != 0) {
      report(v, op, "ring %s is operand %d of %s (only ring_put, ring_get and ring_release take a "
             "ring, as their operand 0)", names_get(&v->names, r), r->uses[i].index, op_name(user->kind));
      return;
    }
    const Op *w = enclosing_roles(user, &region);
    if (!w)
      continue; /* the user reports it */
    if (roles && w != roles) {
      report(v, op, "ring %s is used by two warp_roles (lines %d and %d); one ring connects the two "
             "roles of one", names_get(&v->names, r), roles->loc.line, w->loc.line);
      return;
    }
    roles = w;
  }
  if (roles && !value_defined_outside(r, (Op *)roles))
    report(v, op, "ring %s is defined inside the warp_roles that uses it (line %d): define it "
           "before", names_get(&v->names, r), roles->loc.line);
}

/* A ring {tma = 1}'s puts are bulk tensor copies from the runtime's map of
 * Q, K or V (docs/abi.md "Tensor maps"): each put's tile is a plain `load`
 * of the kernel's tensor argument %q, %k or %v, and the tile is boxes of 64
 * columns by at most 256 rows. */
static void check_tma_ring(Verifier *v, const Op *op) {
  Type t = res(op, 0);
  if (t.cols % 64 || t.rows > 256) {
    report(v, op, "a ring {tma = 1} holds tiles of 64-column multiples and at most 256 rows");
    return;
  }
  const Value *r = op->results[0];
  for (int i = 0; i < r->nuses; i++) {
    const Op *put = r->uses[i].user;
    if (!put || put->kind != OP_RING_PUT || put->noperands != 3)
      continue;
    if (!op_is_tensor_map_load(put->operands[2]->def))
      report(v, op, "a ring {tma = 1} is put `load %%q`, `load %%k`, `load %%v` or `load "
             "%%in_NAME {rect = 1}` tiles (the runtime's tensor maps), not the put at line %d",
             put->loc.line);
  }
}

/* ring {stages = S [, zero = 0|1] [, tma = 0|1]} : ring<tile<RxCxE>>, S in
 * 1..8, E f16 or bf16. */
void check_ring(Verifier *v, const Op *op) {
  char b[160];
  if (!want_counts(v, op, 0, 1))
    return;
  Type t = res(op, 0);
  if (t.kind != TYPE_RING) {
    report(v, op, "result must be a ring, has %s", tstr(t, b));
    return;
  }
  if (t.rows <= 0 || t.cols <= 0 || (t.elem != ELEM_F16 && t.elem != ELEM_BF16))
    report(v, op, "%s: a ring holds tiles of concrete extents and f16 or bf16 elements", tstr(t, b));
  const Attr *s = attr_get(&op->attrs, "stages");
  if (!s || s->kind != ATTR_INT || s->i < 1 || s->i > 8)
    report(v, op, "needs 'stages' = 1 .. 8");
  const Attr *z = attr_get(&op->attrs, "zero");
  if (z && (z->kind != ATTR_INT || (z->i != 0 && z->i != 1)))
    report(v, op, "'zero' must be 0 or 1");
  const Attr *tma = attr_get(&op->attrs, "tma");
  if (tma && (tma->kind != ATTR_INT || (tma->i != 0 && tma->i != 1)))
    report(v, op, "'tma' must be 0 or 1");
  else if (tma && tma->i == 1)
    check_tma_ring(v, op);
  check_ring_uses(v, op);
}

/* warp_roles {producer_warps = P} { producer } consumer { consumer }: no
 * operands or results, two regions without arguments, each ended by a bare
 * yield; P in 1..16; never inside another one (a producer's warps would
 * have to split again). */
void check_warp_roles(Verifier *v, const Op *op) {
  static const char *const names[] = {"producer region", "consumer region"};
  want_counts(v, op, 0, 0);
  if (op->nregions != 2) {
    report(v, op, "expects two regions (producer, consumer), has %d", op->nregions);
    return;
  }
  for (int r = 0; r < 2; r++) {
    const Block *blk = op->regions[r];
    if (blk->nargs)
      report(v, op, "%s has arguments", names[r]);
    if (!blk->last || blk->last->kind != OP_YIELD || blk->last->noperands)
      report(v, op, "%s does not end with a yield without operands", names[r]);
  }
  const Attr *p = attr_get(&op->attrs, "producer_warps");
  if (!p || p->kind != ATTR_INT || p->i < 1 || p->i > 16)
    report(v, op, "needs 'producer_warps' = 1 .. 16");
  const Attr *bps = attr_get(&op->attrs, "blocks_per_sm");
  if (bps && (bps->kind != ATTR_INT || bps->i < 1 || bps->i > 2))
    report(v, op, "'blocks_per_sm' must be 1 or 2 (the blocks an SM runs: codegen's register split)");
  int region;
  const Op *outer = enclosing_roles(op, &region);
  if (outer)
    report(v, op, "nested inside another warp_roles (line %d)", outer->loc.line);
}

/* ------------------------------------------------ put, get and release */

/* nops operands and nres results, operand 0 a ring, operand 1 (the step)
 * an index scalar. */
static bool check_ring_step(Verifier *v, const Op *op, int nops, int nres) {
  if (!want_counts(v, op, nops, nres))
    return false;
  if (opnd(op, 0).kind != TYPE_RING) {
    report(v, op, "operand 0 must be a ring");
    return false;
  }
  if (!is_index(opnd(op, 1))) {
    report(v, op, "the step (operand 1) must be an index scalar");
    return false;
  }
  return true;
}

/* t (`what`: the tile put, the tile got) is of the tiles of op's ring. */
static void want_ring_tile(Verifier *v, const Op *op, Type t, const char *what) {
  char a[160], b[160];
  Type want = ring_tile_type(opnd(op, 0));
  if (!type_eq(t, want))
    report(v, op, "%s is a %s, the ring's tiles are %s", what, tstr(t, a), tstr(want, b));
}

/* op is in region `want` (0 producer, 1 consumer) of a warp_roles. */
static bool check_role(Verifier *v, const Op *op, int want) {
  int region;
  if (enclosing_roles(op, &region) && region == want)
    return true;
  report(v, op, "only in the %s (%s) region of a warp_roles", want ? "consumer" : "producer",
         want ? "second" : "first");
  return false;
}

/* Is op (of blk) before `later` in blk? */
static bool precedes(const Op *op, const Op *later) {
  for (const Op *o = op->next; o; o = o->next)
    if (o == later)
      return true;
  return false;
}

/* A put or get is one step of its ring: at the top level of a step block,
 * the only op of its kind on the ring there, and no block around it (up to
 * the warp_roles) has one too before it (that would be two per step). One
 * after the loop holding it is the step a lagging loop leaves for after it
 * (overlap-softmax gets V of step j - 1 in step j, the last one after the
 * loop). */
static bool check_step_block(Verifier *v, const Op *op) {
  const Block *b = op->parent;
  const Value *r = op->operands[0];
  const char *ring = names_get(&v->names, r);
  if (!step_block(b)) {
    report(v, op, "must be at the top level of a warp_roles region or of a sequential for's body "
           "(under an if, the other path would skip the step)");
    return false;
  }
  if (find_on_ring(b, NULL, op->kind, r) != op) {
    report(v, op, "a second %s of %s in this block (one per ring per step)", op_name(op->kind), ring);
    return false;
  }
  for (const Op *a = b->parent_op; a && a->kind != OP_WARP_ROLES; a = a->parent->parent_op) {
    const Op *outer = find_on_ring(a->parent, NULL, op->kind, r);
    if (outer && !precedes(a, outer)) {
      report(v, op, "nested in a block that has its own %s of %s (line %d): two per step",
             op_name(op->kind), ring, outer->loc.line);
      return false;
    }
  }
  return true;
}

/* ring_put %r, %step, %t (producer): t has the ring's tile type and is a
 * load (or load_paged) of the same block used by nothing else, so codegen
 * can make the load a copy straight into the step's slot. */
void check_ring_put(Verifier *v, const Op *op) {
  if (!check_ring_step(v, op, 3, 0))
    return;
  want_ring_tile(v, op, opnd(op, 2), "the tile put");
  const Value *t = op->operands[2];
  const Op *ld = t->def;
  if (!ld || (ld->kind != OP_LOAD && ld->kind != OP_LOAD_PAGED) || ld->parent != op->parent)
    report(v, op, "the tile must be a load or load_paged of the same block");
  else if (t->nuses != 1)
    report(v, op, "the loaded tile %s has %d uses (the put must be its only one)",
           names_get(&v->names, t), t->nuses);
  if (check_role(v, op, 0))
    check_step_block(v, op);
}

static bool is_last_step_release(const Op *op) {
  return op->kind == OP_RING_RELEASE && attr_int(&op->attrs, "last_step", 0) == 1;
}

/* A `last_step` release of r at the top level of the body of a sequential
 * for that is `from` or follows it in their block (*loop: that for); NULL
 * when none. */
static const Op *last_step_release_after(const Op *from, const Value *r, const Op **loop) {
  for (const Op *o = from; o; o = o->next) {
    if (o->kind != OP_FOR || for_is_parallel((Op *)o))
      continue;
    const Op *rel = find_on_ring(o->regions[0], NULL, OP_RING_RELEASE, r);
    if (rel && is_last_step_release(rel)) {
      *loop = o;
      return rel;
    }
  }
  return NULL;
}

/* Is every read of t (a tile got before `loop`, released in loop's last
 * step by rel) done by rel: before the loop, or in the loop's body before
 * rel, an async matmul's with its wait there too? Reports the first that
 * is not. */
static void check_reads_before_last_step(Verifier *v, const Value *t, const Op *loop, const Op *rel) {
  const Block *b = loop->parent, *body = loop->regions[0];
  for (int i = 0; i < t->nuses; i++) {
    const Op *user = t->uses[i].user, *at = op_ancestor_in(user, b);
    bool ok = at && (precedes(at, loop) || at == loop);
    if (ok && at == loop) {
      const Op *in = op_ancestor_in(user, body);
      ok = in && precedes(in, rel);
      /* an async matmul still reads its operands until its wait */
      if (ok && user->kind == OP_MATMUL && attr_int(&user->attrs, "async", 0) == 1) {
        const Value *x = user->results[0];
        bool waited = false;
        for (int k = 0; k < x->nuses && !waited; k++) {
          const Op *w = x->uses[k].user, *win = w ? op_ancestor_in(w, body) : NULL;
          waited = w && w->kind == OP_MMA_WAIT && win && precedes(win, rel);
        }
        ok = waited;
      }
    }
    if (!ok) {
      report(v, rel, "%s is read by %s (line %d) after its last-step release", names_get(&v->names, t),
             op_name(user->kind), user->loc.line);
      return;
    }
  }
}

/* The release that ends get's step: later in the same block, of the same
 * step value, and after every read of the tile (the slot is refilled once
 * it is released); or a `last_step` release in the body of a step loop
 * after the get that does every read before it. A release before the get
 * reports itself. */
static void check_release_of(Verifier *v, const Op *get) {
  const Block *b = get->parent;
  const Value *r = get->operands[0], *t = get->results[0];
  const char *ring = names_get(&v->names, r);
  const Op *rel = find_on_ring(b, get->next, OP_RING_RELEASE, r);
  const Op *loop = NULL;
  const Op *early = rel ? NULL : last_step_release_after(get->next, r, &loop);
  if (early) {
    if (early->noperands > 1 && early->operands[1] != get->operands[1])
      report(v, get, "its ring_release (line %d) releases step %s, not %s", early->loc.line,
             names_get(&v->names, early->operands[1]), names_get(&v->names, get->operands[1]));
    else
      check_reads_before_last_step(v, t, loop, early);
    return;
  }
  if (!rel) {
    if (!find_on_ring(b, NULL, OP_RING_RELEASE, r))
      report(v, get, "no ring_release of %s after it in its block (one get and one release per "
             "ring per step, on every path)", ring);
    return;
  }
  if (rel->noperands > 1 && rel->operands[1] != get->operands[1])
    report(v, get, "its ring_release (line %d) releases step %s, not %s", rel->loc.line,
           names_get(&v->names, rel->operands[1]), names_get(&v->names, get->operands[1]));
  for (int i = 0; i < t->nuses; i++) {
    const Op *user = t->uses[i].user, *at = op_ancestor_in(user, b);
    if (user && (!at || !precedes(at, rel))) {
      report(v, get, "%s is read by %s (line %d) after its ring_release (line %d)",
             names_get(&v->names, t), op_name(user->kind), user->loc.line, rel->loc.line);
      return;
    }
  }
}

/* %t = ring_get %r, %step : tile (consumer). */
void check_ring_get(Verifier *v, const Op *op) {
  if (!check_ring_step(v, op, 2, 1))
    return;
  want_ring_tile(v, op, res(op, 0), "the tile got");
  if (check_role(v, op, 1) && check_step_block(v, op))
    check_release_of(v, op);
}

/* ring_release %r, %step (consumer): the block's one release of r, after
 * the block's get of r (whose check covers the step and the reads). */
void check_ring_release(Verifier *v, const Op *op) {
  if (!check_ring_step(v, op, 2, 0) || !check_role(v, op, 1))
    return;
  const Block *b = op->parent;
  const Value *r = op->operands[0];
  const char *ring = names_get(&v->names, r);
  if (attr_get(&op->attrs, "last_step")) {
    const Op *loop = b->parent_op;
    if (!is_last_step_release(op))
      report(v, op, "last_step must be 1");
    else if (!loop || loop->kind != OP_FOR || for_is_parallel((Op *)loop))
      report(v, op, "a last-step release must be at the top level of a sequential for's body");
    else if (find_on_ring(b, NULL, OP_RING_RELEASE, r) != op)
      report(v, op, "a second ring_release of %s in this block (one per ring per step)", ring);
    else if (find_on_ring(b, NULL, OP_RING_GET, r))
      report(v, op, "a last-step release of %s in the loop that gets it (its get is outside the loop)",
             ring);
    else {
      const Op *get = find_on_ring(loop->parent, NULL, OP_RING_GET, r);
      if (!get || !precedes(get, loop))
        report(v, op, "no ring_get of %s before its loop in the block around it", ring);
      else if (find_on_ring(loop->parent, NULL, OP_RING_RELEASE, r))
        report(v, op, "%s is released both in its loop's last step and after it", ring);
    }
    return;
  }
  const Op *get = find_on_ring(b, NULL, OP_RING_GET, r);
  if (find_on_ring(b, NULL, OP_RING_RELEASE, r) != op)
    report(v, op, "a second ring_release of %s in this block (one per ring per step)", ring);
  else if (!get)
    report(v, op, "no ring_get of %s in its block (a release follows its step's get at the top "
           "level of one block)", ring);
  else if (!precedes(get, op))
    report(v, op, "comes before the ring_get of %s (line %d)", ring, get->loc.line);
}

/* mma_turn {action = start|wait|pass} (passes/pingpong.c): no operands or
 * results; in a warp_roles' consumer region; start once, at the top level
 * of that region; in every block, its own waits and passes alternate,
 * first a wait, last a pass, so that on every path a warpgroup that waited
 * for its turn hands it on before it waits again (both warpgroups follow
 * the same path: the conditions are the block's). */
void check_mma_turn(Verifier *v, const Op *op) {
  if (!want_counts(v, op, 0, 0) || !check_role(v, op, 1))
    return;
  const char *a = attr_str(&op->attrs, "action", "");
  bool start = strcmp(a, "start") == 0, wait = strcmp(a, "wait") == 0;
  if (!start && !wait && strcmp(a, "pass") != 0) {
    report(v, op, "needs 'action' = start, wait or pass");
    return;
  }
  const Block *b = op->parent;
  if (start) {
    if (!b->parent_op || b->parent_op->kind != OP_WARP_ROLES)
      report(v, op, "start belongs at the top level of the consumer region");
    for (const Op *o = b->first; o && o != op; o = o->next)
      if (o->kind == OP_MMA_TURN && strcmp(attr_str(&o->attrs, "action", ""), "start") == 0)
        report(v, op, "a second start (line %d has one)", o->loc.line);
    return;
  }
  /* the previous wait or pass of the block: the other kind, or none
   * before a wait */
  const Op *prev = NULL;
  for (const Op *o = b->first; o && o != op; o = o->next)
    if (o->kind == OP_MMA_TURN && strcmp(attr_str(&o->attrs, "action", ""), "start") != 0)
      prev = o;
  bool prev_wait = prev && strcmp(attr_str(&prev->attrs, "action", ""), "wait") == 0;
  if (wait && prev_wait)
    report(v, op, "a second wait before a pass (line %d waits)", prev->loc.line);
  else if (!wait && !prev_wait)
    report(v, op, "a pass without a wait before it in its block");
  if (!wait)
    return;
  for (const Op *o = op->next; o; o = o->next)
    if (o->kind == OP_MMA_TURN)
      return; /* the next one is checked on its own */
  report(v, op, "a wait without a pass after it in its block");
}
