/* ref_attention.h - plain reference attention in float64, straight from a
 * KernelSpec: no tiles, no IR. It evaluates the spec's Expr trees directly
 * (its own small evaluator), so it shares nothing with frontend/emit_tile.c or
 * ir/interp.c and can judge both.
 *
 * Layouts (element strides given per tensor, any order):
 *   q [batch, seqlen_q, heads, head_dim]      k [batch, seqlen_k, kv_heads, head_dim]
 *   v [batch, seqlen_k, kv_heads, v_head_dim] o [batch, seqlen_q, heads, v_head_dim]
 *   lse [batch, heads, seqlen_q]
 * A fully masked row gives O = 0 and LSE = -inf.
 */
#ifndef FLASHC_REF_ATTENTION_H
#define FLASHC_REF_ATTENTION_H

#include <stdint.h>

#include "frontend/spec.h"

typedef struct RefTensor {
  double *data;
  int64_t strides[4];
} RefTensor;

/* Values of the expression variables at one score element. */
typedef struct RefVars {
  double s, b, h, q, k, seqlen_q, seqlen_k;
} RefVars;

/* The run-time inputs' values (KernelSpec.inputs order; a scalar is
 * data[0]) that ref_eval reads from here on; NULL for none. */
void ref_set_inputs(const RefTensor *inputs);

/* Evaluates e in double precision: integers are exact doubles, `/` is true
 * division, `%` is fmod (truncating, as C's % on integers), booleans 1 / 0. */
double ref_eval(const Expr *e, const RefVars *v);

/* A paged K/V cache (decode): logical row j of sequence b is slot j % page_size
 * of page table[b * table_stride + j / page_size] of the cache tensor, whose
 * layout is [num_pages, page_size, kv_heads, dim]. */
typedef struct RefPaging {
  int page_size;
  const double *table;
  int64_t table_stride;
} RefPaging;

/* A dropout launch: element (b, h, q, k) is kept as ir/dropout.h's
 * dropout_keep says (the definition, host form) and kept entries of P are
 * scaled by 1 / (1 - p); the LSE is the undropped one. p = 0: no dropout. */
typedef struct RefDropout {
  double p;
  uint64_t seed, offset;
} RefDropout;

/* Computes O and LSE for the whole batch; drop NULL or p = 0 for none. */
void ref_attention(const KernelSpec *k, int64_t batch, int64_t seqlen_q, int64_t seqlen_k,
                   const RefTensor *q, const RefTensor *kt, const RefTensor *v, RefTensor *o,
                   RefTensor *lse, const RefDropout *drop);

/* Decode: seqlen_q = q_len query tokens per sequence against seqlen_k[b]
 * cached keys (masks see seqlen_k = seqlen_k[b]); k and v are contiguous
 * [batch, capacity, kv_heads, dim] when paging is NULL, else paged. */
void ref_attention_decode(const KernelSpec *k, int64_t batch, int64_t q_len,
                          const int64_t *seqlen_k, const RefTensor *q, const RefTensor *kt,
                          const RefTensor *v, const RefPaging *paging, RefTensor *o,
                          RefTensor *lse);

/* The backward of ref_attention (with the same dropout, o the dropped O):
 * dQ, dK, dV (overwritten) from dO and the forward's O and LSE (docs/backward.md's math, one score at a time; the
 * score modifier's derivative by central differences, so that nothing is
 * shared with the compiler's differentiate pass). GQA: dK, dV of a K/V head
 * sum over its query heads. */
void ref_attention_backward(const KernelSpec *k, int64_t batch, int64_t seqlen_q,
                            int64_t seqlen_k, const RefTensor *q, const RefTensor *kt,
                            const RefTensor *v, const RefTensor *o, const RefTensor *lse,
                            const RefTensor *dout, const RefDropout *drop, RefTensor *dq,
                            RefTensor *dk, RefTensor *dv);

#endif
