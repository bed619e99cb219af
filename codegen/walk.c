/* walk.c - layer 3: the IR walker. One tile IR kernel to one gpu.func.
 *
 * The walk visits each op of the kernel in order and lowers it on its own
 * (no pattern over the whole kernel): scalar ops become one arith op, tile
 * ops go to the compute layer (compute.h), loads and stores to the kernel
 * kind (walk.h: LwKind), which makes the row map and calls the memory layer
 * (mem.h). Control flow:
 *   - `for ... parallel`: onto the grid as the kind's table says: one
 *     iteration per block (grid_block_for) or grid-stride loops
 *     (grid_stride_for);
 *   - `for ... sequential`: scf.for over i64 with the iter_args flattened to
 *     the per-thread SSA values of each tile;
 *   - `if`: scf.if, results flattened the same way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/walk.h"

/* ------------------------------------------------------------- values */

static int lw_flat_count(Lowerer *L, const CgVal *cv) {
  (void)L;
  switch (cv->kind) {
  case CV_SCALAR: return 1;
  case CV_TILE: return cv->ne;
  case CV_SMEM: return 1; /* its buffer's offset (a pipelined loop's carried tile) */
  case CV_RING: return 0; /* never carried (the verifier keeps rings out of loops' carries) */
  }
  return 0;
}

static void lw_flatten(Lowerer *L, const CgVal *cv, MlirValue *out) {
  (void)L;
  if (cv->kind == CV_SCALAR) {
    out[0] = cv->v;
    return;
  }
  if (cv->kind == CV_SMEM) {
    out[0] = mlirValueIsNull(cv->smem_dyn) ? cg_const_i32(&L->b, cv->smem_off) : cv->smem_dyn;
    return;
  }
  for (int i = 0; i < cv->ne; i++)
    out[i] = cv->splat ? cv->v : cv->e[i];
}

/* lanes > 0: a row vector held across the lanes, its lanes values (a
 * loop's carry of one, cg_lowerer.h CgVal.lanes). */
static CgVal *lw_unflatten(Lowerer *L, Type t, const MlirValue *in, int lanes) {
  if (t.kind == TYPE_SCALAR)
    return lw_scalar(L, t, in[0]);
  if (lw_is_staged_type(t)) {
    CgVal *s = lw_alloc(L, sizeof *s);
    s->kind = CV_SMEM;
    s->type = t;
    s->smem_off = -1;
    s->smem_dyn = in[0];
    lw_staged_layout(L, s, t);
    s->async_seq = -1;
    s->ring = -1;
    return s;
  }
  TileGeom g;
  if (!lw_geom(L, t, &g, NULL))
    return NULL;
  CgVal *cv = lw_tile(L, t, &g);
  if (lanes)
    cv->lanes = cv->ne = lanes;
  for (int i = 0; i < cv->ne; i++)
    cv->e[i] = in[i];
  return cv;
}

/* How many MLIR values an IR type flattens to (tile: its element count). */
static int type_flat_count(Lowerer *L, Type t, const Op *op) {
  if (t.kind == TYPE_SCALAR || lw_is_staged_type(t))
    return 1;
  TileGeom g;
  if (!lw_geom(L, t, &g, op))
    return -1;
  return lw_geom_count(&g);
}

/* -------------------------------------------------------- scalar ops */

static void lower_const(Lowerer *L, const Op *op) {
  Type t = op->results[0]->type;
  double v = attr_float(&op->attrs, "value", 0.0);
  MlirType mt = lw_elem_type(L, t.elem);
  MlirValue r;
  if (t.elem == ELEM_INDEX || t.elem == ELEM_I1 || t.elem == ELEM_U32)
    r = cg_const_int(&L->b, mt, (int64_t)v);
  else
    r = cg_const_float(&L->b, mt, v);
  lw_set(L, op->results[0], lw_scalar(L, t, r));
}

/* ------------------------------------------------------- control flow */

/* Flattens the operands of a yield into vals; returns their count. */
static int flatten_yield(Lowerer *L, const Op *y, MlirValue *vals, int cap) {
  int n = 0;
  for (int i = 0; y && i < y->noperands; i++) {
    CgVal *cv = lw_get(L, y->operands[i]);
    if (!cv) {
      lw_error(L, y, "operand %d has no lowered value", i);
      return 0;
    }
    int k = lw_flat_count(L, cv);
    if (n + k > cap) {
      lw_error(L, y, "too many values carried (%d)", n + k);
      return 0;
    }
    lw_flatten(L, cv, vals + n);
    n += k;
  }
  return n;
}

