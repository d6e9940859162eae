/* ops_unary.cu: the one-input element-wise ops, forward and backward, one
 * table row each: what the op computes, its derivative, and whether the
 * backward reads the input or the output (as PyTorch's derivatives.yaml
 * does, which layers/ follows: tanh, sigmoid, sqrt, reciprocal and exp
 * keep their result; the others their input; neg nothing). Also here:
 * Softsign (x / (1 + |x|) as PyTorch composes it: abs keeps x, the divide
 * keeps x and the denominator 1 + |x|, which saved[0] holds), Mish,
 * LeakyRelu, Elu / Celu / Selu (elu_backward(..., is_result=false, self):
 * the input), ThresholdedRelu, Shrink, the inverse and hyperbolic
 * trigonometry (tan keeps its result, the others their input), and Floor,
 * Ceil, Round, Sign, whose gradient is zeros_like: they keep nothing. Pow runs here
 * too when its exponent is a scalar the host holds (x ** 2 in RMSNorm,
 * x ** 3 in GPT-2's Gelu). */
#include "ops_common.cuh"
#include "vx_internal.h" /* Pow with a tensor exponent: ops_math.cu */

typedef enum un_op {
    U_RELU, U_CLIP, U_ERF, U_GELU, U_GELU_TANH, U_TANH, U_SIGMOID, U_SQRT, U_RECIPROCAL, U_EXP, U_NEG, U_ABS,
    U_LOG, U_SIN, U_COS, U_SOFTPLUS, U_HARDSWISH, U_HARDSIGMOID, U_SWISH, U_POW,
    U_SOFTSIGN, U_MISH, U_LEAKYRELU, U_ELU, U_CELU, U_THRESHOLDEDRELU, U_SELU, U_SHRINK,
    U_FLOOR, U_CEIL, U_ROUND, U_SIGN, U_TAN, U_ASIN, U_ACOS, U_ATAN, U_SINH, U_COSH, U_ASINH, U_ACOSH, U_ATANH,
} un_op;

/* Piecewise constant: the gradient is zero and backward reads nothing. */
static bool zero_gradient(int op) { return op == U_FLOOR || op == U_CEIL || op == U_ROUND || op == U_SIGN; }

/* a, b: Clip's bounds, HardSigmoid's alpha and beta, Swish's alpha, Pow's
 * exponent, LeakyRelu / Elu / Celu / ThresholdedRelu's alpha, Selu's alpha
 * and gamma, Shrink's lambd and bias */
template <typename T> __global__ void k_unary(const T *x, T *o, int64_t n, int op, float a, float b) {
    VXK_LOOP(i, n) {
        float v = vxk_ld(x[i]);
        switch (op) {
        case U_RELU: v = v > 0.f ? v : 0.f; break;
        case U_CLIP: v = fminf(fmaxf(v, a), b); break;
        case U_ERF: v = erff(v); break;
        case U_GELU: v = 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); break;
        case U_GELU_TANH: {
            float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
            v = 0.5f * v * (1.f + tanhf(u));
            break;
        }
        case U_TANH: v = tanhf(v); break;
        case U_SIGMOID: v = 1.f / (1.f + expf(-v)); break;
        case U_SQRT: v = sqrtf(v); break;
        case U_RECIPROCAL: v = 1.f / v; break;
        case U_EXP: v = expf(v); break;
        case U_NEG: v = -v; break;
        case U_ABS: v = fabsf(v); break;
        case U_LOG: v = logf(v); break;
        case U_SIN: v = sinf(v); break;
        case U_COS: v = cosf(v); break;
        case U_SOFTPLUS: v = v > 20.f ? v : log1pf(expf(v)); break;
        case U_HARDSWISH: v = v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f; break;
        case U_HARDSIGMOID: v = fminf(fmaxf(a * v + b, 0.f), 1.f); break;
        case U_SWISH: v = v / (1.f + expf(-a * v)); break;
        case U_SOFTSIGN: v = v / (1.f + fabsf(v)); break;
        case U_MISH: v = v * tanhf(v > 20.f ? v : log1pf(expf(v))); break;
        case U_LEAKYRELU: v = v >= 0.f ? v : a * v; break;
        case U_ELU: v = v > 0.f ? v : a * expm1f(v); break;
        case U_CELU: v = fmaxf(v, 0.f) + fminf(0.f, a * expm1f(v / a)); break;
        case U_THRESHOLDEDRELU: v = v > a ? v : 0.f; break;
        case U_SELU: v = b * (v > 0.f ? v : a * expm1f(v)); break;
        case U_SHRINK: v = v < -a ? v + b : v > a ? v - b : 0.f; break;
        case U_FLOOR: v = floorf(v); break;
        case U_CEIL: v = ceilf(v); break;
        case U_ROUND: v = rintf(v); break; /* halves to even */
        case U_SIGN: v = v > 0.f ? 1.f : v < 0.f ? -1.f : 0.f; break;
        case U_TAN: v = tanf(v); break;
        case U_ASIN: v = asinf(v); break;
        case U_ACOS: v = acosf(v); break;
        case U_ATAN: v = atanf(v); break;
        case U_SINH: v = sinhf(v); break;
        case U_COSH: v = coshf(v); break;
        case U_ASINH: v = asinhf(v); break;
        case U_ACOSH: v = acoshf(v); break;
        case U_ATANH: v = atanhf(v); break;
        default: v = powf(v, a); break;
        }
        o[i] = vxk_st<T>(v);
    }
}

