/* lower_internal.h - shared state of the tile IR -> MLIR lowering (lower*.c).
 *
 * Each tile IR value becomes a CgVal:
 *   - a scalar: one MLIR value (index -> i64, f32, i1);
 *   - a register tile: the elements one thread holds, in the mma.sync
 *     m16n8k16 accumulator layout (see TileGeom), fully unrolled: every
 *     element is its own SSA value;
 *   - a shared-memory tile: a loaded Q/K/V tile staged for ldmatrix.
 *
 * Accumulator layout, per warp, for an m16 x n8 fragment: lane l holds rows
 * g = l/4 and g+8, columns 2*(l%4) and 2*(l%4)+1; element e (0..3) is row
 * g + 8*(e/2), column 2*(l%4) + e%2. A warp's share of a tile is a grid of
 * fragments (nm x nn); where the share starts depends on the warp (dist).
 */
#ifndef FLASHC_LOWER_INTERNAL_H
#define FLASHC_LOWER_INTERNAL_H

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
} TileGeom;

typedef enum CgValKind { CV_SCALAR, CV_TILE, CV_SMEM } CgValKind;

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
} CgVal;

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

typedef struct Lowerer {
  CgBuilder b;
  CgContext *cc;
  const Func *f;
  int warps, threads;
  ElemType dtype;
  bool wgmma; /* matmuls on warpgroup MMA, staged tiles swizzled */
  bool failed;
  /* Per-thread ids (i32) made at kernel entry. */
  MlirValue tid, warp, lane, lg, lq; /* lg = lane / 4, lq = lane % 4 */
  MlirValue smem;                    /* !llvm.ptr<3> to dynamic shared memory */
  /* Kernel parameters (docs/abi.md). */
  MlirValue p_q, p_k, p_v, p_o, p_lse, p_ws;
  MlirValue batch, seqlen_q, seqlen_k; /* i64 */
  MlirValue strides[4][3];             /* q, k, v, o: b, s, h (i64) */
  /* Value map (open addressing on Value pointers). */
  const Value **keys;
  CgVal **vals;
  int map_cap, map_n;
  /* Allocations freed at the end. */
  void **allocs;
  int nallocs, capallocs;
  /* Shared memory plan. */
  int smem_top;       /* bytes allocated to staged tiles */
  int scratch_off;    /* start of the cross-warp scratch area (after tiles) */
  int scratch_bytes;  /* its size (max over the xwarp_reduce ops) */
  bool scratch_aliases; /* the scratch reuses the staged tiles' bytes (lw_scratch_can_alias) */
  bool scratch_claimed; /* an xwarp_reduce has taken those bytes over */
  /* cp.async bookkeeping. */
  int next_seq;
  Pending pending[32];
  int npending;
  bool smem_read_since_barrier;
  Pending region_end[32]; /* pending groups at the end of the last region */
  int nregion_end;
  int epoch; /* barriers emitted on the current path (conservative across ifs) */
  CarryRing rings[16];
  int nrings;
  /* Parallel loops -> grid dims. */
  int nparallel, parallel_seen;
  /* Decode kernels (lower_decode.c, docs/decode.md): the split kernel's
   * extra parameters, or the combine kernel's (o, lse, workspace only). */
  bool decode, combine;
  bool fused; /* split kernel that merges its partials (cg_decode_fused) */
  MlirValue p_seqlens, p_bt;                   /* generic pointers */
  MlirValue q_len, capacity, nsplit, bt_stride; /* i64 */
} Lowerer;

/* Where a tensor argument's rows live: base pointer, element strides,
 * row extent (lower_mem.c: lw_tensor_ref). */
typedef struct TensorRef {
  MlirValue base; /* !llvm.ptr<1> */
  ElemType elem;
  MlirType et;
  MlirValue sb, ss, sh; /* element strides (i64) of batch, row, head */
  MlirValue extent;     /* rows (i64) */
  int cols;
} TensorRef;

