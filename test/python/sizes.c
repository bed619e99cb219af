/* test/python/compile.test: the C sizes the package's ctypes structs mirror. */
#include <stdio.h>

#include "flashc_jit.h"

int main(void) {
  printf("fa_kernel_info=%zu,fa_decode_info=%zu,fa_jit_options=%zu,fa_tensor=%zu,"
         "fa_forward_args=%zu,fa_backward_args=%zu,fa_decode_args=%zu\n",
         sizeof(fa_kernel_info), sizeof(fa_decode_info), sizeof(fa_jit_options),
         sizeof(fa_tensor), sizeof(fa_forward_args), sizeof(fa_backward_args),
         sizeof(fa_decode_args));
  return 0;
}
