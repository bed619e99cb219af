/* block_lists.c - the `block-lists` pass: a mask that reads run-time tensors
 * (document ids, a block-sparse table) is classified once per input by a
 * classifier kernel, and the attention kernels visit only the tile pairs it
 * lists (FlexAttention's BlockMask; docs/abi.md "Block lists").
 *
 * mask-skip classifies such a mask at run time inside the step (a condition
 * tile and two block-wide reductions, or a block table's point reads), and
 * its scans trim the loop's empty ends; every step between them is still
 * walked (a test, a barrier, a wait), and the scans evaluate the condition
 * at every step they pass. With lists the loop runs over exactly the kept
 * steps:
 *
 *   %cnt = gather %blk_count, %b, %hl, %i
 *   for %t = 0 to %cnt sequential iter_args(...) {
 *     %e = gather %blk_list, %b, %hl, %i, %t        (2 * step + full)
 *     %j = div %e, 2                                (the step: K/V tile j)
 *     %full = cmp ne (sub %e, mul %j, 2), 0
 *     ... the step, unskipped; `if %full { s } else { mask s, cond }` ...
 *   }
 *
 * and two new kernels write the lists (the classifier, in two phases that
 * take the same parameters; docs/abi.md "Block lists"). The steps of a row
 * are independent, so phase 1, @SPEC_blocks_rows<TQ>x<TK>_classes (or
 * _cols<TQ>x<TK>_classes for the K/V-outer backward kernels, whose rows
 * are K/V tiles), runs one block per (batch, list head, row tile, chunk of
 * CHUNK steps): it evaluates the steps' own classification (a copy of the
 * ops that made %empty_rt and %full_rt, every copy's reads before the
 * reductions) and writes, at each step j of the row's static range (before
 * the scans), 2 * j + full where the step keeps something, else -1. Phase
 * 2, @SPEC_blocks_rows<TQ>x<TK> (the name the kernels' block_list gives),
 * one block per (batch, list head, row tile), compacts the row's range in
 * place (the kept entries in order from position 0), then writes the count
 * and a sentinel entry (2 * the range's end: what the last step's prefetch
 * reads). A list serves
 * every head when the classification does not read the head (`list_heads
 * = 1`), else one per query head. The next step's prefetch reads its entry
 * from the list (the software pipeline rebuilds the step index at t + 1).
 *
 * It fires on a forward, dropout or backward kernel (not varlen) whose step
 * mask-skip marked {classified = run_time}, nested in exactly three
 * parallel loops (batch, head, row tile), where the classification reads
 * only the kernel's sizes, run-time inputs, the batch and row-tile indices
 * and the head (the backward: the query head %hq). Otherwise the kernel
 * keeps mask-skip's form. One classifier serves every kernel of the spec
 * with the same orientation and tiles (the first one makes it).
 */
#include <stdio.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

enum { MAX_ARGS = 64 };
/* Steps a classes block classifies (classify_steps), and entries a
 * compaction iteration moves. */
enum { CHUNK = 4, COMPACT = 8, CHEAP_GROUPS = 8 };

/* The pieces of a kernel's step loop the lists replace. */
typedef struct Site {
  Op *loop;      /* the step loop (sequential) */
  Op *skip;      /* if %empty_rt {classified = run_time} */
  Op *split;     /* if %full {classified = run_time}, or NULL */
  Op *par[3];    /* the parallel loops: batch, head, row tile */
  Value *head;   /* the query head's value (%h, or the backward's %hq) */
  Value *lo, *hi; /* the step loop's range before mask-skip's scans */
  bool cols;     /* a K/V-outer kernel: its rows are K/V tiles */
} Site;

static bool is_kernel_with_mask(const Func *f) {
  const char *mode = attr_str(&f->attrs, "mode", "forward");
  const char *role = attr_str(&f->attrs, "role", "");
  if (strcmp(attr_str(&f->attrs, "layout", "padded"), "varlen") == 0)
    return false;
  if (strcmp(mode, "forward") == 0)
    return true;
  return strcmp(mode, "backward") == 0 &&
         (!strcmp(role, "main") || !strcmp(role, "kv") || !strcmp(role, "dv") || !strcmp(role, "q"));
}

