/* test/python/compile.test: the C sizes (and the offsets of the fields
 * added last) the package's ctypes structs mirror. */
#include <stddef.h>
#include <stdio.h>

#include "flashc_jit.h"

int main(void) {
  printf("fa_kernel_info=%zu,fa_decode_info=%zu,fa_jit_options=%zu,fa_tensor=%zu,"
         "fa_forward_args=%zu,fa_backward_args=%zu,fa_decode_args=%zu,fa_input_info=%zu,"
         "fa_input=%zu,fa_varlen=%zu",
         sizeof(fa_kernel_info), sizeof(fa_decode_info), sizeof(fa_jit_options),
         sizeof(fa_tensor), sizeof(fa_forward_args), sizeof(fa_backward_args),
         sizeof(fa_decode_args), sizeof(fa_input_info), sizeof(fa_input), sizeof(fa_varlen));
  /* run-time inputs (docs/abi.md): where each struct holds them */
  printf(",fa_kernel_info.ninputs=%zu,fa_kernel_info.inputs=%zu,fa_kernel_info.require_k_le_q=%zu,"
         "fa_input.tensor=%zu,fa_input.value=%zu,fa_forward_args.inputs=%zu,"
         "fa_backward_args.inputs=%zu,fa_decode_args.inputs=%zu,fa_decode_args.num_inputs=%zu",
         offsetof(fa_kernel_info, ninputs), offsetof(fa_kernel_info, inputs),
         offsetof(fa_kernel_info, require_k_le_q), offsetof(fa_input, tensor),
         offsetof(fa_input, value), offsetof(fa_forward_args, inputs),
         offsetof(fa_backward_args, inputs), offsetof(fa_decode_args, inputs),
         offsetof(fa_decode_args, num_inputs));
  /* variable-length batches (docs/abi.md): fa_varlen and the fields that hold it */
  printf(",fa_kernel_info.varlen=%zu,fa_forward_args.varlen=%zu,fa_backward_args.varlen=%zu,"
         "fa_varlen.num_seqs=%zu,fa_varlen.max_seqlen_q=%zu,fa_varlen.max_seqlen_k=%zu",
         offsetof(fa_kernel_info, varlen), offsetof(fa_forward_args, varlen),
         offsetof(fa_backward_args, varlen), offsetof(fa_varlen, num_seqs),
         offsetof(fa_varlen, max_seqlen_q), offsetof(fa_varlen, max_seqlen_k));
  /* block lists (docs/abi.md): fa_block_lists, fa_blocks_args and the fields that hold them */
  printf(",fa_block_lists=%zu,fa_blocks_args=%zu,fa_kernel_info.blocks=%zu,"
         "fa_kernel_info.block_list=%zu,fa_forward_args.blocks=%zu,fa_backward_args.blocks=%zu,"
         "fa_block_lists.count_stride=%zu,fa_blocks_args.stream=%zu\n",
         sizeof(fa_block_lists), sizeof(fa_blocks_args), offsetof(fa_kernel_info, blocks),
         offsetof(fa_kernel_info, block_list), offsetof(fa_forward_args, blocks),
         offsetof(fa_backward_args, blocks), offsetof(fa_block_lists, count_stride),
         offsetof(fa_blocks_args, stream));
  return 0;
}
