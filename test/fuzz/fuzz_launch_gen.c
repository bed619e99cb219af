/* fuzz_launch_gen.c - the launch harness's generators every kind uses: values
 * from the edge cases or raw bytes, the kernel info, its run-time inputs and
 * their bindings, tensors (fuzz_launch.c). */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_launch.h"

static void make_decls(FuzzIn *in, fa_kernel_info *info, int kind);

int64_t pick64(FuzzIn *in) {
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

int pick32(FuzzIn *in) {
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

void *pickptr(FuzzIn *in) {
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

/* The room a check's message gets: all of msg[size], or 1..16 bytes. */
size_t pick_msglen(FuzzIn *in, size_t size) {
  return fuzz_u8(in) & 1 ? size : 1 + fuzz_u8(in) % 16;
}

/* Any check's answer: a status, and a message cut to its room. */
void check_status(fa_status st, const char *msg, size_t msglen) {
  FUZZ_CHECK(st >= 0 && st < FA_STATUS_COUNT_ && memchr(msg, '\0', msglen));
}

/* A kernel info: sane from a few choices, or (flag) every field raw. */
void make_info(FuzzIn *in, fa_kernel_info *info, int kind) {
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
  info->grid = decode                          ? FA_GRID_SPLITS
               : b & 2                         ? FA_GRID_ONE
               : b & 4 && kind == KIND_FORWARD ? FA_GRID_PERSISTENT /* padded only */
                                               : FA_GRID_Q_TILES;
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

/* Bindings for the launch (batch, sq, sk): mostly the declared names with
 * tensors near their declared dims, sometimes an unknown or NULL name, a
 * wrong count, scalar values from the edge cases. */
int make_bindings(FuzzIn *in, const fa_kernel_info *info, int64_t batch, int64_t sq,
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

/* dims (shared ones, or raw), then strides: contiguous or raw. */
void make_tensor(FuzzIn *in, fa_tensor *t, fa_dtype dtype, const int64_t want[4]) {
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

/* q, k, v, o of one launch: q/o [bq, sq, heads, head_dim / v_head_dim],
 * k/v [bk, sk, kv_heads, ...], each as make_tensor varies it. */
void make_tensors(FuzzIn *in, const fa_kernel_info *info, int64_t bq, int64_t sq,
                 int64_t bk, int64_t sk, fa_tensor *t[4]) {
  int64_t dims[4][4] = {{bq, sq, info->heads, info->head_dim},
                        {bk, sk, info->kv_heads, info->head_dim},
                        {bk, sk, info->kv_heads, info->v_head_dim},
                        {bq, sq, info->heads, info->v_head_dim}};
  for (int i = 0; i < 4; i++)
    make_tensor(in, t[i], info->dtype, dims[i]);
}
