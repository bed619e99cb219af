/* release_early.c - the `release-early` pass: a ring slot whose tile is got
 * before a step loop and read only inside it is freed in the loop's last
 * step, right after its last read, instead of after the loop, so that the
 * producer refills it while the consumers finish the loop's last step and
 * its epilogue. A persistent forward's Q (passes/persistent.c: one slot,
 * put per tile) is the case: the next tile's Q copy used to start only
 * after the last P V, O's normalization and stores; the consumers then
 * waited for it at the next tile's first S (docs/perf-log.md P118: 5% of
 * the d128 512-row kernel's samples).
 *
 *   before                                  after
 *   %qt = ring_get %qt_ring, %u             %qt = ring_get %qt_ring, %u
 *   %r = for %j = %c0 to %nk ... {          %r = for %j = %c0 to %nk ... {
 *     %s = matmul %qt, %kt {async = 1}        %s = matmul %qt, %kt {async = 1}
 *     ...                                     ...
 *     %s_done = mma_wait %s {pending = 1}     %s_done = mma_wait %s {pending = 1}
 *     ... softmax ...                         ring_release %qt_ring, %u {last_step = 1}
 *   }                                         ... softmax ...
 *   ring_release %qt_ring, %u               }
 *   ... epilogue: last P V, O, LSE ...      ... epilogue ...
 *
 * `ring_release {last_step = 1}` (ir.h) frees the slot in the loop's last
 * iteration where it stands, or right after a loop that runs none, so
 * each step is still released once. The release goes after the top-level
 * op of the body that holds the tile's last read, and after the wait of
 * every async matmul that reads it (a wgmma reads shared memory until its
 * wait). Values do not change; the producer may only start its next copy
 * sooner.
 *
 * Fires on consumer gets whose tile is read only inside one sequential
 * loop after them and whose release follows that loop at the get's level.
 */
#include "passes/pass_util.h"
#include "passes/passes.h"

/* The latest of a and b in their block (either may be NULL). */
static Op *later_of(Op *a, Op *b) {
  return !a ? b : !b ? a : op_precedes(a, b) ? b : a;
}

/* The top-level op of the loop's body after which every read of t is done
 * (an async matmul's at its wait), or NULL when a read is outside the loop
 * or a wait is missing there. */
static Op *last_read_in(const Value *t, Op *loop) {
  const Block *body = for_body(loop);
  Op *last = NULL;
  for (int i = 0; i < t->nuses; i++) {
    Op *user = t->uses[i].user;
    Op *at = op_ancestor_in(user, body);
    if (!at)
      return NULL;
    last = later_of(last, at);
    if (user->kind == OP_MATMUL && attr_int(&user->attrs, "async", 0) == 1) {
      const Value *x = user->results[0];
      Op *wait = NULL;
      for (int k = 0; k < x->nuses; k++)
        if (x->uses[k].user && x->uses[k].user->kind == OP_MMA_WAIT)
          wait = later_of(wait, op_ancestor_in(x->uses[k].user, body));
      if (!wait)
        return NULL;
      last = later_of(last, wait);
    }
  }
  return last;
}

/* Moves get's release into the loop that does all its tile's reads. */
static bool release_get_early(Op *get) {
  const Block *b = get->parent;
  const Value *ring = get->operands[0], *t = get->results[0];
  if (t->nuses == 0)
    return false;
  Op *rel = NULL;
  for (Op *o = get->next; o && !rel; o = o->next)
    if (o->kind == OP_RING_RELEASE && o->operands[0] == ring)
      rel = o;
  if (!rel || attr_get(&rel->attrs, "last_step") || rel->operands[1] != get->operands[1])
    return false;
  Op *loop = op_ancestor_in(t->uses[0].user, b);
  if (!loop || loop->kind != OP_FOR || for_is_parallel(loop) || !op_precedes(get, loop) || !op_precedes(loop, rel))
    return false;
  Op *last = last_read_in(t, loop);
  if (!last || block_terminator(for_body(loop)) == last)
    return false;
  op_move_before(rel, last->next);
  op_set_attr_int(rel, "last_step", 1);
  return true;
}

int pass_release_early(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)m, (void)opts, (void)diag;
  OpList gets = collect_ops(f, OP_RING_GET);
  for (int i = 0; i < gets.n; i++)
    release_get_early(gets.v[i]);
  oplist_free(&gets);
  return 0;
}
