/* meta.c - the metadata parser: `// flashc.meta KEY VALUE` lines to fa_kernel_info.
 *
 * Strict on purpose: a value that does not parse, is out of range, or a key
 * given twice is an error (but input and require, one line each), because a
 * wrong number here becomes a wrong launch. Unknown keys are ignored so that
 * a newer compiler can add keys. The keys input, require and layout, and
 * their rules within a block and across a module, are meta_inputs.c's; the
 * rules of block lists are meta_blocks.c's (meta_internal.h: the keys and
 * the parser's state they share).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta_internal.h"

void fa_fmt(char *buf, size_t len, const char *fmt, ...) {
  if (!buf || len == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}

size_t fa_dtype_size(fa_dtype dtype) {
  switch (dtype) {
  case FA_DTYPE_F16: return 2;
  case FA_DTYPE_BF16: return 2;
  case FA_DTYPE_F32: return 4;
  case FA_DTYPE_I32: return 4;
  }
  return 0;
}

const char *fa_role_name(fa_role role) {
  static const char *const names[FA_ROLE_COUNT_] = {"none", "pre", "main", "kv", "q", "post",
                                                               "dv"};
  return (int)role >= 0 && role < FA_ROLE_COUNT_ ? names[role] : "?";
}

const char *fa_dtype_name(fa_dtype dtype) {
  switch (dtype) {
  case FA_DTYPE_F16: return "f16";
  case FA_DTYPE_BF16: return "bf16";
  case FA_DTYPE_F32: return "f32";
  case FA_DTYPE_I32: return "i32";
  }
  return "?";
}

/* The decode keys, a range of the enum (meta_internal.h). */
#define FIRST_DECODE_KEY K_CACHE
#define LAST_DECODE_KEY K_WIDE_SMEM

const char *const fa_meta_key_names_[K_COUNT] = {
  "version", "kernel", "mode", "dtype", "head_dim", "v_head_dim", "heads", "kv_heads",
  "mask", "scale", "tile_q", "tile_kv", "warps", "stages", "threads", "smem_bytes", "grid",
  "workspace_floats_per_row", "target", "passes",
  "cache", "page_size", "split", "q_len_max", "combine_kernel", "combine_threads", "unified_max",
  "combine_pdl", "combine_fused", "wide_kernel", "wide_tile_kv", "wide_threads",
  "wide_smem_bytes", "role", "forward", "dropout", "dropout_of", "dropout_mask", "layout",
  "blocks", "block_list", "chunk", "classes", "input", "require", "tma", "gather_of",
  "long_rows_of", "long_rows_min", "backward_auto",
};

static const int required_keys[] = {K_VERSION, K_KERNEL, K_DTYPE, K_HEAD_DIM, K_HEADS,
                                    K_KV_HEADS, K_TILE_Q, K_THREADS, K_SMEM, K_GRID};

/* Parses a decimal integer in [lo, hi]; the whole value must be the number. */
static fa_status parse_int(Parser *p, const char *key, const char *v, long lo, long hi, int *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (end == v || *end != '\0' || errno == ERANGE || v[0] == '+' || v[0] == ' ')
    return fail(p, key, "'%s' is not an integer", v);
  if (x < lo || x > hi) {
    char msg[160];
    fa_fmt(msg, sizeof msg, "%ld is out of range [%ld, %ld]", x, lo, hi);
    return fail(p, key, "%s", msg);
  }
  *out = (int)x;
  return FA_OK;
}

static fa_status parse_name(Parser *p, const char *key, const char *v, char *dst, size_t cap,
                            int identifier) {
  size_t n = strlen(v);
  if (n == 0) return fail(p, key, "%sempty value", "");
  if (n >= cap) return fail(p, key, "'%s' is too long", v);
  if (identifier) {
    for (size_t i = 0; i < n; i++) {
      char c = v[i];
      int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' ||
               (i > 0 && c >= '0' && c <= '9');
      if (!ok) return fail(p, key, "'%s' is not a PTX identifier", v);
    }
  }
  memcpy(dst, v, n + 1);
  return FA_OK;
}

/* Maps `v` to its index in the NULL-terminated `names`, through `values`. */
static fa_status parse_enum(Parser *p, const char *key, const char *v, const char *const *names,
                            const int *values, const char *expected, int *out) {
  for (int i = 0; names[i]; i++)
    if (strcmp(v, names[i]) == 0) { *out = values[i]; return FA_OK; }
  char msg[200];
  fa_fmt(msg, sizeof msg, "'%.60s' is not one of %s", v, expected);
  return fail(p, key, "%s", msg);
}

static fa_status parse_scale(Parser *p, const char *v) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (end == v || *end != '\0' || errno == ERANGE || !(x > 0.0) || x > 1e30)
    return fail(p, "scale", "'%s' is not a positive number", v);
  p->info->scale = x;
  return FA_OK;
}

/* `blocks rows|cols N`: a classifier's orientation and list_heads. */
static fa_status parse_blocks_key(Parser *p, const char *v) {
  fa_kernel_info *in = p->info;
  const char *sp = strchr(v, ' ');
  size_t n = sp ? (size_t)(sp - v) : strlen(v);
  if (n == 4 && memcmp(v, "rows", 4) == 0) in->blocks = FA_BLOCKS_ROWS;
  else if (n == 4 && memcmp(v, "cols", 4) == 0) in->blocks = FA_BLOCKS_COLS;
  else return fail(p, "blocks", "'%.60s' is not rows|cols LIST_HEADS", v);
  if (!sp) return fail(p, "blocks", "'%.60s' is not rows|cols LIST_HEADS", v);
  while (*sp == ' ' || *sp == '\t') sp++;
  return parse_int(p, "blocks", sp, 1, 65535, &in->list_heads); /* grid y */
}

