/* mlir_to_ptx.c - MLIR pass pipeline, translation to LLVM IR, NVPTX backend. */
#include "codegen/mlir_to_ptx.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "llvm-c/BitReader.h"
#include "llvm-c/BitWriter.h"
#include "llvm-c/Core.h"
#include "llvm-c/Error.h"
#include "llvm-c/Support.h"
#include "llvm-c/Target.h"
#include "llvm-c/TargetMachine.h"
#include "llvm-c/Transforms/PassBuilder.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/Conversion.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Target/LLVMIR.h"
#include "mlir-c/Transforms.h"

double cg_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Stage 1 runs inside gpu.module. Codegen emits no math-dialect ops (it
 * calls LLVM/NVVM intrinsics through llvm.call_intrinsic, because
 * convert-gpu-to-nvvm turns math ops and even llvm.intr.exp2/maxnum into
 * libdevice calls, which we never link); convert-math-to-llvm stays first as
 * a guard for any that appear. scf to cf before gpu to nvvm, which wants
 * unstructured control flow. convert-gpu-to-nvvm lowers arith and cf only
 * through dialect interfaces that come with all of MLIR's extensions
 * registered; our context loads just our dialects, so arith and cf get their
 * own passes. nvvm-to-llvm turns the few NVVM ops without an intrinsic into
 * inline PTX. convert-cf-to-llvm only runs on a builtin.module, so stage 2
 * runs after the kernel's ops have been moved out of gpu.module. */
const char cg_mlir_pipeline[] =
    "builtin.module(gpu.module(convert-math-to-llvm, convert-scf-to-cf, "
    "convert-gpu-to-nvvm, convert-arith-to-llvm, convert-nvvm-to-llvm))";
const char cg_mlir_pipeline2[] =
    "builtin.module(convert-cf-to-llvm, canonicalize, cse, reconcile-unrealized-casts)";

/* ------------------------------------------------------- registration */

static pthread_once_t passes_once = PTHREAD_ONCE_INIT;
static pthread_once_t llvm_once = PTHREAD_ONCE_INIT;

/* Only the passes cg_mlir_pipeline names. */
static void register_passes(void) {
  mlirRegisterConversionConvertMathToLLVMPass();
  mlirRegisterConversionSCFToControlFlowPass();
  mlirRegisterConversionConvertGpuOpsToNVVMOps();
  mlirRegisterConversionConvertNVVMToLLVMPass();
  mlirRegisterConversionArithToLLVMConversionPass();
  mlirRegisterConversionConvertControlFlowToLLVMPass();
  mlirRegisterConversionReconcileUnrealizedCastsPass();
  mlirRegisterTransformsCanonicalizer();
  mlirRegisterTransformsCSE();
}

static void init_nvptx(void) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
}

/* --------------------------------------------------------- MLIR passes */

static void append_to_diag(MlirStringRef s, void *user) {
  cg_strbuf_append((CgStrBuf *)user, s.data, s.length);
}

static int run_pipeline(CgContext *c, MlirOperation module, const char *pipeline) {
  MlirContext ctx = cg_context_mlir(c);
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  CgStrBuf perr;
  cg_strbuf_init(&perr);
  int rc = 0;
  MlirLogicalResult ok = mlirParsePassPipeline(mlirPassManagerGetAsOpPassManager(pm),
                                               mlirStringRefCreateFromCString(pipeline),
                                               append_to_diag, &perr);
  if (mlirLogicalResultIsFailure(ok)) {
    cg_context_error(c, mlirLocationUnknownGet(ctx), "bad pass pipeline: %s",
                     perr.data ? perr.data : "");
    rc = -1;
  } else if (mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, module))) {
    if (cg_context_error_count(c) == 0)
      cg_context_error(c, mlirOperationGetLocation(module), "MLIR lowering failed");
    rc = -1;
  }
  mlirPassManagerDestroy(pm);
  cg_strbuf_free(&perr);
  return rc;
}

/* ------------------------------------------------------- translation */

