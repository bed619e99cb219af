/* rt_decode.c - flashc-rt-decode: drives the runtime's GPU-free decode paths for lit.
 *
 *   flashc-rt-decode meta FILE
 *       parses the metadata and prints the decode fields
 *   flashc-rt-decode check FILE [--batch=N] [--qlen=N] [--capacity=N] [--params] [--launch]
 *                    [MOD...]
 *       builds a valid decode launch for the kernel in FILE (contiguous
 *       tensors at fake aligned device addresses; paged kernels get
 *       num_pages = batch * capacity / page_size + 1 pages, a reversed block
 *       table and host copies of the lengths (capacity, then 1000, 17, ...)
 *       and of the table), applies MODs and prints what fa_decode_check and
 *       fa_decode_plan (132 SMs) say; with --params, after a valid check,
 *       the split kernel's parameter list (fa_decode_params, the plan's
 *       nsplit, lse and workspace shown at 0x7700000000 / 0x7800000000);
 *       with --launch, then fa_decode itself on FILE loaded as a module
 *       through the driver FLASHC_LIBCUDA names (test/runtime/fake_cuda.c
 *       prints each launch it is given).
 *       The kernel's run-time inputs are bound (rt_inputs_bind: tensors at
 *       0x1c000000000 + i * 2^32, seqlen_q = q_len). MOD is one of
 *         T.dimI=N  T.strideI=N  T.data=null|0xHEX|+N  T.dtype=f16|bf16|f32
 *             (T = q, k, v, o; I = 0..3)
 *         lse=null|+N  seqlens=null|+N  bt=null|+N  max_pages=N  bt_stride=N
 *             (each pointer also =0xHEX)
 *         host_seqlens=null|0xHEX|+N  host_bt=... (the host copies; an
 *             address is never read when the checks refuse it)
 *         len[B]=N (host length)  bt[B][P]=N (host table entry)
 *         host=none (no host copies)  host=table (the table's only)  max_seqlen=N
 *         nsplit=N  args=null  info=null
 *         bind=NAME, NAME.dim0=N, ... (rt_inputs_mod: the run-time inputs)
 *   flashc-rt-decode splits FILE BATCH KV_HEADS MAX_SEQLEN SM_COUNT
 *       prints fa_decode_splits
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

#define MAX_BATCH 64
#define MAX_PAGES 4096

static int usage(void) {
  fprintf(stderr, "usage: flashc-rt-decode meta|check|splits FILE ...\n");
  return 2;
}

static int load(const char *path, fa_kernel_info *info) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "flashc-rt-decode: cannot read %s\n", path);
    return 2;
  }
  char buf[16384];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  char err[512];
  fa_status st = fa_meta_parse(buf, n, info, err, sizeof err);
  return st == FA_OK ? 0 : rt_report(st, err);
}

static int cmd_meta(int argc, char **argv) {
  fa_kernel_info in;
  int rc = argc < 1 ? usage() : load(argv[0], &in);
  if (rc) return rc;
  const fa_decode_info *d = &in.decode;
  rt_report(FA_OK, NULL);
  printf("kernel %s\nmode %d\ngrid %d\ncache %s\npage_size %d\nsplit %d\nq_len_max %d\n",
         in.kernel, (int)in.mode, (int)in.grid, d->cache == FA_CACHE_PAGED ? "paged" : "contiguous",
         d->page_size, d->split, d->q_len_max);
  printf("combine_kernel %s\ncombine_threads %d\nunified_max %s %g\ncombine_pdl %d\n"
         "combine_fused %d\n",
         d->combine_kernel, d->combine_threads, d->has_unified_max ? "on" : "off",
         d->unified_max, d->combine_pdl, d->combine_fused);
  if (d->wide_kernel[0])
    printf("wide_kernel %s\nwide_tile_kv %d\nwide_threads %d\nwide_smem_bytes %d\n",
           d->wide_kernel, d->wide_tile_kv, d->wide_threads, d->wide_smem_bytes);
  return 0;
}

typedef struct Launch {
  fa_decode_args a;
  int32_t lens[MAX_BATCH];
  int32_t table[MAX_BATCH * MAX_PAGES];
  rt_inputs in; /* every declared input bound validly */
  int null_args, null_info;
} Launch;

