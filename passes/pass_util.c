/* pass_util.c - helpers shared by the passes (see pass_util.h). */
#include "passes/pass_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Room for one more element in the growable array *v of n used, *cap
 * allocated elements of size elem (first capacity first_cap). */
static void grow_for_one(void **v, int n, int *cap, int first_cap, size_t elem) {
  if (n < *cap)
    return;
  *cap = *cap ? *cap * 2 : first_cap;
  void *nv = realloc(*v, elem * (size_t)*cap);
  if (!nv) {
    fprintf(stderr, "flashc: out of memory\n");
    abort();
  }
  *v = nv;
}

void oplist_push(OpList *l, Op *op) {
  grow_for_one((void **)&l->v, l->n, &l->cap, 16, sizeof(Op *));
  l->v[l->n++] = op;
}

void oplist_free(OpList *l) {
  free(l->v);
  l->v = NULL;
  l->n = l->cap = 0;
}

bool oplist_has(const OpList *l, const Op *op) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == op)
      return true;
  return false;
}

typedef struct KindCollect {
  OpKind k;
  OpList *out;
} KindCollect;

static void collect_fn(Op *op, void *ctx) {
  KindCollect *c = ctx;
  if (op->kind == c->k)
    oplist_push(c->out, op);
}

OpList collect_ops(Func *f, OpKind k) {
  OpList l = {0};
  KindCollect c = {k, &l};
  func_walk(f, collect_fn, &c);
  return l;
}

OpList collect_ops_in(Block *b, OpKind k) {
  OpList l = {0};
  KindCollect c = {k, &l};
  block_walk(b, collect_fn, &c);
  return l;
}

bool block_has_op(Block *b, OpKind k) {
  OpList l = collect_ops_in(b, k);
  bool found = l.n > 0;
  oplist_free(&l);
  return found;
}

bool op_is_pure(const Op *op) {
  if (op->nregions > 0)
    return false;
  /* An async matmul and its waits keep their order: codegen's wait depths
   * count the async matmuls between them (passes/overlap_softmax.c). */
  if (op->kind == OP_MATMUL && attr_int(&op->attrs, "async", 0) == 1)
    return false;
  switch (op->kind) {
  case OP_MMA_WAIT:
  /* a ring is a resource (two rings are never one), its puts, gets and
   * releases synchronize warps: none may move, merge or go */
  case OP_RING:
  case OP_RING_PUT:
  case OP_RING_GET:
  case OP_RING_RELEASE:
  case OP_MMA_TURN: /* orders warpgroups' matmul issue */
  case OP_STORE:
  case OP_SCATTER:
  case OP_YIELD:
  case OP_RETURN:
  case OP_FOR:
  case OP_IF:
    return false;
  default:
    return true;
  }
}

static bool pure_if(const Op *o, int depth) {
  if (o->kind != OP_IF || depth > 16)
    return false;
  for (int r = 0; r < o->nregions; r++)
    for (const Op *p = o->regions[r]->first; p; p = p->next)
      if (p->kind != OP_YIELD && !op_is_pure(p) && !pure_if(p, depth + 1))
        return false;
  return true;
}

bool op_is_pure_if(const Op *op) { return pure_if(op, 0); }

static bool scalar_body(const Block *b, int depth);

static bool scalar_loop(const Op *o, int depth) {
  if (o->kind != OP_FOR || for_is_parallel((Op *)o) || depth > 16)
    return false;
  for (int i = 0; i < o->noperands; i++)
    if (o->operands[i]->type.kind != TYPE_SCALAR)
      return false;
  for (int i = 0; i < o->nresults; i++)
    if (o->results[i]->type.kind != TYPE_SCALAR)
      return false;
  return scalar_body(for_body((Op *)o), depth + 1);
}

static bool scalar_body(const Block *b, int depth) {
  for (const Op *p = b->first; p; p = p->next) {
    bool ok = p->kind == OP_YIELD || p->kind == OP_IF ? p->kind == OP_YIELD || pure_if(p, depth)
              : p->kind == OP_FOR ? scalar_loop(p, depth)
                                  : op_is_pure(p);
    for (int i = 0; ok && i < p->nresults; i++)
      ok = p->results[i]->type.kind == TYPE_SCALAR;
    if (!ok)
      return false;
  }
  return true;
}