static MlirOperation find_gpu_module(MlirOperation module) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    MlirIdentifier name = mlirOperationGetName(op);
    if (mlirStringRefEqual(mlirIdentifierStr(name), mlirStringRefCreateFromCString("gpu.module")))
      return op;
  }
  return (MlirOperation){NULL};
}

/* Each kernel's tensor-map arguments (CG_TENSOR_MAPS_ATTR) become what
 * CUDA's __grid_constant__ const CUtensorMap is: a 128-byte parameter
 * passed by value, 64-byte aligned, read in place (nvvm.grid_constant; without
 * it NVPTX would copy it to local memory, where TMA cannot read a map). */
static int make_tensor_map_args(CgContext *c, MlirOperation gpu_module) {
  MlirContext ctx = cg_context_mlir(c);
  MlirStringRef maps_name = mlirStringRefCreateFromCString(CG_TENSOR_MAPS_ATTR);
  MlirStringRef arg_attrs_name = mlirStringRefCreateFromCString("arg_attrs");
  MlirAttribute map_dict = mlirAttributeParseGet(
      ctx, mlirStringRefCreateFromCString("{llvm.align = 64 : i64, llvm.byval = "
                                          "!llvm.array<128 x i8>, nvvm.grid_constant}"));
  MlirAttribute empty = mlirDictionaryAttrGet(ctx, 0, NULL);
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(gpu_module, 0));
  for (MlirOperation fn = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(fn);
       fn = mlirOperationGetNextInBlock(fn)) {
    MlirAttribute maps = mlirOperationGetAttributeByName(fn, maps_name);
    if (mlirAttributeIsNull(maps))
      continue;
    MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(fn, 0));
    intptr_t nargs = mlirBlockGetNumArguments(entry);
    MlirAttribute old = mlirOperationGetAttributeByName(fn, arg_attrs_name);
    MlirAttribute *dicts = malloc(sizeof(MlirAttribute) * (size_t)(nargs ? nargs : 1));
    if (!dicts || mlirAttributeIsNull(map_dict) || !mlirAttributeIsADenseI32Array(maps)) {
      free(dicts);
      cg_context_error(c, mlirOperationGetLocation(fn), "internal error: tensor-map arguments");
      return -1;
    }
    for (intptr_t i = 0; i < nargs; i++)
      dicts[i] = !mlirAttributeIsNull(old) && i < mlirArrayAttrGetNumElements(old)
                     ? mlirArrayAttrGetElement(old, i)
                     : empty;
    for (intptr_t k = 0; k < mlirDenseArrayGetNumElements(maps); k++) {
      int32_t i = mlirDenseI32ArrayGetElement(maps, k);
      if (i >= 0 && i < nargs)
        dicts[i] = map_dict;
    }
    mlirOperationSetAttributeByName(fn, arg_attrs_name, mlirArrayAttrGet(ctx, nargs, dicts));
    mlirOperationRemoveAttributeByName(fn, maps_name);
    free(dicts);
  }
  return 0;
}

/* Moves the ops of gpu.module into a fresh builtin.module, which is what
 * the LLVM IR translation accepts (it does not look inside gpu.module). */
static MlirModule extract_device_module(MlirOperation gpu_module) {
  MlirModule dev = mlirModuleCreateEmpty(mlirOperationGetLocation(gpu_module));
  MlirBlock dst = mlirModuleGetBody(dev);
  MlirBlock src = mlirRegionGetFirstBlock(mlirOperationGetRegion(gpu_module, 0));
  MlirOperation op;
  while (!mlirOperationIsNull(op = mlirBlockGetFirstOperation(src))) {
    mlirOperationRemoveFromParent(op);
    mlirBlockAppendOwnedOperation(dst, op);
  }
  return dev;
}

