/* software_pipeline.c - the `pipeline` pass: software-pipelines the K/V loop
 * with the `stages` the tiling pass chose (modulo scheduling in SSA).
 *
 * In the FA2 schedule each K/V step loads its K and V tiles and uses them at
 * once, so the copy's latency sits in front of the first matmul. With
 * stages >= 2 the loop is rewritten so that the first staged tile (K: the
 * first matmul's operand) of step j+1 is loaded during step j:
 *
 *   %kt_pro = load %k, ..., (mul %lo, %bc)            prologue: the first tile
 *   %r:N+1 = for %j = %lo to %hi sequential iter_args(..., %kt_cur = %kt_pro)
 *       attributes {pipelined = 2} {
 *     %vt = load %v, ..., (mul %j, %bc)               other staged tiles: hoisted
 *     %kt_next = load %k, ..., (mul (add %j, 1), %bc) {prefetch = 1}
 *     ... uses of the old K load use %kt_cur ...
 *     yield ..., %kt_next
 *   }
 *
 * Staged tiles are loads of f16/bf16 tiles with no distribution (codegen
 * stages them in shared memory for the tensor cores). All staged loads of the
 * step move to the top of the loop body, out of mask-skip's `if %empty`
 * (loads have no side effects and rows past the sequence read 0), so codegen
 * issues every copy before the step's compute: the hoisted ones (V) overlap
 * the first matmul and the softmax, the carried one (K) the whole step. The
 * last step loads one tile past the loop's end: rows past the sequence read
 * 0 and the value is never used.
 *
 * With two or more warpgroups on their own rows (8+ warps, sm_90a), and in
 * the deterministic backward's kernels on wgmma up to head dim 96 (see
 * pass_software_pipeline for which), every staged tile is carried this way (V
 * too: %vt_pro / %vt_cur / %vt_next; the backward's dO), and codegen waits
 * for all of them at the top of the step, so the step has one barrier and
 * the next tiles' copies come after it (see pass_software_pipeline).
 *
 * With stages = S > 2 every staged tile is carried S - 1 steps ahead: the
 * prologue loads the tiles of steps lo .. lo+S-2 (%kt_pro, %vt_pro, then
 * %kt_pro1, %vt_pro1, ...: the order the steps issue them in), the body
 * loads step j+S-1's {prefetch = S-1}, and each tile becomes S - 1 body
 * arguments (%kt_cur, %kt_cur1, ...) that the yield shifts down by one:
 *
 *   for %j ... iter_args(..., %kt_cur = %kt_pro, %kt_cur1 = %kt_pro1, ...)
 *     %kt_next = load %k, ..., (mul (add %j, 2), %bc) {prefetch = 2}
 *     ... uses of K use %kt_cur ...
 *     yield ..., %kt_cur1, %kt_next, ...
 *
 * (A tile issued in the step that uses it would wait for its whole copy
 * there, whatever the depth of the others, so at S > 2 none is hoisted.)
 *
 * Register vectors (a load of a 1 x C or R x 1 register tile: the
 * backward's per-query LSE and D in the K/V-outer kernels) are carried one
 * step ahead whatever S is, as %lse_t_cur / %lse_t_next: read from global
 * memory into registers, such a load's latency otherwise sits between the
 * S^T matmul and the softmax of every step (H100, docs/perf-log.md P36:
 * backward +1-6%). Only where the loop's own register tiles leave room:
 * below VECTOR_CARRY_MAX_BYTES a thread (d64's dK and dV); at d128 and up
 * the carried copies made the K/V-outer kernels spill (GQA 150-180 B) and
 * not carrying them measured +4-12% there, flat at d256 full (P42).
 *
 * A load the step only needs where mask-skip's `if %empty` does not skip
 * it is prefetched (or hoisted) with that test where a part of it is
 * rebuildable from scalars and reads a run-time input (a block table's
 * point reads): a skipped step's copy names the row past the tensor's end,
 * {skip_past = 1}, and codegen issues no copy for it (see skip_prefetch).
 *
 * The pass fires on a sequential loop with no loop inside whose staged loads
 * take their operands from values defined outside the loop, the induction
 * variable and pure scalar ops of those. It does nothing with stages < 2, on
 * a loop already pipelined, or when no staged load qualifies. The loop may
 * be run fewer than S - 1 times: the prologue's extra tiles are then unused
 * (rows past the sequence read 0).
 *
 * Codegen (lower.c) keeps a tile carried S - 1 steps ahead in S shared-memory
 * buffers (the body arguments are buffer offsets chosen at run time; the
 * next copy goes into the one no argument holds) and waits for its cp.async
 * group only at its first use, or at the top of the step when every staged
 * tile is carried.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

/* ---- prefetches of steps the loop skips ----------------------------------
 *
 * mask-skip wraps a step's work in `if %empty { state } else { work }`, so
 * the tiles its loads read are only needed where %empty is false. Where a
 * part of %empty (a disjunct of its `or`s) is computed by scalar ops from
 * the induction variable and values from outside (the mask's interval
 * analysis with a block table's point reads), the prefetch of step j' asks
 * it at j': when it holds, step j' is skipped, and the copy names a row past
 * the tensor's end (its extent, the kernel's %seqlen_k / %seqlen_q), which
 * codegen does not copy at all (Rows.skip_when_past). A block-sparse
 * layout's empty steps then cost no K/V traffic. */

