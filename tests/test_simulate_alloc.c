/*
 * test_simulate_alloc: the simulation's allocator (libestimate/simulate.c,
 * libestimate/caching.c, docs/memory-model.md) on small hand-built graphs
 * and models/, through the public API only. Figures are derived by hand as
 * in test_simulate (every tensor one allocation rounded up to 512 bytes).
 *
 * Checks:
 *  3. allocator rounding (1 float = 512 bytes; 128 vs 129 floats);
 *  8. the caching allocator's replay (totals.reserved_bytes): a chain of
 *     8 MiB tensors whose segments are derived by hand, the same chain
 *     under a memory limit its peak fits but its segments do not (out of
 *     memory at the layer derived by hand), and invariants
 *     (reserved >= allocated peak, whole segments) on the MLP and resnet18;
 *     est_options.skip_reserved: every figure but reserved_bytes as with
 *     the replay, and the same error, whatever the options, on models/.
 *
 * usage: test_simulate_alloc MODELS_DIR
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simulate_util.h"

/* ---- 3. allocator rounding ------------------------------------------------------ */

/* y = relu(x), x [batch, n]. */
static const char relu_json[] = RELU_JSON;

/* y = x * w with a single trainable float w [1]. */
static const char scale_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"scale\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 1]}],\n"
    " \"initializers\": [{\"name\": \"w\", \"dtype\": \"float32\", \"dims\": [1]}],\n"
    " \"nodes\": [{\"name\": \"mul\", \"op\": \"Mul\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"y\"]}],\n"
    " \"outputs\": [\"y\"]}\n";

static void test_rounding(void) {
    est_graph *g = load_json(relu_json, "relu.json");
    static const struct {
        int64_t n;
        uint64_t peak;
        const char *why;
    } cases[] = {
        /* x and y of 1 float (4 bytes) take one 512-byte block each */
        {1, 512 + 512, "1 float = 512 bytes"},
        /* 128 floats are exactly 512 bytes: still one block each */
        {128, 512 + 512, "128 floats = 512 bytes"},
        /* 129 floats are 516 bytes: two blocks each */
        {129, 1024 + 1024, "129 floats = 1024 bytes"},
    };
    for (size_t k = 0; g && k < sizeof cases / sizeof cases[0]; k++) {
        est_binding dim = {"n", cases[k].n};
        est_report *r = run(g, (run_opts){.mode = EST_MODE_INFER, .batch = 1, .dims = &dim, .n_dims = 1});
        if (!r) continue;
        const est_totals *t = est_report_totals(r);
        CHECK(t->peak_bytes == cases[k].peak, "relu n=%lld (%s): peak %llu, expected %llu", (long long)cases[k].n,
              cases[k].why, U(t->peak_bytes), U(cases[k].peak));
        /* the raw figures stay unrounded */
        CHECK(t->input_bytes == 4 * (uint64_t)cases[k].n, "relu n=%lld: input_bytes %llu", (long long)cases[k].n,
              U(t->input_bytes));
        CHECK(t->output_bytes == 4 * (uint64_t)cases[k].n, "relu n=%lld: output_bytes %llu", (long long)cases[k].n,
              U(t->output_bytes));
        est_report_free(r);
    }
    /* Training with no parameters: nothing needs a gradient, so the only
     * backward is the loss seed. n = 129 (516 bytes -> 1024 per tensor).
     * Resident: x, the previous iteration's y and its loss. The forward
     * allocates the new y before the old one is rebound: that is the peak.
     * (Afterwards: x + y + new loss + seed = 3072, smaller.) */
    est_binding n129 = {"n", 129};
    est_report *rt = run(g, (run_opts){.mode = EST_MODE_TRAIN, .opt = EST_OPT_SGD, .batch = 1, .dims = &n129,
                                       .n_dims = 1});
    if (rt) {
        uint64_t x = 1024, y = 1024, loss = 512;
        check_peak(rt,
                   &(expect_peak){.bytes = x + (y + loss) /* previous y, loss */ + y /* new y */,
                                  .phase = EST_PHASE_FORWARD, .layer = "relu", .activations = y, .inputs = x,
                                  .other = y + loss},
                   "relu train n=129");
        CHECK(est_report_totals(rt)->grads_bytes == 0 && est_report_totals(rt)->flops_backward == 0,
              "relu train: no parameters, no backward (grads %llu, flops %llu)",
              U(est_report_totals(rt)->grads_bytes), U(est_report_totals(rt)->flops_backward));
    }
    est_report_free(rt);
    est_graph_free(g);

    g = load_json(scale_json, "scale.json");
    est_report *r = run(g, (run_opts){.mode = EST_MODE_TRAIN, .opt = EST_OPT_ADAM, .batch = 1});
    if (r) {
        const est_totals *t = est_report_totals(r);
        CHECK(t->param_count == 1 && t->param_bytes == 4, "scale: 1 param of 4 bytes, got %llu / %llu",
              U(t->param_count), U(t->param_bytes));
        /* w, its gradient and each Adam moment are one 512-byte block */
        CHECK(t->params_bytes == 512, "scale: params_bytes %llu, expected 512", U(t->params_bytes));
        CHECK(t->grads_bytes == 512, "scale: grads_bytes %llu, expected 512", U(t->grads_bytes));
        CHECK(t->optimizer_bytes == 2 * 512, "scale: optimizer_bytes %llu, expected 1024", U(t->optimizer_bytes));
    }
    est_report_free(r);
    r = run(g, (run_opts){.mode = EST_MODE_INFER, .batch = 1});
    if (r) {
        /* w + x + y, one block each */
        CHECK(est_report_totals(r)->peak_bytes == 3 * 512, "scale infer: peak %llu, expected 1536",
              U(est_report_totals(r)->peak_bytes));
    }
    est_report_free(r);
    est_graph_free(g);
}