/* The decode keys: cache, page_size, split, q_len_max, combine_kernel,
 * combine_threads, unified_max, combine_pdl, combine_fused, and the
 * small-batch variant's wide_kernel, wide_tile_kv, wide_threads,
 * wide_smem_bytes. */
static fa_status set_decode_key(Parser *p, int k, const char *v) {
  fa_decode_info *d = &p->info->decode;
  const char *key = fa_meta_key_names_[k];
  int tmp = 0;
  fa_status st;
  switch (k) {
  case K_CACHE: {
    static const char *const n[] = {"contiguous", "paged", NULL};
    static const int val[] = {FA_CACHE_CONTIGUOUS, FA_CACHE_PAGED};
    st = parse_enum(p, key, v, n, val, "contiguous, paged", &tmp);
    d->cache = (fa_cache)tmp;
    return st;
  }
  case K_PAGE_SIZE:
    st = parse_int(p, key, v, 16, 256, &d->page_size);
    if (st == FA_OK && (d->page_size & (d->page_size - 1)))
      return fail(p, key, "%s is not a power of 2", v);
    return st;
  case K_SPLIT:
    if (strcmp(v, "auto") == 0) { d->split = 0; return FA_OK; }
    return parse_int(p, key, v, 1, 1024, &d->split);
  case K_Q_LEN_MAX: return parse_int(p, key, v, 1, FA_DECODE_MAX_Q_LEN, &d->q_len_max);
  case K_COMBINE:
    return parse_name(p, key, v, d->combine_kernel, sizeof d->combine_kernel, 1);
  case K_COMBINE_THREADS: return parse_int(p, key, v, 1, 1024, &d->combine_threads);
  case K_COMBINE_PDL: return parse_int(p, key, v, 0, 1, &d->combine_pdl);
  case K_COMBINE_FUSED: return parse_int(p, key, v, 0, 1 << 20, &d->combine_fused);
  case K_WIDE: return parse_name(p, key, v, d->wide_kernel, sizeof d->wide_kernel, 1);
  case K_WIDE_TILE_KV: return parse_int(p, key, v, 16, 256, &d->wide_tile_kv);
  case K_WIDE_THREADS: return parse_int(p, key, v, 1, 1024, &d->wide_threads);
  case K_WIDE_SMEM: return parse_int(p, key, v, 0, 232448, &d->wide_smem_bytes);
  case K_UNIFIED_MAX: {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end != '\0' || errno == ERANGE || !(x > -1e4 && x < 1e4))
      return fail(p, key, "'%s' is not a number in (-1e4, 1e4)", v);
    d->unified_max = x;
    d->has_unified_max = 1;
    return FA_OK;
  }
  }
  return FA_OK;
}

