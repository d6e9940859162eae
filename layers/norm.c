/*
 * norm.c: normalization ops (Batch/Layer/Instance/Group/RMS/Lp normalization,
 * LRN, MeanVarianceNormalization). Every Y has X's dtype and shape; the rules
 * check the per-channel and per-feature inputs and shape the statistics.
 *
 * FLOPs per element of X (docs/flops.md); backward = 2 x forward when some
 * input needs a gradient:
 *   5  BatchNormalization (training), LayerNormalization,
 *      InstanceNormalization, GroupNormalization, MeanVarianceNormalization
 *      (mean, variance, subtract, scale, shift)
 *   2  BatchNormalization in inference mode (scale and shift)
 *   4  RMSNormalization (square, mean, scale, multiply)
 *   3  LpNormalization (square or abs, sum, divide)
 *   size + 8  LRN (square, window sum, scale and add, pow, divide)
 */
#include "registry.h"

/* Checks a per-channel input (scale, bias, mean, var) is 1-D of `channels`. */
static est_status check_channel_vector(est_infer_ctx *ctx, int slot, const char *name, int64_t channels) {
    const est_tval *t = est_in(ctx, slot);
    if (!t || t->rank < 0) return EST_OK;
    if (t->rank != 1 || t->dims[0] != channels)
        return est_op_fail(ctx, EST_ESHAPE, "input %s must be 1-D of %lld (the channels of X)", name,
                           (long long)channels);
    return EST_OK;
}

/* Before opset 9, spatial=0 gives per-activation statistics shaped (C, D1..). */
static est_status batchnorm_check_stats(est_infer_ctx *ctx, const est_tval *x) {
    static const char *const names[] = {"scale", "B", "input_mean", "input_var"};
    int64_t spatial = 1;
    est_status st;
    if (ctx->opset < 9 && (st = est_attr_int(ctx, "spatial", 1, &spatial)) != EST_OK) return st;
    if (!spatial) return EST_OK;
    for (int i = 1; i <= 4; i++)
        if ((st = check_channel_vector(ctx, i, names[i - 1], x->dims[1])) != EST_OK) return st;
    return EST_OK;
}

/* X (N, C, D..) -> Y like X. Training outputs: running mean and var shaped
 * and typed like input_mean; before opset 14 also saved mean and var, typed
 * like X. */
static est_status batchnorm_infer(est_infer_ctx *ctx) {
    const est_tval *x, *mean;
    est_status st;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK || (st = est_in_req(ctx, 3, &mean)) != EST_OK) return st;
    if (x->rank < 2) return est_op_fail(ctx, EST_ESHAPE, "input X has rank %d; needs at least 2 (N, C, ...)", x->rank);
    if ((st = batchnorm_check_stats(ctx, x)) != EST_OK) return st;
    if ((st = est_set_out_like(ctx, 0, x)) != EST_OK) return st;
    for (int i = 1; i <= 2; i++)
        if ((st = est_set_out(ctx, i, mean->dtype, mean->rank, mean->dims)) != EST_OK) return st;
    for (int i = 3; i <= 4; i++)
        if ((st = est_set_out(ctx, i, x->dtype, mean->rank, mean->dims)) != EST_OK) return st;
    return EST_OK;
}

/* Checks a per-feature input (LayerNorm's Scale and B) broadcasts to the
 * normalized dims X[axis..]. */
static est_status check_broadcasts_to(est_infer_ctx *ctx, int slot, const char *name, int rank,
                                      const int64_t *dims) {
    const est_tval *t = est_in(ctx, slot);
    if (!t || t->rank < 0) return EST_OK;
    bool ok = t->rank <= rank;
    for (int d = 0; ok && d < t->rank; d++) {
        int64_t want = dims[rank - t->rank + d];
        ok = t->dims[d] == want || t->dims[d] == 1;
    }
    if (!ok) return est_op_fail(ctx, EST_ESHAPE, "input %s (rank %d) does not broadcast to the normalized dims",
                                name, t->rank);
    return EST_OK;
}

/* Y like X; Mean and InvStdDev keep X's rank with the normalized dims (axis
 * onward) set to 1, typed by stash_type. */
