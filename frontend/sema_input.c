/* sema_input.c - run-time inputs (`input NAME: TYPE[DIMS];`, docs/language.md):
 * their declarations, their uses in expressions (a scalar by its name, a
 * tensor's element by `name[i, j, ...]`), and the proof that every index
 * stays inside its dim.
 *
 * The proof is an interval analysis of the index expression over the
 * variables' ranges (b < batch, h < heads, q < seqlen_q, k < seqlen_k).
 * Bounds are kept against a constant and against each of the launch's
 * symbols (x <= seqlen_q - 1 is a bound against seqlen_q with offset -1), so
 * that `q` fits a seqlen_q dim, `min(k / 64, 31)` fits 32 and `q - k` fits
 * nothing without a clamp. A seqlen_k dim indexed by q (self-attention's
 * document ids, doc[b, q] and doc[b, k] with one tensor) is accepted with a
 * launch condition, seqlen_q <= seqlen_k, that the runtime checks.
 */
#include "frontend/sema_internal.h"

static const char *const type_names[] = {"i32", "f32", "f16", "bf16", NULL};

/* Names an input cannot take: the variables, the spec constants, the
 * builtins, mask, score and the dims' symbol batch. */
static bool reserved_name(const char *name) {
  static const char *const words[] = {"batch", "mask", "score", "tanh", "exp", "exp2", "log",
                                      "log2", "sqrt", "abs", "floor", "min", "max", "select",
                                      NULL};
  return sema_var_index(name) >= 0 || sema_name_index(name, sema_constant_names) >= 0 ||
         sema_name_index(name, words) >= 0;
}

int sema_input_index(const KernelSpec *k, const char *name) {
  for (int i = 0; i < k->ninputs; i++)
    if (strcmp(k->inputs[i].name, name) == 0)
      return i;
  return -1;
}

/* dim: batch | seqlen_q | seqlen_k | a constant expression >= 1 */
static bool input_dim(Sema *S, Scope *sc, const AstExpr *d, int *out) {
  static const char *const syms[] = {"batch", "seqlen_q", "seqlen_k", NULL};
  static const int sym_dims[] = {SPEC_DIM_BATCH, SPEC_DIM_SEQLEN_Q, SPEC_DIM_SEQLEN_K};
  if (d->kind == AE_IDENT) {
    int i = sema_name_index(d->text, syms);
    if (i >= 0) {
      *out = sym_dims[i];
      return true;
    }
  }
  Expr *e = sema_resolve(S, sc, d, 0);
  if (!e)
    return false;
  double v = sema_is_bool(e) ? NAN : sema_eval(e);
  sema_free_expr(e);
  if (!(v >= 1 && v <= 2147483647.0) || v != floor(v)) {
    diag_error(&S->diag, sema_start(d),
               "a dim must be batch, seqlen_q, seqlen_k or a positive integer constant");
    return false;
  }
  *out = (int)v;
  return true;
}

