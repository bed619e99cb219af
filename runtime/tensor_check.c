/* tensor_check.c - the checks every launch makes of its four tensors (q, k,
 * v, o): forward (check.c) and decode (decode.c) validation share them.
 * Each returns FA_OK or the first failure's status with a message that names
 * the tensor, the dimension and the numbers. */
#include <inttypes.h>
#include <stdint.h>

#include "internal.h"

/* Byte offsets stay below 2^62 so that pointer + offset never wraps. */
#define MAX_BYTES (INT64_C(1) << 62)

enum { Q, K, V, O };

/* a * b for a, b >= 0; returns 0 on overflow of int64. */
int fa_mul_ok(int64_t a, int64_t b, int64_t *r) {
  if (a != 0 && b > INT64_MAX / a) return 0;
  *r = a * b;
  return 1;
}

/* a + b for a, b >= 0; returns 0 on overflow of int64. */
int fa_add_ok(int64_t a, int64_t b, int64_t *r) {
  if (b > INT64_MAX - a) return 0;
  *r = a + b;
  return 1;
}

int fa_has_elements(const fa_tensor *t) {
  return t->dim[0] > 0 && t->dim[1] > 0 && t->dim[2] > 0 && t->dim[3] > 0;
}

fa_status fa_check_nulls(const fa_launch_tensors *c) {
  for (int i = 0; i < 4; i++)
    if (!c->t[i]->data && fa_has_elements(c->t[i])) {
      fa_fmt(c->msg, c->len, "%s: data pointer is NULL", c->name[i]);
      return FA_ERR_NULL_POINTER;
    }
  return FA_OK;
}

fa_status fa_check_dtypes(const fa_launch_tensors *c) {
  for (int i = 0; i < 4; i++)
    if (c->t[i]->dtype != c->dtype) {
      fa_fmt(c->msg, c->len, "%s: dtype is %s but the kernel was compiled for %s", c->name[i],
             fa_dtype_name(c->t[i]->dtype), fa_dtype_name(c->dtype));
      return FA_ERR_DTYPE;
    }
  return FA_OK;
}

fa_status fa_check_nonnegative(const fa_launch_tensors *c) {
  for (int i = 0; i < 4; i++)
    for (int d = 0; d < 4; d++)
      if (c->t[i]->dim[d] < 0) {
        fa_fmt(c->msg, c->len, "%s: dim[%d] (%s) is %" PRId64 ", a size cannot be negative",
               c->name[i], d, c->dims[i][d], c->t[i]->dim[d]);
        return FA_ERR_SHAPE;
      }
  return FA_OK;
}

fa_status fa_check_strides(const fa_launch_tensors *c) {
  for (int i = 0; i < 4; i++) {
    const fa_tensor *t = c->t[i];
    for (int d = 0; d < 4; d++)
      if (t->stride[d] < 0) {
        fa_fmt(c->msg, c->len, "%s: stride[%d] (%s) is %" PRId64 ", strides cannot be negative",
               c->name[i], d, c->dims[i][d], t->stride[d]);
        return FA_ERR_STRIDE;
      }
    if (t->stride[3] != 1) {
      fa_fmt(c->msg, c->len,
             "%s: the last dimension (head_dim) is not contiguous: stride[3] is %" PRId64
             ", must be 1",
             c->name[i], t->stride[3]);
      return FA_ERR_STRIDE;
    }
  }
  return FA_OK;
}

/* Kernels move 16 bytes at a time: every row start must be 16-byte aligned. */
fa_status fa_check_alignment(const fa_launch_tensors *c, const void *lse) {
  for (int i = 0; i < 4; i++) {
    const fa_tensor *t = c->t[i];
    uintptr_t p = (uintptr_t)t->data;
    if (p % 16) {
      fa_fmt(c->msg, c->len, "%s: data pointer 0x%" PRIxPTR " is not 16-byte aligned (offset %u)",
             c->name[i], p, (unsigned)(p % 16));
      return FA_ERR_ALIGNMENT;
    }
    int64_t per16 = 16 / (int64_t)fa_dtype_size(t->dtype);
    for (int d = 0; d < 3; d++)
      if (t->stride[d] % per16) {
        fa_fmt(c->msg, c->len,
               "%s: stride[%d] (%s) is %" PRId64 " elements, not a multiple of %" PRId64
               " (16 bytes)",
               c->name[i], d, c->dims[i][d], t->stride[d], per16);
        return FA_ERR_ALIGNMENT;
      }
  }
  if ((uintptr_t)lse % 4) {
    fa_fmt(c->msg, c->len, "lse: pointer 0x%" PRIxPTR " is not 4-byte aligned", (uintptr_t)lse);
    return FA_ERR_ALIGNMENT;
  }
  return FA_OK;
}

