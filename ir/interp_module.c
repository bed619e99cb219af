/* interp_module.c - every kernel of a module in order, on shared bindings
 * (interp.h).
 */
#include "ir/interp_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_BINDINGS = 64 };

int interp_run_module(const Module *m, const InterpBinding *tensors, int ntensors,
                      const InterpSizes *sz, const InterpOptions *o, char *err, size_t errlen) {
  InterpBinding bs[MAX_BINDINGS];
  int nb = 0, nown = 0, rc = 0;
  if (!m || !sz || ntensors > MAX_BINDINGS / 2) {
    if (err && errlen)
      snprintf(err, errlen, "interp: no module or too many bindings");
    return -1;
  }
  for (int i = 0; i < ntensors; i++)
    bs[nb++] = tensors[i];
  int first_own = nb;
  /* o_part / lse_part travel between kernels: allocate them here, once. */
  for (int fi = 0; fi < m->nfuncs && rc == 0; fi++)
    for (int i = 0; i < m->funcs[fi]->nargs && rc == 0; i++) {
      const Value *a = m->funcs[fi]->args[i];
      int at;
      bool shared = a->name && (strcmp(a->name, "o_part") == 0 || strcmp(a->name, "lse_part") == 0);
      if (a->type.kind != TYPE_TENSOR || !shared || interp_find_binding(bs, nb, a->name, &at))
        continue;
      if (nb == MAX_BINDINGS || !interp_alloc_arg(NULL, a, sz, &bs[nb])) {
        if (err && errlen)
          snprintf(err, errlen, "interp: out of memory");
        rc = -1;
        break;
      }
      nb++, nown++;
    }
  for (int fi = 0; fi < m->nfuncs && rc == 0; fi++)
    rc = interp_run_sizes(m->funcs[fi], bs, nb, sz, o, err, errlen);
  for (int i = first_own; i < first_own + nown; i++)
    free(bs[i].data);
  return rc;
}
