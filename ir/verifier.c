/* verifier.c - checks the invariants of the tile IR after every pass.
 *
 * What it checks, per kernel:
 *  - structure: ops linked into their block (parent/prev/next), only for/if
 *    and warp_roles own regions, yields end their regions, the body ends
 *    with `return`, no op after a terminator;
 *  - operand and result counts and types of every op kind (elementwise ops
 *    broadcast as broadcast_type says; dist is codegen's business and is not
 *    compared, except that `partial` values may only feed xwarp_reduce:
 *    a partial sum is no value of its own, while a `warp` value is one per
 *    warp and may feed anything);
 *  - required attributes (const/full value, cmp pred, iota axis, tile_size
 *    dim, xwarp_reduce kind, for kind);
 *  - dominance: an operand is defined earlier in the same block, in an
 *    enclosing block, or is an argument of an enclosing region;
 *  - use lists: every operand appears exactly once in its value's uses, and
 *    every use names a live op that really has the value at that index;
 *  - types well formed; symbolic Br/Bc only before tiling (no `tile_q`);
 *    rings only as results of `ring`;
 *  - warp specialization's ring protocol (verifier_roles.c).
 *
 * The op rules of each family are in verifier_elementwise.c, verifier_mem.c,
 * verifier_compute.c and verifier_roles.c; here: types, structure, control
 * flow, dominance.
 *
 * Messages: `verifier: after <pass>: @kernel: <op summary> (line:col): msg`.
 */
#include <stdarg.h>
#include <string.h>

#include "ir/verifier_internal.h"

void report(Verifier *v, const Op *op, const char *fmt, ...) {
  v->nerrors++;
  if (!v->diag)
    return;
  fputs("verifier: ", v->diag);
  if (v->after)
    fprintf(v->diag, "after %s: ", v->after);
  fprintf(v->diag, "@%s: ", v->f->name ? v->f->name : "");
  if (op) {
    char sum[256];
    op_summary(sum, sizeof sum, op, &v->names);
    fprintf(v->diag, "%s (%d:%d): ", sum, op->loc.line, op->loc.col);
  }
  va_list ap;
  va_start(ap, fmt);
  vfprintf(v->diag, fmt, ap);
  va_end(ap);
  fputc('\n', v->diag);
}

/* -------------------------------------------------------------- types */

static bool valid_tile_dim(Verifier *v, int d) {
  return d > 0 || ((d == DIM_BR || d == DIM_BC) && v->symbolic_ok);
}

static bool valid_tensor_dim(int d) {
  return d > 0 || (d <= DIM_BATCH && d >= DIM_LIST_LEN);
}

/* Reports a malformed type of a value that op defines (or a kernel arg). */
static void check_type(Verifier *v, const Op *op, Type t, const char *what) {
  char b[160];
  switch (t.kind) {
  case TYPE_SCALAR:
    if (t.elem == ELEM_NONE)
      report(v, op, "%s has no element type", what);
    return;
  case TYPE_TILE:
    if (t.elem == ELEM_NONE)
      report(v, op, "%s has no element type", what);
    if (!valid_tile_dim(v, t.rows) || !valid_tile_dim(v, t.cols)) {
      if ((t.rows == DIM_BR || t.rows == DIM_BC || t.cols == DIM_BR || t.cols == DIM_BC) && !v->symbolic_ok)
        report(v, op, "%s has symbolic extent in %s but the kernel is tiled (tile_q is set)", what, tstr(t, b));
      else
        report(v, op, "%s has a bad tile shape %s", what, tstr(t, b));
    }
    return;
  case TYPE_TENSOR:
    if (t.elem == ELEM_U32) {
      report(v, op, "%s is a tensor of u32 (u32 is for values only)", what);
      return;
    }
    if (t.rank < 1 || t.rank > 4) {
      report(v, op, "%s is a tensor of rank %d (1 to 4 expected)", what, t.rank);
      return;
    }
    for (int i = 0; i < t.rank; i++)
      if (!valid_tensor_dim(t.dims[i]))
        report(v, op, "%s has a bad tensor extent %d", what, t.dims[i]);
    if (op)
      report(v, op, "%s is a tensor: only kernel arguments are tensors", what);
    return;
  case TYPE_RING: /* its shape: check_ring */
    if (!op || op->kind != OP_RING)
      report(v, op, "%s is a ring: only a ring op defines one", what);
    return;
  default:
    report(v, op, "%s has no type", what);
  }
}

/* ---------------------------------------------- checks every op rule uses */

