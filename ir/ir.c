/* ir.c - the tile IR's data structures: types, attributes, values with use
 * lists, ops in blocks, build_op and the mutation primitives passes use
 * (the typed builders on top of build_op: builder.c). */
#include "ir/ir.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"

Module *module_create(void) {
  Module *m = calloc(1, sizeof(Module));
  struct Arena *a = calloc(1, sizeof(struct Arena));
  if (!m || !a) {
    fprintf(stderr, "flashc: out of memory\n");
    abort();
  }
  m->arena = a;
  return m;
}

void module_destroy(Module *m) {
  if (!m)
    return;
  arena_free(m->arena);
  free(m->arena);
  free(m);
}

void *module_alloc(Module *m, size_t size) { return arena_alloc(m->arena, size); }

const char *module_strdup(Module *m, const char *s) {
  if (!s)
    return NULL;
  size_t n = strlen(s) + 1;
  char *p = module_alloc(m, n);
  memcpy(p, s, n);
  return p;
}

/* Grows an arena array of `elem` bytes from *cap to at least need. */
static void *grow(Module *m, void *old, int n, int *cap, int need, size_t elem) {
  if (need <= *cap)
    return old;
  int ncap = *cap ? *cap * 2 : 4;
  while (ncap < need)
    ncap *= 2;
  void *p = module_alloc(m, (size_t)ncap * elem);
  if (old && n)
    memcpy(p, old, (size_t)n * elem);
  *cap = ncap;
  return p;
}

/* ---------------------------------------------------------------- types */

Type type_none(void) { return (Type){.kind = TYPE_NONE}; }
Type type_scalar(ElemType e) { return (Type){.kind = TYPE_SCALAR, .elem = e}; }
Type type_index(void) { return type_scalar(ELEM_INDEX); }

Type type_tile(ElemType e, int rows, int cols, Dist d) {
  return (Type){.kind = TYPE_TILE, .elem = e, .rows = rows, .cols = cols, .dist = d};
}

Type type_tensor(ElemType e, int rank, const int *dims) {
  Type t = {.kind = TYPE_TENSOR, .elem = e, .rank = rank};
  for (int i = 0; i < rank && i < 4; i++)
    t.dims[i] = dims[i];
  return t;
}

Type type_ring(Type tile) {
  return (Type){.kind = TYPE_RING, .elem = tile.elem, .rows = tile.rows, .cols = tile.cols};
}

Type ring_tile_type(Type ring) { return type_tile(ring.elem, ring.rows, ring.cols, DIST_NONE); }

bool type_eq(Type a, Type b) {
  if (a.kind != b.kind || a.elem != b.elem)
    return false;
  switch (a.kind) {
  case TYPE_TILE:
  case TYPE_RING:
    return a.rows == b.rows && a.cols == b.cols && a.dist == b.dist;
  case TYPE_TENSOR:
    if (a.rank != b.rank)
      return false;
    for (int i = 0; i < a.rank; i++)
      if (a.dims[i] != b.dims[i])
        return false;
    return true;
  default:
    return true;
  }
}

bool type_is_float(Type t) {
  return (t.kind == TYPE_SCALAR || t.kind == TYPE_TILE) &&
         (t.elem == ELEM_F16 || t.elem == ELEM_BF16 || t.elem == ELEM_F32);
}

const char *elem_name(ElemType e) {
  switch (e) {
  case ELEM_I1: return "i1";
  case ELEM_INDEX: return "index";
  case ELEM_F16: return "f16";
  case ELEM_BF16: return "bf16";
  case ELEM_F32: return "f32";
  case ELEM_I32: return "i32";
  case ELEM_U32: return "u32";
  default: return "none";
  }
}

const char *dist_name(Dist d) {
  switch (d) {
  case DIST_ROWS: return "rows";
  case DIST_COLS: return "cols";
  case DIST_PARTIAL: return "partial";
  case DIST_WARP: return "warp";
  case DIST_GROUP_COLS: return "group_cols";
  default: return "none";
  }
}

