/* mem.h - layer 1: memory movement (docs/codegen.md).
 *
 *   mem_rows.c      tensors (ABI parameters, workspace parts) and the row
 *                   map: where row R of a tile lives (plain, packed, paged)
 *   mem_global.c    global <-> registers: loads and stores through the row
 *                   map, the load/store entry every kernel kind calls
 *   mem_bulk.c      registers -> global through shared memory and the TMA
 *                   unit: bulk copies and reductions (O, the backward's dQ)
 *   mem_lanes.c     which row vectors a load may hold across the lanes
 *   mem_stage.c     global -> shared: cp.async staging (StagePlan, RowStream)
 *   mem_ldmatrix.c  shared -> registers: ldmatrix lane addresses
 *   mem_varlen.c    packed sequences: each block's sequence bound at entry
 *   mem_ring.c      rings of slots handed from producer to consumer warps
 */
#ifndef FLASHC_MEM_H
#define FLASHC_MEM_H

#include "codegen/cg_frag.h"
#include "codegen/cg_smem.h"

/* ------------------------------------------------------------ tensors */

/* Where a tensor argument's rows live: base pointer, element strides,
 * row extent (lw_tensor_ref). */
typedef struct TensorRef {
  MlirValue base; /* !llvm.ptr<1> */
  ElemType elem;
  MlirType et;
  MlirValue sb, ss, sh; /* element strides (i64) of batch, row, head */
  MlirValue extent;     /* rows (i64) */
  int cols;
} TensorRef;

/* A tensor argument of op (q, k, v, o, lse, or a workspace part: o_acc,
 * m_buf, l_buf, o_part, lse_part) as a TensorRef; false after an error. */
bool lw_tensor_ref(Lowerer *L, const Op *op, const Value *tv, TensorRef *r);
/* Element offset (i64) of (batch, head, row) of t. */
MlirValue lw_row_offset(Lowerer *L, const TensorRef *t, MlirValue bi, MlirValue hi, MlirValue row);
/* Floats per (batch, head, query row) of the FA1 workspaces (metadata). */
int lw_workspace_floats_per_row(const Func *f);

/* ------------------------------------------------------------ varlen */

/* Is f's layout varlen (attribute `layout`, docs/abi.md)? */
bool lw_is_varlen(const Func *f);
/* After the parameters are bound (the kind's, then cu_seqlens_q,
 * cu_seqlens_k, total_q, total_k: walk_kernel.c): this block's sequence
 * (grid z) becomes seqlen_q/k, the packed tensors' pointers move to its
 * first rows. */
void lw_varlen_bind(Lowerer *L);

/* ------------------------------------------------------------ row map */

/* Where logical row R = row0 + r of a tile lives, for every kernel kind:
 *   - slice rows (forward kernels): row R of the (b, h) slice, present
 *     below the extent; addressed per row, a missing row clamped to row 0
 *     by loads (lw_rows_slice);
 *   - plain rows: the same, present below `limit` (the extent, or a
 *     sequence's cache length), missing rows at offset 0;
 *   - packed rows (pack = G): head h*G + R/n, token R%n (pack-gqa);
 *   - paged rows (page = P): slot R%P of page block_table[b, R/P], the table
 *     read only for rows that are there (lw_rows_of_load). */
typedef struct Rows {
  TensorRef t;
  MlirValue b, h, row0; /* i64 */
  MlirValue limit;      /* rows at or past it are missing (i64) */
  bool slice;           /* slice rows (see above) */
  /* load {skip_past = 1} (the software pipeline's, for a step mask-skip
   * may skip): when every row is missing (row0 past the extent: the step is
   * skipped, or past the loop's end) no copy is issued at all, and the
   * staged buffer keeps whatever it held (no step reads it) */
  bool skip_when_past;
  int pack;             /* G query heads per K/V head; 0: not packed */
  int page;             /* page size; 0: not paged */
  MlirValue bt_row;     /* paged: !llvm.ptr<1> to block_table[b, 0] */
  /* paged, a staged tile of at most page rows: it spans pages pi_lo and
   * pi_lo + 1 at most, whose entries are read once per tile instead of once
   * per 16-byte chunk. Row R of the tile then lives at base + R * ss, base
   * = base_lo below row split_row (= (pi_lo + 1) * P) and base_hi from it:
   * per chunk one compare and select more than a contiguous cache, instead
   * of a divide, a remainder and two 64-bit multiply-adds. Null otherwise. */
  MlirValue split_row, base_lo, base_hi;
  MlirValue bh;         /* plain: b * sb + h * sh */
  int row0_mult;        /* row0 is a multiple of it (mem_rows.c: row0_multiple); 0 */
} Rows;