static void find_classified(Op *op, void *ctx) {
  Op **found = ctx;
  if (op->kind == OP_IF && strcmp(attr_str(&op->attrs, "classified", ""), "run_time") == 0) {
    /* the skip is the outer one (the split is inside its else region) */
    if (!found[0] || op_is_inside(found[0], op))
      found[1] = found[0], found[0] = op;
    else
      found[1] = op;
  }
}

/* A value defined in a block enclosing `op` (not inside it) and named `name`. */
static Value *enclosing_named(Op *op, const char *name) {
  for (Block *b = op->parent; b; b = b->parent_op ? b->parent_op->parent : NULL) {
    for (Op *o = b->first; o && o != op; o = o->next)
      for (int r = 0; r < o->nresults; r++)
        if (o->results[r]->name && strcmp(o->results[r]->name, name) == 0)
          return o->results[r];
    if (!b->parent_op)
      break;
    op = b->parent_op;
  }
  return NULL;
}

/* The step loop's range before mask-skip's scans: the scan_lo loop's own
 * range is [0, hi - lo) and it starts from `hi` (none found). */
static void static_range(Op *loop, Value **lo, Value **hi) {
  *lo = loop->operands[0];
  *hi = loop->operands[1];
  Op *s = (*lo)->def;
  if (!s || s->kind != OP_FOR || strcmp(attr_str(&s->attrs, "scan", ""), "lo") != 0)
    return;
  Op *n = s->operands[1]->def;
  if (!n || n->kind != OP_SUB || s->noperands < 3)
    return;
  *hi = s->operands[2];
  *lo = n->operands[1];
}

static bool find_site(Func *f, Site *s) {
  Op *found[2] = {NULL, NULL};
  func_walk(f, find_classified, found);
  s->skip = found[0];
  s->split = found[1];
  if (!s->skip || !s->skip->parent->parent_op || s->skip->parent->parent_op->kind != OP_FOR)
    return false;
  if (s->split && !op_is_inside(s->split, s->skip))
    return false;
  s->loop = s->skip->parent->parent_op;
  if (for_is_parallel(s->loop))
    return false;
  int np = 0;
  for (Op *o = s->loop->parent->parent_op; o; o = o->parent->parent_op)
    if (o->kind == OP_FOR && for_is_parallel(o)) {
      if (np == 3)
        return false;
      s->par[2 - np++] = o;
    }
  if (np != 3)
    return false;
  const char *role = attr_str(&f->attrs, "role", "");
  s->cols = strcmp(attr_str(&f->attrs, "mode", "forward"), "backward") == 0 && strcmp(role, "q") != 0;
  s->head = s->cols ? enclosing_named(s->loop, "hq") : for_iv(s->par[1]);
  if (!s->head)
    return false;
  static_range(s->loop, &s->lo, &s->hi);
  return true;
}

/* ------------------------------------------------------------ slices */

/* What the classifier copies: the ops outside the step loop (in the
 * enclosing blocks) and inside it (the step's classification) that the
 * classification and the loop's range need, and the outer values it reads
 * that are not copied (mapped: sizes and inputs to the classifier's
 * arguments, loop indices to its loops'). */
typedef struct Slice {
  Site *s;
  OpList outer, inner;
  bool reads_head, ok;
} Slice;

static bool is_mapped(const Slice *sl, const Value *v) {
  const Site *s = sl->s;
  return v == for_iv(s->par[0]) || v == for_iv(s->par[2]) || v == s->head;
}

static void need_value(Slice *sl, Value *v, int depth);

static void need_op_operands(Slice *sl, Op *o, int depth) {
  for (int i = 0; i < o->noperands; i++)
    need_value(sl, o->operands[i], depth + 1);
  for (int r = 0; r < o->nregions; r++)
    for (Op *p = o->regions[r]->first; p; p = p->next)
      need_op_operands(sl, p, depth + 1);
}

