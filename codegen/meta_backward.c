/* meta_backward.c - which backward launch FA_BACKWARD_AUTO runs: the
 * deterministic one (pre, bwd_kv, bwd_q: seven matmuls a tile pair, S and
 * the score recomputed in both kernels) or the atomic one (pre, bwd, post:
 * five matmuls, dQ summed into a float32 dq_acc that is zeroed first and
 * converted after, traffic that grows with the rows, not with the pairs
 * kept). docs/perf-log.md P137 (H200) has the rows this rule is read from:
 * the atomic launch is 2-14% faster at head dim 128 with the mask none or
 * causal (the bench's grid, GQA, softcap, ALiBi, T5's bias, a run-time
 * cap), and slower where few pairs are kept (a window, documents, block
 * lists: 2-11%, its fixed dq_acc traffic), where the deterministic kernels
 * copy an input tile by TMA that the atomic one gathers (a full bias:
 * +36%), at head dim 64 (3-10%) and 256 (25-33%). Dropout and kernels on
 * mma.sync (sm_80, -mma=sync) are not measured with it and stay
 * deterministic. */
#include "codegen/meta_backward.h"

#include <string.h>

/* Does kernel info `ki` copy a run-time input (a tensor map `in_NAME`)? */
static bool stages_input(const CgKernelInfo *ki) {
  for (int t = 0; t < ki->ntmaps; t++)
    if (strncmp(ki->tmap_tensor[t], "in_", 3) == 0)
      return true;
  return false;
}

/* A backward kernel of the kinds the rule was measured on. */
static bool measured_kind(const AttrList *a) {
  const char *mask = attr_str(a, "mask", "none");
  return attr_int(a, "head_dim", 0) == 128 &&
         attr_int(a, "v_head_dim", attr_int(a, "head_dim", 0)) == 128 &&
         (strcmp(mask, "none") == 0 || strcmp(mask, "causal") == 0) &&
         !attr_get(a, "block_list") && !attr_get(a, "dropout");
}

bool cg_backward_auto_atomic(const Module *m, const CgKernelInfo *info, const char *fwd) {
  bool main = false, main_stages = false, det_stages = false;
  for (int i = 0; i < m->nfuncs; i++) {
    const AttrList *a = &m->funcs[i]->attrs;
    const char *of = attr_str(a, "grad_of", NULL);
    if (!of || strcmp(of, fwd) != 0 || attr_get(a, "gather_of"))
      continue;
    if (!measured_kind(a))
      return false;
    const char *role = attr_str(a, "role", "");
    if (strcmp(role, "main") == 0) {
      main = info[i].wgmma; /* measured on sm_90a's wgmma kernels only */
      main_stages = stages_input(&info[i]);
    } else if (strcmp(role, "kv") == 0 || strcmp(role, "q") == 0 || strcmp(role, "dv") == 0) {
      det_stages = det_stages || stages_input(&info[i]);
    }
  }
  return main && (main_stages || !det_stages);
}
