/*
 * test_step_time: the step's time (est_time_estimate, libestimate/
 * step_time.c) on small graphs, every figure derived by hand from the
 * device table (libestimate/device.c) and the fractions of step_time.c:
 * matmuls and other ops reach 0.75 of their FLOP/s, convolutions 0.55,
 * memory 0.86 of the bandwidth; a kernel takes at least 1 us.
 *
 * Checks:
 *  1. a compute-bound MatMul (4096^3, float32, on CUDA cores: PyTorch's
 *     default is no TF32 for matmuls), in bfloat16 (tensor cores) and
 *     under --amp bf16;
 *  2. a bandwidth-bound Relu (two 256 MiB tensors);
 *  3. a Conv on TF32 tensor cores on the H100, on CUDA cores on the T4
 *     (no TF32 there);
 *  4. a host-bound training step (MatMul + Relu at batch 1), every clock
 *     tick derived: forward, backward, the optimizer, the step;
 *  5. bad input: NULL report or out, negative or infinite host costs;
 *     a layer out of range; the defaults (device: the report's, H100).
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "estimate.h"
#include "test_util.h"

#define MATMUL_RATE(flops) ((flops) * 0.75)
#define CONV_RATE(flops) ((flops) * 0.55)
#define BANDWIDTH(bw) ((bw) * 0.86)

static bool near(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b) + 1e-15; }

static const char matmul_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"mm\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 4096]}],\n"
    " \"initializers\": [{\"name\": \"w\", \"dtype\": \"float32\", \"dims\": [4096, 4096]}],\n"
    " \"nodes\": [{\"name\": \"mm\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"y\"]}],\n"
    " \"outputs\": [\"y\"]}\n";

static const char relu_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"relu\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 1048576]}],\n"
    " \"nodes\": [{\"name\": \"relu\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"y\"]}],\n"
    " \"outputs\": [\"y\"]}\n";

static const char conv_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"conv\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 64, 56, 56]}],\n"
    " \"initializers\": [{\"name\": \"w\", \"dtype\": \"float32\", \"dims\": [64, 64, 3, 3]}],\n"
    " \"nodes\": [{\"name\": \"conv\", \"op\": \"Conv\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"y\"],\n"
    "   \"attributes\": {\"kernel_shape\": {\"ints\": [3, 3]}, \"pads\": {\"ints\": [1, 1, 1, 1]}}}],\n"
    " \"outputs\": [\"y\"]}\n";

static const char small_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"small\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 8]}],\n"
    " \"initializers\": [{\"name\": \"w\", \"dtype\": \"float32\", \"dims\": [8, 8]}],\n"
    " \"nodes\": [{\"name\": \"mm\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"h\"]},\n"
    "           {\"name\": \"relu\", \"op\": \"Relu\", \"inputs\": [\"h\"], \"outputs\": [\"y\"]}],\n"
    " \"outputs\": [\"y\"]}\n";

static est_graph *load(const char *json, const char *name) {
    est_error err;
    est_graph *g = NULL;
    if (est_load_json_buffer(json, strlen(json), name, &g, &err) != EST_OK) CHECK(false, "%s: %s", name, err.message);
    return g;
}

/* A report reads its graph: both are freed together. */
typedef struct estimate {
    est_graph *g;
    est_report *r;
} estimate;

static void free_estimate(estimate *e) {
    est_report_free(e->r);
    est_graph_free(e->g);
}

/* The time of graph `json` under `opt` on GPU `gpu` with host `host`
 * (NULL: the defaults); *e gets the graph and report (the caller frees
 * them). NULL after a failed check. */