bool op_is_scalar_loop(const Op *op) { return scalar_loop(op, 0); }

long tile_bytes(Type t) { return (long)t.rows * t.cols * (t.elem == ELEM_F32 ? 4 : 2); }

bool op_is_staged_load(const Op *op) {
  if ((op->kind != OP_LOAD && op->kind != OP_LOAD_PAGED) || op->nresults != 1)
    return false;
  Type t = op->results[0]->type;
  return t.kind == TYPE_TILE && t.dist == DIST_NONE && (t.elem == ELEM_BF16 || t.elem == ELEM_F16);
}

bool op_precedes(const Op *a, const Op *b) {
  if (a->parent != b->parent)
    return false;
  for (const Op *o = a->next; o; o = o->next)
    if (o == b)
      return true;
  return false;
}

bool hoist_before(Value *v, Op *point) {
  Op *d = v->def;
  if (d == point)
    return false;
  /* Block arguments and values of enclosing blocks already dominate. */
  if (!d || d->parent != point->parent || op_precedes(d, point))
    return true;
  if (!op_is_pure(d))
    return false;
  for (int i = 0; i < d->noperands; i++)
    if (!hoist_before(d->operands[i], point))
      return false;
  op_move_before(d, point);
  return true;
}

/* Is v defined by op `from` of b or an op after it? */
static bool defined_from(const Value *v, const Block *b, const Op *from) {
  const Op *d = v->def;
  if (!d || d->parent != b)
    return false;
  for (const Op *o = from; o; o = o->next)
    if (o == d)
      return true;
  return false;
}

/* Is v defined inside a region nested in b (an if's or loop's block)? */
static bool defined_below(const Value *v, const Block *b) {
  const Op *d = v->def;
  if (!d)
    return false;
  for (const Block *p = d->parent; p; p = p->parent_op ? p->parent_op->parent : NULL)
    if (p == b)
      return d->parent != b;
  return false;
}

static bool slice_rec(Value *v, Block *b, const Op *from, bool (*movable)(const Op *),
                      OpList *mark, int depth) {
  if (defined_below(v, b))
    return false;
  if (!defined_from(v, b, from))
    return true;
  Op *d = v->def;
  if (depth > 64 || d->nregions || !movable(d))
    return false;
  if (oplist_has(mark, d))
    return true;
  for (int i = 0; i < d->noperands; i++)
    if (!slice_rec(d->operands[i], b, from, movable, mark, depth + 1))
      return false;
  oplist_push(mark, d);
  return true;
}

bool slice_after(Value *v, Block *b, const Op *from, bool (*movable)(const Op *), OpList *mark) {
  return slice_rec(v, b, from, movable, mark, 0);
}

void move_marked_before(const OpList *mark, Op *at) {
  for (Op *o = at->next; o;) {
    Op *next = o->next;
    if (oplist_has(mark, o))
      op_move_before(o, at);
    o = next;
  }
}

static bool results_unused(const Op *op) {
  for (int i = 0; i < op->nresults; i++)
    if (op->results[i]->nuses)
      return false;
  return true;
}

static int dce_once(Block *b) {
  int n = 0;
  for (Op *o = b->last; o;) {
    Op *prev = o->prev;
    for (int r = 0; r < o->nregions; r++)
      n += dce_once(o->regions[r]);
    if (op_is_pure(o) && results_unused(o)) {
      op_erase(o);
      n++;
    }
    o = prev;
  }
  return n;
}

int dce_block(Block *b) {
  int total = 0, n;
  while ((n = dce_once(b)) > 0)
    total += n;
  return total;
}

/* ------------------------------------ dead code through loop-carried values */

/* Liveness marks: op->id for ops; value->id for op results and for-body
 * arguments (a carry is live when its result or its body argument is). */
typedef struct LiveWork {
  Value **v;
  int n, cap;
} LiveWork;