/* ---- the step without the caching allocator's replay ------------------------------ */

/* The options test_skip_reserved runs each model with: what changes an
 * iteration (autocast, micro-batches, recomputation, each optimizer's
 * state, data parallelism). */
static void skip_reserved_options(int v, est_options *o) {
    static const char *const blocks[] = {"layer1", "layers.0", "blocks.0"};
    est_options_init(o);
    o->batch = 8;
    switch (v) {
    case 1: o->amp = EST_AMP_BF16; break;
    case 2: o->amp = EST_AMP_FP16; o->grad_accum = 3; break;
    case 3: o->checkpoint.every = 1; break;
    case 4: o->checkpoint.every = 1; o->amp = EST_AMP_BF16; o->optimizer = EST_OPT_MOMENTUM; o->grad_accum = 2; break;
    case 5: o->checkpoint.prefixes = blocks; o->checkpoint.n_prefixes = 3; o->kernels = EST_KERNELS_VERIFY; break;
    case 6: o->optimizer = EST_OPT_ADAFACTOR; break;
    case 7: o->optimizer = EST_OPT_SGD; o->batch = 3; break;
    case 8: o->parallel.strategy = EST_STRATEGY_ZERO1; o->parallel.world_size = 2; break;
    case 9: o->parallel.strategy = EST_STRATEGY_FSDP; o->parallel.world_size = 2; o->amp = EST_AMP_BF16; break;
    case 10: o->batch = (int64_t)1 << 39; break; /* resnet18: an allocation PyTorch refuses */
    default: break;
    }
}

enum { SKIP_RESERVED_OPTIONS = 11 };

/* Two estimates alike but for reserved_bytes: the peak (bytes, phase,
 * layer), the totals and every layer's figures. */
