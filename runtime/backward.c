/* backward.c - backward launches (docs/backward.md): fa_backward_check, the
 * workspace, the plan (which kernels, in which order, on which grids), the
 * kernels' parameter lists and fa_backward.
 *
 * Same stance as check.c: the backward kernels trust their arguments (no
 * bounds checks on the device), so everything that could make them read or
 * write outside the caller's memory is refused here, GPU-free, with a
 * message that names the argument and the numbers. Everything but
 * fa_backward itself runs without a GPU, so that the plan and the
 * parameter lists can be tested on any machine.
 */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

#define MAX_GRID_YZ 65535
/* Byte offsets stay below 2^62 so that pointer + offset never wraps. */
#define MAX_BYTES (INT64_C(1) << 62)
/* Each part of the workspace starts this aligned (vector accesses). */
#define WS_ALIGN 256

enum { Q, K, V, O, DOUT, DQ, DK, DV, NT };

static const char *const names[NT] = {"q", "k", "v", "o", "dout", "dq", "dk", "dv"};
/* Which sizes each tensor has (tensor_check.c): dout like o, dq like q, dk
 * like k, dv like v. */
static const unsigned char sides[NT] = {
  0, FA_SIDE_KV, FA_SIDE_KV | FA_SIDE_VDIM, FA_SIDE_VDIM, FA_SIDE_VDIM, 0, FA_SIDE_KV,
  FA_SIDE_KV | FA_SIDE_VDIM};

/* ---- the workspace --------------------------------------------------------- */

/* The workspace of one launch: delta, then dq_acc in atomic mode. */
typedef struct Layout {
  int64_t delta_off, delta_bytes, acc_off, acc_bytes, total;
} Layout;

static int round_ok(int64_t x, int64_t *r) {
  if (!fa_add_ok(x, WS_ALIGN - 1, r)) return 0;
  *r &= ~(int64_t)(WS_ALIGN - 1);
  return 1;
}

/* For sizes within the int32 limits (fa_check_int32_sizes); 0 on overflow. */
static int layout(const fa_kernel_info *in, int64_t batch, int64_t sq, int det, Layout *l) {
  int64_t rows, elems;
  memset(l, 0, sizeof *l);
  if (!fa_mul_ok(batch, in->heads, &rows) || !fa_mul_ok(rows, sq, &rows) ||
      !fa_mul_ok(rows, 4, &l->delta_bytes) || !round_ok(l->delta_bytes, &l->delta_bytes))
    return 0;
  l->acc_off = l->delta_bytes;
  if (!det && (!fa_mul_ok(rows, in->head_dim, &elems) || !fa_mul_ok(elems, 4, &l->acc_bytes) ||
               !round_ok(l->acc_bytes, &l->acc_bytes)))
    return 0;
  return fa_add_ok(l->delta_bytes, l->acc_bytes, &l->total) && l->total < MAX_BYTES;
}

static int mode_ok(int mode) {
  return mode == FA_BACKWARD_AUTO || mode == FA_BACKWARD_DETERMINISTIC ||
         mode == FA_BACKWARD_ATOMIC;
}

/* Whether a (valid) mode launches pre, kv, q: AUTO runs the launch the
 * kernel's metadata names (backward_auto, codegen/meta_backward.c; without
 * the key, PTX of an older flashc, the deterministic one). */
static int launches_deterministic(const fa_kernel_info *info, int mode) {
  if (mode == FA_BACKWARD_AUTO) return info->backward_auto != FA_BACKWARD_ATOMIC;
  return mode != FA_BACKWARD_ATOMIC;
}

fa_status fa_backward_workspace_size(const fa_kernel_info *info, int64_t batch,
                                     int64_t seqlen_q, int64_t seqlen_k, int mode,
                                     size_t *bytes) {
  if (bytes) *bytes = 0;
  if (!info || !bytes) return FA_ERR_NULL_POINTER;
  if (!mode_ok(mode)) return FA_ERR_INVALID_ARGUMENT;
  if (batch < 0 || seqlen_q < 0 || seqlen_k < 0) return FA_ERR_INVALID_ARGUMENT;
  if (fa_check_kernel_info(info, NULL, 0) != FA_OK) return FA_ERR_META;
  if (info->mode == FA_MODE_DECODE) return FA_ERR_UNSUPPORTED;
  int64_t rows;
  if (batch > INT32_MAX || seqlen_q > INT32_MAX || seqlen_k > INT32_MAX ||
      !fa_mul_ok(batch, info->heads, &rows) || !fa_mul_ok(rows, seqlen_q, &rows) ||
      rows > INT32_MAX)
    return FA_ERR_TOO_LARGE;
  Layout l;
  if (!layout(info, batch, seqlen_q, launches_deterministic(info, mode), &l))
    return FA_ERR_TOO_LARGE;
  *bytes = (size_t)l.total;
  return FA_OK;
}

/* ---- fa_backward_check ----------------------------------------------------- */

