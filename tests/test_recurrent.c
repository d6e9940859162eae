/*
 * test_recurrent.c: LSTM, GRU and RNN (layers/recurrent.c) and the loader's
 * passes over PyTorch's recurrent modules (onnx/rnn_weights.c, and the
 * output layout in libestimate/lifetimes.c).
 *
 *  1. A JSON LSTM node: shapes in both layouts, FLOPs, what it saves (the
 *     output and cuDNN's reserve space), its workspace, and bad input.
 *  2. GRU and RNN FLOPs and reserve; under --kernels verify, the executor's
 *     own reserve, backward workspace, unread Y and strided-input copies.
 *  3. The exports of tests/data/make_rnn.py: the TorchScript exporter's
 *     rearranged weights become the module's own parameters, the two
 *     exporters agree, the stacked layers know their call, and a layer's
 *     output is read in PyTorch's layout, without a copy.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "estimate.h"
#include "test_util.h"

#ifndef TEST_DATA_DIR
#define TEST_DATA_DIR "tests/data"
#endif

static uint64_t round512(uint64_t b) { return (b + 511) / 512 * 512; }

/* A report reads its graph: the graphs live until the end of the test. */
static est_graph *graphs[16];
static int n_graphs;

static void keep(est_graph *g) {
    if (n_graphs < 16) graphs[n_graphs++] = g;
    else est_graph_free(g);
}

/* x [10, batch, 16] (or [batch, 10, 16] with layout 1) into one recurrent
 * node of hidden size 32 over `dirs` directions. */
static char *rnn_json(const char *op, int gates, int dirs, int layout, const char *w_rows_override) {
    static char doc[4096];
    char w_rows[32];
    snprintf(w_rows, sizeof w_rows, "%d", gates * 32);
    snprintf(doc, sizeof doc,
             "{\"format\": \"memest-graph\", \"version\": 1, \"opset_import\": {\"\": 20},"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": %s}],"
             " \"initializers\": ["
             "  {\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [%d, %s, 16]},"
             "  {\"name\": \"R\", \"dtype\": \"float32\", \"dims\": [%d, %d, 32]},"
             "  {\"name\": \"B\", \"dtype\": \"float32\", \"dims\": [%d, %d]}],"
             " \"nodes\": [{\"name\": \"rnn\", \"op\": \"%s\", \"inputs\": [\"x\", \"W\", \"R\", \"B\"],"
             "  \"outputs\": [\"y\", \"y_h\"%s], \"attributes\": {\"hidden_size\": {\"int\": 32},"
             "  \"direction\": {\"string\": \"%s\"}, \"layout\": {\"int\": %d}}}],"
             " \"outputs\": [\"y\"]}",
             layout ? "[\"batch\", 10, 16]" : "[10, 8, 16]", dirs,
             w_rows_override ? w_rows_override : w_rows, dirs, gates * 32, dirs, 2 * gates * 32, op,
             strcmp(op, "LSTM") == 0 ? ", \"y_c\"" : "", dirs == 2 ? "bidirectional" : "forward", layout);
    return doc;
}

/* Batch 8: bound where x's leading dim is symbolic (layout 1), declared
 * where it is the sequence (layout 0). */
static est_report *estimate_json_on(const char *doc, est_mode mode, est_kernels kernels, est_error *err,
                                    est_status *st) {
    est_graph *g = NULL;
    *st = est_load_json_buffer(doc, strlen(doc), "rnn.json", &g, err);
    if (*st != EST_OK) return NULL;
    est_options opt;
    est_options_init(&opt);
    opt.batch = strstr(doc, "\"batch\"") ? 8 : 0;
    opt.mode = mode;
    opt.kernels = kernels;
    est_report *r = NULL;
    *st = est_estimate(g, &opt, &r, err);
    keep(g);
    return r;
}

static est_report *estimate_json(const char *doc, est_mode mode, est_error *err, est_status *st) {
    return estimate_json_on(doc, mode, EST_KERNELS_PYTORCH, err, st);
}

static bool shape_is(const est_tensor_info *t, int rank, const int64_t *dims) {
    if (t->rank != rank) return false;
    for (int d = 0; d < rank; d++)
        if (t->shape[d] != dims[d]) return false;
    return true;
}

