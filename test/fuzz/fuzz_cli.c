/* fuzz_cli.c - libFuzzer harness for the command line of flashc
 * (tools/flashc.c, compiled with its main renamed flashc_main).
 *
 * Input: arguments separated by NUL bytes; an empty argument (two NULs in a
 * row) ends them and the rest is the content of the input file. The
 * arguments are sanitized so that nothing outside a scratch directory is
 * read, written or removed:
 *   - an argument that is not an option (the input file) becomes the
 *     scratch input (input.tile when it ends in .tile, else input.fa),
 *     holding the content; "-" (stdin) stays, and stdin reads that file;
 *   - the argument after -o becomes scratch/existing when it starts with
 *     'e' (a file that exists before the run, holding a sentinel), else
 *     scratch/out (absent before the run);
 *   - everything else (options, their values) is passed as is.
 * stdout and stderr go to /dev/null during the call. flashc_main must return
 * 0..3 (never crash, never exit), and a failed run leaves a file that
 * existed before -o untouched. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"

int flashc_main(int argc, char **argv);

#define MAX_ARGS 24
#define MAX_ARG_LEN 256

static char dir[256], in_fa[512], in_tile[512], out[512], existing[512];
static const char sentinel[] = "an existing file: keep me\n";

static void cleanup(void) {
  unlink(in_fa), unlink(in_tile), unlink(out), unlink(existing);
  rmdir(dir);
}

static void setup(void) {
  if (dir[0])
    return;
  fuzz_scratch_dir(dir, sizeof dir, "fuzz_cli");
  snprintf(in_fa, sizeof in_fa, "%s/input.fa", dir);
  snprintf(in_tile, sizeof in_tile, "%s/input.tile", dir);
  snprintf(out, sizeof out, "%s/out", dir);
  snprintf(existing, sizeof existing, "%s/existing", dir);
  unsetenv("FLASHC_DUMP_IR");
  atexit(cleanup);
}

static void write_file(const char *p, const void *d, size_t n) {
  FILE *f = fopen(p, "wb");
  FUZZ_CHECK(f);
  FUZZ_CHECK(n == 0 || fwrite(d, 1, n, f) == n);
  FUZZ_CHECK(fclose(f) == 0);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int existing_intact(void) {
  FILE *f = fopen(existing, "rb");
  if (!f)
    return 0;
  char buf[sizeof sentinel];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  return n == sizeof sentinel - 1 && memcmp(buf, sentinel, n) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup();
  char *argv[MAX_ARGS + 2];
  int argc = 0;
  argv[argc++] = strdup("flashc");
  size_t i = 0;
  int after_o = 0, o_existing = 0;
  while (i < size && argc <= MAX_ARGS) {
    const uint8_t *nul = memchr(data + i, '\0', size - i);
    size_t n = nul ? (size_t)(nul - (data + i)) : size - i;
    if (n == 0) { /* the end of the arguments */
      i++;
      break;
    }
    char arg[MAX_ARG_LEN + 1];
    size_t m = n < MAX_ARG_LEN ? n : MAX_ARG_LEN;
    memcpy(arg, data + i, m);
    arg[m] = '\0';
    i += n + (nul != NULL);
    const char *a = arg;
    if (after_o) {
      o_existing = arg[0] == 'e';
      a = o_existing ? existing : out;
      after_o = 0;
    } else if (strcmp(arg, "-o") == 0) {
      after_o = 1;
    } else if (arg[0] != '-') {
      a = ends_with(arg, ".tile") ? in_tile : in_fa;
    }
    argv[argc++] = strdup(a);
  }
  argv[argc] = NULL;
  const uint8_t *content = data + (i < size ? i : size);
  size_t clen = size - (size_t)(content - data);
  write_file(in_fa, content, clen);
  write_file(in_tile, content, clen);
  write_file(existing, sentinel, sizeof sentinel - 1);
  unlink(out);
  FUZZ_CHECK(freopen(in_fa, "rb", stdin));

  FILE *sink = fuzz_sink(), *saved_out = stdout, *saved_err = stderr;
  stdout = sink;
  stderr = sink;
  int rc = flashc_main(argc, argv);
  fflush(sink);
  stdout = saved_out;
  stderr = saved_err;

  if (rc < 0 || rc > 3) {
    fprintf(stderr, "flashc_main returned %d\n", rc);
    FUZZ_CHECK(0);
  }
  if (rc != 0 && o_existing && !existing_intact()) {
    fprintf(stderr, "a failed run (exit %d) destroyed the existing -o file\n", rc);
    FUZZ_CHECK(0);
  }
  for (int a = 0; a < argc; a++)
    free(argv[a]);
  return 0;
}
