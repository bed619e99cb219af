/* kinds.h - layer 4: the kernel kinds (one file each, kind_*.c), which
 * kinds.c offers the walker. */
#ifndef FLASHC_KINDS_H
#define FLASHC_KINDS_H

#include "codegen/walk.h"

extern const LwKind lw_kind_forward; /* kind_forward.c */
extern const LwKind lw_kind_decode;  /* kind_decode.c */
extern const LwKind lw_kind_combine; /* kind_combine.c */
extern const LwKind lw_kind_blocks;  /* kind_blocks.c: block-list classifiers */
/* kind_backward.c: the roles of a backward (docs/backward.md) */
extern const LwKind lw_kind_backward_pre, lw_kind_backward_main, lw_kind_backward_post,
    lw_kind_backward_q;

#endif
