/* compute_elementwise.c - layer 2: elementwise ops, index tiles and splats.
 *
 * Every tile op is unrolled over the elements one thread holds (TileGeom,
 * cg_frag.h): C loops here, straight-line SSA values in the MLIR.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codegen/cg_math.h"
#include "codegen/compute.h"

/* ------------------------------------------------------- scalar math */

static bool is_float(ElemType e) { return e == ELEM_F32 || e == ELEM_F16 || e == ELEM_BF16; }

/* Converts one value between element types (cast semantics). */
static MlirValue convert(Lowerer *L, MlirValue v, ElemType from, ElemType to, MlirType tt) {
  CgBuilder *b = &L->b;
  if (from == to)
    return from == ELEM_INDEX ? cg_int_cast(b, v, tt) : v;
  /* u32 (i32 bits): index modulo 2^32 in, zero-extended out; unsigned to float */
  if (to == ELEM_U32 && from == ELEM_INDEX)
    return cg_int_cast(b, v, tt);
  if (from == ELEM_U32 && to == ELEM_INDEX)
    return mlirTypeEqual(mlirValueGetType(v), tt) ? v : cg_op1(b, "arith.extui", &v, 1, tt, NULL, 0);
  if (from == ELEM_U32 && is_float(to))
    return cg_op1(b, "arith.uitofp", &v, 1, tt, NULL, 0);
  if (is_float(from) && is_float(to))
    return cg_float_cast(b, v, tt);
  if (from == ELEM_INDEX && is_float(to))
    return cg_op1(b, "arith.sitofp", &v, 1, tt, NULL, 0);
  if (from == ELEM_I1 && is_float(to))
    return cg_op1(b, "arith.uitofp", &v, 1, tt, NULL, 0);
  if (from == ELEM_I1 && to == ELEM_INDEX)
    return cg_op1(b, "arith.extui", &v, 1, tt, NULL, 0);
  if (is_float(from) && to == ELEM_INDEX)
    return cg_op1(b, "arith.fptosi", &v, 1, tt, NULL, 0);
  if (to == ELEM_I1) {
    MlirValue zero = is_float(from) ? cg_const_float(b, mlirValueGetType(v), 0)
                                    : cg_const_int(b, mlirValueGetType(v), 0);
    return is_float(from) ? cg_cmpf(b, "une", v, zero) : cg_cmpi(b, "ne", v, zero);
  }
  return v;
}

/* Math outside cg_math.h (see there why intrinsics). The NVPTX backend
 * selects sqrt.rn.f32, abs.f32 and cvt.rmi.f32 for these. */
static MlirValue intr1(Lowerer *L, const char *name, MlirValue x) {
  return cg_intrinsic(&L->b, name, &x, 1, mlirValueGetType(x));
}

static MlirValue math1(Lowerer *L, const char *name, MlirValue x) {
  if (strcmp(name, "math.absf") == 0)
    return intr1(L, "llvm.fabs.f32", x);
  if (strcmp(name, "math.sqrt") == 0)
    return intr1(L, "llvm.sqrt.f32", x);
  if (strcmp(name, "math.floor") == 0)
    return intr1(L, "llvm.floor.f32", x);
  return cg_op1(&L->b, name, &x, 1, mlirValueGetType(x), NULL, 0);
}

/* fmod(a, b) = a - trunc(a / b) * b (frem would become a libdevice call). */
static MlirValue fmodf_(Lowerer *L, MlirValue a, MlirValue b) {
  MlirValue q = intr1(L, "llvm.trunc.f32", cg_arith2(&L->b, "arith.divf", a, b));
  return cg_subf(&L->b, a, cg_mulf(&L->b, q, b));
}

/* 2^y for y in [-126, 126] on the FMA and integer units, no MUFU: n = y
 * rounded (the 1.5 * 2^23 trick), f = y - n in [-1/2, 1/2], 2^f by a
 * degree 4 polynomial (relative error 2.7e-6, fitted to 2^f in relative
 * terms), and 2^n added to its exponent bits (the low bits of
 * y + 1.5 * 2^23 hold n; shifted by 23 only they remain, negative n as
 * well). At n = -126 the exponent field may reach 0: a value below 2^-126,
 * which the MUFU's ex2.approx.ftz would flush. */
