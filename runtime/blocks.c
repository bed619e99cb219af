/* blocks.c - block lists (docs/abi.md, "Block lists"): the lists' shapes,
 * the classifier kernels' checks and parameter lists, fa_blocks (lists
 * built once, reused by many launches) and the lists fa_forward and
 * fa_backward build for themselves when given none.
 *
 * A classifier kernel writes, per tile row, the tile pairs that keep
 * something; the attention kernels visit exactly those. The kernels index
 * the lists in int32 and trust them, so the sizes are refused here when
 * they do not fit, and a launch given an fa_blocks must be of the sizes
 * and the module it was made for.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_GRID_YZ 65535
#define MAX_GRID_X INT32_MAX
/* Each array of an fa_blocks or of the scratch starts this aligned. */
#define ALIGN 256

struct fa_blocks {
  fa_context *ctx;      /* a reference: the memory is freed through it */
  uint64_t serial;      /* fa_module_serial_ of the module it was made by */
  int64_t batch, seqlen_q, seqlen_k;
  uint64_t mem;         /* one allocation holding every array; 0 for none */
  int n;                /* classifiers */
  char name[FA_MODULE_MAX_KERNELS][FA_NAME_MAX];
  fa_block_lists lists[FA_MODULE_MAX_KERNELS];
};

/* ---- shapes ---------------------------------------------------------------- */

/* ceil(len / tile) for len >= 0, tile >= 1, without len + tile - 1 (the
 * public entry points take any int64 size). */
static int64_t tiles(int64_t len, int tile) { return len / tile + (len % tile != 0); }

fa_status fa_block_lists_shape(const fa_kernel_info *in, int64_t batch, int64_t seqlen_q,
                               int64_t seqlen_k, fa_block_lists *out) {
  if (!in || !out) return FA_ERR_NULL_POINTER;
  memset(out, 0, sizeof *out);
  out->kernel = -1;
  int cols = in->blocks == FA_BLOCKS_COLS;
  if ((in->blocks != FA_BLOCKS_ROWS && !cols) || in->list_heads < 1 || in->tile_q < 1 ||
      in->tile_kv < 1 || batch < 0 || seqlen_q < 0 || seqlen_k < 0)
    return FA_ERR_INVALID_ARGUMENT;
  int64_t rows = cols ? tiles(seqlen_k, in->tile_kv) : tiles(seqlen_q, in->tile_q);
  int64_t steps = cols ? tiles(seqlen_q, in->tile_q) : tiles(seqlen_k, in->tile_kv);
  if (steps == INT64_MAX) return FA_ERR_TOO_LARGE; /* list_len steps + 1 */
  int64_t d[4] = {batch, in->list_heads, rows, steps + 1}, s[4] = {0, 0, 0, 1};
  for (int i = 3; i > 0; i--)
    if (!fa_mul_ok(s[i], d[i], &s[i - 1])) return FA_ERR_TOO_LARGE;
  int64_t elems;
  if (!fa_mul_ok(s[0], d[0], &elems) || elems > INT32_MAX) return FA_ERR_TOO_LARGE;
  for (int i = 0; i < 4; i++) out->list_dim[i] = d[i], out->list_stride[i] = s[i];
  for (int i = 0; i < 3; i++) out->count_dim[i] = d[i];
  out->count_stride[2] = 1;
  out->count_stride[1] = rows;
  out->count_stride[0] = in->list_heads * rows; /* <= list's elements */
  return FA_OK;
}

/* The bytes of l's arrays, each rounded up to ALIGN: count, then list. */
static void array_bytes(const fa_block_lists *l, int64_t *count, int64_t *list) {
  int64_t c = l->count_dim[0] * l->count_stride[0], e = l->list_dim[0] * l->list_stride[0];
  *count = (c * 4 + ALIGN - 1) & ~(int64_t)(ALIGN - 1);
  *list = (e * 4 + ALIGN - 1) & ~(int64_t)(ALIGN - 1);
}

