/* sema_file.c - a spec file as a whole: every attention block checked
 * (sema.c), their names unique (an open-addressing table: files may hold
 * many kernels), each schedule checked (sema_schedule.c) and attached to
 * its kernel by name (`schedule NAME_bwd` to NAME's backward), and the
 * SpecFile handed out and freed (fe_check, fe_free_spec).
 */
#include "frontend/sema_internal.h"

/* Name -> item table (open addressing): files may hold many kernels. */
typedef struct NameTable {
  const AstItem **slots;
  size_t cap;
} NameTable;

static size_t hash_str(const char *s) {
  size_t h = 1469598103934665603u;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211u;
  return h;
}

/* Returns the item already under it->name, or inserts it and returns NULL. */
static const AstItem *table_put(NameTable *t, const AstItem *it) {
  size_t i = hash_str(it->name) & (t->cap - 1);
  for (; t->slots[i]; i = (i + 1) & (t->cap - 1))
    if (strcmp(t->slots[i]->name, it->name) == 0)
      return t->slots[i];
  t->slots[i] = it;
  return NULL;
}

static int table_get(const NameTable *t, const char *name) {
  size_t i = hash_str(name) & (t->cap - 1);
  for (; t->slots[i]; i = (i + 1) & (t->cap - 1))
    if (strcmp(t->slots[i]->name, name) == 0)
      return (int)i;
  return -1;
}

/* The first Hopper-pipeline field a schedule gives (forward kernels' own),
 * NULL when it gives none. */
static const char *hopper_field(const Schedule *s) {
  return s->overlap      ? "overlap"
         : s->producer   ? "producer"
         : s->tma        ? "tma"
         : s->pingpong   ? "pingpong"
         : s->persistent ? "persistent"
                         : NULL;
}

/* Says that hopper_field's field is a forward kernel's. */
static void hopper_field_note(Sema *S) {
  diag_note(&S->diag, NOLOC, "overlap, producer, tma, pingpong and persistent (warp "
            "specialization) are forward kernels' fields");
}

/* schedule NAME_bwd { ... }: the schedule of NAME's backward kernels, when
 * NAME is an attention block with grad = true (docs/backward.md). Returns
 * false when `it` is not such a name (an ordinary schedule or an unknown
 * attention), having said nothing. */
static bool backward_schedule(Sema *S, const AstItem *it, const NameTable *names,
                              KernelSpec **by_slot) {
  static const char suffix[] = "_bwd";
  size_t n = strlen(it->name), ns = sizeof suffix - 1;
  if (n <= ns || strcmp(it->name + n - ns, suffix) != 0)
    return false;
  char *base = xstrdup(it->name);
  base[n - ns] = '\0';
  int slot = table_get(names, base);
  free(base);
  if (slot < 0)
    return false;
  Schedule sch = {0};
  sema_check_schedule(S, it, &sch);
  KernelSpec *k = by_slot[slot];
  if (!k)
    return true; /* the attention block had errors of its own */
  if (hopper_field(&sch)) {
    diag_error(&S->diag, it->name_loc, "'%s' in the backward's schedule", hopper_field(&sch));
    hopper_field_note(S);
  } else if (!k->grad) {
    diag_error(&S->diag, it->name_loc, "schedule for the backward of '%.*s', which has no backward",
               (int)(n - ns), it->name);
    diag_note(&S->diag, NOLOC, "write `grad = true;` in it to compile its backward");
  } else if (k->bwd_schedule.loc.line > 0) {
    diag_error(&S->diag, it->name_loc, "second schedule for the backward of '%.*s'",
               (int)(n - ns), it->name);
  } else {
    k->bwd_schedule = sch;
  }
  return true;
}

