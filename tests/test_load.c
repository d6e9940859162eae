/*
 * test_load: every export in shared/truth/onnx loads and estimates, and the
 * parameter counts agree with what PyTorch counted (truth.json).
 *
 * usage: test_load TRUTH_DIR MODELS_DIR
 */
#include <dirent.h>
#include <math.h>
#include <string.h>

#include "estimate.h"
#include "truth_util.h"

/* The TorchScript exporter drops BertModel's pooler (not on the path to
 * last_hidden_state): 768*768 weights + 768 bias. */
#define BERT_POOLER_PARAMS 590592

static double truth_params(const cJSON *truth, const char *model) {
    const cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(truth, "models"), model);
    const cJSON *n = cJSON_GetObjectItem(m, "n_params");
    return cJSON_IsNumber(n) ? n->valuedouble : -1;
}

static void check_export(const char *dir, const char *file, const cJSON *truth) {
    char path[4096], model[256];
    snprintf(path, sizeof path, "%s/onnx/%s", dir, file);
    snprintf(model, sizeof model, "%s", file);
    char *dot = strchr(model, '.');
    if (dot) *dot = '\0';
    est_error err;
    est_graph *g = NULL;
    est_status st = est_load_file(path, &g, &err);
    CHECK(st == EST_OK, "%s: %s", file, err.message);
    if (st != EST_OK) return;
    int64_t batches[] = {1, 8, 32};
    for (int b = 0; b < 3; b++) {
        est_options opt;
        est_options_init(&opt);
        opt.batch = batches[b];
        est_report *r = NULL;
        st = est_estimate(g, &opt, &r, &err);
        CHECK(st == EST_OK, "%s batch %lld: %s", file, (long long)batches[b], err.message);
        if (st != EST_OK) break;
        const est_tensor_info *out = est_report_output(r, 0);
        CHECK(out && out->rank >= 2 && out->shape[0] == batches[b], "%s: output's leading dim is not the batch",
              file);
        if (b == 0) {
            double want = truth_params(truth, model);
            double got = (double)est_report_totals(r)->param_count;
            CHECK(want > 0, "%s: no n_params in truth.json", model);
            if (strstr(file, ".legacy-train.")) {
                if (strcmp(model, "bert_base") == 0) want -= BERT_POOLER_PARAMS;
                CHECK(got == want, "%s: %.0f params, truth says %.0f", file, got, want);
            } else {
                CHECK(fabs(got - want) / want < 0.015, "%s: %.0f params, truth %.0f (more than 1.5%% off)", file,
                      got, want);
            }
            if (strcmp(file, "resnet18.legacy-train.onnx") == 0)
                CHECK(est_report_totals(r)->buffer_count == 9600, "resnet18: %llu buffer elements, want 9600",
                      (unsigned long long)est_report_totals(r)->buffer_count);
        }
        est_report_free(r);
    }
    est_graph_free(g);
}

/* Re-estimating one loaded graph at 100 batch sizes is monotone in batch and
 * equals estimating a freshly loaded copy. */
static uint64_t fresh_output_bytes(const char *path, int64_t batch) {
    est_error err;
    est_graph *g = NULL;
    est_report *r = NULL;
    est_options opt;
    est_options_init(&opt);
    opt.batch = batch;
    uint64_t bytes = 0;
    if (est_load_file(path, &g, &err) == EST_OK && est_estimate(g, &opt, &r, &err) == EST_OK)
        bytes = est_report_totals(r)->output_bytes;
    est_report_free(r);
    est_graph_free(g);
    return bytes;
}

static void check_reestimate(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/onnx/resnet18.legacy-train.onnx", dir);
    est_error err;
    est_graph *g = NULL;
    if (est_load_file(path, &g, &err) != EST_OK) return;
    uint64_t prev = 0;
    for (int64_t b = 1; b <= 100; b++) {
        est_options opt;
        est_options_init(&opt);
        opt.batch = b;
        est_report *r = NULL;
        est_status st = est_estimate(g, &opt, &r, &err);
        CHECK(st == EST_OK, "batch %lld: %s", (long long)b, err.message);
        if (st != EST_OK) break;
        uint64_t bytes = est_report_totals(r)->output_bytes;
        CHECK(bytes > prev, "output bytes not increasing at batch %lld", (long long)b);
        if (b % 25 == 0)
            CHECK(bytes == fresh_output_bytes(path, b), "batch %lld differs from a fresh load", (long long)b);
        prev = bytes;
        est_report_free(r);
    }
    est_graph_free(g);
}

static void check_models_dir(const char *dir) {
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d) return;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        const char *ext = strrchr(e->d_name, '.');
        if (!ext || (strcmp(ext, ".onnx") && strcmp(ext, ".json"))) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        est_error err;
        est_graph *g = NULL;
        est_status st = est_load_file(path, &g, &err);
        CHECK(st == EST_OK, "%s: %s", e->d_name, err.message);
        if (st == EST_OK) {
            est_options opt;
            est_options_init(&opt);
            opt.batch = 4;
            est_binding seq = {"seq", 128};
            if (strstr(e->d_name, "transformer")) {
                opt.dims = &seq;
                opt.n_dims = 1;
            }
            est_report *r = NULL;
            st = est_estimate(g, &opt, &r, &err);
            CHECK(st == EST_OK, "%s: %s", e->d_name, err.message);
            est_report_free(r);
            n++;
        }
        est_graph_free(g);
    }
    closedir(d);
    CHECK(n >= 4, "models/ holds %d loadable models, want at least 4", n);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TRUTH_DIR MODELS_DIR\n", argv[0]);
        return 2;
    }
    bool absent;
    cJSON *truth = test_load_truth(argv[1], &absent);
    if (absent) return 77;
    char path[4096];
    snprintf(path, sizeof path, "%s/onnx", argv[1]);
    DIR *d = opendir(path);
    int files = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".onnx") != 0) continue;
        check_export(argv[1], e->d_name, truth);
        files++;
    }
    if (d) closedir(d);
    CHECK(files == 28, "found %d exports, expected 28", files);
    check_reestimate(argv[1]);
    check_models_dir(argv[2]);
    cJSON_Delete(truth);
    return test_result("test_load");
}
