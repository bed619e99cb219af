/* sema_internal.h - what the two halves of sema share: sema_expr.c
 * (expression trees, names, resolving expressions) and sema.c (fields,
 * attention blocks, schedules, the file). Not a public header. */
#ifndef FLASHC_SEMA_INTERNAL_H
#define FLASHC_SEMA_INTERNAL_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/ast.h"
#include "frontend/diag.h"
#include "frontend/frontend.h"

#define MAX_EXPR_NODES 4096        /* one resolved expression */
#define MAX_TOTAL_NODES 1000000    /* every expression of a file */
#define MAX_RESOLVED_DEPTH 1000    /* after let substitution */

/* Capacities of sema's fixed-size buffers:
 *   SUGGEST_LETS    "did you mean" offers the first SUGGEST_LETS lets of a
 *                   block (or attention names of a file); later ones are not
 *                   searched
 *   SUGGEST_PARAMS  ... and the first SUGGEST_PARAMS mask/score parameters
 *   SUGGEST_FIXED   room for the other candidates besides the lets: the
 *                   parameters or the four index names, the four spec
 *                   constants, seqlen_q and seqlen_k (at most 14)
 *   NAME_TABLE_MIN  first size of the attention-name table, a power of 2;
 *                   it doubles until at most half full
 *   TILE_WHAT_LEN   "tile q" / "tile kv", the subject of a tile message */
enum {
  SUGGEST_LETS = 64,
  SUGGEST_PARAMS = 8,
  SUGGEST_FIXED = 16,
  NAME_TABLE_MIN = 16,
  TILE_WHAT_LEN = 32,
};

typedef struct Sema {
  Diag diag;
  char *file;        /* owned by the SpecFile */
  long total_nodes;
} Sema;

/* A `let` seen so far in the current block. */
typedef struct Let {
  const char *name;
  SrcLoc loc;
  Expr *value;       /* NULL when its definition had errors */
  int size, depth;
  struct Let *next;
} Let;

/* What an expression is being resolved for: decides which names it sees.
 * CTX_LAUNCH: known at launch (scale): constants and run-time inputs, no
 * positions. */
typedef enum Ctx { CTX_LET, CTX_MASK, CTX_SCORE, CTX_CONST, CTX_LAUNCH } Ctx;

/* Is the value of a CTX_CONST / CTX_LAUNCH expression the same for the
 * whole launch (no positions, no score)? */
static inline bool ctx_uniform(int ctx) { return ctx == CTX_CONST || ctx == CTX_LAUNCH; }

typedef struct Scope {
  Ctx ctx;
  const char *what;      /* "mask", "score", "scale", ... for messages */
  const AstStmt *fn;     /* mask/score definition: its parameters */
  const AstStmt *block;  /* all statements: to spot a let used too early */
  Let *lets;
  KernelSpec *k;         /* spec constants, inputs (an index may add a `require`) */
  int nodes;
  bool too_big;          /* reported once per expression */
} Scope;

static inline void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (!p) {
    fputs("flashc: out of memory\n", stderr);
    abort();
  }
  return p;
}

static inline char *xstrdup(const char *s) {
  char *p = xcalloc(1, strlen(s) + 1);
  strcpy(p, s);
  return p;
}

/* Locations in the spec point at the SpecFile's own copy of the name. */
static inline SrcLoc sloc(Sema *S, SrcLoc l) {
  l.file = S->file;
  return l;
}

static const SrcLoc NOLOC = {0};

/* ---- sema_expr.c: expression trees, names, resolving expressions ---- */

/* The spec constants' names, in constant_value's order, NULL-terminated. */
extern const char *const sema_constant_names[];
void sema_free_expr(Expr *e);
int sema_expr_size(const Expr *e);
int sema_expr_depth(const Expr *e);
/* Is e a comparison or a logical operator (a boolean by its operator)? */
bool sema_is_bool(const Expr *e);
/* e's value, for expressions without variables. */
double sema_eval(const Expr *e);
/* Index of name among the variables s b h q k seqlen_q seqlen_k / in a
 * NULL-terminated list; -1 if absent. */
int sema_var_index(const char *name);
int sema_name_index(const char *name, const char *const *names);
Let *sema_find_let(Let *l, const char *name);
/* Where e starts (its first token), for messages about a whole value. */
SrcLoc sema_start(const AstExpr *e);
/* Resolves e in scope sc (names to variables, constants, let copies);
 * NULL (diagnosed) on errors. */
Expr *sema_resolve(Sema *S, Scope *sc, const AstExpr *e, int depth);
Expr *sema_mk_num(Sema *S, Scope *sc, SrcLoc loc, double v);
Expr *sema_mk_var(Sema *S, Scope *sc, SrcLoc loc, ExprVar v);
Expr *sema_mk(Sema *S, Scope *sc, ExprKind kind, SrcLoc loc, Expr *a, Expr *b, Expr *c);

/* ---- sema_input.c: run-time inputs ---- */

/* Phase 2b: the block's `input` statements into k->inputs (needs heads). */
void sema_declare_inputs(Sema *S, const AstItem *it, KernelSpec *k);
/* Index of the input called name in k, or -1. */
int sema_input_index(const KernelSpec *k, const char *name);
/* Has e integer values (the IR's index type)? */
bool sema_is_integer(const KernelSpec *k, const Expr *e);
/* The first run-time input e reads, or NULL. */
const Expr *sema_find_input(const Expr *e);
/* name[i, ...]: a tensor input's element, every index proven inside its dim. */
Expr *sema_resolve_index(Sema *S, Scope *sc, const AstExpr *e, int depth);
/* A scalar input used by name; *found says whether e names an input. */
Expr *sema_resolve_input_name(Sema *S, Scope *sc, const AstExpr *e, bool *found);

/* sema.c: reports a field (or definition) given a second time. */
void sema_duplicate(Sema *S, const AstStmt *s, const AstStmt *prev, const char *what);
/* sema.c: one attention block checked and resolved, or NULL after errors. */
KernelSpec *sema_check_attention(Sema *S, const AstItem *it);
/* sema.c: frees a KernelSpec and its expressions. */
void sema_free_kernel(KernelSpec *k);
/* sema_schedule.c: checks a `schedule` block's fields into *sch. */
void sema_check_schedule(Sema *S, const AstItem *it, Schedule *sch);

#endif
