/* flashc_runtime.h - the public header of the flashc runtime (the one to
 * include: it includes the parts below, one header a kernel kind).
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
 *
 * Contents, one section each, in this order (the types several kinds share
 * and the forward here; each other kind's launch arguments, checks and
 * launch in a header of its own, included at the end):
 *   status codes
 *   kernel metadata: dtypes, modes, roles; run-time inputs; decode keys;
 *     fa_kernel_info, fa_meta_parse, fa_meta_parse_module
 *   tensors and run-time input values: fa_tensor, fa_input
 *   variable-length batches: fa_varlen
 *   block lists, the types launch arguments hold: fa_block_lists, fa_blocks
 *   context, module
 *   forward: fa_forward_args, fa_forward_check, fa_forward_grid, fa_forward
 *   dropout: fa_dropout_mask
 *   flashc_runtime_decode.h: fa_decode_args, fa_decode_check, fa_decode_plan,
 *     fa_decode, ...
 *   flashc_runtime_backward.h: fa_backward_args, fa_backward_plan,
 *     fa_backward, ...
 *   flashc_runtime_params.h: kernel parameter lists of every kind: fa_param,
 *     fa_forward_params, fa_decode_params, fa_backward_params
 *   flashc_runtime_blocks.h: block lists, the functions: fa_classifier_grid,
 *     fa_block_lists_shape, fa_blocks_check, fa_blocks_params,
 *     fa_blocks_create, ...
 */
#ifndef FLASHC_RUNTIME_H
#define FLASHC_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FA_RUNTIME_VERSION "0.1.0"

/* Marks the library's interface: the shared libraries are built with hidden
 * visibility and export exactly the functions declared FA_API. */
#if defined(__GNUC__)
#define FA_API __attribute__((visibility("default")))
#else
#define FA_API
#endif
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
FA_API const char *fa_status_string(fa_status status);

/* ---- kernel metadata --------------------------------------------------- */

/* Element types. Q, K, V, O are f16 or bf16; f32 and i32 are those of
 * LSE, the workspace and run-time inputs (fa_input_info). */
typedef enum fa_dtype {
  FA_DTYPE_F16 = 0, FA_DTYPE_BF16 = 1, FA_DTYPE_F32 = 2, FA_DTYPE_I32 = 3
} fa_dtype;
/* FA_MODE_BLOCKS: a classifier kernel that writes block lists (docs/abi.md,
 * "Block lists"; fa_blocks). */
typedef enum fa_mode {
  FA_MODE_FORWARD = 0, FA_MODE_BACKWARD, FA_MODE_DECODE, FA_MODE_BLOCKS
} fa_mode;
typedef enum fa_mask { FA_MASK_NONE = 0, FA_MASK_CAUSAL, FA_MASK_WINDOW, FA_MASK_EXPR } fa_mask;
/* Grid x: one block per Q tile (FA2 sequence parallelism) or one for all of Q (FA1 order);
 * decode kernels: `splits,kv_heads,batch` (docs/decode.md); the K/V-outer backward
 * kernels: `k_tiles,kv_heads,batch`, one block per K/V tile (docs/backward.md);
 * classifier kernels (mode blocks): `row_tiles,list_heads,batch`, one block per list;
 * a two-phase classifier's classes kernel (key chunk C): `row_tiles*chunks,list_heads,batch`,
 * x = row_tiles * ceil(steps / C), one block per C steps of a list; a persistent forward
 * (`persistent`): x blocks, at most the device's SMs, that walk the q_tiles x heads x batch
 * tiles (their count is the kernel's gridDim.x: no parameter). */
typedef enum fa_grid {
  FA_GRID_Q_TILES = 0, FA_GRID_ONE, FA_GRID_SPLITS, FA_GRID_K_TILES, FA_GRID_ROW_TILES,
  FA_GRID_ROW_CHUNKS, FA_GRID_PERSISTENT
} fa_grid;
/* Which way a classifier's lists run (metadata key `blocks rows|cols N`;
 * docs/abi.md, "Block lists"): ROWS, one list per Q tile (the K/V tiles it
 * visits: the forward, NAME_dropout, the backward's role q); COLS, one per
 * K/V tile (the Q tiles: the roles main, kv, dv). NONE: no lists. */