static fa_status set_key(Parser *p, int k, const char *v) {
  fa_kernel_info *in = p->info;
  const char *key = fa_meta_key_names_[k];
  int tmp = 0;
  fa_status st = FA_OK;
  switch (k) {
  case K_VERSION:
    st = parse_int(p, key, v, 0, INT_MAX, &in->version);
    if (st == FA_OK && in->version != FA_META_VERSION)
      return fail(p, key, "version %s is not supported (this runtime reads version 1)", v);
    return st;
  case K_KERNEL: return parse_name(p, key, v, in->kernel, sizeof in->kernel, 1);
  case K_MODE: {
    static const char *const n[] = {"forward", "backward", "decode", "blocks", NULL};
    static const int val[] = {FA_MODE_FORWARD, FA_MODE_BACKWARD, FA_MODE_DECODE, FA_MODE_BLOCKS};
    st = parse_enum(p, key, v, n, val, "forward, backward, decode, blocks", &tmp);
    in->mode = (fa_mode)tmp;
    return st;
  }
  case K_DTYPE: {
    static const char *const n[] = {"bf16", "f16", "fp16", NULL};
    static const int val[] = {FA_DTYPE_BF16, FA_DTYPE_F16, FA_DTYPE_F16};
    st = parse_enum(p, key, v, n, val, "bf16, f16", &tmp);
    in->dtype = (fa_dtype)tmp;
    return st;
  }
  case K_MASK: {
    static const char *const n[] = {"none", "causal", "window", "expr", NULL};
    static const int val[] = {FA_MASK_NONE, FA_MASK_CAUSAL, FA_MASK_WINDOW, FA_MASK_EXPR};
    st = parse_enum(p, key, v, n, val, "none, causal, window, expr", &tmp);
    in->mask = (fa_mask)tmp;
    return st;
  }
  case K_GRID: {
    static const char *const n[] = {"q_tiles,heads,batch", "1,heads,batch",
                                    "splits,kv_heads,batch", "k_tiles,kv_heads,batch",
                                    "row_tiles,list_heads,batch",
                                    "row_tiles*chunks,list_heads,batch", "persistent", NULL};
    static const int val[] = {FA_GRID_Q_TILES, FA_GRID_ONE, FA_GRID_SPLITS, FA_GRID_K_TILES,
                              FA_GRID_ROW_TILES, FA_GRID_ROW_CHUNKS, FA_GRID_PERSISTENT};
    st = parse_enum(p, key, v, n, val,
                    "q_tiles,heads,batch, 1,heads,batch, splits,kv_heads,batch, "
                    "k_tiles,kv_heads,batch, row_tiles,list_heads,batch, "
                    "row_tiles*chunks,list_heads,batch or persistent", &tmp);
    in->grid = (fa_grid)tmp;
    return st;
  }
  /* Head dims: the kernels move 16 bytes (8 elements) at a time. */
  case K_HEAD_DIM: return parse_int(p, key, v, 8, 256, &in->head_dim);
  case K_V_HEAD_DIM: return parse_int(p, key, v, 8, 256, &in->v_head_dim);
  case K_HEADS: return parse_int(p, key, v, 1, 65535, &in->heads); /* grid y */
  case K_KV_HEADS: return parse_int(p, key, v, 1, 65535, &in->kv_heads);
  case K_SCALE: return parse_scale(p, v);
  case K_TILE_Q: return parse_int(p, key, v, 1, 65536, &in->tile_q);
  case K_TILE_KV: return parse_int(p, key, v, 1, 65536, &in->tile_kv);
  case K_WARPS: return parse_int(p, key, v, 1, 32, &in->warps);
  case K_STAGES: return parse_int(p, key, v, 1, 64, &in->stages);
  case K_THREADS: return parse_int(p, key, v, 1, 1024, &in->threads);
  /* 227 KiB: the largest opt-in dynamic shared memory of any current GPU. */
  case K_SMEM: return parse_int(p, key, v, 0, 232448, &in->smem_bytes);
  case K_WORKSPACE: return parse_int(p, key, v, 0, 1 << 20, &in->workspace_floats_per_row);
  case K_TARGET: return parse_name(p, key, v, in->target, sizeof in->target, 0);
  case K_PASSES: return parse_name(p, key, v, in->passes, sizeof in->passes, 0);
  case K_ROLE: {
    static const char *const n[] = {"pre", "main", "kv", "q", "post", "dv", NULL};
    static const int val[] = {FA_ROLE_PRE, FA_ROLE_MAIN, FA_ROLE_KV, FA_ROLE_Q, FA_ROLE_POST,
                              FA_ROLE_DV};
    st = parse_enum(p, key, v, n, val, "pre, main, kv, q, post, dv", &tmp);
    in->role = (fa_role)tmp;
    return st;
  }
  case K_FORWARD: return parse_name(p, key, v, in->forward, sizeof in->forward, 1);
  case K_DROPOUT: {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end != '\0' || errno == ERANGE || !(x > 0 && x < 1))
      return fail(p, key, "'%s' is not a probability in (0, 1)", v);
    in->dropout = x;
    return FA_OK;
  }
  case K_DROPOUT_OF: return parse_name(p, key, v, in->dropout_of, sizeof in->dropout_of, 1);
  case K_GATHER_OF: return parse_name(p, key, v, in->gather_of, sizeof in->gather_of, 1);
  case K_LONG_ROWS_OF: return parse_name(p, key, v, in->long_rows_of, sizeof in->long_rows_of, 1);
  case K_LONG_ROWS_MIN: return parse_int(p, key, v, 1, 1 << 30, &in->long_rows_min);
  case K_BLOCKS: return parse_blocks_key(p, v);
  case K_BLOCK_LIST: return parse_name(p, key, v, in->block_list, sizeof in->block_list, 1);
  case K_CHUNK: return parse_int(p, key, v, 1, 65536, &in->chunk);
  case K_CLASSES: return parse_name(p, key, v, in->classes, sizeof in->classes, 1);
  case K_BACKWARD_AUTO: {
    static const char *const n[] = {"deterministic", "atomic", NULL};
    static const int val[] = {1, 2}; /* fa_backward_mode's values */
    return parse_enum(p, key, v, n, val, "deterministic, atomic", &in->backward_auto);
  }
  case K_DROPOUT_MASK: {
    static const char *const n[] = {"exact", "torch", NULL};
    static const int val[] = {0, 1};
    return parse_enum(p, key, v, n, val, "exact, torch", &in->dropout_torch);
  }
  default: return set_decode_key(p, k, v);
  }
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Splits one line [s, e) into its key (*k, -1 for a line that is not ours
 * or a key this runtime does not know) and its value. */
static fa_status split_line(Parser *p, const char *s, const char *e, int *k, char *val,
                            size_t cap) {
  *k = -1;
  while (s < e && is_space(*s)) s++;
  while (e > s && is_space(e[-1])) e--;
  if (e - s >= 2 && s[0] == '/' && s[1] == '/') {
    s += 2;
    while (s < e && is_space(*s)) s++;
  }
  static const char tag[] = "flashc.meta";
  size_t tl = sizeof tag - 1;
  if ((size_t)(e - s) < tl || memcmp(s, tag, tl) != 0) return FA_OK;
  s += tl;
  if (s < e && !is_space(*s)) return FA_OK; /* e.g. "flashc.metadata": not ours */
  while (s < e && is_space(*s)) s++;
  const char *ks = s;
  while (s < e && !is_space(*s)) s++;
  char key[64];
  size_t kl = (size_t)(s - ks);
  while (s < e && is_space(*s)) s++;
  size_t vl = (size_t)(e - s);
  if (kl == 0) return fail(p, "(none)", "%smetadata line without a key", "");
  if (kl >= sizeof key) return FA_OK; /* unknown (too long to be ours) */
  memcpy(key, ks, kl);
  key[kl] = '\0';
  int i = 0;
  while (i < K_COUNT && strcmp(fa_meta_key_names_[i], key) != 0) i++;
  if (i == K_COUNT) return FA_OK; /* unknown keys are ignored */
  if (vl >= cap) return fail(p, key, "%svalue too long", "");
  memcpy(val, s, vl);
  val[vl] = '\0';
  if (memchr(val, '\0', vl)) return fail(p, key, "%svalue holds a NUL byte", "");
  *k = i;
  return FA_OK;
}

