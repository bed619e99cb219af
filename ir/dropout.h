/* dropout.h - dropout's keep decision (base/dropout_mask.h: the
 * definition, on the host) as tile-IR ops. */
#ifndef FLASHC_DROPOUT_H
#define FLASHC_DROPOUT_H

#include "base/dropout_mask.h"
#include "ir/ir.h"

/* The launch's dropout state as u32 scalars of the kernel. */
typedef struct DropoutArgs {
  Value *seed_lo, *seed_hi, *offset_lo, *offset_hi, *threshold;
} DropoutArgs;

/* The keep mask (i1, shaped like st) of the R x C score tile of type st
 * whose axis q_axis holds the queries from q0 on and the other axis the keys
 * from k0 on, for bh = b * heads + h (index scalars), as tile-IR ops. The
 * counters and slot bits come from `iota {and = M} %base` ((base + i) & M):
 * written per element, but codegen gives the elements of one group the same
 * counter value (compute_elementwise.c, lw_iota), so LLVM keeps one Philox
 * call per group. */
Value *build_dropout_keep(Builder *b, const DropoutArgs *a, Value *bh, Type st, int q_axis,
                          Value *q0, Value *k0);

/* The same for PyTorch's flash-backend mask (base/dropout_mask.h,
 * dropout_keep_torch): one Philox call per 16 x 32 block and lane. */
Value *build_dropout_keep_torch(Builder *b, const DropoutArgs *a, Value *bh, Type st, int q_axis,
                                Value *q0, Value *k0);

#endif
