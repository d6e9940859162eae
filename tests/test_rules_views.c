/*
 * test_rules_views: the per-op rules that make an estimate follow what
 * PyTorch's kernels return as views of their input or write in place,
 * through the public API only (libestimate/estimate.h); rules_util.h's
 * helpers, as test_rules.
 *
 * Every expected figure is derived by hand from the rule it tests and written
 * out as arithmetic:
 *  - a tensor's bytes are elements x 4 (float32); a per-layer temp_bytes is
 *    the larger of the forward and (in training) backward workspace, each
 *    rounded up to 512 bytes like the caching allocator (R()).
 *
 * Checks (JSON graphs written here, docs/json-format.md):
 *  - Split's outputs are views of its input, as torch.split / chunk return
 *    them: a saved piece keeps the whole input alive.
 *  - SplitToSequence read by SequenceAt (the dynamo exporter's aten.split;
 *    libestimate/sequences.c) becomes one Slice view per item read: a
 *    chunk size (the last chunk smaller) and a list of sizes with a
 *    negative index give the same bytes as Split does; a chunk size read
 *    at a negative index cannot be lowered and names the op unsupported.
 *  - A linear layer's bias add (MatMul then Add of a 1-D weight) writes
 *    into the product, as PyTorch's addmm / add_ do; not when the product
 *    has a second reader or the addend is an activation.
 *  - A Dropout that drops nothing (ratio 0) returns its input, as
 *    at::dropout does; one with ratio 0.1 in training makes a new tensor.
 *  - A Reshape of a Transpose is a view when PyTorch's computeStride finds
 *    strides for it (splitting a dim: SegFormer's transpose(1, 2).view(B,
 *    C, H, W)) and a copy when it merges dims the Transpose separated;
 *    under verify's kernels always a copy.
 *
 * usage: test_rules_views
 */
#include <math.h>

#include "rules_util.h"

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

/* x [8, 16, 32] (T = 16 KiB) -> Transpose(0, 2, 1) -> [8, 32, 16] ->
 * Reshape to SHAPE -> Relu -> y, inference. [8, 32, 4, 4] splits the last
 * dim: a view, and at the Relu x and y are live, 2 T. [8, 512] merges the
 * dims the Transpose swapped: a copy, 3 T at the Relu (x, the copy, y). Under
 * verify's kernels both copy. */
static void check_reshape_of_transpose(void) {
    const uint64_t T = 8 * 16 * 32 * 4;
    static const struct { const char *shape; int dims; uint64_t torch, verify; } cases[] = {
        {"8, 32, 4, 4", 4, 2, 3}, {"8, 512", 2, 3, 3}};
    for (int c = 0; c < 2; c++) {
        char text[2048], what[64];
        snprintf(what, sizeof what, "reshape of a transpose to [%s]", cases[c].shape);
        snprintf(text, sizeof text,
                 "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"rt\", \"opset_import\": {\"\": 17},\n"
                 " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [8, 16, 32]}],\n"
                 " \"initializers\": [{\"name\": \"shape\", \"dtype\": \"int64\", \"dims\": [%d], \"values\": [%s]}],\n"
                 " \"nodes\": [{\"name\": \"t\", \"op\": \"Transpose\", \"inputs\": [\"x\"], \"outputs\": [\"t\"],\n"
                 "              \"attributes\": {\"perm\": {\"ints\": [0, 2, 1]}}},\n"
                 "             {\"name\": \"r\", \"op\": \"Reshape\", \"inputs\": [\"t\", \"shape\"], \"outputs\": [\"r\"]},\n"
                 "             {\"name\": \"relu\", \"op\": \"Relu\", \"inputs\": [\"r\"], \"outputs\": [\"y\"]}],\n"
                 " \"outputs\": [\"y\"]}\n",
                 cases[c].dims, cases[c].shape);
        est_graph *g = load_json(text, what);
        uint64_t peak[2];
        peaks_by_kernels(g, EST_MODE_INFER, EST_OPT_SGD, what, peak);
        CHECK(peak[0] == cases[c].torch * T, "%s, PyTorch kernels: peak %llu, expected %llu", what, U(peak[0]),
              U(cases[c].torch * T));
        CHECK(peak[1] == cases[c].verify * T, "%s, verify kernels: peak %llu, expected %llu", what, U(peak[1]),
              U(cases[c].verify * T));
        est_graph_free(g);
    }
}

int main(int argc, char **argv) {
    if (argc > 1) {
        fprintf(stderr, "usage: %s\n", argv[0]);
        return 2;
    }
    check_split_views();
    check_split_to_sequence();
    check_bias_add_in_place();
    check_dropout_identity();
    check_reshape_of_transpose();
    return test_result("test_rules_views");
}
