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

static bool fuse_candidate(Op *add, int side) {
  Op *mm = add->operands[side]->def;
  Value *acc = add->operands[1 - side];
  return mm && mm->kind == OP_MATMUL && mm->noperands == 2 && mm->results[0]->nuses == 1 &&
         mm->parent == add->parent && type_eq(acc->type, add->results[0]->type) &&
         type_eq(mm->results[0]->type, add->results[0]->type);
}

/* add acc, (matmul a, b) -> matmul a, b, acc. */
static void fuse_accumulators(Module *m, Func *f) {
  OpList adds = collect_ops(f, OP_ADD);
  for (int i = 0; i < adds.n; i++) {
    Op *add = adds.v[i];
    for (int side = 0; side < 2; side++) {
      if (!fuse_candidate(add, side))
        continue;
      Op *mm = add->operands[side]->def;
      Builder b = builder_before(m, add);
      Value *ops[3] = {mm->operands[0], mm->operands[1], add->operands[1 - side]};
      Op *nm = build_op(&b, OP_MATMUL, ops, 3, &add->results[0]->type, 1, 0);
      attrs_copy(m, &nm->attrs, &mm->attrs);
      nm->results[0]->name = add->results[0]->name;
      value_replace_all_uses(add->results[0], nm->results[0]);
      op_erase(add);
      op_erase(mm);
      break;
    }
  }
  oplist_free(&adds);
}

int pass_partition_warps(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  Scan s = {false};
  func_walk(f, scan_fn, &s);
  if (!s.split_k)
    return 0;
  OpList xr = collect_ops(f, OP_XWARP_REDUCE);
  for (int i = 0; i < xr.n; i++) {
    value_replace_all_uses(xr.v[i]->results[0], xr.v[i]->operands[0]);
    op_erase(xr.v[i]);
  }
  oplist_free(&xr);
  func_map_types(f, to_rows, NULL);
  fuse_accumulators(m, f);
  return 0;
}
