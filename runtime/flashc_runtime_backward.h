/* flashc_runtime_backward.h - part of the flashc runtime's public API:
 * backward launches (docs/backward.md): fa_backward_args,
 * fa_backward_check, fa_backward_plan, fa_backward.
 *
 * flashc_runtime.h includes it (and every part, in order, after the types
 * they share); including this file alone includes flashc_runtime.h first.
 */
#include "flashc_runtime.h"

#ifndef FLASHC_RUNTIME_BACKWARD_H
#define FLASHC_RUNTIME_BACKWARD_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---- backward (docs/backward.md) --------------------------------------- */

/* Arguments of one backward launch: the gradients of a forward launch's
 * loss with respect to q, k and v, given the upstream gradient dout. The
 * sizes are the forward's: batch = q.dim[0], seqlen_q = q.dim[1],
 * seqlen_k = k.dim[1] (a varlen launch: num_seqs, max_seqlen_q and
 * max_seqlen_k of varlen, the tensors packed and lse [heads, total_q]).
 *   q, k, v, o: the forward's inputs and output, as in fa_forward_args
 *   lse: the forward's LSE, float32 [batch, heads, seqlen_q], contiguous,
 *     4-byte aligned (required: give fa_forward an lse to write it into)
 *   dout [batch, seqlen_q, heads, v_head_dim]   (shaped like o)
 *   dq   [batch, seqlen_q, heads, head_dim]     (written; shaped like q)
 *   dk   [batch, seqlen_k, kv_heads, head_dim]  (written; shaped like k)
 *   dv   [batch, seqlen_k, kv_heads, v_head_dim] (written; shaped like v)
 *     Every tensor has the kernel's dtype; strides as any fa_tensor's.
 *   workspace, workspace_bytes: device memory of at least
 *     fa_backward_workspace_size bytes, 256-byte aligned, its contents
 *     undefined on entry and after; or NULL (and 0) for the module's own
 *     scratch (allocated on first use, grown when a launch needs more,
 *     freed by fa_module_destroy, shared by the module's launches).
 *   stream: a CUstream, NULL for the legacy default stream.
 *   mode: how dQ is summed over the K/V tiles (fa_backward_mode). */
typedef enum fa_backward_mode {
  /* The launch the kernel's metadata names (fa_kernel_info.backward_auto,
   * chosen by the compiler where it measured faster, docs/backward.md):
   * FA_BACKWARD_ATOMIC at head dim 128 with no mask or a causal one (no
   * dropout, no block lists), else FA_BACKWARD_DETERMINISTIC, and that too
   * for metadata without the key. Ask for FA_BACKWARD_DETERMINISTIC where
   * reruns must agree bitwise. A zeroed fa_backward_args asks for AUTO. */
  FA_BACKWARD_AUTO = 0,
  /* pre, bwd_kv, bwd_q: every element of dQ summed by one thread block in
   * a fixed order, so reruns are bitwise identical; S and dP recomputed
   * (seven matmuls per pair of tiles instead of five); no dq_acc. */
  FA_BACKWARD_DETERMINISTIC = 1,
  /* zero dq_acc, pre, bwd, post: dQ by float atomics into an f32
   * accumulator in the workspace; the last bits of dq vary from run to run.
   * dk and dv are reproducible in every mode. */
  FA_BACKWARD_ATOMIC = 2
} fa_backward_mode;

typedef struct fa_backward_args {
  fa_tensor q, k, v, o;
  const float *lse;
  fa_tensor dout;
  fa_tensor dq, dk, dv;
  void *workspace;
  size_t workspace_bytes;
  void *stream;
  int mode; /* fa_backward_mode */
  /* The forward launch's dropout (fa_forward_args): the same p, seed and
   * offset regenerate its mask. A module whose spec has `dropout` runs its
   * backward kernels with them (p = 0: every element kept); p > 0 on a
   * module without is FA_ERR_UNSUPPORTED. */
  double dropout_p;
  uint64_t seed, offset;
  /* The forward launch's run-time inputs (fa_input), the same values: the
   * backward kernels recompute its scores from them. They get no gradient
   * (a learned bias's is not computed). */
  const fa_input *inputs;
  int num_inputs;
  /* The forward launch's sequences (fa_varlen) for the backward of a
   * varlen kernel: the same values; lse is then its [heads, total_q] and
   * dq, dk, dv are packed like q, k, v. NULL for a padded batch. */
  const fa_varlen *varlen;
  /* Block lists for the kernels that visit lists, as fa_forward_args'
   * (the forward launch's fa_blocks serves its backward: it holds every
   * classifier of the module); NULL: fa_backward builds them. */
  const fa_blocks *blocks;
} fa_backward_args;