/* The valid launch described at the top. */
static void base_launch(const fa_kernel_info *in, int64_t b, int64_t ql, int64_t cap, Launch *l) {
  char *base = (char *)(uintptr_t)(UINT64_C(1) << 40);
  int64_t gap = INT64_C(1) << 36;
  fa_decode_args *a = &l->a;
  memset(l, 0, sizeof *l);
  int paged = in->decode.cache == FA_CACHE_PAGED, ps = in->decode.page_size;
  int64_t pages = paged ? b * (cap / ps) + 1 : 0, d0 = paged ? pages : b, d1 = paged ? ps : cap;
  fa_tensor_contiguous(&a->q, base, in->dtype, b, ql, in->heads, in->head_dim);
  fa_tensor_contiguous(&a->k, base + gap, in->dtype, d0, d1, in->kv_heads, in->head_dim);
  fa_tensor_contiguous(&a->v, base + 2 * gap, in->dtype, d0, d1, in->kv_heads, in->v_head_dim);
  fa_tensor_contiguous(&a->o, base + 3 * gap, in->dtype, b, ql, in->heads, in->v_head_dim);
  a->lse = (float *)(base + 4 * gap);
  a->cache_seqlens = (const int32_t *)(base + 5 * gap);
  static const int32_t others[] = {1000, 17, 1, 0, 128};
  for (int64_t i = 0; i < b; i++) l->lens[i] = i == 0 ? (int32_t)cap : others[(i - 1) % 5];
  a->host_cache_seqlens = l->lens;
  if (paged) {
    a->block_table = (const int32_t *)(base + 6 * gap);
    a->max_pages = cap / ps;
    for (int64_t i = 0; i < b * a->max_pages; i++) l->table[i] = (int32_t)(pages - 2 - i);
    a->host_block_table = l->table;
  }
  /* seqlen_k: no decode input has such a dim (the parser refuses it). */
  rt_inputs_bind(&l->in, in, b, ql, cap, UINT64_C(0x1c000000000));
}

/* Applies one MOD; 0 when it is not understood. */
static int apply_mod(Launch *l, const char *mod) {
  fa_decode_args *a = &l->a;
  const char *eq = strchr(mod, '=');
  if (!eq) return 0;
  const char *val = eq + 1;
  int i = 0, j = 0;
  if (strncmp(mod, "args=", 5) == 0) return l->null_args = 1;
  if (strncmp(mod, "info=", 5) == 0) return l->null_info = 1;
  if (strncmp(mod, "lse=", 4) == 0) a->lse = rt_ptr_value(val, a->lse);
  else if (strncmp(mod, "seqlens=", 8) == 0) a->cache_seqlens = rt_ptr_value(val, a->cache_seqlens);
  else if (strncmp(mod, "bt=", 3) == 0) a->block_table = rt_ptr_value(val, a->block_table);
  else if (strncmp(mod, "host_seqlens=", 13) == 0)
    a->host_cache_seqlens = rt_ptr_value(val, a->host_cache_seqlens);
  else if (strncmp(mod, "host_bt=", 8) == 0)
    a->host_block_table = rt_ptr_value(val, a->host_block_table);
  else if (strncmp(mod, "max_pages=", 10) == 0) a->max_pages = rt_num(val, mod);
  else if (strncmp(mod, "bt_stride=", 10) == 0) a->bt_stride = rt_num(val, mod);
  else if (strncmp(mod, "max_seqlen=", 11) == 0) a->max_seqlen = rt_num(val, mod);
  else if (strncmp(mod, "nsplit=", 7) == 0) a->nsplit = (int)rt_num(val, mod);
  else if (strcmp(mod, "host=none") == 0) a->host_cache_seqlens = NULL, a->host_block_table = NULL;
  else if (strcmp(mod, "host=table") == 0) a->host_cache_seqlens = NULL;
  else if (sscanf(mod, "len[%d]=", &i) == 1 && i >= 0 && i < MAX_BATCH)
    l->lens[i] = (int32_t)rt_num(val, mod);
  else if (sscanf(mod, "bt[%d][%d]=", &i, &j) == 2 && i >= 0 && j >= 0) {
    int64_t stride = a->bt_stride ? a->bt_stride : a->max_pages;
    if (i * stride + j >= MAX_BATCH * MAX_PAGES) return 0;
    l->table[i * stride + j] = (int32_t)rt_num(val, mod);
  } else {
    fa_tensor *ts[4] = {&a->q, &a->k, &a->v, &a->o};
    static const char *const names[4] = {"q", "k", "v", "o"};
    return rt_tensor_mod(ts, names, 4, mod) || rt_inputs_mod(&l->in, mod);
  }
  return 1;
}