/* Ops of blk compute scalars only (an if of mask-skip's point reads). */
static bool scalar_block(const Block *blk, int depth) {
  for (const Op *o = blk->first; o; o = o->next) {
    if (o->kind == OP_YIELD)
      continue;
    if (depth > 8 || (!op_is_pure(o) && o->kind != OP_IF))
      return false;
    for (int r = 0; r < o->nresults; r++)
      if (o->results[r]->type.kind != TYPE_SCALAR)
        return false;
    for (int r = 0; r < o->nregions; r++)
      if (!scalar_block(o->regions[r], depth + 1))
        return false;
  }
  return true;
}

static bool test_rebuildable(Value *v, Op *loop, int depth);

/* The values block blk's ops read from the loop's body (outside blk) are
 * rebuildable. */
static bool region_reads_ok(Block *blk, Op *loop, int depth) {
  for (Op *o = blk->first; o; o = o->next) {
    for (int i = 0; i < o->noperands; i++) {
      Value *v = o->operands[i];
      bool inside = v->def ? v->def->parent == blk : v->block == blk;
      if (!inside && !test_rebuildable(v, loop, depth + 1))
        return false;
    }
    for (int r = 0; r < o->nregions; r++)
      if (!region_reads_ok(o->regions[r], loop, depth + 1))
        return false;
  }
  return true;
}

/* As rebuildable, and through scalar ifs (their regions' reads too). */
static bool test_rebuildable(Value *v, Op *loop, int depth) {
  if (depth > 48)
    return false;
  if (value_defined_outside(v, loop) || v == for_iv(loop))
    return true;
  Op *d = v->def;
  if (!d || d->parent != for_body(loop) || v->type.kind != TYPE_SCALAR)
    return false;
  if (d->nregions) {
    if (d->kind != OP_IF)
      return false;
    for (int r = 0; r < d->nregions; r++)
      if (!scalar_block(d->regions[r], 0) || !region_reads_ok(d->regions[r], loop, depth))
        return false;
  } else if (!op_is_pure(d) || d->kind == OP_LOAD || d->kind == OP_LOAD_PAGED) {
    return false;
  }
  for (int i = 0; i < d->noperands; i++)
    if (!test_rebuildable(d->operands[i], loop, depth + 1))
      return false;
  return true;
}

