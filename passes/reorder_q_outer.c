/* reorder-q-outer.c - loop interchange plus scalar replacement (FA2 §3.2).
 *
 * FA1 runs K/V tiles outer and Q tiles inner, so the running O, l, m of each
 * Q tile travel through global workspaces (%o_acc, %l_buf, %m_buf) on every
 * step. With Q tiles outer, the (i) loop has no dependence between iterations
 * and becomes `parallel` (a grid dimension: sequence parallelism), and O, l,
 * m become loop-carried values of the K/V loop, i.e. registers:
 *
 *   for j { k/v loads; for i { q load; ws loads; step; ws stores } }
 *     ==>
 *   for i parallel { q load; full inits;
 *                    r = for j iter_args(o, l, m) { k/v loads; step; yield }
 *                    epilogue with ws loads replaced by r }
 *
 * The init loop (which stored the initial O = 0, l = 0, m = -inf) supplies
 * the `full` initial values and is deleted, the epilogue loop is folded into
 * the new i loop, and the workspace kernel arguments are removed.
 *
 * The workspaces are recognised by use, not by name: kernel tensors that are
 * both loaded and stored. The pass does nothing when the kernel has none
 * (already reordered) or when the loops do not have the FA1 shape.
 */
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

enum { MAX_WS = 8 };

typedef struct Reorder {
  Func *f;
  Value *ws[MAX_WS]; /* workspace tensors, in the order the step loads them */
  int nws;
  Op *init, *kv, *inner, *epi; /* the FA1 loops */
  Op *step_load[MAX_WS], *step_store[MAX_WS];
  double init_val[MAX_WS];
} Reorder;

static bool has_use_kind(Value *v, OpKind k) {
  for (int i = 0; i < v->nuses; i++)
    if (v->uses[i].user->kind == k && v->uses[i].index == 0)
      return true;
  return false;
}

static bool is_ws(const Reorder *r, Value *t) {
  for (int i = 0; i < r->nws; i++)
    if (r->ws[i] == t)
      return true;
  return false;
}

static int ws_index(const Reorder *r, Value *t) {
  for (int i = 0; i < r->nws; i++)
    if (r->ws[i] == t)
      return i;
  return -1;
}

static bool is_ws_access(const Reorder *r, const Op *op) {
  return (op->kind == OP_LOAD || op->kind == OP_STORE) && is_ws(r, mem_tensor(op));
}

/* The single `for` directly in b, or NULL. */
static Op *only_for(Block *b) {
  Op *found = NULL;
  for (Op *o = b->first; o; o = o->next)
    if (o->kind == OP_FOR) {
      if (found)
        return NULL;
      found = o;
    }
  return found;
}

/* Any op in b's tree that loads or stores a workspace. */
static bool touches_ws(const Reorder *r, Block *b, OpKind k) {
  for (Op *o = b->first; o; o = o->next) {
    if (o->kind == k && is_ws_access(r, o))
      return true;
    for (int i = 0; i < o->nregions; i++)
      if (touches_ws(r, o->regions[i], k))
        return true;
  }
  return false;
}

/* Finds the K/V loop: a sequential `for` whose body holds one `for` (the Q
 * loop) that loads workspaces; then the init and epilogue loops beside it. */
static bool find_loops(Reorder *r, Block *b) {
  for (Op *o = b->first; o; o = o->next) {
    for (int i = 0; i < o->nregions; i++)
      if (find_loops(r, o->regions[i]))
        return true;
    if (o->kind != OP_FOR || for_is_parallel(o) || o->nresults)
      continue;
    Op *in = only_for(for_body(o));
    if (!in || in->nresults || !touches_ws(r, for_body(in), OP_LOAD))
      continue;
    r->kv = o;
    r->inner = in;
    for (Op *p = o->prev; p && !r->init; p = p->prev)
      if (p->kind == OP_FOR && touches_ws(r, for_body(p), OP_STORE))
        r->init = p;
    for (Op *n = o->next; n && !r->epi; n = n->next)
      if (n->kind == OP_FOR && touches_ws(r, for_body(n), OP_LOAD))
        r->epi = n;
    return r->init && r->epi;
  }
  return false;
}

