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

typedef struct Lower {
  Module *m;
  Func *f;
  const KernelSpec *k;
  Builder b;           /* insertion point (the inner loop body while lowering exprs) */
  ElemType dt;         /* bf16 / f16 */
  /* values the expressions may read */
  Value *ss, *q0, *k0, *bv, *hv, *seqq, *seqk;
  Value *qi, *ki;      /* index tiles, created on first use */
  bool decode;         /* mode = decode: per-sequence cache lengths, cache loads */
  int bad;             /* an expression could not be lowered */
} Lower;

/* The shorthands below build at L->b and name the result. */
static Value *bin(Lower *L, OpKind k, Value *x, Value *y, const char *name) {
  Value *v = build_binary(&L->b, k, x, y);
  if (name)
    v->name = module_strdup(L->m, name);
  return v;
}

static Value *un(Lower *L, OpKind k, Value *x, const char *name) {
  Value *v = build_unary(&L->b, k, x);
  if (name)
    v->name = module_strdup(L->m, name);
  return v;
}

static Value *nm(Lower *L, Value *v, const char *name) {
  v->name = module_strdup(L->m, name);
  return v;
}

static Value *op1(Lower *L, OpKind k, Value *x, Type t, const char *name) {
  Value *v = build_op(&L->b, k, &x, 1, &t, 1, 0)->results[0];
  return name ? nm(L, v, name) : v;
}

static Value *load(Lower *L, Value *tensor, Value *h, Value *row0, Type t, const char *name) {
  Value *ops[4] = {tensor, L->bv, h, row0};
  return nm(L, build_op(&L->b, OP_LOAD, ops, 4, &t, 1, 0)->results[0], name);
}

static void store(Lower *L, Value *tensor, Value *h, Value *row0, Value *tile) {
  Value *ops[5] = {tensor, L->bv, h, row0, tile};
  build_op(&L->b, OP_STORE, ops, 5, NULL, 0, 0);
}

static Type ftile(int r, int c, Dist d) { return type_tile(ELEM_F32, r, c, d); }

/* ------------------------------------------------------------ expressions */

/* Index tiles of the query (Br x 1) / key (1 x Bc) positions of the current
 * (Q, K/V) tile pair: iota + q0 / iota + k0, created on first use. */
static Value *make_iota(Lower *L, int axis) {
  Type t = axis == 0 ? type_tile(ELEM_INDEX, DIM_BR, 1, DIST_COLS)
                     : type_tile(ELEM_INDEX, 1, DIM_BC, DIST_COLS);
  SrcLoc saved = L->b.loc;
  L->b.loc = L->k->loc;
  Op *op = build_op(&L->b, OP_IOTA, NULL, 0, &t, 1, 0);
  attr_set_int(L->m, &op->attrs, "axis", axis);
  Value *io = nm(L, op->results[0], axis == 0 ? "iota0" : "iota1");
  Value *r = bin(L, OP_ADD, io, axis == 0 ? L->q0 : L->k0, axis == 0 ? "qi" : "ki");
  L->b.loc = saved;
  return r;
}

static Value *qidx(Lower *L) {
  if (!L->qi)
    L->qi = make_iota(L, 0);
  return L->qi;
}

static Value *kidx(Lower *L) {
  if (!L->ki)
    L->ki = make_iota(L, 1);
  return L->ki;
}

static bool is_index(Value *v) { return v->type.elem == ELEM_INDEX; }
static bool is_bool(Value *v) { return v->type.elem == ELEM_I1; }

static Value *to_f32(Lower *L, Value *v) {
  if (v->type.elem == ELEM_F32)
    return v;
  if (is_bool(v)) { /* true -> 1.0, false -> 0.0 */
    Value *one = build_const(&L->b, type_scalar(ELEM_F32), 1.0);
    Value *zero = build_const(&L->b, type_scalar(ELEM_F32), 0.0);
    return build_select(&L->b, v, one, zero);
  }
  return build_cast(&L->b, v, ELEM_F32);
}

