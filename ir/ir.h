/* ir.h - the tile IR: flashc's own intermediate representation.
 *
 * A program is a Module of Funcs (kernels). A Func has arguments (tensors in
 * global memory and index scalars) and a body Block. Ops live in Blocks; an op
 * may own Blocks itself (the regions of `for` and `if`). Values are SSA: each
 * is defined once, by an op result or a block argument, and knows its uses.
 *
 * Semantics are whole-tile: a tile value is a dense R x C matrix; the `dist`
 * annotation on a tile type says how codegen spreads it over the warps of a
 * thread block and never changes the value. Cross-warp communication is
 * explicit (`xwarp_reduce`) so that a pass can add or remove it.
 *
 * Text form (printer.c writes it, parser*.c read it back; print -> parse ->
 * print gives the same text):
 *
 *   kernel @name(%q: tensor<bf16, [batch, seqlen_q, 32, 128]>, ..., %seqlen_k: index)
 *       attributes {heads = 32, tile_q = 128} {
 *     %0 = const {value = 0} : index
 *     %1 = ceildiv %seqlen_q, %0 : index
 *     %s = matmul %qt, %kt {transpose_b = 1} : tile<Brx64xf32, rows>
 *     for %b = %c0 to %batch parallel {
 *       ...
 *     }
 *     %r:2 = for %j = %c0 to %n sequential iter_args(%acc = %init, %m = %m0) -> (tile<128x128xf32, rows>, tile<128x1xf32, rows>) {
 *       ...
 *       yield %a, %mm
 *     }
 *     %x = if %cond -> (tile<128x64xf32, rows>) {
 *       yield %a
 *     } else {
 *       yield %b
 *     }
 *     %rk = ring {stages = 2} : ring<tile<64x128xbf16>>
 *     warp_roles {producer_warps = 4} {
 *       ...
 *       yield
 *     } consumer {
 *       ...
 *       yield
 *     }
 *     return
 *   }
 *
 * Values with a name (arguments, loop variables, iter_args, or any value the
 * builder named) print as %name; the others are numbered %0, %1, ... in
 * print order. Multi-result ops print `%r:2 = ...` and are used as %r#0, %r#1.
 * Attributes are integers, floats (printed with %.17g, or inf/-inf/nan),
 * "strings", or bare words (enums like lt, max, q, kv) stored as strings.
 *
 * Schedules (see passes/): the frontend (frontend/emit_tile.c) emits the
 * FlashAttention-1 schedule of Algorithm 1: K/V tiles outer, Q tiles inner, O,
 * l, m in global workspace tensors, read and written every step, normalized
 * every step; tile sizes symbolic (Br, Bc). The passes rewrite it into the
 * FlashAttention-2 schedule: concrete tiles, Q tiles outer and parallel,
 * O/l/m as loop-carried values, one normalization at the end, rows split
 * across warps, masked tiles classified.
 */
#ifndef FLASHC_IR_H
#define FLASHC_IR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/srcloc.h"

/* ---------------------------------------------------------------- types */

typedef enum ElemType {
  ELEM_NONE,
  ELEM_I1,    /* boolean */
  ELEM_INDEX, /* 64-bit signed integer; loop bounds, offsets, q/k indices */
  ELEM_F16,
  ELEM_BF16,
  ELEM_F32,
  ELEM_I32,   /* 32-bit integer tensors only (cache_seqlens, block_table); loads give index */
  ELEM_U32,   /* 32-bit unsigned values (scalars, tiles; not tensors): counter-based random
                 numbers (Philox). add, sub, mul wrap modulo 2^32; and, or, xor bitwise */
} ElemType;

typedef enum TypeKind {
  TYPE_NONE,
  TYPE_SCALAR, /* elem */
  TYPE_TILE,   /* elem, rows x cols, dist */
  TYPE_TENSOR, /* elem, rank, dims: a tensor in global memory (kernel argument) */
  TYPE_RING,   /* elem, rows x cols (dist none): the slots of a ring of staged tiles
                  (`ring<tile<128x128xbf16>>`, passes/warp_specialize.c) */
} TypeKind;

/* How a tile is spread over the warps of a block (codegen's business; the
 * interpreter ignores it). */