/* The forward workspace rule of layers/recurrent.c for an LSTM call,
 * float32: 1.226e6 + 1.051e7 L D + 0.4334 W L + 9.585 D T N H 4 - 7.864 T N I 4
 * (docs/memory-model.md, "Recurrent layers"); its backward is smaller here. */
static uint64_t lstm_forward_workspace(double layers, double dirs, double weight_bytes, double input) {
    double t = 10, n = 8, h = 32;
    return (uint64_t)(1.226e6 + 1.051e7 * layers * dirs + 0.4334 * weight_bytes * layers + 9.585 * dirs * t * n * h * 4 -
                      7.864 * t * n * input * 4);
}

static void json_lstm(void) {
    est_error err;
    est_status st;
    est_report *r = estimate_json(rnn_json("LSTM", 4, 2, 0, NULL), EST_MODE_TRAIN, &err, &st);
    CHECK(r, "LSTM: %s", err.message);
    if (!r) return;
    const est_layer *L = est_report_layer(r, 0);
    int64_t y[4] = {10, 2, 8, 32}, state[3] = {2, 8, 32};
    CHECK(L->n_outputs == 3 && shape_is(&L->outputs[0], 4, y) && shape_is(&L->outputs[1], 3, state) &&
          shape_is(&L->outputs[2], 3, state), "LSTM layout 0: Y [10, 2, 8, 32], Y_h and Y_c [2, 8, 32]");
    /* steps x batch x directions = 160 rows; products 2 * 128 * (16 + 32)
     * each, gates and state 32 * (3 * 4 + 5) */
    uint64_t fwd = 160ull * 2 * 128 * 48 + 160ull * 32 * 17;
    CHECK(L->flops_forward == fwd, "LSTM forward FLOPs %llu, expected %llu", (unsigned long long)L->flops_forward,
          (unsigned long long)fwd);
    CHECK(L->flops_backward == 2 * fwd, "LSTM backward FLOPs %llu, expected %llu",
          (unsigned long long)L->flops_backward, (unsigned long long)(2 * fwd));
    /* Y (20,480 bytes) and the reserve 4 * 2 * (5 * 10 * 8 * 32 + 2 * 8 * 32);
     * x is the graph's input, not an activation */
    uint64_t reserve = 4ull * 2 * (5 * 10 * 8 * 32 + 2 * 8 * 32);
    CHECK(L->saved_bytes == 20480 + round512(reserve), "LSTM saves %llu, expected Y 20480 + reserve %llu",
          (unsigned long long)L->saved_bytes, (unsigned long long)round512(reserve));
    /* one layer, two directions; the weights 4 * (2*128*16 + 2*128*32 + 2*256) */
    uint64_t ws = round512(lstm_forward_workspace(1, 2, 4.0 * (2 * 128 * 16 + 2 * 128 * 32 + 2 * 256), 16));
    CHECK(L->temp_bytes == ws, "LSTM workspace %llu, expected %llu", (unsigned long long)L->temp_bytes,
          (unsigned long long)ws);
    est_report_free(r);

    r = estimate_json(rnn_json("LSTM", 4, 1, 1, NULL), EST_MODE_INFER, &err, &st);
    CHECK(r, "LSTM layout 1: %s", err.message);
    if (r) {
        const est_layer *L1 = est_report_layer(r, 0);
        int64_t y1[4] = {8, 10, 1, 32}, state1[3] = {8, 1, 32};
        CHECK(shape_is(&L1->outputs[0], 4, y1) && shape_is(&L1->outputs[1], 3, state1),
              "LSTM layout 1: Y [8, 10, 1, 32], Y_h [8, 1, 32]");
        CHECK(L1->saved_bytes == 0 && L1->flops_backward == 0, "inference saves nothing and has no backward");
        est_report_free(r);
    }

    r = estimate_json(rnn_json("LSTM", 4, 2, 0, "100"), EST_MODE_TRAIN, &err, &st);
    CHECK(!r && st == EST_ESHAPE && strstr(err.message, "node 'rnn'") &&
          strstr(err.message, "W (input 1) has shape [2, 100, 16], expected [2, 128, 16]"),
          "a W of the wrong shape: %s", err.message);
    est_report_free(r);
    char *bad = rnn_json("LSTM", 4, 1, 0, NULL);
    char *dir = strstr(bad, "\"forward\"");
    if (dir) memcpy(dir, "\"sidewa\" ", 9);
    r = estimate_json(bad, EST_MODE_TRAIN, &err, &st);
    CHECK(!r && st == EST_EATTR && strstr(err.message, "attribute 'direction' is 'sidewa'"),
          "an unknown direction: %s", err.message);
    est_report_free(r);
}

