/* sema.c - checks the AST and resolves it into KernelSpecs (spec.h).
 *
 * Per attention block (check_attention), in three phases:
 *   1. sort the statements: fields by name (duplicates, unknown names),
 *      mask(...) and score(...) definitions (sort_statements);
 *   2. read the constant fields, which expressions may use, and fill in
 *      defaults: the required ones (check_required), the shape (dtype, head
 *      dims, heads: shape_fields), the mode and the decode-only fields
 *      (split, cache, q_len_max: mode_fields);
 *   3. walk the statements in source order, resolving `let`s, mask, score,
 *      scale, unified_max and dropout: identifiers become variables, spec
 *      constants become numbers and let names are replaced by (a copy of)
 *      their value (resolve_statements).
 * The file as a whole (names, schedules attached to their kernel by name,
 * the SpecFile) is sema_file.c.
 *
 * Resolved expressions are plain trees (each let use is a deep copy), owned
 * by their KernelSpec and freed by fe_free_spec. Copies are capped in size so
 * that lets defined from each other cannot blow up exponentially.
 */
#include "frontend/sema_internal.h"

/* ---- fields ---- */

typedef enum Field {
  F_DTYPE, F_HEAD_DIM, F_V_HEAD_DIM, F_HEADS, F_KV_HEADS, F_MASK, F_SCALE,
  F_DROPOUT, F_MODE, F_GRAD, F_SPLIT, F_CACHE, F_UNIFIED_MAX, F_Q_LEN_MAX, F_DROPOUT_MASK,
  F_VARLEN, NFIELDS
} Field;

static const char *const field_names[] = {
    "dtype", "head_dim", "v_head_dim", "heads", "kv_heads", "mask",
    "scale", "dropout", "mode", "grad", "split", "cache", "unified_max", "q_len_max",
    "dropout_mask", "varlen", NULL};

/* An integer literal field, optionally negated (so `heads = -1` gets a range
 * error rather than a syntax one). */
static bool int_field(Sema *S, const AstStmt *s, int *out) {
  const AstExpr *v = s->value;
  int sign = 1;
  if (v->kind == AE_UNARY && v->op == OP_NEG && v->a->kind == AE_NUM) {
    sign = -1;
    v = v->a;
  }
  if (v->kind == AE_NUM && v->is_int) {
    *out = sign * (int)v->num;
    return true;
  }
  if (v->kind == AE_NUM)
    diag_error(&S->diag, v->loc, "%s must be an integer; got %s", s->name, v->text);
  else
    diag_error(&S->diag, sema_start(v), "%s must be an integer literal", s->name);
  return false;
}

/* An identifier field: one of `words` (NULL-terminated). Returns its index. */
static int word_field(Sema *S, const AstStmt *s, const char *const *words,
                      const char *what) {
  const AstExpr *v = s->value;
  if (v->kind == AE_IDENT) {
    int i = sema_name_index(v->text, words);
    if (i >= 0)
      return i;
    diag_error(&S->diag, v->loc, "unknown %s '%s'", s->name, v->text);
  } else {
    diag_error(&S->diag, sema_start(v), "%s must be %s", s->name, what);
  }
  const char *best = v->kind == AE_IDENT ? diag_closest(v->text, words) : NULL;
  if (best)
    diag_note(&S->diag, NOLOC, "did you mean '%s'?", best);
  else
    diag_note(&S->diag, NOLOC, "%s is %s", s->name, what);
  return -1;
}

static void check_head_dim(Sema *S, const AstStmt *s, int *out) {
  int v;
  if (!int_field(S, s, &v))
    return;
  if (v < 8 || v % 8 != 0 || v > 256) {
    diag_error(&S->diag, s->value->loc,
               "%s must be a multiple of 8 and at most 256; got %d", s->name, v);
    return;
  }
  *out = v;
}

static void check_count(Sema *S, const AstStmt *s, int *out) {
  int v;
  if (!int_field(S, s, &v))
    return;
  if (v < 1) {
    diag_error(&S->diag, s->value->loc, "%s must be at least 1; got %d", s->name, v);
    return;
  }
  *out = v;
}

/* Builds the mask expression of causal and window forms. q' is q moved to
 * the bottom-right diagonal: q + seqlen_k - seqlen_q (FlashAttention). */