typedef struct BCtx {
  const fa_kernel_info *info;
  const fa_backward_args *a;
  fa_launch_tensors lt;
  Layout ws;     /* set once the sizes are checked */
  int64_t rows;  /* the LSE's: batch * heads * seqlen_q (varlen: heads * total_q) */
} BCtx;

static fa_status check_flags(BCtx *c) {
  const fa_backward_args *a = c->a;
  if (!mode_ok(a->mode)) {
    fa_fmt(c->lt.msg, c->lt.len, "mode is %d: must be FA_BACKWARD_AUTO (0), "
           "FA_BACKWARD_DETERMINISTIC (1) or FA_BACKWARD_ATOMIC (2)", a->mode);
    return FA_ERR_INVALID_ARGUMENT;
  }
  return FA_OK;
}

/* The i32 parameters, the LSE / delta row index, the grid's y and z (a
 * varlen launch's grid and workspace: num_seqs x max_seqlen_q). */
static fa_status check_sizes(BCtx *c) {
  const fa_kernel_info *in = c->info;
  const fa_backward_args *a = c->a;
  fa_sizes sz = fa_launch_sizes_(a->varlen, &a->q, &a->k);
  fa_status st = fa_check_varlen_sizes_(in, a->varlen, &c->lt);
  if (st != FA_OK || (st = fa_check_int32_sizes(&c->lt, in))) return st;
  if (sz.batch > MAX_GRID_YZ || in->heads > MAX_GRID_YZ) {
    fa_fmt(c->lt.msg, c->lt.len, "grid: %d heads x %" PRId64 " batch exceeds the CUDA grid "
           "limits (grid y and z at most 65535)", in->heads, sz.batch);
    return FA_ERR_TOO_LARGE;
  }
  c->rows = a->q.dim[0] * in->heads * a->q.dim[1];
  /* rows <= 2^31 (a varlen launch's padded ones: fa_check_varlen_sizes_) */
  layout(in, sz.batch, sz.seqlen_q, launches_deterministic(in, a->mode), &c->ws);
  return FA_OK;
}

/* lse and the workspace: present, aligned, not past the address space. */
static fa_status check_pointers(BCtx *c) {
  const fa_backward_args *a = c->a;
  char *msg = c->lt.msg;
  size_t len = c->lt.len;
  uintptr_t ws = (uintptr_t)a->workspace;
  if (!a->lse && c->rows > 0) {
    fa_fmt(msg, len, "lse: pointer is NULL; the backward needs the forward's LSE (float32 %s)",
           a->varlen ? "[heads, total_q]" : "[batch, heads, seqlen_q]");
    return FA_ERR_NULL_POINTER;
  }
  if (!a->workspace && a->workspace_bytes) {
    fa_fmt(msg, len, "workspace: pointer is NULL but workspace_bytes is %zu (NULL and 0 use the "
           "module's scratch)", a->workspace_bytes);
    return FA_ERR_NULL_POINTER;
  }
  if (ws % WS_ALIGN) {
    fa_fmt(msg, len, "workspace: pointer 0x%" PRIxPTR " is not %d-byte aligned (offset %u)", ws,
           WS_ALIGN, (unsigned)(ws % WS_ALIGN));
    return FA_ERR_ALIGNMENT;
  }
  fa_status st = fa_check_in_space_("lse", a->lse, c->rows * 4, msg, len);
  return st ? st : fa_check_in_space_("workspace", a->workspace, c->ws.total, msg, len);
}

static fa_status check_workspace_size(BCtx *c) {
  const fa_backward_args *a = c->a;
  if (!a->workspace || a->workspace_bytes >= (uint64_t)c->ws.total) return FA_OK;
  fa_fmt(c->lt.msg, c->lt.len, "workspace: %zu bytes but the launch needs %" PRId64
         " (delta %" PRId64 " + dq_acc %" PRId64 "; fa_backward_workspace_size)",
         a->workspace_bytes, c->ws.total, c->ws.delta_bytes, c->ws.acc_bytes);
  return FA_ERR_INVALID_ARGUMENT;
}

/* The outputs (dq, dk, dv and the workspace's used part) must not share
 * memory with an input (q, k, v, o, lse, dout, a varlen launch's
 * cu_seqlens, the run-time inputs) or each other: a block could overwrite
 * what another still reads. Address ranges, as check.c's. */
