/* codegen.h - tile IR (FlashAttention-2 schedule) to MLIR, LLVM IR, PTX, cubin.
 *
 *   Module (ir/ir.h) --walk.c: one tile op at a time, through the MLIR C API-->
 *   builtin.module { gpu.module [#nvvm.target] { gpu.func @kernel ... } }   -emit=mlir
 *   --MLIR passes--> llvm/nvvm dialects --translation + LLVM O3--> LLVM IR   -emit=llvm
 *   --NVPTX backend--> PTX (metadata comment lines first, docs/abi.md)       -emit=ptx
 *   --ptxas--> cubin                                                         -emit=cubin
 *
 * Kernel signature: exactly docs/abi.md (bare pointers, i32 sizes, i64
 * strides). Each kernel of the module becomes one entry point; the metadata
 * block of each kernel precedes the PTX, in module order.
 */
#ifndef FLASHC_CODEGEN_H
#define FLASHC_CODEGEN_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/ir.h"

/* The most dynamic shared memory one block may opt into (bytes). */
enum { CG_SMEM_LIMIT_SM80 = 163 * 1024, CG_SMEM_LIMIT_SM90 = 227 * 1024 };

typedef enum CgStage {
  CG_STAGE_META,  /* the `// flashc.meta` lines alone (-emit=meta) */
  CG_STAGE_MLIR,  /* the MLIR module as codegen built it, before any MLIR pass */
  CG_STAGE_LLVM,  /* the optimized LLVM IR handed to the NVPTX backend */
  CG_STAGE_PTX,   /* metadata lines + PTX */
  CG_STAGE_CUBIN, /* ptxas output (binary); needs ptxas */
} CgStage;

/* What `--stats` prints. Fields ptxas reports are -1 when ptxas did not run. */
typedef struct CgStats {
  double ms_build;        /* tile IR -> MLIR */
  double ms_mlir_passes;  /* MLIR lowering pipeline */
  double ms_translate;    /* MLIR -> LLVM IR */
  double ms_llvm_opt;     /* LLVM O3 */
  double ms_llvm_codegen; /* NVPTX backend */
  double ms_ptxas;        /* ptxas -v */
  int registers;          /* per thread */
  int smem_static_bytes;  /* ptxas' static shared memory (ours is dynamic: 0) */
  int smem_dynamic_bytes; /* what the kernel asks for at launch (metadata smem_bytes) */
  int spill_stores, spill_loads, stack_bytes;
  /* Per kernel of the module (a decode kernel's combine kernel, a forward's
   * backward kernels), in module order; the fields above are the first's. */
  int nkernels;
  struct {
    char name[128];
    int registers, spill_stores, spill_loads, stack_bytes, smem_dynamic_bytes;
  } kernels[16];
} CgStats;

/* Which tensor-core instruction the matmuls use. */
typedef enum CgTensorCore {
  CG_TC_AUTO,     /* wgmma on sm_90a where the kernel allows it, else mma.sync */
  CG_TC_MMA_SYNC, /* mma.sync m16n8k16 (sm_80 and up) */
  CG_TC_WGMMA,    /* wgmma (sm_90a); an error for a kernel that cannot use it */
} CgTensorCore;

/* Which exponentials run on the FMA and integer units (a polynomial)
 * instead of the MUFU's ex2: the MUFU does 16 an SM a cycle, so kernels
 * whose exps rival their matmuls balance the two units. */
typedef enum CgExpFma {
  CG_EXP_FMA_AUTO,    /* forward kernels: half of tanh's (softcap, perf-log P61) */
  CG_EXP_FMA_OFF,     /* every exp on the MUFU */
  CG_EXP_FMA_QUARTER, /* auto's, and a quarter of the softmax's (sm_90a forwards) */
  CG_EXP_FMA_HALF,    /* auto's, and half of the softmax's (sm_90a forwards) */
} CgExpFma;

/* The K/V-outer backward kernels' LSE and delta (the columns of S^T), up
 * to head dim 128: held across the lanes and shuffled at their use where
 * every use is elementwise, and through a loop's carry (d64's software
 * pipeline loads them a step ahead) in the deterministic launch's bwd_kv
 * (auto, docs/perf-log.md P140, P142); through every kernel's carry
 * (carry: the atomic kernel 3-4% slower at d64, P142); or in the
 * accumulator layout, 16 + 16 registers a thread at 64 columns (off). */
typedef enum CgLaneStats { CG_LANE_STATS_AUTO, CG_LANE_STATS_OFF, CG_LANE_STATS_CARRY } CgLaneStats;

typedef struct CgOptions {
  const char *target;   /* "sm_90a" (default when NULL) or "sm_80" */
  int opt_level;        /* LLVM optimization 0..3; cg_options_init sets 3 */
  const char *ptxas;    /* ptxas to run for CUBIN and stats; NULL: "ptxas" on PATH */
  CgTensorCore tensor_core; /* CG_TC_AUTO from cg_options_init */
  CgExpFma exp_fma;         /* CG_EXP_FMA_AUTO from cg_options_init */
  CgLaneStats lane_stats;   /* CG_LANE_STATS_AUTO from cg_options_init */
  const char *passes;   /* comma list of tile-IR passes that ran (metadata); may be NULL */
  CgStats *stats;       /* when non-NULL: filled, and ptxas -v runs for PTX too */
} CgOptions;

void cg_options_init(CgOptions *o);

/* Lowers every kernel of `m` and produces `stage`. On success returns 0 and
 * *out holds a malloc'ed buffer of *outlen bytes (NUL-terminated as well;
 * free() it). On failure returns nonzero, *out is NULL, and err holds the
 * messages, one per line as `file:line:col: error: ...` pointing into the
 * spec (the tile IR's locations). */
int cg_emit(const Module *m, CgStage stage, const CgOptions *opts, char **out, size_t *outlen,
            char *err, size_t errlen);

/* "LLVM 22.1.x, MLIR 22.1.x (N dialects loaded), NVPTX backend", from the
 * linked libraries (for `flashc --version`). */
const char *cg_version(void);

#endif
