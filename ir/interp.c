/* interp.c - the reference interpreter of tile programs (interp.h).
 *
 * Preparation numbers every value (Value.id) and op (Op.id) of the kernel and
 * decodes each op's attributes once into a side table, so that executing an
 * op never searches lists. Every value owns a buffer that is reused each time
 * its op runs again; values flowing through yields are copied, so no two
 * values ever share storage. Elementwise ops are in interp_elementwise.c,
 * memory ops in interp_mem.c, grad in interp_grad.c; here: values,
 * preparation, tile-level ops (full, iota, matmul, row reductions, rescale,
 * reduce), control flow and the entry points.
 */
#include "ir/interp_internal.h"
#include "ir/dropout.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------------- rounding */

/* Round to nearest even with p significand bits, minimum normal exponent emin
 * (of the leading bit) and largest finite value maxf. Scaling by powers of two
 * is exact in double, so one nearbyint does the rounding. */
static double round_fmt(double x, int p, int emin, double maxf) {
  if (x == 0 || !isfinite(x))
    return x;
  int e;
  frexp(x, &e); /* x = m * 2^e, 0.5 <= |m| < 1: leading bit at 2^(e-1) */
  int lead = e - 1 < emin ? emin : e - 1;
  double r = ldexp(nearbyint(ldexp(x, p - 1 - lead)), lead - (p - 1));
  if (fabs(r) > maxf)
    return copysign(INFINITY, x);
  return r;
}

double interp_round(double x, ElemType elem) {
  switch (elem) {
  case ELEM_F32: return (double)(float)x;
  case ELEM_BF16: return round_fmt(x, 8, -126, 0x1.fep127);
  case ELEM_F16: return round_fmt(x, 11, -14, 65504.0);
  default: return x;
  }
}

void interp_options_init(InterpOptions *o) {
  o->br = 16;
  o->bc = 16;
  o->round_casts = true;
}


void interp_fail(Interp *I, const Op *op, const char *fmt, ...) {
  if (I->failed)
    return;
  I->failed = true;
  if (!I->err || !I->errlen)
    return;
  int n = 0;
  if (op)
    n = snprintf(I->err, I->errlen, "%s:%d:%d: interp: %s: ",
                 op->loc.file ? op->loc.file : "<ir>", op->loc.line, op->loc.col,
                 op_name(op->kind));
  else
    n = snprintf(I->err, I->errlen, "interp: ");
  if (n < 0 || (size_t)n >= I->errlen)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(I->err + n, I->errlen - (size_t)n, fmt, ap);
  va_end(ap);
}

int64_t interp_resolve_dim(const Interp *I, int d) {
  switch (d) {
  case DIM_BR: return I->o->br;
  case DIM_BC: return I->o->bc;
  case DIM_BATCH: return I->batch;
  case DIM_SEQLEN_Q: return I->sq;
  case DIM_SEQLEN_K: return I->sk;
  case DIM_Q_LEN: return I->sq;
  case DIM_CAPACITY: return I->sk;
  case DIM_NUM_PAGES: return I->sz.num_pages;
  case DIM_MAX_PAGES: return I->sz.max_pages;
  case DIM_BATCH_NSPLIT: return I->batch * I->sz.nsplit;
  case DIM_ROW_TILES: case DIM_LIST_LEN: { /* block lists: the kernel's tiles */
    bool rows = strcmp(attr_str(&I->f->attrs, "blocks", "rows"), "rows") == 0;
    int64_t tq = attr_int(&I->f->attrs, "tile_q", 1), tk = attr_int(&I->f->attrs, "tile_kv", 1);
    int64_t nq = (I->sq + tq - 1) / tq, nk = (I->sk + tk - 1) / tk;
    if (d == DIM_ROW_TILES)
      return rows ? nq : nk;
    return (rows ? nk : nq) + 1;
  }
  default: return d;
  }
}

void interp_set_scalar(RtVal *r, double x) {
  r->tile = false;
  r->s = x;
}

RtVal *interp_val(Interp *I, const Value *v) { return &I->vals[v->id]; }

/* Makes r a tile of rows x cols (contents undefined). */
bool interp_set_tile(Interp *I, RtVal *r, int rows, int cols) {
  size_t n = (size_t)rows * (size_t)cols;
  if (n > r->cap) {
    double *t = realloc(r->t, n * sizeof(double));
    if (!t) {
      interp_fail(I, NULL, "out of memory");
      return false;
    }
    r->t = t;
    r->cap = n;
  }
  r->tile = true;
  r->rows = rows;
  r->cols = cols;
  return true;
}


