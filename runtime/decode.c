/* decode.c - decode launches (docs/decode.md): fa_decode_check, the split
 * heuristic, the workspace plan and fa_decode.
 *
 * Same stance as check.c: decode kernels trust their arguments (no bounds
 * checks on the device), so everything that could make them read or write
 * outside the caller's memory is refused here, GPU-free, with a message that
 * names the tensor and the numbers. The cache lengths and the block table
 * live on the device; they are validated when the caller passes host copies
 * (the only way to check them without a synchronizing copy). Checks run in
 * a fixed order and the first failure wins.
 */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

#define MAX_GRID_YZ 65535
#define MAX_NSPLIT 1024
/* Byte offsets stay below 2^62 so that pointer + offset never wraps. */
#define MAX_BYTES (INT64_C(1) << 62)

enum { Q, K, V, O };

typedef struct DCtx {
  const fa_kernel_info *info;
  const fa_decode_args *a;
  const fa_tensor *t[4];
  const char *name[4];
  int paged;
  int64_t capacity; /* positions a sequence may hold; set by check_cache */
  char *msg;
  size_t len;
  fa_launch_tensors lt; /* the same tensors, for tensor_check.c */
} DCtx;

static const char *const q_dims[4] = {"batch", "q_len", "heads", "head_dim"};
static const char *const contig_dims[4] = {"batch", "capacity", "kv_heads", "head_dim"};
static const char *const paged_dims[4] = {"num_pages", "page_size", "kv_heads", "head_dim"};

static const char *dim_name(const DCtx *c, int i, int d) {
  if (i == Q || i == O) return q_dims[d];
  return c->paged ? paged_dims[d] : contig_dims[d];
}

static int has_combine(const fa_kernel_info *in) { return in->decode.combine_kernel[0] != 0; }

/* A decode kernel's inputs are sized by batch and q_len only: its key
 * count is per sequence, so a seqlen_k dim or a require has no launch
 * value to be checked against; nor is it ever packed (layout varlen). The
 * metadata parser refuses all three; a hand-built info is refused here. */
static fa_status check_decode_inputs(DCtx *c) {
  const fa_kernel_info *in = c->info;
  int seqlen_k = 0;
  for (int i = 0; i < in->ninputs && i < FA_MAX_INPUTS; i++)
    for (int d = 0; d < in->inputs[i].rank && d < 4; d++)
      seqlen_k |= in->inputs[i].dims[d] == FA_INPUT_DIM_SEQLEN_K;
  if (in->varlen) {
    fa_fmt(c->msg, c->len, "decode kernel %s says layout varlen, which decode kernels do not "
           "take (their sequences' lengths are cache_seqlens): use fa_meta_parse", in->kernel);
    return FA_ERR_META;
  }
  if (!seqlen_k && !in->require_q_le_k && !in->require_k_le_q) return FA_OK;
  fa_fmt(c->msg, c->len, "decode kernel %s declares a run-time input with a seqlen_k dim or a "
         "require, which a decode launch cannot check (the key count is per sequence): use "
         "fa_meta_parse", in->kernel);
  return FA_ERR_META;
}

/* A hand-built info must still be sane where the checks divide or index. */
static fa_status check_info(DCtx *c) {
  const fa_kernel_info *in = c->info;
  const fa_decode_info *d = &in->decode;
  int page_ok = d->cache == FA_CACHE_CONTIGUOUS ||
                (d->cache == FA_CACHE_PAGED && d->page_size >= 16 && d->page_size <= 256 &&
                 !(d->page_size & (d->page_size - 1)));
  if (fa_dtype_size(in->dtype) != 2 || in->head_dim <= 0 || in->v_head_dim <= 0 ||
      in->heads <= 0 || in->kv_heads <= 0 || in->heads % in->kv_heads || in->threads <= 0 ||
      in->threads > 1024 || d->q_len_max < 1 || d->q_len_max > FA_DECODE_MAX_Q_LEN ||
      !page_ok || d->split < 0 || (has_combine(in) && (d->combine_threads < 1 ||
                                                      d->combine_threads > 1024))) {
    fa_fmt(c->msg, c->len,
           "kernel info is inconsistent (dtype %d, head_dim %d, heads %d, kv_heads %d, "
           "threads %d, q_len_max %d, cache %d, page_size %d, split %d): use fa_meta_parse",
           (int)in->dtype, in->head_dim, in->heads, in->kv_heads, in->threads, d->q_len_max,
           (int)d->cache, d->page_size, d->split);
    return FA_ERR_META;
  }
  return check_decode_inputs(c);
}

