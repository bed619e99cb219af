/* lower_decode.c - decode kernels (docs/decode.md): the split kernel's and
 * the combine kernel's parameters, their grid, and the memory ops that only
 * decode programs hold.
 *
 * - Parameters: the decode ABI table (25 for the split kernel, 10 for the
 *   combine kernel); the IR's %o_part / %lse_part are the workspace's two
 *   parts, dense in the IR's element order.
 * - Grid: the parallel loops over the batch, the heads and the splits take
 *   grid z, y, x (split kernel: (nsplit, kv_heads, batch)) or y, x (combine:
 *   (heads, batch)). Each is a grid-stride loop, so that any other parallel
 *   loop (the Q tiles of a group, or the query heads of a K/V head when
 *   pack-gqa is off) may simply run inside the block and the program stays
 *   correct whatever the pass pipeline left.
 * - Memory: every load and store of a decode kernel goes through a row map
 *   (Rows) that says where logical row R of the tile lives and whether it is
 *   there at all: plain rows below the extent and the optional limit operand,
 *   packed rows (head h*G + R/n, token R%n), or paged rows (slot R%P of page
 *   block_table[b, R/P], the table read only for R < limit). Tiles for the
 *   tensor cores are staged by cp.async with a zero fill for missing rows
 *   (stale cache rows may be NaN, and 0 * NaN would poison P V).
 * - reduce: an i1 tile to one flag for the whole block with one
 *   bar.red.and/or; other tiles through warp shuffles and shared memory.
 */
#include <stdio.h>
#include <string.h>

#include "codegen/lower_internal.h"
#include "codegen/meta_decode.h"
#include "mlir-c/BuiltinTypes.h"

/* ------------------------------------------------------- parameters */

enum { SPLIT_NPARAMS = 25, COMBINE_NPARAMS = 10 };

bool lw_decode_init(Lowerer *L) {
  const AttrList *a = &L->f->attrs;
  if (strcmp(attr_str(a, "mode", "forward"), "decode") != 0)
    return false;
  L->decode = true;
  L->combine = attr_get(a, "combine_of") != NULL;
  L->fused = cg_decode_fused(L->f);
  return true;
}

int lw_decode_param_types(Lowerer *L, MlirType *p) {
  CgBuilder *b = &L->b;
  if (L->combine) { /* o, lse, workspace, cache_seqlens, batch, q_len, nsplit, o strides */
    for (int i = 0; i < COMBINE_NPARAMS; i++)
      p[i] = i < 4 ? b->ptr : i < 7 ? b->i32 : b->i64;
    return COMBINE_NPARAMS;
  }
  /* q k v o lse workspace cache_seqlens block_table, batch q_len capacity
   * nsplit bt_stride, q/k/v/o strides (b, s, h). */
  for (int i = 0; i < SPLIT_NPARAMS; i++)
    p[i] = i < 8 ? b->ptr : i < 13 ? b->i32 : b->i64;
  return SPLIT_NPARAMS;
}

/* Programmatic dependent launch (sm_90+, docs/decode.md): the split kernel
 * lets the combine kernel be scheduled at once (it has nothing to hand over
 * early: the trigger only moves the combine's launch and prologue under the
 * split kernel's run), and the combine kernel waits, before its first read
 * of the workspace, until the split kernel has finished and its stores are
 * visible. Without a PDL launch the wait returns at once and the trigger
 * does nothing, so both are correct under a plain launch too. */
static void pdl_entry(Lowerer *L) {
  if (!cg_decode_pdl(L->f) || L->fused) /* a fused split kernel has no dependent */
    return;
  cg_ptx(&L->b, L->combine ? "griddepcontrol.wait;" : "griddepcontrol.launch_dependents;", NULL,
         "", 0, NULL, 0);
}

void lw_decode_params(Lowerer *L, MlirBlock entry) {
  CgBuilder *b = &L->b;
  MlirValue a[SPLIT_NPARAMS];
  int n = L->combine ? COMBINE_NPARAMS : SPLIT_NPARAMS;
  for (int i = 0; i < n; i++)
    a[i] = mlirBlockGetArgument(entry, i);
  if (L->combine) {
    L->p_o = a[0];
    L->p_lse = a[1];
    L->p_ws = a[2];
    L->p_seqlens = a[3];
    L->batch = cg_int_cast(b, a[4], b->i64);
    L->q_len = cg_int_cast(b, a[5], b->i64);
    L->nsplit = cg_int_cast(b, a[6], b->i64);
    for (int s = 0; s < 3; s++)
      L->strides[3][s] = a[7 + s];
  } else {
    lw_bind_io_params(L, a, 13);
    L->p_seqlens = a[6];
    L->p_bt = a[7];
    L->batch = cg_int_cast(b, a[8], b->i64);
    L->q_len = cg_int_cast(b, a[9], b->i64);
    L->capacity = cg_int_cast(b, a[10], b->i64);
    L->nsplit = cg_int_cast(b, a[11], b->i64);
    L->bt_stride = cg_int_cast(b, a[12], b->i64);
  }
  /* The forward names, for code that asks for them. */
  L->seqlen_q = L->q_len;
  L->seqlen_k = mlirValueIsNull(L->capacity) ? L->q_len : L->capacity;
  pdl_entry(L);
}

MlirValue lw_decode_index_arg(Lowerer *L, const char *name) {
  if (strcmp(name, "q_len") == 0)
    return L->q_len;
  if (strcmp(name, "capacity") == 0)
    return L->capacity;
  if (strcmp(name, "nsplit") == 0)
    return L->nsplit;
  return (MlirValue){NULL};
}

