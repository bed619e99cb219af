/* fuzz_launch_gen_backward.c - the launch harness's backward launches and
 * what an accepted one promises (fuzz_launch.c). */
#include <string.h>

#include "fuzz_launch.h"

/* The forward kernel `info` and its five backward kernels (docs/backward.md),
 * and when it visits block lists the classifiers of those that do
 * (add_classifiers). Returns the kernel count. */
static int backward_kernels(const fa_kernel_info *info, fa_kernel_info k[9]) {
  static const fa_role roles[5] = {FA_ROLE_PRE, FA_ROLE_MAIN, FA_ROLE_POST, FA_ROLE_KV,
                                   FA_ROLE_Q};
  k[0] = *info;
  k[0].mode = FA_MODE_FORWARD;
  k[0].role = FA_ROLE_NONE;
  for (int i = 1; i < 6; i++) {
    k[i] = k[0];
    snprintf(k[i].kernel, sizeof k[i].kernel, "k_bwd%d", i);
    strcpy(k[i].forward, k[0].kernel);
    k[i].mode = FA_MODE_BACKWARD;
    k[i].role = roles[i - 1];
    int kv = k[i].role == FA_ROLE_MAIN || k[i].role == FA_ROLE_KV;
    k[i].grid = kv ? FA_GRID_K_TILES : FA_GRID_Q_TILES;
    k[i].workspace_floats_per_row = 0;
    k[i].tile_q = 16 << i % 4, k[i].tile_kv = 32 << i % 3;
  }
  return add_classifiers(info, k, 6);
}

/* What an accepted backward launch promises; its plan's steps and
 * parameter lists. */
static void backward_accepted(const fa_kernel_info *info, fa_backward_args *a) {
  fa_tensor *t[8] = {&a->q, &a->k, &a->v, &a->o, &a->dout, &a->dq, &a->dk, &a->dv};
  check_layout(info, a->varlen, t, 8);
  if (a->q.dim[0] == 0)
    return;
  fa_kernel_info k[9];
  int nk = backward_kernels(info, k);
  fa_backward_schedule plan;
  char msg[256];
  fa_status st;
  if (a->varlen && a->varlen->num_seqs == 0) { /* no sequence: nothing planned */
    st = fa_backward_plan(k, nk, a, &plan, msg, sizeof msg);
    FUZZ_CHECK(st == FA_OK && plan.nsteps == 0);
    return;
  }
  FUZZ_CHECK(a->mode == FA_BACKWARD_AUTO || a->mode == FA_BACKWARD_DETERMINISTIC ||
             a->mode == FA_BACKWARD_ATOMIC);
  Sizes s = launch_sizes(a->varlen, &a->q, &a->k);
  check_visit(info, info->mode == FA_MODE_BACKWARD, s, NULL, 0);
  if (a->varlen)
    check_varlen_sizes(info, a->varlen, &a->q, &a->k);
  size_t need = 0;
  FUZZ_CHECK(fa_backward_workspace_size(info, s.batch, s.sq, s.sk, a->mode, &need) == FA_OK);
  /* the LSE: [batch, heads, seqlen_q], a varlen launch's [heads, total_q] */
  __int128 rows = (__int128)a->q.dim[0] * info->heads * a->q.dim[1];
  FUZZ_CHECK(rows <= INT32_MAX && (rows == 0 || a->lse) && (uintptr_t)a->lse % 4 == 0);
  FUZZ_CHECK((uintptr_t)a->workspace % 256 == 0 && (!a->workspace || a->workspace_bytes >= need));
  static const char *const names[8] = {"q", "k", "v", "o", "dout", "dq", "dk", "dv"};
  Range r[12];
  int is_out[12] = {0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 0, 0};
  for (int i = 0; i < 8; i++)
    r[i] = tensor_range(names[i], t[i]);
  r[8] = range("lse", a->lse, a->lse ? rows * 4 : 0);
  r[9] = range("workspace", a->workspace, a->workspace ? (__int128)need : 0);
  int nr = 10 + varlen_ranges(a->varlen, r + 10);
  check_disjoint("fa_backward_check", r, nr, is_out, t, 8);
  check_in_space("fa_backward_check", r, nr);
  Range outs[4] = {r[5], r[6], r[7], r[9]}; /* dq, dk, dv, the workspace */
  if (a->inputs)
    check_inputs("fa_backward_check", info, a->inputs, a->num_inputs, outs, 4);
  /* A module of the forward kernel and its backward: the plan's grids fit. */
  st = fa_backward_plan(k, nk, a, &plan, msg, sizeof msg);
  if (st == FA_ERR_TOO_LARGE && !lists_fit(k, nk, s))
    return; /* a backward kernel's lists (other tiles, orientation) past int32: refused */
  if (st != FA_OK)
    fprintf(stderr, "fa_backward_plan refuses what fa_backward_check accepts: %s\n", msg);
  FUZZ_CHECK(st == FA_OK && plan.workspace_bytes == need);
  FUZZ_CHECK(plan.nsteps >= 0 && plan.nsteps <= FA_BACKWARD_MAX_STEPS);
  for (int i = 0; i < plan.nsteps; i++) {
    const fa_backward_step *p = &plan.step[i];
    if (p->op == FA_BACKWARD_ZERO) {
      FUZZ_CHECK(p->offset + p->bytes <= need && p->bytes % 4 == 0);
      continue;
    }
    FUZZ_CHECK(p->grid[0] >= 1 && p->grid[0] <= INT32_MAX && p->grid[1] >= 1 &&
               p->grid[1] <= 65535 && p->grid[2] >= 1 && p->grid[2] <= 65535);
    FUZZ_CHECK(p->grid[2] == (unsigned)s.batch && p->varlen == (info->varlen != 0));
    fa_param prm[FA_BACKWARD_MAX_PARAMS];
    int np = 0;
    FUZZ_CHECK(fa_backward_params(&plan, i, a, 1u << 20, prm, &np) == FA_OK);
    FUZZ_CHECK(np >= 8 && np <= FA_BACKWARD_MAX_PARAMS);
    check_params("fa_backward_params", prm, np, a->varlen, &a->q, &a->k, p->varlen);
    check_step_lists(k, nk, p, s);
    const fa_kernel_info *pk = &k[p->kernel];
    check_visit(pk, pk->role == FA_ROLE_MAIN || pk->role == FA_ROLE_KV, s, prm, np);
  }
}

