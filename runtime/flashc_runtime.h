/* flashc_runtime.h - the one public header of the flashc runtime.
 *
 * Loads the kernels that flashc compiles (PTX with its metadata, or a cubin
 * beside its metadata text), validates every launch against the kernel's
 * metadata and launches it through the CUDA driver API. The contract with
 * the compiler (parameters, grid, metadata keys) is docs/abi.md.
 *
 * The driver (libcuda.so.1) is opened with dlopen when a context is created,
 * so a program linked with this library runs, and can validate arguments
 * with fa_meta_parse + fa_forward_check, on a machine without a GPU or
 * driver: fa_context_create then returns FA_ERR_NO_DEVICE.
 *
 * Conventions:
 *  - Every function that can fail returns an fa_status; FA_OK is 0.
 *  - Handles are opaque; fa_*_destroy(NULL) is a no-op.
 *  - A failed call on a handle leaves a message in it (fa_context_errmsg,
 *    fa_module_errmsg) that names the argument and the numbers involved. A
 *    successful call clears it.
 *  - A handle must not be used from two host threads at the same time;
 *    different handles may be.
 *  - Device pointers are plain `void *` holding the device address
 *    (a CUdeviceptr cast through uintptr_t, torch's data_ptr(), ...).
 */
#ifndef FLASHC_RUNTIME_H
#define FLASHC_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FA_RUNTIME_VERSION "0.1.0"
#define FA_META_VERSION 1 /* the metadata version this runtime reads */

/* ---- status codes ------------------------------------------------------ */

typedef enum fa_status {
  FA_OK = 0,
  FA_ERR_INVALID_ARGUMENT, /* an argument is out of its domain (bad device ordinal, overlap, ...) */
  FA_ERR_DTYPE,            /* a tensor's dtype differs from the kernel's */
  FA_ERR_SHAPE,            /* a dimension disagrees with the metadata or another tensor */
  FA_ERR_STRIDE,           /* a stride is negative, the last dim is not contiguous, or O overlaps itself */
  FA_ERR_ALIGNMENT,        /* a pointer is not 16-byte aligned or a stride not a multiple of 8 elements */
  FA_ERR_NULL_POINTER,     /* a required pointer is NULL */
  FA_ERR_TOO_LARGE,        /* a size overflows the kernel's index types or the grid limits */
  FA_ERR_NO_DEVICE,        /* no driver (libcuda.so.1) or no such GPU */
  FA_ERR_CUDA,             /* a CUDA driver call failed; the message has its name and text */
  FA_ERR_LOAD,             /* PTX JIT / cubin load failed, entry point missing, resources too large */
  FA_ERR_META,             /* metadata missing, malformed or inconsistent */
  FA_ERR_OUT_OF_MEMORY,    /* host or device allocation failed */
  FA_ERR_UNSUPPORTED,      /* a valid kernel this entry point cannot launch (e.g. mode decode) */
  FA_ERR_COMPILE,          /* fa_jit_compile: the spec has errors or cannot be compiled */
  FA_STATUS_COUNT_
} fa_status;

/* Static English name of a status, e.g. "FA_ERR_SHAPE: shape mismatch".
 * Never NULL (unknown values give "FA_ERR_UNKNOWN"). */
const char *fa_status_string(fa_status status);

/* ---- kernel metadata --------------------------------------------------- */

typedef enum fa_dtype { FA_DTYPE_F16 = 0, FA_DTYPE_BF16 = 1, FA_DTYPE_F32 = 2 } fa_dtype;
typedef enum fa_mode { FA_MODE_FORWARD = 0, FA_MODE_BACKWARD, FA_MODE_DECODE } fa_mode;
typedef enum fa_mask { FA_MASK_NONE = 0, FA_MASK_CAUSAL, FA_MASK_WINDOW, FA_MASK_EXPR } fa_mask;
/* Grid x: one block per Q tile (FA2 sequence parallelism) or one for all of Q (FA1 order);
 * decode kernels: `splits,kv_heads,batch` (docs/decode.md). */
typedef enum fa_grid { FA_GRID_Q_TILES = 0, FA_GRID_ONE, FA_GRID_SPLITS } fa_grid;

/* Static name of a dtype ("f16", "bf16", "f32"); "?" when out of range. */
const char *fa_dtype_name(fa_dtype dtype);

#define FA_NAME_MAX 128

/* The decode keys of the metadata (docs/decode.md; all zero for other
 * modes, where these keys are refused). */
