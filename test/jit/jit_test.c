/* jit_test.c - flashc-jit-test: drives fa_jit_compile and its cache for lit.
 * Needs no GPU.
 *
 *   flashc-jit-test compile SPEC [OPT...]   one compile; prints what happened
 *       --cache=DIR|none|default  --target=T  --kernel=K  --disable=P,Q
 *       --name=FILENAME  -o=FILE (write the PTX)
 *   flashc-jit-test twice DIR SPEC          cold compile, then a cache hit: same bytes? times
 *   flashc-jit-test keys DIR SPEC           which option changes make a new key
 *   flashc-jit-test corrupt DIR SPEC MODE   damage the entry, recompile: rebuilt, right PTX
 *       MODE: flip | magic | truncate | truncate1 | extend | garbage | empty | foreign | dir
 *             | symlink | fifo | groupwrite | owner (owner needs root: chown)
 *   flashc-jit-test poison DIR SPEC         plant a well-formed entry with other PTX
 *       under SPEC's key in DIR (as another user with write access could)
 *   flashc-jit-test threads DIR N SPEC...   N threads compile every spec at once
 *   flashc-jit-test procs DIR N SPEC...     N processes compile every spec at once
 *   flashc-jit-test nulls                   bad arguments
 *
 * Prints `status: NAME` (and `message: ...`) for single compiles; scenario
 * commands print one line per check. Exit status 0 when every check held
 * (for compile: when the status is FA_OK), 1 otherwise, 2 on bad usage.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "flashc_jit.h"
#include "kernel_cache.h"

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 4096, n = 0, got;
  char *buf = malloc(cap + 1);
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *nb = realloc(buf, (cap *= 2) + 1);
      if (!nb)
        free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (buf) {
    buf[n] = '\0';
    *len = n;
  }
  return buf;
}

static int write_file(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return -1;
  size_t w = fwrite(data, 1, len, f);
  return fclose(f) == 0 && w == len ? 0 : -1;
}

static const char *status_name(fa_status s) {
  static _Thread_local char buf[64];
  const char *full = fa_status_string(s);
  const char *colon = strchr(full, ':');
  snprintf(buf, sizeof buf, "%.*s", (int)(colon ? colon - full : (long)strlen(full)), full);
  return buf;
}

/* First 16 hex digits of the SHA-256 of a buffer: enough to tell PTX apart. */
static void digest16(const char *data, size_t len, char out[17]) {
  KcSha256 s;
  uint8_t d[32];
  char hex[KC_KEY_HEX];
  kc_sha256_init(&s);
  kc_sha256_update(&s, data, len);
  kc_sha256_final(&s, d);
  kc_hex(d, hex);
  memcpy(out, hex, 16);
  out[16] = '\0';
}

static const char *cache_word(const fa_jit_stats *s) {
  return !s->cache_used ? "off" : s->cache_hit ? "hit" : s->cache_rebuilt ? "rebuilt" : "miss";
}

/* One compile of a spec file with the given options. */
typedef struct Compile {
  fa_jit_options o;
  fa_jit_stats s;
  fa_status st;
  char *ptx;
  size_t len;
  char err[8192];
} Compile;

static void run_compile(Compile *c, const char *src, size_t len) {
  c->o.stats = &c->s;
  c->st = fa_jit_compile(src, len, &c->o, &c->ptx, &c->len, c->err, sizeof c->err);
}

static int usage(void) {
  fprintf(stderr, "usage: flashc-jit-test compile|twice|keys|corrupt|poison|threads|procs|nulls ...\n");
  return 2;
}

/* ---- compile ---------------------------------------------------------------- */

static int parse_opt(const char *a, fa_jit_options *o, const char **outfile) {
  if (strncmp(a, "--cache=", 8) == 0) {
    const char *v = a + 8;
    o->cache_dir = strcmp(v, "none") == 0 ? "" : strcmp(v, "default") == 0 ? NULL : v;
  } else if (strncmp(a, "--target=", 9) == 0) {
    o->target = a + 9;
  } else if (strncmp(a, "--kernel=", 9) == 0) {
    o->kernel = a + 9;
  } else if (strncmp(a, "--disable=", 10) == 0) {
    o->disable_passes = a + 10;
  } else if (strncmp(a, "--name=", 7) == 0) {
    o->filename = a + 7;
  } else if (strncmp(a, "-o=", 3) == 0) {
    *outfile = a + 3;
  } else {
    return -1;
  }
  return 0;
}

