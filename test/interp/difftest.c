/* difftest.c - differential test of lowering + passes against a plain
 * reference attention, through the tile IR interpreter.
 *
 *   difftest [options] FILE.fa ...      kernels of spec files
 *   difftest --generate N [--seed S]    N random KernelSpecs
 *
 * For every kernel and every shape (batch, seqlen_q, seqlen_k) of a fixed
 * list, random inputs (seed printed) go through ref_attention and through the
 * interpreter running: the FA1 program (two symbolic tile shapes), the
 * program after each prefix of the pass pipeline, and the full pipeline with
 * each optional pass disabled. O and LSE must match the reference (max abs
 * error < 1e-5, -inf LSE exactly where the reference has it, no NaN; outputs
 * are poisoned with NaN first, so unwritten rows fail). One line per
 * comparison, then `N passed, N failed`; exit status 1 on any failure.
 *
 * Decode kernels (mode = decode) run on their own shapes instead: q_len
 * tokens against per-sequence cache lengths, contiguous or paged caches with
 * stale rows poisoned, and, for programs split-kv split, several split
 * counts; the module's kernels run in order (the combine kernel last).
 *
 * Options: --quick shrinks spec-file kernels to at most 2 K/V heads (the GQA
 * ratio, head dims, masks and scores stay) to keep CI fast; --shapes N uses
 * the first N shapes; --round runs the interpreter with round_casts (then the
 * tolerance is loose: this is for eyeballing, not for CI); -v prints the
 * generated specs; --emit-fa1 prints the lowered FA1 program of each kernel
 * of the files (errors of refused kernels go to stdout) for FileCheck.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "frontend/emit_tile.h"
#include "ir/interp.h"
#include "ir/ir.h"
#ifndef DIFFTEST_NO_PASSES
#include "passes/passes.h"
#else
typedef struct PassOptions PassOptions;
#define PASS_MAX_NAMES 16
#endif
#include "test/interp/ref_attention.h"

#define TOL 1e-5

typedef struct Shape {
  int64_t batch, sq, sk;
} Shape;

/* Tile-aligned and ragged lengths, seqlen_q != seqlen_k both ways, a single
 * query row against many keys (decode-like); causal with seqlen_q > seqlen_k
 * gives fully masked rows. */
static const Shape kShapes[] = {
    {1, 1, 1}, {2, 17, 17}, {1, 113, 113}, {2, 17, 113}, {1, 113, 17}, {1, 1, 113}, {2, 32, 48},
};
enum { NSHAPES = sizeof kShapes / sizeof kShapes[0] };

typedef struct Opts {
  bool quick, round, verbose, emit;
  int nshapes;
  int br, bc;
} Opts;

typedef struct Stats {
  int passed, failed;
} Stats;

/* ---------------------------------------------------------------- rng */

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1p-53; }
static int rng_int(uint64_t *s, int lo, int hi) { /* inclusive */
  return lo + (int)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

/* ------------------------------------------------------------- programs */

/* One program to interpret: a description and its module. */
typedef struct Variant {
  char name[96];
  Module *m;
  Func *f;
  int br, bc; /* symbolic tile sizes for FA1 programs */
} Variant;

static Func *lower_one(Module *m, const KernelSpec *k, FILE *diag) {
  return emit_tile_kernel(m, k, "sm_90a", diag);
}

/* Lowers k and runs the pipeline under `po` (NULL: no passes). */
static Variant make_variant(const KernelSpec *k, const PassOptions *po, const char *name,
                            int br, int bc) {
  Variant v = {.br = br, .bc = bc};
  snprintf(v.name, sizeof v.name, "%s", name);
  v.m = module_create();
  v.f = lower_one(v.m, k, stderr);
  if (v.f && module_verify(v.m, "lowering", stderr) != 0)
    v.f = NULL;
#ifndef DIFFTEST_NO_PASSES
  if (v.f && po && run_pipeline(v.m, po) != 0)
    v.f = NULL;
#else
  (void)po;
#endif
  if (v.f)
    v.f = v.m->funcs[0];
  return v;
}

/* The variants of one kernel: FA1 at two tile shapes, each pipeline prefix,
 * and the full pipeline without each optional pass. */
static int make_variants(const KernelSpec *k, const Opts *o, Variant *out, int cap) {
  int n = 0;
  out[n++] = make_variant(k, NULL, "fa1", o->br, o->bc);
  if (n < cap)
    out[n++] = make_variant(k, NULL, "fa1-br32-bc8", 32, 8);
#ifndef DIFFTEST_NO_PASSES
  int npasses = 0;
  const Pass *ps = pass_pipeline(&npasses);
  for (int i = 1; i <= npasses && n < cap; i++) {
    PassOptions po;
    pass_options_init(&po);
    po.max_passes = i;
    char name[96];
    snprintf(name, sizeof name, "after-%d-%s", i, ps[i - 1].name);
    out[n++] = make_variant(k, &po, name, o->br, o->bc);
  }
  for (int i = 0; i < npasses && n < cap; i++) {
    if (ps[i].required)
      continue;
    PassOptions po;
    pass_options_init(&po);
    po.disabled[po.ndisabled++] = ps[i].name;
    char name[96];
    snprintf(name, sizeof name, "full-without-%s", ps[i].name);
    out[n++] = make_variant(k, &po, name, o->br, o->bc);
  }
#endif
  return n;
}

/* --------------------------------------------------------------- buffers */

/* A host tensor: dims and strides (rows padded so the layout is strided). */
typedef struct Buf {
  double *data;
  int64_t dims[4], strides[4];
  int rank;
  size_t n;
} Buf;

static Buf buf_make(int rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3, int pad) {
  Buf b = {.rank = rank, .dims = {d0, d1, d2, d3}};
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    b.strides[i] = s;
    s *= b.dims[i] + (i == rank - 1 ? pad : 0);
  }
  b.n = (size_t)(s > 0 ? s : 1);
  b.data = malloc(b.n * sizeof(double));
  if (!b.data)
    abort();
  return b;
}

