/*
 * caching.h: a replay of PyTorch's CUDA caching allocator (the "native"
 * backend of c10/cuda/CUDACachingAllocator.cpp) in its default configuration,
 * to predict torch.cuda.max_memory_reserved() from a sequence of allocations
 * and frees. The rules, with the PyTorch functions they come from, are in the
 * header comment of caching.c.
 *
 * An est_cache is one device allocator on one stream. It owns all its memory;
 * there is no global state, so separate instances may be used from separate
 * threads (one instance must not be used from two threads at once).
 * Addresses are simulated: nothing is allocated on a device.
 *
 * Internal: not installed. Names with a double underscore are library-private.
 */
#ifndef EST_CACHING_H
#define EST_CACHING_H

#include <stdbool.h>
#include <stdint.h>

typedef struct est_cache est_cache;
struct est_prefault; /* ir.h */

/* est__cache_alloc's error returns (a handle is >= 0). */
#define EST__CACHE_ENOMEM (-1)  /* host memory ran out; the cache is unchanged */
#define EST__CACHE_EDEVICE (-2) /* device out of memory: over the limit set by
                                   est__cache_set_limit, or a request of 1 EiB
                                   or more (PyTorch's allocate() refuses those) */

/* The handle of a zero-byte allocation: PyTorch's allocate(0) returns a null
 * pointer without touching the allocator, and freeing it does nothing. */
#define EST__CACHE_NULL_HANDLE ((int64_t)0)

/* A new, empty allocator (nothing reserved, no limit). NULL when host memory
 * runs out. The caller owns it and frees it with est__cache_destroy. */
est_cache *est__cache_new(void);

/* Frees the allocator and everything it holds; outstanding handles become
 * meaningless. NULL is allowed. */
void est__cache_destroy(est_cache *c);

/* Models torch.cuda.set_per_process_memory_fraction: a new segment whose
 * cudaMalloc would take the reserved bytes above `bytes` fails (the allocator
 * then releases its fully free segments and retries once, as PyTorch does).
 * 0 (the default) means no limit. */
void est__cache_set_limit(est_cache *c, uint64_t bytes);

/* Allocates `bytes` as PyTorch's caching allocator would. Returns a handle
 * (>= 0) that stays valid until passed to est__cache_release; the handle is
 * a plain number owned by the caller, nothing to free besides releasing it.
 * bytes == 0 returns EST__CACHE_NULL_HANDLE without allocating. Errors:
 * EST__CACHE_ENOMEM (host memory; nothing changed) and EST__CACHE_EDEVICE
 * (device memory, see est__cache_set_limit; as in PyTorch the fully free
 * segments may have been released on the way). */
int64_t est__cache_alloc(est_cache *c, uint64_t bytes);

/* Frees the block behind `handle` back into the cache (it merges with free
 * neighbours of its segment; nothing is returned to the device). Returns 0;
 * -1 for a handle that is not live (never allocated, already released),
 * which changes nothing. EST__CACHE_NULL_HANDLE is accepted and does nothing.
 * Never allocates host memory. */
int est__cache_release(est_cache *c, int64_t handle);
/* Makes room for `blocks` blocks at once, where the cache would grow as it
 * goes, copying its arrays at each doubling, and adds the room's pages to
 * pf (NULL: none), which its thread faults in. false: out of host memory
 * (the cache is as it was, and usable). */
bool est__cache_reserve(est_cache *c, int32_t blocks, struct est_prefault *pf);
/* Asks the processor to fetch the block behind `handle` into its cache,
 * ahead of its release (a hint: anything passed is accepted). */
void est__cache_prefetch(const est_cache *c, int64_t handle);

/* torch.cuda.empty_cache(): releases every segment that is entirely free.
 * Never allocates host memory. */
void est__cache_empty(est_cache *c);

/* torch.cuda.reset_peak_memory_stats(): both peaks become the current
 * values. */
void est__cache_reset_peak(est_cache *c);

/* Bytes held in segments (memory_reserved()) and their peak
 * (max_memory_reserved()). */
uint64_t est__cache_reserved(const est_cache *c);
uint64_t est__cache_peak_reserved(const est_cache *c);

/* Bytes in allocated blocks, each counted at its block size (the rounded
 * request, or a whole unsplit block): memory_allocated() and
 * max_memory_allocated(). */
uint64_t est__cache_allocated(const est_cache *c);
uint64_t est__cache_peak_allocated(const est_cache *c);

/* The simulated device address of the block behind a live handle (segments
 * are laid out one above the other, from 0, in creation order); UINT64_MAX
 * for EST__CACHE_NULL_HANDLE or a handle that is not live. For tests and
 * for matching against torch.cuda.memory_snapshot(). */
uint64_t est__cache_addr(const est_cache *c, int64_t handle);

/* Number of segments currently held (memory_stats()["segment.all.current"]). */
uint64_t est__cache_segments(const est_cache *c);

/* The block size a request of `bytes` is rounded to (round_size): at least
 * 512, a multiple of 512. Meaningful for bytes < 1 EiB. */
uint64_t est__cache_round_size(uint64_t bytes);

#endif
