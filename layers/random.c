/*
 * random.c: the random generators: RandomUniform, RandomNormal,
 * RandomUniformLike, RandomNormalLike, Bernoulli, Multinomial.
 *
 * PyTorch exporters emit them for training-mode randomness: torchvision's
 * StochasticDepth (`torch.empty(...).bernoulli_(p)`) and decomposed Dropout
 * become RandomUniformLike -> Less -> Cast; rand, randn and their *_like
 * become the other four.
 *
 * Output dtypes and shapes follow the ONNX schemas (onnx/defs/generator):
 *  - RandomUniform, RandomNormal: no input; the shape is attribute `shape`
 *    (required), the dtype attribute `dtype` (default float).
 *  - RandomUniformLike, RandomNormalLike: the input's shape; the dtype is
 *    attribute `dtype`, or the input's when it is absent.
 *    These four output float16, float or double (bfloat16 too from opset 22).
 *  - Bernoulli (opset 15): input probabilities (float16, float, double;
 *    bfloat16 too from opset 22); the output has the input's shape and dtype
 *    attribute `dtype`, or the input's when it is absent: any numeric type
 *    or bool.
 *  - Multinomial (opset 7): input [batch_size, class_size] of float16, float
 *    or double (bfloat16 too from opset 22); output [batch_size, sample_size]
 *    (`sample_size` default 1) of `dtype` int32 (default) or int64.
 * The values are random, so nothing is folded.
 *
 * None takes a gradient: the *Like ops read only their input's shape and
 * dtype, and PyTorch's bernoulli and multinomial are not differentiable in
 * their probabilities (bernoulli's derivative is zeros_like; multinomial
 * has none). Every input is marked in nondiff_inputs, so an initializer fed
 * to them is a constant and nothing downstream of them needs a gradient on
 * their account.
 *
 * FLOPs (docs/flops.md): 1 per output element forward (one draw each; the
 * comparison of Bernoulli and the sampling of Multinomial are not counted
 * apart); 0 backward. Saved for backward: nothing.
 */
#include <stdio.h>
#include <string.h>

#include "registry.h"

/* ---- type constraints ------------------------------------------------------ */

typedef uint32_t dtype_set;
#define DT(t) ((dtype_set)1u << (t))

/* tensor(float16), tensor(float), tensor(double): every generator's float
 * set before opset 22, which adds tensor(bfloat16). */
static dtype_set float_types(int64_t opset) {
    return DT(EST_DT_FLOAT16) | DT(EST_DT_FLOAT) | DT(EST_DT_DOUBLE) | (opset >= 22 ? DT(EST_DT_BFLOAT16) : 0);
}

/* Bernoulli's output: every non-complex numeric type and bool, bfloat16
 * included from opset 15 on. */
#define BERNOULLI_OUT                                                                                      \
    (DT(EST_DT_FLOAT16) | DT(EST_DT_FLOAT) | DT(EST_DT_DOUBLE) | DT(EST_DT_BFLOAT16) | DT(EST_DT_UINT8) | \
     DT(EST_DT_UINT16) | DT(EST_DT_UINT32) | DT(EST_DT_UINT64) | DT(EST_DT_INT8) | DT(EST_DT_INT16) |       \
     DT(EST_DT_INT32) | DT(EST_DT_INT64) | DT(EST_DT_BOOL))

#define MULTINOMIAL_OUT (DT(EST_DT_INT32) | DT(EST_DT_INT64))

static bool in_set(int64_t dt, dtype_set set) { return dt > EST_DT_UNDEFINED && dt < 32 && (set & DT(dt)); }

/* "float16, float32, float64" for error messages. */
static const char *set_names(dtype_set set, char *buf, size_t size) {
    buf[0] = '\0';
    for (int t = 1; t < EST_DT_COUNT && t < 32; t++) {
        if (!(set & DT(t))) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", len ? ", " : "", est_dtype_name((est_dtype)t));
    }
    return buf;
}

