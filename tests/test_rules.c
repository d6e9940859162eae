/*
 * test_rules: the rules that make an estimate follow what PyTorch runs rather
 * than what the file spells out, and the per-op workspace rules, through the
 * public API only (libestimate/estimate.h).
 *
 * Every expected figure is derived by hand from the rule it tests and written
 * out as arithmetic:
 *  - a tensor's bytes are elements x 4 (float32); a per-layer temp_bytes is
 *    the larger of the forward and (in training) backward workspace, each
 *    rounded up to 512 bytes like the caching allocator (R() below).
 *
 * Checks, without arguments (JSON graphs written here, docs/json-format.md):
 *  1. GELU fusion (libestimate/fuse.c): the TorchScript exporter's
 *     Div(x, sqrt 2) -> Erf -> Add(., 1) -> Mul(x, .) -> Mul(., 0.5), with the
 *     constants as initializers and as Constant nodes, becomes one Gelu node
 *     (est_graph_fused_sequences() == 1, four nodes fewer) that in training
 *     saves x only; the hand-written order (x * 0.5 first), other constants
 *     (sqrt 2 off by 1e-4, 2 instead of 1, 0.6 instead of 0.5) and an
 *     intermediate with a second reader are left alone.
 *  2. cuDNN Conv workspace (layers/conv.c): a 64->64 3x3 conv, a grouped
 *     3x3 conv (channels-last copies), strided 1x1 convs over 256 and 64
 *     channels (ResNet's downsample), a depthwise 7x7 conv, convs reducing over fewer than 32 values or with fewer than
 *     32 filters, and 1x1 convs at both sides of the weight-gradient min().
 *     With est_options.kernels = EST_KERNELS_VERIFY, the executor's im2col
 *     buffer instead: one sample's columns or as many as fit in the
 *     output's size; none for 1x1 and depthwise convs.
 *  3. MatMul copies a batched operand that is a transposed view
 *     (layers/linear.c, matmul_workspace); not a contiguous one, nor a 2-D
 *     transposed one.
 *  4. The folded-BatchNorm unfold is the ONNX loader's: a JSON graph with the
 *     TorchScript signal (producer "pytorch", weight "onnx::Conv_1") is left
 *     as written.
 *
 *  5. SiLU fusion (libestimate/fuse.c): Sigmoid(h) -> Mul(h, .) becomes one
 *     Swish node that saves h only; Mul(other, sigmoid) and a sigmoid with a
 *     second reader are left alone.
 *  6. Module calls keep their arguments (libestimate/graph.c,
 *     plan_module_calls): a block's input lives until the block's last node
 *     in inference; without scopes it is freed after its last reader; the
 *     JSON writer keeps the scopes. A Softmax in a block (a transformer
 *     layer, "layer.0") stays alive until the block returns: attention
 *     probabilities that the layer holds.
 *  8. Scaled dot-product attention fusion (libestimate/fuse.c): both
 *     exporters' expansions (TorchScript: Transpose [0,1,3,2]; dynamo:
 *     Reshape / Transpose [0,2,1] / Reshape; with a mask and a Dropout)
 *     become one Attention node that saves q, k, v, its output and a
 *     logsumexp per row, and makes no attention matrix in inference; eager
 *     attention (the product scaled, not the operands) is left alone.
 *  9. Split's outputs are views of its input, as torch.split / chunk return
 *     them: a saved piece keeps the whole input alive.
 * 10. A linear layer's bias add (MatMul then Add of a 1-D weight) writes
 *     into the product, as PyTorch's addmm / add_ do; not when the product
 *     has a second reader or the addend is an activation.
 * 12. SplitToSequence read by SequenceAt (the dynamo exporter's aten.split;
 *     libestimate/sequences.c) becomes one Slice view per item read: a
 *     chunk size (the last chunk smaller) and a list of sizes with a
 *     negative index give the same bytes as Split does; a chunk size read
 *     at a negative index cannot be lowered and names the op unsupported.
 * 13. cuDNN's split-K weight gradient splits across the SMs of the device
 *     the step runs on (est_options.device; libestimate/device.c): a 3x3
 *     64->64 conv at batch 8, 56x56, keeps in + out + partials of the
 *     weight (147456 bytes) for its backward: 26 of them on an H100 (132
 *     SMs / 5 tiles), 8 on a T4 (40 / 5), 21 on an A100 (108 / 5).
 * 11. A Dropout that drops nothing (ratio 0) returns its input, as
 *     at::dropout does; one with ratio 0.1 in training makes a new tensor.
 *
 * With an argument, the directory of the truth exports (shared/truth/onnx;
 * exit 77 when it is absent):
 *  7. folded BatchNorms restored (onnx/onnx_loader.c, unfold_batchnorm):
 *     resnet18 legacy/dynamo/dynamo-train 20 each, legacy-train and
 *     squeezenet1_0 0; the dynamo-train ones train (saved statistics, 5
 *     FLOPs per element) and match the real BatchNorms of legacy-train layer
 *     for layer; totals: PyTorch's 11689512 parameters and 9600 buffer
 *     elements; a JSON round trip keeps 20 BatchNorms and unfolds nothing
 *     more.
 *
 * usage: test_rules [TRUTH_ONNX_DIR]
 */
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"
#include "test_util.h"

#define U(x) ((unsigned long long)(x))

/* The caching allocator's rounding: up to a multiple of 512 bytes. */
static uint64_t R(uint64_t bytes) { return (bytes + 511) / 512 * 512; }

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* ---- helpers ------------------------------------------------------------------ */

static est_graph *load_json(const char *text, const char *name) {
    est_error err;
    est_graph *g = NULL;
    if (est_load_json_buffer(text, strlen(text), name, &g, &err) != EST_OK) {
        CHECK(false, "%s: load failed: %s", name, err.message);
        return NULL;
    }
    return g;
}

static est_report *run(const est_graph *g, est_mode mode, int64_t batch) {
    if (!g) return NULL;
    est_options opt;
    est_options_init(&opt);
    opt.mode = mode;
    opt.optimizer = EST_OPT_SGD;
    opt.batch = batch;
    est_error err;
    est_report *r = NULL;
    if (est_estimate(g, &opt, &r, &err) != EST_OK) {
        CHECK(false, "%s: estimate failed: %s", est_graph_name(g), err.message);
        return NULL;
    }
    return r;
}

static const est_layer *layer_named(const est_report *r, const char *name, const char *what) {
    for (size_t i = 0; r && i < est_report_layer_count(r); i++)
        if (strcmp(est_report_layer(r, i)->name, name) == 0) return est_report_layer(r, i);
    CHECK(false, "%s: no layer '%s'", what, name);
    return NULL;
}

static size_t count_op(const est_report *r, const char *op) {
    size_t n = 0;
    for (size_t i = 0; r && i < est_report_layer_count(r); i++)
        if (strcmp(est_report_layer(r, i)->op, op) == 0) n++;
    return n;
}

/* ---- 1. GELU fusion --------------------------------------------------------------- */

/* x [4, 100] -> fc (MatMul, W [100, 250]) -> h [4, 250] -> GELU(h) -> y [4, 250]
 *   -> out (MatMul, W2 [250, 10]) -> z [4, 10].
 * The weights make h need a gradient, so the GELU's backward runs and saves.
 * h is 4 x 250 x 4 = 4000 bytes, which the allocator rounds to 4096.
 * The GELU part is given as text (its nodes), the constants as initializers
 * with the values below. */
static char *gelu_graph(const char *gelu_nodes, const char *extra_outputs, double c_sqrt2, double c_one,
                        double c_half, bool constant_nodes) {
    static const char head[] =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"gelu\", \"producer\": \"pytorch\",\n"
        " \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [4, 100]}],\n"
        " \"initializers\": [\n"
        "  {\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [100, 250]},\n"
        "  {\"name\": \"W2\", \"dtype\": \"float32\", \"dims\": [250, 10]}";
    char consts[1024];
    if (constant_nodes) {
        /* the TorchScript exporter writes its scalars as Constant nodes */
        snprintf(consts, sizeof consts,
                 "],\n \"nodes\": [\n"
                 "  {\"name\": \"c_sqrt2\", \"op\": \"Constant\", \"inputs\": [], \"outputs\": [\"sqrt2\"],\n"
                 "   \"attributes\": {\"value\": {\"tensor\": {\"dtype\": \"float32\", \"dims\": [], \"values\": [%.17g]}}}},\n"
                 "  {\"name\": \"c_one\", \"op\": \"Constant\", \"inputs\": [], \"outputs\": [\"one\"],\n"
                 "   \"attributes\": {\"value\": {\"tensor\": {\"dtype\": \"float32\", \"dims\": [], \"values\": [%.17g]}}}},\n"
                 "  {\"name\": \"c_half\", \"op\": \"Constant\", \"inputs\": [], \"outputs\": [\"half\"],\n"
                 "   \"attributes\": {\"value\": {\"tensor\": {\"dtype\": \"float32\", \"dims\": [], \"values\": [%.17g]}}}},\n",
                 c_sqrt2, c_one, c_half);
    } else {
        snprintf(consts, sizeof consts,
                 ",\n"
                 "  {\"name\": \"sqrt2\", \"dtype\": \"float32\", \"dims\": [], \"values\": [%.17g]},\n"
                 "  {\"name\": \"one\", \"dtype\": \"float32\", \"dims\": [], \"values\": [%.17g]},\n"
                 "  {\"name\": \"half\", \"dtype\": \"float32\", \"dims\": [], \"values\": [%.17g]}],\n"
                 " \"nodes\": [\n",
                 c_sqrt2, c_one, c_half);
    }
    char tail[2048];
    snprintf(tail, sizeof tail,
             "  {\"name\": \"fc\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"h\"]},\n"
             "%s,\n"
             "  {\"name\": \"out\", \"op\": \"MatMul\", \"inputs\": [\"y\", \"W2\"], \"outputs\": [\"z\"]}],\n"
             " \"outputs\": [\"z\"%s]}\n",
             gelu_nodes, extra_outputs);
    size_t n = strlen(head) + strlen(consts) + strlen(tail) + 1;
    char *text = malloc(n);
    if (text) snprintf(text, n, "%s%s%s", head, consts, tail);
    return text;
}

/* aten::gelu as torch/onnx/symbolic_opset9.py writes it. */
static const char gelu_exporter[] =
    "  {\"name\": \"div\", \"op\": \"Div\", \"inputs\": [\"h\", \"sqrt2\"], \"outputs\": [\"d\"]},\n"
    "  {\"name\": \"erf\", \"op\": \"Erf\", \"inputs\": [\"d\"], \"outputs\": [\"e\"]},\n"
    "  {\"name\": \"add\", \"op\": \"Add\", \"inputs\": [\"e\", \"one\"], \"outputs\": [\"a\"]},\n"
    "  {\"name\": \"mul\", \"op\": \"Mul\", \"inputs\": [\"h\", \"a\"], \"outputs\": [\"m\"]},\n"
    "  {\"name\": \"mulhalf\", \"op\": \"Mul\", \"inputs\": [\"m\", \"half\"], \"outputs\": [\"y\"]}";

/* The same formula as a person writes it: 0.5 * x * (1 + erf(x / sqrt 2)),
 * with x * 0.5 first. Eager PyTorch keeps these intermediates. */
static const char gelu_handwritten[] =
    "  {\"name\": \"mulhalf\", \"op\": \"Mul\", \"inputs\": [\"h\", \"half\"], \"outputs\": [\"m\"]},\n"
    "  {\"name\": \"div\", \"op\": \"Div\", \"inputs\": [\"h\", \"sqrt2\"], \"outputs\": [\"d\"]},\n"
    "  {\"name\": \"erf\", \"op\": \"Erf\", \"inputs\": [\"d\"], \"outputs\": [\"e\"]},\n"
    "  {\"name\": \"add\", \"op\": \"Add\", \"inputs\": [\"e\", \"one\"], \"outputs\": [\"a\"]},\n"
    "  {\"name\": \"mul\", \"op\": \"Mul\", \"inputs\": [\"m\", \"a\"], \"outputs\": [\"y\"]}";

#define SQRT2 1.4142135623730951

static void check_gelu_fused(bool constant_nodes) {
    const char *what = constant_nodes ? "gelu (Constant nodes)" : "gelu (initializers)";
    char *text = gelu_graph(gelu_exporter, "", SQRT2, 1.0, 0.5, constant_nodes);
    est_graph *g = text ? load_json(text, what) : NULL;
    free(text);
    if (!g) return;
    /* written: fc, div, erf, add, mul, mulhalf, out = 7 nodes (+3 Constants);
     * fused: the five GELU nodes become one, 4 fewer */
    size_t written = 7 + (constant_nodes ? 3 : 0);
    CHECK(est_graph_fused_sequences(g) == 1, "%s: fused %zu sequences, expected 1", what,
          est_graph_fused_sequences(g));
    CHECK(est_graph_node_count(g) == written - 4, "%s: %zu nodes, expected %zu - 4", what, est_graph_node_count(g),
          written);

    est_report *r = run(g, EST_MODE_TRAIN, 0);
    if (r) {
        CHECK(count_op(r, "Gelu") == 1, "%s: %zu Gelu layers, expected 1", what, count_op(r, "Gelu"));
        CHECK(count_op(r, "Erf") == 0 && count_op(r, "Div") == 0 && count_op(r, "Mul") == 0 &&
                  count_op(r, "Add") == 0,
              "%s: pieces of the GELU left: Erf %zu Div %zu Mul %zu Add %zu", what, count_op(r, "Erf"),
              count_op(r, "Div"), count_op(r, "Mul"), count_op(r, "Add"));
        const est_layer *G = NULL;
        for (size_t i = 0; i < est_report_layer_count(r); i++)
            if (strcmp(est_report_layer(r, i)->op, "Gelu") == 0) G = est_report_layer(r, i);
        if (G) {
            /* Gelu(h) -> y: reads h, writes the last Mul's output y [4, 250] */
            CHECK(G->n_inputs == 1 && strcmp(G->inputs[0].name, "h") == 0, "%s: Gelu reads %zu inputs, first '%s'",
                  what, G->n_inputs, G->n_inputs ? G->inputs[0].name : "");
            CHECK(G->n_outputs == 1 && strcmp(G->outputs[0].name, "y") == 0 && G->outputs[0].elements == 4 * 250,
                  "%s: Gelu writes '%s' (%llu elements), expected y (1000)", what,
                  G->n_outputs ? G->outputs[0].name : "", G->n_outputs ? U(G->outputs[0].elements) : 0ULL);
            /* PyTorch's gelu saves x only: h, 4 x 250 x 4 = 4000 bytes -> 4096 */
            CHECK(G->saved_bytes == R(4 * 250 * 4), "%s: Gelu saves %llu, expected h's %llu", what,
                  U(G->saved_bytes), U(R(4 * 250 * 4)));
        }
        const est_layer *out = layer_named(r, "out", what);
        /* out reads y: y is 4 x 250 floats (4096 rounded), saved for W2's grad */
        if (out) CHECK(out->saved_bytes == R(4 * 250 * 4), "%s: out saves %llu", what, U(out->saved_bytes));
    }
    est_report_free(r);
    est_graph_free(g);
}

/* The GELU pieces stay separate: nothing fused, as many nodes as written,
 * and the intermediates kept for backward. */
static void check_gelu_not_fused(const char *what, const char *nodes, const char *extra_outputs, double c_sqrt2,
                                 double c_one, double c_half) {
    char *text = gelu_graph(nodes, extra_outputs, c_sqrt2, c_one, c_half, false);
    est_graph *g = text ? load_json(text, what) : NULL;
    free(text);
    if (!g) return;
    CHECK(est_graph_fused_sequences(g) == 0, "%s: fused %zu sequences, expected 0", what,
          est_graph_fused_sequences(g));
    CHECK(est_graph_node_count(g) == 7, "%s: %zu nodes, expected the 7 written", what, est_graph_node_count(g));
    est_report *r = run(g, EST_MODE_TRAIN, 0);
    if (r) {
        CHECK(count_op(r, "Gelu") == 0, "%s: %zu Gelu layers, expected 0", what, count_op(r, "Gelu"));
        CHECK(count_op(r, "Erf") == 1, "%s: %zu Erf layers, expected 1", what, count_op(r, "Erf"));
        /* Erf's backward needs its input d = h / c: 4096 bytes */
        const est_layer *erf = layer_named(r, "erf", what);
        if (erf) CHECK(erf->saved_bytes == R(4 * 250 * 4), "%s: erf saves %llu", what, U(erf->saved_bytes));
    }
    est_report_free(r);
    est_graph_free(g);
}

static void check_gelu(void) {
    check_gelu_fused(false);
    check_gelu_fused(true);
    check_gelu_not_fused("gelu hand-written order", gelu_handwritten, "", SQRT2, 1.0, 0.5);
    /* 1.4143 is 6e-5 off sqrt 2 relatively: beyond float32 rounding */
    check_gelu_not_fused("gelu x / 1.4143", gelu_exporter, "", 1.4143, 1.0, 0.5);
    check_gelu_not_fused("gelu erf + 2", gelu_exporter, "", SQRT2, 2.0, 0.5);
    check_gelu_not_fused("gelu * 0.6", gelu_exporter, "", SQRT2, 1.0, 0.6);
    /* erf's output is also a graph output: fusing would lose it */
    check_gelu_not_fused("gelu e also an output", gelu_exporter, ", \"e\"", SQRT2, 1.0, 0.5);
}

/* ---- 5. SiLU fusion ---------------------------------------------------------------- */

/* x [4, 100] -> fc (MatMul, W [100, 250]) -> h [4, 250] -> the nodes given ->
 * y [4, 250] -> out (MatMul, W2 [250, 10]) -> z. h is 4000 bytes, 4096
 * rounded. */
static est_graph *silu_graph(const char *nodes, const char *extra_outputs, const char *what) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"silu\", \"opset_import\": {\"\": 17},\n"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [4, 100]}],\n"
             " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [100, 250]},\n"
             "                    {\"name\": \"W2\", \"dtype\": \"float32\", \"dims\": [250, 10]}],\n"
             " \"nodes\": [{\"name\": \"fc\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"h\"]},\n"
             "  %s,\n"
             "  {\"name\": \"out\", \"op\": \"MatMul\", \"inputs\": [\"y\", \"W2\"], \"outputs\": [\"z\"]}],\n"
             " \"outputs\": [\"z\"%s]}\n",
             nodes, extra_outputs);
    return load_json(text, what);
}

static void check_silu(void) {
    const char *what = "silu (exporter)";
    est_graph *g = silu_graph("{\"name\": \"sig\", \"op\": \"Sigmoid\", \"inputs\": [\"h\"], \"outputs\": [\"s\"]},\n"
                              "  {\"name\": \"mul\", \"op\": \"Mul\", \"inputs\": [\"h\", \"s\"], \"outputs\": [\"y\"]}",
                              "", what);
    if (g) {
        CHECK(est_graph_fused_sequences(g) == 1 && est_graph_node_count(g) == 3,
              "%s: %zu fused, %zu nodes; expected 1 and fc, Swish, out", what, est_graph_fused_sequences(g),
              est_graph_node_count(g));
        est_report *r = run(g, EST_MODE_TRAIN, 0);
        const est_layer *sw = r ? layer_named(r, "sig", what) : NULL;
        if (sw) {
            CHECK(strcmp(sw->op, "Swish") == 0, "%s: node 'sig' is %s, expected Swish", what, sw->op);
            /* silu_backward(grad, self): h only, 4096 bytes; no sigmoid tensor */
            CHECK(sw->saved_bytes == R(4 * 250 * 4), "%s: Swish saves %llu, expected %llu", what,
                  U(sw->saved_bytes), U(R(4 * 250 * 4)));
            CHECK(sw->n_outputs == 1 && strcmp(sw->outputs[0].name, "y") == 0, "%s: Swish writes '%s'", what,
                  sw->n_outputs ? sw->outputs[0].name : "");
        }
        est_report_free(r);
        est_graph_free(g);
    }
    /* x * sigmoid(v) with v another tensor: a gate, not a SiLU */
    what = "sigmoid gate";
    g = silu_graph("{\"name\": \"sig\", \"op\": \"Sigmoid\", \"inputs\": [\"h\"], \"outputs\": [\"s\"]},\n"
                   "  {\"name\": \"dbl\", \"op\": \"Add\", \"inputs\": [\"h\", \"h\"], \"outputs\": [\"h2\"]},\n"
                   "  {\"name\": \"mul\", \"op\": \"Mul\", \"inputs\": [\"h2\", \"s\"], \"outputs\": [\"y\"]}",
                   "", what);
    if (g) CHECK(est_graph_fused_sequences(g) == 0 && est_graph_node_count(g) == 5, "%s: fused %zu", what,
                 est_graph_fused_sequences(g));
    est_graph_free(g);
    /* the sigmoid is also a graph output: PyTorch keeps it, nothing to fold */
    what = "silu, sigmoid returned";
    g = silu_graph("{\"name\": \"sig\", \"op\": \"Sigmoid\", \"inputs\": [\"h\"], \"outputs\": [\"s\"]},\n"
                   "  {\"name\": \"mul\", \"op\": \"Mul\", \"inputs\": [\"h\", \"s\"], \"outputs\": [\"y\"]}",
                   ", \"s\"", what);
    if (g) CHECK(est_graph_fused_sequences(g) == 0 && est_graph_node_count(g) == 4, "%s: fused %zu", what,
                 est_graph_fused_sequences(g));
    est_graph_free(g);
}

