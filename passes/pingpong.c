/* pingpong.c - the `pingpong` pass: the two consumer warpgroups of a
 * warp-specialized forward kernel take turns at the tensor cores, so that
 * one's softmax runs while the other's matmuls do (FlashAttention-3's
 * pingpong scheduling; docs/hopper-pipeline.md §4, §9).
 *
 * Each warpgroup waits for its turn before it issues a step's matmuls and
 * hands the turn on once it has issued them:
 *
 *   before (consumer region)                after
 *   ... = for %j ... {                      mma_turn {action = start}
 *     %kt = ring_get ...                    ... = for %j ... {
 *     %r = if %empty {                        %kt = ring_get ...
 *       %o1 = matmul %pc_prev, %vt_prev, ..   %r = if %empty {
 *     } else {                                  mma_turn {action = wait}
 *       %s = matmul %qt, %kt {async = 1}        %o1 = matmul %pc_prev, %vt_prev, ..
 *       %o_pv = matmul %pc_prev, .. {async}     mma_turn {action = pass}
 *       ... softmax ...                       } else {
 *     }                                         mma_turn {action = wait}
 *   }                                           %s = matmul %qt, %kt {async = 1}
 *                                               %o_pv = matmul %pc_prev, .. {async}
 *                                               mma_turn {action = pass}
 *                                               ... softmax (under the other's matmuls) ...
 *
 * In each block of the step that holds matmuls at its top level, a wait
 * goes before the first and a pass after the last; a block without any
 * gets its branches' pairs (the `if %empty` paths of mask-skip), so that
 * on every path a wait is followed by its pass (the verifier's rule).
 * Both warpgroups take the same path: the conditions are scalars.
 *
 * The pass fires where the spec's schedule says `pingpong = 1`, on kernels
 * with a warp_roles whose consumers are 8 warps (two warpgroups) and whose
 * K/V loop issues matmuls. Off by default: over overlap-softmax's
 * asynchronous step it measured within the noise on the H100, +8-9% at
 * 512 rows and -3% at d128 causal 16k (docs/perf-log.md P72); with the
 * step's matmuls waited for where they are issued the turns only
 * serialize (P68). It runs after overlap-softmax and before pipeline.
 */
#include <stdio.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

static Op *build_turn(Builder *b, const char *action) {
  Op *t = build_op(b, OP_MMA_TURN, NULL, 0, NULL, 0, 0);
  op_set_attr_word(t, "action", action);
  return t;
}

/* The turns of blk: around its own matmuls, else in its branches'. */
static void add_turns(Module *m, Block *blk) {
  Op *first = NULL, *last = NULL;
  for (Op *o = blk->first; o; o = o->next)
    if (o->kind == OP_MATMUL) {
      if (!first)
        first = o;
      last = o;
    }
  if (first) {
    Builder b = builder_before(m, first);
    b.loc = first->loc;
    build_turn(&b, "wait");
    b = builder_after(m, last);
    b.loc = last->loc;
    build_turn(&b, "pass");
    return;
  }
  for (Op *o = blk->first; o; o = o->next)
    if (o->kind == OP_IF)
      for (int i = 0; i < o->nregions; i++)
        if (block_has_op(o->regions[i], OP_MATMUL))
          add_turns(m, o->regions[i]);
}

/* The consumers' K/V loop: the sequential loop at the consumer region's
 * top level that gets ring tiles; NULL when there is none. */
static Op *consumer_loop(Block *consumer) {
  for (Op *o = consumer->first; o; o = o->next)
    if (o->kind == OP_FOR && !for_is_parallel(o) && block_has_op(for_body(o), OP_RING_GET))
      return o;
  return NULL;
}

int pass_pingpong(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  if (attr_int(&f->attrs, "sched_pingpong", 0) != 1 || attr_int(&f->attrs, "warps", 4) != 8 ||
      block_has_op(f->body, OP_MMA_TURN))
    return 0;
  OpList roles = collect_ops(f, OP_WARP_ROLES);
  for (int i = 0; i < roles.n; i++) {
    Block *consumer = roles.v[i]->regions[1];
    Op *loop = consumer_loop(consumer);
    if (!loop || !block_has_op(for_body(loop), OP_MATMUL))
      continue;
    Builder top = builder_before(m, consumer->first);
    top.loc = loop->loc;
    build_turn(&top, "start");
    add_turns(m, for_body(loop));
  }
  oplist_free(&roles);
  return 0;
}
