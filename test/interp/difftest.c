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
 * each optional pass disabled; a kernel with dropout also runs NAME_dropout
 * (and its backward) with the spec's p against the reference with the same
 * mask (ir/dropout.h's host form). O and LSE must match the reference (max abs
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
#include "test/interp/difftest.h"

/* Tile-aligned and ragged lengths, seqlen_q != seqlen_k both ways, a single
 * query row against many keys (decode-like); causal with seqlen_q > seqlen_k
 * gives fully masked rows. */
static const Shape kShapes[] = {
    {1, 1, 1}, {2, 17, 17}, {1, 113, 113}, {2, 17, 113}, {1, 113, 17}, {1, 1, 113}, {2, 32, 48},
};
enum { NSHAPES = sizeof kShapes / sizeof kShapes[0] };

/* ------------------------------------------------------------- programs */


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

/* The module of v as printed, or NULL (v failed, or no memory). */
static char *print_module(const Variant *v) {
  if (!v->f)
    return NULL;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f)
    return NULL;
  module_print(f, v->m);
  fclose(f);
  return text;
}

/* Adds v to out[0..n) unless an earlier variant is the same program (the
 * same printed module and tile sizes: a pass that changed nothing, or a
 * disabled one that would not have fired), whose run would only repeat
 * that one's; it then takes v's copies flag. Returns the new count. */
static int add_variant(Variant *out, int n, Variant v) {
  v.ir = print_module(&v);
  for (int i = 0; v.ir && i < n; i++)
    if (out[i].ir && out[i].br == v.br && out[i].bc == v.bc && strcmp(out[i].ir, v.ir) == 0) {
      out[i].copies |= v.copies;
      free(v.ir);
      module_destroy(v.m);
      return n;
    }
  out[n] = v;
  return n + 1;
}

/* The variants of one kernel: FA1 at two tile shapes, each pipeline prefix,
 * and the full pipeline without each optional pass; each distinct program
 * once (add_variant). */
static int make_variants(const KernelSpec *k, const Opts *o, Variant *out, int cap) {
  int n = 0;
  n = add_variant(out, n, make_variant(k, NULL, "fa1", o->br, o->bc));
  if (n < cap)
    n = add_variant(out, n, make_variant(k, NULL, "fa1-br32-bc8", 32, 8));
#ifndef DIFFTEST_NO_PASSES
  int npasses = 0;
  const Pass *ps = pass_pipeline(&npasses);
  for (int i = 1; i <= npasses && n < cap; i++) {
    PassOptions po;
    pass_options_init(&po);
    po.max_passes = i;
    char name[96];
    snprintf(name, sizeof name, "after-%d-%s", i, ps[i - 1].name);
    Variant v = make_variant(k, &po, name, o->br, o->bc);
    v.copies = i == npasses;
    n = add_variant(out, n, v);
  }
  for (int i = 0; i < npasses && n < cap; i++) {
    if (ps[i].required)
      continue;
    PassOptions po;
    pass_options_init(&po);
    po.disabled[po.ndisabled++] = ps[i].name;
    char name[96];
    snprintf(name, sizeof name, "full-without-%s", ps[i].name);
    Variant v = make_variant(k, &po, name, o->br, o->bc);
    v.copies = true;
    n = add_variant(out, n, v);
  }
#endif
  return n;
}

/* --------------------------------------------------------------- buffers */


