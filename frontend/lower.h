/* lower.h - from a checked KernelSpec to the tile IR in the FlashAttention-1
 * schedule (Algorithm 1 of the FlashAttention paper; docs/tile-ir.md). */
#ifndef FLASHC_LOWER_H
#define FLASHC_LOWER_H

#include <stdio.h>

#include "frontend/spec.h"
#include "ir/ir.h"

/* Adds the kernel for `k` to m. `target` ("sm_80" / "sm_90a") is recorded on
 * the kernel for the tiling pass. Returns NULL after printing an error in the
 * `file:line:col: error:` form for what cannot be lowered (yet). */
Func *lower_kernel(Module *m, const KernelSpec *k, const char *target, FILE *diag);

#endif