typedef enum fa_cache { FA_CACHE_CONTIGUOUS = 0, FA_CACHE_PAGED } fa_cache;
typedef struct fa_decode_info {
  fa_cache cache;                    /* key cache: contiguous (default) | paged */
  int page_size;                     /* key page_size: paged only, power of 2 in 16..256 */
  int split;                         /* key split: 0 = auto (default), else the fixed count */
  int q_len_max;                     /* key q_len_max: 1..16 (default 16) */
  char combine_kernel[FA_NAME_MAX];  /* key combine_kernel; "" only when split = 1 */
  int combine_threads;               /* key combine_threads: 1..1024 (default 128) */
  int has_unified_max;               /* key unified_max given (informational) */
  double unified_max;                /* its phi */
  int combine_pdl;                   /* key combine_pdl: 1 = the combine kernel waits for the
                                      * split kernel itself (griddepcontrol.wait), so the
                                      * runtime may launch it programmatically dependent */
  int combine_fused;                 /* key combine_fused N: the split kernel merges the
                                      * partials itself (the last block of each unit) and
                                      * needs N i32 arrival counters per sequence, zero on
                                      * entry, right before the workspace; the combine kernel
                                      * is not launched. 0 (default): separate combine */
  char wide_kernel[FA_NAME_MAX];     /* key wide_kernel: the small-batch variant, the same
                                      * split kernel on wide_tile_kv-key tiles, launched
                                      * instead of `kernel` when few (batch, K/V head) pairs
                                      * leave one block per SM (fa_decode_variant); "" none */
  int wide_tile_kv;                  /* keys wide_tile_kv, wide_threads, wide_smem_bytes: */
  int wide_threads;                  /* the variant's tile_kv, threads and smem_bytes */
  int wide_smem_bytes;               /* (all four keys together, with a combine kernel) */
} fa_decode_info;

/* What the `// flashc.meta KEY VALUE` lines say (docs/abi.md, "Metadata").
 * Required keys: version, kernel, dtype, head_dim, heads, kv_heads, tile_q,
 * threads, smem_bytes, grid. Optional keys and their defaults: mode
 * (forward), v_head_dim (head_dim), mask (none), tile_kv, warps, stages (0 =
 * not given), workspace_floats_per_row (0), scale (0 = not given, the spec's
 * default 1/sqrt(head_dim) is meant), target, passes (""). Unknown keys are
 * ignored. */
typedef struct fa_kernel_info {
  int version;                 /* FA_META_VERSION */
  char kernel[FA_NAME_MAX];    /* PTX entry point name */
  fa_mode mode;
  fa_dtype dtype;              /* of Q, K, V, O */
  int head_dim;                /* of Q and K: multiple of 8, 8..256 */
  int v_head_dim;              /* of V and O: multiple of 8, 8..256 */
  int heads;                   /* query heads, 1..65535 */
  int kv_heads;                /* divides heads: == heads MHA, 1 MQA, else GQA */
  fa_mask mask;
  double scale;                /* 0 when the metadata does not say */
  int tile_q, tile_kv, warps, stages;
  int threads;                 /* block size, 1..1024 */
  int smem_bytes;              /* dynamic shared memory per block */
  fa_grid grid;
  int workspace_floats_per_row;
  char target[32];             /* e.g. "sm_90a"; "" when not given */
  char passes[512];            /* comma separated; "" when not given */
  fa_decode_info decode;       /* mode decode only; see fa_decode */
} fa_kernel_info;

/* Parses metadata lines from `len` bytes of `text` (a whole PTX file or the
 * output of `flashc -emit=meta`; need not be NUL-terminated). Lines of the
 * form `// flashc.meta KEY VALUE` are read (the `//` is optional); all other
 * lines are ignored. On success fills *out and returns FA_OK. Otherwise
 * returns FA_ERR_META (or FA_ERR_NULL_POINTER) and writes a message naming
 * the key and line into err (when err is not NULL; truncated to errlen). */
fa_status fa_meta_parse(const char *text, size_t len, fa_kernel_info *out, char *err,
                        size_t errlen);

/* ---- tensors and launch arguments -------------------------------------- */

/* A strided 4-D tensor in device memory. dims/strides are in the ABI order
 * [batch, seqlen, heads, head_dim]; strides count elements, not bytes. The
 * last dimension must be contiguous (stride[3] == 1). */
typedef struct fa_tensor {
  void *data;          /* device address; may be NULL only when the tensor has no elements */
  fa_dtype dtype;
  int64_t dim[4];
  int64_t stride[4];
} fa_tensor;