typedef enum fa_blocks_orient {
  FA_BLOCKS_NONE = 0, FA_BLOCKS_ROWS, FA_BLOCKS_COLS
} fa_blocks_orient;
/* Which kernel of a backward pass a mode backward kernel is (metadata key
 * role; docs/backward.md): NAME_bwd_pre, NAME_bwd, NAME_bwd_kv, NAME_bwd_q,
 * NAME_bwd_post, NAME_bwd_dv. FA_ROLE_NONE for forward and decode kernels. */
typedef enum fa_role {
  FA_ROLE_NONE = 0,
  FA_ROLE_PRE,  /* delta = rowsum(dO o O) */
  FA_ROLE_MAIN, /* dK, dV and dQ by atomic adds into dq_acc */
  FA_ROLE_KV,   /* dK, dV (deterministic mode) */
  FA_ROLE_Q,    /* dQ (deterministic mode) */
  FA_ROLE_POST, /* dQ = cast(scale * dq_acc) */
  FA_ROLE_DV,   /* dV alone, in both launches, where the module has one (large head
                 * dims: its main and kv kernels then make dK and dQ only) */
  FA_ROLE_COUNT_
} fa_role;

/* Static name of a dtype ("f16", "bf16", "f32", "i32"); "?" when out of range. */
FA_API const char *fa_dtype_name(fa_dtype dtype);

/* Static name of a role as the metadata spells it ("pre", "main", "kv", "q",
 * "post", "dv"; "none" for FA_ROLE_NONE); "?" when out of range. */
FA_API const char *fa_role_name(fa_role role);

#define FA_NAME_MAX 128

/* ---- kernel metadata: tensor maps (docs/abi.md, "Tensor maps") -------- */

/* The most tensor maps one kernel takes (Q's, K's, V's and a staged
 * run-time input's). */
#define FA_MAX_TMAPS 4



/* ---- kernel metadata: run-time inputs (docs/abi.md, "Run-time inputs") */

/* The most run-time inputs one kernel may declare. */
#define FA_MAX_INPUTS 8
/* Room for an input's name: a C identifier of at most 63 characters. */
#define FA_INPUT_NAME_MAX 64

/* A dimension of a tensor input that is one of the launch's sizes rather
 * than a constant: batch is q's dim 0, seqlen_q q's dim 1, seqlen_k k's
 * dim 1 (the metadata spells them batch, seqlen_q, seqlen_k). */
typedef enum fa_input_dim {
  FA_INPUT_DIM_BATCH = -1,
  FA_INPUT_DIM_SEQLEN_Q = -2,
  FA_INPUT_DIM_SEQLEN_K = -3
} fa_input_dim;

/* One run-time input a kernel declares (a metadata line
 * `// flashc.meta input NAME DTYPE [DIMS]`): a tensor (rank 1..4) or a
 * scalar (rank 0) that the spec's mask and score expressions read, bound
 * by name at each launch (fa_input). The kernel's parameters hold one
 * group per input, in declaration order. */
typedef struct fa_input_info {
  char name[FA_INPUT_NAME_MAX]; /* a C identifier, unique within the kernel */
  fa_dtype dtype;               /* tensors: i32, f32, f16 or bf16; scalars: f32 or i32 */
  int rank;                     /* 0 for a scalar, else the tensor's dims, 1..4 */
  int dims[4];                  /* dims[0..rank): > 0 a constant (below 2^31), else an
                                 * fa_input_dim; 0 past the rank */
} fa_input_info;

/* One tensor map a kernel takes (a metadata line `tma q|k|v ROWS`, `tma
 * in_NAME ROWS`: a run-time input's tile, passes/stage_inputs.c, or `tma
 * dq_acc ROWS`: the atomic backward's dQ sums, codegen/mem_global.c). */
typedef struct fa_tmap_info {
  char tensor;                    /* 'q', 'k', 'v', 'i' for the input named `input`,
                                   * 'a' for dq_acc */
  int rows;                       /* the box's rows, 1..256 (its columns: 64; dq_acc 32) */
  char input[FA_INPUT_NAME_MAX];  /* the input's name ("" for q, k, v) */
} fa_tmap_info;

/* ---- kernel metadata: decode keys (docs/decode.md) --------------------- */

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

/* ---- kernel metadata: the kernel, parsing ------------------------------ */

