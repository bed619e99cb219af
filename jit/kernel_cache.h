/* kernel_cache.h - the on-disk cache of JIT-compiled PTX (internal).
 *
 * One file per entry, named by the 64 hex digits of its key, holding a
 * fixed header (magic, format version, payload length, SHA-256 of the key
 * and of the payload) and the payload. Entries are written to a unique
 * temporary file in the same directory, fsync'ed and renamed over the final
 * name, so a reader sees either no entry or a whole one, and concurrent
 * writers of one key (threads or processes) are safe: the last rename wins
 * and every candidate is complete. An entry that fails validation on read
 * (corrupt, truncated, foreign) is removed and reported as a miss; nothing
 * from it is ever returned. The checksum proves an entry whole, not who wrote
 * it: the directory must be the user's own and writable by no one else
 * (kc_dir_trusted), and an entry must be a regular file (never a symlink or
 * FIFO: opened with O_NOFOLLOW | O_NONBLOCK) owned by the user and writable by
 * no one else; anything else is refused and said why in the note.
 *
 * The cache is best effort: every failure is a miss or a skipped store plus
 * a note, never an error of the compile. Pure C and POSIX, no dependencies:
 * the hash is a small SHA-256 written here.
 */
#ifndef FLASHC_KERNEL_CACHE_H
#define FLASHC_KERNEL_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* Bumped when the entry layout or the key's recipe changes: old entries then
 * simply stop matching (the version is hashed into every key). */
#define KC_FORMAT_VERSION 1u

#define KC_KEY_HEX 65 /* 64 hex digits + NUL */

/* ---- SHA-256 (FIPS 180-4) ---------------------------------------------- */

typedef struct KcSha256 {
  uint32_t h[8];
  uint64_t nbytes;
  uint8_t block[64];
  size_t fill;
} KcSha256;

void kc_sha256_init(KcSha256 *s);
void kc_sha256_update(KcSha256 *s, const void *data, size_t len);
void kc_sha256_final(KcSha256 *s, uint8_t digest[32]);

/* Hashes one key field as its 8-byte little-endian length then its bytes, so
 * that field boundaries are part of the key ("ab"+"c" != "a"+"bc"). A NULL
 * field hashes differently from "" (length all ones). */
void kc_key_field(KcSha256 *s, const void *data, size_t len);
/* kc_key_field of a NUL-terminated string (NULL allowed). */
void kc_key_str(KcSha256 *s, const char *str);

/* Lower-case hex of a 32-byte digest into hex[KC_KEY_HEX]. */
void kc_hex(const uint8_t digest[32], char hex[KC_KEY_HEX]);

/* ---- the cache directory ----------------------------------------------- */

/* The default directory: $FLASHC_CACHE_DIR, else $XDG_CACHE_HOME/flashc,
 * else $HOME/.cache/flashc (empty variables count as unset). Returns 0, or
 * -1 when none applies or it does not fit in len (dir then ""). */
int kc_default_dir(char *dir, size_t len);

/* Whether dir may hold cache entries: it must be a directory owned by the
 * effective user (or root) and not writable by its group or others, since
 * entries are code that will run. Returns 0 when it is, 1 when it does not
 * exist yet (kc_store creates it, mode 0700), -1 with the reason in note. */
int kc_dir_trusted(const char *dir, char *note, size_t notelen);

typedef enum KcLookup {
  KC_HIT,     /* *data holds the payload */
  KC_MISS,    /* no entry (or it could not be read: see note) */
  KC_CORRUPT, /* an entry failed validation and was removed */
} KcLookup;

/* Looks `key` up in `dir`. On KC_HIT *data is a malloc'ed copy of the
 * payload (NUL-terminated as well) of *len bytes. On KC_CORRUPT (an entry
 * refused and removed), an untrusted directory and read problems other than
 * "no such entry" a one-line reason goes into note. */
KcLookup kc_lookup(const char *dir, const char key[KC_KEY_HEX], char **data, size_t *len,
                   char *note, size_t notelen);

/* Stores `len` bytes under `key` in `dir` (created, with parents, mode
 * 0700, when missing; refused when not trusted), and removes this user's temp
 * files that a crashed writer left there more than 10 minutes ago. Returns 0,
 * or -1 with a one-line reason in note. */
int kc_store(const char *dir, const char key[KC_KEY_HEX], const void *data, size_t len,
             char *note, size_t notelen);

/* The path of key's entry into path[len]; -1 when it does not fit. */
int kc_entry_path(const char *dir, const char key[KC_KEY_HEX], char *path, size_t len);

#endif