static int cmd_compile(int argc, char **argv) {
  if (argc < 1)
    return usage();
  size_t len;
  char *src = read_file(argv[0], &len);
  if (!src) {
    fprintf(stderr, "cannot read %s\n", argv[0]);
    return 2;
  }
  Compile c = {0};
  fa_jit_options_init(&c.o);
  c.o.cache_dir = ""; /* tests never touch the user's cache unless asked */
  const char *outfile = NULL;
  for (int i = 1; i < argc; i++)
    if (parse_opt(argv[i], &c.o, &outfile) != 0)
      return usage();
  run_compile(&c, src, len);
  printf("status: %s\n", status_name(c.st));
  if (c.err[0])
    printf("message: %s%s", c.err, c.err[strlen(c.err) - 1] == '\n' ? "" : "\n");
  printf("cache: %s\n", cache_word(&c.s));
  printf("stored: %s\n", c.s.cache_stored ? "yes" : "no");
  printf("key: %s\n", c.s.key);
  if (c.s.entry[0])
    printf("entry: %s\n", c.s.entry);
  if (c.s.note[0])
    printf("note: %s\n", c.s.note);
  if (c.ptx) {
    char d[17];
    digest16(c.ptx, c.len, d);
    printf("ptx: %zu bytes, sha256 %s\n", c.len, d);
  }
  printf("time: %.1f ms (compiler %.1f ms)\n", c.s.ms_total, c.s.ms_compile);
  if (c.ptx && outfile && write_file(outfile, c.ptx, c.len) != 0) {
    fprintf(stderr, "cannot write %s\n", outfile);
    return 2;
  }
  fa_jit_free(c.ptx);
  free(src);
  return c.st == FA_OK ? 0 : 1;
}

/* ---- twice: cold, then hit ---------------------------------------------------- */

static int check(int ok, const char *what) {
  printf("%s: %s\n", what, ok ? "yes" : "NO");
  return ok ? 0 : 1;
}

static int cmd_twice(int argc, char **argv) {
  if (argc != 2)
    return usage();
  size_t len;
  char *src = read_file(argv[1], &len);
  if (!src)
    return 2;
  Compile a = {0}, b = {0};
  a.o.cache_dir = b.o.cache_dir = argv[0];
  run_compile(&a, src, len);
  run_compile(&b, src, len);
  int bad = 0;
  bad |= check(a.st == FA_OK && b.st == FA_OK, "both compiled");
  printf("first: %s, stored %s\n", cache_word(&a.s), a.s.cache_stored ? "yes" : "no");
  printf("second: %s\n", cache_word(&b.s));
  bad |= check(a.ptx && b.ptx && a.len == b.len && memcmp(a.ptx, b.ptx, a.len) == 0,
               "same ptx bytes");
  bad |= check(strcmp(a.s.key, b.s.key) == 0, "same key");
  printf("compile time: cold %.1f ms, cache hit %.2f ms (%.0fx faster)\n", a.s.ms_total,
         b.s.ms_total, b.s.ms_total > 0 ? a.s.ms_total / b.s.ms_total : 0.0);
  fa_jit_free(a.ptx);
  fa_jit_free(b.ptx);
  free(src);
  return bad;
}

/* ---- keys ----------------------------------------------------------------------- */

/* The key of one compile (GPU-free; uses the cache so repeats are cheap). */
static void key_of(const char *dir, const char *src, size_t len, const char *target,
                   const char *kernel, const char *disable, char key[KC_KEY_HEX], fa_status *st) {
  Compile c = {0};
  c.o.cache_dir = dir;
  c.o.target = target;
  c.o.kernel = kernel;
  c.o.disable_passes = disable;
  run_compile(&c, src, len);
  memcpy(key, c.s.key, KC_KEY_HEX);
  *st = c.st;
  fa_jit_free(c.ptx);
}

