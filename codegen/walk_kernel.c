/* walk_kernel.c - layer 3: a kernel's entry and exit around the walk
 * (walk.c): the gpu.func with the kind's ABI parameters bound by name, the
 * thread ids, the shared-memory plan (cross-warp scratch first), the
 * tensor-core engine, the IR's arguments, and what the metadata learns
 * (CgKernelInfo).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/walk.h"
#include "mlir-c/BuiltinAttributes.h"

/* Number of nested parallel loops (they map onto the grid). */
static void count_parallel(Op *op, void *ctx) {
  if (op->kind == OP_FOR && for_is_parallel(op))
    (*(int *)ctx)++;
}

/* The warp_roles op's producer warps (0: none) and blocks an SM (0: the
 * default for its consumers, lw_role_regs). */
static void producer_warps_fn(Op *op, void *ctx) {
  if (op->kind == OP_WARP_ROLES) {
    ((int *)ctx)[0] = (int)attr_int(&op->attrs, "producer_warps", 4);
    ((int *)ctx)[1] = (int)attr_int(&op->attrs, "blocks_per_sm", 0);
  }
}

/* Parameter p of the kind's ABI is v: a Lowerer field, or a named
 * parameter of the kind's own. */
static void bind_param(Lowerer *L, const LwParam *p, MlirValue v) {
  static const char *const io[6] = {"q", "k", "v", "o", "lse", "workspace"};
  MlirValue *const io_at[6] = {&L->p_q, &L->p_k, &L->p_v, &L->p_o, &L->p_lse, &L->p_ws};
  static const char *const sizes[3] = {"batch", "seqlen_q", "seqlen_k"};
  MlirValue *const size_at[3] = {&L->batch, &L->seqlen_q, &L->seqlen_k};
  static const char *const strides[4][3] = {
      {"q.sb", "q.ss", "q.sh"}, {"k.sb", "k.ss", "k.sh"},
      {"v.sb", "v.ss", "v.sh"}, {"o.sb", "o.ss", "o.sh"}};
  for (int i = 0; i < 6; i++)
    if (p->type == LW_PTR && strcmp(p->name, io[i]) == 0) {
      *io_at[i] = v;
      return;
    }
  for (int i = 0; i < 3; i++)
    if (p->type == LW_I32 && strcmp(p->name, sizes[i]) == 0) {
      *size_at[i] = v;
      return;
    }
  for (int t = 0; t < 4; t++)
    for (int i = 0; i < 3; i++)
      if (p->type == LW_I64 && strcmp(p->name, strides[t][i]) == 0) {
        L->strides[t][i] = v;
        return;
      }
  lw_bind_param(L, p->name, v, p->type == LW_PTR || p->type == LW_TMAP);
}

/* Dropout's launch arguments (docs/abi.md), after the kind's parameters. */
static const LwParam dropout_params[] = {
    {LW_U32, "seed_lo"},   {LW_U32, "seed_hi"},        {LW_U32, "offset_lo"},
    {LW_U32, "offset_hi"}, {LW_U32, "keep_threshold"}, {LW_F32, "keep_scale"},
};

/* A varlen kernel's (docs/abi.md "Variable-length batches"), right after
 * its kind's: the prefix sums of the sequences' lengths and the packed
 * tensors' row counts. */
static const LwParam varlen_params[] = {
    {LW_PTR, "cu_seqlens_q"}, {LW_PTR, "cu_seqlens_k"}, {LW_I32, "total_q"}, {LW_I32, "total_k"}};
enum { NVARLEN = sizeof varlen_params / sizeof varlen_params[0] };

/* The run-time inputs' parameters (docs/abi.md), after dropout's: per
 * argument %in_NAME in order, a tensor's pointer and one i64 stride per dim
 * (elements), or an f32 / i32 scalar; then the block lists' (%blk_list,
 * %blk_count, passes/block_lists.c: after the inputs), alike. Returns the
 * new count, -1 when over LW_MAX_PARAMS. */