/* The split kernel's list (fa_decode_params) with stand-in addresses for
 * the LSE rows and the workspace, which fa_decode finds in its scratch. */
static void print_params(const fa_kernel_info *info, const fa_decode_args *a, int nsplit) {
  fa_param p[FA_BACKWARD_MAX_PARAMS];
  int n = 0;
  fa_status st = fa_decode_params(info, a, nsplit, UINT64_C(0x7700000000),
                                  nsplit > 1 ? UINT64_C(0x7800000000) : 0, p, &n);
  rt_print_params("params:", st, p, n);
}

/* --launch: fa_decode of FILE's module (rt_launch_module). */
static fa_status run_decode(fa_module *mod, const void *a) { return fa_decode(mod, a); }

static int cmd_check(int argc, char **argv) {
  fa_kernel_info info;
  int rc = argc < 1 ? usage() : load(argv[0], &info);
  if (rc) return rc;
  int64_t b = 2, ql = 4, cap = 4096;
  int i = 1, params = 0, launch = 0;
  for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
    if (strncmp(argv[i], "--batch=", 8) == 0) b = rt_num(argv[i] + 8, "--batch");
    else if (strncmp(argv[i], "--qlen=", 7) == 0) ql = rt_num(argv[i] + 7, "--qlen");
    else if (strncmp(argv[i], "--capacity=", 11) == 0) cap = rt_num(argv[i] + 11, "--capacity");
    else if (strcmp(argv[i], "--params") == 0) params = 1;
    else if (strcmp(argv[i], "--launch") == 0) launch = 1;
    else return usage();
  }
  if (b < 0 || b > MAX_BATCH || cap < 0 ||
      (info.decode.page_size && b * (cap / info.decode.page_size) > MAX_PAGES * MAX_BATCH))
    return usage();
  static Launch l;
  base_launch(&info, b, ql, cap, &l);
  for (; i < argc; i++)
    if (!apply_mod(&l, argv[i])) {
      fprintf(stderr, "flashc-rt-decode: bad modification '%s'\n", argv[i]);
      return 2;
    }
  rt_inputs_args(&l.in, &l.a.inputs, &l.a.num_inputs);
  char msg[512];
  fa_status st = fa_decode_check(l.null_info ? NULL : &info, l.null_args ? NULL : &l.a, msg,
                                 sizeof msg);
  int nsplit = 0, wide = 0;
  size_t ws = 0;
  if (st == FA_OK && fa_decode_plan(&info, &l.a, 132, &nsplit, &ws, &wide) == FA_OK)
    printf("plan: grid %d %d %" PRId64 " block %d, nsplit %d, workspace %zu bytes%s%s%s\n",
           nsplit, info.kv_heads, l.a.q.dim[0], wide ? info.decode.wide_threads : info.threads,
           nsplit, ws, nsplit > 1 ? ", combine" : "", wide ? ", kernel " : "",
           wide ? info.decode.wide_kernel : "");
  if (st == FA_OK && params) print_params(&info, &l.a, nsplit);
  if (st == FA_OK && launch) return rt_launch_module(argv[0], run_decode, &l.a);
  return rt_report(st, msg);
}

static int cmd_splits(int argc, char **argv) {
  fa_kernel_info info;
  int rc = argc < 5 ? usage() : load(argv[0], &info);
  if (rc) return rc;
  printf("splits: %d\n",
         fa_decode_splits(&info, rt_num(argv[1], "batch"), rt_num(argv[2], "kv_heads"),
                          rt_num(argv[3], "max_seqlen"), (int)rt_num(argv[4], "sms")));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage();
  if (strcmp(argv[1], "meta") == 0) return cmd_meta(argc - 2, argv + 2);
  if (strcmp(argv[1], "check") == 0) return cmd_check(argc - 2, argv + 2);
  if (strcmp(argv[1], "splits") == 0) return cmd_splits(argc - 2, argv + 2);
  return usage();
}