/* The message of a shape fa_block_lists_shape refused for its size. */
static void too_large(const fa_kernel_info *in, fa_sizes sz, char *msg, size_t len) {
  int cols = in->blocks == FA_BLOCKS_COLS;
  int64_t rows = cols ? tiles(sz.seqlen_k, in->tile_kv) : tiles(sz.seqlen_q, in->tile_q);
  int64_t steps = cols ? tiles(sz.seqlen_q, in->tile_q) : tiles(sz.seqlen_k, in->tile_kv);
  fa_fmt(msg, len, "block lists of %s: batch %" PRId64 " x list_heads %d x row_tiles %" PRId64
         " x list_len %" PRId64 " int32 exceed the kernels' int32 index limit 2147483647",
         in->mode == FA_MODE_BLOCKS ? in->kernel : in->block_list, sz.batch, in->list_heads,
         rows, steps + 1);
}

fa_status fa_classifier_grid(const fa_kernel_info *in, int64_t batch, int64_t seqlen_q,
                             int64_t seqlen_k, unsigned grid[3]) {
  if (!in || !grid) return FA_ERR_NULL_POINTER;
  grid[0] = grid[1] = grid[2] = 0;
  if (in->mode != FA_MODE_BLOCKS ||
      (in->grid != FA_GRID_ROW_TILES && (in->grid != FA_GRID_ROW_CHUNKS || in->chunk < 1)))
    return FA_ERR_INVALID_ARGUMENT;
  fa_block_lists l;
  fa_status st = fa_block_lists_shape(in, batch, seqlen_q, seqlen_k, &l);
  if (st != FA_OK) return st;
  /* With batch 0 the lists hold no element whatever their other dims:
   * rows * chunks may then pass int64, and any dim the grid limits. */
  int64_t x = l.list_dim[2];
  if (in->grid == FA_GRID_ROW_CHUNKS && !fa_mul_ok(x, tiles(l.list_dim[3] - 1, in->chunk), &x))
    return FA_ERR_TOO_LARGE;
  if (x > MAX_GRID_X || in->list_heads > MAX_GRID_YZ || batch > MAX_GRID_YZ)
    return FA_ERR_TOO_LARGE;
  grid[0] = (unsigned)x, grid[1] = (unsigned)in->list_heads, grid[2] = (unsigned)batch;
  return FA_OK;
}

/* ---- parameters ------------------------------------------------------------ */

void fa_put_block_lists_(fa_plist *l, const fa_block_lists *b) {
  static const char *const ls[4] = {"blk_list.s0", "blk_list.s1", "blk_list.s2",
                                    "blk_list.s3"};
  static const char *const cs[3] = {"blk_count.s0", "blk_count.s1", "blk_count.s2"};
  fa_put_(l, FA_PARAM_PTR, "blk_list", (int64_t)(uintptr_t)b->list);
  for (int i = 0; i < 4; i++) fa_put_(l, FA_PARAM_I64, ls[i], b->list_stride[i]);
  fa_put_(l, FA_PARAM_PTR, "blk_count", (int64_t)(uintptr_t)b->count);
  for (int i = 0; i < 3; i++) fa_put_(l, FA_PARAM_I64, cs[i], b->count_stride[i]);
}

static const fa_block_lists *find_lists(const fa_blocks *b, const char *name) {
  for (int i = 0; b && i < b->n; i++)
    if (strcmp(b->name[i], name) == 0) return &b->lists[i];
  return NULL;
}

fa_block_lists fa_visited_lists_(const fa_kernel_info *in, const fa_blocks *blocks,
                                 fa_sizes sz) {
  fa_block_lists l;
  if (fa_block_lists_shape(in, sz.batch, sz.seqlen_q, sz.seqlen_k, &l) != FA_OK) {
    memset(&l, 0, sizeof l);
    l.kernel = -1;
  }
  const fa_block_lists *given = find_lists(blocks, in->block_list);
  if (given) l = *given;
  return l;
}

