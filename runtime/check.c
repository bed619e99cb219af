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

static const char *const dim_names[4] = {"batch", "seqlen", "heads", "head_dim"};

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

/* The info may be built by hand instead of by fa_meta_parse: the values the
 * checks below divide by or index with must be sane. */
static fa_status check_info(Ctx *c) {
  const fa_kernel_info *in = c->info;
  if (fa_dtype_size(in->dtype) != 2 || in->head_dim <= 0 || in->v_head_dim <= 0 ||
      in->heads <= 0 || in->kv_heads <= 0 || in->heads % in->kv_heads || in->tile_q <= 0 ||
      in->threads <= 0 || in->threads > 1024 || in->workspace_floats_per_row < 0) {
    fa_fmt(c->msg, c->len,
           "kernel info is inconsistent (dtype %d, head_dim %d, v_head_dim %d, heads %d, "
           "kv_heads %d, tile_q %d, threads %d): use fa_meta_parse",
           (int)in->dtype, in->head_dim, in->v_head_dim, in->heads, in->kv_heads, in->tile_q,
           in->threads);
    return FA_ERR_META;
  }
  return FA_OK;
}

/* One dimension of tensor i must equal `want`, which the metadata fixes. */
static fa_status want_meta(Ctx *c, int i, int d, int64_t want, const char *meta_key) {
  int64_t got = c->t[i]->dim[d];
  if (got == want) return FA_OK;
  const fa_kernel_info *in = c->info;
  if (d == 2 && strcmp(meta_key, "kv_heads") == 0)
    fa_fmt(c->msg, c->len,
           "%s: heads is %" PRId64 " but the kernel was compiled for kv_heads = %d "
           "(%d query heads share %d K/V heads, %d per group)",
           c->name[i], got, in->kv_heads, in->heads, in->kv_heads, in->heads / in->kv_heads);
  else
    fa_fmt(c->msg, c->len, "%s: %s is %" PRId64 " but the kernel was compiled for %s%s%" PRId64,
           c->name[i], dim_names[d], got, strcmp(meta_key, dim_names[d]) ? meta_key : "",
           strcmp(meta_key, dim_names[d]) ? " = " : "", want);
  return FA_ERR_SHAPE;
}

static fa_status check_meta_dims(Ctx *c) {
  const fa_kernel_info *in = c->info;
  fa_status st;
  if ((st = want_meta(c, Q, 3, in->head_dim, "head_dim"))) return st;
  if ((st = want_meta(c, K, 3, in->head_dim, "head_dim"))) return st;
  if ((st = want_meta(c, V, 3, in->v_head_dim, "v_head_dim"))) return st;
  if ((st = want_meta(c, O, 3, in->v_head_dim, "v_head_dim"))) return st;
  if ((st = want_meta(c, Q, 2, in->heads, "heads"))) return st;
  if ((st = want_meta(c, K, 2, in->kv_heads, "kv_heads"))) return st;
  if ((st = want_meta(c, V, 2, in->kv_heads, "kv_heads"))) return st;
  if ((st = want_meta(c, O, 2, in->heads, "heads"))) return st;
  return FA_OK;
}

/* Dimension d of tensor i must equal that of tensor j. */
static fa_status want_same(Ctx *c, int i, int j, int d, const char *what) {
  if (c->t[i]->dim[d] == c->t[j]->dim[d]) return FA_OK;
  fa_fmt(c->msg, c->len, "%s: %s is %" PRId64 " but %s has %s %" PRId64, c->name[i],
         dim_names[d], c->t[i]->dim[d], c->name[j], what, c->t[j]->dim[d]);
  return FA_ERR_SHAPE;
}

static fa_status check_cross_dims(Ctx *c) {
  fa_status st;
  if ((st = want_same(c, K, Q, 0, "batch"))) return st;
  if ((st = want_same(c, V, Q, 0, "batch"))) return st;
  if ((st = want_same(c, O, Q, 0, "batch"))) return st;
  if ((st = want_same(c, V, K, 1, "seqlen_k"))) return st;
  if ((st = want_same(c, O, Q, 1, "seqlen_q"))) return st;
  return FA_OK;
}

