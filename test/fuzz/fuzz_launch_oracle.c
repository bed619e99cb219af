/* fuzz_launch_oracle.c - the launch harness's oracle: what a launch the
 * checks accept promises, for every kind (fuzz_launch.c). */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_launch.h"

/* An accepted launch's bound tensor inputs stay below 2^62 bytes, within
 * the address space and off the outputs (ranges `out`, n of them). */
void check_inputs(const char *what, const fa_kernel_info *info, const fa_input *b, int nb,
                  const Range *out, int nout) {
  for (int i = 0; i < nb; i++) {
    const fa_input_info *x = NULL;
    for (int j = 0; j < info->ninputs && j < FA_MAX_INPUTS; j++)
      if (b[i].name && strcmp(b[i].name, info->inputs[j].name) == 0)
        x = &info->inputs[j];
    FUZZ_CHECK(x != NULL);
    if (x->rank == 0)
      continue;
    fa_tensor t = b[i].tensor;
    for (int d = x->rank; d < 4; d++)
      t.dim[d] = 1, t.stride[d] = 0;
    __int128 e = extent(&t, dtype_bytes(x->dtype));
    FUZZ_CHECK(e < ((__int128)1 << 62));
    Range r = range(x->name, t.data, e);
    check_in_space(what, &r, 1);
    for (int o = 0; o < nout; o++)
      if (r.len && out[o].len && r.lo < out[o].lo + out[o].len && out[o].lo < r.lo + r.len) {
        fprintf(stderr, "%s accepted input '%s' overlapping %s\n", what, x->name, out[o].name);
        FUZZ_CHECK(0);
      }
  }
}

/* Bytes from data to one past the last element, as the contract defines
 * them, in 128 bits; 0 without elements. */
__int128 extent(const fa_tensor *t, int elem) {
  for (int d = 0; d < 4; d++)
    if (t->dim[d] <= 0)
      return 0;
  __int128 off = 0;
  for (int d = 0; d < 4; d++)
    off += (__int128)(t->dim[d] - 1) * t->stride[d];
  return (off + 1) * elem;
}

Range range(const char *name, const void *p, __int128 len) {
  Range r = {name, (__int128)(uintptr_t)p, len};
  return r;
}

/* No output range meets another range (inputs may alias each other). */
void check_disjoint(const char *what, const Range *r, int n, const int *is_out,
                    fa_tensor *const *t, int nt) {
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      const Range *x = &r[a], *y = &r[b];
      if (!is_out[a] || b == a || (is_out[b] && b < a) || !x->len || !y->len)
        continue;
      if (x->lo < y->lo + y->len && y->lo < x->lo + x->len) {
        fprintf(stderr, "%s accepted a launch whose %s overlaps %s\n", what, x->name, y->name);
        for (int i = 0; i < n; i++)
          fprintf(stderr, "  %s: [0x%016llx%016llx, +0x%llx)\n", r[i].name,
                  (unsigned long long)(r[i].lo >> 64), (unsigned long long)r[i].lo,
                  (unsigned long long)r[i].len);
        for (int i = 0; i < nt; i++)
          fprintf(stderr, "  %s: dims %lld %lld %lld %lld strides %lld %lld %lld %lld\n",
                  r[i].name, (long long)t[i]->dim[0], (long long)t[i]->dim[1],
                  (long long)t[i]->dim[2], (long long)t[i]->dim[3], (long long)t[i]->stride[0],
                  (long long)t[i]->stride[1], (long long)t[i]->stride[2],
                  (long long)t[i]->stride[3]);
        FUZZ_CHECK(0);
      }
    }
}

/* Every range r[0..n) of an accepted launch (its tensors and LSE, the
 * backward's workspace, cu_seqlens, a decode launch's cache_seqlens and
 * block_table, bound inputs) ends within the address space: its last byte
 * below 2^64, one past it a pointer. */
