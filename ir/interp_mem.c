/* interp_mem.c - the interpreter's memory ops (interp.h): load, store,
 * load_scalar and load_paged on the bound tensors (rows past an extent or
 * limit read 0 and are not written; packed GQA rows; paged caches). */
#include "ir/interp_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ load, store */

static int64_t row_extent(const Tensor *t) { return t->rank == 4 ? t->dims[1] : t->dims[2]; }
static int64_t col_extent(const Tensor *t) { return t->rank == 4 ? t->dims[3] : 1; }
static int64_t head_extent(const Tensor *t) { return t->rank == 4 ? t->dims[2] : t->dims[1]; }

/* The tensor argument behind operand i (a kernel argument of this kernel). */
static Tensor *tensor_operand(Interp *I, const Op *op, int i) {
  const Value *tv = op->operands[i];
  if (tv->type.kind != TYPE_TENSOR || !tv->block || tv->block != I->f->body) {
    interp_fail(I, op, "operand %d must be a tensor argument of the kernel", i);
    return NULL;
  }
  return &I->tens[tv->arg_index];
}

/* The tensor of operand 0 and the checked (b, h, row0) of operands 1..3.
 * With {pack = G}, h is a K/V head: query heads h*G .. h*G+G-1 must exist. */
static Tensor *mem_args(Interp *I, const Op *op, int64_t *b, int64_t *h, int64_t *row0) {
  if (op->noperands < 4) {
    interp_fail(I, op, "needs tensor, b, h, row0");
    return NULL;
  }
  Tensor *t = tensor_operand(I, op, 0);
  if (!t)
    return NULL;
  const Value *tv = op->operands[0];
  *b = (int64_t)interp_val(I, op->operands[1])->s;
  *h = (int64_t)interp_val(I, op->operands[2])->s;
  *row0 = (int64_t)interp_val(I, op->operands[3])->s;
  int pack = I->info[op->id].pack;
  int64_t nh = head_extent(t);
  if (*b < 0 || *b >= t->dims[0] || *h < 0 || (pack ? (*h + 1) * pack > nh : *h >= nh)) {
    interp_fail(I, op, "%%%s: batch %lld / head %lld out of range", tv->name ? tv->name : "?",
         (long long)*b, (long long)*h);
    return NULL;
  }
  return t;
}

/* Where row R (= row0 + r) of an access lands: the tensor's head and row.
 * False when it is past the extent (or, packed, past the G * n rows of the
 * group: row R is query head h*G + R / n, token R % n). */
static bool map_row(const Tensor *t, int pack, int64_t h, int64_t R, int64_t *head, int64_t *row) {
  int64_t n = row_extent(t);
  if (R < 0)
    return false;
  if (!pack) {
    *head = h;
    *row = R;
    return R < n;
  }
  if (n <= 0 || R >= pack * n)
    return false;
  *head = h * pack + R / n;
  *row = R % n;
  return true;
}

/* Is a tile of rows x cols on rank 3 tensor t a 1 x C row of positions
 * row0 .. row0 + C - 1 (not R x 1)? */
static bool row_vector(const Interp *I, const Op *op, const Tensor *t, int rows, int cols) {
  return t->rank == 3 && rows == 1 && cols != 1 && !I->info[op->id].pack;
}

/* Address of (b, h, row, col), by rank. */
static double *elem_ptr(Tensor *t, int64_t b, int64_t h, int64_t row, int64_t col) {
  if (t->rank == 4)
    return t->data + b * t->strides[0] + row * t->strides[1] + h * t->strides[2] +
           col * t->strides[3];
  return t->data + b * t->strides[0] + h * t->strides[1] + row * t->strides[2];
}

/* load t, i0 .., row0, col0 {rect = 1}: rows row0.. of dim r-2, columns
 * col0.. of dim r-1 at the other indices; elements past the extents read 0
 * (as the tensor map's copy does), the other indices must be inside. */
