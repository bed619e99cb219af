/* emit_tile.c - emits the tile IR of a checked KernelSpec, in the
 * FlashAttention-1 schedule.
 *
 * The emitted shape is fixed (docs/tile-ir.md) because the passes pattern-match
 * it; change it only together with passes/. For a kernel with head dim D,
 * value head dim Dv, H query heads and G = H / kv_heads:
 *
 *   kernel @name(%q, %k, %v, %o, %lse, %o_acc, %m_buf, %l_buf,
 *                %batch: index, %seqlen_q: index, %seqlen_k: index)
 *     %c0 = const 0 ; %nheads = const H ; %group = const G
 *     %scale = const scale : f32 ; %ninf = const -inf : f32 ; %f0 = const 0 : f32
 *     %br = tile_size {dim = q} ; %bc = tile_size {dim = kv}
 *     %nq = ceildiv %seqlen_q, %br ; %nk = ceildiv %seqlen_k, %bc
 *     for %b = %c0 to %batch parallel
 *       for %h = %c0 to %nheads parallel
 *         %hk = div %h, %group
 *         for %i (init):  %q0 = mul %i, %br; store %o_acc (full 0), %l_buf (full 0),
 *                         %m_buf (full -inf)
 *         for %j:         %k0 = mul %j, %bc; %kt, %vt = load %k, %v at (%b, %hk, %k0)
 *           for %i:       %q0; %qt, %ot, %lt, %mt = loads; %s = matmul %qt, %kt^T;
 *                         %ss = mul %s, %scale; [score ops -> %sc];
 *                         [%iota0 %qi, %iota1 %ki as used]; [mask ops];
 *                         %inb = cmp lt %ki, %seqlen_k; %cond = and mask, %inb;
 *                         %sm = mask %sc, %cond; rowmax/xwarp -> %mtil;
 *                         %mtil_safe; %p = exp(%sm - %mtil_safe); rowsum/xwarp -> %ltil;
 *                         %mnew, %mnew_safe, %alpha, %beta, %lnew; %pc = cast %p;
 *                         %pv = matmul %pc, %vt; %pvr = xwarp_reduce; %o1 %o2 %o3;
 *                         store %o_acc, %l_buf, %m_buf
 *         for %i (epilogue): store %o (cast of %o_acc), %lse = %mt + log %lt
 *     return
 *
 * mode = decode (docs/decode.md) changes three things: the kernel arguments
 * (q_len for seqlen_q, the cache as k/v, %cache_seqlens, %block_table when
 * paged, %capacity), the key count is per sequence
 * (`%seqlen_kb = load_scalar %cache_seqlens, %b` at the top of the batch
 * loop, and %nk computed from it there), and the K/V loads pass %seqlen_kb
 * as a limit (stale cache rows read 0) or are `load_paged` through the block
 * table.
 *
 * Every loop body ends with a `yield` (empty here). Scalar constants live in
 * the kernel prologue so that every region can use them whatever passes move.
 * Ops carry the SrcLoc of the construct they come from: the Expr's for score
 * and mask ops, the kernel's otherwise.
 */
#include "frontend/emit_tile.h"

#include <math.h>
#include <string.h>

#include "frontend/emit_internal.h"

/* ----------------------------------------------------------------- kernel */

/* The decode kernel's arguments (docs/decode.md): the FA1 workspaces as in
 * forward, the cache as k / v, the per-sequence lengths, the block table
 * when paged. */
