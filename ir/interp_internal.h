/* interp_internal.h - the interpreter's state and the helpers its parts
 * share: interp.c (values, tile-level ops, loops), interp_elementwise.c,
 * interp_mem.c, interp_grad.c (the grad op, evaluated by dual numbers
 * independently of the differentiate pass), interp_roles.c (warp
 * specialization's rings and roles), interp_kernel.c (preparing and running
 * one kernel), interp_lists.c and interp_module.c (the drivers that run
 * several). */
#ifndef FLASHC_INTERP_INTERNAL_H
#define FLASHC_INTERP_INTERNAL_H

#include <stdbool.h>

#include "ir/interp.h"


typedef struct RtRing RtRing; /* interp_roles.c */

typedef struct RtVal {
  bool tile;
  int rows, cols;
  double s;  /* scalar */
  double *t; /* tile, rows * cols, row-major */
  size_t cap;
  RtRing *ring; /* a ring op's result: its steps' tiles */
} RtVal;

typedef struct Tensor {
  double *data;
  int rank;
  int64_t dims[4], strides[4];
  ElemType elem;
  bool owned;
} Tensor;

/* Decoded attributes. */
enum { P_LT, P_LE, P_GT, P_GE, P_EQ, P_NE, P_HLT };

typedef struct OpInfo {
  int pred;        /* cmp */
  int pack;        /* load/store {pack = G}: 0 when absent */
  int page_size;   /* load_paged */
  int reduce;      /* reduce: 0 max, 1 min, 2 sum */
  int axis;        /* iota */
  double value;    /* const, full */
  bool transpose_a, transpose_b;
  int b_col0, col0; /* matmul's B column window, store's column offset */
  bool reduce_add; /* store {reduce = add} */
  bool dim_kv;     /* tile_size */
} OpInfo;

typedef struct Interp {
  const Func *f;
  const InterpOptions *o;
  int64_t batch, sq, sk;
  InterpSizes sz;
  RtVal *vals;
  int nvals;
  OpInfo *info;
  int nops;
  Tensor *tens; /* per kernel argument (index = arg index) */
  /* grad: the x of the grad being evaluated, flags and derivatives per
   * value id (allocated at the first grad) */
  const Value *gx;
  unsigned char *gflags;
  RtVal *gder;
  int gdepth;
  char *err;
  size_t errlen;
  bool failed;
} Interp;

/* Element (r, c) of a broadcast operand is p[r*rs + c*cs]. */
typedef struct Acc {
  const double *p;
  size_t rs, cs;
} Acc;

/* Element (r, c) of a broadcast operand. */
#define AT(a, r, c) ((a).p[(size_t)(r) * (a).rs + (size_t)(c) * (a).cs])

void interp_set_scalar(RtVal *r, double x);
void interp_fail(Interp *I, const Op *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
RtVal *interp_val(Interp *I, const Value *v);
/* Makes r a rows x cols tile (storage reused or grown); false after a failure. */
bool interp_set_tile(Interp *I, RtVal *r, int rows, int cols);
void interp_copy_val(Interp *I, RtVal *dst, const RtVal *src);
Acc interp_acc_of(const RtVal *v);
/* x converted to element type `to` (rounded when the options say so). */
double interp_cast_to(const Interp *I, ElemType to, double x);
/* A tile extent of a type: a number, Br / Bc, or a tensor extent symbol. */
int64_t interp_resolve_dim(const Interp *I, int d);
/* op's result type is a tile: its extents; false (failed) otherwise. */
bool interp_tile_type(Interp *I, const Op *op, int *rows, int *cols);
/* v must be a tile (`what` names it in the failure). */
bool interp_need_tile(Interp *I, const Op *op, const RtVal *v, const char *what);
/* Elementwise ops (interp_elementwise.c). */
void interp_exec_elementwise(Interp *I, const Op *op);
/* Memory ops (interp_mem.c). */
void interp_exec_load(Interp *I, const Op *op);
void interp_exec_store(Interp *I, const Op *op);
void interp_exec_load_scalar(Interp *I, const Op *op);
void interp_exec_load_paged(Interp *I, const Op *op);
void interp_exec_gather(Interp *I, const Op *op);
void interp_exec_scatter(Interp *I, const Op *op);
/* The grad op (interp_grad.c). */
void interp_exec_grad(Interp *I, const Op *op);
/* Warp specialization (interp_roles.c). */
void interp_exec_ring(Interp *I, const Op *op);
void interp_exec_warp_roles(Interp *I, const Op *op);
void interp_exec_ring_put(Interp *I, const Op *op);
void interp_exec_ring_get(Interp *I, const Op *op);
void interp_exec_ring_release(Interp *I, const Op *op);
/* The last-step ring releases (ring_release {last_step}) of a loop that
 * runs no iteration: freed where the loop stands. */
void interp_release_after_loop(Interp *I, const Op *loop);
void interp_free_ring(RtRing *r); /* NULL is harmless */
/* Runs the ops of blk; returns its terminator (yield/return) or NULL. */
const Op *interp_exec_block(Interp *I, const Block *blk);
/* term, the terminator of a region of owner, yields n values (a region
 * without values may end without one); false (failed) otherwise. */
bool interp_check_yield(Interp *I, const Op *owner, const Op *term, int n);

/* Is `name` bound in b[0..n-1]? Its index in *at. */
bool interp_find_binding(const InterpBinding *b, int n, const char *name, int *at);
/* A dense NaN-poisoned tensor for argument a of kernel f (its dims
 * resolved under f's attributes: block lists' row_tiles / list_len; f NULL:
 * a workspace shared by the kernels of a module, sized from a's type).
 * false when out of memory (interp_kernel.c). */
bool interp_alloc_arg(const Func *f, const Value *a, const InterpSizes *sz, InterpBinding *out);
/* Runs f, which visits block lists and was given none, after its classifier
 * built them (interp_lists.c). Returns 0, or -1 with err set. */
int interp_run_with_lists(const Func *f, const InterpBinding *tensors, int ntensors,
                          const InterpSizes *sz, const InterpOptions *o, char *err,
                          size_t errlen);

#endif