static void buf_fill(Buf *b, uint64_t *seed, double amp) {
  for (size_t i = 0; i < b->n; i++)
    b->data[i] = amp * (2 * rng_unit(seed) - 1);
}

static void buf_poison(Buf *b) {
  for (size_t i = 0; i < b->n; i++)
    b->data[i] = NAN;
}

static InterpBinding bind(const char *name, const Buf *b) {
  InterpBinding r = {.name = name, .data = b->data};
  for (int i = 0; i < 4; i++) {
    r.dims[i] = b->dims[i];
    r.strides[i] = b->strides[i];
  }
  return r;
}

static RefTensor ref_t(const Buf *b) {
  RefTensor r = {.data = b->data};
  for (int i = 0; i < 4; i++)
    r.strides[i] = b->strides[i];
  return r;
}

static double *b_at(const Buf *b, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return b->data + i0 * b->strides[0] + i1 * b->strides[1] + i2 * b->strides[2] +
         i3 * b->strides[3];
}

/* The interpreter's options for variant v (its symbolic tile sizes). */
static InterpOptions variant_options(const Variant *v, const Opts *o) {
  InterpOptions io;
  interp_options_init(&io);
  io.br = v->br;
  io.bc = v->bc;
  io.round_casts = o->round;
  return io;
}

/* ------------------------------------------------------------ comparison */

typedef struct Cmp {
  double o_err, lse_err;
  long nan, lse_inf_mismatch;
} Cmp;

static Cmp compare(const KernelSpec *k, const Shape *s, const Buf *o, const Buf *lse,
                   const Buf *ro, const Buf *rlse) {
  Cmp c = {0};
  for (int64_t b = 0; b < s->batch; b++)
    for (int64_t q = 0; q < s->sq; q++)
      for (int64_t h = 0; h < k->heads; h++) {
        for (int d = 0; d < k->v_head_dim; d++) {
          double x = *b_at(o, b, q, h, d), r = *b_at(ro, b, q, h, d);
          if (isnan(x))
            c.nan++;
          else if (fabs(x - r) > c.o_err)
            c.o_err = fabs(x - r);
        }
        double x = *b_at(lse, b, h, q, 0), r = *b_at(rlse, b, h, q, 0);
        if (isnan(x))
          c.nan++;
        else if (isinf(r) || isinf(x)) {
          if (x != r)
            c.lse_inf_mismatch++;
        } else if (fabs(x - r) / fmax(1, fabs(r)) > c.lse_err)
          c.lse_err = fabs(x - r) / fmax(1, fabs(r));
      }
  return c;
}

/* ----------------------------------------------------------------- runs */

typedef struct Inputs {
  Buf q, k, v, ro, rlse, o, lse;
} Inputs;

static Inputs make_inputs(const KernelSpec *k, const Shape *s, uint64_t seed) {
  Inputs in;
  in.q = buf_make(4, s->batch, s->sq, k->heads, k->head_dim, 3);
  in.k = buf_make(4, s->batch, s->sk, k->kv_heads, k->head_dim, 5);
  in.v = buf_make(4, s->batch, s->sk, k->kv_heads, k->v_head_dim, 0);
  in.ro = buf_make(4, s->batch, s->sq, k->heads, k->v_head_dim, 0);
  in.rlse = buf_make(3, s->batch, k->heads, s->sq, 0, 0);
  in.o = buf_make(4, s->batch, s->sq, k->heads, k->v_head_dim, 0);
  in.lse = buf_make(3, s->batch, k->heads, s->sq, 0, 0);
  buf_fill(&in.q, &seed, 1.5);
  buf_fill(&in.k, &seed, 1.5);
  buf_fill(&in.v, &seed, 1.0);
  RefTensor q = ref_t(&in.q), kt = ref_t(&in.k), v = ref_t(&in.v), o = ref_t(&in.ro),
            l = ref_t(&in.rlse);
  ref_attention(k, s->batch, s->sq, s->sk, &q, &kt, &v, &o, &l);
  return in;
}

static void free_inputs(Inputs *in) {
  Buf *bs[] = {&in->q, &in->k, &in->v, &in->ro, &in->rlse, &in->o, &in->lse};
  for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
    free(bs[i]->data);
}

static void run_variant(const KernelSpec *k, const Variant *v, const Shape *s, uint64_t seed,
                        Inputs *in, const Opts *o, Stats *st) {
  char what[256];
  snprintf(what, sizeof what, "%.80s %.90s B=%lld Sq=%lld Sk=%lld seed=%llu", k->name, v->name,
           (long long)s->batch, (long long)s->sq, (long long)s->sk, (unsigned long long)seed);
  if (!v->f) {
    printf("FAIL %s: lowering or pipeline failed\n", what);
    st->failed++;
    return;
  }
  buf_poison(&in->o);
  buf_poison(&in->lse);
  InterpBinding b[5] = {bind("q", &in->q), bind("k", &in->k), bind("v", &in->v),
                        bind("o", &in->o), bind("lse", &in->lse)};
  InterpOptions io = variant_options(v, o);
  char err[512];
  if (interp_run(v->f, b, 5, s->batch, s->sq, s->sk, &io, err, sizeof err) != 0) {
    printf("FAIL %s: %s\n", what, err);
    st->failed++;
    return;
  }
  Cmp c = compare(k, s, &in->o, &in->lse, &in->ro, &in->rlse);
  double tol = o->round ? 5e-2 : TOL;
  bool ok = c.nan == 0 && c.lse_inf_mismatch == 0 && c.o_err < tol && c.lse_err < tol;
  printf("%s %s: max|dO|=%.3g max|dLSE|=%.3g nan=%ld lse-inf-mismatch=%ld\n", ok ? "PASS" : "FAIL",
         what, c.o_err, c.lse_err, c.nan, c.lse_inf_mismatch);
  if (ok)
    st->passed++;
  else
    st->failed++;
}

/* -------------------------------------------------------------- backward */

