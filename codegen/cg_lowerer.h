/* cg_lowerer.h - layer 0: the state every layer of the tile IR -> MLIR
 * lowering shares (docs/codegen.md), and the value map.
 *
 * Each tile IR value becomes a CgVal:
 *   - a scalar: one MLIR value (index -> i64, f32, i1);
 *   - a register tile: the elements one thread holds, in the mma.sync
 *     m16n8k16 accumulator layout (see TileGeom, cg_frag.h), fully unrolled:
 *     every element is its own SSA value;
 *   - a shared-memory tile: a loaded Q/K/V tile staged for ldmatrix or
 *     wgmma (cg_smem.h).
 *
 * Accumulator layout, per warp, for an m16 x n8 fragment: lane l holds rows
 * g = l/4 and g+8, columns 2*(l%4) and 2*(l%4)+1; element e (0..3) is row
 * g + 8*(e/2), column 2*(l%4) + e%2. A warp's share of a tile is a grid of
 * fragments (nm x nn); where the share starts depends on the warp (dist).
 *
 * What only one kernel kind needs (the decode kernels' cache lengths, block
 * table, splits) is not here: it lives in that kind's file (kind_*.c),
 * behind Lowerer.kind_state; the layers below see only the parameters of
 * the kind's ABI, by name (lw_param).
 */
#ifndef FLASHC_CG_LOWERER_H
#define FLASHC_CG_LOWERER_H

#include <stdbool.h>

#include "codegen/cg_builder.h"
#include "codegen/codegen.h"
#include "ir/ir.h"

/* The shape class of a register tile. */
typedef enum TileClass {
  TC_ONE,  /* 1 x 1: one value, same in every thread */
  TC_ROWV, /* R x 1: per m16 tile, 2 values (rows g, g+8) */
  TC_COLV, /* 1 x C: per n8 tile, 2 values (cols 2q, 2q+1) */
  TC_FULL, /* R x C: per fragment, 4 values */
} TileClass;

/* How one warp holds a register tile. */
typedef struct TileGeom {
  TileClass cls;
  int rows, cols; /* logical extent */
  int nm, nn;     /* fragments per warp: m16 tiles, n8 tiles */
  bool row_split; /* warp w starts at row w * 16 * nm (dist rows) */
  bool col_split; /* warp w starts at col w * 8 * nn (dist cols) */
  int groups;     /* > 1 (dist group_cols): the warps form `groups` groups of
                   * group_warps; warp w holds rows 16 nm (w % group_warps) */
  int group_warps;
  bool group_cols; /* dist group_cols: group g holds columns g * 8 nn .. */
} TileGeom;

/* CV_RING: a ring's shared-memory slots and barriers (mem_ring.c). */
typedef enum CgValKind { CV_SCALAR, CV_TILE, CV_SMEM, CV_RING } CgValKind;

typedef struct CgVal {
  CgValKind kind;
  Type type;     /* the IR type */
  MlirValue v;   /* CV_SCALAR; CV_TILE when splat */
  /* CV_TILE */
  TileGeom g;
  bool splat;    /* every element is v (a `full` tile): stored once */
  MlirValue *e;  /* ne elements unless splat */
  int ne;
  /* CV_SMEM */
  int smem_off;     /* bytes from the start of dynamic shared memory */
  MlirValue smem_dyn; /* i32 byte offset when the buffer is chosen at run time
                       * (a tile carried by a pipelined loop); else null */
  int ring;         /* this step's tile of a pipelined loop (a body argument):
                     * index into Lowerer.rings; -1 otherwise */
  int smem_stride;  /* elements per row (cols + padding; cols when swizzled) */
  bool swizzled;    /* the 128-byte swizzled layout (lw_swizzled_byte) */
  int async_seq;    /* cp.async group number; -1 when ready */
  /* CV_TILE, a 1 x C f32 row vector of C = 32 k columns held across the
   * warp's lanes instead of in the accumulator layout (cg_frag.c
   * lw_elem): lane l holds columns 64 (s / 2) + 2 l + s % 2 in slot s,
   * `lanes` = k values (2 at C = 64, not 16), each fetched by a shuffle at
   * its use in the layout; 0 otherwise. The backward's LSE and delta along
   * a transposed score tile (mem_lanes.c). lane_cache holds the shuffled
   * values of lane_block, 2 nn of them, made once a block. */
  int lanes;
  MlirValue *lane_cache;
  MlirBlock lane_block;
  /* CV_TILE, the result of an async matmul still running on wgmma (until
   * its mma_wait): the A fragment registers it reads, kept alive to the wait */
  MlirValue *mma_a;
  int mma_na;
  bool mma_running;
  /* CV_RING: `ring_stages` slots of `ring_slot_bytes` from smem_off (the
   * tile's layout in smem_stride, swizzled), then 2 x stages mbarriers of
   * 8 bytes at ring_bars: full[0..stages), empty[0..stages) */
  int ring_stages, ring_slot_bytes, ring_bars;
  int ring_zero; /* ring {zero = 1}: the byte offset of step -1's slot of zeros; else -1 */
  bool ring_tma;      /* ring {tma = 1}: puts are TMA copies from ring_map */
  MlirValue ring_map; /* its tensor map (a tmap_* parameter) */
} CgVal;

