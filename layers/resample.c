/*
 * resample.c: ops that rearrange or resample elements by position:
 * DepthToSpace, SpaceToDepth, Resize, Upsample, GridSample, RoiAlign, Col2Im.
 *
 * FLOPs (docs/flops.md); backward = 2 x forward when the data needs a
 * gradient. DepthToSpace and SpaceToDepth only move data and count 0. The
 * rest:
 *   Resize, Upsample, GridSample per output element: nearest 0, linear
 *                   2 * 2^d, cubic 2 * 4^d (d = interpolated dims)
 *   RoiAlign        8 per sample (a bilinear read), sampling_ratio^2 samples
 *                   per output element (2^2 when adaptive)
 *   Col2Im          1 per input element (overlapping adds)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

/* ---- DepthToSpace, SpaceToDepth ------------------------------------------------- */

static est_status depth_space_infer(est_infer_ctx *ctx, bool to_space) {
    const est_tval *x;
    est_status st;
    int64_t b;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if (x->rank != 4) return est_op_fail(ctx, EST_ESHAPE, "input has rank %d; needs 4 (N, C, H, W)", x->rank);
    if ((st = est_attr_int(ctx, "blocksize", 0, &b)) != EST_OK) return st;
    if (b < 1 || b > (1 << 20)) return est_op_fail(ctx, EST_EATTR, "blocksize must be a positive integer");
    int64_t dims[4] = {x->dims[0], x->dims[1], x->dims[2], x->dims[3]};
    if (to_space) {
        if (dims[1] % (b * b))
            return est_op_fail(ctx, EST_ESHAPE, "channels %lld are not divisible by blocksize^2", (long long)dims[1]);
        dims[1] /= b * b;
        dims[2] *= b;
        dims[3] *= b;
    } else {
        if (dims[2] % b || dims[3] % b)
            return est_op_fail(ctx, EST_ESHAPE, "height and width must be divisible by blocksize %lld", (long long)b);
        if (est__mul_overflow(dims[1], b * b, &dims[1]))
            return est_op_fail(ctx, EST_EOVERFLOW, "output channels overflow 64 bits");
        dims[2] /= b;
        dims[3] /= b;
    }
    return est_set_out(ctx, 0, x->dtype, 4, dims);
}

static est_status depth_to_space_infer(est_infer_ctx *ctx) { return depth_space_infer(ctx, true); }
static est_status space_to_depth_infer(est_infer_ctx *ctx) { return depth_space_infer(ctx, false); }

/* ---- Resize, Upsample ------------------------------------------------------- */

/* floor(dim * scale), in float like ONNX's own shape inference. */
static est_status scale_dim(est_infer_ctx *ctx, int64_t dim, double scale, int axis, int64_t *out) {
    if (!(scale > 0) || scale * (double)dim > (double)EST_MAX_DIM_VALUE)
        return est_op_fail(ctx, EST_ESHAPE, "scale %g for axis %d (of size %lld) is invalid", scale, axis,
                           (long long)dim);
    *out = (int64_t)floorf((float)dim * (float)scale);
    return EST_OK;
}

static est_status apply_scales(est_infer_ctx *ctx, const est_tval *x, const est_const *scales,
                               const int64_t *axes, int64_t n, int64_t *dims) {
    for (int64_t i = 0; i < n; i++) {
        int ax = (int)i;
        est_status st;
        if (axes && (st = est_axis(ctx, axes[i], x->rank, &ax)) != EST_OK) return st;
        if ((st = scale_dim(ctx, x->dims[ax], est_const_get_f(scales, i), ax, &dims[ax])) != EST_OK) return st;
    }
    return EST_OK;
}

/* not_larger / not_smaller: one scale for all axes, min or max of
 * sizes[i] / dim, applied with round-half-up (float, as ONNX does). */
