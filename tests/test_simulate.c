/*
 * test_simulate: the training-step and inference simulation
 * (libestimate/simulate.c, docs/memory-model.md) on small hand-built graphs,
 * through the public API only.
 *
 * Every expected figure is derived by hand from the rules of
 * docs/memory-model.md and written out as arithmetic, one term per tensor:
 *  - every tensor is one allocation rounded up to 512 bytes (R() below);
 *  - resident before the step: parameters, buffers, optimizer state (momentum
 *    1x params, adam 2x params), the input batch, and in training the
 *    previous iteration's y and loss;
 *  - forward: each op allocates its outputs; an activation is freed after its
 *    last reader unless a backward saved it;
 *  - after the forward, the old y and loss go and the new loss (512) comes;
 *  - backward: the seed (512, freed at once) and dy; per node in reverse,
 *    the input gradients (a parameter's becomes .grad and stays), then the
 *    output gradients and the tensors only it had saved are freed;
 *  - optimizer: adam materialises sqrt(exp_avg_sq), one params-sized temp.
 *
 * Checks:
 *  1. a 2-layer MLP (Gemm -> Relu -> Gemm) in inference;
 *  2. the same MLP in training with sgd, momentum and adam (small and large
 *     batch), FLOPs and saved bytes per layer;
 *  4. views (Flatten, Reshape) allocate nothing; a Flatten of a transposed
 *     (non-contiguous) tensor copies;
 *  5. float16 halves parameter bytes;
 *  7. the MLP under --amp bf16 / fp16 (autocast): float32 weights, grads and
 *     state; low-precision copies of x and the weights; low activations.
 *  9. input shapes (est_options.input_shapes): the MLP exported with a fixed
 *     x [1, 100], given [batch, 100], is the symbolic MLP at every batch;
 *     a new symbol bound by name; a graph symbol reused; the graph left
 *     unchanged; and the errors (unknown input, wrong rank, bad dims).
 * The allocator (3. rounding, the caching allocator's replay and skipping
 * it) is test_simulate_alloc; one graph re-estimated (6.) is
 * test_simulate_repeat; activation checkpointing is test_checkpoint.
 *
 * usage: test_simulate MODELS_DIR
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simulate_util.h"

/* ---- the MLP ---------------------------------------------------------------------- */

static const char mlp_json[] = MLP_JSON("mlp", "\"batch\", 100");

/* The same MLP with a Flatten (axis 1) of the rank-2 h between fc1 and relu:
 * a view, so nothing changes, not even in the backward (the gradient of a
 * view is a view of the incoming gradient). */
static const char mlp_flatten_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"mlp_flatten\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 100]}],\n"
    " \"initializers\": [\n"
    "  {\"name\": \"W1\", \"dtype\": \"float32\", \"dims\": [200, 100]},\n"
    "  {\"name\": \"b1\", \"dtype\": \"float32\", \"dims\": [200]},\n"
    "  {\"name\": \"W2\", \"dtype\": \"float32\", \"dims\": [10, 200]},\n"
    "  {\"name\": \"b2\", \"dtype\": \"float32\", \"dims\": [10]}],\n"
    " \"nodes\": [\n"
    "  {\"name\": \"fc1\", \"op\": \"Gemm\", \"inputs\": [\"x\", \"W1\", \"b1\"], \"outputs\": [\"h\"],\n"
    "   \"attributes\": {\"transB\": {\"int\": 1}}},\n"
    "  {\"name\": \"flat\", \"op\": \"Flatten\", \"inputs\": [\"h\"], \"outputs\": [\"f\"],\n"
    "   \"attributes\": {\"axis\": {\"int\": 1}}},\n"
    "  {\"name\": \"relu\", \"op\": \"Relu\", \"inputs\": [\"f\"], \"outputs\": [\"r\"]},\n"
    "  {\"name\": \"fc2\", \"op\": \"Gemm\", \"inputs\": [\"r\", \"W2\", \"b2\"], \"outputs\": [\"y\"],\n"
    "   \"attributes\": {\"transB\": {\"int\": 1}}}],\n"
    " \"outputs\": [\"y\"]}\n";

/* Byte figures of the MLP at batch B in float32 (elem = 4) or float16 (2). */
typedef struct mlp_sizes {
    uint64_t W1, b1, W2, b2, params;  /* rounded allocations */
    uint64_t x, h, r, y, loss;
} mlp_sizes;

static mlp_sizes mlp_sizes_of(uint64_t B, uint64_t elem) {
    mlp_sizes s;
    s.W1 = R(200 * 100 * elem);
    s.b1 = R(200 * elem);
    s.W2 = R(10 * 200 * elem);
    s.b2 = R(10 * elem);
    s.params = s.W1 + s.b1 + s.W2 + s.b2;
    s.x = R(B * 100 * elem);
    s.h = R(B * 200 * elem);
    s.r = R(B * 200 * elem);
    s.y = R(B * 10 * elem);
    s.loss = 512; /* a scalar, one minimal block */
    return s;
}

static void test_mlp_sizes(void) {
    /* Pin the rounding arithmetic the derivations below rely on, so a wrong
     * R() cannot silently agree with a wrong library. */
    mlp_sizes s = mlp_sizes_of(4, 4);
    CHECK(s.W1 == 80384, "W1: 80000 bytes -> 157 blocks of 512 = 80384, got %llu", U(s.W1));
    CHECK(s.b1 == 1024, "b1: 800 bytes -> 1024, got %llu", U(s.b1));
    CHECK(s.W2 == 8192, "W2: 8000 bytes -> 8192, got %llu", U(s.W2));
    CHECK(s.b2 == 512, "b2: 40 bytes -> 512, got %llu", U(s.b2));
    CHECK(s.params == 90112, "params: 90112, got %llu", U(s.params));
    CHECK(s.x == 2048 && s.h == 3584 && s.y == 512, "x 1600 -> 2048, h 3200 -> 3584, y 160 -> 512");
}

