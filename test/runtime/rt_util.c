/* rt_util.c - the runtime lit drivers' shared helpers (rt_util.h). */
#include "rt_util.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rt_status_name(fa_status s) {
  static char buf[64];
  const char *full = fa_status_string(s);
  const char *colon = strchr(full, ':');
  size_t n = colon ? (size_t)(colon - full) : strlen(full);
  if (n >= sizeof buf) n = sizeof buf - 1;
  memcpy(buf, full, n);
  buf[n] = '\0';
  return buf;
}

int rt_report(fa_status st, const char *msg) {
  printf("status: %s\n", rt_status_name(st));
  if (msg && *msg) printf("message: %s\n", msg);
  return st == FA_OK ? 0 : 1;
}

char *rt_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (buf) *len = n;
  return buf;
}

/* Applies --drop/--set/--add edits to metadata text, line by line. */
static char *edit_meta(const char *text, size_t len, int argc, char **argv, size_t *outlen) {
  size_t cap = len + 4096;
  for (int i = 0; i < argc; i++) cap += strlen(argv[i]) + 32;
  char *out = malloc(cap);
  if (!out) return NULL;
  size_t n = 0;
  const char *s = text, *end = text + len;
  while (s < end) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *e = nl ? nl : end;
    int keep = 1;
    for (int i = 0; i < argc; i++) {
      const char *key = NULL;
      size_t kl = 0;
      if (strncmp(argv[i], "--drop=", 7) == 0) key = argv[i] + 7, kl = strlen(key);
      if (strncmp(argv[i], "--set=", 6) == 0) {
        key = argv[i] + 6;
        const char *eq = strchr(key, '=');
        kl = eq ? (size_t)(eq - key) : strlen(key);
      }
      char pat[160];
      snprintf(pat, sizeof pat, "// flashc.meta %.*s ", (int)kl, key ? key : "");
      if (key && (size_t)(e - s) > strlen(pat) && memcmp(s, pat, strlen(pat)) == 0) keep = 0;
    }
    if (keep) {
      memcpy(out + n, s, (size_t)(e - s));
      n += (size_t)(e - s);
      out[n++] = '\n';
    }
    s = nl ? nl + 1 : end;
  }
  for (int i = 0; i < argc; i++) {
    if (strncmp(argv[i], "--set=", 6) == 0) {
      const char *kv = argv[i] + 6, *eq = strchr(kv, '=');
      if (!eq) continue;
      n += (size_t)sprintf(out + n, "// flashc.meta %.*s %s\n", (int)(eq - kv), kv, eq + 1);
    } else if (strncmp(argv[i], "--add=", 6) == 0) {
      n += (size_t)sprintf(out + n, "%s\n", argv[i] + 6);
    }
  }
  *outlen = n;
  return out;
}

char *rt_load_meta_text(const char *path, int argc, char **argv, size_t *len) {
  size_t raw = 0;
  char *text = rt_read_file(path, &raw);
  if (!text) {
    fprintf(stderr, "cannot read %s\n", path);
    return NULL;
  }
  char *edited = edit_meta(text, raw, argc, argv, len);
  free(text);
  return edited;
}

long long rt_num(const char *s, const char *what) {
  char *end;
  long long v = strtoll(s, &end, 0);
  if (end == s || *end) {
    fprintf(stderr, "bad number '%s' for %s\n", s, what);
    exit(2);
  }
  return v;
}

void *rt_ptr_value(const char *s, const void *cur) {
  if (strcmp(s, "null") == 0) return NULL;
  if (s[0] == '+') return (char *)(uintptr_t)cur + rt_num(s + 1, "pointer offset");
  return (void *)(uintptr_t)strtoull(s, NULL, 0);
}

fa_dtype rt_dtype_value(const char *s) {
  if (strcmp(s, "f16") == 0) return FA_DTYPE_F16;
  if (strcmp(s, "bf16") == 0) return FA_DTYPE_BF16;
  if (strcmp(s, "f32") == 0) return FA_DTYPE_F32;
  if (strcmp(s, "i32") == 0) return FA_DTYPE_I32;
  return (fa_dtype)rt_num(s, "dtype");
}

