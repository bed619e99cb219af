/* flashc_runtime_blocks.h - part of the flashc runtime's public API: the
 * block lists' functions (docs/abi.md, "Block lists"): classifier grids,
 * list shapes, fa_blocks_create and its handle.
 *
 * flashc_runtime.h includes it (and every part, in order, after the types
 * they share); including this file alone includes flashc_runtime.h first.
 */
#include "flashc_runtime.h"

#ifndef FLASHC_RUNTIME_BLOCKS_H
#define FLASHC_RUNTIME_BLOCKS_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---- block lists: the functions (docs/abi.md, "Block lists") ----------- */

/* The grid of a classifier kernel (mode blocks) at a launch of (batch,
 * seqlen_q, seqlen_k) into grid[3] (x, y, z): grid row_tiles,list_heads,batch
 * (a classifier: one block per list) or row_tiles*chunks,list_heads,batch (a
 * classes kernel, key chunk C: x = row_tiles * ceil(steps / C), steps the
 * lists' other tile count, list_len - 1). Touches no GPU. FA_ERR_NULL_POINTER,
 * FA_ERR_INVALID_ARGUMENT (not a classifier; a negative size), or
 * FA_ERR_TOO_LARGE (as fa_block_lists_shape, or a dim beyond the CUDA grid
 * limits: x 2^31-1, y and z 65535). */
FA_API fa_status fa_classifier_grid(const fa_kernel_info *info, int64_t batch, int64_t seqlen_q,
                                    int64_t seqlen_k, unsigned grid[3]);

/* The shape of the lists that `info` writes (a classifier, mode blocks) or
 * visits (a kernel with block_list, whose blocks and list_heads are its
 * classifier's: fa_meta_parse_module) at a launch of (batch, seqlen_q,
 * seqlen_k), into *out: dims and contiguous strides (fa_block_lists),
 * kernel -1, list and count NULL. Touches no GPU. FA_ERR_NULL_POINTER,
 * FA_ERR_INVALID_ARGUMENT (a negative size; an info with neither, or
 * with tiles <= 0), FA_ERR_TOO_LARGE (blk_list's elements, batch x
 * list_heads x row_tiles x list_len, beyond INT32_MAX: the kernels index
 * them in int32). */
FA_API fa_status fa_block_lists_shape(const fa_kernel_info *info, int64_t batch,
                                      int64_t seqlen_q, int64_t seqlen_k, fa_block_lists *out);

/* Validates a classifier launch without touching any GPU: `classifier` a
 * mode blocks kernel (FA_ERR_UNSUPPORTED otherwise) with a classifier's
 * keys (FA_ERR_META otherwise: blocks rows or cols, list_heads 1..65535,
 * tile_kv, grid row_tiles,list_heads,batch or, with a chunk >= 1,
 * row_tiles*chunks,list_heads,batch), batch, seqlen_q and
 * seqlen_k not negative (FA_ERR_INVALID_ARGUMENT), within int32 and batch
 * at most 65535 (grid z; FA_ERR_TOO_LARGE), the lists' size
 * (fa_block_lists_shape), and the run-time inputs as fa_forward_check
 * checks a forward launch's with q [batch, seqlen_q, ...] and k [batch,
 * seqlen_k, ...] (every declared input bound once, dtypes, dims, strides,
 * alignment, extents, the requires). A launch with batch 0 or no list
 * (row_tiles 0) is valid. FA_OK or the first failure's status with a
 * message in msg (when not NULL). */
FA_API fa_status fa_blocks_check(const fa_kernel_info *classifier, const fa_blocks_args *args,
                                 char *msg, size_t msglen);

/* The parameter list of a classifier launch in the ABI order of
 * docs/abi.md: batch, seqlen_q, seqlen_k (i32), one group per run-time
 * input of `classifier` bound from args->inputs by name (as
 * fa_backward_params), then blk_list (ptr, 4 i64 strides) and blk_count
 * (ptr, 3 i64 strides) of `lists`. Fills params and *count. Touches no
 * GPU; FA_ERR_NULL_POINTER for NULL. */
FA_API fa_status fa_blocks_params(const fa_kernel_info *classifier, const fa_blocks_args *args,
                                  const fa_block_lists *lists,
                                  fa_param params[FA_BACKWARD_MAX_PARAMS], int *count);

/* Builds every classifier kernel's lists of mod (its mode blocks kernels
 * without the key chunk)
 * for launches of args' sizes and run-time inputs, into device memory the
 * new handle owns: validates args against each classifier (fa_blocks_check;
 * a failure returns its status with the message in mod, *out NULL),
 * allocates the lists (fa_block_lists_shape each) and launches the
 * classifiers on args->stream, grid (row_tiles, list_heads, batch), its
 * threads and smem_bytes, each after its classes kernel when it names one
 * (key classes: grid fa_classifier_grid, same parameters; a classes kernel
 * is checked with fa_blocks_check too but holds no lists of its own and
 * does not count in fa_blocks_count). Asynchronous: launches on args->stream see the
 * lists; launches on another stream must be ordered after it by the
 * caller. A module without classifiers gives a handle that holds no lists
 * (FA_OK; launches given it launch as without one). The handle is for mod
 * alone and for launches of exactly these sizes (fa_forward and
 * fa_backward refuse it otherwise), and stays valid while the inputs it
 * was built from keep their values: build a new one when they change.
 * FA_ERR_NULL_POINTER, FA_ERR_OUT_OF_MEMORY, FA_ERR_CUDA as fa_forward. */
FA_API fa_status fa_blocks_create(fa_module *mod, const fa_blocks_args *args, fa_blocks **out);

/* Frees the handle's device memory. Waits for nothing: the caller must
 * have synchronized the streams that use it. It may outlive its module
 * (it holds a reference to the context). NULL is a no-op. */
FA_API void fa_blocks_destroy(fa_blocks *blocks);

/* How many classifiers' lists the handle holds (0 for NULL). */
FA_API int fa_blocks_count(const fa_blocks *blocks);

/* The lists of the handle's classifier i (0 <= i < fa_blocks_count, in the
 * module's kernel order; kernel its index there), into *out: device
 * addresses, dims and strides (e.g. to read them back). FA_ERR_NULL_POINTER,
 * FA_ERR_INVALID_ARGUMENT for i out of range. */
FA_API fa_status fa_blocks_lists(const fa_blocks *blocks, int i, fa_block_lists *out);

#ifdef __cplusplus
}
#endif

#endif /* FLASHC_RUNTIME_BLOCKS_H */
