/* dropout_mask.c - Philox4x32 and dropout's keep decision on the host
 * (dropout_mask.h). */
#include "base/dropout_mask.h"

#include <math.h>

void philox4x32(const uint32_t ctr[4], const uint32_t key[2], int rounds, uint32_t out[4]) {
  uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]}, k[2] = {key[0], key[1]};
  for (int r = 0; r < rounds; r++) {
    if (r > 0) {
      k[0] += PHILOX_W0;
      k[1] += PHILOX_W1;
    }
    uint64_t p0 = (uint64_t)PHILOX_M0 * c[0], p1 = (uint64_t)PHILOX_M1 * c[2];
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k[0], n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k[1];
    c[0] = n0;
    c[1] = (uint32_t)p1;
    c[2] = n2;
    c[3] = (uint32_t)p0;
  }
  for (int i = 0; i < 4; i++)
    out[i] = c[i];
}

/* The order of binary16 values on bit patterns (not NaN): -0 and +0 equal,
 * negative values below positive ones. */
static int32_t half_key(uint32_t h) {
  int32_t mag = (int32_t)(h & 0x7fff);
  return (h & 0x8000) ? -mag : mag;
}

bool half_lt(uint32_t a, uint32_t b) {
  if ((a & 0x7fff) > 0x7c00 || (b & 0x7fff) > 0x7c00) /* NaN: unordered */
    return false;
  return half_key(a) < half_key(b);
}

/* The 16-bit patterns u with half(u) < half(t), for t not NaN. */
static uint32_t half_count_below(uint32_t t) {
  uint32_t m = t & 0x7fff;
  if (t & 0x8000) /* negatives of larger magnitude, up to -inf */
    return 0x7c00 - m;
  return m == 0 ? 0x7c00 : 0x7c00 + 1 + m; /* the negatives (and -0 when t > 0), then 0 .. t - 1 */
}

/* t with half_count_below(t) == n, for n in 0 .. 0x7c00 + 1 + 0x7c00 except
 * 0x7c01 (no t has exactly -0 and nothing else below it); UINT32_MAX if none. */
static uint32_t half_below_count(uint32_t n) {
  if (n <= 0x7c00)
    return 0x8000 | (0x7c00 - n);
  if (n >= 0x7c02 && n <= 0x7c01 + 0x7c00)
    return n - 0x7c01;
  return UINT32_MAX;
}

uint32_t dropout_threshold(double p) {
  double r = nearbyint(65536.0 * (1.0 - p));
  uint32_t n = r < 0 ? 0 : r > 65536 ? 65536 : (uint32_t)r;
  uint32_t t = half_below_count(n);
  if (t != UINT32_MAX)
    return t;
  return half_below_count(65536 - n) | 1u << 16; /* keep the complement */
}

double dropout_keep_rate(uint32_t threshold) {
  uint32_t below = half_count_below(threshold & 0xffff);
  return (threshold >> 16 & 1 ? 65536 - below : below) / 65536.0;
}

bool dropout_keep_bits(uint32_t u, uint32_t threshold) {
  return half_lt(u & 0xffff, threshold & 0xffff) != (bool)(threshold >> 16 & 1);
}

bool dropout_keep(uint64_t seed, uint64_t offset, uint32_t bh, uint32_t q, uint32_t k,
                  uint32_t threshold) {
  uint32_t ctr[4] = {q & ~8u, k & ~9u, bh, (uint32_t)offset};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32) + (uint32_t)(offset >> 32)};
  uint32_t w[4];
  philox4x32(ctr, key, DROPOUT_ROUNDS, w);
  uint32_t slot = (k & 1) | (k >> 3 & 1) << 1 | (q >> 3 & 1) << 2;
  return dropout_keep_bits(w[slot / 2] >> (16 * (slot % 2)), threshold);
}

uint32_t dropout_threshold_torch(double p) {
  return (uint32_t)floor((double)(1.0f - (float)p) * 255.0) + 1;
}

uint32_t dropout_launch_threshold(double p, bool torch) {
  return torch ? dropout_threshold_torch(p) : dropout_threshold(p);
}

float dropout_launch_scale(double p, bool torch) {
  return torch ? 1.0f / (1.0f - (float)p) : (float)(1.0 / (1.0 - p));
}

bool dropout_keep_torch(uint64_t seed, uint64_t offset, uint32_t bh, uint32_t q, uint32_t k,
                        uint32_t threshold) {
  uint64_t off = offset + 32 * (uint64_t)bh + 4 * (q % 8) + (k % 8) / 2;
  uint32_t ctr[4] = {(uint32_t)off, (uint32_t)(off >> 32), q / 16, k / 32};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t w[4];
  philox4x32(ctr, key, DROPOUT_ROUNDS, w);
  uint32_t byte = (w[(k % 32) / 8] >> (8 * (2 * ((q % 16) / 8) + k % 2))) & 0xff;
  return byte < threshold;
}
