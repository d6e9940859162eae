/*
 * math.c: element-wise math. Unary functions, broadcasting arithmetic,
 * comparisons and logic, variadic Max/Min/Sum/Mean, Where, Cast and CastLike
 * (the broadcasting ops' rule and folds are in math_broadcast.c).
 *
 * Every rule folds its output when all its inputs are known, because shape
 * arithmetic in exported graphs (Shape -> Gather -> Mul -> Concat -> Reshape)
 * runs through these ops. Folding computes in int64 or double and then
 * converts to the output dtype the way the ONNX kernels do: integers wrap to
 * their width, floats round to their precision.
 *
 * FLOPs per output element (docs/flops.md); backward = 2 x forward when
 * some input needs a gradient and the output is floating:
 *   1  Add Sub Mul Div Mod Neg Abs Reciprocal Where, comparisons, logic,
 *      bitwise ops, IsNaN IsInf; Floor Ceil Round Sign (backward 0: their
 *      gradient is zeros)
 *   4  Exp Log Sqrt Pow Erf and the trigonometric / hyperbolic functions
 *   n-1  Sum Max Min of n inputs;  n  Mean of n inputs
 *   0  Cast CastLike (data movement)
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "math_family.h"
#include "registry.h"

#define ELEMENTWISE_RULE(fn, kind) \
    static est_status fn(est_infer_ctx *ctx) { return est__elementwise_infer(ctx, kind); }

ELEMENTWISE_RULE(add_infer, EW_ADD)
ELEMENTWISE_RULE(sub_infer, EW_SUB)
ELEMENTWISE_RULE(mul_infer, EW_MUL)
ELEMENTWISE_RULE(div_infer, EW_DIV)
ELEMENTWISE_RULE(pow_infer, EW_POW)
ELEMENTWISE_RULE(mod_infer, EW_MOD)
ELEMENTWISE_RULE(bitshift_infer, EW_BITSHIFT)
ELEMENTWISE_RULE(bitwise_and_infer, EW_BIT_AND)
ELEMENTWISE_RULE(bitwise_or_infer, EW_BIT_OR)
ELEMENTWISE_RULE(bitwise_xor_infer, EW_BIT_XOR)
ELEMENTWISE_RULE(and_infer, EW_AND)
ELEMENTWISE_RULE(or_infer, EW_OR)
ELEMENTWISE_RULE(xor_infer, EW_XOR)
ELEMENTWISE_RULE(equal_infer, EW_EQUAL)
ELEMENTWISE_RULE(less_infer, EW_LESS)
ELEMENTWISE_RULE(greater_infer, EW_GREATER)
ELEMENTWISE_RULE(less_equal_infer, EW_LESS_EQUAL)
ELEMENTWISE_RULE(greater_equal_infer, EW_GREATER_EQUAL)
ELEMENTWISE_RULE(max_infer, EW_MAX)
ELEMENTWISE_RULE(min_infer, EW_MIN)
ELEMENTWISE_RULE(sum_infer, EW_ADD)
ELEMENTWISE_RULE(mean_infer, EW_MEAN)
ELEMENTWISE_RULE(where_infer, EW_WHERE)

/* ---- unary ops ----------------------------------------------------------- */

typedef enum un_kind {
    UN_FUNC, /* a float function of one value: exp, sqrt, floor, ... */
    UN_ABS, UN_NEG, UN_SIGN, UN_BIT_NOT, UN_NOT, UN_ISNAN, UN_ISINF,
} un_kind;

typedef struct un_op {
    un_kind kind;
    double (*fn)(double);       /* UN_FUNC */
    bool u64;                   /* uint64 input: Abs and Sign see it unsigned */
    bool detect_neg, detect_pos; /* IsInf */
} un_op;

static double reciprocal(double x) { return 1.0 / x; }

static num unary_apply(const un_op *op, num a) {
    switch (op->kind) {
    case UN_ABS:
        if (a.is_f) return num_of_float(fabs(a.f));
        return num_of_int(a.i < 0 && !op->u64 ? (int64_t)(0 - (uint64_t)a.i) : a.i);
    case UN_NEG: return a.is_f ? num_of_float(-a.f) : num_of_int((int64_t)(0 - (uint64_t)a.i));
    case UN_SIGN:
        if (a.is_f) return num_of_float(isnan(a.f) ? a.f : (a.f > 0) - (a.f < 0));
        return num_of_int(op->u64 ? a.i != 0 : (a.i > 0) - (a.i < 0));
    case UN_BIT_NOT: return num_of_int(~a.i);
    case UN_NOT: return num_of_int(!num_truth(a));
    case UN_ISNAN: return num_of_int(a.is_f && isnan(a.f));
    case UN_ISINF: return num_of_int(a.is_f && isinf(a.f) && (a.f > 0 ? op->detect_pos : op->detect_neg));
    case UN_FUNC: break;
    }
    return num_of_float(op->fn(num_as_f(a)));
}

