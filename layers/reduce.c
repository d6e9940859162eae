/*
 * reduce.c: the Reduce* ops and ArgMax/ArgMin. ReduceSum, ReduceProd,
 * ReduceMax and ReduceMin fold on known inputs, since shape computations
 * (e.g. the element count of a Shape) use them.
 *
 * FLOPs per input element (docs/flops.md); backward = 2 x forward when the
 * data needs a gradient (ArgMax / ArgMin have none):
 *   1  ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceLogSum
 *      ArgMax ArgMin
 *   2  ReduceL1 ReduceL2 ReduceSumSquare (abs or square, then add)
 *   5  ReduceLogSumExp (exp, then add)
 */
#include <math.h>
#include <string.h>

#include "registry.h"

typedef enum reduce_fold { FOLD_NONE, FOLD_SUM, FOLD_PROD, FOLD_MAX, FOLD_MIN } reduce_fold;

/* How each Reduce op reads its axes, and whether it folds. */
typedef struct reduce_kind {
    const char *name;
    int64_t axes_input_since; /* opset from which axes is an input, not an attribute */
    reduce_fold fold;
} reduce_kind;

static const reduce_kind reduce_kinds[] = {
    {"ReduceSum", 13, FOLD_SUM},       {"ReduceProd", 18, FOLD_PROD},   {"ReduceMax", 18, FOLD_MAX},
    {"ReduceMin", 18, FOLD_MIN},       {"ReduceMean", 18, FOLD_NONE},   {"ReduceL1", 18, FOLD_NONE},
    {"ReduceL2", 18, FOLD_NONE},       {"ReduceLogSum", 18, FOLD_NONE}, {"ReduceLogSumExp", 18, FOLD_NONE},
    {"ReduceSumSquare", 18, FOLD_NONE},
};

static const reduce_kind *reduce_kind_of(const est_node *n) {
    for (size_t i = 0; i < sizeof reduce_kinds / sizeof reduce_kinds[0]; i++)
        if (strcmp(reduce_kinds[i].name, n->op_type) == 0) return &reduce_kinds[i];
    return NULL;
}

/* Reads the axes list from the attribute or, in newer opsets, input 1.
 * *n is -1 when no axes are given. */
static est_status read_reduce_axes(est_infer_ctx *ctx, const reduce_kind *kind, const int64_t **axes,
                                   int64_t *n) {
    if (ctx->opset < kind->axes_input_since) return est_attr_ints(ctx, "axes", axes, n);
    const est_tval *t = est_in(ctx, 1);
    *axes = NULL;
    *n = -1;
    if (!t) return EST_OK;
    if (t->rank >= 0 && t->elements == 0) {
        *n = 0;
        return EST_OK;
    }
    est_status st = est_in_ints(ctx, 1, axes, n);
    if (st != EST_OK) return st;
    if (*n < 0) return est_op_fail(ctx, EST_EUNSUPPORTED, "the axes input is not known statically");
    return EST_OK;
}

/* Marks the reduced axes: the listed ones, or all when none are listed. */
static est_status mark_reduced(est_infer_ctx *ctx, int rank, const int64_t *axes, int64_t n, bool *reduced) {
    for (int d = 0; d < rank; d++) reduced[d] = n <= 0;
    for (int64_t i = 0; i < n; i++) {
        int axis;
        est_status st = est_axis(ctx, axes[i], rank, &axis);
        if (st != EST_OK) return st;
        reduced[axis] = true;
    }
    return EST_OK;
}

static bool fold_int(reduce_fold fold, int64_t acc, int64_t v, int64_t *out) {
    switch (fold) {
    case FOLD_SUM: return !__builtin_add_overflow(acc, v, out);
    case FOLD_PROD: return !__builtin_mul_overflow(acc, v, out);
    case FOLD_MAX: *out = v > acc ? v : acc; return true;
    case FOLD_MIN: *out = v < acc ? v : acc; return true;
    default: return false;
    }
}

