/* fuzz_tile.c - libFuzzer harness for tile IR text: parse, verify, print and
 * parse again (the printed form must parse and verify), then the whole pass
 * pipeline for sm_90a and for sm_80, each on its own parse of the input.
 * A pass that leaves invalid IR makes run_pipeline fail (the verifier runs
 * after every pass), which is fine; crashes, hangs, leaks and sanitizer
 * reports are bugs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_common.h"
#include "ir/ir.h"
#include "passes/passes.h"

/* The printed IR of m, parsed and verified again. */
static void roundtrip(const Module *m) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  FUZZ_CHECK(f);
  module_print(f, m);
  fclose(f);
  Module *again = module_parse("printed.tile", buf, len, fuzz_sink());
  if (!again) {
    fprintf(stderr, "printed IR does not parse:\n%s\n", buf);
    FUZZ_CHECK(again);
  }
  FUZZ_CHECK(module_verify(again, "reparse", NULL) == 0);
  module_destroy(again);
  free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FILE *sink = fuzz_sink();
  static const char *const targets[2] = {"sm_90a", "sm_80"};
  for (int t = 0; t < 2; t++) {
    Module *m = module_parse("fuzz.tile", (const char *)data, size, sink);
    if (!m)
      return 0;
    if (module_verify(m, "parsing", sink) != 0) {
      module_destroy(m);
      return 0;
    }
    if (t == 0)
      roundtrip(m);
    PassOptions po;
    pass_options_init(&po);
    po.target = targets[t];
    po.dump = sink;
    po.diag = sink;
    if (run_pipeline(m, &po) == 0)
      module_print(sink, m);
    module_destroy(m);
  }
  return 0;
}