static int cmd_keys(int argc, char **argv) {
  if (argc != 2)
    return usage();
  size_t len;
  char *src = read_file(argv[1], &len);
  if (!src)
    return 2;
  const char *dir = argv[0];
  char base[KC_KEY_HEX], k[KC_KEY_HEX];
  fa_status st;
  int bad = 0;
  key_of(dir, src, len, NULL, NULL, NULL, base, &st);
  bad |= st != FA_OK;
  key_of(dir, src, len, "sm_90a", NULL, NULL, k, &st);
  bad |= check(strcmp(k, base) == 0, "explicit sm_90a = default key");
  key_of(dir, src, len, "sm_80", NULL, NULL, k, &st);
  bad |= check(st == FA_OK && strcmp(k, base) != 0, "sm_80 -> new key");
  key_of(dir, src, len, NULL, NULL, "mask-skip", k, &st);
  bad |= check(st == FA_OK && strcmp(k, base) != 0, "disable mask-skip -> new key");
  char k1[KC_KEY_HEX], k2[KC_KEY_HEX];
  key_of(dir, src, len, NULL, NULL, "defer-rescale,mask-skip", k1, &st);
  key_of(dir, src, len, NULL, NULL, "mask-skip,defer-rescale,mask-skip", k2, &st);
  bad |= check(strcmp(k1, k2) == 0 && strcmp(k1, k) != 0, "pass order and repeats -> same key");
  key_of(dir, src, len, NULL, "no_such_kernel", NULL, k, &st);
  bad |= check(strcmp(k, base) != 0 && st == FA_ERR_INVALID_ARGUMENT,
               "kernel name -> new key (unknown name refused)");
  /* One more byte of source (a trailing comment): a new key. */
  char *src2 = malloc(len + 16);
  memcpy(src2, src, len);
  memcpy(src2 + len, "\n# changed\n", 11);
  key_of(dir, src2, len + 11, NULL, NULL, NULL, k, &st);
  bad |= check(st == FA_OK && strcmp(k, base) != 0, "source changed -> new key");
  free(src2);
  free(src);
  return bad;
}

/* ---- corrupt ----------------------------------------------------------------------- */

/* Damages the file at path as mode says; -1 for an unknown mode. */
static int damage(const char *path, const char *mode, const char *other_entry) {
  size_t n;
  char *d = read_file(path, &n);
  if (!d)
    return -1;
  int rc = 0;
  if (strcmp(mode, "flip") == 0) {
    d[n - n / 3] ^= 0x01; /* one bit in the payload */
    rc = write_file(path, d, n);
  } else if (strcmp(mode, "magic") == 0) {
    d[0] ^= 0x20;
    rc = write_file(path, d, n);
  } else if (strcmp(mode, "truncate") == 0) {
    rc = write_file(path, d, n / 2);
  } else if (strcmp(mode, "truncate1") == 0) {
    rc = write_file(path, d, n - 1);
  } else if (strcmp(mode, "extend") == 0) {
    d[n] = '\n';
    rc = write_file(path, d, n + 1);
  } else if (strcmp(mode, "garbage") == 0) {
    srand(7);
    for (size_t i = 0; i < n; i++)
      d[i] = (char)rand();
    rc = write_file(path, d, n);
  } else if (strcmp(mode, "empty") == 0) {
    rc = write_file(path, "", 0);
  } else if (strcmp(mode, "dir") == 0) {
    rc = unlink(path) == 0 && mkdir(path, 0700) == 0 ? 0 : -1;
  } else if (strcmp(mode, "symlink") == 0) {
    /* A symlink to a whole, valid copy of the entry: still refused. */
    char copy[4200];
    snprintf(copy, sizeof copy, "%s.copy", path);
    rc = write_file(copy, d, n) == 0 && unlink(path) == 0 && symlink(copy, path) == 0 ? 0 : -1;
  } else if (strcmp(mode, "fifo") == 0) {
    rc = unlink(path) == 0 && mkfifo(path, 0600) == 0 ? 0 : -1;
  } else if (strcmp(mode, "groupwrite") == 0) {
    rc = chmod(path, 0660);
  } else if (strcmp(mode, "owner") == 0) {
    rc = chown(path, 12345, (gid_t)-1);
  } else if (strcmp(mode, "foreign") == 0) {
    /* A whole, valid entry of another key under this name. */
    size_t m;
    char *o = read_file(other_entry, &m);
    rc = o ? write_file(path, o, m) : -1;
    free(o);
  } else {
    rc = -1;
  }
  free(d);
  return rc;
}