static MlirValue exp2_poly(Lowerer *L, MlirValue y) {
  CgBuilder *b = &L->b;
  static const double c[5] = {0.9999991908565864, 0.6931219676960553, 0.24024981109531754,
                              0.05591703917490383, 0.009560510206679456};
  MlirValue magic = cg_const_f32(b, 12582912.0); /* 1.5 * 2^23 */
  MlirValue big = cg_addf(b, y, magic);
  MlirValue f = cg_subf(b, y, cg_subf(b, big, magic));
  MlirValue p = cg_const_f32(b, c[4]);
  for (int i = 3; i >= 0; i--)
    p = cg_fmaf(b, p, f, cg_const_f32(b, c[i]));
  MlirValue nb = cg_arith2(b, "arith.shli", cg_bitcast(b, big, b->i32), cg_const_i32(b, 23));
  return cg_bitcast(b, cg_addi(b, cg_bitcast(b, p, b->i32), nb), b->f32);
}

static bool forward_kernel(const Lowerer *L) {
  return strcmp(attr_str(&L->f->attrs, "mode", "forward"), "forward") == 0;
}

/* 2^y for tanh's y >= 0: clamped to 126 (2^126: 1 / (t + 1) is then below
 * f32's resolution of 1). */
static MlirValue exp2_fma_nonneg(Lowerer *L, MlirValue y) {
  return exp2_poly(L, cg_minnumf(&L->b, y, cg_const_f32(&L->b, 126.0)));
}

/* 2^y for a probability's y (<= 0 up to rounding; -inf where masked) as
 * ex2.approx.ftz gives it: 0 below -126 (flushed), and 0 for NaN too (ult
 * is true for unordered operands), where the MUFU would give NaN. The
 * polynomial of an argument below -126 is computed and discarded. */
static MlirValue exp2_fma_ftz(Lowerer *L, MlirValue y) {
  CgBuilder *b = &L->b;
  MlirValue under = cg_cmpf(b, "ult", y, cg_const_f32(b, -126.0));
  return cg_select(b, under, cg_const_f32(b, 0.0), exp2_poly(L, y));
}

/* Whether the softmax's exp of fragment slot e (0..3) runs on the FMA units
 * (-exp-fma=quarter: slot 3, half: odd slots; sm_90a forward kernels). By
 * count a 128 x 128 step at head dim 64 is as many cycles of the MUFU
 * (16384 ex2, 16 a cycle an SM) as of the tensor cores (two m128n128k64
 * products), but moving a quarter of them to the FP32 pipe (~11 ops each)
 * made every d64 row 1-10% slower on the H200 and half 9-13% (perf-log
 * P114): the MUFU is not what bounds that kernel, so auto keeps them all on
 * it and the option stays for the A/B. */
static bool softmax_exp_on_fma(const Lowerer *L, int e) {
  if (!L->sm90 || !forward_kernel(L))
    return false;
  if (L->exp_fma == CG_EXP_FMA_HALF)
    return e & 1;
  return L->exp_fma == CG_EXP_FMA_QUARTER && e == 3;
}

/* tanh(x) = sign(x) (1 - 2 / (e^{2|x|} + 1)): e >= 1, so the MUFU's flushing
 * ex2 and reciprocal (rcp.approx: 1 ulp) are exact enough: the result is
 * within a few ulp of 1 - 2 / (e + 1), where tanh.approx (2^-11 relative)
 * fails the accuracy rule for softcapping. Large |x| gives e = inf, 1 / inf
 * = 0 and 1. Two MUFU ops and four others, where an IEEE divide is ten with
 * a slow path (softcap 50 forward on the H100: perf-log.md P50). */
static MlirValue tanhf_(Lowerer *L, MlirValue x) {
  CgBuilder *b = &L->b;
  MlirValue ax = math1(L, "math.absf", x);
  MlirValue y = cg_mulf(b, ax, cg_const_f32(b, 2.0 * CG_LOG2E));
  /* The MUFU takes this ex2, the reciprocal and the softmax's ex2: three an
   * element, the softcap forward's bound. In forward kernels half the
   * elements (odd fragment slots) take the ex2 on the FMA units instead:
   * +4% on the softcap rows (H100, docs/perf-log.md P61; all of them: -8%). */
  bool fma = (L->elem_slot & 1) && L->exp_fma != CG_EXP_FMA_OFF && forward_kernel(L);
  MlirValue t = fma ? exp2_fma_nonneg(L, y) : cg_exp2f_ftz(b, y);
  MlirValue den = cg_addf(b, t, cg_const_f32(b, 1.0));
  MlirValue inv = cg_intrinsic(b, "llvm.nvvm.rcp.approx.ftz.f", &den, 1, b->f32);
  MlirValue r = cg_fmaf(b, inv, cg_const_f32(b, -2.0), cg_const_f32(b, 1.0));
  MlirValue args[2] = {r, x};
  return cg_intrinsic(b, "llvm.copysign.f32", args, 2, b->f32);
}