static void check_same_but_reserved(const char *what, const est_report *full, const est_report *quick) {
    CHECK(est_report_totals(quick)->reserved_bytes == 0 && est_report_totals(full)->reserved_bytes > 0,
          "%s: reserved %llu (full %llu)", what, U(est_report_totals(quick)->reserved_bytes),
          U(est_report_totals(full)->reserved_bytes));
    est_totals a = *est_report_totals(full), b = *est_report_totals(quick);
    a.reserved_bytes = b.reserved_bytes = 0;
    CHECK(memcmp(&a, &b, sizeof a) == 0, "%s: the other totals differ", what);
    const est_peak *p = est_report_peak(full), *q = est_report_peak(quick);
    CHECK(p->bytes == q->bytes && p->phase == q->phase && strcmp(p->layer, q->layer) == 0,
          "%s: peak %llu %s at %s vs %llu %s at %s", what, U(q->bytes), est_phase_name(q->phase), q->layer,
          U(p->bytes), est_phase_name(p->phase), p->layer);
    for (est_category c = 0; c < EST_CAT_COUNT; c++)
        CHECK(est_peak_category(p, c) == est_peak_category(q, c), "%s: the peak's %s differ", what,
              est_category_name(c));
    CHECK(est_report_layer_count(full) == est_report_layer_count(quick), "%s: layer counts differ", what);
    for (size_t i = 0; i < est_report_layer_count(full) && i < est_report_layer_count(quick); i++) {
        const est_layer *x = est_report_layer(full, i), *y = est_report_layer(quick, i);
        CHECK(x->temp_bytes == y->temp_bytes && x->recomputed == y->recomputed && x->saved_bytes == y->saved_bytes,
              "%s: layer %s differs", what, x->name);
    }
}

/* est_options.skip_reserved: the same step without the caching allocator's
 * replay: every figure but reserved_bytes (0) as with it, and the same
 * error, whatever the options. */
static void test_skip_reserved(const char *models_dir) {
    static const char *const models[] = {"resnet18.onnx", "transformer_block.json", "lora_block.json", "mlp.onnx",
                                         "small_cnn.json"};
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", models_dir, models[m]);
        est_graph *g = NULL;
        est_error err;
        if (est_load_file(path, &g, &err) != EST_OK) {
            CHECK(false, "%s: %s", path, err.message);
            continue;
        }
        for (int v = 0; v < SKIP_RESERVED_OPTIONS; v++) {
            est_options opt;
            skip_reserved_options(v, &opt);
            est_report *full = NULL, *quick = NULL;
            est_error full_err = {0}, quick_err = {0};
            est_status full_st = est_estimate(g, &opt, &full, &full_err);
            opt.skip_reserved = 1;
            est_status quick_st = est_estimate(g, &opt, &quick, &quick_err);
            char what[256];
            snprintf(what, sizeof what, "skip_reserved, %s, options %d", models[m], v);
            CHECK(full_st == quick_st && strcmp(full_err.message, quick_err.message) == 0, "%s: %d %s vs %d %s",
                  what, (int)quick_st, quick_err.message, (int)full_st, full_err.message);
            if (full && quick) check_same_but_reserved(what, full, quick);
            est_report_free(full);
            est_report_free(quick);
        }
        est_graph_free(g);
    }
}

/* ---- reserved memory: the caching allocator's replay ------------------------------ */

/* x [B, 1024] -> Relu -> r1 -> Relu -> r2 -> Relu -> r3, no weights. */
static const char chain_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"chain\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 1024]}],\n"
    " \"nodes\": [\n"
    "  {\"name\": \"relu1\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"r1\"]},\n"
    "  {\"name\": \"relu2\", \"op\": \"Relu\", \"inputs\": [\"r1\"], \"outputs\": [\"r2\"]},\n"
    "  {\"name\": \"relu3\", \"op\": \"Relu\", \"inputs\": [\"r2\"], \"outputs\": [\"r3\"]}],\n"
    " \"outputs\": [\"r3\"]}\n";

