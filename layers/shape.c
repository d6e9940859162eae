/*
 * shape.c: ops that make or rearrange a tensor's shape: Shape, Size, Reshape,
 * Flatten, Squeeze, Unsqueeze, Transpose, Expand, ConstantOfShape, Constant,
 * Range, Identity, EyeLike.
 *
 * Every rule folds its output when its inputs are known, because these ops are
 * the links of the Shape -> Gather -> Concat -> Reshape chains of exports.
 *
 * Training step: all move or describe data, so 0 FLOPs, and none keeps a
 * tensor for backward (view / expand / permute backwards reshape, sum_to or
 * permute grad, knowing only shapes). PyTorch runs Squeeze, Unsqueeze,
 * Identity and Expand as views, Reshape and Flatten as views of contiguous
 * tensors, Transpose as a permuted view.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "registry.h"

/* ---- helpers -------------------------------------------------------------- */

/* Output 0 holds x's elements in x's order (reshape-like ops): share x's
 * known values instead of copying them. */
static void share_values(est_infer_ctx *ctx, const est_tval *x) {
    est_tval *o = ctx->n_out > 0 ? ctx->out[0] : NULL;
    if (o && x->value && o->elements == x->value->count && o->dtype == x->value->dtype) o->value = x->value;
}

static bool scalar_like(const est_tval *t) { return t->rank == 0 || (t->rank == 1 && t->dims[0] == 1); }

/* ---- Shape, Size ---------------------------------------------------------- */

static int64_t clamp_to_rank(int64_t v, int rank) {
    if (v < 0) v += rank;
    return v < 0 ? 0 : v > rank ? rank : v;
}

/* The dims of the input as int64 (start/end from opset 15). */
static est_status shape_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    int64_t start, end;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if ((st = est_attr_int(ctx, "start", 0, &start)) != EST_OK) return st;
    if ((st = est_attr_int(ctx, "end", x->rank, &end)) != EST_OK) return st;
    start = clamp_to_rank(start, x->rank);
    end = clamp_to_rank(end, x->rank);
    int64_t n = end > start ? end - start : 0;
    if ((st = est_set_out(ctx, 0, EST_DT_INT64, 1, &n)) != EST_OK) return st;
    est_const *c = est_fold_out(ctx, 0, EST_DT_INT64);
    for (int64_t k = 0; c && k < n; k++) c->i64[k] = x->dims[start + k];
    return EST_OK;
}

static est_status size_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    int64_t none[1] = {0};
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if ((st = est_set_out(ctx, 0, EST_DT_INT64, 0, none)) != EST_OK) return st;
    est_const *c = est_fold_out(ctx, 0, EST_DT_INT64);
    if (c) c->i64[0] = x->elements;
    return EST_OK;
}

/* ---- Reshape, Flatten, Squeeze, Unsqueeze, Identity ------------------------ */

/* Resolves Reshape's 0 (copy the input dim, unless allowzero) and -1 (infer). */
static est_status reshape_dims(est_infer_ctx *ctx, const est_tval *x, const int64_t *shape, int n,
                               bool allowzero, int64_t *dims) {
    int infer_at = -1;
    int64_t known = 1;
    char a[160], b[160];
    for (int i = 0; i < n; i++) {
        int64_t v = shape[i];
        if (v == 0 && !allowzero) {
            if (i >= x->rank)
                return est_op_fail(ctx, EST_ESHAPE,
                                   "shape[%d] is 0 (copy the input dim), but the input %s has rank %d",
                                   i, est_dims_str(a, sizeof a, x->rank, x->dims), x->rank);
            v = x->dims[i];
        } else if (v == -1) {
            if (infer_at >= 0)
                return est_op_fail(ctx, EST_ESHAPE, "the target shape %s has more than one -1",
                                   est_dims_str(a, sizeof a, n, shape));
            infer_at = i;
            v = 1;
        } else if (v < 0) {
            return est_op_fail(ctx, EST_ESHAPE, "the target shape %s has a negative dim",
                               est_dims_str(a, sizeof a, n, shape));
        }
        dims[i] = v;
        if (est__mul_overflow(known, v, &known))
            return est_op_fail(ctx, EST_EOVERFLOW, "the target shape's element count overflows 64 bits");
    }
    if (infer_at >= 0) {
        if (known == 0 || x->elements % known != 0)
            return est_op_fail(ctx, EST_ESHAPE, "cannot infer the -1 of target shape %s from input %s",
                               est_dims_str(a, sizeof a, n, shape), est_dims_str(b, sizeof b, x->rank, x->dims));
        dims[infer_at] = x->elements / known;
        known = x->elements;
    }
    if (known != x->elements)
        return est_op_fail(ctx, EST_ESHAPE, "cannot reshape input %s (%lld elements) to %s (%lld elements)",
                           est_dims_str(a, sizeof a, x->rank, x->dims), (long long)x->elements,
                           est_dims_str(b, sizeof b, n, dims), (long long)known);
    return EST_OK;
}