/* IsInf's detect_negative / detect_positive (both default on). */
static est_status read_isinf_attrs(est_infer_ctx *ctx, un_op *op) {
    int64_t neg, pos;
    est_status st;
    if ((st = est_attr_int(ctx, "detect_negative", 1, &neg)) != EST_OK ||
        (st = est_attr_int(ctx, "detect_positive", 1, &pos)) != EST_OK)
        return st;
    op->detect_neg = neg != 0;
    op->detect_pos = pos != 0;
    return EST_OK;
}

/* Stores op of x's values in c, as num_put(unary_apply(...)) does; Not of
 * integers (bools) and the float functions of floats without a num per
 * element. */
static void unary_values(const un_op *op, const est_const *x, est_const *c) {
    est_dtype dt = c->dtype; /* in locals: with -fno-strict-aliasing, stores would reload c's fields */
    int64_t count = c->count;
    if (op->kind == UN_NOT && x->i64 && c->i64) {
        const int64_t *in = x->i64;
        int64_t *out = c->i64;
        for (int64_t k = 0; k < count; k++) out[k] = wrap_int(dt, in[k] == 0);
    } else if (op->kind == UN_FUNC && x->f64 && c->f64) {
        const double *in = x->f64;
        double *out = c->f64;
        for (int64_t k = 0; k < count; k++) out[k] = round_to_dtype(dt, op->fn(in[k]));
    } else {
        for (int64_t k = 0; k < count; k++) num_put(c, k, unary_apply(op, num_get(x, k)));
    }
}

/* Unary ops keep the input's shape; IsNaN and IsInf give bool. */
static est_status unary_infer(est_infer_ctx *ctx, un_kind kind, double (*fn)(double)) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    un_op op = {.kind = kind, .fn = fn, .u64 = x->dtype == EST_DT_UINT64};
    if (kind == UN_ISINF && (st = read_isinf_attrs(ctx, &op)) != EST_OK) return st;
    est_dtype dt = kind == UN_ISNAN || kind == UN_ISINF ? EST_DT_BOOL : x->dtype;
    if ((st = est_set_out(ctx, 0, dt, x->rank, x->dims)) != EST_OK) return st;
    est_const *c = known(x) ? fold_out(ctx, dt) : NULL;
    if (c) unary_values(&op, x->value, c);
    return EST_OK;
}

#define UNARY_RULE(fn, kind) \
    static est_status fn(est_infer_ctx *ctx) { return unary_infer(ctx, kind, NULL); }
#define UNARY_FUNC_RULE(fn, func) \
    static est_status fn(est_infer_ctx *ctx) { return unary_infer(ctx, UN_FUNC, func); }

UNARY_RULE(abs_infer, UN_ABS)
UNARY_RULE(neg_infer, UN_NEG)
UNARY_RULE(sign_infer, UN_SIGN)
UNARY_RULE(bitwise_not_infer, UN_BIT_NOT)
UNARY_RULE(not_infer, UN_NOT)
UNARY_RULE(isnan_infer, UN_ISNAN)
UNARY_RULE(isinf_infer, UN_ISINF)
UNARY_FUNC_RULE(exp_infer, exp)
UNARY_FUNC_RULE(log_infer, log)
UNARY_FUNC_RULE(sqrt_infer, sqrt)
UNARY_FUNC_RULE(reciprocal_infer, reciprocal)
UNARY_FUNC_RULE(floor_infer, floor)
UNARY_FUNC_RULE(ceil_infer, ceil)
UNARY_FUNC_RULE(round_infer, nearbyint) /* halves to even, like ONNX Round */
UNARY_FUNC_RULE(sin_infer, sin)
UNARY_FUNC_RULE(cos_infer, cos)
UNARY_FUNC_RULE(tan_infer, tan)
UNARY_FUNC_RULE(asin_infer, asin)
UNARY_FUNC_RULE(acos_infer, acos)
UNARY_FUNC_RULE(atan_infer, atan)
UNARY_FUNC_RULE(sinh_infer, sinh)
UNARY_FUNC_RULE(cosh_infer, cosh)
UNARY_FUNC_RULE(asinh_infer, asinh)
UNARY_FUNC_RULE(acosh_infer, acosh)
UNARY_FUNC_RULE(atanh_infer, atanh)
UNARY_FUNC_RULE(erf_infer, erf)

