/* ref_attention.c - the textbook softmax(scale * Q K^T) V, one query row at a
 * time, in float64 (ref_attention.h). */
#include "test/interp/ref_attention.h"

#include <math.h>
#include <stdlib.h>

#include "base/dropout_mask.h"

static const RefTensor *ref_inputs;

void ref_set_inputs(const RefTensor *inputs) { ref_inputs = inputs; }

/* A run-time input: a scalar, or the element at the indices. */
static double input_value(const Expr *e, const RefVars *v) {
  if (!ref_inputs)
    return NAN;
  const RefTensor *t = &ref_inputs[e->input];
  const Expr *ix[4] = {e->a, e->b, e->c, e->d};
  int64_t off = 0;
  for (int i = 0; i < 4 && ix[i]; i++)
    off += (int64_t)ref_eval(ix[i], v) * t->strides[i];
  return t->data[off];
}

double ref_eval(const Expr *e, const RefVars *v) {
  switch (e->kind) {
  case EXPR_INPUT: return input_value(e, v);
  case EXPR_NUM: return e->num;
  case EXPR_VAR:
    switch (e->var) {
    case VAR_S: return v->s;
    case VAR_B: return v->b;
    case VAR_H: return v->h;
    case VAR_Q: return v->q;
    case VAR_K: return v->k;
    case VAR_SEQLEN_Q: return v->seqlen_q;
    case VAR_SEQLEN_K: return v->seqlen_k;
    }
    return NAN;
  case EXPR_NEG: return -ref_eval(e->a, v);
  case EXPR_NOT: return ref_eval(e->a, v) == 0;
  case EXPR_ADD: return ref_eval(e->a, v) + ref_eval(e->b, v);
  case EXPR_SUB: return ref_eval(e->a, v) - ref_eval(e->b, v);
  case EXPR_MUL: return ref_eval(e->a, v) * ref_eval(e->b, v);
  case EXPR_DIV: return ref_eval(e->a, v) / ref_eval(e->b, v);
  case EXPR_MOD: return fmod(ref_eval(e->a, v), ref_eval(e->b, v));
  case EXPR_LT: return ref_eval(e->a, v) < ref_eval(e->b, v);
  case EXPR_LE: return ref_eval(e->a, v) <= ref_eval(e->b, v);
  case EXPR_GT: return ref_eval(e->a, v) > ref_eval(e->b, v);
  case EXPR_GE: return ref_eval(e->a, v) >= ref_eval(e->b, v);
  case EXPR_EQ: return ref_eval(e->a, v) == ref_eval(e->b, v);
  case EXPR_NE: return ref_eval(e->a, v) != ref_eval(e->b, v);
  case EXPR_AND: return ref_eval(e->a, v) != 0 && ref_eval(e->b, v) != 0;
  case EXPR_OR: return ref_eval(e->a, v) != 0 || ref_eval(e->b, v) != 0;
  case EXPR_MIN: return fmin(ref_eval(e->a, v), ref_eval(e->b, v));
  case EXPR_MAX: return fmax(ref_eval(e->a, v), ref_eval(e->b, v));
  case EXPR_SELECT: return ref_eval(e->a, v) != 0 ? ref_eval(e->b, v) : ref_eval(e->c, v);
  case EXPR_TANH: return tanh(ref_eval(e->a, v));
  case EXPR_EXP: return exp(ref_eval(e->a, v));
  case EXPR_EXP2: return exp2(ref_eval(e->a, v));
  case EXPR_LOG: return log(ref_eval(e->a, v));
  case EXPR_LOG2: return log2(ref_eval(e->a, v));
  case EXPR_SQRT: return sqrt(ref_eval(e->a, v));
  case EXPR_ABS: return fabs(ref_eval(e->a, v));
  case EXPR_FLOOR: return floor(ref_eval(e->a, v));
  }
  return NAN;
}

/* The spec's scale: its constant, or its expression of run-time inputs. */
static double ref_scale(const KernelSpec *ks, const RefVars *v) {
  return ks->scale_expr ? ref_eval(ks->scale_expr, v) : ks->scale;
}

static double *at(const RefTensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
  return t->data + a * t->strides[0] + b * t->strides[1] + c * t->strides[2] + d * t->strides[3];
}

/* Element d of key/value row kj of sequence b, head hk: direct, or through
 * the block table of a paged cache. */
