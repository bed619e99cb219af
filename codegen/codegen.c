/* codegen.c - cg_emit: the module's kernels through every codegen stage. */
#include "codegen/codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_builder.h"
#include "codegen/cg_context.h"
#include "codegen/cg_lower.h"
#include "codegen/meta_backward.h"
#include "codegen/meta_decode.h"
#include "codegen/mlir_to_ptx.h"
#include "codegen/ptxas.h"

void cg_options_init(CgOptions *o) {
  memset(o, 0, sizeof *o);
  o->target = "sm_90a";
  o->opt_level = 3;
}

/* Hopper features need PTX 8.0, the vector reductions (red.global.add.v4.f32,
 * the backward's dQ) 8.1; Ampere code stays at 8.0. */
static const char *ptx_features(const char *target) {
  return strcmp(target, "sm_90a") == 0 ? "+ptx81" : "+ptx80";
}

/* ------------------------------------------------------------ emitting */

typedef struct Emit {
  const Module *m;
  const CgOptions *o;
  CgContext *cc;
  CgBuilder b;
  MlirOperation module;
  CgKernelInfo *info;
  CgTimes times;
  CgStrBuf out;
  CgPtxasInfo ptxas_info; /* from -emit=cubin's ptxas run */
  bool have_ptxas_info;
} Emit;

static void put_text(MlirStringRef s, void *user) { cg_strbuf_append(user, s.data, s.length); }

/* ----------------------------------------------------------- metadata */

/* A run-time input's dim as the metadata spells it. */
static void meta_dim(CgStrBuf *sb, int d) {
  if (d > 0)
    cg_strbuf_printf(sb, "%d", d);
  else
    cg_strbuf_puts(sb, d == DIM_BATCH                          ? "batch"
                       : d == DIM_SEQLEN_Q || d == DIM_Q_LEN ? "seqlen_q" /* decode: q_len */
                                                              : "seqlen_k");
}

/* `input NAME TYPE [DIMS]` per run-time input (the %in_NAME arguments, in
 * order) and the launch conditions their indexing needs (docs/abi.md). */
static void meta_inputs(CgStrBuf *sb, const Func *f) {
  for (int i = 0; i < f->nargs; i++) {
    const Value *a = f->args[i];
    if (!value_is_input_arg(a))
      continue;
    Type t = a->type;
    const char *type = t.elem == ELEM_INDEX || t.elem == ELEM_I32 ? "i32" : elem_name(t.elem);
    cg_strbuf_printf(sb, "// flashc.meta input %s %s", a->name + 3, type);
    for (int d = 0; t.kind == TYPE_TENSOR && d < t.rank; d++) {
      cg_strbuf_puts(sb, d ? "," : " ");
      meta_dim(sb, t.dims[d]);
    }
    cg_strbuf_puts(sb, "\n");
  }
  if (attr_int(&f->attrs, "require_q_le_k", 0))
    cg_strbuf_puts(sb, "// flashc.meta require seqlen_q<=seqlen_k\n");
  if (attr_int(&f->attrs, "require_k_le_q", 0))
    cg_strbuf_puts(sb, "// flashc.meta require seqlen_k<=seqlen_q\n");
}

/* The companion kernels (func_companion_of) that the runtime loads as
 * kernels of their own, each with a metadata block; the others, a decode
 * kernel's combine kernel and small-batch variant, are described by their
 * kernel's lines (meta_decode.c). */
static const char *const kOwnBlockCompanions[] = {"grad_of", "dropout_of", "blocks_of", "gather_of",
                                                  "long_rows_of"};

static bool own_block_companion(const AttrList *a) {
  for (size_t i = 0; i < sizeof kOwnBlockCompanions / sizeof kOwnBlockCompanions[0]; i++)
    if (attr_get(a, kOwnBlockCompanions[i]))
      return true;
  return false;
}

/* The forward kernel whose backward f belongs to: its grad_of, or f (or the
 * kernel f is a copy of) when the module has backward kernels of it; NULL
 * for a kernel without a backward. */
static const char *backward_forward(const Module *m, const Func *f) {
  const char *of = attr_str(&f->attrs, "grad_of", NULL);
  if (of)
    return of;
  const char *name = attr_str(&f->attrs, "gather_of", attr_str(&f->attrs, "long_rows_of", f->name));
  for (int i = 0; i < m->nfuncs; i++)
    if (strcmp(attr_str(&m->funcs[i]->attrs, "grad_of", ""), name) == 0)
      return name;
  return NULL;
}