/* Dimension d of tensor i must be `want`, which the metadata key fixes. */
static fa_status want_meta(DCtx *c, int i, int d, int64_t want, const char *key) {
  int64_t got = c->t[i]->dim[d];
  if (got == want) return FA_OK;
  fa_fmt(c->msg, c->len, "%s: dim[%d] (%s) is %" PRId64 " but the kernel was compiled for %s = %" PRId64,
         c->name[i], d, dim_name(c, i, d), got, key, want);
  return FA_ERR_SHAPE;
}

static fa_status check_meta_dims(DCtx *c) {
  const fa_kernel_info *in = c->info;
  fa_status st;
  if ((st = want_meta(c, Q, 3, in->head_dim, "head_dim")) ||
      (st = want_meta(c, K, 3, in->head_dim, "head_dim")) ||
      (st = want_meta(c, V, 3, in->v_head_dim, "v_head_dim")) ||
      (st = want_meta(c, O, 3, in->v_head_dim, "v_head_dim")) ||
      (st = want_meta(c, Q, 2, in->heads, "heads")) ||
      (st = want_meta(c, O, 2, in->heads, "heads")) ||
      (st = want_meta(c, K, 2, in->kv_heads, "kv_heads")) ||
      (st = want_meta(c, V, 2, in->kv_heads, "kv_heads")))
    return st;
  if (c->paged && ((st = want_meta(c, K, 1, in->decode.page_size, "page_size")) ||
                   (st = want_meta(c, V, 1, in->decode.page_size, "page_size"))))
    return st;
  return FA_OK;
}

/* Dimension d of tensor i must equal that of tensor j. */
static fa_status want_same(DCtx *c, int i, int j, int d) {
  if (c->t[i]->dim[d] == c->t[j]->dim[d]) return FA_OK;
  fa_fmt(c->msg, c->len, "%s: dim[%d] (%s) is %" PRId64 " but %s has %s %" PRId64, c->name[i], d,
         dim_name(c, i, d), c->t[i]->dim[d], c->name[j], dim_name(c, j, d), c->t[j]->dim[d]);
  return FA_ERR_SHAPE;
}

static fa_status check_cross_dims(DCtx *c) {
  fa_status st;
  /* A contiguous cache has one row per sequence; a paged one any number of pages. */
  if (!c->paged && (st = want_same(c, K, Q, 0))) return st;
  if ((st = want_same(c, O, Q, 0)) || (st = want_same(c, O, Q, 1)) ||
      (st = want_same(c, V, K, 0)) || (st = want_same(c, V, K, 1)))
    return st;
  return FA_OK;
}

static fa_status check_q_len(DCtx *c) {
  int64_t ql = c->t[Q]->dim[1];
  if (ql <= c->info->decode.q_len_max) return FA_OK;
  fa_fmt(c->msg, c->len, "q: q_len is %" PRId64 " but the kernel was compiled for q_len_max = %d",
         ql, c->info->decode.q_len_max);
  return FA_ERR_SHAPE;
}

