/* emit_backward.c - emits the backward kernels of a forward kernel with
 * `grad = true` (docs/backward.md): NAME_bwd_pre, NAME_bwd, NAME_bwd_post,
 * NAME_bwd_kv, NAME_bwd_q, from the same KernelSpec as the forward, so that
 * the mask, the score modifier, the scale and the heads cannot disagree.
 *
 * Unlike the forward (emitted in the FA1 schedule for the passes to
 * rewrite), these are emitted in their final loop order with register tiles
 * split by rows; the passes still choose the tiles (tiling), expand the
 * score modifier's derivative (differentiate), and may skip masked tiles.
 * The score tile of the K/V-outer kernels is S^T (keys on the rows, the
 * warps' dimension; em_cond and em_score with q_axis = 1), so that P^T and
 * dS^T feed the dV and dK matmuls from registers, as P does in the forward.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "frontend/emit_internal.h"
#include "frontend/emit_tile.h"

/* The roles, in the order they are added to the module. */
typedef enum Role { ROLE_PRE, ROLE_MAIN, ROLE_POST, ROLE_KV, ROLE_Q } Role;
static const char *const role_words[] = {"pre", "main", "post", "kv", "q"};
static const char *const role_suffix[] = {"_bwd_pre", "_bwd", "_bwd_post", "_bwd_kv", "_bwd_q"};

/* Values every backward kernel's body uses. */
typedef struct Bwd {
  Lower L;
  Value *c0, *scale, *ninf, *f0, *br, *bc, *nq, *nk, *group;
  int d, dv;
  /* With dropout, dS = s P o (M o dP - D / s) for s = 1 / (1 - p): the
   * kernels whose dS feeds only their own dK or dQ keep dS / s and scale
   * the sum once at its store (no multiply an element); the atomic
   * launch's main kernel adds dS K into dq_acc, whose post kernel knows no
   * s, and scales each dP. inv_keep = 1 / s when folded, else NULL. */
  Value *inv_keep;
} Bwd;

static Type tensor4(ElemType e, int rows, int heads, int cols) {
  return type_tensor(e, 4, (int[]){DIM_BATCH, rows, heads, cols});
}

static Type tensor3(int heads) {
  return type_tensor(ELEM_F32, 3, (int[]){DIM_BATCH, heads, DIM_SEQLEN_Q});
}

/* The kernels that recompute P take dropout's launch arguments when the
 * spec has dropout (pre and post do not: D = rowsum(dO o O) holds with the
 * dropped O). */
static bool takes_dropout(const KernelSpec *k, Role role) {
  return k->dropout > 0 && role != ROLE_PRE && role != ROLE_POST;
}

/* The kernel's arguments (docs/backward.md, ABI): the sizes, then dropout's
 * (emit_internal.h). */
static Func *make_bwd_func(Module *m, const KernelSpec *k, Role role) {
  int d = k->head_dim, dv = k->v_head_dim, h = k->heads, hk = k->kv_heads;
  ElemType dt = k->dtype == DTYPE_F16 ? ELEM_F16 : ELEM_BF16;
  Type q = tensor4(dt, DIM_SEQLEN_Q, h, d), kk = tensor4(dt, DIM_SEQLEN_K, hk, d);
  Type v = tensor4(dt, DIM_SEQLEN_K, hk, dv), o = tensor4(dt, DIM_SEQLEN_Q, h, dv);
  Type acc = tensor4(ELEM_F32, DIM_SEQLEN_Q, h, d), idx = type_index();
  Type t[18 + SPEC_MAX_INPUTS];
  const char *names[18 + SPEC_MAX_INPUTS];
  int n = 0;
#define ARG(ty, nmv) (t[n] = (ty), names[n++] = (nmv))
  switch (role) {
  case ROLE_PRE:
    ARG(o, "o"), ARG(o, "dout"), ARG(tensor3(h), "delta");
    break;
  case ROLE_MAIN:
  case ROLE_KV:
    ARG(q, "q"), ARG(kk, "k"), ARG(v, "v"), ARG(o, "dout"), ARG(tensor3(h), "lse");
    ARG(tensor3(h), "delta"), ARG(acc, "dq_acc"), ARG(kk, "dk"), ARG(v, "dv");
    break;
  case ROLE_Q:
    ARG(q, "q"), ARG(kk, "k"), ARG(v, "v"), ARG(o, "dout"), ARG(tensor3(h), "lse");
    ARG(tensor3(h), "delta"), ARG(q, "dq");
    break;
  case ROLE_POST:
    ARG(acc, "dq_acc"), ARG(q, "dq");
    break;
  }
  ARG(idx, "batch"), ARG(idx, "seqlen_q"), ARG(idx, "seqlen_k");
#undef ARG
  if (takes_dropout(k, role))
    em_dropout_arg_types(t, names, &n);
  EmInputNames inbuf;
  em_input_arg_types(k, t, names, &n, inbuf);
  char name[SPEC_MAX_KERNEL_NAME + 16];
  snprintf(name, sizeof name, "%s%s", k->name ? k->name : "attn", role_suffix[role]);
  return func_create(m, name, t, names, n, k->loc);
}