static void live_push(LiveWork *w, Value *v) {
  if (!v || v->id)
    return;
  v->id = 1;
  grow_for_one((void **)&w->v, w->n, &w->cap, 64, sizeof(Value *));
  w->v[w->n++] = v;
}

/* An op that must run: its operands (a for's bounds, an if's condition;
 * their results' operands come through the carries) and the region ops
 * around it. */
static void live_op(LiveWork *w, Op *op) {
  if (op->id)
    return;
  op->id = 1;
  int n = op->kind == OP_FOR ? 2 : op->kind == OP_IF ? 1 : op->kind == OP_YIELD ? 0 : op->noperands;
  for (int i = 0; i < n; i++)
    live_push(w, op->operands[i]);
  if (op->parent && op->parent->parent_op)
    live_op(w, op->parent->parent_op);
}

/* Carry i of loop: its initial value, what the body yields for it. */
static void live_carry(LiveWork *w, Op *loop, int i) {
  live_op(w, loop);
  Block *body = for_body(loop);
  live_push(w, loop->results[i]);
  live_push(w, body->args[i + 1]);
  live_push(w, loop->operands[2 + i]);
  Op *y = block_terminator(body);
  if (y && i < y->noperands)
    live_push(w, y->operands[i]);
}

static void live_value(LiveWork *w, Value *v) {
  Op *d = v->def;
  if (d && d->kind == OP_FOR) {
    live_carry(w, d, v->result_index);
  } else if (d && d->kind == OP_IF) {
    live_op(w, d);
    for (int r = 0; r < d->nregions; r++) {
      Op *y = block_terminator(d->regions[r]);
      if (y && v->result_index < y->noperands)
        live_push(w, y->operands[v->result_index]);
    }
  } else if (d) {
    live_op(w, d);
  } else if (v->block && v->block->parent_op && v->block->parent_op->kind == OP_FOR) {
    if (v->arg_index == 0)
      live_op(w, v->block->parent_op);
    else
      live_carry(w, v->block->parent_op, v->arg_index - 1);
  }
}

static void clear_marks_fn(Op *op, void *ctx) {
  (void)ctx;
  op->id = 0;
  for (int i = 0; i < op->nresults; i++)
    op->results[i]->id = 0;
  for (int r = 0; r < op->nregions; r++)
    for (int a = 0; a < op->regions[r]->nargs; a++)
      op->regions[r]->args[a]->id = 0;
}

static void root_fn(Op *op, void *ctx) {
  if (!op_is_pure(op) && op->kind != OP_FOR && op->kind != OP_IF && op->kind != OP_YIELD)
    live_op(ctx, op);
}

/* Erases op and everything in its regions, users first. */
static int erase_deep(Op *op) {
  int n = 1;
  for (int r = 0; r < op->nregions; r++)
    for (Op *o = op->regions[r]->last; o;) {
      Op *prev = o->prev;
      n += erase_deep(o);
      o = prev;
    }
  op_erase(op);
  return n;
}

static int sweep_block(Block *b) {
  int n = 0;
  for (Op *o = b->last; o;) {
    Op *prev = o->prev;
    Op *parent = b->parent_op;
    if (o->kind == OP_YIELD) {
      for (int i = o->noperands - 1; i >= 0; i--)
        if (parent && i < parent->nresults && !parent->results[i]->id)
          op_erase_operand(o, i);
    } else if (!o->id) {
      n += erase_deep(o);
    } else if (o->nregions) {
      for (int r = 0; r < o->nregions; r++)
        n += sweep_block(o->regions[r]);
      for (int i = o->nresults - 1; i >= 0; i--) {
        if (o->results[i]->id)
          continue;
        if (o->kind == OP_FOR) {
          block_erase_arg(for_body(o), i + 1);
          op_erase_operand(o, 2 + i);
        }
        op_erase_result(o, i);
        n++;
      }
    }
    o = prev;
  }
  return n;
}

int dce_func(Func *f) {
  func_walk(f, clear_marks_fn, NULL);
  LiveWork w = {0};
  func_walk(f, root_fn, &w);
  while (w.n > 0)
    live_value(&w, w.v[--w.n]);
  free(w.v);
  return sweep_block(f->body);
}

