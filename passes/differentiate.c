/* differentiate.c - the `differentiate` pass: every `%g = grad %y, %x` (dy/dx
 * elementwise, typed as y) becomes ops that compute the derivative, so that
 * no later pass and no codegen ever sees a grad. The backward asks for
 * score'(S) this way (docs/backward.md: dS = dZ o grad(Z, S)).
 *
 * Forward mode: y is computed from x by a DAG of elementwise ops (a score
 * modifier); the derivative of each value on the way from x to y is built
 * from the derivatives of its operands. A value that does not depend on x
 * (a constant, an index tile, a load, a kernel argument) has derivative 0.
 * The ops go right before the grad op: every value of the chain dominates
 * it, the derivative is computed only where it is used (a grad inside an
 * `if` costs nothing on the other path), and no forward-only kernel ever
 * carries derivative code.
 *
 * A derivative is kept as (num / den) * v with v a value or 1, constant
 * factors apart, so that trivial cases fold: d x = 1, 0 * a is dropped,
 * 1 * a = a, and `c * tanh(s / c)` gives (c / c) * (1 - t*t) = 1 - t*t
 * exactly (t the modifier's own tanh). No modifier and ALiBi (s + a bias
 * that does not depend on s) give the constant 1 (`full {value = 1}`): a
 * product by it folds, and the backward's `select %cond, dZ o score', 0`
 * around a constant score' goes, around a bounded one (softcap's) in the
 * K/V-outer kernels and in every kernel up to head dim 128
 * (fold_finite_uses). The rules (a, b operands, r the op's result):
 *
 *   add, sub, neg        da + db, da - db, -da
 *   mul (and rescale)    da b + a db; a * a: 2 a da
 *   div                  (da - r db) / b   (r = a / b, reused); by a constant c: da / c
 *   rem (fmod)           da; a divisor that depends on x is refused
 *   exp, exp2            da r, da r ln2
 *   log, log2            da / a, da / (a ln2)
 *   tanh                 da (1 - r r)
 *   sqrt                 da (0.5 / r): +inf at a = 0, as the calculus says
 *   recip                -da r r: 0 where a = 0, since recip(0) = 0
 *   abs                  da select(a < 0, -1, 1): +da at a = 0 (abs taken as a there)
 *   floor                0
 *   min, max             select(a <= b, da, db), select(a >= b, da, db): at a tie the
 *                        first operand's derivative
 *   select c, a, b       select(c, da, db); the condition is not differentiated
 *   mask s, c            select(c, ds, 0): 0 where masked (P is 0 there anyway)
 *   cast                 cast(da) to the result's float type
 *
 * Refused, with the op's source position, as never to miscompile: a value
 * of the chain that reduces or mixes elements (reduce, rowmax, rowsum,
 * xwarp_reduce, matmul), reads memory (load, load_paged, load_scalar),
 * passes through the results of a `for` or an `if`, or becomes an integer
 * or a boolean that is used as a number again (index math on the score; a
 * comparison that only steers a select or a mask is fine); fmod by a
 * divisor that depends on x.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

/* Deeper chains are refused rather than risking the stack. */
enum { MAX_DEPTH = 4096 };
static const char TOO_DEEP[] = "ends a chain of more than 4096 ops: too deep to differentiate";

static const double LN2 = 0.69314718055994530942; /* d exp2(a) = exp2(a) ln2 da */

/* (num / den) * v; v NULL stands for 1, num 0 for the zero derivative. */
typedef struct Deriv {
  double num, den;
  Value *v;
} Deriv;

static const Deriv ZERO = {0, 1, NULL}, ONE = {1, 1, NULL};

/* Dependence on x, per value id. */
enum { UNSEEN, INDEPENDENT, DEPENDENT };

typedef struct Diff {
  Builder b; /* right before the grad op */
  const Func *f;
  const Op *grad;
  const Value *x;
  FILE *diag;
  unsigned char *dep; /* per value id */
  bool *known;        /* per value id: d[id] computed */
  Deriv *d;
  int depth;
  bool failed;
} Diff;

/* ------------------------------------------------------------ numbering */

