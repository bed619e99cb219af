/* meta_backward.h - the `backward_auto` key of a module's forward kernel and
 * of its backward kernels: the launch FA_BACKWARD_AUTO runs (docs/backward.md,
 * "Which launch AUTO runs"), written by codegen.c's metadata writer. */
#ifndef FLASHC_META_BACKWARD_H
#define FLASHC_META_BACKWARD_H

#include <stdbool.h>

#include "codegen/cg_lower.h"
#include "ir/ir.h"

/* Is the atomic launch (pre, bwd, post) the one FA_BACKWARD_AUTO runs for
 * the backward of forward kernel `fwd` of module m (info: m's kernels as
 * compiled, in m->funcs' order)? The rule of docs/backward.md, measured in
 * docs/perf-log.md P137; false when fwd has no atomic kernel. */
bool cg_backward_auto_atomic(const Module *m, const CgKernelInfo *info, const char *fwd);

#endif
