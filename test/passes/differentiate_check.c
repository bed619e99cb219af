/* differentiate_check - the differentiate pass against the interpreter's own
 * grad (forward mode with dual numbers, ir/interp.c) and against derivatives
 * worked out by hand.
 *
 * Each case is a kernel that loads x (a 4 x 8 tile, or a 4 x 1 column),
 * computes a score modifier y from it, and stores grad(y, x). The kernel
 * runs in the interpreter (float64, casts exact) before the pass and after
 * it; both results must match the hand-derived f'(x) at every point to
 * 1e-12 (relative above 1). Prints `ok NAME` per case or FAIL lines, then
 * `all differentiate checks passed`; exits 1 on any failure. Run by
 * test/passes/differentiate-interp.test.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/interp.h"
#include "ir/ir.h"
#include "passes/passes.h"

enum { R = 4, C = 8 };

static int failures;

/* The points x takes: across zero, with ties of max(s, 0.5) and exact zeros. */
static double point(int r, int c) { return -3.0 + 0.25 * (r * C + c) - (r == 2 ? 0.125 : 0); }

typedef struct Case {
  const char *name;
  bool column;    /* x is the 4 x 1 column %xc (broadcast against 1 x 8 rows) */
  const char *body; /* ops computing %y from %s */
  double (*want)(double s, int r, int c);
} Case;

static double w_one(double s, int r, int c) { (void)s, (void)r, (void)c; return 1; }
static double w_softcap(double s, int r, int c) {
  (void)r, (void)c;
  double t = tanh(s / 2);
  return 1 - t * t;
}
static double w_square(double s, int r, int c) { (void)r, (void)c; return 2 * s; }
static double w_quotient(double s, int r, int c) {
  (void)r, (void)c;
  double q = s * s + 1;
  return (1 - s * s) / (q * q);
}
static double w_softplus(double s, int r, int c) {
  (void)r, (void)c;
  return exp(s) / (exp(s) + 1);
}
static double w_max(double s, int r, int c) { (void)r, (void)c; return s >= 0.5 ? 1 : 0; }
static double w_select(double s, int r, int c) { (void)r, (void)c; return s < 0 ? -1 : 3; }
static double w_cast(double s, int r, int c) { (void)s, (void)r, (void)c; return 2; }
static double w_mask(double s, int r, int c) { (void)r, (void)c; return s > -1 ? 2 * s : 0; }
static double w_column(double s, int r, int c) { (void)r; return exp(s) * c; }
static double w_sink(double s, int r, int c) {
  (void)r, (void)c;
  double sign = s < 0 ? -1 : 1, a = fabs(s);
  return log(2) * exp2(s)                         /* exp2(s) */
         + sign / ((a + 1) * log(2))              /* log2(abs(s) + 1) */
         + sign * 0.5 / sqrt(a + 1)               /* sqrt(abs(s) + 1) */
         + (s == 0 ? 0 : -1 / (s * s))            /* recip(s): 0 at 0 */
         + 0                                      /* floor(s) */
         + 1                                      /* rem(s, 1.5) */
         - (s <= 0 ? 1 : 0)                       /* min(s, 0): a tie takes s */
         - 1;                                     /* neg(s) */
}