/* What the `// flashc.meta KEY VALUE` lines say (docs/abi.md, "Metadata").
 * Required keys: version, kernel, dtype, head_dim, heads, kv_heads, tile_q,
 * threads, smem_bytes, grid. Optional keys and their defaults: mode
 * (forward), v_head_dim (head_dim), mask (none), tile_kv, warps, stages (0 =
 * not given), workspace_floats_per_row (0), scale (0 = not given, the spec's
 * default 1/sqrt(head_dim) is meant), target, passes (""), input and
 * require (one line each; none by default), layout (padded; varlen for a
 * `varlen = true` spec's kernels, never with mode decode, the dropout keys
 * or an input's seqlen dim), blocks and block_list (docs/abi.md, "Block
 * lists"). Mode backward requires role and forward (and tile_kv with grid
 * k_tiles,kv_heads,batch); mode blocks requires forward, blocks, tile_kv
 * and grid row_tiles,list_heads,batch. Unknown keys are ignored. */
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
  /* Mode backward only (docs/backward.md); FA_ROLE_NONE and "" otherwise. */
  fa_role role;                /* key role */
  char forward[FA_NAME_MAX];   /* key forward: the forward kernel this one differentiates */
  /* Dropout (docs/dropout.md): key dropout, the spec's p, on the kernels that take
   * dropout's launch parameters (0 on the others); key dropout_of on the forward kernel
   * with dropout: its plain forward kernel ("" otherwise). */
  double dropout;
  char dropout_of[FA_NAME_MAX];
  int dropout_torch; /* key dropout_mask torch (every kernel of a spec with `dropout_mask =
                      * torch`): PyTorch's flash-backend mask; else 0: the exact one */
  /* Run-time inputs (docs/abi.md): key input, one line per input in ABI
   * order (forward, dropout, backward and decode kernels; a decode kernel's
   * dims are batch, seqlen_q = q_len or constants, and its wide variant
   * takes the same, its combine kernel none), and key require (never on
   * decode), a condition on the launch's sizes the kernel's indexing of
   * its inputs needs. A module's backward kernels and NAME_dropout declare
   * exactly their forward kernel's. */
  int ninputs;                         /* 0..FA_MAX_INPUTS */
  fa_input_info inputs[FA_MAX_INPUTS]; /* inputs[0..ninputs) */
  int require_q_le_k;                  /* `require seqlen_q<=seqlen_k` */
  int require_k_le_q;                  /* `require seqlen_k<=seqlen_q` */
  /* Key layout (docs/abi.md, "Variable-length batches"): 1 for `layout
   * varlen`, a kernel of a `varlen = true` spec (forward and backward
   * kernels): packed sequences, launched with fa_varlen; 0 for `layout
   * padded` or no layout line (a padded batch). A module's kernels agree. */
  int varlen;
  /* Block lists (docs/abi.md, "Block lists"; never with layout varlen).
   * A classifier kernel (mode blocks, grid row_tiles,list_heads,batch, or
   * row_tiles*chunks,list_heads,batch for a classes kernel: see chunk;
   * `forward` names the spec's forward kernel; no dropout, no workspace)
   * has the key `blocks rows|cols N`: its lists' orientation and
   * list_heads N (1 when the mask does not read h, else heads). A kernel
   * that visits lists (mode forward, NAME_dropout included, or the
   * backward roles q, main, kv, dv) has the key `block_list NAME`: its
   * classifier, a kernel of the same module made for the same spec
   * (`forward`), with the orientation its role visits (rows: forward and
   * q; cols: main, kv, dv), its tile_q and tile_kv, and its run-time inputs
   * and requires; fa_meta_parse_module copies that classifier's blocks and
   * list_heads into the visiting kernel's info. FA_BLOCKS_NONE, 0 and ""
   * where not given. */
  fa_blocks_orient blocks; /* key blocks (a visiting kernel: its classifier's) */
  int list_heads;          /* key blocks' N, 1..65535 (likewise) */
  char block_list[FA_NAME_MAX]; /* key block_list: the classifier's kernel name */
  /* Two-phase classifiers (docs/abi.md, "Block lists"): the classifier a
   * visiting kernel names may have the key `classes NAME`, its classes
   * kernel (phase 1: mode blocks, the same forward, blocks, tiles and
   * inputs, key `chunk C`, grid row_tiles*chunks,list_heads,batch), which
   * classifies C steps a block and is launched just before it with the same
   * parameters; the classifier (phase 2) then compacts each list in place.
   * 0 and "" where not given. */
  int chunk;                 /* key chunk: steps per block, 1..65536 (classes kernels) */
  char classes[FA_NAME_MAX]; /* key classes: the classes kernel's name (phase 2) */
  /* Tensor maps (docs/abi.md, "Tensor maps"; mode forward, padded batches
   * only): key tma, one line `tma q|k|v ROWS` per map in parameter order. The
   * kernel's producer copies K and V (a persistent kernel's Q too) with TMA, and its last parameters are
   * one CUtensorMap (128 bytes, by value) per line, which fa_forward encodes
   * at each launch from the tensor's pointer, dims and strides, with boxes
   * of 64 columns by ROWS rows and the 128-byte swizzle. */
  int ntmaps;                          /* 0..FA_MAX_TMAPS */
  fa_tmap_info tmaps[FA_MAX_TMAPS];    /* tmaps[0..ntmaps) */
  /* Key gather_of (passes/stage_inputs.c): this kernel is the plain forward
   * kernel NAME with its input tiles gathered instead of copied by tensor
   * maps; fa_forward launches it where an input's layout is one a tensor map
   * cannot take (an odd row length, a base off 16 bytes, a
   * stride 0, a strided last dim). "" otherwise. */
  char gather_of[FA_NAME_MAX];
  /* Keys long_rows_of and long_rows_min (passes/long_rows_variant.c): this
   * kernel is the plain forward kernel NAME on other tiles, which
   * fa_forward launches instead of it where seqlen_q and seqlen_k are both
   * at least long_rows_min (padded batches without dropout or block
   * lists). "" and 0 otherwise; each key needs the other. */
  char long_rows_of[FA_NAME_MAX];
  int long_rows_min;
  /* Key backward_auto (codegen/meta_backward.c) on a forward kernel with a
   * backward and on each of its backward kernels: the launch
   * FA_BACKWARD_AUTO runs, 1 deterministic or 2 atomic (fa_backward_mode's
   * values, docs/backward.md); 0 when absent (PTX of an older flashc:
   * deterministic). */
  int backward_auto;
} fa_kernel_info;