/* ---- 6. module calls keep their arguments --------------------------------------- */

/* x [1, 1024] -> e (root) -> t0 -> block "blk": p -> t1, q -> t2, r -> t3 ->
 * s (root) -> y. Every tensor is 1024 floats, 4096 bytes. */
static est_graph *block_graph(bool scoped, const char *what) {
    char text[4096];
    const char *sc[5] = {"", "", "", "", ""};
    if (scoped) {
        sc[0] = "\"scope\": \"\", ";
        sc[1] = "\"scope\": \"blk/p\", ";
        sc[2] = "\"scope\": \"blk/q\", ";
        sc[3] = "\"scope\": \"blk/r\", ";
        sc[4] = "\"scope\": \"\", ";
    }
    snprintf(text, sizeof text,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"block\", \"opset_import\": {\"\": 17},\n"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [1, 1024]}],\n"
             " \"nodes\": [{\"name\": \"e\", \"op\": \"Relu\", %s\"inputs\": [\"x\"], \"outputs\": [\"t0\"]},\n"
             "  {\"name\": \"p\", \"op\": \"Relu\", %s\"inputs\": [\"t0\"], \"outputs\": [\"t1\"]},\n"
             "  {\"name\": \"q\", \"op\": \"Relu\", %s\"inputs\": [\"t1\"], \"outputs\": [\"t2\"]},\n"
             "  {\"name\": \"r\", \"op\": \"Relu\", %s\"inputs\": [\"t2\"], \"outputs\": [\"t3\"]},\n"
             "  {\"name\": \"s\", \"op\": \"Relu\", %s\"inputs\": [\"t3\"], \"outputs\": [\"y\"]}],\n"
             " \"outputs\": [\"y\"]}\n",
             sc[0], sc[1], sc[2], sc[3], sc[4]);
    return load_json(text, what);
}

/* x [1, 1024] -> e (root) -> t0 -> layer.0/attn: OP -> p, a -> a1;
 * layer.0/ffn: f1 -> f1, f2 -> f2; root: out -> y. OP is Softmax or Relu;
 * every tensor 4096 bytes. */
static est_graph *attention_block_graph(const char *op, const char *what) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"attn\", \"opset_import\": {\"\": 17},\n"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [1, 1024]}],\n"
             " \"nodes\": [{\"name\": \"e\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"t0\"], \"scope\": \"\"},\n"
             "  {\"name\": \"sm\", \"op\": \"%s\", \"inputs\": [\"t0\"], \"outputs\": [\"p\"], \"scope\": \"layer.0/attn\"},\n"
             "  {\"name\": \"a\", \"op\": \"Relu\", \"inputs\": [\"p\"], \"outputs\": [\"a1\"], \"scope\": \"layer.0/attn\"},\n"
             "  {\"name\": \"f1\", \"op\": \"Relu\", \"inputs\": [\"a1\"], \"outputs\": [\"h1\"], \"scope\": \"layer.0/ffn\"},\n"
             "  {\"name\": \"f2\", \"op\": \"Relu\", \"inputs\": [\"h1\"], \"outputs\": [\"h2\"], \"scope\": \"layer.0/ffn\"},\n"
             "  {\"name\": \"out\", \"op\": \"Relu\", \"inputs\": [\"h2\"], \"outputs\": [\"y\"], \"scope\": \"\"}],\n"
             " \"outputs\": [\"y\"]}\n",
             op);
    return load_json(text, what);
}

/* At f2, live: x; t0 and a1 (arguments of the layer.0 and ffn calls, held
 * until f2); h1 (f2's input); h2. With a Softmax, also p: the layer holds
 * the attention probabilities until it returns. */
static void check_attention_held_by_block(void) {
    const uint64_t T = 1024 * 4;
    static const struct { const char *op; uint64_t peak; } cases[] = {{"Softmax", 6 * T}, {"Relu", 5 * T}};
    for (int c = 0; c < 2; c++) {
        char what[64];
        snprintf(what, sizeof what, "%s in a block", cases[c].op);
        est_graph *g = attention_block_graph(cases[c].op, what);
        est_report *r = run(g, EST_MODE_INFER, 0);
        if (r)
            CHECK(est_report_peak(r)->bytes == cases[c].peak &&
                      strcmp(est_report_peak(r)->layer, "f2") == 0,
                  "%s: inference peak %llu at %s, expected %llu at f2", what, U(est_report_peak(r)->bytes),
                  est_report_peak(r)->layer, U(cases[c].peak));
        est_report_free(r);
        est_graph_free(g);
    }
}

/* Three calls of one block in a row: x -> e (root) -> per call k: attn: sm,
 * a; ffn: f1, f2 -> out (root); every tensor 4096 bytes. With `shared` every
 * call runs in scope "layer.0" (ALBERT's one shared layer as the dynamo
 * exporter names it), else in layer.0, layer.1, layer.2. */
static est_graph *repeated_block_graph(bool shared, const char *what) {
    char text[8192];
    int len = snprintf(text, sizeof text,
                       "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"rep\", \"opset_import\": {\"\": 17},\n"
                       " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [1, 1024]}],\n"
                       " \"nodes\": [{\"name\": \"e\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"h2_0\"], \"scope\": \"\"}");
    static const char *const step[][3] = {{"sm", "Softmax", "attn"}, {"a", "Relu", "attn"}, {"f1", "Relu", "ffn"},
                                          {"f2", "Relu", "ffn"}};
    for (int k = 1; k <= 3; k++)
        for (int j = 0; j < 4; j++) {
            char in[32], out[32];
            if (j == 0) snprintf(in, sizeof in, "h2_%d", k - 1);
            else snprintf(in, sizeof in, "%s_%d", step[j - 1][0], k);
            if (j == 3) snprintf(out, sizeof out, "h2_%d", k);
            else snprintf(out, sizeof out, "%s_%d", step[j][0], k);
            len += snprintf(text + len, sizeof text - (size_t)len,
                            ",\n  {\"name\": \"%s_%d\", \"op\": \"%s\", \"inputs\": [\"%s\"], \"outputs\": [\"%s\"], "
                            "\"scope\": \"layer.%d/%s\"}",
                            step[j][0], k, step[j][1], in, out, shared ? 0 : k - 1, step[j][2]);
        }
    snprintf(text + len, sizeof text - (size_t)len,
             ",\n  {\"name\": \"out\", \"op\": \"Relu\", \"inputs\": [\"h2_3\"], \"outputs\": [\"y\"], \"scope\": \"\"}],\n"
             " \"outputs\": [\"y\"]}\n");
    return load_json(text, what);
}

/* The calls of a block that runs three times in a row under one scope are
 * three calls (split_repeated_calls, libestimate/graph.c): each call's
 * Softmax output lives until its own call returns, as with three distinct
 * blocks. At f2_3 live: x; h2_2 and a_3 (arguments of the layer and ffn
 * calls); sm_3; f1_3; h2_3: 6 tensors. Taken as one call, h2_0 (its
 * argument) and sm_1, sm_2 would live too, and h2_2 would not: 8. */
static void check_repeated_calls(void) {
    const uint64_t T = 1024 * 4;
    uint64_t peak[2] = {0, 0};
    for (int shared = 0; shared <= 1; shared++) {
        const char *what = shared ? "one block called three times" : "three blocks";
        est_graph *g = repeated_block_graph(shared, what);
        est_report *r = run(g, EST_MODE_INFER, 0);
        if (r) peak[shared] = est_report_peak(r)->bytes;
        est_report_free(r);
        est_graph_free(g);
    }
    CHECK(peak[0] == 6 * T, "three blocks: inference peak %llu, expected %llu", U(peak[0]), U(6 * T));
    CHECK(peak[1] == peak[0], "one block called three times: inference peak %llu, expected %llu as three blocks",
          U(peak[1]), U(peak[0]));
}

/* Two calls of one module, named as the TorchScript exporter names later
 * calls: blk/a, blk/b, blk/c and the module's own Add in "blk", then
 * blk/a_1, blk/b_1, blk/c_1 and "blk_1". Per call k: p = a(in), q = b(p),
 * r = c(q), o = Add(r, p); e and y at the root; every tensor 4096 bytes (T).
 * Taken as two calls (the counts dropped), at most five tensors live: x,
 * the call's argument, p, q and r at c. Taken by the raw names, "blk" would
 * be one call from a to c_1 that holds its argument h0 and (frame_locals)
 * p1 to its end: six at c_1. */
static void check_torchscript_call_counts(void) {
    const uint64_t T = 1024 * 4;
    const char *text =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"counts\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [1, 1024]}],\n"
        " \"nodes\": [{\"name\": \"e\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"h0\"], \"scope\": \"\"},\n"
        "  {\"name\": \"a1\", \"op\": \"Relu\", \"inputs\": [\"h0\"], \"outputs\": [\"p1\"], \"scope\": \"blk/a\"},\n"
        "  {\"name\": \"b1\", \"op\": \"Relu\", \"inputs\": [\"p1\"], \"outputs\": [\"q1\"], \"scope\": \"blk/b\"},\n"
        "  {\"name\": \"c1\", \"op\": \"Relu\", \"inputs\": [\"q1\"], \"outputs\": [\"r1\"], \"scope\": \"blk/c\"},\n"
        "  {\"name\": \"add1\", \"op\": \"Add\", \"inputs\": [\"r1\", \"p1\"], \"outputs\": [\"o1\"], \"scope\": \"blk\"},\n"
        "  {\"name\": \"a2\", \"op\": \"Relu\", \"inputs\": [\"o1\"], \"outputs\": [\"p2\"], \"scope\": \"blk/a_1\"},\n"
        "  {\"name\": \"b2\", \"op\": \"Relu\", \"inputs\": [\"p2\"], \"outputs\": [\"q2\"], \"scope\": \"blk/b_1\"},\n"
        "  {\"name\": \"c2\", \"op\": \"Relu\", \"inputs\": [\"q2\"], \"outputs\": [\"r2\"], \"scope\": \"blk/c_1\"},\n"
        "  {\"name\": \"add2\", \"op\": \"Add\", \"inputs\": [\"r2\", \"p2\"], \"outputs\": [\"o2\"], \"scope\": \"blk_1\"},\n"
        "  {\"name\": \"y\", \"op\": \"Relu\", \"inputs\": [\"o2\"], \"outputs\": [\"y\"], \"scope\": \"\"}],\n"
        " \"outputs\": [\"y\"]}\n";
    est_graph *g = load_json(text, "counts");
    est_report *r = run(g, EST_MODE_INFER, 0);
    if (r)
        CHECK(est_report_peak(r)->bytes == 5 * T, "TorchScript call counts: inference peak %llu, expected %llu",
              U(est_report_peak(r)->bytes), U(5 * T));
    est_report_free(r);
    est_graph_free(g);
}

/* A U-Net's skip: s0 = down.0(x), s1 = down.1(s0), m = mid(s1), then the
 * model's own Concat(m, s0) and head. Every tensor 4096 bytes (T), c and y
 * twice that. s0 stays unread while mid runs, so the forward's frame keeps it
 * (a list, a name) until the forward returns: at head x, s0, c and y are
 * live, 6T; without the frame, s0 goes after the Concat and the peak is 5T
 * (x, m, s0 and c at the Concat; x, c and y at head). s1, read only by the
 * next call, is not kept. memest verify's executor (EST_KERNELS_VERIFY)
 * keeps no frames. */
static void check_frame_locals(void) {
    const uint64_t T = 1024 * 4;
    const char *text =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"skip\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [1, 1024]}],\n"
        " \"nodes\": [{\"name\": \"d0\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"s0\"], \"scope\": \"down.0\"},\n"
        "  {\"name\": \"d1\", \"op\": \"Relu\", \"inputs\": [\"s0\"], \"outputs\": [\"s1\"], \"scope\": \"down.1\"},\n"
        "  {\"name\": \"mid\", \"op\": \"Relu\", \"inputs\": [\"s1\"], \"outputs\": [\"m\"], \"scope\": \"mid\"},\n"
        "  {\"name\": \"cat\", \"op\": \"Concat\", \"inputs\": [\"m\", \"s0\"], \"outputs\": [\"c\"], \"scope\": \"\",\n"
        "   \"attributes\": {\"axis\": {\"int\": 1}}},\n"
        "  {\"name\": \"head\", \"op\": \"Relu\", \"inputs\": [\"c\"], \"outputs\": [\"y\"], \"scope\": \"head\"}],\n"
        " \"outputs\": [\"y\"]}\n";
    est_graph *g = load_json(text, "skip");
    for (int kernels = 0; g && kernels <= 1; kernels++) {
        est_options opt;
        est_options_init(&opt);
        opt.mode = EST_MODE_INFER;
        opt.kernels = kernels ? EST_KERNELS_VERIFY : EST_KERNELS_PYTORCH;
        est_error err;
        est_report *r = NULL;
        if (est_estimate(g, &opt, &r, &err) != EST_OK) {
            CHECK(false, "skip: estimate failed: %s", err.message);
            continue;
        }
        const est_peak *pk = est_report_peak(r);
        uint64_t want = kernels ? 5 * T : 6 * T;
        CHECK(pk->bytes == want, "skip (%s kernels): inference peak %llu, expected %llu", kernels ? "memest" : "pytorch",
              U(pk->bytes), U(want));
        if (!kernels)
            CHECK(strcmp(pk->layer, "head") == 0, "skip: peak at '%s', expected head", pk->layer);
        est_report_free(r);
    }
    est_graph_free(g);
}

/* Hugging Face's stacks keep `inputs_embeds = self.embed_tokens(ids)` while
 * their layers run (module_calls.c, hold_inputs_embeds): ids -> E[ids] = e
 * [1, 256, 16] (T = 16 KiB) in model/embed_tokens, then layers.0 and
 * layers.1 (Relu each), then a Relu at the root. At layers.1, e, h1 and h2
 * are live when the embedding module is named embed_tokens: one T more than
 * when it is named anything else, where e goes after layers.0. */
static void check_inputs_embeds(void) {
    const uint64_t T = 256 * 16 * 4;
    uint64_t peak[2] = {0, 0};
    for (int named = 0; named <= 1; named++) {
        char text[2048];
        snprintf(text, sizeof text,
                 "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"embeds\", \"opset_import\": {\"\": 17},\n"
                 " \"inputs\": [{\"name\": \"ids\", \"dtype\": \"int64\", \"dims\": [1, 256]}],\n"
                 " \"initializers\": [{\"name\": \"E\", \"dtype\": \"float32\", \"dims\": [1000, 16]}],\n"
                 " \"nodes\": [{\"name\": \"emb\", \"op\": \"Gather\", \"inputs\": [\"E\", \"ids\"], \"outputs\": [\"e\"],\n"
                 "   \"scope\": \"model/%s\"},\n"
                 "  {\"name\": \"l0\", \"op\": \"Relu\", \"inputs\": [\"e\"], \"outputs\": [\"h1\"], \"scope\": \"model/layers.0\"},\n"
                 "  {\"name\": \"l1\", \"op\": \"Relu\", \"inputs\": [\"h1\"], \"outputs\": [\"h2\"], \"scope\": \"model/layers.1\"},\n"
                 "  {\"name\": \"out\", \"op\": \"Relu\", \"inputs\": [\"h2\"], \"outputs\": [\"y\"], \"scope\": \"\"}],\n"
                 " \"outputs\": [\"y\"]}\n",
                 named ? "embed_tokens" : "embedding");
        est_graph *g = load_json(text, named ? "embed_tokens" : "embedding");
        est_report *r = run(g, EST_MODE_INFER, 0);
        if (r) {
            peak[named] = est_report_peak(r)->bytes;
            if (named) CHECK(strcmp(est_report_peak(r)->layer, "l1") == 0, "embed_tokens: peak at %s, expected l1",
                             est_report_peak(r)->layer);
        }
        est_report_free(r);
        est_graph_free(g);
    }
    CHECK(peak[1] == peak[0] + T, "embed_tokens: inference peak %llu, expected %llu (one embedding more)", U(peak[1]),
          U(peak[0] + T));
}

/* A shape computation the TorchScript exporter hoists into another call
 * (BART's decoder computes every layer's cross-attention shapes inside the
 * first layer's) neither ends that call nor starts one of its own
 * (module_calls.c, find_outside): in layers.0, v = norm(x) is read by fc
 * and by the layer's own Add; layers.1's Shape(x) sits between the two.
 * Taken as a call of layers.1, it would look like a call v outlived unread,
 * and v would be held to the end of the model. The peak must be the same as
 * with the Shape listed first. Every tensor 4096 bytes. */
static void check_hoisted_shape(void) {
    static const char *const shape_node =
        "  {\"name\": \"sh1\", \"op\": \"Shape\", \"inputs\": [\"x\"], \"outputs\": [\"sh\"], \"scope\": \"m/layers.1/attn\"},\n";
    uint64_t peak[2] = {0, 0};
    for (int hoisted = 0; hoisted <= 1; hoisted++) {
        char text[4096];
        snprintf(text, sizeof text,
                 "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"hoist\", \"opset_import\": {\"\": 17},\n"
                 " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [1, 1024]}],\n"
                 " \"nodes\": [\n%s"
                 "  {\"name\": \"norm\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"v\"], \"scope\": \"m/layers.0/norm\"},\n"
                 "  {\"name\": \"fc\", \"op\": \"Relu\", \"inputs\": [\"v\"], \"outputs\": [\"w\"], \"scope\": \"m/layers.0/fc\"},\n%s"
                 "  {\"name\": \"add\", \"op\": \"Add\", \"inputs\": [\"w\", \"v\"], \"outputs\": [\"o\"], \"scope\": \"m/layers.0\"},\n"
                 "  {\"name\": \"view\", \"op\": \"Reshape\", \"inputs\": [\"o\", \"sh\"], \"outputs\": [\"p1\"], \"scope\": \"m/layers.1/attn\"},\n"
                 "  {\"name\": \"f1\", \"op\": \"Relu\", \"inputs\": [\"p1\"], \"outputs\": [\"q1\"], \"scope\": \"m/layers.1/ffn\"},\n"
                 "  {\"name\": \"f2\", \"op\": \"Relu\", \"inputs\": [\"q1\"], \"outputs\": [\"r1\"], \"scope\": \"m/layers.1/ffn2\"}],\n"
                 " \"outputs\": [\"r1\"]}\n",
                 hoisted ? "" : shape_node, hoisted ? shape_node : "");
        est_graph *g = load_json(text, hoisted ? "hoisted shape" : "shape first");
        est_report *r = run(g, EST_MODE_INFER, 0);
        if (r) peak[hoisted] = est_report_peak(r)->bytes;
        est_report_free(r);
        est_graph_free(g);
    }
    CHECK(peak[0] > 0 && peak[1] == peak[0], "hoisted shape: inference peak %llu, expected %llu as with the Shape first",
          U(peak[1]), U(peak[0]));
}

/* Nodes out of order move up to just before their first reader and nothing
 * else moves: the file lists p1, p2, p3 (p1 reads r), then q1, q2, then r,
 * then the sum. The order run is r, p1, p2, p3, q1, q2, sum, the file's with
 * r moved (a breadth-first order would interleave the two chains). */
static void check_stable_order(void) {
    const char *text =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"order\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [1, 1024]}],\n"
        " \"nodes\": [{\"name\": \"p1\", \"op\": \"Relu\", \"inputs\": [\"r\"], \"outputs\": [\"a1\"]},\n"
        "  {\"name\": \"p2\", \"op\": \"Relu\", \"inputs\": [\"a1\"], \"outputs\": [\"a2\"]},\n"
        "  {\"name\": \"p3\", \"op\": \"Relu\", \"inputs\": [\"a2\"], \"outputs\": [\"a3\"]},\n"
        "  {\"name\": \"q1\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"b1\"]},\n"
        "  {\"name\": \"q2\", \"op\": \"Relu\", \"inputs\": [\"b1\"], \"outputs\": [\"b2\"]},\n"
        "  {\"name\": \"r\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"r\"]},\n"
        "  {\"name\": \"sum\", \"op\": \"Add\", \"inputs\": [\"a3\", \"b2\"], \"outputs\": [\"y\"]}],\n"
        " \"outputs\": [\"y\"]}\n";
    static const char *const want[] = {"r", "p1", "p2", "p3", "q1", "q2", "sum"};
    est_graph *g = load_json(text, "order");
    est_report *r = run(g, EST_MODE_INFER, 0);
    if (r) {
        size_t n = est_report_layer_count(r);
        CHECK(n == 7, "order: %zu layers, expected 7", n);
        for (size_t i = 0; i < n && i < 7; i++)
            CHECK(strcmp(est_report_layer(r, i)->name, want[i]) == 0, "order: layer %zu is %s, expected %s", i,
                  est_report_layer(r, i)->name, want[i]);
    }
    est_report_free(r);
    est_graph_free(g);
}

