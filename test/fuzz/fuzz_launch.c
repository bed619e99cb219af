/* fuzz_launch.c - libFuzzer harness for the launch-argument checks,
 * fa_forward_check (runtime/check.c), fa_decode_check (runtime/decode.c)
 * and fa_backward_check (runtime/backward.c), no GPU needed. The input is
 * decoded into a kernel info (a sane one built from a few choices, or every
 * field raw: hand-built infos must be refused, not trusted) and the
 * arguments: dims, strides, pointers as integers, dtypes, the decode
 * cache's block table and its host copies, the backward's workspace, the
 * declared run-time inputs and their bindings (docs/abi.md), and a
 * variable-length batch's fa_varlen (docs/abi.md, "Variable-length
 * batches"): num_seqs at the edges (0, 1, 65535, 65536, negative), NULL,
 * misaligned, output-overlapping or plausible cu_seqlens, host copies absent
 * or present (valid, random, decreasing, wrong first or last value,
 * misaligned), max_seqlen_q/k at the edges (0, 1, 2^31-1, 2^31, negative,
 * one short), a tensor not packed (dim[0] != 1), a padded kernel given a
 * fa_varlen and a varlen kernel given none. Values come from a table of
 * edge cases (0, -1, INT64_MAX, 2^62, ...) or raw bytes. The first byte
 * picks the entry point: bit 0 decode, else bit 1 backward, else forward;
 * bit 2 makes a forward or backward launch a varlen one.
 *
 * Oracle: a launch the checks accept keeps its contract (flashc_runtime.h):
 * no tensor's bytes reach 2^62, the outputs (O, LSE; dQ, dK, dV and the
 * workspace) do not overlap an input or each other (a bound run-time input
 * and a varlen launch's cu_seqlens included), pointers are aligned; every
 * range (tensors, LSE, the backward's workspace, cu_seqlens, a decode
 * launch's cache_seqlens and block_table, bound inputs) ends within the
 * address space; a varlen launch's struct is given exactly to a varlen
 * kernel, its fields are in range, every tensor is packed, the int32
 * totals and padded rows fit, and host copies hold valid prefix sums
 * meeting the requires per sequence; fa_forward_params and the backward plan's fa_backward_params
 * give i32 values in range, batch / seqlen_q / seqlen_k as the launch's
 * sizes (num_seqs and the maxima for varlen) and a varlen kernel's four
 * parameters right after the kind's; the backward's plan succeeds within
 * the CUDA grid limits. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashc_runtime.h"
#include "fuzz_common.h"

static int64_t pick64(FuzzIn *in) {
  uint8_t sel = fuzz_u8(in);
  switch (sel % 16) {
  case 0: return 0;
  case 1: return 1;
  case 2: return -1;
  case 3: return INT64_MAX;
  case 4: return INT64_MIN;
  case 5: return INT32_MAX;
  case 6: return (int64_t)INT32_MAX + 1;
  case 7: return INT64_C(1) << 62;
  case 8: return (INT64_C(1) << 62) - 1;
  case 9: return 65535;
  case 10: return 65536;
  case 11: case 12: case 13: return fuzz_u8(in);
  case 14: return (int64_t)(fuzz_bytes(in, 2));
  default: return (int64_t)fuzz_bytes(in, 8);
  }
}

static int pick32(FuzzIn *in) {
  uint8_t sel = fuzz_u8(in);
  switch (sel % 12) {
  case 0: return 0;
  case 1: return 1;
  case 2: return -1;
  case 3: return INT_MAX;
  case 4: return INT_MIN;
  case 5: return 8 << (fuzz_u8(in) % 6);
  case 6: case 7: case 8: return fuzz_u8(in);
  case 9: return (int)fuzz_bytes(in, 2);
  default: return (int)fuzz_u32(in);
  }
}

static void *pickptr(FuzzIn *in) {
  uint8_t sel = fuzz_u8(in);
  switch (sel % 8) {
  case 0: return NULL;
  case 1: return (void *)(uintptr_t)(((uint64_t)fuzz_u8(in) + 1) << 40); /* far apart */
  case 2: return (void *)(uintptr_t)(16 * (uint64_t)fuzz_bytes(in, 3)); /* close together */
  case 3: return (void *)(uintptr_t)(UINT64_MAX - 16 * (uint64_t)fuzz_u8(in) - 15); /* the top */
  case 4: return (void *)(uintptr_t)((uint64_t)fuzz_u8(in) << 40 | fuzz_u8(in)); /* misaligned */
  default: return (void *)(uintptr_t)fuzz_bytes(in, 8);
  }
}

/* A kernel info: sane from a few choices, or (flag) every field raw. */
/* A byte range of a launch: a tensor, LSE, a table. */
typedef struct Range {
  const char *name;
  __int128 lo, len;
} Range;

static __int128 extent(const fa_tensor *t, int elem);
static Range range(const char *name, const void *p, __int128 len);
static void check_in_space(const char *what, const Range *r, int n);
static void make_tensor(FuzzIn *in, fa_tensor *t, fa_dtype dtype, const int64_t want[4]);
/* What a launch is: a forward (or backward) one of a padded batch, a decode
 * one, a variable-length batch's forward or backward. */