static int dim_str(char *buf, int len, int d) {
  switch (d) {
  case DIM_BR: return snprintf(buf, len, "Br");
  case DIM_BC: return snprintf(buf, len, "Bc");
  case DIM_BATCH: return snprintf(buf, len, "batch");
  case DIM_SEQLEN_Q: return snprintf(buf, len, "seqlen_q");
  case DIM_SEQLEN_K: return snprintf(buf, len, "seqlen_k");
  case DIM_Q_LEN: return snprintf(buf, len, "q_len");
  case DIM_CAPACITY: return snprintf(buf, len, "capacity");
  case DIM_NUM_PAGES: return snprintf(buf, len, "num_pages");
  case DIM_MAX_PAGES: return snprintf(buf, len, "max_pages");
  case DIM_BATCH_NSPLIT: return snprintf(buf, len, "batch_nsplit");
  case DIM_ROW_TILES: return snprintf(buf, len, "row_tiles");
  case DIM_LIST_LEN: return snprintf(buf, len, "list_len");
  default: return snprintf(buf, len, "%d", d);
  }
}

const char *type_str(Type t, char *buf, int len) {
  char a[16], b[16];
  switch (t.kind) {
  case TYPE_SCALAR:
    snprintf(buf, len, "%s", elem_name(t.elem));
    break;
  case TYPE_TILE:
    dim_str(a, sizeof a, t.rows);
    dim_str(b, sizeof b, t.cols);
    if (t.dist == DIST_NONE)
      snprintf(buf, len, "tile<%sx%sx%s>", a, b, elem_name(t.elem));
    else
      snprintf(buf, len, "tile<%sx%sx%s, %s>", a, b, elem_name(t.elem), dist_name(t.dist));
    break;
  case TYPE_RING:
    dim_str(a, sizeof a, t.rows);
    dim_str(b, sizeof b, t.cols);
    snprintf(buf, len, "ring<tile<%sx%sx%s>>", a, b, elem_name(t.elem));
    break;
  case TYPE_TENSOR: {
    int n = snprintf(buf, len, "tensor<%s, [", elem_name(t.elem));
    for (int i = 0; i < t.rank && n < len; i++) {
      char d[16];
      dim_str(d, sizeof d, t.dims[i]);
      n += snprintf(buf + n, len - n, "%s%s", i ? ", " : "", d);
    }
    if (n < len)
      snprintf(buf + n, len - n, "]>");
    break;
  }
  default:
    snprintf(buf, len, "none");
  }
  return buf;
}

/* ------------------------------------------------------------------ ops */

static const char *const op_names[] = {
#define X(kind, name) name,
    FLASHC_OPS(X)
#undef X
};

const char *op_name(OpKind k) { return k < OP__COUNT ? op_names[k] : "<bad-op>"; }

OpKind op_by_name(const char *name) {
  for (int k = 0; k < OP__COUNT; k++)
    if (strcmp(op_names[k], name) == 0)
      return (OpKind)k;
  return OP__COUNT;
}

/* ----------------------------------------------------------- attributes */

static Attr *attr_slot(Module *m, AttrList *a, const char *key) {
  for (int i = 0; i < a->n; i++)
    if (strcmp(a->v[i].key, key) == 0)
      return &a->v[i];
  a->v = grow(m, a->v, a->n, &a->cap, a->n + 1, sizeof(Attr));
  Attr *s = &a->v[a->n++];
  memset(s, 0, sizeof *s);
  s->key = module_strdup(m, key);
  return s;
}

void attr_set_int(Module *m, AttrList *a, const char *key, int64_t v) {
  Attr *s = attr_slot(m, a, key);
  s->kind = ATTR_INT;
  s->i = v;
}

void attr_set_float(Module *m, AttrList *a, const char *key, double v) {
  Attr *s = attr_slot(m, a, key);
  s->kind = ATTR_FLOAT;
  s->f = v;
}

void attr_set_str(Module *m, AttrList *a, const char *key, const char *v) {
  Attr *s = attr_slot(m, a, key);
  s->kind = ATTR_STR;
  s->s = module_strdup(m, v);
}

void attr_set_word(Module *m, AttrList *a, const char *key, const char *v) {
  Attr *s = attr_slot(m, a, key);
  s->kind = ATTR_WORD;
  s->s = module_strdup(m, v);
}

void attrs_copy(Module *m, AttrList *dst, const AttrList *src) {
  for (int i = 0; i < src->n; i++) {
    const Attr *a = &src->v[i];
    switch (a->kind) {
    case ATTR_INT: attr_set_int(m, dst, a->key, a->i); break;
    case ATTR_FLOAT: attr_set_float(m, dst, a->key, a->f); break;
    case ATTR_STR: attr_set_str(m, dst, a->key, a->s); break;
    case ATTR_WORD: attr_set_word(m, dst, a->key, a->s); break;
    }
  }
}