static void number_results(Op *op, void *ctx) {
  int *n = ctx;
  for (int i = 0; i < op->nresults; i++)
    op->results[i]->id = (*n)++;
  for (int r = 0; r < op->nregions; r++)
    for (int a = 0; a < op->regions[r]->nargs; a++)
      op->regions[r]->args[a]->id = (*n)++;
}

/* Numbers every value of f (Value.id) from 0; returns how many. */
static int number_values(Func *f) {
  int n = 0;
  for (int i = 0; i < f->nargs; i++)
    f->args[i]->id = n++;
  func_walk(f, number_results, &n);
  return n;
}

/* ----------------------------------------------------------- diagnostics */

/* Refuses the grad: op is the op of the chain that has no derivative. */
static void refuse(Diff *D, const Op *op, const char *why) {
  if (D->failed)
    return;
  D->failed = true;
  pass_report(D->diag, D->f, op->loc, "error",
              "cannot differentiate the score modifier of kernel '%s': '%s' %s", D->f->name,
              op_name(op->kind), why);
  if (op != D->grad)
    pass_report(D->diag, D->f, D->grad->loc, "note", "the derivative is asked for here (grad)");
}

/* Why an op that depends on x has no derivative rule here. */
static const char *no_rule_reason(OpKind k) {
  switch (k) {
  case OP_REDUCE:
  case OP_ROWMAX:
  case OP_ROWSUM:
  case OP_XWARP_REDUCE:
    return "reduces over elements of the tile: dy/dx would not be elementwise";
  case OP_MATMUL: return "mixes the elements of its operands: dy/dx would not be elementwise";
  case OP_LOAD:
  case OP_LOAD_PAGED:
  case OP_LOAD_SCALAR: return "reads memory at a position computed from the score";
  case OP_FOR:
  case OP_IF:
    return "passes the score through control flow (write the modifier with select)";
  case OP_GRAD: return "is a grad whose derivative is not expanded yet";
  default: return "has no derivative rule";
  }
}

/* ------------------------------------------------------------ dependence */

static bool depends(Diff *D, const Value *v);

static bool region_yields_depend(Diff *D, Block *blk) {
  Op *t = block_terminator(blk);
  for (int i = 0; t && i < t->noperands; i++)
    if (depends(D, t->operands[i]))
      return true;
  return false;
}

/* Does v depend on x (through operands, or the yields of an op's regions)?
 * Block arguments other than x do not: a loop's iter_arg is a previous
 * iteration's value. */
static bool depends(Diff *D, const Value *v) {
  if (v == D->x)
    return true;
  if (!v->def || D->failed)
    return false;
  unsigned char *s = &D->dep[v->id];
  if (*s != UNSEEN)
    return *s == DEPENDENT;
  if (++D->depth > MAX_DEPTH) {
    refuse(D, v->def, TOO_DEEP);
    return false;
  }
  *s = INDEPENDENT; /* SSA has no cycles; this only guards malformed input */
  Op *op = v->def;
  bool r = false;
  for (int i = 0; i < op->noperands && !r; i++)
    r = depends(D, op->operands[i]);
  for (int i = 0; i < op->nregions && !r; i++)
    r = region_yields_depend(D, op->regions[i]);
  D->depth--;
  *s = r ? DEPENDENT : INDEPENDENT;
  return r;
}

/* The op where a dependent integer or boolean value first comes from a
 * float one (a cast to index, a cmp), for the message. */
static const Op *integer_source(Diff *D, const Value *v) {
  const Op *op = v->def;
  for (int i = 0; op && i < op->noperands; i++) {
    const Value *w = op->operands[i];
    if (depends(D, w))
      return type_is_float(w->type) || !w->def ? op : integer_source(D, w);
  }
  return op;
}

/* ---------------------------------------------------- derivative algebra */

static bool is_zero(Deriv d) { return d.num == 0; }
static double factor(Deriv d) { return d.num / d.den; }
static bool same_factor(Deriv a, Deriv b) { return a.num * b.den == b.num * a.den; }
static bool same(Deriv a, Deriv b) { return a.v == b.v && same_factor(a, b); }

static Deriv scaled(Deriv d, double num, double den) {
  if (d.num == 0 || num == 0)
    return ZERO;
  return (Deriv){d.num * num, d.den * den, d.v};
}

