/*
 * json_util.h: what the tests of the JSON formats (test_json,
 * test_json_parse, test_json_report) share: their CHECK, which counts the
 * checks made as well as the failures, and reading a whole file.
 */
#ifndef EST_JSON_UTIL_H
#define EST_JSON_UTIL_H

#include <stdio.h>
#include <stdlib.h>

static int checks, failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        checks++;                                                              \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                        \
            printf(__VA_ARGS__);                                               \
            printf("\n");                                                      \
        }                                                                      \
    } while (0)

/* ---- files ---------------------------------------------------------------------- */

static inline char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap + 1);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *grown = realloc(buf, (cap *= 2) + 1);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    *size = n;
    return buf;
}

/* The closing line of each executable: the checks made and failed; the exit
 * code. */
static inline int json_test_result(void) {
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}

#endif
