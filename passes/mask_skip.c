/* mask_skip.c - classify each (Q tile, K/V tile) pair as empty, full or
 * partial from the mask, skip empty ones and mask only partial ones.
 *
 * The mask's condition is an elementwise op tree over index tiles
 * (iota + q0, iota + k0), scalars (b, h, seqlen_q, seqlen_k) and constants.
 * We evaluate that tree over intervals: for the current tile pair every
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
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

typedef struct Ival {
  bool known;
  Value *lo, *hi;
} Ival;

typedef struct Tri {
  Value *ct, *cf; /* i1 scalars: can be true, can be false */
} Tri;

typedef struct Memo {
  Value *key;
  Ival iv;
  Tri tr;
  bool is_tri;
} Memo;

typedef struct Ana {
  Module *m;
  Builder b; /* emission point: before the first op the skip will wrap */
  Memo *memo;
  int nmemo, capmemo;
  /* Range mode (the loop-bound search): the analysis is emitted outside
   * `range_loop`, over every step whose induction variable is in range_iv,
   * instead of over the current step. */
  Op *range_loop;
  Ival range_iv;
} Ana;

/* ------------------------------------------------------------ emission */

static Value *konst(Ana *a, ElemType e, double v) {
  return build_const(&a->b, type_scalar(e), v);
}

/* A scalar known at compile time: a const, or a cast of one (the lowering
 * writes `cast (const 512) : f32` for a float literal beside an index). */
static bool sconst(Value *v, double *c) {
  if (v->type.kind != TYPE_SCALAR)
    return false;
  if (v->def && v->def->kind == OP_CAST && sconst(v->def->operands[0], c)) {
    if (v->type.elem == ELEM_INDEX)
      *c = trunc(*c);
    return v->type.elem != ELEM_I1 && fabs(*c) < 16777216.0; /* exact in f32 */
  }
  return value_const(v, c);
}

static double fold(OpKind k, double x, double y, ElemType e) {
  switch (k) {
  case OP_ADD: return x + y;
  case OP_SUB: return x - y;
  case OP_MUL: return x * y;
  case OP_MIN: return x < y ? x : y;
  case OP_MAX: return x > y ? x : y;
  case OP_AND: return (x != 0) && (y != 0);
  case OP_OR: return (x != 0) || (y != 0);
  case OP_DIV: return e == ELEM_INDEX ? floor(x / y) : x / y;
  default: return 0;
  }
}

/* A binary scalar op, folded when both sides are constants (or trivially). */
static Value *emit_bin(Ana *a, OpKind k, Value *x, Value *y) {
  double cx, cy;
  bool kx = sconst(x, &cx), ky = sconst(y, &cy);
  if (kx && ky && !(k == OP_DIV && cy == 0))
    return konst(a, x->type.elem, fold(k, cx, cy, x->type.elem));
  if ((k == OP_ADD && ky && cy == 0) || (k == OP_SUB && ky && cy == 0))
    return x;
  if (k == OP_ADD && kx && cx == 0)
    return y;
  if (k == OP_AND && (kx || ky))
    return kx ? (cx != 0 ? y : x) : (cy != 0 ? x : y);
  if (k == OP_OR && (kx || ky))
    return kx ? (cx != 0 ? x : y) : (cy != 0 ? y : x);
  return build_binary(&a->b, k, x, y);
}

static Value *emit_not(Ana *a, Value *x) {
  double c;
  if (sconst(x, &c))
    return konst(a, ELEM_I1, c == 0);
  if (x->def && x->def->kind == OP_NOT)
    return x->def->operands[0];
  return build_unary(&a->b, OP_NOT, x);
}

/* x = j * c with j the induction variable of `for j = lo to ceildiv(y, c)`
 * (lo >= 0): then x < y. This is what makes the bounds mask `k < seqlen_k`
 * never empty: the first key of every K/V tile is in range. */