typedef enum Dist {
  DIST_NONE,    /* not yet decided / not distributed (small or scalar-like) */
  DIST_ROWS,    /* warp w owns rows [w*R/W, (w+1)*R/W) (FlashAttention-2) */
  DIST_COLS,    /* warp w owns cols [w*C/W, (w+1)*C/W); an R x 1 tile is replicated */
  DIST_PARTIAL, /* each warp holds a partial result that an xwarp_reduce combines */
  DIST_WARP,    /* each warp holds its own whole value, computed from its own keys
                   (warp-split-kv); elementwise ops apply per warp, xwarp_reduce merges */
  DIST_GROUP_COLS, /* the warps form groups of rows/16 (a warpgroup for a 64-row tile),
                   warp w holding rows 16 (w % (rows/16)); group g holds the g-th
                   1/groups of the columns (a matmul whose N the groups split,
                   passes/group_dq.c); only a store {reduce = add} reads it */
} Dist;

/* Symbolic tile extents before the tiling pass fixes them. */
enum { DIM_BR = -1, DIM_BC = -2 };
/* Symbolic tensor extents, known at launch. */
enum { DIM_BATCH = -10, DIM_SEQLEN_Q = -11, DIM_SEQLEN_K = -12 };
/* Decode (docs/decode.md): the query tokens per sequence, the allocated
 * length of a contiguous cache, the page pool and block-table row length of a
 * paged cache, and batch * nsplit (the rows of split-kv's partial outputs). */
enum { DIM_Q_LEN = -13, DIM_CAPACITY = -14, DIM_NUM_PAGES = -15, DIM_MAX_PAGES = -16,
       DIM_BATCH_NSPLIT = -17 };
/* Block lists (passes/block_lists.c, docs/abi.md "Block lists"): the tiles
 * of a list's rows (Q tiles of a row list, K/V tiles of a column list) and
 * the entries a row holds (the steps of the other dim, plus one sentinel). */
enum { DIM_ROW_TILES = -18, DIM_LIST_LEN = -19 };

typedef struct Type {
  TypeKind kind;
  ElemType elem;
  int rows, cols; /* TYPE_TILE: > 0, or DIM_BR / DIM_BC */
  Dist dist;      /* TYPE_TILE */
  int rank;       /* TYPE_TENSOR: 1..4 (Q, K, V, O: 4; LSE: 3; run-time inputs any) */
  int dims[4];    /* TYPE_TENSOR: > 0, or one of the DIM_ symbols above */
} Type;

Type type_none(void);
Type type_scalar(ElemType e);
Type type_index(void);
Type type_tile(ElemType e, int rows, int cols, Dist d);
Type type_tensor(ElemType e, int rank, const int *dims);
/* The ring of tiles of type `tile` (its rows, cols and elem; dist none). */
Type type_ring(Type tile);
/* The tile a ring holds (TYPE_RING -> TYPE_TILE, dist none). */
Type ring_tile_type(Type ring);
bool type_eq(Type a, Type b);
bool type_is_float(Type t); /* scalar or tile of f16/bf16/f32 */
/* Writes the text form of t ("tile<Brx64xf32, rows>") into buf; returns buf. */
const char *type_str(Type t, char *buf, int len);
const char *elem_name(ElemType e); /* "f32", "bf16", ... */
const char *dist_name(Dist d);     /* "none", "rows", "cols", "partial", "warp" */

/* ----------------------------------------------------------------- ops */

/* Every op kind, with its text name. Operand/result rules are in
 * op_info() and checked by the verifier (verifier*.c). Elementwise ops work on
 * scalars and tiles and broadcast: scalar with tile, R x 1 with R x C,
 * 1 x C with R x C, R x 1 with 1 x C (giving R x C). */
