/* fuzz_launch_gen_blocks.c - the launch harness's block lists (docs/abi.md,
 * "Block lists"): kernels that visit lists, classifier kernels, the
 * host-only block-list entry points, and what each accepted call promises
 * (fuzz_launch.c). Without a GPU there is no fa_blocks (fa_blocks_create
 * launches), so every launch here has args.blocks == NULL: the lists are
 * the per-launch ones in module scratch, their addresses 0 in the
 * parameter lists. */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_launch.h"

#define MAX_GRID_X INT32_MAX
#define MAX_GRID_YZ 65535

/* ---------------------------------------------------------------- the model */

/* a * b for a, b >= 0, saturated at 2^100: the model's sizes never wrap,
 * and anything past 2^100 is past every limit anyway. */
static __int128 mulc(__int128 a, __int128 b) {
  const __int128 cap = (__int128)1 << 100;
  if (a == 0 || b == 0)
    return 0;
  if (a >= cap || b >= cap || a > cap / b)
    return cap;
  return a * b;
}

static __int128 tiles(int64_t len, int tile) { return ((__int128)len + tile - 1) / tile; }

/* The lists' dims as docs/abi.md defines them, [batch, list_heads,
 * row_tiles, list_len], for an info whose orientation, list_heads and
 * tiles are valid and sizes >= 0. */
static void model_dims(const fa_kernel_info *k, int64_t b, int64_t sq, int64_t sk,
                       __int128 d[4]) {
  int cols = k->blocks == FA_BLOCKS_COLS;
  __int128 tq = tiles(sq, k->tile_q), tk = tiles(sk, k->tile_kv);
  d[0] = b, d[1] = k->list_heads, d[2] = cols ? tk : tq, d[3] = (cols ? tq : tk) + 1;
}

/* Whether fa_block_lists_shape must refuse the info or sizes as invalid
 * (the header: a negative size, no orientation, list_heads or tiles < 1). */
static int shape_invalid(const fa_kernel_info *k, int64_t b, int64_t sq, int64_t sk) {
  return (k->blocks != FA_BLOCKS_ROWS && k->blocks != FA_BLOCKS_COLS) || k->list_heads < 1 ||
         k->tile_q < 1 || k->tile_kv < 1 || b < 0 || sq < 0 || sk < 0;
}

/* Whether the lists fit: batch x list_heads x row_tiles x list_len int32
 * within INT32_MAX (the header), and, a rule the header leaves implicit
 * (fa_block_lists holds them in int64), every dim and stride within int64
 * (with batch 0 the elements are 0 whatever the others; list_len is 2^63
 * for INT64_MAX keys in tiles of 1). */
static int shape_fits(const __int128 d[4]) {
  __int128 s0 = mulc(mulc(d[1], d[2]), d[3]);
  return d[3] <= INT64_MAX && s0 <= INT64_MAX && mulc(d[0], s0) <= INT32_MAX;
}

/* An fa_block_lists_shape answer for valid arguments that fit: the
 * documented dims, contiguous strides, count [batch, list_heads,
 * row_tiles] contiguous, no kernel and no addresses. */
static void check_shape(const fa_kernel_info *k, int64_t b, int64_t sq, int64_t sk,
                        const fa_block_lists *l) {
  __int128 d[4];
  model_dims(k, b, sq, sk, d);
  FUZZ_CHECK(l->kernel == -1 && !l->list && !l->count);
  __int128 s = 1;
  for (int i = 3; i >= 0; i--) {
    FUZZ_CHECK(l->list_dim[i] == d[i] && l->list_stride[i] == s);
    s *= d[i]; /* <= 2^100 x 2^63: no wrap in 128 bits */
  }
  FUZZ_CHECK(s <= INT32_MAX); /* elements; their bytes fit in an int64 and a size_t */
  s = 1;
  for (int i = 2; i >= 0; i--) {
    FUZZ_CHECK(l->count_dim[i] == d[i] && l->count_stride[i] == s);
    s *= d[i];
  }
}

/* fa_block_lists_shape of any info and sizes: refused as the header says,
 * else the model's shape. Returns its status; *l the shape. */
