/* Uses the installed runtime: parses a kernel's metadata (no GPU needed). */
#include <stdio.h>
#include <string.h>

#include "flashc_runtime.h"

int main(void) {
  static const char meta[] =
      "// flashc.meta version 1\n// flashc.meta kernel k\n// flashc.meta dtype bf16\n"
      "// flashc.meta head_dim 64\n// flashc.meta heads 8\n// flashc.meta kv_heads 8\n"
      "// flashc.meta tile_q 64\n// flashc.meta threads 128\n// flashc.meta smem_bytes 0\n"
      "// flashc.meta grid q_tiles,heads,batch\n";
  fa_kernel_info info;
  char err[256];
  fa_status st = fa_meta_parse(meta, strlen(meta), &info, err, sizeof err);
  printf("runtime %s: %s, kernel %s head_dim %d\n", FA_RUNTIME_VERSION, fa_status_string(st),
         info.kernel, info.head_dim);
  return st != FA_OK;
}
