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
