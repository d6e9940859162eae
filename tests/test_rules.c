/*
 * test_rules: the per-op rules that make an estimate follow what PyTorch's
 * kernels take as temporaries (workspaces, backward temporaries), through
 * the public API only (libestimate/estimate.h). Views and in-place writes
 * are test_rules_views', the folded-BatchNorm unfold test_rules_unfold's,
 * the exporter-pattern passes test_fusion's, the module calls
 * test_module_calls', memest verify's kernels (est_options.kernels =
 * EST_KERNELS_VERIFY) test_rules_verify's; the helpers they share are
 * rules_util.h's.
 *
 * Every expected figure is derived by hand from the rule it tests and written
 * out as arithmetic:
 *  - a tensor's bytes are elements x 4 (float32); a per-layer temp_bytes is
 *    the larger of the forward and (in training) backward workspace, each
 *    rounded up to 512 bytes like the caching allocator (R()).
 *
 * Checks (JSON graphs written here, docs/json-format.md):
 *  - cuDNN Conv workspace (layers/conv.c): a 64->64 3x3 conv, a grouped
 *    3x3 conv (channels-last copies), strided 1x1 convs over 256 and 64
 *    channels (ResNet's downsample), a depthwise 7x7 conv, convs reducing
 *    over fewer than 32 values or with fewer than 32 filters, and 1x1 convs
 *    at both sides of the weight-gradient min().
 *  - cuDNN's split-K weight gradient splits across the SMs of the device
 *    the step runs on (est_options.device; libestimate/device.c): a 3x3
 *    64->64 conv at batch 8, 56x56, keeps in + out + partials of the
 *    weight (147456 bytes) for its backward: 26 of them on an H100 (132
 *    SMs / 5 tiles), 8 on a T4 (40 / 5), 21 on an A100 (108 / 5).
 *  - MatMul copies a batched operand that is a transposed view
 *    (layers/linear.c, matmul_workspace); not a contiguous one, nor a 2-D
 *    transposed one. A batched operand whose batch dims broadcast (Falcon's
 *    one key head against eight query heads), or that is a view of an
 *    Expand that broadcasts (GPT-BigCode's key expanded to every head), is
 *    copied whole, and that copy, not the operand, is kept for backward.
 *  - Backward temporaries: the bias gradient's sum, PRelu's slope gradient,
 *    Embedding's backward, a trainable attention mask's gradient, LpPool's
 *    saves.
 *
 * usage: test_rules
 */
#include <math.h>

#include "rules_util.h"

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

/* xa [4, 8, 32, 32] @ Wa [32, 32] = a; xb [4, 1, 32, 32] @ Wb = b; y = a @ b
 * [4, 8, 32, 32]. a is 128 KiB, b 16 KiB. In training y's MatMul keeps a
 * (for b's gradient) and b expanded to 4 x 8 batches, 128 KiB (for a's):
 * 256 KiB, where the operands themselves are 144 KiB (verify's kernels keep
 * those). In inference the expanded copy lives only for the call: 128 KiB
 * of temporaries. */