void interp_copy_val(Interp *I, RtVal *dst, const RtVal *src) {
  if (dst == src)
    return;
  if (!src->tile) {
    interp_set_scalar(dst, src->s);
    return;
  }
  if (interp_set_tile(I, dst, src->rows, src->cols))
    memcpy(dst->t, src->t, (size_t)src->rows * (size_t)src->cols * sizeof(double));
}

/* ------------------------------------------------------------ preparation */

typedef struct Counter {
  Interp *I;
  int nvals, nops;
} Counter;

static void number_op(Op *op, void *ctx) {
  Counter *c = ctx;
  op->id = c->nops++;
  for (int i = 0; i < op->nresults; i++)
    op->results[i]->id = c->nvals++;
  for (int r = 0; r < op->nregions; r++)
    for (int a = 0; a < op->regions[r]->nargs; a++)
      op->regions[r]->args[a]->id = c->nvals++;
}

static int pred_code(const char *s) {
  static const char *const names[] = {"lt", "le", "gt", "ge", "eq", "ne"};
  for (int i = 0; i < 6; i++)
    if (s && strcmp(s, names[i]) == 0)
      return i;
  return -1;
}

static void decode_op(Op *op, void *ctx) {
  Interp *I = ctx;
  OpInfo *in = &I->info[op->id];
  switch (op->kind) {
  case OP_CMP:
    in->pred = pred_code(attr_str(&op->attrs, "pred", NULL));
    if (in->pred < 0)
      interp_fail(I, op, "missing or unknown pred");
    break;
  case OP_IOTA:
    in->axis = (int)attr_int(&op->attrs, "axis", -1);
    if (in->axis != 0 && in->axis != 1)
      interp_fail(I, op, "axis must be 0 or 1");
    break;
  case OP_CONST:
  case OP_FULL:
    if (!attr_get(&op->attrs, "value"))
      interp_fail(I, op, "missing value");
    in->value = attr_float(&op->attrs, "value", 0);
    break;
  case OP_MATMUL:
    in->transpose_a = attr_int(&op->attrs, "transpose_a", 0) != 0;
    in->transpose_b = attr_int(&op->attrs, "transpose_b", 0) != 0;
    in->b_col0 = (int)attr_int(&op->attrs, "b_col0", 0);
    break;
  case OP_STORE:
    in->col0 = (int)attr_int(&op->attrs, "col0", 0);
    in->reduce_add = attr_get(&op->attrs, "reduce") != NULL;
    if (in->reduce_add && strcmp(attr_str(&op->attrs, "reduce", ""), "add") != 0)
      interp_fail(I, op, "reduce must be add");
    /* fall through */
  case OP_LOAD:
    in->pack = (int)attr_int(&op->attrs, "pack", 0);
    if (attr_get(&op->attrs, "pack") && in->pack < 1)
      interp_fail(I, op, "pack must be >= 1");
    break;
  case OP_LOAD_PAGED:
    in->page_size = (int)attr_int(&op->attrs, "page_size", 0);
    if (in->page_size < 1)
      interp_fail(I, op, "missing or bad page_size");
    break;
  case OP_REDUCE: {
    static const char *const kinds[] = {"max", "min", "sum"};
    const char *k = attr_str(&op->attrs, "kind", "");
    in->reduce = -1;
    for (int i = 0; i < 3; i++)
      if (strcmp(k, kinds[i]) == 0)
        in->reduce = i;
    if (in->reduce < 0)
      interp_fail(I, op, "kind must be max, min or sum");
    break;
  }
  case OP_TILE_SIZE: {
    const char *d = attr_str(&op->attrs, "dim", "");
    in->dim_kv = strcmp(d, "kv") == 0;
    if (!in->dim_kv && strcmp(d, "q") != 0)
      interp_fail(I, op, "dim must be q or kv");
    break;
  }
  default:
    break;
  }
}

static bool find_binding(const InterpBinding *b, int n, const char *name, int *at) {
  for (int i = 0; i < n; i++)
    if (b[i].name && strcmp(b[i].name, name) == 0) {
      *at = i;
      return true;
    }
  return false;
}

static bool is_workspace(const char *name) {
  static const char *const ws[] = {"o_acc", "m_buf", "l_buf", "o_part", "lse_part"};
  for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
    if (strcmp(name, ws[i]) == 0)
      return true;
  return false;
}

