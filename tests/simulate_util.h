/*
 * simulate_util.h: what the simulation's tests (test_simulate,
 * test_simulate_alloc, test_simulate_repeat, test_checkpoint) share: one
 * estimate with the options a test varies, the peak checked against figures
 * derived by hand, a layer by name, and the MLP and Relu graphs.
 */
#ifndef MEMEST_TESTS_SIMULATE_UTIL_H
#define MEMEST_TESTS_SIMULATE_UTIL_H

#include <string.h>

#include "estimate_util.h"

typedef struct run_opts {
    est_mode mode;
    est_optimizer opt;
    est_dtype dtype;
    int64_t batch;
    const est_binding *dims;
    size_t n_dims;
    est_amp amp;
    const est_input_shape *shape; /* one input's shape in place of the declared one */
} run_opts;

static inline est_report *run(const est_graph *g, run_opts o) {
    if (!g) return NULL;
    est_options opt;
    est_options_init(&opt);
    opt.mode = o.mode;
    opt.optimizer = o.opt;
    if (o.dtype != EST_DT_UNDEFINED) opt.dtype = o.dtype;
    opt.batch = o.batch;
    opt.dims = o.dims;
    opt.n_dims = o.n_dims;
    opt.amp = o.amp;
    opt.input_shapes = o.shape;
    opt.n_input_shapes = o.shape ? 1 : 0;
    return estimate_checked(g, &opt);
}

/* The categories of the peak must add up to its bytes (estimate.h). */
static inline void check_peak_sums(const est_peak *p, const char *what) {
    uint64_t sum = p->params + p->buffers + p->grads + p->optimizer + p->activations + p->temp + p->inputs + p->comm + p->other;
    CHECK(sum == p->bytes, "%s: peak categories sum to %llu, peak is %llu", what, U(sum), U(p->bytes));
}

typedef struct expect_peak {
    uint64_t bytes;
    est_phase phase;
    const char *layer;
    uint64_t params, buffers, grads, optimizer, activations, temp, inputs, other;
} expect_peak;

static inline void check_peak(const est_report *r, const expect_peak *e, const char *what) {
    if (!r) return;
    const est_peak *p = est_report_peak(r);
    CHECK(p->bytes == e->bytes, "%s: peak %llu, expected %llu", what, U(p->bytes), U(e->bytes));
    CHECK(est_report_totals(r)->peak_bytes == e->bytes, "%s: totals.peak_bytes %llu, expected %llu", what,
          U(est_report_totals(r)->peak_bytes), U(e->bytes));
    CHECK(p->phase == e->phase, "%s: peak phase %s, expected %s", what, est_phase_name(p->phase),
          est_phase_name(e->phase));
    CHECK(p->layer && strcmp(p->layer, e->layer) == 0, "%s: peak at layer '%s', expected '%s'", what,
          p->layer ? p->layer : "(null)", e->layer);
    CHECK(p->params == e->params, "%s: peak params %llu, expected %llu", what, U(p->params), U(e->params));
    CHECK(p->buffers == e->buffers, "%s: peak buffers %llu, expected %llu", what, U(p->buffers), U(e->buffers));
    CHECK(p->grads == e->grads, "%s: peak grads %llu, expected %llu", what, U(p->grads), U(e->grads));
    CHECK(p->optimizer == e->optimizer, "%s: peak optimizer %llu, expected %llu", what, U(p->optimizer),
          U(e->optimizer));
    CHECK(p->activations == e->activations, "%s: peak activations %llu, expected %llu", what, U(p->activations),
          U(e->activations));
    CHECK(p->temp == e->temp, "%s: peak temp %llu, expected %llu", what, U(p->temp), U(e->temp));
    CHECK(p->inputs == e->inputs, "%s: peak inputs %llu, expected %llu", what, U(p->inputs), U(e->inputs));
    CHECK(p->other == e->other, "%s: peak other %llu, expected %llu", what, U(p->other), U(e->other));
    check_peak_sums(p, what);
}

static inline const est_layer *layer_named(const est_report *r, const char *name) {
    for (size_t i = 0; r && i < est_report_layer_count(r); i++)
        if (strcmp(est_report_layer(r, i)->name, name) == 0) return est_report_layer(r, i);
    CHECK(false, "no layer '%s'", name);
    return NULL;
}

/* x [batch, 100] -> fc1 (Gemm, W1 [200, 100], b1 [200]) -> h [batch, 200]
 *   -> relu -> r [batch, 200] -> fc2 (Gemm, W2 [10, 200], b2 [10]) -> y [batch, 10]
 * Sizes are picked so that the 512-byte rounding matters for most tensors. */
/* The MLP named `name` with input x of dims `x_dims`. */
#define MLP_JSON(name, x_dims) \
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"" name "\", \"opset_import\": {\"\": 17},\n" \
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [" x_dims "]}],\n" \
    " \"initializers\": [\n" \
    "  {\"name\": \"W1\", \"dtype\": \"float32\", \"dims\": [200, 100]},\n" \
    "  {\"name\": \"b1\", \"dtype\": \"float32\", \"dims\": [200]},\n" \
    "  {\"name\": \"W2\", \"dtype\": \"float32\", \"dims\": [10, 200]},\n" \
    "  {\"name\": \"b2\", \"dtype\": \"float32\", \"dims\": [10]}],\n" \
    " \"nodes\": [\n" \
    "  {\"name\": \"fc1\", \"op\": \"Gemm\", \"inputs\": [\"x\", \"W1\", \"b1\"], \"outputs\": [\"h\"],\n" \
    "   \"attributes\": {\"transB\": {\"int\": 1}}},\n" \
    "  {\"name\": \"relu\", \"op\": \"Relu\", \"inputs\": [\"h\"], \"outputs\": [\"r\"]},\n" \
    "  {\"name\": \"fc2\", \"op\": \"Gemm\", \"inputs\": [\"r\", \"W2\", \"b2\"], \"outputs\": [\"y\"],\n" \
    "   \"attributes\": {\"transB\": {\"int\": 1}}}],\n" \
    " \"outputs\": [\"y\"]}\n"

/* y = relu(x), x [batch, n]. */
#define RELU_JSON \
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"relu\", \"opset_import\": {\"\": 17},\n" \
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", \"n\"]}],\n" \
    " \"nodes\": [{\"name\": \"relu\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"y\"]}],\n" \
    " \"outputs\": [\"y\"]}\n"

#endif
