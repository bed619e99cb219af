/* rt_test.c - flashc-rt-test: drives the runtime's GPU-free paths for lit.
 *
 *   flashc-rt-test meta FILE [--drop=KEY] [--set=KEY=VALUE] [--add=LINE]
 *       parses the metadata in FILE (after the edits) and prints the fields
 *   flashc-rt-test check FILE [--batch=N] [--sq=N] [--sk=N] [--layout=L]
 *                     [--cu_q=LIST] [--cu_k=LIST] [--params] [--launch] [MOD...]
 *       builds a valid forward launch for the kernel in FILE (contiguous
 *       tensors at fake aligned addresses; layout contig, packed or bhsd),
 *       applies MODs and prints what fa_forward_check says (and the grid;
 *       with --params, fa_forward_params' list, lse at the tensor's address
 *       or the scratch's 0x7700000000, workspace 0x7800000000 when the
 *       kernel has one; with --launch, fa_forward of FILE loaded as a
 *       module through the driver FLASHC_LIBCUDA names: fake_cuda.c prints
 *       what each launch was given). --cu_q=0,3,10 / --cu_k=...: a varlen launch
 *       (rt_varlen: the tensors packed [1, total, heads, d], host copies of
 *       the prefix sums given, device arrays at 0x1c000000000 and
 *       0x1c000100000). MOD is one of
 *       T.dimI=N  T.strideI=N  T.data=null|0xHEX|+N  T.dtype=f16|bf16|f32|i32|N
 *       (T = q, k, v, o; I = 0..3), lse=null|0xHEX|+N, args=null, info=null,
 *       p=X (dropout_p), an edit of the run-time inputs (rt_inputs_mod:
 *       every declared input is bound, tensors contiguous from 0x1a000000000
 *       on, 2^32 apart; batch dims num_seqs in a varlen launch), or of the
 *       varlen launch (rt_varlen_mod)
 *   flashc-rt-test context [DEVICE]     fa_context_create on a device
 *   flashc-rt-test load FILE [DEVICE]   context + fa_module_load_ptx_file
 *   flashc-rt-test load-cubin CUBIN META [DEVICE]   context + fa_module_load_cubin
 *   flashc-rt-test null-handles         every entry point with NULL handles
 *   flashc-rt-test statuses             fa_status_string of every status
 *   flashc-rt-test contiguous D0 D1 D2 D3   fa_tensor_contiguous's strides
 *
 * Prints `status: NAME` and `message: ...`; exits 0 when the status is FA_OK,
 * 1 for any other status (so lit uses `not` on failures), 2 on bad usage.
 * fa_forward_check never dereferences the tensors, so fake addresses are fine.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashc_runtime.h"
#include "rt_util.h"

static int usage(void) {
  fprintf(stderr, "usage: flashc-rt-test meta|check|context|load|null-handles|statuses|contiguous ...\n");
  return 2;
}

static const char *mask_names[] = {"none", "causal", "window", "expr"};

static void print_info(const fa_kernel_info *in) {
  printf("kernel %s\nmode %d\ndtype %s\nhead_dim %d\nv_head_dim %d\nheads %d\nkv_heads %d\n",
         in->kernel, (int)in->mode, fa_dtype_name(in->dtype), in->head_dim, in->v_head_dim,
         in->heads, in->kv_heads);
  printf("mask %s\nscale %g\ntile_q %d\ntile_kv %d\nwarps %d\nstages %d\nthreads %d\n",
         mask_names[in->mask], in->scale, in->tile_q, in->tile_kv, in->warps, in->stages,
         in->threads);
  static const char *const grids[] = {"q_tiles,heads,batch", "1,heads,batch",
                                      "splits,kv_heads,batch", "k_tiles,kv_heads,batch",
                                      "row_tiles,list_heads,batch",
                                      "row_tiles*chunks,list_heads,batch", "persistent"};
  printf("smem_bytes %d\ngrid %s\nworkspace_floats_per_row %d\ntarget %s\npasses %s\n",
         in->smem_bytes, grids[in->grid <= FA_GRID_PERSISTENT ? in->grid : 0], in->workspace_floats_per_row, in->target,
         in->passes);
  printf("layout %s\n", in->varlen ? "varlen" : "padded");
  if (in->mode == FA_MODE_BACKWARD) printf("role %s\nforward %s\n", fa_role_name(in->role),
                                           in->forward);
  rt_print_inputs(in);
  for (int i = 0; i < in->ntmaps; i++) printf("tma %c %d\n", in->tmaps[i].tensor, in->tmaps[i].rows);
}

/* Parses FILE plus edits into *info; prints the failure. */
static int load_meta(const char *path, int argc, char **argv, fa_kernel_info *info) {
  size_t len = 0;
  char *text = rt_load_meta_text(path, argc, argv, &len);
  if (!text) return 2;
  char err[512];
  fa_status st = fa_meta_parse(text, len, info, err, sizeof err);
  free(text);
  if (st != FA_OK) return rt_report(st, err);
  return 0;
}

