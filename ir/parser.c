/* parser.c - reads the text form of the tile IR back (see the top of ir.h).
 *
 * A hand-written recursive-descent parser over an on-demand lexer (one token
 * of lookahead, a second one by peeking). It builds through the builder API
 * of ir.h, so use lists and block arguments are made the same way as passes
 * make them. It stops at the first error: `file:line:col: error: message`,
 * the source line and a caret go to `diag`, and module_parse returns NULL.
 *
 * Comments run from `//` to the end of the line (so lit's `// RUN:` lines are
 * comments). Values named with digits only (%12) are the printer's numbering
 * and become unnamed values; other names are kept. Names are unique per
 * kernel (the printer guarantees it), so a second definition is an error,
 * even in a sibling region; a value is visible in its block after its
 * definition and in the regions nested there.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir_internal.h"

enum { MAX_DEPTH = 200, MAX_ITER_ARGS = 64, MAX_RESULTS = 256, MAX_OPERANDS = 256 };

typedef enum TokKind {
  T_EOF,
  T_IDENT,  /* kernel, for, f32, lt, ... */
  T_INT,    /* 42 */
  T_FLOAT,  /* 1.5, 1e-3 */
  T_STRING, /* "..." (decoded into s) */
  T_VALUE,  /* %name or %name#3 */
  T_SYMBOL, /* @name */
  T_PUNCT,  /* ( ) { } < > [ ] , = : - and -> (as 'A') */
} TokKind;

enum { P_ARROW = 'A' };

typedef struct Tok {
  TokKind kind;
  const char *start; /* the token's text; for T_VALUE / T_SYMBOL the name after the sigil */
  int len;           /* of that text */
  int line, col;
  int punct;        /* T_PUNCT */
  int hash;         /* T_VALUE: the #index, or -1 */
  int64_t ival;     /* T_INT */
  double fval;      /* T_FLOAT */
  const char *s;    /* T_STRING, decoded, in the module's arena */
} Tok;

/* One named value of the current kernel. */
typedef struct Sym {
  const char *name;
  Value *v;  /* a block argument or a single result */
  Op *multi; /* an op with several results, used as %name#i */
  SrcLoc loc;
  bool visible;
  int next; /* next entry in the same hash bucket, or -1 */
} Sym;

typedef struct Parser {
  Module *m;
  const char *file, *text;
  size_t len, pos;
  int line;
  size_t line_start;
  Tok cur;
  bool failed;
  FILE *diag;
  int depth;
  Builder b;
  Sym *syms;
  int nsyms, capsyms;
  int *buckets;
  int nbuckets;
} Parser;

/* ------------------------------------------------------------ errors */

/* ir.h: the line and caret under `file:line:col: error:` messages. */
void ir_print_source_line(FILE *out, const char *text, size_t len, int line, int col) {
  size_t i = 0;
  for (int l = 1; l < line && i < len; i++)
    if (text[i] == '\n')
      l++;
  size_t eol = i;
  while (eol < len && text[eol] != '\n')
    eol++;
  size_t from = i, to = eol;
  if (col > 200 && (size_t)col - 100 < eol - i)
    from = i + (size_t)col - 100; /* very long lines are cut around the column */
  if (to - from > 300)
    to = from + 300;
  fputs("  ", out);
  for (size_t q = from; q < to; q++) {
    unsigned char c = (unsigned char)text[q];
    fputc(c == '\t' || (c >= 32 && c < 127) ? c : '?', out);
  }
  fputs("\n  ", out);
  for (size_t q = from; q < i + (size_t)col - 1 && q < eol; q++)
    fputc(text[q] == '\t' ? '\t' : ' ', out);
  fputs("^\n", out);
}

