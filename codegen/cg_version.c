/* cg_version.c - the LLVM/MLIR versions flashc is linked against. */
#include <stdio.h>

#include "codegen/cg_context.h"
#include "codegen/codegen.h"
#include "llvm-c/Core.h"

/* The version comes from libLLVM itself (not from headers), and creating a
 * context proves that libMLIR and the C API link and load our dialects. */
const char *cg_version(void) {
  static char text[160];
  if (text[0])
    return text;
  unsigned major = 0, minor = 0, patch = 0;
  LLVMGetVersion(&major, &minor, &patch);
  CgContext *c = cg_context_create();
  long ndialects = c ? (long)mlirContextGetNumLoadedDialects(cg_context_mlir(c)) : -1;
  cg_context_destroy(c);
  snprintf(text, sizeof text, "LLVM %u.%u.%u, MLIR %u.%u.%u (%ld dialects loaded), NVPTX backend",
           major, minor, patch, major, minor, patch, ndialects);
  return text;
}
