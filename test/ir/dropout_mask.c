/* dropout_mask.c - dropout's keep decision (ir/dropout.h), issue 18:
 *   1. the tile-IR form (build_dropout_keep, run by the interpreter) equals
 *      the host form on score tiles at odd positions, queries on the rows and
 *      on the columns, for several p; the same for PyTorch's mask
 *      (build_dropout_keep_torch, dropout_keep_torch);
 *   2. half_lt (the binary16 order the keep test uses) against IEEE `<` on
 *      the decoded values, exhaustively in u for a sample of thresholds;
 *      the threshold keeps exactly round(65536 (1 - p)) of the 65536 16-bit
 *      values (binary16 order, the flip bit) for every count 0 .. 65536
 *      near the order's edges and every 97th between; statistics of the
 *      host form over 1.2e7 elements for p = 0.1, 0.17, 0.5: the keep
 *      fraction within 4 sigma of the rate (within 2^-17 of 1 - p);
 *      neighbours along k, q and heads (and k, k+8 and q, q+8, which share
 *      a Philox call) kept together as often as independence says (within
 *      4 sigma of rate^2);
 *   3. another seed, another offset (its low and its high word) give
 *      another mask (about 2 rate (1 - rate) of the elements differ); the
 *      same seed and offset give the same one.
 * Prints a line per check; exits 1 on a failure.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/dropout.h"
#include "out_kernel.h"

static int failures;

static void report(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(bool ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s ", ok ? "PASS" : "FAIL");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  failures += !ok;
}

enum { R = 16, C = 24 };

static Value *u32(Builder *b, uint32_t v) { return build_const(b, type_scalar(ELEM_U32), v); }

/* The interpreter's mask of the R x C tile at (q0, k0) of head bh: queries
 * on the rows, or (transposed) keys on the rows and queries on the columns,
 * as the K/V-outer backward kernels have it; out[r * C + c]. */
static int ir_mask(uint64_t seed, uint64_t offset, uint32_t bh, int q0, int k0, uint32_t thr,
                   bool transposed, bool torch, double *out) {
  Module *m = module_create();
  Func *f = out_kernel(m, "mask", C);
  Builder b = builder_at_end(m, f->body);
  Value *zero = build_index(&b, 0);
  DropoutArgs a = {u32(&b, (uint32_t)seed), u32(&b, (uint32_t)(seed >> 32)), u32(&b, (uint32_t)offset),
                   u32(&b, (uint32_t)(offset >> 32)), u32(&b, thr)};
  Value *keep = (torch ? build_dropout_keep_torch : build_dropout_keep)(
      &b, &a, build_index(&b, bh), type_tile(ELEM_F32, R, C, DIST_NONE), transposed,
      build_index(&b, q0), build_index(&b, k0));
  Value *ops[5] = {f->args[0], zero, zero, zero, build_cast(&b, keep, ELEM_F32)};
  build_op(&b, OP_STORE, ops, 5, NULL, 0, 0);
  build_op(&b, OP_RETURN, NULL, 0, NULL, 0, 0);
  int rc = run_out_kernel("dropout_mask", m, f, out, R, C);
  module_destroy(m);
  return rc;
}