/* Binds (or allocates) the tensor of argument a; checks its dims. */
static void bind_tensor(Interp *I, const Value *a, const InterpBinding *bs, int nb) {
  Tensor *t = &I->tens[a->arg_index];
  const char *name = a->name ? a->name : "?";
  t->rank = a->type.rank;
  t->elem = a->type.elem;
  int64_t want[4] = {0};
  for (int d = 0; d < t->rank; d++)
    want[d] = interp_resolve_dim(I, a->type.dims[d]);
  int at;
  if (find_binding(bs, nb, name, &at)) {
    for (int d = 0; d < t->rank; d++) {
      if (bs[at].dims[d] != want[d]) {
        interp_fail(I, NULL, "tensor %%%s: dim %d is %lld, the kernel expects %lld", name, d,
             (long long)bs[at].dims[d], (long long)want[d]);
        return;
      }
      t->dims[d] = want[d];
      t->strides[d] = bs[at].strides[d];
    }
    t->data = bs[at].data;
    if (!t->data)
      interp_fail(I, NULL, "tensor %%%s: no data", name);
    return;
  }
  if (!is_workspace(name)) {
    interp_fail(I, NULL, "tensor %%%s is not bound", name);
    return;
  }
  size_t n = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    t->dims[d] = want[d];
    t->strides[d] = (int64_t)n;
    n *= (size_t)(want[d] > 0 ? want[d] : 1);
  }
  t->data = malloc(n * sizeof(double));
  t->owned = true;
  if (!t->data) {
    interp_fail(I, NULL, "out of memory");
    return;
  }
  for (size_t i = 0; i < n; i++)
    t->data[i] = NAN; /* poison: the program must write before it reads */
}

/* Dropout's launch arguments (InterpSizes) by name, for a kernel of either
 * keep decision (torch: attribute dropout_mask = torch, docs/dropout.md). */
static bool dropout_arg(const InterpSizes *sz, bool torch, const char *name, double *x) {
  static const char *const words[4] = {"seed_lo", "seed_hi", "offset_lo", "offset_hi"};
  uint64_t v[4] = {sz->seed, sz->seed >> 32, sz->offset, sz->offset >> 32};
  for (int i = 0; i < 4; i++)
    if (strcmp(name, words[i]) == 0) {
      *x = (double)(uint32_t)v[i];
      return true;
    }
  if (strcmp(name, "keep_threshold") == 0) {
    *x = dropout_launch_threshold(sz->dropout_p, torch);
    return true;
  }
  if (strcmp(name, "keep_scale") == 0) {
    *x = dropout_launch_scale(sz->dropout_p, torch);
    return true;
  }
  return false;
}

static void bind_args(Interp *I, const InterpBinding *bs, int nb) {
  const Func *f = I->f;
  double x;
  int at;
  for (int i = 0; i < f->nargs && !I->failed; i++) {
    const Value *a = f->args[i];
    const char *name = a->name ? a->name : "";
    if (a->type.kind == TYPE_TENSOR) {
      bind_tensor(I, a, bs, nb);
    } else if (a->type.kind == TYPE_SCALAR) {
      if (strcmp(name, "batch") == 0)
        interp_set_scalar(interp_val(I, a), (double)I->batch);
      else if (strcmp(name, "seqlen_q") == 0 || strcmp(name, "q_len") == 0)
        interp_set_scalar(interp_val(I, a), (double)I->sq);
      else if (strcmp(name, "seqlen_k") == 0 || strcmp(name, "capacity") == 0)
        interp_set_scalar(interp_val(I, a), (double)I->sk);
      else if (strcmp(name, "nsplit") == 0)
        interp_set_scalar(interp_val(I, a), (double)I->sz.nsplit);
      else if (strcmp(name, "max_pages") == 0)
        interp_set_scalar(interp_val(I, a), (double)I->sz.max_pages);
      else if (dropout_arg(&I->sz, strcmp(attr_str(&f->attrs, "dropout_mask", ""), "torch") == 0,
                           name, &x))
        interp_set_scalar(interp_val(I, a), x);
      else if (find_binding(bs, nb, name, &at) && bs[at].data) /* a run-time input */
        interp_set_scalar(interp_val(I, a), bs[at].data[0]);
      else
        interp_fail(I, NULL,
             "scalar argument %%%s has no value (only batch, seqlen_q/q_len, seqlen_k/capacity, "
             "nsplit, max_pages, dropout's seed_lo .. keep_scale, bound run-time inputs)",
             name);
    } else {
      interp_fail(I, NULL, "argument %%%s has an unsupported type", name);
    }
  }
}

/* ---------------------------------------------------------- tile-level ops */

