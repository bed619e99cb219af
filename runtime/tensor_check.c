/* tensor_check.c - the checks every launch makes of its tensors (q, k, v, o,
 * the backward's dout, dq, dk, dv, and the kernel's run-time inputs):
 * forward (check.c), decode (decode.c) and backward (backward.c) validation
 * share them. Each returns FA_OK or the first failure's status with a
 * message that names the tensor, the dimension and the numbers. */
#include <ctype.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

/* Byte offsets stay below 2^62 so that pointer + offset never wraps. */
#define MAX_BYTES (INT64_C(1) << 62)

enum { Q, K };

const char *const fa_dim_names[4] = {"batch", "seqlen", "heads", "head_dim"};

/* a * b for a, b >= 0; returns 0 on overflow of int64. */
int fa_mul_ok(int64_t a, int64_t b, int64_t *r) {
  if (a != 0 && b > INT64_MAX / a) return 0;
  *r = a * b;
  return 1;
}

/* a + b for a, b >= 0; returns 0 on overflow of int64. */
int fa_add_ok(int64_t a, int64_t b, int64_t *r) {
  if (b > INT64_MAX - a) return 0;
  *r = a + b;
  return 1;
}

int fa_has_elements(const fa_tensor *t) {
  return t->dim[0] > 0 && t->dim[1] > 0 && t->dim[2] > 0 && t->dim[3] > 0;
}

fa_status fa_check_nulls(const fa_launch_tensors *c) {
  for (int i = 0; i < c->n; i++)
    if (!c->t[i]->data && fa_has_elements(c->t[i])) {
      fa_fmt(c->msg, c->len, "%s: data pointer is NULL", c->name[i]);
      return FA_ERR_NULL_POINTER;
    }
  return FA_OK;
}

fa_status fa_check_dtypes(const fa_launch_tensors *c) {
  for (int i = 0; i < c->n; i++)
    if (c->t[i]->dtype != c->dtype) {
      fa_fmt(c->msg, c->len, "%s: dtype is %s but the kernel was compiled for %s", c->name[i],
             fa_dtype_name(c->t[i]->dtype), fa_dtype_name(c->dtype));
      return FA_ERR_DTYPE;
    }
  return FA_OK;
}

fa_status fa_check_nonnegative(const fa_launch_tensors *c) {
  for (int i = 0; i < c->n; i++)
    for (int d = 0; d < 4; d++)
      if (c->t[i]->dim[d] < 0) {
        fa_fmt(c->msg, c->len, "%s: dim[%d] (%s) is %" PRId64 ", a size cannot be negative",
               c->name[i], d, c->dims[i][d], c->t[i]->dim[d]);
        return FA_ERR_SHAPE;
      }
  return FA_OK;
}

fa_status fa_check_strides(const fa_launch_tensors *c) {
  for (int i = 0; i < c->n; i++) {
    const fa_tensor *t = c->t[i];
    for (int d = 0; d < 4; d++)
      if (t->stride[d] < 0) {
        fa_fmt(c->msg, c->len, "%s: stride[%d] (%s) is %" PRId64 ", strides cannot be negative",
               c->name[i], d, c->dims[i][d], t->stride[d]);
        return FA_ERR_STRIDE;
      }
    if (t->stride[3] != 1) {
      fa_fmt(c->msg, c->len,
             "%s: the last dimension (head_dim) is not contiguous: stride[3] is %" PRId64
             ", must be 1",
             c->name[i], t->stride[3]);
      return FA_ERR_STRIDE;
    }
  }
  return FA_OK;
}

