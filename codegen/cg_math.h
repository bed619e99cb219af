/* cg_math.h - layer 0: f32 math on the GPU's own units, for every layer
 * that computes (cg_math.c). Math goes through LLVM's own intrinsics:
 * convert-gpu-to-nvvm would turn math ops (and llvm.intr.* math ops) into
 * libdevice calls, which we never link. The NVPTX backend selects
 * ex2.approx.f32, lg2.approx.f32, fma.rn.f32, max.f32 and min.f32 for these. */
#ifndef FLASHC_CG_MATH_H
#define FLASHC_CG_MATH_H

#include "codegen/cg_builder.h"

#define CG_LOG2E 1.4426950408889634
#define CG_LN2 0.6931471805599453

/* 2^x on the MUFU unit (ex2.approx.f32: about 2 ulp). */
MlirValue cg_exp2f(CgBuilder *b, MlirValue x);
/* 2^x with results below 2^-126 flushed to 0 (ex2.approx.ftz.f32): one
 * MUFU op, where the non-flushing form is five instructions (a range test, a
 * halving, the MUFU op and a squaring to reach the denormals). For values
 * that are probabilities (softmax), never for a user's expression. */
MlirValue cg_exp2f_ftz(CgBuilder *b, MlirValue x);
/* e^x = 2^(x log2e). */
MlirValue cg_expf(CgBuilder *b, MlirValue x);
/* log2 on the MUFU unit (lg2.approx: 2^-22 relative error); log2(0) = -inf. */
MlirValue cg_log2f(CgBuilder *b, MlirValue x);
MlirValue cg_maxnumf(CgBuilder *b, MlirValue x, MlirValue y);
MlirValue cg_minnumf(CgBuilder *b, MlirValue x, MlirValue y);
MlirValue cg_fmaf(CgBuilder *b, MlirValue x, MlirValue y, MlirValue z);

#endif