static Func *make_decode_func(Module *m, const KernelSpec *k) {
  int d = k->head_dim, dv = k->v_head_dim, h = k->heads, hk = k->kv_heads;
  ElemType dt = k->dtype == DTYPE_F16 ? ELEM_F16 : ELEM_BF16;
  bool paged = k->cache == CACHE_PAGED;
  int rows0 = paged ? DIM_NUM_PAGES : DIM_BATCH, rows1 = paged ? k->page_size : DIM_CAPACITY;
  Type t[13 + SPEC_MAX_INPUTS] = {
      type_tensor(dt, 4, (int[]){DIM_BATCH, DIM_Q_LEN, h, d}),
      type_tensor(dt, 4, (int[]){rows0, rows1, hk, d}),
      type_tensor(dt, 4, (int[]){rows0, rows1, hk, dv}),
      type_tensor(dt, 4, (int[]){DIM_BATCH, DIM_Q_LEN, h, dv}),
      type_tensor(ELEM_F32, 3, (int[]){DIM_BATCH, h, DIM_Q_LEN}),
      type_tensor(ELEM_F32, 4, (int[]){DIM_BATCH, DIM_Q_LEN, h, dv}),
      type_tensor(ELEM_F32, 3, (int[]){DIM_BATCH, h, DIM_Q_LEN}),
      type_tensor(ELEM_F32, 3, (int[]){DIM_BATCH, h, DIM_Q_LEN}),
      type_tensor(ELEM_I32, 1, (int[]){DIM_BATCH}),
      type_tensor(ELEM_I32, 2, (int[]){DIM_BATCH, DIM_MAX_PAGES}),
      type_index(), type_index(), type_index(),
  };
  const char *names[13 + SPEC_MAX_INPUTS] = {"q", "k", "v", "o", "lse", "o_acc", "m_buf", "l_buf",
                                             "cache_seqlens", "block_table", "batch", "q_len",
                                             "capacity"};
  if (!paged) { /* no block table */
    memmove(&t[9], &t[10], 3 * sizeof(Type));
    memmove(&names[9], &names[10], 3 * sizeof(char *));
  }
  int n = paged ? 13 : 12;
  EmInputNames inbuf;
  em_input_arg_types(k, t, names, &n, inbuf); /* seqlen_q dims are q_len (DIM_Q_LEN) */
  return func_create(m, k->name ? k->name : "attn", t, names, n, k->loc);
}

/* The forward kernel's arguments; with dropout (NAME_dropout) its six
 * launch arguments after the sizes. */
static Func *make_func(Module *m, const KernelSpec *k, bool dropout) {
  if (k->mode == MODE_DECODE)
    return make_decode_func(m, k);
  int d = k->head_dim, dv = k->v_head_dim, h = k->heads, hk = k->kv_heads;
  ElemType dt = k->dtype == DTYPE_F16 ? ELEM_F16 : ELEM_BF16;
  Type t[11 + 6 + SPEC_MAX_INPUTS] = {
      type_tensor(dt, 4, (int[]){DIM_BATCH, DIM_SEQLEN_Q, h, d}),
      type_tensor(dt, 4, (int[]){DIM_BATCH, DIM_SEQLEN_K, hk, d}),
      type_tensor(dt, 4, (int[]){DIM_BATCH, DIM_SEQLEN_K, hk, dv}),
      type_tensor(dt, 4, (int[]){DIM_BATCH, DIM_SEQLEN_Q, h, dv}),
      type_tensor(ELEM_F32, 3, (int[]){DIM_BATCH, h, DIM_SEQLEN_Q}),
      type_tensor(ELEM_F32, 4, (int[]){DIM_BATCH, DIM_SEQLEN_Q, h, dv}),
      type_tensor(ELEM_F32, 3, (int[]){DIM_BATCH, h, DIM_SEQLEN_Q}),
      type_tensor(ELEM_F32, 3, (int[]){DIM_BATCH, h, DIM_SEQLEN_Q}),
      type_index(), type_index(), type_index(),
  };
  const char *names[11 + 6 + SPEC_MAX_INPUTS] = {"q",     "k",     "v",     "o",     "lse",      "o_acc",
                           "m_buf", "l_buf", "batch", "seqlen_q", "seqlen_k"};
  int n = 11;
  char name[SPEC_MAX_KERNEL_NAME + 16];
  snprintf(name, sizeof name, "%s%s", k->name ? k->name : "attn", dropout ? "_dropout" : "");
  if (dropout)
    em_dropout_arg_types(t, names, &n);
  EmInputNames inbuf;
  em_input_arg_types(k, t, names, &n, inbuf);
  return func_create(m, name, t, names, n, k->loc);
}

typedef struct Outer {
  Value *c0, *scale, *ninf, *f0, *br, *bc, *nq, *nk, *hk;
  Value *block_table; /* decode, paged */
  Value *o, *lse, *oacc, *mbuf, *lbuf, *q, *k, *v;
} Outer;

static void emit_init_loop(Lower *L, Outer *X) {
  int dv = L->k->v_head_dim;
  Op *fi = em_open_for(L, X->c0, X->nq, false, "i");
  Value *q0 = em_bin(L, OP_MUL, for_iv(fi), X->br, "q0");
  em_store(L, X->oacc, L->hv, q0, em_name(L, build_full(&L->b, em_ftile(DIM_BR, dv, DIST_COLS), 0), "z"));
  em_store(L, X->lbuf, L->hv, q0, em_name(L, build_full(&L->b, em_ftile(DIM_BR, 1, DIST_COLS), 0), "lz"));
  em_store(L, X->mbuf, L->hv, q0,
        em_name(L, build_full(&L->b, em_ftile(DIM_BR, 1, DIST_COLS), -INFINITY), "mz"));
  em_close_for(L, fi);
}

