/* mask_skip.c - classify each (Q tile, K/V tile) pair as empty, full or
 * partial from the mask, skip empty ones and mask only partial ones.
 *
 * The mask's condition is an elementwise op tree over index tiles
 * (iota + q0, iota + k0), scalars (b, h, seqlen_q, seqlen_k) and constants.
 * mask_interval.c evaluates that tree over intervals: for the current tile pair every
 * numeric node gets run-time bounds [lo, hi] (emitted as scalar ops, since
 * q0, k0 and the sequence lengths are only known at run time), and every
 * boolean node a tri-state as two i1 scalars: can_be_true, can_be_false
 * (both true = unknown). Both are over-approximations, so
 *   %empty = not can_be_true   (no element of the tile is kept)
 *   %full  = not can_be_false  (every element is kept)
 * are sound. Anything the analysis does not model (a float score in the
 * mask, rem, tanh, ...) is unknown, which only costs speed.
 *
 * The step (the body of the innermost loop around the mask) becomes
 *   if %empty { state unchanged } else { ... %sm = if %full { %sc } else { mask } ... }
 * An all -inf tile leaves the online-softmax state (O, l, m) unchanged, so
 * skipping it is exact; a tile the mask keeps entirely is its own mask.
 * In Q-outer order the empty branch yields the loop's iter_args; in FA1 order
 * (the step stores to workspaces) it does nothing.
 *
 * The bounds mask `k < seqlen_k` is one of these comparisons: it is full on
 * every K/V tile but the last.
 *
 * A mask that reads run-time inputs (document ids) is also classified at
 * run time: its condition tile is computed before the step's matmuls and a
 * block-wide any / all over it decides (classify_at_run_time).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/mask_interval.h"
#include "passes/pass_util.h"
#include "passes/passes.h"

/* ------------------------------------------------------------ rewrite */

/* The mask op of a step not yet classified: exactly one `mask` in the
 * innermost loop body around it, feeding the row max. */
/* The kernel's one mask op, directly in the body of a loop over tiles: the
 * forward's (its row max follows) or a backward kernel's (P = exp of it
 * minus the saved LSE; docs/backward.md), whose step also skips when the
 * tile pair is empty: its dS, and so its dK, dV and dQ shares, are 0. */
static Op *find_mask(Func *f) {
  OpList masks = collect_ops(f, OP_MASK);
  Op *m = masks.n == 1 ? masks.v[0] : NULL;
  oplist_free(&masks);
  if (!m || !m->parent->parent_op || m->parent->parent_op->kind != OP_FOR)
    return NULL;
  if (strcmp(attr_str(&f->attrs, "mode", "forward"), "backward") == 0)
    return m;
  for (int i = 0; i < m->results[0]->nuses; i++)
    if (m->results[0]->uses[i].user->kind == OP_ROWMAX)
      return m;
  return NULL;
}

/* Pure ops before `last` in its block whose results only feed `last` or
 * each other: the mask's own condition, which only partial tiles need. */
static void cond_slice(Op *last, OpList *out) {
  oplist_push(out, last);
  for (Op *o = last->prev; o; o = o->prev) {
    if (!op_is_pure(o) || o->nresults == 0)
      continue;
    bool mine = o->results[0]->nuses > 0;
    for (int r = 0; r < o->nresults && mine; r++)
      for (int u = 0; u < o->results[r]->nuses && mine; u++)
        mine = oplist_has(out, o->results[r]->uses[u].user);
    if (mine)
      oplist_push(out, o);
  }
}

/* Names a value the analysis made, never one of the user's. */
static Value *named(Value *v, const char *name) {
  if (!v->name)
    v->name = name;
  return v;
}

/* %sm = if %full { yield %sc } else { cond ops; yield mask %sc, %cond }
 * Returns the if. */