static int cmd_corrupt(int argc, char **argv) {
  if (argc != 3)
    return usage();
  size_t len;
  char *src = read_file(argv[1], &len);
  if (!src)
    return 2;
  const char *dir = argv[0], *mode = argv[2];
  Compile ref = {0}, other = {0}, again = {0}, third = {0};
  ref.o.cache_dir = dir;
  run_compile(&ref, src, len);
  other.o.cache_dir = dir;
  other.o.target = "sm_80"; /* another valid entry, for "foreign" */
  run_compile(&other, src, len);
  if (ref.st != FA_OK || !ref.s.cache_stored || damage(ref.s.entry, mode, other.s.entry) != 0) {
    printf("setup failed: %s %s\n", status_name(ref.st), ref.s.note);
    return 1;
  }
  again.o.cache_dir = third.o.cache_dir = dir;
  run_compile(&again, src, len);
  run_compile(&third, src, len);
  int bad = 0;
  printf("after %s: %s\n", mode, cache_word(&again.s));
  printf("note: %s\n", again.s.note);
  bad |= check(again.st == FA_OK && again.s.cache_rebuilt, "detected and rebuilt");
  bad |= check(again.len == ref.len && memcmp(again.ptx, ref.ptx, ref.len) == 0,
               "rebuilt ptx = original");
  bad |= check(third.s.cache_hit && third.len == ref.len && memcmp(third.ptx, ref.ptx, ref.len) == 0,
               "next compile hits the repaired entry");
  fa_jit_free(ref.ptx);
  fa_jit_free(other.ptx);
  fa_jit_free(again.ptx);
  fa_jit_free(third.ptx);
  free(src);
  return bad;
}

/* ---- poison ------------------------------------------------------------------------ */

/* What another user with write access to a shared cache directory could do:
 * a well-formed entry (magic, key, checksum all right) holding their PTX. */
static int cmd_poison(int argc, char **argv) {
  if (argc != 2)
    return usage();
  size_t len;
  char *src = read_file(argv[1], &len);
  if (!src)
    return 2;
  Compile c = {0};
  c.o.cache_dir = ""; /* only the key */
  run_compile(&c, src, len);
  static const char attacker[] = "// attacker's PTX\n";
  char forge[4200], note[512] = "", from[4200], to[4200];
  snprintf(forge, sizeof forge, "%s.forge", argv[0]);
  int ok = c.st == FA_OK && mkdir(forge, 0700) == 0 &&
           kc_store(forge, c.s.key, attacker, sizeof attacker - 1, note, sizeof note) == 0 &&
           kc_entry_path(forge, c.s.key, from, sizeof from) == 0 &&
           kc_entry_path(argv[0], c.s.key, to, sizeof to) == 0 && rename(from, to) == 0;
  printf("planted %s: %s %s\n", c.s.key, ok ? "yes" : "NO", note);
  fa_jit_free(c.ptx);
  free(src);
  return !ok;
}

/* ---- threads and processes ----------------------------------------------------------- */

typedef struct Specs {
  int n;
  char **src;
  size_t *len;
  char (*ref)[17]; /* digest of each spec's PTX compiled alone, without cache */
  const char *dir;
} Specs;

typedef struct Worker {
  const Specs *sp;
  int id;
  int failures, mismatches, hits, compiled;
  char first_error[256];
} Worker;

/* Compiles every spec twice, starting at a different one per worker so
 * that the same and different specs are compiled at the same moment. */
static void *worker(void *arg) {
  Worker *w = arg;
  const Specs *sp = w->sp;
  for (int round = 0; round < 2 * sp->n; round++) {
    int j = (w->id + round) % sp->n;
    Compile c = {0};
    c.o.cache_dir = sp->dir;
    run_compile(&c, sp->src[j], sp->len[j]);
    char d[17] = "";
    if (c.st != FA_OK) {
      if (!w->failures++)
        snprintf(w->first_error, sizeof w->first_error, "%s: %.200s", status_name(c.st), c.err);
    } else {
      digest16(c.ptx, c.len, d);
      w->mismatches += sp->ref && strcmp(d, sp->ref[j]) != 0;
      w->hits += c.s.cache_hit;
      w->compiled += !c.s.cache_hit;
    }
    fa_jit_free(c.ptx);
  }
  return NULL;
}

