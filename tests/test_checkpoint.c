/*
 * test_checkpoint: activation checkpointing (est_options.checkpoint,
 * libestimate/checkpoint.c and recompute.c) in the simulated step, on
 * hand-built graphs through the public API; the figures are derived by
 * hand as in test_simulate.
 *
 * Checks, on a stem, two residual-free blocks and a head: segments by
 * every=N and by prefix, with both exporters' scope spellings; what the
 * forward keeps, the recomputation's FLOPs and flags, the peak of the
 * recompute-then-backward, what stays under bf16 autocast, and the errors
 * (no match, no module names). A tensor of a segment that only a Shape
 * reads is freed as soon as the recompute makes it.
 *
 * usage: test_checkpoint
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simulate_util.h"

static const char mlp_json[] = MLP_JSON("mlp", "\"batch\", 100");

/* x [B,256] -> stem (Gemm) -> h0 -> blocks.0 -> out0 -> blocks.1 -> out1 -> head
 * (Gemm to 10) -> y. Each block: Relu a, Gemm b, Relu c, Gemm out, with the
 * Gemms as leaf modules fc_a, fc_b. `dynamo` spells the leaf scopes with full
 * names ("blocks/blocks.0/blocks.0.fc_a"), TorchScript-style without
 * ("blocks/blocks.0/fc_a"). Writes into buf (size n). */
static const char *ckpt_graph(char *buf, size_t n, bool dynamo) {
    size_t u = (size_t)snprintf(buf, n,
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"ckpt\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 256]}],\n"
        " \"initializers\": [{\"name\": \"W0\", \"dtype\": \"float32\", \"dims\": [256, 256]},\n"
        "  {\"name\": \"B0\", \"dtype\": \"float32\", \"dims\": [256]},\n"
        "  {\"name\": \"Wh\", \"dtype\": \"float32\", \"dims\": [10, 256]},\n"
        "  {\"name\": \"Bh\", \"dtype\": \"float32\", \"dims\": [10]}");
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 2; k++)
            u += (size_t)snprintf(buf + u, n - u,
                                  ",\n  {\"name\": \"W%d%c\", \"dtype\": \"float32\", \"dims\": [256, 256]},"
                                  " {\"name\": \"B%d%c\", \"dtype\": \"float32\", \"dims\": [256]}",
                                  b, "ab"[k], b, "ab"[k]);
    u += (size_t)snprintf(buf + u, n - u,
        "],\n \"nodes\": [\n"
        "  {\"name\": \"stem\", \"op\": \"Gemm\", \"inputs\": [\"x\", \"W0\", \"B0\"], \"outputs\": [\"h0\"],"
        " \"attributes\": {\"transB\": {\"int\": 1}}, \"scope\": \"stem\"}");
    for (int b = 0; b < 2; b++) {
        char in[8], leaf_a[32], leaf_b[32];
        snprintf(in, sizeof in, b ? "out0" : "h0");
        snprintf(leaf_a, sizeof leaf_a, dynamo ? "blocks.%d.fc_a" : "fc_a", b);
        snprintf(leaf_b, sizeof leaf_b, dynamo ? "blocks.%d.fc_b" : "fc_b", b);
        u += (size_t)snprintf(buf + u, n - u,
            ",\n  {\"name\": \"relu_a%d\", \"op\": \"Relu\", \"inputs\": [\"%s\"], \"outputs\": [\"a%d\"],"
            " \"scope\": \"blocks/blocks.%d\"},\n"
            "  {\"name\": \"fc_a%d\", \"op\": \"Gemm\", \"inputs\": [\"a%d\", \"W%da\", \"B%da\"], \"outputs\": [\"b%d\"],"
            " \"attributes\": {\"transB\": {\"int\": 1}}, \"scope\": \"blocks/blocks.%d/%s\"},\n"
            "  {\"name\": \"relu_b%d\", \"op\": \"Relu\", \"inputs\": [\"b%d\"], \"outputs\": [\"c%d\"],"
            " \"scope\": \"blocks/blocks.%d\"},\n"
            "  {\"name\": \"fc_b%d\", \"op\": \"Gemm\", \"inputs\": [\"c%d\", \"W%db\", \"B%db\"], \"outputs\": [\"out%d\"],"
            " \"attributes\": {\"transB\": {\"int\": 1}}, \"scope\": \"blocks/blocks.%d/%s\"}",
            b, in, b, b, b, b, b, b, b, b, leaf_a, b, b, b, b, b, b, b, b, b, b, leaf_b);
    }
    snprintf(buf + u, n - u,
        ",\n  {\"name\": \"head\", \"op\": \"Gemm\", \"inputs\": [\"out1\", \"Wh\", \"Bh\"], \"outputs\": [\"y\"],"
        " \"attributes\": {\"transB\": {\"int\": 1}}, \"scope\": \"head\"}],\n"
        " \"outputs\": [\"y\"]}\n");
    return buf;
}