/* Kernels move 16 bytes at a time: every row start must be 16-byte aligned. */
fa_status fa_check_alignment(const fa_launch_tensors *c, const void *lse) {
  for (int i = 0; i < c->n; i++) {
    const fa_tensor *t = c->t[i];
    uintptr_t p = (uintptr_t)t->data;
    if (p % 16) {
      fa_fmt(c->msg, c->len, "%s: data pointer 0x%" PRIxPTR " is not 16-byte aligned (offset %u)",
             c->name[i], p, (unsigned)(p % 16));
      return FA_ERR_ALIGNMENT;
    }
    int64_t per16 = 16 / (int64_t)fa_dtype_size(t->dtype);
    for (int d = 0; d < 3; d++)
      if (t->stride[d] % per16) {
        fa_fmt(c->msg, c->len,
               "%s: stride[%d] (%s) is %" PRId64 " elements, not a multiple of %" PRId64
               " (16 bytes)",
               c->name[i], d, c->dims[i][d], t->stride[d], per16);
        return FA_ERR_ALIGNMENT;
      }
  }
  if ((uintptr_t)lse % 4) {
    fa_fmt(c->msg, c->len, "lse: pointer 0x%" PRIxPTR " is not 4-byte aligned", (uintptr_t)lse);
    return FA_ERR_ALIGNMENT;
  }
  return FA_OK;
}

/* Bytes from data to one past the last element of t's first `rank` dims
 * (strides >= 0): 0 for a tensor without elements, -1 when that reaches
 * MAX_BYTES. */
static int64_t extent_of(const fa_tensor *t, int rank) {
  for (int d = 0; d < rank; d++)
    if (t->dim[d] <= 0) return 0;
  int64_t off = 0, term;
  for (int d = 0; d < rank; d++)
    if (!fa_mul_ok(t->dim[d] - 1, t->stride[d], &term) || !fa_add_ok(off, term, &off)) return -1;
  int64_t es = (int64_t)fa_dtype_size(t->dtype), bytes;
  if (!fa_add_ok(off, 1, &off) || !fa_mul_ok(off, es, &bytes) || bytes >= MAX_BYTES) return -1;
  return bytes;
}

static int64_t extent_bytes(const fa_tensor *t) { return extent_of(t, 4); }

fa_status fa_check_in_space_(const char *name, const void *p, int64_t bytes, char *msg,
                             size_t len) {
  uintptr_t a = (uintptr_t)p;
  if (bytes <= 0 || a <= UINTPTR_MAX - (uint64_t)bytes) return FA_OK;
  fa_fmt(msg, len, "%s: memory [0x%" PRIxPTR ", +%" PRId64 ") runs past the end of the address "
         "space", name, a, bytes);
  return FA_ERR_INVALID_ARGUMENT;
}

fa_status fa_check_extents(const fa_launch_tensors *c, int64_t ext[FA_MAX_LAUNCH_TENSORS]) {
  for (int i = 0; i < c->n; i++) {
    ext[i] = extent_bytes(c->t[i]);
    fa_status st = fa_check_in_space_(c->name[i], c->t[i]->data, ext[i], c->msg, c->len);
    if (st != FA_OK) return st;
    if (ext[i] < 0) {
      const fa_tensor *t = c->t[i];
      fa_fmt(c->msg, c->len,
             "%s: the largest element offset overflows (dims %" PRId64 "x%" PRId64 "x%" PRId64
             "x%" PRId64 ", strides %" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
             "): more than 2^62 bytes",
             c->name[i], t->dim[0], t->dim[1], t->dim[2], t->dim[3], t->stride[0], t->stride[1],
             t->stride[2], t->stride[3]);
      return FA_ERR_TOO_LARGE;
    }
  }
  return FA_OK;
}

/* An output is written by many blocks at once: two of its elements must
 * never share an address. Sufficient test: sorted by stride, each dimension
 * (extent > 1) steps over the whole span of the ones inside it. */