static est_status reshape_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    const int64_t *shape;
    int64_t n, allowzero;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if (ctx->opset < 5) { /* the shape was an attribute until opset 5 */
        if ((st = est_attr_ints(ctx, "shape", &shape, &n)) != EST_OK) return st;
        if (n < 0) return est_op_fail(ctx, EST_EATTR, "attribute 'shape' is missing");
    } else if ((st = est_in_known_ints(ctx, 1, "target shape", &shape, &n)) != EST_OK) {
        return st;
    }
    if (n > EST_MAX_RANK)
        return est_op_fail(ctx, EST_ELIMIT, "the target shape has rank %lld (limit %d)", (long long)n, EST_MAX_RANK);
    if ((st = est_attr_int(ctx, "allowzero", 0, &allowzero)) != EST_OK) return st;
    int64_t dims[EST_MAX_RANK];
    if ((st = reshape_dims(ctx, x, shape, (int)n, allowzero != 0, dims)) != EST_OK) return st;
    if ((st = est_set_out(ctx, 0, x->dtype, (int)n, dims)) != EST_OK) return st;
    share_values(ctx, x);
    return EST_OK;
}

/* (d0 .. d_axis-1, d_axis .. d_n) -> (outer product, inner product). */
static est_status flatten_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    int64_t axis;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if ((st = est_attr_int(ctx, "axis", 1, &axis)) != EST_OK) return st;
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis > x->rank)
        return est_op_fail(ctx, EST_EATTR, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
    int64_t dims[2] = {1, 1};
    for (int d = 0; d < x->rank; d++) dims[d < axis ? 0 : 1] *= x->dims[d];
    if ((st = est_set_out(ctx, 0, x->dtype, 2, dims)) != EST_OK) return st;
    share_values(ctx, x);
    return EST_OK;
}

/* Squeeze's and Unsqueeze's axes: an attribute before opset 13, an input from 13. */
static est_status read_axes(est_infer_ctx *ctx, const int64_t **axes, int64_t *n) {
    if (ctx->opset < 13) return est_attr_ints(ctx, "axes", axes, n);
    *axes = NULL;
    *n = -1;
    return est_in(ctx, 1) ? est_in_known_ints(ctx, 1, "axes", axes, n) : EST_OK;
}

static est_status squeeze_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    const int64_t *axes;
    int64_t n;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if ((st = read_axes(ctx, &axes, &n)) != EST_OK) return st;
    bool drop[EST_MAX_RANK] = {false};
    for (int d = 0; n < 0 && d < x->rank; d++) drop[d] = x->dims[d] == 1; /* no axes: every 1 */
    for (int64_t i = 0; i < n; i++) {
        int ax;
        if ((st = est_axis(ctx, axes[i], x->rank, &ax)) != EST_OK) return st;
        if (x->dims[ax] != 1)
            return est_op_fail(ctx, EST_ESHAPE, "cannot squeeze axis %d, whose size is %lld", ax,
                               (long long)x->dims[ax]);
        drop[ax] = true;
    }
    int64_t dims[EST_MAX_RANK];
    int rank = 0;
    for (int d = 0; d < x->rank; d++)
        if (!drop[d]) dims[rank++] = x->dims[d];
    if ((st = est_set_out(ctx, 0, x->dtype, rank, dims)) != EST_OK) return st;
    share_values(ctx, x);
    return EST_OK;
}