static void exec_load_rect(Interp *I, const Op *op) {
  Tensor *t = tensor_operand(I, op, 0);
  int rows, cols;
  if (!t || !interp_tile_type(I, op, &rows, &cols))
    return;
  if (t->rank < 2 || op->noperands != 1 + t->rank) {
    interp_fail(I, op, "needs %d indices", t->rank);
    return;
  }
  int r = t->rank;
  int64_t base = 0;
  for (int d = 0; d < r - 2; d++) {
    int64_t k = (int64_t)interp_val(I, op->operands[1 + d])->s;
    if (k < 0 || k >= t->dims[d]) {
      interp_fail(I, op, "index %d is %lld, outside [0, %lld)", d, (long long)k,
                  (long long)t->dims[d]);
      return;
    }
    base += k * t->strides[d];
  }
  int64_t row0 = (int64_t)interp_val(I, op->operands[r - 1])->s;
  int64_t col0 = (int64_t)interp_val(I, op->operands[r])->s;
  RtVal *out = interp_val(I, op->results[0]);
  if (!interp_set_tile(I, out, rows, cols))
    return;
  bool rnd = I->o->round_casts;
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) {
      int64_t R = row0 + i, C = col0 + j;
      double x = R >= 0 && R < t->dims[r - 2] && C >= 0 && C < t->dims[r - 1]
                     ? t->data[base + R * t->strides[r - 2] + C * t->strides[r - 1]]
                     : 0;
      out->t[(size_t)i * cols + j] = rnd ? interp_round(x, t->elem) : x;
    }
}

void interp_exec_load(Interp *I, const Op *op) {
  if (attr_get(&op->attrs, "rect")) {
    exec_load_rect(I, op);
    return;
  }
  int64_t b, h, row0;
  Tensor *t = mem_args(I, op, &b, &h, &row0);
  int rows, cols;
  if (!t || !interp_tile_type(I, op, &rows, &cols))
    return;
  bool along_cols = row_vector(I, op, t, rows, cols);
  if (cols != col_extent(t) && !along_cols) {
    interp_fail(I, op, "tile has %d columns, the tensor %lld", cols, (long long)col_extent(t));
    return;
  }
  /* the optional 5th operand: rows at or past it read 0 (a cache length) */
  int64_t limit = op->noperands == 5 ? (int64_t)interp_val(I, op->operands[4])->s : INT64_MAX;
  RtVal *out = interp_val(I, op->results[0]);
  if (!interp_set_tile(I, out, rows, cols))
    return;
  bool rnd = I->o->round_casts;
  int pack = I->info[op->id].pack;
  if (along_cols) {
    for (int c = 0; c < cols; c++) {
      int64_t R = row0 + c;
      double x = R >= 0 && R < row_extent(t) && R < limit ? *elem_ptr(t, b, h, R, 0) : 0;
      out->t[c] = rnd ? interp_round(x, t->elem) : x;
    }
    return;
  }
  for (int r = 0; r < rows; r++) {
    int64_t head = 0, row = 0;
    bool in = map_row(t, pack, h, row0 + r, &head, &row) && row < limit;
    for (int c = 0; c < cols; c++) {
      double x = in ? *elem_ptr(t, b, head, row, c) : 0;
      out->t[(size_t)r * cols + c] = rnd ? interp_round(x, t->elem) : x;
    }
  }
}

