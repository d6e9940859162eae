/*
 * test_bloom_gelu: BLOOM's GeLUFunction (libestimate/fuse.c,
 * match_bloom_gelu; its temporaries in layers/activation.c), through the
 * public API only, on JSON graphs written here.
 *
 * Both exporters trace bloom_gelu_forward's nine ops:
 *   a = x * 0.5  b = x * 0.79788456  c = x * 0.044715  d = c * x
 *   e = d + 1  f = b * e  t = tanh(f)  u = t + 1  y = a * u
 * They become one Gelu (approximate "tanh") that in training saves x only;
 * its forward makes three temporaries of x's size beyond its output, its
 * backward four beyond x's gradient (PyTorch runs the formula op by op),
 * memest verify's kernel none. GPT-2's NewGELUActivation (pow(x, 3), which
 * runs under autograd), another constant and an intermediate that is also
 * a graph output are left alone.
 *
 * Every expected figure is derived by hand: x is h [4, 250] float32, 4,000
 * bytes; a temporary is counted at its bytes, a saved tensor rounded up to
 * 512 like the caching allocator (R()).
 *
 * usage: test_bloom_gelu
 */
#include "rules_util.h"

/* x [4, 100] -> fc (MatMul, W [100, 250]) -> h -> the GELU nodes -> y ->
 * out (MatMul, W2 [250, 10]) -> z. */
static est_graph *gelu_graph(const char *nodes, const char *extra_outputs, double c_sqrt_2_pi, const char *what) {
    char text[8192];
    snprintf(text, sizeof text,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"bloom_gelu\", \"opset_import\": {\"\": 17},\n"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [4, 100]}],\n"
             " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [100, 250]},\n"
             "  {\"name\": \"W2\", \"dtype\": \"float32\", \"dims\": [250, 10]},\n"
             "  {\"name\": \"half\", \"dtype\": \"float32\", \"dims\": [], \"values\": [0.5]},\n"
             "  {\"name\": \"k\", \"dtype\": \"float32\", \"dims\": [], \"values\": [%.17g]},\n"
             "  {\"name\": \"c\", \"dtype\": \"float32\", \"dims\": [], \"values\": [0.044714998453855515]},\n"
             "  {\"name\": \"three\", \"dtype\": \"float32\", \"dims\": [], \"values\": [3.0]},\n"
             "  {\"name\": \"one\", \"dtype\": \"float32\", \"dims\": [], \"values\": [1.0]}],\n"
             " \"nodes\": [{\"name\": \"fc\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"h\"]},\n"
             "%s,\n"
             "  {\"name\": \"out\", \"op\": \"MatMul\", \"inputs\": [\"y\", \"W2\"], \"outputs\": [\"z\"]}],\n"
             " \"outputs\": [\"z\"%s]}\n",
             c_sqrt_2_pi, nodes, extra_outputs);
    return load_json(text, what);
}

/* bloom_gelu_forward as the TorchScript exporter writes it (the dynamo
 * exporter's order is the same). */
static const char bloom_nodes[] =
    "  {\"name\": \"m_a\", \"op\": \"Mul\", \"inputs\": [\"h\", \"half\"], \"outputs\": [\"a\"]},\n"
    "  {\"name\": \"m_b\", \"op\": \"Mul\", \"inputs\": [\"h\", \"k\"], \"outputs\": [\"b\"]},\n"
    "  {\"name\": \"m_c\", \"op\": \"Mul\", \"inputs\": [\"h\", \"c\"], \"outputs\": [\"cx\"]},\n"
    "  {\"name\": \"m_d\", \"op\": \"Mul\", \"inputs\": [\"cx\", \"h\"], \"outputs\": [\"d\"]},\n"
    "  {\"name\": \"a_e\", \"op\": \"Add\", \"inputs\": [\"d\", \"one\"], \"outputs\": [\"e\"]},\n"
    "  {\"name\": \"m_f\", \"op\": \"Mul\", \"inputs\": [\"b\", \"e\"], \"outputs\": [\"f\"]},\n"
    "  {\"name\": \"tanh\", \"op\": \"Tanh\", \"inputs\": [\"f\"], \"outputs\": [\"t\"]},\n"
    "  {\"name\": \"a_u\", \"op\": \"Add\", \"inputs\": [\"t\", \"one\"], \"outputs\": [\"u\"]},\n"
    "  {\"name\": \"m_y\", \"op\": \"Mul\", \"inputs\": [\"a\", \"u\"], \"outputs\": [\"y\"]}";

/* GPT-2's NewGELUActivation: 0.5 * x * (1 + tanh(k * (x + 0.044715 *
 * pow(x, 3)))), eager ops under autograd. */