/* The block table's dims, the capacity and the int32 pointers. */
static fa_status check_cache(DCtx *c) {
  const fa_decode_args *a = c->a;
  int64_t batch = c->t[Q]->dim[0];
  if (!a->cache_seqlens) {
    fa_fmt(c->msg, c->len, "cache_seqlens: pointer is NULL");
    return FA_ERR_NULL_POINTER;
  }
  if (!c->paged) {
    if (a->block_table) {
      fa_fmt(c->msg, c->len, "block_table: given but the kernel %s was compiled for a "
             "contiguous cache (pass NULL)", c->info->kernel);
      return FA_ERR_INVALID_ARGUMENT;
    }
    c->capacity = c->t[K]->dim[1];
  } else {
    int64_t mp = a->max_pages, stride = a->bt_stride ? a->bt_stride : a->max_pages, rows;
    if (!a->block_table) {
      fa_fmt(c->msg, c->len, "block_table: pointer is NULL but the cache is paged");
      return FA_ERR_NULL_POINTER;
    }
    if (mp < 1 || stride < mp) {
      fa_fmt(c->msg, c->len, "block_table: max_pages is %" PRId64 " and its row stride %" PRId64
             ": need max_pages >= 1 and stride >= max_pages", mp, stride);
      return mp < 1 ? FA_ERR_SHAPE : FA_ERR_STRIDE;
    }
    if (!fa_mul_ok(batch, stride, &rows) || rows > INT32_MAX) {
      fa_fmt(c->msg, c->len, "block_table: batch %" PRId64 " x row stride %" PRId64
             " entries exceed the int32 limit %d", batch, stride, INT32_MAX);
      return FA_ERR_TOO_LARGE;
    }
    if (!fa_mul_ok(mp, c->info->decode.page_size, &c->capacity)) c->capacity = INT64_MAX;
  }
  if (c->capacity > INT32_MAX) {
    fa_fmt(c->msg, c->len, "k: the cache holds %" PRId64 " positions, more than the kernel's "
           "int32 limit %d", c->capacity, INT32_MAX);
    return FA_ERR_TOO_LARGE;
  }
  if (a->max_seqlen < 0 || a->max_seqlen > c->capacity) {
    fa_fmt(c->msg, c->len, "max_seqlen is %" PRId64 " but the cache holds %" PRId64 " positions",
           a->max_seqlen, c->capacity);
    return FA_ERR_SHAPE;
  }
  if ((uintptr_t)a->cache_seqlens % 4 || (uintptr_t)a->block_table % 4) {
    fa_fmt(c->msg, c->len, "%s: pointer is not 4-byte aligned",
           (uintptr_t)a->cache_seqlens % 4 ? "cache_seqlens" : "block_table");
    return FA_ERR_ALIGNMENT;
  }
  return FA_OK;
}

static fa_status check_nsplit(DCtx *c) {
  int n = c->a->nsplit;
  if (n < 0 || n > MAX_NSPLIT) {
    fa_fmt(c->msg, c->len, "nsplit is %d: must be 0 (auto) or 1..%d", n, MAX_NSPLIT);
    return FA_ERR_INVALID_ARGUMENT;
  }
  if (n > 1 && !has_combine(c->info)) {
    fa_fmt(c->msg, c->len, "nsplit is %d but kernel %s has no combine kernel (split = 1): "
           "nsplit must be 1", n, c->info->kernel);
    return FA_ERR_UNSUPPORTED;
  }
  return FA_OK;
}

/* Grid z, the int32 kernel parameters and the LSE row index. */
static fa_status check_sizes(DCtx *c) {
  int64_t batch = c->t[Q]->dim[0], rows;
  if (batch > MAX_GRID_YZ) {
    fa_fmt(c->msg, c->len, "q: batch is %" PRId64 ", more than the grid limit %d", batch,
           MAX_GRID_YZ);
    return FA_ERR_TOO_LARGE;
  }
  if (!fa_mul_ok(batch * c->t[Q]->dim[1], c->info->heads, &rows) || rows > INT32_MAX) {
    fa_fmt(c->msg, c->len, "lse: batch %" PRId64 " x heads %d x q_len %" PRId64
           " rows exceed the int32 limit %d", batch, c->info->heads, c->t[Q]->dim[1], INT32_MAX);
    return FA_ERR_TOO_LARGE;
  }
  return FA_OK;
}

/* The outputs (O, LSE) must not share memory with an input or each other,
 * nor with a run-time input's tensor (the workspace's turn is fa_decode's,
 * which alone knows where it lies). */
static fa_status check_aliasing(DCtx *c, const int64_t ext[4]) {
  const fa_decode_args *a = c->a;
  int64_t batch = c->t[Q]->dim[0], stride = a->bt_stride ? a->bt_stride : a->max_pages;
  int64_t lse_bytes = a->lse ? batch * c->info->heads * c->t[Q]->dim[1] * 4 : 0;
  fa_range in[5] = {{"q", (uintptr_t)c->t[Q]->data, ext[Q]},
                    {"k", (uintptr_t)c->t[K]->data, ext[K]},
                    {"v", (uintptr_t)c->t[V]->data, ext[V]},
                    {"cache_seqlens", (uintptr_t)a->cache_seqlens, batch * 4},
                    {"block_table", (uintptr_t)a->block_table,
                     c->paged ? ((batch - 1) * stride + a->max_pages) * 4 : 0}};
  fa_range out[2] = {{"o", (uintptr_t)c->t[O]->data, ext[O]},
                     {"lse", (uintptr_t)a->lse, lse_bytes}};
  fa_status st = fa_check_disjoint(in, 5, out, 2, c->msg, c->len);
  return st ? st : fa_check_input_memory_(c->info, a->inputs, a->num_inputs, out, 2, c->msg,
                                          c->len);
}