static void check_module_calls(void) {
    const uint64_t T = 1024 * 4; /* one tensor, already a multiple of 512 */
    for (int scoped = 0; scoped <= 1; scoped++) {
        const char *what = scoped ? "block with scopes" : "block without scopes";
        est_graph *g = block_graph(scoped, what);
        est_report *r = run(g, EST_MODE_INFER, 0);
        if (r) {
            /* without scopes two activations live at once (an op's input and
             * output); with them, t0 stays until r, the block's last node, so
             * q and r each see three: t0, their input, their output. The
             * input x is resident either way. */
            uint64_t acts = scoped ? 3 * T : 2 * T;
            const est_peak *pk = est_report_peak(r);
            CHECK(pk->bytes == T + acts, "%s: peak %llu, expected x + %llu = %llu", what, U(pk->bytes), U(acts),
                  U(T + acts));
            CHECK(est_report_totals(r)->activations_bytes == acts, "%s: activations %llu, expected %llu", what,
                  U(est_report_totals(r)->activations_bytes), U(acts));
            if (scoped)
                CHECK(strcmp(pk->layer, "q") == 0, "%s: peak at '%s', expected q (first with three)", what,
                      pk->layer);
        }
        if (g && scoped) { /* the JSON writer keeps the scopes */
            char *json = NULL;
            est_error err;
            if (est_graph_to_json(g, &json, &err) == EST_OK) {
                CHECK(strstr(json, "\"scope\": \"blk/q\"") != NULL, "%s: JSON output lost the scopes", what);
                est_free(json);
            } else {
                CHECK(false, "%s: est_graph_to_json failed: %s", what, err.message);
            }
        }
        est_report_free(r);
        est_graph_free(g);
    }
}

/* The temporary bytes (est_layer.temp_bytes) of layer `layer` in an SGD
 * training step of the JSON graph `text` run by `kernels`, with only the
 * parameters named by `trainable` training (NULL: all); UINT64_MAX when the
 * graph or the estimate fails (which CHECK reports). */
