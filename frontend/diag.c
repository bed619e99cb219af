/* diag.c - printing diagnostics with the source line and a caret. */
#include "frontend/diag.h"

#include <stdarg.h>
#include <string.h>

#include "frontend/frontend.h"

static FILE *diag_out;

void fe_set_diag_stream(FILE *out) { diag_out = out; }

FILE *diag_stream(void) { return diag_out ? diag_out : stderr; }

/* Prints source line `line` and a caret under byte column `col`. Tabs in the
 * line are repeated in the caret line so the caret stays aligned; other
 * control and non-ASCII bytes print as '?' so a binary file cannot garble the
 * terminal or shift the caret. */
static void print_source_line(Diag *d, int line, int col) {
  if (!d->text || line < 1)
    return;
  const char *p = d->text, *end = d->text + d->len;
  int l = 1;
  if (d->line_p && d->line_no <= line) {
    p = d->line_p;
    l = d->line_no;
  }
  for (; l < line && p < end; p++)
    if (*p == '\n')
      l++;
  d->line_p = p;
  d->line_no = l;
  if (p >= end && line > 1 && (p == d->text || p[-1] != '\n'))
    return;
  const char *eol = p;
  while (eol < end && *eol != '\n')
    eol++;
  if (eol > p && eol[-1] == '\r')
    eol--;
  FILE *out = diag_stream();
  /* Very long lines (minified or fuzzed input) are cut around the column. */
  const char *from = p;
  if (col > 200 && col - 100 < eol - p)
    from = p + col - 100;
  const char *to = eol;
  if (to - from > 300)
    to = from + 300;
  fputs("  ", out);
  for (const char *q = from; q < to; q++) {
    unsigned char c = (unsigned char)*q;
    fputc(c == '\t' || (c >= 32 && c < 127) ? c : '?', out);
  }
  fputs("\n  ", out);
  for (const char *q = from; q < p + col - 1 && q < eol; q++)
    fputc(*q == '\t' ? '\t' : ' ', out);
  fputs("^\n", out);
}

static void vreport(Diag *d, SrcLoc loc, const char *kind, const char *fmt,
                    va_list ap) {
  FILE *out = diag_stream();
  if (loc.line > 0)
    fprintf(out, "%s:%d:%d: %s: ", loc.file ? loc.file : d->file, loc.line,
            loc.col, kind);
  else
    fprintf(out, "%s: ", kind);
  vfprintf(out, fmt, ap);
  fputc('\n', out);
  if (loc.line > 0)
    print_source_line(d, loc.line, loc.col);
}

void diag_error(Diag *d, SrcLoc loc, const char *fmt, ...) {
  d->nerrors++;
  d->muted = d->stopped;
  if (d->stopped)
    return;
  va_list ap;
  va_start(ap, fmt);
  vreport(d, loc, "error", fmt, ap);
  va_end(ap);
  if (d->nerrors >= DIAG_MAX_ERRORS) {
    fprintf(diag_stream(), "%s: fatal error: too many errors (%d), stopping\n",
            d->file, d->nerrors);
    d->stopped = true;
    d->muted = true;
  }
}

void diag_note(Diag *d, SrcLoc loc, const char *fmt, ...) {
  if (d->muted)
    return;
  va_list ap;
  va_start(ap, fmt);
  vreport(d, loc, "note", fmt, ap);
  va_end(ap);
}

/* Names longer than EDIT_MAX_NAME are EDIT_FAR from everything: the table
 * of edit_distance, (EDIT_MAX_NAME + 1)^2 ints, lives on the stack. */
enum { EDIT_MAX_NAME = 63, EDIT_FAR = 99 };

/* Edit distance with adjacent transpositions ("hedas" -> "heads" is 1). */
static int edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > EDIT_MAX_NAME || lb > EDIT_MAX_NAME)
    return EDIT_FAR;
  int d[EDIT_MAX_NAME + 1][EDIT_MAX_NAME + 1];
  for (size_t i = 0; i <= la; i++)
    d[i][0] = (int)i;
  for (size_t j = 0; j <= lb; j++)
    d[0][j] = (int)j;
  for (size_t i = 1; i <= la; i++)
    for (size_t j = 1; j <= lb; j++) {
      int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < best)
        best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best)
        best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[la][lb];
}

const char *diag_closest(const char *name, const char *const *cands) {
  const char *best = NULL;
  int best_d = EDIT_FAR;
  /* Short names are too easily "close" to anything. */
  size_t len = strlen(name);
  int limit = len <= 2 ? 0 : len <= 4 ? 1 : 2;
  for (int i = 0; cands[i]; i++) {
    int dist = edit_distance(name, cands[i]);
    if (dist < best_d) {
      best_d = dist;
      best = cands[i];
    }
  }
  return best_d <= limit ? best : NULL;
}