static Expr *aligned_q(Sema *S, SrcLoc l) {
  Expr *q = sema_mk_var(S, NULL, l, VAR_Q);
  Expr *sum = sema_mk(S, NULL, EXPR_ADD, l, q, sema_mk_var(S, NULL, l, VAR_SEQLEN_K), NULL);
  return sema_mk(S, NULL, EXPR_SUB, l, sum, sema_mk_var(S, NULL, l, VAR_SEQLEN_Q), NULL);
}

/* causal: k <= q' */
static Expr *causal_mask(Sema *S, SrcLoc l) {
  return sema_mk(S, NULL, EXPR_LE, l, sema_mk_var(S, NULL, l, VAR_K), aligned_q(S, l), NULL);
}

/* window(L): causal && k > q' - L   -- the L latest keys, diagonal included */
static Expr *window1_mask(Sema *S, SrcLoc l, int left) {
  Expr *lo = sema_mk(S, NULL, EXPR_SUB, l, aligned_q(S, l), sema_mk_num(S, NULL, l, left), NULL);
  Expr *after = sema_mk(S, NULL, EXPR_GT, l, sema_mk_var(S, NULL, l, VAR_K), lo, NULL);
  return sema_mk(S, NULL, EXPR_AND, l, causal_mask(S, l), after, NULL);
}

/* window(L, R): k >= q' - L && k <= q' + R */
static Expr *window2_mask(Sema *S, SrcLoc l, int left, int right) {
  Expr *lo = sema_mk(S, NULL, EXPR_SUB, l, aligned_q(S, l), sema_mk_num(S, NULL, l, left), NULL);
  Expr *hi = sema_mk(S, NULL, EXPR_ADD, l, aligned_q(S, l), sema_mk_num(S, NULL, l, right), NULL);
  Expr *ge = sema_mk(S, NULL, EXPR_GE, l, sema_mk_var(S, NULL, l, VAR_K), lo, NULL);
  Expr *le = sema_mk(S, NULL, EXPR_LE, l, sema_mk_var(S, NULL, l, VAR_K), hi, NULL);
  return sema_mk(S, NULL, EXPR_AND, l, ge, le, NULL);
}

/* A window bound: an integer literal >= min. */
static bool window_arg(Sema *S, const AstExpr *a, int min, int *out) {
  bool neg = a->kind == AE_UNARY && a->op == OP_NEG && a->a->kind == AE_NUM;
  const AstExpr *lit = neg ? a->a : a;
  if (lit->kind != AE_NUM || !lit->is_int) {
    diag_error(&S->diag, sema_start(a), "window sizes must be integer literals");
    return false;
  }
  int v = neg ? -(int)lit->num : (int)lit->num;
  if (v < min) {
    diag_error(&S->diag, a->loc, "window size must be at least %d; got %d", min, v);
    return false;
  }
  *out = v;
  return true;
}

/* mask = none | causal | window(L) | window(L, R) */
static void mask_field(Sema *S, const AstStmt *s, KernelSpec *k) {
  const AstExpr *v = s->value;
  SrcLoc l = v->loc;
  if (v->kind == AE_IDENT && strcmp(v->text, "none") == 0) {
    k->mask_kind = MASK_NONE;
    return;
  }
  if (v->kind == AE_IDENT && strcmp(v->text, "causal") == 0) {
    k->mask_kind = MASK_CAUSAL;
    k->mask = causal_mask(S, l);
    return;
  }
  if (v->kind == AE_CALL && strcmp(v->text, "window") == 0) {
    if (v->nargs != 1 && v->nargs != 2) {
      diag_error(&S->diag, l, "window takes 1 or 2 arguments; got %d", v->nargs);
      return;
    }
    int left = 0, right = 0;
    if (v->nargs == 1) {
      if (!window_arg(S, v->a, 1, &left))
        return;
      k->mask_kind = MASK_WINDOW;
      k->window_left = left - 1; /* keys q'-(L-1) .. q' */
      k->window_right = 0;
      k->mask = window1_mask(S, l, left);
      return;
    }
    bool ok = window_arg(S, v->a, 0, &left);
    ok = window_arg(S, v->a->next, 0, &right) && ok;
    if (!ok)
      return;
    k->mask_kind = MASK_WINDOW;
    k->window_left = left;
    k->window_right = right;
    k->mask = window2_mask(S, l, left, right);
    return;
  }
  diag_error(&S->diag, sema_start(v), "mask must be none, causal, window(L) or window(L, R)");
  const char *words[] = {"none", "causal", "window", NULL};
  const char *best = v->kind == AE_IDENT ? diag_closest(v->text, words) : NULL;
  if (best)
    diag_note(&S->diag, NOLOC, "did you mean '%s'?", best);
  else
    diag_note(&S->diag, NOLOC,
              "for a custom mask write mask(b, h, q, k) = <boolean expression>;");
}

