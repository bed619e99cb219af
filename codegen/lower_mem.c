/* lower_mem.c - global memory (load, store) and shared-memory staging.
 *
 * Tensors are the kernel's ABI parameters (docs/abi.md), found by the IR
 * argument's name. A `load` whose tile has no distribution feeds the tensor
 * cores: it is staged in shared memory by cp.async, 16 bytes a thread, in
 * the 128-byte swizzled layout (lw_staged_layout; rows of other widths are
 * padded by 16 bytes, so ldmatrix's eight row addresses fall in distinct bank
 * groups either way), rows past the sequence end zero-filled by the copy
 * itself. Other loads go straight to registers. Stores write from
 * the accumulator layout, rows past the end skipped.
 *
 * The FA1 schedule's workspaces live in the `workspace` parameter, per
 * (batch, head, query row): o_acc [B, Sq, H, Dv] f32, then m_buf and l_buf
 * [B, H, Sq] f32 each - workspace_floats_per_row = Dv + 2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/lower_internal.h"
#include "mlir-c/BuiltinTypes.h"

int lw_workspace_floats_per_row(const Func *f) {
  int n = 0;
  for (int i = 0; i < f->nargs; i++) {
    const Value *a = f->args[i];
    if (!a->name || a->type.kind != TYPE_TENSOR)
      continue;
    if (strcmp(a->name, "o_acc") == 0)
      n += a->type.dims[3];
    else if (strcmp(a->name, "m_buf") == 0 || strcmp(a->name, "l_buf") == 0)
      n += 1;
  }
  return n;
}

/* A tensor extent as an i64 value (decode kernels: seqlen_q is q_len and
 * seqlen_k the cache capacity, set by lw_decode_init). */
static MlirValue dim_value(Lowerer *L, int d) {
  switch (d) {
  case DIM_BATCH: return L->batch;
  case DIM_SEQLEN_Q:
  case DIM_Q_LEN: return L->seqlen_q;
  case DIM_SEQLEN_K:
  case DIM_CAPACITY: return L->seqlen_k;
  case DIM_BATCH_NSPLIT: return cg_muli(&L->b, L->batch, L->nsplit);
  default: /* num_pages, max_pages: never a row extent of a tile */
    return cg_const_i64(&L->b, d > 0 ? d : (int64_t)1 << 40);
  }
}

static const Value *find_arg(const Func *f, const char *name) {
  for (int i = 0; i < f->nargs; i++)
    if (f->args[i]->name && strcmp(f->args[i]->name, name) == 0)
      return f->args[i];
  return NULL;
}

/* Number of floats of a workspace tensor (for the offsets of the next). */
static MlirValue tensor_floats(Lowerer *L, const Value *a) {
  MlirValue n = cg_const_i64(&L->b, a ? 1 : 0);
  for (int i = 0; a && i < a->type.rank; i++)
    n = cg_muli(&L->b, n, dim_value(L, a->type.dims[i]));
  return n;
}

/* Contiguous strides of [B, S, H, D] (rank 4) or [B, H, S] (rank 3). */
static void contiguous_strides(Lowerer *L, const Type *t, TensorRef *r) {
  CgBuilder *b = &L->b;
  if (t->rank == 4) {
    MlirValue d = cg_const_i64(b, t->dims[3]);
    r->sh = d;
    r->ss = cg_muli(b, dim_value(L, t->dims[2]), d);
    r->sb = cg_muli(b, dim_value(L, t->dims[1]), r->ss);
  } else {
    r->ss = cg_const_i64(b, 1);
    r->sh = dim_value(L, t->dims[2]);
    r->sb = cg_muli(b, dim_value(L, t->dims[1]), r->sh);
  }
}

