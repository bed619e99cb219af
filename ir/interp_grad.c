/* interp_grad.c - the interpreter's `grad %y, %x`: dy/dx elementwise by
 * forward-mode dual numbers over the ops from x to y, written apart from
 * passes/differentiate.c on purpose, so that running a program before and
 * after that pass is a differential test of it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/interp_internal.h"


/* grad y, x at run time: forward-mode differentiation with dual numbers.
 * Each value on the way from x to y gets its derivative (a buffer shaped
 * like the value) from its operands' values, which the ops before the grad
 * have just computed, and from their derivatives. Values that do not depend
 * on x have derivative 0 and take no part (0 * inf never makes a NaN). The
 * rules are passes/differentiate.c's, written again per element and
 * independently of it, so that running a program before and after that pass
 * is a differential test of it. */

enum { G_SEEN = 1, G_DEP = 2, G_DONE = 4, G_MAX_DEPTH = 4096 };

static const double LN2 = 0.69314718055994530942;

static bool g_region_depends(Interp *I, const Block *blk);

/* Does v depend on I->gx? Block arguments other than x do not. */
static bool g_depends(Interp *I, const Value *v) {
  if (v == I->gx)
    return true;
  if (!v->def || I->failed)
    return false;
  unsigned char *fl = &I->gflags[v->id];
  if (*fl & G_SEEN)
    return *fl & G_DEP;
  *fl |= G_SEEN;
  if (++I->gdepth > G_MAX_DEPTH) {
    interp_fail(I, v->def, "grad: chain from x too deep");
    return false;
  }
  const Op *op = v->def;
  bool r = false;
  for (int i = 0; i < op->noperands && !r; i++)
    r = g_depends(I, op->operands[i]);
  for (int i = 0; i < op->nregions && !r; i++)
    r = g_region_depends(I, op->regions[i]);
  I->gdepth--;
  if (r)
    *fl |= G_DEP;
  return r;
}

static bool g_region_depends(Interp *I, const Block *blk) {
  const Op *t = blk->last;
  for (int i = 0; t && t->kind == OP_YIELD && i < t->noperands; i++)
    if (g_depends(I, t->operands[i]))
      return true;
  return false;
}

/* Does operand i of op carry a derivative (a select's or a mask's condition
 * does not)? */
static bool g_differentiated(const Op *op, int i) {
  if (op->kind == OP_SELECT)
    return i > 0;
  if (op->kind == OP_MASK)
    return i == 0;
  return true;
}

/* The derivative of one element: a operand values, da their derivatives (0
 * where dep is false), r the op's result. */
static double g_elem(const Interp *I, const Op *op, const double *a, const double *da,
                     const bool *dep, double r) {
  switch (op->kind) {
  case OP_ADD: return da[0] + da[1];
  case OP_SUB: return da[0] - da[1];
  case OP_MUL:
  case OP_RESCALE: return (dep[0] ? da[0] * a[1] : 0) + (dep[1] ? a[0] * da[1] : 0);
  case OP_DIV: return (dep[0] ? da[0] / a[1] : 0) - (dep[1] ? a[0] * da[1] / (a[1] * a[1]) : 0);
  case OP_REM: return da[0];
  case OP_MIN: return a[0] <= a[1] ? da[0] : da[1]; /* a tie takes the first operand */
  case OP_MAX: return a[0] >= a[1] ? da[0] : da[1];
  case OP_NEG: return -da[0];
  case OP_EXP: return da[0] * r;
  case OP_EXP2: return da[0] * r * LN2;
  case OP_LOG: return da[0] / a[0];
  case OP_LOG2: return da[0] / (a[0] * LN2);
  case OP_TANH: return da[0] * (1 - r * r);
  case OP_SQRT: return da[0] * 0.5 / r;
  case OP_RECIP: return a[0] == 0 ? 0 : -da[0] / (a[0] * a[0]);
  case OP_ABS: return a[0] < 0 ? -da[0] : da[0];
  case OP_FLOOR: return 0;
  case OP_CAST: return interp_cast_to(I, op->results[0]->type.elem, da[0]);
  case OP_SELECT: return a[0] != 0 ? da[1] : da[2];
  case OP_MASK: return a[1] != 0 ? da[0] : 0;
  default: return 0;
  }
}