/* Floor division on i64 (the IR's index semantics). */
static MlirValue floordiv(Lowerer *L, MlirValue a, MlirValue d) {
  CgBuilder *b = &L->b;
  MlirValue q = cg_arith2(b, "arith.divsi", a, d), r = cg_arith2(b, "arith.remsi", a, d);
  MlirType it = mlirValueGetType(a);
  MlirValue zero = cg_const_int(b, it, 0);
  MlirValue nz = cg_cmpi(b, "ne", r, zero);
  MlirValue sr = cg_cmpi(b, "slt", r, zero), sd = cg_cmpi(b, "slt", d, zero);
  MlirValue adj = cg_arith2(b, "arith.andi", nz, cg_arith2(b, "arith.xori", sr, sd));
  return cg_select(b, adj, cg_subi(b, q, cg_const_int(b, it, 1)), q);
}

/* The MLIR predicate of cmp's `p` on floats, signed (index) or unsigned
 * (u32) integers. */
static const char *cmp_pred(const char *p, ElemType et) {
  static const char *const names[][4] = {{"lt", "olt", "slt", "ult"}, {"le", "ole", "sle", "ule"},
                                         {"gt", "ogt", "sgt", "ugt"}, {"ge", "oge", "sge", "uge"},
                                         {"eq", "oeq", "eq", "eq"},   {"ne", "une", "ne", "ne"}};
  int col = is_float(et) ? 1 : et == ELEM_U32 ? 3 : 2;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(p, names[i][0]) == 0)
      return names[i][col];
  return NULL;
}

/* The 64-bit product of two u32, or its high or low half. Both halves are
 * taken from the same i64 multiply (CSE merges the two a Philox round
 * makes), which LLVM keeps wide because it has two uses: one mul.wide.u32
 * (one IMAD.WIDE.U32) instead of mul.hi.u32 + mul.lo.u32 (IMAD.HI + IMAD). */
static MlirValue mul_u32_half(CgBuilder *b, MlirValue x, MlirValue y, bool high) {
  MlirValue wx = cg_op1(b, "arith.extui", &x, 1, b->i64, NULL, 0);
  MlirValue wy = cg_op1(b, "arith.extui", &y, 1, b->i64, NULL, 0);
  MlirValue w = cg_muli(b, wx, wy);
  if (high)
    w = cg_arith2(b, "arith.shrui", w, cg_const_i64(b, 32));
  return cg_op1(b, "arith.trunci", &w, 1, b->i32, NULL, 0);
}

/* The low 16 bits of an i32 as an f16 (cmp's hlt). */
static MlirValue low_half_f16(CgBuilder *b, MlirValue x) {
  return cg_bitcast(b, cg_op1(b, "arith.trunci", &x, 1, b->i16, NULL, 0), b->f16);
}

/* One element of an elementwise op. x[] are the operands converted to `et`
 * (the operation type: f32, i64, i1 or u32), except for select's condition and
 * the operands of cmp, which keep their own type `et`. */
