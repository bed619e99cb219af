/* cg_async.c - layer 0: the cp.async groups in flight along the path being
 * emitted, the waits and barriers that retire them, and their state across
 * regions: a branch's paths merged, a loop body entered and left, a
 * pipelined loop's carried tiles standing in for its prologue's copies
 * (cg_async.h says why the list must be exact).
 */
#include <string.h>

#include "codegen/cg_async.h"

/* --------------------------------------------------- groups and waits */

void lw_sync(Lowerer *L) {
  if (L->consumer_barrier)
    cg_named_barrier(&L->b, 1, L->threads);
  else
    cg_barrier(&L->b);
}

void lw_barrier(Lowerer *L) {
  lw_sync(L);
  L->smem_read_since_barrier = false;
  L->epoch++;
  for (int i = 0; i < L->nrings; i++)
    L->rings[i].cur_read = false;
}

void lw_wait_all_async(Lowerer *L) {
  if (L->npending == 0)
    return;
  cg_cp_async_wait(&L->b, 0);
  L->npending = 0;
}

/* The newest pending group among t's (or -1 when t is ready). */
static int pending_seq(Lowerer *L, const CgVal *t) {
  if (!t || t->kind != CV_SMEM || t->async_seq < 0)
    return -1;
  for (int i = 0; i < L->npending; i++)
    if (L->pending[i].seq == t->async_seq)
      return t->async_seq;
  return -1; /* already waited for on this path */
}

/* cp.async.wait_group (groups newer than seq) + barrier; forgets seq and
 * everything older. */
static void wait_through(Lowerer *L, int seq) {
  int newer = 0;
  for (int i = 0; i < L->npending; i++)
    newer += L->pending[i].seq > seq;
  cg_cp_async_wait(&L->b, newer);
  if (L->wgmma) /* the tensor cores read through the async proxy */
    cg_fence_proxy_async(&L->b);
  lw_barrier(L);
  int k = 0;
  for (int i = 0; i < L->npending; i++)
    if (L->pending[i].seq > seq)
      L->pending[k++] = L->pending[i];
  L->npending = k;
}

void lw_wait_for_seq(Lowerer *L, int seq) {
  for (int i = 0; i < L->npending; i++)
    if (L->pending[i].seq == seq) {
      wait_through(L, seq);
      return;
    }
}

void lw_smem_ready2(Lowerer *L, CgVal *a, CgVal *b) {
  int sa = pending_seq(L, a), sb = pending_seq(L, b);
  int s = sa > sb ? sa : sb;
  if (s >= 0)
    wait_through(L, s);
}

void lw_smem_ready(Lowerer *L, CgVal *t) { lw_smem_ready2(L, t, NULL); }

/* Waits for the groups issued since `mark`, except the next step's tiles of
 * a pipelined loop (they stay in flight across the back edge). */
void lw_flush_async(Lowerer *L, int mark) {
  int newest = -1;
  for (int i = 0; i < L->npending; i++)
    if (L->pending[i].seq >= mark && !L->pending[i].carried && L->pending[i].seq > newest)
      newest = L->pending[i].seq;
  if (newest < 0)
    return;
  wait_through(L, newest);
}

CarryRing *lw_ring_of_load(Lowerer *L, const Op *op) {
  for (int i = 0; i < L->nrings; i++)
    if (L->rings[i].next_load == op)
      return &L->rings[i];
  return NULL;
}


int lw_async_issue(Lowerer *L, bool carried) {
  int seq = L->next_seq++;
  if (L->npending == MAX_PENDING_GROUPS)
    lw_flush_async(L, 0);
  L->pending[L->npending++] = (Pending){seq, carried};
  return seq;
}

bool lw_async_pending(const Lowerer *L, int seq) {
  for (int i = 0; i < L->npending; i++)
    if (L->pending[i].seq == seq)
      return true;
  return false;
}

/* ------------------------------------------------------------ regions */

void lw_region_enter(Lowerer *L, AsyncRegion *r, int wait_first) {
  r->mark = L->next_seq;
  r->nsaved = L->npending;
  memcpy(r->saved, L->pending, sizeof r->saved);
  if (wait_first >= 0)
    lw_wait_for_seq(L, wait_first);
}

void lw_region_leave(Lowerer *L, AsyncRegion *r, int sync_to, int ring_lo, int ring_hi) {
  lw_flush_async(L, r->mark);
  if (sync_to >= 0)
    lw_wait_for_seq(L, sync_to);
  memcpy(L->region_end, L->pending, sizeof L->region_end);
  L->nregion_end = L->npending;
  /* A pipelined step that wrote a next buffer before its first barrier must
   * end with its cur buffer unread since the last barrier: the next step
   * writes into it before any barrier. */
  for (int i = ring_lo; i < ring_hi; i++)
    if (L->rings[i].wrote_before_barrier && L->rings[i].cur_read)
      lw_barrier(L);
  /* Groups that were pending before the region may or may not have been
   * waited for inside it (the region may not run): keep them pending. */
  memcpy(L->pending, r->saved, sizeof r->saved);
  L->npending = r->nsaved;
}

