/* varlen.c - variable-length batches (docs/abi.md, "Variable-length
 * batches"): the checks of a launch's fa_varlen, GPU-free where they can be,
 * the four parameters a varlen kernel takes after its kind's, the metadata
 * rules of `layout varlen`, and the check of the device cu_seqlens when the
 * caller gave no host copies.
 *
 * Same stance as check.c: the kernels clamp each sequence's bounds to
 * [0, total] and to the longest sequence, so a lie cannot make them read
 * out of bounds, but a wrong prefix sum still computes garbage silently:
 * everything is refused here with a message naming the array, the index
 * and the numbers.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_GRID_YZ 65535

enum { Q, K };

fa_sizes fa_launch_sizes_(const fa_varlen *vl, const fa_tensor *q, const fa_tensor *k) {
  fa_sizes s = {q->dim[0], q->dim[1], k->dim[1]};
  if (vl) s.batch = vl->num_seqs, s.seqlen_q = vl->max_seqlen_q, s.seqlen_k = vl->max_seqlen_k;
  return s;
}

/* ---- metadata -------------------------------------------------------------- */

int fa_varlen_meta_conflict_(const fa_kernel_info *in, char *why, size_t len) {
  if (!in->varlen) return -2;
  if (in->mode == FA_MODE_DECODE) {
    fa_fmt(why, len, "varlen is not valid with mode decode (a decode kernel's sequences have "
           "their lengths in cache_seqlens)");
    return -1;
  }
  if (in->mode == FA_MODE_BLOCKS || in->block_list[0]) {
    fa_fmt(why, len, "varlen is not valid with %s (block lists are for padded batches)",
           in->mode == FA_MODE_BLOCKS ? "mode blocks" : "block_list");
    return -1;
  }
  if (in->dropout_torch) {
    fa_fmt(why, len, "varlen is not valid with dropout_mask torch (flashc's exact mask only: "
           "element (b, h, q, k) of sequence b at its own positions)");
    return -1;
  }
  for (int i = 0; i < in->ninputs; i++)
    for (int d = 0; d < in->inputs[i].rank; d++) {
      int dim = in->inputs[i].dims[d];
      if (dim != FA_INPUT_DIM_SEQLEN_Q && dim != FA_INPUT_DIM_SEQLEN_K) continue;
      fa_fmt(why, len, "'%s': dim %s is not valid with layout varlen (each sequence has its "
             "own length; a varlen input's dims are batch = num_seqs or constants)",
             in->inputs[i].name, dim == FA_INPUT_DIM_SEQLEN_Q ? "seqlen_q" : "seqlen_k");
      return i;
    }
  return -2;
}

/* ---- the launch's struct --------------------------------------------------- */

/* A varlen kernel takes fa_varlen, a padded one refuses it: the two read
 * the same tensors in different layouts. */
static fa_status check_layout(const fa_kernel_info *in, const fa_varlen *vl, char *msg,
                              size_t len) {
  if (in->varlen && !vl) {
    fa_fmt(msg, len, "kernel %s was compiled with `varlen = true`: pass args.varlen "
           "(cu_seqlens_q, cu_seqlens_k, num_seqs, max_seqlen_q, max_seqlen_k; fa_varlen) "
           "with q, k, v, o packed as [1, total, heads, head_dim]", in->kernel);
    return FA_ERR_INVALID_ARGUMENT;
  }
  if (!in->varlen && vl) {
    fa_fmt(msg, len, "kernel %s takes a padded batch (compiled without `varlen = true`): "
           "args.varlen must be NULL", in->kernel);
    return FA_ERR_INVALID_ARGUMENT;
  }
  return FA_OK;
}

/* One prefix-sum array: present (device) and int32-aligned (both copies). */
static fa_status check_array(const int32_t *dev, const int32_t *host, const char *name,
                             char *msg, size_t len) {
  if (!dev) {
    fa_fmt(msg, len, "varlen: %s is NULL (a device int32 array of num_seqs + 1 prefix sums)",
           name);
    return FA_ERR_NULL_POINTER;
  }
  uintptr_t p = (uintptr_t)dev, h = (uintptr_t)host;
  if (p % 4 || h % 4) {
    fa_fmt(msg, len, "varlen: %s%s 0x%" PRIxPTR " is not 4-byte aligned (int32 elements)",
           p % 4 ? "" : "host_", name, p % 4 ? p : h);
    return FA_ERR_ALIGNMENT;
  }
  return FA_OK;
}

