/* kind_decode.c - layer 4: the decode split kernel (docs/decode.md).
 *   - ABI: q k v o lse workspace cache_seqlens block_table, batch q_len
 *     capacity nsplit bt_stride, q/k/v/o strides (b, s, h): 25 parameters;
 *     the IR's %o_part / %lse_part are the workspace's two parts, dense in
 *     the IR's element order;
 *   - grid: the parallel loops over the batch, the K/V heads and the splits
 *     take grid z, y, x (nsplit, kv_heads, batch). Each is a grid-stride
 *     loop, so that any other parallel loop (the Q tiles of a group, or the
 *     query heads of a K/V head when pack-gqa is off) may simply run inside
 *     the block and the program stays correct whatever the pass pipeline
 *     left;
 *   - rows: plain, packed or paged (mem.h: lw_rows_of_load), the limit
 *     operand a sequence's cache length;
 *   - store epilogue: the fused combine after the lse_part store;
 *   - engines: mma.sync only.
 */
#include <string.h>

#include "codegen/meta_decode.h"
#include "codegen/kinds.h"

/* The split kernel's own choice; its own parameters are named ones
 * (lw_param: cache_seqlens, block_table, q_len, capacity, nsplit,
 * bt_stride). */
typedef struct Decode {
  bool fused; /* merges its partials (cg_decode_fused) */
} Decode;

static const LwParam params[] = {
    {LW_PTR, "q"},        {LW_PTR, "k"},           {LW_PTR, "v"},
    {LW_PTR, "o"},        {LW_PTR, "lse"},         {LW_PTR, "workspace"},
    {LW_PTR, "cache_seqlens"}, {LW_PTR, "block_table"}, {LW_I32, "batch"},
    {LW_I32, "q_len"},    {LW_I32, "capacity"},    {LW_I32, "nsplit"},
    {LW_I32, "bt_stride"}, LW_STRIDES("q"),        LW_STRIDES("k"),
    LW_STRIDES("v"),      LW_STRIDES("o"),
};

static bool accepts(const Func *f) { return cg_meta_is_decode(f); }

/* Programmatic dependent launch (sm_90+, docs/decode.md): the split kernel
 * lets the combine kernel be scheduled at once (it has nothing to hand over
 * early: the trigger only moves the combine's launch and prologue under the
 * split kernel's run); without a PDL launch the trigger does nothing. A
 * fused split kernel has no dependent. */
static void bind(Lowerer *L) {
  Decode *D = lw_alloc(L, sizeof *D);
  L->kind_state = D;
  D->fused = cg_decode_fused(L->f);
  /* The forward names, for code that asks for them. */
  L->seqlen_q = lw_param(L, "q_len", false);
  L->seqlen_k = lw_param(L, "capacity", false);
  if (cg_decode_pdl(L->f) && !D->fused)
    cg_ptx(&L->b, "griddepcontrol.launch_dependents;", NULL, "", 0, NULL, 0);
}

static void load(Lowerer *L, const Op *op) {
  Rows m;
  if (lw_rows_of_load(L, op, lw_param(L, "block_table", true), lw_param(L, "bt_stride", false),
                      &m))
    lw_load(L, op, &m);
}

/* ------------------------------------------------------ fused combine */

/* The split kernel merges its own partials (docs/decode.md, "Fused
 * combine"), which saves the combine kernel's launch and its run after the
 * split kernel's last block. A unit (sequence b, head-loop iteration h, Q
 * tile q0 / rows) is computed by nsplit blocks, one per split; each, after
 * storing its o_part/lse_part rows:
 *   bar.sync; thread 0: old = atom.acq_rel.gpu.add counter[unit], 1
 *   (fused_arrive: the ordering both ways, no separate fences);
 *   last = (old == nsplit - 1), thread 0 resets the counter to 0 (no other
 *   block of this launch touches it again; the next launch finds it zeroed);
 *   one bar.red.or hands `last` to the block;
 *   last block: merge every row of the unit as the combine kernel would
 *   (lw_comb_units), loading the partials volatile (other SMs wrote them: a
 *   line of lse_part that this SM cached earlier may be stale).
 * The counters are i32s right before the workspace (the runtime puts
 * round_up(batch * N, 64) of them there, N = metadata combine_fused, and
 * zeroes them when it first hands out that memory). */
static MlirValue fused_counter(Lowerer *L, MlirValue bv, MlirValue h, MlirValue q0, int rows) {
  CgBuilder *b = &L->b;
  const AttrList *a = &L->f->attrs;
  int n = cg_decode_counters(L->f);
  int pack = (int)attr_int(a, "pack", 0), br = (int)attr_int(a, "tile_q", rows);
  int nq = n / (int)attr_int(a, pack ? "kv_heads" : "heads", 1);
  MlirValue tile = cg_arith2(b, "arith.divui", q0, cg_const_i64(b, br > 0 ? br : rows));
  MlirValue unit = cg_addi(b, cg_muli_c(b, cg_addi(b, cg_muli_c(b, bv, n / nq), h), nq), tile);
  MlirValue all = cg_muli_c(b, L->batch, n);
  MlirValue pad = cg_arith2(b, "arith.andi", cg_addi_c(b, all, 63), cg_const_i64(b, ~(int64_t)63));
  return cg_gep(b, L->p_ws, cg_subi(b, unit, pad), b->i32);
}

