/* pack_gqa.c - one Q tile for all query heads that share a K/V head
 * (Flash-Decoding's GQA packing; docs/decode.md).
 *
 * Decoding has q_len <= 16 query tokens per head, so a Q tile of one head is
 * mostly padding and every K/V tile is read once per query head. With group
 * G = heads / kv_heads, the Q tile is made of the G heads of one K/V head
 * times the q_len tokens instead: tile row R is query head hk*G + R / q_len,
 * token R % q_len (`load/store {pack = G}` with the K/V head as operand h).
 * Each K/V tile is then read once per group.
 *
 * Rewrite, in either loop order (it only renames rows):
 *   - the parallel loop over query heads runs over K/V heads; `%hk = div %h,
 *     %group` is replaced by the loop variable;
 *   - loads and stores of the per-query-head tensors (q, o, lse, workspaces)
 *     that took %h get {pack = G};
 *   - the Q-tile count `ceildiv %q_len, %br` becomes `ceildiv (q_len*G), %br`;
 *   - the query index tile `%qi = add %iota0, %q0` becomes `rem %qrow, %q_len`.
 * It does not fire on forward kernels, for G = 1 (MHA: nothing to pack), and
 * when the query head is used otherwise (a mask or score reading h: its rows
 * would need a per-row head) or q0 is used otherwise.
 *
 * It runs before mask-skip, whose interval analysis then sees the packed
 * query indices (rem: unknown, which only costs speed).
 */
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

typedef struct Pack {
  Func *f;
  int group;
  Op *hloop, *hkdiv; /* the loop over query heads and %hk = div %h, %group */
  OpList access;     /* loads/stores taking %h as their head */
  OpList qidx;       /* add %iota0, %q0 */
} Pack;

static bool is_decode(Func *f) {
  return strcmp(attr_str(&f->attrs, "mode", "forward"), "decode") == 0 &&
         !attr_get(&f->attrs, "combine_of");
}

/* %hk = div %h, G with %h the variable of a parallel loop. */
static void find_div(Op *op, void *ctx) {
  Pack *p = ctx;
  double g;
  Value *h = op->kind == OP_DIV ? op->operands[0] : NULL;
  if (!h || p->hkdiv || !value_const(op->operands[1], &g) || g != p->group || !h->block ||
      h->arg_index != 0)
    return;
  Op *loop = h->block->parent_op;
  if (loop && loop->kind == OP_FOR && for_is_parallel(loop)) {
    p->hkdiv = op;
    p->hloop = loop;
  }
}

static bool is_iota0(Value *v) {
  return v->def && v->def->kind == OP_IOTA && attr_int(&v->def->attrs, "axis", -1) == 0;
}

/* Every use of q0 (the row operand of a packed access) is a row operand or
 * the query index tile iota0 + q0, collected into p->qidx. */
static bool check_q0(Pack *p, Value *q0) {
  for (int i = 0; i < q0->nuses; i++) {
    Op *u = q0->uses[i].user;
    if ((u->kind == OP_LOAD || u->kind == OP_STORE) && q0->uses[i].index == 3)
      continue;
    if (u->kind == OP_ADD && (is_iota0(u->operands[0]) || is_iota0(u->operands[1]))) {
      if (!oplist_has(&p->qidx, u))
        oplist_push(&p->qidx, u);
      continue;
    }
    return false;
  }
  return true;
}

/* The uses of %h: the div, and loads/stores (head operand) of tensors with
 * `heads` heads. Anything else refuses. */
static bool check_h(Pack *p, int heads) {
  Value *h = for_iv(p->hloop);
  for (int i = 0; i < h->nuses; i++) {
    Op *u = h->uses[i].user;
    if (u == p->hkdiv)
      continue;
    bool access = (u->kind == OP_LOAD || u->kind == OP_STORE) && h->uses[i].index == 2 &&
                  !attr_get(&u->attrs, "pack");
    Type t = access ? u->operands[0]->type : type_none();
    int nh = t.rank == 4 ? t.dims[2] : t.dims[1];
    if (!access || nh != heads || (u->kind == OP_LOAD && u->noperands != 4))
      return false;
    if (!check_q0(p, u->operands[3]))
      return false;
    oplist_push(&p->access, u);
  }
  return p->access.n > 0;
}

/* ceildiv %q_len, %br -> ceildiv (mul %q_len, G), %br */
static void widen_q_tiles(Module *m, Value *qlen, Value *g) {
  for (int i = qlen->nuses - 1; i >= 0; i--) {
    Op *u = qlen->uses[i].user;
    if (u->kind != OP_CEILDIV || qlen->uses[i].index != 0)
      continue;
    Builder b = builder_before(m, u);
    Value *rows = build_binary(&b, OP_MUL, qlen, g);
    rows->name = "qrows";
    op_set_operand(u, 0, rows);
  }
}

/* %qi = add %iota0, %q0  ->  %qrow = add ...; %qi = rem %qrow, %q_len */
static void token_index(Module *m, Op *add, Value *qlen) {
  Value *row = add->results[0];
  Builder b = builder_after(m, add);
  Value *tok = build_binary(&b, OP_REM, row, qlen);
  value_replace_all_uses(row, tok);
  op_set_operand(tok->def, 0, row); /* replace_all_uses also caught the rem itself */
  tok->name = row->name;
  row->name = "qrow";
}

static void rewrite(Module *m, Pack *p, Value *qlen, int kv_heads) {
  Builder pb = builder_before(m, p->f->body->first);
  Value *g = build_index(&pb, p->group);
  g->name = "pack";
  Builder hb = builder_before(m, p->hloop);
  Value *nkv = build_index(&hb, kv_heads);
  nkv->name = "nkvheads";
  op_set_operand(p->hloop, 1, nkv);
  for (int i = 0; i < p->access.n; i++)
    op_set_attr_int(p->access.v[i], "pack", p->group);
  Value *h = for_iv(p->hloop), *hk = p->hkdiv->results[0];
  value_replace_all_uses(hk, h);
  h->name = hk->name ? hk->name : "hk";
  op_erase(p->hkdiv);
  widen_q_tiles(m, qlen, g);
  for (int i = 0; i < p->qidx.n; i++)
    token_index(m, p->qidx.v[i], qlen);
}

int pass_pack_gqa(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  int heads = (int)attr_int(&f->attrs, "heads", 0), kv = (int)attr_int(&f->attrs, "kv_heads", 0);
  Value *qlen = func_arg(f, "q_len");
  if (!is_decode(f) || attr_get(&f->attrs, "pack") || kv <= 0 || heads <= kv || !qlen)
    return 0;
  Pack p = {.f = f, .group = heads / kv};
  func_walk(f, find_div, &p);
  if (p.hkdiv && check_h(&p, heads)) {
    rewrite(m, &p, qlen, kv);
    attr_set_int(m, &f->attrs, "pack", p.group);
  }
  oplist_free(&p.access);
  oplist_free(&p.qidx);
  return 0;
}