/* The int32 arrays and the LSE end within the address space: the kernels
 * read cache_seqlens and block_table and write the LSE (float32 [batch,
 * heads, q_len]), the checks read the host copies (a NULL one: none). The
 * table's rows are bt_stride apart, its last max_pages long; a contiguous
 * cache has none (check_cache refused one). */
static fa_status check_in_space(DCtx *c) {
  const fa_decode_args *a = c->a;
  int64_t batch = c->t[Q]->dim[0], stride = a->bt_stride ? a->bt_stride : a->max_pages;
  int64_t bt_bytes = c->paged ? ((batch - 1) * stride + a->max_pages) * 4 : 0;
  const char *const names[5] = {"lse", "cache_seqlens", "host_cache_seqlens", "block_table",
                                "host_block_table"};
  const void *p[5] = {a->lse, a->cache_seqlens, a->host_cache_seqlens, a->block_table,
                      a->host_block_table};
  int64_t bytes[5] = {batch * c->info->heads * c->t[Q]->dim[1] * 4, batch * 4, batch * 4,
                      bt_bytes, bt_bytes};
  for (int i = 0; i < 5; i++) {
    fa_status st = fa_check_in_space_(names[i], p[i], bytes[i], c->msg, c->len);
    if (st != FA_OK) return st;
  }
  return FA_OK;
}

/* Every length in [0, capacity] (and <= max_seqlen when given). */
static fa_status check_host_seqlens(DCtx *c) {
  const int32_t *len = c->a->host_cache_seqlens;
  for (int64_t b = 0; b < c->t[Q]->dim[0]; b++) {
    if (len[b] < 0) {
      fa_fmt(c->msg, c->len, "cache_seqlens[%" PRId64 "] is %d: a length cannot be negative", b,
             (int)len[b]);
      return FA_ERR_INVALID_ARGUMENT;
    }
    if (len[b] > c->capacity) {
      if (c->paged)
        fa_fmt(c->msg, c->len, "cache_seqlens[%" PRId64 "] is %d but the block table holds %"
               PRId64 " positions (max_pages %" PRId64 " x page_size %d)", b, (int)len[b],
               c->capacity, c->a->max_pages, c->info->decode.page_size);
      else
        fa_fmt(c->msg, c->len, "cache_seqlens[%" PRId64 "] is %d but the cache holds %" PRId64
               " positions (k's dim 1, capacity)", b, (int)len[b], c->capacity);
      return FA_ERR_SHAPE;
    }
    if (c->a->max_seqlen && len[b] > c->a->max_seqlen) {
      fa_fmt(c->msg, c->len, "cache_seqlens[%" PRId64 "] is %d, more than max_seqlen %" PRId64,
             b, (int)len[b], c->a->max_seqlen);
      return FA_ERR_SHAPE;
    }
  }
  return FA_OK;
}

/* Every entry the lengths may need must name a page of k/v: the kernel would
 * read another allocation's memory otherwise. With host lengths, the entries
 * those lengths need; without them, every entry a length up to max_seqlen
 * (else the capacity) could need, since any of them may be read. */
static fa_status check_host_block_table(DCtx *c) {
  const fa_decode_args *a = c->a;
  const int32_t *len = a->host_cache_seqlens;
  int64_t stride = a->bt_stride ? a->bt_stride : a->max_pages, pages = c->t[K]->dim[0];
  int ps = c->info->decode.page_size;
  int64_t bound = a->max_seqlen > 0 ? a->max_seqlen : c->capacity; /* max_seqlen <= capacity */
  for (int64_t b = 0; b < c->t[Q]->dim[0]; b++) {
    int64_t need = ((len ? (int64_t)len[b] : bound) + ps - 1) / ps;
    for (int64_t p = 0; p < need; p++) {
      int32_t e = a->host_block_table[b * stride + p];
      if (e >= 0 && e < pages) continue;
      if (len)
        fa_fmt(c->msg, c->len, "block_table[%" PRId64 "][%" PRId64 "] is %d but k/v have %" PRId64
               " pages: cache_seqlens[%" PRId64 "] = %d needs entries 0..%" PRId64
               " of its row, each in [0, %" PRId64 ")", b, p, (int)e, pages, b, (int)len[b],
               need - 1, pages);
      else
        fa_fmt(c->msg, c->len, "block_table[%" PRId64 "][%" PRId64 "] is %d but k/v have %" PRId64
               " pages: without host_cache_seqlens a length may reach %" PRId64
               " (%s), so entries 0..%" PRId64 " of every row must be in [0, %" PRId64
               "); pass host_cache_seqlens to check only the entries the lengths need",
               b, p, (int)e, pages, bound, bound == c->capacity ? "the capacity" : "max_seqlen",
               need - 1, pages);
      return FA_ERR_INVALID_ARGUMENT;
    }
  }
  return FA_OK;
}