/* input NAME ':' TYPE ['[' dim (',' dim)* ']'] ';' */
static void declare_input(Sema *S, const AstStmt *s, KernelSpec *k) {
  if (reserved_name(s->name)) {
    diag_error(&S->diag, s->name_loc, "'%s' is a reserved name and cannot name an input",
               s->name);
    return;
  }
  int prev = sema_input_index(k, s->name);
  if (prev >= 0) {
    diag_error(&S->diag, s->name_loc, "second input named '%s'", s->name);
    diag_note(&S->diag, k->inputs[prev].loc, "the first is here");
    return;
  }
  if (k->ninputs == SPEC_MAX_INPUTS) {
    diag_error(&S->diag, s->loc, "too many inputs: a kernel takes at most %d", SPEC_MAX_INPUTS);
    return;
  }
  int t = sema_name_index(s->type_name, type_names);
  if (t < 0) {
    diag_error(&S->diag, s->type_loc, "unknown input type '%s'", s->type_name);
    diag_note(&S->diag, NOLOC, "an input is i32, f32, f16 or bf16 (scalars: i32 or f32)");
    return;
  }
  if (s->ndims == 0 && t != INPUT_I32 && t != INPUT_F32) {
    diag_error(&S->diag, s->type_loc, "a scalar input is i32 or f32; got %s", s->type_name);
    return;
  }
  if (s->ndims > 4) {
    diag_error(&S->diag, s->type_loc, "an input tensor has at most 4 dims; got %d", s->ndims);
    return;
  }
  SpecInput in = {.name = xstrdup(s->name), .loc = sloc(S, s->name_loc), .type = (InputType)t,
                  .rank = s->ndims};
  Scope sc = {.ctx = CTX_CONST, .what = "a dim", .k = k};
  bool ok = true;
  int i = 0;
  for (const AstExpr *d = s->value; d; d = d->next, i++)
    ok = input_dim(S, &sc, d, &in.dims[i]) && ok;
  for (int d = 0; ok && d < in.rank; d++)
    if (k->mode == MODE_DECODE && in.dims[d] == SPEC_DIM_SEQLEN_K) {
      diag_error(&S->diag, s->type_loc,
                 "a decode kernel's key count is per sequence: a dim cannot be seqlen_k");
      diag_note(&S->diag, NOLOC, "give the dim a constant extent and clamp the key index, e.g. "
                                 "min(k, N - 1)");
      ok = false;
    }
  for (int d = 0; ok && d < in.rank; d++)
    if (k->varlen && (in.dims[d] == SPEC_DIM_SEQLEN_Q || in.dims[d] == SPEC_DIM_SEQLEN_K)) {
      diag_error(&S->diag, s->type_loc,
                 "in a varlen spec each sequence has its own length: a dim cannot be %s",
                 in.dims[d] == SPEC_DIM_SEQLEN_Q ? "seqlen_q" : "seqlen_k");
      diag_note(&S->diag, NOLOC, "index inputs by batch, heads or a constant extent (clamp the "
                                 "position, e.g. min(q, N - 1))");
      ok = false;
    }
  if (!ok) {
    free((char *)in.name);
    return;
  }
  k->inputs[k->ninputs++] = in;
}

void sema_declare_inputs(Sema *S, const AstItem *it, KernelSpec *k) {
  for (const AstStmt *s = it->stmts; s; s = s->next)
    if (s->kind == ST_INPUT)
      declare_input(S, s, k);
}

/* ---- integer expressions ---- */

/* Does e have integer values (the tile IR's index type)? Positions, integer
 * inputs, integral literals, floor(x) of anything, and what +, -, *, %,
 * min, max, select, abs and booleans-as-numbers make of them; `/` (true
 * division), the score,
 * float inputs and the other math functions are real. (T5's log-spaced
 * bucket, min(16 + floor(log(n / 16) / log(8) * 16), 31), is an integer
 * computed in f32: the index takes its value.) */
bool sema_is_integer(const KernelSpec *k, const Expr *e) {
  switch (e->kind) {
  case EXPR_NUM: return e->num == floor(e->num) && fabs(e->num) < 9.0e15;
  case EXPR_VAR: return e->var != VAR_S;
  case EXPR_INPUT: return k->inputs[e->input].type == INPUT_I32;
  case EXPR_FLOOR: return true; /* of a real too: an integer, exact below 2^24 */
  case EXPR_NEG: case EXPR_ABS: return sema_is_integer(k, e->a);
  case EXPR_ADD: case EXPR_SUB: case EXPR_MUL: case EXPR_MOD: case EXPR_MIN: case EXPR_MAX:
    return sema_is_integer(k, e->a) && sema_is_integer(k, e->b);
  case EXPR_DIV: return false; /* true division: floor(q / 64) is an integer */
  case EXPR_SELECT: return sema_is_integer(k, e->b) && sema_is_integer(k, e->c);
  case EXPR_TANH: case EXPR_EXP: case EXPR_EXP2: case EXPR_LOG: case EXPR_LOG2:
  case EXPR_SQRT:
    return false;
  default: return sema_is_bool(e);
  }
}

const Expr *sema_find_input(const Expr *e) {
  if (!e)
    return NULL;
  if (e->kind == EXPR_INPUT)
    return e;
  const Expr *kids[4] = {e->a, e->b, e->c, e->d};
  for (int i = 0; i < 4; i++) {
    const Expr *x = sema_find_input(kids[i]);
    if (x)
      return x;
  }
  return NULL;
}

