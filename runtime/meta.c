/* meta.c - the metadata parser: `// flashc.meta KEY VALUE` lines to fa_kernel_info.
 *
 * Strict on purpose: a value that does not parse, is out of range, or a key
 * given twice is an error, because a wrong number here becomes a wrong
 * launch. Unknown keys are ignored so that a newer compiler can add keys.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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
  }
  return 0;
}

const char *fa_dtype_name(fa_dtype dtype) {
  switch (dtype) {
  case FA_DTYPE_F16: return "f16";
  case FA_DTYPE_BF16: return "bf16";
  case FA_DTYPE_F32: return "f32";
  }
  return "?";
}

/* The keys the parser knows; the bit of each in the `seen` mask. */
enum {
  K_VERSION, K_KERNEL, K_MODE, K_DTYPE, K_HEAD_DIM, K_V_HEAD_DIM, K_HEADS, K_KV_HEADS,
  K_MASK, K_SCALE, K_TILE_Q, K_TILE_KV, K_WARPS, K_STAGES, K_THREADS, K_SMEM, K_GRID,
  K_WORKSPACE, K_TARGET, K_PASSES,
  /* decode keys (docs/decode.md); refused for other modes */
  K_CACHE, K_PAGE_SIZE, K_SPLIT, K_Q_LEN_MAX, K_COMBINE, K_COMBINE_THREADS, K_UNIFIED_MAX,
  K_COMBINE_PDL, K_COMBINE_FUSED, K_WIDE, K_WIDE_TILE_KV, K_WIDE_THREADS, K_WIDE_SMEM, K_COUNT
};
#define FIRST_DECODE_KEY K_CACHE

static const char *const key_names[K_COUNT] = {
  "version", "kernel", "mode", "dtype", "head_dim", "v_head_dim", "heads", "kv_heads",
  "mask", "scale", "tile_q", "tile_kv", "warps", "stages", "threads", "smem_bytes", "grid",
  "workspace_floats_per_row", "target", "passes",
  "cache", "page_size", "split", "q_len_max", "combine_kernel", "combine_threads", "unified_max",
  "combine_pdl", "combine_fused", "wide_kernel", "wide_tile_kv", "wide_threads",
  "wide_smem_bytes",
};

static const int required_keys[] = {K_VERSION, K_KERNEL, K_DTYPE, K_HEAD_DIM, K_HEADS,
                                    K_KV_HEADS, K_TILE_Q, K_THREADS, K_SMEM, K_GRID};

typedef struct Parser {
  fa_kernel_info *info;
  uint64_t seen;  /* bit per key */
  int line;       /* 1-based line of the current key */
  char *err;
  size_t errlen;
} Parser;

static fa_status fail(Parser *p, const char *key, const char *fmt, const char *value) {
  char what[256];
  fa_fmt(what, sizeof what, fmt, value);
  fa_fmt(p->err, p->errlen, "metadata line %d: %s: %s", p->line, key, what);
  return FA_ERR_META;
}

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

/* The decode keys: cache, page_size, split, q_len_max, combine_kernel,
 * combine_threads, unified_max, combine_pdl, combine_fused, and the
 * small-batch variant's wide_kernel, wide_tile_kv, wide_threads,
 * wide_smem_bytes. */
static fa_status set_decode_key(Parser *p, int k, const char *v) {
  fa_decode_info *d = &p->info->decode;
  const char *key = key_names[k];
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
  const char *key = key_names[k];
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
    static const char *const n[] = {"forward", "backward", "decode", NULL};
    static const int val[] = {FA_MODE_FORWARD, FA_MODE_BACKWARD, FA_MODE_DECODE};
    st = parse_enum(p, key, v, n, val, "forward, backward, decode", &tmp);
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
                                    "splits,kv_heads,batch", NULL};
    static const int val[] = {FA_GRID_Q_TILES, FA_GRID_ONE, FA_GRID_SPLITS};
    st = parse_enum(p, key, v, n, val,
                    "q_tiles,heads,batch, 1,heads,batch or splits,kv_heads,batch", &tmp);
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
  default: return set_decode_key(p, k, v);
  }
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Handles one line [s, e). Returns FA_OK for lines that are not metadata. */
static fa_status parse_line(Parser *p, const char *s, const char *e) {
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
  char key[64], val[1024];
  size_t kl = (size_t)(s - ks);
  while (s < e && is_space(*s)) s++;
  size_t vl = (size_t)(e - s);
  if (kl == 0) return fail(p, "(none)", "%smetadata line without a key", "");
  if (kl >= sizeof key) return FA_OK; /* unknown (too long to be ours) */
  memcpy(key, ks, kl);
  key[kl] = '\0';
  int k = 0;
  while (k < K_COUNT && strcmp(key_names[k], key) != 0) k++;
  if (k == K_COUNT) return FA_OK; /* unknown keys are ignored */
  if (vl >= sizeof val) return fail(p, key, "%svalue too long", "");
  memcpy(val, s, vl);
  val[vl] = '\0';
  if (memchr(val, '\0', vl)) return fail(p, key, "%svalue holds a NUL byte", "");
  if (p->seen & (1ull << k)) return fail(p, key, "%sgiven twice", "");
  p->seen |= 1ull << k;
  return set_key(p, k, val);
}