fa_status fa_decode_check(const fa_kernel_info *info, const fa_decode_args *args, char *msg,
                          size_t msglen) {
  fa_status st = fa_check_present(info, args, msg, msglen);
  if (st != FA_OK) return st;
  if (info->mode != FA_MODE_DECODE) {
    fa_fmt(msg, msglen, "kernel %s is a %s kernel; fa_decode launches decode kernels only",
           info->kernel, info->mode == FA_MODE_FORWARD ? "forward" : "backward");
    return FA_ERR_UNSUPPORTED;
  }
  int paged = info->decode.cache == FA_CACHE_PAGED;
  const char *const *cache_dims = paged ? paged_dims : contig_dims;
  fa_launch_tensors lt = {{&args->q, &args->k, &args->v, &args->o}, {"q", "k", "v", "o"},
                          {q_dims, cache_dims, cache_dims, q_dims}, info->dtype, msg, msglen,
                          4};
  DCtx c = {info, args, {&args->q, &args->k, &args->v, &args->o}, {"q", "k", "v", "o"},
            paged, 0, msg, msglen, lt};
  int64_t ext[FA_MAX_LAUNCH_TENSORS];
  /* The inputs' bindings by the check every launch shares: batch and
   * seqlen_q are q's dims 0 and 1 (q_len), as for the forward; no decode
   * input has a seqlen_k dim (check_info), so k's dim 1 is never read. */
  if ((st = check_info(&c)) || (st = fa_check_nulls(&c.lt)) || (st = fa_check_dtypes(&c.lt)) ||
      (st = fa_check_nonnegative(&c.lt)) || (st = check_meta_dims(&c)) ||
      (st = check_cross_dims(&c)) || (st = check_q_len(&c)) ||
      (st = fa_check_inputs_(info, args->inputs, args->num_inputs, &args->q, &args->k, NULL, msg,
                             msglen)) ||
      (st = check_nsplit(&c)))
    return st;
  /* Nothing is launched for an empty Q; its pointers and strides are never used. */
  if (args->q.dim[0] == 0 || args->q.dim[1] == 0) return FA_OK;
  if ((st = check_cache(&c)) || (st = check_sizes(&c)) || (st = fa_check_strides(&c.lt)) ||
      (st = fa_check_alignment(&c.lt, args->lse)) || (st = fa_check_extents(&c.lt, ext)) ||
      (st = check_in_space(&c)) || (st = fa_check_self_overlap(&c.lt, O)) ||
      (st = check_aliasing(&c, ext)))
    return st;
  if (args->host_cache_seqlens && (st = check_host_seqlens(&c))) return st;
  if (c.paged && args->host_block_table && (st = check_host_block_table(&c)))
    return st;
  return FA_OK;
}

/* ---- split count and workspace ------------------------------------------- */

/* The small-batch variant (passes/small_batch_variant.c) for launches that
 * leave one block per SM: on 128-key tiles a block has 64 KB in flight and
 * its warps twice the MMAs a step (H100, docs/perf-log.md P24 and P27, batch 1
 * GQA 32/8 at 16 splits: 8k 18.9 -> 18.0 us, 16k 31.6 -> 30.1, 64k 94.8 ->
 * 92.4; 1k-4k within 0.4 us either way; at 4-8 splits: batch 1 MHA 8k 50.9
 * -> 50.3, 64k 349.2 -> 345.2, batch 2 GQA 8k 31.4 -> 30.0, batch 4 GQA 16k
 * 94.3 -> 92.1). With two blocks per SM (larger batches) the 64-key kernel
 * is 0.5-4% faster. */
int fa_decode_variant(const fa_kernel_info *info, int64_t batch, int64_t kv_heads,
                      int64_t max_seqlen, int sm_count) {
  if (!info || !has_combine(info) || !info->decode.wide_kernel[0] ||
      info->decode.wide_tile_kv < 1)
    return 0;
  int64_t blocks = batch * kv_heads;
  if (blocks < 1) blocks = 1;
  if (sm_count < 1) sm_count = 132; /* unknown: an H100's */
  return blocks * FA_DECODE_WIDE_SPLITS <= sm_count && max_seqlen >= FA_DECODE_WIDE_KEYS;
}

