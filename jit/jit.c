/* jit.c - fa_jit_compile / fa_module_compile: spec source to PTX at run time,
 * through the kernel cache (kernel_cache.h). Part of flashc_jit, not of the
 * pure runtime: it links the compiler (frontend, passes, codegen, MLIR).
 *
 * The stages are called as tools/flashc.c calls them for `-emit=ptx`, so the
 * PTX is byte for byte what the CLI writes for the same spec and options.
 */
#define _GNU_SOURCE /* dl_iterate_phdr, for the build id in the cache key */

#include <link.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "frontend/emit_tile.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "jit/flashc_jit.h"
#include "runtime/internal.h"
#include "jit/kernel_cache.h"

/* libflashc_jit.so is built with hidden visibility: only the header's
 * functions are its interface, not the cache's kc_* helpers. */
#define FA_EXPORT __attribute__((visibility("default")))

#ifndef FLASHC_VERSION
#define FLASHC_VERSION "unknown"
#endif

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* ---- compiler identity (part of every key) --------------------------------
 *
 * FLASHC_VERSION alone would let a rebuilt compiler (same version number,
 * new codegen) hit entries of the old one, so the GNU build id of the
 * object this code is linked into goes in too: any relink of the compiler
 * changes it. */

typedef struct BuildIdSearch {
  uintptr_t addr; /* an address inside our object */
  char hex[129];
} BuildIdSearch;

/* The NT_GNU_BUILD_ID note of one PT_NOTE segment, as hex, when present. */
static void note_build_id(const struct dl_phdr_info *info, const ElfW(Phdr) *ph, char *hex) {
  const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
  const unsigned char *end = p + ph->p_memsz;
  while (p + sizeof(ElfW(Nhdr)) <= end) {
    const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
    const unsigned char *name = p + sizeof *n;
    const unsigned char *desc = name + ((n->n_namesz + 3) & ~3u);
    if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
        desc + n->n_descsz <= end) {
      for (unsigned i = 0; i < n->n_descsz && i < 64; i++)
        sprintf(hex + 2 * i, "%02x", desc[i]);
      return;
    }
    p = desc + ((n->n_descsz + 3) & ~3u);
  }
}

static int find_build_id(struct dl_phdr_info *info, size_t size, void *user) {
  (void)size;
  BuildIdSearch *s = user;
  int ours = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && s->addr >= lo && s->addr < lo + ph->p_memsz)
      ours = 1;
  }
  if (!ours)
    return 0;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_NOTE)
      note_build_id(info, &info->dlpi_phdr[i], s->hex);
  return 1;
}

static pthread_once_t identity_once = PTHREAD_ONCE_INIT;
static char identity[512];

static void make_identity(void) {
  BuildIdSearch s = {(uintptr_t)&make_identity, ""};
  dl_iterate_phdr(find_build_id, &s);
  snprintf(identity, sizeof identity, "flashc %s; %s; build %s", FLASHC_VERSION, cg_version(),
           s.hex[0] ? s.hex : "unknown");
}

/* ---- options ---------------------------------------------------------------- */

/* The options resolved and checked: what the key and the compiler see. */
typedef struct Resolved {
  const char *kernel;   /* NULL: the only one */
  const char *target;
  const char *filename;
  PassOptions po;       /* disabled[] point at the pipeline's own names */
  char disabled[512];   /* the same, comma-separated in pipeline order (for the key) */
} Resolved;

/* Is `name` (n bytes) one of the comma-separated names of list? */
static int in_list(const char *list, const char *name, size_t n) {
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0)
      return 1;
    if (!end)
      break;
    p = end + 1;
  }
  return 0;
}

/* Each name of opts->disable_passes must be an optional pass. */
static fa_status check_pass_list(const char *list, char *err, size_t errlen) {
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), p);
    const Pass *pass = len ? pass_find(name) : NULL;
    if (!pass) {
      set_err(err, errlen, "fa_jit_compile: unknown pass '%s' in disable_passes", name);
      return FA_ERR_INVALID_ARGUMENT;
    }
    if (pass->required) {
      set_err(err, errlen, "fa_jit_compile: pass '%s' is required and cannot be disabled", name);
      return FA_ERR_INVALID_ARGUMENT;
    }
    if (!end)
      break;
    p = end + 1;
  }
  return FA_OK;
}

