/* meta_blocks.c - the metadata rules of block lists (docs/abi.md, "Block
 * lists"): the keys blocks, block_list, chunk and classes, and the grids
 * row_tiles and row_tiles*chunks, within one kernel's block and across a
 * module's kernels (classifiers, their classes kernels and the kernels that
 * visit their lists). meta.c reads the lines and calls these rules;
 * messages have its form, "metadata line L: KEY: what".
 */
#include <string.h>

#include "meta_internal.h"

/* ---- one kernel's block ----------------------------------------------------- */

/* The block-list keys (docs/abi.md, "Block lists"): a classifier kernel
 * (mode blocks) names the spec's forward kernel, says `blocks rows|cols N`
 * with N 1 or heads, runs on grid row_tiles,list_heads,batch (which needs
 * tile_kv: its lists' other dim) and has no workspace and no block_list;
 * `blocks` and that grid belong to it alone. A classes kernel (phase 1 of
 * a two-phase classifier) has the key chunk and grid
 * row_tiles*chunks,list_heads,batch instead; a classifier naming one (key
 * classes) has no chunk. block_list names another
 * kernel, on a kernel that visits tile pairs: a forward kernel, or a
 * backward one of role q, main, kv or dv. */
fa_status fa_meta_check_blocks_keys_(Parser *p) {
  fa_kernel_info *in = p->info;
  if (in->mode != FA_MODE_BLOCKS) {
    if (seen(p, K_BLOCKS)) return fail_key(p, K_BLOCKS, "%sonly valid with mode blocks", "");
    if (seen(p, K_CHUNK)) return fail_key(p, K_CHUNK, "%sonly valid with mode blocks", "");
    if (seen(p, K_CLASSES)) return fail_key(p, K_CLASSES, "%sonly valid with mode blocks", "");
    if (in->grid == FA_GRID_ROW_TILES)
      return fail_key(p, K_GRID, "row_tiles,list_heads,batch is only valid with mode blocks "
                      "(a classifier kernel), not with mode %s", mode_name(in->mode));
    if (in->grid == FA_GRID_ROW_CHUNKS)
      return fail_key(p, K_GRID, "row_tiles*chunks,list_heads,batch is only valid with mode "
                      "blocks (a classes kernel), not with mode %s", mode_name(in->mode));
    if (!seen(p, K_BLOCK_LIST)) return FA_OK;
    if (in->mode == FA_MODE_DECODE)
      return fail_key(p, K_BLOCK_LIST, "%snot valid with mode decode", "");
    if (in->mode == FA_MODE_BACKWARD && (in->role == FA_ROLE_PRE || in->role == FA_ROLE_POST))
      return fail_key(p, K_BLOCK_LIST, "%snot valid for the backward roles pre and post (they "
                      "visit no tile pairs)", "");
    if (strcmp(in->block_list, in->kernel) == 0)
      return fail_key(p, K_BLOCK_LIST, "'%s' is this kernel itself, not its classifier",
                      in->block_list);
    return FA_OK;
  }
  if (!seen(p, K_FORWARD))
    return fail_key(p, K_MODE, "%smode blocks needs the key forward (the spec's forward "
                    "kernel)", "");
  if (!seen(p, K_BLOCKS))
    return fail_key(p, K_MODE, "%smode blocks needs the key blocks (rows|cols LIST_HEADS)", "");
  if (strcmp(in->forward, in->kernel) == 0)
    return fail_key(p, K_FORWARD, "'%s' is this kernel itself, not its forward kernel",
                    in->forward);
  if (seen(p, K_CHUNK) && seen(p, K_CLASSES))
    return fail_key(p, K_CLASSES, "%snot valid with chunk (a classes kernel is phase 1; "
                    "classes names it on phase 2)", "");
  if (seen(p, K_CHUNK) && in->grid != FA_GRID_ROW_CHUNKS)
    return fail_key(p, K_GRID, "%sa classes kernel (mode blocks, chunk) runs on grid "
                    "row_tiles*chunks,list_heads,batch", "");
  if (!seen(p, K_CHUNK) && in->grid != FA_GRID_ROW_TILES)
    return fail_key(p, K_GRID, "%sa classifier kernel (mode blocks) runs on grid "
                    "row_tiles,list_heads,batch (row_tiles*chunks,list_heads,batch needs the "
                    "key chunk)", "");
  if (!seen(p, K_TILE_KV))
    return fail_key(p, K_GRID, "%sa classifier's grid needs the key tile_kv (its lists span "
                    "both tile dims)", "");
  if (seen(p, K_CLASSES) && strcmp(in->classes, in->kernel) == 0)
    return fail_key(p, K_CLASSES, "'%s' is this kernel itself, not its classes kernel",
                    in->classes);
  if (in->list_heads != 1 && in->list_heads != in->heads) {
    char msg[160];
    fa_fmt(msg, sizeof msg, "list_heads %d is neither 1 nor heads %d", in->list_heads,
           in->heads);
    return fail_key(p, K_BLOCKS, "%s", msg);
  }
  if (seen(p, K_BLOCK_LIST))
    return fail_key(p, K_BLOCK_LIST, "%snot valid with mode blocks (a classifier writes lists, "
                    "it visits none)", "");
  if (in->workspace_floats_per_row)
    return fail_key(p, K_WORKSPACE, "%smust be 0 for a classifier kernel (mode blocks)", "");
  return FA_OK;
}