bool lw_tensor_ref(Lowerer *L, const Op *op, const Value *tv, TensorRef *r) {
  CgBuilder *b = &L->b;
  const char *n = tv->name ? tv->name : "";
  const Type *t = &tv->type;
  memset(r, 0, sizeof *r);
  if (t->kind != TYPE_TENSOR || (t->rank != 3 && t->rank != 4)) {
    lw_error(L, op, "the first operand must be a rank 3 or 4 tensor argument");
    return false;
  }
  r->elem = t->elem;
  r->et = lw_elem_type(L, t->elem);
  r->cols = t->rank == 4 ? t->dims[3] : 1;
  r->extent = dim_value(L, t->rank == 4 ? t->dims[1] : t->dims[2]);
  static const char *const abi4[4] = {"q", "k", "v", "o"};
  MlirValue ptrs[4] = {L->p_q, L->p_k, L->p_v, L->p_o}; /* the combine kernel has o only */
  MlirValue ptr = (MlirValue){NULL};
  for (int i = 0; i < 4; i++)
    if (strcmp(n, abi4[i]) == 0 && !mlirValueIsNull(ptrs[i])) {
      ptr = ptrs[i];
      r->sb = L->strides[i][0];
      r->ss = L->strides[i][1];
      r->sh = L->strides[i][2];
    }
  if (strcmp(n, "lse") == 0) {
    ptr = L->p_lse;
    contiguous_strides(L, t, r);
  }
  /* Workspace parts: the FA1 schedule's o_acc, m_buf, l_buf, or split-kv's
   * o_part, lse_part, one after the other from the workspace pointer. */
  MlirValue ws_off = (MlirValue){NULL};
  if (strcmp(n, "o_acc") == 0 || strcmp(n, "o_part") == 0)
    ws_off = cg_const_i64(b, 0);
  else if (strcmp(n, "lse_part") == 0)
    ws_off = tensor_floats(L, find_arg(L->f, "o_part"));
  else if (strcmp(n, "m_buf") == 0)
    ws_off = tensor_floats(L, find_arg(L->f, "o_acc"));
  else if (strcmp(n, "l_buf") == 0)
    ws_off = cg_addi(b, tensor_floats(L, find_arg(L->f, "o_acc")),
                     tensor_floats(L, find_arg(L->f, "m_buf")));
  if (!mlirValueIsNull(ws_off)) {
    contiguous_strides(L, t, r);
    MlirValue g = cg_addrspacecast(b, L->p_ws, b->gptr);
    r->base = cg_gep(b, g, ws_off, b->f32);
    return true;
  }
  if (mlirValueIsNull(ptr)) {
    lw_error(L, op, "tensor %%%s has no place in the kernel ABI", n);
    return false;
  }
  r->base = cg_addrspacecast(b, ptr, b->gptr);
  return true;
}

/* Element offset (i64) of (batch, head, row). */
static MlirValue row_offset(Lowerer *L, const TensorRef *t, MlirValue bi, MlirValue hi,
                            MlirValue row) {
  CgBuilder *b = &L->b;
  MlirValue o = cg_addi(b, cg_muli(b, bi, t->sb), cg_muli(b, hi, t->sh));
  return cg_addi(b, o, cg_muli(b, row, t->ss));
}

/* ------------------------------------------------------ async state */

void lw_barrier(Lowerer *L) {
  cg_barrier(&L->b);
  L->smem_read_since_barrier = false;
  L->epoch++;
  for (int i = 0; i < L->nrings; i++)
    L->rings[i].cur_read = false;
}

bool lw_is_staged_type(Type t) {
  return t.kind == TYPE_TILE && t.dist == DIST_NONE && (t.elem == ELEM_BF16 || t.elem == ELEM_F16);
}

/* wgmma reads only the swizzled layout. For ldmatrix it is the choice too
 * whenever rows are whole 128-byte blocks: no bank conflicts, and every row
 * starts 128-byte aligned. With the padded layout every other row starts 16
 * bytes off a 32-byte boundary, and there cp.async fetched the row's global
 * sectors twice from L2 (H100, docs/perf.md 2026-11-22: 1.5x the L2 reads in
 * the decode kernels). */
void lw_staged_layout(Lowerer *L, CgVal *s, Type t) {
  s->swizzled = L->wgmma || t.cols % 64 == 0;
  s->smem_stride = s->swizzled ? t.cols : t.cols + SMEM_PAD_ELEMS;
}

MlirValue lw_smem_base(Lowerer *L, const CgVal *t, MlirValue x) {
  if (!mlirValueIsNull(t->smem_dyn))
    return cg_addi(&L->b, x, t->smem_dyn);
  return cg_addi_c(&L->b, x, t->smem_off);
}

int lw_alloc_smem(Lowerer *L, int bytes) {
  /* wgmma's swizzle is a function of the address: 1024-byte buffers. */
  int align = L->wgmma ? 1024 : 128;
  int top = L->smem_top;
  if (L->scratch_claimed && top < L->scratch_bytes)
    top = L->scratch_bytes; /* not inside the scratch once it is in use */
  int off = (top + align - 1) / align * align;
  L->smem_top = off + bytes;
  return off;
}

