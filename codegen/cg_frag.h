/* cg_frag.h - layer 0: register fragments (cg_frag.c). */
#ifndef FLASHC_CG_FRAG_H
#define FLASHC_CG_FRAG_H

#include "codegen/cg_lowerer.h"

/* The geometry of a register tile of type t over L's warps; false (an error
 * at op, or a plain one when op is NULL) when the warps cannot hold it. */
bool lw_geom(Lowerer *L, Type t, TileGeom *g, const Op *op);
/* lw_geom without the error: false where t has no geometry over L's warps. */
bool lw_geom_quiet(const Lowerer *L, Type t, TileGeom *g);
int lw_geom_count(const TileGeom *g); /* elements one thread holds */
/* The warp's index within its group (the warp when the tile has no groups)
 * and its group (0), i32. */
MlirValue lw_group_warp(Lowerer *L, const TileGeom *g);
MlirValue lw_group(Lowerer *L, const TileGeom *g);
CgVal *lw_tile(Lowerer *L, Type t, const TileGeom *g); /* elements uninitialized */
CgVal *lw_splat(Lowerer *L, Type t, MlirValue v);
/* The element of operand cv at result position (mi, ni, e) of class rc. */
MlirValue lw_elem(Lowerer *L, const CgVal *cv, TileClass rc, int mi, int ni, int e);
/* Number of result positions and their (mi, ni, e) for a geometry. */
int lw_positions(const TileGeom *g, int *mi, int *ni, int *e);
int lw_index_of(const TileGeom *g, int mi, int ni, int e);
/* Row / column index (i32, within the tile) of element (mi, ni, e). */
MlirValue lw_elem_row(Lowerer *L, const TileGeom *g, int mi, int e);
MlirValue lw_elem_col(Lowerer *L, const TileGeom *g, int ni, int e);
/* The same position along `axis` (0: row of mi = idx, 1: column of ni =
 * idx) in parts: the returned warp base (i32) + *lane (i32: lg, or 2 lq) +
 * the constant *c, lane and c bit-disjoint (lane below 8, c a multiple of 8
 * plus the element's column bit); *align: a power of 2 the warp base is a
 * multiple of. */
MlirValue lw_elem_split(Lowerer *L, const TileGeom *g, int axis, int idx, int e,
                        MlirValue *lane, int *c, int *align);
/* Makes L's lane ids (lg, lq) opaque copies until lw_lane_ids_restore: the
 * addresses derived from them are then made where they are used, not
 * hoisted out of the loops by LLVM into registers of their own (a spilled
 * register each, in kernels that hold large accumulators). */
void lw_lane_ids_opaque(Lowerer *L, MlirValue saved[2]);
void lw_lane_ids_restore(Lowerer *L, const MlirValue saved[2]);
/* May an operand of geometry `o` be read at the positions of `r`? */
bool lw_compatible(const TileGeom *o, const TileGeom *r);
/* The m16n8k16 A fragment (4 packed registers) of m16 tile mi at k step kk
 * of a register tile a (P of P V): two n8 accumulator tiles make one. */
void lw_a_fragment_regs(Lowerer *L, CgMmaType mt, const CgVal *a, int mi, int kk, MlirValue *out);

#endif
