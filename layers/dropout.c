/*
 * dropout.c: Dropout.
 *
 * Before opset 12 the ratio is an attribute; from 12 on, ratio and
 * training_mode are optional scalar inputs. The optional mask output has
 * the data's shape; its dtype is the data's before opset 10, bool after.
 *
 * FLOPs per element (docs/flops.md): 2 in training (draw the mask, scale
 * the kept values), 0 when the op is an identity; backward = 2 x forward.
 */
#include "registry.h"

/* Opset < 12: one input; `ratio` a float attribute in [0, 1). */
static est_status check_ratio_attr(est_infer_ctx *ctx) {
    if (est_in(ctx, 1) || est_in(ctx, 2))
        return est_op_fail(ctx, EST_EGRAPH, "takes its ratio as an attribute before opset 12, not as an input");
    double ratio;
    est_status st = est_attr_float(ctx, "ratio", 0.5, &ratio);
    if (st != EST_OK) return st;
    if (!(ratio >= 0 && ratio < 1))
        return est_op_fail(ctx, EST_EATTR, "attribute 'ratio' is %g, expected a value in [0, 1)", ratio);
    return EST_OK;
}

/* Opset >= 12: the optional inputs ratio (float) and training_mode (bool)
 * must be scalars; a known ratio must lie in [0, 1). */
static est_status check_ratio_inputs(est_infer_ctx *ctx) {
    int64_t seed;
    est_status st = est_attr_int(ctx, "seed", 0, &seed);
    if (st != EST_OK) return st;
    static const char *const names[] = {"", "ratio", "training_mode"};
    for (int i = 1; i <= 2; i++) {
        const est_tval *t = est_in(ctx, i);
        if (!t) continue;
        if (t->rank < 0 || t->elements != 1)
            return est_op_fail(ctx, EST_ESHAPE, "%s (input %d) must be a scalar; it has %lld elements", names[i], i,
                               (long long)t->elements);
        if (i == 2 && t->dtype != EST_DT_BOOL && t->dtype != EST_DT_UNDEFINED)
            return est_op_fail(ctx, EST_EGRAPH, "training_mode (input 2) is %s, expected bool",
                               est_dtype_name(t->dtype));
    }
    const est_tval *ratio = est_in(ctx, 1);
    if (ratio && ratio->value && ratio->value->count == 1) {
        double r = est_const_get_f(ratio->value, 0);
        if (!(r >= 0 && r < 1))
            return est_op_fail(ctx, EST_EATTR, "ratio (input 1) is %g, expected a value in [0, 1)", r);
    }
    return EST_OK;
}

/* Output is a copy of the data unless training_mode is given and not known
 * to be false (opset 12+); only then may its value pass through. */
static bool is_identity(const est_infer_ctx *ctx) {
    if (ctx->opset < 12) return false; /* whether the graph trains is not stated */
    const est_tval *training = est_in(ctx, 2);
    return !training || (training->value && training->value->count == 1 && est_const_get_i(training->value, 0) == 0);
}

static est_status dropout_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    st = ctx->opset < 12 ? check_ratio_attr(ctx) : check_ratio_inputs(ctx);
    if (st != EST_OK) return st;
    if ((st = est_set_out_like(ctx, 0, x)) != EST_OK) return st;
    est_dtype mask_dtype = ctx->opset < 10 ? x->dtype : EST_DT_BOOL;
    if ((st = est_set_out(ctx, 1, mask_dtype, x->rank, x->dims)) != EST_OK) return st;
    if (ctx->out[0] && is_identity(ctx)) ctx->out[0]->value = x->value; /* both outlive the run's rules */
    return EST_OK;
}

/* ---- training-step rules ------------------------------------------------- */

#define DROPOUT_FLOPS 2

/* The drop ratio: input 1 (opset 12+, default 0.5) or the attribute; -1
 * when the input is not known. */
static double dropout_ratio(const est_cost_ctx *c) {
    if (c->node->opset < 12) return est_node_attr_float(c->node, "ratio", 0.5);
    const est_tval *ratio = est_cost_in(c, 1);
    if (!ratio) return 0.5;
    return ratio->value && ratio->value->count == 1 ? est_const_get_f(ratio->value, 0) : -1;
}

/* True when the op drops values, as PyTorch's native_dropout does in
 * training with 0 < p: not in an inference step (model.eval()), nor when
 * the ratio is known to be 0, nor when it is an identity by ONNX's rules
 * (is_test before opset 7; training_mode absent or false from opset 12; in
 * between the graph does not say, and a training step trains). */
static bool dropout_drops(const est_cost_ctx *c) {
    if (!est_cost_train(c) || dropout_ratio(c) == 0) return false;
    if (c->node->opset < 7) return est_node_attr_int(c->node, "is_test", 0) == 0;
    if (c->node->opset < 12) return true;
    const est_tval *training = est_cost_in(c, 2);
    if (!training) return false;
    return !(training->value && training->value->count == 1 && est_const_get_i(training->value, 0) == 0);
}

/* at::dropout returns its input when p is 0 or it is not training */
static bool dropout_returns_input(const est_cost_ctx *c) { return !dropout_drops(c); }

static void dropout_flops(const est_cost_ctx *c, est_flops *f) {
    f->fwd = f->bwd = 0;
    if (dropout_drops(c)) est_flops_per_element(c, DROPOUT_FLOPS, est_tval_elements(est_cost_out(c, 0)), f);
}

/* native_dropout: "input: native_dropout_backward(grad, result1, scale)":
 * only the bool mask (1 byte per element), not the output. When the node
 * outputs the mask, that output is the saved tensor. */
static void dropout_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c) || !dropout_drops(c)) return;
    if (est_cost_out(c, 1)) est_save_output(c, s, 1);
    else est_save_extra(s, est_tval_elements(est_cost_in(c, 0)));
}

EST_FAMILY(dropout,
    /* ratio and training_mode take no gradient. */
    {.name = "Dropout", .min_inputs = 1, .max_inputs = 3, .min_outputs = 1, .max_outputs = 2,
     .infer = dropout_infer, .nondiff_inputs = EST_SLOT(1) | EST_SLOT(2), .flops = dropout_flops,
     .saves = dropout_saves, .returns_input = dropout_returns_input,
     /* memest verify's kernel writes the mask output, all ones when it drops nothing */
     .verify_writes_unread = true},
);
