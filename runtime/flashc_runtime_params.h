/* flashc_runtime_params.h - part of the flashc runtime's public API: the
 * kernel parameter lists of every kind (docs/abi.md): fa_param,
 * fa_forward_params, fa_decode_params, fa_backward_params, for host
 * programs that launch the kernels themselves.
 *
 * flashc_runtime.h includes it (and every part, in order, after the types
 * they share); including this file alone includes flashc_runtime.h first.
 */
#include "flashc_runtime.h"

#ifndef FLASHC_RUNTIME_PARAMS_H
#define FLASHC_RUNTIME_PARAMS_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---- kernel parameter lists of every kind (docs/abi.md) ---------------- */

/* One kernel parameter as the ABI passes it (docs/backward.md; U32 and F32:
 * dropout's, docs/dropout.md; a run-time input's: PTR and I64 strides, or
 * F32 / I32, docs/abi.md; TMAP: a 128-byte CUtensorMap passed by value,
 * docs/abi.md "Tensor maps"). */
typedef enum fa_param_kind {
  FA_PARAM_PTR = 0, FA_PARAM_I32, FA_PARAM_I64, FA_PARAM_U32, FA_PARAM_F32, FA_PARAM_TMAP
} fa_param_kind;
typedef struct fa_param {
  fa_param_kind kind;
  const char *name;       /* static: "q", "delta", "batch", "q.sb", ...; a run-time
                           * input's: "input0" (its pointer or its scalar), "input0.s0"..
                           * "input0.s3" (its strides), numbered by declaration */
  int64_t value;          /* the address for PTR (0 for null); F32: the float's IEEE bits;
                           * TMAP ("tmap_q", "tmap_k", "tmap_v"): the map's index in info->tmaps,
                           * whose CUtensorMap the caller encodes (cuTensorMapEncodeTiled:
                           * docs/abi.md) */
} fa_param;

/* The longest list: 30 parameters (main, kv), 6 of dropout's, 4 of a
 * varlen launch's (never beside dropout's in a compiled module), 5 for
 * each of FA_MAX_INPUTS run-time inputs of rank 4, 9 of block lists (never
 * beside a varlen launch's). */
#define FA_BACKWARD_MAX_PARAMS 96

/* fa_forward's parameter list of kernel `info` (the module's forward
 * kernel, or its NAME_dropout when args->dropout_p > 0) in the order of
 * docs/abi.md: q, k, v, o, lse, workspace (ptr), batch, seqlen_q, seqlen_k
 * (i32), the q, k, v, o batch/seq/head strides (i64); then, for a varlen
 * kernel (info->varlen), cu_seqlens_q, cu_seqlens_k (ptr), total_q,
 * total_k (i32), batch, seqlen_q and seqlen_k being num_seqs, max_seqlen_q
 * and max_seqlen_k of args->varlen; then dropout's six for a kernel with
 * dropout (info->dropout), one group per run-time input of info (as
 * fa_backward_params), and for a kernel that visits block lists
 * (info->block_list) blk_list and blk_count (as fa_backward_params; their
 * shape fa_block_lists_shape's for the launch's sizes, their addresses
 * args->blocks' lists of that classifier, or 0 without args->blocks:
 * fa_forward passes the lists it builds); last, one FA_PARAM_TMAP per
 * tensor map of info (info->ntmaps: K's and V's, in info->tmaps' order;
 * value = the index, the map encoded by the caller as fa_forward does,
 * docs/abi.md "Tensor maps"). `lse` and `workspace` are the
 * device addresses fa_forward passes (the caller's LSE or the module's
 * scratch).
 * FA_ERR_INVALID_ARGUMENT for a varlen kernel without args->varlen;
 * FA_ERR_NULL_POINTER for NULL. Touches no GPU. */
FA_API fa_status fa_forward_params(const fa_kernel_info *info, const fa_forward_args *args,
                                   uint64_t lse, uint64_t workspace,
                                   fa_param params[FA_BACKWARD_MAX_PARAMS], int *count);

/* fa_decode's parameter list of the split kernel (and of its small-batch variant,
 * which takes the same) in the order of docs/decode.md: q, k, v, o, lse,
 * workspace, cache_seqlens, block_table (ptr), batch, q_len, capacity,
 * nsplit, bt_stride (i32), q, k, v, o batch/seq/head strides (i64), then
 * one group per run-time input of info, bound from args->inputs by name
 * (as fa_backward_params). `lse` and `workspace` are the device addresses
 * fa_decode passes. The combine kernel takes no inputs. Fills params and
 * *count; FA_ERR_NULL_POINTER for NULL. Touches no GPU. */
FA_API fa_status fa_decode_params(const fa_kernel_info *info, const fa_decode_args *args,
                                  int nsplit, uint64_t lse, uint64_t workspace,
                                  fa_param params[FA_BACKWARD_MAX_PARAMS], int *count);

/* The parameter list of step `step` of `plan` (a LAUNCH step) in the ABI
 * order of docs/backward.md: pointers, then batch, seqlen_q, seqlen_k
 * (i32), then each tensor's batch/seq/head strides in elements (i64), then,
 * for a varlen kernel (step.varlen), cu_seqlens_q, cu_seqlens_k (ptr),
 * total_q, total_k (i32: q's and k's dim 1; batch, seqlen_q and seqlen_k
 * are then num_seqs, max_seqlen_q and max_seqlen_k of args->varlen), then,
 * for a kernel with dropout (step.dropout), seed_lo, seed_hi, offset_lo,
 * offset_hi, keep_threshold (u32) and keep_scale (f32), then one group per
 * run-time input of plan->inputs, in order, bound from args->inputs by
 * name: a tensor's data pointer (ptr) and its rank strides in elements
 * (i64), a scalar's value (f32: the float's bits; i32), then, for a kernel
 * that visits block lists (step.block_list), blk_list (ptr, 4 i64
 * strides) and blk_count (ptr, 3 i64 strides) of step.lists; last, for a
 * main kernel that adds dQ through a tensor map (step.dq_acc_map_rows),
 * FA_PARAM_TMAP `tmap_dq_acc` (value 0: the CUtensorMap of dq_acc the
 * caller encodes, docs/abi.md "Tensor maps").
 * `workspace` is the device address of the workspace the plan's offsets
 * are from (args->workspace, or the module's scratch). Fills params and
 * *count (at most FA_BACKWARD_MAX_PARAMS). FA_ERR_INVALID_ARGUMENT for a
 * step that is not a launch, or a varlen step without args->varlen;
 * FA_ERR_NULL_POINTER for NULL. */
FA_API fa_status fa_backward_params(const fa_backward_schedule *plan, int step,
                             const fa_backward_args *args, uint64_t workspace,
                             fa_param params[FA_BACKWARD_MAX_PARAMS], int *count);

#ifdef __cplusplus
}
#endif

#endif /* FLASHC_RUNTIME_PARAMS_H */