static fa_status check_aliasing(BCtx *c, const int64_t ext[NT]) {
  const fa_backward_args *a = c->a;
  fa_range in[8] = {{"q", (uintptr_t)a->q.data, ext[Q]},
                    {"k", (uintptr_t)a->k.data, ext[K]},
                    {"v", (uintptr_t)a->v.data, ext[V]},
                    {"o", (uintptr_t)a->o.data, ext[O]},
                    {"lse", (uintptr_t)a->lse, a->lse ? c->rows * 4 : 0},
                    {"dout", (uintptr_t)a->dout.data, ext[DOUT]}};
  int nin = 6 + fa_varlen_ranges_(a->varlen, in + 6);
  fa_range out[4] = {{"dq", (uintptr_t)a->dq.data, ext[DQ]},
                     {"dk", (uintptr_t)a->dk.data, ext[DK]},
                     {"dv", (uintptr_t)a->dv.data, ext[DV]},
                     {"workspace", (uintptr_t)a->workspace, a->workspace ? c->ws.total : 0}};
  fa_status st = fa_check_disjoint(in, nin, out, 4, c->lt.msg, c->lt.len);
  return st ? st : fa_check_input_memory_(c->info, a->inputs, a->num_inputs, out, 4, c->lt.msg,
                                          c->lt.len);
}

fa_status fa_backward_check(const fa_kernel_info *info, const fa_backward_args *args, char *msg,
                            size_t msglen) {
  fa_status st = fa_check_present(info, args, msg, msglen);
  if (st != FA_OK) return st;
  if (info->mode == FA_MODE_DECODE || info->mode == FA_MODE_BLOCKS) {
    fa_fmt(msg, msglen, "kernel %s is a %s kernel; fa_backward launches the backward of "
           "forward kernels", info->kernel,
           info->mode == FA_MODE_DECODE ? "decode" : "classifier (mode blocks)");
    return FA_ERR_UNSUPPORTED;
  }
  const fa_backward_args *a = args;
  BCtx c = {info, args,
            {{&a->q, &a->k, &a->v, &a->o, &a->dout, &a->dq, &a->dk, &a->dv},
             {names[0], names[1], names[2], names[3], names[4], names[5], names[6], names[7]},
             {fa_dim_names, fa_dim_names, fa_dim_names, fa_dim_names, fa_dim_names,
              fa_dim_names, fa_dim_names, fa_dim_names},
             info->dtype, msg, msglen, NT},
            {0, 0, 0, 0, 0}, 0};
  int64_t ext[FA_MAX_LAUNCH_TENSORS];
  const fa_varlen *vl = a->varlen;
  if ((st = fa_check_kernel_info(info, msg, msglen)) || (st = fa_check_nulls(&c.lt)) ||
      (st = fa_check_dtypes(&c.lt)) || (st = fa_check_nonnegative(&c.lt)) ||
      (st = fa_check_varlen_(info, vl, &c.lt)) ||
      (st = fa_check_meta_dims(&c.lt, info, sides)) || (st = fa_check_cross_dims(&c.lt, sides)) ||
      (st = check_flags(&c)) || (st = fa_check_dropout_(a->dropout_p, msg, msglen)) ||
      (st = fa_check_inputs_(info, a->inputs, a->num_inputs, &a->q, &a->k, vl, msg, msglen)))
    return st;
  fa_sizes sz = fa_launch_sizes_(vl, &a->q, &a->k);
  if ((st = fa_check_blocks_(info, a->blocks, sz, 0, msg, msglen))) return st;
  /* Nothing is launched without a batch (a varlen launch: without a
   * sequence); its pointers and strides are never used. */
  if (a->q.dim[0] == 0 || (vl && vl->num_seqs == 0)) return FA_OK;
  if ((st = check_sizes(&c)) || (st = fa_check_blocks_(info, NULL, sz, 1, msg, msglen)) ||
      (st = check_pointers(&c)) || (st = fa_check_strides(&c.lt)) ||
      (st = fa_check_alignment(&c.lt, a->lse)) || (st = fa_check_extents(&c.lt, ext)) ||
      (st = fa_check_self_overlap(&c.lt, DQ)) || (st = fa_check_self_overlap(&c.lt, DK)) ||
      (st = fa_check_self_overlap(&c.lt, DV)) || (st = check_workspace_size(&c)) ||
      (st = check_aliasing(&c, ext)) ||
      (vl && (st = fa_check_varlen_values_(info, vl, vl->host_cu_seqlens_q,
                                           vl->host_cu_seqlens_k, &a->q, &a->k, msg, msglen))))
    return st;
  return FA_OK;
}

/* ---- the plan -------------------------------------------------------------- */

static int kv_outer(fa_role r) {
  return r == FA_ROLE_MAIN || r == FA_ROLE_KV || r == FA_ROLE_DV;
}

/* A kernel the plan launches must be what its role says (a hand-built info
 * may not be). */
static fa_status check_role(const fa_kernel_info *in, char *msg, size_t len) {
  fa_status st = fa_check_kernel_info(in, msg, len);
  if (st != FA_OK) return st;
  int kv = kv_outer(in->role);
  if (in->grid != (kv ? FA_GRID_K_TILES : FA_GRID_Q_TILES) || (kv && in->tile_kv <= 0) ||
      in->smem_bytes < 0) {
    fa_fmt(msg, len, "kernel %s (role %s) has grid %d, tile_kv %d, smem_bytes %d: a %s kernel "
           "runs on grid %s: use fa_meta_parse", in->kernel, fa_role_name(in->role),
           (int)in->grid, in->tile_kv, in->smem_bytes, fa_role_name(in->role),
           kv ? "k_tiles,kv_heads,batch with tile_kv > 0" : "q_tiles,heads,batch");
    return FA_ERR_META;
  }
  return FA_OK;
}

