/* lower_decode.c - decode kernels (docs/decode.md): the split kernel's and
 * the combine kernel's parameters, their grid, and the memory ops that only
 * decode programs hold.
 *
 * - Parameters: the decode ABI table (25 for the split kernel, 10 for the
 *   combine kernel); the IR's %o_part / %lse_part are the workspace's two
 *   parts, dense in the IR's element order.
 * - Grid: the parallel loops over the batch, the heads and the splits take
 *   grid z, y, x (split kernel: (nsplit, kv_heads, batch)) or y, x (combine:
 *   (heads, batch)). Each is a grid-stride loop, so that any other parallel
 *   loop (the Q tiles of a group, or the query heads of a K/V head when
 *   pack-gqa is off) may simply run inside the block and the program stays
 *   correct whatever the pass pipeline left.
 * - Memory: every load and store of a decode kernel goes through a row map
 *   (Rows) that says where logical row R of the tile lives and whether it is
 *   there at all: plain rows below the extent and the optional limit operand,
 *   packed rows (head h*G + R/n, token R%n), or paged rows (slot R%P of page
 *   block_table[b, R/P], the table read only for R < limit). Tiles for the
 *   tensor cores are staged by cp.async with a zero fill for missing rows
 *   (stale cache rows may be NaN, and 0 * NaN would poison P V).
 * - reduce: an i1 tile to one flag for the whole block with one
 *   bar.red.and/or; other tiles through warp shuffles and shared memory.
 */
#include <stdio.h>
#include <string.h>

#include "codegen/lower_internal.h"
#include "mlir-c/BuiltinTypes.h"

/* ------------------------------------------------------- parameters */

enum { SPLIT_NPARAMS = 25, COMBINE_NPARAMS = 10 };

bool lw_decode_init(Lowerer *L) {
  const AttrList *a = &L->f->attrs;
  if (strcmp(attr_str(a, "mode", "forward"), "decode") != 0)
    return false;
  L->decode = true;
  L->combine = attr_get(a, "combine_of") != NULL;
  return true;
}

int lw_decode_param_types(Lowerer *L, MlirType *p) {
  CgBuilder *b = &L->b;
  if (L->combine) { /* o, lse, workspace, cache_seqlens, batch, q_len, nsplit, o strides */
    for (int i = 0; i < COMBINE_NPARAMS; i++)
      p[i] = i < 4 ? b->ptr : i < 7 ? b->i32 : b->i64;
    return COMBINE_NPARAMS;
  }
  /* q k v o lse workspace cache_seqlens block_table, batch q_len capacity
   * nsplit bt_stride, q/k/v/o strides (b, s, h). */
  for (int i = 0; i < SPLIT_NPARAMS; i++)
    p[i] = i < 8 ? b->ptr : i < 13 ? b->i32 : b->i64;
  return SPLIT_NPARAMS;
}

void lw_decode_params(Lowerer *L, MlirBlock entry) {
  CgBuilder *b = &L->b;
  MlirValue a[SPLIT_NPARAMS];
  int n = L->combine ? COMBINE_NPARAMS : SPLIT_NPARAMS;
  for (int i = 0; i < n; i++)
    a[i] = mlirBlockGetArgument(entry, i);
  if (L->combine) {
    L->p_o = a[0];
    L->p_lse = a[1];
    L->p_ws = a[2];
    L->p_seqlens = a[3];
    L->batch = cg_int_cast(b, a[4], b->i64);
    L->q_len = cg_int_cast(b, a[5], b->i64);
    L->nsplit = cg_int_cast(b, a[6], b->i64);
    for (int s = 0; s < 3; s++)
      L->strides[3][s] = a[7 + s];
  } else {
    lw_bind_io_params(L, a, 13);
    L->p_seqlens = a[6];
    L->p_bt = a[7];
    L->batch = cg_int_cast(b, a[8], b->i64);
    L->q_len = cg_int_cast(b, a[9], b->i64);
    L->capacity = cg_int_cast(b, a[10], b->i64);
    L->nsplit = cg_int_cast(b, a[11], b->i64);
    L->bt_stride = cg_int_cast(b, a[12], b->i64);
  }
  /* The forward names, for code that asks for them. */
  L->seqlen_q = L->q_len;
  L->seqlen_k = mlirValueIsNull(L->capacity) ? L->q_len : L->capacity;
}

