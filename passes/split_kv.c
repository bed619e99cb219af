/* split_kv.c - Flash-Decoding: split the KV sequence among thread blocks and
 * combine the partial results by log-sum-exp (docs/decode.md).
 *
 * A decode launch has batch * kv_heads * (one or two Q tiles) blocks: far
 * too few to fill a GPU while each walks a cache of 100k keys. Splitting the
 * K/V loop into %nsplit chunks multiplies the blocks; each split ends with
 * its own normalised O_s and LSE_s, which a second kernel merges:
 *   M = max_s LSE_s,  w_s = e^{LSE_s - M}  (0 for an empty split: LSE = -inf)
 *   O = sum_s w_s O_s / sum_s w_s,  LSE = M + log sum_s w_s.
 *
 * Rewrite of the FA2 shape (the K/V loop carries O, l, m and the stores of
 * O and LSE follow it in the Q-tile loop body):
 *
 *   %r:3 = for %j = %lo to %hi ...; epilogue; store %o ..; store %lse ..
 *     ==>
 *   for %s = %c0 to %nsplit parallel {
 *     %chunk = ceildiv (max (hi - lo) 0), %nsplit
 *     %r:3 = for %j = lo + s*chunk to min(lo + (s+1)*chunk, hi) ...; epilogue
 *     if %single { store %o ..; store %lse .. }          # nsplit == 1: no combine
 *     else { store %o_part, %bs ..; store %lse_part, %bs .. }   # %bs = b*nsplit + s
 *   }
 *
 * O_s is stored in f32 (the value the epilogue cast to the dtype). The kernel
 * gains %o_part: tensor<f32, [batch_nsplit, q_len, heads, dv]>, %lse_part:
 * tensor<f32, [batch_nsplit, heads, q_len]> (after %lse) and %nsplit (after
 * %capacity), and the module gains `@NAME_combine`, written here in tile IR.
 * Not on forward kernels, with `split = 1`, nor when the K/V loop is not in the FA2 shape
 * (reorder-q-outer disabled): the kernel then stays one pass over the cache.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

typedef struct Split {
  Func *f;
  Op *kv;                /* the K/V loop */
  Op *o_store, *l_store; /* the stores of O and LSE after it */
  Value *o_part, *lse_part, *nsplit;
} Split;

static bool is_decode(Func *f) {
  return strcmp(attr_str(&f->attrs, "mode", "forward"), "decode") == 0 &&
         !attr_get(&f->attrs, "combine_of");
}

/* A sequential loop carrying three values, followed in its block by one
 * store to %o and one to %lse. */
static bool match(Split *sp, Op *loop) {
  if (loop->kind != OP_FOR || for_is_parallel(loop) || loop->nresults != 3)
    return false;
  Value *o = func_arg(sp->f, "o"), *lse = func_arg(sp->f, "lse");
  sp->o_store = sp->l_store = NULL;
  for (Op *n = loop->next; n; n = n->next) {
    if (n->kind != OP_STORE)
      continue;
    Op **slot = mem_tensor(n) == o ? &sp->o_store : mem_tensor(n) == lse ? &sp->l_store : NULL;
    if (!slot || *slot)
      return false;
    *slot = n;
  }
  return sp->o_store && sp->l_store;
}

static void find_fn(Op *op, void *ctx) {
  Split *sp = ctx;
  if (!sp->kv && match(sp, op))
    sp->kv = op;
}

/* Adds a kernel argument at position pos (the ABI order of docs/decode.md). */
static Value *insert_arg(Module *m, Func *f, int pos, Type t, const char *name) {
  Value *v = block_add_arg(m, f->body, t, name);
  Block *b = f->body;
  for (int i = b->nargs - 1; i > pos; i--) {
    b->args[i] = b->args[i - 1];
    b->args[i]->arg_index = i;
  }
  b->args[pos] = v;
  v->arg_index = pos;
  f->args = b->args;
  return v;
}

static int arg_pos(Func *f, const char *name, int dflt) {
  Value *a = func_arg(f, name);
  return a ? a->arg_index + 1 : dflt;
}

