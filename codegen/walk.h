/* walk.h - layer 3: the IR walker (walk.c) and the hooks a kernel kind
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

enum { LW_MAX_PARAMS = 32 };

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
  /* The ABI: nptr pointers, then ni32 i32 sizes, then ni64 i64 strides. */
  int nptr, ni32, ni64;
  /* Binds the parameters (the i32 sizes widened to i64) to the Lowerer's
   * fields (lw_bind_io_params; the IR's index arguments other than batch,
   * seqlen_q, seqlen_k by lw_bind_index) and the kind's state; may emit the
   * kernel's prologue. */
  void (*bind)(Lowerer *L, const MlirValue *args);
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
  /* A rank 1 i32 tensor parameter load_scalar may read, by name (a null
   * value: none). May be NULL. */
  MlirValue (*scalar_tensor)(Lowerer *L, const char *name);
} LwKind;

/* Lowers f as a kernel of kind K into gpu.func @<f->name> (cg_lower.h). */
int lw_walk_kernel(CgContext *cc, MlirBlock gpu_module, const Func *f, const LwKind *K,
                   CgTensorCore tc, const char *target, CgKernelInfo *info);

/* ------------------------------------------------ for the kinds' hooks */

/* The pointers q, k, v, o, lse, workspace (args 0..5) and the q, k, v, o
 * strides starting at args[strides_at]. */
void lw_bind_io_params(Lowerer *L, const MlirValue *a, int strides_at);

#endif