/* 1. Inference: one forward without autograd. */
static void test_mlp_infer(void) {
    est_graph *g = load_json(mlp_json, "mlp.json");
    est_report *r = run(g, (run_opts){.mode = EST_MODE_INFER, .batch = 4});
    if (!r) goto out;
    mlp_sizes s = mlp_sizes_of(4, 4);
    const est_totals *t = est_report_totals(r);
    /* Walk: resident W + x; fc1 allocates h; relu allocates r while h is
     * still being read (the peak); h is freed after relu; fc2 allocates y
     * (512) and then r is freed: y never coexists with h, so the peak holds
     * the two largest simultaneously live activations, h and r. */
    uint64_t peak = s.params   /* W1 + b1 + W2 + b2 = 90112 */
                    + s.x      /* the input batch: 4 x 100 floats = 1600 -> 2048 */
                    + s.h      /* fc1's output, read by relu: 3200 -> 3584 */
                    + s.r;     /* relu's output: 3200 -> 3584 */
    CHECK(peak == 99328, "derivation: %llu", U(peak));
    check_peak(r,
               &(expect_peak){.bytes = peak, .phase = EST_PHASE_FORWARD, .layer = "relu", .params = s.params,
                              .activations = s.h + s.r, .inputs = s.x},
               "mlp infer b4");
    CHECK(t->params_bytes == s.params, "params_bytes %llu, expected %llu", U(t->params_bytes), U(s.params));
    CHECK(t->param_count == 200 * 100 + 200 + 10 * 200 + 10, "param_count %llu", U(t->param_count));
    CHECK(t->param_bytes == 4 * (200 * 100 + 200 + 10 * 200 + 10), "param_bytes (unrounded) %llu",
          U(t->param_bytes));
    CHECK(t->input_bytes == 4 * 100 * 4, "input_bytes (unrounded) %llu", U(t->input_bytes));
    CHECK(t->grads_bytes == 0 && t->optimizer_bytes == 0, "inference has no grads (%llu) or optimizer state (%llu)",
          U(t->grads_bytes), U(t->optimizer_bytes));
    CHECK(t->temp_bytes == 0, "no op here has a workspace: temp %llu", U(t->temp_bytes));
    /* In inference activations_bytes is the largest set of live activations:
     * h and r together at the Relu. */
    CHECK(t->activations_bytes == s.h + s.r, "infer activations_bytes %llu, expected %llu",
          U(t->activations_bytes), U(s.h + s.r));
    /* FLOPs: Gemm 2*M*N*K, Relu 1 per element; no backward in inference. */
    CHECK(t->flops_forward == 2 * 4 * 200 * 100 + 4 * 200 + 2 * 4 * 10 * 200, "flops_forward %llu",
          U(t->flops_forward));
    CHECK(t->flops_backward == 0, "flops_backward %llu", U(t->flops_backward));
    for (size_t i = 0; i < est_report_layer_count(r); i++)
        CHECK(est_report_layer(r, i)->saved_bytes == 0, "infer: layer %zu saves %llu bytes", i,
              U(est_report_layer(r, i)->saved_bytes));
out:
    est_report_free(r);
    est_graph_free(g);
}

/* The training-step peak of the MLP (or the MLP with a view inserted, or the
 * MLP of a fixed x given the shape [batch, 100], which must give the same
 * figures). `shape` is x's shape in place of the declared one, or NULL. */
