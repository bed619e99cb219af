/* rt_blocks.c - flashc-rt-blocks: drives the runtime's GPU-free block-list
 * paths for lit (docs/abi.md, "Block lists"; blocks.test).
 *
 *   flashc-rt-blocks check FILE [--batch=N] [--sq=N] [--sk=N] [--info=I] [MOD...]
 *       parses FILE's kernels (fa_meta_parse_module) and, for each
 *       classifier kernel (mode blocks; or kernel --info=I alone, whatever
 *       its mode), builds a classifier launch (fa_blocks_args: the sizes,
 *       default 2 x 128 x 256, every declared input bound, tensors
 *       contiguous from 0x1b000000000 on, 2^32 apart), applies MODs and
 *       prints what fa_blocks_check says; when it passes, the lists'
 *       shape (fa_block_lists_shape), its grid (fa_classifier_grid),
 *       block and shared memory, and fa_blocks_params' list with
 *       blk_list at 0x1d000000000 and blk_count at 0x1d100000000. MOD is
 *       an edit of the run-time inputs (rt_inputs_mod), args=null or
 *       info=null.
 *   flashc-rt-blocks shape FILE I BATCH SEQLEN_Q SEQLEN_K
 *       fa_block_lists_shape of kernel I (a classifier or a kernel that
 *       visits lists)
 *   flashc-rt-blocks api
 *       the block-list entry points with NULL and out-of-range arguments
 *       (and fa_classifier_grid's two grids)
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

static int usage(void) {
  fprintf(stderr, "usage: flashc-rt-blocks check|shape|api ...\n");
  return 2;
}

static int load(const char *path, fa_kernel_info *k, int *n) {
  size_t len = 0;
  char *text = rt_load_meta_text(path, 0, NULL, &len);
  if (!text) return 2;
  char err[512];
  fa_status st = fa_meta_parse_module(text, len, k, n, err, sizeof err);
  free(text);
  return st == FA_OK ? 0 : rt_report(st, err);
}

static void print_shape(const fa_block_lists *l) {
  printf("blk_list [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "] strides %" PRId64
         " %" PRId64 " %" PRId64 " %" PRId64 "; blk_count [%" PRId64 ", %" PRId64 ", %" PRId64
         "] strides %" PRId64 " %" PRId64 " %" PRId64 "\n",
         l->list_dim[0], l->list_dim[1], l->list_dim[2], l->list_dim[3], l->list_stride[0],
         l->list_stride[1], l->list_stride[2], l->list_stride[3], l->count_dim[0],
         l->count_dim[1], l->count_dim[2], l->count_stride[0], l->count_stride[1],
         l->count_stride[2]);
}

/* One classifier launch of kernel `in`: check, shape, parameters. */
static int check_one(const fa_kernel_info *in, int64_t b, int64_t sq, int64_t sk, int argc,
                     char **argv) {
  static rt_inputs inputs;
  memset(&inputs, 0, sizeof inputs);
  rt_inputs_bind(&inputs, in, b, sq, sk, UINT64_C(0x1b000000000));
  int null_args = 0, null_info = 0;
  for (int i = 0; i < argc; i++) {
    if (strncmp(argv[i], "--", 2) == 0) continue;
    if (strcmp(argv[i], "args=null") == 0) null_args = 1;
    else if (strcmp(argv[i], "info=null") == 0) null_info = 1;
    else if (!rt_inputs_mod(&inputs, argv[i])) {
      fprintf(stderr, "flashc-rt-blocks: bad modification '%s'\n", argv[i]);
      exit(2);
    }
  }
  fa_blocks_args a;
  memset(&a, 0, sizeof a);
  a.batch = b, a.seqlen_q = sq, a.seqlen_k = sk;
  rt_inputs_args(&inputs, &a.inputs, &a.num_inputs);
  char msg[512];
  printf("classifier %s\n", in->kernel);
  fa_status st = fa_blocks_check(null_info ? NULL : in, null_args ? NULL : &a, msg, sizeof msg);
  int rc = rt_report(st, msg);
  if (st != FA_OK) return rc;
  fa_block_lists l;
  if ((st = fa_block_lists_shape(in, b, sq, sk, &l)) != FA_OK) return rt_report(st, NULL);
  print_shape(&l);
  unsigned g[3];
  if ((st = fa_classifier_grid(in, b, sq, sk, g)) == FA_OK)
    printf("grid: %u %u %u block %d smem %d\n", g[0], g[1], g[2], in->threads, in->smem_bytes);
  else
    printf("grid: %s\n", rt_status_name(st));
  l.list = (void *)(uintptr_t)UINT64_C(0x1d000000000);
  l.count = (void *)(uintptr_t)UINT64_C(0x1d100000000);
  fa_param p[FA_BACKWARD_MAX_PARAMS];
  int n = 0;
  st = fa_blocks_params(in, &a, &l, p, &n);
  rt_print_params("params:", st, p, n);
  return rc;
}