enum { MAX_CARRIED = 4096 };

/* Lowers `blk` into the MLIR block `into` and ends it with scf.yield of the
 * block's yield operands. Async copies issued inside are waited for before
 * the yield (the next iteration or the code after must see them done).
 * wait_first >= 0: wait for that group (and older) before the body;
 * sync_to >= 0: also wait for that group (and older) before the yield
 * (cg_async.h: lw_region_enter, lw_region_leave). */
static void lower_region(Lowerer *L, const Block *blk, MlirBlock into, int ring_lo, int ring_hi,
                         int wait_first, int sync_to) {
  MlirBlock saved = L->b.block;
  AsyncRegion async;
  cg_builder_set_block(&L->b, into);
  lw_region_enter(L, &async, wait_first);
  lw_walk_block(L, blk);
  lw_region_leave(L, &async, sync_to, ring_lo, ring_hi);
  Op *term = block_terminator((Block *)blk);
  MlirValue *vals = lw_alloc(L, sizeof(MlirValue) * MAX_CARRIED);
  int n = (term && term->kind == OP_YIELD) ? flatten_yield(L, term, vals, MAX_CARRIED) : 0;
  if (term)
    lw_set_loc(L, term);
  cg_yield(&L->b, vals, n);
  cg_builder_set_block(&L->b, saved);
}

static const char *const grid_dims[3] = {"z", "y", "x"};

/* The name of a loop's upper bound when it is a kernel argument, else "". */
static const char *bound_arg_name(Lowerer *L, const Op *op) {
  const Value *hi = op->operands[1];
  return hi->block == L->f->body && hi->name ? hi->name : "";
}

/* A persistent kernel's walk (passes/persistent.c): the loop to its
 * %nctas argument, which codegen binds to gridDim.x. */
static bool walks_nctas(Lowerer *L, const Op *op) {
  return strcmp(bound_arg_name(L, op), "nctas") == 0;
}

/* A parallel loop: this thread block's iteration is lo + block id; the
 * k-th parallel loop of the nest takes grid dimension z, y, x in that order
 * (batch, heads, Q tiles: docs/abi.md), guarded by iv < hi; a persistent
 * kernel's one loop takes x (its bound is gridDim.x). */
static void grid_block_for(Lowerer *L, const Op *op) {
  if (op->noperands != 2 || op->nresults != 0) {
    lw_error(L, op, "a parallel loop with iter_args is not supported");
    return;
  }
  if (L->parallel_seen >= 3) {
    lw_error(L, op, "more than three nested parallel loops (the grid has three dims)");
    return;
  }
  CgBuilder *b = &L->b;
  MlirValue lo = lw_get(L, op->operands[0])->v, hi = lw_get(L, op->operands[1])->v;
  const char *dim = walks_nctas(L, op) ? "x" : grid_dims[L->parallel_seen];
  L->parallel_seen++;
  MlirValue bid = cg_int_cast(b, cg_block_id(b, dim), b->i64);
  MlirValue iv = cg_addi(b, lo, bid);
  lw_set(L, for_iv((Op *)op), lw_scalar(L, type_index(), iv));
  MlirBlock then_block;
  cg_if(b, cg_cmpi(b, "slt", iv, hi), NULL, 0, false, &then_block, NULL);
  lower_region(L, for_body((Op *)op), then_block, 0, 0, -1, -1);
}

/* lanes[i] > 0: result i is a row vector held across the lanes (a loop's
 * carry of one, cg_lowerer.h CgVal.lanes), flattened to its lanes values. */
static MlirType *flat_types(Lowerer *L, const Op *op, const int *lanes, int *n) {
  int total = 0;
  for (int i = 0; i < op->nresults; i++) {
    int k = lanes && lanes[i] ? lanes[i] : type_flat_count(L, op->results[i]->type, op);
    if (k < 0)
      return NULL;
    total += k;
  }
  MlirType *types = lw_alloc(L, sizeof(MlirType) * (size_t)(total ? total : 1));
  int at = 0;
  for (int i = 0; i < op->nresults; i++) {
    Type t = op->results[i]->type;
    int k = lanes && lanes[i] ? lanes[i] : type_flat_count(L, t, op);
    MlirType et = lw_is_staged_type(t) ? L->b.i32 : lw_val_type(L, t);
    for (int j = 0; j < k; j++)
      types[at++] = et;
  }
  *n = total;
  return types;
}