static int seen(const Parser *p, int k) { return (int)((p->seen >> k) & 1u); }

/* Decode keys belong to decode kernels, and a decode kernel's launch
 * depends on them: a paged cache needs its page size, a split count other
 * than 1 a combine kernel, and the grid must be the decode one. */
static fa_status check_decode_keys(Parser *p) {
  fa_kernel_info *in = p->info;
  fa_decode_info *d = &in->decode;
  if (in->mode != FA_MODE_DECODE) {
    for (int k = FIRST_DECODE_KEY; k < K_COUNT; k++)
      if (seen(p, k)) {
        fa_fmt(p->err, p->errlen, "metadata: key '%s' is only valid with mode decode",
               key_names[k]);
        return FA_ERR_META;
      }
    if (in->grid != FA_GRID_SPLITS) return FA_OK;
    fa_fmt(p->err, p->errlen, "metadata: grid splits,kv_heads,batch is only valid with mode decode");
    return FA_ERR_META;
  }
  if (in->grid != FA_GRID_SPLITS) {
    fa_fmt(p->err, p->errlen, "metadata: a decode kernel's grid must be splits,kv_heads,batch");
    return FA_ERR_META;
  }
  if (!seen(p, K_Q_LEN_MAX)) d->q_len_max = FA_DECODE_MAX_Q_LEN;
  if (!seen(p, K_COMBINE_THREADS)) d->combine_threads = 128;
  if ((d->cache == FA_CACHE_PAGED) != seen(p, K_PAGE_SIZE)) {
    fa_fmt(p->err, p->errlen, "metadata: page_size %s",
           d->cache == FA_CACHE_PAGED ? "is required with cache paged"
                                      : "is only valid with cache paged");
    return FA_ERR_META;
  }
  if (d->split != 1 && !d->combine_kernel[0]) {
    fa_fmt(p->err, p->errlen, "metadata: combine_kernel is required unless split is 1");
    return FA_ERR_META;
  }
  int wide = seen(p, K_WIDE) + seen(p, K_WIDE_TILE_KV) + seen(p, K_WIDE_THREADS) +
             seen(p, K_WIDE_SMEM);
  if (wide != 0 && wide != 4) {
    fa_fmt(p->err, p->errlen,
           "metadata: wide_kernel, wide_tile_kv, wide_threads and wide_smem_bytes go together");
    return FA_ERR_META;
  }
  if (wide && !d->combine_kernel[0]) {
    fa_fmt(p->err, p->errlen, "metadata: wide_kernel needs a combine kernel (split is not 1)");
    return FA_ERR_META;
  }
  return FA_OK;
}

/* Cross-key rules, checked once every line is read. */
static fa_status check_complete(Parser *p) {
  fa_kernel_info *in = p->info;
  p->line = 0;
  for (size_t i = 0; i < sizeof required_keys / sizeof required_keys[0]; i++) {
    int k = required_keys[i];
    if (!(p->seen & (1ull << k))) {
      fa_fmt(p->err, p->errlen, "metadata: required key '%s' is missing", key_names[k]);
      return FA_ERR_META;
    }
  }
  if (!(p->seen & (1ull << K_V_HEAD_DIM))) in->v_head_dim = in->head_dim;
  if (in->head_dim % 8 || in->v_head_dim % 8) {
    fa_fmt(p->err, p->errlen,
           "metadata: head_dim %d / v_head_dim %d must be multiples of 8 (16-byte loads)",
           in->head_dim, in->v_head_dim);
    return FA_ERR_META;
  }
  if (in->kv_heads > in->heads || in->heads % in->kv_heads) {
    fa_fmt(p->err, p->errlen, "metadata: kv_heads %d does not divide heads %d", in->kv_heads,
           in->heads);
    return FA_ERR_META;
  }
  return check_decode_keys(p);
}

fa_status fa_meta_parse(const char *text, size_t len, fa_kernel_info *out, char *err,
                        size_t errlen) {
  fa_fmt(err, errlen, "%s", "");
  if (!out || (!text && len)) {
    fa_fmt(err, errlen, "fa_meta_parse: %s is NULL", out ? "text" : "out");
    return FA_ERR_NULL_POINTER;
  }
  fa_kernel_info info;
  memset(&info, 0, sizeof info);
  Parser p = {&info, 0, 0, err, errlen};
  const char *s = text, *end = text + len;
  while (s < end) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *e = nl ? nl : end;
    p.line++;
    fa_status st = parse_line(&p, s, e);
    if (st != FA_OK) return st;
    s = nl ? nl + 1 : end;
  }
  if (p.seen == 0) {
    fa_fmt(err, errlen, "metadata: no '// flashc.meta' lines found (is this a flashc kernel?)");
    return FA_ERR_META;
  }
  fa_status st = check_complete(&p);
  if (st != FA_OK) return st;
  *out = info;
  return FA_OK;
}