int fa_decode_splits(const fa_kernel_info *info, int64_t batch, int64_t kv_heads,
                     int64_t max_seqlen, int sm_count) {
  if (!info || !has_combine(info)) return 1;
  int wide = fa_decode_variant(info, batch, kv_heads, max_seqlen, sm_count);
  int64_t blocks = batch * kv_heads;
  if (blocks < 1) blocks = 1;
  if (sm_count < 1) sm_count = 132; /* unknown: an H100's */
  int64_t tile = wide ? info->decode.wide_tile_kv : info->tile_kv > 0 ? info->tile_kv : 64;
  int64_t tiles = max_seqlen > 0 ? (max_seqlen + tile - 1) / tile : 1;
  /* A split block is latency-bound at batch 1: its copies wait one DRAM
   * round trip per K/V step. One block per SM, down to one tile a split:
   * short caches stream from every SM (H100, docs/perf-log.md P21: B=1
   * GQA 1k / 2k / 4k, 2 / 4 / 8 splits 11.8 / 13.7 / 15.1 us, 16 splits
   * 7.3 / 9.6 / 12.8). A second block per SM doubles the bytes in flight
   * but adds a partial to merge: worth it from 1024-key chunks (B=4 GQA 8k:
   * 8 splits 52.7 us, 4: 53.8; B=1 MHA 8k: 8 splits 50.8, 4: 51.9; below,
   * B=1 GQA 16k: 32 splits 31.9, 16: 31.6). Rounded down:
   * an SM that gets a third block while the others hold two finishes last
   * (batch 8 GQA 16k, 64 (kv_head, batch) pairs: 4 splits = 256 blocks
   * 194 us, 5 = 320 blocks 263.1 us; docs/perf-log.md P11). */
  int64_t one = sm_count / blocks;
  if (one > tiles) one = tiles;
  int64_t two = 2 * (int64_t)sm_count / blocks;
  if (two > max_seqlen / FA_DECODE_LONG_CHUNK) two = max_seqlen / FA_DECODE_LONG_CHUNK;
  if (wide) two = 0; /* 100 KB blocks: 16 splits 92.4 us, 32 96.9 (B=1 GQA 64k) */
  int64_t n = one > two ? one : two;
  if (n > FA_DECODE_MAX_SPLITS) n = FA_DECODE_MAX_SPLITS;
  if (n < 1) return 1;
  /* The kernel gives each split ceil(tiles / n) whole tiles of the longest
   * cache: fewer splits may cover it with the same chunks, and an empty
   * split would still be merged (65536 keys in 64-key tiles: 33 splits of
   * 32 tiles leave the last one empty; 32 cover them, one merge round trip
   * fewer, docs/perf-log.md P21). */
  int64_t chunk = (tiles + n - 1) / n;
  return (int)((tiles + chunk - 1) / chunk);
}

/* The longest cache length the launch may see. */
static int64_t longest(const fa_kernel_info *info, const fa_decode_args *a) {
  int64_t m = 0;
  if (a->host_cache_seqlens) {
    for (int64_t b = 0; b < a->q.dim[0]; b++)
      if (a->host_cache_seqlens[b] > m) m = a->host_cache_seqlens[b];
    return m;
  }
  if (a->max_seqlen) return a->max_seqlen;
  if (info->decode.cache == FA_CACHE_PAGED) return a->max_pages * info->decode.page_size;
  return a->k.dim[1];
}

