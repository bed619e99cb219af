/* sema_expr.c - sema's expressions (sema_internal.h): the resolved trees
 * (copy, size, depth, constant evaluation), the names an expression may
 * use (variables, spec constants, builtins, lets, with suggestions), and
 * resolving an AST expression into an Expr in a scope. sema.c uses them
 * for the fields, the lets and the mask / score definitions. */
#include "frontend/sema_internal.h"

/* ---- expression trees ---- */

static Expr *new_expr(Sema *S, Scope *sc, ExprKind kind, SrcLoc loc) {
  Expr *e = xcalloc(1, sizeof(Expr));
  e->kind = kind;
  e->loc = sloc(S, loc);
  S->total_nodes++;
  if (sc)
    sc->nodes++;
  return e;
}

void sema_free_expr(Expr *e) {
  if (!e)
    return;
  sema_free_expr(e->a);
  sema_free_expr(e->b);
  sema_free_expr(e->c);
  sema_free_expr(e->d);
  free(e);
}

static Expr *copy_expr(Sema *S, Scope *sc, const Expr *e) {
  if (!e)
    return NULL;
  Expr *c = new_expr(S, sc, e->kind, e->loc);
  *c = *e;
  c->a = copy_expr(S, sc, e->a);
  c->b = copy_expr(S, sc, e->b);
  c->c = copy_expr(S, sc, e->c);
  c->d = copy_expr(S, sc, e->d);
  return c;
}

int sema_expr_size(const Expr *e) {
  return e ? 1 + sema_expr_size(e->a) + sema_expr_size(e->b) + sema_expr_size(e->c) +
                 sema_expr_size(e->d)
           : 0;
}

int sema_expr_depth(const Expr *e) {
  if (!e)
    return 0;
  int a = sema_expr_depth(e->a), b = sema_expr_depth(e->b), c = sema_expr_depth(e->c);
  int d = sema_expr_depth(e->d);
  int m = a > b ? a : b;
  m = m > c ? m : c;
  return 1 + (m > d ? m : d);
}

bool sema_is_bool(const Expr *e) {
  switch (e->kind) {
  case EXPR_NOT: case EXPR_LT: case EXPR_LE: case EXPR_GT: case EXPR_GE:
  case EXPR_EQ: case EXPR_NE: case EXPR_AND: case EXPR_OR:
    return true;
  default:
    return false;
  }
}

/* The first variable an expression reads, or NULL: constants have none. */
static const Expr *find_var(const Expr *e) {
  if (!e)
    return NULL;
  if (e->kind == EXPR_VAR)
    return e;
  const Expr *v = find_var(e->a);
  if (!v)
    v = find_var(e->b);
  if (!v)
    v = find_var(e->c);
  if (!v)
    v = find_var(e->d);
  return v;
}

/* Evaluates a constant expression (no variables) in double precision.
 * Booleans are 1 and 0. */
double sema_eval(const Expr *e) {
  switch (e->kind) {
  case EXPR_NUM: return e->num;
  case EXPR_VAR: return NAN;
  case EXPR_NEG: return -sema_eval(e->a);
  case EXPR_NOT: return !sema_eval(e->a);
  case EXPR_ADD: return sema_eval(e->a) + sema_eval(e->b);
  case EXPR_SUB: return sema_eval(e->a) - sema_eval(e->b);
  case EXPR_MUL: return sema_eval(e->a) * sema_eval(e->b);
  case EXPR_DIV: return sema_eval(e->a) / sema_eval(e->b);
  case EXPR_MOD: return fmod(sema_eval(e->a), sema_eval(e->b));
  case EXPR_LT: return sema_eval(e->a) < sema_eval(e->b);
  case EXPR_LE: return sema_eval(e->a) <= sema_eval(e->b);
  case EXPR_GT: return sema_eval(e->a) > sema_eval(e->b);
  case EXPR_GE: return sema_eval(e->a) >= sema_eval(e->b);
  case EXPR_EQ: return sema_eval(e->a) == sema_eval(e->b);
  case EXPR_NE: return sema_eval(e->a) != sema_eval(e->b);
  case EXPR_AND: return sema_eval(e->a) && sema_eval(e->b);
  case EXPR_OR: return sema_eval(e->a) || sema_eval(e->b);
  case EXPR_MIN: return fmin(sema_eval(e->a), sema_eval(e->b));
  case EXPR_MAX: return fmax(sema_eval(e->a), sema_eval(e->b));
  case EXPR_SELECT: return sema_eval(e->a) ? sema_eval(e->b) : sema_eval(e->c);
  case EXPR_TANH: return tanh(sema_eval(e->a));
  case EXPR_EXP: return exp(sema_eval(e->a));
  case EXPR_EXP2: return exp2(sema_eval(e->a));
  case EXPR_LOG: return log(sema_eval(e->a));
  case EXPR_LOG2: return log2(sema_eval(e->a));
  case EXPR_SQRT: return sqrt(sema_eval(e->a));
  case EXPR_ABS: return fabs(sema_eval(e->a));
  case EXPR_FLOOR: return floor(sema_eval(e->a));
  case EXPR_INPUT: return NAN; /* known at run time only */
  }
  return NAN;
}

