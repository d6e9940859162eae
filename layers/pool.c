/*
 * pool.c: pooling over spatial windows (Max/Average/LpPool), global pooling,
 * MaxRoiPool and MaxUnpool.
 *
 * FLOPs (docs/flops.md); backward = 2 x forward when X needs a gradient:
 *   MaxPool, AveragePool   1 per window element per output element
 *   LpPool                 2 per window element per output element (pow, add)
 *   GlobalAveragePool, GlobalMaxPool   1 per input element
 *   GlobalLpPool           2 per input element
 *   MaxRoiPool             1 per output element per H*W / (pooled_h*pooled_w)
 *                          input elements (each bin as if the ROI were the map)
 *   MaxUnpool              0 (a scatter)
 */
#include "registry.h"

/* Reads the required kernel_shape and checks X is (N, C, D1..Dn) to match. */
static est_status read_kernel(est_infer_ctx *ctx, const est_tval *x, int64_t *kernel, int *n) {
    const int64_t *ks;
    int64_t nk;
    est_status st = est_known_ints(ctx, EST_KA_KERNEL_SHAPE, &ks, &nk);
    if (st != EST_OK) return st;
    if (nk < 1) return est_op_fail(ctx, EST_EATTR, "attribute 'kernel_shape' is required");
    if (x->rank != nk + 2)
        return est_op_fail(ctx, EST_ESHAPE, "input X has rank %d; a kernel of %lld dims needs rank %lld",
                           x->rank, (long long)nk, (long long)(nk + 2));
    for (int i = 0; i < nk; i++) kernel[i] = ks[i];
    *n = (int)nk;
    return EST_OK;
}

/* MaxPool, AveragePool, LpPool: X (N, C, D..) -> Y (N, C, O..); MaxPool's
 * optional Indices (int64) has Y's shape. */
static est_status window_pool_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    int64_t kernel[EST_MAX_RANK], out[EST_MAX_RANK], ceil_mode;
    int n;
    if ((st = read_kernel(ctx, x, kernel, &n)) != EST_OK) return st;
    if ((st = est_attr_int(ctx, "ceil_mode", 0, &ceil_mode)) != EST_OK) return st;
    out[0] = x->dims[0];
    out[1] = x->dims[1];
    if ((st = est_window_out(ctx, n, x->dims + 2, kernel, ceil_mode != 0, out + 2)) != EST_OK) return st;
    if ((st = est_set_out(ctx, 0, x->dtype, x->rank, out)) != EST_OK) return st;
    return est_set_out(ctx, 1, EST_DT_INT64, x->rank, out);
}

/* GlobalAveragePool, GlobalMaxPool, GlobalLpPool: (N, C, D..) -> (N, C, 1..). */
static est_status global_pool_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    if (x->rank < 2) return est_op_fail(ctx, EST_ESHAPE, "input X has rank %d; needs at least 2", x->rank);
    int64_t out[EST_MAX_RANK];
    for (int d = 0; d < x->rank; d++) out[d] = d < 2 ? x->dims[d] : 1;
    return est_set_out(ctx, 0, x->dtype, x->rank, out);
}

/* X (N, C, H, W), rois (R, 5) -> (R, C, pooled_h, pooled_w). */
static est_status max_roi_pool_infer(est_infer_ctx *ctx) {
    const est_tval *x, *rois;
    est_status st;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK || (st = est_in_req(ctx, 1, &rois)) != EST_OK) return st;
    if (x->rank != 4) return est_op_fail(ctx, EST_ESHAPE, "input X has rank %d; needs 4", x->rank);
    if (rois->rank != 2 || rois->dims[1] != 5)
        return est_op_fail(ctx, EST_ESHAPE, "rois must be (num_rois, 5)");
    const int64_t *pooled;
    int64_t np;
    if ((st = est_attr_ints(ctx, "pooled_shape", &pooled, &np)) != EST_OK) return st;
    if (np != 2) return est_op_fail(ctx, EST_EATTR, "attribute 'pooled_shape' must hold 2 values");
    int64_t out[4] = {rois->dims[0], x->dims[1], pooled[0], pooled[1]};
    return est_set_out(ctx, 0, x->dtype, 4, out);
}