static int cmd_meta(int argc, char **argv) {
  if (argc < 1) return usage();
  fa_kernel_info info;
  int rc = load_meta(argv[0], argc - 1, argv + 1, &info);
  if (rc) return rc;
  rt_report(FA_OK, NULL);
  print_info(&info);
  return 0;
}

/* ---- check ------------------------------------------------------------- */

/* A valid launch: separate contiguous tensors, or q/k/v as slices of one
 * packed [b, s, heads + 2 kv_heads, d] tensor, or [b, h, s, d] memory. */
static void base_args(const fa_kernel_info *in, const char *layout, int64_t b, int64_t sq,
                      int64_t sk, fa_forward_args *a) {
  fa_dtype dt = in->dtype;
  char *base = (char *)(uintptr_t)(UINT64_C(1) << 40);
  int64_t gap = INT64_C(1) << 36;
  memset(a, 0, sizeof *a);
  fa_tensor_contiguous(&a->q, base, dt, b, sq, in->heads, in->head_dim);
  fa_tensor_contiguous(&a->k, base + gap, dt, b, sk, in->kv_heads, in->head_dim);
  fa_tensor_contiguous(&a->v, base + 2 * gap, dt, b, sk, in->kv_heads, in->v_head_dim);
  fa_tensor_contiguous(&a->o, base + 3 * gap, dt, b, sq, in->heads, in->v_head_dim);
  a->lse = (float *)(base + 4 * gap);
  if (strcmp(layout, "packed") == 0) {
    int64_t d = in->head_dim, hs = in->heads + 2 * in->kv_heads;
    fa_tensor *t[3] = {&a->q, &a->k, &a->v};
    int64_t head0[3] = {0, in->heads, in->heads + in->kv_heads};
    for (int i = 0; i < 3; i++) {
      t[i]->data = base + head0[i] * d * 2;
      t[i]->stride[2] = d;
      t[i]->stride[1] = hs * d;
      t[i]->stride[0] = sq * hs * d;
    }
  } else if (strcmp(layout, "bhsd") == 0) {
    fa_tensor *t[4] = {&a->q, &a->k, &a->v, &a->o};
    for (int i = 0; i < 4; i++) {
      t[i]->stride[1] = t[i]->dim[3];
      t[i]->stride[2] = t[i]->dim[1] * t[i]->dim[3];
      t[i]->stride[0] = t[i]->dim[2] * t[i]->dim[1] * t[i]->dim[3];
    }
  }
}

/* Applies one MOD; returns 0 when it is not understood. */
static int apply_mod(fa_forward_args *a, rt_inputs *in, rt_varlen *vl, const char *mod,
                     int *null_args, int *null_info) {
  const char *eq = strchr(mod, '=');
  if (!eq) return 0;
  const char *val = eq + 1;
  if (strncmp(mod, "args=", 5) == 0) return *null_args = 1;
  if (strncmp(mod, "info=", 5) == 0) return *null_info = 1;
  if (strncmp(mod, "lse=", 4) == 0) {
    a->lse = rt_ptr_value(val, a->lse);
    return 1;
  }
  if (strncmp(mod, "p=", 2) == 0) /* dropout_p (docs/dropout.md) */
    return a->dropout_p = strtod(val, NULL), 1;
  fa_tensor *ts[4] = {&a->q, &a->k, &a->v, &a->o};
  static const char *const names[4] = {"q", "k", "v", "o"};
  return rt_tensor_mod(ts, names, 4, mod) || rt_inputs_mod(in, mod) || rt_varlen_mod(vl, mod);
}