static Value *cst(Diff *D, ElemType e, double k) {
  return build_const(&D->b, type_scalar(e), k);
}

/* d as one value of element type e: a scalar constant when v is 1. */
static Value *materialize(Diff *D, Deriv d, ElemType e) {
  if (!d.v)
    return cst(D, e, factor(d));
  if (d.num == d.den)
    return d.v;
  return build_binary(&D->b, OP_MUL, d.v, cst(D, e, factor(d)));
}

/* d's value part, 1 made a constant of type e. */
static Value *part(Diff *D, Deriv d, ElemType e) { return d.v ? d.v : cst(D, e, 1); }

/* w's value when it is a constant that does not depend on x (x itself may
 * be a `full` in a test: it stays a variable). */
static bool constant(Diff *D, Value *w, double *c) { return !depends(D, w) && value_const(w, c); }

/* v times w where v is x / w or (1 / w) y (the chain rule's factor of a
 * division by a value: softcap's w tanh(s / w) gives (1 / w)(1 - t^2) w):
 * x or y, exactly what the math says (and no rounding of 1 / w), else
 * NULL. v stays (another use of its value may have it as its derivative);
 * expand erases what is left unused. */
static Value *cancel(Value *v, Value *w) {
  Op *o = v->def;
  Value *rest = NULL;
  double one;
  if (o && o->kind == OP_DIV && o->operands[1] == w)
    rest = o->operands[0];
  for (int i = 0; o && o->kind == OP_MUL && i < 2 && !rest; i++) {
    Op *q = o->operands[i]->def;
    if (q && q->kind == OP_DIV && q->operands[1] == w && value_const(q->operands[0], &one) &&
        one == 1)
      rest = o->operands[1 - i];
  }
  return rest && type_eq(rest->type, v->type) ? rest : NULL;
}

/* Erases the pure ops this expansion added (after mark, before g) whose
 * results have no uses: what cancel left behind. One sweep from the last
 * up: an op's operands are defined above it, so erasing it has left them
 * unused by the time the sweep reaches them. */
static void erase_unused_added(const Op *mark, Op *g) {
  for (Op *op = g->prev, *prev; op && op != mark; op = prev) {
    prev = op->prev;
    bool used = false;
    for (int i = 0; i < op->nresults; i++)
      used |= op->results[i]->nuses > 0;
    if (!used && op_is_pure(op))
      op_erase(op);
  }
}

/* d * w (w a value of d's element type; a constant folds into the factor). */
static Deriv times(Diff *D, Deriv d, Value *w) {
  double c;
  if (is_zero(d))
    return ZERO;
  if (constant(D, w, &c))
    return scaled(d, c, 1);
  Value *rest = d.v ? cancel(d.v, w) : NULL;
  if (rest)
    return (Deriv){d.num, d.den, rest};
  return (Deriv){d.num, d.den, d.v ? build_binary(&D->b, OP_MUL, d.v, w) : w};
}

/* d / w. */
static Deriv over(Diff *D, Deriv d, Value *w, ElemType e) {
  double c;
  if (is_zero(d))
    return ZERO;
  if (constant(D, w, &c))
    return scaled(d, 1, c);
  return (Deriv){d.num, d.den, build_binary(&D->b, OP_DIV, part(D, d, e), w)};
}

/* a + b (k = OP_ADD) or a - b (OP_SUB). */
static Deriv combine(Diff *D, OpKind k, Deriv a, Deriv b, ElemType e) {
  double sign = k == OP_SUB ? -1 : 1;
  if (is_zero(b))
    return a;
  if (is_zero(a))
    return scaled(b, sign, 1);
  if (a.v == b.v) /* (p + q) v: s * s gives 2 s */
    return scaled((Deriv){a.num * b.den + sign * b.num * a.den, a.den * b.den, a.v}, 1, 1);
  /* one op at a time: the order of the ops must not depend on the C compiler */
  if (same_factor(a, b)) {
    Value *x = part(D, a, e);
    Value *y = part(D, b, e);
    return (Deriv){a.num, a.den, build_binary(&D->b, k, x, y)};
  }
  Value *x = materialize(D, a, e);
  Value *y = materialize(D, b, e);
  return (Deriv){1, 1, build_binary(&D->b, k, x, y)};
}