static double fold_float(reduce_fold fold, double acc, double v) {
    switch (fold) {
    case FOLD_SUM: return acc + v;
    case FOLD_PROD: return acc * v;
    case FOLD_MAX: return v > acc || v != v ? v : acc;
    case FOLD_MIN: return v < acc || v != v ? v : acc;
    default: return acc;
    }
}

static void fold_init(reduce_fold fold, est_const *c) {
    for (int64_t k = 0; k < c->count; k++) {
        if (c->f64) c->f64[k] = fold == FOLD_SUM ? 0 : fold == FOLD_PROD ? 1 : fold == FOLD_MAX ? -INFINITY : INFINITY;
        else c->i64[k] = fold == FOLD_SUM ? 0 : fold == FOLD_PROD ? 1 : fold == FOLD_MAX ? INT64_MIN : INT64_MAX;
    }
}

/* Folds output 0 from the known input x; leaves it unfolded when the result
 * cannot be represented (integer overflow) or is too large. */
static void fold_reduce(est_infer_ctx *ctx, reduce_fold fold, const est_tval *x, const bool *reduced) {
    if (fold == FOLD_NONE || !x->value || x->value->count != x->elements || x->elements == 0) return;
    est_const *c = est_fold_out(ctx, 0, x->dtype);
    if (!c || !c->f64 != !x->value->f64) {
        if (c) ctx->out[0]->value = NULL;
        return;
    }
    fold_init(fold, c);
    int64_t coord[EST_MAX_RANK] = {0}, out_stride[EST_MAX_RANK];
    int64_t stride = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        out_stride[d] = reduced[d] ? 0 : stride;
        stride *= reduced[d] ? 1 : x->dims[d];
    }
    for (int64_t k = 0; k < x->elements; k++) {
        int64_t o = 0;
        for (int d = 0; d < x->rank; d++) o += coord[d] * out_stride[d];
        if (c->f64) c->f64[o] = fold_float(fold, c->f64[o], x->value->f64[k]);
        else if (!fold_int(fold, c->i64[o], x->value->i64[k], &c->i64[o])) {
            ctx->out[0]->value = NULL;
            return;
        }
        for (int d = x->rank - 1; d >= 0 && ++coord[d] == x->dims[d]; d--) coord[d] = 0;
    }
}

/* data [, axes] -> reduced, keeping reduced dims as 1 when keepdims. */
static est_status reduce_infer(est_infer_ctx *ctx) {
    const reduce_kind *kind = reduce_kind_of(ctx->node);
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    if (!kind) return est_op_fail(ctx, EST_EUNSUPPORTED, "no reduce rule for this op");
    const int64_t *axes;
    int64_t n, keepdims, noop;
    if ((st = read_reduce_axes(ctx, kind, &axes, &n)) != EST_OK ||
        (st = est_attr_int(ctx, "keepdims", 1, &keepdims)) != EST_OK ||
        (st = est_attr_int(ctx, "noop_with_empty_axes", 0, &noop)) != EST_OK)
        return st;
    if (n <= 0 && noop && ctx->opset >= kind->axes_input_since) {
        if ((st = est_set_out_like(ctx, 0, x)) != EST_OK) return st;
        if (ctx->out[0]) ctx->out[0]->value = x->value; /* the identity keeps known contents */
        return EST_OK;
    }
    bool reduced[EST_MAX_RANK];
    if ((st = mark_reduced(ctx, x->rank, axes, n, reduced)) != EST_OK) return st;
    int64_t out[EST_MAX_RANK];
    int rank = 0;
    for (int d = 0; d < x->rank; d++)
        if (!reduced[d]) out[rank++] = x->dims[d];
        else if (keepdims) out[rank++] = 1;
    if ((st = est_set_out(ctx, 0, x->dtype, rank, out)) != EST_OK) return st;
    fold_reduce(ctx, kind->fold, x, reduced);
    return EST_OK;
}

/* data -> int64 indices along axis, keeping it as 1 when keepdims.
 * select_last_index changes only the values; it is read to check its type. */
