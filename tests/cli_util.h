/* cli_util.h: running the memest command from the CLI test executables
 * (test_cli, test_cli_training, test_cli_shapes, test_capacity).
 * cli_test_args() sets `memest`, `models` and `tmp` from the command line
 * first. */
#ifndef EST_CLI_UTIL_H
#define EST_CLI_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test_util.h"

static const char *memest, *models, *tmp;

/* The CLI tests' arguments: MEMEST MODELS_DIR TMP_DIR. False (with a usage
 * line) when they are missing. */
static bool cli_test_args(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MEMEST MODELS_DIR TMP_DIR\n", argv[0]);
        return false;
    }
    memest = argv[1];
    models = argv[2];
    tmp = argv[3];
    return true;
}

/* Writes `text` to TMP_DIR/name and puts that path in path[size]; false
 * (and a failed check) when it cannot. */
static inline bool write_tmp_file(char *path, size_t size, const char *name, const char *text) {
    snprintf(path, size, "%s/%s", tmp, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return false;
    fputs(text, f);
    return fclose(f) == 0;
}

/* Runs `memest ARGS REDIRECTS` through the shell; returns its exit code and
 * what reaches the pipe, which the caller frees. */
static int run_with(const char *args, const char *redirects, char **out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s %s", memest, args, redirects);
    FILE *p = popen(cmd, "r");
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    buf[n] = '\0';
    int status = pclose(p);
    if (out) *out = buf;
    else free(buf);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* memest ARGS: its exit code and output (stdout, plus stderr when
 * `with_stderr`). */
static int run(const char *args, bool with_stderr, char **out) {
    return run_with(args, with_stderr ? "2>&1" : "2>/dev/null", out);
}

/* Checks the exit code of `memest ARGS` and, when given, a piece of its
 * output. */
static void expect_exit(const char *args, int want, const char *must_contain) {
    char *out;
    int rc = run(args, true, &out);
    CHECK(rc == want, "memest %s: exit %d, want %d; output: %.300s", args, rc, want, out);
    CHECK(!must_contain || strstr(out, must_contain), "memest %s: output lacks '%s': %.300s", args, must_contain,
          out);
    free(out);
}

#endif
