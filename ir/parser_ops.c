/* parser_ops.c - the tile IR parser's values, ops and regions (parser.c). */
#include <stdio.h>
#include <string.h>

#include "ir/parser_internal.h"

enum { MAX_DEPTH = 200, MAX_ITER_ARGS = 64, MAX_RESULTS = 256, MAX_OPERANDS = 256 };

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
bool parse_def_name(Parser *p, Tok *out) {
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


/* Names the results of op after it is complete (its regions cannot see them). */
static bool define_results(Parser *p, const ResultDefs *rd, Op *op) {
  if (rd->n == 0)
    return true;
  if (rd->n == 1)
    return sym_define(p, &rd->name, op->results[0], NULL);
  return sym_define(p, &rd->name, NULL, op);
}

/* Checks a yield against the results of the for/if/warp_roles whose region
 * it ends (warp_roles has none). */
static bool check_yield(Parser *p, Op *y, Tok at) {
  Op *parent = y->parent->parent_op;
  if (!parent || (parent->kind != OP_FOR && parent->kind != OP_IF && parent->kind != OP_WARP_ROLES))
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

/* Parses region blk with its own scope: values it defines are not visible
 * after it. */
static bool parse_scoped_region(Parser *p, Block *blk) {
  int mark = p->nsyms;
  if (!parse_region(p, blk))
    return false;
  sym_hide_from(p, mark);
  return true;
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
  if (!parse_scoped_region(p, op->regions[0]) || !expect_word(p, "else") ||
      !parse_scoped_region(p, op->regions[1]))
    return NULL;
  return define_results(p, rd, op) ? op : NULL;
}

/* True when the current token opens an attribute dict (`{name =`), not a
 * region: no op starts with a bare word followed by '='. */
static bool at_attr_dict(Parser *p) {
  if (!is_punct(&p->cur, '{') || peek_tok(p, 1).kind != T_IDENT)
    return false;
  Tok eq = peek_tok(p, 2);
  return is_punct(&eq, '=');
}

/* warp-roles-op := 'warp_roles' [attr-dict] region 'consumer' region
 * (the producer's region first, like if's `{...} else {...}`) */
static Op *parse_warp_roles(Parser *p, const ResultDefs *rd, SrcLoc loc) {
  if (rd->n > 0) {
    error_at(p, loc.line, loc.col, "warp_roles has no results");
    return NULL;
  }
  AttrList al = {0};
  if (at_attr_dict(p) && !parse_attr_dict(p, &al))
    return NULL;
  p->b.loc = loc;
  Op *op = build_op(&p->b, OP_WARP_ROLES, NULL, 0, NULL, 0, 2);
  op->attrs = al;
  if (!parse_scoped_region(p, op->regions[0]) || !expect_word(p, "consumer") ||
      !parse_scoped_region(p, op->regions[1]))
    return NULL;
  return op;
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
  if (is_word(&name, "warp_roles"))
    return parse_warp_roles(p, &rd, loc) != NULL;
  return parse_generic(p, &rd, name, loc) != NULL;
}

/* region := '{' op* '}' */
bool parse_region(Parser *p, Block *blk) {
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