static Op *split_full(Module *m, Op *mask, Value *full) {
  Builder b = builder_before(m, mask);
  Value *sc = mask->operands[0], *sm = mask->results[0];
  Op *fi = build_if(&b, full, &sm->type, 1);
  Builder tb = builder_at_end(m, fi->regions[0]);
  build_yield(&tb, &sc, 1);
  OpList slice = {0};
  cond_slice(mask, &slice);
  for (int i = slice.n - 1; i >= 0; i--)
    op_move_to_end(slice.v[i], fi->regions[1]);
  oplist_free(&slice);
  value_replace_all_uses(sm, fi->results[0]);
  Builder eb = builder_at_end(m, fi->regions[1]);
  build_yield(&eb, &sm, 1);
  fi->results[0]->name = sm->name;
  sm->name = "masked";
  return fi;
}

/* Wraps the ops of `step` from `first` to its terminator:
 *   results = if %empty { yield state } else { ops; yield what the step yielded }
 * Returns the if (NULL when the step yields more than it can take). */
static Op *skip_empty(Module *m, Block *step, Op *first, Value *empty, bool yields) {
  Op *loop = step->parent_op;
  Op *term = block_terminator(step);
  int n = term ? term->noperands : 0;
  Type types[64];
  Value *state[64];
  if (n > 64)
    return NULL;
  for (int i = 0; i < n; i++) {
    types[i] = term->operands[i]->type;
    state[i] = for_iter_arg(loop, i);
  }
  Builder b = first ? builder_before(m, first) : builder_at_end(m, step);
  if (term && !first)
    b = builder_before(m, term);
  Op *ei = build_if(&b, empty, types, n);
  for (Op *o = first; o && o != term;) {
    Op *next = o->next;
    op_move_to_end(o, ei->regions[1]);
    o = next;
  }
  Builder tb = builder_at_end(m, ei->regions[0]);
  if (n || yields)
    build_yield(&tb, state, n);
  Builder eb = builder_at_end(m, ei->regions[1]);
  if (n || yields)
    build_yield(&eb, term ? term->operands : NULL, n);
  for (int i = 0; i < n; i++)
    op_set_operand(term, i, ei->results[i]);
  return ei;
}

/* ------------------------------------------------------ loop bounds */

/* Clones v's computation before `loop` when it does not depend on the loop
 * (pure scalar ops of values defined outside); NULL when it does. */
static Value *invariant_copy(Builder *b, Value *v, Op *loop, int depth) {
  if (value_defined_outside(v, loop))
    return v;
  Op *d = v->def;
  if (!d || depth > 32 || d->nregions || !op_is_pure(d) || v->type.kind != TYPE_SCALAR ||
      d->kind == OP_LOAD || d->kind == OP_LOAD_PAGED || d->kind == OP_LOAD_SCALAR)
    return NULL;
  ValueMap map = {0};
  for (int i = 0; i < d->noperands; i++) {
    Value *o = invariant_copy(b, d->operands[i], loop, depth + 1);
    if (!o)
      return NULL;
    if (o != d->operands[i])
      valuemap_put(b->m, &map, d->operands[i], o);
  }
  Op *c = op_clone(b, d, &map);
  return c->results[v->result_index];
}

/* v = iv * bc + off + sum(sign[i] * inv[i]): bc a positive constant, off a
 * constant, the inv[i] values defined outside the loop (seqlen_k - seqlen_q
 * in the K/V-outer backward's query positions); the forward's first key
 * index of the step's K/V tile plus a constant has none. */
enum { MAX_INV_TERMS = 4 };
typedef struct Affine {
  double bc, off;
  Value *inv[MAX_INV_TERMS];
  int sign[MAX_INV_TERMS], ninv;
} Affine;