SpecFile *fe_check(const Ast *ast, int *nerrors) {
  Sema S = {0};
  if (!ast) {
    if (nerrors)
      *nerrors = 0;
    return NULL;
  }
  S.file = xstrdup(ast->file);
  S.diag = (Diag){.file = ast->file, .text = ast->text, .len = ast->len};
  SpecFile *sf = xcalloc(1, sizeof(SpecFile));
  sf->file = S.file;

  int nitems = 0;
  for (const AstItem *it = ast->items; it; it = it->next)
    nitems++;
  NameTable names = {0};
  names.cap = NAME_TABLE_MIN;
  while (names.cap < 2 * (size_t)nitems + 2)
    names.cap *= 2;
  names.slots = xcalloc(names.cap, sizeof(AstItem *));
  /* For each slot of `names`, the kernel built for that attention (or NULL). */
  KernelSpec **by_slot = xcalloc(names.cap, sizeof(KernelSpec *));
  const AstItem **sched_of = xcalloc(names.cap, sizeof(AstItem *));
  sf->kernels = xcalloc((size_t)nitems + 1, sizeof(KernelSpec *));

  for (const AstItem *it = ast->items; it && !S.diag.stopped; it = it->next) {
    if (it->kind != ITEM_ATTENTION)
      continue;
    const AstItem *prev = table_put(&names, it);
    if (prev) {
      diag_error(&S.diag, it->name_loc, "duplicate attention '%s'", it->name);
      diag_note(&S.diag, prev->name_loc, "first defined here");
      continue;
    }
    if (strlen(it->name) > SPEC_MAX_KERNEL_NAME) {
      diag_error(&S.diag, it->name_loc, "attention name is %zu characters long; at most %d",
                 strlen(it->name), SPEC_MAX_KERNEL_NAME);
      continue;
    }
    KernelSpec *k = sema_check_attention(&S, it);
    by_slot[table_get(&names, it->name)] = k;
    if (k)
      sf->kernels[sf->nkernels++] = k;
  }
  for (const AstItem *it = ast->items; it && !S.diag.stopped; it = it->next) {
    if (it->kind != ITEM_SCHEDULE)
      continue;
    Schedule sch = {0};
    int slot = table_get(&names, it->name);
    if (slot < 0 && backward_schedule(&S, it, &names, by_slot))
      continue;
    if (slot < 0) {
      diag_error(&S.diag, it->name_loc, "schedule for unknown attention '%s'",
                 it->name);
      const char *cands[SUGGEST_LETS + 1];
      int n = 0;
      for (const AstItem *a = ast->items; a && n < SUGGEST_LETS; a = a->next)
        if (a->kind == ITEM_ATTENTION)
          cands[n++] = a->name;
      cands[n] = NULL;
      const char *best = diag_closest(it->name, cands);
      if (best)
        diag_note(&S.diag, NOLOC, "did you mean '%s'?", best);
      sema_check_schedule(&S, it, &sch);
      continue;
    }
    sema_check_schedule(&S, it, &sch);
    if (sched_of[slot]) {
      diag_error(&S.diag, it->name_loc, "second schedule for attention '%s'",
                 it->name);
      diag_note(&S.diag, sched_of[slot]->name_loc, "first schedule is here");
      continue;
    }
    sched_of[slot] = it;
    if (by_slot[slot] && hopper_field(&sch) && by_slot[slot]->mode == MODE_DECODE) {
      diag_error(&S.diag, it->name_loc, "'%s' in a decode kernel's schedule", hopper_field(&sch));
      hopper_field_note(&S);
    }
    if (by_slot[slot])
      by_slot[slot]->schedule = sch;
  }
  free(names.slots);
  free(by_slot);
  free(sched_of);
  if (nerrors)
    *nerrors = S.diag.nerrors;
  /* A tree with syntax errors has holes (skipped statements, Error nodes):
   * it is checked for more messages, but never turned into kernels. */
  if (S.diag.nerrors || ast->parse_errors) {
    fe_free_spec(sf);
    return NULL;
  }
  return sf;
}

/* Ownership: a SpecFile owns its kernels array, each KernelSpec, its name,
 * its mask and score trees (plain trees without sharing: every use of a let
 * is a copy), and `file`, the name every SrcLoc.file points to. Nothing
 * points into the Ast, which may be freed first. */
void fe_free_spec(SpecFile *spec) {
  if (!spec)
    return;
  for (int i = 0; i < spec->nkernels; i++) {
    sema_free_kernel(spec->kernels[i]);
  }
  free(spec->kernels);
  free(spec->file);
  free(spec);
}
