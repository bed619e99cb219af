/* pass_util.h - small helpers the passes share: op lists, purity, moving an
 * op's dependencies up a block, dead code removal, local CSE, diagnostics. */
#ifndef FLASHC_PASS_UTIL_H
#define FLASHC_PASS_UTIL_H

#include <stdbool.h>
#include <stdio.h>

#include "ir/ir.h"
#include "passes/passes.h"

/* A growable list of ops (malloc'ed; free with oplist_free). */
typedef struct OpList {
  Op **v;
  int n, cap;
} OpList;

void oplist_push(OpList *l, Op *op);
void oplist_free(OpList *l);
bool oplist_has(const OpList *l, const Op *op);
/* Every op of kind k in f, in pre-order. */
OpList collect_ops(Func *f, OpKind k);
/* The same within block b and its nested regions. */
OpList collect_ops_in(Block *b, OpKind k);
/* Is there an op of kind k in block b or its nested regions? */
bool block_has_op(Block *b, OpKind k);

/* True for ops without side effects or regions (loads count as pure: they
 * only read, and the passes only move loads of tensors nobody stores). */
bool op_is_pure(const Op *op);
/* An if whose regions only compute (pure ops, reductions, pure ifs):
 * cloning it elsewhere computes the same. */
bool op_is_pure_if(const Op *op);
/* A sequential loop of scalars whose body only computes scalars (pure ops,
 * pure ifs, such loops): mask-skip's binary searches for a tile's first and
 * last steps. Cloning it elsewhere computes the same. */
bool op_is_scalar_loop(const Op *op);
/* A load of an f16/bf16 tile with no distribution, plain or paged: codegen
 * stages it in shared memory for the tensor cores (decode's paged rows
 * too: the page lookup is per row, so a copy needs nothing from the step
 * before). */
bool op_is_staged_load(const Op *op);
/* The bytes of tile type t (f32 4 a element, else 2): what a staged tile
 * or a ring slot of it takes in shared memory. */
long tile_bytes(Type t);
/* True when a and b are in the same block and a comes first. */
bool op_precedes(const Op *a, const Op *b);

/* Makes v usable right before `point`: when v is defined later in point's
 * block, moves its defining op (and, first, those of its operands) before
 * point. Returns false (changing nothing more) when that needs moving an
 * impure op or one with regions. */
bool hoist_before(Value *v, Op *point);

/* Adds to `mark` the ops of b, from `from` on, that compute v (its slice
 * there, operands first), each without regions and accepted by `movable`:
 * true when v can then be had above `from` (defined before it, outside b,
 * or by the slice), false when not (an op `movable` refuses, or a value
 * defined in a region nested in b); `mark` may then hold part of the
 * slice: the caller restores its count. hoist-gathers and early-row-loads
 * move a load's index arithmetic with it so. */
bool slice_after(Value *v, Block *b, const Op *from, bool (*movable)(const Op *), OpList *mark);
/* Moves the ops of `mark` that follow `at` in its block before it, in
 * program order, so that every moved op's operands stay above it. */
void move_marked_before(const OpList *mark, Op *at);

/* Erases pure ops without uses in b and in its nested regions, to a fixed
 * point. Returns how many were erased. */
int dce_block(Block *b);
/* Dead code removal that also sees through loops and ifs: keeps what a
 * store or the return needs, transitively (a loop-carried value is needed
 * when its result or the body's use of it is), and erases the rest:
 * pure ops, for/if ops with nothing needed inside, and the unneeded
 * results of the others (a loop's carry: its init operand, body argument,
 * yield operand and result). Returns how many ops and results went. */
int dce_func(Func *f);
/* Merges identical pure ops (same kind, operands, attributes, result types)
 * within each block of b's tree, keeping the first. */
int cse_block(Block *b);

/* add acc, (matmul a, b) -> matmul a, b, acc wherever the product is used
 * only there and acc has the product's type (placement included): the MMA
 * accumulates into acc. */
void fuse_matmul_accumulators(Module *m, Func *f);

/* Every use of `from` but those by the ops in keep[0..nkeep) takes `to`. */
void replace_uses_except(Value *from, Value *to, Op *const *keep, int nkeep);

/* The online-softmax state a K/V loop carries, from its initial values:
 * O (a `full 0` tile of more than one column), l (a `full 0` row vector) and
 * m (a `full -inf` row vector) at iter-arg positions *io, *il, *im. Other
 * arguments that are not constant tiles (a pipelined K tile) are passed
 * over; another constant tile, or a second one of the kinds, and the loop is
 * not one: false. */
bool kv_loop_state(const Op *loop, int *io, int *il, int *im);

/* The operand of an xwarp_reduce, or v itself. */
Value *strip_xwarp(Value *v);
/* x for dropout's `select keep, x, 0 {dropout}` or `select keep, (mul x,
 * %keep_scale), 0 {dropout}` (frontend/emit_common.c, em_dropout), v
 * otherwise: what passes that match P see through. */
