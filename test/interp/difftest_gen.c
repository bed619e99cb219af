/* difftest_gen.c - difftest --generate: random KernelSpecs (masks of
 * affine comparisons of q and k, score modifiers of s, h, q, k) built as
 * Expr trees, as the frontend would produce them.
 */
#include "test/interp/difftest.h"


/* Expr nodes of generated specs come from one pool, freed per spec. */
typedef struct Pool {
  Expr **v;
  int n, cap;
} Pool;

static Pool g_pool;

static Expr *ex(ExprKind kind, Expr *a, Expr *b, Expr *c) {
  Expr *e = calloc(1, sizeof(Expr));
  if (!e)
    abort();
  if (g_pool.n == g_pool.cap) {
    g_pool.cap = g_pool.cap ? 2 * g_pool.cap : 64;
    g_pool.v = realloc(g_pool.v, sizeof(Expr *) * (size_t)g_pool.cap);
    if (!g_pool.v)
      abort();
  }
  g_pool.v[g_pool.n++] = e;
  e->kind = kind;
  e->a = a;
  e->b = b;
  e->c = c;
  e->loc = (SrcLoc){"<generated>", 1, 1};
  return e;
}

static Expr *num(double x) {
  Expr *e = ex(EXPR_NUM, NULL, NULL, NULL);
  e->num = x;
  return e;
}

static Expr *var(ExprVar v) {
  Expr *e = ex(EXPR_VAR, NULL, NULL, NULL);
  e->var = v;
  return e;
}

void pool_free(void) {
  for (int i = 0; i < g_pool.n; i++)
    free(g_pool.v[i]);
  g_pool.n = 0;
}

void pool_release(void) {
  pool_free();
  free(g_pool.v);
  g_pool.v = NULL;
  g_pool.cap = 0;
}

/* q + seqlen_k - seqlen_q: q on the bottom-right diagonal (as sema builds it). */
static Expr *aligned_q(void) {
  return ex(EXPR_SUB, ex(EXPR_ADD, var(VAR_Q), var(VAR_SEQLEN_K), NULL), var(VAR_SEQLEN_Q), NULL);
}

static ExprKind rand_cmp(uint64_t *r) {
  static const ExprKind k[] = {EXPR_LT, EXPR_LE, EXPR_GT, EXPR_GE, EXPR_EQ, EXPR_NE};
  return k[rng_int(r, 0, 5)];
}

/* An affine term in q or k: x, x + c, c - x, 2 * x, or the aligned q. */
static Expr *affine_term(uint64_t *r, ExprVar x) {
  switch (rng_int(r, 0, 4)) {
  case 0: return var(x);
  case 1: return ex(EXPR_ADD, var(x), num(rng_int(r, -20, 20)), NULL);
  case 2: return ex(EXPR_SUB, num(rng_int(r, 0, 60)), var(x), NULL);
  case 3: return ex(EXPR_MUL, num(rng_int(r, 1, 2)), var(x), NULL);
  default: return x == VAR_Q ? aligned_q() : ex(EXPR_SUB, var(VAR_SEQLEN_K), var(VAR_K), NULL);
  }
}

/* A comparison of q and k (occasionally of b or h: constant per tile). */
static Expr *mask_atom(uint64_t *r) {
  int pick = rng_int(r, 0, 9);
  if (pick == 0)
    return ex(EXPR_EQ, ex(EXPR_MOD, var(VAR_H), num(2), NULL), num(rng_int(r, 0, 1)), NULL);
  if (pick == 1)
    return ex(EXPR_LT, var(VAR_B), num(1), NULL);
  if (pick == 2) /* |q - k| < w */
    return ex(EXPR_LT, ex(EXPR_ABS, ex(EXPR_SUB, var(VAR_Q), var(VAR_K), NULL), NULL, NULL),
              num(rng_int(r, 1, 30)), NULL);
  Expr *a = affine_term(r, VAR_Q), *b = affine_term(r, VAR_K);
  return rng_int(r, 0, 1) ? ex(rand_cmp(r), a, b, NULL) : ex(rand_cmp(r), b, a, NULL);
}

static Expr *mask_tree(uint64_t *r, int depth) {
  if (depth == 0 || rng_int(r, 0, 2) == 0) {
    Expr *a = mask_atom(r);
    return rng_int(r, 0, 7) == 0 ? ex(EXPR_NOT, a, NULL, NULL) : a;
  }
  /* one rng draw per statement: C leaves the order of arguments open */
  ExprKind k = rng_int(r, 0, 1) ? EXPR_AND : EXPR_OR;
  Expr *a = mask_tree(r, depth - 1);
  Expr *b = mask_tree(r, depth - 1);
  return ex(k, a, b, NULL);
}

static void gen_mask(uint64_t *r, KernelSpec *k) {
  switch (rng_int(r, 0, 4)) {
  case 0:
    k->mask_kind = MASK_NONE;
    break;
  case 1:
    k->mask_kind = MASK_CAUSAL;
    k->mask = ex(EXPR_LE, var(VAR_K), aligned_q(), NULL);
    break;
  case 2: { /* window(L) */
    int L = rng_int(r, 1, 40);
    k->mask_kind = MASK_WINDOW;
    k->window_left = L - 1;
    k->mask = ex(EXPR_AND, ex(EXPR_LE, var(VAR_K), aligned_q(), NULL),
                 ex(EXPR_GT, var(VAR_K), ex(EXPR_SUB, aligned_q(), num(L), NULL), NULL), NULL);
    break;
  }
  case 3: { /* window(L, R) */
    int L = rng_int(r, 0, 30), R = rng_int(r, 0, 30);
    k->mask_kind = MASK_WINDOW;
    k->window_left = L;
    k->window_right = R;
    k->mask = ex(EXPR_AND, ex(EXPR_GE, var(VAR_K), ex(EXPR_SUB, aligned_q(), num(L), NULL), NULL),
                 ex(EXPR_LE, var(VAR_K), ex(EXPR_ADD, aligned_q(), num(R), NULL), NULL), NULL);
    break;
  }
  default:
    k->mask_kind = MASK_EXPR;
    k->mask = mask_tree(r, 2);
  }
}

