/* ptxas.c - ptxas as a subprocess: files in a private temp dir, -v parsed. */
#include "codegen/ptxas.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int write_file(const char *path, const char *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return -1;
  size_t n = fwrite(data, 1, len, f);
  return (fclose(f) == 0 && n == len) ? 0 : -1;
}

static void read_file(const char *path, CgStrBuf *out) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    cg_strbuf_append(out, buf, n);
  fclose(f);
}

/* Runs argv with stdout and stderr into `log_path`; returns the exit
 * status, or -1 when the program could not be started. */
static int run(char *const argv[], const char *log_path) {
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execvp(argv[0], argv);
    _exit(127);
  }
  int status;
  if (waitpid(pid, &status, 0) < 0)
    return -1;
  if (!WIFEXITED(status))
    return -1;
  return WEXITSTATUS(status) == 127 ? -1 : WEXITSTATUS(status);
}

/* Reads the number just before `key` on a line such as
 * "ptxas info    : Used 128 registers, used 1 barriers, 8 bytes smem". */
static int number_before(const char *text, const char *key) {
  const char *p = strstr(text, key);
  if (!p)
    return 0;
  while (p > text && p[-1] == ' ')
    p--;
  while (p > text && p[-1] >= '0' && p[-1] <= '9')
    p--;
  return atoi(p);
}

static void parse_info(const char *log, CgPtxasInfo *info) {
  /* Each kernel has its own block; report the last one's numbers. */
  const char *last = log, *p;
  while ((p = strstr(last + 1, "Function properties for")) != NULL)
    last = p;
  info->registers = number_before(last, " registers");
  info->smem_bytes = number_before(last, " bytes smem");
  info->stack_bytes = number_before(last, " bytes stack frame");
  info->spill_stores = number_before(last, " bytes spill stores");
  info->spill_loads = number_before(last, " bytes spill loads");
}

int cg_run_ptxas(const char *ptxas, const char *chip, const char *ptx, size_t len,
                 CgStrBuf *cubin, CgPtxasInfo *info, CgStrBuf *log) {
  char dir[] = "/tmp/flashc-ptxas-XXXXXX";
  if (!mkdtemp(dir))
    return -1;
  char in[64], out[64], lg[64];
  snprintf(in, sizeof in, "%s/k.ptx", dir);
  snprintf(out, sizeof out, "%s/k.cubin", dir);
  snprintf(lg, sizeof lg, "%s/log", dir);
  int rc = -1;
  if (write_file(in, ptx, len) == 0) {
    char *argv[] = {(char *)(ptxas ? ptxas : "ptxas"), "-v", "--gpu-name", (char *)chip,
                    "-o", out, in, NULL};
    rc = run(argv, lg);
    CgStrBuf text;
    cg_strbuf_init(&text);
    read_file(lg, &text);
    if (info && text.data)
      parse_info(text.data, info);
    if (log && text.data)
      cg_strbuf_append(log, text.data, text.len);
    cg_strbuf_free(&text);
    if (rc == 0 && cubin)
      read_file(out, cubin);
  }
  unlink(in);
  unlink(out);
  unlink(lg);
  rmdir(dir);
  return rc;
}
