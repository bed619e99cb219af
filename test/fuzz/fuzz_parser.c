/* fuzz_parser.c - libFuzzer harness for the frontend: parse, print the AST,
 * check, print the spec, free. Any crash, hang, leak or sanitizer report is a
 * bug; inputs that found one are kept in corpus/ as regression tests. */
#include <stdint.h>
#include <stdio.h>

#include "frontend/frontend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *sink;
  if (!sink)
    sink = fopen("/dev/null", "w");
  fe_set_diag_stream(sink);
  int nerrors = 0;
  Ast *ast = fe_parse("fuzz.fa", (const char *)data, size, &nerrors);
  fe_print_ast(sink, ast);
  /* Check even after parse errors: sema must cope with partial trees. */
  SpecFile *spec = fe_check(ast, &nerrors);
  fe_print_spec(sink, spec);
  if (spec)
    for (int i = 0; i < spec->nkernels; i++) {
      fe_print_expr(sink, spec->kernels[i]->mask);
      fe_print_expr(sink, spec->kernels[i]->score);
    }
  fe_free_spec(spec);
  fe_free_ast(ast);
  return 0;
}
