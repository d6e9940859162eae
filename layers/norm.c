/* norm.c: normalization ops (Batch/Layer/Instance/Group/RMS/Lp normalization,
 * LRN, MeanVarianceNormalization). Every Y has X's dtype and shape; the rules
 * check the per-channel and per-feature inputs and shape the statistics. */
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

EST_FAMILY(norm,
    /* running statistics are state, not parameters */
    {.name = "BatchNormalization", .min_inputs = 5, .max_inputs = 5, .min_outputs = 1, .max_outputs = 5,
     .infer = batchnorm_infer, .buffer_inputs = EST_SLOT(3) | EST_SLOT(4)},
    {.name = "LayerNormalization", .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 3,
     .infer = layernorm_infer},
    {.name = "InstanceNormalization", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = instancenorm_infer},
    {.name = "GroupNormalization", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = groupnorm_infer},
    {.name = "RMSNormalization", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = rmsnorm_infer},
    {.name = "LpNormalization", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = lpnorm_infer},
    {.name = "LRN", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = lrn_infer},
    {.name = "MeanVarianceNormalization", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = mvn_infer},
);