/* Binds an op's results (or a block's args from `first`) to the flattened
 * MLIR values of an scf op. */
static void bind_flat(Lowerer *L, Value **irvals, int nir, const int *lanes,
                      MlirValue (*get)(void *, int), void *src, int first) {
  int at = first;
  for (int i = 0; i < nir; i++) {
    Type t = irvals[i]->type;
    int k = lanes && lanes[i] ? lanes[i] : type_flat_count(L, t, NULL);
    MlirValue tmp[MAX_CARRIED];
    for (int j = 0; j < k && j < MAX_CARRIED; j++)
      tmp[j] = get(src, at + j);
    at += k;
    CgVal *cv = lw_unflatten(L, t, tmp, lanes ? lanes[i] : 0);
    if (cv)
      lw_set(L, irvals[i], cv);
  }
}

static MlirValue get_result(void *op, int i) { return mlirOperationGetResult(*(MlirOperation *)op, i); }
static MlirValue get_arg(void *blk, int i) { return mlirBlockGetArgument(*(MlirBlock *)blk, i); }

/* The body argument that `v` is (a loop's iter_arg: its index), or -1. */
static int body_arg_index(const Block *body, const Value *v) {
  return v && !v->def && v->block == body && v->arg_index >= 1 ? v->arg_index - 1 : -1;
}

/* The iter_args of a sequential loop that carry staged tiles (a pipelined
 * loop, passes/software_pipeline.c). A ring is a chain of them: the last
 * yields a load in the body (the tile `depth` steps ahead), each other one
 * yields the body argument after it in the chain, the first is this step's
 * tile. Each ring gets one more buffer than it has arguments (see
 * CarryRing). ring_of/pos_of: each argument's ring and position in it, -1
 * for the others. Returns false (with an error) when the loop does not have
 * that shape. */
static bool setup_rings(Lowerer *L, const Op *op, int *ring_of, int *pos_of) {
  Block *body = for_body((Op *)op);
  Op *term = block_terminator(body);
  int nargs = op->noperands - 2;
  const char *shape =
      "a loop may carry a shared-memory tile only from a load before it to a load in its body";
  for (int i = 0; i < nargs; i++)
    ring_of[i] = pos_of[i] = -1;
  for (int i = 0; i < nargs; i++) {
    CgVal *init = lw_get(L, op->operands[2 + i]);
    if (init->kind != CV_SMEM)
      continue;
    Value *y = term && term->kind == OP_YIELD && i < term->noperands ? term->operands[i] : NULL;
    if (body_arg_index(body, y) >= 0)
      continue; /* inside a chain: placed from the chain's last argument */
    if (!y || !y->def || (y->def->kind != OP_LOAD && y->def->kind != OP_LOAD_PAGED) ||
        y->def->parent != body || L->nrings == MAX_CARRY_RINGS) {
      lw_error(L, op, "%s", shape);
      return false;
    }
    /* Walk back from the last argument to the first. */
    int chain[MAX_RING_DEPTH], n = 0;
    chain[n++] = i;
    for (;;) {
      int prev = -1;
      for (int k = 0; k < nargs && k < term->noperands; k++)
        if (body_arg_index(body, term->operands[k]) == chain[n - 1])
          prev = k;
      if (prev < 0)
        break;
      if (n == MAX_RING_DEPTH) {
        lw_error(L, op, "a tile carried more than %d steps ahead", MAX_RING_DEPTH);
        return false;
      }
      chain[n++] = prev;
    }
    CarryRing *r = &L->rings[L->nrings];
    memset(r, 0, sizeof *r);
    r->depth = n;
    r->next_load = y->def;
    for (int p = 0; p < n; p++) {
      int a = chain[n - 1 - p];
      CgVal *in = lw_get(L, op->operands[2 + a]);
      if (in->kind != CV_SMEM || !mlirValueIsNull(in->smem_dyn) || ring_of[a] >= 0) {
        lw_error(L, op, "%s", shape);
        return false;
      }
      r->buf_sum += in->smem_off;
      ring_of[a] = L->nrings;
      pos_of[a] = p;
    }
    r->buf_sum += lw_alloc_smem(L, init->type.rows * init->smem_stride * 2);
    L->nrings++;
  }
  for (int i = 0; i < nargs; i++)
    if (lw_get(L, op->operands[2 + i])->kind == CV_SMEM && ring_of[i] < 0) {
      lw_error(L, op, "%s", shape);
      return false;
    }
  return true;
}

