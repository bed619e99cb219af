/* cg_builder.h - a small C layer over MLIR's generic op construction.
 *
 * Every op is made by cg_op(): name, operands, result types, attributes; it
 * goes at the builder's insertion point (the end of its block) with the
 * builder's current location. Types and attributes that have no direct C API
 * constructor are parsed from their textual form (cg_type, cg_attr) - MLIR
 * uniques them, so this costs a parse, not memory.
 *
 * On top of cg_op sit helpers for what codegen emits all the time: constants,
 * integer and float arithmetic, the NVVM ops for tensor cores, and the
 * region-holding ops (gpu.module, gpu.func, scf.for, scf.if).
 */
#ifndef FLASHC_CG_BUILDER_H
#define FLASHC_CG_BUILDER_H

#include <stdbool.h>
#include <stdint.h>

#include "codegen/cg_context.h"
#include "mlir-c/IR.h"

typedef struct CgBuilder {
  CgContext *cc;
  MlirContext ctx;
  MlirBlock block;   /* ops are appended at the end of this block */
  MlirLocation loc;  /* attached to every op created */
  /* Types used everywhere, made once. */
  MlirType i1, i8, i16, i32, i64, index, f16, bf16, f32;
  MlirType ptr;  /* !llvm.ptr: generic address space (kernel arguments) */
  MlirType gptr; /* !llvm.ptr<1>: global */
  MlirType sptr; /* !llvm.ptr<3>: shared */
} CgBuilder;

void cg_builder_init(CgBuilder *b, CgContext *cc);
void cg_builder_set_block(CgBuilder *b, MlirBlock block);
/* Locations come from the tile IR; file may be NULL (unknown location). */
void cg_builder_set_loc(CgBuilder *b, const char *file, int line, int col);

MlirType cg_type(CgBuilder *b, const char *text);      /* asserts on bad text */
MlirAttribute cg_attr(CgBuilder *b, const char *text); /* asserts on bad text */
MlirAttribute cg_attr_i32(CgBuilder *b, int32_t v);
MlirAttribute cg_attr_i64(CgBuilder *b, int64_t v);
MlirAttribute cg_attr_str(CgBuilder *b, const char *s);

typedef struct CgNamedAttr {
  const char *name;
  MlirAttribute attr;
} CgNamedAttr;

/* Creates `name` and appends it at the insertion point. */
MlirOperation cg_op(CgBuilder *b, const char *name, const MlirValue *operands, int noperands,
                    const MlirType *results, int nresults, const CgNamedAttr *attrs,
                    int nattrs);
/* The same, returning the single result. */
MlirValue cg_op1(CgBuilder *b, const char *name, const MlirValue *operands, int noperands,
                 MlirType result, const CgNamedAttr *attrs, int nattrs);
MlirValue cg_result(MlirOperation op, int i);

/* ---------------------------------------------------------- constants */
MlirValue cg_const_int(CgBuilder *b, MlirType t, int64_t v); /* i1..i64, index */
MlirValue cg_const_i32(CgBuilder *b, int32_t v);
MlirValue cg_const_i64(CgBuilder *b, int64_t v);
MlirValue cg_const_float(CgBuilder *b, MlirType t, double v); /* f16/bf16/f32 */
MlirValue cg_const_f32(CgBuilder *b, double v);

/* ---------------------------------------------------- arith shorthands */
/* Binary arith op whose result has the type of `x` ("arith.addi", ...). */
MlirValue cg_arith2(CgBuilder *b, const char *name, MlirValue x, MlirValue y);
MlirValue cg_addi(CgBuilder *b, MlirValue x, MlirValue y);
MlirValue cg_subi(CgBuilder *b, MlirValue x, MlirValue y);
MlirValue cg_muli(CgBuilder *b, MlirValue x, MlirValue y);
MlirValue cg_addf(CgBuilder *b, MlirValue x, MlirValue y);
MlirValue cg_subf(CgBuilder *b, MlirValue x, MlirValue y);
MlirValue cg_mulf(CgBuilder *b, MlirValue x, MlirValue y);
/* Integer plus a constant of the same type (folds +0). */
MlirValue cg_addi_c(CgBuilder *b, MlirValue x, int64_t c);
MlirValue cg_muli_c(CgBuilder *b, MlirValue x, int64_t c);
/* pred: "eq","ne","slt","sle","sgt","sge","ult",... */
MlirValue cg_cmpi(CgBuilder *b, const char *pred, MlirValue x, MlirValue y);
/* pred: "oeq","one","olt","ole","ogt","oge","uno",... */
MlirValue cg_cmpf(CgBuilder *b, const char *pred, MlirValue x, MlirValue y);
MlirValue cg_select(CgBuilder *b, MlirValue c, MlirValue x, MlirValue y);
/* Conversions between integer widths / index (sign-extending) and floats. */
MlirValue cg_int_cast(CgBuilder *b, MlirValue x, MlirType to);
MlirValue cg_float_cast(CgBuilder *b, MlirValue x, MlirType to); /* extf/truncf */
MlirValue cg_sitofp(CgBuilder *b, MlirValue x, MlirType to);
MlirValue cg_bitcast(CgBuilder *b, MlirValue x, MlirType to);