enum { KIND_FORWARD, KIND_DECODE, KIND_VARLEN };
static void make_decls(FuzzIn *in, fa_kernel_info *info, int kind);

static void make_info(FuzzIn *in, fa_kernel_info *info, int kind) {
  int decode = kind == KIND_DECODE;
  memset(info, 0, sizeof *info);
  strcpy(info->kernel, "k");
  info->version = FA_META_VERSION;
  info->varlen = kind == KIND_VARLEN;
  info->mode = decode ? FA_MODE_DECODE : FA_MODE_FORWARD;
  fa_decode_info *d = &info->decode;
  if (fuzz_u8(in) % 8 == 0) { /* raw */
    info->dtype = (fa_dtype)pick32(in);
    info->head_dim = pick32(in), info->v_head_dim = pick32(in);
    info->heads = pick32(in), info->kv_heads = pick32(in);
    info->tile_q = pick32(in), info->tile_kv = pick32(in), info->threads = pick32(in);
    info->grid = (fa_grid)(fuzz_u8(in) % 3);
    info->workspace_floats_per_row = pick32(in);
    d->cache = (fa_cache)(fuzz_u8(in) % 3);
    d->page_size = pick32(in), d->split = pick32(in), d->q_len_max = pick32(in);
    d->combine_threads = pick32(in);
    if (fuzz_u8(in) & 1)
      strcpy(d->combine_kernel, "c");
    make_decls(in, info, kind);
    return;
  }
  uint8_t b = fuzz_u8(in);
  info->dtype = b & 1 ? FA_DTYPE_BF16 : FA_DTYPE_F16;
  info->grid = decode ? FA_GRID_SPLITS : b & 2 ? FA_GRID_ONE : FA_GRID_Q_TILES;
  info->head_dim = 8 * (1 + fuzz_u8(in) % 32);
  info->v_head_dim = fuzz_u8(in) & 1 ? info->head_dim : 8 * (1 + fuzz_u8(in) % 32);
  info->kv_heads = 1 + fuzz_u8(in) % 16;
  info->heads = info->kv_heads * (1 + fuzz_u8(in) % 8);
  info->tile_q = 16 << (fuzz_u8(in) % 4);
  info->tile_kv = 16 << (fuzz_u8(in) % 4);
  info->threads = 32 * (1 + fuzz_u8(in) % 8);
  info->workspace_floats_per_row = fuzz_u8(in) % 4 == 0 ? 2 * info->v_head_dim : 0;
  make_decls(in, info, kind);
  if (!decode)
    return;
  uint8_t c = fuzz_u8(in);
  d->cache = c & 1 ? FA_CACHE_PAGED : FA_CACHE_CONTIGUOUS;
  d->page_size = d->cache == FA_CACHE_PAGED ? 16 << (c >> 1) % 5 : 0;
  d->q_len_max = 1 + fuzz_u8(in) % FA_DECODE_MAX_Q_LEN;
  d->split = (c >> 4) % 3 == 0 ? 1 : (c >> 4) % 3 == 1 ? 0 : 1 + fuzz_u8(in) % 64;
  if (d->split != 1) {
    strcpy(d->combine_kernel, "kc");
    d->combine_threads = 128;
  }
}

/* dims (shared ones, or raw), then strides: contiguous or raw. */
/* ------------------------------------------------------- run-time inputs */

/* The kernel's declared inputs: none, up to three sane ones (dims of the
 * launch's symbols or small constants; a varlen kernel's mostly batch and
 * constants), or every field raw (a hand-built info must be refused, not
 * trusted). */
static void make_decls(FuzzIn *in, fa_kernel_info *info, int kind) {
  int decode = kind == KIND_DECODE;
  uint8_t f = fuzz_u8(in);
  if (f % 3 == 0)
    return;
  if (f % 7 == 0) { /* raw */
    info->ninputs = f & 8 ? pick32(in) : fuzz_u8(in) % (FA_MAX_INPUTS + 2);
    for (int i = 0; i < FA_MAX_INPUTS; i++) {
      fa_input_info *x = &info->inputs[i];
      for (size_t c = 0; c + 1 < sizeof x->name && c < 4; c++)
        x->name[c] = (char)fuzz_u8(in);
      x->dtype = (fa_dtype)pick32(in);
      x->rank = pick32(in);
      for (int d = 0; d < 4; d++)
        x->dims[d] = pick32(in);
    }
    info->require_q_le_k = fuzz_u8(in) & 1, info->require_k_le_q = fuzz_u8(in) & 1;
    return;
  }
  static const fa_dtype types[4] = {FA_DTYPE_I32, FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};
  info->ninputs = 1 + f % 3;
  for (int i = 0; i < info->ninputs; i++) {
    fa_input_info *x = &info->inputs[i];
    snprintf(x->name, sizeof x->name, "in%d", i);
    x->dtype = types[fuzz_u8(in) % 4];
    x->rank = (x->dtype == FA_DTYPE_I32 || x->dtype == FA_DTYPE_F32 ? 0 : 1) + fuzz_u8(in) % 4;
    for (int d = 0; d < x->rank; d++) {
      uint8_t c = fuzz_u8(in) % (decode ? 3 : kind == KIND_VARLEN ? 8 : 4);
      if (kind == KIND_VARLEN) /* seqlen dims are refused there: rarely */
        c = c < 3 ? 0 : c < 6 ? 2 : c == 6 ? 1 : 3;
      x->dims[d] = c == 0 ? FA_INPUT_DIM_BATCH : c == 1 ? FA_INPUT_DIM_SEQLEN_Q
                 : c == 2 ? 1 + fuzz_u8(in) : FA_INPUT_DIM_SEQLEN_K;
    }
  }
  if (!decode)
    info->require_q_le_k = f >> 4 & 1, info->require_k_le_q = f >> 5 & 1;
}