int cg_lower_gpu_module(CgContext *c, MlirOperation module, MlirModule *device,
                        CgTimes *times) {
  pthread_once(&passes_once, register_passes);
  double t0 = cg_now_ms();
  *device = (MlirModule){NULL};
  int rc = run_pipeline(c, module, cg_mlir_pipeline);
  if (rc == 0) {
    MlirOperation gm = find_gpu_module(module);
    if (mlirOperationIsNull(gm)) {
      cg_context_error(c, mlirOperationGetLocation(module), "internal error: no gpu.module");
      rc = -1;
    } else if ((rc = make_tensor_map_args(c, gm)) == 0) {
      *device = extract_device_module(gm);
      rc = run_pipeline(c, mlirModuleGetOperation(*device), cg_mlir_pipeline2);
    }
  }
  if (rc && !mlirModuleIsNull(*device)) {
    mlirModuleDestroy(*device);
    *device = (MlirModule){NULL};
  }
  if (times)
    times->mlir_passes += cg_now_ms() - t0;
  return rc;
}

/* NVPTX reads its shared-pointer width from an LLVM command-line option when
 * a target machine is created; the option is process-global, so setting it
 * and creating the machine happen under one lock. */
static pthread_mutex_t target_machine_lock = PTHREAD_MUTEX_INITIALIZER;

static LLVMTargetMachineRef create_target_machine(const char *chip, const char *features,
                                                  int opt_level, bool short_shared_ptr,
                                                  char **err) {
  static const char triple[] = "nvptx64-nvidia-cuda";
  LLVMTargetRef target;
  if (LLVMGetTargetFromTriple(triple, &target, err))
    return NULL;
  LLVMCodeGenOptLevel lvl = opt_level <= 0   ? LLVMCodeGenLevelNone
                            : opt_level == 1 ? LLVMCodeGenLevelLess
                            : opt_level == 2 ? LLVMCodeGenLevelDefault
                                             : LLVMCodeGenLevelAggressive;
  pthread_mutex_lock(&target_machine_lock);
  const char *argv[] = {"flashc", short_shared_ptr ? "-nvptx-short-ptr=true" : "-nvptx-short-ptr=false"};
  LLVMParseCommandLineOptions(2, argv, NULL);
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, chip, features, lvl,
                                                    LLVMRelocDefault, LLVMCodeModelDefault);
  pthread_mutex_unlock(&target_machine_lock);
  return tm;
}

/* "what: msg" (malloc'ed; "what" when msg is NULL). */
static char *message_join(const char *what, const char *msg) {
  size_t len = strlen(what) + (msg ? strlen(msg) : 0) + 3;
  char *out = malloc(len);
  if (out)
    snprintf(out, len, "%s%s%s", what, msg ? ": " : "", msg ? msg : "");
  return out;
}

/* LLVM passes, printing, backend: everything after the module exists. On
 * failure *err is a malloc'ed message (no CgContext: kernel jobs run this
 * on threads of their own). */
static int llvm_stages_core(LLVMModuleRef lm, const char *chip, const char *features,
                            int opt_level, bool short_shared_ptr, CgStrBuf *llvm_ir,
                            CgStrBuf *ptx, double *ms_opt, double *ms_codegen, char **err) {
  char *msg = NULL;
  *err = NULL;
  LLVMTargetMachineRef tm = create_target_machine(chip, features, opt_level, short_shared_ptr, &msg);
  if (!tm) {
    *err = message_join("no NVPTX target", msg);
    LLVMDisposeMessage(msg);
    return -1;
  }
  LLVMSetTarget(lm, "nvptx64-nvidia-cuda");
  LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(lm, dl);
  LLVMDisposeTargetData(dl);
  int rc = 0;
  double t0 = cg_now_ms();
  if (opt_level > 0) {
    char passes[32];
    snprintf(passes, sizeof passes, "default<O%d>", opt_level > 3 ? 3 : opt_level);
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(lm, passes, tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (e) {
      char *m = LLVMGetErrorMessage(e);
      *err = message_join("LLVM optimization failed", m);
      LLVMDisposeErrorMessage(m);
      rc = -1;
    }
  }
  double t1 = cg_now_ms();
  if (rc == 0 && llvm_ir) {
    char *text = LLVMPrintModuleToString(lm);
    cg_strbuf_puts(llvm_ir, text);
    LLVMDisposeMessage(text);
  }
  if (rc == 0 && ptx) {
    LLVMMemoryBufferRef buf = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, lm, LLVMAssemblyFile, &msg, &buf)) {
      *err = message_join("NVPTX code generation failed", msg);
      LLVMDisposeMessage(msg);
      rc = -1;
    } else {
      cg_strbuf_append(ptx, LLVMGetBufferStart(buf), LLVMGetBufferSize(buf));
      LLVMDisposeMemoryBuffer(buf);
    }
  }
  *ms_opt += t1 - t0;
  *ms_codegen += cg_now_ms() - t1;
  LLVMDisposeTargetMachine(tm);
  return rc;
}

