/*
 * conv.c: Conv and ConvTranspose.
 *
 * FLOPs count 2 per multiply-add, as torch.utils.flop_counter counts
 * aten.convolution; the bias add is not counted:
 *   Conv           fwd = 2 * elements(Y) * (C/group) * prod(kernel)
 *   ConvTranspose  fwd = 2 * elements(X) * (M/group) * prod(kernel)
 * Backward: one convolution of the forward's size for the input gradient
 * (only when X needs one: a network's first conv computes none) and one for
 * the weight gradient. Grouped convs count their real work (C/group), not
 * FlopCounterMode's group-times-too-high weight-gradient figure.
 */
#include <string.h>

#include "registry.h"

/* X (N, C, D1..Dn), W (M, C/group, k1..kn) -> (N, M, O1..On). */
static est_status conv_infer(est_infer_ctx *ctx) {
    const est_tval *x, *w;
    est_status st;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK || (st = est_in_req(ctx, 1, &w)) != EST_OK) return st;
    if (x->rank < 3) return est_op_fail(ctx, EST_ESHAPE, "input X has rank %d; Conv needs at least 3", x->rank);
    if (w->rank != x->rank)
        return est_op_fail(ctx, EST_ESHAPE, "weight W has rank %d, expected %d like X", w->rank, x->rank);
    int64_t group;
    if ((st = est_known_int(ctx, EST_KA_GROUP, 1, &group)) != EST_OK) return st;
    if (group <= 0 || x->dims[1] % group != 0 || w->dims[0] % group != 0)
        return est_op_fail(ctx, EST_EATTR, "group %lld does not divide channels %lld and filters %lld",
                           (long long)group, (long long)x->dims[1], (long long)w->dims[0]);
    if (w->dims[1] * group != x->dims[1])
        return est_op_fail(ctx, EST_ESHAPE, "W expects %lld input channels, X has %lld",
                           (long long)(w->dims[1] * group), (long long)x->dims[1]);
    int n = x->rank - 2;
    int64_t kernel[EST_MAX_RANK], out[EST_MAX_RANK];
    const int64_t *ks;
    int64_t nk;
    if ((st = est_known_ints(ctx, EST_KA_KERNEL_SHAPE, &ks, &nk)) != EST_OK) return st;
    for (int i = 0; i < n; i++) kernel[i] = nk == n ? ks[i] : w->dims[2 + i];
    out[0] = x->dims[0];
    out[1] = w->dims[0];
    if ((st = est_window_out(ctx, n, x->dims + 2, kernel, false, out + 2)) != EST_OK) return st;
    const est_tval *b = est_in(ctx, 2);
    if (b && (b->rank != 1 || b->dims[0] != w->dims[0]))
        return est_op_fail(ctx, EST_ESHAPE, "bias B must be 1-D of %lld", (long long)w->dims[0]);
    return est_set_out(ctx, 0, x->dtype, x->rank, out);
}