/* s: the saved tensor (input or output, as the table says; the gradient
 * itself for Neg, which keeps nothing); den: Softsign's saved 1 + |x| */
template <typename T>
__global__ void k_unary_grad(const T *s, const T *den, const T *g, T *gi, int64_t n, int op, float a, float b) {
    VXK_LOOP(i, n) {
        float v = vxk_ld(s[i]), d;
        switch (op) {
        case U_RELU: d = v > 0.f ? 1.f : 0.f; break;
        case U_CLIP: d = (v >= a && v <= b) ? 1.f : 0.f; break;
        case U_ERF: d = 1.1283791670955126f * expf(-v * v); break;
        case U_GELU: {
            float cdf = 0.5f * (1.f + erff(v * 0.70710678118654752f));
            float pdf = 0.3989422804014327f * expf(-0.5f * v * v);
            d = cdf + v * pdf;
            break;
        }
        case U_GELU_TANH: {
            float k0 = 0.7978845608028654f, k1 = 0.044715f;
            float u = k0 * (v + k1 * v * v * v), t = tanhf(u);
            d = 0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * k0 * (1.f + 3.f * k1 * v * v);
            break;
        }
        case U_TANH: d = 1.f - v * v; break;               /* v = tanh(x) */
        case U_SIGMOID: d = v * (1.f - v); break;          /* v = sigmoid(x) */
        case U_SQRT: d = 0.5f / v; break;                  /* v = sqrt(x) */
        case U_RECIPROCAL: d = -v * v; break;              /* v = 1 / x */
        case U_EXP: d = v; break;                          /* v = exp(x) */
        case U_NEG: d = -1.f; break;
        case U_ABS: d = v > 0.f ? 1.f : v < 0.f ? -1.f : 0.f; break;
        case U_LOG: d = 1.f / v; break;
        case U_SIN: d = cosf(v); break;
        case U_COS: d = -sinf(v); break;
        case U_SOFTPLUS: d = v > 20.f ? 1.f : 1.f / (1.f + expf(-v)); break;
        case U_HARDSWISH: d = v < -3.f ? 0.f : v > 3.f ? 1.f : (2.f * v + 3.f) / 6.f; break;
        case U_HARDSIGMOID: {
            float y = a * v + b;
            d = y > 0.f && y < 1.f ? a : 0.f;
            break;
        }
        case U_SWISH: {
            float sg = 1.f / (1.f + expf(-a * v));
            d = sg + a * v * sg * (1.f - sg);
            break;
        }
        case U_SOFTSIGN: d = 1.f / (vxk_ld(den[i]) * vxk_ld(den[i])); break;
        case U_MISH: {
            float t = tanhf(v > 20.f ? v : log1pf(expf(v))), sg = 1.f / (1.f + expf(-v));
            d = t + v * (1.f - t * t) * sg;
            break;
        }
        case U_LEAKYRELU: d = v > 0.f ? 1.f : a; break;
        case U_ELU: d = v > 0.f ? 1.f : a * expf(v); break;
        case U_CELU: d = v > 0.f ? 1.f : expf(v / a); break;
        case U_THRESHOLDEDRELU: d = v > a ? 1.f : 0.f; break;
        case U_SELU: d = b * (v > 0.f ? 1.f : a * expf(v)); break;
        case U_SHRINK: d = v < -a || v > a ? 1.f : 0.f; break;
        case U_TAN: d = 1.f + v * v; break;                /* v = tan(x) */
        case U_ASIN: d = rsqrtf(1.f - v * v); break;
        case U_ACOS: d = -rsqrtf(1.f - v * v); break;
        case U_ATAN: d = 1.f / (1.f + v * v); break;
        case U_SINH: d = coshf(v); break;
        case U_COSH: d = sinhf(v); break;
        case U_ASINH: d = rsqrtf(v * v + 1.f); break;
        case U_ACOSH: d = rsqrtf(v * v - 1.f); break;
        case U_ATANH: d = 1.f / (1.f - v * v); break;
        default: d = a == 0.f ? 0.f : a * powf(v, a - 1.f); break;
        }
        gi[i] = vxk_st<T>(vxk_ld(g[i]) * d);
    }
}

