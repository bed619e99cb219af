/* cg_builder.c - generic op construction and the shorthands codegen uses. */
#include "codegen/cg_builder.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/LLVM.h"

static MlirStringRef sref(const char *s) { return mlirStringRefCreateFromCString(s); }

void cg_builder_init(CgBuilder *b, CgContext *cc) {
  memset(b, 0, sizeof *b);
  b->cc = cc;
  b->ctx = cg_context_mlir(cc);
  b->loc = mlirLocationUnknownGet(b->ctx);
  b->i1 = mlirIntegerTypeGet(b->ctx, 1);
  b->i8 = mlirIntegerTypeGet(b->ctx, 8);
  b->i16 = mlirIntegerTypeGet(b->ctx, 16);
  b->i32 = mlirIntegerTypeGet(b->ctx, 32);
  b->i64 = mlirIntegerTypeGet(b->ctx, 64);
  b->index = mlirIndexTypeGet(b->ctx);
  b->f16 = mlirF16TypeGet(b->ctx);
  b->bf16 = mlirBF16TypeGet(b->ctx);
  b->f32 = mlirF32TypeGet(b->ctx);
  b->ptr = mlirLLVMPointerTypeGet(b->ctx, 0);
  b->gptr = mlirLLVMPointerTypeGet(b->ctx, 1);
  b->sptr = mlirLLVMPointerTypeGet(b->ctx, 3);
}

void cg_builder_set_block(CgBuilder *b, MlirBlock block) { b->block = block; }

void cg_builder_set_loc(CgBuilder *b, const char *file, int line, int col) {
  b->loc = file ? mlirLocationFileLineColGet(b->ctx, sref(file), (unsigned)line, (unsigned)col)
                : mlirLocationUnknownGet(b->ctx);
}

MlirType cg_type(CgBuilder *b, const char *text) {
  MlirType t = mlirTypeParseGet(b->ctx, sref(text));
  if (mlirTypeIsNull(t)) {
    fprintf(stderr, "flashc: internal error: bad MLIR type '%s'\n", text);
    abort();
  }
  return t;
}

MlirAttribute cg_attr(CgBuilder *b, const char *text) {
  MlirAttribute a = mlirAttributeParseGet(b->ctx, sref(text));
  if (mlirAttributeIsNull(a)) {
    fprintf(stderr, "flashc: internal error: bad MLIR attribute '%s'\n", text);
    abort();
  }
  return a;
}

MlirAttribute cg_attr_i32(CgBuilder *b, int32_t v) { return mlirIntegerAttrGet(b->i32, v); }
MlirAttribute cg_attr_i64(CgBuilder *b, int64_t v) { return mlirIntegerAttrGet(b->i64, v); }
MlirAttribute cg_attr_str(CgBuilder *b, const char *s) {
  return mlirStringAttrGet(b->ctx, sref(s));
}

/* ------------------------------------------------------------- cg_op */

static MlirOperation create_op(CgBuilder *b, const char *name, const MlirValue *operands,
                               int noperands, const MlirType *results, int nresults,
                               const CgNamedAttr *attrs, int nattrs, MlirRegion *regions,
                               int nregions) {
  MlirOperationState st = mlirOperationStateGet(sref(name), b->loc);
  if (noperands)
    mlirOperationStateAddOperands(&st, noperands, operands);
  if (nresults)
    mlirOperationStateAddResults(&st, nresults, results);
  MlirNamedAttribute na[16];
  if (nattrs > 16)
    abort(); /* no op of ours has more */
  for (int i = 0; i < nattrs; i++)
    na[i] = mlirNamedAttributeGet(mlirIdentifierGet(b->ctx, sref(attrs[i].name)), attrs[i].attr);
  if (nattrs)
    mlirOperationStateAddAttributes(&st, nattrs, na);
  if (nregions)
    mlirOperationStateAddOwnedRegions(&st, nregions, regions);
  MlirOperation op = mlirOperationCreate(&st);
  if (mlirOperationIsNull(op)) {
    fprintf(stderr, "flashc: internal error: cannot create '%s'\n", name);
    abort();
  }
  mlirBlockAppendOwnedOperation(b->block, op);
  return op;
}