static void check_mlp_train(const est_graph *g, const est_input_shape *shape, const char *what) {
    mlp_sizes s = mlp_sizes_of(4, 4);
    uint64_t P = s.params;
    /* Gradients of all parameters after backward: same sizes as params. */
    uint64_t grads = s.W1 + s.b1 + s.W2 + s.b2;
    /* Resident before the step, minus the optimizer state: params, the
     * input, and the previous iteration's y and loss. */
    uint64_t base = P + s.x + s.y + s.loss;

    /* The backward of fc1 is the largest moment of the backward at batch 4:
     * by then fc2's saved r was released by relu's backward (r's earliest
     * saver), and relu's input gradient dh is alive while fc1 allocates
     * dW1 + db1. Live: params, optimizer state, x, y + new loss (other),
     * all parameter gradients, dh. */
    uint64_t bwd_fc1 = P + s.x + (s.y + s.loss) + grads + s.h /* dh */;
    /* The forward's largest moment: h and r both live at relu. Smaller. */
    uint64_t fwd_relu = base + s.h + s.r;
    CHECK(bwd_fc1 == 186880 && fwd_relu == 100352, "derivation: %llu %llu", U(bwd_fc1), U(fwd_relu));

    static const struct {
        est_optimizer opt;
        const char *name;
        uint64_t state_per_param;
    } opts[] = {{EST_OPT_SGD, "sgd", 0}, {EST_OPT_MOMENTUM, "momentum", 1}, {EST_OPT_ADAM, "adam", 2}};
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
        char label[96];
        snprintf(label, sizeof label, "%s train b4 %s", what, opts[k].name);
        est_report *r = run(g, (run_opts){.mode = EST_MODE_TRAIN, .opt = opts[k].opt, .batch = 4, .shape = shape});
        if (!r) continue;
        const est_totals *t = est_report_totals(r);
        uint64_t state = opts[k].state_per_param * P; /* momentum buffer; adam exp_avg + exp_avg_sq */
        CHECK(t->params_bytes == P, "%s: params_bytes %llu, expected %llu", label, U(t->params_bytes), U(P));
        CHECK(t->grads_bytes == grads, "%s: grads_bytes %llu, expected %llu", label, U(t->grads_bytes), U(grads));
        CHECK(t->optimizer_bytes == state, "%s: optimizer_bytes %llu, expected %llu", label,
              U(t->optimizer_bytes), U(state));
        /* At the end of the forward: r (saved by relu and by fc2) and y (the
         * graph's output). h was freed after relu: Relu saves its output,
         * Gemm its other operand, and x is an input, not an activation. */
        CHECK(t->activations_bytes == s.r + s.y, "%s: activations_bytes %llu, expected %llu", label,
              U(t->activations_bytes), U(s.r + s.y));
        if (opts[k].opt == EST_OPT_ADAM) {
            /* Adam's step: after backward, params + grads + 2x state + x +
             * y + loss are live, and sqrt(exp_avg_sq) adds one params-sized
             * temporary, beating the backward's dh by far at batch 4. */
            uint64_t step = P + grads + state + s.x + (s.y + s.loss) + P /* sqrt(exp_avg_sq) */;
            CHECK(step == 453632, "derivation: %llu", U(step));
            CHECK(step > bwd_fc1 + state, "derivation: adam's step must beat its backward");
            check_peak(r,
                       &(expect_peak){.bytes = step, .phase = EST_PHASE_OPTIMIZER, .layer = "", .params = P,
                                      .grads = grads, .optimizer = state, .temp = P, .inputs = s.x,
                                      .other = s.y + s.loss},
                       label);
            CHECK(t->temp_bytes == P, "%s: largest temp %llu, expected the sqrt temporary %llu", label,
                  U(t->temp_bytes), U(P));
        } else {
            /* sgd / momentum update in place: the peak is fc1's backward. */
            check_peak(r,
                       &(expect_peak){.bytes = bwd_fc1 + state, .phase = EST_PHASE_BACKWARD, .layer = "fc1",
                                      .params = P, .grads = grads, .optimizer = state, .temp = s.h,
                                      .inputs = s.x, .other = s.y + s.loss},
                       label);
            /* no workspace and no transient: activation gradients are not
             * "temporaries" in totals.temp_bytes */
            CHECK(t->temp_bytes == 0, "%s: largest temp %llu, expected 0", label, U(t->temp_bytes));
        }
        /* FLOPs: fc1 needs only dW (x is an input): 1 product; fc2 needs dW2
         * and dr: 2 products; Relu's backward 2 per element. */
        uint64_t fc1 = 2 * 4 * 200 * 100, relu = 4 * 200, fc2 = 2 * 4 * 10 * 200;
        CHECK(t->flops_forward == fc1 + relu + fc2, "%s: flops_forward %llu", label, U(t->flops_forward));
        CHECK(t->flops_backward == fc1 + 2 * relu + 2 * fc2, "%s: flops_backward %llu, expected %llu", label,
              U(t->flops_backward), U(fc1 + 2 * relu + 2 * fc2));
        /* Saved for backward, per layer: fc1 keeps x (a graph input, resident
         * anyway, so 0 counted); relu keeps r; fc2 keeps r (and W2, a
         * parameter, not counted). */
        const est_layer *L1 = layer_named(r, "fc1"), *Lr = layer_named(r, "relu"), *L2 = layer_named(r, "fc2");
        if (L1 && Lr && L2) {
            CHECK(L1->saved_bytes == 0, "%s: fc1 saved %llu", label, U(L1->saved_bytes));
            CHECK(Lr->saved_bytes == s.r, "%s: relu saved %llu, expected %llu", label, U(Lr->saved_bytes), U(s.r));
            CHECK(L2->saved_bytes == s.r, "%s: fc2 saved %llu, expected %llu", label, U(L2->saved_bytes), U(s.r));
            CHECK(L1->param_count == 20200 && L2->param_count == 2010, "%s: layer param counts %llu %llu", label,
                  U(L1->param_count), U(L2->param_count));
        }
        est_report_free(r);
    }

    /* adamw is adam for memory. */
    est_report *ra = run(g, (run_opts){.mode = EST_MODE_TRAIN, .opt = EST_OPT_ADAMW, .batch = 4, .shape = shape});
    if (ra) {
        CHECK(est_report_peak(ra)->bytes == P + grads + 2 * P + s.x + s.y + s.loss + P, "%s: adamw peak %llu", what,
              U(est_report_peak(ra)->bytes));
        est_report_free(ra);
    }

    /* At batch 1024 the activations dwarf the optimizer: adam's peak moves
     * into the backward. At relu, r (saved), dr (from fc2) and dh (being
     * made) are all live, next to fc2's parameter gradients; at fc1, dh and
     * every gradient, and the column sum that makes fc1's bias gradient
     * from dh [1024, 200] (layers/sum_to.c on the H100: 4 outputs a thread,
     * 32 x 4 threads a block, 16 blocks down the 1024 rows: 4 * 200 * 16 *
     * 32 * 4 bytes of partial sums, and a 512-byte block of semaphores). */
    mlp_sizes b = mlp_sizes_of(1024, 4);
    uint64_t relu_bwd = P + 2 * P /* adam state */ + b.x + (b.y + b.loss) + b.r /* saved */ + b.r /* dr */ +
                        b.h /* dh */ + s.W2 + s.b2 /* dW2, db2 */;
    uint64_t bias_sum = 4 * 200 * 16 * 32 * 4 + 512;
    uint64_t fc1_bwd = P + 2 * P + b.x + (b.y + b.loss) + P /* every gradient */ + b.h /* dh */ + bias_sum;
    CHECK(relu_bwd == 3187712 && fc1_bwd == 3269632 && fc1_bwd > relu_bwd, "derivation: %llu %llu", U(relu_bwd),
          U(fc1_bwd));
    est_report *rb = run(g, (run_opts){.mode = EST_MODE_TRAIN, .opt = EST_OPT_ADAM, .batch = 1024, .shape = shape});
    if (rb) {
        char label[96];
        snprintf(label, sizeof label, "%s train b1024 adam", what);
        check_peak(rb,
                   &(expect_peak){.bytes = fc1_bwd, .phase = EST_PHASE_BACKWARD, .layer = "fc1", .params = P,
                                  .grads = P, .optimizer = 2 * P, .activations = 0, .temp = b.h + bias_sum,
                                  .inputs = b.x, .other = b.y + b.loss},
                   label);
        est_report_free(rb);
    }
}

