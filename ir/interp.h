/* interp.h - a reference interpreter of tile programs on the CPU (float64).
 *
 * Runs any kernel of the tile IR: the FA1 schedule the frontend emits, the FA2
 * schedule the passes produce, and every mix in between. Semantics are
 * whole-tile (docs/tile-ir.md): `dist` is ignored, xwarp_reduce is the
 * identity, parallel loops run in order, a warp_roles runs its producer
 * region to completion and then its consumer region (a ring is a map from
 * step to tile; a step got but never put, put twice, got after its release,
 * released twice or without a get, or put and never released is an error). Values are scalars or dense R x C
 * tiles of doubles (index and i1 values are doubles holding integers exactly).
 *
 * Tensors are host arrays of doubles bound by argument name ("q", "k", "v",
 * "o", "lse", ...), with dims and element strides in the order of the
 * argument's type (i32 tensors, the decode index tables, hold integers). The
 * workspaces o_acc, m_buf, l_buf, o_part and lse_part are allocated (and
 * poisoned with NaN, so that a read before a write shows) when the kernel has
 * them and the caller did not bind them.
 *
 * `grad y, x` is evaluated without the differentiate pass: forward-mode
 * differentiation with dual numbers over the ops from x to y (values that do
 * not depend on x have derivative 0), the same rules as the pass but written
 * independently, so that a program run before and after the pass is a
 * differential test of it; a chain with no derivative is an error.
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

/* A scalar argument (a run-time input, %in_NAME) is bound the same way:
 * its value is data[0]. */
typedef struct InterpBinding {
  const char *name; /* argument name without '%' */
  double *data;
  int64_t dims[4];    /* as in the argument's type; rank 3 tensors use 3, ... */
  int64_t strides[4]; /* in elements */
} InterpBinding;

/* The run-time extents of a launch. Decode kernels name seqlen_q `q_len`
 * and the cache length `capacity` (docs/decode.md); nsplit, num_pages and
 * max_pages only matter to kernels whose types or arguments use them. */
typedef struct InterpSizes {
  int64_t batch, seqlen_q, seqlen_k;
  int64_t nsplit, num_pages, max_pages;
  /* dropout's launch (a kernel with its arguments, emit_internal.h): the
   * probability and the generator's seed and offset; the u32 / f32
   * arguments seed_lo .. keep_scale are made from them as the runtime
   * makes them (keep_threshold = dropout_threshold(p), keep_scale the f32
   * nearest 1 / (1 - p)). */
  double dropout_p;
  uint64_t seed, offset;
  /* a persistent kernel's %nctas (passes/persistent.c): the blocks that
   * walk its tiles; 0 binds 3 (a stride that leaves some blocks a tile
   * fewer than others) */
  int64_t nctas;
} InterpSizes;

/* Runs kernel f. batch, seqlen_q, seqlen_k bind the index arguments of those
 * names and resolve the symbolic extents of tensor types. Returns 0 on
 * success; on any error (malformed program, unbound or mis-shaped tensor,
 * out-of-range head index, ...) writes a message to err and returns -1. */
int interp_run(const Func *f, const InterpBinding *tensors, int ntensors, int64_t batch,
               int64_t seqlen_q, int64_t seqlen_k, const InterpOptions *o, char *err,
               size_t errlen);

/* interp_run with every extent: the index arguments batch, seqlen_q / q_len,
 * seqlen_k / capacity, nsplit and max_pages get the matching field. */
int interp_run_sizes(const Func *f, const InterpBinding *tensors, int ntensors,
                     const InterpSizes *sz, const InterpOptions *o, char *err, size_t errlen);

/* Runs every kernel of m in order (a decode split kernel, then its combine
 * kernel) on the same bindings. Workspaces the caller did not bind are
 * allocated once (NaN-poisoned) and shared by all kernels that name them, so
 * split-kv's %o_part / %lse_part flow from one kernel to the next. */
int interp_run_module(const Module *m, const InterpBinding *tensors, int ntensors,
                      const InterpSizes *sz, const InterpOptions *o, char *err, size_t errlen);

/* x rounded to nearest even in elem's precision (f32, f16, bf16; overflow
 * gives +-inf, subnormals kept); other element types return x. */
double interp_round(double x, ElemType elem);

#endif