/* The backward kernel of v's module with suffix `role` (NAME_bwd_pre, ...). */
static Func *bwd_func(const Variant *v, const char *suffix) {
  char want[256];
  snprintf(want, sizeof want, "%s%s", v->f ? v->f->name : "", suffix);
  for (int i = 0; i < v->m->nfuncs; i++)
    if (strcmp(v->m->funcs[i]->name, want) == 0)
      return v->m->funcs[i];
  return NULL;
}

/* Max |x - r| over a tensor's logical elements, NaNs counted. */
static double max_err(const Buf *x, const Buf *r, long *nan) {
  double e = 0;
  for (int64_t a = 0; a < x->dims[0]; a++)
    for (int64_t b = 0; b < x->dims[1]; b++)
      for (int64_t c = 0; c < x->dims[2]; c++)
        for (int64_t d = 0; d < x->dims[3]; d++) {
          double xv = *b_at(x, a, b, c, d), rv = *b_at(r, a, b, c, d);
          if (isnan(xv))
            (*nan)++;
          else if (fabs(xv - rv) > e)
            e = fabs(xv - rv);
        }
  return e;
}

typedef struct BwdBufs {
  Buf dout, delta, dq_acc, dq, dk, dv, rdq, rdk, rdv;
} BwdBufs;

static BwdBufs make_bwd(const KernelSpec *k, const Shape *s, Inputs *in, uint64_t seed) {
  BwdBufs g;
  g.dout = buf_make(4, s->batch, s->sq, k->heads, k->v_head_dim, 1);
  g.delta = buf_make(3, s->batch, k->heads, s->sq, 0, 0);
  g.dq_acc = buf_make(4, s->batch, s->sq, k->heads, k->head_dim, 0);
  g.dq = buf_make(4, s->batch, s->sq, k->heads, k->head_dim, 2);
  g.dk = buf_make(4, s->batch, s->sk, k->kv_heads, k->head_dim, 0);
  g.dv = buf_make(4, s->batch, s->sk, k->kv_heads, k->v_head_dim, 3);
  g.rdq = buf_make(4, s->batch, s->sq, k->heads, k->head_dim, 0);
  g.rdk = buf_make(4, s->batch, s->sk, k->kv_heads, k->head_dim, 0);
  g.rdv = buf_make(4, s->batch, s->sk, k->kv_heads, k->v_head_dim, 0);
  seed ^= 0x5bd1e995u;
  buf_fill(&g.dout, &seed, 1.0);
  RefTensor q = ref_t(&in->q), kt = ref_t(&in->k), v = ref_t(&in->v), o = ref_t(&in->ro),
            l = ref_t(&in->rlse), dout = ref_t(&g.dout), dq = ref_t(&g.rdq), dk = ref_t(&g.rdk),
            dv = ref_t(&g.rdv);
  ref_attention_backward(k, s->batch, s->sq, s->sk, &q, &kt, &v, &o, &l, &dout, &dq, &dk, &dv);
  return g;
}

static void free_bwd(BwdBufs *g) {
  Buf *bs[] = {&g->dout, &g->delta, &g->dq_acc, &g->dq, &g->dk, &g->dv, &g->rdq, &g->rdk, &g->rdv};
  for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
    free(bs[i]->data);
}

/* Runs one launch of the backward (the atomic one: pre, bwd, post; or the
 * deterministic one: pre, bwd_kv, bwd_q; bwd_dv before the last where the
 * module has it) on the reference O and LSE and
 * compares dQ, dK, dV with the float64 reference (outputs poisoned first,
 * dq_acc zeroed as the runtime does). */
static void run_backward(const KernelSpec *k, const Variant *v, const Shape *s, uint64_t seed,
                         Inputs *in, BwdBufs *g, bool deterministic, const Opts *o, Stats *st) {
  char what[256];
  snprintf(what, sizeof what, "%.80s %.70s %s B=%lld Sq=%lld Sk=%lld seed=%llu", k->name, v->name,
           deterministic ? "bwd-det" : "bwd", (long long)s->batch, (long long)s->sq,
           (long long)s->sk, (unsigned long long)seed);
  static const char *const atomic[3] = {"_bwd_pre", "_bwd", "_bwd_post"};
  static const char *const det[3] = {"_bwd_pre", "_bwd_kv", "_bwd_q"};
  /* pre, K/V-outer, [dV (split-dkdv),] last: the runtime's order */
  Func *fs[4];
  for (int i = 0; i < 3; i++) {
    fs[i] = v->f ? bwd_func(v, (deterministic ? det : atomic)[i]) : NULL;
    if (!fs[i]) {
      printf("FAIL %s: no kernel %s (lowering or pipeline failed)\n", what,
             (deterministic ? det : atomic)[i]);
      st->failed++;
      return;
    }
  }
  buf_poison(&g->delta);
  buf_poison(&g->dq);
  buf_poison(&g->dk);
  buf_poison(&g->dv);
  for (size_t i = 0; i < g->dq_acc.n; i++)
    g->dq_acc.data[i] = 0;
  InterpBinding b[11] = {bind("q", &in->q),        bind("k", &in->k),       bind("v", &in->v),
                         bind("o", &in->ro),       bind("lse", &in->rlse),  bind("dout", &g->dout),
                         bind("delta", &g->delta), bind("dq_acc", &g->dq_acc), bind("dq", &g->dq),
                         bind("dk", &g->dk),       bind("dv", &g->dv)};
  int nf = 3;
  Func *dvk = bwd_func(v, "_bwd_dv");
  if (dvk) {
    fs[3] = fs[2];
    fs[2] = dvk;
    nf = 4;
  }
  InterpOptions io = variant_options(v, o);
  char err[512];
  for (int i = 0; i < nf; i++)
    if (interp_run(fs[i], b, 11, s->batch, s->sq, s->sk, &io, err, sizeof err) != 0) {
      printf("FAIL %s: %s: %s\n", what, fs[i]->name, err);
      st->failed++;
      return;
    }
  long nan = 0;
  double eq = max_err(&g->dq, &g->rdq, &nan), ek = max_err(&g->dk, &g->rdk, &nan),
         ev = max_err(&g->dv, &g->rdv, &nan);
  double tol = o->round ? 5e-2 : TOL;
  bool ok = nan == 0 && eq < tol && ek < tol && ev < tol;
  printf("%s %s: max|ddQ|=%.3g max|ddK|=%.3g max|ddV|=%.3g nan=%ld\n", ok ? "PASS" : "FAIL", what,
         eq, ek, ev, nan);
  if (ok)
    st->passed++;
  else
    st->failed++;
}