/* The rebuildable disjuncts of e (through its `or`s) into out. */
static void skip_parts(Value *e, Op *loop, OpList *out, int depth) {
  Op *d = e->def;
  if (depth < 16 && d && d->kind == OP_OR && d->parent == for_body(loop)) {
    skip_parts(d->operands[0], loop, out, depth + 1);
    skip_parts(d->operands[1], loop, out, depth + 1);
  } else if (d && test_rebuildable(e, loop, 0) && !value_defined_outside(e, loop)) {
    oplist_push(out, d); /* its result e: d's only result (pure ops, ifs of one) */
  }
}

/* The `if %empty` directly in the loop's body whose `else` holds load ld,
 * or NULL. */
static Op *skip_wrap(Op *loop, Op *ld) {
  Block *in = ld->parent;
  Op *wrap = in ? in->parent_op : NULL;
  if (wrap && wrap->kind == OP_IF && wrap->parent == for_body(loop) && wrap->nregions == 2 &&
      wrap->regions[1] == in)
    return wrap;
  return NULL;
}

/* The kernel's index argument named `name`, or NULL. */
static Value *func_arg_named(Func *f, const char *name) {
  for (int i = 0; i < f->nargs; i++)
    if (f->args[i]->name && strcmp(f->args[i]->name, name) == 0 &&
        f->args[i]->type.kind == TYPE_SCALAR)
      return f->args[i];
  return NULL;
}

/* Does v's computation read a run-time input (a gather, maybe inside the
 * regions of an if of point reads)? */
static bool reads_input(Value *v, int depth) {
  Op *d = v->def;
  if (!d || depth > 64)
    return false;
  if (d->kind == OP_GATHER)
    return true;
  for (int r = 0; r < d->nregions; r++)
    for (Op *o = d->regions[r]->first; o; o = o->next)
      for (int i = 0; i < o->nresults; i++)
        if (reads_input(o->results[i], depth + 1))
          return true;
  for (int i = 0; i < d->noperands; i++)
    if (reads_input(d->operands[i], depth + 1))
      return true;
  return false;
}

/* The skip test of one `if %empty` at step iv, made once for the loads it
 * wraps (K and V share it). */
typedef struct SkipTest {
  Op *wrap;
  Value *skip; /* NULL: no rebuildable part */
} SkipTest;

/* The cloned prefetch `next` (a slice load: tensor, b, h, row0) of load ld
 * names a row past its tensor's end where ld's step iv is skipped. */
static void skip_prefetch(Module *m, Op *loop, Op *ld, Op *next, Value *iv, SkipTest *st) {
  const Value *t = next->operands[0];
  Func *f = op_func(loop);
  Op *wrap = skip_wrap(loop, ld);
  if (!wrap || next->kind != OP_LOAD || next->noperands != 4 || t->type.rank != 4)
    return;
  int d = t->type.dims[1];
  Value *extent = func_arg_named(f, d == DIM_SEQLEN_K ? "seqlen_k"
                                       : d == DIM_SEQLEN_Q ? "seqlen_q" : "");
  if (!extent)
    return;
  Builder b = builder_before(m, next); /* the test, then the row, before the copy */
  b.loc = next->loc;
  if (st->wrap != wrap) {
    OpList parts = {0};
    skip_parts(wrap->operands[0], loop, &parts, 0);
    /* Only a test that reads an input (a block table): an affine mask's
     * empty steps are cut from the loop's bounds already (mask-skip), so
     * its test would cost every step and skip none. */
    bool any_input = false;
    for (int i = 0; i < parts.n; i++)
      any_input |= reads_input(parts.v[i]->results[0], 0);
    if (!any_input)
      parts.n = 0;
    ValueMap map = {0};
    st->wrap = wrap;
    st->skip = NULL;
    for (int i = 0; i < parts.n; i++) {
      Value *p = loop_rebuild(&b, parts.v[i]->results[0], loop, iv, &map);
      st->skip = st->skip ? build_binary(&b, OP_OR, st->skip, p) : p;
    }
    oplist_free(&parts);
  }
  if (!st->skip)
    return;
  Value *row = build_select(&b, st->skip, extent, next->operands[3]);
  row->name = "row_or_past";
  op_set_operand(next, 3, row);
  op_set_attr_int(next, "skip_past", 1);
}

