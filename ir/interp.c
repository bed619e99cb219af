/* interp.c - the reference interpreter of tile programs (interp.h): values
 * and rounding, the tile-level ops (full, iota, matmul, row reductions,
 * rescale, reduce) and control flow.
 *
 * Every value owns a buffer that is reused each time its op runs again;
 * values flowing through yields are copied, so no two values ever share
 * storage. Elementwise ops are in interp_elementwise.c, memory ops in
 * interp_mem.c, grad in interp_grad.c, rings and warp roles in
 * interp_roles.c; preparing and running one kernel in
 * interp_kernel.c, the drivers that run several in interp_lists.c (a
 * kernel's classifier) and interp_module.c (a whole module).
 */
#include "ir/interp_internal.h"

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

bool interp_check_yield(Interp *I, const Op *owner, const Op *term, int n) {
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
  if (hi <= lo) /* a last-step ring release of a loop that runs no step */
    interp_release_after_loop(I, op);
  for (int64_t iv = lo; iv < hi && !I->failed; iv++) {
    interp_set_scalar(interp_val(I, body->args[0]), (double)iv);
    for (int i = 0; i < n; i++)
      interp_copy_val(I, interp_val(I, body->args[1 + i]), interp_val(I, op->results[i]));
    const Op *term = interp_exec_block(I, body);
    if (I->failed || !interp_check_yield(I, op, term, n))
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
  const Op *term = interp_exec_block(I, blk);
  if (I->failed || !interp_check_yield(I, op, term, op->nresults))
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
  case OP_MMA_TURN: break; /* ordering among warpgroups; every matmul runs where it is */
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
  case OP_RING: interp_exec_ring(I, op); break;
  case OP_WARP_ROLES: interp_exec_warp_roles(I, op); break;
  case OP_RING_PUT: interp_exec_ring_put(I, op); break;
  case OP_RING_GET: interp_exec_ring_get(I, op); break;
  case OP_RING_RELEASE: interp_exec_ring_release(I, op); break;
  case OP_YIELD:
  case OP_RETURN: break;
  default:
    if (op->kind < OP__COUNT)
      interp_exec_elementwise(I, op);
    else
      interp_fail(I, op, "unknown op");
  }
}

const Op *interp_exec_block(Interp *I, const Block *blk) {
  for (const Op *op = blk->first; op && !I->failed; op = op->next) {
    if (op->kind == OP_YIELD || op->kind == OP_RETURN)
      return op;
    exec_op(I, op);
  }
  return NULL;
}
