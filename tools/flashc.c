/* flashc - the command-line compiler.
 *
 *   flashc [options] file.fa|file.tile|-
 *
 * Stages, in order (-emit picks where to stop):
 *   ast    the parsed spec                  (frontend/parser.y)
 *   spec   the checked spec, defaults filled (frontend/sema.c)
 *   tile   the tile IR after the pipeline   (frontend/emit_tile.c, passes/)
 *   mlir   MLIR built through the C API     (codegen/)
 *   llvm   LLVM IR
 *   ptx    PTX from the NVPTX backend
 *   cubin  ptxas output
 *   meta   the kernel metadata the runtime reads (docs/abi.md)
 *
 * A .tile input (or text that starts with `kernel`) is tile IR: it is parsed,
 * verified and printed; -pass=NAME runs one pass on it, -pipeline the whole
 * pipeline.
 *
 * Exit status: 0 success, 1 errors in the input, 2 usage errors, 3 internal
 * errors (a pass produced invalid IR, MLIR failed) and output that could not
 * be written.
 *
 * Options are spelled with one dash or two, as clang takes them
 * (-emit=ptx and --emit=ptx are the same option).
 *
 * --bundle=DIR compiles every attention of a spec (or the --kernel one) into
 * DIR/NAME.ptx, one module each (with ptxas, also DIR/NAME.cubin and its
 * metadata DIR/NAME.cubin.meta), and lists them in DIR/bundle.txt: what the
 * runtime-only side (a serving host, the Python package's flashc.load_bundle)
 * loads without LLVM/MLIR.
 *
 * Output (-o FILE): the result is built in memory and written only when the
 * compile succeeded, through a temporary file in FILE's directory renamed over
 * FILE, so a failed compile leaves FILE as it was. Something that is not a
 * regular file (/dev/null, a FIFO) is written in place and never removed;
 * FILE may not be the input. `-o -` is standard output.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "codegen/ptxas.h"
#include "frontend/frontend.h"
#include "frontend/emit_tile.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tools/output.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2, EXIT_INTERNAL = 3 };

typedef enum Emit { EMIT_AST, EMIT_SPEC, EMIT_TILE, EMIT_MLIR, EMIT_LLVM, EMIT_PTX, EMIT_CUBIN, EMIT_META } Emit;

static const char *const emit_names[] = {"ast", "spec", "tile", "mlir", "llvm", "ptx", "cubin", "meta"};

typedef struct Options {
  const char *input;
  const char *output;
  const char *kernel;
  Emit emit;
  bool split_input;
  bool pipeline_on_tile; /* -pipeline: run every pass on a .tile input */
  bool stats;
  bool separate_combine; /* -decode-combine=separate */
  const char *bundle;    /* --bundle=DIR */
  CgTensorCore tensor_core;
  CgExpFma exp_fma;      /* -exp-fma= */
  CgLaneStats lane_stats; /* -lane-stats= */
  PassOptions passes;
} Options;