static est_status layernorm_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    int64_t axis_attr, stash;
    int axis;
    if ((st = est_attr_int(ctx, "axis", -1, &axis_attr)) != EST_OK ||
        (st = est_attr_int(ctx, "stash_type", EST_DT_FLOAT, &stash)) != EST_OK ||
        (st = est_axis(ctx, axis_attr, x->rank, &axis)) != EST_OK)
        return st;
    if (stash <= EST_DT_UNDEFINED || stash >= EST_DT_COUNT)
        return est_op_fail(ctx, EST_EATTR, "stash_type %lld is not a known dtype", (long long)stash);
    int norm_rank = x->rank - axis;
    if ((st = check_broadcasts_to(ctx, 1, "Scale", norm_rank, x->dims + axis)) != EST_OK ||
        (st = check_broadcasts_to(ctx, 2, "B", norm_rank, x->dims + axis)) != EST_OK)
        return st;
    if ((st = est_set_out_like(ctx, 0, x)) != EST_OK) return st;
    int64_t stats[EST_MAX_RANK];
    for (int d = 0; d < x->rank; d++) stats[d] = d < axis ? x->dims[d] : 1;
    for (int i = 1; i <= 2; i++)
        if ((st = est_set_out(ctx, i, (est_dtype)stash, x->rank, stats)) != EST_OK) return st;
    return EST_OK;
}

/* input (N, C, ...), scale (C), B (C) -> like input. */
static est_status instancenorm_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    if (x->rank < 2) return est_op_fail(ctx, EST_ESHAPE, "input has rank %d; needs at least 2 (N, C, ...)", x->rank);
    if ((st = check_channel_vector(ctx, 1, "scale", x->dims[1])) != EST_OK ||
        (st = check_channel_vector(ctx, 2, "B", x->dims[1])) != EST_OK)
        return st;
    return est_set_out_like(ctx, 0, x);
}

/* X (N, C, ...) -> like X. scale and bias are per group at opset 18, per
 * channel from opset 21. */
static est_status groupnorm_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    if (x->rank < 2) return est_op_fail(ctx, EST_ESHAPE, "input X has rank %d; needs at least 2 (N, C, ...)", x->rank);
    int64_t groups;
    if ((st = est_attr_int(ctx, "num_groups", 0, &groups)) != EST_OK) return st;
    if (groups <= 0 || x->dims[1] % groups != 0)
        return est_op_fail(ctx, EST_EATTR, "num_groups %lld does not divide the %lld channels of X",
                           (long long)groups, (long long)x->dims[1]);
    int64_t per = ctx->opset >= 21 ? x->dims[1] : groups;
    if ((st = check_channel_vector(ctx, 1, "scale", per)) != EST_OK ||
        (st = check_channel_vector(ctx, 2, "bias", per)) != EST_OK)
        return st;
    return est_set_out_like(ctx, 0, x);
}

/* X, scale broadcastable to X[axis..] -> like X. */
static est_status rmsnorm_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    int64_t axis_attr;
    int axis;
    if ((st = est_attr_int(ctx, "axis", -1, &axis_attr)) != EST_OK ||
        (st = est_axis(ctx, axis_attr, x->rank, &axis)) != EST_OK)
        return st;
    if ((st = check_broadcasts_to(ctx, 1, "scale", x->rank - axis, x->dims + axis)) != EST_OK) return st;
    return est_set_out_like(ctx, 0, x);
}

/* Like input, after checking the axis attribute. */
static est_status lpnorm_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    int64_t axis_attr, p;
    int axis;
    if ((st = est_attr_int(ctx, "axis", -1, &axis_attr)) != EST_OK ||
        (st = est_attr_int(ctx, "p", 2, &p)) != EST_OK ||
        (st = est_axis(ctx, axis_attr, x->rank, &axis)) != EST_OK)
        return st;
    if (p != 1 && p != 2) return est_op_fail(ctx, EST_EATTR, "p must be 1 or 2, got %lld", (long long)p);
    return est_set_out_like(ctx, 0, x);
}

/* X (N, C, D..) -> like X; size is required. */
static est_status lrn_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    int64_t size;
    if ((st = est_attr_int(ctx, "size", 0, &size)) != EST_OK) return st;
    if (size <= 0) return est_op_fail(ctx, EST_EATTR, "attribute 'size' must be given and positive");
    if (x->rank < 2) return est_op_fail(ctx, EST_ESHAPE, "input X has rank %d; needs at least 2 (N, C, ...)", x->rank);
    return est_set_out_like(ctx, 0, x);
}

/* Like X, after checking every axis in 'axes' (default 0, 2, 3). */
static est_status mvn_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    const int64_t *axes;
    int64_t n;
    if ((st = est_attr_ints(ctx, "axes", &axes, &n)) != EST_OK) return st;
    int axis;
    for (int64_t i = 0; i < n; i++)
        if ((st = est_axis(ctx, axes[i], x->rank, &axis)) != EST_OK) return st;
    return est_set_out_like(ctx, 0, x);
}

/* ---- training-step rules ------------------------------------------------- */

