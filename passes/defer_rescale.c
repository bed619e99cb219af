/* defer_rescale.c - one normalization at the end instead of one per step
 * (FA2 §3.1).
 *
 * FA1's step keeps O normalized: P~ = exp(S - m~), then
 *   O_new = diag(l_new)^-1 (diag(l) e^{m - m_new} O + e^{m~ - m_new} P~ V).
 * FA2 keeps O unnormalized and scales once when the K/V loop is done:
 *   P = exp(S - m_new)                      (one exp per element, no beta)
 *   l_new = e^{m - m_new} l + rowsum(P)
 *   O_new = e^{m - m_new} O + P V           (the rescaled O is the MMA's accumulator)
 *   O_final = diag(l)^-1 O                  (after the loop)
 *
 * The step is recognised from its last op, `rescale %o2, (recip %lnew)`, and
 * matched backwards (docs/tile-ir.md). Where P V is still a split-K partial
 * product (partition-warps not run or disabled: `xwarp_reduce` present), the
 * accumulator cannot go into the MMA (every warp would add it), so the pass
 * emits `add (rescale O, alpha), (xwarp_reduce (matmul P, V))`;
 * partition-warps later folds that add into the matmul.
 *
 * Where O lives decides where the final scaling goes: a loop-carried value
 * (Q-outer order) gets it after the loop; a workspace (FA1 order) gets it at
 * each later load, i.e. in the epilogue. The LSE stays m + log l.
 */
#include "passes/pass_util.h"
#include "passes/passes.h"

typedef struct Step {
  Op *o3, *o1, *pvs, *mm, *psub, *lnew_add;
  int beta_side; /* operand of lnew_add that is beta * ltil */
  Value *lnew, *ot, *alpha, *mnew_safe, *ltil, *pvr;
  Op *o_store, *l_store; /* FA1 order: where O and l go */
  Op *loop;              /* Q-outer order: the loop carrying O and l */
  int o_pos, l_pos;      /* and their result positions */
} Step;

static Op *def_of(Value *v, OpKind k) { return v->def && v->def->kind == k ? v->def : NULL; }

/* exp(sub(x, mnew_safe)) -> the exp op, or NULL. */
static bool is_exp_minus(Value *v, Value *mnew_safe) {
  Op *e = def_of(v, OP_EXP);
  Op *s = e ? def_of(e->operands[0], OP_SUB) : NULL;
  return s && s->operands[1] == mnew_safe;
}

static bool match_output_side(Step *st, Op *o2) {
  for (int side = 0; side < 2; side++) {
    Op *pvs = def_of(o2->operands[side], OP_RESCALE);
    Op *o1 = def_of(o2->operands[1 - side], OP_RESCALE);
    if (!pvs || !o1)
      continue;
    Op *mm = def_of(strip_xwarp(pvs->operands[0]), OP_MATMUL);
    if (!mm || mm->noperands != 2 || def_of(strip_xwarp(o1->operands[0]), OP_MATMUL))
      continue;
    st->pvs = pvs;
    st->o1 = o1;
    st->mm = mm;
    st->pvr = pvs->operands[0];
    return true;
  }
  return false;
}

/* beta = exp(mtil - mnew_safe); alpha from O's old scale mul(lt, alpha). */
static bool match_stats(Step *st) {
  Value *beta = st->pvs->operands[1];
  Op *be = def_of(beta, OP_EXP);
  Op *bs = be ? def_of(be->operands[0], OP_SUB) : NULL;
  if (!bs)
    return false;
  st->mnew_safe = bs->operands[1];
  Op *sc = def_of(st->o1->operands[1], OP_MUL);
  if (!sc)
    return false;
  st->ot = st->o1->operands[0];
  if (is_exp_minus(sc->operands[1], st->mnew_safe))
    st->alpha = sc->operands[1];
  else if (is_exp_minus(sc->operands[0], st->mnew_safe))
    st->alpha = sc->operands[0];
  else
    return false;
  st->lnew_add = def_of(st->lnew, OP_ADD);
  if (!st->lnew_add)
    return false;
  for (int side = 0; side < 2; side++) {
    Op *mb = def_of(st->lnew_add->operands[side], OP_MUL);
    if (mb && (mb->operands[0] == beta || mb->operands[1] == beta)) {
      st->beta_side = side;
      st->ltil = mb->operands[0] == beta ? mb->operands[1] : mb->operands[0];
      return true;
    }
  }
  return false;
}

/* P = [cast] [dropout] exp(sub(S, mtil_safe)) feeding the P V matmul. */
static bool match_p(Step *st) {
  Value *pc = st->mm->operands[0];
  Value *p = strip_dropout(def_of(pc, OP_CAST) ? pc->def->operands[0] : pc);
  Op *pe = def_of(p, OP_EXP);
  st->psub = pe ? def_of(pe->operands[0], OP_SUB) : NULL;
  return st->psub && st->psub->operands[1] != st->mnew_safe &&
         st->psub->parent == st->o3->parent;
}

/* The single store of v, or NULL. */
static Op *store_of(Value *v) {
  Op *found = NULL;
  for (int i = 0; i < v->nuses; i++) {
    Op *u = v->uses[i].user;
    if (u->kind == OP_STORE && v->uses[i].index == 4) {
      if (found)
        return NULL;
      found = u;
    }
  }
  return found;
}

/* Follows v out through yields (of ifs, then of a for) to the for result
 * that carries it; *loop and *pos receive it. */
