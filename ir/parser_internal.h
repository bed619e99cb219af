/* parser_internal.h - the tile IR parser's state, shared by its parts:
 * parser_lex.c (errors, tokens), parser_types.c (types, attributes),
 * parser_ops.c (values, ops, regions) and parser.c (the symbol table,
 * kernels, the module). Not part of the IR's interface (module_parse, ir.h).
 */
#ifndef FLASHC_PARSER_INTERNAL_H
#define FLASHC_PARSER_INTERNAL_H

#include <stdbool.h>
#include <ctype.h>
#include <stdio.h>

#include "ir/ir_internal.h"

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

/* ------------------------------------------------------- parser_lex.c */

/* Reports the first error only: the parser stops there. */
void error_at(Parser *p, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define ERROR_TOK(p, ...) error_at((p), (p)->cur.line, (p)->cur.col, __VA_ARGS__)

/* The raw character `ahead` past the current position, or -1 at the end;
 * tile shapes are read from the raw text. */
static inline int peekc(Parser *p, size_t ahead) {
  size_t i = p->pos + ahead;
  return i < p->len ? (unsigned char)p->text[i] : -1;
}

static inline bool is_ident_char(int c) { return c >= 0 && (isalnum(c) || c == '_'); }

void advance(Parser *p);
Tok peek_tok(Parser *p, int n);
bool is_punct(const Tok *t, int c);
bool is_word(const Tok *t, const char *w);
bool accept_punct(Parser *p, int c);
bool expect_punct(Parser *p, int c);
bool expect_word(Parser *p, const char *w);
const char *tok_text(Parser *p, const Tok *t);
SrcLoc tok_loc(Parser *p, const Tok *t);

/* ----------------------------------------------------- parser_types.c */

bool parse_type(Parser *p, Type *t);
bool parse_type_list(Parser *p, Type *types, int n, const char *what);
bool parse_attr_dict(Parser *p, AttrList *al);
bool parse_opt_attributes(Parser *p, AttrList *al);

/* ------------------------------------------------------- parser_ops.c */

bool parse_def_name(Parser *p, Tok *out);
bool parse_region(Parser *p, Block *blk);

/* ----------------------------------------------------------- parser.c */

Sym *sym_find(Parser *p, const char *name, int len);
bool sym_define(Parser *p, const Tok *t, Value *v, Op *multi);
void sym_hide_from(Parser *p, int mark);

#endif