/* The workspace a backward launch of `mode` (fa_backward_mode) needs, in
 * bytes, into *bytes: delta, float32 [batch, heads, seqlen_q], then (the
 * atomic launch) dq_acc,
 * float32 [batch, seqlen_q, heads, head_dim], each part starting 256-byte
 * aligned (fa_backward_plan gives the offsets). `info` is the forward
 * kernel's metadata or any of its backward kernels' (they agree on heads
 * and head_dim). seqlen_k does not change the size; it is checked as the
 * launch would be. 0 when batch or seqlen_q is 0. For a varlen launch
 * (fa_varlen) pass num_seqs, max_seqlen_q and max_seqlen_k: its workspace
 * is that padded batch's. Returns
 * FA_ERR_NULL_POINTER, FA_ERR_INVALID_ARGUMENT (a negative size or
 * a mode not in fa_backward_mode), FA_ERR_META (an info fa_meta_parse would not
 * give), FA_ERR_UNSUPPORTED (a decode kernel), FA_ERR_TOO_LARGE (the size,
 * or an int32 kernel parameter or the delta row index, overflows), else
 * FA_OK. */
FA_API fa_status fa_backward_workspace_size(const fa_kernel_info *info, int64_t batch,
                                     int64_t seqlen_q, int64_t seqlen_k, int mode,
                                     size_t *bytes);

/* Validates a backward launch against the metadata of the forward kernel
 * or of any of its backward kernels (`info`) without touching any GPU:
 * everything fa_forward_check checks of q, k, v, o (NULL pointers, dtypes,
 * every dimension against the metadata and the other tensors, the GQA
 * ratio, strides, 16-byte alignment, int32 sizes and the LSE row index,
 * extents below 2^62 bytes, grid limits), the same of dout (shaped like o),
 * dq (like q), dk (like k), dv (like v); lse not NULL (unless there are no
 * rows) and 4-byte aligned; mode one of fa_backward_mode; a caller's workspace
 * 256-byte aligned and at least fa_backward_workspace_size bytes (NULL with
 * workspace_bytes 0 for the module's); the outputs dq, dk, dv not
 * overlapping themselves; and the outputs and the part of the workspace the
 * launch uses not overlapping any input (q, k, v, o, lse, dout) nor each
 * other (address ranges, as fa_forward_check); the run-time inputs as
 * fa_forward_check checks them, none overlapping dq, dk, dv or a caller's
 * workspace; a varlen launch (args->varlen) as fa_forward_check checks it,
 * of all eight tensors, the workspace sized for num_seqs x max_seqlen_q;
 * args->blocks and the block lists of a kernel that visits them as
 * fa_forward_check checks them. Returns FA_OK or the first
 * failure's status with a message naming the argument and the numbers in
 * msg (when not NULL), e.g. "dv: heads is 32 but the kernel was compiled
 * for kv_heads = 8 (...)". FA_ERR_UNSUPPORTED for a decode kernel.
 * batch == 0 (varlen: num_seqs == 0) is valid and launches nothing;
 * seqlen_q == 0 or seqlen_k == 0 are valid and launched (fa_backward_plan). */
FA_API fa_status fa_backward_check(const fa_kernel_info *info, const fa_backward_args *args, char *msg,
                            size_t msglen);

/* One step of a backward launch, in stream order. */
typedef enum fa_backward_op {
  FA_BACKWARD_LAUNCH = 0, /* launch kernels[kernel] on grid x block with smem bytes */
  FA_BACKWARD_ZERO        /* zero workspace bytes [offset, offset + bytes) (cuMemsetD32Async) */
} fa_backward_op;

typedef struct fa_backward_step {
  fa_backward_op op;
  fa_role role;           /* LAUNCH: the kernel's role */
  int kernel;             /* LAUNCH: its index in the kernels given to fa_backward_plan */
  unsigned grid[3];       /* LAUNCH: x, y, z */
  unsigned block;         /* LAUNCH: threads (metadata threads) */
  unsigned smem;          /* LAUNCH: dynamic shared memory (metadata smem_bytes) */
  int dropout;            /* LAUNCH: the kernel takes dropout's parameters (metadata dropout) */
  int dropout_torch;      /* LAUNCH: its keep decision is PyTorch's (metadata dropout_mask) */
  size_t offset, bytes;   /* ZERO: the range of the workspace */
  int varlen;             /* LAUNCH: the kernel takes a varlen launch's four parameters
                           * (metadata layout varlen; fa_backward_params) */
  int block_list;         /* LAUNCH: 1 when the kernel visits block lists (metadata
                           * block_list), 0 otherwise */
  fa_block_lists lists;   /* LAUNCH with block_list: those lists for the launch's sizes
                           * (kernel: the classifier's index in kernels), at args->blocks'
                           * addresses (NULL without: fa_backward builds them into its
                           * scratch and passes those) */
  int dq_acc_map_rows;    /* LAUNCH: the box rows of the kernel's dq_acc tensor map
                           * (metadata `tma dq_acc ROWS`: its last parameter, which the
                           * caller encodes, docs/abi.md "Tensor maps"); 0: none */
  int ntmaps;             /* LAUNCH: the kernel's tensor maps, its last parameters in this
                           * order (dq_acc's, or a staged run-time input's: `tma in_NAME
                           * ROWS`, which the caller encodes as fa_forward does) */
  fa_tmap_info tmaps[FA_MAX_TMAPS];
} fa_backward_step;

