/* cg_strbuf.c - growable text buffer. Out of memory aborts: codegen has no
 * sensible way to go on without its output. */
#include "codegen/cg_strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cg_strbuf_init(CgStrBuf *sb) { memset(sb, 0, sizeof *sb); }

void cg_strbuf_free(CgStrBuf *sb) {
  free(sb->data);
  cg_strbuf_init(sb);
}

void cg_strbuf_clear(CgStrBuf *sb) {
  sb->len = 0;
  if (sb->data)
    sb->data[0] = 0;
}

static void reserve(CgStrBuf *sb, size_t extra) {
  if (sb->len + extra + 1 <= sb->cap)
    return;
  size_t cap = sb->cap ? sb->cap : 256;
  while (cap < sb->len + extra + 1)
    cap *= 2;
  char *p = realloc(sb->data, cap);
  if (!p) {
    fputs("flashc: out of memory\n", stderr);
    abort();
  }
  sb->data = p;
  sb->cap = cap;
}

void cg_strbuf_append(CgStrBuf *sb, const char *s, size_t n) {
  reserve(sb, n);
  memcpy(sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = 0;
}

void cg_strbuf_puts(CgStrBuf *sb, const char *s) { cg_strbuf_append(sb, s, strlen(s)); }

void cg_strbuf_vprintf(CgStrBuf *sb, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0)
    return;
  reserve(sb, (size_t)n);
  vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
  sb->len += (size_t)n;
}

void cg_strbuf_printf(CgStrBuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cg_strbuf_vprintf(sb, fmt, ap);
  va_end(ap);
}

char *cg_strbuf_take(CgStrBuf *sb, size_t *len) {
  if (!sb->data)
    cg_strbuf_append(sb, "", 0);
  char *p = sb->data;
  if (len)
    *len = sb->len;
  cg_strbuf_init(sb);
  return p;
}