/* The index of v in names[0..n), or -1. */
static int name_index(const char *v, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(v, names[i]) == 0)
      return i;
  return -1;
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: flashc [options] FILE\n"
          "  FILE                    a spec (.fa), tile IR (.tile), or - for stdin\n"
          "  -emit=STAGE             ast | spec | tile | mlir | llvm | ptx | cubin | meta (default ptx)\n"
          "  -o FILE                 write the output to FILE (- or default: stdout); on\n"
          "                          errors FILE is left as it was\n"
          "  --kernel=NAME           compile only the kernel NAME of the file\n"
          "  --target=sm_80|sm_90a   GPU target (default sm_90a)\n"
          "  -mma=auto|sync|wgmma    tensor-core instruction: wgmma on sm_90a where the kernel\n"
          "                          allows it (auto, default), mma.sync always, or wgmma always\n"
          "  -exp-fma=auto|off|quarter|half\n"
          "                          exponentials of forward kernels on the FMA units instead\n"
          "                          of the MUFU: half of tanh's (auto, default), none (off),\n"
          "                          or also a quarter / half of the softmax's (sm_90a)\n"
          "  -lane-stats=auto|off|carry\n"
          "                          the K/V-outer backward kernels' LSE and delta held across\n"
          "                          the lanes, shuffled at their use (auto, default: up to\n"
          "                          head dim 128; through a loop's carry, d64's pipeline, in\n"
          "                          the deterministic launch's K/V-outer kernel), through\n"
          "                          every kernel's carry (carry), or in the accumulator\n"
          "                          layout (off)\n"
          "  -decode-combine=fused|separate\n"
          "                          decode: the split kernel merges its partials (fused,\n"
          "                          default) or leaves them to the combine kernel\n"
          "  -disable-pass=NAME      skip an optional pass (repeatable)\n"
          "  -pass=NAME              run only this pass (on a .tile input)\n"
          "  -pipeline               run the whole pipeline on a .tile input\n"
          "  -print-after=NAME       print the IR after pass NAME (repeatable)\n"
          "  -print-after-all        print the IR after every pass\n"
          "  --list-passes           list the passes in pipeline order\n"
          "  -split-input-file       split the input at lines `// -----` and process each part\n"
          "  --stats                 registers, shared memory, spills and compile time per stage\n"
          "                          (from ptxas: 'ptxas not found' when it is not installed)\n"
          "  --bundle=DIR            compile every attention of the spec to DIR/NAME.ptx (and\n"
          "                          NAME.cubin + .cubin.meta with ptxas), listed in\n"
          "                          DIR/bundle.txt (for runtime-only hosts)\n"
          "  --version               print the version and the LLVM/MLIR it was built with\n"
          "  --help                  this text\n"
          "Every option may be spelled with one dash or two (-emit=ptx, --emit=ptx).\n"
          "exit status: 0 success, 1 errors in the input (diagnostics on stderr), 2 usage\n"
          "errors, 3 internal errors or output that could not be written\n"
          "environment: FLASHC_DUMP_IR=all|NAME[,NAME] prints the IR after those passes;\n"
          "FLASHC_JOBS=N compiles a module's kernels on at most N threads (default: the\n"
          "processors; 1: one after the other, the same PTX)\n");
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool starts_with(const char *s, const char *prefix, const char **rest) {
  size_t n = strlen(prefix);
  if (strncmp(s, prefix, n) != 0)
    return false;
  if (rest)
    *rest = s + n;
  return true;
}

static void list_passes(void) {
  int n;
  const Pass *p = pass_pipeline(&n);
  for (int i = 0; i < n; i++)
    printf("%-16s %s%s\n", p[i].name, p[i].summary, p[i].required ? " (required)" : "");
}