/* ------------------------------------------------------- gpu and llvm */
/* gpu.thread_id / gpu.block_id of dim "x","y","z", as i32. */
MlirValue cg_thread_id(CgBuilder *b, const char *dim);
MlirValue cg_block_id(CgBuilder *b, const char *dim);
void cg_barrier(CgBuilder *b);
/* gpu.shuffle xor over the full warp. */
MlirValue cg_shuffle_xor(CgBuilder *b, MlirValue v, int mask);
/* v of lane `lane` (i32) of the warp; every lane takes part. */
MlirValue cg_shuffle_idx(CgBuilder *b, MlirValue v, MlirValue lane);
/* llvm.getelementptr base[idx] over elements of type elem. */
MlirValue cg_gep(CgBuilder *b, MlirValue base, MlirValue idx, MlirType elem);
MlirValue cg_load(CgBuilder *b, MlirValue ptr, MlirType t, int align);
/* A volatile load (ld.volatile: not served from a stale L1 line; for data
 * other blocks of the same launch wrote). */
MlirValue cg_load_volatile(CgBuilder *b, MlirValue ptr, MlirType t, int align);
void cg_store(CgBuilder *b, MlirValue val, MlirValue ptr, int align);
MlirValue cg_addrspacecast(CgBuilder *b, MlirValue p, MlirType to);
MlirValue cg_addressof(CgBuilder *b, const char *global, MlirType ptr_type);
MlirValue cg_extractvalue(CgBuilder *b, MlirValue agg, int pos, MlirType t);
MlirValue cg_vector_from(CgBuilder *b, const MlirValue *elems, int n, MlirType vec_type);
MlirValue cg_vector_extract(CgBuilder *b, MlirValue vec, int pos);
/* llvm.call_intrinsic for an NVVM intrinsic the dialects lack an op for. */
MlirValue cg_intrinsic(CgBuilder *b, const char *name, const MlirValue *args, int nargs,
                       MlirType result);

/* --------------------------------------------------------- tensor cores */
typedef enum CgMmaType { CG_MMA_F16, CG_MMA_BF16 } CgMmaType;
/* nvvm.ldmatrix .m8n8 .b16 with `num` (1, 2, 4) matrices from a shared
 * pointer; `trans` transposes each 8x8. Results are the num i32 registers. */
void cg_ldmatrix(CgBuilder *b, MlirValue sptr, int num, bool trans, MlirValue *out);
/* nvvm.mma.sync m16n8k16 row.col, f32 accumulate: a[4], b[2] packed i32
 * registers, c[4] f32; writes d[4]. */
void cg_mma_16816(CgBuilder *b, CgMmaType t, const MlirValue *a, const MlirValue *bb,
                  const MlirValue *c, MlirValue *d);
/* The same on m16n8k8 (a reduction's last 8 when it is 8 mod 16): a[2]
 * (rows g and g + 8), b[1]. */
void cg_mma_1688(CgBuilder *b, CgMmaType t, const MlirValue *a, const MlirValue *bb,
                 const MlirValue *c, MlirValue *d);
/* Packs two f32 into one i32 holding two f16/bf16 (lo = first). */
MlirValue cg_pack2(CgBuilder *b, CgMmaType t, MlirValue lo, MlirValue hi);

/* Inline PTX with side effects (llvm.inline_asm): operands $0.. are the
 * outputs, then `args`. `regs` (nregs values, f32, i32 or i64) are passed through
 * it in place: each comes out as a new SSA value tied to the same register,
 * so that the code computing them stays before the asm and the code using
 * them after it (how wgmma's asynchronous accumulators are ordered). */
/* x through an empty asm: LLVM cannot see through it. Dropout's select of
 * P stays an f32 select (one FSEL before the pair is packed to bf16)
 * instead of being sunk past the cast (a select of 16-bit halves: two
 * PRMT and a SEL an element). */