int rt_tensor_mod(fa_tensor *const *ts, const char *const *names, int n, const char *mod) {
  const char *dot = strchr(mod, '.'), *eq = strchr(mod, '=');
  if (!dot || !eq || eq < dot) return 0;
  fa_tensor *t = NULL;
  for (int i = 0; i < n; i++)
    if (strlen(names[i]) == (size_t)(dot - mod) && strncmp(mod, names[i], (size_t)(dot - mod)) == 0)
      t = ts[i];
  if (!t) return 0;
  const char *field = dot + 1, *val = eq + 1;
  size_t fl = (size_t)(eq - field);
  if (fl == 4 && strncmp(field, "data", 4) == 0) t->data = rt_ptr_value(val, t->data);
  else if (fl == 5 && strncmp(field, "dtype", 5) == 0) t->dtype = rt_dtype_value(val);
  else if (fl == 4 && strncmp(field, "dim", 3) == 0 && field[3] >= '0' && field[3] <= '3')
    t->dim[field[3] - '0'] = rt_num(val, mod);
  else if (fl == 7 && strncmp(field, "stride", 6) == 0 && field[6] >= '0' && field[6] <= '3')
    t->stride[field[6] - '0'] = rt_num(val, mod);
  else
    return 0;
  return 1;
}

/* ---- run-time inputs ------------------------------------------------------ */

static fa_input *binding(rt_inputs *r, const char *name, size_t len) {
  for (int i = 0; i < r->n; i++)
    if (r->in[i].name && strlen(r->in[i].name) == len && strncmp(r->in[i].name, name, len) == 0)
      return &r->in[i];
  return NULL;
}

/* A new binding named `name` (copied into r), zeroed; NULL when full. */
static fa_input *add_binding(rt_inputs *r, const char *name) {
  if (r->n == RT_MAX_BINDINGS) return NULL;
  fa_input *b = &r->in[r->n];
  memset(b, 0, sizeof *b);
  snprintf(r->names[r->n], sizeof r->names[r->n], "%s", name);
  b->name = r->names[r->n++];
  return b;
}

void rt_inputs_bind(rt_inputs *r, const fa_kernel_info *info, long long batch, long long sq,
                    long long sk, unsigned long long base) {
  memset(r, 0, sizeof *r);
  for (int i = 0; i < info->ninputs && i < FA_MAX_INPUTS; i++) {
    const fa_input_info *x = &info->inputs[i];
    fa_input *b = add_binding(r, x->name);
    if (x->rank == 0) {
      b->value = x->dtype == FA_DTYPE_F32 ? 1.5 : 3;
      continue;
    }
    b->tensor.data = (void *)(uintptr_t)(base + ((unsigned long long)i << 32));
    b->tensor.dtype = x->dtype;
    for (int d = 0; d < x->rank; d++) {
      int v = x->dims[d];
      b->tensor.dim[d] = v > 0 ? v : v == FA_INPUT_DIM_BATCH ? batch
                                     : v == FA_INPUT_DIM_SEQLEN_Q ? sq : sk;
    }
    long long stride = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
      b->tensor.stride[d] = stride;
      stride *= b->tensor.dim[d];
    }
  }
}

int rt_inputs_mod(rt_inputs *r, const char *mod) {
  const char *eq = strchr(mod, '=');
  if (!eq) return 0;
  const char *val = eq + 1;
  if (strncmp(mod, "inputs=", 7) == 0) return r->null_array = 1;
  if (strncmp(mod, "num_inputs=", 11) == 0) return r->has_count = 1, r->count = (int)rt_num(val, mod), 1;
  if (strncmp(mod, "unbind=", 7) == 0) {
    fa_input *b = binding(r, val, strlen(val));
    if (!b) return 0;
    int i = (int)(b - r->in);
    memmove(&r->in[i], &r->in[i + 1], (size_t)(r->n - i - 1) * sizeof r->in[0]);
    memmove(r->names[i], r->names[i + 1], (size_t)(r->n - i - 1) * sizeof r->names[0]);
    r->n--;
    for (int j = i; j < r->n; j++) /* each name lives in its slot */
      if (r->in[j].name) r->in[j].name = r->names[j];
    return 1;
  }
  if (strncmp(mod, "bind=", 5) == 0) {
    fa_input *old = binding(r, val, strlen(val)), *b = add_binding(r, val);
    if (!b) return 0;
    if (old) {
      fa_input copy = *old;
      copy.name = b->name;
      *b = copy;
    }
    return 1;
  }
  const char *dot = strchr(mod, '.');
  fa_input *b = dot && dot < eq ? binding(r, mod, (size_t)(dot - mod)) : NULL;
  if (!b) return 0;
  if (strncmp(dot + 1, "value=", 6) == 0) return b->value = strtod(val, NULL), 1;
  if (strncmp(dot + 1, "name=", 5) == 0) return b->name = NULL, 1;
  fa_tensor *t = &b->tensor;
  const char *name = b->name;
  return rt_tensor_mod(&t, &name, 1, mod);
}

