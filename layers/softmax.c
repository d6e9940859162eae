/*
 * softmax.c: Softmax, LogSoftmax and Hardmax.
 *
 * FLOPs per element (docs/flops.md); backward = 2 x forward when X needs a
 * gradient:
 *   8  Softmax LogSoftmax (max 1, subtract 1, exp 4, sum 1, divide or
 *      subtract the log 1)
 *   1  Hardmax (an arg max; its output carries no gradient)
 */
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

/* ---- training-step rules ------------------------------------------------- */

#define SOFTMAX_FLOPS 8
#define HARDMAX_FLOPS 1

static void softmax_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, SOFTMAX_FLOPS, est_tval_elements(est_cost_out(c, 0)), f);
}

/* Hardmax is argmax + one_hot: not differentiable. */
static void hardmax_flops(const est_cost_ctx *c, est_flops *f) {
    f->fwd = est_mul_sat(HARDMAX_FLOPS, est_tval_elements(est_cost_out(c, 0)));
    f->bwd = 0;
}

/* _softmax: "self: _softmax_backward_data(grad, result, dim, ...)";
 * _log_softmax: "self: _log_softmax_backward_data(grad, result, dim, ...)". */
static void softmax_saves(const est_cost_ctx *c, est_saved *s) {
    if (est_backward_runs(c)) est_save_output(c, s, 0);
}

/* _softmax_backward_data on CUDA makes the product of the gradient and the
 * result as a temporary beside its own result: every Softmax backward of
 * the per-op probes peaks at twice its result (bart_small, t5_encdec,
 * mobilevit_like, H100, 2026-11-24; whisper_encoder, bloom_4l, gpt_neox_4l,
 * deberta_v2_small, maxvit_t, H100, 2026-11-27: 8 of 8 models), as the
 * attention rule's math kernel does (layers/linear.c). memest verify's
 * kernel makes none. */
static uint64_t softmax_backward_workspace(const est_cost_ctx *c) {
    if (est_cost_kernels(c) == EST_KERNELS_VERIFY || !est_backward_runs(c) || !est_needs_grad(c, 0)) return 0;
    return est_cost_bytes(c, est_cost_out(c, 0));
}

#define SOFTMAX_LIKE(op_name, ...) \
    {.name = op_name, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, \
     .infer = softmax_infer, __VA_ARGS__}

EST_FAMILY(softmax,
    /* inside a transformer layer, Softmax computes attention probabilities:
     * Hugging Face's eager attention returns them, and the layer keeps the
     * returned tuple until it returns (BertLayer's `self_attention_output, _
     * = self.attention(...)`) */
    SOFTMAX_LIKE("Softmax", .flops = softmax_flops, .saves = softmax_saves,
                 .backward_workspace = softmax_backward_workspace, .held_by_block = true),
    SOFTMAX_LIKE("LogSoftmax", .flops = softmax_flops, .saves = softmax_saves),
    SOFTMAX_LIKE("Hardmax", .flops = hardmax_flops),
);