/* X (N, C, D..), W (C, M/group, k..) -> (N, M, O..). */
static est_status conv_transpose_infer(est_infer_ctx *ctx) {
    const est_tval *x, *w;
    est_status st;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK || (st = est_in_req(ctx, 1, &w)) != EST_OK) return st;
    if (x->rank < 3 || w->rank != x->rank)
        return est_op_fail(ctx, EST_ESHAPE, "X (rank %d) and W (rank %d) must share a rank of at least 3",
                           x->rank, w->rank);
    if (w->dims[0] != x->dims[1])
        return est_op_fail(ctx, EST_ESHAPE, "W has %lld input channels, X has %lld", (long long)w->dims[0],
                           (long long)x->dims[1]);
    int n = x->rank - 2;
    int64_t group;
    if ((st = est_attr_int(ctx, "group", 1, &group)) != EST_OK) return st;
    if (group <= 0) return est_op_fail(ctx, EST_EATTR, "group must be positive");
    const int64_t *ks, *strides, *dil, *pads, *opad, *oshape;
    int64_t nk, ns, nd, np, nop, nos;
    if ((st = est_attr_ints(ctx, "kernel_shape", &ks, &nk)) != EST_OK ||
        (st = est_attr_ints(ctx, "strides", &strides, &ns)) != EST_OK ||
        (st = est_attr_ints(ctx, "dilations", &dil, &nd)) != EST_OK ||
        (st = est_attr_ints(ctx, "pads", &pads, &np)) != EST_OK ||
        (st = est_attr_ints(ctx, "output_padding", &opad, &nop)) != EST_OK ||
        (st = est_attr_ints(ctx, "output_shape", &oshape, &nos)) != EST_OK)
        return st;
    const char *auto_pad;
    if ((st = est_attr_string(ctx, "auto_pad", &auto_pad)) != EST_OK) return st;
    bool same = auto_pad && strncmp(auto_pad, "SAME", 4) == 0;
    int64_t out[EST_MAX_RANK];
    out[0] = x->dims[0];
    out[1] = w->dims[1] * group;
    for (int i = 0; i < n; i++) {
        if (nos >= n) {
            out[2 + i] = oshape[nos - n + i];
            continue;
        }
        int64_t k = nk == n ? ks[i] : w->dims[2 + i];
        int64_t s = ns == n ? strides[i] : 1, d = nd == n ? dil[i] : 1;
        int64_t op = nop == n ? opad[i] : 0;
        int64_t pb = np == 2 * n ? pads[i] : 0, pe = np == 2 * n ? pads[i + n] : 0;
        if (k <= 0 || s <= 0 || d <= 0 || k > EST_MAX_DIM_VALUE || s > EST_MAX_DIM_VALUE ||
            d > EST_MAX_DIM_VALUE || op > EST_MAX_DIM_VALUE || pb > EST_MAX_DIM_VALUE || pe > EST_MAX_DIM_VALUE)
            return est_op_fail(ctx, EST_EATTR, "kernel, strides and dilations must be positive (axis %d)", i);
        if (same) out[2 + i] = x->dims[2 + i] * s;
        else out[2 + i] = s * (x->dims[2 + i] - 1) + op + (k - 1) * d + 1 - pb - pe;
        if (out[2 + i] <= 0)
            return est_op_fail(ctx, EST_ESHAPE, "output dim %d would be %lld", 2 + i, (long long)out[2 + i]);
    }
    return est_set_out(ctx, 0, x->dtype, x->rank, out);
}

/* ---- training-step rules ------------------------------------------------- */

/* Multiply-adds per element of the tensor that drives the loop (Y for Conv,
 * X for ConvTranspose): one per weight element of a single filter, i.e.
 * W's elements over its leading dim (channels per group times kernel). */
static uint64_t conv_flops_for(const est_cost_ctx *c, const est_tval *driver) {
    const est_tval *w = est_cost_in(c, 1);
    if (!w || w->rank < 1 || w->dims[0] <= 0) return 0;
    uint64_t per_filter = est_tval_elements(w) / (uint64_t)w->dims[0];
    return est_mul_sat(2, est_mul_sat(est_tval_elements(driver), per_filter));
}

/* Backward: grad_input and grad_weight each cost one forward. */
static void conv_backward_flops(const est_cost_ctx *c, est_flops *f) {
    uint64_t grads = (uint64_t)est_needs_grad(c, 0) + (uint64_t)est_needs_grad(c, 1);
    f->bwd = est_mul_sat(grads, f->fwd);
}

static void conv_flops(const est_cost_ctx *c, est_flops *f) {
    f->fwd = conv_flops_for(c, est_cost_out(c, 0));
    conv_backward_flops(c, f);
}

static void conv_transpose_flops(const est_cost_ctx *c, est_flops *f) {
    f->fwd = conv_flops_for(c, est_cost_in(c, 0));
    conv_backward_flops(c, f);
}

/* convolution: "input, weight, bias: convolution_backward(grad, input,
 * weight, ...)": one formula, so input and weight are saved whenever any
 * gradient is needed, even when only the weight needs one. */
static void conv_saves(const est_cost_ctx *c, est_saved *s) {
    if (!c->any_grad) return;
    est_save_input(c, s, 0);
    est_save_input(c, s, 1);
}