/* The output dtype: attribute `dtype` when the node has it, else dflt (the
 * input's for the *Like ops and Bernoulli). It must lie in `allowed`; an
 * input dtype that is not known (undefined) passes through unchecked. */
static est_status out_dtype(est_infer_ctx *ctx, est_dtype dflt, dtype_set allowed, est_dtype *out) {
    int64_t dt;
    est_status st = est_attr_int(ctx, "dtype", dflt, &dt);
    if (st != EST_OK) return st;
    bool from_attr = est_attr_get(ctx->node, "dtype") != NULL;
    char names[256];
    if (!from_attr && dt == EST_DT_UNDEFINED) {
        *out = EST_DT_UNDEFINED;
        return EST_OK;
    }
    if (!in_set(dt, allowed)) {
        if (from_attr)
            return est_op_fail(ctx, EST_EATTR, "attribute 'dtype' is %lld (%s); the output must be one of %s",
                               (long long)dt, dt > 0 && dt < EST_DT_COUNT ? est_dtype_name((est_dtype)dt) : "no type",
                               set_names(allowed, names, sizeof names));
        return est_op_fail(ctx, EST_EGRAPH,
                           "without attribute 'dtype' the output takes the input's dtype, %s, which is not one of %s",
                           est_dtype_name((est_dtype)dt), set_names(allowed, names, sizeof names));
    }
    *out = (est_dtype)dt;
    return EST_OK;
}

/* Input 0 (probabilities) must be one of `allowed` when its dtype is known. */
static est_status check_in_dtype(est_infer_ctx *ctx, const est_tval *x, dtype_set allowed) {
    if (x->dtype == EST_DT_UNDEFINED || in_set(x->dtype, allowed)) return EST_OK;
    char names[256];
    return est_op_fail(ctx, EST_EGRAPH, "input 0 is %s, expected one of %s", est_dtype_name(x->dtype),
                       set_names(allowed, names, sizeof names));
}

/* The float attributes of the distribution (and `seed`) must be floats. */
static est_status check_float_attrs(est_infer_ctx *ctx, const char *a, const char *b) {
    double v;
    est_status st;
    if ((st = est_attr_float(ctx, "seed", 0, &v)) != EST_OK) return st;
    if (a && (st = est_attr_float(ctx, a, 0, &v)) != EST_OK) return st;
    if (b && (st = est_attr_float(ctx, b, 0, &v)) != EST_OK) return st;
    return EST_OK;
}

/* ---- RandomUniform, RandomNormal --------------------------------------------- */

/* Shape from attribute `shape`, dtype from `dtype` (default float). */
static est_status random_shape_attr(est_infer_ctx *ctx, const char *a, const char *b) {
    est_status st = check_float_attrs(ctx, a, b);
    if (st != EST_OK) return st;
    const int64_t *shape;
    int64_t n;
    if ((st = est_attr_ints(ctx, "shape", &shape, &n)) != EST_OK) return st;
    if (n < 0) return est_op_fail(ctx, EST_EATTR, "attribute 'shape' is required");
    if (n > EST_MAX_RANK)
        return est_op_fail(ctx, EST_ELIMIT, "attribute 'shape' has rank %lld (limit %d)", (long long)n, EST_MAX_RANK);
    for (int64_t d = 0; d < n; d++)
        if (shape[d] > EST_MAX_DIM_VALUE)
            return est_op_fail(ctx, EST_ELIMIT, "attribute 'shape' has dim %lld at axis %lld (limit %lld)",
                               (long long)shape[d], (long long)d, (long long)EST_MAX_DIM_VALUE);
    est_dtype dt;
    if ((st = out_dtype(ctx, EST_DT_FLOAT, float_types(ctx->opset), &dt)) != EST_OK) return st;
    return est_set_out(ctx, 0, dt, (int)n, shape);
}

static est_status random_uniform_infer(est_infer_ctx *ctx) { return random_shape_attr(ctx, "low", "high"); }
static est_status random_normal_infer(est_infer_ctx *ctx) { return random_shape_attr(ctx, "mean", "scale"); }

