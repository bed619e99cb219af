/* pipeline.c - the pass pipeline: FA1 schedule in, FA2 schedule out.
 *
 * One straight list, run in order on every kernel (a pass may add a kernel:
 * split-kv's combine kernel; later passes see it and leave it alone). After each pass the
 * verifier checks the IR and an error names the pass that broke it. Every
 * pass but differentiate and tiling only makes the kernel faster and may be
 * disabled; the others are written to work on whatever subset ran before
 * them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

static const Pass pipeline[] = {
    /* first: the derivative is part of the program's meaning, so every later
     * pass (and the copy small-batch-variant makes) sees ordinary ops only */
    {"differentiate", "expand grad ops (the backward's score') into ops computing the derivative",
     true, pass_differentiate},
    /* before tiling: the copy it adds is tiled like any kernel */
    {"small-batch-variant",
     "decode: a second split kernel on 128-key tiles for launches of one block per SM", false,
     pass_small_batch_variant},
    /* before tiling: likewise */
    {"long-rows-variant",
     "forward d64: a second kernel on warp-specialized 128 x 192 tiles for launches of long rows",
     false, pass_long_rows_variant},
    {"tiling", "choose tile sizes, warps and stages; make tile extents concrete", true,
     pass_tiling},
    /* right after tiling, which tiles main for it (128 keys, 8 warps) */
    {"group-dq",
     "atomic backward on 128-key tiles: dQ split by columns between the warpgroups (or by keys, summed), added once",
     false, pass_group_dq},
    /* after tiling (its rule reads the tiles), before the passes that
     * rewrite loops: the copy it adds is skipped and pipelined like any */
    {"split-dkdv", "backward: dV in a kernel of its own where dK and dV overflow the registers",
     false, pass_split_dkdv},
    {"reorder-q-outer",
     "Q tiles outer and parallel, K/V inner; O, l, m loop-carried instead of workspaces", false,
     pass_reorder_q_outer},
    {"defer-rescale", "normalize O by 1/l once after the K/V loop instead of every step", false,
     pass_defer_rescale},
    {"partition-warps", "split query rows across warps: no cross-warp reductions", false,
     pass_partition_warps},
    {"warp-split-kv",
     "rows too few to split (decode): warps take disjoint keys, own softmax state, one merge",
     false, pass_warp_split_kv},
    /* pack-gqa (decode only, like split-kv and unified-max) precedes
     * mask-skip, whose classification reasons about what a Q tile row is */
    {"pack-gqa", "decode: one Q tile for the query heads sharing a K/V head", false,
     pass_pack_gqa},
    {"mask-skip", "classify tiles by the mask: skip empty ones, mask only partial ones", false,
     pass_mask_skip},
    /* after mask-skip, whose run-time classification it replaces by lists
     * (and before pipeline, which prefetches the next listed step) */
    {"block-lists",
     "masks reading run-time tensors: a classifier kernel lists the kept tile pairs; visit only those",
     false, pass_block_lists},
    {"heavy-first", "causal forward: launch the longest Q tiles first (reverse blockIdx.x order)",
     false, pass_heavy_first},
    {"tiles-first",
     "causal atomic backward, one block an SM: the heaviest K/V tiles of all heads first (the tile index slowest)",
     false, pass_tiles_first},
    {"split-kv", "decode: split the KV cache among blocks, combine partials in a second kernel",
     false, pass_split_kv},
    {"unified-max", "decode: FlashDecoding++ softmax against a fixed max, exact fallback", false,
     pass_unified_max},
    /* before warp-specialize, whose producer then copies the staged
     * input tile like K and V (TMA rings) */
    {"stage-inputs",
     "forward: a bias tile read at the step's (q, k) is copied by TMA into shared memory instead of gathered",
     false, pass_stage_inputs},
    /* before pipeline: the loads it moves to the producer are then no
     * longer the consumers' to prefetch; before overlap-softmax, which
     * takes V from its ring a step late */
    {"warp-specialize",
     "forward and backward (past d64) on wgmma: a producer warpgroup loads the step's tiles into rings, the warps compute",
     false, pass_warp_specialize},
    /* before pipeline: V becomes a tile carried one step, which pipeline
     * leaves alone while it carries K */
    {"overlap-softmax",
     "forward on wgmma: issue S, then the step before's P V, and run the softmax under it",
     false, pass_overlap_softmax},
    /* after overlap-softmax, whose asynchronous matmuls it takes turns at */
    {"pingpong",
     "forward with warp roles: the two consumer warpgroups take turns issuing their matmuls",
     false, pass_pingpong},
    /* after overlap-softmax, whose async S it issues the gathers under */
    {"hoist-gathers",
     "issue a step's gathers of run-time inputs above the wait for S (loads under the matmul)",
     false, pass_hoist_gathers},
    {"pipeline", "software-pipeline the K/V loop: load the next K tile while this one is used",
     false, pass_software_pipeline},
    {"fold-scale", "move the softmax scale past masks and row max: codegen folds it into exp2",
     false, pass_fold_scale},
    /* last: it reorders what the passes before it matched on */
    {"async-matmuls",
     "backward with warp roles (d128's dQ, d256): issue a step's matmuls early, wait for each at first use",
     false, pass_async_matmuls},
    /* after async-matmuls, which matches the step's order */
    {"early-row-loads",
     "warp roles: a step's row-vector loads (the backward's LSE and delta) issued above its first ring_get",
     false, pass_early_row_loads},
    /* after every pass that rewrites a tile's loops: it only moves the
     * nest's body into per-CTA walks over the tiles */
    {"persistent",
     "forward with warp roles, persistent = 1 (the default): %nctas blocks each walk many tiles (unequal ones in mirrored pairs), rings kept across them",
     false, pass_persistent},
    /* after persistent, which gives the walk's Q its ring */
    {"release-early",
     "warp roles: a ring slot read only in the step loop (a walk's Q) is freed in the loop's last step, after its last read",
     false, pass_release_early},
};

