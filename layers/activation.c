/*
 * activation.c: element-wise activations (Relu, Gelu, Sigmoid, Clip, ...).
 * The output always has X's dtype and shape; the rules check attributes and,
 * for PRelu and Clip, the extra inputs. Clip folds, since exported shape
 * arithmetic sometimes clamps an index with it.
 *
 * FLOPs per element (docs/flops.md); backward = 2 x forward when X needs a
 * gradient:
 *   1  Relu LeakyRelu PRelu ThresholdedRelu Clip Shrink
 *   2  HardSigmoid (a multiply-add, then a clamp)
 *   3  HardSwish (HardSigmoid, then a multiply)
 *   4  Sigmoid Tanh Elu Celu Selu Softplus Softsign (one exp-like function)
 *   8  Gelu Mish (a transcendental function plus a few multiplies and adds)
 */
#include <math.h>
#include <string.h>

#include "registry.h"

/* Checks that the named attributes, where present, are floats; then the
 * output is like X. */
static est_status like_input_with_floats(est_infer_ctx *ctx, const char *const *names) {
    for (; *names; names++) {
        double ignored;
        est_status st = est_attr_float(ctx, *names, 0, &ignored);
        if (st != EST_OK) return st;
    }
    return est_infer_like_input0(ctx);
}

#define FLOAT_ATTRS_RULE(fn, ...)                                  \
    static est_status fn(est_infer_ctx *ctx) {                     \
        static const char *const names[] = {__VA_ARGS__, NULL};    \
        return like_input_with_floats(ctx, names);                 \
    }

FLOAT_ATTRS_RULE(alpha_infer, "alpha") /* LeakyRelu, Elu, Celu, ThresholdedRelu, Swish */
FLOAT_ATTRS_RULE(selu_infer, "alpha", "gamma")
FLOAT_ATTRS_RULE(hard_sigmoid_infer, "alpha", "beta")
FLOAT_ATTRS_RULE(shrink_infer, "bias", "lambd")

/* Gelu (opset 20): `approximate` is "none" or "tanh". */
static est_status gelu_infer(est_infer_ctx *ctx) {
    const char *approx;
    est_status st = est_attr_string(ctx, "approximate", &approx);
    if (st != EST_OK) return st;
    if (approx && strcmp(approx, "none") != 0 && strcmp(approx, "tanh") != 0)
        return est_op_fail(ctx, EST_EATTR, "attribute 'approximate' is '%s', expected 'none' or 'tanh'", approx);
    return est_infer_like_input0(ctx);
}

/* BLOOM's GeLUFunction (libestimate/fuse.c: memest.bloom_gelu): PyTorch
 * runs its formula op by op, each step a tensor of x's size, where a gelu
 * kernel makes none. Per-op probe (H100, 2026-11-27, bench/accuracy/data/
 * blind3/), matching Python's order of evaluation:
 *   forward, bloom_gelu_forward: x * 0.5, 0.79788456 * x and 0.044715 * x
 *   are live when their product is made, four temporaries and no output
 *   yet; beyond the output, three.
 *   backward, bloom_gelu_back: tanh_out, 0.5 * x, 1 - tanh_out^2,
 *   0.1070322243 * x and its product with x are live at once, five, before
 *   the input's gradient is made; beyond it, four.
 * memest verify's gelu kernel makes none. */
static bool runs_bloom_gelu(const est_cost_ctx *c) {
    return est_cost_kernels(c) != EST_KERNELS_VERIFY && est_node_attr_int(c->node, "memest.bloom_gelu", 0) == 1;
}

static uint64_t gelu_workspace(const est_cost_ctx *c) {
    return runs_bloom_gelu(c) ? est_mul_sat(3, est_cost_bytes(c, est_cost_in(c, 0))) : 0;
}

static uint64_t gelu_backward_workspace(const est_cost_ctx *c) {
    return runs_bloom_gelu(c) && est_needs_grad(c, 0) ? est_mul_sat(4, est_cost_bytes(c, est_cost_in(c, 0))) : 0;
}

/* PRelu: slope broadcasts one way to X (opset 7+), so Y has X's shape. */
static est_status prelu_infer(est_infer_ctx *ctx) {
    const est_tval *x, *slope;
    est_status st;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK || (st = est_in_req(ctx, 1, &slope)) != EST_OK) return st;
    if (slope->rank > x->rank)
        return est_op_fail(ctx, EST_ESHAPE, "slope has rank %d, more than X's %d; it must broadcast to X",
                           slope->rank, x->rank);
    for (int d = 1; d <= slope->rank; d++) {
        int64_t s = slope->dims[slope->rank - d], xd = x->dims[x->rank - d];
        if (s != 1 && s != xd)
            return est_op_fail(ctx, EST_ESHAPE, "slope dim %lld does not broadcast to X's dim %lld (axis %d of X)",
                               (long long)s, (long long)xd, x->rank - d);
    }
    return est_set_out_like(ctx, 0, x);
}

