/* cg_frag.c - layer 0: register fragments. How a warp holds a register tile
 * (TileGeom, in the m16n8 accumulator layout of cg_lowerer.h), where each
 * of a thread's elements sits, and the m16n8k16 A fragment made of two
 * accumulator tiles (the FA2 register trick, for mma.sync and wgmma alike).
 */
#include "codegen/cg_frag.h"

#include <stdio.h>
#include <string.h>

static bool geom_fail(Lowerer *L, const Op *op, const char *msg, Type t) {
  char buf[96];
  if (op)
    lw_error(L, op, "%s (%s, %d warps)", msg, type_str(t, buf, sizeof buf), L->warps);
  else
    lw_error(L, NULL, "%s", msg);
  return false;
}

/* The geometry of t over W warps into g; NULL, or why it has none. */
static const char *geom_of(int W, Type t, TileGeom *g) {
  memset(g, 0, sizeof *g);
  int R = t.rows, C = t.cols;
  if (R <= 0 || C <= 0)
    return "tile extents are still symbolic";
  g->rows = R;
  g->cols = C;
  g->cls = (R == 1 && C == 1) ? TC_ONE : C == 1 ? TC_ROWV : R == 1 ? TC_COLV : TC_FULL;
  g->row_split = (t.dist == DIST_ROWS || t.dist == DIST_GROUP_COLS) && R > 1;
  g->col_split = t.dist == DIST_COLS && C > 1;
  g->groups = 1;
  g->group_warps = W;
  int rw = R, cw = C;
  if (t.dist == DIST_GROUP_COLS) {
    /* a warp a 16-row slice; the warps left over form more groups */
    if (g->cls != TC_FULL || R % 16 || W % (R / 16) || W == R / 16)
      return "a group tile needs 16-row slices and warps for two groups or more";
    g->group_warps = R / 16;
    g->groups = W / g->group_warps;
    g->group_cols = true;
    if (C % g->groups)
      return "a group_cols tile's columns do not split over its groups";
    cw = C / g->groups;
    rw = 16;
  } else if (g->row_split) {
    if (R % W)
      return "rows do not split evenly over the warps";
    rw = R / W;
  }
  if (g->col_split) {
    if (C % W)
      return "columns do not split evenly over the warps";
    cw = C / W;
  }
  if (g->cls == TC_ROWV || g->cls == TC_FULL) {
    if (rw % 16)
      return "each warp needs a multiple of 16 rows";
    g->nm = rw / 16;
  }
  if (g->cls == TC_COLV || g->cls == TC_FULL) {
    if (cw % 8)
      return "each warp needs a multiple of 8 columns";
    g->nn = cw / 8;
  }
  return NULL;
}

bool lw_geom(Lowerer *L, Type t, TileGeom *g, const Op *op) {
  const char *why = geom_of(L->warps, t, g);
  return why ? geom_fail(L, op, why, t) : true;
}

bool lw_geom_quiet(const Lowerer *L, Type t, TileGeom *g) {
  return geom_of(L->warps, t, g) == NULL;
}

int lw_geom_count(const TileGeom *g) {
  switch (g->cls) {
  case TC_ONE: return 1;
  case TC_ROWV: return 2 * g->nm;
  case TC_COLV: return 2 * g->nn;
  case TC_FULL: return 4 * g->nm * g->nn;
  }
  return 0;
}

int lw_index_of(const TileGeom *g, int mi, int ni, int e) {
  switch (g->cls) {
  case TC_ONE: return 0;
  case TC_ROWV: return mi * 2 + (e >> 1);
  case TC_COLV: return ni * 2 + (e & 1);
  case TC_FULL: return (mi * g->nn + ni) * 4 + e;
  }
  return 0;
}