MlirOperation cg_op(CgBuilder *b, const char *name, const MlirValue *operands, int noperands,
                    const MlirType *results, int nresults, const CgNamedAttr *attrs,
                    int nattrs) {
  return create_op(b, name, operands, noperands, results, nresults, attrs, nattrs, NULL, 0);
}

MlirValue cg_op1(CgBuilder *b, const char *name, const MlirValue *operands, int noperands,
                 MlirType result, const CgNamedAttr *attrs, int nattrs) {
  return mlirOperationGetResult(
      cg_op(b, name, operands, noperands, &result, 1, attrs, nattrs), 0);
}

MlirValue cg_result(MlirOperation op, int i) { return mlirOperationGetResult(op, i); }

/* ---------------------------------------------------------- constants */

MlirValue cg_const_int(CgBuilder *b, MlirType t, int64_t v) {
  CgNamedAttr a = {"value", mlirIntegerAttrGet(t, v)};
  return cg_op1(b, "arith.constant", NULL, 0, t, &a, 1);
}
MlirValue cg_const_i32(CgBuilder *b, int32_t v) { return cg_const_int(b, b->i32, v); }
MlirValue cg_const_i64(CgBuilder *b, int64_t v) { return cg_const_int(b, b->i64, v); }

MlirValue cg_const_float(CgBuilder *b, MlirType t, double v) {
  CgNamedAttr a = {"value", mlirFloatAttrDoubleGet(b->ctx, t, v)};
  return cg_op1(b, "arith.constant", NULL, 0, t, &a, 1);
}
MlirValue cg_const_f32(CgBuilder *b, double v) { return cg_const_float(b, b->f32, v); }

/* --------------------------------------------------------------- arith */

MlirValue cg_arith2(CgBuilder *b, const char *name, MlirValue x, MlirValue y) {
  MlirValue ops[2] = {x, y};
  return cg_op1(b, name, ops, 2, mlirValueGetType(x), NULL, 0);
}
MlirValue cg_addi(CgBuilder *b, MlirValue x, MlirValue y) { return cg_arith2(b, "arith.addi", x, y); }
MlirValue cg_subi(CgBuilder *b, MlirValue x, MlirValue y) { return cg_arith2(b, "arith.subi", x, y); }
MlirValue cg_muli(CgBuilder *b, MlirValue x, MlirValue y) { return cg_arith2(b, "arith.muli", x, y); }
MlirValue cg_addf(CgBuilder *b, MlirValue x, MlirValue y) { return cg_arith2(b, "arith.addf", x, y); }
MlirValue cg_subf(CgBuilder *b, MlirValue x, MlirValue y) { return cg_arith2(b, "arith.subf", x, y); }
MlirValue cg_mulf(CgBuilder *b, MlirValue x, MlirValue y) { return cg_arith2(b, "arith.mulf", x, y); }

MlirValue cg_addi_c(CgBuilder *b, MlirValue x, int64_t c) {
  if (c == 0)
    return x;
  return cg_addi(b, x, cg_const_int(b, mlirValueGetType(x), c));
}

MlirValue cg_muli_c(CgBuilder *b, MlirValue x, int64_t c) {
  if (c == 1)
    return x;
  return cg_muli(b, x, cg_const_int(b, mlirValueGetType(x), c));
}

/* arith's predicates are plain i64 enums, in these orders. */
static const char *const cmpi_preds[] = {"eq", "ne", "slt", "sle", "sgt", "sge",
                                         "ult", "ule", "ugt", "uge", NULL};
static const char *const cmpf_preds[] = {"false", "oeq", "ogt", "oge", "olt", "ole",
                                         "one",   "ord", "ueq", "ugt", "uge", "ult",
                                         "ule",   "une", "uno", "true", NULL};

static MlirValue cmp(CgBuilder *b, const char *opname, const char *const *names,
                     const char *pred, MlirValue x, MlirValue y) {
  int code = -1;
  for (int i = 0; names[i]; i++)
    if (strcmp(names[i], pred) == 0)
      code = i;
  if (code < 0) {
    fprintf(stderr, "flashc: internal error: bad predicate '%s'\n", pred);
    abort();
  }
  CgNamedAttr a = {"predicate", cg_attr_i64(b, code)};
  MlirValue ops[2] = {x, y};
  return cg_op1(b, opname, ops, 2, b->i1, &a, 1);
}