fa_status fa_blocks_params(const fa_kernel_info *in, const fa_blocks_args *a,
                           const fa_block_lists *lists, fa_param p[FA_BACKWARD_MAX_PARAMS],
                           int *n) {
  if (n) *n = 0;
  if (!in || !a || !lists || !p || !n) return FA_ERR_NULL_POINTER;
  fa_plist l = {p, 0};
  fa_put_(&l, FA_PARAM_I32, "batch", a->batch);
  fa_put_(&l, FA_PARAM_I32, "seqlen_q", a->seqlen_q);
  fa_put_(&l, FA_PARAM_I32, "seqlen_k", a->seqlen_k);
  fa_put_inputs_(&l, in->inputs, in->ninputs, a->inputs, a->num_inputs);
  fa_put_block_lists_(&l, lists);
  *n = l.n;
  return FA_OK;
}

/* ---- checks ---------------------------------------------------------------- */

fa_status fa_blocks_check(const fa_kernel_info *in, const fa_blocks_args *a, char *msg,
                          size_t len) {
  fa_status st = fa_check_present(in, a, msg, len);
  if (st != FA_OK) return st;
  if (in->mode != FA_MODE_BLOCKS) {
    fa_fmt(msg, len, "kernel %s is not a classifier kernel (mode blocks); fa_blocks_create "
           "launches those", in->kernel);
    return FA_ERR_UNSUPPORTED;
  }
  if ((st = fa_check_kernel_info(in, msg, len))) return st;
  /* The grid too: fa_blocks_create launches on fa_classifier_grid's. */
  if ((in->blocks != FA_BLOCKS_ROWS && in->blocks != FA_BLOCKS_COLS) || in->list_heads < 1 ||
      in->list_heads > MAX_GRID_YZ || in->tile_kv < 1 || in->smem_bytes < 0 ||
      (in->grid != FA_GRID_ROW_TILES && (in->grid != FA_GRID_ROW_CHUNKS || in->chunk < 1))) {
    fa_fmt(msg, len, "kernel %s: blocks %d, list_heads %d, tile_kv %d, smem_bytes %d, grid %d, "
           "chunk %d are not a classifier's: use fa_meta_parse", in->kernel, (int)in->blocks,
           in->list_heads, in->tile_kv, in->smem_bytes, (int)in->grid, in->chunk);
    return FA_ERR_META;
  }
  const int64_t size[3] = {a->batch, a->seqlen_q, a->seqlen_k};
  static const char *const names[3] = {"batch", "seqlen_q", "seqlen_k"};
  for (int i = 0; i < 3; i++) {
    if (size[i] < 0) {
      fa_fmt(msg, len, "%s is %" PRId64 ", a size cannot be negative", names[i], size[i]);
      return FA_ERR_INVALID_ARGUMENT;
    }
    if (size[i] > INT32_MAX) {
      fa_fmt(msg, len, "%s is %" PRId64 ", more than the kernel's int32 limit 2147483647",
             names[i], size[i]);
      return FA_ERR_TOO_LARGE;
    }
  }
  if (a->batch > MAX_GRID_YZ) {
    fa_fmt(msg, len, "grid: batch %" PRId64 " exceeds the CUDA grid limit (grid z at most "
           "65535)", a->batch);
    return FA_ERR_TOO_LARGE;
  }
  /* The inputs' dims are the launch's: q [batch, seqlen_q], k [batch, seqlen_k]. */
  fa_tensor q, k;
  memset(&q, 0, sizeof q);
  memset(&k, 0, sizeof k);
  q.dim[0] = k.dim[0] = a->batch;
  q.dim[1] = a->seqlen_q, k.dim[1] = a->seqlen_k;
  if ((st = fa_check_inputs_(in, a->inputs, a->num_inputs, &q, &k, NULL, msg, len))) return st;
  fa_block_lists l;
  fa_sizes sz = {a->batch, a->seqlen_q, a->seqlen_k};
  if (fa_block_lists_shape(in, a->batch, a->seqlen_q, a->seqlen_k, &l) != FA_OK) {
    too_large(in, sz, msg, len);
    return FA_ERR_TOO_LARGE;
  }
  if (a->batch == 0 || l.list_dim[2] == 0) return FA_OK; /* nothing is launched */
  return fa_check_input_memory_(in, a->inputs, a->num_inputs, NULL, 0, msg, len);
}