static Value *to_bool(Lower *L, Value *v) {
  if (is_bool(v))
    return v;
  Value *zero = is_index(v) ? build_index(&L->b, 0) : build_const(&L->b, type_scalar(v->type.elem), 0);
  return build_cmp(&L->b, "ne", v, zero);
}

/* Booleans used as numbers become index 0/1. */
static Value *to_num(Lower *L, Value *v) {
  if (!is_bool(v))
    return v;
  Value *one = build_index(&L->b, 1);
  Value *zero = build_index(&L->b, 0);
  return build_select(&L->b, v, one, zero);
}

static bool integral(double x) { return x == floor(x) && fabs(x) < 9.0e15; }

static Value *lower_expr(Lower *L, const Expr *e);

/* A numeric literal takes the type its partner (if any) suggests: integral
 * numbers beside an index value are index constants, all others f32. */
static Value *lower_num(Lower *L, const Expr *e, Value *partner) {
  bool want_index = integral(e->num) && (!partner || is_index(partner));
  if (want_index)
    return build_index(&L->b, (int64_t)e->num);
  return build_const(&L->b, type_scalar(ELEM_F32), e->num);
}

/* Lowers the two operands of a binary expression; literals follow their
 * partner's type. */
static void lower_pair(Lower *L, const Expr *a, const Expr *b, Value **x, Value **y) {
  *x = a->kind == EXPR_NUM ? NULL : to_num(L, lower_expr(L, a));
  *y = b->kind == EXPR_NUM ? NULL : to_num(L, lower_expr(L, b));
  if (!*x && !*y) {
    *x = lower_num(L, a, NULL);
    *y = lower_num(L, b, *x);
    if (is_index(*x) != is_index(*y))
      *x = lower_num(L, a, *y); /* e.g. 1 + 0.5: both f32 */
  } else if (!*x) {
    *x = lower_num(L, a, *y);
  } else if (!*y) {
    *y = lower_num(L, b, *x);
  }
}

/* Mixed index / f32 operands: the index side is cast to f32. */
static void unify(Lower *L, Value **x, Value **y) {
  if (is_index(*x) && !is_index(*y))
    *x = to_f32(L, *x);
  else if (!is_index(*x) && is_index(*y))
    *y = to_f32(L, *y);
}

static OpKind arith_op(ExprKind k) {
  switch (k) {
  case EXPR_ADD: return OP_ADD;
  case EXPR_SUB: return OP_SUB;
  case EXPR_MUL: return OP_MUL;
  case EXPR_DIV: return OP_DIV;
  case EXPR_MOD: return OP_REM;
  case EXPR_MIN: return OP_MIN;
  default: return OP_MAX;
  }
}

static const char *cmp_pred(ExprKind k) {
  switch (k) {
  case EXPR_LT: return "lt";
  case EXPR_LE: return "le";
  case EXPR_GT: return "gt";
  case EXPR_GE: return "ge";
  case EXPR_EQ: return "eq";
  default: return "ne";
  }
}

static OpKind math_op(ExprKind k) {
  switch (k) {
  case EXPR_TANH: return OP_TANH;
  case EXPR_EXP: return OP_EXP;
  case EXPR_EXP2: return OP_EXP2;
  case EXPR_LOG: return OP_LOG;
  case EXPR_LOG2: return OP_LOG2;
  case EXPR_SQRT: return OP_SQRT;
  case EXPR_ABS: return OP_ABS;
  default: return OP_FLOOR;
  }
}

static Value *lower_var(Lower *L, const Expr *e) {
  switch (e->var) {
  case VAR_S: return L->ss;
  case VAR_B: return L->bv;
  case VAR_H: return L->hv;
  case VAR_Q: return qidx(L);
  case VAR_K: return kidx(L);
  case VAR_SEQLEN_Q: return L->seqq;
  case VAR_SEQLEN_K: return L->seqk;
  }
  return L->ss;
}