/* Clip's bounds as inputs (opset 11+): each absent or a one-element tensor of
 * X's type. */
static est_status check_clip_bound(est_infer_ctx *ctx, int i, const est_tval *x) {
    const est_tval *b = est_in(ctx, i);
    if (!b) return EST_OK;
    const char *what = i == 1 ? "min" : "max";
    if (b->rank < 0 || b->elements != 1)
        return est_op_fail(ctx, EST_ESHAPE, "%s (input %d) must be a scalar; it has %lld elements", what, i,
                           (long long)b->elements);
    if (b->dtype != x->dtype && b->dtype != EST_DT_UNDEFINED && x->dtype != EST_DT_UNDEFINED)
        return est_op_fail(ctx, EST_EGRAPH, "%s (input %d) is %s but X is %s; the types must match", what, i,
                           est_dtype_name(b->dtype), est_dtype_name(x->dtype));
    return EST_OK;
}

/* Folds y = min(max(x, lo), hi) (so lo > hi gives hi, as ONNX specifies).
 * Bounds come from inputs lo_t/hi_t when given, else from lo/hi. */
static void clip_fold(est_infer_ctx *ctx, const est_tval *x, const est_tval *lo_t, const est_tval *hi_t,
                      double lo, double hi) {
    if (!x->value || x->value->count != x->elements || (lo_t && !lo_t->value) || (hi_t && !hi_t->value)) return;
    if (x->value->i64 && (isfinite(lo) || isfinite(hi))) return; /* integer X has no attribute bounds */
    est_const *c = est_fold_out(ctx, 0, x->dtype);
    if (!c) return;
    for (int64_t k = 0; k < c->count; k++) {
        if (c->i64) {
            int64_t v = x->value->i64[k];
            if (lo_t && v < est_const_get_i(lo_t->value, 0)) v = est_const_get_i(lo_t->value, 0);
            if (hi_t && v > est_const_get_i(hi_t->value, 0)) v = est_const_get_i(hi_t->value, 0);
            c->i64[k] = v;
        } else {
            double v = x->value->f64[k];
            double l = lo_t ? est_const_get_f(lo_t->value, 0) : lo, h = hi_t ? est_const_get_f(hi_t->value, 0) : hi;
            if (v < l) v = l;
            if (v > h) v = h;
            c->f64[k] = v;
        }
    }
}

/* Clip: bounds are attributes `min`/`max` before opset 11, optional inputs 1
 * and 2 from then on. */
static est_status clip_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    double lo = -INFINITY, hi = INFINITY;
    if (ctx->opset < 11) {
        if (est_in(ctx, 1) || est_in(ctx, 2))
            return est_op_fail(ctx, EST_EGRAPH, "takes min and max as attributes before opset 11, not as inputs");
        if ((st = est_attr_float(ctx, "min", -INFINITY, &lo)) != EST_OK ||
            (st = est_attr_float(ctx, "max", INFINITY, &hi)) != EST_OK)
            return st;
    } else if ((st = check_clip_bound(ctx, 1, x)) != EST_OK || (st = check_clip_bound(ctx, 2, x)) != EST_OK) {
        return st;
    }
    if ((st = est_set_out_like(ctx, 0, x)) != EST_OK) return st;
    clip_fold(ctx, x, est_in(ctx, 1), est_in(ctx, 2), lo, hi);
    return EST_OK;
}

/* ---- training-step rules ------------------------------------------------- */

#define PIECEWISE_LINEAR_FLOPS 1
#define HARD_SIGMOID_FLOPS 2
#define HARD_SWISH_FLOPS 3
#define TRANSCENDENTAL_FLOPS 4
#define COMPOSITE_FLOPS 8

#define PER_ELEMENT_RULE(fn, per_element)                                                     \
    static void fn(const est_cost_ctx *c, est_flops *f) {                                    \
        est_flops_per_element(c, per_element, est_tval_elements(est_cost_out(c, 0)), f);     \
    }

PER_ELEMENT_RULE(piecewise_linear_flops, PIECEWISE_LINEAR_FLOPS)
PER_ELEMENT_RULE(hard_sigmoid_flops, HARD_SIGMOID_FLOPS)
PER_ELEMENT_RULE(hard_swish_flops, HARD_SWISH_FLOPS)
PER_ELEMENT_RULE(transcendental_flops, TRANSCENDENTAL_FLOPS)
PER_ELEMENT_RULE(composite_flops, COMPOSITE_FLOPS)