const Attr *attr_get(const AttrList *a, const char *key) {
  for (int i = 0; i < a->n; i++)
    if (strcmp(a->v[i].key, key) == 0)
      return &a->v[i];
  return NULL;
}

int64_t attr_int(const AttrList *a, const char *key, int64_t dflt) {
  const Attr *x = attr_get(a, key);
  return x && x->kind == ATTR_INT ? x->i : dflt;
}

double attr_float(const AttrList *a, const char *key, double dflt) {
  const Attr *x = attr_get(a, key);
  if (!x)
    return dflt;
  if (x->kind == ATTR_FLOAT)
    return x->f;
  if (x->kind == ATTR_INT)
    return (double)x->i;
  return dflt;
}

const char *attr_str(const AttrList *a, const char *key, const char *dflt) {
  const Attr *x = attr_get(a, key);
  return x && (x->kind == ATTR_STR || x->kind == ATTR_WORD) ? x->s : dflt;
}

void attr_remove(AttrList *a, const char *key) {
  for (int i = 0; i < a->n; i++)
    if (strcmp(a->v[i].key, key) == 0) {
      memmove(&a->v[i], &a->v[i + 1], (size_t)(a->n - i - 1) * sizeof(Attr));
      a->n--;
      return;
    }
}

/* --------------------------------------------------------- values, uses */

static Module *op_module(Op *op);

static Value *value_new(Module *m, Type t) {
  Value *v = module_alloc(m, sizeof(Value));
  v->type = t;
  return v;
}

static void use_add(Module *m, Value *v, Op *user, int index) {
  v->uses = grow(m, v->uses, v->nuses, &v->capuses, v->nuses + 1, sizeof(Use));
  v->uses[v->nuses++] = (Use){user, index};
}

static void use_remove(Value *v, Op *user, int index) {
  for (int i = 0; i < v->nuses; i++)
    if (v->uses[i].user == user && v->uses[i].index == index) {
      v->uses[i] = v->uses[--v->nuses];
      return;
    }
  assert(!"use not found");
}

/* Renumbers the uses of op's operands from index `from` on after an operand
 * was inserted or removed. */
static void reindex_uses(Op *op, int from, int delta) {
  for (int i = from; i < op->noperands; i++) {
    Value *v = op->operands[i];
    for (int u = 0; u < v->nuses; u++)
      if (v->uses[u].user == op && v->uses[u].index == i - delta) {
        v->uses[u].index = i;
        break;
      }
  }
}

/* ------------------------------------------------------- funcs, blocks */

static Block *block_new(Module *m) { return module_alloc(m, sizeof(Block)); }

Value *block_add_arg(Module *m, Block *blk, Type t, const char *name) {
  int cap = blk->nargs; /* arrays are exact-size; reallocate each time */
  Value **args = module_alloc(m, sizeof(Value *) * (size_t)(cap + 1));
  if (blk->nargs)
    memcpy(args, blk->args, sizeof(Value *) * (size_t)blk->nargs);
  Value *v = value_new(m, t);
  v->block = blk;
  v->arg_index = blk->nargs;
  v->name = module_strdup(m, name);
  args[blk->nargs++] = v;
  blk->args = args;
  if (blk->parent_func && blk->parent_func->body == blk) {
    blk->parent_func->args = blk->args;
    blk->parent_func->nargs = blk->nargs;
  }
  return v;
}

void block_erase_arg(Block *blk, int i) {
  assert(blk->args[i]->nuses == 0);
  memmove(&blk->args[i], &blk->args[i + 1], sizeof(Value *) * (size_t)(blk->nargs - i - 1));
  blk->nargs--;
  for (int j = i; j < blk->nargs; j++)
    blk->args[j]->arg_index = j;
  if (blk->parent_func && blk->parent_func->body == blk)
    blk->parent_func->nargs = blk->nargs;
}

Func *func_create(Module *m, const char *name, const Type *arg_types,
                  const char *const *arg_names, int nargs, SrcLoc loc) {
  Func *f = module_alloc(m, sizeof(Func));
  f->name = module_strdup(m, name);
  f->loc = loc;
  f->module = m;
  f->body = block_new(m);
  f->body->parent_func = f;
  for (int i = 0; i < nargs; i++)
    block_add_arg(m, f->body, arg_types[i], arg_names ? arg_names[i] : NULL);
  f->args = f->body->args;
  f->nargs = f->body->nargs;
  Func **fs = module_alloc(m, sizeof(Func *) * (size_t)(m->nfuncs + 1));
  if (m->nfuncs)
    memcpy(fs, m->funcs, sizeof(Func *) * (size_t)m->nfuncs);
  fs[m->nfuncs++] = f;
  m->funcs = fs;
  return f;
}

