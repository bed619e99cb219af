/* mask_interval.c - interval and tri-state bounds of a mask over a tile
 * pair, emitted as scalar ops (mask_interval.h; used by mask_skip.c).
 *
 * Numeric nodes get [lo, hi], boolean ones (can be true, can be false);
 * anything not modelled (a float score in the mask, rem, ...) is unknown,
 * which is sound and only costs speed. In range mode (Ana.range_loop) the
 * loop's induction variable is an interval and the step's own scalars are
 * bounded through their ops: the bounds hold over a range of steps.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/mask_interval.h"
#include "passes/pass_util.h"

/* ------------------------------------------------------------ emission */

static Value *konst(Ana *a, ElemType e, double v) {
  return build_const(&a->b, type_scalar(e), v);
}

/* A scalar known at compile time: a const, or a cast of one (the lowering
 * writes `cast (const 512) : f32` for a float literal beside an index). */
bool mask_sconst(Value *v, double *c) {
  if (v->type.kind != TYPE_SCALAR)
    return false;
  if (v->def && v->def->kind == OP_CAST && mask_sconst(v->def->operands[0], c)) {
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
  bool kx = mask_sconst(x, &cx), ky = mask_sconst(y, &cy);
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

Value *mask_not(Ana *a, Value *x) {
  double c;
  if (mask_sconst(x, &c))
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
    if (!loop || loop->kind != OP_FOR || iv->arg_index != 0 || !mask_sconst(loop->operands[0], &lo) ||
        lo < 0)
      continue;
    Op *cd = loop->operands[1]->def;
    if (cd && cd->kind == OP_CEILDIV && cd->operands[0] == y && cd->operands[1] == c)
      return true;
  }
  return false;
}

/* y = x + c (either order) with c a nonzero constant: y != x everywhere. */
static bool offset_of(Value *x, Value *y) {
  Op *d = y->def;
  double c;
  if (!d || d->kind != OP_ADD)
    return false;
  return (d->operands[0] == x && mask_sconst(d->operands[1], &c) && c != 0) ||
         (d->operands[1] == x && mask_sconst(d->operands[0], &c) && c != 0);
}

static Value *emit_cmp(Ana *a, const char *pred, Value *x, Value *y) {
  double cx, cy;
  if ((!strcmp(pred, "eq") || !strcmp(pred, "ne")) && (offset_of(x, y) || offset_of(y, x)))
    return konst(a, ELEM_I1, !strcmp(pred, "ne")); /* a tile's first and last index */
  if ((!strcmp(pred, "lt") && loop_bound_lt(x, y)) || (!strcmp(pred, "gt") && loop_bound_lt(y, x)))
    return konst(a, ELEM_I1, 1);
  if ((!strcmp(pred, "ge") && loop_bound_lt(x, y)) || (!strcmp(pred, "le") && loop_bound_lt(y, x)))
    return konst(a, ELEM_I1, 0);
  if (mask_sconst(x, &cx) && mask_sconst(y, &cy)) {
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
  if (mask_sconst(y.lo, &c) && y.lo == y.hi) {
    Ival t = x;
    x = y;
    y = t;
  }
  if (mask_sconst(x.lo, &c) && x.lo == x.hi) {
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
  if (!(y.lo == y.hi && mask_sconst(y.lo, &c)) || c == 0)
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


/* A scalar select folded when its condition is a constant. */
static Value *emit_select(Ana *a, Value *c, Value *x, Value *y) {
  double k;
  if (mask_sconst(c, &k))
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
  Tri c = mask_tri(a, d->operands[0]);
  Value *only_x = mask_not(a, c.cf), *only_y = mask_not(a, c.ct);
  Value *lo = emit_bin(a, OP_MIN, x.lo, y.lo), *hi = emit_bin(a, OP_MAX, x.hi, y.hi);
  lo = emit_select(a, only_x, x.lo, emit_select(a, only_y, y.lo, lo));
  hi = emit_select(a, only_x, x.hi, emit_select(a, only_y, y.hi, hi));
  return (Ival){true, lo, hi};
}

/* gather(t, i, ...): an element of a run-time input. Where every index is
 * one value over the whole tile pair (lo == hi at run time: a block table
 * read at q / 128 on 128-row tiles, a per-sequence prefix length at b),
 * the element is that one value, read once as a scalar (and only then: the
 * point is one of the tile's own indices, so inside the input); elsewhere
 * an i32 input's element is any i32 (without a test where an index cannot
 * meet in one point: coarsens). Float inputs are not modelled: their
 * unknown bounds would be infinities, whose sums can be NaN, and a NaN
 * bound would make a comparison claim a tile empty. */
/* Can tile value v take one value over a whole tile? Only through a
 * division or floor on its way from the positions (q / 128): sums,
 * differences, casts and clamps of a position take a tile's rows apart
 * (they meet only where a clamp folds the rows past a sequence's end). */
static bool coarsens(Value *v, int depth) {
  Op *d = v->def;
  if (!d || depth > 64 || v->type.kind != TYPE_TILE)
    return false;
  if (d->kind == OP_DIV || d->kind == OP_FLOOR || d->kind == OP_CEILDIV)
    return true;
  for (int i = 0; i < d->noperands; i++)
    if (coarsens(d->operands[i], depth + 1))
      return true;
  return false;
}

static Ival iv_gather(Ana *a, Op *d, Value *v) {
  if (d->noperands < 2 || d->noperands > 5)
    return UNKNOWN_IV;
  bool may_point = true;
  for (int i = 1; i < d->noperands; i++)
    if (d->operands[i]->type.kind == TYPE_TILE && !coarsens(d->operands[i], 0))
      may_point = false;
  if (!may_point) /* document ids at q and k: read at many places, any i32 */
    return v->type.elem == ELEM_INDEX
               ? (Ival){true, konst(a, ELEM_INDEX, -2147483648.0), konst(a, ELEM_INDEX, 2147483647.0)}
               : UNKNOWN_IV;
  Value *at[4], *point = NULL;
  for (int i = 1; i < d->noperands; i++) {
    Ival x = ival(a, d->operands[i]);
    if (!x.known)
      return UNKNOWN_IV;
    at[i - 1] = x.lo;
    Value *same = x.lo == x.hi ? konst(a, ELEM_I1, 1) : emit_cmp(a, "eq", x.lo, x.hi);
    point = point ? emit_bin(a, OP_AND, point, same) : same;
  }
  double c;
  if (mask_sconst(point, &c) && c != 0) /* scalar indices (b, h, constants) */
    return exact(build_gather(&a->b, d->operands[0], at, d->noperands - 1));
  if (v->type.elem != ELEM_INDEX)
    return UNKNOWN_IV;
  Value *imin = konst(a, ELEM_INDEX, -2147483648.0), *imax = konst(a, ELEM_INDEX, 2147483647.0);
  if (mask_sconst(point, &c)) /* never one point: any i32 */
    return (Ival){true, imin, imax};
  Type t = type_index();
  Op *fi = build_if(&a->b, point, &t, 1);
  Builder tb = builder_at_end(a->m, fi->regions[0]);
  tb.loc = a->b.loc;
  Value *g = build_gather(&tb, d->operands[0], at, d->noperands - 1);
  build_yield(&tb, &g, 1);
  Builder eb = builder_at_end(a->m, fi->regions[1]);
  Value *zero = build_const(&eb, t, 0);
  build_yield(&eb, &zero, 1);
  Value *e = fi->results[0];
  e->name = "point";
  return (Ival){true, emit_select(a, point, e, imin), emit_select(a, point, e, imax)};
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
  case OP_GATHER:
    return iv_gather(a, d, v);
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
  if (mask_sconst(v, &c))
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
    if (mask_sconst(v, &c) && (v->def->parent == a->b.block || v->def->kind != OP_CONST))
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
    Tri x = mask_tri(a, d->operands[0]);
    return (Tri){x.cf, x.ct};
  }
  case OP_AND: {
    Tri x = mask_tri(a, d->operands[0]), y = mask_tri(a, d->operands[1]);
    return (Tri){emit_bin(a, OP_AND, x.ct, y.ct), emit_bin(a, OP_OR, x.cf, y.cf)};
  }
  case OP_OR: {
    Tri x = mask_tri(a, d->operands[0]), y = mask_tri(a, d->operands[1]);
    return (Tri){emit_bin(a, OP_OR, x.ct, y.ct), emit_bin(a, OP_AND, x.cf, y.cf)};
  }
  case OP_SELECT: {
    if (d->results[0]->type.elem != ELEM_I1)
      return unknown_tri(a);
    Tri c0 = mask_tri(a, d->operands[0]), x = mask_tri(a, d->operands[1]), y = mask_tri(a, d->operands[2]);
    Value *ct = emit_bin(a, OP_OR, emit_bin(a, OP_AND, c0.ct, x.ct), emit_bin(a, OP_AND, c0.cf, y.ct));
    Value *cf = emit_bin(a, OP_OR, emit_bin(a, OP_AND, c0.ct, x.cf), emit_bin(a, OP_AND, c0.cf, y.cf));
    return (Tri){ct, cf};
  }
  default:
    return unknown_tri(a);
  }
}

/* Whether boolean v can be true / false somewhere on the current tile pair. */
Tri mask_tri(Ana *a, Value *v) {
  Memo *e = memo_find(a, v, true);
  if (e)
    return e->tr;
  Tri r;
  double c;
  if (v->type.kind == TYPE_SCALAR && a->range_loop) {
    if (mask_sconst(v, &c))
      r = (Tri){konst(a, ELEM_I1, c != 0), konst(a, ELEM_I1, c == 0)};
    else if (value_defined_outside(v, a->range_loop))
      r = (Tri){v, mask_not(a, v)};
    else
      r = v->def && !v->def->nregions ? tri_op(a, v->def) : unknown_tri(a);
  } else if (v->type.kind == TYPE_SCALAR) {
    /* a run-time flag: exact, once it is available before the skip */
    if (mask_sconst(v, &c))
      r = (Tri){konst(a, ELEM_I1, c != 0), konst(a, ELEM_I1, c == 0)};
    else if (make_available(a, v))
      r = (Tri){v, mask_not(a, v)};
    else
      r = unknown_tri(a);
  } else {
    r = v->def ? tri_op(a, v->def) : unknown_tri(a);
  }
  e = memo_add(a, v, true);
  e->tr = r;
  return r;
}