/* Whether two kernels declare the same run-time inputs (names, dtypes,
 * dims, order) and requires: one launch's bindings feed every kernel of a
 * plan, through the plan's one copy of the declarations. */
static int same_inputs(const fa_kernel_info *x, const fa_kernel_info *y) {
  if (x->ninputs != y->ninputs || x->require_q_le_k != y->require_q_le_k ||
      x->require_k_le_q != y->require_k_le_q)
    return 0;
  for (int i = 0; i < x->ninputs; i++) {
    const fa_input_info *a = &x->inputs[i], *b = &y->inputs[i];
    if (strcmp(a->name, b->name) != 0 || a->dtype != b->dtype || a->rank != b->rank ||
        memcmp(a->dims, b->dims, sizeof a->dims) != 0)
      return 0;
  }
  return 1;
}

/* The index in k[0..n) of the classifier whose lists kernel `in` visits; -1. */
static int classifier_of(const fa_kernel_info *k, int n, const fa_kernel_info *in) {
  for (int i = 0; i < n; i++)
    if (k[i].mode == FA_MODE_BLOCKS && strcmp(k[i].kernel, in->block_list) == 0) return i;
  return -1;
}

/* The kernels the mode launches, in order: idx[0..*nidx) into kernels; a
 * dV kernel (split-dkdv) after the K/V-outer one when the module has it. */
static fa_status find_kernels(const fa_kernel_info *k, int n, int det, int idx[4], int *nidx,
                              char *msg, size_t len) {
  const char *fwd = k[0].mode == FA_MODE_BACKWARD ? k[0].forward : k[0].kernel;
  int by_role[FA_ROLE_COUNT_], any = 0;
  for (int r = 0; r < FA_ROLE_COUNT_; r++) by_role[r] = -1;
  for (int i = 0; i < n; i++) {
    /* a gathered copy (gather_of) runs in its kernel's place, where
     * fa_backward_plan picks it (fa_staged_or_gathered_) */
    if (k[i].mode != FA_MODE_BACKWARD || strcmp(k[i].forward, fwd) != 0 || k[i].gather_of[0])
      continue;
    any = 1;
    if (k[i].role > FA_ROLE_NONE && k[i].role < FA_ROLE_COUNT_ && by_role[k[i].role] < 0)
      by_role[k[i].role] = i;
  }
  if (!any) {
    fa_fmt(msg, len, "kernel %s has no backward kernels in this module: compile it with "
           "grad = true (docs/backward.md)", fwd);
    return FA_ERR_UNSUPPORTED;
  }
  static const fa_role roles[2][3] = {{FA_ROLE_PRE, FA_ROLE_MAIN, FA_ROLE_POST},
                                      {FA_ROLE_PRE, FA_ROLE_KV, FA_ROLE_Q}};
  static const char *const suffix[FA_ROLE_COUNT_] = {"", "_bwd_pre", "_bwd", "_bwd_kv",
                                                     "_bwd_q", "_bwd_post", "_bwd_dv"};
  for (int s = 0; s < 3; s++) {
    fa_role r = roles[det][s];
    idx[s] = by_role[r];
    if (idx[s] < 0) {
      fa_fmt(msg, len, "kernel %s has no backward kernel of role %s (%s%s) in this module, "
             "which the %s launch needs", fwd, fa_role_name(r), fwd, suffix[r],
             det ? "deterministic" : "atomic");
      return FA_ERR_UNSUPPORTED;
    }
  }
  *nidx = 3;
  if (by_role[FA_ROLE_DV] >= 0) {
    idx[3] = idx[2];
    idx[2] = by_role[FA_ROLE_DV];
    *nidx = 4;
  }
  return FA_OK;
}

