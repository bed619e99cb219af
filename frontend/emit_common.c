/* emit_common.c - the kernel emitters' shared part (emit_internal.h): IR
 * shorthands, the spec's expressions (score modifier, mask) lowered onto a
 * score tile of either orientation, the kernel attributes, loops.
 */
#include "frontend/emit_internal.h"

#include <math.h>
#include <string.h>

/* The shorthands below build at L->b and name the result. */
Value *em_bin(Lower *L, OpKind k, Value *x, Value *y, const char *name) {
  Value *v = build_binary(&L->b, k, x, y);
  if (name)
    v->name = module_strdup(L->m, name);
  return v;
}

Value *em_un(Lower *L, OpKind k, Value *x, const char *name) {
  Value *v = build_unary(&L->b, k, x);
  if (name)
    v->name = module_strdup(L->m, name);
  return v;
}

Value *em_name(Lower *L, Value *v, const char *name) {
  v->name = module_strdup(L->m, name);
  return v;
}

Value *em_op1(Lower *L, OpKind k, Value *x, Type t, const char *name) {
  Value *v = build_op(&L->b, k, &x, 1, &t, 1, 0)->results[0];
  return name ? em_name(L, v, name) : v;
}

Value *em_load(Lower *L, Value *tensor, Value *h, Value *row0, Type t, const char *name) {
  Value *ops[4] = {tensor, L->bv, h, row0};
  return em_name(L, build_op(&L->b, OP_LOAD, ops, 4, &t, 1, 0)->results[0], name);
}

void em_store(Lower *L, Value *tensor, Value *h, Value *row0, Value *tile) {
  Value *ops[5] = {tensor, L->bv, h, row0, tile};
  build_op(&L->b, OP_STORE, ops, 5, NULL, 0, 0);
}

Type em_ftile(int r, int c, Dist d) { return type_tile(ELEM_F32, r, c, d); }

/* ------------------------------------------------------------ expressions */

/* The score tile's extents: Br x Bc, or Bc x Br when queries are its columns. */
static int score_rows(const Lower *L) { return L->q_axis == 0 ? DIM_BR : DIM_BC; }
static int score_cols(const Lower *L) { return L->q_axis == 0 ? DIM_BC : DIM_BR; }

/* Index tiles of the query / key positions of the current (Q, K/V) tile
 * pair along `axis` of the score tile (R x 1 for axis 0, 1 x C for axis 1):
 * iota + base, created on first use. */
static Value *make_iota(Lower *L, int axis, Value *base, const char *name) {
  Type t = axis == 0 ? type_tile(ELEM_INDEX, score_rows(L), 1, L->dist)
                     : type_tile(ELEM_INDEX, 1, score_cols(L), L->dist);
  SrcLoc saved = L->b.loc;
  L->b.loc = L->k->loc;
  Op *op = build_op(&L->b, OP_IOTA, NULL, 0, &t, 1, 0);
  attr_set_int(L->m, &op->attrs, "axis", axis);
  Value *io = em_name(L, op->results[0], axis == 0 ? "iota0" : "iota1");
  Value *r = em_bin(L, OP_ADD, io, base, name);
  L->b.loc = saved;
  return r;
}

static Value *qidx(Lower *L) {
  if (!L->qi)
    L->qi = make_iota(L, L->q_axis, L->q0, "qi");
  return L->qi;
}

static Value *kidx(Lower *L) {
  if (!L->ki)
    L->ki = make_iota(L, 1 - L->q_axis, L->k0, "ki");
  return L->ki;
}

/* max(min(x, n - 1), 0): a position clamped into a sequence of length n. */
static Value *clamp_pos(Lower *L, Value *x, Value *n, const char *name) {
  SrcLoc saved = L->b.loc;
  L->b.loc = L->k->loc;
  Value *last = em_bin(L, OP_SUB, n, build_index(&L->b, 1), NULL);
  Value *lo = em_bin(L, OP_MIN, x, last, NULL);
  Value *r = em_bin(L, OP_MAX, lo, build_index(&L->b, 0), name);
  L->b.loc = saved;
  return r;
}