/* ---- Cast and CastLike --------------------------------------------------- */

/* Stores x's values in c, converted as num_put does; without a num per
 * element unless floats become integers. */
static void convert_values(const est_const *x, est_const *c) {
    est_dtype dt = c->dtype; /* in locals: with -fno-strict-aliasing, stores would reload c's fields */
    int64_t count = c->count;
    if (x->i64 && c->i64) {
        const int64_t *in = x->i64;
        int64_t *out = c->i64;
        for (int64_t k = 0; k < count; k++) out[k] = wrap_int(dt, in[k]);
    } else if (x->f64 && c->f64) {
        const double *in = x->f64;
        double *out = c->f64;
        for (int64_t k = 0; k < count; k++) out[k] = round_to_dtype(dt, in[k]);
    } else if (x->i64 && c->f64) {
        const int64_t *in = x->i64;
        double *out = c->f64;
        for (int64_t k = 0; k < count; k++) out[k] = round_to_dtype(dt, (double)in[k]);
    } else {
        for (int64_t k = 0; k < count; k++) num_put(c, k, num_get(x, k));
    }
}

/* Converts X to `to`: floats truncate toward zero into integers, integers
 * wrap, anything nonzero is true. */
static est_status cast_to(est_infer_ctx *ctx, est_dtype to) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    if (to == EST_DT_STRING)
        return est_op_fail(ctx, EST_EUNSUPPORTED, "casting to string: string tensors have no static size");
    if ((st = est_set_out(ctx, 0, to, x->rank, x->dims)) != EST_OK) return st;
    est_const *c = known(x) ? fold_out(ctx, to) : NULL;
    if (c) convert_values(x->value, c);
    return EST_OK;
}

/* Cast: the target type is attribute `to` (opset 19's `saturate` only
 * matters for float8 values, which are never folded). */
static est_status cast_infer(est_infer_ctx *ctx) {
    if (!est_attr_get(ctx->node, "to")) return est_op_fail(ctx, EST_EATTR, "attribute 'to' is required");
    int64_t to;
    est_status st = est_attr_int(ctx, "to", 0, &to);
    if (st != EST_OK) return st;
    if (to <= EST_DT_UNDEFINED || to >= EST_DT_COUNT)
        return est_op_fail(ctx, EST_EATTR, "attribute 'to' is %lld, which is no ONNX element type", (long long)to);
    return cast_to(ctx, (est_dtype)to);
}

/* A Cast to the dtype its input has already is that input: PyTorch's
 * Tensor.to, .float() and softmax's dtype argument return self when the
 * dtype is the same (the TorchScript exporter still writes a Cast; per-op
 * probe of BLOOM's F.softmax(..., dtype=float32).to(float32), H100,
 * 2026-11-27: no copy), and memest verify's cast_fwd makes a view
 * (verify/ops_elementwise.cu). Under --amp the export's dtypes are not the
 * step's (an upcast of a low output is a real copy): there only verify's
 * executor, which runs the export's dtypes, is sure. */
static bool cast_returns_input(const est_cost_ctx *c) {
    const est_tval *x = est_cost_in(c, 0), *y = est_cost_out(c, 0);
    if (!x || !y || x->dtype != y->dtype) return false;
    return est_cost_kernels(c) == EST_KERNELS_VERIFY || !est_cost_autocast(c);
}

/* CastLike: the target type is input 1's. */
static est_status cast_like_infer(est_infer_ctx *ctx) {
    const est_tval *like;
    est_status st = est_in_req(ctx, 1, &like);
    if (st != EST_OK) return st;
    return cast_to(ctx, like->dtype);
}

/* ---- training-step rules ------------------------------------------------- */

#define SIMPLE_FLOPS 1          /* one arithmetic, compare or select */
#define TRANSCENDENTAL_FLOPS 4  /* exp, log, sqrt, erf, pow, trigonometry */

static uint64_t out_elements(const est_cost_ctx *c) { return est_tval_elements(est_cost_out(c, 0)); }

static void simple_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, SIMPLE_FLOPS, out_elements(c), f);
}

static void transcendental_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, TRANSCENDENTAL_FLOPS, out_elements(c), f);
}

/* Floor, Ceil, Round, Sign: "self: zeros_like(grad)", no backward work. */
static void piecewise_constant_flops(const est_cost_ctx *c, est_flops *f) {
    f->fwd = est_mul_sat(SIMPLE_FLOPS, out_elements(c));
    f->bwd = 0;
}

