/* mem_rows.c - layer 1: tensors and the row map.
 *
 * Tensors are the kernel's ABI parameters (docs/abi.md), found by the IR
 * argument's name; the FA1 schedule's workspaces and split-kv's partials
 * are parts of the `workspace` parameter, per (batch, head, query row):
 * o_acc [B, Sq, H, Dv] f32, then m_buf and l_buf [B, H, Sq] f32 each -
 * workspace_floats_per_row = Dv + 2; or o_part, then lse_part, dense in the
 * IR's element order.
 *
 * Every load and store goes through a row map (Rows, mem.h) that says where
 * logical row R of the tile lives and whether it is there at all: slice
 * rows (forward kernels), plain rows below the extent and an optional
 * limit, packed rows (head h*G + R/n, token R%n), or paged rows (slot R%P
 * of page block_table[b, R/P], the table read only for R < limit).
 */
#include <stdio.h>
#include <string.h>

#include "codegen/mem.h"

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
 * seqlen_k the cache capacity, bound so by their kinds). */
static MlirValue dim_value(Lowerer *L, int d) {
  switch (d) {
  case DIM_BATCH: return L->batch;
  case DIM_SEQLEN_Q:
  case DIM_Q_LEN: return L->seqlen_q;
  case DIM_SEQLEN_K:
  case DIM_CAPACITY: return L->seqlen_k;
  case DIM_BATCH_NSPLIT: return cg_muli(&L->b, L->batch, lw_param(L, "nsplit", false));
  default: /* num_pages, max_pages: never a row extent of a tile */
    return cg_const_i64(&L->b, d > 0 ? d : (int64_t)1 << 40);
  }
}

/* A dim's size for a layout's strides: as dim_value, but a varlen kernel's
 * workspaces are padded to the launch's longest sequences (mem_varlen.c). */
static MlirValue dim_size(Lowerer *L, int d) {
  if ((d == DIM_SEQLEN_Q || d == DIM_Q_LEN) && !mlirValueIsNull(L->max_seqlen_q))
    return L->max_seqlen_q;
  if ((d == DIM_SEQLEN_K || d == DIM_CAPACITY) && !mlirValueIsNull(L->max_seqlen_k))
    return L->max_seqlen_k;
  return dim_value(L, d);
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
    n = cg_muli(&L->b, n, dim_size(L, a->type.dims[i]));
  return n;
}

/* Contiguous strides of [B, S, H, D] (rank 4) or [B, H, S] (rank 3), padded
 * to the longest sequence in a varlen kernel. */
static void contiguous_strides(Lowerer *L, const Type *t, TensorRef *r) {
  CgBuilder *b = &L->b;
  if (t->rank == 4) {
    MlirValue d = cg_const_i64(b, t->dims[3]);
    r->sh = d;
    r->ss = cg_muli(b, dim_size(L, t->dims[2]), d);
    r->sb = cg_muli(b, dim_size(L, t->dims[1]), r->ss);
  } else {
    r->ss = cg_const_i64(b, 1);
    r->sh = dim_size(L, t->dims[2]);
    r->sb = cg_muli(b, dim_size(L, t->dims[1]), r->sh);
  }
}

/* A tensor parameter of the kernel kind's own (lw_param: the backward's
 * dout, dq, dk, dv, delta, dq_acc): its strides are the parameters
 * NAME.sb, NAME.ss, NAME.sh when the kind has them, else contiguous. */
static bool own_tensor(Lowerer *L, const char *n, const Type *t, TensorRef *r, MlirValue *ptr) {
  *ptr = lw_param(L, n, true);
  if (mlirValueIsNull(*ptr))
    return false;
  char key[64];
  MlirValue st[3];
  static const char *const suffix[3] = {"sb", "ss", "sh"};
  for (int i = 0; i < 3; i++) {
    snprintf(key, sizeof key, "%s.%s", n, suffix[i]);
    st[i] = lw_param(L, key, false);
  }
  if (mlirValueIsNull(st[0]) || mlirValueIsNull(st[1]) || mlirValueIsNull(st[2])) {
    contiguous_strides(L, t, r);
  } else {
    r->sb = st[0];
    r->ss = st[1];
    r->sh = st[2];
  }
  return true;
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
    if (!mlirValueIsNull(L->total_q)) { /* varlen: [heads, total_q], moved to the sequence */
      r->sb = cg_const_i64(b, 0);
      r->sh = L->total_q;
    }
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
  if (mlirValueIsNull(ptr) && !own_tensor(L, n, t, r, &ptr)) {
    lw_error(L, op, "tensor %%%s has no place in the kernel ABI", n);
    return false;
  }
  r->base = cg_addrspacecast(b, ptr, b->gptr);
  return true;
}

