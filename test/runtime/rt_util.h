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

/* Prints `label`, the status's name when st is not FA_OK (what the
 * *_params call that filled p returned), then the parameter list as
 * " kind:name=value ... (n)" and a newline: pointers in hex, an f32 as its
 * float. */
void rt_print_params(const char *label, fa_status st, const fa_param *p, int n);

/* ---- variable-length batches (docs/abi.md, "Variable-length batches") ---- */

#define RT_MAX_SEQS 64

/* The sequences of a test launch (fa_varlen): the prefix sums given by the
 * options --cu_q=0,3,10 and --cu_k=0,5,12 (host copies of the same values
 * passed), num_seqs and the longest lengths from them; the device arrays
 * at fake addresses (never read). rt_varlen_mod edits them. */
typedef struct rt_varlen {
  fa_varlen v;
  int32_t host_q[RT_MAX_SEQS + 1], host_k[RT_MAX_SEQS + 1];
  int nq, nk;      /* entries given by --cu_q, --cu_k */
  int null;        /* varlen=null: the args get NULL */
} rt_varlen;

/* Takes option OPT when it is --cu_q=LIST or --cu_k=LIST (1), else 0;
 * exits 2 on a bad list. */
int rt_varlen_option(rt_varlen *r, const char *opt);
/* Whether the options made a varlen launch (--cu_q or --cu_k). */
int rt_varlen_on(const rt_varlen *r);
/* Completes r after its options: a list not given is the other's;
 * num_seqs (entries - 1), max_seqlen_q/k (the longest step, at least 1;
 * unless a MOD sets them later), host copies, device arrays at `base` and
 * base + 2^20; *total_q, *total_k: the lists' last values (the packed
 * tensors' dim 1). */
void rt_varlen_finish(rt_varlen *r, unsigned long long base, long long *total_q,
                      long long *total_k);
/* Applies MOD: varlen=null; cu_q=null|0xHEX|+N and cu_k=... (the device
 * pointers); host_q=null|0xHEX|+N and host_k=... (the host copies: null
 * drops one, +N moves it N bytes, an address is never read when the
 * checks refuse it); num_seqs=N; max_q=N, max_k=N; q[I]=V and
 * k[I]=V (a host copy's value I). 0 when MOD is none of these. */
int rt_varlen_mod(rt_varlen *r, const char *mod);
/* The args' varlen: NULL without one (or after varlen=null). */
const fa_varlen *rt_varlen_args(rt_varlen *r);

/* Loads the PTX (or metadata) file `path` as a module on device 0 of the
 * driver FLASHC_LIBCUDA names (test/runtime/fake_cuda.c prints what each
 * launch is given), runs run(mod, args) and prints `launch: ` and its
 * status (rt_report, with the module's message on failure). Returns
 * rt_report's exit code. */
int rt_launch_module(const char *path, fa_status (*run)(fa_module *, const void *),
                     const void *args);

#endif
