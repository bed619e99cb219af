/* ast.c - AST node constructors and the `-emit=ast` printer. */
#include "frontend/ast.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

/* ---- constructors ---- */

static AstExpr *new_expr(Arena *a, AstExprKind kind, SrcLoc loc) {
  AstExpr *e = arena_alloc(a, sizeof(AstExpr));
  e->kind = kind;
  e->loc = loc;
  e->depth = 1;
  return e;
}

static int max3(int x, int y, int z) {
  int m = x > y ? x : y;
  return m > z ? m : z;
}

static int depth_of(const AstExpr *e) { return e ? e->depth : 0; }

AstExpr *ast_num(Arena *a, SrcLoc loc, double v, bool is_int, const char *text) {
  AstExpr *e = new_expr(a, AE_NUM, loc);
  e->num = v;
  e->is_int = is_int;
  e->text = text;
  return e;
}

AstExpr *ast_ident(Arena *a, SrcLoc loc, const char *name) {
  AstExpr *e = new_expr(a, AE_IDENT, loc);
  e->text = name;
  return e;
}

AstExpr *ast_index(Arena *a, SrcLoc loc, const char *name, AstExpr *args) {
  AstExpr *e = ast_call(a, loc, name, args);
  e->kind = AE_INDEX;
  return e;
}

AstExpr *ast_error(Arena *a, SrcLoc loc) { return new_expr(a, AE_ERROR, loc); }

AstExpr *ast_unary(Arena *a, SrcLoc loc, AstOp op, AstExpr *x) {
  AstExpr *e = new_expr(a, AE_UNARY, loc);
  e->op = op;
  e->a = x;
  e->depth = 1 + depth_of(x);
  return e;
}

AstExpr *ast_binary(Arena *a, SrcLoc loc, AstOp op, AstExpr *x, AstExpr *y) {
  AstExpr *e = new_expr(a, AE_BINARY, loc);
  e->op = op;
  e->a = x;
  e->b = y;
  e->depth = 1 + max3(depth_of(x), depth_of(y), 0);
  return e;
}

AstExpr *ast_cond(Arena *a, SrcLoc loc, AstExpr *c, AstExpr *x, AstExpr *y) {
  AstExpr *e = new_expr(a, AE_COND, loc);
  e->a = c;
  e->b = x;
  e->c = y;
  e->depth = 1 + max3(depth_of(c), depth_of(x), depth_of(y));
  return e;
}

AstExpr *ast_call(Arena *a, SrcLoc loc, const char *name, AstExpr *args) {
  AstExpr *e = new_expr(a, AE_CALL, loc);
  e->text = name;
  e->a = args;
  int d = 0;
  for (AstExpr *x = args; x; x = x->next) {
    e->nargs++;
    if (x->depth > d)
      d = x->depth;
  }
  e->depth = 1 + d;
  return e;
}

const char *ast_op_str(AstOp op) {
  switch (op) {
  case OP_NONE: return "?";
  case OP_NEG: return "-";
  case OP_NOT: return "!";
  case OP_ADD: return "+";
  case OP_SUB: return "-";
  case OP_MUL: return "*";
  case OP_DIV: return "/";
  case OP_MOD: return "%";
  case OP_LT: return "<";
  case OP_LE: return "<=";
  case OP_GT: return ">";
  case OP_GE: return ">=";
  case OP_EQ: return "==";
  case OP_NE: return "!=";
  case OP_AND: return "&&";
  case OP_OR: return "||";
  }
  return "?";
}

/* ---- printer: one node a line, children indented two spaces ---- */

static void indent(FILE *out, int n) {
  for (int i = 0; i < n; i++)
    fputs("  ", out);
}

static void print_loc(FILE *out, SrcLoc loc) {
  fprintf(out, " @%d:%d\n", loc.line, loc.col);
}

static void print_expr(FILE *out, const AstExpr *e, int level) {
  indent(out, level);
  switch (e->kind) {
  case AE_NUM:
    fprintf(out, "Num %s", e->text);
    break;
  case AE_IDENT:
    fprintf(out, "Ident %s", e->text);
    break;
  case AE_UNARY:
    fprintf(out, "Unary %s", ast_op_str(e->op));
    break;
  case AE_BINARY:
    fprintf(out, "Binary %s", ast_op_str(e->op));
    break;
  case AE_COND:
    fputs("Cond ?:", out);
    break;
  case AE_CALL:
    fprintf(out, "Call %s", e->text);
    break;
  case AE_INDEX:
    fprintf(out, "Index %s", e->text);
    break;
  case AE_ERROR:
    fputs("Error", out);
    break;
  }
  print_loc(out, e->loc);
  if (e->kind == AE_CALL || e->kind == AE_INDEX) {
    for (const AstExpr *x = e->a; x; x = x->next)
      print_expr(out, x, level + 1);
    return;
  }
  if (e->a)
    print_expr(out, e->a, level + 1);
  if (e->b)
    print_expr(out, e->b, level + 1);
  if (e->c)
    print_expr(out, e->c, level + 1);
}

static void print_stmt(FILE *out, const AstStmt *s) {
  indent(out, 1);
  switch (s->kind) {
  case ST_FIELD:
    fprintf(out, "Field %s", s->name);
    break;
  case ST_LET:
    fprintf(out, "Let %s", s->name);
    break;
  case ST_FUNC:
    fprintf(out, "Def %s(", s->name);
    for (const AstParam *p = s->params; p; p = p->next)
      fprintf(out, "%s%s", p->name, p->next ? ", " : "");
    fputc(')', out);
    break;
  case ST_INPUT:
    fprintf(out, "Input %s: %s, %d dims", s->name, s->type_name, s->ndims);
    break;
  case ST_TILE:
    fputs("Tile", out);
    for (const AstTileEntry *t = s->tiles; t; t = t->next)
      fprintf(out, " %s=%s", t->key, t->value->text);
    break;
  }
  print_loc(out, s->loc);
  if (s->kind == ST_INPUT) { /* the dims, a list */
    for (const AstExpr *d = s->value; d; d = d->next)
      print_expr(out, d, 2);
  } else if (s->value) {
    print_expr(out, s->value, 2);
  }
}

void fe_print_ast(FILE *out, const Ast *ast) {
  if (!ast)
    return;
  for (const AstItem *it = ast->items; it; it = it->next) {
    fprintf(out, "%s %s", it->kind == ITEM_ATTENTION ? "Attention" : "Schedule",
            it->name);
    print_loc(out, it->loc);
    for (const AstStmt *s = it->stmts; s; s = s->next)
      print_stmt(out, s);
  }
}

void fe_free_ast(Ast *ast) {
  if (!ast)
    return;
  Arena a = ast->arena; /* the Ast itself lives in its arena */
  arena_free(&a);
}