MlirValue cg_opaque_f32(CgBuilder *b, MlirValue x);
/* One PTX instruction without side effects (LLVM may move, merge or drop
 * it): $0 the result, then the args; constraints e.g. "=r,r,r". For what
 * LLVM's NVPTX backend has no pattern for (set.lt.u32.f16x2). */
MlirValue cg_ptx_pure(CgBuilder *b, const char *ptx, const char *constraints,
                      const MlirValue *args, int nargs, MlirType result);
void cg_ptx(CgBuilder *b, const char *ptx, const MlirValue *args, const char *arg_constraints,
            int nargs, MlirValue *regs, int nregs);

/* Warpgroup MMA (sm_90a) m64 x n x k16, f32 accumulate, acc[n/2] in the
 * accumulator layout of mma.sync m16n8 repeated over n/8 columns (warp w of
 * the warpgroup holds rows 16w..16w+15), updated in place. A comes from the
 * shared-memory descriptor a_desc (i64) when a_regs is NULL, else from four
 * packed registers (the m16n8k16 A fragment of the warp's 16 rows). B is the
 * descriptor b_desc; trans_b: B is stored N-major (k rows of n); trans_a:
 * A (from a descriptor only) is stored M-major (k rows of m);
 * accumulate false: D = A B, acc's incoming values are not read. Issued
 * asynchronously: bracket a sequence with cg_wgmma_fence and
 * cg_wgmma_commit_wait, which order the registers. */
void cg_wgmma(CgBuilder *b, CgMmaType t, int n, MlirValue *acc, const MlirValue *a_regs,
              MlirValue a_desc, MlirValue b_desc, bool trans_a, bool trans_b, bool accumulate);
/* wgmma.fence, with the registers the next wgmmas read passed through it. */
void cg_wgmma_fence(CgBuilder *b, MlirValue *regs, int nregs);
/* commit_group + wait_group 0, with the accumulators passed through it. */
void cg_wgmma_commit_wait(CgBuilder *b, MlirValue *acc, int nacc);
/* commit_group alone: the group runs on while later code issues more. */
void cg_wgmma_commit(CgBuilder *b);
/* wait_group `pending`: at most that many later groups still run; the
 * registers of the awaited group (accumulators, A fragments) pass through
 * it, so nothing reads or reuses them before. */
void cg_wgmma_wait(CgBuilder *b, int pending, MlirValue *regs, int nregs);
/* fence.proxy.async.shared::cta: this thread's shared-memory writes become
 * visible to the tensor cores' (async proxy) reads after the next barrier. */
void cg_fence_proxy_async(CgBuilder *b);
/* The 32-bit shared-window address of a shared pointer, as i64. */
MlirValue cg_shared_addr(CgBuilder *b, MlirValue sptr);

/* cp.async (16 bytes, .cg) global -> shared, with an optional zero fill:
 * when `src_bytes` is non-null, only that many bytes are read and the rest
 * of the 16 written as zeros (src_bytes = 0 reads nothing). */
void cg_cp_async16(CgBuilder *b, MlirValue dst_shared, MlirValue src_global,
                   MlirValue src_bytes);
void cg_cp_async_commit(CgBuilder *b);
void cg_cp_async_wait(CgBuilder *b, int n);

/* ---------------------------------------------- warp roles (cg_sync.c) */
/* The 32-bit shared-window address of a shared pointer (mbarrier operands). */
MlirValue cg_shared_addr32(CgBuilder *b, MlirValue sptr);
/* mbarrier.init: the barrier's phase completes after `count` arrivals. */
void cg_mbarrier_init(CgBuilder *b, MlirValue bar, int count);
/* fence.mbarrier_init: the inits visible before the barrier that follows. */
void cg_fence_mbarrier_init(CgBuilder *b);
/* Waits until the phase of parity `parity` (i32 0/1) completed: a loop of
 * mbarrier.try_wait.parity. A fresh barrier is in phase 0, so waiting on
 * parity 1 returns at once (a producer's first pass over its slots). */
void cg_mbarrier_wait(CgBuilder *b, MlirValue bar, MlirValue parity);
/* mbarrier.arrive: one arrival of this thread. */
void cg_mbarrier_arrive(CgBuilder *b, MlirValue bar);
/* cp.async.mbarrier.arrive.noinc: one arrival once this thread's cp.async
 * copies issued so far have landed (counted in the init count). */
void cg_cp_async_mbarrier_arrive(CgBuilder *b, MlirValue bar);
/* mbarrier.arrive.expect_tx: one arrival, and the phase also waits for
 * `bytes` more of asynchronous copies (TMA's complete_tx) to land. */