/* Capacities of the async state (cg_async.h): cp.async groups in flight
 * on one path (a staged load issues one; past this many codegen waits for
 * all of them), and rings of the pipelined loops being lowered (one per
 * carried tile, nested loops together). */
enum { MAX_PENDING_GROUPS = 32, MAX_CARRY_RINGS = 16 };

/* Parameters a kernel kind may bind by name beyond the shared ones (the
 * backward's dout, dq, dk, dv, delta, dq_acc and their strides). */
enum { MAX_KIND_PARAMS = 64 };

/* A pending cp.async group (issued, not yet waited for). */
typedef struct Pending {
  int seq;
  bool carried; /* a tile ahead of a pipelined loop (its ring's next load):
                 * stays in flight across the loop's back edge */
} Pending;

/* Bytes of padding after each staged row. */
enum { SMEM_PAD_ELEMS = 8 };

/* A staged tile carried by a pipelined loop `depth` steps ahead: depth + 1
 * buffers; the body's arguments hold this step's tile and the next depth - 1
 * steps' (held[0] .. held[depth-1], buffer offsets chosen at run time), and
 * the body's load of step j + depth writes into the one buffer none of them
 * holds (buf_sum minus theirs). */
enum { MAX_RING_DEPTH = 4 }; /* steps ahead a loop may carry a tile (stages - 1 <= 3) */
typedef struct CarryRing {
  int depth;
  int buf_sum;                /* the byte offsets of the depth + 1 buffers, summed */
  const Op *next_load;        /* the body's load of the tile depth steps ahead */
  MlirValue held[MAX_RING_DEPTH]; /* i32 offsets held by the body's arguments */
  int entry_epoch;            /* barrier epoch at body entry */
  bool wrote_before_barrier;  /* next written before any barrier of the step */
  bool cur_read;              /* held[0] read since the last barrier */
} CarryRing;