/* ---- names ---- */

static const char *const var_names[] = {"s", "b", "h", "q", "k",
                                        "seqlen_q", "seqlen_k"};
static const char *const var_meaning[] = {
    "the score", "the batch index", "the query head", "the query index",
    "the key index", "the query length", "the key length"};

int sema_var_index(const char *name) {
  for (int i = 0; i < 7; i++)
    if (strcmp(name, var_names[i]) == 0)
      return i;
  return -1;
}

const char *const sema_constant_names[] = {"heads", "kv_heads", "head_dim",
                                             "v_head_dim", NULL};

static double constant_value(const KernelSpec *k, int i) {
  switch (i) {
  case 0: return k->heads;
  case 1: return k->kv_heads;
  case 2: return k->head_dim;
  default: return k->v_head_dim;
  }
}

int sema_name_index(const char *name, const char *const *names) {
  for (int i = 0; names[i]; i++)
    if (strcmp(name, names[i]) == 0)
      return i;
  return -1;
}

/* Builtin functions: name, kind, number of arguments. */
typedef struct Builtin {
  const char *name;
  ExprKind kind;
  int nargs;
} Builtin;

static const Builtin builtins[] = {
    {"tanh", EXPR_TANH, 1}, {"exp", EXPR_EXP, 1},     {"exp2", EXPR_EXP2, 1},
    {"log", EXPR_LOG, 1},   {"log2", EXPR_LOG2, 1},   {"sqrt", EXPR_SQRT, 1},
    {"abs", EXPR_ABS, 1},   {"floor", EXPR_FLOOR, 1}, {"min", EXPR_MIN, 2},
    {"max", EXPR_MAX, 2},   {"select", EXPR_SELECT, 3},
};
#define NBUILTINS (int)(sizeof builtins / sizeof builtins[0])

static const char *const builtin_names[] = {
    "tanh", "exp", "exp2", "log", "log2", "sqrt", "abs", "floor",
    "min", "max", "select", NULL};

Let *sema_find_let(Let *l, const char *name) {
  for (; l; l = l->next)
    if (strcmp(l->name, name) == 0)
      return l;
  return NULL;
}

/* The names an identifier could have meant, for "did you mean". */
static const char *suggest_name(Scope *sc, const char *name) {
  const char *cands[SUGGEST_LETS + SUGGEST_FIXED];
  int n = 0;
  if (sc->fn)
    for (const AstParam *p = sc->fn->params; p && n < SUGGEST_PARAMS; p = p->next)
      cands[n++] = p->name;
  if (sc->ctx == CTX_LET)
    for (int i = 1; i < 5; i++)
      cands[n++] = var_names[i];
  for (Let *l = sc->lets; l && n < SUGGEST_LETS; l = l->next)
    cands[n++] = l->name;
  for (int i = 0; sema_constant_names[i]; i++)
    cands[n++] = sema_constant_names[i];
  if (!ctx_uniform(sc->ctx)) {
    cands[n++] = "seqlen_q";
    cands[n++] = "seqlen_k";
  }
  cands[n] = NULL;
  return diag_closest(name, cands);
}

/* ---- resolving expressions ---- */

/* Where an expression starts: operators carry their own location, but a
 * message about a whole value points at its first token. */
SrcLoc sema_start(const AstExpr *e) {
  SrcLoc l = e->loc;
  while ((e->kind == AE_BINARY || e->kind == AE_COND) && e->a) {
    e = e->a;
    if (e->loc.line < l.line || (e->loc.line == l.line && e->loc.col < l.col))
      l = e->loc;
  }
  return l;
}

Expr *sema_resolve(Sema *S, Scope *sc, const AstExpr *e, int depth);

