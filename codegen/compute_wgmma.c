/* compute_wgmma.c - layer 2: the wgmma engine, matmuls on Hopper's
 * warpgroup MMA (sm_90a).
 *
 * mma.sync reaches about half of an H100's tensor-core rate; wgmma is the
 * instruction the rest of it is behind. A warpgroup (4 consecutive warps)
 * multiplies a 64-row A by a B of up to 256 columns read straight from
 * shared memory, asynchronously. Its f32 accumulator is, per warp, the
 * m16n8 layout this codegen already uses (cg_lowerer.h), repeated over
 * the columns: warp w of the group holds rows 16w..16w+15. So only the
 * operands change, never the softmax code around them:
 *   - S = Q K^T: A (Q) and B (K) from shared memory (both K-major);
 *   - O += P V: A (P) from registers (the m16n8k16 A fragment), B (V) from
 *     shared memory, N-major;
 *   - the backward's dQ = dS K with dS^T in registers (transpose_a): dS^T
 *     goes to shared memory (mem_ldmatrix.c) and is read as an M-major A.
 *
 * Operands in shared memory are read in the 128-byte swizzled layout
 * (cg_smem.c) through matrix descriptors.
 *
 * The decision is per kernel (lw_wgmma_plan): the kernel kind must allow
 * it, every matmul must fit the shape rules and every staged tile the
 * layout; otherwise the whole kernel uses mma.sync, so -mma=sync and the
 * -disable-pass variants that leave other shapes (split-K warps, narrow
 * head dims) stay correct.
 */
#include <stdio.h>
#include <string.h>

#include "codegen/compute.h"

/* ------------------------------------------------------------- plan */

typedef struct WgScan {
  const Lowerer *L;
  const char *why; /* first reason the kernel cannot use wgmma */
  int matmuls;
} WgScan;

static bool staged_tile_ok(Type t) { return t.cols % 64 == 0 && t.rows % 8 == 0; }

static const char *matmul_problem(const Lowerer *L, const Op *op) {
  Type rt = op->results[0]->type, at = op->operands[0]->type, bt = op->operands[1]->type;
  bool trans_b = attr_int(&op->attrs, "transpose_b", 0) != 0;
  int rows = 16 * L->warps;
  if (rt.dist == DIST_GROUP_COLS) {
    /* N split over warpgroups (passes/group_dq.c): each reads all of A^T
     * and its 64-column blocks of B */
    int groups = L->warps / 4;
    if (rt.rows != 64 || L->warps % 4 || groups < 2 || trans_b ||
        !attr_int(&op->attrs, "transpose_a", 0) || attr_get(&op->attrs, "b_col0") ||
        rt.cols % (64 * groups))
      return "a group matmul is not 64 rows of A^T x B split over whole warpgroups";
    rows = 64;
  } else if (rt.dist != DIST_ROWS || rt.rows != rows)
    return "a matmul result is not split into 16 rows per warp";
  if (rt.cols % 8 || rt.cols > (rt.dist == DIST_GROUP_COLS ? 256 * L->warps / 4 : 256))
    return "a matmul result is wider than 256 columns or not a multiple of 8";
  if (!lw_is_staged_type(bt) || !staged_tile_ok(bt))
    return "a matmul B operand is not a staged tile of whole 64-column blocks";
  int K = trans_b ? bt.cols : bt.rows, N = trans_b ? bt.rows : bt.cols;
  int bc0 = (int)attr_int(&op->attrs, "b_col0", 0);
  if (bc0 % 64)
    return "a matmul B column window does not start at a 64-column block";
  if (attr_get(&op->attrs, "b_col0"))
    N = rt.cols;
  if (N != rt.cols || K % 16)
    return "a matmul B operand does not match its result";
  if (attr_int(&op->attrs, "transpose_a", 0)) {
    /* A^T in registers (the backward's dS^T, K rows of M): written to
     * shared memory swizzled and read M-major. */
    if (at.kind != TYPE_TILE || at.rows != K || at.cols != rows || at.cols % 64)
      return "a transposed matmul A operand is not K x the block's rows in 64-column blocks";
  } else if (lw_is_staged_type(at)) {
    if (at.rows != rows || at.cols != K || !staged_tile_ok(at) || at.elem != bt.elem)
      return "a matmul A operand in shared memory is not the block's rows x K";
  } else if (at.kind != TYPE_TILE || at.dist != DIST_ROWS || at.rows != rows || at.cols != K) {
    return "a matmul A operand in registers is not the block's rows x K";
  }
  return NULL;
}

