/* meta_inputs.c - the metadata of what a launch binds beside its tensors:
 * run-time inputs (`input NAME DTYPE [DIMS]`), launch conditions
 * (`require ...`) and the batch layout (`layout padded|varlen`); docs/abi.md,
 * "Run-time inputs" and "Variable-length batches". meta.c reads the lines
 * and hands these keys' values here: each line, the rules within one
 * kernel's block once it is read, and the rules across a module's kernels.
 * Messages have meta.c's form, "metadata line L: KEY: what".
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Where a message goes: the buffer, and the line it names. */
typedef struct Where {
  char *err;
  size_t len;
  int line;
} Where;

static fa_status fail(const Where *w, const char *key, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* "metadata line L: KEY: what" (what at most 255 characters); FA_ERR_META. */
static fa_status fail(const Where *w, const char *key, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  fa_fmt(w->err, w->len, "metadata line %d: %s: %s", w->line, key, what);
  return FA_ERR_META;
}

/* ---- one line --------------------------------------------------------------- */

void fa_input_text_(const fa_input_info *x, char *buf, size_t len) {
  static const char *const sizes[] = {"batch", "seqlen_q", "seqlen_k"};
  fa_fmt(buf, len, "%s %s", x->name, fa_dtype_name(x->dtype));
  for (int d = 0; d < x->rank && d < 4; d++) {
    size_t n = strlen(buf);
    int v = x->dims[d];
    if (v < 0 && v >= FA_INPUT_DIM_SEQLEN_K)
      fa_fmt(buf + n, len - n, "%s%s", d ? "," : " ", sizes[-v - 1]);
    else
      fa_fmt(buf + n, len - n, "%s%d", d ? "," : " ", v);
  }
}

/* A C identifier of at most FA_INPUT_NAME_MAX - 1 characters. */
static int is_c_identifier(const char *v) {
  size_t n = strlen(v);
  if (n == 0 || n >= FA_INPUT_NAME_MAX || (v[0] >= '0' && v[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = v[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (c >= '0' && c <= '9')))
      return 0;
  }
  return 1;
}

/* One dim of a tensor input: batch, seqlen_q, seqlen_k, or a positive
 * decimal integer below 2^31 (digits only: no sign, no spaces). */
static int parse_input_dim(const char *t, int *out) {
  static const char *const sizes[] = {"batch", "seqlen_q", "seqlen_k"};
  for (int i = 0; i < 3; i++)
    if (strcmp(t, sizes[i]) == 0) return *out = -1 - i, 1;
  long long x = 0;
  if (!*t) return 0;
  for (const char *c = t; *c; c++) {
    if (*c < '0' || *c > '9') return 0;
    x = x * 10 + (*c - '0');
    if (x > INT_MAX) return 0;
  }
  return x > 0 ? (*out = (int)x, 1) : 0;
}

/* DIMS of `input NAME DTYPE DIMS`: 1 to 4 dims, comma separated. */
static fa_status parse_input_dims(const Where *w, char *dims, fa_input_info *x) {
  char msg[200];
  for (char *t = dims, *comma;; t = comma + 1) {
    comma = strchr(t, ',');
    if (comma) *comma = '\0';
    if (x->rank == 4) {
      fa_fmt(msg, sizeof msg, "'%s' has more than 4 dims", x->name);
      return fail(w, "input", "%s", msg);
    }
    if (!parse_input_dim(t, &x->dims[x->rank])) {
      fa_fmt(msg, sizeof msg, "'%s': dim '%.40s' is not batch, seqlen_q, seqlen_k or a "
             "positive integer below 2^31", x->name, t);
      return fail(w, "input", "%s", msg);
    }
    x->rank++;
    if (!comma) return FA_OK;
  }
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Splits `v` at blanks into at most `max` words (in place); their count,
 * or max + 1 when there are more. */
static int split_words(char *v, char **w, int max) {
  int n = 0;
  for (char *s = v; *s;) {
    while (is_space(*s)) *s++ = '\0';
    if (!*s) break;
    if (n == max) return max + 1;
    w[n++] = s;
    while (*s && !is_space(*s)) s++;
  }
  return n;
}

/* A tensor input's or scalar's dtype by its metadata name. */
static int input_dtype(const char *v, fa_dtype *out) {
  static const char *const names[] = {"i32", "f32", "f16", "bf16"};
  static const fa_dtype vals[] = {FA_DTYPE_I32, FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};
  for (int i = 0; i < 4; i++)
    if (strcmp(v, names[i]) == 0) return *out = vals[i], 1;
  return 0;
}

fa_status fa_meta_take_input_(fa_kernel_info *in, fa_meta_lines *lines, int line,
                              const char *val, char *err, size_t len) {
  Where where = {err, len, line}, *w = &where;
  char buf[1024], *word[3];
  fa_fmt(buf, sizeof buf, "%s", val);
  int nw = split_words(buf, word, 3);
  if (nw < 2 || nw > 3) return fail(w, "input", "'%.80s' is not NAME DTYPE [DIMS]", val);
  if (!is_c_identifier(word[0]))
    return fail(w, "input", "'%.80s' is not a C identifier of at most 63 characters", word[0]);
  for (int i = 0; i < in->ninputs; i++)
    if (strcmp(in->inputs[i].name, word[0]) == 0)
      return fail(w, "input", "'%s' is already the input of line %d", word[0], lines->input[i]);
  if (in->ninputs == FA_MAX_INPUTS)
    return fail(w, "input", "a kernel takes at most 8 run-time inputs (FA_MAX_INPUTS)");
  fa_input_info x;
  memset(&x, 0, sizeof x);
  memcpy(x.name, word[0], strlen(word[0]) + 1);
  if (!input_dtype(word[1], &x.dtype))
    return fail(w, "input", "'%.60s' is not one of i32, f32, f16, bf16", word[1]);
  fa_status st;
  if (nw == 3 && (st = parse_input_dims(w, word[2], &x))) return st;
  if (x.rank == 0 && x.dtype != FA_DTYPE_F32 && x.dtype != FA_DTYPE_I32)
    return fail(w, "input", "'%s' is a scalar of dtype %s (a scalar is f32 or i32)", x.name,
                fa_dtype_name(x.dtype));
  lines->input[in->ninputs] = line;
  in->inputs[in->ninputs++] = x;
  return FA_OK;
}

fa_status fa_meta_take_require_(fa_kernel_info *in, fa_meta_lines *lines, int line,
                                const char *val, char *err, size_t len) {
  if (!lines->require) lines->require = line;
  if (strcmp(val, "seqlen_q<=seqlen_k") == 0) return in->require_q_le_k = 1, FA_OK;
  if (strcmp(val, "seqlen_k<=seqlen_q") == 0) return in->require_k_le_q = 1, FA_OK;
  Where w = {err, len, line};
  return fail(&w, "require", "'%.80s' is not seqlen_q<=seqlen_k or seqlen_k<=seqlen_q", val);
}

fa_status fa_meta_take_layout_(fa_kernel_info *in, fa_meta_lines *lines, int line,
                               const char *val, char *err, size_t len) {
  lines->layout = line;
  if (strcmp(val, "padded") == 0) return in->varlen = 0, FA_OK;
  if (strcmp(val, "varlen") == 0) return in->varlen = 1, FA_OK;
  Where w = {err, len, line};
  return fail(&w, "layout", "'%.60s' is not one of padded, varlen", val);
}

/* ---- one kernel's block ----------------------------------------------------- */

fa_status fa_meta_check_inputs_(const fa_kernel_info *in, const fa_meta_lines *lines,
                                char *err, size_t len) {
  if (in->mode != FA_MODE_DECODE) return FA_OK;
  for (int i = 0; i < in->ninputs; i++)
    for (int d = 0; d < in->inputs[i].rank; d++) {
      if (in->inputs[i].dims[d] != FA_INPUT_DIM_SEQLEN_K) continue;
      Where w = {err, len, lines->input[i]};
      return fail(&w, "input", "'%s': dim seqlen_k is not valid with mode decode (the key count "
                  "is per sequence; a decode input's dims are batch, seqlen_q = q_len or "
                  "constants)", in->inputs[i].name);
    }
  if (!lines->require) return FA_OK;
  Where w = {err, len, lines->require};
  return fail(&w, "require", "not valid with mode decode (a decode kernel has no seqlen_k to "
              "compare)");
}

fa_status fa_meta_check_layout_(const fa_kernel_info *in, const fa_meta_lines *lines,
                                char *err, size_t len) {
  char why[200];
  int input = fa_varlen_meta_conflict_(in, why, sizeof why);
  if (input == -2) return FA_OK;
  Where w = {err, len, input == -1 ? lines->layout : lines->input[input]};
  return fail(&w, input == -1 ? "layout" : "input", "%s", why);
}

/* ---- a module's kernels ----------------------------------------------------- */

void fa_meta_agreement_(const fa_kernel_info *x, const char **of, const char **base) {
  *of = x->mode == FA_MODE_BLOCKS ? "the block lists of"
        : x->forward[0]           ? "the backward of"
                                  : "the dropout kernel of";
  *base = x->forward[0] ? x->forward : x->dropout_of;
}

static int same_input(const fa_input_info *x, const fa_input_info *y) {
  if (strcmp(x->name, y->name) != 0 || x->dtype != y->dtype || x->rank != y->rank) return 0;
  for (int d = 0; d < x->rank; d++)
    if (x->dims[d] != y->dims[d]) return 0;
  return 1;
}

/* Run-time input i of kernel k as its metadata line says it, quoted; or
 * "no input N" past its inputs. */
static void quote_input(const fa_kernel_info *k, int i, char *buf, size_t len) {
  char text[160];
  if (i >= k->ninputs) {
    fa_fmt(buf, len, "no input %d", i + 1);
    return;
  }
  fa_input_text_(&k->inputs[i], text, sizeof text);
  fa_fmt(buf, len, "'%s'", text);
}

static const char *requires_text(const fa_kernel_info *k) {
  return k->require_q_le_k && k->require_k_le_q ? "seqlen_q<=seqlen_k and seqlen_k<=seqlen_q"
         : k->require_q_le_k                    ? "seqlen_q<=seqlen_k"
         : k->require_k_le_q                    ? "seqlen_k<=seqlen_q"
                                                : "none";
}

fa_status fa_meta_same_inputs_(const fa_kernel_info *x, const fa_meta_lines *xl,
                               const fa_kernel_info *ref, const fa_meta_lines *refl, char *err,
                               size_t len) {
  const char *of, *base;
  fa_meta_agreement_(x, &of, &base);
  char have[200], want[200];
  int n = x->ninputs > ref->ninputs ? x->ninputs : ref->ninputs;
  for (int i = 0; i < n; i++) {
    if (i < x->ninputs && i < ref->ninputs && same_input(&x->inputs[i], &ref->inputs[i]))
      continue;
    quote_input(x, i, have, sizeof have);
    quote_input(ref, i, want, sizeof want);
    int line = i < x->ninputs ? xl->input[i] : xl->kernel;
    int ref_line = i < ref->ninputs ? refl->input[i] : refl->kernel;
    fa_fmt(err, len, "metadata line %d: input: %s but kernel %s (line %d) says %s: %s %s must "
           "declare the same run-time inputs, in the same order", line, have, ref->kernel,
           ref_line, want, of, base);
    return FA_ERR_META;
  }
  if (x->require_q_le_k == ref->require_q_le_k && x->require_k_le_q == ref->require_k_le_q)
    return FA_OK;
  fa_fmt(err, len, "metadata line %d: require: %s but kernel %s (line %d) requires %s: %s %s "
         "must have the same requires", xl->require ? xl->require : xl->kernel,
         requires_text(x), ref->kernel, refl->kernel, requires_text(ref), of, base);
  return FA_ERR_META;
}

fa_status fa_meta_same_layout_(const fa_kernel_info *x, const fa_meta_lines *xl,
                               const fa_kernel_info *ref, const fa_meta_lines *refl, char *err,
                               size_t len) {
  if (!x->varlen == !ref->varlen) return FA_OK;
  const char *of, *base;
  fa_meta_agreement_(x, &of, &base);
  char what[400];
  fa_fmt(what, sizeof what, "%s but kernel %s (line %d) says %s: %s %s must be compiled from "
         "the same attention", x->varlen ? "varlen" : "padded", ref->kernel, refl->kernel,
         ref->varlen ? "varlen" : "padded", of, base);
  fa_fmt(err, len, "metadata line %d: layout: %s", xl->layout ? xl->layout : xl->kernel, what);
  return FA_ERR_META;
}