/* Workspace loads and stores of the step (the Q loop's body), one each, at
 * the same position, storing a value of the loaded type. */
static bool match_step(Reorder *r) {
  for (Op *o = for_body(r->inner)->first; o; o = o->next) {
    if (!is_ws_access(r, o))
      continue;
    int k = ws_index(r, mem_tensor(o));
    Op **slot = o->kind == OP_LOAD ? &r->step_load[k] : &r->step_store[k];
    if (*slot)
      return false;
    *slot = o;
  }
  for (int k = 0; k < r->nws; k++) {
    Op *ld = r->step_load[k], *st = r->step_store[k];
    if (!ld || !st || !op_precedes(ld, st))
      return false;
    for (int i = 1; i < 4; i++)
      if (ld->operands[i] != st->operands[i])
        return false;
    if (!type_eq(ld->results[0]->type, st->operands[4]->type))
      return false;
  }
  return true;
}

/* The init loop stores a `full` to each workspace and does nothing else
 * with side effects. */
static bool match_init(Reorder *r) {
  bool seen[MAX_WS] = {0};
  for (Op *o = for_body(r->init)->first; o; o = o->next) {
    if (o->kind == OP_YIELD)
      continue;
    if (!op_is_pure(o) && !is_ws_access(r, o))
      return false;
    if (o->kind != OP_STORE)
      continue;
    int k = ws_index(r, mem_tensor(o));
    if (k < 0 || seen[k] || !value_const(o->operands[4], &r->init_val[k]) ||
        o->operands[4]->def->kind != OP_FULL)
      return false;
    seen[k] = true;
  }
  for (int k = 0; k < r->nws; k++)
    if (!seen[k])
      return false;
  return true;
}

/* The epilogue only loads workspaces (no stores), and nothing outside the
 * three loops touches them. */
static bool match_uses(const Reorder *r) {
  for (int k = 0; k < r->nws; k++) {
    Value *t = r->ws[k];
    for (int u = 0; u < t->nuses; u++) {
      Op *user = t->uses[u].user;
      if (user->kind == OP_STORE && op_is_inside(user, r->epi))
        return false;
      if (!op_is_inside(user, r->init) && !op_is_inside(user, r->inner) &&
          !op_is_inside(user, r->epi))
        return false;
    }
  }
  return true;
}

static void find_workspaces(Reorder *r) {
  /* Order by the step's loads so iter_args read (o, l, m) as lowered. */
  Func *f = r->f;
  for (int i = 0; i < f->nargs && r->nws < MAX_WS; i++) {
    Value *a = f->args[i];
    if (a->type.kind == TYPE_TENSOR && has_use_kind(a, OP_LOAD) && has_use_kind(a, OP_STORE))
      r->ws[r->nws++] = a;
  }
}

static void sort_ws_by_step(Reorder *r) {
  int pos = 0;
  for (Op *o = for_body(r->inner)->first; o; o = o->next) {
    if (o->kind != OP_LOAD || !is_ws(r, mem_tensor(o)))
      continue;
    int k = ws_index(r, mem_tensor(o));
    if (k < pos)
      continue; /* loaded twice: match_step refuses it */
    Value *t = r->ws[pos];
    r->ws[pos] = r->ws[k];
    r->ws[k] = t;
    pos++;
  }
}

/* True when every operand of op can be computed once per Q tile: defined
 * outside the old K/V loop and not inside the new one. */
static bool hoistable(const Op *op, Op *old_kv, Op *new_kv) {
  if (!op_is_pure(op))
    return false;
  for (int i = 0; i < op->noperands; i++) {
    Value *v = op->operands[i];
    if (!value_defined_outside(v, old_kv) || !value_defined_outside(v, new_kv))
      return false;
  }
  return true;
}

/* Loads of tensors that nothing stores may move; workspaces are already
 * replaced when this runs. */
static bool load_of_input(const Op *op) {
  return op->kind != OP_LOAD || !has_use_kind(mem_tensor(op), OP_STORE);
}

