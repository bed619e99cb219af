/* dropout.h - which elements dropout keeps (issue 18): the definition that
 * kernels, the interpreter and host references share.
 *
 * Element (bh = b * heads + h, q, k) of a launch with seed and offset (both
 * 64-bit, as PyTorch's CUDA generator hands them out) takes the 16-bit slot
 * k % 8 of
 *   philox4x32_7(counter = (k / 8, q, bh, offset_lo),
 *                key = (seed_lo, seed_hi + offset_hi))
 * (word (k % 8) / 2, low half for even k) and is kept when that value is
 * below threshold = round(65536 (1 - p)): a keep rate within 2^-17 of
 * 1 - p (FlashAttention-2 compares bytes: rate (floor(255 (1 - p)) + 1) /
 * 256). A pure function of (seed, offset, b, h, q, k): tiles, warps and
 * schedules cannot change it, so the backward regenerates the forward's mask
 * and a host reference recomputes it. Seven rounds as FlashAttention-2's
 * kernels (Philox4x32-7 passes BigCrush, Salmon et al. 2011); the cost of
 * ten is to be measured against it.
 */
#ifndef FLASHC_DROPOUT_H
#define FLASHC_DROPOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"

enum { DROPOUT_ROUNDS = 7 };

/* round(65536 (1 - p)) for p in [0, 1]: 65536 keeps everything. */
uint32_t dropout_threshold(double p);

/* The keep decision of element (bh, q, k) (the definition above). */
bool dropout_keep(uint64_t seed, uint64_t offset, uint32_t bh, uint32_t q, uint32_t k,
                  uint32_t threshold);

/* The launch's dropout state as u32 scalars of the kernel. */
typedef struct DropoutArgs {
  Value *seed_lo, *seed_hi, *offset_lo, *offset_hi, *threshold;
} DropoutArgs;

/* The keep mask (i1) of the R x C score tile with query indices qi (R x 1
 * index tile), key indices ki (1 x C) and bh (an index scalar), as tile-IR
 * ops (one Philox per element: the definition, not yet the fast form). */
Value *build_dropout_keep(Builder *b, const DropoutArgs *a, Value *bh, Value *qi, Value *ki);

#endif