/* select(cmp eq x, -inf), 0, x: a max that is safe to subtract. */
static Value *safe_max(Lower *L, Outer *X, Value *x, const char *name) {
  Value *eq = build_cmp(&L->b, "eq", x, X->ninf);
  return em_name(L, build_select(&L->b, eq, X->f0, x), name);
}

static void emit_inner_body(Lower *L, Outer *X, Value *kt, Value *vt, Value *i) {
  int d = L->k->head_dim, dv = L->k->v_head_dim;
  (void)d;
  Value *q0 = em_bin(L, OP_MUL, i, X->br, "q0");
  L->q0 = q0;
  L->qi = NULL;
  L->ki = NULL;
  L->qc = L->kc = NULL;
  L->keep = NULL;
  Value *qt = em_load(L, X->q, L->hv, q0, type_tile(L->dt, DIM_BR, d, DIST_NONE), "qt");
  Value *ot = em_load(L, X->oacc, L->hv, q0, em_ftile(DIM_BR, dv, DIST_COLS), "ot");
  Value *lt = em_load(L, X->lbuf, L->hv, q0, em_ftile(DIM_BR, 1, DIST_COLS), "lt");
  Value *mt = em_load(L, X->mbuf, L->hv, q0, em_ftile(DIM_BR, 1, DIST_COLS), "mt");
  Type st = em_ftile(DIM_BR, DIM_BC, DIST_COLS);
  Op *mm = build_op(&L->b, OP_MATMUL, (Value *[]){qt, kt}, 2, &st, 1, 0);
  attr_set_int(L->m, &mm->attrs, "transpose_b", 1);
  Value *s = em_name(L, mm->results[0], "s");
  L->ss = em_bin(L, OP_MUL, s, X->scale, "ss");
  Value *sc = em_score(L);
  Value *cond = em_cond(L);
  Value *sm = em_name(L, build_op(&L->b, OP_MASK, (Value *[]){sc, cond}, 2, &st, 1, 0)->results[0], "sm");

  Value *rm = em_op1(L, OP_ROWMAX, sm, em_ftile(DIM_BR, 1, DIST_PARTIAL), "rm");
  Value *mtil = em_op1(L, OP_XWARP_REDUCE, rm, em_ftile(DIM_BR, 1, DIST_COLS), "mtil");
  attr_set_word(L->m, &mtil->def->attrs, "kind", "max");
  Value *mtil_safe = safe_max(L, X, mtil, "mtil_safe");
  Value *p = em_un(L, OP_EXP, em_bin(L, OP_SUB, sm, mtil_safe, NULL), "p");
  Value *rs = em_op1(L, OP_ROWSUM, p, em_ftile(DIM_BR, 1, DIST_PARTIAL), "rs");
  Value *ltil = em_op1(L, OP_XWARP_REDUCE, rs, em_ftile(DIM_BR, 1, DIST_COLS), "ltil");
  attr_set_word(L->m, &ltil->def->attrs, "kind", "sum");
  Value *mnew = em_bin(L, OP_MAX, mt, mtil, "mnew");
  Value *mnew_safe = safe_max(L, X, mnew, "mnew_safe");
  Value *alpha = em_un(L, OP_EXP, em_bin(L, OP_SUB, mt, mnew_safe, NULL), "alpha");
  Value *beta = em_un(L, OP_EXP, em_bin(L, OP_SUB, mtil, mnew_safe, NULL), "beta");
  Value *al = em_bin(L, OP_MUL, alpha, lt, NULL); /* C leaves argument order open: sequence */
  Value *bl = em_bin(L, OP_MUL, beta, ltil, NULL);
  Value *lnew = em_bin(L, OP_ADD, al, bl, "lnew");
  /* dropout: P V from the kept entries (O scaled by 1 / (1 - p) once, in
   * the epilogue); l (and so the LSE) from all of them */
  Value *pd = L->dropout ? em_dropout(L, p, false, "pd") : p;
  Value *pc = em_name(L, build_cast(&L->b, pd, L->dt), "pc");
  Type pvt = em_ftile(DIM_BR, dv, DIST_PARTIAL);
  Value *pv = em_name(L, build_op(&L->b, OP_MATMUL, (Value *[]){pc, vt}, 2, &pvt, 1, 0)->results[0], "pv");
  Value *pvr = em_op1(L, OP_XWARP_REDUCE, pv, em_ftile(DIM_BR, dv, DIST_COLS), "pvr");
  attr_set_word(L->m, &pvr->def->attrs, "kind", "sum");
  Type ot_t = ot->type;
  Value *o1 = em_name(L, build_op(&L->b, OP_RESCALE, (Value *[]){ot, em_bin(L, OP_MUL, lt, alpha, NULL)}, 2,
                             &ot_t, 1, 0)->results[0], "o1");
  Value *pvs = build_op(&L->b, OP_RESCALE, (Value *[]){pvr, beta}, 2, &ot_t, 1, 0)->results[0];
  Value *o2 = em_bin(L, OP_ADD, o1, pvs, "o2");
  Value *inv = em_un(L, OP_RECIP, lnew, NULL);
  Value *o3 = em_name(L, build_op(&L->b, OP_RESCALE, (Value *[]){o2, inv}, 2, &ot_t, 1, 0)->results[0], "o3");
  em_store(L, X->oacc, L->hv, q0, o3);
  em_store(L, X->lbuf, L->hv, q0, lnew);
  em_store(L, X->mbuf, L->hv, q0, mnew);
}