/* cuDNN workspace. PyTorch leaves cudnn.benchmark off, so cuDNN's heuristics
 * pick the algorithm and PyTorch allocates the workspace it asks for through
 * the caching allocator, for the duration of the call. Measured on an H200
 * with cuDNN 9.19 over a grid of shapes and 21 models (bench/accuracy/
 * probe_conv.py and measure.py --probe; docs/memory-model.md):
 *  - depthwise convs, and convs that reduce over fewer than 32 values per
 *    output (C/group times the kernel), run workspace-free;
 *  - forward: 1x1 convs and convs with fewer than 32 filters run
 *    workspace-free; grouped convs (1 < group < channels, RegNet's and
 *    ResNeXt's) ask for a copy of the input and of the output (cuDNN runs
 *    them channels-last: 15.8 MiB for 12.3 + 3.1 MiB on regnet_x_400mf's
 *    first one, within 0.5 MiB of in + out on all of its seven shapes);
 *    strided 1x1 convs over 128+ channels ask for 1.5x the input
 *    (strided_pointwise_workspace, backward too); convs that keep their
 *    input's channels and size ask for twice an output over 48 MiB
 *    (keeps_channels_and_size); others ask for about 1.2x the output plus a
 *    weight copy;
 *  - backward: the input gradient needs none; the weight gradient of a 1x1
 *    conv splits the reduction up to 8 ways (up to 8 weight-sized partial
 *    sums, no more than 4x the larger activation plus a weight), that of
 *    a larger kernel asks for channels-last copies of input and output
 *    gradient plus split-K partial sums (split_k_partials).
 * cuDNN's choice varies with the shape, from 0 to several times these; the
 * rule gives the typical size, not a bound. */
typedef enum conv_kind { CONV_NO_WORKSPACE, CONV_POINTWISE, CONV_SPATIAL } conv_kind;

/* The group attribute, read once by each workspace rule. */
static int64_t conv_group(const est_cost_ctx *c) { return est_cost_attr_int(c, EST_KA_GROUP, 1); }

/* group: the node's attribute (conv_group). */
static conv_kind conv_workspace_kind(const est_cost_ctx *c, int64_t group) {
    const est_tval *x = est_cost_in(c, 0), *w = est_cost_in(c, 1);
    if (!x || !w || x->rank < 3 || w->rank != x->rank || w->dims[0] <= 0 || w->dims[1] <= 0)
        return CONV_NO_WORKSPACE;
    if (group > 1 && group == x->dims[1]) return CONV_NO_WORKSPACE; /* depthwise */
    uint64_t per_filter = est_tval_elements(w) / (uint64_t)w->dims[0]; /* C/group x kernel */
    if (per_filter < 32) return CONV_NO_WORKSPACE;
    return per_filter == (uint64_t)w->dims[1] ? CONV_POINTWISE : CONV_SPATIAL;
}

/* Columns a verify chunk may hold whatever the output's size, in elements
 * (verify/ops_conv.cu, COL_FLOOR: 64 MiB of float32). */
#define VERIFY_COL_FLOOR ((uint64_t)16 << 20)

/* memest verify's executor (verify/ops_conv.cu): im2col into a column
 * buffer of C x kernel x output-pixels per sample, for as many samples as
 * keep it under the output's size or VERIFY_COL_FLOOR, whichever is larger
 * (at least one), then cuBLAS; 1x1 unit-stride unpadded convs read X
 * directly and one-channel-per-group convs (depthwise) run direct kernels:
 * no buffer. Backward uses the same buffer for dX (col2im) and dW (im2col).
 * The elements of the buffer of the conv from `in` to `out` with weight w;
 * *chunk_out: the samples per chunk. */
