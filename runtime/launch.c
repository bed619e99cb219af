/* launch.c - device memory and launches through the CUDA driver API: the
 * module's grow-only scratch, fa_forward, and the services decode.c and
 * blocks.c launch with (internal.h). The handles and the driver's entry
 * points are runtime.c's (driver.h).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

/* ---- launch ------------------------------------------------------------- */

/* cuMemAlloc of `bytes` into *p (context current); `what` names the memory
 * in a failure's message (in m). */
static fa_status alloc(fa_module *m, size_t bytes, CUdeviceptr *p, const char *what) {
  fa_context *c = m->ctx;
  CUresult r = c->cu.MemAlloc(p, bytes);
  if (r == CUDA_SUCCESS) return FA_OK;
  *p = 0;
  char call[96];
  fa_fmt(call, sizeof call, "cuMemAlloc (%s)", what);
  fa_cuda_msg_(&c->cu, m->errmsg, sizeof m->errmsg, call, r);
  fa_fmt(m->errmsg + strlen(m->errmsg), sizeof m->errmsg - strlen(m->errmsg), ": %zu bytes",
         bytes);
  return r == CUDA_ERROR_OUT_OF_MEMORY ? FA_ERR_OUT_OF_MEMORY : FA_ERR_CUDA;
}

/* Makes the grow-only buffer *p of *have bytes at least `bytes` long.
 * Growing synchronizes the context first: a launch still running may use
 * the old buffer. */
static fa_status grow(fa_module *m, CUdeviceptr *p, size_t *have, size_t bytes,
                      const char *what) {
  if (bytes <= *have) return FA_OK;
  fa_context *c = m->ctx;
  size_t want = (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1); /* whole MiB */
  if (*p) {
    CUresult r = c->cu.CtxSynchronize();
    if (r != CUDA_SUCCESS) {
      char call[96];
      fa_fmt(call, sizeof call, "cuCtxSynchronize (growing the %s)", what);
      fa_cuda_msg_(&c->cu, m->errmsg, sizeof m->errmsg, call, r);
      return FA_ERR_CUDA;
    }
    c->cu.MemFree(*p);
    *p = 0;
    *have = 0;
  }
  fa_status st = alloc(m, want, p, what);
  if (st == FA_OK) *have = want;
  return st;
}

/* Makes the scratch at least `bytes` long (its zeroed head is lost when it grows). */
static fa_status ensure_scratch(fa_module *m, size_t bytes) {
  if (bytes > m->scratch_bytes) m->zero_bytes = 0;
  return grow(m, &m->scratch, &m->scratch_bytes, bytes, "LSE/workspace scratch");
}

static CUdeviceptr devptr(const void *p) { return (CUdeviceptr)(uintptr_t)p; }

/* The index of input map t's input among the kernel's (metadata-checked
 * to exist), -1 when it has none. */
static int input_index(const fa_kernel_info *in, const fa_tmap_info *t) {
  for (int i = 0; i < in->ninputs && i < FA_MAX_INPUTS; i++)
    if (strcmp(in->inputs[i].name, t->input) == 0) return i;
  return -1;
}

const char *fa_tmap_param_name_(const fa_input_info *decl, int ndecl, const fa_tmap_info *t) {
  static const char *const inputs[FA_MAX_INPUTS] = {
      "tmap_input0", "tmap_input1", "tmap_input2", "tmap_input3",
      "tmap_input4", "tmap_input5", "tmap_input6", "tmap_input7"};
  if (t->tensor == 'i') {
    for (int i = 0; i < ndecl && i < FA_MAX_INPUTS; i++)
      if (strcmp(decl[i].name, t->input) == 0) return inputs[i];
    return "tmap_input?";
  }
  return t->tensor == 'q' ? "tmap_q" : t->tensor == 'k' ? "tmap_k" : t->tensor == 'v' ? "tmap_v"
                                                                    : "tmap_dq_acc";
}