/* The i32 kernel parameters, the LSE index and the grid. */
static fa_status check_sizes(Ctx *c) {
  const fa_kernel_info *in = c->info;
  int64_t batch = c->t[Q]->dim[0], sq = c->t[Q]->dim[1], sk = c->t[K]->dim[1];
  const char *names[3] = {"batch", "seqlen_q", "seqlen_k"};
  int64_t vals[3] = {batch, sq, sk};
  for (int i = 0; i < 3; i++)
    if (vals[i] > INT32_MAX) {
      fa_fmt(c->msg, c->len, "%s: %s is %" PRId64 ", more than the kernel's int32 limit %d",
             i == 2 ? "k" : "q", names[i], vals[i], INT32_MAX);
      return FA_ERR_TOO_LARGE;
    }
  int64_t rows;
  if (!fa_mul_ok(batch, in->heads, &rows) || !fa_mul_ok(rows, sq, &rows) || rows > INT32_MAX) {
    fa_fmt(c->msg, c->len,
           "lse: batch %" PRId64 " x heads %d x seqlen_q %" PRId64
           " rows exceed the int32 limit %d",
           batch, in->heads, sq, INT32_MAX);
    return FA_ERR_TOO_LARGE;
  }
  unsigned grid[3];
  if (fa_forward_grid(in, batch, sq, grid) == FA_OK) return FA_OK;
  int64_t tiles = in->grid == FA_GRID_ONE ? 1 : (sq + in->tile_q - 1) / in->tile_q;
  fa_fmt(c->msg, c->len,
         "grid: %" PRId64 " q tiles x %d heads x %" PRId64
         " batch exceeds the CUDA grid limits (2^31-1 x 65535 x 65535)",
         tiles, in->heads, batch);
  return FA_ERR_TOO_LARGE;
}

/* The outputs must not share memory with an input or each other: a block
 * could overwrite what another still reads. Compares address ranges, which
 * is conservative for interleaved layouts. */
static fa_status check_aliasing(Ctx *c, const int64_t ext[4]) {
  uintptr_t o = (uintptr_t)c->t[O]->data, lse = (uintptr_t)c->a->lse;
  int64_t lse_bytes = 0;
  if (c->a->lse)
    lse_bytes = c->t[Q]->dim[0] * c->info->heads * c->t[Q]->dim[1] * (int64_t)sizeof(float);
  for (int i = 0; i < 3; i++) {
    uintptr_t p = (uintptr_t)c->t[i]->data;
    if (fa_ranges_meet(o, ext[O], p, ext[i])) {
      fa_fmt(c->msg, c->len, "o: memory [0x%" PRIxPTR ", +%" PRId64 ") overlaps %s [0x%" PRIxPTR
             ", +%" PRId64 ")", o, ext[O], c->name[i], p, ext[i]);
      return FA_ERR_INVALID_ARGUMENT;
    }
    if (fa_ranges_meet(lse, lse_bytes, p, ext[i])) {
      fa_fmt(c->msg, c->len, "lse: memory [0x%" PRIxPTR ", +%" PRId64 ") overlaps %s",
             lse, lse_bytes, c->name[i]);
      return FA_ERR_INVALID_ARGUMENT;
    }
  }
  if (fa_ranges_meet(lse, lse_bytes, o, ext[O])) {
    fa_fmt(c->msg, c->len, "lse: memory [0x%" PRIxPTR ", +%" PRId64 ") overlaps o", lse,
           lse_bytes);
    return FA_ERR_INVALID_ARGUMENT;
  }
  return FA_OK;
}

fa_status fa_forward_grid(const fa_kernel_info *info, int64_t batch, int64_t seqlen_q,
                          unsigned grid[3]) {
  if (!info || !grid) return FA_ERR_NULL_POINTER;
  if (batch < 0 || seqlen_q < 0 || info->tile_q <= 0) return FA_ERR_INVALID_ARGUMENT;
  int64_t gx = info->grid == FA_GRID_ONE ? 1 : (seqlen_q + info->tile_q - 1) / info->tile_q;
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
  fa_fmt(msg, msglen, "%s", "");
  if (!info || !args) {
    fa_fmt(msg, msglen, "%s is NULL", info ? "args" : "kernel info");
    return FA_ERR_NULL_POINTER;
  }
  if (info->mode != FA_MODE_FORWARD) {
    fa_fmt(msg, msglen, "kernel %s is a %s kernel; fa_forward launches forward kernels only",
           info->kernel, info->mode == FA_MODE_DECODE ? "decode" : "backward");
    return FA_ERR_UNSUPPORTED;
  }
  fa_launch_tensors lt = {{&args->q, &args->k, &args->v, &args->o}, {"q", "k", "v", "o"},
                          {dim_names, dim_names, dim_names, dim_names}, info->dtype, msg, msglen};
  Ctx c = {info, args, {&args->q, &args->k, &args->v, &args->o}, {"q", "k", "v", "o"},
           msg, msglen, lt};
  fa_status st;
  int64_t ext[4];
  if ((st = check_info(&c)) || (st = fa_check_nulls(&c.lt)) || (st = fa_check_dtypes(&c.lt)) ||
      (st = fa_check_nonnegative(&c.lt)) || (st = check_meta_dims(&c)) || (st = check_cross_dims(&c)))
    return st;
  /* Nothing is launched for an empty Q; its pointers and strides are never used. */
  if (args->q.dim[0] == 0 || args->q.dim[1] == 0) return FA_OK;
  if ((st = check_sizes(&c)) || (st = fa_check_strides(&c.lt)) ||
      (st = fa_check_alignment(&c.lt, args->lse)) || (st = fa_check_extents(&c.lt, ext)) ||
      (st = fa_check_o_overlap(&c.lt)) ||
      (st = check_aliasing(&c, ext)))
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