static bool loop_bound_lt(Value *x, Value *y) {
  Op *mul = x->def;
  if (!mul || mul->kind != OP_MUL)
    return false;
  for (int side = 0; side < 2; side++) {
    Value *iv = mul->operands[side], *c = mul->operands[1 - side];
    Op *loop = iv->block ? iv->block->parent_op : NULL;
    double lo;
    if (!loop || loop->kind != OP_FOR || iv->arg_index != 0 || !sconst(loop->operands[0], &lo) ||
        lo < 0)
      continue;
    Op *cd = loop->operands[1]->def;
    if (cd && cd->kind == OP_CEILDIV && cd->operands[0] == y && cd->operands[1] == c)
      return true;
  }
  return false;
}

static Value *emit_cmp(Ana *a, const char *pred, Value *x, Value *y) {
  double cx, cy;
  if ((!strcmp(pred, "lt") && loop_bound_lt(x, y)) || (!strcmp(pred, "gt") && loop_bound_lt(y, x)))
    return konst(a, ELEM_I1, 1);
  if ((!strcmp(pred, "ge") && loop_bound_lt(x, y)) || (!strcmp(pred, "le") && loop_bound_lt(y, x)))
    return konst(a, ELEM_I1, 0);
  if (sconst(x, &cx) && sconst(y, &cy)) {
    bool r = !strcmp(pred, "lt") ? cx < cy : !strcmp(pred, "le") ? cx <= cy
           : !strcmp(pred, "gt") ? cx > cy : !strcmp(pred, "ge") ? cx >= cy
           : !strcmp(pred, "eq") ? cx == cy : cx != cy;
    return konst(a, ELEM_I1, r);
  }
  return build_cmp(&a->b, pred, x, y);
}

/* ------------------------------------------------------------ memo */

static Memo *memo_find(Ana *a, Value *v, bool is_tri) {
  for (int i = 0; i < a->nmemo; i++)
    if (a->memo[i].key == v && a->memo[i].is_tri == is_tri)
      return &a->memo[i];
  return NULL;
}

static Memo *memo_add(Ana *a, Value *v, bool is_tri) {
  if (a->nmemo == a->capmemo) {
    a->capmemo = a->capmemo ? 2 * a->capmemo : 32;
    Memo *n = realloc(a->memo, sizeof(Memo) * (size_t)a->capmemo);
    if (!n)
      abort();
    a->memo = n;
  }
  Memo *e = &a->memo[a->nmemo++];
  *e = (Memo){.key = v, .is_tri = is_tri};
  return e;
}

/* ------------------------------------------------------------ intervals */

/* Makes scalar v usable at the emission point: values of the step that come
 * later (k0, q0) move up; when v is the emission point itself, the point
 * moves past it. */
static bool make_available(Ana *a, Value *v) {
  Op *d = v->def;
  if (!d || d->parent != a->b.block)
    return true;
  if (!op_is_pure(d))
    return false;
  if (d == a->b.before) {
    a->b.before = d->next;
    return true;
  }
  if (!a->b.before)
    return true;
  return hoist_before(v, a->b.before);
}

static const Ival UNKNOWN_IV = {false, NULL, NULL};

static Ival ival(Ana *a, Value *v);

static Ival exact(Value *v) { return (Ival){true, v, v}; }

static Ival iv_mul(Ana *a, Ival x, Ival y) {
  double c;
  if (sconst(y.lo, &c) && y.lo == y.hi) {
    Ival t = x;
    x = y;
    y = t;
  }
  if (sconst(x.lo, &c) && x.lo == x.hi) {
    Value *p = emit_bin(a, OP_MUL, x.lo, y.lo), *q = emit_bin(a, OP_MUL, x.lo, y.hi);
    return c >= 0 ? (Ival){true, p, q} : (Ival){true, q, p};
  }
  Value *p1 = emit_bin(a, OP_MUL, x.lo, y.lo), *p2 = emit_bin(a, OP_MUL, x.lo, y.hi);
  Value *p3 = emit_bin(a, OP_MUL, x.hi, y.lo), *p4 = emit_bin(a, OP_MUL, x.hi, y.hi);
  Value *lo = emit_bin(a, OP_MIN, emit_bin(a, OP_MIN, p1, p2), emit_bin(a, OP_MIN, p3, p4));
  Value *hi = emit_bin(a, OP_MAX, emit_bin(a, OP_MAX, p1, p2), emit_bin(a, OP_MAX, p3, p4));
  return (Ival){true, lo, hi};
}