/* ---- index ranges ---- */

/* Bounds of an integer expression: lo[s] <= x and x <= hi[s] with, for s =
 * 0, constants and for s = 1..3 the symbol (batch, seqlen_q, seqlen_k) plus
 * the offset. An unknown bound is -inf / +inf. */
enum { SYM_CONST, SYM_BATCH, SYM_SEQLEN_Q, SYM_SEQLEN_K, NSYM };
typedef struct Range {
  double lo[NSYM], hi[NSYM];
} Range;

static Range unknown_range(void) {
  Range r;
  for (int s = 0; s < NSYM; s++)
    r.lo[s] = -INFINITY, r.hi[s] = INFINITY;
  return r;
}

static Range const_range(double lo, double hi) {
  Range r = unknown_range();
  r.lo[SYM_CONST] = lo;
  r.hi[SYM_CONST] = hi;
  return r;
}

/* 0 <= x <= sym + off */
static Range sym_range(int sym, double off) {
  Range r = const_range(0, INFINITY);
  r.hi[sym] = off;
  return r;
}

/* seqlen_q or seqlen_k itself: exactly the symbol (seqlen_k - 1 - k is at
 * least 0), and at least 1 where it is positive (min(max(x, 0), seqlen_k - 1)
 * is then inside [0, seqlen_k), as the clamp note says). */
static Range seqlen_range(int sym, bool positive) {
  Range r = const_range(positive ? 1 : 0, INFINITY);
  r.lo[sym] = r.hi[sym] = 0;
  return r;
}

static Range add_range(Range a, Range b, int sign) {
  Range r = unknown_range();
  const double *blo = sign > 0 ? b.lo : b.hi, *bhi = sign > 0 ? b.hi : b.lo;
  double bl0 = sign * blo[SYM_CONST], bh0 = sign * bhi[SYM_CONST];
  for (int s = 0; s < NSYM; s++) {
    r.lo[s] = a.lo[s] + bl0; /* a's bound against s plus b's constant one */
    r.hi[s] = a.hi[s] + bh0;
    if (s && sign > 0) {     /* b's bound against s plus a's constant one */
      r.lo[s] = fmax(r.lo[s], b.lo[s] + a.lo[SYM_CONST]);
      r.hi[s] = fmin(r.hi[s], b.hi[s] + a.hi[SYM_CONST]);
    }
    if (s && sign < 0) { /* (s + x) - (s + y): the symbol cancels */
      r.lo[SYM_CONST] = fmax(r.lo[SYM_CONST], a.lo[s] - b.hi[s]);
      r.hi[SYM_CONST] = fmin(r.hi[SYM_CONST], a.hi[s] - b.lo[s]);
    }
  }
  for (int s = 0; s < NSYM; s++) { /* inf - inf */
    if (isnan(r.lo[s])) r.lo[s] = -INFINITY;
    if (isnan(r.hi[s])) r.hi[s] = INFINITY;
  }
  return r;
}

static bool is_point(Range r, double *c) {
  *c = r.lo[SYM_CONST];
  return r.lo[SYM_CONST] == r.hi[SYM_CONST] && isfinite(*c);
}

/* Products and quotients keep the symbolic bounds only where they are
 * obviously safe: x * 1, and x / c (c >= 1, true division) of a
 * nonnegative x. */
static Range mul_range(Range a, Range b) {
  double c;
  if (is_point(b, &c) && c == 1)
    return a;
  if (is_point(a, &c) && c == 1)
    return b;
  double p[4] = {a.lo[0] * b.lo[0], a.lo[0] * b.hi[0], a.hi[0] * b.lo[0], a.hi[0] * b.hi[0]};
  double lo = INFINITY, hi = -INFINITY;
  for (int i = 0; i < 4; i++) {
    double v = isnan(p[i]) ? 0 : p[i]; /* 0 * inf: a zero factor */
    lo = fmin(lo, v), hi = fmax(hi, v);
  }
  return const_range(lo, hi);
}

