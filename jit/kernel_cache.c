/* kernel_cache.c - the on-disk cache of JIT-compiled PTX (kernel_cache.h). */
#include "kernel_cache.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- SHA-256 ------------------------------------------------------------ */

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha_block(KcSha256 *s, const uint8_t *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
  uint32_t e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
    uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d;
  s->h[4] += e, s->h[5] += f, s->h[6] += g, s->h[7] += h;
}

void kc_sha256_init(KcSha256 *s) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof h0);
  s->nbytes = 0;
  s->fill = 0;
}

void kc_sha256_update(KcSha256 *s, const void *data, size_t len) {
  const uint8_t *p = data;
  s->nbytes += len;
  while (len > 0) {
    size_t n = 64 - s->fill < len ? 64 - s->fill : len;
    memcpy(s->block + s->fill, p, n);
    s->fill += n, p += n, len -= n;
    if (s->fill == 64) {
      sha_block(s, s->block);
      s->fill = 0;
    }
  }
}

void kc_sha256_final(KcSha256 *s, uint8_t digest[32]) {
  uint64_t bits = s->nbytes * 8;
  uint8_t pad = 0x80, zero = 0, len_be[8];
  kc_sha256_update(s, &pad, 1);
  while (s->fill != 56)
    kc_sha256_update(s, &zero, 1);
  for (int i = 0; i < 8; i++)
    len_be[i] = (uint8_t)(bits >> (56 - 8 * i));
  kc_sha256_update(s, len_be, 8);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++)
      digest[4 * i + j] = (uint8_t)(s->h[i] >> (24 - 8 * j));
}

static void put_le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

void kc_key_field(KcSha256 *s, const void *data, size_t len) {
  uint8_t n[8];
  put_le(n, data ? (uint64_t)len : UINT64_MAX, 8);
  kc_sha256_update(s, n, 8);
  if (data)
    kc_sha256_update(s, data, len);
}

void kc_key_str(KcSha256 *s, const char *str) { kc_key_field(s, str, str ? strlen(str) : 0); }

void kc_hex(const uint8_t digest[32], char hex[KC_KEY_HEX]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    hex[2 * i] = digits[digest[i] >> 4];
    hex[2 * i + 1] = digits[digest[i] & 15];
  }
  hex[64] = '\0';
}

/* ---- paths --------------------------------------------------------------- */

static void note_fmt(char *note, size_t len, const char *fmt, ...) {
  if (!note || len == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(note, len, fmt, ap);
  va_end(ap);
}

static const char *nonempty_env(const char *name) {
  const char *v = getenv(name);
  return v && v[0] ? v : NULL;
}

int kc_default_dir(char *dir, size_t len) {
  const char *v;
  int n = -1;
  if ((v = nonempty_env("FLASHC_CACHE_DIR")))
    n = snprintf(dir, len, "%s", v);
  else if ((v = nonempty_env("XDG_CACHE_HOME")))
    n = snprintf(dir, len, "%s/flashc", v);
  else if ((v = nonempty_env("HOME")))
    n = snprintf(dir, len, "%s/.cache/flashc", v);
  if (n < 0 || (size_t)n >= len) {
    if (len)
      dir[0] = '\0';
    return -1;
  }
  return 0;
}

int kc_entry_path(const char *dir, const char key[KC_KEY_HEX], char *path, size_t len) {
  int n = snprintf(path, len, "%s/%s", dir, key);
  return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* mkdir -p: creates each missing component; an existing one is fine. */
static int make_dirs(const char *dir, char *note, size_t notelen) {
  char path[4096];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof path) {
    note_fmt(note, notelen, "cache directory name is empty or too long");
    return -1;
  }
  memcpy(path, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (path[i] != '/' && path[i] != '\0')
      continue;
    char c = path[i];
    path[i] = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
      note_fmt(note, notelen, "cannot create cache directory %s: %s", path, strerror(errno));
      return -1;
    }
    path[i] = c;
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    note_fmt(note, notelen, "cache directory %s is not a directory", dir);
    return -1;
  }
  return 0;
}

/* ---- trust ---------------------------------------------------------------
 * An entry is GPU code that will run: its checksum proves it is whole, not who
 * wrote it. As ssh does for its keys, the directory and every entry must be
 * owned by the effective user (or root) and writable by nobody else; then no
 * other user can have put a file there. */

static bool owner_ok(const struct stat *st) {
  return st->st_uid == geteuid() || st->st_uid == 0;
}