static fa_status shape_oracle(const fa_kernel_info *k, int64_t b, int64_t sq, int64_t sk,
                              fa_block_lists *l) {
  fa_status st = fa_block_lists_shape(k, b, sq, sk, l);
  if (shape_invalid(k, b, sq, sk)) {
    FUZZ_CHECK(st == FA_ERR_INVALID_ARGUMENT);
    return st;
  }
  __int128 d[4];
  model_dims(k, b, sq, sk, d);
  FUZZ_CHECK(st == (shape_fits(d) ? FA_OK : FA_ERR_TOO_LARGE));
  if (st == FA_OK)
    check_shape(k, b, sq, sk, l);
  return st;
}

/* fa_classifier_grid of any info and sizes. Not a classifier (mode blocks
 * with grid row_tiles, or row_tiles*chunks and chunk >= 1): refused. Else
 * as fa_block_lists_shape when that refuses. Else, a rule the header
 * states for fa_forward_grid and leaves implicit here: the documented grid
 * (x row_tiles or row_tiles * ceil(steps / chunk), y list_heads, z batch)
 * exactly, each dim within the CUDA limits (x <= 2^31-1, y and z <=
 * 65535), or FA_ERR_TOO_LARGE; never a dim cut to 32 bits. Returns its
 * status. */
static fa_status grid_oracle(const fa_kernel_info *k, int64_t b, int64_t sq, int64_t sk) {
  unsigned g[3];
  fa_status st = fa_classifier_grid(k, b, sq, sk, g);
  int chunks = k->grid == FA_GRID_ROW_CHUNKS;
  if (k->mode != FA_MODE_BLOCKS || (k->grid != FA_GRID_ROW_TILES && (!chunks || k->chunk < 1))) {
    FUZZ_CHECK(st == FA_ERR_INVALID_ARGUMENT);
    return st;
  }
  fa_block_lists l;
  fa_status sst = fa_block_lists_shape(k, b, sq, sk, &l);
  if (sst != FA_OK) {
    FUZZ_CHECK(st == sst);
    return st;
  }
  __int128 d[4];
  model_dims(k, b, sq, sk, d);
  __int128 x = chunks ? d[2] * ((d[3] - 1 + k->chunk - 1) / k->chunk) : d[2];
  int fits = x <= MAX_GRID_X && d[1] <= MAX_GRID_YZ && d[0] <= MAX_GRID_YZ;
  if (st != (fits ? FA_OK : FA_ERR_TOO_LARGE))
    fprintf(stderr, "fa_classifier_grid: status %d for grid %lld x %lld x %lld\n", (int)st,
            (long long)x, (long long)d[1], (long long)d[0]);
  FUZZ_CHECK(st == (fits ? FA_OK : FA_ERR_TOO_LARGE));
  if (st == FA_OK)
    FUZZ_CHECK(g[0] == x && g[1] == d[1] && g[2] == d[0]);
  return st;
}

/* ---------------------------------------------------- kernels that visit lists */

/* The last 9 parameters of a kernel that visits lists (after the inputs'
 * groups): blk_list (ptr, 4 i64 strides) and blk_count (ptr, 3 i64
 * strides) of `l`; nowhere else for any kernel (none without lists). */
static void check_list_params(const fa_param *p, int n, const fa_block_lists *l) {
  int visits = l != NULL, at = -1;
  for (int i = 0; i < n; i++)
    if (strncmp(p[i].name, "blk_", 4) == 0 && at < 0)
      at = i;
  if (!visits) {
    FUZZ_CHECK(at < 0);
    return;
  }
  static const char *const names[9] = {"blk_list",     "blk_list.s0",  "blk_list.s1",
                                       "blk_list.s2",  "blk_list.s3",  "blk_count",
                                       "blk_count.s0", "blk_count.s1", "blk_count.s2"};
  int64_t want[9] = {(int64_t)(uintptr_t)l->list,  l->list_stride[0],  l->list_stride[1],
                     l->list_stride[2],            l->list_stride[3],  (int64_t)(uintptr_t)l->count,
                     l->count_stride[0],           l->count_stride[1], l->count_stride[2]};
  FUZZ_CHECK(at == n - 9);
  for (int i = 0; i < 9; i++)
    FUZZ_CHECK(strcmp(p[at + i].name, names[i]) == 0 && p[at + i].value == want[i] &&
               p[at + i].kind == (i == 0 || i == 5 ? FA_PARAM_PTR : FA_PARAM_I64));
}