/* Decode memory ops (docs/decode.md):
 *  - `load ..., %limit`: rows at or past limit (a per-sequence cache length)
 *    read 0 as well as those past the extent, so stale cache rows never reach
 *    a matmul (0 * NaN would).
 *  - `{pack = G}` on load/store: operand h is a K/V head and row r of the tile
 *    is query head h*G + R / n, token R % n, with R = row0 + r and n the
 *    tensor's row extent (q_len); rows with R >= G*n read 0 / are skipped.
 *  - rank 3 tensors ([batch, heads, seqlen]: LSE, the backward's D) load and
 *    store R x 1 tiles (row r is sequence position row0 + r) or 1 x C tiles
 *    (column c is position row0 + c: the backward's per-query statistics
 *    along the columns of a transposed score tile).
 *  - `store ... {reduce = add}`: adds the tile to the tensor's f32 elements
 *    instead of overwriting them (the backward's dQ; codegen: atomic adds).
 *  - `grad %y, %x`: the derivative of y with respect to x, elementwise, where
 *    y is computed from x by elementwise ops (a score modifier); the
 *    differentiate pass replaces it by ops (passes/differentiate.c).
 *  - `gather %t, %i0, ..., %i(r-1)`: element [i0, ..., i(r-1)] of a rank r
 *    tensor, for every element of the indices (index scalars or tiles,
 *    broadcast: R x 1 with 1 x C gives R x C); f32 for float tensors (exact
 *    for f16 / bf16), index for i32 ones. The frontend proved (or the
 *    runtime checks) every index inside its dim: a run-time input
 *    (docs/abi.md), a kernel argument named %in_NAME.
 *  - `scatter %t, %i0, ..., %i(r-1), %v`: writes the scalar v into element
 *    [i0, ..., i(r-1)] of a rank r i32 tensor (index v, exact below 2^31):
 *    the block lists a classifier kernel writes (passes/block_lists.c). Every
 *    thread of a block computes the same scalars, so one writes.
 *  - `matmul ... {async = 1}` and `mma_wait %x {pending = N}`: the matmul
 *    is issued and left running (wgmma); its result is read only through an
 *    mma_wait, which stands where the value is complete: N is how many async
 *    matmuls issued after x's (in program order, same block) may still run
 *    there (passes/overlap_softmax.c). On mma.sync and in the interpreter
 *    the matmul is synchronous and mma_wait is the identity.
 *  - Warp specialization (passes/warp_specialize.c, docs/hopper-pipeline.md):
 *    `%r = ring {stages = S} : ring<tile<RxCxE>>` is S shared-memory slots
 *    for tiles handed from producer warps to consumer warps, with their
 *    barriers; `warp_roles {producer_warps = P} {...} consumer {...}` runs
 *    its two regions at once, the first on P extra warps (the producer), the
 *    second on the kernel's `warps` (the consumers); `ring_put %r, %step, %t`
 *    (producer) makes t, a load's result used by nothing else, the ring's
 *    tile for step (it waits until the slot's previous step was released);
 *    `%t = ring_get %r, %step` (consumer) is that tile once it has landed;
 *    `ring_release %r, %step` (consumer) says the step's tile is read for
 *    the last time, freeing its slot. Steps count from 0 per ring, one put,
 *    get and release per step, in order (the verifier's rules that keep the
 *    roles in step: verifier_roles.c, docs/tile-ir.md "Warp
 *    specialization"). The interpreter runs the producer region first; a
 *    ring is then a map from step to tile. A ring {zero = 1} also has step
 *    -1, a tile of zeros never put (its get does not wait, its release
 *    frees nothing): overlap-softmax's P V before the first step.
 *    `ring_release %r, %step {last_step = 1}` sits in the body of a
 *    sequential for (the step loop) at the top level of its get's block:
 *    it frees the slot in the loop's last iteration, where it stands, or
 *    right after the loop when the loop runs no iteration
 *    (passes/release_early.c: a slot freed once its tile's last read is
 *    done, not after the loop's epilogue).
 *    `mma_turn {action = wait}` / `{action = pass}` (consumer, 2
 *    warpgroups: passes/pingpong.c) bracket a warpgroup's issue of its
 *    step's matmuls: it waits for its turn, and after issuing hands the
 *    turn to the other warpgroup, so that one's softmax runs under the
 *    other's matmuls; `{action = start}` (once, at the top of the consumer
 *    region) gives warpgroup 0 the first turn. No effect on any value.
 *  - `load_paged %cache, %block_table, %b, %h, %row0, %limit {page_size = P}`:
 *    logical row R of sequence b is slot R % P of physical page
 *    block_table[b, R / P] of the cache [num_pages, P, heads, C]; rows at or
 *    past limit (or past the block table row) read 0.
 */
