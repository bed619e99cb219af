/* kind_blocks.c - layer 4: the block-list classifier kernel kind
 * (@SPEC_blocks_rows / _cols and their _classes kernels,
 * passes/block_lists.c, docs/abi.md "Block lists").
 *   - ABI: batch seqlen_q seqlen_k, then the run-time inputs' and the
 *     lists' pointer and stride groups (the walker adds them): 3 parameters
 *     of its own;
 *   - grid: the parallel loops (batch, list head, row tile) on grid z, y,
 *     x (the walker's default): one row tile of one list per block; a
 *     classes kernel's (phase 1) x loop is row tile x chunk of steps, one
 *     flattened loop;
 *   - memory: it reads its inputs with gathers and writes the lists with
 *     scatters; it loads and stores no tiles.
 */
#include <string.h>

#include "codegen/kinds.h"

static bool accepts(const Func *f) {
  return strcmp(attr_str(&f->attrs, "mode", "forward"), "blocks") == 0;
}

static const LwParam params[] = {
    {LW_I32, "batch"}, {LW_I32, "seqlen_q"}, {LW_I32, "seqlen_k"}};

static void no_tiles(Lowerer *L, const Op *op) {
  lw_error(L, op, "a block-list classifier loads and stores no tiles");
}

const LwKind lw_kind_blocks = {
    .name = "blocks",
    .accepts = accepts,
    .no_wgmma = "a classifier has no matmul",
    .params = params,
    .nparams = sizeof params / sizeof params[0],
    .load = no_tiles,
    .store = no_tiles,
};
