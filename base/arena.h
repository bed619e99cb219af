/* arena.h - the bump allocator of the compiler.
 *
 * Memory comes from big blocks and is released all at once: the parser's
 * AST (frontend/ast.h) and a tile IR module (ir/ir.h) each own one arena,
 * so no node is ever freed alone and error recovery cannot leak.
 */
#ifndef FLASHC_BASE_ARENA_H
#define FLASHC_BASE_ARENA_H

#include <stddef.h>

typedef struct ArenaBlock ArenaBlock;
typedef struct Arena {
  ArenaBlock *head; /* the block being filled; NULL: nothing allocated yet */
} Arena;

/* Zeroed memory, aligned to 16 bytes; aborts when out of memory. */
void *arena_alloc(Arena *a, size_t size);
/* A NUL-terminated copy of the n bytes at s. */
char *arena_strndup(Arena *a, const char *s, size_t n);
/* Releases every block; the arena is empty (and reusable) afterwards. */
void arena_free(Arena *a);

#endif
