/* compute_merge.c - layer 2: merging split-kv's partials (docs/decode.md).
 * For each (b, h, token) nsplit partial rows of dv floats, weighted by
 * e^{lse_s - M}, on a layout made for it (the combine kernel's head loop,
 * kind_combine.c, and the fused split kernel's last block, kind_decode.c):
 *   - a thread owns 4 adjacent columns of one token (float4 loads of o_part,
 *     dv/4 threads per token, tokens side by side when dv/4 < threads);
 *   - one online pass over the splits, COMBINE_LOADS float4 loads (all of a
 *     group's splits and its lse values) issued before any is used, so a
 *     group costs one memory round trip: m' = max(m, lse_s...), rescale by
 *     e^{m - m'}, add w_s O_s with w_s = e^{lse_s - m'};
 *   - an empty split (lse -inf) adds nothing and its o_part (maybe never
 *     written) is never used: the product is selected away, not multiplied
 *     by 0, so NaN garbage cannot leak; all splits empty: O = 0, LSE = -inf.
 */
#include "codegen/cg_math.h"
#include "codegen/compute.h"
#include "mlir-c/BuiltinTypes.h"

/* lse_part and o_part of split s (clamped into range; lse -inf past nsplit). */
static void comb_load(Comb *c, MlirValue t, MlirValue s, MlirValue *lse, MlirValue *ov) {
  CgBuilder *b = &c->L->b;
  MlirValue ok = cg_cmpi(b, "slt", s, c->nsplit);
  MlirValue bs = cg_addi(b, c->bs0, cg_select(b, ok, s, c->nsm1));
  MlirValue lo = cg_addi(b, cg_addi(b, cg_muli(b, bs, c->lpart.sb), cg_muli(b, c->h, c->lpart.sh)),
                         cg_muli(b, t, c->lpart.ss));
  MlirValue (*ld)(CgBuilder *, MlirValue, MlirType, int) = c->vol ? cg_load_volatile : cg_load;
  MlirValue l = ld(b, cg_gep(b, c->lpart.base, lo, b->f32), b->f32, 4);
  *lse = cg_select(b, ok, l, cg_const_f32(b, -__builtin_inf()));
  MlirValue ro = cg_addi(b, cg_addi(b, cg_muli(b, bs, c->opart.sb), cg_muli(b, t, c->opart.ss)),
                         cg_muli(b, c->h, c->opart.sh));
  for (int k = 0; k < c->nchunk; k++)
    ov[k] = ld(b, cg_gep(b, c->opart.base, cg_addi(b, ro, c->col[k]), b->f32), c->v4, 16);
}

/* One group of splits s0 .. s0 + group - 1 folded into (acc, sumw, m):
 * st = acc[4 * nchunk], sumw, m. */
static void comb_group(Comb *c, MlirValue t, MlirValue s0, MlirValue *st) {
  CgBuilder *b = &c->L->b;
  int na = 4 * c->nchunk;
  MlirValue lse[COMBINE_LOADS], ov[COMBINE_LOADS][COMBINE_MAX_CHUNKS];
  for (int u = 0; u < c->group; u++) /* every load of the group first */
    comb_load(c, t, cg_addi_c(b, s0, u), &lse[u], ov[u]);
  MlirValue m = st[na + 1], mn = m;
  for (int u = 0; u < c->group; u++)
    mn = cg_maxnumf(b, mn, lse[u]);
  MlirValue ninf = cg_const_f32(b, -__builtin_inf()), zero = cg_const_f32(b, 0.0);
  MlirValue ms = cg_select(b, cg_cmpf(b, "oeq", mn, ninf), zero, mn);
  MlirValue alpha = cg_expf(b, cg_subf(b, m, ms)); /* m = -inf: 0 (acc is 0 then) */
  for (int i = 0; i <= na; i++)
    st[i] = cg_mulf(b, st[i], alpha);
  for (int u = 0; u < c->group; u++) {
    MlirValue w = cg_expf(b, cg_subf(b, lse[u], ms));
    MlirValue dead = cg_cmpf(b, "oeq", lse[u], ninf);
    st[na] = cg_addf(b, st[na], w);
    for (int k = 0; k < c->nchunk; k++)
      for (int e = 0; e < 4; e++) {
        MlirValue x = cg_mulf(b, w, cg_vector_extract(b, ov[u][k], e));
        st[4 * k + e] = cg_addf(b, st[4 * k + e], cg_select(b, dead, zero, x));
      }
  }
  st[na + 1] = mn;
}

