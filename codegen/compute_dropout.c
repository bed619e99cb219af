/* compute_dropout.c - layer 2: dropout's keep test on packed pairs of P.
 *
 * ir/dropout.c writes the keep decision of each element as plain ops: the
 * element's 32-bit Philox word, its half k & 1 (a shift by 16 (k & 1)),
 * compared in binary16 order against the threshold (cmp hlt), the flip bit,
 * then `select(keep, P, 0)` and a cast to bf16 / f16 for the P V matmul.
 * Element by element that is a shift, a compare, an xor and a select.
 *
 * In a tensor-core accumulator fragment a thread holds columns c and c + 1
 * (c even) of a row side by side, and the P V matmul packs their 16-bit
 * values into one register. When the word does not depend on bit 0 of the
 * column (the counters clear it) the two elements read the two halves of
 * one word, so here, per pair:
 *
 *   m = set.lt.u32.f16x2 word, t | t << 16   both halves' tests: 0xffff / 0
 *   P = cvt.rn.bf16x2.f32 P1, P0 & (m ^ flip)   one lop3 applies them
 *
 * what the select and cast ops mean, element for element (docs/dropout.md).
 * Anything that is not exactly that form is left to lw_elementwise.
 */
#include <string.h>

#include "codegen/compute.h"

#include <mlir-c/BuiltinTypes.h>

/* The operands of the form, when op is it. */
typedef struct DropoutPair {
  const Value *p;     /* f32 tile: the probabilities (select's value) */
  const Value *word;  /* u32 tile: each element's Philox word */
  const Value *thr;   /* u32 scalar: t | flip << 16 */
  const Value *flip;  /* i1 scalar */
} DropoutPair;

static const Op *def_is(const Value *v, OpKind k) {
  return v && v->def && v->def->kind == k ? v->def : NULL;
}

static bool is_pred(const Op *op, const char *pred) {
  return op && op->kind == OP_CMP && strcmp(attr_str(&op->attrs, "pred", ""), pred) == 0;
}

static bool is_const(const Value *v, double want) {
  double c;
  return value_const((Value *)v, &c) && c == want;
}

/* iota {axis = 1, and = mask} with an even base (or none): column bits. */
static bool col_iota(const Op *io, int64_t *mask) {
  if (!io || io->kind != OP_IOTA || attr_int(&io->attrs, "axis", -1) != 1 || !attr_get(&io->attrs, "and"))
    return false;
  if (io->noperands && !lw_index_multiple_of(io->operands[0], 2))
    return false;
  *mask = attr_int(&io->attrs, "and", -1);
  return true;
}

enum { SEEN_MAX = 1024 };

/* Does v hold equal values at columns c and c + 1 (c even) of every row:
 * built from scalars, row iotas and column iotas that clear bit 0, by
 * elementwise ops? seen: the ops already shown to (Philox's rounds share
 * their operands: a DAG). */
static bool pair_invariant(const Value *v, const Op **seen, int *nseen) {
  if (v->type.kind == TYPE_SCALAR)
    return true;
  const Op *d = v->def;
  if (!d)
    return false;
  for (int i = 0; i < *nseen; i++)
    if (seen[i] == d)
      return true;
  int64_t mask;
  bool ok;
  switch (d->kind) {
  case OP_CONST: case OP_FULL: ok = true; break;
  case OP_IOTA:
    ok = attr_int(&d->attrs, "axis", -1) == 0 || (col_iota(d, &mask) && !(mask & 1));
    break;
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_MIN: case OP_MAX: case OP_CMP: case OP_AND:
  case OP_OR: case OP_XOR: case OP_MULHI: case OP_SHR: case OP_NOT: case OP_SELECT: case OP_CAST:
    ok = true;
    for (int i = 0; i < d->noperands && ok; i++)
      ok = pair_invariant(d->operands[i], seen, nseen);
    break;
  default: ok = false;
  }
  if (ok && *nseen < SEEN_MAX)
    seen[(*nseen)++] = d;
  return ok;
}

/* cast(select{dropout}(cmp ne(cmp hlt(shr(word, mul(cast(iota{axis 1, and 1}),
 * 16)), thr), flip), p, 0)) to a 16-bit float, word pair-invariant. */