static MlirValue scalar_op(Lowerer *L, const Op *op, MlirValue *x, ElemType et) {
  CgBuilder *b = &L->b;
  bool fl = is_float(et);
  switch (op->kind) {
  case OP_ADD: return fl ? cg_addf(b, x[0], x[1]) : et == ELEM_I1 ? cg_arith2(b, "arith.ori", x[0], x[1]) : cg_addi(b, x[0], x[1]);
  case OP_SUB: return fl ? cg_subf(b, x[0], x[1]) : cg_subi(b, x[0], x[1]);
  case OP_MUL:
    if (et == ELEM_U32)
      return mul_u32_half(b, x[0], x[1], false);
    return fl ? cg_mulf(b, x[0], x[1]) : et == ELEM_I1 ? cg_arith2(b, "arith.andi", x[0], x[1]) : cg_muli(b, x[0], x[1]);
  case OP_DIV: return fl ? cg_arith2(b, "arith.divf", x[0], x[1]) : floordiv(L, x[0], x[1]);
  /* index % truncates, as C's and fmod (docs/language.md; the interpreter) */
  case OP_REM: return fl ? fmodf_(L, x[0], x[1]) : cg_arith2(b, "arith.remsi", x[0], x[1]);
  case OP_CEILDIV: {
    MlirValue zero = cg_const_int(b, mlirValueGetType(x[0]), 0);
    MlirValue q = floordiv(L, cg_subi(b, zero, x[0]), x[1]);
    return cg_subi(b, zero, q);
  }
  case OP_MIN: return fl ? cg_minnumf(b, x[0], x[1]) : cg_arith2(b, et == ELEM_U32 ? "arith.minui" : "arith.minsi", x[0], x[1]);
  case OP_MAX: return fl ? cg_maxnumf(b, x[0], x[1]) : cg_arith2(b, et == ELEM_U32 ? "arith.maxui" : "arith.maxsi", x[0], x[1]);
  /* u32 only (the verifier's rule); add, sub, mul, and, or above and below
   * are i32 arithmetic, which wraps modulo 2^32 */
  case OP_MULHI: return mul_u32_half(b, x[0], x[1], true);
  case OP_XOR: return cg_arith2(b, "arith.xori", x[0], x[1]);
  case OP_SHR: return cg_arith2(b, "arith.shrui", x[0], x[1]);
  case OP_NEG: return fl ? math1(L, "arith.negf", x[0]) : cg_subi(b, cg_const_int(b, mlirValueGetType(x[0]), 0), x[0]);
  case OP_EXP: return cg_expf(b, x[0]);
  case OP_EXP2: return cg_exp2f(b, x[0]);
  case OP_LOG: return cg_mulf(b, cg_log2f(b, x[0]), cg_const_f32(b, CG_LN2));
  case OP_LOG2: return cg_log2f(b, x[0]);
  case OP_TANH: return tanhf_(L, x[0]);
  case OP_SQRT: return math1(L, "math.sqrt", x[0]);
  case OP_ABS:
    if (fl)
      return math1(L, "math.absf", x[0]);
    return cg_select(b, cg_cmpi(b, "slt", x[0], cg_const_int(b, mlirValueGetType(x[0]), 0)),
                     cg_subi(b, cg_const_int(b, mlirValueGetType(x[0]), 0), x[0]), x[0]);
  case OP_FLOOR: return fl ? math1(L, "math.floor", x[0]) : x[0];
  case OP_RECIP: {
    MlirValue zero = cg_const_f32(b, 0.0);
    MlirValue r = cg_arith2(b, "arith.divf", cg_const_f32(b, 1.0), x[0]);
    return cg_select(b, cg_cmpf(b, "oeq", x[0], zero), zero, r);
  }
  case OP_CMP: {
    if (strcmp(attr_str(&op->attrs, "pred", ""), "hlt") == 0) /* u32's low halves as f16 */
      return cg_cmpf(b, "olt", low_half_f16(b, x[0]), low_half_f16(b, x[1]));
    const char *p = cmp_pred(attr_str(&op->attrs, "pred", "eq"), et);
    if (!p) {
      lw_error(L, op, "unknown predicate");
      return x[0];
    }
    return fl ? cg_cmpf(b, p, x[0], x[1]) : cg_cmpi(b, p, x[0], x[1]);
  }
  case OP_AND: return cg_arith2(b, "arith.andi", x[0], x[1]);
  case OP_OR: return cg_arith2(b, "arith.ori", x[0], x[1]);
  case OP_NOT: return cg_arith2(b, "arith.xori", x[0], cg_const_int(b, b->i1, 1));
  case OP_MASK: return cg_select(b, x[1], x[0], cg_const_f32(b, -INFINITY));
  case OP_RESCALE: return cg_mulf(b, x[0], x[1]);
  default:
    lw_error(L, op, "no lowering for this op");
    return x[0];
  }
}

/* The element type an op computes in. */
static ElemType op_elem(const Op *op) {
  Type r = op->results[0]->type;
  switch (op->kind) {
  case OP_CMP: {
    ElemType a = op->operands[0]->type.elem, c = op->operands[1]->type.elem;
    if (is_float(a) || is_float(c))
      return ELEM_F32;
    if (a == ELEM_U32 || c == ELEM_U32)
      return ELEM_U32;
    return a == ELEM_I1 && c == ELEM_I1 ? ELEM_I1 : ELEM_INDEX;
  }
  case OP_SELECT: return r.elem == ELEM_F16 || r.elem == ELEM_BF16 ? r.elem : r.elem;
  default: return is_float(r.elem) ? ELEM_F32 : r.elem;
  }
}