/* O and LSE of token t from the merged state. */
static void comb_store(Comb *c, MlirValue t, const MlirValue *st, MlirValue first) {
  Lowerer *L = c->L;
  CgBuilder *b = &L->b;
  int na = 4 * c->nchunk;
  MlirValue sumw = st[na], m = st[na + 1], zero = cg_const_f32(b, 0.0);
  MlirValue inv = cg_select(b, cg_cmpf(b, "oeq", sumw, zero), zero,
                            cg_arith2(b, "arith.divf", cg_const_f32(b, 1.0), sumw));
  MlirType et = lw_elem_type(L, c->o.elem);
  MlirType v4o = mlirVectorTypeGet(1, (int64_t[]){4}, et);
  MlirValue ro = cg_addi(b, cg_addi(b, cg_muli(b, c->b, c->o.sb), cg_muli(b, t, c->o.ss)),
                         cg_muli(b, c->h, c->o.sh));
  for (int k = 0; k < c->nchunk; k++) {
    MlirValue e4[4];
    for (int e = 0; e < 4; e++)
      e4[e] = cg_float_cast(b, cg_mulf(b, st[4 * k + e], inv), et);
    MlirBlock then_block, outer = b->block;
    cg_if(b, c->col_ok[k], NULL, 0, false, &then_block, NULL);
    cg_builder_set_block(b, then_block);
    cg_store(b, cg_vector_from(b, e4, 4, v4o), cg_gep(b, c->o.base, cg_addi(b, ro, c->col[k]), et),
             8);
    cg_yield(b, NULL, 0);
    cg_builder_set_block(b, outer);
  }
  /* LSE = m + log(sum w): one thread per token (the one holding column 0). */
  MlirValue lse = cg_addf(b, m, cg_mulf(b, cg_log2f(b, sumw), cg_const_f32(b, CG_LN2)));
  MlirValue lo = cg_addi(b, cg_addi(b, cg_muli(b, c->b, c->lse.sb), cg_muli(b, c->h, c->lse.sh)),
                         cg_muli(b, t, c->lse.ss));
  MlirBlock then_block, outer = b->block;
  cg_if(b, first, NULL, 0, false, &then_block, NULL);
  cg_builder_set_block(b, then_block);
  cg_store(b, lse, cg_gep(b, c->lse.base, lo, b->f32), 4);
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
}

/* The thread's units u = u0, u0 + step, ... below uend; a unit is one
 * (head, token) row: the tokens of head h0 (combine kernel), or the packed
 * rows of one Q tile (fused split kernel). */