Buf buf_make(int rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3, int pad) {
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

void buf_fill(Buf *b, uint64_t *seed, double amp) {
  for (size_t i = 0; i < b->n; i++)
    b->data[i] = amp * (2 * rng_unit(seed) - 1);
}

void buf_poison(Buf *b) {
  for (size_t i = 0; i < b->n; i++)
    b->data[i] = NAN;
}

InterpBinding bind(const char *name, const Buf *b) {
  InterpBinding r = {.name = name, .data = b->data};
  for (int i = 0; i < 4; i++) {
    r.dims[i] = b->dims[i];
    r.strides[i] = b->strides[i];
  }
  return r;
}

void free_run_inputs(Inputs *in) {
  for (int i = 0; i < in->nins; i++)
    free(in->ins[i].data);
  in->nins = 0;
}

void ref_use_inputs(const Inputs *in) {
  static RefTensor rins[SPEC_MAX_INPUTS];
  for (int i = 0; in && i < in->nins; i++)
    rins[i] = ref_t(&in->ins[i]);
  ref_set_inputs(in && in->nins ? rins : NULL);
}

int bind_inputs(const Inputs *in, InterpBinding *b, int n) {
  for (int i = 0; i < in->nins; i++)
    b[n++] = bind(in->in_names[i], &in->ins[i]);
  return n;
}

RefTensor ref_t(const Buf *b) {
  RefTensor r = {.data = b->data};
  for (int i = 0; i < 4; i++)
    r.strides[i] = b->strides[i];
  return r;
}

double *b_at(const Buf *b, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return b->data + i0 * b->strides[0] + i1 * b->strides[1] + i2 * b->strides[2] +
         i3 * b->strides[3];
}

InterpSizes run_sizes(const Shape *s, const Inputs *in) {
  return (InterpSizes){.batch = s->batch, .seqlen_q = s->sq, .seqlen_k = s->sk, .nsplit = 1,
                       .dropout_p = in->drop.p, .seed = in->drop.seed, .offset = in->drop.offset};
}

Func *variant_func(const Variant *v, const char *suffix) {
  char want[256];
  snprintf(want, sizeof want, "%s%s", v->f ? v->f->name : "", suffix);
  for (int i = 0; v->f && i < v->m->nfuncs; i++)
    if (strcmp(v->m->funcs[i]->name, want) == 0)
      return v->m->funcs[i];
  return NULL;
}

InterpOptions variant_options(const Variant *v, const Opts *o) {
  InterpOptions io;
  interp_options_init(&io);
  io.br = v->br;
  io.bc = v->bc;
  io.round_casts = o->round;
  return io;
}

/* ------------------------------------------------------------ comparison */


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


void make_run_inputs(const KernelSpec *k, const Shape *s, uint64_t *seed, Inputs *in) {
  in->nins = k->ninputs;
  for (int i = 0; i < k->ninputs; i++) {
    const SpecInput *x = &k->inputs[i];
    int64_t d[4] = {1, 0, 0, 0};
    for (int j = 0; j < x->rank; j++)
      d[j] = x->dims[j] == SPEC_DIM_BATCH      ? s->batch
             : x->dims[j] == SPEC_DIM_SEQLEN_Q ? s->sq
             : x->dims[j] == SPEC_DIM_SEQLEN_K ? s->sk
                                               : x->dims[j];
    Buf *b = &in->ins[i];
    *b = buf_make(x->rank ? x->rank : 1, d[0], d[1], d[2], d[3], 0);
    for (size_t e = 0; e < b->n; e++) {
      double u = rng_unit(seed);
      b->data[e] = x->type != INPUT_I32 ? (x->rank ? 2 * u - 1 : 0.5 + 2.5 * u)
                   : x->rank          ? floor(4 * u)
                                      : 1 + floor(40 * u);
    }
    snprintf(in->in_names[i], sizeof in->in_names[i], "in_%s", x->name);
  }
}

static Inputs make_inputs(const KernelSpec *k, const Shape *s, uint64_t seed, RefDropout drop) {
  Inputs in = {.drop = drop};
  make_run_inputs(k, s, &seed, &in);
  ref_use_inputs(&in);
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
  ref_attention(k, s->batch, s->sq, s->sk, &q, &kt, &v, &o, &l, &in.drop);
  ref_use_inputs(NULL);
  return in;
}

static void free_inputs(Inputs *in) {
  Buf *bs[] = {&in->q, &in->k, &in->v, &in->ro, &in->rlse, &in->o, &in->lse};
  for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
    free(bs[i]->data);
  free_run_inputs(in);
}

/* Runs f of variant v on in's tensors (outputs poisoned first) and checks
 * O and LSE against the reference; `what` names the run. */
static void run_kernel(const KernelSpec *k, const Variant *v, Func *f, const Shape *s, Inputs *in,
                       const Opts *o, const char *what, Stats *st) {
  buf_poison(&in->o);
  buf_poison(&in->lse);
  InterpBinding b[5 + SPEC_MAX_INPUTS] = {bind("q", &in->q), bind("k", &in->k), bind("v", &in->v),
                                          bind("o", &in->o), bind("lse", &in->lse)};
  int nb = bind_inputs(in, b, 5);
  InterpOptions io = variant_options(v, o);
  InterpSizes sz = run_sizes(s, in);
  char err[512];
  if (interp_run_sizes(f, b, nb, &sz, &io, err, sizeof err) != 0) {
    printf("FAIL %s: %s\n", what, err);
    st->failed++;
    return;
  }
  report_output(k, s, &in->o, &in->lse, &in->ro, &in->rlse, what, o, st);
}

/* The module's copies of kernel f that a launch may take instead of it
 * (runtime/launch.c): the long-rows kernel (long_rows_of), the gathered
 * copy of a staged input (gather_of). */
static bool is_copy_of(const Func *c, const Func *f) {
  static const char *const keys[] = {"long_rows_of", "gather_of"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (strcmp(attr_str(&c->attrs, keys[i], ""), f->name) == 0)
      return true;
  return false;
}

static void run_variant(const KernelSpec *k, const Variant *v, const Shape *s, uint64_t seed,
                        Inputs *in, const Opts *o, Stats *st) {
  char what[256];
  snprintf(what, sizeof what, "%.80s %.90s%s B=%lld Sq=%lld Sk=%lld seed=%llu", k->name, v->name,
           in->drop.p > 0 ? " dropout" : "", (long long)s->batch, (long long)s->sq,
           (long long)s->sk, (unsigned long long)seed);
  if (!variant_ready(what, v, &in->o, &in->lse, st))
    return;
  Func *f = in->drop.p > 0 ? variant_func(v, "_dropout") : v->f;
  if (!f) {
    printf("FAIL %s: no kernel %s_dropout\n", what, v->f->name);
    st->failed++;
    return;
  }
  run_kernel(k, v, f, s, in, o, what, st);
  for (int i = 0; v->copies && i < v->m->nfuncs; i++) {
    Func *c = v->m->funcs[i];
    if (!is_copy_of(c, f))
      continue;
    snprintf(what, sizeof what, "%.80s %.60s (%.40s)%s B=%lld Sq=%lld Sk=%lld seed=%llu",
             k->name, v->name, c->name, in->drop.p > 0 ? " dropout" : "", (long long)s->batch,
             (long long)s->sq, (long long)s->sk, (unsigned long long)seed);
    run_kernel(k, v, c, s, in, o, what, st);
  }
}

bool variant_ready(const char *what, const Variant *v, Buf *o, Buf *lse, Stats *st) {
  if (!v->f) {
    printf("FAIL %s: lowering or pipeline failed\n", what);
    st->failed++;
    return false;
  }
  buf_poison(o);
  buf_poison(lse);
  return true;
}

void report_output(const KernelSpec *k, const Shape *s, const Buf *o, const Buf *lse, const Buf *ro,
                   const Buf *rlse, const char *what, const Opts *opts, Stats *st) {
  Cmp c = compare(k, s, o, lse, ro, rlse);
  double tol = opts->round ? 5e-2 : TOL;
  bool ok = c.nan == 0 && c.lse_inf_mismatch == 0 && c.o_err < tol && c.lse_err < tol;
  printf("%s %s: max|dO|=%.3g max|dLSE|=%.3g nan=%ld lse-inf-mismatch=%ld\n", ok ? "PASS" : "FAIL",
         what, c.o_err, c.lse_err, c.nan, c.lse_inf_mismatch);
  if (ok)
    st->passed++;
  else
    st->failed++;
}

static void test_kernel(const KernelSpec *k, int kindex, const Opts *o, Stats *st) {
  Variant vs[2 + 2 * PASS_MAX_NAMES + 8];
  int nv = make_variants(k, o, vs, (int)(sizeof vs / sizeof vs[0]));
  if (k->mode == MODE_DECODE) {
    test_decode(k, kindex, vs, nv, o->nshapes >= NSHAPES ? -1 : o->nshapes, o, st);
    for (int i = 0; i < nv; i++) {
      module_destroy(vs[i].m);
      free(vs[i].ir);
    }
    return;
  }
  for (int si = 0; si < o->nshapes && si < NSHAPES; si++) {
    const Shape *s = &kShapes[si];
    uint64_t seed = 1000003ull * (uint64_t)(kindex + 1) + (uint64_t)si;
    if ((k->require_q_le_k && s->sq > s->sk) || (k->require_k_le_q && s->sk > s->sq))
      continue; /* the runtime refuses these launches (docs/abi.md, require) */
    /* without dropout; with the spec's p, a seed and an offset whose high
     * words matter */
    RefDropout drops[2] = {{0, 0, 0}, {k->dropout, 0x9e3779b97f4a7c15ull ^ seed, (seed << 33) | 12}};
    for (int di = 0; di < (k->dropout > 0 ? 2 : 1); di++) {
      Inputs in = make_inputs(k, s, seed, drops[di]);
      for (int i = 0; i < nv; i++)
        run_variant(k, &vs[i], s, seed, &in, o, st);
      if (k->grad)
        test_backward(k, vs, nv, s, seed, &in, o, st);
      free_inputs(&in);
    }
  }
  for (int i = 0; i < nv; i++) {
    module_destroy(vs[i].m);
    free(vs[i].ir);
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
  pool_release();
  printf("%d passed, %d failed\n", st.passed, st.failed);
  return (rc || st.failed) ? 1 : 0;
}