typedef struct un_row {
    const char *name;
    un_op op;
    bool reads_output; /* the backward reads the output (else the input, or nothing: Neg, Floor..Sign) */
} un_row;

static const un_row rows[] = {
    {"Relu", U_RELU, true},           {"Clip", U_CLIP, false},        {"Erf", U_ERF, false},
    {"Gelu", U_GELU, false},          {"Tanh", U_TANH, true},         {"Sigmoid", U_SIGMOID, true},
    {"Sqrt", U_SQRT, true},           {"Reciprocal", U_RECIPROCAL, true}, {"Exp", U_EXP, true},
    {"Neg", U_NEG, false},            {"Abs", U_ABS, false},          {"Log", U_LOG, false},
    {"Sin", U_SIN, false},            {"Cos", U_COS, false},          {"Softplus", U_SOFTPLUS, false},
    {"HardSwish", U_HARDSWISH, false}, {"HardSigmoid", U_HARDSIGMOID, false}, {"Swish", U_SWISH, false},
    {"Pow", U_POW, false},
    {"Softsign", U_SOFTSIGN, false},  {"Mish", U_MISH, false},        {"LeakyRelu", U_LEAKYRELU, false},
    {"Elu", U_ELU, false},            {"Celu", U_CELU, false},        {"ThresholdedRelu", U_THRESHOLDEDRELU, false},
    {"Selu", U_SELU, false},          {"Shrink", U_SHRINK, false},    {"Floor", U_FLOOR, false},
    {"Ceil", U_CEIL, false},          {"Round", U_ROUND, false},      {"Sign", U_SIGN, false},
    {"Tan", U_TAN, true},             {"Asin", U_ASIN, false},        {"Acos", U_ACOS, false},
    {"Atan", U_ATAN, false},          {"Sinh", U_SINH, false},        {"Cosh", U_COSH, false},
    {"Asinh", U_ASINH, false},        {"Acosh", U_ACOSH, false},      {"Atanh", U_ATANH, false},
};

static const un_row *row_of(const vx_run *run) {
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++)
        if (!strcmp(rows[k].name, run->node->op_type)) return &rows[k];
    return NULL;
}

/* The op and its parameters (a, b). */
static vx_status params_of(vx_ctx *ctx, const vx_run *run, int *op, float *a, float *b) {
    const un_row *r = row_of(run);
    if (!r) return vx_fail(ctx, VX_EUNSUPPORTED, "no unary kernel for %s", run->node->op_type);
    *op = r->op;
    *a = *b = 0.f;
    switch (r->op) {
    case U_GELU:
        if (!strcmp(est_node_attr_string(run->node, "approximate", "none"), "tanh")) *op = U_GELU_TANH;
        break;
    case U_CLIP:
        *a = -INFINITY;
        *b = INFINITY;
        if (run->opset < 11) {
            *a = (float)est_node_attr_float(run->node, "min", -INFINITY);
            *b = (float)est_node_attr_float(run->node, "max", INFINITY);
        } else {
            if (run->n_in > 1 && run->in[1] && run->in[1]->numel) *a = (float)vx_tensor_get(ctx, run->in[1], 0);
            if (run->n_in > 2 && run->in[2] && run->in[2]->numel) *b = (float)vx_tensor_get(ctx, run->in[2], 0);
        }
        break;
    case U_HARDSIGMOID:
        *a = (float)est_node_attr_float(run->node, "alpha", 0.2);
        *b = (float)est_node_attr_float(run->node, "beta", 0.5);
        break;
    case U_SWISH: case U_ELU: case U_CELU: case U_THRESHOLDEDRELU:
        *a = (float)est_node_attr_float(run->node, "alpha", 1.0);
        if (r->op == U_CELU && *a == 0.f) return vx_fail(ctx, VX_EUNSUPPORTED, "Celu: alpha 0 (x / alpha)");
        break;
    case U_LEAKYRELU: *a = (float)est_node_attr_float(run->node, "alpha", 0.01); break;
    case U_SELU:
        *a = (float)est_node_attr_float(run->node, "alpha", 1.67326319217681884765625);
        *b = (float)est_node_attr_float(run->node, "gamma", 1.05070102214813232421875);
        break;
    case U_SHRINK:
        *a = (float)est_node_attr_float(run->node, "lambd", 0.5);
        *b = (float)est_node_attr_float(run->node, "bias", 0.0);
        if (*a < 0.f) return vx_fail(ctx, VX_EUNSUPPORTED, "Shrink: negative lambd");
        break;
    case U_POW:
        if (run->n_in < 2 || !run->in[1] || run->in[1]->numel != 1)
            return vx_fail(ctx, VX_EUNSUPPORTED, "Pow: only a scalar exponent has a kernel");
        *a = (float)vx_tensor_get(ctx, run->in[1], 0);
        break;
    default: break;
    }
    return VX_OK;
}

