/* fuzz_cache.c - libFuzzer harness for the JIT's on-disk kernel cache
 * (runtime/kernel_cache.c). The first input byte picks what lies in a
 * scratch cache directory under the entry's name, the rest is the bytes:
 *   0: the input as the entry file, as is (real entries are the seeds);
 *   1: the same with the header's payload checksum fixed up, so mutated
 *      headers (lengths, versions, keys) get past the checksum;
 *   2: kc_store of the input as the payload, then kc_lookup must return it;
 *   3: a directory, 4: a symlink to the input, 5: a dangling symlink;
 *   6: a FIFO (kc_lookup must refuse it at once, never wait on it).
 * kc_lookup must then answer without crashing: a hit only for an entry whose
 * checksum and key match (the payload intact), a corrupt entry removed. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "jit/kernel_cache.h"

/* The key the seeds were stored under (test/fuzz/corpus/cache: written by
 * kc_store with this key). */
static const char fuzz_key[KC_KEY_HEX] =
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

static char dir[256], path[512];

static void remove_dir(void) { rmdir(dir); }

static void setup(void) {
  if (dir[0])
    return;
  fuzz_scratch_dir(dir, sizeof dir, "fuzz_cache");
  FUZZ_CHECK(kc_entry_path(dir, fuzz_key, path, sizeof path) == 0);
  atexit(remove_dir);
}

static void write_file(const char *p, const uint8_t *d, size_t n) {
  FILE *f = fopen(p, "wb");
  FUZZ_CHECK(f);
  FUZZ_CHECK(fwrite(d, 1, n, f) == n || n == 0);
  FUZZ_CHECK(fclose(f) == 0);
}

/* Leaves the scratch directory empty (entry, stray temp files). */
static void clean(void) {
  rmdir(path);
  unlink(path);
  char other[512];
  snprintf(other, sizeof other, "%s/target", dir);
  unlink(other);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup();
  if (size == 0)
    return 0;
  int mode = data[0] % 8;
  data++, size--;
  char note[512] = "";
  char *got = NULL;
  size_t len = 0;
  char target[512];
  snprintf(target, sizeof target, "%s/target", dir);
  switch (mode) {
  case 0:
  default:
    write_file(path, data, size);
    break;
  case 1: {
    uint8_t *copy = malloc(size + 1);
    memcpy(copy, data, size);
    if (size >= 120) {
      KcSha256 s;
      kc_sha256_init(&s);
      kc_sha256_update(&s, copy + 120, size - 120);
      kc_sha256_final(&s, copy + 88);
    }
    write_file(path, copy, size);
    free(copy);
    break;
  }
  case 2: {
    int rc = kc_store(dir, fuzz_key, data, size, note, sizeof note);
    FUZZ_CHECK(rc == 0);
    KcLookup r = kc_lookup(dir, fuzz_key, &got, &len, note, sizeof note);
    FUZZ_CHECK(r == KC_HIT && len == size && memcmp(got, data, size) == 0 && got[len] == '\0');
    free(got);
    /* Another key is a miss, the entry stays. */
    char other[KC_KEY_HEX];
    memcpy(other, fuzz_key, KC_KEY_HEX);
    other[0] = 'f';
    FUZZ_CHECK(kc_lookup(dir, other, &got, &len, note, sizeof note) == KC_MISS && !got);
    clean();
    return 0;
  }
  case 3:
    FUZZ_CHECK(mkdir(path, 0700) == 0);
    break;
  case 4:
    write_file(target, data, size);
    FUZZ_CHECK(symlink(target, path) == 0);
    break;
  case 5:
    FUZZ_CHECK(symlink(target, path) == 0);
    break;
  case 6:
    FUZZ_CHECK(mkfifo(path, 0600) == 0);
    break;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  KcLookup r = kc_lookup(dir, fuzz_key, &got, &len, note, sizeof note);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  /* A lookup never waits (on a FIFO, say: open blocks until libFuzzer's
   * timer signal interrupts it). */
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  if (secs > 0.5) {
    fprintf(stderr, "kc_lookup took %.1f s (mode %d)\n", secs, mode);
    FUZZ_CHECK(0);
  }
  FUZZ_CHECK(memchr(note, '\0', sizeof note));
  if (r == KC_HIT) {
    /* Only a whole entry of ours: header, key, length and checksum. */
    FUZZ_CHECK(got && size >= 120 && len == size - 120 && got[len] == '\0');
    FUZZ_CHECK(memcmp(got, data + 120, len) == 0);
    FUZZ_CHECK(memcmp(data, "FLASHCKC", 8) == 0 && memcmp(data + 24, fuzz_key, 64) == 0);
    free(got);
  } else {
    FUZZ_CHECK(got == NULL && len == 0);
  }
  if (r == KC_CORRUPT) {
    struct stat st;
    /* A corrupt regular entry is gone (a directory cannot be unlinked). */
    FUZZ_CHECK(mode == 3 || lstat(path, &st) != 0);
  }
  clean();
  return 0;
}