bool interp_tile_type(Interp *I, const Op *op, int *rows, int *cols) {
  Type t = op->results[0]->type;
  if (t.kind != TYPE_TILE) {
    interp_fail(I, op, "result must be a tile");
    return false;
  }
  *rows = (int)interp_resolve_dim(I, t.rows);
  *cols = (int)interp_resolve_dim(I, t.cols);
  if (*rows <= 0 || *cols <= 0) {
    interp_fail(I, op, "tile extent is not positive (%d x %d)", *rows, *cols);
    return false;
  }
  return true;
}

bool interp_need_tile(Interp *I, const Op *op, const RtVal *v, const char *what) {
  if (!v->tile)
    interp_fail(I, op, "%s must be a tile", what);
  return v->tile;
}

static void exec_full(Interp *I, const Op *op) {
  int rows, cols;
  RtVal *out = interp_val(I, op->results[0]);
  if (!interp_tile_type(I, op, &rows, &cols) || !interp_set_tile(I, out, rows, cols))
    return;
  double x = I->info[op->id].value;
  for (size_t i = 0; i < (size_t)rows * (size_t)cols; i++)
    out->t[i] = x;
}

static void exec_iota(Interp *I, const Op *op) {
  int rows, cols;
  RtVal *out = interp_val(I, op->results[0]);
  if (!interp_tile_type(I, op, &rows, &cols) || !interp_set_tile(I, out, rows, cols))
    return;
  int axis = I->info[op->id].axis;
  if ((axis == 0 && cols != 1) || (axis == 1 && rows != 1)) {
    interp_fail(I, op, "iota axis %d needs a %s tile", axis, axis == 0 ? "R x 1" : "1 x C");
    return;
  }
  /* dropout's form (ir/dropout.c): (base + i) & mask */
  int64_t base = op->noperands ? (int64_t)interp_val(I, op->operands[0])->s : 0;
  int64_t mask = attr_int(&op->attrs, "and", -1);
  for (int i = 0; i < rows * cols; i++)
    out->t[i] = (double)((base + i) & mask);
}

/* Four partial sums: the interpreter's hot loop (the order of summation
 * only moves results by ulps). */
static double dot(const double *restrict x, const double *restrict y, int n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += x[k] * y[k];
    s1 += x[k + 1] * y[k + 1];
    s2 += x[k + 2] * y[k + 2];
    s3 += x[k + 3] * y[k + 3];
  }
  for (; k < n; k++)
    s0 += x[k] * y[k];
  return (s0 + s1) + (s2 + s3);
}

static void exec_matmul(Interp *I, const Op *op) {
  if (op->noperands < 2 || op->noperands > 3) {
    interp_fail(I, op, "needs 2 or 3 operands");
    return;
  }
  RtVal *a = interp_val(I, op->operands[0]), *b = interp_val(I, op->operands[1]);
  RtVal *c = op->noperands == 3 ? interp_val(I, op->operands[2]) : NULL;
  RtVal *out = interp_val(I, op->results[0]);
  if (!interp_need_tile(I, op, a, "a") || !interp_need_tile(I, op, b, "b") || (c && !interp_need_tile(I, op, c, "acc")))
    return;
  bool ta = I->info[op->id].transpose_a, tb = I->info[op->id].transpose_b;
  int bc0 = I->info[op->id].b_col0;
  int R = ta ? a->cols : a->rows, K = ta ? a->rows : a->cols, C = tb ? b->rows : b->cols;
  int rows, cols;
  if ((tb ? b->cols : b->rows) != K) {
    interp_fail(I, op, "inner extents differ (%d and %d)", K, tb ? b->cols : b->rows);
    return;
  }
  if (!interp_tile_type(I, op, &rows, &cols))
    return;
  if (attr_get(&op->attrs, "b_col0")) { /* B's columns bc0 .. bc0 + cols - 1 */
    if (tb || bc0 < 0 || bc0 + cols > C) {
      interp_fail(I, op, "b_col0 %d: columns past B's %d", bc0, C);
      return;
    }
    C = cols;
  }
  int bstride = tb ? K : b->cols;
  if (rows != R || cols != C || (c && (c->rows != R || c->cols != C))) {
    interp_fail(I, op, "result %d x %d does not match operands (%d x %d)", rows, cols, R, C);
    return;
  }
  if (!interp_set_tile(I, out, R, C))
    return;
  /* op(a) row r as a contiguous vector (a column of a when transposed). */
  double *arow = ta ? malloc(sizeof(double) * (size_t)(K ? K : 1)) : NULL;
  if (ta && !arow) {
    interp_fail(I, op, "out of memory");
    return;
  }
  for (int r = 0; r < R; r++) {
    double *restrict o = out->t + (size_t)r * C;
    for (int j = 0; j < C; j++)
      o[j] = c ? c->t[(size_t)r * C + j] : 0;
    if (ta)
      for (int k = 0; k < K; k++)
        arow[k] = a->t[(size_t)k * R + r];
    const double *restrict ar = ta ? arow : a->t + (size_t)r * K;
    if (tb) {
      for (int j = 0; j < C; j++)
        o[j] += dot(ar, b->t + (size_t)j * K, K);
    } else {
      for (int k = 0; k < K; k++) {
        double x = ar[k];
        const double *restrict br = b->t + (size_t)k * bstride + bc0;
        for (int j = 0; j < C; j++)
          o[j] += x * br[j];
      }
    }
  }
  free(arow);
}

