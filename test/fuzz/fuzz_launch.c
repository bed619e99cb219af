/* fuzz_launch.c - libFuzzer harness for the launch-argument checks,
 * fa_forward_check (runtime/check.c), fa_decode_check (runtime/decode.c)
 * and fa_backward_check (runtime/backward.c), no GPU needed. The input is
 * decoded into a kernel info (a sane one built from a few choices, or every
 * field raw: hand-built infos must be refused, not trusted) and the
 * arguments: dims, strides, pointers as integers, dtypes, the decode
 * cache's block table and its host copies, the backward's workspace, the
 * declared run-time inputs and their bindings (docs/abi.md), and a
 * variable-length batch's fa_varlen (docs/abi.md, "Variable-length
 * batches"): num_seqs at the edges (0, 1, 65535, 65536, negative), NULL,
 * misaligned, output-overlapping or plausible cu_seqlens, host copies absent
 * or present (valid, random, decreasing, wrong first or last value,
 * misaligned), max_seqlen_q/k at the edges (0, 1, 2^31-1, 2^31, negative,
 * one short), a tensor not packed (dim[0] != 1), a padded kernel given a
 * fa_varlen and a varlen kernel given none. Values come from a table of
 * edge cases (0, -1, INT64_MAX, 2^62, ...) or raw bytes. The first byte
 * picks the entry point: bit 0 decode, else bit 1 backward, else forward;
 * bit 2 makes a forward or backward launch a varlen one.
 *
 * Oracle: a launch the checks accept keeps its contract (flashc_runtime.h):
 * no tensor's bytes reach 2^62, the outputs (O, LSE; dQ, dK, dV and the
 * workspace) do not overlap an input or each other (a bound run-time input
 * and a varlen launch's cu_seqlens included), pointers are aligned; every
 * range (tensors, LSE, the backward's workspace, cu_seqlens, a decode
 * launch's cache_seqlens and block_table, bound inputs) ends within the
 * address space; a varlen launch's struct is given exactly to a varlen
 * kernel, its fields are in range, every tensor is packed, the int32
 * totals and padded rows fit, and host copies hold valid prefix sums
 * meeting the requires per sequence; fa_forward_params and the backward plan's fa_backward_params
 * give i32 values in range, batch / seqlen_q / seqlen_k as the launch's
 * sizes (num_seqs and the maxima for varlen) and a varlen kernel's four
 * parameters right after the kind's; the backward's plan succeeds within
 * the CUDA grid limits.
 *
 * Here: the entry point. The generators are fuzz_launch_gen.c (values, the
 * kernel info, run-time inputs, tensors), fuzz_launch_gen_varlen.c and one
 * file a kind (fuzz_launch_gen_forward.c, _decode.c, _backward.c, each
 * with what its accepted launch promises); the oracle every kind shares is
 * fuzz_launch_oracle.c. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_launch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzIn in = {data, size};
  uint8_t pick = fuzz_u8(&in);
  if (pick & 1)
    decode(&in);
  else if (pick & 2)
    backward(&in, pick >> 2 & 1);
  else
    forward(&in, pick >> 2 & 1);
  return 0;
}