static void wg_scan(Op *op, void *ctx) {
  WgScan *s = ctx;
  s->matmuls += op->kind == OP_MATMUL;
  if (s->why)
    return;
  if (op->kind == OP_MATMUL)
    s->why = matmul_problem(s->L, op);
  else if ((op->kind == OP_LOAD || op->kind == OP_LOAD_PAGED) &&
           lw_is_staged_type(op->results[0]->type) && !staged_tile_ok(op->results[0]->type))
    s->why = "a staged tile is not whole 64-column blocks of 8-row groups";
}

bool lw_wgmma_plan(Lowerer *L, CgTensorCore tc, const char *target, const char *kind_why) {
  WgScan s = {L, NULL, 0};
  func_walk((Func *)L->f, wg_scan, &s);
  L->wgmma = false;
  L->has_matmul = s.matmuls > 0;
  if (tc == CG_TC_MMA_SYNC || !L->has_matmul) /* no tensor cores: either engine */
    return true;
  const char *why = NULL;
  if (strcmp(target, "sm_90a") != 0)
    why = "wgmma needs target sm_90a";
  else if (kind_why)
    why = kind_why;
  else if (L->warps % 4)
    why = "wgmma needs whole warpgroups (a multiple of 4 warps)";
  if (!why)
    why = s.why;
  if (!why) {
    L->wgmma = true;
    return true;
  }
  if (tc == CG_TC_WGMMA) {
    lw_error(L, NULL, "kernel '%s' cannot use wgmma: %s", L->f->name, why);
    return false;
  }
  return true;
}

/* ----------------------------------------------------------- matmul */

enum { DESC_SWIZZLE_128B = 1 };

/* The matrix descriptor of the swizzled tile t, starting at byte `at` of it
 * (i64 shared address bits 4..17, leading/stride byte offsets, swizzle). */
static MlirValue descriptor(Lowerer *L, const CgVal *t, MlirValue at, int lbo, int sbo) {
  CgBuilder *b = &L->b;
  MlirValue base = cg_shared_addr(b, L->smem);
  MlirValue off = cg_int_cast(b, lw_smem_base(L, t, at), b->i64);
  MlirValue addr = cg_addi(b, base, off);
  MlirValue lo = cg_arith2(b, "arith.shrui", addr, cg_const_i64(b, 4));
  if (L->remat_descriptors) /* an opaque copy: not hoisted out of the loops */
    cg_ptx(b, "", NULL, "", 0, &lo, 1);
  int64_t hi = ((int64_t)(lbo >> 4) << 16) | ((int64_t)(sbo >> 4) << 32) |
               ((int64_t)DESC_SWIZZLE_128B << 62);
  return cg_arith2(b, "arith.ori", lo, cg_const_i64(b, hi));
}

/* Byte offset, within a K-major swizzled tile, of k step kk (16 columns). */
static int kmajor_step_bytes(const CgVal *t, int kk) {
  return (kk / 4) * t->type.rows * 128 + (kk % 4) * 32;
}

