/* fuzz_meta.c - libFuzzer harness for the runtime's metadata parser
 * (fa_meta_parse, fa_meta_parse_module, runtime/meta.c): any bytes, as a
 * PTX file or the output of `flashc -emit=meta`. What it accepts must be a
 * sane module: the invariants its header documents hold for every kernel, a
 * plain contiguous launch of each passes fa_forward_check / fa_decode_check
 * (and fa_decode_plan) / fa_backward_check with every declared run-time
 * input bound (lengths that meet its `require`; a `layout varlen` kernel's
 * launch is two packed sequences with host copies of their prefix sums,
 * whose four parameters fa_forward_params puts after the kind's), and
 * fa_meta_parse gives the module's first kernel. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "flashc_runtime.h"
#include "fuzz_common.h"

/* Fake device addresses: 16-byte aligned, 1 TiB apart (no overlap). */
#define ADDR(i) ((void *)(uintptr_t)((uint64_t)(i) << 40))

/* A plain launch of an accepted kernel must pass its check. */
static void expect_ok(fa_status st, const char *what, const char *msg) {
  if (st != FA_OK)
    fprintf(stderr, "a plain %s launch is refused: %s\n", what, msg);
  FUZZ_CHECK(st == FA_OK);
}

/* The first n of q, k, v, o, dout, dq, dk, dv of a plain launch (batch b),
 * contiguous at ADDR(1..4) and ADDR(6..9); ADDR(5) is left to lse. */
static void plain_tensors(const fa_kernel_info *in, int64_t b, int64_t sq, int64_t sk,
                          fa_tensor *const *t, int n) {
  static const int kv[8] = {0, 1, 1, 0, 0, 0, 1, 1}, vd[8] = {0, 0, 1, 1, 1, 0, 0, 1};
  for (int i = 0; i < n; i++)
    fa_tensor_contiguous(t[i], ADDR(i < 4 ? i + 1 : i + 2), in->dtype, b, kv[i] ? sk : sq,
                         kv[i] ? in->kv_heads : in->heads, vd[i] ? in->v_head_dim : in->head_dim);
}

/* Bindings of every input in declares, contiguous at ADDR(10 + i) (a
 * scalar: 1), for a launch of batch b and lengths sq, sk. Returns the count;
 * *fits is false when a declared tensor is larger than the 1 TiB between the
 * fake addresses (constant dims up to 2^31 each): such a launch may be
 * refused (overlap, extent), and that is right. */
static int plain_inputs(const fa_kernel_info *in, int64_t b, int64_t sq, int64_t sk,
                        fa_input *out, bool *fits) {
  *fits = true;
  for (int i = 0; i < in->ninputs; i++) {
    const fa_input_info *x = &in->inputs[i];
    fa_input *p = &out[i];
    memset(p, 0, sizeof *p);
    p->name = x->name;
    p->value = 1;
    if (!x->rank)
      continue;
    p->tensor.data = ADDR(10 + i);
    p->tensor.dtype = x->dtype;
    int64_t n = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
      int v = x->dims[d];
      p->tensor.dim[d] = v == FA_INPUT_DIM_BATCH ? b : v == FA_INPUT_DIM_SEQLEN_Q ? sq
                         : v == FA_INPUT_DIM_SEQLEN_K ? sk : v;
      p->tensor.stride[d] = n;
      if (n > ((int64_t)1 << 40) / 4 / (p->tensor.dim[d] ? p->tensor.dim[d] : 1))
        *fits = false;
      n *= p->tensor.dim[d] ? p->tensor.dim[d] : 1;
    }
  }
  return in->ninputs;
}

/* Lengths 100 and 77, swapped or made equal to meet the kernel's requires. */
static void plain_lengths(const fa_kernel_info *in, int64_t *sq, int64_t *sk) {
  *sq = 100, *sk = 77;
  if (in->require_q_le_k)
    *sq = 77, *sk = 100;
  if (in->require_q_le_k && in->require_k_le_q)
    *sk = 77;
}