/* ------------------------------------------------------ elementwise */

/* exp(a - b) as exp2(a * log2e - b * log2e): one FMA and one ex2 per element
 * (b is usually a row vector, so its product is shared by the row). */
static bool exp_of_sub(const Op *op, const Op **sub) {
  if (op->kind != OP_EXP)
    return false;
  const Op *d = op->operands[0]->def;
  if (!d || d->kind != OP_SUB || !is_float(d->results[0]->type.elem))
    return false;
  *sub = d;
  return true;
}

/* Whether exp(sub) may flush its denormal results (EwArgs.ftz): the
 * subtrahend a row or column vector and no log of the result. */
static bool probability_exp(const Op *op, const Op *sub) {
  Type bt = sub->operands[1]->type;
  if (bt.kind != TYPE_TILE || (bt.rows == 1) == (bt.cols == 1))
    return false;
  const Value *r = op->results[0];
  for (int i = 0; i < r->nuses; i++)
    if (r->uses[i].user->kind == OP_LOG || r->uses[i].user->kind == OP_LOG2)
      return false;
  return true;
}

typedef struct EwArgs {
  const CgVal *v[3];
  ElemType et[3];
  int n;
  double k0; /* exp(sub): the factor of operand 0 in the exponent (log2e, or c * log2e) */
  /* exp(sub) of row vectors or scalars (the online softmax's rescale factor
   * exp(m_old - m_new)): exp2((a - b) log2e), so that a == b gives exactly
   * 1. The FMA form gives 2^(rounding error of b log2e), about 1 + 5e-6 at
   * m = 120, and that factor compounds over every K/V step of a long split:
   * l drifts by 3e-4 after 60 steps (O/l does not: O has the same factor). */
  bool exact_sub;
  /* exp(sub) whose subtrahend is a row or column vector: a tile minus its
   * rows' max or LSE (the softmax and the backward's P), or one such vector
   * minus another (the rescale factor), a value in [0, 1] whose denormals
   * (below 2^-126) may flush to 0 (cg_exp2f_ftz). A user's exp takes this
   * form only with a position in its exponent (exp(s - q)), where a flushed
   * denormal is far below the accuracy rule's reach unless a log undoes the
   * exp: then it keeps the denormals. */
  bool ftz;
  /* A float division of a tile by a uniform value (a scalar: softcap's
   * s / cap, constant or run-time): its reciprocal, computed once, which
   * every element multiplies by (div.rn per element is ten instructions
   * with a slow path; x * (1 / y) is within 1.5 ulp of x / y). */
  MlirValue inv_divisor;
  /* add / sub of a product used only here (fused_product): v[0] * v[1]
   * then + v[2] (1), - v[2] (-1), or v[2] - (2); one FMA an element */
  int fma;
} EwArgs;

/* add(mul(x, y), z), sub(mul(x, y), z) or sub(z, mul(x, y)) on f32, the
 * product used by nothing else: ALiBi's and a bias's s * scale - b, every
 * element's FMUL and FADD one FFMA (a rounding fewer; the product, dead,
 * goes). Returns the operand index of the product, or -1. */
static int fused_product(const Op *op) {
  if ((op->kind != OP_ADD && op->kind != OP_SUB) || op->noperands != 2 ||
      op->results[0]->type.elem != ELEM_F32)
    return -1;
  for (int i = 0; i < 2; i++) {
    const Value *v = op->operands[i];
    const Op *d = v->def;
    if (d && d->kind == OP_MUL && d->noperands == 2 && v->nuses == 1 &&
        v->type.elem == ELEM_F32 && d->operands[0]->type.elem == ELEM_F32 &&
        d->operands[1]->type.elem == ELEM_F32)
      return i;
  }
  return -1;
}

/* exp(sub(mul(x, c), m)) with c a scalar constant (passes/fold_scale.c):
 * x and c, so that the exponent is one FMA, x * (c log2e) - m log2e. */
static bool scaled_operand(const Op *sub, const Value **x, double *c) {
  const Op *d = sub->operands[0]->def;
  if (!d || d->kind != OP_MUL || d->noperands != 2)
    return false;
  const Value *a = d->operands[0], *k = d->operands[1];
  if (a->type.kind != TYPE_TILE || !is_float(a->type.elem) || k->type.kind != TYPE_SCALAR ||
      !k->def || k->def->kind != OP_CONST || !is_float(k->type.elem))
    return false;
  *x = a;
  *c = attr_float(&k->def->attrs, "value", 1.0);
  return true;
}