bool value_const(const Value *v, double *out) {
  if (!v->def || (v->def->kind != OP_CONST && v->def->kind != OP_FULL))
    return false;
  const Attr *a = attr_get(&v->def->attrs, "value");
  if (!a)
    return false;
  if (a->kind == ATTR_INT)
    *out = (double)a->i;
  else if (a->kind == ATTR_FLOAT)
    *out = a->f;
  else
    return false;
  return true;
}

/* The attributes that name the kernel a companion travels with (ir.h). */
static const char *const kCompanionKeys[] = {"combine_of", "grad_of",      "dropout_of", "blocks_of",
                                             "gather_of",  "long_rows_of", "variant_of"};

const char *func_companion_of(const Func *f) {
  for (size_t i = 0; i < sizeof kCompanionKeys / sizeof kCompanionKeys[0]; i++) {
    const char *of = attr_str(&f->attrs, kCompanionKeys[i], NULL);
    if (of)
      return of;
  }
  return NULL;
}

int module_copy_index(const Module *m, const char *key, const char *name) {
  for (int i = 0; i < m->nfuncs; i++) {
    const char *of = attr_str(&m->funcs[i]->attrs, key, NULL);
    if (of && strcmp(of, name) == 0)
      return i;
  }
  return -1;
}

Func *func_clone(Module *m, Func *f, const char *name) {
  Type types[256];
  const char *names[256];
  assert(f->nargs <= 256);
  for (int i = 0; i < f->nargs; i++) {
    types[i] = f->args[i]->type;
    names[i] = f->args[i]->name;
  }
  Func *c = func_create(m, name, types, names, f->nargs, f->loc);
  attrs_copy(m, &c->attrs, &f->attrs);
  c->sched_loc = f->sched_loc;
  c->sched_name = f->sched_name;
  ValueMap map = {0};
  for (int i = 0; i < f->nargs; i++)
    valuemap_put(m, &map, f->args[i], c->args[i]);
  Builder b = builder_at_end(m, c->body);
  for (Op *o = f->body->first; o; o = o->next)
    op_clone(&b, o, &map);
  return c;
}

bool value_is_input_arg(const Value *v) {
  return v && !v->def && v->block && v->block->parent_func && v->name &&
         strncmp(v->name, "in_", 3) == 0;
}

bool op_is_tensor_map_load(const Op *ld) {
  if (ld && ld->kind == OP_LOAD && attr_int(&ld->attrs, "rect", 0) == 1)
    return value_is_input_arg(ld->operands[0]) && ld->operands[0]->type.rank >= 2 &&
           ld->noperands == 1 + ld->operands[0]->type.rank;
  if (!ld || ld->kind != OP_LOAD || ld->noperands != 4)
    return false;
  const Value *t = ld->operands[0];
  return !t->def && t->block && t->block->parent_func && t->name &&
         (strcmp(t->name, "q") == 0 || strcmp(t->name, "k") == 0 || strcmp(t->name, "v") == 0);
}

bool value_is_block_list_arg(const Value *v) {
  return v && !v->def && v->block && v->block->parent_func && v->name &&
         strncmp(v->name, "blk_", 4) == 0;
}

Value *func_arg(Func *f, const char *name) {
  for (int i = 0; i < f->nargs; i++)
    if (f->args[i]->name && strcmp(f->args[i]->name, name) == 0)
      return f->args[i];
  return NULL;
}

/* --------------------------------------------------------------- builder */

Builder builder_at_end(Module *m, Block *b) { return (Builder){m, b, NULL, {0}}; }

Builder builder_before(Module *m, Op *op) {
  return (Builder){m, op->parent, op, op->loc};
}

Builder builder_after(Module *m, Op *op) {
  return (Builder){m, op->parent, op->next, op->loc};
}

static void link_before(Op *op, Block *blk, Op *before) {
  op->parent = blk;
  if (!before) {
    op->prev = blk->last;
    op->next = NULL;
    if (blk->last)
      blk->last->next = op;
    else
      blk->first = op;
    blk->last = op;
  } else {
    op->next = before;
    op->prev = before->prev;
    if (before->prev)
      before->prev->next = op;
    else
      blk->first = op;
    before->prev = op;
  }
}