static void need_value(Slice *sl, Value *v, int depth) {
  Site *s = sl->s;
  if (!sl->ok || depth > 512)
    return;
  if (v == s->head || (s->head == for_iv(s->par[1]) && v == for_iv(s->par[1]))) {
    sl->reads_head = true;
    return;
  }
  if (is_mapped(sl, v) || v == for_iv(s->loop))
    return;
  if (!v->def && v->block && v->block->parent_op == s->loop) {
    sl->ok = false; /* a value the loop carries */
    return;
  }
  if (!v->def) {
    /* kernel arguments: the sizes and run-time inputs the classifier has */
    bool arg = v->block && v->block->parent_func && v->name &&
               (!strcmp(v->name, "batch") || !strcmp(v->name, "seqlen_q") ||
                !strcmp(v->name, "seqlen_k") || value_is_input_arg(v));
    bool inside = v->block && v->block->parent_op && op_is_inside(v->block->parent_op, s->loop);
    if (!arg && !inside)
      sl->ok = false; /* another loop's index or carried value */
    return;
  }
  Op *d = v->def;
  bool inside = op_is_inside(d, s->loop);
  if (inside && d->parent != for_body(s->loop))
    return; /* inside a region of a needed op: cloned with it */
  OpList *l = inside ? &sl->inner : &sl->outer;
  if (oplist_has(l, d))
    return;
  if (!(op_is_pure(d) || (inside && op_is_pure_if(d)))) {
    sl->ok = false;
    return;
  }
  oplist_push(l, d);
  need_op_operands(sl, d, depth);
}

/* The ops of l in the order of a pre-order walk of f (defs first). */
typedef struct Ordered {
  const OpList *in;
  OpList out;
} Ordered;

static void order_fn(Op *op, void *ctx) {
  Ordered *o = ctx;
  if (oplist_has(o->in, op))
    oplist_push(&o->out, op);
}

static OpList in_program_order(Func *f, const OpList *l) {
  Ordered o = {.in = l};
  func_walk(f, order_fn, &o);
  return o.out;
}

/* ------------------------------------------------------ the classifier */

static Type list_type(int heads) {
  return type_tensor(ELEM_I32, 4, (int[]){DIM_BATCH, heads, DIM_ROW_TILES, DIM_LIST_LEN});
}

static Type count_type(int heads) {
  return type_tensor(ELEM_I32, 3, (int[]){DIM_BATCH, heads, DIM_ROW_TILES});
}

static void classifier_name(const Func *f, const Site *s, char *buf, size_t n) {
  const char *spec = attr_str(&f->attrs, "grad_of", attr_str(&f->attrs, "dropout_of", f->name));
  snprintf(buf, n, "%s_blocks_%s%dx%d", spec, s->cols ? "cols" : "rows",
           (int)attr_int(&f->attrs, "tile_q", 0), (int)attr_int(&f->attrs, "tile_kv", 0));
}

static Func *find_func(Module *m, const char *name) {
  for (int i = 0; i < m->nfuncs; i++)
    if (strcmp(m->funcs[i]->name, name) == 0)
      return m->funcs[i];
  return NULL;
}

/* The classifier's attributes: the kernel's spec facts and schedule, as a
 * kernel of mode `blocks`. */
static void classifier_attrs(Module *m, Func *c, const Func *f, const Site *s, int heads) {
  attrs_copy(m, &c->attrs, &f->attrs);
  static const char *const drop[] = {"role", "grad_of", "dropout", "dropout_of", "dropout_mask",
                                     "dv_kernel", "schedule", "block_list"};
  for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
    attr_remove(&c->attrs, drop[i]);
  attr_set_word(m, &c->attrs, "mode", "blocks");
  attr_set_word(m, &c->attrs, "blocks", s->cols ? "cols" : "rows");
  attr_set_int(m, &c->attrs, "list_heads", heads);
  const char *spec = attr_str(&f->attrs, "grad_of", attr_str(&f->attrs, "dropout_of", f->name));
  attr_set_str(m, &c->attrs, "blocks_of", spec); /* travels with the spec's kernels */
}

/* Does op (of the step's classification) wait for a block-wide reduction:
 * a reduce, or an op reading one's result (directly or in its regions)? */
