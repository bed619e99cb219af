/* parser.c - reads the text form of the tile IR back (see the top of ir.h):
 * the symbol table, kernels and the module.
 *
 * A hand-written recursive-descent parser over an on-demand lexer (one token
 * of lookahead, a second one by peeking): tokens and errors in
 * parser_lex.c, types and attributes in parser_types.c, values, ops and
 * regions in parser_ops.c. It builds through the builder API
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
#include <stdlib.h>
#include <string.h>

#include "ir/parser_internal.h"

/* ----------------------------------------------------------- symbols */

static unsigned sym_hash(const char *s, int len) {
  unsigned h = 2166136261u;
  for (int i = 0; i < len; i++)
    h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

Sym *sym_find(Parser *p, const char *name, int len) {
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
bool sym_define(Parser *p, const Tok *t, Value *v, Op *multi) {
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
void sym_hide_from(Parser *p, int mark) {
  for (int i = mark; i < p->nsyms; i++)
    p->syms[i].visible = false;
}

static void sym_reset(Parser *p) {
  p->nsyms = 0;
  for (int i = 0; i < p->nbuckets; i++)
    p->buckets[i] = -1;
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