/* 2. Training, sgd / momentum / adam. */
static void test_mlp_train(void) {
    est_graph *g = load_json(mlp_json, "mlp.json");
    if (g) check_mlp_train(g, NULL, "mlp");
    est_graph_free(g);
}

/* ---- 4. views --------------------------------------------------------------------- */

/* x [batch, 3, 10, 10] -> relu -> r -> VIEW -> f [batch, 300] -> fc (W [10, 300], b [10]) -> y.
 * %s is the view node(s). */
#define VIEW_JSON_FMT \
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"%s\", \"opset_import\": {\"\": 17},\n" \
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 3, 10, 10]}],\n" \
    " \"initializers\": [\n" \
    "  {\"name\": \"shape\", \"dtype\": \"int64\", \"dims\": [2], \"values\": [0, -1]},\n" \
    "  {\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [10, 300]},\n" \
    "  {\"name\": \"b\", \"dtype\": \"float32\", \"dims\": [10]}],\n" \
    " \"nodes\": [\n" \
    "  {\"name\": \"relu\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"r\"]},\n" \
    "  %s,\n" \
    "  {\"name\": \"fc\", \"op\": \"Gemm\", \"inputs\": [\"f\", \"W\", \"b\"], \"outputs\": [\"y\"],\n" \
    "   \"attributes\": {\"transB\": {\"int\": 1}}}],\n" \
    " \"outputs\": [\"y\"]}\n"

static est_graph *view_graph(const char *name, const char *nodes) {
    char text[4096];
    snprintf(text, sizeof text, VIEW_JSON_FMT, name, nodes);
    return load_json(text, name);
}

static void test_views(void) {
    /* batch 2: x = r = 600 floats = 2400 -> 2560; W 12000 -> 12288; b 40 ->
     * 512; y 80 -> 512 */
    const uint64_t x = R(2 * 300 * 4), r = R(2 * 300 * 4), W = R(10 * 300 * 4), b = R(10 * 4), y = R(2 * 10 * 4);
    CHECK(x == 2560 && W == 12288 && b == 512 && y == 512, "derivation");
    static const char *const views[][2] = {
        {"flatten", "{\"name\": \"view\", \"op\": \"Flatten\", \"inputs\": [\"r\"], \"outputs\": [\"f\"],"
                    " \"attributes\": {\"axis\": {\"int\": 1}}}"},
        {"reshape", "{\"name\": \"view\", \"op\": \"Reshape\", \"inputs\": [\"r\", \"shape\"], \"outputs\": [\"f\"]}"},
    };
    for (size_t k = 0; k < 2; k++) {
        est_graph *g = view_graph(views[k][0], views[k][1]);
        est_report *rep = run(g, (run_opts){.mode = EST_MODE_INFER, .batch = 2});
        if (rep) {
            /* W + b + x resident; relu allocates r; the view shares r's
             * storage; fc allocates y while f (= r) is still read. Had the
             * view copied, f would add another 2560. The int64 shape vector
             * is a constant: no device memory. */
            check_peak(rep,
                       &(expect_peak){.bytes = W + b + x + r + y, .phase = EST_PHASE_FORWARD, .layer = "fc",
                                      .params = W + b, .activations = r + y, .inputs = x},
                       views[k][0]);
            const est_layer *v = layer_named(rep, "view");
            CHECK(v && v->output_bytes == 2 * 300 * 4, "%s: the view's output still reports its logical bytes",
                  views[k][0]);
        }
        est_report_free(rep);

        rep = run(g, (run_opts){.mode = EST_MODE_TRAIN, .opt = EST_OPT_SGD, .batch = 2});
        if (rep) {
            /* Training, sgd. Nothing upstream of fc needs a gradient (x is an
             * input, relu has no parameters), so only fc runs a backward; it
             * saves f, i.e. r's storage, for dW. Peak at fc's backward:
             * W + b, dW + db, x, r (saved through the view), the old y
             * moved to "other" plus the new loss, and dy. */
            uint64_t peak = (W + b) + (W + b) + x + r + (y + 512) + y /* dy */;
            CHECK(peak == 32256, "derivation: %llu", U(peak));
            check_peak(rep,
                       &(expect_peak){.bytes = peak, .phase = EST_PHASE_BACKWARD, .layer = "fc", .params = W + b,
                                      .grads = W + b, .activations = r, .temp = y, .inputs = x, .other = y + 512},
                       views[k][0]);
            const est_totals *t = est_report_totals(rep);
            CHECK(t->activations_bytes == r + y, "%s train: activations_bytes %llu, expected %llu", views[k][0],
                  U(t->activations_bytes), U(r + y));
            const est_layer *fc = layer_named(rep, "fc");
            CHECK(fc && fc->saved_bytes == r, "%s train: fc saves f (r's storage), %llu", views[k][0],
                  fc ? U(fc->saved_bytes) : 0ULL);
        }
        est_report_free(rep);
        est_graph_free(g);
    }

    /* A Flatten of a transposed tensor is not a view: reshape() copies a
     * non-contiguous input. The Transpose itself is a (permuted) view. */
    est_graph *g = view_graph(
        "transpose_flatten",
        "{\"name\": \"perm\", \"op\": \"Transpose\", \"inputs\": [\"r\"], \"outputs\": [\"t\"],"
        " \"attributes\": {\"perm\": {\"ints\": [0, 2, 3, 1]}}},\n"
        "  {\"name\": \"view\", \"op\": \"Flatten\", \"inputs\": [\"t\"], \"outputs\": [\"f\"],"
        " \"attributes\": {\"axis\": {\"int\": 1}}}");
    est_report *rep = run(g, (run_opts){.mode = EST_MODE_INFER, .batch = 2});
    if (rep) {
        /* relu: r; perm: nothing; view: the copy f (2560) while r is read
         * (the peak); r freed; fc: y, then f freed. */
        uint64_t copy = R(2 * 300 * 4);
        check_peak(rep,
                   &(expect_peak){.bytes = W + b + x + r + copy, .phase = EST_PHASE_FORWARD, .layer = "view",
                                  .params = W + b, .activations = r + copy, .inputs = x},
                   "transpose_flatten");
    }
    est_report_free(rep);
    est_graph_free(g);

    /* The MLP with a Flatten inserted: the same figures as the MLP, forward
     * and backward (dh is a view of df, not a new tensor). */
    g = load_json(mlp_flatten_json, "mlp_flatten.json");
    if (g) {
        check_mlp_train(g, NULL, "mlp_flatten");
        est_report *ri = run(g, (run_opts){.mode = EST_MODE_INFER, .batch = 4});
        mlp_sizes s = mlp_sizes_of(4, 4);
        if (ri)
            CHECK(est_report_peak(ri)->bytes == s.params + s.x + s.h + s.r, "mlp_flatten infer: peak %llu",
                  U(est_report_peak(ri)->bytes));
        est_report_free(ri);
    }
    est_graph_free(g);
}