/* fa_forward_params of an accepted launch: lse the caller's or the
 * scratch's, the workspace where the kernel has one (fake addresses). */
static void print_params(const fa_kernel_info *info, const fa_forward_args *a) {
  fa_param p[FA_BACKWARD_MAX_PARAMS];
  int n = 0;
  uint64_t lse = a->lse ? (uint64_t)(uintptr_t)a->lse : UINT64_C(0x7700000000);
  uint64_t ws = info->workspace_floats_per_row ? UINT64_C(0x7800000000) : 0;
  fa_status st = fa_forward_params(info, a, lse, ws, p, &n);
  rt_print_params("params:", st, p, n);
}

/* --launch: fa_forward of FILE's module with a (rt_launch_module). */
static fa_status run_forward(fa_module *mod, const void *a) { return fa_forward(mod, a); }

static int cmd_check(int argc, char **argv) {
  if (argc < 1) return usage();
  fa_kernel_info info;
  int rc = load_meta(argv[0], 0, NULL, &info);
  if (rc) return rc;
  int64_t b = 2, sq = 128, sk = 256;
  const char *layout = "contig";
  static rt_varlen vl;
  int i = 1, params = 0, launch = 0;
  for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
    if (strncmp(argv[i], "--batch=", 8) == 0) b = rt_num(argv[i] + 8, "--batch");
    else if (strncmp(argv[i], "--sq=", 5) == 0) sq = rt_num(argv[i] + 5, "--sq");
    else if (strncmp(argv[i], "--sk=", 5) == 0) sk = rt_num(argv[i] + 5, "--sk");
    else if (strncmp(argv[i], "--layout=", 9) == 0) layout = argv[i] + 9;
    else if (strcmp(argv[i], "--params") == 0) params = 1;
    else if (strcmp(argv[i], "--launch") == 0) launch = 1;
    else if (!rt_varlen_option(&vl, argv[i])) return usage();
  }
  int64_t batch = b; /* the inputs' batch: num_seqs in a varlen launch */
  if (rt_varlen_on(&vl)) {
    long long tq, tk;
    rt_varlen_finish(&vl, UINT64_C(0x1c000000000), &tq, &tk);
    b = 1, sq = tq, sk = tk, batch = vl.v.num_seqs;
  }
  fa_forward_args a;
  base_args(&info, layout, b, sq, sk, &a);
  static rt_inputs in;
  rt_inputs_bind(&in, &info, batch, sq, sk, UINT64_C(0x1a000000000));
  int null_args = 0, null_info = 0;
  for (; i < argc; i++)
    if (!apply_mod(&a, &in, &vl, argv[i], &null_args, &null_info)) {
      fprintf(stderr, "flashc-rt-test: bad modification '%s'\n", argv[i]);
      return 2;
    }
  rt_inputs_args(&in, &a.inputs, &a.num_inputs);
  a.varlen = rt_varlen_args(&vl);
  char msg[512];
  fa_status st = fa_forward_check(null_info ? NULL : &info, null_args ? NULL : &a, msg,
                                  sizeof msg);
  unsigned grid[3];
  int64_t gb = a.varlen ? a.varlen->num_seqs : a.q.dim[0];
  int64_t gq = a.varlen ? a.varlen->max_seqlen_q : a.q.dim[1];
  if (st == FA_OK && fa_forward_grid(&info, gb, gq, grid) == FA_OK)
    printf("grid: %u %u %u block %d smem %d\n", grid[0], grid[1], grid[2], info.threads,
           info.smem_bytes);
  if (st == FA_OK && params) print_params(&info, &a);
  if (st == FA_OK && launch) return rt_launch_module(argv[0], run_forward, &a);
  return rt_report(st, msg);
}