static est_status unsqueeze_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    const int64_t *axes;
    int64_t n;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if ((st = read_axes(ctx, &axes, &n)) != EST_OK) return st;
    if (n < 0) return est_op_fail(ctx, EST_EATTR, "the axes to insert are missing");
    if (x->rank + n > EST_MAX_RANK)
        return est_op_fail(ctx, EST_ELIMIT, "output would have rank %lld (limit %d)", (long long)(x->rank + n),
                           EST_MAX_RANK);
    int rank = x->rank + (int)n;
    bool inserted[EST_MAX_RANK] = {false};
    for (int64_t i = 0; i < n; i++) {
        int ax;
        if ((st = est_axis(ctx, axes[i], rank, &ax)) != EST_OK) return st;
        if (inserted[ax]) return est_op_fail(ctx, EST_EATTR, "axis %lld is repeated", (long long)axes[i]);
        inserted[ax] = true;
    }
    int64_t dims[EST_MAX_RANK];
    for (int d = 0, j = 0; d < rank; d++) dims[d] = inserted[d] ? 1 : x->dims[j++];
    if ((st = est_set_out(ctx, 0, x->dtype, rank, dims)) != EST_OK) return st;
    share_values(ctx, x);
    return EST_OK;
}

static est_status identity_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if ((st = est_set_out_like(ctx, 0, x)) != EST_OK) return st;
    share_values(ctx, x);
    return EST_OK;
}

/* ---- Transpose, Expand ----------------------------------------------------- */

static est_status read_perm(est_infer_ctx *ctx, int rank, int *perm) {
    const int64_t *p;
    int64_t n;
    est_status st = est_attr_ints(ctx, "perm", &p, &n);
    if (st != EST_OK) return st;
    if (n < 0) { /* default: reverse the dims */
        for (int d = 0; d < rank; d++) perm[d] = rank - 1 - d;
        return EST_OK;
    }
    if (n != rank)
        return est_op_fail(ctx, EST_EATTR, "perm has %lld entries for an input of rank %d", (long long)n, rank);
    bool used[EST_MAX_RANK] = {false};
    for (int d = 0; d < rank; d++) {
        if (p[d] < 0 || p[d] >= rank || used[p[d]])
            return est_op_fail(ctx, EST_EATTR, "perm is not a permutation of 0..%d", rank - 1);
        used[p[d]] = true;
        perm[d] = (int)p[d];
    }
    return EST_OK;
}

static void fold_transpose(est_infer_ctx *ctx, const est_tval *x, const int *perm) {
    est_const *c = x->value ? est_fold_out(ctx, 0, x->dtype) : NULL;
    if (!c) return;
    const est_tval *o = ctx->out[0];
    int64_t in_strides[EST_MAX_RANK], idx[EST_MAX_RANK] = {0};
    est_strides(x->rank, x->dims, in_strides);
    for (int64_t k = 0; k < o->elements; k++) {
        int64_t src = 0;
        for (int d = 0; d < o->rank; d++) src += idx[d] * in_strides[perm[d]];
        est_const_copy(c, k, x->value, src);
        est_next_index(o->rank, o->dims, idx);
    }
}

static est_status transpose_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    int perm[EST_MAX_RANK];
    int64_t dims[EST_MAX_RANK];
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if ((st = read_perm(ctx, x->rank, perm)) != EST_OK) return st;
    for (int d = 0; d < x->rank; d++) dims[d] = x->dims[perm[d]];
    if ((st = est_set_out(ctx, 0, x->dtype, x->rank, dims)) != EST_OK) return st;
    fold_transpose(ctx, x, perm);
    return EST_OK;
}