#define FA_BACKWARD_MAX_STEPS 5

/* What fa_backward does for one launch: the workspace layout and the steps. */
typedef struct fa_backward_schedule {
  size_t workspace_bytes;               /* fa_backward_workspace_size */
  size_t delta_offset, delta_bytes;     /* delta f32 [batch, heads, seqlen_q] */
  size_t dq_acc_offset, dq_acc_bytes;   /* dq_acc f32 [batch, seqlen_q, heads, head_dim];
                                         * bytes 0 but in the atomic launch */
  int nsteps;
  fa_backward_step step[FA_BACKWARD_MAX_STEPS];
  /* The run-time inputs every launched kernel declares (they agree:
   * docs/abi.md), whose parameters fa_backward_params appends. */
  int ninputs;
  fa_input_info inputs[FA_MAX_INPUTS];
} fa_backward_schedule;

/* Plans the backward of a module's forward kernel. `kernels` are a
 * module's kernels (fa_meta_parse_module, or fa_module_kernel_info 0..n-1):
 * kernels[0] is the forward kernel (or one of its backward kernels, whose
 * `forward` then names it); its backward kernels are the mode backward
 * ones whose `forward` names it. Validates args (fa_backward_check against
 * each kernel it launches) and fills *plan:
 *   FA_BACKWARD_ATOMIC: ZERO dq_acc, pre, main, [dv,] post
 *   FA_BACKWARD_DETERMINISTIC (and AUTO, today): pre, kv, [dv,] q
 * (dv where the module has a kernel of role dv: split-dkdv)
 * grids: pre, post, q: (ceil(seqlen_q / tile_q), heads, batch) with each
 * kernel's own tile_q; main, kv: (ceil(seqlen_k / tile_kv), kv_heads,
 * batch); a varlen launch's with num_seqs, max_seqlen_q and max_seqlen_k
 * (its workspace too). A kernel whose grid is empty is left out, and writes nothing it
 * would have to: batch == 0 plans nothing; seqlen_q == 0 plans main (or
 * kv) alone, which writes dk = dv = 0 (no query to sum over); seqlen_k ==
 * 0 plans ZERO, pre and post (or pre and q), which write dq = 0. Returns
 * FA_ERR_UNSUPPORTED when kernels[0] has no backward kernels (its module
 * was compiled without `grad = true`) or lacks one this mode launches, a
 * check's failure, or FA_ERR_META for kernel infos that contradict their
 * role or declare run-time inputs other than the first launched kernel's,
 * or visit the lists of a classifier not among kernels; the message goes
 * to msg (when not NULL). A step whose kernel visits block lists has
 * block_list 1 and its lists (fa_backward_step). A step's kernel is its
 * role's, or that kernel's gathered copy (metadata gather_of) where a run-time
 * input it copies with a tensor map has a layout no map takes (docs/abi.md
 * "Tensor maps"). */
FA_API fa_status fa_backward_plan(const fa_kernel_info *kernels, int nkernels,
                           const fa_backward_args *args, fa_backward_schedule *plan, char *msg,
                           size_t msglen);

/* Validates and plans the backward of mod's forward kernel
 * (fa_backward_plan over the module's kernels; failures return their status
 * and leave the message in mod), makes sure the workspace exists (the
 * module's scratch when args->workspace is NULL) and runs the plan's steps
 * on args->stream in order. A varlen launch without host copies of its
 * cu_seqlens synchronizes args->stream and copies them to the host first,
 * to validate them as fa_forward does. Kernels that visit block lists read
 * args->blocks' (checked as fa_forward checks it), or, without one,
 * fa_backward first builds the lists they need into module scratch on
 * args->stream (each classifier once: the deterministic launch has two,
 * rows for role q and cols for kv and dv, the atomic one cols alone).
 * FA_ERR_UNSUPPORTED, with a message saying so,
 * when the module was compiled without `grad = true`; FA_ERR_CUDA when
 * the atomic launch's memset is missing from the driver (use
 * FA_BACKWARD_DETERMINISTIC). Asynchronous, like fa_forward: errors inside the kernels show at the
 * next synchronization. */
FA_API fa_status fa_backward(fa_module *mod, const fa_backward_args *args);

#ifdef __cplusplus
}
#endif

#endif /* FLASHC_RUNTIME_BACKWARD_H */
