/* tiling.c - chooses the tile shape (Br x Bc), warps and pipeline stages and
 * makes every symbolic tile extent concrete.
 *
 * Choice. FlashAttention-1 (Algorithm 1, line 1) sizes blocks from the on-chip
 * memory M: Bc = ceil(M / 4d), Br = min(Bc, d). That rule assumes scalar code
 * and f32 tiles; on tensor cores the tile must be a multiple of the MMA shape
 * (16) and the accumulators live in registers, which are the scarcer budget.
 * So we start from the shapes FlashAttention-2 settled on for H100/A100-class
 * parts (d <= 64: 128 x 128; d <= 128: 128 x 64; d <= 256: 64 x 64; 4 warps,
 * 2 stages) and shrink (Bc first, as FA1's rule does when d grows, then the
 * stages, then Br) until the estimated shared memory and registers fit the
 * target. A spec's schedule block (kernel attrs sched_*) is taken as given
 * and refused with a reason when it cannot fit.
 *
 * Decode (mode = decode): see decode_sched.
 *
 * Rewrite: tile_size ops become const ops; every Br / Bc extent in every type
 * becomes the number; the kernel gets tile_q, tile_kv, warps, stages.
 */
#include <stdarg.h>
#include <string.h>

#include "passes/pass_util.h"
#include "passes/passes.h"

typedef struct TargetInfo {
  const char *name;
  long smem_per_block; /* bytes of shared memory one block may use */
  long regs_per_sm;
  int max_regs_per_thread;
} TargetInfo;

static const TargetInfo targets[] = {
    {"sm_80", 163L * 1024, 65536, 255},
    {"sm_90a", 227L * 1024, 65536, 255},
};

/* Registers a thread needs besides the S and O accumulators: row statistics
 * (m, l, alpha), addresses, loop counters, MMA operand fragments. */
enum { REG_OVERHEAD = 32 };

typedef struct Sched {
  int tile_q, tile_kv, warps, stages;
} Sched;

typedef struct Shape {
  int d, dv, elem_bytes;
} Shape;

static const TargetInfo *find_target(const char *name) {
  for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
    if (strcmp(targets[i].name, name) == 0)
      return &targets[i];
  return NULL;
}

/* An error about f's schedule block: at the block (source line and caret)
 * when the spec gave one, else at the kernel; "schedule for 'NAME'", plus
 * the kernel whose rule refused it where the block sets several (a
 * backward's, a forward's dropout twin). */
