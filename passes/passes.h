/* passes.h - the pass pipeline that turns the FlashAttention-1 schedule into
 * the FlashAttention-2 schedule, one idea a pass (docs/tile-ir.md).
 *
 * The pipeline is one straight list (pipeline.c). After every pass the
 * verifier runs and names the pass that broke the IR. Passes that only make
 * the kernel faster can be disabled one by one and the program stays correct.
 */
#ifndef FLASHC_PASSES_H
#define FLASHC_PASSES_H

#include <stdbool.h>
#include <stdio.h>

#include "ir/ir.h"

#define PASS_MAX_NAMES 16

typedef struct PassOptions {
  const char *target;                       /* "sm_80" or "sm_90a" */
  const char *disabled[PASS_MAX_NAMES];     /* -disable-pass=NAME (repeatable) */
  int ndisabled;
  const char *only;                         /* -pass=NAME: run just this pass */
  const char *print_after[PASS_MAX_NAMES];  /* -print-after=NAME */
  int nprint_after;
  bool print_after_all;                     /* -print-after-all */
  int max_passes;                           /* run at most this many (< 0: all); for prefix tests */
  FILE *dump;                               /* where IR dumps go (stderr when NULL) */
  FILE *diag;                               /* where errors go (stderr when NULL) */
  bool mma_sync;                            /* -mma=sync: codegen keeps every matmul on
                                             * mma.sync, so passes that pay off only with
                                             * asynchronous wgmma stay off */
} PassOptions;

/* A pass rewrites one kernel. Returns 0 on success; on failure it has printed
 * an error (e.g. an impossible schedule) and the pipeline stops. */
typedef int (*PassFn)(Module *m, Func *f, const PassOptions *opts, FILE *diag);

typedef struct Pass {
  const char *name;    /* as flashc shows it: "reorder-q-outer" */
  const char *summary; /* one line for --list-passes */
  bool required;       /* true when codegen needs it (cannot be disabled) */
  PassFn run;
} Pass;

/* The pipeline in order; *n receives the count. */
const Pass *pass_pipeline(int *n);
/* Finds a pass by name, or NULL. */
const Pass *pass_find(const char *name);

/* Sets defaults: all passes, target sm_90a, no dumps, max_passes -1. */
void pass_options_init(PassOptions *o);
/* Comma-separated names of the passes opts runs, for the metadata (the
 * runtime takes up to 511 characters: PASS_NAMES_MAX covers them all). */
enum { PASS_NAMES_MAX = 512 };
void pass_names_ran(const PassOptions *opts, char *buf, size_t len);
/* Was pass `name` disabled (-disable-pass=NAME)? false for NULL opts. */
bool pass_is_disabled(const PassOptions *opts, const char *name);

/* Runs the pipeline (or opts->only) on every kernel of m, verifying after
 * each pass. The environment variable FLASHC_DUMP_IR=all|NAME[,NAME] also
 * prints the IR after the named passes. Returns 0 on success. */
int run_pipeline(Module *m, const PassOptions *opts);

/* The passes, one file each. */
/* differentiate.c: every grad op becomes ops computing the derivative
 * (required: codegen and the other passes do not know grad) */
int pass_differentiate(Module *m, Func *f, const PassOptions *opts, FILE *diag);
int pass_small_batch_variant(Module *m, Func *f, const PassOptions *opts, FILE *diag);
/* long_rows_variant.c: forward d64 kernel -> + @NAME_long on 128 x 192
 * warp-specialized tiles, which the runtime launches for long rows */
int pass_long_rows_variant(Module *m, Func *f, const PassOptions *opts, FILE *diag);
int pass_tiling(Module *m, Func *f, const PassOptions *opts, FILE *diag);
/* backward main kernel on 128-key tiles: dQ's columns split between the
 * warpgroups (group_cols), each adding its own */
