/* mask_interval.h - bounds of a mask over a tile pair, as scalar IR ops
 * (the analysis mask_skip.c classifies tiles with; mask_interval.c).
 *
 * The mask's condition is an elementwise op tree over index tiles (iota +
 * q0, iota + k0), scalars and constants. Every numeric node gets run-time
 * bounds [lo, hi], every boolean node a tri-state (can be true, can be
 * false), emitted as scalar ops at the analysis' builder. Both are
 * over-approximations: "cannot be true" means the tile pair is empty,
 * "cannot be false" that it is full. */
#ifndef FLASHC_PASSES_MASK_INTERVAL_H
#define FLASHC_PASSES_MASK_INTERVAL_H

#include "ir/ir.h"

typedef struct Ival {
  bool known;
  Value *lo, *hi;
} Ival;

typedef struct Tri {
  Value *ct, *cf; /* i1 scalars: can be true, can be false */
} Tri;

typedef struct Memo {
  Value *key;
  Ival iv;
  Tri tr;
  bool is_tri;
} Memo;

typedef struct Ana {
  Module *m;
  Builder b; /* emission point: before the first op the skip will wrap */
  Memo *memo;
  int nmemo, capmemo;
  /* Range mode (the loop-bound search): the analysis is emitted outside
   * `range_loop`, over every step whose induction variable is in range_iv,
   * instead of over the current step. */
  Op *range_loop;
  Ival range_iv;
} Ana;

/* The tri-state of boolean value v over the current tile pair (or, in range
 * mode, every step of the range); emits its scalar ops at a->b, moving the
 * emission point past values of the step it needs (a->b.before). */
Tri mask_tri(Ana *a, Value *v);

/* not x, folded for constants and double negations. */
Value *mask_not(Ana *a, Value *x);

/* A scalar known at compile time (a const, or a cast of one) into *c. */
bool mask_sconst(Value *v, double *c);

#endif