static est_report *run_checkpoint(const est_graph *g, est_checkpoint ck, est_error *err) {
    est_options opt;
    est_options_init(&opt);
    opt.optimizer = EST_OPT_SGD;
    opt.batch = 1024;
    opt.checkpoint = ck;
    est_report *r = NULL;
    est_estimate(g, &opt, &r, err);
    return r;
}

/* every=1 under bf16 autocast, sgd, batch 1024. Float32 master weights;
 * the Gemms copy their inputs and weights to bf16 (half of A per
 * activation copy, half of W per weight copy) and write bf16; the Relus keep
 * the dtype of their input. */
static void check_checkpoint_amp(const est_graph *g, uint64_t A, uint64_t W, uint64_t Bb, uint64_t Wh, uint64_t Bh,
                                 uint64_t P, uint64_t y32) {
    const uint64_t a = A / 2, w = W / 2, bb = R(256 * 2), wh = R(10 * 256 * 2), bh = R(10 * 2), y = R(1024 * 10 * 2);
    est_options opt;
    est_options_init(&opt);
    opt.optimizer = EST_OPT_SGD;
    opt.batch = 1024;
    opt.amp = EST_AMP_BF16;
    est_error err;
    est_report *plain = NULL, *ck = NULL;
    CHECK(est_estimate(g, &opt, &plain, &err) == EST_OK, "amp: %s", err.message);
    opt.checkpoint.every = 1;
    CHECK(est_estimate(g, &opt, &ck, &err) == EST_OK, "amp + checkpoint: %s", err.message);
    if (plain && ck) {
        /* At the end of the forward, with checkpointing: the stem's copy of
         * x (float32 input, copied per use and kept by the stem's backward),
         * h0 and out0 (the segments' inputs, bf16), out1 (the head saves
         * it), y, and autocast's weight cache, which holds a bf16 copy of
         * every weight until autocast exits after the loss (5 Gemm weights
         * and biases, the head's). What the blocks would save is gone. */
        uint64_t kept = a /* x copy */ + a /* h0 */ + a /* out0 */ + a /* out1 */ + y +
                        5 * (w + bb) + wh + bh /* the weight cache */;
        (void)y32;
        CHECK(est_report_totals(ck)->activations_bytes == kept,
              "amp + every=1: activations_bytes %llu, expected %llu", U(est_report_totals(ck)->activations_bytes),
              U(kept));
        CHECK(est_report_totals(ck)->activations_bytes < est_report_totals(plain)->activations_bytes &&
                  est_report_peak(ck)->bytes < est_report_peak(plain)->bytes,
              "amp + checkpoint keeps less and peaks lower than amp alone");
        CHECK(est_report_totals(ck)->params_bytes == P && est_report_totals(ck)->grads_bytes == P,
              "amp + checkpoint: float32 params and grads");
        (void)A, (void)Wh, (void)Bh, (void)Bb;
    }
    est_report_free(plain);
    est_report_free(ck);
}