static void check_ir(void) {
  static const struct {
    uint64_t seed, offset;
    uint32_t bh;
    int q0, k0;
    double p;
  } cases[] = {{0, 0, 0, 0, 0, 0.1},
               {0x123456789abcdefull, 4096, 3, 17, 40, 0.17},
               {42, 0xffffffff00000010ull, 31, 1023, 8191, 0.5},
               {7, 1ull << 40, 12, 5, 3, 0.0},
               {0xdeadbeefcafef00dull, 77, 1, 64, 128, 0.9},
               /* torch: offset + 32 bh + lane carries into the high word */
               {9, 0x1fffffff0ull, 5, 33, 70, 0.3}};
  for (size_t i = 0; i < 4 * sizeof cases / sizeof cases[0]; i++) {
    size_t ci = i / 4;
    bool tr = i % 2, torch = i / 2 % 2;
    double got[R * C];
    uint32_t thr = torch ? dropout_threshold_torch(cases[ci].p) : dropout_threshold(cases[ci].p);
    if (ir_mask(cases[ci].seed, cases[ci].offset, cases[ci].bh, cases[ci].q0, cases[ci].k0, thr,
                tr, torch, got)) {
      report(false, "tile IR mask %zu: the kernel did not run", i);
      continue;
    }
    int differ = 0, kept = 0;
    for (int r = 0; r < R; r++)
      for (int c = 0; c < C; c++) {
        uint32_t q = (uint32_t)(cases[ci].q0 + (tr ? c : r)), k = (uint32_t)(cases[ci].k0 + (tr ? r : c));
        bool want = (torch ? dropout_keep_torch : dropout_keep)(cases[ci].seed, cases[ci].offset,
                                                                 cases[ci].bh, q, k, thr);
        differ += (got[r * C + c] != 0) != want;
        kept += want;
      }
    report(differ == 0, "tile IR mask == host mask%s, p = %g%s: %d of %d kept",
           torch ? " (torch)" : "", cases[ci].p, tr ? " (keys on rows)" : "", kept, R * C);
  }
}