bool attrs_equal(const AttrList *a, const AttrList *b) {
  if (a->n != b->n)
    return false;
  for (int i = 0; i < a->n; i++) {
    const Attr *x = &a->v[i];
    const Attr *y = attr_get(b, x->key);
    if (!y || x->kind != y->kind)
      return false;
    switch (x->kind) {
    case ATTR_INT:
      if (x->i != y->i)
        return false;
      break;
    case ATTR_FLOAT:
      if (x->f != y->f && !(x->f != x->f && y->f != y->f))
        return false;
      break;
    default:
      if (strcmp(x->s, y->s) != 0)
        return false;
    }
  }
  return true;
}

static bool ops_identical(const Op *a, const Op *b) {
  if (a->kind != b->kind || a->noperands != b->noperands || a->nresults != b->nresults)
    return false;
  for (int i = 0; i < a->noperands; i++)
    if (a->operands[i] != b->operands[i])
      return false;
  for (int i = 0; i < a->nresults; i++)
    if (!type_eq(a->results[i]->type, b->results[i]->type))
      return false;
  return attrs_equal(&a->attrs, &b->attrs);
}

int cse_block(Block *b) {
  int n = 0;
  for (Op *o = b->first; o;) {
    Op *next = o->next;
    for (int r = 0; r < o->nregions; r++)
      n += cse_block(o->regions[r]);
    /* Loads are pure here but two loads of a workspace may see different
     * contents; only merge ops that compute from their operands alone. */
    if (op_is_pure(o) && o->kind != OP_LOAD) {
      for (Op *p = b->first; p != o; p = p->next)
        if (ops_identical(p, o)) {
          for (int i = 0; i < o->nresults; i++)
            value_replace_all_uses(o->results[i], p->results[i]);
          op_erase(o);
          n++;
          break;
        }
    }
    o = next;
  }
  return n;
}

Value *strip_xwarp(Value *v) {
  while (v->def && v->def->kind == OP_XWARP_REDUCE)
    v = v->def->operands[0];
  return v;
}

Value *strip_dropout(Value *v) {
  Op *sel = v->def;
  if (!sel || sel->kind != OP_SELECT || !attr_int(&sel->attrs, "dropout", 0))
    return v;
  Value *x = sel->operands[1];
  Op *mul = x->def;
  bool scaled = mul && mul->kind == OP_MUL && mul->operands[1]->name &&
                strcmp(mul->operands[1]->name, "keep_scale") == 0;
  return scaled ? mul->operands[0] : x;
}

static void map_block_types(Block *b, TypeMapFn fn, void *ctx) {
  for (int i = 0; i < b->nargs; i++)
    b->args[i]->type = fn(b->args[i]->type, ctx);
  for (Op *o = b->first; o; o = o->next) {
    for (int i = 0; i < o->nresults; i++)
      o->results[i]->type = fn(o->results[i]->type, ctx);
    for (int r = 0; r < o->nregions; r++)
      map_block_types(o->regions[r], fn, ctx);
  }
}

void func_map_types(Func *f, TypeMapFn fn, void *ctx) { map_block_types(f->body, fn, ctx); }

void pass_error(FILE *diag, const Func *f, const char *fmt, ...) {
  FILE *out = diag ? diag : stderr;
  fprintf(out, "%s:%d:%d: error: ", f->loc.file ? f->loc.file : "<input>",
          f->loc.line > 0 ? f->loc.line : 1, f->loc.col > 0 ? f->loc.col : 1);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(out, fmt, ap);
  va_end(ap);
  fputc('\n', out);
}

/* Line `line` of `file` under a caret at `col`, when the file can be read:
 * the IR keeps source positions, not the source text. Only a regular file
 * is opened again (a FIFO would block, stdin is gone). */
static void print_source_line(FILE *out, const char *file, int line, int col) {
  struct stat st;
  if (!file || stat(file, &st) != 0 || !S_ISREG(st.st_mode))
    return;
  FILE *in = fopen(file, "r");
  if (!in)
    return;
  char *text = NULL;
  size_t cap = 0;
  ssize_t len = 0;
  for (int l = 0; l < line && len >= 0; l++)
    len = getline(&text, &cap, in);
  if (len > 0 && text[len - 1] == '\n')
    len--;
  if (len >= 0)
    ir_print_source_line(out, text, (size_t)len, 1, col);
  free(text);
  fclose(in);
}

