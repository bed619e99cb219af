/* interp.h - a reference interpreter of tile programs on the CPU (float64).
 *
 * Runs any kernel of the tile IR: the FA1 schedule the frontend emits, the FA2
 * schedule the passes produce, and every mix in between. Semantics are
 * whole-tile (docs/tile-ir.md): `dist` is ignored, xwarp_reduce is the
 * identity, parallel loops run in order. Values are scalars or dense R x C
 * tiles of doubles (index and i1 values are doubles holding integers exactly).
 *
 * Tensors are host arrays of doubles bound by argument name ("q", "k", "v",
 * "o", "lse", ...), with dims and element strides in the order of the
 * argument's type. The workspaces o_acc, m_buf and l_buf are allocated (and
 * poisoned with NaN, so that a read before a write shows) when the kernel has
 * them and the caller did not bind them.
 *
 * The interpreter writes numbering into Value.id and Op.id (their scratch
 * fields); nothing else of the program is changed.
 */
#ifndef FLASHC_INTERP_H
#define FLASHC_INTERP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

typedef struct InterpOptions {
  int br, bc;       /* extents of symbolic Br / Bc (tile_size ops, types) before tiling */
  bool round_casts; /* model the kernel's precision: casts round to bf16/f16/f32
                       (round to nearest even) and so do loads and stores of
                       tensors of those types; false: everything exact float64 */
} InterpOptions;

/* br = bc = 16, round_casts = true. */
void interp_options_init(InterpOptions *o);

typedef struct InterpBinding {
  const char *name; /* argument name without '%' */
  double *data;
  int64_t dims[4];    /* as in the argument's type; rank 3 tensors use 3 */
  int64_t strides[4]; /* in elements */
} InterpBinding;

/* Runs kernel f. batch, seqlen_q, seqlen_k bind the index arguments of those
 * names and resolve the symbolic extents of tensor types. Returns 0 on
 * success; on any error (malformed program, unbound or mis-shaped tensor,
 * out-of-range head index, ...) writes a message to err and returns -1. */
int interp_run(const Func *f, const InterpBinding *tensors, int ntensors, int64_t batch,
               int64_t seqlen_q, int64_t seqlen_k, const InterpOptions *o, char *err,
               size_t errlen);

/* x rounded to nearest even in elem's precision (f32, f16, bf16; overflow
 * gives +-inf, subnormals kept); other element types return x. */
double interp_round(double x, ElemType elem);

#endif