/* select(cond, a, b). */
static Deriv choose(Diff *D, Value *cond, Deriv a, Deriv b, ElemType e) {
  if (same(a, b))
    return a;
  Value *x = materialize(D, a, e);
  Value *y = materialize(D, b, e);
  return (Deriv){1, 1, build_select(&D->b, cond, x, y)};
}

/* ------------------------------------------------------------- the rules */

static Deriv deriv(Diff *D, Value *v);

static Deriv rule_binary(Diff *D, Op *op, Value *r, ElemType e) {
  Value *a = op->operands[0], *b = op->operands[1];
  Deriv da = deriv(D, a);
  Deriv db = deriv(D, b);
  switch (op->kind) {
  case OP_ADD:
  case OP_SUB: return combine(D, op->kind, da, db, e);
  case OP_MUL:
  case OP_RESCALE: {
    if (a == b) /* a * a: 2 a da, one product */
      return scaled(times(D, da, a), 2, 1);
    Deriv left = times(D, da, b);
    Deriv right = times(D, db, a);
    return combine(D, OP_ADD, left, right, e);
  }
  case OP_DIV: {
    Deriv top = combine(D, OP_SUB, da, times(D, db, r), e);
    return over(D, top, b, e);
  }
  case OP_REM:
    if (depends(D, b))
      refuse(D, op, "(fmod) divides by a value computed from the score: its derivative in "
                    "the divisor, -trunc(a/b), is not supported");
    return da;
  case OP_MIN:
  case OP_MAX: {
    if (same(da, db))
      return da;
    Value *first = build_cmp(&D->b, op->kind == OP_MAX ? "ge" : "le", a, b);
    return choose(D, first, da, db, e);
  }
  default: return ZERO; /* has_rule() said which */
  }
}

/* The unary ops, r = f(a). */
static Deriv rule_unary(Diff *D, Op *op, Value *r, ElemType e) {
  Value *a = op->operands[0];
  Deriv da = deriv(D, a);
  if (is_zero(da))
    return ZERO;
  switch (op->kind) {
  case OP_NEG: return scaled(da, -1, 1);
  case OP_EXP: return times(D, da, r);
  case OP_EXP2: return scaled(times(D, da, r), LN2, 1);
  case OP_LOG: return over(D, da, a, e);
  case OP_LOG2: return over(D, scaled(da, 1, LN2), a, e);
  case OP_TANH: {
    Value *tt = build_binary(&D->b, OP_MUL, r, r);
    return times(D, da, build_binary(&D->b, OP_SUB, cst(D, e, 1), tt));
  }
  case OP_SQRT: return times(D, da, build_binary(&D->b, OP_DIV, cst(D, e, 0.5), r));
  case OP_RECIP: return scaled(times(D, da, build_binary(&D->b, OP_MUL, r, r)), -1, 1);
  case OP_ABS: {
    Value *neg = build_cmp(&D->b, "lt", a, cst(D, e, 0));
    Value *minus = cst(D, e, -1);
    return times(D, da, build_select(&D->b, neg, minus, cst(D, e, 1)));
  }
  case OP_FLOOR: return ZERO;
  case OP_CAST: return da.v ? (Deriv){da.num, da.den, build_cast(&D->b, da.v, e)} : da;
  default: return ZERO; /* has_rule() said which */
  }
}

static bool has_rule(OpKind k) {
  switch (k) {
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_RESCALE: case OP_DIV: case OP_REM:
  case OP_MIN: case OP_MAX: case OP_NEG: case OP_EXP: case OP_EXP2: case OP_LOG:
  case OP_LOG2: case OP_TANH: case OP_SQRT: case OP_RECIP: case OP_ABS: case OP_FLOOR:
  case OP_CAST: case OP_SELECT: case OP_MASK:
    return true;
  default:
    return false;
  }
}

/* v, an integer or boolean value that depends on x, is used as a number. */
static Deriv refuse_integer(Diff *D, const Value *v) {
  refuse(D, integer_source(D, v),
         "turns the score into an integer or a boolean that is then used as a number: no "
         "derivative flows through integer math");
  return ZERO;
}