fa_status fa_decode_plan(const fa_kernel_info *info, const fa_decode_args *args, int sm_count,
                         int *nsplit, size_t *workspace_bytes, int *wide) {
  if (!info || !args || !nsplit || !workspace_bytes) return FA_ERR_NULL_POINTER;
  int auto_split = args->nsplit == 0 && info->decode.split == 0;
  int n = args->nsplit ? args->nsplit : info->decode.split;
  int use_wide = 0;
  if (auto_split) {
    int64_t len = longest(info, args);
    n = fa_decode_splits(info, args->q.dim[0], info->kv_heads, len, sm_count);
    use_wide = fa_decode_variant(info, args->q.dim[0], info->kv_heads, len, sm_count);
  }
  if (wide) *wide = use_wide;
  if (!has_combine(info)) n = 1;
  /* Floats per split: o_part rows of v_head_dim plus one lse_part each. */
  int64_t per_split = args->q.dim[0] * info->heads * args->q.dim[1] * (info->v_head_dim + 1);
  if (auto_split && per_split > 0 && n * per_split > INT32_MAX)
    n = (int)(INT32_MAX / per_split) > 1 ? (int)(INT32_MAX / per_split) : 1;
  *nsplit = n;
  *workspace_bytes = 0;
  if (info->workspace_floats_per_row > 0) {
    /* The FlashAttention-1 loop order (-disable-pass=reorder-q-outer) keeps
     * O, m and l in global memory: that many floats per query row. */
    int64_t need = args->q.dim[0] * info->heads * args->q.dim[1] * info->workspace_floats_per_row;
    if (need > INT32_MAX) return FA_ERR_TOO_LARGE;
    *workspace_bytes = (size_t)need * sizeof(float);
  }
  if (n == 1) return FA_OK;
  if (n * per_split > INT32_MAX) return FA_ERR_TOO_LARGE;
  *workspace_bytes = (size_t)(n * per_split) * sizeof(float);
  return FA_OK;
}

/* ---- launch ---------------------------------------------------------------- */

static uint64_t devptr(const void *p) { return (uint64_t)(uintptr_t)p; }

fa_status fa_decode_params(const fa_kernel_info *info, const fa_decode_args *a, int nsplit,
                           uint64_t lse, uint64_t workspace,
                           fa_param params[FA_BACKWARD_MAX_PARAMS], int *count) {
  static const char *const names[4] = {"q", "k", "v", "o"};
  static const char *const strides[4][3] = {{"q.sb", "q.ss", "q.sh"}, {"k.sb", "k.ss", "k.sh"},
                                            {"v.sb", "v.ss", "v.sh"}, {"o.sb", "o.ss", "o.sh"}};
  if (!info || !a || !params || !count) return FA_ERR_NULL_POINTER;
  const fa_tensor *t[4] = {&a->q, &a->k, &a->v, &a->o};
  int paged = info->decode.cache == FA_CACHE_PAGED;
  fa_plist l = {params, 0};
  for (int j = 0; j < 4; j++) fa_put_(&l, FA_PARAM_PTR, names[j], (int64_t)devptr(t[j]->data));
  fa_put_(&l, FA_PARAM_PTR, "lse", (int64_t)lse);
  fa_put_(&l, FA_PARAM_PTR, "workspace", (int64_t)workspace);
  fa_put_(&l, FA_PARAM_PTR, "cache_seqlens", (int64_t)devptr(a->cache_seqlens));
  fa_put_(&l, FA_PARAM_PTR, "block_table", (int64_t)devptr(a->block_table));
  fa_put_(&l, FA_PARAM_I32, "batch", a->q.dim[0]);
  fa_put_(&l, FA_PARAM_I32, "q_len", a->q.dim[1]);
  fa_put_(&l, FA_PARAM_I32, "capacity",
          paged ? a->max_pages * info->decode.page_size : a->k.dim[1]);
  fa_put_(&l, FA_PARAM_I32, "nsplit", nsplit);
  fa_put_(&l, FA_PARAM_I32, "bt_stride", paged ? (a->bt_stride ? a->bt_stride : a->max_pages) : 0);
  for (int j = 0; j < 4; j++)
    for (int d = 0; d < 3; d++) fa_put_(&l, FA_PARAM_I64, strides[j][d], t[j]->stride[d]);
  fa_put_inputs_(&l, info->inputs, info->ninputs, a->inputs, a->num_inputs);
  *count = l.n;
  return FA_OK;
}

/* The split kernel, or its small-batch variant (same parameters). */
static fa_status launch_split(fa_module *m, const fa_decode_args *a, int nsplit, uint64_t lse,
                              uint64_t ws, int wide) {
  const fa_kernel_info *in = fa_module_info(m);
  fa_param p[FA_BACKWARD_MAX_PARAMS];
  fa_param_values v;
  int n = 0;
  fa_decode_params(in, a, nsplit, lse, ws, p, &n);
  fa_param_values_(p, n, &v);
  unsigned grid[3] = {(unsigned)nsplit, (unsigned)in->kv_heads, (unsigned)a->q.dim[0]};
  if (wide)
    return fa_module_launch_(m, FA_ENTRY_WIDE, grid, (unsigned)in->decode.wide_threads,
                             (unsigned)in->decode.wide_smem_bytes, a->stream, v.ptr);
  return fa_module_launch_(m, FA_ENTRY_KERNEL, grid, (unsigned)in->threads,
                           (unsigned)in->smem_bytes, a->stream, v.ptr);
}

