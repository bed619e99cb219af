/* cg_async.h - layer 0: cp.async groups, barriers and the async state of
 * regions (cg_async.c).
 *
 * Codegen tracks, along the path it is emitting, which cp.async groups are
 * in flight (Lowerer.pending, at most MAX_PENDING_GROUPS), how many barriers
 * ran (epoch), whether shared memory was read since the last barrier, and
 * the rings of buffers of the pipelined loops being lowered (at most
 * MAX_CARRY_RINGS). A wait counts the groups newer than the one it needs,
 * so the list must be exact on every path: branches and loop bodies save
 * and merge it through the functions below, which the walker (walk.c) calls
 * around the regions it lowers.
 */
#ifndef FLASHC_CG_ASYNC_H
#define FLASHC_CG_ASYNC_H

#include "codegen/cg_lowerer.h"

/* ------------------------------------------------- groups and waits */

/* A barrier among the threads running this code (the whole block, or the
 * consumers of warp roles), nothing else. */
void lw_sync(Lowerer *L);
/* lw_sync, and the async state learns that it ran. */
void lw_barrier(Lowerer *L);
/* A new cp.async group (its copies just committed): returns its number.
 * carried: a tile ahead of a pipelined loop (stays in flight across the
 * back edge). Waits for all when MAX_PENDING_GROUPS are pending. */
int lw_async_issue(Lowerer *L, bool carried);
/* Is group seq still pending on this path? */
bool lw_async_pending(const Lowerer *L, int seq);
/* Makes sure a staged tile's cp.async group has landed and is visible. */
void lw_smem_ready(Lowerer *L, CgVal *t);
/* Waits for both (either may be NULL) with one wait and one barrier. */
void lw_smem_ready2(Lowerer *L, CgVal *a, CgVal *b);
/* Waits for group seq (and older ones) when it is pending. */
void lw_wait_for_seq(Lowerer *L, int seq);
/* Waits for every group issued after `mark` (region exit). */
void lw_flush_async(Lowerer *L, int mark);
/* Waits for every cp.async of this thread (carried prefetches too). */
void lw_wait_all_async(Lowerer *L);
/* The ring of the current pipelined loops whose next tile `op` loads, or NULL. */
CarryRing *lw_ring_of_load(Lowerer *L, const Op *op);

/* ------------------------------------------------------------ regions */

/* The pending groups on entry to a region that may not run. */
typedef struct AsyncRegion {
  int mark; /* first group issued inside */
  Pending saved[MAX_PENDING_GROUPS];
  int nsaved;
} AsyncRegion;

/* Entering a region: wait_first >= 0 waits for that group (and older)
 * before its body. */
void lw_region_enter(Lowerer *L, AsyncRegion *r, int wait_first);
/* Leaving it (before its yield): waits for the groups issued inside (not
 * the carried ones) and, sync_to >= 0, for that group; keeps the pending
 * list at the end in Lowerer.region_end; ends a pipelined step with a
 * barrier when its rings ring_lo..ring_hi-1 need one; then restores the
 * pending list of the entry (the region may not run). */
void lw_region_leave(Lowerer *L, AsyncRegion *r, int sync_to, int ring_lo, int ring_hi);

/* An scf.if: lw_if_enter; the else region (when there is one) then
 * lw_if_after_else, which returns the group the then region must wait for
 * before its yield (-1: none), so that both paths end with the same groups
 * done; the then region; lw_if_leave merges the paths. */
typedef struct AsyncIf {
  Pending before[MAX_PENDING_GROUPS];
  int nbefore;
  Pending else_end[MAX_PENDING_GROUPS];
  int nelse_end;
  bool smem_read, after_else;
  int epoch;
  bool cur_read[MAX_CARRY_RINGS], else_cur_read[MAX_CARRY_RINGS];
} AsyncIf;
void lw_if_enter(Lowerer *L, AsyncIf *s);
int lw_if_after_else(Lowerer *L, AsyncIf *s);
void lw_if_leave(Lowerer *L, AsyncIf *s);

/* A pipelined loop whose carried tiles' prologue copies are the groups
 * init_seq[0..ninit) (-1: none): lw_loop_enter takes them off the pending
 * list (the body's arguments stand for them, lw_async_issue'd oldest
 * first), waiting for all when another group was issued after them;
 * lw_loop_body marks the body's entry; lw_loop_leave restores the outer
 * groups still pending but the prologue's (the loop's carried results are
 * then issued by the caller). */
typedef struct AsyncLoop {
  Pending outer[MAX_PENDING_GROUPS];
  int nouter;
} AsyncLoop;
void lw_loop_enter(Lowerer *L, AsyncLoop *s, const int *init_seq, int ninit);
void lw_loop_body(Lowerer *L, int ring_lo, int ring_hi);
void lw_loop_leave(Lowerer *L, const AsyncLoop *s, const int *init_seq, int ninit);

#endif