static int input_params(Lowerer *L, LwParam *out, int n) {
  for (int i = 0; i < L->f->nargs; i++) {
    const Value *a = L->f->args[i];
    if (!value_is_input_arg(a) && !value_is_block_list_arg(a))
      continue;
    Type t = a->type;
    if (n + 1 + (t.kind == TYPE_TENSOR ? t.rank : 0) > LW_MAX_PARAMS)
      return -1;
    if (t.kind != TYPE_TENSOR) {
      out[n++] = (LwParam){t.elem == ELEM_F32 ? LW_F32 : LW_I32, a->name};
      continue;
    }
    out[n++] = (LwParam){LW_PTR, a->name};
    for (int d = 0; d < t.rank; d++) {
      if (L->ninput_strides == (int)(sizeof L->input_stride_names / sizeof L->input_stride_names[0]))
        return -1;
      char *s = L->input_stride_names[L->ninput_strides++];
      snprintf(s, sizeof L->input_stride_names[0], "%s.s%d", a->name, d);
      out[n++] = (LwParam){LW_I64, s};
    }
  }
  return n;
}

/* The tensor maps of the kernel's TMA rings (ring {tma = 1}), one per
 * tensor, into info. */
static void tma_ring_fn(Op *op, void *ctx) {
  CgKernelInfo *info = ctx;
  if (op->kind != OP_RING || attr_int(&op->attrs, "tma", 0) != 1)
    return;
  const Op *ld = lw_ring_put_load(op);
  const char *t = ld ? ld->operands[0]->name : NULL;
  char name[96];
  if (!lw_tmap_param(t, name, sizeof name))
    return; /* lw_ring refuses it */
  for (int i = 0; i < info->ntmaps; i++)
    if (strcmp(info->tmap_tensor[i], t) == 0)
      return;
  if (info->ntmaps < CG_MAX_TMAPS) {
    int i = info->ntmaps++;
    info->tmap_tensor[i] = t;
    info->tmap_rows[i] = op->results[0]->type.rows;
    snprintf(info->tmap_param[i], sizeof info->tmap_param[i], "%s", name);
  }
}

/* The box rows of the stores that can add into dq_acc through the TMA unit
 * (mem_bulk.c, lw_tma_reduce_rows): one map has one box, so stores of
 * different rows (none today) all add by rows instead (-1). */
static void tma_reduce_fn(Op *op, void *ctx) {
  Lowerer *L = ctx;
  int rows = lw_tma_reduce_rows(L, op);
  if (rows && L->tma_reduce_rows >= 0)
    L->tma_reduce_rows = !L->tma_reduce_rows || L->tma_reduce_rows == rows ? rows : -1;
}

/* The map of dq_acc those stores take, into the kernel's info. */
static void add_tma_reduce_map(Lowerer *L, CgKernelInfo *info) {
  if (L->tma_reduce_rows <= 0 || info->ntmaps == CG_MAX_TMAPS) {
    L->tma_reduce_rows = 0;
    return;
  }
  int i = info->ntmaps++;
  info->tmap_tensor[i] = "dq_acc";
  info->tmap_rows[i] = L->tma_reduce_rows;
  snprintf(info->tmap_param[i], sizeof info->tmap_param[i], "tmap_dq_acc");
}

/* The kernel's parameters in ABI order: its kind's, varlen's where the
 * kernel is varlen, dropout's where it has dropout, the run-time inputs',
 * the tensor maps of info's TMA rings.
 * Returns the count, -1 when over LW_MAX_PARAMS. */
static int kernel_params(Lowerer *L, const LwKind *K, const CgKernelInfo *info, LwParam *out) {
  int n = 0, nd = attr_get(&L->f->attrs, "dropout") ? 6 : 0;
  int nv = lw_is_varlen(L->f) ? NVARLEN : 0;
  if (K->nparams + nv + nd > LW_MAX_PARAMS)
    return -1;
  for (int i = 0; i < K->nparams; i++)
    out[n++] = K->params[i];
  for (int i = 0; i < nv; i++)
    out[n++] = varlen_params[i];
  for (int i = 0; i < nd; i++)
    out[n++] = dropout_params[i];
  n = input_params(L, out, n);
  if (n < 0 || n + info->ntmaps > LW_MAX_PARAMS)
    return -1;
  for (int i = 0; i < info->ntmaps; i++)
    out[n++] = (LwParam){LW_TMAP, info->tmap_param[i]};
  return n;
}

static MlirType param_type(const Lowerer *L, LwParamType t) {
  switch (t) {
  case LW_PTR: case LW_TMAP: return L->b.ptr;
  case LW_I32: case LW_U32: return L->b.i32;
  case LW_F32: return L->b.f32;
  default: return L->b.i64;
  }
}

/* Binds the parameters, the i32 sizes widened to i64 in order, then lets
 * the kind bind what is its own. */