#define NORMALIZE_FLOPS 5
#define AFFINE_FLOPS 2
#define RMS_NORM_FLOPS 4
#define LP_NORM_FLOPS 3
#define LRN_BASE_FLOPS 8

static uint64_t x_elements(const est_cost_ctx *c) { return est_tval_elements(est_cost_in(c, 0)); }

/* Product of X's dims [from, to). */
static uint64_t dims_product(const est_tval *x, int from, int to) {
    uint64_t p = 1;
    for (int d = from; x && d < to && d < x->rank; d++) p = est_mul_sat(p, (uint64_t)x->dims[d]);
    return p;
}

/* The first normalized axis of LayerNormalization / RMSNormalization. */
static int norm_axis(const est_cost_ctx *c) {
    const est_tval *x = est_cost_in(c, 0);
    int rank = x && x->rank > 0 ? x->rank : 1;
    int64_t axis = est_node_attr_int(c->node, "axis", -1);
    if (axis < 0) axis += rank;
    return axis < 0 ? 0 : axis > rank ? rank : (int)axis;
}

/* BatchNormalization computes batch statistics: training_mode (opset 14+),
 * or the running and saved statistics among its outputs (before). */
static bool batchnorm_trains(const est_cost_ctx *c) {
    if (c->node->opset >= 14) return est_cost_attr_int(c, EST_KA_TRAINING_MODE, 0) != 0;
    if (c->node->opset < 7 && est_node_attr_int(c->node, "is_test", 0)) return false;
    for (int i = 1; i <= 4; i++)
        if (est_cost_out(c, i)) return true;
    return false;
}

static void batchnorm_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, batchnorm_trains(c) ? NORMALIZE_FLOPS : AFFINE_FLOPS, x_elements(c), f);
}

/* native_batch_norm / cudnn_batch_norm: "input, weight, bias:
 * native_batch_norm_backward(grad, input, weight, running_mean, running_var,
 * result1, result2, training, ...)": X, the scale, the running statistics,
 * and in training save_mean and save_invstd (float32, one per channel). Before
 * opset 14 those two may be outputs 3 and 4. */
static void batchnorm_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    const int kept[] = {0, 1, 3, 4};
    for (int i = 0; i < 4; i++) est_save_input(c, s, kept[i]);
    if (!batchnorm_trains(c)) return;
    const est_tval *x = est_cost_in(c, 0);
    uint64_t stats = est_stat_bytes(x, dims_product(x, 1, 2));
    for (int i = 3; i <= 4; i++) {
        if (est_cost_out(c, i)) est_save_output(c, s, i);
        else est_save_extra(s, stats);
    }
}

static void normalize_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, NORMALIZE_FLOPS, x_elements(c), f);
}

/* native_layer_norm: "input, weight, bias: native_layer_norm_backward(grad,
 * input, normalized_shape, result1, result2, weight, bias, ...)": X, scale,
 * bias, and mean and rstd (float32, one per normalized row) unless the node
 * outputs them (Mean, InvStdDev). */
static void layernorm_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    for (int i = 0; i <= 2; i++) est_save_input(c, s, i);
    const est_tval *x = est_cost_in(c, 0);
    uint64_t stats = est_stat_bytes(x, dims_product(x, 0, norm_axis(c)));
    for (int i = 1; i <= 2; i++) {
        if (est_cost_out(c, i)) est_save_output(c, s, i);
        else est_save_extra(s, stats);
    }
}

/* instance_norm runs batch_norm on X viewed as (1, N*C, ...): it keeps X,
 * the scale repeated N times, and save_mean / save_invstd per (n, c). */
static void instancenorm_saves(const est_cost_ctx *c, est_saved *s) {
    const est_tval *x = est_cost_in(c, 0);
    if (!est_backward_runs(c) || !x) return;
    uint64_t planes = dims_product(x, 0, 2);
    est_save_input(c, s, 0);
    est_save_extra(s, est__dtype_bytes(x->dtype, planes));
    est_save_extra(s, est_stat_bytes(x, planes));
    est_save_extra(s, est_stat_bytes(x, planes));
}

/* native_group_norm: "input, weight, bias: native_group_norm_backward(grad,
 * input, result1, result2, weight, ...)": X, scale, and mean and rstd
 * (float32, one per (n, group)). */
static void groupnorm_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    const est_tval *x = est_cost_in(c, 0);
    int64_t groups = est_node_attr_int(c->node, "num_groups", 1);
    uint64_t stats = est_stat_bytes(x, est_mul_sat(dims_product(x, 0, 1), groups > 0 ? (uint64_t)groups : 1));
    est_save_input(c, s, 0);
    est_save_input(c, s, 1);
    est_save_extra(s, stats);
    est_save_extra(s, stats);
}