MlirValue cg_cmpi(CgBuilder *b, const char *pred, MlirValue x, MlirValue y) {
  return cmp(b, "arith.cmpi", cmpi_preds, pred, x, y);
}
MlirValue cg_cmpf(CgBuilder *b, const char *pred, MlirValue x, MlirValue y) {
  return cmp(b, "arith.cmpf", cmpf_preds, pred, x, y);
}

MlirValue cg_select(CgBuilder *b, MlirValue c, MlirValue x, MlirValue y) {
  MlirValue ops[3] = {c, x, y};
  return cg_op1(b, "arith.select", ops, 3, mlirValueGetType(x), NULL, 0);
}

static unsigned int_width(CgBuilder *b, MlirType t) {
  return mlirTypeIsAIndex(t) ? 64 : mlirIntegerTypeGetWidth(t);
  (void)b;
}

MlirValue cg_int_cast(CgBuilder *b, MlirValue x, MlirType to) {
  MlirType from = mlirValueGetType(x);
  if (mlirTypeEqual(from, to))
    return x;
  if (mlirTypeIsAIndex(from) || mlirTypeIsAIndex(to))
    return cg_op1(b, "arith.index_cast", &x, 1, to, NULL, 0);
  unsigned wf = int_width(b, from), wt = int_width(b, to);
  /* i1 is a boolean: widen it as 0/1, not as 0/-1. */
  const char *name = wt > wf ? (wf == 1 ? "arith.extui" : "arith.extsi") : "arith.trunci";
  return cg_op1(b, name, &x, 1, to, NULL, 0);
}

MlirValue cg_float_cast(CgBuilder *b, MlirValue x, MlirType to) {
  MlirType from = mlirValueGetType(x);
  if (mlirTypeEqual(from, to))
    return x;
  unsigned wf = mlirFloatTypeGetWidth(from), wt = mlirFloatTypeGetWidth(to);
  return cg_op1(b, wt > wf ? "arith.extf" : "arith.truncf", &x, 1, to, NULL, 0);
}

MlirValue cg_sitofp(CgBuilder *b, MlirValue x, MlirType to) {
  if (mlirTypeIsAIndex(mlirValueGetType(x)))
    x = cg_int_cast(b, x, b->i64);
  return cg_op1(b, "arith.sitofp", &x, 1, to, NULL, 0);
}

MlirValue cg_bitcast(CgBuilder *b, MlirValue x, MlirType to) {
  return cg_op1(b, "llvm.bitcast", &x, 1, to, NULL, 0);
}

/* ----------------------------------------------------------- gpu/llvm */

static MlirValue dim_op(CgBuilder *b, const char *name, const char *dim) {
  char text[32];
  snprintf(text, sizeof text, "#gpu<dim %s>", dim);
  CgNamedAttr a = {"dimension", cg_attr(b, text)};
  MlirValue v = cg_op1(b, name, NULL, 0, b->index, &a, 1);
  return cg_int_cast(b, v, b->i32);
}

MlirValue cg_thread_id(CgBuilder *b, const char *dim) { return dim_op(b, "gpu.thread_id", dim); }
MlirValue cg_block_id(CgBuilder *b, const char *dim) { return dim_op(b, "gpu.block_id", dim); }

void cg_barrier(CgBuilder *b) { cg_op(b, "gpu.barrier", NULL, 0, NULL, 0, NULL, 0); }

MlirValue cg_shuffle_xor(CgBuilder *b, MlirValue v, int mask) {
  MlirValue ops[3] = {v, cg_const_i32(b, mask), cg_const_i32(b, 32)};
  MlirType res[2] = {mlirValueGetType(v), b->i1};
  CgNamedAttr a = {"mode", cg_attr(b, "#gpu<shuffle_mode xor>")};
  return cg_result(cg_op(b, "gpu.shuffle", ops, 3, res, 2, &a, 1), 0);
}

MlirValue cg_shuffle_idx(CgBuilder *b, MlirValue v, MlirValue lane) {
  MlirValue ops[3] = {v, lane, cg_const_i32(b, 32)};
  MlirType res[2] = {mlirValueGetType(v), b->i1};
  CgNamedAttr a = {"mode", cg_attr(b, "#gpu<shuffle_mode idx>")};
  return cg_result(cg_op(b, "gpu.shuffle", ops, 3, res, 2, &a, 1), 0);
}

