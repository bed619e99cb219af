/* output.c - writing flashc's result without ever destroying a file (output.h). */
#define _XOPEN_SOURCE 700 /* realpath */
#include "tools/output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool output_allowed(const char *file, const char *input) {
  struct stat out, in;
  if (stat(file, &out) != 0)
    return true; /* missing (or unreachable: output_write says why) */
  if (S_ISDIR(out.st_mode)) {
    fprintf(stderr, "flashc: error: cannot write '%s': it is a directory\n", file);
    return false;
  }
  bool same = strcmp(input, "-") == 0 ? fstat(STDIN_FILENO, &in) == 0 && S_ISREG(in.st_mode)
                                      : stat(input, &in) == 0;
  if (same && in.st_dev == out.st_dev && in.st_ino == out.st_ino) {
    fprintf(stderr, "flashc: error: the output '%s' is the input file; refusing to overwrite it\n",
            file);
    return false;
  }
  return true;
}

static int write_all(int fd, const char *data, size_t len) {
  while (len > 0) {
    ssize_t w = write(fd, data, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    data += w;
    len -= (size_t)w;
  }
  return 0;
}

/* Not a regular file (a device or FIFO cannot be renamed over), or a file in
 * a directory we cannot create files in: written in place, never removed. */
static int write_in_place(const char *file, const char *data, size_t len) {
  int fd = open(file, O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "flashc: error: cannot write '%s': %s\n", file, strerror(errno));
    return -1;
  }
  int rc = write_all(fd, data, len);
  int saved = errno;
  if (close(fd) != 0 && rc == 0) {
    rc = -1;
    saved = errno;
  }
  if (rc != 0)
    fprintf(stderr, "flashc: error: writing '%s' failed: %s\n", file, strerror(saved));
  return rc;
}

/* The permission bits of a new file: 0666 less the umask (what fopen gives). */
static mode_t new_file_mode(void) {
  mode_t mask = umask(0);
  umask(mask);
  return 0666 & ~mask;
}

/* A temporary file beside `target`, renamed over it. Returns 0, -1 after an
 * error message, or -2 when no file can be created beside the target. */
static int write_by_rename(const char *target, mode_t mode, const char *data, size_t len) {
  char tmp[PATH_MAX + 32];
  const char *slash = strrchr(target, '/');
  int dirlen = slash ? (int)(slash - target) + 1 : 0;
  if (snprintf(tmp, sizeof tmp, "%.*s.flashc-tmp-XXXXXX", dirlen, target) >= (int)sizeof tmp) {
    fprintf(stderr, "flashc: error: cannot write '%s': path too long\n", target);
    return -1;
  }
  int fd = mkstemp(tmp);
  if (fd < 0)
    return -2;
  int ok = write_all(fd, data, len) == 0 && fchmod(fd, mode) == 0;
  int saved = errno;
  if (close(fd) != 0 && ok) {
    ok = 0;
    saved = errno;
  }
  if (ok && rename(tmp, target) == 0)
    return 0;
  if (ok)
    saved = errno;
  unlink(tmp); /* ours: made by mkstemp above */
  fprintf(stderr, "flashc: error: writing '%s' failed: %s\n", target, strerror(saved));
  return -1;
}

int output_write(const char *file, const char *data, size_t len) {
  struct stat st;
  if (stat(file, &st) != 0) {
    if (errno != ENOENT) {
      fprintf(stderr, "flashc: error: cannot write '%s': %s\n", file, strerror(errno));
      return -1;
    }
    int rc = write_by_rename(file, new_file_mode(), data, len);
    if (rc == -2)
      fprintf(stderr, "flashc: error: cannot write '%s': %s\n", file, strerror(errno));
    return rc < 0 ? -1 : 0;
  }
  if (S_ISDIR(st.st_mode)) {
    fprintf(stderr, "flashc: error: cannot write '%s': it is a directory\n", file);
    return -1;
  }
  if (!S_ISREG(st.st_mode))
    return write_in_place(file, data, len);
  /* Replace the file a symlink points at, not the link. */
  char target[PATH_MAX];
  if (!realpath(file, target)) {
    fprintf(stderr, "flashc: error: cannot write '%s': %s\n", file, strerror(errno));
    return -1;
  }
  int rc = write_by_rename(target, st.st_mode & 07777, data, len);
  /* A writable file in a directory we cannot write: the compile succeeded,
   * so writing in place risks only an I/O error. */
  return rc == -2 ? write_in_place(target, data, len) : rc;
}

bool output_stdout_ok(void) {
  errno = 0;
  if (fflush(stdout) == 0 && !ferror(stdout))
    return true;
  fprintf(stderr, "flashc: error: writing to standard output failed: %s\n",
          errno ? strerror(errno) : "write error");
  return false;
}