fa_status fa_check_self_overlap(const fa_launch_tensors *c, int i) {
  const fa_tensor *t = c->t[i];
  if (!fa_has_elements(t)) return FA_OK; /* no two elements to share an address */
  char title[16]; /* "O", "dQ": the name with its last letter capitalized */
  fa_fmt(title, sizeof title, "%s", c->name[i]);
  size_t tl = strlen(title);
  if (tl) title[tl - 1] = (char)toupper((unsigned char)title[tl - 1]);
  int idx[4] = {0, 1, 2, 3};
  for (int a = 1; a < 4; a++) /* insertion sort by stride, ties: inner dim first */
    for (int b = a; b > 0; b--) {
      int x = idx[b - 1], y = idx[b];
      if (t->stride[x] > t->stride[y] || (t->stride[x] == t->stride[y] && x < y)) {
        idx[b - 1] = y;
        idx[b] = x;
      }
    }
  int64_t span = 1; /* elements covered by the dims inside */
  for (int a = 0; a < 4; a++) {
    int d = idx[a];
    if (t->dim[d] <= 1) continue;
    if (t->stride[d] == 0) {
      fa_fmt(c->msg, c->len,
             "%s: stride[%d] (%s) is 0 but the dimension has %" PRId64
             " elements: %s would overlap itself",
             c->name[i], d, c->dims[i][d], t->dim[d], title);
      return FA_ERR_STRIDE;
    }
    if (t->stride[d] < span) {
      fa_fmt(c->msg, c->len,
             "%s: stride[%d] (%s) is %" PRId64 " but the dimensions inside it span %" PRId64
             " elements: %s would overlap itself",
             c->name[i], d, c->dims[i][d], t->stride[d], span, title);
      return FA_ERR_STRIDE;
    }
    if (!fa_mul_ok(t->stride[d], t->dim[d], &span)) span = INT64_MAX;
  }
  return FA_OK;
}

/* Compares distances, never end addresses: a + alen may wrap. */
int fa_ranges_meet(uintptr_t a, int64_t alen, uintptr_t b, int64_t blen) {
  if (alen <= 0 || blen <= 0) return 0;
  return a <= b ? b - a < (uint64_t)alen : a - b < (uint64_t)blen;
}

fa_status fa_check_disjoint(const fa_range *in, int nin, const fa_range *out, int nout,
                            char *msg, size_t len) {
  for (int o = 0; o < nout; o++)
    for (int i = 0; i < nin + o; i++) {
      const fa_range *x = &out[o], *y = i < nin ? &in[i] : &out[i - nin];
      if (fa_ranges_meet(x->p, x->len, y->p, y->len)) {
        fa_fmt(msg, len, "%s: memory [0x%" PRIxPTR ", +%" PRId64 ") overlaps %s [0x%" PRIxPTR
               ", +%" PRId64 ")", x->name, x->p, x->len, y->name, y->p, y->len);
        return FA_ERR_INVALID_ARGUMENT;
      }
    }
  return FA_OK;
}

fa_status fa_check_present(const fa_kernel_info *info, const void *args, char *msg, size_t len) {
  fa_fmt(msg, len, "%s", "");
  if (info && args) return FA_OK;
  fa_fmt(msg, len, "%s is NULL", info ? "args" : "kernel info");
  return FA_ERR_NULL_POINTER;
}

/* ---- the forward's and the backward's tensors ------------------------------ */

fa_status fa_check_kernel_info(const fa_kernel_info *in, char *msg, size_t len) {
  if (fa_dtype_size(in->dtype) != 2 || in->head_dim <= 0 || in->v_head_dim <= 0 ||
      in->heads <= 0 || in->kv_heads <= 0 || in->heads % in->kv_heads || in->tile_q <= 0 ||
      in->threads <= 0 || in->threads > 1024 || in->workspace_floats_per_row < 0) {
    fa_fmt(msg, len,
           "kernel info is inconsistent (dtype %d, head_dim %d, v_head_dim %d, heads %d, "
           "kv_heads %d, tile_q %d, threads %d): use fa_meta_parse",
           (int)in->dtype, in->head_dim, in->v_head_dim, in->heads, in->kv_heads, in->tile_q,
           in->threads);
    return FA_ERR_META;
  }
  return FA_OK;
}

/* One dimension of tensor i must equal `want`, which the metadata fixes. */
static fa_status want_meta(const fa_launch_tensors *c, const fa_kernel_info *in, int i, int d,
                           int64_t want, const char *meta_key) {
  int64_t got = c->t[i]->dim[d];
  if (got == want) return FA_OK;
  if (d == 2 && strcmp(meta_key, "kv_heads") == 0)
    fa_fmt(c->msg, c->len,
           "%s: heads is %" PRId64 " but the kernel was compiled for kv_heads = %d "
           "(%d query heads share %d K/V heads, %d per group)",
           c->name[i], got, in->kv_heads, in->heads, in->kv_heads, in->heads / in->kv_heads);
  else
    fa_fmt(c->msg, c->len, "%s: %s is %" PRId64 " but the kernel was compiled for %s%s%" PRId64,
           c->name[i], fa_dim_names[d], got, strcmp(meta_key, fa_dim_names[d]) ? meta_key : "",
           strcmp(meta_key, fa_dim_names[d]) ? " = " : "", want);
  return FA_ERR_SHAPE;
}