static void sched_error(FILE *diag, const Func *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void sched_error(FILE *diag, const Func *f, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *name = f->sched_name ? f->sched_name : f->name;
  if (strcmp(name, f->name) == 0)
    pass_report(diag, f, f->sched_loc, "error", "schedule for '%s': %s", name, msg);
  else
    pass_report(diag, f, f->sched_loc, "error", "schedule for '%s' (kernel %s): %s", name, f->name,
                msg);
}

long tiling_smem_limit(const char *target) {
  const TargetInfo *t = find_target(target ? target : "sm_90a");
  return t ? t->smem_per_block : targets[0].smem_per_block;
}

/* Q tile once, K and V tiles once per pipeline stage. */
static long smem_bytes(const Sched *s, const Shape *sh) {
  long q = (long)s->tile_q * sh->d * sh->elem_bytes;
  long kv = (long)s->tile_kv * (sh->d + sh->dv) * sh->elem_bytes;
  return q + (long)s->stages * kv;
}

/* f32 accumulators of S (tile_q x tile_kv) and O (tile_q x dv) spread over
 * the block's threads, plus the fixed overhead. */
static long regs_per_thread(const Sched *s, const Shape *sh) {
  long threads = 32L * s->warps;
  long acc_s = ((long)s->tile_q * s->tile_kv + threads - 1) / threads;
  long acc_o = ((long)s->tile_q * sh->dv + threads - 1) / threads;
  if (s->tile_q < 16 * s->warps) /* keys split over the warps: each holds all of O */
    acc_o = (long)s->tile_q * sh->dv / 32;
  return acc_s + acc_o + REG_OVERHEAD;
}

static bool fits(const Sched *s, const Shape *sh, const TargetInfo *t);

static Sched default_sched(const Shape *sh) {
  int d = sh->d > sh->dv ? sh->d : sh->dv;
  if (d <= 64)
    return (Sched){128, 128, 4, 2};
  if (d <= 128)
    return (Sched){128, 64, 4, 2};
  /* One stage: a second K buffer (33 KB at d = 256) leaves one block per
   * SM, which cost more than the prefetch gained (H100,
   * docs/perf-log.md P03). */
  return (Sched){64, 64, 4, 1};
}

/* Forward kernels: at d 256, FA2's 128 x 64 with 8 warps (16 query rows per
 * warp) and a K double buffer, where the shared memory holds it (Hopper:
 * 165 KB, one block of 8 warps per SM). H100, docs/perf-log.md P04: +5..9%
 * over 64 x 64, 4 warps, 1 stage without causal, -2..+3% with. Elsewhere
 * (sm_80's 163 KB) the 64 x 64 default. */
static Sched forward_sched(const Shape *sh, const TargetInfo *t, const PassOptions *opts) {
  Sched s = default_sched(sh);
  int d = sh->d > sh->dv ? sh->d : sh->dv;
  Sched big = {128, 64, 8, 2};
  /* Without partition-warps the warps split S's 64 columns (8 each), and P
   * as an MMA A operand needs 16 per warp: keep 4 warps then. */
  bool split_k = pass_is_disabled(opts, "partition-warps");
  /* Hopper's warpgroup MMA (codegen/compute_wgmma.c) wants 16 query rows per
   * warp (a warpgroup's 64-row slab is one wgmma), head dims in whole
   * 64-column blocks, and a wide N. Each matmul is waited for before the
   * softmax, so the tensor cores idle during it unless another block's
   * warps run: at d 64 one warpgroup per block (64 x 128, 56 KB, three
   * blocks per SM) beat two by 10-25%; at d 128 two warpgroups, 128 x 128,
   * won on long sequences and tied on short ones; at d 256 128 x 64 beat
   * every 64-row shape (H100 sweep, docs/perf-log.md P12). */
  bool wgmma_shape = strcmp(t->name, "sm_90a") == 0 && sh->elem_bytes == 2 && !split_k &&
                     sh->d % 64 == 0 && sh->dv % 64 == 0;
  if (wgmma_shape) {
    Sched h = d <= 64 ? (Sched){64, 128, 4, 2} : d <= 128 ? (Sched){128, 128, 8, 2} : big;
    if (fits(&h, sh, t))
      return h;
  }
  if (d > 128 && !split_k && fits(&big, sh, t))
    return big;
  return s;
}

/* Decode: a Q tile holds the live rows q_len_max x the GQA group (after
 * pack-gqa). When they fit one 16-row MMA slice (q_len 1 with groups of up
 * to 16, MHA up to q_len 16), 4 warps split each 64-key tile's keys
 * (warp-split-kv): every warp reads only its quarter of K and V from shared
 * memory and does a quarter of the MMAs. More rows: 16 per warp, up to 64
 * (FA2's row split; bigger groups take several Q tiles, whose blocks read the
 * same K/V through L2); also the schedule when warp-split-kv is disabled.
 * H100, docs/perf-log.md P19: a 16-row tile at q_len 16 with GQA 32/8
 * (four Q tiles) took 4x the 64-row tile's time, hence q_len_max. */
/* The backward's kernels (docs/backward.md): 64 x 64 tiles, four warps, 16
 * rows each of the tile they split (K/V rows for the K/V-outer kernels,
 * which hold dK and dV, Bc x d f32 each, in registers beside S^T and dP^T;
 * Q rows for the others; the K/V-outer kernel's dS K has Br rows, so Br
 * too is 16 x warps). Past head dim 128 dK and dV take 256 registers a
 * thread and spill: correct, not fast (a later schedule splits d). Two
 * stages: the next Q (K/V) tile loads under this one's matmuls; H100, d128
 * 8k (docs/perf-log.md P32): causal +13% (atomic) / +9% (deterministic),
 * non-causal flat; 32-row Q tiles for bwd_kv (no spills) measured flat;
 * 128-key bwd_kv tiles over 8 warps (two warpgroups sharing Q and dO) lost
 * 3-11% at d64 and moved d128 by -2..+6% (H200, docs/perf-log.md P127).
 * One stage where two do not fit the target's shared memory (d256 on sm_80). */
static bool kv_outer_role(const char *role) {
  return strcmp(role, "main") == 0 || strcmp(role, "kv") == 0;
}

/* Staged bytes of a backward kernel: the outer loop's two tiles once, the
 * inner loop's two per stage, dS^T's padded buffer (main). */
static long backward_smem(const Sched *s, const Shape *sh, const char *role) {
  long row = (long)(sh->d + sh->dv) * sh->elem_bytes;
  int outer = kv_outer_role(role) ? s->tile_kv : s->tile_q;
  int inner = kv_outer_role(role) ? s->tile_q : s->tile_kv;
  long ds = strcmp(role, "main") == 0 ? (long)s->tile_kv * (s->tile_q + 8) * 2 : 0;
  return outer * row + (long)s->stages * inner * row + ds;
}

/* Does f read run-time input tensors (`input NAME: ...`)? A mask over
 * them gets block lists per tile shape (block-lists), and another shape
 * for main would need classifiers of its own. */
static bool reads_inputs(const Func *f) {
  for (int i = 0; i < f->nargs; i++)
    if (value_is_input_arg(f->args[i]))
      return true;
  return false;
}

/* The atomic launch's kernel (main) on wgmma at d128, with group-dq on:
 * 128-key K/V tiles and eight warps, two warpgroups of 64 keys sharing
 * each 64-row Q and dO tile; dQ = dS K split by columns between them,
 * each multiplying all 128 keys for its 64 columns (passes/group_dq.c):
 * half the dQ bytes the L2 adds per FLOP of 64-key tiles, where the atomic
 * kernel was bound (docs/perf-log.md P79; +6-18%, P94). d64's halves
 * would be 32 columns, and its K split with a sum lost (P90). */
static bool grouped_dq(const Shape *sh, const char *role, const Func *f, const PassOptions *opts) {
  return strcmp(role, "main") == 0 && pass_targets_wgmma(f, opts) && !reads_inputs(f) &&
         !pass_is_disabled(opts, "group-dq") && sh->d == 128 && sh->dv % 64 == 0 &&
         sh->dv <= 128;
}

static Sched backward_sched(const Shape *sh, const char *role, const TargetInfo *t, bool grouped) {
  Sched s = {64, 64, 4, 2};
  if (grouped) {
    Sched g = {64, 128, 8, 2};
    if (backward_smem(&g, sh, role) <= t->smem_per_block)
      return g;
  }
  if (backward_smem(&s, sh, role) > t->smem_per_block)
    s.stages = 1;
  return s;
}

/* Shape rules of a backward schedule (docs/backward.md): the warps split
 * the outer tile's rows 16 each; the K/V-outer kernel's dS K has the Q
 * tile's rows, split the same way; reductions run over whole k16 steps. */
static const char *backward_shape_problem(const Sched *s, const char *role) {
  if (s->warps < 1 || s->warps > 16 || (s->warps & (s->warps - 1)))
    return "warps must be a power of two from 1 to 16";
  int rows = 16 * s->warps;
  if (kv_outer_role(role) && s->tile_kv % rows)
    return "tile kv must be a multiple of 16 x warps (the K/V-outer kernels split keys)";
  if ((!kv_outer_role(role) || strcmp(role, "main") == 0) && s->tile_q % rows)
    return "tile q must be a multiple of 16 x warps";
  if (s->tile_q % 16 || s->tile_kv % 16 || s->tile_q < 16 || s->tile_kv < 16)
    return "tiles must be positive multiples of 16";
  if (s->tile_q > 256 || s->tile_kv > 256)
    return "tiles larger than 256 are not supported";
  if (s->stages < 1 || s->stages > 4)
    return "stages must be from 1 to 4";
  return NULL;
}

static Sched decode_sched(const Shape *sh, int live_rows, const PassOptions *opts) {
  Sched s = default_sched(sh);
  if (live_rows <= 16 && !pass_is_disabled(opts, "warp-split-kv")) {
    s.tile_q = 16;
    s.tile_kv = 64;
    s.warps = 4;
    return s;
  }
  int rows = 16;
  while (rows < live_rows && rows < 64)
    rows *= 2;
  s.tile_q = rows;
  s.warps = rows / 16;
  return s;
}

/* The query rows a decode kernel's Q tile holds at most: q_len_max tokens
 * of each query head that shares one K/V head. */
static int decode_live_rows(const AttrList *a) {
  int heads = (int)attr_int(a, "heads", 1), kv = (int)attr_int(a, "kv_heads", 1);
  return (int)attr_int(a, "q_len_max", 16) * (kv > 0 ? heads / kv : 1);
}

bool tiling_decode_warp_split(const Func *f, const PassOptions *opts) {
  const AttrList *a = &f->attrs;
  Shape sh = {(int)attr_int(a, "head_dim", 128), 0, 2};
  sh.dv = (int)attr_int(a, "v_head_dim", sh.d);
  Sched s = decode_sched(&sh, decode_live_rows(a), opts);
  return s.tile_q == 16 && s.warps > 1;
}

static bool fits(const Sched *s, const Shape *sh, const TargetInfo *t) {
  return smem_bytes(s, sh) <= t->smem_per_block &&
         regs_per_thread(s, sh) <= t->max_regs_per_thread &&
         regs_per_thread(s, sh) * 32 * s->warps <= t->regs_per_sm;
}

/* Shrinks an automatic choice until it fits; false when even the smallest
 * (16 rows per warp, 16 keys, 1 stage) does not. */
static bool shrink_to_fit(Sched *s, const Shape *sh, const TargetInfo *t) {
  while (!fits(s, sh, t)) {
    if (s->tile_kv > 32)
      s->tile_kv /= 2;
    else if (s->stages > 1)
      s->stages--;
    else if (s->tile_q > 16 * s->warps)
      s->tile_q /= 2;
    else if (s->warps > 1) {
      s->warps /= 2;
      s->tile_q /= 2;
    } else if (s->tile_kv > 16)
      s->tile_kv /= 2;
    else
      return false;
  }
  return true;
}

/* Shape rules codegen relies on: MMA-sized tiles, whole 16-row slices per
 * warp for row partitioning. Returns a reason or NULL. */
static const char *shape_problem(const Sched *s, bool decode) {
  if (s->warps < 1 || s->warps > 16 || (s->warps & (s->warps - 1)))
    return "warps must be a power of two from 1 to 16";
  /* decode may give one 16-row tile to several warps that split the keys */
  bool key_split = decode && s->tile_q == 16 && s->warps > 1;
  if (key_split && s->tile_kv % (16 * s->warps))
    return "with one 16-row tile the warps split the keys: tile kv must be a multiple of 16 x "
           "warps";
  if (!key_split && (s->tile_q < 16 || s->tile_q % (16 * s->warps)))
    return "tile q must be a positive multiple of 16 x warps (16 query rows per warp)";
  if (s->tile_kv < 16 || s->tile_kv % 16)
    return "tile kv must be a positive multiple of 16";
  if (s->tile_q > 256 || s->tile_kv > 256)
    return "tiles larger than 256 are not supported";
  if (s->stages < 1 || s->stages > 4)
    return "stages must be from 1 to 4";
  return NULL;
}

/* A schedule whose tiles do not fit the target's shared memory (bytes). */
static int refuse_smem(FILE *diag, Func *f, const Sched *s, long bytes, const TargetInfo *t) {
  sched_error(diag, f,
              "tile %dx%d with %d stage%s needs %ld bytes of shared memory, the target has %ld "
              "(%s)",
              s->tile_q, s->tile_kv, s->stages, s->stages == 1 ? "" : "s", bytes,
              t->smem_per_block, t->name);
  return 1;
}

/* A schedule the kernel's shape rules refuse (why). */
static int refuse_shape(FILE *diag, Func *f, const Sched *s, const char *why) {
  sched_error(diag, f, "tile %dx%d, %d warps, %d stages: %s", s->tile_q, s->tile_kv, s->warps,
              s->stages, why);
  return 1;
}

static int refuse_budget(FILE *diag, Func *f, const Sched *s, const Shape *sh,
                         const TargetInfo *t) {
  long sm = smem_bytes(s, sh), rg = regs_per_thread(s, sh);
  if (sm > t->smem_per_block)
    return refuse_smem(diag, f, s, sm, t);
  sched_error(diag, f,
              "tile %dx%d with %d warps needs %ld registers per thread, the target allows %d (%s)",
              s->tile_q, s->tile_kv, s->warps, rg, t->max_regs_per_thread, t->name);
  return 1;
}

static int choose(Func *f, const PassOptions *opts, FILE *diag, Sched *out) {
  const char *tname = attr_str(&f->attrs, "target", opts && opts->target ? opts->target : "sm_90a");
  const TargetInfo *t = find_target(tname);
  if (!t) {
    pass_error(diag, f, "schedule for '%s': unknown target '%s' (sm_80 or sm_90a)", f->name, tname);
    return 1;
  }
  const char *dt = attr_str(&f->attrs, "dtype", "bf16");
  Shape sh = {(int)attr_int(&f->attrs, "head_dim", 128), 0, 2};
  sh.dv = (int)attr_int(&f->attrs, "v_head_dim", sh.d);
  if (strcmp(dt, "f32") == 0)
    sh.elem_bytes = 4;

  const char *mode = attr_str(&f->attrs, "mode", "forward");
  bool decode = strcmp(mode, "decode") == 0;
  bool backward = strcmp(mode, "backward") == 0;
  const char *role = attr_str(&f->attrs, "role", "");
  Sched auto_s = backward ? backward_sched(&sh, role, t, grouped_dq(&sh, role, f, opts))
                 : decode ? decode_sched(&sh, decode_live_rows(&f->attrs), opts)
                          : forward_sched(&sh, t, opts);
  /* Already tiled (a .tile input that went through this pass): the extents
   * in its types are that choice, so it stands. */
  Sched done = {(int)attr_int(&f->attrs, "tile_q", 0), (int)attr_int(&f->attrs, "tile_kv", 0),
                (int)attr_int(&f->attrs, "warps", 0), (int)attr_int(&f->attrs, "stages", 0)};
  if (done.tile_q && done.tile_kv && done.warps && done.stages) {
    *out = done;
    return 0;
  }
  Sched user = {(int)attr_int(&f->attrs, "sched_tile_q", 0),
                (int)attr_int(&f->attrs, "sched_tile_kv", 0),
                (int)attr_int(&f->attrs, "sched_warps", 0),
                (int)attr_int(&f->attrs, "sched_stages", 0)};
  bool given = user.tile_q || user.tile_kv || user.warps || user.stages;
  if (!given) {
    *out = auto_s;
    if (backward) /* backward_sched fits the target by construction */
      return 0;
    if (!shrink_to_fit(out, &sh, t))
      return refuse_budget(diag, f, out, &sh, t);
    return 0;
  }
  /* A partial schedule block: fill the rest from the automatic choice
   * (for the backward, the plain one: a user's tiles with group-dq's
   * eight warps would be a schedule the user did not ask for). */
  if (backward)
    auto_s = backward_sched(&sh, role, t, false);
  Sched s = {user.tile_q ? user.tile_q : auto_s.tile_q, user.tile_kv ? user.tile_kv : auto_s.tile_kv,
             user.warps ? user.warps : auto_s.warps, user.stages ? user.stages : auto_s.stages};
  if (backward) { /* schedule NAME_bwd { ... } (docs/backward.md) */
    const char *why = backward_shape_problem(&s, role);
    if (why)
      return refuse_shape(diag, f, &s, why);
    long sm = backward_smem(&s, &sh, role);
    if (sm > t->smem_per_block)
      return refuse_smem(diag, f, &s, sm, t);
    *out = s;
    return 0;
  }
  const char *why = shape_problem(&s, decode);
  if (why)
    return refuse_shape(diag, f, &s, why);
  if (!fits(&s, &sh, t))
    return refuse_budget(diag, f, &s, &sh, t);
  *out = s;
  return 0;
}

static Type concretize(Type t, void *ctx) {
  const Sched *s = ctx;
  if (t.kind != TYPE_TILE)
    return t;
  if (t.rows == DIM_BR) t.rows = s->tile_q;
  if (t.rows == DIM_BC) t.rows = s->tile_kv;
  if (t.cols == DIM_BR) t.cols = s->tile_q;
  if (t.cols == DIM_BC) t.cols = s->tile_kv;
  return t;
}

/* tile_size {dim = q|kv} -> const {value = N}, keeping the value's name. */
static void replace_tile_sizes(Module *m, Func *f, const Sched *s) {
  OpList l = collect_ops(f, OP_TILE_SIZE);
  for (int i = 0; i < l.n; i++) {
    Op *op = l.v[i];
    bool kv = strcmp(attr_str(&op->attrs, "dim", "q"), "kv") == 0;
    Builder b = builder_before(m, op);
    Value *c = build_index(&b, kv ? s->tile_kv : s->tile_q);
    c->name = op->results[0]->name;
    value_replace_all_uses(op->results[0], c);
    op_erase(op);
  }
  oplist_free(&l);
}

/* The stages of split-dkdv's dV kernel, a copy of a tiled K/V-outer kernel
 * f: its K tile once, its Q and dO tiles per stage (f16/bf16, 2 bytes an
 * element). One stage where only one lets two of its blocks share an SM
 * (each block also takes 1 KB the hardware reserves), else f's. H100 d256 (docs/perf-log.md P39): 96 KB
 * blocks two to an SM, +7-10% (full) and +1-5% (causal) over one 128 KB
 * block with two stages. */
int tiling_dv_kernel_stages(const Func *f) {
  const AttrList *a = &f->attrs;
  int stages = (int)attr_int(a, "stages", 1);
  const TargetInfo *t = find_target(attr_str(a, "target", "sm_90a"));
  if (!t || stages <= 1)
    return stages;
  long d = attr_int(a, "head_dim", 128), dv = attr_int(a, "v_head_dim", d);
  long outer = attr_int(a, "tile_kv", 64) * d * 2, inner = attr_int(a, "tile_q", 64) * (d + dv) * 2;
  long per_sm = t->smem_per_block + 1024;
  bool two = 2 * (outer + stages * inner + 1024) <= per_sm;
  bool two_at_one = 2 * (outer + inner + 1024) <= per_sm;
  return !two && two_at_one ? 1 : stages;
}

int pass_tiling(Module *m, Func *f, const PassOptions *opts, FILE *diag) {
  Sched s;
  if (choose(f, opts, diag, &s))
    return 1;
  replace_tile_sizes(m, f, &s);
  func_map_types(f, concretize, &s);
  attr_set_int(m, &f->attrs, "tile_q", s.tile_q);
  attr_set_int(m, &f->attrs, "tile_kv", s.tile_kv);
  attr_set_int(m, &f->attrs, "warps", s.warps);
  attr_set_int(m, &f->attrs, "stages", s.stages);
  return 0;
}
