/* interp_kernel.c - preparing and running one kernel (interp.h).
 *
 * Preparation numbers every value (Value.id) and op (Op.id) of the kernel and
 * decodes each op's attributes once into a side table, so that executing an
 * op never searches lists; then the arguments are bound: tensors by name
 * (their dims checked against the kernel's, workspaces allocated), scalars
 * from the sizes, dropout's launch arguments or bound run-time inputs.
 */
#include "ir/interp_internal.h"
#include "ir/dropout.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ preparation */

typedef struct Counter {
  Interp *I;
  int nvals, nops;
} Counter;

static void number_op(Op *op, void *ctx) {
  Counter *c = ctx;
  op->id = c->nops++;
  for (int i = 0; i < op->nresults; i++)
    op->results[i]->id = c->nvals++;
  for (int r = 0; r < op->nregions; r++)
    for (int a = 0; a < op->regions[r]->nargs; a++)
      op->regions[r]->args[a]->id = c->nvals++;
}

static int pred_code(const char *s) {
  static const char *const names[] = {"lt", "le", "gt", "ge", "eq", "ne", "hlt"};
  for (int i = 0; i < 7; i++)
    if (s && strcmp(s, names[i]) == 0)
      return i;
  return -1;
}

static void decode_op(Op *op, void *ctx) {
  Interp *I = ctx;
  OpInfo *in = &I->info[op->id];
  switch (op->kind) {
  case OP_CMP:
    in->pred = pred_code(attr_str(&op->attrs, "pred", NULL));
    if (in->pred < 0)
      interp_fail(I, op, "missing or unknown pred");
    break;
  case OP_IOTA:
    in->axis = (int)attr_int(&op->attrs, "axis", -1);
    if (in->axis != 0 && in->axis != 1)
      interp_fail(I, op, "axis must be 0 or 1");
    break;
  case OP_CONST:
  case OP_FULL:
    if (!attr_get(&op->attrs, "value"))
      interp_fail(I, op, "missing value");
    in->value = attr_float(&op->attrs, "value", 0);
    break;
  case OP_MATMUL:
    in->transpose_a = attr_int(&op->attrs, "transpose_a", 0) != 0;
    in->transpose_b = attr_int(&op->attrs, "transpose_b", 0) != 0;
    in->b_col0 = (int)attr_int(&op->attrs, "b_col0", 0);
    break;
  case OP_STORE:
    in->col0 = (int)attr_int(&op->attrs, "col0", 0);
    in->reduce_add = attr_get(&op->attrs, "reduce") != NULL;
    if (in->reduce_add && strcmp(attr_str(&op->attrs, "reduce", ""), "add") != 0)
      interp_fail(I, op, "reduce must be add");
    /* fall through */
  case OP_LOAD:
    in->pack = (int)attr_int(&op->attrs, "pack", 0);
    if (attr_get(&op->attrs, "pack") && in->pack < 1)
      interp_fail(I, op, "pack must be >= 1");
    break;
  case OP_LOAD_PAGED:
    in->page_size = (int)attr_int(&op->attrs, "page_size", 0);
    if (in->page_size < 1)
      interp_fail(I, op, "missing or bad page_size");
    break;
  case OP_REDUCE: {
    static const char *const kinds[] = {"max", "min", "sum"};
    const char *k = attr_str(&op->attrs, "kind", "");
    in->reduce = -1;
    for (int i = 0; i < 3; i++)
      if (strcmp(k, kinds[i]) == 0)
        in->reduce = i;
    if (in->reduce < 0)
      interp_fail(I, op, "kind must be max, min or sum");
    break;
  }
  case OP_TILE_SIZE: {
    const char *d = attr_str(&op->attrs, "dim", "");
    in->dim_kv = strcmp(d, "kv") == 0;
    if (!in->dim_kv && strcmp(d, "q") != 0)
      interp_fail(I, op, "dim must be q or kv");
    break;
  }
  default:
    break;
  }
}

bool interp_find_binding(const InterpBinding *b, int n, const char *name, int *at) {
  for (int i = 0; i < n; i++)
    if (b[i].name && strcmp(b[i].name, name) == 0) {
      *at = i;
      return true;
    }
  return false;
}

static bool is_workspace(const char *name) {
  static const char *const ws[] = {"o_acc", "m_buf", "l_buf", "o_part", "lse_part"};
  for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
    if (strcmp(name, ws[i]) == 0)
      return true;
  return false;
}