void lw_wait_all_async(Lowerer *L) {
  if (L->npending == 0)
    return;
  cg_cp_async_wait(&L->b, 0);
  L->npending = 0;
}

/* The newest pending group among t's (or -1 when t is ready). */
static int pending_seq(Lowerer *L, const CgVal *t) {
  if (!t || t->kind != CV_SMEM || t->async_seq < 0)
    return -1;
  for (int i = 0; i < L->npending; i++)
    if (L->pending[i].seq == t->async_seq)
      return t->async_seq;
  return -1; /* already waited for on this path */
}

/* cp.async.wait_group (groups newer than seq) + barrier; forgets seq and
 * everything older. */
static void wait_through(Lowerer *L, int seq) {
  int newer = 0;
  for (int i = 0; i < L->npending; i++)
    newer += L->pending[i].seq > seq;
  cg_cp_async_wait(&L->b, newer);
  if (L->wgmma) /* the tensor cores read through the async proxy */
    cg_fence_proxy_async(&L->b);
  lw_barrier(L);
  int k = 0;
  for (int i = 0; i < L->npending; i++)
    if (L->pending[i].seq > seq)
      L->pending[k++] = L->pending[i];
  L->npending = k;
}

void lw_wait_for_seq(Lowerer *L, int seq) {
  for (int i = 0; i < L->npending; i++)
    if (L->pending[i].seq == seq) {
      wait_through(L, seq);
      return;
    }
}

void lw_smem_ready2(Lowerer *L, CgVal *a, CgVal *b) {
  int sa = pending_seq(L, a), sb = pending_seq(L, b);
  int s = sa > sb ? sa : sb;
  if (s >= 0)
    wait_through(L, s);
}

void lw_smem_ready(Lowerer *L, CgVal *t) { lw_smem_ready2(L, t, NULL); }

/* Waits for the groups issued since `mark`, except the next step's tiles of
 * a pipelined loop (they stay in flight across the back edge). */
void lw_flush_async(Lowerer *L, int mark) {
  int newest = -1;
  for (int i = 0; i < L->npending; i++)
    if (L->pending[i].seq >= mark && !L->pending[i].carried && L->pending[i].seq > newest)
      newest = L->pending[i].seq;
  if (newest < 0)
    return;
  wait_through(L, newest);
}

/* ------------------------------------------------------------ loads */

StagePlan lw_stage_plan(Lowerer *L, const CgVal *s) {
  CgBuilder *b = &L->b;
  StagePlan p;
  p.cpr = s->type.cols / 8;
  p.total = s->type.rows * p.cpr;
  p.iters = (p.total + L->threads - 1) / L->threads;
  p.regular = L->threads % p.cpr == 0;
  p.step = L->threads / p.cpr;
  p.cc_reg = cg_arith2(b, "arith.remui", L->tid, cg_const_i32(b, p.cpr));
  p.r_reg = cg_arith2(b, "arith.divui", L->tid, cg_const_i32(b, p.cpr));
  return p;
}