static bool after_reduction(const Op *op, const OpList *late) {
  if (op->kind == OP_REDUCE)
    return true;
  for (int i = 0; i < op->noperands; i++)
    if (op->operands[i]->def && oplist_has(late, op->operands[i]->def))
      return true;
  for (int r = 0; r < op->nregions; r++)
    for (const Op *p = op->regions[r]->first; p; p = p->next)
      if (after_reduction(p, late))
        return true;
  return false;
}

/* Classifies steps js[0..CHUNK) by copies of the step's ops, first every
 * copy's work up to its reductions (the reads of all CHUNK steps in flight
 * together: a step is one memory round trip and, for a condition tile, two
 * barriers), then the reductions; maps[k] maps the step's values to copy
 * k's. */
static void classify_steps(Module *m, Builder *sb, Site *s, const OpList *inner,
                           const ValueMap *base, Value *first, Value *js[CHUNK],
                           ValueMap maps[CHUNK]) {
  OpList late = {0};
  for (int i = 0; i < inner->n; i++)
    if (after_reduction(inner->v[i], &late))
      oplist_push(&late, inner->v[i]);
  for (int k = 0; k < CHUNK; k++) {
    maps[k] = (ValueMap){0};
    for (int i = 0; i < base->n; i++)
      valuemap_put(m, &maps[k], base->from[i], base->to[i]);
    js[k] = k ? build_binary(sb, OP_ADD, first, build_index(sb, k)) : first;
    valuemap_put(m, &maps[k], for_iv(s->loop), js[k]);
  }
  for (int phase = 0; phase < 2; phase++)
    for (int k = 0; k < CHUNK; k++)
      for (int i = 0; i < inner->n; i++)
        if (oplist_has(&late, inner->v[i]) == (phase == 1))
          op_clone(sb, inner->v[i], &maps[k]);
  oplist_free(&late);
}

/* The classifier's signature: batch, seqlen_q, seqlen_k, f's run-time
 * inputs, blk_list, blk_count; *map maps f's arguments to its. */
static Func *classifier_func(Module *m, Func *f, Site *s, const char *name, int heads,
                             ValueMap *map) {
  Type types[MAX_ARGS];
  const char *names[MAX_ARGS];
  int n = 0;
  const char *sizes[] = {"batch", "seqlen_q", "seqlen_k"};
  for (int i = 0; i < 3; i++) {
    types[n] = type_index();
    names[n++] = sizes[i];
  }
  for (int i = 0; i < f->nargs && n < MAX_ARGS - 2; i++)
    if (value_is_input_arg(f->args[i])) {
      types[n] = f->args[i]->type;
      names[n++] = f->args[i]->name;
    }
  types[n] = list_type(heads);
  names[n++] = "blk_list";
  types[n] = count_type(heads);
  names[n++] = "blk_count";
  Func *c = func_create(m, name, types, names, n, f->loc);
  classifier_attrs(m, c, f, s, heads);
  *map = (ValueMap){0};
  for (int i = 0; i < f->nargs; i++) {
    Value *a = func_arg(c, f->args[i]->name ? f->args[i]->name : "");
    if (a)
      valuemap_put(m, map, f->args[i], a);
  }
  return c;
}

/* The loops both phases share: batch %b and list head %hl (parallel), in
 * whose body (hb) the row tiles' range [rlo, rhi) (the kernel's row loop's,
 * from the sizes) is copied. */
typedef struct Nest {
  Builder b, bb, hb;
  Op *lb, *lh;
  Value *hl, *rlo, *rhi;
  OpList bops; /* the copied ops of the row range */
} Nest;

