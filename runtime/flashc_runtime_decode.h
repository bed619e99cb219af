/* flashc_runtime_decode.h - part of the flashc runtime's public API: decode
 * launches (docs/decode.md): fa_decode_args, fa_decode_check,
 * fa_decode_plan, fa_decode, the split counts.
 *
 * flashc_runtime.h includes it (and every part, in order, after the types
 * they share); including this file alone includes flashc_runtime.h first.
 */
#include "flashc_runtime.h"

#ifndef FLASHC_RUNTIME_DECODE_H
#define FLASHC_RUNTIME_DECODE_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---- decode (docs/decode.md) ------------------------------------------- */

#define FA_DECODE_MAX_Q_LEN 16
#define FA_DECODE_MAX_SPLITS 64   /* fa_decode_splits' cap; an explicit nsplit may go to 1024 */
#define FA_DECODE_LONG_CHUNK 1024 /* split = auto: keys per split before two blocks per SM */
#define FA_DECODE_WIDE_SPLITS 4    /* the small-batch variant: at least this many splits at */
#define FA_DECODE_WIDE_KEYS 4096   /* one block per SM, and caches of at least this many keys */

/* Arguments of one decode launch: q_len (1..16) new tokens per sequence
 * against a KV cache holding cache_seqlens[b] tokens of sequence b (the new
 * tokens included: they are its last q_len positions).
 *   q [batch, q_len, heads, head_dim]
 *   k contiguous: [batch, capacity, kv_heads, head_dim]
 *     paged:      [num_pages, page_size, kv_heads, head_dim]; token t of
 *                 sequence b is slot t % page_size of page
 *                 block_table[b][t / page_size]
 *   v as k, with v_head_dim
 *   o [batch, q_len, heads, v_head_dim]      (written)
 *   lse: NULL or float32 [batch, heads, q_len], contiguous (written)
 *   cache_seqlens: device int32 [batch]; each in [0, capacity] where
 *     capacity = k's dim 1 (contiguous) or max_pages * page_size (paged)
 *   block_table: device int32 [batch, max_pages], row stride bt_stride
 *     (0 = max_pages); paged only (NULL for contiguous). Entries past
 *     ceil(cache_seqlens[b] / page_size) are never read.
 *   host_cache_seqlens, host_block_table: optional host copies of the two
 *     (same layout). When given, fa_decode_check validates every length and
 *     every block-table entry those lengths need (kernels do not bounds-check
 *     them), and the longest length drives split = auto. A host block table
 *     without host lengths: every entry a length up to max_seqlen (else the
 *     capacity) could need is checked. Without a host block table nothing
 *     can check the device one: its entries are trusted.
 *   max_seqlen: optional (0 = unknown) bound on the cache lengths, for
 *     split = auto when no host copy is given (else capacity is assumed).
 *   nsplit: 0 = the kernel's (split = N) or the auto heuristic; else forced
 *     (1..1024; > 1 needs a kernel with a combine kernel).
 *   stream: a CUstream, NULL for the legacy default stream. */
typedef struct fa_decode_args {
  fa_tensor q, k, v, o;
  float *lse;
  const int32_t *cache_seqlens;
  const int32_t *block_table;
  int64_t max_pages;
  int64_t bt_stride;
  const int32_t *host_cache_seqlens;
  const int32_t *host_block_table;
  int64_t max_seqlen;
  int nsplit;
  void *stream;
  /* Run-time inputs (fa_input; docs/abi.md): each input the kernel
   * declares, bound by name; dims batch = q's dim 0, seqlen_q = q_len. A
   * kernel without inputs refuses any (num_inputs != 0). */
  const fa_input *inputs;
  int num_inputs;
} fa_decode_args;