void lw_stage_copies(Lowerer *L, CgVal *s, const StagePlan *p, const StageSource *src) {
  CgBuilder *b = &L->b;
  int T = L->threads;
  /* A thread that keeps its column sees the swizzle of its rows repeat
   * every `period` copies (rows advance by step, the xor pattern repeats
   * every 8 rows): `period` shared addresses, every copy at a constant
   * offset from one of them (else LLVM keeps an address per copy live
   * across the K/V loop, which spilled the ldmatrix decode kernels). Not for
   * wgmma kernels: there the per-copy addresses measured better (H100, d256
   * non-causal 8k-16k: 4% slower with one address; docs/perf.md 2026-11-22). */
  bool fixed_swizzle = s->swizzled && !L->wgmma && p->regular && p->step > 0;
  int period = 1;
  while (fixed_swizzle && (period * p->step) % 8)
    period++;
  MlirValue byte_at[8];
  for (int k = 0; fixed_swizzle && k < period && k < p->iters; k++)
    byte_at[k] = lw_swizzled_byte(L, s, cg_addi_c(b, p->r_reg, k * p->step), p->cc_reg);
  for (int it = 0; it < p->iters; it++) {
    MlirValue chunk = cg_addi_c(b, L->tid, it * T);
    MlirValue r = p->regular ? cg_addi_c(b, p->r_reg, it * p->step)
                             : cg_arith2(b, "arith.divui", chunk, cg_const_i32(b, p->cpr));
    MlirValue cc = p->regular ? p->cc_reg
                              : cg_arith2(b, "arith.remui", chunk, cg_const_i32(b, p->cpr));
    if (src->step)
      src->step(L, src->ctx, it);
    MlirBlock outer = b->block, guarded;
    bool guard = (it + 1) * T > p->total;
    if (guard) {
      cg_if(b, cg_cmpi(b, "ult", chunk, cg_const_i32(b, p->total)), NULL, 0, false, &guarded, NULL);
      cg_builder_set_block(b, guarded);
    }
    MlirValue from, inb;
    src->chunk(L, src->ctx, it, r, cc, &from, &inb);
    MlirValue byte = fixed_swizzle
                         ? cg_addi_c(b, byte_at[it % period], (it / period) * period * p->step * 128)
                     : s->swizzled
                         ? lw_swizzled_byte(L, s, r, cc)
                         : cg_muli_c(b, cg_addi(b, cg_muli_c(b, r, s->smem_stride),
                                                cg_muli_c(b, cc, 8)), 2);
    MlirValue dst = cg_gep(b, L->smem, lw_smem_base(L, s, byte), b->i8);
    MlirValue nbytes = cg_select(b, inb, cg_const_i32(b, 16), cg_const_i32(b, 0));
    cg_cp_async16(b, dst, from, nbytes);
    if (guard) {
      cg_yield(b, NULL, 0);
      cg_builder_set_block(b, outer);
    }
  }
  cg_cp_async_commit(b);
}

static void stream_step(Lowerer *L, void *ctx, int it) {
  RowStream *rs = ctx;
  if (rs->per_page && it % rs->per_page == 0)
    rs->ptr = rs->page_ptr[it / rs->per_page];
  else if (it > 0) /* the chain stays outside any guard */
    rs->ptr = cg_gep(&L->b, rs->ptr, rs->delta, rs->et);
}

static void stream_chunk(Lowerer *L, void *ctx, int it, MlirValue r, MlirValue cc,
                         MlirValue *src, MlirValue *inb) {
  RowStream *rs = ctx;
  CgBuilder *b = &L->b;
  (void)r, (void)cc;
  *inb = cg_cmpi(b, "slt", cg_const_i64(b, (int64_t)it * rs->p->step), rs->left);
  *src = cg_select(b, *inb, rs->ptr, rs->row_zero);
}

StageSource lw_stream_source(Lowerer *L, RowStream *rs, const TensorRef *t, MlirValue R0,
                             MlirValue limit, MlirValue row_zero) {
  CgBuilder *b = &L->b;
  rs->delta = cg_muli_c(b, t->ss, rs->p->step);
  rs->left = cg_subi(b, limit, R0);
  rs->row_zero = row_zero;
  return (StageSource){stream_step, stream_chunk, rs};
}

StageSource lw_row_stream(Lowerer *L, RowStream *rs, const StagePlan *p, const TensorRef *t,
                          MlirValue bh, MlirValue row0, MlirValue limit, MlirValue row_zero) {
  CgBuilder *b = &L->b;
  memset(rs, 0, sizeof *rs);
  rs->p = p;
  rs->et = t->et;
  MlirValue R0 = cg_addi(b, row0, cg_int_cast(b, p->r_reg, b->i64));
  MlirValue col = cg_int_cast(b, cg_muli_c(b, p->cc_reg, 8), b->i64);
  rs->ptr = cg_gep(b, t->base, cg_addi(b, cg_addi(b, bh, cg_muli(b, R0, t->ss)), col), t->et);
  return lw_stream_source(L, rs, t, R0, limit, row_zero);
}

/* The rows row0.. of (batch, head) of a tensor for a plan whose threads do
 * not keep their column: each copy computes its row and bound. */
typedef struct TileSource {
  const TensorRef *t;
  MlirValue bh, row0;
} TileSource;