static void build_nest(Module *m, Func *c, Func *f, Site *s, int heads, ValueMap *map, Nest *n) {
  n->b = builder_at_end(m, c->body);
  n->b.loc = s->loop->loc;
  Value *c0 = build_index(&n->b, 0);
  n->lb = build_for(&n->b, c0, func_arg(c, "batch"), true, NULL, 0, "b");
  n->bb = builder_at_end(m, for_body(n->lb));
  n->bb.loc = n->b.loc;
  n->lh = build_for(&n->bb, c0, build_index(&n->bb, heads), true, NULL, 0, "hl");
  n->hb = builder_at_end(m, for_body(n->lh));
  n->hb.loc = n->b.loc;
  valuemap_put(m, map, for_iv(s->par[0]), for_iv(n->lb));
  valuemap_put(m, map, s->head, heads > 1 ? for_iv(n->lh) : c0);
  n->hl = heads > 1 ? for_iv(n->lh) : c0;
  Slice bound = {.s = s, .ok = true};
  need_value(&bound, s->par[2]->operands[0], 0);
  need_value(&bound, s->par[2]->operands[1], 0);
  n->bops = in_program_order(f, &bound.outer);
  for (int i = 0; i < n->bops.n; i++)
    op_clone(&n->hb, n->bops.v[i], map);
  oplist_free(&bound.outer);
  oplist_free(&bound.inner);
  n->rlo = valuemap_get(map, s->par[2]->operands[0]);
  n->rhi = valuemap_get(map, s->par[2]->operands[1]);
}

/* Closes the nest's loops and the kernel. */
static void end_nest(Module *m, Func *c, Nest *n) {
  build_yield(&n->hb, NULL, 0);
  build_yield(&n->bb, NULL, 0);
  Builder end = builder_at_end(m, c->body);
  build_op(&end, OP_RETURN, NULL, 0, NULL, 0, 0);
  oplist_free(&n->bops);
  cse_block(c->body);
}

/* Clones into rb the ops of `ops` (in f's order) not already in `skip`. */
static void clone_outer(Builder *rb, Func *f, const OpList *ops, const OpList *skip,
                        ValueMap *map) {
  OpList l = in_program_order(f, ops);
  for (int i = 0; i < l.n; i++)
    if (!oplist_has(skip, l.v[i]))
      op_clone(rb, l.v[i], map);
  oplist_free(&l);
}

/* Phase 1, @name (the classes kernel, attribute chunk = CHUNK): one block
 * per (batch, list head, row tile, chunk of CHUNK steps), the row tile and
 * the chunk flattened into one parallel loop %i (r = rlo + i div nc, chunk
 * i rem nc, nc = ceil(steps / CHUNK), steps the other dim's tile count). It
 * classifies steps j = CHUNK * chunk + k and writes blk_list[b, hl, r,
 * min(j, steps)] = 2 * j + full where j is in the row's static range and
 * the step keeps something, else -1: every entry of the range is written
 * (the range lies in [0, steps)). A chunk that meets the range may write
 * -1 at positions outside it (the last, steps, possibly from several
 * steps: the same value); a chunk that does not meet it classifies and
 * writes nothing (`if %meets_range`, uniform). */
