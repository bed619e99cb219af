/* interp_tile - runs the kernels of a tile IR file in the interpreter on the
 * same random inputs and compares their outputs.
 *
 *   interp_tile [--batch B] [--seqlen-q N] [--seqlen-k N] [--nctas N] [--seed S]
 *               [--exact] [--no-verify] FILE
 *
 * Every kernel of FILE is parsed (and verified unless --no-verify), then run
 * with the index arguments batch, seqlen_q and seqlen_k bound to the sizes
 * (default 2, 37, 45). Its tensor arguments are bound by name, the same
 * buffers for every kernel: %o and %lse are outputs (NaN-poisoned before
 * each kernel), the others inputs of random values in [-1, 1) rounded to
 * their element type. The symbolic extents batch, seqlen_q and seqlen_k are
 * the sizes, the others must be numbers.
 *
 * Prints one line per kernel: `@name: ok` and, for each output of the
 * kernels after the first, `@name: <out>: max |diff| to @first = X (N NaN)`,
 * or `@name: FAIL <the interpreter's error>`. With a kernel attribute
 * `mask = causal` or `mask = none` and outputs %o (and %lse) of the usual
 * layouts (docs/tile-ir.md), also `@name: <out>: max |err| to the reference
 * = X`: float64 softmax attention on the same inputs (its causal mask
 * top-left aligned: key k is seen by query q when k <= q). --exact runs the
 * interpreter without rounding (casts, loads and stores exact), so that
 * the reference is met to rounding error.
 *
 * Exit status: 0 when every kernel ran, 1 when one failed, 2 on bad usage
 * or input.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/interp.h"
#include "ir/ir.h"

enum { MAX_BUFS = 16 };

typedef struct Buf {
  const char *name;
  double *data;
  int64_t dims[4], strides[4];
  int rank;
  size_t n;
  bool output;
} Buf;

typedef struct Run {
  InterpSizes sz;
  InterpOptions o;
  uint64_t seed;
  Buf bufs[MAX_BUFS];
  int nbufs;
} Run;

static uint64_t next_random(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static bool is_output(const char *name) { return strcmp(name, "o") == 0 || strcmp(name, "lse") == 0; }

static int64_t resolve_dim(const Run *r, int d) {
  switch (d) {
  case DIM_BATCH: return r->sz.batch;
  case DIM_SEQLEN_Q: return r->sz.seqlen_q;
  case DIM_SEQLEN_K: return r->sz.seqlen_k;
  default: return d > 0 ? d : -1;
  }
}

/* The buffer of tensor argument a: made (and, an input, filled) when its
 * name is first seen; NULL when its extents cannot be resolved. */
static Buf *buf_for(Run *r, const Value *a) {
  for (int i = 0; i < r->nbufs; i++)
    if (strcmp(r->bufs[i].name, a->name) == 0)
      return &r->bufs[i];
  if (r->nbufs == MAX_BUFS)
    return NULL;
  Buf *b = &r->bufs[r->nbufs];
  memset(b, 0, sizeof *b);
  b->name = a->name;
  b->rank = a->type.rank;
  b->n = 1;
  for (int d = b->rank - 1; d >= 0; d--) {
    b->dims[d] = resolve_dim(r, a->type.dims[d]);
    if (b->dims[d] < 0)
      return NULL;
    b->strides[d] = (int64_t)b->n;
    b->n *= (size_t)b->dims[d];
  }
  b->output = is_output(a->name);
  b->data = malloc(sizeof(double) * (b->n ? b->n : 1));
  if (!b->data)
    return NULL;
  for (size_t i = 0; !b->output && i < b->n; i++)
    b->data[i] = interp_round((double)(next_random(&r->seed) >> 11) * 0x1p-52 - 1, a->type.elem);
  r->nbufs++;
  return b;
}

/* Binds f's tensor arguments; false (with a message) when one cannot be. */
static bool bind_args(Run *r, const Func *f, InterpBinding *bs, int *nb) {
  *nb = 0;
  for (int i = 0; i < f->nargs; i++) {
    const Value *a = f->args[i];
    if (a->type.kind != TYPE_TENSOR)
      continue;
    Buf *b = a->name ? buf_for(r, a) : NULL;
    if (!b) {
      printf("@%s: FAIL cannot bind tensor %%%s\n", f->name, a->name ? a->name : "?");
      return false;
    }
    if (b->output)
      for (size_t k = 0; k < b->n; k++)
        b->data[k] = NAN;
    bs[(*nb)++] = (InterpBinding){b->name, b->data, {b->dims[0], b->dims[1], b->dims[2], b->dims[3]},
                                  {b->strides[0], b->strides[1], b->strides[2], b->strides[3]}};
  }
  return true;
}

