/* arena.c: see est_arena in ir.h. */
#include <stdlib.h>

#include "ir.h"

struct est_arena_chunk {
    struct est_arena_chunk *next;
    size_t used, size;
    _Alignas(EST_ARENA_ALIGN) unsigned char data[];
};

void *est__arena_alloc(est_arena *a, size_t size, size_t align) {
    est_arena_chunk *c = a->head;
    size_t at = c ? (c->used + align - 1) & ~(align - 1) : 0; /* align: a power of two */
    if (!c || at > c->size || c->size - at < size) {
        size_t cap = size > a->chunk / 4 ? size : a->chunk;
        if (cap > SIZE_MAX - sizeof *c) return NULL;
        est_arena_chunk *n = malloc(sizeof *n + cap);
        if (!n) return NULL;
        n->size = cap;
        n->used = 0;
        if (c && cap != a->chunk) { /* a large block: behind the chunk that keeps filling */
            n->next = c->next;
            c->next = n;
        } else {
            n->next = c;
            a->head = n;
        }
        c = n;
        at = 0;
    }
    c->used = at + size;
    return c->data + at;
}

void est__arena_reset(est_arena *a, bool keep_one) {
    est_arena_chunk *kept = NULL;
    for (est_arena_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        if (keep_one && !kept && c->size == a->chunk) kept = c;
        else free(c);
    }
    if (kept) kept->used = 0, kept->next = NULL;
    a->head = kept;
}
