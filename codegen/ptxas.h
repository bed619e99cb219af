/* ptxas.h - running NVIDIA's ptxas on our PTX (for -emit=cubin and --stats). */
#ifndef FLASHC_CG_PTXAS_H
#define FLASHC_CG_PTXAS_H

#include <stddef.h>

#include "codegen/cg_strbuf.h"

/* What `ptxas -v` says about one kernel. */
typedef struct CgPtxasKernel {
  char name[128];
  int registers, smem_bytes, stack_bytes, spill_stores, spill_loads;
} CgPtxasKernel;

enum { CG_PTXAS_MAX_KERNELS = 16 };

/* What `ptxas -v` says: the numbers of the last kernel it reports (the
 * fields below, as before modules held several kernels), and each kernel's
 * (at most CG_PTXAS_MAX_KERNELS, in ptxas' order). */
typedef struct CgPtxasInfo {
  int registers, smem_bytes, stack_bytes, spill_stores, spill_loads;
  int nkernels;
  CgPtxasKernel kernels[CG_PTXAS_MAX_KERNELS];
} CgPtxasInfo;

/* Assembles `ptx` for `chip` with `ptxas` (NULL: "ptxas" from PATH) and -v.
 * The cubin is appended to `cubin` when non-NULL, ptxas' messages to `log`.
 * Returns 0 on success, -1 when ptxas could not run (not installed), and
 * ptxas' exit status when it rejected the PTX. */
int cg_run_ptxas(const char *ptxas, const char *chip, const char *ptx, size_t len,
                 CgStrBuf *cubin, CgPtxasInfo *info, CgStrBuf *log);

#endif