static int cmd_check(int argc, char **argv) {
  if (argc < 1) return usage();
  fa_kernel_info k[FA_MODULE_MAX_KERNELS];
  int n = 0, rc = load(argv[0], k, &n);
  if (rc) return rc;
  int64_t b = 2, sq = 128, sk = 256;
  int info = -1;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--", 2) != 0) continue;
    if (strncmp(argv[i], "--batch=", 8) == 0) b = rt_num(argv[i] + 8, "--batch");
    else if (strncmp(argv[i], "--sq=", 5) == 0) sq = rt_num(argv[i] + 5, "--sq");
    else if (strncmp(argv[i], "--sk=", 5) == 0) sk = rt_num(argv[i] + 5, "--sk");
    else if (strncmp(argv[i], "--info=", 7) == 0) info = (int)rt_num(argv[i] + 7, "--info");
    else return usage();
  }
  if (info >= n) return usage();
  for (int i = 0; i < n; i++) {
    if (info >= 0 ? i != info : k[i].mode != FA_MODE_BLOCKS) continue;
    int r = check_one(&k[i], b, sq, sk, argc - 1, argv + 1);
    if (r > rc) rc = r;
  }
  return rc;
}

static int cmd_shape(int argc, char **argv) {
  if (argc < 5) return usage();
  fa_kernel_info k[FA_MODULE_MAX_KERNELS];
  int n = 0, rc = load(argv[0], k, &n);
  if (rc) return rc;
  int i = (int)rt_num(argv[1], "kernel index");
  if (i < 0 || i >= n) return usage();
  fa_block_lists l;
  fa_status st = fa_block_lists_shape(&k[i], rt_num(argv[2], "batch"), rt_num(argv[3], "seqlen_q"),
                                      rt_num(argv[4], "seqlen_k"), &l);
  rc = rt_report(st, NULL);
  if (st == FA_OK) print_shape(&l);
  return rc;
}

/* What the launch fuzzer found (test/fuzz/README.md): sizes whose tile
 * counts overflowed int64 (UB), a classifier grid z past 65535 cut to 32
 * bits, fa_blocks_check accepting a grid fa_classifier_grid refuses. `info`
 * a rows classifier of 64 x 64 tiles, list_heads 1, grid row_tiles. */
static int cmd_api_edges(fa_kernel_info *info) {
  fa_block_lists l;
  unsigned g[3];
  printf("fa_block_lists_shape(seqlen_q INT64_MAX): %s\n",
         rt_status_name(fa_block_lists_shape(info, 1, INT64_MAX, 1, &l)));
  printf("fa_block_lists_shape(batch 0, seqlens INT64_MAX): %s\n",
         rt_status_name(fa_block_lists_shape(info, 0, INT64_MAX, INT64_MAX, &l)));
  printf("fa_classifier_grid(seqlen_k INT64_MAX): %s\n",
         rt_status_name(fa_classifier_grid(info, 1, 1, INT64_MAX, g)));
  printf("fa_classifier_grid(batch 65536): %s\n",
         rt_status_name(fa_classifier_grid(info, 65536, 1, 1, g)));
  info->grid = FA_GRID_ROW_CHUNKS, info->chunk = 1;
  printf("fa_classifier_grid(batch 0, 2^25 x 2^25 chunks): %s\n",
         rt_status_name(fa_classifier_grid(info, 0, INT32_MAX, INT32_MAX, g)));
  info->dtype = FA_DTYPE_F16, info->head_dim = info->v_head_dim = 64;
  info->heads = info->kv_heads = 1, info->threads = 128;
  info->grid = (fa_grid)6;
  fa_blocks_args a;
  memset(&a, 0, sizeof a);
  a.batch = 1, a.seqlen_q = a.seqlen_k = 64;
  char msg[256];
  fa_status st = fa_blocks_check(info, &a, msg, sizeof msg);
  printf("fa_blocks_check(grid 6): %s: %s\n", rt_status_name(st), msg);
  return 0;
}