/* The four arrays' num_seqs + 1 int32 (num_seqs in 0..65535) end within
 * the address space: the kernels read the device ones, the checks the host
 * copies (a NULL copy: none). */
static fa_status check_arrays_in_space(const fa_varlen *vl, char *msg, size_t len) {
  static const char *const names[4] = {"cu_seqlens_q", "host_cu_seqlens_q", "cu_seqlens_k",
                                       "host_cu_seqlens_k"};
  const int32_t *p[4] = {vl->cu_seqlens_q, vl->host_cu_seqlens_q, vl->cu_seqlens_k,
                         vl->host_cu_seqlens_k};
  int64_t bytes = ((int64_t)vl->num_seqs + 1) * 4;
  for (int i = 0; i < 4; i++) {
    fa_status st = fa_check_in_space_(names[i], p[i], bytes, msg, len);
    if (st != FA_OK) return st;
  }
  return FA_OK;
}

/* A longest length: the kernels' i32 seqlen parameter, at least 1. */
static fa_status check_max(int64_t v, const char *name, char *msg, size_t len) {
  if (v >= 1 && v <= INT32_MAX) return FA_OK;
  fa_fmt(msg, len, "varlen: %s is %" PRId64 ", must be in 1..%d (the longest sequence's length, "
         "or a bound on it)", name, v, INT32_MAX);
  return v < 1 ? FA_ERR_INVALID_ARGUMENT : FA_ERR_TOO_LARGE;
}

/* Every tensor is packed: one row of sequences along dim 1. */
static fa_status check_packed(const fa_launch_tensors *c) {
  for (int i = 0; i < c->n; i++) {
    if (c->t[i]->dim[0] == 1) continue;
    int kv = i == K || strcmp(c->name[i], "v") == 0 || strcmp(c->name[i], "dk") == 0 ||
             strcmp(c->name[i], "dv") == 0;
    fa_fmt(c->msg, c->len, "%s: dim[0] is %" PRId64 " but a varlen launch takes packed tensors: "
           "%s must be [1, %s, %s, head_dim] (the sequences one after another along dim 1)",
           c->name[i], c->t[i]->dim[0], c->name[i], kv ? "total_k" : "total_q",
           kv ? "kv_heads" : "heads");
    return FA_ERR_SHAPE;
  }
  return FA_OK;
}

fa_status fa_check_varlen_(const fa_kernel_info *in, const fa_varlen *vl,
                           const fa_launch_tensors *c) {
  fa_status st = check_layout(in, vl, c->msg, c->len);
  if (st != FA_OK || !vl) return st;
  if (vl->num_seqs < 0) {
    fa_fmt(c->msg, c->len, "varlen: num_seqs is %d, cannot be negative", vl->num_seqs);
    return FA_ERR_INVALID_ARGUMENT;
  }
  if ((st = check_array(vl->cu_seqlens_q, vl->host_cu_seqlens_q, "cu_seqlens_q", c->msg,
                        c->len)) ||
      (st = check_array(vl->cu_seqlens_k, vl->host_cu_seqlens_k, "cu_seqlens_k", c->msg,
                        c->len)) ||
      (st = check_max(vl->max_seqlen_q, "max_seqlen_q", c->msg, c->len)) ||
      (st = check_max(vl->max_seqlen_k, "max_seqlen_k", c->msg, c->len)))
    return st;
  if (vl->num_seqs > MAX_GRID_YZ) {
    fa_fmt(c->msg, c->len, "varlen: num_seqs is %d, more than the grid limit %d (grid z: one "
           "sequence a block row)", vl->num_seqs, MAX_GRID_YZ);
    return FA_ERR_TOO_LARGE;
  }
  return (st = check_arrays_in_space(vl, c->msg, c->len)) ? st : check_packed(c);
}

/* What the i32 parameters and indices of a varlen launch must hold: the
 * totals, the LSE's [heads, total_q] index, and the padded batch's rows
 * (num_seqs x heads x max_seqlen_q) that its grid and workspaces span. */