static void exec_rowreduce(Interp *I, const Op *op) {
  RtVal *a = interp_val(I, op->operands[0]), *out = interp_val(I, op->results[0]);
  if (!interp_need_tile(I, op, a, "operand") || !interp_set_tile(I, out, a->rows, 1))
    return;
  bool mx = op->kind == OP_ROWMAX;
  for (int r = 0; r < a->rows; r++) {
    const double *row = a->t + (size_t)r * a->cols;
    double s = mx ? -INFINITY : 0;
    for (int c = 0; c < a->cols; c++)
      s = mx ? (row[c] > s ? row[c] : s) : s + row[c];
    out->t[r] = s;
  }
}

static void exec_rescale(Interp *I, const Op *op) {
  RtVal *a = interp_val(I, op->operands[0]), *v = interp_val(I, op->operands[1]);
  RtVal *out = interp_val(I, op->results[0]);
  if (!interp_need_tile(I, op, a, "operand"))
    return;
  if (v->tile && (v->cols != 1 || (v->rows != 1 && v->rows != a->rows))) {
    interp_fail(I, op, "scale must be R x 1");
    return;
  }
  if (!interp_set_tile(I, out, a->rows, a->cols))
    return;
  Acc s = interp_acc_of(v);
  for (int r = 0; r < a->rows; r++) {
    double x = AT(s, r, 0);
    for (int c = 0; c < a->cols; c++)
      out->t[(size_t)r * a->cols + c] = a->t[(size_t)r * a->cols + c] * x;
  }
}

/* reduce {kind = max|min|sum}: every element of a tile to one scalar. */
static void exec_reduce(Interp *I, const Op *op) {
  RtVal *a = interp_val(I, op->operands[0]);
  if (!interp_need_tile(I, op, a, "operand"))
    return;
  int k = I->info[op->id].reduce;
  double s = k == 0 ? -INFINITY : k == 1 ? INFINITY : 0;
  for (size_t i = 0; i < (size_t)a->rows * (size_t)a->cols; i++) {
    double x = a->t[i];
    s = k == 0 ? (x > s ? x : s) : k == 1 ? (x < s ? x : s) : s + x;
  }
  interp_set_scalar(interp_val(I, op->results[0]), s);
}

/* ------------------------------------------------------------ control flow */

static const Op *exec_block(Interp *I, const Block *blk);

/* The terminator's operands must match `n` targets. */
static bool check_yield(Interp *I, const Op *owner, const Op *term, int n) {
  if (!term || term->kind != OP_YIELD) {
    if (n == 0 && !term)
      return true; /* a region without results may end without a yield */
    interp_fail(I, owner, "region does not end with yield");
    return false;
  }
  if (term->noperands != n) {
    interp_fail(I, owner, "yield has %d values, expected %d", term->noperands, n);
    return false;
  }
  return true;
}

static void exec_for(Interp *I, const Op *op) {
  if (op->noperands < 2 || op->nregions != 1) {
    interp_fail(I, op, "malformed for");
    return;
  }
  int n = op->noperands - 2;
  const Block *body = op->regions[0];
  if (body->nargs != n + 1 || op->nresults != n) {
    interp_fail(I, op, "iter_args, block arguments and results disagree");
    return;
  }
  int64_t lo = (int64_t)interp_val(I, op->operands[0])->s, hi = (int64_t)interp_val(I, op->operands[1])->s;
  /* The results hold the carried state between iterations. */
  for (int i = 0; i < n; i++)
    interp_copy_val(I, interp_val(I, op->results[i]), interp_val(I, op->operands[2 + i]));
  for (int64_t iv = lo; iv < hi && !I->failed; iv++) {
    interp_set_scalar(interp_val(I, body->args[0]), (double)iv);
    for (int i = 0; i < n; i++)
      interp_copy_val(I, interp_val(I, body->args[1 + i]), interp_val(I, op->results[i]));
    const Op *term = exec_block(I, body);
    if (I->failed || !check_yield(I, op, term, n))
      return;
    for (int i = 0; i < n; i++)
      interp_copy_val(I, interp_val(I, op->results[i]), interp_val(I, term->operands[i]));
  }
}