/* Thread 0's arrival: true in every thread of the block that came last.
 * The barrier orders every thread's partial stores before thread 0's
 * atom.acq_rel, whose release is cumulative over them (PTX memory model:
 * what happens before it through bar.sync); its acquire, handed on by
 * bar.red, orders the last block's loads of the others' partials after
 * their arrivals. No separate fence: each was a round trip on the path
 * of the last block (docs/perf-log.md P19). */
static MlirValue fused_arrive(Lowerer *L, MlirValue ctr) {
  CgBuilder *b = &L->b;
  lw_barrier(L);
  MlirBlock tb, eb, outer = b->block;
  MlirOperation ifop = cg_if(b, cg_cmpi(b, "eq", L->tid, cg_const_i32(b, 0)), &b->i1, 1, true,
                             &tb, &eb);
  cg_builder_set_block(b, tb);
  MlirValue addr = cg_op1(b, "llvm.ptrtoint", &ctr, 1, b->i64, NULL, 0);
  MlirValue old = cg_const_i32(b, 0);
  cg_ptx(b, "atom.acq_rel.gpu.global.add.u32 $0, [$1], 1;", &addr, "l", 1, &old, 1);
  MlirValue nm1 = cg_int_cast(b, cg_subi(b, lw_param(L, "nsplit", false), cg_const_i64(b, 1)), b->i32);
  MlirValue last = cg_cmpi(b, "eq", old, nm1);
  MlirBlock rb, around = b->block;
  cg_if(b, last, NULL, 0, false, &rb, NULL);
  cg_builder_set_block(b, rb);
  cg_store(b, cg_const_i32(b, 0), ctr, 4); /* seen by the next launch */
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, around);
  cg_yield(b, &last, 1);
  cg_builder_set_block(b, eb);
  MlirValue no = cg_const_int(b, b->i1, 0);
  cg_yield(b, &no, 1);
  cg_builder_set_block(b, outer);
  MlirValue ops[2] = {cg_const_i32(b, 0), cg_result(ifop, 0)};
  MlirValue any = cg_intrinsic(b, "llvm.nvvm.barrier.cta.red.or.aligned.all", ops, 2, b->i1);
  L->epoch++; /* bar.red is a barrier too */
  return any;
}

/* st: split-kv's `store %lse_part, %bs, %h, %q0, %lset {pack}`. */
static void fused_merge(Lowerer *L, const Op *st) {
  CgBuilder *b = &L->b;
  MlirValue nsplit = lw_param(L, "nsplit", false), q_len = lw_param(L, "q_len", false);
  int dv = (int)attr_int(&L->f->attrs, "v_head_dim", 0);
  int rows = st->operands[4]->type.rows, pack = (int)attr_int(&st->attrs, "pack", 0);
  MlirValue bs = lw_scalar_operand(L, st, 1), h = lw_scalar_operand(L, st, 2), q0 = lw_scalar_operand(L, st, 3);
  Comb c = {.L = L, .nsplit = nsplit, .q_len = q_len, .pack = pack, .vol = true};
  if (L->failed || dv <= 0 || dv % 4 || rows <= 0 || !lw_comb_refs(L, st, &c)) {
    if (!L->failed)
      lw_error(L, st, "the fused combine needs v_head_dim %% 4 == 0");
    return;
  }
  c.b = cg_arith2(b, "arith.divui", bs, nsplit);
  c.h0 = pack ? cg_muli_c(b, h, pack) : h;
  MlirValue last = fused_arrive(L, fused_counter(L, c.b, h, q0, rows));
  MlirBlock mb, outer = b->block;
  cg_if(b, last, NULL, 0, false, &mb, NULL);
  cg_builder_set_block(b, mb);
  MlirValue u0, step, first;
  if (lw_comb_threads(&c, dv, &u0, &step, &first)) {
    MlirValue limit = pack ? cg_muli_c(b, q_len, pack) : q_len;
    MlirValue uend = cg_arith2(b, "arith.minsi", cg_addi_c(b, q0, rows), limit);
    lw_comb_units(&c, cg_addi(b, q0, u0), uend, step, first);
  }
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
}

/* A store (o, lse, o_part, lse_part); split-kv stores o_part, then
 * lse_part: after that the unit's partials are out, and a fused kernel
 * merges them. */
static void store(Lowerer *L, const Op *op) {
  const Decode *D = L->kind_state;
  Rows m;
  if (!lw_rows_of_store(L, op, &m))
    return;
  lw_store(L, op, &m);
  const Value *t = op->operands[0];
  if (D->fused && t->name && strcmp(t->name, "lse_part") == 0)
    fused_merge(L, op);
}

const LwKind lw_kind_decode = {
    .name = "decode",
    .accepts = accepts,
    .no_wgmma = "decode kernels use mma.sync",
    .params = params,
    .nparams = sizeof params / sizeof params[0],
    .bind = bind,
    /* the loop to %batch, the loop to %nsplit, and the head loop (its
     * bound a constant: kv_heads, or heads when pack-gqa is off) */
    .grid = {{"batch", "z"}, {"nsplit", "x"}, {NULL, "y"}},
    .load = load,
    .store = store,
};
