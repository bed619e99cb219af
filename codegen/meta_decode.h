/* meta_decode.h - the metadata of decode kernels (docs/decode.md), written
 * by codegen.c's metadata writer through these hooks (meta_decode.c). */
#ifndef FLASHC_META_DECODE_H
#define FLASHC_META_DECODE_H

#include <stdbool.h>

#include "codegen/cg_strbuf.h"
#include "codegen/cg_lower.h"
#include "ir/ir.h"

/* A decode program's split kernel (mode decode, not a combine kernel). */
bool cg_meta_is_decode(const Func *f);
/* A combine kernel: its facts go into its split kernel's block, none of its
 * own (the runtime reads every metadata line of the PTX as one kernel's). */
bool cg_meta_is_combine(const Func *f);
/* The decode keys of split kernel f: cache, page_size, split, q_len_max,
 * combine_kernel, combine_threads, unified_max, combine_pdl; with its
 * small-batch variant w (NULL when none) compiled as wi: wide_kernel,
 * wide_tile_kv, wide_threads, wide_smem_bytes. */
void cg_meta_decode(CgStrBuf *sb, const Func *f, const Func *w, const CgKernelInfo *wi);

/* Decode kernel f (split or combine) is for sm_90 or later, where the split
 * kernel lets its combine kernel launch early (griddepcontrol) and the
 * combine kernel waits for it: the runtime may then launch the combine
 * programmatically dependent (metadata combine_pdl 1, docs/decode.md). */
bool cg_decode_pdl(const Func *f);

/* Split kernel f merges the partials itself (docs/decode.md, "Fused
 * combine"): the last of the nsplit blocks of a unit to finish merges them.
 * On unless the tool set attribute combine = separate (flashc
 * -decode-combine=separate); needs a combine kernel in the module. */
bool cg_decode_fused(const Func *f);
/* Arrival counters per sequence of fused split kernel f (0 when not fused):
 * metadata combine_fused N. */
int cg_decode_counters(const Func *f);

#endif