/* ------------------------------------------------------------- grid */

/* The grid dimension of a parallel loop, or NULL to run it in the block:
 * the loop to %batch, the loop to %nsplit, and the head loop (its bound a
 * constant: kv_heads, or heads when pack-gqa is off or in the combine). */
static const char *loop_dim(Lowerer *L, const Op *op, unsigned *used) {
  const Value *hi = op->operands[1];
  const char *n = hi->block == L->f->body && hi->name ? hi->name : "";
  const char *dim = NULL;
  if (strcmp(n, "batch") == 0)
    dim = L->combine ? "y" : "z";
  else if (strcmp(n, "nsplit") == 0 && !L->combine)
    dim = "x";
  else if (hi->def && hi->def->kind == OP_CONST)
    dim = L->combine ? "x" : "y";
  if (!dim || (*used & (1u << (dim[0] - 'x'))))
    return NULL;
  *used |= 1u << (dim[0] - 'x');
  return dim;
}

static MlirValue grid_dim(CgBuilder *b, const char *dim) {
  char text[32];
  snprintf(text, sizeof text, "#gpu<dim %s>", dim);
  CgNamedAttr a = {"dimension", cg_attr(b, text)};
  return cg_int_cast(b, cg_op1(b, "gpu.grid_dim", NULL, 0, b->index, &a, 1), b->i64);
}

/* ------------------------------------------------- the combine kernel */

/* The combine kernel (split-kv's @NAME_combine, docs/decode.md) merges, for
 * each (b, h, token), nsplit partial rows of dv floats weighted by
 * e^{lse_s - M}. Its tile IR body states that merge on 16-row tiles (the
 * interpreter runs it), but lowered as tiles it is slow: a 16-row tile holds
 * q_len <= 16 rows, so at q_len 1 four lanes of the warp carry data, each
 * split is a serial load round trip, and the max and the weighted sum are two
 * passes (docs/perf.md: ~0.6 us per split). So the body of the head loop is
 * lowered here instead, with the same arithmetic on a layout made for it:
 *   - a thread owns 4 adjacent columns of one token (float4 loads of o_part,
 *     dv/4 threads per token, tokens side by side when dv/4 < threads);
 *   - one online pass over the splits, COMBINE_LOADS float4 loads (all of a
 *     group's splits and its lse values) issued before any is used, so a
 *     group costs one memory round trip: m' = max(m, lse_s...), rescale by
 *     e^{m - m'}, add w_s O_s with w_s = e^{lse_s - m'};
 *   - an empty split (lse -inf) adds nothing and its o_part (maybe never
 *     written) is never used: the product is selected away, not multiplied
 *     by 0, so NaN garbage cannot leak; all splits empty: O = 0, LSE = -inf. */
enum { COMBINE_LOADS = 16, COMBINE_MAX_CHUNKS = 8 };

#define COMB_LOG2E 1.4426950408889634
#define COMB_LN2 0.6931471805599453

typedef struct Comb {
  Lowerer *L;
  TensorRef opart, lpart, o, lse;
  MlirValue b, h, bs0, nsm1;            /* i64; h: the unit's query head */
  MlirValue h0;                         /* i64: packed: first head of the group, else the head */
  int pack;                             /* unit u is head h0 + u / q_len, token u % q_len;
                                         * 0: head h0, token u */
  bool vol;                             /* fused: partials other blocks wrote, past L1 */
  MlirValue col[COMBINE_MAX_CHUNKS];    /* first column of each chunk (i64, clamped) */
  MlirValue col_ok[COMBINE_MAX_CHUNKS]; /* i1: the chunk is inside dv */
  int nchunk, group;
  MlirType v4;
} Comb;

static MlirValue exp_f32(CgBuilder *b, MlirValue x) {
  MlirValue y = cg_mulf(b, x, cg_const_f32(b, COMB_LOG2E));
  return cg_intrinsic(b, "llvm.exp2.f32", &y, 1, b->f32);
}

static MlirValue maxnum_f32(CgBuilder *b, MlirValue x, MlirValue y) {
  MlirValue ops[2] = {x, y};
  return cg_intrinsic(b, "llvm.maxnum.f32", ops, 2, b->f32);
}

