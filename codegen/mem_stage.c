/* mem_stage.c - layer 1: global -> shared memory. A `load` whose tile has
 * no distribution feeds the tensor cores: it is staged in shared memory by
 * cp.async, 16 bytes a thread, in the 128-byte swizzled layout
 * (lw_staged_layout; rows of other widths are padded by 16 bytes, so
 * ldmatrix's eight row addresses fall in distinct bank groups either way),
 * rows that are not there zero-filled by the copy itself (src-size 0 reads
 * nothing; stale cache rows may be NaN, and 0 * NaN would poison P V).
 */
#include <string.h>

#include "codegen/mem.h"

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
   * non-causal 8k-16k: 4% slower with one address; docs/perf-log.md P20). */
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

/* ------------------------------------------------------- row streams */

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
  /* A paged cache (paged_stream): copy it reads page it / per_page of
   * the tile, whose first copy starts at page_ptr[it / per_page]. */
  int per_page;            /* 0: one contiguous stream */
  MlirValue page_ptr[16];
} RowStream;

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

static StageSource stream_source(Lowerer *L, RowStream *rs, const TensorRef *t, MlirValue R0,
                                 MlirValue limit, MlirValue row_zero) {
  CgBuilder *b = &L->b;
  rs->delta = cg_muli_c(b, t->ss, rs->p->step);
  rs->left = cg_subi(b, limit, R0);
  rs->row_zero = row_zero;
  return (StageSource){stream_step, stream_chunk, rs};
}

static StageSource row_stream(Lowerer *L, RowStream *rs, const StagePlan *p, const TensorRef *t,
                              MlirValue bh, MlirValue row0, MlirValue limit, MlirValue row_zero) {
  CgBuilder *b = &L->b;
  memset(rs, 0, sizeof *rs);
  rs->p = p;
  rs->et = t->et;
  MlirValue R0 = cg_addi(b, row0, cg_int_cast(b, p->r_reg, b->i64));
  MlirValue col = cg_int_cast(b, cg_muli_c(b, p->cc_reg, 8), b->i64);
  rs->ptr = cg_gep(b, t->base, cg_addi(b, cg_addi(b, bh, cg_muli(b, R0, t->ss)), col), t->et);
  return stream_source(L, rs, t, R0, limit, row_zero);
}

/* ------------------------------------------------------------ tiles */

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

static void stage_tile_copies(Lowerer *L, const TensorRef *t, MlirValue bi, MlirValue hi,
                              MlirValue row0, CgVal *s);

/* Copies rows row0.. of (batch, head) into a staged tile; rows past the end
 * are zero-filled (their copy reads nothing, from the tensor's row 0). With
 * skip_when_past, a tile whose rows are all past the end (row0 >= extent)
 * issues no copy (Rows.skip_when_past). */
static void stage_tile(Lowerer *L, const TensorRef *t, MlirValue bi, MlirValue hi,
                       MlirValue row0, CgVal *s, bool skip_when_past) {
  CgBuilder *b = &L->b;
  if (!skip_when_past) {
    stage_tile_copies(L, t, bi, hi, row0, s);
    return;
  }
  /* Either path commits one cp.async group (the copies' own, or an empty
   * one): the waits count groups (wait_group N at a tile's first use). */
  MlirBlock outer = b->block, some, none;
  cg_if(b, cg_cmpi(b, "slt", row0, t->extent), NULL, 0, true, &some, &none);
  cg_builder_set_block(b, some);
  stage_tile_copies(L, t, bi, hi, row0, s);
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, none);
  cg_cp_async_commit(b);
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
}

static void stage_tile_copies(Lowerer *L, const TensorRef *t, MlirValue bi, MlirValue hi,
                              MlirValue row0, CgVal *s) {
  CgBuilder *b = &L->b;
  MlirValue bh = lw_row_offset(L, t, bi, hi, cg_const_i64(b, 0));
  StagePlan p = lw_stage_plan(L, s);
  if (p.regular) {
    RowStream rs;
    StageSource src =
        row_stream(L, &rs, &p, t, bh, row0, t->extent, cg_gep(b, t->base, bh, t->et));
    lw_stage_copies(L, s, &p, &src);
    return;
  }
  TileSource ts = {.t = t, .bh = bh, .row0 = row0};
  StageSource src = {NULL, tile_chunk, &ts};
  lw_stage_copies(L, s, &p, &src);
}

static void rows_chunk(Lowerer *L, void *ctx, int it, MlirValue r, MlirValue cc, MlirValue *src,
                       MlirValue *inb) {
  const Rows *m = ctx;
  CgBuilder *b = &L->b;
  MlirValue off;
  (void)it;
  lw_row_at(L, m, r, false, &off, inb);
  off = cg_addi(b, off, cg_int_cast(b, cg_muli_c(b, cc, 8), b->i64));
  *src = cg_gep(b, m->t.base, off, m->t.et);
}

