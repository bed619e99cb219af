/* lower_tiles.c - register tiles: elementwise ops, index tiles, row
 * reductions, cross-warp reductions and matmuls on the tensor cores.
 *
 * Every tile op is unrolled over the elements one thread holds (TileGeom in
 * lower_internal.h): C loops here, straight-line SSA values in the MLIR.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codegen/lower_internal.h"
#include "mlir-c/BuiltinTypes.h"

#define LOG2E 1.4426950408889634
#define LN2 0.6931471805599453

/* ----------------------------------------------------------- geometry */

static bool geom_fail(Lowerer *L, const Op *op, const char *msg, Type t) {
  char buf[96];
  if (op)
    lw_error(L, op, "%s (%s, %d warps)", msg, type_str(t, buf, sizeof buf), L->warps);
  else
    lw_error(L, NULL, "%s", msg);
  return false;
}

bool lw_geom(Lowerer *L, Type t, TileGeom *g, const Op *op) {
  memset(g, 0, sizeof *g);
  int R = t.rows, C = t.cols, W = L->warps;
  if (R <= 0 || C <= 0)
    return geom_fail(L, op, "tile extents are still symbolic", t);
  g->rows = R;
  g->cols = C;
  g->cls = (R == 1 && C == 1) ? TC_ONE : C == 1 ? TC_ROWV : R == 1 ? TC_COLV : TC_FULL;
  g->row_split = t.dist == DIST_ROWS && R > 1;
  g->col_split = t.dist == DIST_COLS && C > 1;
  int rw = R, cw = C;
  if (g->row_split) {
    if (R % W)
      return geom_fail(L, op, "rows do not split evenly over the warps", t);
    rw = R / W;
  }
  if (g->col_split) {
    if (C % W)
      return geom_fail(L, op, "columns do not split evenly over the warps", t);
    cw = C / W;
  }
  if (g->cls == TC_ROWV || g->cls == TC_FULL) {
    if (rw % 16)
      return geom_fail(L, op, "each warp needs a multiple of 16 rows", t);
    g->nm = rw / 16;
  }
  if (g->cls == TC_COLV || g->cls == TC_FULL) {
    if (cw % 8)
      return geom_fail(L, op, "each warp needs a multiple of 8 columns", t);
    g->nn = cw / 8;
  }
  return true;
}

static int geom_count(const TileGeom *g) {
  switch (g->cls) {
  case TC_ONE: return 1;
  case TC_ROWV: return 2 * g->nm;
  case TC_COLV: return 2 * g->nn;
  case TC_FULL: return 4 * g->nm * g->nn;
  }
  return 0;
}

int lw_index_of(const TileGeom *g, int mi, int ni, int e) {
  switch (g->cls) {
  case TC_ONE: return 0;
  case TC_ROWV: return mi * 2 + (e >> 1);
  case TC_COLV: return ni * 2 + (e & 1);
  case TC_FULL: return (mi * g->nn + ni) * 4 + e;
  }
  return 0;
}

/* Result positions in element order (the inverse of lw_index_of). */
int lw_positions(const TileGeom *g, int *mi, int *ni, int *e) {
  int n = 0;
  switch (g->cls) {
  case TC_ONE:
    mi[0] = ni[0] = e[0] = 0;
    return 1;
  case TC_ROWV:
    for (int m = 0; m < g->nm; m++)
      for (int h = 0; h < 2; h++, n++)
        mi[n] = m, ni[n] = 0, e[n] = 2 * h;
    return n;
  case TC_COLV:
    for (int c = 0; c < g->nn; c++)
      for (int k = 0; k < 2; k++, n++)
        mi[n] = 0, ni[n] = c, e[n] = k;
    return n;
  case TC_FULL:
    for (int m = 0; m < g->nm; m++)
      for (int c = 0; c < g->nn; c++)
        for (int k = 0; k < 4; k++, n++)
          mi[n] = m, ni[n] = c, e[n] = k;
    return n;
  }
  return 0;
}

CgVal *lw_tile(Lowerer *L, Type t, const TileGeom *g) {
  CgVal *cv = lw_alloc(L, sizeof *cv);
  cv->kind = CV_TILE;
  cv->type = t;
  cv->g = *g;
  cv->ne = geom_count(g);
  cv->e = lw_alloc(L, sizeof(MlirValue) * (size_t)cv->ne);
  cv->async_seq = -1;
  return cv;
}

CgVal *lw_splat(Lowerer *L, Type t, MlirValue v) {
  TileGeom g;
  if (!lw_geom(L, t, &g, NULL))
    return NULL;
  CgVal *cv = lw_alloc(L, sizeof *cv);
  cv->kind = CV_TILE;
  cv->type = t;
  cv->g = g;
  cv->ne = geom_count(&g);
  cv->splat = true;
  cv->v = v;
  cv->async_seq = -1;
  return cv;
}