static uint64_t layer_temp_in_training(const char *text, const char *what, const char *layer,
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

/* A Linear's bias gradient sums the output gradient [rows, cols] down to
 * [cols] (layers/sum_to.c): ATen's reduction stages its blocks' partial
 * sums. The Gemm y = x W^T + b, x [rows, 64], b trainable and x not, W
 * frozen: the backward's only temporary is that sum. Against what the H100
 * measured around the bias gradient's backward
 * (bench/accuracy/data/reduce/sum_h100_run1.json, bias_grad_transient,
 * float32), with memest on its default device, the H100. */
static void check_bias_grad_sum(void) {
    static const struct { int rows, cols; uint64_t measured; } cases[] = {
        {1024, 512, 4194816}, {4096, 16000, 139264512}, {16384, 4096, 138412544},
        {4096, 64, 524800},   {4096, 32, 66048},        {1024, 64, 0},          {256, 4096, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char text[2048], what[64];
        snprintf(what, sizeof what, "bias gradient %dx%d", cases[k].rows, cases[k].cols);
        snprintf(text, sizeof text,
                 "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"bias\", \"opset_import\": {\"\": 17},\n"
                 " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [%d, 64]}],\n"
                 " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [%d, 64]},\n"
                 "                    {\"name\": \"b\", \"dtype\": \"float32\", \"dims\": [%d]}],\n"
                 " \"nodes\": [{\"name\": \"fc\", \"op\": \"Gemm\", \"inputs\": [\"x\", \"W\", \"b\"], \"outputs\": [\"y\"],\n"
                 "   \"attributes\": {\"transB\": {\"int\": 1}}}],\n"
                 " \"outputs\": [\"y\"]}\n",
                 cases[k].rows, cases[k].cols, cases[k].cols);
        uint64_t temp = layer_temp_in_training(text, what, "fc", "b", EST_KERNELS_PYTORCH);
        CHECK(temp == cases[k].measured, "%s: temp %llu, the H100 measured %llu", what, U(temp),
              U(cases[k].measured));
        /* memest verify's executor sums with no staging buffer */
        temp = layer_temp_in_training(text, what, "fc", "b", EST_KERNELS_VERIFY);
        CHECK(temp == 0, "%s under --kernels verify: temp %llu, expected none", what, U(temp));
    }
}

/* PRelu's slope gradient is made at X's size, then summed to the slope's
 * shape (layers/activation.c, verify/ops_math.cu): X [64, 32, 16] float32
 * (131072 bytes), slope [32, 1] trainable, X not. Under --kernels verify the
 * sum stages nothing: exactly X's size; PyTorch's sum may add its staging. */
static void check_prelu_slope_grad(void) {
    const char *text =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"prelu\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [64, 32, 16]}],\n"
        " \"initializers\": [{\"name\": \"s\", \"dtype\": \"float32\", \"dims\": [32, 1]}],\n"
        " \"nodes\": [{\"name\": \"act\", \"op\": \"PRelu\", \"inputs\": [\"x\", \"s\"], \"outputs\": [\"y\"]}],\n"
        " \"outputs\": [\"y\"]}\n";
    uint64_t temp = layer_temp_in_training(text, "PRelu slope gradient", "act", "s", EST_KERNELS_VERIFY);
    CHECK(temp == 131072, "PRelu slope gradient under --kernels verify: temp %llu, expected 131072", U(temp));
    temp = layer_temp_in_training(text, "PRelu slope gradient", "act", "s", EST_KERNELS_PYTORCH);
    CHECK(temp != UINT64_MAX && temp >= 131072, "PRelu slope gradient: temp %llu, expected at least 131072", U(temp));
}

/* An embedding's backward over more than 3072 indices sorts them and sums
 * per run in float32 partial sums (layers/index.c): Gather(E [2048, D], ids
 * [n]) with E trainable; the backward's only temporary is that. Against
 * what the H100 measured (bench/accuracy/data/reduce/embedding_h100_run1.json,
 * float32, 2,048 rows): within 2%, and none up to 3072 indices. */
static void check_embedding_backward(void) {
    static const struct { int n, dim; uint64_t measured; } cases[] = {
        {3072, 768, 0}, {4096, 768, 7699968}, {16384, 256, 4231168}, {65536, 4096, 142594560}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char text[2048], what[64];
        snprintf(what, sizeof what, "embedding backward %d x %d", cases[k].n, cases[k].dim);
        snprintf(text, sizeof text,
                 "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"emb\", \"opset_import\": {\"\": 17},\n"
                 " \"inputs\": [{\"name\": \"ids\", \"dtype\": \"int64\", \"dims\": [%d]}],\n"
                 " \"initializers\": [{\"name\": \"E\", \"dtype\": \"float32\", \"dims\": [2048, %d]}],\n"
                 " \"nodes\": [{\"name\": \"emb\", \"op\": \"Gather\", \"inputs\": [\"E\", \"ids\"], \"outputs\": [\"y\"]}],\n"
                 " \"outputs\": [\"y\"]}\n",
                 cases[k].n, cases[k].dim);
        uint64_t temp = layer_temp_in_training(text, what, "emb", NULL, EST_KERNELS_PYTORCH);
        double m = (double)cases[k].measured, got = (double)temp;
        CHECK(m == 0 ? got == 0 : fabs(got - m) <= 0.02 * m, "%s: temp %llu, the H100 measured %llu", what, U(temp),
              U(cases[k].measured));
    }
}

/* An attention mask that takes a gradient (T5's relative position bias:
 * here Relu(Bias), Bias [1, 4, 64, 64] trainable) sends SDPA to its math
 * kernel (layers/linear.c, attention_runs_math): the Attention keeps the
 * scaled q, k and v (Q = 2 * 4 * 64 * 32 * 4 bytes each, the same tensor
 * three times) and the probabilities (P = 2 * 4 * 64 * 64 * 4), and its
 * backward takes three of P; Bias trains. The same Bias read directly as
 * the mask is a constant (Attention's nonparam_inputs): only w trains, and
 * the efficient kernel takes no workspace. With a dropout of the
 * probabilities fused in (memest.dropout, as fuse.c marks it), the math
 * kernel also keeps the dropped probabilities (P) and the bool mask (P / 4). */
static void check_trainable_attention_mask(void) {
    const uint64_t Q = 2 * 4 * 64 * 32 * 4, P = 2 * 4 * 64 * 64 * 4;
    for (int direct = 0; direct <= 2; direct++) {
        char text[2048];
        snprintf(text, sizeof text,
                 "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"att\", \"opset_import\": {\"\": 23},\n"
                 " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [2, 4, 64, 32]}],\n"
                 " \"initializers\": [{\"name\": \"w\", \"dtype\": \"float32\", \"dims\": [32]},\n"
                 "                    {\"name\": \"Bias\", \"dtype\": \"float32\", \"dims\": [1, 4, 64, 64]}],\n"
                 " \"nodes\": [%s\n"
                 "  {\"name\": \"q\", \"op\": \"Mul\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"q\"]},\n"
                 "  {\"name\": \"att\", \"op\": \"Attention\", \"inputs\": [\"q\", \"q\", \"q\", \"%s\"], \"outputs\": [\"y\"]%s}],\n"
                 " \"outputs\": [\"y\"]}\n",
                 direct == 1 ? "" : "{\"name\": \"mr\", \"op\": \"Relu\", \"inputs\": [\"Bias\"], \"outputs\": [\"m\"]},",
                 direct == 1 ? "Bias" : "m",
                 direct == 2 ? ", \"attributes\": {\"memest.dropout\": {\"int\": 1}}" : "");
        const char *what = direct == 1 ? "constant mask" : direct == 2 ? "trainable mask, dropout" : "trainable mask";
        est_graph *g = load_json(text, what);
        est_report *r = run(g, EST_MODE_TRAIN, 0);
        const est_layer *att = r ? layer_named(r, "att", what) : NULL;
        if (att) {
            uint64_t params = est_report_totals(r)->param_count;
            uint64_t saves = 3 * Q + P + (direct == 2 ? P + P / 4 : 0);
            if (direct == 1)
                CHECK(params == 32 && att->temp_bytes == 0, "%s: %llu parameters (w only), temp %llu (none)", what,
                      U(params), U(att->temp_bytes));
            else
                CHECK(params == 32 + 4 * 64 * 64 && att->saved_bytes == saves && att->temp_bytes == 3 * P,
                      "%s: %llu parameters, saves %llu (math: %llu), temp %llu (%llu)", what, U(params),
                      U(att->saved_bytes), U(saves), U(att->temp_bytes), U(3 * P));
        }
        est_report_free(r);
        est_graph_free(g);
    }
}

/* Attention under --kernels verify (verify/ops_attention.cu): Q, K, V and
 * the probabilities kept (with dropout also the bool mask and the dropped
 * probabilities), the probabilities the inference forward's workspace, one
 * buffer of their size in backward; all in the step's dtype (--dtype
 * bfloat16: 2 bytes an element, the mask 1). */
static void check_attention_verify_in(bool half) {
    const uint64_t es = half ? 2 : 4, Q = 2 * 4 * 64 * 32 * es, P = 2 * 4 * 64 * 64 * es, M = 2 * 4 * 64 * 64;
    for (int dropout = 0; dropout <= 1; dropout++) {
        char text[2048];
        snprintf(text, sizeof text,
                 "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"att\", \"opset_import\": {\"\": 23},\n"
                 " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [2, 4, 64, 32]}],\n"
                 " \"initializers\": [{\"name\": \"w\", \"dtype\": \"float32\", \"dims\": [32]}],\n"
                 " \"nodes\": [{\"name\": \"q\", \"op\": \"Mul\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"q\"]},\n"
                 "  {\"name\": \"k\", \"op\": \"Mul\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"k\"]},\n"
                 "  {\"name\": \"v\", \"op\": \"Mul\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"v\"]},\n"
                 "  {\"name\": \"att\", \"op\": \"Attention\", \"inputs\": [\"q\", \"k\", \"v\"], \"outputs\": [\"y\"]%s}],\n"
                 " \"outputs\": [\"y\"]}\n",
                 dropout ? ", \"attributes\": {\"memest.dropout\": {\"int\": 1}}" : "");
        const char *what = dropout ? (half ? "verify attention, dropout, bfloat16" : "verify attention, dropout")
                                   : (half ? "verify attention, bfloat16" : "verify attention");
        est_graph *g = load_json(text, what);
        for (int train = 0; train <= 1 && g; train++) {
            est_options opt;
            est_options_init(&opt);
            opt.mode = train ? EST_MODE_TRAIN : EST_MODE_INFER;
            opt.kernels = EST_KERNELS_VERIFY;
            if (half) opt.dtype = EST_DT_BFLOAT16;
            est_error err;
            est_report *r = NULL;
            CHECK(est_estimate(g, &opt, &r, &err) == EST_OK, "%s: %s", what, err.message);
            const est_layer *att = r ? layer_named(r, "att", what) : NULL;
            uint64_t saves = train ? 3 * Q + P + (dropout ? M + P : 0) : 0;
            if (att)
                CHECK(att->saved_bytes == saves && att->temp_bytes == P, "%s (%s): saves %llu (%llu), temp %llu (%llu)",
                      what, train ? "train" : "infer", U(att->saved_bytes), U(saves), U(att->temp_bytes), U(P));
            est_report_free(r);
        }
        est_graph_free(g);
    }
}

static void check_attention_verify(void) {
    check_attention_verify_in(false);
    check_attention_verify_in(true);
}

/* LSTM and RNN (T 10, N 8, I 16, H 32, one direction) under --kernels
 * verify in training: verify/ops_recurrent.cu keeps Y and its reserve (K =
 * 5, 1 slots a step, row and hidden unit) and takes in backward the gates'
 * gradients (T N KG, KG = 4H, H), all in the step's dtype, and the carried
 * dh (and LSTM's dc), N H floats each whatever the dtype. T N H elements
 * are 10,240 bytes in float32, 5,120 in bfloat16. */
static void check_recurrent_verify_dtype(void) {
    for (int run = 0; run < 4; run++) {
        bool lstm = run % 2 == 0, half = run >= 2;
        const char *op = lstm ? "LSTM" : "RNN";
        int gates = lstm ? 4 : 1;
        char text[2048];
        snprintf(text, sizeof text,
                 "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"rnn\", \"opset_import\": {\"\": 20},\n"
                 " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [10, 8, 16]}],\n"
                 " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [1, %d, 16]},\n"
                 "  {\"name\": \"R\", \"dtype\": \"float32\", \"dims\": [1, %d, 32]}],\n"
                 " \"nodes\": [{\"name\": \"rnn\", \"op\": \"%s\", \"inputs\": [\"x\", \"W\", \"R\"], \"outputs\": [\"y\"],\n"
                 "   \"attributes\": {\"hidden_size\": {\"int\": 32}}}],\n"
                 " \"outputs\": [\"y\"]}\n",
                 32 * gates, 32 * gates, op);
        est_graph *g = load_json(text, op);
        est_options opt;
        est_options_init(&opt);
        opt.mode = EST_MODE_TRAIN;
        opt.kernels = EST_KERNELS_VERIFY;
        if (half) opt.dtype = EST_DT_BFLOAT16;
        est_error err;
        est_report *r = NULL;
        CHECK(g && est_estimate(g, &opt, &r, &err) == EST_OK, "%s verify: %s", op, g ? err.message : "no graph");
        const est_layer *L = r ? layer_named(r, "rnn", op) : NULL;
        uint64_t tnh = half ? 5120 : 10240, carry = 8 * 32 * 4;
        uint64_t saved = tnh * (1 + (lstm ? 5 : 1)), temp = tnh * gates + carry * (lstm ? 2 : 1);
        if (L)
            CHECK(L->saved_bytes == saved && L->temp_bytes == temp, "%s verify (%s): saves %llu (%llu), temp %llu (%llu)",
                  op, half ? "bfloat16" : "float32", U(L->saved_bytes), U(saved), U(L->temp_bytes), U(temp));
        est_report_free(r);
        est_graph_free(g);
    }
}

/* RoiAlign of q = x * w [2, 4, 16, 16] (8192 bytes) over 3 boxes: rois [3,
 * 4] float32 (48 bytes) and batch_indices [3] int64 (24 bytes), activations
 * (Relu, Abs) so that keeping them counts, 512 bytes each as allocated.
 * torchvision keeps the rois (512); memest verify's kernel
 * (verify/ops_sample.cu) keeps rois and batch_indices (1024), and in max
 * mode X as well (9216). */
static void check_roi_align_verify_saves(void) {
    for (int run = 0; run < 4; run++) {
        bool verify = run % 2 == 1, max_mode = run >= 2;
        char text[2048];
        snprintf(text, sizeof text,
                 "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"ra\", \"opset_import\": {\"\": 16},\n"
                 " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [2, 4, 16, 16]},\n"
                 "  {\"name\": \"rois\", \"dtype\": \"float32\", \"dims\": [3, 4]},\n"
                 "  {\"name\": \"bi\", \"dtype\": \"int64\", \"dims\": [3]}],\n"
                 " \"initializers\": [{\"name\": \"w\", \"dtype\": \"float32\", \"dims\": [16]}],\n"
                 " \"nodes\": [{\"name\": \"q\", \"op\": \"Mul\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"q\"]},\n"
                 "  {\"name\": \"r\", \"op\": \"Relu\", \"inputs\": [\"rois\"], \"outputs\": [\"r\"]},\n"
                 "  {\"name\": \"b\", \"op\": \"Abs\", \"inputs\": [\"bi\"], \"outputs\": [\"b\"]},\n"
                 "  {\"name\": \"ra\", \"op\": \"RoiAlign\", \"inputs\": [\"q\", \"r\", \"b\"], \"outputs\": [\"y\"],\n"
                 "   \"attributes\": {\"mode\": {\"string\": \"%s\"}, \"output_height\": {\"int\": 2}, \"output_width\": {\"int\": 2}}}],\n"
                 " \"outputs\": [\"y\"]}\n",
                 max_mode ? "max" : "avg");
        est_graph *g = load_json(text, "roi align");
        est_options opt;
        est_options_init(&opt);
        opt.mode = EST_MODE_TRAIN;
        opt.kernels = verify ? EST_KERNELS_VERIFY : EST_KERNELS_PYTORCH;
        est_error err;
        est_report *r = NULL;
        CHECK(g && est_estimate(g, &opt, &r, &err) == EST_OK, "roi align: %s", g ? err.message : "no graph");
        const est_layer *ra = r ? layer_named(r, "ra", "roi align") : NULL;
        uint64_t want = !verify ? 512 : max_mode ? 8192 + 1024 : 1024;
        if (ra)
            CHECK(ra->saved_bytes == want, "RoiAlign (%s kernels, %s): saves %llu (%llu)", verify ? "verify" : "pytorch",
                  max_mode ? "max" : "avg", U(ra->saved_bytes), U(want));
        est_report_free(r);
        est_graph_free(g);
    }
}

/* Compress (axis 1) of q = x * w [2, 8, 4] by a constant condition [8]
 * keeping 5 slices. memest verify's kernel (verify/ops_datadep.cu) counts
 * the kept slices with one int64 per block of 4096 condition entries (8
 * bytes: one 512-byte allocation) and writes their int64 index (40 bytes,
 * another 512): saved when backward runs (compress_saves, as PyTorch's
 * index_select), else a second workspace allocation. PyTorch's kernels: no
 * workspace. */
static void check_compress_verify_workspace(void) {
    const char *text =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"cmp\", \"opset_import\": {\"\": 18},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [2, 8, 4]}],\n"
        " \"initializers\": [{\"name\": \"w\", \"dtype\": \"float32\", \"dims\": [4]}],\n"
        " \"nodes\": [{\"name\": \"q\", \"op\": \"Mul\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"q\"]},\n"
        "  {\"name\": \"k\", \"op\": \"Constant\", \"inputs\": [], \"outputs\": [\"k\"], \"attributes\": {\"value\":\n"
        "   {\"tensor\": {\"dtype\": \"bool\", \"dims\": [8], \"values\": [1, 0, 1, 1, 0, 0, 1, 1]}}}},\n"
        "  {\"name\": \"cmp\", \"op\": \"Compress\", \"inputs\": [\"q\", \"k\"], \"outputs\": [\"y\"],\n"
        "   \"attributes\": {\"axis\": {\"int\": 1}}}],\n"
        " \"outputs\": [\"y\"]}\n";
    est_graph *g = load_json(text, "compress");
    for (int run = 0; run < 4 && g; run++) {
        bool verify = run % 2 == 1, train = run >= 2;
        est_options opt;
        est_options_init(&opt);
        opt.mode = train ? EST_MODE_TRAIN : EST_MODE_INFER;
        opt.kernels = verify ? EST_KERNELS_VERIFY : EST_KERNELS_PYTORCH;
        est_error err;
        est_report *r = NULL;
        CHECK(est_estimate(g, &opt, &r, &err) == EST_OK, "compress: %s", err.message);
        const est_layer *L = r ? layer_named(r, "cmp", "compress") : NULL;
        uint64_t want_temp = !verify ? 0 : train ? 512 : 1024, want_saved = train ? 512 : 0;
        if (L)
            CHECK(L->temp_bytes == want_temp && L->saved_bytes == want_saved,
                  "Compress (%s kernels, %s): temp %llu (%llu), saves %llu (%llu)", verify ? "verify" : "pytorch",
                  train ? "train" : "infer", U(L->temp_bytes), U(want_temp), U(L->saved_bytes), U(want_saved));
        est_report_free(r);
    }
    est_graph_free(g);
}

/* MaxPool (kernel 2x2, stride 2) of q = x * w [2, 4, 16, 16] into Y [2, 4,
 * 8, 8] (512 elements): memest verify's kernel writes the int64 indices
 * (4096 bytes) even when no backward reads them, so under --kernels verify
 * they are the forward's workspace in inference, in float32 and bfloat16
 * alike; in training they are saved (X and the indices), no workspace. */
static void check_max_pool_verify_workspace(void) {
    const char *text =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"mp\", \"opset_import\": {\"\": 18},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [2, 4, 16, 16]}],\n"
        " \"initializers\": [{\"name\": \"w\", \"dtype\": \"float32\", \"dims\": [16]}],\n"
        " \"nodes\": [{\"name\": \"q\", \"op\": \"Mul\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"q\"]},\n"
        "  {\"name\": \"mp\", \"op\": \"MaxPool\", \"inputs\": [\"q\"], \"outputs\": [\"y\"],\n"
        "   \"attributes\": {\"kernel_shape\": {\"ints\": [2, 2]}, \"strides\": {\"ints\": [2, 2]}}}],\n"
        " \"outputs\": [\"y\"]}\n";
    est_graph *g = load_json(text, "max pool");
    for (int run = 0; run < 6 && g; run++) {
        bool verify = run % 3 != 2, train = run % 3 == 1, half = run >= 3;
        est_options opt;
        est_options_init(&opt);
        opt.mode = train ? EST_MODE_TRAIN : EST_MODE_INFER;
        opt.kernels = verify ? EST_KERNELS_VERIFY : EST_KERNELS_PYTORCH;
        if (half) opt.dtype = EST_DT_BFLOAT16;
        est_error err;
        est_report *r = NULL;
        CHECK(est_estimate(g, &opt, &r, &err) == EST_OK, "max pool: %s", err.message);
        const est_layer *mp = r ? layer_named(r, "mp", "max pool") : NULL;
        uint64_t x_bytes = 2 * 4 * 16 * 16 * (half ? 2 : 4), idx = 2 * 4 * 8 * 8 * 8;
        uint64_t want_temp = verify && !train ? idx : 0, want_saved = train ? x_bytes + idx : 0;
        if (mp)
            CHECK(mp->temp_bytes == want_temp && mp->saved_bytes == want_saved,
                  "MaxPool (%s kernels, %s, %s): temp %llu (%llu), saves %llu (%llu)", verify ? "verify" : "pytorch",
                  train ? "train" : "infer", half ? "bfloat16" : "float32", U(mp->temp_bytes), U(want_temp),
                  U(mp->saved_bytes), U(want_saved));
        est_report_free(r);
    }
    est_graph_free(g);
}

/* LpPool (kernel 2x2, stride 2) of q = x * w [2, 4, 16, 16] (X = 8192 bytes)
 * into Y [2, 4, 8, 8] (2048 bytes). PyTorch's F.lp_pool2d keeps X, X^p and
 * four Y-sized tensors: 2 X + 4 Y = 24576; memest verify's fused kernel
 * (verify/ops_pool.cu) keeps X and Y: 10240. */
static void check_lp_pool_saves(void) {
    const char *text =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"lp\", \"opset_import\": {\"\": 18},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [2, 4, 16, 16]}],\n"
        " \"initializers\": [{\"name\": \"w\", \"dtype\": \"float32\", \"dims\": [16]}],\n"
        " \"nodes\": [{\"name\": \"q\", \"op\": \"Mul\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"q\"]},\n"
        "  {\"name\": \"lp\", \"op\": \"LpPool\", \"inputs\": [\"q\"], \"outputs\": [\"y\"],\n"
        "   \"attributes\": {\"kernel_shape\": {\"ints\": [2, 2]}, \"strides\": {\"ints\": [2, 2]}}}],\n"
        " \"outputs\": [\"y\"]}\n";
    est_graph *g = load_json(text, "lp pool");
    for (int verify = 0; verify <= 1 && g; verify++) {
        est_options opt;
        est_options_init(&opt);
        opt.mode = EST_MODE_TRAIN;
        opt.kernels = verify ? EST_KERNELS_VERIFY : EST_KERNELS_PYTORCH;
        est_error err;
        est_report *r = NULL;
        CHECK(est_estimate(g, &opt, &r, &err) == EST_OK, "lp pool: %s", err.message);
        const est_layer *lp = r ? layer_named(r, "lp", "lp pool") : NULL;
        uint64_t want = verify ? 8192 + 2048 : 2 * 8192 + 4 * 2048;
        if (lp)
            CHECK(lp->saved_bytes == want, "LpPool (%s kernels): saves %llu, expected %llu", verify ? "verify" : "pytorch",
                  U(lp->saved_bytes), U(want));
        est_report_free(r);
    }
    est_graph_free(g);
}

/* ---- 2. Conv workspace ------------------------------------------------------------ */

/* One Conv: x [n, c, hw, hw] -> conv (W [f, c/group, k, k], pads k/2) -> y.
 * The weight is a parameter, so in training the weight gradient's backward
 * workspace counts too. */
static est_graph *conv_graph_strided(int n, int c, int hw, int f, int group, int k, int stride) {
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

static est_graph *conv_graph(int n, int c, int hw, int f, int group, int k) {
    return conv_graph_strided(n, c, hw, f, group, k, 1);
}

/* temp_bytes of the conv layer in inference (forward workspace) and training
 * (the larger of forward and backward). */
static void conv_temps_strided(int n, int c, int hw, int f, int group, int k, int stride, uint64_t *infer,
                               uint64_t *train) {
    *infer = *train = UINT64_MAX;
    est_graph *g = conv_graph_strided(n, c, hw, f, group, k, stride);
    est_report *ri = run(g, EST_MODE_INFER, 0), *rt = run(g, EST_MODE_TRAIN, 0);
    const est_layer *Li = layer_named(ri, "conv", "conv infer"), *Lt = layer_named(rt, "conv", "conv train");
    if (Li) *infer = Li->temp_bytes;
    if (Lt) *train = Lt->temp_bytes;
    est_report_free(ri);
    est_report_free(rt);
    est_graph_free(g);
}

static void conv_temps(int n, int c, int hw, int f, int group, int k, uint64_t *infer, uint64_t *train) {
    conv_temps_strided(n, c, hw, f, group, k, 1, infer, train);
}

/* The temp bytes of layer `name` of g (freed here) under
 * EST_KERNELS_VERIFY in `mode`; UINT64_MAX when it does not estimate. */
static uint64_t verify_layer_temp(est_graph *g, est_mode mode, const char *name, const char *what) {
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

/* The same conv under est_options.kernels = EST_KERNELS_VERIFY: memest
 * verify's im2col buffer (layers/conv.c, conv_im2col_workspace). */
static uint64_t conv_im2col_temp(int n, int c, int hw, int f, int group, int k, est_mode mode) {
    return verify_layer_temp(conv_graph(n, c, hw, f, group, k), mode, "conv", "conv im2col");
}

static void check_conv_im2col(void) {
    /* 64 -> 64 3x3 on 8 x 64 x 112 x 112: one sample's columns are
     * 64 x 9 x 12544 = 7225344 floats; the output (8 x 64 x 12544 =
     * 6422528) is under the 16M-element floor (16777216), which holds 2
     * samples' columns: 2 x 7225344 x 4 = 57802752 bytes (a multiple of
     * 512). Training's backward adds the chunk's dY with its samples inside
     * each channel, for dW: 64 x 2 x 12544 x 4 = 6422528 bytes, 64225280 in
     * all. */
    uint64_t t = conv_im2col_temp(8, 64, 112, 64, 1, 3, EST_MODE_INFER);
    CHECK(t == 57802752, "im2col 64->64 3x3 (infer): temp %llu, expected 57802752", U(t));
    t = conv_im2col_temp(8, 64, 112, 64, 1, 3, EST_MODE_TRAIN);
    CHECK(t == 64225280, "im2col 64->64 3x3 (train): temp %llu, expected 64225280", U(t));
    /* The same conv at batch 32: the output (32 x 64 x 12544 = 25690112)
     * is over the floor and holds 3 samples' columns: 3 x 7225344 x 4 =
     * 86704128 */
    t = conv_im2col_temp(32, 64, 112, 64, 1, 3, EST_MODE_INFER);
    CHECK(t == 86704128, "im2col 64->64 3x3 batch 32: temp %llu, expected 86704128", U(t));
    /* 4 -> 64 3x3 on 8 x 4 x 8 x 8: 4 x 9 x 64 = 2304 floats a sample; the
     * floor holds the whole batch of 8: 8 x 2304 x 4 = 73728 */
    t = conv_im2col_temp(8, 4, 8, 64, 1, 3, EST_MODE_INFER);
    CHECK(t == 73728, "im2col 4->64 3x3: temp %llu, expected 73728", U(t));
    /* 1x1 unit-stride convs read X directly; depthwise convs run direct kernels */
    t = conv_im2col_temp(8, 64, 56, 128, 1, 1, EST_MODE_TRAIN);
    CHECK(t == 0, "im2col 1x1: temp %llu, expected 0", U(t));
    t = conv_im2col_temp(8, 64, 56, 64, 64, 3, EST_MODE_TRAIN);
    CHECK(t == 0, "im2col depthwise: temp %llu, expected 0", U(t));
}

/* ConvTranspose (W [c, m / group, k, k], pads k / 2, output_padding
 * stride - 1) under EST_KERNELS_VERIFY: the executor's column buffer
 * (layers/conv.c, conv_transpose_im2col_workspace). */
static uint64_t conv_transpose_temp(int n, int c, int hw, int m, int group, int k, int stride, est_mode mode) {
    char text[2048];
    int p = k / 2, op = stride - 1;
    snprintf(text, sizeof text,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"convt\", \"opset_import\": {\"\": 17},\n"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [%d, %d, %d, %d]}],\n"
             " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [%d, %d, %d, %d]}],\n"
             " \"nodes\": [{\"name\": \"convt\", \"op\": \"ConvTranspose\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"y\"],\n"
             "   \"attributes\": {\"group\": {\"int\": %d}, \"strides\": {\"ints\": [%d, %d]},\n"
             "                  \"pads\": {\"ints\": [%d, %d, %d, %d]}, \"output_padding\": {\"ints\": [%d, %d]}}}],\n"
             " \"outputs\": [\"y\"]}\n",
             n, c, hw, hw, c, m / group, k, k, group, stride, stride, p, p, p, p, op, op);
    return verify_layer_temp(load_json(text, "convt"), mode, "convt", "conv transpose column buffer");
}

static void check_conv_transpose_verify(void) {
    /* 64 -> 32 3x3 stride 2 on 8 x 64 x 28 x 28 (Y 8 x 32 x 56 x 56): one
     * sample's columns are Y's 32 channels x 9 taps x X's 784 pixels =
     * 225792 floats; X (401408) is under the 16M-element floor, which holds
     * the whole batch of 8: 8 x 225792 x 4 = 7225344 bytes (a multiple of
     * 512), forward and backward. */
    for (int m = 0; m < 2; m++) {
        est_mode mode = m ? EST_MODE_TRAIN : EST_MODE_INFER;
        uint64_t t = conv_transpose_temp(8, 64, 28, 32, 1, 3, 2, mode);
        CHECK(t == 7225344, "ConvTranspose 64->32 3x3 stride 2 (%s): temp %llu, expected 7225344", est_mode_name(mode), U(t));
    }
    /* the same on 64 x 64 x 72 x 72: 32 x 9 x 5184 = 1492992 floats a
     * sample; X (64 x 64 x 5184 = 21233664) is over the floor and holds 14
     * samples' worth: 14 x 1492992 x 4 = 83607552 */
    uint64_t big = conv_transpose_temp(64, 64, 72, 32, 1, 3, 2, EST_MODE_INFER);
    CHECK(big == 83607552, "ConvTranspose 64->32 3x3 stride 2 batch 64: temp %llu, expected 83607552", U(big));
    /* 64 -> 2 3x3 stride 1 on 8 x 64 x 8 x 8: 2 x 9 x 64 = 1152 floats a
     * sample; the floor holds the batch of 8: 8 x 1152 x 4 = 36864 */
    uint64_t t = conv_transpose_temp(8, 64, 8, 2, 1, 3, 1, EST_MODE_TRAIN);
    CHECK(t == 36864, "ConvTranspose 64->2 3x3: temp %llu, expected 36864", U(t));
    /* one output channel per group runs direct kernels; a 1x1 kernel of
     * stride 1 reads X directly */
    t = conv_transpose_temp(8, 16, 8, 16, 16, 3, 2, EST_MODE_TRAIN);
    CHECK(t == 0, "ConvTranspose depthwise: temp %llu, expected 0", U(t));
    t = conv_transpose_temp(8, 16, 8, 32, 1, 1, 1, EST_MODE_TRAIN);
    CHECK(t == 0, "ConvTranspose 1x1: temp %llu, expected 0", U(t));
}

/* MatMul on a transposed 3-D A and a transposed weight B: x [4, 8, 16]
 * viewed as [8, 4, 16], W [32, 16] viewed as [16, 32]. PyTorch copies the
 * strided 3-D A for the call (2048 bytes) and reads W.t() as it is; memest
 * verify's executor copies both strided operands again for the backward
 * (2048 + 2048 bytes), the layer's largest temporary. */
static void check_matmul_backward_verify(void) {
    static const char text[] =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"mmt\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [4, 8, 16]}],\n"
        " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [32, 16]}],\n"
        " \"nodes\": [{\"name\": \"xt\", \"op\": \"Transpose\", \"inputs\": [\"x\"], \"outputs\": [\"a\"],\n"
        "   \"attributes\": {\"perm\": {\"ints\": [1, 0, 2]}}},\n"
        "  {\"name\": \"wt\", \"op\": \"Transpose\", \"inputs\": [\"W\"], \"outputs\": [\"b\"],\n"
        "   \"attributes\": {\"perm\": {\"ints\": [1, 0]}}},\n"
        "  {\"name\": \"mm\", \"op\": \"MatMul\", \"inputs\": [\"a\", \"b\"], \"outputs\": [\"y\"]}],\n"
        " \"outputs\": [\"y\"]}\n";
    uint64_t torch = layer_temp_in_training(text, "MatMul on transposed operands", "mm", NULL, EST_KERNELS_PYTORCH);
    uint64_t verify = layer_temp_in_training(text, "MatMul on transposed operands", "mm", NULL, EST_KERNELS_VERIFY);
    CHECK(torch == 2048, "MatMul on transposed operands: temp %llu, expected the copy of A, 2048", U(torch));
    CHECK(verify == 4096, "MatMul on transposed operands under --kernels verify: temp %llu, expected 4096", U(verify));
}

static void check_conv(void) {
    uint64_t ti, tt;

    /* 64 -> 64, 3x3, on 8 x 64 x 56 x 56 (pads 1: the output is 8 x 64 x 56 x 56).
     * Each filter reduces over 64 x 3 x 3 = 576 >= 32 values and there are
     * 64 >= 32 filters: the spatial rule. */
    {
        uint64_t in = 8ULL * 64 * 56 * 56 * 4;  /* 6422528 */
        uint64_t out = 8ULL * 64 * 56 * 56 * 4; /* 6422528 */
        uint64_t w = 64ULL * 64 * 3 * 3 * 4;    /* 147456 */
        /* forward: about 1.2x the output plus a weight copy,
         * out + out / 5 + w = 6422528 + 1284505 + 147456 = 7854489 -> 7854592 */
        uint64_t fwd = R(out + out / 5 + w);
        /* backward (weight gradient): channels-last copies of x and dy plus
         * split-K partials. The 64 x 576 weight gradient is 1 x 5 = 5 tiles
         * of 128 x 128, so 132 / 5 = 26 partials (the 25088 reduced pixels
         * allow 392): in + out + 26 w = 12845056 + 3833856 = 16678912 */
        uint64_t bwd = R(in + out + 26 * w);
        conv_temps(8, 64, 56, 64, 1, 3, &ti, &tt);
        CHECK(ti == fwd, "conv 3x3 infer: temp %llu, expected %llu", U(ti), U(fwd));
        CHECK(tt == max_u64(fwd, bwd), "conv 3x3 train: temp %llu, expected max(%llu, %llu)", U(tt), U(fwd), U(bwd));
        CHECK(fwd == 7854592 && bwd == 16678912, "conv 3x3: arithmetic");
    }

    /* the same conv at batch 64: its output, 51380224 bytes, passes 48 MiB,
     * where cuDNN's forward takes twice the output: 102760448; the weight
     * gradient in + out + 26 w = 102760448 + 3833856 = 106594304 */
    conv_temps(64, 64, 56, 64, 1, 3, &ti, &tt);
    CHECK(ti == 102760448 && tt == 106594304, "conv 3x3 batch 64: temp infer %llu train %llu, expected 102760448 "
          "and 106594304", U(ti), U(tt));
    /* 64 -> 128 at batch 64 changes the channels: channels-last copies of
     * x, y and w, 51380224 + 102760448 + 294912 = 154435584 */
    conv_temps(64, 64, 56, 128, 1, 3, &ti, &tt);
    CHECK(ti == 154435584, "conv 3x3 64->128 batch 64: temp infer %llu, expected 154435584", U(ti));

    /* depthwise 7x7 (group = channels = 64): each filter reduces over
     * 1 x 7 x 7 = 49 >= 32 values, so only the depthwise rule makes it free */
    conv_temps(8, 64, 56, 64, 64, 7, &ti, &tt);
    CHECK(ti == 0 && tt == 0, "depthwise 7x7: temp infer %llu train %llu, expected 0", U(ti), U(tt));

    /* grouped 3x3 (group 4 of 64 channels, RegNet-style): each filter reduces
     * over 16 x 3 x 3 = 144 values; the forward copies input and output
     * channels-last: in + out = 2 x 6422528 = 12845056; the weight gradient
     * follows the spatial rule: a 64 x 144 weight gradient is 2 tiles, so 66
     * partials of w = 64 x 16 x 9 x 4 = 36864: 12845056 + 2433024 = 15278080 */
    {
        uint64_t in = 8ULL * 64 * 56 * 56 * 4, out = in, w = 64ULL * 16 * 3 * 3 * 4;
        conv_temps(8, 64, 56, 64, 4, 3, &ti, &tt);
        CHECK(ti == R(in + out) && ti == 12845056, "grouped 3x3 infer: temp %llu, expected %llu", U(ti),
              U(R(in + out)));
        CHECK(tt == R(in + out + 66 * w) && tt == 15278080, "grouped 3x3 train: temp %llu, expected %llu",
              U(tt), U(R(in + out + 66 * w)));
    }

    /* ResNet's downsample: 1x1, stride 2, 256 -> 512 on 8 x 256 x 56 x 56:
     * 1.5x the input forward and backward, in = 25690112: 38535168 */
    conv_temps_strided(8, 256, 56, 512, 1, 1, 2, &ti, &tt);
    CHECK(ti == 38535168 && tt == 38535168, "strided 1x1 256->512: temp infer %llu train %llu, expected 38535168",
          U(ti), U(tt));
    /* the same over 64 channels takes none forward; backward the 1x1 rule:
     * min(8 w, 4 max(in, out) + w), w = 128 x 64 x 4 = 32768: 262144 */
    conv_temps_strided(8, 64, 56, 128, 1, 1, 2, &ti, &tt);
    CHECK(ti == 0 && tt == 262144, "strided 1x1 64->128: temp infer %llu train %llu, expected 0 and 262144", U(ti),
          U(tt));

    /* 3 -> 64, 3x3: each filter reduces over 3 x 3 x 3 = 27 < 32 values: free */
    conv_temps(8, 3, 56, 64, 1, 3, &ti, &tt);
    CHECK(ti == 0 && tt == 0, "conv 3->64 3x3: temp infer %llu train %llu, expected 0", U(ti), U(tt));

    /* 64 -> 16, 3x3: fewer than 32 filters, so the forward is free; the weight
     * gradient is not. Its 16 x 576 gradient is 5 tiles: 26 partials of
     * w = 16 x 64 x 9 x 4 = 36864 make 958464, less than the 1 MiB a small
     * weight splits into (132 of them would be 4865536): in + out + 1 MiB =
     * 6422528 + 1605632 + 1048576 = 9076736 */
    {
        uint64_t in = 8ULL * 64 * 56 * 56 * 4, out = 8ULL * 16 * 56 * 56 * 4, w = 16ULL * 64 * 3 * 3 * 4;
        conv_temps(8, 64, 56, 16, 1, 3, &ti, &tt);
        CHECK(ti == 0, "conv 64->16 3x3 infer: temp %llu, expected 0", U(ti));
        CHECK(tt == R(in + out + (1 << 20)) && tt == 9076736 && w == 36864,
              "conv 64->16 3x3 train: temp %llu, expected %llu", U(tt), U(R(in + out + (1 << 20))));
    }

    /* lenet's 6 -> 16 5x5 (here padded: 64 x 6 x 14 x 14 -> 64 x 16 x 14 x 14).
     * w = 16 x 6 x 25 x 4 = 9600; 12544 reduced pixels allow 196 splits, the
     * 2 tiles 66, but a small weight splits up to 1 MiB: in + out + 1 MiB =
     * 301056 + 802816 + 1048576 = 2152448. At batch 1 the 196 pixels allow 3
     * splits: 4704 + 12544 + 3 x 9600 = 46048 -> 46080. The forward (16
     * filters) is free. */
    conv_temps(64, 6, 14, 16, 1, 5, &ti, &tt);
    CHECK(ti == 0 && tt == 2152448, "conv 6->16 5x5 batch 64: temp infer %llu train %llu, expected 0 and 2152448",
          U(ti), U(tt));
    conv_temps(1, 6, 14, 16, 1, 5, &ti, &tt);
    CHECK(ti == 0 && tt == 46080, "conv 6->16 5x5 batch 1: temp infer %llu train %llu, expected 0 and 46080", U(ti),
          U(tt));

    /* 512 -> 512 3x3 on 8 x 512 x 7 x 7: the 512 x 4608 weight gradient is
     * 4 x 36 = 144 tiles, more than the SMs: one partial, the weight itself.
     * in + out + w = 2 x 802816 + 9437184 = 11042816 (an H200 measured
     * 11043328, bench/accuracy/probe_conv.py). The forward, out + out / 5 + w
     * = 10400563 -> 10400768, is smaller. */
    conv_temps(8, 512, 7, 512, 1, 3, &ti, &tt);
    CHECK(ti == 10400768 && tt == 11042816, "conv 512 3x3: temp infer %llu train %llu, expected 10400768 and "
          "11042816", U(ti), U(tt));

    /* a 3-D conv that keeps its channels and size takes 1.2x its output
     * however large (r3d_18's probe): 64 -> 64 3x3x3, pads 1, on
     * 4 x 64 x 16 x 56 x 56: out = 51380224 (past 48 MiB), w = 442368:
     * 51380224 + 10276044 + 442368 = 62098636 -> 62098944 */
    {
        est_graph *g = load_json(
            "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"conv3d\", \"opset_import\": {\"\": 17},\n"
            " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [4, 64, 16, 56, 56]}],\n"
            " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [64, 64, 3, 3, 3]}],\n"
            " \"nodes\": [{\"name\": \"conv\", \"op\": \"Conv\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"y\"],\n"
            "   \"attributes\": {\"kernel_shape\": {\"ints\": [3, 3, 3]}, \"pads\": {\"ints\": [1, 1, 1, 1, 1, 1]}}}],\n"
            " \"outputs\": [\"y\"]}\n",
            "conv3d");
        est_report *ri = run(g, EST_MODE_INFER, 0);
        const est_layer *Li = layer_named(ri, "conv", "conv3d infer");
        CHECK(Li && Li->temp_bytes == 62098944, "conv3d: temp infer %llu, expected 62098944",
              U(Li ? Li->temp_bytes : 0));
        est_report_free(ri);
        est_graph_free(g);
    }

    /* a 1-D conv keeps the earlier rule, 2 x max(in, out) + w: 128 -> 256,
     * kernel 3, pads 1, on 8 x 128 x 256: in = 1048576, out = 2097152,
     * w = 393216: 4587520 (the forward, which changes the channels,
     * in + out + w = 3538944, is smaller) */
    {
        est_graph *g = load_json(
            "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"conv1d\", \"opset_import\": {\"\": 17},\n"
            " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [8, 128, 256]}],\n"
            " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [256, 128, 3]}],\n"
            " \"nodes\": [{\"name\": \"conv\", \"op\": \"Conv\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"y\"],\n"
            "   \"attributes\": {\"kernel_shape\": {\"ints\": [3]}, \"pads\": {\"ints\": [1, 1]}}}],\n"
            " \"outputs\": [\"y\"]}\n",
            "conv1d");
        est_report *ri = run(g, EST_MODE_INFER, 0), *rt = run(g, EST_MODE_TRAIN, 0);
        const est_layer *Li = layer_named(ri, "conv", "conv1d infer"), *Lt = layer_named(rt, "conv", "conv1d train");
        CHECK(Li && Lt && Li->temp_bytes == 3538944 && Lt->temp_bytes == 4587520,
              "conv1d: temp infer %llu train %llu, expected 3538944 and 4587520", U(Li ? Li->temp_bytes : 0),
              U(Lt ? Lt->temp_bytes : 0));
        est_report_free(ri);
        est_report_free(rt);
        est_graph_free(g);
    }

    /* 64 -> 64, 1x1 on 8 x 64 x 56 x 56: forward free; the weight gradient
     * splits over up to 8 partial sums: min(8 w, 4 max(in, out) + w) with
     * w = 64 x 64 x 4 = 16384: min(131072, 25690112 + 16384) = 131072 */
    {
        uint64_t in = 8ULL * 64 * 56 * 56 * 4, out = in, w = 64ULL * 64 * 4;
        uint64_t bwd = R(min_u64(8 * w, 4 * max_u64(in, out) + w));
        conv_temps(8, 64, 56, 64, 1, 1, &ti, &tt);
        CHECK(ti == 0, "conv 1x1 infer: temp %llu, expected 0", U(ti));
        CHECK(tt == bwd, "conv 1x1 train: temp %llu, expected %llu", U(tt), U(bwd));
        CHECK(bwd == 131072, "conv 1x1: arithmetic");
    }
    /* the same on 1 x 64 x 2 x 2, where the activations bound the split:
     * in = out = 1 x 64 x 2 x 2 x 4 = 1024; min(131072, 4 x 1024 + 16384) = 20480 */
    {
        uint64_t in = 1ULL * 64 * 2 * 2 * 4, out = in, w = 64ULL * 64 * 4;
        uint64_t bwd = R(min_u64(8 * w, 4 * max_u64(in, out) + w));
        conv_temps(1, 64, 2, 64, 1, 1, &ti, &tt);
        CHECK(ti == 0, "conv 1x1 small infer: temp %llu, expected 0", U(ti));
        CHECK(tt == bwd, "conv 1x1 small train: temp %llu, expected %llu", U(tt), U(bwd));
        CHECK(bwd == 20480, "conv 1x1 small: arithmetic");
    }
}

/* ---- 3. MatMul copies of strided operands ---------------------------------------- */

/* a [2, 4, 8, 16] @ b' where b' is b [2, 4, 8, 16] transposed (perm 0 1 3 2,
 * a view [2, 4, 16, 8]) or c [2, 4, 16, 8] as is; the product is [2, 4, 8, 8].
 * rank2: the same with a [8, 16], b [8, 16] transposed (perm 1 0). */
static est_graph *matmul_graph(bool transposed, bool rank2) {
    char text[2048];
    const char *ad = rank2 ? "8, 16" : "2, 4, 8, 16";
    const char *bd = transposed ? (rank2 ? "8, 16" : "2, 4, 8, 16") : (rank2 ? "16, 8" : "2, 4, 16, 8");
    const char *perm = rank2 ? "1, 0" : "0, 1, 3, 2";
    char tnode[512] = "";
    if (transposed)
        snprintf(tnode, sizeof tnode,
                 "  {\"name\": \"t\", \"op\": \"Transpose\", \"inputs\": [\"b\"], \"outputs\": [\"bt\"],\n"
                 "   \"attributes\": {\"perm\": {\"ints\": [%s]}}},\n",
                 perm);
    snprintf(text, sizeof text,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"mm\", \"opset_import\": {\"\": 17},\n"
             " \"inputs\": [{\"name\": \"a\", \"dtype\": \"float32\", \"dims\": [%s]},\n"
             "            {\"name\": \"b\", \"dtype\": \"float32\", \"dims\": [%s]}],\n"
             " \"nodes\": [\n%s"
             "  {\"name\": \"mm\", \"op\": \"MatMul\", \"inputs\": [\"a\", \"%s\"], \"outputs\": [\"y\"]}],\n"
             " \"outputs\": [\"y\"]}\n",
             ad, bd, tnode, transposed ? "bt" : "b");
    return load_json(text, "matmul");
}

static void check_matmul(void) {
    for (int mode = 0; mode < 2; mode++) {
        est_mode m = mode ? EST_MODE_TRAIN : EST_MODE_INFER;
        const char *mn = est_mode_name(m);
        /* transposed 4-D operand: copied, 2 x 4 x 16 x 8 x 4 = 4096 bytes */
        est_graph *g = matmul_graph(true, false);
        est_report *r = run(g, m, 0);
        const est_layer *L = layer_named(r, "mm", "matmul transposed");
        if (L) {
            CHECK(L->n_inputs == 2 && L->inputs[1].elements == 2 * 4 * 16 * 8,
                  "matmul %s: operand 1 has %llu elements", mn, L->n_inputs == 2 ? U(L->inputs[1].elements) : 0ULL);
            CHECK(L->temp_bytes == R(2 * 4 * 16 * 8 * 4), "matmul %s: temp %llu, expected the copy %llu", mn,
                  U(L->temp_bytes), U(R(2 * 4 * 16 * 8 * 4)));
        }
        est_report_free(r);
        est_graph_free(g);

        /* contiguous operand of the same shape: no copy */
        g = matmul_graph(false, false);
        r = run(g, m, 0);
        L = layer_named(r, "mm", "matmul contiguous");
        if (L) CHECK(L->temp_bytes == 0, "matmul contiguous %s: temp %llu, expected 0", mn, U(L->temp_bytes));
        est_report_free(r);
        est_graph_free(g);

        /* 2-D transposed operand: cuBLAS takes the transpose, no copy */
        g = matmul_graph(true, true);
        r = run(g, m, 0);
        L = layer_named(r, "mm", "matmul 2-D transposed");
        if (L) CHECK(L->temp_bytes == 0, "matmul 2-D transposed %s: temp %llu, expected 0", mn, U(L->temp_bytes));
        est_report_free(r);
        est_graph_free(g);
    }
}

/* ---- 4. the unfold is the ONNX loader's ------------------------------------------ */

/* A JSON graph says every node explicitly: a Conv whose weight carries the
 * TorchScript fold's name stays a lone Conv. */
static void check_json_no_unfold(void) {
    static const char text[] =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"c\", \"producer\": \"pytorch\",\n"
        " \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [1, 3, 8, 8]}],\n"
        " \"initializers\": [{\"name\": \"onnx::Conv_1\", \"dtype\": \"float32\", \"dims\": [8, 3, 3, 3]},\n"
        "                    {\"name\": \"onnx::Conv_2\", \"dtype\": \"float32\", \"dims\": [8]}],\n"
        " \"nodes\": [{\"name\": \"conv\", \"op\": \"Conv\", \"inputs\": [\"x\", \"onnx::Conv_1\", \"onnx::Conv_2\"],\n"
        "   \"outputs\": [\"y\"], \"attributes\": {\"kernel_shape\": {\"ints\": [3, 3]}}}],\n"
        " \"outputs\": [\"y\"]}\n";
    est_graph *g = load_json(text, "json conv");
    if (!g) return;
    CHECK(est_graph_unfolded_batchnorms(g) == 0, "json: %zu BatchNorms unfolded, expected 0",
          est_graph_unfolded_batchnorms(g));
    CHECK(est_graph_node_count(g) == 1, "json: %zu nodes, expected 1", est_graph_node_count(g));
    est_graph_free(g);
}

/* ---- 5. folded BatchNorm, on the truth exports ------------------------------------ */

static est_graph *load_export(const char *dir, const char *file) {
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

/* resnet18 has 20 BatchNorms: bn1 (64), 8 basic blocks of 2 (4 x 64, 4 x 128,
 * 4 x 256, 4 x 512) and 3 downsamples (128, 256, 512). Channels:
 * 64 + 4*64 + 4*128 + 128 + 4*256 + 256 + 4*512 + 512 = 4800; running mean
 * and variance are 2 x 4800 = 9600 buffer elements (PyTorch's n_buffers,
 * 9620, also counts the 20 num_batches_tracked scalars, which no export
 * carries). Parameters: PyTorch's n_params, 11689512. */
#define RESNET18_PARAMS 11689512ULL
#define RESNET18_BUFFERS 9600ULL

/* The BatchNorms of a resnet18 report at batch 8, checked as training (or
 * eval) BatchNorms: a training one saves its input and two float32 statistics
 * per channel and costs 5 FLOPs per element forward; an eval one saves its
 * input and costs 2 (docs/flops.md). */
static void check_resnet_bns(const est_report *r, const char *what, bool training) {
    size_t bns = 0;
    for (size_t i = 0; r && i < est_report_layer_count(r); i++) {
        const est_layer *L = est_report_layer(r, i);
        if (strcmp(L->op, "BatchNormalization") != 0) continue;
        bns++;
        if (L->n_inputs < 1 || L->inputs[0].rank != 4) {
            CHECK(false, "%s: %s: input 0 not 4-D", what, L->name);
            continue;
        }
        uint64_t C = (uint64_t)L->inputs[0].shape[1];
        uint64_t elements = L->inputs[0].elements;
        uint64_t x = R(L->inputs[0].bytes);
        uint64_t saved = training ? x + 2 * R(C * 4) : x;
        uint64_t flops = (training ? 5 : 2) * elements;
        CHECK(L->saved_bytes == saved, "%s: %s saves %llu, expected %llu", what, L->name, U(L->saved_bytes), U(saved));
        CHECK(L->flops_forward == flops, "%s: %s forward FLOPs %llu, expected %llu", what, L->name,
              U(L->flops_forward), U(flops));
        /* scale and shift: 2 x C parameters; running mean and var: 2 x C x 4 bytes */
        CHECK(L->param_count == 2 * C, "%s: %s has %llu params, expected %llu", what, L->name, U(L->param_count),
              U(2 * C));
        CHECK(L->buffer_bytes == 2 * C * 4, "%s: %s has %llu buffer bytes, expected %llu", what, L->name,
              U(L->buffer_bytes), U(2 * C * 4));
    }
    CHECK(bns == 20, "%s: %zu BatchNorm layers, expected 20", what, bns);
}

static void check_totals(const est_report *r, const char *what, bool params) {
    if (!r) return;
    const est_totals *t = est_report_totals(r);
    if (params) CHECK(t->param_count == RESNET18_PARAMS, "%s: %llu params, expected %llu", what, U(t->param_count),
          U(RESNET18_PARAMS));
    CHECK(t->buffer_count == RESNET18_BUFFERS, "%s: %llu buffer elements, expected %llu", what, U(t->buffer_count),
          U(RESNET18_BUFFERS));
}

static void check_onnx(const char *dir) {
    static const struct {
        const char *file;
        size_t unfolded;
    } counts[] = {
        {"resnet18.legacy.onnx", 20},       /* TorchScript eval: onnx::Conv_<n> weights */
        {"resnet18.dynamo.onnx", 20},       /* dynamo: FuseBatchNormIntoConv metadata */
        {"resnet18.dynamo-train.onnx", 20}, /* the same, from model.train() */
        {"resnet18.legacy-train.onnx", 0},  /* BatchNorms kept as nodes */
        {"squeezenet1_0.legacy.onnx", 0},   /* no BatchNorm */
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        est_graph *g = load_export(dir, counts[i].file);
        if (!g) continue;
        CHECK(est_graph_unfolded_batchnorms(g) == counts[i].unfolded, "%s: %zu BatchNorms unfolded, expected %zu",
              counts[i].file, est_graph_unfolded_batchnorms(g), counts[i].unfolded);
        est_graph_free(g);
    }

    /* Training step at batch 8 with each resnet18 export. */
    est_graph *dt = load_export(dir, "resnet18.dynamo-train.onnx");
    est_graph *de = load_export(dir, "resnet18.dynamo.onnx");
    est_graph *le = load_export(dir, "resnet18.legacy.onnx");
    est_graph *lt = load_export(dir, "resnet18.legacy-train.onnx");
    est_report *rdt = run(dt, EST_MODE_TRAIN, 8), *rde = run(de, EST_MODE_TRAIN, 8);
    est_report *rle = run(le, EST_MODE_TRAIN, 8), *rlt = run(lt, EST_MODE_TRAIN, 8);

    /* dynamo-train: the fx node says _native_batch_norm_legit_functional: training */
    check_resnet_bns(rdt, "resnet18.dynamo-train", true);
    /* eval exports: the restored BatchNorms use their running statistics */
    check_resnet_bns(rde, "resnet18.dynamo", false);
    check_resnet_bns(rle, "resnet18.legacy", false);
    /* the real BatchNorms of legacy-train, for comparison */
    check_resnet_bns(rlt, "resnet18.legacy-train", true);

    /* Every restored one matches legacy-train's real BatchNorm at the same
     * place (both graphs run in module order). */
    if (rdt && rlt) {
        size_t a = 0, b = 0, na = est_report_layer_count(rdt), nb = est_report_layer_count(rlt);
        for (;;) {
            while (a < na && strcmp(est_report_layer(rdt, a)->op, "BatchNormalization") != 0) a++;
            while (b < nb && strcmp(est_report_layer(rlt, b)->op, "BatchNormalization") != 0) b++;
            if (a >= na || b >= nb) break;
            const est_layer *A = est_report_layer(rdt, a), *B = est_report_layer(rlt, b);
            CHECK(A->saved_bytes == B->saved_bytes && A->flops_forward == B->flops_forward &&
                      A->flops_backward == B->flops_backward && A->param_count == B->param_count &&
                      A->buffer_bytes == B->buffer_bytes && A->outputs[0].elements == B->outputs[0].elements,
                  "%s vs %s: saved %llu/%llu flops %llu/%llu", A->name, B->name, U(A->saved_bytes),
                  U(B->saved_bytes), U(A->flops_forward), U(B->flops_forward));
            a++, b++;
        }
        CHECK(a >= na && b >= nb, "dynamo-train and legacy-train differ in BatchNorm count");
    }

    check_totals(rdt, "resnet18.dynamo-train", true);
    check_totals(rde, "resnet18.dynamo", true);
    check_totals(rlt, "resnet18.legacy-train", true);
    /* The TorchScript exporter shares equal folded biases through Identity
     * nodes (Identity_0..15 copying onnx::Conv_194, _209, _224, _239); once
     * the unfold drops the biases the loader drops those dead Identities, so
     * their 960 elements do not count as parameters. */
    check_totals(rle, "resnet18.legacy", true);

    /* A JSON round trip carries the restored BatchNorms as ordinary nodes: the
     * same node count, 20 BatchNorm layers, nothing unfolded a second time. */
    if (le) {
        char *json = NULL;
        est_error err;
        if (est_graph_to_json(le, &json, &err) != EST_OK) CHECK(false, "to_json: %s", err.message);
        else {
            est_graph *back = load_json(json, "resnet18.legacy.json");
            if (back) {
                CHECK(est_graph_unfolded_batchnorms(back) == 0, "round trip: %zu unfolded again",
                      est_graph_unfolded_batchnorms(back));
                CHECK(est_graph_node_count(back) == est_graph_node_count(le), "round trip: %zu nodes, was %zu",
                      est_graph_node_count(back), est_graph_node_count(le));
                est_report *rb = run(back, EST_MODE_TRAIN, 8);
                CHECK(count_op(rb, "BatchNormalization") == 20, "round trip: %zu BatchNorms",
                      count_op(rb, "BatchNormalization"));
                check_totals(rb, "resnet18.legacy round trip", false);
                est_report_free(rb);
                est_graph_free(back);
            }
            est_free(json);
        }
    }

    est_report_free(rdt);
    est_report_free(rde);
    est_report_free(rle);
    est_report_free(rlt);
    est_graph_free(dt);
    est_graph_free(de);
    est_graph_free(le);
    est_graph_free(lt);
}

/* ---- 8. scaled dot-product attention fusion ---------------------------------------- */

/* x [2, 4, 64, 32] -> MatMul by Wq, Wk, Wv [32, 32] -> q, k, v (65536 bytes
 * each, needing gradients) -> the attention nodes given -> y [2, 4, 64, 32].
 * s is sqrt(scale), a one-element initializer; the scores would be
 * [2, 4, 64, 64], 131072 bytes. */
static est_graph *sdpa_graph(const char *nodes, const char *what) {
    char text[8192];
    snprintf(text, sizeof text,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"sdpa\", \"opset_import\": {\"\": 17},\n"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [2, 4, 64, 32]},\n"
             "             {\"name\": \"mask\", \"dtype\": \"float32\", \"dims\": [2, 1, 64, 64]}],\n"
             " \"initializers\": [{\"name\": \"s\", \"dtype\": \"float32\", \"dims\": [1], \"values\": [0.42]},\n"
             "   {\"name\": \"flat\", \"dtype\": \"int64\", \"dims\": [3], \"values\": [-1, 64, 32]},\n"
             "   {\"name\": \"back\", \"dtype\": \"int64\", \"dims\": [4], \"values\": [2, 4, 32, 64]},\n"
             "   {\"name\": \"zero\", \"dtype\": \"float32\", \"dims\": [], \"values\": [0.0]},\n"
             "   {\"name\": \"Wq\", \"dtype\": \"float32\", \"dims\": [32, 32]},\n"
             "   {\"name\": \"Wk\", \"dtype\": \"float32\", \"dims\": [32, 32]},\n"
             "   {\"name\": \"Wv\", \"dtype\": \"float32\", \"dims\": [32, 32]}],\n"
             " \"nodes\": [{\"name\": \"pq\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"Wq\"], \"outputs\": [\"q\"]},\n"
             "  {\"name\": \"pk\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"Wk\"], \"outputs\": [\"k\"]},\n"
             "  {\"name\": \"pw\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"Wv\"], \"outputs\": [\"v\"]},\n"
             "  %s],\n"
             " \"outputs\": [\"y\"]}\n",
             nodes);
    return load_json(text, what);
}

#define SDPA_SCALED_TO(scores) \
    "{\"name\": \"mq\", \"op\": \"Mul\", \"inputs\": [\"q\", \"s\"], \"outputs\": [\"qs\"]},\n" \
    "  {\"name\": \"mk\", \"op\": \"Mul\", \"inputs\": [\"kt\", \"s\"], \"outputs\": [\"ks\"]},\n" \
    "  {\"name\": \"qk\", \"op\": \"MatMul\", \"inputs\": [\"qs\", \"ks\"], \"outputs\": [\"" scores "\"]},\n"
#define SDPA_SCALED SDPA_SCALED_TO("sc")
#define SDPA_TORCHSCRIPT_KT \
    "{\"name\": \"tk\", \"op\": \"Transpose\", \"inputs\": [\"k\"], \"outputs\": [\"kt\"], " \
    "\"attributes\": {\"perm\": {\"ints\": [0, 1, 3, 2]}}},\n"
#define SDPA_DYNAMO_KT \
    "{\"name\": \"r1\", \"op\": \"Reshape\", \"inputs\": [\"k\", \"flat\"], \"outputs\": [\"k3\"]},\n" \
    "  {\"name\": \"tk\", \"op\": \"Transpose\", \"inputs\": [\"k3\"], \"outputs\": [\"k3t\"], " \
    "\"attributes\": {\"perm\": {\"ints\": [0, 2, 1]}}},\n" \
    "  {\"name\": \"r2\", \"op\": \"Reshape\", \"inputs\": [\"k3t\", \"back\"], \"outputs\": [\"kt\"]},\n"
#define SDPA_TAIL \
    "{\"name\": \"sm\", \"op\": \"Softmax\", \"inputs\": [\"sc\"], \"outputs\": [\"p\"], " \
    "\"attributes\": {\"axis\": {\"int\": -1}}},\n" \
    "  {\"name\": \"pv\", \"op\": \"MatMul\", \"inputs\": [\"p\", \"v\"], \"outputs\": [\"y\"]}"

/* extra: bytes the inference peak holds beyond x, the mask, q, k, v, y and
 * the weights */
static void check_sdpa_fused(const char *nodes, const char *what, size_t nodes_left, uint64_t extra) {
    const uint64_t T = 2 * 4 * 64 * 32 * 4, rows = 2 * 4 * 64;
    est_graph *g = sdpa_graph(nodes, what);
    if (!g) return;
    CHECK(est_graph_fused_sequences(g) == 1 && est_graph_node_count(g) == nodes_left,
          "%s: %zu fused, %zu nodes; expected 1 and %zu", what, est_graph_fused_sequences(g),
          est_graph_node_count(g), nodes_left);
    est_report *r = run(g, EST_MODE_TRAIN, 0);
    const est_layer *at = r ? layer_named(r, "pv", what) : NULL;
    if (at) {
        CHECK(strcmp(at->op, "Attention") == 0, "%s: node 'pv' is %s, expected Attention", what, at->op);
        /* flash / memory-efficient backward: q, k, v, y and a float32
         * logsumexp per row (the mask is a graph input: resident anyway) */
        CHECK(at->saved_bytes == 4 * T + R(rows * 4), "%s: Attention saves %llu, expected %llu", what,
              U(at->saved_bytes), U(4 * T + R(rows * 4)));
        /* the products' FLOPs, as the two MatMuls had them: 2*B*H*L*L*D each */
        CHECK(at->flops_forward == 2 * (2ull * 2 * 4 * 64 * 64 * 32), "%s: forward FLOPs %llu", what,
              U(at->flops_forward));
        /* what the forward leaves: q, k, v, y and the logsumexp; no score
         * matrix (the projections keep x, an input, and their weights) */
        CHECK(est_report_totals(r)->activations_bytes == 4 * T + R(rows * 4),
              "%s: activations_bytes %llu, expected %llu", what, U(est_report_totals(r)->activations_bytes),
              U(4 * T + R(rows * 4)));
    }
    est_report_free(r);
    /* inference: at the Attention, the weights, x, the mask, q, k, v and y;
     * never a score matrix */
    uint64_t infer_peak = 3 * R(32 * 32 * 4) + T /* x */ + R(2 * 64 * 64 * 4) /* mask */ + 4 * T + extra;
    r = run(g, EST_MODE_INFER, 0);
    if (r)
        CHECK(est_report_peak(r)->bytes == infer_peak, "%s: inference peak %llu, expected %llu", what,
              U(est_report_peak(r)->bytes), U(infer_peak));
    est_report_free(r);
    est_graph_free(g);
}

/* The key as the TorchScript exporter writes it for Hugging Face's sdpa:
 * one Transpose [0,2,3,1] from (B, L, H, D) to kT (B, H, D, L). After the
 * fusion that Transpose gives k (B, H, L, D): perm [0,2,1,3]. */
static void check_sdpa_key_transpose(void) {
    const char *what = "sdpa, key transposed with the heads";
    est_graph *g = load_json(
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"sdpa\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"q\", \"dtype\": \"float32\", \"dims\": [2, 4, 64, 32]},\n"
        "             {\"name\": \"kl\", \"dtype\": \"float32\", \"dims\": [2, 64, 4, 32]},\n"
        "             {\"name\": \"v\", \"dtype\": \"float32\", \"dims\": [2, 4, 64, 32]}],\n"
        " \"initializers\": [{\"name\": \"s\", \"dtype\": \"float32\", \"dims\": [1], \"values\": [0.42]}],\n"
        " \"nodes\": [{\"name\": \"tk\", \"op\": \"Transpose\", \"inputs\": [\"kl\"], \"outputs\": [\"kt\"], "
        "\"attributes\": {\"perm\": {\"ints\": [0, 2, 3, 1]}}},\n"
        "  " SDPA_SCALED SDPA_TAIL "],\n"
        " \"outputs\": [\"y\"]}\n",
        what);
    if (!g) return;
    CHECK(est_graph_fused_sequences(g) == 1 && est_graph_node_count(g) == 2, "%s: %zu fused, %zu nodes", what,
          est_graph_fused_sequences(g), est_graph_node_count(g));
    est_report *r = run(g, EST_MODE_INFER, 0);
    const est_layer *tk = r ? layer_named(r, "tk", what) : NULL, *at = r ? layer_named(r, "pv", what) : NULL;
    if (tk && at) {
        CHECK(tk->n_outputs == 1 && tk->outputs[0].rank == 4 && tk->outputs[0].shape[2] == 64 &&
                  tk->outputs[0].shape[3] == 32,
              "%s: the Transpose now gives k (2, 4, 64, 32)", what);
        CHECK(strcmp(at->op, "Attention") == 0 && at->n_outputs == 1 && at->outputs[0].shape[3] == 32,
              "%s: Attention writes (2, 4, 64, 32)", what);
    }
    est_report_free(r);
    est_graph_free(g);
}

/* Grouped-query attention as transformers writes it (repeat_kv:
 * Unsqueeze, Expand, Reshape of a key or value of 2 heads to Q's 4) fuses
 * into Attention on the 2-head k and v. In float32 PyTorch runs SDPA's math
 * kernel for it (layers/linear.c, attention_runs_math: the fused kernels
 * take grouped K/V only in half precision), which keeps q and k scaled, v
 * repeated and the probabilities; in bfloat16 a fused kernel keeps q, k, v,
 * y and the logsumexp. */
static void check_sdpa_grouped(void) {
    const char *what = "grouped-query sdpa";
    char text[8192];
    snprintf(text, sizeof text,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"gqa\", \"opset_import\": {\"\": 17},\n"
             " \"inputs\": [{\"name\": \"xq\", \"dtype\": \"float32\", \"dims\": [2, 4, 64, 32]},\n"
             "             {\"name\": \"xkv\", \"dtype\": \"float32\", \"dims\": [2, 2, 64, 32]}],\n"
             " \"initializers\": [{\"name\": \"s\", \"dtype\": \"float32\", \"dims\": [1], \"values\": [0.42]},\n"
             "   {\"name\": \"ax\", \"dtype\": \"int64\", \"dims\": [1], \"values\": [2]},\n"
             "   {\"name\": \"grown\", \"dtype\": \"int64\", \"dims\": [5], \"values\": [2, 2, 2, 64, 32]},\n"
             "   {\"name\": \"heads\", \"dtype\": \"int64\", \"dims\": [4], \"values\": [2, 4, 64, 32]},\n"
             "   {\"name\": \"Wq\", \"dtype\": \"float32\", \"dims\": [32, 32]},\n"
             "   {\"name\": \"Wk\", \"dtype\": \"float32\", \"dims\": [32, 32]},\n"
             "   {\"name\": \"Wv\", \"dtype\": \"float32\", \"dims\": [32, 32]}],\n"
             " \"nodes\": [{\"name\": \"pq\", \"op\": \"MatMul\", \"inputs\": [\"xq\", \"Wq\"], \"outputs\": [\"q\"]},\n"
             "  {\"name\": \"pk\", \"op\": \"MatMul\", \"inputs\": [\"xkv\", \"Wk\"], \"outputs\": [\"k2\"]},\n"
             "  {\"name\": \"pw\", \"op\": \"MatMul\", \"inputs\": [\"xkv\", \"Wv\"], \"outputs\": [\"v2\"]},\n"
             "  {\"name\": \"uk\", \"op\": \"Unsqueeze\", \"inputs\": [\"k2\", \"ax\"], \"outputs\": [\"k5\"]},\n"
             "  {\"name\": \"ek\", \"op\": \"Expand\", \"inputs\": [\"k5\", \"grown\"], \"outputs\": [\"k5e\"]},\n"
             "  {\"name\": \"rk\", \"op\": \"Reshape\", \"inputs\": [\"k5e\", \"heads\"], \"outputs\": [\"k\"]},\n"
             "  {\"name\": \"uv\", \"op\": \"Unsqueeze\", \"inputs\": [\"v2\", \"ax\"], \"outputs\": [\"v5\"]},\n"
             "  {\"name\": \"ev\", \"op\": \"Expand\", \"inputs\": [\"v5\", \"grown\"], \"outputs\": [\"v5e\"]},\n"
             "  {\"name\": \"rv\", \"op\": \"Reshape\", \"inputs\": [\"v5e\", \"heads\"], \"outputs\": [\"v\"]},\n"
             "  %s],\n"
             " \"outputs\": [\"y\"]}\n",
             SDPA_TORCHSCRIPT_KT SDPA_SCALED SDPA_TAIL);
    est_graph *g = load_json(text, what);
    if (!g) return;
    CHECK(est_graph_fused_sequences(g) == 1 && est_graph_node_count(g) == 4,
          "%s: %zu fused, %zu nodes; expected 1 and 4 (three projections and Attention)", what,
          est_graph_fused_sequences(g), est_graph_node_count(g));
    const uint64_t Q = 2 * 4 * 64 * 32, KV = 2 * 2 * 64 * 32, probs = 2 * 4 * 64 * 64, rows = 2 * 4 * 64;
    static const struct { est_dtype dt; uint64_t elem; bool math; } cases[] = {
        {EST_DT_FLOAT, 4, true}, {EST_DT_BFLOAT16, 2, false}};
    for (size_t i = 0; i < 2; i++) {
        est_options opt;
        est_options_init(&opt);
        opt.dtype = cases[i].dt;
        est_error err;
        est_report *r = NULL;
        if (est_estimate(g, &opt, &r, &err) != EST_OK) {
            CHECK(false, "%s: %s", what, err.message);
            continue;
        }
        const est_layer *at = layer_named(r, "pv", what);
        uint64_t e = cases[i].elem;
        /* math: q scaled, k repeated and scaled, v repeated, probabilities;
         * fused: q, k, v (2 heads), y and a float32 logsumexp per row */
        uint64_t want = cases[i].math ? R(Q * e) + R(2 * KV * e) + R(2 * KV * e) + R(probs * e)
                                      : R(Q * e) + R(KV * e) + R(KV * e) + R(Q * e) + R(rows * 4);
        if (at) {
            CHECK(strcmp(at->op, "Attention") == 0 && at->inputs[1].shape[1] == 2,
                  "%s: Attention reads the 2-head key", what);
            CHECK(at->saved_bytes == want, "%s (%s): Attention saves %llu, expected %llu", what,
                  est_dtype_name(cases[i].dt), U(at->saved_bytes), U(want));
            /* the math forward's masked scores and repeated key; the fused
             * kernels take none */
            uint64_t ws = cases[i].math ? R(probs * e) + R(2 * KV * e) : 0;
            CHECK(at->temp_bytes >= ws && (cases[i].math || at->temp_bytes == 0), "%s (%s): temp %llu", what,
                  est_dtype_name(cases[i].dt), U(at->temp_bytes));
        }
        est_report_free(r);
    }
    est_graph_free(g);
}

static void check_sdpa(void) {
    /* 3 projections + Attention; the scale Muls, the key's views, the first
     * MatMul and the Softmax are gone */
    check_sdpa_fused(SDPA_TORCHSCRIPT_KT SDPA_SCALED SDPA_TAIL, "sdpa (TorchScript)", 4, 0);
    check_sdpa_fused(SDPA_DYNAMO_KT SDPA_SCALED SDPA_TAIL, "sdpa (dynamo)", 4, 0);
    /* with an additive mask and the training-mode Dropout of dropout_p */
    check_sdpa_fused(SDPA_TORCHSCRIPT_KT SDPA_SCALED_TO("sc0")
                     "{\"name\": \"am\", \"op\": \"Add\", \"inputs\": [\"sc0\", \"mask\"], \"outputs\": [\"sc\"]},\n"
                     "  {\"name\": \"sm\", \"op\": \"Softmax\", \"inputs\": [\"sc\"], \"outputs\": [\"p0\"], "
                     "\"attributes\": {\"axis\": {\"int\": -1}}},\n"
                     "  {\"name\": \"dp\", \"op\": \"Dropout\", \"inputs\": [\"p0\"], \"outputs\": [\"p\"], "
                     "\"attributes\": {\"ratio\": {\"float\": 0.1}}},\n"
                     "  {\"name\": \"pv\", \"op\": \"MatMul\", \"inputs\": [\"p\", \"v\"], \"outputs\": [\"y\"]}",
                     "sdpa with mask and dropout", 4, 0);
    /* TorchScript with a mask: the scale as Cast(Sqrt(.)), and the softmax
     * guarded by Where(IsNaN(p), 0, p) */
    check_sdpa_fused(SDPA_TORCHSCRIPT_KT
                     "{\"name\": \"sq\", \"op\": \"Sqrt\", \"inputs\": [\"s\"], \"outputs\": [\"s2\"]},\n"
                     "  {\"name\": \"cs\", \"op\": \"Cast\", \"inputs\": [\"s2\"], \"outputs\": [\"s3\"], "
                     "\"attributes\": {\"to\": {\"int\": 1}}},\n"
                     "  {\"name\": \"mq\", \"op\": \"Mul\", \"inputs\": [\"q\", \"s3\"], \"outputs\": [\"qs\"]},\n"
                     "  {\"name\": \"mk\", \"op\": \"Mul\", \"inputs\": [\"kt\", \"s3\"], \"outputs\": [\"ks\"]},\n"
                     "  {\"name\": \"qk\", \"op\": \"MatMul\", \"inputs\": [\"qs\", \"ks\"], \"outputs\": [\"sc0\"]},\n"
                     "  {\"name\": \"am\", \"op\": \"Add\", \"inputs\": [\"sc0\", \"mask\"], \"outputs\": [\"sc\"]},\n"
                     "  {\"name\": \"sm\", \"op\": \"Softmax\", \"inputs\": [\"sc\"], \"outputs\": [\"p0\"], "
                     "\"attributes\": {\"axis\": {\"int\": -1}}},\n"
                     "  {\"name\": \"nan\", \"op\": \"IsNaN\", \"inputs\": [\"p0\"], \"outputs\": [\"bad\"]},\n"
                     "  {\"name\": \"wh\", \"op\": \"Where\", \"inputs\": [\"bad\", \"zero\", \"p0\"], \"outputs\": [\"p\"]},\n"
                     "  {\"name\": \"pv\", \"op\": \"MatMul\", \"inputs\": [\"p\", \"v\"], \"outputs\": [\"y\"]}",
                     "sdpa with a Cast scale and a NaN guard", 6 /* + the Sqrt and Cast of the scale */,
                     512 /* the Sqrt's one-float output: left without a reader, its Cast may run later */);
    /* eager attention: (q @ kT) * s -> Softmax -> @ v. PyTorch keeps the
     * probabilities: not fused */
    const char *what = "eager attention";
    est_graph *g = sdpa_graph(SDPA_TORCHSCRIPT_KT
                              "{\"name\": \"qk\", \"op\": \"MatMul\", \"inputs\": [\"q\", \"kt\"], \"outputs\": [\"sc0\"]},\n"
                              "  {\"name\": \"ms\", \"op\": \"Mul\", \"inputs\": [\"sc0\", \"s\"], \"outputs\": [\"sc\"]},\n"
                              SDPA_TAIL,
                              what);
    if (g) CHECK(est_graph_fused_sequences(g) == 0 && est_graph_node_count(g) == 8, "%s: fused %zu", what,
                 est_graph_fused_sequences(g));
    est_graph_free(g);
    /* only q scaled (nn.MultiheadAttention computing its weights) */
    what = "only q scaled";
    g = sdpa_graph(SDPA_TORCHSCRIPT_KT
                   "{\"name\": \"mq\", \"op\": \"Mul\", \"inputs\": [\"q\", \"s\"], \"outputs\": [\"qs\"]},\n"
                   "  {\"name\": \"qk\", \"op\": \"MatMul\", \"inputs\": [\"qs\", \"kt\"], \"outputs\": [\"sc\"]},\n"
                   SDPA_TAIL,
                   what);
    if (g) CHECK(est_graph_fused_sequences(g) == 0, "%s: fused %zu", what, est_graph_fused_sequences(g));
    est_graph_free(g);
}

/* ---- 9. Split pieces are views ------------------------------------------------------- */

/* x [64, 256] -> MatMul W0 [256, 256] -> h (65536 bytes) -> Split axis 1 ->
 * a, b [64, 128] -> Mul(b, s) (s [128], a parameter: Mul keeps b, the
 * second piece) -> yb; Concat(a, yb) -> y (65536 bytes). */
static void check_split_views(void) {
    const char *what = "split views";
    est_graph *g = load_json(
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"split\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [64, 256]}],\n"
        " \"initializers\": [{\"name\": \"W0\", \"dtype\": \"float32\", \"dims\": [256, 256]},\n"
        "   {\"name\": \"s\", \"dtype\": \"float32\", \"dims\": [128]},\n"
        "   {\"name\": \"halves\", \"dtype\": \"int64\", \"dims\": [2], \"values\": [128, 128]}],\n"
        " \"nodes\": [{\"name\": \"fc\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W0\"], \"outputs\": [\"h\"]},\n"
        "  {\"name\": \"sp\", \"op\": \"Split\", \"inputs\": [\"h\", \"halves\"], \"outputs\": [\"a\", \"b\"],\n"
        "   \"attributes\": {\"axis\": {\"int\": 1}}},\n"
        "  {\"name\": \"mul\", \"op\": \"Mul\", \"inputs\": [\"b\", \"s\"], \"outputs\": [\"yb\"]},\n"
        "  {\"name\": \"cat\", \"op\": \"Concat\", \"inputs\": [\"a\", \"yb\"], \"outputs\": [\"y\"],\n"
        "   \"attributes\": {\"axis\": {\"int\": 1}}}],\n"
        " \"outputs\": [\"y\"]}\n",
        what);
    est_report *r = run(g, EST_MODE_TRAIN, 0);
    if (r) {
        /* Mul keeps b, a view of h: all of h (65536) stays, not half of
         * it; yb goes after the Concat; y is the output */
        CHECK(est_report_totals(r)->activations_bytes == 65536 + 65536,
              "%s: activations_bytes %llu, expected h + y = 131072", what,
              U(est_report_totals(r)->activations_bytes));
        const est_layer *sp = layer_named(r, "sp", what);
        if (sp) CHECK(sp->saved_bytes == 0, "%s: Split saves %llu", what, U(sp->saved_bytes));
    }
    est_report_free(r);
    est_graph_free(g);
}

/* ---- 12. SplitToSequence and SequenceAt become Slice views ------------------------ */

/* x [64, 256] -> MatMul W0 -> h [64, 256] -> SplitToSequence(h, SPLIT, axis
 * 1) -> items 0 and LAST (an index initializer and a Constant node) -> Mul
 * (LAST item, s [64]) -> Concat(item 0, .) -> y [64, 160]. */
static est_graph *split_sequence_graph(const char *split, int64_t last, const char *what) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"seq\", \"opset_import\": {\"\": 18},\n"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [64, 256]}],\n"
             " \"initializers\": [{\"name\": \"W0\", \"dtype\": \"float32\", \"dims\": [256, 256]},\n"
             "   {\"name\": \"s\", \"dtype\": \"float32\", \"dims\": [64]},\n"
             "   {\"name\": \"i0\", \"dtype\": \"int64\", \"dims\": [], \"values\": [0]},\n"
             "   %s],\n"
             " \"nodes\": [{\"name\": \"fc\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W0\"], \"outputs\": [\"h\"]},\n"
             "  {\"name\": \"c_last\", \"op\": \"Constant\", \"inputs\": [], \"outputs\": [\"i_last\"],\n"
             "   \"attributes\": {\"value\": {\"tensor\": {\"dtype\": \"int64\", \"dims\": [], \"values\": [%lld]}}}},\n"
             "  {\"name\": \"split\", \"op\": \"SplitToSequence\", \"inputs\": [\"h\", \"sizes\"], \"outputs\": [\"seq\"],\n"
             "   \"attributes\": {\"axis\": {\"int\": 1}}},\n"
             "  {\"name\": \"at0\", \"op\": \"SequenceAt\", \"inputs\": [\"seq\", \"i0\"], \"outputs\": [\"a\"]},\n"
             "  {\"name\": \"at_last\", \"op\": \"SequenceAt\", \"inputs\": [\"seq\", \"i_last\"], \"outputs\": [\"b\"]},\n"
             "  {\"name\": \"mul\", \"op\": \"Mul\", \"inputs\": [\"b\", \"s\"], \"outputs\": [\"yb\"]},\n"
             "  {\"name\": \"cat\", \"op\": \"Concat\", \"inputs\": [\"a\", \"yb\"], \"outputs\": [\"y\"],\n"
             "   \"attributes\": {\"axis\": {\"int\": 1}}}],\n"
             " \"outputs\": [\"y\"]}\n",
             split, (long long)last);
    return load_json(text, what);
}