static bool affine_in_iv(Value *v, Op *loop, Affine *a, int sign) {
  Op *d = v->def;
  double c;
  if (!d)
    return false;
  if (d->kind == OP_ADD || d->kind == OP_SUB) {
    for (int side = 0; side < 2; side++) {
      if (d->kind == OP_SUB && side == 0)
        continue;
      if (mask_sconst(d->operands[side], &c) && affine_in_iv(d->operands[1 - side], loop, a, sign)) {
        a->off += sign * (d->kind == OP_SUB ? -c : c);
        return true;
      }
    }
    if (d->kind == OP_SUB && mask_sconst(d->operands[1], &c) && affine_in_iv(d->operands[0], loop, a, sign)) {
      a->off -= sign * c;
      return true;
    }
    /* affine +- an invariant value */
    for (int side = 0; side < 2; side++) {
      Value *w = d->operands[side];
      int wsign = d->kind == OP_SUB && side == 1 ? -sign : sign;
      if (a->ninv == MAX_INV_TERMS || !value_defined_outside(w, loop) ||
          w->type.kind != TYPE_SCALAR || (d->kind == OP_SUB && side == 0))
        continue;
      int saved = a->ninv;
      a->inv[a->ninv] = w;
      a->sign[a->ninv++] = wsign;
      if (affine_in_iv(d->operands[1 - side], loop, a, sign))
        return true;
      a->ninv = saved;
    }
    return false;
  }
  if (d->kind != OP_MUL)
    return false;
  for (int side = 0; side < 2; side++)
    if (d->operands[side] == for_iv(loop) && mask_sconst(d->operands[1 - side], &c) && c > 0) {
      a->bc = c;
      return true;
    }
  return false;
}

/* One conjunct `cmp pred A, X` of can-be-true, A = j*bc + off, X invariant:
 * the steps where it can hold form j <= floor((X - off) / bc) (le) or
 * j >= ceil((X - off) / bc) (ge); narrows [lo, hi) accordingly. */
static void narrow_by(Module *m, Op *loop, Value *c) {
  Op *d = c->def;
  if (!d)
    return;
  if (d->kind == OP_AND) {
    narrow_by(m, loop, d->operands[0]);
    narrow_by(m, loop, d->operands[1]);
    return;
  }
  if (d->kind != OP_CMP || d->operands[0]->type.elem != ELEM_INDEX)
    return;
  const char *p = attr_str(&d->attrs, "pred", "");
  Affine af = {0};
  Value *x;
  if (affine_in_iv(d->operands[0], loop, &af, 1)) {
    x = d->operands[1];
  } else if ((af = (Affine){0}), affine_in_iv(d->operands[1], loop, &af, 1)) {
    x = d->operands[0];
    p = !strcmp(p, "lt") ? "gt" : !strcmp(p, "le") ? "ge" : !strcmp(p, "gt") ? "lt"
      : !strcmp(p, "ge") ? "le" : p;
  } else {
    return;
  }
  bool upper = !strcmp(p, "le") || !strcmp(p, "lt");
  bool lower = !strcmp(p, "ge") || !strcmp(p, "gt");
  if (!upper && !lower)
    return;
  Builder b = builder_before(m, loop);
  b.loc = loop->loc;
  Value *xi = invariant_copy(&b, x, loop, 0);
  if (!xi)
    return;
  /* j*bc + off + inv PRED x  <=>  j*bc PRED' x' with x' = x - off - inv (-1
   * for lt, +1 for gt) */
  for (int i = 0; i < af.ninv; i++)
    xi = build_binary(&b, af.sign[i] > 0 ? OP_SUB : OP_ADD, xi, af.inv[i]);
  double adj = -af.off + (!strcmp(p, "lt") ? -1 : !strcmp(p, "gt") ? 1 : 0);
  if (adj != 0)
    xi = build_binary(&b, OP_ADD, xi, build_index(&b, (int64_t)adj));
  Value *bcv = build_index(&b, (int64_t)af.bc);
  if (upper) {
    /* j <= floor(x' / bc): hi = min(hi, ceildiv(max(x' + 1, 0), bc)), which
     * is max(floor(x' / bc) + 1, 0): never negative where x' is (rows that
     * see no key), as a step count must be when steps carry on across a
     * persistent kernel's tiles and its last step is hi - 1 >= -1 (div
     * truncates: x' div bc + 1 was 1 for x' in (-bc, 0), -22 at seqlen_q
     * 4096 over seqlen_k 1023) */
    Value *x1 = build_binary(&b, OP_ADD, xi, build_index(&b, 1));
    Value *jh = build_binary(&b, OP_CEILDIV, build_binary(&b, OP_MAX, x1, build_index(&b, 0)), bcv);
    Value *nh = build_binary(&b, OP_MIN, loop->operands[1], jh);
    op_set_operand(loop, 1, named(nh, "jhi"));
  } else { /* j >= ceil(x' / bc): lo = max(lo, ceildiv(x', bc)) */
    Value *jl = build_binary(&b, OP_CEILDIV, xi, bcv);
    Value *nl = build_binary(&b, OP_MAX, loop->operands[0], jl);
    op_set_operand(loop, 0, named(nl, "jlo"));
  }
}

