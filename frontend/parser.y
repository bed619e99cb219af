/* parser.y - the grammar of spec files; builds the AST (ast.h).
 *
 * A pure (reentrant) parser. Errors recover at three levels: a bad statement
 * is skipped up to its ';' (`error ';'`), a bad block up to its '}'
 * (`error '}'`), garbage between blocks up to a ';', '}' or block keyword;
 * `yyerrok` after each lets the next error be reported at once, so every
 * syntax error of a file is reported.
 */
%define api.pure full
%define api.prefix {fe_yy}
%define parse.error custom
%define parse.lac full
%locations
%param {struct ParseState *ps}

%code requires {
#include "frontend/ast.h"
#include "frontend/diag.h"

/* A number token: its value, whether it was written as an integer, and its
 * spelling (the AST printer shows numbers as written). */
typedef struct NumTok {
  double v;
  bool is_int;
  const char *text;
} NumTok;

/* Everything one parse needs; the lexer reaches it as its extra data. */
struct ParseState {
  Arena *arena;
  Diag diag;
  const char *file;
  int line, col;         /* lexer position */
  void *scanner;
  AstItem *items;        /* in reverse order while parsing */
  bool depth_reported;   /* one "nested too deeply" per statement */
  /* Where the last two tokens the lexer returned end (the lookahead and the
   * one before it). */
  struct { int line, end_col; } last, prev;
  const char *tok_text;  /* the lookahead's text, for messages */
  int tok_len;
};
}

%code provides {
int fe_lex_lex(FE_YYSTYPE *lval, FE_YYLTYPE *lloc, void *scanner);
/* In lexer.l, which knows the scanner's types: scans `len` bytes of `text`
 * (NUL-terminated) with a fresh scanner and runs fe_yyparse on them. */
void fe_lex_run(struct ParseState *ps, const char *text, int len);
}

%code {
#include <stdio.h>
#include <string.h>

/* Parser stack limit: legit specs use a few dozen entries; 100000 nested
 * parentheses must end in a clean error, not a huge stack. */
#define YYMAXDEPTH 1000

static SrcLoc L(struct ParseState *ps, FE_YYLTYPE l) {
  return (SrcLoc){ps->file, l.first_line, l.first_column};
}

/* Once the error cap is hit the lexer reports end of file, which ends the
 * parse quickly on huge inputs. */
static int fe_yylex(FE_YYSTYPE *lval, FE_YYLTYPE *lloc, struct ParseState *ps) {
  if (ps->diag.stopped)
    return 0;
  return fe_lex_lex(lval, lloc, ps->scanner);
}

static void fe_yyerror(FE_YYLTYPE *lloc, struct ParseState *ps, const char *msg) {
  /* Bison reports "memory exhausted" when YYMAXDEPTH is reached. */
  if (strstr(msg, "exhausted"))
    diag_error(&ps->diag, L(ps, *lloc),
               "expression nested too deeply (parser stack limit of %d)",
               YYMAXDEPTH);
  else
    diag_error(&ps->diag, L(ps, *lloc), "%s", msg);
}

/* Caps expression depth so that sema and the printers, which recurse, stay
 * within the C stack. The statement gets one error and an Error node. */
static AstExpr *limit(struct ParseState *ps, AstExpr *e) {
  if (e->depth <= AST_MAX_EXPR_DEPTH)
    return e;
  if (!ps->depth_reported)
    diag_error(&ps->diag, e->loc,
               "expression nested too deeply (more than %d levels)",
               AST_MAX_EXPR_DEPTH);
  ps->depth_reported = true;
  return ast_error(ps->arena, e->loc);
}

static AstExpr *bin(struct ParseState *ps, FE_YYLTYPE l, AstOp op, AstExpr *x,
                    AstExpr *y) {
  return limit(ps, ast_binary(ps->arena, L(ps, l), op, x, y));
}

static AstStmt *new_stmt(struct ParseState *ps, AstStmtKind k, FE_YYLTYPE l,
                         const char *name, AstExpr *value) {
  AstStmt *s = arena_alloc(ps->arena, sizeof(AstStmt));
  s->kind = k;
  s->loc = L(ps, l);
  s->name = name;
  s->value = value;
  ps->depth_reported = false;
  return s;
}

/* input NAME ':' TYPE ['[' dims ']'] ';': the type name and its location,
 * the dims (NULL for a scalar) as an argument list. */
static AstStmt *new_input(struct ParseState *ps, FE_YYLTYPE l, const char *name,
                          FE_YYLTYPE name_l, const char *type, FE_YYLTYPE type_l,
                          AstExpr *dims) {
  AstStmt *s = new_stmt(ps, ST_INPUT, l, name, dims);
  s->name_loc = L(ps, name_l);
  s->type_name = type;
  s->type_loc = L(ps, type_l);
  for (AstExpr *d = dims; d; d = d->next)
    s->ndims++;
  return s;
}

static AstStmt *reverse_stmts(AstStmt *s) {
  AstStmt *r = NULL;
  while (s) {
    AstStmt *next = s->next;
    s->next = r;
    r = s;
    s = next;
  }
  return r;
}

static void add_item(struct ParseState *ps, AstItemKind k, FE_YYLTYPE kw,
                     const char *name, FE_YYLTYPE name_loc, AstStmt *stmts) {
  AstItem *it = arena_alloc(ps->arena, sizeof(AstItem));
  it->kind = k;
  it->name = name;
  it->loc = L(ps, kw);
  it->name_loc = L(ps, name_loc);
  it->stmts = reverse_stmts(stmts);
  it->next = ps->items;
  ps->items = it;
}

/* Prepends a statement (NULL after an error) to a reversed list. */
static AstStmt *push_stmt(AstStmt *list, AstStmt *s) {
  if (!s)
    return list;
  s->next = list;
  return s;
}
}

