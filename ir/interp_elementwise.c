/* interp_elementwise.c - the interpreter's elementwise ops (interp.h):
 * broadcasting, index / i1 / u32 / float arithmetic, compares, casts and the
 * unary math, one result element at a time. */
#include "ir/interp_internal.h"

#include "base/dropout_mask.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------- elementwise ops */


Acc interp_acc_of(const RtVal *v) {
  if (!v->tile)
    return (Acc){&v->s, 0, 0};
  return (Acc){v->t, v->rows == 1 ? 0 : (size_t)v->cols, v->cols == 1 ? 0 : 1};
}


/* Shapes the result of an elementwise op from its operands (broadcasting) and
 * checks it against the result type. Returns false after failing. */
static bool shape_result(Interp *I, const Op *op, RtVal **in, int n, RtVal *out) {
  int rows = 1, cols = 1;
  bool tile = false;
  for (int i = 0; i < n; i++) {
    if (!in[i]->tile)
      continue;
    tile = true;
    if (in[i]->rows != 1) {
      if (rows != 1 && rows != in[i]->rows)
        goto bad;
      rows = in[i]->rows;
    }
    if (in[i]->cols != 1) {
      if (cols != 1 && cols != in[i]->cols)
        goto bad;
      cols = in[i]->cols;
    }
  }
  Type t = op->results[0]->type;
  if (t.kind == TYPE_TILE) {
    int64_t tr = interp_resolve_dim(I, t.rows), tc = interp_resolve_dim(I, t.cols);
    if ((rows != 1 && rows != tr) || (cols != 1 && cols != tc))
      goto bad;
    return interp_set_tile(I, out, (int)tr, (int)tc);
  }
  if (tile) {
    interp_fail(I, op, "tile operand but scalar result type");
    return false;
  }
  out->tile = false;
  return true;
bad:
  interp_fail(I, op, "operand shapes do not broadcast to the result type");
  return false;
}

static bool is_int_elem(ElemType e) { return e == ELEM_INDEX || e == ELEM_I1; }

static double floordiv(Interp *I, const Op *op, double a, double b) {
  int64_t x = (int64_t)a, y = (int64_t)b;
  if (y == 0) {
    interp_fail(I, op, "index division by zero");
    return 0;
  }
  int64_t q = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0)))
    q--;
  return (double)q;
}

static double binop(Interp *I, const Op *op, bool ints, double a, double b) {
  switch (op->kind) {
  case OP_ADD: return a + b;
  case OP_SUB: return a - b;
  case OP_MUL: return a * b;
  case OP_DIV: return ints ? floordiv(I, op, a, b) : a / b;
  case OP_REM:
    if (ints && (int64_t)b == 0) {
      interp_fail(I, op, "index remainder by zero");
      return 0;
    }
    return ints ? (double)((int64_t)a % (int64_t)b) : fmod(a, b);
  case OP_CEILDIV: return -floordiv(I, op, -a, b);
  case OP_MIN: return a < b ? a : b;
  case OP_MAX: return a > b ? a : b;
  case OP_AND: return (a != 0) && (b != 0);
  case OP_OR: return (a != 0) || (b != 0);
  case OP_MASK: return b != 0 ? a : -INFINITY;
  default:
    interp_fail(I, op, "not a binary elementwise op");
    return 0;
  }
}

/* u32 arithmetic, exact: the operands are doubles holding integers in
 * 0 .. 2^32 - 1; add, sub and mul wrap modulo 2^32. */
static double u32op(Interp *I, const Op *op, double a, double b) {
  uint32_t x = (uint32_t)(int64_t)a, y = (uint32_t)(int64_t)b;
  switch (op->kind) {
  case OP_ADD: return (double)(uint32_t)(x + y);
  case OP_SUB: return (double)(uint32_t)(x - y);
  case OP_MUL: return (double)(uint32_t)(x * y);
  case OP_MULHI: return (double)(uint32_t)(((uint64_t)x * y) >> 32);
  case OP_AND: return (double)(x & y);
  case OP_OR: return (double)(x | y);
  case OP_XOR: return (double)(x ^ y);
  case OP_SHR:
    if (y > 31) {
      interp_fail(I, op, "u32 shift by %u (0..31)", y);
      return 0;
    }
    return (double)(x >> y);
  case OP_MIN: return x < y ? x : y;
  case OP_MAX: return x > y ? x : y;
  default:
    interp_fail(I, op, "not a u32 op");
    return 0;
  }
}