bool want_counts(Verifier *v, const Op *op, int nops, int nres) {
  bool ok = true;
  if (nops >= 0 && op->noperands != nops) {
    report(v, op, "expects %d operand%s, has %d", nops, nops == 1 ? "" : "s", op->noperands);
    ok = false;
  }
  if (op->nresults != nres) {
    report(v, op, "expects %d result%s, has %d", nres, nres == 1 ? "" : "s", op->nresults);
    ok = false;
  }
  return ok;
}

void want_result(Verifier *v, const Op *op, Type expect) {
  char a[160], b[160];
  if (!same_shape_elem(res(op, 0), expect))
    report(v, op, "result type %s, expected %s", tstr(res(op, 0), a), tstr(expect, b));
}

bool word_in(const Op *op, const char *key, const char *const *words) {
  const Attr *a = attr_get(&op->attrs, key);
  if (!a || a->kind != ATTR_WORD)
    return false;
  for (; *words; words++)
    if (strcmp(a->s, *words) == 0)
      return true;
  return false;
}

/* ------------------------------------------- control flow, op dispatch */

/* A yield ending a for/if region: its values match the op's results. */
static void check_region_yield(Verifier *v, const Op *op, const Block *blk, const char *which) {
  char a[160], b[160];
  const Op *y = blk->last;
  if (!y || y->kind != OP_YIELD) {
    report(v, op, "%s does not end with yield", which);
    return;
  }
  if (y->noperands != op->nresults) {
    report(v, op, "%s yields %d value%s for %d result%s", which, y->noperands, y->noperands == 1 ? "" : "s",
           op->nresults, op->nresults == 1 ? "" : "s");
    return;
  }
  for (int i = 0; i < y->noperands; i++)
    if (y->operands[i] && !type_eq(y->operands[i]->type, res(op, i)))
      report(v, op, "%s yields %s for result %d of type %s", which, tstr(y->operands[i]->type, a), i,
             tstr(res(op, i), b));
}

static void check_for(Verifier *v, const Op *op) {
  char a[160], b[160];
  static const char *const kinds[] = {"parallel", "sequential", NULL};
  if (op->noperands < 2 || op->nregions != 1) {
    report(v, op, "expects lo, hi and one region");
    return;
  }
  if (!is_index(opnd(op, 0)) || !is_index(opnd(op, 1)))
    report(v, op, "bounds must be index");
  if (!word_in(op, "kind", kinds))
    report(v, op, "needs 'kind' = parallel or sequential");
  int n = op->noperands - 2;
  if (op->nresults != n) {
    report(v, op, "has %d iter_args but %d results", n, op->nresults);
    return;
  }
  const Block *body = op->regions[0];
  if (body->nargs != 1 + n) {
    report(v, op, "body has %d arguments, expected %d (iv and iter_args)", body->nargs, 1 + n);
    return;
  }
  if (!is_index(body->args[0]->type))
    report(v, op, "induction variable must be index");
  for (int i = 0; i < n; i++) {
    Type init = opnd(op, 2 + i);
    if (!type_eq(body->args[1 + i]->type, init))
      report(v, op, "iter_arg %d has type %s but its init %s", i, tstr(body->args[1 + i]->type, a), tstr(init, b));
    if (!type_eq(res(op, i), init))
      report(v, op, "result %d has type %s but its init %s", i, tstr(res(op, i), a), tstr(init, b));
  }
  check_region_yield(v, op, body, "body");
}

static void check_if(Verifier *v, const Op *op) {
  if (op->noperands != 1 || op->nregions != 2) {
    report(v, op, "expects a condition and two regions");
    return;
  }
  Type c = opnd(op, 0);
  if (c.kind != TYPE_SCALAR || c.elem != ELEM_I1)
    report(v, op, "condition must be an i1 scalar");
  for (int r = 0; r < 2; r++) {
    if (op->regions[r]->nargs)
      report(v, op, "%s region has arguments", r ? "else" : "then");
    check_region_yield(v, op, op->regions[r], r ? "else region" : "then region");
  }
}

static void check_terminator(Verifier *v, const Op *op) {
  const Block *blk = op->parent;
  if (op->kind == OP_RETURN) {
    want_counts(v, op, 0, 0);
    if (!blk->parent_func || blk->parent_op)
      report(v, op, "return outside the kernel body");
    return;
  }
  want_counts(v, op, -1, 0);
  const Op *p = blk->parent_op;
  if (!p || (p->kind != OP_FOR && p->kind != OP_IF && p->kind != OP_WARP_ROLES))
    report(v, op, "yield outside a for/if/warp_roles region");
}