void lw_wgmma_matmul(Lowerer *L, const Op *op, CgVal *r, const MmaPlan *p, bool has_acc) {
  CgBuilder *b = &L->b;
  const CgVal *a = p->a, *bm = p->bm;
  bool trans_a = p->trans_a, trans_b = p->trans_b;
  CgMmaType mt = p->mt;
  /* a group_cols result: its N is the g-th 1 / groups of the columns,
   * all of K; B's first byte is its group's first 64-column block */
  bool gcols = r->g.group_cols;
  int N = gcols ? 8 * r->g.nn : r->g.cols;
  int K = trans_b ? bm->type.cols : bm->type.rows, ksteps = K / 16;
  MlirValue bgroup = gcols ? cg_muli_c(b, lw_group(L, &r->g), N / 64 * bm->type.rows * 128)
                           : cg_const_i32(b, 0);
  int nacc = N / 2;
  bool a_smem = a->kind == CV_SMEM;
  if (r->ne != nacc || ksteps > 16) {
    lw_error(L, op, "wgmma: unexpected accumulator shape");
    return;
  }
  /* A from registers: every k step's fragment, read by the asynchronous
   * wgmmas, so all are fenced with the accumulators. Without an incoming
   * accumulator the first k step ignores D (scale-d 0): its registers start
   * as poison, nothing zeroes or fences them. */
  MlirValue regs[128 + 64];
  MlirValue poison = cg_op1(b, "llvm.mlir.poison", NULL, 0, b->f32, NULL, 0);
  for (int i = 0; i < nacc; i++)
    regs[i] = has_acc ? r->e[i] : poison;
  int nregs = nacc;
  if (!a_smem)
    for (int kk = 0; kk < ksteps; kk++, nregs += 4)
      lw_a_fragment_regs(L, mt, a, 0, kk, &regs[nregs]);
  if (has_acc)
    cg_wgmma_fence(b, regs, nregs);
  else /* fence the A fragments alone */
    cg_wgmma_fence(b, regs + nacc, nregs - nacc);

  /* B: transpose_b means B^T is stored (K's rows are the n index): the
   * K-major form; else N-major with 64-column blocks lbo bytes apart, the
   * window from column block b_col0 / 64. */
  MlirValue zero = cg_const_i32(b, 0);
  MlirValue bdesc = trans_b ? descriptor(L, bm, zero, 16, 1024)
                            : descriptor(L, bm,
                                         cg_addi(b, bgroup,
                                                 cg_const_i32(b, p->b_col0 / 64 * bm->type.rows * 128)),
                                         bm->type.rows * 128, 1024);
  MlirValue adesc = {NULL};
  if (a_smem) {
    /* This warpgroup's 64 rows: 64 rows of a K-major A, the 64-column block
     * of an M-major one. */
    MlirValue wg = cg_arith2(b, "arith.divui", L->warp, cg_const_i32(b, 4));
    /* M-major A^T: a group_cols product's only 64-column block, else the
     * warpgroup's block */
    MlirValue at = gcols ? cg_const_i32(b, 0) : cg_muli_c(b, wg, a->type.rows * 128);
    adesc = trans_a ? descriptor(L, a, at, a->type.rows * 128, 1024)
                    : descriptor(L, a, cg_muli_c(b, wg, 64 * 128), 16, 1024);
  }
  for (int kk = 0; kk < ksteps; kk++) {
    int boff = trans_b ? kmajor_step_bytes(bm, kk) : kk * 16 * 128;
    MlirValue bd = cg_addi(b, bdesc, cg_const_i64(b, boff >> 4));
    if (a_smem) {
      int aoff = trans_a ? kk * 16 * 128 : kmajor_step_bytes(a, kk);
      MlirValue ad = cg_addi(b, adesc, cg_const_i64(b, aoff >> 4));
      cg_wgmma(b, mt, N, regs, NULL, ad, bd, trans_a, !trans_b, has_acc || kk > 0);
    } else {
      cg_wgmma(b, mt, N, regs, &regs[nacc + 4 * kk], (MlirValue){NULL}, bd, false, !trans_b,
               has_acc || kk > 0);
    }
  }
  for (int i = 0; i < nacc; i++)
    r->e[i] = regs[i];
  if (attr_int(&op->attrs, "async", 0) != 1) {
    cg_wgmma_commit_wait(b, r->e, nacc);
    return;
  }
  /* Async: the group runs on; its mma_wait ties the accumulators and the A
   * fragments (registers the tensor cores still read) to the wait. */
  cg_wgmma_commit(b);
  r->mma_running = true;
  r->mma_na = nregs - nacc;
  r->mma_a = lw_alloc(L, sizeof(MlirValue) * (size_t)(r->mma_na ? r->mma_na : 1));
  for (int i = 0; i < r->mma_na; i++)
    r->mma_a[i] = regs[nacc + i];
}

void lw_wgmma_wait(Lowerer *L, const Op *op, const CgVal *src, CgVal *r) {
  int pending = (int)attr_int(&op->attrs, "pending", 0);
  int n = src->ne + src->mma_na;
  MlirValue *regs = lw_alloc(L, sizeof(MlirValue) * (size_t)(n ? n : 1));
  for (int i = 0; i < src->ne; i++)
    regs[i] = src->e[i];
  for (int i = 0; i < src->mma_na; i++)
    regs[src->ne + i] = src->mma_a[i];
  cg_wgmma_wait(&L->b, pending, regs, n);
  for (int i = 0; i < r->ne; i++)
    r->e[i] = regs[i];
}
