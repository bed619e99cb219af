/* lower.h - the old name of emit_tile.h, kept only for runtime/jit.c, which
 * moves to jit/ (issue 16): include frontend/emit_tile.h and call
 * emit_tile_kernel there, then delete this file. */
#ifndef FLASHC_LOWER_H
#define FLASHC_LOWER_H

#include "frontend/emit_tile.h"

static inline Func *lower_kernel(Module *m, const KernelSpec *k, const char *target, FILE *diag) {
  return emit_tile_kernel(m, k, target, diag);
}

#endif
