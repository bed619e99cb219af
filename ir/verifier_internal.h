/* verifier_internal.h - the tile IR verifier's state and the helpers its
 * parts share: verifier.c (types, structure, control flow, dispatch) and the
 * op rules by family, verifier_elementwise.c, verifier_mem.c,
 * verifier_compute.c and verifier_roles.c. Not part of the IR's interface
 * (module_verify, ir.h).
 */
#ifndef FLASHC_VERIFIER_INTERNAL_H
#define FLASHC_VERIFIER_INTERNAL_H

#include <stdbool.h>
#include <stdio.h>

#include "ir/ir_internal.h"


typedef struct Verifier {
  const Func *f;
  const char *after;
  FILE *diag;
  int nerrors;
  ValueNames names;
  PtrMap visible; /* Value* -> 1 while it may be used, 0 after its scope */
  bool symbolic_ok;
} Verifier;
/* Counts an error and prints it (unless diag is NULL). */
void report(Verifier *v, const Op *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Type t printed into buf (of 160 chars). */
static inline const char *tstr(Type t, char *buf) { return type_str(t, buf, 160); }

static inline bool is_tile(Type t) { return t.kind == TYPE_TILE; }
static inline bool is_index(Type t) { return t.kind == TYPE_SCALAR && t.elem == ELEM_INDEX; }
static inline bool is_value_type(Type t) { return t.kind == TYPE_SCALAR || t.kind == TYPE_TILE; }
static inline bool is_float_elem(ElemType e) { return e == ELEM_F16 || e == ELEM_BF16 || e == ELEM_F32; }

/* Same kind, element type and extents; dist is not compared. */
static inline bool same_shape_elem(Type a, Type b) {
  if (a.kind != b.kind || a.elem != b.elem)
    return false;
  return a.kind != TYPE_TILE || (a.rows == b.rows && a.cols == b.cols);
}

static inline bool same_shape(Type a, Type b) {
  if (a.kind != b.kind)
    return false;
  return a.kind != TYPE_TILE || (a.rows == b.rows && a.cols == b.cols);
}

static inline Type opnd(const Op *op, int i) { return op->operands[i]->type; }
static inline Type res(const Op *op, int i) { return op->results[i]->type; }

/* Operand (nops < 0: any number) and result counts; false after a report. */
bool want_counts(Verifier *v, const Op *op, int nops, int nres);
/* Result 0 has expect's kind, element type and extents. */
void want_result(Verifier *v, const Op *op, Type expect);
/* Attribute key is a word of the NULL-terminated list. */
bool word_in(const Op *op, const char *key, const char *const *words);

/* The rules of each op kind, by family. */
void check_const(Verifier *v, const Op *op);
void check_tile_size(Verifier *v, const Op *op);
void check_iota(Verifier *v, const Op *op);
void check_binary(Verifier *v, const Op *op);
void check_unary(Verifier *v, const Op *op);
void check_select(Verifier *v, const Op *op);
void check_cast(Verifier *v, const Op *op);

void check_load(Verifier *v, const Op *op);
void check_store(Verifier *v, const Op *op);
void check_load_scalar(Verifier *v, const Op *op);
void check_gather(Verifier *v, const Op *op);
void check_scatter(Verifier *v, const Op *op);
void check_load_paged(Verifier *v, const Op *op);

void check_reduce(Verifier *v, const Op *op);
void check_matmul(Verifier *v, const Op *op);
void check_mma_wait(Verifier *v, const Op *op);
void check_grad(Verifier *v, const Op *op);
void check_rowreduce(Verifier *v, const Op *op);
void check_mask(Verifier *v, const Op *op);
void check_rescale(Verifier *v, const Op *op);
void check_xwarp(Verifier *v, const Op *op);

void check_ring(Verifier *v, const Op *op);
void check_warp_roles(Verifier *v, const Op *op);
void check_ring_put(Verifier *v, const Op *op);
void check_ring_get(Verifier *v, const Op *op);
void check_ring_release(Verifier *v, const Op *op);
void check_mma_turn(Verifier *v, const Op *op);

#endif