static est_status keep_aspect_ratio(est_infer_ctx *ctx, const est_tval *x, const int *ax, int64_t n,
                                    bool not_larger, int64_t *dims) {
    float scale = not_larger ? 3.4e38f : 0;
    for (int64_t i = 0; i < n; i++) {
        if (x->dims[ax[i]] == 0)
            return est_op_fail(ctx, EST_ESHAPE, "cannot keep the aspect ratio of the empty axis %d", ax[i]);
        float s = (float)dims[ax[i]] / (float)x->dims[ax[i]];
        scale = not_larger ? fminf(scale, s) : fmaxf(scale, s);
    }
    for (int64_t i = 0; i < n; i++) {
        double v = roundf(scale * (float)x->dims[ax[i]]);
        if (v > (double)EST_MAX_DIM_VALUE)
            return est_op_fail(ctx, EST_ESHAPE, "axis %d would have %g elements", ax[i], v);
        dims[ax[i]] = (int64_t)v;
    }
    return EST_OK;
}

/* Sizes, adjusted by keep_aspect_ratio_policy (opset 18). */
static est_status apply_sizes(est_infer_ctx *ctx, const est_tval *x, const int64_t *sizes, const int64_t *axes,
                              int64_t n, int64_t *dims) {
    const char *policy;
    est_status st;
    if ((st = est_attr_string(ctx, "keep_aspect_ratio_policy", &policy)) != EST_OK) return st;
    bool not_larger = policy && strcmp(policy, "not_larger") == 0;
    bool not_smaller = policy && strcmp(policy, "not_smaller") == 0;
    if (policy && !not_larger && !not_smaller && strcmp(policy, "stretch") != 0)
        return est_op_fail(ctx, EST_EATTR, "unknown keep_aspect_ratio_policy '%s'", policy);
    int ax[EST_MAX_RANK];
    for (int64_t i = 0; i < n; i++) {
        ax[i] = (int)i;
        if (axes && (st = est_axis(ctx, axes[i], x->rank, &ax[i])) != EST_OK) return st;
        if (sizes[i] < 0 || sizes[i] > EST_MAX_DIM_VALUE)
            return est_op_fail(ctx, EST_ESHAPE, "size %lld is invalid", (long long)sizes[i]);
        dims[ax[i]] = sizes[i];
    }
    return not_larger || not_smaller ? keep_aspect_ratio(ctx, x, ax, n, not_larger, dims) : EST_OK;
}

/* A scales or sizes input: absent, empty (treated as absent) or known. */
static est_status resize_input(est_infer_ctx *ctx, int i, const char *what, bool *present) {
    const est_tval *t = est_in(ctx, i);
    *present = t && t->rank >= 0 && t->elements > 0;
    if (*present && !t->value)
        return est_op_fail(ctx, EST_ESHAPE, "cannot resolve the output shape: the values of the %s (input %d, '%s') "
                           "are not known at estimate time", what, i, est_in_name(ctx, i));
    return EST_OK;
}

/* Opset 10: X, scales. From 11: X, roi, scales, sizes (axes from 18). */
static est_status resize_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    const int64_t *axes = NULL;
    int64_t n_axes = -1;
    bool has_scales, has_sizes = false;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    int scales_at = ctx->opset < 11 ? 1 : 2;
    if ((st = resize_input(ctx, scales_at, "scales", &has_scales)) != EST_OK) return st;
    if (ctx->opset >= 11 && (st = resize_input(ctx, 3, "sizes", &has_sizes)) != EST_OK) return st;
    if ((st = est_attr_ints(ctx, "axes", &axes, &n_axes)) != EST_OK) return st;
    int64_t want = n_axes >= 0 ? n_axes : x->rank;
    if (want > x->rank)
        return est_op_fail(ctx, EST_EATTR, "axes has %lld entries for rank %d", (long long)want, x->rank);
    int64_t dims[EST_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    if (has_sizes) {
        const int64_t *sizes;
        int64_t n;
        if ((st = est_in_known_ints(ctx, 3, "sizes", &sizes, &n)) != EST_OK) return st;
        if (n != want)
            return est_op_fail(ctx, EST_ESHAPE, "sizes has %lld values; expected %lld",
                               (long long)n, (long long)want);
        if ((st = apply_sizes(ctx, x, sizes, axes, n, dims)) != EST_OK) return st;
    } else if (has_scales) {
        const est_const *scales = est_in(ctx, scales_at)->value;
        if (scales->count != want)
            return est_op_fail(ctx, EST_ESHAPE, "scales has %lld values; expected %lld",
                               (long long)scales->count, (long long)want);
        if ((st = apply_scales(ctx, x, scales, axes, want, dims)) != EST_OK) return st;
    } else {
        return est_op_fail(ctx, EST_ESHAPE, "neither scales nor sizes is given");
    }
    return est_set_out(ctx, 0, x->dtype, x->rank, dims);
}

