/* check.c - fa_forward_check: every rule a forward launch must satisfy, no GPU needed.
 *
 * The kernels trust their arguments completely (no bounds checks on the
 * device), so everything that could make them read or write outside the
 * caller's tensors is refused here, with a message that names the tensor
 * and the numbers. Checks run in a fixed order and the first failure wins.
 */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

#define MAX_GRID_YZ 65535
#define MAX_GRID_X 2147483647LL
/* Byte offsets stay below 2^62 so that pointer + offset never wraps. */
#define MAX_BYTES (INT64_C(1) << 62)

typedef struct Ctx {
  const fa_kernel_info *info;
  const fa_forward_args *a;
  const fa_tensor *t[4];
  const char *name[4];
  char *msg;
  size_t len;
  fa_launch_tensors lt; /* the same tensors, for tensor_check.c */
} Ctx;

enum { Q, K, V, O };

/* q, k, v, o: which sizes each has (tensor_check.c). */
static const unsigned char sides[4] = {0, FA_SIDE_KV, FA_SIDE_KV | FA_SIDE_VDIM, FA_SIDE_VDIM};

/* The i32 kernel parameters, the LSE index and the grid (a varlen
 * launch's: num_seqs x max_seqlen_q). */
static fa_status check_sizes(Ctx *c) {
  const fa_kernel_info *in = c->info;
  fa_sizes sz = fa_launch_sizes_(c->a->varlen, c->t[Q], c->t[K]);
  int64_t batch = sz.batch, sq = sz.seqlen_q;
  fa_status st = fa_check_varlen_sizes_(in, c->a->varlen, &c->lt);
  if (st != FA_OK || (st = fa_check_int32_sizes(&c->lt, in))) return st;
  unsigned grid[3];
  if (fa_forward_grid(in, batch, sq, grid) == FA_OK) return FA_OK;
  int64_t tiles = in->grid == FA_GRID_ONE ? 1 : (sq + in->tile_q - 1) / in->tile_q;
  fa_fmt(c->msg, c->len,
         "grid: %" PRId64 " q tiles x %d heads x %" PRId64
         " batch exceeds the CUDA grid limits (2^31-1 x 65535 x 65535)",
         tiles, in->heads, batch);
  return FA_ERR_TOO_LARGE;
}

/* The caller's LSE in bytes (0 without one): float32 [batch, heads,
 * seqlen_q], or a varlen launch's [heads, total_q] (dim 0 is 1); below 2^33
 * after check_sizes. */
static int64_t lse_bytes_of(const Ctx *c) {
  const fa_forward_args *a = c->a;
  return a->lse ? a->q.dim[0] * c->info->heads * a->q.dim[1] * 4 : 0;
}

/* The outputs (O, LSE) must not share memory with an input (Q, K, V, a
 * varlen launch's cu_seqlens, the run-time inputs) or each other. */
static fa_status check_aliasing(Ctx *c, const int64_t ext[4]) {
  const fa_forward_args *a = c->a;
  int64_t lse_bytes = lse_bytes_of(c);
  fa_range in[5] = {{"q", (uintptr_t)a->q.data, ext[Q]}, {"k", (uintptr_t)a->k.data, ext[K]},
                    {"v", (uintptr_t)a->v.data, ext[V]}};
  int nin = 3 + fa_varlen_ranges_(a->varlen, in + 3);
  fa_range out[2] = {{"o", (uintptr_t)a->o.data, ext[O]}, {"lse", (uintptr_t)a->lse, lse_bytes}};
  fa_status st = fa_check_disjoint(in, nin, out, 2, c->msg, c->len);
  return st ? st : fa_check_input_memory_(c->info, a->inputs, a->num_inputs, out, 2, c->msg,
                                          c->len);
}

int fa_forward_empty_(const fa_forward_args *a) {
  return a->q.dim[0] == 0 || a->q.dim[1] == 0 || (a->varlen && a->varlen->num_seqs == 0);
}

fa_status fa_forward_grid(const fa_kernel_info *info, int64_t batch, int64_t seqlen_q,
                          unsigned grid[3]) {
  if (!info || !grid) return FA_ERR_NULL_POINTER;
  if (batch < 0 || seqlen_q < 0 || info->tile_q <= 0) return FA_ERR_INVALID_ARGUMENT;
  int64_t gx = info->grid == FA_GRID_ONE ? 1 : (seqlen_q + info->tile_q - 1) / info->tile_q;
  if (info->grid == FA_GRID_PERSISTENT) { /* the tiles, walked by x blocks */
    if (!fa_mul_ok(gx, info->heads, &gx) || !fa_mul_ok(gx, batch, &gx) || gx > MAX_GRID_X)
      return FA_ERR_TOO_LARGE;
    grid[0] = (unsigned)gx;
    grid[1] = grid[2] = 1;
    return FA_OK;
  }
  if (gx > MAX_GRID_X || info->heads > MAX_GRID_YZ || batch > MAX_GRID_YZ)
    return FA_ERR_TOO_LARGE;
  grid[0] = (unsigned)gx;
  grid[1] = (unsigned)info->heads;
  grid[2] = (unsigned)batch;
  return FA_OK;
}

/* A stride no launch can use: 16-byte aligned for every dtype, so the check
 * that refuses it is the extent check, whose message names the overflow. */
