/* dropout_mask.h - which elements dropout keeps (issue 18): the definition
 * that kernels, the interpreter, host references and the runtime share, on
 * the host; ir/dropout.h builds the same decision as tile-IR ops.
 *
 * Philox4x32 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy
 * as 1, 2, 3", SC 2011; Random123) is counter-based: its output is a pure
 * function of a 128-bit counter and a 64-bit key. A round is two 32 x 32 ->
 * 64-bit multiplications (their halves) and xors; between rounds the key is
 * bumped by the Weyl constants. PyTorch's CUDA generator runs 10 rounds,
 * FlashAttention-2's kernels 7.
 *
 * Element (bh = b * heads + h, q, k) of a launch with seed and offset (both
 * 64-bit, as PyTorch's CUDA generator hands them out) belongs to the group
 * of eight elements that differ only in bits 0 and 3 of k and bit 3 of q,
 * and takes the 16-bit slot u = (k & 1) | (k >> 3 & 1) << 1 | (q >> 3 & 1) << 2
 * of that group's
 *   philox4x32_7(counter = (q & ~8, k & ~9, bh, offset_lo),
 *                key = (seed_lo, seed_hi + offset_hi))
 * (word slot / 2, low half for even slots). It is kept when
 *   (half(u) < half(t)) != flip
 * with u and t read as IEEE binary16 bit patterns (ordered: NaN compares
 * false) and (t, flip) the launch's threshold argument (t in its low 16
 * bits, flip in bit 16), chosen by dropout_threshold so that exactly
 * round(65536 (1 - p)) of the 65536 patterns are kept: a keep rate within
 * 2^-17 of 1 - p (FlashAttention-2 compares bytes: rate (floor(255 (1 - p))
 * + 1) / 256). The binary16 order is the tensor cores' neighbour's: one
 * `set.lt.u32.f16x2` compares the two 16-bit values of a word at once and
 * yields the masks of two adjacent elements, which one lop3 applies to
 * their packed bf16 or f16 probabilities (codegen/compute_dropout.c). A pure
 * function of (seed, offset, b, h, q, k): tiles, warps and schedules cannot
 * change it, so the backward regenerates the forward's mask and a host
 * reference recomputes it. The keys enter the counter's second word, which
 * Philox's first round only xors: in a kernel whose rows are queries the
 * first round's products and one of the second's are per-row constants,
 * hoisted out of the K/V loop.
 *
 * Why these groups: a thread's accumulator fragment of a tensor-core matmul
 * (mma.sync m16n8 and wgmma alike) holds rows r and r + 8 and columns c,
 * c + 1 of each 8-column block; over two blocks that is exactly one group of
 * a query-rows score tile, so the forward and the Q-outer backward kernel
 * spend one Philox call on eight elements (the unrolled per-element IR
 * becomes one call once LLVM sees equal counters). The K/V-outer kernels'
 * transposed tile needs two calls per eight. Seven rounds as
 * FlashAttention-2's kernels (Philox4x32-7 passes BigCrush, Salmon et al.
 * 2011).
 */
#ifndef FLASHC_BASE_DROPOUT_MASK_H
#define FLASHC_BASE_DROPOUT_MASK_H

#include <stdbool.h>
#include <stdint.h>

#define PHILOX_M0 0xD2511F53u /* round multipliers */
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u /* key bumps (golden ratio, sqrt(3) - 1) */
#define PHILOX_W1 0xBB67AE85u

enum { DROPOUT_ROUNDS = 7 };

/* Random123's philox4x32_R: `rounds` rounds of ctr[4] under key[2]. */
void philox4x32(const uint32_t ctr[4], const uint32_t key[2], int rounds, uint32_t out[4]);

/* The launch's threshold argument for rate p in [0, 1]: t | flip << 16
 * (above) keeping round(65536 (1 - p)) of the 65536 16-bit patterns. */
uint32_t dropout_threshold(double p);

/* The fraction of 16-bit patterns that threshold keeps (its exact rate). */
double dropout_keep_rate(uint32_t threshold);

/* Is a's low 16 bits' value below b's as binary16 (ordered: false if
 * either is NaN)? */
bool half_lt(uint32_t a, uint32_t b);

/* The keep decision of a 16-bit value u (its low bits) under threshold. */
bool dropout_keep_bits(uint32_t u, uint32_t threshold);

/* The keep decision of element (bh, q, k) (the definition above). */
bool dropout_keep(uint64_t seed, uint64_t offset, uint32_t bh, uint32_t q, uint32_t k,
                  uint32_t threshold);

/* PyTorch's flash backend (FlashAttention-2's kernels, `dropout_mask =
 * torch`, docs/dropout.md): element (bh, q, k) takes byte
 * 2 ((q % 16) / 8) + k % 2 of word (k % 32) / 8 of
 *   philox4x32_7(counter = (lo, hi of offset + 32 bh + 4 (q % 8) + (k % 8) / 2,
 *                           q / 16, k / 32),
 *                key = (seed_lo, seed_hi))
 * and is kept when that byte is <= floor(255 (1 - p)) (1 - p in float, as
 * FlashAttention computes it): a keep rate of (floor + 1) / 256.
 * dropout_threshold_torch gives floor + 1: the byte is kept when below it. */
uint32_t dropout_threshold_torch(double p);

/* The kernels' launch arguments keep_threshold and keep_scale for rate p
 * under either decision (torch: FlashAttention-2's threshold and its float
 * 1 / (1 - p)): what the runtime passes and the interpreter binds. */
uint32_t dropout_launch_threshold(double p, bool torch);
float dropout_launch_scale(double p, bool torch);

bool dropout_keep_torch(uint64_t seed, uint64_t offset, uint32_t bh, uint32_t q, uint32_t k,
                        uint32_t threshold);

#endif