/* Opset 7-8: scales attribute; from 9: scales input. */
static est_status upsample_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    int64_t dims[EST_MAX_RANK], n;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if (ctx->opset < 7)
        return est_op_fail(ctx, EST_EUNSUPPORTED, "Upsample-1 (height_scale, width_scale) is not supported");
    const double *attr = NULL;
    const est_const *scales = NULL;
    if (ctx->opset < 9) {
        if ((st = est_attr_floats(ctx, "scales", &attr, &n)) != EST_OK) return st;
    } else {
        scales = est_in(ctx, 1) ? est_in(ctx, 1)->value : NULL;
        n = scales ? scales->count : -1;
        if (!scales)
            return est_op_fail(ctx, EST_ESHAPE,
                               "cannot resolve the output shape: the values of scales (input 1, '%s') are not "
                               "known at estimate time", est_in_name(ctx, 1));
    }
    if (n != x->rank)
        return est_op_fail(ctx, EST_ESHAPE, "scales has %lld values; expected %d", (long long)n, x->rank);
    for (int d = 0; d < x->rank; d++)
        if ((st = scale_dim(ctx, x->dims[d], attr ? attr[d] : est_const_get_f(scales, d), d, &dims[d])) != EST_OK)
            return st;
    return est_set_out(ctx, 0, x->dtype, x->rank, dims);
}

/* ---- GridSample, RoiAlign, Col2Im --------------------------------------------- */

/* X (N, C, D1..Dn), grid (N, O1..On, n) -> (N, C, O1..On). */
static est_status grid_sample_infer(est_infer_ctx *ctx) {
    const est_tval *x, *grid;
    est_status st;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK || (st = est_in_req(ctx, 1, &grid)) != EST_OK) return st;
    if (x->rank < 3 || grid->rank != x->rank || (ctx->opset < 20 && x->rank != 4))
        return est_op_fail(ctx, EST_ESHAPE, "X (rank %d) and grid (rank %d) must share a rank of %s", x->rank,
                           grid->rank, ctx->opset < 20 ? "4" : "3 or more");
    if (grid->dims[0] != x->dims[0] || grid->dims[grid->rank - 1] != x->rank - 2)
        return est_op_fail(ctx, EST_ESHAPE, "grid must be (N=%lld, ..., %d)", (long long)x->dims[0], x->rank - 2);
    int64_t dims[EST_MAX_RANK];
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int d = 2; d < x->rank; d++) dims[d] = grid->dims[d - 1];
    return est_set_out(ctx, 0, x->dtype, x->rank, dims);
}

/* X (N, C, H, W), rois (R, 4), batch_indices (R) -> (R, C, oh, ow). */
static est_status roi_align_infer(est_infer_ctx *ctx) {
    const est_tval *x, *rois, *bi;
    est_status st;
    int64_t oh, ow;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK || (st = est_in_req(ctx, 1, &rois)) != EST_OK ||
        (st = est_in_req(ctx, 2, &bi)) != EST_OK)
        return st;
    if (x->rank != 4) return est_op_fail(ctx, EST_ESHAPE, "X has rank %d; needs 4 (N, C, H, W)", x->rank);
    if (rois->rank != 2 || rois->dims[1] != 4 || bi->rank != 1 || bi->dims[0] != rois->dims[0])
        return est_op_fail(ctx, EST_ESHAPE, "rois must be (R, 4) and batch_indices (R)");
    if ((st = est_attr_int(ctx, "output_height", 1, &oh)) != EST_OK) return st;
    if ((st = est_attr_int(ctx, "output_width", 1, &ow)) != EST_OK) return st;
    int64_t dims[4] = {rois->dims[0], x->dims[1], oh, ow};
    return est_set_out(ctx, 0, x->dtype, 4, dims);
}