/* Abs, Neg and Sign of integers (T5's relative-position buckets); no
 * gradient. */
__global__ void k_unary_i64(const long long *x, long long *o, int64_t n, int op) {
    VXK_LOOP(i, n) {
        long long v = x[i];
        o[i] = op == U_NEG ? -v : op == U_SIGN ? (v > 0) - (v < 0) : v < 0 ? -v : v;
    }
}

template <typename T> __global__ void k_softsign_den(const T *x, T *den, int64_t n) {
    VXK_LOOP(i, n) den[i] = vxk_st<T>(1.f + fabsf(vxk_ld(x[i])));
}

template <typename T> static vx_status unary_fwd_t(vx_ctx *ctx, vx_run *run, int op, float a, float b) {
    vx_tensor *x = run->in[0];
    vx_tensor *o = vx_out_new(ctx, run, 0, x->dtype, x->rank, x->dims);
    if (!o) return VX_EOOM;
    if (o->numel)
        k_unary<T><<<vxk_blocks(o->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>((const T *)x->data, (T *)o->data,
                                                                             o->numel, op, a, b);
    /* Softsign's divide keeps its denominator for backward */
    if (op == U_SOFTSIGN && run->training && run->need_grad[0]) {
        vx_status st = vxk_new_saved(ctx, run, 0, x->dtype, x->rank, x->dims);
        if (st) return st;
        if (x->numel)
            k_softsign_den<T><<<vxk_blocks(x->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
                (const T *)x->data, (T *)run->saved[0]->data, x->numel);
    }
    return vxk_check(ctx, run->node->op_type);
}

template <typename T>
static vx_status unary_bwd_t(vx_ctx *ctx, vx_run *run, const vx_tensor *s, const void *den, int op, float a, float b) {
    vx_tensor *g = run->grad_out[0];
    vx_tensor *gi = vx_grad_new(ctx, run, 0);
    if (!gi) return VX_EOOM;
    if (gi->numel)
        k_unary_grad<T><<<vxk_blocks(gi->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (const T *)s->data, (const T *)den, (const T *)g->data, (T *)gi->data, gi->numel, op, a, b);
    return vxk_check(ctx, run->node->op_type);
}

static vx_status unary_fwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *x = run->in[0];
    if (!strcmp(run->node->op_type, "Pow") && vx_pow_tensor_path(run)) return vx_k_pow_tensor_fwd(ctx, run);
    int op;
    float a, b;
    vx_status st = params_of(ctx, run, &op, &a, &b);
    if (st) return st;
    if (x && x->dtype == VX_I64 && (op == U_ABS || op == U_NEG || op == U_SIGN)) {
        vx_tensor *o = vx_out_new(ctx, run, 0, VX_I64, x->rank, x->dims);
        if (!o) return VX_EOOM;
        if (o->numel)
            k_unary_i64<<<vxk_blocks(o->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>((const long long *)x->data, (long long *)o->data,
                                                                       o->numel, op);
        return vxk_check(ctx, run->node->op_type);
    }
    if (!x) return vx_fail(ctx, VX_EUNSUPPORTED, "needs a floating input");
    VXK_FLOAT_DISPATCH(ctx, x->dtype, run->node->op_type, unary_fwd_t<T>(ctx, run, op, a, b));
}

static vx_status unary_bwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *g = run->grad_out[0];
    if (!strcmp(run->node->op_type, "Pow") && vx_pow_tensor_path(run)) return vx_k_pow_tensor_bwd(ctx, run);
    if (!g || !run->need_grad[0]) return VX_OK;
    int op;
    float a, b;
    vx_status st = params_of(ctx, run, &op, &a, &b);
    if (st) return st;
    if (zero_gradient(op)) { /* zeros_like(grad) */
        vx_tensor *gi = vx_grad_new(ctx, run, 0);
        return gi ? vx_tensor_zero(ctx, gi) : VX_EOOM;
    }
    const vx_tensor *s = op == U_NEG ? g : row_of(run)->reads_output ? run->out[0] : run->in[0];
    if (!s->data && s->numel) return vx_fail(ctx, VX_ECUDA, "saved tensor missing");
    const void *den = NULL;
    if (op == U_SOFTSIGN) {
        if (!run->saved[0] || (!run->saved[0]->data && s->numel))
            return vx_fail(ctx, VX_ECUDA, "Softsign backward: the denominator was not kept");
        den = run->saved[0]->data;
    }
    VXK_FLOAT_DISPATCH(ctx, g->dtype, run->node->op_type, unary_bwd_t<T>(ctx, run, s, den, op, a, b));
}