static void add_args(Module *m, Split *sp) {
  Func *f = sp->f;
  int h = (int)attr_int(&f->attrs, "heads", 1), dv = (int)attr_int(&f->attrs, "v_head_dim", 1);
  Type op = type_tensor(ELEM_F32, 4, (int[]){DIM_BATCH_NSPLIT, DIM_Q_LEN, h, dv});
  Type lp = type_tensor(ELEM_F32, 3, (int[]){DIM_BATCH_NSPLIT, h, DIM_Q_LEN});
  sp->o_part = insert_arg(m, f, arg_pos(f, "lse", f->nargs), op, "o_part");
  sp->lse_part = insert_arg(m, f, arg_pos(f, "o_part", f->nargs), lp, "lse_part");
  sp->nsplit = insert_arg(m, f, arg_pos(f, "capacity", f->nargs), type_index(), "nsplit");
}

static Value *named(Value *v, const char *name) {
  v->name = name;
  return v;
}

/* The j range of split s: [lo + s*chunk, min(lo + (s+1)*chunk, hi)). */
static void chunk_bounds(Builder *b, Split *sp, Value *s) {
  Value *lo = sp->kv->operands[0], *hi = sp->kv->operands[1];
  Value *len = build_binary(b, OP_SUB, hi, lo); /* one builder call per statement: */
  Value *n = build_binary(b, OP_MAX, len, build_index(b, 0)); /* argument order is open */
  Value *chunk = named(build_binary(b, OP_CEILDIV, n, sp->nsplit), "chunk");
  Value *jlo = named(build_binary(b, OP_ADD, lo, build_binary(b, OP_MUL, s, chunk)), "jlo");
  Value *jhi = named(build_binary(b, OP_MIN, build_binary(b, OP_ADD, jlo, chunk), hi), "jhi");
  op_set_operand(sp->kv, 0, jlo);
  op_set_operand(sp->kv, 1, jhi);
}

/* store %t, %bs, %h, %q0, v with the original's attributes (pack). */
static void part_store(Builder *b, Op *orig, Value *t, Value *bs, Value *v) {
  Value *ops[5] = {t, bs, orig->operands[2], orig->operands[3], v};
  Op *st = build_op(b, OP_STORE, ops, 5, NULL, 0, 0);
  attrs_copy(b->m, &st->attrs, &orig->attrs);
}

/* The f32 O before the epilogue's cast to the dtype. */
static Value *f32_of(Builder *b, Value *v) {
  if (v->def && v->def->kind == OP_CAST && v->def->operands[0]->type.elem == ELEM_F32)
    return v->def->operands[0];
  return build_cast(b, v, ELEM_F32);
}

static void rewrite(Module *m, Split *sp, bool yields) {
  Builder pb = builder_before(m, sp->f->body->first);
  Value *single = named(build_cmp(&pb, "eq", sp->nsplit, build_index(&pb, 1)), "single");
  Builder b = builder_before(m, sp->kv);
  Value *c0 = build_index(&b, 0);
  Op *sl = build_for(&b, c0, sp->nsplit, true, NULL, 0, "split");
  Block *body = for_body(sl);
  for (Op *o = sl->next; o && o->kind != OP_YIELD;) {
    Op *next = o->next;
    op_move_to_end(o, body);
    o = next;
  }
  Builder cb = builder_before(m, sp->kv);
  chunk_bounds(&cb, sp, for_iv(sl));
  Builder eb = builder_at_end(m, body);
  Value *bv = sp->o_store->operands[1];
  Value *bs = named(build_binary(&eb, OP_ADD, build_binary(&eb, OP_MUL, bv, sp->nsplit), for_iv(sl)),
                    "bs");
  Op *iff = build_if(&eb, single, NULL, 0);
  Builder tb = builder_at_end(m, iff->regions[0]), fb = builder_at_end(m, iff->regions[1]);
  part_store(&fb, sp->o_store, sp->o_part, bs, f32_of(&fb, sp->o_store->operands[4]));
  part_store(&fb, sp->l_store, sp->lse_part, bs, sp->l_store->operands[4]);
  op_move_to_end(sp->o_store, iff->regions[0]);
  op_move_to_end(sp->l_store, iff->regions[0]);
  if (yields) {
    build_yield(&tb, NULL, 0);
    build_yield(&fb, NULL, 0);
    build_yield(&eb, NULL, 0);
  }
}

/* ------------------------------------------------------- the combine kernel */

typedef struct Comb {
  Module *m;
  Func *f;
  Builder b;
  Value *c0, *nsplit, *ninf, *f0, *bs0, *hv, *q0;
  Type row, otile;
  ElemType dt;
} Comb;

static Op *open_loop(Comb *c, Value *hi, bool parallel, Value *const *inits, int n, const char *iv) {
  Op *l = build_for(&c->b, c->c0, hi, parallel, inits, n, iv);
  c->b = builder_at_end(c->m, for_body(l));
  return l;
}

