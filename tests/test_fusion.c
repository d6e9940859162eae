/*
 * test_fusion: the passes that rewrite an exporter's spelling of an op into
 * the op PyTorch ran (libestimate/fuse.c, through the public API only), on
 * JSON graphs written here (docs/json-format.md) and two dynamo exports of
 * tests/data:
 *  - GELU: the TorchScript exporter's Div(x, sqrt 2) -> Erf -> Add(., 1) ->
 *    Mul(x, .) -> Mul(., 0.5), with the constants as initializers and as
 *    Constant nodes, becomes one Gelu node (est_graph_fused_sequences() ==
 *    1, four nodes fewer) that in training saves x only; the hand-written
 *    order (x * 0.5 first), other constants (sqrt 2 off by 1e-4, 2 instead
 *    of 1, 0.6 instead of 0.5) and an intermediate with a second reader are
 *    left alone.
 *  - SiLU: Sigmoid(h) -> Mul(h, .) becomes one Swish node that saves h
 *    only; Mul(other, sigmoid) and a sigmoid with a second reader are left
 *    alone.
 *  - Scaled dot-product attention: both exporters' expansions (TorchScript:
 *    Transpose [0,1,3,2]; dynamo: Reshape / Transpose [0,2,1] / Reshape;
 *    with a mask and a Dropout; grouped K/V heads) become one Attention node
 *    that saves q, k, v, its output and a logsumexp per row, and makes no
 *    attention matrix in inference; eager attention (the product scaled,
 *    not the operands) is left alone; a trainable bias as the mask.
 *  - GroupNorm's decomposition, shared weights included; dynamo's folded
 *    RoPE tables; a sum of many folded constants.
 *
 * Every expected figure is derived by hand, as arithmetic (float32: 4 bytes
 * an element, rounded up to 512 bytes like the caching allocator, R()).
 *
 * usage: test_fusion
 */
#include <math.h>

#include "rules_util.h"

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


int main(void) {
    check_gelu();
    check_silu();
    check_sdpa();
    check_sdpa_key_transpose();
    check_sdpa_grouped();
    check_folded_tables();
    check_group_norm();
    check_sdpa_bias();
    check_group_norm_shared_weights();
    check_sum_of_many_folds();
    return test_result("test_fusion");
}
