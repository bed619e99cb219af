/* fuzz_pipeline.c - libFuzzer harness for a spec through the whole compiler:
 * parse, check, then for each kernel (the first two) and each target
 * (sm_90a, sm_80): lower to tile IR, verify, run the pass pipeline and
 * generate the metadata and the PTX. The runtime's metadata parser must
 * accept what codegen writes (the compiler/runtime contract, docs/abi.md).
 *
 * Codegen goes through MLIR and LLVM and takes up to a few hundred
 * milliseconds, so only inputs that pass sema get that far, PTX for one
 * kernel (FLASHC_FUZZ_PTX below); run it with a small -max_len.
 * FLASHC_FUZZ_STRICT=1 also makes a codegen error on a kernel the pipeline
 * accepted abort (an internal error of the CLI, exit status 3). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "frontend/emit_tile.h"
#include "fuzz_common.h"
#include "ir/ir.h"
#include "passes/passes.h"
#ifdef FUZZ_HAVE_RUNTIME
#include "flashc_runtime.h"
#endif

static int strict(void) {
  const char *e = getenv("FLASHC_FUZZ_STRICT");
  return e && e[0] == '1';
}

#ifdef FUZZ_HAVE_RUNTIME
/* What codegen wrote must be metadata the runtime loads, naming the kernel. */
static void check_meta(const char *kernel, const char *text, size_t len) {
  fa_kernel_info info;
  char err[512];
  fa_status st = fa_meta_parse(text, len, &info, err, sizeof err);
  if (st != FA_OK)
    fprintf(stderr, "fa_meta_parse refuses codegen's metadata: %s\n%.*s\n", err,
            (int)(len > 4000 ? 4000 : len), text);
  FUZZ_CHECK(st == FA_OK);
  FUZZ_CHECK(strcmp(info.kernel, kernel) == 0);
}
#endif

/* How many targets go all the way to PTX (through LLVM -O3 and the NVPTX
 * backend, ~0.2 s a kernel): FLASHC_FUZZ_PTX=0, 1 (default: one target a
 * input, chosen by the input's bytes) or 2 (both). The MLIR module and the
 * metadata, which are flashc's own code, are built for both targets always. */
static int ptx_targets(void) {
  static int v = -1;
  if (v < 0) {
    const char *e = getenv("FLASHC_FUZZ_PTX");
    v = e && e[0] >= '0' && e[0] <= '2' ? e[0] - '0' : 1;
  }
  return v;
}

/* One kernel for one target: lowering, pipeline, then the stages. */
static void compile(const KernelSpec *k, const char *target, int ptx, FILE *sink) {
  Module *m = module_create();
  PassOptions po;
  pass_options_init(&po);
  po.target = target;
  po.dump = sink;
  po.diag = sink;
  if (!emit_tile_kernel(m, k, target, sink) || module_verify(m, "lowering", sink) != 0 ||
      run_pipeline(m, &po) != 0) {
    module_destroy(m);
    return;
  }
  CgOptions co;
  cg_options_init(&co);
  co.target = target;
  static const CgStage stages[3] = {CG_STAGE_MLIR, CG_STAGE_META, CG_STAGE_PTX};
  for (int s = 0; s < (ptx ? 3 : 2); s++) {
    char *out = NULL, err[8192] = "";
    size_t len = 0;
    if (cg_emit(m, stages[s], &co, &out, &len, err, sizeof err) != 0) {
      if (strict()) {
        fprintf(stderr, "codegen failed after the pipeline accepted the kernel:\n%s\n", err);
        abort();
      }
      FUZZ_CHECK(out == NULL);
      break;
    }
    FUZZ_CHECK(out && out[len] == '\0');
#ifdef FUZZ_HAVE_RUNTIME
    if (stages[s] != CG_STAGE_MLIR)
      check_meta(k->name, out, len);
#endif
    free(out);
  }
  module_destroy(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FILE *sink = fuzz_sink();
  fe_set_diag_stream(sink);
  int nerr = 0;
  Ast *ast = fe_parse("fuzz.fa", (const char *)data, size, &nerr);
  if (!ast)
    return 0;
  SpecFile *spec = nerr ? NULL : fe_check(ast, &nerr);
  if (spec && nerr == 0)
    for (int i = 0; i < spec->nkernels && i < 2; i++) {
      /* PTX for the first kernel only; which target when one: the bytes' parity. */
      unsigned sum = 0;
      for (size_t j = 0; j < size; j++)
        sum += data[j];
      int n = i == 0 ? ptx_targets() : 0;
      compile(spec->kernels[i], "sm_90a", n == 2 || (n == 1 && sum % 2 == 0), sink);
      compile(spec->kernels[i], "sm_80", n == 2 || (n == 1 && sum % 2 == 1), sink);
    }
  fe_free_spec(spec);
  fe_free_ast(ast);
  return 0;
}
