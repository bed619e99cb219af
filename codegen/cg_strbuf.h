/* cg_strbuf.h - a growable NUL-terminated byte buffer (codegen's text sink). */
#ifndef FLASHC_CG_STRBUF_H
#define FLASHC_CG_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct CgStrBuf {
  char *data; /* NUL-terminated once anything was appended; may be NULL */
  size_t len, cap;
} CgStrBuf;

void cg_strbuf_init(CgStrBuf *sb);
void cg_strbuf_free(CgStrBuf *sb);
void cg_strbuf_clear(CgStrBuf *sb); /* keeps the memory */
void cg_strbuf_append(CgStrBuf *sb, const char *s, size_t n);
void cg_strbuf_puts(CgStrBuf *sb, const char *s);
void cg_strbuf_printf(CgStrBuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cg_strbuf_vprintf(CgStrBuf *sb, const char *fmt, va_list ap);
/* Hands the buffer to the caller (free() it); sb is left empty. Never NULL. */
char *cg_strbuf_take(CgStrBuf *sb, size_t *len);

#endif