/* Element offset (i64) of (batch, head, row). */
MlirValue lw_row_offset(Lowerer *L, const TensorRef *t, MlirValue bi, MlirValue hi,
                        MlirValue row) {
  CgBuilder *b = &L->b;
  MlirValue o = cg_addi(b, cg_muli(b, bi, t->sb), cg_muli(b, hi, t->sh));
  return cg_addi(b, o, cg_muli(b, row, t->ss));
}

/* ------------------------------------------------------------ row map */

bool lw_rows_slice(Lowerer *L, const Op *op, Rows *m) {
  memset(m, 0, sizeof *m);
  if (!lw_tensor_ref(L, op, op->operands[0], &m->t))
    return false;
  MlirValue ix[3];
  for (int i = 0; i < 3; i++) {
    CgVal *v = lw_get(L, op->operands[1 + i]);
    if (v->kind != CV_SCALAR) {
      lw_error(L, op, "batch, head and row must be scalars");
      return false;
    }
    ix[i] = v->v;
  }
  m->b = ix[0];
  m->h = ix[1];
  m->row0 = ix[2];
  m->limit = m->t.extent;
  m->slice = true;
  return true;
}

/* The row map of a load/store: tensor operand t, then b, h, row0 at `at`. */
static bool rows_make(Lowerer *L, const Op *op, int t, int at, Rows *m) {
  CgBuilder *b = &L->b;
  memset(m, 0, sizeof *m);
  if (!lw_tensor_ref(L, op, op->operands[t], &m->t))
    return false;
  m->b = lw_scalar_operand(L, op, at);
  m->h = lw_scalar_operand(L, op, at + 1);
  m->row0 = lw_scalar_operand(L, op, at + 2);
  if (L->failed)
    return false;
  m->pack = (int)attr_int(&op->attrs, "pack", 0);
  m->limit = m->pack ? cg_muli_c(b, m->t.extent, m->pack) : m->t.extent;
  if (!m->pack)
    m->bh = cg_addi(b, cg_muli(b, m->b, m->t.sb), cg_muli(b, m->h, m->t.sh));
  return true;
}

/* C when row0 (IR) is `mul x, C` for a constant C > 0 (a K/V tile's first
 * row, j * tile_kv), else 0. */
static int row0_multiple(const Value *row0) {
  const Op *d = row0->def;
  if (!d || d->kind != OP_MUL || d->noperands != 2)
    return 0;
  for (int i = 0; i < 2; i++) {
    double c;
    if (value_const(d->operands[i], &c) && c > 0 && c < (1 << 30) && (int)c == c)
      return (int)c;
  }
  return 0;
}

bool lw_rows_of_load(Lowerer *L, const Op *op, MlirValue bt, MlirValue bt_stride, Rows *m) {
  CgBuilder *b = &L->b;
  bool paged = op->kind == OP_LOAD_PAGED;
  int at = paged ? 2 : 1, nops = op->noperands;
  if (nops != (paged ? 6 : 4) && !(!paged && nops == 5)) {
    lw_error(L, op, "unexpected operands");
    return false;
  }
  if (!rows_make(L, op, 0, at, m))
    return false;
  if (nops == at + 4) { /* the limit: a sequence's cache length */
    MlirValue lim = lw_scalar_operand(L, op, at + 3);
    m->limit = paged ? lim : cg_arith2(b, "arith.minsi", m->limit, lim);
  }
  if (paged) {
    m->page = (int)attr_int(&op->attrs, "page_size", 0);
    const Value *btv = op->operands[1];
    if (m->page <= 0 || (m->page & (m->page - 1)) || mlirValueIsNull(bt) || !btv->name ||
        strcmp(btv->name, "block_table") != 0) {
      lw_error(L, op, "needs the kernel's block table and a power-of-2 page size");
      return false;
    }
    MlirValue row = cg_muli(b, m->b, bt_stride);
    m->bt_row = cg_gep(b, cg_addrspacecast(b, bt, b->gptr), row, b->i32);
    m->row0_mult = row0_multiple(op->operands[at + 2]);
  }
  return true;
}

