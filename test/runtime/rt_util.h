/* rt_util.h - what the runtime's lit drivers (flashc-rt-test,
 * flashc-rt-backward) share: reporting a status, reading and editing
 * metadata files, parsing numbers, pointers, dtypes and tensor edits. */
#ifndef FLASHC_RT_UTIL_H
#define FLASHC_RT_UTIL_H

#include <stddef.h>

#include "flashc_runtime.h"

/* "FA_ERR_SHAPE" (fa_status_string up to its colon); static storage. */
const char *rt_status_name(fa_status s);
/* Prints `status: NAME` and `message: MSG` (when not empty); returns the
 * exit code: 0 for FA_OK, 1 otherwise. */
int rt_report(fa_status st, const char *msg);
/* A whole file, malloc'ed; NULL on failure. */
char *rt_read_file(const char *path, size_t *len);
/* Reads `path` and applies the edits of argv (--drop=KEY removes KEY's
 * lines, --set=KEY=VALUE replaces them by one line at the end, --add=LINE
 * appends LINE); malloc'ed, NULL on failure (with a message on stderr). */
char *rt_load_meta_text(const char *path, int argc, char **argv, size_t *len);
/* strtoll of the whole string (any base); exits 2 with a message when it
 * is not a number. */
long long rt_num(const char *s, const char *what);
/* "null", "+N" (cur + N) or an address. */
void *rt_ptr_value(const char *s, const void *cur);
/* "f16", "bf16", "f32" or a number. */
fa_dtype rt_dtype_value(const char *s);
/* Applies MOD "T.dimI=N", "T.strideI=N", "T.data=null|0xHEX|+N" or
 * "T.dtype=D" to the tensor named T among names[0..n); 0 when MOD is none
 * of these. */
int rt_tensor_mod(fa_tensor *const *ts, const char *const *names, int n, const char *mod);

#endif
