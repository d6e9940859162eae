/*
 * test_verify_models.c: `memest verify`'s executor on the truth exports
 * (../shared/truth/onnx, the files ending .legacy-train.onnx) at batch 8, train with Adam and
 * infer: each run must succeed and measure a positive peak within 5% of the
 * estimate made for the executor's kernels (est_options.kernels =
 * EST_KERNELS_VERIFY), issue 4's target. On an H200 on 2026-11-21 every row
 * was within 0.05% (docs/verify.md).
 * Exits 77 (skipped) when the verify module cannot be loaded or there is no
 * GPU. Usage: test_verify_models TRUTH_ONNX_DIR
 */
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"
#include "verify_load.h"

#define MAX_PEAK_ERROR 0.05 /* relative: issue 4's target */

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s TRUTH_ONNX_DIR\n", argv[0]);
        return 2;
    }
    char why[512];
    vx_module m;
    if (!vx_module_open(&m, why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        printf("SKIP: %s: no truth exports\n", argv[1]);
        return 77;
    }
    struct dirent *e;
    int fails = 0, runs = 0;
    while ((e = readdir(d))) {
        const char *suffix = ".legacy-train.onnx";
        size_t n = strlen(e->d_name), sn = strlen(suffix);
        if (n <= sn || strcmp(e->d_name + n - sn, suffix)) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
        est_error err;
        est_graph *g = NULL;
        if (est_load_file(path, &g, &err) != EST_OK) {
            printf("FAIL %s: load: %s\n", e->d_name, err.message);
            fails++;
            continue;
        }
        for (int mode = 0; mode < 2; mode++) {
            est_options eo;
            est_options_init(&eo);
            eo.batch = 8;
            eo.mode = mode ? EST_MODE_INFER : EST_MODE_TRAIN;
            eo.kernels = EST_KERNELS_VERIFY; /* like with like: the executor's workspaces */
            est_report *rep = NULL;
            if (est_estimate(g, &eo, &rep, &err) != EST_OK) {
                printf("FAIL %s: estimate: %s\n", e->d_name, err.message);
                fails++;
                continue;
            }
            vx_options o;
            m.options_init(&o);
            o.batch = 8;
            o.mode = eo.mode;
            vx_result r;
            vx_status st = m.run(g, &o, &r);
            if (st == VX_ENOGPU) {
                printf("SKIP: %s\n", r.message);
                est_report_free(rep);
                est_graph_free(g);
                closedir(d);
                return 77;
            }
            runs++;
            uint64_t est = est_report_peak(rep)->bytes;
            double rel = r.peak ? ((double)est - (double)r.peak) / (double)r.peak : INFINITY;
            bool ok = st == VX_OK && r.peak > 0 && isfinite(rel) && fabs(rel) <= MAX_PEAK_ERROR;
            printf("%s %-40s %-5s measured %12llu estimate %12llu error %+7.2f%% step %.2f ms%s%s\n", ok ? "ok  " : "FAIL",
                   e->d_name, mode ? "infer" : "train", (unsigned long long)r.peak, (unsigned long long)est, 100 * rel,
                   r.step_ms, st ? ": " : "", st ? r.message : "");
            fails += !ok;
            m.result_free(&r);
            est_report_free(rep);
        }
        est_graph_free(g);
    }
    closedir(d);
    printf("%d runs, %d failed\n", runs, fails);
    return fails ? 1 : runs ? 0 : 77;
}
