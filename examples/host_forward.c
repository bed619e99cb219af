/* host_forward.c - run a flashc kernel from a C host program, check and time it.
 *
 *   host_forward KERNEL.ptx [--seed=N] [--batch=N] [--sq=N] [--sk=N] [--iters=N]
 *                           [--device=N] [--check-heads=N]
 *
 * Compiles nothing at run time: loads the PTX flashc wrote (its metadata is
 * in its first lines), makes random inputs from the seed, runs the forward
 * through the runtime, compares O and LSE with a float64 reference on the
 * CPU and times the kernel with CUDA events.
 *
 * Pass rule (a simpler bound than the GPU suite's, documented here): the
 * inputs are exactly representable in the kernel's dtype, so the error comes
 * from the kernel's own rounding (P and O stored in bf16/fp16, float32
 * accumulation). We require max|O - ref| <= 8 * eps * max(1, max|ref|) with
 * eps = 2^-8 for bf16 and 2^-11 for fp16, max|LSE - ref| <= 1e-3 (LSE is
 * float32), no NaN anywhere, and fully masked rows giving O = 0, LSE = -inf.
 * The reference knows masks none and causal (bottom-right aligned), the
 * scale from the metadata (default 1/sqrt(head_dim)) and no score modifier:
 * other kernels are refused with exit code 2. To keep the CPU time small,
 * only --check-heads (batch, head) pairs, spread over all of them, are
 * checked (default 16).
 *
 * Exit codes: 0 pass, 1 fail (or a runtime/CUDA error), 2 usage / unsupported.
 */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashc_runtime.h"