/* Why a directory's owner or mode make it untrustworthy; NULL when fine. */
static const char *dir_problem(const struct stat *st, char *buf, size_t len) {
  if (!owner_ok(st)) {
    snprintf(buf, len, "owned by uid %ld, not by you (uid %ld)", (long)st->st_uid,
             (long)geteuid());
    return buf;
  }
  if (st->st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(buf, len, "writable by %s (mode %04o)", st->st_mode & S_IWOTH ? "others" : "its group",
             (unsigned)(st->st_mode & 07777));
    return buf;
  }
  return NULL;
}

int kc_dir_trusted(const char *dir, char *note, size_t notelen) {
  struct stat st;
  if (stat(dir, &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return 1;
    note_fmt(note, notelen, "cannot use cache directory %s: %s", dir, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    note_fmt(note, notelen, "cache directory %s is not a directory", dir);
    return -1;
  }
  char why[96];
  if (dir_problem(&st, why, sizeof why)) {
    note_fmt(note, notelen, "cache directory %s is %s: cache not used", dir, why);
    return -1;
  }
  return 0;
}

/* Why an open entry is not one this user could have written; NULL if fine. */
static const char *entry_problem(const struct stat *st, char *buf, size_t len) {
  if (!S_ISREG(st->st_mode))
    return "not a regular file";
  if (!owner_ok(st)) {
    snprintf(buf, len, "owned by uid %ld, not by you", (long)st->st_uid);
    return buf;
  }
  if (st->st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(buf, len, "writable by others (mode %04o)", (unsigned)(st->st_mode & 07777));
    return buf;
  }
  return NULL;
}

/* ---- entry layout ---------------------------------------------------------
 *   0  magic "FLASHCKC"        8 bytes
 *   8  format version          u32 LE
 *  12  header size (120)       u32 LE
 *  16  payload length          u64 LE
 *  24  key, 64 hex digits      so a renamed or copied file is not trusted
 *  88  SHA-256 of the payload  32 bytes
 * 120  payload
 */
enum { HDR_SIZE = 120, OFF_VERSION = 8, OFF_HDRSIZE = 12, OFF_LEN = 16, OFF_KEY = 24, OFF_SUM = 88 };
static const char kc_magic[8] = {'F', 'L', 'A', 'S', 'H', 'C', 'K', 'C'};
/* Far above any PTX; a larger length field is corruption, not a kernel. */
#define KC_MAX_PAYLOAD ((uint64_t)1 << 30)

static void make_header(uint8_t hdr[HDR_SIZE], const char *key, const void *data, size_t len) {
  memcpy(hdr, kc_magic, 8);
  put_le(hdr + OFF_VERSION, KC_FORMAT_VERSION, 4);
  put_le(hdr + OFF_HDRSIZE, HDR_SIZE, 4);
  put_le(hdr + OFF_LEN, len, 8);
  memcpy(hdr + OFF_KEY, key, 64);
  KcSha256 s;
  kc_sha256_init(&s);
  kc_sha256_update(&s, data, len);
  kc_sha256_final(&s, hdr + OFF_SUM);
}

/* Why the header is not one we wrote for `key` and `file_size`; NULL if it is. */
static const char *header_problem(const uint8_t hdr[HDR_SIZE], const char *key, off_t file_size) {
  if (memcmp(hdr, kc_magic, 8) != 0)
    return "bad magic";
  if (get_le(hdr + OFF_VERSION, 4) != KC_FORMAT_VERSION)
    return "other format version";
  if (get_le(hdr + OFF_HDRSIZE, 4) != HDR_SIZE)
    return "bad header size";
  uint64_t len = get_le(hdr + OFF_LEN, 8);
  if (len > KC_MAX_PAYLOAD || (uint64_t)file_size != HDR_SIZE + len)
    return "length does not match the file size (truncated?)";
  if (memcmp(hdr + OFF_KEY, key, 64) != 0)
    return "entry belongs to another key";
  return NULL;
}

/* read() until n bytes or EOF/error; returns the count read. */
static size_t read_full(int fd, void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char *)buf + got, n - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  return got;
}

static int write_full(int fd, const void *buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, (const char *)buf + done, n - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    done += (size_t)w;
  }
  return 0;
}

/* Removes the entry we refused, unless a writer has already renamed a fresh
 * one over it (then the name points at another inode: keep that). lstat: a
 * symlink is removed itself, never what it points at. */
static void remove_if_same(const char *path, const struct stat *bad) {
  struct stat now;
  if (lstat(path, &now) == 0 && now.st_ino == bad->st_ino && now.st_dev == bad->st_dev)
    unlink(path);
}