static const char gpt2_nodes[] =
    "  {\"name\": \"m_a\", \"op\": \"Mul\", \"inputs\": [\"half\", \"h\"], \"outputs\": [\"a\"]},\n"
    "  {\"name\": \"pow\", \"op\": \"Pow\", \"inputs\": [\"h\", \"three\"], \"outputs\": [\"p3\"]},\n"
    "  {\"name\": \"m_c\", \"op\": \"Mul\", \"inputs\": [\"c\", \"p3\"], \"outputs\": [\"cx\"]},\n"
    "  {\"name\": \"a_d\", \"op\": \"Add\", \"inputs\": [\"h\", \"cx\"], \"outputs\": [\"d\"]},\n"
    "  {\"name\": \"m_f\", \"op\": \"Mul\", \"inputs\": [\"k\", \"d\"], \"outputs\": [\"f\"]},\n"
    "  {\"name\": \"tanh\", \"op\": \"Tanh\", \"inputs\": [\"f\"], \"outputs\": [\"t\"]},\n"
    "  {\"name\": \"a_u\", \"op\": \"Add\", \"inputs\": [\"one\", \"t\"], \"outputs\": [\"u\"]},\n"
    "  {\"name\": \"m_y\", \"op\": \"Mul\", \"inputs\": [\"a\", \"u\"], \"outputs\": [\"y\"]}";

#define SQRT_2_PI 0.7978845834732056 /* the float32 the exporters write for 0.79788456 */
#define H_BYTES 4000u                /* h [4, 250] float32 */

static const est_layer *the_gelu(const est_report *r) {
    for (size_t i = 0; r && i < est_report_layer_count(r); i++)
        if (strcmp(est_report_layer(r, i)->op, "Gelu") == 0) return est_report_layer(r, i);
    return NULL;
}

static void check_fused(void) {
    const char *what = "bloom gelu";
    est_graph *g = gelu_graph(bloom_nodes, "", SQRT_2_PI, what);
    if (!g) return;
    /* fc + nine + out = 11 nodes; the nine become one */
    CHECK(est_graph_fused_sequences(g) == 1 && est_graph_node_count(g) == 3,
          "%s: fused %zu sequences into %zu nodes, expected 1 into 3", what, est_graph_fused_sequences(g),
          est_graph_node_count(g));
    est_report *r = run(g, EST_MODE_TRAIN, 0);
    const est_layer *G = the_gelu(r);
    CHECK(G != NULL, "%s: no Gelu layer", what);
    if (G) {
        CHECK(G->n_inputs == 1 && strcmp(G->inputs[0].name, "h") == 0 && G->n_outputs == 1 &&
                  strcmp(G->outputs[0].name, "y") == 0,
              "%s: Gelu reads '%s', writes '%s'; expected h and y", what, G->n_inputs ? G->inputs[0].name : "",
              G->n_outputs ? G->outputs[0].name : "");
        /* GeLUFunction saves x alone */
        CHECK(G->saved_bytes == R(H_BYTES), "%s: Gelu saves %llu, expected h's %llu", what, U(G->saved_bytes),
              U(R(H_BYTES)));
        /* the larger of the forward's 3 x 4,000 and the backward's 4 x 4,000 */
        CHECK(G->temp_bytes == R(4 * H_BYTES), "%s: Gelu temporaries %llu, expected %llu", what, U(G->temp_bytes),
              U(R(4 * H_BYTES)));
    }
    est_report_free(r);
    r = run(g, EST_MODE_INFER, 0);
    G = the_gelu(r);
    if (G)
        CHECK(G->temp_bytes == R(3 * H_BYTES), "%s: inference temporaries %llu, expected %llu", what,
              U(G->temp_bytes), U(R(3 * H_BYTES)));
    est_report_free(r);
    est_graph_free(g);

    /* verify_layer_temp frees the graph; the Gelu keeps its first node's name */
    uint64_t verify = verify_layer_temp(gelu_graph(bloom_nodes, "", SQRT_2_PI, "bloom gelu, verify kernels"),
                                        EST_MODE_TRAIN, "m_a", "bloom gelu, verify kernels");
    CHECK(verify == 0, "bloom gelu, verify kernels: temporaries %llu, expected 0", U(verify));
}

/* Left alone: as many nodes as written, no Gelu. */
static void check_not_fused(const char *what, const char *nodes, const char *extra_outputs, double k,
                            size_t written) {
    est_graph *g = gelu_graph(nodes, extra_outputs, k, what);
    if (!g) return;
    CHECK(est_graph_fused_sequences(g) == 0 && est_graph_node_count(g) == written,
          "%s: fused %zu sequences, %zu nodes; expected 0 and the %zu written", what, est_graph_fused_sequences(g),
          est_graph_node_count(g), written);
    est_report *r = run(g, EST_MODE_TRAIN, 0);
    CHECK(r && the_gelu(r) == NULL && count_op(r, "Tanh") == 1, "%s: expected the Tanh kept, no Gelu", what);
    est_report_free(r);
    est_graph_free(g);
}

int main(void) {
    check_fused();
    check_not_fused("gpt2 new gelu", gpt2_nodes, "", SQRT_2_PI, 10);
    /* 0.7979 is 1.4e-5 off relatively: another constant */
    check_not_fused("bloom gelu, k 0.7979", bloom_nodes, "", 0.7979, 11);
    /* tanh's output is also a graph output: fusing would lose it */
    check_not_fused("bloom gelu, t also an output", bloom_nodes, ", \"t\"", SQRT_2_PI, 11);
    return test_result("test_bloom_gelu");
}