/* Fills output 0 (already shaped) with x broadcast to it. */
static void fold_broadcast(est_infer_ctx *ctx, const est_tval *x) {
    est_const *c = x->value ? est_fold_out(ctx, 0, x->dtype) : NULL;
    if (!c) return;
    const est_tval *o = ctx->out[0];
    int off = o->rank - x->rank;
    int64_t in_strides[EST_MAX_RANK], idx[EST_MAX_RANK] = {0};
    est_strides(x->rank, x->dims, in_strides);
    for (int64_t k = 0; k < o->elements; k++) {
        int64_t src = 0;
        for (int d = 0; d < x->rank; d++)
            if (x->dims[d] != 1) src += idx[d + off] * in_strides[d];
        est_const_copy(c, k, x->value, src);
        est_next_index(o->rank, o->dims, idx);
    }
}

static est_status expand_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    const int64_t *shape;
    int64_t n;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if ((st = est_in_known_ints(ctx, 1, "target shape", &shape, &n)) != EST_OK) return st;
    if (n > EST_MAX_RANK)
        return est_op_fail(ctx, EST_ELIMIT, "the target shape has rank %lld (limit %d)", (long long)n, EST_MAX_RANK);
    for (int64_t i = 0; i < n; i++)
        if (shape[i] < 0) return est_op_fail(ctx, EST_ESHAPE, "the target shape has a negative dim");
    int rank;
    int64_t dims[EST_MAX_RANK];
    if ((st = est_broadcast(ctx, x->rank, x->dims, (int)n, shape, &rank, dims)) != EST_OK) return st;
    if ((st = est_set_out(ctx, 0, x->dtype, rank, dims)) != EST_OK) return st;
    fold_broadcast(ctx, x);
    return EST_OK;
}

/* ---- ConstantOfShape, Constant, EyeLike, Range ----------------------------- */

static est_status constant_of_shape_infer(est_infer_ctx *ctx) {
    est_status st;
    const int64_t *shape;
    int64_t n;
    if ((st = est_in_known_ints(ctx, 0, "output shape", &shape, &n)) != EST_OK) return st;
    if (n > EST_MAX_RANK)
        return est_op_fail(ctx, EST_ELIMIT, "the output shape has rank %lld (limit %d)", (long long)n, EST_MAX_RANK);
    const est_attr *a = est_attr_get(ctx->node, "value");
    if (a && a->type != EST_ATTR_TENSOR) return est_op_fail(ctx, EST_EATTR, "attribute 'value' must be a tensor");
    est_dtype dt = a ? a->t_dtype : EST_DT_FLOAT; /* default: float 0 */
    if ((st = est_set_out(ctx, 0, dt, (int)n, shape)) != EST_OK) return st;
    const est_const *v = a ? a->t_value : NULL;
    if (a && (!v || v->count < 1)) return EST_OK; /* the fill value is not kept: no folding */
    est_const *c = est_fold_out(ctx, 0, dt);
    for (int64_t k = 0; c && k < c->count; k++) {
        if (v) est_const_copy(c, k, v, 0);
        else c->f64[k] = 0;
    }
    return EST_OK;
}

static est_status constant_scalars(est_infer_ctx *ctx, const est_attr *a, bool is_float, bool is_list) {
    est_attr_type want = is_float ? (is_list ? EST_ATTR_FLOATS : EST_ATTR_FLOAT)
                                  : (is_list ? EST_ATTR_INTS : EST_ATTR_INT);
    if (a->type != want) return est_op_fail(ctx, EST_EATTR, "attribute '%s' has the wrong type", a->name);
    int64_t n = is_list ? a->n : 1;
    est_status st = est_set_out(ctx, 0, is_float ? EST_DT_FLOAT : EST_DT_INT64, is_list ? 1 : 0, &n);
    if (st != EST_OK) return st;
    est_const *c = est_fold_out(ctx, 0, is_float ? EST_DT_FLOAT : EST_DT_INT64);
    for (int64_t k = 0; c && k < n; k++) {
        if (is_float) c->f64[k] = is_list ? a->floats[k] : a->f;
        else c->i64[k] = is_list ? a->ints[k] : a->i;
    }
    return EST_OK;
}