/* Fields that only mean something when decoding (split, cache,
 * unified_max): an error and a note otherwise. */
static bool decode_only(Sema *S, const AstStmt *s, const KernelSpec *k, const char *why) {
  if (k->mode == MODE_DECODE)
    return true;
  diag_error(&S->diag, s->loc, "%s is only valid with mode = decode", s->name);
  diag_note(&S->diag, NOLOC, "%s", why);
  return false;
}

/* cache = contiguous | paged(N), N a power of 2 in 16..256 */
static void cache_field(Sema *S, const AstStmt *s, KernelSpec *k) {
  const AstExpr *v = s->value;
  if (v->kind == AE_IDENT && strcmp(v->text, "contiguous") == 0)
    return;
  if (v->kind != AE_CALL || strcmp(v->text, "paged") != 0) {
    diag_error(&S->diag, sema_start(v), "cache must be contiguous or paged(PAGE_SIZE)");
    return;
  }
  const AstExpr *n = v->a;
  if (v->nargs != 1 || n->kind != AE_NUM || !n->is_int) {
    diag_error(&S->diag, v->nargs == 1 ? sema_start(n) : v->loc,
               "paged takes one integer: the page size in tokens");
    return;
  }
  int p = n->num >= 1 && n->num <= 1 << 20 ? (int)n->num : 0;
  if (p < 16 || p > 256 || (p & (p - 1))) {
    diag_error(&S->diag, n->loc, "page size must be a power of 2 from 16 to 256; got %s", n->text);
    return;
  }
  k->cache = CACHE_PAGED;
  k->page_size = p;
}

/* A field's numeric value resolved in ctx (CTX_CONST or CTX_LAUNCH); NULL
 * after errors (a boolean is one). */
static Expr *number_field(Sema *S, Scope *sc, const AstStmt *s, Ctx ctx) {
  sc->ctx = ctx;
  sc->what = s->name;
  sc->fn = NULL;
  sc->nodes = 0;
  sc->too_big = false;
  Expr *e = sema_resolve(S, sc, s->value, 0);
  if (e && sema_is_bool(e)) {
    diag_error(&S->diag, sema_start(s->value), "%s must be a number; got a boolean", s->name);
    sema_free_expr(e);
    return NULL;
  }
  return e;
}

/* unified_max = constant;  dropout = constant in [0, 1) */
static bool const_field(Sema *S, Scope *sc, const AstStmt *s, double *out) {
  Expr *e = number_field(S, sc, s, CTX_CONST);
  if (!e)
    return false;
  *out = sema_eval(e);
  sema_free_expr(e);
  return true;
}

