/* difftest.h - what the parts of difftest share (difftest.c: the driver,
 * the forward runs; difftest_bwd.c: backward launches; difftest_decode.c:
 * decode shapes and runs; difftest_gen.c: random specs): shapes, options,
 * host buffers, the programs to interpret. */
#ifndef FLASHC_TEST_DIFFTEST_H
#define FLASHC_TEST_DIFFTEST_H
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

typedef struct Opts {
  bool quick, round, verbose, emit;
  int nshapes;
  int br, bc;
} Opts;

typedef struct Stats {
  int passed, failed;
} Stats;

/* ---------------------------------------------------------------- rng */

static inline uint64_t rng_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1p-53; }
static inline int rng_int(uint64_t *s, int lo, int hi) { /* inclusive */
  return lo + (int)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

/* One program to interpret: a description and its module. */
typedef struct Variant {
  char name[96];
  Module *m;
  Func *f;
  int br, bc; /* symbolic tile sizes for FA1 programs */
  /* also run the module's copies of the kernel that a launch may take
   * instead (long_rows_of, gather_of): the whole pipeline, and the
   * pipeline without each optional pass */
  bool copies;
  char *ir; /* the module as printed (make_variants: a program run once) */
} Variant;

/* A host tensor: dims and strides (rows padded so the layout is strided). */
typedef struct Buf {
  double *data;
  int64_t dims[4], strides[4];
  int rank;
  size_t n;
} Buf;

/* A run's inputs, the reference O and LSE, the outputs; drop: the dropout
 * launch (p = 0: the plain kernels; else NAME_dropout and the backward
 * kernels with these p, seed, offset; the reference O is then the dropped
 * one). */
typedef struct Inputs {
  Buf q, k, v, ro, rlse, o, lse;
  RefDropout drop;
  /* the spec's run-time inputs, bound as %in_NAME */
  Buf ins[SPEC_MAX_INPUTS];
  char in_names[SPEC_MAX_INPUTS][80];
  int nins;
} Inputs;

typedef struct Cmp {
  double o_err, lse_err;
  long nan, lse_inf_mismatch;
} Cmp;

/* difftest.c: the start of a run of variant v: FAIL (counted in st) when its
 * lowering or pipeline failed, else poisons the outputs o and lse; false
 * when the run cannot go on. */
bool variant_ready(const char *what, const Variant *v, Buf *o, Buf *lse, Stats *st);
/* difftest.c: O and LSE of a run against the reference (max abs error of O,
 * max relative error of LSE, NaNs, -inf LSE where the reference has none or
 * the reverse), printed as PASS / FAIL `what` and counted in st. */
void report_output(const KernelSpec *k, const Shape *s, const Buf *o, const Buf *lse, const Buf *ro,
                   const Buf *rlse, const char *what, const Opts *opts, Stats *st);

/* difftest.c: host buffers (rows padded so that layouts are strided). */
Buf buf_make(int rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3, int pad);
void buf_fill(Buf *b, uint64_t *seed, double amp);
void buf_poison(Buf *b);
InterpBinding bind(const char *name, const Buf *b);
/* Random values for k's run-time inputs (in->ins, in->in_names, in->nins)
 * at shape s (batch, seqlen_q (decode: q_len), seqlen_k dims resolved):
 * i32 tensors small ids (a few documents, buckets), i32 scalars 1..40 (a
 * window), float tensors in [-1, 1], f32 scalars in [0.5, 3] (a softcap);
 * free_run_inputs releases them. */
void make_run_inputs(const KernelSpec *k, const Shape *s, uint64_t *seed, Inputs *in);
void free_run_inputs(Inputs *in);
/* The reference reads in's run-time inputs from now on (NULL: none). */
void ref_use_inputs(const Inputs *in);
/* Appends the bindings of in's run-time inputs at b[n]; returns the count. */
int bind_inputs(const Inputs *in, InterpBinding *b, int n);
RefTensor ref_t(const Buf *b);
double *b_at(const Buf *b, int64_t i0, int64_t i1, int64_t i2, int64_t i3);
/* The interpreter's options for variant v (its symbolic tile sizes). */
InterpOptions variant_options(const Variant *v, const Opts *o);
/* The launch extents of shape s with in's dropout arguments. */
InterpSizes run_sizes(const Shape *s, const Inputs *in);
/* The kernel of v's module named v->f's name + suffix, NULL when none. */
Func *variant_func(const Variant *v, const char *suffix);

/* difftest_bwd.c: both backward launches of every variant on shape s, the
 * forward's inputs and reference in `in`. */
void test_backward(const KernelSpec *k, const Variant *vs, int nv, const Shape *s, uint64_t seed,
                   Inputs *in, const Opts *o, Stats *st);

/* difftest_decode.c: the first nshapes decode shapes (all when nshapes is
 * negative), every variant, every split count. */
void test_decode(const KernelSpec *k, int kindex, const Variant *vs, int nv, int nshapes,
                 const Opts *o, Stats *st);

/* difftest_gen.c: a random spec named `name` (its expressions in a pool
 * that pool_free releases). */
void gen_spec(uint64_t *r, KernelSpec *k, char *name);
void pool_free(void);
void pool_release(void); /* at exit: the pool's own array too */

#endif