fa_status fa_check_meta_dims(const fa_launch_tensors *c, const fa_kernel_info *in,
                             const unsigned char *side) {
  fa_status st;
  for (int i = 0; i < c->n; i++) {
    int vd = side[i] & FA_SIDE_VDIM;
    if ((st = want_meta(c, in, i, 3, vd ? in->v_head_dim : in->head_dim,
                        vd ? "v_head_dim" : "head_dim")))
      return st;
  }
  for (int i = 0; i < c->n; i++) {
    int kv = side[i] & FA_SIDE_KV;
    if ((st = want_meta(c, in, i, 2, kv ? in->kv_heads : in->heads, kv ? "kv_heads" : "heads")))
      return st;
  }
  return FA_OK;
}

/* Dimension d of tensor i must equal that of tensor j. */
static fa_status want_same(const fa_launch_tensors *c, int i, int j, int d, const char *what) {
  if (c->t[i]->dim[d] == c->t[j]->dim[d]) return FA_OK;
  fa_fmt(c->msg, c->len, "%s: %s is %" PRId64 " but %s has %s %" PRId64, c->name[i],
         fa_dim_names[d], c->t[i]->dim[d], c->name[j], what, c->t[j]->dim[d]);
  return FA_ERR_SHAPE;
}

fa_status fa_check_cross_dims(const fa_launch_tensors *c, const unsigned char *side) {
  fa_status st;
  for (int i = 1; i < c->n; i++)
    if ((st = want_same(c, i, Q, 0, "batch"))) return st;
  for (int i = 1; i < c->n; i++) {
    int kv = side[i] & FA_SIDE_KV;
    if (i != K && (st = want_same(c, i, kv ? K : Q, 1, kv ? "seqlen_k" : "seqlen_q")))
      return st;
  }
  return FA_OK;
}

fa_status fa_check_int32_sizes(const fa_launch_tensors *c, const fa_kernel_info *in) {
  int64_t batch = c->t[Q]->dim[0], sq = c->t[Q]->dim[1], sk = c->t[K]->dim[1];
  const char *names[3] = {"batch", "seqlen_q", "seqlen_k"};
  int64_t vals[3] = {batch, sq, sk};
  for (int i = 0; i < 3; i++)
    if (vals[i] > INT32_MAX) {
      fa_fmt(c->msg, c->len, "%s: %s is %" PRId64 ", more than the kernel's int32 limit %d",
             c->name[i == 2 ? K : Q], names[i], vals[i], INT32_MAX);
      return FA_ERR_TOO_LARGE;
    }
  int64_t rows;
  if (!fa_mul_ok(batch, in->heads, &rows) || !fa_mul_ok(rows, sq, &rows) || rows > INT32_MAX) {
    fa_fmt(c->msg, c->len,
           "lse: batch %" PRId64 " x heads %d x seqlen_q %" PRId64
           " rows exceed the int32 limit %d",
           batch, in->heads, sq, INT32_MAX);
    return FA_ERR_TOO_LARGE;
  }
  return FA_OK;
}

/* ---- run-time inputs (docs/abi.md, "Run-time inputs") ------------------------ */

const fa_input *fa_find_input_(const fa_input *inputs, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (inputs[i].name && strcmp(inputs[i].name, name) == 0) return &inputs[i];
  return NULL;
}

static const fa_input_info *declared(const fa_kernel_info *in, const char *name) {
  for (int i = 0; i < in->ninputs; i++)
    if (strcmp(in->inputs[i].name, name) == 0) return &in->inputs[i];
  return NULL;
}

/* A hand-built info's declarations must be sane where the checks index
 * them, read their names and size their elements. */