/* Division (floor for index, true for floats) is monotone in the dividend
 * for a constant divisor; other divisors are not modelled. */
static Ival iv_div(Ana *a, Ival x, Ival y) {
  double c;
  if (!(y.lo == y.hi && sconst(y.lo, &c)) || c == 0)
    return UNKNOWN_IV;
  Value *p = emit_bin(a, OP_DIV, x.lo, y.lo), *q = emit_bin(a, OP_DIV, x.hi, y.lo);
  return c > 0 ? (Ival){true, p, q} : (Ival){true, q, p};
}

static Ival iv_abs(Ana *a, Ival x) {
  Value *zero = konst(a, x.lo->type.elem, 0);
  Value *nlo = build_unary(&a->b, OP_NEG, x.lo), *nhi = build_unary(&a->b, OP_NEG, x.hi);
  Value *lo = emit_bin(a, OP_MAX, emit_bin(a, OP_MAX, x.lo, nhi), zero);
  return (Ival){true, lo, emit_bin(a, OP_MAX, nlo, x.hi)};
}

static Ival iv_binary(Ana *a, OpKind k, Ival x, Ival y) {
  switch (k) {
  case OP_ADD: return (Ival){true, emit_bin(a, OP_ADD, x.lo, y.lo), emit_bin(a, OP_ADD, x.hi, y.hi)};
  case OP_SUB: return (Ival){true, emit_bin(a, OP_SUB, x.lo, y.hi), emit_bin(a, OP_SUB, x.hi, y.lo)};
  case OP_MIN: return (Ival){true, emit_bin(a, OP_MIN, x.lo, y.lo), emit_bin(a, OP_MIN, x.hi, y.hi)};
  case OP_MAX: return (Ival){true, emit_bin(a, OP_MAX, x.lo, y.lo), emit_bin(a, OP_MAX, x.hi, y.hi)};
  case OP_MUL: return iv_mul(a, x, y);
  case OP_DIV: return iv_div(a, x, y);
  default: return UNKNOWN_IV;
  }
}

/* The kernel's `tile_size {dim}` value (before tiling), or NULL. */
static Value *tile_size_value(Op *from, const char *dim) {
  Func *f = op_func(from);
  for (Op *o = f ? f->body->first : NULL; o; o = o->next)
    if (o->kind == OP_TILE_SIZE && strcmp(attr_str(&o->attrs, "dim", ""), dim) == 0)
      return o->results[0];
  return NULL;
}

static Ival iv_iota(Ana *a, Op *d, Type t) {
  if (d->noperands > 0 || attr_get(&d->attrs, "and")) /* dropout's (ir/dropout.c) */
    return UNKNOWN_IV;
  int ext = attr_int(&d->attrs, "axis", 0) == 0 ? t.rows : t.cols;
  Value *zero = konst(a, t.elem, 0);
  if (ext > 0)
    return (Ival){true, zero, konst(a, t.elem, ext - 1)};
  /* Symbolic Br / Bc (tiling has not run): the extent is a run-time value. */
  Value *ts = tile_size_value(d, ext == DIM_BR ? "q" : "kv");
  if ((ext != DIM_BR && ext != DIM_BC) || !ts)
    return UNKNOWN_IV;
  return (Ival){true, zero, emit_bin(a, OP_SUB, ts, konst(a, t.elem, 1))};
}

static Ival iv_cast(Ana *a, Ival x, ElemType to) {
  if (to == ELEM_I1 || x.lo->type.elem == ELEM_I1)
    return UNKNOWN_IV;
  Value *lo = build_cast(&a->b, x.lo, to);
  return (Ival){true, lo, x.lo == x.hi ? lo : build_cast(&a->b, x.hi, to)};
}

static Tri tri(Ana *a, Value *v);

/* A scalar select folded when its condition is a constant. */
static Value *emit_select(Ana *a, Value *c, Value *x, Value *y) {
  double k;
  if (sconst(c, &k))
    return k != 0 ? x : y;
  return x == y ? x : build_select(&a->b, c, x, y);
}

