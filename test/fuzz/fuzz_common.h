/* fuzz_common.h - small helpers shared by the libFuzzer harnesses. */
#ifndef FLASHC_FUZZ_COMMON_H
#define FLASHC_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