static Buf *find_buf(Run *r, const char *name) {
  for (int i = 0; i < r->nbufs; i++)
    if (strcmp(r->bufs[i].name, name) == 0)
      return &r->bufs[i];
  return NULL;
}

/* Element (i0, i1, i2, i3) of b (rank 3: i3 ignored). */
static double *at(const Buf *b, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return b->data + i0 * b->strides[0] + i1 * b->strides[1] + i2 * b->strides[2] +
         (b->rank == 4 ? i3 * b->strides[3] : 0);
}

/* Row qi of head h of the reference: o (dv values) and the LSE. */
static double ref_row(const Buf *q, const Buf *k, const Buf *v, double scale, bool causal,
                      int64_t b, int64_t h, int64_t qi, double *o) {
  int64_t sk = k->dims[1], d = q->dims[3], dv = v->dims[3];
  int64_t hk = h / (q->dims[2] / k->dims[2]);
  int64_t nk = causal && qi + 1 < sk ? qi + 1 : sk;
  double m = -INFINITY, l = 0;
  double *s = malloc(sizeof(double) * (size_t)(nk ? nk : 1));
  for (int64_t j = 0; j < nk; j++) {
    double x = 0;
    for (int64_t c = 0; c < d; c++)
      x += *at(q, b, qi, h, c) * *at(k, b, j, hk, c);
    s[j] = x * scale;
    m = s[j] > m ? s[j] : m;
  }
  for (int64_t c = 0; c < dv; c++)
    o[c] = 0;
  for (int64_t j = 0; j < nk; j++) {
    double p = exp(s[j] - m);
    l += p;
    for (int64_t c = 0; c < dv; c++)
      o[c] += p * *at(v, b, j, hk, c);
  }
  for (int64_t c = 0; c < dv && l > 0; c++)
    o[c] /= l;
  free(s);
  return l > 0 ? m + log(l) : -INFINITY;
}

/* Max |error| of %o (and %lse, when bound) against the reference. */
static void check_reference(Run *r, const Func *f) {
  const char *mask = attr_str(&f->attrs, "mask", "");
  Buf *q = find_buf(r, "q"), *k = find_buf(r, "k"), *v = find_buf(r, "v"), *o = find_buf(r, "o");
  Buf *lse = find_buf(r, "lse");
  if ((strcmp(mask, "causal") != 0 && strcmp(mask, "none") != 0) || !q || !k || !v || !o ||
      q->rank != 4 || k->rank != 4 || v->rank != 4 || o->rank != 4)
    return;
  double scale = attr_float(&f->attrs, "scale", 1), eo = 0, el = 0;
  double *row = malloc(sizeof(double) * (size_t)v->dims[3]);
  for (int64_t b = 0; b < q->dims[0]; b++)
    for (int64_t h = 0; h < q->dims[2]; h++)
      for (int64_t i = 0; i < q->dims[1]; i++) {
        double l = ref_row(q, k, v, scale, strcmp(mask, "causal") == 0, b, h, i, row);
        for (int64_t c = 0; c < v->dims[3]; c++)
          eo = fmax(eo, fabs(*at(o, b, i, h, c) - row[c]));
        double got = lse ? *at(lse, b, h, i, 0) : l;
        el = fmax(el, got == l ? 0 : fabs(got - l)); /* -inf == -inf; NaN stays */
        if (isnan(got))
          el = NAN;
      }
  free(row);
  printf("@%s: o: max |err| to the reference = %.3g\n", f->name, eo);
  if (lse)
    printf("@%s: lse: max |err| to the reference = %.3g\n", f->name, el);
}

/* The outputs of the first kernel, kept to compare the others with. */
typedef struct Kept {
  const char *name;
  double *data;
  size_t n;
} Kept;

