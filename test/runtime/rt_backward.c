/* rt_backward.c - flashc-rt-backward: drives the runtime's GPU-free backward
 * paths for lit (docs/backward.md, docs/runtime.md).
 *
 *   flashc-rt-backward meta FILE [--drop=KEY] [--set=KEY=VALUE] [--add=LINE]
 *       parses every kernel's block (fa_meta_parse_module) and prints one
 *       line a kernel: index, name, mode, role, forward, grid, tile_q,
 *       tile_kv, threads, smem_bytes (and dropout P, dropout_of NAME, the
 *       run-time inputs' names, the requires, layout varlen, a classifier's blocks
 *       ORIENT N and a visiting kernel's block_list NAME (ORIENT N) where given)
 *   flashc-rt-backward check FILE [--batch=N] [--sq=N] [--sk=N] [--info=I] [--params]
 *                      [--cu_q=LIST] [--cu_k=LIST] [MOD...]
 *       builds a valid backward launch for FILE's kernels (contiguous
 *       tensors at fake aligned device addresses 2^36 apart: q, k, v, o,
 *       lse, dout, dq, dk, dv, then a caller workspace of exactly the size
 *       it needs), applies MODs, prints what fa_backward_check says of it
 *       (against the info of kernel --info=I, default 0) and, when it
 *       passes, what fa_backward_plan says: the workspace layout, the steps
 *       and, with --params, each launch's parameter list
 *       (fa_backward_params; the module's scratch is shown at 0x7700000000
 *       when ws=null); with --launch, then fa_backward itself on FILE loaded
 *       as a module, through the driver FLASHC_LIBCUDA names
 *       (test/runtime/fake_cuda.c prints each launch and memset it is
 *       given). Options and MODs may come in any order. MOD is one of
 *         T.dimI=N  T.strideI=N  T.data=null|0xHEX|+N  T.dtype=f16|bf16|f32|N
 *             (T = q, k, v, o, dout, dq, dk, dv; I = 0..3)
 *         lse=null|0xHEX|+N  ws=null|0xHEX|+N  ws_bytes=N  mode=N (the launch's
 *             fa_backward_mode; FA_BACKWARD_ATOMIC (2) unless given: its plan has
 *             the most steps)
 *         nkernels=N (plan with the first N kernels only)  args=null  info=null
 *         p=X seed=N offset=N (dropout, docs/dropout.md)
 *         an edit of the run-time inputs (rt_inputs_mod: every input kernel 0
 *             declares is bound, tensors contiguous from 0x1b000000000 on,
 *             2^32 apart; batch dims num_seqs in a varlen launch)
 *         an edit of a varlen launch (rt_varlen_mod)
 *       --cu_q=0,3,10 / --cu_k=...: a varlen launch (rt_varlen: every tensor
 *       packed [1, total, heads, d], host copies of the prefix sums given,
 *       device arrays at 0x1c000000000 and 0x1c000100000; the workspace
 *       sized for num_seqs x max_seqlen_q)
 *   flashc-rt-backward size FILE BATCH SEQLEN_Q SEQLEN_K MODE [INFO_INDEX]
 *       prints fa_backward_workspace_size
 *   flashc-rt-backward api
 *       every new entry point with NULL and out-of-range arguments (and
 *       fa_forward_params')
 *   flashc-rt-backward mask FILE P SEED OFFSET BATCH SEQLEN_Q SEQLEN_K
 *       fa_dropout_mask with the first kernel's heads: the status, how many
 *       of the elements are kept, and the first row's first 64 decisions
 *
 * Prints `status: NAME` and `message: ...`; exits 0 for FA_OK, 1 for any
 * other status, 2 on bad usage. Nothing is dereferenced on the device side.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashc_runtime.h"
#include "rt_util.h"

#define SCRATCH 0x7700000000ull /* where the plan shows the module's scratch */

static int usage(void) {
  fprintf(stderr, "usage: flashc-rt-backward meta|check|size|api|mask FILE ...\n");
  return 2;
}