#define FLASHC_OPS(X)                                                          \
  /* kind           name            */                                         \
  X(OP_CONST,       "const")        /* {value} -> scalar of the result type */ \
  X(OP_FULL,        "full")         /* {value} -> tile filled with value */    \
  X(OP_TILE_SIZE,   "tile_size")    /* {dim = q|kv} -> index; symbolic until tiling */ \
  X(OP_IOTA,        "iota")         /* {axis = 0|1} -> R x 1 or 1 x C index tile 0,1,2,... */ \
  X(OP_ADD,         "add")                                                     \
  X(OP_SUB,         "sub")                                                     \
  X(OP_MUL,         "mul")                                                     \
  X(OP_DIV,         "div")          /* index: floor division */                \
  X(OP_REM,         "rem")          /* index: remainder, truncating (sign of x); float: fmod */ \
  X(OP_CEILDIV,     "ceildiv")      /* index only */                           \
  X(OP_MIN,         "min")                                                     \
  X(OP_MAX,         "max")                                                     \
  X(OP_NEG,         "neg")                                                     \
  X(OP_EXP,         "exp")                                                     \
  X(OP_EXP2,        "exp2")                                                    \
  X(OP_LOG,         "log")                                                     \
  X(OP_LOG2,        "log2")                                                    \
  X(OP_TANH,        "tanh")                                                    \
  X(OP_SQRT,        "sqrt")                                                    \
  X(OP_ABS,         "abs")                                                     \
  X(OP_FLOOR,       "floor")                                                   \
  X(OP_RECIP,       "recip")        /* 1/x, and 0 where x == 0 (fully masked rows) */ \
  X(OP_CMP,         "cmp")          /* {pred = lt|le|gt|ge|eq|ne|hlt} -> i1 (hlt: u32, low 16 bits as binary16, ordered <) */     \
  X(OP_AND,         "and")          /* i1; u32: bitwise */                     \
  X(OP_OR,          "or")           /* i1; u32: bitwise */                     \
  X(OP_XOR,         "xor")          /* u32: bitwise */                         \
  X(OP_MULHI,       "mulhi")        /* u32: the high 32 bits of the 64-bit product */ \
  X(OP_SHR,         "shr")          /* u32: logical shift right (by 0..31) */  \
  X(OP_NOT,         "not")          /* i1 */                                   \
  X(OP_SELECT,      "select")       /* cond, a, b */                           \
  X(OP_CAST,        "cast")         /* to the result's element type */         \
  X(OP_LOAD,        "load")         /* tensor, b, h, row0 [, limit] {pack} -> tile (rows past the extent or limit read 0) */ \
  X(OP_STORE,       "store")        /* tensor, b, h, row0, tile {pack, reduce = add, col0} (rows past the extent skipped; col0: the tile is columns col0.. of the tensor) */ \
  X(OP_LOAD_SCALAR, "load_scalar")  /* i32 tensor [n], i -> index: element i (cache_seqlens[b]) */ \
  X(OP_LOAD_PAGED,  "load_paged")   /* cache, block_table, b, h, row0, limit {page_size} -> tile */ \
  X(OP_GATHER,      "gather")       /* tensor, i0 .. i(rank-1) -> its elements there (a run-time input) */ \
  X(OP_SCATTER,     "scatter")      /* tensor, i0 .. i(rank-1), value: writes one element (a block list) */ \
  X(OP_REDUCE,      "reduce")       /* {kind = max|min|sum} tile -> scalar (i1: max = any, min = all) */ \
  X(OP_MATMUL,      "matmul")       /* a, b [, acc] {transpose_a, transpose_b, b_col0, async} -> f32 tile: acc + op(a)*op(b) (b_col0: b's columns b_col0.. only; async: read only through mma_wait) */ \
  X(OP_MMA_WAIT,    "mma_wait")     /* x {pending = N} -> x: an async matmul's result, once at most N async matmuls issued after it are in flight */ \
  X(OP_ROWMAX,      "rowmax")       /* R x C -> R x 1 */                       \
  X(OP_ROWSUM,      "rowsum")       /* R x C -> R x 1 */                       \
  X(OP_MASK,        "mask")         /* s, cond -> s where cond, -inf elsewhere */ \
  X(OP_RESCALE,     "rescale")      /* o (R x C), v (R x 1) -> diag(v) o */   \
  X(OP_XWARP_REDUCE,"xwarp_reduce") /* {kind = max|sum} partial -> combined across warps */ \
  X(OP_GRAD,        "grad")         /* y, x -> dy/dx elementwise (the differentiate pass expands it) */ \
  X(OP_RING,        "ring")         /* {stages} -> ring<tile>: slots for tiles handed between warp roles */ \
  X(OP_WARP_ROLES,  "warp_roles")   /* {producer_warps}; producer, consumer regions, run at once */ \
  X(OP_RING_PUT,    "ring_put")     /* ring, step, tile: producer; the step's tile */ \
  X(OP_RING_GET,    "ring_get")     /* ring, step -> tile: consumer; waits until it landed */ \
  X(OP_RING_RELEASE,"ring_release") /* ring, step {last_step}: consumer; the step's tile is no longer read */ \
  X(OP_MMA_TURN,    "mma_turn")     /* {action = start|wait|pass}: consumer warpgroups take turns at the tensor cores */ \
  X(OP_FOR,         "for")          /* lo, hi, inits... {parallel} region(iv, iter args) -> results */ \
  X(OP_IF,          "if")           /* cond; then, else regions -> results */  \
  X(OP_YIELD,       "yield")        /* terminator of for/if regions */         \
  X(OP_RETURN,      "return")       /* terminator of a kernel body */

