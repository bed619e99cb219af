/* mem_ring.c - layer 1: rings of shared-memory slots between warp roles
 * (tile IR `ring`, `ring_put`, `ring_get`, `ring_release`;
 * passes/warp_specialize.c, docs/hopper-pipeline.md §5).
 *
 * A ring of S stages is S tile buffers and 2 x S mbarriers: full[s]
 * completes when step s's copies landed (each producer thread arrives
 * once its cp.async copies are done: cp.async.mbarrier.arrive.noinc, init
 * count = the producer's threads; a ring {tma = 1}: one thread arrives
 * with the tile's bytes expected and the TMA copies complete them, init
 * count 1), empty[s] when every consumer thread
 * released the step (init count = the consumers' threads). Step n uses
 * slot n % S in phase n / S; the consumers wait full[s] with parity
 * (n / S) & 1, the producer empty[s] with the other parity, which a fresh
 * barrier passes at once: the first S puts do not wait. A ring {zero = 1}
 * has one more slot, zero-filled at its init: step -1's tile, got without
 * a wait and released without an arrival (overlap-softmax's first P V).
 */
#include <string.h>

#include "codegen/cg_async.h"
#include "codegen/mem.h"

/* The shared pointer of byte offset off (i32). */
static MlirValue smem_at(Lowerer *L, MlirValue off) {
  return cg_gep(&L->b, L->smem, off, L->b.i8);
}

/* The 32-bit address of barrier `which` (0 full, 1 empty) of slot. */
static MlirValue ring_bar(Lowerer *L, const CgVal *r, int which, MlirValue slot) {
  CgBuilder *b = &L->b;
  MlirValue off = cg_addi_c(b, cg_muli_c(b, slot, 8), r->ring_bars + which * r->ring_stages * 8);
  return cg_shared_addr32(b, smem_at(L, off));
}

/* Step n's slot (i32) and the parity of its phase (i32 0/1). */
static void ring_slot(Lowerer *L, const CgVal *r, MlirValue step, MlirValue *slot,
                      MlirValue *parity) {
  CgBuilder *b = &L->b;
  MlirValue n = cg_int_cast(b, step, b->i32), S = cg_const_i32(b, r->ring_stages);
  *slot = cg_arith2(b, "arith.remui", n, S);
  *parity = cg_arith2(b, "arith.andi", cg_arith2(b, "arith.divui", n, S), cg_const_i32(b, 1));
}

/* The slot's buffer (i32 byte offset). */
static MlirValue slot_buffer(Lowerer *L, const CgVal *r, MlirValue slot) {
  return cg_addi_c(&L->b, cg_muli_c(&L->b, slot, r->ring_slot_bytes), r->smem_off);
}

/* The tensor map parameter of a TMA-loaded tensor argument (Q, K, V or a
 * run-time input; walk_kernel.c appends it to the kernel's parameters);
 * NULL for others. */
const char *lw_tmap_param(const char *tensor, char *buf, size_t len) {
  if (!tensor || (strcmp(tensor, "q") != 0 && strcmp(tensor, "k") != 0 &&
                  strcmp(tensor, "v") != 0 && strncmp(tensor, "in_", 3) != 0))
    return NULL;
  snprintf(buf, len, "tmap_%s", tensor);
  return buf;
}

const Op *lw_ring_put_load(const Op *ring) {
  const Value *r = ring->results[0];
  for (int i = 0; i < r->nuses; i++) {
    const Op *u = r->uses[i].user;
    if (u && u->kind == OP_RING_PUT && u->noperands == 3 && u->operands[2]->def)
      return u->operands[2]->def;
  }
  return NULL;
}

/* Zeros in bytes [off, off + bytes) of shared memory, 8 bytes a store,
 * spread over the consumer threads (the barrier after the ring's init
 * makes them visible). */
static void zero_fill(Lowerer *L, int off, int bytes) {
  CgBuilder *b = &L->b;
  int chunks = bytes / 8, T = L->threads;
  MlirValue zero = cg_const_i64(b, 0);
  MlirValue mine = cg_cmpi(b, "ult", L->tid, cg_const_i32(b, T));
  MlirBlock outer = b->block, fill;
  cg_if(b, mine, NULL, 0, false, &fill, NULL);
  cg_builder_set_block(b, fill);
  for (int it = 0; it * T < chunks; it++) {
    MlirValue c = cg_addi_c(b, L->tid, it * T);
    MlirBlock in = b->block, guarded;
    bool guard = (it + 1) * T > chunks;
    if (guard) {
      cg_if(b, cg_cmpi(b, "ult", c, cg_const_i32(b, chunks)), NULL, 0, false, &guarded, NULL);
      cg_builder_set_block(b, guarded);
    }
    cg_store(b, zero, smem_at(L, cg_addi_c(b, cg_muli_c(b, c, 8), off)), 8);
    if (guard) {
      cg_yield(b, NULL, 0);
      cg_builder_set_block(b, in);
    }
  }
  if (L->wgmma) /* the tensor cores read it through the async proxy */
    cg_fence_proxy_async(b);
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
}