/* A kernel that visits lists as fa_meta_parse_module makes one (a
 * hand-built info may not be; its lists' shape and the kernel's reads
 * follow these): never layout varlen, a forward kernel or a backward one
 * of role q, main, kv or dv, with its classifier's orientation the one it
 * visits (rows: forward, q; cols: main, kv, dv) and list_heads 1 or
 * heads, a grid y. */
static fa_status check_visitor(const fa_kernel_info *in, char *msg, size_t len) {
  fa_role r = in->role;
  int bwd = in->mode == FA_MODE_BACKWARD;
  int cols = bwd && (r == FA_ROLE_MAIN || r == FA_ROLE_KV || r == FA_ROLE_DV);
  int visits = in->mode == FA_MODE_FORWARD || cols || (bwd && r == FA_ROLE_Q);
  if (visits && !in->varlen && in->blocks == (cols ? FA_BLOCKS_COLS : FA_BLOCKS_ROWS) &&
      (in->list_heads == 1 || in->list_heads == in->heads) && in->list_heads <= MAX_GRID_YZ)
    return FA_OK;
  fa_fmt(msg, len, "kernel %s: block_list %s with mode %d, role %d, layout %s, blocks %d, "
         "list_heads %d (heads %d) does not visit its classifier's lists: use "
         "fa_meta_parse_module", in->kernel, in->block_list, (int)in->mode, (int)r,
         in->varlen ? "varlen" : "padded", (int)in->blocks, in->list_heads, in->heads);
  return FA_ERR_META;
}

fa_status fa_check_blocks_(const fa_kernel_info *in, const fa_blocks *b, fa_sizes sz, int lists,
                           char *msg, size_t len) {
  if (b && (b->batch != sz.batch || b->seqlen_q != sz.seqlen_q || b->seqlen_k != sz.seqlen_k)) {
    fa_fmt(msg, len, "blocks: made for batch %" PRId64 ", seqlen_q %" PRId64 ", seqlen_k %"
           PRId64 " but the launch's are %" PRId64 ", %" PRId64 ", %" PRId64 " (build an "
           "fa_blocks for these sizes, or pass none)", b->batch, b->seqlen_q, b->seqlen_k,
           sz.batch, sz.seqlen_q, sz.seqlen_k);
    return FA_ERR_SHAPE;
  }
  if (!in->block_list[0]) return FA_OK;
  fa_status st = check_visitor(in, msg, len);
  if (st != FA_OK) return st;
  if (b && !find_lists(b, in->block_list)) {
    fa_fmt(msg, len, "blocks: holds no lists of %s, the classifier of kernel %s (made by "
           "another module?)", in->block_list, in->kernel);
    return FA_ERR_INVALID_ARGUMENT;
  }
  fa_block_lists l;
  if (lists && fa_block_lists_shape(in, sz.batch, sz.seqlen_q, sz.seqlen_k, &l) != FA_OK) {
    if (in->blocks == FA_BLOCKS_NONE || in->tile_kv < 1) {
      fa_fmt(msg, len, "kernel %s: block_list %s without its classifier's blocks (blocks %d, "
             "list_heads %d, tile_kv %d): use fa_meta_parse_module", in->kernel,
             in->block_list, (int)in->blocks, in->list_heads, in->tile_kv);
      return FA_ERR_META;
    }
    too_large(in, sz, msg, len);
    return FA_ERR_TOO_LARGE;
  }
  return FA_OK;
}

fa_status fa_blocks_of_module_(fa_module *m, const fa_blocks *b) {
  if (!b || b->serial == fa_module_serial_(m)) return FA_OK;
  size_t len;
  char *msg = fa_module_msg_(m, &len);
  int n;
  const fa_kernel_info *k = fa_module_kernels_(m, &n);
  fa_fmt(msg, len, "blocks: made by another module's fa_blocks_create, not kernel %s's (its "
         "lists are another spec's)", k[0].kernel);
  return FA_ERR_INVALID_ARGUMENT;
}

/* ---- building -------------------------------------------------------------- */

/* The module's kernel called name (a classifier), or -1. */
static int kernel_index(fa_module *m, const char *name) {
  int n;
  const fa_kernel_info *k = fa_module_kernels_(m, &n);
  for (int i = 0; i < n; i++)
    if (strcmp(k[i].kernel, name) == 0 && k[i].mode == FA_MODE_BLOCKS && !k[i].chunk) return i;
  return -1;
}