static void close_loop(Comb *c, Op *l, Value *const *yv, int n) {
  build_yield(&c->b, yv, n);
  c->b = builder_after(c->m, l);
}

static Value *load_part(Comb *c, Value *t, Value *bs, Type ty) {
  Value *ops[4] = {t, bs, c->hv, c->q0};
  return build_op(&c->b, OP_LOAD, ops, 4, &ty, 1, 0)->results[0];
}

/* M = max_s LSE_s over the splits. */
static Value *emit_max(Comb *c) {
  Value *m0 = build_full(&c->b, c->row, -INFINITY);
  Op *l = open_loop(c, c->nsplit, false, &m0, 1, "s");
  Value *bs = build_binary(&c->b, OP_ADD, c->bs0, for_iv(l));
  Value *ls = load_part(c, func_arg(c->f, "lse_part"), bs, c->row);
  Value *mx = build_binary(&c->b, OP_MAX, for_iter_arg(l, 0), ls);
  close_loop(c, l, &mx, 1);
  return named(l->results[0], "lmax");
}

/* sum_s w_s O_s and sum_s w_s, w_s = e^{LSE_s - M} (M made safe: -inf -> 0). */
static Op *emit_sums(Comb *c, Value *msafe) {
  Value *inits[2];
  inits[0] = build_full(&c->b, c->otile, 0);
  inits[1] = build_full(&c->b, c->row, 0);
  Op *l = open_loop(c, c->nsplit, false, inits, 2, "s");
  Value *bs = build_binary(&c->b, OP_ADD, c->bs0, for_iv(l));
  Value *ls = load_part(c, func_arg(c->f, "lse_part"), bs, c->row);
  Value *w = named(build_unary(&c->b, OP_EXP, build_binary(&c->b, OP_SUB, ls, msafe)), "w");
  /* an empty split's o_part may be garbage (docs/decode.md): never weigh it */
  Value *dead = build_cmp(&c->b, "eq", ls, c->ninf);
  Value *os = load_part(c, func_arg(c->f, "o_part"), bs, c->otile);
  os = build_select(&c->b, dead, c->f0, os);
  Value *ow = build_op(&c->b, OP_RESCALE, (Value *[]){os, w}, 2, &c->otile, 1, 0)->results[0];
  Value *yv[2];
  yv[0] = build_binary(&c->b, OP_ADD, for_iter_arg(l, 0), ow);
  yv[1] = build_binary(&c->b, OP_ADD, for_iter_arg(l, 1), w);
  close_loop(c, l, yv, 2);
  return l;
}

/* One Q tile of one head of one sequence: merge the splits, store O, LSE. */
static void emit_tile(Comb *c, Value *bv) {
  Value *mx = emit_max(c);
  Value *eq = build_cmp(&c->b, "eq", mx, c->ninf);
  Value *msafe = build_select(&c->b, eq, c->f0, mx);
  Op *sums = emit_sums(c, msafe);
  Value *inv = build_unary(&c->b, OP_RECIP, sums->results[1]);
  Value *on = build_op(&c->b, OP_RESCALE, (Value *[]){sums->results[0], inv}, 2, &c->otile, 1, 0)
                  ->results[0];
  Value *oc = build_cast(&c->b, on, c->dt);
  Value *so[5] = {func_arg(c->f, "o"), bv, c->hv, c->q0, oc};
  build_op(&c->b, OP_STORE, so, 5, NULL, 0, 0);
  Value *lse = build_binary(&c->b, OP_ADD, mx, build_unary(&c->b, OP_LOG, sums->results[1]));
  Value *sl[5] = {func_arg(c->f, "lse"), bv, c->hv, c->q0, lse};
  build_op(&c->b, OP_STORE, sl, 5, NULL, 0, 0);
}

enum { COMBINE_TILE_Q = 16 }; /* q_len <= 16: one tile of one warp */