static fa_status check_declarations(const fa_kernel_info *in, char *msg, size_t len) {
  int ok = in->ninputs >= 0 && in->ninputs <= FA_MAX_INPUTS;
  for (int i = 0; ok && i < in->ninputs; i++) {
    const fa_input_info *x = &in->inputs[i];
    ok = x->rank >= 0 && x->rank <= 4 && x->name[0] &&
         memchr(x->name, '\0', sizeof x->name) != NULL &&
         (x->rank ? fa_dtype_size(x->dtype) != 0
                  : x->dtype == FA_DTYPE_F32 || x->dtype == FA_DTYPE_I32);
    for (int d = 0; ok && d < x->rank; d++)
      ok = x->dims[d] > 0 || x->dims[d] == FA_INPUT_DIM_BATCH ||
           (!in->varlen && x->dims[d] >= FA_INPUT_DIM_SEQLEN_K && x->dims[d] < 0);
  }
  if (ok) return FA_OK;
  fa_fmt(msg, len, "kernel %s: its run-time input declarations are inconsistent (ninputs %d): "
         "use fa_meta_parse", in->kernel, in->ninputs);
  return FA_ERR_META;
}

/* "doc, softcap": the names a kernel declares, for messages. */
static void declared_names(const fa_kernel_info *in, char *buf, size_t len) {
  fa_fmt(buf, len, "%s", "");
  for (int i = 0; i < in->ninputs; i++) {
    size_t n = strlen(buf);
    fa_fmt(buf + n, len - n, "%s%s", i ? ", " : "", in->inputs[i].name);
  }
}

/* Each binding names a declared input, none twice; each declared input is
 * bound. Stops at the first bad binding, which comes within the first
 * ninputs + 1 (any more must repeat or be unknown), so a huge num_inputs
 * costs nothing. */
static fa_status check_bindings(const fa_kernel_info *in, const fa_input *inputs, int n,
                                char *msg, size_t len) {
  if (n < 0) {
    fa_fmt(msg, len, "num_inputs is %d, cannot be negative", n);
    return FA_ERR_INVALID_ARGUMENT;
  }
  if (n > 0 && in->ninputs == 0) {
    fa_fmt(msg, len, "kernel %s takes no run-time inputs (num_inputs is %d)", in->kernel, n);
    return FA_ERR_INVALID_ARGUMENT;
  }
  if (n > 0 && !inputs) {
    fa_fmt(msg, len, "inputs is NULL but num_inputs is %d", n);
    return FA_ERR_NULL_POINTER;
  }
  char names[FA_MAX_INPUTS * FA_INPUT_NAME_MAX];
  for (int i = 0; i < n; i++) {
    const char *name = inputs[i].name;
    if (!name) {
      fa_fmt(msg, len, "inputs[%d]: name is NULL", i);
      return FA_ERR_NULL_POINTER;
    }
    if (!declared(in, name)) {
      declared_names(in, names, sizeof names);
      fa_fmt(msg, len, "input '%.80s' (inputs[%d]): kernel %s has no run-time input of that "
             "name (it takes %s)", name, i, in->kernel, names);
      return FA_ERR_INVALID_ARGUMENT;
    }
    const fa_input *first = fa_find_input_(inputs, i, name);
    if (first) {
      fa_fmt(msg, len, "input '%s' is bound twice (inputs[%d] and inputs[%d])", name,
             (int)(first - inputs), i);
      return FA_ERR_INVALID_ARGUMENT;
    }
  }
  for (int i = 0; i < in->ninputs; i++) {
    if (fa_find_input_(inputs, n, in->inputs[i].name)) continue;
    char text[160];
    fa_input_text_(&in->inputs[i], text, sizeof text);
    /* text is "NAME DTYPE DIMS": the declaration after the name */
    fa_fmt(msg, len, "input '%s' (%s) is not bound: kernel %s reads every run-time input it "
           "declares", in->inputs[i].name, text + strlen(in->inputs[i].name) + 1, in->kernel);
    return FA_ERR_INVALID_ARGUMENT;
  }
  return FA_OK;
}

/* A declared dim's size at this launch: a constant, or batch = q's dim 0
 * (a varlen launch's num_seqs), seqlen_q = q's dim 1, seqlen_k = k's dim 1
 * (never in a varlen kernel: check_declarations). */
