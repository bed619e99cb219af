/* srcloc.h - a position in a source file, for diagnostics.
 *
 * Below every stage (base/ is layer 0, docs/layers.md): the frontend stamps
 * spec positions on the checked spec, the tile IR keeps them on its ops and
 * kernels (the IR parser its own .tile positions), codegen reports them.
 */
#ifndef FLASHC_BASE_SRCLOC_H
#define FLASHC_BASE_SRCLOC_H

/* line and col count from 1; a zeroed SrcLoc means "no position". */
typedef struct SrcLoc {
  const char *file;
  int line, col;
} SrcLoc;

#endif