static int load_specs(Specs *sp, int argc, char **argv) {
  sp->n = argc;
  sp->src = calloc(argc, sizeof *sp->src);
  sp->len = calloc(argc, sizeof *sp->len);
  sp->ref = calloc(argc, sizeof *sp->ref);
  for (int i = 0; i < argc; i++)
    if (!(sp->src[i] = read_file(argv[i], &sp->len[i])))
      return -1;
  return 0;
}

static void free_specs(Specs *sp) {
  for (int i = 0; i < sp->n; i++)
    free(sp->src[i]);
  free(sp->src);
  free(sp->len);
  free(sp->ref);
}

/* The reference digests: each spec compiled alone, cache off. */
static int reference(Specs *sp) {
  for (int j = 0; j < sp->n; j++) {
    Compile c = {0};
    c.o.cache_dir = "";
    run_compile(&c, sp->src[j], sp->len[j]);
    if (c.st != FA_OK) {
      printf("reference compile of spec %d failed: %s\n", j, c.err);
      return -1;
    }
    digest16(c.ptx, c.len, sp->ref[j]);
    fa_jit_free(c.ptx);
  }
  return 0;
}

static int cmd_threads(int argc, char **argv) {
  if (argc < 3)
    return usage();
  Specs sp = {.dir = argv[0]};
  int nt = atoi(argv[1]);
  if (nt < 1 || nt > 64 || load_specs(&sp, argc - 2, argv + 2) != 0)
    return usage();
  if (reference(&sp) != 0)
    return 1;
  Worker *w = calloc(nt, sizeof *w);
  pthread_t *t = calloc(nt, sizeof *t);
  for (int i = 0; i < nt; i++) {
    w[i] = (Worker){.sp = &sp, .id = i};
    pthread_create(&t[i], NULL, worker, &w[i]);
  }
  int failures = 0, mismatches = 0, hits = 0, compiled = 0;
  for (int i = 0; i < nt; i++) {
    pthread_join(t[i], NULL);
    failures += w[i].failures;
    mismatches += w[i].mismatches;
    hits += w[i].hits;
    compiled += w[i].compiled;
    if (w[i].failures)
      printf("thread %d: %s\n", i, w[i].first_error);
  }
  int total = nt * 2 * sp.n;
  printf("threads %d, specs %d, compiles %d: failures %d, mismatches %d\n", nt, sp.n, total,
         failures, mismatches);
  /* Threads that miss on one key at once wait for the first one's entry. */
  printf("compiler ran %d times, cache hits %d\n", compiled, hits);
  free(w);
  free(t);
  free_specs(&sp);
  return failures || mismatches;
}

/* Each child compiles every spec and sends "j digest" lines; the parent
 * compares them with its own cache-off compiles, made after the children
 * finish (a fork after the compiler has started threads would be unsafe). */