/* A register load of a row or column vector (the backward's per-query LSE
 * and D beside a K/V-outer kernel's S^T): a few words a thread, read from
 * global memory at the point of use, so its latency sits in front of the
 * softmax unless the load is issued a step earlier. */
static bool is_vector_load(const Op *op) {
  if (op->kind != OP_LOAD || op->nresults != 1)
    return false;
  Type t = op->results[0]->type;
  return t.kind == TYPE_TILE && t.dist != DIST_NONE && (t.rows == 1 || t.cols == 1);
}

typedef struct Scan {
  Op *loop;
  OpList loads, vectors;
  bool nested_loop;
} Scan;

static void scan_block(Scan *s, Block *blk) {
  for (Op *o = blk->first; o; o = o->next) {
    if (o->kind == OP_FOR) {
      s->nested_loop = true;
      return;
    }
    /* {prefetch}: already a tile for the next step (overlap-softmax's V) */
    if (op_is_staged_load(o) && !attr_get(&o->attrs, "prefetch"))
      oplist_push(&s->loads, o);
    if (is_vector_load(o))
      oplist_push(&s->vectors, o);
    for (int r = 0; r < o->nregions; r++)
      scan_block(s, o->regions[r]);
  }
}

static bool stored_fn_hit;
static const Value *stored_fn_tensor;
static void stored_fn(Op *op, void *ctx) {
  (void)ctx;
  if (op->kind == OP_STORE && op->noperands > 0 && op->operands[0] == stored_fn_tensor)
    stored_fn_hit = true;
}

/* Loads of a tensor the kernel also writes may not move. */
static bool tensor_stored(Func *f, const Value *t) {
  stored_fn_hit = false;
  stored_fn_tensor = t;
  func_walk(f, stored_fn, NULL);
  return stored_fn_hit;
}

static void loops_fn(Op *op, void *ctx) {
  if (op->kind == OP_FOR && !for_is_parallel(op))
    oplist_push(ctx, op);
}

/* name + suffix (+ position when > 0), in the module's memory. */
static const char *suffixed(Module *m, const char *name, const char *suffix, int pos) {
  if (!name)
    return NULL;
  size_t n = strlen(name) + strlen(suffix) + 16;
  char *r = module_alloc(m, n);
  if (pos > 0)
    snprintf(r, n, "%s%s%d", name, suffix, pos);
  else
    snprintf(r, n, "%s%s", name, suffix);
  return r;
}

/* Makes the loop carry the staged loads `carried` `depth` steps ahead: the
 * tiles of steps lo .. lo+depth-1 loaded before the loop (prologue: every
 * load's first tile, then every load's second, ... the order the steps
 * issue them in), the tile of step j+depth loaded at `top` (after the
 * hoisted loads) and yielded. Each load becomes `depth` body arguments,
 * this step's tile (`_cur`) and the ones after it (`_cur1` ...), which the
 * yield shifts down by one. */