/* One forward layer of op over 10 steps x 8 rows (80 rows): forward FLOPs
 * and what it saves, Y (10240 bytes) and the reserve, against the values
 * derived by hand. */
static void check_one_layer(const char *op, int gates, uint64_t fwd, uint64_t reserve) {
    est_error err;
    est_status st;
    est_report *r = estimate_json(rnn_json(op, gates, 1, 0, NULL), EST_MODE_TRAIN, &err, &st);
    CHECK(r, "%s: %s", op, err.message);
    if (!r) return;
    const est_layer *L = est_report_layer(r, 0);
    CHECK(L->flops_forward == fwd, "%s forward FLOPs %llu, expected %llu", op, (unsigned long long)L->flops_forward,
          (unsigned long long)fwd);
    CHECK(L->saved_bytes == 10240 + round512(reserve), "%s saves %llu, expected Y 10240 + reserve %llu", op,
          (unsigned long long)L->saved_bytes, (unsigned long long)round512(reserve));
    est_report_free(r);
}

static void gru_and_rnn(void) {
    /* GRU: 2 * 96 * 48 a row for the products, 32 * (3 * 3 + 4) element-wise;
     * reserve 4 * (6 * T*N*H + 1 * N*H) */
    check_one_layer("GRU", 3, 80ull * 2 * 96 * 48 + 80ull * 32 * 13, 4ull * (6 * 10 * 8 * 32 + 1 * 8 * 32));
    /* RNN: 2 * 32 * 48 and 32 * 3; reserve 4 * (T*N*H + N*H) */
    check_one_layer("RNN", 1, 80ull * 2 * 32 * 48 + 80ull * 32 * 3, 4ull * (1 * 10 * 8 * 32 + 1 * 8 * 32));
}

/* ---- memest verify's executor (--kernels verify) ---------------------------- */

static void check_verify_layer(const char *what, const char *doc, est_mode mode, uint64_t saved, uint64_t temp) {
    est_error err;
    est_status st;
    est_report *r = estimate_json_on(doc, mode, EST_KERNELS_VERIFY, &err, &st);
    CHECK(r, "%s: %s", what, err.message);
    if (!r) return;
    const est_layer *L = est_report_layer(r, est_report_layer_count(r) - 1);
    CHECK(L->saved_bytes == saved && L->temp_bytes == temp, "%s: saves %llu, temp %llu; expected %llu, %llu", what,
          (unsigned long long)L->saved_bytes, (unsigned long long)L->temp_bytes, (unsigned long long)saved,
          (unsigned long long)temp);
    est_report_free(r);
}

/* verify/ops_recurrent.cu keeps its own reserve, K floats per step, row and
 * hidden unit (LSTM 5, GRU 4, RNN 1), and takes in backward the gates'
 * gradients (T N KG floats, KG = 4H, 4H, H) and the carried dh (and dc).
 * T 10, N 8, H 32: T N H floats are 10,240 bytes. */