Value *strip_dropout(Value *v);
/* The tensor a load/store reads or writes (operand 0). */
static inline Value *mem_tensor(const Op *op) { return op->operands[0]; }

bool attrs_equal(const AttrList *a, const AttrList *b);

/* Calls fn on the type of every value of f (kernel and block arguments, op
 * results), storing what it returns. */
typedef Type (*TypeMapFn)(Type t, void *ctx);
void func_map_types(Func *f, TypeMapFn fn, void *ctx);

/* `file:line:col: error: ` + message, the location of f (or of op when given). */
void pass_error(FILE *diag, const Func *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A diagnostic at a source position: `file:line:col: KIND: message` (kind
 * "error" or "note"; f's position when loc has none), then the source line
 * and a caret under the column when loc's file can be read again (the IR
 * keeps positions, not the text). */
void pass_report(FILE *diag, const Func *f, SrcLoc loc, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Whether the for/if regions of f end in an explicit `yield` even when it
 * yields nothing; new regions follow the same convention. */
bool func_uses_empty_yields(Func *f);

/* Values rebuilt at another step of a loop (software_pipeline.c's prefetches,
 * overlap_softmax.c's V tile). Can v be recomputed at the top of loop's body
 * (or before the loop) from the induction variable and values defined
 * outside, through pure scalar ops? */
bool loop_rebuildable(Value *v, Op *loop);
/* Clones the computation of v at b's point with the induction variable
 * replaced by `iv` (memoised in map; through the scalar ifs of a skip test
 * too: software_pipeline.c). */
Value *loop_rebuild(Builder *b, Value *v, Op *loop, Value *iv, ValueMap *map);
/* A clone of load `ld` at b's point, its operands rebuilt for `iv`. */
Value *clone_load_at(Builder *b, Op *ld, Op *loop, Value *iv);

/* Is overlap-softmax wanted on f: the schedule's `overlap = 1`, or no
 * `overlap` field and a K/V loop fed by rings (has_rings: warp_specialize.c)
 * with V's head dim at most 128, where it measured 3-7% faster (d256: flat;
 * docs/perf-log.md P70). warp_specialize.c asks before it makes the rings
 * (V's ring then needs a slot of zeros), overlap_softmax.c after. */
bool overlap_softmax_wanted(const Func *f, bool has_rings);

/* The shared memory a warp-specialized forward's `rings` rings hold besides
 * their stages' tiles: overlap-softmax's slot of zeros for V, v_bytes (the
 * step's last load; 0: none), where it will be wanted, and a 1024-byte
 * block of barriers a ring. warp-specialize's budget (ring_stages) and
 * stage-inputs' check that one stage of its tiles fits (fits) both count
 * it so, so that what stage-inputs admits gets its stage. */
long ring_overhead_bytes(const Func *f, long v_bytes, int rings);

/* Do the passes that pay off only on asynchronous wgmma apply to f: its
 * target is sm_90a and the codegen is not told -mma=sync? (Codegen may
 * still keep a kernel whose shapes wgmma cannot take on mma.sync; those
 * passes check the shapes they need.) */
bool pass_targets_wgmma(const Func *f, const PassOptions *opts);
/* Did the spec give f a schedule block (any sched_* attribute: the frontend
 * sets the tile fields for every block, the switches where given)? Such a
 * kernel is compiled as asked, with no variant of other tiles. */
bool pass_user_schedule(const Func *f);
/* Is f a backward kernel whose Q tile has fewer rows than 16 x warps, its
 * warps in groups of tile_q / 16 sharing each Q tile (tiling's schedule
 * for group-dq: passes/group_dq.c)? */
bool pass_rows_grouped(const Func *f);
/* The atomic launch's kernel as tiling made it for group-dq (a Q tile of
 * fewer rows than 16 x warps: two warpgroups of 64 keys): one block an
 * SM, so a producer warpgroup fits beside its 8 consumer warps. */
bool pass_grouped_main(const Func *f);
/* Is f a backward kernel that warp-specialize gives a producer (on sm_90a
 * wgmma, where the schedule does not turn it off): its role, head dims and
 * warps? */
bool pass_backward_warp_roles(const Func *f);
/* Does ld's tile come by TMA (docs/hopper-pipeline.md §2-§3): a plain load
 * of Q, K or V of a padded forward, or a run-time input's rectangle
 * (stage-inputs') of a padded forward or backward, on bf16/f16 tiles of
 * 8..256 rows by 64-column multiples, unless the schedule says `tma = 0`? */
bool pass_tma_load(const Func *f, const Op *ld);

/* Bytes a thread of the register tiles loop carries (its results), over
 * `threads` threads: what its step holds in registers from start to end. */
int loop_register_bytes(const Op *loop, int threads);

#endif