/* A ring {zero = 1}'s step -1 (i1), or a null value for other rings. */
static MlirValue zero_step(Lowerer *L, const CgVal *r, MlirValue step) {
  if (r->ring_zero < 0)
    return (MlirValue){NULL};
  return cg_cmpi(&L->b, "slt", step, cg_const_i64(&L->b, 0));
}

/* Opens `if !is_zero` around what only real steps do (a null is_zero:
 * nothing to open); close with close_real_step. */
static MlirBlock open_real_step(Lowerer *L, MlirValue is_zero) {
  CgBuilder *b = &L->b;
  MlirBlock outer = b->block, real;
  if (mlirValueIsNull(is_zero))
    return outer;
  MlirValue one = cg_const_int(b, b->i1, 1);
  cg_if(b, cg_arith2(b, "arith.xori", is_zero, one), NULL, 0, false, &real, NULL);
  cg_builder_set_block(b, real);
  return outer;
}

static void close_real_step(Lowerer *L, MlirValue is_zero, MlirBlock outer) {
  if (mlirValueIsNull(is_zero))
    return;
  cg_yield(&L->b, NULL, 0);
  cg_builder_set_block(&L->b, outer);
}

void lw_ring(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  if (L->producer_threads == 0) {
    lw_error(L, op, "a ring outside a kernel with warp roles");
    return;
  }
  Type tt = ring_tile_type(op->results[0]->type);
  CgVal *r = lw_alloc(L, sizeof *r);
  r->kind = CV_RING;
  r->type = op->results[0]->type;
  lw_staged_layout(L, r, tt);
  r->ring_stages = (int)attr_int(&op->attrs, "stages", 2);
  r->ring_slot_bytes = tt.rows * r->smem_stride * 2;
  r->smem_off = lw_alloc_smem(L, r->ring_stages * r->ring_slot_bytes);
  r->ring_bars = lw_alloc_small(L, 2 * r->ring_stages * 8);
  r->ring_zero = attr_int(&op->attrs, "zero", 0) == 1 ? lw_alloc_smem(L, r->ring_slot_bytes) : -1;
  r->async_seq = -1;
  r->ring = -1;
  r->ring_tma = attr_int(&op->attrs, "tma", 0) == 1;
  if (r->ring_tma) {
    const Op *ld = lw_ring_put_load(op);
    char name[96];
    const char *param = lw_tmap_param(ld ? ld->operands[0]->name : NULL, name, sizeof name);
    r->ring_map = param ? lw_param(L, param, true) : (MlirValue){NULL};
    /* the verifier checked the puts' loads and the tile's shape */
    if (mlirValueIsNull(r->ring_map) || !r->swizzled) {
      lw_error(L, op, "a TMA ring needs a tensor-map parameter and 128-byte swizzled tiles");
      return;
    }
  }
  if (r->ring_zero >= 0)
    zero_fill(L, r->ring_zero, r->ring_slot_bytes);
  /* One thread initializes; everybody (both roles: a ring precedes its
   * warp_roles) waits for it. */
  MlirBlock outer = b->block, first;
  cg_if(b, cg_cmpi(b, "eq", L->tid, cg_const_i32(b, 0)), NULL, 0, false, &first, NULL);
  cg_builder_set_block(b, first);
  for (int s = 0; s < r->ring_stages; s++) {
    cg_mbarrier_init(b, ring_bar(L, r, 0, cg_const_i32(b, s)), r->ring_tma ? 1 : L->producer_threads);
    cg_mbarrier_init(b, ring_bar(L, r, 1, cg_const_i32(b, s)), L->threads);
  }
  cg_fence_mbarrier_init(b);
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
  lw_barrier(L);
  lw_set(L, op->results[0], r);
}

void lw_ring_put_begin(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  const CgVal *r = lw_get(L, op->operands[0]);
  MlirValue slot, parity;
  ring_slot(L, r, lw_get(L, op->operands[1])->v, &slot, &parity);
  /* the slot's previous step released (the first pass: at once) */
  cg_mbarrier_wait(b, ring_bar(L, r, 1, slot), cg_arith2(b, "arith.xori", parity, cg_const_i32(b, 1)));
  L->put_slot = slot_buffer(L, r, slot);
}

/* A TMA put: after the slot's release, one thread expects the tile's bytes
 * on full[slot] and issues one bulk copy per 64 columns (a column block of
 * the swizzled layout, rows x 128 bytes), at {column, row0, head, batch};
 * a run-time input's rectangle (`load {rect = 1}`, rank r) at {col0 +
 * column, row0, i(r-3), i(r-4)}, 0 past its rank (runtime/launch.c maps
 * its dims innermost first the same way). */