/* Binds (or allocates) the tensor of argument a; checks its dims. */
static void bind_tensor(Interp *I, const Value *a, const InterpBinding *bs, int nb) {
  Tensor *t = &I->tens[a->arg_index];
  const char *name = a->name ? a->name : "?";
  t->rank = a->type.rank;
  t->elem = a->type.elem;
  int64_t want[4] = {0};
  for (int d = 0; d < t->rank; d++)
    want[d] = interp_resolve_dim(I, a->type.dims[d]);
  int at;
  if (interp_find_binding(bs, nb, name, &at)) {
    for (int d = 0; d < t->rank; d++) {
      if (bs[at].dims[d] != want[d]) {
        interp_fail(I, NULL, "tensor %%%s: dim %d is %lld, the kernel expects %lld", name, d,
             (long long)bs[at].dims[d], (long long)want[d]);
        return;
      }
      t->dims[d] = want[d];
      t->strides[d] = bs[at].strides[d];
    }
    t->data = bs[at].data;
    if (!t->data)
      interp_fail(I, NULL, "tensor %%%s: no data", name);
    return;
  }
  if (!is_workspace(name)) {
    interp_fail(I, NULL, "tensor %%%s is not bound", name);
    return;
  }
  size_t n = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    t->dims[d] = want[d];
    t->strides[d] = (int64_t)n;
    n *= (size_t)(want[d] > 0 ? want[d] : 1);
  }
  t->data = malloc(n * sizeof(double));
  t->owned = true;
  if (!t->data) {
    interp_fail(I, NULL, "out of memory");
    return;
  }
  for (size_t i = 0; i < n; i++)
    t->data[i] = NAN; /* poison: the program must write before it reads */
}

/* Dropout's launch arguments (InterpSizes) by name, for a kernel of either
 * keep decision (torch: attribute dropout_mask = torch, docs/dropout.md). */
static bool dropout_arg(const InterpSizes *sz, bool torch, const char *name, double *x) {
  static const char *const words[4] = {"seed_lo", "seed_hi", "offset_lo", "offset_hi"};
  uint64_t v[4] = {sz->seed, sz->seed >> 32, sz->offset, sz->offset >> 32};
  for (int i = 0; i < 4; i++)
    if (strcmp(name, words[i]) == 0) {
      *x = (double)(uint32_t)v[i];
      return true;
    }
  if (strcmp(name, "keep_threshold") == 0) {
    *x = dropout_launch_threshold(sz->dropout_p, torch);
    return true;
  }
  if (strcmp(name, "keep_scale") == 0) {
    *x = dropout_launch_scale(sz->dropout_p, torch);
    return true;
  }
  return false;
}

static void bind_args(Interp *I, const InterpBinding *bs, int nb) {
  const Func *f = I->f;
  double x;
  int at;
  for (int i = 0; i < f->nargs && !I->failed; i++) {
    const Value *a = f->args[i];
    const char *name = a->name ? a->name : "";
    if (a->type.kind == TYPE_TENSOR) {
      bind_tensor(I, a, bs, nb);
    } else if (a->type.kind == TYPE_SCALAR) {
      if (strcmp(name, "batch") == 0)
        interp_set_scalar(interp_val(I, a), (double)I->batch);
      else if (strcmp(name, "seqlen_q") == 0 || strcmp(name, "q_len") == 0)
        interp_set_scalar(interp_val(I, a), (double)I->sq);
      else if (strcmp(name, "seqlen_k") == 0 || strcmp(name, "capacity") == 0)
        interp_set_scalar(interp_val(I, a), (double)I->sk);
      else if (strcmp(name, "nsplit") == 0)
        interp_set_scalar(interp_val(I, a), (double)I->sz.nsplit);
      else if (strcmp(name, "max_pages") == 0)
        interp_set_scalar(interp_val(I, a), (double)I->sz.max_pages);
      else if (strcmp(name, "nctas") == 0)
        interp_set_scalar(interp_val(I, a), (double)(I->sz.nctas > 0 ? I->sz.nctas : 3));
      else if (dropout_arg(&I->sz, strcmp(attr_str(&f->attrs, "dropout_mask", ""), "torch") == 0,
                           name, &x))
        interp_set_scalar(interp_val(I, a), x);
      else if (interp_find_binding(bs, nb, name, &at) && bs[at].data) /* a run-time input */
        interp_set_scalar(interp_val(I, a), bs[at].data[0]);
      else
        interp_fail(I, NULL,
             "scalar argument %%%s has no value (only batch, seqlen_q/q_len, seqlen_k/capacity, "
             "nsplit, max_pages, nctas, dropout's seed_lo .. keep_scale, bound run-time inputs)",
             name);
    } else {
      interp_fail(I, NULL, "argument %%%s has an unsupported type", name);
    }
  }
}

