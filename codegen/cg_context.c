/* cg_context.c - the MlirContext, its dialects and its diagnostic handler. */
#include "codegen/cg_context.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_strbuf.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Arith.h"
#include "mlir-c/Dialect/ControlFlow.h"
#include "mlir-c/Dialect/Func.h"
#include "mlir-c/Dialect/GPU.h"
#include "mlir-c/Dialect/LLVM.h"
#include "mlir-c/Dialect/Math.h"
#include "mlir-c/Dialect/MemRef.h"
#include "mlir-c/Dialect/NVGPU.h"
#include "mlir-c/Dialect/NVVM.h"
#include "mlir-c/Dialect/SCF.h"
#include "mlir-c/Dialect/Vector.h"
#include "mlir-c/RegisterEverything.h"

struct CgContext {
  MlirContext ctx;
  MlirDiagnosticHandlerID handler;
  CgStrBuf diags;
  int nerrors;
  FILE *echo;
};

/* ------------------------------------------------------------ locations */

/* Finds the first file:line:col location inside loc (fused and named
 * locations wrap ours after canonicalization); false when there is none. */
static bool find_file_loc(MlirLocation loc, MlirLocation *out) {
  if (mlirLocationIsAFileLineColRange(loc)) {
    *out = loc;
    return true;
  }
  if (mlirLocationIsAName(loc))
    return find_file_loc(mlirLocationNameGetChildLoc(loc), out);
  if (mlirLocationIsACallSite(loc))
    return find_file_loc(mlirLocationCallSiteGetCaller(loc), out);
  if (mlirLocationIsAFused(loc)) {
    intptr_t n = mlirLocationFusedGetNumLocations(loc);
    MlirLocation sub[16];
    if (n > 16)
      n = 16;
    mlirLocationFusedGetLocations(loc, sub);
    for (intptr_t i = 0; i < n; i++)
      if (find_file_loc(sub[i], out))
        return true;
  }
  return false;
}

static void append_string_ref(MlirStringRef s, void *user) {
  cg_strbuf_append((CgStrBuf *)user, s.data, s.length);
}

/* Writes `file:line:col` (or MLIR's own text for a location without a file)
 * to sb. */
static void append_location(CgStrBuf *sb, MlirLocation loc) {
  MlirLocation fl;
  if (find_file_loc(loc, &fl)) {
    MlirIdentifier f = mlirLocationFileLineColRangeGetFilename(fl);
    MlirStringRef name = mlirIdentifierStr(f);
    cg_strbuf_append(sb, name.data, name.length);
    cg_strbuf_printf(sb, ":%d:%d", mlirLocationFileLineColRangeGetStartLine(fl),
                     mlirLocationFileLineColRangeGetStartColumn(fl));
    return;
  }
  cg_strbuf_puts(sb, "<mlir>");
}

static const char *severity_name(MlirDiagnosticSeverity s) {
  switch (s) {
  case MlirDiagnosticError: return "error";
  case MlirDiagnosticWarning: return "warning";
  case MlirDiagnosticNote: return "note";
  case MlirDiagnosticRemark: return "remark";
  }
  return "error";
}

/* --------------------------------------------------------- diagnostics */

static void emit_line_start(CgContext *c, size_t start) {
  if (c->echo) {
    fputs(c->diags.data + start, c->echo);
    fflush(c->echo);
  }
}

static void append_diagnostic(CgContext *c, MlirDiagnostic d) {
  size_t start = c->diags.len;
  append_location(&c->diags, mlirDiagnosticGetLocation(d));
  cg_strbuf_printf(&c->diags, ": %s: ", severity_name(mlirDiagnosticGetSeverity(d)));
  mlirDiagnosticPrint(d, append_string_ref, &c->diags);
  cg_strbuf_puts(&c->diags, "\n");
  emit_line_start(c, start);
  for (intptr_t i = 0; i < mlirDiagnosticGetNumNotes(d); i++)
    append_diagnostic(c, mlirDiagnosticGetNote(d, i));
}

static MlirLogicalResult on_diagnostic(MlirDiagnostic d, void *user) {
  CgContext *c = user;
  if (mlirDiagnosticGetSeverity(d) == MlirDiagnosticError)
    c->nerrors++;
  append_diagnostic(c, d);
  return mlirLogicalResultSuccess(); /* handled: MLIR prints nothing itself */
}

void cg_context_error(CgContext *c, MlirLocation loc, const char *fmt, ...) {
  size_t start = c->diags.len;
  append_location(&c->diags, loc);
  cg_strbuf_puts(&c->diags, ": error: ");
  va_list ap;
  va_start(ap, fmt);
  cg_strbuf_vprintf(&c->diags, fmt, ap);
  va_end(ap);
  cg_strbuf_puts(&c->diags, "\n");
  c->nerrors++;
  emit_line_start(c, start);
}

/* ------------------------------------------------------ create/destroy */

/* The dialects codegen emits or that its lowering passes produce. */
static void insert_dialects(MlirDialectRegistry reg) {
  MlirDialectHandle handles[] = {
      mlirGetDialectHandle__func__(),  mlirGetDialectHandle__gpu__(),
      mlirGetDialectHandle__nvvm__(),  mlirGetDialectHandle__nvgpu__(),
      mlirGetDialectHandle__scf__(),   mlirGetDialectHandle__arith__(),
      mlirGetDialectHandle__math__(),  mlirGetDialectHandle__memref__(),
      mlirGetDialectHandle__vector__(), mlirGetDialectHandle__llvm__(),
      mlirGetDialectHandle__cf__(),
  };
  for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++)
    mlirDialectHandleInsertDialect(handles[i], reg);
}

CgContext *cg_context_create(void) {
  CgContext *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  MlirDialectRegistry reg = mlirDialectRegistryCreate();
  insert_dialects(reg);
  /* One kernel per module: threads would only add start-up cost. */
  c->ctx = mlirContextCreateWithRegistry(reg, /*threadingEnabled=*/false);
  mlirDialectRegistryDestroy(reg);
  mlirContextLoadAllAvailableDialects(c->ctx);
  /* Translation of the llvm and nvvm dialects to LLVM IR (mlir_to_ptx.c). */
  mlirRegisterAllLLVMTranslations(c->ctx);
  c->handler = mlirContextAttachDiagnosticHandler(c->ctx, on_diagnostic, c, NULL);
  cg_strbuf_init(&c->diags);
  return c;
}

void cg_context_destroy(CgContext *c) {
  if (!c)
    return;
  mlirContextDetachDiagnosticHandler(c->ctx, c->handler);
  mlirContextDestroy(c->ctx);
  cg_strbuf_free(&c->diags);
  free(c);
}

MlirContext cg_context_mlir(CgContext *c) { return c->ctx; }

const char *cg_context_diagnostics(const CgContext *c) {
  return c->diags.data ? c->diags.data : "";
}

int cg_context_error_count(const CgContext *c) { return c->nerrors; }

void cg_context_clear_diagnostics(CgContext *c) {
  cg_strbuf_clear(&c->diags);
  c->nerrors = 0;
}

void cg_context_set_echo(CgContext *c, FILE *out) { c->echo = out; }
