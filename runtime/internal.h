/* internal.h - shared between the runtime's own files; not installed. */
#ifndef FLASHC_RUNTIME_INTERNAL_H
#define FLASHC_RUNTIME_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include "flashc_runtime.h"

/* snprintf into buf[len] that tolerates buf == NULL / len == 0. */
void fa_fmt(char *buf, size_t len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Size in bytes of one element of dtype (0 when out of range). */
size_t fa_dtype_size(fa_dtype dtype);

#endif