/* ---- a module's kernels ----------------------------------------------------- */

/* The kernel that kernel b's key `key` names, into *c; or the refusal
 * (`what` is what the name should be). */
static fa_status named_kernel(Module *m, int b, int key, const char *name, const char *what,
                              int *c) {
  *c = find_kernel(m, name);
  if (*c >= 0) return FA_OK;
  char msg[400];
  fa_fmt(msg, sizeof msg, "'%s' names no kernel of this module (%s is compiled into the same "
         "module)", name, what);
  return module_fail(m, b, key, msg);
}

/* A two-phase classifier b (key classes; docs/abi.md "Block lists"):
 * its classes kernel is a kernel of the module with the key chunk, made
 * for the same forward kernel, orientation, list_heads and tiles, with the
 * same run-time inputs and requires (it takes the same parameters). */
static fa_status check_classes(Module *m, int b) {
  const fa_kernel_info *x = &m->k[b];
  if (!x->classes[0]) return FA_OK;
  char what[400];
  int c;
  fa_status nst = named_kernel(m, b, K_CLASSES, x->classes, "a classifier's classes kernel", &c);
  if (nst != FA_OK) return nst;
  const fa_kernel_info *y = &m->k[c];
  int yline = m->line[c].key[K_KERNEL];
  if (y->mode != FA_MODE_BLOCKS || !y->chunk) {
    fa_fmt(what, sizeof what, "'%s' (line %d) is not a classes kernel (mode blocks with the key "
           "chunk)", x->classes, yline);
    return module_fail(m, b, K_CLASSES, what);
  }
  if (strcmp(y->forward, x->forward) != 0 || y->blocks != x->blocks ||
      y->list_heads != x->list_heads || y->tile_q != x->tile_q || y->tile_kv != x->tile_kv) {
    fa_fmt(what, sizeof what, "'%s' (line %d) classifies for forward %s, blocks %s %d, tiles "
           "%dx%d but this classifier's are %s, %s %d, %dx%d", x->classes, yline, y->forward,
           y->blocks == FA_BLOCKS_COLS ? "cols" : "rows", y->list_heads, y->tile_q, y->tile_kv,
           x->forward, x->blocks == FA_BLOCKS_COLS ? "cols" : "rows", x->list_heads, x->tile_q,
           x->tile_kv);
    return module_fail(m, b, K_CLASSES, what);
  }
  return same_inputs(m, c, b);
}