MlirValue lw_decode_index_arg(Lowerer *L, const char *name) {
  if (strcmp(name, "q_len") == 0)
    return L->q_len;
  if (strcmp(name, "capacity") == 0)
    return L->capacity;
  if (strcmp(name, "nsplit") == 0)
    return L->nsplit;
  return (MlirValue){NULL};
}

/* ------------------------------------------------------------- grid */

/* The grid dimension of a parallel loop, or NULL to run it in the block:
 * the loop to %batch, the loop to %nsplit, and the head loop (its bound a
 * constant: kv_heads, or heads when pack-gqa is off or in the combine). */
static const char *loop_dim(Lowerer *L, const Op *op, unsigned *used) {
  const Value *hi = op->operands[1];
  const char *n = hi->block == L->f->body && hi->name ? hi->name : "";
  const char *dim = NULL;
  if (strcmp(n, "batch") == 0)
    dim = L->combine ? "y" : "z";
  else if (strcmp(n, "nsplit") == 0 && !L->combine)
    dim = "x";
  else if (hi->def && hi->def->kind == OP_CONST)
    dim = L->combine ? "x" : "y";
  if (!dim || (*used & (1u << (dim[0] - 'x'))))
    return NULL;
  *used |= 1u << (dim[0] - 'x');
  return dim;
}

static MlirValue grid_dim(CgBuilder *b, const char *dim) {
  char text[32];
  snprintf(text, sizeof text, "#gpu<dim %s>", dim);
  CgNamedAttr a = {"dimension", cg_attr(b, text)};
  return cg_int_cast(b, cg_op1(b, "gpu.grid_dim", NULL, 0, b->index, &a, 1), b->i64);
}

/* A grid-stride loop: iv = lo + block id, step grid dim (one step when the
 * launch's grid matches the loop, as the runtime's does). The used-dims mask
 * is per kernel: nested loops never share a dim. */
void lw_decode_parallel_for(Lowerer *L, const Op *op) {
  unsigned used = (unsigned)L->parallel_seen;
  const char *dim = loop_dim(L, op, &used);
  if (!dim) {
    lw_lower_seq_for(L, op);
    return;
  }
  int saved = L->parallel_seen;
  L->parallel_seen = (int)used;
  CgBuilder *b = &L->b;
  MlirValue lo = lw_get(L, op->operands[0])->v, hi = lw_get(L, op->operands[1])->v;
  MlirValue start = cg_addi(b, lo, cg_int_cast(b, cg_block_id(b, dim), b->i64));
  MlirBlock body;
  cg_for(b, start, hi, grid_dim(b, dim), NULL, 0, &body);
  lw_set(L, for_iv((Op *)op), lw_scalar(L, type_index(), mlirBlockGetArgument(body, 0)));
  /* A second step rewrites the buffers the first one read. */
  L->smem_read_since_barrier = true;
  lw_lower_region(L, for_body((Op *)op), body);
  L->smem_read_since_barrier = true;
  L->parallel_seen = saved;
}

/* ------------------------------------------------------------- rows */

/* Where logical row R = row0 + r of a tile lives. */
typedef struct Rows {
  TensorRef t;
  MlirValue b, h, row0; /* i64 */
  MlirValue limit;      /* rows at or past it are missing (i64) */
  int pack;             /* G query heads per K/V head; 0: not packed */
  int page;             /* page size; 0: not paged */
  MlirValue bt_row;     /* paged: !llvm.ptr<1> to block_table[b, 0] */
  /* paged, a staged tile of at most page rows: it spans pages pi_lo and
   * pi_lo + 1 at most, whose entries (pg_lo, pg_hi: i64) are read once per
   * tile instead of once per 16-byte chunk; null otherwise. */
  MlirValue pi_lo, pg_lo, pg_hi;
  MlirValue bh;         /* plain: b * sb + h * sh */
} Rows;

