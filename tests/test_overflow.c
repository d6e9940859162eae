/*
 * test_overflow: byte counts at the edge of 64 bits. Every count and sum is
 * exact, or the estimate fails with EST_EOVERFLOW and says why; no fit is
 * ever claimed on a number that wrapped or saturated.
 *
 * The graphs are JSON graphs built here (weights have dims, no data), so a
 * 2^61-byte weight costs nothing to load.
 *
 * usage: test_overflow MODELS_DIR
 */
#include <stdbool.h>
#include <string.h>

#include "estimate.h"
#include "test_util.h"

/* A JSON graph: input x of [2^28, n / 2^28] float32 (each dim within
 * est_limits.max_dim_value), then k Add nodes, each adding one float32
 * weight of that shape to the running sum. */
static char *chain_of_adds(uint64_t n, int k) {
    unsigned long long rows = 1ull << 28, cols = (unsigned long long)(n >> 28);
    size_t cap = 4096 + (size_t)k * 256;
    char *s = malloc(cap);
    if (!s) return NULL;
    size_t used = (size_t)snprintf(s, cap,
                                   "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"adds\",\n"
                                   " \"opset_import\": {\"\": 17},\n"
                                   " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [%llu, %llu]}],\n"
                                   " \"initializers\": [",
                                   rows, cols);
    for (int i = 0; i < k; i++)
        used += (size_t)snprintf(s + used, cap - used,
                                 "%s{\"name\": \"w%d\", \"dtype\": \"float32\", \"dims\": [%llu, %llu]}", i ? ", " : "",
                                 i, rows, cols);
    used += (size_t)snprintf(s + used, cap - used, "],\n \"nodes\": [");
    for (int i = 0; i < k; i++) {
        char in[32];
        if (i) snprintf(in, sizeof in, "h%d", i - 1);
        else snprintf(in, sizeof in, "x");
        used += (size_t)snprintf(s + used, cap - used,
                                 "%s{\"name\": \"add%d\", \"op\": \"Add\", \"inputs\": [\"%s\", \"w%d\"], "
                                 "\"outputs\": [\"h%d\"]}",
                                 i ? ", " : "", i, in, i, i);
    }
    snprintf(s + used, cap - used, "],\n \"outputs\": [\"h%d\"]}\n", k - 1);
    return s;
}

static est_status estimate(const char *json, const char *name, est_mode mode, est_totals *tot, est_error *err) {
    est_graph *g = NULL;
    est_status st = est_load_json_buffer(json, strlen(json), name, &g, err);
    if (st != EST_OK) return st;
    est_options opt;
    est_options_init(&opt);
    opt.mode = mode;
    est_report *r = NULL;
    st = est_estimate(g, &opt, &r, err);
    if (st == EST_OK && tot) *tot = *est_report_totals(r);
    est_report_free(r);
    est_graph_free(g);
    return st;
}

/* est_dtype_bytes is exact whenever the byte count fits, though count x
 * bits may not (the old arithmetic saturated 2^61 float32 elements). */
static void dtype_bytes(void) {
    CHECK(est_dtype_bytes(EST_DT_FLOAT, (uint64_t)1 << 61) == (uint64_t)1 << 63, "2^61 float32");
    CHECK(est_dtype_bytes(EST_DT_FLOAT, ((uint64_t)1 << 62) - 1) == UINT64_MAX - 3, "2^62 - 1 float32");
    CHECK(est_dtype_bytes(EST_DT_FLOAT, (uint64_t)1 << 62) == UINT64_MAX, "2^62 float32 saturates");
    CHECK(est_dtype_bytes(EST_DT_DOUBLE, (uint64_t)1 << 60) == (uint64_t)1 << 63, "2^60 double");
    /* int4: ceil(count / 2) bytes, for the largest count too */
    CHECK(est_dtype_bytes(EST_DT_INT4, UINT64_MAX) == (uint64_t)1 << 63, "2^64 - 1 int4: %llu",
          (unsigned long long)est_dtype_bytes(EST_DT_INT4, UINT64_MAX));
    CHECK(est_dtype_bytes(EST_DT_INT4, 3) == 2 && est_dtype_bytes(EST_DT_INT4, 9) == 5, "small int4 counts");
    CHECK(est_dtype_bytes(EST_DT_BOOL, UINT64_MAX) == UINT64_MAX, "2^64 - 1 bool is exact");
}