static est_time *timed(const char *json, est_options opt, const char *gpu, const est_host *host, estimate *e) {
    est_error err;
    e->r = NULL;
    e->g = load(json, "graph");
    if (!e->g) return NULL;
    if (est_estimate(e->g, &opt, &e->r, &err) != EST_OK) {
        CHECK(false, "estimate: %s", err.message);
        return NULL;
    }
    est_time *t = NULL;
    if (est_time_estimate(e->r, est_device_find(gpu), host, &t, &err) != EST_OK) CHECK(false, "time: %s", err.message);
    return t;
}

static est_options infer_at(int64_t batch) {
    est_options opt;
    est_options_init(&opt);
    opt.mode = EST_MODE_INFER;
    opt.batch = batch;
    return opt;
}

/* The forward time of layer 0 of `json` in inference. */
static double forward_of(const char *json, est_options opt, const char *gpu, est_bound *bound) {
    estimate e;
    est_time *t = timed(json, opt, gpu, NULL, &e);
    double s = -1;
    if (t) {
        s = est_time_layer(t, 0)->forward_s;
        *bound = est_time_layer(t, 0)->forward_bound;
    }
    est_time_free(t);
    free_estimate(&e);
    return s;
}

static void check_matmul(void) {
    const est_device *h100 = est_device_find("H100-80GB");
    double flops = 2.0 * 4096 * 4096 * 4096;
    est_bound b;
    double s = forward_of(matmul_json, infer_at(4096), "H100-80GB", &b);
    CHECK(near(s, flops / MATMUL_RATE(h100->flops_fp32)) && b == EST_BOUND_COMPUTE, "fp32 matmul %g s, %s", s,
          est_bound_name(b));
    CHECK(near(s, 1.37438953472e11 / 50.25e12), "fp32 matmul %g s, want 2.735 ms", s);
    est_options bf = infer_at(4096);
    bf.dtype = EST_DT_BFLOAT16;
    s = forward_of(matmul_json, bf, "H100-80GB", &b);
    CHECK(near(s, flops / MATMUL_RATE(989.4e12)) && b == EST_BOUND_COMPUTE, "bf16 matmul %g s", s);
    est_options amp = infer_at(4096);
    amp.amp = EST_AMP_BF16;
    s = forward_of(matmul_json, amp, "H100-80GB", &b);
    CHECK(near(s, flops / MATMUL_RATE(989.4e12)), "amp bf16 matmul %g s", s);
}

static void check_relu(void) {
    est_bound b;
    double s = forward_of(relu_json, infer_at(64), "H100-80GB", &b);
    double bytes = 2.0 * 64 * 1048576 * 4;  /* read x, write y */
    CHECK(near(s, bytes / BANDWIDTH(3350e9)) && b == EST_BOUND_MEMORY, "relu %g s (want 186.3 us), %s", s,
          est_bound_name(b));
    s = forward_of(relu_json, infer_at(64), "H200", &b);
    CHECK(near(s, bytes / BANDWIDTH(4800e9)), "relu on the H200 %g s", s);
}

static void check_conv(void) {
    double flops = 2.0 * 32 * 64 * 56 * 56 * 64 * 9;
    est_bound b;
    double s = forward_of(conv_json, infer_at(32), "H100-80GB", &b);
    CHECK(near(s, flops / CONV_RATE(494.7e12)) && b == EST_BOUND_COMPUTE, "conv, TF32, %g s (want 27.2 us)", s);
    s = forward_of(conv_json, infer_at(32), "T4", &b);
    CHECK(near(s, flops / CONV_RATE(8.1e12)), "conv on the T4, float32 cores, %g s", s);
}

/* MatMul + Relu at batch 1, Adam: every kernel takes the 1 us floor (the
 * MatMul's backward 2: the input's gradient and the weight's). Host:
 * forward 10 us a layer + 4 a parameter, backward 20 + 8 a trainable
 * parameter, 5 a parameter in the optimizer. Clocks (host, GPU) in us:
 * mm (14, 15), relu (24, 25); backward relu (44, 45), mm (72, 74);
 * optimizer (77, 78). */
