/* spec.h - the checked attention spec: what sema hands to the rest of the compiler.
 *
 * The parser builds an AST (ast.h); sema checks it and resolves it into one
 * KernelSpec per `attention` block, with every default filled in and every
 * mask form (causal, window, boolean expression) turned into one boolean
 * expression over b, h, q, k. Everything after the frontend reads only this.
 */
#ifndef FLASHC_SPEC_H
#define FLASHC_SPEC_H

#include <stdbool.h>

#include "base/srcloc.h"

typedef enum DType { DTYPE_F16, DTYPE_BF16 } DType;

/* A kernel's mode. A backward is not a mode: a forward kernel with
 * `grad = true` also gets its backward kernels (docs/backward.md). */
typedef enum Mode { MODE_FORWARD, MODE_DECODE } Mode;

/* Decode: how the KV cache is laid out (docs/decode.md). */
typedef enum CacheKind { CACHE_CONTIGUOUS, CACHE_PAGED } CacheKind;

/* How the mask was written; mask_expr always holds its meaning. */
typedef enum MaskKind { MASK_NONE, MASK_CAUSAL, MASK_WINDOW, MASK_EXPR } MaskKind;

typedef enum ExprKind {
  EXPR_NUM, /* num */
  EXPR_VAR, /* var */
  /* unary: a */
  EXPR_NEG, EXPR_NOT,
  /* binary: a, b */
  EXPR_ADD, EXPR_SUB, EXPR_MUL, EXPR_DIV, EXPR_MOD,
  EXPR_LT, EXPR_LE, EXPR_GT, EXPR_GE, EXPR_EQ, EXPR_NE,
  EXPR_AND, EXPR_OR,
  EXPR_MIN, EXPR_MAX,
  /* select(a, b, c): a ? b : c */
  EXPR_SELECT,
  /* math functions of a */
  EXPR_TANH, EXPR_EXP, EXPR_EXP2, EXPR_LOG, EXPR_LOG2, EXPR_SQRT, EXPR_ABS,
  EXPR_FLOOR,
  /* a run-time input (KernelSpec.inputs[input]): a scalar, or a tensor's
   * element at indices a, b, c, d (as many as its rank) */
  EXPR_INPUT,
} ExprKind;

/* Variables an expression may read. S only in a score expression.
 * B, H, Q, K are the batch, query head, query row and key row indices;
 * SEQLEN_Q / SEQLEN_K are the launch's sequence lengths (known at run time). */
typedef enum ExprVar {
  VAR_S, VAR_B, VAR_H, VAR_Q, VAR_K, VAR_SEQLEN_Q, VAR_SEQLEN_K,
} ExprVar;

/* A resolved expression tree. `let` names and spec constants (heads,
 * head_dim, ...) are already substituted; the type is implied by the kind:
 * comparisons, AND, OR, NOT are boolean, the rest numeric. */
typedef struct Expr {
  ExprKind kind;
  ExprVar var;     /* EXPR_VAR */
  double num;      /* EXPR_NUM */
  int input;       /* EXPR_INPUT: index into KernelSpec.inputs */
  const char *name; /* EXPR_INPUT: its name (owned by the KernelSpec) */
  struct Expr *a, *b, *c, *d; /* d: a rank 4 input's fourth index */
  SrcLoc loc;
} Expr;

/* A run-time input's element type, and its symbolic dims (a positive dim
 * is a constant; `heads` and `kv_heads` are resolved to theirs). */
typedef enum InputType { INPUT_I32, INPUT_F32, INPUT_F16, INPUT_BF16 } InputType;
enum { SPEC_DIM_BATCH = -1, SPEC_DIM_SEQLEN_Q = -2, SPEC_DIM_SEQLEN_K = -3 };
/* Most run-time inputs a kernel may declare (the runtime's FA_MAX_INPUTS). */
enum { SPEC_MAX_INPUTS = 8 };

/* `input NAME: TYPE[DIMS];` (a tensor, rank 1..4) or `input NAME: TYPE;`
 * (a scalar: f32 or i32), bound by name at launch (docs/abi.md). */
typedef struct SpecInput {
  const char *name;
  SrcLoc loc;
  InputType type;
  int rank;          /* 0: a scalar */
  int dims[4];
} SpecInput;