/* ---- 5. float16 -------------------------------------------------------------------- */

/* One Gemm whose tensors are multiples of 512 bytes in float16, so that
 * halving is exact: W [256, 64], b [256], x [batch, 64], y [batch, 256]. */
static const char linear_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"linear\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 64]}],\n"
    " \"initializers\": [\n"
    "  {\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [256, 64]},\n"
    "  {\"name\": \"b\", \"dtype\": \"float32\", \"dims\": [256]}],\n"
    " \"nodes\": [{\"name\": \"fc\", \"op\": \"Gemm\", \"inputs\": [\"x\", \"W\", \"b\"], \"outputs\": [\"y\"],\n"
    "   \"attributes\": {\"transB\": {\"int\": 1}}}],\n"
    " \"outputs\": [\"y\"]}\n";

static void test_float16(void) {
    est_graph *g = load_json(linear_json, "linear.json");
    const est_dtype dts[] = {EST_DT_FLOAT, EST_DT_FLOAT16, EST_DT_BFLOAT16};
    uint64_t params[3] = {0}, opt[3] = {0}, peak[3] = {0};
    for (int k = 0; g && k < 3; k++) {
        est_report *r = run(g, (run_opts){.mode = EST_MODE_TRAIN, .opt = EST_OPT_ADAM, .dtype = dts[k], .batch = 8});
        if (!r) continue;
        const est_totals *t = est_report_totals(r);
        uint64_t elem = k == 0 ? 4 : 2;
        CHECK(est_report_dtype(r) == dts[k], "report dtype %s", est_dtype_name(est_report_dtype(r)));
        params[k] = t->params_bytes;
        opt[k] = t->optimizer_bytes;
        peak[k] = t->peak_bytes;
        /* W 16384 elements, b 256 */
        CHECK(t->params_bytes == R(256 * 64 * elem) + R(256 * elem), "%s: params_bytes %llu", est_dtype_name(dts[k]),
              U(t->params_bytes));
        /* totals.param_bytes describes the weights as the file declares
         * them (float32), whatever dtype the step runs in */
        CHECK(t->param_bytes == 4 * (256 * 64 + 256), "%s: param_bytes %llu", est_dtype_name(dts[k]),
              U(t->param_bytes));
        est_report_free(r);
    }
    CHECK(params[0] == 66560 && params[1] == 33280, "params float32 %llu, float16 %llu", U(params[0]), U(params[1]));
    CHECK(params[1] * 2 == params[0], "float16 halves params: %llu vs %llu", U(params[1]), U(params[0]));
    CHECK(params[2] == params[1], "bfloat16 = float16: %llu vs %llu", U(params[2]), U(params[1]));
    CHECK(opt[1] * 2 == opt[0] && opt[1] == 2 * params[1], "adam state follows dtype: %llu vs %llu", U(opt[1]),
          U(opt[0]));
    /* The whole step: adam's peak is its step, with params, 2x state, the
     * gradients and the sqrt temporary (5 params-sized sets), x, and the old
     * y moved to "other" next to the new loss. Every tensor halves except
     * the loss, a scalar that takes one 512-byte block in any dtype, so the
     * peak is not an exact half: 343552 vs 172032. */
    for (int k = 0; k < 2; k++) {
        uint64_t elem = k == 0 ? 4 : 2;
        uint64_t want = 5 * params[k] + R(8 * 64 * elem) /* x */ + R(8 * 256 * elem) /* y */ + 512 /* loss */;
        CHECK(peak[k] == want, "linear %s adam b8: peak %llu, expected %llu", est_dtype_name(dts[k]), U(peak[k]),
              U(want));
    }
    CHECK(peak[0] == 343552 && peak[1] == 172032, "derivation: %llu %llu", U(peak[0]), U(peak[1]));
    est_graph_free(g);

    /* The MLP in float16, inference, batch 4: rounding keeps it from being
     * an exact half (90112 -> 45568, not 45056). */
    g = load_json(mlp_json, "mlp.json");
    est_report *r = run(g, (run_opts){.mode = EST_MODE_INFER, .dtype = EST_DT_FLOAT16, .batch = 4});
    if (r) {
        mlp_sizes s = mlp_sizes_of(4, 2);
        /* W1 40000 -> 40448, b1 400 -> 512, W2 4000 -> 4096, b2 20 -> 512;
         * x 800 -> 1024, h = r 1600 -> 2048 */
        CHECK(s.params == 45568, "derivation %llu", U(s.params));
        check_peak(r,
                   &(expect_peak){.bytes = s.params + s.x + s.h + s.r, .phase = EST_PHASE_FORWARD, .layer = "relu",
                                  .params = s.params, .activations = s.h + s.r, .inputs = s.x},
                   "mlp infer float16");
    }
    est_report_free(r);
    est_graph_free(g);
}