/* Number of sliding blocks along one image axis, as in Col2Im/Im2Col; -1
 * when the window overflows. Every argument is at most EST_MAX_DIM_VALUE. */
static int64_t block_count(int64_t image, int64_t block, int64_t dil, int64_t stride, int64_t pb, int64_t pe) {
    int64_t span, padded = image + pb + pe;
    if (est__mul_overflow(dil, block - 1, &span)) return -1;
    span += 1;
    return padded < span ? 0 : (padded - span) / stride + 1;
}

static est_status col2im_attr(est_infer_ctx *ctx, const char *name, int64_t n, int64_t dflt, int64_t *out) {
    const int64_t *v;
    int64_t nv;
    est_status st = est_attr_ints(ctx, name, &v, &nv);
    if (st != EST_OK) return st;
    if (nv >= 0 && nv != n)
        return est_op_fail(ctx, EST_EATTR, "attribute '%s' has %lld values, expected %lld",
                           name, (long long)nv, (long long)n);
    for (int64_t i = 0; i < n; i++) {
        out[i] = nv >= 0 ? v[i] : dflt;
        if (out[i] < 0 || out[i] > EST_MAX_DIM_VALUE)
            return est_op_fail(ctx, EST_EATTR, "attribute '%s' is invalid", name);
    }
    return EST_OK;
}

/* The elements per block (prod(block)) and the block count L that Col2Im's
 * input must have. */
static est_status col2im_blocks(est_infer_ctx *ctx, int64_t n, const int64_t *image, const int64_t *block,
                                int64_t *size, int64_t *blocks) {
    int64_t dil[EST_MAX_RANK], strides[EST_MAX_RANK], pads[2 * EST_MAX_RANK];
    est_status st;
    if ((st = col2im_attr(ctx, "dilations", n, 1, dil)) != EST_OK ||
        (st = col2im_attr(ctx, "strides", n, 1, strides)) != EST_OK ||
        (st = col2im_attr(ctx, "pads", 2 * n, 0, pads)) != EST_OK)
        return st;
    *size = *blocks = 1;
    for (int64_t i = 0; i < n; i++) {
        if (block[i] < 1 || image[i] < 0 || block[i] > EST_MAX_DIM_VALUE || image[i] > EST_MAX_DIM_VALUE ||
            dil[i] < 1 || strides[i] < 1)
            return est_op_fail(ctx, EST_ESHAPE, "image_shape, block_shape, dilations and strides must be positive");
        int64_t count = block_count(image[i], block[i], dil[i], strides[i], pads[i], pads[i + n]);
        if (count < 0 || est__mul_overflow(*size, block[i], size) || est__mul_overflow(*blocks, count, blocks))
            return est_op_fail(ctx, EST_EOVERFLOW, "the block sizes overflow 64 bits");
    }
    return EST_OK;
}

/* input (N, C * prod(block), L) -> (N, C, image...). */
static est_status col2im_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    const int64_t *image, *block;
    int64_t n, nb, size, blocks, dims[EST_MAX_RANK];
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if ((st = est_in_known_ints(ctx, 1, "image shape", &image, &n)) != EST_OK) return st;
    if ((st = est_in_known_ints(ctx, 2, "block shape", &block, &nb)) != EST_OK) return st;
    if (x->rank != 3 || n != nb || n < 1 || n + 2 > EST_MAX_RANK)
        return est_op_fail(ctx, EST_ESHAPE, "input must be 3-D, and image_shape and block_shape of one length");
    if ((st = col2im_blocks(ctx, n, image, block, &size, &blocks)) != EST_OK) return st;
    if (x->dims[1] % size != 0 || x->dims[2] != blocks)
        return est_op_fail(ctx, EST_ESHAPE,
                           "input (%lld, %lld, %lld) does not hold %lld blocks of %lld elements per channel",
                           (long long)x->dims[0], (long long)x->dims[1], (long long)x->dims[2], (long long)blocks,
                           (long long)size);
    dims[0] = x->dims[0];
    dims[1] = x->dims[1] / size;
    for (int64_t i = 0; i < n; i++) dims[2 + i] = image[i];
    return est_set_out(ctx, 0, x->dtype, (int)n + 2, dims);
}