static void build_classes(Module *m, Func *f, Site *s, Slice *sl, const char *name, int heads) {
  ValueMap map;
  Func *c = classifier_func(m, f, s, name, heads, &map);
  /* A step whose classification has a block-wide reduction of its own (a
   * condition tile: document ids) is expensive: a block takes CHUNK steps.
   * Where point reads decide (a block table; reductions only on undecided
   * pairs) a step is a few scalar ops: a block takes CHEAP_GROUPS groups of
   * CHUNK in a loop, or the blocks' launches cost more than the steps
   * (docs/perf-log.md P62). */
  int groups = CHEAP_GROUPS;
  for (int i = 0; i < sl->inner.n; i++)
    if (sl->inner.v[i]->kind == OP_REDUCE)
      groups = 1;
  int span = CHUNK * groups;
  attr_set_int(m, &c->attrs, "chunk", span);
  Nest n;
  build_nest(m, c, f, s, heads, &map, &n);
  Builder *hb = &n.hb;
  int tile = (int)attr_int(&f->attrs, s->cols ? "tile_q" : "tile_kv", 1);
  Value *steps = build_binary(hb, OP_CEILDIV, func_arg(c, s->cols ? "seqlen_q" : "seqlen_k"),
                              build_index(hb, tile));
  steps->name = "steps";
  Value *nc = build_binary(hb, OP_CEILDIV, steps, build_index(hb, span));
  nc->name = "nc";
  Value *rows = build_binary(hb, OP_MAX, build_binary(hb, OP_SUB, n.rhi, n.rlo), build_index(hb, 0));
  Op *li = build_for(hb, build_index(hb, 0), build_binary(hb, OP_MUL, rows, nc), true, NULL, 0, "i");
  Builder rb = builder_at_end(m, for_body(li));
  rb.loc = n.b.loc;
  Value *q = build_binary(&rb, OP_DIV, for_iv(li), nc);
  Value *r = build_binary(&rb, OP_ADD, n.rlo, q);
  r->name = "r";
  Value *chunk = build_binary(&rb, OP_SUB, for_iv(li), build_binary(&rb, OP_MUL, q, nc));
  chunk->name = "chunk";
  valuemap_put(m, &map, for_iv(s->par[2]), r);
  clone_outer(&rb, f, &sl->outer, &n.bops, &map);
  Value *lo = valuemap_get(&map, s->lo), *hi = valuemap_get(&map, s->hi);
  OpList inner = in_program_order(f, &sl->inner);
  ValueMap maps[CHUNK];
  Value *js[CHUNK];
  Value *start = build_binary(&rb, OP_MUL, chunk, build_index(&rb, span));
  /* a chunk outside the row's range (causal: past the diagonal) has
   * nothing to classify or write: the block leaves (a uniform branch) */
  Value *end = build_binary(&rb, OP_ADD, start, build_index(&rb, span));
  Value *meets = build_binary(&rb, OP_AND, build_cmp(&rb, "lt", start, hi),
                              build_cmp(&rb, "gt", end, lo));
  meets->name = "meets_range";
  Op *in = build_if(&rb, meets, NULL, 0);
  Builder eb = builder_at_end(m, in->regions[1]);
  build_yield(&eb, NULL, 0);
  Builder ob = builder_at_end(m, in->regions[0]);
  ob.loc = rb.loc;
  Builder tb = ob;
  Value *first = start;
  if (groups > 1) { /* the chunk's groups of CHUNK steps, one after another */
    Op *gl = build_for(&ob, build_index(&ob, 0), build_index(&ob, groups), false, NULL, 0, "g");
    tb = builder_at_end(m, for_body(gl));
    tb.loc = rb.loc;
    first = build_binary(&tb, OP_ADD, start,
                         build_binary(&tb, OP_MUL, for_iv(gl), build_index(&tb, CHUNK)));
  }
  classify_steps(m, &tb, s, &inner, &map, first, js, maps);
  oplist_free(&inner);
  Value *one = build_index(&tb, 1), *zero = build_index(&tb, 0), *two = build_index(&tb, 2);
  Value *none = build_index(&tb, -1);
  Value *list = func_arg(c, "blk_list");
  for (int k = 0; k < CHUNK; k++) {
    Value *empty = valuemap_get(&maps[k], s->skip->operands[0]);
    Value *full = s->split ? valuemap_get(&maps[k], s->split->operands[0])
                           : build_const(&tb, type_scalar(ELEM_I1), 0);
    Value *in_range = build_binary(&tb, OP_AND, build_cmp(&tb, "ge", js[k], lo),
                                   build_cmp(&tb, "lt", js[k], hi));
    Value *kept = build_binary(&tb, OP_AND, in_range, build_unary(&tb, OP_NOT, empty));
    Value *entry = build_binary(&tb, OP_ADD, build_binary(&tb, OP_MUL, js[k], two),
                                build_select(&tb, full, one, zero));
    Value *pos = build_binary(&tb, OP_MIN, js[k], steps);
    build_op(&tb, OP_SCATTER,
             (Value *[]){list, for_iv(n.lb), n.hl, r, pos, build_select(&tb, kept, entry, none)},
             6, NULL, 0, 0);
  }
  if (groups > 1)
    build_yield(&tb, NULL, 0);
  build_yield(&ob, NULL, 0);
  build_yield(&rb, NULL, 0);
  end_nest(m, c, &n);
}

/* Phase 2, @name (the compaction kernel, attribute classes = the classes
 * kernel): one block per (batch, list head, row tile); it compacts the
 * row's entries [lo, hi) (phase 1's) in place: COMPACT steps an iteration,
 * every entry of the group read (an index past hi reads entry hi - 1:
 * written, never used) before any is written, then branch-free appends (the
 * entry written at the count, the count advanced where it is in range and
 * >= 0). The count never passes the position being read (cnt <= j - lo),
 * so an entry is read before anything overwrites it. Then the count and the
 * sentinel 2 * hi at position count. The scatters are thread 0's, so one
 * warp does. */
