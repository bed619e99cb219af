/* internal.h - shared between the runtime's own files; not installed. */
#ifndef FLASHC_RUNTIME_INTERNAL_H
#define FLASHC_RUNTIME_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "flashc_runtime.h"

/* snprintf into buf[len] that tolerates buf == NULL / len == 0. */
void fa_fmt(char *buf, size_t len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Size in bytes of one element of dtype (0 when out of range). */
size_t fa_dtype_size(fa_dtype dtype);

/* runtime.c's driver services for decode.c, which has no access to the
 * handles' insides. enter/leave bracket the others (the module's context
 * current on this thread); failures leave their message in the module. */
fa_status fa_module_enter_(fa_module *m);
void fa_module_leave_(fa_module *m);
/* The module's scratch grown to `bytes` at least; *base its device address. */
fa_status fa_module_scratch_(fa_module *m, size_t bytes, uint64_t *base);
/* The scratch's first `bytes` (a multiple of 4) zero before the next work
 * on `stream`: zeroes what is not known to be (cuMemsetD32Async on the
 * stream), and from then on only those bytes count as zero. Fused decode
 * kernels keep their arrival counters there and leave them zero. */
fa_status fa_module_zero_head_(fa_module *m, size_t bytes, void *stream);
/* A module's entry points: the kernel, a decode kernel's combine kernel and
 * its small-batch variant (metadata combine_kernel, wide_kernel). */
typedef enum fa_entry { FA_ENTRY_KERNEL = 0, FA_ENTRY_COMBINE, FA_ENTRY_WIDE } fa_entry;
/* Launches entry point `which`. */
fa_status fa_module_launch_(fa_module *m, fa_entry which, const unsigned grid[3], unsigned block,
                            unsigned smem, void *stream, void **params);
int fa_module_sm_count_(const fa_module *m);
char *fa_module_msg_(fa_module *m, size_t *len);
int *fa_module_last_nsplit_(fa_module *m);
int *fa_module_last_wide_(fa_module *m); /* the last fa_decode ran the small-batch variant */

/* Replaces ctx's message (the JIT library reports compile errors through it;
 * it cannot see struct fa_context). NULL ctx is a no-op. */
void fa_context_set_errmsg(fa_context *ctx, const char *msg);

/* ---- the checks of a launch's four tensors (tensor_check.c) ---- */

/* q, k, v, o of one launch, their names, each one's dimension names, the
 * kernel's dtype, and where the message of a failure goes. */
typedef struct fa_launch_tensors {
  const fa_tensor *t[4];
  const char *name[4];
  const char *const *dims[4];
  fa_dtype dtype;
  char *msg;
  size_t len;
} fa_launch_tensors;

int fa_mul_ok(int64_t a, int64_t b, int64_t *r); /* a * b for a, b >= 0; 0 on overflow */
int fa_add_ok(int64_t a, int64_t b, int64_t *r);
int fa_has_elements(const fa_tensor *t);
int fa_ranges_meet(uintptr_t a, int64_t alen, uintptr_t b, int64_t blen);
fa_status fa_check_nulls(const fa_launch_tensors *c);
fa_status fa_check_dtypes(const fa_launch_tensors *c);
fa_status fa_check_nonnegative(const fa_launch_tensors *c);
fa_status fa_check_strides(const fa_launch_tensors *c);
fa_status fa_check_alignment(const fa_launch_tensors *c, const void *lse);
/* ext[i] receives tensor i's extent in bytes. */
fa_status fa_check_extents(const fa_launch_tensors *c, int64_t ext[4]);
fa_status fa_check_o_overlap(const fa_launch_tensors *c);

#endif