static void check_host_bound(void) {
    est_options opt;
    est_options_init(&opt);
    opt.batch = 1;
    est_host h = {10e-6, 4e-6, 20e-6, 8e-6, 5e-6};
    estimate e;
    est_time *t = timed(small_json, opt, "H100-80GB", &h, &e);
    if (!t) {
        free_estimate(&e);
        return;
    }
    const est_step_time *st = est_time_step(t);
    CHECK(near(st->step_s, 78e-6), "step %g s, want 78 us", st->step_s);
    CHECK(near(st->host_s, 77e-6), "host %g s, want 77 us", st->host_s);
    CHECK(near(st->phase_s[EST_PHASE_FORWARD], 25e-6), "forward %g", st->phase_s[EST_PHASE_FORWARD]);
    CHECK(near(st->phase_s[EST_PHASE_BACKWARD], 49e-6), "backward %g", st->phase_s[EST_PHASE_BACKWARD]);
    CHECK(near(st->phase_s[EST_PHASE_OPTIMIZER], 4e-6), "optimizer %g", st->phase_s[EST_PHASE_OPTIMIZER]);
    CHECK(near(st->device_s[EST_PHASE_FORWARD], 2e-6) && near(st->device_s[EST_PHASE_BACKWARD], 3e-6) &&
              near(st->device_s[EST_PHASE_OPTIMIZER], 1e-6) && near(st->device_total_s, 6e-6),
          "kernels %g %g %g, total %g", st->device_s[0], st->device_s[1], st->device_s[2], st->device_total_s);
    CHECK(est_time_layer(t, 1)->backward_bound == EST_BOUND_LAUNCH, "relu backward: %s",
          est_bound_name(est_time_layer(t, 1)->backward_bound));
    CHECK(!strcmp(st->device->name, "H100-80GB"), "device %s", st->device->name);
    est_time_free(t);
    free_estimate(&e);
}

static void check_bad_input(void) {
    estimate e;
    est_time *t = timed(small_json, infer_at(1), "H100-80GB", NULL, &e);
    est_report *r = e.r;
    est_error err;
    est_time *out = (est_time *)&err;
    CHECK(est_time_estimate(NULL, NULL, NULL, &out, &err) == EST_EINVAL && out == NULL, "NULL report");
    CHECK(est_time_estimate(r, NULL, NULL, NULL, &err) == EST_EINVAL, "NULL out");
    est_host h;
    est_host_init(&h);
    h.backward_op_s = -1e-6;
    CHECK(est_time_estimate(r, NULL, &h, &out, &err) == EST_EINVAL && strstr(err.message, "negative"), "%s",
          err.message);
    est_host_init(&h);
    h.forward_op_s = INFINITY;
    CHECK(est_time_estimate(r, NULL, &h, &out, &err) == EST_EINVAL, "infinite host cost");
    CHECK(est_time_layer(t, 2) == NULL && est_time_layer(NULL, 0) == NULL && est_time_step(NULL) == NULL,
          "out of range");
    est_time_free(NULL);
    if (est_time_estimate(r, NULL, NULL, &out, &err) == EST_OK) {
        CHECK(!strcmp(est_time_step(out)->device->name, "H100-80GB"), "default device %s",
              est_time_step(out)->device->name);
        CHECK(est_time_step(out)->phase_s[EST_PHASE_BACKWARD] == 0 && est_time_layer(out, 0)->backward_s == 0,
              "inference has no backward");
        est_time_free(out);
    } else {
        CHECK(false, "defaults: %s", err.message);
    }
    CHECK(!strcmp(est_bound_name(EST_BOUND_MEMORY), "memory") && !strcmp(est_bound_name((est_bound)9), "unknown"),
          "bound names");
    est_time_free(t);
    free_estimate(&e);
}

int main(void) {
    check_matmul();
    check_relu();
    check_conv();
    check_host_bound();
    check_bad_input();
    return test_result("test_step_time");
}