%union {
  const char *str;
  NumTok num;
  AstExpr *expr;
  AstStmt *stmt;
  AstParam *param;
  AstTileEntry *tile;
}

%token END 0 "end of file"
%token <str> IDENT "identifier"
%token <num> NUMBER "number"
%token ATTENTION "'attention'"
%token SCHEDULE "'schedule'"
%token LET "'let'"
%token TILE "'tile'"
%token INPUT "'input'"
%token ANDAND "'&&'"
%token OROR "'||'"
%token LE "'<='"
%token GE "'>='"
%token EQ "'=='"
%token NE "'!='"

%type <stmt> stmts stmt sched_stmts sched_stmt
%type <expr> expr args args_opt
%type <param> params params_opt
%type <tile> tile_entries tile_entry

/* Lowest first. Comparisons do not chain: `a < b < c` is a syntax error. */
%right '?' ':'
%left OROR
%left ANDAND
%nonassoc EQ NE
%nonassoc '<' LE '>' GE
%left '+' '-'
%left '*' '/' '%'
%precedence UNARY

%%

/* file: item* */
file
  : %empty
  | file item
  ;

/* item: attention | schedule
 * After an error between blocks, parsing resumes at the next ';', '}' or
 * block keyword. */
item
  : attention
  | schedule
  | error '}'        { yyerrok; }
  | error ';'        { yyerrok; }
  | error attention  { yyerrok; }
  | error schedule   { yyerrok; }
  ;

/* attention: 'attention' IDENT '{' stmt* '}'
 * A block whose end is garbled recovers at its '}'. */
attention
  : ATTENTION IDENT '{' stmts '}'
      { add_item(ps, ITEM_ATTENTION, @1, $2, @2, $4); }
  | ATTENTION IDENT '{' stmts error '}'
      { add_item(ps, ITEM_ATTENTION, @1, $2, @2, $4); yyerrok; }
  ;

/* schedule: 'schedule' IDENT '{' sched_stmt* '}' */
schedule
  : SCHEDULE IDENT '{' sched_stmts '}'
      { add_item(ps, ITEM_SCHEDULE, @1, $2, @2, $4); }
  | SCHEDULE IDENT '{' sched_stmts error '}'
      { add_item(ps, ITEM_SCHEDULE, @1, $2, @2, $4); yyerrok; }
  ;

stmts
  : %empty      { $$ = NULL; }
  | stmts stmt  { $$ = push_stmt($1, $2); }
  ;

/* stmt: IDENT '=' expr ';'                      a field
 *     | IDENT '(' params? ')' '=' expr ';'      mask(...) / score(...)
 *     | 'let' IDENT '=' expr ';'                a named sub-expression
 *     | 'input' IDENT ':' IDENT ('[' args ']')? ';'   a run-time input */
stmt
  : IDENT '=' expr ';'
      { $$ = new_stmt(ps, ST_FIELD, @1, $1, $3); }
  | IDENT '(' params_opt ')' '=' expr ';'
      {
        $$ = new_stmt(ps, ST_FUNC, @1, $1, $6);
        $$->params = $3;
        for (AstParam *p = $3; p; p = p->next)
          $$->nparams++;
      }
  | LET IDENT '=' expr ';'
      { $$ = new_stmt(ps, ST_LET, @1, $2, $4); }
  | INPUT IDENT ':' IDENT ';'
      { $$ = new_input(ps, @1, $2, @2, $4, @4, NULL); }
  | INPUT IDENT ':' IDENT '[' args ']' ';'
      { $$ = new_input(ps, @1, $2, @2, $4, @4, $6); }
  | error ';'
      { $$ = NULL; ps->depth_reported = false; yyerrok; }
  ;