/* Element offset (i64, 0 for a missing row) and presence (i1) of row r (i32). */
static void row_at(Lowerer *L, const Rows *m, MlirValue r, MlirValue *off, MlirValue *ok) {
  CgBuilder *b = &L->b;
  MlirValue R = cg_addi(b, m->row0, cg_int_cast(b, r, b->i64));
  MlirValue zero = cg_const_i64(b, 0);
  *ok = cg_cmpi(b, "slt", R, m->limit);
  MlirValue o;
  if (m->pack) {
    /* i32 division: R < G * q_len <= 2^31 for every row that is there. */
    MlirValue R32 = cg_int_cast(b, R, b->i32), n = cg_int_cast(b, m->t.extent, b->i32);
    MlirValue g = cg_int_cast(b, cg_arith2(b, "arith.divui", R32, n), b->i64);
    MlirValue tok = cg_int_cast(b, cg_arith2(b, "arith.remui", R32, n), b->i64);
    MlirValue head = cg_addi(b, cg_muli_c(b, m->h, m->pack), g);
    o = cg_addi(b, cg_addi(b, cg_muli(b, m->b, m->t.sb), cg_muli(b, head, m->t.sh)),
                cg_muli(b, tok, m->t.ss));
  } else if (m->page) {
    MlirValue sr = cg_select(b, *ok, R, zero);
    MlirValue pi = cg_arith2(b, "arith.divui", sr, cg_const_i64(b, m->page));
    MlirValue slot = cg_arith2(b, "arith.remui", sr, cg_const_i64(b, m->page));
    if (!mlirValueIsNull(m->pg_lo)) {
      MlirValue page = cg_select(b, cg_cmpi(b, "eq", pi, m->pi_lo), m->pg_lo, m->pg_hi);
      o = cg_addi(b, cg_addi(b, cg_muli(b, page, m->t.sb), cg_muli(b, slot, m->t.ss)),
                  cg_muli(b, m->h, m->t.sh));
      *off = cg_select(b, *ok, o, zero);
      return;
    }
    /* The table is read only for rows that are there. */
    MlirBlock tb, eb, outer = b->block;
    MlirOperation ifop = cg_if(b, *ok, &b->i32, 1, true, &tb, &eb);
    cg_builder_set_block(b, tb);
    MlirValue e = cg_load(b, cg_gep(b, m->bt_row, pi, b->i32), b->i32, 4);
    cg_yield(b, &e, 1);
    cg_builder_set_block(b, eb);
    MlirValue z = cg_const_i32(b, 0);
    cg_yield(b, &z, 1);
    cg_builder_set_block(b, outer);
    MlirValue page = cg_int_cast(b, cg_result(ifop, 0), b->i64);
    o = cg_addi(b, cg_addi(b, cg_muli(b, page, m->t.sb), cg_muli(b, slot, m->t.ss)),
                cg_muli(b, m->h, m->t.sh));
  } else {
    o = cg_addi(b, m->bh, cg_muli(b, cg_select(b, *ok, R, zero), m->t.ss));
  }
  *off = cg_select(b, *ok, o, zero);
}

static MlirValue scalar_of(Lowerer *L, const Op *op, int i) {
  CgVal *v = lw_get(L, op->operands[i]);
  if (v->kind != CV_SCALAR) {
    lw_error(L, op, "operand %d must be a scalar", i);
    return (MlirValue){NULL};
  }
  return v->v;
}

/* The row map of a load/store: tensor operand t, then b, h, row0 at `at`. */
static bool make_rows(Lowerer *L, const Op *op, int t, int at, Rows *m) {
  CgBuilder *b = &L->b;
  memset(m, 0, sizeof *m);
  if (!lw_tensor_ref(L, op, op->operands[t], &m->t))
    return false;
  m->b = scalar_of(L, op, at);
  m->h = scalar_of(L, op, at + 1);
  m->row0 = scalar_of(L, op, at + 2);
  if (L->failed)
    return false;
  m->pack = (int)attr_int(&op->attrs, "pack", 0);
  m->limit = m->pack ? cg_muli_c(b, m->t.extent, m->pack) : m->t.extent;
  if (!m->pack)
    m->bh = cg_addi(b, cg_muli(b, m->b, m->t.sb), cg_muli(b, m->h, m->t.sh));
  return true;
}