static void check_split_to_sequence(void) {
    static const struct {
        const char *what, *split;
        int64_t last;
    } lowered[] = {
        {"split to sequence, chunk size 96", "{\"name\": \"sizes\", \"dtype\": \"int64\", \"dims\": [], \"values\": [96]}", 2},
        {"split to sequence, sizes, item -1",
         "{\"name\": \"sizes\", \"dtype\": \"int64\", \"dims\": [3], \"values\": [96, 96, 64]}", -1},
    };
    for (size_t c = 0; c < sizeof lowered / sizeof *lowered; c++) {
        const char *what = lowered[c].what;
        est_graph *g = split_sequence_graph(lowered[c].split, lowered[c].last, what);
        /* fc, c_last, at0, at_last, mul, cat: the SplitToSequence is gone */
        if (g) CHECK(est_graph_node_count(g) == 6, "%s: %zu nodes, expected 6", what, est_graph_node_count(g));
        est_report *r = run(g, EST_MODE_TRAIN, 0);
        if (r) {
            const est_layer *at = layer_named(r, "at_last", what);
            /* the last chunk is columns 192..255: [64, 64] */
            if (at) {
                CHECK(strcmp(at->op, "Slice") == 0, "%s: at_last is %s, expected Slice", what, at->op);
                CHECK(at->n_outputs == 1 && at->outputs[0].elements == 64 * 64, "%s: at_last writes %llu elements",
                      what, U(at->n_outputs ? at->outputs[0].elements : 0));
            }
            /* Mul keeps b, a view of h: all of h (65536 bytes) stays; y is
             * [64, 96 + 64] = 40960 bytes */
            CHECK(est_report_totals(r)->activations_bytes == 65536 + 40960,
                  "%s: activations_bytes %llu, expected h + y = 106496", what,
                  U(est_report_totals(r)->activations_bytes));
        }
        est_report_free(r);
        est_graph_free(g);
    }
    /* a chunk size read from the end needs the chunk count: left as it is */
    const char *what = "split to sequence, chunk size, item -1";
    est_graph *g = split_sequence_graph(
        "{\"name\": \"sizes\", \"dtype\": \"int64\", \"dims\": [], \"values\": [96]}", -1, what);
    if (g) {
        est_options opt;
        est_options_init(&opt);
        est_report *r = NULL;
        est_error err;
        CHECK(est_estimate(g, &opt, &r, &err) != EST_OK && strstr(err.message, "'SplitToSequence'") &&
                  strstr(err.message, "not supported"),
              "%s: expected an unsupported-op error, got '%s'", what, r ? "a report" : err.message);
        est_report_free(r);
    }
    est_graph_free(g);
}