static double kv_at(const RefTensor *t, const RefPaging *pg, int64_t b, int64_t kj, int64_t hk,
                    int64_t d) {
  if (!pg)
    return *at(t, b, kj, hk, d);
  int64_t page = (int64_t)pg->table[b * pg->table_stride + kj / pg->page_size];
  return *at(t, page, kj % pg->page_size, hk, d);
}

/* The factor dropout applies to P[b, h, qi, kj]: 0 when dropped, else
 * 1 / (1 - p); 1 without dropout. */
static double drop_factor(const KernelSpec *ks, const RefDropout *dr, int64_t b, int64_t h,
                          int64_t qi, int64_t kj) {
  if (!dr || dr->p == 0)
    return 1;
  uint32_t bh = (uint32_t)(b * ks->heads + h);
  if (ks->dropout_torch) /* FlashAttention-2's bytes and its float 1 / (1 - p) */
    return dropout_keep_torch(dr->seed, dr->offset, bh, (uint32_t)qi, (uint32_t)kj,
                              dropout_threshold_torch(dr->p))
               ? 1.0f / (1.0f - (float)dr->p)
               : 0;
  bool kept = dropout_keep(dr->seed, dr->offset, bh, (uint32_t)qi, (uint32_t)kj,
                           dropout_threshold(dr->p));
  return kept ? 1 / (1 - dr->p) : 0;
}

/* One query row: scores (masked ones excluded), softmax, O row and LSE. */
static void ref_row(const KernelSpec *ks, int64_t b, int64_t h, int64_t qi, int64_t sq,
                    int64_t sk, const RefTensor *q, const RefTensor *kt, const RefTensor *v,
                    const RefPaging *pg, const RefDropout *dr, RefTensor *o, RefTensor *lse,
                    double *score, char *keep) {
  int64_t hk = h / (ks->heads / ks->kv_heads);
  RefVars vars = {0, (double)b, (double)h, (double)qi, 0, (double)sq, (double)sk};
  double m = -INFINITY;
  for (int64_t kj = 0; kj < sk; kj++) {
    vars.k = (double)kj;
    keep[kj] = !ks->mask || ref_eval(ks->mask, &vars) != 0;
    if (!keep[kj])
      continue;
    double dot = 0;
    for (int d = 0; d < ks->head_dim; d++)
      dot += *at(q, b, qi, h, d) * kv_at(kt, pg, b, kj, hk, d);
    vars.s = ref_scale(ks, &vars) * dot;
    score[kj] = ks->score ? ref_eval(ks->score, &vars) : vars.s;
    if (score[kj] > m)
      m = score[kj];
  }
  for (int d = 0; d < ks->v_head_dim; d++)
    *at(o, b, qi, h, d) = 0;
  if (m == -INFINITY) { /* nothing kept */
    *at(lse, b, h, qi, 0) = -INFINITY;
    return;
  }
  double l = 0;
  for (int64_t kj = 0; kj < sk; kj++) {
    if (!keep[kj])
      continue;
    double p = exp(score[kj] - m), z = p * drop_factor(ks, dr, b, h, qi, kj);
    l += p;
    for (int d = 0; d < ks->v_head_dim; d++)
      *at(o, b, qi, h, d) += z * kv_at(v, pg, b, kj, hk, d);
  }
  for (int d = 0; d < ks->v_head_dim; d++)
    *at(o, b, qi, h, d) /= l;
  *at(lse, b, h, qi, 0) = m + log(l);
}

void ref_attention(const KernelSpec *k, int64_t batch, int64_t seqlen_q, int64_t seqlen_k,
                   const RefTensor *q, const RefTensor *kt, const RefTensor *v, RefTensor *o,
                   RefTensor *lse, const RefDropout *drop) {
  double *score = malloc(sizeof(double) * (size_t)(seqlen_k + 1));
  char *keep = malloc((size_t)seqlen_k + 1);
  if (!score || !keep)
    abort();
  for (int64_t b = 0; b < batch; b++)
    for (int64_t h = 0; h < k->heads; h++)
      for (int64_t qi = 0; qi < seqlen_q; qi++)
        ref_row(k, b, h, qi, seqlen_q, seqlen_k, q, kt, v, NULL, drop, o, lse, score, keep);
  free(score);
  free(keep);
}

