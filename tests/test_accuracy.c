/*
 * test_accuracy: issue 3's accuracy targets on the shared truth. Every
 * training export (legacy-train, dynamo-train) of every model in
 * TRUTH_DIR/truth.json, at every measured batch and for sgd, momentum and
 * adam, must give a peak within 5% of PyTorch's measured peak at batch >= 8
 * and within 10% at batch 1; every inference export (legacy, dynamo) within
 * 5% of the measured inference peak at batch >= 8. docs/accuracy.md has the
 * table and how it was measured.
 *
 * Each export is loaded once and re-estimated at every batch and optimizer,
 * as a capacity-planning caller would. Public API only.
 *
 * usage: test_accuracy TRUTH_DIR   (exits 77 when TRUTH_DIR/truth.json is absent)
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "estimate.h"
#include "truth_util.h"

static const char *const TRAIN_EXPORTS[] = {"legacy-train", "dynamo-train"};
static const char *const INFER_EXPORTS[] = {"legacy", "dynamo"};
static const char *const OPTIMIZERS[] = {"sgd", "momentum", "adam"};

/* The target for a case: a fraction, or 0 for none (inference at batch < 8). */
static double target(bool training, int64_t batch) {
    if (batch >= 8) return 0.05;
    return training ? 0.10 : 0;
}

static double measured_peak(const cJSON *model, bool training, int64_t batch, const char *optimizer) {
    char key[32];
    snprintf(key, sizeof key, "%lld", (long long)batch);
    const cJSON *at = cJSON_GetObjectItem(cJSON_GetObjectItem(model, training ? "train" : "infer"), key);
    if (training) at = cJSON_GetObjectItem(at, optimizer);
    const cJSON *peak = cJSON_GetObjectItem(at, "peak");
    return cJSON_IsNumber(peak) ? peak->valuedouble : -1;
}

/* Checks one case and returns 1 when it was checked. */
static int check_case(const est_graph *g, const char *what, const cJSON *model, bool training, int64_t batch,
                      const char *optimizer) {
    double want = measured_peak(model, training, batch, optimizer), limit = target(training, batch);
    if (want <= 0 || limit == 0) return 0;
    est_options opt;
    est_options_init(&opt);
    opt.batch = batch;
    opt.mode = training ? EST_MODE_TRAIN : EST_MODE_INFER;
    if (training) opt.optimizer = (est_optimizer)est_optimizer_from_name(optimizer);
    est_report *r = NULL;
    est_error err;
    if (est_estimate(g, &opt, &r, &err) != EST_OK) {
        CHECK(false, "%s batch %lld %s: %s", what, (long long)batch, optimizer, err.message);
        return 1;
    }
    double got = (double)est_report_peak(r)->bytes, error = (got - want) / want;
    printf("%-30s b%-4lld %-9s memest %12.0f measured %12.0f %+6.2f%%\n", what, (long long)batch, optimizer, got,
           want, 100 * error);
    CHECK(fabs(error) <= limit, "%s batch %lld %s: peak %.0f, measured %.0f (%+.2f%%, target %.0f%%)", what,
          (long long)batch, optimizer, got, want, 100 * error, 100 * limit);
    est_report_free(r);
    return 1;
}

/* Every case of one export of one model; returns how many were checked. */
static int check_export(const char *dir, const char *name, const cJSON *model, const char *export, bool training) {
    char path[4096], what[256];
    snprintf(path, sizeof path, "%s/onnx/%s.%s.onnx", dir, name, export);
    snprintf(what, sizeof what, "%s.%s", name, export);
    est_graph *g = NULL;
    est_error err;
    if (est_load_file(path, &g, &err) != EST_OK) {
        CHECK(false, "%s: %s", path, err.message);
        return 0;
    }
    int checked = 0;
    const cJSON *batch;
    cJSON_ArrayForEach(batch, cJSON_GetObjectItem(model, "batches")) {
        if (!cJSON_IsNumber(batch)) continue;
        if (!training) {
            checked += check_case(g, what, model, false, (int64_t)batch->valuedouble, "infer");
            continue;
        }
        for (size_t o = 0; o < sizeof OPTIMIZERS / sizeof *OPTIMIZERS; o++)
            checked += check_case(g, what, model, true, (int64_t)batch->valuedouble, OPTIMIZERS[o]);
    }
    est_graph_free(g);
    return checked;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s TRUTH_DIR\n", argv[0]);
        return 2;
    }
    bool absent;
    cJSON *truth = test_load_truth(argv[1], &absent);
    if (absent) return 77;
    int checked = 0;
    const cJSON *model;
    cJSON_ArrayForEach(model, cJSON_GetObjectItem(truth, "models")) {
        for (size_t e = 0; e < 2; e++) {
            checked += check_export(argv[1], model->string, model, TRAIN_EXPORTS[e], true);
            checked += check_export(argv[1], model->string, model, INFER_EXPORTS[e], false);
        }
    }
    cJSON_Delete(truth);
    printf("%d cases checked\n", checked);
    CHECK(checked > 0, "no case in %s/truth.json", argv[1]);
    return test_result("test_accuracy");
}