static int64_t launch_dim(int dim, const fa_tensor *q, const fa_tensor *k, const fa_varlen *vl) {
  return dim > 0                         ? dim
         : dim == FA_INPUT_DIM_BATCH     ? (vl ? vl->num_seqs : q->dim[0])
         : dim == FA_INPUT_DIM_SEQLEN_Q  ? q->dim[1]
                                         : k->dim[1];
}

/* `kind`: 0 a forward or backward launch, 1 a decode one, whose seqlen_q
 * is q_len, 2 a varlen one, whose batch is num_seqs (named so in messages:
 * a decode caller knows no seqlen_q, a varlen one no batch). */
static fa_status check_tensor_input(const fa_input_info *x, const fa_tensor *t,
                                    const fa_tensor *q, const fa_tensor *k, const fa_varlen *vl,
                                    int kind, char *msg, size_t len) {
  static const char *const sizes[3][3] = {{"batch", "seqlen_q", "seqlen_k"},
                                          {"batch", "seqlen_q (q_len)", "seqlen_k"},
                                          {"batch (num_seqs)", "seqlen_q", "seqlen_k"}};
  if (t->dtype != x->dtype) {
    fa_fmt(msg, len, "input '%s': dtype is %s but the kernel declares %s", x->name,
           fa_dtype_name(t->dtype), fa_dtype_name(x->dtype));
    return FA_ERR_DTYPE;
  }
  for (int d = 0; d < x->rank; d++) {
    int64_t want = launch_dim(x->dims[d], q, k, vl);
    if (t->dim[d] == want) continue;
    if (x->dims[d] > 0)
      fa_fmt(msg, len, "input '%s': dim %d is %" PRId64 ", the kernel declares %d", x->name, d,
             t->dim[d], x->dims[d]);
    else
      fa_fmt(msg, len, "input '%s': dim %d is %" PRId64 ", the launch's %s is %" PRId64, x->name,
             d, t->dim[d], sizes[kind][-x->dims[d] - 1], want);
    return FA_ERR_SHAPE;
  }
  return FA_OK;
}

/* The kernel gets the value as an f32 or an i32 parameter: it must be one
 * exactly (NaN and infinities refused: the spec's expressions assume
 * numbers). */
static fa_status check_scalar_input(const fa_input_info *x, double v, char *msg, size_t len) {
  if (x->dtype == FA_DTYPE_F32 && !(fabs(v) <= FLT_MAX)) {
    fa_fmt(msg, len, "input '%s': %g is not a finite number within f32 range", x->name, v);
    return FA_ERR_INVALID_ARGUMENT;
  }
  if (x->dtype == FA_DTYPE_I32 && !(v >= INT32_MIN && v <= INT32_MAX && v == floor(v))) {
    fa_fmt(msg, len, "input '%s': %g is not an integer in int32 range", x->name, v);
    return FA_ERR_INVALID_ARGUMENT;
  }
  return FA_OK;
}

/* The metadata's requires: the spec indexes a seqlen_k dim with q (or a
 * seqlen_q dim with k), which stays inside only when the launch says so. */
static fa_status check_requires(const fa_kernel_info *in, const fa_tensor *q, const fa_tensor *k,
                                char *msg, size_t len) {
  int64_t sq = q->dim[1], sk = k->dim[1];
  int q_le_k = in->require_q_le_k && sq > sk, k_le_q = in->require_k_le_q && sk > sq;
  if (!q_le_k && !k_le_q) return FA_OK;
  fa_fmt(msg, len, "%s is %" PRId64 ", more than %s %" PRId64 ": kernel %s requires %s (it "
         "indexes its run-time inputs' %s dims with %s)", q_le_k ? "seqlen_q" : "seqlen_k",
         q_le_k ? sq : sk, q_le_k ? "seqlen_k" : "seqlen_q", q_le_k ? sk : sq, in->kernel,
         q_le_k ? "seqlen_q <= seqlen_k" : "seqlen_k <= seqlen_q",
         q_le_k ? "seqlen_k" : "seqlen_q", q_le_k ? "q" : "k");
  return FA_ERR_SHAPE;
}