void rt_inputs_args(rt_inputs *r, const fa_input **inputs, int *num_inputs) {
  *inputs = r->null_array ? NULL : r->in;
  *num_inputs = r->has_count ? r->count : r->n;
}

static void dims_text(const fa_input_info *x, char *buf, size_t len) {
  static const char *const sizes[] = {"batch", "seqlen_q", "seqlen_k"};
  size_t n = 0;
  buf[0] = '\0';
  for (int d = 0; d < x->rank && n < len; d++) {
    int v = x->dims[d];
    if (v < 0 && v >= FA_INPUT_DIM_SEQLEN_K)
      n += (size_t)snprintf(buf + n, len - n, "%s%s", d ? "," : "", sizes[-v - 1]);
    else
      n += (size_t)snprintf(buf + n, len - n, "%s%d", d ? "," : "", v);
  }
}

void rt_print_inputs(const fa_kernel_info *in) {
  for (int i = 0; i < in->ninputs; i++) {
    char dims[128];
    dims_text(&in->inputs[i], dims, sizeof dims);
    printf("input %s %s rank %d%s%s\n", in->inputs[i].name, fa_dtype_name(in->inputs[i].dtype),
           in->inputs[i].rank, in->inputs[i].rank ? " dims " : "", dims);
  }
  if (in->require_q_le_k) printf("require seqlen_q<=seqlen_k\n");
  if (in->require_k_le_q) printf("require seqlen_k<=seqlen_q\n");
}

void rt_input_names(const fa_kernel_info *in, char *buf, size_t len) {
  size_t n = 0;
  snprintf(buf, len, "-");
  for (int i = 0; i < in->ninputs && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "", in->inputs[i].name);
}

void rt_print_params(const char *label, fa_status st, const fa_param *p, int n) {
  static const char *const kinds[] = {"ptr", "i32", "i64", "u32", "f32", "tmap"};
  fputs(label, stdout);
  if (st != FA_OK) printf(" %s", rt_status_name(st));
  for (int i = 0; i < n; i++) {
    if (p[i].kind == FA_PARAM_PTR) {
      printf(" %s:%s=0x%" PRIx64, kinds[p[i].kind], p[i].name, (uint64_t)p[i].value);
    } else if (p[i].kind == FA_PARAM_F32) {
      uint32_t bits = (uint32_t)p[i].value;
      float f;
      memcpy(&f, &bits, sizeof f);
      printf(" f32:%s=%.9g", p[i].name, f);
    } else
      printf(" %s:%s=%" PRId64, kinds[p[i].kind], p[i].name, p[i].value);
  }
  printf(" (%d)\n", n);
}

/* ---- variable-length batches ---------------------------------------------- */

/* "0,3,10" into v (at most RT_MAX_SEQS + 1 values); their count. */
static int parse_list(const char *s, int32_t *v, const char *what) {
  int n = 0;
  for (const char *p = s;; p++) {
    char *end;
    long long x = strtoll(p, &end, 0);
    if (end == p || n > RT_MAX_SEQS || (*end && *end != ',')) {
      fprintf(stderr, "bad list '%s' for %s (at most %d numbers, comma separated)\n", s, what,
              RT_MAX_SEQS + 1);
      exit(2);
    }
    v[n++] = (int32_t)x;
    if (!*end) return n;
    p = end;
  }
}

int rt_varlen_option(rt_varlen *r, const char *opt) {
  if (strncmp(opt, "--cu_q=", 7) == 0) return r->nq = parse_list(opt + 7, r->host_q, "--cu_q"), 1;
  if (strncmp(opt, "--cu_k=", 7) == 0) return r->nk = parse_list(opt + 7, r->host_k, "--cu_k"), 1;
  return 0;
}

int rt_varlen_on(const rt_varlen *r) { return r->nq > 0 || r->nk > 0; }