/* A new kernel of `role` with its prologue: constants, tile sizes, tile
 * counts; the builder at the end of its body. */
static void open_kernel(Bwd *B, Module *m, const KernelSpec *k, Role role, const char *target) {
  memset(B, 0, sizeof *B);
  Lower *L = &B->L;
  *L = (Lower){.m = m, .k = k, .dt = k->dtype == DTYPE_F16 ? ELEM_F16 : ELEM_BF16,
               .dist = DIST_ROWS, .bound_q = true, .q_axis = role == ROLE_MAIN || role == ROLE_KV};
  L->f = make_bwd_func(m, k, role);
  em_set_attrs(L, target);
  AttrList *a = &L->f->attrs;
  attr_set_word(m, a, "mode", "backward");
  attr_set_word(m, a, "role", role_words[role]);
  attr_set_str(m, a, "grad_of", k->name ? k->name : "attn");
  attr_set_word(m, a, "schedule", "bwd");
  if (takes_dropout(k, role))
    em_dropout_args(L);
  em_input_args(L);
  /* `schedule NAME` is the forward's; `schedule NAME_bwd` the backward's
   * (else the tiling pass chooses). */
  const Schedule *bs = &k->bwd_schedule;
  if (bs->loc.line > 0) {
    char sname[SPEC_MAX_KERNEL_NAME + 16];
    snprintf(sname, sizeof sname, "%s%s", k->name ? k->name : "attn", role_suffix[ROLE_MAIN]);
    L->f->sched_loc = bs->loc;
    L->f->sched_name = module_strdup(m, sname);
    attr_set_int(m, a, "sched_tile_q", bs->tile_q);
    attr_set_int(m, a, "sched_tile_kv", bs->tile_kv);
    attr_set_int(m, a, "sched_warps", bs->warps);
    attr_set_int(m, a, "sched_stages", bs->stages);
  } else {
    L->f->sched_loc = (SrcLoc){0}; /* the forward's schedule is not the backward's */
    L->f->sched_name = NULL;
    attr_remove(a, "sched_tile_q");
    attr_remove(a, "sched_tile_kv");
    attr_remove(a, "sched_warps");
    attr_remove(a, "sched_stages");
  }
  attr_remove(a, "sched_overlap"); /* forward kernels' options */
  attr_remove(a, "sched_producer");
  attr_remove(a, "sched_tma");
  attr_remove(a, "sched_pingpong");
  attr_remove(a, "persistent");
  L->b = builder_at_end(m, L->f->body);
  L->b.loc = k->loc;
  L->seqq = func_arg(L->f, "seqlen_q");
  L->seqk = func_arg(L->f, "seqlen_k");
  B->d = k->head_dim;
  B->dv = k->v_head_dim;
  B->c0 = em_name(L, build_index(&L->b, 0), "c0");
  B->group = em_name(L, build_index(&L->b, k->heads / k->kv_heads), "group");
  B->scale = em_scale(L);
  B->ninf = em_name(L, build_const(&L->b, type_scalar(ELEM_F32), -INFINITY), "ninf");
  B->f0 = em_name(L, build_const(&L->b, type_scalar(ELEM_F32), 0.0), "f0");
  Type it = type_index();
  Op *ts = build_op(&L->b, OP_TILE_SIZE, NULL, 0, &it, 1, 0);
  attr_set_word(m, &ts->attrs, "dim", "q");
  B->br = em_name(L, ts->results[0], "br");
  ts = build_op(&L->b, OP_TILE_SIZE, NULL, 0, &it, 1, 0);
  attr_set_word(m, &ts->attrs, "dim", "kv");
  B->bc = em_name(L, ts->results[0], "bc");
  B->nq = em_bin(L, OP_CEILDIV, L->seqq, B->br, "nq");
  B->nk = em_bin(L, OP_CEILDIV, L->seqk, B->bc, "nk");
}