fa_status fa_backward_plan(const fa_kernel_info *kernels, int nkernels,
                           const fa_backward_args *args, fa_backward_schedule *plan, char *msg,
                           size_t msglen) {
  fa_fmt(msg, msglen, "%s", "");
  if (plan) memset(plan, 0, sizeof *plan);
  if (!kernels || !args || !plan) {
    fa_fmt(msg, msglen, "fa_backward_plan: %s is NULL", !kernels ? "kernels"
                                                        : !args  ? "args" : "plan");
    return FA_ERR_NULL_POINTER;
  }
  if (nkernels < 1 || nkernels > FA_MODULE_MAX_KERNELS) {
    fa_fmt(msg, msglen, "fa_backward_plan: nkernels is %d, must be 1..%d", nkernels,
           FA_MODULE_MAX_KERNELS);
    return FA_ERR_INVALID_ARGUMENT;
  }
  /* The first kernel's check refuses decode kernels and a bad mode flag. */
  fa_status st = fa_backward_check(&kernels[0], args, msg, msglen);
  int idx[4], nidx = 0;
  int det = launches_deterministic(&kernels[0], args->mode);
  if (st != FA_OK || (st = find_kernels(kernels, nkernels, det, idx, &nidx, msg, msglen)))
    return st;
  for (int s = 0; s < nidx; s++) {
    const fa_kernel_info *in = &kernels[idx[s]];
    if (in->backward_auto != kernels[0].backward_auto) {
      fa_fmt(msg, msglen, "kernel %s's backward_auto differs from kernel %s's: a module's "
             "forward and backward kernels name the same (use fa_meta_parse_module)",
             in->kernel, kernels[0].kernel);
      return FA_ERR_META;
    }
    if ((st = check_role(in, msg, msglen)) || (st = fa_backward_check(in, args, msg, msglen)))
      return st;
    if (in->block_list[0] && classifier_of(kernels, nkernels, in) < 0) {
      fa_fmt(msg, msglen, "kernel %s visits the lists of %s, which is not a classifier (mode "
             "blocks) among the kernels given (use fa_meta_parse_module)", in->kernel,
             in->block_list);
      return FA_ERR_META;
    }
    if (!same_inputs(in, &kernels[idx[0]])) {
      fa_fmt(msg, msglen, "kernel %s declares other run-time inputs or requires than kernel %s: "
             "a module's backward kernels declare the same (use fa_meta_parse_module)",
             in->kernel, kernels[idx[0]].kernel);
      return FA_ERR_META;
    }
  }
  /* The kernel that recomputes P (main or kv) decides: the module's
   * backward regenerates a dropout mask or has none to regenerate. */
  if (args->dropout_p > 0 && kernels[idx[1]].dropout == 0) {
    fa_fmt(msg, msglen, "dropout_p is %g but the backward of %s was compiled without dropout "
           "(add `dropout = P;` to its spec)", args->dropout_p, kernels[idx[1]].forward);
    return FA_ERR_UNSUPPORTED;
  }
  plan->ninputs = kernels[idx[0]].ninputs; /* 0..FA_MAX_INPUTS: checked */
  memcpy(plan->inputs, kernels[idx[0]].inputs, sizeof plan->inputs);
  fa_sizes sz = fa_launch_sizes_(args->varlen, &args->q, &args->k);
  int64_t batch = sz.batch, sq = sz.seqlen_q, sk = sz.seqlen_k;
  if (batch == 0) return FA_OK;
  Layout l;
  layout(&kernels[idx[0]], batch, sq, det, &l); /* checked */
  plan->workspace_bytes = (size_t)l.total;
  plan->delta_offset = (size_t)l.delta_off, plan->delta_bytes = (size_t)l.delta_bytes;
  plan->dq_acc_offset = (size_t)l.acc_off, plan->dq_acc_bytes = (size_t)l.acc_bytes;
  /* dq_acc is summed into by atomics: zero before the main kernel. Not
   * needed without rows (seqlen_q == 0: nothing reads it). */
  if (l.acc_bytes > 0) {
    fa_backward_step *z = &plan->step[plan->nsteps++];
    z->op = FA_BACKWARD_ZERO;
    z->kernel = -1;
    z->offset = (size_t)l.acc_off, z->bytes = (size_t)l.acc_bytes;
  }
  for (int s = 0; s < nidx; s++) {
    /* the kernel, or its gathered copy where a staged input's layout is
     * one no tensor map takes (passes/stage_inputs.c) */
    int ki = fa_staged_or_gathered_(kernels, nkernels, idx[s], args->inputs, args->num_inputs);
    const fa_kernel_info *in = &kernels[ki];
    int kv = kv_outer(in->role);
    int64_t tile = kv ? in->tile_kv : in->tile_q, len = kv ? sk : sq;
    int64_t x = (len + tile - 1) / tile; /* <= INT32_MAX: len is */
    if (x == 0) continue; /* seqlen_q or seqlen_k 0: nothing for this kernel (header) */
    fa_backward_step *p = &plan->step[plan->nsteps++];
    p->op = FA_BACKWARD_LAUNCH;
    p->role = in->role;
    p->kernel = ki;
    p->grid[0] = (unsigned)x;
    p->grid[1] = (unsigned)(kv ? in->kv_heads : in->heads);
    p->grid[2] = (unsigned)batch;
    p->block = (unsigned)in->threads;
    p->smem = (unsigned)in->smem_bytes;
    p->dropout = in->dropout > 0;
    p->dropout_torch = in->dropout_torch;
    p->varlen = in->varlen != 0;
    p->ntmaps = in->ntmaps;
    for (int t = 0; t < in->ntmaps; t++) {
      p->tmaps[t] = in->tmaps[t];
      if (in->tmaps[t].tensor == 'a') p->dq_acc_map_rows = in->tmaps[t].rows;
    }
    if (in->block_list[0]) {
      p->block_list = 1;
      p->lists = fa_visited_lists_(in, args->blocks, sz);
      p->lists.kernel = classifier_of(kernels, nkernels, in);
    }
  }
  return FA_OK;
}

