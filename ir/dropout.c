/* dropout.c - dropout's keep decision as tile-IR ops (dropout.h). */
#include "ir/dropout.h"

#include "ir/philox.h"

static Value *u32c(Builder *b, uint32_t v) { return build_const(b, type_scalar(ELEM_U32), v); }

/* (base + i) & mask along `axis` of the score tile type st: an index tile
 * (R x 1 or 1 x C) of iota's dropout form. */
static Value *iota_and(Builder *b, Type st, int axis, Value *base, int64_t mask) {
  Type t = axis == 0 ? type_tile(ELEM_INDEX, st.rows, 1, st.dist)
                     : type_tile(ELEM_INDEX, 1, st.cols, st.dist);
  Op *op = build_op(b, OP_IOTA, &base, 1, &t, 1, 0);
  attr_set_int(b->m, &op->attrs, "axis", axis);
  attr_set_int(b->m, &op->attrs, "and", mask);
  return op->results[0];
}

Value *build_dropout_keep(Builder *b, const DropoutArgs *a, Value *bh, Type st, int q_axis,
                          Value *q0, Value *k0) {
  int k_axis = 1 - q_axis;
  Value *ctr[4] = {build_cast(b, iota_and(b, st, q_axis, q0, ~(int64_t)8), ELEM_U32),
                   build_cast(b, iota_and(b, st, k_axis, k0, ~(int64_t)9), ELEM_U32),
                   build_cast(b, bh, ELEM_U32), a->offset_lo};
  Value *key[2] = {a->seed_lo, build_binary(b, OP_ADD, a->seed_hi, a->offset_hi)};
  Value *w[4];
  build_philox4x32(b, ctr, key, DROPOUT_ROUNDS, w);
  /* word (k >> 3 & 1) | (q >> 3 & 1) << 1, half k & 1 */
  Value *izero = build_index(b, 0);
  Value *k3 = build_cmp(b, "eq", iota_and(b, st, k_axis, k0, 8), izero);
  Value *q3 = build_cmp(b, "eq", iota_and(b, st, q_axis, q0, 8), izero);
  Value *lo = build_select(b, k3, w[0], w[1]);
  Value *hi = build_select(b, k3, w[2], w[3]);
  Value *pick = build_select(b, q3, lo, hi);
  Value *k1 = build_cast(b, iota_and(b, st, k_axis, k0, 1), ELEM_U32);
  Value *u = build_binary(b, OP_SHR, pick, build_binary(b, OP_MUL, k1, u32c(b, 16)));
  /* (half(u) < half(t)) != flip: t the threshold's low 16 bits, flip bit 16 */
  Value *below = build_cmp(b, "hlt", u, a->threshold);
  Value *flip = build_cmp(b, "ne", build_binary(b, OP_SHR, a->threshold, u32c(b, 16)), u32c(b, 0));
  return build_cmp(b, "ne", below, flip);
}

/* (base + i) & mask >> shift, as u32. */
static Value *bits_u32(Builder *b, Type st, int axis, Value *base, int64_t mask, uint32_t shift) {
  Value *v = build_cast(b, iota_and(b, st, axis, base, mask), ELEM_U32);
  return shift ? build_binary(b, OP_SHR, v, u32c(b, shift)) : v;
}

Value *build_dropout_keep_torch(Builder *b, const DropoutArgs *a, Value *bh, Type st, int q_axis,
                                Value *q0, Value *k0) {
  int k_axis = 1 - q_axis;
  /* the 64-bit counter offset + 32 bh + 4 (q % 8) + (k % 8) / 2 (the lane) */
  Value *lane = build_binary(b, OP_ADD, build_binary(b, OP_MUL, bits_u32(b, st, q_axis, q0, 7, 0), u32c(b, 4)),
                             bits_u32(b, st, k_axis, k0, 6, 1));
  Value *x = build_binary(b, OP_ADD, build_binary(b, OP_MUL, build_cast(b, bh, ELEM_U32), u32c(b, 32)), lane);
  Value *lo = build_binary(b, OP_ADD, a->offset_lo, x);
  Value *carry = build_select(b, build_cmp(b, "lt", lo, x), u32c(b, 1), u32c(b, 0));
  Value *ctr[4] = {lo, build_binary(b, OP_ADD, a->offset_hi, carry),
                   bits_u32(b, st, q_axis, q0, ~(int64_t)15, 4), bits_u32(b, st, k_axis, k0, ~(int64_t)31, 5)};
  Value *key[2] = {a->seed_lo, a->seed_hi};
  Value *w[4];
  build_philox4x32(b, ctr, key, DROPOUT_ROUNDS, w);
  /* word (k % 32) / 8, byte 2 ((q % 16) / 8) + k % 2 */
  Value *izero = build_index(b, 0);
  Value *k8 = build_cmp(b, "eq", iota_and(b, st, k_axis, k0, 8), izero);
  Value *k16 = build_cmp(b, "eq", iota_and(b, st, k_axis, k0, 16), izero);
  Value *pick = build_select(b, k16, build_select(b, k8, w[0], w[1]), build_select(b, k8, w[2], w[3]));
  Value *shift = build_binary(b, OP_ADD, build_binary(b, OP_MUL, bits_u32(b, st, q_axis, q0, 8, 3), u32c(b, 16)),
                              build_binary(b, OP_MUL, bits_u32(b, st, k_axis, k0, 1, 0), u32c(b, 8)));
  Value *u = build_binary(b, OP_AND, build_binary(b, OP_SHR, pick, shift), u32c(b, 0xff));
  return build_cmp(b, "lt", u, a->threshold);
}