/* select(c, x, y): where c is the same over the whole tile pair only the
 * branch it takes bounds the result; else the hull of both. A chain of
 * selects over q or k (a document id from its boundaries: q < 1000 ? 0 :
 * q < 2500 ? 1 : ...) thus stays exact on tiles inside one branch, so a
 * mask comparing two such ids classifies those tiles empty or full. */
static Ival iv_select(Ana *a, Op *d) {
  Ival x = ival(a, d->operands[1]), y = ival(a, d->operands[2]);
  if (!x.known || !y.known)
    return UNKNOWN_IV;
  Tri c = tri(a, d->operands[0]);
  Value *only_x = emit_not(a, c.cf), *only_y = emit_not(a, c.ct);
  Value *lo = emit_bin(a, OP_MIN, x.lo, y.lo), *hi = emit_bin(a, OP_MAX, x.hi, y.hi);
  lo = emit_select(a, only_x, x.lo, emit_select(a, only_y, y.lo, lo));
  hi = emit_select(a, only_x, x.hi, emit_select(a, only_y, y.hi, hi));
  return (Ival){true, lo, hi};
}

static Ival ival_op(Ana *a, Op *d, Value *v) {
  double c;
  switch (d->kind) {
  case OP_IOTA:
    return iv_iota(a, d, v->type);
  case OP_FULL:
  case OP_CONST:
    return value_const(v, &c) ? exact(konst(a, v->type.elem, c)) : UNKNOWN_IV;
  case OP_NEG: {
    Ival x = ival(a, d->operands[0]);
    if (!x.known)
      return x;
    return (Ival){true, build_unary(&a->b, OP_NEG, x.hi), build_unary(&a->b, OP_NEG, x.lo)};
  }
  case OP_ABS: {
    Ival x = ival(a, d->operands[0]);
    return x.known ? iv_abs(a, x) : x;
  }
  case OP_CAST: {
    Ival x = ival(a, d->operands[0]);
    return x.known ? iv_cast(a, x, v->type.elem) : x;
  }
  case OP_FLOOR: case OP_EXP: case OP_EXP2: case OP_TANH: {
    /* Monotone and NaN-free on every finite input. (Not log or sqrt: a NaN
     * bound compares false both ways and would claim a tile is empty.) */
    Ival x = ival(a, d->operands[0]);
    if (!x.known)
      return x;
    return (Ival){true, build_unary(&a->b, d->kind, x.lo), build_unary(&a->b, d->kind, x.hi)};
  }
  case OP_SELECT:
    return iv_select(a, d);
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_MIN: case OP_MAX: {
    Ival x = ival(a, d->operands[0]), y = ival(a, d->operands[1]);
    if (!x.known || !y.known)
      return UNKNOWN_IV;
    return iv_binary(a, d->kind, x, y);
  }
  default:
    return UNKNOWN_IV;
  }
}

/* Range mode: a scalar over every step of the range. The induction
 * variable is the range; values from outside the loop are themselves; the
 * step's own scalars (k0 = j * bc, ...) are bounded through their ops. */
static Ival ival_in_range(Ana *a, Value *v) {
  double c;
  if (v == for_iv(a->range_loop))
    return a->range_iv;
  if (sconst(v, &c))
    return exact(konst(a, v->type.elem, c));
  if (value_defined_outside(v, a->range_loop))
    return exact(v);
  if (!v->def || v->def->nregions)
    return UNKNOWN_IV;
  return ival_op(a, v->def, v);
}

/* Bounds of every element of numeric value v over the current tile pair. */
static Ival ival(Ana *a, Value *v) {
  Memo *e = memo_find(a, v, false);
  if (e)
    return e->iv;
  Ival r = UNKNOWN_IV;
  if (a->range_loop && v->type.kind == TYPE_SCALAR && v->type.elem != ELEM_I1) {
    r = ival_in_range(a, v);
  } else if (v->type.kind == TYPE_SCALAR && v->type.elem != ELEM_I1) {
    double c;
    if (sconst(v, &c) && (v->def->parent == a->b.block || v->def->kind != OP_CONST))
      r = exact(konst(a, v->type.elem, c)); /* a copy: the original may be wrapped */
    else if (make_available(a, v))
      r = exact(v);
  } else if (v->type.kind == TYPE_TILE && v->type.elem != ELEM_I1 && v->def) {
    r = ival_op(a, v->def, v);
  }
  memo_add(a, v, false)->iv = r;
  return r;
}