static uint64_t im2col_elements(const est_tval *in, const est_tval *w, const est_tval *out, uint64_t *chunk_out) {
    if (!in || !w || !out || in->rank < 3 || w->rank != in->rank || out->rank != in->rank || w->dims[0] <= 0 ||
        w->dims[1] <= 0 || in->dims[0] <= 0)
        return 0;
    if (w->dims[1] == 1) return 0; /* one channel per group: direct kernels */
    bool pointwise = true;
    for (int d = 2; d < w->rank; d++) pointwise &= w->dims[d] == 1 && in->dims[d] == out->dims[d];
    if (pointwise) return 0;
    uint64_t kernel = est_tval_elements(w) / ((uint64_t)w->dims[0] * (uint64_t)w->dims[1]);
    uint64_t pixels = 1;
    for (int d = 2; d < out->rank; d++) pixels *= (uint64_t)out->dims[d];
    uint64_t per_sample = (uint64_t)in->dims[1] * kernel * pixels; /* C x kernel x output pixels */
    uint64_t room = est_tval_elements(out) > VERIFY_COL_FLOOR ? est_tval_elements(out) : VERIFY_COL_FLOOR;
    uint64_t n = (uint64_t)in->dims[0], chunk = per_sample ? room / per_sample : n;
    if (chunk < 1) chunk = 1;
    if (chunk > n) chunk = n;
    *chunk_out = chunk;
    return chunk * per_sample;
}

static uint64_t conv_im2col_workspace(const est_cost_ctx *c) {
    uint64_t chunk = 0;
    return est__dtype_bytes(c->float_dtype, im2col_elements(est_cost_in(c, 0), est_cost_in(c, 1), est_cost_out(c, 0), &chunk));
}

/* Backward under verify: the column buffer, and for dW a copy of a chunk's
 * dY with the samples inside each channel (M x chunk x output pixels), so
 * that one product per chunk sums over its samples. */
static uint64_t conv_im2col_backward_workspace(const est_cost_ctx *c) {
    if (!est_needs_grad(c, 0) && !est_needs_grad(c, 1)) return 0;
    const est_tval *y = est_cost_out(c, 0);
    uint64_t chunk = 0, col = im2col_elements(est_cost_in(c, 0), est_cost_in(c, 1), y, &chunk);
    if (!col || !est_needs_grad(c, 1) || y->dims[0] <= 0) return est__dtype_bytes(c->float_dtype, col);
    uint64_t dy_chunk = est_tval_elements(y) / (uint64_t)y->dims[0] * chunk;
    return est_add_sat(est_alloc_bytes(est__dtype_bytes(c->float_dtype, col)),
                       est_alloc_bytes(est__dtype_bytes(c->float_dtype, dy_chunk)));
}

/* ConvTranspose under memest verify (verify/ops_conv.cu): the conv that
 * maps Y back to X, run the other way with the same column buffer (Y's
 * channels x kernel x X's pixels per sample, chunked under X's size or
 * VERIFY_COL_FLOOR); none for one output channel per group (direct
 * kernels) or a 1x1 kernel that keeps the size. Forward (GEMM then col2im)
 * and backward (one im2col of dY for dX and dW) alike. Under the PyTorch
 * kernels the rule has no workspace for ConvTranspose. */
static uint64_t conv_transpose_im2col_workspace(const est_cost_ctx *c) {
    if (est_cost_kernels(c) != EST_KERNELS_VERIFY) return 0;
    uint64_t chunk = 0;
    return est__dtype_bytes(c->float_dtype, im2col_elements(est_cost_out(c, 0), est_cost_in(c, 1), est_cost_in(c, 0), &chunk));
}

static uint64_t conv_transpose_backward_workspace(const est_cost_ctx *c) {
    return est_needs_grad(c, 0) || est_needs_grad(c, 1) ? conv_transpose_im2col_workspace(c) : 0;
}

/* 1 < group < input channels: neither a plain nor a depthwise conv. */
static bool is_grouped(const est_cost_ctx *c, int64_t group) {
    const est_tval *x = est_cost_in(c, 0);
    return x && x->rank >= 3 && group > 1 && group < x->dims[1];
}

/* A strided 1x1 conv over 128 or more channels (ResNet's downsample): cuDNN
 * takes 1.5x the input as workspace, forward and backward (per-op probes,
 * bench/accuracy/probe_convs.py: resnet18's and resnet50's five such convs
 * 1.5x forward and 1.5-1.64x backward, batches 8 and 32, on an H200 and an
 * H100, except resnet50's largest at batch 32, 1.0x forward; regnet's
 * 160-channel one 2.1x; the 32- and 64-channel ones none). */
