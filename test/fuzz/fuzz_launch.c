/* fuzz_launch.c - libFuzzer harness for the launch-argument checks,
 * fa_forward_check (runtime/check.c), fa_decode_check (runtime/decode.c)
 * and fa_backward_check (runtime/backward.c), no GPU needed. The input is
 * decoded into a kernel info (a sane one built from a few choices, or every
 * field raw: hand-built infos must be refused, not trusted) and the
 * arguments: dims, strides, pointers as integers, dtypes, the decode
 * cache's block table and its host copies, the backward's workspace, the
 * declared run-time inputs and their bindings (docs/abi.md). Values
 * come from a table of edge cases (0, -1, INT64_MAX, 2^62, ...) or raw
 * bytes. The first byte picks the entry point: bit 0 decode, else bit 1
 * backward, else forward.
 *
 * Oracle: a launch the checks accept keeps its contract (flashc_runtime.h):
 * no tensor's bytes reach 2^62, the outputs (O, LSE; dQ, dK, dV and the
 * workspace) do not overlap an input or each other (a bound run-time input
 * included), pointers are aligned;
 * the backward's plan then succeeds within the CUDA grid limits. */
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
static void make_tensor(FuzzIn *in, fa_tensor *t, fa_dtype dtype, const int64_t want[4]);
static void make_decls(FuzzIn *in, fa_kernel_info *info, int decode);

static void make_info(FuzzIn *in, fa_kernel_info *info, int decode) {
  memset(info, 0, sizeof *info);
  strcpy(info->kernel, "k");
  info->version = FA_META_VERSION;
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
    make_decls(in, info, decode);
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
  make_decls(in, info, decode);
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
 * launch's symbols or small constants), or every field raw (a hand-built
 * info must be refused, not trusted). */