/* An optional `schedule NAME { ... }` block; 0 means "compiler chooses". */
typedef struct Schedule {
  int tile_q, tile_kv, warps, stages;
  int overlap; /* `overlap = 1`: 1, `overlap = 0`: -1, absent: 0 (off, P64) */
  int producer; /* `producer = 1`: a producer warpgroup loads K/V (warp-specialize): 1;
                  `producer = 0`: -1; absent: 0 (off) */
  int tma;      /* `tma = 1`: the producer copies K/V with TMA: 1; `tma = 0`: -1
                  (cp.async); absent: 0 (the compiler's choice: TMA) */
  int pingpong; /* `pingpong = 1`: the consumer warpgroups take turns at the tensor
                  cores (the pingpong pass): 1; `pingpong = 0`: -1; absent: 0 (off) */
  int persistent; /* `persistent = 1`: one block an SM walks the forward's tiles (the
                    persistent pass): 1; `persistent = 0`: -1; absent: 0 (off) */
  SrcLoc loc;
} Schedule;

/* One attention kernel, checked and with defaults filled in. */
/* The longest kernel name a spec may give: the runtime holds PTX entry names
 * of up to 127 characters (FA_NAME_MAX) and a kernel's companions append at
 * most 9: `_bwd_post` (a backward's last kernel), `_combine` (8), `_wide`. */
#define SPEC_MAX_KERNEL_NAME 118

typedef struct KernelSpec {
  const char *name;
  SrcLoc loc;
  DType dtype;
  int head_dim;      /* of Q and K: multiple of 8, at most 256 */
  int v_head_dim;    /* of V and O: defaults to head_dim */
  int heads;         /* query heads */
  int kv_heads;      /* divides heads; == heads is MHA, 1 is MQA */
  double scale;      /* multiplies Q K^T before the score modifier; default 1/sqrt(head_dim) */
  Expr *scale_expr;  /* the scale known at launch only: a numeric expression of
                        constants and run-time inputs (scale = 1 / temp); NULL:
                        `scale` above */
  double dropout;    /* probability in [0, 1); 0 = off */
  bool dropout_torch; /* dropout_mask = torch: PyTorch's flash-backend mask (docs/dropout.md) */
  Mode mode;
  bool grad;         /* also compile the backward (docs/backward.md); forward only */
  bool varlen;       /* packed sequences of different lengths (cu_seqlens, docs/abi.md
                        "Variable-length batches"); forward only */
  int split;         /* decode: 0 = auto, N > 0 = forced number of KV splits */
  MaskKind mask_kind;
  int window_left, window_right; /* MASK_WINDOW: keys q'-left .. q'+right kept (q' aligned) */
  Expr *mask;        /* boolean over b, h, q, k, seqlen_q, seqlen_k; NULL = keep all */
  Expr *score;       /* numeric over s, b, h, q, k, ...; NULL = s itself */
  SpecInput inputs[SPEC_MAX_INPUTS]; /* in declaration order: the ABI's */
  int ninputs;
  /* the indexing needs seqlen_q <= seqlen_k (a seqlen_k dim indexed by q),
   * or the reverse: the launch must satisfy it (docs/abi.md `require`) */
  bool require_q_le_k, require_k_le_q;
  Schedule schedule;
  Schedule bwd_schedule; /* `schedule NAME_bwd { ... }`: every backward kernel's (grad = true) */
  /* decode only (docs/decode.md) */
  CacheKind cache;   /* default contiguous */
  int page_size;     /* CACHE_PAGED: a power of 2 in 16..256; 0 otherwise */
  bool has_unified_max; /* FlashDecoding++'s fixed softmax max is on */
  double unified_max;   /* its value phi when on */
  int q_len_max;        /* most query tokens per sequence a launch may pass; 0 = SPEC_MAX_Q_LEN */
} KernelSpec;

/* q_len_max: the most query tokens per sequence a decode launch may pass,
 * and what an absent q_len_max (0) means. */
enum { SPEC_MAX_Q_LEN = 16 };

/* All kernels of one file, in source order. */
typedef struct SpecFile {
  KernelSpec **kernels;
  int nkernels;
  char *file; /* owned copy of the file name that every SrcLoc.file above
                 points to, so a SpecFile outlives its Ast (added by frontend) */
} SpecFile;

#endif