/* mask(b, h, q, k) = bool;  score(s, b, h, q, k) = number */
static void func_def(Sema *S, Scope *sc, const AstStmt *s, KernelSpec *k) {
  bool is_mask = strcmp(s->name, "mask") == 0;
  int want = is_mask ? 4 : 5;
  if (s->nparams != want) {
    diag_error(&S->diag, s->loc, "%s takes %d parameters; got %d", s->name, want,
               s->nparams);
    diag_note(&S->diag, NOLOC,
              is_mask ? "write mask(b, h, q, k) = ...; the names are free, the "
                        "order is batch, head, query, key"
                      : "write score(s, b, h, q, k) = ...; the names are free, "
                        "the order is score, batch, head, query, key");
    return;
  }
  bool ok = true;
  for (const AstParam *p = s->params; p; p = p->next)
    for (const AstParam *r = s->params; r != p; r = r->next)
      if (strcmp(p->name, r->name) == 0) {
        diag_error(&S->diag, p->loc, "duplicate parameter '%s'", p->name);
        ok = false;
      }
  if (!ok)
    return;
  sc->ctx = is_mask ? CTX_MASK : CTX_SCORE;
  sc->what = s->name;
  sc->fn = s;
  sc->nodes = 0;
  sc->too_big = false;
  Expr *e = sema_resolve(S, sc, s->value, 0);
  sc->fn = NULL;
  if (!e)
    return;
  if (is_mask && !sema_is_bool(e)) {
    diag_error(&S->diag, sema_start(s->value),
               "a mask must be a boolean expression; got a number");
    diag_note(&S->diag, NOLOC, "a mask keeps key k for query q when it is true, e.g. q >= k");
    sema_free_expr(e);
    return;
  }
  if (!is_mask && sema_is_bool(e)) {
    diag_error(&S->diag, sema_start(s->value), "a score must be a number; got a boolean");
    diag_note(&S->diag, NOLOC, "to drop scores, use a mask");
    sema_free_expr(e);
    return;
  }
  if (is_mask) {
    k->mask_kind = MASK_EXPR;
    k->mask = e;
  } else {
    k->score = e;
  }
}

/* let NAME = expr;  -- b, h, q, k here are the fixed index names */
static void let_def(Sema *S, Scope *sc, const AstStmt *s) {
  if (sema_var_index(s->name) >= 0 || sema_name_index(s->name, sema_constant_names) >= 0) {
    diag_error(&S->diag, s->loc, "'%s' is a reserved name and cannot be a let name",
               s->name);
    return;
  }
  int in = sema_input_index(sc->k, s->name);
  if (in >= 0) {
    diag_error(&S->diag, s->loc, "'%s' is an input and cannot be a let name", s->name);
    diag_note(&S->diag, sc->k->inputs[in].loc, "the input is declared here");
    return;
  }
  Let *prev = sema_find_let(sc->lets, s->name);
  if (prev) {
    diag_error(&S->diag, s->loc, "redefinition of let '%s'", s->name);
    diag_note(&S->diag, prev->loc, "previous definition is here");
    return;
  }
  Let *l = xcalloc(1, sizeof(Let));
  l->name = s->name;
  l->loc = s->loc;
  sc->ctx = CTX_LET;
  sc->what = "let";
  sc->fn = NULL;
  sc->nodes = 0;
  sc->too_big = false;
  l->value = sema_resolve(S, sc, s->value, 0);
  if (l->value) {
    l->size = sema_expr_size(l->value);
    l->depth = sema_expr_depth(l->value);
  }
  l->next = sc->lets;
  sc->lets = l;
}

static void free_lets(Let *l) {
  while (l) {
    Let *next = l->next;
    sema_free_expr(l->value);
    free(l);
    l = next;
  }
}

/* Reports a field (or definition) given a second time. */
void sema_duplicate(Sema *S, const AstStmt *s, const AstStmt *prev, const char *what) {
  diag_error(&S->diag, s->loc, "%s given twice", what);
  diag_note(&S->diag, prev->loc, "first given here");
}

/* ---- attention blocks ---- */

/* The statements of one attention block, sorted by sort_statements. */
typedef struct Stmts {
  const AstStmt *field[NFIELDS];     /* each field's statement; NULL: absent */
  const AstStmt *mask_fn, *score_fn; /* mask(...) = ... and score(...) = ... */
} Stmts;

/* Phase 1: sorts the statements into fields (by name) and the mask and score
 * definitions; lets stay where they are (phase 3 walks them in order).
 * Checks: unknown field and definition names, `score = ...` written as a
 * field, a field or a definition given twice (a mask field and a mask
 * definition count as one). */