/* params: IDENT (',' IDENT)*   -- kept in order by appending at the tail */
params_opt
  : %empty   { $$ = NULL; }
  | params   { $$ = $1; }
  ;

params
  : IDENT
      {
        $$ = arena_alloc(ps->arena, sizeof(AstParam));
        $$->name = $1;
        $$->loc = L(ps, @1);
      }
  | params ',' IDENT
      {
        AstParam *p = arena_alloc(ps->arena, sizeof(AstParam));
        p->name = $3;
        p->loc = L(ps, @3);
        AstParam *t = $1;
        while (t->next)
          t = t->next;
        t->next = p;
        $$ = $1;
      }
  ;

sched_stmts
  : %empty                  { $$ = NULL; }
  | sched_stmts sched_stmt  { $$ = push_stmt($1, $2); }
  ;

/* sched_stmt: 'tile' tile_entry (',' tile_entry)* ';'
 *           | IDENT '=' NUMBER ';' */
sched_stmt
  : TILE tile_entries ';'
      {
        $$ = new_stmt(ps, ST_TILE, @1, "tile", NULL);
        $$->tiles = $2;
      }
  | IDENT '=' NUMBER ';'
      {
        AstExpr *v = ast_num(ps->arena, L(ps, @3), $3.v, $3.is_int, $3.text);
        $$ = new_stmt(ps, ST_FIELD, @1, $1, v);
      }
  | error ';'
      { $$ = NULL; yyerrok; }
  ;

tile_entries
  : tile_entry                   { $$ = $1; }
  | tile_entries ',' tile_entry
      {
        AstTileEntry *t = $1;
        while (t->next)
          t = t->next;
        t->next = $3;
        $$ = $1;
      }
  ;

/* tile_entry: IDENT '=' NUMBER */
tile_entry
  : IDENT '=' NUMBER
      {
        $$ = arena_alloc(ps->arena, sizeof(AstTileEntry));
        $$->key = $1;
        $$->loc = L(ps, @1);
        $$->value = ast_num(ps->arena, L(ps, @3), $3.v, $3.is_int, $3.text);
      }
  ;

/* expr: NUMBER | IDENT | IDENT '(' args? ')' | IDENT '[' args ']' | '(' expr ')'
 *     | ('-' | '!') expr | expr OP expr | expr '?' expr ':' expr */
expr
  : NUMBER              { $$ = ast_num(ps->arena, L(ps, @1), $1.v, $1.is_int, $1.text); }
  | IDENT               { $$ = ast_ident(ps->arena, L(ps, @1), $1); }
  | IDENT '(' args_opt ')'
      { $$ = limit(ps, ast_call(ps->arena, L(ps, @1), $1, $3)); }
  | IDENT '[' args ']'
      { $$ = limit(ps, ast_index(ps->arena, L(ps, @1), $1, $3)); }
  | '(' expr ')'        { $$ = $2; }
  | '-' expr %prec UNARY
      { $$ = limit(ps, ast_unary(ps->arena, L(ps, @1), OP_NEG, $2)); }
  | '!' expr %prec UNARY
      { $$ = limit(ps, ast_unary(ps->arena, L(ps, @1), OP_NOT, $2)); }
  | expr '*' expr       { $$ = bin(ps, @2, OP_MUL, $1, $3); }
  | expr '/' expr       { $$ = bin(ps, @2, OP_DIV, $1, $3); }
  | expr '%' expr       { $$ = bin(ps, @2, OP_MOD, $1, $3); }
  | expr '+' expr       { $$ = bin(ps, @2, OP_ADD, $1, $3); }
  | expr '-' expr       { $$ = bin(ps, @2, OP_SUB, $1, $3); }
  | expr '<' expr       { $$ = bin(ps, @2, OP_LT, $1, $3); }
  | expr LE expr        { $$ = bin(ps, @2, OP_LE, $1, $3); }
  | expr '>' expr       { $$ = bin(ps, @2, OP_GT, $1, $3); }
  | expr GE expr        { $$ = bin(ps, @2, OP_GE, $1, $3); }
  | expr EQ expr        { $$ = bin(ps, @2, OP_EQ, $1, $3); }
  | expr NE expr        { $$ = bin(ps, @2, OP_NE, $1, $3); }
  | expr ANDAND expr    { $$ = bin(ps, @2, OP_AND, $1, $3); }
  | expr OROR expr      { $$ = bin(ps, @2, OP_OR, $1, $3); }
  | expr '?' expr ':' expr
      { $$ = limit(ps, ast_cond(ps->arena, L(ps, @2), $1, $3, $5)); }
  ;

/* args: expr (',' expr)* */
args_opt
  : %empty  { $$ = NULL; }
  | args    { $$ = $1; }
  ;

