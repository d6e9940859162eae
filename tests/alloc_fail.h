/*
 * alloc_fail.h: makes the n-th allocation fail, for the tests that check
 * every allocation failure of a path returns an error and leaks nothing.
 *
 * The test is linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc
 * (tests/meson.build, where the linker has --wrap) and defines
 * TEST_WRAP_ALLOC: every malloc/calloc/realloc of the test and of the static
 * library then comes here. cJSON's allocations come through cJSON_InitHooks
 * (hook_malloc); protobuf-c's through the loader's allocator, which calls
 * malloc. Run under ASan (detect_leaks=1) or valgrind to see leaks.
 *
 * One test executable includes this once: the counters are its own.
 */
#ifndef EST_ALLOC_FAIL_H
#define EST_ALLOC_FAIL_H

#ifdef TEST_WRAP_ALLOC
#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

static long alloc_countdown = -1; /* allocations left before one fails; -1: none fails */
static int alloc_failed;          /* the injected failure happened */

static int inject_failure(void) {
    if (alloc_countdown < 0) return 0;
    if (alloc_countdown-- > 0) return 0;
    alloc_failed = 1;
    return 1;
}

void *__wrap_malloc(size_t n) { return inject_failure() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return inject_failure() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return inject_failure() ? NULL : __real_realloc(p, n); }
static inline void *hook_malloc(size_t n) { return __wrap_malloc(n); }

/* Arms the failure of allocation k (0 = the next one). */
static inline void alloc_fail_at(long k) {
    alloc_failed = 0;
    alloc_countdown = k;
}
/* Disarms; returns whether the armed failure happened. */
static inline int alloc_fail_done(void) {
    alloc_countdown = -1;
    return alloc_failed;
}
#endif

#endif
