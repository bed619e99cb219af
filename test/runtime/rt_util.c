/* rt_util.c - the runtime lit drivers' shared helpers (rt_util.h). */
#include "rt_util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rt_status_name(fa_status s) {
  static char buf[64];
  const char *full = fa_status_string(s);
  const char *colon = strchr(full, ':');
  size_t n = colon ? (size_t)(colon - full) : strlen(full);
  if (n >= sizeof buf) n = sizeof buf - 1;
  memcpy(buf, full, n);
  buf[n] = '\0';
  return buf;
}

int rt_report(fa_status st, const char *msg) {
  printf("status: %s\n", rt_status_name(st));
  if (msg && *msg) printf("message: %s\n", msg);
  return st == FA_OK ? 0 : 1;
}

char *rt_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (buf) *len = n;
  return buf;
}

/* Applies --drop/--set/--add edits to metadata text, line by line. */
static char *edit_meta(const char *text, size_t len, int argc, char **argv, size_t *outlen) {
  size_t cap = len + 4096;
  for (int i = 0; i < argc; i++) cap += strlen(argv[i]) + 32;
  char *out = malloc(cap);
  if (!out) return NULL;
  size_t n = 0;
  const char *s = text, *end = text + len;
  while (s < end) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *e = nl ? nl : end;
    int keep = 1;
    for (int i = 0; i < argc; i++) {
      const char *key = NULL;
      size_t kl = 0;
      if (strncmp(argv[i], "--drop=", 7) == 0) key = argv[i] + 7, kl = strlen(key);
      if (strncmp(argv[i], "--set=", 6) == 0) {
        key = argv[i] + 6;
        const char *eq = strchr(key, '=');
        kl = eq ? (size_t)(eq - key) : strlen(key);
      }
      char pat[160];
      snprintf(pat, sizeof pat, "// flashc.meta %.*s ", (int)kl, key ? key : "");
      if (key && (size_t)(e - s) > strlen(pat) && memcmp(s, pat, strlen(pat)) == 0) keep = 0;
    }
    if (keep) {
      memcpy(out + n, s, (size_t)(e - s));
      n += (size_t)(e - s);
      out[n++] = '\n';
    }
    s = nl ? nl + 1 : end;
  }
  for (int i = 0; i < argc; i++) {
    if (strncmp(argv[i], "--set=", 6) == 0) {
      const char *kv = argv[i] + 6, *eq = strchr(kv, '=');
      if (!eq) continue;
      n += (size_t)sprintf(out + n, "// flashc.meta %.*s %s\n", (int)(eq - kv), kv, eq + 1);
    } else if (strncmp(argv[i], "--add=", 6) == 0) {
      n += (size_t)sprintf(out + n, "%s\n", argv[i] + 6);
    }
  }
  *outlen = n;
  return out;
}

char *rt_load_meta_text(const char *path, int argc, char **argv, size_t *len) {
  size_t raw = 0;
  char *text = rt_read_file(path, &raw);
  if (!text) {
    fprintf(stderr, "cannot read %s\n", path);
    return NULL;
  }
  char *edited = edit_meta(text, raw, argc, argv, len);
  free(text);
  return edited;
}

long long rt_num(const char *s, const char *what) {
  char *end;
  long long v = strtoll(s, &end, 0);
  if (end == s || *end) {
    fprintf(stderr, "bad number '%s' for %s\n", s, what);
    exit(2);
  }
  return v;
}

void *rt_ptr_value(const char *s, const void *cur) {
  if (strcmp(s, "null") == 0) return NULL;
  if (s[0] == '+') return (char *)(uintptr_t)cur + rt_num(s + 1, "pointer offset");
  return (void *)(uintptr_t)strtoull(s, NULL, 0);
}

fa_dtype rt_dtype_value(const char *s) {
  if (strcmp(s, "f16") == 0) return FA_DTYPE_F16;
  if (strcmp(s, "bf16") == 0) return FA_DTYPE_BF16;
  if (strcmp(s, "f32") == 0) return FA_DTYPE_F32;
  return (fa_dtype)rt_num(s, "dtype");
}

int rt_tensor_mod(fa_tensor *const *ts, const char *const *names, int n, const char *mod) {
  const char *dot = strchr(mod, '.'), *eq = strchr(mod, '=');
  if (!dot || !eq || eq < dot) return 0;
  fa_tensor *t = NULL;
  for (int i = 0; i < n; i++)
    if (strlen(names[i]) == (size_t)(dot - mod) && strncmp(mod, names[i], (size_t)(dot - mod)) == 0)
      t = ts[i];
  if (!t) return 0;
  const char *field = dot + 1, *val = eq + 1;
  size_t fl = (size_t)(eq - field);
  if (fl == 4 && strncmp(field, "data", 4) == 0) t->data = rt_ptr_value(val, t->data);
  else if (fl == 5 && strncmp(field, "dtype", 5) == 0) t->dtype = rt_dtype_value(val);
  else if (fl == 4 && strncmp(field, "dim", 3) == 0 && field[3] >= '0' && field[3] <= '3')
    t->dim[field[3] - '0'] = rt_num(val, mod);
  else if (fl == 7 && strncmp(field, "stride", 6) == 0 && field[6] >= '0' && field[6] <= '3')
    t->stride[field[6] - '0'] = rt_num(val, mod);
  else
    return 0;
  return 1;
}