void cg_mbarrier_arrive_expect_tx(CgBuilder *b, MlirValue bar, int bytes);
/* cp.async.bulk.tensor.4d (TMA): the box of tensor map `map` (a generic
 * !llvm.ptr to a grid-constant CUtensorMap) at coord[0..4) (i32, innermost
 * first) into shared address dst (i32), completing `bytes` of barrier bar
 * (i32 shared address). Rows out of the tensor's range land as zeros. */
void cg_tma_load_4d(CgBuilder *b, MlirValue dst, MlirValue map, MlirValue bar,
                    const MlirValue coord[4]);
/* cp.reduce.async.bulk.tensor.4d ... add: the box of tensor map `map` at
 * coord[0..4) (i32, innermost first) += the f32 box at shared address src
 * (i32, the map's swizzled layout), in this thread's current bulk group;
 * box elements outside the tensor are dropped. */
void cg_tma_reduce_add_4d(CgBuilder *b, MlirValue map, MlirValue src, const MlirValue coord[4]);
/* prefetch.tensormap: the map's descriptor into the cache before its first use. */
void cg_prefetch_tensormap(CgBuilder *b, MlirValue map);
/* bar.sync id, threads: a barrier among `threads` threads (whole warps). */
void cg_named_barrier(CgBuilder *b, int id, int threads);
/* bar.sync (or, with arrive, bar.arrive: no wait) on the named barrier whose
 * id is the i32 value `id`, among `threads` threads. */
void cg_named_barrier_at(CgBuilder *b, MlirValue id, int threads, bool arrive);
/* setmaxnreg.inc/dec: this warpgroup's register budget becomes `regs`. */
void cg_setmaxnreg(CgBuilder *b, bool increase, int regs);
/* cp.reduce.async.bulk ... add.f32: `bytes` (a multiple of 16) of f32 at
 * shared address src (i32) added into global memory at dst (16-byte
 * aligned), in this thread's current bulk group (sm_90). */
void cg_bulk_reduce_add_f32(CgBuilder *b, MlirValue dst, MlirValue src, int bytes);
/* cp.async.bulk.global.shared::cta: `bytes` (a multiple of 16) at shared
 * address src (i32) copied to global memory at dst (16-byte aligned), in
 * this thread's current bulk group (sm_90). */
void cg_bulk_store(CgBuilder *b, MlirValue dst, MlirValue src, int bytes);
/* cp.async.bulk.commit_group: closes this thread's bulk group. */
void cg_bulk_commit(CgBuilder *b);
/* cp.async.bulk.wait_group[.read] 0: this thread's bulk groups done (read:
 * done reading their shared memory, which may then be rewritten). */
void cg_bulk_wait(CgBuilder *b, bool read);
/* bar.warp.sync -1: the warp's lanes meet (and see each other's shared
 * memory writes). */
void cg_syncwarp(CgBuilder *b);

/* ------------------------------------------------------------- regions */
MlirOperation cg_module_create(CgBuilder *b); /* builtin.module, gpu.container_module */
MlirBlock cg_module_body(MlirOperation module);
/* gpu.module @name [#nvvm.target<chip, features>] appended to `b`'s block;
 * returns its body. */
MlirBlock cg_gpu_module(CgBuilder *b, const char *name, const char *chip,
                        const char *features);
/* gpu.func @name(args) kernel with a known block size; returns its entry
 * block (arguments = the kernel parameters). */
MlirBlock cg_gpu_kernel(CgBuilder *b, const char *name, const MlirType *args, int nargs,
                        int block_threads);
/* The extern shared array that backs dynamic shared memory. */
void cg_dynamic_smem_global(CgBuilder *b, const char *name);

/* scf.for lo..hi step st with iter_args; *body receives the body block
 * (args: iv, iters...). The caller fills it and ends it with cg_yield. */
MlirOperation cg_for(CgBuilder *b, MlirValue lo, MlirValue hi, MlirValue step,
                     const MlirValue *inits, int ninits, MlirBlock *body);
/* scf.if with results; both blocks must end in cg_yield (also when
 * nresults == 0: pass has_else = false then for no else region). */
MlirOperation cg_if(CgBuilder *b, MlirValue cond, const MlirType *results, int nresults,
                    bool has_else, MlirBlock *then_block, MlirBlock *else_block);
void cg_yield(CgBuilder *b, const MlirValue *vals, int n);
void cg_gpu_return(CgBuilder *b);

#endif