static Range div_range(Range a, Range b) {
  double c;
  if (!is_point(b, &c) || c <= 0)
    return unknown_range();
  Range r = const_range(a.lo[0] / c, a.hi[0] / c);
  if (c >= 1 && a.lo[0] >= 0)
    for (int s = 1; s < NSYM; s++)
      r.hi[s] = a.hi[s]; /* 0 <= x / c <= x */
  return r;
}

static Range mod_range(Range a, Range b) {
  double c;
  if (!is_point(b, &c) || c <= 0)
    return unknown_range();
  /* % truncates (C's, fmod's): the sign of x; |x % c| < c */
  Range r = const_range(a.lo[0] >= 0 ? 0 : -(c - 1), a.hi[0] <= 0 ? 0 : c - 1);
  if (a.lo[0] >= 0)
    for (int s = 0; s < NSYM; s++)
      r.hi[s] = fmin(r.hi[s], a.hi[s]); /* x % c <= x */
  return r;
}

/* What range_of knows: the spec, and which symbols are at least 1 where
 * the index is evaluated (batch always; seqlen_q and seqlen_k where the
 * expression reads q, resp. k: it is then only evaluated at an existing
 * position, while a part without k may run before a K/V loop of no step). */
typedef struct RangeCtx {
  const KernelSpec *k;
  bool positive[NSYM];
} RangeCtx;

/* A symbol at least 1 bounds a value at most c by sym + c - 1:
 * max(min(k + 1, seqlen_k - 1), 0) keeps its bound against seqlen_k
 * through the 0. */
static Range sym_bounds(const RangeCtx *c, Range a) {
  for (int s = 1; s < NSYM; s++)
    if (c->positive[s])
      a.hi[s] = fmin(a.hi[s], a.hi[SYM_CONST] - 1);
  return a;
}

/* min and max: each operand's bound against the same symbol. */
static Range minmax_range(const RangeCtx *c, Range a, Range b, bool is_min) {
  Range r;
  a = sym_bounds(c, a);
  b = sym_bounds(c, b);
  for (int s = 0; s < NSYM; s++) {
    r.lo[s] = is_min ? fmin(a.lo[s], b.lo[s]) : fmax(a.lo[s], b.lo[s]);
    r.hi[s] = is_min ? fmin(a.hi[s], b.hi[s]) : fmax(a.hi[s], b.hi[s]);
  }
  return r;
}

static Range range_of(const RangeCtx *c, const Expr *e) {
  switch (e->kind) {
  case EXPR_NUM: return const_range(e->num, e->num);
  case EXPR_VAR:
    switch (e->var) {
    case VAR_B: return sym_range(SYM_BATCH, -1);
    case VAR_H: return const_range(0, c->k->heads - 1);
    case VAR_Q: return sym_range(SYM_SEQLEN_Q, -1);
    case VAR_K: return sym_range(SYM_SEQLEN_K, -1);
    case VAR_SEQLEN_Q: return seqlen_range(SYM_SEQLEN_Q, c->positive[SYM_SEQLEN_Q]);
    case VAR_SEQLEN_K: return seqlen_range(SYM_SEQLEN_K, c->positive[SYM_SEQLEN_K]);
    default: return unknown_range();
    }
  case EXPR_NEG: {
    Range a = range_of(c, e->a);
    return const_range(-a.hi[0], -a.lo[0]);
  }
  case EXPR_ADD: return add_range(range_of(c, e->a), range_of(c, e->b), 1);
  case EXPR_SUB: return add_range(range_of(c, e->a), range_of(c, e->b), -1);
  case EXPR_MUL: return mul_range(range_of(c, e->a), range_of(c, e->b));
  case EXPR_DIV: return div_range(range_of(c, e->a), range_of(c, e->b));
  case EXPR_MOD: return mod_range(range_of(c, e->a), range_of(c, e->b));
  case EXPR_MIN: return minmax_range(c, range_of(c, e->a), range_of(c, e->b), true);
  case EXPR_MAX: return minmax_range(c, range_of(c, e->a), range_of(c, e->b), false);
  case EXPR_SELECT: {
    Range a = range_of(c, e->b), b = range_of(c, e->c), r;
    for (int s = 0; s < NSYM; s++)
      r.lo[s] = fmin(a.lo[s], b.lo[s]), r.hi[s] = fmax(a.hi[s], b.hi[s]);
    return r;
  }
  case EXPR_FLOOR: { /* x - 1 < floor(x) <= x */
    Range r = range_of(c, e->a);
    r.lo[0] = floor(r.lo[0]);
    r.hi[0] = floor(r.hi[0]);
    for (int s = 1; s < NSYM; s++)
      r.lo[s] -= 1;
    return r;
  }
  case EXPR_ABS: {
    Range a = range_of(c, e->a);
    double m = fmax(fabs(a.lo[0]), fabs(a.hi[0]));
    return a.lo[0] >= 0 ? a : const_range(a.hi[0] <= 0 ? -a.hi[0] : 0, m);
  }
  default:
    return sema_is_bool(e) ? const_range(0, 1) : unknown_range();
  }
}