/* Parses metadata lines from `len` bytes of `text` (a whole PTX file or the
 * output of `flashc -emit=meta`; need not be NUL-terminated). Lines of the
 * form `// flashc.meta KEY VALUE` are read (the `//` is optional); all other
 * lines are ignored. On success fills *out and returns FA_OK; for a text of
 * several kernels (fa_meta_parse_module), every kernel is checked and *out
 * is the first. Otherwise returns FA_ERR_META (or FA_ERR_NULL_POINTER) and
 * writes a message naming the key and line into err (when err is not NULL;
 * truncated to errlen). */
FA_API fa_status fa_meta_parse(const char *text, size_t len, fa_kernel_info *out, char *err,
                        size_t errlen);

/* The most kernels one module's metadata may describe. */
#define FA_MODULE_MAX_KERNELS 16

/* A module may hold several kernels (a forward kernel compiled with
 * `grad = true` and its five backward kernels): one block of metadata lines
 * per kernel, each beginning with its `version` line (as flashc writes
 * them; within a single block the lines may come in any order). Parses
 * every block of `len` bytes of `text` into out[0..*count) in file order
 * (out must have room for FA_MODULE_MAX_KERNELS) and checks them together:
 * kernel names differ, a backward kernel's `forward` names no kernel of the
 * module or a forward kernel of the same attention (dtype, head dims,
 * heads, kv_heads, mask, scale), and a forward kernel has at most one
 * backward kernel of each role. fa_meta_parse makes the same checks and
 * returns the first block. Failures as fa_meta_parse's (FA_ERR_META naming
 * the line). */
FA_API fa_status fa_meta_parse_module(const char *text, size_t len, fa_kernel_info *out, int *count,
                               char *err, size_t errlen);

/* ---- tensors and run-time input values --------------------------------- */

/* A strided 4-D tensor in device memory. dims/strides are in the ABI order
 * [batch, seqlen, heads, head_dim]; strides count elements, not bytes. The
 * last dimension must be contiguous (stride[3] == 1). */
typedef struct fa_tensor {
  void *data;          /* device address; may be NULL only when the tensor has no elements */
  fa_dtype dtype;
  int64_t dim[4];
  int64_t stride[4];
} fa_tensor;

/* A value for one of the kernel's run-time inputs (fa_input_info) at a
 * launch: the args' `inputs[0..num_inputs)` bind each declared input once,
 * by name, in any order.
 *   name: the declared name.
 *   tensor: for a tensor input: data, dtype (the declared one), and
 *     dim[0..rank) / stride[0..rank) (strides in elements; entries past the
 *     rank are ignored). Dims must equal the declared ones at this launch;
 *     any stride >= 0 is fine (0 broadcasts; no dimension need be
 *     contiguous); data aligned to the element size, NULL only without
 *     elements. The kernel reads it; it must not overlap an output.
 *   value: for a scalar input: a finite number within f32 range (f32), or
 *     an integer within int32 range (i32). */
