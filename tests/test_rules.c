/*
 * test_rules: the per-op rules that make an estimate follow what PyTorch's
 * kernels keep and take (workspaces, views, in-place writes), through the
 * public API only (libestimate/estimate.h). The exporter-pattern passes are
 * test_fusion's, the module calls test_module_calls', memest verify's
 * kernels (est_options.kernels = EST_KERNELS_VERIFY) test_rules_verify's;
 * the helpers they share are rules_util.h's.
 *
 * Every expected figure is derived by hand from the rule it tests and written
 * out as arithmetic:
 *  - a tensor's bytes are elements x 4 (float32); a per-layer temp_bytes is
 *    the larger of the forward and (in training) backward workspace, each
 *    rounded up to 512 bytes like the caching allocator (R()).
 *
 * Checks, without arguments (JSON graphs written here, docs/json-format.md):
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
 *    transposed one.
 *  - The folded-BatchNorm unfold is the ONNX loader's: a JSON graph with the
 *    TorchScript signal (producer "pytorch", weight "onnx::Conv_1") is left
 *    as written.
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
 *  - Backward temporaries: the bias gradient's sum, PRelu's slope gradient,
 *    Embedding's backward, a trainable attention mask's gradient, LpPool's
 *    saves.
 *
 * With an argument, the directory of the truth exports (shared/truth/onnx;
 * exit 77 when it is absent): folded BatchNorms restored
 * (onnx/unfold_batchnorm.c): resnet18 legacy/dynamo/dynamo-train 20 each,
 * legacy-train and squeezenet1_0 0; the dynamo-train ones train (saved
 * statistics, 5 FLOPs per element) and match the real BatchNorms of
 * legacy-train layer for layer; totals: PyTorch's 11689512 parameters and
 * 9600 buffer elements; a JSON round trip keeps 20 BatchNorms and unfolds
 * nothing more.
 *
 * usage: test_rules [TRUTH_ONNX_DIR]
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
    check_conv();
    check_matmul();
    check_json_no_unfold();
    check_split_views();
    check_split_to_sequence();
    check_split_k_device();
    check_bias_add_in_place();
    check_dropout_identity();
    check_bias_grad_sum();
    check_prelu_slope_grad();
    check_embedding_backward();
    check_trainable_attention_mask();
    check_lp_pool_saves();
    return test_result("test_rules");
}