/* ------------------------------------------------------------ loads */

/* block_table[b, pi] as i64 when `ok`, else 0 (the table is read only for
 * rows that are there). */
static MlirValue page_entry(Lowerer *L, const Rows *m, MlirValue pi, MlirValue ok) {
  CgBuilder *b = &L->b;
  MlirBlock tb, eb, outer = b->block;
  MlirOperation ifop = cg_if(b, ok, &b->i32, 1, true, &tb, &eb);
  cg_builder_set_block(b, tb);
  MlirValue e = cg_load(b, cg_gep(b, m->bt_row, pi, b->i32), b->i32, 4);
  cg_yield(b, &e, 1);
  cg_builder_set_block(b, eb);
  MlirValue z = cg_const_i32(b, 0);
  cg_yield(b, &z, 1);
  cg_builder_set_block(b, outer);
  return cg_int_cast(b, cg_result(ifop, 0), b->i64);
}

/* A tile of R <= page rows starting at row0 touches pages row0 / P and
 * (row0 + R - 1) / P only (the same one when row0 is page-aligned): both
 * entries up front, clamped to the rows that are there. */
static void hoist_pages(Lowerer *L, Rows *m, int R) {
  CgBuilder *b = &L->b;
  MlirValue P = cg_const_i64(b, m->page), zero = cg_const_i64(b, 0);
  MlirValue ok_lo = cg_cmpi(b, "slt", m->row0, m->limit);
  m->pi_lo = cg_arith2(b, "arith.divui", cg_select(b, ok_lo, m->row0, zero), P);
  MlirValue last = cg_arith2(b, "arith.minsi", cg_addi(b, m->row0, cg_const_i64(b, R - 1)),
                             cg_subi(b, m->limit, cg_const_i64(b, 1)));
  MlirValue ok_hi = cg_arith2(b, "arith.andi", ok_lo, cg_cmpi(b, "sge", last, zero));
  MlirValue pi_hi = cg_arith2(b, "arith.divui", cg_select(b, ok_hi, last, zero), P);
  m->pg_lo = page_entry(L, m, m->pi_lo, ok_lo);
  m->pg_hi = page_entry(L, m, pi_hi, ok_hi);
}

/* cp.async of the tile's rows into shared memory, 16 bytes a thread; rows
 * that are not there are zero-filled (src-size 0 reads nothing). */
static void stage_rows(Lowerer *L, Rows *m, CgVal *s) {
  CgBuilder *b = &L->b;
  int R = s->type.rows, C = s->type.cols, T = L->threads;
  if (m->page && !m->pack && R <= m->page)
    hoist_pages(L, m, R);
  int cpr = C / 8, total = R * cpr, iters = (total + T - 1) / T;
  bool regular = T % cpr == 0; /* the thread keeps its column chunk */
  MlirValue cc_reg = cg_arith2(b, "arith.remui", L->tid, cg_const_i32(b, cpr));
  MlirValue r_reg = cg_arith2(b, "arith.divui", L->tid, cg_const_i32(b, cpr));
  for (int it = 0; it < iters; it++) {
    MlirValue chunk = cg_addi_c(b, L->tid, it * T);
    MlirValue r = regular ? cg_addi_c(b, r_reg, it * (T / cpr))
                          : cg_arith2(b, "arith.divui", chunk, cg_const_i32(b, cpr));
    MlirValue cc = regular ? cc_reg : cg_arith2(b, "arith.remui", chunk, cg_const_i32(b, cpr));
    MlirBlock outer = b->block, guarded;
    bool guard = (it + 1) * T > total;
    if (guard) {
      cg_if(b, cg_cmpi(b, "ult", chunk, cg_const_i32(b, total)), NULL, 0, false, &guarded, NULL);
      cg_builder_set_block(b, guarded);
    }
    MlirValue off, ok;
    row_at(L, m, r, &off, &ok);
    off = cg_addi(b, off, cg_int_cast(b, cg_muli_c(b, cc, 8), b->i64));
    MlirValue src = cg_gep(b, m->t.base, off, m->t.et);
    MlirValue sel = cg_addi(b, cg_muli_c(b, r, s->smem_stride), cg_muli_c(b, cc, 8));
    MlirValue dst = cg_gep(b, L->smem, lw_smem_base(L, s, cg_muli_c(b, sel, 2)), b->i8);
    cg_cp_async16(b, dst, src, cg_select(b, ok, cg_const_i32(b, 16), cg_const_i32(b, 0)));
    if (guard) {
      cg_yield(b, NULL, 0);
      cg_builder_set_block(b, outer);
    }
  }
  cg_cp_async_commit(b);
}

