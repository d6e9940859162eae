/*
 * fail_malloc.c: an LD_PRELOAD shim that makes one allocation of a process
 * fail, for test_cli_alloc (the memest command under allocation failures).
 *
 *   MEMEST_FAIL_AT=k   allocation k (0-based: malloc, calloc, realloc,
 *                      strdup and strndup count) returns NULL, errno ENOMEM
 *   MEMEST_COUNT_FILE  at exit, how many allocations the process made is
 *                      written there (to know when k has passed them all)
 *
 * Built only where the tests are not sanitized (a sanitizer owns malloc).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long fail_at = -2, count;
static void *(*real_malloc)(size_t), *(*real_calloc)(size_t, size_t), *(*real_realloc)(void *, size_t);
static char dlsym_buf[4096]; /* dlsym's own calloc, before real_calloc is known */
static size_t dlsym_used;

static void report(void) {
    const char *path = getenv("MEMEST_COUNT_FILE");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (f) fprintf(f, "%ld\n", count), fclose(f);
}

static int fail_now(void) {
    if (fail_at == -2) {
        const char *s = getenv("MEMEST_FAIL_AT");
        fail_at = s ? atol(s) : -1;
        atexit(report);
    }
    return count++ == fail_at;
}

void *malloc(size_t n) {
    if (!real_malloc) *(void **)&real_malloc = dlsym(RTLD_NEXT, "malloc"); /* POSIX's idiom for a function */
    if (fail_now()) return errno = ENOMEM, NULL;
    return real_malloc(n);
}

void *calloc(size_t n, size_t size) {
    if (!real_calloc) {
        static int resolving;
        if (resolving) { /* dlsym itself calloc'ing */
            void *p = dlsym_buf + dlsym_used;
            dlsym_used += (n * size + 15) / 16 * 16;
            return dlsym_used <= sizeof dlsym_buf ? p : NULL;
        }
        resolving = 1;
        *(void **)&real_calloc = dlsym(RTLD_NEXT, "calloc");
        resolving = 0;
    }
    if (fail_now()) return errno = ENOMEM, NULL;
    return real_calloc(n, size);
}

void *realloc(void *p, size_t n) {
    if (!real_realloc) *(void **)&real_realloc = dlsym(RTLD_NEXT, "realloc");
    if (fail_now()) return errno = ENOMEM, NULL;
    return real_realloc(p, n);
}

void free(void *p) {
    static void (*real_free)(void *);
    if ((char *)p >= dlsym_buf && (char *)p < dlsym_buf + sizeof dlsym_buf) return;
    if (!real_free) *(void **)&real_free = dlsym(RTLD_NEXT, "free");
    real_free(p);
}