/* ---- 13. split-K follows the device's SMs ------------------------------------------- */

static void check_split_k_device(void) {
    const char *what = "split-K by device";
    est_graph *g = load_json(
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"conv\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [8, 64, 56, 56]}],\n"
        " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [64, 64, 3, 3]}],\n"
        " \"nodes\": [{\"name\": \"conv\", \"op\": \"Conv\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"y\"],\n"
        "   \"attributes\": {\"pads\": {\"ints\": [1, 1, 1, 1]}}}],\n"
        " \"outputs\": [\"y\"]}\n",
        what);
    static const struct {
        const char *device;
        uint64_t partials;
    } cases[] = {{NULL, 26}, {"H100-80GB", 26}, {"T4", 8}, {"A100-40GB", 21}};
    const uint64_t act = 8ull * 64 * 56 * 56 * 4, weight = 64ull * 64 * 9 * 4;
    for (size_t c = 0; g && c < sizeof cases / sizeof *cases; c++) {
        est_options opt;
        est_options_init(&opt);
        opt.optimizer = EST_OPT_SGD;
        opt.device = cases[c].device ? est_device_find(cases[c].device) : NULL;
        CHECK(!cases[c].device || opt.device, "%s: no device %s", what, cases[c].device);
        est_error err;
        est_report *r = NULL;
        if (est_estimate(g, &opt, &r, &err) != EST_OK) {
            CHECK(false, "%s: %s", what, err.message);
            continue;
        }
        const est_layer *L = layer_named(r, "conv", what);
        uint64_t want = 2 * act + cases[c].partials * weight;
        if (L)
            CHECK(L->temp_bytes == want, "%s on %s: temp %llu, expected in + out + %llu weights = %llu", what,
                  cases[c].device ? cases[c].device : "the default", U(L->temp_bytes), U(cases[c].partials), U(want));
        est_report_free(r);
    }
    est_graph_free(g);
    CHECK(est_device_find("h100 nvl") == est_device_find("H100-94GB") && est_device_find("nope") == NULL,
          "device names");
}