static int cmd_procs(int argc, char **argv) {
  if (argc < 3)
    return usage();
  Specs sp = {.dir = argv[0]};
  int np = atoi(argv[1]);
  if (np < 1 || np > 16 || load_specs(&sp, argc - 2, argv + 2) != 0)
    return usage();
  int fds[2];
  if (pipe(fds) != 0)
    return 2;
  fflush(stdout);
  for (int p = 0; p < np; p++) {
    if (fork() != 0)
      continue;
    close(fds[0]);
    FILE *out = fdopen(fds[1], "w");
    for (int j = 0; j < sp.n; j++) {
      Compile c = {0};
      c.o.cache_dir = sp.dir;
      run_compile(&c, sp.src[(j + p) % sp.n], sp.len[(j + p) % sp.n]);
      char d[17] = "failed";
      if (c.st == FA_OK)
        digest16(c.ptx, c.len, d);
      fprintf(out, "%d %s\n", (j + p) % sp.n, d);
      fa_jit_free(c.ptx);
    }
    fclose(out);
    _exit(0);
  }
  close(fds[1]);
  FILE *in = fdopen(fds[0], "r");
  int j, lines = 0, bad = 0;
  char d[32];
  char (*got)[48] = calloc((size_t)np * sp.n, sizeof *got);
  while (fscanf(in, "%d %31s", &j, d) == 2 && lines < np * sp.n)
    if (j >= 0 && j < sp.n)
      snprintf(got[lines++], sizeof got[0], "%d %s", j, d);
  fclose(in);
  for (int p = 0; p < np; p++)
    wait(NULL);
  if (reference(&sp) != 0)
    return 1;
  for (int i = 0; i < lines; i++) {
    sscanf(got[i], "%d %31s", &j, d);
    bad += strcmp(d, sp.ref[j]) != 0;
  }
  printf("processes %d, compiles %d of %d: mismatches %d\n", np, lines, np * sp.n, bad);
  free(got);
  free_specs(&sp);
  return bad || lines != np * sp.n;
}

/* ---- bad arguments --------------------------------------------------------------------- */

static int cmd_nulls(void) {
  char *ptx = (char *)1, err[512];
  size_t len = 7;
  fa_jit_options o;
  fa_jit_options_init(&o);
  o.cache_dir = "";
  fa_status st = fa_jit_compile(NULL, 0, &o, &ptx, &len, err, sizeof err);
  printf("source NULL: %s: %s (ptx %s)\n", status_name(st), err, ptx ? "set" : "NULL");
  st = fa_jit_compile("x", 1, &o, NULL, &len, err, sizeof err);
  printf("ptx NULL: %s: %s\n", status_name(st), err);
  const char *spec = "attention a { dtype = bf16; head_dim = 64; heads = 4; }";
  o.target = "sm_70";
  st = fa_jit_compile(spec, strlen(spec), &o, &ptx, &len, err, sizeof err);
  printf("target sm_70: %s: %s\n", status_name(st), err);
  o.target = NULL;
  o.disable_passes = "mask-skip,no-such-pass";
  st = fa_jit_compile(spec, strlen(spec), &o, &ptx, &len, err, sizeof err);
  printf("unknown pass: %s: %s\n", status_name(st), err);
  o.disable_passes = "tiling";
  st = fa_jit_compile(spec, strlen(spec), &o, &ptx, &len, err, sizeof err);
  printf("required pass: %s: %s\n", status_name(st), err);
  o.disable_passes = NULL;
  st = fa_jit_compile(spec, strlen(spec), &o, &ptx, &len, NULL, 0);
  printf("err NULL, valid spec: %s\n", status_name(st));
  fa_jit_free(ptx);
  fa_jit_free(NULL);
  printf("fa_jit_free(NULL): ok\n");
  fa_module *m = (fa_module *)1;
  st = fa_module_compile(NULL, spec, strlen(spec), &o, &m);
  printf("fa_module_compile(NULL ctx): %s (out %s)\n", status_name(st), m ? "set" : "NULL");
  st = fa_jit_compile(spec, strlen(spec), NULL, &ptx, &len, err, sizeof err);
  printf("opts NULL: %s\n", status_name(st));
  fa_jit_free(ptx);
  printf("%d %s\n", FA_ERR_COMPILE, fa_status_string(FA_ERR_COMPILE));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return usage();
  const char *cmd = argv[1];
  argc -= 2;
  argv += 2;
  if (strcmp(cmd, "compile") == 0)
    return cmd_compile(argc, argv);
  if (strcmp(cmd, "twice") == 0)
    return cmd_twice(argc, argv);
  if (strcmp(cmd, "keys") == 0)
    return cmd_keys(argc, argv);
  if (strcmp(cmd, "corrupt") == 0)
    return cmd_corrupt(argc, argv);
  if (strcmp(cmd, "poison") == 0)
    return cmd_poison(argc, argv);
  if (strcmp(cmd, "threads") == 0)
    return cmd_threads(argc, argv);
  if (strcmp(cmd, "procs") == 0)
    return cmd_procs(argc, argv);
  if (strcmp(cmd, "nulls") == 0)
    return cmd_nulls();
  return usage();
}
