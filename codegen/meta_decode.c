/* meta_decode.c - metadata keys of decode kernels, as runtime/meta.c parses
 * them (docs/decode.md, "Metadata keys of a decode kernel"). */
#include "codegen/meta_decode.h"

#include <stdlib.h>
#include <string.h>

bool cg_meta_is_combine(const Func *f) { return attr_get(&f->attrs, "combine_of") != NULL; }

bool cg_meta_is_decode(const Func *f) {
  return strcmp(attr_str(&f->attrs, "mode", "forward"), "decode") == 0 && !cg_meta_is_combine(f);
}

bool cg_decode_pdl(const Func *f) {
  const char *t = attr_str(&f->attrs, "target", "sm_90a");
  return strncmp(t, "sm_", 3) == 0 && atoi(t + 3) >= 90;
}

/* The module's combine kernel of f (of its base kernel for a small-batch
 * variant), or NULL (split-kv did not run, or split = 1). */
static const Func *combine_of(const Func *f) {
  const Module *m = f->module;
  const char *name = attr_str(&f->attrs, "variant_of", f->name);
  for (int i = 0; m && i < m->nfuncs; i++) {
    const char *of = attr_str(&m->funcs[i]->attrs, "combine_of", NULL);
    if (of && strcmp(of, name) == 0)
      return m->funcs[i];
  }
  return NULL;
}

bool cg_decode_fused(const Func *f) {
  return cg_meta_is_decode(f) && combine_of(f) &&
         strcmp(attr_str(&f->attrs, "combine", "fused"), "fused") == 0;
}

/* One counter per unit that nsplit blocks finish together: (head-loop
 * iteration, Q tile) of a sequence. The head loop runs over the K/V heads
 * when pack-gqa packed the group into the Q tile (attribute pack), else over
 * the query heads; a Q tile holds tile_q of the q_len_max * pack rows. */
int cg_decode_counters(const Func *f) {
  if (!cg_decode_fused(f))
    return 0;
  const AttrList *a = &f->attrs;
  int pack = (int)attr_int(a, "pack", 0);
  int hl = (int)attr_int(a, pack ? "kv_heads" : "heads", 1);
  int br = (int)attr_int(a, "tile_q", 16);
  int rows = (int)attr_int(a, "q_len_max", 16) * (pack ? pack : 1);
  return hl * ((rows + br - 1) / br);
}

void cg_meta_decode(CgStrBuf *sb, const Func *f, const Func *w, const CgKernelInfo *wi) {
  const AttrList *a = &f->attrs;
  const char *cache = attr_str(a, "cache", "contiguous");
  cg_strbuf_printf(sb, "// flashc.meta cache %s\n", cache);
  if (strcmp(cache, "paged") == 0)
    cg_strbuf_printf(sb, "// flashc.meta page_size %d\n", (int)attr_int(a, "page_size", 0));
  /* Without a combine kernel the split kernel writes O itself: split 1,
   * whatever the spec asked for. */
  const Func *c = combine_of(f);
  int split = (int)attr_int(a, "split", 0);
  if (!c)
    cg_strbuf_puts(sb, "// flashc.meta split 1\n");
  else if (split == 0)
    cg_strbuf_puts(sb, "// flashc.meta split auto\n");
  else
    cg_strbuf_printf(sb, "// flashc.meta split %d\n", split);
  cg_strbuf_printf(sb, "// flashc.meta q_len_max %d\n", (int)attr_int(a, "q_len_max", 16));
  if (c) {
    cg_strbuf_printf(sb, "// flashc.meta combine_kernel %s\n", c->name);
    cg_strbuf_printf(sb, "// flashc.meta combine_threads %d\n",
                     32 * (int)attr_int(&c->attrs, "warps", 4));
    if (cg_decode_fused(f))
      cg_strbuf_printf(sb, "// flashc.meta combine_fused %d\n", cg_decode_counters(f));
    else if (cg_decode_pdl(f))
      cg_strbuf_puts(sb, "// flashc.meta combine_pdl 1\n");
  }
  /* The variant is launched instead of f by the same rules (same arguments,
   * same workspace and counters), only on its own tiles. */
  if (c && w && wi) {
    cg_strbuf_printf(sb, "// flashc.meta wide_kernel %s\n", w->name);
    cg_strbuf_printf(sb, "// flashc.meta wide_tile_kv %d\n", (int)attr_int(&w->attrs, "tile_kv", 0));
    cg_strbuf_printf(sb, "// flashc.meta wide_threads %d\n", wi->threads);
    cg_strbuf_printf(sb, "// flashc.meta wide_smem_bytes %d\n", wi->smem_bytes);
  }
  if (attr_get(a, "unified_max"))
    cg_strbuf_printf(sb, "// flashc.meta unified_max %.9g\n", attr_float(a, "unified_max", 0));
}
