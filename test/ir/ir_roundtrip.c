/* ir_roundtrip - test driver for the tile IR's text form.
 *
 *   ir_roundtrip [-no-verify] FILE|-
 *
 * Parses FILE, runs the verifier (unless -no-verify), prints the module to
 * stdout, then parses that output again and prints it a second time: the two
 * prints must be identical (print -> parse -> print is the identity). Exit 0
 * when everything holds, 1 on a parse error, a verifier error or a mismatch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static char *read_all(FILE *f, size_t *len) {
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  for (size_t k; buf && (k = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += k;
    if (n == cap)
      buf = realloc(buf, cap *= 2);
  }
  *len = n;
  return buf;
}

/* The module's text form in a malloc'd string. */
static char *print_to_string(const Module *m, size_t *len) {
  char *s = NULL;
  FILE *f = open_memstream(&s, len);
  module_print(f, m);
  fclose(f);
  return s;
}

int main(int argc, char **argv) {
  bool verify = true;
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-no-verify") == 0)
      verify = false;
    else
      path = argv[i];
  }
  if (!path) {
    fprintf(stderr, "usage: ir_roundtrip [-no-verify] FILE|-\n");
    return 2;
  }
  FILE *in = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!in) {
    perror(path);
    return 2;
  }
  size_t len;
  char *text = read_all(in, &len);
  if (in != stdin)
    fclose(in);
  Module *m = module_parse(strcmp(path, "-") == 0 ? "<stdin>" : path, text, len, stderr);
  free(text);
  if (!m)
    return 1;
  if (verify && module_verify(m, "parse", stderr) > 0) {
    module_destroy(m);
    return 1;
  }
  size_t len1, len2;
  char *once = print_to_string(m, &len1);
  module_destroy(m);
  fputs(once, stdout);
  Module *m2 = module_parse("<printed>", once, len1, stderr);
  if (!m2) {
    fprintf(stderr, "ir_roundtrip: the printed text does not parse\n");
    return 1;
  }
  char *twice = print_to_string(m2, &len2);
  module_destroy(m2);
  int rc = 0;
  if (len1 != len2 || memcmp(once, twice, len1) != 0) {
    fprintf(stderr, "ir_roundtrip: print -> parse -> print differs:\n%s", twice);
    rc = 1;
  }
  free(once);
  free(twice);
  return rc;
}
