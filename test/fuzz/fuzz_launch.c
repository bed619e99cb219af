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
 * edge cases (0, -1, INT64_MAX, 2^62, ...) or raw bytes. Block lists
 * (docs/abi.md, "Block lists"): forward and backward launches of kernels
 * that visit lists (block_list, blocks rows|cols, list_heads, tiles: as a
 * module has them, or raw: no or the wrong orientation, list_heads 0 or
 * 2^31-1, layout varlen, tile_kv 0), their backward plans with a classifier
 * per visiting kernel, classifier kernels (mode blocks) given to
 * fa_forward_check / fa_backward_check, all with args.blocks NULL (no GPU:
 * no fa_blocks); and the host-only entry points fa_block_lists_shape,
 * fa_classifier_grid, fa_blocks_check and fa_blocks_params on classifiers
 * (sane, classes kernels with a chunk, or raw keys) at sizes 0, 1,
 * negative, 2^31, INT64_MAX, whole tiles, or past int64 once rounded up to
 * a tile. The first byte picks the entry point: 0xf8..0xff block lists (no
 * other kept input starts so), there bit 0 the host-only entry points,
 * else bit 1 backward, else forward; otherwise bit 0 decode, else bit 1
 * backward, else forward; bit 2 makes a forward or backward launch a
 * varlen one.
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
 * the CUDA grid limits. Block lists: fa_forward_check and
 * fa_backward_check refuse a classifier; an accepted launch of a kernel
 * that visits lists has keys a module gives it (not varlen, its role's
 * orientation, list_heads 1 or heads), lists that fit (fa_block_lists_shape
 * as docs/abi.md defines them, at most INT32_MAX int32) and a parameter
 * list (a plan step's too) ending in blk_list and blk_count of that shape,
 * at 0; fa_block_lists_shape refuses exactly what the header says,
 * fa_classifier_grid gives the documented grid within the CUDA limits or
 * FA_ERR_TOO_LARGE, never a cut one; an accepted classifier launch
 * (fa_blocks_check) has a classifier's keys, sizes within int32 and grid
 * z, lists that fit, a grid fa_classifier_grid gives, bound inputs in the
 * address space, and fa_blocks_params' i32 values in range, the lists last.
 *
 * Here: the entry point. The generators are fuzz_launch_gen.c (values, the
 * kernel info, run-time inputs, tensors), fuzz_launch_gen_varlen.c,
 * fuzz_launch_gen_blocks.c (block lists, with what their accepted calls
 * promise) and one file a kind (fuzz_launch_gen_forward.c, _decode.c,
 * _backward.c, each with what its accepted launch promises); the oracle
 * every kind shares is fuzz_launch_oracle.c. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_launch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzIn in = {data, size};
  uint8_t pick = fuzz_u8(&in);
  if (pick >= 0xf8) { /* block lists (no kept input starts so: their meaning stays) */
    if (pick & 1)
      blocks_api(&in);
    else if (pick & 2)
      backward(&in, pick >> 2 & 1, 1);
    else
      forward(&in, pick >> 2 & 1, 1);
  } else if (pick & 1) {
    decode(&in);
  } else if (pick & 2) {
    backward(&in, pick >> 2 & 1, 0);
  } else {
    forward(&in, pick >> 2 & 1, 0);
  }
  return 0;
}