static const char *const grids[] = {"q_tiles,heads,batch", "1,heads,batch",
                                    "splits,kv_heads,batch", "k_tiles,kv_heads,batch",
                                    "row_tiles,list_heads,batch",
                                    "row_tiles*chunks,list_heads,batch"};
static const char *const modes[] = {"forward", "backward", "decode", "blocks"};
static const char *const orients[] = {"none", "rows", "cols"};

/* Every kernel of FILE (after the edits of argv) into k[], *n. */
static int load(const char *path, int argc, char **argv, fa_kernel_info *k, int *n) {
  size_t len = 0;
  char *text = rt_load_meta_text(path, argc, argv, &len);
  if (!text) return 2;
  char err[512];
  fa_status st = fa_meta_parse_module(text, len, k, n, err, sizeof err);
  free(text);
  return st == FA_OK ? 0 : rt_report(st, err);
}

static int cmd_meta(int argc, char **argv) {
  fa_kernel_info k[FA_MODULE_MAX_KERNELS];
  int n = 0, rc = argc < 1 ? usage() : load(argv[0], argc - 1, argv + 1, k, &n);
  if (rc) return rc;
  rt_report(FA_OK, NULL);
  printf("kernels %d\n", n);
  for (int i = 0; i < n; i++) {
    printf("%d %s mode %s role %s forward %s grid %s tile_q %d tile_kv %d threads %d smem %d", i,
           k[i].kernel, modes[k[i].mode % 4], fa_role_name(k[i].role),
           k[i].forward[0] ? k[i].forward : "-", grids[k[i].grid % 6], k[i].tile_q, k[i].tile_kv,
           k[i].threads, k[i].smem_bytes);
    if (k[i].dropout > 0) printf(" dropout %g", k[i].dropout);
    if (k[i].dropout_of[0]) printf(" dropout_of %s", k[i].dropout_of);
    if (k[i].ninputs) {
      char names[FA_MAX_INPUTS * FA_INPUT_NAME_MAX];
      rt_input_names(&k[i], names, sizeof names);
      printf(" inputs %s", names);
    }
    if (k[i].require_q_le_k) printf(" require seqlen_q<=seqlen_k");
    if (k[i].require_k_le_q) printf(" require seqlen_k<=seqlen_q");
    if (k[i].varlen) printf(" layout varlen");
    if (k[i].mode == FA_MODE_BLOCKS)
      printf(" blocks %s %d", orients[k[i].blocks % 3], k[i].list_heads);
    if (k[i].chunk) printf(" chunk %d", k[i].chunk);
    if (k[i].classes[0]) printf(" classes %s", k[i].classes);
    if (k[i].block_list[0])
      printf(" block_list %s (%s %d)", k[i].block_list, orients[k[i].blocks % 3],
             k[i].list_heads);
    printf("\n");
  }
  return 0;
}

/* ---- check ------------------------------------------------------------- */

typedef struct Launch {
  fa_backward_args a;
  rt_inputs in;
  rt_varlen vl;
  int null_args, null_info, nkernels, info;
} Launch;

enum { NT = 8 };
static const char *const tnames[NT] = {"q", "k", "v", "o", "dout", "dq", "dk", "dv"};

static void tensors(fa_backward_args *a, fa_tensor *t[NT]) {
  fa_tensor *all[NT] = {&a->q, &a->k, &a->v, &a->o, &a->dout, &a->dq, &a->dk, &a->dv};
  memcpy(t, all, sizeof all);
}