static void rmsnorm_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, RMS_NORM_FLOPS, x_elements(c), f);
}

/* _fused_rms_norm (rms_norm on CUDA): "input, weight:
 * _fused_rms_norm_backward(grad, input, normalized_shape, result1, weight,
 * ...)": X, scale and rstd (float32, one per row). */
static void rmsnorm_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    const est_tval *x = est_cost_in(c, 0);
    est_save_input(c, s, 0);
    est_save_input(c, s, 1);
    est_save_extra(s, est_stat_bytes(x, dims_product(x, 0, norm_axis(c))));
}

static void lpnorm_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, LP_NORM_FLOPS, x_elements(c), f);
}

/* F.normalize is x / norm(x).clamp_min(eps): linalg_vector_norm keeps x and
 * its result, the divide keeps x and the clamped norm: two row-sized
 * tensors made only for backward. */
static void lpnorm_saves(const est_cost_ctx *c, est_saved *s) {
    const est_tval *x = est_cost_in(c, 0);
    if (!est_backward_runs(c) || !x) return;
    int64_t axis = est_node_attr_int(c->node, "axis", -1);
    if (axis < 0) axis += x->rank;
    uint64_t reduced = axis >= 0 && axis < x->rank && x->dims[axis] > 0 ? (uint64_t)x->dims[axis] : 1;
    uint64_t rows = est_tval_bytes(x) / reduced;
    est_save_input(c, s, 0);
    est_save_extra(s, rows);
    est_save_extra(s, rows);
}

static void lrn_flops(const est_cost_ctx *c, est_flops *f) {
    int64_t size = est_node_attr_int(c->node, "size", 1);
    est_flops_per_element(c, est_add_sat(LRN_BASE_FLOPS, size > 0 ? (uint64_t)size : 0), x_elements(c), f);
}

/* F.local_response_norm: x*x keeps x; avg_pool2d keeps the padded squares;
 * pow keeps its base; the final divide keeps x and the divisor: three
 * X-sized tensors made only for backward. */
static void lrn_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    uint64_t bytes = est_tval_bytes(est_cost_in(c, 0));
    est_save_input(c, s, 0);
    for (int i = 0; i < 3; i++) est_save_extra(s, bytes);
}

/* No ATen op: (x - mean) / sqrt(var + eps) keeps x (for the variance), the
 * centered x, and the standard deviation and its square root per row. */
static void mvn_saves(const est_cost_ctx *c, est_saved *s) {
    const est_tval *x = est_cost_in(c, 0);
    if (!est_backward_runs(c) || !x) return;
    static const int64_t default_axes[] = {0, 2, 3};
    int64_t n;
    const int64_t *axes = est_node_attr_ints(c->node, "axes", &n);
    if (!axes) {
        axes = default_axes;
        n = 3;
    }
    uint64_t reduced = 1;
    for (int64_t i = 0; i < n; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + x->rank : axes[i];
        if (a >= 0 && a < x->rank && x->dims[a] > 0) reduced = est_mul_sat(reduced, (uint64_t)x->dims[a]);
    }
    uint64_t rows = est_tval_bytes(x) / reduced;
    est_save_input(c, s, 0);
    est_save_extra(s, est_tval_bytes(x));
    est_save_extra(s, rows);
    est_save_extra(s, rows);
}

EST_FAMILY(norm,
    /* running statistics are state, not parameters */
    {.name = "BatchNormalization", .min_inputs = 5, .max_inputs = 5, .min_outputs = 1, .max_outputs = 5,
     .infer = batchnorm_infer, .buffer_inputs = EST_SLOT(3) | EST_SLOT(4), .flops = batchnorm_flops,
     .saves = batchnorm_saves},
    {.name = "LayerNormalization", .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 3,
     .infer = layernorm_infer, .flops = normalize_flops, .saves = layernorm_saves},
    {.name = "InstanceNormalization", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = instancenorm_infer, .flops = normalize_flops, .saves = instancenorm_saves},
    {.name = "GroupNormalization", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = groupnorm_infer, .flops = normalize_flops, .saves = groupnorm_saves},
    {.name = "RMSNormalization", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = rmsnorm_infer, .flops = rmsnorm_flops, .saves = rmsnorm_saves},
    {.name = "LpNormalization", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = lpnorm_infer, .flops = lpnorm_flops, .saves = lpnorm_saves},
    {.name = "LRN", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = lrn_infer, .flops = lrn_flops, .saves = lrn_saves},
    {.name = "MeanVarianceNormalization", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = mvn_infer, .flops = normalize_flops, .saves = mvn_saves},
);