static void carry_loads(Module *m, Op *loop, OpList *carried, int depth, Op *top, Op *term,
                        bool skip_prefetches) {
  Block *body = for_body(loop);
  Value *pro[4][16];
  for (int p = 0; p < depth; p++)
    for (int i = 0; i < carried->n; i++) {
      Op *ld = carried->v[i];
      Builder pb = builder_before(m, loop);
      pb.loc = ld->loc;
      Value *jp = loop->operands[0];
      if (p > 0)
        jp = build_binary(&pb, OP_ADD, jp, build_index(&pb, p));
      pro[p][i] = clone_load_at(&pb, ld, loop, jp);
      pro[p][i]->name = suffixed(m, ld->results[0]->name, "_pro", p);
    }
  Builder nb = builder_before(m, top);
  Value *jn = NULL;
  SkipTest st = {0};
  for (int i = 0; i < carried->n; i++) {
    Op *ld = carried->v[i];
    nb.loc = ld->loc;
    if (!jn)
      jn = build_binary(&nb, OP_ADD, for_iv(loop), build_index(&nb, depth));
    Value *next = clone_load_at(&nb, ld, loop, jn);
    op_set_attr_int(next->def, "prefetch", depth);
    if (skip_prefetches)
      skip_prefetch(m, loop, ld, next->def, jn, &st);
    next->name = suffixed(m, ld->results[0]->name, "_next", 0);
    Value *args[4];
    for (int p = 0; p < depth; p++) {
      op_append_operand(m, loop, pro[p][i]);
      args[p] = block_add_arg(m, body, pro[p][i]->type, NULL);
      args[p]->name = suffixed(m, ld->results[0]->name, "_cur", p);
      op_append_result(m, loop, pro[p][i]->type);
    }
    value_replace_all_uses(ld->results[0], args[0]);
    op_erase(ld);
    for (int p = 1; p < depth; p++)
      op_append_operand(m, term, args[p]);
    op_append_operand(m, term, next);
  }
}

/* The loads of `found` that may move to the top of the loop's body and a
 * step ahead: of a tensor the kernel does not write, with operands rebuilt
 * from the induction variable and values from outside. Frees `found`. */
static OpList movable_loads(Op *loop, OpList *found, bool nested_loop) {
  OpList ok = {0};
  for (int i = 0; i < found->n && !nested_loop; i++) {
    Op *ld = found->v[i];
    bool good = !tensor_stored(op_func(ld), ld->operands[0]);
    for (int k = 0; k < ld->noperands && good; k++)
      good = loop_rebuildable(ld->operands[k], loop);
    if (good)
      oplist_push(&ok, ld);
  }
  oplist_free(found);
  return ok;
}

/* Pipelines one loop; returns true when it changed it. */
/* Register tiles the loop carries, bytes a thread: above this, register
 * vectors are not carried ahead (128 of the 255 registers a thread). */
enum { VECTOR_CARRY_MAX_BYTES = 511 };

static bool pipeline_loop(Module *m, Op *loop, int stages, bool carry_all, int threads) {
  if (attr_get(&loop->attrs, "pipelined"))
    return false;
  Block *body = for_body(loop);
  Op *term = block_terminator(body);
  /* A producer's loop (warp_specialize.c): its ring is the pipeline. */
  if (!term || term->kind != OP_YIELD || !body->first || block_has_op(body, OP_RING_PUT))
    return false;
  Scan s = {.loop = loop};
  scan_block(&s, body);
  OpList ok = movable_loads(loop, &s.loads, s.nested_loop);
  OpList vec = movable_loads(loop, &s.vectors, s.nested_loop);
  if (ok.n == 0 || ok.n > 16 || vec.n > 16) {
    oplist_free(&ok);
    oplist_free(&vec);
    return false;
  }
  /* The carried tiles: the first staged load in program order (K), or
   * every staged load when carry_all (always with stages > 2: a tile issued
   * in the step that uses it would wait its whole copy there, whatever the
   * depth of the others); the others are hoisted. */
  int depth = stages - 1;
  int ncarry = carry_all || depth > 1 ? ok.n : 1;
  Op *top = body->first;
  /* Hoisted tiles of this step, in order, at the top of the body (with the
   * skip test of this step where the step may skip them). */
  SkipTest here = {0};
  for (int i = ncarry; i < ok.n; i++) {
    Builder b = builder_before(m, top);
    b.loc = ok.v[i]->loc;
    Value *nv = clone_load_at(&b, ok.v[i], loop, for_iv(loop));
    skip_prefetch(m, loop, ok.v[i], nv->def, for_iv(loop), &here);
    value_replace_all_uses(ok.v[i]->results[0], nv);
    op_erase(ok.v[i]);
  }
  OpList carried = {0};
  for (int i = 0; i < ncarry; i++)
    oplist_push(&carried, ok.v[i]);
  carry_loads(m, loop, &carried, depth, top, term, true);
  /* Vector loads: one step ahead whatever the depth (each carried copy
   * holds registers through the whole step), issued after the staged
   * copies. */
  if (vec.n && loop_register_bytes(loop, threads) <= VECTOR_CARRY_MAX_BYTES)
    carry_loads(m, loop, &vec, 1, top, term, false);
  op_set_attr_int(loop, "pipelined", stages);
  oplist_free(&carried);
  oplist_free(&ok);
  oplist_free(&vec);
  return true;
}