/* ------------------------------------------------------ bound search */

enum { SEARCH_STEPS = 12 }; /* halvings: exact for loops of up to 4096 steps */

/* Whether the mask has a part the affine narrowing cannot bound: a select
 * (document ids), a disjunction or negation (PrefixLM, per-head choices),
 * division, floor, min, max or (in)equality of non-affine terms (chunks). A
 * conjunction of <, <=, >, >= between affine terms (causal, windows) is
 * bounded exactly without a search. */
static bool has_nonaffine(Value *v, int depth) {
  Op *d = v->def;
  if (!d || depth > 64 || d->nregions)
    return false;
  switch (d->kind) {
  case OP_SELECT: case OP_OR: case OP_NOT: case OP_DIV: case OP_FLOOR: case OP_MIN: case OP_MAX:
    return true;
  case OP_CMP: {
    const char *p = attr_str(&d->attrs, "pred", "");
    if (!strcmp(p, "eq") || !strcmp(p, "ne"))
      return true;
    break;
  }
  default:
    break;
  }
  for (int i = 0; i < d->noperands; i++)
    if (has_nonaffine(d->operands[i], depth + 1))
      return true;
  return false;
}

/* Emits, at b, whether every step j of `loop` with from <= j <= to is empty
 * (the mask can keep nothing there): the tile-pair analysis over that range
 * of steps instead of one. */
static Value *range_empty(Module *m, Builder b, Op *loop, Value *cond, Value *from, Value *to) {
  Ana a = {.m = m, .b = b, .range_loop = loop, .range_iv = {true, from, to}};
  Tri t = mask_tri(&a, cond);
  Value *e = mask_not(&a, t.ct);
  free(a.memo);
  return e;
}

/* Binary search before `loop` for the steps at either end whose tile pairs
 * are all empty, by the analysis over ranges of steps: the prefix [lo, p)
 * is empty for every p up to the answer (a smaller range keeps less), so
 * halving finds the longest one; the suffix alike. The loop then runs over
 * [p, s): a document's Q tile visits its document's K/V tiles, not the
 * empty ones before and after it (which the skip would still load). Each
 * probe is exact or moves nothing: the bounds stay sound. */