/* Reads and validates an open entry; NULL with *why set when it is bad. */
static char *read_entry(int fd, const struct stat *st, const char *key, size_t *len,
                        const char **why) {
  uint8_t hdr[HDR_SIZE];
  if (st->st_size < HDR_SIZE || read_full(fd, hdr, HDR_SIZE) != HDR_SIZE) {
    *why = "shorter than its header";
    return NULL;
  }
  if ((*why = header_problem(hdr, key, st->st_size)))
    return NULL;
  size_t n = (size_t)get_le(hdr + OFF_LEN, 8);
  char *data = malloc(n + 1);
  if (!data) {
    *why = "out of memory";
    return NULL;
  }
  uint8_t sum[32];
  KcSha256 s;
  if (read_full(fd, data, n) != n) {
    *why = "short read";
  } else {
    kc_sha256_init(&s);
    kc_sha256_update(&s, data, n);
    kc_sha256_final(&s, sum);
    if (memcmp(sum, hdr + OFF_SUM, 32) == 0) {
      data[n] = '\0';
      *len = n;
      return data;
    }
    *why = "checksum mismatch";
  }
  free(data);
  return NULL;
}

KcLookup kc_lookup(const char *dir, const char key[KC_KEY_HEX], char **data, size_t *len,
                   char *note, size_t notelen) {
  *data = NULL;
  *len = 0;
  char path[4096];
  if (kc_entry_path(dir, key, path, sizeof path) != 0) {
    note_fmt(note, notelen, "cache path too long");
    return KC_MISS;
  }
  if (kc_dir_trusted(dir, note, notelen) != 0)
    return KC_MISS;
  /* O_NOFOLLOW: a symlink is refused, not followed; O_NONBLOCK: a FIFO
   * planted under the entry's name cannot hang the open. */
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  const char *why = NULL;
  char buf[96];
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return KC_MISS;
    if (errno != ELOOP || lstat(path, &st) != 0) {
      note_fmt(note, notelen, "cannot read cache entry %s: %s", path, strerror(errno));
      return KC_MISS;
    }
    why = "a symbolic link";
  } else if (fstat(fd, &st) != 0) {
    note_fmt(note, notelen, "cannot read cache entry %s: %s", path, strerror(errno));
    close(fd);
    return KC_MISS;
  } else if (!(why = entry_problem(&st, buf, sizeof buf))) {
    *data = read_entry(fd, &st, key, len, &why);
  }
  if (fd >= 0)
    close(fd);
  if (*data)
    return KC_HIT;
  if (strcmp(why, "out of memory") == 0) {
    note_fmt(note, notelen, "out of memory reading cache entry %s", path);
    return KC_MISS;
  }
  note_fmt(note, notelen, "corrupt cache entry %s (%s): removed, rebuilding", path, why);
  remove_if_same(path, &st);
  return KC_CORRUPT;
}

/* ---- store ----------------------------------------------------------------- */

/* A writer that died between mkstemp and rename leaves its temp file. Temps
 * of ours older than this are such leftovers (a live writer needs well under
 * a second); younger ones may belong to a writer still at work. */
#define KC_STALE_TEMP_SECONDS 600

static void remove_stale_temps(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  time_t now = time(NULL);
  struct dirent *e;
  while ((e = readdir(d))) {
    char path[4096];
    struct stat st;
    if (strncmp(e->d_name, ".tmp-", 5) != 0 ||
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
      continue;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        now - st.st_mtime > KC_STALE_TEMP_SECONDS)
      unlink(path);
  }
  closedir(d);
}

int kc_store(const char *dir, const char key[KC_KEY_HEX], const void *data, size_t len,
             char *note, size_t notelen) {
  char path[4096], tmp[4096];
  if (kc_entry_path(dir, key, path, sizeof path) != 0 ||
      snprintf(tmp, sizeof tmp, "%s/.tmp-%.16s-XXXXXX", dir, key) >= (int)sizeof tmp) {
    note_fmt(note, notelen, "cache path too long");
    return -1;
  }
  if (make_dirs(dir, note, notelen) != 0 || kc_dir_trusted(dir, note, notelen) != 0)
    return -1;
  remove_stale_temps(dir);
  /* A unique temp name per writer: concurrent writers never share a file,
   * and the final name only ever appears complete (rename is atomic). */
  int fd = mkstemp(tmp);
  if (fd < 0) {
    note_fmt(note, notelen, "cannot write to cache directory %s: %s", dir, strerror(errno));
    return -1;
  }
  uint8_t hdr[HDR_SIZE];
  make_header(hdr, key, data, len);
  /* fsync before rename: after a crash the entry is whole or absent. */
  int ok = write_full(fd, hdr, HDR_SIZE) == 0 && write_full(fd, data, len) == 0 && fsync(fd) == 0;
  int saved = errno;
  ok = close(fd) == 0 && ok;
  if (ok && rename(tmp, path) == 0)
    return 0;
  if (ok)
    saved = errno;
  unlink(tmp);
  note_fmt(note, notelen, "cannot write cache entry %s: %s", path, strerror(saved));
  return -1;
}