/* ---- the parameter lists --------------------------------------------------- */

void fa_put_(fa_plist *l, fa_param_kind kind, const char *name, int64_t value) {
  fa_param *p = &l->p[l->n++];
  p->kind = kind, p->name = name, p->value = value;
}

static void put_ptr(fa_plist *l, const char *name, uint64_t addr) {
  fa_put_(l, FA_PARAM_PTR, name, (int64_t)addr);
}

static uint64_t addr(const void *p) { return (uint64_t)(uintptr_t)p; }

void fa_put_dropout_(fa_plist *l, double p, uint64_t seed, uint64_t offset, int torch) {
  static const char *const dn[5] = {"seed_lo", "seed_hi", "offset_lo", "offset_hi",
                                    "keep_threshold"};
  fa_dropout_words w;
  fa_dropout_words_(p, seed, offset, torch, &w);
  for (int i = 0; i < 5; i++) fa_put_(l, FA_PARAM_U32, dn[i], w.u[i]);
  uint32_t bits;
  memcpy(&bits, &w.keep_scale, sizeof bits);
  fa_put_(l, FA_PARAM_F32, "keep_scale", bits);
}

/* The parameter names of input i (fa_param.name is static): "input0" for
 * its pointer or value, "input0.s0".."input0.s3" for its strides. */
static const char *const input_names[FA_MAX_INPUTS][5] = {
#define FA_INPUT_NAMES_(i) {"input" #i, "input" #i ".s0", "input" #i ".s1", "input" #i ".s2", \
                            "input" #i ".s3"}
  FA_INPUT_NAMES_(0), FA_INPUT_NAMES_(1), FA_INPUT_NAMES_(2), FA_INPUT_NAMES_(3),
  FA_INPUT_NAMES_(4), FA_INPUT_NAMES_(5), FA_INPUT_NAMES_(6), FA_INPUT_NAMES_(7),
#undef FA_INPUT_NAMES_
};

/* A scalar's parameter: an f32's IEEE bits, an i32's value; 0 for a value
 * the checks refuse (converting it would be undefined behaviour). */
static int64_t scalar_word(fa_dtype dtype, double v) {
  if (dtype == FA_DTYPE_F32) {
    if (!(fabs(v) <= FLT_MAX)) return 0;
    float f = (float)v;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
  }
  return v >= INT32_MIN && v <= INT32_MAX ? (int32_t)v : 0;
}

void fa_put_inputs_(fa_plist *l, const fa_input_info *decl, int ndecl, const fa_input *inputs,
                    int n) {
  for (int i = 0; i < ndecl && i < FA_MAX_INPUTS; i++) {
    const fa_input_info *x = &decl[i];
    int named = memchr(x->name, '\0', sizeof x->name) != NULL; /* a hand-built plan's may not be */
    const fa_input *b = named ? fa_find_input_(inputs, inputs ? n : 0, x->name) : NULL;
    if (x->rank == 0) {
      fa_put_(l, x->dtype == FA_DTYPE_F32 ? FA_PARAM_F32 : FA_PARAM_I32, input_names[i][0],
              b ? scalar_word(x->dtype, b->value) : 0);
      continue;
    }
    put_ptr(l, input_names[i][0], b ? addr(b->tensor.data) : 0);
    for (int d = 0; d < x->rank && d < 4; d++)
      fa_put_(l, FA_PARAM_I64, input_names[i][1 + d], b ? b->tensor.stride[d] : 0);
  }
}

void fa_param_values_(const fa_param *p, int n, fa_param_values *v) {
  for (int j = 0; j < n && j < FA_BACKWARD_MAX_PARAMS; j++) {
    switch (p[j].kind) {
    case FA_PARAM_PTR: v->slot[j].u64 = (uint64_t)p[j].value; break;
    case FA_PARAM_I64: v->slot[j].i64 = p[j].value; break;
    case FA_PARAM_I32: v->slot[j].i32 = (int32_t)p[j].value; break;
    /* F32: the float's bits, passed as the 4 bytes they are */
    case FA_PARAM_U32: case FA_PARAM_F32: v->slot[j].u32 = (uint32_t)p[j].value; break;
    case FA_PARAM_TMAP: /* encoded by the launch (launch.c) */
      v->ptr[j] = v->map[p[j].value >= 0 && p[j].value < FA_MAX_TMAPS ? p[j].value : 0];
      continue;
    }
    v->ptr[j] = &v->slot[j];
  }
}