/* Orders the disabled passes as the pipeline does, so "a,b" and "b,a" (and
 * repeats) give one key. */
static fa_status resolve(const fa_jit_options *o, Resolved *r, char *err, size_t errlen) {
  memset(r, 0, sizeof *r);
  pass_options_init(&r->po);
  r->kernel = o->kernel;
  r->filename = o->filename ? o->filename : "<jit>";
  r->target = o->target ? o->target : "sm_90a";
  if (strcmp(r->target, "sm_80") != 0 && strcmp(r->target, "sm_90a") != 0) {
    set_err(err, errlen, "fa_jit_compile: unknown target '%s' (sm_80 or sm_90a)", r->target);
    return FA_ERR_INVALID_ARGUMENT;
  }
  r->po.target = r->target;
  fa_status st = check_pass_list(o->disable_passes, err, errlen);
  if (st != FA_OK)
    return st;
  int n;
  const Pass *p = pass_pipeline(&n);
  size_t used = 0;
  for (int i = 0; i < n && r->po.ndisabled < PASS_MAX_NAMES; i++) {
    if (!in_list(o->disable_passes, p[i].name, strlen(p[i].name)))
      continue;
    r->po.disabled[r->po.ndisabled++] = p[i].name;
    used += snprintf(r->disabled + used, used < sizeof r->disabled ? sizeof r->disabled - used : 0,
                     "%s%s", used ? "," : "", p[i].name);
  }
  return FA_OK;
}

/* The key: every input that can change the PTX, each length-prefixed. The
 * file name is left out on purpose: it only appears in diagnostics, and
 * failed compiles are never cached. */
static void make_key(const Resolved *r, const char *src, size_t len, char key[KC_KEY_HEX]) {
  pthread_once(&identity_once, make_identity);
  char fmt[16];
  snprintf(fmt, sizeof fmt, "%u", KC_FORMAT_VERSION);
  KcSha256 s;
  kc_sha256_init(&s);
  kc_key_str(&s, "flashc-jit-key");
  kc_key_str(&s, fmt);
  kc_key_str(&s, identity);
  kc_key_str(&s, r->target);
  kc_key_str(&s, r->kernel);
  kc_key_str(&s, r->disabled);
  kc_key_field(&s, src, len);
  uint8_t digest[32];
  kc_sha256_final(&s, digest);
  kc_hex(digest, key);
}

/* ---- the compiler ------------------------------------------------------------ */

/* The frontend writes diagnostics to one process-global stream
 * (fe_set_diag_stream), so two compiles at once would mix their errors;
 * compiles take this lock. Cache hits do not. */
static pthread_mutex_t compile_lock = PTHREAD_MUTEX_INITIALIZER;

/* The spec's kernel the options name (or its only one); NULL after writing
 * the reason to diag. */
static const KernelSpec *pick_kernel(const SpecFile *spec, const Resolved *r, FILE *diag) {
  if (r->kernel) {
    for (int i = 0; i < spec->nkernels; i++)
      if (strcmp(spec->kernels[i]->name, r->kernel) == 0)
        return spec->kernels[i];
    fprintf(diag, "%s: error: no attention named '%s'", r->filename, r->kernel);
  } else if (spec->nkernels == 1) {
    return spec->kernels[0];
  } else {
    fprintf(diag, "%s: error: the source has %d attentions; name one in fa_jit_options.kernel",
            r->filename, spec->nkernels);
  }
  for (int i = 0; i < spec->nkernels; i++)
    fprintf(diag, "%s%s", i ? ", " : " (the source has: ", spec->kernels[i]->name);
  fprintf(diag, "%s\n", spec->nkernels ? ")" : "");
  return NULL;
}