static MlirValue ew_element(Lowerer *L, const Op *op, const EwArgs *a, ElemType et,
                            const Op *sub, TileClass rc, int mi, int ni, int e) {
  CgBuilder *b = &L->b;
  MlirValue x[3];
  bool tile = op->results[0]->type.kind == TYPE_TILE;
  ElemType to = op->kind == OP_SELECT ? op->results[0]->type.elem : et;
  /* Index values of tiles are i32 (sequence positions; the ABI's lengths
   * are i32), scalars i64: a scalar meeting a tile is narrowed. */
  MlirType tt = (tile && to == ELEM_INDEX) ? b->i32 : lw_elem_type(L, to);
  for (int i = 0; i < a->n; i++) {
    MlirValue v = lw_elem(L, a->v[i], rc, mi, ni, e);
    bool keep = (op->kind == OP_SELECT && i == 0) || (op->kind == OP_MASK && i == 1);
    x[i] = keep ? v : convert(L, v, a->et[i], to, tt);
  }
  MlirValue (*ex2)(CgBuilder *, MlirValue) = a->ftz ? cg_exp2f_ftz : cg_exp2f;
  if (sub && a->exact_sub) /* (a - b) log2e: exactly 1 when a == b */
    return ex2(b, cg_mulf(b, cg_subf(b, x[0], x[1]), cg_const_f32(b, a->k0)));
  if (sub) {
    MlirValue nb = cg_mulf(b, x[1], cg_const_f32(b, -CG_LOG2E));
    MlirValue y = cg_fmaf(b, x[0], cg_const_f32(b, a->k0), nb);
    if (a->ftz && tile && softmax_exp_on_fma(L, e))
      return exp2_fma_ftz(L, y);
    return ex2(b, y);
  }
  if (!mlirValueIsNull(a->inv_divisor))
    return cg_mulf(b, x[0], a->inv_divisor);
  if (a->fma == 1)
    return cg_fmaf(b, x[0], x[1], x[2]);
  if (a->fma == -1)
    return cg_fmaf(b, x[0], x[1], math1(L, "arith.negf", x[2]));
  if (a->fma == 2)
    return cg_fmaf(b, math1(L, "arith.negf", x[0]), x[1], x[2]);
  if (op->kind == OP_SELECT && attr_int(&op->attrs, "dropout", 0) && to == ELEM_F32)
    return cg_opaque_f32(b, cg_select(b, x[0], x[1], x[2]));
  if (op->kind == OP_SELECT)
    return cg_select(b, x[0], x[1], x[2]);
  if (op->kind == OP_CAST)
    return x[0];
  L->elem_slot = tile ? e : 0;
  MlirValue r = scalar_op(L, op, x, et);
  L->elem_slot = 0;
  return r;
}

/* The `lanes` of a's tile operands when every one is a row vector held
 * across the lanes alike (cg_lowerer.h CgVal.lanes), else 0. */
static int lane_held_operands(const EwArgs *a) {
  int lanes = 0;
  for (int i = 0; i < a->n; i++) {
    const CgVal *v = a->v[i];
    if (v->kind == CV_SCALAR || v->splat)
      continue;
    if (!v->lanes || (lanes && v->lanes != lanes))
      return 0;
    lanes = v->lanes;
  }
  return lanes;
}

