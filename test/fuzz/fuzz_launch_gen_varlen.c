/* fuzz_launch_gen_varlen.c - the launch harness's variable-length batches:
 * fa_varlen, its cu_seqlens and host copies, packed tensors (fuzz_launch.c). */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_launch.h"

/* --------------------------------------------------- variable-length batches */

static int pick_num_seqs(FuzzIn *in) {
  uint8_t sel = fuzz_u8(in);
  switch (sel % 12) {
  case 0: case 1: case 2: case 3: return 1 + fuzz_u8(in) % 8;
  case 4: return 0;
  case 5: return 1;
  case 6: return fuzz_u8(in);
  case 7: return 65535;
  case 8: return 65536;
  case 9: return -1 - fuzz_u8(in) % 4;
  case 10: return INT_MIN;
  default: return pick32(in);
  }
}

/* A longest length: the generated one, one short, or an edge case. */
static int64_t pick_max(FuzzIn *in, int64_t longest) {
  uint8_t sel = fuzz_u8(in);
  switch (sel % 12) {
  case 0: case 1: case 2: case 3: case 4: return longest > 0 ? longest : 1;
  case 5: return longest - 1;
  case 6: return 0;
  case 7: return 1;
  case 8: return INT32_MAX;
  case 9: return (int64_t)INT32_MAX + 1;
  case 10: return -1 - fuzz_u8(in);
  default: return pick64(in);
  }
}

static int32_t wrap32(int64_t x) { return (int32_t)(uint32_t)(uint64_t)x; }

/* The sequences of a varlen launch: their count, their lengths (small,
 * equal on both sides, or raw), the prefix sums as host copies (valid, or
 * spoiled one way), the maxima; and whether the kernel is a varlen one
 * given the struct (or a padded one given it, or a varlen one without). */
static void make_varlen(FuzzIn *in, fa_kernel_info *info, Varlen *vl) {
  memset(vl, 0, sizeof *vl);
  uint8_t f = fuzz_u8(in);
  vl->given = f % 16 != 1;
  if (f % 16 == 2)
    info->varlen = 0;
  int n = vl->v.num_seqs = pick_num_seqs(in);
  int64_t longest[2] = {0, 0};
  if (n >= 0 && n <= 65536) {
    for (int s = 0; s < 2; s++)
      FUZZ_CHECK(vl->host[s] = malloc(sizeof(int32_t) * ((size_t)n + 2)));
    /* The first 16 sequences' lengths; the others repeat them. */
    int64_t len[16][2];
    uint8_t mode = fuzz_u8(in);
    for (int i = 0; i < n && i < 16; i++) {
      int64_t *l = len[i];
      switch (mode % 4) {
      case 0: l[0] = 1 + fuzz_u8(in) % 64, l[1] = 1 + fuzz_u8(in) % 64; break;
      case 1: l[0] = fuzz_u8(in), l[1] = fuzz_u8(in); break;
      case 2: l[0] = l[1] = 1 + fuzz_u8(in) % 64; break; /* meets every require */
      default: l[0] = pick32(in), l[1] = pick32(in);
      }
    }
    for (int i = 0;; i++) {
      for (int s = 0; s < 2; s++)
        vl->host[s][i] = wrap32(vl->total[s]);
      if (i == n)
        break;
      for (int s = 0; s < 2; s++) {
        int64_t l = len[i % 16][s];
        vl->total[s] += l;
        if (l > longest[s])
          longest[s] = l;
      }
    }
  } else {
    vl->total[0] = fuzz_u8(in), vl->total[1] = fuzz_u8(in);
  }
  /* A host copy each: spoiled one way, absent, misaligned, or (num_seqs out
   * of range) a short array the checks must refuse before reading. */
  static int32_t tiny[4];
  const int32_t *host[2];
  for (int s = 0; s < 2; s++) {
    uint8_t h = fuzz_u8(in);
    int32_t *b = vl->host[s];
    if (b) {
      switch (h % 8) {
      case 1:
        for (int i = 0; i <= n; i++)
          b[i] = pick32(in);
        break;
      case 2:
        if (n >= 1) {
          int j = 1 + fuzz_u8(in) % n;
          b[j] = wrap32((int64_t)b[j - 1] - 1 - fuzz_u8(in));
        }
        break;
      case 3: b[0] = h & 16 ? -1 : 1 + fuzz_u8(in); break;
      case 4: b[n] = wrap32((int64_t)b[n] + (h & 16 ? -1 : 1 + fuzz_u8(in))); break;
      }
    }
    const int32_t *p = b ? b : h & 16 ? tiny : NULL;
    if (h & 8)
      p = NULL;
    else if (p && h >> 5 == 3)
      p = (const int32_t *)(uintptr_t)((uintptr_t)p + 2);
    host[s] = p;
  }
  vl->v.host_cu_seqlens_q = host[0], vl->v.host_cu_seqlens_k = host[1];
  vl->v.max_seqlen_q = pick_max(in, longest[0]);
  vl->v.max_seqlen_k = pick_max(in, longest[1]);
}

/* The device cu_seqlens (plausible, NULL, misaligned, an output's memory,
 * or any pointer), and whether the launch gets the struct. */
const fa_varlen *varlen_pointers(FuzzIn *in, Varlen *vl, const void *out0,
                                 const void *out1) {
  const int32_t *p[2];
  for (int s = 0; s < 2; s++) {
    uint8_t d = fuzz_u8(in);
    uint64_t good = ((uint64_t)(0xf0 + s) << 40) + 4 * (uint64_t)fuzz_u8(in);
    switch (d % 8) {
    case 4: p[s] = NULL; break;
    case 5: p[s] = (const int32_t *)(uintptr_t)(good + 1 + d / 8 % 3); break;
    case 6: p[s] = d & 8 ? out0 : out1; break;
    case 7: p[s] = pickptr(in); break;
    default: p[s] = (const int32_t *)(uintptr_t)good;
    }
  }
  vl->v.cu_seqlens_q = p[0], vl->v.cu_seqlens_k = p[1];
  return vl->given ? &vl->v : NULL;
}

/* A launch's tensors' batch and lengths: edge cases for a padded one (vl
 * NULL); 1 and the totals of the sequences make_varlen gives, packed. */
void make_sizes(FuzzIn *in, fa_kernel_info *info, Varlen *vl, int64_t *batch,
                int64_t *sq, int64_t *sk) {
  if (!vl) {
    *batch = pick64(in), *sq = pick64(in), *sk = pick64(in);
    return;
  }
  make_varlen(in, info, vl);
  *batch = 1, *sq = vl->total[0], *sk = vl->total[1];
}

/* Sometimes one tensor of a varlen launch is not packed (dim[0] != 1). */
void unpack_one(FuzzIn *in, fa_tensor *const *t, int n) {
  uint8_t u = fuzz_u8(in);
  if (u % 4 == 3)
    t[(u >> 2) % n]->dim[0] = u & 0x80 ? pick64(in) : 2;
}

void free_varlen(Varlen *vl) {
  free(vl->host[0]);
  free(vl->host[1]);
}
