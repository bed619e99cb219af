/* interp_roles.c - the interpreter's warp specialization (interp.h; ir.h
 * "Warp specialization"): ring, warp_roles, ring_put, ring_get,
 * ring_release.
 *
 * The roles run one after the other, the producer region to completion and
 * then the consumer region, so a ring needs no slots: it is a map from step
 * to tile, fresh each time its ring op runs. A put stores a copy of its
 * tile, a get copies it out, a release frees it. The protocol the GPU's
 * barriers rely on is checked as it runs: a ring's puts are consecutive
 * steps, a step is put once, got only after its put and before its
 * release, released once after a get; and
 * when the consumer region ends, every step put was released (on the GPU a
 * step put and never released leaves the producer waiting for its slot, or
 * exiting with the copy in flight).
 */
#include "ir/interp_internal.h"

#include <stdlib.h>
#include <string.h>

/* How far apart a ring's steps may be: steps count from 0 (or a loop's
 * lower bound) per ring, so a wider span is a corrupt step, not a ring. */
enum { MAX_SPAN = 1 << 24 };

typedef enum StepState { STEP_NONE, STEP_PUT, STEP_GOT, STEP_RELEASED } StepState;

typedef struct RingStep {
  double *t; /* the tile put, until it is released */
  int rows, cols;
  StepState state;
} RingStep;

/* Steps lo .. lo + n - 1 (those between the ones used are STEP_NONE);
 * the last step put (puts: how many). */
struct RtRing {
  int64_t lo, n, cap;
  RingStep *steps;
  int64_t last_put, puts;
};

static void ring_clear(RtRing *r) {
  for (int64_t i = 0; i < r->n; i++)
    free(r->steps[i].t);
  r->n = 0;
}

void interp_free_ring(RtRing *r) {
  if (!r)
    return;
  ring_clear(r);
  free(r->steps);
  free(r);
}

/* Widens r's steps to lo .. hi - 1 (which holds the current ones); false
 * (failed) when out of memory. */
static bool ring_widen(Interp *I, const Op *op, RtRing *r, int64_t lo, int64_t hi) {
  int64_t n = hi - lo, shift = r->n ? r->lo - lo : 0;
  if (n > r->cap) {
    int64_t cap = r->cap * 2 > n ? r->cap * 2 : n < 16 ? 16 : n;
    RingStep *s = realloc(r->steps, sizeof *s * (size_t)cap);
    if (!s) {
      interp_fail(I, op, "out of memory");
      return false;
    }
    r->steps = s;
    r->cap = cap;
  }
  memmove(r->steps + shift, r->steps, sizeof *r->steps * (size_t)r->n);
  memset(r->steps, 0, sizeof *r->steps * (size_t)shift);
  memset(r->steps + shift + r->n, 0, sizeof *r->steps * (size_t)(n - shift - r->n));
  r->lo = lo;
  r->n = n;
  return true;
}

/* The entry of `step` in r; NULL when r has none (grow: one is made, NULL
 * only after a failure). */
static RingStep *ring_step(Interp *I, const Op *op, RtRing *r, int64_t step, bool grow) {
  if (r->n && step >= r->lo && step < r->lo + r->n)
    return &r->steps[step - r->lo];
  if (!grow)
    return NULL;
  int64_t lo = r->n && r->lo < step ? r->lo : step;
  int64_t hi = r->n && r->lo + r->n > step + 1 ? r->lo + r->n : step + 1;
  if (hi - lo > MAX_SPAN) {
    interp_fail(I, op, "step %lld is more than %d steps from the ring's others", (long long)step,
                MAX_SPAN);
    return NULL;
  }
  return ring_widen(I, op, r, lo, hi) ? &r->steps[step - r->lo] : NULL;
}

/* The ring (operand 0) and the step (operand 1) of a put, get or release;
 * NULL (failed) when they are not a ring and an index scalar. */
static RtRing *ring_operands(Interp *I, const Op *op, int64_t *step) {
  if (op->noperands < 2 || !interp_val(I, op->operands[0])->ring) {
    interp_fail(I, op, "operand 0 must be a ring");
    return NULL;
  }
  const RtVal *s = interp_val(I, op->operands[1]);
  if (s->tile) {
    interp_fail(I, op, "the step must be a scalar");
    return NULL;
  }
  *step = (int64_t)s->s;
  return interp_val(I, op->operands[0])->ring;
}

/* %r = ring {stages}: a fresh, empty map (stages is the GPU's business). */
void interp_exec_ring(Interp *I, const Op *op) {
  RtVal *v = interp_val(I, op->results[0]);
  if (!v->ring && !(v->ring = calloc(1, sizeof *v->ring))) {
    interp_fail(I, op, "out of memory");
    return;
  }
  ring_clear(v->ring);
  v->ring->puts = 0;
  v->tile = false;
}