static int dtype_bytes(fa_dtype d) { return d == FA_DTYPE_F16 || d == FA_DTYPE_BF16 ? 2 : 4; }

/* Bindings for the launch (batch, sq, sk): mostly the declared names with
 * tensors near their declared dims, sometimes an unknown or NULL name, a
 * wrong count, scalar values from the edge cases. */
static int make_bindings(FuzzIn *in, const fa_kernel_info *info, int64_t batch, int64_t sq,
                         int64_t sk, fa_input *b, char names[][8]) {
  int decl = info->ninputs >= 0 && info->ninputs <= FA_MAX_INPUTS ? info->ninputs : 0;
  int n = fuzz_u8(in) % (decl + 2);
  static const double values[6] = {1.5, NAN, INFINITY, -3, 1099511627776.0, 7};
  for (int i = 0; i < n; i++) {
    memset(&b[i], 0, sizeof b[i]);
    uint8_t f = fuzz_u8(in);
    const fa_input_info *x = i < decl ? &info->inputs[f & 1 ? i : (i + 1) % decl] : NULL;
    snprintf(names[i], 8, "%s", f & 2 ? "zz" : x ? x->name : "in0");
    b[i].name = f % 29 == 0 ? NULL : names[i];
    b[i].value = values[fuzz_u8(in) % 6];
    int64_t want[4] = {1, 1, 1, 1};
    for (int d = 0; x && d < x->rank && d < 4; d++)
      want[d] = x->dims[d] == FA_INPUT_DIM_BATCH     ? batch
                : x->dims[d] == FA_INPUT_DIM_SEQLEN_Q ? sq
                : x->dims[d] == FA_INPUT_DIM_SEQLEN_K ? sk
                                                      : x->dims[d];
    make_tensor(in, &b[i].tensor, x ? x->dtype : FA_DTYPE_F32, want);
  }
  return n;
}

/* An accepted launch's bound tensor inputs stay below 2^62 bytes, within
 * the address space and off the outputs (ranges `out`, n of them). */