/* ---- 7. mixed precision (--amp) ---------------------------------------------- */

/* The MLP at batch 1024 under autocast, sgd. Hand walk
 * (docs/memory-model.md, "Mixed precision (--amp)"):
 *  - params, grads stay float32: P = 90112, grads 90112;
 *  - fc1 (Gemm, autocast LOW) copies x to bf16 (xc, saved for dW1) and W1,
 *    b1 (cached for the forward, not saved: x needs no gradient); h, r bf16;
 *  - fc2 reads r (already bf16), copies W2 (saved: r needs a gradient) and
 *    b2 (cached); y is bf16;
 *  - autocast exits after the loss: W1c, b1c, b2c go; W2c lives until fc2's
 *    backward; gradients of activations are bf16.
 * relu's backward holds xc and r saved, dr and dh, fc2's grads; fc1's
 * backward more: xc, dh, every float32 gradient, fc1's gradients in bf16
 * before they are added to them, and the column sum of dh for fc1's bias,
 * whose float32 partial sums take as much as in float32 (layers/sum_to.c;
 * bench/accuracy/data/reduce/): the peak. */
static void test_amp(void) {
    est_graph *g = load_json(mlp_json, "mlp.json");
    const uint64_t B = 1024, P = 90112;
    const uint64_t x = R(B * 100 * 4), xc = R(B * 100 * 2), W1c = R(200 * 100 * 2), b1c = R(200 * 2),
                   W2c = R(10 * 200 * 2), b2c = R(10 * 2), h = R(B * 200 * 2), r = R(B * 200 * 2),
                   y = R(B * 10 * 2), loss = 512;
    const uint64_t dW2 = R(10 * 200 * 4), db2 = R(10 * 4);
    CHECK(x == 409600 && xc == 204800 && W1c == 40448 && b1c == 512 && W2c == 4096 && b2c == 512 &&
              h == 409600 && y == 20480,
          "amp derivation sizes");
    uint64_t relu_bwd = P + x /* input */ + (y + loss) /* other */ + xc + r /* saved */ + r /* dr */ + h /* dh */ +
                        dW2 + db2;
    const uint64_t bias_sum = 4 * 200 * 16 * 32 * 4 + 512, dW1c = W1c, db1c = b1c;
    uint64_t peak = P + x + (y + loss) + xc /* saved */ + h /* dh */ + P /* every gradient */ + dW1c + db1c + bias_sum;
    CHECK(relu_bwd == 1963008 && peak == 2905088, "amp derivation: %llu %llu", U(relu_bwd), U(peak));
    /* the forward's largest moment, at relu: smaller */
    uint64_t fwd = P + x + (y + loss) + xc + W1c + b1c + h + r;
    CHECK(fwd == 1585664 && fwd < peak, "amp derivation fwd: %llu", U(fwd));
    const est_amp amps[] = {EST_AMP_BF16, EST_AMP_FP16};
    for (int k = 0; g && k < 2; k++) {
        const char *what = k ? "mlp amp fp16 b1024 sgd" : "mlp amp bf16 b1024 sgd";
        est_report *rep = run(g, (run_opts){.mode = EST_MODE_TRAIN, .opt = EST_OPT_SGD, .batch = B, .amp = amps[k]});
        if (!rep) continue;
        const est_totals *t = est_report_totals(rep);
        CHECK(est_report_amp(rep) == amps[k], "%s: report amp", what);
        CHECK(t->params_bytes == P && t->grads_bytes == P, "%s: params %llu grads %llu stay float32", what,
              U(t->params_bytes), U(t->grads_bytes));
        /* end of forward: xc, W1c, b1c, r, W2c, b2c, y */
        uint64_t act = xc + W1c + b1c + r + W2c + b2c + y;
        CHECK(t->activations_bytes == act, "%s: activations_bytes %llu, expected %llu", what,
              U(t->activations_bytes), U(act));
        check_peak(rep,
                   &(expect_peak){.bytes = peak, .phase = EST_PHASE_BACKWARD, .layer = "fc1", .params = P,
                                  .grads = P, .activations = xc, .temp = h + dW1c + db1c + bias_sum, .inputs = x,
                                  .other = y + loss},
                   what);
        const est_layer *L1 = layer_named(rep, "fc1"), *L2 = layer_named(rep, "fc2");
        if (L1 && L2) {
            CHECK(L1->saved_bytes == xc, "%s: fc1 saves x's copy: %llu", what, U(L1->saved_bytes));
            CHECK(L2->saved_bytes == r + W2c, "%s: fc2 saves r and W2's copy: %llu", what, U(L2->saved_bytes));
        }
        est_report_free(rep);
    }
    /* adam's state follows the float32 parameters */
    est_report *ra = run(g, (run_opts){.mode = EST_MODE_TRAIN, .opt = EST_OPT_ADAM, .batch = B, .amp = EST_AMP_BF16});
    if (ra) {
        CHECK(est_report_totals(ra)->optimizer_bytes == 2 * P, "amp adam state %llu",
              U(est_report_totals(ra)->optimizer_bytes));
        est_report_free(ra);
    }
    /* autocast needs float32 master weights */
    if (g) {
        est_options opt;
        est_options_init(&opt);
        opt.batch = 4;
        opt.dtype = EST_DT_FLOAT16;
        opt.amp = EST_AMP_BF16;
        est_error err;
        est_report *bad = NULL;
        CHECK(est_estimate(g, &opt, &bad, &err) == EST_EINVAL && !bad, "amp with dtype float16 must fail");
    }
    est_graph_free(g);
}

