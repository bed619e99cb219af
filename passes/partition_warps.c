/* partition_warps.c - split query rows across warps instead of keys (FA2 §3.3).
 *
 * FA1 splits K/V across the warps of a block ("split-K"): S and P are `cols`,
 * every row reduction is `partial` and needs an `xwarp_reduce` through shared
 * memory, and so does P V. When each warp owns tile_q / warps whole query
 * rows, every row statistic and every row of O lives in one warp: no
 * cross-warp traffic at all. The values do not change, only their placement:
 * every `cols` / `partial` tile type becomes `rows`, and each xwarp_reduce is
 * replaced by its operand.
 *
 * Only where each warp can own whole 16-row MMA slices: a decode tile of 16
 * rows with 4 warps cannot be split by rows, and warp-split-kv (next) gives
 * the warps disjoint keys instead.
 *
 * Once P V is no longer a partial sum, `add acc, (matmul P, V)` can carry acc
 * in the MMA accumulator; that fold (what defer-rescale leaves for us when it
 * ran before this pass) is done here.
 */
#include "passes/pass_util.h"
#include "passes/passes.h"

static Type to_rows(Type t, void *ctx) {
  (void)ctx;
  if (t.kind == TYPE_TILE && (t.dist == DIST_COLS || t.dist == DIST_PARTIAL))
    t.dist = DIST_ROWS;
  return t;
}

typedef struct Scan {
  bool split_k;
} Scan;

static void scan_fn(Op *op, void *ctx) {
  Scan *s = ctx;
  if (op->kind == OP_XWARP_REDUCE)
    s->split_k = true;
  for (int i = 0; i < op->nresults; i++) {
    Dist d = op->results[i]->type.kind == TYPE_TILE ? op->results[i]->type.dist : DIST_NONE;
    if (d == DIST_COLS || d == DIST_PARTIAL)
      s->split_k = true;
  }
}

int pass_partition_warps(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  Scan s = {false};
  func_walk(f, scan_fn, &s);
  if (!s.split_k)
    return 0;
  long tile_q = attr_int(&f->attrs, "tile_q", 0), warps = attr_int(&f->attrs, "warps", 1);
  if (tile_q > 0 && tile_q < 16 * warps)
    return 0;
  OpList xr = collect_ops(f, OP_XWARP_REDUCE);
  for (int i = 0; i < xr.n; i++) {
    value_replace_all_uses(xr.v[i]->results[0], xr.v[i]->operands[0]);
    op_erase(xr.v[i]);
  }
  oplist_free(&xr);
  func_map_types(f, to_rows, NULL);
  fuse_matmul_accumulators(m, f);
  return 0;
}