/* `for %b = 0 to batch parallel { for %h = 0 to nh parallel { ...` with L->bv
 * and L->hv (the head of the outer loop: a query head, or a K/V head for
 * the K/V-outer kernels) set; loops[0..1] get the two ops. */
static void open_batch_heads(Bwd *B, int nheads, Op **loops) {
  Lower *L = &B->L;
  loops[0] = em_open_for(L, B->c0, func_arg(L->f, "batch"), true, "b");
  L->bv = for_iv(loops[0]);
  Value *nh = em_name(L, build_index(&L->b, nheads), "nheads");
  loops[1] = em_open_for(L, B->c0, nh, true, "h");
  L->hv = for_iv(loops[1]);
}

static void close_kernel(Bwd *B, Op **loops, int n) {
  for (int i = n - 1; i >= 0; i--)
    em_close_for(&B->L, loops[i]);
  build_op(&B->L.b, OP_RETURN, NULL, 0, NULL, 0, 0);
}

/* select(cmp eq x, -inf), 0, x: an LSE that is safe to subtract (a fully
 * masked row has LSE -inf: its P must be 0, not exp(-inf + inf)). */
static Value *safe_lse(Bwd *B, Value *x) {
  Lower *L = &B->L;
  Value *eq = build_cmp(&L->b, "eq", x, B->ninf);
  return em_name(L, build_select(&L->b, eq, B->f0, x), "lse_safe");
}

static Value *matmul(Lower *L, Value *a, Value *b, Value *acc, Type t, bool ta, bool tb,
                     const char *name) {
  Value *ops[3] = {a, b, acc};
  Op *mm = build_op(&L->b, OP_MATMUL, ops, acc ? 3 : 2, &t, 1, 0);
  if (ta)
    attr_set_int(L->m, &mm->attrs, "transpose_a", 1);
  if (tb)
    attr_set_int(L->m, &mm->attrs, "transpose_b", 1);
  return em_name(L, mm->results[0], name);
}

static Type staged(Lower *L, int rows, int cols) { return type_tile(L->dt, rows, cols, DIST_NONE); }

/* What P's computation leaves for dS's: the modified score, its argument
 * and the mask condition (for score'). */
typedef struct Probs {
  Value *p, *sc, *ss, *cond;
} Probs;

/* The score tile of the current pair (S, or S^T when L->q_axis is 1) from
 * the raw product s: scale, score modifier, mask; then
 * P = exp(Z~ - LSE_safe). Emitted before dP's matmul, so that S and the LSE
 * are dead while dP is made (registers: the K/V-outer kernels hold dK and
 * dV too). */
static Probs probs(Bwd *B, Value *s, Value *lse_safe) {
  Lower *L = &B->L;
  Type st = s->type;
  Probs r;
  L->qi = L->ki = L->keep = L->qc = L->kc = NULL;
  r.ss = L->ss = em_bin(L, OP_MUL, s, B->scale, "ss");
  r.sc = em_score(L);
  r.cond = em_cond(L);
  Value *zm = em_name(
      L, build_op(&L->b, OP_MASK, (Value *[]){r.sc, r.cond}, 2, &st, 1, 0)->results[0], "zm");
  r.p = em_un(L, OP_EXP, em_bin(L, OP_SUB, zm, lse_safe, NULL), "p");
  return r;
}