void lw_elementwise(Lowerer *L, const Op *op) {
  if (op->nresults != 1 || op->noperands < 1 || op->noperands > 3) {
    lw_error(L, op, "no lowering for this op");
    return;
  }
  if (op->kind == OP_CAST && lw_dropout_cast(L, op))
    return;
  const CgVal *x0 = op->kind == OP_CAST ? lw_get(L, op->operands[0]) : NULL;
  if (x0 && x0->kind == CV_SMEM) {
    lw_read_staged(L, op);
    return;
  }
  const Op *sub = NULL;
  EwArgs a = {.n = op->noperands, .k0 = CG_LOG2E};
  const Op *src = exp_of_sub(op, &sub) ? sub : op;
  const Value *sx = NULL;
  double sc = 1.0;
  if (sub && scaled_operand(sub, &sx, &sc))
    a.k0 = sc * CG_LOG2E;
  else if (sub)
    a.exact_sub = op->results[0]->type.kind == TYPE_SCALAR || op->results[0]->type.cols == 1;
  a.n = src->noperands;
  const Value *fused[3] = {NULL};
  int prod = sub ? -1 : fused_product(op);
  if (prod >= 0) {
    const Op *m = op->operands[prod]->def;
    fused[0] = m->operands[0], fused[1] = m->operands[1], fused[2] = op->operands[1 - prod];
    a.fma = op->kind == OP_ADD ? 1 : prod == 0 ? -1 : 2;
    a.n = 3;
  }
  for (int i = 0; i < a.n; i++) {
    const Value *ov = fused[i] ? fused[i] : (i == 0 && sx) ? sx : src->operands[i];
    a.v[i] = lw_get(L, ov);
    a.et[i] = ov->type.elem;
    if (!a.v[i] || a.v[i]->kind == CV_SMEM) {
      lw_error(L, op, "operand %d is not in registers", i);
      return;
    }
  }
  if (sub)
    a.ftz = probability_exp(op, sub);
  Type rt = op->results[0]->type;
  /* A cast converts to the result type; everything else computes in et. */
  ElemType et = op->kind == OP_CAST ? rt.elem : op_elem(op);
  if (op->kind == OP_CAST)
    a.et[0] = op->operands[0]->type.elem;
  bool all_uniform = true;
  for (int i = 0; i < a.n; i++)
    all_uniform &= a.v[i]->kind == CV_SCALAR || a.v[i]->splat;
  if (rt.kind == TYPE_SCALAR || all_uniform) {
    MlirValue r = ew_element(L, op, &a, et, sub, TC_ONE, 0, 0, 0);
    lw_set(L, op->results[0], rt.kind == TYPE_SCALAR ? lw_scalar(L, rt, r) : lw_splat(L, rt, r));
    return;
  }
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return;
  for (int i = 0; i < a.n; i++)
    if (a.v[i]->kind == CV_TILE && !a.v[i]->splat && !lw_compatible(&a.v[i]->g, &g)) {
      char b1[96], b2[96];
      lw_error(L, op, "operand %d (%s) is distributed differently from the result (%s)", i,
               type_str(a.v[i]->type, b1, sizeof b1), type_str(rt, b2, sizeof b2));
      return;
    }
  int lanes = g.cls == TC_COLV ? lane_held_operands(&a) : 0;
  if (lanes) { /* slot by slot, held across the lanes as its operands */
    CgVal *r = lw_tile(L, rt, &g);
    r->lanes = r->ne = lanes;
    L->lane_slots = true;
    for (int k = 0; k < lanes; k++)
      r->e[k] = ew_element(L, op, &a, et, sub, g.cls, 0, k, k & 1);
    L->lane_slots = false;
    lw_set(L, op->results[0], r);
    return;
  }
  CgVal *r = lw_tile(L, rt, &g);
  int mi[4096], ni[4096], e[4096];
  if (r->ne > 4096) {
    lw_error(L, op, "tile too large for one thread (%d values)", r->ne);
    return;
  }
  lw_positions(&g, mi, ni, e);
  if (op->kind == OP_DIV && et == ELEM_F32 && (a.v[1]->kind == CV_SCALAR || a.v[1]->splat)) {
    MlirValue y = convert(L, lw_elem(L, a.v[1], TC_ONE, 0, 0, 0), a.et[1], ELEM_F32, L->b.f32);
    a.inv_divisor = cg_arith2(&L->b, "arith.divf", cg_const_f32(&L->b, 1.0), y);
  }
  for (int k = 0; k < r->ne; k++)
    r->e[k] = ew_element(L, op, &a, et, sub, g.cls, mi[k], ni[k], e[k]);
  lw_set(L, op->results[0], r);
}

/* ------------------------------------------------------ index tiles */

/* Is the index scalar v a multiple of m by its definition (a constant, or
 * sums and products of such: the tile bases q0 = i * Br, k0 = j * Bc)? */
static bool multiple_of(const Value *v, int m, int depth) {
  double c;
  if (value_const((Value *)v, &c))
    return fmod(c, m) == 0;
  const Op *d = v->def;
  if (!d || depth > 8 || d->noperands != 2)
    return false;
  if (d->kind == OP_MUL)
    return multiple_of(d->operands[0], m, depth + 1) || multiple_of(d->operands[1], m, depth + 1);
  if (d->kind == OP_ADD || d->kind == OP_SUB)
    return multiple_of(d->operands[0], m, depth + 1) && multiple_of(d->operands[1], m, depth + 1);
  return false;
}