/* Sum, Max, Min of n inputs: n - 1 combines per element. */
static void variadic_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, c->n_in > 1 ? (uint64_t)(c->n_in - 1) : 0, out_elements(c), f);
}

/* Mean: n - 1 adds and a divide. */
static void mean_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, (uint64_t)c->n_in, out_elements(c), f);
}

/* abs ("grad * self.sgn()"), log ("grad.div(self.conj())"), sin, cos, asin,
 * acos, atan, sinh, cosh, asinh, acosh, atanh, erf: the formula reads self. */
static void saves_input(const est_cost_ctx *c, est_saved *s) {
    if (est_backward_runs(c)) est_save_input(c, s, 0);
}

/* exp ("grad * result"), sqrt ("grad / (2 * result)"), reciprocal
 * ("-grad * (result * result)"), tan ("grad * (1 + result.pow(2))"). */
static void saves_output(const est_cost_ctx *c, est_saved *s) {
    if (est_backward_runs(c)) est_save_output(c, s, 0);
}

/* mul: "self: mul_tensor_backward(grad, other, ...)", "other:
 * mul_tensor_backward(grad, self, ...)": each operand only for the other's
 * gradient. */
static void mul_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    if (est_needs_grad(c, 1)) est_save_input(c, s, 0);
    if (est_needs_grad(c, 0)) est_save_input(c, s, 1);
}

/* The backward of a broadcasting Add, Sub, Mul or Div: autograd sums each
 * broadcast input's gradient down to its shape (sum_to.c), and for Mul and
 * Div ("self: mul_tensor_backward(grad, other, ...)", "other: ...(grad,
 * self, ...)") and Sub's subtrahend ("other: -grad * alpha") that gradient
 * is first a new tensor of the output's size. The inputs' gradients are
 * taken one after the other: the larger of the two. `full` has bit i set
 * where input i's gradient is such a new tensor. */
static uint64_t broadcast_backward_workspace(const est_cost_ctx *c, est_slot_mask full) {
    uint64_t most = 0;
    for (int i = 0; i < 2; i++) {
        if (!est_needs_grad(c, i)) continue;
        uint64_t sum = est_sum_to_workspace(c, i);
        if (sum == 0) continue;
        uint64_t bytes = est_add_sat(sum, (full & EST_SLOT(i)) ? est_cost_bytes(c, est_cost_out(c, 0)) : 0);
        if (bytes > most) most = bytes;
    }
    return most;
}

static uint64_t add_backward_workspace(const est_cost_ctx *c) { return broadcast_backward_workspace(c, 0); }
static uint64_t sub_backward_workspace(const est_cost_ctx *c) { return broadcast_backward_workspace(c, EST_SLOT(1)); }
static uint64_t mul_div_backward_workspace(const est_cost_ctx *c) {
    return broadcast_backward_workspace(c, EST_SLOT(0) | EST_SLOT(1));
}

/* div: "self: div_tensor_self_backward(grad, other, ...)", "other:
 * div_tensor_other_backward(grad, self, other)". */
static void div_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    est_save_input(c, s, 1);
    if (est_needs_grad(c, 1)) est_save_input(c, s, 0);
}

/* pow: "self: pow_backward_self(grad, self, exponent)", "exponent:
 * pow_backward_exponent(grad, self, exponent, result)". */
static void pow_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    est_save_input(c, s, 0);
    est_save_input(c, s, 1);
    if (est_needs_grad(c, 1)) est_save_output(c, s, 0);
}

/* fmod / remainder: "self: grad", "other: -grad * self.div(other, 'trunc')". */
static void mod_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c) || !est_needs_grad(c, 1)) return;
    est_save_input(c, s, 0);
    est_save_input(c, s, 1);
}

/* maximum / minimum: "self: at::where(self == other, grad / 2, grad)
 * .masked_fill_(self < other, 0)": both operands. n inputs chain n - 1 of
 * them, so the n - 2 intermediate results are kept too (one extra). */
static void max_min_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c) || c->n_in < 2) return;
    for (int i = 0; i < c->n_in; i++) est_save_input(c, s, i);
    if (c->n_in > 2)
        est_save_extra(s, est_mul_sat((uint64_t)(c->n_in - 2), est_tval_bytes(est_cost_out(c, 0))));
}

/* where: "self: where(condition, grad, 0)": the condition. */
static void where_saves(const est_cost_ctx *c, est_saved *s) {
    if (est_backward_runs(c)) est_save_input(c, s, 0);
}