/* Random arithmetic over s, q, k, h and numbers, kept finite. */
static Expr *score_tree(uint64_t *r, int depth) {
  if (depth == 0) {
    switch (rng_int(r, 0, 6)) {
    case 0: return var(VAR_Q);
    case 1: return var(VAR_K);
    case 2: return num(rng_int(r, 0, 1) ? rng_int(r, -3, 3) : rng_int(r, -30, 30) / 8.0);
    default: return var(VAR_S);
    }
  }
  Expr *a = score_tree(r, depth - 1);
  switch (rng_int(r, 0, 9)) {
  case 0: return ex(EXPR_ADD, a, score_tree(r, depth - 1), NULL);
  case 1: return ex(EXPR_SUB, a, score_tree(r, depth - 1), NULL);
  case 2: return ex(EXPR_MUL, a, num(rng_int(r, -4, 4) / 2.0), NULL);
  case 3: return ex(EXPR_DIV, a, num(rng_int(r, 1, 9)), NULL);
  case 4: {
    ExprKind k = rng_int(r, 0, 1) ? EXPR_MIN : EXPR_MAX;
    return ex(k, a, score_tree(r, depth - 1), NULL);
  }
  case 5: {
    Expr *c = mask_atom(r);
    return ex(EXPR_SELECT, c, a, score_tree(r, depth - 1));
  }
  case 6: return ex(EXPR_TANH, a, NULL, NULL);
  case 7: return ex(EXPR_ABS, a, NULL, NULL);
  case 8: return ex(EXPR_FLOOR, a, NULL, NULL);
  default: return ex(EXPR_MOD, a, num(rng_int(r, 2, 7)), NULL);
  }
}

static void gen_score(uint64_t *r, KernelSpec *k) {
  switch (rng_int(r, 0, 4)) {
  case 0:
    k->score = NULL;
    break;
  case 1: { /* softcap: c * tanh(s / c) */
    double c = rng_int(r, 0, 1) ? 50 : 5;
    k->score = ex(EXPR_MUL, num(c), ex(EXPR_TANH, ex(EXPR_DIV, var(VAR_S), num(c), NULL), NULL, NULL),
                  NULL);
    break;
  }
  case 2: /* ALiBi: s - exp2(-(h + 1)) * |q - k| */
    k->score = ex(EXPR_SUB, var(VAR_S),
                  ex(EXPR_MUL, ex(EXPR_EXP2, ex(EXPR_NEG, ex(EXPR_ADD, var(VAR_H), num(1), NULL), NULL, NULL),
                                  NULL, NULL),
                     ex(EXPR_ABS, ex(EXPR_SUB, var(VAR_Q), var(VAR_K), NULL), NULL, NULL), NULL),
                  NULL);
    break;
  case 3: /* ALiBi, bottom-right aligned, slope from h */
    k->score = ex(EXPR_ADD, var(VAR_S),
                  ex(EXPR_DIV, ex(EXPR_MUL, ex(EXPR_SUB, var(VAR_K), aligned_q(), NULL),
                                  ex(EXPR_ADD, var(VAR_H), num(1), NULL), NULL),
                     num(16), NULL),
                  NULL);
    break;
  default:
    k->score = score_tree(r, rng_int(r, 1, 3));
  }
}

void gen_spec(uint64_t *r, KernelSpec *k, char *name) {
  memset(k, 0, sizeof *k);
  k->name = name;
  k->loc = (SrcLoc){"<generated>", 1, 1};
  k->dtype = rng_int(r, 0, 1) ? DTYPE_BF16 : DTYPE_F16;
  k->head_dim = 8 * rng_int(r, 1, 8);
  k->v_head_dim = rng_int(r, 0, 3) == 0 ? 8 * rng_int(r, 1, 8) : k->head_dim;
  static const int ratios[] = {1, 2, 4};
  k->kv_heads = rng_int(r, 1, 2);
  k->heads = k->kv_heads * ratios[rng_int(r, 0, 2)];
  k->scale = rng_int(r, 0, 1) ? 1 / sqrt(k->head_dim) : rng_int(r, 1, 40) / 40.0;
  k->mode = rng_int(r, 0, 5) == 0 ? MODE_DECODE : MODE_FORWARD;
  gen_mask(r, k);
  gen_score(r, k);
  if (k->mode == MODE_DECODE) { /* drawn last: forward specs stay as they were */
    k->split = rng_int(r, 0, 2);
    if (rng_int(r, 0, 1)) {
      k->cache = CACHE_PAGED;
      k->page_size = rng_int(r, 0, 1) ? 16 : 32;
    }
    if (rng_int(r, 0, 2) == 0) {
      k->has_unified_max = true;
      k->unified_max = rng_int(r, -4, 4);
    }
  }
}