static void verify_kernels(void) {
    /* LSTM, two directions: Y 20,480 + reserve 2 * 5 * 10,240; backward
     * 10 * 8 * 128 * 4 + dh and dc 1,024 each */
    check_verify_layer("LSTM train", rnn_json("LSTM", 4, 2, 0, NULL), EST_MODE_TRAIN, 20480 + 102400, 40960 + 2048);
    /* in inference the reserve is the forward's workspace; Y_h and Y_c,
     * which nothing reads, are made (2,048 bytes each) and dropped when the
     * node returns */
    check_verify_layer("LSTM infer", rnn_json("LSTM", 4, 2, 0, NULL), EST_MODE_INFER, 0, 102400 + 4096);
    /* so is a Y nothing reads (with Y_h; Y_c is the graph's output) */
    char *doc = rnn_json("LSTM", 4, 2, 0, NULL);
    char *out = strstr(doc, "\"outputs\": [\"y\"]}");
    if (out) memcpy(out, "\"outputs\": [\"y_c\"]}", strlen("\"outputs\": [\"y_c\"]}") + 1);
    check_verify_layer("LSTM infer, Y unread", doc, EST_MODE_INFER, 0, 102400 + 20480 + 2048);
    /* GRU: Y 10,240 + reserve 4 * 10,240; backward 10 * 8 * 128 * 4 + dh */
    check_verify_layer("GRU train", rnn_json("GRU", 3, 1, 0, NULL), EST_MODE_TRAIN, 10240 + 40960, 40960 + 1024);
    /* RNN: Y + reserve 10,240 each; backward 10 * 8 * 32 * 4 + dh */
    check_verify_layer("RNN train", rnn_json("RNN", 1, 1, 0, NULL), EST_MODE_TRAIN, 10240 + 10240, 10240 + 1024);
    /* a batch-first input transposed into the layer: the executor copies the
     * strided X (8 * 10 * 16 floats, 5,120 bytes) for the forward and again
     * for the backward */
    char transposed[4096];
    snprintf(transposed, sizeof transposed,
             "{\"format\": \"memest-graph\", \"version\": 1, \"opset_import\": {\"\": 20},"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [8, 10, 16]}],"
             " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [1, 32, 16]},"
             "  {\"name\": \"R\", \"dtype\": \"float32\", \"dims\": [1, 32, 32]},"
             "  {\"name\": \"s\", \"dtype\": \"float32\", \"dims\": [1]}],"
             " \"nodes\": [{\"name\": \"scale\", \"op\": \"Mul\", \"inputs\": [\"x\", \"s\"], \"outputs\": [\"xs\"]},"
             "  {\"name\": \"t\", \"op\": \"Transpose\", \"inputs\": [\"xs\"], \"outputs\": [\"xt\"],"
             "   \"attributes\": {\"perm\": {\"ints\": [1, 0, 2]}}},"
             "  {\"name\": \"rnn\", \"op\": \"RNN\", \"inputs\": [\"xt\", \"W\", \"R\"], \"outputs\": [\"y\"],"
             "   \"attributes\": {\"hidden_size\": {\"int\": 32}}}],"
             " \"outputs\": [\"y\"]}");
    /* saves xt's storage (the Mul's output, 5,120), Y and the reserve */
    check_verify_layer("RNN train, transposed input", transposed, EST_MODE_TRAIN, 5120 + 10240 + 10240,
                       10240 + 1024 + 5120);
    check_verify_layer("RNN infer, transposed input", transposed, EST_MODE_INFER, 0, 10240 + 5120);
}

/* ---- the exports ---------------------------------------------------------- */

static est_report *estimate_export(const char *file, int timeline) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", TEST_DATA_DIR, file);
    est_error err;
    est_graph *g = NULL;
    if (est_load_file(path, &g, &err) != EST_OK) {
        CHECK(false, "%s: %s", file, err.message);
        return NULL;
    }
    est_options opt;
    est_options_init(&opt);
    opt.batch = 8;
    opt.mode = EST_MODE_TRAIN;
    opt.timeline = timeline;
    est_report *r = NULL;
    if (est_estimate(g, &opt, &r, &err) != EST_OK) CHECK(false, "%s: %s", file, err.message);
    keep(g);
    return r;
}

static const est_layer *find_op(const est_report *r, const char *op, int nth) {
    for (size_t i = 0; i < est_report_layer_count(r); i++) {
        const est_layer *L = est_report_layer(r, i);
        if (strcmp(L->op, op) == 0 && nth-- == 0) return L;
    }
    return NULL;
}