static Value *qpos(Lower *L) {
  if (!L->in_index)
    return qidx(L);
  if (!L->qc)
    L->qc = clamp_pos(L, qidx(L), L->seqq, "qc");
  return L->qc;
}

static Value *kpos(Lower *L) {
  if (!L->in_index)
    return kidx(L);
  if (!L->kc)
    L->kc = clamp_pos(L, kidx(L), L->seqk, "kc");
  return L->kc;
}

static bool is_index(Value *v) { return v->type.elem == ELEM_INDEX; }
static bool is_bool(Value *v) { return v->type.elem == ELEM_I1; }

Value *em_to_f32(Lower *L, Value *v) {
  if (v->type.elem == ELEM_F32)
    return v;
  if (is_bool(v)) { /* true -> 1.0, false -> 0.0 */
    Value *one = build_const(&L->b, type_scalar(ELEM_F32), 1.0);
    Value *zero = build_const(&L->b, type_scalar(ELEM_F32), 0.0);
    return build_select(&L->b, v, one, zero);
  }
  return build_cast(&L->b, v, ELEM_F32);
}

Value *em_to_bool(Lower *L, Value *v) {
  if (is_bool(v))
    return v;
  Value *zero = is_index(v) ? build_index(&L->b, 0) : build_const(&L->b, type_scalar(v->type.elem), 0);
  return build_cmp(&L->b, "ne", v, zero);
}

/* Booleans used as numbers become index 0/1. */
Value *em_to_num(Lower *L, Value *v) {
  if (!is_bool(v))
    return v;
  Value *one = build_index(&L->b, 1);
  Value *zero = build_index(&L->b, 0);
  return build_select(&L->b, v, one, zero);
}

static bool integral(double x) { return x == floor(x) && fabs(x) < 9.0e15; }

Value *em_expr(Lower *L, const Expr *e);

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
  *x = a->kind == EXPR_NUM ? NULL : em_to_num(L, em_expr(L, a));
  *y = b->kind == EXPR_NUM ? NULL : em_to_num(L, em_expr(L, b));
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
    *x = em_to_f32(L, *x);
  else if (!is_index(*x) && is_index(*y))
    *y = em_to_f32(L, *y);
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
  case VAR_Q: return qpos(L);
  case VAR_K: return kpos(L);
  case VAR_SEQLEN_Q: return L->seqq;
  case VAR_SEQLEN_K: return L->seqk;
  }
  return L->ss;
}

/* A run-time input: a scalar's argument, or `gather` of a tensor's
 * elements at the lowered indices (their broadcast shape). */
static Value *lower_input(Lower *L, const Expr *e) {
  Value *arg = L->inputs[e->input];
  if (!arg) {
    L->bad = 1;
    return build_index(&L->b, 0);
  }
  if (arg->type.kind != TYPE_TENSOR)
    return arg;
  const Expr *ix[4] = {e->a, e->b, e->c, e->d};
  Value *idx[4];
  Type shape = type_index();
  for (int i = 0; i < arg->type.rank; i++) {
    L->in_index++;
    idx[i] = em_to_num(L, em_expr(L, ix[i]));
    L->in_index--;
    if (idx[i]->type.elem == ELEM_F32) /* an integer computed in f32 (floor) */
      idx[i] = build_cast(&L->b, idx[i], ELEM_INDEX);
    shape = broadcast_type(shape, idx[i]->type, ELEM_INDEX);
    if (idx[i]->type.elem != ELEM_INDEX || shape.kind == TYPE_NONE) {
      L->bad = 1;
      return build_index(&L->b, 0);
    }
  }
  return build_gather(&L->b, arg, idx, arg->type.rank);
}

