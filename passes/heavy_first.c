/* heavy_first.c - causal forward kernels: launch the heaviest Q tiles first.
 *
 * With a causal mask (and mask-skip's loop narrowing), Q tile i visits
 * about i + 1 K/V tiles: the work grows with the tile index. The grid runs
 * Q tiles fastest (blockIdx.x, docs/abi.md) and the hardware dispatches
 * blocks roughly in index order, so the last blocks to start are the
 * longest ones and the final wave ends with a few SMs busy on full-length
 * rows while the rest are idle. Reversing the order (longest-processing-time
 * first) leaves only short tiles for the tail.
 *
 * The rewrite: in the innermost parallel loop of a forward kernel with
 * mask = causal, every use of the induction variable %i becomes
 *   %i_rev = (lo + hi - 1) - %i
 * which is a permutation of [lo, hi): the same tiles, computed in another
 * order, bit-identical results. Disable it and the order is the natural one.
 * Only 8-warp schedules (one block per SM: d > 128 on sm_90a) are rewritten;
 * with two blocks per SM the reversal measured flat to slightly slower.
 */
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

/* The innermost parallel loop (one with no parallel loop inside). */
static Op *innermost_parallel(Block *b) {
  for (Op *op = b->first; op; op = op->next) {
    if (op->kind != OP_FOR || !for_is_parallel(op))
      continue;
    Op *inner = innermost_parallel(for_body(op));
    return inner ? inner : op;
  }
  return NULL;
}

int pass_heavy_first(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  const char *mode = attr_str(&f->attrs, "mode", "forward");
  const char *mask = attr_str(&f->attrs, "mask", "none");
  if (strcmp(mode, "forward") != 0 || strcmp(mask, "causal") != 0)
    return 0;
  /* Measured (docs/perf-log.md P05): +3-4% at d256 (8 warps, one block per
   * SM), -1..2% at d128 and flat at d64 (4 warps, two blocks per SM, whose
   * co-resident block already fills the tail). Only one-block-per-SM
   * schedules (8 warps) take it. */
  if (attr_int(&f->attrs, "warps", 4) < 8)
    return 0;
  Op *loop = innermost_parallel(f->body);
  if (!loop || loop->noperands != 2 || loop->nresults != 0)
    return 0;
  Block *body = for_body(loop);
  if (!body->first)
    return 0;
  Value *iv = for_iv(loop);
  if (iv->nuses == 0)
    return 0;
  Builder b = builder_before(m, body->first);
  Value *sum = build_binary(&b, OP_ADD, loop->operands[0], loop->operands[1]);
  Value *last = build_binary(&b, OP_SUB, sum, build_index(&b, 1));
  Op *rev_op = build_op(&b, OP_SUB, (Value *[]){last, last}, 2, &iv->type, 1, 0);
  Value *rev = rev_op->results[0];
  value_replace_all_uses(iv, rev);
  op_set_operand(rev_op, 1, iv);
  return 0;
}