/* The module's classes kernel called name (mode blocks, key chunk), or -1
 * (fa_meta_parse_module makes sure a classifier's is there). */
static int classes_index(fa_module *m, const char *name) {
  int n;
  const fa_kernel_info *k = fa_module_kernels_(m, &n);
  for (int i = 0; i < n; i++)
    if (strcmp(k[i].kernel, name) == 0 && k[i].mode == FA_MODE_BLOCKS && k[i].chunk > 0)
      return i;
  return -1;
}

/* Launches the module's classifier ki into l (context current): first its
 * classes kernel when it names one (phase 1: grid row_tiles * ceil(steps /
 * chunk), list_heads, batch), then it, with the same parameters, on the
 * same stream. */
static fa_status launch_classifier(fa_module *m, int ki, const fa_blocks_args *a,
                                   const fa_block_lists *l) {
  int n;
  const fa_kernel_info *k = fa_module_kernels_(m, &n), *in = &k[ki];
  unsigned grid[3];
  if (a->batch == 0) return FA_OK; /* no list; the grid of the other dims may not fit */
  fa_status st = fa_classifier_grid(in, a->batch, a->seqlen_q, a->seqlen_k, grid);
  if (st != FA_OK) return st; /* checked before (fa_blocks_check, the launch's) */
  if (grid[0] == 0) return FA_OK;
  fa_param p[FA_BACKWARD_MAX_PARAMS];
  fa_param_values v;
  int np = 0;
  fa_blocks_params(in, a, l, p, &np);
  fa_param_values_(p, np, &v);
  if (in->classes[0]) {
    int c = classes_index(m, in->classes);
    if (c < 0) {
      size_t len;
      fa_fmt(fa_module_msg_(m, &len), len, "classifier %s: classes %s names no classes kernel "
             "of this module", in->kernel, in->classes);
      return FA_ERR_META;
    }
    unsigned g1[3];
    st = fa_classifier_grid(&k[c], a->batch, a->seqlen_q, a->seqlen_k, g1);
    if (st == FA_OK && g1[0] > 0) /* none: no steps, every row's range is empty */
      st = fa_module_launch_kernel_(m, c, g1, (unsigned)k[c].threads,
                                    (unsigned)k[c].smem_bytes, a->stream, v.ptr);
    if (st != FA_OK) return st;
  }
  return fa_module_launch_kernel_(m, ki, grid, (unsigned)in->threads, (unsigned)in->smem_bytes,
                                  a->stream, v.ptr);
}

/* Lays out the lists of classifiers ki[0..n) for a's sizes from `base`
 * on (count, then list, each ALIGN-aligned) into l[0..n); *bytes the
 * total. Shapes checked (fa_blocks_check or the launch's checks). */
static void lay_out(fa_module *m, const int *ki, int n, const fa_blocks_args *a, uint64_t base,
                    fa_block_lists *l, int64_t *bytes) {
  int nk;
  const fa_kernel_info *k = fa_module_kernels_(m, &nk);
  int64_t off = 0;
  for (int i = 0; i < n; i++) {
    fa_block_lists_shape(&k[ki[i]], a->batch, a->seqlen_q, a->seqlen_k, &l[i]);
    l[i].kernel = ki[i];
    int64_t cb, lb;
    array_bytes(&l[i], &cb, &lb);
    if (base) {
      l[i].count = (void *)(uintptr_t)(base + (uint64_t)off);
      l[i].list = (void *)(uintptr_t)(base + (uint64_t)(off + cb));
    }
    off += cb + lb;
  }
  *bytes = off;
}