/* A K or V tile: a plain load for forward; for decode a load limited to the
 * sequence's cache length, through the block table when paged. */
static Value *load_kv(Lower *L, Outer *X, Value *tensor, Value *k0, Type t, const char *name) {
  if (!L->decode)
    return em_load(L, tensor, X->hk, k0, t, name);
  if (!X->block_table) {
    Value *ops[5] = {tensor, L->bv, X->hk, k0, L->seqk};
    return em_name(L, build_op(&L->b, OP_LOAD, ops, 5, &t, 1, 0)->results[0], name);
  }
  Value *ops[6] = {tensor, X->block_table, L->bv, X->hk, k0, L->seqk};
  Op *op = build_op(&L->b, OP_LOAD_PAGED, ops, 6, &t, 1, 0);
  attr_set_int(L->m, &op->attrs, "page_size", L->k->page_size);
  return em_name(L, op->results[0], name);
}

static void emit_main_loop(Lower *L, Outer *X) {
  int d = L->k->head_dim, dv = L->k->v_head_dim;
  Op *fj = em_open_for(L, X->c0, X->nk, false, "j");
  Value *k0 = em_bin(L, OP_MUL, for_iv(fj), X->bc, "k0");
  L->k0 = k0;
  Value *kt = load_kv(L, X, X->k, k0, type_tile(L->dt, DIM_BC, d, DIST_NONE), "kt");
  Value *vt = load_kv(L, X, X->v, k0, type_tile(L->dt, DIM_BC, dv, DIST_NONE), "vt");
  Op *fi = em_open_for(L, X->c0, X->nq, false, "i");
  emit_inner_body(L, X, kt, vt, for_iv(fi));
  em_close_for(L, fi);
  em_close_for(L, fj);
}

static void emit_epilogue(Lower *L, Outer *X) {
  int dv = L->k->v_head_dim;
  Op *fi = em_open_for(L, X->c0, X->nq, false, "i");
  Value *q0 = em_bin(L, OP_MUL, for_iv(fi), X->br, "q0");
  Value *ot = em_load(L, X->oacc, L->hv, q0, em_ftile(DIM_BR, dv, DIST_COLS), "ot");
  if (L->dropout)
    ot = em_bin(L, OP_MUL, ot, L->keep_scale, "ots");
  em_store(L, X->o, L->hv, q0, em_name(L, build_cast(&L->b, ot, L->dt), "oc"));
  Value *lt = em_load(L, X->lbuf, L->hv, q0, em_ftile(DIM_BR, 1, DIST_COLS), "lt");
  Value *mt = em_load(L, X->mbuf, L->hv, q0, em_ftile(DIM_BR, 1, DIST_COLS), "mt");
  em_store(L, X->lse, L->hv, q0, em_bin(L, OP_ADD, mt, em_un(L, OP_LOG, lt, NULL), "lset"));
  em_close_for(L, fi);
}

/* One forward (or decode) kernel of k; with dropout, NAME_dropout. NULL
 * (the half-built kernel dropped) when an expression cannot be lowered. */