static void unlink_op(Op *op) {
  Block *blk = op->parent;
  if (!blk)
    return;
  if (op->prev)
    op->prev->next = op->next;
  else
    blk->first = op->next;
  if (op->next)
    op->next->prev = op->prev;
  else
    blk->last = op->prev;
  op->prev = op->next = NULL;
  op->parent = NULL;
}

Op *build_op(Builder *b, OpKind kind, Value *const *operands, int noperands,
             const Type *result_types, int nresults, int nregions) {
  Module *m = b->m;
  Op *op = module_alloc(m, sizeof(Op));
  op->kind = kind;
  op->module = m;
  op->loc = b->loc;
  op->noperands = noperands;
  op->operands = module_alloc(m, sizeof(Value *) * (size_t)(noperands ? noperands : 1));
  for (int i = 0; i < noperands; i++) {
    op->operands[i] = operands[i];
    use_add(m, operands[i], op, i);
  }
  op->nresults = nresults;
  op->results = module_alloc(m, sizeof(Value *) * (size_t)(nresults ? nresults : 1));
  for (int i = 0; i < nresults; i++) {
    Value *v = value_new(m, result_types[i]);
    v->def = op;
    v->result_index = i;
    op->results[i] = v;
  }
  op->nregions = nregions;
  for (int i = 0; i < nregions; i++) {
    op->regions[i] = block_new(m);
    op->regions[i]->parent_op = op;
  }
  link_before(op, b->block, b->before);
  return op;
}

/* -------------------------------------------------------------- mutation */

static Module *op_module(Op *op) { return op->module; }

void op_set_attr_int(Op *op, const char *key, int64_t v) {
  attr_set_int(op_module(op), &op->attrs, key, v);
}
void op_set_attr_float(Op *op, const char *key, double v) {
  attr_set_float(op_module(op), &op->attrs, key, v);
}
void op_set_attr_word(Op *op, const char *key, const char *v) {
  attr_set_word(op_module(op), &op->attrs, key, v);
}

void op_set_operand(Op *op, int i, Value *v) {
  Value *old = op->operands[i];
  if (old == v)
    return;
  use_remove(old, op, i);
  op->operands[i] = v;
  use_add(op_module(op), v, op, i);
}

void value_replace_all_uses(Value *from, Value *to) {
  if (from == to)
    return;
  while (from->nuses > 0) {
    Use u = from->uses[from->nuses - 1];
    op_set_operand(u.user, u.index, to);
  }
}

/* Drops the uses held by op and by every op nested in its regions. */
static void drop_operand_uses(Op *op) {
  for (int i = 0; i < op->noperands; i++)
    use_remove(op->operands[i], op, i);
  op->noperands = 0;
  for (int r = 0; r < op->nregions; r++)
    for (Op *o = op->regions[r]->first; o; o = o->next)
      drop_operand_uses(o);
}

void op_erase(Op *op) {
  drop_operand_uses(op);
  unlink_op(op);
}

void op_move_before(Op *op, Op *before) {
  /* Moving an op before itself is a no-op; unlinking first would lose the
   * block it is in (before->parent is op->parent). */
  if (op == before)
    return;
  unlink_op(op);
  link_before(op, before->parent, before);
}

void op_move_to_end(Op *op, Block *block) {
  unlink_op(op);
  Op *term = block_terminator(block);
  bool is_term = op->kind == OP_YIELD || op->kind == OP_RETURN;
  link_before(op, block, (!is_term && term) ? term : NULL);
}

void op_append_operand(Module *m, Op *op, Value *v) {
  Value **ops = module_alloc(m, sizeof(Value *) * (size_t)(op->noperands + 1));
  if (op->noperands)
    memcpy(ops, op->operands, sizeof(Value *) * (size_t)op->noperands);
  ops[op->noperands] = v;
  op->operands = ops;
  use_add(m, v, op, op->noperands);
  op->noperands++;
}

void op_erase_operand(Op *op, int i) {
  use_remove(op->operands[i], op, i);
  memmove(&op->operands[i], &op->operands[i + 1],
          sizeof(Value *) * (size_t)(op->noperands - i - 1));
  op->noperands--;
  reindex_uses(op, i, -1);
}

Value *op_append_result(Module *m, Op *op, Type t) {
  Value **rs = module_alloc(m, sizeof(Value *) * (size_t)(op->nresults + 1));
  if (op->nresults)
    memcpy(rs, op->results, sizeof(Value *) * (size_t)op->nresults);
  Value *v = value_new(m, t);
  v->def = op;
  v->result_index = op->nresults;
  rs[op->nresults++] = v;
  op->results = rs;
  return v;
}

