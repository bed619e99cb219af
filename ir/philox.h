/* philox.h - Philox4x32 (Salmon, Moraes, Dror, Shaw, "Parallel random
 * numbers: as easy as 1, 2, 3", SC 2011; Random123) as plain tile-IR ops,
 * and the same generator on the host.
 *
 * Counter-based: the output is a pure function of a 128-bit counter and a
 * 64-bit key, so an element's random bits depend on (seed, offset, b, h, q,
 * k) only, whatever the tiles, warps or schedule that compute them: the
 * forward and the backward regenerate the same dropout mask, and a host
 * reference recomputes it (issue 18). A round is two 32 x 32 -> 64-bit
 * multiplications (mulhi and mul give the halves) and xors; between rounds
 * the key is bumped by the Weyl constants. PyTorch's CUDA generator runs 10
 * rounds, FlashAttention-2's kernels 7.
 */
#ifndef FLASHC_PHILOX_H
#define FLASHC_PHILOX_H

#include <stdint.h>

#include "ir/ir.h"

#define PHILOX_M0 0xD2511F53u /* round multipliers */
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u /* key bumps (golden ratio, sqrt(3) - 1) */
#define PHILOX_W1 0xBB67AE85u

/* Emits `rounds` Philox4x32 rounds at b: ctr[4] and key[2] are u32 scalars
 * or tiles (broadcasting as elementwise ops do); out[4] receives the four
 * output words. */
void build_philox4x32(Builder *b, Value *const ctr[4], Value *const key[2], int rounds,
                      Value *out[4]);

/* The same on the host (Random123's philox4x32_R). */
void philox4x32(const uint32_t ctr[4], const uint32_t key[2], int rounds, uint32_t out[4]);

#endif