bool lw_rows_of_store(Lowerer *L, const Op *op, Rows *m) {
  return op->noperands == 5 && rows_make(L, op, 0, 1, m);
}

/* block_table[b, pi] as i64 when `ok`, else 0 (the table is read only for
 * rows that are there). */
MlirValue lw_page_entry(Lowerer *L, const Rows *m, MlirValue pi, MlirValue ok) {
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

/* A slice row: a load reads row 0 for a missing row (then replaced by 0),
 * a store skips it. */
static void slice_row_at(Lowerer *L, const Rows *m, MlirValue r, bool store, MlirValue *off,
                         MlirValue *ok) {
  CgBuilder *b = &L->b;
  MlirValue row = cg_addi(b, m->row0, cg_int_cast(b, r, b->i64));
  *ok = cg_cmpi(b, "slt", row, m->t.extent);
  if (!store)
    row = cg_select(b, *ok, row, cg_const_i64(b, 0));
  *off = lw_row_offset(L, &m->t, m->b, m->h, row);
}

/* Element offset (i64, 0 for a missing row) and presence (i1) of row r (i32). */
void lw_row_at(Lowerer *L, const Rows *m, MlirValue r, bool store, MlirValue *off,
               MlirValue *ok) {
  if (m->slice) {
    slice_row_at(L, m, r, store, off, ok);
    return;
  }
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
  } else if (m->page && !mlirValueIsNull(m->base_lo)) {
    MlirValue lo = cg_cmpi(b, "slt", R, m->split_row);
    o = cg_addi(b, cg_select(b, lo, m->base_lo, m->base_hi), cg_muli(b, R, m->t.ss));
  } else if (m->page) {
    MlirValue sr = cg_select(b, *ok, R, zero);
    MlirValue pi = cg_arith2(b, "arith.divui", sr, cg_const_i64(b, m->page));
    MlirValue slot = cg_arith2(b, "arith.remui", sr, cg_const_i64(b, m->page));
    MlirValue page = lw_page_entry(L, m, pi, *ok);
    o = cg_addi(b, cg_addi(b, cg_muli(b, page, m->t.sb), cg_muli(b, slot, m->t.ss)),
                cg_muli(b, m->h, m->t.sh));
  } else {
    o = cg_addi(b, m->bh, cg_muli(b, cg_select(b, *ok, R, zero), m->t.ss));
  }
  *off = cg_select(b, *ok, o, zero);
}

/* A tile of R <= page rows starting at row0 touches pages row0 / P and
 * (row0 + R - 1) / P only (the same one when row0 is page-aligned): both
 * entries up front, clamped to the rows that are there. */
void lw_hoist_pages(Lowerer *L, Rows *m, int R) {
  CgBuilder *b = &L->b;
  MlirValue P = cg_const_i64(b, m->page), zero = cg_const_i64(b, 0);
  MlirValue ok_lo = cg_cmpi(b, "slt", m->row0, m->limit);
  MlirValue pi_lo = cg_arith2(b, "arith.divui", cg_select(b, ok_lo, m->row0, zero), P);
  MlirValue last = cg_arith2(b, "arith.minsi", cg_addi(b, m->row0, cg_const_i64(b, R - 1)),
                             cg_subi(b, m->limit, cg_const_i64(b, 1)));
  MlirValue ok_hi = cg_arith2(b, "arith.andi", ok_lo, cg_cmpi(b, "sge", last, zero));
  MlirValue pi_hi = cg_arith2(b, "arith.divui", cg_select(b, ok_hi, last, zero), P);
  MlirValue pg_lo = lw_page_entry(L, m, pi_lo, ok_lo), pg_hi = lw_page_entry(L, m, pi_hi, ok_hi);
  /* Rows of page pi_lo are below split_row; rows at or past it (only when
   * the tile spans two pages) are in pi_lo + 1 = pi_hi. */
  m->split_row = cg_muli(b, cg_addi(b, pi_lo, cg_const_i64(b, 1)), P);
  MlirValue hsh = cg_muli(b, m->h, m->t.sh);
  m->base_lo = cg_subi(b, cg_addi(b, cg_muli(b, pg_lo, m->t.sb), hsh),
                       cg_muli(b, cg_muli(b, pi_lo, P), m->t.ss));
  m->base_hi = cg_subi(b, cg_addi(b, cg_muli(b, pg_hi, m->t.sb), hsh),
                       cg_muli(b, m->split_row, m->t.ss));
}
