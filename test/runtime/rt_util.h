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
/* "f16", "bf16", "f32", "i32" or a number. */
fa_dtype rt_dtype_value(const char *s);
/* Applies MOD "T.dimI=N", "T.strideI=N", "T.data=null|0xHEX|+N" or
 * "T.dtype=D" to the tensor named T among names[0..n); 0 when MOD is none
 * of these. */
int rt_tensor_mod(fa_tensor *const *ts, const char *const *names, int n, const char *mod);

/* ---- run-time inputs (docs/abi.md, "Run-time inputs") ---- */

#define RT_MAX_BINDINGS (FA_MAX_INPUTS + 4)

/* The bindings of a test launch (fa_input): rt_inputs_bind makes a valid
 * one of each input the kernel declares; rt_inputs_mod edits them. */
typedef struct rt_inputs {
  fa_input in[RT_MAX_BINDINGS];
  char names[RT_MAX_BINDINGS][96];
  int n;          /* bindings in `in` */
  int null_array; /* inputs=null: the args get NULL with num_inputs n */
  int has_count;  /* num_inputs=N given: */
  int count;      /* the args' count instead of n */
} rt_inputs;

/* Binds every input info declares: a tensor contiguous ([batch, seqlen_q,
 * seqlen_k] for its launch dims, constants as declared) at `base` + i *
 * 2^32, a scalar 1.5 (f32) or 3 (i32). */
void rt_inputs_bind(rt_inputs *r, const fa_kernel_info *info, long long batch, long long sq,
                    long long sk, unsigned long long base);
/* Applies MOD: NAME.dimI=N, NAME.strideI=N, NAME.data=null|0xHEX|+N,
 * NAME.dtype=D (a tensor's), NAME.value=X (a scalar's; strtod: nan, inf,
 * 1e39), NAME.name=null, unbind=NAME, bind=NAME (one more binding: a copy
 * of NAME's, or a scalar 0 for a name not bound), inputs=null,
 * num_inputs=N. 0 when MOD is none of these. */
int rt_inputs_mod(rt_inputs *r, const char *mod);
/* Sets an args struct's inputs and num_inputs from r. */
void rt_inputs_args(rt_inputs *r, const fa_input **inputs, int *num_inputs);
/* Prints `input NAME DTYPE DIMS` a declared input and `require COND`. */
void rt_print_inputs(const fa_kernel_info *in);
/* "doc,softcap" of the declared inputs ("-" for none), into buf. */
void rt_input_names(const fa_kernel_info *in, char *buf, size_t len);

/* Prints a parameter list as " kind:name=value ... (n)" and a newline:
 * pointers in hex, an f32 as its float. */
void rt_print_params(const fa_param *p, int n);

#endif