typedef struct Lowerer Lowerer;
struct Lowerer {
  CgBuilder b;
  CgContext *cc;
  const Func *f;
  /* the fragment slot (0..3) of the tile element being lowered, 0 for
   * scalars: elementwise code that splits work between units by element */
  int elem_slot;
  int warps, threads;
  ElemType dtype;
  bool wgmma; /* matmuls on warpgroup MMA, staged tiles swizzled */
  bool has_matmul;
  /* The last register tile written to shared memory (lw_regs_to_smem) and
   * its copy, reused by later matmuls in the same block (dQ's chunks). */
  const CgVal *smem_copy_of;
  CgVal *smem_copy;
  MlirBlock smem_copy_block;
  bool sm90; /* target sm_90a: Hopper-only instructions outside the tensor cores */
  CgExpFma exp_fma; /* which exps go to the FMA units (codegen.h; compute_elementwise.c) */
  bool remat_descriptors; /* the kind's (walk.h): wgmma descriptors made at each use */
  bool failed;
  /* lw_elem reads slot ni of a lane-held row vector as it is (an
   * elementwise op whose result is held so too: compute_elementwise.c) */
  bool lane_slots;
  bool lane_vectors; /* the backward's LSE and delta held across the lanes (mem_lanes.c) */
  bool lane_carry;   /* ... through a loop's carry too (walk_kernel.c: bwd_kv under auto, all under carry) */
  /* Per-thread ids (i32) made at kernel entry. */
  MlirValue tid, warp, lane, lg, lq; /* lg = lane / 4, lq = lane % 4 */
  MlirValue smem;                    /* !llvm.ptr<3> to dynamic shared memory */
  /* Kernel parameters (docs/abi.md), bound from the kernel kind's ABI
   * table (walk.c); null where the kind's ABI has none. */
  MlirValue p_q, p_k, p_v, p_o, p_lse, p_ws;
  MlirValue batch, seqlen_q, seqlen_k; /* i64; varlen: this block's sequence's */
  /* varlen kernels (mem_varlen.c): the launch's longest sequences, which
   * size the padded workspaces, and the packed LSE's row count; null
   * otherwise */
  MlirValue max_seqlen_q, max_seqlen_k, total_q;
  MlirValue strides[4][3];             /* q, k, v, o: b, s, h (i64) */
  /* The kind's other parameters (cache_seqlens, block_table, q_len,
   * capacity, nsplit, bt_stride), by name (lw_param). */
  struct {
    const char *name;
    MlirValue v; /* a generic pointer, or an i64 */
    bool ptr;
  } param[MAX_KIND_PARAMS];
  int nparam;
  /* The run-time inputs' stride parameters' names, "in_NAME.sD" (the
   * names above point here). */
  char input_stride_names[32][80];
  int ninput_strides;
  /* The kernel kind (walk.h) and its own state (its file's struct). */
  const void *kind;
  void *kind_state;
  /* Value map (open addressing on Value pointers). */
  const Value **keys;
  CgVal **vals;
  int map_cap, map_n;
  /* Allocations freed at the end. */
  void **allocs;
  int nallocs, capallocs;
  /* Shared memory plan. */
  int smem_top;       /* bytes allocated to staged tiles */
  int small_next, small_left; /* the block lw_alloc_small carves barriers from */
  int scratch_off;    /* start of the cross-warp scratch area (after tiles) */
  int scratch_bytes;  /* its size (max over the xwarp_reduce ops) */
  bool scratch_aliases; /* the scratch reuses the staged tiles' bytes (lw_scratch_can_alias) */
  bool scratch_claimed; /* an xwarp_reduce has taken those bytes over */
  /* cp.async bookkeeping (cg_async.c). */
  int next_seq;
  Pending pending[MAX_PENDING_GROUPS];
  int npending;
  bool smem_read_since_barrier;
  Pending region_end[MAX_PENDING_GROUPS]; /* pending groups at the end of the last region */
  int nregion_end;
  int epoch; /* barriers emitted on the current path (conservative across ifs) */
  CarryRing rings[MAX_CARRY_RINGS];
  int nrings;
  /* Parallel loops -> grid dims. */
  int nparallel, parallel_seen;
  /* Warp roles (walk.c: lower_warp_roles; mem_ring.c). The consumers are
   * threads 0 .. threads-1 (the kernel's warps, ids as without roles),
   * the producer the producer_threads after them; 0 without roles. */
  int producer_threads;
  bool consumer_barrier; /* barriers are `bar.sync 1, threads`: consumers only */
  MlirValue put_slot;    /* while a ring_put's load is lowered: the slot (i32 bytes) */
  bool producer_single;  /* the producer region runs on one thread (TMA puts only) */
  int role_blocks;       /* warp_roles {blocks_per_sm}: 1 or 2; 0 when absent */
  bool backward;         /* mode = backward: the register split of two consumer warpgroups (lw_role_regs) */
  /* Tiles added by bulk reductions or stored by bulk copies (mem_bulk.c
   * lw_tile_rows_bulk): their staging buffer's byte offset and size; 0 bytes
   * when none. */
  int bulk_buf_off, bulk_buf_bytes;
  /* the box rows of the kernel's dq_acc map (walk_kernel.c: every TMA-able
   * store of dq_acc has them), 0 when it has none: stores add by rows then */
  int tma_reduce_rows;
};

void *lw_alloc(Lowerer *L, size_t size); /* zeroed, freed with the Lowerer */
void lw_free_all(Lowerer *L);            /* every lw_alloc, the map, L itself */
CgVal *lw_get(Lowerer *L, const Value *v);
void lw_set(Lowerer *L, const Value *v, CgVal *cv);
void lw_error(Lowerer *L, const Op *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void lw_set_loc(Lowerer *L, const Op *op);
MlirType lw_elem_type(Lowerer *L, ElemType e);
MlirType lw_val_type(Lowerer *L, Type t); /* index tiles: i32 elements */
CgVal *lw_scalar(Lowerer *L, Type t, MlirValue v);
/* A parameter of the kind's ABI with no field in Lowerer: v, a generic
 * pointer (ptr) or an i64 (an i32 size widened, or a stride). Binding a
 * name again replaces its value. */
void lw_bind_param(Lowerer *L, const char *name, MlirValue v, bool ptr);
/* Its value (a pointer parameter only when ptr); null when none. */
MlirValue lw_param(const Lowerer *L, const char *name, bool ptr);
/* Operand i of op, which must be a scalar (else an error and a null value). */
MlirValue lw_scalar_operand(Lowerer *L, const Op *op, int i);

#endif