/* A plain launch's sequences: a padded batch of 2 (plain_lengths), or for
 * a varlen kernel 2 packed sequences, of those lengths and of 5 and 5, with
 * host copies of the prefix sums (cu_seqlens at ADDR(20), ADDR(21)). *tb,
 * *sq, *sk: the tensors' dims 0 and 1 (1 and the totals when packed). */
typedef struct PlainBatch {
  fa_varlen vl;
  int32_t cq[3], ck[3];
} PlainBatch;

static const fa_varlen *plain_batch(const fa_kernel_info *in, PlainBatch *p, int64_t *tb,
                                    int64_t *sq, int64_t *sk) {
  plain_lengths(in, sq, sk);
  *tb = 2;
  if (!in->varlen)
    return NULL;
  memset(p, 0, sizeof *p);
  p->cq[1] = (int32_t)*sq, p->cq[2] = (int32_t)*sq + 5;
  p->ck[1] = (int32_t)*sk, p->ck[2] = (int32_t)*sk + 5;
  p->vl = (fa_varlen){ADDR(20), ADDR(21), p->cq, p->ck, 2, *sq, *sk};
  *tb = 1, *sq = p->cq[2], *sk = p->ck[2];
  return &p->vl;
}

/* A plain varlen launch's parameter list: batch, seqlen_q, seqlen_k are
 * num_seqs and the maxima; cu_seqlens_q, cu_seqlens_k, total_q, total_k
 * come right after the kind's strides (`first`: where they start). */
static void expect_varlen_params(const fa_param *p, int n, int first, const fa_varlen *vl,
                                 int64_t tq, int64_t tk) {
  static const char *const names[4] = {"cu_seqlens_q", "cu_seqlens_k", "total_q", "total_k"};
  int64_t want[4] = {(int64_t)(uintptr_t)vl->cu_seqlens_q, (int64_t)(uintptr_t)vl->cu_seqlens_k,
                     tq, tk};
  FUZZ_CHECK(first >= 1 && first + 4 <= n && p[first - 1].kind == FA_PARAM_I64);
  for (int i = 0; i < 4; i++)
    FUZZ_CHECK(strcmp(p[first + i].name, names[i]) == 0 && p[first + i].value == want[i] &&
               p[first + i].kind == (i < 2 ? FA_PARAM_PTR : FA_PARAM_I32));
  int64_t sizes[3] = {vl->num_seqs, vl->max_seqlen_q, vl->max_seqlen_k};
  for (int i = 0; i < n; i++)
    for (int j = 0; j < 3; j++)
      if (strcmp(p[i].name, (const char *[]){"batch", "seqlen_q", "seqlen_k"}[j]) == 0)
        FUZZ_CHECK(p[i].value == sizes[j]);
}

static void forward_launch(const fa_kernel_info *in) {
  fa_forward_args a;
  memset(&a, 0, sizeof a);
  PlainBatch pb;
  int64_t tb, sq, sk;
  a.varlen = plain_batch(in, &pb, &tb, &sq, &sk);
  plain_tensors(in, tb, sq, sk, (fa_tensor *const[]){&a.q, &a.k, &a.v, &a.o}, 4);
  a.lse = ADDR(5);
  fa_input ins[FA_MAX_INPUTS];
  bool fits;
  a.inputs = ins;
  a.num_inputs = plain_inputs(in, 2, sq, sk, ins, &fits); /* batch: 2 (or num_seqs 2) */
  char msg[512];
  fa_status st = fa_forward_check(in, &a, msg, sizeof msg);
  if (fits)
    expect_ok(st, "forward", msg);
  unsigned grid[3];
  FUZZ_CHECK(fa_forward_grid(in, 2, a.varlen ? a.varlen->max_seqlen_q : sq, grid) == FA_OK);
  if (in->grid == FA_GRID_PERSISTENT) /* x: every tile of the two batches */
    FUZZ_CHECK(grid[0] >= 2 * (unsigned)in->heads && grid[1] == 1 && grid[2] == 1);
  else
    FUZZ_CHECK(grid[1] == (unsigned)in->heads && grid[2] == 2 && grid[0] >= 1);
  fa_param p[FA_BACKWARD_MAX_PARAMS];
  int n = 0;
  FUZZ_CHECK(fa_forward_params(in, &a, 0, 0, p, &n) == FA_OK);
  FUZZ_CHECK(n >= 21 && n <= FA_BACKWARD_MAX_PARAMS);
  if (a.varlen) /* q, k, v, o, lse, workspace, 3 sizes, 12 strides: then the four */
    expect_varlen_params(p, n, 21, a.varlen, sq, sk);
}