static uint64_t strided_pointwise_workspace(const est_cost_ctx *c, int64_t group) {
    const est_tval *x = est_cost_in(c, 0), *w = est_cost_in(c, 1);
    if (!x || !w || x->rank != 4 || w->rank != 4 || w->dims[2] != 1 || w->dims[3] != 1 || x->dims[1] < 128 ||
        group != 1)
        return 0;
    int64_t n;
    const int64_t *strides = est_cost_attr_ints(c, EST_KA_STRIDES, &n);
    bool strided = false;
    for (int64_t i = 0; strides && i < n; i++) strided |= strides[i] > 1;
    if (!strided) return 0;
    uint64_t in = est_cost_bytes(c, x);
    return in + in / 2;
}

/* A conv whose output has its input's channels and size (a 3x3 "same" conv
 * of a VGG or ResNet stage). Over LARGE_OUTPUT bytes of output cuDNN's
 * heuristics pick a 2-D forward algorithm that takes twice the output (batch
 * sweep on an H100, bench/accuracy/probe_wgrad.py: 64 channels at 56x56 and
 * 128 at 28x28 ask for 1.0-1.1x the output up to 25.7 MB and 2.0x from
 * 51.4 MB on; vgg16's 64-channel 224x224 conv 2.0x at batch 8 and 32). A 3-D
 * one does not: r3d_18's 64-channel 3x3x3 conv at 16x56x56 asks for 1.0x
 * its 49 MiB output at batch 4 (bench/accuracy/data/families/, the probe). */
enum { LARGE_OUTPUT = 48 << 20 };

static bool keeps_channels_and_size(const est_cost_ctx *c, int64_t group) {
    const est_tval *x = est_cost_in(c, 0), *y = est_cost_out(c, 0);
    if (!x || !y || x->rank != y->rank || group != 1) return false;
    for (int d = 1; d < x->rank; d++)
        if (x->dims[d] != y->dims[d]) return false;
    return true;
}

static uint64_t conv_workspace(const est_cost_ctx *c) {
    if (est_cost_kernels(c) == EST_KERNELS_VERIFY) return conv_im2col_workspace(c);
    int64_t group = conv_group(c);
    uint64_t strided = strided_pointwise_workspace(c, group);
    if (strided) return strided;
    const est_tval *w = est_cost_in(c, 1);
    if (conv_workspace_kind(c, group) != CONV_SPATIAL || w->dims[0] < 32) return 0;
    uint64_t out = est_cost_bytes(c, est_cost_out(c, 0));
    if (is_grouped(c, group)) return est_cost_bytes(c, est_cost_in(c, 0)) + out; /* channels-last copies */
    bool keeps = keeps_channels_and_size(c, group);
    if (keeps && out >= LARGE_OUTPUT && w->rank == 4) return 2 * out;
    /* A conv that changes the channels or the size, of 8 input channels or
     * more, runs on channels-last copies of its input, output and weight:
     * of the 18 such convs in the H100 probes of unet, fcn_resnet50,
     * mobilevit_like, poolformer_like and r3d_18 (bench/accuracy/data/
     * families/), 10 take exactly that, 4 less and 4 more; convnet1d's
     * Conv1d layers too (its inference from -9% to 0%). */
    const est_tval *x = est_cost_in(c, 0);
    if (!keeps && x->dims[1] >= 8) return est_cost_bytes(c, x) + out + est_cost_bytes(c, w);
    return out + out / 5 + est_cost_bytes(c, w);
}

/* The weight gradient of a 2-D or 3-D conv with a larger kernel is a GEMM:
 * a Cout x (C x kernel) output reduced over batch x output pixels. cuDNN
 * runs it on channels-last copies of the input and the output gradient
 * (in + out) and splits the long reduction into partial weight gradients,
 * summed at the end:
 *  - one 128x128 output tile (SPLIT_K_TILE) per SM of the device the step
 *    runs on (est_device.sm_count: 132 on an H100 or H200, 40 on a T4), so
 *    a weight of many tiles splits fewer ways;
 *  - at least SPLIT_K_ROWS reduced pixels per split, and one partial;
 *  - a small weight splits further, up to SMALL_WEIGHT_PARTIALS bytes;
 *  - partials take the conv's dtype (float16/bfloat16 halve them).
 * Evidence (bench/accuracy/probe_wgrad.py, probe_conv.py, measure.py
 * --probe; docs/memory-model.md): over 190 convs of 22 models on an H100
 * and an H200 the median error falls from 2.1 MiB (2x the larger activation,
 * the earlier rule) to 1.1 MiB; resnet18's 256-channel 3x3 conv keeps 6.7
 * weights of partials at batch 8, lenet's 6->16 5x5 one 1.05 MiB from batch
 * 64 to 512 (H100). On 70 shape-and-batch points measured after the rule
 * was written (probe_splitk.py) it is 1.9 MiB against 2.6 MiB. cuDNN's
 * jumps to 16x the input (16- and 32-channel convs from batch 64-128)
 * follow no shape rule. */
