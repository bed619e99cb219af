/* flashc_jit.h - compiling flashc specs at run time (library flashc_jit).
 *
 * The JIT half of flashc's C API: fa_jit_compile turns DSL source into PTX
 * inside the host program, fa_module_compile also loads it. It holds the
 * compiler (LLVM/MLIR); flashc_runtime.h, which this header includes, is the
 * compiler-free runtime that loads and launches kernels.
 */
#ifndef FLASHC_JIT_H
#define FLASHC_JIT_H

#include "flashc_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- JIT: compiling specs at run time ------------------------------------
 *
 * These functions live in a separate library, flashc_jit (libflashc_jit.a /
 * libflashc_jit.so), because they contain the compiler and need LLVM/MLIR;
 * flashc_runtime.h is the runtime alone (flashc_runtime), which does not.
 * Link flashc_jit (it brings the runtime with it) to use them.
 *
 * fa_jit_compile turns spec source (the DSL, as `flashc -emit=ptx` reads it)
 * into PTX without touching a GPU; fa_module_compile loads the result too.
 * Compiled PTX goes through an on-disk cache keyed by a SHA-256 of the
 * source, the options below, the compiler's version and build, and the
 * cache's format version. Entries are written atomically (temp file +
 * rename); an entry that fails its checksum or length check, or that anyone
 * but the user could have written (docs/runtime.md), is removed and rebuilt,
 * never used. The cache is best effort: when it cannot be read or written
 * the compile still succeeds and stats->note says why.
 *
 * Thread safety: any number of host threads may call these functions at
 * once (with their own options/stats). Cache lookups run in parallel;
 * compilations are serialized inside the library, because the frontend's
 * diagnostic stream is process-global. Several processes may share one
 * cache directory. */

#define FA_JIT_PATH_MAX 1024

/* What one fa_jit_compile did (filled when fa_jit_options.stats is set). */
typedef struct fa_jit_stats {
  int cache_used;       /* 1 when a cache directory was in use */
  int cache_hit;        /* 1 when the PTX came from the cache */
  int cache_rebuilt;    /* 1 when a corrupt entry was found, removed and rebuilt */
  int cache_stored;     /* 1 when the compiled PTX was written to the cache */
  double ms_total;      /* wall time of the call */
  double ms_compile;    /* of that, in the compiler (0 on a hit) */
  char key[65];         /* the cache key: 64 hex digits (also without a cache) */
  char entry[FA_JIT_PATH_MAX]; /* the entry's path ("" without a cache) */
  char note[FA_JIT_PATH_MAX];  /* why the cache was not read or written; "" when it was */
} fa_jit_stats;

/* Options of fa_jit_compile; fa_jit_options_init fills the defaults. */
typedef struct fa_jit_options {
  const char *kernel;     /* the attention to compile; NULL: the only one in the source */
  const char *target;     /* "sm_90a" (default, also for NULL) or "sm_80" */
  const char *disable_passes; /* comma-separated optional passes to skip, e.g.
                                 "mask-skip,defer-rescale"; NULL or "" for none */
  const char *cache_dir;  /* NULL: $FLASHC_CACHE_DIR, else $XDG_CACHE_HOME/flashc, else
                             $HOME/.cache/flashc; "": no cache */
  const char *filename;   /* the name diagnostics give the source; NULL: "<jit>" */
  fa_jit_stats *stats;    /* NULL, or where to report what the call did */
} fa_jit_options;

/* Sets every field of opts to its default (all NULL). */
FA_API void fa_jit_options_init(fa_jit_options *opts);

/* Compiles `len` bytes of spec `source` (need not be NUL-terminated) to
 * PTX, through the cache. opts may be NULL (all defaults). On success *ptx
 * is a NUL-terminated buffer of *ptx_len bytes holding the kernel's metadata
 * lines and PTX, exactly what `flashc -emit=ptx` writes; free it with
 * fa_jit_free. On failure *ptx is NULL and err (when not NULL; truncated to
 * errlen) holds the reason: for FA_ERR_COMPILE the compiler's diagnostics,
 * `file:line:col: error: ...` with the source line and a caret, one after
 * the other; FA_ERR_INVALID_ARGUMENT for an unknown target, an unknown or
 * required pass, a kernel name that is not in the source or a source with
 * several kernels and no name; FA_ERR_NULL_POINTER; FA_ERR_OUT_OF_MEMORY.
 * Needs no GPU. */
FA_API fa_status fa_jit_compile(const char *source, size_t len, const fa_jit_options *opts,
                         char **ptx, size_t *ptx_len, char *err, size_t errlen);

/* fa_jit_compile, then fa_module_load_ptx in ctx. On failure *out is NULL
 * and fa_context_errmsg(ctx) holds the compile or load error. */
FA_API fa_status fa_module_compile(fa_context *ctx, const char *source, size_t len,
                            const fa_jit_options *opts, fa_module **out);

/* Frees a buffer fa_jit_compile returned. NULL is a no-op. */
FA_API void fa_jit_free(void *p);

#ifdef __cplusplus
}
#endif

#endif
