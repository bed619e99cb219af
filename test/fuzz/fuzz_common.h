/* fuzz_common.h - small helpers shared by the libFuzzer harnesses. */
#ifndef FLASHC_FUZZ_COMMON_H
#define FLASHC_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where the code under test prints (diagnostics, dumps): /dev/null. */
static inline FILE *fuzz_sink(void) {
  static FILE *sink;
  if (!sink)
    sink = fopen("/dev/null", "w");
  return sink;
}

/* FLASHC_FUZZ_KNOWN_BUGS=NAME[,NAME] (or "all") lifts the guards that keep
 * the harnesses off known bugs being fixed (test/fuzz/README.md lists them:
 * contiguous, extent, ranges, cli-o, cache-fifo, name-length), so that their
 * reproducers in test/fuzz/found/ fail again. */
static inline int fuzz_known_bug(const char *name) {
  const char *e = getenv("FLASHC_FUZZ_KNOWN_BUGS");
  if (!e)
    return 0;
  if (strcmp(e, "all") == 0)
    return 1;
  size_t n = strlen(name);
  for (const char *p = e; (p = strstr(p, name)); p += n)
    if ((p == e || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
      return 1;
  return 0;
}

/* A harness invariant that does not hold: a bug, reported as a crash. */
#define FUZZ_CHECK(cond)                                                               \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                         \
    }                                                                                  \
  } while (0)

/* A new scratch directory PREFIX.XXXXXX into dir[len], under
 * $FUZZ_SCRATCH when set, else /dev/shm (tmpfs: the cache fsyncs), else
 * $TMPDIR or /tmp. The harness removes it at exit; a crash leaves it. */
static inline void fuzz_scratch_dir(char *dir, size_t len, const char *prefix) {
  const char *base = getenv("FUZZ_SCRATCH");
  if (!base || !base[0])
    base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
  if (!base || !base[0])
    base = "/tmp";
  int n = snprintf(dir, len, "%s/%s.XXXXXX", base, prefix);
  FUZZ_CHECK(n > 0 && (size_t)n < len && mkdtemp(dir));
}

/* Reads fixed-size values off the front of the input; zeros once it runs out. */
typedef struct FuzzIn {
  const uint8_t *p;
  size_t n;
} FuzzIn;

static inline uint64_t fuzz_bytes(FuzzIn *in, int nbytes) {
  uint64_t v = 0;
  for (int i = 0; i < nbytes && in->n; i++, in->p++, in->n--)
    v |= (uint64_t)in->p[0] << (8 * i);
  return v;
}
static inline uint8_t fuzz_u8(FuzzIn *in) { return (uint8_t)fuzz_bytes(in, 1); }
static inline uint32_t fuzz_u32(FuzzIn *in) { return (uint32_t)fuzz_bytes(in, 4); }

#endif