static void tile_chunk(Lowerer *L, void *ctx, int it, MlirValue r, MlirValue cc, MlirValue *src,
                       MlirValue *inb) {
  TileSource *ts = ctx;
  CgBuilder *b = &L->b;
  const TensorRef *t = ts->t;
  (void)it;
  MlirValue grow = cg_addi(b, ts->row0, cg_int_cast(b, r, b->i64));
  *inb = cg_cmpi(b, "slt", grow, t->extent);
  MlirValue crow = cg_select(b, *inb, grow, cg_const_i64(b, 0));
  MlirValue goff = cg_addi(b, cg_addi(b, ts->bh, cg_muli(b, crow, t->ss)),
                           cg_int_cast(b, cg_muli_c(b, cc, 8), b->i64));
  *src = cg_gep(b, t->base, goff, t->et);
}

/* Copies rows row0.. of (batch, head) into a staged tile; rows past the end
 * are zero-filled (their copy reads nothing, from the tensor's row 0). */
static void stage_tile(Lowerer *L, const TensorRef *t, MlirValue bi, MlirValue hi,
                       MlirValue row0, CgVal *s) {
  CgBuilder *b = &L->b;
  MlirValue bh = row_offset(L, t, bi, hi, cg_const_i64(b, 0));
  StagePlan p = lw_stage_plan(L, s);
  if (p.regular) {
    RowStream rs;
    StageSource src =
        lw_row_stream(L, &rs, &p, t, bh, row0, t->extent, cg_gep(b, t->base, bh, t->et));
    lw_stage_copies(L, s, &p, &src);
    return;
  }
  TileSource ts = {.t = t, .bh = bh, .row0 = row0};
  StageSource src = {NULL, tile_chunk, &ts};
  lw_stage_copies(L, s, &p, &src);
}

static void load_staged(Lowerer *L, const Op *op, const TensorRef *t, MlirValue *ix) {
  Type rt = op->results[0]->type;
  if (rt.cols % 8 || rt.cols != t->cols || (t->elem != ELEM_BF16 && t->elem != ELEM_F16)) {
    lw_error(L, op, "a tile staged for the tensor cores must be whole f16/bf16 rows, 8-aligned");
    return;
  }
  CgVal *s = lw_stage_begin(L, op);
  stage_tile(L, t, ix[0], ix[1], ix[2], s);
  lw_stage_end(L, op, s);
}

CgVal *lw_stage_begin(Lowerer *L, const Op *op) {
  Type rt = op->results[0]->type;
  CgVal *s = lw_alloc(L, sizeof *s);
  s->kind = CV_SMEM;
  s->type = rt;
  s->ring = -1;
  lw_staged_layout(L, s, rt);
  CarryRing *cp = lw_ring_of_load(L, op);
  if (cp) {
    /* The tile `depth` steps ahead of a pipelined loop: the buffer no body
     * argument holds. Its old contents (the previous step's cur) were read
     * before the barriers of that step: safe once a barrier ran in this
     * step, else the step must end with cur unread since its last barrier
     * (lower.c). */
    s->smem_off = -1;
    s->smem_dyn = cg_const_i32(&L->b, cp->buf_sum);
    for (int d = 0; d < cp->depth; d++)
      s->smem_dyn = cg_subi(&L->b, s->smem_dyn, cp->held[d]);
    if (L->epoch == cp->entry_epoch)
      cp->wrote_before_barrier = true;
  } else {
    s->smem_off = lw_alloc_smem(L, rt.rows * s->smem_stride * 2);
    /* Other warps may still read this buffer (previous iteration). */
    if (L->smem_read_since_barrier)
      lw_barrier(L);
  }
  return s;
}

CarryRing *lw_ring_of_load(Lowerer *L, const Op *op) {
  for (int i = 0; i < L->nrings; i++)
    if (L->rings[i].next_load == op)
      return &L->rings[i];
  return NULL;
}

void lw_stage_end(Lowerer *L, const Op *op, CgVal *s) {
  CarryRing *cp = lw_ring_of_load(L, op);
  s->async_seq = L->next_seq++;
  if (L->npending == 32) {
    lw_flush_async(L, 0);
  }
  L->pending[L->npending++] = (Pending){s->async_seq, cp != NULL};
  lw_set(L, op->results[0], s);
}

/* Loads the tile op reads from t straight into the accumulator layout:
 * row_at gives each element's row offset and presence (as for
 * lw_store_rows); a missing row reads 0. */