static const char broadcast_text[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"mqa\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"xa\", \"dtype\": \"float32\", \"dims\": [4, 8, 32, 32]},\n"
    "            {\"name\": \"xb\", \"dtype\": \"float32\", \"dims\": [4, 1, 32, 32]}],\n"
    " \"initializers\": [{\"name\": \"Wa\", \"dtype\": \"float32\", \"dims\": [32, 32]},\n"
    "                  {\"name\": \"Wb\", \"dtype\": \"float32\", \"dims\": [32, 32]}],\n"
    " \"nodes\": [{\"name\": \"pa\", \"op\": \"MatMul\", \"inputs\": [\"xa\", \"Wa\"], \"outputs\": [\"a\"]},\n"
    "             {\"name\": \"pb\", \"op\": \"MatMul\", \"inputs\": [\"xb\", \"Wb\"], \"outputs\": [\"b\"]},\n"
    "             {\"name\": \"y\", \"op\": \"MatMul\", \"inputs\": [\"a\", \"b\"], \"outputs\": [\"y\"]}],\n"
    " \"outputs\": [\"y\"]}\n";

static void check_matmul_broadcast(void) {
    const uint64_t A = 4 * 8 * 32 * 32 * 4, B = 4 * 32 * 32 * 4;
    est_graph *g = load_json(broadcast_text, "matmul broadcast");
    for (int k = 0; g && k < 2; k++) {
        est_options opt;
        est_options_init(&opt);
        opt.kernels = k ? EST_KERNELS_VERIFY : EST_KERNELS_PYTORCH;
        est_report *r = NULL;
        est_error err;
        if (est_estimate(g, &opt, &r, &err) != EST_OK) {
            CHECK(false, "matmul broadcast: %s", err.message);
            continue;
        }
        const est_layer *y = layer_named(r, "y", "matmul broadcast");
        uint64_t want = k ? A + B : 2 * A;
        if (y)
            CHECK(y->saved_bytes == want, "matmul broadcast (%s kernels): y saves %llu, expected %llu",
                  k ? "verify" : "PyTorch", U(y->saved_bytes), U(want));
        est_report_free(r);
    }
    est_report *r = run(g, EST_MODE_INFER, 0);
    const est_layer *y = r ? layer_named(r, "y", "matmul broadcast") : NULL;
    if (y) CHECK(y->temp_bytes == A, "matmul broadcast: inference temporaries %llu, expected %llu", U(y->temp_bytes), U(A));
    est_report_free(r);
    est_graph_free(g);
}

/* The same product with b expanded to 8 heads first, as GPT-BigCode does:
 * e = Expand(b, [4, 8, 32, 32]), y = a @ e. e is a view of b's 16 KiB, and
 * bmm keeps a copy of all 128 KiB of it: the training peak (SGD) equals
 * that of the same graph with e = Tile(b, [1, 8, 1, 1]), a real 128 KiB
 * tensor that y keeps. Keeping e's storage (b) instead would make it
 * 112 KiB lower. */
static uint64_t expanded_peak(const char *op, const char *what) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"mqa_expand\", \"opset_import\": {\"\": 17},\n"
             " \"inputs\": [{\"name\": \"xa\", \"dtype\": \"float32\", \"dims\": [4, 8, 32, 32]},\n"
             "            {\"name\": \"xb\", \"dtype\": \"float32\", \"dims\": [4, 1, 32, 32]}],\n"
             " \"initializers\": [{\"name\": \"Wa\", \"dtype\": \"float32\", \"dims\": [32, 32]},\n"
             "  {\"name\": \"Wb\", \"dtype\": \"float32\", \"dims\": [32, 32]},\n"
             "  {\"name\": \"Expand\", \"dtype\": \"int64\", \"dims\": [4], \"values\": [4, 8, 32, 32]},\n"
             "  {\"name\": \"Tile\", \"dtype\": \"int64\", \"dims\": [4], \"values\": [1, 8, 1, 1]}],\n"
             " \"nodes\": [{\"name\": \"pa\", \"op\": \"MatMul\", \"inputs\": [\"xa\", \"Wa\"], \"outputs\": [\"a\"]},\n"
             "  {\"name\": \"pb\", \"op\": \"MatMul\", \"inputs\": [\"xb\", \"Wb\"], \"outputs\": [\"b\"]},\n"
             "  {\"name\": \"e\", \"op\": \"%s\", \"inputs\": [\"b\", \"%s\"], \"outputs\": [\"e\"]},\n"
             "  {\"name\": \"y\", \"op\": \"MatMul\", \"inputs\": [\"a\", \"e\"], \"outputs\": [\"y\"]}],\n"
             " \"outputs\": [\"y\"]}\n",
             op, op);
    est_graph *g = load_json(text, what);
    est_report *r = g ? run(g, EST_MODE_TRAIN, 0) : NULL;
    uint64_t peak = r ? est_report_peak(r)->bytes : 0;
    CHECK(r != NULL, "%s: no estimate", what);
    est_report_free(r);
    est_graph_free(g);
    return peak;
}

static void check_matmul_expanded(void) {
    uint64_t expanded = expanded_peak("Expand", "matmul of an Expand"), tiled = expanded_peak("Tile", "matmul of a Tile");
    CHECK(expanded == tiled && expanded > 0, "matmul of an Expand: training peak %llu, expected the Tile's %llu",
          U(expanded), U(tiled));
}

int main(int argc, char **argv) {
    if (argc > 1) {
        fprintf(stderr, "usage: %s\n", argv[0]);
        return 2;
    }
    check_conv();
    check_matmul();
    check_matmul_broadcast();
    check_matmul_expanded();
    check_split_k_device();
    check_bias_grad_sum();
    check_prelu_slope_grad();
    check_embedding_backward();
    check_trainable_attention_mask();
    check_lp_pool_saves();
    return test_result("test_rules");
}