static int cmd_api(void) {
  fa_kernel_info info;
  memset(&info, 0, sizeof info);
  fa_blocks_args a;
  memset(&a, 0, sizeof a);
  fa_block_lists l;
  fa_param p[FA_BACKWARD_MAX_PARAMS];
  int n = 7;
  char msg[256];
  fa_blocks *b = (fa_blocks *)(uintptr_t)1; /* must be overwritten */
  printf("fa_blocks_create(NULL module): %s\n", rt_status_name(fa_blocks_create(NULL, &a, &b)));
  printf("  out set to NULL: %s\n", b == NULL ? "yes" : "no");
  fa_blocks_destroy(NULL);
  printf("fa_blocks_destroy(NULL): ok\n");
  printf("fa_blocks_count(NULL): %d\n", fa_blocks_count(NULL));
  printf("fa_blocks_lists(NULL): %s\n", rt_status_name(fa_blocks_lists(NULL, 0, &l)));
  printf("fa_block_lists_shape(NULL): %s\n",
         rt_status_name(fa_block_lists_shape(NULL, 1, 1, 1, &l)));
  printf("fa_block_lists_shape(no lists): %s\n",
         rt_status_name(fa_block_lists_shape(&info, 1, 1, 1, &l)));
  info.blocks = FA_BLOCKS_ROWS, info.list_heads = 1, info.tile_q = info.tile_kv = 64;
  printf("fa_block_lists_shape(batch -1): %s\n",
         rt_status_name(fa_block_lists_shape(&info, -1, 1, 1, &l)));
  printf("fa_block_lists_shape(2^31 elements): %s\n",
         rt_status_name(fa_block_lists_shape(&info, 1, 64 * 32768, 64 * 65535, &l)));
  fa_status st = fa_block_lists_shape(&info, 1, 64 * 32768, 64 * 65534, &l);
  printf("fa_block_lists_shape(2^31 - 32768 elements): %s, %" PRId64 "\n", rt_status_name(st),
         l.list_dim[0] * l.list_stride[0]);
  printf("fa_blocks_params(NULL): %s\n", rt_status_name(fa_blocks_params(NULL, &a, &l, p, &n)));
  printf("  count set to 0: %s\n", n == 0 ? "yes" : "no");
  printf("fa_blocks_params(NULL lists): %s\n",
         rt_status_name(fa_blocks_params(&info, &a, NULL, p, &n)));
  printf("fa_blocks_check(NULL, NULL): %s\n", rt_status_name(fa_blocks_check(NULL, NULL, NULL, 0)));
  st = fa_blocks_check(&info, NULL, msg, sizeof msg);
  printf("fa_blocks_check(info, NULL): %s: %s\n", rt_status_name(st), msg);
  st = fa_blocks_check(&info, &a, msg, sizeof msg);
  printf("fa_blocks_check(a forward kernel): %s: %s\n", rt_status_name(st), msg);
  info.mode = FA_MODE_BLOCKS;
  st = fa_blocks_check(&info, &a, msg, sizeof msg);
  printf("fa_blocks_check(zero info): %s: %s\n", rt_status_name(st), msg);
  unsigned g[3] = {7, 7, 7};
  printf("fa_classifier_grid(NULL): %s\n",
         rt_status_name(fa_classifier_grid(NULL, 1, 1, 1, g)));
  info.mode = FA_MODE_FORWARD;
  printf("fa_classifier_grid(a forward kernel): %s\n",
         rt_status_name(fa_classifier_grid(&info, 1, 1, 1, g)));
  info.mode = FA_MODE_BLOCKS, info.grid = FA_GRID_ROW_CHUNKS;
  printf("fa_classifier_grid(row_tiles*chunks, chunk 0): %s\n",
         rt_status_name(fa_classifier_grid(&info, 1, 1, 1, g)));
  info.chunk = 4;
  st = fa_classifier_grid(&info, 2, 64 * 3, 64 * 9, g);
  printf("fa_classifier_grid(chunk 4, 3 x 9 tiles): %s, %u %u %u\n", rt_status_name(st), g[0],
         g[1], g[2]);
  info.grid = FA_GRID_ROW_TILES;
  st = fa_classifier_grid(&info, 2, 64 * 3, 64 * 9, g);
  printf("fa_classifier_grid(row_tiles): %s, %u %u %u\n", rt_status_name(st), g[0], g[1], g[2]);
  return cmd_api_edges(&info);
}

int main(int argc, char **argv) {
  if (argc < 2) return usage();
  const char *cmd = argv[1];
  if (strcmp(cmd, "check") == 0) return cmd_check(argc - 2, argv + 2);
  if (strcmp(cmd, "shape") == 0) return cmd_shape(argc - 2, argv + 2);
  if (strcmp(cmd, "api") == 0) return cmd_api();
  return usage();
}