void ref_attention_decode(const KernelSpec *k, int64_t batch, int64_t q_len,
                          const int64_t *seqlen_k, const RefTensor *q, const RefTensor *kt,
                          const RefTensor *v, const RefPaging *paging, RefTensor *o,
                          RefTensor *lse) {
  int64_t longest = 0;
  for (int64_t b = 0; b < batch; b++)
    longest = seqlen_k[b] > longest ? seqlen_k[b] : longest;
  double *score = malloc(sizeof(double) * (size_t)(longest + 1));
  char *keep = malloc((size_t)longest + 1);
  if (!score || !keep)
    abort();
  for (int64_t b = 0; b < batch; b++)
    for (int64_t h = 0; h < k->heads; h++)
      for (int64_t qi = 0; qi < q_len; qi++)
        ref_row(k, b, h, qi, q_len, seqlen_k[b], q, kt, v, paging, NULL, o, lse, score, keep);
  free(score);
  free(keep);
}

/* score'(s) at vars by a central difference in float64 (independent of the
 * compiler's symbolic derivative): step 1e-5 * max(1, |s|), error ~1e-10. */
static double score_slope(const KernelSpec *ks, RefVars vars) {
  if (!ks->score)
    return 1;
  double s = vars.s, h = 1e-5 * fmax(1, fabs(s));
  vars.s = s + h;
  double up = ref_eval(ks->score, &vars);
  vars.s = s - h;
  double down = ref_eval(ks->score, &vars);
  return (up - down) / (2 * h);
}

void ref_attention_backward(const KernelSpec *ks, int64_t batch, int64_t seqlen_q,
                            int64_t seqlen_k, const RefTensor *q, const RefTensor *kt,
                            const RefTensor *v, const RefTensor *o, const RefTensor *lse,
                            const RefTensor *dout, const RefDropout *drop, RefTensor *dq,
                            RefTensor *dk, RefTensor *dv) {
  int64_t group = ks->heads / ks->kv_heads;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t qi = 0; qi < seqlen_q; qi++)
      for (int64_t h = 0; h < ks->heads; h++)
        for (int d = 0; d < ks->head_dim; d++)
          *at(dq, b, qi, h, d) = 0;
    for (int64_t kj = 0; kj < seqlen_k; kj++)
      for (int64_t hk = 0; hk < ks->kv_heads; hk++) {
        for (int d = 0; d < ks->head_dim; d++)
          *at(dk, b, kj, hk, d) = 0;
        for (int d = 0; d < ks->v_head_dim; d++)
          *at(dv, b, kj, hk, d) = 0;
      }
    for (int64_t h = 0; h < ks->heads; h++)
      for (int64_t qi = 0; qi < seqlen_q; qi++) {
        int64_t hk = h / group;
        double l = *at(lse, b, h, qi, 0);
        if (l == -INFINITY) /* fully masked row: no gradient */
          continue;
        double D = 0;
        for (int d = 0; d < ks->v_head_dim; d++)
          D += *at(dout, b, qi, h, d) * *at(o, b, qi, h, d);
        RefVars vars = {0, (double)b, (double)h, (double)qi, 0, (double)seqlen_q, (double)seqlen_k};
        for (int64_t kj = 0; kj < seqlen_k; kj++) {
          vars.k = (double)kj;
          if (ks->mask && ref_eval(ks->mask, &vars) == 0)
            continue;
          double dot = 0;
          for (int d = 0; d < ks->head_dim; d++)
            dot += *at(q, b, qi, h, d) * *at(kt, b, kj, hk, d);
          vars.s = ref_scale(ks, &vars) * dot;
          double z = ks->score ? ref_eval(ks->score, &vars) : vars.s;
          /* dropout: Z = P o factor feeds O; dZ = dO V^T, dP = dZ o factor */
          double p = exp(z - l), dp = 0, f = drop_factor(ks, drop, b, h, qi, kj);
          for (int d = 0; d < ks->v_head_dim; d++) {
            dp += *at(dout, b, qi, h, d) * *at(v, b, kj, hk, d);
            *at(dv, b, kj, hk, d) += p * f * *at(dout, b, qi, h, d);
          }
          dp *= f;
          double ds = p * (dp - D) * score_slope(ks, vars) * ref_scale(ks, &vars);
          for (int d = 0; d < ks->head_dim; d++) {
            *at(dq, b, qi, h, d) += ds * *at(kt, b, kj, hk, d);
            *at(dk, b, kj, hk, d) += ds * *at(q, b, qi, h, d);
          }
        }
      }
  }
}
