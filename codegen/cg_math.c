/* cg_math.c - layer 0: f32 math intrinsics (cg_math.h). */
#include "codegen/cg_math.h"

MlirValue cg_exp2f(CgBuilder *b, MlirValue x) {
  return cg_intrinsic(b, "llvm.exp2.f32", &x, 1, b->f32);
}

MlirValue cg_exp2f_ftz(CgBuilder *b, MlirValue x) {
  return cg_intrinsic(b, "llvm.nvvm.ex2.approx.ftz.f32", &x, 1, b->f32);
}

MlirValue cg_expf(CgBuilder *b, MlirValue x) {
  return cg_exp2f(b, cg_mulf(b, x, cg_const_f32(b, CG_LOG2E)));
}

MlirValue cg_log2f(CgBuilder *b, MlirValue x) {
  return cg_intrinsic(b, "llvm.nvvm.lg2.approx.f", &x, 1, b->f32);
}

MlirValue cg_maxnumf(CgBuilder *b, MlirValue x, MlirValue y) {
  MlirValue ops[2] = {x, y};
  return cg_intrinsic(b, "llvm.maxnum.f32", ops, 2, b->f32);
}

MlirValue cg_minnumf(CgBuilder *b, MlirValue x, MlirValue y) {
  MlirValue ops[2] = {x, y};
  return cg_intrinsic(b, "llvm.minnum.f32", ops, 2, b->f32);
}

MlirValue cg_fmaf(CgBuilder *b, MlirValue x, MlirValue y, MlirValue z) {
  MlirValue ops[3] = {x, y, z};
  return cg_intrinsic(b, "llvm.fma.f32", ops, 3, b->f32);
}