/* The else region is lowered first: the then region then waits for what
 * the else region waited for, so that after the if those groups are known
 * to be done on both paths. */
void lw_if_enter(Lowerer *L, AsyncIf *s) {
  s->smem_read = L->smem_read_since_barrier;
  s->after_else = s->smem_read;
  s->epoch = L->epoch;
  for (int i = 0; i < L->nrings; i++)
    s->cur_read[i] = s->else_cur_read[i] = L->rings[i].cur_read;
  s->nbefore = L->npending;
  memcpy(s->before, L->pending, sizeof s->before);
  s->nelse_end = s->nbefore;
  memcpy(s->else_end, s->before, sizeof s->else_end);
}

int lw_if_after_else(Lowerer *L, AsyncIf *s) {
  int sync_to = -1;
  memcpy(s->else_end, L->region_end, sizeof s->else_end);
  s->nelse_end = L->nregion_end;
  for (int i = 0; i < s->nbefore; i++) {
    bool kept = false;
    for (int k = 0; k < s->nelse_end; k++)
      kept |= s->else_end[k].seq == s->before[i].seq;
    if (!kept && s->before[i].seq > sync_to)
      sync_to = s->before[i].seq;
  }
  s->after_else = L->smem_read_since_barrier;
  L->smem_read_since_barrier = s->smem_read;
  for (int i = 0; i < L->nrings; i++) {
    s->else_cur_read[i] = L->rings[i].cur_read;
    L->rings[i].cur_read = s->cur_read[i];
  }
  return sync_to;
}

void lw_if_leave(Lowerer *L, AsyncIf *s) {
  L->smem_read_since_barrier = L->smem_read_since_barrier || s->after_else;
  for (int i = 0; i < L->nrings; i++)
    L->rings[i].cur_read = L->rings[i].cur_read || s->else_cur_read[i];
  /* Pending after the if: pending before and at the end of both regions. */
  int k = 0;
  for (int i = 0; i < s->nbefore; i++) {
    bool in_t = false, in_e = false;
    for (int j = 0; j < L->nregion_end; j++)
      in_t |= L->region_end[j].seq == s->before[i].seq;
    for (int j = 0; j < s->nelse_end; j++)
      in_e |= s->else_end[j].seq == s->before[i].seq;
    if (in_t && in_e)
      L->pending[k++] = s->before[i];
  }
  L->npending = k;
  /* A barrier in a branch may not have run. */
  L->epoch = s->epoch;
}

static bool is_init(int seq, const int *init_seq, int ninit) {
  for (int a = 0; a < ninit; a++)
    if (init_seq[a] == seq)
      return true;
  return false;
}

/* The carried tiles are in flight at body entry (the prologue's copies, or
 * the previous steps'), oldest first: by the step that issued them, then in
 * the order the body issues them; the prologue's groups stand for them.
 * Other groups still pending must be older than those, or the wait counts
 * would be wrong. */
void lw_loop_enter(Lowerer *L, AsyncLoop *s, const int *init_seq, int ninit) {
  s->nouter = L->npending;
  memcpy(s->outer, L->pending, sizeof s->outer);
  int oldest_init = 1 << 30;
  for (int a = 0; a < ninit; a++)
    if (init_seq[a] >= 0 && lw_async_pending(L, init_seq[a]) && init_seq[a] < oldest_init)
      oldest_init = init_seq[a];
  int k = 0;
  for (int i = 0; i < L->npending; i++) {
    if (is_init(L->pending[i].seq, init_seq, ninit))
      continue;
    if (L->pending[i].seq > oldest_init) { /* issued between the prologue and the loop */
      lw_flush_async(L, 0);
      k = 0;
      break;
    }
    L->pending[k++] = L->pending[i];
  }
  L->npending = k;
}

void lw_loop_body(Lowerer *L, int ring_lo, int ring_hi) {
  /* Warps may still read shared memory of the previous iteration. */
  L->smem_read_since_barrier = true;
  for (int i = ring_lo; i < ring_hi; i++)
    L->rings[i].entry_epoch = L->epoch;
}

void lw_loop_leave(Lowerer *L, const AsyncLoop *s, const int *init_seq, int ninit) {
  L->smem_read_since_barrier = true;
  int k = 0;
  for (int i = 0; i < s->nouter; i++)
    if (!is_init(s->outer[i].seq, init_seq, ninit) && lw_async_pending(L, s->outer[i].seq))
      L->pending[k++] = s->outer[i];
  L->npending = k;
}
