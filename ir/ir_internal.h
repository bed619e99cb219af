/* ir_internal.h - helpers shared by printer.c, parser*.c and verifier*.c; not
 * part of the IR's public interface.
 *
 * The printer's value naming lives here because the verifier names values in
 * its messages exactly as the printed IR does, so a message can be matched
 * against `-emit=tile` output by eye.
 */
#ifndef FLASHC_IR_INTERNAL_H
#define FLASHC_IR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ir/ir.h"

/* A hash map from pointers to ints (open addressing, never shrinks). The
 * printer and verifier use it instead of Value.id so that printing an op for
 * debugging never disturbs a pass that keeps its own numbering in id. */
typedef struct PtrMap {
  const void **keys;
  int *vals;
  size_t n, cap;
} PtrMap;

void ptrmap_put(PtrMap *m, const void *key, int val);
/* The value for key, or dflt when absent. */
int ptrmap_get(const PtrMap *m, const void *key, int dflt);
void ptrmap_free(PtrMap *m);

/* How every value of one kernel prints (%q, %0, %r#1, %x_1, ...). */
typedef struct ValueNames {
  PtrMap index;  /* Value* -> index into text */
  char **text;   /* printed name of each value, '%' included */
  int n, cap;
  char **taken; /* hash set (open addressing) of the base names in use */
  size_t ntaken, captaken;
  int next_number;
} ValueNames;

/* Names every value of f (or of the lone op when f is NULL) in print order. */
void names_init_func(ValueNames *vn, const Func *f);
void names_init_op(ValueNames *vn, const Op *op);
/* The printed name of v ("%<undefined>" when v was not named: a value from
 * outside the kernel or NULL). */
const char *names_get(const ValueNames *vn, const Value *v);
void names_free(ValueNames *vn);

/* One-line summary of an op: `%r:2 = for %j` / `%s = matmul %qt, %kt`. */
void op_summary(char *buf, size_t len, const Op *op, const ValueNames *vn);

/* True when s is a valid bare identifier of the text form. */
bool ir_is_ident(const char *s);

#endif