args
  : expr    { $$ = $1; }
  | args ',' expr
      {
        AstExpr *t = $1;
        while (t->next)
          t = t->next;
        t->next = $3;
        $$ = $1;
      }
  ;

%%

/* Names a token for a message: "identifier 'foo'", "'}'", "end of file". */
static void describe_token(struct ParseState *ps, yysymbol_kind_t tok,
                           char *buf, size_t n) {
  const char *name = yysymbol_name(tok);
  if (tok == YYSYMBOL_IDENT || tok == YYSYMBOL_NUMBER) {
    int len = ps->tok_len;
    snprintf(buf, n, "%s '%.*s%s'", name, len > 40 ? 40 : len, ps->tok_text,
             len > 40 ? "..." : "");
  } else {
    snprintf(buf, n, "%s", name);
  }
}

static bool is_comparison(const char *name) {
  return strcmp(name, "'<'") == 0 || strcmp(name, "'>'") == 0 ||
         strcmp(name, "'<='") == 0 || strcmp(name, "'>='") == 0 ||
         strcmp(name, "'=='") == 0 || strcmp(name, "'!='") == 0;
}

/* "expected ';' but found identifier 'heads'".
 * Where an expression could go on, the expected set holds every operator;
 * listing them helps nobody, so only the punctuation that would close
 * something is named. A missing ';' at the end of a line is reported just
 * after the previous token, where it belongs. */
static int yyreport_syntax_error(const yypcontext_t *ctx, struct ParseState *ps) {
  yysymbol_kind_t expected[YYNTOKENS];
  int n = yypcontext_expected_tokens(ctx, expected, YYNTOKENS);
  yysymbol_kind_t tok = yypcontext_token(ctx);
  SrcLoc loc = L(ps, *yypcontext_location(ctx));
  char found[128], want[256] = "";
  describe_token(ps, tok, found, sizeof found);
  if (n > 5) {
    static const char *const closers[] = {"')'", "','", "':'", "';'", "'}'"};
    int k = 0;
    for (int c = 0; c < 5; c++)
      for (int i = 0; i < n; i++)
        if (strcmp(yysymbol_name(expected[i]), closers[c]) == 0)
          expected[k++] = expected[i];
    n = k;
  }
  /* "expected end of file" never helps: it is always also allowed. */
  int m = 0;
  for (int i = 0; i < n; i++)
    if (expected[i] != YYSYMBOL_YYEOF)
      expected[m++] = expected[i];
  n = m;
  bool semi = false;
  for (int i = 0; i < n; i++) {
    const char *name = yysymbol_name(expected[i]);
    size_t used = strlen(want);
    snprintf(want + used, sizeof want - used, "%s%s",
             i == 0 ? "" : i == n - 1 ? " or " : ", ", name);
    if (strcmp(name, "';'") == 0)
      semi = true;
  }
  if (semi && ps->prev.line > 0 && ps->prev.line < loc.line)
    loc = (SrcLoc){ps->file, ps->prev.line, ps->prev.end_col + 1};
  if (n > 0)
    diag_error(&ps->diag, loc, "expected %s but found %s", want, found);
  else
    diag_error(&ps->diag, loc, "unexpected %s", found);
  if (is_comparison(yysymbol_name(tok)) && semi)
    diag_note(&ps->diag, (SrcLoc){0},
              "comparisons do not chain; write a < b && b < c");
  return 0;
}

#include "frontend/frontend.h"

Ast *fe_parse(const char *filename, const char *text, size_t len, int *nerrors) {
  Arena arena = {0};
  Ast *ast = arena_alloc(&arena, sizeof(Ast));
  ast->arena = arena;
  if (!filename)
    filename = "<input>";
  ast->file = arena_strndup(&ast->arena, filename, strlen(filename));
  if (!text)
    len = 0;
  ast->text = arena_strndup(&ast->arena, text ? text : "", len);
  ast->len = len;

  struct ParseState ps = {0};
  ps.arena = &ast->arena;
  ps.file = ast->file;
  ps.diag = (Diag){.file = ast->file, .text = ast->text, .len = len};
  ps.line = ps.col = 1;
  if (len > (size_t)2147483646) {
    diag_error(&ps.diag, (SrcLoc){ast->file, 1, 1}, "file is too large");
  } else {
    fe_lex_run(&ps, ast->text, (int)len);
  }
  /* Items were prepended; put them back in source order. */
  AstItem *r = NULL;
  for (AstItem *it = ps.items, *next; it; it = next) {
    next = it->next;
    it->next = r;
    r = it;
  }
  ast->items = r;
  ast->parse_errors = ps.diag.nerrors;
  if (nerrors)
    *nerrors = ps.diag.nerrors;
  return ast;
}