/* A paged tile whose pages are known per copy: rows row0 .. row0 + R - 1
 * with row0 a multiple of C (Rows.row0_mult) lie in one page when C divides
 * P and R <= C, or fill R / P whole pages when P divides C and R (and a
 * thread's rows, step apart, cross pages only between copies: step divides
 * P). Then copy it reads page it / per_page of the tile, and each page is a
 * RowStream of its own: one block-table entry per page and tile, and per
 * copy the contiguous cache's pointer add, compare and select (H100,
 * docs/perf-log.md P25: paged bench rows 0.3-2.6% faster). Only in the
 * 16-row warp-split kernels: in the 64-row d128 kernel ptxas then settled on
 * 168 registers and 60 bytes of spills, 4-10% slower. Returns false for
 * other tiles. */
static bool paged_stream(Lowerer *L, Rows *m, const StagePlan *p, int R, RowStream *rs,
                         StageSource *src) {
  CgBuilder *b = &L->b;
  if (attr_int(&L->f->attrs, "tile_q", 0) > 16)
    return false;
  int P = m->page, C = m->row0_mult;
  if (!p->regular || m->pack || P <= 0 || C <= 0)
    return false;
  bool one = P % C == 0 && R <= C;
  bool whole = C % P == 0 && R % P == 0 && p->step > 0 && P % p->step == 0;
  int npages = one ? 1 : R / P;
  if (!(one || whole) || npages > 16)
    return false;
  memset(rs, 0, sizeof *rs);
  rs->p = p;
  rs->et = m->t.et;
  rs->per_page = one ? p->iters : P / p->step;
  MlirValue Pv = cg_const_i64(b, P);
  MlirValue pi0 = cg_arith2(b, "arith.divui", m->row0, Pv);
  MlirValue r0 = cg_int_cast(b, p->r_reg, b->i64);
  MlirValue R0 = cg_addi(b, m->row0, r0);
  /* Where a thread's first copy of each page starts within the page. */
  MlirValue in_page = cg_addi(b, cg_subi(b, m->row0, cg_muli(b, pi0, Pv)), r0);
  MlirValue col = cg_int_cast(b, cg_muli_c(b, p->cc_reg, 8), b->i64);
  MlirValue rest = cg_addi(b, cg_addi(b, cg_muli(b, m->h, m->t.sh), cg_muli(b, in_page, m->t.ss)),
                           col);
  for (int q = 0; q < npages; q++) {
    MlirValue ok = cg_cmpi(b, "slt", cg_addi_c(b, m->row0, (int64_t)q * P), m->limit);
    MlirValue entry = lw_page_entry(L, m, cg_addi_c(b, pi0, q), ok);
    rs->page_ptr[q] = cg_gep(b, m->t.base, cg_addi(b, cg_muli(b, entry, m->t.sb), rest), m->t.et);
  }
  /* A missing row's copy names the cache's base: readable, it reads nothing. */
  *src = stream_source(L, rs, &m->t, R0, m->limit, m->t.base);
  return true;
}

/* cp.async of the tile's rows into shared memory, 16 bytes a thread; rows
 * that are not there are zero-filled (src-size 0 reads nothing). A
 * contiguous cache's rows are a RowStream (row_stream), a paged cache's
 * a RowStream per page where each copy's page is known (paged_stream);
 * other paged and packed tiles take rows_chunk (a single stream with a
 * per-copy select between two pages kept sixteen pointers live in the d256
 * kernels: 1.2 KB of spills, docs/perf-log.md P22). */
void lw_stage_rows(Lowerer *L, Rows *m, CgVal *s) {
  if (m->slice) {
    stage_tile(L, &m->t, m->b, m->h, m->row0, s, m->skip_when_past);
    return;
  }
  StagePlan p = lw_stage_plan(L, s);
  RowStream rs;
  StageSource src;
  if (m->page && paged_stream(L, m, &p, s->type.rows, &rs, &src)) {
    lw_stage_copies(L, s, &p, &src);
    return;
  }
  if (m->page && !m->pack && s->type.rows <= m->page)
    lw_hoist_pages(L, m, s->type.rows);
  if (!p.regular || m->pack || m->page) {
    StageSource src = {NULL, rows_chunk, m};
    lw_stage_copies(L, s, &p, &src);
    return;
  }
  src = row_stream(L, &rs, &p, &m->t, m->bh, m->row0, m->limit, m->t.base);
  lw_stage_copies(L, s, &p, &src);
}