static void build_compaction(Module *m, Func *f, Site *s, const char *name, const char *classes,
                             int heads) {
  ValueMap map;
  Func *c = classifier_func(m, f, s, name, heads, &map);
  attr_set_str(m, &c->attrs, "classes", classes);
  attr_set_int(m, &c->attrs, "warps", 1);
  Nest n;
  build_nest(m, c, f, s, heads, &map, &n);
  Op *lr = build_for(&n.hb, n.rlo, n.rhi, true, NULL, 0, "r");
  Builder rb = builder_at_end(m, for_body(lr));
  rb.loc = n.b.loc;
  valuemap_put(m, &map, for_iv(s->par[2]), for_iv(lr));
  Slice range = {.s = s, .ok = true};
  need_value(&range, s->lo, 0);
  need_value(&range, s->hi, 0);
  clone_outer(&rb, f, &range.outer, &n.bops, &map);
  oplist_free(&range.outer);
  oplist_free(&range.inner);
  Value *lo = valuemap_get(&map, s->lo), *hi = valuemap_get(&map, s->hi);
  Value *zero = build_index(&rb, 0);
  Value *iters = build_binary(&rb, OP_CEILDIV, build_binary(&rb, OP_SUB, hi, lo),
                              build_index(&rb, COMPACT));
  Op *st = build_for(&rb, zero, build_binary(&rb, OP_MAX, iters, zero), false, &zero, 1, "u");
  Builder sb = builder_at_end(m, for_body(st));
  sb.loc = n.b.loc;
  Value *list = func_arg(c, "blk_list"), *bi = for_iv(n.lb), *ri = for_iv(lr);
  Value *first = build_binary(&sb, OP_ADD, lo, build_binary(&sb, OP_MUL, for_iv(st),
                                                              build_index(&sb, COMPACT)));
  Value *last = build_binary(&sb, OP_SUB, hi, build_index(&sb, 1));
  Value *js[COMPACT], *es[COMPACT];
  for (int k = 0; k < COMPACT; k++) {
    js[k] = k ? build_binary(&sb, OP_ADD, first, build_index(&sb, k)) : first;
    es[k] = build_gather(&sb, list, (Value *[]){bi, n.hl, ri, build_binary(&sb, OP_MIN, js[k], last)}, 4);
  }
  Value *one = build_index(&sb, 1), *z = build_index(&sb, 0);
  Value *cnt = for_iter_arg(st, 0);
  for (int k = 0; k < COMPACT; k++) {
    Value *keep = build_binary(&sb, OP_AND, build_cmp(&sb, "lt", js[k], hi),
                               build_cmp(&sb, "ge", es[k], z));
    build_op(&sb, OP_SCATTER, (Value *[]){list, bi, n.hl, ri, cnt, es[k]}, 6, NULL, 0, 0);
    cnt = build_binary(&sb, OP_ADD, cnt, build_select(&sb, keep, one, z));
  }
  build_yield(&sb, &cnt, 1);
  Value *n_kept = st->results[0];
  n_kept->name = "n_kept";
  build_op(&rb, OP_SCATTER, (Value *[]){func_arg(c, "blk_count"), bi, n.hl, ri, n_kept}, 5, NULL,
           0, 0);
  build_op(&rb, OP_SCATTER,
           (Value *[]){list, bi, n.hl, ri, n_kept, build_binary(&rb, OP_MUL, hi, build_index(&rb, 2))},
           6, NULL, 0, 0);
  build_yield(&rb, NULL, 0);
  end_nest(m, c, &n);
}

/* -------------------------------------------------- the list-driven loop */

/* Replaces the if `op` by its else region's ops (its results by what that
 * region yields). */
static void inline_else(Op *op) {
  Block *eb = op->regions[1];
  Op *y = block_terminator(eb);
  for (Op *o = eb->first; o && o != y;) {
    Op *next = o->next;
    op_move_before(o, op);
    o = next;
  }
  for (int i = 0; i < op->nresults; i++)
    value_replace_all_uses(op->results[i], y->operands[i]);
  op_erase(y);
  op_erase(op);
}

