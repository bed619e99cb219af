/* philox.c - Philox4x32 as tile-IR ops (philox.h). */
#include "ir/philox.h"

static Value *u32_const(Builder *b, uint32_t v) {
  return build_const(b, type_scalar(ELEM_U32), (double)v);
}

/* One round: (c0, c1, c2, c3) -> (hi(M1 c2) ^ c1 ^ k0, lo(M1 c2),
 * hi(M0 c0) ^ c3 ^ k1, lo(M0 c0)). */
static void round_ir(Builder *b, Value *c[4], Value *const k[2]) {
  Value *m0 = u32_const(b, PHILOX_M0), *m1 = u32_const(b, PHILOX_M1);
  Value *hi0 = build_binary(b, OP_MULHI, c[0], m0), *lo0 = build_binary(b, OP_MUL, c[0], m0);
  Value *hi1 = build_binary(b, OP_MULHI, c[2], m1), *lo1 = build_binary(b, OP_MUL, c[2], m1);
  Value *n0 = build_binary(b, OP_XOR, build_binary(b, OP_XOR, hi1, c[1]), k[0]);
  Value *n2 = build_binary(b, OP_XOR, build_binary(b, OP_XOR, hi0, c[3]), k[1]);
  c[0] = n0;
  c[1] = lo1;
  c[2] = n2;
  c[3] = lo0;
}

void build_philox4x32(Builder *b, Value *const ctr[4], Value *const key[2], int rounds,
                      Value *out[4]) {
  Value *c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]}, *k[2] = {key[0], key[1]};
  for (int r = 0; r < rounds; r++) {
    if (r > 0) {
      k[0] = build_binary(b, OP_ADD, k[0], u32_const(b, PHILOX_W0));
      k[1] = build_binary(b, OP_ADD, k[1], u32_const(b, PHILOX_W1));
    }
    round_ir(b, c, k);
  }
  for (int i = 0; i < 4; i++)
    out[i] = c[i];
}