MlirValue cg_gep(CgBuilder *b, MlirValue base, MlirValue idx, MlirType elem) {
  /* rawConstantIndices holds INT32_MIN for each dynamic index. */
  CgNamedAttr a[2] = {
      {"rawConstantIndices", cg_attr(b, "array<i32: -2147483648>")},
      {"elem_type", mlirTypeAttrGet(elem)},
  };
  MlirValue ops[2] = {base, idx};
  return cg_op1(b, "llvm.getelementptr", ops, 2, mlirValueGetType(base), a, 2);
}

MlirValue cg_load(CgBuilder *b, MlirValue ptr, MlirType t, int align) {
  CgNamedAttr a = {"alignment", cg_attr_i64(b, align)};
  return cg_op1(b, "llvm.load", &ptr, 1, t, &a, 1);
}

MlirValue cg_load_volatile(CgBuilder *b, MlirValue ptr, MlirType t, int align) {
  CgNamedAttr a[2] = {{"alignment", cg_attr_i64(b, align)}, {"volatile_", mlirUnitAttrGet(b->ctx)}};
  return cg_op1(b, "llvm.load", &ptr, 1, t, a, 2);
}

void cg_store(CgBuilder *b, MlirValue val, MlirValue ptr, int align) {
  CgNamedAttr a = {"alignment", cg_attr_i64(b, align)};
  MlirValue ops[2] = {val, ptr};
  cg_op(b, "llvm.store", ops, 2, NULL, 0, &a, 1);
}

MlirValue cg_addrspacecast(CgBuilder *b, MlirValue p, MlirType to) {
  return cg_op1(b, "llvm.addrspacecast", &p, 1, to, NULL, 0);
}

MlirValue cg_addressof(CgBuilder *b, const char *global, MlirType ptr_type) {
  CgNamedAttr a = {"global_name", mlirFlatSymbolRefAttrGet(b->ctx, sref(global))};
  return cg_op1(b, "llvm.mlir.addressof", NULL, 0, ptr_type, &a, 1);
}

MlirValue cg_extractvalue(CgBuilder *b, MlirValue agg, int pos, MlirType t) {
  int64_t p = pos;
  CgNamedAttr a = {"position", mlirDenseI64ArrayGet(b->ctx, 1, &p)};
  return cg_op1(b, "llvm.extractvalue", &agg, 1, t, &a, 1);
}

/* Built from llvm ops: the vector dialect would need its own lowering pass
 * for what is only packing two halves into a register. */
MlirValue cg_vector_from(CgBuilder *b, const MlirValue *elems, int n, MlirType vec_type) {
  MlirValue v = cg_op1(b, "llvm.mlir.poison", NULL, 0, vec_type, NULL, 0);
  for (int i = 0; i < n; i++) {
    MlirValue ops[3] = {v, elems[i], cg_const_i32(b, i)};
    v = cg_op1(b, "llvm.insertelement", ops, 3, vec_type, NULL, 0);
  }
  return v;
}

MlirValue cg_vector_extract(CgBuilder *b, MlirValue vec, int pos) {
  MlirType et = mlirShapedTypeGetElementType(mlirValueGetType(vec));
  MlirValue ops[2] = {vec, cg_const_i32(b, pos)};
  return cg_op1(b, "llvm.extractelement", ops, 2, et, NULL, 0);
}

MlirValue cg_intrinsic(CgBuilder *b, const char *name, const MlirValue *args, int nargs,
                       MlirType result) {
  char seg[48];
  snprintf(seg, sizeof seg, "array<i32: %d, 0>", nargs);
  CgNamedAttr a[3] = {
      {"intrin", cg_attr_str(b, name)},
      {"operandSegmentSizes", cg_attr(b, seg)},
      {"op_bundle_sizes", cg_attr(b, "array<i32>")},
  };
  bool has_result = !mlirTypeIsNull(result);
  MlirOperation op = cg_op(b, "llvm.call_intrinsic", args, nargs, &result, has_result ? 1 : 0, a, 3);
  return has_result ? cg_result(op, 0) : (MlirValue){NULL};
}