static Value *lower_select(Lower *L, const Expr *e) {
  Value *c = em_to_bool(L, em_expr(L, e->a));
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
  case EXPR_NEG: return build_unary(&L->b, OP_NEG, em_to_num(L, em_expr(L, e->a)));
  case EXPR_NOT: return build_unary(&L->b, OP_NOT, em_to_bool(L, em_expr(L, e->a)));
  case EXPR_ADD: case EXPR_SUB: case EXPR_MUL: case EXPR_MOD: case EXPR_MIN: case EXPR_MAX:
    lower_pair(L, e->a, e->b, &x, &y);
    unify(L, &x, &y);
    break;
  case EXPR_DIV: /* true division: f32 on both sides, literals made f32 directly */
    x = e->a->kind == EXPR_NUM ? build_const(&L->b, type_scalar(ELEM_F32), e->a->num)
                               : em_to_f32(L, em_to_num(L, em_expr(L, e->a)));
    y = e->b->kind == EXPR_NUM ? build_const(&L->b, type_scalar(ELEM_F32), e->b->num)
                               : em_to_f32(L, em_to_num(L, em_expr(L, e->b)));
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
    x = em_to_bool(L, em_expr(L, e->a));
    y = em_to_bool(L, em_expr(L, e->b));
    return build_binary(&L->b, e->kind == EXPR_AND ? OP_AND : OP_OR, x, y);
  case EXPR_SELECT: return lower_select(L, e);
  case EXPR_INPUT: return lower_input(L, e);
  case EXPR_ABS: case EXPR_FLOOR:
    x = em_to_num(L, em_expr(L, e->a));
    if (is_index(x)) /* exact on integers: abs stays index, floor is the identity */
      return e->kind == EXPR_ABS ? build_unary(&L->b, OP_ABS, x) : x;
    return build_unary(&L->b, math_op(e->kind), x);
  default: /* tanh exp exp2 log log2 sqrt */
    return build_unary(&L->b, math_op(e->kind), em_to_f32(L, em_expr(L, e->a)));
  }
  if (broadcast_type(x->type, y->type, x->type.elem).kind == TYPE_NONE) {
    L->bad = 1;
    return x;
  }
  return build_binary(&L->b, arith_op(e->kind), x, y);
}

/* Lowers e with its SrcLoc on every op it creates. */
Value *em_expr(Lower *L, const Expr *e) {
  SrcLoc saved = L->b.loc;
  if (e->loc.line > 0)
    L->b.loc = e->loc;
  Value *v = lower_expr_at(L, e);
  L->b.loc = saved;
  return v;
}

static const char *em_mask_word(MaskKind k) {
  switch (k) {
  case MASK_CAUSAL: return "causal";
  case MASK_WINDOW: return "window";
  case MASK_EXPR: return "expr";
  default: return "none";
  }
}

static const char *em_mode_word(Mode m) {
  switch (m) {
  case MODE_DECODE: return "decode";
  default: return "forward";
  }
}

void em_set_attrs(Lower *L, const char *target) {
  const KernelSpec *k = L->k;
  AttrList *a = &L->f->attrs;
  attr_set_word(L->m, a, "dtype", k->dtype == DTYPE_F16 ? "f16" : "bf16");
  attr_set_int(L->m, a, "head_dim", k->head_dim);
  attr_set_int(L->m, a, "v_head_dim", k->v_head_dim);
  attr_set_int(L->m, a, "heads", k->heads);
  attr_set_int(L->m, a, "kv_heads", k->kv_heads);
  if (!k->scale_expr) /* else the launch's inputs decide it: no attribute */
    attr_set_float(L->m, a, "scale", k->scale);
  attr_set_word(L->m, a, "mask", em_mask_word(k->mask_kind));
  attr_set_word(L->m, a, "mode", em_mode_word(k->mode));
  attr_set_word(L->m, a, "target", target ? target : "sm_90a");
  if (k->varlen) /* every kernel of the spec, the backward's too (docs/abi.md) */
    attr_set_word(L->m, a, "layout", "varlen");
  if (k->dropout_torch) /* every kernel of the spec: fa_dropout_mask reads any one's */
    attr_set_word(L->m, a, "dropout_mask", "torch");
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
  if (s->loc.line > 0) {
    L->f->sched_loc = s->loc;
    L->f->sched_name = k->name;
  }
  if (s->loc.line > 0 || s->tile_q || s->tile_kv || s->warps || s->stages) {
    attr_set_int(L->m, a, "sched_tile_q", s->tile_q);
    attr_set_int(L->m, a, "sched_tile_kv", s->tile_kv);
    attr_set_int(L->m, a, "sched_warps", s->warps);
    attr_set_int(L->m, a, "sched_stages", s->stages);
  }
  if (s->overlap) /* the overlap-softmax pass's switch */
    attr_set_int(L->m, a, "sched_overlap", s->overlap > 0);
  if (s->producer) /* the warp-specialize pass's switch */
    attr_set_int(L->m, a, "sched_producer", s->producer > 0);
  if (s->tma) /* the warp-specialize pass's choice of copies */
    attr_set_int(L->m, a, "sched_tma", s->tma > 0);
  if (s->pingpong) /* the pingpong pass's switch */
    attr_set_int(L->m, a, "sched_pingpong", s->pingpong > 0);
  if (s->persistent) /* the persistent pass's switch (unset: its default) */
    attr_set_int(L->m, a, "persistent", s->persistent > 0);
}

