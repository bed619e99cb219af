/* group_dq.c - the `group-dq` pass: the atomic backward's dQ = dS K over a
 * K/V tile wider than the warps can split a Q tile's rows for.
 *
 * The K/V-outer kernel with dQ (NAME_bwd, role main) holds its K/V tile's
 * keys split over the warps (16 rows a warp) and adds each Q tile's
 * dQ = dS K into the f32 dq_acc. Tiled at 128 keys over 8 warps with 64-row
 * Q tiles (the tiling pass's choice at d128 while this pass is on), dQ's
 * 64 rows cannot be split over 8 warps: the warps form groups of
 * 64 / 16 = 4 (a warpgroup), and dQ's columns are split between the groups
 * (group_cols) where a group's share is whole 64-column blocks (wgmma's N-major B; d128: 64 a
 * warpgroup): the column chunks the backward emits become one matmul over
 * all of them, each group multiplies all 128 keys for its own columns and
 * adds them; no sum, and the L2 adds dQ once per 128 keys instead of once
 * per 64 (the atomic kernel's bound, docs/perf-log.md P79; H100 d128
 * +6-18%, P94):
 *
 *   %dqp = matmul %dsc, %kt {transpose_a = 1, b_col0 = 0}  : tile<64x64xf32, rows>
 *   store %dq_acc, ..., %dqp {reduce = add}
 *   %dqp1 = matmul %dsc, %kt {transpose_a = 1, b_col0 = 64} : tile<64x64xf32, rows>
 *   store %dq_acc, ..., %dqp1 {col0 = 64, reduce = add}
 * becomes
 *   %dqp = matmul %dsc, %kt {transpose_a = 1} : tile<64x128xf32, group_cols>
 *   store %dq_acc, ..., %dqp {reduce = add}
 *
 * (Splitting dQ's K, the keys, between the groups and summing their parts
 * in shared memory lost to 64-key tiles, P90: branch exp-group-dq.)
 *
 * The value is the same (the interpreter ignores placement). Fires on
 * backward kernels whose Q tile has fewer rows than 16 x warps (tiling
 * makes them for main at d128 only), for each matmul with transpose_a
 * whose result has the Q tile's rows; one that is not only added into
 * memory, or whose columns do not split so, is refused with a reason.
 * Disabled, tiling keeps main on 64-key tiles and 4 warps.
 */
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

/* The single store {reduce = add} reading v, or NULL. */
static Op *sole_add(const Value *v) {
  if (v->nuses != 1)
    return NULL;
  Op *st = v->uses[0].user;
  return st->kind == OP_STORE && v->uses[0].index == 4 && attr_get(&st->attrs, "reduce") ? st : NULL;
}

/* The column split: where dQ's column chunks (add_dq in emit_backward.c:
 * matmuls of one A and B with b_col0 windows, each added by a store with
 * col0) cover B's columns and a group's share of them is whole 64-column
 * blocks (wgmma's N-major B), one matmul over all the columns replaces
 * them, split by columns between the groups (group_cols): no sum, each
 * group adds its own columns. mm is the first chunk; returns whether it
 * merged. */
static bool split_columns(Module *m, Op *mm, int groups) {
  Value *a = mm->operands[0], *b = mm->operands[1];
  int width = b->type.cols, chunk = mm->results[0]->type.cols;
  if (width % (64 * groups) || width % chunk)
    return false;
  Op *chunks[8], *stores[8];
  int n = 0;
  for (Op *o = mm; o && n < 8; o = o->next) {
    if (o->kind != OP_MATMUL)
      continue;
    if (o->operands[0] != a || o->operands[1] != b || o->noperands != 2 ||
        attr_int(&o->attrs, "b_col0", 0) != n * chunk || !(stores[n] = sole_add(o->results[0])) ||
        attr_int(&stores[n]->attrs, "col0", 0) != n * chunk)
      break;
    chunks[n++] = o;
  }
  if (n * chunk != width)
    return false;
  Builder bl = builder_before(m, chunks[0]);
  bl.loc = chunks[0]->loc;
  Type t = chunks[0]->results[0]->type;
  t.cols = width;
  t.dist = DIST_GROUP_COLS;
  Op *whole = build_op(&bl, OP_MATMUL, (Value *[]){a, b}, 2, &t, 1, 0);
  attr_set_int(m, &whole->attrs, "transpose_a", 1);
  whole->results[0]->name = chunks[0]->results[0]->name;
  Value *ops[5];
  for (int i = 0; i < 4; i++)
    ops[i] = stores[0]->operands[i];
  ops[4] = whole->results[0];
  Builder sb = builder_after(m, stores[n - 1]);
  sb.loc = stores[0]->loc;
  Op *st = build_op(&sb, OP_STORE, ops, 5, NULL, 0, 0);
  attr_set_word(m, &st->attrs, "reduce", "add");
  for (int i = 0; i < n; i++) {
    op_erase(stores[i]);
    op_erase(chunks[i]);
  }
  return true;
}

int pass_group_dq(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  if (!pass_rows_grouped(f))
    return 0;
  int rows = (int)attr_int(&f->attrs, "tile_q", 0), warps = (int)attr_int(&f->attrs, "warps", 4);
  OpList mms = collect_ops(f, OP_MATMUL);
  int failed = 0;
  for (int i = 0; i < mms.n; i++) {
    Op *mm = mms.v[i];
    Value *r = mm->results[0];
    if (!attr_int(&mm->attrs, "transpose_a", 0) || r->type.rows != rows ||
        r->type.dist != DIST_ROWS)
      continue;
    if (mm->noperands != 2 || attr_int(&mm->attrs, "transpose_b", 0) || !sole_add(r)) {
      pass_error(diag, f, "group-dq: a product of %d rows over %d warps that is not only added "
                 "into memory", rows, warps);
      failed = 1;
      break;
    }
    int groups = warps / (rows / 16);
    if (attr_int(&mm->attrs, "b_col0", 0) != 0 || !split_columns(m, mm, groups)) {
      pass_error(diag, f, "group-dq: dQ's %d columns do not split into whole 64-column blocks "
                 "between %d warpgroups", mm->operands[1]->type.cols, groups);
      failed = 1;
      break;
    }
    /* the later chunks are gone: the list holds erased ops past here */
    oplist_free(&mms);
    mms = collect_ops(f, OP_MATMUL);
    i = -1;
  }
  oplist_free(&mms);
  return failed;
}