/* ---------------------------------------------------------------- decode */

/* A decode launch: q_len query tokens per sequence against per-sequence
 * cache lengths (mixed in one batch). */
typedef struct DShape {
  int64_t batch, q_len;
  int64_t lens[4];
  bool hot; /* every query aligned with its sequence's key 0: score ~120 there */
} DShape;

/* The hot shapes: one score per row far above the others (and above any
 * unified max's range), in the first split of a long cache: the first tile
 * falls back, the rest of that split must stay exact, and the combine must
 * let that split dominate (the GPU suite's `hot` inputs, smaller). */
static const DShape kDecodeShapes[] = {
    {1, 1, {1}, false},      {1, 1, {17}, false},           {2, 4, {128, 17}, false},
    {1, 16, {1000}, false},  {3, 4, {1, 1000, 128}, false}, {2, 16, {17, 128}, false},
    {1, 1, {4096}, true}, {2, 4, {1000, 300}, true},
};
enum { NDSHAPES = sizeof kDecodeShapes / sizeof kDecodeShapes[0] };

/* The physical cache and everything else one decode shape needs. */
typedef struct DInputs {
  Buf q, k, v, ro, rlse, o, lse, seqlens, table;
  int64_t capacity, num_pages, max_pages, longest;
  bool paged;
} DInputs;

static int64_t dmax_len(const DShape *s) {
  int64_t m = 0;
  for (int64_t b = 0; b < s->batch; b++)
    m = s->lens[b] > m ? s->lens[b] : m;
  return m;
}

/* A random permutation of the pool's pages, so that logical neighbours live
 * far apart; unused table entries point at pages of stale data. */
static void fill_table(DInputs *in, uint64_t *seed) {
  int64_t n = in->num_pages;
  int64_t *perm = malloc(sizeof(int64_t) * (size_t)n);
  if (!perm)
    abort();
  for (int64_t i = 0; i < n; i++)
    perm[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)(rng_next(seed) % (uint64_t)(i + 1)), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (int64_t i = 0; i < (int64_t)in->table.n; i++)
    in->table.data[i] = (double)perm[i % n];
  free(perm);
}

/* Inputs: Q, a cache whose rows past each sequence's length (and every page
 * nobody owns) are NaN, so that reading them shows; the reference reads the
 * same physical cache through its own paging code. */
static DInputs make_dinputs(const KernelSpec *k, const DShape *s, uint64_t seed) {
  DInputs in = {.paged = k->cache == CACHE_PAGED, .longest = dmax_len(s)};
  int64_t P = in.paged ? k->page_size : 1;
  in.capacity = in.longest + 5;
  in.max_pages = (in.capacity + P - 1) / P;
  if (in.paged) {
    in.capacity = in.max_pages * P;
    in.num_pages = s->batch * in.max_pages + 3;
  }
  int64_t r0 = in.paged ? in.num_pages : s->batch, r1 = in.paged ? P : in.capacity;
  in.q = buf_make(4, s->batch, s->q_len, k->heads, k->head_dim, 3);
  in.k = buf_make(4, r0, r1, k->kv_heads, k->head_dim, 5);
  in.v = buf_make(4, r0, r1, k->kv_heads, k->v_head_dim, 0);
  in.ro = buf_make(4, s->batch, s->q_len, k->heads, k->v_head_dim, 0);
  in.rlse = buf_make(3, s->batch, k->heads, s->q_len, 0, 0);
  in.o = buf_make(4, s->batch, s->q_len, k->heads, k->v_head_dim, 0);
  in.lse = buf_make(3, s->batch, k->heads, s->q_len, 0, 0);
  in.seqlens = buf_make(1, s->batch, 0, 0, 0, 0);
  in.table = buf_make(2, s->batch, in.max_pages, 0, 0, 0);
  buf_fill(&in.q, &seed, 1.5);
  buf_fill(&in.k, &seed, 1.5);
  buf_fill(&in.v, &seed, 1.0);
  if (in.paged)
    fill_table(&in, &seed);
  if (s->hot) /* q = a k0 with a * scale * |k0|^2 = 120 (+ a little noise) */
    for (int64_t b = 0; b < s->batch; b++)
      for (int64_t t = 0; t < s->q_len; t++)
        for (int64_t h = 0; h < k->heads; h++) {
          int64_t hk = h / (k->heads / k->kv_heads);
          int64_t r = in.paged ? (int64_t)in.table.data[b * in.max_pages] * P : b * r1;
          double *k0 = b_at(&in.k, r / r1, r % r1, hk, 0), n2 = 0;
          for (int d = 0; d < k->head_dim; d++)
            n2 += k0[d] * k0[d];
          for (int d = 0; d < k->head_dim; d++)
            *b_at(&in.q, b, t, h, d) =
                120.0 / (k->scale * n2) * k0[d] + 0.05 * (2 * rng_unit(&seed) - 1);
        }
  for (int64_t b = 0; b < s->batch; b++)
    in.seqlens.data[b] = (double)s->lens[b];
  /* poison what no sequence owns */
  char *owned = calloc((size_t)(r0 * r1), 1);
  if (!owned)
    abort();
  for (int64_t b = 0; b < s->batch; b++)
    for (int64_t j = 0; j < s->lens[b]; j++)
      owned[in.paged ? (int64_t)in.table.data[b * in.max_pages + j / P] * P + j % P
                     : b * r1 + j] = 1;
  for (int64_t r = 0; r < r0 * r1; r++)
    for (int64_t h = 0; h < k->kv_heads && !owned[r]; h++) {
      for (int d = 0; d < k->head_dim; d++)
        *b_at(&in.k, r / r1, r % r1, h, d) = NAN;
      for (int d = 0; d < k->v_head_dim; d++)
        *b_at(&in.v, r / r1, r % r1, h, d) = NAN;
    }
  free(owned);
  RefTensor q = ref_t(&in.q), kt = ref_t(&in.k), v = ref_t(&in.v), o = ref_t(&in.ro),
            l = ref_t(&in.rlse);
  RefPaging pg = {(int)P, in.table.data, in.max_pages};
  ref_attention_decode(k, s->batch, s->q_len, s->lens, &q, &kt, &v, in.paged ? &pg : NULL, &o, &l);
  return in;
}