void backward(FuzzIn *in, int varlen, int visit) {
  fa_kernel_info info;
  make_info(in, &info, varlen ? KIND_VARLEN : KIND_FORWARD);
  if (fuzz_u8(in) & 1) { /* checked against a backward kernel's info */
    info.mode = FA_MODE_BACKWARD;
    info.role = FA_ROLE_MAIN;
    info.grid = FA_GRID_K_TILES;
    strcpy(info.forward, "f");
  }
  if (visit) /* the K/V-outer main kernel visits cols, the forward rows */
    make_visit(in, &info, info.mode == FA_MODE_BACKWARD);
  Varlen vl;
  int64_t batch, sq, sk;
  make_sizes(in, &info, varlen ? &vl : NULL, &batch, &sq, &sk);
  fa_backward_args a;
  memset(&a, 0, sizeof a);
  fa_tensor *t[8] = {&a.q, &a.k, &a.v, &a.o, &a.dout, &a.dq, &a.dk, &a.dv};
  make_tensors(in, &info, batch, sq, batch, sk, t);
  fa_tensor *t2[4] = {&a.dout, &a.dq, &a.dk, &a.dv};
  int64_t dims2[4][4] = {{batch, sq, info.heads, info.v_head_dim},
                         {batch, sq, info.heads, info.head_dim},
                         {batch, sk, info.kv_heads, info.head_dim},
                         {batch, sk, info.kv_heads, info.v_head_dim}};
  for (int i = 0; i < 4; i++)
    make_tensor(in, t2[i], info.dtype, dims2[i]);
  a.lse = pickptr(in);
  fa_input binds[FA_MAX_INPUTS + 2];
  char names[FA_MAX_INPUTS + 2][8];
  if (varlen) { /* (a padded backward launch binds no inputs: its corpus keeps its form) */
    unpack_one(in, t, 8);
    a.varlen = varlen_pointers(in, &vl, a.dq.data, a.dv.data);
    a.num_inputs = make_bindings(in, &info, vl.v.num_seqs, sq, sk, binds, names);
    a.inputs = binds;
  }
  uint8_t w = fuzz_u8(in);
  a.mode = w & 0x80 ? pick32(in) : w % 3;
  size_t need = 0;
  Sizes s = launch_sizes(a.varlen, &a.q, &a.k);
  fa_backward_workspace_size(&info, s.batch, s.sq, s.sk, w % 3, &need);
  if (w & 2) {
    a.workspace = pickptr(in);
    a.workspace_bytes = w & 4 ? (size_t)pick64(in) : need;
  }
  char msg[256];
  size_t msglen = pick_msglen(in, sizeof msg);
  fa_status st = fa_backward_check(&info, &a, msg, msglen);
  check_status(st, msg, msglen);
  FUZZ_CHECK(fa_backward_check(&info, &a, NULL, 0) == st);
  FUZZ_CHECK(info.mode != FA_MODE_BLOCKS || st == FA_ERR_UNSUPPORTED); /* no backward of its own */
  if (st == FA_OK)
    backward_accepted(&info, &a);
  if (varlen)
    free_varlen(&vl);
}