/* `tma q|k|v|in_NAME|dq_acc ROWS`, one line per tensor map in parameter
 * order: the kernel's last parameters are CUtensorMaps of Q, K, V,
 * run-time input NAME (declared by an `input` line, 2-byte floats, rank 2
 * to 4: checked with the inputs), each box 64 columns by ROWS rows, or of
 * the backward's dq_acc (f32, boxes of 32 columns by ROWS rows); ROWS
 * 1..256 (docs/abi.md, "Tensor maps"). */
static fa_status take_tma(Parser *p, const char *val) {
  fa_kernel_info *in = p->info;
  const char *sp = strchr(val, ' ');
  size_t len = sp ? (size_t)(sp - val) : 0;
  int input = len > 3 && strncmp(val, "in_", 3) == 0 && len - 3 < FA_INPUT_NAME_MAX;
  int acc = len == 6 && strncmp(val, "dq_acc", 6) == 0;
  if (!sp || (!input && !acc && (len != 1 || (val[0] != 'q' && val[0] != 'k' && val[0] != 'v'))))
    return fail(p, "tma", "'%.60s' is not `q ROWS`, `k ROWS`, `v ROWS`, `in_NAME ROWS` or "
                "`dq_acc ROWS`", val);
  int r = 0;
  fa_status st = parse_int(p, "tma", sp + 1, 1, 256, &r);
  if (st) return st;
  fa_tmap_info t;
  memset(&t, 0, sizeof t);
  t.tensor = input ? 'i' : acc ? 'a' : val[0];
  t.rows = r;
  if (input) memcpy(t.input, val + 3, len - 3);
  for (int i = 0; i < in->ntmaps; i++)
    if (in->tmaps[i].tensor == t.tensor && strcmp(in->tmaps[i].input, t.input) == 0) {
      char name[FA_INPUT_NAME_MAX + 4];
      fa_fmt(name, sizeof name, "%.*s", (int)len, val);
      return fail(p, "tma", "a second map of %s", name);
    }
  if (in->ntmaps == FA_MAX_TMAPS) return fail(p, "tma", "more than %s maps", "4");
  in->tmaps[in->ntmaps++] = t;
  return FA_OK;
}

/* Every input map names a declared input of 2-byte floats and rank 2..4. */
static fa_status check_input_maps(Parser *p) {
  fa_kernel_info *in = p->info;
  for (int i = 0; i < in->ntmaps; i++) {
    if (in->tmaps[i].tensor != 'i') continue;
    const fa_input_info *x = NULL;
    for (int j = 0; j < in->ninputs; j++)
      if (strcmp(in->inputs[j].name, in->tmaps[i].input) == 0) x = &in->inputs[j];
    if (!x || x->rank < 2 || (x->dtype != FA_DTYPE_BF16 && x->dtype != FA_DTYPE_F16)) {
      char what[160];
      fa_fmt(what, sizeof what, "the map of in_%s needs a declared bf16 or f16 input of rank "
             "2 to 4", in->tmaps[i].input);
      return fail_key(p, K_TMA, "%s", what);
    }
  }
  return FA_OK;
}

static fa_status take_key(Parser *p, int k, const char *val) {
  int repeats = k == K_INPUT || k == K_REQUIRE || k == K_TMA;
  if ((p->seen & (1ull << k)) && !repeats)
    return fail(p, fa_meta_key_names_[k], "%sgiven twice", "");
  if (!(p->seen & (1ull << k))) p->lines.key[k] = p->line;
  p->seen |= 1ull << k;
  fa_meta_lines *run = &p->lines.run;
  if (k == K_INPUT) return fa_meta_take_input_(p->info, run, p->line, val, p->err, p->errlen);
  if (k == K_REQUIRE)
    return fa_meta_take_require_(p->info, run, p->line, val, p->err, p->errlen);
  if (k == K_LAYOUT) return fa_meta_take_layout_(p->info, run, p->line, val, p->err, p->errlen);
  if (k == K_TMA) return take_tma(p, val);
  if (k == K_KERNEL) run->kernel = p->line;
  return set_key(p, k, val);
}

/* Decode keys belong to decode kernels, and a decode kernel's launch
 * depends on them: a paged cache needs its page size, a split count other
 * than 1 a combine kernel, and the grid must be the decode one. */