/* Straight into the accumulator layout; missing rows read 0. */
static void load_regs(Lowerer *L, const Op *op, const Rows *m) {
  CgBuilder *b = &L->b;
  Type rt = op->results[0]->type;
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return;
  CgVal *r = lw_tile(L, rt, &g);
  static int mi[4096], ni[4096], e[4096];
  if (r->ne > 4096) {
    lw_error(L, op, "tile too large for one thread");
    return;
  }
  lw_positions(&g, mi, ni, e);
  MlirValue zero = cg_const_float(b, m->t.et, 0.0);
  int esize = m->t.elem == ELEM_F32 ? 4 : 2;
  for (int k = 0; k < r->ne; k++) {
    MlirValue off, ok;
    row_at(L, m, lw_elem_row(L, &g, mi[k], e[k]), &off, &ok);
    if (g.cls == TC_FULL || g.cls == TC_COLV)
      off = cg_addi(b, off, cg_int_cast(b, lw_elem_col(L, &g, ni[k], e[k]), b->i64));
    MlirValue v = cg_load(b, cg_gep(b, m->t.base, off, m->t.et), m->t.et, esize);
    r->e[k] = cg_float_cast(b, cg_select(b, ok, v, zero), lw_elem_type(L, rt.elem));
  }
  lw_set(L, op->results[0], r);
}

void lw_decode_load(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  bool paged = op->kind == OP_LOAD_PAGED;
  int at = paged ? 2 : 1, nops = op->noperands;
  if (nops != (paged ? 6 : 4) && !(!paged && nops == 5)) {
    lw_error(L, op, "unexpected operands");
    return;
  }
  Rows m;
  if (!make_rows(L, op, 0, at, &m))
    return;
  if (nops == at + 4) { /* the limit: a sequence's cache length */
    MlirValue lim = scalar_of(L, op, at + 3);
    m.limit = paged ? lim : cg_arith2(b, "arith.minsi", m.limit, lim);
  }
  if (paged) {
    m.page = (int)attr_int(&op->attrs, "page_size", 0);
    const Value *bt = op->operands[1];
    if (m.page <= 0 || (m.page & (m.page - 1)) || mlirValueIsNull(L->p_bt) ||
        !bt->name || strcmp(bt->name, "block_table") != 0) {
      lw_error(L, op, "needs the kernel's block table and a power-of-2 page size");
      return;
    }
    MlirValue row = cg_muli(b, m.b, L->bt_stride);
    m.bt_row = cg_gep(b, cg_addrspacecast(b, L->p_bt, b->gptr), row, b->i32);
  }
  Type rt = op->results[0]->type;
  if (rt.kind != TYPE_TILE) {
    lw_error(L, op, "the result must be a tile");
    return;
  }
  if (!lw_is_staged_type(rt)) {
    load_regs(L, op, &m);
    return;
  }
  if (rt.cols % 8 || rt.cols != m.t.cols || (m.t.elem != ELEM_BF16 && m.t.elem != ELEM_F16)) {
    lw_error(L, op, "a tile staged for the tensor cores must be whole f16/bf16 rows, 8-aligned");
    return;
  }
  CgVal *s = lw_stage_begin(L, op);
  stage_rows(L, &m, s);
  lw_stage_end(L, op, s);
}