/* ------------------------------------------------------------ tri-states */

static Tri unknown_tri(Ana *a) {
  Value *t = konst(a, ELEM_I1, 1);
  return (Tri){t, t};
}

static Tri tri_cmp(Ana *a, const char *p, Value *xv, Value *yv) {
  Ival x = ival(a, xv), y = ival(a, yv);
  if (!x.known || !y.known)
    return unknown_tri(a);
  if (!strcmp(p, "lt"))
    return (Tri){emit_cmp(a, "lt", x.lo, y.hi), emit_cmp(a, "ge", x.hi, y.lo)};
  if (!strcmp(p, "le"))
    return (Tri){emit_cmp(a, "le", x.lo, y.hi), emit_cmp(a, "gt", x.hi, y.lo)};
  if (!strcmp(p, "gt"))
    return (Tri){emit_cmp(a, "gt", x.hi, y.lo), emit_cmp(a, "le", x.lo, y.hi)};
  if (!strcmp(p, "ge"))
    return (Tri){emit_cmp(a, "ge", x.hi, y.lo), emit_cmp(a, "lt", x.lo, y.hi)};
  /* eq can hold when the intervals overlap; it can fail unless both are the
   * same single point (x.lo == y.hi and x.hi == y.lo imply that). */
  Value *overlap = emit_bin(a, OP_AND, emit_cmp(a, "le", x.lo, y.hi), emit_cmp(a, "le", y.lo, x.hi));
  Value *differ = emit_bin(a, OP_OR, emit_cmp(a, "ne", x.lo, y.hi), emit_cmp(a, "ne", x.hi, y.lo));
  if (!strcmp(p, "eq"))
    return (Tri){overlap, differ};
  if (!strcmp(p, "ne"))
    return (Tri){differ, overlap};
  return unknown_tri(a);
}

static Tri tri_op(Ana *a, Op *d) {
  double c;
  switch (d->kind) {
  case OP_FULL:
  case OP_CONST:
    if (!value_const(d->results[0], &c))
      return unknown_tri(a);
    return (Tri){konst(a, ELEM_I1, c != 0), konst(a, ELEM_I1, c == 0)};
  case OP_CMP:
    return tri_cmp(a, attr_str(&d->attrs, "pred", ""), d->operands[0], d->operands[1]);
  case OP_NOT: {
    Tri x = tri(a, d->operands[0]);
    return (Tri){x.cf, x.ct};
  }
  case OP_AND: {
    Tri x = tri(a, d->operands[0]), y = tri(a, d->operands[1]);
    return (Tri){emit_bin(a, OP_AND, x.ct, y.ct), emit_bin(a, OP_OR, x.cf, y.cf)};
  }
  case OP_OR: {
    Tri x = tri(a, d->operands[0]), y = tri(a, d->operands[1]);
    return (Tri){emit_bin(a, OP_OR, x.ct, y.ct), emit_bin(a, OP_AND, x.cf, y.cf)};
  }
  case OP_SELECT: {
    if (d->results[0]->type.elem != ELEM_I1)
      return unknown_tri(a);
    Tri c0 = tri(a, d->operands[0]), x = tri(a, d->operands[1]), y = tri(a, d->operands[2]);
    Value *ct = emit_bin(a, OP_OR, emit_bin(a, OP_AND, c0.ct, x.ct), emit_bin(a, OP_AND, c0.cf, y.ct));
    Value *cf = emit_bin(a, OP_OR, emit_bin(a, OP_AND, c0.ct, x.cf), emit_bin(a, OP_AND, c0.cf, y.cf));
    return (Tri){ct, cf};
  }
  default:
    return unknown_tri(a);
  }
}