/* Bytes from data to one past the last element: 0 for a tensor without
 * elements, -1 when that reaches MAX_BYTES. */
static int64_t extent_bytes(const fa_tensor *t) {
  if (!fa_has_elements(t)) return 0;
  int64_t off = 0, term;
  for (int d = 0; d < 4; d++)
    if (!fa_mul_ok(t->dim[d] - 1, t->stride[d], &term) || !fa_add_ok(off, term, &off)) return -1;
  int64_t es = (int64_t)fa_dtype_size(t->dtype), bytes;
  if (!fa_add_ok(off, 1, &off) || !fa_mul_ok(off, es, &bytes) || bytes >= MAX_BYTES) return -1;
  return bytes;
}

fa_status fa_check_extents(const fa_launch_tensors *c, int64_t ext[4]) {
  for (int i = 0; i < 4; i++) {
    ext[i] = extent_bytes(c->t[i]);
    uintptr_t p = (uintptr_t)c->t[i]->data;
    if (ext[i] > 0 && p > UINTPTR_MAX - (uint64_t)ext[i]) {
      fa_fmt(c->msg, c->len, "%s: memory [0x%" PRIxPTR ", +%" PRId64
             ") runs past the end of the address space", c->name[i], p, ext[i]);
      return FA_ERR_INVALID_ARGUMENT;
    }
    if (ext[i] < 0) {
      const fa_tensor *t = c->t[i];
      fa_fmt(c->msg, c->len,
             "%s: the largest element offset overflows (dims %" PRId64 "x%" PRId64 "x%" PRId64
             "x%" PRId64 ", strides %" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
             "): more than 2^62 bytes",
             c->name[i], t->dim[0], t->dim[1], t->dim[2], t->dim[3], t->stride[0], t->stride[1],
             t->stride[2], t->stride[3]);
      return FA_ERR_TOO_LARGE;
    }
  }
  return FA_OK;
}

/* O is written by many blocks at once: two of its elements must never share
 * an address. Sufficient test: sorted by stride, each dimension (extent > 1)
 * steps over the whole span of the ones inside it. */
fa_status fa_check_o_overlap(const fa_launch_tensors *c) {
  const fa_tensor *t = c->t[O];
  int idx[4] = {0, 1, 2, 3};
  for (int a = 1; a < 4; a++) /* insertion sort by stride, ties: inner dim first */
    for (int b = a; b > 0; b--) {
      int x = idx[b - 1], y = idx[b];
      if (t->stride[x] > t->stride[y] || (t->stride[x] == t->stride[y] && x < y)) {
        idx[b - 1] = y;
        idx[b] = x;
      }
    }
  int64_t span = 1; /* elements covered by the dims inside */
  for (int a = 0; a < 4; a++) {
    int d = idx[a];
    if (t->dim[d] <= 1) continue;
    if (t->stride[d] == 0) {
      fa_fmt(c->msg, c->len,
             "o: stride[%d] (%s) is 0 but the dimension has %" PRId64
             " elements: O would overlap itself",
             d, c->dims[O][d], t->dim[d]);
      return FA_ERR_STRIDE;
    }
    if (t->stride[d] < span) {
      fa_fmt(c->msg, c->len,
             "o: stride[%d] (%s) is %" PRId64 " but the dimensions inside it span %" PRId64
             " elements: O would overlap itself",
             d, c->dims[O][d], t->stride[d], span);
      return FA_ERR_STRIDE;
    }
    if (!fa_mul_ok(t->stride[d], t->dim[d], &span)) span = INT64_MAX;
  }
  return FA_OK;
}

/* Compares distances, never end addresses: a + alen may wrap. */
int fa_ranges_meet(uintptr_t a, int64_t alen, uintptr_t b, int64_t blen) {
  if (alen <= 0 || blen <= 0) return 0;
  return a <= b ? b - a < (uint64_t)alen : a - b < (uint64_t)blen;
}