/* The bound tensor of input map t (NULL when the launch binds none). */
static const fa_tensor *input_of_map(const fa_input *inputs, int n, const fa_tmap_info *t) {
  const fa_input *x = fa_find_input_(inputs, inputs ? n : 0, t->input);
  return x ? &x->tensor : NULL;
}

/* The declared rank of input map t's input (2..4, metadata-checked). */
static int input_rank(const fa_kernel_info *in, const fa_tmap_info *t) {
  int i = input_index(in, t);
  return i >= 0 ? in->inputs[i].rank : 0;
}

/* Can a tensor map copy boxes of input t of rank r (2-byte floats, the
 * last dim contiguous, the others' byte strides positive multiples of 16
 * below 2^40 where their extent is past 1, the base 16-byte aligned)?
 * stage-inputs' kernels need it, else their gathered copy runs. */
static int input_tma_ok(const fa_tensor *t, int r) {
  if (!t || (t->dtype != FA_DTYPE_BF16 && t->dtype != FA_DTYPE_F16)) return 0;
  if (r < 2 || r > 4 || (uintptr_t)t->data % 16) return 0;
  if (t->dim[r - 1] > 1 && t->stride[r - 1] != 1) return 0; /* the box's rows are contiguous */
  for (int d = 0; d < r - 1; d++) {
    if (t->dim[d] == 1) continue; /* never stepped over */
    if (t->stride[d] <= 0 || (t->stride[d] * 2) % 16 || t->stride[d] * 2 >= ((int64_t)1 << 40))
      return 0;
  }
  return 1;
}

/* The module's kernel that fa_forward launches for args: the first, or
 * with dropout_p > 0 the one whose dropout_of names it; -1 (message in m)
 * when the module has none. */
static int forward_kernel(fa_module *m, const fa_forward_args *a) {
  if (a->dropout_p == 0) return 0;
  for (int i = 0; i < m->nkernels; i++)
    if (strcmp(m->kernels[i].dropout_of, m->info.kernel) == 0) return i;
  fa_fmt(m->errmsg, sizeof m->errmsg, "dropout_p is %g but kernel %s has no dropout kernel "
         "(compile its spec with `dropout = P;`)", a->dropout_p, m->info.kernel);
  return -1;
}

fa_status fa_forward_params(const fa_kernel_info *in, const fa_forward_args *a, uint64_t lse,
                            uint64_t ws, fa_param p[FA_BACKWARD_MAX_PARAMS], int *n) {
  return fa_forward_params_(in, a, lse, ws, NULL, p, n);
}

fa_status fa_forward_params_(const fa_kernel_info *in, const fa_forward_args *a, uint64_t lse,
                             uint64_t ws, const fa_block_lists *lists,
                             fa_param p[FA_BACKWARD_MAX_PARAMS], int *n) {
  static const char *const names[4] = {"q", "k", "v", "o"};
  static const char *const strides[4][3] = {{"q.sb", "q.ss", "q.sh"}, {"k.sb", "k.ss", "k.sh"},
                                            {"v.sb", "v.ss", "v.sh"}, {"o.sb", "o.ss", "o.sh"}};
  if (n) *n = 0;
  if (!in || !a || !p || !n) return FA_ERR_NULL_POINTER;
  if (in->varlen && !a->varlen) return FA_ERR_INVALID_ARGUMENT;
  const fa_tensor *t[4] = {&a->q, &a->k, &a->v, &a->o};
  fa_sizes sz = fa_launch_sizes_(in->varlen ? a->varlen : NULL, &a->q, &a->k);
  fa_plist l = {p, 0};
  for (int j = 0; j < 4; j++) fa_put_(&l, FA_PARAM_PTR, names[j], (int64_t)devptr(t[j]->data));
  fa_put_(&l, FA_PARAM_PTR, "lse", (int64_t)lse);
  fa_put_(&l, FA_PARAM_PTR, "workspace", (int64_t)ws);
  fa_put_(&l, FA_PARAM_I32, "batch", sz.batch);
  fa_put_(&l, FA_PARAM_I32, "seqlen_q", sz.seqlen_q);
  fa_put_(&l, FA_PARAM_I32, "seqlen_k", sz.seqlen_k);
  for (int j = 0; j < 4; j++)
    for (int d = 0; d < 3; d++) fa_put_(&l, FA_PARAM_I64, strides[j][d], t[j]->stride[d]);
  if (in->varlen) fa_put_varlen_(&l, a->varlen, &a->q, &a->k);
  if (in->dropout > 0) fa_put_dropout_(&l, a->dropout_p, a->seed, a->offset, in->dropout_torch);
  fa_put_inputs_(&l, in->inputs, in->ninputs, a->inputs, a->num_inputs);
  if (in->block_list[0]) {
    fa_block_lists visited = lists ? *lists : fa_visited_lists_(in, a->blocks, sz);
    fa_put_block_lists_(&l, &visited);
  }
  for (int i = 0; i < in->ntmaps; i++)
    fa_put_(&l, FA_PARAM_TMAP, fa_tmap_param_name_(in->inputs, in->ninputs, &in->tmaps[i]), i);
  *n = l.n;
  return FA_OK;
}