/* Whether boolean v can be true / false somewhere on the current tile pair. */
static Tri tri(Ana *a, Value *v) {
  Memo *e = memo_find(a, v, true);
  if (e)
    return e->tr;
  Tri r;
  double c;
  if (v->type.kind == TYPE_SCALAR && a->range_loop) {
    if (sconst(v, &c))
      r = (Tri){konst(a, ELEM_I1, c != 0), konst(a, ELEM_I1, c == 0)};
    else if (value_defined_outside(v, a->range_loop))
      r = (Tri){v, emit_not(a, v)};
    else
      r = v->def && !v->def->nregions ? tri_op(a, v->def) : unknown_tri(a);
  } else if (v->type.kind == TYPE_SCALAR) {
    /* a run-time flag: exact, once it is available before the skip */
    if (sconst(v, &c))
      r = (Tri){konst(a, ELEM_I1, c != 0), konst(a, ELEM_I1, c == 0)};
    else if (make_available(a, v))
      r = (Tri){v, emit_not(a, v)};
    else
      r = unknown_tri(a);
  } else {
    r = v->def ? tri_op(a, v->def) : unknown_tri(a);
  }
  e = memo_add(a, v, true);
  e->tr = r;
  return r;
}

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

/* %sm = if %full { yield %sc } else { cond ops; yield mask %sc, %cond } */
static void split_full(Module *m, Op *mask, Value *full) {
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
}

/* Wraps the ops of `step` from `first` to its terminator:
 *   results = if %empty { yield state } else { ops; yield what the step yielded } */
static void skip_empty(Module *m, Block *step, Op *first, Value *empty, bool yields) {
  Op *loop = step->parent_op;
  Op *term = block_terminator(step);
  int n = term ? term->noperands : 0;
  Type types[64];
  Value *state[64];
  if (n > 64)
    return;
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
      if (sconst(d->operands[side], &c) && affine_in_iv(d->operands[1 - side], loop, a, sign)) {
        a->off += sign * (d->kind == OP_SUB ? -c : c);
        return true;
      }
    }
    if (d->kind == OP_SUB && sconst(d->operands[1], &c) && affine_in_iv(d->operands[0], loop, a, sign)) {
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
    if (d->operands[side] == for_iv(loop) && sconst(d->operands[1 - side], &c) && c > 0) {
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
  if (upper) { /* j <= floor(x' / bc): hi = min(hi, x' div bc + 1) */
    Value *jh = build_binary(&b, OP_ADD, build_binary(&b, OP_DIV, xi, bcv), build_index(&b, 1));
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
  Tri t = tri(&a, cond);
  Value *e = emit_not(&a, t.ct);
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
  Tri t = tri(&a, mask->operands[1]);
  Value *empty = named(emit_not(&a, t.ct), "empty");
  /* Masks whose kept keys form an interval per query tile: visit only the
   * K/V steps that can keep something. (The empty test stays: it is exact
   * where the narrowing is not.) */
  double c;
  bool never_empty = sconst(empty, &c) && c == 0;
  Value *lo0 = loop->operands[0], *hi0 = loop->operands[1];
  if (!for_is_parallel(loop))
    narrow_by(m, loop, t.ct);
  /* Where the affine narrowing left the loop as it was or the mask has
   * parts it cannot bound (has_nonaffine), search for the empty steps at
   * the ends. */
  bool narrowed = loop->operands[0] != lo0 || loop->operands[1] != hi0;
  if (!for_is_parallel(loop) && !never_empty && (!narrowed || has_nonaffine(mask->operands[1], 0)))
    search_bounds(m, loop, mask->operands[1]);
  Value *full = named(emit_not(&a, t.cf), "full");
  free(a.memo);
  Op *first = a.b.before; /* everything from here on is per-tile work */
  bool never_full = sconst(full, &c) && c == 0;
  if (!never_empty)
    skip_empty(m, step, first, empty, yields);
  if (!never_full)
    split_full(m, mask, full);
  dce_block(step); /* classification ops nobody needed */
  cse_block(step);
  return 0;
}