void interp_exec_store(Interp *I, const Op *op) {
  int64_t b, h, row0;
  Tensor *t = mem_args(I, op, &b, &h, &row0);
  if (!t)
    return;
  if (op->noperands != 5) {
    interp_fail(I, op, "needs tensor, b, h, row0, tile");
    return;
  }
  RtVal *v = interp_val(I, op->operands[4]);
  if (!interp_need_tile(I, op, v, "stored value"))
    return;
  bool along_cols = row_vector(I, op, t, v->rows, v->cols);
  int col0 = I->info[op->id].col0;
  bool window = attr_get(&op->attrs, "col0") != NULL;
  if ((window ? col0 < 0 || col0 + v->cols > col_extent(t) : v->cols != col_extent(t)) &&
      !along_cols) {
    interp_fail(I, op, "tile has %d columns from %d, the tensor %lld", v->cols, col0,
                (long long)col_extent(t));
    return;
  }
  bool rnd = I->o->round_casts, add = I->info[op->id].reduce_add;
  int pack = I->info[op->id].pack;
  if (add && t->elem != ELEM_F32) {
    interp_fail(I, op, "reduce = add needs an f32 tensor");
    return;
  }
  for (int r = 0; r < v->rows; r++)
    for (int c = 0; c < v->cols; c++) {
      int64_t head = h, row = row0 + (along_cols ? c : r), col = along_cols ? 0 : col0 + c;
      if (along_cols ? row < 0 || row >= row_extent(t) : !map_row(t, pack, h, row0 + r, &head, &row))
        continue;
      double x = v->t[(size_t)r * v->cols + c], *e = elem_ptr(t, b, head, row, col);
      if (add)
        x += *e;
      *e = rnd ? interp_round(x, t->elem) : x;
    }
}

/* Element i of a rank 1 i32 tensor (cache_seqlens[b]). */
void interp_exec_load_scalar(Interp *I, const Op *op) {
  Tensor *t = op->noperands == 2 ? tensor_operand(I, op, 0) : NULL;
  if (!t)
    return;
  int64_t i = (int64_t)interp_val(I, op->operands[1])->s;
  if (t->rank != 1 || i < 0 || i >= t->dims[0]) {
    interp_fail(I, op, "index %lld out of range", (long long)i);
    return;
  }
  interp_set_scalar(interp_val(I, op->results[0]), t->data[i * t->strides[0]]);
}

/* The physical page of logical page `lp` of sequence b, or -1 when it is past
 * the block table row. A table entry outside the pool is an error. */
static int64_t page_of(Interp *I, const Op *op, Tensor *bt, Tensor *cache, int64_t b, int64_t lp) {
  if (lp >= bt->dims[1])
    return -1;
  double e = bt->data[b * bt->strides[0] + lp * bt->strides[1]];
  if (!(e >= 0 && e < (double)cache->dims[0])) {
    interp_fail(I, op, "block_table[%lld, %lld] = %g is not a page of the pool", (long long)b,
         (long long)lp, e);
    return -1;
  }
  return (int64_t)e;
}

/* load_paged cache, block_table, b, h, row0, limit {page_size = P}. */
void interp_exec_load_paged(Interp *I, const Op *op) {
  Tensor *t = op->noperands == 6 ? tensor_operand(I, op, 0) : NULL;
  Tensor *bt = t ? tensor_operand(I, op, 1) : NULL;
  int rows, cols;
  if (!bt || !interp_tile_type(I, op, &rows, &cols))
    return;
  int64_t b = (int64_t)interp_val(I, op->operands[2])->s, h = (int64_t)interp_val(I, op->operands[3])->s;
  int64_t row0 = (int64_t)interp_val(I, op->operands[4])->s, limit = (int64_t)interp_val(I, op->operands[5])->s;
  int64_t P = I->info[op->id].page_size;
  if (t->rank != 4 || t->dims[1] != P || bt->rank != 2 || cols != t->dims[3]) {
    interp_fail(I, op, "cache must be [num_pages, %lld, heads, %d]", (long long)P, cols);
    return;
  }
  if (b < 0 || b >= bt->dims[0] || h < 0 || h >= t->dims[2]) {
    interp_fail(I, op, "batch %lld / head %lld out of range", (long long)b, (long long)h);
    return;
  }
  RtVal *out = interp_val(I, op->results[0]);
  if (!interp_set_tile(I, out, rows, cols))
    return;
  bool rnd = I->o->round_casts;
  for (int r = 0; r < rows && !I->failed; r++) {
    int64_t R = row0 + r;
    int64_t page = R >= 0 && R < limit ? page_of(I, op, bt, t, b, R / P) : -1;
    for (int c = 0; c < cols; c++) {
      double x = page >= 0 ? *elem_ptr(t, page, h, R % P, c) : 0;
      out->t[(size_t)r * cols + c] = rnd ? interp_round(x, t->elem) : x;
    }
  }
}