static Func *make_combine_func(Module *m, Split *sp) {
  Func *f = sp->f;
  char name[256];
  snprintf(name, sizeof name, "%s_combine", f->name);
  Type t[7] = {func_arg(f, "o")->type, func_arg(f, "lse")->type, sp->o_part->type,
               sp->lse_part->type, type_index(), type_index(), type_index()};
  static const char *const names[7] = {"o", "lse", "o_part", "lse_part", "batch", "q_len", "nsplit"};
  Func *cf = func_create(m, name, t, names, 7, f->loc);
  static const char *const copy[] = {"dtype", "head_dim", "v_head_dim", "heads", "kv_heads", "mode",
                                     "target"};
  for (size_t i = 0; i < sizeof copy / sizeof copy[0]; i++) {
    const Attr *a = attr_get(&f->attrs, copy[i]);
    if (a && a->kind == ATTR_INT)
      attr_set_int(m, &cf->attrs, copy[i], a->i);
    else if (a && a->kind == ATTR_WORD)
      attr_set_word(m, &cf->attrs, copy[i], a->s);
  }
  attr_set_str(m, &cf->attrs, "combine_of", f->name);
  attr_set_word(m, &cf->attrs, "schedule", "combine");
  attr_set_int(m, &cf->attrs, "tile_q", COMBINE_TILE_Q);
  attr_set_int(m, &cf->attrs, "warps", 1);
  return cf;
}

/* @NAME_combine: if nsplit > 1, for b, h, Q tiles: merge (docs/decode.md).
 * This body is the merge's meaning (the interpreter runs it); codegen lowers
 * the body of the head loop with a routine of its own (codegen/kind_combine.c
 * head_body over compute_merge.c, float4 columns per thread, one online pass, a group of
 * splits' loads in flight at once), because 16-row tiles hold q_len rows. */
static void make_combine(Module *m, Split *sp) {
  Func *f = make_combine_func(m, sp);
  int dv = (int)attr_int(&f->attrs, "v_head_dim", 1), heads = (int)attr_int(&f->attrs, "heads", 1);
  Comb c = {.m = m, .f = f, .b = builder_at_end(m, f->body), .nsplit = func_arg(f, "nsplit")};
  c.dt = func_arg(f, "o")->type.elem;
  c.row = type_tile(ELEM_F32, COMBINE_TILE_Q, 1, DIST_ROWS);
  c.otile = type_tile(ELEM_F32, COMBINE_TILE_Q, dv, DIST_ROWS);
  c.b.loc = sp->f->loc;
  c.c0 = named(build_index(&c.b, 0), "c0");
  Value *c1 = build_index(&c.b, 1), *nheads = named(build_index(&c.b, heads), "nheads");
  Value *br = named(build_index(&c.b, COMBINE_TILE_Q), "br");
  c.ninf = named(build_const(&c.b, type_scalar(ELEM_F32), -INFINITY), "ninf");
  c.f0 = named(build_const(&c.b, type_scalar(ELEM_F32), 0), "f0");
  Value *nq = named(build_binary(&c.b, OP_CEILDIV, func_arg(f, "q_len"), br), "nq");
  Value *multi = named(build_cmp(&c.b, "gt", c.nsplit, c1), "multi");
  Op *iff = build_if(&c.b, multi, NULL, 0);
  Builder eb = builder_at_end(m, iff->regions[1]);
  build_yield(&eb, NULL, 0);
  c.b = builder_at_end(m, iff->regions[0]);
  Op *lb = open_loop(&c, func_arg(f, "batch"), true, NULL, 0, "b");
  Op *lh = open_loop(&c, nheads, true, NULL, 0, "h");
  c.hv = for_iv(lh);
  Op *li = open_loop(&c, nq, true, NULL, 0, "i");
  c.q0 = named(build_binary(&c.b, OP_MUL, for_iv(li), br), "q0");
  c.bs0 = named(build_binary(&c.b, OP_MUL, for_iv(lb), c.nsplit), "bs0");
  emit_tile(&c, for_iv(lb));
  close_loop(&c, li, NULL, 0);
  close_loop(&c, lh, NULL, 0);
  close_loop(&c, lb, NULL, 0);
  build_yield(&c.b, NULL, 0);
  Builder rb = builder_at_end(m, f->body);
  build_op(&rb, OP_RETURN, NULL, 0, NULL, 0, 0);
}

int pass_split_kv(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  if (!is_decode(f) || attr_int(&f->attrs, "split", 0) == 1 || func_arg(f, "nsplit") ||
      !func_arg(f, "o") || !func_arg(f, "lse"))
    return 0; /* split = 1: the spec asked for one pass over the cache */
  Split sp = {.f = f};
  func_walk(f, find_fn, &sp);
  if (!sp.kv)
    return 0;
  bool yields = func_uses_empty_yields(f);
  add_args(m, &sp);
  rewrite(m, &sp, yields);
  /* A variant's partials go to its base kernel's combine (small_batch_variant.c). */
  if (!attr_get(&f->attrs, "variant_of"))
    make_combine(m, &sp);
  return 0;
}
