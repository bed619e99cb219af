/* difftest_decode.c - difftest's decode kernels (mode = decode): q_len
 * tokens against per-sequence cache lengths, contiguous or paged caches with
 * stale rows poisoned, several split counts for split-kv programs; the
 * module's kernels run in order (the combine kernel last).
 */
#include "test/interp/difftest.h"


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
  Inputs run; /* the spec's run-time inputs (run.ins; the rest unused) */
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
  Shape rs = {s->batch, s->q_len, 0};
  make_run_inputs(k, &rs, &seed, &in.run);
  ref_use_inputs(&in.run);
  ref_attention_decode(k, s->batch, s->q_len, s->lens, &q, &kt, &v, in.paged ? &pg : NULL, &o, &l);
  ref_use_inputs(NULL);
  return in;
}

static void free_dinputs(DInputs *in) {
  Buf *bs[] = {&in->q, &in->k, &in->v, &in->ro, &in->rlse, &in->o, &in->lse, &in->seqlens,
               &in->table};
  for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
    free(bs[i]->data);
  free_run_inputs(&in->run);
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
  if (!variant_ready(what, v, &in->o, &in->lse, st))
    return;
  InterpBinding b[7 + SPEC_MAX_INPUTS] = {bind("q", &in->q), bind("k", &in->k), bind("v", &in->v),
                                          bind("o", &in->o), bind("lse", &in->lse),
                                          bind("cache_seqlens", &in->seqlens),
                                          bind("block_table", &in->table)};
  int nb = bind_inputs(&in->run, b, in->paged ? 7 : 6);
  InterpOptions io = variant_options(v, o);
  InterpSizes sz = {.batch = s->batch, .seqlen_q = s->q_len, .seqlen_k = in->capacity,
                    .nsplit = nsplit, .num_pages = in->num_pages, .max_pages = in->max_pages};
  char err[512];
  if (interp_run_module(v->m, b, nb, &sz, &io, err, sizeof err) != 0) {
    printf("FAIL %s: %s\n", what, err);
    st->failed++;
    return;
  }
  Shape cs = {s->batch, s->q_len, 0};
  report_output(k, &cs, &in->o, &in->lse, &in->ro, &in->rlse, what, o, st);
}

/* Every variant on every decode shape; kernels that split (an %nsplit
 * argument) with each split count. */
void test_decode(const KernelSpec *k, int kindex, const Variant *vs, int nv, int nshapes,
                 const Opts *o, Stats *st) {
  int nds = nshapes < 0 ? NDSHAPES : nshapes;
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