static Value *lower_select(Lower *L, const Expr *e) {
  Value *c = to_bool(L, lower_expr(L, e->a));
  Value *x, *y;
  lower_pair(L, e->b, e->c, &x, &y);
  unify(L, &x, &y);
  if (broadcast_type(broadcast_type(c->type, x->type, x->type.elem), y->type, x->type.elem).kind ==
      TYPE_NONE) {
    L->bad = 1;
    return x;
  }
  return build_select(&L->b, c, x, y);
}

static Value *lower_expr_at(Lower *L, const Expr *e) {
  Value *x, *y;
  switch (e->kind) {
  case EXPR_NUM: return lower_num(L, e, NULL);
  case EXPR_VAR: return lower_var(L, e);
  case EXPR_NEG: return build_unary(&L->b, OP_NEG, to_num(L, lower_expr(L, e->a)));
  case EXPR_NOT: return build_unary(&L->b, OP_NOT, to_bool(L, lower_expr(L, e->a)));
  case EXPR_ADD: case EXPR_SUB: case EXPR_MUL: case EXPR_MOD: case EXPR_MIN: case EXPR_MAX:
    lower_pair(L, e->a, e->b, &x, &y);
    unify(L, &x, &y);
    break;
  case EXPR_DIV: /* true division: f32 on both sides, literals made f32 directly */
    x = e->a->kind == EXPR_NUM ? build_const(&L->b, type_scalar(ELEM_F32), e->a->num)
                               : to_f32(L, to_num(L, lower_expr(L, e->a)));
    y = e->b->kind == EXPR_NUM ? build_const(&L->b, type_scalar(ELEM_F32), e->b->num)
                               : to_f32(L, to_num(L, lower_expr(L, e->b)));
    break;
  case EXPR_LT: case EXPR_LE: case EXPR_GT: case EXPR_GE: case EXPR_EQ: case EXPR_NE:
    lower_pair(L, e->a, e->b, &x, &y);
    unify(L, &x, &y);
    if (broadcast_type(x->type, y->type, ELEM_I1).kind == TYPE_NONE) {
      L->bad = 1;
      return x;
    }
    return build_cmp(&L->b, cmp_pred(e->kind), x, y);
  case EXPR_AND: case EXPR_OR:
    x = to_bool(L, lower_expr(L, e->a));
    y = to_bool(L, lower_expr(L, e->b));
    return build_binary(&L->b, e->kind == EXPR_AND ? OP_AND : OP_OR, x, y);
  case EXPR_SELECT: return lower_select(L, e);
  case EXPR_ABS: case EXPR_FLOOR:
    x = to_num(L, lower_expr(L, e->a));
    if (is_index(x)) /* exact on integers: abs stays index, floor is the identity */
      return e->kind == EXPR_ABS ? build_unary(&L->b, OP_ABS, x) : x;
    return build_unary(&L->b, math_op(e->kind), x);
  default: /* tanh exp exp2 log log2 sqrt */
    return build_unary(&L->b, math_op(e->kind), to_f32(L, lower_expr(L, e->a)));
  }
  if (broadcast_type(x->type, y->type, x->type.elem).kind == TYPE_NONE) {
    L->bad = 1;
    return x;
  }
  return build_binary(&L->b, arith_op(e->kind), x, y);
}

/* Lowers e with its SrcLoc on every op it creates. */
static Value *lower_expr(Lower *L, const Expr *e) {
  SrcLoc saved = L->b.loc;
  if (e->loc.line > 0)
    L->b.loc = e->loc;
  Value *v = lower_expr_at(L, e);
  L->b.loc = saved;
  return v;
}

/* ----------------------------------------------------------------- kernel */

static const char *mask_word(MaskKind k) {
  switch (k) {
  case MASK_CAUSAL: return "causal";
  case MASK_WINDOW: return "window";
  case MASK_EXPR: return "expr";
  default: return "none";
  }
}

static const char *mode_word(Mode m) {
  switch (m) {
  case MODE_DECODE: return "decode";
  default: return "forward";
  }
}

