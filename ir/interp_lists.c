/* interp_lists.c - a kernel that visits block lists (attribute block_list,
 * docs/abi.md) run without them: its classifier kernels of the same module
 * build the lists first (interp.h).
 */
#include "ir/interp_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A kernel that visits block lists (attribute block_list, docs/abi.md)
 * and was given none: its classifier kernel (of the same module) runs
 * first on the same bindings, into fresh NaN-poisoned lists (a read of an
 * entry it never wrote fails the gather), after its classes kernel (phase
 * 1, attribute classes) when it has one, and the kernel gets them in
 * lists[0..1]. Returns 0, or -1 with err set. */
static int run_classifier(const Func *f, const InterpBinding *bs, int nb, const InterpSizes *sz,
                          const InterpOptions *o, char *err, size_t errlen,
                          InterpBinding lists[2]) {
  const char *name = attr_str(&f->attrs, "block_list", "");
  const Func *c = NULL;
  for (int i = 0; f->module && i < f->module->nfuncs; i++)
    if (strcmp(f->module->funcs[i]->name, name) == 0)
      c = f->module->funcs[i];
  const Value *la = c ? func_arg((Func *)c, "blk_list") : NULL;
  const Value *ca = c ? func_arg((Func *)c, "blk_count") : NULL;
  if (!la || !ca) {
    snprintf(err, errlen, "interp: %s: no classifier kernel '%s' with block lists", f->name, name);
    return -1;
  }
  if (!interp_alloc_arg(c, la, sz, &lists[0]) || !interp_alloc_arg(c, ca, sz, &lists[1])) {
    free(lists[0].data);
    snprintf(err, errlen, "interp: out of memory");
    return -1;
  }
  InterpBinding *all = malloc(sizeof(InterpBinding) * (size_t)(nb + 2));
  if (!all) {
    free(lists[0].data), free(lists[1].data);
    snprintf(err, errlen, "interp: out of memory");
    return -1;
  }
  for (int i = 0; i < nb; i++)
    all[i] = bs[i];
  all[nb] = lists[0], all[nb + 1] = lists[1];
  /* A two-phase classifier: its classes kernel (phase 1) writes every
   * entry of each row's range, then it (phase 2) compacts them. */
  const char *classes = attr_str(&c->attrs, "classes", NULL);
  const Func *p1 = NULL;
  for (int i = 0; classes && f->module && i < f->module->nfuncs; i++)
    if (strcmp(f->module->funcs[i]->name, classes) == 0)
      p1 = f->module->funcs[i];
  int rc = 0;
  if (classes && !p1) {
    snprintf(err, errlen, "interp: %s: no classes kernel '%s'", name, classes);
    rc = -1;
  }
  if (!rc && p1)
    rc = interp_run_sizes(p1, all, nb + 2, sz, o, err, errlen);
  if (!rc)
    rc = interp_run_sizes(c, all, nb + 2, sz, o, err, errlen);
  free(all);
  if (rc) {
    free(lists[0].data), free(lists[1].data);
  }
  return rc;
}

int interp_run_with_lists(const Func *f, const InterpBinding *tensors, int ntensors,
                          const InterpSizes *sz, const InterpOptions *o, char *err,
                          size_t errlen) {
  InterpBinding lists[2] = {{0}};
  if (run_classifier(f, tensors, ntensors, sz, o, err, errlen, lists))
    return -1;
  InterpBinding *all = malloc(sizeof(InterpBinding) * (size_t)(ntensors + 2));
  int rc = -1;
  if (all) {
    for (int i = 0; i < ntensors; i++)
      all[i] = tensors[i];
    all[ntensors] = lists[0], all[ntensors + 1] = lists[1];
    rc = interp_run_sizes(f, all, ntensors + 2, sz, o, err, errlen);
  } else {
    snprintf(err, errlen, "interp: out of memory");
  }
  free(all);
  free(lists[0].data), free(lists[1].data);
  return rc;
}
