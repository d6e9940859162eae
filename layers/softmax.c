/* softmax.c: Softmax, LogSoftmax and Hardmax. */
#include "registry.h"

/* The output has the input's dtype and shape. `axis` defaults to 1 before
 * opset 13 (where it split the input, coerced to 2-D, into [:axis] x [axis:])
 * and to -1 from opset 13 on. */
static est_status softmax_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    int64_t axis;
    if ((st = est_attr_int(ctx, "axis", ctx->opset < 13 ? 1 : -1, &axis)) != EST_OK) return st;
    /* Before opset 11 the 2-D coercion also accepted axis == rank. */
    if (!(ctx->opset < 11 && axis == x->rank)) {
        int normalized;
        if ((st = est_axis(ctx, axis, x->rank, &normalized)) != EST_OK) return st;
    }
    return est_set_out_like(ctx, 0, x);
}

#define SOFTMAX_LIKE(op_name) \
    {.name = op_name, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, \
     .infer = softmax_infer}

EST_FAMILY(softmax,
    SOFTMAX_LIKE("Softmax"),
    SOFTMAX_LIKE("LogSoftmax"),
    SOFTMAX_LIKE("Hardmax"),
);
