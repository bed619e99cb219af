/* long_rows_variant.c - the `long-rows-variant` pass (forward, head dim 64):
 * adds a second forward kernel, @NAME_long, the same attention on
 * warp-specialized 128 x 192 tiles, that the runtime launches instead of
 * @NAME when seqlen_q and seqlen_k are both at least long_rows_min
 * (runtime/launch.c long_rows_kernel).
 *
 * Why: d64's default forward (64 x 128 tiles, 4 warps, several blocks an
 * SM, the FA2 pipeline) is the fastest schedule on short rows, but on long
 * ones a producer warpgroup feeding 128-row Q tiles over 192-key steps
 * (fewer, larger steps: the softmax's per-step work spread over 1.5x the
 * keys) is faster. H200, same process (docs/perf-log.md P115): non-causal
 * 0.85x / 0.93x at 512 / 1k rows, 1.06-1.12x from 2k; causal 0.73-0.91x up
 * to 2k, 0.99x at 4k, 1.05-1.07x from 8k. The crossovers are the
 * thresholds: 2048 rows without a mask, 8192 causal. A schedule is chosen
 * per spec at compile time, the sequence lengths only at launch, so the
 * module carries both kernels.
 *
 *   kernel @NAME(...) {...}                      the spec's kernel, untouched
 *   kernel @NAME_long(...) attributes {..., long_rows_of = "NAME",
 *       long_rows_min = 2048, sched_tile_q = 128, sched_tile_kv = 192,
 *       sched_warps = 8} {...}                   a copy
 *
 * The pass runs before tiling, so every later pass treats the copy like any
 * kernel (tiling takes its sched_* as a schedule; warp-specialize gives it
 * the producer, persistent the walk). It fires on a plain forward kernel
 * (no dropout copy, no companion) on sm_90a with wgmma, head dim and V's
 * head dim 64, mask none or causal, padded batches, no run-time inputs
 * (their block lists and tensor maps are made for the plain kernel's
 * tiles) and no schedule block (a user's schedule is the one compiled),
 * while warp-specialize is enabled. Disabled, the module has the one
 * kernel and every launch uses it.
 */
#include <stdio.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

enum { LONG_TILE_Q = 128, LONG_TILE_KV = 192, LONG_WARPS = 8 };

/* Does f read a run-time input (an %in_NAME argument)? */
static bool has_inputs(const Func *f) {
  for (int i = 0; i < f->nargs; i++)
    if (value_is_input_arg(f->args[i]))
      return true;
  return false;
}

/* Is f a kernel the variant is measured faster for, on long rows? */
static bool wants_variant(const Func *f, const PassOptions *opts) {
  const AttrList *a = &f->attrs;
  const char *mask = attr_str(a, "mask", "none");
  int d = (int)attr_int(a, "head_dim", 0);
  return strcmp(attr_str(a, "mode", "forward"), "forward") == 0 && !func_companion_of(f) &&
         !pass_user_schedule(f) &&
         !attr_get(a, "dropout") && d == 64 && attr_int(a, "v_head_dim", d) == 64 &&
         (strcmp(mask, "none") == 0 || strcmp(mask, "causal") == 0) &&
         strcmp(attr_str(a, "layout", "padded"), "padded") == 0 && !has_inputs(f) &&
         pass_targets_wgmma(f, opts) && !pass_is_disabled(opts, "warp-specialize");
}

int pass_long_rows_variant(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)diag;
  if (!wants_variant(f, opts) || module_copy_index(m, "long_rows_of", f->name) >= 0)
    return 0; /* not wanted, or made already */
  char name[256];
  snprintf(name, sizeof name, "%s_long", f->name);
  Func *c = func_clone(m, f, name);
  bool causal = strcmp(attr_str(&f->attrs, "mask", "none"), "causal") == 0;
  attr_set_str(m, &c->attrs, "long_rows_of", f->name);
  attr_set_int(m, &c->attrs, "long_rows_min", causal ? 8192 : 2048);
  attr_set_int(m, &c->attrs, "sched_tile_q", LONG_TILE_Q);
  attr_set_int(m, &c->attrs, "sched_tile_kv", LONG_TILE_KV);
  attr_set_int(m, &c->attrs, "sched_warps", LONG_WARPS);
  return 0;
}