/* ---------------------------------------------------------- gather, scatter */

/* The offset in t of the element at indices k[0 .. rank-1]; false (failed)
 * when an index is outside its dim. */
static bool element_offset(Interp *I, const Op *op, const Tensor *t, const int64_t *k,
                           int64_t *off) {
  *off = 0;
  for (int i = 0; i < t->rank; i++) {
    if (k[i] < 0 || k[i] >= t->dims[i]) {
      interp_fail(I, op, "index %d is %lld, outside [0, %lld)", i, (long long)k[i],
                  (long long)t->dims[i]);
      return false;
    }
    *off += k[i] * t->strides[i];
  }
  return true;
}

/* gather t, i0 .. i(rank-1): the indices broadcast (a scalar, R x 1, 1 x C
 * or R x C each); an index outside its dim is an error (the frontend
 * proved it cannot happen, the runtime checked the dims). */
void interp_exec_gather(Interp *I, const Op *op) {
  Tensor *t = op->noperands >= 2 ? tensor_operand(I, op, 0) : NULL;
  if (!t)
    return;
  if (op->noperands != 1 + t->rank) {
    interp_fail(I, op, "needs %d indices", t->rank);
    return;
  }
  const RtVal *ix[4];
  int rows = 1, cols = 1;
  bool tile = false;
  for (int i = 0; i < t->rank; i++) {
    ix[i] = interp_val(I, op->operands[1 + i]);
    if (ix[i]->tile) {
      tile = true;
      rows = ix[i]->rows > rows ? ix[i]->rows : rows;
      cols = ix[i]->cols > cols ? ix[i]->cols : cols;
    }
  }
  RtVal *out = interp_val(I, op->results[0]);
  if (tile && !interp_set_tile(I, out, rows, cols))
    return;
  for (int r = 0; r < rows && !I->failed; r++)
    for (int c = 0; c < cols; c++) {
      int64_t k[4], off;
      for (int i = 0; i < t->rank; i++) {
        const RtVal *v = ix[i];
        k[i] = (int64_t)(!v->tile ? v->s : v->t[(size_t)(v->rows == 1 ? 0 : r) * v->cols + (v->cols == 1 ? 0 : c)]);
      }
      if (!element_offset(I, op, t, k, &off))
        return;
      double x = t->data[off];
      if (t->elem == ELEM_I32 && isnan(x)) { /* a block list's entry never written */
        interp_fail(I, op, "reads an element never written");
        return;
      }
      if (tile)
        out->t[(size_t)r * cols + c] = x;
      else
        interp_set_scalar(out, x);
    }
}

/* scatter %t, i0 .. i(r-1), %v: one element written (bounds checked, the
 * value an exact i32). */
void interp_exec_scatter(Interp *I, const Op *op) {
  Tensor *t = op->noperands >= 3 ? tensor_operand(I, op, 0) : NULL;
  if (!t)
    return;
  if (op->noperands != 2 + t->rank) {
    interp_fail(I, op, "needs %d indices and a value", t->rank);
    return;
  }
  int64_t k[4], off;
  for (int i = 0; i < t->rank; i++)
    k[i] = (int64_t)interp_val(I, op->operands[1 + i])->s;
  if (!element_offset(I, op, t, k, &off))
    return;
  double x = interp_val(I, op->operands[1 + t->rank])->s;
  if (x != (double)(int32_t)x) {
    interp_fail(I, op, "value %g is not an i32", x);
    return;
  }
  t->data[off] = x;
}