static void exec_if(Interp *I, const Op *op) {
  if (op->noperands != 1 || op->nregions != 2) {
    interp_fail(I, op, "malformed if");
    return;
  }
  RtVal *c = interp_val(I, op->operands[0]);
  if (c->tile) {
    interp_fail(I, op, "condition must be a scalar");
    return;
  }
  const Block *blk = op->regions[c->s != 0 ? 0 : 1];
  const Op *term = exec_block(I, blk);
  if (I->failed || !check_yield(I, op, term, op->nresults))
    return;
  for (int i = 0; i < op->nresults; i++)
    interp_copy_val(I, interp_val(I, op->results[i]), interp_val(I, term->operands[i]));
}

static void exec_op(Interp *I, const Op *op) {
  switch (op->kind) {
  case OP_CONST:
    if (op->nresults != 1 || op->results[0]->type.kind != TYPE_SCALAR)
      interp_fail(I, op, "const must give one scalar");
    else
      interp_set_scalar(interp_val(I, op->results[0]), I->info[op->id].value);
    break;
  case OP_TILE_SIZE:
    interp_set_scalar(interp_val(I, op->results[0]), I->info[op->id].dim_kv ? I->o->bc : I->o->br);
    break;
  case OP_FULL: exec_full(I, op); break;
  case OP_IOTA: exec_iota(I, op); break;
  case OP_MATMUL: exec_matmul(I, op); break;
  case OP_MMA_WAIT: /* the matmul ran to completion already */
    interp_copy_val(I, interp_val(I, op->results[0]), interp_val(I, op->operands[0]));
    break;
  case OP_GRAD: interp_exec_grad(I, op); break;
  case OP_ROWMAX:
  case OP_ROWSUM: exec_rowreduce(I, op); break;
  case OP_RESCALE: exec_rescale(I, op); break;
  case OP_LOAD: interp_exec_load(I, op); break;
  case OP_STORE: interp_exec_store(I, op); break;
  case OP_LOAD_SCALAR: interp_exec_load_scalar(I, op); break;
  case OP_LOAD_PAGED: interp_exec_load_paged(I, op); break;
  case OP_GATHER: interp_exec_gather(I, op); break;
  case OP_SCATTER: interp_exec_scatter(I, op); break;
  case OP_REDUCE: exec_reduce(I, op); break;
  case OP_FOR: exec_for(I, op); break;
  case OP_IF: exec_if(I, op); break;
  case OP_YIELD:
  case OP_RETURN: break;
  default:
    if (op->kind < OP__COUNT)
      interp_exec_elementwise(I, op);
    else
      interp_fail(I, op, "unknown op");
  }
}

/* Runs the ops of blk; returns its terminator (yield/return) or NULL. */
static const Op *exec_block(Interp *I, const Block *blk) {
  for (const Op *op = blk->first; op && !I->failed; op = op->next) {
    if (op->kind == OP_YIELD || op->kind == OP_RETURN)
      return op;
    exec_op(I, op);
  }
  return NULL;
}

/* ------------------------------------------------------------------ entry */

/* A dense NaN-poisoned tensor for argument a of kernel f (its dims
 * resolved under f's attributes: block lists' row_tiles / list_len). */
static bool alloc_for(const Func *f, const Value *a, const InterpSizes *sz, InterpBinding *out);

/* A kernel that visits block lists (attribute block_list, docs/abi.md)
 * and was given none: its classifier kernel (of the same module) runs
 * first on the same bindings, into fresh NaN-poisoned lists (a read of an
 * entry it never wrote fails the gather), after its classes kernel (phase
 * 1, attribute classes) when it has one, and the kernel gets them in
 * lists[0..1]. Returns 0, or -1 with err set. */