/* `for %iv = %c0 to hi`, with the builder moved into its body. */
Op *em_open_for(Lower *L, Value *lo, Value *hi, bool parallel, const char *iv) {
  Op *f = build_for(&L->b, lo, hi, parallel, NULL, 0, iv);
  L->b = builder_at_end(L->m, for_body(f));
  L->b.loc = L->k->loc;
  return f;
}

/* Ends the body with an empty yield and moves the builder after the loop. */
void em_close_for(Lower *L, Op *f) {
  build_yield(&L->b, NULL, 0);
  L->b = builder_after(L->m, f);
  L->b.loc = L->k->loc;
}

/* Score modifier over %ss; always gives a full score tile of f32. */
Value *em_score(Lower *L) {
  if (!L->k->score)
    return L->ss;
  Value *v = em_to_f32(L, em_to_num(L, em_expr(L, L->k->score)));
  SrcLoc saved = L->b.loc;
  L->b.loc = L->k->score->loc.line > 0 ? L->k->score->loc : saved;
  if (v->type.kind != TYPE_TILE || v->type.rows != score_rows(L) ||
      v->type.cols != score_cols(L)) {
    /* a score that does not read s everywhere: broadcast to the full tile */
    Value *z = build_full(&L->b, em_ftile(score_rows(L), score_cols(L), L->dist), 0);
    v = build_binary(&L->b, OP_ADD, z, v);
  }
  L->b.loc = saved;
  return em_name(L, v, "sc");
}

bool em_expr_uses(const Expr *e, ExprVar v) {
  if (!e)
    return false;
  if (e->kind == EXPR_VAR)
    return e->var == v;
  return em_expr_uses(e->a, v) || em_expr_uses(e->b, v) || em_expr_uses(e->c, v) ||
         em_expr_uses(e->d, v);
}

/* The user mask (if any) AND the bounds mask of a partial last K/V tile
 * (and, with bound_q, of a partial last Q tile). */
Value *em_cond(Lower *L) {
  /* index tiles in the documented order (%qi, %ki) unless the score made them */
  if (em_expr_uses(L->k->mask, VAR_Q) || L->bound_q)
    qidx(L);
  kidx(L);
  Value *user = L->k->mask ? em_to_bool(L, em_expr(L, L->k->mask)) : NULL;
  Value *inb = em_name(L, build_cmp(&L->b, "lt", kidx(L), L->seqk), "inb");
  if (L->bound_q) {
    Value *inq = em_name(L, build_cmp(&L->b, "lt", qidx(L), L->seqq), "inq");
    inb = em_bin(L, OP_AND, inb, inq, "inbq");
  }
  if (!user)
    return inb;
  return em_bin(L, OP_AND, user, inb, "cond");
}

/* --------------------------------------------------------- run-time inputs */

Value *em_scale(Lower *L) {
  const KernelSpec *k = L->k;
  if (k->scale_expr)
    return em_name(L, em_to_f32(L, em_expr(L, k->scale_expr)), "scale");
  return em_name(L, build_const(&L->b, type_scalar(ELEM_F32), k->scale), "scale");
}

static ElemType input_elem(InputType t) {
  switch (t) {
  case INPUT_I32: return ELEM_I32;
  case INPUT_F16: return ELEM_F16;
  case INPUT_BF16: return ELEM_BF16;
  default: return ELEM_F32;
  }
}

