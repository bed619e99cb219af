/* split_dkdv.c - the `split-dkdv` pass (backward): when a K/V-outer
 * kernel's dK and dV accumulators would not fit the registers, moves dV into
 * a kernel of its own, @NAME_bwd_dv, that the runtime launches beside it.
 *
 * Why: the K/V-outer kernels (NAME_bwd, NAME_bwd_kv) keep dK (Bc x d) and
 * dV (Bc x dv) in f32 registers, split by rows over the warps; at d = dv =
 * 256 with 64-key tiles and four warps that is 256 registers a thread
 * before S^T, dP^T and the operands, and ptxas spills ~1.9 KB a thread. Two
 * kernels that each hold one accumulator (128 registers) do not spill; the
 * dV kernel recomputes S^T (one more matmul of the seven or five of a tile
 * pair) and needs neither V nor D nor dP^T. H100, docs/perf-log.md P37: d256
 * 8k bwd_kv 13.4 ms -> dK kernel 5.0 + dV kernel 3.6 ms.
 *
 *   kernel @NAME_bwd_kv(...) {...}          dK (and, role main, dQ) only:
 *       attributes {..., dv_kernel = "NAME_bwd_dv"}   its dV store, and
 *                                                     all that fed only it,
 *                                                     removed
 *   kernel @NAME_bwd_dv(...) attributes {..., role = dv} {...}
 *                                           a copy keeping only the dV store
 *
 * The dead parts go with dce_func (pass_util.c), which sees through the
 * loops: the dV accumulator a loop carries, its init and the matmul feeding
 * it; in the copy dP^T, dS^T, D and the V tile. The copy takes one
 * pipeline stage where that lets two of its blocks share an SM
 * (tiling_dv_kernel_stages: d256, P39). The copy is made from the
 * first K/V-outer kernel the pass meets (the atomic launch's NAME_bwd takes
 * its dQ stores out; bwd_kv has none) and serves both launches.
 *
 * It fires after tiling, on the backward's K/V-outer kernels when dK and dV
 * together take more than 128 f32 registers a thread ((d + dv) x tile_kv /
 * (32 x warps)): d = dv = 256 on the default 64 x 64 tiles, four warps. At
 * d 128 (exactly 128) the split measured slower (dK 4.18 + dV 2.51 ms
 * against 4.59 for both at 8k, P37). Disabled, every launch runs the
 * kernels that make dK and dV together.
 */
#include <stdio.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

/* f32 registers a thread that dK and dV take beyond which they split. */
enum { SPLIT_ACC_REGS = 128 };

static bool kv_outer(const Func *f) {
  const char *role = attr_str(&f->attrs, "role", "");
  return strcmp(attr_str(&f->attrs, "mode", "forward"), "backward") == 0 &&
         (strcmp(role, "main") == 0 || strcmp(role, "kv") == 0);
}

/* f32 registers a thread for the dK and dV tiles of f's schedule. */
static long acc_regs(const Func *f) {
  const AttrList *a = &f->attrs;
  long d = attr_int(a, "head_dim", 128), dv = attr_int(a, "v_head_dim", d);
  long tile_kv = attr_int(a, "tile_kv", 64), warps = attr_int(a, "warps", 4);
  return (d + dv) * tile_kv / (32 * (warps > 0 ? warps : 1));
}

/* Erases f's stores into its argument `name` (none when it has no such). */
static void erase_stores_to(Func *f, const char *name) {
  Value *t = func_arg(f, name);
  OpList l = collect_ops(f, OP_STORE);
  for (int i = 0; i < l.n; i++)
    if (t && l.v[i]->operands[0] == t)
      op_erase(l.v[i]);
  oplist_free(&l);
}

static Func *find_func(Module *m, const char *name) {
  for (int i = 0; i < m->nfuncs; i++)
    if (strcmp(m->funcs[i]->name, name) == 0)
      return m->funcs[i];
  return NULL;
}

int pass_split_dkdv(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)opts;
  (void)diag;
  if (!kv_outer(f) || attr_get(&f->attrs, "dv_kernel") || acc_regs(f) <= SPLIT_ACC_REGS)
    return 0;
  char name[256];
  snprintf(name, sizeof name, "%s_bwd_dv", attr_str(&f->attrs, "grad_of", "attn"));
  if (!find_func(m, name)) {
    Func *dv = func_clone(m, f, name);
    attr_set_word(m, &dv->attrs, "role", "dv");
    /* no V tile: its blocks may fit two to an SM with fewer stages */
    attr_set_int(m, &dv->attrs, "stages", tiling_dv_kernel_stages(f));
    erase_stores_to(dv, "dk");
    erase_stores_to(dv, "dq_acc");
    dce_func(dv);
    cse_block(dv->body);
  }
  erase_stores_to(f, "dv");
  dce_func(f);
  attr_set_str(m, &f->attrs, "dv_kernel", name);
  return 0;
}