static void put_tensor_ptrs(fa_plist *l, const fa_backward_args *a, const int *which, int n) {
  const fa_tensor *t[NT] = {&a->q, &a->k, &a->v, &a->o, &a->dout, &a->dq, &a->dk, &a->dv};
  for (int i = 0; i < n; i++) put_ptr(l, names[which[i]], addr(t[which[i]]->data));
}

/* The launch's batch, seqlen_q, seqlen_k (a varlen one's num_seqs and
 * longest lengths). */
static void put_sizes(fa_plist *l, const fa_backward_args *a) {
  fa_sizes sz = fa_launch_sizes_(a->varlen, &a->q, &a->k);
  fa_put_(l, FA_PARAM_I32, "batch", sz.batch);
  fa_put_(l, FA_PARAM_I32, "seqlen_q", sz.seqlen_q);
  fa_put_(l, FA_PARAM_I32, "seqlen_k", sz.seqlen_k);
}

/* Batch, seq and head strides (elements) of each tensor in `which`. */
static void put_strides(fa_plist *l, const fa_backward_args *a, const int *which, int n) {
  static const char *const sn[NT][3] = {
    {"q.sb", "q.ss", "q.sh"},          {"k.sb", "k.ss", "k.sh"},
    {"v.sb", "v.ss", "v.sh"},          {"o.sb", "o.ss", "o.sh"},
    {"dout.sb", "dout.ss", "dout.sh"}, {"dq.sb", "dq.ss", "dq.sh"},
    {"dk.sb", "dk.ss", "dk.sh"},       {"dv.sb", "dv.ss", "dv.sh"}};
  const fa_tensor *t[NT] = {&a->q, &a->k, &a->v, &a->o, &a->dout, &a->dq, &a->dk, &a->dv};
  for (int i = 0; i < n; i++)
    for (int d = 0; d < 3; d++) fa_put_(l, FA_PARAM_I64, sn[which[i]][d], t[which[i]]->stride[d]);
}

fa_status fa_backward_params(const fa_backward_schedule *plan, int step,
                             const fa_backward_args *args, uint64_t workspace,
                             fa_param params[FA_BACKWARD_MAX_PARAMS], int *count) {
  if (count) *count = 0;
  if (!plan || !args || !params || !count) return FA_ERR_NULL_POINTER;
  if (step < 0 || step >= plan->nsteps || step >= FA_BACKWARD_MAX_STEPS ||
      plan->step[step].op != FA_BACKWARD_LAUNCH || (plan->step[step].varlen && !args->varlen))
    return FA_ERR_INVALID_ARGUMENT;
  const fa_backward_args *a = args;
  fa_plist l = {params, 0};
  uint64_t delta = workspace ? workspace + plan->delta_offset : 0;
  uint64_t acc = workspace && plan->dq_acc_bytes ? workspace + plan->dq_acc_offset : 0;
  switch (plan->step[step].role) {
  case FA_ROLE_PRE: {
    static const int t[2] = {O, DOUT};
    put_tensor_ptrs(&l, a, t, 2);
    put_ptr(&l, "delta", delta);
    put_sizes(&l, a);
    put_strides(&l, a, t, 2);
    break;
  }
  case FA_ROLE_MAIN:
  case FA_ROLE_KV:
  case FA_ROLE_DV: {
    static const int st[6] = {Q, K, V, DOUT, DK, DV};
    put_tensor_ptrs(&l, a, st, 4);
    put_ptr(&l, "lse", addr(a->lse));
    put_ptr(&l, "delta", delta);
    /* bwd_kv and bwd_dv take dq_acc too, so that the three share one list;
     * null. */
    put_ptr(&l, "dq_acc", plan->step[step].role == FA_ROLE_MAIN ? acc : 0);
    put_tensor_ptrs(&l, a, st + 4, 2);
    put_sizes(&l, a);
    put_strides(&l, a, st, 6);
    break;
  }
  case FA_ROLE_Q: {
    static const int st[5] = {Q, K, V, DOUT, DQ};
    put_tensor_ptrs(&l, a, st, 4);
    put_ptr(&l, "lse", addr(a->lse));
    put_ptr(&l, "delta", delta);
    put_tensor_ptrs(&l, a, st + 4, 1);
    put_sizes(&l, a);
    put_strides(&l, a, st, 5);
    break;
  }
  case FA_ROLE_POST: {
    static const int t[1] = {DQ};
    put_ptr(&l, "dq_acc", acc);
    put_tensor_ptrs(&l, a, t, 1);
    put_sizes(&l, a);
    put_strides(&l, a, t, 1);
    break;
  }
  default: return FA_ERR_INVALID_ARGUMENT;
  }
  /* After the kind's own, before dropout's and the inputs' (docs/abi.md). */
  if (plan->step[step].varlen) fa_put_varlen_(&l, a->varlen, &a->q, &a->k);
  if (plan->step[step].dropout)
    fa_put_dropout_(&l, a->dropout_p, a->seed, a->offset, plan->step[step].dropout_torch);
  fa_put_inputs_(&l, plan->inputs, plan->ninputs, a->inputs, a->num_inputs);
  if (plan->step[step].block_list) fa_put_block_lists_(&l, &plan->step[step].lists);
  /* last: the tensor maps (dq_acc's, a staged input's), which launch_step
   * encodes, value = the map's index */
  const fa_backward_step *ps = &plan->step[step];
  for (int t = 0; t < ps->ntmaps; t++)
    fa_put_(&l, FA_PARAM_TMAP, fa_tmap_param_name_(plan->inputs, plan->ninputs, &ps->tmaps[t]), t);
  *count = l.n;
  return FA_OK;
}