void lw_ring_put_tma(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  const CgVal *r = lw_get(L, op->operands[0]);
  const Op *ld = op->operands[2]->def;
  Type t = ring_tile_type(r->type);
  MlirValue slot, parity;
  ring_slot(L, r, lw_get(L, op->operands[1])->v, &slot, &parity);
  MlirBlock outer = b->block, one;
  if (!L->producer_single) {
    cg_if(b, cg_cmpi(b, "eq", L->tid, cg_const_i32(b, 0)), NULL, 0, false, &one, NULL);
    cg_builder_set_block(b, one);
  }
  cg_mbarrier_wait(b, ring_bar(L, r, 1, slot), cg_arith2(b, "arith.xori", parity, cg_const_i32(b, 1)));
  MlirValue full = ring_bar(L, r, 0, slot);
  cg_mbarrier_arrive_expect_tx(b, full, t.rows * t.cols * 2);
  /* the row operand (Q, K, V: 3; a rectangle: its rank - 1) and the ones
   * before it, innermost first; a rectangle's column start after it */
  bool rect = attr_int(&ld->attrs, "rect", 0) == 1;
  int row = rect ? ld->operands[0]->type.rank - 1 : 3;
  MlirValue coord[4];
  MlirValue col0 = rect ? cg_int_cast(b, lw_scalar_operand(L, ld, row + 1), b->i32)
                        : cg_const_i32(b, 0);
  for (int c = 1; c < 4; c++)
    coord[c] = row - (c - 1) >= 1 ? cg_int_cast(b, lw_scalar_operand(L, ld, row - (c - 1)), b->i32)
                                  : cg_const_i32(b, 0);
  MlirValue buf = slot_buffer(L, r, slot);
  for (int c = 0; c < t.cols / 64; c++) {
    coord[0] = cg_addi_c(b, col0, 64 * c);
    MlirValue dst = cg_shared_addr32(b, smem_at(L, cg_addi_c(b, buf, c * t.rows * 128)));
    cg_tma_load_4d(b, dst, r->ring_map, full, coord);
  }
  if (!L->producer_single) {
    cg_yield(b, NULL, 0);
    cg_builder_set_block(b, outer);
  }
}

void lw_ring_put_end(Lowerer *L, const Op *op) {
  const CgVal *r = lw_get(L, op->operands[0]);
  MlirValue slot, parity;
  ring_slot(L, r, lw_get(L, op->operands[1])->v, &slot, &parity);
  cg_cp_async_mbarrier_arrive(&L->b, ring_bar(L, r, 0, slot));
  L->put_slot = (MlirValue){NULL};
}

void lw_ring_get(Lowerer *L, const Op *op) {
  CgBuilder *b = &L->b;
  const CgVal *r = lw_get(L, op->operands[0]);
  MlirValue slot, parity, step = lw_get(L, op->operands[1])->v;
  ring_slot(L, r, step, &slot, &parity);
  MlirValue is_zero = zero_step(L, r, step);
  MlirBlock outer = open_real_step(L, is_zero);
  cg_mbarrier_wait(b, ring_bar(L, r, 0, slot), parity);
  /* the producer's cp.async wrote through the generic proxy; the tensor
   * cores read through the async one (TMA writes through it) */
  if (L->wgmma && !r->ring_tma)
    cg_fence_proxy_async(b);
  close_real_step(L, is_zero, outer);
  CgVal *t = lw_alloc(L, sizeof *t);
  t->kind = CV_SMEM;
  t->type = op->results[0]->type;
  lw_staged_layout(L, t, t->type);
  t->smem_off = -1;
  t->smem_dyn = slot_buffer(L, r, slot);
  if (!mlirValueIsNull(is_zero))
    t->smem_dyn = cg_select(b, is_zero, cg_const_i32(b, r->ring_zero), t->smem_dyn);
  t->async_seq = -1;
  t->ring = -1;
  lw_set(L, op->results[0], t);
}

static void release_now(Lowerer *L, const Op *op) {
  const CgVal *r = lw_get(L, op->operands[0]);
  MlirValue slot, parity, step = lw_get(L, op->operands[1])->v;
  ring_slot(L, r, step, &slot, &parity);
  MlirValue is_zero = zero_step(L, r, step);
  MlirBlock outer = open_real_step(L, is_zero);
  cg_mbarrier_arrive(&L->b, ring_bar(L, r, 1, slot));
  close_real_step(L, is_zero, outer);
}

void lw_ring_release_if(Lowerer *L, const Op *op, MlirValue cond) {
  CgBuilder *b = &L->b;
  MlirBlock then, cur = b->block;
  cg_if(b, cond, NULL, 0, false, &then, NULL);
  cg_builder_set_block(b, then);
  release_now(L, op);
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, cur);
}

/* A last-step release (ir.h) arrives in its loop's last iteration only;
 * lower_seq_for arrives after a loop that ran none. */
void lw_ring_release(Lowerer *L, const Op *op) {
  if (attr_int(&op->attrs, "last_step", 0) != 1) {
    release_now(L, op);
    return;
  }
  const Op *loop = op->parent->parent_op;
  MlirValue iv = lw_get(L, for_iv((Op *)loop))->v, hi = lw_get(L, loop->operands[1])->v;
  lw_ring_release_if(L, op, cg_cmpi(&L->b, "eq", iv, cg_addi_c(&L->b, hi, -1)));
}