/* ---- 10. a linear layer's bias add is in place ----------------------------------- */

/* x [64, 256] -> MatMul W [256, 512] -> mm (131072 bytes) -> Add(mm, ADDEND)
 * -> y -> ReduceSum -> s (one float). EXTRA: more nodes. */
static est_graph *bias_add_graph(const char *addend, const char *extra, const char *what) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"linear\", \"opset_import\": {\"\": 17},\n"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [64, 256]}],\n"
             " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [256, 512]},\n"
             "   {\"name\": \"b\", \"dtype\": \"float32\", \"dims\": [512]}],\n"
             " \"nodes\": [{\"name\": \"mm\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"p\"]},\n"
             "  %s"
             "  {\"name\": \"add\", \"op\": \"Add\", \"inputs\": [\"p\", \"%s\"], \"outputs\": [\"y\"]},\n"
             "  {\"name\": \"sum\", \"op\": \"ReduceSum\", \"inputs\": [\"y\"], \"outputs\": [\"s\"],\n"
             "   \"attributes\": {\"keepdims\": {\"int\": 0}}}],\n"
             " \"outputs\": [\"s\"%s]}\n",
             extra, addend, strstr(extra, "\"q\"") ? ", \"q\"" : "");
    return load_json(text, what);
}

static void check_bias_add_in_place(void) {
    const uint64_t x = 64 * 256 * 4, W = 256 * 512 * 4, b = 512 * 4, p = 64 * 512 * 4, s = 512;
    static const struct {
        const char *what, *addend, *extra;
        bool in_place;
    } cases[] = {
        {"bias add", "b", "", true},
        /* the product read twice: PyTorch would keep it; the sum is new */
        {"bias add, product read twice", "b",
         "{\"name\": \"neg\", \"op\": \"Neg\", \"inputs\": [\"p\"], \"outputs\": [\"q\"]},\n", false},
        /* an activation added: a residual, not a bias */
        {"residual add", "r", "{\"name\": \"relu\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"r0\"]},\n"
         "  {\"name\": \"cat\", \"op\": \"Concat\", \"inputs\": [\"r0\", \"r0\"], \"outputs\": [\"r\"], "
         "\"attributes\": {\"axis\": {\"int\": 1}}},\n", false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        est_graph *g = bias_add_graph(cases[c].addend, cases[c].extra, cases[c].what);
        est_report *r = run(g, EST_MODE_INFER, 0);
        if (r && cases[c].in_place)
            /* weights, x, the product (the sum is its storage), then s */
            CHECK(est_report_peak(r)->bytes == W + b + x + p + s, "%s: inference peak %llu, expected %llu",
                  cases[c].what, U(est_report_peak(r)->bytes), U(W + b + x + p + s));
        else if (r)
            /* at the Add the product and the sum both live */
            CHECK(est_report_peak(r)->bytes >= W + b + x + 2 * p, "%s: inference peak %llu, expected >= %llu",
                  cases[c].what, U(est_report_peak(r)->bytes), U(W + b + x + 2 * p));
        est_report_free(r);
        est_graph_free(g);
    }
}

/* ---- 11. a Dropout that drops nothing returns its input ---------------------------- */

static void check_dropout_identity(void) {
    const uint64_t x = 64 * 256 * 4, W = 256 * 512 * 4, h = 64 * 512 * 4, s = 512;
    static const struct { const char *ratio; bool same; } cases[] = {{"0.0", true}, {"0.1", false}};
    for (int c = 0; c < 2; c++) {
        char text[4096], what[64];
        snprintf(what, sizeof what, "dropout ratio %s", cases[c].ratio);
        snprintf(text, sizeof text,
                 "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"drop\", \"opset_import\": {\"\": 17},\n"
                 " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [64, 256]}],\n"
                 " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [256, 512]},\n"
                 "   {\"name\": \"ratio\", \"dtype\": \"float32\", \"dims\": [], \"values\": [%s]},\n"
                 "   {\"name\": \"train\", \"dtype\": \"bool\", \"dims\": [], \"values\": [1]}],\n"
                 " \"nodes\": [{\"name\": \"mm\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"h\"]},\n"
                 "  {\"name\": \"drop\", \"op\": \"Dropout\", \"inputs\": [\"h\", \"ratio\", \"train\"], \"outputs\": [\"d\"]},\n"
                 "  {\"name\": \"sum\", \"op\": \"ReduceSum\", \"inputs\": [\"d\"], \"outputs\": [\"s\"],\n"
                 "   \"attributes\": {\"keepdims\": {\"int\": 0}}}],\n"
                 " \"outputs\": [\"s\"]}\n",
                 cases[c].ratio);
        est_graph *g = load_json(text, what);
        /* inference (model.eval()) drops nothing whatever the ratio: x, W,
         * h and then s */
        est_report *r = run(g, EST_MODE_INFER, 0);
        if (r)
            CHECK(est_report_peak(r)->bytes == W + x + h + s, "%s: inference peak %llu, expected %llu", what,
                  U(est_report_peak(r)->bytes), U(W + x + h + s));
        est_report_free(r);
        /* a training step: ratio 0 keeps no mask, 0.1 a bool mask of h's
         * 64 x 512 elements */
        r = run(g, EST_MODE_TRAIN, 0);
        const est_layer *drop = r ? est_report_layer(r, 1) : NULL;
        if (drop)
            CHECK(drop->saved_bytes == (cases[c].same ? 0 : 64 * 512), "%s: training Dropout saves %llu, expected %u",
                  what, U(drop->saved_bytes), cases[c].same ? 0u : 64u * 512u);
        est_report_free(r);
        est_graph_free(g);
    }
}

/* A dynamo export folds the rotary cos/sin tables (from a buffer) into
 * initializers that multiply activations (tests/data/make_rotary_block.py):
 * they are constants, so the Mul keeps nothing of q for them; the norm weight
 * and the per-channel scale viewed as [1, 1, D] stay parameters, and the Mul
 * by the scale keeps its activation for the scale's gradient. */
/* SDPA with a scale of 1, as the dynamo exporter decomposes it: no scaling
 * Mul, the Softmax and both MatMuls from the aten.scaled_dot_product_attention
 * call (tests/data/make_sdpa_bias.py). Both calls fold back into Attention
 * (fuse.c, match_sdpa). The first has a trainable bias for its mask, which
 * the FX call names as a parameter, and a dropout_p of 0.1 the file drops:
 * SDPA's math kernel keeps the scaled q, k and v (Q each), the
 * probabilities, the dropped ones and the bool mask (2 P + P / 4), and its
 * backward takes 3 P. The second's mask, zeros filled by a Where (a table
 * the exporter folded, no parameter), takes no gradient: the efficient
 * kernel, no workspace. Parameters: two Linear(128, 384) and the bias. */
static void check_sdpa_bias(void) {
    const char *what = "sdpa bias (dynamo export)";
    const uint64_t Q = 2 * 4 * 64 * 32 * 4, P = 2 * 4 * 64 * 64 * 4;
    est_graph *g = load_export(TEST_DATA_DIR, "sdpa_bias.dynamo.onnx");
    est_report *r = run(g, EST_MODE_TRAIN, 2);
    if (r) {
        uint64_t params = 2 * (128 * 384 + 384) + 4 * 64 * 64;
        CHECK(est_report_totals(r)->param_count == params, "%s: %llu parameters, expected %llu", what,
              U(est_report_totals(r)->param_count), U(params));
        const est_layer *a = layer_named(r, "node_scaled_dot_product_attention", what);
        const est_layer *b = layer_named(r, "node_scaled_dot_product_attention_1", what);
        if (a)
            CHECK(strcmp(a->op, "Attention") == 0 && a->saved_bytes == 3 * Q + 2 * P + P / 4 && a->temp_bytes == 3 * P,
                  "%s: first call %s saves %llu (expected %llu), temp %llu (expected %llu)", what, a->op,
                  U(a->saved_bytes), U(3 * Q + 2 * P + P / 4), U(a->temp_bytes), U(3 * P));
        if (b)
            CHECK(strcmp(b->op, "Attention") == 0 && b->temp_bytes == 0, "%s: second call %s, temp %llu (expected 0)",
                  what, b->op, U(b->temp_bytes));
    }
    est_report_free(r);
    est_graph_free(g);
}

static void check_folded_tables(void) {
    const char *what = "rotary block (dynamo export)";
    est_graph *g = load_export(TEST_DATA_DIR, "rotary_block.dynamo.onnx");
    est_report *r = run(g, EST_MODE_TRAIN, 4);
    if (r) {
        enum { D = 64, S = 16, B = 4 };
        uint64_t want = D + D + D * D + D + D * D; /* norm, q.bias, q.weight, scale, out.weight */
        CHECK(est_report_totals(r)->param_count == want, "%s: %llu parameters, expected %llu", what,
              U(est_report_totals(r)->param_count), U(want));
        const est_layer *cos = layer_named(r, "node_mul_25", what), *scale = layer_named(r, "node_mul_33", what);
        if (cos) CHECK(cos->saved_bytes == 0, "%s: q * cos saves %llu, expected 0", what, U(cos->saved_bytes));
        if (scale)
            CHECK(scale->saved_bytes == R(B * S * D * 4), "%s: h * scale saves %llu, expected %llu", what,
                  U(scale->saved_bytes), U(R(B * S * D * 4)));
    }
    est_report_free(r);
    est_graph_free(g);
}

/* The TorchScript exporter's GroupNorm (fuse.c, match_group_norm): Relu on
 * x [4, 64, 8, 8], then Reshape to [0, 2, -1], InstanceNormalization with
 * ones and zeros, Reshape back, Mul by Unsqueeze(w), Add Unsqueeze(b). One
 * GroupNormalization node remains, on the [64] parameters; it saves its
 * input (4 x 64 x 8 x 8 x 4 = 65536) and two float32 statistics per
 * (sample, group), each 32 bytes rounded to 512: 66560. With a scale that is
 * not all ones the chain is a different computation and stays. */
static const char *group_norm_graph(const char *ones) {
    static char doc[4096];
    snprintf(doc, sizeof doc,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"gn\", \"opset_import\": {\"\": 17},\n"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 64, 8, 8]}],\n"
             " \"initializers\": [\n"
             "  {\"name\": \"groups_shape\", \"dtype\": \"int64\", \"dims\": [3], \"values\": [0, 2, -1]},\n"
             "  {\"name\": \"ones\", \"dtype\": \"float32\", \"dims\": [2], \"values\": [%s]},\n"
             "  {\"name\": \"zeros\", \"dtype\": \"float32\", \"dims\": [2], \"values\": [0, 0]},\n"
             "  {\"name\": \"axes\", \"dtype\": \"int64\", \"dims\": [2], \"values\": [1, 2]},\n"
             "  {\"name\": \"gn.weight\", \"dtype\": \"float32\", \"dims\": [64]},\n"
             "  {\"name\": \"gn.bias\", \"dtype\": \"float32\", \"dims\": [64]}],\n"
             " \"nodes\": [\n"
             "  {\"name\": \"relu\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"a\"]},\n"
             "  {\"name\": \"r1\", \"op\": \"Reshape\", \"inputs\": [\"a\", \"groups_shape\"], \"outputs\": [\"r\"]},\n"
             "  {\"name\": \"in\", \"op\": \"InstanceNormalization\", \"inputs\": [\"r\", \"ones\", \"zeros\"],\n"
             "   \"outputs\": [\"n\"], \"attributes\": {\"epsilon\": {\"float\": 1e-05}}},\n"
             "  {\"name\": \"shape\", \"op\": \"Shape\", \"inputs\": [\"a\"], \"outputs\": [\"s\"]},\n"
             "  {\"name\": \"r2\", \"op\": \"Reshape\", \"inputs\": [\"n\", \"s\"], \"outputs\": [\"nb\"]},\n"
             "  {\"name\": \"uw\", \"op\": \"Unsqueeze\", \"inputs\": [\"gn.weight\", \"axes\"], \"outputs\": [\"wu\"]},\n"
             "  {\"name\": \"mul\", \"op\": \"Mul\", \"inputs\": [\"nb\", \"wu\"], \"outputs\": [\"m\"]},\n"
             "  {\"name\": \"ub\", \"op\": \"Unsqueeze\", \"inputs\": [\"gn.bias\", \"axes\"], \"outputs\": [\"bu\"]},\n"
             "  {\"name\": \"add\", \"op\": \"Add\", \"inputs\": [\"m\", \"bu\"], \"outputs\": [\"y\"]},\n"
             "  {\"name\": \"out\", \"op\": \"Relu\", \"inputs\": [\"y\"], \"outputs\": [\"z\"]}],\n"
             " \"outputs\": [\"z\"]}\n",
             ones);
    return doc;
}

/* Two GroupNorms in a row whose weights and biases the dynamo exporter
 * folded to [64, 1, 1] and its optimizer merged into one initializer each,
 * as for poolformer's equal norm weights: both fold back, each with a weight
 * and a bias of its own (256 parameters, as the model had). */