static void check_kind_rules(Verifier *v, const Op *op) {
  if (op->nregions != 0 && op->kind != OP_FOR && op->kind != OP_IF && op->kind != OP_WARP_ROLES)
    report(v, op, "only for, if and warp_roles have regions");
  switch (op->kind) {
  case OP_CONST: case OP_FULL: check_const(v, op); break;
  case OP_TILE_SIZE: check_tile_size(v, op); break;
  case OP_IOTA: check_iota(v, op); break;
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_REM: case OP_CEILDIV:
  case OP_MIN: case OP_MAX: case OP_CMP: case OP_AND: case OP_OR:
  case OP_XOR: case OP_MULHI: case OP_SHR:
    check_binary(v, op);
    break;
  case OP_NEG: case OP_EXP: case OP_EXP2: case OP_LOG: case OP_LOG2: case OP_TANH:
  case OP_SQRT: case OP_ABS: case OP_FLOOR: case OP_RECIP: case OP_NOT:
    check_unary(v, op);
    break;
  case OP_SELECT: check_select(v, op); break;
  case OP_CAST: check_cast(v, op); break;
  case OP_LOAD: check_load(v, op); break;
  case OP_STORE: check_store(v, op); break;
  case OP_LOAD_SCALAR: check_load_scalar(v, op); break;
  case OP_LOAD_PAGED: check_load_paged(v, op); break;
  case OP_GATHER: check_gather(v, op); break;
  case OP_SCATTER: check_scatter(v, op); break;
  case OP_REDUCE: check_reduce(v, op); break;
  case OP_MATMUL: check_matmul(v, op); break;
  case OP_MMA_WAIT: check_mma_wait(v, op); break;
  case OP_ROWMAX: case OP_ROWSUM: check_rowreduce(v, op); break;
  case OP_MASK: check_mask(v, op); break;
  case OP_RESCALE: check_rescale(v, op); break;
  case OP_XWARP_REDUCE: check_xwarp(v, op); break;
  case OP_GRAD: check_grad(v, op); break;
  case OP_FOR: check_for(v, op); break;
  case OP_IF: check_if(v, op); break;
  case OP_RING: check_ring(v, op); break;
  case OP_WARP_ROLES: check_warp_roles(v, op); break;
  case OP_RING_PUT: check_ring_put(v, op); break;
  case OP_RING_GET: check_ring_get(v, op); break;
  case OP_RING_RELEASE: check_ring_release(v, op); break;
  case OP_MMA_TURN: check_mma_turn(v, op); break;
  case OP_YIELD: case OP_RETURN: check_terminator(v, op); break;
  default: report(v, op, "unknown op kind %d", (int)op->kind);
  }
}

/* ------------------------------------------ operands, uses, dominance */

/* Every use recorded on value x names a live op of this kernel that holds x
 * at that operand index. */
static void check_value_uses(Verifier *v, const Op *where, const Value *x) {
  for (int i = 0; i < x->nuses; i++) {
    const Use *u = &x->uses[i];
    if (!u->user || u->index < 0 || u->index >= u->user->noperands || u->user->operands[u->index] != x ||
        op_func(u->user) != v->f) {
      report(v, where, "use list of %s holds a stale use (operand %d of a %s)", names_get(&v->names, x),
             u->index, u->user ? op_name(u->user->kind) : "null op");
      return;
    }
  }
}

static void check_operands(Verifier *v, const Op *op) {
  for (int i = 0; i < op->noperands; i++) {
    const Value *x = op->operands[i];
    if (!x) {
      report(v, op, "operand %d is null", i);
      continue;
    }
    int n = 0;
    for (int u = 0; u < x->nuses; u++)
      n += x->uses[u].user == op && x->uses[u].index == i;
    if (n != 1)
      report(v, op, "operand %d (%s) appears %d times in its use list", i, names_get(&v->names, x), n);
    if (ptrmap_get(&v->visible, x, 0) != 1)
      report(v, op, "operand %d (%s) does not dominate this use", i, names_get(&v->names, x));
    if (x->type.kind == TYPE_TILE && x->type.dist == DIST_PARTIAL && op->kind != OP_XWARP_REDUCE)
      report(v, op, "partial value %s used by %s (only xwarp_reduce may use it)", names_get(&v->names, x),
             op_name(op->kind));
    if (x->type.kind == TYPE_TILE && x->type.dist == DIST_GROUP_COLS &&
        !(op->kind == OP_STORE && i == 4 && attr_get(&op->attrs, "reduce")) && op->kind != OP_MMA_WAIT)
      report(v, op, "%s value %s used by %s (only a store with reduce = add may use it)", dist_name(x->type.dist),
             names_get(&v->names, x), op_name(op->kind));
  }
}

static void verify_block(Verifier *v, const Block *b, int depth);