/* x o score'(S) where unmasked, 0 where masked (score' may be anything
 * there), named `name`. */
static Value *times_score_grad(Bwd *B, const Probs *pr, Value *x, const char *name) {
  Lower *L = &B->L;
  Type st = x->type;
  Op *g = build_op(&L->b, OP_GRAD, (Value *[]){pr->sc, pr->ss}, 2, &st, 1, 0);
  Value *xg = em_bin(L, OP_MUL, x, em_name(L, g->results[0], "dscore"), NULL);
  return em_name(L, build_select(&L->b, pr->cond, xg, B->f0), name);
}

/* dS = P o (dP - D) o score'; with dropout dP is the kept entries' dZ
 * scaled by 1 / (1 - p) (D is rowsum(dO o O) all the same), or dS divided
 * by that scale (Bwd.inv_keep). */
static Value *dscores(Bwd *B, const Probs *pr, Value *dp, Value *dl) {
  Lower *L = &B->L;
  if (L->dropout)
    dp = em_dropout(L, dp, !B->inv_keep, "dpd");
  if (B->inv_keep) /* dS / s (Bwd.inv_keep) */
    dl = em_bin(L, OP_MUL, dl, B->inv_keep, "dls");
  Value *dz = em_bin(L, OP_MUL, pr->p, em_bin(L, OP_SUB, dp, dl, NULL), "dz");
  if (!L->k->score)
    return dz;
  return times_score_grad(B, pr, dz, "ds"); /* dS = dZ o score'(S) */
}

/* Does e read s? */
static bool reads_s(const Expr *e) {
  if (!e)
    return false;
  if (e->kind == EXPR_VAR)
    return e->var == VAR_S;
  return reads_s(e->a) || reads_s(e->b) || reads_s(e->c) || reads_s(e->d);
}

/* Is the score s plus or minus terms that do not read s (ALiBi, T5, a full
 * bias)? Its score' is 1, which the differentiate pass folds together with
 * dS's select: nothing of the modifier lives across dP's matmul then. */
static bool score_is_shift(const Expr *e) {
  if (e->kind == EXPR_VAR)
    return e->var == VAR_S;
  if (e->kind == EXPR_ADD)
    return (score_is_shift(e->a) && !reads_s(e->b)) || (score_is_shift(e->b) && !reads_s(e->a));
  return e->kind == EXPR_SUB && score_is_shift(e->a) && !reads_s(e->b);
}

/* What a sum of dS products is multiplied by at its store: the softmax
 * scale, and with dS / s (Bwd.inv_keep) s too. */
static Value *ds_scale(Bwd *B) {
  Lower *L = &B->L;
  return B->inv_keep ? em_bin(L, OP_MUL, B->scale, L->keep_scale, "dss") : B->scale;
}

/* NAME_bwd_pre: delta = rowsum(dO o O) per query row, in f32. */
static void emit_pre(Bwd *B) {
  Lower *L = &B->L;
  Op *loops[3];
  open_batch_heads(B, L->k->heads, loops);
  loops[2] = em_open_for(L, B->c0, B->nq, true, "i");
  Value *q0 = em_bin(L, OP_MUL, for_iv(loops[2]), B->br, "q0");
  Type t = type_tile(L->dt, DIM_BR, B->dv, DIST_ROWS);
  Value *o = em_to_f32(L, em_load(L, func_arg(L->f, "o"), L->hv, q0, t, "ot"));
  Value *dout = em_to_f32(L, em_load(L, func_arg(L->f, "dout"), L->hv, q0, t, "dot"));
  Value *prod = em_bin(L, OP_MUL, o, dout, "prod");
  Value *dl = em_op1(L, OP_ROWSUM, prod, em_ftile(DIM_BR, 1, DIST_ROWS), "dl");
  em_store(L, func_arg(L->f, "delta"), L->hv, q0, dl);
  close_kernel(B, loops, 3);
}