static void lstm_exports(void) {
    est_report *legacy = estimate_export("lstm2bi.legacy.onnx", 1);
    est_report *dynamo = estimate_export("lstm2bi.dynamo.onnx", 0);
    if (!legacy || !dynamo) goto done;
    /* nn.LSTM(16, 32, 2 layers, bidirectional) and Linear(64, 5):
     * 2 * (4*32*(16+32) + 8*32) + 2 * (4*32*(64+32) + 8*32) + 64*5 + 5 */
    const uint64_t params = 2 * (4 * 32 * 48 + 256) + 2 * (4 * 32 * 96 + 256) + 325;
    CHECK(est_report_totals(legacy)->param_count == params && est_report_totals(dynamo)->param_count == params,
          "parameters: legacy %llu, dynamo %llu, expected %llu",
          (unsigned long long)est_report_totals(legacy)->param_count,
          (unsigned long long)est_report_totals(dynamo)->param_count, (unsigned long long)params);
    /* the TorchScript exporter's gate reorder is gone: the layer reads the
     * module's weights as one parameter */
    const est_layer *first = find_op(legacy, "LSTM", 0);
    CHECK(first && first->n_inputs >= 4 &&
          strcmp(first->inputs[1].name, "rnn.weight_ih_l0+rnn.weight_ih_l0_reverse") == 0 &&
          strcmp(first->inputs[3].name, "rnn.bias_ih_l0+rnn.bias_hh_l0+rnn.bias_ih_l0_reverse+rnn.bias_hh_l0_reverse") == 0,
          "the first LSTM's W and B: %s, %s", first && first->n_inputs >= 4 ? first->inputs[1].name : "?",
          first && first->n_inputs >= 4 ? first->inputs[3].name : "?");
    CHECK(!find_op(legacy, "Concat", 1), "the legacy export keeps at most one Concat (the initial state's shape)");
    /* both exporters describe the same PyTorch step */
    uint64_t a = est_report_peak(legacy)->bytes, b = est_report_peak(dynamo)->bytes;
    CHECK(a == b, "peaks differ: legacy %llu, dynamo %llu", (unsigned long long)a, (unsigned long long)b);
    /* each layer carries the two-layer call's workspace (16 is the call's input) */
    const est_layer *second = find_op(dynamo, "LSTM", 1);
    uint64_t w1 = 4ull * (2 * 128 * 64 + 2 * 128 * 32 + 2 * 256);
    CHECK(second && second->temp_bytes >= round512(lstm_forward_workspace(2, 2, (double)w1, 16)),
          "the second layer's workspace %llu is below the call's forward %llu",
          second ? (unsigned long long)second->temp_bytes : 0ull,
          (unsigned long long)round512(lstm_forward_workspace(2, 2, (double)w1, 16)));
    /* Y -> Transpose -> Reshape is PyTorch's own [seq, batch, 2 * hidden]
     * output: the next layer's input is no copy */
    size_t copies = 0;
    for (size_t i = 0; i < est_report_event_count(legacy); i++) {
        const est_event *e = est_report_event(legacy, i);
        if (e->kind == EST_EVENT_ALLOC && e->category == EST_CAT_ACTIVATIONS && e->tensor &&
            strstr(e->tensor, "/rnn/Reshape"))
            copies++;
    }
    CHECK(est_report_event_count(legacy) > 0 && copies == 0, "%zu allocations of a Reshape between the layers",
          copies);
done:
    est_report_free(legacy);
    est_report_free(dynamo);
}

static void other_exports(void) {
    static const struct {
        const char *file;
        uint64_t params;
    } cases[] = {
        {"gru2.legacy.onnx", 3 * 32 * 48 + 6 * 32 + 3 * 32 * 64 + 6 * 32 + 32 * 5 + 5},
        {"gru2.dynamo.onnx", 3 * 32 * 48 + 6 * 32 + 3 * 32 * 64 + 6 * 32 + 32 * 5 + 5},
        {"rnn1.legacy.onnx", 32 * 48 + 2 * 32 + 32 * 5 + 5},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        est_report *r = estimate_export(cases[k].file, 0);
        if (!r) continue;
        CHECK(est_report_totals(r)->param_count == cases[k].params, "%s: %llu parameters, expected %llu",
              cases[k].file, (unsigned long long)est_report_totals(r)->param_count,
              (unsigned long long)cases[k].params);
        est_report_free(r);
    }
}

int main(void) {
    json_lstm();
    gru_and_rnn();
    verify_kernels();
    lstm_exports();
    other_exports();
    for (int k = 0; k < n_graphs; k++) est_graph_free(graphs[k]);
    return test_result("test_recurrent");
}