typedef enum OpKind {
#define X(kind, name) kind,
  FLASHC_OPS(X)
#undef X
  OP__COUNT
} OpKind;

const char *op_name(OpKind k);
/* Looks up an op by its text name; returns OP__COUNT when unknown. */
OpKind op_by_name(const char *name);

/* ---------------------------------------------------------- attributes */

typedef enum AttrKind { ATTR_INT, ATTR_FLOAT, ATTR_STR, ATTR_WORD } AttrKind;

typedef struct Attr {
  const char *key; /* owned (interned by the module) */
  AttrKind kind;
  int64_t i;
  double f;
  const char *s; /* ATTR_STR / ATTR_WORD; owned */
} Attr;

typedef struct AttrList {
  Attr *v;
  int n, cap;
} AttrList;

/* ------------------------------------------------------ values and ops */

typedef struct Op Op;
typedef struct Block Block;
typedef struct Func Func;
typedef struct Module Module;

typedef struct Use {
  Op *user;
  int index; /* operand index in user */
} Use;

typedef struct Value {
  Type type;
  Op *def;          /* defining op, or NULL for a block argument */
  int result_index; /* which result of def */
  Block *block;     /* the block whose argument this is, or NULL */
  int arg_index;
  const char *name; /* optional; printed as %name */
  Use *uses;
  int nuses, capuses;
  int id; /* scratch for printer/passes */
} Value;

struct Op {
  OpKind kind;
  Value **operands;
  int noperands;
  Value **results;
  int nresults;
  Block *regions[2]; /* for: body; if: then, else */
  int nregions;
  AttrList attrs;
  SrcLoc loc;
  Block *parent;
  Op *prev, *next;
  Module *module; /* owner, also while unlinked */
  int id;         /* scratch */
};

struct Block {
  Value **args;
  int nargs;
  Op *first, *last;
  Op *parent_op; /* NULL for a kernel body */
  Func *parent_func;
};

struct Func {
  const char *name;
  Value **args; /* == body->args */
  int nargs;
  Block *body;
  AttrList attrs; /* spec facts (dtype, heads, ...) and schedule (tile_q, warps, ...) */
  SrcLoc loc;
  /* The `schedule NAME { ... }` block that set its tiles (line 0: none)
   * and that block's name (NAME, or NAME_bwd for a backward kernel): where
   * the tiling pass reports a schedule it cannot use. */
  SrcLoc sched_loc;
  const char *sched_name;
  Module *module;
};

struct Module {
  Func **funcs;
  int nfuncs;
  /* All memory of the module (ops, values, strings) comes from its arena
   * (base/arena.h) and is released by module_destroy. Erased ops are
   * unlinked, not freed. */
  struct Arena *arena;
};

/* ---------------------------------------------------- module and funcs */

Module *module_create(void);
void module_destroy(Module *m); /* NULL is harmless */
/* Copies a string into the module's arena. */
const char *module_strdup(Module *m, const char *s);
/* Zeroed memory from the module's arena. */
void *module_alloc(Module *m, size_t size);

/* Adds a kernel with the given argument types and names (names may be NULL). */
Func *func_create(Module *m, const char *name, const Type *arg_types,
                  const char *const *arg_names, int nargs, SrcLoc loc);
/* The kernel that f travels with (a decode kernel's combine kernel or its
 * small-batch variant: attribute combine_of / variant_of; a backward kernel
 * of a forward with grad = true: grad_of; its forward with dropout:
 * dropout_of; a block-list classifier, passes/block_lists.c: blocks_of;
 * stage-inputs' gathered copy: gather_of; a forward's long-rows variant,
 * passes/long_rows_variant.c: long_rows_of), or NULL. */
