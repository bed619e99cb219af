/* dropout.c - dropout's keep decision on the host and as tile-IR ops
 * (dropout.h). */
#include "ir/dropout.h"

#include <math.h>

#include "ir/philox.h"

uint32_t dropout_threshold(double p) {
  double t = nearbyint(65536.0 * (1.0 - p));
  return t < 0 ? 0 : t > 65536 ? 65536 : (uint32_t)t;
}

bool dropout_keep(uint64_t seed, uint64_t offset, uint32_t bh, uint32_t q, uint32_t k,
                  uint32_t threshold) {
  uint32_t ctr[4] = {k / 8, q, bh, (uint32_t)offset};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32) + (uint32_t)(offset >> 32)};
  uint32_t w[4];
  philox4x32(ctr, key, DROPOUT_ROUNDS, w);
  uint32_t slot = k % 8, u = (w[slot / 2] >> (16 * (slot % 2))) & 0xffff;
  return u < threshold;
}

static Value *u32c(Builder *b, uint32_t v) { return build_const(b, type_scalar(ELEM_U32), v); }

Value *build_dropout_keep(Builder *b, const DropoutArgs *a, Value *bh, Value *qi, Value *ki) {
  Value *k = build_cast(b, ki, ELEM_U32);
  Value *ctr[4] = {build_binary(b, OP_SHR, k, u32c(b, 3)), build_cast(b, qi, ELEM_U32),
                   build_cast(b, bh, ELEM_U32), a->offset_lo};
  Value *key[2] = {a->seed_lo, build_binary(b, OP_ADD, a->seed_hi, a->offset_hi)};
  Value *w[4];
  build_philox4x32(b, ctr, key, DROPOUT_ROUNDS, w);
  /* slot k % 8: word slot / 2, half slot % 2 */
  Value *slot = build_binary(b, OP_AND, k, u32c(b, 7));
  Value *word = build_binary(b, OP_SHR, slot, u32c(b, 1));
  Value *pick = w[3];
  for (int i = 2; i >= 0; i--)
    pick = build_select(b, build_cmp(b, "eq", word, u32c(b, (uint32_t)i)), w[i], pick);
  Value *shift = build_binary(b, OP_MUL, build_binary(b, OP_AND, slot, u32c(b, 1)), u32c(b, 16));
  Value *u = build_binary(b, OP_AND, build_binary(b, OP_SHR, pick, shift), u32c(b, 0xffff));
  return build_cmp(b, "lt", u, a->threshold);
}