/* Arguments of one forward launch.
 *   q [batch, seqlen_q, heads,    head_dim]
 *   k [batch, seqlen_k, kv_heads, head_dim]
 *   v [batch, seqlen_k, kv_heads, v_head_dim]
 *   o [batch, seqlen_q, heads,    v_head_dim]   (written)
 *   lse: NULL when not wanted, else float32 [batch, heads, seqlen_q],
 *        contiguous, 4-byte aligned (written; natural log; -inf for fully
 *        masked rows).
 *   stream: a CUstream, NULL for the legacy default stream. */
typedef struct fa_forward_args {
  fa_tensor q, k, v, o;
  float *lse;
  void *stream;
} fa_forward_args;

/* Fills `t` as a contiguous [d0, d1, d2, d3] tensor of `dtype` at `data`
 * (strides d1*d2*d3, d2*d3, d3, 1). A convenience; returns t, or NULL when a
 * dim is negative or a stride overflows int64 (t is then filled with strides
 * that every launch check refuses, with a message saying so). */
fa_tensor *fa_tensor_contiguous(fa_tensor *t, void *data, fa_dtype dtype, int64_t d0,
                                int64_t d1, int64_t d2, int64_t d3);

/* Validates a forward launch against the kernel's metadata without touching
 * any GPU: NULL pointers, dtypes, every dimension against the metadata and
 * the other tensors (batch, seqlen_q of Q and O, seqlen_k of K and V, heads,
 * kv_heads, head dims), strides (last dim contiguous, none negative, O not
 * overlapping itself, O/LSE not overlapping an input), alignment (data 16
 * bytes, strides multiples of 8 elements, lse 4 bytes) and sizes (batch,
 * seqlens <= INT32_MAX; batch*heads*seqlen_q <= INT32_MAX; every byte offset
 * < 2^62; grid y/z <= 65535, grid x <= 2^31-1). Returns FA_OK or the first
 * failure's status and writes a message such as
 * "k: head_dim is 64 but the kernel was compiled for 128" into msg (when not
 * NULL). A launch with batch == 0 or seqlen_q == 0 is valid (FA_OK) and
 * fa_forward launches nothing for it; seqlen_k == 0 is valid too and is
 * launched: every row is fully masked (O = 0, LSE = -inf). */
fa_status fa_forward_check(const fa_kernel_info *info, const fa_forward_args *args, char *msg,
                           size_t msglen);

/* The launch geometry fa_forward uses for `batch` x `seqlen_q` (grid[3] =
 * x, y, z; block = info->threads). Returns FA_ERR_TOO_LARGE when a grid
 * dimension exceeds the CUDA limits, FA_ERR_NULL_POINTER for NULL. */
fa_status fa_forward_grid(const fa_kernel_info *info, int64_t batch, int64_t seqlen_q,
                          unsigned grid[3]);

/* ---- context ----------------------------------------------------------- */

typedef struct fa_context fa_context;

/* Opens the driver (dlopen libcuda.so.1, or the path in the environment
 * variable FLASHC_LIBCUDA), initializes it and retains the primary context
 * of GPU `device` (the context the CUDA runtime and PyTorch use, so their
 * device pointers and streams work here). On success *out is the new
 * context. On failure *out is NULL, the status is FA_ERR_NO_DEVICE (no
 * driver, no GPU, ordinal too large), FA_ERR_INVALID_ARGUMENT (negative
 * ordinal), FA_ERR_CUDA or FA_ERR_OUT_OF_MEMORY, and err (when not NULL)
 * receives the reason. */
fa_status fa_context_create(int device, fa_context **out, char *err, size_t errlen);

/* Releases the context. Modules loaded in it stay usable: the context is
 * freed when the last of them is destroyed. NULL is a no-op. */
void fa_context_destroy(fa_context *ctx);

/* The message of the last failed call on ctx ("" after a success). For NULL
 * returns a static message. Valid until the next call on ctx. */
const char *fa_context_errmsg(const fa_context *ctx);

/* The device ordinal of ctx (-1 for NULL). */
int fa_context_device(const fa_context *ctx);

/* ---- module ------------------------------------------------------------ */

typedef struct fa_module fa_module;

/* Loads a flashc PTX (`len` bytes, need not be NUL-terminated) whose
 * metadata comment lines are at its top: parses the metadata, JIT-compiles
 * the PTX through the driver (the JIT's error and info logs go into the
 * context's message on failure), resolves the entry point named by the
 * metadata, raises its dynamic shared memory limit to smem_bytes and checks
 * that `threads` fits the compiled function. On failure *out is NULL and
 * fa_context_errmsg(ctx) says why (FA_ERR_META, FA_ERR_LOAD, ...). */