const char *func_companion_of(const Func *f);
/* The index in m of the kernel whose string attribute `key` names kernel
 * `name` (key variant_of: its small-batch variant; long_rows_of: its
 * long-rows variant), or -1. */
int module_copy_index(const Module *m, const char *key, const char *name);
/* Adds a copy of kernel f (arguments, attributes, body) named `name`. */
Func *func_clone(Module *m, Func *f, const char *name);
/* Finds a kernel argument by name, or NULL. */
Value *func_arg(Func *f, const char *name);
/* Is v a run-time input, a kernel argument named %in_NAME (docs/abi.md)? */
bool value_is_input_arg(const Value *v);
/* Is v a block list, a kernel argument named %blk_NAME (passes/block_lists.c)? */
bool value_is_block_list_arg(const Value *v);
/* Is ld a plain `load %q|%k|%v, %b, %h, %row0` or a `load %in_NAME, ...
 * {rect = 1}` of a run-time input: what a ring {tma = 1} may be put (the
 * runtime builds tensor maps of Q, K, V and such inputs; docs/abi.md
 * "Tensor maps")? */
bool op_is_tensor_map_load(const Op *ld);

/* --------------------------------------------------------- attributes */

void attr_set_int(Module *m, AttrList *a, const char *key, int64_t v);
void attr_set_float(Module *m, AttrList *a, const char *key, double v);
void attr_set_str(Module *m, AttrList *a, const char *key, const char *v);
void attr_set_word(Module *m, AttrList *a, const char *key, const char *v);
/* Sets every attribute of src on dst (dst's own values of those keys replaced). */
void attrs_copy(Module *m, AttrList *dst, const AttrList *src);
const Attr *attr_get(const AttrList *a, const char *key);
/* Convenience getters with a default when absent or of another kind. */
int64_t attr_int(const AttrList *a, const char *key, int64_t dflt);
double attr_float(const AttrList *a, const char *key, double dflt); /* ints convert */
const char *attr_str(const AttrList *a, const char *key, const char *dflt); /* STR or WORD */
void attr_remove(AttrList *a, const char *key);

/* ------------------------------------------------------------ builder */

/* Where the builder inserts: before `before` in `block`, or at the end when
 * before is NULL. The location is attached to every op it creates. */
typedef struct Builder {
  Module *m;
  Block *block;
  Op *before;
  SrcLoc loc;
} Builder;

Builder builder_at_end(Module *m, Block *b);
Builder builder_before(Module *m, Op *op);
Builder builder_after(Module *m, Op *op);

/* Creates an op with the given operands and result types and inserts it at
 * the builder's point. Regions are created empty (with no block args) when
 * nregions > 0. */
Op *build_op(Builder *b, OpKind kind, Value *const *operands, int noperands,
             const Type *result_types, int nresults, int nregions);

/* Shorthands that return the single result. */
Value *build_const(Builder *b, Type t, double v);       /* scalar */
Value *build_index(Builder *b, int64_t v);              /* index constant */
Value *build_full(Builder *b, Type tile, double v);     /* tile filled with v */
Value *build_unary(Builder *b, OpKind k, Value *x);     /* result type of x */
/* Binary elementwise op with broadcasting; result type computed from the
 * operands (cmp gives i1 of the broadcast shape). */
Value *build_binary(Builder *b, OpKind k, Value *x, Value *y);
Value *build_cmp(Builder *b, const char *pred, Value *x, Value *y);
Value *build_select(Builder *b, Value *c, Value *x, Value *y);
Value *build_cast(Builder *b, Value *x, ElemType to);
/* gather t, idx[0..n-1]: n == t's rank; the indices' broadcast shape. */
Value *build_gather(Builder *b, Value *t, Value *const *idx, int n);
/* The broadcast result type of an elementwise op on x and y (elem of x unless
 * cmp); type_none() when the shapes do not broadcast. */
Type broadcast_type(Type x, Type y, ElemType elem);

/* A `for` loop: lo, hi index values; inits are the iter_args' initial values.
 * The body block gets the induction variable (index) and one argument per
 * init; its terminator is not created (add a yield). Results mirror inits. */
Op *build_for(Builder *b, Value *lo, Value *hi, bool parallel,
              Value *const *inits, int ninits, const char *iv_name);
