/* cg_lower.h - layer 0: the lowering's interface to the stage driver
 * (codegen.c): one tile IR kernel to one gpu.func. Implemented by kinds.c
 * (the kernel kinds) over the walker (walk.c); docs/codegen.md. */
#ifndef FLASHC_CG_LOWER_H
#define FLASHC_CG_LOWER_H

#include <stdbool.h>

#include "codegen/cg_context.h"
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "mlir-c/IR.h"

/* The extern shared array all kernels address their dynamic shared memory
 * through (defined once per gpu.module). */
#define CG_SMEM_SYMBOL "__flashc_smem"

/* The most tensor maps a kernel takes (Q, K, V and a staged input). */
enum { CG_MAX_TMAPS = 4 };

/* What the lowering learned that the metadata must say. */
typedef struct CgKernelInfo {
  int smem_bytes;     /* dynamic shared memory the launch must provide */
  int threads;        /* block size */
  int parallel_loops; /* 3: grid q_tiles,heads,batch; 2: 1,heads,batch */
  int workspace_floats_per_row;
  bool wgmma;         /* its matmuls run on warpgroup MMA (compute_wgmma.c) */
  bool matmuls;       /* it has any (the backward's pre and post have none) */
  /* Its tensor-map parameters (its last ones), in order: the tensor ("q",
   * "k", "v", a run-time input's "in_NAME", or the backward's "dq_acc"),
   * the box's rows (the ring's tile rows, columns 64; dq_acc's: a warp's
   * rows, f32 columns 32) and the parameter's name ("tmap_q", ...). */
  int ntmaps;
  const char *tmap_tensor[CG_MAX_TMAPS];
  int tmap_rows[CG_MAX_TMAPS];
  char tmap_param[CG_MAX_TMAPS][104];
} CgKernelInfo;

/* Appends gpu.func @<f->name> to the gpu.module body. Errors go to cc's
 * diagnostics at the tile IR's source locations. Returns 0 on success. */
int cg_lower_kernel(CgContext *cc, MlirBlock gpu_module, const Func *f, CgTensorCore tc,
                    CgExpFma exp_fma, CgLaneStats lane_stats, const char *target, CgKernelInfo *info);

#endif