/* The value comes from exactly one attribute, of one of several kinds. */
static est_status constant_infer(est_infer_ctx *ctx) {
    const est_node *n = ctx->node;
    const est_attr *a;
    est_status st;
    if ((a = est_attr_get(n, "value"))) {
        if (a->type != EST_ATTR_TENSOR) return est_op_fail(ctx, EST_EATTR, "attribute 'value' must be a tensor");
        if ((st = est_set_out(ctx, 0, a->t_dtype, a->t_rank, a->t_dims)) != EST_OK) return st;
        if (a->t_value && ctx->out[0] && a->t_value->count == ctx->out[0]->elements) ctx->out[0]->value = a->t_value;
        return EST_OK;
    }
    if ((a = est_attr_get(n, "value_float"))) return constant_scalars(ctx, a, true, false);
    if ((a = est_attr_get(n, "value_floats"))) return constant_scalars(ctx, a, true, true);
    if ((a = est_attr_get(n, "value_int"))) return constant_scalars(ctx, a, false, false);
    if ((a = est_attr_get(n, "value_ints"))) return constant_scalars(ctx, a, false, true);
    if ((a = est_attr_get(n, "value_string"))) return est_set_out(ctx, 0, EST_DT_STRING, 0, &a->n);
    if ((a = est_attr_get(n, "value_strings"))) {
        if (a->type != EST_ATTR_STRINGS)
            return est_op_fail(ctx, EST_EATTR, "attribute 'value_strings' must be strings");
        return est_set_out(ctx, 0, EST_DT_STRING, 1, &a->n);
    }
    if (est_attr_get(n, "sparse_value"))
        return est_op_fail(ctx, EST_EUNSUPPORTED, "sparse constants ('sparse_value') are not supported");
    return est_op_fail(ctx, EST_EATTR,
                       "has none of the attributes value, value_float(s), value_int(s), value_string(s)");
}

/* A 2-D tensor with ones on diagonal k, of attribute dtype or the input's. */
static est_status eye_like_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    int64_t dtype, k;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if (x->rank != 2) return est_op_fail(ctx, EST_ESHAPE, "input has rank %d; EyeLike needs 2", x->rank);
    if ((st = est_attr_int(ctx, "dtype", x->dtype, &dtype)) != EST_OK) return st;
    if ((st = est_attr_int(ctx, "k", 0, &k)) != EST_OK) return st;
    if (dtype <= EST_DT_UNDEFINED || dtype >= EST_DT_COUNT)
        return est_op_fail(ctx, EST_EATTR, "dtype %lld is not a valid element type", (long long)dtype);
    if ((st = est_set_out(ctx, 0, (est_dtype)dtype, 2, x->dims)) != EST_OK) return st;
    est_const *c = est_fold_out(ctx, 0, (est_dtype)dtype);
    for (int64_t i = 0; c && i < x->dims[0]; i++)
        for (int64_t j = 0; j < x->dims[1]; j++) est_const_set(c, i * x->dims[1] + j, 0, j - i == k, false);
    return EST_OK;
}

/* max(ceil((limit - start) / delta), 0), as ONNX's own shape inference
 * computes it: the difference in the input type, the division in double. */
static est_status range_count(est_infer_ctx *ctx, const est_const *s, const est_const *l, const est_const *d,
                              int64_t *count) {
    if (s->i64) {
        int64_t diff;
        if (d->i64[0] == 0) return est_op_fail(ctx, EST_ESHAPE, "delta is 0");
        if (__builtin_sub_overflow(l->i64[0], s->i64[0], &diff))
            return est_op_fail(ctx, EST_EOVERFLOW, "limit - start overflows 64 bits");
        int64_t q = diff / d->i64[0], r = diff % d->i64[0];
        *count = q + (r != 0 && (r > 0) == (d->i64[0] > 0)); /* ceiling of the exact quotient */
        if (*count < 0) *count = 0;
    } else {
        if (d->f64[0] == 0) return est_op_fail(ctx, EST_ESHAPE, "delta is 0");
        double diff = s->dtype == EST_DT_DOUBLE ? l->f64[0] - s->f64[0]
                                                : (double)((float)l->f64[0] - (float)s->f64[0]);
        double n = ceil(diff / d->f64[0]);
        if (!(n > 0)) n = 0; /* negative or NaN */
        if (n > (double)EST_MAX_DIM_VALUE)
            return est_op_fail(ctx, EST_ELIMIT, "the range has more than %lld elements",
                               (long long)EST_MAX_DIM_VALUE);
        *count = (int64_t)n;
    }
    if (*count > EST_MAX_DIM_VALUE)
        return est_op_fail(ctx, EST_ELIMIT, "the range has more than %lld elements", (long long)EST_MAX_DIM_VALUE);
    return EST_OK;
}

