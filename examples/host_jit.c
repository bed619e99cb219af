/* host_jit.c - compile an attention variant from DSL source at run time and
 * run it: what an inference server embedding flashc does.
 *
 *   host_jit [--device=N] [--sq=N] [--cache=DIR|none]
 *
 * The spec is a string in this program (a GQA, causal, fp16 kernel). It is
 * compiled with fa_module_compile (fa_jit_compile + fa_module_load_ptx): the
 * first run of the program compiles it (a few hundred ms), later runs find
 * the PTX in the kernel cache ($FLASHC_CACHE_DIR, else ~/.cache/flashc).
 * The forward runs on random inputs and is checked against a float64 CPU
 * reference: max|O - ref| <= 8 * 2^-11 * max(1, max|ref|) (fp16 rounding of P
 * and O, float32 accumulation), no NaN.
 *
 * Links flashc_jit (the compiler: LLVM/MLIR) and the CUDA driver, so it runs
 * where both are; CI only builds it. Exit: 0 pass, 1 fail or error, 2 usage.
 */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashc_jit.h"

static const char spec[] =
    "# Compiled at run time by examples/host_jit.c\n"
    "attention jit_gqa_causal {\n"
    "  dtype    = fp16;\n"
    "  head_dim = 64;\n"
    "  heads    = 8;\n"
    "  kv_heads = 2;        # GQA: 4 query heads share one K/V head\n"
    "  mask     = causal;\n"
    "}\n";