/* NAME_bwd_post: dQ = cast(scale * dq_acc). */
static void emit_post(Bwd *B) {
  Lower *L = &B->L;
  Op *loops[3];
  open_batch_heads(B, L->k->heads, loops);
  loops[2] = em_open_for(L, B->c0, B->nq, true, "i");
  Value *q0 = em_bin(L, OP_MUL, for_iv(loops[2]), B->br, "q0");
  Value *acc = em_load(L, func_arg(L->f, "dq_acc"), L->hv, q0, em_ftile(DIM_BR, B->d, DIST_ROWS),
                       "dqa");
  Value *dq = em_bin(L, OP_MUL, acc, B->scale, "dqs");
  em_store(L, func_arg(L->f, "dq"), L->hv, q0, em_name(L, build_cast(&L->b, dq, L->dt), "dqc"));
  close_kernel(B, loops, 3);
}

/* dQ's column chunk in the K/V-outer kernel (add_dq). */
#define DQ_CHUNK 64

static void add_dq(Bwd *B, Value *dsc, Value *kt, Value *hh, Value *q0);

/* dV += P^T dO, P cast to the input's type. */
static void add_dv(Lower *L, Value *p, Value *dot, Value **dv) {
  Value *ptc = em_name(L, build_cast(&L->b, p, L->dt), "ptc");
  *dv = matmul(L, ptc, dot, *dv, (*dv)->type, false, false, "dv_n");
}

/* The body of a (K/V tile, Q tile) step of the K/V-outer kernels, for query
 * head hh: updates dk, dv and, with_dq, adds dS K into dq_acc. */
static void kv_step(Bwd *B, Value *kt, Value *vt, Value *hh, Value *i, Value **dk, Value **dv,
                    bool with_dq) {
  Lower *L = &B->L;
  Value *q0 = em_bin(L, OP_MUL, i, B->br, "q0");
  L->q0 = q0;
  Value *qt = em_load(L, func_arg(L->f, "q"), hh, q0, staged(L, DIM_BR, B->d), "qt");
  Value *dot = em_load(L, func_arg(L->f, "dout"), hh, q0, staged(L, DIM_BR, B->dv), "dot");
  Type row = em_ftile(1, DIM_BR, DIST_ROWS);
  Value *lse = em_load(L, func_arg(L->f, "lse"), hh, q0, row, "lse_t");
  Type st = em_ftile(DIM_BC, DIM_BR, DIST_ROWS);
  Value *s = matmul(L, kt, qt, NULL, st, false, true, "st");
  Value *hk = L->hv;
  L->hv = hh; /* the spec's h is the query head */
  Probs pr = probs(B, s, safe_lse(B, lse));
  /* With a score modifier whose score' is not 1 (softcap; no dropout):
   * P o score' and dV before dP^T, so that neither P nor what score' reads
   * lives across dP^T's matmul beside dK and dV (perf-log P131: softcap's
   * bwd_kv spilled its tanh and P; fwd+bwd -8..-20%). A shift of s keeps
   * the order: its select folds away, and dV first measured 1-3% slower. */
  Value *pg = NULL;
  if (L->k->score && !L->dropout && !score_is_shift(L->k->score)) {
    pg = times_score_grad(B, &pr, pr.p, "pg");
    add_dv(L, pr.p, dot, dv);
  }
  Value *dl = em_load(L, func_arg(L->f, "delta"), hh, q0, row, "dl");
  Value *dpt = matmul(L, vt, dot, NULL, st, false, true, "dpt");
  Value *ds = pg ? em_name(L, em_bin(L, OP_MUL, pg, em_bin(L, OP_SUB, dpt, dl, NULL), NULL), "ds")
                 : dscores(B, &pr, dpt, dl);
  if (!pg) /* dV from the dropped P^T, as the forward's O (scaled once, at its store) */
    add_dv(L, L->dropout ? em_dropout(L, pr.p, false, "ptd") : pr.p, dot, dv);
  L->hv = hk; /* after the dropout mask, which is the query head's */
  Value *dsc = em_name(L, build_cast(&L->b, ds, L->dt), "dsc");
  *dk = matmul(L, dsc, qt, *dk, (*dk)->type, false, false, "dk_n");
  if (with_dq)
    add_dq(B, dsc, kt, hh, q0);
}