static int llvm_stages(CgContext *c, MlirLocation loc, LLVMModuleRef lm, const char *chip,
                       const char *features, int opt_level, bool short_shared_ptr,
                       CgStrBuf *llvm_ir, CgStrBuf *ptx, CgTimes *times) {
  double ms_opt = 0, ms_codegen = 0;
  char *err = NULL;
  int rc = llvm_stages_core(lm, chip, features, opt_level, short_shared_ptr, llvm_ir, ptx, &ms_opt,
                            &ms_codegen, &err);
  if (rc)
    cg_context_error(c, loc, "%s", err ? err : "LLVM failed");
  free(err);
  if (times) {
    times->llvm_opt += ms_opt;
    times->llvm_codegen += ms_codegen;
  }
  return rc;
}

/* --------------------------------------------- kernels on their own threads */

/* A module of several kernels: each kernel's LLVM passes and NVPTX
 * codegen, the bulk of the compile, run on a thread of its own, from the
 * module's bitcode parsed into the thread's context with the other
 * kernels deleted (they call nothing and nothing calls them). The PTX is
 * then put together as the whole module's would be: one header, the
 * module's declarations once before the first kernel, each kernel's labels
 * numbered by its place in the module (NVPTX numbers them per function). `FLASHC_JOBS=1` compiles the module whole;
 * test/codegen/parallel_ptx.test checks that both give the same bytes. */
enum { MAX_JOBS = 64 };

typedef struct KernelJob {
  const void *bitcode;
  size_t bitcode_len;
  int index; /* the kernel's place among the module's defined functions */
  const char *chip, *features;
  int opt_level;
  bool short_ptr;
  CgStrBuf ptx;
  char *err;
  double ms_opt, ms_codegen;
} KernelJob;

/* The defined functions of lm, in order (at most cap); -1 when one is
 * used by another (a callee the kernel jobs could not delete) or there are
 * more than cap. */
static int defined_functions(LLVMModuleRef lm, LLVMValueRef *fns, int cap) {
  int n = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(lm); f; f = LLVMGetNextFunction(f)) {
    if (LLVMIsDeclaration(f))
      continue;
    if (n == cap || LLVMGetFirstUse(f))
      return -1;
    fns[n++] = f;
  }
  return n;
}

static void *kernel_job(void *arg) {
  KernelJob *j = arg;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMMemoryBufferRef buf =
      LLVMCreateMemoryBufferWithMemoryRange(j->bitcode, j->bitcode_len, "kernel", 0);
  LLVMModuleRef m = NULL;
  if (LLVMParseBitcodeInContext2(ctx, buf, &m)) {
    j->err = message_join("internal error: a kernel's bitcode could not be read back", NULL);
  } else {
    LLVMValueRef fns[MAX_JOBS];
    int n = defined_functions(m, fns, MAX_JOBS);
    for (int i = 0; i < n; i++)
      if (i != j->index)
        LLVMDeleteFunction(fns[i]);
    llvm_stages_core(m, j->chip, j->features, j->opt_level, j->short_ptr, NULL, &j->ptx,
                     &j->ms_opt, &j->ms_codegen, &j->err);
    LLVMDisposeModule(m);
  }
  LLVMDisposeMemoryBuffer(buf);
  LLVMContextDispose(ctx);
  return NULL;
}

/* The jobs to run at once: FLASHC_JOBS when set (1: none at once), else
 * the machine's processors. */
static int max_jobs(void) {
  const char *e = getenv("FLASHC_JOBS");
  long n = e && *e ? atol(e) : sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > MAX_JOBS ? MAX_JOBS : (int)n;
}

/* Appends s[0 .. len) to out with "$L__BB0_" (NVPTX's labels, numbered
 * by function: 0 in a module of one) numbered index. */