/* Reads a window attribute of `want` values, or fills dflt when absent. */
static est_status unpool_attr(est_infer_ctx *ctx, const char *name, int64_t want, int64_t dflt, int64_t *vals) {
    const int64_t *a;
    int64_t na;
    est_status st = est_attr_ints(ctx, name, &a, &na);
    if (st != EST_OK) return st;
    if (na >= 0 && na != want)
        return est_op_fail(ctx, EST_EATTR, "attribute '%s' has %lld values, expected %lld", name,
                           (long long)na, (long long)want);
    for (int64_t i = 0; i < want; i++) vals[i] = na < 0 ? dflt : a[i];
    return EST_OK;
}

/* X (N, C, D..), I (indices) [, output_shape] -> the pooled input's shape:
 * output_shape when given, else (D - 1) * stride + kernel - pads. */
static est_status max_unpool_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    if (est_in(ctx, 2)) {
        const int64_t *shape;
        int64_t ns;
        if ((st = est_in_ints(ctx, 2, &shape, &ns)) != EST_OK) return st;
        if (ns < 0) return est_op_fail(ctx, EST_EUNSUPPORTED, "output_shape is not known statically");
        if (ns != x->rank)
            return est_op_fail(ctx, EST_ESHAPE, "output_shape has %lld values; X has rank %d", (long long)ns, x->rank);
        return est_set_out(ctx, 0, x->dtype, x->rank, shape);
    }
    int64_t kernel[EST_MAX_RANK], strides[EST_MAX_RANK], pads[2 * EST_MAX_RANK], out[EST_MAX_RANK];
    int n;
    if ((st = read_kernel(ctx, x, kernel, &n)) != EST_OK ||
        (st = unpool_attr(ctx, "strides", n, 1, strides)) != EST_OK ||
        (st = unpool_attr(ctx, "pads", 2 * n, 0, pads)) != EST_OK)
        return st;
    out[0] = x->dims[0];
    out[1] = x->dims[1];
    for (int i = 0; i < n; i++) {
        if (strides[i] <= 0 || kernel[i] <= 0 || strides[i] > EST_MAX_DIM_VALUE || kernel[i] > EST_MAX_DIM_VALUE ||
            pads[i] < 0 || pads[i + n] < 0 || pads[i] > EST_MAX_DIM_VALUE || pads[i + n] > EST_MAX_DIM_VALUE)
            return est_op_fail(ctx, EST_EATTR, "kernel and strides must be positive, pads not negative (axis %d)", i);
        out[2 + i] = (x->dims[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[i + n];
        if (out[2 + i] <= 0)
            return est_op_fail(ctx, EST_ESHAPE, "output dim %d would be %lld", 2 + i, (long long)out[2 + i]);
    }
    return est_set_out(ctx, 0, x->dtype, x->rank, out);
}

/* ---- training-step rules ------------------------------------------------- */

#define LP_POOL_FLOPS 2  /* |x|^p and an add per window element */

static uint64_t in_elements(const est_cost_ctx *c) { return est_tval_elements(est_cost_in(c, 0)); }
static uint64_t out_elements(const est_cost_ctx *c) { return est_tval_elements(est_cost_out(c, 0)); }

static uint64_t window_elements(const est_cost_ctx *c) {
    int64_t n;
    const int64_t *kernel = est_cost_attr_ints(c, EST_KA_KERNEL_SHAPE, &n);
    uint64_t w = 1;
    for (int64_t i = 0; kernel && i < n; i++) w = est_mul_sat(w, kernel[i] > 0 ? (uint64_t)kernel[i] : 1);
    return w;
}

static void window_pool_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, window_elements(c), out_elements(c), f);
}

static void lp_pool_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, est_mul_sat(LP_POOL_FLOPS, window_elements(c)), out_elements(c), f);
}

static void global_pool_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, 1, in_elements(c), f);
}

static void global_lp_pool_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, LP_POOL_FLOPS, in_elements(c), f);
}

/* Each bin scans its share of the map: H*W / (pooled_h*pooled_w). */
static void max_roi_pool_flops(const est_cost_ctx *c, est_flops *f) {
    const est_tval *x = est_cost_in(c, 0), *y = est_cost_out(c, 0);
    uint64_t per_bin = 1;
    if (x && y && x->rank == 4 && y->rank == 4) {
        uint64_t bins = est_mul_sat((uint64_t)y->dims[2], (uint64_t)y->dims[3]);
        if (bins) per_bin = est_mul_sat((uint64_t)x->dims[2], (uint64_t)x->dims[3]) / bins;
    }
    est_flops_per_element(c, per_bin ? per_bin : 1, out_elements(c), f);
}