/* Result positions in element order (the inverse of lw_index_of). */
int lw_positions(const TileGeom *g, int *mi, int *ni, int *e) {
  int n = 0;
  switch (g->cls) {
  case TC_ONE:
    mi[0] = ni[0] = e[0] = 0;
    return 1;
  case TC_ROWV:
    for (int m = 0; m < g->nm; m++)
      for (int h = 0; h < 2; h++, n++)
        mi[n] = m, ni[n] = 0, e[n] = 2 * h;
    return n;
  case TC_COLV:
    for (int c = 0; c < g->nn; c++)
      for (int k = 0; k < 2; k++, n++)
        mi[n] = 0, ni[n] = c, e[n] = k;
    return n;
  case TC_FULL:
    for (int m = 0; m < g->nm; m++)
      for (int c = 0; c < g->nn; c++)
        for (int k = 0; k < 4; k++, n++)
          mi[n] = m, ni[n] = c, e[n] = k;
    return n;
  }
  return 0;
}

CgVal *lw_tile(Lowerer *L, Type t, const TileGeom *g) {
  CgVal *cv = lw_alloc(L, sizeof *cv);
  cv->kind = CV_TILE;
  cv->type = t;
  cv->g = *g;
  cv->ne = lw_geom_count(g);
  cv->e = lw_alloc(L, sizeof(MlirValue) * (size_t)cv->ne);
  cv->async_seq = -1;
  return cv;
}

CgVal *lw_splat(Lowerer *L, Type t, MlirValue v) {
  TileGeom g;
  if (!lw_geom(L, t, &g, NULL))
    return NULL;
  CgVal *cv = lw_alloc(L, sizeof *cv);
  cv->kind = CV_TILE;
  cv->type = t;
  cv->g = g;
  cv->ne = lw_geom_count(&g);
  cv->splat = true;
  cv->v = v;
  cv->async_seq = -1;
  return cv;
}

/* Column 8 ni + 2 (lane % 4) + e % 2 of a lane-held row vector (cg_lowerer.h
 * CgVal.lanes): slot 2 (ni / 8) + e % 2 of lane 4 (ni % 8) + lane % 4,
 * shuffled once a block. */
static MlirValue lane_elem(Lowerer *L, const CgVal *cv, int ni, int e) {
  CgVal *c = (CgVal *)cv; /* the cache is no part of the value */
  int n = 2 * cv->g.nn, k = 2 * ni + (e & 1);
  if (!c->lane_cache || !mlirBlockEqual(c->lane_block, L->b.block)) {
    if (!c->lane_cache)
      c->lane_cache = lw_alloc(L, sizeof(MlirValue) * (size_t)n);
    for (int i = 0; i < n; i++)
      c->lane_cache[i] = (MlirValue){NULL};
    c->lane_block = L->b.block;
  }
  if (mlirValueIsNull(c->lane_cache[k])) {
    MlirValue src = cg_addi(&L->b, L->lq, cg_const_i32(&L->b, 4 * (ni % 8)));
    c->lane_cache[k] = cg_shuffle_idx(&L->b, cv->e[2 * (ni / 8) + (e & 1)], src);
  }
  return c->lane_cache[k];
}

MlirValue lw_elem(Lowerer *L, const CgVal *cv, TileClass rc, int mi, int ni, int e) {
  (void)rc;
  if (cv->kind == CV_SCALAR || cv->splat)
    return cv->v;
  if (cv->lanes)
    return L->lane_slots ? cv->e[ni] : lane_elem(L, cv, ni, e);
  return cv->e[lw_index_of(&cv->g, mi, ni, e)];
}

MlirValue lw_group_warp(Lowerer *L, const TileGeom *g) {
  if (g->groups <= 1)
    return L->warp;
  return cg_arith2(&L->b, "arith.remui", L->warp, cg_const_i32(&L->b, g->group_warps));
}

MlirValue lw_group(Lowerer *L, const TileGeom *g) {
  if (g->groups <= 1)
    return cg_const_i32(&L->b, 0);
  return cg_arith2(&L->b, "arith.divui", L->warp, cg_const_i32(&L->b, g->group_warps));
}