static void set_attrs(Lower *L, const char *target) {
  const KernelSpec *k = L->k;
  AttrList *a = &L->f->attrs;
  attr_set_word(L->m, a, "dtype", k->dtype == DTYPE_F16 ? "f16" : "bf16");
  attr_set_int(L->m, a, "head_dim", k->head_dim);
  attr_set_int(L->m, a, "v_head_dim", k->v_head_dim);
  attr_set_int(L->m, a, "heads", k->heads);
  attr_set_int(L->m, a, "kv_heads", k->kv_heads);
  attr_set_float(L->m, a, "scale", k->scale);
  attr_set_word(L->m, a, "mask", mask_word(k->mask_kind));
  attr_set_word(L->m, a, "mode", mode_word(k->mode));
  attr_set_word(L->m, a, "target", target ? target : "sm_90a");
  if (k->mode == MODE_DECODE) {
    attr_set_word(L->m, a, "cache", k->cache == CACHE_PAGED ? "paged" : "contiguous");
    if (k->cache == CACHE_PAGED)
      attr_set_int(L->m, a, "page_size", k->page_size);
    attr_set_int(L->m, a, "split", k->split); /* 0: auto, the runtime picks nsplit */
    if (k->has_unified_max)
      attr_set_float(L->m, a, "unified_max", k->unified_max);
    if (k->q_len_max)
      attr_set_int(L->m, a, "q_len_max", k->q_len_max); /* absent: SPEC_MAX_Q_LEN */
  }
  attr_set_word(L->m, a, "schedule", "fa1");
  const Schedule *s = &k->schedule;
  if (s->loc.line > 0 || s->tile_q || s->tile_kv || s->warps || s->stages) {
    attr_set_int(L->m, a, "sched_tile_q", s->tile_q);
    attr_set_int(L->m, a, "sched_tile_kv", s->tile_kv);
    attr_set_int(L->m, a, "sched_warps", s->warps);
    attr_set_int(L->m, a, "sched_stages", s->stages);
  }
}

/* The decode kernel's arguments (docs/decode.md): the FA1 workspaces as in
 * forward, the cache as k / v, the per-sequence lengths, the block table
 * when paged. */
