/*
 * caching_util.h: what the tests of the caching allocator's replay
 * (test_caching, test_caching_traces) share: sizes,
 * a new cache, and its state checked at once.
 */
#ifndef EST_CACHING_UTIL_H
#define EST_CACHING_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "caching.h"
#include "test_util.h"

#define KiB ((uint64_t)1024)
#define MiB ((uint64_t)1048576)

static inline est_cache *new_cache(void) {
    est_cache *c = est__cache_new();
    if (!c) {
        printf("est__cache_new failed\n");
        exit(1);
    }
    return c;
}

/* reserved, allocated and segment count in one check */
#define CHECK_STATE(c, res, all, segs)                                                           \
    do {                                                                                         \
        CHECK(est__cache_reserved(c) == (res), "reserved %llu, want %llu",                       \
              (unsigned long long)est__cache_reserved(c), (unsigned long long)(res));            \
        CHECK(est__cache_allocated(c) == (all), "allocated %llu, want %llu",                     \
              (unsigned long long)est__cache_allocated(c), (unsigned long long)(all));           \
        CHECK(est__cache_segments(c) == (segs), "segments %llu, want %llu",                      \
              (unsigned long long)est__cache_segments(c), (unsigned long long)(segs));           \
    } while (0)

#endif
