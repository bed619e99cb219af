/* ast.h - the syntax tree the parser builds and sema reads.
 *
 * Every node lives in the Ast's arena: nodes are never freed one by one, so
 * the parser's error recovery cannot leak, and fe_free_ast frees them all.
 * Lists (items, statements, arguments, parameters) are singly linked through
 * `next`, in source order.
 */
#ifndef FLASHC_AST_H
#define FLASHC_AST_H

#include <stdbool.h>
#include <stddef.h>

#include "base/arena.h"
#include "frontend/spec.h"

/* Deepest expression the parser accepts. It bounds every recursive walk
 * (printers, sema) so that no input can overflow the C stack. */
#define AST_MAX_EXPR_DEPTH 256

typedef enum AstExprKind {
  AE_NUM,    /* num, text */
  AE_IDENT,  /* name */
  AE_UNARY,  /* op a: '-' or '!' */
  AE_BINARY, /* a op b */
  AE_COND,   /* a ? b : c */
  AE_CALL,   /* name(args) */
  AE_INDEX,  /* name[args]: an element of a run-time input tensor */
  AE_ERROR,  /* stands in for a part that was already reported */
} AstExprKind;

/* Binary and unary operators, by their spelling. */
typedef enum AstOp {
  OP_NONE, OP_NEG, OP_NOT,
  OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD,
  OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE, OP_AND, OP_OR,
} AstOp;

typedef struct AstExpr AstExpr;
struct AstExpr {
  AstExprKind kind;
  AstOp op;
  SrcLoc loc;      /* the operator for unary/binary/cond, else the token */
  int depth;       /* 1 for a leaf; bounded by AST_MAX_EXPR_DEPTH */
  double num;      /* AE_NUM */
  bool is_int;     /* AE_NUM written without '.' or exponent */
  const char *text;/* AE_NUM: the literal as written; AE_IDENT/AE_CALL: name */
  AstExpr *a, *b, *c; /* operands; AE_CALL, AE_INDEX: a = first argument */
  AstExpr *next;   /* next argument of a call or index */
  int nargs;       /* AE_CALL, AE_INDEX */
};

typedef struct AstParam AstParam;
struct AstParam {
  const char *name;
  SrcLoc loc;
  AstParam *next;
};

typedef enum AstStmtKind {
  ST_FIELD, /* name = value; */
  ST_FUNC,  /* name(params) = value;   (mask, score) */
  ST_LET,   /* let name = value; */
  ST_TILE,  /* tile q = N, kv = N;     (schedule) */
  ST_INPUT, /* input name: type[dims];  (value = the first dim, or NULL) */
} AstStmtKind;

/* One `key = NUMBER` entry of a `tile` statement. */
typedef struct AstTileEntry AstTileEntry;
struct AstTileEntry {
  const char *key;
  SrcLoc loc;
  AstExpr *value;
  AstTileEntry *next;
};

typedef struct AstStmt AstStmt;
struct AstStmt {
  AstStmtKind kind;
  SrcLoc loc;          /* the first token of the statement */
  const char *name;    /* field, function or let name */
  AstParam *params;    /* ST_FUNC */
  int nparams;
  AstExpr *value;      /* ST_FIELD, ST_FUNC, ST_LET */
  AstTileEntry *tiles; /* ST_TILE */
  SrcLoc name_loc;     /* ST_INPUT: the input's name */
  const char *type_name; /* ST_INPUT: i32, f32, f16, bf16 */
  SrcLoc type_loc;
  int ndims;           /* ST_INPUT: 0 for a scalar */
  AstStmt *next;
};

typedef enum AstItemKind { ITEM_ATTENTION, ITEM_SCHEDULE } AstItemKind;

/* A top-level block: `attention NAME { ... }` or `schedule NAME { ... }`. */
typedef struct AstItem AstItem;
struct AstItem {
  AstItemKind kind;
  const char *name;
  SrcLoc loc;       /* the keyword */
  SrcLoc name_loc;
  AstStmt *stmts;
  AstItem *next;
};

struct Ast {
  Arena arena;
  const char *file;  /* in the arena */
  const char *text;  /* a NUL-terminated copy of the source, for diagnostics */
  size_t len;
  AstItem *items;
  int parse_errors;  /* fe_check refuses a tree that had syntax errors */
};

/* Node constructors used by the parser. Each computes `depth`. */
AstExpr *ast_num(Arena *a, SrcLoc loc, double v, bool is_int, const char *text);
AstExpr *ast_ident(Arena *a, SrcLoc loc, const char *name);
AstExpr *ast_unary(Arena *a, SrcLoc loc, AstOp op, AstExpr *x);
AstExpr *ast_binary(Arena *a, SrcLoc loc, AstOp op, AstExpr *x, AstExpr *y);
AstExpr *ast_cond(Arena *a, SrcLoc loc, AstExpr *c, AstExpr *x, AstExpr *y);
AstExpr *ast_call(Arena *a, SrcLoc loc, const char *name, AstExpr *args);
AstExpr *ast_index(Arena *a, SrcLoc loc, const char *name, AstExpr *args);
AstExpr *ast_error(Arena *a, SrcLoc loc);

const char *ast_op_str(AstOp op);

#endif