static void sort_statements(Sema *S, const AstItem *it, Stmts *st) {
  for (const AstStmt *s = it->stmts; s; s = s->next) {
    if (s->kind == ST_FIELD) {
      int f = sema_name_index(s->name, field_names);
      if (f < 0) {
        if (strcmp(s->name, "score") == 0) {
          diag_error(&S->diag, s->loc, "score is a function, not a field");
          diag_note(&S->diag, NOLOC, "write score(s, b, h, q, k) = <expression>;");
          continue;
        }
        diag_error(&S->diag, s->loc, "unknown field '%s'", s->name);
        const char *best = diag_closest(s->name, field_names);
        if (best)
          diag_note(&S->diag, NOLOC, "did you mean '%s'?", best);
        continue;
      }
      if (st->field[f]) {
        sema_duplicate(S, s, st->field[f], s->name);
        continue;
      }
      if (f == F_MASK && st->mask_fn) {
        sema_duplicate(S, s, st->mask_fn, "mask");
        continue;
      }
      st->field[f] = s;
    } else if (s->kind == ST_FUNC) {
      bool is_mask = strcmp(s->name, "mask") == 0;
      if (!is_mask && strcmp(s->name, "score") != 0) {
        diag_error(&S->diag, s->loc, "unknown definition '%s(...)'", s->name);
        diag_note(&S->diag, NOLOC,
                  "only mask(b, h, q, k) and score(s, b, h, q, k) can be defined");
        continue;
      }
      const AstStmt *prev =
          is_mask ? (st->mask_fn ? st->mask_fn : st->field[F_MASK]) : st->score_fn;
      if (prev) {
        sema_duplicate(S, s, prev, s->name);
        continue;
      }
      if (is_mask)
        st->mask_fn = s;
      else
        st->score_fn = s;
    }
  }
}

/* Phase 2a: the fields every attention needs (dtype, head_dim, heads) are
 * there; one error each, at the attention's name. */
static void check_required(Sema *S, const AstItem *it, const Stmts *st) {
  static const char *const required[] = {"dtype", "head_dim", "heads"};
  static const Field required_f[] = {F_DTYPE, F_HEAD_DIM, F_HEADS};
  for (int i = 0; i < 3; i++)
    if (!st->field[required_f[i]]) {
      diag_error(&S->diag, it->name_loc, "attention '%s' has no '%s' field",
                 it->name, required[i]);
      diag_note(&S->diag, NOLOC, "dtype, head_dim and heads are required");
    }
}

/* Phase 2b: the shape fields, constants the expressions may read. Checks:
 * dtype is fp16 or bf16; head_dim and v_head_dim (default head_dim) are
 * multiples of 8 up to 256; heads and kv_heads (default heads) are at least
 * 1 and kv_heads divides heads. */
static void shape_fields(Sema *S, const Stmts *st, KernelSpec *k) {
  static const char *const dtypes[] = {"fp16", "bf16", NULL};
  const AstStmt *const *field = st->field;
  if (field[F_DTYPE]) {
    int d = word_field(S, field[F_DTYPE], dtypes, "fp16 or bf16");
    k->dtype = d == 0 ? DTYPE_F16 : DTYPE_BF16;
  }
  if (field[F_HEAD_DIM])
    check_head_dim(S, field[F_HEAD_DIM], &k->head_dim);
  k->v_head_dim = k->head_dim;
  if (field[F_V_HEAD_DIM])
    check_head_dim(S, field[F_V_HEAD_DIM], &k->v_head_dim);
  if (field[F_HEADS])
    check_count(S, field[F_HEADS], &k->heads);
  k->kv_heads = k->heads;
  if (field[F_KV_HEADS]) {
    check_count(S, field[F_KV_HEADS], &k->kv_heads);
    if (k->heads > 0 && k->kv_heads > 0 && k->heads % k->kv_heads != 0) {
      diag_error(&S->diag, field[F_KV_HEADS]->value->loc,
                 "heads (%d) must be a multiple of kv_heads (%d)", k->heads,
                 k->kv_heads);
      diag_note(&S->diag, NOLOC,
                "each K/V head serves heads / kv_heads query heads");
    }
  }
}

/* split = auto | N: a count of KV splits of at least 1 (auto is 0). */
static void split_field(Sema *S, const AstStmt *s, KernelSpec *k) {
  if (s->value->kind == AE_IDENT && strcmp(s->value->text, "auto") == 0) {
    k->split = 0;
  } else if (s->value->kind == AE_IDENT) {
    diag_error(&S->diag, s->value->loc, "split must be auto or a count >= 1");
  } else {
    int v;
    if (int_field(S, s, &v)) {
      if (v < 1)
        diag_error(&S->diag, s->value->loc,
                   "split must be auto or at least 1; got %d", v);
      else
        k->split = v;
    }
  }
}