static fa_status launch_combine(fa_module *m, const fa_decode_args *a, int nsplit, uint64_t lse,
                                uint64_t ws) {
  const fa_kernel_info *in = fa_module_info(m);
  uint64_t o = devptr(a->o.data), seq = devptr(a->cache_seqlens);
  int batch = (int)a->q.dim[0], q_len = (int)a->q.dim[1], ns = nsplit;
  long long sb = a->o.stride[0], ss = a->o.stride[1], sh = a->o.stride[2];
  void *params[10] = {&o, &lse, &ws, &seq, &batch, &q_len, &ns, &sb, &ss, &sh};
  unsigned grid[3] = {(unsigned)in->heads, (unsigned)batch, 1};
  return fa_module_launch_(m, FA_ENTRY_COMBINE, grid, (unsigned)in->decode.combine_threads, 0,
                           a->stream, params);
}

fa_status fa_decode(fa_module *mod, const fa_decode_args *args) {
  if (!mod) return FA_ERR_NULL_POINTER;
  size_t msglen;
  char *msg = fa_module_msg_(mod, &msglen);
  const fa_kernel_info *in = fa_module_info(mod);
  fa_status st = fa_decode_check(in, args, msg, msglen);
  if (st != FA_OK) return st;
  if (args->q.dim[0] == 0 || args->q.dim[1] == 0) return FA_OK; /* nothing to compute */
  int nsplit, wide;
  size_t ws_bytes;
  if ((st = fa_decode_plan(in, args, fa_module_sm_count_(mod), &nsplit, &ws_bytes, &wide))) {
    fa_fmt(msg, msglen, "workspace: nsplit %d x batch %" PRId64 " x heads %d x q_len %" PRId64
           " x (v_head_dim %d + 1) floats exceed the int32 limit", nsplit, args->q.dim[0],
           in->heads, args->q.dim[1], in->v_head_dim);
    return st;
  }
  /* Scratch layout: [counters][LSE rows when the caller wants none][workspace],
   * or for a fused kernel [counters][workspace][LSE rows] (the kernel finds
   * its counters right before the workspace); the workspace 256-byte
   * aligned so kernels may use vector accesses. The counters (fused only:
   * round_up(batch * N, 64) i32s) stay at the scratch's start whatever the
   * batch, so that the zero they are left at holds from launch to launch. */
  size_t rows = (size_t)args->q.dim[0] * (size_t)in->heads * (size_t)args->q.dim[1];
  size_t lse_bytes = args->lse ? 0 : (rows * sizeof(float) + 255) & ~(size_t)255;
  size_t ctr_bytes = 0;
  int fused = in->decode.combine_fused > 0;
  if (fused)
    ctr_bytes = ((size_t)args->q.dim[0] * (size_t)in->decode.combine_fused * 4 + 255) &
                ~(size_t)255;
  if ((st = fa_module_enter_(mod))) return st;
  uint64_t base = 0;
  st = fa_module_scratch_(mod, ctr_bytes + lse_bytes + ws_bytes, &base);
  if (st == FA_OK && fused) st = fa_module_zero_head_(mod, ctr_bytes, args->stream);
  if (st == FA_OK) {
    uint64_t lse = args->lse ? devptr(args->lse) : base + ctr_bytes + (fused ? ws_bytes : 0);
    uint64_t ws = ws_bytes ? base + ctr_bytes + (fused ? 0 : lse_bytes) : 0;
    /* The scratch (counters, workspace, LSE rows) is written by the launch:
     * a tensor input must not lie in it (only a forged address could). */
    fa_range scratch = {"the decode workspace (module scratch)", (uintptr_t)base,
                        (int64_t)(ctr_bytes + lse_bytes + ws_bytes)};
    st = fa_check_input_memory_(in, args->inputs, args->num_inputs, &scratch, 1, msg, msglen);
    if (st == FA_OK) st = launch_split(mod, args, nsplit, lse, ws, wide);
    if (st == FA_OK && nsplit > 1 && !fused) st = launch_combine(mod, args, nsplit, lse, ws);
  }
  fa_module_leave_(mod);
  if (st == FA_OK) {
    *fa_module_last_nsplit_(mod) = nsplit;
    *fa_module_last_wide_(mod) = wide;
  }
  return st;
}