void pass_report(FILE *diag, const Func *f, SrcLoc loc, const char *kind, const char *fmt, ...) {
  FILE *out = diag ? diag : stderr;
  if (loc.line <= 0)
    loc = f->loc;
  fprintf(out, "%s:%d:%d: %s: ", loc.file ? loc.file : "<input>", loc.line > 0 ? loc.line : 1,
          loc.col > 0 ? loc.col : 1, kind);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(out, fmt, ap);
  va_end(ap);
  fputc('\n', out);
  if (loc.line > 0 && loc.col > 0)
    print_source_line(out, loc.file, loc.line, loc.col);
}

typedef struct YieldScan {
  bool any_region, empty_yield, missing;
} YieldScan;

static void yield_scan_fn(Op *op, void *ctx) {
  YieldScan *s = ctx;
  for (int r = 0; r < op->nregions; r++) {
    s->any_region = true;
    Op *t = block_terminator(op->regions[r]);
    if (!t)
      s->missing = true;
    else if (t->kind == OP_YIELD && t->noperands == 0)
      s->empty_yield = true;
  }
}

bool func_uses_empty_yields(Func *f) {
  YieldScan s = {0};
  func_walk(f, yield_scan_fn, &s);
  /* Default to explicit terminators: the verifier checks them. */
  return !s.missing || s.empty_yield || !s.any_region;
}

static bool fuse_candidate(Op *add, int side) {
  Op *mm = add->operands[side]->def;
  Value *acc = add->operands[1 - side];
  return mm && mm->kind == OP_MATMUL && mm->noperands == 2 && mm->results[0]->nuses == 1 &&
         mm->parent == add->parent && type_eq(acc->type, add->results[0]->type) &&
         type_eq(mm->results[0]->type, add->results[0]->type);
}

void fuse_matmul_accumulators(Module *m, Func *f) {
  OpList adds = collect_ops(f, OP_ADD);
  for (int i = 0; i < adds.n; i++) {
    Op *add = adds.v[i];
    for (int side = 0; side < 2; side++) {
      if (!fuse_candidate(add, side))
        continue;
      Op *mm = add->operands[side]->def;
      Builder b = builder_before(m, add);
      Value *ops[3] = {mm->operands[0], mm->operands[1], add->operands[1 - side]};
      Op *nm = build_op(&b, OP_MATMUL, ops, 3, &add->results[0]->type, 1, 0);
      attrs_copy(m, &nm->attrs, &mm->attrs);
      nm->results[0]->name = add->results[0]->name;
      value_replace_all_uses(add->results[0], nm->results[0]);
      op_erase(add);
      op_erase(mm);
      break;
    }
  }
  oplist_free(&adds);
}

void replace_uses_except(Value *from, Value *to, Op *const *keep, int nkeep) {
  for (int u = from->nuses - 1; u >= 0; u--) {
    Op *user = from->uses[u].user;
    bool kept = false;
    for (int i = 0; i < nkeep; i++)
      kept |= user == keep[i];
    if (!kept)
      op_set_operand(user, from->uses[u].index, to);
  }
}

bool kv_loop_state(const Op *loop, int *io, int *il, int *im) {
  *io = *il = *im = -1;
  for (int i = 0; i < loop->nresults; i++) {
    Value *init = loop->operands[2 + i];
    double c;
    if (init->type.kind != TYPE_TILE || !value_const(init, &c))
      continue;
    int *slot = init->type.cols > 1 ? (c == 0.0 ? io : NULL)
                : c == 0.0         ? il
                : c == -INFINITY   ? im
                                   : NULL;
    if (!slot || *slot >= 0)
      return false;
    *slot = i;
  }
  return *io >= 0 && *il >= 0 && *im >= 0;
}

/* ---- values rebuilt at another step ------------------------------------- */