void op_erase_result(Op *op, int i) {
  assert(op->results[i]->nuses == 0);
  memmove(&op->results[i], &op->results[i + 1],
          sizeof(Value *) * (size_t)(op->nresults - i - 1));
  op->nresults--;
  for (int j = i; j < op->nresults; j++)
    op->results[j]->result_index = j;
}

void valuemap_put(Module *m, ValueMap *vm, Value *from, Value *to) {
  for (int i = 0; i < vm->n; i++)
    if (vm->from[i] == from) {
      vm->to[i] = to;
      return;
    }
  int cap = vm->cap;
  vm->from = grow(m, vm->from, vm->n, &cap, vm->n + 1, sizeof(Value *));
  cap = vm->cap;
  vm->to = grow(m, vm->to, vm->n, &cap, vm->n + 1, sizeof(Value *));
  vm->cap = cap;
  vm->from[vm->n] = from;
  vm->to[vm->n] = to;
  vm->n++;
}

Value *valuemap_get(const ValueMap *vm, Value *v) {
  if (vm)
    for (int i = vm->n - 1; i >= 0; i--)
      if (vm->from[i] == v)
        return vm->to[i];
  return v;
}

Op *op_clone(Builder *b, Op *op, ValueMap *map) {
  Module *m = b->m;
  ValueMap local = {0};
  if (!map)
    map = &local;
  Value *ops[256];
  Type types[256];
  assert(op->noperands <= 256 && op->nresults <= 256);
  for (int i = 0; i < op->noperands; i++)
    ops[i] = valuemap_get(map, op->operands[i]);
  for (int i = 0; i < op->nresults; i++)
    types[i] = op->results[i]->type;
  Builder bb = *b;
  bb.loc = op->loc;
  Op *c = build_op(&bb, op->kind, ops, op->noperands, types, op->nresults, op->nregions);
  attrs_copy(m, &c->attrs, &op->attrs);
  for (int i = 0; i < op->nresults; i++) {
    c->results[i]->name = op->results[i]->name;
    valuemap_put(m, map, op->results[i], c->results[i]);
  }
  for (int r = 0; r < op->nregions; r++) {
    Block *src = op->regions[r], *dst = c->regions[r];
    for (int a = 0; a < src->nargs; a++) {
      Value *na = block_add_arg(m, dst, src->args[a]->type, src->args[a]->name);
      valuemap_put(m, map, src->args[a], na);
    }
    Builder inner = builder_at_end(m, dst);
    for (Op *o = src->first; o; o = o->next)
      op_clone(&inner, o, map);
  }
  return c;
}

/* ------------------------------------------------------------ inspection */

Op *block_terminator(Block *b) {
  if (b->last && (b->last->kind == OP_YIELD || b->last->kind == OP_RETURN))
    return b->last;
  return NULL;
}

Func *op_func(Op *op) {
  Block *b = op->parent;
  while (b) {
    if (b->parent_func)
      return b->parent_func;
    if (!b->parent_op)
      return NULL;
    b = b->parent_op->parent;
  }
  return NULL;
}

Op *op_ancestor_in(const Op *op, const Block *blk) {
  while (op && op->parent != blk)
    op = op->parent ? op->parent->parent_op : NULL;
  return (Op *)op;
}

bool op_is_inside(Op *op, Op *ancestor) {
  for (Block *b = op->parent; b; b = b->parent_op ? b->parent_op->parent : NULL) {
    if (b->parent_op == ancestor)
      return true;
    if (!b->parent_op)
      return false;
  }
  return false;
}

bool value_defined_outside(Value *v, Op *op) {
  if (v->def)
    return v->def != op && !op_is_inside(v->def, op);
  /* A block argument: outside when its block is not one of op's regions
   * or nested in them. */
  Block *b = v->block;
  for (int r = 0; r < op->nregions; r++)
    if (op->regions[r] == b)
      return false;
  if (b->parent_op && op_is_inside(b->parent_op, op))
    return false;
  return true;
}

void block_walk(Block *b, OpWalkFn fn, void *ctx) {
  for (Op *o = b->first; o;) {
    Op *next = o->next;
    fn(o, ctx);
    for (int r = 0; r < o->nregions; r++)
      block_walk(o->regions[r], fn, ctx);
    o = next;
  }
}

void func_walk(Func *f, OpWalkFn fn, void *ctx) { block_walk(f->body, fn, ctx); }