static void search_bounds(Module *m, Op *loop, Value *cond) {
  Builder b = builder_before(m, loop);
  b.loc = loop->loc;
  Value *lo = loop->operands[0], *hi = loop->operands[1];
  Value *one = build_index(&b, 1), *two = build_index(&b, 2);
  for (int side = 0; side < 2; side++) {
    /* prefix: the answer p in [lo, hi], [lo, p - 1] empty; suffix: s in
     * [lo, hi], [s, hi - 1] empty. L <= answer <= H throughout. */
    Value *init[2] = {lo, hi};
    Op *f = build_for(&b, build_index(&b, 0), build_index(&b, SEARCH_STEPS), false, init, 2,
                      side == 0 ? "probe_lo" : "probe_hi");
    Builder fb = builder_at_end(m, for_body(f));
    fb.loc = loop->loc;
    Value *L = for_iter_arg(f, 0), *H = for_iter_arg(f, 1);
    Value *open = build_cmp(&fb, "lt", L, H);
    Value *yield[2];
    if (side == 0) { /* mid = (L + H + 1) div 2; is [lo, mid - 1] empty? */
      Value *mid = build_binary(&fb, OP_DIV, build_binary(&fb, OP_ADD, build_binary(&fb, OP_ADD, L, H), one), two);
      Value *e = range_empty(m, fb, loop, cond, lo, build_binary(&fb, OP_SUB, mid, one));
      e = build_binary(&fb, OP_AND, open, e);
      Value *miss = build_binary(&fb, OP_AND, open, build_unary(&fb, OP_NOT, e));
      yield[0] = build_select(&fb, e, mid, L);
      yield[1] = build_select(&fb, miss, build_binary(&fb, OP_SUB, mid, one), H);
    } else { /* mid = (L + H) div 2; is [mid, hi - 1] empty? */
      Value *mid = build_binary(&fb, OP_DIV, build_binary(&fb, OP_ADD, L, H), two);
      Value *e = range_empty(m, fb, loop, cond, mid, build_binary(&fb, OP_SUB, hi, one));
      e = build_binary(&fb, OP_AND, open, e);
      Value *miss = build_binary(&fb, OP_AND, open, build_unary(&fb, OP_NOT, e));
      yield[0] = build_select(&fb, miss, build_binary(&fb, OP_ADD, mid, one), L);
      yield[1] = build_select(&fb, e, mid, H);
    }
    build_yield(&fb, yield, 2);
    if (side == 0)
      lo = f->results[0];
    else
      hi = f->results[1];
    op_set_operand(loop, side, named(side == 0 ? lo : hi, side == 0 ? "jlo" : "jhi"));
  }
}

/* ------------------------------------------------ run-time classification */

/* Does v read a run-time input (a gather: document ids, prefix lengths)?
 * With `tiles`: one at tile indices (ids at q or k, a block table), which
 * the analysis knows only where all of a tile's indices meet in one point. */
static bool reads_inputs(Value *v, bool tiles, int depth) {
  Op *d = v->def;
  if (!d || depth > 64 || d->nregions)
    return false;
  if (d->kind == OP_GATHER && (!tiles || d->results[0]->type.kind == TYPE_TILE))
    return true;
  for (int i = 0; i < d->noperands; i++)
    if (reads_inputs(d->operands[i], tiles, depth + 1))
      return true;
  return false;
}

/* Adds to `need` v's def when it is a pure op of `step` itself, and what it
 * needs in turn: the ops that compute the mask's condition tile. With
 * `regions`, also ops with regions (the analysis' point reads, the
 * run-time classification) and what their regions' ops read from the step. */
static void needed_in(Block *step, Value *v, OpList *need, bool regions, int depth);

static void needed_by_block(Block *step, Block *blk, OpList *need, int depth) {
  for (Op *o = blk->first; o; o = o->next) {
    for (int i = 0; i < o->noperands; i++)
      needed_in(step, o->operands[i], need, true, depth + 1);
    for (int r = 0; r < o->nregions; r++)
      needed_by_block(step, o->regions[r], need, depth + 1);
  }
}

static void needed_in(Block *step, Value *v, OpList *need, bool regions, int depth) {
  Op *d = v->def;
  if (!d || d->parent != step || depth > 256 || oplist_has(need, d))
    return;
  if (d->nregions ? !(regions && op_is_pure_if(d)) : !op_is_pure(d))
    return;
  oplist_push(need, d);
  for (int i = 0; i < d->noperands; i++)
    needed_in(step, d->operands[i], need, regions, depth + 1);
  for (int r = 0; r < d->nregions; r++)
    needed_by_block(step, d->regions[r], need, depth + 1);
}

/* The analysis can never prove a pair full (document ids at q and k: no
 * tile reads one point), so every pair it does not find empty needs the
 * condition tile anyway: it is computed first in the step (the ops `need`,
 * moved up in their order), the mask reuses it, and
 *   %empty_rt = %empty || not any(cond), %all_kept = all(cond). */