/* Is every staged load of blk (at any depth) a pipelined ring's next load? */
static bool carries_every_staged_load(const Lowerer *L, const Block *blk, int ring_lo,
                                      int ring_hi) {
  if (ring_hi <= ring_lo)
    return false;
  for (const Op *o = blk->first; o; o = o->next) {
    if ((o->kind == OP_LOAD || o->kind == OP_LOAD_PAGED) && o->nresults == 1 &&
        lw_is_staged_type(o->results[0]->type)) {
      bool carried = false;
      for (int i = ring_lo; i < ring_hi; i++)
        carried |= L->rings[i].next_load == o;
      if (!carried)
        return false;
    }
    for (int r = 0; r < o->nregions; r++)
      if (!carries_every_staged_load(L, o->regions[r], ring_lo, ring_hi))
        return false;
  }
  return true;
}

/* Gives the carried tiles of loop op their cp.async groups in the order
 * they were issued: oldest first by the step that issued them (a ring's
 * first argument depth steps ago, its last one step ago), then in the
 * order the body issues them. at_entry: the body's arguments (standing for
 * the prologue's or the step before's copies; they also take their ring);
 * else the loop's results (the last steps' copies, still in flight). A
 * wait for one of them must not leave a group issued before it pending. */
static void carried_issue_order(Lowerer *L, const Op *op, const int *ring_of, const int *pos_of,
                                bool at_entry) {
  Block *irbody = for_body((Op *)op);
  int nargs = op->noperands - 2;
  for (int ago = MAX_RING_DEPTH; ago >= 1; ago--)
    for (Op *o = irbody->first; o; o = o->next)
      for (int a = 0; a < nargs; a++) {
        if (ring_of[a] < 0 || L->rings[ring_of[a]].next_load != o)
          continue;
        CarryRing *r = &L->rings[ring_of[a]];
        if (r->depth - pos_of[a] != ago)
          continue;
        CgVal *v = lw_get(L, at_entry ? irbody->args[1 + a] : op->results[a]);
        v->async_seq = lw_async_issue(L, false);
        if (at_entry) {
          v->ring = pos_of[a] == 0 ? ring_of[a] : -1;
          r->held[pos_of[a]] = v->smem_dyn;
        }
      }
}

/* Does blk (at any depth) get tiles from a ring? */
static bool has_ring_get(const Block *blk) {
  for (const Op *o = blk->first; o; o = o->next) {
    if (o->kind == OP_RING_GET)
      return true;
    for (int r = 0; r < o->nregions; r++)
      if (has_ring_get(o->regions[r]))
        return true;
  }
  return false;
}

/* The body's last-step ring releases (ir.h) when the loop ran no step. */
static void release_after_empty_loop(Lowerer *L, const Op *op, MlirValue lo, MlirValue hi) {
  for (const Op *o = for_body((Op *)op)->first; o; o = o->next)
    if (o->kind == OP_RING_RELEASE && attr_int(&o->attrs, "last_step", 0) == 1)
      lw_ring_release_if(L, o, cg_cmpi(&L->b, "sle", hi, lo));
}