static void append_renumbered(CgStrBuf *out, const char *s, size_t len, int index) {
  static const char label[] = "$L__BB0_";
  const size_t n = sizeof label - 1;
  size_t from = 0;
  for (size_t i = 0; i + n <= len; i++)
    if (memcmp(s + i, label, n) == 0) {
      cg_strbuf_append(out, s + from, i - from);
      cg_strbuf_printf(out, "$L__BB%d_", index);
      i += n - 1;
      from = i + 1;
    }
  cg_strbuf_append(out, s + from, len - from);
}

/* The parts of one kernel's PTX: its header (to the first "// .globl"
 * line), that line, the declarations after it, and the kernel. False when
 * the text is not shaped so. */
typedef struct PtxParts {
  const char *head, *globl, *decls, *kernel, *end;
} PtxParts;

static bool split_ptx(const CgStrBuf *ptx, PtxParts *p) {
  const char *s = ptx->data;
  if (!s)
    return false;
  p->end = s + ptx->len;
  p->head = s;
  p->globl = strstr(s, "\t// .globl\t");
  if (!p->globl)
    return false;
  p->decls = strchr(p->globl, '\n');
  if (!p->decls)
    return false;
  p->decls++;
  p->kernel = strstr(p->decls, ".visible .entry ");
  if (!p->kernel)
    p->kernel = strstr(p->decls, ".entry ");
  /* a stack frame's depot is named by function too; none is expected
   * (codegen allocates no stack), so such a part is not joined */
  return p->kernel != NULL && !strstr(p->kernel, "__local_depot");
}

/* Is line [l, l + len) one of buf's lines? */
static bool has_line(const CgStrBuf *buf, const char *l, size_t len) {
  if (!buf->data)
    return false;
  const char *q = buf->data, *end = buf->data + buf->len;
  while (q < end) {
    const char *nl = memchr(q, '\n', (size_t)(end - q));
    const char *eol = nl ? nl + 1 : end;
    if ((size_t)(eol - q) == len && memcmp(q, l, len) == 0)
      return true;
    q = eol;
  }
  return false;
}

/* Appends the non-blank lines of [from, to) that `seen` lacks to it. */
static void add_decls(CgStrBuf *seen, const char *from, const char *to) {
  while (from < to) {
    const char *nl = memchr(from, '\n', (size_t)(to - from));
    const char *eol = nl ? nl + 1 : to;
    size_t len = (size_t)(eol - from);
    if (!(len == 1 && from[0] == '\n') && !has_line(seen, from, len))
      cg_strbuf_append(seen, from, len);
    from = eol;
  }
}

/* The module's PTX from its kernels' (in module order); -1 when a part is
 * not shaped as expected (the caller then compiles the module whole). */
static int join_ptx(KernelJob *jobs, int n, CgStrBuf *ptx) {
  PtxParts parts[MAX_JOBS];
  CgStrBuf decls;
  cg_strbuf_init(&decls);
  for (int i = 0; i < n; i++) {
    if (!split_ptx(&jobs[i].ptx, &parts[i])) {
      cg_strbuf_free(&decls);
      return -1;
    }
    add_decls(&decls, parts[i].decls, parts[i].kernel);
  }
  for (int i = 0; i < n; i++) {
    const PtxParts *p = &parts[i];
    if (i == 0)
      cg_strbuf_append(ptx, p->head, (size_t)(p->globl - p->head));
    cg_strbuf_append(ptx, p->globl, (size_t)(p->decls - p->globl));
    if (i == 0 && decls.len) {
      cg_strbuf_append(ptx, decls.data, decls.len);
      cg_strbuf_puts(ptx, "\n");
    }
    append_renumbered(ptx, p->kernel, (size_t)(p->end - p->kernel), i);
  }
  cg_strbuf_free(&decls);
  return 0;
}

/* The PTX of lm's kernels, each on a thread; 1 when the module is not one
 * to split (one kernel, a call between functions, jobs limited to 1, or a
 * part shaped unexpectedly): the caller compiles it whole. */