/* --------------------------------------------------------- tensor cores */

void cg_ldmatrix(CgBuilder *b, MlirValue sptr, int num, bool trans, MlirValue *out) {
  char st[64];
  snprintf(st, sizeof st, "!llvm.struct<(%s)>",
           num == 1 ? "i32" : num == 2 ? "i32, i32" : "i32, i32, i32, i32");
  MlirType stype = cg_type(b, st);
  CgNamedAttr a[4] = {
      {"num", cg_attr_i32(b, num)},
      {"layout", cg_attr(b, trans ? "#nvvm.mma_layout<col>" : "#nvvm.mma_layout<row>")},
      {"eltType", cg_attr(b, "#nvvm.ld_st_matrix_elt_type<b16>")},
      {"shape", cg_attr(b, "#nvvm.ld_st_matrix_shape<m = 8, n = 8>")},
  };
  MlirValue r = cg_op1(b, "nvvm.ldmatrix", &sptr, 1, num == 1 ? b->i32 : stype, a, 4);
  if (num == 1) {
    out[0] = r;
    return;
  }
  for (int i = 0; i < num; i++)
    out[i] = cg_extractvalue(b, r, i, b->i32);
}

/* m16n8k{k}: k / 4 A registers, k / 8 B registers. */
static void mma_sync(CgBuilder *b, CgMmaType t, int k, const MlirValue *a, const MlirValue *bb,
                     const MlirValue *c, MlirValue *d) {
  int na = k / 4, nb = k / 8, n = 0;
  MlirValue ops[10];
  for (int i = 0; i < na; i++)
    ops[n++] = a[i];
  for (int i = 0; i < nb; i++)
    ops[n++] = bb[i];
  for (int i = 0; i < 4; i++)
    ops[n++] = c[i];
  const char *ptx = t == CG_MMA_BF16 ? "#nvvm.mma_type<bf16>" : "#nvvm.mma_type<f16>";
  char shape[64], seg[64];
  snprintf(shape, sizeof shape, "#nvvm.shape<m = 16, n = 8, k = %d>", k);
  snprintf(seg, sizeof seg, "array<i32: %d, %d, 4>", na, nb);
  CgNamedAttr at[6] = {
      {"layoutA", cg_attr(b, "#nvvm.mma_layout<row>")},
      {"layoutB", cg_attr(b, "#nvvm.mma_layout<col>")},
      {"multiplicandAPtxType", cg_attr(b, ptx)},
      {"multiplicandBPtxType", cg_attr(b, ptx)},
      {"shape", cg_attr(b, shape)},
      {"operandSegmentSizes", cg_attr(b, seg)},
  };
  /* f16 operands travel as vector<2xf16>, bf16 ones as packed i32: that is
   * what the op's verifier accepts for each type. */
  if (t == CG_MMA_F16) {
    MlirType v2 = cg_type(b, "vector<2xf16>");
    for (int i = 0; i < na + nb; i++)
      ops[i] = cg_bitcast(b, ops[i], v2);
  }
  MlirType res = cg_type(b, "!llvm.struct<(f32, f32, f32, f32)>");
  MlirValue r = cg_op1(b, "nvvm.mma.sync", ops, n, res, at, 6);
  for (int i = 0; i < 4; i++)
    d[i] = cg_extractvalue(b, r, i, b->f32);
}

void cg_mma_16816(CgBuilder *b, CgMmaType t, const MlirValue *a, const MlirValue *bb,
                  const MlirValue *c, MlirValue *d) {
  mma_sync(b, t, 16, a, bb, c, d);
}

void cg_mma_1688(CgBuilder *b, CgMmaType t, const MlirValue *a, const MlirValue *bb,
                 const MlirValue *c, MlirValue *d) {
  mma_sync(b, t, 8, a, bb, c, d);
}

MlirValue cg_pack2(CgBuilder *b, CgMmaType t, MlirValue lo, MlirValue hi) {
  MlirType et = t == CG_MMA_BF16 ? b->bf16 : b->f16;
  MlirType v2 = mlirVectorTypeGet(1, (int64_t[]){2}, et);
  MlirValue e[2] = {cg_float_cast(b, lo, et), cg_float_cast(b, hi, et)};
  return cg_bitcast(b, cg_vector_from(b, e, 2, v2), b->i32);
}