static void compare_outputs(const Run *r, const Func *f, const Func *first, Kept *kept, int nkept) {
  for (int i = 0; i < nkept; i++) {
    const Buf *b = NULL;
    for (int j = 0; j < r->nbufs; j++)
      if (strcmp(r->bufs[j].name, kept[i].name) == 0)
        b = &r->bufs[j];
    double d = 0;
    long nan = 0;
    for (size_t k = 0; b && k < b->n; k++) {
      double x = b->data[k], y = kept[i].data[k];
      nan += isnan(x);
      if (!(x == y)) /* equal infinities give no NaN difference */
        d = fmax(d, fabs(x - y));
    }
    printf("@%s: %s: max |diff| to @%s = %.3g (%ld NaN)\n", f->name, kept[i].name, first->name, d, nan);
  }
}

/* The contents of a regular file (a .tile file), or NULL. */
static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  long n = -1;
  if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (buf = malloc((size_t)n + 1)))
    *len = fread(buf, 1, (size_t)n, f);
  if (f)
    fclose(f);
  return buf;
}

/* Runs every kernel of m on r's buffers; returns the exit status. */
static int run_all(Run *r, const Module *m) {
  Kept kept[MAX_BUFS];
  int nkept = 0, rc = 0;
  for (int i = 0; i < m->nfuncs; i++) {
    const Func *f = m->funcs[i];
    InterpBinding bs[MAX_BUFS];
    int nb;
    char err[512];
    if (!bind_args(r, f, bs, &nb)) {
      rc = 1;
      continue;
    }
    if (interp_run_sizes(f, bs, nb, &r->sz, &r->o, err, sizeof err) != 0) {
      printf("@%s: FAIL %s\n", f->name, err);
      rc = 1;
      continue;
    }
    printf("@%s: ok\n", f->name);
    check_reference(r, f);
    if (i > 0) {
      compare_outputs(r, f, m->funcs[0], kept, nkept);
      continue;
    }
    for (int j = 0; j < r->nbufs; j++)
      if (r->bufs[j].output) {
        kept[nkept] = (Kept){r->bufs[j].name, malloc(sizeof(double) * (r->bufs[j].n + 1)), r->bufs[j].n};
        memcpy(kept[nkept].data, r->bufs[j].data, sizeof(double) * r->bufs[j].n);
        nkept++;
      }
  }
  for (int i = 0; i < nkept; i++)
    free(kept[i].data);
  for (int i = 0; i < r->nbufs; i++)
    free(r->bufs[i].data);
  return rc;
}

int main(int argc, char **argv) {
  Run r = {.sz = {.batch = 2, .seqlen_q = 37, .seqlen_k = 45, .nsplit = 1}, .seed = 1};
  interp_options_init(&r.o);
  bool verify = true;
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    bool more = i + 1 < argc;
    if (strcmp(argv[i], "--batch") == 0 && more)
      r.sz.batch = atoll(argv[++i]);
    else if (strcmp(argv[i], "--seqlen-q") == 0 && more)
      r.sz.seqlen_q = atoll(argv[++i]);
    else if (strcmp(argv[i], "--seqlen-k") == 0 && more)
      r.sz.seqlen_k = atoll(argv[++i]);
    else if (strcmp(argv[i], "--nctas") == 0 && more)
      r.sz.nctas = atoll(argv[++i]);
    else if (strcmp(argv[i], "--seed") == 0 && more)
      r.seed = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--exact") == 0)
      r.o.round_casts = false;
    else if (strcmp(argv[i], "--no-verify") == 0)
      verify = false;
    else if (argv[i][0] != '-' && !path)
      path = argv[i];
    else
      path = NULL, i = argc;
  }
  if (!path) {
    fprintf(stderr, "usage: interp_tile [--batch B] [--seqlen-q N] [--seqlen-k N] [--nctas N] [--seed S] "
                    "[--exact] [--no-verify] FILE\n");
    return 2;
  }
  size_t len;
  char *text = read_file(path, &len);
  if (!text) {
    perror(path);
    return 2;
  }
  Module *m = module_parse(path, text, len, stderr);
  free(text);
  if (!m || (verify && module_verify(m, "parsing", stderr) != 0)) {
    module_destroy(m);
    return 2;
  }
  int rc = run_all(&r, m);
  module_destroy(m);
  return rc;
}