/* ---- training-step rules ------------------------------------------------- */

#define ROI_ALIGN_SAMPLE_FLOPS 8
#define ROI_ALIGN_ADAPTIVE_RATIO 2

static uint64_t out_elements(const est_cost_ctx *c) { return est_tval_elements(est_cost_out(c, 0)); }

/* Interpolation per output element over d dims: nearest copies, linear
 * blends 2^d neighbours, cubic 4^d (a multiply-add each). */
static uint64_t interpolation_flops(const char *mode, int d) {
    uint64_t taps = 1, per_dim = strstr(mode, "cubic") ? 4 : strstr(mode, "linear") ? 2 : 0;
    if (!per_dim) return 0;
    for (int i = 0; i < d; i++) taps = est_mul_sat(taps, per_dim);
    return est_mul_sat(2, taps);
}

/* Resize / Upsample: the dims whose size changes are interpolated. */
static void resize_flops(const est_cost_ctx *c, est_flops *f) {
    const est_tval *x = est_cost_in(c, 0), *y = est_cost_out(c, 0);
    int d = 0;
    for (int i = 0; x && y && i < x->rank && i < y->rank; i++) d += x->dims[i] != y->dims[i];
    const char *mode = est_node_attr_string(c->node, "mode", "nearest");
    est_flops_per_element(c, interpolation_flops(mode, d), out_elements(c), f);
}

/* GridSample interpolates over X's spatial dims (bilinear by default). */
static void grid_sample_flops(const est_cost_ctx *c, est_flops *f) {
    const est_tval *x = est_cost_in(c, 0);
    int d = x && x->rank > 2 ? x->rank - 2 : 0;
    const char *mode = est_node_attr_string(c->node, "mode", "linear");
    est_flops_per_element(c, interpolation_flops(mode, d), out_elements(c), f);
}

static void roi_align_flops(const est_cost_ctx *c, est_flops *f) {
    int64_t ratio = est_node_attr_int(c->node, "sampling_ratio", 0);
    uint64_t r = ratio > 0 ? (uint64_t)ratio : ROI_ALIGN_ADAPTIVE_RATIO;
    est_flops_per_element(c, est_mul_sat(ROI_ALIGN_SAMPLE_FLOPS, est_mul_sat(r, r)), out_elements(c), f);
}

/* Col2Im adds each input element into its place; overlaps add up. */
static void col2im_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, 1, est_tval_elements(est_cost_in(c, 0)), f);
}

/* grid_sampler_2d: "input, grid: grid_sampler_2d_backward(grad, input, grid,
 * ...)". */
static void grid_sample_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    est_save_input(c, s, 0);
    est_save_input(c, s, 1);
}

/* torchvision roi_align saves the rois (and X's shape). memest verify's
 * kernel (verify/ops_sample.cu) takes ONNX's rois and batch_indices apart,
 * keeping both, and in max mode X too, to find each output's winning
 * sample again. */
static void roi_align_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    est_save_input(c, s, 1);
    if (est_cost_kernels(c) != EST_KERNELS_VERIFY) return;
    est_save_input(c, s, 2);
    if (strcmp(est_node_attr_string(c->node, "mode", "avg"), "max") == 0) est_save_input(c, s, 0);
}

EST_FAMILY(resample,
    {.name = "DepthToSpace", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = depth_to_space_infer},
    {.name = "SpaceToDepth", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = space_to_depth_infer},
    {.name = "Resize", .min_inputs = 1, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
     .infer = resize_infer, .nondiff_inputs = EST_SLOTS_FROM(1), .flops = resize_flops},
    {.name = "Upsample", .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = upsample_infer, .nondiff_inputs = EST_SLOT(1), .flops = resize_flops},
    {.name = "GridSample", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = grid_sample_infer, .flops = grid_sample_flops, .saves = grid_sample_saves},
    {.name = "RoiAlign", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = roi_align_infer, .nondiff_inputs = EST_SLOT(1) | EST_SLOT(2), .flops = roi_align_flops,
     .saves = roi_align_saves},
    {.name = "Col2Im", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = col2im_infer, .nondiff_inputs = EST_SLOT(1) | EST_SLOT(2), .flops = col2im_flops},
);
