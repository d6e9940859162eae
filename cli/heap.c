/*
 * heap.c: how the memest process takes memory from the kernel. Only the
 * speed of a run depends on it: a large graph's arrays are faulted in a
 * page at a time, and the faults were a fifth of a whole run on swin_t.
 */
#define _DEFAULT_SOURCE /* MADV_HUGEPAGE and sbrk, beyond POSIX */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "heap.h"

#ifdef __GLIBC__
enum {
    HUGE_PAGE = 2 << 20,     /* x86-64's and arm64's (4 KiB pages) */
    HUGE_HEAP = 256 << 20,   /* the heap taken in huge pages, at most */
    GLIBC_TOP_PAD = 128 << 10 /* M_TOP_PAD's default */
};

/* One process, many estimates of one graph (--max-batch, --sweep): their
 * arrays are freed and allocated again at the same sizes. glibc would hand
 * the top of the heap back to the kernel after each and fault it in again,
 * about a fifth of an estimate of swin_t; keep what the process takes. */
static void keep_freed_memory(void) {
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's largest */
}

/* The heap's first HUGE_HEAP bytes in huge pages, where the kernel gives
 * them to a range advised so (transparent_hugepage "madvise" or "always"):
 * a fault then brings 2 MiB, not 4 KiB. glibc grows the heap by its top pad
 * at once; that range is advised, and later growth is in ordinary pages.
 * The range is address space: memory comes as pages are touched. */
static void heap_in_huge_pages(void) {
#ifdef MADV_HUGEPAGE
    mallopt(M_TOP_PAD, HUGE_HEAP);
    uintptr_t start = (uintptr_t)sbrk(0);
    void *grow = malloc(HUGE_PAGE); /* above the heap's top: it grows, top pad included */
    uintptr_t end = (uintptr_t)sbrk(0);
    uintptr_t from = ((uintptr_t)grow + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    uintptr_t to = end & ~(uintptr_t)(HUGE_PAGE - 1);
    /* only where the heap grew (refused, glibc maps the block on its own) */
    if (grow && (uintptr_t)grow >= start && to > from)
        (void)madvise((void *)from, to - from, MADV_HUGEPAGE); /* advice, which may be refused */
    free(grow);
    mallopt(M_TOP_PAD, GLIBC_TOP_PAD);
#endif
}

void tune_heap(void) {
    keep_freed_memory();
    heap_in_huge_pages();
}
#else
void tune_heap(void) {}
#endif