/* ---- handles ----------------------------------------------------------- */

static int cmd_context(int argc, char **argv) {
  int dev = argc > 0 ? (int)rt_num(argv[0], "device") : 0;
  char err[1024];
  fa_context *ctx = (fa_context *)(uintptr_t)1; /* must be overwritten */
  fa_status st = fa_context_create(dev, &ctx, err, sizeof err);
  if (st != FA_OK && ctx != NULL) {
    printf("BUG: out handle not NULL after a failure\n");
    return 3;
  }
  if (st == FA_OK) printf("device: %d\n", fa_context_device(ctx));
  fa_context_destroy(ctx);
  return rt_report(st, err);
}

static int cmd_load(int argc, char **argv) {
  if (argc < 1) return usage();
  int dev = argc > 1 ? (int)rt_num(argv[1], "device") : 0;
  char err[1024];
  fa_context *ctx = NULL;
  fa_status st = fa_context_create(dev, &ctx, err, sizeof err);
  if (st != FA_OK) return rt_report(st, err);
  fa_module *mod = NULL;
  st = fa_module_load_ptx_file(ctx, argv[0], &mod);
  int rc = rt_report(st, fa_context_errmsg(ctx));
  if (st == FA_OK) print_info(fa_module_info(mod));
  for (int i = 0; i < fa_module_kernel_count(mod); i++) /* the backward's too */
    printf("kernel[%d] %s %s\n", i, fa_module_kernel_info(mod, i)->kernel,
           fa_role_name(fa_module_kernel_info(mod, i)->role));
  fa_module_destroy(mod);
  fa_context_destroy(ctx);
  return rc;
}

static int cmd_load_cubin(int argc, char **argv) {
  if (argc < 2) return usage();
  size_t clen = 0, mlen = 0;
  char *cubin = rt_read_file(argv[0], &clen), *meta = rt_read_file(argv[1], &mlen);
  if (!cubin || !meta) {
    fprintf(stderr, "flashc-rt-test: cannot read %s or %s\n", argv[0], argv[1]);
    return 2;
  }
  char err[1024];
  fa_context *ctx = NULL;
  fa_status st = fa_context_create(argc > 2 ? (int)rt_num(argv[2], "device") : 0, &ctx, err,
                                   sizeof err);
  int rc = rt_report(st, err);
  if (st == FA_OK) {
    fa_module *mod = NULL;
    st = fa_module_load_cubin(ctx, cubin, clen, meta, mlen, &mod);
    rc = rt_report(st, fa_context_errmsg(ctx));
    if (st == FA_OK) printf("kernel %s\n", fa_module_info(mod)->kernel);
    fa_module_destroy(mod);
  }
  fa_context_destroy(ctx);
  free(cubin);
  free(meta);
  return rc;
}