static void lower_seq_for(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  MlirValue lo = lw_get(L, op->operands[0])->v, hi = lw_get(L, op->operands[1])->v;
  int ninit = 0;
  int nargs = op->noperands - 2;
  int *lanes = lw_alloc(L, sizeof(int) * (size_t)(nargs ? nargs : 1));
  for (int i = 0; i < nargs; i++) {
    const CgVal *init = lw_get(L, op->operands[2 + i]);
    lanes[i] = init && init->kind == CV_TILE ? init->lanes : 0;
  }
  MlirType *types = flat_types(L, op, lanes, &ninit);
  if (!types)
    return;
  int *ring_of = lw_alloc(L, sizeof(int) * (size_t)(nargs ? nargs : 1));
  int *pos_of = lw_alloc(L, sizeof(int) * (size_t)(nargs ? nargs : 1));
  int ring_lo = L->nrings;
  if (!setup_rings(L, op, ring_of, pos_of))
    return;
  int ring_hi = L->nrings;
  MlirValue *inits = lw_alloc(L, sizeof(MlirValue) * (size_t)(ninit ? ninit : 1));
  int at = 0;
  for (int i = 2; i < op->noperands; i++) {
    CgVal *cv = lw_get(L, op->operands[i]);
    lw_flatten(L, cv, inits + at);
    at += lw_flat_count(L, cv);
  }
  if (at != ninit) {
    lw_error(L, op, "iter_args do not match the loop's results");
    return;
  }
  /* A consumer's loop (warp roles) copies nothing itself: what the
   * consumers copied before it (Q) lands once, here, not at a wait in
   * every step. */
  if (ring_hi == ring_lo && has_ring_get(for_body((Op *)op)))
    lw_flush_async(L, 0);
  /* Iteration counts fit in 32 bits; i64 keeps offsets exact. */
  MlirBlock body;
  MlirOperation forop = cg_for(b, lo, hi, cg_const_i64(b, 1), inits, ninit, &body);
  Block *irbody = for_body((Op *)op);
  lw_set(L, for_iv((Op *)op), lw_scalar(L, type_index(), mlirBlockGetArgument(body, 0)));
  bind_flat(L, irbody->args + 1, irbody->nargs - 1, lanes, get_arg, &body, 1);
  /* Carried tiles: the body's arguments stand for the prologue's groups
   * (cg_async.h: lw_loop_enter), issued oldest first: by the step that
   * issued them (a ring's first argument depth steps ago, its last one step
   * ago), then in the order the body issues them. */
  int *init_seq = lw_alloc(L, sizeof(int) * (size_t)(nargs ? nargs : 1));
  int ninit_seq = 0;
  for (int i = 0; i < nargs; i++)
    if (ring_of[i] >= 0)
      init_seq[ninit_seq++] = lw_get(L, op->operands[2 + i])->async_seq;
  AsyncLoop async;
  lw_loop_enter(L, &async, init_seq, ninit_seq);
  carried_issue_order(L, op, ring_of, pos_of, true);
  lw_loop_body(L, ring_lo, ring_hi);
  /* A loop that carries every staged tile it loads waits for them at the
   * top of the step: its one barrier then comes before the next tiles'
   * copies, which may overwrite the buffers of the step before
   * (software_pipeline.c). Otherwise the wait stays at the first use, after
   * the step's own copies are issued. */
  int wait_first = -1;
  if (carries_every_staged_load(L, irbody, ring_lo, ring_hi))
    for (int a = 0; a < nargs; a++)
      if (ring_of[a] >= 0 && pos_of[a] == 0) {
        int sq = lw_get(L, irbody->args[1 + a])->async_seq;
        if (sq > wait_first)
          wait_first = sq;
      }
  lower_region(L, irbody, body, ring_lo, ring_hi, wait_first, -1);
  bind_flat(L, op->results, op->nresults, lanes, get_result, &forop, 0);
  release_after_empty_loop(L, op, lo, hi);
  /* After the loop: the outer groups but the prologue's, then the last
   * step's copies (nobody should use them, but they are in flight). */
  lw_loop_leave(L, &async, init_seq, ninit_seq);
  carried_issue_order(L, op, ring_of, pos_of, false);
  /* The rings belong to this loop only. */
  L->nrings = ring_lo;
  (void)types;
}


MlirValue lw_grid_dim(CgBuilder *b, const char *dim) {
  char text[32];
  snprintf(text, sizeof text, "#gpu<dim %s>", dim);
  CgNamedAttr a = {"dimension", cg_attr(b, text)};
  return cg_int_cast(b, cg_op1(b, "gpu.grid_dim", NULL, 0, b->index, &a, 1), b->i64);
}

/* The dimension of the first entry of map that matches loop op, or NULL. */
static const char *grid_dim_of(Lowerer *L, const LwGridMap *map, const Op *op) {
  const Value *hi = op->operands[1];
  const char *n = bound_arg_name(L, op);
  for (int i = 0; i < 4 && map[i].dim; i++)
    if (map[i].bound ? strcmp(n, map[i].bound) == 0 : hi->def && hi->def->kind == OP_CONST)
      return map[i].dim;
  return NULL;
}

/* A grid-stride loop: iv = lo + block id, step grid dim (one step when the
 * launch's grid matches the loop, as the runtime's does). The used-dims mask
 * is per kernel: nested loops never share a dim. */