void check_in_space(const char *what, const Range *r, int n) {
  for (int i = 0; i < n; i++)
    if (r[i].len && r[i].lo + r[i].len > (__int128)UINT64_MAX) {
      fprintf(stderr, "%s accepted a launch whose %s [0x%llx, +0x%llx) runs past the end of "
              "the address space\n", what, r[i].name, (unsigned long long)r[i].lo,
              (unsigned long long)r[i].len);
      FUZZ_CHECK(0);
    }
}

/* Tensor i's range, checked to stay below 2^62 bytes and be aligned. */
Range tensor_range(const char *name, const fa_tensor *t) {
  __int128 e = extent(t, 2);
  FUZZ_CHECK(e < ((__int128)1 << 62));
  FUZZ_CHECK(e == 0 || (uintptr_t)t->data % 16 == 0);
  return range(name, t->data, e);
}

/* What an accepted forward or decode launch promises about its memory,
 * every range within the address space too. */
void check_accepted(const char *what, fa_tensor *const t[4], const void *lse,
                    __int128 lse_bytes, Range extra[2], int nextra) {
  Range r[7];
  int n = 0, is_out[7] = {0, 0, 0, 1, 1, 0, 0};
  for (int i = 0; i < 4; i++)
    r[n++] = tensor_range((const char *[]){"q", "k", "v", "o"}[i], t[i]);
  r[n++] = range("lse", lse, lse ? lse_bytes : 0);
  for (int i = 0; i < nextra; i++)
    r[n++] = extra[i];
  check_disjoint(what, r, n, is_out, t, 4);
  check_in_space(what, r, n);
}

Sizes launch_sizes(const fa_varlen *v, const fa_tensor *q, const fa_tensor *k) {
  Sizes s = {q->dim[0], q->dim[1], k->dim[1]};
  if (v)
    s.batch = v->num_seqs, s.sq = v->max_seqlen_q, s.sk = v->max_seqlen_k;
  return s;
}

/* What any accepted launch says of its layout: the struct exactly for a
 * varlen kernel; then its fields in range and every tensor packed (also
 * when the launch computes nothing). */
void check_layout(const fa_kernel_info *info, const fa_varlen *v, fa_tensor *const *t,
                  int nt) {
  FUZZ_CHECK(!v == !info->varlen);
  if (!v)
    return;
  FUZZ_CHECK(v->num_seqs >= 0 && v->num_seqs <= 65535);
  FUZZ_CHECK(v->cu_seqlens_q && v->cu_seqlens_k);
  FUZZ_CHECK(((uintptr_t)v->cu_seqlens_q | (uintptr_t)v->cu_seqlens_k |
              (uintptr_t)v->host_cu_seqlens_q | (uintptr_t)v->host_cu_seqlens_k) % 4 == 0);
  FUZZ_CHECK(v->max_seqlen_q >= 1 && v->max_seqlen_q <= INT32_MAX);
  FUZZ_CHECK(v->max_seqlen_k >= 1 && v->max_seqlen_k <= INT32_MAX);
  for (int i = 0; i < nt; i++)
    FUZZ_CHECK(t[i]->dim[0] == 1);
}

/* Host prefix sums a launch may run with: 0 first, no decrease, no
 * sequence longer than max, the total last. */
static int sums_ok(const int32_t *cu, int n, int64_t total, int64_t max) {
  if (cu[0] != 0 || cu[n] != total)
    return 0;
  for (int i = 0; i < n; i++) {
    int64_t l = (int64_t)cu[i + 1] - cu[i];
    if (l < 0 || l > max)
      return 0;
  }
  return 1;
}

/* An accepted varlen launch that computes something: the totals, the LSE
 * rows and the padded rows in int32; its host copies' values valid, and
 * with both, the requires met by every sequence. */
