/*
 * test_cli_alloc: the memest command under allocation failures. Each
 * allocation of a run fails in turn (tests/fail_malloc.c, preloaded); the
 * run must then exit 1 saying "out of memory", or exit 0 with exactly the
 * output of the run without failures: never another report.
 *
 * usage: test_cli_alloc MEMEST FAIL_MALLOC_SO MODELS_DIR TMP_DIR
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test_util.h"

static const char *memest, *shim, *models, *tmp;

/* Runs memest ARGS with allocation `fail_at` failing (-1: none); its exit
 * code. Output to TMP/out, errors to TMP/err, the allocation count to
 * TMP/count. */
static int run_failing(const char *args, long fail_at) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "MEMEST_FAIL_AT=%ld MEMEST_COUNT_FILE='%s/count' LD_PRELOAD='%s' '%s' %s >'%s/out' 2>'%s/err'", fail_at,
             tmp, shim, memest, args, tmp, tmp);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static char *read_tmp(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    char *s = test_read_file(path, NULL);
    return s ? s : calloc(1, 1);
}

static void check_command(const char *args) {
    CHECK(run_failing(args, -1) == 0, "memest %s fails without allocation failures", args);
    char *clean = read_tmp("out"), *count = read_tmp("count");
    long n = atol(count);
    free(count);
    int wrong = 0;
    for (long k = 0; k < n; k++) {
        int rc = run_failing(args, k);
        char *out = read_tmp("out"), *err = read_tmp("err");
        bool ok = rc == 0 ? strcmp(out, clean) == 0 : rc == 1 && strstr(err, "out of memory") != NULL;
        if (!ok && !wrong++)
            printf("memest %s, allocation %ld failing: exit %d, %s: %.200s\n", args, k, rc,
                   rc == 0 ? "a different report" : "no \"out of memory\"", err);
        free(out);
        free(err);
    }
    CHECK(wrong == 0 && n > 50, "memest %s: %d of %ld allocation failures mishandled", args, wrong, n);
    printf("memest %s: each of %ld allocations failed\n", args, n);
    free(clean);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MEMEST FAIL_MALLOC_SO MODELS_DIR TMP_DIR\n", argv[0]);
        return 2;
    }
    memest = argv[1], shim = argv[2], models = argv[3], tmp = argv[4];
    static const struct {
        const char *before, *model, *after;
    } commands[] = {
        {"", "mlp.onnx", "--batch 2"},
        {"", "mlp.onnx", "--batch 2 --format json"},
        {"", "mlp.onnx", "--batch 2 --format csv --gpu T4"},
        {"", "mlp.onnx", "--max-batch --gpu T4 --format json"},
        {"", "mlp.onnx", "--sweep batch=1,2 --format csv"},
        {"convert", "mlp.onnx", "-o -"},
        {"", "small_cnn.json", "--batch 2 --format json"},
    };
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        char args[4400];
        snprintf(args, sizeof args, "%s %s/%s %s", commands[i].before, models, commands[i].model, commands[i].after);
        check_command(args);
    }
    return test_result("test_cli_alloc");
}
