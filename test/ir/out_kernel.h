/* out_kernel.h - for test programs that compute tiles in the IR and read them
 * back through the interpreter: a kernel @name(%out: f32 [batch, seqlen_q, 1,
 * cols], %batch, %seqlen_q, %seqlen_k), and a run of it that binds out as a
 * rows x cols array (batch 1, head 0). */
#ifndef FLASHC_TEST_OUT_KERNEL_H
#define FLASHC_TEST_OUT_KERNEL_H

#include <stdio.h>

#include "ir/interp.h"

static inline Func *out_kernel(Module *m, const char *name, int cols) {
  int dims[4] = {DIM_BATCH, DIM_SEQLEN_Q, 1, cols};
  Type args[4] = {type_tensor(ELEM_F32, 4, dims), type_index(), type_index(), type_index()};
  const char *names[4] = {"out", "batch", "seqlen_q", "seqlen_k"};
  return func_create(m, name, args, names, 4, (SrcLoc){0});
}

/* Verifies m and runs its kernel f with out = buf (rows x cols); 0 on
 * success, else prints why (prefixed with who) and returns -1. */
static inline int run_out_kernel(const char *who, Module *m, Func *f, double *buf, int rows,
                                 int cols) {
  if (module_verify(m, who, stderr) != 0)
    return -1;
  InterpBinding bind = {"out", buf, {1, rows, 1, cols}, {(int64_t)rows * cols, cols, cols, 1}};
  InterpOptions o;
  interp_options_init(&o);
  char err[256];
  if (interp_run(f, &bind, 1, 1, rows, 1, &o, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", who, err);
    return -1;
  }
  return 0;
}

#endif