static void test_checkpoint(void) {
    const uint64_t A = 1024 * 256 * 4; /* every activation: 1 MiB, a multiple of 512 */
    const uint64_t W = 256 * 256 * 4, Bb = R(256 * 4), Wh = R(10 * 256 * 4), Bh = R(10 * 4);
    const uint64_t P = 5 * (W + Bb) + Wh + Bh, y = R(1024 * 10 * 4), loss = 512;
    CHECK(P == 1326592 && y == 40960, "checkpoint derivation sizes: P %llu y %llu", U(P), U(y));
    /* forward FLOPs of one block: two Gemms (2*B*256*256) and two Relus (B*256) */
    const uint64_t block_flops = 2 * (2ull * 1024 * 256 * 256) + 2 * (1024 * 256);
    static const char *const blocks_1[] = {"blocks.1"}, *const blocks[] = {"blocks"}, *const none[] = {"nothing"};
    static const struct {
        const char *what;
        est_checkpoint ck;
        uint64_t segments, kept; /* activations at the end of the forward, without y */
        int seg[10];             /* per layer; -1 outside */
    } cases[] = {
        /* no checkpoint: relu_a and fc_a keep a, relu_b and fc_b keep c, head keeps out1 */
        {"none", {0}, 0, 5, {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1}},
        /* each block: its input (h0, out0) and head's out1 */
        {"every=1", {.every = 1}, 2, 3, {-1, 0, 0, 0, 0, 1, 1, 1, 1, -1}},
        /* both blocks as one: h0 and out1 */
        {"every=2", {.every = 2}, 1, 2, {-1, 0, 0, 0, 0, 0, 0, 0, 0, -1}},
        {"prefix blocks", {.prefixes = blocks, .n_prefixes = 1}, 1, 2, {-1, 0, 0, 0, 0, 0, 0, 0, 0, -1}},
        /* only blocks.1: a0, c0, its input out0, and out1 */
        {"prefix blocks.1", {.prefixes = blocks_1, .n_prefixes = 1}, 1, 4, {-1, -1, -1, -1, -1, 0, 0, 0, 0, -1}},
    };
    char json[8192];
    for (int dyn = 0; dyn < 2; dyn++) {
        est_graph *g = load_json(ckpt_graph(json, sizeof json, dyn), dyn ? "ckpt-dynamo.json" : "ckpt.json");
        if (!g) continue;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            char what[96];
            snprintf(what, sizeof what, "checkpoint %s (%s scopes)", cases[c].what, dyn ? "dynamo" : "TorchScript");
            est_error err;
            est_report *r = run_checkpoint(g, cases[c].ck, &err);
            CHECK(r != NULL, "%s: estimate failed: %s", what, err.message);
            if (!r) continue;
            const est_totals *t = est_report_totals(r);
            CHECK(t->checkpoint_segments == cases[c].segments, "%s: %llu segments, expected %llu", what,
                  U(t->checkpoint_segments), U(cases[c].segments));
            CHECK(t->activations_bytes == cases[c].kept * A + y, "%s: activations_bytes %llu, expected %llu A + y",
                  what, U(t->activations_bytes), U(cases[c].kept));
            uint64_t recomputed_flops = 0;
            for (size_t i = 0; i < est_report_layer_count(r) && i < 10; i++) {
                const est_layer *L = est_report_layer(r, i);
                CHECK(L->segment == cases[c].seg[i], "%s: layer %s in segment %lld, expected %d", what, L->name,
                      (long long)L->segment, cases[c].seg[i]);
                /* every segment is recomputed whole: its last Gemm saves its input */
                CHECK(L->recomputed == (cases[c].seg[i] >= 0), "%s: layer %s recomputed %d", what, L->name,
                      L->recomputed);
                if (L->recomputed) recomputed_flops += L->flops_forward;
            }
            uint64_t blocks_in = cases[c].seg[1] >= 0 ? 2 : cases[c].seg[5] >= 0 ? 1 : 0;
            CHECK(t->flops_recompute == blocks_in * block_flops && recomputed_flops == t->flops_recompute,
                  "%s: flops_recompute %llu, expected %llu", what, U(t->flops_recompute), U(blocks_in * block_flops));
            CHECK(t->flops_backward == est_report_totals(r)->flops_backward, "%s", what);
            if (strcmp(cases[c].what, "every=1") == 0) {
                /* The peak: fc_b1's backward. blocks.1 was recomputed on the
                 * way in (a1 and c1 kept, b1 and the copy of out1 freed);
                 * live: h0, out0 (the two segments' inputs), a1, c1; the
                 * gradients d_out1 (coming in) and d_c1 (going out); the
                 * .grad of the head and of fc_b1; the column sum of d_out1
                 * [1024, 256] for fc_b1's bias (layers/sum_to.c: 16 blocks
                 * of 32 x 4 outputs down the rows, 4 * 256 * 2048 bytes = 2 A,
                 * and a block of semaphores). The recompute itself peaks at
                 * 5 A + d_out1 with fewer .grads: smaller. */
                uint64_t grads = Wh + Bh + W + Bb, bias_sum = 2 * A + 512;
                check_peak(r,
                           &(expect_peak){.bytes = P + A + (y + loss) + grads + 4 * A + 2 * A + bias_sum,
                                          .phase = EST_PHASE_BACKWARD, .layer = "fc_b1", .params = P,
                                          .grads = grads, .activations = 4 * A, .temp = 2 * A + bias_sum,
                                          .inputs = A, .other = y + loss},
                           what);
            }
            est_report_free(r);
        }
        /* the same step without checkpointing, and checkpointing ignored in inference */
        est_options opt;
        est_options_init(&opt);
        opt.mode = EST_MODE_INFER;
        opt.batch = 1024;
        opt.checkpoint.every = 1;
        est_error err;
        est_report *ri = NULL, *rp = NULL;
        CHECK(est_estimate(g, &opt, &ri, &err) == EST_OK, "checkpoint in inference: %s", err.message);
        opt.checkpoint.every = 0;
        CHECK(est_estimate(g, &opt, &rp, &err) == EST_OK, "inference: %s", err.message);
        if (ri && rp)
            CHECK(est_report_peak(ri)->bytes == est_report_peak(rp)->bytes &&
                      est_report_totals(ri)->checkpoint_segments == 0,
                  "inference ignores checkpointing");
        est_report_free(ri);
        est_report_free(rp);
        /* errors: a prefix that matches nothing, under amp, both kinds at once */
        est_report *bad = run_checkpoint(g, (est_checkpoint){.prefixes = none, .n_prefixes = 1}, &err);
        CHECK(!bad && err.code == EST_EINVAL && strstr(err.message, "nothing") && strstr(err.message, "ckpt"),
              "a prefix matching no module: EINVAL naming the model and the prefix, got '%s'", err.message);
        est_report_free(bad);
        bad = run_checkpoint(g, (est_checkpoint){.prefixes = blocks, .n_prefixes = 1, .every = 1}, &err);
        CHECK(!bad && err.code == EST_EINVAL, "prefixes and every together: EINVAL");
        est_report_free(bad);
        check_checkpoint_amp(g, A, W, Bb, Wh, Bh, P, y);
        est_graph_free(g);
    }
    /* a model without module names */
    est_graph *g = load_json(mlp_json, "mlp.json");
    est_error err;
    est_report *bad = g ? run_checkpoint(g, (est_checkpoint){.every = 1}, &err) : NULL;
    CHECK(g && !bad && err.code == EST_EINVAL && strstr(err.message, "module names"),
          "no scopes: EINVAL saying the model names no modules, got '%s'", g ? err.message : "");
    est_graph_free(g);
}