static void grid_stride_for(Lowerer *L, const Op *op) {
  const LwKind *K = L->kind;
  const char *dim = grid_dim_of(L, K->grid, op);
  unsigned used = (unsigned)L->parallel_seen;
  if (dim && (used & (1u << (dim[0] - 'x'))))
    dim = NULL;
  if (!dim) {
    lower_seq_for(L, op);
    return;
  }
  used |= 1u << (dim[0] - 'x');
  int saved = L->parallel_seen;
  L->parallel_seen = (int)used;
  CgBuilder *b = &L->b;
  MlirValue lo = lw_get(L, op->operands[0])->v, hi = lw_get(L, op->operands[1])->v;
  MlirValue start = cg_addi(b, lo, cg_int_cast(b, cg_block_id(b, dim), b->i64));
  MlirBlock body;
  cg_for(b, start, hi, lw_grid_dim(b, dim), NULL, 0, &body);
  lw_set(L, for_iv((Op *)op), lw_scalar(L, type_index(), mlirBlockGetArgument(body, 0)));
  MlirBlock outer = b->block;
  if (K->grid_body && K->grid_body(L, op, dim, mlirBlockGetArgument(body, 0), body)) {
    cg_builder_set_block(b, outer);
    L->parallel_seen = saved;
    return;
  }
  /* A second step rewrites the buffers the first one read. */
  L->smem_read_since_barrier = true;
  lower_region(L, for_body((Op *)op), body, 0, 0, -1, -1);
  L->smem_read_since_barrier = true;
  L->parallel_seen = saved;
}

static void lower_parallel_for(Lowerer *L, const Op *op) {
  const LwKind *K = L->kind;
  if (K->grid[0].dim && op->noperands == 2 && op->nresults == 0)
    grid_stride_for(L, op);
  else
    grid_block_for(L, op);
}

static void lower_for(Lowerer *L, const Op *op) {
  if (for_is_parallel((Op *)op))
    lower_parallel_for(L, op);
  else
    lower_seq_for(L, op);
}

static void lower_if(Lowerer *L, const Op *op) {
  int n = 0;
  MlirType *types = flat_types(L, op, NULL, &n);
  if (!types)
    return;
  CgVal *c = lw_get(L, op->operands[0]);
  if (c->kind != CV_SCALAR) {
    lw_error(L, op, "the condition must be a scalar");
    return;
  }
  MlirBlock tb, eb;
  bool has_else = op->nregions > 1 && (op->regions[1]->first || n > 0);
  MlirOperation ifop = cg_if(&L->b, c->v, types, n, has_else, &tb, &eb);
  /* The else region (the step's work, where mask-skip made one) first
   * (cg_async.h: AsyncIf). */
  AsyncIf async;
  lw_if_enter(L, &async);
  int sync_to = -1;
  if (has_else) {
    lower_region(L, op->regions[1], eb, 0, 0, -1, -1);
    sync_to = lw_if_after_else(L, &async);
  }
  lower_region(L, op->regions[0], tb, 0, 0, -1, sync_to);
  lw_if_leave(L, &async);
  bind_flat(L, op->results, op->nresults, NULL, get_result, &ifop, 0);
}

/* ---------------------------------------------------------- warp roles */

/* Register budgets after the split (docs/hopper-pipeline.md §1 note 5).
 * Two consumer warpgroups: one block an SM, the launch gives each of the
 * 384 threads 168 (.minnctapersm 1); the producer warpgroup gives up to
 * 40, the consumers take 232: 128 x 40 + 256 x 232 = 64512 = 384 x 168.
 * In the backward's (the atomic launch's main kernel, dK and dV carried
 * beside S^T and dP^T) the producer keeps 24 and the consumers take 240,
 * FlashAttention-3's split: 128 x 24 + 256 x 240 = 64512; its spills fall
 * from 64 to 20 bytes at d128 and the causal rows run 5-11% faster
 * (docs/perf-log.md P121). The forward's stay at 232: its one-thread TMA
 * producer spills under 24 and the forward lost 2-9% so (same section).
 * One consumer warpgroup (the backward's four warps): two blocks an SM
 * (.minnctapersm 2), 128 a thread at launch; the producer keeps 24, the
 * consumers take 232: 128 x 24 + 128 x 232 = 32768 = 256 x 128. Or, where
 * the pass found shared memory for one block only (blocks_per_sm = 1: the
 * backward at d256), one block: consumers 240 (a 64 x 256 wgmma's
 * accumulators and the tile's other registers), producer 24. */
LwRoleRegs lw_role_regs(int consumer_threads, int blocks_per_sm, bool backward) {
  if (consumer_threads <= 128 && blocks_per_sm == 1)
    return (LwRoleRegs){.blocks_per_sm = 1, .producer = 40, .consumer = 240};
  if (consumer_threads <= 128)
    return (LwRoleRegs){.blocks_per_sm = 2, .producer = 24, .consumer = 232};
  if (backward)
    return (LwRoleRegs){.blocks_per_sm = 1, .producer = 24, .consumer = 240};
  return (LwRoleRegs){.blocks_per_sm = 1, .producer = 40, .consumer = 232};
}

