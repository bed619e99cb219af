/* ptxas.h - running NVIDIA's ptxas on our PTX (for -emit=cubin and --stats). */
#ifndef FLASHC_CG_PTXAS_H
#define FLASHC_CG_PTXAS_H

#include <stddef.h>

#include "codegen/cg_strbuf.h"

/* What `ptxas -v` says about one kernel (the last one it reports). */
typedef struct CgPtxasInfo {
  int registers, smem_bytes, stack_bytes, spill_stores, spill_loads;
} CgPtxasInfo;

/* Assembles `ptx` for `chip` with `ptxas` (NULL: "ptxas" from PATH) and -v.
 * The cubin is appended to `cubin` when non-NULL, ptxas' messages to `log`.
 * Returns 0 on success, -1 when ptxas could not run (not installed), and
 * ptxas' exit status when it rejected the PTX. */
int cg_run_ptxas(const char *ptxas, const char *chip, const char *ptx, size_t len,
                 CgStrBuf *cubin, CgPtxasInfo *info, CgStrBuf *log);

#endif