/* Does e read position variable v (VAR_Q, VAR_K)? */
static bool reads_var(const Expr *e, ExprVar v) {
  if (!e)
    return false;
  if (e->kind == EXPR_VAR)
    return e->var == v;
  return reads_var(e->a, v) || reads_var(e->b, v) || reads_var(e->c, v) || reads_var(e->d, v);
}

static void print_bound(char *buf, size_t n, const Range *r, bool hi) {
  static const char *const names[NSYM] = {"", "batch", "seqlen_q", "seqlen_k"};
  const double *v = hi ? r->hi : r->lo;
  if (isfinite(v[0])) {
    snprintf(buf, n, "%.0f", v[0]);
    return;
  }
  for (int s = 1; s < NSYM; s++)
    if (isfinite(v[s])) {
      snprintf(buf, n, "%s%+.0f", names[s], v[s]);
      return;
    }
  snprintf(buf, n, hi ? "+inf" : "-inf");
}

/* Proves index i of input `in` inside its dim; a seqlen dim reached by the
 * other sequence's positions sets the launch condition instead. */
static bool check_index(Sema *S, KernelSpec *k, const SpecInput *in, int i, const Expr *x,
                        SrcLoc loc) {
  RangeCtx c = {.k = k};
  c.positive[SYM_BATCH] = true;
  c.positive[SYM_SEQLEN_Q] = reads_var(x, VAR_Q);
  c.positive[SYM_SEQLEN_K] = reads_var(x, VAR_K);
  Range r = range_of(&c, x);
  int d = in->dims[i];
  bool lo_ok = r.lo[SYM_CONST] >= 0, hi_ok = false;
  if (d > 0)
    hi_ok = r.hi[SYM_CONST] <= d - 1;
  else if (d == SPEC_DIM_BATCH)
    hi_ok = r.hi[SYM_BATCH] <= -1;
  else {
    int own = d == SPEC_DIM_SEQLEN_Q ? SYM_SEQLEN_Q : SYM_SEQLEN_K;
    int other = own == SYM_SEQLEN_Q ? SYM_SEQLEN_K : SYM_SEQLEN_Q;
    hi_ok = r.hi[own] <= -1;
    if (!hi_ok && r.hi[other] <= -1 && k->mode != MODE_DECODE) {
      hi_ok = true;
      if (own == SYM_SEQLEN_K)
        k->require_q_le_k = true;
      else
        k->require_k_le_q = true;
    }
  }
  if (lo_ok && hi_ok)
    return true;
  char dim[32], lo[48], hi[48];
  if (d > 0)
    snprintf(dim, sizeof dim, "%d", d);
  else
    snprintf(dim, sizeof dim, "%s",
             d == SPEC_DIM_BATCH ? "batch" : d == SPEC_DIM_SEQLEN_Q ? "seqlen_q" : "seqlen_k");
  print_bound(lo, sizeof lo, &r, false);
  print_bound(hi, sizeof hi, &r, true);
  diag_error(&S->diag, loc, "index %d of '%s' may fall outside its dim [0, %s): it ranges over [%s, %s]",
             i + 1, in->name, dim, lo, hi);
  if (d > 0)
    diag_note(&S->diag, NOLOC, "clamp it, e.g. min(max(x, 0), %d)", d - 1);
  else if (d != SPEC_DIM_BATCH &&
           !c.positive[d == SPEC_DIM_SEQLEN_Q ? SYM_SEQLEN_Q : SYM_SEQLEN_K]) {
    const char *pos = d == SPEC_DIM_SEQLEN_Q ? "q" : "k";
    diag_note(&S->diag, NOLOC, "%s may be 0 where an index that does not read %s is evaluated; "
              "index it by %s (clamped, e.g. min(max(x, 0), %s - 1), with x reading %s)", dim,
              pos, pos, dim, pos);
  }
  else
    diag_note(&S->diag, NOLOC, "clamp it, e.g. min(max(x, 0), %s - 1)", dim);
  return false;
}

