/* printer.c - writes the text form of the tile IR (see the top of ir.h).
 *
 * Naming: values with a (valid, identifier-shaped) name print as %name; the
 * others are numbered %0, %1, ... in print order, renumbered at every print.
 * Names are made unique per kernel (passes clone ops, clones keep names): a
 * name seen before gets the first free suffix _1, _2, ... in print order, so
 * the output is deterministic and parses back to distinct values.
 */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir_internal.h"

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) {
    fprintf(stderr, "flashc: out of memory\n");
    abort();
  }
  return q;
}

static char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = xrealloc(NULL, n);
  memcpy(p, s, n);
  return p;
}

/* --------------------------------------------------------------- ptrmap */

static size_t ptr_hash(const void *p) {
  uintptr_t x = (uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x;
}

static void ptrmap_grow(PtrMap *m) {
  PtrMap old = *m;
  m->cap = old.cap ? old.cap * 2 : 64;
  m->keys = calloc(m->cap, sizeof *m->keys);
  m->vals = calloc(m->cap, sizeof *m->vals);
  if (!m->keys || !m->vals) {
    fprintf(stderr, "flashc: out of memory\n");
    abort();
  }
  m->n = 0;
  for (size_t i = 0; i < old.cap; i++)
    if (old.keys[i])
      ptrmap_put(m, old.keys[i], old.vals[i]);
  free(old.keys);
  free(old.vals);
}

void ptrmap_put(PtrMap *m, const void *key, int val) {
  if ((m->n + 1) * 2 > m->cap)
    ptrmap_grow(m);
  size_t i = ptr_hash(key) & (m->cap - 1);
  while (m->keys[i] && m->keys[i] != key)
    i = (i + 1) & (m->cap - 1);
  if (!m->keys[i]) {
    m->keys[i] = key;
    m->n++;
  }
  m->vals[i] = val;
}

int ptrmap_get(const PtrMap *m, const void *key, int dflt) {
  if (!m->cap || !key)
    return dflt;
  size_t i = ptr_hash(key) & (m->cap - 1);
  while (m->keys[i]) {
    if (m->keys[i] == key)
      return m->vals[i];
    i = (i + 1) & (m->cap - 1);
  }
  return dflt;
}

void ptrmap_free(PtrMap *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- names */

bool ir_is_ident(const char *s) {
  if (!s || !(isalpha((unsigned char)*s) || *s == '_'))
    return false;
  for (; *s; s++)
    if (!(isalnum((unsigned char)*s) || *s == '_'))
      return false;
  return true;
}

static size_t str_hash(const char *s) {
  size_t h = 1469598103934665603ULL;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

/* Adds s to the set of taken base names; false when it was there already. */
static bool take_name(ValueNames *vn, const char *s) {
  if ((vn->ntaken + 1) * 2 > vn->captaken) {
    char **old = vn->taken;
    size_t oldcap = vn->captaken;
    vn->captaken = oldcap ? oldcap * 2 : 64;
    vn->taken = calloc(vn->captaken, sizeof(char *));
    if (!vn->taken) {
      fprintf(stderr, "flashc: out of memory\n");
      abort();
    }
    for (size_t i = 0; i < oldcap; i++)
      if (old[i]) {
        size_t j = str_hash(old[i]) & (vn->captaken - 1);
        while (vn->taken[j])
          j = (j + 1) & (vn->captaken - 1);
        vn->taken[j] = old[i];
      }
    free(old);
  }
  size_t i = str_hash(s) & (vn->captaken - 1);
  while (vn->taken[i]) {
    if (strcmp(vn->taken[i], s) == 0)
      return false;
    i = (i + 1) & (vn->captaken - 1);
  }
  vn->taken[i] = xstrdup(s);
  vn->ntaken++;
  return true;
}

/* The base name a value (or the first result of a multi-result op) prints
 * with, without '%': its own name made unique, or the next number. */
static char *base_name(ValueNames *vn, const Value *v) {
  char buf[64];
  if (v && ir_is_ident(v->name)) {
    if (take_name(vn, v->name))
      return xstrdup(v->name);
    size_t len = strlen(v->name) + 24;
    char *s = xrealloc(NULL, len);
    for (int k = 1;; k++) {
      snprintf(s, len, "%s_%d", v->name, k);
      if (take_name(vn, s))
        return s;
    }
  }
  snprintf(buf, sizeof buf, "%d", vn->next_number++);
  return xstrdup(buf);
}

static void add_text(ValueNames *vn, const Value *v, const char *text) {
  if (vn->n == vn->cap) {
    vn->cap = vn->cap ? vn->cap * 2 : 64;
    vn->text = xrealloc(vn->text, sizeof(char *) * (size_t)vn->cap);
  }
  size_t len = strlen(text) + 2;
  char *s = xrealloc(NULL, len);
  snprintf(s, len, "%%%s", text);
  vn->text[vn->n] = s;
  ptrmap_put(&vn->index, v, vn->n);
  vn->n++;
}

static void name_value(ValueNames *vn, const Value *v) {
  if (!v || ptrmap_get(&vn->index, v, -1) >= 0)
    return; /* a value reachable twice (corrupt IR) keeps its first name */
  char *b = base_name(vn, v);
  add_text(vn, v, b);
  free(b);
}

static void name_block(ValueNames *vn, const Block *b, int depth);

/* Names an op's results, then its regions' arguments and ops: print order. */
static void name_op(ValueNames *vn, const Op *op, int depth) {
  if (op->nresults == 1) {
    name_value(vn, op->results[0]);
  } else if (op->nresults > 1) {
    char *b = base_name(vn, op->results[0]);
    char buf[32];
    size_t len = strlen(b) + sizeof buf;
    char *s = xrealloc(NULL, len);
    for (int i = 0; i < op->nresults; i++) {
      snprintf(s, len, "%s#%d", b, i);
      if (op->results[i] && ptrmap_get(&vn->index, op->results[i], -1) < 0)
        add_text(vn, op->results[i], s);
    }
    free(s);
    free(b);
  }
  for (int r = 0; r < op->nregions; r++)
    if (op->regions[r])
      name_block(vn, op->regions[r], depth + 1);
}

static void name_block(ValueNames *vn, const Block *b, int depth) {
  if (depth > 10000)
    return; /* corrupt IR (a cycle); the verifier reports it */
  for (int i = 0; i < b->nargs; i++)
    name_value(vn, b->args[i]);
  for (const Op *o = b->first; o; o = o->next)
    name_op(vn, o, depth);
}

void names_init_func(ValueNames *vn, const Func *f) {
  memset(vn, 0, sizeof *vn);
  if (f && f->body)
    name_block(vn, f->body, 0);
}

void names_init_op(ValueNames *vn, const Op *op) {
  memset(vn, 0, sizeof *vn);
  Func *f = op_func((Op *)op);
  if (f)
    names_init_func(vn, f);
  else
    name_op(vn, op, 0);
}

const char *names_get(const ValueNames *vn, const Value *v) {
  int i = ptrmap_get(&vn->index, v, -1);
  return i >= 0 ? vn->text[i] : "%<undefined>";
}

void names_free(ValueNames *vn) {
  for (int i = 0; i < vn->n; i++)
    free(vn->text[i]);
  free(vn->text);
  for (size_t i = 0; i < vn->captaken; i++)
    free(vn->taken[i]);
  free(vn->taken);
  ptrmap_free(&vn->index);
  memset(vn, 0, sizeof *vn);
}

/* ------------------------------------------------------------ printing */

/* `%r:2 = ` / `%x = ` / nothing, for an op's results. */
static void print_results(FILE *out, const Op *op, const ValueNames *vn) {
  if (op->nresults == 0)
    return;
  const char *n0 = names_get(vn, op->results[0]);
  if (op->nresults == 1) {
    fprintf(out, "%s = ", n0);
    return;
  }
  const char *hash = strchr(n0, '#');
  int len = hash ? (int)(hash - n0) : (int)strlen(n0);
  fprintf(out, "%.*s:%d = ", len, n0, op->nresults);
}

/* Shortest of %.15g/%.16g/%.17g that reads back as the same double; always
 * with a '.' or an exponent so that it reads back as a float, not an int. */
static void format_double(char *buf, size_t len, double d) {
  if (isnan(d)) {
    snprintf(buf, len, "nan");
    return;
  }
  if (isinf(d)) {
    snprintf(buf, len, d < 0 ? "-inf" : "inf");
    return;
  }
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(buf, len, "%.*g", prec, d);
    if (strtod(buf, NULL) == d)
      break;
  }
  if (!strpbrk(buf, ".e"))
    strncat(buf, ".0", len - strlen(buf) - 1);
}

static void print_string(FILE *out, const char *s) {
  fputc('"', out);
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(out, "\\%c", c);
    else if (c == '\n')
      fputs("\\n", out);
    else if (c == '\t')
      fputs("\\t", out);
    else if (c < 32 || c >= 127)
      fprintf(out, "\\x%02x", c);
    else
      fputc(c, out);
  }
  fputc('"', out);
}

static void print_attr_value(FILE *out, const Attr *a) {
  char buf[64];
  switch (a->kind) {
  case ATTR_INT:
    fprintf(out, "%" PRId64, a->i);
    break;
  case ATTR_FLOAT:
    format_double(buf, sizeof buf, a->f);
    fputs(buf, out);
    break;
  case ATTR_WORD:
    /* A word that would not lex back as a word is written as a string. */
    if (ir_is_ident(a->s) && strcmp(a->s, "inf") != 0 && strcmp(a->s, "nan") != 0) {
      fputs(a->s, out);
      break;
    }
    print_string(out, a->s);
    break;
  case ATTR_STR:
    print_string(out, a->s);
    break;
  }
}

/* ` {k = v, ...}` (or with `prefix` before the brace), skipping `skip`;
 * nothing when no attribute is left. */
static void print_attrs(FILE *out, const AttrList *al, const char *prefix, const char *skip) {
  int shown = 0;
  for (int i = 0; i < al->n; i++) {
    const Attr *a = &al->v[i];
    if (skip && strcmp(a->key, skip) == 0)
      continue;
    fprintf(out, "%s%s = ", shown ? ", " : prefix, a->key);
    print_attr_value(out, a);
    shown++;
  }
  if (shown)
    fputc('}', out);
}

static void print_type(FILE *out, Type t) {
  char buf[160];
  fputs(type_str(t, buf, sizeof buf), out);
}

/* `(t1, t2)` of the op's result types. */
static void print_result_types(FILE *out, const Op *op) {
  fputc('(', out);
  for (int i = 0; i < op->nresults; i++) {
    if (i)
      fputs(", ", out);
    print_type(out, op->results[i]->type);
  }
  fputc(')', out);
}

static void print_operand(FILE *out, const Op *op, int i, const ValueNames *vn) {
  fputs(i < op->noperands ? names_get(vn, op->operands[i]) : "%<missing>", out);
}

static void print_block(FILE *out, const Block *b, int indent, const ValueNames *vn);

static void print_indent(FILE *out, int indent) {
  fprintf(out, "%*s", 2 * indent, "");
}

/* for %iv = %lo to %hi kind [iter_args(%a = %init, ...) -> (types)] [attributes {...}] { */
static void print_for(FILE *out, const Op *op, int indent, const ValueNames *vn) {
  const Block *body = op->nregions > 0 ? op->regions[0] : NULL;
  fputs("for ", out);
  fputs(body && body->nargs > 0 ? names_get(vn, body->args[0]) : "%<missing>", out);
  fputs(" = ", out);
  print_operand(out, op, 0, vn);
  fputs(" to ", out);
  print_operand(out, op, 1, vn);
  fputs(for_is_parallel((Op *)op) ? " parallel" : " sequential", out);
  int ninits = op->noperands > 2 ? op->noperands - 2 : 0;
  if (ninits > 0 || op->nresults > 0) {
    fputs(" iter_args(", out);
    for (int i = 0; i < ninits; i++) {
      fputs(i ? ", " : "", out);
      fputs(body && 1 + i < body->nargs ? names_get(vn, body->args[1 + i]) : "%<missing>", out);
      fputs(" = ", out);
      print_operand(out, op, 2 + i, vn);
    }
    fputs(") -> ", out);
    print_result_types(out, op);
  }
  print_attrs(out, &op->attrs, " attributes {", "kind");
  fputs(" {\n", out);
  if (body)
    print_block(out, body, indent + 1, vn);
  print_indent(out, indent);
  fputs("}\n", out);
}

/* The ops of region r (when op has it) one level in, then `close` at op's
 * indentation: the `}` that ends the region and what follows it. */
static void print_region(FILE *out, const Op *op, int r, const char *close, int indent,
                         const ValueNames *vn) {
  if (op->nregions > r && op->regions[r])
    print_block(out, op->regions[r], indent + 1, vn);
  print_indent(out, indent);
  fputs(close, out);
}

/* if %c [-> (types)] [attributes {...}] { ... } else { ... } */
static void print_if(FILE *out, const Op *op, int indent, const ValueNames *vn) {
  fputs("if ", out);
  print_operand(out, op, 0, vn);
  if (op->nresults > 0) {
    fputs(" -> ", out);
    print_result_types(out, op);
  }
  print_attrs(out, &op->attrs, " attributes {", NULL);
  fputs(" {\n", out);
  print_region(out, op, 0, "} else {\n", indent, vn);
  print_region(out, op, 1, "}\n", indent, vn);
}

/* warp_roles [{producer_warps = P}] { producer } consumer { consumer }:
 * the attributes as a generic op's (the parser tells them from a region by
 * `{word =`). */
static void print_warp_roles(FILE *out, const Op *op, int indent, const ValueNames *vn) {
  fputs("warp_roles", out);
  print_attrs(out, &op->attrs, " {", NULL);
  fputs(" {\n", out);
  print_region(out, op, 0, "} consumer {\n", indent, vn);
  print_region(out, op, 1, "}\n", indent, vn);
}

static void print_generic(FILE *out, const Op *op, const ValueNames *vn) {
  fputs(op_name(op->kind), out);
  for (int i = 0; i < op->noperands; i++) {
    fputs(i ? ", " : " ", out);
    print_operand(out, op, i, vn);
  }
  print_attrs(out, &op->attrs, " {", NULL);
  if (op->nresults == 1) {
    fputs(" : ", out);
    print_type(out, op->results[0]->type);
  } else if (op->nresults > 1) {
    fputs(" : ", out);
    print_result_types(out, op);
  }
  fputc('\n', out);
}

static void print_op(FILE *out, const Op *op, int indent, const ValueNames *vn) {
  if (indent > 1000)
    return; /* corrupt IR (a cycle); the verifier reports it */
  print_indent(out, indent);
  print_results(out, op, vn);
  if (op->kind == OP_FOR)
    print_for(out, op, indent, vn);
  else if (op->kind == OP_IF)
    print_if(out, op, indent, vn);
  else if (op->kind == OP_WARP_ROLES)
    print_warp_roles(out, op, indent, vn);
  else
    print_generic(out, op, vn);
}

static void print_block(FILE *out, const Block *b, int indent, const ValueNames *vn) {
  for (const Op *o = b->first; o; o = o->next)
    print_op(out, o, indent, vn);
}

static void print_func_named(FILE *out, const Func *f, const ValueNames *vn) {
  fprintf(out, "kernel @%s(", f->name ? f->name : "");
  for (int i = 0; i < f->nargs; i++) {
    fprintf(out, "%s%s: ", i ? ", " : "", names_get(vn, f->args[i]));
    print_type(out, f->args[i]->type);
  }
  fputc(')', out);
  print_attrs(out, &f->attrs, " attributes {", NULL);
  fputs(" {\n", out);
  print_block(out, f->body, 1, vn);
  fputs("}\n", out);
}

void func_print(FILE *out, const Func *f) {
  ValueNames vn;
  names_init_func(&vn, f);
  print_func_named(out, f, &vn);
  names_free(&vn);
}

void module_print(FILE *out, const Module *m) {
  for (int i = 0; i < m->nfuncs; i++) {
    if (i)
      fputc('\n', out);
    func_print(out, m->funcs[i]);
  }
}

void op_print(FILE *out, const Op *op) {
  ValueNames vn;
  names_init_op(&vn, op);
  print_op(out, op, 0, &vn);
  names_free(&vn);
}

void op_summary(char *buf, size_t len, const Op *op, const ValueNames *vn) {
  size_t n = 0;
  buf[0] = 0;
#define APPEND(...)                                                            \
  do {                                                                         \
    if (n < len)                                                               \
      n += (size_t)snprintf(buf + n, len - n, __VA_ARGS__);                    \
  } while (0)
  if (op->nresults == 1) {
    APPEND("%s = ", names_get(vn, op->results[0]));
  } else if (op->nresults > 1) {
    const char *n0 = names_get(vn, op->results[0]);
    const char *hash = strchr(n0, '#');
    APPEND("%.*s:%d = ", hash ? (int)(hash - n0) : (int)strlen(n0), n0, op->nresults);
  }
  APPEND("%s", op_name(op->kind));
  if (op->kind == OP_FOR && op->nregions > 0 && op->regions[0] && op->regions[0]->nargs > 0) {
    APPEND(" %s", names_get(vn, op->regions[0]->args[0]));
  } else {
    for (int i = 0; i < op->noperands && i < 5; i++)
      APPEND("%s%s", i ? ", " : " ", names_get(vn, op->operands[i]));
    if (op->noperands > 5)
      APPEND(", ...");
  }
#undef APPEND
}