/* ckpt_graph's scopes inside a wrapper module "m", as an export of
 * Wrapper(model) writes them: "m/blocks/blocks.0/fc_a" (TorchScript) or
 * "m/m.blocks/m.blocks.0/m.blocks.0.fc_a" (dynamo). */
static const char *wrap_scopes(const char *src, bool dynamo, char *out, size_t n) {
    static const char key[] = "\"scope\": \"";
    size_t u = 0;
    for (const char *s = src; *s && u + 64 < n;) {
        if (strncmp(s, key, sizeof key - 1) != 0) {
            out[u++] = *s++;
            continue;
        }
        u += (size_t)snprintf(out + u, n - u, "%sm", key);
        for (s += sizeof key - 1; *s != '"' && u + 64 < n; s++) {
            if (s[-1] == '"' || s[-1] == '/') u += (size_t)snprintf(out + u, n - u, dynamo ? "/m." : "/");
            if (*s != '/') out[u++] = *s;
        }
    }
    out[u] = '\0';
    return out;
}

/* Prefixes the user writes for their own model find its modules inside an
 * export's wrapper: "blocks.1" is "m.blocks.1", "fc_b" each block's fc_b;
 * only at dots ("locks.1" finds nothing). */
static void test_checkpoint_wrapped(void) {
    static const char *const blocks_1[] = {"blocks.1"}, *const m_blocks_1[] = {"m.blocks.1"},
                             *const fc_b[] = {"fc_b"}, *const locks_1[] = {"locks.1"};
    static const struct {
        const char *what;
        est_checkpoint ck;
        uint64_t segments;
        int seg[10]; /* per layer; -1 outside */
    } cases[] = {
        {"blocks.1", {.prefixes = blocks_1, .n_prefixes = 1}, 1, {-1, -1, -1, -1, -1, 0, 0, 0, 0, -1}},
        {"m.blocks.1", {.prefixes = m_blocks_1, .n_prefixes = 1}, 1, {-1, -1, -1, -1, -1, 0, 0, 0, 0, -1}},
        {"fc_b", {.prefixes = fc_b, .n_prefixes = 1}, 2, {-1, -1, -1, -1, 0, -1, -1, -1, 1, -1}},
    };
    char json[8192], wrapped[16384];
    for (int dyn = 0; dyn < 2; dyn++) {
        wrap_scopes(ckpt_graph(json, sizeof json, dyn), dyn, wrapped, sizeof wrapped);
        CHECK(strstr(wrapped, dyn ? "\"m/m.blocks/m.blocks.0/m.blocks.0.fc_a\"" : "\"m/blocks/blocks.0/fc_a\""),
              "wrap_scopes wrote %.300s", strstr(wrapped, "\"nodes\""));
        est_graph *g = load_json(wrapped, dyn ? "ckpt-wrapped-dynamo.json" : "ckpt-wrapped.json");
        if (!g) continue;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            est_error err;
            est_report *r = run_checkpoint(g, cases[c].ck, &err);
            CHECK(r != NULL, "wrapped, %s: estimate failed: %s", cases[c].what, err.message);
            if (!r) continue;
            CHECK(est_report_totals(r)->checkpoint_segments == cases[c].segments,
                  "wrapped (%s scopes), %s: %llu segments, expected %llu", dyn ? "dynamo" : "TorchScript",
                  cases[c].what, U(est_report_totals(r)->checkpoint_segments), U(cases[c].segments));
            for (size_t i = 0; i < est_report_layer_count(r) && i < 10; i++)
                CHECK(est_report_layer(r, i)->segment == cases[c].seg[i], "wrapped, %s: layer %s in segment %lld",
                      cases[c].what, est_report_layer(r, i)->name, (long long)est_report_layer(r, i)->segment);
            est_report_free(r);
        }
        est_error err;
        est_report *bad = run_checkpoint(g, (est_checkpoint){.prefixes = locks_1, .n_prefixes = 1}, &err);
        CHECK(!bad && err.code == EST_EINVAL, "wrapped: 'locks.1' matches only at a dot");
        est_report_free(bad);
        est_graph_free(g);
    }
}