bool lw_index_multiple_of(const Value *v, int m) { return multiple_of(v, m, 0); }

/* iota's dropout form (ir/dropout.c), (base + pos) & M, where the
 * elements of one Philox group must get one SSA value. pos is warp base +
 * lane + c (lw_elem_split); with base and the warp base multiples of A (16
 * or 32) and M below A (the slot bits) or clearing only bits below A (the
 * counters), (B + (lane | c)) & M is (lane & M) | (c & M), resp.
 * B + (lane & M) + (c & M): one shared value plus a constant. Anything
 * else takes the per-element form. */
static void iota_masked(Lowerer *L, const Op *op, const TileGeom *g, int axis, CgVal *r,
                        const int *mi, const int *ni, const int *e) {
  CgBuilder *b = &L->b;
  int64_t m = attr_int(&op->attrs, "and", -1);
  MlirValue base = op->noperands ? cg_int_cast(b, lw_scalar_operand(L, op, 0), b->i32)
                                 : cg_const_i32(b, 0);
  MlirValue lane, wbase;
  int c0, align;
  wbase = lw_elem_split(L, g, axis, 0, 0, &lane, &c0, &align);
  int a = 16;
  bool low = (m & ~(int64_t)15) == 0, clear = (~m & ~(int64_t)15) == 0;
  if (!low && !clear) {
    a = 32;
    low = (m & ~(int64_t)31) == 0, clear = (~m & ~(int64_t)31) == 0;
  }
  bool fast = (low || clear) && align % a == 0 &&
              (op->noperands == 0 || multiple_of(op->operands[0], a, 0));
  MlirValue mask = cg_const_i32(b, (int32_t)m);
  MlirValue shared = fast ? cg_arith2(b, "arith.andi", lane, mask) : (MlirValue){NULL};
  if (fast && clear)
    shared = cg_addi(b, cg_addi(b, base, wbase), shared);
  for (int k = 0; k < r->ne; k++) {
    int c;
    lw_elem_split(L, g, axis, axis == 0 ? mi[k] : ni[k], e[k], &lane, &c, &align);
    if (!fast) {
      MlirValue pos = cg_addi_c(b, cg_addi(b, base, cg_addi(b, wbase, lane)), c);
      r->e[k] = cg_arith2(b, "arith.andi", pos, mask);
    } else if (low) {
      r->e[k] = (c & m) ? cg_arith2(b, "arith.ori", shared, cg_const_i32(b, (int32_t)(c & m)))
                        : shared;
    } else {
      r->e[k] = (c & m) ? cg_addi_c(b, shared, (int)(c & m)) : shared;
    }
  }
}

void lw_iota(Lowerer *L, const Op *op) {
  Type rt = op->results[0]->type;
  int axis = (int)attr_int(&op->attrs, "axis", 0);
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return;
  if ((axis == 0 && g.cls != TC_ROWV) || (axis == 1 && g.cls != TC_COLV)) {
    lw_error(L, op, "iota along axis %d needs an %s tile", axis, axis ? "1 x C" : "R x 1");
    return;
  }
  CgVal *r = lw_tile(L, rt, &g);
  int mi[4096], ni[4096], e[4096];
  lw_positions(&g, mi, ni, e);
  if (op->noperands || attr_get(&op->attrs, "and")) {
    iota_masked(L, op, &g, axis, r, mi, ni, e);
  } else {
    for (int k = 0; k < r->ne; k++) /* i32: see ew_element */
      r->e[k] = axis == 0 ? lw_elem_row(L, &g, mi[k], e[k]) : lw_elem_col(L, &g, ni[k], e[k]);
  }
  lw_set(L, op->results[0], r);
}

void lw_full(Lowerer *L, const Op *op) {
  Type rt = op->results[0]->type;
  double v = attr_float(&op->attrs, "value", 0.0);
  MlirType mt = lw_val_type(L, rt);
  MlirValue c = is_float(rt.elem) ? cg_const_float(&L->b, mt, v) : cg_const_int(&L->b, mt, (int64_t)v);
  if (rt.kind == TYPE_SCALAR) {
    lw_set(L, op->results[0], lw_scalar(L, rt, c));
    return;
  }
  CgVal *s = lw_splat(L, rt, c);
  if (s)
    lw_set(L, op->results[0], s);
}