/* What an accepted launch that computes something promises of the lists
 * kernel `k` visits (k->block_list; a role that visits cols when `cols`):
 * block lists are never with layout varlen; the classifier's orientation
 * is the one the role visits and its list_heads 1 or heads (fa_kernel_info:
 * "1 when the mask does not read h, else heads", 1..65535); tiles >= 1;
 * the lists at the launch's sizes fit (fa_block_lists_shape, the model's);
 * the parameter list p[0..n) (NULL: not checked) ends with their groups, at
 * address 0 without args.blocks. A kernel that visits none takes none. */
void check_visit(const fa_kernel_info *k, int cols, Sizes s, const fa_param *p, int n) {
  if (!k->block_list[0]) {
    if (p)
      check_list_params(p, n, NULL);
    return;
  }
  FUZZ_CHECK(!k->varlen);
  FUZZ_CHECK(k->blocks == (cols ? FA_BLOCKS_COLS : FA_BLOCKS_ROWS));
  FUZZ_CHECK(k->list_heads == 1 || k->list_heads == k->heads);
  FUZZ_CHECK(k->list_heads >= 1 && k->list_heads <= MAX_GRID_YZ);
  fa_block_lists l;
  FUZZ_CHECK(shape_oracle(k, s.batch, s.sq, s.sk, &l) == FA_OK);
  if (p)
    check_list_params(p, n, &l);
}

/* A backward plan's step of kernel k (kernels[0..nk)) at sizes s: it visits
 * lists exactly when k does, those of k's classifier (its index, no
 * address without args.blocks) and fa_block_lists_shape's for k. */
void check_step_lists(const fa_kernel_info *kernels, int nk, const fa_backward_step *p,
                      Sizes s) {
  const fa_kernel_info *k = &kernels[p->kernel];
  FUZZ_CHECK(p->block_list == (k->block_list[0] != 0));
  if (!p->block_list)
    return;
  FUZZ_CHECK(p->lists.kernel >= 0 && p->lists.kernel < nk);
  const fa_kernel_info *c = &kernels[p->lists.kernel];
  FUZZ_CHECK(c->mode == FA_MODE_BLOCKS && strcmp(c->kernel, k->block_list) == 0);
  fa_block_lists l = p->lists;
  l.kernel = -1;
  check_shape(k, s.batch, s.sq, s.sk, &l);
}

/* Whether the lists every kernel k[0..nk) visits fit at sizes s: a
 * backward kernel's (other tiles, another orientation) may not where the
 * checked kernel's do, and then the plan refuses the launch. */
int lists_fit(const fa_kernel_info *k, int nk, Sizes s) {
  for (int i = 0; i < nk; i++) {
    __int128 d[4];
    if (!k[i].block_list[0] || shape_invalid(&k[i], s.batch, s.sq, s.sk))
      continue;
    model_dims(&k[i], s.batch, s.sq, s.sk, d);
    if (!shape_fits(d))
      return 0;
  }
  return 1;
}

/* A kernel info's block-list keys: those of a kernel visiting lists with
 * orientation `cols` (the classifier "kb" a module would have: the role's
 * orientation, list_heads 1 or heads); sometimes every key raw (no
 * orientation, list_heads 0, 3 or 2^31-1, the kernel itself, tile_kv 0,
 * layout varlen: a hand-built info must be refused, not trusted); or the
 * info made a classifier (mode blocks), which fa_forward_check and
 * fa_backward_check refuse. */
void make_visit(FuzzIn *in, fa_kernel_info *info, int cols) {
  uint8_t f = fuzz_u8(in);
  strcpy(info->block_list, "kb");
  info->blocks = cols ? FA_BLOCKS_COLS : FA_BLOCKS_ROWS;
  info->list_heads = f & 0x10 ? info->heads : 1;
  if (f % 16 == 1) { /* a classifier */
    info->mode = FA_MODE_BLOCKS;
    info->role = FA_ROLE_NONE;
    info->grid = FA_GRID_ROW_TILES;
    info->block_list[0] = '\0';
    strcpy(info->forward, "f");
  } else if (f % 4 == 0) { /* raw */
    uint8_t r = fuzz_u8(in);
    if (r & 1)
      info->blocks = (fa_blocks_orient)(fuzz_u8(in) % 4);
    if (r & 2)
      info->list_heads = pick32(in);
    if (r & 4)
      info->tile_kv = pick32(in);
    if (r & 8)
      info->varlen = 1;
    if (r & 0x10)
      snprintf(info->block_list, sizeof info->block_list, "%s", r & 0x20 ? info->kernel : "");
  }
}