static void decode_launch(const fa_kernel_info *in) {
  const fa_decode_info *d = &in->decode;
  fa_decode_args a;
  memset(&a, 0, sizeof a);
  int64_t b = 3, ql = d->q_len_max < 2 ? d->q_len_max : 2;
  int32_t seqlens[3] = {0, 1, 300}, table[3 * 20];
  fa_tensor_contiguous(&a.q, ADDR(1), in->dtype, b, ql, in->heads, in->head_dim);
  fa_tensor_contiguous(&a.o, ADDR(4), in->dtype, b, ql, in->heads, in->v_head_dim);
  if (d->cache == FA_CACHE_PAGED) {
    int64_t pages = 3 * 20;
    fa_tensor_contiguous(&a.k, ADDR(2), in->dtype, pages, d->page_size, in->kv_heads,
                         in->head_dim);
    fa_tensor_contiguous(&a.v, ADDR(3), in->dtype, pages, d->page_size, in->kv_heads,
                         in->v_head_dim);
    for (int i = 0; i < 60; i++)
      table[i] = i;
    a.block_table = ADDR(7);
    a.host_block_table = table;
    a.max_pages = 20;
  } else {
    fa_tensor_contiguous(&a.k, ADDR(2), in->dtype, b, 320, in->kv_heads, in->head_dim);
    fa_tensor_contiguous(&a.v, ADDR(3), in->dtype, b, 320, in->kv_heads, in->v_head_dim);
  }
  a.cache_seqlens = ADDR(6);
  a.host_cache_seqlens = seqlens;
  fa_input ins[FA_MAX_INPUTS];
  bool fits;
  a.inputs = ins;
  a.num_inputs = plain_inputs(in, b, ql, 0, ins, &fits); /* decode: seqlen_q is q_len */
  char msg[512];
  fa_status st = fa_decode_check(in, &a, msg, sizeof msg);
  if (fits)
    expect_ok(st, "decode", msg);
  int nsplit = 0, wide = 0;
  size_t ws = 0;
  for (int sm = 1; sm <= 264; sm += 131)
    if (fa_decode_plan(in, &a, sm, &nsplit, &ws, &wide) == FA_OK)
      FUZZ_CHECK(nsplit >= 1 && nsplit <= 1024 && (wide == 0 || wide == 1));
  FUZZ_CHECK(fa_decode_splits(in, b, in->kv_heads, 300, 132) >= 1);
}

static void backward_launch(const fa_kernel_info *in) {
  fa_backward_args a;
  memset(&a, 0, sizeof a);
  PlainBatch pb;
  int64_t tb, sq, sk;
  a.varlen = plain_batch(in, &pb, &tb, &sq, &sk);
  plain_tensors(in, tb, sq, sk,
                (fa_tensor *const[]){&a.q, &a.k, &a.v, &a.o, &a.dout, &a.dq, &a.dk, &a.dv}, 8);
  a.lse = ADDR(5);
  fa_input ins[FA_MAX_INPUTS];
  bool fits;
  a.inputs = ins;
  a.num_inputs = plain_inputs(in, 2, sq, sk, ins, &fits);
  char msg[512];
  fa_status st = fa_backward_check(in, &a, msg, sizeof msg);
  if (fits)
    expect_ok(st, "backward", msg);
}