/* The valid launch described at the top (l->vl's options taken already). */
static void base_launch(const fa_kernel_info *in, int64_t b, int64_t sq, int64_t sk, Launch *l) {
  char *base = (char *)(uintptr_t)(UINT64_C(1) << 40);
  int64_t gap = INT64_C(1) << 36;
  rt_varlen vl = l->vl;
  memset(l, 0, sizeof *l);
  l->vl = vl;
  /* the kernels' sizes: a varlen launch's are num_seqs and its longest */
  int64_t batch = b, wq = sq, wk = sk;
  if (rt_varlen_on(&l->vl)) {
    long long tq, tk;
    rt_varlen_finish(&l->vl, UINT64_C(0x1c000000000), &tq, &tk);
    b = 1, sq = tq, sk = tk;
    batch = l->vl.v.num_seqs, wq = l->vl.v.max_seqlen_q, wk = l->vl.v.max_seqlen_k;
  }
  fa_backward_args *a = &l->a;
  fa_tensor *t[NT];
  tensors(a, t);
  /* q, k, v, o, dout, dq, dk, dv: Q-side or K/V-side, head_dim or v_head_dim */
  static const int kv[NT] = {0, 1, 1, 0, 0, 0, 1, 1}, vd[NT] = {0, 0, 1, 1, 1, 0, 0, 1};
  static const int slot[NT] = {0, 1, 2, 3, 5, 6, 7, 8}; /* lse is slot 4 */
  for (int i = 0; i < NT; i++)
    fa_tensor_contiguous(t[i], base + slot[i] * gap, in->dtype, b, kv[i] ? sk : sq,
                         kv[i] ? in->kv_heads : in->heads, vd[i] ? in->v_head_dim : in->head_dim);
  a->lse = (const float *)(base + 4 * gap);
  a->workspace = base + 9 * gap;
  a->mode = FA_BACKWARD_ATOMIC;
  fa_backward_workspace_size(in, batch, wq, wk, a->mode, &a->workspace_bytes);
  rt_inputs_bind(&l->in, in, batch, sq, sk, (uint64_t)(uintptr_t)base + 11 * (uint64_t)gap);
}

static int apply_mod(Launch *l, const char *mod) {
  fa_backward_args *a = &l->a;
  const char *eq = strchr(mod, '=');
  if (!eq) return 0;
  const char *val = eq + 1;
  size_t kl = (size_t)(eq - mod);
#define IS(key) (kl == strlen(key) && strncmp(mod, key, kl) == 0)
  if (IS("args")) return l->null_args = 1;
  if (IS("info")) return l->null_info = 1;
  if (IS("lse")) return a->lse = rt_ptr_value(val, a->lse), 1;
  if (IS("ws")) { /* ws=null: the module's scratch (workspace_bytes 0 too) */
    a->workspace = rt_ptr_value(val, a->workspace);
    if (!a->workspace) a->workspace_bytes = 0;
    return 1;
  }
  if (IS("ws_bytes")) return a->workspace_bytes = (size_t)rt_num(val, mod), 1;
  if (IS("mode")) return a->mode = (int)rt_num(val, mod), 1;
  if (IS("nkernels")) return l->nkernels = (int)rt_num(val, mod), 1;
  if (IS("p")) return a->dropout_p = strtod(val, NULL), 1;
  if (IS("seed")) return a->seed = strtoull(val, NULL, 0), 1;
  if (IS("offset")) return a->offset = strtoull(val, NULL, 0), 1;
#undef IS
  fa_tensor *t[NT];
  tensors(a, t);
  return rt_tensor_mod(t, tnames, NT, mod) || rt_inputs_mod(&l->in, mod) ||
         rt_varlen_mod(&l->vl, mod);
}

static void print_params(const fa_backward_schedule *p, int step, const fa_backward_args *a,
                         uint64_t ws) {
  fa_param params[FA_BACKWARD_MAX_PARAMS];
  int n = 0;
  fa_status st = fa_backward_params(p, step, a, ws, params, &n);
  char label[32];
  snprintf(label, sizeof label, "params %d:", step);
  rt_print_params(label, st, params, n);
}