/* cuTensorMapEncodeTiled of a 4-d map into map (128 bytes) as the kernels'
 * TMA copies and reductions take it: dims innermost first, the byte
 * strides of dims 1..3 (a dimension of one element is never stepped over:
 * stride 16, legal whatever the tensor's), boxes of 128 bytes of columns
 * (elements of elem_bytes) by `rows`, the 128-byte swizzle the kernels'
 * shared layouts use, L2 promotion 256B, elements out of range read as
 * zeros (a reduction drops them). */
static CUresult encode_box_map(const Driver *cu, void *map, CUtensorMapDataType dtype,
                               int elem_bytes, void *addr, const cuuint64_t dims[4],
                               const cuuint64_t strides[3], int rows) {
  cuuint64_t st[3];
  for (int d = 0; d < 3; d++) st[d] = dims[d + 1] == 1 ? 16 : strides[d];
  cuuint32_t box[4] = {(cuuint32_t)(128 / elem_bytes), (cuuint32_t)rows, 1, 1};
  cuuint32_t one[4] = {1, 1, 1, 1};
  return cu->TensorMapEncodeTiled((CUtensorMap *)map, dtype, 4, addr, dims, st, box, one,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* The tensor maps of kernel `in` (docs/abi.md, "Tensor maps"):
 * K or V [batch, seqlen_k, kv_heads, d] as a 4-d map, innermost first, boxes
 * of 64 columns (128 bytes, the 128-byte swizzle the kernel's shared
 * layout is) by the metadata's rows; rows past seqlen_k read as zeros. A
 * tensor without elements gets a map of zeros, which no copy reads (the
 * kernel's K/V loop has no step). */
fa_status fa_encode_tmaps_(fa_module *m, const fa_kernel_info *in, const fa_tensor *q,
                           const fa_tensor *k, const fa_tensor *v_, const fa_input *inputs,
                           int ninputs, fa_param_values *v) {
  const Driver *cu = &m->ctx->cu;
  for (int i = 0; i < in->ntmaps; i++) {
    char name = in->tmaps[i].tensor;
    if (name == 'a') continue; /* dq_acc: its launch's workspace (fa_encode_dq_acc_map_) */
    const fa_tensor *t = name == 'q' ? q : name == 'k' ? k : name == 'v' ? v_
                                                           : input_of_map(inputs, ninputs, &in->tmaps[i]);
    memset(v->map[i], 0, sizeof v->map[i]);
    if (!t || !fa_has_elements(t)) continue;
    if (!cu->TensorMapEncodeTiled) {
      fa_fmt(m->errmsg, sizeof m->errmsg, "kernel %s copies K and V with TMA, and this CUDA "
             "driver lacks cuTensorMapEncodeTiled (CUDA 12.0+): compile the spec with "
             "`tma = 0;` in its schedule", in->kernel);
      return FA_ERR_UNSUPPORTED;
    }
    /* A dimension of one element is never stepped over: any legal stride.
     * Q, K, V [b, s, h, d] as (d, s, h, b); an input [.., rows, cols] of
     * rank r as (cols, rows, dim r-3, dim r-4), 1 past its rank (the
     * coordinates codegen's lw_ring_put_tma gives). */
    cuuint64_t dims[4] = {(cuuint64_t)t->dim[3], (cuuint64_t)t->dim[1], (cuuint64_t)t->dim[2],
                          (cuuint64_t)t->dim[0]};
    int64_t s[3] = {t->stride[1], t->stride[2], t->stride[0]};
    if (name == 'i') {
      int r = input_rank(in, &in->tmaps[i]);
      for (int d = 0; d < 4; d++) {
        dims[d] = d < r ? (cuuint64_t)t->dim[r - 1 - d] : 1;
        if (d > 0) s[d - 1] = d < r ? t->stride[r - 1 - d] : 0;
      }
    }
    cuuint64_t strides[3];
    for (int d = 0; d < 3; d++) strides[d] = (cuuint64_t)s[d] * 2;
    CUresult r = encode_box_map(
        cu, v->map[i],
        t->dtype == FA_DTYPE_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        2, t->data, dims, strides, in->tmaps[i].rows);
    if (r != CUDA_SUCCESS) {
      char head[256];
      fa_cuda_msg_(cu, head, sizeof head, "cuTensorMapEncodeTiled", r);
      fa_fmt(m->errmsg, sizeof m->errmsg, "kernel %s: the tensor map of %c (dims %" PRId64
             "x%" PRId64 "x%" PRId64 "x%" PRId64 ", strides %" PRId64 ",%" PRId64 ",%" PRId64
             "): %s", in->kernel, in->tmaps[i].tensor, t->dim[0], t->dim[1], t->dim[2],
             t->dim[3], t->stride[0], t->stride[1], t->stride[2], head);
      return FA_ERR_CUDA;
    }
  }
  return FA_OK;
}

/* The tensor map of dq_acc (f32 [batch, seqlen_q, heads, head_dim] at acc,
 * contiguous; a varlen launch's padded to its longest sequence) into map,
 * as the atomic main kernel's TMA reductions take it (codegen/mem_global.c
 * add_tile_tma; docs/abi.md "Tensor maps"): 4-d, innermost first (head_dim,
 * seqlen_q, heads, batch), boxes of 32 columns (128 bytes, the 128-byte
 * swizzle) by `rows` (the metadata's). */
fa_status fa_encode_dq_acc_map_(fa_module *m, int kernel, int rows, fa_sizes sz, uint64_t acc,
                                void *map) {
  const Driver *cu = &m->ctx->cu;
  const fa_kernel_info *in = &m->kernels[kernel];
  memset(map, 0, 128);
  if (!cu->TensorMapEncodeTiled) {
    fa_fmt(m->errmsg, sizeof m->errmsg, "kernel %s adds dQ through a tensor map, and this CUDA "
           "driver lacks cuTensorMapEncodeTiled (CUDA 12.0+): use the deterministic launch "
           "(FA_BACKWARD_DETERMINISTIC)", in->kernel);
    return FA_ERR_UNSUPPORTED;
  }
  cuuint64_t d = (cuuint64_t)in->head_dim, h = (cuuint64_t)in->heads;
  cuuint64_t dims[4] = {d, (cuuint64_t)sz.seqlen_q, h, (cuuint64_t)sz.batch};
  cuuint64_t strides[3] = {h * d * 4, d * 4, (cuuint64_t)sz.seqlen_q * h * d * 4};
  CUresult r = encode_box_map(cu, map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, (void *)(uintptr_t)acc,
                              dims, strides, rows);
  if (r != CUDA_SUCCESS) {
    char head[256];
    fa_cuda_msg_(cu, head, sizeof head, "cuTensorMapEncodeTiled", r);
    fa_fmt(m->errmsg, sizeof m->errmsg, "kernel %s: the tensor map of dq_acc (%" PRId64 " x %"
           PRId64 " x %" PRId64 " x %" PRId64 "): %s", in->kernel, sz.batch, sz.seqlen_q,
           (int64_t)h, (int64_t)d, head);
    return FA_ERR_CUDA;
  }
  return FA_OK;
}

/* Kernel i of the module launched on the current context, visiting
 * `lists` where it visits block lists. */
static fa_status launch(fa_module *m, int i, const fa_forward_args *a, CUdeviceptr lse,
                        CUdeviceptr ws, const fa_block_lists *lists) {
  const fa_kernel_info *in = &m->kernels[i];
  unsigned grid[3];
  fa_sizes sz = fa_launch_sizes_(a->varlen, &a->q, &a->k);
  fa_forward_grid(in, sz.batch, sz.seqlen_q, grid); /* checked by fa_forward_check */
  int sms = fa_module_sm_count_(m);
  if (in->grid == FA_GRID_PERSISTENT && sms > 0 && grid[0] > (unsigned)sms)
    grid[0] = (unsigned)sms; /* one block an SM walks the tiles (passes/persistent.c) */
  fa_param p[FA_BACKWARD_MAX_PARAMS];
  fa_param_values v;
  int n = 0;
  fa_forward_params_(in, a, lse, ws, lists, p, &n);
  fa_param_values_(p, n, &v);
  fa_status st = fa_encode_tmaps_(m, in, &a->q, &a->k, &a->v, a->inputs, a->num_inputs, &v);
  if (st != FA_OK) return st;
  CUresult r = m->ctx->cu.LaunchKernel(m->fns[i], grid[0], grid[1], grid[2],
                                       (unsigned)in->threads, 1, 1, (unsigned)in->smem_bytes,
                                       (CUstream)a->stream, v.ptr, NULL);
  if (r != CUDA_SUCCESS) {
    char head[256];
    fa_cuda_msg_(&m->ctx->cu, head, sizeof head, "cuLaunchKernel", r);
    fa_fmt(m->errmsg, sizeof m->errmsg, "kernel %s, grid %u x %u x %u, block %d, smem %d: %s",
           in->kernel, grid[0], grid[1], grid[2], in->threads, in->smem_bytes, head);
    return FA_ERR_CUDA;
  }
  return FA_OK;
}

int fa_staged_or_gathered_(const fa_kernel_info *kernels, int nkernels, int ki,
                           const fa_input *inputs, int ninputs) {
  const fa_kernel_info *in = &kernels[ki];
  int ok = 1;
  for (int i = 0; i < in->ntmaps; i++)
    if (in->tmaps[i].tensor == 'i') {
      const fa_tensor *t = input_of_map(inputs, ninputs, &in->tmaps[i]);
      ok &= !t || !fa_has_elements(t) || input_tma_ok(t, input_rank(in, &in->tmaps[i]));
    }
  if (ok) return ki;
  for (int i = 0; i < nkernels; i++)
    if (strcmp(kernels[i].gather_of, in->kernel) == 0) return i;
  return ki; /* no copy: the map's encode reports the layout */
}

/* Kernel ki, or its long-rows variant (key long_rows_of,
 * passes/long_rows_variant.c) where the launch's seqlen_q and seqlen_k are
 * both at least its long_rows_min: a padded batch without the caller's
 * block lists (those are made for the plain kernel's tiles). */
static int long_rows_kernel(fa_module *m, int ki, const fa_forward_args *a) {
  if (a->varlen || a->blocks) return ki;
  fa_sizes sz = fa_launch_sizes_(NULL, &a->q, &a->k);
  for (int i = 0; i < m->nkernels; i++) {
    const fa_kernel_info *x = &m->kernels[i];
    if (strcmp(x->long_rows_of, m->kernels[ki].kernel) == 0 && sz.seqlen_q >= x->long_rows_min &&
        sz.seqlen_k >= x->long_rows_min)
      return i;
  }
  return ki;
}

fa_status fa_forward(fa_module *mod, const fa_forward_args *args) {
  if (!mod) return FA_ERR_NULL_POINTER;
  fa_status st = fa_forward_check(&mod->info, args, mod->errmsg, sizeof mod->errmsg);
  if (st != FA_OK || (st = fa_blocks_of_module_(mod, args->blocks))) return st;
  int ki = forward_kernel(mod, args);
  if (ki < 0) return FA_ERR_UNSUPPORTED;
  ki = long_rows_kernel(mod, ki, args);
  ki = fa_staged_or_gathered_(mod->kernels, mod->nkernels, ki, args->inputs, args->num_inputs);
  const fa_kernel_info *in = &mod->kernels[ki];
  /* The dropout kernel has tiles (and so a grid) of its own: check it too. */
  if (ki > 0 && (st = fa_forward_check(in, args, mod->errmsg, sizeof mod->errmsg))) return st;
  if (fa_forward_empty_(args)) return FA_OK; /* nothing to compute */
  /* Scratch layout: [LSE rows when the caller wants none][workspace]. The
   * LSE's rows are q's (a varlen launch's: heads x total_q, dim 0 being 1),
   * the workspace's the padded batch's (num_seqs x heads x max_seqlen_q). */
  size_t rows = (size_t)args->q.dim[0] * (size_t)in->heads * (size_t)args->q.dim[1];
  fa_sizes sz = fa_launch_sizes_(args->varlen, &args->q, &args->k);
  size_t ws_rows = (size_t)sz.batch * (size_t)in->heads * (size_t)sz.seqlen_q;
  /* The workspace starts 256-byte aligned so kernels may use vector accesses. */
  size_t lse_bytes = args->lse ? 0 : (rows * sizeof(float) + 255) & ~(size_t)255;
  size_t ws_bytes = ws_rows * (size_t)in->workspace_floats_per_row * sizeof(float);
  fa_context *c = mod->ctx;
  if ((st = fa_context_push_(c, mod->errmsg, sizeof mod->errmsg)) != FA_OK) return st;
  st = fa_varlen_check_device_(mod, in, args->varlen, &args->q, &args->k, args->stream);
  if (st == FA_OK) st = ensure_scratch(mod, lse_bytes + ws_bytes);
  /* The lists the kernel visits: the caller's fa_blocks, or built here
   * (the classifier first on the same stream). */
  fa_block_lists lists = fa_visited_lists_(in, args->blocks, sz);
  if (st == FA_OK && in->block_list[0] && !args->blocks) {
    const char *name = in->block_list;
    fa_blocks_args ba = {sz.batch, sz.seqlen_q, sz.seqlen_k, args->inputs, args->num_inputs,
                         args->stream};
    st = fa_blocks_build_(mod, &name, 1, &ba, &lists);
  }
  if (st == FA_OK) {
    CUdeviceptr lse = args->lse ? devptr(args->lse) : mod->scratch;
    CUdeviceptr ws = ws_bytes ? mod->scratch + lse_bytes : 0;
    st = launch(mod, ki, args, lse, ws, &lists);
  }
  fa_context_pop_(c);
  return st;
}

/* ---- services for decode.c (internal.h) ---------------------------------- */

fa_status fa_module_enter_(fa_module *m) {
  return fa_context_push_(m->ctx, m->errmsg, sizeof m->errmsg);
}

void fa_module_leave_(fa_module *m) { fa_context_pop_(m->ctx); }

uint64_t fa_module_serial_(const fa_module *m) { return m->serial; }

fa_status fa_module_lists_scratch_(fa_module *m, size_t bytes, uint64_t *base) {
  fa_status st = grow(m, &m->lists, &m->lists_bytes, bytes, "block lists scratch");
  *base = (uint64_t)m->lists;
  return st;
}

fa_status fa_module_alloc_(fa_module *m, size_t bytes, uint64_t *addr) {
  CUdeviceptr p = 0;
  fa_status st = alloc(m, bytes, &p, "block lists");
  *addr = (uint64_t)p;
  return st;
}

fa_context *fa_module_context_(fa_module *m) { return m->ctx; }

void fa_context_free_mem_(fa_context *c, uint64_t addr) {
  char msg[256];
  if (!addr || fa_context_push_(c, msg, sizeof msg) != FA_OK) return;
  c->cu.MemFree((CUdeviceptr)addr);
  fa_context_pop_(c);
}

fa_status fa_module_scratch_(fa_module *m, size_t bytes, uint64_t *base) {
  fa_status st = ensure_scratch(m, bytes);
  *base = (uint64_t)m->scratch;
  return st;
}

fa_status fa_module_memset_(fa_module *m, uint64_t dst, size_t bytes, void *stream,
                            const char *what) {
  Driver *cu = &m->ctx->cu;
  if (!cu->MemsetD32Async) {
    fa_fmt(m->errmsg, sizeof m->errmsg, "the CUDA driver lacks cuMemsetD32Async, which zeroing "
           "%s needs", what);
    return FA_ERR_CUDA;
  }
  CUresult r = cu->MemsetD32Async((CUdeviceptr)dst, 0, bytes / 4, (CUstream)stream);
  if (r == CUDA_SUCCESS) return FA_OK;
  char head[256];
  fa_cuda_msg_(cu, head, sizeof head, "cuMemsetD32Async", r);
  fa_fmt(m->errmsg, sizeof m->errmsg, "zeroing %s (%zu bytes at 0x%llx): %s", what, bytes,
         (unsigned long long)dst, head);
  return FA_ERR_CUDA;
}

fa_status fa_module_copy_i32_(fa_module *m, const int32_t *src, size_t n, void *stream,
                              int32_t *dst, const char *what) {
  Driver *cu = &m->ctx->cu;
  /* The caller may have written the array on its stream just before. */
  CUresult r = cu->StreamSynchronize((CUstream)stream);
  const char *call = "cuStreamSynchronize";
  if (r == CUDA_SUCCESS) {
    r = cu->MemcpyDtoH(dst, devptr(src), n * sizeof *dst);
    call = "cuMemcpyDtoH";
  }
  if (r == CUDA_SUCCESS) return FA_OK;
  char head[256];
  fa_cuda_msg_(cu, head, sizeof head, call, r);
  fa_fmt(m->errmsg, sizeof m->errmsg, "reading %s (%zu int32 at 0x%llx) to validate it: %s; pass "
         "its host copy (fa_varlen) to skip this read", what, n, (unsigned long long)devptr(src),
         head);
  return FA_ERR_CUDA;
}

fa_status fa_module_zero_head_(fa_module *m, size_t bytes, void *stream) {
  fa_status st = FA_OK;
  if (m->zero_bytes < bytes)
    st = fa_module_memset_(m, (uint64_t)m->scratch + m->zero_bytes, bytes - m->zero_bytes, stream,
                           "the fused decode kernel's counters");
  /* What follows the head is the launch's workspace and LSE rows: no
   * longer known to be zero. */
  m->zero_bytes = st == FA_OK ? bytes : 0;
  return st;
}

/* Programmatic dependent launch of the combine kernel (docs/decode.md): it
 * may start while the split kernel still runs, its griddepcontrol.wait
 * holding it until the split kernel has finished and its stores are
 * visible; what it saves is the launch gap between the two kernels.
 * Only when the kernel says it waits (metadata combine_pdl 1), the driver
 * has cuLaunchKernelEx, the device is sm_90 or later, and FLASHC_DECODE_PDL
 * is not "0" (an A/B switch). */
static int use_pdl(const fa_module *m) {
  static int env = -1; /* read once: getenv is not free in a launch path */
  if (env < 0) {
    const char *e = getenv("FLASHC_DECODE_PDL");
    env = !(e && strcmp(e, "0") == 0);
  }
  return env && m->info.decode.combine_pdl && m->ctx->cu.LaunchKernelEx && m->ctx->cc_major >= 9;
}

static CUresult launch_pdl(fa_module *m, CUfunction fn, const unsigned grid[3], unsigned block,
                           unsigned smem, void *stream, void **params) {
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg = {grid[0], grid[1], grid[2], block, 1, 1, smem, (CUstream)stream, &attr, 1};
  return m->ctx->cu.LaunchKernelEx(&cfg, fn, params, NULL);
}

/* Launches fn (entry point `name`), programmatically dependent when pdl. */
static fa_status launch_fn(fa_module *m, CUfunction fn, const char *name, int pdl,
                           const unsigned grid[3], unsigned block, unsigned smem, void *stream,
                           void **params) {
  if (!fn) {
    fa_fmt(m->errmsg, sizeof m->errmsg, "kernel %s: the module has no such entry point", name);
    return FA_ERR_INVALID_ARGUMENT;
  }
  CUresult r = CUDA_ERROR_NOT_SUPPORTED;
  if (pdl) r = launch_pdl(m, fn, grid, block, smem, stream, params);
  /* Refused (an old driver, or a stream that cannot take the attribute):
   * the plain launch is always correct, only without the overlap. */
  if (r == CUDA_ERROR_NOT_SUPPORTED)
    r = m->ctx->cu.LaunchKernel(fn, grid[0], grid[1], grid[2], block, 1, 1, smem,
                                (CUstream)stream, params, NULL);
  if (r == CUDA_SUCCESS) return FA_OK;
  char head[256];
  fa_cuda_msg_(&m->ctx->cu, head, sizeof head, "cuLaunchKernel", r);
  fa_fmt(m->errmsg, sizeof m->errmsg, "kernel %s, grid %u x %u x %u, block %u, smem %u: %s",
         name, grid[0], grid[1], grid[2], block, smem, head);
  return FA_ERR_CUDA;
}

fa_status fa_module_launch_(fa_module *m, fa_entry which, const unsigned grid[3], unsigned block,
                            unsigned smem, void *stream, void **params) {
  int combine = which == FA_ENTRY_COMBINE;
  CUfunction fn = combine ? m->combine : which == FA_ENTRY_WIDE ? m->wide : m->fn;
  const char *name = combine                  ? m->info.decode.combine_kernel
                     : which == FA_ENTRY_WIDE ? m->info.decode.wide_kernel
                                              : m->info.kernel;
  return launch_fn(m, fn, name, combine && use_pdl(m), grid, block, smem, stream, params);
}

const fa_kernel_info *fa_module_kernels_(const fa_module *m, int *n) {
  *n = m->nkernels;
  return m->kernels;
}

fa_status fa_module_launch_kernel_(fa_module *m, int i, const unsigned grid[3], unsigned block,
                                   unsigned smem, void *stream, void **params) {
  if (i < 0 || i >= m->nkernels) {
    fa_fmt(m->errmsg, sizeof m->errmsg, "kernel index %d: the module has %d kernels", i,
           m->nkernels);
    return FA_ERR_INVALID_ARGUMENT;
  }
  return launch_fn(m, m->fns[i], m->kernels[i].kernel, 0, grid, block, smem, stream, params);
}

int fa_module_sm_count_(const fa_module *m) { return m->ctx->sm_count; }

char *fa_module_msg_(fa_module *m, size_t *len) {
  *len = sizeof m->errmsg;
  return m->errmsg;
}

int *fa_module_last_nsplit_(fa_module *m) { return &m->last_nsplit; }

int fa_decode_last_nsplit(const fa_module *mod) { return mod ? mod->last_nsplit : 0; }

int *fa_module_last_wide_(fa_module *m) { return &m->last_wide; }

const char *fa_decode_last_kernel(const fa_module *mod) {
  if (!mod || mod->last_nsplit == 0) return "";
  return mod->last_wide ? mod->info.decode.wide_kernel : mod->info.kernel;
}