static Func *emit_forward(Module *m, const KernelSpec *k, const char *target, bool dropout,
                          FILE *diag) {
  Lower L = {.m = m, .k = k, .dt = k->dtype == DTYPE_F16 ? ELEM_F16 : ELEM_BF16,
             .decode = k->mode == MODE_DECODE, .dist = DIST_COLS};
  L.f = make_func(m, k, dropout);
  em_set_attrs(&L, target);
  if (dropout) {
    em_dropout_args(&L);
    attr_set_str(m, &L.f->attrs, "dropout_of", k->name ? k->name : "attn");
  }
  em_input_args(&L);
  L.b = builder_at_end(m, L.f->body);
  L.b.loc = k->loc;
  L.seqq = func_arg(L.f, L.decode ? "q_len" : "seqlen_q");
  L.seqk = func_arg(L.f, "seqlen_k"); /* decode: loaded per sequence below */

  Outer X = {0};
  X.q = func_arg(L.f, "q"), X.k = func_arg(L.f, "k"), X.v = func_arg(L.f, "v");
  X.o = func_arg(L.f, "o"), X.lse = func_arg(L.f, "lse");
  X.oacc = func_arg(L.f, "o_acc"), X.mbuf = func_arg(L.f, "m_buf"), X.lbuf = func_arg(L.f, "l_buf");
  X.c0 = em_name(&L, build_index(&L.b, 0), "c0");
  Value *nheads = em_name(&L, build_index(&L.b, k->heads), "nheads");
  Value *group = em_name(&L, build_index(&L.b, k->heads / k->kv_heads), "group");
  X.scale = em_scale(&L);
  X.ninf = em_name(&L, build_const(&L.b, type_scalar(ELEM_F32), -INFINITY), "ninf");
  X.f0 = em_name(&L, build_const(&L.b, type_scalar(ELEM_F32), 0.0), "f0");
  Op *ts = build_op(&L.b, OP_TILE_SIZE, NULL, 0, &(Type){.kind = TYPE_SCALAR, .elem = ELEM_INDEX}, 1, 0);
  attr_set_word(m, &ts->attrs, "dim", "q");
  X.br = em_name(&L, ts->results[0], "br");
  ts = build_op(&L.b, OP_TILE_SIZE, NULL, 0, &(Type){.kind = TYPE_SCALAR, .elem = ELEM_INDEX}, 1, 0);
  attr_set_word(m, &ts->attrs, "dim", "kv");
  X.bc = em_name(&L, ts->results[0], "bc");
  X.nq = em_bin(&L, OP_CEILDIV, L.seqq, X.br, "nq");
  X.block_table = func_arg(L.f, "block_table");
  if (!L.decode)
    X.nk = em_bin(&L, OP_CEILDIV, L.seqk, X.bc, "nk");

  Op *fb = em_open_for(&L, X.c0, func_arg(L.f, "batch"), true, "b");
  L.bv = for_iv(fb);
  if (L.decode) {
    Value *ops[2] = {func_arg(L.f, "cache_seqlens"), L.bv};
    Type it = type_index();
    L.seqk = em_name(&L, build_op(&L.b, OP_LOAD_SCALAR, ops, 2, &it, 1, 0)->results[0], "seqlen_kb");
    X.nk = em_bin(&L, OP_CEILDIV, L.seqk, X.bc, "nk");
  }
  Op *fh = em_open_for(&L, X.c0, nheads, true, "h");
  L.hv = for_iv(fh);
  X.hk = em_bin(&L, OP_DIV, L.hv, group, "hk");
  emit_init_loop(&L, &X);
  emit_main_loop(&L, &X);
  emit_epilogue(&L, &X);
  em_close_for(&L, fh);
  em_close_for(&L, fb);
  build_op(&L.b, OP_RETURN, NULL, 0, NULL, 0, 0);

  if (L.bad) {
    em_refuse(diag, k, k->loc, "score or mask expression has operands whose shapes do not combine");
    m->nfuncs--; /* drop the half-built kernel (it is the last one added) */
    return NULL;
  }
  return L.f;
}

Func *emit_tile_kernel(Module *m, const KernelSpec *k, const char *target, FILE *diag) {
  if (k->dropout > 0 && k->mode == MODE_DECODE) {
    em_refuse(diag, k, k->loc, "dropout applies to training kernels; a decode kernel cannot have it");
    return NULL;
  }
  if (k->kv_heads <= 0 || k->heads % k->kv_heads != 0 || k->head_dim <= 0 || k->v_head_dim <= 0) {
    em_refuse(diag, k, k->loc, "invalid head counts or head dims (sema should have refused this)");
    return NULL;
  }
  int nfuncs = m->nfuncs;
  Func *f = emit_forward(m, k, target, false, diag);
  if (f && k->dropout > 0 && !emit_forward(m, k, target, true, diag))
    f = NULL;
  if (f && k->grad && emit_backward_kernels(m, k, target, diag))
    f = NULL;
  if (!f)
    m->nfuncs = nfuncs; /* drop the forward and what was added after it */
  return f;
}