static void free_dinputs(DInputs *in) {
  Buf *bs[] = {&in->q, &in->k, &in->v, &in->ro, &in->rlse, &in->o, &in->lse, &in->seqlens,
               &in->table};
  for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
    free(bs[i]->data);
}

/* Split counts to try: 1, 3 (more splits than some caches have tiles: empty
 * splits) and the runtime's automatic choice, about one split per 256 keys. */
static int dsplits(const KernelSpec *k, const DShape *s, int64_t *out) {
  int64_t autos = (dmax_len(s) + 255) / 256;
  int n = 0;
  if (k->split > 0) { /* a fixed split count: the kernel is launched with it */
    out[n++] = k->split;
    return n;
  }
  out[n++] = 1;
  out[n++] = 3;
  if (autos != 1 && autos != 3)
    out[n++] = autos;
  return n;
}

static void run_dvariant(const KernelSpec *k, const Variant *v, const DShape *s, int64_t nsplit,
                         uint64_t seed, DInputs *in, const Opts *o, Stats *st) {
  char what[320];
  snprintf(what, sizeof what, "%.80s %.90s B=%lld%s qlen=%lld lens=%lld,%lld,%lld nsplit=%lld seed=%llu",
           k->name, v->name, (long long)s->batch, s->hot ? " hot" : "", (long long)s->q_len, (long long)s->lens[0],
           (long long)(s->batch > 1 ? s->lens[1] : -1), (long long)(s->batch > 2 ? s->lens[2] : -1),
           (long long)nsplit, (unsigned long long)seed);
  if (!v->f) {
    printf("FAIL %s: lowering or pipeline failed\n", what);
    st->failed++;
    return;
  }
  buf_poison(&in->o);
  buf_poison(&in->lse);
  InterpBinding b[7] = {bind("q", &in->q), bind("k", &in->k), bind("v", &in->v),
                        bind("o", &in->o), bind("lse", &in->lse),
                        bind("cache_seqlens", &in->seqlens), bind("block_table", &in->table)};
  InterpOptions io = variant_options(v, o);
  InterpSizes sz = {.batch = s->batch, .seqlen_q = s->q_len, .seqlen_k = in->capacity,
                    .nsplit = nsplit, .num_pages = in->num_pages, .max_pages = in->max_pages};
  char err[512];
  if (interp_run_module(v->m, b, in->paged ? 7 : 6, &sz, &io, err, sizeof err) != 0) {
    printf("FAIL %s: %s\n", what, err);
    st->failed++;
    return;
  }
  Shape cs = {s->batch, s->q_len, 0};
  Cmp c = compare(k, &cs, &in->o, &in->lse, &in->ro, &in->rlse);
  double tol = o->round ? 5e-2 : TOL;
  bool ok = c.nan == 0 && c.lse_inf_mismatch == 0 && c.o_err < tol && c.lse_err < tol;
  printf("%s %s: max|dO|=%.3g max|dLSE|=%.3g nan=%ld lse-inf-mismatch=%ld\n", ok ? "PASS" : "FAIL",
         what, c.o_err, c.lse_err, c.nan, c.lse_inf_mismatch);
  if (ok)
    st->passed++;
  else
    st->failed++;
}

/* Every variant on every decode shape; kernels that split (an %nsplit
 * argument) with each split count. */
static void test_decode(const KernelSpec *k, int kindex, const Variant *vs, int nv, const Opts *o,
                        Stats *st) {
  int nds = o->nshapes >= NSHAPES ? NDSHAPES : o->nshapes;
  for (int si = 0; si < nds && si < NDSHAPES; si++) {
    const DShape *s = &kDecodeShapes[si];
    uint64_t seed = 1000003ull * (uint64_t)(kindex + 1) + (uint64_t)si;
    DInputs in = make_dinputs(k, s, seed);
    int64_t splits[4];
    int ns = dsplits(k, s, splits);
    for (int i = 0; i < nv; i++) {
      bool splits_kv = vs[i].f && func_arg(vs[i].f, "nsplit");
      for (int j = 0; j < (splits_kv ? ns : 1); j++)
        run_dvariant(k, &vs[i], s, splits_kv ? splits[j] : 1, seed, &in, o, st);
    }
    free_dinputs(&in);
  }
}

static void test_kernel(const KernelSpec *k, int kindex, const Opts *o, Stats *st) {
  Variant vs[2 + 2 * PASS_MAX_NAMES + 8];
  int nv = make_variants(k, o, vs, (int)(sizeof vs / sizeof vs[0]));
  if (k->mode == MODE_DECODE) {
    test_decode(k, kindex, vs, nv, o, st);
    for (int i = 0; i < nv; i++)
      module_destroy(vs[i].m);
    return;
  }
  for (int si = 0; si < o->nshapes && si < NSHAPES; si++) {
    const Shape *s = &kShapes[si];
    uint64_t seed = 1000003ull * (uint64_t)(kindex + 1) + (uint64_t)si;
    Inputs in = make_inputs(k, s, seed);
    for (int i = 0; i < nv; i++)
      run_variant(k, &vs[i], s, seed, &in, o, st);
    if (k->grad) {
      BwdBufs g = make_bwd(k, s, &in, seed);
      for (int i = 0; i < nv; i++)
        for (int det = 0; det < 2; det++)
          run_backward(k, &vs[i], s, seed, &in, &g, det, o, st);
      free_bwd(&g);
    }
    free_inputs(&in);
  }
  for (int i = 0; i < nv; i++)
    module_destroy(vs[i].m);
}

