/* mem_lanes.c - layer 1: which row vectors are held across the warp's
 * lanes (cg_lowerer.h CgVal.lanes). The backward's K/V-outer kernels read
 * each Q step's LSE and delta along the columns of S^T: 16 + 16 registers a
 * thread in the accumulator layout at 64 columns, 2 + 2 held so
 * (FlashAttention-3's shuffled statistics; docs/perf-log.md P140). The
 * loads themselves are mem_global.c's, the shuffles at each use cg_frag.c's
 * (lw_elem), the slot-wise elementwise ops compute_elementwise.c's and the
 * loop carries walk.c's; this file decides, from the IR alone, where the
 * compact form may go.
 */
#include "codegen/mem.h"

/* The values lane_holdable has met (a carry's cycle meets its own). */
typedef struct Seen {
  const Value *v[32];
  int n;
  bool carry; /* loop carries allowed (L->lane_carry) */
} Seen;

static bool lane_holdable_in(const Value *v, Seen *seen);

/* A load whose result can be lane-held by its type: a 1 x C f32 row vector,
 * C a multiple of 64, not split by columns, along a rank 3 f32 tensor. */
static bool lane_load(const Value *v) {
  const Op *d = v ? v->def : NULL;
  if (!d || d->kind != OP_LOAD || d->nresults != 1)
    return false;
  Type t = v->type, src = d->operands[0]->type;
  return t.kind == TYPE_TILE && t.rows == 1 && t.cols % 64 == 0 && t.elem == ELEM_F32 &&
         t.dist != DIST_COLS && src.rank == 3 && src.elem == ELEM_F32;
}

/* Carry k of loop `loop` (software_pipeline.c's vector carry: the row
 * vector loaded a step ahead): its init and its yield both lane loads
 * whose other uses hold it, and the body's argument and the loop's result
 * held so too. */
static bool lane_carry(const Op *loop, int k, Seen *seen) {
  Block *body = loop->regions[0];
  const Op *y = block_terminator(body);
  if (!y || y->kind != OP_YIELD || k >= y->noperands || 1 + k >= body->nargs)
    return false;
  const Value *init = loop->operands[2 + k], *next = y->operands[k];
  return lane_load(init) && lane_load(next) && lane_holdable_in(init, seen) &&
         lane_holdable_in(next, seen) && lane_holdable_in(body->args[1 + k], seen) &&
         lane_holdable_in(loop->results[k], seen);
}

static bool lane_holdable_in(const Value *v, Seen *seen) {
  for (int i = 0; i < seen->n; i++)
    if (seen->v[i] == v)
      return true; /* being checked further up */
  if (seen->n == 32)
    return false;
  seen->v[seen->n++] = v;
  for (int u = 0; u < v->nuses; u++) {
    const Op *user = v->uses[u].user;
    int at = v->uses[u].index;
    if (user->kind == OP_FOR && at >= 2 && seen->carry) {
      if (!lane_carry(user, at - 2, seen))
        return false;
      continue;
    }
    if (user->kind == OP_YIELD && seen->carry && user->parent->parent_op &&
        user->parent->parent_op->kind == OP_FOR) {
      if (!lane_carry(user->parent->parent_op, at, seen))
        return false;
      continue;
    }
    bool elementwise = (user->kind >= OP_ADD && user->kind <= OP_NOT) ||
                       user->kind == OP_SELECT || user->kind == OP_MASK;
    if (!elementwise || user->nresults != 1)
      return false;
    const Value *r = user->results[0];
    if (r->type.kind == TYPE_TILE && r->type.rows == 1 && r->type.cols > 1 &&
        !lane_holdable_in(r, seen))
      return false;
  }
  return true;
}

/* Can v, a row vector, be held across the lanes (cg_lowerer.h CgVal.lanes)?
 * Every use is an elementwise op of warp-uniform control flow whose other
 * operands come as they may (lw_elem shuffles the values a use in the
 * accumulator layout needs), and every row vector such an op makes is so
 * too, or (carry: L->lane_carry) a sequential loop's carry whose both ends
 * are such loads (d64's software pipeline loads the vectors a step ahead:
 * walk.c carries the lane values): no if, store or reduction sees the
 * compact form. */
static bool lane_holdable(const Value *v, bool carry) {
  Seen seen = {.n = 0, .carry = carry};
  return lane_holdable_in(v, &seen);
}

bool lw_lane_held_load(const Lowerer *L, const Value *v) {
  return L->lane_vectors && lane_load(v) && lane_holdable(v, L->lane_carry);
}