/* relu ("threshold_backward(grad, result, 0)"), sigmoid
 * ("sigmoid_backward(grad, result)"), tanh ("tanh_backward(grad, result)"):
 * the formula reads the result. */
static void saves_output(const est_cost_ctx *c, est_saved *s) {
    if (est_backward_runs(c)) est_save_output(c, s, 0);
}

/* gelu ("gelu_backward(grad, self, approximate)"), silu (Swish:
 * "silu_backward(grad, self)"), leaky_relu, elu / celu /
 * selu ("elu_backward(..., is_result=false, self)"), hardswish, hardsigmoid,
 * softplus, mish, hardshrink / softshrink, threshold (ThresholdedRelu), clamp
 * ("clamp_backward(grad, self, min, max)"): the formula reads self. */
static void saves_input(const est_cost_ctx *c, est_saved *s) {
    if (est_backward_runs(c)) est_save_input(c, s, 0);
}

/* softsign is x / (1 + |x|): abs keeps x, the divide keeps x and the
 * denominator, a tensor made only for backward. */
static void softsign_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    est_save_input(c, s, 0);
    est_save_extra(s, est_tval_bytes(est_cost_out(c, 0)));
}

/* _prelu_kernel: "self, weight: _prelu_kernel_backward(grad, self, weight)". */
static void prelu_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    est_save_input(c, s, 0);
    est_save_input(c, s, 1);
}

/* _prelu_kernel_backward makes the slope's gradient at X's size ("self >
 * 0 ? 0 : self * grad" over the broadcast weight); autograd then sums it to
 * the slope's shape. verify/ops_math.cu does the same, its sum staging
 * nothing (est_sum_to_workspace is 0 under --kernels verify). */
static uint64_t prelu_backward_workspace(const est_cost_ctx *c) {
    if (!est_needs_grad(c, 1)) return 0;
    const est_tval *x = est_cost_in(c, 0), *w = est_cost_in(c, 1);
    if (!x || !w || w->elements >= x->elements) return 0;
    return est_add_sat(est_cost_bytes(c, est_cost_out(c, 0)), est_sum_to_workspace(c, 1));
}

#define UNARY(op_name, rule, ...) \
    {.name = op_name, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = rule, \
     __VA_ARGS__}

EST_FAMILY(activation,
    UNARY("Relu", est_infer_like_input0, .flops = piecewise_linear_flops, .saves = saves_output),
    UNARY("Sigmoid", est_infer_like_input0, .flops = transcendental_flops, .saves = saves_output),
    UNARY("Tanh", est_infer_like_input0, .flops = transcendental_flops, .saves = saves_output),
    UNARY("HardSwish", est_infer_like_input0, .flops = hard_swish_flops, .saves = saves_input),
    UNARY("Softplus", est_infer_like_input0, .flops = transcendental_flops, .saves = saves_input),
    UNARY("Softsign", est_infer_like_input0, .flops = transcendental_flops, .saves = softsign_saves),
    UNARY("Mish", est_infer_like_input0, .flops = composite_flops, .saves = saves_input),
    UNARY("LeakyRelu", alpha_infer, .flops = piecewise_linear_flops, .saves = saves_input),
    UNARY("Elu", alpha_infer, .flops = transcendental_flops, .saves = saves_input),
    UNARY("Celu", alpha_infer, .flops = transcendental_flops, .saves = saves_input),
    UNARY("ThresholdedRelu", alpha_infer, .flops = piecewise_linear_flops, .saves = saves_input),
    UNARY("Selu", selu_infer, .flops = transcendental_flops, .saves = saves_input),
    UNARY("HardSigmoid", hard_sigmoid_infer, .flops = hard_sigmoid_flops, .saves = saves_input),
    UNARY("Shrink", shrink_infer, .flops = piecewise_linear_flops, .saves = saves_input),
    UNARY("Gelu", gelu_infer, .flops = composite_flops, .saves = saves_input, .workspace = gelu_workspace,
          .backward_workspace = gelu_backward_workspace),
    /* x * sigmoid(alpha x) (opset 24); also what libestimate/fuse.c folds an
     * exported SiLU back into */
    UNARY("Swish", alpha_infer, .flops = composite_flops, .saves = saves_input),
    {.name = "PRelu", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = prelu_infer, .flops = piecewise_linear_flops, .saves = prelu_saves,
     .backward_workspace = prelu_backward_workspace},
    /* min and max take no gradient. */
    {.name = "Clip", .min_inputs = 1, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = clip_infer, .nondiff_inputs = EST_SLOT(1) | EST_SLOT(2), .flops = piecewise_linear_flops,
     .saves = saves_input},
);