static const Case cases[] = {
    {"identity", false, "  %y = add %s, %s0 : tile<4x8xf32>\n", w_one},
    {"softcap", false,
     "  %c = const {value = 2.0} : f32\n"
     "  %0 = div %s, %c : tile<4x8xf32>\n"
     "  %t = tanh %0 : tile<4x8xf32>\n"
     "  %y = mul %c, %t : tile<4x8xf32>\n",
     w_softcap},
    /* the cap a value (not a constant: a run-time scalar's shape): the
     * chain rule's (1 / c)(1 - t^2) c cancels to 1 - t^2 */
    {"softcap_value", false,
     "  %c1 = const {value = 1.5} : f32\n"
     "  %c2 = const {value = 0.5} : f32\n"
     "  %c = add %c1, %c2 : f32\n"
     "  %0 = div %s, %c : tile<4x8xf32>\n"
     "  %t = tanh %0 : tile<4x8xf32>\n"
     "  %y = mul %c, %t : tile<4x8xf32>\n",
     w_softcap},
    {"alibi", false,
     "  %slope = const {value = 0.25} : f32\n"
     "  %qi = iota {axis = 0} : tile<4x1xindex>\n"
     "  %ki = iota {axis = 1} : tile<1x8xindex>\n"
     "  %d = sub %qi, %ki : tile<4x8xindex>\n"
     "  %df = cast %d : tile<4x8xf32>\n"
     "  %b = mul %slope, %df : tile<4x8xf32>\n"
     "  %y = sub %s, %b : tile<4x8xf32>\n",
     w_one},
    {"square", false, "  %y = mul %s, %s : tile<4x8xf32>\n", w_square},
    {"quotient", false,
     "  %one = const {value = 1.0} : f32\n"
     "  %ss = mul %s, %s : tile<4x8xf32>\n"
     "  %den = add %ss, %one : tile<4x8xf32>\n"
     "  %y = div %s, %den : tile<4x8xf32>\n",
     w_quotient},
    {"softplus", false,
     "  %one = const {value = 1.0} : f32\n"
     "  %e = exp %s : tile<4x8xf32>\n"
     "  %e1 = add %e, %one : tile<4x8xf32>\n"
     "  %y = log %e1 : tile<4x8xf32>\n",
     w_softplus},
    {"max", false,
     "  %h = const {value = 0.5} : f32\n"
     "  %y = max %s, %h : tile<4x8xf32>\n",
     w_max},
    {"select", false,
     "  %z = const {value = 0.0} : f32\n"
     "  %three = const {value = 3.0} : f32\n"
     "  %neg = cmp %s, %z {pred = lt} : tile<4x8xi1>\n"
     "  %a = neg %s : tile<4x8xf32>\n"
     "  %b = mul %s, %three : tile<4x8xf32>\n"
     "  %y = select %neg, %a, %b : tile<4x8xf32>\n",
     w_select},
    {"cast", false,
     "  %two = const {value = 2.0} : f32\n"
     "  %a = mul %s, %two : tile<4x8xf32>\n"
     "  %h = cast %a : tile<4x8xf16>\n"
     "  %y = cast %h : tile<4x8xf32>\n",
     w_cast},
    {"mask", false,
     "  %m1 = const {value = -1.0} : f32\n"
     "  %keep = cmp %s, %m1 {pred = gt} : tile<4x8xi1>\n"
     "  %sq = mul %s, %s : tile<4x8xf32>\n"
     "  %y = mask %sq, %keep : tile<4x8xf32>\n",
     w_mask},
    {"column", true,
     "  %ki = iota {axis = 1} : tile<1x8xindex>\n"
     "  %kf = cast %ki : tile<1x8xf32>\n"
     "  %e = exp %s : tile<4x1xf32>\n"
     "  %y = mul %e, %kf : tile<4x8xf32>\n",
     w_column},
    {"sink", false,
     "  %z = const {value = 0.0} : f32\n"
     "  %one = const {value = 1.0} : f32\n"
     "  %p = const {value = 1.5} : f32\n"
     "  %a = abs %s : tile<4x8xf32>\n"
     "  %a1 = add %a, %one : tile<4x8xf32>\n"
     "  %t0 = exp2 %s : tile<4x8xf32>\n"
     "  %t1 = log2 %a1 : tile<4x8xf32>\n"
     "  %t2 = sqrt %a1 : tile<4x8xf32>\n"
     "  %t3 = recip %s : tile<4x8xf32>\n"
     "  %t4 = floor %s : tile<4x8xf32>\n"
     "  %t5 = rem %s, %p : tile<4x8xf32>\n"
     "  %t6 = min %s, %z : tile<4x8xf32>\n"
     "  %t7 = neg %s : tile<4x8xf32>\n"
     "  %u0 = add %t0, %t1 : tile<4x8xf32>\n"
     "  %u1 = add %u0, %t2 : tile<4x8xf32>\n"
     "  %u2 = add %u1, %t3 : tile<4x8xf32>\n"
     "  %u3 = add %u2, %t4 : tile<4x8xf32>\n"
     "  %u4 = add %u3, %t5 : tile<4x8xf32>\n"
     "  %u5 = sub %u4, %t6 : tile<4x8xf32>\n"
     "  %y = add %u5, %t7 : tile<4x8xf32>\n",
     w_sink},
};

/* The kernel of case k: x (%s) loaded, the body, grad, stored to %o. */
static char *kernel_text(const Case *k) {
  static const char head[] =
      "kernel @k(%x: tensor<f32, [batch, seqlen_q, 1, 8]>, %xc: tensor<f32, [batch, 1, seqlen_q]>,\n"
      "          %o: tensor<f32, [batch, seqlen_q, 1, 8]>, %batch: index, %seqlen_q: index,\n"
      "          %seqlen_k: index) {\n"
      "  %c0 = const {value = 0} : index\n"
      "  %s0 = full {value = 0.0} : tile<4x8xf32>\n";
  const char *load = k->column ? "  %s = load %xc, %c0, %c0, %c0 : tile<4x1xf32>\n"
                               : "  %s = load %x, %c0, %c0, %c0 : tile<4x8xf32>\n";
  static const char tail[] = "  %g = grad %y, %s : tile<4x8xf32>\n"
                             "  store %o, %c0, %c0, %c0, %g\n"
                             "  return\n"
                             "}\n";
  size_t n = strlen(head) + strlen(load) + strlen(k->body) + strlen(tail) + 1;
  char *t = malloc(n);
  if (t)
    snprintf(t, n, "%s%s%s%s", head, load, k->body, tail);
  return t;
}

