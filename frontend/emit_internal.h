/* emit_internal.h - what the kernel emitters of the frontend share
 * (emit_common.c): the emitter state, IR shorthands, and the lowering of a
 * spec's score and mask expressions onto a score tile. Each kind of kernel
 * is one file on top: emit_tile.c (forward, decode), emit_backward.c. */
#ifndef FLASHC_EMIT_INTERNAL_H
#define FLASHC_EMIT_INTERNAL_H

#include <stdio.h>

#include "frontend/spec.h"
#include "ir/dropout.h"
#include "ir/ir.h"

typedef struct Lower {
  Module *m;
  Func *f;
  const KernelSpec *k;
  Builder b;           /* insertion point (the inner loop body while lowering exprs) */
  ElemType dt;         /* bf16 / f16 */
  /* values the expressions may read */
  Value *ss, *q0, *k0, *bv, *hv, *seqq, *seqk;
  Value *qi, *ki;      /* index tiles, created on first use */
  /* qi and ki clamped into [0, seqlen - 1], for the indices of run-time
   * inputs: a tile's rows and columns past the sequence ends (masked off)
   * must not read past the inputs' ends. Created on first use, reset with
   * qi and ki; in_index counts the gathers being lowered. */
  Value *qc, *kc;
  int in_index;
  /* The score tile's orientation: queries on its rows (q_axis 0: forward,
   * Br x Bc) or on its columns (q_axis 1: the backward's S^T, Bc x Br), and
   * the distribution of the tiles built for it. */
  int q_axis;
  Dist dist;
  bool bound_q;        /* em_cond also masks query rows past seqlen_q */
  bool decode;         /* mode = decode: per-sequence cache lengths, cache loads */
  int bad;             /* an expression could not be lowered */
  /* A kernel that takes dropout's launch arguments (em_dropout_args): they,
   * %keep_scale = 1 / (1 - p), and the keep mask of the current tile pair
   * (made on first use, like qi and ki; reset with them). */
  bool dropout;
  DropoutArgs drop;
  Value *keep_scale, *keep;
  /* The run-time inputs' kernel arguments (%in_NAME), KernelSpec order. */
  Value *inputs[SPEC_MAX_INPUTS];
} Lower;

/* Shorthands that build at L->b and name the result (name may be NULL). */
Value *em_bin(Lower *L, OpKind k, Value *x, Value *y, const char *name);
Value *em_un(Lower *L, OpKind k, Value *x, const char *name);
Value *em_name(Lower *L, Value *v, const char *name);
Value *em_op1(Lower *L, OpKind k, Value *x, Type t, const char *name);
/* load tensor, b (L->bv), h, row0 : t */
Value *em_load(Lower *L, Value *tensor, Value *h, Value *row0, Type t, const char *name);
void em_store(Lower *L, Value *tensor, Value *h, Value *row0, Value *tile);
Type em_ftile(int r, int c, Dist d);
Value *em_to_f32(Lower *L, Value *v);
Value *em_to_bool(Lower *L, Value *v);
Value *em_to_num(Lower *L, Value *v);

/* An expression of the spec, with its SrcLoc on every op it creates. */
Value *em_expr(Lower *L, const Expr *e);
bool em_expr_uses(const Expr *e, ExprVar v);
/* The score modifier over L->ss (L->ss itself when there is none), and the
 * mask condition (user mask AND bounds), on the score tile L->q_axis says. */
Value *em_score(Lower *L);
Value *em_cond(Lower *L);

/* Dropout (docs/dropout.md). A kernel with dropout takes six scalar
 * arguments after the sizes: %seed_lo, %seed_hi, %offset_lo, %offset_hi,
 * %keep_threshold (u32) and %keep_scale (f32). em_dropout_arg_types appends
 * their types and names at t[*n], names[*n]; em_dropout_args binds them
 * in L (L->dropout set). em_dropout(L, x, scaled, name) is
 * `select keep, x', 0 {dropout}` on the current score tile (L->q_axis,
 * L->q0, L->k0), x' = `mul x, %keep_scale` when scaled, else x (the
 * caller scales a sum of such terms once: O, dV); keep is ir/dropout.h's
 * decision for query head L->hv of batch L->bv. */
void em_dropout_arg_types(Type *t, const char **names, int *n);
void em_dropout_args(Lower *L);
Value *em_dropout(Lower *L, Value *x, bool scaled, const char *name);

/* Run-time inputs (docs/abi.md): em_input_arg_types appends an argument
 * %in_NAME per input of L->k (a tensor of its type and dims, or an f32 /
 * index scalar) at t[*n], names[*n], the names written into buf;
 * em_input_args binds them in L and sets the kernel's `require` attribute
 * when the spec's indexing needs one. */
typedef char EmInputNames[SPEC_MAX_INPUTS][80];
void em_input_arg_types(const KernelSpec *k, Type *t, const char **names, int *n,
                        EmInputNames buf);
void em_input_args(Lower *L);
/* %scale: the spec's constant, or its expression of run-time inputs. */
Value *em_scale(Lower *L);

/* The kernel's attributes (dtype, heads, scale, mask, mode, target, the
 * schedule block's fields) from L->k. */
void em_set_attrs(Lower *L, const char *target);
/* `for %iv = lo to hi`, the builder moved into its body; em_close_for ends
 * the body with an empty yield and moves the builder after the loop. */
Op *em_open_for(Lower *L, Value *lo, Value *hi, bool parallel, const char *iv);
void em_close_for(Lower *L, Op *f);
/* Prints `file:line:col: error: msg` (the kernel's location when loc has
 * none); returns 0. */
int em_refuse(FILE *diag, const KernelSpec *k, SrcLoc loc, const char *msg);

#endif