/* any(cond) and all(cond) at b: block-wide OR and AND of an i1 tile. */
static void any_all(Builder *b, Value *cond, Value **any, Value **all) {
  Type t = type_scalar(ELEM_I1);
  Op *a = build_op(b, OP_REDUCE, &cond, 1, &t, 1, 0);
  op_set_attr_word(a, "kind", "max");
  Op *e = build_op(b, OP_REDUCE, &cond, 1, &t, 1, 0);
  op_set_attr_word(e, "kind", "min");
  *any = a->results[0];
  *all = e->results[0];
}

static Op *classify_every_step(Module *m, Op *first, Op *mask, OpList *need,
                               Value **empty, Value **full, Value **any_kept) {
  Op *anchor = first;
  while (anchor && oplist_has(need, anchor))
    anchor = anchor->next;
  for (Op *o = anchor, *next; o; o = next) {
    next = o->next;
    if (oplist_has(need, o))
      op_move_before(o, anchor);
  }
  oplist_free(need);
  Builder b = builder_before(m, anchor);
  b.loc = mask->loc;
  Value *any, *all;
  any_all(&b, mask->operands[1], &any, &all);
  *any_kept = named(any, "any_kept");
  Value *none = build_unary(&b, OP_NOT, *any_kept);
  double c;
  *empty = named(mask_sconst(*empty, &c) && c == 0 ? none : build_binary(&b, OP_OR, *empty, none),
                 "empty_rt");
  *full = named(all, "all_kept");
  return anchor;
}

/* A mask that reads run-time inputs is unknown to the interval analysis
 * wherever its inputs are read at more than one place of the tile pair
 * (document ids at q and k); where each read is one element (a block
 * table at q / 128 on 128-row tiles, prefix[b]) the analysis reads it and
 * decides. Where it has not decided, the condition tile is computed (a copy
 * of its ops, with the index tiles and gathers it needs) and block-wide
 * reductions over it classify the pair at run time:
 *   %any, %all = if %unknown { cond; yield any(cond), all(cond) }
 *                else { yield not %empty, %full }
 *   %empty_rt = %empty or not %any, %full = %all
 * (two barrier reductions of a flag, only on undecided tile pairs; the mask
 * computes its own condition on partial ones). Returns the first op of the
 * step's remaining work. */
static Op *classify_at_run_time(Module *m, Block *step, Op *first, Op *mask, Value **empty,
                                Value **full, Value **any_kept) {
  Value *cond = mask->operands[1];
  OpList need = {0};
  needed_in(step, cond, &need, false, 0);
  double never_full;
  if (mask_sconst(*full, &never_full) && never_full == 0)
    return classify_every_step(m, first, mask, &need, empty, full, any_kept);
  Builder b = first ? builder_before(m, first) : builder_at_end(m, step);
  b.loc = mask->loc;
  Value *decided = build_binary(&b, OP_OR, *empty, *full);
  Value *unknown = named(build_unary(&b, OP_NOT, decided), "undecided");
  Type t[2] = {type_scalar(ELEM_I1), type_scalar(ELEM_I1)};
  Op *fi = build_if(&b, unknown, t, 2);
  Builder tb = builder_at_end(m, fi->regions[0]);
  tb.loc = mask->loc;
  ValueMap map = {0};
  for (Op *o = step->first; o; o = o->next) /* step order: defs before uses */
    if (oplist_has(&need, o))
      op_clone(&tb, o, &map);
  oplist_free(&need);
  Value *c = valuemap_get(&map, cond);
  Value *r[2];
  any_all(&tb, c, &r[0], &r[1]);
  build_yield(&tb, r, 2);
  Builder eb = builder_at_end(m, fi->regions[1]);
  eb.loc = mask->loc;
  Value *d[2] = {build_unary(&eb, OP_NOT, *empty), *full};
  build_yield(&eb, d, 2);
  *any_kept = named(fi->results[0], "any_kept");
  *full = named(fi->results[1], "full_rt");
  /* (%empty or: the same value, spelled so that the analysis' part stands
   * alone: the software pipeline tests it for the next step's prefetch) */
  *empty = named(build_binary(&b, OP_OR, *empty, build_unary(&b, OP_NOT, *any_kept)), "empty_rt");
  return first;
}