/* Slice rows of a forward load/store: tensor operand 0, then batch, head
 * and first row; false after an error. */
bool lw_rows_slice(Lowerer *L, const Op *op, Rows *m);
/* The row map of a load or load_paged of a decode program: the tensor,
 * then (load_paged: the block table,) b, h, row0, and a limit (optional for
 * load); bt and bt_stride: the kernel's block table (a generic pointer) and
 * its row stride, null when it has none. False after an error. */
bool lw_rows_of_load(Lowerer *L, const Op *op, MlirValue bt, MlirValue bt_stride, Rows *m);
/* The row map of a store of a decode program: the tensor, b, h, row0. */
bool lw_rows_of_store(Lowerer *L, const Op *op, Rows *m);
/* Element offset (i64) and presence (i1) of the tile's row r (i32), for a
 * load or a store (slice rows: a store's missing row is not clamped). */
void lw_row_at(Lowerer *L, const Rows *m, MlirValue r, bool store, MlirValue *off,
               MlirValue *ok);
/* block_table[b, pi] as i64 when `ok`, else 0. */
MlirValue lw_page_entry(Lowerer *L, const Rows *m, MlirValue pi, MlirValue ok);
/* A paged tile of R <= page rows: both of its page entries up front. */
void lw_hoist_pages(Lowerer *L, Rows *m, int R);

/* ------------------------------------------------ global <-> registers */

/* row_at gives the element offset of the thread's row r of the tile (an
 * i32 from lw_elem_row) and whether the row exists. */
typedef void (*LwRowAt)(Lowerer *L, void *ctx, MlirValue r, MlirValue *off, MlirValue *ok);
void lw_store_rows(Lowerer *L, const Op *op, const TensorRef *t, LwRowAt row_at, void *ctx);
/* row_at for the thread's row r, moved to the tile's first column col0
 * (a store {col0}: the tile is a window of the tensor's columns). */
void lw_window_row_at(Lowerer *L, LwRowAt row_at, void *ctx, MlirValue r, int col0,
                      MlirValue *off, MlirValue *ok);

/* -------------------------- registers -> global through shared memory */

/* mem_bulk.c. Can the f32 tile of geometry g be added into t by bulk
 * reductions, a row a lane (lw_tile_rows_bulk)? */
bool lw_bulk_addable(const Lowerer *L, const TensorRef *t, const TileGeom *g);
/* Can a 16-bit tile of a store (a warp-specialized forward's O) go out by
 * bulk copies, a row a lane? */
bool lw_bulk_storable(const Lowerer *L, const TensorRef *t, const TileGeom *g, int col0);
/* The tile x added (add: f32) or stored (16-bit) into t that way. */
void lw_tile_rows_bulk(Lowerer *L, const TensorRef *t, const CgVal *x, int col0,
                       LwRowAt row_at, void *ctx, bool add);
/* The rows of a warp's box when store op adds into dq_acc through the TMA
 * unit (its kernel then takes the tensor map tmap_dq_acc), else 0. */
int lw_tma_reduce_rows(const Lowerer *L, const Op *op);
/* The f32 tile x of store op added into dq_acc that way, a box a warp. */
void lw_add_tile_tma(Lowerer *L, const Op *op, const Rows *m, const CgVal *x, int col0);
void lw_load_rows(Lowerer *L, const Op *op, const TensorRef *t, LwRowAt row_at, void *ctx);
/* Is v, a load's result, held across the lanes (mem_lanes.c)? A 1 x C f32
 * row vector of a rank 3 tensor whose every use is elementwise (or, where
 * the kernel carries them, L->lane_carry, a loop carry whose both ends are
 * such loads), where the kernel allows it (L->lane_vectors). */
bool lw_lane_held_load(const Lowerer *L, const Value *v);
/* The load and store of every kernel kind, once its row map is made: a
 * register tile row by row, or a tile staged for the tensor cores. */