static int kernels_in_parallel(CgContext *c, MlirLocation loc, LLVMModuleRef lm, const char *chip,
                               const char *features, int opt_level, bool short_ptr,
                               CgStrBuf *ptx, CgTimes *times) {
  LLVMValueRef fns[MAX_JOBS];
  int n = defined_functions(lm, fns, MAX_JOBS), jobs_at_once = max_jobs();
  if (n < 2 || jobs_at_once < 2)
    return 1;
  LLVMMemoryBufferRef bc = LLVMWriteBitcodeToMemoryBuffer(lm);
  KernelJob *jobs = calloc((size_t)n, sizeof *jobs);
  if (!bc || !jobs) {
    if (bc)
      LLVMDisposeMemoryBuffer(bc);
    free(jobs);
    return 1;
  }
  for (int i = 0; i < n; i++) {
    jobs[i] = (KernelJob){.bitcode = LLVMGetBufferStart(bc), .bitcode_len = LLVMGetBufferSize(bc),
                          .index = i, .chip = chip, .features = features,
                          .opt_level = opt_level, .short_ptr = short_ptr};
    cg_strbuf_init(&jobs[i].ptx);
  }
  /* waves of jobs_at_once threads; a job whose thread could not start runs here */
  for (int first = 0; first < n; first += jobs_at_once) {
    int last = first + jobs_at_once < n ? first + jobs_at_once : n;
    pthread_t th[MAX_JOBS];
    bool started[MAX_JOBS];
    for (int i = first; i < last; i++)
      started[i - first] = pthread_create(&th[i - first], NULL, kernel_job, &jobs[i]) == 0;
    for (int i = first; i < last; i++) {
      if (started[i - first])
        pthread_join(th[i - first], NULL);
      else
        kernel_job(&jobs[i]);
    }
  }
  int rc = 0;
  double ms_opt = 0, ms_codegen = 0;
  for (int i = 0; i < n && rc == 0; i++)
    if (jobs[i].err) {
      cg_context_error(c, loc, "%s", jobs[i].err);
      rc = -1;
    }
  for (int i = 0; i < n; i++) {
    ms_opt = jobs[i].ms_opt > ms_opt ? jobs[i].ms_opt : ms_opt;
    ms_codegen = jobs[i].ms_codegen > ms_codegen ? jobs[i].ms_codegen : ms_codegen;
  }
  if (rc == 0 && join_ptx(jobs, n, ptx))
    rc = 1;
  if (times && rc == 0) { /* wall time: the slowest job's */
    times->llvm_opt += ms_opt;
    times->llvm_codegen += ms_codegen;
  }
  for (int i = 0; i < n; i++) {
    cg_strbuf_free(&jobs[i].ptx);
    free(jobs[i].err);
  }
  free(jobs);
  LLVMDisposeMemoryBuffer(bc);
  return rc;
}

int cg_translate(CgContext *c, MlirModule device, const char *chip, const char *features,
                 int opt_level, bool short_shared_ptr, CgStrBuf *llvm_ir, CgStrBuf *ptx,
                 CgTimes *times) {
  pthread_once(&llvm_once, init_nvptx);
  MlirOperation op = mlirModuleGetOperation(device);
  MlirLocation loc = mlirOperationGetLocation(op);
  double t0 = cg_now_ms();
  LLVMContextRef lctx = LLVMContextCreate();
  LLVMModuleRef lm = mlirTranslateModuleToLLVMIR(op, lctx);
  if (times)
    times->translate += cg_now_ms() - t0;
  int rc = -1;
  if (!lm) {
    if (cg_context_error_count(c) == 0)
      cg_context_error(c, loc, "translation to LLVM IR failed");
  } else {
    rc = llvm_ir || opt_level <= 0
             ? 1
             : kernels_in_parallel(c, loc, lm, chip, features, opt_level, short_shared_ptr, ptx,
                                   times);
    if (rc == 1)
      rc = llvm_stages(c, loc, lm, chip, features, opt_level, short_shared_ptr, llvm_ir, ptx,
                       times);
    LLVMDisposeModule(lm);
  }
  LLVMContextDispose(lctx);
  return rc;
}
