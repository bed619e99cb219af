/* sema_schedule.c - the checks of a `schedule NAME { ... }` block: tile
 * sizes, warps, stages (docs/language.md, Schedules). Which attention a
 * schedule belongs to (NAME, NAME_bwd) is the file's business (sema.c). */
#include <string.h>

#include "frontend/sema_internal.h"

/* A schedule value: an integer literal. */
static bool sched_int(Sema *S, const char *what, const AstExpr *v, int *out) {
  if (!v->is_int) {
    diag_error(&S->diag, v->loc, "%s must be an integer; got %s", what, v->text);
    return false;
  }
  *out = (int)v->num;
  return true;
}

static void check_tile(Sema *S, const AstTileEntry *t, Schedule *sch,
                       const AstTileEntry **seen) {
  int which = strcmp(t->key, "q") == 0 ? 0 : strcmp(t->key, "kv") == 0 ? 1 : -1;
  if (which < 0) {
    diag_error(&S->diag, t->loc, "unknown tile dimension '%s'", t->key);
    diag_note(&S->diag, NOLOC, "tile dimensions are q and kv: tile q = 128, kv = 64;");
    return;
  }
  if (seen[which]) {
    diag_error(&S->diag, t->loc, "tile %s given twice", t->key);
    diag_note(&S->diag, seen[which]->loc, "first given here");
    return;
  }
  seen[which] = t;
  char what[TILE_WHAT_LEN];
  snprintf(what, sizeof what, "tile %s", t->key);
  int v;
  if (!sched_int(S, what, t->value, &v))
    return;
  if (v < 16 || v % 16 != 0 || v > 256) {
    diag_error(&S->diag, t->value->loc,
               "tile %s must be a multiple of 16 and at most 256; got %d", t->key, v);
    return;
  }
  if (which == 0)
    sch->tile_q = v;
  else
    sch->tile_kv = v;
}

/* schedule NAME { 'tile' q = N, kv = N;  warps = N;  stages = N;  overlap = 0|1;
 *                 producer = 0|1;  tma = 0|1;  pingpong = 0|1;  persistent = 0|1; } */
void sema_check_schedule(Sema *S, const AstItem *it, Schedule *sch) {
  static const char *const names[] = {"warps", "stages", "overlap", "producer", "tma",
                                      "pingpong", "persistent", NULL};
  const AstStmt *seen_f[7] = {0};
  const AstTileEntry *seen_t[2] = {0};
  sch->loc = sloc(S, it->loc);
  for (const AstStmt *s = it->stmts; s; s = s->next) {
    if (s->kind == ST_TILE) {
      for (const AstTileEntry *t = s->tiles; t; t = t->next)
        check_tile(S, t, sch, seen_t);
      continue;
    }
    int f = sema_name_index(s->name, names);
    if (f < 0) {
      diag_error(&S->diag, s->loc, "unknown schedule field '%s'", s->name);
      const char *all[] = {"warps",    "stages",     "overlap", "producer", "tma",
                           "pingpong", "persistent", "tile",    NULL};
      const char *best = diag_closest(s->name, all);
      if (best)
        diag_note(&S->diag, NOLOC, "did you mean '%s'?", best);
      else
        diag_note(&S->diag, NOLOC,
                  "a schedule has tile q = N, kv = N; warps = N; stages = N; overlap = 0|1; "
                  "producer = 0|1; tma = 0|1; pingpong = 0|1; persistent = 0|1;");
      continue;
    }
    if (seen_f[f]) {
      sema_duplicate(S, s, seen_f[f], s->name);
      continue;
    }
    seen_f[f] = s;
    int v;
    if (!sched_int(S, s->name, s->value, &v))
      continue;
    if (f == 0 && v != 1 && v != 2 && v != 4 && v != 8)
      diag_error(&S->diag, s->value->loc, "warps must be 1, 2, 4 or 8; got %d", v);
    else if (f == 1 && (v < 1 || v > 4))
      diag_error(&S->diag, s->value->loc, "stages must be between 1 and 4; got %d", v);
    else if (f >= 2 && v != 0 && v != 1)
      diag_error(&S->diag, s->value->loc, "%s must be 0 or 1; got %d", s->name, v);
    else if (f == 0)
      sch->warps = v;
    else if (f == 1)
      sch->stages = v;
    else if (f == 2)
      sch->overlap = v ? 1 : -1;
    else if (f == 3)
      sch->producer = v ? 1 : -1;
    else if (f == 4)
      sch->tma = v ? 1 : -1;
    else if (f == 5)
      sch->pingpong = v ? 1 : -1;
    else
      sch->persistent = v ? 1 : -1;
  }
}