static void test_reserved(const char *models_dir) {
    const uint64_t MiB = 1 << 20;
    est_graph *g = load_json(chain_json, "chain.json");
    /* Inference at batch 2048: every tensor is 2048 x 1024 x 4 = 8 MiB, a
     * large-pool request under 10 MiB, so each new segment is 20 MiB and a
     * block splits when more than 1 MiB would be left.
     *   x   new segment S1 [0, 20): x at [0, 8), free [8, 20)
     *   r1  best fit: S1's 12 MiB; at [8, 16), free [16, 20) (4 MiB)
     *   r2  no free block of 8 MiB: new segment S2: r2 at [0, 8), free [8, 20)
     *   r1 freed after relu2: [8, 16) merges with [16, 20): S1 free [8, 20)
     *   r3  two free 12 MiB blocks: the lower address, S1's [8, 20)
     * 40 MiB reserved; the allocated peak is x + r1 + r2 = 24 MiB. */
    est_report *r = run(g, (run_opts){.mode = EST_MODE_INFER, .batch = 2048});
    if (r) {
        CHECK(est_report_peak(r)->bytes == 24 * MiB, "chain infer: peak %llu, expected 24 MiB",
              U(est_report_peak(r)->bytes));
        CHECK(est_report_totals(r)->reserved_bytes == 40 * MiB, "chain infer: reserved %llu, expected 40 MiB",
              U(est_report_totals(r)->reserved_bytes));
    }
    est_report_free(r);
    /* At batch 4096 (16 MiB tensors: segments of exactly 16 MiB, unsplit):
     * x, r1, r2 need three segments; r3 reuses r1's. 48 MiB. */
    r = run(g, (run_opts){.mode = EST_MODE_INFER, .batch = 4096});
    if (r)
        CHECK(est_report_totals(r)->reserved_bytes == 48 * MiB, "chain infer b4096: reserved %llu, expected 48 MiB",
              U(est_report_totals(r)->reserved_bytes));
    est_report_free(r);
    /* Under a 30 MiB limit the peak (24 MiB) fits but the segments do not:
     * r2 needs a second 20 MiB segment (40 > 30); releasing the free
     * segments frees none (S1 holds x and r1), so the allocator runs out at
     * relu2, as PyTorch would. Under 40 MiB it does not. */
    est_options opt;
    est_options_init(&opt);
    opt.mode = EST_MODE_INFER;
    opt.batch = 2048;
    est_error err;
    for (int k = 0; k < 2; k++) {
        opt.memory_limit = (k ? 40 : 30) * MiB;
        r = NULL;
        CHECK(est_estimate(g, &opt, &r, &err) == EST_OK, "chain with a limit: %s", err.message);
        if (!r) continue;
        const est_totals *t = est_report_totals(r);
        CHECK(t->out_of_memory == !k, "chain under %d MiB: out_of_memory %d", k ? 40 : 30, t->out_of_memory);
        CHECK(est_report_peak(r)->bytes == 24 * MiB, "the limit does not change the allocated peak");
        if (!k)
            CHECK(t->oom_phase == EST_PHASE_FORWARD && strcmp(t->oom_layer, "relu2") == 0 && t->reserved_bytes == 20 * MiB,
                  "chain under 30 MiB runs out at relu2 in the forward with 20 MiB reserved: %s %s %llu",
                  est_phase_name(t->oom_phase), t->oom_layer, U(t->reserved_bytes));
        est_report_free(r);
    }
    est_graph_free(g);
    /* Invariants on real graphs, in both modes: the segments hold at least
     * the allocated peak, and are whole multiples of 2 MiB. */
    const char *files[] = {"mlp.onnx", "resnet18.onnx"};
    for (int f = 0; f < 2; f++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", models_dir, files[f]);
        est_graph *m = NULL;
        if (est_load_file(path, &m, &err) != EST_OK) {
            CHECK(false, "%s: %s", path, err.message);
            continue;
        }
        for (int mode = 0; mode < 2; mode++) {
            est_report *q = run(m, (run_opts){.mode = mode ? EST_MODE_INFER : EST_MODE_TRAIN, .batch = 16});
            if (!q) continue;
            uint64_t res = est_report_totals(q)->reserved_bytes, peak = est_report_peak(q)->bytes;
            CHECK(res >= peak && res % (2 * MiB) == 0, "%s %s: reserved %llu must be >= the peak %llu and whole segments",
                  files[f], mode ? "infer" : "train", U(res), U(peak));
            est_report_free(q);
        }
        est_graph_free(m);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODELS_DIR\n", argv[0]);
        return 2;
    }
    test_rounding();
    test_skip_reserved(argv[1]);
    test_reserved(argv[1]);
    return test_result("test_simulate_alloc");
}