/* Parses argv into o. Returns -1 to continue, or an exit status. */
static int parse_args(int argc, char **argv, Options *o) {
  memset(o, 0, sizeof *o);
  o->emit = EMIT_PTX;
  pass_options_init(&o->passes);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    if (a[0] == '-' && a[1] == '-' && a[2] != '\0')
      a++; /* --x is -x */
    if (strcmp(a, "-help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "-version") == 0) {
      printf("flashc %s\n%s\n", FLASHC_VERSION, cg_version());
      return 0;
    } else if (strcmp(a, "-list-passes") == 0) {
      list_passes();
      return 0;
    } else if (starts_with(a, "-emit=", &v)) {
      int k = name_index(v, emit_names, (int)(sizeof emit_names / sizeof *emit_names));
      if (k < 0) {
        fprintf(stderr, "flashc: error: unknown stage '%s' for -emit (ast, spec, tile, mlir, llvm, ptx, cubin, meta)\n", v);
        return EXIT_USAGE;
      }
      o->emit = (Emit)k;
    } else if (strcmp(a, "-o") == 0) {
      if (++i >= argc) {
        fprintf(stderr, "flashc: error: -o needs a file name\n");
        return EXIT_USAGE;
      }
      o->output = argv[i];
    } else if (starts_with(a, "-kernel=", &v)) {
      o->kernel = v;
    } else if (starts_with(a, "-target=", &v)) {
      if (strcmp(v, "sm_80") != 0 && strcmp(v, "sm_90a") != 0) {
        fprintf(stderr, "flashc: error: unknown target '%s' (sm_80 or sm_90a)\n", v);
        return EXIT_USAGE;
      }
      o->passes.target = v;
    } else if (starts_with(a, "-mma=", &v)) {
      if (strcmp(v, "auto") == 0)
        o->tensor_core = CG_TC_AUTO;
      else if (strcmp(v, "sync") == 0) {
        o->tensor_core = CG_TC_MMA_SYNC;
        o->passes.mma_sync = true;
      }
      else if (strcmp(v, "wgmma") == 0)
        o->tensor_core = CG_TC_WGMMA;
      else {
        fprintf(stderr, "flashc: error: unknown -mma '%s' (auto, sync or wgmma)\n", v);
        return EXIT_USAGE;
      }
    } else if (starts_with(a, "-exp-fma=", &v)) {
      static const char *const names[] = {"auto", "off", "quarter", "half"}; /* CgExpFma */
      int k = name_index(v, names, 4);
      if (k < 0) {
        fprintf(stderr, "flashc: error: unknown -exp-fma '%s' (auto, off, quarter or half)\n", v);
        return EXIT_USAGE;
      }
      o->exp_fma = (CgExpFma)k;
    } else if (starts_with(a, "-lane-stats=", &v)) {
      static const char *const names[] = {"auto", "off", "carry"}; /* CgLaneStats */
      int k = name_index(v, names, 3);
      if (k < 0) {
        fprintf(stderr, "flashc: error: unknown -lane-stats '%s' (auto, off or carry)\n", v);
        return EXIT_USAGE;
      }
      o->lane_stats = (CgLaneStats)k;
    } else if (starts_with(a, "-decode-combine=", &v)) {
      if (strcmp(v, "fused") != 0 && strcmp(v, "separate") != 0) {
        fprintf(stderr, "flashc: error: unknown -decode-combine '%s' (fused or separate)\n", v);
        return EXIT_USAGE;
      }
      o->separate_combine = strcmp(v, "separate") == 0;
    } else if (starts_with(a, "-disable-pass=", &v)) {
      const Pass *p = pass_find(v);
      if (!p) {
        fprintf(stderr, "flashc: error: unknown pass '%s' (see --list-passes)\n", v);
        return EXIT_USAGE;
      }
      if (p->required) {
        fprintf(stderr, "flashc: error: pass '%s' is required and cannot be disabled\n", v);
        return EXIT_USAGE;
      }
      if (o->passes.ndisabled < PASS_MAX_NAMES)
        o->passes.disabled[o->passes.ndisabled++] = v;
    } else if (starts_with(a, "-pass=", &v)) {
      if (!pass_find(v)) {
        fprintf(stderr, "flashc: error: unknown pass '%s' (see --list-passes)\n", v);
        return EXIT_USAGE;
      }
      o->passes.only = v;
    } else if (starts_with(a, "-print-after=", &v)) {
      if (!pass_find(v)) {
        fprintf(stderr, "flashc: error: unknown pass '%s' (see --list-passes)\n", v);
        return EXIT_USAGE;
      }
      if (o->passes.nprint_after < PASS_MAX_NAMES)
        o->passes.print_after[o->passes.nprint_after++] = v;
    } else if (strcmp(a, "-print-after-all") == 0) {
      o->passes.print_after_all = true;
    } else if (strcmp(a, "-pipeline") == 0) {
      o->pipeline_on_tile = true;
    } else if (strcmp(a, "-split-input-file") == 0) {
      o->split_input = true;
    } else if (strcmp(a, "-stats") == 0) {
      o->stats = true;
    } else if (starts_with(a, "-bundle=", &v)) {
      if (!*v) {
        fprintf(stderr, "flashc: error: --bundle needs a directory (--bundle=DIR)\n");
        return EXIT_USAGE;
      }
      o->bundle = v;
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "flashc: error: unknown option '%s' (see --help)\n", argv[i]);
      return EXIT_USAGE;
    } else if (o->input) {
      fprintf(stderr, "flashc: error: more than one input file ('%s' and '%s')\n", o->input, a);
      return EXIT_USAGE;
    } else {
      o->input = a;
    }
  }
  if (!o->input) {
    fprintf(stderr, "flashc: error: no input file\n");
    usage(stderr);
    return EXIT_USAGE;
  }
  if (o->bundle && (o->output || o->emit != EMIT_PTX || o->split_input || o->passes.only)) {
    fprintf(stderr, "flashc: error: --bundle=DIR writes PTX files of its own; it takes no -o, "
            "-emit other than ptx, -split-input-file or -pass\n");
    return EXIT_USAGE;
  }
  return -1;
}