/* The block lists (docs/abi.md, "Block lists") of kernel b. A classifier's
 * forward kernel, when the module holds it, is a plain forward kernel of
 * the same attention and run-time inputs. A visiting kernel's block_list
 * names a classifier of the module made for its spec (its own name, its
 * dropout_of, or its forward), with the orientation it visits (rows: mode
 * forward and role q; cols: main, kv, dv), its tiles and its inputs; the
 * visiting kernel's info then gets that classifier's blocks and
 * list_heads. */
fa_status fa_meta_check_block_lists_(Module *m, int b) {
  fa_kernel_info *x = &m->k[b];
  char what[400];
  if (x->mode == FA_MODE_BLOCKS) {
    fa_status cst = check_classes(m, b);
    if (cst != FA_OK) return cst;
    int fwd = find_kernel(m, x->forward);
    if (fwd < 0) return FA_OK;
    if (m->k[fwd].mode != FA_MODE_FORWARD || m->k[fwd].dropout_of[0]) {
      fa_fmt(what, sizeof what, "'%s' (line %d) is not a plain forward kernel", x->forward,
             m->line[fwd].key[K_KERNEL]);
      return module_fail(m, b, K_FORWARD, what);
    }
    fa_status st = fa_meta_same_attention_(m, b, fwd);
    return st ? st : same_inputs(m, b, fwd);
  }
  if (!x->block_list[0]) return FA_OK;
  int c;
  fa_status nst = named_kernel(m, b, K_BLOCK_LIST, x->block_list, "a kernel's classifier", &c);
  if (nst != FA_OK) return nst;
  const fa_kernel_info *y = &m->k[c];
  int yline = m->line[c].key[K_KERNEL];
  if (y->mode != FA_MODE_BLOCKS) {
    fa_fmt(what, sizeof what, "'%s' (line %d) is a %s kernel, not a classifier (mode blocks)",
           x->block_list, yline, mode_name(y->mode));
    return module_fail(m, b, K_BLOCK_LIST, what);
  }
  if (y->chunk) {
    fa_fmt(what, sizeof what, "'%s' (line %d) is a classes kernel (phase 1, key chunk), not a "
           "classifier: name the classifier whose key classes names it", x->block_list, yline);
    return module_fail(m, b, K_BLOCK_LIST, what);
  }
  const char *spec = x->mode == FA_MODE_BACKWARD ? x->forward
                     : x->dropout_of[0]          ? x->dropout_of
                                                 : x->kernel;
  if (strcmp(y->forward, spec) != 0) {
    fa_fmt(what, sizeof what, "'%s' (line %d) makes the lists of %s, not of %s", x->block_list,
           yline, y->forward, spec);
    return module_fail(m, b, K_BLOCK_LIST, what);
  }
  int cols = x->mode == FA_MODE_BACKWARD &&
             (x->role == FA_ROLE_MAIN || x->role == FA_ROLE_KV || x->role == FA_ROLE_DV);
  fa_blocks_orient want = cols ? FA_BLOCKS_COLS : FA_BLOCKS_ROWS;
  if (y->blocks != want) {
    fa_fmt(what, sizeof what, "'%s' (line %d) makes %s lists but this %s kernel visits %s "
           "lists (one per %s tile)", x->block_list, yline, cols ? "rows" : "cols",
           x->mode == FA_MODE_BACKWARD ? fa_role_name(x->role) : "forward",
           cols ? "cols" : "rows", cols ? "K/V" : "Q");
    return module_fail(m, b, K_BLOCK_LIST, what);
  }
  if (y->tile_q != x->tile_q || y->tile_kv != x->tile_kv) {
    fa_fmt(what, sizeof what, "'%s' (line %d) has tiles %dx%d but this kernel %dx%d (tile_q x "
           "tile_kv): its lists index other tiles", x->block_list, yline, y->tile_q,
           y->tile_kv, x->tile_q, x->tile_kv);
    return module_fail(m, b, K_BLOCK_LIST, what);
  }
  fa_status st = same_inputs(m, c, b);
  if (st != FA_OK) return st;
  x->blocks = y->blocks;
  x->list_heads = y->list_heads;
  return FA_OK;
}