fa_status fa_blocks_build_(fa_module *m, const char *const *names, int n,
                           const fa_blocks_args *a, fa_block_lists *out) {
  int ki[FA_MODULE_MAX_KERNELS] = {0}, nk = 0, which[FA_BACKWARD_MAX_STEPS + 1];
  size_t len;
  char *msg = fa_module_msg_(m, &len);
  for (int i = 0; i < n && i <= FA_BACKWARD_MAX_STEPS; i++) {
    int c = kernel_index(m, names[i]), j = 0;
    if (c < 0) { /* fa_meta_parse_module makes sure it is there */
      fa_fmt(msg, len, "block_list %s names no classifier of this module", names[i]);
      return FA_ERR_META;
    }
    while (j < nk && ki[j] != c) j++;
    if (j == nk) ki[nk++] = c;
    which[i] = j;
  }
  fa_block_lists l[FA_MODULE_MAX_KERNELS];
  int64_t bytes;
  lay_out(m, ki, nk, a, 0, l, &bytes);
  uint64_t base = 0;
  fa_status st = fa_module_lists_scratch_(m, (size_t)bytes, &base);
  if (st == FA_OK) lay_out(m, ki, nk, a, base, l, &bytes);
  for (int j = 0; j < nk && st == FA_OK; j++) st = launch_classifier(m, ki[j], a, &l[j]);
  for (int i = 0; i < n && i <= FA_BACKWARD_MAX_STEPS && st == FA_OK; i++) out[i] = l[which[i]];
  return st;
}

/* ---- fa_blocks ------------------------------------------------------------- */

fa_status fa_blocks_create(fa_module *mod, const fa_blocks_args *args, fa_blocks **out) {
  if (out) *out = NULL;
  if (!mod) return FA_ERR_NULL_POINTER;
  size_t len;
  char *msg = fa_module_msg_(mod, &len);
  fa_fmt(msg, len, "%s", "");
  if (!args || !out) {
    fa_fmt(msg, len, "fa_blocks_create: %s is NULL", args ? "out" : "args");
    return FA_ERR_NULL_POINTER;
  }
  int nk, ki[FA_MODULE_MAX_KERNELS], n = 0;
  const fa_kernel_info *k = fa_module_kernels_(mod, &nk);
  fa_status st;
  for (int i = 0; i < nk; i++) {
    if (k[i].mode != FA_MODE_BLOCKS) continue;
    if ((st = fa_blocks_check(&k[i], args, msg, len))) return st;
    if (k[i].chunk > 0) continue; /* a classes kernel: launched by its classifier */
    ki[n++] = i;
  }
  fa_blocks *b = calloc(1, sizeof *b);
  if (!b) {
    fa_fmt(msg, len, "out of host memory");
    return FA_ERR_OUT_OF_MEMORY;
  }
  b->ctx = fa_module_context_(mod);
  fa_context_retain_(b->ctx);
  b->serial = fa_module_serial_(mod);
  b->batch = args->batch, b->seqlen_q = args->seqlen_q, b->seqlen_k = args->seqlen_k;
  b->n = n;
  for (int i = 0; i < n; i++) memcpy(b->name[i], k[ki[i]].kernel, FA_NAME_MAX);
  int64_t bytes;
  lay_out(mod, ki, n, args, 0, b->lists, &bytes);
  st = FA_OK;
  if (bytes > 0 && (st = fa_module_enter_(mod)) == FA_OK) {
    st = fa_module_alloc_(mod, (size_t)bytes, &b->mem);
    if (st == FA_OK) lay_out(mod, ki, n, args, b->mem, b->lists, &bytes);
    for (int i = 0; i < n && st == FA_OK; i++) st = launch_classifier(mod, ki[i], args,
                                                                       &b->lists[i]);
    fa_module_leave_(mod);
  }
  if (st != FA_OK) {
    fa_blocks_destroy(b);
    return st;
  }
  *out = b;
  return FA_OK;
}

void fa_blocks_destroy(fa_blocks *b) {
  if (!b) return;
  fa_context_free_mem_(b->ctx, b->mem);
  fa_context_release_(b->ctx);
  free(b);
}

int fa_blocks_count(const fa_blocks *b) { return b ? b->n : 0; }

fa_status fa_blocks_lists(const fa_blocks *b, int i, fa_block_lists *out) {
  if (!b || !out) return FA_ERR_NULL_POINTER;
  if (i < 0 || i >= b->n) return FA_ERR_INVALID_ARGUMENT;
  *out = b->lists[i];
  return FA_OK;
}