/* Why op, on the way from x to y, has no derivative here; NULL when it has. */
static const char *g_refusal(Interp *I, const Op *op) {
  switch (op->kind) {
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_RESCALE: case OP_DIV: case OP_MIN:
  case OP_MAX: case OP_NEG: case OP_EXP: case OP_EXP2: case OP_LOG: case OP_LOG2:
  case OP_TANH: case OP_SQRT: case OP_RECIP: case OP_ABS: case OP_FLOOR: case OP_SELECT:
  case OP_MASK:
    break;
  case OP_REM:
    if (g_depends(I, op->operands[1]))
      return "fmod by a divisor that depends on x";
    break;
  case OP_CAST:
    if (!type_is_float(op->operands[0]->type))
      return "an integer or boolean computed from x used as a number";
    break;
  default: return "no derivative rule (reduces, mixes or loads elements, or control flow)";
  }
  return type_is_float(op->results[0]->type) ? NULL : "an integer or boolean computed from x";
}

static const RtVal *g_deriv(Interp *I, const Value *v);

/* Makes d shaped like v, every element `x`. */
static void g_fill(Interp *I, RtVal *d, const RtVal *v, double x) {
  if (!v->tile) {
    interp_set_scalar(d, x);
    return;
  }
  if (!interp_set_tile(I, d, v->rows, v->cols))
    return;
  for (size_t i = 0; i < (size_t)v->rows * (size_t)v->cols; i++)
    d->t[i] = x;
}

/* d = the derivative of v (depends on x, is not x), element by element. */
static void g_rule(Interp *I, const Value *v, RtVal *d) {
  const Op *op = v->def;
  const char *why = g_refusal(I, op);
  if (why || op->noperands < 1 || op->noperands > 3) {
    interp_fail(I, op, "grad: cannot differentiate: %s", why ? why : "malformed");
    return;
  }
  static const double zero = 0;
  Acc av[3], ad[3];
  bool dep[3];
  for (int i = 0; i < op->noperands; i++) {
    const RtVal *di = g_differentiated(op, i) ? g_deriv(I, op->operands[i]) : NULL;
    if (I->failed)
      return;
    av[i] = interp_acc_of(interp_val(I, op->operands[i]));
    dep[i] = di != NULL;
    ad[i] = di ? interp_acc_of(di) : (Acc){&zero, 0, 0};
  }
  const RtVal *res = interp_val(I, v);
  g_fill(I, d, res, 0); /* d shaped like v */
  if (I->failed)
    return;
  int rows = res->tile ? res->rows : 1, cols = res->tile ? res->cols : 1;
  double *out = res->tile ? d->t : &d->s;
  Acc ar = interp_acc_of(res);
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) {
      double a[3], da[3];
      for (int i = 0; i < op->noperands; i++) {
        a[i] = AT(av[i], r, c);
        da[i] = AT(ad[i], r, c);
      }
      out[(size_t)r * cols + c] = g_elem(I, op, a, da, dep, AT(ar, r, c));
    }
}

/* The derivative of v with respect to I->gx, or NULL when v does not
 * depend on it (0). */
static const RtVal *g_deriv(Interp *I, const Value *v) {
  if (I->failed || !g_depends(I, v))
    return NULL;
  RtVal *d = &I->gder[v->id];
  if (I->gflags[v->id] & G_DONE)
    return d;
  if (++I->gdepth > G_MAX_DEPTH) {
    interp_fail(I, v->def, "grad: chain from x too deep");
    return NULL;
  }
  if (v == I->gx)
    g_fill(I, d, interp_val(I, v), 1);
  else
    g_rule(I, v, d);
  I->gdepth--;
  I->gflags[v->id] |= G_DONE;
  return I->failed ? NULL : d;
}

void interp_exec_grad(Interp *I, const Op *op) {
  if (op->noperands != 2 || op->nresults != 1) {
    interp_fail(I, op, "needs y, x and one result");
    return;
  }
  if (!I->gflags) {
    I->gflags = malloc((size_t)I->nvals + 1);
    I->gder = calloc((size_t)I->nvals + 1, sizeof(RtVal));
    if (!I->gflags || !I->gder) {
      interp_fail(I, op, "out of memory");
      return;
    }
  }
  memset(I->gflags, 0, (size_t)I->nvals + 1);
  I->gx = op->operands[1];
  I->gdepth = 0;
  const RtVal *y = interp_val(I, op->operands[0]), *d = g_deriv(I, op->operands[0]);
  RtVal *out = interp_val(I, op->results[0]);
  if (d)
    interp_copy_val(I, out, d);
  else if (!I->failed)
    g_fill(I, out, y, 0);
}