static double cmpop(int pred, double a, double b) {
  switch (pred) {
  case P_LT: return a < b;
  case P_LE: return a <= b;
  case P_GT: return a > b;
  case P_GE: return a >= b;
  case P_EQ: return a == b;
  case P_HLT: return half_lt((uint32_t)(int64_t)a, (uint32_t)(int64_t)b);
  default: return a != b;
  }
}

double interp_cast_to(const Interp *I, ElemType to, double x) {
  switch (to) {
  case ELEM_INDEX: return trunc(x);
  case ELEM_I1: return x != 0;
  case ELEM_U32: return (double)(uint32_t)(int64_t)trunc(x); /* modulo 2^32 */
  default: return I->o->round_casts ? interp_round(x, to) : x;
  }
}

static double unop(Interp *I, const Op *op, double x) {
  switch (op->kind) {
  case OP_NEG: return -x;
  case OP_EXP: return exp(x);
  case OP_EXP2: return exp2(x);
  case OP_LOG: return log(x);
  case OP_LOG2: return log2(x);
  case OP_TANH: return tanh(x);
  case OP_SQRT: return sqrt(x);
  case OP_ABS: return fabs(x);
  case OP_FLOOR: return floor(x);
  case OP_RECIP: return x == 0 ? 0 : 1 / x;
  case OP_NOT: return x == 0;
  case OP_CAST: return interp_cast_to(I, op->results[0]->type.elem, x);
  case OP_XWARP_REDUCE: return x;
  default:
    interp_fail(I, op, "not a unary elementwise op");
    return 0;
  }
}

/* cast {transpose = 1}: the R x C tile x as the C x R result. */
static void exec_cast_transposed(Interp *I, const Op *op) {
  RtVal *x = interp_val(I, op->operands[0]), *out = interp_val(I, op->results[0]);
  if (!x->tile || !interp_set_tile(I, out, x->cols, x->rows))
    return;
  ElemType to = op->results[0]->type.elem;
  for (int r = 0; r < out->rows; r++)
    for (int c = 0; c < out->cols; c++)
      out->t[(size_t)r * (size_t)out->cols + (size_t)c] =
          interp_cast_to(I, to, x->t[(size_t)c * (size_t)x->cols + (size_t)r]);
}

/* Runs an elementwise op of 1..3 operands over the broadcast shape. */
void interp_exec_elementwise(Interp *I, const Op *op) {
  int n = op->noperands;
  if (op->kind == OP_CAST && attr_int(&op->attrs, "transpose", 0) == 1) {
    exec_cast_transposed(I, op);
    return;
  }
  RtVal *in[3];
  if (n < 1 || n > 3 || op->nresults != 1) {
    interp_fail(I, op, "wrong number of operands or results");
    return;
  }
  for (int i = 0; i < n; i++)
    in[i] = interp_val(I, op->operands[i]);
  RtVal *out = interp_val(I, op->results[0]);
  if (!shape_result(I, op, in, n, out))
    return;
  int rows = out->tile ? out->rows : 1, cols = out->tile ? out->cols : 1;
  double *dst = out->tile ? out->t : &out->s;
  Acc a = interp_acc_of(in[0]), b = n > 1 ? interp_acc_of(in[1]) : a, c = n > 2 ? interp_acc_of(in[2]) : a;
  bool ints = is_int_elem(op->results[0]->type.elem);
  bool u32 = op->kind != OP_CMP && op->kind != OP_SELECT && op->kind != OP_CAST &&
             op->results[0]->type.elem == ELEM_U32;
  if ((op->kind == OP_SELECT) != (n == 3) ||
      (n == 1 && op->kind != OP_CAST && op->kind != OP_XWARP_REDUCE && op->kind != OP_NEG &&
       op->kind != OP_NOT && !(op->kind >= OP_EXP && op->kind <= OP_RECIP))) {
    interp_fail(I, op, "wrong number of operands");
    return;
  }
  int pred = I->info[op->id].pred;
  for (int r = 0; r < rows; r++)
    for (int col = 0; col < cols; col++) {
      double x = AT(a, r, col), y;
      switch (op->kind) {
      case OP_SELECT: y = AT(a, r, col) != 0 ? AT(b, r, col) : AT(c, r, col); break;
      case OP_CMP: y = cmpop(pred, x, AT(b, r, col)); break;
      default:
        y = n == 1 ? unop(I, op, x) : u32 ? u32op(I, op, x, AT(b, r, col)) : binop(I, op, ints, x, AT(b, r, col));
      }
      dst[(size_t)r * (size_t)cols + (size_t)col] = y;
    }
}