static fa_status check_decode_keys(Parser *p) {
  fa_kernel_info *in = p->info;
  fa_decode_info *d = &in->decode;
  if (in->mode != FA_MODE_DECODE) {
    for (int k = FIRST_DECODE_KEY; k <= LAST_DECODE_KEY; k++)
      if (seen(p, k)) {
        fa_fmt(p->err, p->errlen, "%s: key '%s' is only valid with mode decode", p->where,
               fa_meta_key_names_[k]);
        return FA_ERR_META;
      }
    if (in->grid != FA_GRID_SPLITS) return FA_OK;
    fa_fmt(p->err, p->errlen, "%s: grid splits,kv_heads,batch is only valid with mode decode",
           p->where);
    return FA_ERR_META;
  }
  if (in->grid != FA_GRID_SPLITS) {
    fa_fmt(p->err, p->errlen, "%s: a decode kernel's grid must be splits,kv_heads,batch",
           p->where);
    return FA_ERR_META;
  }
  if (!seen(p, K_Q_LEN_MAX)) d->q_len_max = FA_DECODE_MAX_Q_LEN;
  if (!seen(p, K_COMBINE_THREADS)) d->combine_threads = 128;
  if ((d->cache == FA_CACHE_PAGED) != seen(p, K_PAGE_SIZE)) {
    fa_fmt(p->err, p->errlen, "%s: page_size %s", p->where,
           d->cache == FA_CACHE_PAGED ? "is required with cache paged"
                                      : "is only valid with cache paged");
    return FA_ERR_META;
  }
  if (d->split != 1 && !d->combine_kernel[0]) {
    fa_fmt(p->err, p->errlen, "%s: combine_kernel is required unless split is 1", p->where);
    return FA_ERR_META;
  }
  int wide = seen(p, K_WIDE) + seen(p, K_WIDE_TILE_KV) + seen(p, K_WIDE_THREADS) +
             seen(p, K_WIDE_SMEM);
  if (wide != 0 && wide != 4) {
    fa_fmt(p->err, p->errlen,
           "%s: wide_kernel, wide_tile_kv, wide_threads and wide_smem_bytes go together",
           p->where);
    return FA_ERR_META;
  }
  if (wide && !d->combine_kernel[0]) {
    fa_fmt(p->err, p->errlen, "%s: wide_kernel needs a combine kernel (split is not 1)",
           p->where);
    return FA_ERR_META;
  }
  return FA_OK;
}

/* The backward keys (docs/backward.md): role and forward belong to mode
 * backward and it needs both; the K/V-outer roles (main, kv, dv) run on grid
 * k_tiles,kv_heads,batch, which needs tile_kv, the others on
 * q_tiles,heads,batch; a backward kernel's workspace is the backward's
 * (fa_backward_workspace_size), not workspace_floats_per_row. */
static fa_status check_backward_keys(Parser *p) {
  fa_kernel_info *in = p->info;
  if (in->mode != FA_MODE_BACKWARD) {
    if (seen(p, K_ROLE)) return fail_key(p, K_ROLE, "%sonly valid with mode backward", "");
    if (seen(p, K_FORWARD) && in->mode != FA_MODE_BLOCKS)
      return fail_key(p, K_FORWARD, "%sonly valid with mode backward or blocks", "");
    if (in->grid == FA_GRID_K_TILES)
      return fail_key(p, K_GRID, "k_tiles,kv_heads,batch is only valid with mode backward "
                      "(roles main, kv and dv), not with mode %s", mode_name(in->mode));
    return FA_OK;
  }
  if (!seen(p, K_ROLE))
    return fail_key(p, K_MODE, "%smode backward needs the key role (pre, main, kv, q, post or dv)",
                    "");
  if (!seen(p, K_FORWARD))
    return fail_key(p, K_MODE, "%smode backward needs the key forward (the forward kernel's "
                    "name)", "");
  if (strcmp(in->forward, in->kernel) == 0)
    return fail_key(p, K_FORWARD, "'%s' is this kernel itself, not its forward kernel",
                    in->forward);
  int kv_outer = in->role == FA_ROLE_MAIN || in->role == FA_ROLE_KV || in->role == FA_ROLE_DV;
  char msg[160];
  if (in->grid != (kv_outer ? FA_GRID_K_TILES : FA_GRID_Q_TILES)) {
    fa_fmt(msg, sizeof msg, "a backward kernel of role %s runs on grid %s", fa_role_name(in->role),
           kv_outer ? "k_tiles,kv_heads,batch" : "q_tiles,heads,batch");
    return fail_key(p, K_GRID, "%s", msg);
  }
  if (kv_outer && !seen(p, K_TILE_KV))
    return fail_key(p, K_GRID, "%sk_tiles,kv_heads,batch needs the key tile_kv (keys per block)",
                    "");
  if (in->workspace_floats_per_row)
    return fail_key(p, K_WORKSPACE, "%smust be 0 for a backward kernel (its workspace is the "
                    "backward's: fa_backward_workspace_size)", "");
  return FA_OK;
}

/* The dropout keys (docs/dropout.md): `dropout` marks a kernel that takes
 * dropout's six launch parameters: the forward with dropout, which names
 * its plain forward kernel (dropout_of), and the backward kernels that
 * recompute P (not pre and post); `dropout_mask torch`, on every kernel of
 * such a spec, says which keep decision; decode kernels have none. */