/* ---- 9. input shapes ------------------------------------------------------------- */

/* The MLP as an export without dynamic axes declares it: x [1, 100]. */
static const char mlp_fixed_json[] = MLP_JSON("mlp_fixed", "1, 100");

/* y = relu(x), x [batch, n]. */
static const char relu_json[] = RELU_JSON;

/* est_estimate must fail with `code` and a message holding `part`. */
static void expect_estimate_error(const est_graph *g, const est_options *opt, est_status code, const char *part,
                                  const char *what) {
    est_error err = {0};
    est_report *r = NULL;
    est_status st = est_estimate(g, opt, &r, &err);
    CHECK(st == code && !r, "%s: %s, expected %s", what, est_status_name(st), est_status_name(code));
    CHECK(strstr(err.message, part), "%s: message lacks '%s': %s", what, part, err.message);
    est_report_free(r);
}

static void input_shape_errors(const est_graph *g) {
    const est_dim ok[] = {{.symbol = "batch"}, {.value = 100}, {.value = 1}};
    const est_dim no_value[] = {{.value = 0}, {.value = 100}};
    const est_dim both[] = {{.value = 5, .symbol = "batch"}, {.value = 100}};
    const est_dim negative[] = {{.value = -1}, {.value = 100}};
    const est_dim empty_name[] = {{.symbol = ""}, {.value = 100}};
    const struct {
        est_input_shape shape;
        const char *part;
    } cases[] = {
        {{"y", 2, ok}, "a shape is given for input 'y', but the graph has no input of that name (its inputs: x)"},
        {{"x", 3, ok}, "input 'x' has rank 2 (1x100); the shape given has rank 3"},
        {{"x", 2, NULL}, "input 'x': the shape given has no dims"},
        {{"x", 2, no_value}, "input 'x' dim 0: give either a size above 0 or a symbol name"},
        {{"x", 2, both}, "input 'x' dim 0: give either"},
        {{"x", 2, negative}, "input 'x' dim 0: give either"},
        {{"x", 2, empty_name}, "input 'x' dim 0: give either"},
        {{NULL, 2, ok}, "an input shape names no input"},
    };
    est_options opt;
    est_options_init(&opt);
    opt.batch = 4;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "input shape error %zu", i);
        opt.input_shapes = &cases[i].shape;
        opt.n_input_shapes = 1;
        expect_estimate_error(g, &opt, EST_EINVAL, cases[i].part, what);
    }
    const est_input_shape twice[] = {{"x", 2, ok}, {"x", 2, ok}};
    opt.input_shapes = twice;
    opt.n_input_shapes = 2;
    expect_estimate_error(g, &opt, EST_EINVAL, "input 'x' is given two shapes", "two shapes for x");
    opt.input_shapes = NULL;
    opt.n_input_shapes = 1;
    expect_estimate_error(g, &opt, EST_EINVAL, "input_shapes is NULL", "NULL input_shapes");
    /* Without a shape, --batch has no symbolic dim to bind; the message
     * says which shape would give one. */
    opt.n_input_shapes = 0;
    expect_estimate_error(g, &opt, EST_EINVAL, "(--input-shape x=batchx100 would give one)", "batch, fixed x");
}

/* A new symbol in a non-leading dim, bound by name; named by a string the
 * caller frees before reading the report, which keeps its own copy. */