/* Pow: x and the exponent (a host scalar: no device memory); a tensor
 * exponent (ops_math.cu) keeps the result too when it needs a gradient. */
static void pow_saves(const vx_run *run, uint32_t *si, uint32_t *so) {
    *si = VX_SLOT(0) | VX_SLOT(1);
    *so = vx_pow_tensor_path(run) && run->need_grad[1] ? VX_SLOT(0) : 0u;
}

#define KEEPS_INPUT(name) {name, unary_fwd, unary_bwd, VX_SLOT(0), 0, false, 0, NULL, 0, VX_HALF}
#define KEEPS_OUTPUT(name) {name, unary_fwd, unary_bwd, 0, VX_SLOT(0), false, 0, NULL, 0, VX_HALF}
#define KEEPS_NOTHING(name) {name, unary_fwd, unary_bwd, 0, 0, false, 0, NULL, 0, VX_HALF}

extern "C" {
const vx_op vx_ops_unary[] = {
    KEEPS_OUTPUT("Relu"),
    /* min and max are read on the host */
    {"Clip", unary_fwd, unary_bwd, VX_SLOT(0) | VX_SLOT(1) | VX_SLOT(2), 0, false, VX_SLOT(1) | VX_SLOT(2), NULL, 0,
     VX_HALF},
    KEEPS_INPUT("Erf"), KEEPS_INPUT("Gelu"),
    KEEPS_OUTPUT("Tanh"), KEEPS_OUTPUT("Sigmoid"), KEEPS_OUTPUT("Sqrt"), KEEPS_OUTPUT("Reciprocal"), KEEPS_OUTPUT("Exp"),
    {"Neg", unary_fwd, unary_bwd, 0, 0, false, 0, NULL, 0, VX_HALF},
    KEEPS_INPUT("Abs"), KEEPS_INPUT("Log"), KEEPS_INPUT("Sin"), KEEPS_INPUT("Cos"), KEEPS_INPUT("Softplus"),
    KEEPS_INPUT("HardSwish"), KEEPS_INPUT("HardSigmoid"), KEEPS_INPUT("Swish"),
    /* the exponent is read on the host; a scalar takes no gradient, a tensor
     * runs ops_math.cu's binary kernel */
    {"Pow", unary_fwd, unary_bwd, VX_SLOT(0) | VX_SLOT(1), 0, false, VX_SLOT(1), pow_saves, 0, VX_HALF},
    /* Softsign: the input and saved[0], 1 + |x| */
    KEEPS_INPUT("Softsign"), KEEPS_INPUT("Mish"), KEEPS_INPUT("LeakyRelu"),
    KEEPS_INPUT("Elu"), KEEPS_INPUT("Celu"), KEEPS_INPUT("ThresholdedRelu"), KEEPS_INPUT("Selu"), KEEPS_INPUT("Shrink"),
    KEEPS_NOTHING("Floor"), KEEPS_NOTHING("Ceil"), KEEPS_NOTHING("Round"), KEEPS_NOTHING("Sign"),
    KEEPS_OUTPUT("Tan"), KEEPS_INPUT("Asin"), KEEPS_INPUT("Acos"), KEEPS_INPUT("Atan"), KEEPS_INPUT("Sinh"),
    KEEPS_INPUT("Cosh"), KEEPS_INPUT("Asinh"), KEEPS_INPUT("Acosh"), KEEPS_INPUT("Atanh"),
};
const size_t vx_ops_unary_count = sizeof vx_ops_unary / sizeof vx_ops_unary[0];
}