/* The metadata of kernel i of the module (nothing for a companion that its
 * kernel's lines describe: own_block_companion). */
static void meta_kernel(CgStrBuf *sb, const Emit *E, int i) {
  const Func *f = E->m->funcs[i];
  const CgKernelInfo *ki = &E->info[i];
  const CgOptions *o = E->o;
  const AttrList *a = &f->attrs;
  int hd = (int)attr_int(a, "head_dim", 0);
  const char *grad_of = attr_str(a, "grad_of", NULL);
  const char *dropout_of = attr_str(a, "dropout_of", NULL);
  const char *blocks_of = attr_str(a, "blocks_of", NULL);
  const char *gather_of = attr_str(a, "gather_of", NULL);
  const char *long_rows_of = attr_str(a, "long_rows_of", NULL);
  if (func_companion_of(f) && !own_block_companion(a))
    return;
  cg_strbuf_puts(sb, "// flashc.meta version 1\n");
  cg_strbuf_printf(sb, "// flashc.meta kernel %s\n", f->name);
  cg_strbuf_printf(sb, "// flashc.meta mode %s\n", attr_str(a, "mode", "forward"));
  if (grad_of) { /* a backward kernel: its own block (docs/backward.md) */
    cg_strbuf_printf(sb, "// flashc.meta role %s\n", attr_str(a, "role", ""));
    cg_strbuf_printf(sb, "// flashc.meta forward %s\n", grad_of);
  }
  if (blocks_of) { /* a block-list classifier (docs/abi.md "Block lists") */
    cg_strbuf_printf(sb, "// flashc.meta forward %s\n// flashc.meta blocks %s %d\n", blocks_of,
                     attr_str(a, "blocks", "rows"), (int)attr_int(a, "list_heads", 1));
    if (attr_get(a, "chunk")) /* phase 1: the classes kernel, steps per block */
      cg_strbuf_printf(sb, "// flashc.meta chunk %d\n", (int)attr_int(a, "chunk", 0));
    if (attr_get(a, "classes")) /* phase 2: launched after its classes kernel */
      cg_strbuf_printf(sb, "// flashc.meta classes %s\n", attr_str(a, "classes", ""));
  }
  if (attr_get(a, "block_list")) /* visits the lists that classifier writes */
    cg_strbuf_printf(sb, "// flashc.meta block_list %s\n", attr_str(a, "block_list", ""));
  if (gather_of) /* stage-inputs' fallback for inputs no tensor map can copy (docs/abi.md) */
    cg_strbuf_printf(sb, "// flashc.meta gather_of %s\n", gather_of);
  if (long_rows_of) /* long-rows-variant's kernel for long launches (docs/abi.md) */
    cg_strbuf_printf(sb, "// flashc.meta long_rows_of %s\n// flashc.meta long_rows_min %d\n",
                     long_rows_of, (int)attr_int(a, "long_rows_min", 0));
  if (dropout_of) /* the forward with dropout: its own block (docs/dropout.md) */
    cg_strbuf_printf(sb, "// flashc.meta dropout_of %s\n", dropout_of);
  if (attr_get(a, "dropout")) /* takes dropout's launch arguments; the spec's p */
    cg_strbuf_printf(sb, "// flashc.meta dropout %.9g\n", attr_float(a, "dropout", 0));
  if (attr_get(a, "dropout_mask")) /* PyTorch's keep decision (docs/dropout.md) */
    cg_strbuf_printf(sb, "// flashc.meta dropout_mask %s\n", attr_str(a, "dropout_mask", ""));
  if (strcmp(attr_str(a, "layout", "padded"), "varlen") == 0) /* packed sequences: cu_seqlens parameters (docs/abi.md) */
    cg_strbuf_puts(sb, "// flashc.meta layout varlen\n");
  cg_strbuf_printf(sb, "// flashc.meta dtype %s\n", attr_str(a, "dtype", "bf16"));
  cg_strbuf_printf(sb, "// flashc.meta head_dim %d\n", hd);
  cg_strbuf_printf(sb, "// flashc.meta v_head_dim %d\n", (int)attr_int(a, "v_head_dim", hd));
  cg_strbuf_printf(sb, "// flashc.meta heads %d\n", (int)attr_int(a, "heads", 0));
  cg_strbuf_printf(sb, "// flashc.meta kv_heads %d\n", (int)attr_int(a, "kv_heads", 0));
  cg_strbuf_printf(sb, "// flashc.meta mask %s\n", attr_str(a, "mask", "none"));
  if (attr_get(a, "scale")) /* absent: a scale known at launch (an input's) */
    cg_strbuf_printf(sb, "// flashc.meta scale %.9g\n", attr_float(a, "scale", 1.0));
  cg_strbuf_printf(sb, "// flashc.meta tile_q %d\n", (int)attr_int(a, "tile_q", 0));
  cg_strbuf_printf(sb, "// flashc.meta tile_kv %d\n", (int)attr_int(a, "tile_kv", 0));
  cg_strbuf_printf(sb, "// flashc.meta warps %d\n", (int)attr_int(a, "warps", 4));
  cg_strbuf_printf(sb, "// flashc.meta stages %d\n", (int)attr_int(a, "stages", 1));
  cg_strbuf_printf(sb, "// flashc.meta threads %d\n", ki->threads);
  cg_strbuf_printf(sb, "// flashc.meta smem_bytes %d\n", ki->smem_bytes);
  for (int t = 0; t < ki->ntmaps; t++) /* its last parameters: tensor maps (docs/abi.md) */
    cg_strbuf_printf(sb, "// flashc.meta tma %s %d\n", ki->tmap_tensor[t], ki->tmap_rows[t]);
  const char *role = attr_str(a, "role", "");
  bool kv_outer = grad_of && (strcmp(role, "main") == 0 || strcmp(role, "kv") == 0 ||
                              strcmp(role, "dv") == 0);
  cg_strbuf_printf(sb, "// flashc.meta grid %s\n",
                   cg_meta_is_decode(f)     ? "splits,kv_heads,batch"
                   : blocks_of && attr_get(a, "chunk") ? "row_tiles*chunks,list_heads,batch"
                   : blocks_of              ? "row_tiles,list_heads,batch"
                   : kv_outer               ? "k_tiles,kv_heads,batch"
                   : func_arg((Func *)f, "nctas") ? "persistent"
                   : ki->parallel_loops >= 3 ? "q_tiles,heads,batch"
                                             : "1,heads,batch");
  cg_strbuf_printf(sb, "// flashc.meta workspace_floats_per_row %d\n",
                   ki->workspace_floats_per_row);
  cg_strbuf_printf(sb, "// flashc.meta target %s\n", o->target);
  cg_strbuf_printf(sb, "// flashc.meta mma %s\n",
                   !ki->matmuls ? "none" : ki->wgmma ? "wgmma" : "mma.sync");
  cg_strbuf_printf(sb, "// flashc.meta passes %s\n", o->passes && o->passes[0] ? o->passes : "none");
  const char *auto_of = backward_forward(E->m, f);
  if (auto_of) /* the launch FA_BACKWARD_AUTO runs (docs/backward.md) */
    cg_strbuf_printf(sb, "// flashc.meta backward_auto %s\n",
                     cg_backward_auto_atomic(E->m, E->info, auto_of) ? "atomic" : "deterministic");
  meta_inputs(sb, f);
  if (!cg_meta_is_decode(f))
    return;
  int w = module_copy_index(E->m, "variant_of", f->name);
  cg_meta_decode(sb, f, w >= 0 ? E->m->funcs[w] : NULL, w >= 0 ? &E->info[w] : NULL);
}

