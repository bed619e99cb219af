/* compute.h - layer 2: compute on register tiles (docs/codegen.md).
 *
 *   compute_elementwise.c  elementwise ops, iota, full
 *   compute_dropout.c      dropout's keep test on packed pairs of P
 *   compute_reduce.c       every reduction (rowmax/rowsum, xwarp_reduce, reduce)
 *   compute_matmul.c       the matmul dispatcher, in front of two engines:
 *   compute_mma_sync.c       mma.sync m16n8k16 (ldmatrix operands)
 *   compute_wgmma.c          wgmma (sm_90a, descriptor operands)
 *   compute_merge.c        merging split-kv's partials (combine kernel, fused combine)
 */
#ifndef FLASHC_COMPUTE_H
#define FLASHC_COMPUTE_H

#include "codegen/mem.h"

/* ------------------------------------------------------- elementwise */

void lw_elementwise(Lowerer *L, const Op *op);
void lw_iota(Lowerer *L, const Op *op);
void lw_full(Lowerer *L, const Op *op);
/* Is the index scalar v a multiple of m by its definition (constants, sums
 * and products of them: tile bases)? */
bool lw_index_multiple_of(const Value *v, int m);
/* Dropout applied to P's column pairs (compute_dropout.c): lowers `cast`
 * of ir/dropout.c's dropout select to bf16 / f16 one packed pair at a time
 * and returns true (also when it reported op's tile as one the warps cannot
 * hold), or returns false (nothing emitted) when op is not that form or its
 * tile has no such pairs. */
bool lw_dropout_cast(Lowerer *L, const Op *op);

/* -------------------------------------------------------- reductions */

typedef enum RKind { RK_MAX, RK_MIN, RK_SUM } RKind;
/* a (k) c in element type et: f32 (maxnum, minnum, add), i1 (and for
 * min, or else), or an integer. */
MlirValue lw_combine(Lowerer *L, RKind k, ElemType et, MlirValue a, MlirValue c);
void lw_reduce_rows(Lowerer *L, const Op *op); /* rowmax, rowsum */
void lw_xwarp_reduce(Lowerer *L, const Op *op);
void lw_reduce(Lowerer *L, const Op *op); /* a tile to one value for the block */
int lw_scratch_bytes(Lowerer *L); /* shared memory the xwarp_reduce ops need */
/* True when every xwarp_reduce comes after the last use of staged tiles: in
 * no sequential loop and with no staged load after it (warp-split-kv's merge
 * after the K/V loop). The scratch may then share the tiles' bytes. */
bool lw_scratch_can_alias(Lowerer *L);

/* ------------------------------------------------------------ matmul */

typedef struct MmaPlan {
  const CgVal *a, *bm;
  bool a_smem, trans_a, trans_b; /* trans_a: A^T is what shared memory holds */
  int b_col0;                    /* B's first column (its window; B not transposed) */
  CgMmaType mt;
  int nm, nn, ksteps;
  bool ktail; /* mma.sync: K is 8 mod 16, one m16n8k8 step after the k16 ones */
  LaneAddr a_lane; /* mma.sync, A (smem): this lane's ldmatrix row */
  LaneAddr b_lane; /* mma.sync, B: this lane's ldmatrix row */
} MmaPlan;

void lw_matmul(Lowerer *L, const Op *op);
/* mma_wait: the async matmul's registers once at most `pending` later
 * groups run (wgmma); the value itself on mma.sync. */
void lw_mma_wait(Lowerer *L, const Op *op);
/* mma.sync: the lanes' ldmatrix addresses (after the dispatcher's checks;
 * k0: the warp's first k column, k_split: A's columns split over warps). */
bool lw_mma_sync_plan(Lowerer *L, const Op *op, const TileGeom *rg, MmaPlan *p, MlirValue k0,
                      bool k_split);
/* r (initialized with the accumulator) += a * b on mma.sync; false after an error. */
bool lw_mma_sync_matmul(Lowerer *L, const Op *op, const MmaPlan *p, CgVal *r);
/* Decides L->wgmma for the kernel: kind_why (may be NULL) is why the
 * kernel kind keeps its kernels on mma.sync. False only after an error
 * (wgmma forced on a kernel that cannot use it). */
bool lw_wgmma_plan(Lowerer *L, CgTensorCore tc, const char *target, const char *kind_why);
/* r (initialized with the accumulator) += a * b on warpgroup MMA (the
 * dispatcher's plan p: A^T in shared memory when trans_a, B^T when trans_b). */
void lw_wgmma_matmul(Lowerer *L, const Op *op, CgVal *r, const MmaPlan *p, bool has_acc);
/* The wait of an async wgmma matmul (lw_mma_wait). */
void lw_wgmma_wait(Lowerer *L, const Op *op, const CgVal *src, CgVal *r);

/* ----------------------------------------------- split-kv partials */

enum { COMBINE_LOADS = 16, COMBINE_MAX_CHUNKS = 8 };

/* One merge of partials (compute_merge.c): the caller fills L, the kind's
 * nsplit and q_len, the unit's b and h0, pack and vol, then lw_comb_refs
 * and lw_comb_threads. */
typedef struct Comb {
  Lowerer *L;
  MlirValue nsplit, q_len;              /* i64: splits, query tokens per sequence */
  TensorRef opart, lpart, o, lse;
  MlirValue b, h, bs0, nsm1;            /* i64; h: the unit's query head */
  MlirValue h0;                         /* i64: packed: first head of the group, else the head */
  int pack;                             /* unit u is head h0 + u / q_len, token u % q_len;
                                         * 0: head h0, token u */
  bool vol;                             /* fused: partials other blocks wrote, past L1 */
  MlirValue col[COMBINE_MAX_CHUNKS];    /* first column of each chunk (i64, clamped) */
  MlirValue col_ok[COMBINE_MAX_CHUNKS]; /* i1: the chunk is inside dv */
  int nchunk, group;
  MlirType v4;
} Comb;

/* The tensors o_part, lse_part, o, lse of the kernel; false after an error. */
bool lw_comb_refs(Lowerer *L, const Op *op, Comb *c);
/* The thread layout: float4 column chunks of a unit, units side by side.
 * Sets the columns of c and the thread's first unit (offset), step and
 * whether it owns column 0; false (error reported) when dv is too wide. */
bool lw_comb_threads(Comb *c, int dv, MlirValue *u0, MlirValue *step, MlirValue *first);
/* Merges the thread's units u = u0, u0 + step, ... below uend; a unit is
 * one (head, token) row. */
void lw_comb_units(Comb *c, MlirValue u0, MlirValue uend, MlirValue step, MlirValue first);

#endif