/* binary16 bit pattern h as a double (NaN for the NaN patterns). */
static double half_value(uint32_t h) {
  int e = (int)(h >> 10 & 31), m = (int)(h & 1023);
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

/* half_lt, the order the GPU's set.lt.f16x2 and setp.lt.f16 compare in,
 * against IEEE's `<` on the decoded values: every pattern u against every
 * 61st threshold pattern and the edges (zeros, infinities, NaNs). */
static void check_half_order(void) {
  static const uint32_t edges[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x7bff, 0xfbff,
                                   0x7c00, 0xfc00, 0x7c01, 0xfe00, 0x3c00, 0xbc00};
  long checked = 0, bad = 0;
  for (uint32_t t = 0; t < 65536; t++) {
    bool edge = false;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
      edge |= edges[i] == t;
    if (!edge && t % 61)
      continue;
    double tv = half_value(t);
    for (uint32_t u = 0; u < 65536; u++, checked++)
      bad += half_lt(u, t) != (half_value(u) < tv);
  }
  report(bad == 0, "half_lt is binary16's ordered <: %ld pairs, %ld wrong", checked, bad);
}

/* For counts n = 0 .. 65536 (those next to the edges of the binary16
 * order, where the threshold's form changes, and every 97th), the threshold
 * for p = 1 - n / 65536 keeps exactly n of the 65536 values, and
 * dropout_keep_rate says so. */
static void check_thresholds(void) {
  static const uint32_t edges[] = {0, 1, 2, 1023, 1024, 2045, 2046, 2047, 2048, 31743, 31744, 31745,
                                   31746, 31747, 32768, 33790, 33791, 33792, 63488, 63489, 63490,
                                   63491, 64512, 65534, 65535, 65536};
  int checked = 0, bad = 0;
  for (uint32_t n = 0; n <= 65536; n++) {
    bool edge = false;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
      edge |= edges[i] == n;
    if (!edge && n % 97)
      continue;
    uint32_t thr = dropout_threshold(1.0 - n / 65536.0), kept = 0;
    for (uint32_t u = 0; u < 65536; u++)
      kept += dropout_keep_bits(u, thr);
    if (kept != n || dropout_keep_rate(thr) != n / 65536.0) {
      if (bad++ < 5)
        printf("  n = %u: threshold 0x%05x keeps %u, rate %.7f\n", n, thr, kept, dropout_keep_rate(thr));
    }
    checked++;
  }
  report(bad == 0, "thresholds keep exactly n of 65536 values: %d counts checked, %d wrong", checked, bad);
}

/* Elements: bh 0..11, q 0..999, k 0..999 (1.2e7). */
enum { NBH = 12, NQ = 1000, NK = 1000 };

static void check_stats(double p) {
  uint32_t thr = dropout_threshold(p);
  double rate = dropout_keep_rate(thr);
  report(fabs(rate - (1 - p)) <= 0x1p-17, "p = %g: rate %.7f, |rate - (1 - p)| = %.2e <= 2^-17", p,
         rate, fabs(rate - (1 - p)));
  const uint64_t seed = 0x5eed5eed12345678ull, offset = 0x10000;
  static unsigned char keep[NBH][NQ][NK];
  /* pairs: (k, k+1), (q, q+1), (head, head+1), and (k, k+8), (q, q+8), which
   * share a Philox call (ir/dropout.h's groups) */
  double n = 0, kept = 0, pairs[5] = {0}, counts[5] = {0};
  for (uint32_t h = 0; h < NBH; h++)
    for (uint32_t q = 0; q < NQ; q++)
      for (uint32_t k = 0; k < NK; k++)
        keep[h][q][k] = dropout_keep(seed, offset, h, q, k, thr);
  for (int h = 0; h < NBH; h++)
    for (int q = 0; q < NQ; q++)
      for (int k = 0; k < NK; k++) {
        n++;
        kept += keep[h][q][k];
        if (k + 1 < NK)
          counts[0]++, pairs[0] += keep[h][q][k] && keep[h][q][k + 1];
        if (q + 1 < NQ)
          counts[1]++, pairs[1] += keep[h][q][k] && keep[h][q + 1][k];
        if (h + 1 < NBH)
          counts[2]++, pairs[2] += keep[h][q][k] && keep[h + 1][q][k];
        if (k + 8 < NK)
          counts[3]++, pairs[3] += keep[h][q][k] && keep[h][q][k + 8];
        if (q + 8 < NQ)
          counts[4]++, pairs[4] += keep[h][q][k] && keep[h][q + 8][k];
      }
  double sd = sqrt(rate * (1 - rate) / n);
  report(fabs(kept / n - rate) <= 4 * sd, "p = %g: kept %.7f of 1.2e7, 4 sigma = %.1e", p, kept / n,
         4 * sd);
  double r2 = rate * rate;
  const char *what[5] = {"k, k+1", "q, q+1", "head, head+1", "k, k+8", "q, q+8"};
  for (int i = 0; i < 5; i++) {
    double f = pairs[i] / counts[i], s = sqrt(r2 * (1 - r2) / counts[i]);
    report(fabs(f - r2) <= 4 * s, "p = %g: neighbours %s both kept %.7f, rate^2 %.7f", p, what[i], f,
           r2);
  }
}

/* The fraction of a 200 x 200 x 4 block whose decision differs between two
 * launches' (seed, offset). */
static double differ(uint64_t s1, uint64_t o1, uint64_t s2, uint64_t o2, uint32_t thr) {
  double d = 0, n = 0;
  for (uint32_t h = 0; h < 4; h++)
    for (uint32_t q = 0; q < 200; q++)
      for (uint32_t k = 0; k < 200; k++, n++)
        d += dropout_keep(s1, o1, h, q, k, thr) != dropout_keep(s2, o2, h, q, k, thr);
  return d / n;
}

static void check_streams(void) {
  uint32_t thr = dropout_threshold(0.5);
  double want = 0.5, tol = 4 * sqrt(want * (1 - want) / 160000.0);
  double same = differ(1, 2, 1, 2, thr), seed = differ(1, 2, 3, 2, thr);
  double off_lo = differ(1, 2, 1, 3, thr), off_hi = differ(1, 2, 1, 2 + (1ull << 32), thr);
  report(same == 0, "same seed and offset: %.4f of the elements differ", same);
  report(fabs(seed - want) <= tol, "another seed: %.4f differ (%.2f expected, 4 sigma %.4f)", seed, want, tol);
  report(fabs(off_lo - want) <= tol, "offset + 1: %.4f differ (%.2f expected, 4 sigma %.4f)", off_lo, want, tol);
  report(fabs(off_hi - want) <= tol, "offset + 2^32: %.4f differ (%.2f expected, 4 sigma %.4f)", off_hi, want,
         tol);
}

int main(void) {
  check_ir();
  check_half_order();
  check_thresholds();
  check_stats(0.1);
  check_stats(0.17);
  check_stats(0.5);
  check_streams();
  printf("%d failures\n", failures);
  return failures != 0;
}