/* Whether the ops `need` (in step order), their regions included, can be
 * cloned outside `loop`: each value they read is the loop's iv, defined
 * outside the loop, made by one of them or inside their regions. */
static bool reads_ok(const OpList *need, Op *loop, Op *o) {
  for (int i = 0; i < o->noperands; i++) {
    Value *v = o->operands[i];
    if (v != for_iv(loop) && !value_defined_outside(v, loop) &&
        !(v->def && oplist_has(need, v->def)) && !(v->block && v->block->parent_op != loop) &&
        !(v->def && v->def->parent != for_body(loop)))
      return false;
  }
  for (int r = 0; r < o->nregions; r++)
    for (Op *p = o->regions[r]->first; p; p = p->next)
      if (!reads_ok(need, loop, p))
        return false;
  return true;
}

static bool clonable(const OpList *need, Op *loop) {
  for (int i = 0; i < need->n; i++)
    if (!reads_ok(need, loop, need->v[i]))
      return false;
  return true;
}

/* One scan loop before `loop` over the steps t = 0 .. n-1 at j = from + t
 * (dir 1) or j = from - 1 - t (dir -1): the first j whose tile pair keeps
 * something (`any`, computed by a clone of the ops `need` at j), or `none`
 * when no step does. Once found, the remaining iterations skip the
 * evaluation (an if on the found flag): a while loop in a `for`. */
static Value *scan_for_kept(Module *m, Op *loop, const OpList *need, Value *any, Value *from,
                            Value *n, int dir, Value *none, const char *name) {
  Builder b = builder_before(m, loop);
  b.loc = loop->loc;
  Value *init[2] = {none, build_const(&b, type_scalar(ELEM_I1), 0)};
  Op *f = build_for(&b, build_index(&b, 0), n, false, init, 2, name);
  Builder fb = builder_at_end(m, for_body(f));
  fb.loc = loop->loc;
  Value *found = for_iter_arg(f, 0), *done = for_iter_arg(f, 1);
  Type types[2] = {type_index(), type_scalar(ELEM_I1)};
  Op *fi = build_if(&fb, done, types, 2);
  Builder tb = builder_at_end(m, fi->regions[0]);
  Value *keep[2] = {found, done};
  build_yield(&tb, keep, 2);
  Builder eb = builder_at_end(m, fi->regions[1]);
  eb.loc = loop->loc;
  Value *j = dir > 0 ? build_binary(&eb, OP_ADD, from, for_iv(f))
                     : build_binary(&eb, OP_SUB, build_binary(&eb, OP_SUB, from, build_index(&eb, 1)),
                                    for_iv(f));
  ValueMap map = {0};
  valuemap_put(m, &map, for_iv(loop), j);
  for (int i = 0; i < need->n; i++)
    op_clone(&eb, need->v[i], &map);
  Value *kept = valuemap_get(&map, any);
  Value *next[2] = {build_select(&eb, kept, j, found), kept};
  build_yield(&eb, next, 2);
  Value *r[2] = {fi->results[0], fi->results[1]};
  build_yield(&fb, r, 2);
  op_set_attr_word(f, "scan", dir > 0 ? "lo" : "hi"); /* block-lists finds the loop's range here */
  return named(f->results[0], name);
}

/* The steps at either end of `loop` whose tile pairs the run-time
 * classification finds empty are scanned before the loop, without loading
 * their K/V tiles, and the loop runs from the first step that keeps
 * something to the last: a document's Q tile loads its document's K/V
 * tiles only (the loop skips empty ones inside the range as before). The
 * scans evaluate the condition tile; they stop evaluating at the first
 * kept step. */