/* The most dynamic shared memory one block may opt into. */
static int smem_limit(const char *target) {
  return strcmp(target, "sm_80") == 0 ? CG_SMEM_LIMIT_SM80 : CG_SMEM_LIMIT_SM90;
}

/* Builds builtin.module { gpu.module @flashc { smem; gpu.func per kernel } }. */
static int build_module(Emit *E) {
  double t0 = cg_now_ms();
  cg_builder_init(&E->b, E->cc);
  E->module = cg_module_create(&E->b);
  cg_builder_set_block(&E->b, cg_module_body(E->module));
  MlirBlock gm = cg_gpu_module(&E->b, "flashc", E->o->target, ptx_features(E->o->target));
  cg_builder_set_block(&E->b, gm);
  cg_dynamic_smem_global(&E->b, CG_SMEM_SYMBOL);
  int rc = 0;
  for (int i = 0; i < E->m->nfuncs && rc == 0; i++) {
    const Func *f = E->m->funcs[i];
    rc = cg_lower_kernel(E->cc, gm, f, E->o->tensor_core, E->o->exp_fma, E->o->lane_stats,
                         E->o->target, &E->info[i]);
    int limit = smem_limit(E->o->target);
    if (rc == 0 && E->info[i].smem_bytes > limit) {
      cg_builder_set_loc(&E->b, f->loc.file, f->loc.line, f->loc.col);
      cg_context_error(E->cc, E->b.loc,
                       "kernel %s needs %d bytes of shared memory; %s allows %d (choose smaller "
                       "tiles in its schedule)", f->name, E->info[i].smem_bytes, E->o->target, limit);
      rc = -1;
    }
  }
  if (rc == 0 && !mlirOperationVerify(E->module)) {
    if (cg_context_error_count(E->cc) == 0)
      cg_context_error(E->cc, mlirOperationGetLocation(E->module),
                       "internal error: the generated MLIR does not verify");
    rc = -1;
  }
  E->times.build += cg_now_ms() - t0;
  return rc;
}

