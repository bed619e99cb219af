/* cg_proof.c - builds one tiny kernel through codegen's builder and prints
 * its MLIR, LLVM IR or PTX: D[16x8] = A[16x16] * B[16x8] on the tensor cores.
 *
 *   cg-proof [mlir|llvm|ptx] [sm_90a|sm_80] [bf16|f16]
 *
 * A (row-major) and B^T (8 rows of 16, i.e. B column-major) are copied to
 * shared memory with cp.async, read with ldmatrix (x4 for A, x2 for B, and
 * x2.trans of B stored row-major to check the transposing form), multiplied
 * by one mma.sync m16n8k16, and D (f32, row-major) is stored by every lane.
 * A test of the builder layer and the MLIR -> PTX path, not product code.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_builder.h"
#include "codegen/cg_context.h"
#include "codegen/codegen.h"
#include "codegen/mlir_to_ptx.h"

/* Each of the first 32+16 lanes copies 16 bytes of A (512 B) or B^T (256 B). */
static void copy_tiles(CgBuilder *b, MlirValue smem, MlirValue tid, MlirValue a, MlirValue bt) {
  MlirValue off_bytes = cg_muli_c(b, tid, 16);
  MlirValue off_elems = cg_muli_c(b, tid, 8);
  MlirBlock then_a, then_b;
  cg_if(b, cg_cmpi(b, "ult", tid, cg_const_i32(b, 32)), NULL, 0, false, &then_a, NULL);
  MlirBlock outer = b->block;
  cg_builder_set_block(b, then_a);
  MlirValue src = cg_gep(b, cg_addrspacecast(b, a, b->gptr), off_elems, b->bf16);
  cg_cp_async16(b, cg_gep(b, smem, off_bytes, b->i8), src, (MlirValue){NULL});
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
  cg_if(b, cg_cmpi(b, "ult", tid, cg_const_i32(b, 16)), NULL, 0, false, &then_b, NULL);
  cg_builder_set_block(b, then_b);
  MlirValue srcb = cg_gep(b, cg_addrspacecast(b, bt, b->gptr), off_elems, b->bf16);
  MlirValue dstb = cg_gep(b, smem, cg_addi_c(b, off_bytes, 512), b->i8);
  /* The zero-fill form: all 16 bytes read here. */
  cg_cp_async16(b, dstb, srcb, cg_const_i32(b, 16));
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
  cg_cp_async_commit(b);
  cg_cp_async_wait(b, 0);
  cg_barrier(b);
}