/* Large but exact: 7 weights of 2^57 float32 elements (2^59 bytes, half an
 * EiB each) in inference. The parameter bytes are 7 x 2^59, the peak holds
 * them all, and the allocator's segments hold the peak. */
static void exact_near_the_edge(void) {
    char *json = chain_of_adds((uint64_t)1 << 57, 7);
    est_totals tot;
    est_error err;
    est_status st = estimate(json, "seven.json", EST_MODE_INFER, &tot, &err);
    CHECK(st == EST_OK, "seven weights of 2^59 bytes: %s", st ? err.message : "");
    if (st == EST_OK) {
        CHECK(tot.param_bytes == (uint64_t)7 << 59, "param bytes %llu", (unsigned long long)tot.param_bytes);
        CHECK(tot.peak_bytes >= tot.param_bytes, "peak %llu below the parameters", (unsigned long long)tot.peak_bytes);
        CHECK(tot.reserved_bytes >= tot.peak_bytes, "reserved %llu below the peak %llu",
              (unsigned long long)tot.reserved_bytes, (unsigned long long)tot.peak_bytes);
    }
    free(json);
}

/* 32 such weights sum to 2^64 bytes: the old sums wrapped to a small peak.
 * One weight of 2^61 bytes is more than PyTorch allocates at once. */
static void too_large(void) {
    est_error err;
    char *json = chain_of_adds((uint64_t)1 << 57, 32);
    est_status st = estimate(json, "sum.json", EST_MODE_INFER, NULL, &err);
    CHECK(st == EST_EOVERFLOW && strstr(err.message, "sum.json") && strstr(err.message, "2^64"),
          "weights summing to 2^64 bytes: %s: %s", est_status_name(st), st ? err.message : "");
    free(json);

    json = chain_of_adds((uint64_t)1 << 59, 1);
    st = estimate(json, "huge.json", EST_MODE_TRAIN, NULL, &err);
    CHECK(st == EST_EOVERFLOW && strstr(err.message, "huge.json") && strstr(err.message, "1 EiB"),
          "one weight of 2^61 bytes: %s: %s", est_status_name(st), st ? err.message : "");
    free(json);
}

/* resnet18 at batch 2^38 is large and exact (the segments hold the peak);
 * at 2^39 its first Conv output passes 1 EiB; no fit is claimed on either
 * failure. */
static void resnet18_batches(const char *models) {
    char path[4096];
    snprintf(path, sizeof path, "%s/resnet18.onnx", models);
    est_graph *g = NULL;
    est_error err;
    if (est_load_file(path, &g, &err) != EST_OK) {
        CHECK(false, "%s: %s", path, err.message);
        return;
    }
    est_options opt;
    est_options_init(&opt);
    opt.batch = (int64_t)1 << 38;
    est_report *r = NULL;
    est_status st = est_estimate(g, &opt, &r, &err);
    CHECK(st == EST_OK, "batch 2^38: %s", st ? err.message : "");
    if (st == EST_OK) {
        const est_totals *t = est_report_totals(r);
        CHECK(t->reserved_bytes >= t->peak_bytes, "batch 2^38: reserved %llu below the peak %llu",
              (unsigned long long)t->reserved_bytes, (unsigned long long)t->peak_bytes);
    }
    est_report_free(r);
    r = NULL;
    opt.batch = (int64_t)1 << 39;
    st = est_estimate(g, &opt, &r, &err);
    CHECK(st == EST_EOVERFLOW && strstr(err.message, "/conv1/Conv") && strstr(err.message, "1 EiB"),
          "batch 2^39: %s: %s", est_status_name(st), st ? err.message : "");
    est_report_free(r);
    est_point pt;
    est_fit fit = {.gpu_bytes = UINT64_MAX, .reserve_bytes = 0};
    CHECK(est_estimate_point(g, &opt, opt.batch, &pt, &err) == EST_OK && pt.overflow && !est_point_fits(&fit, &pt),
          "batch 2^39 must be a point that fits nothing");
    est_graph_free(g);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODELS_DIR\n", argv[0]);
        return 2;
    }
    dtype_bytes();
    exact_near_the_edge();
    too_large();
    resnet18_batches(argv[1]);
    return test_result("test_overflow");
}