void lw_load_rows(Lowerer *L, const Op *op, const TensorRef *t, LwRowAt row_at, void *ctx) {
  CgBuilder *b = &L->b;
  Type rt = op->results[0]->type;
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return;
  CgVal *r = lw_tile(L, rt, &g);
  int *mi = malloc(3 * sizeof(int) * (size_t)(r->ne > 0 ? r->ne : 1));
  if (!mi) {
    lw_error(L, op, "out of memory");
    return;
  }
  int *ni = mi + r->ne, *e = ni + r->ne;
  lw_positions(&g, mi, ni, e);
  MlirValue zero = cg_const_float(b, t->et, 0.0);
  for (int k = 0; k < r->ne; k++) {
    MlirValue off, ok;
    row_at(L, ctx, lw_elem_row(L, &g, mi[k], e[k]), &off, &ok);
    if (g.cls == TC_FULL || g.cls == TC_COLV)
      off = cg_addi(b, off, cg_int_cast(b, lw_elem_col(L, &g, ni[k], e[k]), b->i64));
    MlirValue v = cg_load(b, cg_gep(b, t->base, off, t->et), t->et, t->elem == ELEM_F32 ? 4 : 2);
    r->e[k] = cg_float_cast(b, cg_select(b, ok, v, zero), lw_elem_type(L, rt.elem));
  }
  free(mi);
  lw_set(L, op->results[0], r);
}

/* Row r of a forward tile: ix[2] + r of the (batch ix[0], head ix[1])
 * slice; a row past the end names row 0 (read, then replaced by 0). */
typedef struct SliceRows {
  const TensorRef *t;
  const MlirValue *ix;
} SliceRows;

/* The slice's row of tile row r (i64) and whether it exists. */
static MlirValue slice_row(Lowerer *L, const SliceRows *at, MlirValue r, MlirValue *ok) {
  CgBuilder *b = &L->b;
  MlirValue row = cg_addi(b, at->ix[2], cg_int_cast(b, r, b->i64));
  *ok = cg_cmpi(b, "slt", row, at->t->extent);
  return row;
}

static void slice_row_load(Lowerer *L, void *ctx, MlirValue r, MlirValue *off, MlirValue *ok) {
  CgBuilder *b = &L->b;
  const SliceRows *at = ctx;
  MlirValue row = slice_row(L, at, r, ok);
  MlirValue crow = cg_select(b, *ok, row, cg_const_i64(b, 0));
  *off = row_offset(L, at->t, at->ix[0], at->ix[1], crow);
}

static bool index_operands(Lowerer *L, const Op *op, MlirValue *ix) {
  for (int i = 0; i < 3; i++) {
    CgVal *v = lw_get(L, op->operands[1 + i]);
    if (v->kind != CV_SCALAR) {
      lw_error(L, op, "batch, head and row must be scalars");
      return false;
    }
    ix[i] = v->v;
  }
  return true;
}

void lw_load(Lowerer *L, const Op *op) {
  if (L->decode) { /* pack, limits, workspace parts: lower_decode.c */
    lw_decode_load(L, op);
    return;
  }
  TensorRef t;
  MlirValue ix[3];
  if (op->noperands != 4 || !lw_tensor_ref(L, op, op->operands[0], &t) || !index_operands(L, op, ix))
    return;
  Type rt = op->results[0]->type;
  if (rt.kind != TYPE_TILE) {
    lw_error(L, op, "the result must be a tile");
    return;
  }
  if (rt.dist == DIST_NONE && (rt.elem == ELEM_BF16 || rt.elem == ELEM_F16))
    load_staged(L, op, &t, ix);
  else
    lw_load_rows(L, op, &t, slice_row_load, &(SliceRows){&t, ix});
}

/* ----------------------------------------------------------- stores */

/* One row (mi, h) of a thread's share: the n8 fragments' two adjacent
 * elements are stored together. */