/* dq_acc[q0.., hh] += dS K, in column chunks of DQ_CHUNK (B's column
 * windows, the stores' col0): each chunk's product is added and dead
 * before the next is made, so the K/V-outer kernel holds DQ_CHUNK columns
 * of dQ beside its dK and dV, not all d of them (registers, FA3's dQ). */
static void add_dq(Bwd *B, Value *dsc, Value *kt, Value *hh, Value *q0) {
  Lower *L = &B->L;
  int chunk = B->d % DQ_CHUNK == 0 ? DQ_CHUNK : B->d;
  for (int c0 = 0; c0 < B->d; c0 += chunk) {
    Value *dq = matmul(L, dsc, kt, NULL, em_ftile(DIM_BR, chunk, DIST_ROWS), true, false, "dqp");
    if (chunk < B->d)
      attr_set_int(L->m, &dq->def->attrs, "b_col0", c0);
    Value *ops[5] = {func_arg(L->f, "dq_acc"), L->bv, hh, q0, dq};
    Op *st_op = build_op(&L->b, OP_STORE, ops, 5, NULL, 0, 0);
    attr_set_word(L->m, &st_op->attrs, "reduce", "add");
    if (chunk < B->d)
      attr_set_int(L->m, &st_op->attrs, "col0", c0);
  }
}

/* NAME_bwd / NAME_bwd_kv: K/V tiles outer (parallel), the group's query
 * heads and the Q tiles inner; dK, dV in registers. */
static void emit_kv_outer(Bwd *B, bool with_dq) {
  Lower *L = &B->L;
  Op *loops[3];
  open_batch_heads(B, L->k->kv_heads, loops);
  Value *hk = L->hv;
  loops[2] = em_open_for(L, B->c0, B->nk, true, "j");
  Value *k0 = em_bin(L, OP_MUL, for_iv(loops[2]), B->bc, "k0");
  L->k0 = k0;
  Value *kt = em_load(L, func_arg(L->f, "k"), hk, k0, staged(L, DIM_BC, B->d), "kt");
  Value *vt = em_load(L, func_arg(L->f, "v"), hk, k0, staged(L, DIM_BC, B->dv), "vt");
  Value *init[2] = {em_name(L, build_full(&L->b, em_ftile(DIM_BC, B->d, DIST_ROWS), 0), "dk0"),
                    em_name(L, build_full(&L->b, em_ftile(DIM_BC, B->dv, DIST_ROWS), 0), "dv0")};
  Op *fg = build_for(&L->b, B->c0, B->group, false, init, 2, "g");
  L->b = builder_at_end(L->m, for_body(fg));
  L->b.loc = L->k->loc;
  Value *base = em_bin(L, OP_MUL, hk, B->group, NULL);
  Value *hh = em_bin(L, OP_ADD, base, for_iv(fg), "hq");
  Value *carry[2] = {for_iter_arg(fg, 0), for_iter_arg(fg, 1)};
  Op *fi = build_for(&L->b, B->c0, B->nq, false, carry, 2, "i");
  L->b = builder_at_end(L->m, for_body(fi));
  L->b.loc = L->k->loc;
  Value *dk = for_iter_arg(fi, 0), *dv = for_iter_arg(fi, 1);
  kv_step(B, kt, vt, hh, for_iv(fi), &dk, &dv, with_dq);
  build_yield(&L->b, (Value *[]){dk, dv}, 2);
  L->b = builder_after(L->m, fi);
  L->b.loc = L->k->loc;
  build_yield(&L->b, (Value *[]){fi->results[0], fi->results[1]}, 2);
  L->b = builder_after(L->m, fg);
  L->b.loc = L->k->loc;
  Value *dks = em_bin(L, OP_MUL, fg->results[0], ds_scale(B), "dks");
  em_store(L, func_arg(L->f, "dk"), hk, k0, em_name(L, build_cast(&L->b, dks, L->dt), "dkc"));
  Value *dvs = fg->results[1];
  if (L->dropout) /* dV = sum of dropped P^T dO, times 1 / (1 - p) */
    dvs = em_bin(L, OP_MUL, dvs, L->keep_scale, "dvs");
  em_store(L, func_arg(L->f, "dv"), hk, k0, em_name(L, build_cast(&L->b, dvs, L->dt), "dvc"));
  close_kernel(B, loops, 3);
}