/* Lowering, passes and codegen of one kernel into *ptx. */
static fa_status emit_kernel(const KernelSpec *k, const Resolved *r, FILE *diag, char **ptx,
                             size_t *ptx_len) {
  Module *m = module_create();
  if (!m)
    return FA_ERR_OUT_OF_MEMORY;
  fa_status st = FA_ERR_COMPILE;
  PassOptions po = r->po;
  po.diag = diag;
  if (!emit_tile_kernel(m, k, r->target, diag) || module_verify(m, "lowering", diag) != 0 ||
      run_pipeline(m, &po) != 0)
    goto done;
  /* A decode kernel's combine kernel and small-batch variant (attributes
   * combine_of, variant_of: split-kv, small-batch-variant) travel in the same
   * PTX, as in the CLI; anything else is one kernel a module. */
  int primary = 0;
  for (int i = 0; i < m->nfuncs; i++)
    primary += func_companion_of(m->funcs[i]) == NULL;
  if (primary != 1) {
    fprintf(diag, "%s: error: kernel %s compiles to %d kernels; one PTX module holds one\n",
            r->filename, k->name, primary);
    goto done;
  }
  char ran[PASS_NAMES_MAX], cgerr[8192] = "";
  pass_names_ran(&r->po, ran, sizeof ran);
  CgOptions co;
  cg_options_init(&co);
  co.target = r->target;
  co.passes = ran;
  if (cg_emit(m, CG_STAGE_PTX, &co, ptx, ptx_len, cgerr, sizeof cgerr) == 0)
    st = FA_OK;
  else
    fputs(cgerr[0] ? cgerr : "error: code generation failed\n", diag);
done:
  module_destroy(m);
  return st;
}

/* The whole compiler on one source, diagnostics into diag. Caller holds
 * compile_lock. */
static fa_status compile_locked(const char *src, size_t len, const Resolved *r, FILE *diag,
                                char **ptx, size_t *ptx_len) {
  fe_set_diag_stream(diag);
  int nerr = 0;
  fa_status st = FA_ERR_COMPILE;
  SpecFile *spec = NULL;
  Ast *ast = fe_parse(r->filename, src, len, &nerr);
  if (!ast) {
    st = FA_ERR_OUT_OF_MEMORY;
  } else if (nerr == 0 && (spec = fe_check(ast, &nerr)) && nerr == 0) {
    const KernelSpec *k = pick_kernel(spec, r, diag);
    if (k)
      st = emit_kernel(k, r, diag, ptx, ptx_len);
    else
      st = FA_ERR_INVALID_ARGUMENT;
  }
  fe_free_spec(spec);
  fe_free_ast(ast);
  fe_set_diag_stream(NULL);
  return st;
}

/* Runs the compiler with its diagnostics captured in memory; on failure
 * they become err. Caller holds compile_lock. */
static fa_status compile(const char *src, size_t len, const Resolved *r, char **ptx,
                         size_t *ptx_len, char *err, size_t errlen) {
  char *dbuf = NULL;
  size_t dlen = 0;
  FILE *diag = open_memstream(&dbuf, &dlen);
  if (!diag) {
    set_err(err, errlen, "fa_jit_compile: out of memory");
    return FA_ERR_OUT_OF_MEMORY;
  }
  fa_status st = compile_locked(src, len, r, diag, ptx, ptx_len);
  fclose(diag);
  if (st != FA_OK) {
    free(*ptx);
    *ptx = NULL;
    *ptx_len = 0;
    if (dbuf && dlen)
      set_err(err, errlen, "%s", dbuf);
    else
      set_err(err, errlen, "%s: error: compilation failed", r->filename);
  }
  free(dbuf);
  return st;
}

/* ---- the cache around it -------------------------------------------------- */

/* Appends a cache note (the first ones win when it is full); the lookup and
 * the store may say the same thing (an untrusted directory): once is enough. */
static void add_note(fa_jit_stats *s, const char *note) {
  size_t used = strlen(s->note);
  if (note[0] && !strstr(s->note, note))
    snprintf(s->note + used, sizeof s->note - used, "%s%s", used ? "; " : "", note);
}

/* The directory to use into dir; 0 when there is none (disabled or no
 * default), with the reason noted for the latter. */