static int cmd_null_handles(void) {
  fa_context_destroy(NULL);
  fa_module_destroy(NULL);
  printf("destroy(NULL): ok\n");
  printf("fa_context_errmsg(NULL): %s\n", fa_context_errmsg(NULL));
  printf("fa_module_errmsg(NULL): %s\n", fa_module_errmsg(NULL));
  printf("fa_module_info(NULL): %s\n", fa_module_info(NULL) ? "non-NULL" : "NULL");
  printf("fa_module_jit_log(NULL): %s\n", fa_module_jit_log(NULL) ? "non-NULL" : "NULL");
  printf("fa_context_device(NULL): %d\n", fa_context_device(NULL));
  fa_forward_args a;
  memset(&a, 0, sizeof a);
  fa_module *m = (fa_module *)(uintptr_t)1;
  printf("fa_forward(NULL): %s\n", rt_status_name(fa_forward(NULL, &a)));
  printf("fa_module_load_ptx(NULL ctx): %s\n",
         rt_status_name(fa_module_load_ptx(NULL, "x", 1, &m)));
  printf("  out set to NULL: %s\n", m == NULL ? "yes" : "no");
  printf("fa_module_load_cubin(NULL ctx): %s\n",
         rt_status_name(fa_module_load_cubin(NULL, "x", 1, "", 0, &m)));
  printf("fa_module_load_ptx_file(NULL ctx): %s\n",
         rt_status_name(fa_module_load_ptx_file(NULL, "x.ptx", &m)));
  printf("fa_context_create(out NULL): %s\n",
         rt_status_name(fa_context_create(0, NULL, NULL, 0)));
  char err[128];
  printf("fa_context_create(-1): %s\n", rt_status_name(fa_context_create(-1, NULL, err, 0)));
  fa_context *c = NULL;
  fa_status st = fa_context_create(-1, &c, err, sizeof err);
  printf("fa_context_create(-1, &c): %s: %s\n", rt_status_name(st), err);
  fa_kernel_info info;
  printf("fa_meta_parse(NULL text): %s\n", rt_status_name(fa_meta_parse(NULL, 5, &info, NULL, 0)));
  printf("fa_meta_parse(NULL out): %s\n", rt_status_name(fa_meta_parse("x", 1, NULL, NULL, 0)));
  printf("fa_meta_parse(empty): %s\n", rt_status_name(fa_meta_parse("", 0, &info, err, 4)));
  printf("fa_forward_check(NULL, NULL): %s\n",
         rt_status_name(fa_forward_check(NULL, NULL, NULL, 0)));
  unsigned g[3];
  printf("fa_forward_grid(NULL): %s\n", rt_status_name(fa_forward_grid(NULL, 1, 1, g)));
  printf("fa_tensor_contiguous(NULL): %s\n",
         fa_tensor_contiguous(NULL, NULL, FA_DTYPE_BF16, 1, 1, 1, 1) ? "non-NULL" : "NULL");
  return 0;
}

/* fa_tensor_contiguous of the four dims: the strides, and whether it said
 * they overflow (NULL). */
static int cmd_contiguous(int argc, char **argv) {
  if (argc != 4) return usage();
  int64_t d[4];
  for (int i = 0; i < 4; i++) d[i] = strtoll(argv[i], NULL, 0);
  fa_tensor t;
  fa_tensor *r = fa_tensor_contiguous(&t, NULL, FA_DTYPE_BF16, d[0], d[1], d[2], d[3]);
  printf("returned: %s\n", r ? "t" : "NULL");
  printf("strides: %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 "\n", t.stride[0], t.stride[1],
         t.stride[2], t.stride[3]);
  return r ? 0 : 1;
}

static int cmd_statuses(void) {
  for (int s = 0; s <= FA_STATUS_COUNT_; s++) printf("%d %s\n", s, fa_status_string(s));
  printf("-1 %s\n", fa_status_string((fa_status)-1));
  printf("dtypes %s %s %s %s %s\n", fa_dtype_name(FA_DTYPE_F16), fa_dtype_name(FA_DTYPE_BF16),
         fa_dtype_name(FA_DTYPE_F32), fa_dtype_name(FA_DTYPE_I32), fa_dtype_name((fa_dtype)9));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage();
  const char *cmd = argv[1];
  if (strcmp(cmd, "meta") == 0) return cmd_meta(argc - 2, argv + 2);
  if (strcmp(cmd, "check") == 0) return cmd_check(argc - 2, argv + 2);
  if (strcmp(cmd, "context") == 0) return cmd_context(argc - 2, argv + 2);
  if (strcmp(cmd, "load") == 0) return cmd_load(argc - 2, argv + 2);
  if (strcmp(cmd, "load-cubin") == 0) return cmd_load_cubin(argc - 2, argv + 2);
  if (strcmp(cmd, "null-handles") == 0) return cmd_null_handles();
  if (strcmp(cmd, "statuses") == 0) return cmd_statuses();
  if (strcmp(cmd, "contiguous") == 0) return cmd_contiguous(argc - 2, argv + 2);
  return usage();
}