/* The longest step of cu[0..n), at least 1. */
static int64_t longest(const int32_t *cu, int n) {
  int64_t m = 1;
  for (int i = 0; i + 1 < n; i++)
    if ((int64_t)cu[i + 1] - cu[i] > m) m = (int64_t)cu[i + 1] - cu[i];
  return m;
}

void rt_varlen_finish(rt_varlen *r, unsigned long long base, long long *total_q,
                      long long *total_k) {
  if (!r->nq) r->nq = r->nk, memcpy(r->host_q, r->host_k, sizeof r->host_q);
  if (!r->nk) r->nk = r->nq, memcpy(r->host_k, r->host_q, sizeof r->host_k);
  r->v.num_seqs = r->nq - 1;
  r->v.max_seqlen_q = longest(r->host_q, r->nq);
  r->v.max_seqlen_k = longest(r->host_k, r->nk);
  r->v.cu_seqlens_q = (const int32_t *)(uintptr_t)base;
  r->v.cu_seqlens_k = (const int32_t *)(uintptr_t)(base + (1u << 20));
  r->v.host_cu_seqlens_q = r->host_q;
  r->v.host_cu_seqlens_k = r->host_k;
  *total_q = r->host_q[r->nq - 1];
  *total_k = r->host_k[r->nk - 1];
}

/* Parses "[I]=V" after a q or k: the host copy's value I. */
static int host_value(int32_t *host, const char *s) {
  char *end;
  long i = strtol(s + 1, &end, 10);
  if (s[0] != '[' || end[0] != ']' || end[1] != '=' || i < 0 || i > RT_MAX_SEQS) return 0;
  host[i] = (int32_t)rt_num(end + 2, s);
  return 1;
}

int rt_varlen_mod(rt_varlen *r, const char *mod) {
  const char *eq = strchr(mod, '=');
  if (!eq) return 0;
  const char *val = eq + 1;
  fa_varlen *v = &r->v;
  if (strncmp(mod, "varlen=", 7) == 0) return r->null = 1;
  if (strncmp(mod, "cu_q=", 5) == 0) return v->cu_seqlens_q = rt_ptr_value(val, v->cu_seqlens_q), 1;
  if (strncmp(mod, "cu_k=", 5) == 0) return v->cu_seqlens_k = rt_ptr_value(val, v->cu_seqlens_k), 1;
  if (strncmp(mod, "host_q=", 7) == 0)
    return v->host_cu_seqlens_q = rt_ptr_value(val, v->host_cu_seqlens_q), 1;
  if (strncmp(mod, "host_k=", 7) == 0)
    return v->host_cu_seqlens_k = rt_ptr_value(val, v->host_cu_seqlens_k), 1;
  if (strncmp(mod, "num_seqs=", 9) == 0) return v->num_seqs = (int)rt_num(val, mod), 1;
  if (strncmp(mod, "max_q=", 6) == 0) return v->max_seqlen_q = rt_num(val, mod), 1;
  if (strncmp(mod, "max_k=", 6) == 0) return v->max_seqlen_k = rt_num(val, mod), 1;
  if (mod[0] == 'q' && mod[1] == '[') return host_value(r->host_q, mod + 1);
  if (mod[0] == 'k' && mod[1] == '[') return host_value(r->host_k, mod + 1);
  return 0;
}

const fa_varlen *rt_varlen_args(rt_varlen *r) {
  return rt_varlen_on(r) && !r->null ? &r->v : NULL;
}

/* ---- launches through a driver (--launch) --------------------------------- */

int rt_launch_module(const char *path, fa_status (*run)(fa_module *, const void *),
                     const void *args) {
  char err[1024];
  fa_context *ctx = NULL;
  fa_status st = fa_context_create(0, &ctx, err, sizeof err);
  if (st != FA_OK) return rt_report(st, err);
  fa_module *mod = NULL;
  st = fa_module_load_ptx_file(ctx, path, &mod);
  int rc;
  if (st == FA_OK) {
    st = run(mod, args);
    printf("launch: ");
    rc = rt_report(st, st == FA_OK ? NULL : fa_module_errmsg(mod));
  } else {
    rc = rt_report(st, fa_context_errmsg(ctx));
  }
  fa_module_destroy(mod);
  fa_context_destroy(ctx);
  return rc;
}