static bool carried_by(Value *v, Op **loop, int *pos) {
  for (int guard = 0; guard < 16; guard++) {
    Op *y = NULL;
    int idx = -1;
    for (int i = 0; i < v->nuses; i++)
      if (v->uses[i].user->kind == OP_YIELD) {
        y = v->uses[i].user;
        idx = v->uses[i].index;
      }
    if (!y || !y->parent->parent_op)
      return false;
    Op *owner = y->parent->parent_op;
    if (owner->kind == OP_FOR) {
      *loop = owner;
      *pos = idx;
      return true;
    }
    if (owner->kind != OP_IF)
      return false;
    v = owner->results[idx];
  }
  return false;
}

static bool match_destination(Step *st) {
  Value *o3 = st->o3->results[0];
  st->o_store = store_of(o3);
  st->l_store = store_of(st->lnew);
  if (st->o_store && st->l_store)
    return true;
  Op *lloop = NULL;
  return carried_by(o3, &st->loop, &st->o_pos) && carried_by(st->lnew, &lloop, &st->l_pos) &&
         lloop == st->loop;
}

static bool match_step(Op *o3, Step *st) {
  *st = (Step){.o3 = o3};
  Op *rc = def_of(o3->operands[1], OP_RECIP);
  Op *o2 = def_of(o3->operands[0], OP_ADD);
  if (!rc || !o2)
    return false;
  st->lnew = rc->operands[0];
  return match_output_side(st, o2) && match_stats(st) && match_p(st) && match_destination(st);
}

/* O_new = e^{m - m_new} O + P V, in the MMA's accumulator when P V is whole. */
static Value *build_new_o(Module *m, Step *st) {
  Builder b = builder_before(m, st->o3);
  Type ot = st->o3->results[0]->type;
  Value *rs[2] = {st->ot, st->alpha};
  Value *acc = build_op(&b, OP_RESCALE, rs, 2, &st->ot->type, 1, 0)->results[0];
  Value *onew;
  if (st->pvr == st->mm->results[0]) {
    Value *ops[3] = {st->mm->operands[0], st->mm->operands[1], acc};
    Op *mm = build_op(&b, OP_MATMUL, ops, 3, &ot, 1, 0);
    attrs_copy(m, &mm->attrs, &st->mm->attrs);
    onew = mm->results[0];
  } else {
    onew = build_binary(&b, OP_ADD, acc, st->pvr);
  }
  onew->name = "onew";
  return onew;
}

/* diag(l)^-1 o, right before `point`. */
static Value *normalize(Module *m, Block *blk, Op *point, Value *o, Value *l) {
  Builder b = point ? builder_before(m, point) : builder_at_end(m, blk);
  Value *r = build_unary(&b, OP_RECIP, l);
  Value *ops[2] = {o, r};
  Value *on = build_op(&b, OP_RESCALE, ops, 2, &o->type, 1, 0)->results[0];
  on->name = "on";
  return on;
}

/* Replaces every use of o (except by `keep`) with on. */
static void redirect(Value *o, Value *on) {
  Op *keep = on->def;
  value_replace_all_uses(o, on);
  op_set_operand(keep, 0, o);
}

/* FA1 order: each load of O's workspace outside the step is now unnormalized;
 * scale it by the matching load of l (created when absent). */
static void normalize_at_loads(Module *m, Step *st) {
  Value *wo = mem_tensor(st->o_store), *wl = mem_tensor(st->l_store);
  Block *step = st->o3->parent;
  OpList loads = {0};
  for (int i = 0; i < wo->nuses; i++) {
    Op *u = wo->uses[i].user;
    if (u->kind == OP_LOAD && u->parent != step)
      oplist_push(&loads, u);
  }
  for (int i = 0; i < loads.n; i++) {
    Op *ld = loads.v[i];
    Op *ll = NULL;
    for (Op *o = ld->parent->first; o && !ll; o = o->next)
      if (o->kind == OP_LOAD && mem_tensor(o) == wl && o->operands[1] == ld->operands[1] &&
          o->operands[2] == ld->operands[2] && o->operands[3] == ld->operands[3])
        ll = o;
    Op *point = ld->next;
    if (!ll) {
      Builder b = point ? builder_before(m, point) : builder_at_end(m, ld->parent);
      Value *ops[4] = {wl, ld->operands[1], ld->operands[2], ld->operands[3]};
      ll = build_op(&b, OP_LOAD, ops, 4, &st->lnew->type, 1, 0);
    } else if (point) {
      hoist_before(ll->results[0], point);
    }
    redirect(ld->results[0], normalize(m, ld->parent, point, ld->results[0], ll->results[0]));
  }
  oplist_free(&loads);
}

static void rewrite(Module *m, Step *st) {
  Block *step = st->o3->parent;
  hoist_before(st->mnew_safe, st->psub);
  op_set_operand(st->psub, 1, st->mnew_safe);
  op_set_operand(st->lnew_add, st->beta_side, st->ltil);
  Value *onew = build_new_o(m, st);
  Value *o3 = st->o3->results[0];
  value_replace_all_uses(o3, onew);
  if (st->loop) {
    Op *after = st->loop->next;
    Value *ro = st->loop->results[st->o_pos], *rl = st->loop->results[st->l_pos];
    redirect(ro, normalize(m, st->loop->parent, after, ro, rl));
  } else {
    normalize_at_loads(m, st);
  }
  dce_block(step);
}

int pass_defer_rescale(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  OpList rs = collect_ops(f, OP_RESCALE);
  for (int i = 0; i < rs.n; i++) {
    Step st;
    if (rs.v[i]->parent && match_step(rs.v[i], &st) && hoist_before(st.mnew_safe, st.psub))
      rewrite(m, &st);
  }
  oplist_free(&rs);
  return 0;
}