/* ------------------------------------------------------------ generator */

/* Expr nodes of generated specs come from one pool, freed per spec. */
typedef struct Pool {
  Expr **v;
  int n, cap;
} Pool;

static Pool g_pool;

static Expr *ex(ExprKind kind, Expr *a, Expr *b, Expr *c) {
  Expr *e = calloc(1, sizeof(Expr));
  if (!e)
    abort();
  if (g_pool.n == g_pool.cap) {
    g_pool.cap = g_pool.cap ? 2 * g_pool.cap : 64;
    g_pool.v = realloc(g_pool.v, sizeof(Expr *) * (size_t)g_pool.cap);
    if (!g_pool.v)
      abort();
  }
  g_pool.v[g_pool.n++] = e;
  e->kind = kind;
  e->a = a;
  e->b = b;
  e->c = c;
  e->loc = (SrcLoc){"<generated>", 1, 1};
  return e;
}

static Expr *num(double x) {
  Expr *e = ex(EXPR_NUM, NULL, NULL, NULL);
  e->num = x;
  return e;
}

static Expr *var(ExprVar v) {
  Expr *e = ex(EXPR_VAR, NULL, NULL, NULL);
  e->var = v;
  return e;
}

static void pool_free(void) {
  for (int i = 0; i < g_pool.n; i++)
    free(g_pool.v[i]);
  g_pool.n = 0;
}

/* q + seqlen_k - seqlen_q: q on the bottom-right diagonal (as sema builds it). */
static Expr *aligned_q(void) {
  return ex(EXPR_SUB, ex(EXPR_ADD, var(VAR_Q), var(VAR_SEQLEN_K), NULL), var(VAR_SEQLEN_Q), NULL);
}

static ExprKind rand_cmp(uint64_t *r) {
  static const ExprKind k[] = {EXPR_LT, EXPR_LE, EXPR_GT, EXPR_GE, EXPR_EQ, EXPR_NE};
  return k[rng_int(r, 0, 5)];
}

/* An affine term in q or k: x, x + c, c - x, 2 * x, or the aligned q. */
static Expr *affine_term(uint64_t *r, ExprVar x) {
  switch (rng_int(r, 0, 4)) {
  case 0: return var(x);
  case 1: return ex(EXPR_ADD, var(x), num(rng_int(r, -20, 20)), NULL);
  case 2: return ex(EXPR_SUB, num(rng_int(r, 0, 60)), var(x), NULL);
  case 3: return ex(EXPR_MUL, num(rng_int(r, 1, 2)), var(x), NULL);
  default: return x == VAR_Q ? aligned_q() : ex(EXPR_SUB, var(VAR_SEQLEN_K), var(VAR_K), NULL);
  }
}

/* A comparison of q and k (occasionally of b or h: constant per tile). */
static Expr *mask_atom(uint64_t *r) {
  int pick = rng_int(r, 0, 9);
  if (pick == 0)
    return ex(EXPR_EQ, ex(EXPR_MOD, var(VAR_H), num(2), NULL), num(rng_int(r, 0, 1)), NULL);
  if (pick == 1)
    return ex(EXPR_LT, var(VAR_B), num(1), NULL);
  if (pick == 2) /* |q - k| < w */
    return ex(EXPR_LT, ex(EXPR_ABS, ex(EXPR_SUB, var(VAR_Q), var(VAR_K), NULL), NULL, NULL),
              num(rng_int(r, 1, 30)), NULL);
  Expr *a = affine_term(r, VAR_Q), *b = affine_term(r, VAR_K);
  return rng_int(r, 0, 1) ? ex(rand_cmp(r), a, b, NULL) : ex(rand_cmp(r), b, a, NULL);
}

static Expr *mask_tree(uint64_t *r, int depth) {
  if (depth == 0 || rng_int(r, 0, 2) == 0) {
    Expr *a = mask_atom(r);
    return rng_int(r, 0, 7) == 0 ? ex(EXPR_NOT, a, NULL, NULL) : a;
  }
  /* one rng draw per statement: C leaves the order of arguments open */
  ExprKind k = rng_int(r, 0, 1) ? EXPR_AND : EXPR_OR;
  Expr *a = mask_tree(r, depth - 1);
  Expr *b = mask_tree(r, depth - 1);
  return ex(k, a, b, NULL);
}

static void gen_mask(uint64_t *r, KernelSpec *k) {
  switch (rng_int(r, 0, 4)) {
  case 0:
    k->mask_kind = MASK_NONE;
    break;
  case 1:
    k->mask_kind = MASK_CAUSAL;
    k->mask = ex(EXPR_LE, var(VAR_K), aligned_q(), NULL);
    break;
  case 2: { /* window(L) */
    int L = rng_int(r, 1, 40);
    k->mask_kind = MASK_WINDOW;
    k->window_left = L - 1;
    k->mask = ex(EXPR_AND, ex(EXPR_LE, var(VAR_K), aligned_q(), NULL),
                 ex(EXPR_GT, var(VAR_K), ex(EXPR_SUB, aligned_q(), num(L), NULL), NULL), NULL);
    break;
  }
  case 3: { /* window(L, R) */
    int L = rng_int(r, 0, 30), R = rng_int(r, 0, 30);
    k->mask_kind = MASK_WINDOW;
    k->window_left = L;
    k->window_right = R;
    k->mask = ex(EXPR_AND, ex(EXPR_GE, var(VAR_K), ex(EXPR_SUB, aligned_q(), num(L), NULL), NULL),
                 ex(EXPR_LE, var(VAR_K), ex(EXPR_ADD, aligned_q(), num(R), NULL), NULL), NULL);
    break;
  }
  default:
    k->mask_kind = MASK_EXPR;
    k->mask = mask_tree(r, 2);
  }
}