Expr *sema_mk_num(Sema *S, Scope *sc, SrcLoc loc, double v) {
  Expr *e = new_expr(S, sc, EXPR_NUM, loc);
  e->num = v;
  return e;
}

Expr *sema_mk_var(Sema *S, Scope *sc, SrcLoc loc, ExprVar v) {
  Expr *e = new_expr(S, sc, EXPR_VAR, loc);
  e->var = v;
  return e;
}

Expr *sema_mk(Sema *S, Scope *sc, ExprKind kind, SrcLoc loc, Expr *a,
                Expr *b, Expr *c) {
  Expr *e = new_expr(S, sc, kind, loc);
  e->a = a;
  e->b = b;
  e->c = c;
  return e;
}

/* Replaces a let name by a copy of its value, within the size caps. */
static Expr *use_let(Sema *S, Scope *sc, const AstExpr *e, Let *l, int depth) {
  if (!l->value)
    return NULL; /* its definition was already reported */
  if (ctx_uniform(sc->ctx) && find_var(l->value)) {
    const Expr *v = find_var(l->value);
    diag_error(&S->diag, e->loc,
               "'%s' is not a constant: it depends on %s '%s'; %s must be known "
               "at %s",
               l->name, var_meaning[v->var], var_names[v->var], sc->what,
               sc->ctx == CTX_LAUNCH ? "launch" : "compile time");
    return NULL;
  }
  if (sc->ctx == CTX_CONST && sema_find_input(l->value)) {
    diag_error(&S->diag, e->loc,
               "'%s' is not a constant: it reads the run-time input '%s'; %s must be known "
               "at compile time",
               l->name, sema_find_input(l->value)->name, sc->what);
    return NULL;
  }
  if (sc->nodes + l->size > MAX_EXPR_NODES ||
      depth + l->depth > MAX_RESOLVED_DEPTH ||
      S->total_nodes + l->size > MAX_TOTAL_NODES) {
    if (!sc->too_big)
      diag_error(&S->diag, e->loc,
                 "%s is too large once '%s' is substituted (limits: %d nodes, "
                 "depth %d)",
                 sc->what, l->name, MAX_EXPR_NODES, MAX_RESOLVED_DEPTH);
    sc->too_big = true;
    return NULL;
  }
  return copy_expr(S, sc, l->value);
}

/* A let defined further down the block, if any: for "used before". */
static const AstStmt *later_let(Scope *sc, const char *name) {
  for (const AstStmt *s = sc->block; s; s = s->next)
    if (s->kind == ST_LET && strcmp(s->name, name) == 0)
      return s;
  return NULL;
}

/* ident: a parameter, a let, a spec constant, seqlen_q / seqlen_k, or in a
 * let one of the fixed names b, h, q, k. */
static Expr *resolve_ident(Sema *S, Scope *sc, const AstExpr *e, int depth) {
  const char *name = e->text;
  if (sc->fn) {
    int i = 0;
    for (const AstParam *p = sc->fn->params; p; p = p->next, i++)
      if (strcmp(p->name, name) == 0)
        return sema_mk_var(S, sc, e->loc, (ExprVar)(sc->ctx == CTX_MASK ? i + 1 : i));
  }
  Let *l = sema_find_let(sc->lets, name);
  if (l)
    return use_let(S, sc, e, l, depth);
  int ci = sema_name_index(name, sema_constant_names);
  if (ci >= 0)
    return sema_mk_num(S, sc, e->loc, constant_value(sc->k, ci));
  int vi = sema_var_index(name);
  if (vi >= 0 && ctx_uniform(sc->ctx)) {
    diag_error(&S->diag, e->loc, "'%s' (%s) is not a constant; %s must be known at %s", name,
               var_meaning[vi], sc->what, sc->ctx == CTX_LAUNCH ? "launch" : "compile time");
    if (sc->ctx == CTX_LAUNCH)
      diag_note(&S->diag, NOLOC, "%s may use constants and scalar inputs", sc->what);
    return NULL;
  }
  if (vi >= VAR_SEQLEN_Q || (vi >= VAR_B && sc->ctx == CTX_LET))
    return sema_mk_var(S, sc, e->loc, (ExprVar)vi);
  if (vi == VAR_S && sc->ctx == CTX_MASK) {
    diag_error(&S->diag, e->loc, "the score 's' cannot be used in a mask");
    diag_note(&S->diag, NOLOC,
              "a mask sees only b, h, q, k; change the score in score(s, b, h, q, k)");
    return NULL;
  }
  if (vi == VAR_S && sc->ctx == CTX_LET) {
    diag_error(&S->diag, e->loc, "the score 's' cannot be used in a let");
    diag_note(&S->diag, NOLOC, "'s' exists only inside score(s, b, h, q, k) = ...");
    return NULL;
  }
  bool is_input;
  Expr *in = sema_resolve_input_name(S, sc, e, &is_input);
  if (is_input)
    return in;
  const AstStmt *later = later_let(sc, name);
  if (later) {
    diag_error(&S->diag, e->loc, "'%s' is used before its definition", name);
    diag_note(&S->diag, later->loc, "'%s' is defined here", name);
    return NULL;
  }
  diag_error(&S->diag, e->loc, "unknown identifier '%s'", name);
  const char *best = suggest_name(sc, name);
  if (best)
    diag_note(&S->diag, NOLOC, "did you mean '%s'?", best);
  else if (vi >= 0 && sc->fn)
    diag_note(&S->diag, NOLOC,
              "parameters are positional: to use %s, name a parameter of %s(...) '%s'",
              var_meaning[vi], sc->fn->name, name);
  return NULL;
}