static void verify_op(Verifier *v, const Op *op, int depth) {
  check_operands(v, op);
  check_kind_rules(v, op);
  for (int i = 0; i < op->nresults; i++) {
    Value *r = op->results[i];
    if (!r || r->def != op || r->result_index != i) {
      report(v, op, "result %d does not point back to its op", i);
      continue;
    }
    check_type(v, op, r->type, "result");
  }
  for (int r = 0; r < op->nregions; r++) {
    const Block *blk = op->regions[r];
    if (!blk || blk->parent_op != op) {
      report(v, op, "region %d does not point back to its op", r);
      continue;
    }
    verify_block(v, blk, depth + 1);
  }
  for (int i = 0; i < op->nresults; i++)
    if (op->results[i]) {
      check_value_uses(v, op, op->results[i]);
      ptrmap_put(&v->visible, op->results[i], 1);
    }
}

/* Checks a block's args and ops; values it defines are visible to the ops
 * after them and to nested regions, and hidden again at the end. */
static void verify_block(Verifier *v, const Block *b, int depth) {
  if (depth > 1000) {
    report(v, NULL, "regions nested too deeply (a cycle?)");
    return;
  }
  const Op *owner = b->parent_op;
  for (int i = 0; i < b->nargs; i++) {
    Value *a = b->args[i];
    if (a->block != b || a->arg_index != i || a->def)
      report(v, owner, "block argument %d does not point back to its block", i);
    check_type(v, owner, a->type, "block argument");
    check_value_uses(v, owner, a);
    ptrmap_put(&v->visible, a, 1);
  }
  const Op *prev = NULL;
  for (const Op *o = b->first; o; prev = o, o = o->next) {
    if (o->parent != b || o->prev != prev) {
      report(v, o, "op is not linked into its block correctly");
      break;
    }
    if (prev && (prev->kind == OP_YIELD || prev->kind == OP_RETURN))
      report(v, o, "op after the block's terminator");
    verify_op(v, o, depth);
  }
  if (prev != b->last)
    report(v, owner, "block's last op is not the end of its op list");
  for (int i = 0; i < b->nargs; i++)
    ptrmap_put(&v->visible, b->args[i], 0);
  for (const Op *o = b->first; o; o = o->next) {
    for (int i = 0; i < o->nresults; i++)
      if (o->results[i])
        ptrmap_put(&v->visible, o->results[i], 0);
    if (o == prev)
      break;
  }
}

/* `layout = varlen` (packed sequences, docs/abi.md): the kernel's rows are
 * found through cu_seqlens, which forward and backward kernels take and
 * whose batch is the outermost parallel loop (codegen binds each block's
 * sequence from blockIdx.z). */
static void check_layout(Verifier *v, const Func *f) {
  const Attr *a = attr_get(&f->attrs, "layout");
  if (!a)
    return;
  const char *l = attr_str(&f->attrs, "layout", "");
  const char *mode = attr_str(&f->attrs, "mode", "forward");
  if (strcmp(l, "varlen") != 0 && strcmp(l, "padded") != 0)
    report(v, NULL, "layout must be varlen or padded; got '%s'", l);
  else if (strcmp(l, "varlen") == 0 && strcmp(mode, "forward") != 0 &&
           strcmp(mode, "backward") != 0)
    report(v, NULL, "layout = varlen needs a forward or backward kernel (mode = %s)", mode);
}

static int verify_func(const Func *f, const char *after, FILE *diag) {
  Verifier v = {.f = f, .after = after, .diag = diag};
  v.symbolic_ok = attr_get(&f->attrs, "tile_q") == NULL;
  names_init_func(&v.names, f);
  if (!f->body || f->body->parent_func != f) {
    report(&v, NULL, "kernel body does not point back to its kernel");
  } else {
    for (int i = 0; i < f->nargs; i++) {
      Type t = f->args[i]->type;
      bool scalar = t.kind == TYPE_SCALAR &&
                    (t.elem == ELEM_INDEX || t.elem == ELEM_U32 || t.elem == ELEM_F32);
      if (t.kind != TYPE_TENSOR && !scalar)
        report(&v, NULL, "kernel argument %s must be a tensor or an index, u32 or f32 scalar",
               names_get(&v.names, f->args[i]));
    }
    check_layout(&v, f);
    verify_block(&v, f->body, 0);
    const Op *t = f->body->last;
    if (!t || t->kind != OP_RETURN)
      report(&v, t, "kernel body does not end with return");
  }
  names_free(&v.names);
  ptrmap_free(&v.visible);
  return v.nerrors;
}

int module_verify(const Module *m, const char *after, FILE *diag) {
  int n = 0;
  for (int i = 0; i < m->nfuncs; i++)
    n += verify_func(m->funcs[i], after, diag);
  return n;
}