/* ring_put %r, %step, %t: a copy of t becomes the step's tile. */
void interp_exec_ring_put(Interp *I, const Op *op) {
  int64_t step;
  RtRing *r = ring_operands(I, op, &step);
  if (!r || op->noperands < 3)
    return;
  const RtVal *t = interp_val(I, op->operands[2]);
  Type rt = op->operands[0]->type;
  if (!interp_need_tile(I, op, t, "the tile put"))
    return;
  if (t->rows != rt.rows || t->cols != rt.cols) {
    interp_fail(I, op, "the tile put is %d x %d, the ring holds %d x %d", t->rows, t->cols, rt.rows,
                rt.cols);
    return;
  }
  RingStep *s = ring_step(I, op, r, step, true);
  if (!s)
    return;
  if (s->state != STEP_NONE) {
    interp_fail(I, op, "step %lld was put already", (long long)step);
    return;
  }
  /* the GPU's slot and barrier phase follow the step (step mod stages,
   * step / stages): a skipped step leaves the producer and the consumers
   * on different phases */
  if (r->puts && step != r->last_put + 1) {
    interp_fail(I, op, "step %lld put after step %lld: a ring's puts are consecutive steps",
                (long long)step, (long long)r->last_put);
    return;
  }
  r->last_put = step;
  r->puts++;
  size_t n = (size_t)t->rows * (size_t)t->cols;
  if (!(s->t = malloc(sizeof(double) * (n ? n : 1)))) {
    interp_fail(I, op, "out of memory");
    return;
  }
  memcpy(s->t, t->t, sizeof(double) * n);
  s->rows = t->rows;
  s->cols = t->cols;
  s->state = STEP_PUT;
}

/* Is this get or release of step -1 of a ring {zero = 1}: a tile of zeros,
 * never put, nothing to free (overlap-softmax's P V before the first step). */
static bool zero_step(const Op *op, int64_t step) {
  const Op *ring = op->operands[0]->def;
  return step == -1 && ring && attr_int(&ring->attrs, "zero", 0) == 1;
}

/* %t = ring_get %r, %step: the step's tile, put and not yet released. */
void interp_exec_ring_get(Interp *I, const Op *op) {
  int64_t step;
  RtRing *r = ring_operands(I, op, &step);
  if (!r || op->nresults != 1)
    return;
  if (zero_step(op, step)) {
    Type rt = op->operands[0]->type;
    RtVal *out = interp_val(I, op->results[0]);
    if (interp_set_tile(I, out, rt.rows, rt.cols))
      memset(out->t, 0, sizeof(double) * (size_t)rt.rows * (size_t)rt.cols);
    return;
  }
  RingStep *s = ring_step(I, op, r, step, false);
  if (!s || s->state == STEP_NONE) {
    interp_fail(I, op, "step %lld never put", (long long)step);
    return;
  }
  if (s->state == STEP_RELEASED) {
    interp_fail(I, op, "step %lld already released", (long long)step);
    return;
  }
  RtVal *out = interp_val(I, op->results[0]);
  if (!interp_set_tile(I, out, s->rows, s->cols))
    return;
  memcpy(out->t, s->t, sizeof(double) * (size_t)s->rows * (size_t)s->cols);
  s->state = STEP_GOT;
}

/* ring_release %r, %step: the step's tile, got before, is freed; with
 * last_step only in its loop's last iteration (interp_release_after_loop
 * frees it when the loop ran none). */
static void release_step(Interp *I, const Op *op);

void interp_exec_ring_release(Interp *I, const Op *op) {
  if (attr_int(&op->attrs, "last_step", 0) == 1) {
    const Op *loop = op->parent->parent_op; /* the verifier's: a sequential for */
    int64_t iv = (int64_t)interp_val(I, op->parent->args[0])->s;
    int64_t hi = (int64_t)interp_val(I, loop->operands[1])->s;
    if (iv != hi - 1)
      return;
  }
  release_step(I, op);
}

void interp_release_after_loop(Interp *I, const Op *loop) {
  for (const Op *o = loop->regions[0]->first; o && !I->failed; o = o->next)
    if (o->kind == OP_RING_RELEASE && attr_int(&o->attrs, "last_step", 0) == 1)
      release_step(I, o);
}

static void release_step(Interp *I, const Op *op) {
  int64_t step;
  RtRing *r = ring_operands(I, op, &step);
  if (!r || zero_step(op, step))
    return;
  RingStep *s = ring_step(I, op, r, step, false);
  if (s && s->state == STEP_RELEASED) {
    interp_fail(I, op, "step %lld already released", (long long)step);
    return;
  }
  if (!s || s->state != STEP_GOT) {
    interp_fail(I, op, "step %lld released but never got", (long long)step);
    return;
  }
  free(s->t);
  s->t = NULL;
  s->state = STEP_RELEASED;
}

typedef struct Leftover {
  Interp *I;
  const Op *roles;
} Leftover;

/* For each put of the producer region: its ring holds no step put or got
 * and not released. */
static void check_released(Op *op, void *ctx) {
  Leftover *c = ctx;
  if (op->kind != OP_RING_PUT || c->I->failed)
    return;
  const Value *rv = op->operands[0];
  const RtRing *r = interp_val(c->I, rv)->ring;
  for (int64_t i = 0; r && i < r->n; i++)
    if (r->steps[i].state == STEP_PUT || r->steps[i].state == STEP_GOT) {
      interp_fail(c->I, c->roles, "ring %%%s: step %lld was put but never released",
                  rv->name ? rv->name : "?", (long long)(r->lo + i));
      return;
    }
}

/* warp_roles: the producer region, then the consumer region. */
void interp_exec_warp_roles(Interp *I, const Op *op) {
  if (op->nregions != 2) {
    interp_fail(I, op, "malformed warp_roles");
    return;
  }
  for (int r = 0; r < 2; r++) {
    const Op *term = interp_exec_block(I, op->regions[r]);
    if (I->failed || !interp_check_yield(I, op, term, 0))
      return;
  }
  Leftover c = {I, op};
  block_walk(op->regions[0], check_released, &c);
}