fa_status fa_check_varlen_sizes_(const fa_kernel_info *in, const fa_varlen *vl,
                                 const fa_launch_tensors *c) {
  if (!vl) return FA_OK;
  int64_t tq = c->t[Q]->dim[1], tk = c->t[K]->dim[1], rows;
  if (tq > INT32_MAX || tk > INT32_MAX) {
    fa_fmt(c->msg, c->len, "%s: total_%s (dim 1) is %" PRId64 ", more than the kernel's int32 "
           "limit %d", tq > INT32_MAX ? "q" : "k", tq > INT32_MAX ? "q" : "k",
           tq > INT32_MAX ? tq : tk, INT32_MAX);
    return FA_ERR_TOO_LARGE;
  }
  if (!fa_mul_ok(tq, in->heads, &rows) || rows > INT32_MAX) {
    fa_fmt(c->msg, c->len, "lse: heads %d x total_q %" PRId64 " rows exceed the int32 limit %d",
           in->heads, tq, INT32_MAX);
    return FA_ERR_TOO_LARGE;
  }
  if (!fa_mul_ok(vl->num_seqs, in->heads, &rows) || !fa_mul_ok(rows, vl->max_seqlen_q, &rows) ||
      rows > INT32_MAX) {
    fa_fmt(c->msg, c->len, "varlen: num_seqs %d x heads %d x max_seqlen_q %" PRId64 " padded "
           "rows exceed the int32 limit %d (the grid and the workspaces are a padded batch's)",
           vl->num_seqs, in->heads, vl->max_seqlen_q, INT32_MAX);
    return FA_ERR_TOO_LARGE;
  }
  return FA_OK;
}

/* ---- the prefix sums' values ---------------------------------------------- */

/* One array (`which` "q" or "k") against its total and longest length:
 * starts at 0, never decreases, ends at the total, no step longer than max. */
static fa_status check_sums(const int32_t *cu, int n, int64_t total, int64_t max,
                            const char *which, char *msg, size_t len) {
  if (cu[0] != 0) {
    fa_fmt(msg, len, "cu_seqlens_%s[0] is %d: the prefix sums start at 0", which, (int)cu[0]);
    return FA_ERR_INVALID_ARGUMENT;
  }
  for (int i = 0; i < n; i++) {
    int64_t l = (int64_t)cu[i + 1] - cu[i];
    if (l < 0) {
      fa_fmt(msg, len, "cu_seqlens_%s[%d] is %d, less than cu_seqlens_%s[%d] = %d: the prefix "
             "sums cannot decrease (sequence %d would have length %" PRId64 ")", which, i + 1,
             (int)cu[i + 1], which, i, (int)cu[i], i, l);
      return FA_ERR_INVALID_ARGUMENT;
    }
    if (l > max) {
      fa_fmt(msg, len, "sequence %d has %" PRId64 " %s (cu_seqlens_%s[%d] - cu_seqlens_%s[%d]), "
             "more than max_seqlen_%s = %" PRId64, i, l, *which == 'q' ? "queries" : "keys",
             which, i + 1, which, i, which, max);
      return FA_ERR_SHAPE;
    }
  }
  if (cu[n] != total) {
    fa_fmt(msg, len, "cu_seqlens_%s[%d] (the last, num_seqs = %d) is %d but %s holds total_%s = "
           "%" PRId64 " rows (its dim 1)", which, n, n, (int)cu[n], which, which, total);
    return FA_ERR_SHAPE;
  }
  return FA_OK;
}

/* The kernel's requires, per sequence: it indexes one sequence's keys by
 * its queries (or the reverse). */
static fa_status check_requires(const fa_kernel_info *in, const int32_t *cq, const int32_t *ck,
                                int n, char *msg, size_t len) {
  for (int i = 0; i < n; i++) {
    int64_t sq = (int64_t)cq[i + 1] - cq[i], sk = (int64_t)ck[i + 1] - ck[i];
    int q_le_k = in->require_q_le_k && sq > sk, k_le_q = in->require_k_le_q && sk > sq;
    if (!q_le_k && !k_le_q) continue;
    fa_fmt(msg, len, "sequence %d: seqlen_%s is %" PRId64 ", more than its seqlen_%s %" PRId64
           ": kernel %s requires %s in every sequence", i, q_le_k ? "q" : "k", q_le_k ? sq : sk,
           q_le_k ? "k" : "q", q_le_k ? sk : sq, in->kernel,
           q_le_k ? "seqlen_q <= seqlen_k" : "seqlen_k <= seqlen_q");
    return FA_ERR_SHAPE;
  }
  return FA_OK;
}