static void make_decls(FuzzIn *in, fa_kernel_info *info, int decode) {
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
      uint8_t c = fuzz_u8(in) % (decode ? 3 : 4);
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

/* An accepted launch's bound tensor inputs stay below 2^62 bytes and off
 * the outputs (ranges `out`, n of them). */
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

/* Tensor i's range, checked to stay below 2^62 bytes and be aligned. */
static Range tensor_range(const char *name, const fa_tensor *t) {
  __int128 e = extent(t, 2);
  FUZZ_CHECK(e < ((__int128)1 << 62));
  FUZZ_CHECK(e == 0 || (uintptr_t)t->data % 16 == 0);
  return range(name, t->data, e);
}

/* What an accepted forward or decode launch promises about its memory. */
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

static void forward(FuzzIn *in) {
  fa_kernel_info info;
  make_info(in, &info, 0);
  int64_t batch = pick64(in), sq = pick64(in), sk = pick64(in);
  fa_forward_args a;
  memset(&a, 0, sizeof a);
  fa_tensor *t[4] = {&a.q, &a.k, &a.v, &a.o};
  make_tensors(in, &info, batch, sq, batch, sk, t);
  a.lse = pickptr(in);
  fa_input binds[FA_MAX_INPUTS + 2];
  char names[FA_MAX_INPUTS + 2][8];
  a.num_inputs = make_bindings(in, &info, batch, sq, sk, binds, names);
  a.inputs = fuzz_u8(in) % 17 == 0 ? NULL : binds;
  char msg[256];
  size_t msglen = fuzz_u8(in) & 1 ? sizeof msg : 1 + fuzz_u8(in) % 16;
  fa_status st = fa_forward_check(&info, &a, msg, msglen);
  FUZZ_CHECK(st >= 0 && st < FA_STATUS_COUNT_ && memchr(msg, '\0', msglen));
  FUZZ_CHECK(fa_forward_check(&info, &a, NULL, 0) == st);
  if (st != FA_OK || a.q.dim[0] == 0 || a.q.dim[1] == 0)
    return;
  check_accepted("fa_forward_check", t, a.lse,
                 (__int128)a.q.dim[0] * info.heads * a.q.dim[1] * 4, NULL, 0);
  Range outs[2] = {range("o", a.o.data, extent(&a.o, 2)),
                   range("lse", a.lse, (__int128)a.q.dim[0] * info.heads * a.q.dim[1] * 4)};
  if (a.inputs)
    check_inputs("fa_forward_check", &info, a.inputs, a.num_inputs, outs, 2);
  unsigned grid[3];
  FUZZ_CHECK(fa_forward_grid(&info, a.q.dim[0], a.q.dim[1], grid) == FA_OK);
}

#define MAX_HOST 4096

static void decode(FuzzIn *in) {
  fa_kernel_info info;
  make_info(in, &info, 1);
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

static void backward(FuzzIn *in) {
  fa_kernel_info info;
  make_info(in, &info, 0);
  if (fuzz_u8(in) & 1) { /* checked against a backward kernel's info */
    info.mode = FA_MODE_BACKWARD;
    info.role = FA_ROLE_MAIN;
    info.grid = FA_GRID_K_TILES;
    strcpy(info.forward, "f");
  }
  int64_t batch = pick64(in), sq = pick64(in), sk = pick64(in);
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
  uint8_t w = fuzz_u8(in);
  a.mode = w & 0x80 ? pick32(in) : w % 3;
  size_t need = 0;
  fa_backward_workspace_size(&info, a.q.dim[0], a.q.dim[1], a.k.dim[1], w % 3, &need);
  if (w & 2) {
    a.workspace = pickptr(in);
    a.workspace_bytes = w & 4 ? (size_t)pick64(in) : need;
  }
  char msg[256];
  size_t msglen = fuzz_u8(in) & 1 ? sizeof msg : 1 + fuzz_u8(in) % 16;
  fa_status st = fa_backward_check(&info, &a, msg, msglen);
  FUZZ_CHECK(st >= 0 && st < FA_STATUS_COUNT_ && memchr(msg, '\0', msglen));
  FUZZ_CHECK(fa_backward_check(&info, &a, NULL, 0) == st);
  if (st != FA_OK || a.q.dim[0] == 0)
    return;
  FUZZ_CHECK(a.mode == FA_BACKWARD_AUTO || a.mode == FA_BACKWARD_DETERMINISTIC ||
             a.mode == FA_BACKWARD_ATOMIC);
  FUZZ_CHECK(fa_backward_workspace_size(&info, a.q.dim[0], a.q.dim[1], a.k.dim[1], a.mode,
                                        &need) == FA_OK);
  __int128 rows = (__int128)a.q.dim[0] * info.heads * a.q.dim[1];
  FUZZ_CHECK(rows <= INT32_MAX && (rows == 0 || a.lse) && (uintptr_t)a.lse % 4 == 0);
  FUZZ_CHECK((uintptr_t)a.workspace % 256 == 0 && (!a.workspace || a.workspace_bytes >= need));
  static const char *const names[8] = {"q", "k", "v", "o", "dout", "dq", "dk", "dv"};
  Range r[10];
  int is_out[10] = {0, 0, 0, 0, 0, 1, 1, 1, 0, 1};
  for (int i = 0; i < 8; i++)
    r[i] = tensor_range(names[i], t[i]);
  r[8] = range("lse", a.lse, a.lse ? rows * 4 : 0);
  r[9] = range("workspace", a.workspace, a.workspace ? (__int128)need : 0);
  check_disjoint("fa_backward_check", r, 10, is_out, t, 8);
  /* A module of the forward kernel and its backward: the plan's grids fit. */
  fa_kernel_info k[6];
  backward_kernels(&info, k);
  fa_backward_schedule plan;
  st = fa_backward_plan(k, 6, &a, &plan, msg, sizeof msg);
  if (st != FA_OK)
    fprintf(stderr, "fa_backward_plan refuses what fa_backward_check accepts: %s\n", msg);
  FUZZ_CHECK(st == FA_OK && plan.workspace_bytes == need);
  FUZZ_CHECK(plan.nsteps >= 0 && plan.nsteps <= FA_BACKWARD_MAX_STEPS);
  for (int i = 0; i < plan.nsteps; i++) {
    const fa_backward_step *s = &plan.step[i];
    if (s->op == FA_BACKWARD_ZERO) {
      FUZZ_CHECK(s->offset + s->bytes <= need && s->bytes % 4 == 0);
      continue;
    }
    FUZZ_CHECK(s->grid[0] >= 1 && s->grid[0] <= INT32_MAX && s->grid[1] >= 1 &&
               s->grid[1] <= 65535 && s->grid[2] >= 1 && s->grid[2] <= 65535);
    fa_param p[FA_BACKWARD_MAX_PARAMS];
    int np = 0;
    FUZZ_CHECK(fa_backward_params(&plan, i, &a, 1u << 20, p, &np) == FA_OK);
    FUZZ_CHECK(np >= 8 && np <= FA_BACKWARD_MAX_PARAMS);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzIn in = {data, size};
  uint8_t pick = fuzz_u8(&in);
  if (pick & 1)
    decode(&in);
  else if (pick & 2)
    backward(&in);
  else
    forward(&in);
  return 0;
}