/* Is every ring_put in blk (at any depth) a TMA ring's? (some: *any) */
static bool puts_all_tma(const Block *blk, bool *any) {
  for (const Op *o = blk->first; o; o = o->next) {
    if (o->kind == OP_RING_PUT) {
      const Op *ring = o->operands[0]->def;
      if (!ring || attr_int(&ring->attrs, "tma", 0) != 1)
        return false;
      *any = true;
    }
    for (int i = 0; i < o->nregions; i++)
      if (!puts_all_tma(o->regions[i], any))
        return false;
  }
  return true;
}

/* `warp_roles`: the producer threads (after the consumers) run the first
 * region with thread ids from 0 and the producer's thread count (one
 * thread, which issues every copy, when all its puts are TMA's); the
 * consumers run the second with barriers among themselves only. */
static void lower_warp_roles(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  if (L->producer_threads == 0 || L->consumer_barrier || !mlirValueIsNull(L->put_slot)) {
    lw_error(L, op, "warp roles nested or not planned at the kernel's entry");
    return;
  }
  MlirBlock pb, cb;
  MlirValue is_producer = cg_cmpi(b, "uge", L->tid, cg_const_i32(b, L->threads));
  cg_if(b, is_producer, NULL, 0, true, &pb, &cb);
  MlirBlock outer = b->block;

  MlirValue tid = L->tid, warp = L->warp;
  int threads = L->threads, warps = L->warps;
  cg_builder_set_block(b, pb);
  if (L->sm90)
    cg_setmaxnreg(b, false, lw_role_regs(threads, L->role_blocks, L->backward).producer);
  L->tid = cg_subi(b, L->tid, cg_const_i32(b, L->threads));
  L->warp = cg_arith2(b, "arith.divui", L->tid, cg_const_i32(b, 32));
  L->threads = L->producer_threads;
  L->warps = L->producer_threads / 32;
  bool any_tma = false;
  L->producer_single = puts_all_tma(op->regions[0], &any_tma) && any_tma;
  MlirBlock one = b->block;
  if (L->producer_single) {
    cg_if(b, cg_cmpi(b, "eq", L->tid, cg_const_i32(b, 0)), NULL, 0, false, &one, NULL);
    cg_builder_set_block(b, one);
    static const char *const qkv[] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
      char name[16];
      MlirValue map = lw_param(L, lw_tmap_param(qkv[i], name, sizeof name), true);
      if (!mlirValueIsNull(map))
        cg_prefetch_tensormap(b, map);
    }
  }
  lw_walk_block(L, op->regions[0]);
  if (L->producer_single) {
    cg_yield(b, NULL, 0);
    cg_builder_set_block(b, pb);
  }
  L->producer_single = false;
  /* No copy in flight when the producer's threads exit (cp.async; a TMA
   * copy completes a barrier the consumers wait for). */
  cg_cp_async_wait(b, 0);
  cg_yield(b, NULL, 0);
  L->tid = tid, L->warp = warp, L->threads = threads, L->warps = warps;

  cg_builder_set_block(b, cb);
  if (L->sm90)
    cg_setmaxnreg(b, true, lw_role_regs(threads, L->role_blocks, L->backward).consumer);
  L->consumer_barrier = true;
  lower_region(L, op->regions[1], cb, 0, 0, -1, -1);
  L->consumer_barrier = false;
  cg_builder_set_block(b, outer);
}

/* `mma_turn` (passes/pingpong.c): named barriers 2 and 3, one per consumer
 * warpgroup, each counting 256 threads (its own 128 waiting, the other
 * warpgroup's 128 arriving). wait: bar.sync on its own; pass: bar.arrive
 * on the other's; start: warpgroup 1 arrives on warpgroup 0's, which so
 * goes first. Warpgroup 1's last pass is never waited for: the CTA ends
 * with that barrier half full, as FlashAttention-3's does. */
enum { TURN_BARRIER = 2 };