/* ptxas' numbers of kernel `name`, or NULL. */
static const CgPtxasKernel *ptxas_kernel(const CgPtxasInfo *pi, const char *name) {
  for (int i = 0; i < pi->nkernels; i++)
    if (strcmp(pi->kernels[i].name, name) == 0)
      return &pi->kernels[i];
  return NULL;
}

static void fill_stats(Emit *E, CgStats *s, const char *ptx, size_t len) {
  memset(s, 0, sizeof *s);
  s->ms_build = E->times.build;
  s->ms_mlir_passes = E->times.mlir_passes;
  s->ms_translate = E->times.translate;
  s->ms_llvm_opt = E->times.llvm_opt;
  s->ms_llvm_codegen = E->times.llvm_codegen;
  s->smem_dynamic_bytes = E->m->nfuncs ? E->info[0].smem_bytes : 0;
  s->registers = s->smem_static_bytes = s->spill_stores = s->spill_loads = s->stack_bytes = -1;
  CgPtxasInfo pi = {0};
  bool have = E->have_ptxas_info;
  if (have) {
    pi = E->ptxas_info;
    s->ms_ptxas = E->times.ptxas;
  } else if (ptx) {
    double t0 = cg_now_ms();
    have = cg_run_ptxas(E->o->ptxas, E->o->target, ptx, len, NULL, &pi, NULL) == 0;
    s->ms_ptxas = cg_now_ms() - t0;
  }
  if (!have)
    return;
  s->registers = pi.registers;
  s->smem_static_bytes = pi.smem_bytes;
  s->spill_stores = pi.spill_stores;
  s->spill_loads = pi.spill_loads;
  s->stack_bytes = pi.stack_bytes;
  int cap = (int)(sizeof s->kernels / sizeof s->kernels[0]);
  for (int i = 0; i < E->m->nfuncs && s->nkernels < cap; i++) {
    const CgPtxasKernel *k = ptxas_kernel(&pi, E->m->funcs[i]->name);
    if (!k)
      continue;
    if (i == 0) { /* the module's kernel: the summary line's numbers */
      s->registers = k->registers;
      s->spill_stores = k->spill_stores;
      s->spill_loads = k->spill_loads;
      s->stack_bytes = k->stack_bytes;
    }
    int n = s->nkernels++;
    snprintf(s->kernels[n].name, sizeof s->kernels[n].name, "%s", k->name);
    s->kernels[n].registers = k->registers;
    s->kernels[n].spill_stores = k->spill_stores;
    s->kernels[n].spill_loads = k->spill_loads;
    s->kernels[n].stack_bytes = k->stack_bytes;
    s->kernels[n].smem_dynamic_bytes = E->info[i].smem_bytes;
  }
}

