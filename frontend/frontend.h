/* frontend.h - from spec source text to checked KernelSpecs.
 *
 *   text --lexer.l/parser.y--> Ast --sema--> SpecFile (spec.h)
 *
 * Errors are printed to the diagnostic stream (stderr unless redirected with
 * fe_set_diag_stream) as `file:line:col: error: message`, the source line and
 * a caret, and counted; the parser recovers and reports every error in a file.
 */
#ifndef FLASHC_FRONTEND_H
#define FLASHC_FRONTEND_H

#include <stddef.h>
#include <stdio.h>

#include "frontend/spec.h"

typedef struct Ast Ast;

/* Where diagnostics go (default stderr). */
void fe_set_diag_stream(FILE *out);

/* Parses `len` bytes of `text` (need not be NUL-terminated; may hold any
 * bytes). `filename` is used in diagnostics. Never returns NULL except when
 * out of memory; *nerrors receives the number of errors reported. */
Ast *fe_parse(const char *filename, const char *text, size_t len, int *nerrors);

/* Prints the AST in the indented text form that `flashc -emit=ast` shows. */
void fe_print_ast(FILE *out, const Ast *ast);

/* Checks the AST and resolves it to KernelSpecs. Reports semantic errors;
 * *nerrors receives their number. Returns NULL when there were errors. */
SpecFile *fe_check(const Ast *ast, int *nerrors);

/* Prints the checked spec (defaults filled in, masks as expressions);
 * `flashc -emit=spec`. */
void fe_print_spec(FILE *out, const SpecFile *spec);

/* Prints an expression in source syntax, fully parenthesized. */
void fe_print_expr(FILE *out, const Expr *e);

void fe_free_ast(Ast *ast);        /* NULL is harmless */
void fe_free_spec(SpecFile *spec); /* NULL is harmless */

#endif
