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

/* The numbers of one kernel's block of the log. */
static void parse_block(const char *block, CgPtxasKernel *k) {
  k->registers = number_before(block, " registers");
  k->smem_bytes = number_before(block, " bytes smem");
  k->stack_bytes = number_before(block, " bytes stack frame");
  k->spill_stores = number_before(block, " bytes spill stores");
  k->spill_loads = number_before(block, " bytes spill loads");
}

static void parse_info(const char *log, CgPtxasInfo *info) {
  static const char key[] = "Compiling entry function '";
  memset(info, 0, sizeof *info);
  CgPtxasKernel last;
  memset(&last, 0, sizeof last);
  for (const char *p = strstr(log, key); p; ) {
    const char *name = p + sizeof key - 1, *q = strchr(name, '\'');
    const char *next = strstr(name, key);
    size_t blen = next ? (size_t)(next - p) : strlen(p);
    char *block = malloc(blen + 1);
    if (!block || !q)
      break;
    memcpy(block, p, blen);
    block[blen] = '\0';
    CgPtxasKernel k;
    memset(&k, 0, sizeof k);
    snprintf(k.name, sizeof k.name, "%.*s", (int)(q - name), name);
    parse_block(block, &k);
    free(block);
    if (info->nkernels < CG_PTXAS_MAX_KERNELS)
      info->kernels[info->nkernels++] = k;
    last = k;
    p = next;
  }
  if (!info->nkernels) /* an older log format: the whole log is one block */
    parse_block(log, &last);
  info->registers = last.registers;
  info->smem_bytes = last.smem_bytes;
  info->stack_bytes = last.stack_bytes;
  info->spill_stores = last.spill_stores;
  info->spill_loads = last.spill_loads;
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
