/* emit_tile.h - emits the tile IR of a checked KernelSpec in the
 * FlashAttention-1 schedule (Algorithm 1 of the FlashAttention paper;
 * docs/tile-ir.md). The frontend's last step: above ir/ in the layers
 * (docs/layers.md). */
#ifndef FLASHC_EMIT_TILE_H
#define FLASHC_EMIT_TILE_H

#include <stdio.h>

#include "frontend/spec.h"
#include "ir/ir.h"

/* Adds the kernel for `k` to m. `target` ("sm_80" / "sm_90a") is recorded on
 * the kernel for the tiling pass; with grad = true the backward kernels follow
 * it. Returns NULL after printing an error in the
 * `file:line:col: error:` form for what cannot be emitted (yet). */
Func *emit_tile_kernel(Module *m, const KernelSpec *k, const char *target, FILE *diag);

/* Adds the backward kernels of forward kernel k (grad = true; docs/backward.md)
 * after it: NAME_bwd_pre, NAME_bwd, NAME_bwd_post, NAME_bwd_kv, NAME_bwd_q,
 * each with attribute grad_of = NAME. emit_tile_kernel calls it. Returns 0,
 * or 1 after printing an error. */
int emit_backward_kernels(Module *m, const KernelSpec *k, const char *target, FILE *diag);

#endif