/* Validates a decode launch against a decode kernel's metadata without
 * touching any GPU: as fa_forward_check (NULLs, dtypes, dims against the
 * metadata and each other, strides, alignment, overlap of the outputs,
 * sizes) plus q_len in 1..q_len_max, the cache layout (page_size against
 * k/v's dim 1, block table dims, capacity <= INT32_MAX), the int32
 * pointers' alignment, lse, cache_seqlens and block_table (and the host
 * copies) within the address space, nsplit, and with host copies every
 * cache length in [0, capacity] and every needed block-table entry in
 * [0, num_pages);
 * the run-time inputs' bindings as fa_forward_check's (seqlen_q = q_len;
 * a decode kernel declares no seqlen_k dim and no require).
 * batch == 0 or q_len == 0 is valid and launches nothing. Returns FA_OK or
 * the first failure's status with a message in msg (when not NULL). */
FA_API fa_status fa_decode_check(const fa_kernel_info *info, const fa_decode_args *args, char *msg,
                          size_t msglen);

/* Whether a `split = auto` launch of (batch, kv_heads) pairs on a GPU of
 * `sm_count` SMs runs the module's small-batch variant (metadata
 * wide_kernel) instead of its kernel: when it has one, one block per SM
 * gives every pair at least FA_DECODE_WIDE_SPLITS splits, and the longest
 * cache (max_seqlen) holds at least FA_DECODE_WIDE_KEYS keys. 0 or 1. */
FA_API int fa_decode_variant(const fa_kernel_info *info, int64_t batch, int64_t kv_heads,
                      int64_t max_seqlen, int sm_count);

/* The `split = auto` heuristic for (split, kv_head, batch) blocks on a GPU
 * of `sm_count` SMs: one block per SM (rounded down) with at least one K/V
 * tile (metadata tile_kv) of the longest cache (max_seqlen) per split, or
 * two per SM where each split still gets FA_DECODE_LONG_CHUNK keys,
 * whichever is more; at most FA_DECODE_MAX_SPLITS; then as few splits as
 * cover the longest cache's tiles with the same tiles per split, so none is
 * empty. For the small-batch variant (fa_decode_variant) one block per SM
 * on its wide_tile_kv tiles. 1 when the kernel has no combine kernel.
 * Always >= 1. */
FA_API int fa_decode_splits(const fa_kernel_info *info, int64_t batch, int64_t kv_heads,
                     int64_t max_seqlen, int sm_count);

/* The split count fa_decode would use for args on a GPU of sm_count SMs
 * (args->nsplit, else the kernel's split = N, else fa_decode_splits), and
 * the workspace it needs in bytes (o_part + lse_part, docs/decode.md; 0
 * when nsplit is 1; a kernel compiled in the FlashAttention-1 loop order,
 * whose metadata has workspace_floats_per_row > 0, gets that many floats
 * per query row for its O, m, l instead), and in *wide (when not NULL)
 * whether the small-batch variant runs (fa_decode_variant; only with the
 * automatic split count). Returns FA_ERR_TOO_LARGE when the workspace
 * would not fit the kernels' int32 float indices. */
FA_API fa_status fa_decode_plan(const fa_kernel_info *info, const fa_decode_args *args, int sm_count,
                         int *nsplit, size_t *workspace_bytes, int *wide);

/* Validates args (fa_decode_check), chooses nsplit (fa_decode_plan with
 * the device's SM count), makes sure the module's scratch holds the
 * workspace (and LSE when args->lse is NULL), launches the split kernel on
 * grid (nsplit, kv_heads, batch) and, when nsplit > 1, the combine kernel
 * on grid (heads, batch), both on args->stream. Asynchronous, like
 * fa_forward; the scratch is shared by the launches of mod. */
FA_API fa_status fa_decode(fa_module *mod, const fa_decode_args *args);

/* The nsplit of the last successful fa_decode on mod (0 before one). */
FA_API int fa_decode_last_nsplit(const fa_module *mod);
/* The split kernel the last successful fa_decode on mod launched (its
 * kernel or its small-batch variant); "" before one or for a NULL mod. */
FA_API const char *fa_decode_last_kernel(const fa_module *mod);

#ifdef __cplusplus
}
#endif

#endif /* FLASHC_RUNTIME_DECODE_H */
