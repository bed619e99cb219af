/* small_batch_variant.c - the `small-batch-variant` pass (decode): adds a
 * second split kernel, @NAME_wide, the same attention on 128-key K/V tiles,
 * that the runtime launches instead of @NAME when few (batch, K/V head)
 * pairs leave one split block per SM (runtime/decode.c fa_decode_variant).
 *
 * Why: with one block of four warps per SM (batch 1, GQA 32/8: 8 pairs, 16
 * splits; MHA 32/32: 32 pairs, 4 splits) nothing hides a K/V step's own
 * chain (wait, barrier, QK^T, softmax, P V), and a 64-key step moves 32 KB.
 * On 128-key tiles each warp takes 32 keys a step (twice the independent
 * MMAs) and a block has 64 KB in flight: H100, docs/perf-log.md P24 and P27,
 * batch 1 GQA 8k 18.9 -> 18.0 us, 16k 31.6 -> 30.1, 64k 94.8 -> 92.4 (16
 * splits), MHA 8k 50.9 -> 50.3 (4 splits). Where two or more blocks share
 * an SM (larger batches) the 100 KB blocks lose 0.5-4%, so the 64-key
 * kernel stays the one for those launches and the spec compiles both.
 *
 *   kernel @NAME(...) {...}                     the spec's kernel, untouched
 *   kernel @NAME_wide(...) attributes {..., variant_of = "NAME",
 *                                      sched_tile_kv = 128} {...}   a copy
 *
 * The pass runs first, before tiling, so that every later pass treats the
 * copy like any kernel (tiling reads its sched_tile_kv as a schedule that
 * fills the rest automatically); split-kv gives it no combine kernel of its
 * own: @NAME_combine merges either kernel's partials (it does not depend on
 * the tiles), and the metadata of @NAME names the variant (wide_kernel ...).
 *
 * It fires on a decode kernel whose automatic schedule is the warp-split one
 * (one 16-row Q tile, warps splitting each tile's keys: tiling.c
 * tiling_decode_warp_split) and that the runtime splits by its rule: no
 * schedule block in the spec (a user's schedule is the one compiled), split
 * = auto (the variant runs only with the automatic split count), split-kv
 * and warp-split-kv enabled, at most 32 K/V heads. Disabled, the module has
 * the one kernel and every launch uses it.
 */
#include <stdio.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

enum { WIDE_TILE_KV = 128 };

int pass_small_batch_variant(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  (void)diag;
  const AttrList *a = &f->attrs;
  if (strcmp(attr_str(a, "mode", "forward"), "decode") != 0 || attr_get(a, "combine_of") ||
      attr_get(a, "variant_of") || attr_get(a, "tile_kv") || attr_int(a, "split", 0) != 0 ||
      pass_is_disabled(opts, "split-kv") || module_copy_index(m, "variant_of", f->name) >= 0 ||
      pass_user_schedule(f))
    return 0;
  /* The runtime picks the variant for at most sm_count / 4 pairs (33 on an
   * H100, 37 on a B200): with more K/V heads no batch qualifies. */
  if (attr_int(a, "kv_heads", 1) > 32 || !tiling_decode_warp_split(f, opts))
    return 0;
  char name[256];
  snprintf(name, sizeof name, "%s_wide", f->name);
  Func *w = func_clone(m, f, name);
  attr_set_str(m, &w->attrs, "variant_of", f->name);
  attr_set_int(m, &w->attrs, "sched_tile_kv", WIDE_TILE_KV);
  return 0;
}