/* lower.c */
void *lw_alloc(Lowerer *L, size_t size); /* zeroed, freed with the Lowerer */
CgVal *lw_get(Lowerer *L, const Value *v);
void lw_set(Lowerer *L, const Value *v, CgVal *cv);
void lw_error(Lowerer *L, const Op *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void lw_set_loc(Lowerer *L, const Op *op);
MlirType lw_elem_type(Lowerer *L, ElemType e);
MlirType lw_val_type(Lowerer *L, Type t); /* index tiles: i32 elements */
CgVal *lw_scalar(Lowerer *L, Type t, MlirValue v);
/* Flattens a value into MLIR values (for iter_args, yields) and back. */
int lw_flat_count(Lowerer *L, const CgVal *cv);
void lw_flatten(Lowerer *L, const CgVal *cv, MlirValue *out);
CgVal *lw_unflatten(Lowerer *L, Type t, const MlirValue *in);

int lw_count_parallel(const Func *f);

/* lower_tiles.c */
int lw_scratch_bytes(Lowerer *L); /* shared memory the xwarp_reduce ops need */
/* True when every xwarp_reduce comes after the last use of staged tiles: in
 * no sequential loop and with no staged load after it (warp-split-kv's merge
 * after the K/V loop). The scratch may then share the tiles' bytes. */
bool lw_scratch_can_alias(Lowerer *L);
bool lw_geom(Lowerer *L, Type t, TileGeom *g, const Op *op);
CgVal *lw_tile(Lowerer *L, Type t, const TileGeom *g); /* elements uninitialized */
CgVal *lw_splat(Lowerer *L, Type t, MlirValue v);
/* Row / column index (i32, within the tile) of element (mi, ni, e). */
MlirValue lw_elem_row(Lowerer *L, const TileGeom *g, int mi, int e);
MlirValue lw_elem_col(Lowerer *L, const TileGeom *g, int ni, int e);
void lw_elementwise(Lowerer *L, const Op *op);
void lw_iota(Lowerer *L, const Op *op);
void lw_full(Lowerer *L, const Op *op);
void lw_reduce_rows(Lowerer *L, const Op *op);
void lw_xwarp_reduce(Lowerer *L, const Op *op);
void lw_matmul(Lowerer *L, const Op *op);
/* The element of operand cv at result position (mi, ni, e) of class rc. */
MlirValue lw_elem(Lowerer *L, const CgVal *cv, TileClass rc, int mi, int ni, int e);
/* Number of result positions and their (mi, ni, e) for a geometry. */
int lw_positions(const TileGeom *g, int *mi, int *ni, int *e);
int lw_index_of(const TileGeom *g, int mi, int ni, int e);

/* The m16n8k16 A fragment (4 packed registers) of m16 tile mi at k step kk
 * of a register tile a (P of P V): two n8 accumulator tiles make one. */
void lw_a_fragment_regs(Lowerer *L, CgMmaType mt, const CgVal *a, int mi, int kk, MlirValue *out);

/* lower_wgmma.c */
/* Decides L->wgmma for the kernel (after lw_decode_init). False only after
 * an error (wgmma forced on a kernel that cannot use it). */
bool lw_wgmma_plan(Lowerer *L, CgTensorCore tc, const char *target);
/* Byte offset (i32) of 16-byte chunk `chunk` of row `row` in a swizzled
 * tile, from the tile's start. */
MlirValue lw_swizzled_byte(Lowerer *L, const CgVal *t, MlirValue row, MlirValue chunk);
/* r (initialized with the accumulator) += a * b on warpgroup MMA. */
void lw_wgmma_matmul(Lowerer *L, const Op *op, CgVal *r, const CgVal *a, const CgVal *bm,
                     bool trans_b, CgMmaType mt, bool has_acc);

/* lower_mem.c */
int lw_workspace_floats_per_row(const Func *f);
void lw_load(Lowerer *L, const Op *op);
void lw_store(Lowerer *L, const Op *op);
/* Makes sure a staged tile's cp.async group has landed and is visible. */
void lw_smem_ready(Lowerer *L, CgVal *t);
/* Waits for both (either may be NULL) with one wait and one barrier. */
void lw_smem_ready2(Lowerer *L, CgVal *a, CgVal *b);
/* Waits for group seq (and older ones) when it is pending. */
void lw_wait_for_seq(Lowerer *L, int seq);
/* Byte offset (i32) x + the tile's buffer start. */
MlirValue lw_smem_base(Lowerer *L, const CgVal *t, MlirValue x);
/* True for tile types codegen keeps in shared memory (loads for the MMA). */
bool lw_is_staged_type(Type t);
/* Chooses a staged tile's shared-memory layout (swizzled, smem_stride). */
void lw_staged_layout(Lowerer *L, CgVal *s, Type t);
void lw_barrier(Lowerer *L);
/* Waits for every group issued after `mark` (region exit). */
void lw_flush_async(Lowerer *L, int mark);
int lw_alloc_smem(Lowerer *L, int bytes);
/* Waits for every cp.async of this thread (carried prefetches too). */
void lw_wait_all_async(Lowerer *L);
/* The 16-byte cp.async copies that fill a staged tile: thread tid takes
 * copies tid, tid + T, ... (row r, 16-byte column chunk cc); a thread keeps
 * its column when `regular` (T a multiple of the chunks per row), its rows
 * then step by `step`. */
typedef struct StagePlan {
  int cpr, total, iters, step;
  bool regular;
  MlirValue r_reg, cc_reg; /* this thread's first row and its column chunk (i32) */
} StagePlan;
/* Where each copy reads from: `step` (may be NULL) runs for copy `it`
 * before its bound guard; `chunk`, inside it, gives the source pointer and
 * whether the row is there (a missing row's copy reads nothing and writes
 * zeros). */
typedef struct StageSource {
  void (*step)(Lowerer *L, void *ctx, int it);
  void (*chunk)(Lowerer *L, void *ctx, int it, MlirValue r, MlirValue cc, MlirValue *src,
                MlirValue *inb);
  void *ctx;
} StageSource;
StagePlan lw_stage_plan(Lowerer *L, const CgVal *s);
/* The source of a plan whose threads keep their column (StagePlan.regular),
 * rows of one (batch, head) at element offset bh + row * ss from base:
 * thread rows R0 = row0 + r_reg, R0 + step, ... read through one pointer
 * advanced by step rows per copy, and a copy's bound check compares its row
 * offset (a constant) with the rows left before `limit`. Per copy a pointer
 * add, a compare and a select instead of a 64-bit multiply-add and three
 * selects, so the copies of a step go out sooner (SASS: ptxas had hoisted
 * every address computation before the first copy; H100 B=1 GQA 8k decode
 * 20.4 -> 18.9 us). A missing row's copy names `row_zero` (any readable
 * address: it reads nothing). */
typedef struct RowStream {
  const StagePlan *p;
  MlirType et;
  MlirValue ptr, row_zero; /* this copy's source; what a missing row's copy names */
  MlirValue delta, left;   /* i64: elements per step rows; rows left from R0 */
  /* A paged cache (lower_decode.c): copy it reads page it / per_page of
   * the tile, whose first copy starts at page_ptr[it / per_page]. */
  int per_page;            /* 0: one contiguous stream */
  MlirValue page_ptr[16];
} RowStream;
StageSource lw_row_stream(Lowerer *L, RowStream *rs, const StagePlan *p, const TensorRef *t,
                          MlirValue bh, MlirValue row0, MlirValue limit, MlirValue row_zero);
/* Finishes a RowStream whose p, et and ptr (or page_ptr) are set (a paged
 * one is set up by hand): rows left from R0 before limit, the step's pointer
 * delta, row_zero; returns its StageSource. */
StageSource lw_stream_source(Lowerer *L, RowStream *rs, const TensorRef *t, MlirValue R0,
                             MlirValue limit, MlirValue row_zero);
/* Issues the copies into s (padded or swizzled) and commits them as one group. */
void lw_stage_copies(Lowerer *L, CgVal *s, const StagePlan *p, const StageSource *src);
/* A load staged for the tensor cores, in two halves around the copy: the
 * buffer (for a pipelined loop's load of a tile ahead, the ring's free
 * buffer), then the cp.async group's bookkeeping once the copies are issued
 * and committed. */
CgVal *lw_stage_begin(Lowerer *L, const Op *op);
void lw_stage_end(Lowerer *L, const Op *op, CgVal *s);
/* The ring of the current pipelined loops whose next tile `op` loads, or NULL. */
CarryRing *lw_ring_of_load(Lowerer *L, const Op *op);

/* lower.c: the pointers q, k, v, o, lse, workspace (parameters 0..5 of both
 * ABIs) and the q, k, v, o strides starting at parameter strides_at. */
void lw_bind_io_params(Lowerer *L, const MlirValue *a, int strides_at);
/* lower.c: regions and sequential loops, for lower_decode.c's loops. */
void lw_lower_region(Lowerer *L, const Block *blk, MlirBlock into);
void lw_lower_seq_for(Lowerer *L, const Op *op);

/* lower_decode.c (docs/decode.md): decode split and combine kernels. */
bool lw_decode_init(Lowerer *L); /* true for a decode kernel; sets L->decode/combine */
/* lower_mem.c: a tensor argument of op (q, k, v, o, lse, or a workspace part:
 * o_acc, m_buf, l_buf, o_part, lse_part) as a TensorRef; false after an error. */
bool lw_tensor_ref(Lowerer *L, const Op *op, const Value *tv, TensorRef *r);
/* lower_mem.c: a register tile's rows loaded or stored, for forward and
 * decode tensors alike: row_at gives the element offset of the thread's row
 * r of the tile (an i32 from lw_elem_row) and whether the row exists. */
typedef void (*LwRowAt)(Lowerer *L, void *ctx, MlirValue r, MlirValue *off, MlirValue *ok);
void lw_store_rows(Lowerer *L, const Op *op, const TensorRef *t, LwRowAt row_at, void *ctx);
void lw_load_rows(Lowerer *L, const Op *op, const TensorRef *t, LwRowAt row_at, void *ctx);
int lw_decode_param_types(Lowerer *L, MlirType *params); /* returns the count */
void lw_decode_params(Lowerer *L, MlirBlock entry);
MlirValue lw_decode_index_arg(Lowerer *L, const char *name); /* null when none */
void lw_decode_parallel_for(Lowerer *L, const Op *op);
void lw_decode_load(Lowerer *L, const Op *op);   /* load and load_paged */
void lw_decode_store(Lowerer *L, const Op *op);
void lw_decode_load_scalar(Lowerer *L, const Op *op);
void lw_decode_reduce(Lowerer *L, const Op *op);

#endif