static bool rebuildable(Value *v, Op *loop, int depth) {
  if (depth > 32)
    return false;
  if (value_defined_outside(v, loop))
    return true;
  if (v == for_iv(loop))
    return true;
  Op *d = v->def;
  if (!d || d->nregions || !op_is_pure(d) || d->kind == OP_LOAD || d->kind == OP_LOAD_PAGED ||
      v->type.kind != TYPE_SCALAR)
    return false;
  for (int i = 0; i < d->noperands; i++)
    if (!rebuildable(d->operands[i], loop, depth + 1))
      return false;
  return true;
}

bool loop_rebuildable(Value *v, Op *loop) { return rebuildable(v, loop, 0); }

bool overlap_softmax_wanted(const Func *f, bool has_rings) {
  int64_t sched = attr_int(&f->attrs, "sched_overlap", -1);
  if (sched != -1 || !has_rings)
    return sched == 1;
  long d = attr_int(&f->attrs, "head_dim", 0), dv = attr_int(&f->attrs, "v_head_dim", d);
  if (dv <= 128)
    return true;
  /* Wider V (d192, d256): unmasked kernels only (H100, d256: +2-7% on the
   * rows from 2k, 0 to -6% causal; docs/perf-log.md P77, P81), where V's
   * slot of zeros fits beside Q and two stages of K and V (and the rings'
   * barrier blocks) in sm_90a's 227 KB (tiling_smem_limit). */
  if (strcmp(attr_str(&f->attrs, "mask", "none"), "none") != 0)
    return false;
  long tq = attr_int(&f->attrs, "tile_q", 0), tk = attr_int(&f->attrs, "tile_kv", 0);
  return tq * d * 2 + 2 * tk * (d + dv) * 2 + tk * dv * 2 + 2048 <=
         tiling_smem_limit(attr_str(&f->attrs, "target", "sm_90a"));
}

long ring_overhead_bytes(const Func *f, long v_bytes, int rings) {
  long zero = strcmp(attr_str(&f->attrs, "mode", ""), "forward") == 0 &&
                      overlap_softmax_wanted(f, true)
                  ? v_bytes
                  : 0;
  return zero + 1024L * rings;
}

Value *clone_load_at(Builder *b, Op *ld, Op *loop, Value *iv) {
  ValueMap map = {0};
  for (int i = 0; i < ld->noperands; i++) {
    Value *o = loop_rebuild(b, ld->operands[i], loop, iv, &map);
    if (o != ld->operands[i])
      valuemap_put(b->m, &map, ld->operands[i], o);
  }
  Op *c = op_clone(b, ld, &map);
  c->results[0]->name = ld->results[0]->name;
  return c->results[0];
}


/* Maps what blk's ops read from the loop's body to its rebuilt values. */
static void rebuild_region_reads(Builder *b, Block *blk, Op *loop, Value *iv, ValueMap *map) {
  for (Op *o = blk->first; o; o = o->next) {
    for (int i = 0; i < o->noperands; i++) {
      Value *v = o->operands[i];
      bool inside = v->def ? v->def->parent == blk : v->block == blk;
      if (!inside) {
        Value *r = loop_rebuild(b, v, loop, iv, map);
        if (r != v)
          valuemap_put(b->m, map, v, r);
      }
    }
    for (int r = 0; r < o->nregions; r++)
      rebuild_region_reads(b, o->regions[r], loop, iv, map);
  }
}

Value *loop_rebuild(Builder *b, Value *v, Op *loop, Value *iv, ValueMap *map) {
  if (v == for_iv(loop))
    return iv;
  if (value_defined_outside(v, loop))
    return v;
  Value *got = valuemap_get(map, v);
  if (got != v)
    return got;
  Op *d = v->def;
  for (int i = 0; i < d->noperands; i++) {
    Value *o = loop_rebuild(b, d->operands[i], loop, iv, map);
    if (o != d->operands[i])
      valuemap_put(b->m, map, d->operands[i], o);
  }
  for (int r = 0; r < d->nregions; r++)
    rebuild_region_reads(b, d->regions[r], loop, iv, map);
  Op *c = op_clone(b, d, map);
  for (int r = 0; r < d->nresults; r++)
    valuemap_put(b->m, map, d->results[r], c->results[r]);
  return c->results[v->result_index];
}