static bool match(const Op *op, DropoutPair *m) {
  ElemType to = op->results[0]->type.elem;
  if (op->kind != OP_CAST || (to != ELEM_BF16 && to != ELEM_F16) ||
      op->results[0]->type.kind != TYPE_TILE)
    return false;
  const Op *sel = def_is(op->operands[0], OP_SELECT);
  if (!sel || !attr_int(&sel->attrs, "dropout", 0) || !is_const(sel->operands[2], 0) ||
      sel->operands[1]->type.elem != ELEM_F32)
    return false;
  const Op *keep = sel->operands[0]->def;
  if (!is_pred(keep, "ne") || keep->operands[1]->type.kind != TYPE_SCALAR)
    return false;
  const Op *below = keep->operands[0]->def;
  if (!is_pred(below, "hlt") || below->operands[1]->type.kind != TYPE_SCALAR)
    return false;
  const Op *shr = def_is(below->operands[0], OP_SHR);
  const Op *mul = shr ? def_is(shr->operands[1], OP_MUL) : NULL;
  const Op *bit = mul ? def_is(mul->operands[0], OP_CAST) : NULL;
  int64_t mask;
  if (!bit || !is_const(mul->operands[1], 16) || !col_iota(bit->operands[0]->def, &mask) || mask != 1)
    return false;
  const Op *seen[SEEN_MAX];
  int nseen = 0;
  if (!pair_invariant(shr->operands[0], seen, &nseen))
    return false;
  *m = (DropoutPair){sel->operands[1], shr->operands[0], below->operands[1], keep->operands[1]};
  return true;
}

bool lw_dropout_cast(Lowerer *L, const Op *op) {
  DropoutPair m;
  if (!match(op, &m))
    return false;
  Type rt = op->results[0]->type;
  TileGeom g;
  if (!lw_geom(L, rt, &g, op))
    return true; /* reported at op */
  if (g.cls != TC_FULL || lw_geom_count(&g) > 4096)
    return false; /* columns c, c + 1 are elements e, e + 1 of TC_FULL only */
  const CgVal *p = lw_get(L, m.p), *word = lw_get(L, m.word);
  const CgVal *thr = lw_get(L, m.thr), *flip = lw_get(L, m.flip);
  if (!p || !word || !thr || !flip || p->kind != CV_TILE || word->kind != CV_TILE ||
      thr->kind != CV_SCALAR || flip->kind != CV_SCALAR ||
      (!p->splat && !lw_compatible(&p->g, &g)) || (!word->splat && !lw_compatible(&word->g, &g)))
    return false;
  CgBuilder *b = &L->b;
  MlirValue t = cg_arith2(b, "arith.andi", thr->v, cg_const_i32(b, 0xffff));
  MlirValue t2 = cg_muli(b, t, cg_const_i32(b, 0x10001));
  MlirValue f = cg_op1(b, "arith.extui", (MlirValue[]){flip->v}, 1, b->i32, NULL, 0);
  MlirValue fm = cg_subi(b, cg_const_i32(b, 0), f); /* 0 or all ones */
  CgMmaType mt = rt.elem == ELEM_BF16 ? CG_MMA_BF16 : CG_MMA_F16;
  MlirType et = rt.elem == ELEM_BF16 ? b->bf16 : b->f16;
  MlirType v2 = mlirVectorTypeGet(1, (int64_t[]){2}, et);
  CgVal *r = lw_tile(L, rt, &g);
  int mi[4096], ni[4096], e[4096];
  lw_positions(&g, mi, ni, e);
  for (int k = 0; k < r->ne; k += 2) {
    MlirValue w = lw_elem(L, word, g.cls, mi[k], ni[k], e[k]);
    MlirValue args[2] = {w, t2};
    MlirValue keep = cg_ptx_pure(b, "set.lt.u32.f16x2 $0, $1, $2;", "=r,r,r", args, 2, b->i32);
    MlirValue pv = cg_pack2(b, mt, lw_elem(L, p, g.cls, mi[k], ni[k], e[k]),
                            lw_elem(L, p, g.cls, mi[k + 1], ni[k + 1], e[k + 1]));
    MlirValue kept = cg_arith2(b, "arith.andi", pv, cg_arith2(b, "arith.xori", keep, fm));
    MlirValue v = cg_bitcast(b, kept, v2);
    r->e[k] = cg_vector_extract(b, v, 0);
    r->e[k + 1] = cg_vector_extract(b, v, 1);
  }
  lw_set(L, op->results[0], r);
  return true;
}