static void move_body(Block *from, Block *to) {
  for (Op *o = from->first; o;) {
    Op *next = o->next;
    if (o->kind != OP_YIELD)
      op_move_to_end(o, to);
    o = next;
  }
}

/* %ot -> %o0: the initial value of the state the step loaded as %ot. */
static const char *init_name(Module *m, const char *loaded) {
  if (!loaded || !loaded[0])
    return NULL;
  char buf[8] = {loaded[0], '0', 0};
  return module_strdup(m, buf);
}

static void rewrite(Module *m, Reorder *r) {
  bool yields = block_terminator(for_body(r->kv)) != NULL;
  Builder b = builder_before(m, r->kv);
  Op *ni = build_for(&b, r->inner->operands[0], r->inner->operands[1], true, NULL, 0, "i");
  Builder nb = builder_at_end(m, for_body(ni));
  Value *inits[MAX_WS];
  for (int k = 0; k < r->nws; k++) {
    inits[k] = build_full(&nb, r->step_load[k]->results[0]->type, r->init_val[k]);
    inits[k]->name = init_name(m, r->step_load[k]->results[0]->name);
  }
  Op *nj = build_for(&nb, r->kv->operands[0], r->kv->operands[1], false, inits, r->nws, "j");
  if (yields)
    build_yield(&nb, NULL, 0);
  value_replace_all_uses(for_iv(r->kv), for_iv(nj));
  value_replace_all_uses(for_iv(r->inner), for_iv(ni));

  /* The K/V loop's own ops (k0, K/V loads) then the step, in order. */
  Value *yv[MAX_WS] = {0};
  for (Op *o = for_body(r->kv)->first; o;) {
    Op *next = o->next;
    if (o == r->inner) {
      for (Op *s = for_body(o)->first; s;) {
        Op *snext = s->next;
        int k = is_ws_access(r, s) ? ws_index(r, mem_tensor(s)) : -1;
        if (k >= 0 && s->kind == OP_LOAD) {
          for_iter_arg(nj, k)->name = s->results[0]->name; /* the iter arg takes over */
          value_replace_all_uses(s->results[0], for_iter_arg(nj, k));
          op_erase(s);
        } else if (k >= 0) {
          yv[k] = s->operands[4];
          op_erase(s);
        } else if (s->kind != OP_YIELD) {
          if (hoistable(s, r->kv, nj) && load_of_input(s))
            op_move_before(s, nj);
          else
            op_move_to_end(s, for_body(nj));
        }
        s = snext;
      }
    } else if (o->kind != OP_YIELD) {
      op_move_to_end(o, for_body(nj));
    }
    o = next;
  }
  Builder yb = builder_at_end(m, for_body(nj));
  build_yield(&yb, yv, r->nws);

  /* Epilogue: its workspace loads read the K/V loop's results. */
  value_replace_all_uses(for_iv(r->epi), for_iv(ni));
  for (Op *o = for_body(r->epi)->first; o;) {
    Op *next = o->next;
    if (o->kind == OP_LOAD && is_ws(r, mem_tensor(o))) {
      value_replace_all_uses(o->results[0], nj->results[ws_index(r, mem_tensor(o))]);
      op_erase(o);
    }
    o = next;
  }
  move_body(for_body(r->epi), for_body(ni));

  op_erase(r->init);
  op_erase(r->kv);
  op_erase(r->epi);
  cse_block(for_body(ni));
}

static void erase_workspace_args(Reorder *r) {
  for (int k = 0; k < r->nws; k++)
    if (r->ws[k]->nuses == 0 && r->ws[k]->block)
      block_erase_arg(r->f->body, r->ws[k]->arg_index);
}

int pass_reorder_q_outer(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  Reorder r = {.f = f};
  find_workspaces(&r);
  if (r.nws == 0 || !find_loops(&r, f->body))
    return 0; /* already Q-outer, or not the FA1 shape: leave it */
  sort_ws_by_step(&r);
  if (!match_step(&r) || !match_init(&r) || !match_uses(&r))
    return 0;
  rewrite(m, &r);
  erase_workspace_args(&r);
  attr_set_word(m, &f->attrs, "schedule", "fa2");
  return 0;
}