static void trim_by_scan(Module *m, Op *loop, Value *any) {
  OpList need = {0};
  needed_in(for_body(loop), any, &need, true, 0);
  OpList ordered = {0};
  for (Op *o = for_body(loop)->first; o; o = o->next)
    if (oplist_has(&need, o))
      oplist_push(&ordered, o);
  if (clonable(&ordered, loop)) {
    Builder b = builder_before(m, loop);
    b.loc = loop->loc;
    Value *lo = loop->operands[0], *hi = loop->operands[1];
    Value *n = build_binary(&b, OP_SUB, hi, lo);
    Value *first = scan_for_kept(m, loop, &ordered, any, lo, n, 1, hi, "scan_lo");
    /* from the top down to `first`: past the last kept step */
    Value *rest = build_binary(&b, OP_MAX, build_binary(&b, OP_SUB, hi, first), build_index(&b, 0));
    Value *last = scan_for_kept(m, loop, &ordered, any, hi, rest, -1, first, "scan_hi");
    Builder a = builder_before(m, loop);
    Value *end = build_binary(&a, OP_ADD, last, build_index(&a, 1));
    /* none kept: last = first = hi, the loop runs [hi, hi + 1) clipped */
    end = build_binary(&a, OP_MIN, end, hi);
    op_set_operand(loop, 0, named(first, "jlo_rt"));
    op_set_operand(loop, 1, named(end, "jhi_rt"));
  }
  oplist_free(&ordered);
  oplist_free(&need);
}

int pass_mask_skip(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  Op *mask = find_mask(f);
  if (!mask)
    return 0;
  Block *step = mask->parent;
  Op *loop = step->parent_op;
  Op *term = block_terminator(step);
  if (term && term->noperands != loop->nresults)
    return 0;
  bool yields = func_uses_empty_yields(f);
  Ana a = {.m = m, .b = builder_before(m, step->first)};
  a.b.loc = mask->loc;
  Tri t = mask_tri(&a, mask->operands[1]);
  Value *empty = named(mask_not(&a, t.ct), "empty");
  /* Masks whose kept keys form an interval per query tile: visit only the
   * K/V steps that can keep something. (The empty test stays: it is exact
   * where the narrowing is not.) */
  double c;
  bool never_empty = mask_sconst(empty, &c) && c == 0;
  Value *lo0 = loop->operands[0], *hi0 = loop->operands[1];
  if (!for_is_parallel(loop))
    narrow_by(m, loop, t.ct);
  /* Where the affine narrowing left the loop as it was or the mask has
   * parts it cannot bound (has_nonaffine), search for the empty steps at
   * the ends. */
  bool narrowed = loop->operands[0] != lo0 || loop->operands[1] != hi0;
  /* (Not over inputs read at tile indices: a range of steps reads them at
   * many places, where the analysis knows nothing; the scans below trim.) */
  if (!for_is_parallel(loop) && !never_empty && (!narrowed || has_nonaffine(mask->operands[1], 0)) &&
      !reads_inputs(mask->operands[1], true, 0))
    search_bounds(m, loop, mask->operands[1]);
  Value *full = named(mask_not(&a, t.cf), "full");
  free(a.memo);
  Op *first = a.b.before; /* everything from here on is per-tile work */
  if (reads_inputs(mask->operands[1], true, 0)) {
    Value *any = NULL;
    first = classify_at_run_time(m, step, first, mask, &empty, &full, &any);
    never_empty = false;
    if (!for_is_parallel(loop))
      trim_by_scan(m, loop, any);
  }
  bool never_full = mask_sconst(full, &c) && c == 0;
  Op *skip = never_empty ? NULL : skip_empty(m, step, first, empty, yields);
  Op *split = never_full ? NULL : split_full(m, mask, full);
  /* The tests block-lists replaces by a list's entries (block_lists.c). */
  if (reads_inputs(mask->operands[1], true, 0)) {
    if (skip)
      op_set_attr_word(skip, "classified", "run_time");
    if (split)
      op_set_attr_word(split, "classified", "run_time");
  }
  dce_block(step); /* classification ops nobody needed */
  cse_block(step);
  dce_func(f); /* ... and in the scans' copies (their all-kept reductions) */
  return 0;
}
