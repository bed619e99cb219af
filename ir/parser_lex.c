/* parser_lex.c - the tile IR parser's errors and its on-demand lexer: one
 * token of lookahead in p->cur, more by peeking (parser.c).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/parser_internal.h"

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
void error_at(Parser *p, int line, int col, const char *fmt, ...) {
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
void advance(Parser *p) {
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
Tok peek_tok(Parser *p, int n) {
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

bool is_punct(const Tok *t, int c) { return t->kind == T_PUNCT && t->punct == c; }

bool is_word(const Tok *t, const char *w) {
  return t->kind == T_IDENT && (int)strlen(w) == t->len && memcmp(t->start, w, (size_t)t->len) == 0;
}

bool accept_punct(Parser *p, int c) {
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

bool expect_punct(Parser *p, int c) {
  if (accept_punct(p, c))
    return true;
  ERROR_TOK(p, "expected '%s'", punct_str(c));
  return false;
}

bool expect_word(Parser *p, const char *w) {
  if (is_word(&p->cur, w)) {
    advance(p);
    return true;
  }
  ERROR_TOK(p, "expected '%s'", w);
  return false;
}

/* A copy of the current token's text (or name) in the module's arena. */
const char *tok_text(Parser *p, const Tok *t) {
  char *s = module_alloc(p->m, (size_t)t->len + 1);
  memcpy(s, t->start, (size_t)t->len);
  return s;
}

SrcLoc tok_loc(Parser *p, const Tok *t) {
  return (SrcLoc){p->file, t->line, t->col};
}