void lw_decode_load_scalar(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  const Value *t = op->operands[0];
  MlirValue i = scalar_of(L, op, 1);
  if (L->failed)
    return;
  MlirValue p = t->name && strcmp(t->name, "cache_seqlens") == 0 ? L->p_seqlens
                : t->name && strcmp(t->name, "block_table") == 0 ? L->p_bt
                                                                : (MlirValue){NULL};
  if (mlirValueIsNull(p) || t->type.elem != ELEM_I32 || t->type.rank != 1) {
    lw_error(L, op, "reads only the kernel's rank 1 i32 tensors (cache_seqlens)");
    return;
  }
  MlirValue g = cg_gep(b, cg_addrspacecast(b, p, b->gptr), i, b->i32);
  MlirValue v = cg_int_cast(b, cg_load(b, g, b->i32, 4), b->i64);
  lw_set(L, op->results[0], lw_scalar(L, op->results[0]->type, v));
}

/* ----------------------------------------------------------- stores */

/* Row (mi, h) of a thread's share at element offset off; the two adjacent
 * columns of an n8 fragment go together. */
void lw_decode_store(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  Rows m;
  if (op->noperands != 5 || !make_rows(L, op, 0, 1, &m))
    return;
  MlirValue only;
  const CgVal *x = lw_store_begin(L, op, m.t.cols, &only);
  if (!x)
    return;
  const TileGeom *g = &x->g;
  int nm = g->cls == TC_ONE ? 1 : g->nm, nh = g->cls == TC_ONE ? 1 : 2;
  for (int mi = 0; mi < nm; mi++)
    for (int h = 0; h < nh; h++) {
      MlirValue rr = g->cls == TC_ONE ? cg_const_i32(b, 0) : lw_elem_row(L, g, mi, 2 * h);
      MlirValue off, ok;
      row_at(L, &m, rr, &off, &ok);
      MlirBlock then_block, outer = b->block;
      cg_if(b, cg_arith2(b, "arith.andi", only, ok), NULL, 0, false, &then_block, NULL);
      cg_builder_set_block(b, then_block);
      lw_store_row(L, &m.t, x, off, mi, h);
      cg_yield(b, NULL, 0);
      cg_builder_set_block(b, outer);
    }
}

/* ----------------------------------------------------------- reduce */

typedef enum RKind { RK_MAX, RK_MIN, RK_SUM } RKind;

static MlirValue rcombine(Lowerer *L, RKind k, ElemType et, MlirValue a, MlirValue c) {
  CgBuilder *b = &L->b;
  if (et == ELEM_I1)
    return cg_arith2(b, k == RK_MIN ? "arith.andi" : "arith.ori", a, c);
  if (et == ELEM_F32) {
    MlirValue ops[2] = {a, c};
    if (k == RK_SUM)
      return cg_addf(b, a, c);
    return cg_intrinsic(b, k == RK_MAX ? "llvm.maxnum.f32" : "llvm.minnum.f32", ops, 2, b->f32);
  }
  return k == RK_SUM ? cg_addi(b, a, c) : cg_arith2(b, k == RK_MAX ? "arith.maxsi" : "arith.minsi", a, c);
}

/* This thread's fold of its elements. A sum counts each element once: a
 * row vector's quad, a column vector's row groups and a tile every warp
 * holds are copies. */
static MlirValue thread_fold(Lowerer *L, const CgVal *x, RKind k, ElemType et) {
  CgBuilder *b = &L->b;
  MlirValue acc = x->e[0];
  for (int i = 1; i < x->ne; i++)
    acc = rcombine(L, k, et, acc, x->e[i]);
  if (k != RK_SUM)
    return acc;
  MlirValue own = cg_const_int(b, b->i1, 1);
  if (x->g.cls == TC_ROWV || x->g.cls == TC_ONE)
    own = cg_cmpi(b, "eq", L->lq, cg_const_i32(b, 0));
  if (x->g.cls == TC_COLV || x->g.cls == TC_ONE)
    own = cg_arith2(b, "arith.andi", own, cg_cmpi(b, "eq", L->lg, cg_const_i32(b, 0)));
  if (!x->g.row_split && !x->g.col_split)
    own = cg_arith2(b, "arith.andi", own, cg_cmpi(b, "eq", L->warp, cg_const_i32(b, 0)));
  MlirType t = mlirValueGetType(acc);
  MlirValue zero = et == ELEM_F32 ? cg_const_float(b, t, 0.0) : cg_const_int(b, t, 0);
  return cg_select(b, own, acc, zero);
}