/* Does the backward kernel f carry every staged tile, whatever its warps?
 * The deterministic launch's kernels on wgmma: their blocks an SM are bound
 * by registers, not shared memory (tiling budgets `stages` buffers of each
 * inner tile), and the step's three barriers become one: H100, d64 (four
 * warps, two or three blocks an SM), docs/perf-log.md P91: +3-8%; kernels
 * reading run-time inputs or packed (varlen) rows, P92: 0 to +5%. Not the
 * atomic launch's kernel (main): beside its dS^T and dQ staging buffers a
 * second dO buffer left d128 one block an SM, -30% (P91). Nor head dims past
 * 96: d128 and up are warp-specialized (two warpgroups carry every tile
 * anyway), and those it does not take (a document mask's, a prefix mask's)
 * measured within noise this way (P92). */
static bool backward_carries_all(const Func *f, const PassOptions *opts) {
  return strcmp(attr_str(&f->attrs, "mode", ""), "backward") == 0 &&
         strcmp(attr_str(&f->attrs, "role", ""), "main") != 0 &&
         attr_int(&f->attrs, "head_dim", 128) <= 96 && attr_int(&f->attrs, "v_head_dim", 128) <= 96 &&
         pass_targets_wgmma(f, opts);
}

int pass_software_pipeline(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)diag;
  int stages = (int)attr_int(&f->attrs, "stages", 1);
  if (stages < 2)
    return 0;
  if (stages > 4) /* the tiling pass allows 1 to 4 */
    stages = 4;
  /* Two or more warpgroups (8+ warps) on their own rows, on sm_90a: V
   * carried like K. A V issued in the step needs a barrier between the
   * softmax and P V, which re-aligns the warpgroups, so the tensor cores
   * (asynchronous wgmma) idle through every softmax; with every tile
   * carried the step has one barrier (codegen waits for them at its top)
   * and one warpgroup's softmax runs under the other's matmuls. H100,
   * docs/perf-log.md P16: d128 +3-4%, d256 +8-11%; one warpgroup per
   * block (d64, several blocks per SM) lost 3-8% to the second V buffer's
   * occupancy (the backward's kernels do not: backward_carries_all).
   * Split-K warps (cross-warp reductions) share rows and need their
   * barriers anyway; mma.sync (sm_80) measured a loss before
   * (docs/perf-log.md P08). */
  const char *target = attr_str(&f->attrs, "target", opts && opts->target ? opts->target : "sm_90a");
  bool two_warpgroups = attr_int(&f->attrs, "warps", 4) >= 8 && strcmp(target, "sm_90a") == 0;
  bool carry_all = (two_warpgroups || backward_carries_all(f, opts)) &&
                   !block_has_op(f->body, OP_XWARP_REDUCE);
  OpList loops = {0};
  func_walk(f, loops_fn, &loops);
  bool changed = false;
  for (int i = 0; i < loops.n; i++)
    changed |= pipeline_loop(m, loops.v[i], stages, carry_all,
                             32 * (int)attr_int(&f->attrs, "warps", 4));
  oplist_free(&loops);
  if (changed) {
    dce_block(f->body);
    cse_block(f->body);
  }
  return 0;
}