static est_status range_infer(est_infer_ctx *ctx) {
    const est_tval *t[3];
    static const char *const names[3] = {"start", "limit", "delta"};
    est_status st;
    for (int i = 0; i < 3; i++) {
        if ((st = est_in_req(ctx, i, &t[i])) != EST_OK) return st;
        if (!scalar_like(t[i])) return est_op_fail(ctx, EST_ESHAPE, "%s must be a scalar", names[i]);
        if (!t[i]->value)
            return est_op_fail(ctx, EST_ESHAPE,
                               "cannot resolve the output length: the value of %s (input %d, '%s') is not "
                               "known at estimate time",
                               names[i], i, est_in_name(ctx, i));
        if ((t[i]->value->i64 != NULL) != (t[0]->value->i64 != NULL))
            return est_op_fail(ctx, EST_ESHAPE, "start, limit and delta must share a type");
    }
    int64_t count;
    if ((st = range_count(ctx, t[0]->value, t[1]->value, t[2]->value, &count)) != EST_OK) return st;
    if ((st = est_set_out(ctx, 0, t[0]->dtype, 1, &count)) != EST_OK) return st;
    est_const *c = est_fold_out(ctx, 0, t[0]->dtype);
    for (int64_t k = 0; c && k < count; k++) {
        if (c->i64) est_const_set(c, k, 0, t[0]->value->i64[0] + k * t[2]->value->i64[0], false);
        else est_const_set(c, k, t[0]->value->f64[0] + (double)k * t[2]->value->f64[0], 0, true);
    }
    return EST_OK;
}

EST_FAMILY(shape,
    {.name = "Shape", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = shape_infer, .nondiff_inputs = EST_SLOT(0)},
    {.name = "Size", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = size_infer, .nondiff_inputs = EST_SLOT(0)},
    {.name = "Reshape", .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = reshape_infer, .nondiff_inputs = EST_SLOT(1), .view = EST_VIEW_RESHAPE},
    {.name = "Flatten", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = flatten_infer, .view = EST_VIEW_RESHAPE},
    {.name = "Squeeze", .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = squeeze_infer, .nondiff_inputs = EST_SLOT(1), .view = EST_VIEW_ALIAS},
    {.name = "Unsqueeze", .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = unsqueeze_infer, .nondiff_inputs = EST_SLOT(1), .view = EST_VIEW_ALIAS},
    {.name = "Transpose", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = transpose_infer, .view = EST_VIEW_PERMUTE},
    {.name = "Expand", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = expand_infer, .nondiff_inputs = EST_SLOT(1), .view = EST_VIEW_ALIAS},
    {.name = "ConstantOfShape", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = constant_of_shape_infer, .nondiff_inputs = EST_SLOT(0)},
    {.name = "Constant", .min_inputs = 0, .max_inputs = 0, .min_outputs = 1, .max_outputs = 1,
     .infer = constant_infer},
    {.name = "Range", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = range_infer, .nondiff_inputs = EST_SLOT(0) | EST_SLOT(1) | EST_SLOT(2)},
    {.name = "Identity", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = identity_infer, .view = EST_VIEW_ALIAS},
    /* tensor.detach(): a view that no gradient flows through ("detach: non_differentiable"). */
    {.name = "Detach", .domain = EST_DOMAIN_MEMEST, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
     .max_outputs = 1, .infer = identity_infer, .nondiff_inputs = EST_SLOT(0), .view = EST_VIEW_ALIAS},
    {.name = "EyeLike", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = eye_like_infer, .nondiff_inputs = EST_SLOT(0)},
);
