/* difftest_bwd.c - difftest's backward: for a kernel with grad = true,
 * both launches of every variant (atomic: pre, bwd, [bwd_dv,] post;
 * deterministic: pre, bwd_kv, [bwd_dv,] bwd_q) on the forward's inputs,
 * dQ, dK, dV against a float64 reference (test/interp/ref_attention.c).
 */
#include "test/interp/difftest.h"


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
  ref_use_inputs(in);
  ref_attention_backward(k, s->batch, s->sq, s->sk, &q, &kt, &v, &o, &l, &dout, &in->drop, &dq,
                         &dk, &dv);
  ref_use_inputs(NULL);
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
  snprintf(what, sizeof what, "%.80s %.70s %s%s B=%lld Sq=%lld Sk=%lld seed=%llu", k->name,
           v->name, deterministic ? "bwd-det" : "bwd", in->drop.p > 0 ? " dropout" : "",
           (long long)s->batch, (long long)s->sq,
           (long long)s->sk, (unsigned long long)seed);
  static const char *const atomic[3] = {"_bwd_pre", "_bwd", "_bwd_post"};
  static const char *const det[3] = {"_bwd_pre", "_bwd_kv", "_bwd_q"};
  /* pre, K/V-outer, [dV (split-dkdv),] last: the runtime's order */
  Func *fs[4];
  for (int i = 0; i < 3; i++) {
    fs[i] = v->f ? variant_func(v, (deterministic ? det : atomic)[i]) : NULL;
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
  InterpBinding b[11 + SPEC_MAX_INPUTS] = {bind("q", &in->q),        bind("k", &in->k),       bind("v", &in->v),
                         bind("o", &in->ro),       bind("lse", &in->rlse),  bind("dout", &g->dout),
                         bind("delta", &g->delta), bind("dq_acc", &g->dq_acc), bind("dq", &g->dq),
                         bind("dk", &g->dk),       bind("dv", &g->dv)};
  int nb = bind_inputs(in, b, 11);
  int nf = 3;
  Func *dvk = variant_func(v, "_bwd_dv");
  if (dvk) {
    fs[3] = fs[2];
    fs[2] = dvk;
    nf = 4;
  }
  InterpOptions io = variant_options(v, o);
  InterpSizes sz = run_sizes(s, in);
  char err[512];
  for (int i = 0; i < nf; i++)
    if (interp_run_sizes(fs[i], b, nb, &sz, &io, err, sizeof err) != 0) {
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

void test_backward(const KernelSpec *k, const Variant *vs, int nv, const Shape *s, uint64_t seed,
                   Inputs *in, const Opts *o, Stats *st) {
  BwdBufs g = make_bwd(k, s, in, seed);
  for (int i = 0; i < nv; i++)
    for (int det = 0; det < 2; det++)
      run_backward(k, &vs[i], s, seed, in, &g, det, o, st);
  free_bwd(&g);
}
