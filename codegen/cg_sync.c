/* cg_sync.c - layer 0: the synchronization of warp-specialized kernels
 * (docs/hopper-pipeline.md §1, §5): mbarriers (a ring's full and empty
 * slots), named barriers (a barrier among the consumer warps only), the
 * register split between warpgroups. Each is one PTX instruction (the wait
 * a loop) in inline asm with side effects: LLVM keeps their order with
 * every memory access. Addresses are 32-bit shared-window addresses.
 */
#include <stdio.h>

#include "codegen/cg_builder.h"

MlirValue cg_shared_addr32(CgBuilder *b, MlirValue sptr) {
  return cg_int_cast(b, cg_shared_addr(b, sptr), b->i32);
}

void cg_mbarrier_init(CgBuilder *b, MlirValue bar, int count) {
  MlirValue args[2] = {bar, cg_const_i32(b, count)};
  cg_ptx(b, "mbarrier.init.shared::cta.b64 [$0], $1;", args, "r,r", 2, NULL, 0);
}

void cg_fence_mbarrier_init(CgBuilder *b) {
  cg_ptx(b, "fence.mbarrier_init.release.cluster;", NULL, "", 0, NULL, 0);
}

void cg_mbarrier_wait(CgBuilder *b, MlirValue bar, MlirValue parity) {
  /* The labels are local to the { } scope: every copy of the loop in a
   * function gets its own. */
  static const char *const ptx =
      "{\n"
      ".reg .pred p;\n"
      "LAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;\n"
      "@p bra.uni DONE;\n"
      "bra.uni LAB_WAIT;\n"
      "DONE:\n"
      "}";
  MlirValue args[2] = {bar, parity};
  cg_ptx(b, ptx, args, "r,r", 2, NULL, 0);
}

void cg_mbarrier_arrive(CgBuilder *b, MlirValue bar) {
  cg_ptx(b, "mbarrier.arrive.shared::cta.b64 _, [$0];", &bar, "r", 1, NULL, 0);
}

void cg_cp_async_mbarrier_arrive(CgBuilder *b, MlirValue bar) {
  cg_ptx(b, "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];", &bar, "r", 1, NULL, 0);
}

void cg_mbarrier_arrive_expect_tx(CgBuilder *b, MlirValue bar, int bytes) {
  MlirValue args[2] = {bar, cg_const_i32(b, bytes)};
  cg_ptx(b, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", args, "r,r", 2, NULL, 0);
}

/* The map's generic address (a grid-constant kernel parameter: cvta.param). */
static MlirValue map_address(CgBuilder *b, MlirValue map) {
  return cg_op1(b, "llvm.ptrtoint", &map, 1, b->i64, NULL, 0);
}

void cg_tma_load_4d(CgBuilder *b, MlirValue dst, MlirValue map, MlirValue bar,
                    const MlirValue coord[4]) {
  MlirValue args[7] = {dst, map_address(b, map), coord[0], coord[1], coord[2], coord[3], bar};
  cg_ptx(b,
         "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
         "[$0], [$1, {$2, $3, $4, $5}], [$6];",
         args, "r,l,r,r,r,r,r", 7, NULL, 0);
}

void cg_tma_reduce_add_4d(CgBuilder *b, MlirValue map, MlirValue src, const MlirValue coord[4]) {
  MlirValue args[6] = {map_address(b, map), coord[0], coord[1], coord[2], coord[3], src};
  cg_ptx(b,
         "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group "
         "[$0, {$1, $2, $3, $4}], [$5];",
         args, "l,r,r,r,r,r", 6, NULL, 0);
}

void cg_prefetch_tensormap(CgBuilder *b, MlirValue map) {
  MlirValue a = map_address(b, map);
  cg_ptx(b, "prefetch.tensormap [$0];", &a, "l", 1, NULL, 0);
}

void cg_named_barrier(CgBuilder *b, int id, int threads) {
  char text[64];
  snprintf(text, sizeof text, "bar.sync %d, %d;", id, threads);
  cg_ptx(b, text, NULL, "", 0, NULL, 0);
}

void cg_named_barrier_at(CgBuilder *b, MlirValue id, int threads, bool arrive) {
  char text[64];
  snprintf(text, sizeof text, "bar.%s $0, %d;", arrive ? "arrive" : "sync", threads);
  cg_ptx(b, text, &id, "r", 1, NULL, 0);
}

void cg_setmaxnreg(CgBuilder *b, bool increase, int regs) {
  char text[64];
  snprintf(text, sizeof text, "setmaxnreg.%s.sync.aligned.u32 %d;", increase ? "inc" : "dec",
           regs);
  cg_ptx(b, text, NULL, "", 0, NULL, 0);
}

void cg_bulk_reduce_add_f32(CgBuilder *b, MlirValue dst, MlirValue src, int bytes) {
  char text[128];
  snprintf(text, sizeof text,
           "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], %d;", bytes);
  MlirValue args[2] = {dst, src};
  cg_ptx(b, text, args, "l,r", 2, NULL, 0);
}

void cg_bulk_store(CgBuilder *b, MlirValue dst, MlirValue src, int bytes) {
  char text[96];
  snprintf(text, sizeof text, "cp.async.bulk.global.shared::cta.bulk_group [$0], [$1], %d;", bytes);
  MlirValue args[2] = {dst, src};
  cg_ptx(b, text, args, "l,r", 2, NULL, 0);
}

void cg_bulk_commit(CgBuilder *b) { cg_ptx(b, "cp.async.bulk.commit_group;", NULL, "", 0, NULL, 0); }

void cg_bulk_wait(CgBuilder *b, bool read) {
  cg_ptx(b, read ? "cp.async.bulk.wait_group.read 0;" : "cp.async.bulk.wait_group 0;", NULL, "", 0,
         NULL, 0);
}

void cg_syncwarp(CgBuilder *b) { cg_ptx(b, "bar.warp.sync -1;", NULL, "", 0, NULL, 0); }
