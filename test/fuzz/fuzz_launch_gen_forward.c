/* fuzz_launch_gen_forward.c - the launch harness's forward launches and
 * what an accepted one promises (fuzz_launch.c). */
#include <string.h>

#include "fuzz_launch.h"

/* ------------------------------------------------------------- forward */

/* What an accepted forward launch promises. */
static void forward_accepted(const fa_kernel_info *info, fa_forward_args *a) {
  fa_tensor *t[4] = {&a->q, &a->k, &a->v, &a->o};
  check_layout(info, a->varlen, t, 4);
  if (a->q.dim[0] == 0 || a->q.dim[1] == 0 || (a->varlen && a->varlen->num_seqs == 0))
    return;
  Range extra[2];
  int nextra = varlen_ranges(a->varlen, extra);
  /* [batch, heads, seqlen_q], or a varlen launch's [heads, total_q] (dim 0 is 1) */
  __int128 lse_bytes = (__int128)a->q.dim[0] * info->heads * a->q.dim[1] * 4;
  check_accepted("fa_forward_check", t, a->lse, lse_bytes, extra, nextra);
  Range outs[2] = {range("o", a->o.data, extent(&a->o, 2)), range("lse", a->lse, lse_bytes)};
  if (a->inputs)
    check_inputs("fa_forward_check", info, a->inputs, a->num_inputs, outs, 2);
  if (a->varlen)
    check_varlen_sizes(info, a->varlen, &a->q, &a->k);
  Sizes s = launch_sizes(a->varlen, &a->q, &a->k);
  unsigned grid[3];
  FUZZ_CHECK(fa_forward_grid(info, s.batch, s.sq, grid) == FA_OK);
  if (info->grid == FA_GRID_PERSISTENT) /* x: every tile, walked by at most the SMs' blocks */
    FUZZ_CHECK(grid[0] == (unsigned)((s.sq + info->tile_q - 1) / info->tile_q * info->heads *
                                     s.batch) && grid[1] == 1 && grid[2] == 1);
  else
    FUZZ_CHECK(grid[1] == (unsigned)info->heads && grid[2] == (unsigned)s.batch);
  fa_param p[FA_BACKWARD_MAX_PARAMS];
  int np = 0;
  FUZZ_CHECK(fa_forward_params(info, a, (uint64_t)(uintptr_t)a->lse, 0, p, &np) == FA_OK);
  FUZZ_CHECK(np >= 21 && np <= FA_BACKWARD_MAX_PARAMS);
  check_params("fa_forward_params", p, np, a->varlen, &a->q, &a->k, info->varlen);
  check_visit(info, 0, s, p, np);
}

void forward(FuzzIn *in, int varlen, int visit) {
  fa_kernel_info info;
  make_info(in, &info, varlen ? KIND_VARLEN : KIND_FORWARD);
  if (visit && info.grid == FA_GRID_PERSISTENT)
    info.grid = FA_GRID_Q_TILES; /* a kernel that visits lists is not walked */
  if (visit)
    make_visit(in, &info, 0);
  Varlen vl;
  int64_t batch, sq, sk;
  make_sizes(in, &info, varlen ? &vl : NULL, &batch, &sq, &sk);
  fa_forward_args a;
  memset(&a, 0, sizeof a);
  fa_tensor *t[4] = {&a.q, &a.k, &a.v, &a.o};
  make_tensors(in, &info, batch, sq, batch, sk, t);
  a.lse = pickptr(in);
  if (varlen) {
    unpack_one(in, t, 4);
    a.varlen = varlen_pointers(in, &vl, a.o.data, a.lse);
  }
  fa_input binds[FA_MAX_INPUTS + 2];
  char names[FA_MAX_INPUTS + 2][8];
  a.num_inputs = make_bindings(in, &info, varlen ? vl.v.num_seqs : batch, sq, sk, binds, names);
  a.inputs = fuzz_u8(in) % 17 == 0 ? NULL : binds;
  char msg[256];
  size_t msglen = pick_msglen(in, sizeof msg);
  fa_status st = fa_forward_check(&info, &a, msg, msglen);
  check_status(st, msg, msglen);
  FUZZ_CHECK(fa_forward_check(&info, &a, NULL, 0) == st);
  FUZZ_CHECK(info.mode != FA_MODE_BLOCKS || st == FA_ERR_UNSUPPORTED); /* not a forward kernel */
  if (info.varlen && !a.varlen) { /* refused, and no parameter list */
    fa_param p[FA_BACKWARD_MAX_PARAMS];
    int np = 0;
    FUZZ_CHECK(st != FA_OK && fa_forward_params(&info, &a, 0, 0, p, &np) ==
                                  FA_ERR_INVALID_ARGUMENT);
  }
  if (st == FA_OK)
    forward_accepted(&info, &a);
  if (varlen)
    free_varlen(&vl);
}