void lw_comb_units(Comb *c, MlirValue u0, MlirValue uend, MlirValue step, MlirValue first) {
  Lowerer *L = c->L;
  CgBuilder *b = &L->b;
  int na = 4 * c->nchunk;
  MlirBlock tb, around = b->block;
  cg_for(b, u0, uend, step, NULL, 0, &tb);
  cg_builder_set_block(b, tb);
  MlirValue u = mlirBlockGetArgument(tb, 0), t = u;
  c->h = c->h0;
  if (c->pack) {
    c->h = cg_addi(b, c->h0, cg_arith2(b, "arith.divui", u, c->q_len));
    t = cg_arith2(b, "arith.remui", u, c->q_len);
  }
  MlirValue init[4 * COMBINE_MAX_CHUNKS + 2];
  for (int i = 0; i <= na; i++)
    init[i] = cg_const_f32(b, 0.0);
  init[na + 1] = cg_const_f32(b, -__builtin_inf());
  MlirBlock sb;
  MlirOperation sl = cg_for(b, cg_const_i64(b, 0), c->nsplit, cg_const_i64(b, c->group), init,
                            na + 2, &sb);
  MlirBlock outer = b->block;
  cg_builder_set_block(b, sb);
  MlirValue st[4 * COMBINE_MAX_CHUNKS + 2];
  for (int i = 0; i < na + 2; i++)
    st[i] = mlirBlockGetArgument(sb, i + 1);
  comb_group(c, t, mlirBlockGetArgument(sb, 0), st);
  cg_yield(b, st, na + 2);
  cg_builder_set_block(b, outer);
  for (int i = 0; i < na + 2; i++)
    st[i] = cg_result(sl, i);
  comb_store(c, t, st, first);
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, around);
}

bool lw_comb_refs(Lowerer *L, const Op *op, Comb *c) {
  Func *f = (Func *)L->f;
  const char *names[4] = {"o_part", "lse_part", "o", "lse"};
  TensorRef *r[4] = {&c->opart, &c->lpart, &c->o, &c->lse};
  for (int i = 0; i < 4; i++) {
    const Value *v = func_arg(f, names[i]);
    if (!v || !lw_tensor_ref(L, op, v, r[i]))
      return false;
  }
  return true;
}

/* The thread layout: float4 column chunks of a unit, units side by side.
 * Sets the columns of c and the thread's first unit (offset), step and
 * whether it owns column 0; false (error reported) when dv is too wide. */
bool lw_comb_threads(Comb *c, int dv, MlirValue *u0, MlirValue *step, MlirValue *first) {
  Lowerer *L = c->L;
  CgBuilder *b = &L->b;
  int T = L->threads;
  c->bs0 = cg_muli(b, c->b, c->nsplit);
  c->nsm1 = cg_subi(b, c->nsplit, cg_const_i64(b, 1));
  c->v4 = mlirVectorTypeGet(1, (int64_t[]){4}, b->f32);
  int c4 = dv / 4; /* float4 chunks per token */
  int ptok = c4 <= T ? T / c4 : 1;
  c->nchunk = c4 <= T ? 1 : (c4 + T - 1) / T;
  if (c->nchunk > COMBINE_MAX_CHUNKS) {
    lw_error(L, NULL, "v_head_dim %d is too wide for the merge's %d threads", dv, T);
    return false;
  }
  c->group = COMBINE_LOADS / c->nchunk;
  MlirValue tid = cg_int_cast(b, L->tid, b->i64), c4v = cg_const_i64(b, c4);
  MlirValue tok0 = c->nchunk == 1 ? cg_arith2(b, "arith.divui", tid, c4v) : cg_const_i64(b, 0);
  MlirValue ch = c->nchunk == 1 ? cg_arith2(b, "arith.remui", tid, c4v) : tid;
  /* Threads past ptok * c4 have no unit: a huge offset starts them past the end. */
  MlirValue idle = cg_cmpi(b, "sge", tok0, cg_const_i64(b, ptok));
  *u0 = cg_select(b, idle, cg_const_i64(b, (int64_t)1 << 40), tok0);
  for (int k = 0; k < c->nchunk; k++) {
    MlirValue chunk = cg_addi_c(b, ch, (int64_t)k * T);
    c->col_ok[k] = cg_cmpi(b, "slt", chunk, c4v);
    c->col[k] = cg_muli_c(b, cg_select(b, c->col_ok[k], chunk, cg_const_i64(b, 0)), 4);
  }
  *first = cg_cmpi(b, "eq", ch, cg_const_i64(b, 0));
  *step = cg_const_i64(b, ptok);
  return true;
}