/* ---- launch ---------------------------------------------------------------- */

/* The parameters of step i as the driver takes them: a pointer to each
 * value, of the ABI's width. */
static fa_status launch_step(fa_module *m, const fa_backward_schedule *plan, int i,
                             const fa_backward_args *a, uint64_t ws) {
  fa_param p[FA_BACKWARD_MAX_PARAMS];
  fa_param_values v;
  int n = 0;
  fa_status st = fa_backward_params(plan, i, a, ws, p, &n);
  if (st != FA_OK) return st;
  fa_param_values_(p, n, &v);
  const fa_backward_step *s = &plan->step[i];
  for (int t = 0; t < s->ntmaps; t++)
    if (s->tmaps[t].tensor == 'a' &&
        (st = fa_encode_dq_acc_map_(m, s->kernel, s->tmaps[t].rows,
                                    fa_launch_sizes_(a->varlen, &a->q, &a->k),
                                    ws + plan->dq_acc_offset, v.map[t])) != FA_OK)
      return st;
  int nk = 0;
  const fa_kernel_info *kernels = fa_module_kernels_(m, &nk);
  if ((st = fa_encode_tmaps_(m, &kernels[s->kernel], &a->q, &a->k, &a->v, a->inputs,
                             a->num_inputs, &v)) != FA_OK)
    return st;
  return fa_module_launch_kernel_(m, s->kernel, s->grid, s->block, s->smem, a->stream, v.ptr);
}

/* The lists the plan's kernels visit, built into the module's scratch (each
 * classifier once, before the first launch) and set in the plan's steps. */
static fa_status build_lists(fa_module *mod, const fa_kernel_info *kernels,
                             const fa_backward_args *a, fa_backward_schedule *plan) {
  const char *names[FA_BACKWARD_MAX_STEPS];
  int step[FA_BACKWARD_MAX_STEPS], n = 0;
  for (int i = 0; i < plan->nsteps; i++)
    if (plan->step[i].op == FA_BACKWARD_LAUNCH && plan->step[i].block_list) {
      step[n] = i;
      names[n++] = kernels[plan->step[i].lists.kernel].kernel;
    }
  if (n == 0) return FA_OK;
  fa_sizes sz = fa_launch_sizes_(a->varlen, &a->q, &a->k);
  fa_blocks_args ba = {sz.batch, sz.seqlen_q, sz.seqlen_k, a->inputs, a->num_inputs, a->stream};
  fa_block_lists lists[FA_BACKWARD_MAX_STEPS];
  fa_status st = fa_blocks_build_(mod, names, n, &ba, lists);
  for (int i = 0; i < n && st == FA_OK; i++) plan->step[step[i]].lists = lists[i];
  return st;
}

fa_status fa_backward(fa_module *mod, const fa_backward_args *args) {
  if (!mod) return FA_ERR_NULL_POINTER;
  size_t msglen;
  char *msg = fa_module_msg_(mod, &msglen);
  int n = 0;
  const fa_kernel_info *kernels = fa_module_kernels_(mod, &n);
  fa_backward_schedule plan;
  fa_status st = fa_backward_plan(kernels, n, args, &plan, msg, msglen);
  if (st == FA_OK) st = fa_blocks_of_module_(mod, args->blocks);
  if (st != FA_OK || plan.nsteps == 0) return st;
  if ((st = fa_module_enter_(mod))) return st;
  /* plan.nsteps > 0: kernels[0] and its backward kernels agree on the layout */
  st = fa_varlen_check_device_(mod, &kernels[0], args->varlen, &args->q, &args->k, args->stream);
  uint64_t ws = addr(args->workspace);
  if (st == FA_OK && !args->workspace && plan.workspace_bytes)
    st = fa_module_scratch_(mod, plan.workspace_bytes, &ws);
  if (st == FA_OK && !args->blocks) st = build_lists(mod, kernels, args, &plan);
  for (int i = 0; i < plan.nsteps && st == FA_OK; i++) {
    const fa_backward_step *s = &plan.step[i];
    if (s->op == FA_BACKWARD_ZERO)
      st = fa_module_memset_(mod, ws + s->offset, s->bytes, args->stream, "the backward's dq_acc");
    else
      st = launch_step(mod, &plan, i, args, ws);
  }
  fa_module_leave_(mod);
  return st;
}