static void check_inputs(const char *what, const fa_kernel_info *info, const fa_input *b, int nb,
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

static void make_tensor(FuzzIn *in, fa_tensor *t, fa_dtype dtype, const int64_t want[4]) {
  uint8_t f = fuzz_u8(in);
  t->data = pickptr(in);
  t->dtype = f & 0x80 ? (fa_dtype)(fuzz_u8(in) % 4) : dtype;
  for (int d = 0; d < 4; d++)
    t->dim[d] = f >> d & 1 ? pick64(in) : want[d];
  if (f & 0x10) {
    fa_tensor_contiguous(t, t->data, t->dtype, t->dim[0], t->dim[1], t->dim[2], t->dim[3]);
  } else {
    for (int d = 0; d < 4; d++)
      t->stride[d] = f & 0x20 ? pick64(in) : d == 3 ? 1 : 8 * (int64_t)fuzz_bytes(in, 2);
  }
}

/* Bytes from data to one past the last element, as the contract defines
 * them, in 128 bits; 0 without elements. */
static __int128 extent(const fa_tensor *t, int elem) {
  for (int d = 0; d < 4; d++)
    if (t->dim[d] <= 0)
      return 0;
  __int128 off = 0;
  for (int d = 0; d < 4; d++)
    off += (__int128)(t->dim[d] - 1) * t->stride[d];
  return (off + 1) * elem;
}

static Range range(const char *name, const void *p, __int128 len) {
  Range r = {name, (__int128)(uintptr_t)p, len};
  return r;
}

/* No output range meets another range (inputs may alias each other). */
static void check_disjoint(const char *what, const Range *r, int n, const int *is_out,
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
static void check_in_space(const char *what, const Range *r, int n) {
  for (int i = 0; i < n; i++)
    if (r[i].len && r[i].lo + r[i].len > (__int128)UINT64_MAX) {
      fprintf(stderr, "%s accepted a launch whose %s [0x%llx, +0x%llx) runs past the end of "
              "the address space\n", what, r[i].name, (unsigned long long)r[i].lo,
              (unsigned long long)r[i].len);
      FUZZ_CHECK(0);
    }
}

/* Tensor i's range, checked to stay below 2^62 bytes and be aligned. */
static Range tensor_range(const char *name, const fa_tensor *t) {
  __int128 e = extent(t, 2);
  FUZZ_CHECK(e < ((__int128)1 << 62));
  FUZZ_CHECK(e == 0 || (uintptr_t)t->data % 16 == 0);
  return range(name, t->data, e);
}

/* What an accepted forward or decode launch promises about its memory,
 * every range within the address space too. */
static void check_accepted(const char *what, fa_tensor *const t[4], const void *lse,
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

/* q, k, v, o of one launch: q/o [bq, sq, heads, head_dim / v_head_dim],
 * k/v [bk, sk, kv_heads, ...], each as make_tensor varies it. */
static void make_tensors(FuzzIn *in, const fa_kernel_info *info, int64_t bq, int64_t sq,
                        int64_t bk, int64_t sk, fa_tensor *t[4]) {
  int64_t dims[4][4] = {{bq, sq, info->heads, info->head_dim},
                        {bk, sk, info->kv_heads, info->head_dim},
                        {bk, sk, info->kv_heads, info->v_head_dim},
                        {bq, sq, info->heads, info->v_head_dim}};
  for (int i = 0; i < 4; i++)
    make_tensor(in, t[i], info->dtype, dims[i]);
}

/* --------------------------------------------------- variable-length batches */

/* A varlen launch's fa_varlen and the host arrays it may point at. */
typedef struct Varlen {
  fa_varlen v;
  int32_t *host[2];  /* num_seqs + 2 entries each when 0 <= num_seqs <= 65536; freed */
  int64_t total[2];  /* where the generated prefix sums end: the tensors' dim 1 */
  int given;         /* args.varlen = &v (else NULL) */
} Varlen;

static int pick_num_seqs(FuzzIn *in) {
  uint8_t sel = fuzz_u8(in);
  switch (sel % 12) {
  case 0: case 1: case 2: case 3: return 1 + fuzz_u8(in) % 8;
  case 4: return 0;
  case 5: return 1;
  case 6: return fuzz_u8(in);
  case 7: return 65535;
  case 8: return 65536;
  case 9: return -1 - fuzz_u8(in) % 4;
  case 10: return INT_MIN;
  default: return pick32(in);
  }
}

/* A longest length: the generated one, one short, or an edge case. */
static int64_t pick_max(FuzzIn *in, int64_t longest) {
  uint8_t sel = fuzz_u8(in);
  switch (sel % 12) {
  case 0: case 1: case 2: case 3: case 4: return longest > 0 ? longest : 1;
  case 5: return longest - 1;
  case 6: return 0;
  case 7: return 1;
  case 8: return INT32_MAX;
  case 9: return (int64_t)INT32_MAX + 1;
  case 10: return -1 - fuzz_u8(in);
  default: return pick64(in);
  }
}

static int32_t wrap32(int64_t x) { return (int32_t)(uint32_t)(uint64_t)x; }

/* The sequences of a varlen launch: their count, their lengths (small,
 * equal on both sides, or raw), the prefix sums as host copies (valid, or
 * spoiled one way), the maxima; and whether the kernel is a varlen one
 * given the struct (or a padded one given it, or a varlen one without). */
static void make_varlen(FuzzIn *in, fa_kernel_info *info, Varlen *vl) {
  memset(vl, 0, sizeof *vl);
  uint8_t f = fuzz_u8(in);
  vl->given = f % 16 != 1;
  if (f % 16 == 2)
    info->varlen = 0;
  int n = vl->v.num_seqs = pick_num_seqs(in);
  int64_t longest[2] = {0, 0};
  if (n >= 0 && n <= 65536) {
    for (int s = 0; s < 2; s++)
      FUZZ_CHECK(vl->host[s] = malloc(sizeof(int32_t) * ((size_t)n + 2)));
    /* The first 16 sequences' lengths; the others repeat them. */
    int64_t len[16][2];
    uint8_t mode = fuzz_u8(in);
    for (int i = 0; i < n && i < 16; i++) {
      int64_t *l = len[i];
      switch (mode % 4) {
      case 0: l[0] = 1 + fuzz_u8(in) % 64, l[1] = 1 + fuzz_u8(in) % 64; break;
      case 1: l[0] = fuzz_u8(in), l[1] = fuzz_u8(in); break;
      case 2: l[0] = l[1] = 1 + fuzz_u8(in) % 64; break; /* meets every require */
      default: l[0] = pick32(in), l[1] = pick32(in);
      }
    }
    for (int i = 0;; i++) {
      for (int s = 0; s < 2; s++)
        vl->host[s][i] = wrap32(vl->total[s]);
      if (i == n)
        break;
      for (int s = 0; s < 2; s++) {
        int64_t l = len[i % 16][s];
        vl->total[s] += l;
        if (l > longest[s])
          longest[s] = l;
      }
    }
  } else {
    vl->total[0] = fuzz_u8(in), vl->total[1] = fuzz_u8(in);
  }
  /* A host copy each: spoiled one way, absent, misaligned, or (num_seqs out
   * of range) a short array the checks must refuse before reading. */
  static int32_t tiny[4];
  const int32_t *host[2];
  for (int s = 0; s < 2; s++) {
    uint8_t h = fuzz_u8(in);
    int32_t *b = vl->host[s];
    if (b) {
      switch (h % 8) {
      case 1:
        for (int i = 0; i <= n; i++)
          b[i] = pick32(in);
        break;
      case 2:
        if (n >= 1) {
          int j = 1 + fuzz_u8(in) % n;
          b[j] = wrap32((int64_t)b[j - 1] - 1 - fuzz_u8(in));
        }
        break;
      case 3: b[0] = h & 16 ? -1 : 1 + fuzz_u8(in); break;
      case 4: b[n] = wrap32((int64_t)b[n] + (h & 16 ? -1 : 1 + fuzz_u8(in))); break;
      }
    }
    const int32_t *p = b ? b : h & 16 ? tiny : NULL;
    if (h & 8)
      p = NULL;
    else if (p && h >> 5 == 3)
      p = (const int32_t *)(uintptr_t)((uintptr_t)p + 2);
    host[s] = p;
  }
  vl->v.host_cu_seqlens_q = host[0], vl->v.host_cu_seqlens_k = host[1];
  vl->v.max_seqlen_q = pick_max(in, longest[0]);
  vl->v.max_seqlen_k = pick_max(in, longest[1]);
}

/* The device cu_seqlens (plausible, NULL, misaligned, an output's memory,
 * or any pointer), and whether the launch gets the struct. */
static const fa_varlen *varlen_pointers(FuzzIn *in, Varlen *vl, const void *out0,
                                        const void *out1) {
  const int32_t *p[2];
  for (int s = 0; s < 2; s++) {
    uint8_t d = fuzz_u8(in);
    uint64_t good = ((uint64_t)(0xf0 + s) << 40) + 4 * (uint64_t)fuzz_u8(in);
    switch (d % 8) {
    case 4: p[s] = NULL; break;
    case 5: p[s] = (const int32_t *)(uintptr_t)(good + 1 + d / 8 % 3); break;
    case 6: p[s] = d & 8 ? out0 : out1; break;
    case 7: p[s] = pickptr(in); break;
    default: p[s] = (const int32_t *)(uintptr_t)good;
    }
  }
  vl->v.cu_seqlens_q = p[0], vl->v.cu_seqlens_k = p[1];
  return vl->given ? &vl->v : NULL;
}

/* A launch's tensors' batch and lengths: edge cases for a padded one (vl
 * NULL); 1 and the totals of the sequences make_varlen gives, packed. */
static void make_sizes(FuzzIn *in, fa_kernel_info *info, Varlen *vl, int64_t *batch,
                       int64_t *sq, int64_t *sk) {
  if (!vl) {
    *batch = pick64(in), *sq = pick64(in), *sk = pick64(in);
    return;
  }
  make_varlen(in, info, vl);
  *batch = 1, *sq = vl->total[0], *sk = vl->total[1];
}

/* Sometimes one tensor of a varlen launch is not packed (dim[0] != 1). */
static void unpack_one(FuzzIn *in, fa_tensor *const *t, int n) {
  uint8_t u = fuzz_u8(in);
  if (u % 4 == 3)
    t[(u >> 2) % n]->dim[0] = u & 0x80 ? pick64(in) : 2;
}

static void free_varlen(Varlen *vl) {
  free(vl->host[0]);
  free(vl->host[1]);
}

/* The launch's batch, seqlen_q, seqlen_k: q's and k's dims, or a varlen
 * launch's num_seqs and maxima. */
typedef struct Sizes {
  int64_t batch, sq, sk;
} Sizes;

static Sizes launch_sizes(const fa_varlen *v, const fa_tensor *q, const fa_tensor *k) {
  Sizes s = {q->dim[0], q->dim[1], k->dim[1]};
  if (v)
    s.batch = v->num_seqs, s.sq = v->max_seqlen_q, s.sk = v->max_seqlen_k;
  return s;
}

/* What any accepted launch says of its layout: the struct exactly for a
 * varlen kernel; then its fields in range and every tensor packed (also
 * when the launch computes nothing). */
static void check_layout(const fa_kernel_info *info, const fa_varlen *v, fa_tensor *const *t,
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
static void check_varlen_sizes(const fa_kernel_info *info, const fa_varlen *v,
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
static int varlen_ranges(const fa_varlen *v, Range r[2]) {
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
static void check_params(const char *what, const fa_param *p, int n, const fa_varlen *v,
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

/* ------------------------------------------------------------- forward */

/* What an accepted forward launch promises. */
static void forward_accepted(const fa_kernel_info *info, fa_forward_args *a) {
  fa_tensor *t[4] = {&a->q, &a->k, &a->v, &a->o};
  check_layout(info, a->varlen, t, 4);
  if (a->q.dim[0] == 0 || a->q.dim[1] == 0 || (a->varlen && a->varlen->num_seqs == 0))
    return;
  Range extra[2];
  int nextra = varlen_ranges(a->varlen, extra);
  /* [batch, heads, seqlen_q], or a varlen launch's [heads, total_q] (dim 0 is 1) */
  __int128 lse_bytes = (__int128)a->q.dim[0] * info->heads * a->q.dim[1] * 4;
  check_accepted("fa_forward_check", t, a->lse, lse_bytes, extra, nextra);
  Range outs[2] = {range("o", a->o.data, extent(&a->o, 2)), range("lse", a->lse, lse_bytes)};
  if (a->inputs)
    check_inputs("fa_forward_check", info, a->inputs, a->num_inputs, outs, 2);
  if (a->varlen)
    check_varlen_sizes(info, a->varlen, &a->q, &a->k);
  Sizes s = launch_sizes(a->varlen, &a->q, &a->k);
  unsigned grid[3];
  FUZZ_CHECK(fa_forward_grid(info, s.batch, s.sq, grid) == FA_OK);
  FUZZ_CHECK(grid[1] == (unsigned)info->heads && grid[2] == (unsigned)s.batch);
  fa_param p[FA_BACKWARD_MAX_PARAMS];
  int np = 0;
  FUZZ_CHECK(fa_forward_params(info, a, (uint64_t)(uintptr_t)a->lse, 0, p, &np) == FA_OK);
  FUZZ_CHECK(np >= 21 && np <= FA_BACKWARD_MAX_PARAMS);
  check_params("fa_forward_params", p, np, a->varlen, &a->q, &a->k, info->varlen);
}

static void forward(FuzzIn *in, int varlen) {
  fa_kernel_info info;
  make_info(in, &info, varlen ? KIND_VARLEN : KIND_FORWARD);
  Varlen vl;
  int64_t batch, sq, sk;
  make_sizes(in, &info, varlen ? &vl : NULL, &batch, &sq, &sk);
  fa_forward_args a;
  memset(&a, 0, sizeof a);
  fa_tensor *t[4] = {&a.q, &a.k, &a.v, &a.o};
  make_tensors(in, &info, batch, sq, batch, sk, t);
  a.lse = pickptr(in);
  if (varlen) {
    unpack_one(in, t, 4);
    a.varlen = varlen_pointers(in, &vl, a.o.data, a.lse);
  }
  fa_input binds[FA_MAX_INPUTS + 2];
  char names[FA_MAX_INPUTS + 2][8];
  a.num_inputs = make_bindings(in, &info, varlen ? vl.v.num_seqs : batch, sq, sk, binds, names);
  a.inputs = fuzz_u8(in) % 17 == 0 ? NULL : binds;
  char msg[256];
  size_t msglen = fuzz_u8(in) & 1 ? sizeof msg : 1 + fuzz_u8(in) % 16;
  fa_status st = fa_forward_check(&info, &a, msg, msglen);
  FUZZ_CHECK(st >= 0 && st < FA_STATUS_COUNT_ && memchr(msg, '\0', msglen));
  FUZZ_CHECK(fa_forward_check(&info, &a, NULL, 0) == st);
  if (info.varlen && !a.varlen) { /* refused, and no parameter list */
    fa_param p[FA_BACKWARD_MAX_PARAMS];
    int np = 0;
    FUZZ_CHECK(st != FA_OK && fa_forward_params(&info, &a, 0, 0, p, &np) ==
                                  FA_ERR_INVALID_ARGUMENT);
  }
  if (st == FA_OK)
    forward_accepted(&info, &a);
  if (varlen)
    free_varlen(&vl);
}

#define MAX_HOST 4096

static void decode(FuzzIn *in) {
  fa_kernel_info info;
  make_info(in, &info, KIND_DECODE);
  int paged = info.decode.cache == FA_CACHE_PAGED;
  int64_t batch = pick64(in), ql = 1 + fuzz_u8(in) % 20, cap = pick64(in);
  int64_t kb = paged ? pick64(in) : batch, k1 = paged ? info.decode.page_size : cap;
  fa_decode_args a;
  memset(&a, 0, sizeof a);
  fa_tensor *t[4] = {&a.q, &a.k, &a.v, &a.o};
  make_tensors(in, &info, batch, ql, kb, k1, t);
  a.lse = pickptr(in);
  a.cache_seqlens = pickptr(in);
  a.block_table = pickptr(in);
  a.max_pages = pick64(in);
  a.bt_stride = fuzz_u8(in) & 1 ? pick64(in) : 0;
  a.max_seqlen = fuzz_u8(in) & 1 ? pick64(in) : 0;
  a.nsplit = fuzz_u8(in) & 1 ? pick32(in) : 0;
  fa_input binds[FA_MAX_INPUTS + 2];
  char names[FA_MAX_INPUTS + 2][8];
  a.num_inputs = make_bindings(in, &info, batch, ql, 0, binds, names);
  a.inputs = binds;
  /* Host copies: as many entries as the contract says they hold. */
  int32_t *lens = NULL, *table = NULL;
  int64_t b = a.q.dim[0], stride = a.bt_stride ? a.bt_stride : a.max_pages, nt;
  uint8_t host = fuzz_u8(in);
  if (host & 1 && b >= 0 && b <= MAX_HOST) {
    lens = malloc(sizeof *lens * (size_t)(b + 1));
    for (int64_t i = 0; i < b; i++)
      lens[i] = host & 2 ? pick32(in) : (int32_t)(fuzz_bytes(in, 2) % 512);
    a.host_cache_seqlens = lens;
  }
  if (host & 4 && b >= 0 && stride >= 0 && !__builtin_mul_overflow(b, stride, &nt) &&
      nt <= MAX_HOST) {
    table = malloc(sizeof *table * (size_t)(nt + 1));
    for (int64_t i = 0; i < nt; i++)
      table[i] = host & 8 ? pick32(in) : (int32_t)fuzz_u8(in);
    a.host_block_table = table;
  }
  char msg[256];
  fa_status st = fa_decode_check(&info, &a, msg, sizeof msg);
  FUZZ_CHECK(st >= 0 && st < FA_STATUS_COUNT_);
  FUZZ_CHECK(fa_decode_check(&info, &a, NULL, 0) == st);
  if (st == FA_OK && b > 0 && a.q.dim[1] > 0) {
    Range extra[2] = {range("cache_seqlens", a.cache_seqlens, (__int128)b * 4),
                      range("block_table", a.block_table,
                            paged ? ((__int128)(b - 1) * stride + a.max_pages) * 4 : 0)};
    check_accepted("fa_decode_check", t, a.lse, (__int128)b * info.heads * a.q.dim[1] * 4,
                   extra, 2);
    Range outs[2] = {range("o", a.o.data, extent(&a.o, 2)),
                     range("lse", a.lse, (__int128)b * info.heads * a.q.dim[1] * 4)};
    check_inputs("fa_decode_check", &info, a.inputs, a.num_inputs, outs, 2);
    int nsplit = 0, wide = 0;
    size_t ws = 0;
    if (fa_decode_plan(&info, &a, 1 + fuzz_u8(in), &nsplit, &ws, &wide) == FA_OK)
      FUZZ_CHECK(nsplit >= 1 && nsplit <= 1024);
  }
  free(lens);
  free(table);
}

/* The forward kernel `info` and its five backward kernels (docs/backward.md). */
static void backward_kernels(const fa_kernel_info *info, fa_kernel_info k[6]) {
  static const fa_role roles[5] = {FA_ROLE_PRE, FA_ROLE_MAIN, FA_ROLE_POST, FA_ROLE_KV,
                                   FA_ROLE_Q};
  k[0] = *info;
  k[0].mode = FA_MODE_FORWARD;
  k[0].role = FA_ROLE_NONE;
  for (int i = 1; i < 6; i++) {
    k[i] = k[0];
    snprintf(k[i].kernel, sizeof k[i].kernel, "k_bwd%d", i);
    strcpy(k[i].forward, k[0].kernel);
    k[i].mode = FA_MODE_BACKWARD;
    k[i].role = roles[i - 1];
    int kv = k[i].role == FA_ROLE_MAIN || k[i].role == FA_ROLE_KV;
    k[i].grid = kv ? FA_GRID_K_TILES : FA_GRID_Q_TILES;
    k[i].workspace_floats_per_row = 0;
    k[i].tile_q = 16 << i % 4, k[i].tile_kv = 32 << i % 3;
  }
}

/* What an accepted backward launch promises; its plan's steps and
 * parameter lists. */
static void backward_accepted(const fa_kernel_info *info, fa_backward_args *a) {
  fa_tensor *t[8] = {&a->q, &a->k, &a->v, &a->o, &a->dout, &a->dq, &a->dk, &a->dv};
  check_layout(info, a->varlen, t, 8);
  if (a->q.dim[0] == 0)
    return;
  fa_kernel_info k[6];
  backward_kernels(info, k);
  fa_backward_schedule plan;
  char msg[256];
  fa_status st;
  if (a->varlen && a->varlen->num_seqs == 0) { /* no sequence: nothing planned */
    st = fa_backward_plan(k, 6, a, &plan, msg, sizeof msg);
    FUZZ_CHECK(st == FA_OK && plan.nsteps == 0);
    return;
  }
  FUZZ_CHECK(a->mode == FA_BACKWARD_AUTO || a->mode == FA_BACKWARD_DETERMINISTIC ||
             a->mode == FA_BACKWARD_ATOMIC);
  Sizes s = launch_sizes(a->varlen, &a->q, &a->k);
  if (a->varlen)
    check_varlen_sizes(info, a->varlen, &a->q, &a->k);
  size_t need = 0;
  FUZZ_CHECK(fa_backward_workspace_size(info, s.batch, s.sq, s.sk, a->mode, &need) == FA_OK);
  /* the LSE: [batch, heads, seqlen_q], a varlen launch's [heads, total_q] */
  __int128 rows = (__int128)a->q.dim[0] * info->heads * a->q.dim[1];
  FUZZ_CHECK(rows <= INT32_MAX && (rows == 0 || a->lse) && (uintptr_t)a->lse % 4 == 0);
  FUZZ_CHECK((uintptr_t)a->workspace % 256 == 0 && (!a->workspace || a->workspace_bytes >= need));
  static const char *const names[8] = {"q", "k", "v", "o", "dout", "dq", "dk", "dv"};
  Range r[12];
  int is_out[12] = {0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 0, 0};
  for (int i = 0; i < 8; i++)
    r[i] = tensor_range(names[i], t[i]);
  r[8] = range("lse", a->lse, a->lse ? rows * 4 : 0);
  r[9] = range("workspace", a->workspace, a->workspace ? (__int128)need : 0);
  int nr = 10 + varlen_ranges(a->varlen, r + 10);
  check_disjoint("fa_backward_check", r, nr, is_out, t, 8);
  check_in_space("fa_backward_check", r, nr);
  Range outs[4] = {r[5], r[6], r[7], r[9]}; /* dq, dk, dv, the workspace */
  if (a->inputs)
    check_inputs("fa_backward_check", info, a->inputs, a->num_inputs, outs, 4);
  /* A module of the forward kernel and its backward: the plan's grids fit. */
  st = fa_backward_plan(k, 6, a, &plan, msg, sizeof msg);
  if (st != FA_OK)
    fprintf(stderr, "fa_backward_plan refuses what fa_backward_check accepts: %s\n", msg);
  FUZZ_CHECK(st == FA_OK && plan.workspace_bytes == need);
  FUZZ_CHECK(plan.nsteps >= 0 && plan.nsteps <= FA_BACKWARD_MAX_STEPS);
  for (int i = 0; i < plan.nsteps; i++) {
    const fa_backward_step *p = &plan.step[i];
    if (p->op == FA_BACKWARD_ZERO) {
      FUZZ_CHECK(p->offset + p->bytes <= need && p->bytes % 4 == 0);
      continue;
    }
    FUZZ_CHECK(p->grid[0] >= 1 && p->grid[0] <= INT32_MAX && p->grid[1] >= 1 &&
               p->grid[1] <= 65535 && p->grid[2] >= 1 && p->grid[2] <= 65535);
    FUZZ_CHECK(p->grid[2] == (unsigned)s.batch && p->varlen == (info->varlen != 0));
    fa_param prm[FA_BACKWARD_MAX_PARAMS];
    int np = 0;
    FUZZ_CHECK(fa_backward_params(&plan, i, a, 1u << 20, prm, &np) == FA_OK);
    FUZZ_CHECK(np >= 8 && np <= FA_BACKWARD_MAX_PARAMS);
    check_params("fa_backward_params", prm, np, a->varlen, &a->q, &a->k, p->varlen);
  }
}

static void backward(FuzzIn *in, int varlen) {
  fa_kernel_info info;
  make_info(in, &info, varlen ? KIND_VARLEN : KIND_FORWARD);
  if (fuzz_u8(in) & 1) { /* checked against a backward kernel's info */
    info.mode = FA_MODE_BACKWARD;
    info.role = FA_ROLE_MAIN;
    info.grid = FA_GRID_K_TILES;
    strcpy(info.forward, "f");
  }
  Varlen vl;
  int64_t batch, sq, sk;
  make_sizes(in, &info, varlen ? &vl : NULL, &batch, &sq, &sk);
  fa_backward_args a;
  memset(&a, 0, sizeof a);
  fa_tensor *t[8] = {&a.q, &a.k, &a.v, &a.o, &a.dout, &a.dq, &a.dk, &a.dv};
  make_tensors(in, &info, batch, sq, batch, sk, t);
  fa_tensor *t2[4] = {&a.dout, &a.dq, &a.dk, &a.dv};
  int64_t dims2[4][4] = {{batch, sq, info.heads, info.v_head_dim},
                         {batch, sq, info.heads, info.head_dim},
                         {batch, sk, info.kv_heads, info.head_dim},
                         {batch, sk, info.kv_heads, info.v_head_dim}};
  for (int i = 0; i < 4; i++)
    make_tensor(in, t2[i], info.dtype, dims2[i]);
  a.lse = pickptr(in);
  fa_input binds[FA_MAX_INPUTS + 2];
  char names[FA_MAX_INPUTS + 2][8];
  if (varlen) { /* (a padded backward launch binds no inputs: its corpus keeps its form) */
    unpack_one(in, t, 8);
    a.varlen = varlen_pointers(in, &vl, a.dq.data, a.dv.data);
    a.num_inputs = make_bindings(in, &info, vl.v.num_seqs, sq, sk, binds, names);
    a.inputs = binds;
  }
  uint8_t w = fuzz_u8(in);
  a.mode = w & 0x80 ? pick32(in) : w % 3;
  size_t need = 0;
  Sizes s = launch_sizes(a.varlen, &a.q, &a.k);
  fa_backward_workspace_size(&info, s.batch, s.sq, s.sk, w % 3, &need);
  if (w & 2) {
    a.workspace = pickptr(in);
    a.workspace_bytes = w & 4 ? (size_t)pick64(in) : need;
  }
  char msg[256];
  size_t msglen = fuzz_u8(in) & 1 ? sizeof msg : 1 + fuzz_u8(in) % 16;
  fa_status st = fa_backward_check(&info, &a, msg, msglen);
  FUZZ_CHECK(st >= 0 && st < FA_STATUS_COUNT_ && memchr(msg, '\0', msglen));
  FUZZ_CHECK(fa_backward_check(&info, &a, NULL, 0) == st);
  if (st == FA_OK)
    backward_accepted(&info, &a);
  if (varlen)
    free_varlen(&vl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzIn in = {data, size};
  uint8_t pick = fuzz_u8(&in);
  if (pick & 1)
    decode(&in);
  else if (pick & 2)
    backward(&in, pick >> 2 & 1);
  else
    forward(&in, pick >> 2 & 1);
  return 0;
}