#define UNUSABLE_STRIDE (INT64_MAX & ~INT64_C(15))

fa_tensor *fa_tensor_contiguous(fa_tensor *t, void *data, fa_dtype dtype, int64_t d0,
                                int64_t d1, int64_t d2, int64_t d3) {
  if (!t) return NULL;
  t->data = data;
  t->dtype = dtype;
  t->dim[0] = d0, t->dim[1] = d1, t->dim[2] = d2, t->dim[3] = d3;
  t->stride[3] = 1;
  int64_t s1, s0;
  if (d1 < 0 || d2 < 0 || d3 < 0 || !fa_mul_ok(d2, d3, &s1) || !fa_mul_ok(d1, s1, &s0)) {
    t->stride[2] = t->stride[1] = t->stride[0] = UNUSABLE_STRIDE;
    return NULL;
  }
  t->stride[2] = d3;
  t->stride[1] = s1;
  t->stride[0] = s0;
  return t;
}

fa_status fa_forward_check(const fa_kernel_info *info, const fa_forward_args *args, char *msg,
                           size_t msglen) {
  fa_status st = fa_check_present(info, args, msg, msglen);
  if (st != FA_OK) return st;
  if (info->mode != FA_MODE_FORWARD) {
    fa_fmt(msg, msglen, "kernel %s is a %s kernel; fa_forward launches forward kernels only",
           info->kernel, info->mode == FA_MODE_DECODE    ? "decode"
                         : info->mode == FA_MODE_BLOCKS ? "classifier (mode blocks)"
                                                        : "backward");
    return FA_ERR_UNSUPPORTED;
  }
  fa_launch_tensors lt = {{&args->q, &args->k, &args->v, &args->o}, {"q", "k", "v", "o"},
                          {fa_dim_names, fa_dim_names, fa_dim_names, fa_dim_names}, info->dtype,
                          msg, msglen, 4};
  Ctx c = {info, args, {&args->q, &args->k, &args->v, &args->o}, {"q", "k", "v", "o"},
           msg, msglen, lt};
  int64_t ext[FA_MAX_LAUNCH_TENSORS];
  if ((st = fa_check_kernel_info(info, msg, msglen)) ||
      (st = fa_check_dropout_(args->dropout_p, msg, msglen)) || (st = fa_check_nulls(&c.lt)) ||
      (st = fa_check_dtypes(&c.lt)) || (st = fa_check_nonnegative(&c.lt)) ||
      (st = fa_check_varlen_(info, args->varlen, &c.lt)) ||
      (st = fa_check_meta_dims(&c.lt, info, sides)) || (st = fa_check_cross_dims(&c.lt, sides)) ||
      (st = fa_check_inputs_(info, args->inputs, args->num_inputs, &args->q, &args->k,
                             args->varlen, msg, msglen)))
    return st;
  fa_sizes sz = fa_launch_sizes_(args->varlen, &args->q, &args->k);
  if ((st = fa_check_blocks_(info, args->blocks, sz, 0, msg, msglen))) return st;
  /* Nothing is launched for an empty Q; its pointers and strides are never used. */
  if (fa_forward_empty_(args)) return FA_OK;
  const fa_varlen *vl = args->varlen;
  if ((st = check_sizes(&c)) || (st = fa_check_blocks_(info, NULL, sz, 1, msg, msglen)) ||
      (st = fa_check_strides(&c.lt)) ||
      (st = fa_check_alignment(&c.lt, args->lse)) || (st = fa_check_extents(&c.lt, ext)) ||
      (st = fa_check_in_space_("lse", args->lse, lse_bytes_of(&c), msg, msglen)) ||
      (st = fa_check_self_overlap(&c.lt, O)) ||
      (st = check_aliasing(&c, ext)) ||
      (vl && (st = fa_check_varlen_values_(info, vl, vl->host_cu_seqlens_q,
                                           vl->host_cu_seqlens_k, &args->q, &args->k, msg,
                                           msglen))))
    return st;
  return FA_OK;
}

const char *fa_status_string(fa_status status) {
  static const char *const names[FA_STATUS_COUNT_] = {
    "FA_OK: success",
    "FA_ERR_INVALID_ARGUMENT: invalid argument",
    "FA_ERR_DTYPE: dtype mismatch",
    "FA_ERR_SHAPE: shape mismatch",
    "FA_ERR_STRIDE: bad strides",
    "FA_ERR_ALIGNMENT: misaligned pointer or stride",
    "FA_ERR_NULL_POINTER: null pointer",
    "FA_ERR_TOO_LARGE: size exceeds the kernel's index or grid limits",
    "FA_ERR_NO_DEVICE: no CUDA driver or device",
    "FA_ERR_CUDA: CUDA driver error",
    "FA_ERR_LOAD: kernel load failed",
    "FA_ERR_META: bad kernel metadata",
    "FA_ERR_OUT_OF_MEMORY: out of memory",
    "FA_ERR_UNSUPPORTED: unsupported kernel for this call",
    "FA_ERR_COMPILE: the spec could not be compiled",
  };
  if ((int)status < 0 || status >= FA_STATUS_COUNT_) return "FA_ERR_UNKNOWN: unknown status";
  return names[status];
}
