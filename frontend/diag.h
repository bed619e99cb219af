/* diag.h - compiler-style diagnostics.
 *
 *   file:line:col: error: message
 *     the source line
 *     ^
 *   note: a hint
 *
 * A Diag belongs to one phase (parse or check) of one file: it knows the source
 * text (to print the line) and counts the errors. After DIAG_MAX_ERRORS errors
 * it prints "too many errors" once, then stays quiet and sets `stopped`, which
 * the parser reads to end early (a 10 MB file of garbage must not take long).
 */
#ifndef FLASHC_DIAG_H
#define FLASHC_DIAG_H

#include <stdbool.h>
#include <stdio.h>

#include "frontend/spec.h"

#define DIAG_MAX_ERRORS 100

typedef struct Diag {
  const char *file;
  const char *text; /* NUL-terminated source, may be NULL */
  size_t len;
  int nerrors;
  bool stopped;     /* the error cap was reached */
  bool muted;       /* the last error was not printed: drop its notes too */
  /* Start of the last line shown: errors come mostly in source order, so
   * finding the next line need not rescan a big file from its start. */
  const char *line_p;
  int line_no;
} Diag;

FILE *diag_stream(void);

/* Reports an error at `loc` (its file, line, col) and counts it. */
void diag_error(Diag *d, SrcLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A note for the last error. With loc.line > 0 it shows the source like an
 * error ("previous definition is here"); otherwise it is one `note:` line. */
void diag_note(Diag *d, SrcLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The candidate closest to `name` by edit distance, or NULL when none is
 * close enough to be a plausible typo. `cands` ends with NULL. */
const char *diag_closest(const char *name, const char *const *cands);

#endif