static void build_kernel(CgBuilder *b, CgMmaType t) {
  MlirType args[3] = {b->ptr, b->ptr, b->ptr};
  MlirBlock entry = cg_gpu_kernel(b, "proof_mma", args, 3, 32);
  MlirValue a = mlirBlockGetArgument(entry, 0), bt = mlirBlockGetArgument(entry, 1),
            d = mlirBlockGetArgument(entry, 2);
  cg_builder_set_block(b, entry);
  cg_builder_set_loc(b, "proof.fa", 1, 1);
  MlirValue lane = cg_thread_id(b, "x");
  MlirValue smem = cg_addressof(b, "__flashc_smem", b->sptr);
  copy_tiles(b, smem, lane, a, bt);
  /* A: lane l points at row (l % 16), column 8 * (l / 16): 32 bytes a row. */
  MlirValue l16 = cg_arith2(b, "arith.remui", lane, cg_const_i32(b, 16));
  MlirValue half = cg_arith2(b, "arith.divui", lane, cg_const_i32(b, 16));
  MlirValue aoff = cg_addi(b, cg_muli_c(b, l16, 32), cg_muli_c(b, half, 16));
  MlirValue afrag[4], bfrag[2], btr[2];
  cg_ldmatrix(b, cg_gep(b, smem, aoff, b->i8), 4, false, afrag);
  /* B^T: lanes 0..15 point at row (l % 8), column 8 * (l / 8 % 2). */
  MlirValue l8 = cg_arith2(b, "arith.remui", lane, cg_const_i32(b, 8));
  MlirValue hi = cg_arith2(b, "arith.remui", cg_arith2(b, "arith.divui", lane, cg_const_i32(b, 8)),
                           cg_const_i32(b, 2));
  MlirValue boff = cg_addi_c(b, cg_addi(b, cg_muli_c(b, l8, 32), cg_muli_c(b, hi, 16)), 512);
  cg_ldmatrix(b, cg_gep(b, smem, boff, b->i8), 2, false, bfrag);
  cg_ldmatrix(b, cg_gep(b, smem, boff, b->i8), 2, true, btr); /* exercises .trans */
  MlirValue zero = cg_const_f32(b, 0.0), c[4] = {zero, zero, zero, zero}, out[4];
  cg_mma_16816(b, t, afrag, bfrag, c, out);
  /* D: lane holds rows g and g+8, columns 2q, 2q+1. */
  MlirValue g = cg_arith2(b, "arith.divui", lane, cg_const_i32(b, 4));
  MlirValue q = cg_arith2(b, "arith.remui", lane, cg_const_i32(b, 4));
  MlirValue dg = cg_addrspacecast(b, d, b->gptr);
  for (int i = 0; i < 4; i++) {
    MlirValue row = cg_addi_c(b, g, (i / 2) * 8);
    MlirValue col = cg_addi_c(b, cg_muli_c(b, q, 2), i % 2);
    MlirValue idx = cg_addi(b, cg_muli_c(b, row, 8), col);
    cg_store(b, out[i], cg_gep(b, dg, idx, b->f32), 4);
  }
  /* Keep the transposed load alive: lane 0 adds it into D[0] bits. */
  MlirValue x = cg_arith2(b, "arith.xori", btr[0], btr[1]);
  MlirValue xf = cg_bitcast(b, x, b->f32);
  MlirBlock th;
  cg_if(b, cg_cmpi(b, "eq", lane, cg_const_i32(b, 99)), NULL, 0, false, &th, NULL);
  MlirBlock outer = b->block;
  cg_builder_set_block(b, th);
  cg_store(b, xf, dg, 4);
  cg_yield(b, NULL, 0);
  cg_builder_set_block(b, outer);
  cg_gpu_return(b);
}

static void put(MlirStringRef s, void *user) { fwrite(s.data, 1, s.length, (FILE *)user); }

int main(int argc, char **argv) {
  const char *emit = argc > 1 ? argv[1] : "ptx";
  const char *chip = argc > 2 ? argv[2] : "sm_90a";
  CgMmaType t = (argc > 3 && strcmp(argv[3], "f16") == 0) ? CG_MMA_F16 : CG_MMA_BF16;
  CgContext *cc = cg_context_create();
  CgBuilder b;
  cg_builder_init(&b, cc);
  MlirOperation module = cg_module_create(&b);
  cg_builder_set_block(&b, cg_module_body(module));
  MlirBlock gm = cg_gpu_module(&b, "flashc", chip, "+ptx80");
  cg_builder_set_block(&b, gm);
  cg_dynamic_smem_global(&b, "__flashc_smem");
  build_kernel(&b, t);
  int rc = 0;
  if (!mlirOperationVerify(module)) {
    fprintf(stderr, "verify failed:\n%s", cg_context_diagnostics(cc));
    rc = 1;
  } else if (strcmp(emit, "mlir") == 0) {
    mlirOperationPrint(module, put, stdout);
    putchar('\n');
  } else {
    CgTimes times = {0};
    CgStrBuf llvm, ptx;
    cg_strbuf_init(&llvm);
    cg_strbuf_init(&ptx);
    MlirModule dev;
    rc = cg_lower_gpu_module(cc, module, &dev, &times) ||
         cg_translate(cc, dev, chip, "+ptx80", 3, false, strcmp(emit, "llvm") == 0 ? &llvm : NULL,
                      strcmp(emit, "ptx") == 0 ? &ptx : NULL, &times);
    if (!mlirModuleIsNull(dev))
      mlirModuleDestroy(dev);
    if (rc)
      fprintf(stderr, "%s", cg_context_diagnostics(cc));
    else
      fputs(strcmp(emit, "llvm") == 0 ? llvm.data : ptx.data, stdout);
    cg_strbuf_free(&llvm);
    cg_strbuf_free(&ptx);
  }
  mlirOperationDestroy(module);
  cg_context_destroy(cc);
  return rc;
}