/* ------------------------------------------------------------------ entry */

bool interp_alloc_arg(const Func *f, const Value *a, const InterpSizes *sz, InterpBinding *out) {
  InterpOptions o;
  interp_options_init(&o);
  Func none = {0};
  Interp I = {.f = f ? f : &none, .o = &o, .sz = *sz, .batch = sz->batch, .sq = sz->seqlen_q,
              .sk = sz->seqlen_k};
  size_t n = 1;
  memset(out, 0, sizeof *out);
  out->name = a->name;
  for (int d = a->type.rank - 1; d >= 0; d--) {
    int64_t e = interp_resolve_dim(&I, a->type.dims[d]);
    out->dims[d] = e;
    out->strides[d] = (int64_t)n;
    n *= (size_t)(e > 0 ? e : 1);
  }
  out->data = malloc(n * sizeof(double));
  if (!out->data)
    return false;
  for (size_t i = 0; i < n; i++)
    out->data[i] = NAN;
  return true;
}

int interp_run_sizes(const Func *f, const InterpBinding *tensors, int ntensors,
                     const InterpSizes *sz, const InterpOptions *o, char *err, size_t errlen) {
  InterpOptions dflt;
  if (!o) {
    interp_options_init(&dflt);
    o = &dflt;
  }
  Interp I = {.f = f, .o = o, .err = err, .errlen = errlen};
  if (err && errlen)
    err[0] = 0;
  if (!f || !f->body || !sz) {
    interp_fail(&I, NULL, "no kernel");
    return -1;
  }
  if (attr_get(&f->attrs, "block_list") && !interp_find_binding(tensors, ntensors, "blk_list", &(int){0}))
    return interp_run_with_lists(f, tensors, ntensors, sz, o, err, errlen);
  I.sz = *sz;
  I.batch = sz->batch, I.sq = sz->seqlen_q, I.sk = sz->seqlen_k;
  if (o->br <= 0 || o->bc <= 0 || sz->batch < 0 || sz->seqlen_q < 0 || sz->seqlen_k < 0 ||
      sz->nsplit < 0 || sz->num_pages < 0 || sz->max_pages < 0) {
    interp_fail(&I, NULL, "bad options or sizes");
    return -1;
  }
  /* Number the arguments first, then every op result and region argument. */
  Counter cnt = {&I, 0, 0};
  for (int i = 0; i < f->nargs; i++)
    f->args[i]->id = cnt.nvals++;
  func_walk((Func *)f, number_op, &cnt);
  I.nvals = cnt.nvals;
  I.nops = cnt.nops;
  I.vals = calloc((size_t)I.nvals + 1, sizeof(RtVal));
  I.info = calloc((size_t)I.nops + 1, sizeof(OpInfo));
  I.tens = calloc((size_t)f->nargs + 1, sizeof(Tensor));
  if (!I.vals || !I.info || !I.tens)
    interp_fail(&I, NULL, "out of memory");
  if (!I.failed)
    func_walk((Func *)f, decode_op, &I);
  if (!I.failed)
    bind_args(&I, tensors, ntensors);
  if (!I.failed)
    interp_exec_block(&I, f->body);
  for (int i = 0; I.vals && i < I.nvals; i++) {
    free(I.vals[i].t);
    interp_free_ring(I.vals[i].ring);
  }
  for (int i = 0; I.gder && i < I.nvals; i++)
    free(I.gder[i].t);
  free(I.gder);
  free(I.gflags);
  for (int i = 0; I.tens && i < f->nargs; i++)
    if (I.tens[i].owned)
      free(I.tens[i].data);
  free(I.vals);
  free(I.info);
  free(I.tens);
  return I.failed ? -1 : 0;
}

int interp_run(const Func *f, const InterpBinding *tensors, int ntensors, int64_t batch,
               int64_t seqlen_q, int64_t seqlen_k, const InterpOptions *o, char *err,
               size_t errlen) {
  InterpSizes sz = {.batch = batch, .seqlen_q = seqlen_q, .seqlen_k = seqlen_k, .nsplit = 1};
  return interp_run_sizes(f, tensors, ntensors, &sz, o, err, errlen);
}