fa_status fa_check_inputs_(const fa_kernel_info *in, const fa_input *inputs, int n,
                           const fa_tensor *q, const fa_tensor *k, const fa_varlen *vl,
                           char *msg, size_t len) {
  fa_status st;
  if ((st = check_declarations(in, msg, len)) || (st = check_bindings(in, inputs, n, msg, len)))
    return st;
  int kind = in->mode == FA_MODE_DECODE ? 1 : vl ? 2 : 0;
  for (int i = 0; i < in->ninputs; i++) {
    const fa_input_info *x = &in->inputs[i];
    const fa_input *b = fa_find_input_(inputs, n, x->name);
    st = x->rank ? check_tensor_input(x, &b->tensor, q, k, vl, kind, msg, len)
                 : check_scalar_input(x, b->value, msg, len);
    if (st != FA_OK) return st;
  }
  /* A varlen launch's q and k hold every sequence: its requires are per
   * sequence, on the prefix sums' values (fa_check_varlen_values_). */
  return vl ? FA_OK : check_requires(in, q, k, msg, len);
}

/* "4x4096" of a tensor input's first `rank` dims (or strides). */
static void join_dims(const int64_t *v, int rank, char *buf, size_t len) {
  fa_fmt(buf, len, "%s", "");
  for (int d = 0; d < rank; d++) {
    size_t n = strlen(buf);
    fa_fmt(buf + n, len - n, "%s%" PRId64, d ? "x" : "", v[d]);
  }
}

/* One tensor input in memory: see fa_check_input_memory_. */
static fa_status check_input_tensor_memory(const fa_input_info *x, const fa_tensor *t,
                                           const fa_range *out, int nout, char *msg,
                                           size_t len) {
  uintptr_t p = (uintptr_t)t->data;
  size_t es = fa_dtype_size(x->dtype);
  /* strides first: extent_of takes them >= 0 */
  for (int d = 0; d < x->rank; d++)
    if (t->stride[d] < 0) {
      fa_fmt(msg, len, "input '%s': stride[%d] is %" PRId64 ", strides cannot be negative",
             x->name, d, t->stride[d]);
      return FA_ERR_STRIDE;
    }
  if (!t->data && extent_of(t, x->rank) != 0) {
    fa_fmt(msg, len, "input '%s': data pointer is NULL", x->name);
    return FA_ERR_NULL_POINTER;
  }
  if (p % es) {
    fa_fmt(msg, len, "input '%s': data pointer 0x%" PRIxPTR " is not %zu-byte aligned (its %s "
           "elements)", x->name, p, es, fa_dtype_name(x->dtype));
    return FA_ERR_ALIGNMENT;
  }
  int64_t ext = extent_of(t, x->rank);
  if (ext < 0) {
    char dims[96], strides[96];
    join_dims(t->dim, x->rank, dims, sizeof dims);
    join_dims(t->stride, x->rank, strides, sizeof strides);
    fa_fmt(msg, len, "input '%s': the largest element offset overflows (dims %s, strides %s): "
           "more than 2^62 bytes", x->name, dims, strides);
    return FA_ERR_TOO_LARGE;
  }
  char name[FA_INPUT_NAME_MAX + 16];
  fa_fmt(name, sizeof name, "input '%s'", x->name);
  fa_status st = fa_check_in_space_(name, t->data, ext, msg, len);
  if (st != FA_OK) return st;
  for (int o = 0; o < nout; o++)
    if (fa_ranges_meet(p, ext, out[o].p, out[o].len)) {
      fa_fmt(msg, len, "input '%s': memory [0x%" PRIxPTR ", +%" PRId64 ") overlaps %s [0x%"
             PRIxPTR ", +%" PRId64 "), which the launch writes", x->name, p, ext, out[o].name,
             out[o].p, out[o].len);
      return FA_ERR_INVALID_ARGUMENT;
    }
  return FA_OK;
}

fa_status fa_check_input_memory_(const fa_kernel_info *in, const fa_input *inputs, int n,
                                 const fa_range *out, int nout, char *msg, size_t len) {
  for (int i = 0; i < in->ninputs; i++) {
    const fa_input_info *x = &in->inputs[i];
    const fa_input *b = fa_find_input_(inputs, n, x->name);
    fa_status st = x->rank && b ? check_input_tensor_memory(x, &b->tensor, out, nout, msg, len)
                                : FA_OK;
    if (st != FA_OK) return st;
  }
  return FA_OK;
}