bool pass_user_schedule(const Func *f) {
  for (int i = 0; i < f->attrs.n; i++)
    if (strncmp(f->attrs.v[i].key, "sched_", 6) == 0)
      return true;
  return false;
}

bool pass_targets_wgmma(const Func *f, const PassOptions *opts) {
  const char *target = attr_str(&f->attrs, "target", opts && opts->target ? opts->target : "sm_90a");
  return strcmp(target, "sm_90a") == 0 && !(opts && opts->mma_sync);
}

int loop_register_bytes(const Op *loop, int threads) {
  int n = 0;
  for (int i = 0; i < loop->nresults; i++) {
    Type t = loop->results[i]->type;
    if (t.kind == TYPE_TILE && t.dist != DIST_NONE && t.rows > 0 && t.cols > 0)
      n += t.rows * t.cols * (t.elem == ELEM_F32 ? 4 : 2) / threads;
  }
  return n;
}

bool pass_rows_grouped(const Func *f) {
  long rows = attr_int(&f->attrs, "tile_q", 0), warps = attr_int(&f->attrs, "warps", 4);
  return strcmp(attr_str(&f->attrs, "mode", ""), "backward") == 0 && rows > 0 && rows % 16 == 0 &&
         16 * warps > rows && warps % (rows / 16) == 0;
}

bool pass_grouped_main(const Func *f) {
  return strcmp(attr_str(&f->attrs, "role", ""), "main") == 0 && pass_rows_grouped(f);
}

/* The K/V-outer kernels (kv, split-dkdv's dv: their inner loop over Q
 * tiles loads Q and dO) and the Q-outer one (q: K and V) past head dim 64,
 * and group-dq's atomic kernel. d64 measured 5-10% slower with the
 * producer than with the pipeline pass's copies (which also carry LSE and
 * D a step ahead there); d128 faster (perf-log P78). d256 runs one block
 * an SM (its rings and K/V tiles fill the shared memory; ptxas sizes a
 * 64 x 256 wgmma's accumulators by the launch's registers, which two
 * blocks an SM would halve). */
bool pass_backward_warp_roles(const Func *f) {
  const char *role = attr_str(&f->attrs, "role", "");
  long d = attr_int(&f->attrs, "head_dim", 0), dv = attr_int(&f->attrs, "v_head_dim", d);
  long warps = attr_int(&f->attrs, "warps", 4);
  if (strcmp(attr_str(&f->attrs, "mode", ""), "backward") != 0 || (warps != 4 && warps != 8))
    return false;
  if (pass_grouped_main(f))
    return true;
  return (strcmp(role, "kv") == 0 || strcmp(role, "dv") == 0 || strcmp(role, "q") == 0) &&
         d > 64 && dv > 0;
}

/* A tensor map per Q/K/V argument, built by the runtime at launch; one
 * thread issues the bulk copies, which zero the rows past the tensor's end
 * as cp.async does. The forward's tensors, and a backward kernel's
 * staged input rectangles (stage-inputs'), only: the maps their launches
 * encode. Not where the rows are a packed batch's (varlen: the rows after
 * a sequence are the next one's, not out of range), nor where the schedule
 * says `tma = 0`. The box is 64 columns (128 bytes, the 128-byte swizzle's
 * row) by at most 256 rows. */
bool pass_tma_load(const Func *f, const Op *ld) {
  Type t = ld->results[0]->type;
  const char *mode = attr_str(&f->attrs, "mode", "");
  bool rect = attr_int(&ld->attrs, "rect", 0) == 1;
  return op_is_tensor_map_load(ld) && attr_int(&f->attrs, "sched_tma", 1) == 1 &&
         (strcmp(mode, "forward") == 0 || (rect && strcmp(mode, "backward") == 0)) &&
         strcmp(attr_str(&f->attrs, "layout", "padded"), "padded") == 0 &&
         !attr_get(&ld->attrs, "pack") &&
         t.rows >= 8 && t.rows <= 256 && t.cols % 64 == 0 &&
         (t.elem == ELEM_BF16 || t.elem == ELEM_F16);
}