/* ------------------------------------------------------ inline PTX */

void cg_ptx(CgBuilder *b, const char *ptx, const MlirValue *args, const char *arg_constraints,
            int nargs, MlirValue *regs, int nregs) {
  /* Constraints: one output per reg ("=f"/"=r"), the args, then each reg
   * again as an input tied to its output ("0", "1", ...). */
  size_t cap = 16 + strlen(arg_constraints) + (size_t)nregs * 12;
  char *cons = malloc(cap);
  MlirType *types = malloc(sizeof(MlirType) * (size_t)(nregs ? nregs : 1));
  MlirValue *ops = malloc(sizeof(MlirValue) * (size_t)(nargs + nregs + 1));
  if (!cons || !types || !ops)
    abort();
  size_t n = 0;
  cons[0] = 0;
  for (int i = 0; i < nregs; i++) {
    types[i] = mlirValueGetType(regs[i]);
    char c = mlirTypeIsAF32(types[i]) ? 'f'
             : mlirTypeIsAInteger(types[i]) && mlirIntegerTypeGetWidth(types[i]) == 64 ? 'l'
                                                                                      : 'r';
    n += (size_t)snprintf(cons + n, cap - n, "%s=%c", i ? "," : "", c);
  }
  if (nargs)
    n += (size_t)snprintf(cons + n, cap - n, "%s%s", nregs ? "," : "", arg_constraints);
  for (int i = 0; i < nregs; i++)
    n += (size_t)snprintf(cons + n, cap - n, "%s%d", n ? "," : "", i);
  for (int i = 0; i < nargs; i++)
    ops[i] = args[i];
  for (int i = 0; i < nregs; i++)
    ops[nargs + i] = regs[i];
  CgNamedAttr a[3] = {
      {"asm_string", cg_attr_str(b, ptx)},
      {"constraints", cg_attr_str(b, cons)},
      {"has_side_effects", mlirUnitAttrGet(b->ctx)},
  };
  MlirType rt = nregs == 1 ? types[0] : mlirLLVMStructTypeLiteralGet(b->ctx, nregs, types, false);
  MlirOperation op = cg_op(b, "llvm.inline_asm", ops, nargs + nregs, &rt, nregs ? 1 : 0, a, 3);
  if (nregs == 1)
    regs[0] = cg_result(op, 0);
  else
    for (int i = 0; i < nregs; i++)
      regs[i] = cg_extractvalue(b, cg_result(op, 0), i, types[i]);
  free(cons);
  free(types);
  free(ops);
}