static void store_row(Lowerer *L, const TensorRef *t, const CgVal *x, MlirValue off, int mi, int h) {
  CgBuilder *b = &L->b;
  const TileGeom *g = &x->g;
  if (g->cls == TC_ROWV || g->cls == TC_ONE) {
    MlirValue v = cg_float_cast(b, lw_elem(L, x, g->cls, mi, 0, 2 * h), t->et);
    cg_store(b, v, cg_gep(b, t->base, off, t->et), t->elem == ELEM_F32 ? 4 : 2);
    return;
  }
  MlirType v2 = mlirVectorTypeGet(1, (int64_t[]){2}, t->et);
  int align = t->elem == ELEM_F32 ? 8 : 4;
  for (int ni = 0; ni < g->nn; ni++) {
    MlirValue e2[2] = {cg_float_cast(b, lw_elem(L, x, TC_FULL, mi, ni, 2 * h), t->et),
                       cg_float_cast(b, lw_elem(L, x, TC_FULL, mi, ni, 2 * h + 1), t->et)};
    MlirValue col = cg_int_cast(b, lw_elem_col(L, g, ni, 0), b->i64);
    MlirValue p = cg_gep(b, t->base, cg_addi(b, off, col), t->et);
    cg_store(b, cg_vector_from(b, e2, 2, v2), p, align);
  }
}

/* The tile a store writes (operand 4) checked against a tensor of `cols`
 * columns, and *only: the predicate that keeps one copy of replicated data
 * (lane q = 0 of a quad for row vectors, warp 0 when every warp holds the
 * whole tile). NULL after an error. */
const CgVal *lw_store_begin(Lowerer *L, const Op *op, int cols, MlirValue *only) {
  CgBuilder *b = &L->b;
  CgVal *x = lw_get(L, op->operands[4]);
  if (x->kind != CV_TILE) {
    lw_error(L, op, "only register tiles can be stored");
    return NULL;
  }
  const TileGeom *g = &x->g;
  if ((g->cls == TC_FULL) != (cols > 1) || (g->cls == TC_FULL && g->cols != cols && !g->col_split)) {
    lw_error(L, op, "tile shape does not match the tensor");
    return NULL;
  }
  *only = cg_const_int(b, b->i1, 1);
  if (g->cls == TC_ROWV || g->cls == TC_ONE)
    *only = cg_cmpi(b, "eq", L->lq, cg_const_i32(b, 0));
  if (!g->row_split && !g->col_split && L->warps > 1)
    *only = cg_arith2(b, "arith.andi", *only, cg_cmpi(b, "eq", L->warp, cg_const_i32(b, 0)));
  return x;
}

/* Stores the tile of op (operand 4) into t row by row: row_at gives the
 * element offset of the thread's row r of the tile (an i32 from
 * lw_elem_row) and whether that row exists; replicated copies are skipped. */
void lw_store_rows(Lowerer *L, const Op *op, const TensorRef *t, LwRowAt row_at, void *ctx) {
  CgBuilder *b = &L->b;
  MlirValue only;
  const CgVal *x = lw_store_begin(L, op, t->cols, &only);
  if (!x)
    return;
  const TileGeom *g = &x->g;
  int nm = g->cls == TC_ONE ? 1 : g->nm, nh = g->cls == TC_ONE ? 1 : 2;
  for (int mi = 0; mi < nm; mi++)
    for (int h = 0; h < nh; h++) {
      MlirValue rr = g->cls == TC_ONE ? cg_const_i32(b, 0) : lw_elem_row(L, g, mi, 2 * h);
      MlirValue off, ok;
      row_at(L, ctx, rr, &off, &ok);
      MlirBlock then_block, outer = b->block;
      cg_if(b, cg_arith2(b, "arith.andi", only, ok), NULL, 0, false, &then_block, NULL);
      cg_builder_set_block(b, then_block);
      store_row(L, t, x, off, mi, h);
      cg_yield(b, NULL, 0);
      cg_builder_set_block(b, outer);
    }
}

/* A forward store's row r (SliceRows; a row past the end is not stored). */
static void slice_row_store(Lowerer *L, void *ctx, MlirValue r, MlirValue *off, MlirValue *ok) {
  const SliceRows *at = ctx;
  MlirValue row = slice_row(L, at, r, ok);
  *off = row_offset(L, at->t, at->ix[0], at->ix[1], row);
}

void lw_store(Lowerer *L, const Op *op) {
  if (L->decode) {
    lw_decode_store(L, op);
    return;
  }
  TensorRef t;
  MlirValue ix[3];
  if (op->noperands != 5 || !lw_tensor_ref(L, op, op->operands[0], &t) || !index_operands(L, op, ix))
    return;
  lw_store_rows(L, op, &t, slice_row_store, &(SliceRows){&t, ix});
}