/* ---- RandomUniformLike, RandomNormalLike ------------------------------------ */

/* Input 0's shape; dtype from `dtype`, else input 0's. The input may be of
 * any type: only its shape (and maybe its dtype) is read. */
static est_status random_like(est_infer_ctx *ctx, const char *a, const char *b) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    if ((st = check_float_attrs(ctx, a, b)) != EST_OK) return st;
    est_dtype dt;
    if ((st = out_dtype(ctx, x->dtype, float_types(ctx->opset), &dt)) != EST_OK) return st;
    return est_set_out(ctx, 0, dt, x->rank, x->dims);
}

static est_status random_uniform_like_infer(est_infer_ctx *ctx) { return random_like(ctx, "low", "high"); }
static est_status random_normal_like_infer(est_infer_ctx *ctx) { return random_like(ctx, "mean", "scale"); }

/* ---- Bernoulli, Multinomial -------------------------------------------------- */

static est_status bernoulli_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    if ((st = check_in_dtype(ctx, x, float_types(ctx->opset))) != EST_OK) return st;
    if ((st = check_float_attrs(ctx, NULL, NULL)) != EST_OK) return st;
    est_dtype dt;
    if ((st = out_dtype(ctx, x->dtype, BERNOULLI_OUT, &dt)) != EST_OK) return st;
    return est_set_out(ctx, 0, dt, x->rank, x->dims);
}

static est_status multinomial_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    if ((st = check_in_dtype(ctx, x, float_types(ctx->opset))) != EST_OK) return st;
    if (x->rank != 2)
        return est_op_fail(ctx, EST_ESHAPE, "input has rank %d; Multinomial needs [batch_size, class_size]", x->rank);
    if ((st = check_float_attrs(ctx, NULL, NULL)) != EST_OK) return st;
    int64_t samples;
    if ((st = est_attr_int(ctx, "sample_size", 1, &samples)) != EST_OK) return st;
    if (samples > EST_MAX_DIM_VALUE)
        return est_op_fail(ctx, EST_ELIMIT, "attribute 'sample_size' is %lld (limit %lld)", (long long)samples,
                           (long long)EST_MAX_DIM_VALUE);
    est_dtype dt;
    if ((st = out_dtype(ctx, EST_DT_INT32, MULTINOMIAL_OUT, &dt)) != EST_OK) return st;
    int64_t dims[2] = {x->dims[0], samples};
    return est_set_out(ctx, 0, dt, 2, dims);
}

/* ---- training-step rules ------------------------------------------------- */

#define DRAW_FLOPS 1 /* one random draw per output element */

/* Forward: 1 per output element. Backward: 0, as no input takes a gradient. */
static void random_flops(const est_cost_ctx *c, est_flops *f) {
    f->fwd = est_mul_sat(DRAW_FLOPS, est_tval_elements(est_cost_out(c, 0)));
    f->bwd = 0;
}

/* Every input is non-differentiable (it gives only a shape, a dtype or
 * probabilities PyTorch takes no gradient for); nothing is saved for
 * backward (saves is NULL). */
EST_FAMILY(random,
    {.name = "RandomUniform", .min_inputs = 0, .max_inputs = 0, .min_outputs = 1, .max_outputs = 1,
     .infer = random_uniform_infer, .flops = random_flops},
    {.name = "RandomNormal", .min_inputs = 0, .max_inputs = 0, .min_outputs = 1, .max_outputs = 1,
     .infer = random_normal_infer, .flops = random_flops},
    {.name = "RandomUniformLike", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = random_uniform_like_infer, .nondiff_inputs = EST_SLOT(0), .flops = random_flops},
    {.name = "RandomNormalLike", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = random_normal_like_infer, .nondiff_inputs = EST_SLOT(0), .flops = random_flops},
    {.name = "Bernoulli", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = bernoulli_infer, .nondiff_inputs = EST_SLOT(0), .flops = random_flops},
    {.name = "Multinomial", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = multinomial_infer, .nondiff_inputs = EST_SLOT(0), .flops = random_flops},
);
