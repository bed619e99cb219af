/* kind_combine.c - layer 4: split-kv's combine kernel (@NAME_combine,
 * docs/decode.md), which merges the split kernel's partials when it does
 * not merge them itself (-decode-combine=separate, or before sm_90).
 *   - ABI: o lse workspace cache_seqlens, batch q_len nsplit, o strides
 *     (b, s, h): 10 parameters;
 *   - grid: the parallel loops over the batch and the heads take grid y, x
 *     (heads, batch), grid-stride loops as in the split kernel;
 *   - the head loop's body: its tile IR states the merge on 16-row tiles
 *     (the interpreter runs it), but lowered as tiles it is slow: a 16-row
 *     tile holds q_len <= 16 rows, so at q_len 1 four lanes of the warp
 *     carry data, each split is a serial load round trip, and the max and
 *     the weighted sum are two passes (docs/perf-log.md P11: ~0.6 us per
 *     split). So the body is lowered here instead, with the same
 *     arithmetic on a layout made for it (compute_merge.c);
 *   - engines: mma.sync only (it has no matmul).
 */
#include <string.h>

#include "codegen/meta_decode.h"
#include "codegen/kinds.h"

/* Its own parameters are named ones (lw_param: cache_seqlens, q_len,
 * nsplit). */
static const LwParam params[] = {
    {LW_PTR, "o"},      {LW_PTR, "lse"},   {LW_PTR, "workspace"}, {LW_PTR, "cache_seqlens"},
    {LW_I32, "batch"},  {LW_I32, "q_len"}, {LW_I32, "nsplit"},    LW_STRIDES("o"),
};

static bool accepts(const Func *f) {
  return strcmp(attr_str(&f->attrs, "mode", "forward"), "decode") == 0 && cg_meta_is_combine(f);
}

/* Programmatic dependent launch (sm_90+, docs/decode.md): the combine
 * kernel waits, before its first read of the workspace, until the split
 * kernel has finished and its stores are visible. Without a PDL launch the
 * wait returns at once. */
static void bind(Lowerer *L) {
  /* The forward names, for code that asks for them. */
  L->seqlen_q = L->seqlen_k = lw_param(L, "q_len", false);
  if (cg_decode_pdl(L->f))
    cg_ptx(&L->b, "griddepcontrol.wait;", NULL, "", 0, NULL, 0);
}

/* The body of the head loop for (b, h) = (the batch loop's iv, hv). */
static bool head_body(Lowerer *L, const Op *op, const char *dim, MlirValue hv, MlirBlock body) {
  MlirValue nsplit = lw_param(L, "nsplit", false), q_len = lw_param(L, "q_len", false);
  if (dim[0] != 'x')
    return false;
  CgBuilder *b = &L->b;
  cg_builder_set_block(b, body);
  const Op *bl = op->parent ? op->parent->parent_op : NULL;
  int dv = (int)attr_int(&L->f->attrs, "v_head_dim", 0);
  Comb c = {.L = L, .nsplit = nsplit, .q_len = q_len, .h0 = hv};
  if (!bl || bl->kind != OP_FOR || dv <= 0 || dv % 4 || !lw_comb_refs(L, op, &c)) {
    if (!L->failed)
      lw_error(L, op, "the combine kernel needs a batch loop around its head loop and v_head_dim %% 4 == 0");
    cg_yield(b, NULL, 0);
    return true;
  }
  c.b = lw_get(L, for_iv((Op *)bl))->v;
  MlirValue u0, step, first;
  if (lw_comb_threads(&c, dv, &u0, &step, &first))
    lw_comb_units(&c, u0, q_len, step, first);
  cg_yield(b, NULL, 0);
  return true;
}

static void load(Lowerer *L, const Op *op) {
  Rows m;
  if (lw_rows_of_load(L, op, (MlirValue){NULL}, (MlirValue){NULL}, &m))
    lw_load(L, op, &m);
}

static void store(Lowerer *L, const Op *op) {
  Rows m;
  if (lw_rows_of_store(L, op, &m))
    lw_store(L, op, &m);
}

const LwKind lw_kind_combine = {
    .name = "combine",
    .accepts = accepts,
    .no_wgmma = "decode kernels use mma.sync",
    .params = params,
    .nparams = sizeof params / sizeof params[0],
    .bind = bind,
    /* the loop to %batch, and the head loop (its bound a constant) */
    .grid = {{"batch", "y"}, {NULL, "x"}},
    .grid_body = head_body,
    .load = load,
    .store = store,
};