static void check_group_norm_shared_weights(void) {
    static char doc[4096];
    int len = snprintf(doc, sizeof doc,
                       "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"gn2\", \"opset_import\": {\"\": 17},\n"
                       " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 64, 8, 8]}],\n"
                       " \"initializers\": [\n"
                       "  {\"name\": \"groups_shape\", \"dtype\": \"int64\", \"dims\": [3], \"values\": [0, 2, -1]},\n"
                       "  {\"name\": \"ones\", \"dtype\": \"float32\", \"dims\": [2], \"values\": [1, 1]},\n"
                       "  {\"name\": \"zeros\", \"dtype\": \"float32\", \"dims\": [2], \"values\": [0, 0]},\n"
                       "  {\"name\": \"val_22\", \"dtype\": \"float32\", \"dims\": [64, 1, 1]},\n"
                       "  {\"name\": \"val_24\", \"dtype\": \"float32\", \"dims\": [64, 1, 1]}],\n"
                       " \"nodes\": [\n"
                       "  {\"name\": \"relu\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"y0\"]}");
    for (int k = 1; k <= 2; k++)
        len += snprintf(doc + len, sizeof doc - (size_t)len,
                        ",\n  {\"name\": \"r1_%d\", \"op\": \"Reshape\", \"inputs\": [\"y%d\", \"groups_shape\"], \"outputs\": [\"r_%d\"]},\n"
                        "  {\"name\": \"in%d\", \"op\": \"InstanceNormalization\", \"inputs\": [\"r_%d\", \"ones\", \"zeros\"],\n"
                        "   \"outputs\": [\"n_%d\"], \"attributes\": {\"epsilon\": {\"float\": 1e-05}}},\n"
                        "  {\"name\": \"shape_%d\", \"op\": \"Shape\", \"inputs\": [\"y%d\"], \"outputs\": [\"s_%d\"]},\n"
                        "  {\"name\": \"r2_%d\", \"op\": \"Reshape\", \"inputs\": [\"n_%d\", \"s_%d\"], \"outputs\": [\"nb_%d\"]},\n"
                        "  {\"name\": \"mul_%d\", \"op\": \"Mul\", \"inputs\": [\"nb_%d\", \"val_22\"], \"outputs\": [\"m_%d\"]},\n"
                        "  {\"name\": \"add_%d\", \"op\": \"Add\", \"inputs\": [\"m_%d\", \"val_24\"], \"outputs\": [\"y%d\"]}",
                        k, k - 1, k, k, k, k, k, k - 1, k, k, k, k, k, k, k, k, k, k, k);
    snprintf(doc + len, sizeof doc - (size_t)len, "],\n \"outputs\": [\"y2\"]}\n");
    est_graph *g = load_json(doc, "two group norms, merged weights");
    est_report *r = run(g, EST_MODE_TRAIN, 4);
    if (r) {
        for (int k = 1; k <= 2; k++) {
            char name[8];
            snprintf(name, sizeof name, "in%d", k);
            const est_layer *gn = layer_named(r, name, "two group norms, merged weights");
            CHECK(gn && strcmp(gn->op, "GroupNormalization") == 0, "merged weights: node '%s' is %s", name,
                  gn ? gn->op : "?");
        }
        CHECK(est_report_totals(r)->param_count == 256, "merged weights: %llu parameters, expected 256",
              U(est_report_totals(r)->param_count));
    }
    est_report_free(r);
    est_graph_free(g);
}

static void check_group_norm(void) {
    est_graph *g = load_json(group_norm_graph("1, 1"), "group norm");
    est_report *r = run(g, EST_MODE_TRAIN, 4);
    if (r) {
        const est_layer *gn = layer_named(r, "in", "group norm");
        CHECK(gn && strcmp(gn->op, "GroupNormalization") == 0, "group norm: node 'in' is %s", gn ? gn->op : "?");
        CHECK(gn && gn->saved_bytes == 65536 + 2 * 512, "group norm: saves %llu, expected 66560",
              U(gn ? gn->saved_bytes : 0));
        CHECK(gn && gn->n_outputs == 1 && strcmp(gn->outputs[0].name, "y") == 0, "group norm: writes %s",
              gn && gn->n_outputs ? gn->outputs[0].name : "?");
        bool chain_left = false;
        for (size_t i = 0; i < est_report_layer_count(r); i++) {
            const char *op = est_report_layer(r, i)->op;
            chain_left |= !strcmp(op, "Mul") || !strcmp(op, "Add") || !strcmp(op, "Unsqueeze") ||
                          !strcmp(op, "InstanceNormalization");
        }
        CHECK(!chain_left, "group norm: the exporter's chain is left");
        CHECK(est_report_totals(r)->param_count == 128, "group norm: %llu parameters, expected 128",
              U(est_report_totals(r)->param_count));
    }
    est_report_free(r);
    est_graph_free(g);
    /* the weight as the dynamo exporter folds it ([64, 1, 1], read by the
     * Mul), the bias's [64, 1, 1] also a graph output: no fusion, and the
     * weight keeps its shape (declared [64], the Mul would not broadcast) */
    {
        char doc[4096];
        snprintf(doc, sizeof doc, "%s", group_norm_graph("1, 1"));
        const char *from[] = {"{\"name\": \"gn.weight\", \"dtype\": \"float32\", \"dims\": [64]}",
                              "[\"gn.weight\", \"axes\"]", "[\"nb\", \"wu\"]", "\"outputs\": [\"z\"]}\n"};
        const char *to[] = {"{\"name\": \"gn.weight\", \"dtype\": \"float32\", \"dims\": [64, 1, 1]}",
                            "[\"gn.bias\", \"axes\"]", "[\"nb\", \"gn.weight\"]", "\"outputs\": [\"z\", \"bu\"]}\n"};
        bool edited = true;
        for (int k = 0; k < 4; k++) {
            char *at = strstr(doc, from[k]);
            if (!at) {
                edited = false;
                break;
            }
            char rest[4096];
            snprintf(rest, sizeof rest, "%s", at + strlen(from[k]));
            snprintf(at, sizeof doc - (size_t)(at - doc), "%s%s", to[k], rest);
        }
        CHECK(edited, "group norm (unfused): the graph could not be edited");
        est_graph *g2 = edited ? load_json(doc, "group norm, bias read twice") : NULL;
        est_report *r2 = run(g2, EST_MODE_TRAIN, 4);
        const est_layer *in2 = r2 ? layer_named(r2, "in", "group norm, bias read twice") : NULL;
        CHECK(in2 && strcmp(in2->op, "InstanceNormalization") == 0, "group norm, bias read twice: node 'in' is %s",
              in2 ? in2->op : "?");
        est_report_free(r2);
        est_graph_free(g2);
    }
    g = load_json(group_norm_graph("1, 2"), "scaled instance norm");
    r = run(g, EST_MODE_TRAIN, 4);
    const est_layer *in = r ? layer_named(r, "in", "scaled instance norm") : NULL;
    CHECK(in && strcmp(in->op, "InstanceNormalization") == 0, "scaled instance norm: node 'in' is %s",
          in ? in->op : "?");
    est_report_free(r);
    est_graph_free(g);
}

/* A Sum of nine constant shapes folds like a Sum of two (layers/math.c keeps
 * the strides of more than eight inputs on the heap): [0, 4] + 8 x [0, 1]
 * = [0, 12], which Reshape needs known. */
static void check_sum_of_many_folds(void) {
    char inits[2048] = "", names[512] = "";
    size_t ui = 0, un = 0;
    for (int k = 0; k < 9; k++) {
        ui += (size_t)snprintf(inits + ui, sizeof inits - ui,
                               "%s{\"name\": \"c%d\", \"dtype\": \"int64\", \"dims\": [2], \"values\": [0, %d]}",
                               k ? ", " : "", k, k ? 1 : 4);
        un += (size_t)snprintf(names + un, sizeof names - un, "%s\"c%d\"", k ? ", " : "", k);
    }
    char doc[4096];
    snprintf(doc, sizeof doc,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"sum9\", \"opset_import\": {\"\": 17},\n"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 3, 4]}],\n"
             " \"initializers\": [%s],\n"
             " \"nodes\": [{\"name\": \"sum\", \"op\": \"Sum\", \"inputs\": [%s], \"outputs\": [\"shape\"]},\n"
             "  {\"name\": \"reshape\", \"op\": \"Reshape\", \"inputs\": [\"x\", \"shape\"], \"outputs\": [\"y\"]}],\n"
             " \"outputs\": [\"y\"]}\n",
             inits, names);
    est_graph *g = load_json(doc, "sum of nine");
    est_report *r = run(g, EST_MODE_INFER, 5);
    const est_layer *L = r ? layer_named(r, "reshape", "sum of nine") : NULL;
    CHECK(L && L->n_outputs == 1 && L->outputs[0].rank == 2 && L->outputs[0].shape[0] == 5 &&
              L->outputs[0].shape[1] == 12,
          "sum of nine: the Reshape's output is not [5, 12]");
    est_report_free(r);
    est_graph_free(g);
}

/* g's peak with PyTorch's kernels (peak[0]) and with verify's (peak[1]); 0
 * where the estimate fails, which is a failed check. */
static void peaks_by_kernels_amp(const est_graph *g, est_mode mode, est_optimizer optimizer, est_amp amp,
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

static void peaks_by_kernels(const est_graph *g, est_mode mode, est_optimizer optimizer, const char *what,
                             uint64_t peak[2]) {
    peaks_by_kernels_amp(g, mode, optimizer, EST_AMP_NONE, what, peak);
}

/* Under --amp bf16, memest verify's executor copies every floating input to
 * its op's dtype; PyTorch's kernels read a promoting op's float32 bias and
 * Softmax's low input as they are (exec_amp.c, lifetimes.c verify_casts).
 * x [1024, 256] f32 (X = 1 MiB), w [256, 256] (W = 256 KiB), b [256]
 * (1 KiB); a = x w (low, X/2), y = a + b (low), z = softmax(y) (float32,
 * X), inference. Both estimates hold x, w, b and w's cached low copy
 * (W/2) throughout. At the Softmax PyTorch's holds y and z; verify's adds
 * y's float32 copy (X) and b's cached low copy (512 bytes). */
static void check_amp_verify_casts(void) {
    static const char text[] =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"amp\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [1024, 256]}],\n"
        " \"initializers\": [{\"name\": \"w\", \"dtype\": \"float32\", \"dims\": [256, 256]},\n"
        "                  {\"name\": \"b\", \"dtype\": \"float32\", \"dims\": [256]}],\n"
        " \"nodes\": [{\"name\": \"mm\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"a\"]},\n"
        "           {\"name\": \"add\", \"op\": \"Add\", \"inputs\": [\"a\", \"b\"], \"outputs\": [\"y\"]},\n"
        "           {\"name\": \"sm\", \"op\": \"Softmax\", \"inputs\": [\"y\"], \"outputs\": [\"z\"]}],\n"
        " \"outputs\": [\"z\"]}\n";
    est_graph *g = load_json(text, "amp");
    const uint64_t X = 1u << 20, W = 256u << 10, B = 1024;
    const uint64_t pytorch = X + W + B + W / 2 + X / 2 + X;
    uint64_t peak[2];
    peaks_by_kernels_amp(g, EST_MODE_INFER, EST_OPT_ADAM, EST_AMP_BF16, "amp", peak);
    CHECK(peak[0] == pytorch, "--amp bf16, PyTorch kernels: peak %llu, expected %llu", U(peak[0]), U(pytorch));
    CHECK(peak[1] == pytorch + X + 512, "--amp bf16, verify kernels: peak %llu, expected %llu", U(peak[1]),
          U(pytorch + X + 512));
    /* the live list gives a copy the dtype it was cast to */
    est_options opt;
    est_options_init(&opt);
    opt.mode = EST_MODE_INFER;
    opt.amp = EST_AMP_BF16;
    opt.kernels = EST_KERNELS_VERIFY;
    opt.timeline = 1;
    est_report *r = NULL;
    est_error err;
    int copies = 0;
    if (g && est_estimate(g, &opt, &r, &err) == EST_OK)
        for (size_t i = 0; i < est_report_live_count(r); i++) {
            const est_live *l = est_report_live(r, i);
            if (strcmp(l->what, "autocast copy") != 0) continue;
            copies++;
            est_dtype want = strcmp(l->tensor, "y") == 0 ? EST_DT_FLOAT : EST_DT_BFLOAT16;
            CHECK(l->dtype == want, "autocast copy of %s: dtype %s, expected %s", l->tensor, est_dtype_name(l->dtype),
                  est_dtype_name(want));
        }
    CHECK(copies == 3, "autocast copies live at the peak: %d, expected 3 (w, b, y)", copies);
    est_report_free(r);
    est_graph_free(g);
}

/* memest verify's executor uploads a constant initializer of more than
 * 4,096 elements to the device at setup (verify/vx.h, VX_HOST_MAX), where
 * PyTorch's step has a Python value or a tensor made per use: dynamo
 * exports fold RoPE's tables so. x [16384, 4] float32 (256 KiB), indices
 * [8192] int64 (64 KiB) with values, y = Gather(x, indices) [8192, 4]
 * (128 KiB), inference: the PyTorch estimate holds x and y, the verify one
 * the indices too, under "other". 4,096 indices stay on the host. */
static void check_verify_uploads_constants(void) {
    for (int n = 4096; n <= 8192; n += 4096) {
        size_t cap = 64 + (size_t)n * 8 + 1024;
        char *text = malloc(cap);
        CHECK(text != NULL, "out of memory");
        if (!text) return;
        int len = snprintf(text, cap,
                           "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"gather\", \"opset_import\": {\"\": 17},\n"
                           " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [16384, 4]}],\n"
                           " \"initializers\": [{\"name\": \"idx\", \"dtype\": \"int64\", \"dims\": [%d], \"values\": [",
                           n);
        for (int i = 0; i < n; i++) len += snprintf(text + len, cap - (size_t)len, i ? ",%d" : "%d", i);
        snprintf(text + len, cap - (size_t)len,
                 "]}],\n \"nodes\": [{\"name\": \"g\", \"op\": \"Gather\", \"inputs\": [\"x\", \"idx\"], \"outputs\": [\"y\"]}],\n"
                 " \"outputs\": [\"y\"]}\n");
        est_graph *g = load_json(text, "gather");
        free(text);
        const uint64_t X = 256u << 10, Y = (uint64_t)n * 16, I = (uint64_t)n * 8;
        uint64_t peak[2];
        peaks_by_kernels(g, EST_MODE_INFER, EST_OPT_ADAM, "gather", peak);
        CHECK(peak[0] == X + Y, "%d constant indices, PyTorch kernels: peak %llu, expected %llu", n, U(peak[0]), U(X + Y));
        uint64_t verify = X + Y + (n > 4096 ? I : 0);
        CHECK(peak[1] == verify, "%d constant indices, verify kernels: peak %llu, expected %llu", n, U(peak[1]), U(verify));
        est_graph_free(g);
    }
}

/* memest verify's executor holds every integer tensor as int64, 8-bit
 * quantized operands included (verify/ops_quant.cu). MatMulInteger of A and
 * B, uint8 [256, 256] (64 KiB each), to Y int32 (256 KiB), inference: the
 * PyTorch estimate holds 384 KiB, the verify one 3 x 512 KiB. */
static void check_verify_integers_int64(void) {
    static const char text[] =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"qmm\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"a\", \"dtype\": \"uint8\", \"dims\": [256, 256]},\n"
        "            {\"name\": \"b\", \"dtype\": \"uint8\", \"dims\": [256, 256]}],\n"
        " \"nodes\": [{\"name\": \"mm\", \"op\": \"MatMulInteger\", \"inputs\": [\"a\", \"b\"], \"outputs\": [\"y\"]}],\n"
        " \"outputs\": [\"y\"]}\n";
    est_graph *g = load_json(text, "qmm");
    uint64_t peak[2];
    peaks_by_kernels(g, EST_MODE_INFER, EST_OPT_ADAM, "qmm", peak);
    CHECK(peak[0] == 384u << 10, "MatMulInteger, PyTorch kernels: peak %llu, expected %llu", U(peak[0]), U(384u << 10));
    CHECK(peak[1] == 3u * (512u << 10), "MatMulInteger, verify kernels: peak %llu, expected %llu", U(peak[1]),
          U(3u * (512u << 10)));
    est_graph_free(g);
}

/* A Cast to the dtype its input has already (TorchScript exports T5's
 * hidden_states.to(torch.float32) so): the PyTorch kernels' estimate
 * counts a new tensor, as before; memest verify's executor returns the
 * input itself, so under EST_KERNELS_VERIFY the output shares its storage. x [1024, 1024] float32 -> Cast(to float) ->
 * Relu, inference: PyTorch kernels x + the cast + Relu's output = 12 MiB;
 * verify kernels x + Relu's output = 8 MiB. */
static void check_cast_same_dtype_verify(void) {
    static const char text[] =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"cast\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [1024, 1024]}],\n"
        " \"nodes\": [{\"name\": \"cast\", \"op\": \"Cast\", \"inputs\": [\"x\"], \"outputs\": [\"y\"],\n"
        "              \"attributes\": {\"to\": {\"int\": 1}}},\n"
        "             {\"name\": \"relu\", \"op\": \"Relu\", \"inputs\": [\"y\"], \"outputs\": [\"z\"]}],\n"
        " \"outputs\": [\"z\"]}\n";
    est_graph *g = load_json(text, "cast");
    uint64_t peak[2];
    peaks_by_kernels(g, EST_MODE_INFER, EST_OPT_ADAM, "cast", peak);
    CHECK(peak[0] == 12u << 20, "Cast float -> float, PyTorch kernels: peak %llu, expected %llu", U(peak[0]), U(12u << 20));
    CHECK(peak[1] == 8u << 20, "Cast float -> float, verify kernels: peak %llu, expected %llu", U(peak[1]), U(8u << 20));
    est_graph_free(g);
}

/* A residual Add's backward hands its incoming gradient to both operands
 * as one tensor, in PyTorch (bench/accuracy/probe_residual.py) and in
 * verify's executor; the --kernels verify estimate follows it, the PyTorch
 * one keeps a tensor per operand (simulate.c, passes_gradient). x [4096,
 * 256] (A = 4 MiB), a = x w1, f = a w2, y = f + a, z = y w3 (w1, w2 of W =
 * 256 KiB, w3 [256, 16]: 16 KiB, z 256 KiB), SGD. At mm2's backward the
 * PyTorch estimate holds x, a (saved), the gradients of a and of f (two
 * blocks), mm2's gradient of a being summed into a's (a transient), the
 * three weights, w3's and w2's gradients, z and the loss. The verify
 * estimate holds a's and f's gradient as one block: A less. */
static void check_add_passes_gradient_verify(void) {
    static const char text[] =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"residual\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [4096, 256]}],\n"
        " \"initializers\": [{\"name\": \"w1\", \"dtype\": \"float32\", \"dims\": [256, 256]},\n"
        "                  {\"name\": \"w2\", \"dtype\": \"float32\", \"dims\": [256, 256]},\n"
        "                  {\"name\": \"w3\", \"dtype\": \"float32\", \"dims\": [256, 16]}],\n"
        " \"nodes\": [{\"name\": \"mm1\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"w1\"], \"outputs\": [\"a\"]},\n"
        "           {\"name\": \"mm2\", \"op\": \"MatMul\", \"inputs\": [\"a\", \"w2\"], \"outputs\": [\"f\"]},\n"
        "           {\"name\": \"add\", \"op\": \"Add\", \"inputs\": [\"f\", \"a\"], \"outputs\": [\"y\"]},\n"
        "           {\"name\": \"mm3\", \"op\": \"MatMul\", \"inputs\": [\"y\", \"w3\"], \"outputs\": [\"z\"]}],\n"
        " \"outputs\": [\"z\"]}\n";
    est_graph *g = load_json(text, "residual");
    const uint64_t A = 4u << 20, W = 256u << 10, W3 = 16u << 10, Z = 256u << 10;
    const uint64_t pytorch = A + A + 2 * A + A + (2 * W + W3) + (W3 + W) + Z + 512;
    uint64_t peak[2];
    peaks_by_kernels(g, EST_MODE_TRAIN, EST_OPT_SGD, "residual", peak);
    CHECK(peak[0] == pytorch, "residual Add, PyTorch kernels: peak %llu, expected %llu", U(peak[0]), U(pytorch));
    CHECK(peak[1] == pytorch - A, "residual Add, verify kernels: peak %llu, expected %llu", U(peak[1]), U(pytorch - A));
    est_graph_free(g);
}

int main(int argc, char **argv) {
    if (argc > 2) {
        fprintf(stderr, "usage: %s [TRUTH_ONNX_DIR]\n", argv[0]);
        return 2;
    }
    if (argc == 2) {
        if (!test_have_file(argv[1], "resnet18.legacy.onnx", "test_rules", "the ONNX checks")) return 77;
        check_onnx(argv[1]);
        return test_result("test_rules (onnx)");
    }
    check_gelu();
    check_conv();
    check_conv_im2col();
    check_conv_transpose_verify();
    check_matmul();
    check_matmul_backward_verify();
    check_json_no_unfold();
    check_silu();
    check_module_calls();
    check_attention_held_by_block();
    check_repeated_calls();
    check_torchscript_call_counts();
    check_frame_locals();
    check_inputs_embeds();
    check_hoisted_shape();
    check_stable_order();
    check_sdpa();
    check_sdpa_key_transpose();
    check_sdpa_grouped();
    check_split_views();
    check_split_to_sequence();
    check_split_k_device();
    check_bias_add_in_place();
    check_dropout_identity();
    check_folded_tables();
    check_group_norm();
    check_bias_grad_sum();
    check_prelu_slope_grad();
    check_cast_same_dtype_verify();
    check_amp_verify_casts();
    check_verify_uploads_constants();
    check_verify_integers_int64();
    check_add_passes_gradient_verify();
    check_embedding_backward();
    check_trainable_attention_mask();
    check_attention_verify();
    check_lp_pool_saves();
    check_max_pool_verify_workspace();
    check_roi_align_verify_saves();
    check_compress_verify_workspace();
    check_recurrent_verify_dtype();
    check_sdpa_bias();
    check_group_norm_shared_weights();
    check_sum_of_many_folds();
    return test_result("test_rules");
}