#define CU(call)                                                            \
  do {                                                                      \
    CUresult r_ = (call);                                                   \
    if (r_ != CUDA_SUCCESS) {                                               \
      const char *n_ = NULL;                                                \
      cuGetErrorName(r_, &n_);                                              \
      fprintf(stderr, "host_jit: %s failed: %s\n", #call, n_ ? n_ : "?");   \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

/* ---- fp16 ------------------------------------------------------------------ */

/* Inputs are multiples of 1/32 in [-2, 2]: exact in fp16, so only the
 * kernel's own rounding shows in the error. */
static uint16_t f16_exact(float f) {
  if (f == 0.0f)
    return 0;
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u, exp = (u >> 23) & 0xff, man = u & 0x7fffffu;
  return (uint16_t)(sign | ((exp - 127 + 15) << 10) | (man >> 13));
}

static double f16_value(uint16_t h) {
  int exp = (h >> 10) & 31, man = h & 1023;
  double v = exp == 0 ? ldexp(man, -24) : exp == 31 ? (man ? NAN : INFINITY)
                                                    : ldexp(1024 + man, exp - 25);
  return h & 0x8000 ? -v : v;
}

static uint16_t *random_f16(size_t n, uint64_t *state) {
  uint16_t *t = malloc(n * sizeof *t);
  for (size_t i = 0; i < n; i++) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    t[i] = f16_exact((float)((int)(*state >> 33) % 129 - 64) / 32.0f);
  }
  return t;
}

/* ---- reference ---------------------------------------------------------------- */

typedef struct Problem {
  const fa_kernel_info *in;
  long sq, sk;
  const uint16_t *q, *k, *v, *o; /* [1, seqlen, heads, dim] */
} Problem;

/* max |O - ref| over every row, and max |ref|; NaN counts as failing. */
static void check(const Problem *p, double *max_err, double *max_ref) {
  const fa_kernel_info *in = p->in;
  int d = in->head_dim, group = in->heads / in->kv_heads;
  double scale = in->scale > 0 ? in->scale : 1.0 / sqrt(d);
  double *s = malloc(p->sk * sizeof *s), *acc = malloc(d * sizeof *acc);
  *max_err = *max_ref = 0;
  for (int h = 0; h < in->heads; h++)
    for (long i = 0; i < p->sq; i++) {
      long last = i + (p->sk - p->sq); /* causal, bottom-right aligned */
      double m = -INFINITY, l = 0;
      for (long j = 0; j <= last && j < p->sk; j++) {
        double dot = 0;
        for (int c = 0; c < d; c++)
          dot += f16_value(p->q[(i * in->heads + h) * d + c]) *
                 f16_value(p->k[(j * in->kv_heads + h / group) * d + c]);
        s[j] = dot * scale;
        m = fmax(m, s[j]);
      }
      memset(acc, 0, d * sizeof *acc);
      for (long j = 0; j <= last && j < p->sk; j++) {
        double e = exp(s[j] - m);
        l += e;
        for (int c = 0; c < d; c++)
          acc[c] += e * f16_value(p->v[(j * in->kv_heads + h / group) * d + c]);
      }
      for (int c = 0; c < d; c++) {
        double ref = l > 0 ? acc[c] / l : 0, got = f16_value(p->o[(i * in->heads + h) * d + c]);
        double err = fabs(got - ref);
        *max_err = isnan(got) || err > *max_err ? (isnan(got) ? INFINITY : err) : *max_err;
        *max_ref = fmax(*max_ref, fabs(ref));
      }
    }
  free(s);
  free(acc);
}

/* ---- main ------------------------------------------------------------------------- */

static CUdeviceptr upload(const void *host, size_t bytes) {
  CUdeviceptr d;
  CU(cuMemAlloc(&d, bytes));
  CU(cuMemcpyHtoD(d, host, bytes));
  return d;
}

/* Compiles the spec (through the cache) and loads it; prints what happened. */
static fa_module *compile_spec(fa_context *ctx, const char *cache) {
  fa_jit_stats stats;
  fa_jit_options o;
  fa_jit_options_init(&o);
  o.filename = "host_jit.c:spec";
  o.cache_dir = cache;
  o.stats = &stats;
  fa_module *mod = NULL;
  fa_status st = fa_module_compile(ctx, spec, sizeof spec - 1, &o, &mod);
  if (st != FA_OK) {
    fprintf(stderr, "host_jit: %s\n%s\n", fa_status_string(st), fa_context_errmsg(ctx));
    return NULL;
  }
  printf("compiled from source in %.1f ms (%s)%s%s\n", stats.ms_total,
         !stats.cache_used ? "cache off" : stats.cache_hit ? "cache hit" : "compiled, cached",
         stats.note[0] ? "; " : "", stats.note);
  return mod;
}

int main(int argc, char **argv) {
  int device = 0;
  long sq = 256;
  const char *cache = NULL;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--device=", 9) == 0)
      device = atoi(argv[i] + 9);
    else if (strncmp(argv[i], "--sq=", 5) == 0)
      sq = atol(argv[i] + 5);
    else if (strncmp(argv[i], "--cache=", 8) == 0)
      cache = strcmp(argv[i] + 8, "none") == 0 ? "" : argv[i] + 8;
    else {
      fprintf(stderr, "usage: host_jit [--device=N] [--sq=N] [--cache=DIR|none]\n");
      return 2;
    }
  }
  char err[1024];
  fa_context *ctx = NULL;
  fa_status st = fa_context_create(device, &ctx, err, sizeof err);
  if (st != FA_OK) {
    fprintf(stderr, "host_jit: %s: %s\n", fa_status_string(st), err);
    return 1;
  }
  fa_module *mod = compile_spec(ctx, cache);
  if (!mod)
    return 1;
  const fa_kernel_info *in = fa_module_info(mod);
  printf("kernel %s: head_dim %d, heads %d/%d, tile_q %d, threads %d, smem %d\n", in->kernel,
         in->head_dim, in->heads, in->kv_heads, in->tile_q, in->threads, in->smem_bytes);

  /* The runtime retained the device's primary context; make it current
   * for our own allocations. */
  CUdevice dev;
  CUcontext cuctx;
  CU(cuInit(0));
  CU(cuDeviceGet(&dev, device));
  CU(cuDevicePrimaryCtxRetain(&cuctx, dev));
  CU(cuCtxSetCurrent(cuctx));

  uint64_t state = 42;
  size_t nq = (size_t)sq * in->heads * in->head_dim, nk = (size_t)sq * in->kv_heads * in->head_dim;
  Problem p = {in, sq, sq, random_f16(nq, &state), random_f16(nk, &state),
               random_f16(nk, &state), malloc(nq * 2)};
  CUdeviceptr dq = upload(p.q, nq * 2), dk = upload(p.k, nk * 2), dv = upload(p.v, nk * 2), dout;
  CU(cuMemAlloc(&dout, nq * 2));
  CU(cuMemsetD16(dout, 0xffff, nq)); /* NaN: catches unwritten output */

  fa_forward_args a;
  memset(&a, 0, sizeof a);
  fa_tensor_contiguous(&a.q, (void *)(uintptr_t)dq, in->dtype, 1, sq, in->heads, in->head_dim);
  fa_tensor_contiguous(&a.k, (void *)(uintptr_t)dk, in->dtype, 1, sq, in->kv_heads, in->head_dim);
  fa_tensor_contiguous(&a.v, (void *)(uintptr_t)dv, in->dtype, 1, sq, in->kv_heads, in->head_dim);
  fa_tensor_contiguous(&a.o, (void *)(uintptr_t)dout, in->dtype, 1, sq, in->heads, in->head_dim);
  if ((st = fa_forward(mod, &a)) != FA_OK) {
    fprintf(stderr, "host_jit: %s: %s\n", fa_status_string(st), fa_module_errmsg(mod));
    return 1;
  }
  CU(cuCtxSynchronize());
  CU(cuMemcpyDtoH((void *)p.o, dout, nq * 2));

  double max_err, max_ref;
  check(&p, &max_err, &max_ref);
  double bound = 8 * ldexp(1, -11) * fmax(1, max_ref);
  int ok = max_err <= bound;
  printf("seqlen %ld: max|O - ref| = %.3g (bound %.3g): %s\n", sq, max_err, bound,
         ok ? "PASS" : "FAIL");

  cuMemFree(dq), cuMemFree(dk), cuMemFree(dv), cuMemFree(dout);
  cuDevicePrimaryCtxRelease(dev);
  fa_module_destroy(mod);
  fa_context_destroy(ctx);
  free((void *)p.q), free((void *)p.k), free((void *)p.v), free((void *)p.o);
  return ok ? 0 : 1;
}
