/* cg_lowerer.c - layer 0: the Lowerer's allocations, value map,
 * diagnostics and scalar values (cg_lowerer.h). */
#include "codegen/cg_lowerer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- memory, map */

void *lw_alloc(Lowerer *L, size_t size) {
  void *p = calloc(1, size ? size : 1);
  if (!p) {
    fputs("flashc: out of memory\n", stderr);
    abort();
  }
  if (L->nallocs == L->capallocs) {
    L->capallocs = L->capallocs ? 2 * L->capallocs : 256;
    L->allocs = realloc(L->allocs, sizeof(void *) * (size_t)L->capallocs);
    if (!L->allocs)
      abort();
  }
  L->allocs[L->nallocs++] = p;
  return p;
}

static size_t hash_ptr(const void *p, int cap) {
  uintptr_t x = (uintptr_t)p;
  x ^= x >> 17;
  x *= 0x9E3779B97F4A7C15ull;
  return (size_t)(x >> 7) & (size_t)(cap - 1);
}

static void map_grow(Lowerer *L) {
  int oldcap = L->map_cap;
  const Value **ok = L->keys;
  CgVal **ov = L->vals;
  L->map_cap = oldcap ? oldcap * 2 : 1024;
  L->keys = calloc((size_t)L->map_cap, sizeof *L->keys);
  L->vals = calloc((size_t)L->map_cap, sizeof *L->vals);
  if (!L->keys || !L->vals)
    abort();
  L->map_n = 0;
  for (int i = 0; i < oldcap; i++)
    if (ok[i])
      lw_set(L, ok[i], ov[i]);
  free(ok);
  free(ov);
}

void lw_set(Lowerer *L, const Value *v, CgVal *cv) {
  if (2 * (L->map_n + 1) > L->map_cap)
    map_grow(L);
  size_t i = hash_ptr(v, L->map_cap);
  while (L->keys[i] && L->keys[i] != v)
    i = (i + 1) & (size_t)(L->map_cap - 1);
  if (!L->keys[i])
    L->map_n++;
  L->keys[i] = v;
  L->vals[i] = cv;
}

CgVal *lw_get(Lowerer *L, const Value *v) {
  if (L->map_cap) {
    size_t i = hash_ptr(v, L->map_cap);
    while (L->keys[i]) {
      if (L->keys[i] == v)
        return L->vals[i];
      i = (i + 1) & (size_t)(L->map_cap - 1);
    }
  }
  return NULL;
}

/* ---------------------------------------------------------- diagnostics */

void lw_set_loc(Lowerer *L, const Op *op) {
  const SrcLoc *s = &op->loc;
  if (s->file && s->line > 0)
    cg_builder_set_loc(&L->b, s->file, s->line, s->col);
  else if (L->f->loc.file)
    cg_builder_set_loc(&L->b, L->f->loc.file, L->f->loc.line, L->f->loc.col);
}

void lw_error(Lowerer *L, const Op *op, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (op)
    lw_set_loc(L, op);
  cg_context_error(L->cc, L->b.loc, "codegen: %s%s%s", op ? op_name(op->kind) : "",
                   op ? ": " : "", msg);
  L->failed = true;
}

/* ------------------------------------------------------------- values */

MlirType lw_elem_type(Lowerer *L, ElemType e) {
  switch (e) {
  case ELEM_I1: return L->b.i1;
  case ELEM_INDEX: return L->b.i64;
  case ELEM_F16: return L->b.f16;
  case ELEM_BF16: return L->b.bf16;
  case ELEM_F32: return L->b.f32;
  case ELEM_I32: return L->b.i32; /* tensors only (cache_seqlens, block_table) */
  case ELEM_U32: return L->b.i32; /* values: random-number bits */
  case ELEM_NONE: break;
  }
  return L->b.f32;
}

MlirType lw_val_type(Lowerer *L, Type t) {
  if (t.kind == TYPE_TILE && t.elem == ELEM_INDEX)
    return L->b.i32; /* see compute_elementwise.c: ew_element */
  return lw_elem_type(L, t.elem);
}

CgVal *lw_scalar(Lowerer *L, Type t, MlirValue v) {
  CgVal *cv = lw_alloc(L, sizeof *cv);
  cv->kind = CV_SCALAR;
  cv->type = t;
  cv->v = v;
  cv->async_seq = -1;
  return cv;
}

MlirValue lw_scalar_operand(Lowerer *L, const Op *op, int i) {
  CgVal *v = lw_get(L, op->operands[i]);
  if (v->kind != CV_SCALAR) {
    lw_error(L, op, "operand %d must be a scalar", i);
    return (MlirValue){NULL};
  }
  return v->v;
}

void lw_free_all(Lowerer *L) {
  for (int i = 0; i < L->nallocs; i++)
    free(L->allocs[i]);
  free(L->allocs);
  free(L->keys);
  free(L->vals);
  free(L);
}

void lw_bind_param(Lowerer *L, const char *name, MlirValue v, bool ptr) {
  for (int i = 0; i < L->nparam; i++) /* a rebinding (mem_varlen.c) */
    if (L->param[i].ptr == ptr && strcmp(L->param[i].name, name) == 0) {
      L->param[i].v = v;
      return;
    }
  if (L->nparam == (int)(sizeof L->param / sizeof L->param[0])) {
    lw_error(L, NULL, "too many kernel parameters of its own (%s)", name);
    return;
  }
  L->param[L->nparam].name = name;
  L->param[L->nparam].ptr = ptr;
  L->param[L->nparam++].v = v;
}

MlirValue lw_param(const Lowerer *L, const char *name, bool ptr) {
  for (int i = 0; i < L->nparam; i++)
    if (L->param[i].ptr == ptr && strcmp(L->param[i].name, name) == 0)
      return L->param[i].v;
  return (MlirValue){NULL};
}