/* x -> g0 in "layers.3" -> g1 in "m.layers.3" -> g2 in "head": "layers.3"
 * names g0's module directly and g1's after "m."; the direct match wins. */
static const char direct_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"direct\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 64]}],\n"
    " \"initializers\": [{\"name\": \"W0\", \"dtype\": \"float32\", \"dims\": [64, 64]},\n"
    "  {\"name\": \"W1\", \"dtype\": \"float32\", \"dims\": [64, 64]},\n"
    "  {\"name\": \"W2\", \"dtype\": \"float32\", \"dims\": [64, 64]}],\n"
    " \"nodes\": [\n"
    "  {\"name\": \"g0\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W0\"], \"outputs\": [\"a\"],"
    " \"scope\": \"layers/layers.3\"},\n"
    "  {\"name\": \"g1\", \"op\": \"MatMul\", \"inputs\": [\"a\", \"W1\"], \"outputs\": [\"b\"],"
    " \"scope\": \"m/m.layers/m.layers.3\"},\n"
    "  {\"name\": \"g2\", \"op\": \"MatMul\", \"inputs\": [\"b\", \"W2\"], \"outputs\": [\"y\"], \"scope\": \"head\"}],\n"
    " \"outputs\": [\"y\"]}\n";

static void test_checkpoint_direct_match_wins(void) {
    static const char *const layers_3[] = {"layers.3"}, *const m_layers_3[] = {"m.layers.3"};
    static const struct {
        const char *const *prefix;
        int seg[3];
    } cases[] = {{layers_3, {0, -1, -1}}, {m_layers_3, {-1, 0, -1}}};
    est_graph *g = load_json(direct_json, "direct.json");
    for (size_t c = 0; g && c < 2; c++) {
        est_error err;
        est_report *r = run_checkpoint(g, (est_checkpoint){.prefixes = cases[c].prefix, .n_prefixes = 1}, &err);
        CHECK(r != NULL, "%s: estimate failed: %s", cases[c].prefix[0], err.message);
        for (size_t i = 0; r && i < 3; i++)
            CHECK(est_report_layer(r, i)->segment == cases[c].seg[i], "prefix %s: layer %s in segment %lld",
                  cases[c].prefix[0], est_report_layer(r, i)->name, (long long)est_report_layer(r, i)->segment);
        est_report_free(r);
    }
    est_graph_free(g);
}