/* Random arithmetic over s, q, k, h and numbers, kept finite. */
static Expr *score_tree(uint64_t *r, int depth) {
  if (depth == 0) {
    switch (rng_int(r, 0, 6)) {
    case 0: return var(VAR_Q);
    case 1: return var(VAR_K);
    case 2: return num(rng_int(r, 0, 1) ? rng_int(r, -3, 3) : rng_int(r, -30, 30) / 8.0);
    default: return var(VAR_S);
    }
  }
  Expr *a = score_tree(r, depth - 1);
  switch (rng_int(r, 0, 9)) {
  case 0: return ex(EXPR_ADD, a, score_tree(r, depth - 1), NULL);
  case 1: return ex(EXPR_SUB, a, score_tree(r, depth - 1), NULL);
  case 2: return ex(EXPR_MUL, a, num(rng_int(r, -4, 4) / 2.0), NULL);
  case 3: return ex(EXPR_DIV, a, num(rng_int(r, 1, 9)), NULL);
  case 4: {
    ExprKind k = rng_int(r, 0, 1) ? EXPR_MIN : EXPR_MAX;
    return ex(k, a, score_tree(r, depth - 1), NULL);
  }
  case 5: {
    Expr *c = mask_atom(r);
    return ex(EXPR_SELECT, c, a, score_tree(r, depth - 1));
  }
  case 6: return ex(EXPR_TANH, a, NULL, NULL);
  case 7: return ex(EXPR_ABS, a, NULL, NULL);
  case 8: return ex(EXPR_FLOOR, a, NULL, NULL);
  default: return ex(EXPR_MOD, a, num(rng_int(r, 2, 7)), NULL);
  }
}

static void gen_score(uint64_t *r, KernelSpec *k) {
  switch (rng_int(r, 0, 4)) {
  case 0:
    k->score = NULL;
    break;
  case 1: { /* softcap: c * tanh(s / c) */
    double c = rng_int(r, 0, 1) ? 50 : 5;
    k->score = ex(EXPR_MUL, num(c), ex(EXPR_TANH, ex(EXPR_DIV, var(VAR_S), num(c), NULL), NULL, NULL),
                  NULL);
    break;
  }
  case 2: /* ALiBi: s - exp2(-(h + 1)) * |q - k| */
    k->score = ex(EXPR_SUB, var(VAR_S),
                  ex(EXPR_MUL, ex(EXPR_EXP2, ex(EXPR_NEG, ex(EXPR_ADD, var(VAR_H), num(1), NULL), NULL, NULL),
                                  NULL, NULL),
                     ex(EXPR_ABS, ex(EXPR_SUB, var(VAR_Q), var(VAR_K), NULL), NULL, NULL), NULL),
                  NULL);
    break;
  case 3: /* ALiBi, bottom-right aligned, slope from h */
    k->score = ex(EXPR_ADD, var(VAR_S),
                  ex(EXPR_DIV, ex(EXPR_MUL, ex(EXPR_SUB, var(VAR_K), aligned_q(), NULL),
                                  ex(EXPR_ADD, var(VAR_H), num(1), NULL), NULL),
                     num(16), NULL),
                  NULL);
    break;
  default:
    k->score = score_tree(r, rng_int(r, 1, 3));
  }
}

static void gen_spec(uint64_t *r, KernelSpec *k, char *name) {
  memset(k, 0, sizeof *k);
  k->name = name;
  k->loc = (SrcLoc){"<generated>", 1, 1};
  k->dtype = rng_int(r, 0, 1) ? DTYPE_BF16 : DTYPE_F16;
  k->head_dim = 8 * rng_int(r, 1, 8);
  k->v_head_dim = rng_int(r, 0, 3) == 0 ? 8 * rng_int(r, 1, 8) : k->head_dim;
  static const int ratios[] = {1, 2, 4};
  k->kv_heads = rng_int(r, 1, 2);
  k->heads = k->kv_heads * ratios[rng_int(r, 0, 2)];
  k->scale = rng_int(r, 0, 1) ? 1 / sqrt(k->head_dim) : rng_int(r, 1, 40) / 40.0;
  k->mode = rng_int(r, 0, 5) == 0 ? MODE_DECODE : MODE_FORWARD;
  gen_mask(r, k);
  gen_score(r, k);
  if (k->mode == MODE_DECODE) { /* drawn last: forward specs stay as they were */
    k->split = rng_int(r, 0, 2);
    if (rng_int(r, 0, 1)) {
      k->cache = CACHE_PAGED;
      k->page_size = rng_int(r, 0, 1) ? 16 : 32;
    }
    if (rng_int(r, 0, 2) == 0) {
      k->has_unified_max = true;
      k->unified_max = rng_int(r, -4, 4);
    }
  }
}

/* ------------------------------------------------------------ spec files */

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n + 4096 > cap) {
      cap = cap ? 2 * cap : 65536;
      char *nb = realloc(buf, cap + 1);
      if (!nb)
        break;
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0)
      break;
  }
  fclose(f);
  if (buf)
    buf[n] = 0;
  *len = n;
  return buf;
}

/* At most 2 K/V heads with the GQA ratio kept, and at most 8 query heads
 * (MQA keeps several query heads on its single K/V head). */
static void shrink(KernelSpec *k) {
  int group = k->heads / k->kv_heads;
  if (k->kv_heads > 2) {
    k->kv_heads = 2;
    k->heads = 2 * group;
  }
  while (k->heads > 8 && k->kv_heads == 1 && k->heads % 2 == 0)
    k->heads /= 2;
  while (k->heads > 8 && k->kv_heads == 2 && (k->heads / 2) % 2 == 0)
    k->heads /= 2;
}

/* --emit-fa1: prints the lowered (verified) program instead of testing it. */
static void emit_fa1(const KernelSpec *k) {
  Module *m = module_create();
  if (lower_one(m, k, stdout) && module_verify(m, "lowering", stdout) == 0)
    module_print(stdout, m);
  module_destroy(m);
}

/* Kernels the compiler refuses on purpose (dropout) are skipped. */
static bool lowerable(const KernelSpec *k) {
  return !(k->dropout > 0);
}