/* Reports the first error only: the parser stops there. */
static void error_at(Parser *p, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void error_at(Parser *p, int line, int col, const char *fmt, ...) {
  if (p->failed)
    return;
  p->failed = true;
  if (!p->diag)
    return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(p->diag, "%s:%d:%d: error: ", p->file, line, col);
  vfprintf(p->diag, fmt, ap);
  va_end(ap);
  fputc('\n', p->diag);
  ir_print_source_line(p->diag, p->text, p->len, line, col);
}

#define ERROR_TOK(p, ...) error_at((p), (p)->cur.line, (p)->cur.col, __VA_ARGS__)

/* ------------------------------------------------------------- lexer */

static int peekc(Parser *p, size_t ahead) {
  size_t i = p->pos + ahead;
  return i < p->len ? (unsigned char)p->text[i] : -1;
}

static bool is_ident_char(int c) { return c >= 0 && (isalnum(c) || c == '_'); }

/* Skips blanks and `//` comments, counting lines. */
static void skip_space(Parser *p) {
  for (;;) {
    int c = peekc(p, 0);
    if (c == '\n') {
      p->pos++;
      p->line++;
      p->line_start = p->pos;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      p->pos++;
    } else if (c == '/' && peekc(p, 1) == '/') {
      while (p->pos < p->len && p->text[p->pos] != '\n')
        p->pos++;
    } else {
      return;
    }
  }
}

/* number := [0-9]+ ('.' [0-9]*)? ([eE] [+-]? [0-9]+)? */
static void lex_number(Parser *p, Tok *t) {
  size_t s = p->pos;
  bool is_float = false;
  while (peekc(p, 0) >= 0 && isdigit(peekc(p, 0)))
    p->pos++;
  if (peekc(p, 0) == '.') {
    is_float = true;
    p->pos++;
    while (peekc(p, 0) >= 0 && isdigit(peekc(p, 0)))
      p->pos++;
  }
  if ((peekc(p, 0) == 'e' || peekc(p, 0) == 'E') &&
      (isdigit(peekc(p, 1)) || ((peekc(p, 1) == '+' || peekc(p, 1) == '-') && isdigit(peekc(p, 2))))) {
    is_float = true;
    p->pos += 2;
    while (peekc(p, 0) >= 0 && isdigit(peekc(p, 0)))
      p->pos++;
  }
  t->len = (int)(p->pos - s);
  char buf[80];
  if (t->len >= (int)sizeof buf) {
    ERROR_TOK(p, "number literal too long");
    return;
  }
  memcpy(buf, p->text + s, (size_t)t->len);
  buf[t->len] = 0;
  errno = 0;
  if (is_float) {
    t->kind = T_FLOAT;
    t->fval = strtod(buf, NULL);
  } else {
    t->kind = T_INT;
    t->ival = strtoll(buf, NULL, 10);
  }
  /* Float underflow (subnormals, 1e-400) reads as the nearest double; only
   * overflow is an error. */
  if (errno == ERANGE && (!is_float || isinf(t->fval)))
    ERROR_TOK(p, "number literal out of range");
}

static int hexval(int c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* string := '"' (char | '\' ["\\nt] | '\x' hex hex)* '"' on one line */
static void lex_string(Parser *p, Tok *t) {
  p->pos++;
  size_t s = p->pos;
  while (p->pos < p->len && p->text[p->pos] != '"' && p->text[p->pos] != '\n') {
    if (p->text[p->pos] == '\\' && p->pos + 1 < p->len)
      p->pos++;
    p->pos++;
  }
  if (peekc(p, 0) != '"') {
    ERROR_TOK(p, "unterminated string");
    return;
  }
  size_t e = p->pos++;
  char *out = module_alloc(p->m, e - s + 1), *o = out;
  for (size_t i = s; i < e; i++) {
    char c = p->text[i];
    if (c != '\\') {
      *o++ = c;
      continue;
    }
    char n = p->text[++i];
    if (n == 'n') {
      *o++ = '\n';
    } else if (n == 't') {
      *o++ = '\t';
    } else if (n == '"' || n == '\\') {
      *o++ = n;
    } else if (n == 'x' && i + 2 < e && hexval(p->text[i + 1]) >= 0 && hexval(p->text[i + 2]) >= 0) {
      int v = hexval(p->text[i + 1]) * 16 + hexval(p->text[i + 2]);
      if (v == 0) {
        ERROR_TOK(p, "'\\x00' is not allowed in a string");
        return;
      }
      *o++ = (char)v;
      i += 2;
    } else {
      ERROR_TOK(p, "unknown escape sequence in string");
      return;
    }
  }
  *o = 0;
  t->kind = T_STRING;
  t->s = out;
}

/* value := '%' [A-Za-z0-9_]+ ('#' [0-9]+)?   symbol := '@' ident */
static void lex_sigil(Parser *p, Tok *t) {
  int sigil = peekc(p, 0);
  p->pos++;
  t->start = p->text + p->pos;
  while (is_ident_char(peekc(p, 0)))
    p->pos++;
  t->len = (int)(p->text + p->pos - t->start);
  if (t->len == 0 || t->len > 200) {
    ERROR_TOK(p, t->len ? "name too long" : "expected a name after '%c'", sigil);
    return;
  }
  t->kind = sigil == '%' ? T_VALUE : T_SYMBOL;
  t->hash = -1;
  if (sigil == '%' && peekc(p, 0) == '#') {
    p->pos++;
    int64_t idx = 0;
    if (!isdigit(peekc(p, 0))) {
      ERROR_TOK(p, "expected a result number after '#'");
      return;
    }
    while (peekc(p, 0) >= 0 && isdigit(peekc(p, 0))) {
      idx = idx * 10 + (peekc(p, 0) - '0');
      if (idx > 1000000)
        idx = 1000000; /* far past any op's results; reported at use */
      p->pos++;
    }
    t->hash = (int)idx;
  }
}

/* Reads the next token into p->cur. */
static void advance(Parser *p) {
  if (p->failed) {
    p->cur.kind = T_EOF;
    return;
  }
  skip_space(p);
  Tok *t = &p->cur;
  memset(t, 0, sizeof *t);
  t->line = p->line;
  t->col = (int)(p->pos - p->line_start) + 1;
  t->start = p->text + p->pos;
  int c = peekc(p, 0);
  if (c < 0) {
    t->kind = T_EOF;
  } else if (isalpha(c) || c == '_') {
    while (is_ident_char(peekc(p, 0)))
      p->pos++;
    t->kind = T_IDENT;
    t->len = (int)(p->text + p->pos - t->start);
  } else if (isdigit(c)) {
    lex_number(p, t);
  } else if (c == '"') {
    lex_string(p, t);
  } else if (c == '%' || c == '@') {
    lex_sigil(p, t);
  } else if (c == '-' && peekc(p, 1) == '>') {
    p->pos += 2;
    t->kind = T_PUNCT;
    t->punct = P_ARROW;
  } else if (strchr("(){}<>[],=:-", c)) {
    p->pos++;
    t->kind = T_PUNCT;
    t->punct = c;
  } else {
    ERROR_TOK(p, (c >= 32 && c < 127) ? "unexpected character '%c'" : "unexpected byte 0x%02x", c);
    t->kind = T_EOF;
  }
  if (p->failed)
    t->kind = T_EOF;
}

/* The n-th token after the current one (n >= 1), without consuming anything. */
static Tok peek_tok(Parser *p, int n) {
  Parser save = *p;
  for (int i = 0; i < n; i++)
    advance(p);
  Tok t = p->cur;
  bool failed = p->failed;
  *p = save;
  if (failed)
    t.kind = T_EOF; /* the error is reported again when it is really read */
  return t;
}

static bool is_punct(const Tok *t, int c) { return t->kind == T_PUNCT && t->punct == c; }

static bool is_word(const Tok *t, const char *w) {
  return t->kind == T_IDENT && (int)strlen(w) == t->len && memcmp(t->start, w, (size_t)t->len) == 0;
}

static bool accept_punct(Parser *p, int c) {
  if (!is_punct(&p->cur, c))
    return false;
  advance(p);
  return true;
}

static const char *punct_str(int c) {
  static char buf[2];
  if (c == P_ARROW)
    return "->";
  buf[0] = (char)c;
  return buf;
}

static bool expect_punct(Parser *p, int c) {
  if (accept_punct(p, c))
    return true;
  ERROR_TOK(p, "expected '%s'", punct_str(c));
  return false;
}

static bool expect_word(Parser *p, const char *w) {
  if (is_word(&p->cur, w)) {
    advance(p);
    return true;
  }
  ERROR_TOK(p, "expected '%s'", w);
  return false;
}

/* A copy of the current token's text (or name) in the module's arena. */
static const char *tok_text(Parser *p, const Tok *t) {
  char *s = module_alloc(p->m, (size_t)t->len + 1);
  memcpy(s, t->start, (size_t)t->len);
  return s;
}

static SrcLoc tok_loc(Parser *p, const Tok *t) {
  return (SrcLoc){p->file, t->line, t->col};
}

/* ----------------------------------------------------------- symbols */

static unsigned sym_hash(const char *s, int len) {
  unsigned h = 2166136261u;
  for (int i = 0; i < len; i++)
    h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

static Sym *sym_find(Parser *p, const char *name, int len) {
  if (!p->nbuckets)
    return NULL;
  for (int i = p->buckets[sym_hash(name, len) & (unsigned)(p->nbuckets - 1)]; i >= 0; i = p->syms[i].next)
    if ((int)strlen(p->syms[i].name) == len && memcmp(p->syms[i].name, name, (size_t)len) == 0)
      return &p->syms[i];
  return NULL;
}

static void sym_rehash(Parser *p) {
  free(p->buckets);
  p->nbuckets = p->nbuckets ? p->nbuckets * 2 : 256;
  p->buckets = malloc(sizeof(int) * (size_t)p->nbuckets);
  if (!p->buckets) {
    fprintf(stderr, "flashc: out of memory\n");
    abort();
  }
  for (int i = 0; i < p->nbuckets; i++)
    p->buckets[i] = -1;
  for (int i = 0; i < p->nsyms; i++) {
    unsigned h = sym_hash(p->syms[i].name, (int)strlen(p->syms[i].name)) & (unsigned)(p->nbuckets - 1);
    p->syms[i].next = p->buckets[h];
    p->buckets[h] = i;
  }
}

/* Defines the name of token t (a T_VALUE without '#') as v or as the results
 * of `multi`. A name is defined once per kernel. */
static bool sym_define(Parser *p, const Tok *t, Value *v, Op *multi) {
  Sym *old = sym_find(p, t->start, t->len);
  if (old) {
    error_at(p, t->line, t->col, "redefinition of %%%.*s (first defined at line %d)", t->len,
             t->start, old->loc.line);
    return false;
  }
  if (p->nsyms == p->capsyms) {
    p->capsyms = p->capsyms ? p->capsyms * 2 : 256;
    Sym *n = realloc(p->syms, sizeof(Sym) * (size_t)p->capsyms);
    if (!n) {
      fprintf(stderr, "flashc: out of memory\n");
      abort();
    }
    p->syms = n;
  }
  if ((p->nsyms + 1) * 2 > p->nbuckets)
    sym_rehash(p);
  Sym *s = &p->syms[p->nsyms];
  *s = (Sym){tok_text(p, t), v, multi, tok_loc(p, t), true, -1};
  unsigned h = sym_hash(t->start, t->len) & (unsigned)(p->nbuckets - 1);
  s->next = p->buckets[h];
  p->buckets[h] = p->nsyms++;
  /* Digits-only names are the printer's numbering, not real names. */
  bool numbered = true;
  for (int i = 0; i < t->len; i++)
    numbered = numbered && isdigit((unsigned char)t->start[i]);
  const char *name = numbered ? NULL : s->name;
  if (v)
    v->name = name;
  for (int i = 0; multi && i < multi->nresults; i++)
    multi->results[i]->name = name;
  return true;
}

/* Hides the symbols defined since `mark` (leaving a region). */
static void sym_hide_from(Parser *p, int mark) {
  for (int i = mark; i < p->nsyms; i++)
    p->syms[i].visible = false;
}

static void sym_reset(Parser *p) {
  p->nsyms = 0;
  for (int i = 0; i < p->nbuckets; i++)
    p->buckets[i] = -1;
}

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
    static const char *const dists[] = {"none", "rows", "cols", "partial", "warp"};
    int k = 0;
    while (k < 5 && !is_word(&p->cur, dists[k]))
      k++;
    if (k == 5) {
      ERROR_TOK(p, "expected a distribution (rows, cols, partial, warp, none)");
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

/* type := elem | tile-type | tensor-type */
static bool parse_type(Parser *p, Type *t) {
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
  }
  ERROR_TOK(p, "expected a type");
  return false;
}

/* type-list := '(' type (',' type)* ')'  -- exactly n types */
static bool parse_type_list(Parser *p, Type *types, int n, const char *what) {
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
static bool parse_attr_dict(Parser *p, AttrList *al) {
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
static bool parse_opt_attributes(Parser *p, AttrList *al) {
  if (!is_word(&p->cur, "attributes"))
    return true;
  advance(p);
  return parse_attr_dict(p, al);
}

/* ------------------------------------------------------------ values */

/* value-use := '%' name ['#' int] */
static Value *parse_use(Parser *p) {
  Tok t = p->cur;
  if (t.kind != T_VALUE) {
    ERROR_TOK(p, "expected a value");
    return NULL;
  }
  Sym *s = sym_find(p, t.start, t.len);
  if (!s) {
    ERROR_TOK(p, "use of undefined value %%%.*s", t.len, t.start);
    return NULL;
  }
  if (!s->visible) {
    ERROR_TOK(p, "%%%.*s is used outside the region that defines it (line %d)", t.len, t.start,
              s->loc.line);
    return NULL;
  }
  Value *v = s->v;
  if (s->multi && t.hash < 0) {
    ERROR_TOK(p, "%%%.*s has %d results: use %%%.*s#0 .. #%d", t.len, t.start, s->multi->nresults,
              t.len, t.start, s->multi->nresults - 1);
    return NULL;
  }
  if (s->multi && t.hash >= s->multi->nresults) {
    ERROR_TOK(p, "result #%d of %%%.*s out of range (it has %d)", t.hash, t.len, t.start,
              s->multi->nresults);
    return NULL;
  }
  if (!s->multi && t.hash >= 0) {
    ERROR_TOK(p, "%%%.*s is a single value; '#' is for ops with several results", t.len, t.start);
    return NULL;
  }
  if (s->multi)
    v = s->multi->results[t.hash];
  advance(p);
  return v;
}

/* A value being defined (no '#'); returns the token. */
static bool parse_def_name(Parser *p, Tok *out) {
  if (p->cur.kind != T_VALUE) {
    ERROR_TOK(p, "expected a value name");
    return false;
  }
  if (p->cur.hash >= 0) {
    ERROR_TOK(p, "a defined value cannot have a '#' result number");
    return false;
  }
  *out = p->cur;
  advance(p);
  return true;
}

/* ---------------------------------------------------------------- ops */

typedef struct ResultDefs {
  Tok name; /* valid when n > 0 */
  int n;
} ResultDefs;

static bool parse_region(Parser *p, Block *blk);

/* Names the results of op after it is complete (its regions cannot see them). */
static bool define_results(Parser *p, const ResultDefs *rd, Op *op) {
  if (rd->n == 0)
    return true;
  if (rd->n == 1)
    return sym_define(p, &rd->name, op->results[0], NULL);
  return sym_define(p, &rd->name, NULL, op);
}

/* Checks a yield against the results of the for/if whose region it ends. */
static bool check_yield(Parser *p, Op *y, Tok at) {
  Op *parent = y->parent->parent_op;
  if (!parent || (parent->kind != OP_FOR && parent->kind != OP_IF))
    return true; /* misplaced: the verifier reports it */
  char a[160], b[160];
  if (y->noperands != parent->nresults) {
    error_at(p, at.line, at.col, "yield has %d value%s but the enclosing %s has %d result%s",
             y->noperands, y->noperands == 1 ? "" : "s", op_name(parent->kind), parent->nresults,
             parent->nresults == 1 ? "" : "s");
    return false;
  }
  for (int i = 0; i < y->noperands; i++)
    if (!type_eq(y->operands[i]->type, parent->results[i]->type)) {
      error_at(p, at.line, at.col, "yield value %d has type %s but the enclosing %s's result %d has type %s",
               i, type_str(y->operands[i]->type, a, sizeof a), op_name(parent->kind), i,
               type_str(parent->results[i]->type, b, sizeof b));
      return false;
    }
  return true;
}

/* Copies parsed attributes onto an op, after any the builder set. */
static void copy_attrs(Parser *p, Op *op, const AttrList *al) {
  for (int i = 0; i < al->n; i++) {
    const Attr *a = &al->v[i];
    switch (a->kind) {
    case ATTR_INT: attr_set_int(p->m, &op->attrs, a->key, a->i); break;
    case ATTR_FLOAT: attr_set_float(p->m, &op->attrs, a->key, a->f); break;
    case ATTR_STR: attr_set_str(p->m, &op->attrs, a->key, a->s); break;
    case ATTR_WORD: attr_set_word(p->m, &op->attrs, a->key, a->s); break;
    }
  }
}

/* for-op := 'for' value '=' value-use 'to' value-use ('parallel' | 'sequential')
 *           ['iter_args' '(' value '=' value-use (',' value '=' value-use)* ')' '->' type-list]
 *           ['attributes' attr-dict] region */
static Op *parse_for(Parser *p, const ResultDefs *rd, SrcLoc loc) {
  Tok iv, names[MAX_ITER_ARGS];
  Value *inits[MAX_ITER_ARGS];
  Type types[MAX_ITER_ARGS];
  int n = 0;
  if (!parse_def_name(p, &iv) || !expect_punct(p, '='))
    return NULL;
  Value *lo = parse_use(p);
  if (!lo || !expect_word(p, "to"))
    return NULL;
  Value *hi = parse_use(p);
  if (!hi)
    return NULL;
  bool parallel = is_word(&p->cur, "parallel");
  if (!parallel && !is_word(&p->cur, "sequential")) {
    ERROR_TOK(p, "expected 'parallel' or 'sequential'");
    return NULL;
  }
  advance(p);
  Tok iter_kw = p->cur;
  if (is_word(&p->cur, "iter_args")) {
    advance(p);
    if (!expect_punct(p, '('))
      return NULL;
    do {
      if (n == MAX_ITER_ARGS) {
        ERROR_TOK(p, "too many iter_args (at most %d)", MAX_ITER_ARGS);
        return NULL;
      }
      if (!parse_def_name(p, &names[n]) || !expect_punct(p, '=') || !(inits[n] = parse_use(p)))
        return NULL;
      n++;
    } while (accept_punct(p, ','));
    if (!expect_punct(p, ')') || !expect_punct(p, P_ARROW) || !parse_type_list(p, types, n, "iter_args"))
      return NULL;
  }
  if (rd->n != n) {
    error_at(p, loc.line, loc.col, "for has %d iter_args but %d result%s", n, rd->n, rd->n == 1 ? "" : "s");
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (!type_eq(types[i], inits[i]->type)) {
      char a[160], b[160];
      error_at(p, iter_kw.line, iter_kw.col, "iter_arg %d is declared %s but its initial value has type %s", i,
               type_str(types[i], a, sizeof a), type_str(inits[i]->type, b, sizeof b));
      return NULL;
    }
  AttrList al = {0};
  if (!parse_opt_attributes(p, &al))
    return NULL;
  if (attr_get(&al, "kind")) {
    error_at(p, loc.line, loc.col, "a for's kind is written as 'parallel' or 'sequential', not as an attribute");
    return NULL;
  }
  p->b.loc = loc;
  Op *op = build_for(&p->b, lo, hi, parallel, inits, n, NULL);
  copy_attrs(p, op, &al);
  int mark = p->nsyms;
  if (!sym_define(p, &iv, for_iv(op), NULL))
    return NULL;
  for (int i = 0; i < n; i++)
    if (!sym_define(p, &names[i], for_iter_arg(op, i), NULL))
      return NULL;
  if (!parse_region(p, for_body(op)))
    return NULL;
  sym_hide_from(p, mark);
  return define_results(p, rd, op) ? op : NULL;
}

/* if-op := 'if' value-use ['->' type-list] ['attributes' attr-dict] region 'else' region */
static Op *parse_if(Parser *p, const ResultDefs *rd, SrcLoc loc) {
  Type types[MAX_RESULTS];
  Value *cond = parse_use(p);
  if (!cond)
    return NULL;
  if (rd->n > 0 || is_punct(&p->cur, P_ARROW)) {
    if (!expect_punct(p, P_ARROW) || !parse_type_list(p, types, rd->n, "if results"))
      return NULL;
  }
  AttrList al = {0};
  if (!parse_opt_attributes(p, &al))
    return NULL;
  p->b.loc = loc;
  Op *op = build_if(&p->b, cond, types, rd->n);
  copy_attrs(p, op, &al);
  int mark = p->nsyms;
  if (!parse_region(p, op->regions[0]))
    return NULL;
  sym_hide_from(p, mark);
  if (!expect_word(p, "else"))
    return NULL;
  mark = p->nsyms;
  if (!parse_region(p, op->regions[1]))
    return NULL;
  sym_hide_from(p, mark);
  return define_results(p, rd, op) ? op : NULL;
}

/* True when the current token starts the next op (`%x =` or `%x:2 =`),
 * not an operand of this one (`%x : type` ends an op, and a type is never
 * an integer). */
static bool at_result_def(Parser *p) {
  if (p->cur.kind != T_VALUE)
    return false;
  Tok n = peek_tok(p, 1);
  if (is_punct(&n, '='))
    return true;
  return is_punct(&n, ':') && peek_tok(p, 2).kind == T_INT;
}

/* generic-op := ident [value-use (',' value-use)*] [attr-dict] [':' (type | type-list)] */
static Op *parse_generic(Parser *p, const ResultDefs *rd, Tok name, SrcLoc loc) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.*s", name.len, name.start);
  OpKind kind = op_by_name(buf);
  if (kind == OP__COUNT || kind == OP_FOR || kind == OP_IF) {
    error_at(p, name.line, name.col, "unknown op '%.*s'", name.len, name.start);
    return NULL;
  }
  Value *operands[MAX_OPERANDS];
  int n = 0;
  if (p->cur.kind == T_VALUE && !at_result_def(p)) {
    do {
      if (n == MAX_OPERANDS) {
        ERROR_TOK(p, "too many operands (at most %d)", MAX_OPERANDS);
        return NULL;
      }
      if (!(operands[n++] = parse_use(p)))
        return NULL;
    } while (accept_punct(p, ','));
  }
  AttrList al = {0};
  if (is_punct(&p->cur, '{') && !parse_attr_dict(p, &al))
    return NULL;
  Type types[MAX_RESULTS];
  if (rd->n == 0 && is_punct(&p->cur, ':')) {
    ERROR_TOK(p, "'%s' has no results to give a type", buf);
    return NULL;
  }
  if (rd->n > 0 && !accept_punct(p, ':')) {
    ERROR_TOK(p, "expected ':' and the result type%s of '%s'", rd->n > 1 ? "s" : "", buf);
    return NULL;
  }
  if (rd->n == 1 && !parse_type(p, &types[0]))
    return NULL;
  if (rd->n > 1 && !parse_type_list(p, types, rd->n, "results"))
    return NULL;
  p->b.loc = loc;
  Op *op = build_op(&p->b, kind, operands, n, types, rd->n, 0);
  op->attrs = al;
  if (kind == OP_YIELD && !check_yield(p, op, name))
    return NULL;
  return define_results(p, rd, op) ? op : NULL;
}

/* op := [value [':' int] '='] (for-op | if-op | generic-op) */
static bool parse_op(Parser *p) {
  SrcLoc loc = tok_loc(p, &p->cur);
  ResultDefs rd = {.n = 0};
  if (p->cur.kind == T_VALUE) {
    if (!parse_def_name(p, &rd.name))
      return false;
    rd.n = 1;
    if (accept_punct(p, ':')) {
      if (p->cur.kind != T_INT || p->cur.ival < 2 || p->cur.ival > MAX_RESULTS) {
        ERROR_TOK(p, "expected a result count (2..%d)", MAX_RESULTS);
        return false;
      }
      rd.n = (int)p->cur.ival;
      advance(p);
    }
    if (!expect_punct(p, '='))
      return false;
  }
  Tok name = p->cur;
  if (name.kind != T_IDENT) {
    ERROR_TOK(p, "expected an op name");
    return false;
  }
  advance(p);
  if (is_word(&name, "for"))
    return parse_for(p, &rd, loc) != NULL;
  if (is_word(&name, "if"))
    return parse_if(p, &rd, loc) != NULL;
  return parse_generic(p, &rd, name, loc) != NULL;
}

/* region := '{' op* '}' */
static bool parse_region(Parser *p, Block *blk) {
  if (!expect_punct(p, '{'))
    return false;
  if (++p->depth > MAX_DEPTH) {
    ERROR_TOK(p, "regions nested too deeply (at most %d levels)", MAX_DEPTH);
    return false;
  }
  Builder saved = p->b;
  p->b = builder_at_end(p->m, blk);
  while (!p->failed && !is_punct(&p->cur, '}')) {
    if (p->cur.kind == T_EOF) {
      ERROR_TOK(p, "expected '}' at the end of the block");
      break;
    }
    parse_op(p);
  }
  p->b = saved;
  p->depth--;
  return !p->failed && expect_punct(p, '}');
}

/* ------------------------------------------------------------ kernels */

/* kernel := 'kernel' '@' ident '(' [value ':' type (',' value ':' type)*] ')'
 *           ['attributes' attr-dict] region */
static bool parse_kernel(Parser *p) {
  SrcLoc loc = tok_loc(p, &p->cur);
  if (!expect_word(p, "kernel"))
    return false;
  Tok name = p->cur;
  if (name.kind != T_SYMBOL) {
    ERROR_TOK(p, "expected a kernel name (@name)");
    return false;
  }
  const char *kname = tok_text(p, &name);
  for (int i = 0; i < p->m->nfuncs; i++)
    if (strcmp(p->m->funcs[i]->name, kname) == 0) {
      ERROR_TOK(p, "redefinition of kernel @%s", kname);
      return false;
    }
  advance(p);
  if (!expect_punct(p, '('))
    return false;
  int n = 0, cap = 0;
  Tok *names = NULL;
  Type *types = NULL;
  bool ok = true;
  if (!is_punct(&p->cur, ')')) {
    do {
      if (n == cap) {
        cap = cap ? cap * 2 : 16;
        names = realloc(names, sizeof(Tok) * (size_t)cap);
        types = realloc(types, sizeof(Type) * (size_t)cap);
        if (!names || !types) {
          fprintf(stderr, "flashc: out of memory\n");
          abort();
        }
      }
      ok = parse_def_name(p, &names[n]) && expect_punct(p, ':') && parse_type(p, &types[n]);
      n++;
    } while (ok && accept_punct(p, ','));
  }
  ok = ok && expect_punct(p, ')');
  Func *f = NULL;
  if (ok) {
    f = func_create(p->m, kname, types, NULL, n, loc);
    sym_reset(p);
    for (int i = 0; ok && i < n; i++)
      ok = sym_define(p, &names[i], f->args[i], NULL);
  }
  free(names);
  free(types);
  if (!ok)
    return false;
  if (!parse_opt_attributes(p, &f->attrs))
    return false;
  return parse_region(p, f->body);
}

/* module := kernel* EOF */
Module *module_parse(const char *filename, const char *text, size_t len, FILE *diag) {
  Parser p = {0};
  p.m = module_create();
  p.file = module_strdup(p.m, filename ? filename : "<input>");
  p.text = text ? text : "";
  p.len = text ? len : 0;
  p.line = 1;
  p.diag = diag;
  advance(&p);
  while (!p.failed && p.cur.kind != T_EOF)
    parse_kernel(&p);
  free(p.syms);
  free(p.buckets);
  if (p.failed) {
    module_destroy(p.m);
    return NULL;
  }
  return p.m;
}