static void print_plan(const fa_kernel_info *k, const fa_backward_schedule *p,
                       const fa_backward_args *a, int params) {
  printf("workspace %zu: delta +%zu %zu, dq_acc +%zu %zu (%s)\n", p->workspace_bytes,
         p->delta_offset, p->delta_bytes, p->dq_acc_offset, p->dq_acc_bytes,
         a->workspace ? "caller's" : "module's");
  printf("steps %d\n", p->nsteps);
  uint64_t ws = a->workspace ? (uint64_t)(uintptr_t)a->workspace : SCRATCH;
  for (int i = 0; i < p->nsteps; i++) {
    const fa_backward_step *s = &p->step[i];
    if (s->op == FA_BACKWARD_ZERO) {
      printf("step %d: zero workspace +%zu %zu\n", i, s->offset, s->bytes);
      continue;
    }
    printf("step %d: %s %s grid %u %u %u block %u smem %u\n", i, fa_role_name(s->role),
           k[s->kernel].kernel, s->grid[0], s->grid[1], s->grid[2], s->block, s->smem);
    if (params) print_params(p, i, a, ws);
  }
}

/* --launch: fa_backward of FILE's module with a (rt_launch_module). */
static fa_status run_backward(fa_module *mod, const void *a) { return fa_backward(mod, a); }

static int cmd_check(int argc, char **argv) {
  if (argc < 1) return usage();
  fa_kernel_info k[FA_MODULE_MAX_KERNELS];
  int n = 0, rc = load(argv[0], 0, NULL, k, &n);
  if (rc) return rc;
  int64_t b = 2, sq = 128, sk = 256;
  int params = 0, info = 0, launch = 0;
  static Launch l;
  for (int i = 1; i < argc; i++) { /* options first, wherever they are */
    if (strncmp(argv[i], "--", 2) != 0) continue;
    if (strncmp(argv[i], "--batch=", 8) == 0) b = rt_num(argv[i] + 8, "--batch");
    else if (strncmp(argv[i], "--sq=", 5) == 0) sq = rt_num(argv[i] + 5, "--sq");
    else if (strncmp(argv[i], "--sk=", 5) == 0) sk = rt_num(argv[i] + 5, "--sk");
    else if (strncmp(argv[i], "--info=", 7) == 0) info = (int)rt_num(argv[i] + 7, "--info");
    else if (strcmp(argv[i], "--params") == 0) params = 1;
    else if (strcmp(argv[i], "--launch") == 0) launch = 1;
    else if (!rt_varlen_option(&l.vl, argv[i])) return usage();
  }
  if (info < 0 || info >= n) return usage();
  base_launch(&k[0], b, sq, sk, &l);
  l.nkernels = n;
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], "--", 2) != 0 && !apply_mod(&l, argv[i])) {
      fprintf(stderr, "flashc-rt-backward: bad modification '%s'\n", argv[i]);
      return 2;
    }
  rt_inputs_args(&l.in, &l.a.inputs, &l.a.num_inputs);
  l.a.varlen = rt_varlen_args(&l.vl);
  char msg[512];
  const fa_backward_args *a = l.null_args ? NULL : &l.a;
  fa_status st = fa_backward_check(l.null_info ? NULL : &k[info], a, msg, sizeof msg);
  if (st != FA_OK) return rt_report(st, msg);
  fa_backward_schedule plan;
  st = fa_backward_plan(k, l.nkernels, a, &plan, msg, sizeof msg);
  rc = rt_report(st, msg);
  if (st == FA_OK) print_plan(k, &plan, a, params);
  if (st == FA_OK && launch) rc = rt_launch_module(argv[0], run_backward, a);
  return rc;
}

/* ---- size and api -------------------------------------------------------- */

static int cmd_size(int argc, char **argv) {
  if (argc < 5) return usage();
  fa_kernel_info k[FA_MODULE_MAX_KERNELS];
  int n = 0, rc = load(argv[0], 0, NULL, k, &n);
  if (rc) return rc;
  int i = argc > 5 ? (int)rt_num(argv[5], "info index") : 0;
  if (i < 0 || i >= n) return usage();
  size_t bytes = 1;
  fa_status st = fa_backward_workspace_size(&k[i], rt_num(argv[1], "batch"),
                                            rt_num(argv[2], "seqlen_q"),
                                            rt_num(argv[3], "seqlen_k"),
                                            (int)rt_num(argv[4], "mode"), &bytes);
  rc = rt_report(st, NULL);
  printf("bytes %zu\n", bytes);
  return rc;
}