enum { NPASSES = sizeof pipeline / sizeof pipeline[0] };

const Pass *pass_pipeline(int *n) {
  *n = NPASSES;
  return pipeline;
}

const Pass *pass_find(const char *name) {
  for (int i = 0; i < NPASSES; i++)
    if (name && strcmp(pipeline[i].name, name) == 0)
      return &pipeline[i];
  return NULL;
}

/* Comma-separated names of the passes opts runs (all but the disabled, or
 * opts->only), for the metadata's `passes` line. */
void pass_names_ran(const PassOptions *opts, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < NPASSES; i++) {
    bool off = opts->only ? strcmp(opts->only, pipeline[i].name) != 0
                          : pass_is_disabled(opts, pipeline[i].name);
    if (!off)
      used += snprintf(buf + used, used < len ? len - used : 0, "%s%s", used ? "," : "",
                       pipeline[i].name);
  }
}

void pass_options_init(PassOptions *o) {
  memset(o, 0, sizeof *o);
  o->target = "sm_90a";
  o->max_passes = -1;
}

static bool listed(const char *const *names, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (names[i] && strcmp(names[i], name) == 0)
      return true;
  return false;
}

bool pass_is_disabled(const PassOptions *opts, const char *name) {
  return opts && listed(opts->disabled, opts->ndisabled, name);
}

/* FLASHC_DUMP_IR=all or a comma-separated list of pass names. */
static bool env_dump(const char *name) {
  const char *e = getenv("FLASHC_DUMP_IR");
  if (!e || !*e)
    return false;
  if (strcmp(e, "all") == 0)
    return true;
  size_t n = strlen(name);
  for (const char *p = e; *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0)
      return true;
    if (!end)
      break;
    p = end + 1;
  }
  return false;
}

static bool wants_dump(const PassOptions *o, const char *name) {
  return o->print_after_all || listed(o->print_after, o->nprint_after, name) || env_dump(name);
}

/* Rejects unknown pass names and disabling a required pass. */
static int check_names(const PassOptions *o, FILE *diag) {
  const char *what[PASS_MAX_NAMES * 2 + 1];
  int n = 0;
  for (int i = 0; i < o->ndisabled; i++)
    what[n++] = o->disabled[i];
  for (int i = 0; i < o->nprint_after; i++)
    what[n++] = o->print_after[i];
  if (o->only)
    what[n++] = o->only;
  for (int i = 0; i < n; i++)
    if (!pass_find(what[i])) {
      fprintf(diag, "flashc: error: unknown pass '%s' (see --list-passes)\n", what[i]);
      return 1;
    }
  for (int i = 0; i < o->ndisabled; i++) {
    const Pass *p = pass_find(o->disabled[i]);
    if (p->required) {
      fprintf(diag, "flashc: error: pass '%s' is required (codegen needs it) and cannot be disabled\n",
              p->name);
      return 1;
    }
  }
  return 0;
}

static void find_grad(Op *op, void *ctx) {
  if (op->kind == OP_GRAD && !*(Op **)ctx)
    *(Op **)ctx = op;
}

/* After differentiate no grad op may remain: the later passes and codegen
 * do not know it. */
static bool grad_survived(Module *m, const Pass *p, FILE *diag) {
  if (p->run != pass_differentiate)
    return false;
  for (int i = 0; i < m->nfuncs; i++) {
    Op *g = NULL;
    func_walk(m->funcs[i], find_grad, &g);
    if (g) {
      fprintf(diag, "flashc: error: a grad op of '%s' (line %d) survived pass '%s' (a compiler bug)\n",
              m->funcs[i]->name, g->loc.line, p->name);
      return true;
    }
  }
  return false;
}

static int run_one(Module *m, const Pass *p, const PassOptions *o, FILE *diag) {
  for (int i = 0; i < m->nfuncs; i++)
    if (p->run(m, m->funcs[i], o, diag))
      return 1;
  if (grad_survived(m, p, diag))
    return 1;
  if (module_verify(m, p->name, diag) > 0) {
    fprintf(diag, "flashc: error: the IR is invalid after pass '%s' (a compiler bug)\n", p->name);
    return 1;
  }
  if (wants_dump(o, p->name)) {
    FILE *out = o->dump ? o->dump : stderr;
    fprintf(out, "// *** IR Dump After %s ***\n", p->name);
    module_print(out, m);
    fflush(out);
  }
  return 0;
}

int run_pipeline(Module *m, const PassOptions *opts) {
  PassOptions dflt;
  if (!opts) {
    pass_options_init(&dflt);
    opts = &dflt;
  }
  FILE *diag = opts->diag ? opts->diag : stderr;
  if (check_names(opts, diag))
    return 1;
  int ran = 0;
  for (int i = 0; i < NPASSES; i++) {
    const Pass *p = &pipeline[i];
    if (opts->only ? strcmp(opts->only, p->name) != 0
                   : listed(opts->disabled, opts->ndisabled, p->name))
      continue;
    if (opts->max_passes >= 0 && ran >= opts->max_passes)
      break;
    if (run_one(m, p, opts, diag))
      return 1;
    ran++;
  }
  return 0;
}