void cg_wgmma(CgBuilder *b, CgMmaType t, int n, MlirValue *acc, const MlirValue *a_regs,
              MlirValue a_desc, MlirValue b_desc, bool trans_a, bool trans_b, bool accumulate) {
  int nacc = n / 2;
  const char *ty = t == CG_MMA_BF16 ? "bf16" : "f16";
  /* $0..$(nacc-1): D; then A (4 regs or a descriptor), B's descriptor;
   * scale-d (an immediate predicate): 1 reads the accumulator, 0 ignores it. */
  char *s = malloc((size_t)nacc * 8 + 256);
  if (!s)
    abort();
  int k = sprintf(s, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {", n, ty, ty);
  for (int i = 0; i < nacc; i++)
    k += sprintf(s + k, "%s$%d", i ? ", " : "", i);
  MlirValue args[5];
  int nargs = 0;
  const char *cons;
  if (a_regs) {
    k += sprintf(s + k, "}, {$%d, $%d, $%d, $%d}, $%d, %d, 1, 1, %d;", nacc, nacc + 1, nacc + 2,
                 nacc + 3, nacc + 4, accumulate ? 1 : 0, trans_b ? 1 : 0);
    for (int i = 0; i < 4; i++)
      args[nargs++] = a_regs[i];
    cons = "r,r,r,r,l";
  } else {
    k += sprintf(s + k, "}, $%d, $%d, %d, 1, 1, %d, %d;", nacc, nacc + 1, accumulate ? 1 : 0,
                 trans_a ? 1 : 0, trans_b ? 1 : 0);
    args[nargs++] = a_desc;
    cons = "l,l";
  }
  args[nargs++] = b_desc;
  cg_ptx(b, s, args, cons, nargs, acc, nacc);
  free(s);
}

MlirValue cg_ptx_pure(CgBuilder *b, const char *ptx, const char *constraints,
                      const MlirValue *args, int nargs, MlirType result) {
  CgNamedAttr a[2] = {{"asm_string", cg_attr_str(b, ptx)},
                      {"constraints", cg_attr_str(b, constraints)}};
  return cg_result(cg_op(b, "llvm.inline_asm", args, nargs, &result, 1, a, 2), 0);
}

MlirValue cg_opaque_f32(CgBuilder *b, MlirValue x) {
  /* no side effects: LLVM may still move, merge or drop it */
  return cg_ptx_pure(b, "mov.b32 $0, $1;", "=f,f", &x, 1, mlirValueGetType(x));
}

void cg_wgmma_fence(CgBuilder *b, MlirValue *regs, int nregs) {
  cg_ptx(b, "wgmma.fence.sync.aligned;", NULL, "", 0, regs, nregs);
}

void cg_wgmma_commit_wait(CgBuilder *b, MlirValue *acc, int nacc) {
  cg_ptx(b, "wgmma.commit_group.sync.aligned;\n\twgmma.wait_group.sync.aligned 0;", NULL, "", 0,
         acc, nacc);
}

void cg_wgmma_commit(CgBuilder *b) {
  cg_ptx(b, "wgmma.commit_group.sync.aligned;", NULL, "", 0, NULL, 0);
}

void cg_wgmma_wait(CgBuilder *b, int pending, MlirValue *regs, int nregs) {
  char text[64];
  snprintf(text, sizeof text, "wgmma.wait_group.sync.aligned %d;", pending);
  cg_ptx(b, text, NULL, "", 0, regs, nregs);
}

void cg_fence_proxy_async(CgBuilder *b) {
  cg_ptx(b, "fence.proxy.async.shared::cta;", NULL, "", 0, NULL, 0);
}

MlirValue cg_shared_addr(CgBuilder *b, MlirValue sptr) {
  return cg_op1(b, "llvm.ptrtoint", &sptr, 1, b->i64, NULL, 0);
}

void cg_cp_async16(CgBuilder *b, MlirValue dst_shared, MlirValue src_global,
                   MlirValue src_bytes) {
  if (mlirValueIsNull(src_bytes)) {
    MlirValue ops[2] = {dst_shared, src_global};
    cg_intrinsic(b, "llvm.nvvm.cp.async.cg.shared.global.16", ops, 2, (MlirType){NULL});
    return;
  }
  MlirValue ops[3] = {dst_shared, src_global, src_bytes};
  cg_intrinsic(b, "llvm.nvvm.cp.async.cg.shared.global.16.s", ops, 3, (MlirType){NULL});
}

void cg_cp_async_commit(CgBuilder *b) {
  cg_op(b, "nvvm.cp.async.commit.group", NULL, 0, NULL, 0, NULL, 0);
}

void cg_cp_async_wait(CgBuilder *b, int n) {
  CgNamedAttr a = {"n", cg_attr_i32(b, n)};
  cg_op(b, "nvvm.cp.async.wait.group", NULL, 0, NULL, 0, &a, 1);
}

/* ------------------------------------------------------------- regions */

/* A region holding one block with the given argument types. */
static MlirRegion region_with_block(CgBuilder *b, const MlirType *args, int nargs,
                                    MlirBlock *block) {
  MlirLocation *locs = malloc(sizeof(MlirLocation) * (size_t)(nargs ? nargs : 1));
  if (!locs)
    abort();
  for (int i = 0; i < nargs; i++)
    locs[i] = b->loc;
  MlirRegion r = mlirRegionCreate();
  *block = mlirBlockCreate(nargs, args, locs);
  mlirRegionAppendOwnedBlock(r, *block);
  free(locs);
  return r;
}

MlirOperation cg_module_create(CgBuilder *b) {
  MlirModule m = mlirModuleCreateEmpty(b->loc);
  MlirOperation op = mlirModuleGetOperation(m);
  mlirOperationSetAttributeByName(op, sref("gpu.container_module"), mlirUnitAttrGet(b->ctx));
  return op;
}

MlirBlock cg_module_body(MlirOperation module) {
  return mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
}

MlirBlock cg_gpu_module(CgBuilder *b, const char *name, const char *chip,
                        const char *features) {
  char target[160];
  snprintf(target, sizeof target, "[#nvvm.target<chip = \"%s\", features = \"%s\">]", chip,
           features);
  CgNamedAttr a[2] = {{"sym_name", cg_attr_str(b, name)}, {"targets", cg_attr(b, target)}};
  MlirBlock body;
  MlirRegion r = region_with_block(b, NULL, 0, &body);
  create_op(b, "gpu.module", NULL, 0, NULL, 0, a, 2, &r, 1);
  return body;
}

MlirBlock cg_gpu_kernel(CgBuilder *b, const char *name, const MlirType *args, int nargs,
                        int block_threads) {
  MlirType fty = mlirFunctionTypeGet(b->ctx, nargs, args, 0, NULL);
  char bs[64];
  snprintf(bs, sizeof bs, "array<i32: %d, 1, 1>", block_threads);
  CgNamedAttr a[5] = {
      {"sym_name", cg_attr_str(b, name)},
      {"function_type", mlirTypeAttrGet(fty)},
      {"gpu.kernel", mlirUnitAttrGet(b->ctx)},
      {"known_block_size", cg_attr(b, bs)},
      {"workgroup_attributions", cg_attr_i64(b, 0)},
  };
  MlirBlock entry;
  MlirRegion r = region_with_block(b, args, nargs, &entry);
  create_op(b, "gpu.func", NULL, 0, NULL, 0, a, 5, &r, 1);
  return entry;
}

void cg_dynamic_smem_global(CgBuilder *b, const char *name) {
  CgNamedAttr a[5] = {
      {"sym_name", cg_attr_str(b, name)},
      {"global_type", mlirTypeAttrGet(cg_type(b, "!llvm.array<0 x i8>"))},
      {"linkage", cg_attr(b, "#llvm.linkage<external>")},
      {"addr_space", cg_attr_i32(b, 3)},
      {"alignment", cg_attr_i64(b, 1024)},
  };
  /* External: no initializer, so its region stays empty. */
  MlirRegion empty = mlirRegionCreate();
  create_op(b, "llvm.mlir.global", NULL, 0, NULL, 0, a, 5, &empty, 1);
}

MlirOperation cg_for(CgBuilder *b, MlirValue lo, MlirValue hi, MlirValue step,
                     const MlirValue *inits, int ninits, MlirBlock *body) {
  /* Loops carry whole register tiles: hundreds of values. */
  MlirValue *ops = malloc(sizeof(MlirValue) * (size_t)(ninits + 3));
  MlirType *args = malloc(sizeof(MlirType) * (size_t)(ninits + 1));
  MlirType *res = args + 1;
  if (!ops || !args)
    abort();
  ops[0] = lo;
  ops[1] = hi;
  ops[2] = step;
  args[0] = mlirValueGetType(lo);
  for (int i = 0; i < ninits; i++) {
    ops[3 + i] = inits[i];
    res[i] = mlirValueGetType(inits[i]);
  }
  MlirRegion r = region_with_block(b, args, ninits + 1, body);
  MlirOperation op = create_op(b, "scf.for", ops, 3 + ninits, res, ninits, NULL, 0, &r, 1);
  free(ops);
  free(args);
  return op;
}

MlirOperation cg_if(CgBuilder *b, MlirValue cond, const MlirType *results, int nresults,
                    bool has_else, MlirBlock *then_block, MlirBlock *else_block) {
  MlirRegion r[2];
  r[0] = region_with_block(b, NULL, 0, then_block);
  if (has_else) {
    r[1] = region_with_block(b, NULL, 0, else_block);
  } else {
    r[1] = mlirRegionCreate();
    if (else_block)
      *else_block = (MlirBlock){NULL};
  }
  return create_op(b, "scf.if", &cond, 1, results, nresults, NULL, 0, r, 2);
}

void cg_yield(CgBuilder *b, const MlirValue *vals, int n) {
  cg_op(b, "scf.yield", vals, n, NULL, 0, NULL, 0);
}

void cg_gpu_return(CgBuilder *b) { cg_op(b, "gpu.return", NULL, 0, NULL, 0, NULL, 0); }