/* The derivative of v, which depends on x and is not x. */
static Deriv rule(Diff *D, Value *v) {
  Op *op = v->def;
  ElemType e = v->type.elem;
  if (!type_is_float(v->type))
    return refuse_integer(D, v);
  if (!has_rule(op->kind)) {
    refuse(D, op, no_rule_reason(op->kind));
    return ZERO;
  }
  switch (op->kind) {
  case OP_SELECT: {
    Deriv da = deriv(D, op->operands[1]);
    Deriv db = deriv(D, op->operands[2]);
    return choose(D, op->operands[0], da, db, e);
  }
  case OP_MASK: {
    Deriv ds = deriv(D, op->operands[0]);
    return choose(D, op->operands[1], ds, ZERO, e);
  }
  case OP_CAST:
    if (!type_is_float(op->operands[0]->type))
      return refuse_integer(D, op->operands[0]);
    return rule_unary(D, op, v, e);
  default:
    /* the verifier saw to the operand counts */
    return op->noperands == 1 ? rule_unary(D, op, v, e) : rule_binary(D, op, v, e);
  }
}

static Deriv deriv(Diff *D, Value *v) {
  if (D->failed || !depends(D, v))
    return ZERO;
  if (v == D->x)
    return ONE;
  if (D->known[v->id])
    return D->d[v->id];
  if (++D->depth > MAX_DEPTH) {
    refuse(D, v->def, TOO_DEEP);
    return ZERO;
  }
  Deriv r = rule(D, v);
  D->depth--;
  D->known[v->id] = true;
  D->d[v->id] = r;
  return r;
}

/* ---------------------------------------------------------------- the pass */

/* d as a value of type t (the grad's type): a constant tile or scalar when
 * d is constant; broadcast (1 * d) when d's value is smaller than t. */
static Value *as_type(Diff *D, Deriv d, Type t) {
  if (!d.v)
    return t.kind == TYPE_TILE ? build_full(&D->b, t, factor(d)) : cst(D, t.elem, factor(d));
  Value *r = materialize(D, d, t.elem);
  if (!type_eq(r->type, t))
    r = build_binary(&D->b, OP_MUL, build_full(&D->b, t, 1), r);
  return r;
}

/* Is v's op one of those between `mark` (exclusive; NULL: the block's
 * start) and the grad op g, which this expansion added? */
static bool added_here(const Value *v, const Op *mark, const Op *g) {
  for (const Op *op = mark ? mark->next : g->parent->first; op && op != g; op = op->next)
    if (v->def == op)
      return true;
  return false;
}

/* Is y zero wherever cond is false: P = exp(mask(z, cond) - l), or P o w
 * (the backward's dZ, docs/backward.md), 0 where masked for finite l and w? */
static bool zero_where_masked(const Value *y, const Value *cond, int depth) {
  const Op *d = y->def;
  if (!d || depth > 2)
    return false;
  if (d->kind == OP_MUL)
    return zero_where_masked(d->operands[0], cond, depth + 1) ||
           zero_where_masked(d->operands[1], cond, depth + 1);
  const Op *sub = d->kind == OP_EXP ? d->operands[0]->def : NULL;
  const Op *mask = sub && sub->kind == OP_SUB ? sub->operands[0]->def : NULL;
  return mask && mask->kind == OP_MASK && mask->operands[1] == cond;
}

/* Is v finite wherever its operands are (every s is): a constant, a tanh
 * (in [-1, 1]), or sums, differences, products, negations, casts, selects,
 * min / max of such, a quotient by a nonzero constant? (Softcap's score'
 * 1 - t^2; exp, log, division by a value could overflow or divide by 0.) */
static bool bounded(const Value *v, int depth) {
  double c;
  if (value_const(v, &c))
    return isfinite(c);
  const Op *d = v->def;
  if (!d || depth > 16)
    return false;
  switch (d->kind) {
  case OP_TANH: return true;
  case OP_NEG: case OP_ABS: case OP_CAST: return bounded(d->operands[0], depth + 1);
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_MIN: case OP_MAX:
    return bounded(d->operands[0], depth + 1) && bounded(d->operands[1], depth + 1);
  case OP_DIV: return bounded(d->operands[0], depth + 1) && value_const(d->operands[1], &c) && c != 0;
  case OP_SELECT: return bounded(d->operands[1], depth + 1) && bounded(d->operands[2], depth + 1);
  default: return false;
  }
}