/* lse_part and o_part of split s (clamped into range; lse -inf past nsplit). */
static void comb_load(Comb *c, MlirValue t, MlirValue s, MlirValue *lse, MlirValue *ov) {
  CgBuilder *b = &c->L->b;
  MlirValue ok = cg_cmpi(b, "slt", s, c->L->nsplit);
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
    mn = maxnum_f32(b, mn, lse[u]);
  MlirValue ninf = cg_const_f32(b, -__builtin_inf()), zero = cg_const_f32(b, 0.0);
  MlirValue ms = cg_select(b, cg_cmpf(b, "oeq", mn, ninf), zero, mn);
  MlirValue alpha = exp_f32(b, cg_subf(b, m, ms)); /* m = -inf: 0 (acc is 0 then) */
  for (int i = 0; i <= na; i++)
    st[i] = cg_mulf(b, st[i], alpha);
  for (int u = 0; u < c->group; u++) {
    MlirValue w = exp_f32(b, cg_subf(b, lse[u], ms));
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
  MlirValue lse = cg_addf(b, m, cg_mulf(b, cg_intrinsic(b, "llvm.nvvm.lg2.approx.f", &sumw, 1,
                                                        b->f32),
                                        cg_const_f32(b, COMB_LN2)));
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
static void comb_units(Comb *c, MlirValue u0, MlirValue uend, MlirValue step, MlirValue first) {
  Lowerer *L = c->L;
  CgBuilder *b = &L->b;
  int na = 4 * c->nchunk;
  MlirBlock tb, around = b->block;
  cg_for(b, u0, uend, step, NULL, 0, &tb);
  cg_builder_set_block(b, tb);
  MlirValue u = mlirBlockGetArgument(tb, 0), t = u;
  c->h = c->h0;
  if (c->pack) {
    c->h = cg_addi(b, c->h0, cg_arith2(b, "arith.divui", u, L->q_len));
    t = cg_arith2(b, "arith.remui", u, L->q_len);
  }
  MlirValue init[4 * COMBINE_MAX_CHUNKS + 2];
  for (int i = 0; i <= na; i++)
    init[i] = cg_const_f32(b, 0.0);
  init[na + 1] = cg_const_f32(b, -__builtin_inf());
  MlirBlock sb;
  MlirOperation sl = cg_for(b, cg_const_i64(b, 0), L->nsplit, cg_const_i64(b, c->group), init,
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

static bool comb_refs(Lowerer *L, const Op *op, Comb *c) {
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

static bool comb_threads(Comb *c, int dv, MlirValue *u0, MlirValue *step, MlirValue *first);

/* The body of the combine's head loop for (b, h) = (the batch loop's iv, hv). */
static void combine_head(Lowerer *L, const Op *op, MlirValue hv, MlirBlock body) {
  CgBuilder *b = &L->b;
  cg_builder_set_block(b, body);
  const Op *bl = op->parent ? op->parent->parent_op : NULL;
  int dv = (int)attr_int(&L->f->attrs, "v_head_dim", 0);
  Comb c = {.L = L, .h0 = hv};
  if (!bl || bl->kind != OP_FOR || dv <= 0 || dv % 4 || !comb_refs(L, op, &c)) {
    if (!L->failed)
      lw_error(L, op, "the combine kernel needs a batch loop around its head loop and v_head_dim %% 4 == 0");
    cg_yield(b, NULL, 0);
    return;
  }
  c.b = lw_get(L, for_iv((Op *)bl))->v;
  MlirValue u0, step, first;
  if (comb_threads(&c, dv, &u0, &step, &first))
    comb_units(&c, u0, L->q_len, step, first);
  cg_yield(b, NULL, 0);
}

/* The thread layout: float4 column chunks of a unit, units side by side.
 * Sets the columns of c and the thread's first unit (offset), step and
 * whether it owns column 0; false (error reported) when dv is too wide. */
static bool comb_threads(Comb *c, int dv, MlirValue *u0, MlirValue *step, MlirValue *first) {
  Lowerer *L = c->L;
  CgBuilder *b = &L->b;
  int T = L->threads;
  c->bs0 = cg_muli(b, c->b, L->nsplit);
  c->nsm1 = cg_subi(b, L->nsplit, cg_const_i64(b, 1));
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

/* A grid-stride loop: iv = lo + block id, step grid dim (one step when the
 * launch's grid matches the loop, as the runtime's does). The used-dims mask
 * is per kernel: nested loops never share a dim. */
void lw_decode_parallel_for(Lowerer *L, const Op *op) {
  unsigned used = (unsigned)L->parallel_seen;
  const char *dim = loop_dim(L, op, &used);
  if (!dim) {
    lw_lower_seq_for(L, op);
    return;
  }
  int saved = L->parallel_seen;
  L->parallel_seen = (int)used;
  CgBuilder *b = &L->b;
  MlirValue lo = lw_get(L, op->operands[0])->v, hi = lw_get(L, op->operands[1])->v;
  MlirValue start = cg_addi(b, lo, cg_int_cast(b, cg_block_id(b, dim), b->i64));
  MlirBlock body;
  cg_for(b, start, hi, grid_dim(b, dim), NULL, 0, &body);
  lw_set(L, for_iv((Op *)op), lw_scalar(L, type_index(), mlirBlockGetArgument(body, 0)));
  if (L->combine && dim[0] == 'x') { /* the head loop: one (b, h) per step */
    MlirBlock outer = b->block;
    combine_head(L, op, mlirBlockGetArgument(body, 0), body);
    cg_builder_set_block(b, outer);
    L->parallel_seen = saved;
    return;
  }
  /* A second step rewrites the buffers the first one read. */
  L->smem_read_since_barrier = true;
  lw_lower_region(L, for_body((Op *)op), body);
  L->smem_read_since_barrier = true;
  L->parallel_seen = saved;
}

/* ------------------------------------------------------------- rows */

/* Where logical row R = row0 + r of a tile lives. */
typedef struct Rows {
  TensorRef t;
  MlirValue b, h, row0; /* i64 */
  MlirValue limit;      /* rows at or past it are missing (i64) */
  int pack;             /* G query heads per K/V head; 0: not packed */
  int page;             /* page size; 0: not paged */
  MlirValue bt_row;     /* paged: !llvm.ptr<1> to block_table[b, 0] */
  /* paged, a staged tile of at most page rows: it spans pages pi_lo and
   * pi_lo + 1 at most, whose entries are read once per tile instead of once
   * per 16-byte chunk. Row R of the tile then lives at base + R * ss, base
   * = base_lo below row split_row (= (pi_lo + 1) * P) and base_hi from it:
   * per chunk one compare and select more than a contiguous cache, instead
   * of a divide, a remainder and two 64-bit multiply-adds. Null otherwise. */
  MlirValue split_row, base_lo, base_hi;
  MlirValue bh;         /* plain: b * sb + h * sh */
  int row0_mult;        /* row0 is a multiple of it by construction (row0_multiple); 0 */
} Rows;

/* block_table[b, pi] as i64 when `ok`, else 0 (the table is read only for
 * rows that are there). */
static MlirValue page_entry(Lowerer *L, const Rows *m, MlirValue pi, MlirValue ok) {
  CgBuilder *b = &L->b;
  MlirBlock tb, eb, outer = b->block;
  MlirOperation ifop = cg_if(b, ok, &b->i32, 1, true, &tb, &eb);
  cg_builder_set_block(b, tb);
  MlirValue e = cg_load(b, cg_gep(b, m->bt_row, pi, b->i32), b->i32, 4);
  cg_yield(b, &e, 1);
  cg_builder_set_block(b, eb);
  MlirValue z = cg_const_i32(b, 0);
  cg_yield(b, &z, 1);
  cg_builder_set_block(b, outer);
  return cg_int_cast(b, cg_result(ifop, 0), b->i64);
}

/* Element offset (i64, 0 for a missing row) and presence (i1) of row r (i32). */
static void row_at(Lowerer *L, const Rows *m, MlirValue r, MlirValue *off, MlirValue *ok) {
  CgBuilder *b = &L->b;
  MlirValue R = cg_addi(b, m->row0, cg_int_cast(b, r, b->i64));
  MlirValue zero = cg_const_i64(b, 0);
  *ok = cg_cmpi(b, "slt", R, m->limit);
  MlirValue o;
  if (m->pack) {
    /* i32 division: R < G * q_len <= 2^31 for every row that is there. */
    MlirValue R32 = cg_int_cast(b, R, b->i32), n = cg_int_cast(b, m->t.extent, b->i32);
    MlirValue g = cg_int_cast(b, cg_arith2(b, "arith.divui", R32, n), b->i64);
    MlirValue tok = cg_int_cast(b, cg_arith2(b, "arith.remui", R32, n), b->i64);
    MlirValue head = cg_addi(b, cg_muli_c(b, m->h, m->pack), g);
    o = cg_addi(b, cg_addi(b, cg_muli(b, m->b, m->t.sb), cg_muli(b, head, m->t.sh)),
                cg_muli(b, tok, m->t.ss));
  } else if (m->page && !mlirValueIsNull(m->base_lo)) {
    MlirValue lo = cg_cmpi(b, "slt", R, m->split_row);
    o = cg_addi(b, cg_select(b, lo, m->base_lo, m->base_hi), cg_muli(b, R, m->t.ss));
  } else if (m->page) {
    MlirValue sr = cg_select(b, *ok, R, zero);
    MlirValue pi = cg_arith2(b, "arith.divui", sr, cg_const_i64(b, m->page));
    MlirValue slot = cg_arith2(b, "arith.remui", sr, cg_const_i64(b, m->page));
    MlirValue page = page_entry(L, m, pi, *ok);
    o = cg_addi(b, cg_addi(b, cg_muli(b, page, m->t.sb), cg_muli(b, slot, m->t.ss)),
                cg_muli(b, m->h, m->t.sh));
  } else {
    o = cg_addi(b, m->bh, cg_muli(b, cg_select(b, *ok, R, zero), m->t.ss));
  }
  *off = cg_select(b, *ok, o, zero);
}

static MlirValue scalar_of(Lowerer *L, const Op *op, int i) {
  CgVal *v = lw_get(L, op->operands[i]);
  if (v->kind != CV_SCALAR) {
    lw_error(L, op, "operand %d must be a scalar", i);
    return (MlirValue){NULL};
  }
  return v->v;
}

/* The row map of a load/store: tensor operand t, then b, h, row0 at `at`. */
static bool make_rows(Lowerer *L, const Op *op, int t, int at, Rows *m) {
  CgBuilder *b = &L->b;
  memset(m, 0, sizeof *m);
  if (!lw_tensor_ref(L, op, op->operands[t], &m->t))
    return false;
  m->b = scalar_of(L, op, at);
  m->h = scalar_of(L, op, at + 1);
  m->row0 = scalar_of(L, op, at + 2);
  if (L->failed)
    return false;
  m->pack = (int)attr_int(&op->attrs, "pack", 0);
  m->limit = m->pack ? cg_muli_c(b, m->t.extent, m->pack) : m->t.extent;
  if (!m->pack)
    m->bh = cg_addi(b, cg_muli(b, m->b, m->t.sb), cg_muli(b, m->h, m->t.sh));
  return true;
}

/* ------------------------------------------------------------ loads */

/* C when row0 (IR) is `mul x, C` for a constant C > 0 (a K/V tile's first
 * row, j * tile_kv), else 0. */
static int row0_multiple(const Value *row0) {
  const Op *d = row0->def;
  if (!d || d->kind != OP_MUL || d->noperands != 2)
    return 0;
  for (int i = 0; i < 2; i++) {
    double c;
    if (value_const(d->operands[i], &c) && c > 0 && c < (1 << 30) && (int)c == c)
      return (int)c;
  }
  return 0;
}

/* A tile of R <= page rows starting at row0 touches pages row0 / P and
 * (row0 + R - 1) / P only (the same one when row0 is page-aligned): both
 * entries up front, clamped to the rows that are there. */
static void hoist_pages(Lowerer *L, Rows *m, int R) {
  CgBuilder *b = &L->b;
  MlirValue P = cg_const_i64(b, m->page), zero = cg_const_i64(b, 0);
  MlirValue ok_lo = cg_cmpi(b, "slt", m->row0, m->limit);
  MlirValue pi_lo = cg_arith2(b, "arith.divui", cg_select(b, ok_lo, m->row0, zero), P);
  MlirValue last = cg_arith2(b, "arith.minsi", cg_addi(b, m->row0, cg_const_i64(b, R - 1)),
                             cg_subi(b, m->limit, cg_const_i64(b, 1)));
  MlirValue ok_hi = cg_arith2(b, "arith.andi", ok_lo, cg_cmpi(b, "sge", last, zero));
  MlirValue pi_hi = cg_arith2(b, "arith.divui", cg_select(b, ok_hi, last, zero), P);
  MlirValue pg_lo = page_entry(L, m, pi_lo, ok_lo), pg_hi = page_entry(L, m, pi_hi, ok_hi);
  /* Rows of page pi_lo are below split_row; rows at or past it (only when
   * the tile spans two pages) are in pi_lo + 1 = pi_hi. */
  m->split_row = cg_muli(b, cg_addi(b, pi_lo, cg_const_i64(b, 1)), P);
  MlirValue hsh = cg_muli(b, m->h, m->t.sh);
  m->base_lo = cg_subi(b, cg_addi(b, cg_muli(b, pg_lo, m->t.sb), hsh),
                       cg_muli(b, cg_muli(b, pi_lo, P), m->t.ss));
  m->base_hi = cg_subi(b, cg_addi(b, cg_muli(b, pg_hi, m->t.sb), hsh),
                       cg_muli(b, m->split_row, m->t.ss));
}

static void rows_chunk(Lowerer *L, void *ctx, int it, MlirValue r, MlirValue cc, MlirValue *src,
                       MlirValue *inb) {
  const Rows *m = ctx;
  CgBuilder *b = &L->b;
  MlirValue off;
  (void)it;
  row_at(L, m, r, &off, inb);
  off = cg_addi(b, off, cg_int_cast(b, cg_muli_c(b, cc, 8), b->i64));
  *src = cg_gep(b, m->t.base, off, m->t.et);
}

/* A paged tile whose pages are known per copy: rows row0 .. row0 + R - 1
 * with row0 a multiple of C (Rows.row0_mult) lie in one page when C divides
 * P and R <= C, or fill R / P whole pages when P divides C and R (and a
 * thread's rows, step apart, cross pages only between copies: step divides
 * P). Then copy it reads page it / per_page of the tile, and each page is a
 * RowStream of its own: one block-table entry per page and tile, and per
 * copy the contiguous cache's pointer add, compare and select (H100,
 * docs/perf.md 2026-11-22: paged bench rows 0.3-2.6% faster). Only in the
 * 16-row warp-split kernels: in the 64-row d128 kernel ptxas then settled on
 * 168 registers and 60 bytes of spills, 4-10% slower. Returns false for
 * other tiles. */
static bool paged_stream(Lowerer *L, Rows *m, const StagePlan *p, int R, RowStream *rs,
                         StageSource *src) {
  CgBuilder *b = &L->b;
  if (attr_int(&L->f->attrs, "tile_q", 0) > 16)
    return false;
  int P = m->page, C = m->row0_mult;
  if (!p->regular || m->pack || P <= 0 || C <= 0)
    return false;
  bool one = P % C == 0 && R <= C;
  bool whole = C % P == 0 && R % P == 0 && p->step > 0 && P % p->step == 0;
  int npages = one ? 1 : R / P;
  if (!(one || whole) || npages > 16)
    return false;
  memset(rs, 0, sizeof *rs);
  rs->p = p;
  rs->et = m->t.et;
  rs->per_page = one ? p->iters : P / p->step;
  MlirValue Pv = cg_const_i64(b, P);
  MlirValue pi0 = cg_arith2(b, "arith.divui", m->row0, Pv);
  MlirValue r0 = cg_int_cast(b, p->r_reg, b->i64);
  MlirValue R0 = cg_addi(b, m->row0, r0);
  /* Where a thread's first copy of each page starts within the page. */
  MlirValue in_page = cg_addi(b, cg_subi(b, m->row0, cg_muli(b, pi0, Pv)), r0);
  MlirValue col = cg_int_cast(b, cg_muli_c(b, p->cc_reg, 8), b->i64);
  MlirValue rest = cg_addi(b, cg_addi(b, cg_muli(b, m->h, m->t.sh), cg_muli(b, in_page, m->t.ss)),
                           col);
  for (int q = 0; q < npages; q++) {
    MlirValue ok = cg_cmpi(b, "slt", cg_addi_c(b, m->row0, (int64_t)q * P), m->limit);
    MlirValue entry = page_entry(L, m, cg_addi_c(b, pi0, q), ok);
    rs->page_ptr[q] = cg_gep(b, m->t.base, cg_addi(b, cg_muli(b, entry, m->t.sb), rest), m->t.et);
  }
  /* A missing row's copy names the cache's base: readable, it reads nothing. */
  *src = lw_stream_source(L, rs, &m->t, R0, m->limit, m->t.base);
  return true;
}

/* cp.async of the tile's rows into shared memory, 16 bytes a thread; rows
 * that are not there are zero-filled (src-size 0 reads nothing). A
 * contiguous cache's rows are a RowStream (lw_row_stream), a paged cache's
 * a RowStream per page where each copy's page is known (paged_stream);
 * other paged and packed tiles take rows_chunk (a single stream with a
 * per-copy select between two pages kept sixteen pointers live in the d256
 * kernels: 1.2 KB of spills, docs/perf.md 2026-11-22). */
static void stage_rows(Lowerer *L, Rows *m, CgVal *s) {
  StagePlan p = lw_stage_plan(L, s);
  RowStream rs;
  StageSource src;
  if (m->page && paged_stream(L, m, &p, s->type.rows, &rs, &src)) {
    lw_stage_copies(L, s, &p, &src);
    return;
  }
  if (m->page && !m->pack && s->type.rows <= m->page)
    hoist_pages(L, m, s->type.rows);
  if (!p.regular || m->pack || m->page) {
    StageSource src = {NULL, rows_chunk, m};
    lw_stage_copies(L, s, &p, &src);
    return;
  }
  src = lw_row_stream(L, &rs, &p, &m->t, m->bh, m->row0, m->limit, m->t.base);
  lw_stage_copies(L, s, &p, &src);
}

/* row_at for lw_load_rows and lw_store_rows (ctx: the Rows). */
static void rows_at(Lowerer *L, void *ctx, MlirValue r, MlirValue *off, MlirValue *ok) {
  row_at(L, ctx, r, off, ok);
}

void lw_decode_load(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  bool paged = op->kind == OP_LOAD_PAGED;
  int at = paged ? 2 : 1, nops = op->noperands;
  if (nops != (paged ? 6 : 4) && !(!paged && nops == 5)) {
    lw_error(L, op, "unexpected operands");
    return;
  }
  Rows m;
  if (!make_rows(L, op, 0, at, &m))
    return;
  if (nops == at + 4) { /* the limit: a sequence's cache length */
    MlirValue lim = scalar_of(L, op, at + 3);
    m.limit = paged ? lim : cg_arith2(b, "arith.minsi", m.limit, lim);
  }
  if (paged) {
    m.page = (int)attr_int(&op->attrs, "page_size", 0);
    const Value *bt = op->operands[1];
    if (m.page <= 0 || (m.page & (m.page - 1)) || mlirValueIsNull(L->p_bt) ||
        !bt->name || strcmp(bt->name, "block_table") != 0) {
      lw_error(L, op, "needs the kernel's block table and a power-of-2 page size");
      return;
    }
    MlirValue row = cg_muli(b, m.b, L->bt_stride);
    m.bt_row = cg_gep(b, cg_addrspacecast(b, L->p_bt, b->gptr), row, b->i32);
    m.row0_mult = row0_multiple(op->operands[at + 2]);
  }
  Type rt = op->results[0]->type;
  if (rt.kind != TYPE_TILE) {
    lw_error(L, op, "the result must be a tile");
    return;
  }
  if (!lw_is_staged_type(rt)) {
    lw_load_rows(L, op, &m.t, rows_at, &m);
    return;
  }
  if (rt.cols % 8 || rt.cols != m.t.cols || (m.t.elem != ELEM_BF16 && m.t.elem != ELEM_F16)) {
    lw_error(L, op, "a tile staged for the tensor cores must be whole f16/bf16 rows, 8-aligned");
    return;
  }
  CgVal *s = lw_stage_begin(L, op);
  stage_rows(L, &m, s);
  lw_stage_end(L, op, s);
}

void lw_decode_load_scalar(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  const Value *t = op->operands[0];
  MlirValue i = scalar_of(L, op, 1);
  if (L->failed)
    return;
  MlirValue p = t->name && strcmp(t->name, "cache_seqlens") == 0 ? L->p_seqlens
                : t->name && strcmp(t->name, "block_table") == 0 ? L->p_bt
                                                                : (MlirValue){NULL};
  if (mlirValueIsNull(p) || t->type.elem != ELEM_I32 || t->type.rank != 1) {
    lw_error(L, op, "reads only the kernel's rank 1 i32 tensors (cache_seqlens)");
    return;
  }
  MlirValue g = cg_gep(b, cg_addrspacecast(b, p, b->gptr), i, b->i32);
  MlirValue v = cg_int_cast(b, cg_load(b, g, b->i32, 4), b->i64);
  lw_set(L, op->results[0], lw_scalar(L, op->results[0]->type, v));
}

/* ----------------------------------------------------------- stores */

static void fused_merge(Lowerer *L, const Op *st);

/* A store to a decode tensor (o, lse, o_part, lse_part): rows addressed like
 * the loads' (make_rows); after the lse_part store the fused merge. */
void lw_decode_store(Lowerer *L, const Op *op) {
  Rows m;
  if (op->noperands != 5 || !make_rows(L, op, 0, 1, &m))
    return;
  lw_store_rows(L, op, &m.t, rows_at, &m);
  /* split-kv stores o_part, then lse_part: the unit's partials are out. */
  const Value *t = op->operands[0];
  if (L->fused && t->name && strcmp(t->name, "lse_part") == 0)
    fused_merge(L, op);
}

/* ----------------------------------------------------------- reduce */

typedef enum RKind { RK_MAX, RK_MIN, RK_SUM } RKind;

static MlirValue rcombine(Lowerer *L, RKind k, ElemType et, MlirValue a, MlirValue c) {
  CgBuilder *b = &L->b;
  if (et == ELEM_I1)
    return cg_arith2(b, k == RK_MIN ? "arith.andi" : "arith.ori", a, c);
  if (et == ELEM_F32) {
    MlirValue ops[2] = {a, c};
    if (k == RK_SUM)
      return cg_addf(b, a, c);
    return cg_intrinsic(b, k == RK_MAX ? "llvm.maxnum.f32" : "llvm.minnum.f32", ops, 2, b->f32);
  }
  return k == RK_SUM ? cg_addi(b, a, c) : cg_arith2(b, k == RK_MAX ? "arith.maxsi" : "arith.minsi", a, c);
}

/* This thread's fold of its elements. A sum counts each element once: a
 * row vector's quad, a column vector's row groups and a tile every warp
 * holds are copies. */
static MlirValue thread_fold(Lowerer *L, const CgVal *x, RKind k, ElemType et) {
  CgBuilder *b = &L->b;
  MlirValue acc = x->e[0];
  for (int i = 1; i < x->ne; i++)
    acc = rcombine(L, k, et, acc, x->e[i]);
  if (k != RK_SUM)
    return acc;
  MlirValue own = cg_const_int(b, b->i1, 1);
  if (x->g.cls == TC_ROWV || x->g.cls == TC_ONE)
    own = cg_cmpi(b, "eq", L->lq, cg_const_i32(b, 0));
  if (x->g.cls == TC_COLV || x->g.cls == TC_ONE)
    own = cg_arith2(b, "arith.andi", own, cg_cmpi(b, "eq", L->lg, cg_const_i32(b, 0)));
  if (!x->g.row_split && !x->g.col_split)
    own = cg_arith2(b, "arith.andi", own, cg_cmpi(b, "eq", L->warp, cg_const_i32(b, 0)));
  MlirType t = mlirValueGetType(acc);
  MlirValue zero = et == ELEM_F32 ? cg_const_float(b, t, 0.0) : cg_const_int(b, t, 0);
  return cg_select(b, own, acc, zero);
}

/* Flags: one bar.red over the block (every thread's flag, AND or OR). */
static MlirValue reduce_flags(Lowerer *L, MlirValue flag, RKind k) {
  CgBuilder *b = &L->b;
  MlirValue ops[2] = {cg_const_i32(b, 0), flag};
  return cg_intrinsic(b, k == RK_MIN ? "llvm.nvvm.barrier.cta.red.and.aligned.all"
                                     : "llvm.nvvm.barrier.cta.red.or.aligned.all",
                      ops, 2, b->i1);
}

/* Numbers: shuffles within the warp, then one slot per warp in shared
 * memory (a buffer of its own: the block's scratch belongs to xwarp_reduce). */
static MlirValue reduce_values(Lowerer *L, MlirValue v, RKind k, ElemType et) {
  CgBuilder *b = &L->b;
  for (int mask = 16; mask >= 1; mask /= 2)
    v = rcombine(L, k, et, v, cg_shuffle_xor(b, v, mask));
  if (L->warps == 1)
    return v;
  int off = lw_alloc_smem(L, 4 * L->warps);
  MlirType t = mlirValueGetType(v);
  if (L->smem_read_since_barrier)
    lw_barrier(L);
  MlirBlock wr, outer = b->block;
  cg_if(b, cg_cmpi(b, "eq", L->lane, cg_const_i32(b, 0)), NULL, 0, false, &wr, NULL);
  cg_builder_set_block(b, wr);
  MlirValue mine = cg_addi_c(b, cg_muli_c(b, L->warp, 4), off);
  cg_store(b, v, cg_gep(b, L->smem, mine, b->i8), 4);
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
  lw_barrier(L);
  MlirValue acc = (MlirValue){NULL};
  for (int w = 0; w < L->warps; w++) {
    MlirValue x = cg_load(b, cg_gep(b, L->smem, cg_const_i32(b, off + 4 * w), b->i8), t, 4);
    acc = w ? rcombine(L, k, et, acc, x) : x;
  }
  L->smem_read_since_barrier = true;
  return acc;
}

void lw_decode_reduce(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  const CgVal *x = lw_get(L, op->operands[0]);
  const char *ks = attr_str(&op->attrs, "kind", "max");
  RKind k = strcmp(ks, "min") == 0 ? RK_MIN : strcmp(ks, "sum") == 0 ? RK_SUM : RK_MAX;
  Type rt = op->results[0]->type;
  ElemType et = x->type.elem == ELEM_F16 || x->type.elem == ELEM_BF16 ? ELEM_F32 : x->type.elem;
  if (x->kind == CV_SCALAR) {
    lw_set(L, op->results[0], lw_scalar(L, rt, x->v));
    return;
  }
  if (x->kind != CV_TILE || (x->splat && k == RK_SUM) || (et == ELEM_I1 && k == RK_SUM)) {
    lw_error(L, op, "expects a register tile (and no sum of flags or of a uniform tile)");
    return;
  }
  MlirValue r;
  if (x->splat)
    r = x->v; /* every element is this value */
  else if (et == ELEM_I1)
    r = reduce_flags(L, thread_fold(L, x, k, et), k);
  else
    r = reduce_values(L, thread_fold(L, x, k, et), k, et);
  if (rt.elem == ELEM_INDEX && et == ELEM_INDEX)
    r = cg_int_cast(b, r, b->i64); /* index tiles hold i32 */
  lw_set(L, op->results[0], lw_scalar(L, rt, r));
}

/* ------------------------------------------------------ fused combine */

/* The split kernel merges its own partials (docs/decode.md, "Fused
 * combine"), which saves the combine kernel's launch and its run after the
 * split kernel's last block. A unit (sequence b, head-loop iteration h, Q
 * tile q0 / rows) is computed by nsplit blocks, one per split; each, after
 * storing its o_part/lse_part rows:
 *   bar.sync; thread 0: old = atom.acq_rel.gpu.add counter[unit], 1
 *   (fused_arrive: the ordering both ways, no separate fences);
 *   last = (old == nsplit - 1), thread 0 resets the counter to 0 (no other
 *   block of this launch touches it again; the next launch finds it zeroed);
 *   one bar.red.or hands `last` to the block;
 *   last block: merge every row of the unit as the combine kernel would
 *   (comb_units), loading the partials volatile (other SMs wrote them: a
 *   line of lse_part that this SM cached earlier may be stale).
 * The counters are i32s right before the workspace (the runtime puts
 * round_up(batch * N, 64) of them there, N = metadata combine_fused, and
 * zeroes them when it first hands out that memory). */
static MlirValue fused_counter(Lowerer *L, MlirValue bv, MlirValue h, MlirValue q0, int rows) {
  CgBuilder *b = &L->b;
  const AttrList *a = &L->f->attrs;
  int n = cg_decode_counters(L->f);
  int pack = (int)attr_int(a, "pack", 0), br = (int)attr_int(a, "tile_q", rows);
  int nq = n / (int)attr_int(a, pack ? "kv_heads" : "heads", 1);
  MlirValue tile = cg_arith2(b, "arith.divui", q0, cg_const_i64(b, br > 0 ? br : rows));
  MlirValue unit = cg_addi(b, cg_muli_c(b, cg_addi(b, cg_muli_c(b, bv, n / nq), h), nq), tile);
  MlirValue all = cg_muli_c(b, L->batch, n);
  MlirValue pad = cg_arith2(b, "arith.andi", cg_addi_c(b, all, 63), cg_const_i64(b, ~(int64_t)63));
  return cg_gep(b, L->p_ws, cg_subi(b, unit, pad), b->i32);
}

/* Thread 0's arrival: true in every thread of the block that came last.
 * The barrier orders every thread's partial stores before thread 0's
 * atom.acq_rel, whose release is cumulative over them (PTX memory model:
 * what happens before it through bar.sync); its acquire, handed on by
 * bar.red, orders the last block's loads of the others' partials after
 * their arrivals. No separate fence: each was a round trip on the path
 * of the last block (docs/perf.md 2026-11-22). */
static MlirValue fused_arrive(Lowerer *L, MlirValue ctr) {
  CgBuilder *b = &L->b;
  lw_barrier(L);
  MlirBlock tb, eb, outer = b->block;
  MlirOperation ifop = cg_if(b, cg_cmpi(b, "eq", L->tid, cg_const_i32(b, 0)), &b->i1, 1, true,
                             &tb, &eb);
  cg_builder_set_block(b, tb);
  MlirValue addr = cg_op1(b, "llvm.ptrtoint", &ctr, 1, b->i64, NULL, 0);
  MlirValue old = cg_const_i32(b, 0);
  cg_ptx(b, "atom.acq_rel.gpu.global.add.u32 $0, [$1], 1;", &addr, "l", 1, &old, 1);
  MlirValue nm1 = cg_int_cast(b, cg_subi(b, L->nsplit, cg_const_i64(b, 1)), b->i32);
  MlirValue last = cg_cmpi(b, "eq", old, nm1);
  MlirBlock rb, around = b->block;
  cg_if(b, last, NULL, 0, false, &rb, NULL);
  cg_builder_set_block(b, rb);
  cg_store(b, cg_const_i32(b, 0), ctr, 4); /* seen by the next launch */
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, around);
  cg_yield(b, &last, 1);
  cg_builder_set_block(b, eb);
  MlirValue no = cg_const_int(b, b->i1, 0);
  cg_yield(b, &no, 1);
  cg_builder_set_block(b, outer);
  MlirValue ops[2] = {cg_const_i32(b, 0), cg_result(ifop, 0)};
  MlirValue any = cg_intrinsic(b, "llvm.nvvm.barrier.cta.red.or.aligned.all", ops, 2, b->i1);
  L->epoch++; /* bar.red is a barrier too */
  return any;
}

/* st: split-kv's `store %lse_part, %bs, %h, %q0, %lset {pack}`. */
static void fused_merge(Lowerer *L, const Op *st) {
  CgBuilder *b = &L->b;
  int dv = (int)attr_int(&L->f->attrs, "v_head_dim", 0);
  int rows = st->operands[4]->type.rows, pack = (int)attr_int(&st->attrs, "pack", 0);
  MlirValue bs = scalar_of(L, st, 1), h = scalar_of(L, st, 2), q0 = scalar_of(L, st, 3);
  Comb c = {.L = L, .pack = pack, .vol = true};
  if (L->failed || dv <= 0 || dv % 4 || rows <= 0 || !comb_refs(L, st, &c)) {
    if (!L->failed)
      lw_error(L, st, "the fused combine needs v_head_dim %% 4 == 0");
    return;
  }
  c.b = cg_arith2(b, "arith.divui", bs, L->nsplit);
  c.h0 = pack ? cg_muli_c(b, h, pack) : h;
  MlirValue last = fused_arrive(L, fused_counter(L, c.b, h, q0, rows));
  MlirBlock mb, outer = b->block;
  cg_if(b, last, NULL, 0, false, &mb, NULL);
  cg_builder_set_block(b, mb);
  MlirValue u0, step, first;
  if (comb_threads(&c, dv, &u0, &step, &first)) {
    MlirValue limit = pack ? cg_muli_c(b, L->q_len, pack) : L->q_len;
    MlirValue uend = cg_arith2(b, "arith.minsi", cg_addi_c(b, q0, rows), limit);
    comb_units(&c, cg_addi(b, q0, u0), uend, step, first);
  }
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
}