static fa_status check_dropout_keys(Parser *p) {
  fa_kernel_info *in = p->info;
  if (seen(p, K_DROPOUT_OF)) {
    if (in->mode != FA_MODE_FORWARD)
      return fail_key(p, K_DROPOUT_OF, "%sonly valid with mode forward", "");
    if (!seen(p, K_DROPOUT))
      return fail_key(p, K_DROPOUT_OF, "%sneeds the key dropout (the kernel's default p)", "");
    if (strcmp(in->dropout_of, in->kernel) == 0)
      return fail_key(p, K_DROPOUT_OF, "'%s' is this kernel itself, not its plain forward",
                      in->dropout_of);
  }
  if (seen(p, K_DROPOUT_MASK) && in->mode == FA_MODE_DECODE)
    return fail_key(p, K_DROPOUT_MASK, "%sis not valid with mode decode", "");
  if (!seen(p, K_DROPOUT)) return FA_OK;
  if (in->mode == FA_MODE_DECODE || in->mode == FA_MODE_BLOCKS)
    return fail_key(p, K_DROPOUT, "is not valid with mode %s", mode_name(in->mode));
  if (in->mode == FA_MODE_FORWARD && !seen(p, K_DROPOUT_OF))
    return fail_key(p, K_DROPOUT, "%sa forward kernel with dropout needs the key dropout_of "
                    "(its plain forward kernel)", "");
  if (in->mode == FA_MODE_BACKWARD && (in->role == FA_ROLE_PRE || in->role == FA_ROLE_POST))
    return fail_key(p, K_DROPOUT, "%snot valid for the backward roles pre and post", "");
  return FA_OK;
}

/* Cross-key rules, checked once every line of the block is read. */
static fa_status check_complete(Parser *p) {
  fa_kernel_info *in = p->info;
  p->line = 0;
  for (size_t i = 0; i < sizeof required_keys / sizeof required_keys[0]; i++) {
    int k = required_keys[i];
    if (!(p->seen & (1ull << k))) {
      fa_fmt(p->err, p->errlen, "%s: required key '%s' is missing", p->where,
             fa_meta_key_names_[k]);
      return FA_ERR_META;
    }
  }
  if (!(p->seen & (1ull << K_V_HEAD_DIM))) in->v_head_dim = in->head_dim;
  if (in->head_dim % 8 || in->v_head_dim % 8) {
    fa_fmt(p->err, p->errlen,
           "%s: head_dim %d / v_head_dim %d must be multiples of 8 (16-byte loads)", p->where,
           in->head_dim, in->v_head_dim);
    return FA_ERR_META;
  }
  if (in->kv_heads > in->heads || in->heads % in->kv_heads) {
    fa_fmt(p->err, p->errlen, "%s: kv_heads %d does not divide heads %d", p->where,
           in->kv_heads, in->heads);
    return FA_ERR_META;
  }
  fa_status st = check_decode_keys(p);
  if (!st) st = check_backward_keys(p);
  if (!st) st = fa_meta_check_blocks_keys_(p);
  if (!st) st = fa_meta_check_inputs_(in, &p->lines.run, p->err, p->errlen);
  if (!st) st = check_dropout_keys(p);
  /* fa_forward builds the maps of a padded batch's Q, K, V and inputs;
   * fa_backward the atomic main kernel's dq_acc map (its workspace) and a
   * padded batch's input maps (stage-inputs' backward kernels) */
  for (int i = 0; !st && i < in->ntmaps; i++) {
    char t = in->tmaps[i].tensor;
    if (t == 'a' && (in->mode != FA_MODE_BACKWARD || in->role != FA_ROLE_MAIN))
      return fail_key(p, K_TMA, "%sdq_acc is only valid with mode backward and role main", "");
    if (t == 'i' && ((in->mode != FA_MODE_FORWARD && in->mode != FA_MODE_BACKWARD) || in->varlen))
      return fail_key(p, K_TMA, "%sin_NAME is only valid with mode forward or backward and a "
                      "padded batch", "");
    if (t != 'a' && t != 'i' && (in->mode != FA_MODE_FORWARD || in->varlen))
      return fail_key(p, K_TMA, "%sonly valid with mode forward and a padded batch", "");
  }
  if (!st) st = check_input_maps(p);
  if (!st && in->backward_auto && in->mode != FA_MODE_FORWARD && in->mode != FA_MODE_BACKWARD)
    return fail_key(p, K_BACKWARD_AUTO, "%sonly valid with mode forward or backward", "");
  /* a long-rows variant: both keys, a padded forward without dropout,
   * block lists or a gathered copy's key */
  if (!st && (in->long_rows_of[0] != 0) != (in->long_rows_min != 0))
    return fail_key(p, in->long_rows_of[0] ? K_LONG_ROWS_OF : K_LONG_ROWS_MIN,
                    "%sneeds the other of long_rows_of and long_rows_min", "");
  if (!st && in->long_rows_of[0] &&
      (in->mode != FA_MODE_FORWARD || in->varlen || in->dropout_of[0] || in->block_list[0] ||
       in->gather_of[0]))
    return fail_key(p, K_LONG_ROWS_OF, "%sonly valid with mode forward, a padded batch, no "
                    "dropout, no block list and no gather_of", "");
  /* a persistent kernel decodes its tiles from its walk, not from the
   * block: no varlen sequence, no block list (passes/persistent.c) */
  if (!st && in->grid == FA_GRID_PERSISTENT &&
      (in->mode != FA_MODE_FORWARD || in->varlen || in->block_list[0]))
    return fail_key(p, K_GRID, "%spersistent is only valid with mode forward, a padded batch "
                    "and no block list", "");
  return st ? st : fa_meta_check_layout_(in, &p->lines.run, p->err, p->errlen);
}

/* ---- a module's blocks together ------------------------------------------- */

/* Backward kernel b against `ref` (its forward kernel, or the first
 * backward kernel of the same forward): the same attention. */