static int cmd_api(void) {
  fa_backward_args a;
  memset(&a, 0, sizeof a);
  fa_kernel_info info;
  memset(&info, 0, sizeof info);
  fa_backward_schedule plan;
  fa_param params[FA_BACKWARD_MAX_PARAMS];
  int n = 7;
  size_t bytes = 7;
  char msg[256];
  printf("fa_backward(NULL): %s\n", rt_status_name(fa_backward(NULL, &a)));
  printf("fa_backward_check(NULL, NULL): %s\n",
         rt_status_name(fa_backward_check(NULL, NULL, NULL, 0)));
  fa_status st = fa_backward_check(&info, NULL, msg, sizeof msg);
  printf("fa_backward_check(info, NULL): %s: %s\n", rt_status_name(st), msg);
  st = fa_backward_check(&info, &a, msg, sizeof msg);
  printf("fa_backward_check(zero info): %s: %s\n", rt_status_name(st), msg);
  printf("fa_backward_workspace_size(NULL): %s\n",
         rt_status_name(fa_backward_workspace_size(NULL, 1, 1, 1, 0, &bytes)));
  printf("  bytes set to 0: %s\n", bytes == 0 ? "yes" : "no");
  printf("fa_backward_workspace_size(bytes NULL): %s\n",
         rt_status_name(fa_backward_workspace_size(&info, 1, 1, 1, 0, NULL)));
  st = fa_backward_plan(NULL, 1, &a, &plan, msg, sizeof msg);
  printf("fa_backward_plan(NULL kernels): %s: %s\n", rt_status_name(st), msg);
  st = fa_backward_plan(&info, 1, &a, NULL, msg, sizeof msg);
  printf("fa_backward_plan(NULL plan): %s: %s\n", rt_status_name(st), msg);
  st = fa_backward_plan(&info, 0, &a, &plan, msg, sizeof msg);
  printf("fa_backward_plan(0 kernels): %s: %s\n", rt_status_name(st), msg);
  st = fa_backward_plan(&info, FA_MODULE_MAX_KERNELS + 1, &a, &plan, msg, sizeof msg);
  printf("fa_backward_plan(17 kernels): %s: %s\n", rt_status_name(st), msg);
  memset(&plan, 0, sizeof plan);
  printf("fa_backward_params(NULL): %s\n",
         rt_status_name(fa_backward_params(NULL, 0, &a, 0, params, &n)));
  printf("  count set to 0: %s\n", n == 0 ? "yes" : "no");
  printf("fa_backward_params(no step): %s\n",
         rt_status_name(fa_backward_params(&plan, 0, &a, 0, params, &n)));
  plan.nsteps = 1;
  plan.step[0].op = FA_BACKWARD_ZERO;
  printf("fa_backward_params(a zero step): %s\n",
         rt_status_name(fa_backward_params(&plan, 0, &a, 0, params, &n)));
  plan.step[0].op = FA_BACKWARD_LAUNCH;
  plan.step[0].role = FA_ROLE_NONE;
  printf("fa_backward_params(role none): %s\n",
         rt_status_name(fa_backward_params(&plan, 0, &a, 0, params, &n)));
  printf("fa_backward_params(step -1): %s\n",
         rt_status_name(fa_backward_params(&plan, -1, &a, 0, params, &n)));
  /* a hand-built plan's run-time inputs: at most FA_MAX_INPUTS groups of at
   * most 4 strides, names never read past their arrays */
  plan.step[0].role = FA_ROLE_POST;
  plan.ninputs = 99;
  memset(plan.inputs, 'x', sizeof plan.inputs);
  fa_status pst = fa_backward_params(&plan, 0, &a, 0, params, &n);
  printf("fa_backward_params(garbage inputs): %s, %d params\n", rt_status_name(pst), n);
  printf("fa_module_kernel_count(NULL): %d\n", fa_module_kernel_count(NULL));
  printf("fa_module_kernel_info(NULL, 0): %s\n",
         fa_module_kernel_info(NULL, 0) ? "non-NULL" : "NULL");
  int count = 9;
  printf("fa_meta_parse_module(NULL count): %s\n",
         rt_status_name(fa_meta_parse_module("x", 1, &info, NULL, NULL, 0)));
  printf("fa_meta_parse_module(NULL out): %s\n",
         rt_status_name(fa_meta_parse_module("x", 1, NULL, &count, NULL, 0)));
  printf("  count set to 0: %s\n", count == 0 ? "yes" : "no");
  printf("roles");
  for (int r = -1; r <= FA_ROLE_COUNT_; r++) printf(" %s", fa_role_name((fa_role)r));
  printf("\n");
  /* a varlen kernel's list needs the launch's fa_varlen (docs/abi.md) */
  plan.ninputs = 0;
  plan.step[0].varlen = 1;
  printf("fa_backward_params(varlen step, args.varlen NULL): %s\n",
         rt_status_name(fa_backward_params(&plan, 0, &a, 0, params, &n)));
  fa_forward_args fa;
  memset(&fa, 0, sizeof fa);
  printf("fa_forward_params(NULL): %s\n",
         rt_status_name(fa_forward_params(NULL, &fa, 0, 0, params, &n)));
  info.varlen = 1;
  printf("fa_forward_params(varlen kernel, args.varlen NULL): %s\n",
         rt_status_name(fa_forward_params(&info, &fa, 0, 0, params, &n)));
  return 0;
}