static int test_file(const char *path, const Opts *o, int *kindex, Stats *st) {
  size_t len = 0;
  char *text = read_file(path, &len);
  if (!text) {
    fprintf(stderr, "difftest: cannot read %s\n", path);
    return 1;
  }
  int nerr = 0;
  Ast *ast = fe_parse(path, text, len, &nerr);
  SpecFile *sf = nerr ? NULL : fe_check(ast, &nerr);
  if (!sf || nerr) {
    fprintf(stderr, "difftest: %s has errors\n", path);
    fe_free_ast(ast);
    free(text);
    return 1;
  }
  for (int i = 0; i < sf->nkernels; i++) {
    KernelSpec k = *sf->kernels[i];
    if (!lowerable(&k) && !o->emit) {
      printf("SKIP %s: mode/dropout not compiled yet\n", k.name);
      continue;
    }
    if (o->quick)
      shrink(&k);
    if (o->emit)
      emit_fa1(&k);
    else
      test_kernel(&k, (*kindex)++, o, st);
  }
  fe_free_spec(sf);
  fe_free_ast(ast);
  free(text);
  return 0;
}

static void print_spec(const KernelSpec *k) {
  printf("# %s: dtype=%s d=%d dv=%d heads=%d kv=%d scale=%g mode=%d\n#   mask: ", k->name,
         k->dtype == DTYPE_F16 ? "f16" : "bf16", k->head_dim, k->v_head_dim, k->heads, k->kv_heads,
         k->scale, (int)k->mode);
  if (k->mask)
    fe_print_expr(stdout, k->mask);
  else
    printf("none");
  printf("\n#   score: ");
  if (k->score)
    fe_print_expr(stdout, k->score);
  else
    printf("s");
  printf("\n");
}

static void test_generated(int n, uint64_t seed, const Opts *o, int *kindex, Stats *st) {
  for (int i = 0; i < n; i++) {
    uint64_t r = seed * 7919 + (uint64_t)i;
    rng_next(&r);
    KernelSpec k;
    char name[64];
    snprintf(name, sizeof name, "gen_s%llu_%d", (unsigned long long)seed, i);
    gen_spec(&r, &k, name);
    if (o->verbose)
      print_spec(&k);
    test_kernel(&k, (*kindex)++, o, st);
    pool_free();
  }
}

/* --selftest: the interpreter's rounding and its refusal of bad input. */
static int selftest(void) {
  struct {
    double x;
    ElemType e;
    double want;
  } cases[] = {
      {1 + 0x1p-8, ELEM_BF16, 1},                  /* tie -> even */
      {1 + 3 * 0x1p-8, ELEM_BF16, 1 + 0x1p-6},     /* tie -> even (up) */
      {1 + 0x1p-8 + 0x1p-30, ELEM_BF16, 1 + 0x1p-7}, /* above the tie */
      {-3.14159, ELEM_BF16, -3.140625},
      {0x1.ffp127, ELEM_BF16, INFINITY},          /* overflow */
      {0x1p-133, ELEM_BF16, 0x1p-133},            /* bf16 subnormal kept */
      {65519, ELEM_F16, 65504},
      {65520, ELEM_F16, INFINITY},                /* tie to 65536 -> inf */
      {0x1p-25, ELEM_F16, 0},                     /* subnormal tie -> even 0 */
      {3 * 0x1p-26, ELEM_F16, 0x1p-24},
      {1 + 0x1p-11, ELEM_F16, 1},
      {0.1, ELEM_F32, (double)0.1f},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double got = interp_round(cases[i].x, cases[i].e);
    bool ok = got == cases[i].want;
    printf("%s round %a to %s: %a\n", ok ? "PASS" : "FAIL", cases[i].x, elem_name(cases[i].e), got);
    bad += !ok;
  }
  /* An unbound tensor is an error, not a crash. */
  KernelSpec k = {.name = "t", .loc = {"<selftest>", 1, 1}, .head_dim = 8, .v_head_dim = 8,
                  .heads = 1, .kv_heads = 1, .scale = 1};
  Module *m = module_create();
  Func *f = lower_one(m, &k, stdout);
  char err[256] = "";
  int rc = f ? interp_run(f, NULL, 0, 1, 4, 4, NULL, err, sizeof err) : 0;
  printf("%s unbound tensor: %s\n", rc ? "PASS" : "FAIL", err);
  bad += !rc;
  module_destroy(m);
  printf("%d failed\n", bad);
  return bad ? 1 : 0;
}

int main(int argc, char **argv) {
  Opts o = {.nshapes = NSHAPES, .br = 16, .bc = 16};
  int ngen = 0;
  uint64_t seed = 1;
  int kindex = 0, rc = 0;
  Stats st = {0};
  const char *files[256];
  int nfiles = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--generate") == 0 && i + 1 < argc)
      ngen = atoi(argv[++i]);
    else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
      seed = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--shapes") == 0 && i + 1 < argc)
      o.nshapes = atoi(argv[++i]);
    else if (strcmp(argv[i], "--quick") == 0)
      o.quick = true;
    else if (strcmp(argv[i], "--round") == 0)
      o.round = true;
    else if (strcmp(argv[i], "--selftest") == 0)
      return selftest();
    else if (strcmp(argv[i], "--emit-fa1") == 0)
      o.emit = true;
    else if (strcmp(argv[i], "-v") == 0)
      o.verbose = true;
    else if (argv[i][0] == '-') {
      fprintf(stderr, "usage: difftest [--quick] [--shapes N] [--round] [--emit-fa1] [-v] "
                      "[--generate N [--seed S]] [FILE.fa ...]\n");
      return 2;
    } else if (nfiles < 256)
      files[nfiles++] = argv[i];
  }
  for (int i = 0; i < nfiles; i++)
    rc |= test_file(files[i], &o, &kindex, &st);
  if (ngen > 0)
    test_generated(ngen, seed, &o, &kindex, &st);
  free(g_pool.v);
  printf("%d passed, %d failed\n", st.passed, st.failed);
  return (rc || st.failed) ? 1 : 0;
}