typedef struct fa_input {
  const char *name;
  fa_tensor tensor;
  double value;
} fa_input;

/* Fills `t` as a contiguous [d0, d1, d2, d3] tensor of `dtype` at `data`
 * (strides d1*d2*d3, d2*d3, d3, 1). A convenience; returns t, or NULL when a
 * dim is negative or a stride overflows int64 (t is then filled with strides
 * that every launch check refuses, with a message saying so). */
FA_API fa_tensor *fa_tensor_contiguous(fa_tensor *t, void *data, fa_dtype dtype, int64_t d0,
                                int64_t d1, int64_t d2, int64_t d3);

/* ---- variable-length batches (docs/abi.md, "Variable-length batches") -- */

/* The sequences of a launch of a varlen kernel (fa_kernel_info.varlen;
 * FlashAttention's varlen API): num_seqs sequences packed one after another
 * without padding, sequence i holding query rows [cu_seqlens_q[i],
 * cu_seqlens_q[i+1]) of q, o, dout, dq and key rows [cu_seqlens_k[i],
 * cu_seqlens_k[i+1]) of k, v, dk, dv. Those tensors are then [1, total_q,
 * heads, d] and [1, total_k, kv_heads, d] (dim[0] must be 1; stride[0] is
 * not used), and the LSE is float32 [heads, total_q], contiguous. The
 * kernels run a padded batch's grid of num_seqs x max_seqlen_q (x
 * max_seqlen_k), and the workspaces (the forward's when
 * workspace_floats_per_row > 0, the backward's: fa_backward_workspace_size
 * of num_seqs, max_seqlen_q, max_seqlen_k) are sized as that padded batch's.
 *   cu_seqlens_q, cu_seqlens_k: device int32 [num_seqs + 1], 4-byte aligned:
 *     the prefix sums of the lengths (cu[0] = 0, non-decreasing,
 *     cu[num_seqs] = total_q = q.dim[1], resp. total_k = k.dim[1]).
 *   host_cu_seqlens_q, host_cu_seqlens_k: optional host copies of the same
 *     values. Given, the checks (fa_forward_check, fa_backward_check)
 *     validate them; without one, fa_forward and fa_backward synchronize
 *     the args' stream and copy the device array to the host to validate it
 *     before launching: pass the host copies to avoid that synchronization.
 *   num_seqs: the sequences, 0..65535 (grid z); 0 launches nothing.
 *   max_seqlen_q, max_seqlen_k: the longest sequence's lengths (or any
 *     bound on them), 1..2^31-1: every cu[i+1] - cu[i] must be at most
 *     these. They size the grid, the batch's padded workspace and the
 *     kernels' seqlen_q / seqlen_k parameters. */
typedef struct fa_varlen {
  const int32_t *cu_seqlens_q, *cu_seqlens_k;           /* device, [num_seqs + 1] prefix sums */
  const int32_t *host_cu_seqlens_q, *host_cu_seqlens_k; /* optional host copies of them */
  int num_seqs;
  int64_t max_seqlen_q, max_seqlen_k;
} fa_varlen;

/* ---- block lists: the types launch arguments hold (docs/abi.md) -------- */

/* The lists one classifier kernel (mode blocks) writes for a launch of
 * (batch, seqlen_q, seqlen_k): blk_list int32 [batch, list_heads,
 * row_tiles, list_len] and blk_count int32 [batch, list_heads, row_tiles],
 * contiguous (strides in elements), where row_tiles = ceil(seqlen_q /
 * tile_q) for rows lists (ceil(seqlen_k / tile_kv) for cols), steps the
 * other dim's tile count and list_len = steps + 1. Row r's count n and
 * entries 0..n-1 (2 * s + full, ascending in s) then the sentinel 2 * s'
 * (docs/abi.md). */
typedef struct fa_block_lists {
  int kernel;          /* the classifier's index among its module's kernels; -1 unknown */
  void *list, *count;  /* device addresses of blk_list and blk_count; NULL where none */
  int64_t list_dim[4], list_stride[4];
  int64_t count_dim[3], count_stride[3];
} fa_block_lists;

/* Every classifier's lists of one module for one launch size, built once
 * (fa_blocks_create) and given to any number of launches (args.blocks)
 * while the run-time inputs they were built from keep their values. */