/* MLIR -> LLVM IR / PTX (with the metadata first). */
static int to_llvm_or_ptx(Emit *E, CgStage stage) {
  MlirModule dev;
  if (cg_lower_gpu_module(E->cc, E->module, &dev, &E->times))
    return -1;
  CgStrBuf body;
  cg_strbuf_init(&body);
  /* 32-bit shared pointers where the matmuls read shared memory by ldmatrix:
   * its per-lane addresses (one per swizzled k step) are loop invariants that
   * LLVM keeps in registers, and as 64-bit pairs they spilled the paged
   * decode kernels (paged MHA 1-3% slower). wgmma kernels address shared
   * memory by descriptors and keep the 64-bit pointers they were tuned with
   * (32-bit ones measured within noise there; docs/perf-log.md P20). */
  bool short_ptr = true;
  for (int i = 0; i < E->m->nfuncs; i++)
    short_ptr = short_ptr && !E->info[i].wgmma;
  int rc = cg_translate(E->cc, dev, E->o->target, ptx_features(E->o->target), E->o->opt_level,
                        short_ptr, stage == CG_STAGE_LLVM ? &body : NULL,
                        stage == CG_STAGE_LLVM ? NULL : &body, &E->times);
  mlirModuleDestroy(dev);
  /* A libdevice call would only fail later, in ptxas or at load time. */
  if (rc == 0 && stage != CG_STAGE_LLVM && body.data && strstr(body.data, ".extern .func")) {
    cg_context_error(E->cc, mlirOperationGetLocation(E->module),
                     "internal error: the PTX calls an external (libdevice) function");
    rc = -1;
  }
  if (rc == 0) {
    if (stage != CG_STAGE_LLVM)
      for (int i = 0; i < E->m->nfuncs; i++)
        meta_kernel(&E->out, E, i);
    cg_strbuf_append(&E->out, body.data ? body.data : "", body.len);
  }
  cg_strbuf_free(&body);
  return rc;
}

static int to_cubin(Emit *E) {
  CgStrBuf cubin, log;
  cg_strbuf_init(&cubin);
  cg_strbuf_init(&log);
  CgPtxasInfo pi = {0};
  double t0 = cg_now_ms();
  int rc = cg_run_ptxas(E->o->ptxas, E->o->target, E->out.data, E->out.len, &cubin, &pi, &log);
  E->times.ptxas += cg_now_ms() - t0;
  if (rc != 0) {
    MlirLocation loc = mlirLocationUnknownGet(cg_context_mlir(E->cc));
    if (rc < 0)
      cg_context_error(E->cc, loc, "ptxas could not be run (is it on PATH?)");
    else
      cg_context_error(E->cc, loc, "ptxas rejected the PTX:\n%s", log.data ? log.data : "");
  } else {
    E->ptxas_info = pi;
    E->have_ptxas_info = true;
    cg_strbuf_free(&E->out);
    E->out = cubin;
    cg_strbuf_init(&cubin);
  }
  cg_strbuf_free(&cubin);
  cg_strbuf_free(&log);
  return rc ? -1 : 0;
}

static int run_stages(Emit *E, CgStage stage) {
  if (build_module(E))
    return -1;
  switch (stage) {
  case CG_STAGE_META:
    for (int i = 0; i < E->m->nfuncs; i++)
      meta_kernel(&E->out, E, i);
    return 0;
  case CG_STAGE_MLIR:
    mlirOperationPrint(E->module, put_text, &E->out);
    cg_strbuf_puts(&E->out, "\n");
    return 0;
  case CG_STAGE_LLVM:
  case CG_STAGE_PTX:
    return to_llvm_or_ptx(E, stage);
  case CG_STAGE_CUBIN:
    return to_llvm_or_ptx(E, CG_STAGE_PTX) || to_cubin(E);
  }
  return -1;
}

int cg_emit(const Module *m, CgStage stage, const CgOptions *opts, char **out, size_t *outlen,
            char *err, size_t errlen) {
  CgOptions dflt;
  if (!opts) {
    cg_options_init(&dflt);
    opts = &dflt;
  }
  CgOptions o = *opts;
  if (!o.target)
    o.target = "sm_90a";
  *out = NULL;
  if (outlen)
    *outlen = 0;
  if (err && errlen)
    err[0] = 0;
  Emit E;
  memset(&E, 0, sizeof E);
  E.m = m;
  E.o = &o;
  E.cc = cg_context_create();
  E.info = calloc((size_t)(m->nfuncs ? m->nfuncs : 1), sizeof *E.info);
  cg_strbuf_init(&E.out);
  int rc = (E.cc && E.info) ? run_stages(&E, stage) : -1;
  if (rc == 0 && o.stats)
    fill_stats(&E, o.stats, stage == CG_STAGE_PTX ? E.out.data : NULL, E.out.len);
  if (rc == 0) {
    *out = cg_strbuf_take(&E.out, outlen);
  } else if (err && errlen) {
    snprintf(err, errlen, "%s", E.cc ? cg_context_diagnostics(E.cc) : "flashc: out of memory\n");
  }
  cg_strbuf_free(&E.out);
  if (!mlirOperationIsNull(E.module))
    mlirOperationDestroy(E.module);
  free(E.info);
  cg_context_destroy(E.cc);
  return rc;
}