/* Is op (transitively) in block blk? */
static bool in_block(const Op *op, const Block *blk) {
  for (const Block *b = op->parent; b; b = b->parent_op ? b->parent_op->parent : NULL)
    if (b == blk)
      return true;
  return false;
}

/* Moves the pure ops before `split` that only its else region uses (the
 * mask's own condition) into that region: full steps skip them. */
static void sink_into_partial(Op *split) {
  Block *eb = split->regions[1];
  for (Op *o = split->prev; o;) {
    Op *prev = o->prev;
    bool only = op_is_pure(o) && o->nresults > 0;
    for (int r = 0; r < o->nresults && only; r++)
      for (int u = 0; u < o->results[r]->nuses && only; u++)
        only = in_block(o->results[r]->uses[u].user, eb);
    if (only)
      op_move_before(o, eb->first);
    o = prev;
  }
}

static void use_lists(Module *m, Func *f, Site *s, int heads) {
  Value *list = block_add_arg(m, f->body, list_type(heads), "blk_list");
  Value *count = block_add_arg(m, f->body, count_type(heads), "blk_count");
  Op *loop = s->loop;
  Builder b = builder_before(m, loop);
  b.loc = loop->loc;
  Value *hl = heads > 1 ? s->head : build_index(&b, 0);
  Value *bi = for_iv(s->par[0]), *ri = for_iv(s->par[2]);
  Value *cnt = build_gather(&b, count, (Value *[]){bi, hl, ri}, 3);
  cnt->name = "n_blocks";
  op_set_operand(loop, 0, build_index(&b, 0));
  op_set_operand(loop, 1, cnt);
  Block *body = for_body(loop);
  Value *iv = for_iv(loop);
  Builder ib = builder_before(m, body->first);
  ib.loc = loop->loc;
  Value *entry = build_gather(&ib, list, (Value *[]){bi, hl, ri, iv}, 4);
  entry->name = "entry";
  Value *two = build_index(&ib, 2);
  Value *step = build_binary(&ib, OP_DIV, entry, two);
  step->name = "step";
  Value *full = build_cmp(&ib, "ne", build_binary(&ib, OP_SUB, entry, build_binary(&ib, OP_MUL, step, two)),
                          build_index(&ib, 0));
  full->name = "full_listed";
  Op *keep[1] = {entry->def};
  replace_uses_except(iv, step, keep, 1);
  iv->name = "t";
  if (s->split) {
    op_set_operand(s->split, 0, full);
    attr_remove(&s->split->attrs, "classified");
  }
  inline_else(s->skip);
  if (s->split)
    sink_into_partial(s->split);
}

int pass_block_lists(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  Site s = {0};
  if (!is_kernel_with_mask(f) || !find_site(f, &s))
    return 0;
  Slice sl = {.s = &s, .ok = true};
  need_value(&sl, s.skip->operands[0], 0);
  if (s.split)
    need_value(&sl, s.split->operands[0], 0);
  need_value(&sl, s.lo, 0);
  need_value(&sl, s.hi, 0);
  if (!sl.ok) {
    oplist_free(&sl.outer);
    oplist_free(&sl.inner);
    return 0;
  }
  int heads = sl.reads_head ? (int)attr_int(&f->attrs, "heads", 1) : 1;
  char name[256];
  classifier_name(f, &s, name, sizeof name);
  if (!find_func(m, name)) {
    char classes[300];
    snprintf(classes, sizeof classes, "%s_classes", name);
    build_classes(m, f, &s, &sl, classes, heads);
    build_compaction(m, f, &s, name, classes, heads);
  }
  oplist_free(&sl.outer);
  oplist_free(&sl.inner);
  use_lists(m, f, &s, heads);
  attr_set_str(m, &f->attrs, "block_list", name);
  attr_set_word(m, &f->attrs, "blocks", s.cols ? "cols" : "rows"); /* the lists' shape */
  dce_func(f);
  cse_block(f->body);
  return 0;
}
