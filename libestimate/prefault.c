/* prefault.c: see est_prefault in ir.h. */
#define _DEFAULT_SOURCE /* MADV_POPULATE_WRITE, beyond POSIX */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ir.h"

/* Below this, the faults a thread spares cost less than starting it. */
#define PREFAULT_MIN_BYTES ((size_t)4 << 20)
#define PREFAULT_CHUNK ((size_t)2 << 20)

void est__prefault_add(est_prefault *pf, void *p, size_t bytes) {
    if (!p || bytes < PREFAULT_MIN_BYTES || pf->n == EST_PREFAULT_RANGES) return;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || (page & (page - 1)) != 0) return;
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t hi = ((uintptr_t)p + bytes) & ~((uintptr_t)page - 1);
    if (hi <= lo) return;
    pf->lo[pf->n] = lo;
    pf->hi[pf->n++] = hi;
}

#ifdef MADV_POPULATE_WRITE
/* The range added last first (the array its caller writes next), each from
 * its end back to its start, a chunk at a time: the caller writes from the
 * start, so that each faults the pages the other has not reached.
 * Populating keeps what the caller wrote. */
static void *populate(void *arg) {
    const est_prefault *pf = arg;
    for (int k = pf->n - 1; k >= 0; k--)
        for (uintptr_t end = pf->hi[k]; end > pf->lo[k];) {
            uintptr_t start = end - pf->lo[k] > PREFAULT_CHUNK ? end - PREFAULT_CHUNK : pf->lo[k];
            if (madvise((void *)start, end - start, MADV_POPULATE_WRITE) != 0) return NULL; /* an older kernel */
            end = start;
        }
    return NULL;
}
#endif

void est__prefault_start(est_prefault *pf) {
#ifdef MADV_POPULATE_WRITE
    if (pf->n && !pf->started) pf->started = pthread_create(&pf->thread, NULL, populate, pf) == 0;
#else
    (void)pf;
#endif
}

void est__prefault_wait(est_prefault *pf) {
    if (pf->started) pthread_join(pf->thread, NULL);
    *pf = (est_prefault){0};
}
