/* early_row_loads.c - the `early-row-loads` pass: in a step loop whose
 * tiles come from rings (a consumer's step under warp roles), the step's
 * loads of read-only row vectors (the backward's LSE and delta, 1 x Br
 * f32 tiles from global memory) are issued above the step's first
 * ring_get, with the index arithmetic they need, so that their latency
 * passes while the consumer waits for the producer's copy and then under
 * the step's first matmul, instead of in front of the exponentials and of
 * dP's use (docs/perf-log.md P135-P136: the K/V-outer step's first matmul
 * waited for its LSE loads).
 *
 *   for %i = %jlo to %nq sequential ...      for %i = %jlo to %nq sequential ...
 *     %qt = ring_get %qt_ring, %s              %q0 = mul %i, %br
 *     %q0 = mul %i, %br                        %lse_t = load %lse, %b, %h, %q0
 *     %r = if %empty ... else {                %dl = load %delta, %b, %h, %q0
 *       %lse_t = load %lse, %b, %h, %q0        %qt = ring_get %qt_ring, %s
 *       %st = matmul %kt, %qt ...              %r = if %empty ... else {
 *       %dl = load %delta, %b, %h, %q0           %st = matmul %kt, %qt ...
 *
 * Moved: a `load` of a rank 3 tensor argument that no op of the kernel
 * stores to, whose result is a register tile of one row or one column, at
 * the step's level or inside its ifs (not inside a nested loop), whose
 * indices are defined above the ring_get or by pure ops of the step's
 * block after it that reach only such values; those ops move with it, in
 * program order. A load taken out of an if runs on the steps that skip
 * it too: a row load is bounds-checked, so that reads nothing it should
 * not, and its value is unused there. Values do not change.
 */
#include "passes/pass_util.h"
#include "passes/passes.h"

/* The ops a load's indices may bring along: pure scalar arithmetic. */
static bool index_op(const Op *o) {
  return op_is_pure(o) && o->nresults == 1 && o->results[0]->type.kind == TYPE_SCALAR;
}

/* Does an op of f store into tensor t? */
static bool stored_to(Func *f, const Value *t) {
  OpList st = collect_ops(f, OP_STORE);
  bool found = false;
  for (int i = 0; i < st.n && !found; i++)
    found = mem_tensor(st.v[i]) == t;
  oplist_free(&st);
  return found;
}

/* A load of a read-only row vector (the rule above). */
static bool row_load(Func *f, const Op *o) {
  if (o->kind != OP_LOAD || o->noperands != 4 || op_is_staged_load(o))
    return false;
  const Value *t = mem_tensor(o), *r = o->results[0];
  if (t->def || t->type.kind != TYPE_TENSOR || t->type.rank != 3)
    return false;
  if (r->type.kind != TYPE_TILE || (r->type.rows != 1 && r->type.cols != 1))
    return false;
  return !stored_to(f, t);
}

/* Collects the row loads of blk and of the ifs in it (not of loops). */
static void find_loads(Func *f, Block *blk, OpList *loads) {
  for (Op *o = blk->first; o; o = o->next) {
    if (row_load(f, o))
      oplist_push(loads, o);
    if (o->kind == OP_IF)
      for (int r = 0; r < o->nregions; r++)
        find_loads(f, o->regions[r], loads);
  }
}

/* Moves step body b's row loads (and their slices) above its first
 * ring_get; returns how many loads moved. */
static int move_loads(Func *f, Block *b) {
  Op *get = NULL;
  for (Op *o = b->first; o && !get; o = o->next)
    if (o->kind == OP_RING_GET)
      get = o;
  if (!get)
    return 0;
  OpList loads = {0}, mark = {0}, moving = {0};
  find_loads(f, b, &loads);
  for (int i = 0; i < loads.n; i++) {
    Op *ld = loads.v[i];
    if (ld->parent == b && op_precedes(ld, get))
      continue; /* already above */
    int n0 = mark.n;
    bool ok = true;
    for (int k = 1; ok && k < ld->noperands; k++)
      ok = slice_after(ld->operands[k], b, get, index_op, &mark);
    if (ok)
      oplist_push(&moving, ld);
    else
      mark.n = n0; /* this load stays, with what only it needed */
  }
  /* the slice in program order, then the loads in theirs: every moved
   * op's operands are above it */
  move_marked_before(&mark, get);
  for (int i = 0; i < moving.n; i++)
    op_move_before(moving.v[i], get);
  int n = moving.n;
  oplist_free(&loads);
  oplist_free(&mark);
  oplist_free(&moving);
  return n;
}

int pass_early_row_loads(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)m;
  (void)opts;
  (void)diag;
  OpList loops = collect_ops(f, OP_FOR);
  for (int i = 0; i < loops.n; i++)
    if (!for_is_parallel(loops.v[i]))
      move_loads(f, for_body(loops.v[i]));
  oplist_free(&loops);
  return 0;
}