typedef struct fa_blocks fa_blocks;

/* Arguments of fa_blocks_create: the sizes of the launches the lists are
 * for (batch = q's dim 0, seqlen_q = q's dim 1, seqlen_k = k's dim 1) and
 * the run-time inputs (fa_input) the classifiers read: every input the
 * module's forward kernel declares, with the values those launches bind.
 *   stream: a CUstream, NULL for the legacy default stream. */
typedef struct fa_blocks_args {
  int64_t batch, seqlen_q, seqlen_k;
  const fa_input *inputs;
  int num_inputs;
  void *stream;
} fa_blocks_args;

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
FA_API fa_status fa_context_create(int device, fa_context **out, char *err, size_t errlen);

/* Releases the context. Modules loaded in it stay usable: the context is
 * freed when the last of them is destroyed. NULL is a no-op. */
FA_API void fa_context_destroy(fa_context *ctx);

/* The message of the last failed call on ctx ("" after a success). For NULL
 * returns a static message. Valid until the next call on ctx. */
FA_API const char *fa_context_errmsg(const fa_context *ctx);

/* The device ordinal of ctx (-1 for NULL). */
FA_API int fa_context_device(const fa_context *ctx);

/* ---- module ------------------------------------------------------------ */

typedef struct fa_module fa_module;

/* Loads a flashc PTX (`len` bytes, need not be NUL-terminated) whose
 * metadata comment lines are at its top: parses the metadata, JIT-compiles
 * the PTX through the driver (the JIT's error and info logs go into the
 * context's message on failure), resolves the entry point named by the
 * metadata, raises its dynamic shared memory limit to smem_bytes and checks
 * that `threads` fits the compiled function. On failure *out is NULL and
 * fa_context_errmsg(ctx) says why (FA_ERR_META, FA_ERR_LOAD, ...). */
FA_API fa_status fa_module_load_ptx(fa_context *ctx, const char *ptx, size_t len, fa_module **out);

/* Reads the file at `path` and loads it as fa_module_load_ptx does. */
FA_API fa_status fa_module_load_ptx_file(fa_context *ctx, const char *path, fa_module **out);

/* Loads a cubin (or fatbin) image of `cubin_len` bytes with the metadata
 * text of the same kernel (`flashc -emit=meta`) beside it. Otherwise as
 * fa_module_load_ptx. */
FA_API fa_status fa_module_load_cubin(fa_context *ctx, const void *cubin, size_t cubin_len,
                               const char *meta, size_t meta_len, fa_module **out);

/* Unloads the module and frees its device scratch (workspace, LSE and the
 * block lists fa_forward / fa_backward build). Waits
 * for nothing: the caller must have synchronized the streams it launched
 * on. NULL is a no-op. */
FA_API void fa_module_destroy(fa_module *mod);

/* The message of the last failed call on mod ("" after a success). For
 * NULL returns a static message. */
FA_API const char *fa_module_errmsg(const fa_module *mod);

/* The JIT's info log of the load (may be ""). NULL for NULL. */
FA_API const char *fa_module_jit_log(const fa_module *mod);

/* The kernel's metadata; owned by mod, valid until it is destroyed. NULL
 * for NULL. For a module of several kernels, its first kernel's (the one
 * fa_forward / fa_decode launch). */
FA_API const fa_kernel_info *fa_module_info(const fa_module *mod);

/* How many kernels the module's metadata describes (fa_meta_parse_module;
 * 1 for most modules, 6 for a forward kernel with its backward); 0 for
 * NULL. A decode kernel's combine kernel and variant are not counted: they
 * are described by its own block. */
FA_API int fa_module_kernel_count(const fa_module *mod);

/* The metadata of the module's kernel i (0 <= i < fa_module_kernel_count,
 * in file order; 0 is fa_module_info's), NULL when out of range. Owned by
 * mod. */
FA_API const fa_kernel_info *fa_module_kernel_info(const fa_module *mod, int i);

/* ---- forward (docs/abi.md) --------------------------------------------- */

