/*
 * test_module_calls: module calls keep their arguments
 * (libestimate/module_calls.c, through the public API only): a block's
 * input lives until the block's last node in inference; without scopes it
 * is freed after its last reader; the JSON writer keeps the scopes. A
 * Softmax in a block (a transformer layer, "layer.0") stays alive until the
 * block returns: attention probabilities that the layer holds; the scores'
 * operands (q, k) and the values (v) stay until the attention call returns,
 * as the locals of the function that computes it. Repeated
 * calls of one module, TorchScript's call counts, frame locals, inputs
 * embeddings, hoisted shapes and a stable order of the calls.
 *
 * Every expected figure is derived by hand, as arithmetic (float32: 4 bytes
 * an element, rounded up to 512 bytes like the caching allocator, R()).
 *
 * usage: test_module_calls
 */
#include "rules_util.h"

/* ---- attention's locals ------------------------------------------------------- */

/* x [32, 32] -> layer.0/attn: q, k, v (Relu, the projections) -> s =
 * MatMul(q, k) -> SM(s) -> p -> o = MatMul(p, v) -> a (Relu, out_proj);
 * layer.0/ffn: f (Relu); root: y (Relu). Every tensor is 32 x 32 floats,
 * T = 4096 bytes. Inference, SM Softmax: q, k and v stay until a, the
 * attention call's last node, and p until f, the layer's; at a live are x,
 * q, k, v, p, o and a: 7 T. SM Relu (no attention): q and k die at s, v and
 * p at o, o at a; the peak is at s: x, q, k, v, s = 5 T. With a position
 * term (DeBERTa's c2p: pk (Relu), c = MatMul(q, pk), s2 = Add(s, c) into the
 * Softmax), pk stays too: 8 T, first at s2 (x, q, k, v, pk, s, c, s2). */
static void check_attention_locals(void) {
    const uint64_t T = 32 * 32 * 4;
#define N(name, op, in, out) "  {\"name\": \"" name "\", \"op\": \"" op "\", \"inputs\": [" in "], \"outputs\": [\"" out "\"], \"scope\": \"layer.0/attn\"},\n"
    static const char qkv[] = N("q", "Relu", "\"x\"", "q") N("k", "Relu", "\"x\"", "k") N("v", "Relu", "\"x\"", "v")
        N("s", "MatMul", "\"q\", \"k\"", "s");
    static const char position[] = N("pk", "Relu", "\"x\"", "pk") N("c", "MatMul", "\"q\", \"pk\"", "c")
        N("s2", "Add", "\"s\", \"c\"", "s2");
    static const struct { const char *op, *extra, *scores, *at; uint64_t peak; } cases[] = {
        {"Softmax", "", "s", "a", 7}, {"Relu", "", "s", "s", 5}, {"Softmax", position, "s2", "s2", 8}};
#undef N
    for (int c = 0; c < 3; c++) {
        char text[4096], what[64];
        snprintf(what, sizeof what, "attention locals, %s%s", cases[c].op, *cases[c].extra ? " + position" : "");
        snprintf(text, sizeof text,
                 "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"attn\", \"opset_import\": {\"\": 17},\n"
                 " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [32, 32]}],\n"
                 " \"nodes\": [\n%s%s"
                 "  {\"name\": \"sm\", \"op\": \"%s\", \"inputs\": [\"%s\"], \"outputs\": [\"p\"], \"scope\": \"layer.0/attn\"},\n"
                 "  {\"name\": \"o\", \"op\": \"MatMul\", \"inputs\": [\"p\", \"v\"], \"outputs\": [\"o\"], \"scope\": \"layer.0/attn\"},\n"
                 "  {\"name\": \"a\", \"op\": \"Relu\", \"inputs\": [\"o\"], \"outputs\": [\"a\"], \"scope\": \"layer.0/attn\"},\n"
                 "  {\"name\": \"f\", \"op\": \"Relu\", \"inputs\": [\"a\"], \"outputs\": [\"f\"], \"scope\": \"layer.0/ffn\"},\n"
                 "  {\"name\": \"out\", \"op\": \"Relu\", \"inputs\": [\"f\"], \"outputs\": [\"y\"], \"scope\": \"\"}],\n"
                 " \"outputs\": [\"y\"]}\n",
                 qkv, cases[c].extra, cases[c].op, cases[c].scores);
        est_graph *g = load_json(text, what);
        est_report *r = run(g, EST_MODE_INFER, 0);
        if (r)
            CHECK(est_report_peak(r)->bytes == cases[c].peak * T && strcmp(est_report_peak(r)->layer, cases[c].at) == 0,
                  "%s: inference peak %llu at %s, expected %llu at %s", what, U(est_report_peak(r)->bytes),
                  est_report_peak(r)->layer, U(cases[c].peak * T), cases[c].at);
        est_report_free(r);
        est_graph_free(g);
    }
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

/* Hugging Face's stacks keep `inputs_embeds = self.<table>(ids)` while
 * their layers run (module_calls.c, hold_inputs_embeds): ids -> E[ids] = e
 * [1, 256, 16] (T = 16 KiB) in model/<table>, then layers.0 and layers.1
 * (Relu each), then a Relu at the root. At layers.1, e, h1 and h2 are live
 * when the table is named embed_tokens, word_embeddings, wte or embed_in
 * (also as the last part of a dotted path): one T more than under any
 * other name, where e goes after layers.0. */
static void check_inputs_embeds(void) {
    const uint64_t T = 256 * 16 * 4;
    static const struct { const char *name; bool held; } cases[] = {
        {"embedding", false},       {"embed_tokens", true}, {"word_embeddings", true}, {"wte", true},
        {"m.embed_in", true},       {"xwte", false},        {"word_embeddings_layernorm", false}};
    uint64_t plain = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
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
                 cases[c].name);
        est_graph *g = load_json(text, cases[c].name);
        est_report *r = run(g, EST_MODE_INFER, 0);
        uint64_t peak = r ? est_report_peak(r)->bytes : 0;
        if (c == 0) plain = peak;
        if (r && cases[c].held)
            CHECK(strcmp(est_report_peak(r)->layer, "l1") == 0, "%s: peak at %s, expected l1", cases[c].name,
                  est_report_peak(r)->layer);
        uint64_t want = plain + (cases[c].held ? T : 0);
        CHECK(peak == want, "%s: inference peak %llu, expected %llu", cases[c].name, U(peak), U(want));
        est_report_free(r);
        est_graph_free(g);
    }
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


int main(void) {
    check_attention_locals();
    check_module_calls();
    check_attention_held_by_block();
    check_repeated_calls();
    check_torchscript_call_counts();
    check_frame_locals();
    check_inputs_embeds();
    check_hoisted_shape();
    check_stable_order();
    return test_result("test_module_calls");
}
