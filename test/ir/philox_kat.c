/* philox_kat.c - Philox4x32 known answers (issue 18): Random123's kat_vectors
 * for 7 and 10 rounds, checked against
 *   1. the host generator (ir/philox.c philox4x32), and
 *   2. the tile-IR ops build_philox4x32 emits, run by the interpreter on a
 *      1 x 8 tile of counters (KAT counter + column, as dropout numbers the
 *      elements of a score tile): column 0 against the vector, every column
 *      against the host generator. The words leave the kernel as 16-bit
 *      halves in an f32 tensor (exact).
 * Prints one line per check; exits 1 on a mismatch.
 */
#include <stdio.h>
#include <string.h>

#include "ir/philox.h"
#include "out_kernel.h"

typedef struct Kat {
  int rounds;
  uint32_t ctr[4], key[2], out[4];
} Kat;

/* Random123 kat_vectors: philox4x32 R, counter[4] key[2] -> output[4]. */
static const Kat kats[] = {
    {7, {0, 0, 0, 0}, {0, 0}, {0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48}},
    {7, {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
     {0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662}},
    {7, {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
     {0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a}},
    {10, {0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {10, {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {10, {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};
enum { NKATS = sizeof kats / sizeof kats[0], COLS = 8 };

static int failures;

static void check_words(const char *what, const uint32_t got[4], const uint32_t want[4]) {
  bool ok = memcmp(got, want, 4 * sizeof got[0]) == 0;
  printf("%s %s: %08x %08x %08x %08x\n", ok ? "PASS" : "FAIL", what, got[0], got[1], got[2],
         got[3]);
  if (!ok) {
    printf("     want %08x %08x %08x %08x\n", want[0], want[1], want[2], want[3]);
    failures++;
  }
}

static Value *u32(Builder *b, uint32_t v) { return build_const(b, type_scalar(ELEM_U32), v); }

/* Counters (base + c, c1, c2, c3) for the columns c of a 1 x C tile: the
 * per-element numbering dropout uses; got[c] = column c's four words. */
static int run_tile(const Kat *k, int C, uint32_t got[][4]) {
  Module *m = module_create();
  Func *f = out_kernel(m, "tile", COLS);
  Builder b = builder_at_end(m, f->body);
  Value *zero = build_index(&b, 0);
  Type it = type_tile(ELEM_INDEX, 1, C, DIST_NONE);
  Op *iota = build_op(&b, OP_IOTA, NULL, 0, &it, 1, 0);
  attr_set_int(m, &iota->attrs, "axis", 1);
  Value *col = build_cast(&b, iota->results[0], ELEM_U32);
  Value *ctr[4] = {build_binary(&b, OP_ADD, col, u32(&b, k->ctr[0])), u32(&b, k->ctr[1]),
                   u32(&b, k->ctr[2]), u32(&b, k->ctr[3])};
  Value *key[2] = {u32(&b, k->key[0]), u32(&b, k->key[1])}, *w[4];
  build_philox4x32(&b, ctr, key, k->rounds, w);
  /* each half-word's 1 x C row into row 2 * word + half of out */
  for (int i = 0; i < 4; i++) {
    Value *halves[2] = {build_binary(&b, OP_SHR, w[i], u32(&b, 16)),
                        build_binary(&b, OP_AND, w[i], u32(&b, 0xffff))};
    for (int h = 0; h < 2; h++) {
      Value *ops[5] = {f->args[0], zero, zero, build_index(&b, 2 * i + h),
                       build_cast(&b, halves[h], ELEM_F32)};
      build_op(&b, OP_STORE, ops, 5, NULL, 0, 0);
    }
  }
  build_op(&b, OP_RETURN, NULL, 0, NULL, 0, 0);
  double buf[8 * COLS];
  for (int i = 0; i < 8 * COLS; i++)
    buf[i] = -1;
  int rc = run_out_kernel("philox_kat", m, f, buf, 8, COLS);
  for (int c = 0; c < C; c++)
    for (int i = 0; i < 4; i++)
      got[c][i] = ((uint32_t)buf[(2 * i) * COLS + c] << 16) | (uint32_t)buf[(2 * i + 1) * COLS + c];
  module_destroy(m);
  return rc;
}

int main(void) {
  char what[96];
  for (int i = 0; i < NKATS; i++) {
    const Kat *k = &kats[i];
    uint32_t host[4], got[COLS][4];
    philox4x32(k->ctr, k->key, k->rounds, host);
    snprintf(what, sizeof what, "host   philox4x32_%d #%d", k->rounds, i % 3);
    check_words(what, host, k->out);
    if (run_tile(k, COLS, got) != 0) {
      printf("FAIL tileir philox4x32_%d #%d: the kernel did not run\n", k->rounds, i % 3);
      failures++;
      continue;
    }
    snprintf(what, sizeof what, "tileir philox4x32_%d #%d", k->rounds, i % 3);
    check_words(what, got[0], k->out);
    /* the row of counters: column c is the host's counter + c */
    for (int c = 1; c < COLS; c++) {
      uint32_t ctr[4] = {k->ctr[0] + (uint32_t)c, k->ctr[1], k->ctr[2], k->ctr[3]}, want[4];
      philox4x32(ctr, k->key, k->rounds, want);
      snprintf(what, sizeof what, "tileir philox4x32_%d #%d column %d", k->rounds, i % 3, c);
      check_words(what, got[c], want);
    }
  }
  printf("%d failures\n", failures);
  return failures != 0;
}