/* Arguments of one forward launch.
 *   q [batch, seqlen_q, heads,    head_dim]
 *   k [batch, seqlen_k, kv_heads, head_dim]
 *   v [batch, seqlen_k, kv_heads, v_head_dim]
 *   o [batch, seqlen_q, heads,    v_head_dim]   (written)
 *   lse: NULL when not wanted, else float32 [batch, heads, seqlen_q],
 *        contiguous, 4-byte aligned (written; natural log; -inf for fully
 *        masked rows).
 *   stream: a CUstream, NULL for the legacy default stream.
 *   dropout_p, seed, offset: dropout (docs/dropout.md). dropout_p in [0, 1);
 *     0 (a zeroed struct) launches the plain kernel: no dropout, no cost.
 *     p > 0 needs a module whose spec has `dropout` (its NAME_dropout
 *     kernel): O = (P o M / (1 - p)) V, the LSE that of the undropped
 *     scores, where M keeps element (b, h, q, k) as a pure function of
 *     (seed, offset, b, h, q, k) (fa_dropout_mask); fa_backward given the
 *     same three values regenerates M. Like PyTorch's CUDA generator,
 *     advance the offset (or change the seed) between training steps. */
typedef struct fa_forward_args {
  fa_tensor q, k, v, o;
  float *lse;
  void *stream;
  double dropout_p;
  uint64_t seed, offset;
  /* The kernel's run-time inputs (fa_input): every declared one bound
   * once; none (NULL, 0: a zeroed struct) for a kernel without. In a
   * varlen launch their batch dims are num_seqs. */
  const fa_input *inputs;
  int num_inputs;
  /* The sequences of a varlen kernel's launch (fa_varlen): required by a
   * kernel compiled with `varlen = true` (fa_kernel_info.varlen), refused
   * by any other; NULL (a zeroed struct) for a padded batch. */
  const fa_varlen *varlen;
  /* Block lists (docs/abi.md, "Block lists"; fa_blocks_create) made by this
   * module for this launch's batch, seqlen_q and seqlen_k from the same
   * run-time inputs' values: a kernel that visits lists (metadata
   * block_list) reads them instead of fa_forward building them first. NULL
   * (a zeroed struct): fa_forward builds the lists it needs at each launch. */
  const fa_blocks *blocks;
} fa_forward_args;

/* Validates a forward launch against the kernel's metadata without touching
 * any GPU: NULL pointers, dtypes, every dimension against the metadata and
 * the other tensors (batch, seqlen_q of Q and O, seqlen_k of K and V, heads,
 * kv_heads, head dims), strides (last dim contiguous, none negative, O not
 * overlapping itself, O/LSE not overlapping an input), alignment (data 16
 * bytes, strides multiples of 8 elements, lse 4 bytes) and sizes (batch,
 * seqlens <= INT32_MAX; batch*heads*seqlen_q <= INT32_MAX; every byte offset
 * < 2^62; the tensors' and lse's bytes within the address space; grid y/z
 * <= 65535, grid x <= 2^31-1) and dropout_p in [0, 1)
 * (whether the module has a dropout kernel is fa_forward's check), and the
 * run-time inputs (fa_input; docs/abi.md, "Run-time inputs"): each
 * declared input bound exactly once and no other; a tensor's dtype, its
 * dims against the declared ones at this launch, strides >= 0, data not
 * NULL (unless empty) and aligned to its element size, its extent below
 * 2^62 bytes and not overlapping O or LSE; a scalar finite within f32
 * range (f32) or an integer within int32 range (i32); the kernel's
 * `require`s of seqlen_q and seqlen_k. A varlen kernel (info->varlen)
 * needs args->varlen and a padded one refuses it; a varlen launch is
 * checked as docs/abi.md "Variable-length batches" says: num_seqs, the
 * cu_seqlens pointers (not NULL, 4-byte aligned, the num_seqs + 1 int32 of
 * each array and host copy within the address space), max_seqlen_q/k in
 * 1..2^31-1, every tensor's dim[0] 1, total_q and total_k (q's and k's dim
 * 1) and heads * total_q within int32, the padded num_seqs x heads x
 * max_seqlen_q rows too, and, given host copies, the cu_seqlens values
 * (starting at 0, non-decreasing, ending at the totals, no sequence longer
 * than its max_seqlen, the requires per sequence); its run-time inputs'
 * batch dims are num_seqs. Block lists (docs/abi.md, "Block lists"): a
 * kernel that visits them (info->block_list) needs the keys
 * fa_meta_parse_module gives it (FA_ERR_META otherwise: not varlen, a
 * forward kernel or a backward one of role q, main, kv or dv, blocks the
 * orientation its role visits, list_heads 1 or heads), its lists' int32
 * elements within INT32_MAX (fa_block_lists_shape; FA_ERR_TOO_LARGE), and
 * args->blocks, when given, must have been made for this launch's batch,
 * seqlen_q and seqlen_k (FA_ERR_SHAPE; whatever the kernel) and hold the
 * lists of info's classifier (FA_ERR_INVALID_ARGUMENT; fa_forward also
 * refuses an fa_blocks of another module). Returns FA_OK or the first
 * failure's status and writes a message such as
 * "k: head_dim is 64 but the kernel was compiled for 128" into msg (when not
 * NULL). A launch with batch == 0 or seqlen_q == 0 (varlen: num_seqs == 0
 * or total_q == 0) is valid (FA_OK) and fa_forward launches nothing for it;
 * seqlen_k == 0 is valid too and is launched: every row is fully masked
 * (O = 0, LSE = -inf). */