static int run_classifier(const Func *f, const InterpBinding *bs, int nb, const InterpSizes *sz,
                          const InterpOptions *o, char *err, size_t errlen,
                          InterpBinding lists[2]) {
  const char *name = attr_str(&f->attrs, "block_list", "");
  const Func *c = NULL;
  for (int i = 0; f->module && i < f->module->nfuncs; i++)
    if (strcmp(f->module->funcs[i]->name, name) == 0)
      c = f->module->funcs[i];
  const Value *la = c ? func_arg((Func *)c, "blk_list") : NULL;
  const Value *ca = c ? func_arg((Func *)c, "blk_count") : NULL;
  if (!la || !ca) {
    snprintf(err, errlen, "interp: %s: no classifier kernel '%s' with block lists", f->name, name);
    return -1;
  }
  if (!alloc_for(c, la, sz, &lists[0]) || !alloc_for(c, ca, sz, &lists[1])) {
    free(lists[0].data);
    snprintf(err, errlen, "interp: out of memory");
    return -1;
  }
  InterpBinding *all = malloc(sizeof(InterpBinding) * (size_t)(nb + 2));
  if (!all) {
    free(lists[0].data), free(lists[1].data);
    snprintf(err, errlen, "interp: out of memory");
    return -1;
  }
  for (int i = 0; i < nb; i++)
    all[i] = bs[i];
  all[nb] = lists[0], all[nb + 1] = lists[1];
  /* A two-phase classifier: its classes kernel (phase 1) writes every
   * entry of each row's range, then it (phase 2) compacts them. */
  const char *classes = attr_str(&c->attrs, "classes", NULL);
  const Func *p1 = NULL;
  for (int i = 0; classes && f->module && i < f->module->nfuncs; i++)
    if (strcmp(f->module->funcs[i]->name, classes) == 0)
      p1 = f->module->funcs[i];
  int rc = 0;
  if (classes && !p1) {
    snprintf(err, errlen, "interp: %s: no classes kernel '%s'", name, classes);
    rc = -1;
  }
  if (!rc && p1)
    rc = interp_run_sizes(p1, all, nb + 2, sz, o, err, errlen);
  if (!rc)
    rc = interp_run_sizes(c, all, nb + 2, sz, o, err, errlen);
  free(all);
  if (rc) {
    free(lists[0].data), free(lists[1].data);
  }
  return rc;
}

static int run_with_lists(const Func *f, const InterpBinding *tensors, int ntensors,
                          const InterpSizes *sz, const InterpOptions *o, char *err,
                          size_t errlen) {
  InterpBinding lists[2] = {{0}};
  if (run_classifier(f, tensors, ntensors, sz, o, err, errlen, lists))
    return -1;
  InterpBinding *all = malloc(sizeof(InterpBinding) * (size_t)(ntensors + 2));
  int rc = -1;
  if (all) {
    for (int i = 0; i < ntensors; i++)
      all[i] = tensors[i];
    all[ntensors] = lists[0], all[ntensors + 1] = lists[1];
    rc = interp_run_sizes(f, all, ntensors + 2, sz, o, err, errlen);
  } else {
    snprintf(err, errlen, "interp: out of memory");
  }
  free(all);
  free(lists[0].data), free(lists[1].data);
  return rc;
}

int interp_run_sizes(const Func *f, const InterpBinding *tensors, int ntensors,
                     const InterpSizes *sz, const InterpOptions *o, char *err, size_t errlen) {
  InterpOptions dflt;
  if (!o) {
    interp_options_init(&dflt);
    o = &dflt;
  }
  Interp I = {.f = f, .o = o, .err = err, .errlen = errlen};
  if (err && errlen)
    err[0] = 0;
  if (!f || !f->body || !sz) {
    interp_fail(&I, NULL, "no kernel");
    return -1;
  }
  if (attr_get(&f->attrs, "block_list") && !find_binding(tensors, ntensors, "blk_list", &(int){0}))
    return run_with_lists(f, tensors, ntensors, sz, o, err, errlen);
  I.sz = *sz;
  I.batch = sz->batch, I.sq = sz->seqlen_q, I.sk = sz->seqlen_k;
  if (o->br <= 0 || o->bc <= 0 || sz->batch < 0 || sz->seqlen_q < 0 || sz->seqlen_k < 0 ||
      sz->nsplit < 0 || sz->num_pages < 0 || sz->max_pages < 0) {
    interp_fail(&I, NULL, "bad options or sizes");
    return -1;
  }
  /* Number the arguments first, then every op result and region argument. */
  Counter cnt = {&I, 0, 0};
  for (int i = 0; i < f->nargs; i++)
    f->args[i]->id = cnt.nvals++;
  func_walk((Func *)f, number_op, &cnt);
  I.nvals = cnt.nvals;
  I.nops = cnt.nops;
  I.vals = calloc((size_t)I.nvals + 1, sizeof(RtVal));
  I.info = calloc((size_t)I.nops + 1, sizeof(OpInfo));
  I.tens = calloc((size_t)f->nargs + 1, sizeof(Tensor));
  if (!I.vals || !I.info || !I.tens)
    interp_fail(&I, NULL, "out of memory");
  if (!I.failed)
    func_walk((Func *)f, decode_op, &I);
  if (!I.failed)
    bind_args(&I, tensors, ntensors);
  if (!I.failed)
    exec_block(&I, f->body);
  for (int i = 0; I.vals && i < I.nvals; i++)
    free(I.vals[i].t);
  for (int i = 0; I.gder && i < I.nvals; i++)
    free(I.gder[i].t);
  free(I.gder);
  free(I.gflags);
  for (int i = 0; I.tens && i < f->nargs; i++)
    if (I.tens[i].owned)
      free(I.tens[i].data);
  free(I.vals);
  free(I.info);
  free(I.tens);
  return I.failed ? -1 : 0;
}