/* name '[' expr (',' expr)* ']': an element of a tensor input */
Expr *sema_resolve_index(Sema *S, Scope *sc, const AstExpr *e, int depth) {
  KernelSpec *k = (KernelSpec *)sc->k;
  int ii = sema_input_index(k, e->text);
  if (ii < 0) {
    diag_error(&S->diag, e->loc, "'%s' is not an input: only tensor inputs can be indexed",
               e->text);
    return NULL;
  }
  const SpecInput *in = &k->inputs[ii];
  if (sc->ctx == CTX_CONST) {
    diag_error(&S->diag, e->loc, "'%s' is a run-time input; %s must be known at compile time",
               in->name, sc->what);
    return NULL;
  }
  if (in->rank == 0) {
    diag_error(&S->diag, e->loc, "'%s' is a scalar input: use it without indices", in->name);
    return NULL;
  }
  if (e->nargs != in->rank) {
    diag_error(&S->diag, e->loc, "'%s' has %d dim%s; got %d ind%s", in->name, in->rank,
               in->rank == 1 ? "" : "s", e->nargs, e->nargs == 1 ? "ex" : "ices");
    return NULL;
  }
  Expr *idx[4] = {NULL, NULL, NULL, NULL};
  bool ok = true;
  int i = 0;
  for (const AstExpr *x = e->a; x; x = x->next, i++) {
    idx[i] = sema_resolve(S, sc, x, depth + 1);
    if (!idx[i]) {
      ok = false;
      continue;
    }
    if (!sema_is_integer(k, idx[i]) || sema_is_bool(idx[i])) {
      diag_error(&S->diag, sema_start(x),
                 "index %d of '%s' must be an integer (of b, h, q, k, i32 inputs and integer "
                 "literals)", i + 1, in->name);
      ok = false;
      continue;
    }
    ok = check_index(S, k, in, i, idx[i], sema_start(x)) && ok;
  }
  if (!ok) {
    for (int j = 0; j < 4; j++)
      sema_free_expr(idx[j]);
    return NULL;
  }
  Expr *r = sema_mk(S, sc, EXPR_INPUT, e->loc, idx[0], idx[1], idx[2]);
  r->d = idx[3];
  r->input = ii;
  r->name = in->name;
  return r;
}

/* A scalar input by its name; NULL and no message when `name` is no input. */
Expr *sema_resolve_input_name(Sema *S, Scope *sc, const AstExpr *e, bool *found) {
  int ii = sema_input_index(sc->k, e->text);
  *found = ii >= 0;
  if (ii < 0)
    return NULL;
  const SpecInput *in = &sc->k->inputs[ii];
  if (sc->ctx == CTX_CONST) {
    diag_error(&S->diag, e->loc, "'%s' is a run-time input; %s must be known at compile time",
               in->name, sc->what);
    return NULL;
  }
  if (in->rank > 0) {
    diag_error(&S->diag, e->loc, "'%s' is a tensor input: index it, %s[...] (%d ind%s)",
               in->name, in->name, in->rank, in->rank == 1 ? "ex" : "ices");
    return NULL;
  }
  Expr *r = sema_mk(S, sc, EXPR_INPUT, e->loc, NULL, NULL, NULL);
  r->input = ii;
  r->name = in->name;
  return r;
}
