/* walk.h - layer 3: the IR walker (walk.c, walk_kernel.c) and the hooks a kernel kind
 * plugs into it (docs/codegen.md, "Adding a kernel kind").
 *
 * The walker lowers every op the same way for every kernel; what depends
 * on the kind of kernel (its ABI, its grid, where its loads and stores find
 * their rows, which matmul engines it may use) comes from its LwKind table,
 * the way QBE's targets plug into its emitter. A kind's own state lives in
 * its file (Lowerer.kind_state), set up by its bind hook.
 */
#ifndef FLASHC_WALK_H
#define FLASHC_WALK_H

#include "codegen/cg_lower.h"
#include "codegen/compute.h"

enum { LW_MAX_PARAMS = 96 };

/* One kernel parameter of a kind's ABI, in order. Names the walker binds to
 * Lowerer fields: q k v o lse workspace (pointers), batch seqlen_q
 * seqlen_k (i32 sizes, widened to i64), T.sb T.ss T.sh for T in q k v o
 * (i64 element strides: LW_STRIDES); every other name is a parameter of
 * the kind's own (lw_param): a pointer, an i32 size (widened) or an i64.
 * A kernel with dropout (attribute `dropout`) takes lw_dropout_params after
 * its kind's: u32 words and an f32, bound by name to the IR's scalar
 * arguments of those names. A kernel whose rings are TMA's takes last one
 * tensor map per TMA-loaded tensor (LW_TMAP, "tmap_q", "tmap_k", "tmap_v": a
 * 128-byte CUtensorMap passed by value as a grid constant). */
typedef enum LwParamType { LW_PTR, LW_I32, LW_I64, LW_U32, LW_F32, LW_TMAP } LwParamType;
typedef struct LwParam {
  LwParamType type;
  const char *name;
} LwParam;
#define LW_STRIDES(t) {LW_I64, t ".sb"}, {LW_I64, t ".ss"}, {LW_I64, t ".sh"}

/* A grid-stride mapping of parallel loops: the loop whose upper bound is
 * the IR argument `bound` (NULL: a constant) runs on grid dimension `dim`
 * ("x", "y" or "z"); the first entry that matches wins, a loop no entry
 * matches runs inside the block. */
typedef struct LwGridMap {
  const char *bound, *dim;
} LwGridMap;

/* Lowers the body of a grid-stride loop on `dim` itself, into block `body`
 * at iv; false: the walker lowers the IR body. */
typedef bool (*LwGridBody)(Lowerer *L, const Op *op, const char *dim, MlirValue iv,
                           MlirBlock body);

typedef struct LwKind {
  const char *name;
  /* Is f a kernel of this kind? Exactly one kind accepts each kernel. */
  bool (*accepts)(const Func *f);
  /* Why this kind's kernels stay on mma.sync; NULL: wgmma wherever the
   * kernel's matmuls and staged tiles allow it (compute_wgmma.c). */
  const char *no_wgmma;
  /* Make each wgmma's shared-memory matrix descriptors where it is issued
   * (compute_wgmma.c), not once before the loops: kernels that hold large
   * accumulators across their loops (the backward's dK, dV) would keep the
   * hoisted descriptors, 64-bit values, in registers and spill them. */
  bool remat_descriptors;
  /* The ABI (docs/abi.md, docs/decode.md): nparams parameters. */
  const LwParam *params;
  int nparams;
  /* After the parameters are bound: the kind's state (L->kind_state), and
   * the kernel's prologue if it has one. May be NULL. */
  void (*bind)(Lowerer *L);
  /* The grid: empty (grid[0].dim NULL): one iteration of each parallel
   * loop per block, the k-th loop of the nest on grid z, y, x; else
   * grid-stride loops mapped by the table, with grid_body (may be NULL)
   * lowering some loops' bodies itself. */
  LwGridMap grid[4];
  LwGridBody grid_body;
  /* load and load_paged; store (with the kind's epilogue): make the row
   * map and call lw_load / lw_store (mem.h). */
  void (*load)(Lowerer *L, const Op *op);
  void (*store)(Lowerer *L, const Op *op);
} LwKind;

/* Lowers f as a kernel of kind K into gpu.func @<f->name> (cg_lower.h;
 * walk_kernel.c). */
int lw_walk_kernel(CgContext *cc, MlirBlock gpu_module, const Func *f, const LwKind *K,
                   CgTensorCore tc, CgExpFma exp_fma, CgLaneStats lane_stats, const char *target,
                   CgKernelInfo *info);

/* walk.c: lowers the ops of blk in order into the current block. */
void lw_walk_block(Lowerer *L, const Block *blk);
/* gridDim.dim as i64 (a grid-stride loop's step; a persistent kernel's
 * %nctas). */
MlirValue lw_grid_dim(CgBuilder *b, const char *dim);

/* A warp_roles kernel's registers: the blocks an SM runs and the
 * setmaxnreg budgets of the producer and consumer warpgroups, from the
 * consumers' thread count and the op's blocks_per_sm (0: absent) (walk.c). */
typedef struct LwRoleRegs {
  int blocks_per_sm, producer, consumer;
} LwRoleRegs;
LwRoleRegs lw_role_regs(int consumer_threads, int blocks_per_sm, bool backward);

#endif
