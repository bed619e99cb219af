/* hoist_gathers.c - the `hoist-gathers` pass: a step's gathers of run-time
 * inputs (a bias tile read element by element) are issued above the
 * mma_wait of the asynchronous S matmul, with the index arithmetic they
 * need, so that their loads' latency passes while the tensor cores compute
 * S instead of in front of the softmax (docs/perf-log.md P60 saw the bias
 * row bound by where its loads sit, not by how many there are).
 *
 *   %s = matmul %qt, %kt {async = 1}        %s = matmul %qt, %kt {async = 1}
 *   %o_pv = matmul ... {async = 1}          %o_pv = matmul ... {async = 1}
 *   %s_done = mma_wait %s {pending = 1}     %kc = add %iota1, %k0
 *   ...                                     %bias = gather %in_bias, %b, %h, %qc, %kc
 *   %kc = add %iota1, %k0                   %s_done = mma_wait %s {pending = 1}
 *   %bias = gather %in_bias, %b, %h, %qc, %kc   ...
 *   %x = add %s_done, %bias                 %x = add %s_done, %bias
 *
 * stage-inputs' reads of a staged input tile (a cast of its ring_get to
 * registers) move the same way, with the ring_release that follows them.
 *
 * Moved: a gather at the wait's block level whose operands, followed back
 * through pure region-free ops of that block after the wait, reach only
 * values defined before the wait; the gather and that slice move, in
 * program order, right above the wait. Only at waits for an async matmul
 * issued in the same block (overlap-softmax's step). Values do not change
 * (the interpreter completes a matmul where it is issued).
 */
#include <stdio.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

/* The ops a gather's slice may hold: pure ones and gathers, not a wait. */
static bool gather_slice_op(const Op *o) {
  return o->kind != OP_MMA_WAIT && (o->kind == OP_GATHER || op_is_pure(o));
}

static bool fillable(const Op *wait) {
  const Value *x = wait->operands[0];
  return x->def && x->def->kind == OP_MATMUL && x->def->parent == wait->parent &&
         attr_int(&x->def->attrs, "async", 0) == 1;
}

/* Is o stage-inputs' read of a staged input tile (a cast of a ring_get)?
 * It moves like a gather, with the ring_release right after it. */
static bool staged_read(const Op *o) {
  return o->kind == OP_CAST && o->operands[0]->def && o->operands[0]->def->kind == OP_RING_GET;
}

/* The release of the slot staged read o copied, when it follows o. */
static Op *release_after(Op *o) {
  const Op *get = o->operands[0]->def;
  Op *r = o->next;
  return r && r->kind == OP_RING_RELEASE && r->operands[0] == get->operands[0] &&
                 r->operands[1] == get->operands[1]
             ? r
             : NULL;
}

static void hoist(Op *wait) {
  Block *b = wait->parent;
  OpList mark = {0};
  for (Op *o = wait->next; o; o = o->next) {
    if (o->kind != OP_GATHER && !staged_read(o))
      continue;
    int n0 = mark.n;
    bool ok = true;
    for (int i = 0; ok && i < o->noperands; i++)
      ok = slice_after(o->operands[i], b, wait, gather_slice_op, &mark);
    if (ok) {
      oplist_push(&mark, o);
      Op *rel = staged_read(o) ? release_after(o) : NULL;
      if (rel)
        oplist_push(&mark, rel);
    } else {
      mark.n = n0; /* this gather stays, with what only it needed */
    }
  }
  /* in program order, so every moved op's operands are above it */
  move_marked_before(&mark, wait);
  oplist_free(&mark);
}

int pass_hoist_gathers(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)m;
  (void)opts;
  (void)diag;
  OpList waits = collect_ops(f, OP_MMA_WAIT);
  for (int i = 0; i < waits.n; i++)
    if (fillable(waits.v[i]))
      hoist(waits.v[i]);
  oplist_free(&waits);
  return 0;
}
