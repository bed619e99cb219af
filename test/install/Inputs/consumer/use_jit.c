/* Uses the installed JIT alone (-lflashc_jit: the runtime is inside): a spec
 * compiled to PTX at run time (no cache), its metadata parsed by the
 * runtime's API. */
#include <stdio.h>
#include <string.h>

#include "flashc_jit.h"

int main(void) {
  static const char spec[] = "attention tiny { dtype = bf16; head_dim = 64; heads = 2; }\n";
  fa_jit_options o;
  fa_jit_options_init(&o);
  o.cache_dir = "";
  char *ptx = NULL, err[1024] = "";
  size_t len = 0;
  fa_status st = fa_jit_compile(spec, strlen(spec), &o, &ptx, &len, err, sizeof err);
  fa_kernel_info info;
  fa_status mst = st == FA_OK ? fa_meta_parse(ptx, len, &info, err, sizeof err) : st;
  printf("jit: %s, PTX %s, kernel %s\n", fa_status_string(st), len > 1000 ? "made" : "missing",
         mst == FA_OK ? info.kernel : err);
  fa_jit_free(ptx);
  return st != FA_OK || mst != FA_OK;
}
