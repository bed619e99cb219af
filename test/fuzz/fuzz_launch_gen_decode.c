/* fuzz_launch_gen_decode.c - the launch harness's decode launches and
 * what an accepted one promises (fuzz_launch.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_launch.h"

#define MAX_HOST 4096

void decode(FuzzIn *in) {
  fa_kernel_info info;
  make_info(in, &info, KIND_DECODE);
  int paged = info.decode.cache == FA_CACHE_PAGED;
  int64_t batch = pick64(in), ql = 1 + fuzz_u8(in) % 20, cap = pick64(in);
  int64_t kb = paged ? pick64(in) : batch, k1 = paged ? info.decode.page_size : cap;
  fa_decode_args a;
  memset(&a, 0, sizeof a);
  fa_tensor *t[4] = {&a.q, &a.k, &a.v, &a.o};
  make_tensors(in, &info, batch, ql, kb, k1, t);
  a.lse = pickptr(in);
  a.cache_seqlens = pickptr(in);
  a.block_table = pickptr(in);
  a.max_pages = pick64(in);
  a.bt_stride = fuzz_u8(in) & 1 ? pick64(in) : 0;
  a.max_seqlen = fuzz_u8(in) & 1 ? pick64(in) : 0;
  a.nsplit = fuzz_u8(in) & 1 ? pick32(in) : 0;
  fa_input binds[FA_MAX_INPUTS + 2];
  char names[FA_MAX_INPUTS + 2][8];
  a.num_inputs = make_bindings(in, &info, batch, ql, 0, binds, names);
  a.inputs = binds;
  /* Host copies: as many entries as the contract says they hold. */
  int32_t *lens = NULL, *table = NULL;
  int64_t b = a.q.dim[0], stride = a.bt_stride ? a.bt_stride : a.max_pages, nt;
  uint8_t host = fuzz_u8(in);
  if (host & 1 && b >= 0 && b <= MAX_HOST) {
    lens = malloc(sizeof *lens * (size_t)(b + 1));
    for (int64_t i = 0; i < b; i++)
      lens[i] = host & 2 ? pick32(in) : (int32_t)(fuzz_bytes(in, 2) % 512);
    a.host_cache_seqlens = lens;
  }
  if (host & 4 && b >= 0 && stride >= 0 && !__builtin_mul_overflow(b, stride, &nt) &&
      nt <= MAX_HOST) {
    table = malloc(sizeof *table * (size_t)(nt + 1));
    for (int64_t i = 0; i < nt; i++)
      table[i] = host & 8 ? pick32(in) : (int32_t)fuzz_u8(in);
    a.host_block_table = table;
  }
  char msg[256];
  fa_status st = fa_decode_check(&info, &a, msg, sizeof msg);
  FUZZ_CHECK(st >= 0 && st < FA_STATUS_COUNT_);
  FUZZ_CHECK(fa_decode_check(&info, &a, NULL, 0) == st);
  if (st == FA_OK && b > 0 && a.q.dim[1] > 0) {
    Range extra[2] = {range("cache_seqlens", a.cache_seqlens, (__int128)b * 4),
                      range("block_table", a.block_table,
                            paged ? ((__int128)(b - 1) * stride + a.max_pages) * 4 : 0)};
    check_accepted("fa_decode_check", t, a.lse, (__int128)b * info.heads * a.q.dim[1] * 4,
                   extra, 2);
    Range outs[2] = {range("o", a.o.data, extent(&a.o, 2)),
                     range("lse", a.lse, (__int128)b * info.heads * a.q.dim[1] * 4)};
    check_inputs("fa_decode_check", &info, a.inputs, a.num_inputs, outs, 2);
    int nsplit = 0, wide = 0;
    size_t ws = 0;
    if (fa_decode_plan(&info, &a, 1 + fuzz_u8(in), &nsplit, &ws, &wide) == FA_OK)
      FUZZ_CHECK(nsplit >= 1 && nsplit <= 1024);
  }
  free(lens);
  free(table);
}
