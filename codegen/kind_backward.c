/* kind_backward.c - layer 4: the backward kernel kinds (docs/backward.md),
 * one per role of a forward kernel's backward:
 *   - pre (D = rowsum(dO o O)), post (dQ = scale * dq_acc), q (dQ alone, Q
 *     tiles outer): grid Q tiles, heads, batch;
 *   - main (dK, dV and dQ added into dq_acc), kv (dK, dV), dv (dV alone,
 *     where the split-dkdv pass took it out of the other two, which then
 *     make dK only): grid K/V tiles, K/V heads, batch, one parameter list;
 *   the parallel loops on grid z, y, x (the walker's default);
 *   - ABI: the tables below, in docs/backward.md's order; the tensors the
 *     walker has no field for (dout, dq, dk, dv, delta, dq_acc) are the
 *     kind's own parameters, found by name (mem_rows.c), with their strides
 *     NAME.sb/ss/sh where the ABI passes them, contiguous otherwise;
 *   - rows: slice rows of one (batch, head), as the forward;
 *   - engines: wgmma on sm_90a where every matmul fits it (compute_wgmma.c),
 *     else mma.sync; the main kernel's transposed A operand, dS^T, goes
 *     through shared memory for either.
 */
#include <string.h>

#include "codegen/kinds.h"

static bool is_role(const Func *f, const char *role) {
  return strcmp(attr_str(&f->attrs, "mode", "forward"), "backward") == 0 &&
         strcmp(attr_str(&f->attrs, "role", ""), role) == 0;
}

static bool accepts_pre(const Func *f) { return is_role(f, "pre"); }
static bool accepts_main(const Func *f) {
  return is_role(f, "main") || is_role(f, "kv") || is_role(f, "dv");
}
static bool accepts_post(const Func *f) { return is_role(f, "post"); }
static bool accepts_q(const Func *f) { return is_role(f, "q"); }

#define SIZES {LW_I32, "batch"}, {LW_I32, "seqlen_q"}, {LW_I32, "seqlen_k"}

static const LwParam pre_params[] = {
    {LW_PTR, "o"}, {LW_PTR, "dout"}, {LW_PTR, "delta"}, SIZES, LW_STRIDES("o"), LW_STRIDES("dout"),
};

static const LwParam main_params[] = {
    {LW_PTR, "q"},      {LW_PTR, "k"},  {LW_PTR, "v"},     {LW_PTR, "dout"},
    {LW_PTR, "lse"},    {LW_PTR, "delta"}, {LW_PTR, "dq_acc"}, {LW_PTR, "dk"},
    {LW_PTR, "dv"},     SIZES,          LW_STRIDES("q"),   LW_STRIDES("k"),
    LW_STRIDES("v"),    LW_STRIDES("dout"), LW_STRIDES("dk"), LW_STRIDES("dv"),
};

static const LwParam q_params[] = {
    {LW_PTR, "q"},     {LW_PTR, "k"},   {LW_PTR, "v"},   {LW_PTR, "dout"}, {LW_PTR, "lse"},
    {LW_PTR, "delta"}, {LW_PTR, "dq"},  SIZES,           LW_STRIDES("q"),  LW_STRIDES("k"),
    LW_STRIDES("v"),   LW_STRIDES("dout"), LW_STRIDES("dq"),
};

static const LwParam post_params[] = {
    {LW_PTR, "dq_acc"}, {LW_PTR, "dq"}, SIZES, LW_STRIDES("dq"),
};

static void load(Lowerer *L, const Op *op) {
  Rows m;
  if (op->kind != OP_LOAD || op->noperands != 4) {
    lw_error(L, op, "a backward kernel loads slices of its tensors only");
    return;
  }
  if (lw_rows_slice(L, op, &m))
    lw_load(L, op, &m);
}

static void store(Lowerer *L, const Op *op) {
  Rows m;
  if (op->noperands == 5 && lw_rows_slice(L, op, &m))
    lw_store(L, op, &m);
}

#define BACKWARD_KIND(role, acc, table)                                                        \
  {                                                                                            \
    .name = "backward " role, .accepts = acc,                                                  \
    .params = table, .nparams = sizeof table / sizeof table[0], .load = load, .store = store, \
    .remat_descriptors = true,                                                                 \
  }

const LwKind lw_kind_backward_pre = BACKWARD_KIND("pre", accepts_pre, pre_params);
const LwKind lw_kind_backward_main = BACKWARD_KIND("main", accepts_main, main_params);
const LwKind lw_kind_backward_post = BACKWARD_KIND("post", accepts_post, post_params);
const LwKind lw_kind_backward_q = BACKWARD_KIND("q", accepts_q, q_params);