static Func *make_decode_func(Module *m, const KernelSpec *k) {
  int d = k->head_dim, dv = k->v_head_dim, h = k->heads, hk = k->kv_heads;
  ElemType dt = k->dtype == DTYPE_F16 ? ELEM_F16 : ELEM_BF16;
  bool paged = k->cache == CACHE_PAGED;
  int rows0 = paged ? DIM_NUM_PAGES : DIM_BATCH, rows1 = paged ? k->page_size : DIM_CAPACITY;
  Type t[13] = {
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
  const char *names[13] = {"q", "k", "v", "o", "lse", "o_acc", "m_buf", "l_buf",
                           "cache_seqlens", "block_table", "batch", "q_len", "capacity"};
  if (!paged) { /* no block table */
    memmove(&t[9], &t[10], 3 * sizeof(Type));
    memmove(&names[9], &names[10], 3 * sizeof(char *));
  }
  return func_create(m, k->name ? k->name : "attn", t, names, paged ? 13 : 12, k->loc);
}

static Func *make_func(Module *m, const KernelSpec *k) {
  if (k->mode == MODE_DECODE)
    return make_decode_func(m, k);
  int d = k->head_dim, dv = k->v_head_dim, h = k->heads, hk = k->kv_heads;
  ElemType dt = k->dtype == DTYPE_F16 ? ELEM_F16 : ELEM_BF16;
  Type t[11] = {
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
  static const char *const names[11] = {"q", "k", "v", "o", "lse", "o_acc", "m_buf",
                                        "l_buf", "batch", "seqlen_q", "seqlen_k"};
  return func_create(m, k->name ? k->name : "attn", t, names, 11, k->loc);
}

/* `for %iv = %c0 to hi`, with the builder moved into its body. */
static Op *open_for(Lower *L, Value *lo, Value *hi, bool parallel, const char *iv) {
  Op *f = build_for(&L->b, lo, hi, parallel, NULL, 0, iv);
  L->b = builder_at_end(L->m, for_body(f));
  L->b.loc = L->k->loc;
  return f;
}

/* Ends the body with an empty yield and moves the builder after the loop. */
static void close_for(Lower *L, Op *f) {
  build_yield(&L->b, NULL, 0);
  L->b = builder_after(L->m, f);
  L->b.loc = L->k->loc;
}

typedef struct Outer {
  Value *c0, *scale, *ninf, *f0, *br, *bc, *nq, *nk, *hk;
  Value *block_table; /* decode, paged */
  Value *o, *lse, *oacc, *mbuf, *lbuf, *q, *k, *v;
} Outer;

static void emit_init_loop(Lower *L, Outer *X) {
  int dv = L->k->v_head_dim;
  Op *fi = open_for(L, X->c0, X->nq, false, "i");
  Value *q0 = bin(L, OP_MUL, for_iv(fi), X->br, "q0");
  store(L, X->oacc, L->hv, q0, nm(L, build_full(&L->b, ftile(DIM_BR, dv, DIST_COLS), 0), "z"));
  store(L, X->lbuf, L->hv, q0, nm(L, build_full(&L->b, ftile(DIM_BR, 1, DIST_COLS), 0), "lz"));
  store(L, X->mbuf, L->hv, q0,
        nm(L, build_full(&L->b, ftile(DIM_BR, 1, DIST_COLS), -INFINITY), "mz"));
  close_for(L, fi);
}

/* select(cmp eq x, -inf), 0, x: a max that is safe to subtract. */
static Value *safe_max(Lower *L, Outer *X, Value *x, const char *name) {
  Value *eq = build_cmp(&L->b, "eq", x, X->ninf);
  return nm(L, build_select(&L->b, eq, X->f0, x), name);
}

/* Score modifier over %ss; always gives a Br x Bc f32 tile. */
static Value *emit_score(Lower *L) {
  if (!L->k->score)
    return L->ss;
  Value *v = to_f32(L, to_num(L, lower_expr(L, L->k->score)));
  SrcLoc saved = L->b.loc;
  L->b.loc = L->k->score->loc.line > 0 ? L->k->score->loc : saved;
  if (v->type.kind != TYPE_TILE || v->type.rows != DIM_BR || v->type.cols != DIM_BC) {
    /* a score that does not read s everywhere: broadcast to the full tile */
    Value *z = build_full(&L->b, ftile(DIM_BR, DIM_BC, DIST_COLS), 0);
    v = build_binary(&L->b, OP_ADD, z, v);
  }
  L->b.loc = saved;
  return nm(L, v, "sc");
}

/* The user mask (if any) AND the bounds mask of a partial last K/V tile. */
static bool expr_uses(const Expr *e, ExprVar v) {
  if (!e)
    return false;
  if (e->kind == EXPR_VAR)
    return e->var == v;
  return expr_uses(e->a, v) || expr_uses(e->b, v) || expr_uses(e->c, v);
}

static Value *emit_cond(Lower *L) {
  /* index tiles in the documented order (%qi, %ki) unless the score made them */
  if (expr_uses(L->k->mask, VAR_Q))
    qidx(L);
  kidx(L);
  Value *user = L->k->mask ? to_bool(L, lower_expr(L, L->k->mask)) : NULL;
  Value *inb = nm(L, build_cmp(&L->b, "lt", kidx(L), L->seqk), "inb");
  if (!user)
    return inb;
  return bin(L, OP_AND, user, inb, "cond");
}

static void emit_inner_body(Lower *L, Outer *X, Value *kt, Value *vt, Value *i) {
  int d = L->k->head_dim, dv = L->k->v_head_dim;
  (void)d;
  Value *q0 = bin(L, OP_MUL, i, X->br, "q0");
  L->q0 = q0;
  L->qi = NULL;
  L->ki = NULL;
  Value *qt = load(L, X->q, L->hv, q0, type_tile(L->dt, DIM_BR, d, DIST_NONE), "qt");
  Value *ot = load(L, X->oacc, L->hv, q0, ftile(DIM_BR, dv, DIST_COLS), "ot");
  Value *lt = load(L, X->lbuf, L->hv, q0, ftile(DIM_BR, 1, DIST_COLS), "lt");
  Value *mt = load(L, X->mbuf, L->hv, q0, ftile(DIM_BR, 1, DIST_COLS), "mt");
  Type st = ftile(DIM_BR, DIM_BC, DIST_COLS);
  Op *mm = build_op(&L->b, OP_MATMUL, (Value *[]){qt, kt}, 2, &st, 1, 0);
  attr_set_int(L->m, &mm->attrs, "transpose_b", 1);
  Value *s = nm(L, mm->results[0], "s");
  L->ss = bin(L, OP_MUL, s, X->scale, "ss");
  Value *sc = emit_score(L);
  Value *cond = emit_cond(L);
  Value *sm = nm(L, build_op(&L->b, OP_MASK, (Value *[]){sc, cond}, 2, &st, 1, 0)->results[0], "sm");

  Value *rm = op1(L, OP_ROWMAX, sm, ftile(DIM_BR, 1, DIST_PARTIAL), "rm");
  Value *mtil = op1(L, OP_XWARP_REDUCE, rm, ftile(DIM_BR, 1, DIST_COLS), "mtil");
  attr_set_word(L->m, &mtil->def->attrs, "kind", "max");
  Value *mtil_safe = safe_max(L, X, mtil, "mtil_safe");
  Value *p = un(L, OP_EXP, bin(L, OP_SUB, sm, mtil_safe, NULL), "p");
  Value *rs = op1(L, OP_ROWSUM, p, ftile(DIM_BR, 1, DIST_PARTIAL), "rs");
  Value *ltil = op1(L, OP_XWARP_REDUCE, rs, ftile(DIM_BR, 1, DIST_COLS), "ltil");
  attr_set_word(L->m, &ltil->def->attrs, "kind", "sum");
  Value *mnew = bin(L, OP_MAX, mt, mtil, "mnew");
  Value *mnew_safe = safe_max(L, X, mnew, "mnew_safe");
  Value *alpha = un(L, OP_EXP, bin(L, OP_SUB, mt, mnew_safe, NULL), "alpha");
  Value *beta = un(L, OP_EXP, bin(L, OP_SUB, mtil, mnew_safe, NULL), "beta");
  Value *al = bin(L, OP_MUL, alpha, lt, NULL); /* C leaves argument order open: sequence */
  Value *bl = bin(L, OP_MUL, beta, ltil, NULL);
  Value *lnew = bin(L, OP_ADD, al, bl, "lnew");
  Value *pc = nm(L, build_cast(&L->b, p, L->dt), "pc");
  Type pvt = ftile(DIM_BR, dv, DIST_PARTIAL);
  Value *pv = nm(L, build_op(&L->b, OP_MATMUL, (Value *[]){pc, vt}, 2, &pvt, 1, 0)->results[0], "pv");
  Value *pvr = op1(L, OP_XWARP_REDUCE, pv, ftile(DIM_BR, dv, DIST_COLS), "pvr");
  attr_set_word(L->m, &pvr->def->attrs, "kind", "sum");
  Type ot_t = ot->type;
  Value *o1 = nm(L, build_op(&L->b, OP_RESCALE, (Value *[]){ot, bin(L, OP_MUL, lt, alpha, NULL)}, 2,
                             &ot_t, 1, 0)->results[0], "o1");
  Value *pvs = build_op(&L->b, OP_RESCALE, (Value *[]){pvr, beta}, 2, &ot_t, 1, 0)->results[0];
  Value *o2 = bin(L, OP_ADD, o1, pvs, "o2");
  Value *inv = un(L, OP_RECIP, lnew, NULL);
  Value *o3 = nm(L, build_op(&L->b, OP_RESCALE, (Value *[]){o2, inv}, 2, &ot_t, 1, 0)->results[0], "o3");
  store(L, X->oacc, L->hv, q0, o3);
  store(L, X->lbuf, L->hv, q0, lnew);
  store(L, X->mbuf, L->hv, q0, mnew);
}

/* A K or V tile: a plain load for forward; for decode a load limited to the
 * sequence's cache length, through the block table when paged. */
static Value *load_kv(Lower *L, Outer *X, Value *tensor, Value *k0, Type t, const char *name) {
  if (!L->decode)
    return load(L, tensor, X->hk, k0, t, name);
  if (!X->block_table) {
    Value *ops[5] = {tensor, L->bv, X->hk, k0, L->seqk};
    return nm(L, build_op(&L->b, OP_LOAD, ops, 5, &t, 1, 0)->results[0], name);
  }
  Value *ops[6] = {tensor, X->block_table, L->bv, X->hk, k0, L->seqk};
  Op *op = build_op(&L->b, OP_LOAD_PAGED, ops, 6, &t, 1, 0);
  attr_set_int(L->m, &op->attrs, "page_size", L->k->page_size);
  return nm(L, op->results[0], name);
}

static void emit_main_loop(Lower *L, Outer *X) {
  int d = L->k->head_dim, dv = L->k->v_head_dim;
  Op *fj = open_for(L, X->c0, X->nk, false, "j");
  Value *k0 = bin(L, OP_MUL, for_iv(fj), X->bc, "k0");
  L->k0 = k0;
  Value *kt = load_kv(L, X, X->k, k0, type_tile(L->dt, DIM_BC, d, DIST_NONE), "kt");
  Value *vt = load_kv(L, X, X->v, k0, type_tile(L->dt, DIM_BC, dv, DIST_NONE), "vt");
  Op *fi = open_for(L, X->c0, X->nq, false, "i");
  emit_inner_body(L, X, kt, vt, for_iv(fi));
  close_for(L, fi);
  close_for(L, fj);
}

static void emit_epilogue(Lower *L, Outer *X) {
  int dv = L->k->v_head_dim;
  Op *fi = open_for(L, X->c0, X->nq, false, "i");
  Value *q0 = bin(L, OP_MUL, for_iv(fi), X->br, "q0");
  Value *ot = load(L, X->oacc, L->hv, q0, ftile(DIM_BR, dv, DIST_COLS), "ot");
  store(L, X->o, L->hv, q0, nm(L, build_cast(&L->b, ot, L->dt), "oc"));
  Value *lt = load(L, X->lbuf, L->hv, q0, ftile(DIM_BR, 1, DIST_COLS), "lt");
  Value *mt = load(L, X->mbuf, L->hv, q0, ftile(DIM_BR, 1, DIST_COLS), "mt");
  store(L, X->lse, L->hv, q0, bin(L, OP_ADD, mt, un(L, OP_LOG, lt, NULL), "lset"));
  close_for(L, fi);
}

static int refuse(FILE *diag, const KernelSpec *k, SrcLoc loc, const char *msg) {
  if (loc.line <= 0)
    loc = k->loc;
  fprintf(diag ? diag : stderr, "%s:%d:%d: error: %s\n", loc.file ? loc.file : "<spec>",
          loc.line, loc.col, msg);
  return 0;
}

Func *emit_tile_kernel(Module *m, const KernelSpec *k, const char *target, FILE *diag) {
  if (k->grad) {
    refuse(diag, k, k->loc, "grad = true: the backward cannot be compiled yet");
    return NULL;
  }
  if (k->dropout > 0) {
    refuse(diag, k, k->loc, "dropout > 0 cannot be compiled yet (not implemented)");
    return NULL;
  }
  if (k->kv_heads <= 0 || k->heads % k->kv_heads != 0 || k->head_dim <= 0 || k->v_head_dim <= 0) {
    refuse(diag, k, k->loc, "invalid head counts or head dims (sema should have refused this)");
    return NULL;
  }
  Lower L = {.m = m, .k = k, .dt = k->dtype == DTYPE_F16 ? ELEM_F16 : ELEM_BF16,
             .decode = k->mode == MODE_DECODE};
  L.f = make_func(m, k);
  set_attrs(&L, target);
  L.b = builder_at_end(m, L.f->body);
  L.b.loc = k->loc;
  L.seqq = func_arg(L.f, L.decode ? "q_len" : "seqlen_q");
  L.seqk = func_arg(L.f, "seqlen_k"); /* decode: loaded per sequence below */

  Outer X = {0};
  X.q = func_arg(L.f, "q"), X.k = func_arg(L.f, "k"), X.v = func_arg(L.f, "v");
  X.o = func_arg(L.f, "o"), X.lse = func_arg(L.f, "lse");
  X.oacc = func_arg(L.f, "o_acc"), X.mbuf = func_arg(L.f, "m_buf"), X.lbuf = func_arg(L.f, "l_buf");
  X.c0 = nm(&L, build_index(&L.b, 0), "c0");
  Value *nheads = nm(&L, build_index(&L.b, k->heads), "nheads");
  Value *group = nm(&L, build_index(&L.b, k->heads / k->kv_heads), "group");
  X.scale = nm(&L, build_const(&L.b, type_scalar(ELEM_F32), k->scale), "scale");
  X.ninf = nm(&L, build_const(&L.b, type_scalar(ELEM_F32), -INFINITY), "ninf");
  X.f0 = nm(&L, build_const(&L.b, type_scalar(ELEM_F32), 0.0), "f0");
  Op *ts = build_op(&L.b, OP_TILE_SIZE, NULL, 0, &(Type){.kind = TYPE_SCALAR, .elem = ELEM_INDEX}, 1, 0);
  attr_set_word(m, &ts->attrs, "dim", "q");
  X.br = nm(&L, ts->results[0], "br");
  ts = build_op(&L.b, OP_TILE_SIZE, NULL, 0, &(Type){.kind = TYPE_SCALAR, .elem = ELEM_INDEX}, 1, 0);
  attr_set_word(m, &ts->attrs, "dim", "kv");
  X.bc = nm(&L, ts->results[0], "bc");
  X.nq = bin(&L, OP_CEILDIV, L.seqq, X.br, "nq");
  X.block_table = func_arg(L.f, "block_table");
  if (!L.decode)
    X.nk = bin(&L, OP_CEILDIV, L.seqk, X.bc, "nk");

  Op *fb = open_for(&L, X.c0, func_arg(L.f, "batch"), true, "b");
  L.bv = for_iv(fb);
  if (L.decode) {
    Value *ops[2] = {func_arg(L.f, "cache_seqlens"), L.bv};
    Type it = type_index();
    L.seqk = nm(&L, build_op(&L.b, OP_LOAD_SCALAR, ops, 2, &it, 1, 0)->results[0], "seqlen_kb");
    X.nk = bin(&L, OP_CEILDIV, L.seqk, X.bc, "nk");
  }
  Op *fh = open_for(&L, X.c0, nheads, true, "h");
  L.hv = for_iv(fh);
  X.hk = bin(&L, OP_DIV, L.hv, group, "hk");
  emit_init_loop(&L, &X);
  emit_main_loop(&L, &X);
  emit_epilogue(&L, &X);
  close_for(&L, fh);
  close_for(&L, fb);
  build_op(&L.b, OP_RETURN, NULL, 0, NULL, 0, 0);

  if (L.bad) {
    refuse(diag, k, k->loc, "score or mask expression has operands whose shapes do not combine");
    m->nfuncs--; /* drop the half-built kernel (it is the last one added) */
    return NULL;
  }
  return L.f;
}
