/* kinds.c - layer 4: the table of kernel kinds, and the lowering's entry
 * (cg_lower.h): each kernel is lowered by the walker with the hooks of the
 * one kind that accepts it. */
#include "codegen/kinds.h"

static const LwKind *const kinds[] = {
    &lw_kind_forward,      &lw_kind_decode,         &lw_kind_combine,       &lw_kind_backward_pre,
    &lw_kind_backward_main, &lw_kind_backward_post, &lw_kind_backward_q,
    &lw_kind_blocks};

int cg_lower_kernel(CgContext *cc, MlirBlock gpu_module, const Func *f, CgTensorCore tc,
                    CgExpFma exp_fma, CgLaneStats lane_stats, const char *target, CgKernelInfo *info) {
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (kinds[i]->accepts(f))
      return lw_walk_kernel(cc, gpu_module, f, kinds[i], tc, exp_fma, lane_stats, target, info);
  cg_context_error(cc, mlirLocationUnknownGet(cg_context_mlir(cc)),
                   "codegen: kernel %s is of no known kind", f->name);
  return -1;
}