MlirValue lw_elem(Lowerer *L, const CgVal *cv, TileClass rc, int mi, int ni, int e) {
  (void)L;
  (void)rc;
  if (cv->kind == CV_SCALAR || cv->splat)
    return cv->v;
  return cv->e[lw_index_of(&cv->g, mi, ni, e)];
}

/* The warp's first row / column of a tile (i32), 0 when not split. */
static MlirValue row_base(Lowerer *L, const TileGeom *g) {
  if (!g->row_split)
    return cg_const_i32(&L->b, 0);
  return cg_muli_c(&L->b, L->warp, 16 * g->nm);
}

static MlirValue col_base(Lowerer *L, const TileGeom *g) {
  if (!g->col_split)
    return cg_const_i32(&L->b, 0);
  return cg_muli_c(&L->b, L->warp, 8 * g->nn);
}

MlirValue lw_elem_row(Lowerer *L, const TileGeom *g, int mi, int e) {
  MlirValue r = cg_addi(&L->b, row_base(L, g), L->lg);
  return cg_addi_c(&L->b, r, mi * 16 + 8 * (e >> 1));
}

MlirValue lw_elem_col(Lowerer *L, const TileGeom *g, int ni, int e) {
  MlirValue c = cg_addi(&L->b, col_base(L, g), cg_muli_c(&L->b, L->lq, 2));
  return cg_addi_c(&L->b, c, ni * 8 + (e & 1));
}

/* May an operand of geometry `o` be read at the positions of `r`? */
static bool compatible(const TileGeom *o, const TileGeom *r) {
  bool rows = o->cls == TC_ROWV || o->cls == TC_FULL;
  bool cols = o->cls == TC_COLV || o->cls == TC_FULL;
  if (rows && !(r->cls == TC_ROWV || r->cls == TC_FULL))
    return false;
  if (cols && !(r->cls == TC_COLV || r->cls == TC_FULL))
    return false;
  if (rows && (o->nm != r->nm || o->row_split != r->row_split))
    return false;
  if (cols && (o->nn != r->nn || o->col_split != r->col_split))
    return false;
  return true;
}

/* ------------------------------------------------------- scalar math */

static bool is_float(ElemType e) { return e == ELEM_F32 || e == ELEM_F16 || e == ELEM_BF16; }