/* call: IDENT '(' args ')' with a builtin name and its number of arguments */
static Expr *resolve_call(Sema *S, Scope *sc, const AstExpr *e, int depth) {
  const Builtin *fn = NULL;
  for (int i = 0; i < NBUILTINS; i++)
    if (strcmp(builtins[i].name, e->text) == 0)
      fn = &builtins[i];
  if (!fn) {
    if (strcmp(e->text, "window") == 0) {
      diag_error(&S->diag, e->loc, "window(...) is not a function");
      diag_note(&S->diag, NOLOC,
                "it is a mask form: write `mask = window(L);` or `mask = window(L, R);`");
      return NULL;
    }
    diag_error(&S->diag, e->loc, "unknown function '%s'", e->text);
    const char *best = diag_closest(e->text, builtin_names);
    if (best)
      diag_note(&S->diag, NOLOC, "did you mean '%s'?", best);
    return NULL;
  }
  if (e->nargs != fn->nargs) {
    diag_error(&S->diag, e->loc, "%s takes %d argument%s; got %d", fn->name,
               fn->nargs, fn->nargs == 1 ? "" : "s", e->nargs);
    return NULL;
  }
  Expr *args[3] = {NULL, NULL, NULL};
  bool ok = true;
  int i = 0;
  for (const AstExpr *x = e->a; x; x = x->next, i++) {
    args[i] = sema_resolve(S, sc, x, depth + 1);
    if (!args[i]) {
      ok = false;
      continue;
    }
    bool want_bool = fn->kind == EXPR_SELECT && i == 0;
    if (sema_is_bool(args[i]) != want_bool) {
      if (want_bool)
        diag_error(&S->diag, x->loc,
                   "the condition of select must be a boolean; got a number");
      else
        diag_error(&S->diag, x->loc,
                   "argument %d of %s must be a number; got a boolean", i + 1,
                   fn->name);
      ok = false;
    }
  }
  if (!ok) {
    for (int j = 0; j < 3; j++)
      sema_free_expr(args[j]);
    return NULL;
  }
  return sema_mk(S, sc, fn->kind, e->loc, args[0], args[1], args[2]);
}

static ExprKind binary_kind(AstOp op) {
  switch (op) {
  case OP_ADD: return EXPR_ADD;
  case OP_SUB: return EXPR_SUB;
  case OP_MUL: return EXPR_MUL;
  case OP_DIV: return EXPR_DIV;
  case OP_MOD: return EXPR_MOD;
  case OP_LT: return EXPR_LT;
  case OP_LE: return EXPR_LE;
  case OP_GT: return EXPR_GT;
  case OP_GE: return EXPR_GE;
  case OP_EQ: return EXPR_EQ;
  case OP_NE: return EXPR_NE;
  case OP_AND: return EXPR_AND;
  default: return EXPR_OR;
  }
}