void check_varlen_sizes(const fa_kernel_info *info, const fa_varlen *v,
                        const fa_tensor *q, const fa_tensor *k) {
  FUZZ_CHECK(q->dim[1] <= INT32_MAX && k->dim[1] <= INT32_MAX);
  FUZZ_CHECK((__int128)info->heads * q->dim[1] <= INT32_MAX);
  FUZZ_CHECK((__int128)v->num_seqs * info->heads * v->max_seqlen_q <= INT32_MAX);
  const int32_t *cq = v->host_cu_seqlens_q, *ck = v->host_cu_seqlens_k;
  int n = v->num_seqs;
  FUZZ_CHECK(!cq || sums_ok(cq, n, q->dim[1], v->max_seqlen_q));
  FUZZ_CHECK(!ck || sums_ok(ck, n, k->dim[1], v->max_seqlen_k));
  for (int i = 0; cq && ck && i < n; i++) {
    int64_t lq = (int64_t)cq[i + 1] - cq[i], lk = (int64_t)ck[i + 1] - ck[i];
    FUZZ_CHECK(!(info->require_q_le_k && lq > lk) && !(info->require_k_le_q && lk > lq));
  }
}

/* A varlen launch's cu_seqlens as the memory the kernels read. */
int varlen_ranges(const fa_varlen *v, Range r[2]) {
  if (!v)
    return 0;
  __int128 len = ((__int128)v->num_seqs + 1) * 4;
  r[0] = range("cu_seqlens_q", v->cu_seqlens_q, len);
  r[1] = range("cu_seqlens_k", v->cu_seqlens_k, len);
  return 2;
}

/* An accepted launch's parameter list (fa_forward_params, or a backward
 * step's fa_backward_params): i32 values in int32; batch, seqlen_q and
 * seqlen_k the launch's sizes; for a varlen kernel cu_seqlens_q,
 * cu_seqlens_k, total_q, total_k right after the kind's last stride and
 * before dropout's and the inputs' parameters, and nowhere else. */
void check_params(const char *what, const fa_param *p, int n, const fa_varlen *v,
                  const fa_tensor *q, const fa_tensor *k, int varlen_kernel) {
  static const char *const size_names[3] = {"batch", "seqlen_q", "seqlen_k"};
  Sizes s = launch_sizes(varlen_kernel ? v : NULL, q, k);
  int64_t sizes[3] = {s.batch, s.sq, s.sk};
  int cu = -1;
  for (int i = 0; i < n; i++) {
    FUZZ_CHECK(p[i].name != NULL);
    if (p[i].kind == FA_PARAM_I32 && (p[i].value < INT32_MIN || p[i].value > INT32_MAX)) {
      fprintf(stderr, "%s: i32 parameter %s is %lld\n", what, p[i].name, (long long)p[i].value);
      FUZZ_CHECK(0);
    }
    for (int j = 0; j < 3; j++)
      if (strcmp(p[i].name, size_names[j]) == 0)
        FUZZ_CHECK(p[i].kind == FA_PARAM_I32 && p[i].value == sizes[j]);
    if (strcmp(p[i].name, "cu_seqlens_q") == 0) {
      FUZZ_CHECK(cu < 0);
      cu = i;
    }
  }
  if (!varlen_kernel) {
    FUZZ_CHECK(cu < 0);
    return;
  }
  FUZZ_CHECK(cu >= 1 && cu + 4 <= n && p[cu - 1].kind == FA_PARAM_I64);
  const char *last = p[cu - 1].name;
  FUZZ_CHECK(strlen(last) > 3 && strcmp(last + strlen(last) - 3, ".sh") == 0);
  static const char *const vn[4] = {"cu_seqlens_q", "cu_seqlens_k", "total_q", "total_k"};
  int64_t want[4] = {(int64_t)(uintptr_t)v->cu_seqlens_q, (int64_t)(uintptr_t)v->cu_seqlens_k,
                     q->dim[1], k->dim[1]};
  for (int i = 0; i < 4; i++)
    FUZZ_CHECK(strcmp(p[cu + i].name, vn[i]) == 0 && p[cu + i].value == want[i] &&
               p[cu + i].kind == (i < 2 ? FA_PARAM_PTR : FA_PARAM_I32));
  FUZZ_CHECK(cu + 4 == n || strcmp(p[cu + 4].name, "seed_lo") == 0 ||
             strncmp(p[cu + 4].name, "input", 5) == 0);
}