#define CU(call)                                                               \
  do {                                                                         \
    CUresult r_ = (call);                                                      \
    if (r_ != CUDA_SUCCESS) {                                                  \
      const char *n_ = NULL;                                                   \
      cuGetErrorName(r_, &n_);                                                 \
      fprintf(stderr, "host_forward: %s failed: %s\n", #call, n_ ? n_ : "?"); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

typedef struct Opts {
  const char *ptx;
  uint64_t seed;
  long batch, sq, sk, iters, check_heads;
  int device;
} Opts;

/* ---- numbers ------------------------------------------------------------ */

static uint64_t rng_state;

static double uniform01(void) { /* xorshift64*, never exactly 0 */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return ((rng_state * 2685821657736338717ULL >> 11) + 0.5) / 9007199254740992.0;
}

static double normal(void) { /* Box-Muller */
  return sqrt(-2.0 * log(uniform01())) * cos(6.283185307179586 * uniform01());
}

static uint16_t to_bf16(float f) { /* round to nearest even */
  uint32_t x;
  memcpy(&x, &f, 4);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

static double from_bf16(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static uint16_t to_f16(float f) { /* round to nearest even, with subnormals */
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
  int e = (int)((x >> 23) & 0xff);
  if (e == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
  int exp = e - 127 + 15;
  if (exp >= 31) return (uint16_t)(sign | 0x7c00);
  int shift = 13;
  uint32_t m = mant, base = (uint32_t)exp << 10;
  if (exp <= 0) { /* subnormal: units of 2^-24 */
    if (exp < -10) return (uint16_t)sign;
    m = mant | 0x800000;
    shift = 14 - exp;
    base = 0;
  }
  uint32_t h = base + (m >> shift), rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (h & 1))) h++; /* a carry into exp is right */
  return (uint16_t)(sign | h);
}

static double from_f16(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * m * ldexp(1.0, -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * (1.0 + m / 1024.0) * ldexp(1.0, e - 15);
}

static uint16_t to_dtype(fa_dtype dt, float f) { return dt == FA_DTYPE_BF16 ? to_bf16(f) : to_f16(f); }
static double from_dtype(fa_dtype dt, uint16_t h) { return dt == FA_DTYPE_BF16 ? from_bf16(h) : from_f16(h); }

/* ---- the reference ------------------------------------------------------- */

typedef struct Problem {
  const fa_kernel_info *in;
  long b, sq, sk;
  double scale;
  uint16_t *q, *k, *v, *o; /* host copies, contiguous [b, s, h, d] */
  float *lse;              /* [b, h, sq] */
} Problem;

static int kept(const fa_kernel_info *in, long i, long j, long sq, long sk) {
  return in->mask == FA_MASK_CAUSAL ? j <= i + sk - sq : 1;
}

typedef struct Err {
  double o_err, o_ref_max, lse_err;
  long nan, bad_masked;
} Err;

/* Compares one (batch, head) against float64 attention. */
static void check_head(const Problem *p, long b, long h, double *s, Err *e) {
  const fa_kernel_info *in = p->in;
  long H = in->heads, KH = in->kv_heads, D = in->head_dim, DV = in->v_head_dim;
  long kh = h / (H / KH);
  for (long i = 0; i < p->sq; i++) {
    const uint16_t *qi = p->q + ((b * p->sq + i) * H + h) * D;
    double m = -INFINITY;
    for (long j = 0; j < p->sk; j++) {
      s[j] = -INFINITY;
      if (!kept(in, i, j, p->sq, p->sk)) continue;
      const uint16_t *kj = p->k + ((b * p->sk + j) * KH + kh) * D;
      double dot = 0;
      for (long d = 0; d < D; d++) dot += from_dtype(in->dtype, qi[d]) * from_dtype(in->dtype, kj[d]);
      s[j] = dot * p->scale;
      if (s[j] > m) m = s[j];
    }
    double l = 0;
    for (long j = 0; j < p->sk; j++) l += s[j] == -INFINITY ? 0 : exp(s[j] - m);
    const uint16_t *oi = p->o + ((b * p->sq + i) * H + h) * DV;
    float lse = p->lse[(b * H + h) * p->sq + i];
    if (isnan(lse)) e->nan++;
    if (l == 0) { /* fully masked row */
      if (lse != -INFINITY) e->bad_masked++;
      for (long d = 0; d < DV; d++)
        if (from_dtype(in->dtype, oi[d]) != 0.0) e->bad_masked++;
      continue;
    }
    double lerr = fabs((double)lse - (m + log(l)));
    if (!(lerr <= e->lse_err)) e->lse_err = isnan(lerr) ? INFINITY : lerr;
    for (long d = 0; d < DV; d++) {
      double acc = 0;
      for (long j = 0; j < p->sk; j++)
        if (s[j] != -INFINITY)
          acc += exp(s[j] - m) * from_dtype(in->dtype, p->v[((b * p->sk + j) * KH + kh) * DV + d]);
      double ref = acc / l, out = from_dtype(in->dtype, oi[d]);
      if (isnan(out)) e->nan++;
      double err = fabs(out - ref);
      if (err > e->o_err || isnan(err)) e->o_err = isnan(err) ? INFINITY : err;
      if (fabs(ref) > e->o_ref_max) e->o_ref_max = fabs(ref);
    }
  }
}

/* ---- the run ------------------------------------------------------------- */

static int parse_opts(int argc, char **argv, Opts *o) {
  *o = (Opts){NULL, 1, 2, 512, 512, 20, 16, 0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strncmp(a, "--seed=", 7) == 0) o->seed = strtoull(a + 7, NULL, 0);
    else if (strncmp(a, "--batch=", 8) == 0) o->batch = atol(a + 8);
    else if (strncmp(a, "--sq=", 5) == 0) o->sq = atol(a + 5);
    else if (strncmp(a, "--sk=", 5) == 0) o->sk = atol(a + 5);
    else if (strncmp(a, "--iters=", 8) == 0) o->iters = atol(a + 8);
    else if (strncmp(a, "--device=", 9) == 0) o->device = atoi(a + 9);
    else if (strncmp(a, "--check-heads=", 14) == 0) o->check_heads = atol(a + 14);
    else if (a[0] == '-' || o->ptx) return 0;
    else o->ptx = a;
  }
  return o->ptx && o->batch > 0 && o->sq > 0 && o->sk > 0 && o->iters > 0;
}

static uint16_t *random_tensor(fa_dtype dt, size_t n) {
  uint16_t *t = malloc(n * sizeof *t);
  if (!t) exit(1);
  for (size_t i = 0; i < n; i++) t[i] = to_dtype(dt, (float)normal());
  return t;
}

static CUdeviceptr upload(const void *host, size_t bytes) {
  CUdeviceptr d;
  CU(cuMemAlloc(&d, bytes));
  CU(cuMemcpyHtoD(d, host, bytes));
  return d;
}

/* Launches `iters` times between two events; returns milliseconds per run. */
static double time_forward(fa_module *mod, const fa_forward_args *a, long iters) {
  CUevent t0, t1;
  CU(cuEventCreate(&t0, CU_EVENT_DEFAULT));
  CU(cuEventCreate(&t1, CU_EVENT_DEFAULT));
  for (int w = 0; w < 3; w++) fa_forward(mod, a);
  CU(cuEventRecord(t0, NULL));
  for (long i = 0; i < iters; i++)
    if (fa_forward(mod, a) != FA_OK) return -1;
  CU(cuEventRecord(t1, NULL));
  CU(cuEventSynchronize(t1));
  float ms = 0;
  CU(cuEventElapsedTime(&ms, t0, t1));
  cuEventDestroy(t0);
  cuEventDestroy(t1);
  return ms / (double)iters;
}

static long kept_pairs(const fa_kernel_info *in, long sq, long sk) {
  long n = 0;
  for (long i = 0; i < sq; i++) {
    long hi = in->mask == FA_MASK_CAUSAL ? i + sk - sq : sk - 1;
    if (hi >= sk) hi = sk - 1;
    if (hi >= 0) n += hi + 1;
  }
  return n;
}

int main(int argc, char **argv) {
  Opts op;
  if (!parse_opts(argc, argv, &op)) {
    fprintf(stderr, "usage: host_forward KERNEL.ptx [--seed=N] [--batch=N] [--sq=N] [--sk=N] "
                    "[--iters=N] [--device=N] [--check-heads=N]\n");
    return 2;
  }
  CUdevice dev;
  CUcontext cuctx;
  CU(cuInit(0));
  CU(cuDeviceGet(&dev, op.device));
  CU(cuDevicePrimaryCtxRetain(&cuctx, dev)); /* the same context the runtime uses */
  CU(cuCtxSetCurrent(cuctx));

  char err[1024];
  fa_context *ctx = NULL;
  fa_module *mod = NULL;
  fa_status st = fa_context_create(op.device, &ctx, err, sizeof err);
  if (st != FA_OK) {
    fprintf(stderr, "host_forward: %s: %s\n", fa_status_string(st), err);
    return 1;
  }
  if ((st = fa_module_load_ptx_file(ctx, op.ptx, &mod)) != FA_OK) {
    fprintf(stderr, "host_forward: %s: %s\n", fa_status_string(st), fa_context_errmsg(ctx));
    return 1;
  }
  const fa_kernel_info *in = fa_module_info(mod);
  if (in->mask != FA_MASK_NONE && in->mask != FA_MASK_CAUSAL) {
    fprintf(stderr, "host_forward: kernel %s: the CPU reference knows masks none and causal "
                    "only\n", in->kernel);
    return 2;
  }
  printf("kernel %s: %s, head_dim %d/%d, heads %d/%d, mask %s, tile_q %d, threads %d, "
         "smem %d\n", in->kernel, fa_dtype_name(in->dtype), in->head_dim, in->v_head_dim,
         in->heads, in->kv_heads, in->mask == FA_MASK_CAUSAL ? "causal" : "none", in->tile_q,
         in->threads, in->smem_bytes);

  Problem p = {in, op.batch, op.sq, op.sk, in->scale > 0 ? in->scale : 1.0 / sqrt(in->head_dim),
               NULL, NULL, NULL, NULL, NULL};
  size_t nq = (size_t)p.b * p.sq * in->heads * in->head_dim;
  size_t nk = (size_t)p.b * p.sk * in->kv_heads * in->head_dim;
  size_t nv = (size_t)p.b * p.sk * in->kv_heads * in->v_head_dim;
  size_t no = (size_t)p.b * p.sq * in->heads * in->v_head_dim;
  size_t nl = (size_t)p.b * in->heads * p.sq;
  rng_state = op.seed * 0x9E3779B97F4A7C15ULL + 1;
  p.q = random_tensor(in->dtype, nq);
  p.k = random_tensor(in->dtype, nk);
  p.v = random_tensor(in->dtype, nv);
  p.o = malloc(no * 2);
  p.lse = malloc(nl * 4);
  CUdeviceptr dq = upload(p.q, nq * 2), dk = upload(p.k, nk * 2), dv = upload(p.v, nv * 2);
  CUdeviceptr dout, dlse;
  CU(cuMemAlloc(&dout, no * 2));
  CU(cuMemAlloc(&dlse, nl * 4));
  CU(cuMemsetD16(dout, 0xffff, no));    /* NaN in bf16 and fp16: catches unwritten O */
  CU(cuMemsetD32(dlse, 0xffffffffu, nl)); /* NaN float */

  fa_forward_args a;
  memset(&a, 0, sizeof a);
  fa_tensor_contiguous(&a.q, (void *)(uintptr_t)dq, in->dtype, p.b, p.sq, in->heads, in->head_dim);
  fa_tensor_contiguous(&a.k, (void *)(uintptr_t)dk, in->dtype, p.b, p.sk, in->kv_heads, in->head_dim);
  fa_tensor_contiguous(&a.v, (void *)(uintptr_t)dv, in->dtype, p.b, p.sk, in->kv_heads, in->v_head_dim);
  fa_tensor_contiguous(&a.o, (void *)(uintptr_t)dout, in->dtype, p.b, p.sq, in->heads, in->v_head_dim);
  a.lse = (float *)(uintptr_t)dlse;
  if ((st = fa_forward(mod, &a)) != FA_OK) {
    fprintf(stderr, "host_forward: %s: %s\n", fa_status_string(st), fa_module_errmsg(mod));
    return 1;
  }
  CU(cuCtxSynchronize());
  CU(cuMemcpyDtoH(p.o, dout, no * 2));
  CU(cuMemcpyDtoH(p.lse, dlse, nl * 4));

  Err e = {0, 0, 0, 0, 0};
  double *s = malloc((size_t)p.sk * sizeof *s);
  long pairs = p.b * in->heads, step = pairs / (op.check_heads > 0 ? op.check_heads : 1);
  if (step < 1) step = 1;
  long checked = 0;
  for (long bh = 0; bh < pairs; bh += step, checked++) check_head(&p, bh / in->heads, bh % in->heads, s, &e);
  double eps = in->dtype == FA_DTYPE_BF16 ? ldexp(1, -8) : ldexp(1, -11);
  double tol = 8 * eps * (e.o_ref_max > 1 ? e.o_ref_max : 1);
  int pass = e.nan == 0 && e.bad_masked == 0 && e.o_err <= tol && e.lse_err <= 1e-3;
  printf("check: batch %ld seqlen_q %ld seqlen_k %ld seed %llu, %ld of %ld (batch, head) "
         "pairs: max|O-ref| %.3g (tol %.3g), max|LSE-ref| %.3g (tol 1e-3), NaN %ld, bad "
         "masked %ld: %s\n", p.b, p.sq, p.sk, (unsigned long long)op.seed, checked, pairs,
         e.o_err, tol, e.lse_err, e.nan, e.bad_masked, pass ? "PASS" : "FAIL");

  double ms = time_forward(mod, &a, op.iters);
  double flops = 2.0 * (in->head_dim + in->v_head_dim) * (double)p.b * in->heads *
                 (double)kept_pairs(in, p.sq, p.sk);
  if (ms > 0)
    printf("time: %.4f ms per forward (%ld runs, CUDA events), %.2f TFLOP/s\n", ms, op.iters,
           flops / (ms * 1e-3) / 1e12);
  else
    printf("time: failed: %s\n", fa_module_errmsg(mod));
  CU(cuCtxSynchronize());

  fa_module_destroy(mod);
  fa_context_destroy(ctx);
  cuMemFree(dq), cuMemFree(dk), cuMemFree(dv), cuMemFree(dout), cuMemFree(dlse);
  cuDevicePrimaryCtxRelease(dev);
  free(p.q), free(p.k), free(p.v), free(p.o), free(p.lse), free(s);
  return pass && ms > 0 ? 0 : 1;
}