static void input_shape_new_symbol(const est_graph *g) {
    char *feat = malloc(5);
    if (!feat) return;
    memcpy(feat, "feat", 5);
    const est_dim two_feat[] = {{.value = 2}, {.symbol = feat}};
    const est_input_shape shape = {"x", 2, two_feat};
    est_binding dim = {"feat", 100};
    est_options opt;
    est_options_init(&opt);
    opt.mode = EST_MODE_INFER;
    opt.input_shapes = &shape;
    opt.n_input_shapes = 1;
    expect_estimate_error(g, &opt, EST_EUNBOUND, "input 'x' dim 1 is the symbolic dim 'feat', which is not bound",
                          "feat unbound");
    opt.dims = &(est_binding){"nosuch", 3};
    opt.n_dims = 1;
    expect_estimate_error(g, &opt, EST_EINVAL, "no symbolic dim named 'nosuch' (it has: feat)", "nosuch");
    dim.value = 99; /* W1 wants 100 features */
    opt.dims = &dim;
    expect_estimate_error(g, &opt, EST_ESHAPE, "node 'fc1'", "feat 99");
    dim.value = 100;
    est_error err;
    est_report *r = NULL;
    est_status st = est_estimate(g, &opt, &r, &err);
    free(feat);
    CHECK(st == EST_OK, "feat 100: %s", err.message);
    if (!r) return;
    const est_binding *b = est_report_dim(r, 0);
    CHECK(est_report_dim_count(r) == 1 && b && strcmp(b->name, "feat") == 0 && b->value == 100,
          "the report's dims: %zu, first %s=%lld", est_report_dim_count(r), b ? b->name : "(none)",
          b ? (long long)b->value : -1LL);
    const est_tensor_info *y = est_report_output(r, 0);
    CHECK(y && y->rank == 2 && y->shape[0] == 2 && y->shape[1] == 10, "x [2, feat=100]: y is not 2x10");
    CHECK(est_report_totals(r)->input_bytes == 2 * 100 * 4, "x [2, 100]: input_bytes %llu",
          U(est_report_totals(r)->input_bytes));
    est_report_free(r);
}

/* 9. est_options.input_shapes. */
static void test_input_shapes(void) {
    est_graph *g = load_json(mlp_fixed_json, "mlp_fixed.json");
    if (!g) return;
    const est_dim batch_100[] = {{.symbol = "batch"}, {.value = 100}};
    const est_input_shape x_batch = {"x", 2, batch_100};
    /* x [batch, 100]: the fixed export is the symbolic MLP, at every batch. */
    check_mlp_train(g, &x_batch, "mlp_fixed, x [batch, 100]");
    /* At batch 8 in inference, by hand: x is 8 x 100 floats; the layers
     * output h and r (8 x 200 each) and y (8 x 10); the peak is at relu, as
     * in test_mlp_infer. */
    est_report *r = run(g, (run_opts){.mode = EST_MODE_INFER, .batch = 8, .shape = &x_batch});
    if (r) {
        const est_totals *t = est_report_totals(r);
        mlp_sizes s = mlp_sizes_of(8, 4);
        CHECK(t->input_bytes == 8 * 100 * 4, "b8: input_bytes %llu, expected 3200", U(t->input_bytes));
        CHECK(t->output_bytes == 8 * 200 * 4 + 8 * 200 * 4 + 8 * 10 * 4, "b8: output_bytes %llu, expected 13120",
              U(t->output_bytes));
        const est_tensor_info *y = est_report_output(r, 0);
        CHECK(y && y->rank == 2 && y->shape[0] == 8 && y->shape[1] == 10 && y->bytes == 8 * 10 * 4,
              "b8: y is not 8x10 of 320 bytes");
        CHECK(est_report_peak(r)->bytes == s.params + s.x + s.h + s.r && s.params + s.x + s.h + s.r == 90112 + 3584 + 6656 + 6656,
              "b8: peak %llu, expected %llu", U(est_report_peak(r)->bytes), U(s.params + s.x + s.h + s.r));
        const est_binding *b = est_report_dim(r, 0);
        CHECK(est_report_dim_count(r) == 1 && b && strcmp(b->name, "batch") == 0 && b->value == 8,
              "b8: the report's dims do not list batch=8");
    }
    est_report_free(r);
    /* The graph is left as loaded: without the shape, x is [1, 100]. */
    r = run(g, (run_opts){.mode = EST_MODE_INFER});
    if (r)
        CHECK(est_report_totals(r)->input_bytes == 100 * 4 && est_report_dim_count(r) == 0,
              "after the override: input_bytes %llu, expected 400", U(est_report_totals(r)->input_bytes));
    est_report_free(r);
    input_shape_errors(g);
    input_shape_new_symbol(g);
    est_graph_free(g);

    /* A fixed shape on a symbolic input needs no batch: x [4, 100] is the
     * MLP at batch 4 (test_mlp_infer's peak). */
    g = load_json(mlp_json, "mlp.json");
    const est_dim four_100[] = {{.value = 4}, {.value = 100}};
    r = run(g, (run_opts){.mode = EST_MODE_INFER, .shape = &(est_input_shape){"x", 2, four_100}});
    if (r)
        CHECK(est_report_peak(r)->bytes == 99328 && est_report_dim_count(r) == 0,
              "mlp with x [4, 100]: peak %llu, expected 99328", U(est_report_peak(r)->bytes));
    est_report_free(r);
    est_graph_free(g);

    /* A symbol the graph declares is that same dim: relu's x [batch, n]
     * given [n, n] with n = 128 is 128 x 128. */
    g = load_json(relu_json, "relu.json");
    const est_dim n_n[] = {{.symbol = "n"}, {.symbol = "n"}};
    const est_binding n128 = {"n", 128};
    r = run(g, (run_opts){.mode = EST_MODE_INFER, .dims = &n128, .n_dims = 1,
                          .shape = &(est_input_shape){"x", 2, n_n}});
    if (r) {
        const est_tensor_info *y = est_report_output(r, 0);
        CHECK(y && y->shape[0] == 128 && y->shape[1] == 128 && est_report_dim_count(r) == 1,
              "relu with x [n, n], n = 128: y is not 128x128, or more than n is bound");
    }
    est_report_free(r);
    est_graph_free(g);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODELS_DIR\n", argv[0]);
        return 2;
    }
    test_mlp_sizes();
    test_mlp_infer();
    test_mlp_train();
    test_views();
    test_float16();
    test_amp();
    test_input_shapes();
    return test_result("test_simulate");
}
