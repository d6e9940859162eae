/* test_util.h: tiny assertion helpers shared by the test executables. */
#ifndef EST_TEST_UTIL_H
#define EST_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

static int test_failures;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            test_failures++;                                               \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);         \
            printf(__VA_ARGS__);                                           \
            printf("\n");                                                  \
        }                                                                  \
    } while (0)

static inline char *test_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = '\0';
    fclose(f);
    if (size) *size = (size_t)n;
    return buf;
}

/* Whether dir/file can be opened; when not, says that `test` skips `what`
 * (the caller then exits 77, meson's skip). */
static inline int test_have_file(const char *dir, const char *file, const char *test, const char *what) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("%s: %s not found, skipping %s\n", test, path, what);
        return 0;
    }
    fclose(f);
    return 1;
}

static inline int test_result(const char *name) {
    if (test_failures) printf("%s: %d failure(s)\n", name, test_failures);
    else printf("%s: all checks passed\n", name);
    return test_failures ? 1 : 0;
}

#endif
