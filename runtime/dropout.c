/* dropout.c - dropout's launch parameters, their validation and the host
 * mask (docs/dropout.md). The keep decision itself is base/dropout_mask.c,
 * the definition the kernels evaluate. */
#include <math.h>
#include <string.h>

#include "base/dropout_mask.h"
#include "internal.h"

fa_status fa_check_dropout_(double p, char *msg, size_t len) {
  if (p >= 0 && p < 1) return FA_OK;
  fa_fmt(msg, len, "dropout_p is %g; a dropout probability is in [0, 1)", p);
  return FA_ERR_INVALID_ARGUMENT;
}

void fa_dropout_words_(double p, uint64_t seed, uint64_t offset, int torch, fa_dropout_words *w) {
  w->u[0] = (uint32_t)seed;
  w->u[1] = (uint32_t)(seed >> 32);
  w->u[2] = (uint32_t)offset;
  w->u[3] = (uint32_t)(offset >> 32);
  w->u[4] = dropout_launch_threshold(p, torch);
  w->keep_scale = dropout_launch_scale(p, torch);
}

fa_status fa_dropout_mask(const fa_kernel_info *info, double p, uint64_t seed, uint64_t offset,
                          int64_t batch, int64_t seqlen_q, int64_t seqlen_k, uint8_t *mask) {
  if (!info || (!mask && batch > 0 && seqlen_q > 0 && seqlen_k > 0)) return FA_ERR_NULL_POINTER;
  if (!(p >= 0 && p < 1) || batch < 0 || seqlen_q < 0 || seqlen_k < 0)
    return FA_ERR_INVALID_ARGUMENT;
  int64_t rows, n;
  if (!fa_mul_ok(batch, info->heads, &rows) || !fa_mul_ok(rows, seqlen_q, &n) ||
      !fa_mul_ok(n, seqlen_k, &n) || rows > UINT32_MAX || seqlen_q > UINT32_MAX ||
      seqlen_k > UINT32_MAX)
    return FA_ERR_TOO_LARGE;
  int torch = info->dropout_torch;
  uint32_t thr = dropout_launch_threshold(p, torch);
  bool (*keep)(uint64_t, uint64_t, uint32_t, uint32_t, uint32_t, uint32_t) =
      torch ? dropout_keep_torch : dropout_keep;
  for (int64_t bh = 0; bh < rows; bh++)
    for (int64_t q = 0; q < seqlen_q; q++)
      for (int64_t k = 0; k < seqlen_k; k++)
        *mask++ = keep(seed, offset, (uint32_t)bh, (uint32_t)q, (uint32_t)k, thr);
  return FA_OK;
}