static est_status arg_reduce_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    int64_t axis_attr, keepdims, last;
    int axis;
    if ((st = est_attr_int(ctx, "axis", 0, &axis_attr)) != EST_OK ||
        (st = est_attr_int(ctx, "keepdims", 1, &keepdims)) != EST_OK ||
        (st = est_attr_int(ctx, "select_last_index", 0, &last)) != EST_OK)
        return st;
    if (x->rank == 0) return est_op_fail(ctx, EST_ESHAPE, "input data must have rank 1 or more");
    if ((st = est_axis(ctx, axis_attr, x->rank, &axis)) != EST_OK) return st;
    int64_t out[EST_MAX_RANK];
    int rank = 0;
    for (int d = 0; d < x->rank; d++)
        if (d != axis) out[rank++] = x->dims[d];
        else if (keepdims) out[rank++] = 1;
    return est_set_out(ctx, 0, EST_DT_INT64, rank, out);
}

/* ---- training-step rules ------------------------------------------------- */

#define REDUCE_FLOPS 1
#define REDUCE_NORM_FLOPS 2
#define REDUCE_LOG_SUM_EXP_FLOPS 5

#define PER_INPUT_ELEMENT_RULE(fn, per_element)                                              \
    static void fn(const est_cost_ctx *c, est_flops *f) {                                   \
        est_flops_per_element(c, per_element, est_tval_elements(est_cost_in(c, 0)), f);     \
    }

PER_INPUT_ELEMENT_RULE(reduce_flops, REDUCE_FLOPS)
PER_INPUT_ELEMENT_RULE(reduce_norm_flops, REDUCE_NORM_FLOPS)
PER_INPUT_ELEMENT_RULE(reduce_log_sum_exp_flops, REDUCE_LOG_SUM_EXP_FLOPS)

/* amax / amin ("scale_grad_by_count(..., result == self, dim)"), prod
 * ("prod_backward(grad, self, result, ...)"), linalg_vector_norm
 * ("linalg_vector_norm_backward(grad, self, ord, result, ...)"), logsumexp
 * ("logsumexp_backward(grad, self, result, ...)"): the data and the result.
 * (sum and mean keep only shapes.) */
static void saves_input_and_result(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    est_save_input(c, s, 0);
    est_save_output(c, s, 0);
}

/* log(sum(x)): log keeps the sum, a tensor made only for backward. */
static void log_sum_saves(const est_cost_ctx *c, est_saved *s) {
    if (est_backward_runs(c)) est_save_extra(s, est_tval_bytes(est_cost_out(c, 0)));
}

/* x.pow(2).sum(): "self: pow_backward(grad, self, exponent)" keeps x. */
static void sum_square_saves(const est_cost_ctx *c, est_saved *s) {
    if (est_backward_runs(c)) est_save_input(c, s, 0);
}

#define REDUCE_OP(op_name, ...)                                                                     \
    {.name = op_name, .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,         \
     .infer = reduce_infer, .nondiff_inputs = EST_SLOT(1), __VA_ARGS__}

EST_FAMILY(reduce,
    REDUCE_OP("ReduceSum", .flops = reduce_flops),
    REDUCE_OP("ReduceProd", .flops = reduce_flops, .saves = saves_input_and_result),
    REDUCE_OP("ReduceMax", .flops = reduce_flops, .saves = saves_input_and_result),
    REDUCE_OP("ReduceMin", .flops = reduce_flops, .saves = saves_input_and_result),
    REDUCE_OP("ReduceMean", .flops = reduce_flops),
    REDUCE_OP("ReduceL1", .flops = reduce_norm_flops, .saves = saves_input_and_result),
    REDUCE_OP("ReduceL2", .flops = reduce_norm_flops, .saves = saves_input_and_result),
    REDUCE_OP("ReduceLogSum", .flops = reduce_flops, .saves = log_sum_saves),
    REDUCE_OP("ReduceLogSumExp", .flops = reduce_log_sum_exp_flops, .saves = saves_input_and_result),
    REDUCE_OP("ReduceSumSquare", .flops = reduce_norm_flops, .saves = sum_square_saves),
    {.name = "ArgMax", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = arg_reduce_infer, .flops = reduce_flops},
    {.name = "ArgMin", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = arg_reduce_infer, .flops = reduce_flops},
);