/* The lists of the backward kernels k[1..5] (backward_kernels) of a
 * forward info that visits lists, as a module has them: the forward visits
 * rows; the roles main and kv cols, q rows, each with a classifier of its
 * own tiles appended at k[n..]; pre and post none (metadata refuses them
 * there). Returns the kernel count. */
int add_classifiers(const fa_kernel_info *info, fa_kernel_info *k, int n) {
  if (!info->block_list[0])
    return n;
  k[0].blocks = FA_BLOCKS_ROWS;
  for (int i = 1; i < 6; i++) {
    fa_kernel_info *x = &k[i];
    int cols = x->role == FA_ROLE_MAIN || x->role == FA_ROLE_KV;
    if (!cols && x->role != FA_ROLE_Q) {
      x->block_list[0] = '\0', x->blocks = FA_BLOCKS_NONE, x->list_heads = 0;
      continue;
    }
    x->blocks = cols ? FA_BLOCKS_COLS : FA_BLOCKS_ROWS;
    snprintf(x->block_list, sizeof x->block_list, "%s_cls", x->kernel);
    fa_kernel_info *c = &k[n++];
    *c = *x;
    strcpy(c->kernel, x->block_list);
    strcpy(c->forward, k[0].kernel);
    c->mode = FA_MODE_BLOCKS, c->role = FA_ROLE_NONE, c->grid = FA_GRID_ROW_TILES;
    c->block_list[0] = '\0';
  }
  return n;
}

/* ------------------------------------------- classifiers and the host-only API */

/* A size for the block-list entry points: the edge cases, one that makes
 * len + tile - 1 overflow, or a whole number of tiles (or one past). */
static int64_t pick_size(FuzzIn *in, int tile) {
  int64_t t = tile > 0 ? tile : 1;
  switch (fuzz_u8(in) % 12) {
  case 0: return 0;
  case 1: return 1;
  case 2: return -1 - fuzz_u8(in);
  case 3: return INT32_MAX;
  case 4: return (int64_t)INT32_MAX + 1;
  case 5: return INT64_MAX - fuzz_u8(in);
  case 6: return INT64_MIN;
  case 7: return 65535 + fuzz_u8(in) % 3;
  case 8: return t * (int64_t)(1 + fuzz_bytes(in, 3)) + fuzz_u8(in) % 2;
  case 9: case 10: return fuzz_u8(in);
  default: return pick64(in);
  }
}

/* A classifier kernel's keys on `info` (from make_info): sane (mode
 * blocks, rows or cols, list_heads 1 or heads, grid row_tiles, or a
 * classes kernel's row_tiles*chunks with a chunk), or raw. */
static void make_classifier(FuzzIn *in, fa_kernel_info *info) {
  uint8_t f = fuzz_u8(in);
  info->mode = FA_MODE_BLOCKS;
  strcpy(info->forward, "f");
  info->blocks = f & 1 ? FA_BLOCKS_COLS : FA_BLOCKS_ROWS;
  info->list_heads = f & 2 ? info->heads : 1;
  info->grid = FA_GRID_ROW_TILES;
  if (f & 4) {
    info->grid = FA_GRID_ROW_CHUNKS;
    info->chunk = 1 + fuzz_u8(in) % 16;
  }
  if (f % 64 >= 8)
    return;
  uint8_t r = fuzz_u8(in); /* raw */
  if (r & 1)
    info->mode = (fa_mode)(fuzz_u8(in) % 5);
  if (r & 2)
    info->blocks = (fa_blocks_orient)pick32(in);
  if (r & 4)
    info->list_heads = pick32(in);
  if (r & 8)
    info->grid = (fa_grid)(fuzz_u8(in) % 7);
  if (r & 0x10)
    info->chunk = pick32(in);
  if (r & 0x20)
    info->smem_bytes = pick32(in);
  if (r & 0x40)
    info->tile_q = pick32(in), info->tile_kv = pick32(in);
}

/* What an accepted classifier launch promises (fa_blocks_check): a
 * classifier's keys in range; sizes in 0..INT32_MAX, batch a grid z; the
 * lists fit (fa_block_lists_shape); when it launches something (batch and
 * row_tiles not 0) its grid (fa_classifier_grid; fa_blocks_create
 * launches on it unchecked) fits the CUDA limits and its bound inputs
 * stay below 2^62 bytes within the address space; fa_blocks_params gives
 * i32 values in range, the sizes first and the lists' groups last. */
