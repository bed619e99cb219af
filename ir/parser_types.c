/* parser_types.c - the tile IR parser's types and attributes (parser.c). */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "ir/parser_internal.h"

/* ------------------------------------------------------------- types */

static ElemType elem_by_name(const char *s, int len) {
  static const struct {
    const char *name;
    ElemType e;
  } elems[] = {{"i1", ELEM_I1}, {"index", ELEM_INDEX}, {"f16", ELEM_F16}, {"bf16", ELEM_BF16}, {"f32", ELEM_F32},
                {"i32", ELEM_I32}, {"u32", ELEM_U32}};
  for (size_t i = 0; i < sizeof elems / sizeof elems[0]; i++)
    if ((int)strlen(elems[i].name) == len && memcmp(elems[i].name, s, (size_t)len) == 0)
      return elems[i].e;
  return ELEM_NONE;
}

/* tile-dim := [0-9]+ | 'Br' | 'Bc', read from the raw text (the lexer would
 * see `Brx64xf32` as one identifier). */
static bool raw_tile_dim(Parser *p, int *out) {
  int col = (int)(p->pos - p->line_start) + 1;
  if (peekc(p, 0) == 'B' && (peekc(p, 1) == 'r' || peekc(p, 1) == 'c')) {
    *out = peekc(p, 1) == 'r' ? DIM_BR : DIM_BC;
    p->pos += 2;
    return true;
  }
  int64_t v = 0;
  size_t s = p->pos;
  while (peekc(p, 0) >= 0 && isdigit(peekc(p, 0)) && p->pos - s < 9)
    v = v * 10 + (p->text[p->pos++] - '0');
  if (p->pos == s || v <= 0 || v > 65536 || (peekc(p, 0) >= 0 && isdigit(peekc(p, 0)))) {
    error_at(p, p->line, col, "expected a tile extent (1..65536, Br or Bc)");
    return false;
  }
  *out = (int)v;
  return true;
}

static bool raw_expect_x(Parser *p) {
  if (peekc(p, 0) == 'x') {
    p->pos++;
    return true;
  }
  error_at(p, p->line, (int)(p->pos - p->line_start) + 1, "expected 'x' in tile shape");
  return false;
}

/* tile-type := 'tile' '<' tile-dim 'x' tile-dim 'x' elem [',' dist] '>'
 * Called with p->cur on '<'; the shape is read from the raw text after it. */
static bool parse_tile_type(Parser *p, Type *t) {
  if (!is_punct(&p->cur, '<')) {
    ERROR_TOK(p, "expected '<'");
    return false;
  }
  int rows, cols;
  if (!raw_tile_dim(p, &rows) || !raw_expect_x(p) || !raw_tile_dim(p, &cols) || !raw_expect_x(p))
    return false;
  int col = (int)(p->pos - p->line_start) + 1;
  size_t s = p->pos;
  while (is_ident_char(peekc(p, 0)))
    p->pos++;
  ElemType e = elem_by_name(p->text + s, (int)(p->pos - s));
  if (e == ELEM_NONE || e == ELEM_I32) { /* i32: tensors only */
    error_at(p, p->line, col, "expected an element type (i1, index, u32, f16, bf16, f32)");
    return false;
  }
  advance(p);
  Dist d = DIST_NONE;
  if (accept_punct(p, ',')) {
    static const char *const dists[] = {"none", "rows", "cols", "partial", "warp", "group_cols"};
    int k = 0;
    while (k < 6 && !is_word(&p->cur, dists[k]))
      k++;
    if (k == 6) {
      ERROR_TOK(p, "expected a distribution (rows, cols, partial, warp, group_cols, none)");
      return false;
    }
    d = (Dist)k;
    advance(p);
  }
  if (!expect_punct(p, '>'))
    return false;
  *t = type_tile(e, rows, cols, d);
  return true;
}

/* tensor-dim := [0-9]+ | 'batch' | 'seqlen_q' | 'seqlen_k' | 'q_len' | 'capacity'
 *             | 'num_pages' | 'max_pages' | 'batch_nsplit' | 'row_tiles' | 'list_len' */
static bool parse_tensor_dim(Parser *p, int *out) {
  static const struct {
    const char *word;
    int dim;
  } words[] = {{"batch", DIM_BATCH},         {"seqlen_q", DIM_SEQLEN_Q},
               {"seqlen_k", DIM_SEQLEN_K},   {"q_len", DIM_Q_LEN},
               {"capacity", DIM_CAPACITY},   {"num_pages", DIM_NUM_PAGES},
               {"max_pages", DIM_MAX_PAGES}, {"batch_nsplit", DIM_BATCH_NSPLIT},
               {"row_tiles", DIM_ROW_TILES},   {"list_len", DIM_LIST_LEN}};
  if (p->cur.kind == T_INT && p->cur.ival > 0 && p->cur.ival <= INT_MAX) {
    *out = (int)p->cur.ival;
    advance(p);
    return true;
  }
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (is_word(&p->cur, words[i].word)) {
      *out = words[i].dim;
      advance(p);
      return true;
    }
  ERROR_TOK(p, "expected a tensor extent (a positive integer, batch, seqlen_q or seqlen_k)");
  return false;
}

/* tensor-type := 'tensor' '<' elem ',' '[' tensor-dim (',' tensor-dim)* ']' '>'
 * (rank 1 to 4) */