/* x [batch 1024, 1024] (T = 4 MiB) -> layers.0: h = x W, r = Relu(h) read only
 * by a Shape, y = Reshape(h, Shape(r)), g = y W2; layers.1: h1 = g W3,
 * z = Relu(h1). SGD, checkpoint prefix "layers.0". The Shape folds and does
 * not run again, so the recompute frees r as soon as it makes it: at g's
 * backward live are x, z, the recomputed h (g's saved input, y a view of
 * it), the gradients of g and y, the three weights and the gradients of W3
 * and W2: 10 T, and the loss (512 bytes); r kept until the end of the
 * segment's backward would make it 11 T. */
static const char shape_read_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"rc\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 1024]}],\n"
    " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [1024, 1024]},\n"
    "  {\"name\": \"W2\", \"dtype\": \"float32\", \"dims\": [1024, 1024]},\n"
    "  {\"name\": \"W3\", \"dtype\": \"float32\", \"dims\": [1024, 1024]}],\n"
    " \"nodes\": [{\"name\": \"h\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"h\"], \"scope\": \"layers/layers.0\"},\n"
    "  {\"name\": \"r\", \"op\": \"Relu\", \"inputs\": [\"h\"], \"outputs\": [\"r\"], \"scope\": \"layers/layers.0\"},\n"
    "  {\"name\": \"sh\", \"op\": \"Shape\", \"inputs\": [\"r\"], \"outputs\": [\"s\"], \"scope\": \"layers/layers.0\"},\n"
    "  {\"name\": \"y\", \"op\": \"Reshape\", \"inputs\": [\"h\", \"s\"], \"outputs\": [\"y\"], \"scope\": \"layers/layers.0\"},\n"
    "  {\"name\": \"g\", \"op\": \"MatMul\", \"inputs\": [\"y\", \"W2\"], \"outputs\": [\"g\"], \"scope\": \"layers/layers.0\"},\n"
    "  {\"name\": \"h1\", \"op\": \"MatMul\", \"inputs\": [\"g\", \"W3\"], \"outputs\": [\"h1\"], \"scope\": \"layers/layers.1\"},\n"
    "  {\"name\": \"r1\", \"op\": \"Relu\", \"inputs\": [\"h1\"], \"outputs\": [\"z\"], \"scope\": \"layers/layers.1\"}],\n"
    " \"outputs\": [\"z\"]}\n";

static void check_checkpoint_shape_read(void) {
    static const char *const layers_0[] = {"layers.0"};
    const uint64_t T = 1024 * 1024 * 4;
    est_graph *g = load_json(shape_read_json, "shape read");
    est_error err;
    est_report *r = g ? run_checkpoint(g, (est_checkpoint){.prefixes = layers_0, .n_prefixes = 1}, &err) : NULL;
    CHECK(r != NULL, "shape read: estimate failed: %s", g ? err.message : "no graph");
    if (r)
        CHECK(est_report_peak(r)->bytes == 10 * T + 512 && strcmp(est_report_peak(r)->layer, "g") == 0,
              "shape read: peak %llu at %s, expected %llu at g", (unsigned long long)est_report_peak(r)->bytes,
              est_report_peak(r)->layer, (unsigned long long)(10 * T + 512));
    est_report_free(r);
    est_graph_free(g);
}

int main(void) {
    test_checkpoint();
    check_checkpoint_shape_read();
    test_checkpoint_wrapped();
    test_checkpoint_direct_match_wins();
    return test_result("test_checkpoint");
}