enum { SPLIT_K_TILE = 128, SPLIT_K_ROWS = 64, SMALL_WEIGHT_PARTIALS = 1 << 20 };

static uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

static uint64_t split_k_partials(const est_cost_ctx *c) {
    const est_tval *w = est_cost_in(c, 1), *y = est_cost_out(c, 0);
    if (!w || !y || y->rank < 2 || y->dims[1] <= 0 || w->dims[0] <= 0) return 0;
    const est_device *dev = est_cost_device(c);
    if (!dev) dev = est__default_device();
    const uint64_t ctas = (uint64_t)(dev->sm_count > 0 ? dev->sm_count : 1); /* one tile per SM */
    uint64_t rows = (uint64_t)w->dims[0], cols = est_tval_elements(w) / rows; /* Cout x (C x kernel) */
    uint64_t reduced = est_tval_elements(y) / (uint64_t)y->dims[1];           /* batch x output pixels */
    uint64_t most = reduced / SPLIT_K_ROWS > 1 ? reduced / SPLIT_K_ROWS : 1;
    uint64_t tiled = ctas / (div_up(rows, SPLIT_K_TILE) * div_up(cols, SPLIT_K_TILE));
    uint64_t ways = tiled < 1 ? 1 : tiled < most ? tiled : most;
    uint64_t weight = est_cost_bytes(c, w), partials = est_mul_sat(ways, weight);
    uint64_t small = est_mul_sat(most < ctas ? most : ctas, weight);
    if (small > SMALL_WEIGHT_PARTIALS) small = SMALL_WEIGHT_PARTIALS;
    return partials > small ? partials : small;
}

static uint64_t conv_backward_workspace(const est_cost_ctx *c) {
    if (est_cost_kernels(c) == EST_KERNELS_VERIFY) return conv_im2col_backward_workspace(c);
    int64_t group = conv_group(c);
    uint64_t strided = est_needs_grad(c, 0) || est_needs_grad(c, 1) ? strided_pointwise_workspace(c, group) : 0;
    if (strided) return strided;
    if (!est_needs_grad(c, 1)) return 0;
    uint64_t weight = est_cost_bytes(c, est_cost_in(c, 1));
    uint64_t in = est_cost_bytes(c, est_cost_in(c, 0)), out = est_cost_bytes(c, est_cost_out(c, 0));
    switch (conv_workspace_kind(c, group)) {
    case CONV_POINTWISE: { /* 8 partial sums, or fewer when the batch is small */
        uint64_t split = 4 * (in > out ? in : out) + weight;
        return 8 * weight < split ? 8 * weight : split;
    }
    case CONV_SPATIAL: /* a 1-D conv: cuDNN picks other kernels (convnet1d's three: 0.7-1.4x) */
        if (est_cost_in(c, 1)->rank == 3) return 2 * (in > out ? in : out) + weight;
        return est_add_sat(est_add_sat(in, out), split_k_partials(c));
    default: return 0;
    }
}

EST_FAMILY(conv,
    {.name = "Conv", .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = conv_infer, .flops = conv_flops, .saves = conv_saves, .workspace = conv_workspace,
     .backward_workspace = conv_backward_workspace},
    {.name = "ConvTranspose", .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = conv_transpose_infer, .flops = conv_transpose_flops, .saves = conv_saves,
     .workspace = conv_transpose_im2col_workspace, .backward_workspace = conv_transpose_backward_workspace},
);