static int cache_dir(const fa_jit_options *o, char *dir, size_t len, fa_jit_stats *s) {
  if (o->cache_dir && !o->cache_dir[0])
    return 0;
  if (o->cache_dir) {
    if ((size_t)snprintf(dir, len, "%s", o->cache_dir) < len)
      return 1;
    add_note(s, "cache directory name too long: cache not used");
    return 0;
  }
  if (kc_default_dir(dir, len) == 0)
    return 1;
  add_note(s, "no cache directory (FLASHC_CACHE_DIR, XDG_CACHE_HOME and HOME unset): cache not used");
  return 0;
}

FA_EXPORT void fa_jit_options_init(fa_jit_options *opts) {
  if (opts)
    memset(opts, 0, sizeof *opts);
}

FA_EXPORT void fa_jit_free(void *p) { free(p); }

FA_EXPORT fa_status fa_jit_compile(const char *source, size_t len, const fa_jit_options *opts,
                         char **ptx, size_t *ptx_len, char *err, size_t errlen) {
  double t0 = now_ms();
  fa_jit_options defaults;
  fa_jit_stats scratch, *s = opts && opts->stats ? opts->stats : &scratch;
  memset(s, 0, sizeof *s);
  set_err(err, errlen, "%s", "");
  if (ptx)
    *ptx = NULL;
  if (ptx_len)
    *ptx_len = 0;
  if (!source || !ptx || !ptx_len) {
    set_err(err, errlen, "fa_jit_compile: %s is NULL", !source ? "source" : !ptx ? "ptx" : "ptx_len");
    return FA_ERR_NULL_POINTER;
  }
  if (!opts) {
    fa_jit_options_init(&defaults);
    opts = &defaults;
  }
  Resolved r;
  fa_status st = resolve(opts, &r, err, errlen);
  if (st != FA_OK)
    return st;
  make_key(&r, source, len, s->key);

  char dir[FA_JIT_PATH_MAX], note[FA_JIT_PATH_MAX] = "";
  s->cache_used = cache_dir(opts, dir, sizeof dir, s);
  if (s->cache_used) {
    kc_entry_path(dir, s->key, s->entry, sizeof s->entry);
    KcLookup l = kc_lookup(dir, s->key, ptx, ptx_len, note, sizeof note);
    add_note(s, note);
    if (l == KC_HIT) {
      s->cache_hit = 1;
      s->ms_total = now_ms() - t0;
      return FA_OK;
    }
    s->cache_rebuilt = l == KC_CORRUPT;
  }

  /* Threads that missed on one key wait here; the first compiles and
   * stores, the others then find its entry instead of compiling again. */
  pthread_mutex_lock(&compile_lock);
  if (s->cache_used && kc_lookup(dir, s->key, ptx, ptx_len, note, sizeof note) == KC_HIT) {
    pthread_mutex_unlock(&compile_lock);
    s->cache_hit = 1;
    s->ms_total = now_ms() - t0;
    return FA_OK;
  }
  double tc = now_ms();
  st = compile(source, len, &r, ptx, ptx_len, err, errlen);
  s->ms_compile = now_ms() - tc;
  if (st == FA_OK && s->cache_used) {
    note[0] = '\0';
    s->cache_stored = kc_store(dir, s->key, *ptx, *ptx_len, note, sizeof note) == 0;
    add_note(s, note);
  }
  pthread_mutex_unlock(&compile_lock);
  s->ms_total = now_ms() - t0;
  return st;
}

FA_EXPORT fa_status fa_module_compile(fa_context *ctx, const char *source, size_t len,
                            const fa_jit_options *opts, fa_module **out) {
  if (out)
    *out = NULL;
  if (!ctx)
    return FA_ERR_NULL_POINTER;
  if (!out) {
    fa_context_set_errmsg(ctx, "fa_module_compile: out is NULL");
    return FA_ERR_NULL_POINTER;
  }
  char err[16384];
  char *ptx = NULL;
  size_t ptx_len = 0;
  fa_status st = fa_jit_compile(source, len, opts, &ptx, &ptx_len, err, sizeof err);
  if (st != FA_OK) {
    fa_context_set_errmsg(ctx, err);
    return st;
  }
  st = fa_module_load_ptx(ctx, ptx, ptx_len, out);
  fa_jit_free(ptx);
  return st;
}