/* Reads a whole file (or stdin for "-"). A directory or a read error is an
 * error, never an empty input. */
static char *read_input(const char *path, size_t *len) {
  bool is_stdin = strcmp(path, "-") == 0;
  FILE *f = is_stdin ? stdin : fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "flashc: error: cannot open '%s': %s\n", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    fprintf(stderr, "flashc: error: cannot read '%s': it is a directory\n", path);
    if (!is_stdin)
      fclose(f);
    return NULL;
  }
  size_t cap = 65536, n = 0;
  char *buf = malloc(cap + 1);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *nb = realloc(buf, cap * 2 + 1);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
  }
  int read_errno = ferror(f) ? errno : 0;
  if (!is_stdin)
    fclose(f);
  if (!buf) {
    fprintf(stderr, "flashc: error: out of memory reading '%s'\n", path);
    return NULL;
  }
  if (read_errno) {
    fprintf(stderr, "flashc: error: cannot read '%s': %s\n", is_stdin ? "<stdin>" : path,
            strerror(read_errno));
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

/* Tile IR text starts with `kernel` after blank lines and // comments. */
static bool looks_like_tile(const char *path, const char *text, size_t len) {
  size_t pl = strlen(path);
  if (pl > 5 && strcmp(path + pl - 5, ".tile") == 0)
    return true;
  size_t i = 0;
  while (i < len) {
    while (i < len && isspace((unsigned char)text[i]))
      i++;
    if (i + 1 < len && text[i] == '/' && text[i + 1] == '/') {
      while (i < len && text[i] != '\n')
        i++;
      continue;
    }
    break;
  }
  return len - i >= 6 && strncmp(text + i, "kernel", 6) == 0;
}

static bool is_selected(const Options *o, const char *name) {
  return !o->kernel || strcmp(o->kernel, name) == 0;
}

/* --kernel=NAME on a .tile input: drop the other kernels. */
static int select_tile_kernel(const Options *o, Module *m) {
  if (!o->kernel)
    return 0;
  int keep = 0;
  for (int i = 0; i < m->nfuncs; i++) {
    const char *of = func_companion_of(m->funcs[i]);
    if (is_selected(o, m->funcs[i]->name) || (of && is_selected(o, of)))
      m->funcs[keep++] = m->funcs[i];
  }
  if (keep == 0) {
    fprintf(stderr, "flashc: error: no kernel named '%s'\n", o->kernel);
    return EXIT_USAGE;
  }
  m->nfuncs = keep;
  return 0;
}

/* -emit=ptx and -emit=cubin write one module: one kernel of the file (its
 * companions, a decode kernel's combine kernel and variant, go with it). */
static int check_one_kernel(const Options *o, int nkernels) {
  if ((o->emit == EMIT_PTX || o->emit == EMIT_CUBIN) && nkernels > 1) {
    fprintf(stderr, "flashc: error: the file has %d kernels and -emit=%s writes one module per kernel; "
            "pick one with --kernel=NAME\n", nkernels, emit_names[o->emit]);
    return EXIT_USAGE;
  }
  return 0;
}

/* Whether an executable `ptxas` is on PATH (for --stats' message). */
static bool ptxas_on_path(void) {
  const char *path = getenv("PATH");
  char buf[4096];
  while (path && *path) {
    size_t n = strcspn(path, ":");
    if (n > 0 && n < sizeof buf - 7) {
      snprintf(buf, sizeof buf, "%.*s/ptxas", (int)n, path);
      if (access(buf, X_OK) == 0)
        return true;
    }
    path += n + (path[n] == ':');
  }
  return false;
}

/* Runs codegen on the module (every kernel in it) and writes the stage. */
static int emit_code(const Options *o, Module *m, FILE *out, double t_front) {
  int primary = 0;
  for (int i = 0; i < m->nfuncs; i++)
    primary += func_companion_of(m->funcs[i]) == NULL;
  int rc = check_one_kernel(o, primary);
  if (rc)
    return rc;
  /* codegen reads the choice from the split kernel (meta_decode.c). */
  for (int i = 0; o->separate_combine && i < m->nfuncs; i++)
    if (strcmp(attr_str(&m->funcs[i]->attrs, "mode", "forward"), "decode") == 0)
      attr_set_word(m, &m->funcs[i]->attrs, "combine", "separate");
  char ran[PASS_NAMES_MAX];
  pass_names_ran(&o->passes, ran, sizeof ran);
  CgStats stats;
  CgOptions co;
  cg_options_init(&co);
  co.target = o->passes.target;
  co.tensor_core = o->tensor_core;
  co.exp_fma = o->exp_fma;
  co.lane_stats = o->lane_stats;
  co.passes = ran;
  co.stats = o->stats ? &stats : NULL;
  CgStage st = o->emit == EMIT_MLIR ? CG_STAGE_MLIR : o->emit == EMIT_LLVM ? CG_STAGE_LLVM
             : o->emit == EMIT_PTX ? CG_STAGE_PTX : o->emit == EMIT_CUBIN ? CG_STAGE_CUBIN
             : CG_STAGE_META;
  char *data = NULL;
  size_t len = 0;
  char err[8192];
  err[0] = '\0';
  if (cg_emit(m, st, &co, &data, &len, err, sizeof err) != 0) {
    fprintf(stderr, "%s", err[0] ? err : "flashc: error: code generation failed\n");
    free(data);
    return EXIT_INTERNAL;
  }
  size_t wrote = fwrite(data, 1, len, out);
  free(data);
  if (wrote != len) {
    fprintf(stderr, "flashc: error: writing the output failed: %s\n", strerror(errno));
    return EXIT_INTERNAL;
  }
  if (o->stats) {
    fprintf(stderr, "flashc: stats (%s):\n", o->passes.target);
    fprintf(stderr, "  frontend + passes   %8.2f ms\n", t_front);
    fprintf(stderr, "  build MLIR          %8.2f ms\n", stats.ms_build);
    fprintf(stderr, "  MLIR passes         %8.2f ms\n", stats.ms_mlir_passes);
    fprintf(stderr, "  MLIR to LLVM IR     %8.2f ms\n", stats.ms_translate);
    fprintf(stderr, "  LLVM -O3            %8.2f ms\n", stats.ms_llvm_opt);
    fprintf(stderr, "  NVPTX backend       %8.2f ms\n", stats.ms_llvm_codegen);
    if (stats.registers < 0) { /* ptxas did not run, or failed */
      fprintf(stderr, "  ptxas               %s: registers, shared memory and spills come from "
              "`ptxas -v` (the CUDA toolkit's)\n", ptxas_on_path() ? "failed" : "not found on PATH");
      return 0;
    }
    fprintf(stderr, "  ptxas               %8.2f ms\n", stats.ms_ptxas);
    fprintf(stderr, "  registers %d, shared memory %d static + %d dynamic bytes, "
            "spill stores %d, spill loads %d, stack %d bytes\n",
            stats.registers, stats.smem_static_bytes, stats.smem_dynamic_bytes,
            stats.spill_stores, stats.spill_loads, stats.stack_bytes);
    for (int i = 0; stats.nkernels > 1 && i < stats.nkernels; i++)
      fprintf(stderr, "  kernel %-40s %3d registers, %6d bytes shared, spills %d/%d, stack %d\n",
              stats.kernels[i].name, stats.kernels[i].registers,
              stats.kernels[i].smem_dynamic_bytes, stats.kernels[i].spill_stores,
              stats.kernels[i].spill_loads, stats.kernels[i].stack_bytes);
  }
  return 0;
}

/* Runs the passes asked for; a verifier failure is an internal error. */
static int run_passes(const Options *o, Module *m, bool is_tile) {
  if (is_tile && !o->passes.only && !o->pipeline_on_tile)
    return 0;
  return run_pipeline(m, &o->passes) ? EXIT_INTERNAL : 0;
}

/* A tile IR input: parse, verify, passes, print or codegen. */
static int compile_tile(const Options *o, const char *name, const char *text, size_t len, FILE *out) {
  Module *m = module_parse(name, text, len, stderr);
  if (!m)
    return EXIT_INPUT;
  int rc = select_tile_kernel(o, m);
  if (rc == 0 && module_verify(m, "parsing", stderr) != 0)
    rc = EXIT_INPUT;
  else if (rc == 0 && (rc = run_passes(o, m, true)) == 0) {
    if (o->emit <= EMIT_TILE)
      module_print(out, m);
    else
      rc = emit_code(o, m, out, 0);
  }
  module_destroy(m);
  return rc;
}

/* The checked spec's selected kernels: lowering, passes, then the stage
 * asked for into out. */
static int compile_checked(const Options *o, const SpecFile *spec, FILE *out, double t0) {
  int rc = 0;
  Module *m = module_create();
  for (int i = 0; i < spec->nkernels && rc == 0; i++)
    if (is_selected(o, spec->kernels[i]->name) &&
        !emit_tile_kernel(m, spec->kernels[i], o->passes.target, stderr))
      rc = EXIT_INPUT;
  if (rc == 0 && module_verify(m, "lowering", stderr) != 0)
    rc = EXIT_INTERNAL;
  if (rc == 0 && run_pipeline(m, &o->passes) != 0)
    rc = o->passes.only ? EXIT_INTERNAL : EXIT_INPUT;
  if (rc == 0) {
    if (o->emit == EMIT_TILE)
      module_print(out, m);
    else
      rc = emit_code(o, m, out, now_ms() - t0);
  }
  module_destroy(m);
  return rc;
}

/* DIR/NAME: the path of a bundle file, or NULL (and a message) when too long. */
static char *bundle_path(const char *dir, const char *name, const char *ext) {
  size_t n = strlen(dir) + strlen(name) + strlen(ext) + 2;
  char *p = malloc(n);
  if (p)
    snprintf(p, n, "%s/%s%s", dir, name, ext);
  return p;
}

/* DIR/NAME.cubin (ptxas on the module's PTX) and DIR/NAME.cubin.meta (the
 * PTX's metadata lines, what fa_module_load_cubin takes beside it). *wrote
 * says whether they were written: not when ptxas could not run. */
static int write_bundle_cubin(const Options *o, const char *kname, const char *ptx, size_t len,
                              bool *wrote) {
  CgStrBuf cubin, log, meta;
  cg_strbuf_init(&cubin);
  cg_strbuf_init(&log);
  cg_strbuf_init(&meta);
  int rc = 0, st = cg_run_ptxas(NULL, o->passes.target, ptx, len, &cubin, NULL, &log);
  if (st > 0) {
    fprintf(stderr, "flashc: error: ptxas rejected %s's PTX:\n%s", kname, log.data ? log.data : "");
    rc = EXIT_INTERNAL;
  } else if (st == 0) {
    for (const char *l = ptx; l < ptx + len;) {
      const char *e = memchr(l, '\n', (size_t)(ptx + len - l));
      size_t n = e ? (size_t)(e - l) + 1 : (size_t)(ptx + len - l);
      if (n > 14 && strncmp(l, "// flashc.meta", 14) == 0)
        cg_strbuf_append(&meta, l, n);
      l += n;
    }
    char *cpath = bundle_path(o->bundle, kname, ".cubin");
    char *mpath = bundle_path(o->bundle, kname, ".cubin.meta");
    if (!cpath || !mpath || output_write(cpath, cubin.data, cubin.len) != 0 ||
        output_write(mpath, meta.data, meta.len) != 0)
      rc = EXIT_INTERNAL;
    free(cpath);
    free(mpath);
    *wrote = rc == 0;
  }
  cg_strbuf_free(&cubin);
  cg_strbuf_free(&log);
  cg_strbuf_free(&meta);
  return rc;
}

/* --bundle=DIR: every selected kernel of the spec to DIR/NAME.ptx (each
 * written as -o writes, atomically), then DIR/bundle.txt listing them. A
 * kernel that fails stops the bundle; the files already written stay. */
static int write_bundle(const Options *o, const SpecFile *spec, const char *input, double t0) {
  if (mkdir(o->bundle, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "flashc: error: cannot create the bundle directory '%s': %s\n", o->bundle,
            strerror(errno));
    return EXIT_INTERNAL;
  }
  char *list = NULL;
  size_t list_len = 0;
  FILE *index = open_memstream(&list, &list_len);
  if (!index)
    return EXIT_INTERNAL;
  /* Without ptxas the bundle is PTX only (the driver JIT-compiles it at the
   * first load); with it each module also gets its cubin, loaded as is. */
  bool with_cubin = ptxas_on_path();
  if (!with_cubin)
    fprintf(stderr, "flashc: note: ptxas not found on PATH: the bundle has PTX only (the driver "
            "compiles it at load)\n");
  fprintf(index, "# flashc %s bundle of %s for %s: one module per line (NAME PTX [CUBIN])\n",
          FLASHC_VERSION, input, o->passes.target);
  int rc = 0;
  for (int i = 0; i < spec->nkernels && rc == 0; i++) {
    const char *kname = spec->kernels[i]->name;
    if (!is_selected(o, kname))
      continue;
    Options one = *o;
    one.kernel = kname;
    char *ptx = NULL;
    size_t ptx_len = 0;
    FILE *out = open_memstream(&ptx, &ptx_len);
    if (!out) {
      rc = EXIT_INTERNAL;
      break;
    }
    rc = compile_checked(&one, spec, out, t0);
    fclose(out);
    char *path = bundle_path(o->bundle, kname, ".ptx");
    if (rc == 0 && (!path || output_write(path, ptx, ptx_len) != 0))
      rc = EXIT_INTERNAL;
    bool cubin = false;
    if (rc == 0 && with_cubin)
      rc = write_bundle_cubin(o, kname, ptx, ptx_len, &cubin);
    if (rc == 0)
      fprintf(index, cubin ? "%s %s.ptx %s.cubin\n" : "%s %s.ptx\n", kname, kname, kname);
    free(path);
    free(ptx);
  }
  fclose(index);
  char *path = bundle_path(o->bundle, "bundle", ".txt");
  if (rc == 0 && (!path || output_write(path, list, list_len) != 0))
    rc = EXIT_INTERNAL;
  free(path);
  free(list);
  return rc;
}

/* A spec input: frontend, lowering, passes, then the stage asked for. */
static int compile_spec(const Options *o, const char *name, const char *text, size_t len, FILE *out) {
  double t0 = now_ms();
  int nerr = 0;
  Ast *ast = fe_parse(name, text, len, &nerr);
  if (!ast)
    return EXIT_INTERNAL;
  if (nerr) {
    fe_free_ast(ast);
    return EXIT_INPUT;
  }
  if (o->emit == EMIT_AST) {
    fe_print_ast(out, ast);
    fe_free_ast(ast);
    return 0;
  }
  SpecFile *spec = fe_check(ast, &nerr);
  if (!spec || nerr) {
    fe_free_spec(spec);
    fe_free_ast(ast);
    return EXIT_INPUT;
  }
  int rc = 0;
  if (o->emit == EMIT_SPEC) {
    fe_print_spec(out, spec);
    goto done;
  }
  /* Count before lowering: a file of thousands of kernels fails at once. */
  int selected = 0;
  for (int i = 0; i < spec->nkernels; i++)
    selected += is_selected(o, spec->kernels[i]->name);
  if (spec->nkernels == 0) {
    fprintf(stderr, "flashc: error: no attention block in %s\n", name);
    rc = EXIT_INPUT;
    goto done;
  }
  if (selected == 0) {
    fprintf(stderr, "flashc: error: no kernel named '%s' in %s\n", o->kernel, name);
    rc = EXIT_USAGE;
    goto done;
  }
  if (o->bundle) {
    rc = write_bundle(o, spec, name, t0);
    goto done;
  }
  if ((rc = check_one_kernel(o, selected)))
    goto done;
  rc = compile_checked(o, spec, out, t0);
done:
  fe_free_spec(spec);
  fe_free_ast(ast);
  return rc;
}

static int compile_text(const Options *o, const char *name, const char *text, size_t len, FILE *out) {
  if (looks_like_tile(name, text, len))
    return compile_tile(o, name, text, len, out);
  if (o->passes.only) {
    fprintf(stderr, "flashc: error: -pass=%s runs on tile IR input (.tile); for a spec use -disable-pass\n",
            o->passes.only);
    return EXIT_USAGE;
  }
  return compile_spec(o, name, text, len, out);
}

/* -split-input-file: each chunk between `// -----` lines is compiled on its
 * own; chunks keep their line numbers by padding with blank lines. */
static int compile_split(const Options *o, const char *text, size_t len, FILE *out) {
  int worst = 0;
  size_t start = 0;
  int line = 1, chunk_line = 1, nchunk = 0;
  for (size_t i = 0; i <= len; i++) {
    bool eol = i == len || text[i] == '\n';
    if (!eol)
      continue;
    size_t ls = i;
    while (ls > start && text[ls - 1] != '\n')
      ls--;
    bool sep = strncmp(text + ls, "// -----", 8) == 0;
    if (sep || i == len) {
      size_t end = sep ? ls : len;
      /* Pad with newlines so diagnostics keep the file's line numbers. */
      size_t pad = (size_t)(chunk_line - 1);
      char *chunk = malloc(pad + (end - start) + 1);
      if (!chunk)
        return EXIT_INTERNAL;
      memset(chunk, '\n', pad);
      memcpy(chunk + pad, text + start, end - start);
      chunk[pad + end - start] = '\0';
      if (nchunk++)
        fprintf(out, "// -----\n");
      fflush(out);
      int rc = compile_text(o, o->input, chunk, pad + end - start, out);
      fflush(out);
      if (rc > worst)
        worst = rc;
      free(chunk);
      start = i + 1;
      chunk_line = line + 1;
    }
    line++;
  }
  return worst;
}

int main(int argc, char **argv) {
  Options o;
  int rc = parse_args(argc, argv, &o);
  if (rc >= 0) /* --help, --version, --list-passes or a usage error */
    return rc == 0 && !output_stdout_ok() ? EXIT_INTERNAL : rc;
  if (o.output && strcmp(o.output, "-") == 0)
    o.output = NULL;
  if (o.output && !output_allowed(o.output, o.input))
    return EXIT_USAGE;
  size_t len = 0;
  char *text = read_input(o.input, &len);
  if (!text)
    return EXIT_INPUT;
  /* -o FILE: the result goes to memory first; FILE is written only when
   * the compile succeeded (tools/output.h). */
  char *result = NULL;
  size_t result_len = 0;
  FILE *out = o.output ? open_memstream(&result, &result_len) : stdout;
  if (!out) {
    fprintf(stderr, "flashc: error: out of memory\n");
    free(text);
    return EXIT_INTERNAL;
  }
  o.passes.dump = stderr;
  o.passes.diag = stderr;
  fe_set_diag_stream(stderr);
  const char *name = strcmp(o.input, "-") == 0 ? "<stdin>" : o.input;
  rc = o.split_input ? compile_split(&o, text, len, out) : compile_text(&o, name, text, len, out);
  free(text);
  if (out == stdout)
    return rc == 0 && !output_stdout_ok() ? EXIT_INTERNAL : rc;
  if (fclose(out) != 0 && rc == 0) {
    fprintf(stderr, "flashc: error: out of memory\n");
    rc = EXIT_INTERNAL;
  }
  if (rc == 0 && output_write(o.output, result, result_len) != 0)
    rc = EXIT_INTERNAL;
  free(result);
  return rc;
}
