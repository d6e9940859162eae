/*
 * test_rules_verify: the rules of the estimate under est_options.kernels =
 * EST_KERNELS_VERIFY, memest verify's own kernels (verify/), through the
 * public API only. test_rules has the rules that follow PyTorch's kernels;
 * the helpers both use are rules_util.h's.
 *
 * Every expected figure is derived by hand from the kernel it follows, as
 * arithmetic (a tensor's bytes are elements x its dtype's size, rounded up
 * to 512 bytes like the caching allocator, R()):
 *  - attention: Q, K, V, the mask and the probabilities, in the step's dtype;
 *  - LSTM and RNN: the reserve in X's dtype;
 *  - RoiAlign's saves, Compress's workspace, MaxPool's int64 indices;
 *  - Conv's im2col buffer (one sample's columns, or as many as fit in the
 *    output's size; none for 1x1 and depthwise convs) and ConvTranspose's
 *    column buffer;
 *  - MatMul's copies of strided operands, again for its backward;
 *  - under --amp, the copies of every floating input in another dtype, and
 *    their gradients cast back;
 *  - constant initializers uploaded at setup, integers held as int64, a
 *    Cast to its own dtype returning its input, a residual Add handing one
 *    gradient to both operands;
 *  - Softmax's backward: PyTorch's _softmax_backward_data makes a
 *    temporary of its result's size, verify's kernel none.
 *
 * usage: test_rules_verify
 */
#include "rules_util.h"

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
 * hidden_states.to(torch.float32) and BLOOM's softmax(..., dtype=float32)
 * so) is its input: PyTorch's Tensor.to returns self, and memest verify's
 * executor returns the input itself. Under --amp the export's dtypes are
 * not the step's, and the PyTorch estimate keeps the copy. x [1024, 1024]
 * float32 -> Cast(to float) -> Relu, inference: x + Relu's output = 8 MiB
 * under either kernels; with --amp bf16, PyTorch's kernels x + the cast +
 * Relu's output = 12 MiB, verify's 8 MiB. */
static void check_cast_same_dtype(void) {
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
    CHECK(peak[0] == 8u << 20, "Cast float -> float, PyTorch kernels: peak %llu, expected %llu", U(peak[0]), U(8u << 20));
    CHECK(peak[1] == 8u << 20, "Cast float -> float, verify kernels: peak %llu, expected %llu", U(peak[1]), U(8u << 20));
    peaks_by_kernels_amp(g, EST_MODE_INFER, EST_OPT_ADAM, EST_AMP_BF16, "cast --amp", peak);
    CHECK(peak[0] == 12u << 20, "Cast float -> float under --amp, PyTorch kernels: peak %llu, expected %llu", U(peak[0]),
          U(12u << 20));
    CHECK(peak[1] == 8u << 20, "Cast float -> float under --amp, verify kernels: peak %llu, expected %llu", U(peak[1]),
          U(8u << 20));
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

/* x [64, 64] -> MatMul W [64, 64] -> h -> Softmax -> p -> MatMul W2 [64,
 * 64] -> z, SGD: the Softmax's backward makes h's gradient (16 KiB) and,
 * under PyTorch's kernels, the product of p's gradient and p (16 KiB) as a
 * temporary beside it; verify's kernel makes none. */
static void check_softmax_backward_temporary(void) {
    static const char text[] =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"softmax\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [64, 64]}],\n"
        " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [64, 64]},\n"
        "                  {\"name\": \"W2\", \"dtype\": \"float32\", \"dims\": [64, 64]}],\n"
        " \"nodes\": [{\"name\": \"fc\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"h\"]},\n"
        "             {\"name\": \"sm\", \"op\": \"Softmax\", \"inputs\": [\"h\"], \"outputs\": [\"p\"]},\n"
        "             {\"name\": \"out\", \"op\": \"MatMul\", \"inputs\": [\"p\", \"W2\"], \"outputs\": [\"z\"]}],\n"
        " \"outputs\": [\"z\"]}\n";
    uint64_t torch = layer_temp_in_training(text, "softmax (PyTorch)", "sm", NULL, EST_KERNELS_PYTORCH);
    uint64_t verify = layer_temp_in_training(text, "softmax (verify)", "sm", NULL, EST_KERNELS_VERIFY);
    CHECK(torch == 64 * 64 * 4, "Softmax backward, PyTorch kernels: temporary %llu, expected %llu", U(torch),
          U(64 * 64 * 4));
    CHECK(verify == 0, "Softmax backward, verify kernels: temporary %llu, expected 0", U(verify));
}

int main(void) {
    check_attention_verify();
    check_recurrent_verify_dtype();
    check_roi_align_verify_saves();
    check_compress_verify_workspace();
    check_max_pool_verify_workspace();
    check_conv_im2col();
    check_conv_transpose_verify();
    check_matmul_backward_verify();
    check_amp_verify_casts();
    check_verify_uploads_constants();
    check_verify_integers_int64();
    check_cast_same_dtype();
    check_add_passes_gradient_verify();
    check_softmax_backward_temporary();
    return test_result("test_rules_verify");
}