/* q_len_max = N: 1..SPEC_MAX_Q_LEN query tokens per sequence. */
static void q_len_max_field(Sema *S, const AstStmt *s, KernelSpec *k) {
  int v;
  if (int_field(S, s, &v)) {
    if (v < 1 || v > SPEC_MAX_Q_LEN)
      diag_error(&S->diag, s->value->loc,
                 "q_len_max must be from 1 to %d; got %d", SPEC_MAX_Q_LEN, v);
    else
      k->q_len_max = v;
  }
}

/* Phase 2c: the mode, grad, and the fields only a decode kernel has.
 * Checks: mode is forward or decode (`backward` says what replaced it);
 * grad and varlen are true or false and only on a forward kernel; split, cache,
 * q_len_max and unified_max appear only with mode = decode, and the first
 * three have valid values (unified_max is an expression: phase 3 reads it). */
static void mode_fields(Sema *S, const Stmts *st, KernelSpec *k) {
  static const char *const modes[] = {"forward", "decode", NULL};
  static const char *const bools[] = {"false", "true", NULL};
  const AstStmt *const *field = st->field;
  const AstStmt *mode = field[F_MODE];
  if (mode && mode->value->kind == AE_IDENT && strcmp(mode->value->text, "backward") == 0) {
    diag_error(&S->diag, mode->value->loc, "mode = backward is not a kernel of its own");
    diag_note(&S->diag, NOLOC,
              "write `grad = true;` in the forward kernel: its backward is compiled from the "
              "same spec (docs/backward.md)");
  } else if (mode) {
    int m = word_field(S, mode, modes, "forward or decode");
    k->mode = m < 0 ? MODE_FORWARD : (Mode)m;
  }
  if (field[F_GRAD]) {
    int g = word_field(S, field[F_GRAD], bools, "true or false");
    if (g == 1 && k->mode == MODE_DECODE) {
      diag_error(&S->diag, field[F_GRAD]->loc, "grad = true needs a forward kernel");
      diag_note(&S->diag, NOLOC, "a decode kernel has no backward; train with a forward kernel");
    } else {
      k->grad = g == 1;
    }
  }
  if (field[F_VARLEN]) {
    int v = word_field(S, field[F_VARLEN], bools, "true or false");
    if (v == 1 && k->mode == MODE_DECODE) {
      diag_error(&S->diag, field[F_VARLEN]->loc, "varlen = true needs a forward kernel");
      diag_note(&S->diag, NOLOC, "a decode kernel's sequences already have their own lengths "
                                 "(cache_seqlens, docs/decode.md)");
    } else {
      k->varlen = v == 1;
    }
  }
  if (field[F_SPLIT] && decode_only(S, field[F_SPLIT], k,
                                     "split divides the KV cache among thread blocks when decoding"))
    split_field(S, field[F_SPLIT], k);
  if (field[F_CACHE] &&
      decode_only(S, field[F_CACHE], k, "cache describes the KV cache a decode kernel reads"))
    cache_field(S, field[F_CACHE], k);
  if (field[F_Q_LEN_MAX] &&
      decode_only(S, field[F_Q_LEN_MAX], k,
                  "q_len_max bounds the query tokens per sequence of a decode launch"))
    q_len_max_field(S, field[F_Q_LEN_MAX], k);
  if (field[F_UNIFIED_MAX])
    decode_only(S, field[F_UNIFIED_MAX], k,
                "unified_max fixes the softmax maximum of a decode kernel (FlashDecoding++)");
}

/* scale = constant: positive and finite; or an expression of constants
 * and run-time inputs (known at launch: k->scale_expr). */
static void scale_field(Sema *S, Scope *sc, const AstStmt *s, KernelSpec *k) {
  Expr *e = number_field(S, sc, s, CTX_LAUNCH);
  if (!e)
    return;
  if (sema_find_input(e)) {
    k->scale_expr = e;
    return;
  }
  double v = sema_eval(e);
  sema_free_expr(e);
  if (!(v > 0) || !isfinite(v))
    diag_error(&S->diag, sema_start(s->value), "scale must be a positive constant; got %g", v);
  else
    k->scale = v;
}

/* unified_max = constant (decode): finite. */
static void unified_max_field(Sema *S, Scope *sc, const AstStmt *s, KernelSpec *k) {
  double v;
  if (const_field(S, sc, s, &v)) {
    if (!isfinite(v))
      diag_error(&S->diag, sema_start(s->value), "unified_max must be a finite constant");
    else {
      k->has_unified_max = true;
      k->unified_max = v;
    }
  }
}