/* Flags: one bar.red over the block (every thread's flag, AND or OR). */
static MlirValue reduce_flags(Lowerer *L, MlirValue flag, RKind k) {
  CgBuilder *b = &L->b;
  MlirValue ops[2] = {cg_const_i32(b, 0), flag};
  return cg_intrinsic(b, k == RK_MIN ? "llvm.nvvm.barrier.cta.red.and.aligned.all"
                                     : "llvm.nvvm.barrier.cta.red.or.aligned.all",
                      ops, 2, b->i1);
}

/* Numbers: shuffles within the warp, then one slot per warp in shared
 * memory (a buffer of its own: the block's scratch belongs to xwarp_reduce). */
static MlirValue reduce_values(Lowerer *L, MlirValue v, RKind k, ElemType et) {
  CgBuilder *b = &L->b;
  for (int mask = 16; mask >= 1; mask /= 2)
    v = rcombine(L, k, et, v, cg_shuffle_xor(b, v, mask));
  if (L->warps == 1)
    return v;
  int off = lw_alloc_smem(L, 4 * L->warps);
  MlirType t = mlirValueGetType(v);
  if (L->smem_read_since_barrier)
    lw_barrier(L);
  MlirBlock wr, outer = b->block;
  cg_if(b, cg_cmpi(b, "eq", L->lane, cg_const_i32(b, 0)), NULL, 0, false, &wr, NULL);
  cg_builder_set_block(b, wr);
  MlirValue mine = cg_addi_c(b, cg_muli_c(b, L->warp, 4), off);
  cg_store(b, v, cg_gep(b, L->smem, mine, b->i8), 4);
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
  lw_barrier(L);
  MlirValue acc = (MlirValue){NULL};
  for (int w = 0; w < L->warps; w++) {
    MlirValue x = cg_load(b, cg_gep(b, L->smem, cg_const_i32(b, off + 4 * w), b->i8), t, 4);
    acc = w ? rcombine(L, k, et, acc, x) : x;
  }
  L->smem_read_since_barrier = true;
  return acc;
}

void lw_decode_reduce(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  const CgVal *x = lw_get(L, op->operands[0]);
  const char *ks = attr_str(&op->attrs, "kind", "max");
  RKind k = strcmp(ks, "min") == 0 ? RK_MIN : strcmp(ks, "sum") == 0 ? RK_SUM : RK_MAX;
  Type rt = op->results[0]->type;
  ElemType et = x->type.elem == ELEM_F16 || x->type.elem == ELEM_BF16 ? ELEM_F32 : x->type.elem;
  if (x->kind == CV_SCALAR) {
    lw_set(L, op->results[0], lw_scalar(L, rt, x->v));
    return;
  }
  if (x->kind != CV_TILE || (x->splat && k == RK_SUM) || (et == ELEM_I1 && k == RK_SUM)) {
    lw_error(L, op, "expects a register tile (and no sum of flags or of a uniform tile)");
    return;
  }
  MlirValue r;
  if (x->splat)
    r = x->v; /* every element is this value */
  else if (et == ELEM_I1)
    r = reduce_flags(L, thread_fold(L, x, k, et), k);
  else
    r = reduce_values(L, thread_fold(L, x, k, et), k, et);
  if (rt.elem == ELEM_INDEX && et == ELEM_INDEX)
    r = cg_int_cast(b, r, b->i64); /* index tiles hold i32 */
  lw_set(L, op->results[0], lw_scalar(L, rt, r));
}
