/*
 * rules_util.h: what test_rules, test_rules_views, test_rules_unfold,
 * test_rules_verify, test_fusion and test_module_calls share beside
 * estimate_util.h: estimating a graph, finding a layer, and the small graphs
 * and figures several checks are derived from. Header-only, like
 * test_util.h, whose CHECK counts each executable's failures.
 */
#ifndef EST_RULES_UTIL_H
#define EST_RULES_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate_util.h"

static inline uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static inline uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

static inline est_report *run(const est_graph *g, est_mode mode, int64_t batch) {
    if (!g) return NULL;
    est_options opt;
    est_options_init(&opt);
    opt.mode = mode;
    opt.optimizer = EST_OPT_SGD;
    opt.batch = batch;
    return estimate_checked(g, &opt);
}

static inline const est_layer *layer_named(const est_report *r, const char *name, const char *what) {
    for (size_t i = 0; r && i < est_report_layer_count(r); i++)
        if (strcmp(est_report_layer(r, i)->name, name) == 0) return est_report_layer(r, i);
    CHECK(false, "%s: no layer '%s'", what, name);
    return NULL;
}

static inline size_t count_op(const est_report *r, const char *op) {
    size_t n = 0;
    for (size_t i = 0; r && i < est_report_layer_count(r); i++)
        if (strcmp(est_report_layer(r, i)->op, op) == 0) n++;
    return n;
}

/* The temporary bytes (est_layer.temp_bytes) of layer `layer` in an SGD
 * training step of the JSON graph `text` run by `kernels`, with only the
 * parameters named by `trainable` training (NULL: all); UINT64_MAX when the
 * graph or the estimate fails (which CHECK reports). */
static inline uint64_t layer_temp_in_training(const char *text, const char *what, const char *layer,
                                       const char *trainable, est_kernels kernels) {
    est_graph *g = load_json(text, what);
    if (!g) return UINT64_MAX;
    est_options opt;
    est_options_init(&opt);
    opt.mode = EST_MODE_TRAIN;
    opt.optimizer = EST_OPT_SGD;
    opt.kernels = kernels;
    const char *patterns[] = {trainable};
    if (trainable) {
        opt.params.trainable = patterns;
        opt.params.n_trainable = 1;
    }
    est_error err;
    est_report *r = NULL;
    uint64_t temp = UINT64_MAX;
    if (est_estimate(g, &opt, &r, &err) != EST_OK) {
        CHECK(false, "%s: estimate failed: %s", what, err.message);
    } else {
        const est_layer *L = layer_named(r, layer, what);
        if (L) temp = L->temp_bytes;
    }
    est_report_free(r);
    est_graph_free(g);
    return temp;
}

/* One Conv: x [n, c, hw, hw] -> conv (W [f, c/group, k, k], pads k/2) -> y.
 * The weight is a parameter, so in training the weight gradient's backward
 * workspace counts too. */
static inline est_graph *conv_graph_strided(int n, int c, int hw, int f, int group, int k, int stride) {
    char text[2048];
    int p = k / 2;
    snprintf(text, sizeof text,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"conv\", \"opset_import\": {\"\": 17},\n"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [%d, %d, %d, %d]}],\n"
             " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [%d, %d, %d, %d]}],\n"
             " \"nodes\": [{\"name\": \"conv\", \"op\": \"Conv\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"y\"],\n"
             "   \"attributes\": {\"group\": {\"int\": %d}, \"kernel_shape\": {\"ints\": [%d, %d]},\n"
             "                  \"strides\": {\"ints\": [%d, %d]}, \"pads\": {\"ints\": [%d, %d, %d, %d]}}}],\n"
             " \"outputs\": [\"y\"]}\n",
             n, c, hw, hw, f, c / group, k, k, group, k, k, stride, stride, p, p, p, p);
    return load_json(text, "conv");
}

static inline est_graph *conv_graph(int n, int c, int hw, int f, int group, int k) {
    return conv_graph_strided(n, c, hw, f, group, k, 1);
}

/* The temp bytes of layer `name` of g (freed here) under
 * EST_KERNELS_VERIFY in `mode`; UINT64_MAX when it does not estimate. */
static inline uint64_t verify_layer_temp(est_graph *g, est_mode mode, const char *name, const char *what) {
    est_options opt;
    est_options_init(&opt);
    opt.mode = mode;
    opt.kernels = EST_KERNELS_VERIFY;
    est_report *r = NULL;
    est_error err;
    uint64_t temp = UINT64_MAX;
    if (g && est_estimate(g, &opt, &r, &err) == EST_OK) {
        const est_layer *L = layer_named(r, name, what);
        if (L) temp = L->temp_bytes;
    }
    est_report_free(r);
    est_graph_free(g);
    return temp;
}

/* g's peak with PyTorch's kernels (peak[0]) and with verify's (peak[1]); 0
 * where the estimate fails, which is a failed check. */
static inline void peaks_by_kernels_amp(const est_graph *g, est_mode mode, est_optimizer optimizer, est_amp amp,
                                 const char *what, uint64_t peak[2]) {
    for (int k = 0; k < 2; k++) {
        peak[k] = 0;
        est_options opt;
        est_options_init(&opt);
        opt.mode = mode;
        opt.optimizer = optimizer;
        opt.amp = amp;
        opt.kernels = k ? EST_KERNELS_VERIFY : EST_KERNELS_PYTORCH;
        est_report *r = NULL;
        est_error err;
        if (g && est_estimate(g, &opt, &r, &err) == EST_OK) peak[k] = est_report_peak(r)->bytes;
        else CHECK(false, "%s: %s", what, g ? err.message : "no graph");
        est_report_free(r);
    }
}

static inline void peaks_by_kernels(const est_graph *g, est_mode mode, est_optimizer optimizer, const char *what,
                             uint64_t peak[2]) {
    peaks_by_kernels_amp(g, mode, optimizer, EST_AMP_NONE, what, peak);
}

/* A model file of dir, loaded. */
static inline est_graph *load_export(const char *dir, const char *file) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    est_error err;
    est_graph *g = NULL;
    if (est_load_file(path, &g, &err) != EST_OK) {
        CHECK(false, "%s: load failed: %s", file, err.message);
        return NULL;
    }
    return g;
}

#endif
