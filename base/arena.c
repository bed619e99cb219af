/* arena.c - the bump allocator (arena.h). */
#include "base/arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Blocks are at least ARENA_BLOCK_SIZE bytes; a larger request gets a block
 * of its own size. */
enum { ARENA_BLOCK_SIZE = 65536 };

struct ArenaBlock {
  ArenaBlock *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
};

void *arena_alloc(Arena *a, size_t size) {
  size = (size + 15) & ~(size_t)15;
  ArenaBlock *b = a->head;
  if (!b || b->cap - b->used < size) {
    size_t cap = size > ARENA_BLOCK_SIZE ? size : ARENA_BLOCK_SIZE;
    b = malloc(sizeof(ArenaBlock) + cap);
    if (!b) {
      fputs("flashc: out of memory\n", stderr);
      abort();
    }
    b->next = a->head;
    b->used = 0;
    b->cap = cap;
    a->head = b;
  }
  void *p = b->data + b->used;
  b->used += size;
  memset(p, 0, size);
  return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
  char *p = arena_alloc(a, n + 1);
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

void arena_free(Arena *a) {
  for (ArenaBlock *b = a->head, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  a->head = NULL;
}
