/* tiles_first.c - the causal atomic backward: the heaviest K/V tiles of
 * every head and batch first.
 *
 * A causal K/V-outer kernel's blocks do unequal work: K/V tile j visits
 * the Q tiles from its diagonal on, about n - j of them. The grid is the
 * parallel nest batch, head, tile (blockIdx z, y, x; the tile fastest), and
 * the hardware dispatches blocks roughly in that linear order, so each
 * head's heavy tiles start one head after the other: the last head's
 * heaviest block starts in the final wave and runs on alone while the
 * other SMs idle (one block an SM: by a list schedule of 132 SMs, 6% of
 * the causal 8k backward, 11% with GQA 32/8, whose blocks walk four query
 * heads each).
 *
 * The rewrite takes the block's linear index in dispatch order,
 *   %lin = (%b * H + %h) * N + %j          (N tiles, H heads, B batches)
 * and maps it back with the tile slowest:
 *   %j' = %lin / (B * H),  %h' = %lin % (B * H) % H,  %b' = %lin % (B * H) / H
 * a permutation of the grid: every block computes another (b, h, j) of the
 * same set, so the K/V tiles with the most steps start first across all
 * heads and batches and the lightest are left for the tail. dQ's atomic
 * sums run in another order, as they do from run to run; dK and dV are
 * bit-identical. Disable it and the order is the natural one.
 *
 * Taken only where the nest is three parallel loops from 0 without
 * results, the inner two with bounds (and ops before them) that do not
 * read the outer ivs.
 * Not varlen kernels: codegen finds a block's sequence from blockIdx.z
 * itself (codegen/mem_varlen.c).
 */
#include <stdio.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

/* Does v depend on any of the n values of ivs (through pure ops)? */
static bool depends_on(Value *v, Value *const *ivs, int n) {
  for (int i = 0; i < n; i++)
    if (v == ivs[i])
      return true;
  if (!v->def)
    return false;
  for (int k = 0; k < v->def->noperands; k++)
    if (depends_on(v->def->operands[k], ivs, n))
      return true;
  return false;
}

/* The single parallel loop of block blk, after ops without regions that
 * read none of ivs (or NULL). */
static Op *nested_parallel(Block *blk, Value *const *ivs, int n) {
  Op *loop = NULL;
  for (Op *op = blk->first; op; op = op->next) {
    if (op->kind == OP_FOR) {
      if (loop || !for_is_parallel(op))
        return NULL;
      loop = op;
      continue;
    }
    if (op->kind == OP_YIELD)
      continue;
    if (loop || op->nregions)
      return NULL; /* an op after the loop, or one with regions */
    for (int k = 0; k < op->noperands; k++)
      if (depends_on(op->operands[k], ivs, n))
        return NULL;
  }
  return loop;
}

/* A parallel loop from the constant 0 with no results. */
static bool grid_loop(Op *loop) {
  double lo;
  return loop && loop->noperands == 2 && loop->nresults == 0 &&
         value_const(loop->operands[0], &lo) && lo == 0;
}

/* The atomic launch's K/V-outer kernel, causal, one block an SM (8 warps).
 * H200, docs/perf-log.md P143: its d128 launch 2.6% faster (MHA), 7.4%
 * (GQA 32/8), d256 1.8%; the deterministic launch's kernels (two blocks an
 * SM at d64 and d128: the co-resident block fills the tail already; d256's
 * bwd_kv and bwd_q) 0-5% slower, and the four-warp d64 main 2%, so they
 * keep the natural order. */
static bool causal_backward_main(const Func *f) {
  return strcmp(attr_str(&f->attrs, "mode", "forward"), "backward") == 0 &&
         strcmp(attr_str(&f->attrs, "role", ""), "main") == 0 &&
         strcmp(attr_str(&f->attrs, "mask", "none"), "causal") == 0 &&
         strcmp(attr_str(&f->attrs, "layout", "padded"), "varlen") != 0 &&
         attr_int(&f->attrs, "warps", 4) >= 8;
}

int pass_tiles_first(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  if (!causal_backward_main(f))
    return 0;
  Op *lb = NULL;
  for (Op *op = f->body->first; op; op = op->next)
    if (op->kind == OP_FOR) {
      lb = op;
      break;
    }
  if (!grid_loop(lb) || !for_is_parallel(lb))
    return 0;
  Value *ivs[2] = {for_iv(lb), NULL};
  Op *lh = nested_parallel(for_body(lb), ivs, 1);
  if (!grid_loop(lh) || depends_on(lh->operands[1], ivs, 1))
    return 0;
  ivs[1] = for_iv(lh);
  Op *lt = nested_parallel(for_body(lh), ivs, 2);
  if (!grid_loop(lt) || depends_on(lt->operands[1], ivs, 2))
    return 0;
  Block *body = for_body(lt);
  Value *b = ivs[0], *h = ivs[1], *t = for_iv(lt);
  if (!body->first || (b->nuses == 0 && h->nuses == 0 && t->nuses == 0))
    return 0;
  Value *nb = lb->operands[1], *nh = lh->operands[1], *nt = lt->operands[1];
  Builder bd = builder_before(m, body->first);
  /* The ops that read the ivs take a placeholder (nh) first, since every
   * use of the ivs is replaced below, theirs included; then the ivs. */
  Op *bh_op = build_op(&bd, OP_MUL, (Value *[]){nh, nh}, 2, &b->type, 1, 0);
  Op *row_op = build_op(&bd, OP_ADD, (Value *[]){bh_op->results[0], nh}, 2, &b->type, 1, 0);
  Value *lin_row = build_binary(&bd, OP_MUL, row_op->results[0], nt);
  Op *lin_op = build_op(&bd, OP_ADD, (Value *[]){lin_row, nh}, 2, &b->type, 1, 0);
  Value *lin = lin_op->results[0];
  Value *heads = build_binary(&bd, OP_MUL, nb, nh);
  Value *tile = build_binary(&bd, OP_DIV, lin, heads);
  Value *which = build_binary(&bd, OP_REM, lin, heads);
  Value *head = build_binary(&bd, OP_REM, which, nh);
  Value *batch = build_binary(&bd, OP_DIV, which, nh);
  /* The permuted values take the ivs' names (what the body reads); the
   * ivs, now only the dispatch order's, take `_grid`. */
  Value *iv[3] = {b, h, t}, *now[3] = {batch, head, tile};
  for (int i = 0; i < 3; i++)
    if (iv[i]->name) {
      char name[64];
      snprintf(name, sizeof name, "%s_grid", iv[i]->name);
      now[i]->name = iv[i]->name;
      iv[i]->name = module_strdup(m, name);
    }
  value_replace_all_uses(b, batch);
  value_replace_all_uses(h, head);
  value_replace_all_uses(t, tile);
  op_set_operand(bh_op, 0, b);
  op_set_operand(row_op, 1, h);
  op_set_operand(lin_op, 1, t);
  return 0;
}