/* Every kernel of the module: the backward keys agree with the mode. */
static void module_kernels(const uint8_t *data, size_t size, const fa_kernel_info *first) {
  fa_kernel_info k[FA_MODULE_MAX_KERNELS];
  int n = 0;
  char err[256];
  FUZZ_CHECK(fa_meta_parse_module((const char *)data, size, k, &n, err, sizeof err) == FA_OK);
  FUZZ_CHECK(n >= 1 && n <= FA_MODULE_MAX_KERNELS);
  FUZZ_CHECK(memcmp(&k[0], first, sizeof *first) == 0);
  for (int i = 0; i < n; i++) {
    const fa_kernel_info *in = &k[i];
    FUZZ_CHECK(memchr(in->forward, '\0', sizeof in->forward));
    for (int j = 0; j < i; j++)
      FUZZ_CHECK(strcmp(k[j].kernel, in->kernel) != 0);
    if (in->mode != FA_MODE_BACKWARD) {
      FUZZ_CHECK(in->role == FA_ROLE_NONE && in->forward[0] == '\0' &&
                 in->grid != FA_GRID_K_TILES);
      continue;
    }
    int kv = in->role == FA_ROLE_MAIN || in->role == FA_ROLE_KV;
    FUZZ_CHECK(in->role > FA_ROLE_NONE && in->role < FA_ROLE_COUNT_ && in->forward[0] &&
               strcmp(in->forward, in->kernel) != 0 && in->workspace_floats_per_row == 0);
    FUZZ_CHECK(in->grid == (kv ? FA_GRID_K_TILES : FA_GRID_Q_TILES) && (!kv || in->tile_kv > 0));
    backward_launch(in);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fa_kernel_info in;
  char err[256];
  fa_status st = fa_meta_parse((const char *)data, size, &in, err, sizeof err);
  /* The same answer without a message buffer and with a tiny one. */
  fa_kernel_info in2;
  char tiny[3];
  FUZZ_CHECK(fa_meta_parse((const char *)data, size, &in2, NULL, 0) == st);
  FUZZ_CHECK(fa_meta_parse((const char *)data, size, &in2, tiny, sizeof tiny) == st);
  FUZZ_CHECK(memchr(tiny, '\0', sizeof tiny) != NULL);
  if (st != FA_OK) {
    FUZZ_CHECK(st == FA_ERR_META && err[0] != '\0');
    return 0;
  }
  FUZZ_CHECK(memcmp(&in, &in2, sizeof in) == 0);
  FUZZ_CHECK(in.version == FA_META_VERSION);
  FUZZ_CHECK(memchr(in.kernel, '\0', sizeof in.kernel) && in.kernel[0]);
  FUZZ_CHECK(memchr(in.target, '\0', sizeof in.target));
  FUZZ_CHECK(memchr(in.passes, '\0', sizeof in.passes));
  FUZZ_CHECK(in.head_dim >= 8 && in.head_dim <= 256 && in.head_dim % 8 == 0);
  FUZZ_CHECK(in.v_head_dim >= 8 && in.v_head_dim <= 256 && in.v_head_dim % 8 == 0);
  FUZZ_CHECK(in.heads >= 1 && in.kv_heads >= 1 && in.heads % in.kv_heads == 0);
  FUZZ_CHECK(in.threads >= 1 && in.threads <= 1024 && in.tile_q >= 1);
  if (in.mode == FA_MODE_FORWARD)
    forward_launch(&in);
  else if (in.mode == FA_MODE_DECODE)
    decode_launch(&in);
  module_kernels(data, size, &in);
  return 0;
}