/* The warp's first row / column of a tile (i32), 0 when not split. */
static MlirValue row_base(Lowerer *L, const TileGeom *g) {
  if (!g->row_split)
    return cg_const_i32(&L->b, 0);
  return cg_muli_c(&L->b, lw_group_warp(L, g), 16 * g->nm);
}

static MlirValue col_base(Lowerer *L, const TileGeom *g) {
  if (g->group_cols)
    return cg_muli_c(&L->b, lw_group(L, g), 8 * g->nn);
  if (!g->col_split)
    return cg_const_i32(&L->b, 0);
  return cg_muli_c(&L->b, L->warp, 8 * g->nn);
}

MlirValue lw_elem_split(Lowerer *L, const TileGeom *g, int axis, int idx, int e,
                        MlirValue *lane, int *c, int *align) {
  /* the warp base is warp x (16 nm rows | 8 nn columns), 0 when not split */
  int step = axis == 0 ? (g->row_split ? 16 * g->nm : 0)
                       : (g->col_split || g->group_cols ? 8 * g->nn : 0);
  *align = step ? step & -step : 1 << 30;
  if (axis == 0) {
    *lane = L->lg;
    *c = idx * 16 + 8 * (e >> 1);
    return row_base(L, g);
  }
  *lane = cg_muli_c(&L->b, L->lq, 2);
  *c = idx * 8 + (e & 1);
  return col_base(L, g);
}

MlirValue lw_elem_row(Lowerer *L, const TileGeom *g, int mi, int e) {
  MlirValue r = cg_addi(&L->b, row_base(L, g), L->lg);
  return cg_addi_c(&L->b, r, mi * 16 + 8 * (e >> 1));
}

MlirValue lw_elem_col(Lowerer *L, const TileGeom *g, int ni, int e) {
  MlirValue c = cg_addi(&L->b, col_base(L, g), cg_muli_c(&L->b, L->lq, 2));
  return cg_addi_c(&L->b, c, ni * 8 + (e & 1));
}

void lw_lane_ids_opaque(Lowerer *L, MlirValue saved[2]) {
  saved[0] = L->lg;
  saved[1] = L->lq;
  MlirValue ids[2] = {L->lg, L->lq};
  cg_ptx(&L->b, "", NULL, "", 0, ids, 2);
  L->lg = ids[0];
  L->lq = ids[1];
}

void lw_lane_ids_restore(Lowerer *L, const MlirValue saved[2]) {
  L->lg = saved[0];
  L->lq = saved[1];
}

/* May an operand of geometry `o` be read at the positions of `r`? */
bool lw_compatible(const TileGeom *o, const TileGeom *r) {
  bool rows = o->cls == TC_ROWV || o->cls == TC_FULL;
  bool cols = o->cls == TC_COLV || o->cls == TC_FULL;
  if (rows && !(r->cls == TC_ROWV || r->cls == TC_FULL))
    return false;
  if (cols && !(r->cls == TC_COLV || r->cls == TC_FULL))
    return false;
  if (rows && (o->nm != r->nm || o->row_split != r->row_split || o->groups != r->groups))
    return false;
  if (cols && (o->nn != r->nn || o->col_split != r->col_split || o->group_cols != r->group_cols))
    return false;
  return true;
}

void lw_a_fragment_regs(Lowerer *L, CgMmaType mt, const CgVal *a, int mi, int kk, MlirValue *out) {
  for (int half = 0; half < 2; half++) {
    int ni = 2 * kk + half;
    out[2 * half] = cg_pack2(&L->b, mt, lw_elem(L, a, TC_FULL, mi, ni, 0),
                             lw_elem(L, a, TC_FULL, mi, ni, 1));
    out[2 * half + 1] = cg_pack2(&L->b, mt, lw_elem(L, a, TC_FULL, mi, ni, 2),
                                 lw_elem(L, a, TC_FULL, mi, ni, 3));
  }
}