/* max_pool2d_with_indices: "self: max_pool2d_with_indices_backward(grad,
 * self, ..., result1)": X and the int64 indices, which are output 1 when
 * the node has it and otherwise exist only for backward. */
static void max_pool_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    est_save_input(c, s, 0);
    if (est_cost_out(c, 1)) est_save_output(c, s, 1);
    else est_save_extra(s, est__dtype_bytes(EST_DT_INT64, out_elements(c)));
}

/* memest verify's MaxPool and GlobalMaxPool (verify/ops_pool.cu) write the
 * int64 indices whether or not backward runs, as max_pool2d_with_indices
 * does on CUDA: without a backward (inference, a frozen input) they are the
 * forward's workspace, unless the node outputs them. */
static uint64_t max_pool_workspace(const est_cost_ctx *c) {
    if (est_cost_kernels(c) != EST_KERNELS_VERIFY || est_backward_runs(c) || est_cost_out(c, 1)) return 0;
    return est__dtype_bytes(EST_DT_INT64, out_elements(c));
}

/* avg_pool2d: "self: avg_pool2d_backward(grad, self, kernel_size, ...)":
 * the backward reads only X's shape, but autograd keeps X itself. */
static void average_pool_saves(const est_cost_ctx *c, est_saved *s) {
    if (est_backward_runs(c)) est_save_input(c, s, 0);
}

/* F.lp_pool2d: pow keeps X; avg_pool2d keeps X^p (X-sized); abs, relu, the
 * sign * relu product and the final pow keep four output-sized tensors.
 * memest verify's fused kernel (verify/ops_pool.cu) keeps X and Y. */
static void lp_pool_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    est_save_input(c, s, 0);
    if (est_cost_kernels(c) == EST_KERNELS_VERIFY) {
        est_save_output(c, s, 0);
        return;
    }
    est_save_extra(s, est_tval_bytes(est_cost_in(c, 0)));
    est_save_extra(s, est_mul_sat(4, est_tval_bytes(est_cost_out(c, 0))));
}

/* adaptive_max_pool2d: "self: adaptive_max_pool2d_backward(grad, self,
 * result1)": X and the int64 indices. (GlobalAveragePool is mean(), which
 * keeps nothing but shapes.) */
static void global_max_pool_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    est_save_input(c, s, 0);
    est_save_extra(s, est__dtype_bytes(EST_DT_INT64, out_elements(c)));
}

/* torchvision roi_pool saves the rois and an int32 argmax per output element. */
static void max_roi_pool_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    est_save_input(c, s, 1);
    est_save_extra(s, est__dtype_bytes(EST_DT_INT32, out_elements(c)));
}

/* max_unpool2d: "self: max_pool_double_backward(grad, indices, 2)". */
static void max_unpool_saves(const est_cost_ctx *c, est_saved *s) {
    if (est_backward_runs(c)) est_save_input(c, s, 1);
}

EST_FAMILY(pool,
    {.name = "MaxPool", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 2,
     .infer = window_pool_infer, .flops = window_pool_flops, .saves = max_pool_saves,
     .workspace = max_pool_workspace},
    {.name = "AveragePool", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = window_pool_infer, .flops = window_pool_flops, .saves = average_pool_saves},
    {.name = "LpPool", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = window_pool_infer, .flops = lp_pool_flops, .saves = lp_pool_saves},
    {.name = "GlobalAveragePool", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = global_pool_infer, .flops = global_pool_flops},
    {.name = "GlobalMaxPool", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = global_pool_infer, .flops = global_pool_flops, .saves = global_max_pool_saves,
     .workspace = max_pool_workspace},
    {.name = "GlobalLpPool", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = global_pool_infer, .flops = global_lp_pool_flops, .saves = lp_pool_saves},
    /* rois are box coordinates, not weights */
    {.name = "MaxRoiPool", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = max_roi_pool_infer, .nondiff_inputs = EST_SLOT(1), .flops = max_roi_pool_flops,
     .saves = max_roi_pool_saves},
    {.name = "MaxUnpool", .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = max_unpool_infer, .nondiff_inputs = EST_SLOT(1) | EST_SLOT(2), .saves = max_unpool_saves},
);
