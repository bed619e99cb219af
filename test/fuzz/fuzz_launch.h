/* fuzz_launch.h - what the parts of the launch harness share (fuzz_launch.c
 * says what it fuzzes and what its oracle checks): the generators of
 * fuzz_launch_gen*.c and the oracle of fuzz_launch_oracle.c. */
#ifndef FLASHC_FUZZ_LAUNCH_H
#define FLASHC_FUZZ_LAUNCH_H

#include <stdint.h>

#include "flashc_runtime.h"
#include "fuzz_common.h"

/* A byte range of a launch: a tensor, LSE, a table. */
typedef struct Range {
  const char *name;
  __int128 lo, len;
} Range;

/* What a launch is: a forward (or backward) one of a padded batch, a decode
 * one, a variable-length batch's forward or backward. */
enum { KIND_FORWARD, KIND_DECODE, KIND_VARLEN };

/* A varlen launch's fa_varlen and the host arrays it may point at. */
typedef struct Varlen {
  fa_varlen v;
  int32_t *host[2];  /* num_seqs + 2 entries each when 0 <= num_seqs <= 65536; freed */
  int64_t total[2];  /* where the generated prefix sums end: the tensors' dim 1 */
  int given;         /* args.varlen = &v (else NULL) */
} Varlen;

/* The launch's batch, seqlen_q, seqlen_k: q's and k's dims, or a varlen
 * launch's num_seqs and maxima. */
typedef struct Sizes {
  int64_t batch, sq, sk;
} Sizes;

/* ---- fuzz_launch_gen.c: values, the kernel info, run-time inputs, tensors */
/* Bytes of an element of d. */
static inline int dtype_bytes(fa_dtype d) {
  return d == FA_DTYPE_F16 || d == FA_DTYPE_BF16 ? 2 : 4;
}
int64_t pick64(FuzzIn *in);
int pick32(FuzzIn *in);
void *pickptr(FuzzIn *in);
size_t pick_msglen(FuzzIn *in, size_t size);
void check_status(fa_status st, const char *msg, size_t msglen);
void make_info(FuzzIn *in, fa_kernel_info *info, int kind);
int make_bindings(FuzzIn *in, const fa_kernel_info *info, int64_t batch, int64_t sq,
                  int64_t sk, fa_input *b, char names[][8]);
void make_tensor(FuzzIn *in, fa_tensor *t, fa_dtype dtype, const int64_t want[4]);
void make_tensors(FuzzIn *in, const fa_kernel_info *info, int64_t bq, int64_t sq,
                 int64_t bk, int64_t sk, fa_tensor *t[4]);

/* ---- fuzz_launch_gen_varlen.c: variable-length batches */
const fa_varlen *varlen_pointers(FuzzIn *in, Varlen *vl, const void *out0,
                                 const void *out1);
void make_sizes(FuzzIn *in, fa_kernel_info *info, Varlen *vl, int64_t *batch,
                int64_t *sq, int64_t *sk);
void unpack_one(FuzzIn *in, fa_tensor *const *t, int n);
void free_varlen(Varlen *vl);

/* ---- fuzz_launch_oracle.c: what an accepted launch promises, every kind */
void check_inputs(const char *what, const fa_kernel_info *info, const fa_input *b, int nb,
                  const Range *out, int nout);
__int128 extent(const fa_tensor *t, int elem);
Range range(const char *name, const void *p, __int128 len);
void check_disjoint(const char *what, const Range *r, int n, const int *is_out,
                    fa_tensor *const *t, int nt);
void check_in_space(const char *what, const Range *r, int n);
Range tensor_range(const char *name, const fa_tensor *t);
void check_accepted(const char *what, fa_tensor *const t[4], const void *lse,
                    __int128 lse_bytes, Range extra[2], int nextra);
Sizes launch_sizes(const fa_varlen *v, const fa_tensor *q, const fa_tensor *k);
void check_layout(const fa_kernel_info *info, const fa_varlen *v, fa_tensor *const *t,
                  int nt);
void check_varlen_sizes(const fa_kernel_info *info, const fa_varlen *v,
                        const fa_tensor *q, const fa_tensor *k);
int varlen_ranges(const fa_varlen *v, Range r[2]);
void check_params(const char *what, const fa_param *p, int n, const fa_varlen *v,
                  const fa_tensor *q, const fa_tensor *k, int varlen_kernel);

/* ---- fuzz_launch_gen_blocks.c: block lists, the kernels that visit them,
 * classifiers and the host-only entry points */
void make_visit(FuzzIn *in, fa_kernel_info *info, int cols);
int add_classifiers(const fa_kernel_info *info, fa_kernel_info *k, int n);
int lists_fit(const fa_kernel_info *k, int nk, Sizes s);
void check_visit(const fa_kernel_info *k, int cols, Sizes s, const fa_param *p, int n);
void check_step_lists(const fa_kernel_info *kernels, int nk, const fa_backward_step *p,
                      Sizes s);
void blocks_api(FuzzIn *in);

/* ---- one launch of each kind: fuzz_launch_gen_forward.c, _decode.c, _backward.c;
 * `visit`: its kernel visits block lists (or is a classifier: make_visit) */
void forward(FuzzIn *in, int varlen, int visit);
void decode(FuzzIn *in);
void backward(FuzzIn *in, int varlen, int visit);

#endif