static void blocks_accepted(const fa_kernel_info *k, const fa_blocks_args *a) {
  FUZZ_CHECK(k->mode == FA_MODE_BLOCKS && k->smem_bytes >= 0);
  FUZZ_CHECK(k->blocks == FA_BLOCKS_ROWS || k->blocks == FA_BLOCKS_COLS);
  FUZZ_CHECK(k->list_heads >= 1 && k->list_heads <= MAX_GRID_YZ);
  FUZZ_CHECK(k->tile_q >= 1 && k->tile_kv >= 1 && k->threads >= 1 && k->threads <= 1024);
  FUZZ_CHECK(a->batch >= 0 && a->batch <= MAX_GRID_YZ);
  FUZZ_CHECK(a->seqlen_q >= 0 && a->seqlen_q <= INT32_MAX);
  FUZZ_CHECK(a->seqlen_k >= 0 && a->seqlen_k <= INT32_MAX);
  fa_block_lists l;
  FUZZ_CHECK(shape_oracle(k, a->batch, a->seqlen_q, a->seqlen_k, &l) == FA_OK);
  if (a->batch > 0 && l.list_dim[2] > 0) {
    if (grid_oracle(k, a->batch, a->seqlen_q, a->seqlen_k) != FA_OK)
      fprintf(stderr, "fa_blocks_check accepted a classifier of grid %d, chunk %d that "
              "fa_classifier_grid refuses\n", (int)k->grid, k->chunk);
    FUZZ_CHECK(grid_oracle(k, a->batch, a->seqlen_q, a->seqlen_k) == FA_OK);
    if (a->inputs)
      check_inputs("fa_blocks_check", k, a->inputs, a->num_inputs, NULL, 0);
  }
  l.list = (void *)(uintptr_t)0x1d000000000, l.count = (void *)(uintptr_t)0x1d100000000;
  fa_param p[FA_BACKWARD_MAX_PARAMS];
  int n = -1;
  FUZZ_CHECK(fa_blocks_params(k, a, &l, p, &n) == FA_OK);
  FUZZ_CHECK(n >= 12 && n <= FA_BACKWARD_MAX_PARAMS);
  static const char *const size_names[3] = {"batch", "seqlen_q", "seqlen_k"};
  int64_t sizes[3] = {a->batch, a->seqlen_q, a->seqlen_k};
  for (int i = 0; i < 3; i++)
    FUZZ_CHECK(strcmp(p[i].name, size_names[i]) == 0 && p[i].kind == FA_PARAM_I32 &&
               p[i].value == sizes[i]);
  for (int i = 0; i < n; i++)
    FUZZ_CHECK(p[i].kind != FA_PARAM_I32 || (p[i].value >= INT32_MIN && p[i].value <= INT32_MAX));
  check_list_params(p, n, &l);
}

/* The host-only block-list entry points on a classifier (sane or raw) and
 * sizes at the edges: fa_block_lists_shape, fa_classifier_grid, then
 * fa_blocks_check with run-time inputs bound as a forward launch's. */
void blocks_api(FuzzIn *in) {
  fa_kernel_info info;
  make_info(in, &info, KIND_FORWARD);
  make_classifier(in, &info);
  int64_t b = pick_size(in, 1), sq = pick_size(in, info.tile_q), sk = pick_size(in, info.tile_kv);
  fa_block_lists l;
  shape_oracle(&info, b, sq, sk, &l);
  grid_oracle(&info, b, sq, sk);
  fa_input binds[FA_MAX_INPUTS + 2];
  char names[FA_MAX_INPUTS + 2][8];
  fa_blocks_args a;
  memset(&a, 0, sizeof a);
  a.batch = b, a.seqlen_q = sq, a.seqlen_k = sk;
  a.num_inputs = make_bindings(in, &info, b, sq, sk, binds, names);
  a.inputs = fuzz_u8(in) % 17 == 0 ? NULL : binds;
  char msg[256];
  size_t msglen = pick_msglen(in, sizeof msg);
  fa_status st = fa_blocks_check(&info, &a, msg, msglen);
  check_status(st, msg, msglen);
  FUZZ_CHECK(fa_blocks_check(&info, &a, NULL, 0) == st);
  if (st == FA_OK)
    blocks_accepted(&info, &a);
}