/* Checks one operand's type; reports "left operand of '+' is a boolean". */
static bool check_operand(Sema *S, const AstExpr *op, const char *side,
                          const Expr *x, bool want_bool) {
  if (sema_is_bool(x) == want_bool)
    return true;
  const char *opname = ast_op_str(op->op);
  if (want_bool) {
    diag_error(&S->diag, op->loc,
               "%s operand of '%s' is a number; '%s' needs booleans", side,
               opname, opname);
    diag_note(&S->diag, NOLOC, "compare it to get a boolean, e.g. 'x != 0'");
  } else {
    diag_error(&S->diag, op->loc,
               "%s operand of '%s' is a boolean; '%s' needs numbers", side,
               opname, opname);
    if (op->op == OP_EQ || op->op == OP_NE)
      diag_note(&S->diag, NOLOC, "combine conditions with && and ||");
  }
  return false;
}

/* expr OP expr: arithmetic and comparisons take numbers, && || booleans;
 * a constant zero divisor is an error. */
static Expr *resolve_binary(Sema *S, Scope *sc, const AstExpr *e, int depth) {
  Expr *x = sema_resolve(S, sc, e->a, depth + 1);
  Expr *y = sema_resolve(S, sc, e->b, depth + 1);
  if (!x || !y) {
    sema_free_expr(x);
    sema_free_expr(y);
    return NULL;
  }
  bool want_bool = e->op == OP_AND || e->op == OP_OR;
  bool ok = check_operand(S, e, "left", x, want_bool);
  ok = check_operand(S, e, "right", y, want_bool) && ok;
  if (ok && (e->op == OP_DIV || e->op == OP_MOD) && !find_var(y) &&
      sema_eval(y) == 0) {
    diag_error(&S->diag, e->b->loc, "division by zero");
    ok = false;
  }
  if (!ok) {
    sema_free_expr(x);
    sema_free_expr(y);
    return NULL;
  }
  return sema_mk(S, sc, binary_kind(e->op), e->loc, x, y, NULL);
}

/* ('-' | '!') expr */
static Expr *resolve_unary(Sema *S, Scope *sc, const AstExpr *e, int depth) {
  Expr *x = sema_resolve(S, sc, e->a, depth + 1);
  if (!x)
    return NULL;
  bool want_bool = e->op == OP_NOT;
  if (sema_is_bool(x) != want_bool) {
    if (want_bool)
      diag_error(&S->diag, e->loc, "operand of '!' is a number; '!' needs a boolean");
    else
      diag_error(&S->diag, e->loc, "operand of '-' is a boolean; '-' needs a number");
    sema_free_expr(x);
    return NULL;
  }
  return sema_mk(S, sc, want_bool ? EXPR_NOT : EXPR_NEG, e->loc, x, NULL, NULL);
}

/* expr '?' expr ':' expr, the same as select(c, a, b): a boolean condition
 * and numeric branches (a boolean choice is written with && and ||). */
static Expr *resolve_cond(Sema *S, Scope *sc, const AstExpr *e, int depth) {
  Expr *c = sema_resolve(S, sc, e->a, depth + 1);
  Expr *x = sema_resolve(S, sc, e->b, depth + 1);
  Expr *y = sema_resolve(S, sc, e->c, depth + 1);
  bool ok = c && x && y;
  if (c && !sema_is_bool(c)) {
    diag_error(&S->diag, sema_start(e->a),
               "the condition of '?:' must be a boolean; got a number");
    ok = false;
  }
  if ((x && sema_is_bool(x)) || (y && sema_is_bool(y))) {
    diag_error(&S->diag, e->loc, "the branches of '?:' must be numbers");
    diag_note(&S->diag, NOLOC, "choose between conditions with && and ||");
    ok = false;
  }
  if (!ok) {
    sema_free_expr(c);
    sema_free_expr(x);
    sema_free_expr(y);
    return NULL;
  }
  return sema_mk(S, sc, EXPR_SELECT, e->loc, c, x, y);
}

/* Resolves one AST expression; NULL when it had errors (all reported). */
Expr *sema_resolve(Sema *S, Scope *sc, const AstExpr *e, int depth) {
  if (sc->too_big)
    return NULL;
  switch (e->kind) {
  case AE_NUM: return sema_mk_num(S, sc, e->loc, e->num);
  case AE_IDENT: return resolve_ident(S, sc, e, depth);
  case AE_CALL: return resolve_call(S, sc, e, depth);
  case AE_INDEX: return sema_resolve_index(S, sc, e, depth);
  case AE_UNARY: return resolve_unary(S, sc, e, depth);
  case AE_BINARY: return resolve_binary(S, sc, e, depth);
  case AE_COND: return resolve_cond(S, sc, e, depth);
  case AE_ERROR: return NULL;
  }
  return NULL;
}