int interp_run(const Func *f, const InterpBinding *tensors, int ntensors, int64_t batch,
               int64_t seqlen_q, int64_t seqlen_k, const InterpOptions *o, char *err,
               size_t errlen) {
  InterpSizes sz = {.batch = batch, .seqlen_q = seqlen_q, .seqlen_k = seqlen_k, .nsplit = 1};
  return interp_run_sizes(f, tensors, ntensors, &sz, o, err, errlen);
}

/* ------------------------------------------------------- whole modules */

enum { MAX_BINDINGS = 64 };

/* A shared workspace for argument a of some kernel of the module: dense,
 * NaN-poisoned, sized from a's type. */
static bool alloc_shared(const Value *a, const InterpSizes *sz, InterpBinding *out) {
  return alloc_for(NULL, a, sz, out);
}

static bool alloc_for(const Func *f, const Value *a, const InterpSizes *sz, InterpBinding *out) {
  InterpOptions o;
  interp_options_init(&o);
  Func none = {0};
  Interp I = {.f = f ? f : &none, .o = &o, .sz = *sz, .batch = sz->batch, .sq = sz->seqlen_q,
              .sk = sz->seqlen_k};
  size_t n = 1;
  memset(out, 0, sizeof *out);
  out->name = a->name;
  for (int d = a->type.rank - 1; d >= 0; d--) {
    int64_t e = interp_resolve_dim(&I, a->type.dims[d]);
    out->dims[d] = e;
    out->strides[d] = (int64_t)n;
    n *= (size_t)(e > 0 ? e : 1);
  }
  out->data = malloc(n * sizeof(double));
  if (!out->data)
    return false;
  for (size_t i = 0; i < n; i++)
    out->data[i] = NAN;
  return true;
}

int interp_run_module(const Module *m, const InterpBinding *tensors, int ntensors,
                      const InterpSizes *sz, const InterpOptions *o, char *err, size_t errlen) {
  InterpBinding bs[MAX_BINDINGS];
  int nb = 0, nown = 0, rc = 0;
  if (!m || !sz || ntensors > MAX_BINDINGS / 2) {
    if (err && errlen)
      snprintf(err, errlen, "interp: no module or too many bindings");
    return -1;
  }
  for (int i = 0; i < ntensors; i++)
    bs[nb++] = tensors[i];
  int first_own = nb;
  /* o_part / lse_part travel between kernels: allocate them here, once. */
  for (int fi = 0; fi < m->nfuncs && rc == 0; fi++)
    for (int i = 0; i < m->funcs[fi]->nargs && rc == 0; i++) {
      const Value *a = m->funcs[fi]->args[i];
      int at;
      bool shared = a->name && (strcmp(a->name, "o_part") == 0 || strcmp(a->name, "lse_part") == 0);
      if (a->type.kind != TYPE_TENSOR || !shared || find_binding(bs, nb, a->name, &at))
        continue;
      if (nb == MAX_BINDINGS || !alloc_shared(a, sz, &bs[nb])) {
        if (err && errlen)
          snprintf(err, errlen, "interp: out of memory");
        rc = -1;
        break;
      }
      nb++, nown++;
    }
  for (int fi = 0; fi < m->nfuncs && rc == 0; fi++)
    rc = interp_run_sizes(m->funcs[fi], bs, nb, sz, o, err, errlen);
  for (int i = first_own; i < first_own + nown; i++)
    free(bs[i].data);
  return rc;
}