fa_status fa_meta_same_attention_(Module *m, int b, int ref) {
  const fa_kernel_info *x = &m->k[b], *y = &m->k[ref];
  const char *of, *base;
  fa_meta_agreement_(x, &of, &base);
  struct { int key; int differs; char have[40], want[40]; } f[6] = {
    {K_DTYPE, x->dtype != y->dtype, "", ""},
    {K_HEAD_DIM, x->head_dim != y->head_dim, "", ""},
    {K_V_HEAD_DIM, x->v_head_dim != y->v_head_dim, "", ""},
    {K_HEADS, x->heads != y->heads, "", ""},
    {K_KV_HEADS, x->kv_heads != y->kv_heads, "", ""},
    {K_MASK, x->mask != y->mask, "", ""},
  };
  static const char *const masks[] = {"none", "causal", "window", "expr"};
  for (int i = 0; i < 6; i++) {
    if (!f[i].differs) continue;
    int key = f[i].key;
    if (key == K_DTYPE) {
      fa_fmt(f[i].have, sizeof f[i].have, "%s", fa_dtype_name(x->dtype));
      fa_fmt(f[i].want, sizeof f[i].want, "%s", fa_dtype_name(y->dtype));
    } else if (key == K_MASK) {
      fa_fmt(f[i].have, sizeof f[i].have, "%s", masks[x->mask & 3]);
      fa_fmt(f[i].want, sizeof f[i].want, "%s", masks[y->mask & 3]);
    } else {
      const int *vx = key == K_HEAD_DIM ? &x->head_dim : key == K_V_HEAD_DIM ? &x->v_head_dim
                      : key == K_HEADS ? &x->heads : &x->kv_heads;
      const int *vy = key == K_HEAD_DIM ? &y->head_dim : key == K_V_HEAD_DIM ? &y->v_head_dim
                      : key == K_HEADS ? &y->heads : &y->kv_heads;
      fa_fmt(f[i].have, sizeof f[i].have, "%d", *vx);
      fa_fmt(f[i].want, sizeof f[i].want, "%d", *vy);
    }
    char what[400];
    fa_fmt(what, sizeof what, "%s but kernel %s (line %d) says %s: %s %s must be "
           "compiled from the same attention", f[i].have, y->kernel, m->line[ref].key[K_KERNEL],
           f[i].want, of, base);
    return module_fail(m, b, key, what);
  }
  fa_status st = fa_meta_same_layout_(x, &m->line[b].run, y, &m->line[ref].run, m->err,
                                      m->errlen);
  if (st != FA_OK) return st;
  if (x->scale > 0 && y->scale > 0 && x->scale != y->scale) {
    char what[400];
    fa_fmt(what, sizeof what, "%.9g but kernel %s (line %d) says %.9g: %s %s must "
           "be compiled from the same attention", x->scale, y->kernel, m->line[ref].key[K_KERNEL],
           y->scale, of, base);
    return module_fail(m, b, K_SCALE, what);
  }
  return FA_OK;
}

/* Kernel names differ; a backward kernel's forward kernel, when the module
 * holds it, is a forward kernel of the same attention and run-time inputs;
 * backward kernels of one forward agree with each other and have distinct
 * roles; NAME_dropout agrees with its plain forward kernel. */
static fa_status check_module(Module *m) {
  char what[400];
  for (int b = 0; b < m->n; b++) {
    const fa_kernel_info *x = &m->k[b];
    int other = find_kernel(m, x->kernel);
    if (other != b) {
      fa_fmt(what, sizeof what, "'%s' is already the kernel of line %d", x->kernel,
             m->line[other].key[K_KERNEL]);
      return module_fail(m, b, K_KERNEL, what);
    }
    fa_status bst = fa_meta_check_block_lists_(m, b);
    if (bst != FA_OK) return bst;
    if (x->dropout_of[0]) {
      int plain = find_kernel(m, x->dropout_of);
      if (plain >= 0 && (m->k[plain].mode != FA_MODE_FORWARD || m->k[plain].dropout_of[0])) {
        fa_fmt(what, sizeof what, "'%s' (line %d) is not a plain forward kernel", x->dropout_of,
               m->line[plain].key[K_KERNEL]);
        return module_fail(m, b, K_DROPOUT_OF, what);
      }
      fa_status st;
      if (plain >= 0 &&
          ((st = fa_meta_same_attention_(m, b, plain)) || (st = same_inputs(m, b, plain))))
        return st;
    }
    /* A copy of a plain forward kernel (gather_of, long_rows_of): launched
     * instead of it, so the same attention and inputs. A backward kernel's
     * gathered copy: of a backward kernel of its role and forward. */
    const char *copy_of = x->gather_of[0] ? x->gather_of : x->long_rows_of;
    if (copy_of[0] && x->mode == FA_MODE_BACKWARD && x->gather_of[0]) {
      int of = find_kernel(m, copy_of);
      if (of < 0 || m->k[of].mode != FA_MODE_BACKWARD || m->k[of].gather_of[0] ||
          m->k[of].role != x->role || strcmp(m->k[of].forward, x->forward) != 0) {
        fa_fmt(what, sizeof what, "'%s' is not a backward kernel of role %s of %s in this module",
               copy_of, fa_role_name(x->role), x->forward);
        return module_fail(m, b, K_GATHER_OF, what);
      }
      fa_status st;
      if ((st = fa_meta_same_attention_(m, b, of)) || (st = same_inputs(m, b, of)))
        return st;
      continue;
    }
    if (copy_of[0]) {
      int plain = find_kernel(m, copy_of);
      int key = x->gather_of[0] ? K_GATHER_OF : K_LONG_ROWS_OF;
      if (plain < 0 || m->k[plain].mode != FA_MODE_FORWARD || m->k[plain].dropout_of[0] ||
          m->k[plain].gather_of[0] || m->k[plain].long_rows_of[0] ||
          x->mode != FA_MODE_FORWARD) {
        fa_fmt(what, sizeof what, "'%s' is not a plain forward kernel of this module", copy_of);
        return module_fail(m, b, key, what);
      }
      fa_status st;
      if ((st = fa_meta_same_attention_(m, b, plain)) || (st = same_inputs(m, b, plain)))
        return st;
    }
    if (x->mode != FA_MODE_BACKWARD) continue;
    int fwd = find_kernel(m, x->forward), ref = fwd;
    if (fwd >= 0 && m->k[fwd].mode != FA_MODE_FORWARD) {
      fa_fmt(what, sizeof what, "'%s' (line %d) is a %s kernel, not a forward kernel",
             x->forward, m->line[fwd].key[K_KERNEL],
             m->k[fwd].mode == FA_MODE_DECODE ? "decode" : "backward");
      return module_fail(m, b, K_FORWARD, what);
    }
    for (int s = 0; s < b; s++) {
      const fa_kernel_info *y = &m->k[s];
      if (y->mode != FA_MODE_BACKWARD || strcmp(y->forward, x->forward) != 0 || y->gather_of[0])
        continue;
      if (ref < 0) ref = s;
      if (y->role == x->role) {
        fa_fmt(what, sizeof what, "kernel %s (line %d) is already the %s kernel of %s",
               y->kernel, m->line[s].key[K_KERNEL], fa_role_name(x->role), x->forward);
        return module_fail(m, b, K_ROLE, what);
      }
    }
    fa_status st;
    if (ref >= 0 && ((st = fa_meta_same_attention_(m, b, ref)) || (st = same_inputs(m, b, ref))))
      return st;
  }
  return FA_OK;
}

