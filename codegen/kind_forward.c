/* kind_forward.c - layer 4: the forward kernel kind (FlashAttention-2 and
 * the FA1 schedule, docs/abi.md).
 *   - ABI: q k v o lse workspace, batch seqlen_q seqlen_k, q/k/v/o strides
 *     (b, s, h): 21 parameters;
 *   - grid: one Q tile per block, the parallel loops on grid z, y, x
 *     (the walker's default: an empty grid table);
 *   - rows: slice rows of one (batch, head) (mem.h: lw_rows_slice);
 *   - engines: wgmma on sm_90a where the matmuls allow it, else mma.sync.
 */
#include <string.h>

#include "codegen/kinds.h"

static bool accepts(const Func *f) {
  return strcmp(attr_str(&f->attrs, "mode", "forward"), "forward") == 0;
}

static const LwParam params[] = {
    {LW_PTR, "q"},        {LW_PTR, "k"},        {LW_PTR, "v"},   {LW_PTR, "o"},
    {LW_PTR, "lse"},      {LW_PTR, "workspace"}, {LW_I32, "batch"}, {LW_I32, "seqlen_q"},
    {LW_I32, "seqlen_k"}, LW_STRIDES("q"),      LW_STRIDES("k"), LW_STRIDES("v"),
    LW_STRIDES("o"),
};

static void load(Lowerer *L, const Op *op) {
  Rows m;
  if (op->kind == OP_LOAD_PAGED) {
    lw_error(L, op, "needs the kernel's block table and a power-of-2 page size");
    return;
  }
  if (op->noperands != 4 || !lw_rows_slice(L, op, &m))
    return;
  lw_load(L, op, &m);
}

static void store(Lowerer *L, const Op *op) {
  Rows m;
  if (op->noperands != 5 || !lw_rows_slice(L, op, &m))
    return;
  lw_store(L, op, &m);
}

const LwKind lw_kind_forward = {
    .name = "forward",
    .accepts = accepts,
    .params = params,
    .nparams = sizeof params / sizeof params[0],
    .load = load,
    .store = store,
};