/* fa_dropout_mask: FILE P SEED OFFSET BATCH SEQLEN_Q SEQLEN_K. */
static int cmd_mask(int argc, char **argv) {
  if (argc < 7) return usage();
  fa_kernel_info k[FA_MODULE_MAX_KERNELS];
  int n = 0, rc = load(argv[0], 0, NULL, k, &n);
  if (rc) return rc;
  double p = strtod(argv[1], NULL);
  uint64_t seed = strtoull(argv[2], NULL, 0), offset = strtoull(argv[3], NULL, 0);
  int64_t b = rt_num(argv[4], "batch"), sq = rt_num(argv[5], "seqlen_q"),
          sk = rt_num(argv[6], "seqlen_k");
  size_t total = b > 0 && sq > 0 && sk > 0 ? (size_t)(b * k[0].heads * sq * sk) : 0;
  uint8_t *m = total && total < ((size_t)1 << 31) ? malloc(total) : NULL;
  fa_status st = fa_dropout_mask(&k[0], p, seed, offset, b, sq, sk, m);
  rc = rt_report(st, NULL);
  if (st == FA_OK && m) {
    size_t kept = 0;
    for (size_t i = 0; i < total; i++) kept += m[i];
    printf("kept %zu of %zu (%.5f)\nrow 0:", kept, total, (double)kept / (double)total);
    for (int64_t i = 0; i < sk && i < 64; i++) printf("%s%d", i % 8 ? "" : " ", m[i]);
    printf("\n");
  }
  free(m);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage();
  const char *cmd = argv[1];
  if (strcmp(cmd, "meta") == 0) return cmd_meta(argc - 2, argv + 2);
  if (strcmp(cmd, "check") == 0) return cmd_check(argc - 2, argv + 2);
  if (strcmp(cmd, "size") == 0) return cmd_size(argc - 2, argv + 2);
  if (strcmp(cmd, "api") == 0) return cmd_api();
  if (strcmp(cmd, "mask") == 0) return cmd_mask(argc - 2, argv + 2);
  return usage();
}