Value *for_iv(Op *forop);
Value *for_iter_arg(Op *forop, int i);
Block *for_body(Op *forop);
bool for_is_parallel(Op *forop);
/* An `if` with result types; both region blocks are created empty. */
Op *build_if(Builder *b, Value *cond, const Type *result_types, int nresults);
Op *build_yield(Builder *b, Value *const *vals, int n);

/* --------------------------------------------------------- mutation */

void op_set_attr_int(Op *op, const char *key, int64_t v);
void op_set_attr_float(Op *op, const char *key, double v);
void op_set_attr_word(Op *op, const char *key, const char *v);

void op_set_operand(Op *op, int i, Value *v);
/* Replaces every use of `from` with `to`. */
void value_replace_all_uses(Value *from, Value *to);
/* Unlinks op from its block; its operands' use lists forget it. Its results
 * must have no uses left. */
void op_erase(Op *op);
/* Moves op before `before` (which may be in another block). */
void op_move_before(Op *op, Op *before);
/* Moves op to the end of block (before its terminator when it has one and
 * the op is not itself a terminator). */
void op_move_to_end(Op *op, Block *block);
/* Adds a block argument. */
Value *block_add_arg(Module *m, Block *blk, Type t, const char *name);
/* Removes block argument i (it must have no uses). */
void block_erase_arg(Block *blk, int i);
/* Adds / removes an operand at the end / at index i. */
void op_append_operand(Module *m, Op *op, Value *v);
void op_erase_operand(Op *op, int i);
/* Adds a result / removes result i (which must have no uses). */
Value *op_append_result(Module *m, Op *op, Type t);
void op_erase_result(Op *op, int i);
/* Deep copy of op (with its regions) inserted at the builder's point;
 * operands defined outside the op are mapped through `map` (from -> to pairs,
 * may be NULL) and left alone when not in it. */
typedef struct ValueMap {
  Value **from, **to;
  int n, cap;
} ValueMap;
void valuemap_put(Module *m, ValueMap *vm, Value *from, Value *to);
Value *valuemap_get(const ValueMap *vm, Value *v); /* v itself when absent */
Op *op_clone(Builder *b, Op *op, ValueMap *map);

/* --------------------------------------------------------- inspection */

Op *block_terminator(Block *b); /* last op if it is yield/return, else NULL */
Func *op_func(Op *op);
/* True when op is (transitively) inside `ancestor`'s regions. */
bool op_is_inside(Op *op, Op *ancestor);
/* The op of blk that is op or holds it in its regions; NULL when none. */
Op *op_ancestor_in(const Op *op, const Block *blk);
/* True when v is defined outside `op` (usable inside it unchanged). */
bool value_defined_outside(Value *v, Op *op);
/* True when v is a const/full op result; *out gets its value. */
bool value_const(const Value *v, double *out);

/* Calls fn(op, ctx) for every op in pre-order (an op before the ops of its
 * regions). fn may not erase ops other than... none: collect first, then
 * mutate. */
typedef void (*OpWalkFn)(Op *op, void *ctx);
void func_walk(Func *f, OpWalkFn fn, void *ctx);
void block_walk(Block *b, OpWalkFn fn, void *ctx);

/* ------------------------------------------ printer, parser, verifier */

void module_print(FILE *out, const Module *m);
void func_print(FILE *out, const Func *f);
void op_print(FILE *out, const Op *op); /* one op (with regions), for debugging */

/* Parses the text form. On error prints `file:line:col: error: msg`, the
 * line and a caret to `diag` and returns NULL. */
Module *module_parse(const char *filename, const char *text, size_t len, FILE *diag);

/* Prints line `line` of text and a caret under column `col` (both from 1)
 * to out, for `file:line:col: error:` messages; control and non-ASCII bytes
 * print as '?' so garbage input cannot garble a terminal, and very long
 * lines are cut around the column. */
void ir_print_source_line(FILE *out, const char *text, size_t len, int line, int col);

/* Checks the IR's invariants (see verifier.c): operand counts and types,
 * dominance of defs over uses, use lists consistent, terminators, yields
 * matching loop/if results, attribute presence. Prints each problem as
 * `verifier: <func>: <op>: message` to diag (when non-NULL) and returns the
 * number of problems. `after` names what ran last (a pass), for messages. */
int module_verify(const Module *m, const char *after, FILE *diag);

#endif