static void bind_params(Lowerer *L, const LwKind *K, const LwParam *ps, int n, MlirBlock entry) {
  CgBuilder *b = &L->b;
  MlirValue a[LW_MAX_PARAMS] = {{NULL}};
  for (int i = 0; i < n; i++) {
    a[i] = mlirBlockGetArgument(entry, i);
    if (ps[i].type == LW_I32)
      a[i] = cg_int_cast(b, a[i], b->i64);
  }
  for (int i = 0; i < n; i++)
    bind_param(L, &ps[i], a[i]);
  /* after cg_mlir_pipeline's first stage, mlir_to_ptx.c makes these
   * arguments byval grid constants (docs/hopper-pipeline.md §2) */
  int maps[LW_MAX_PARAMS], nmaps = 0;
  for (int i = 0; i < n; i++)
    if (ps[i].type == LW_TMAP)
      maps[nmaps++] = i;
  if (nmaps)
    mlirOperationSetAttributeByName(mlirBlockGetParentOperation(entry),
                                    mlirStringRefCreateFromCString(CG_TENSOR_MAPS_ATTR),
                                    mlirDenseI32ArrayGet(b->ctx, nmaps, maps));
  if (lw_is_varlen(L->f)) /* before the kind's: it sees this block's sequence */
    lw_varlen_bind(L);
  if (K->bind)
    K->bind(L);
}

static void make_thread_ids(Lowerer *L) {
  CgBuilder *b = &L->b;
  L->tid = cg_thread_id(b, "x");
  L->warp = cg_arith2(b, "arith.divui", L->tid, cg_const_i32(b, 32));
  L->lane = cg_arith2(b, "arith.remui", L->tid, cg_const_i32(b, 32));
  L->lg = cg_arith2(b, "arith.divui", L->lane, cg_const_i32(b, 4));
  L->lq = cg_arith2(b, "arith.remui", L->lane, cg_const_i32(b, 4));
  L->smem = cg_addressof(b, CG_SMEM_SYMBOL, b->sptr);
}

/* Binds the IR's index arguments (batch, seqlen_q, seqlen_k, and the kind's
 * own) to the i32 parameters; tensor arguments are looked up by name when
 * used. */
static bool bind_args(Lowerer *L) {
  for (int i = 0; i < L->f->nargs; i++) {
    Value *a = L->f->args[i];
    if (a->type.kind == TYPE_TENSOR) {
      /* A marker: load/store read the tensor from the IR value itself. */
      lw_set(L, a, lw_scalar(L, a->type, (MlirValue){NULL}));
      continue;
    }
    const char *n = a->name ? a->name : "";
    /* a persistent kernel's %nctas (passes/persistent.c): the launch's
     * blocks, gridDim.x, not a parameter */
    MlirValue v = strcmp(n, "batch") == 0      ? L->batch
                  : strcmp(n, "seqlen_q") == 0 ? L->seqlen_q
                  : strcmp(n, "seqlen_k") == 0 ? L->seqlen_k
                  : strcmp(n, "nctas") == 0    ? lw_grid_dim(&L->b, "x")
                                               : lw_param(L, n, false);
    if (mlirValueIsNull(v)) {
      lw_error(L, NULL, "kernel argument %%%s has no place in the kernel ABI", n);
      return false;
    }
    lw_set(L, a, lw_scalar(L, a->type, v));
  }
  return true;
}

static ElemType kernel_dtype(const Func *f) {
  const char *d = attr_str(&f->attrs, "dtype", "bf16");
  return strcmp(d, "f16") == 0 ? ELEM_F16 : ELEM_BF16;
}

