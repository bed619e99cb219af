/* internal.h - shared between the runtime's own files; not installed. */
#ifndef FLASHC_RUNTIME_INTERNAL_H
#define FLASHC_RUNTIME_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "flashc_runtime.h"

/* snprintf into buf[len] that tolerates buf == NULL / len == 0. */
void fa_fmt(char *buf, size_t len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Size in bytes of one element of dtype (0 when out of range). */
size_t fa_dtype_size(fa_dtype dtype);

/* ---- run-time inputs, requires and the layout in metadata (meta_inputs.c) ---- */

/* A run-time input as its metadata line spells it after the key:
 * "doc i32 batch,seqlen_k", "softcap f32". */
void fa_input_text_(const fa_input_info *x, char *buf, size_t len);

/* The lines of one kernel's metadata block that the functions below record
 * or name in a message: 1-based, 0 = not given. The fa_meta_take_*_
 * functions record input, require and layout; meta.c sets kernel. */
typedef struct fa_meta_lines {
  int kernel;               /* `kernel NAME` */
  int input[FA_MAX_INPUTS]; /* each `input` line, in ABI order */
  int require;              /* the first `require` line */
  int layout;               /* the `layout` line */
} fa_meta_lines;

/* One line of a kernel's block: `val` is the text after the key, `line` its
 * line number, recorded in `lines`. Into `in`:
 *  - input NAME DTYPE [DIMS]: one more run-time input, in ABI order (a C
 *    identifier not used before, at most FA_MAX_INPUTS, dims batch,
 *    seqlen_q, seqlen_k or constants, scalars f32 or i32);
 *  - require seqlen_q<=seqlen_k | seqlen_k<=seqlen_q (may repeat);
 *  - layout padded | varlen (in->varlen; meta.c refuses it twice).
 * FA_ERR_META with "metadata line L: KEY: what" in err[len] otherwise. */
fa_status fa_meta_take_input_(fa_kernel_info *in, fa_meta_lines *lines, int line,
                              const char *val, char *err, size_t len);
fa_status fa_meta_take_require_(fa_kernel_info *in, fa_meta_lines *lines, int line,
                                const char *val, char *err, size_t len);
fa_status fa_meta_take_layout_(fa_kernel_info *in, fa_meta_lines *lines, int line,
                               const char *val, char *err, size_t len);

/* The rules within a whole block (meta.c calls them once it is read, after
 * the backward keys and after the dropout keys respectively): a decode
 * kernel has no input with a seqlen_k dim and no require; `layout varlen`
 * and what it cannot go with (fa_varlen_meta_conflict_). The message names
 * the offending input, require or layout line. */
fa_status fa_meta_check_inputs_(const fa_kernel_info *in, const fa_meta_lines *lines,
                                char *err, size_t len);
fa_status fa_meta_check_layout_(const fa_kernel_info *in, const fa_meta_lines *lines,
                                char *err, size_t len);

/* How messages name what kernel x must agree with: "the backward of F" (a
 * backward kernel of forward F), "the block lists of F" (a classifier
 * kernel, mode blocks) or "the dropout kernel of F" (NAME_dropout). */
void fa_meta_agreement_(const fa_kernel_info *x, const char **of, const char **base);

/* The rules across a module's kernels: kernel x (a backward kernel or
 * NAME_dropout, lines xl) against ref (its forward or plain forward kernel,
 * or the first backward kernel of the same forward; lines refl), since one
 * launch's bindings and fa_varlen feed them all. same_inputs: the same
 * run-time inputs in the same order (naming x's first input line that
 * differs, its kernel line when it has too few), then the same requires;
 * same_layout: the same layout (naming x's layout line, else its kernel's). */
fa_status fa_meta_same_inputs_(const fa_kernel_info *x, const fa_meta_lines *xl,
                               const fa_kernel_info *ref, const fa_meta_lines *refl, char *err,
                               size_t len);
fa_status fa_meta_same_layout_(const fa_kernel_info *x, const fa_meta_lines *xl,
                               const fa_kernel_info *ref, const fa_meta_lines *refl, char *err,
                               size_t len);

/* launch.c's driver services for decode.c, which has no access to the
 * handles' insides. enter/leave bracket the others (the module's context
 * current on this thread); failures leave their message in the module. */
fa_status fa_module_enter_(fa_module *m);
void fa_module_leave_(fa_module *m);
/* The module's scratch grown to `bytes` at least; *base its device address. */
fa_status fa_module_scratch_(fa_module *m, size_t bytes, uint64_t *base);
/* The scratch's first `bytes` (a multiple of 4) zero before the next work
 * on `stream`: zeroes what is not known to be (cuMemsetD32Async on the
 * stream), and from then on only those bytes count as zero. Fused decode
 * kernels keep their arrival counters there and leave them zero. */
fa_status fa_module_zero_head_(fa_module *m, size_t bytes, void *stream);
/* A module's entry points: the kernel, a decode kernel's combine kernel and
 * its small-batch variant (metadata combine_kernel, wide_kernel). */
typedef enum fa_entry { FA_ENTRY_KERNEL = 0, FA_ENTRY_COMBINE, FA_ENTRY_WIDE } fa_entry;
/* Launches entry point `which`. */
fa_status fa_module_launch_(fa_module *m, fa_entry which, const unsigned grid[3], unsigned block,
                            unsigned smem, void *stream, void **params);
/* The module's kernels (fa_meta_parse_module's order) and their count. */
const fa_kernel_info *fa_module_kernels_(const fa_module *m, int *n);
/* Launches the module's kernel i (an index into fa_module_kernels_). */
fa_status fa_module_launch_kernel_(fa_module *m, int i, const unsigned grid[3], unsigned block,
                                   unsigned smem, void *stream, void **params);
/* Zeroes `bytes` (a multiple of 4) at device address `dst` on `stream`
 * (cuMemsetD32Async); `what` names the memory in a failure's message. */
fa_status fa_module_memset_(fa_module *m, uint64_t dst, size_t bytes, void *stream,
                            const char *what);
int fa_module_sm_count_(const fa_module *m);
char *fa_module_msg_(fa_module *m, size_t *len);
int *fa_module_last_nsplit_(fa_module *m);
int *fa_module_last_wide_(fa_module *m); /* the last fa_decode ran the small-batch variant */

/* Replaces ctx's message (the JIT library reports compile errors through it;
 * it cannot see struct fa_context). NULL ctx is a no-op. */
void fa_context_set_errmsg(fa_context *ctx, const char *msg);

/* ---- the checks of a launch's tensors (tensor_check.c) ---- */

#define FA_MAX_LAUNCH_TENSORS 8

/* The tensors of one launch (q, k, v, o first; the backward adds dout, dq,
 * dk, dv), their names, each one's dimension names, the kernel's dtype, and
 * where the message of a failure goes. */
typedef struct fa_launch_tensors {
  const fa_tensor *t[FA_MAX_LAUNCH_TENSORS];
  const char *name[FA_MAX_LAUNCH_TENSORS];
  const char *const *dims[FA_MAX_LAUNCH_TENSORS];
  fa_dtype dtype;
  char *msg;
  size_t len;
  int n; /* tensors in t */
} fa_launch_tensors;

/* The dimension names of a [batch, seqlen, heads, head_dim] tensor. */
extern const char *const fa_dim_names[4];

int fa_mul_ok(int64_t a, int64_t b, int64_t *r); /* a * b for a, b >= 0; 0 on overflow */
int fa_add_ok(int64_t a, int64_t b, int64_t *r);
int fa_has_elements(const fa_tensor *t);
int fa_ranges_meet(uintptr_t a, int64_t alen, uintptr_t b, int64_t blen);
fa_status fa_check_nulls(const fa_launch_tensors *c);
fa_status fa_check_dtypes(const fa_launch_tensors *c);
fa_status fa_check_nonnegative(const fa_launch_tensors *c);
fa_status fa_check_strides(const fa_launch_tensors *c);
fa_status fa_check_alignment(const fa_launch_tensors *c, const void *lse);
/* [p, p + bytes) ends within the address space (bytes <= 0: nothing to
 * check); else FA_ERR_INVALID_ARGUMENT, "NAME: memory [P, +BYTES) runs past
 * the end of the address space". */
fa_status fa_check_in_space_(const char *name, const void *p, int64_t bytes, char *msg,
                             size_t len);
/* ext[i] receives tensor i's extent in bytes (each checked to end within
 * the address space). */
fa_status fa_check_extents(const fa_launch_tensors *c, int64_t ext[FA_MAX_LAUNCH_TENSORS]);
/* Tensor i (an output) never has two elements at one address. */
fa_status fa_check_self_overlap(const fa_launch_tensors *c, int i);

/* A launch's memory: [p, p + len), named for messages; len 0 = none. */
typedef struct fa_range {
  const char *name;
  uintptr_t p;
  int64_t len;
} fa_range;
/* Each output out[o] against every input and every output before it: none
 * may share memory (a block could overwrite what another still reads).
 * Compares whole ranges by distance, so it is conservative for interleaved
 * layouts and never wraps. */
fa_status fa_check_disjoint(const fa_range *in, int nin, const fa_range *out, int nout,
                            char *msg, size_t len);
/* Every check's start: clears msg, refuses a NULL info or args. */
/* Dropout (docs/dropout.md, dropout.c): dropout_p in [0, 1) (NaN refused);
 * the six launch parameters of (p, seed, offset) for a kernel of the exact
 * or (torch) PyTorch keep decision: seed and offset words, the keep
 * threshold, then 1 / (1 - p). */
fa_status fa_check_dropout_(double p, char *msg, size_t len);
typedef struct fa_dropout_words {
  uint32_t u[5];
  float keep_scale;
} fa_dropout_words;
void fa_dropout_words_(double p, uint64_t seed, uint64_t offset, int torch, fa_dropout_words *w);

fa_status fa_check_present(const fa_kernel_info *info, const void *args, char *msg, size_t len);

/* The forward's and the backward's tensors: [batch, seqlen, heads, dim]
 * with t[0] = q and t[1] = k. Each tensor's side says which sizes it has:
 * FA_SIDE_KV, K/V's (kv_heads, seqlen_k) rather than Q's (heads,
 * seqlen_q); FA_SIDE_VDIM, v_head_dim rather than head_dim. */
enum { FA_SIDE_KV = 1, FA_SIDE_VDIM = 2 };
/* A hand-built info must be sane where the checks divide or index. */
fa_status fa_check_kernel_info(const fa_kernel_info *in, char *msg, size_t len);
/* Every tensor's head dim, then heads, against the metadata. */
fa_status fa_check_meta_dims(const fa_launch_tensors *c, const fa_kernel_info *in,
                             const unsigned char *side);
/* Every tensor's batch against q's, its seqlen against q's or k's. */
fa_status fa_check_cross_dims(const fa_launch_tensors *c, const unsigned char *side);
/* batch, seqlen_q, seqlen_k (the i32 parameters) and the LSE row index
 * batch * heads * seqlen_q within int32. */
fa_status fa_check_int32_sizes(const fa_launch_tensors *c, const fa_kernel_info *in);

/* ---- run-time inputs at launch (tensor_check.c; docs/abi.md) ---- */

/* The binding of the input called `name` among inputs[0..n); NULL when none. */
const fa_input *fa_find_input_(const fa_input *inputs, int n, const char *name);
/* What needs no memory: in's declarations sane (a hand-built info; a
 * varlen kernel's have no seqlen dims); every declared input bound once by
 * inputs[0..n) and nothing else bound; a tensor's dtype and dims (sizes
 * from q and k, checked before; batch = vl->num_seqs in a varlen launch,
 * vl NULL otherwise), a scalar's value; the requires (a varlen launch's are
 * per sequence: fa_check_varlen_values_). */
fa_status fa_check_inputs_(const fa_kernel_info *in, const fa_input *inputs, int n,
                           const fa_tensor *q, const fa_tensor *k, const fa_varlen *vl,
                           char *msg, size_t len);
/* What a launch's tensor inputs must be in memory (after fa_check_inputs_,
 * for launches that run): data not NULL unless empty, strides >= 0, data
 * aligned to the element size, extents below 2^62 bytes and within the
 * address space, and no byte shared with the launch's outputs out[0..nout). */
fa_status fa_check_input_memory_(const fa_kernel_info *in, const fa_input *inputs, int n,
                                 const fa_range *out, int nout, char *msg, size_t len);

/* ---- kernel parameter lists (backward.c; docs/abi.md) ---- */

/* A list being built into p[0..n): room for FA_BACKWARD_MAX_PARAMS. */
typedef struct fa_plist {
  fa_param *p;
  int n;
} fa_plist;
void fa_put_(fa_plist *l, fa_param_kind kind, const char *name, int64_t value);
/* Dropout's six (docs/dropout.md) for a kernel of the exact or (torch)
 * PyTorch keep decision. */
void fa_put_dropout_(fa_plist *l, double p, uint64_t seed, uint64_t offset, int torch);
/* One group per declared input decl[0..ndecl), bound from inputs[0..n) by
 * name (an unbound one passes zeros; the checks refuse that launch). */
void fa_put_inputs_(fa_plist *l, const fa_input_info *decl, int ndecl, const fa_input *inputs,
                    int n);
/* A list as cuLaunchKernel takes it: ptr[i] points at param i's value, of
 * the ABI's width (8 bytes: PTR, I64; 4: I32, U32, F32; 128: TMAP, the
 * CUtensorMap in map[value], which the launch encodes: launch.c). */
typedef struct fa_param_values {
  union {
    uint64_t u64;
    int64_t i64;
    int32_t i32;
    uint32_t u32;
  } slot[FA_BACKWARD_MAX_PARAMS];
  void *ptr[FA_BACKWARD_MAX_PARAMS];
  _Alignas(64) unsigned char map[FA_MAX_TMAPS][128];
} fa_param_values;
void fa_param_values_(const fa_param *p, int n, fa_param_values *v);

/* ---- variable-length batches (varlen.c; docs/abi.md) ---- */

/* A launch's kernel parameters batch, seqlen_q and seqlen_k (and so its
 * grids and workspaces): q's dim 0, q's dim 1 and k's dim 1 for a padded
 * batch (vl NULL); num_seqs, max_seqlen_q and max_seqlen_k for a varlen one. */
typedef struct fa_sizes {
  int64_t batch, seqlen_q, seqlen_k;
} fa_sizes;

/* The parameter of tensor map t: "tmap_q", "tmap_k", "tmap_v", an input's
 * "tmap_input<i>" (i its index in decl[0..ndecl), the kernel's declared
 * inputs, as fa_put_inputs_ names its other parameters), or the backward's
 * "tmap_dq_acc". */
const char *fa_tmap_param_name_(const fa_input_info *decl, int ndecl, const fa_tmap_info *t);
/* The tensor maps of kernel `in` but dq_acc's (docs/abi.md, "Tensor
 * maps") into v->map, from its Q, K, V and the launch's inputs. */
fa_status fa_encode_tmaps_(fa_module *m, const fa_kernel_info *in, const fa_tensor *q,
                           const fa_tensor *k, const fa_tensor *v_, const fa_input *inputs,
                           int ninputs, fa_param_values *v);
/* Kernel ki of kernels, or its gathered copy (key gather_of) when an input
 * it copies with a tensor map has a layout no map can take (an odd row
 * length, a base off 16 bytes, a stride 0, a strided last dim). */
int fa_staged_or_gathered_(const fa_kernel_info *kernels, int nkernels, int ki,
                           const fa_input *inputs, int ninputs);
/* The CUtensorMap (128 bytes, 64-byte aligned) of the backward's dq_acc at
 * device address acc for the launch sizes sz into map, as kernel `kernel`
 * of m adds into it (metadata `tma dq_acc rows`, docs/abi.md "Tensor maps");
 * a message in m and a status when the driver cannot encode it. */
fa_status fa_encode_dq_acc_map_(fa_module *m, int kernel, int rows, fa_sizes sz, uint64_t acc,
                                void *map);
fa_sizes fa_launch_sizes_(const fa_varlen *vl, const fa_tensor *q, const fa_tensor *k);
/* What a `layout varlen` block cannot go with, for the metadata parser: -2
 * nothing; -1 another key (mode decode, dropout), why says so; i >= 0 input
 * i (a seqlen dim). */
int fa_varlen_meta_conflict_(const fa_kernel_info *in, char *why, size_t len);
/* A launch's layout against its kernel's (vl given exactly for a varlen
 * kernel); then vl's fields: num_seqs in 0..65535, the device arrays not
 * NULL, both copies 4-byte aligned, max_seqlen_q/k in 1..INT32_MAX, the
 * num_seqs + 1 int32 of every array within the address space; every
 * tensor of c packed (dim[0] 1). Before the cross-tensor dims. */
fa_status fa_check_varlen_(const fa_kernel_info *in, const fa_varlen *vl,
                           const fa_launch_tensors *c);
/* After them: total_q and total_k (c's q and k dim 1), heads x total_q
 * and the padded num_seqs x heads x max_seqlen_q within int32. */
fa_status fa_check_varlen_sizes_(const fa_kernel_info *in, const fa_varlen *vl,
                                 const fa_launch_tensors *c);
/* The prefix sums' values, of host arrays cq and ck (either NULL: not
 * checked): cu[0] 0, non-decreasing, cu[num_seqs] = q's (k's) dim 1, no
 * sequence longer than its max_seqlen; with both, in's requires per
 * sequence. FA_OK for vl NULL or num_seqs 0. */
fa_status fa_check_varlen_values_(const fa_kernel_info *in, const fa_varlen *vl,
                                  const int32_t *cq, const int32_t *ck, const fa_tensor *q,
                                  const fa_tensor *k, char *msg, size_t len);
/* The cu_seqlens arrays as memory the launch reads, into r: 2 ranges, or 0
 * for vl NULL. */
int fa_varlen_ranges_(const fa_varlen *vl, fa_range r[2]);
/* The four parameters after a varlen kernel's kind's: cu_seqlens_q,
 * cu_seqlens_k, total_q (q's dim 1), total_k (k's dim 1). */
void fa_put_varlen_(fa_plist *l, const fa_varlen *vl, const fa_tensor *q, const fa_tensor *k);
/* fa_forward's and fa_backward's check of the device arrays the caller
 * gave no host copy of (the module's context current): synchronizes
 * `stream`, copies them to the host and checks them as
 * fa_check_varlen_values_ (message in m). FA_OK at once with both copies. */
fa_status fa_varlen_check_device_(fa_module *m, const fa_kernel_info *in, const fa_varlen *vl,
                                  const fa_tensor *q, const fa_tensor *k, void *stream);
/* launch.c: synchronizes `stream`, then copies n int32 from device address
 * src to dst (cuStreamSynchronize, cuMemcpyDtoH); `what` names the array
 * in a failure's message (in m). The module's context current. */
fa_status fa_module_copy_i32_(fa_module *m, const int32_t *src, size_t n, void *stream,
                              int32_t *dst, const char *what);
/* ---- block lists (blocks.c; docs/abi.md, "Block lists") ---- */

/* Blk_list's and blk_count's groups: their pointers (lists->list,
 * lists->count) and strides. */
void fa_put_block_lists_(fa_plist *l, const fa_block_lists *lists);
/* The lists kernel `info` visits at sizes sz for a launch given `blocks`
 * (NULL or not): the shape (fa_block_lists_shape, zeros when it fails: the
 * checks refuse that launch) and blocks' addresses of info->block_list
 * (NULL without). */
fa_block_lists fa_visited_lists_(const fa_kernel_info *info, const fa_blocks *blocks,
                                 fa_sizes sz);
/* The checks of a launch's args->blocks (`blocks`, maybe NULL) and of the
 * lists kernel `info` visits, at the launch's sizes sz (GPU-free):
 * blocks made for sz, and holding info's classifier's lists where info
 * visits lists, info's block-list keys as fa_meta_parse_module makes them
 * (FA_ERR_META); with `lists`, the lists' size in int32 (after the sizes'
 * own checks). */
fa_status fa_check_blocks_(const fa_kernel_info *info, const fa_blocks *blocks, fa_sizes sz,
                           int lists, char *msg, size_t len);
/* fa_forward's and fa_backward's check that a given fa_blocks is m's
 * (message in m). */
fa_status fa_blocks_of_module_(fa_module *m, const fa_blocks *blocks);
/* Builds the lists of m's classifiers names[0..n) (repeats built once)
 * into m's lists scratch for a launch of a's sizes and inputs on
 * a->stream; out[i] the lists of names[i]. The module's context current;
 * failures leave their message in m. */
fa_status fa_blocks_build_(fa_module *m, const char *const *names, int n,
                           const fa_blocks_args *a, fa_block_lists *out);
/* fa_forward_params with the lists the kernel visits given (NULL: as
 * fa_forward_params, fa_visited_lists_ of args->blocks). */
fa_status fa_forward_params_(const fa_kernel_info *info, const fa_forward_args *args,
                             uint64_t lse, uint64_t workspace, const fa_block_lists *lists,
                             fa_param params[FA_BACKWARD_MAX_PARAMS], int *count);

/* The services for blocks.c: launch.c's, the context's references runtime.c's. */
uint64_t fa_module_serial_(const fa_module *m); /* unique per loaded module */
/* m's second grow-only scratch (the lists fa_forward and fa_backward build),
 * at least `bytes`; *base its device address. */
fa_status fa_module_lists_scratch_(fa_module *m, size_t bytes, uint64_t *base);
/* Device memory of `bytes` in m's context (current), for an fa_blocks:
 * *addr; freed by fa_context_free_mem_ through the context, which
 * fa_context_retain_ keeps alive (fa_context_release_). */
fa_status fa_module_alloc_(fa_module *m, size_t bytes, uint64_t *addr);
fa_context *fa_module_context_(fa_module *m);
void fa_context_retain_(fa_context *c);
void fa_context_release_(fa_context *c);
void fa_context_free_mem_(fa_context *c, uint64_t addr);

/* Whether a forward launch computes nothing (no query row: batch or
 * seqlen_q 0, a varlen launch's num_seqs or total_q 0): checked, nothing
 * launched (check.c). */
int fa_forward_empty_(const fa_forward_args *a);

#endif