int pass_group_dq(Module *m, Func *f, const PassOptions *opts, FILE *diag);
int pass_split_dkdv(Module *m, Func *f, const PassOptions *opts, FILE *diag);
/* tiling.c: does decode kernel f's automatic schedule give one 16-row Q tile
 * to warps that split each K/V tile's keys (warp-split-kv)? */
bool tiling_decode_warp_split(const Func *f, const PassOptions *opts);
/* The pipeline stages of split-dkdv's dV kernel copied from the tiled
 * K/V-outer kernel f (tiling.c). */
int tiling_dv_kernel_stages(const Func *f);
/* The shared memory one block may use on target (sm_80's for an unknown
 * one): what the passes that size rings and slots fit in (tiling.c). */
long tiling_smem_limit(const char *target);
int pass_reorder_q_outer(Module *m, Func *f, const PassOptions *opts, FILE *diag);
int pass_defer_rescale(Module *m, Func *f, const PassOptions *opts, FILE *diag);
int pass_partition_warps(Module *m, Func *f, const PassOptions *opts, FILE *diag);
int pass_warp_split_kv(Module *m, Func *f, const PassOptions *opts, FILE *diag);
int pass_mask_skip(Module *m, Func *f, const PassOptions *opts, FILE *diag);
/* block_lists.c: lists of the kept tile pairs (docs/abi.md "Block lists") */
int pass_block_lists(Module *m, Func *f, const PassOptions *opts, FILE *diag);
int pass_heavy_first(Module *m, Func *f, const PassOptions *opts, FILE *diag);
/* tiles_first.c: the causal atomic backward's grid, heaviest K/V tiles first */
int pass_tiles_first(Module *m, Func *f, const PassOptions *opts, FILE *diag);
/* persistent.c: %nctas blocks walk the (batch, head, Q tile) tiles, the
 * rings' steps counting on across them (docs/hopper-pipeline.md §11) */
int pass_persistent(Module *m, Func *f, const PassOptions *opts, FILE *diag);
/* release_early.c: a slot read only in the step loop freed in its last step */
int pass_release_early(Module *m, Func *f, const PassOptions *opts, FILE *diag);
/* decode only (docs/decode.md); nothing on forward kernels */
int pass_pack_gqa(Module *m, Func *f, const PassOptions *opts, FILE *diag);
int pass_split_kv(Module *m, Func *f, const PassOptions *opts, FILE *diag);
int pass_unified_max(Module *m, Func *f, const PassOptions *opts, FILE *diag);
/* overlap_softmax.c: step j's softmax under step j-1's P V (FA3's
 * intra-warpgroup overlap; async matmuls and mma_wait) */
int pass_overlap_softmax(Module *m, Func *f, const PassOptions *opts, FILE *diag);
int pass_warp_specialize(Module *m, Func *f, const PassOptions *opts, FILE *diag);
/* pingpong.c: the two consumer warpgroups take turns issuing their step's
 * matmuls (mma_turn), one's softmax under the other's (FA3's pingpong). */
int pass_stage_inputs(Module *m, Func *f, const PassOptions *opts, FILE *diag);
int pass_pingpong(Module *m, Func *f, const PassOptions *opts, FILE *diag);
/* early_row_loads.c: a ring-fed step's row-vector loads (LSE, delta)
 * issued above its first ring_get */
int pass_early_row_loads(Module *m, Func *f, const PassOptions *opts, FILE *diag);
/* hoist_gathers.c: a step's run-time input gathers issued above the wait
 * for the async S matmul (their latency under the tensor cores). */
int pass_hoist_gathers(Module *m, Func *f, const PassOptions *opts, FILE *diag);
int pass_software_pipeline(Module *m, Func *f, const PassOptions *opts, FILE *diag);
int pass_fold_scale(Module *m, Func *f, const PassOptions *opts, FILE *diag);
/* async-matmuls (async_matmuls.c): the backward's matmuls issued early and
 * waited for late, so that independent ones overlap on wgmma */
int pass_async_matmuls(Module *m, Func *f, const PassOptions *opts, FILE *diag);

#endif