void lw_load(Lowerer *L, const Op *op, Rows *m);
void lw_store(Lowerer *L, const Op *op, Rows *m);
/* load_scalar of element operand 1 of a rank 1 i32 tensor at ptr (a generic
 * pointer; null: the kind has no such tensor, an error). */
void lw_load_scalar(Lowerer *L, const Op *op, MlirValue ptr);
/* gather of a run-time input (%in_NAME: its pointer and stride parameters). */
void lw_gather(Lowerer *L, const Op *op);
/* scatter %blk_NAME, indices, value: one i32 element of a block list */
void lw_scatter(Lowerer *L, const Op *op);

/* ----------------------------------------------- global -> shared */

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
/* Issues the copies into s (padded or swizzled) and commits them as one group. */
void lw_stage_copies(Lowerer *L, CgVal *s, const StagePlan *p, const StageSource *src);
/* Copies the rows of m into the staged tile s (one cp.async group). */
void lw_stage_rows(Lowerer *L, Rows *m, CgVal *s);

/* ----------------------------------------------- shared -> registers */

/* Where one lane's ldmatrix row lives in a staged tile, and how the
 * per-instruction offsets (whole 8-row groups, pairs of 16-byte chunks)
 * move it (mem_ldmatrix.c). */
typedef struct LaneAddr {
  MlirValue byte; /* padded: the lane's byte; swizzled: base + r * 128 */
  MlirValue lx;   /* swizzled: (c ^ r8) * 16 */
} LaneAddr;
/* A register tile (bf16/f16, rows distribution) written to a shared-memory
 * buffer of its own (padded rows, so that warps may address any 8-column
 * block; the swizzled layout in wgmma kernels, whose tensor cores read it
 * through the async proxy), with the barriers that make it safe: before the write when
 * shared memory was read since the last barrier, after it for the readers.
 * Returns the staged value (CV_SMEM), or NULL after an error at op. */
CgVal *lw_regs_to_smem(Lowerer *L, const Op *op, const CgVal *x);
/* `cast` of a staged tile (shared memory) to a register tile of the
 * accumulator layout (stage-inputs' bias tile). */
void lw_read_staged(Lowerer *L, const Op *op);

/* The lane address of row `row`, column `col` (elements, a lane-uniform
 * offset included when padded; 0 or 8 when swizzled) of staged tile t. */
LaneAddr lw_lane_addr(Lowerer *L, const CgVal *t, MlirValue row, MlirValue col);
/* The ldmatrix address of a lane moved by `drow` rows (a multiple of 8) and
 * `dcol` columns (a multiple of 16, or of 8 when the layout is padded). */
MlirValue lw_lane_at(Lowerer *L, const CgVal *t, const LaneAddr *a, int drow, int dcol);

/* ------------------------------------------------------------ rings */

/* `ring`: the slots and their mbarriers, initialized (one thread, then a
 * barrier of the whole block). */
void lw_ring(Lowerer *L, const Op *op);
/* `ring_put`: begin waits for the slot to be free and points the next
 * staged load at it (Lowerer.put_slot); the caller lowers the put's load;
 * end arrives on the slot's full barrier once the copies land. */
void lw_ring_put_begin(Lowerer *L, const Op *op);
void lw_ring_put_end(Lowerer *L, const Op *op);
/* `ring_put` of a ring {tma = 1}: the whole put (its load is not lowered):
 * the slot's wait, then TMA copies from the ring's tensor map, from
 * thread 0 of the producer (all of it when Lowerer.producer_single). */
void lw_ring_put_tma(Lowerer *L, const Op *op);
/* The load a ring's put stores (NULL when it has none). */
const Op *lw_ring_put_load(const Op *ring);
/* The name of the tensor-map parameter of tensor argument `tensor` ("q":
 * "tmap_q", ..., a run-time input "in_NAME": "tmap_in_NAME") written into
 * buf; NULL for any other tensor. */
const char *lw_tmap_param(const char *tensor, char *buf, size_t len);
/* `ring_get`: waits for the step's tile; the slot as a staged tile. */
void lw_ring_get(Lowerer *L, const Op *op);
/* `ring_release`: this thread's arrival on the slot's empty barrier. */
void lw_ring_release(Lowerer *L, const Op *op);
/* ring_release op's arrival (its last_step condition aside) where cond
 * holds. */
void lw_ring_release_if(Lowerer *L, const Op *op, MlirValue cond);

#endif