FA_API fa_status fa_forward_check(const fa_kernel_info *info, const fa_forward_args *args, char *msg,
                           size_t msglen);

/* The launch geometry fa_forward uses for `batch` x `seqlen_q` (grid[3] =
 * x, y, z; block = info->threads); a varlen launch's is num_seqs x
 * max_seqlen_q's. A persistent kernel (FA_GRID_PERSISTENT): x = its tiles
 * (q_tiles x heads x batch), y = z = 1; fa_forward launches at most the
 * device's SM count of them. Returns FA_ERR_TOO_LARGE when a grid
 * dimension exceeds the CUDA limits, FA_ERR_NULL_POINTER for NULL. */
FA_API fa_status fa_forward_grid(const fa_kernel_info *info, int64_t batch, int64_t seqlen_q,
                          unsigned grid[3]);

/* Validates `args` with fa_forward_check (the status and message of a
 * failure are returned / kept in mod; FA_ERR_UNSUPPORTED for dropout_p > 0
 * on a module without a dropout kernel), makes sure the device scratch the
 * ABI needs exists (LSE scratch when args->lse is NULL, the workspace when
 * the metadata asks for one: allocated on first use, grown when a launch
 * needs more, freed by fa_module_destroy) and launches the kernel on
 * args->stream. Asynchronous: errors inside the kernel show at the next
 * synchronization. batch == 0 or seqlen_q == 0 launches nothing.
 * A varlen launch (fa_varlen) without a host copy of cu_seqlens_q or
 * cu_seqlens_k first synchronizes args->stream and copies the device array
 * to the host (cuMemcpyDtoH) to validate its values as fa_forward_check
 * validates host copies (a failure returns its status, nothing launched);
 * its LSE scratch (args->lse NULL) is heads x total_q floats.
 * A kernel that visits block lists (metadata block_list; docs/abi.md,
 * "Block lists") reads args->blocks' (refused when made by another module
 * or for other sizes), or, without one, fa_forward first launches its
 * classifier kernel on args->stream into module scratch (grown as the LSE
 * scratch is; one classifier launch per fa_forward): build an fa_blocks
 * once (fa_blocks_create) to reuse the lists across launches.
 * The scratch is shared by all launches of mod: launches that use it on
 * different streams must be ordered by the caller. */
FA_API fa_status fa_forward(fa_module *mod, const fa_forward_args *args);

/* ---- dropout (docs/dropout.md) ----------------------------------------- */

/* Dropout's keep decisions (docs/dropout.md) for a launch of `info`'s
 * attention (its heads and its keep decision: exact, or PyTorch's with
 * dropout_torch) with dropout_p p, seed and offset, on the host:
 * mask[((b * heads + h) * seqlen_q + q) * seqlen_k + k] = 1 where element
 * (b, h, q, k) is kept, 0 where dropped (batch*heads*seqlen_q*seqlen_k
 * bytes). The definition the kernels evaluate, bit for bit: for tests,
 * debugging, and seeing which entries a launch kept (the attention mask is
 * not applied). FA_ERR_NULL_POINTER, FA_ERR_INVALID_ARGUMENT (p outside
 * [0, 1), a negative size), FA_ERR_TOO_LARGE (an index beyond 32 bits). */
FA_API fa_status fa_dropout_mask(const fa_kernel_info *info, double p, uint64_t seed, uint64_t offset,
                          int64_t batch, int64_t seqlen_q, int64_t seqlen_k, uint8_t *mask);

#ifdef __cplusplus
}
#endif

/* Each kernel kind's launches, in their own headers (they use the types
 * above, and the parameter lists use theirs). */
#include "flashc_runtime_decode.h"
#include "flashc_runtime_backward.h"
#include "flashc_runtime_params.h"
#include "flashc_runtime_blocks.h"

#endif /* FLASHC_RUNTIME_H */