static void lower_mma_turn(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  if (!L->consumer_barrier || L->threads != 256) {
    lw_error(L, op, "mma_turn needs the two consumer warpgroups (8 warps) of a warp_roles");
    return;
  }
  const char *action = attr_str(&op->attrs, "action", "");
  MlirValue wg = cg_arith2(b, "arith.divui", L->tid, cg_const_i32(b, 128));
  if (strcmp(action, "start") == 0) {
    MlirBlock outer = b->block, second;
    cg_if(b, cg_cmpi(b, "eq", wg, cg_const_i32(b, 1)), NULL, 0, false, &second, NULL);
    cg_builder_set_block(b, second);
    cg_named_barrier_at(b, cg_const_i32(b, TURN_BARRIER), 256, true);
    cg_yield(b, NULL, 0);
    cg_builder_set_block(b, outer);
  } else if (strcmp(action, "wait") == 0) {
    cg_named_barrier_at(b, cg_addi_c(b, wg, TURN_BARRIER), 256, false);
  } else {
    cg_named_barrier_at(b, cg_subi(b, cg_const_i32(b, TURN_BARRIER + 1), wg), 256, true);
  }
}

/* `ring_put`: its load (skipped where the walk met it) into the slot. */
static void lower_ring_put(Lowerer *L, const Op *op) {
  const Op *ld = op->operands[2]->def;
  const CgVal *r = lw_get(L, op->operands[0]);
  if (r && r->kind == CV_RING && r->ring_tma) {
    lw_ring_put_tma(L, op);
    return;
  }
  lw_ring_put_begin(L, op);
  lw_set_loc(L, ld);
  ((const LwKind *)L->kind)->load(L, ld);
  lw_set_loc(L, op);
  lw_ring_put_end(L, op);
}

/* A load whose one use is a ring_put: lowered by the put. */
static bool load_of_ring_put(const Op *op) {
  const Value *r = op->results[0];
  return op->nresults == 1 && r->nuses == 1 && r->uses[0].user->kind == OP_RING_PUT;
}

/* ------------------------------------------------------------ dispatch */

/* A rank 1 tensor argument that is a pointer parameter of the kind's own
 * (cache_seqlens, block_table), null when the kind has none. */
static MlirValue scalar_tensor(Lowerer *L, const Value *t) {
  return t->name ? lw_param(L, t->name, true) : (MlirValue){NULL};
}

static void lower_op(Lowerer *L, const Op *op) {
  const LwKind *K = L->kind;
  lw_set_loc(L, op);
  for (int i = 0; i < op->noperands; i++)
    if (!lw_get(L, op->operands[i]) && !(op->kind == OP_RING_PUT && i == 2)) {
      lw_error(L, op, "operand %d was not lowered", i);
      return;
    }
  switch (op->kind) {
  case OP_CONST: lower_const(L, op); break;
  case OP_FULL: lw_full(L, op); break;
  case OP_IOTA: lw_iota(L, op); break;
  case OP_TILE_SIZE:
    lw_error(L, op, "tile sizes are still symbolic: the tiling pass must run before codegen");
    break;
  case OP_LOAD:
  case OP_LOAD_PAGED:
    if (!load_of_ring_put(op))
      K->load(L, op);
    break;
  case OP_STORE: K->store(L, op); break;
  case OP_LOAD_SCALAR: lw_load_scalar(L, op, scalar_tensor(L, op->operands[0])); break;
  case OP_GATHER: lw_gather(L, op); break;
  case OP_SCATTER: lw_scatter(L, op); break;
  case OP_REDUCE: lw_reduce(L, op); break;
  case OP_MATMUL: lw_matmul(L, op); break;
  case OP_MMA_WAIT: lw_mma_wait(L, op); break;
  case OP_ROWMAX:
  case OP_ROWSUM: lw_reduce_rows(L, op); break;
  case OP_XWARP_REDUCE: lw_xwarp_reduce(L, op); break;
  case OP_RING: lw_ring(L, op); break;
  case OP_WARP_ROLES: lower_warp_roles(L, op); break;
  case OP_RING_PUT: lower_ring_put(L, op); break;
  case OP_RING_GET: lw_ring_get(L, op); break;
  case OP_RING_RELEASE: lw_ring_release(L, op); break;
  case OP_MMA_TURN: lower_mma_turn(L, op); break;
  case OP_FOR: lower_for(L, op); break;
  case OP_IF: lower_if(L, op); break;
  case OP_GRAD:
    lw_error(L, op, "grad must be expanded by the differentiate pass before codegen");
    break;
  case OP_YIELD: break; /* handled by the region's owner */
  case OP_RETURN: break; /* gpu.return is added at the end of the kernel */
  default: lw_elementwise(L, op); break;
  }
}

void lw_walk_block(Lowerer *L, const Block *blk) {
  for (const Op *op = blk->first; op && !L->failed; op = op->next)
    lower_op(L, op);
}