/* ---- the table ----------------------------------------------------------- */

#define UNARY(op_name, rule, ...)                                                                      \
    {.name = op_name, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = rule, \
     __VA_ARGS__}
#define BINARY(op_name, rule, ...)                                                                     \
    {.name = op_name, .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1, .infer = rule, \
     __VA_ARGS__}
#define VARIADIC(op_name, rule, ...)                                                                    \
    {.name = op_name, .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1, .infer = rule, \
     __VA_ARGS__}
#define SIMPLE .flops = simple_flops
#define TRANSCENDENTAL .flops = transcendental_flops

EST_FAMILY(math,
    UNARY("Abs", abs_infer, SIMPLE, .saves = saves_input),
    UNARY("Neg", neg_infer, SIMPLE),
    UNARY("Exp", exp_infer, TRANSCENDENTAL, .saves = saves_output),
    UNARY("Log", log_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Sqrt", sqrt_infer, TRANSCENDENTAL, .saves = saves_output),
    UNARY("Reciprocal", reciprocal_infer, SIMPLE, .saves = saves_output),
    UNARY("Floor", floor_infer, .flops = piecewise_constant_flops),
    UNARY("Ceil", ceil_infer, .flops = piecewise_constant_flops),
    UNARY("Round", round_infer, .flops = piecewise_constant_flops),
    UNARY("Sign", sign_infer, .flops = piecewise_constant_flops),
    UNARY("Sin", sin_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Cos", cos_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Tan", tan_infer, TRANSCENDENTAL, .saves = saves_output),
    UNARY("Asin", asin_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Acos", acos_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Atan", atan_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Sinh", sinh_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Cosh", cosh_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Asinh", asinh_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Acosh", acosh_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Atanh", atanh_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Not", not_infer, SIMPLE),
    UNARY("IsNaN", isnan_infer, SIMPLE),
    UNARY("IsInf", isinf_infer, SIMPLE),
    UNARY("BitwiseNot", bitwise_not_infer, SIMPLE),
    UNARY("Erf", erf_infer, TRANSCENDENTAL, .saves = saves_input),
    BINARY("Add", add_infer, SIMPLE, .backward_workspace = add_backward_workspace,
           .grad_passes_to = EST_SLOT(0) | EST_SLOT(1)),
    BINARY("Sub", sub_infer, SIMPLE, .backward_workspace = sub_backward_workspace),
    BINARY("Mul", mul_infer, SIMPLE, .saves = mul_saves, .backward_workspace = mul_div_backward_workspace),
    BINARY("Div", div_infer, SIMPLE, .saves = div_saves, .backward_workspace = mul_div_backward_workspace),
    BINARY("Pow", pow_infer, TRANSCENDENTAL, .saves = pow_saves),
    BINARY("Mod", mod_infer, SIMPLE, .saves = mod_saves),
    BINARY("BitShift", bitshift_infer, SIMPLE),
    BINARY("BitwiseAnd", bitwise_and_infer, SIMPLE),
    BINARY("BitwiseOr", bitwise_or_infer, SIMPLE),
    BINARY("BitwiseXor", bitwise_xor_infer, SIMPLE),
    BINARY("And", and_infer, SIMPLE),
    BINARY("Or", or_infer, SIMPLE),
    BINARY("Xor", xor_infer, SIMPLE),
    BINARY("Equal", equal_infer, SIMPLE),
    BINARY("Less", less_infer, SIMPLE),
    BINARY("Greater", greater_infer, SIMPLE),
    BINARY("LessOrEqual", less_equal_infer, SIMPLE),
    BINARY("GreaterOrEqual", greater_equal_infer, SIMPLE),
    VARIADIC("Max", max_infer, .flops = variadic_flops, .saves = max_min_saves),
    VARIADIC("Min", min_infer, .flops = variadic_flops, .saves = max_min_saves),
    VARIADIC("Sum", sum_infer, .flops = variadic_flops),
    VARIADIC("Mean", mean_infer, .flops = mean_flops),
    {.name = "Where", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = where_infer, .nondiff_inputs = EST_SLOT(0), .flops = simple_flops, .saves = where_saves},
    /* _to_copy: "self: _to_copy_backward(grad, self.options())" keeps nothing. */
    {.name = "Cast", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = cast_infer, .returns_input = cast_returns_input},
    /* Only input 1's dtype matters: no gradient flows into it. */
    {.name = "CastLike", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = cast_like_infer, .nondiff_inputs = EST_SLOT(1)},
);