/* Every block of text into m (each begins with its version line). */
static fa_status parse_blocks(const char *text, size_t len, Module *m) {
  Parser p;
  memset(&p, 0, sizeof p);
  p.info = &m->k[0];
  p.err = m->err, p.errlen = m->errlen;
  memset(p.info, 0, sizeof *p.info);
  fa_fmt(p.where, sizeof p.where, "metadata");
  const char *s = text, *end = text + len;
  int lineno = 0;
  while (s < end) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *e = nl ? nl : end;
    char val[1024];
    int k;
    p.line = ++lineno;
    fa_status st = split_line(&p, s, e, &k, val, sizeof val);
    if (st != FA_OK) return st;
    s = nl ? nl + 1 : end;
    if (k < 0) continue;
    if (k == K_VERSION && seen(&p, K_VERSION)) { /* the next kernel's block */
      if ((st = check_complete(&p))) return st;
      m->line[p.block] = p.lines;
      if (++p.block == FA_MODULE_MAX_KERNELS) {
        fa_fmt(m->err, m->errlen, "metadata line %d: version: a module holds at most %d "
               "kernels", lineno, FA_MODULE_MAX_KERNELS);
        return FA_ERR_META;
      }
      p.info = &m->k[p.block];
      memset(p.info, 0, sizeof *p.info);
      p.seen = 0;
      memset(&p.lines, 0, sizeof p.lines);
      fa_fmt(p.where, sizeof p.where, "metadata block %d (line %d)", p.block + 1, lineno);
      p.line = lineno;
    }
    if ((st = take_key(&p, k, val))) return st;
  }
  if (p.seen == 0 && p.block == 0) {
    fa_fmt(m->err, m->errlen,
           "metadata: no '// flashc.meta' lines found (is this a flashc kernel?)");
    return FA_ERR_META;
  }
  fa_status st = check_complete(&p);
  if (st != FA_OK) return st;
  m->line[p.block] = p.lines;
  m->n = p.block + 1;
  return check_module(m);
}

static fa_status parse_module(const char *text, size_t len, fa_kernel_info *out, int *count,
                              char *err, size_t errlen, const char *fn) {
  fa_fmt(err, errlen, "%s", "");
  if (!out || (!text && len)) {
    fa_fmt(err, errlen, "%s: %s is NULL", fn, out ? "text" : "out");
    return FA_ERR_NULL_POINTER;
  }
  /* About 40 KB: on the stack, so that parsing cannot fail for memory. */
  Lines lines[FA_MODULE_MAX_KERNELS];
  fa_kernel_info k[FA_MODULE_MAX_KERNELS];
  Module m = {k, lines, 0, err, errlen};
  fa_status st = parse_blocks(text ? text : "", len, &m);
  if (st == FA_OK) {
    if (count) {
      memcpy(out, k, (size_t)m.n * sizeof *k);
      *count = m.n;
    } else {
      *out = k[0];
    }
  }
  return st;
}

fa_status fa_meta_parse(const char *text, size_t len, fa_kernel_info *out, char *err,
                        size_t errlen) {
  return parse_module(text, len, out, NULL, err, errlen, "fa_meta_parse");
}

fa_status fa_meta_parse_module(const char *text, size_t len, fa_kernel_info *out, int *count,
                               char *err, size_t errlen) {
  if (count) *count = 0;
  if (!count) {
    fa_fmt(err, errlen, "fa_meta_parse_module: count is NULL");
    return FA_ERR_NULL_POINTER;
  }
  return parse_module(text, len, out, count, err, errlen, "fa_meta_parse_module");
}