int lw_walk_kernel(CgContext *cc, MlirBlock gpu_module, const Func *f, const LwKind *K,
                   CgTensorCore tc, CgExpFma exp_fma, CgLaneStats lane_stats, const char *target,
                   CgKernelInfo *info) {
  Lowerer *L = calloc(1, sizeof *L);
  if (!L || K->nparams > LW_MAX_PARAMS) {
    free(L);
    return -1;
  }
  cg_builder_init(&L->b, cc);
  L->cc = cc;
  L->f = f;
  L->kind = K;
  L->warps = (int)attr_int(&f->attrs, "warps", 4);
  L->threads = 32 * L->warps;
  int roles[2] = {0, 0};
  func_walk((Func *)f, producer_warps_fn, roles);
  L->producer_threads = 32 * roles[0];
  L->role_blocks = roles[1];
  L->backward = strcmp(attr_str(&f->attrs, "mode", "forward"), "backward") == 0;
  L->dtype = kernel_dtype(f);
  L->sm90 = strcmp(target, "sm_90a") == 0;
  L->exp_fma = exp_fma;
  /* past head dim 128 the shuffles cost more than the registers they free
   * (d256's atomic kernel -6%, P140) */
  L->lane_vectors = lane_stats != CG_LANE_STATS_OFF && attr_int(&f->attrs, "head_dim", 0) <= 128 &&
                    attr_int(&f->attrs, "v_head_dim", 0) <= 128;
  /* Through a loop's carry (d64's software pipeline): the K/V-outer kernel
   * of the deterministic launch 2-4% faster, the atomic launch's 3-4%
   * slower (P142), so auto carries in the former only. */
  L->lane_carry = L->lane_vectors &&
                  (lane_stats == CG_LANE_STATS_CARRY ||
                   (lane_stats == CG_LANE_STATS_AUTO && L->backward &&
                    strcmp(attr_str(&f->attrs, "role", ""), "kv") == 0));
  L->remat_descriptors = K->remat_descriptors;
  func_walk((Func *)f, count_parallel, &L->nparallel);
  /* The cross-warp scratch goes first: its size is known before the walk,
   * the staged tiles' offsets only during it. When it is only used after
   * the last staged tile, it shares their bytes instead (one block more per
   * SM for warp-split-kv's decode kernels). */
  L->scratch_off = 0;
  L->scratch_bytes = lw_scratch_bytes(L);
  L->scratch_aliases = L->scratch_bytes > 0 && lw_scratch_can_alias(L);
  L->smem_top = L->scratch_aliases ? 0 : (L->scratch_bytes + 127) / 128 * 128;
  if (f->loc.file)
    cg_builder_set_loc(&L->b, f->loc.file, f->loc.line, f->loc.col);
  cg_builder_set_block(&L->b, gpu_module);
  LwParam ps[LW_MAX_PARAMS];
  MlirType params[LW_MAX_PARAMS];
  memset(info, 0, sizeof *info);
  func_walk((Func *)f, tma_ring_fn, info);
  func_walk((Func *)f, tma_reduce_fn, L);
  add_tma_reduce_map(L, info);
  int nparams = kernel_params(L, K, info, ps);
  if (nparams < 0) {
    cg_context_error(cc, mlirLocationUnknownGet(cg_context_mlir(cc)), "kernel %s: more than %d parameters",
                     f->name, LW_MAX_PARAMS);
    lw_free_all(L);
    return -1;
  }
  for (int i = 0; i < nparams; i++)
    params[i] = param_type(L, ps[i].type);
  int block_threads = L->threads + L->producer_threads;
  MlirBlock entry = cg_gpu_kernel(&L->b, f->name, params, nparams, block_threads);
  /* Warp roles move registers between warpgroups (setmaxnreg), which
   * needs the launch's allocation pinned: 65536 / (threads x blocks an
   * SM) each (lw_role_regs). */
  if (L->producer_threads)
    mlirOperationSetAttributeByName(mlirBlockGetParentOperation(entry),
                                    mlirStringRefCreateFromCString("nvvm.minctasm"),
                                    cg_attr_i32(&L->b, lw_role_regs(L->threads, L->role_blocks, L->backward).blocks_per_sm));
  cg_builder_set_block(&L->b, entry);
  bind_params(L, K, ps, nparams, entry);
  make_thread_ids(L);
  if (lw_wgmma_plan(L, tc, target, K->no_wgmma) && bind_args(L))
    lw_walk_block(L, f->body);
  lw_flush_async(L, 0);
  /* bulk reductions still reading shared memory (mem_bulk.c) */
  if (L->bulk_buf_bytes)
    cg_bulk_wait(&L->b, false);
  cg_gpu_return(&L->b);
  info->smem_bytes = L->smem_top > L->scratch_bytes ? L->smem_top : L->scratch_bytes;
  info->workspace_floats_per_row = lw_workspace_floats_per_row(f);
  info->threads = block_threads;
  info->parallel_loops = L->nparallel;
  info->wgmma = L->wgmma;
  info->matmuls = L->has_matmul;
  int rc = L->failed ? -1 : 0;
  lw_free_all(L);
  return rc;
}