fa_status fa_module_load_ptx(fa_context *ctx, const char *ptx, size_t len, fa_module **out);

/* Reads the file at `path` and loads it as fa_module_load_ptx does. */
fa_status fa_module_load_ptx_file(fa_context *ctx, const char *path, fa_module **out);

/* Loads a cubin (or fatbin) image of `cubin_len` bytes with the metadata
 * text of the same kernel (`flashc -emit=meta`) beside it. Otherwise as
 * fa_module_load_ptx. */
fa_status fa_module_load_cubin(fa_context *ctx, const void *cubin, size_t cubin_len,
                               const char *meta, size_t meta_len, fa_module **out);

/* Unloads the module and frees its device scratch (workspace and LSE). Waits
 * for nothing: the caller must have synchronized the streams it launched
 * on. NULL is a no-op. */
void fa_module_destroy(fa_module *mod);

/* The message of the last failed call on mod ("" after a success). For
 * NULL returns a static message. */
const char *fa_module_errmsg(const fa_module *mod);

/* The JIT's info log of the load (may be ""). NULL for NULL. */
const char *fa_module_jit_log(const fa_module *mod);

/* The kernel's metadata; owned by mod, valid until it is destroyed. NULL
 * for NULL. */
const fa_kernel_info *fa_module_info(const fa_module *mod);

/* Validates `args` with fa_forward_check (the status and message of a
 * failure are returned / kept in mod), makes sure the device scratch the
 * ABI needs exists (LSE scratch when args->lse is NULL, the workspace when
 * the metadata asks for one: allocated on first use, grown when a launch
 * needs more, freed by fa_module_destroy) and launches the kernel on
 * args->stream. Asynchronous: errors inside the kernel show at the next
 * synchronization. batch == 0 or seqlen_q == 0 launches nothing.
 * The scratch is shared by all launches of mod: launches that use it on
 * different streams must be ordered by the caller. */
fa_status fa_forward(fa_module *mod, const fa_forward_args *args);

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
} fa_decode_args;

/* Validates a decode launch against a decode kernel's metadata without
 * touching any GPU: as fa_forward_check (NULLs, dtypes, dims against the
 * metadata and each other, strides, alignment, overlap of the outputs,
 * sizes) plus q_len in 1..q_len_max, the cache layout (page_size against
 * k/v's dim 1, block table dims, capacity <= INT32_MAX), the int32
 * pointers' alignment, nsplit, and with host copies every cache length in
 * [0, capacity] and every needed block-table entry in [0, num_pages).
 * batch == 0 or q_len == 0 is valid and launches nothing. Returns FA_OK or
 * the first failure's status with a message in msg (when not NULL). */
fa_status fa_decode_check(const fa_kernel_info *info, const fa_decode_args *args, char *msg,
                          size_t msglen);

/* Whether a `split = auto` launch of (batch, kv_heads) pairs on a GPU of
 * `sm_count` SMs runs the module's small-batch variant (metadata
 * wide_kernel) instead of its kernel: when it has one, one block per SM
 * gives every pair at least FA_DECODE_WIDE_SPLITS splits, and the longest
 * cache (max_seqlen) holds at least FA_DECODE_WIDE_KEYS keys. 0 or 1. */
int fa_decode_variant(const fa_kernel_info *info, int64_t batch, int64_t kv_heads,
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
int fa_decode_splits(const fa_kernel_info *info, int64_t batch, int64_t kv_heads,
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
fa_status fa_decode_plan(const fa_kernel_info *info, const fa_decode_args *args, int sm_count,
                         int *nsplit, size_t *workspace_bytes, int *wide);

/* Validates args (fa_decode_check), chooses nsplit (fa_decode_plan with
 * the device's SM count), makes sure the module's scratch holds the
 * workspace (and LSE when args->lse is NULL), launches the split kernel on
 * grid (nsplit, kv_heads, batch) and, when nsplit > 1, the combine kernel
 * on grid (heads, batch), both on args->stream. Asynchronous, like
 * fa_forward; the scratch is shared by the launches of mod. */
fa_status fa_decode(fa_module *mod, const fa_decode_args *args);

/* The nsplit of the last successful fa_decode on mod (0 before one). */
int fa_decode_last_nsplit(const fa_module *mod);
/* The split kernel the last successful fa_decode on mod launched (its
 * kernel or its small-batch variant); "" before one or for a NULL mod. */
const char *fa_decode_last_kernel(const fa_module *mod);

#ifdef __cplusplus
}
#endif

#endif /* FLASHC_RUNTIME_H */