/* NAME_bwd_q: Q tiles outer, K/V tiles inner; dQ alone, in registers. */
static void emit_q_outer(Bwd *B) {
  Lower *L = &B->L;
  Op *loops[3];
  open_batch_heads(B, L->k->heads, loops);
  Value *group = B->group;
  Value *hk = em_bin(L, OP_DIV, L->hv, group, "hk");
  loops[2] = em_open_for(L, B->c0, B->nq, true, "i");
  Value *q0 = em_bin(L, OP_MUL, for_iv(loops[2]), B->br, "q0");
  L->q0 = q0;
  Value *qt = em_load(L, func_arg(L->f, "q"), L->hv, q0, staged(L, DIM_BR, B->d), "qt");
  Value *dot = em_load(L, func_arg(L->f, "dout"), L->hv, q0, staged(L, DIM_BR, B->dv), "dot");
  Type col = em_ftile(DIM_BR, 1, DIST_ROWS);
  Value *lse = safe_lse(B, em_load(L, func_arg(L->f, "lse"), L->hv, q0, col, "lse_t"));
  Value *dl = em_load(L, func_arg(L->f, "delta"), L->hv, q0, col, "dl");
  Value *init = em_name(L, build_full(&L->b, em_ftile(DIM_BR, B->d, DIST_ROWS), 0), "dq0");
  Op *fj = build_for(&L->b, B->c0, B->nk, false, &init, 1, "j");
  L->b = builder_at_end(L->m, for_body(fj));
  L->b.loc = L->k->loc;
  Value *k0 = em_bin(L, OP_MUL, for_iv(fj), B->bc, "k0");
  L->k0 = k0;
  Value *kt = em_load(L, func_arg(L->f, "k"), hk, k0, staged(L, DIM_BC, B->d), "kt");
  Value *vt = em_load(L, func_arg(L->f, "v"), hk, k0, staged(L, DIM_BC, B->dv), "vt");
  Type st = em_ftile(DIM_BR, DIM_BC, DIST_ROWS);
  Value *s = matmul(L, qt, kt, NULL, st, false, true, "s");
  Probs pr = probs(B, s, lse);
  Value *dp = matmul(L, dot, vt, NULL, st, false, true, "dp");
  Value *ds = dscores(B, &pr, dp, dl);
  Value *dsc = em_name(L, build_cast(&L->b, ds, L->dt), "dsc");
  Value *dq = matmul(L, dsc, kt, for_iter_arg(fj, 0), init->type, false, false, "dq_n");
  build_yield(&L->b, &dq, 1);
  L->b = builder_after(L->m, fj);
  L->b.loc = L->k->loc;
  Value *dqs = em_bin(L, OP_MUL, fj->results[0], ds_scale(B), "dqs");
  em_store(L, func_arg(L->f, "dq"), L->hv, q0, em_name(L, build_cast(&L->b, dqs, L->dt), "dqc"));
  close_kernel(B, loops, 3);
}

int emit_backward_kernels(Module *m, const KernelSpec *k, const char *target, FILE *diag) {
  for (int r = ROLE_PRE; r <= ROLE_Q; r++) {
    Bwd B;
    open_kernel(&B, m, k, (Role)r, target);
    if (B.L.dropout && (r == ROLE_KV || r == ROLE_Q)) /* Bwd.inv_keep */
      B.inv_keep = em_un(&B.L, OP_RECIP, B.L.keep_scale, "inv_keep");
    switch ((Role)r) {
    case ROLE_PRE: emit_pre(&B); break;
    case ROLE_MAIN: emit_kv_outer(&B, true); break;
    case ROLE_POST: emit_post(&B); break;
    case ROLE_KV: emit_kv_outer(&B, false); break;
    case ROLE_Q: emit_q_outer(&B); break;
    }
    if (B.L.bad) {
      em_refuse(diag, k, k->loc, "score or mask expression has operands whose shapes do not combine");
      return 1;
    }
  }
  return 0;
}