fa_status fa_check_varlen_values_(const fa_kernel_info *in, const fa_varlen *vl,
                                  const int32_t *cq, const int32_t *ck, const fa_tensor *q,
                                  const fa_tensor *k, char *msg, size_t len) {
  if (!vl || vl->num_seqs == 0) return FA_OK;
  fa_status st;
  if (cq && (st = check_sums(cq, vl->num_seqs, q->dim[1], vl->max_seqlen_q, "q", msg, len)))
    return st;
  if (ck && (st = check_sums(ck, vl->num_seqs, k->dim[1], vl->max_seqlen_k, "k", msg, len)))
    return st;
  if (!cq || !ck || !(in->require_q_le_k || in->require_k_le_q)) return FA_OK;
  return check_requires(in, cq, ck, vl->num_seqs, msg, len);
}

/* ---- memory, parameters, the device's arrays ------------------------------- */

int fa_varlen_ranges_(const fa_varlen *vl, fa_range r[2]) {
  if (!vl || vl->num_seqs < 0) return 0;
  int64_t bytes = ((int64_t)vl->num_seqs + 1) * 4;
  r[0] = (fa_range){"cu_seqlens_q", (uintptr_t)vl->cu_seqlens_q, bytes};
  r[1] = (fa_range){"cu_seqlens_k", (uintptr_t)vl->cu_seqlens_k, bytes};
  return 2;
}

void fa_put_varlen_(fa_plist *l, const fa_varlen *vl, const fa_tensor *q, const fa_tensor *k) {
  fa_put_(l, FA_PARAM_PTR, "cu_seqlens_q", (int64_t)(uintptr_t)vl->cu_seqlens_q);
  fa_put_(l, FA_PARAM_PTR, "cu_seqlens_k", (int64_t)(uintptr_t)vl->cu_seqlens_k);
  fa_put_(l, FA_PARAM_I32, "total_q", q->dim[1]);
  fa_put_(l, FA_PARAM_I32, "total_k", k->dim[1]);
}

/* Copies one device array to host memory of its own (malloc'ed into *out)
 * when the caller gave no host copy; *out NULL when it did. */
static fa_status fetch(fa_module *m, const int32_t *dev, const int32_t *host, int n, void *stream,
                       const char *what, int32_t **out) {
  *out = NULL;
  if (host) return FA_OK;
  size_t len;
  char *msg = fa_module_msg_(m, &len);
  if (!(*out = malloc(((size_t)n + 1) * sizeof **out))) {
    fa_fmt(msg, len, "out of host memory for %s's %d values", what, n + 1);
    return FA_ERR_OUT_OF_MEMORY;
  }
  return fa_module_copy_i32_(m, dev, (size_t)n + 1, stream, *out, what);
}

fa_status fa_varlen_check_device_(fa_module *m, const fa_kernel_info *in, const fa_varlen *vl,
                                  const fa_tensor *q, const fa_tensor *k, void *stream) {
  if (!vl || vl->num_seqs == 0 || (vl->host_cu_seqlens_q && vl->host_cu_seqlens_k)) return FA_OK;
  int32_t *cq = NULL, *ck = NULL;
  fa_status st = fetch(m, vl->cu_seqlens_q, vl->host_cu_seqlens_q, vl->num_seqs, stream,
                       "cu_seqlens_q", &cq);
  if (st == FA_OK)
    st = fetch(m, vl->cu_seqlens_k, vl->host_cu_seqlens_k, vl->num_seqs, stream, "cu_seqlens_k",
               &ck);
  if (st == FA_OK) {
    size_t len;
    char *msg = fa_module_msg_(m, &len);
    st = fa_check_varlen_values_(in, vl, cq ? cq : vl->host_cu_seqlens_q,
                                 ck ? ck : vl->host_cu_seqlens_k, q, k, msg, len);
  }
  free(cq);
  free(ck);
  return st;
}