/* Converts one value between element types (cast semantics). */
static MlirValue convert(Lowerer *L, MlirValue v, ElemType from, ElemType to, MlirType tt) {
  CgBuilder *b = &L->b;
  if (from == to)
    return from == ELEM_INDEX ? cg_int_cast(b, v, tt) : v;
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

/* Math goes through LLVM's own intrinsics: convert-gpu-to-nvvm would turn
 * math ops (and llvm.intr.* math ops) into libdevice calls, which we never
 * link. The NVPTX backend selects ex2.approx.f32, sqrt.rn.f32, abs.f32,
 * cvt.rmi.f32 and fma.rn.f32 for these. */
static MlirValue intr1(Lowerer *L, const char *name, MlirValue x) {
  return cg_intrinsic(&L->b, name, &x, 1, mlirValueGetType(x));
}

static MlirValue intr2(Lowerer *L, const char *name, MlirValue x, MlirValue y) {
  MlirValue ops[2] = {x, y};
  return cg_intrinsic(&L->b, name, ops, 2, mlirValueGetType(x));
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

/* 2^x on the MUFU unit (ex2.approx.f32: about 2 ulp). */
static MlirValue exp2f_(Lowerer *L, MlirValue x) { return intr1(L, "llvm.exp2.f32", x); }

static MlirValue fma_(Lowerer *L, MlirValue a, MlirValue b, MlirValue c) {
  MlirValue ops[3] = {a, b, c};
  return cg_intrinsic(&L->b, "llvm.fma.f32", ops, 3, mlirValueGetType(a));
}

/* fmod(a, b) = a - trunc(a / b) * b (frem would become a libdevice call). */
static MlirValue fmodf_(Lowerer *L, MlirValue a, MlirValue b) {
  MlirValue q = intr1(L, "llvm.trunc.f32", cg_arith2(&L->b, "arith.divf", a, b));
  return cg_subf(&L->b, a, cg_mulf(&L->b, q, b));
}

/* log2 on the MUFU unit (lg2.approx: 2^-22 relative error); log2(0) = -inf. */
static MlirValue log2f_(Lowerer *L, MlirValue x) {
  return cg_intrinsic(&L->b, "llvm.nvvm.lg2.approx.f", &x, 1, L->b.f32);
}

/* tanh(x) = sign(x) (1 - 2 / (e^{2|x|} + 1)): exact to a few ulp with
 * ex2.approx, unlike tanh.approx (2^-11), which the accuracy rule rejects for
 * softcapping. Large |x| gives e = inf and 1. */
static MlirValue tanhf_(Lowerer *L, MlirValue x) {
  CgBuilder *b = &L->b;
  MlirValue ax = math1(L, "math.absf", x);
  MlirValue t = exp2f_(L, cg_mulf(b, ax, cg_const_f32(b, 2.0 * LOG2E)));
  MlirValue q = cg_arith2(b, "arith.divf", cg_const_f32(b, 2.0), cg_addf(b, t, cg_const_f32(b, 1.0)));
  MlirValue r = cg_subf(b, cg_const_f32(b, 1.0), q);
  MlirValue neg = cg_cmpf(b, "olt", x, cg_const_f32(b, 0.0));
  return cg_select(b, neg, math1(L, "arith.negf", r), r);
}

/* Floor division and modulo on i64 (the IR's index semantics). */
static MlirValue floordiv(Lowerer *L, MlirValue a, MlirValue d, bool want_rem) {
  CgBuilder *b = &L->b;
  MlirValue q = cg_arith2(b, "arith.divsi", a, d), r = cg_arith2(b, "arith.remsi", a, d);
  MlirType it = mlirValueGetType(a);
  MlirValue zero = cg_const_int(b, it, 0);
  MlirValue nz = cg_cmpi(b, "ne", r, zero);
  MlirValue sr = cg_cmpi(b, "slt", r, zero), sd = cg_cmpi(b, "slt", d, zero);
  MlirValue adj = cg_arith2(b, "arith.andi", nz, cg_arith2(b, "arith.xori", sr, sd));
  if (want_rem)
    return cg_select(b, adj, cg_addi(b, r, d), r);
  return cg_select(b, adj, cg_subi(b, q, cg_const_int(b, it, 1)), q);
}

static const char *cmp_pred(const char *p, bool fl) {
  static const char *const names[][3] = {{"lt", "olt", "slt"}, {"le", "ole", "sle"},
                                         {"gt", "ogt", "sgt"}, {"ge", "oge", "sge"},
                                         {"eq", "oeq", "eq"},  {"ne", "une", "ne"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(p, names[i][0]) == 0)
      return names[i][fl ? 1 : 2];
  return NULL;
}

/* One element of an elementwise op. x[] are the operands converted to `et`
 * (the operation type: f32, i64 or i1), except for select's condition and
 * the operands of cmp, which keep their own type `et`. */
static MlirValue scalar_op(Lowerer *L, const Op *op, MlirValue *x, ElemType et) {
  CgBuilder *b = &L->b;
  bool fl = is_float(et);
  switch (op->kind) {
  case OP_ADD: return fl ? cg_addf(b, x[0], x[1]) : et == ELEM_I1 ? cg_arith2(b, "arith.ori", x[0], x[1]) : cg_addi(b, x[0], x[1]);
  case OP_SUB: return fl ? cg_subf(b, x[0], x[1]) : cg_subi(b, x[0], x[1]);
  case OP_MUL: return fl ? cg_mulf(b, x[0], x[1]) : et == ELEM_I1 ? cg_arith2(b, "arith.andi", x[0], x[1]) : cg_muli(b, x[0], x[1]);
  case OP_DIV: return fl ? cg_arith2(b, "arith.divf", x[0], x[1]) : floordiv(L, x[0], x[1], false);
  case OP_REM: return fl ? fmodf_(L, x[0], x[1]) : floordiv(L, x[0], x[1], true);
  case OP_CEILDIV: {
    MlirValue zero = cg_const_int(b, mlirValueGetType(x[0]), 0);
    MlirValue q = floordiv(L, cg_subi(b, zero, x[0]), x[1], false);
    return cg_subi(b, zero, q);
  }
  case OP_MIN: return fl ? intr2(L, "llvm.minnum.f32", x[0], x[1]) : cg_arith2(b, "arith.minsi", x[0], x[1]);
  case OP_MAX: return fl ? intr2(L, "llvm.maxnum.f32", x[0], x[1]) : cg_arith2(b, "arith.maxsi", x[0], x[1]);
  case OP_NEG: return fl ? math1(L, "arith.negf", x[0]) : cg_subi(b, cg_const_int(b, mlirValueGetType(x[0]), 0), x[0]);
  case OP_EXP: return exp2f_(L, cg_mulf(b, x[0], cg_const_f32(b, LOG2E)));
  case OP_EXP2: return exp2f_(L, x[0]);
  case OP_LOG: return cg_mulf(b, log2f_(L, x[0]), cg_const_f32(b, LN2));
  case OP_LOG2: return log2f_(L, x[0]);
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
    const char *p = cmp_pred(attr_str(&op->attrs, "pred", "eq"), fl);
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
} EwArgs;

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
  if (sub && a->exact_sub) /* (a - b) log2e: exactly 1 when a == b */
    return exp2f_(L, cg_mulf(b, cg_subf(b, x[0], x[1]), cg_const_f32(b, a->k0)));
  if (sub) {
    MlirValue nb = cg_mulf(b, x[1], cg_const_f32(b, -LOG2E));
    return exp2f_(L, fma_(L, x[0], cg_const_f32(b, a->k0), nb));
  }
  if (op->kind == OP_SELECT)
    return cg_select(b, x[0], x[1], x[2]);
  if (op->kind == OP_CAST)
    return x[0];
  return scalar_op(L, op, x, et);
}

void lw_elementwise(Lowerer *L, const Op *op) {
  if (op->nresults != 1 || op->noperands < 1 || op->noperands > 3) {
    lw_error(L, op, "no lowering for this op");
    return;
  }
  const Op *sub = NULL;
  EwArgs a = {.n = op->noperands, .k0 = LOG2E};
  const Op *src = exp_of_sub(op, &sub) ? sub : op;
  const Value *sx = NULL;
  double sc = 1.0;
  if (sub && scaled_operand(sub, &sx, &sc))
    a.k0 = sc * LOG2E;
  else if (sub)
    a.exact_sub = op->results[0]->type.kind == TYPE_SCALAR || op->results[0]->type.cols == 1;
  a.n = src->noperands;
  for (int i = 0; i < a.n; i++) {
    const Value *ov = (i == 0 && sx) ? sx : src->operands[i];
    a.v[i] = lw_get(L, ov);
    a.et[i] = ov->type.elem;
    if (!a.v[i] || a.v[i]->kind == CV_SMEM) {
      lw_error(L, op, "operand %d is not in registers", i);
      return;
    }
  }
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
    if (a.v[i]->kind == CV_TILE && !a.v[i]->splat && !compatible(&a.v[i]->g, &g)) {
      char b1[96], b2[96];
      lw_error(L, op, "operand %d (%s) is distributed differently from the result (%s)", i,
               type_str(a.v[i]->type, b1, sizeof b1), type_str(rt, b2, sizeof b2));
      return;
    }
  CgVal *r = lw_tile(L, rt, &g);
  int mi[4096], ni[4096], e[4096];
  if (r->ne > 4096) {
    lw_error(L, op, "tile too large for one thread (%d values)", r->ne);
    return;
  }
  lw_positions(&g, mi, ni, e);
  for (int k = 0; k < r->ne; k++)
    r->e[k] = ew_element(L, op, &a, et, sub, g.cls, mi[k], ni[k], e[k]);
  lw_set(L, op->results[0], r);
}

/* ------------------------------------------------------ index tiles */

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
  for (int k = 0; k < r->ne; k++) {
    MlirValue v = axis == 0 ? lw_elem_row(L, &g, mi[k], e[k]) : lw_elem_col(L, &g, ni[k], e[k]);
    r->e[k] = v; /* i32: see ew_element */
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

/* --------------------------------------------------- row reductions */

static MlirValue combine(Lowerer *L, bool is_max, MlirValue a, MlirValue b) {
  return is_max ? intr2(L, "llvm.maxnum.f32", a, b) : cg_addf(&L->b, a, b);
}

/* rowmax / rowsum: within the thread over its fragments, then over the
 * quad of lanes sharing a row (shuffle xor 1, 2). */
void lw_reduce_rows(Lowerer *L, const Op *op) {
  bool is_max = op->kind == OP_ROWMAX;
  const CgVal *x = lw_get(L, op->operands[0]);
  Type rt = op->results[0]->type;
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return;
  if (x->kind != CV_TILE || x->g.cls != TC_FULL || g.cls != TC_ROWV || x->g.nm != g.nm ||
      x->g.row_split != g.row_split) {
    lw_error(L, op, "expects an R x C register tile and gives R x 1 with the same rows");
    return;
  }
  CgVal *r = lw_tile(L, rt, &g);
  for (int mi = 0; mi < g.nm; mi++)
    for (int h = 0; h < 2; h++) {
      MlirValue acc = lw_elem(L, x, TC_FULL, mi, 0, 2 * h);
      for (int ni = 0; ni < x->g.nn; ni++)
        for (int c = 0; c < 2; c++)
          if (ni || c)
            acc = combine(L, is_max, acc, lw_elem(L, x, TC_FULL, mi, ni, 2 * h + c));
      acc = combine(L, is_max, acc, cg_shuffle_xor(&L->b, acc, 1));
      acc = combine(L, is_max, acc, cg_shuffle_xor(&L->b, acc, 2));
      r->e[mi * 2 + h] = acc;
    }
  lw_set(L, op->results[0], r);
}

/* ------------------------------------------------ cross-warp reduce */

/* Scratch row stride in floats: padded so that the 8 row groups of a warp
 * do not all hit one bank. */
static int scratch_stride(int cols) { return cols + 4; }

typedef struct ScratchCtx {
  Lowerer *L;
  int bytes;
} ScratchCtx;

static void scratch_need(Op *op, void *ctx) {
  ScratchCtx *s = ctx;
  if (op->kind != OP_XWARP_REDUCE || op->noperands < 1)
    return;
  Type t = op->operands[0]->type;
  int W = s->L->warps, need;
  if (t.cols == 1)
    need = W * t.rows * 4;
  else
    need = W * 16 * scratch_stride(t.cols) * 4;
  if (need > s->bytes)
    s->bytes = need;
}

int lw_scratch_bytes(Lowerer *L) {
  ScratchCtx s = {L, 0};
  func_walk((Func *)L->f, scratch_need, &s);
  return s.bytes;
}

typedef struct AliasCtx {
  bool seen_xwarp, ok;
} AliasCtx;

static bool in_sequential_loop(const Op *op) {
  for (const Block *b = op->parent; b && b->parent_op; b = b->parent_op->parent)
    if (b->parent_op->kind == OP_FOR && !for_is_parallel(b->parent_op))
      return true;
  return false;
}

static void alias_scan(Op *op, void *ctx) {
  AliasCtx *a = ctx;
  if (op->kind == OP_XWARP_REDUCE) {
    a->seen_xwarp = true;
    a->ok &= !in_sequential_loop(op);
  } else if ((op->kind == OP_LOAD || op->kind == OP_LOAD_PAGED) && op->nresults == 1 &&
             lw_is_staged_type(op->results[0]->type)) {
    a->ok &= !a->seen_xwarp;
  }
}

bool lw_scratch_can_alias(Lowerer *L) {
  AliasCtx a = {false, true};
  func_walk((Func *)L->f, alias_scan, &a);
  return a.ok && a.seen_xwarp;
}

static MlirValue scratch_ptr(Lowerer *L, MlirValue float_index) {
  CgBuilder *b = &L->b;
  MlirValue byte = cg_addi_c(b, cg_muli_c(b, float_index, 4), L->scratch_off);
  return cg_gep(b, L->smem, byte, b->i8);
}

/* Every warp holds a partial R x 1 vector; all warps end with the total. */
static void xwarp_rowv(Lowerer *L, const Op *op, const CgVal *x, CgVal *r, bool is_max) {
  CgBuilder *b = &L->b;
  int R = x->g.rows;
  lw_barrier(L);
  /* One lane per quad writes: the quad's four lanes hold the same rows. */
  MlirBlock wr;
  cg_if(b, cg_cmpi(b, "eq", L->lq, cg_const_i32(b, 0)), NULL, 0, false, &wr, NULL);
  MlirBlock outer = b->block;
  cg_builder_set_block(b, wr);
  for (int mi = 0; mi < x->g.nm; mi++)
    for (int h = 0; h < 2; h++) {
      MlirValue row = lw_elem_row(L, &x->g, mi, 2 * h);
      MlirValue idx = cg_addi(b, cg_muli_c(b, L->warp, R), row);
      cg_store(b, lw_elem(L, x, TC_ROWV, mi, 0, 2 * h), scratch_ptr(L, idx), 4);
    }
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
  cg_barrier(b);
  for (int mi = 0; mi < r->g.nm; mi++)
    for (int h = 0; h < 2; h++) {
      MlirValue row = lw_elem_row(L, &r->g, mi, 2 * h);
      MlirValue acc = (MlirValue){NULL};
      for (int w = 0; w < L->warps; w++) {
        MlirValue v = cg_load(b, scratch_ptr(L, cg_addi_c(b, row, w * R)), b->f32, 4);
        acc = w ? combine(L, is_max, acc, v) : v;
      }
      r->e[mi * 2 + h] = acc;
    }
  L->smem_read_since_barrier = true;
  (void)op;
}

/* Every warp holds a partial R x C tile; the result is column-split: each
 * warp sums its columns over the partials. One m16 row block at a time, to
 * keep the scratch at W x 16 x C floats. */
static void xwarp_full(Lowerer *L, const Op *op, const CgVal *x, CgVal *r, bool is_max) {
  CgBuilder *b = &L->b;
  int S = scratch_stride(x->g.cols);
  if (r->g.row_split || r->g.nm != x->g.nm) {
    lw_error(L, op, "a cross-warp reduction must keep every row in every warp");
    return;
  }
  MlirValue wbase = cg_muli_c(b, L->warp, 16 * S);
  for (int mi = 0; mi < x->g.nm; mi++) {
    lw_barrier(L);
    for (int ni = 0; ni < x->g.nn; ni++)
      for (int e = 0; e < 4; e++) {
        MlirValue row = cg_addi_c(b, L->lg, 8 * (e >> 1));
        MlirValue col = lw_elem_col(L, &x->g, ni, e);
        MlirValue idx = cg_addi(b, wbase, cg_addi(b, cg_muli_c(b, row, S), col));
        cg_store(b, lw_elem(L, x, TC_FULL, mi, ni, e), scratch_ptr(L, idx), 4);
      }
    cg_barrier(b);
    for (int ni = 0; ni < r->g.nn; ni++)
      for (int e = 0; e < 4; e++) {
        MlirValue row = cg_addi_c(b, L->lg, 8 * (e >> 1));
        MlirValue col = lw_elem_col(L, &r->g, ni, e);
        MlirValue at = cg_addi(b, cg_muli_c(b, row, S), col);
        MlirValue acc = (MlirValue){NULL};
        for (int w = 0; w < L->warps; w++) {
          MlirValue v = cg_load(b, scratch_ptr(L, cg_addi_c(b, at, w * 16 * S)), b->f32, 4);
          acc = w ? combine(L, is_max, acc, v) : v;
        }
        r->e[lw_index_of(&r->g, mi, ni, e)] = acc;
      }
    L->smem_read_since_barrier = true;
  }
}

void lw_xwarp_reduce(Lowerer *L, const Op *op) {
  const CgVal *x = lw_get(L, op->operands[0]);
  bool is_max = strcmp(attr_str(&op->attrs, "kind", "sum"), "max") == 0;
  Type rt = op->results[0]->type;
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return;
  if (x->kind != CV_TILE || x->g.row_split || x->g.col_split) {
    lw_error(L, op, "expects a partial tile held whole by every warp");
    return;
  }
  if (x->splat) {
    lw_error(L, op, "a uniform partial tile has no cross-warp meaning here");
    return;
  }
  if (L->scratch_aliases && !L->scratch_claimed) {
    /* The staged tiles' bytes become scratch: no copy may still land in
     * them (a prefetch past the loop's end); the reduction's barrier then
     * orders every warp's last read of them before the first write. */
    lw_wait_all_async(L);
    L->scratch_claimed = true;
  }
  CgVal *r = lw_tile(L, rt, &g);
  if (x->g.cls == TC_ROWV && g.cls == TC_ROWV && !g.row_split && g.nm == x->g.nm)
    xwarp_rowv(L, op, x, r, is_max);
  else if (x->g.cls == TC_FULL && g.cls == TC_FULL)
    xwarp_full(L, op, x, r, is_max);
  else {
    lw_error(L, op, "unsupported shapes");
    return;
  }
  lw_set(L, op->results[0], r);
}

/* ------------------------------------------------------------ matmul */

/* Where one lane's ldmatrix row lives in a staged tile, and how the
 * per-instruction offsets (whole 8-row groups, pairs of 16-byte chunks)
 * move it.
 *
 * Padded layout: `byte` is the lane's row address; an offset is a constant.
 * Swizzled layout (lw_swizzled_byte: 128-byte row blocks, chunk c of row r
 * at c ^ (r % 8)): the lane's row r = 8k + r8 and chunk c is 0 or 1. An
 * offset of whole 8-row groups keeps r8; an even chunk offset d keeps c, so
 * chunk (c + d) sits at ((d & 7) | c) ^ r8 = (d & 7) ^ lx with the lane
 * constant lx = c ^ r8 (in 16-byte units): one xor per ldmatrix. */
typedef struct LaneAddr {
  MlirValue byte; /* padded: the lane's byte; swizzled: base + r * 128 */
  MlirValue lx;   /* swizzled: (c ^ r8) * 16 */
} LaneAddr;

/* The lane address of row `row`, column `col` (elements, a lane-uniform
 * offset included when padded; 0 or 8 when swizzled) of staged tile t. */
static LaneAddr lane_addr(Lowerer *L, const CgVal *t, MlirValue row, MlirValue col) {
  CgBuilder *b = &L->b;
  LaneAddr a = {{NULL}, {NULL}};
  if (!t->swizzled) {
    MlirValue el = cg_addi(b, cg_muli_c(b, row, t->smem_stride), col);
    a.byte = lw_smem_base(L, t, cg_muli_c(b, el, 2));
    return a;
  }
  MlirValue c16 = cg_muli_c(b, cg_arith2(b, "arith.divui", col, cg_const_i32(b, 8)), 16);
  MlirValue r16 = cg_muli_c(b, cg_arith2(b, "arith.andi", row, cg_const_i32(b, 7)), 16);
  a.lx = cg_arith2(b, "arith.xori", c16, r16);
  a.byte = lw_smem_base(L, t, cg_muli_c(b, row, 128));
  return a;
}

/* The ldmatrix address of a lane moved by `drow` rows (a multiple of 8) and
 * `dcol` columns (a multiple of 16, or of 8 when the layout is padded). */
static MlirValue lane_at(Lowerer *L, const CgVal *t, const LaneAddr *a, int drow, int dcol) {
  CgBuilder *b = &L->b;
  if (!t->swizzled)
    return cg_gep(b, L->smem, cg_addi_c(b, a->byte, (drow * t->smem_stride + dcol) * 2), b->i8);
  int d = dcol / 8;
  MlirValue off = cg_addi_c(b, cg_arith2(b, "arith.xori", a->lx, cg_const_i32(b, (d & 7) * 16)),
                            drow * 128 + (d / 8) * t->type.rows * 128);
  return cg_gep(b, L->smem, cg_addi(b, a->byte, off), b->i8);
}

typedef struct MmaPlan {
  const CgVal *a, *bm;
  bool a_smem, trans_b;
  CgMmaType mt;
  int nm, nn, ksteps;
  LaneAddr a_lane; /* A (smem): this lane's ldmatrix row */
  LaneAddr b_lane; /* B: this lane's ldmatrix row */
} MmaPlan;

/* A fragment for m16 tile mi, k step kk: ldmatrix x4 from shared memory, or
 * the FA2 register trick: two n8 accumulators of P are one k16 A operand. */
static void a_fragment(Lowerer *L, const MmaPlan *p, int mi, int kk, MlirValue *out) {
  if (p->a_smem) {
    cg_ldmatrix(&L->b, lane_at(L, p->a, &p->a_lane, mi * 16, kk * 16), 4, false, out);
    return;
  }
  lw_a_fragment_regs(L, p->mt, p->a, mi, kk, out);
}

void lw_a_fragment_regs(Lowerer *L, CgMmaType mt, const CgVal *a, int mi, int kk, MlirValue *out) {
  for (int half = 0; half < 2; half++) {
    int ni = 2 * kk + half;
    out[2 * half] = cg_pack2(&L->b, mt, lw_elem(L, a, TC_FULL, mi, ni, 0),
                             lw_elem(L, a, TC_FULL, mi, ni, 1));
    out[2 * half + 1] = cg_pack2(&L->b, mt, lw_elem(L, a, TC_FULL, mi, ni, 2),
                                 lw_elem(L, a, TC_FULL, mi, ni, 3));
  }
}

/* B fragments for n8 tiles ni (and ni+1 when pair) at k step kk. */
static void b_fragments(Lowerer *L, const MmaPlan *p, int ni, int kk, bool pair, MlirValue *out) {
  MlirValue at = p->trans_b ? lane_at(L, p->bm, &p->b_lane, ni * 8, kk * 16) /* B^T [n][k] */
                            : lane_at(L, p->bm, &p->b_lane, kk * 16, ni * 8); /* B [k][n] */
  cg_ldmatrix(&L->b, at, pair ? 4 : 2, !p->trans_b, out);
}

/* Lane address parts for ldmatrix (lane l, matrices 0..3 = lanes 8i..8i+7):
 *   A [m][k], x4:            row l%16,                 col 8*(l/16)
 *   B^T [n][k], x4 (no .trans): row l%8 + 8*(l/16),      col 8*((l/8)%2)
 *   B [k][n], x4 .trans:      row l%16,                 col 8*(l/16)
 * The x2 forms read lanes 0..15 of the same formulas. Row offsets (a_row0,
 * n0 or k0 as rows) are multiples of 8; a column offset (k0 or n0 as
 * columns) is 0 for a swizzled operand (plan_matmul). */
static void plan_lanes(Lowerer *L, MmaPlan *p, MlirValue a_row0, MlirValue k0, MlirValue n0) {
  CgBuilder *b = &L->b;
  /* Swizzled operands: the lane id through an opaque copy, so that the
   * addresses are made where the matmul is. Else LLVM hoists each
   * ldmatrix's address (a distinct xor'd lane address plus a constant) out
   * of the K/V loop into a register of its own: 144 of them and 1.2 KB of
   * spills in a d256 decode kernel; here the constants fold into the
   * ldmatrix's immediate offset. */
  MlirValue lane = L->lane;
  if (p->bm->swizzled || (p->a_smem && p->a->swizzled))
    cg_ptx(b, "", NULL, "", 0, &lane, 1);
  MlirValue l16 = cg_arith2(b, "arith.remui", lane, cg_const_i32(b, 16));
  MlirValue hi8 = cg_muli_c(b, cg_arith2(b, "arith.divui", lane, cg_const_i32(b, 16)), 8);
  if (p->a_smem)
    p->a_lane = lane_addr(L, p->a, cg_addi(b, a_row0, l16), cg_addi(b, k0, hi8));
  if (p->trans_b) {
    MlirValue l8 = cg_arith2(b, "arith.remui", lane, cg_const_i32(b, 8));
    MlirValue mid = cg_muli_c(b, cg_arith2(b, "arith.remui",
                                           cg_arith2(b, "arith.divui", lane, cg_const_i32(b, 8)),
                                           cg_const_i32(b, 2)), 8);
    p->b_lane = lane_addr(L, p->bm, cg_addi(b, n0, cg_addi(b, l8, hi8)), cg_addi(b, k0, mid));
  } else {
    p->b_lane = lane_addr(L, p->bm, cg_addi(b, k0, l16), cg_addi(b, n0, hi8));
  }
}

static bool plan_matmul(Lowerer *L, const Op *op, const TileGeom *rg, MmaPlan *p) {
  CgBuilder *b = &L->b;
  memset(p, 0, sizeof *p);
  p->a = lw_get(L, op->operands[0]);
  p->bm = lw_get(L, op->operands[1]);
  p->trans_b = attr_int(&op->attrs, "transpose_b", 0) != 0;
  if (p->bm->kind != CV_SMEM) {
    lw_error(L, op, "the B operand must be a tile loaded from memory");
    return false;
  }
  ElemType be = p->bm->type.elem;
  if (be != ELEM_BF16 && be != ELEM_F16) {
    lw_error(L, op, "tensor-core operands must be bf16 or f16");
    return false;
  }
  p->mt = be == ELEM_BF16 ? CG_MMA_BF16 : CG_MMA_F16;
  int K = p->trans_b ? p->bm->type.cols : p->bm->type.rows;
  int N = p->trans_b ? p->bm->type.rows : p->bm->type.cols;
  if (rg->cls != TC_FULL || rg->cols != N) {
    lw_error(L, op, "result shape does not match B");
    return false;
  }
  p->nm = rg->nm;
  p->nn = rg->nn;
  MlirValue k0;
  bool k_split = false;
  p->a_smem = p->a->kind == CV_SMEM;
  if (p->a_smem) {
    if (p->a->type.cols != K || p->a->type.rows != rg->rows) {
      lw_error(L, op, "A is %d x %d, expected %d x %d", p->a->type.rows, p->a->type.cols,
               rg->rows, K);
      return false;
    }
    k0 = cg_const_i32(b, 0);
    p->ksteps = K / 16;
  } else {
    const TileGeom *ag = &p->a->g;
    if (p->a->kind != CV_TILE || p->a->splat || ag->cls != TC_FULL || ag->nm != rg->nm ||
        ag->row_split != rg->row_split || ag->nn % 2) {
      lw_error(L, op, "A in registers must hold the result's rows and k in pairs of n8 tiles");
      return false;
    }
    k_split = ag->col_split;
    k0 = k_split ? cg_muli_c(b, L->warp, 8 * ag->nn) : cg_const_i32(b, 0);
    p->ksteps = ag->nn / 2;
    if (!ag->col_split && ag->cols != K) {
      lw_error(L, op, "A has %d columns, B has %d rows", ag->cols, K);
      return false;
    }
  }
  if (K % 16) {
    lw_error(L, op, "the reduction extent %d is not a multiple of 16", K);
    return false;
  }
  if (L->wgmma)
    return true; /* no per-lane ldmatrix addresses: lower_wgmma.c */
  MlirValue a_row0 = rg->row_split ? cg_muli_c(b, L->warp, 16 * rg->nm) : cg_const_i32(b, 0);
  MlirValue n0 = rg->col_split ? cg_muli_c(b, L->warp, 8 * rg->nn) : cg_const_i32(b, 0);
  /* A warp's column offset into a swizzled operand would move its chunks
   * across the xor pattern; no schedule splits those columns over warps. */
  if (p->bm->swizzled && (p->trans_b ? k_split : rg->col_split)) {
    lw_error(L, op, "warps splitting the columns of a swizzled shared-memory operand");
    return false;
  }
  plan_lanes(L, p, a_row0, k0, n0);
  return true;
}

void lw_matmul(Lowerer *L, const Op *op) {
  Type rt = op->results[0]->type;
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return;
  MmaPlan p;
  if (!plan_matmul(L, op, &g, &p))
    return;
  CgVal *acc = op->noperands > 2 ? lw_get(L, op->operands[2]) : NULL;
  if (acc && acc->kind == CV_TILE && !acc->splat && !compatible(&acc->g, &g)) {
    lw_error(L, op, "the accumulator is distributed differently from the result");
    return;
  }
  lw_smem_ready2(L, p.a_smem ? (CgVal *)p.a : NULL, (CgVal *)p.bm);
  for (int i = 0; i < 2; i++) {
    const CgVal *t = i ? p.bm : (p.a_smem ? p.a : NULL);
    if (t && t->ring >= 0)
      L->rings[t->ring].cur_read = true;
  }
  CgVal *r = lw_tile(L, rt, &g);
  MlirValue zero = cg_const_f32(&L->b, 0.0);
  for (int k = 0; k < r->ne; k++) {
    int mi = k / 4 / g.nn, ni = k / 4 % g.nn, e = k % 4;
    r->e[k] = acc ? lw_elem(L, acc, TC_FULL, mi, ni, e) : zero;
  }
  if (L->wgmma) {
    lw_wgmma_matmul(L, op, r, p.a, p.bm, p.trans_b, p.mt, acc != NULL);
    L->smem_read_since_barrier = true;
    lw_set(L, op->results[0], r);
    return;
  }
  MlirValue afr[64][4];
  if (p.nm > 64) {
    lw_error(L, op, "too many row tiles per warp");
    return;
  }
  for (int kk = 0; kk < p.ksteps; kk++) {
    for (int mi = 0; mi < p.nm; mi++)
      a_fragment(L, &p, mi, kk, afr[mi]);
    for (int ni = 0; ni < p.nn; ni += 2) {
      bool pair = ni + 1 < p.nn;
      MlirValue bfr[4];
      b_fragments(L, &p, ni, kk, pair, bfr);
      for (int j = 0; j < (pair ? 2 : 1); j++)
        for (int mi = 0; mi < p.nm; mi++) {
          MlirValue *d = &r->e[(mi * g.nn + ni + j) * 4];
          cg_mma_16816(&L->b, p.mt, afr[mi], &bfr[2 * j], d, d);
        }
    }
  }
  L->smem_read_since_barrier = true;
  lw_set(L, op->results[0], r);
}