static bool parse_tensor_type(Parser *p, Type *t) {
  if (!expect_punct(p, '<'))
    return false;
  ElemType e = p->cur.kind == T_IDENT ? elem_by_name(p->cur.start, p->cur.len) : ELEM_NONE;
  if (e == ELEM_NONE || e == ELEM_U32) { /* u32: values only */
    ERROR_TOK(p, "expected an element type (i1, index, f16, bf16, f32, i32)");
    return false;
  }
  advance(p);
  if (!expect_punct(p, ',') || !expect_punct(p, '['))
    return false;
  int dims[4], rank = 0;
  Tok first = p->cur;
  do {
    if (rank == 4) {
      ERROR_TOK(p, "tensor rank must be at most 4");
      return false;
    }
    if (!parse_tensor_dim(p, &dims[rank++]))
      return false;
  } while (accept_punct(p, ','));
  if (rank < 1) {
    error_at(p, first.line, first.col, "tensor rank must be 1 to 4");
    return false;
  }
  if (!expect_punct(p, ']') || !expect_punct(p, '>'))
    return false;
  *t = type_tensor(e, rank, dims);
  return true;
}

/* ring-type := 'ring' '<' 'tile' tile-type '>' (the tile without a
 * distribution: a ring's slots are staged in shared memory, never spread
 * over warps) */
static bool parse_ring_type(Parser *p, Type *t) {
  if (!expect_punct(p, '<') || !expect_word(p, "tile"))
    return false;
  Tok at = p->cur;
  Type tile;
  if (!parse_tile_type(p, &tile))
    return false;
  if (tile.dist != DIST_NONE) {
    error_at(p, at.line, at.col, "a ring's tile has no distribution");
    return false;
  }
  if (!expect_punct(p, '>'))
    return false;
  *t = type_ring(tile);
  return true;
}

/* type := elem | tile-type | tensor-type | ring-type */
bool parse_type(Parser *p, Type *t) {
  if (p->cur.kind == T_IDENT) {
    ElemType e = elem_by_name(p->cur.start, p->cur.len);
    if (e != ELEM_NONE && e != ELEM_I32) { /* i32: tensors only */
      advance(p);
      *t = type_scalar(e);
      return true;
    }
    if (is_word(&p->cur, "tile")) {
      advance(p);
      return parse_tile_type(p, t);
    }
    if (is_word(&p->cur, "tensor")) {
      advance(p);
      return parse_tensor_type(p, t);
    }
    if (is_word(&p->cur, "ring")) {
      advance(p);
      return parse_ring_type(p, t);
    }
  }
  ERROR_TOK(p, "expected a type");
  return false;
}

/* type-list := '(' type (',' type)* ')'  -- exactly n types */
bool parse_type_list(Parser *p, Type *types, int n, const char *what) {
  Tok open = p->cur;
  if (!expect_punct(p, '('))
    return false;
  int k = 0;
  do {
    if (k == n) {
      error_at(p, open.line, open.col, "%s: expected %d type%s", what, n, n == 1 ? "" : "s");
      return false;
    }
    if (!parse_type(p, &types[k++]))
      return false;
  } while (accept_punct(p, ','));
  if (k != n) {
    error_at(p, open.line, open.col, "%s: expected %d type%s, got %d", what, n, n == 1 ? "" : "s", k);
    return false;
  }
  return expect_punct(p, ')');
}

/* -------------------------------------------------------- attributes */

/* attr-value := ['-'] (int | float | 'inf') | 'nan' | string | word */
static bool parse_attr_value(Parser *p, AttrList *al, const char *key) {
  bool neg = accept_punct(p, '-');
  Tok t = p->cur;
  if (t.kind == T_INT) {
    attr_set_int(p->m, al, key, neg ? -t.ival : t.ival);
  } else if (t.kind == T_FLOAT) {
    attr_set_float(p->m, al, key, neg ? -t.fval : t.fval);
  } else if (is_word(&t, "inf")) {
    attr_set_float(p->m, al, key, neg ? -INFINITY : INFINITY);
  } else if (!neg && is_word(&t, "nan")) {
    attr_set_float(p->m, al, key, NAN);
  } else if (!neg && t.kind == T_STRING) {
    attr_set_str(p->m, al, key, t.s);
  } else if (!neg && t.kind == T_IDENT) {
    attr_set_word(p->m, al, key, tok_text(p, &t));
  } else {
    ERROR_TOK(p, "expected an attribute value");
    return false;
  }
  advance(p);
  return true;
}

/* attr-dict := '{' [ident '=' attr-value (',' ident '=' attr-value)*] '}' */
bool parse_attr_dict(Parser *p, AttrList *al) {
  if (!expect_punct(p, '{'))
    return false;
  if (accept_punct(p, '}'))
    return true;
  do {
    if (p->cur.kind != T_IDENT) {
      ERROR_TOK(p, "expected an attribute name");
      return false;
    }
    const char *key = tok_text(p, &p->cur);
    if (attr_get(al, key)) {
      ERROR_TOK(p, "duplicate attribute '%s'", key);
      return false;
    }
    advance(p);
    if (!expect_punct(p, '=') || !parse_attr_value(p, al, key))
      return false;
  } while (accept_punct(p, ','));
  return expect_punct(p, '}');
}

/* opt-attributes := ['attributes' attr-dict] */
bool parse_opt_attributes(Parser *p, AttrList *al) {
  if (!is_word(&p->cur, "attributes"))
    return true;
  advance(p);
  return parse_attr_dict(p, al);
}
