/* meta_internal.h - the metadata parser's keys and state, shared by meta.c
 * (the lines, the rules of decode, backward and dropout keys, a module's
 * kernels) and meta_blocks.c (the block-list rules). meta_inputs.c, which
 * needs none of it, has its own interface in internal.h.
 */
#ifndef FLASHC_RUNTIME_META_INTERNAL_H
#define FLASHC_RUNTIME_META_INTERNAL_H

#include <string.h>

#include "internal.h"

/* The keys the parser knows; the bit of each in the `seen` mask. */
enum {
  K_VERSION, K_KERNEL, K_MODE, K_DTYPE, K_HEAD_DIM, K_V_HEAD_DIM, K_HEADS, K_KV_HEADS,
  K_MASK, K_SCALE, K_TILE_Q, K_TILE_KV, K_WARPS, K_STAGES, K_THREADS, K_SMEM, K_GRID,
  K_WORKSPACE, K_TARGET, K_PASSES,
  /* decode keys (docs/decode.md); refused for other modes */
  K_CACHE, K_PAGE_SIZE, K_SPLIT, K_Q_LEN_MAX, K_COMBINE, K_COMBINE_THREADS, K_UNIFIED_MAX,
  K_COMBINE_PDL, K_COMBINE_FUSED, K_WIDE, K_WIDE_TILE_KV, K_WIDE_THREADS, K_WIDE_SMEM,
  /* backward keys (docs/backward.md); refused for other modes */
  K_ROLE, K_FORWARD,
  /* dropout keys (docs/dropout.md) */
  K_DROPOUT, K_DROPOUT_OF, K_DROPOUT_MASK,
  /* packed sequences (docs/abi.md, "Variable-length batches") */
  K_LAYOUT,
  /* block lists (docs/abi.md, "Block lists") */
  K_BLOCKS, K_BLOCK_LIST, K_CHUNK, K_CLASSES,
  /* the keys a block may repeat: run-time inputs (docs/abi.md) and the
   * tensor maps of TMA copies (docs/abi.md, "Tensor maps") */
  K_INPUT, K_REQUIRE, K_TMA, K_GATHER_OF, K_LONG_ROWS_OF, K_LONG_ROWS_MIN, K_BACKWARD_AUTO,
  K_COUNT
};

/* Each key as its metadata line spells it, by K_ value. */
extern const char *const fa_meta_key_names_[K_COUNT];

/* Where a block's lines are: each key's (the first input and require
 * line for the repeated keys), and those meta_inputs.c names; 0 = not
 * given. */
typedef struct Lines {
  int key[K_COUNT];
  fa_meta_lines run; /* kernel, each run-time input, require, layout */
} Lines;

/* The parser of one block (one kernel's lines). */
typedef struct Parser {
  fa_kernel_info *info;
  uint64_t seen;          /* bit per key */
  Lines lines;            /* the line of each key seen */
  int line;               /* 1-based line of the current key */
  int block;              /* 0-based index of the block in the file */
  char where[64];         /* "metadata", or "metadata block N (line L)" past the first */
  char *err;
  size_t errlen;
} Parser;

/* A module's blocks, once each is read (fa_meta_parse_module). */
typedef struct Module {
  fa_kernel_info *k;           /* FA_MODULE_MAX_KERNELS */
  Lines *line;                 /* each block's lines */
  int n;
  char *err;
  size_t errlen;
} Module;

static inline fa_status fail(Parser *p, const char *key, const char *fmt, const char *value) {
  char what[256];
  fa_fmt(what, sizeof what, fmt, value);
  fa_fmt(p->err, p->errlen, "metadata line %d: %s: %s", p->line, key, what);
  return FA_ERR_META;
}

/* A rule across keys broken: names the line of key k (given in the block). */
static inline fa_status fail_key(Parser *p, int k, const char *fmt, const char *value) {
  p->line = p->lines.key[k];
  return fail(p, fa_meta_key_names_[k], fmt, value);
}

static inline int seen(const Parser *p, int k) { return (int)((p->seen >> k) & 1u); }

static inline const char *mode_name(fa_mode m) {
  static const char *const names[] = {"forward", "backward", "decode", "blocks"};
  return (int)m >= 0 && m <= FA_MODE_BLOCKS ? names[m] : "?";
}

static inline fa_status module_fail(Module *m, int b, int key, const char *what) {
  fa_fmt(m->err, m->errlen, "metadata line %d: %s: %s", m->line[b].key[key] ? m->line[b].key[key]
         : m->line[b].key[K_KERNEL], fa_meta_key_names_[key], what);
  return FA_ERR_META;
}

static inline int find_kernel(const Module *m, const char *name) {
  for (int i = 0; i < m->n; i++)
    if (strcmp(m->k[i].kernel, name) == 0) return i;
  return -1;
}

/* Kernel b against `ref` (same_attention's): the same run-time inputs and
 * requires (meta_inputs.c). */
static inline fa_status same_inputs(Module *m, int b, int ref) {
  return fa_meta_same_inputs_(&m->k[b], &m->line[b].run, &m->k[ref], &m->line[ref].run, m->err,
                              m->errlen);
}

/* Backward kernel b against `ref` (its forward kernel, or the first
 * backward kernel of the same forward): the same attention. */
fa_status fa_meta_same_attention_(Module *m, int b, int ref);

/* ---- the block-list rules (meta_blocks.c) ---- */

/* The block-list keys of one kernel's block, once it is read. */
fa_status fa_meta_check_blocks_keys_(Parser *p);
/* The block lists of kernel b across the module. */
fa_status fa_meta_check_block_lists_(Module *m, int b);

#endif
