/* mlir_to_ptx.c - MLIR pass pipeline, translation to LLVM IR, NVPTX backend. */
#include "codegen/mlir_to_ptx.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static int report_llvm_error(CgContext *c, MlirLocation loc, const char *what, char *msg) {
  cg_context_error(c, loc, "%s: %s", what, msg ? msg : "unknown error");
  LLVMDisposeMessage(msg);
  return -1;
}

static int optimize(CgContext *c, MlirLocation loc, LLVMModuleRef lm, LLVMTargetMachineRef tm,
                    int opt_level) {
  char passes[32];
  snprintf(passes, sizeof passes, "default<O%d>", opt_level < 0 ? 0 : opt_level > 3 ? 3 : opt_level);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  LLVMErrorRef e = LLVMRunPasses(lm, passes, tm, po);
  LLVMDisposePassBuilderOptions(po);
  if (e)
    return report_llvm_error(c, loc, "LLVM optimization failed", LLVMGetErrorMessage(e));
  return 0;
}

static int emit_ptx(CgContext *c, MlirLocation loc, LLVMModuleRef lm, LLVMTargetMachineRef tm,
                    CgStrBuf *ptx) {
  char *err = NULL;
  LLVMMemoryBufferRef buf = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, lm, LLVMAssemblyFile, &err, &buf))
    return report_llvm_error(c, loc, "NVPTX code generation failed", err);
  cg_strbuf_append(ptx, LLVMGetBufferStart(buf), LLVMGetBufferSize(buf));
  LLVMDisposeMemoryBuffer(buf);
  return 0;
}

/* LLVM passes, printing, backend: everything after the module exists. */
static int llvm_stages(CgContext *c, MlirLocation loc, LLVMModuleRef lm, const char *chip,
                       const char *features, int opt_level, bool short_shared_ptr,
                       CgStrBuf *llvm_ir, CgStrBuf *ptx, CgTimes *times) {
  char *err = NULL;
  LLVMTargetMachineRef tm = create_target_machine(chip, features, opt_level, short_shared_ptr, &err);
  if (!tm)
    return report_llvm_error(c, loc, "no NVPTX target", err);
  LLVMSetTarget(lm, "nvptx64-nvidia-cuda");
  LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(lm, dl);
  LLVMDisposeTargetData(dl);
  int rc = 0;
  double t0 = cg_now_ms();
  if (opt_level > 0)
    rc = optimize(c, loc, lm, tm, opt_level);
  double t1 = cg_now_ms();
  if (rc == 0 && llvm_ir) {
    char *text = LLVMPrintModuleToString(lm);
    cg_strbuf_puts(llvm_ir, text);
    LLVMDisposeMessage(text);
  }
  if (rc == 0 && ptx)
    rc = emit_ptx(c, loc, lm, tm, ptx);
  if (times) {
    times->llvm_opt += t1 - t0;
    times->llvm_codegen += cg_now_ms() - t1;
  }
  LLVMDisposeTargetMachine(tm);
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
    rc = llvm_stages(c, loc, lm, chip, features, opt_level, short_shared_ptr, llvm_ir, ptx, times);
    LLVMDisposeModule(lm);
  }
  LLVMContextDispose(lctx);
  return rc;
}