/* A derivative r finite everywhere (a constant c: ALiBi, T5, a full bias,
 * s + a term without s; or bounded: softcap's 1 - t^2): the backward's
 * `select %cond, X o r, 0` (score' may be anything where masked) goes
 * where X is 0 where masked already (dZ = P o (dP - D), or P: P is
 * exp(-inf - l) there), and X o r folds to X where r is the constant 1: the
 * select's condition tile then need not live across dP's matmul
 * (registers beside dK, dV: perf-log P130). */
static void fold_finite_uses(Value *r, bool one) {
  for (int i = r->nuses - 1; i >= 0; i--) {
    Op *u = i < r->nuses ? r->uses[i].user : NULL;
    if (!u || u->kind != OP_MUL || u->nresults != 1)
      continue;
    Value *x = u->operands[0] == r ? u->operands[1] : u->operands[0], *y = u->results[0];
    for (int j = y->nuses - 1; j >= 0; j--) {
      Op *sel = j < y->nuses ? y->uses[j].user : NULL;
      double zero;
      if (sel && sel->kind == OP_SELECT && sel->operands[1] == y &&
          value_const(sel->operands[2], &zero) && zero == 0 && type_eq(sel->results[0]->type, y->type) &&
          zero_where_masked(x, sel->operands[0], 0)) {
        value_replace_all_uses(sel->results[0], y);
        op_erase(sel);
      }
    }
    if (one && type_eq(x->type, y->type)) {
      value_replace_all_uses(y, x);
      op_erase(u);
    }
  }
}

/* Where a bounded score's select is dropped too. A K/V-outer backward
 * kernel (kv, dv: dK and dV in registers): softcap's bwd_kv spills 320 -> 12
 * bytes at d128, 240 -> 204 at d256. Every kernel up to head dim 128: the
 * Q-outer and atomic kernels spill less without it there too (atomic d128
 * full 260 -> 32 bytes, bwd_q 4 -> 0; fwd+bwd -5%, P133), but at d256 ptxas
 * spilled more in them (bwd_q 0 -> 32, the atomic kernel 116 -> 276, P132). */
static bool kv_outer(const Func *f) {
  const char *role = attr_str(&f->attrs, "role", "");
  return strcmp(role, "kv") == 0 || strcmp(role, "dv") == 0;
}

static bool narrow(const Func *f) {
  long d = attr_int(&f->attrs, "head_dim", 0), dv = attr_int(&f->attrs, "v_head_dim", d);
  return d <= 128 && dv <= 128;
}

static int expand(Module *m, Func *f, Op *g, FILE *diag) {
  int n = number_values(f);
  Diff D = {.b = builder_before(m, g), .f = f, .grad = g, .x = g->operands[1], .diag = diag};
  D.dep = calloc((size_t)n + 1, 1);
  D.known = calloc((size_t)n + 1, sizeof *D.known);
  D.d = calloc((size_t)n + 1, sizeof *D.d);
  if (!D.dep || !D.known || !D.d) {
    fprintf(stderr, "flashc: out of memory\n");
    abort();
  }
  Op *mark = g->prev;
  Deriv d = deriv(&D, g->operands[0]);
  if (!D.failed) {
    Value *res = g->results[0];
    Value *r = as_type(&D, d, res->type);
    if (!r->name && added_here(r, mark, g))
      r->name = res->name;
    value_replace_all_uses(res, r);
    erase_unused_added(mark, g);
    op_erase(g);
    if (!d.v ? isfinite(factor(d)) : bounded(r, 0) && (kv_outer(f) || narrow(f)))
      fold_finite_uses(r, !d.v && factor(d) == 1);
  }
  free(D.dep);
  free(D.known);
  free(D.d);
  return D.failed;
}

int pass_differentiate(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  /* In program order: a grad of a value computed from another grad's
   * result sees that one already expanded (defs dominate uses). */
  OpList grads = collect_ops(f, OP_GRAD);
  int rc = 0;
  for (int i = 0; i < grads.n && rc == 0; i++)
    rc = expand(m, f, grads.v[i], diag);
  oplist_free(&grads);
  return rc;
}