/* dropout = constant: a probability in [0, 1). */
static void dropout_field(Sema *S, Scope *sc, const AstStmt *s, KernelSpec *k) {
  double v;
  if (const_field(S, sc, s, &v)) {
    if (!(v >= 0 && v < 1))
      diag_error(&S->diag, sema_start(s->value),
                 "dropout must be a probability in [0, 1); got %g", v);
    else if (v > 0 && k->mode == MODE_DECODE)
      diag_error(&S->diag, sema_start(s->value),
                 "dropout is for training; a decode kernel (mode = decode) cannot have it");
    else
      k->dropout = v;
  }
}

/* dropout_mask = exact | torch: which keep decision (docs/dropout.md);
 * only beside a dropout > 0. */
static void dropout_mask_field(Sema *S, const AstStmt *s, KernelSpec *k) {
  static const char *const words[] = {"exact", "torch", NULL};
  if (!s)
    return;
  int w = word_field(S, s, words, "exact or torch");
  if (w < 0)
    return;
  if (!(k->dropout > 0)) {
    diag_error(&S->diag, s->loc, "dropout_mask needs dropout > 0");
    return;
  }
  k->dropout_torch = w == 1;
}

/* Phase 3: the expressions, in source order, so that a let is visible after
 * its definition: lets, the mask and score definitions, the mask field and
 * the constant fields scale, unified_max (decode only) and dropout. Checks
 * what resolve checks (names, types, sizes) and each value's range. */
static void resolve_statements(Sema *S, const AstItem *it, const Stmts *st, KernelSpec *k) {
  const AstStmt *const *field = st->field;
  Scope sc = {.block = it->stmts, .k = k};
  for (const AstStmt *s = it->stmts; s; s = s->next) {
    if (S->diag.stopped)
      break;
    if (s->kind == ST_LET)
      let_def(S, &sc, s);
    else if (s == st->mask_fn || s == st->score_fn)
      func_def(S, &sc, s, k);
    else if (s == field[F_MASK])
      mask_field(S, s, k);
    else if (s == field[F_SCALE])
      scale_field(S, &sc, s, k);
    else if (s == field[F_UNIFIED_MAX] && k->mode == MODE_DECODE)
      unified_max_field(S, &sc, s, k);
    else if (s == field[F_DROPOUT])
      dropout_field(S, &sc, s, k);
  }
  dropout_mask_field(S, field[F_DROPOUT_MASK], k);
  if (k->varlen && k->dropout_torch) {
    diag_error(&S->diag, field[F_DROPOUT_MASK]->loc,
               "dropout_mask = torch is not supported with varlen = true");
    diag_note(&S->diag, NOLOC, "PyTorch's varlen kernels number their dropout counters their own "
                               "way; flashc's exact mask (dropout_mask = exact) is per sequence");
  }
  free_lets(sc.lets);
}

/* A KernelSpec and all it owns (fe_free_spec's ownership note). */
void sema_free_kernel(KernelSpec *k) {
  sema_free_expr(k->mask);
  sema_free_expr(k->score);
  sema_free_expr(k->scale_expr);
  for (int i = 0; i < k->ninputs; i++)
    free((char *)k->inputs[i].name);
  free((char *)k->name);
  free(k);
}

/* attention NAME { stmt* } -> KernelSpec, or NULL after errors */
KernelSpec *sema_check_attention(Sema *S, const AstItem *it) {
  int errors0 = S->diag.nerrors;
  Stmts st = {0};
  sort_statements(S, it, &st);

  KernelSpec *k = xcalloc(1, sizeof(KernelSpec));
  k->name = xstrdup(it->name);
  k->loc = sloc(S, it->loc);
  check_required(S, it, &st);
  shape_fields(S, &st, k);
  mode_fields(S, &st, k);
  k->scale = k->head_dim > 0 ? 1.0 / sqrt((double)k->head_dim) : 1.0;
  sema_declare_inputs(S, it, k);

  resolve_statements(S, it, &st, k);
  if (S->diag.nerrors != errors0) {
    sema_free_kernel(k);
    return NULL;
  }
  return k;
}
