/* philox.h - Philox4x32 as plain tile-IR ops (the host form and the
 * constants: base/dropout_mask.h). The interpreter runs them like any u32
 * ops; codegen lowers them to mul.hi / mul.lo / xor. */
#ifndef FLASHC_PHILOX_H
#define FLASHC_PHILOX_H

#include "base/dropout_mask.h"
#include "ir/ir.h"

/* Emits `rounds` Philox4x32 rounds at b: ctr[4] and key[2] are u32 scalars
 * or tiles (broadcasting as elementwise ops do); out[4] receives the four
 * output words. */
void build_philox4x32(Builder *b, Value *const ctr[4], Value *const key[2], int rounds,
                      Value *out[4]);

#endif