static int input_dim(int d, bool decode) {
  switch (d) {
  case SPEC_DIM_BATCH: return DIM_BATCH;
  case SPEC_DIM_SEQLEN_Q: return decode ? DIM_Q_LEN : DIM_SEQLEN_Q;
  case SPEC_DIM_SEQLEN_K: return DIM_SEQLEN_K;
  default: return d;
  }
}

void em_input_arg_types(const KernelSpec *k, Type *t, const char **names, int *n,
                        EmInputNames buf) {
  for (int i = 0; i < k->ninputs; i++) {
    const SpecInput *in = &k->inputs[i];
    int dims[4];
    for (int d = 0; d < in->rank; d++)
      dims[d] = input_dim(in->dims[d], k->mode == MODE_DECODE);
    if (in->rank)
      t[*n] = type_tensor(input_elem(in->type), in->rank, dims);
    else
      t[*n] = in->type == INPUT_I32 ? type_index() : type_scalar(ELEM_F32);
    snprintf(buf[i], sizeof buf[i], "in_%s", in->name);
    names[(*n)++] = buf[i];
  }
}

void em_input_args(Lower *L) {
  const KernelSpec *k = L->k;
  for (int i = 0; i < k->ninputs; i++) {
    char name[80];
    snprintf(name, sizeof name, "in_%s", k->inputs[i].name);
    L->inputs[i] = func_arg(L->f, name);
  }
  if (k->require_q_le_k)
    attr_set_int(L->m, &L->f->attrs, "require_q_le_k", 1);
  if (k->require_k_le_q)
    attr_set_int(L->m, &L->f->attrs, "require_k_le_q", 1);
}

/* ---------------------------------------------------------------- dropout */

static const char *const dropout_arg_names[6] = {"seed_lo",   "seed_hi",        "offset_lo",
                                                 "offset_hi", "keep_threshold", "keep_scale"};

void em_dropout_arg_types(Type *t, const char **names, int *n) {
  for (int i = 0; i < 6; i++) {
    t[*n] = type_scalar(i < 5 ? ELEM_U32 : ELEM_F32);
    names[(*n)++] = dropout_arg_names[i];
  }
}

void em_dropout_args(Lower *L) {
  Value **at[5] = {&L->drop.seed_lo, &L->drop.seed_hi, &L->drop.offset_lo, &L->drop.offset_hi,
                   &L->drop.threshold};
  for (int i = 0; i < 5; i++)
    *at[i] = func_arg(L->f, dropout_arg_names[i]);
  L->keep_scale = func_arg(L->f, "keep_scale");
  L->dropout = true;
  attr_set_float(L->m, &L->f->attrs, "dropout", L->k->dropout);
}

Value *em_dropout(Lower *L, Value *x, bool scaled, const char *name) {
  if (!L->keep) {
    SrcLoc saved = L->b.loc;
    L->b.loc = L->k->loc;
    Value *heads = build_index(&L->b, L->k->heads);
    Value *bh = em_bin(L, OP_ADD, em_bin(L, OP_MUL, L->bv, heads, NULL), L->hv, "bh");
    Value *(*keep)(Builder *, const DropoutArgs *, Value *, Type, int, Value *, Value *) =
        L->k->dropout_torch ? build_dropout_keep_torch : build_dropout_keep;
    L->keep = em_name(L, keep(&L->b, &L->drop, bh, x->type, L->q_axis, L->q0, L->k0), "keep");
    L->b.loc = saved;
  }
  Value *zero = build_const(&L->b, type_scalar(ELEM_F32), 0.0);
  Value *kept = scaled ? em_bin(L, OP_MUL, x, L->keep_scale, NULL) : x;
  Value *sel = build_select(&L->b, L->keep, kept, zero);
  attr_set_int(L->m, &sel->def->attrs, "dropout", 1);
  return em_name(L, sel, name);
}

int em_refuse(FILE *diag, const KernelSpec *k, SrcLoc loc, const char *msg) {
  if (loc.line <= 0)
    loc = k->loc;
  fprintf(diag ? diag : stderr, "%s:%d:%d: error: %s\n", loc.file ? loc.file : "<spec>",
          loc.line, loc.col, msg);
  return 0;
}