/* Runs kernel f on x; out gets the stored gradient. */
static bool run(const Func *f, const double *x, double *out) {
  double xc[R];
  for (int r = 0; r < R; r++)
    xc[r] = x[r * C + 1];
  for (int i = 0; i < R * C; i++)
    out[i] = NAN;
  double *xv = (double *)x;
  InterpBinding bs[3] = {
      {"x", xv, {1, R, 1, C}, {R * C, C, C, 1}},
      {"xc", xc, {1, 1, R}, {R, R, 1}},
      {"o", out, {1, R, 1, C}, {R * C, C, C, 1}},
  };
  InterpOptions o;
  interp_options_init(&o);
  o.round_casts = false; /* exact float64: the derivative of a cast is then exact too */
  char err[512];
  if (interp_run(f, bs, 3, 1, R, R, &o, err, sizeof err) != 0) {
    printf("FAIL interp: %s\n", err);
    return false;
  }
  return true;
}

static bool close_to(double got, double want) {
  return fabs(got - want) <= 1e-12 * fmax(1, fabs(want));
}

/* Every element of got against the hand-derived derivative. */
static bool check_values(const Case *k, const char *when, const double *x, const double *got) {
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) {
      double s = k->column ? x[r * C + 1] : x[r * C + c];
      double want = k->want(s, r, c), g = got[r * C + c];
      if (!close_to(g, want)) {
        printf("FAIL %s (%s): at x = %g (%d, %d): %.17g, want %.17g\n", k->name, when, s, r, c, g,
               want);
        return false;
      }
    }
  return true;
}

static bool has_grad(const Block *b) {
  for (const Op *op = b->first; op; op = op->next) {
    if (op->kind == OP_GRAD)
      return true;
    for (int i = 0; i < op->nregions; i++)
      if (has_grad(op->regions[i]))
        return true;
  }
  return false;
}

static void check_case(const Case *k) {
  char *text = kernel_text(k);
  Module *m = text ? module_parse(k->name, text, strlen(text), stdout) : NULL;
  if (!m || module_verify(m, "parsing", stdout) != 0) {
    printf("FAIL %s: does not parse or verify\n", k->name);
    failures++;
    free(text);
    module_destroy(m);
    return;
  }
  double x[R * C], before[R * C], after[R * C];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++)
      x[r * C + c] = point(r, c);
  bool ok = run(m->funcs[0], x, before) && check_values(k, "interpreter", x, before);
  PassOptions po;
  pass_options_init(&po);
  po.only = "differentiate";
  po.diag = stdout;
  if (ok && (run_pipeline(m, &po) != 0 || has_grad(m->funcs[0]->body))) {
    printf("FAIL %s: the pass failed or left a grad\n", k->name);
    ok = false;
  }
  ok = ok && run(m->funcs[0], x, after) && check_values(k, "after the pass", x, after);
  for (int i = 0; ok && i < R * C; i++)
    if (!close_to(after[i], before[i])) {
      printf("FAIL %s: element %d: %.17g after the pass, %.17g before\n", k->name, i, after[i],
             before[i]);
      ok = false;
    }
  if (ok)
    printf("ok %s\n", k->name);
  else
    failures++;
  module_destroy(m);
  free(text);
}

/* A chain the interpreter cannot differentiate either (a row max of x):
 * an error naming the op, not a number. */
static void check_interp_refuses(void) {
  static const Case k = {"refused", false,
                         "  %m = rowmax %s : tile<4x1xf32>\n"
                         "  %y = sub %s, %m : tile<4x8xf32>\n",
                         w_one};
  char *text = kernel_text(&k);
  Module *m = text ? module_parse(k.name, text, strlen(text), stdout) : NULL;
  double x[R * C] = {0}, out[R * C];
  double xc[R] = {0};
  InterpBinding bs[3] = {
      {"x", x, {1, R, 1, C}, {R * C, C, C, 1}},
      {"xc", xc, {1, 1, R}, {R, R, 1}},
      {"o", out, {1, R, 1, C}, {R * C, C, C, 1}},
  };
  char err[512] = "";
  int rc = m ? interp_run(m->funcs[0], bs, 3, 1, R, R, NULL, err, sizeof err) : 0;
  if (rc == 0 || !strstr(err, "rowmax: grad: cannot differentiate")) {
    printf("FAIL refused: rc %d, %s\n", rc, err);
    failures++;
  } else {
    printf("ok interpreter refuses: %s\n", strstr(err, "rowmax"));
  }
  module_destroy(m);
  free(text);
}

int main(void) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_case(&cases[i]);
  check_interp_refuses();
  if (failures)
    printf("%d case(s) failed\n", failures);
  else
    printf("all differentiate checks passed\n");
  return failures ? 1 : 0;
}
