/*
 * index.c: ops that select, combine or place elements by index: Gather,
 * GatherElements, GatherND, Slice, Split, Concat, Tile, Pad, ScatterND,
 * ScatterElements, Scatter, OneHot, Trilu, TopK, CumSum, ReverseSequence,
 * CenterCropPad. Resampling by position (Resize, GridSample, DepthToSpace,
 * ...) is resample.c; ops whose output size depends on values (Compress,
 * NonZero, Unique) are datadep.c.
 *
 * Gather, Slice, Split, Concat and friends fold when their inputs are known:
 * they carry the shape vectors of exports.
 *
 * FLOPs (docs/flops.md); backward = 2 x forward when the data needs a
 * gradient. Ops that only move data count 0: Gather*, Slice, Split, Concat,
 * Tile, Pad, CenterCropPad, OneHot, Trilu, ReverseSequence, Scatter*
 * without a reduction. The rest:
 *   1 per element   Scatter* with a reduction (per update), CumSum and TopK
 *                   (per input)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

/* ---- helpers -------------------------------------------------------------- */

/* Reads a known integer scalar (or one-element tensor) input. */
static est_status known_scalar(est_infer_ctx *ctx, int i, const char *what, int64_t *out) {
    const int64_t *v;
    int64_t n;
    est_status st = est_in_known_ints(ctx, i, what, &v, &n);
    if (st != EST_OK) return st;
    if (n != 1)
        return est_op_fail(ctx, EST_ESHAPE, "the %s (input %d) must hold one value, not %lld", what, i, (long long)n);
    *out = v[0];
    return EST_OK;
}

/* Normalises index v against a dim of size n; false when out of range. */
static bool index_in(int64_t *v, int64_t n) {
    if (*v < 0) *v += n;
    return *v >= 0 && *v < n;
}

static est_status bad_index(est_infer_ctx *ctx, int64_t v, int64_t n) {
    return est_op_fail(ctx, EST_ESHAPE, "index %lld is out of range for a dim of size %lld", (long long)v,
                       (long long)n);
}

static bool scalar_like(const est_tval *t) { return t->elements == 1 && t->rank <= 1; }

/* ---- Gather, GatherElements, GatherND ---------------------------------------- */

static est_status fold_gather(est_infer_ctx *ctx, const est_tval *data, const est_tval *idx, int axis) {
    est_const *c = data->value && idx->value ? est_fold_out(ctx, 0, data->dtype) : NULL;
    if (!c) return EST_OK;
    int64_t outer = est_dims_product(0, axis, data->dims), n = data->dims[axis];
    int64_t inner = est_dims_product(axis + 1, data->rank, data->dims), m = idx->elements;
    for (int64_t j = 0; j < m; j++) {
        int64_t v = est_const_get_i(idx->value, j);
        if (!index_in(&v, n)) return bad_index(ctx, v, n);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++)
                est_const_copy(c, (o * m + j) * inner + i, data->value, (o * n + v) * inner + i);
    }
    return EST_OK;
}

/* data[:axis] + indices.shape + data[axis+1:]. */
static est_status gather_infer(est_infer_ctx *ctx) {
    const est_tval *data, *idx;
    est_status st;
    int64_t axis_attr;
    int axis;
    if ((st = est_in_req(ctx, 0, &data)) != EST_OK || (st = est_in_req(ctx, 1, &idx)) != EST_OK) return st;
    if (data->rank < 1) return est_op_fail(ctx, EST_ESHAPE, "data must have rank 1 or more");
    if ((st = est_attr_int(ctx, "axis", 0, &axis_attr)) != EST_OK) return st;
    if ((st = est_axis(ctx, axis_attr, data->rank, &axis)) != EST_OK) return st;
    int rank = data->rank - 1 + idx->rank;
    if (rank > EST_MAX_RANK)
        return est_op_fail(ctx, EST_ELIMIT, "output would have rank %d (limit %d)", rank, EST_MAX_RANK);
    int64_t dims[EST_MAX_RANK];
    int r = 0;
    for (int d = 0; d < axis; d++) dims[r++] = data->dims[d];
    for (int d = 0; d < idx->rank; d++) dims[r++] = idx->dims[d];
    for (int d = axis + 1; d < data->rank; d++) dims[r++] = data->dims[d];
    if ((st = est_set_out(ctx, 0, data->dtype, rank, dims)) != EST_OK) return st;
    return fold_gather(ctx, data, idx, axis);
}

static est_status fold_gather_elements(est_infer_ctx *ctx, const est_tval *data, const est_tval *idx, int axis) {
    est_const *c = data->value && idx->value ? est_fold_out(ctx, 0, data->dtype) : NULL;
    if (!c) return EST_OK;
    int64_t strides[EST_MAX_RANK], at[EST_MAX_RANK] = {0};
    est_strides(data->rank, data->dims, strides);
    for (int64_t k = 0; k < idx->elements; k++) {
        int64_t v = est_const_get_i(idx->value, k), src = 0;
        if (!index_in(&v, data->dims[axis])) return bad_index(ctx, v, data->dims[axis]);
        for (int d = 0; d < data->rank; d++) {
            if (d != axis && at[d] >= data->dims[d]) return bad_index(ctx, at[d], data->dims[d]);
            src += (d == axis ? v : at[d]) * strides[d];
        }
        est_const_copy(c, k, data->value, src);
        est_next_index(idx->rank, idx->dims, at);
    }
    return EST_OK;
}

/* Output takes the indices' shape; Scatter's rule is the same in reverse. */
static est_status gather_elements_infer(est_infer_ctx *ctx) {
    const est_tval *data, *idx;
    est_status st;
    int64_t axis_attr;
    int axis;
    if ((st = est_in_req(ctx, 0, &data)) != EST_OK || (st = est_in_req(ctx, 1, &idx)) != EST_OK) return st;
    if (data->rank < 1 || idx->rank != data->rank)
        return est_op_fail(ctx, EST_ESHAPE, "data (rank %d) and indices (rank %d) must share a rank of 1 or more",
                           data->rank, idx->rank);
    if ((st = est_attr_int(ctx, "axis", 0, &axis_attr)) != EST_OK) return st;
    if ((st = est_axis(ctx, axis_attr, data->rank, &axis)) != EST_OK) return st;
    if ((st = est_set_out(ctx, 0, data->dtype, idx->rank, idx->dims)) != EST_OK) return st;
    return fold_gather_elements(ctx, data, idx, axis);
}

static est_status fold_gather_nd(est_infer_ctx *ctx, const est_tval *data, const est_tval *idx, int batch) {
    est_const *c = data->value && idx->value ? est_fold_out(ctx, 0, data->dtype) : NULL;
    if (!c) return EST_OK;
    int last = (int)idx->dims[idx->rank - 1];
    int64_t strides[EST_MAX_RANK];
    est_strides(data->rank, data->dims, strides);
    int64_t tuples = idx->elements / (last ? last : 1), batches = est_dims_product(0, batch, idx->dims);
    if (tuples == 0 || batches == 0) return EST_OK;
    int64_t per_batch = tuples / batches;
    int64_t inner = est_dims_product(batch + last, data->rank, data->dims);
    for (int64_t t = 0; t < tuples; t++) {
        int64_t b = t / per_batch, src = 0;
        for (int d = batch - 1; d >= 0; d--) { /* the batch coordinates of tuple t */
            src += (b % data->dims[d]) * strides[d];
            b /= data->dims[d];
        }
        for (int j = 0; j < last; j++) {
            int64_t v = est_const_get_i(idx->value, t * last + j);
            if (!index_in(&v, data->dims[batch + j])) return bad_index(ctx, v, data->dims[batch + j]);
            src += v * strides[batch + j];
        }
        for (int64_t i = 0; i < inner; i++) est_const_copy(c, t * inner + i, data->value, src + i);
    }
    return EST_OK;
}

/* indices.shape[:-1] + data.shape[batch_dims + indices.shape[-1]:]. */
static est_status gather_nd_infer(est_infer_ctx *ctx) {
    const est_tval *data, *idx;
    est_status st;
    int64_t b;
    if ((st = est_in_req(ctx, 0, &data)) != EST_OK || (st = est_in_req(ctx, 1, &idx)) != EST_OK) return st;
    if ((st = est_attr_int(ctx, "batch_dims", 0, &b)) != EST_OK) return st;
    if (data->rank < 1 || idx->rank < 1)
        return est_op_fail(ctx, EST_ESHAPE, "data and indices must have rank 1 or more");
    if (b < 0 || b >= idx->rank || b >= data->rank)
        return est_op_fail(ctx, EST_EATTR, "batch_dims %lld must be below both ranks", (long long)b);
    int64_t last = idx->dims[idx->rank - 1];
    if (last < 1 || last > data->rank - b)
        return est_op_fail(ctx, EST_ESHAPE, "indices' last dim %lld must be between 1 and %lld", (long long)last,
                           (long long)(data->rank - b));
    for (int d = 0; d < b; d++)
        if (idx->dims[d] != data->dims[d])
            return est_op_fail(ctx, EST_ESHAPE, "batch dim %d differs: data %lld, indices %lld", d,
                               (long long)data->dims[d], (long long)idx->dims[d]);
    int64_t dims[2 * EST_MAX_RANK];
    int r = 0;
    for (int d = 0; d < idx->rank - 1; d++) dims[r++] = idx->dims[d];
    for (int d = (int)(b + last); d < data->rank; d++) dims[r++] = data->dims[d];
    if ((st = est_set_out(ctx, 0, data->dtype, r, dims)) != EST_OK) return st;
    return fold_gather_nd(ctx, data, idx, (int)b);
}

/* ---- Slice ------------------------------------------------------------------ */

typedef struct slice_args {
    const int64_t *starts, *ends, *axes, *steps;
    int64_t n, n_axes, n_steps;
} slice_args;

static est_status read_slice_args(est_infer_ctx *ctx, slice_args *s) {
    est_status st;
    int64_t n_ends;
    s->steps = NULL;
    s->n_steps = -1;
    s->axes = NULL;
    s->n_axes = -1;
    if (ctx->opset < 10) { /* attributes until opset 10 */
        if ((st = est_attr_ints(ctx, "starts", &s->starts, &s->n)) != EST_OK ||
            (st = est_attr_ints(ctx, "ends", &s->ends, &n_ends)) != EST_OK ||
            (st = est_attr_ints(ctx, "axes", &s->axes, &s->n_axes)) != EST_OK)
            return st;
        if (s->n < 0 || n_ends < 0) return est_op_fail(ctx, EST_EATTR, "attributes 'starts' and 'ends' are required");
    } else {
        if ((st = est_in_known_ints(ctx, 1, "starts", &s->starts, &s->n)) != EST_OK ||
            (st = est_in_known_ints(ctx, 2, "ends", &s->ends, &n_ends)) != EST_OK)
            return st;
        if (est_in(ctx, 3) && (st = est_in_known_ints(ctx, 3, "axes", &s->axes, &s->n_axes)) != EST_OK) return st;
        if (est_in(ctx, 4) && (st = est_in_known_ints(ctx, 4, "steps", &s->steps, &s->n_steps)) != EST_OK) return st;
    }
    if (n_ends != s->n || (s->n_axes >= 0 && s->n_axes != s->n) || (s->n_steps >= 0 && s->n_steps != s->n))
        return est_op_fail(ctx, EST_ESHAPE, "starts (%lld), ends (%lld), axes and steps must have the same length",
                           (long long)s->n, (long long)n_ends);
    return EST_OK;
}

/* Clamps one axis's start and end as the ONNX spec says; returns the length. */
static int64_t slice_axis(int64_t dim, int64_t *start, int64_t end, int64_t step) {
    int64_t s = *start, e = end;
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (dim == 0) return 0;
    if (step > 0) {
        s = s < 0 ? 0 : s > dim ? dim : s;
        e = e < 0 ? 0 : e > dim ? dim : e;
        *start = s;
        return e > s ? (e - s - 1) / step + 1 : 0;
    }
    s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
    e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    *start = s;
    int64_t stride = step == INT64_MIN ? INT64_MAX : -step;
    return s > e ? (s - e - 1) / stride + 1 : 0;
}

static void fold_slice(est_infer_ctx *ctx, const est_tval *x, const int64_t *start, const int64_t *step) {
    est_const *c = x->value ? est_fold_out(ctx, 0, x->dtype) : NULL;
    if (!c) return;
    const est_tval *o = ctx->out[0];
    int64_t strides[EST_MAX_RANK], idx[EST_MAX_RANK] = {0};
    est_strides(x->rank, x->dims, strides);
    for (int64_t k = 0; k < o->elements; k++) {
        int64_t src = 0;
        for (int d = 0; d < x->rank; d++) src += (start[d] + idx[d] * step[d]) * strides[d];
        est_const_copy(c, k, x->value, src);
        est_next_index(o->rank, o->dims, idx);
    }
}

static est_status slice_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    slice_args s;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if ((st = read_slice_args(ctx, &s)) != EST_OK) return st;
    int64_t start[EST_MAX_RANK], step[EST_MAX_RANK], dims[EST_MAX_RANK];
    bool seen[EST_MAX_RANK] = {false};
    for (int d = 0; d < x->rank; d++) {
        start[d] = 0;
        step[d] = 1;
        dims[d] = x->dims[d];
    }
    for (int64_t i = 0; i < s.n; i++) {
        int ax;
        if ((st = est_axis(ctx, s.axes ? s.axes[i] : i, x->rank, &ax)) != EST_OK) return st;
        if (seen[ax]) return est_op_fail(ctx, EST_EATTR, "axis %d is sliced twice", ax);
        seen[ax] = true;
        step[ax] = s.steps ? s.steps[i] : 1;
        if (step[ax] == 0) return est_op_fail(ctx, EST_ESHAPE, "step %lld is 0", (long long)i);
        start[ax] = s.starts[i];
        dims[ax] = slice_axis(x->dims[ax], &start[ax], s.ends[i], step[ax]);
    }
    if ((st = est_set_out(ctx, 0, x->dtype, x->rank, dims)) != EST_OK) return st;
    fold_slice(ctx, x, start, step);
    return EST_OK;
}

/* ---- Split, Concat, Tile ------------------------------------------------------ */

/* Opset 18's num_outputs: ceil-sized chunks, the last one smaller. */
static est_status split_by_count(est_infer_ctx *ctx, int64_t dim, int64_t n, int64_t *sizes) {
    if (n < 1) return est_op_fail(ctx, EST_EATTR, "num_outputs must be positive");
    if (n != ctx->n_out)
        return est_op_fail(ctx, EST_EATTR, "num_outputs is %lld but the node has %d outputs",
                           (long long)n, ctx->n_out);
    int64_t chunk = dim / n + (dim % n != 0);
    for (int64_t i = 0; i < n; i++) sizes[i] = chunk;
    sizes[n - 1] = dim - chunk * (n - 1);
    if (sizes[n - 1] < 0)
        return est_op_fail(ctx, EST_ESHAPE, "cannot split a dim of %lld into %lld chunks of %lld", (long long)dim,
                           (long long)n, (long long)chunk);
    return EST_OK;
}

static est_status split_sizes(est_infer_ctx *ctx, int64_t dim, int64_t *sizes) {
    const int64_t *split = NULL;
    int64_t n = -1, num_outputs;
    est_status st;
    if (ctx->opset < 13 && (st = est_attr_ints(ctx, "split", &split, &n)) != EST_OK) return st;
    if (n < 0 && est_in(ctx, 1) && (st = est_in_known_ints(ctx, 1, "split sizes", &split, &n)) != EST_OK) return st;
    if ((st = est_attr_int(ctx, "num_outputs", -1, &num_outputs)) != EST_OK) return st;
    if (n < 0 && num_outputs >= 0) return split_by_count(ctx, dim, num_outputs, sizes);
    if (n < 0) { /* equal parts, one per output */
        if (dim % ctx->n_out != 0)
            return est_op_fail(ctx, EST_ESHAPE, "cannot split a dim of %lld into %d equal parts", (long long)dim,
                               ctx->n_out);
        for (int i = 0; i < ctx->n_out; i++) sizes[i] = dim / ctx->n_out;
        return EST_OK;
    }
    if (n != ctx->n_out)
        return est_op_fail(ctx, EST_ESHAPE, "split has %lld sizes but the node has %d outputs",
                           (long long)n, ctx->n_out);
    int64_t sum = 0;
    for (int64_t i = 0; i < n; i++) {
        if (split[i] < 0 || split[i] > dim)
            return est_op_fail(ctx, EST_ESHAPE, "split size %lld is invalid", (long long)split[i]);
        sizes[i] = split[i];
        sum += split[i];
    }
    if (sum != dim)
        return est_op_fail(ctx, EST_ESHAPE, "split sizes add up to %lld, not the dim %lld",
                           (long long)sum, (long long)dim);
    return EST_OK;
}

static est_status split_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    int64_t axis_attr, sizes[EST_MAX_IO];
    int axis;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if ((st = est_attr_int(ctx, "axis", 0, &axis_attr)) != EST_OK) return st;
    if ((st = est_axis(ctx, axis_attr, x->rank, &axis)) != EST_OK) return st;
    if ((st = split_sizes(ctx, x->dims[axis], sizes)) != EST_OK) return st;
    int64_t dims[EST_MAX_RANK], offset = 0;
    int64_t outer = est_dims_product(0, axis, x->dims), inner = est_dims_product(axis + 1, x->rank, x->dims);
    memcpy(dims, x->dims, sizeof dims);
    for (int i = 0; i < ctx->n_out; i++) {
        dims[axis] = sizes[i];
        if ((st = est_set_out(ctx, i, x->dtype, x->rank, dims)) != EST_OK) return st;
        est_const *c = x->value ? est_fold_out(ctx, i, x->dtype) : NULL;
        int64_t block = sizes[i] * inner;
        for (int64_t o = 0; c && o < outer; o++)
            for (int64_t k = 0; k < block; k++)
                est_const_copy(c, o * block + k, x->value, (o * x->dims[axis] + offset) * inner + k);
        offset += sizes[i];
    }
    return EST_OK;
}

static void fold_concat(est_infer_ctx *ctx, int axis) {
    for (int i = 0; i < ctx->n_in; i++)
        if (!ctx->in[i]->value) return;
    est_const *c = est_fold_out(ctx, 0, ctx->out[0]->dtype);
    if (!c) return;
    const est_tval *o = ctx->out[0];
    int64_t outer = est_dims_product(0, axis, o->dims), k = 0;
    for (int64_t b = 0; b < outer; b++)
        for (int i = 0; i < ctx->n_in; i++) {
            int64_t block = ctx->in[i]->elements / (outer ? outer : 1);
            for (int64_t j = 0; j < block; j++) est_const_copy(c, k++, ctx->in[i]->value, b * block + j);
        }
}

static est_status concat_infer(est_infer_ctx *ctx) {
    const est_tval *first, *t;
    est_status st;
    int64_t axis_attr;
    int axis;
    if ((st = est_in_req(ctx, 0, &first)) != EST_OK) return st;
    if (ctx->opset >= 4 && !est_attr_get(ctx->node, "axis"))
        return est_op_fail(ctx, EST_EATTR, "attribute 'axis' is required");
    if ((st = est_attr_int(ctx, "axis", 1, &axis_attr)) != EST_OK) return st;
    if ((st = est_axis(ctx, axis_attr, first->rank, &axis)) != EST_OK) return st;
    int64_t dims[EST_MAX_RANK];
    memcpy(dims, first->dims, sizeof dims);
    for (int i = 1; i < ctx->n_in; i++) {
        if ((st = est_in_req(ctx, i, &t)) != EST_OK) return st;
        if (t->rank != first->rank)
            return est_op_fail(ctx, EST_ESHAPE, "input %d has rank %d, input 0 has %d", i, t->rank, first->rank);
        for (int d = 0; d < t->rank; d++)
            if (d != axis && t->dims[d] != first->dims[d])
                return est_op_fail(ctx, EST_ESHAPE, "input %d has %lld at axis %d, input 0 has %lld", i,
                                   (long long)t->dims[d], d, (long long)first->dims[d]);
        dims[axis] += t->dims[axis];
    }
    if ((st = est_set_out(ctx, 0, first->dtype, first->rank, dims)) != EST_OK) return st;
    if (ctx->out[0]) fold_concat(ctx, axis);
    return EST_OK;
}

static void fold_tile(est_infer_ctx *ctx, const est_tval *x) {
    est_const *c = x->value ? est_fold_out(ctx, 0, x->dtype) : NULL;
    if (!c) return;
    const est_tval *o = ctx->out[0];
    int64_t strides[EST_MAX_RANK], idx[EST_MAX_RANK] = {0};
    est_strides(x->rank, x->dims, strides);
    for (int64_t k = 0; k < o->elements; k++) {
        int64_t src = 0;
        for (int d = 0; d < x->rank; d++) src += (idx[d] % x->dims[d]) * strides[d];
        est_const_copy(c, k, x->value, src);
        est_next_index(o->rank, o->dims, idx);
    }
}

static est_status tile_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    int64_t dims[EST_MAX_RANK];
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    memcpy(dims, x->dims, sizeof dims);
    if (ctx->opset < 6) { /* Tile-1: scalar inputs tiles and axis */
        int64_t tiles, axis_v;
        int axis;
        if ((st = known_scalar(ctx, 1, "tiles", &tiles)) != EST_OK) return st;
        if ((st = known_scalar(ctx, 2, "axis", &axis_v)) != EST_OK) return st;
        if ((st = est_axis(ctx, axis_v, x->rank, &axis)) != EST_OK) return st;
        if (tiles < 0) return est_op_fail(ctx, EST_ESHAPE, "tiles must not be negative");
        if (est__mul_overflow(dims[axis], tiles, &dims[axis]))
            return est_op_fail(ctx, EST_EOVERFLOW, "output dim overflows");
    } else {
        const int64_t *rep;
        int64_t n;
        if ((st = est_in_known_ints(ctx, 1, "repeats", &rep, &n)) != EST_OK) return st;
        if (n != x->rank)
            return est_op_fail(ctx, EST_ESHAPE, "repeats has %lld values for an input of rank %d",
                               (long long)n, x->rank);
        for (int d = 0; d < x->rank; d++) {
            if (rep[d] < 0) return est_op_fail(ctx, EST_ESHAPE, "repeats[%d] is negative", d);
            if (est__mul_overflow(dims[d], rep[d], &dims[d]))
                return est_op_fail(ctx, EST_EOVERFLOW, "output dim overflows");
        }
    }
    if ((st = est_set_out(ctx, 0, x->dtype, x->rank, dims)) != EST_OK) return st;
    fold_tile(ctx, x);
    return EST_OK;
}

/* ---- Pad, CenterCropPad ----------------------------------------------------- */

/* Per-axis pads before (begin) and after (end) from attributes or inputs. */
static est_status read_pads(est_infer_ctx *ctx, int rank, int64_t *begin, int64_t *end) {
    const int64_t *pads, *axes = NULL;
    int64_t n, n_axes = -1;
    est_status st;
    if (ctx->opset < 11) {
        if ((st = est_attr_ints(ctx, ctx->opset < 2 ? "paddings" : "pads", &pads, &n)) != EST_OK) return st;
        if (n < 0)
            return est_op_fail(ctx, EST_EATTR, "attribute '%s' is required", ctx->opset < 2 ? "paddings" : "pads");
    } else {
        if ((st = est_in_known_ints(ctx, 1, "pads", &pads, &n)) != EST_OK) return st;
        if (est_in(ctx, 3) && (st = est_in_known_ints(ctx, 3, "axes", &axes, &n_axes)) != EST_OK) return st;
    }
    int64_t count = n_axes >= 0 ? n_axes : rank;
    if (n != 2 * count)
        return est_op_fail(ctx, EST_ESHAPE, "pads has %lld values; expected %lld",
                           (long long)n, (long long)(2 * count));
    for (int d = 0; d < rank; d++) begin[d] = end[d] = 0;
    for (int64_t i = 0; i < count; i++) {
        int ax = (int)i;
        if (axes && (st = est_axis(ctx, axes[i], rank, &ax)) != EST_OK) return st;
        begin[ax] = pads[i];
        end[ax] = pads[i + count];
    }
    return EST_OK;
}

/* Folds constant and edge padding (the modes shape vectors use). */
static void fold_pad(est_infer_ctx *ctx, const est_tval *x, const int64_t *begin) {
    const char *mode;
    if (!x->value || est_attr_string(ctx, "mode", &mode) != EST_OK) return;
    bool edge = mode && strcmp(mode, "edge") == 0;
    if (mode && !edge && strcmp(mode, "constant") != 0) return;
    double fill = 0;
    const est_tval *cv = est_in(ctx, 2);
    if (ctx->opset < 11 && est_attr_float(ctx, "value", 0, &fill) != EST_OK) return;
    if (ctx->opset >= 11 && cv && !cv->value) return;
    if (ctx->opset >= 11 && cv && cv->value->count > 0) fill = est_const_get_f(cv->value, 0);
    est_const *c = est_fold_out(ctx, 0, x->dtype);
    if (!c) return;
    const est_tval *o = ctx->out[0];
    int64_t strides[EST_MAX_RANK], idx[EST_MAX_RANK] = {0};
    est_strides(x->rank, x->dims, strides);
    for (int64_t k = 0; k < o->elements; k++) {
        int64_t src = 0;
        bool inside = x->elements > 0;
        for (int d = 0; d < x->rank; d++) {
            int64_t v = idx[d] - begin[d];
            if (edge) v = v < 0 ? 0 : v >= x->dims[d] ? x->dims[d] - 1 : v;
            inside &= v >= 0 && v < x->dims[d];
            src += v * strides[d];
        }
        if (inside) est_const_copy(c, k, x->value, src);
        else est_const_set(c, k, fill, (int64_t)fill, true);
        est_next_index(o->rank, o->dims, idx);
    }
}

static est_status pad_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    int64_t begin[EST_MAX_RANK], end[EST_MAX_RANK], dims[EST_MAX_RANK];
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if ((st = read_pads(ctx, x->rank, begin, end)) != EST_OK) return st;
    for (int d = 0; d < x->rank; d++) {
        if (begin[d] > EST_MAX_DIM_VALUE || end[d] > EST_MAX_DIM_VALUE || begin[d] < -EST_MAX_DIM_VALUE ||
            end[d] < -EST_MAX_DIM_VALUE)
            return est_op_fail(ctx, EST_ELIMIT, "pads on axis %d exceed %lld", d, (long long)EST_MAX_DIM_VALUE);
        dims[d] = x->dims[d] + begin[d] + end[d];
        if (dims[d] < 0)
            return est_op_fail(ctx, EST_ESHAPE, "pads %lld, %lld shrink axis %d of size %lld below zero",
                               (long long)begin[d], (long long)end[d], d, (long long)x->dims[d]);
    }
    if ((st = est_set_out(ctx, 0, x->dtype, x->rank, dims)) != EST_OK) return st;
    fold_pad(ctx, x, begin);
    return EST_OK;
}

/* The dims at `axes` (default all) become the shape input's values. */
static est_status center_crop_pad_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    const int64_t *shape, *axes;
    int64_t n, n_axes;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if ((st = est_in_known_ints(ctx, 1, "target shape", &shape, &n)) != EST_OK) return st;
    if ((st = est_attr_ints(ctx, "axes", &axes, &n_axes)) != EST_OK) return st;
    if (n != (n_axes >= 0 ? n_axes : x->rank))
        return est_op_fail(ctx, EST_ESHAPE, "the target shape has %lld values for %lld axes", (long long)n,
                           (long long)(n_axes >= 0 ? n_axes : x->rank));
    int64_t dims[EST_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    for (int64_t i = 0; i < n; i++) {
        int ax = (int)i;
        if (axes && (st = est_axis(ctx, axes[i], x->rank, &ax)) != EST_OK) return st;
        dims[ax] = shape[i];
    }
    return est_set_out(ctx, 0, x->dtype, x->rank, dims);
}

/* ---- ScatterND, ScatterElements, Scatter ---------------------------------------- */

static void combine(est_const *c, int64_t k, const est_const *u, int64_t j, const char *reduction) {
    if (!reduction || strcmp(reduction, "none") == 0) {
        est_const_copy(c, k, u, j);
    } else if (c->i64) {
        int64_t a = c->i64[k], b = est_const_get_i(u, j);
        if (strcmp(reduction, "add") == 0) c->i64[k] = (int64_t)((uint64_t)a + (uint64_t)b);
        else if (strcmp(reduction, "mul") == 0) c->i64[k] = (int64_t)((uint64_t)a * (uint64_t)b);
        else if (strcmp(reduction, "max") == 0) c->i64[k] = a > b ? a : b;
        else if (strcmp(reduction, "min") == 0) c->i64[k] = a < b ? a : b;
    } else {
        double a = c->f64[k], b = est_const_get_f(u, j);
        if (strcmp(reduction, "add") == 0) c->f64[k] = a + b;
        else if (strcmp(reduction, "mul") == 0) c->f64[k] = a * b;
        else if (strcmp(reduction, "max") == 0) c->f64[k] = a > b ? a : b;
        else if (strcmp(reduction, "min") == 0) c->f64[k] = a < b ? a : b;
    }
}

static est_status read_reduction(est_infer_ctx *ctx, const char **reduction) {
    static const char *const known[] = {"none", "add", "mul", "max", "min"};
    est_status st = est_attr_string(ctx, "reduction", reduction);
    if (st != EST_OK || !*reduction) return st;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (strcmp(*reduction, known[i]) == 0) return EST_OK;
    return est_op_fail(ctx, EST_EATTR, "unknown reduction '%s'", *reduction);
}

/* Output = data; folds when data, indices and updates are all known. */
static est_const *scatter_fold_start(est_infer_ctx *ctx, const est_tval *data, const est_tval *idx,
                                     const est_tval *upd) {
    if (!data->value || !idx->value || !upd->value) return NULL;
    est_const *c = est_fold_out(ctx, 0, data->dtype);
    for (int64_t k = 0; c && k < data->elements; k++) est_const_copy(c, k, data->value, k);
    return c;
}

static est_status scatter_nd_infer(est_infer_ctx *ctx) {
    const est_tval *data, *idx, *upd;
    est_status st;
    const char *reduction;
    if ((st = est_in_req(ctx, 0, &data)) != EST_OK || (st = est_in_req(ctx, 1, &idx)) != EST_OK ||
        (st = est_in_req(ctx, 2, &upd)) != EST_OK)
        return st;
    if ((st = read_reduction(ctx, &reduction)) != EST_OK) return st;
    int64_t last = idx->rank ? idx->dims[idx->rank - 1] : 0;
    if (idx->rank < 1 || last > data->rank)
        return est_op_fail(ctx, EST_ESHAPE, "indices' last dim must be at most data's rank %d", data->rank);
    bool ok = upd->rank == idx->rank - 1 + data->rank - last;
    for (int d = 0; ok && d < idx->rank - 1; d++) ok = upd->dims[d] == idx->dims[d];
    for (int d = (int)last; ok && d < data->rank; d++) ok = upd->dims[idx->rank - 1 + d - last] == data->dims[d];
    if (!ok)
        return est_op_fail(ctx, EST_ESHAPE, "updates must have shape indices.shape[:-1] + data.shape[%lld:]",
                           (long long)last);
    if ((st = est_set_out_like(ctx, 0, data)) != EST_OK) return st;
    est_const *c = scatter_fold_start(ctx, data, idx, upd);
    if (!c) return EST_OK;
    int64_t strides[EST_MAX_RANK], inner = est_dims_product((int)last, data->rank, data->dims);
    int64_t tuples = last ? idx->elements / last : est_dims_product(0, idx->rank - 1, idx->dims);
    est_strides(data->rank, data->dims, strides);
    for (int64_t t = 0; t < tuples; t++) {
        int64_t dst = 0;
        for (int j = 0; j < last; j++) {
            int64_t v = est_const_get_i(idx->value, t * last + j);
            if (!index_in(&v, data->dims[j])) return bad_index(ctx, v, data->dims[j]);
            dst += v * strides[j];
        }
        for (int64_t i = 0; i < inner; i++) combine(c, dst + i, upd->value, t * inner + i, reduction);
    }
    return EST_OK;
}

static est_status scatter_elements_infer(est_infer_ctx *ctx) {
    const est_tval *data, *idx, *upd;
    est_status st;
    const char *reduction;
    int64_t axis_attr;
    int axis;
    if ((st = est_in_req(ctx, 0, &data)) != EST_OK || (st = est_in_req(ctx, 1, &idx)) != EST_OK ||
        (st = est_in_req(ctx, 2, &upd)) != EST_OK)
        return st;
    if ((st = read_reduction(ctx, &reduction)) != EST_OK) return st;
    if ((st = est_attr_int(ctx, "axis", 0, &axis_attr)) != EST_OK) return st;
    if ((st = est_axis(ctx, axis_attr, data->rank, &axis)) != EST_OK) return st;
    bool ok = idx->rank == data->rank && upd->rank == data->rank;
    for (int d = 0; ok && d < idx->rank; d++) ok = idx->dims[d] == upd->dims[d];
    if (!ok)
        return est_op_fail(ctx, EST_ESHAPE, "indices and updates must have one shape, of data's rank %d", data->rank);
    if ((st = est_set_out_like(ctx, 0, data)) != EST_OK) return st;
    est_const *c = scatter_fold_start(ctx, data, idx, upd);
    if (!c) return EST_OK;
    int64_t strides[EST_MAX_RANK], at[EST_MAX_RANK] = {0};
    est_strides(data->rank, data->dims, strides);
    for (int64_t k = 0; k < idx->elements; k++) {
        int64_t v = est_const_get_i(idx->value, k), dst = 0;
        if (!index_in(&v, data->dims[axis])) return bad_index(ctx, v, data->dims[axis]);
        for (int d = 0; d < data->rank; d++) {
            if (d != axis && at[d] >= data->dims[d]) return bad_index(ctx, at[d], data->dims[d]);
            dst += (d == axis ? v : at[d]) * strides[d];
        }
        combine(c, dst, upd->value, k, reduction);
        est_next_index(idx->rank, idx->dims, at);
    }
    return EST_OK;
}

/* ---- OneHot, Trilu, TopK, CumSum, ReverseSequence ---------------------------------- */

/* indices' shape with a `depth` dim inserted at axis; depth must be known. */
static est_status one_hot_infer(est_infer_ctx *ctx) {
    const est_tval *idx, *depth, *values;
    est_status st;
    int64_t axis_attr;
    int axis;
    if ((st = est_in_req(ctx, 0, &idx)) != EST_OK || (st = est_in_req(ctx, 1, &depth)) != EST_OK ||
        (st = est_in_req(ctx, 2, &values)) != EST_OK)
        return st;
    if (!scalar_like(depth)) return est_op_fail(ctx, EST_ESHAPE, "depth must hold one value");
    if (!depth->value)
        return est_op_fail(ctx, EST_ESHAPE,
                           "cannot resolve the one-hot depth: the value of input 1 ('%s') is not known at "
                           "estimate time", est_in_name(ctx, 1));
    int64_t n = est_const_get_i(depth->value, 0);
    if (n < 1 || n > EST_MAX_DIM_VALUE) return est_op_fail(ctx, EST_ESHAPE, "depth %lld is invalid", (long long)n);
    if ((st = est_attr_int(ctx, "axis", -1, &axis_attr)) != EST_OK) return st;
    if ((st = est_axis(ctx, axis_attr, idx->rank + 1, &axis)) != EST_OK) return st;
    int64_t dims[EST_MAX_RANK + 1];
    for (int d = 0, j = 0; d <= idx->rank; d++) dims[d] = d == axis ? n : idx->dims[j++];
    return est_set_out(ctx, 0, values->dtype, idx->rank + 1, dims);
}

/* Keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims. */
static est_status trilu_infer(est_infer_ctx *ctx) {
    const est_tval *x, *kt = est_in(ctx, 1);
    est_status st;
    int64_t upper, k = 0;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if (x->rank < 2) return est_op_fail(ctx, EST_ESHAPE, "input has rank %d; Trilu needs at least 2", x->rank);
    if ((st = est_attr_int(ctx, "upper", 1, &upper)) != EST_OK) return st;
    if ((st = est_set_out_like(ctx, 0, x)) != EST_OK) return st;
    if (kt && (!kt->value || kt->value->count != 1)) return EST_OK; /* unknown k: no folding */
    if (kt) k = est_const_get_i(kt->value, 0);
    est_const *c = x->value ? est_fold_out(ctx, 0, x->dtype) : NULL;
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
    for (int64_t e = 0; c && e < x->elements; e++) {
        int64_t i = e / cols % rows, j = e % cols;
        bool keep = upper ? j - i >= k : j - i <= k;
        if (keep) est_const_copy(c, e, x->value, e);
        else est_const_set(c, e, 0, 0, false);
    }
    return EST_OK;
}

static est_status top_k_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    int64_t axis_attr, k;
    int axis;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if ((st = est_attr_int(ctx, "axis", -1, &axis_attr)) != EST_OK) return st;
    if ((st = est_axis(ctx, axis_attr, x->rank, &axis)) != EST_OK) return st;
    if (ctx->opset < 10) { /* k was an attribute until opset 10 */
        if ((st = est_attr_int(ctx, "k", -1, &k)) != EST_OK) return st;
    } else if ((st = known_scalar(ctx, 1, "K", &k)) != EST_OK) {
        return st;
    }
    if (k < 0 || k > x->dims[axis])
        return est_op_fail(ctx, EST_ESHAPE, "K %lld is outside 0..%lld (the size of axis %d)", (long long)k,
                           (long long)x->dims[axis], axis);
    int64_t dims[EST_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = k;
    if ((st = est_set_out(ctx, 0, x->dtype, x->rank, dims)) != EST_OK) return st;
    return est_set_out(ctx, 1, EST_DT_INT64, x->rank, dims);
}

static est_status cum_sum_infer(est_infer_ctx *ctx) {
    const est_tval *x, *axis;
    est_status st;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK || (st = est_in_req(ctx, 1, &axis)) != EST_OK) return st;
    if (!scalar_like(axis)) return est_op_fail(ctx, EST_ESHAPE, "axis must be a scalar");
    int ax;
    if (axis->value && (st = est_axis(ctx, est_const_get_i(axis->value, 0), x->rank, &ax)) != EST_OK) return st;
    return est_set_out_like(ctx, 0, x);
}

static est_status reverse_sequence_infer(est_infer_ctx *ctx) {
    const est_tval *x, *lens;
    est_status st;
    int64_t batch_axis, time_axis;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK || (st = est_in_req(ctx, 1, &lens)) != EST_OK) return st;
    if ((st = est_attr_int(ctx, "batch_axis", 1, &batch_axis)) != EST_OK) return st;
    if ((st = est_attr_int(ctx, "time_axis", 0, &time_axis)) != EST_OK) return st;
    if (x->rank < 2) return est_op_fail(ctx, EST_ESHAPE, "input has rank %d; needs at least 2", x->rank);
    if ((batch_axis != 0 && batch_axis != 1) || (time_axis != 0 && time_axis != 1) || batch_axis == time_axis)
        return est_op_fail(ctx, EST_EATTR, "batch_axis and time_axis must be 0 and 1, in either order");
    if (lens->rank != 1 || lens->dims[0] != x->dims[batch_axis])
        return est_op_fail(ctx, EST_ESHAPE, "sequence_lens must be 1-D of the batch size %lld",
                           (long long)x->dims[batch_axis]);
    return est_set_out_like(ctx, 0, x);
}

/* ---- training-step rules ------------------------------------------------- */

#define INDEX_ARITHMETIC_FLOPS 1

static uint64_t in_elements(const est_cost_ctx *c, int i) { return est_tval_elements(est_cost_in(c, i)); }

/* One operation per input element. */
static void per_input_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, INDEX_ARITHMETIC_FLOPS, in_elements(c, 0), f);
}

/* A reduction combines each update into the data; a plain scatter copies. */
static bool scatter_reduces(const est_cost_ctx *c) {
    const char *reduction = est_node_attr_string(c->node, "reduction", "none");
    return strcmp(reduction, "none") != 0;
}

static void scatter_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, scatter_reduces(c) ? INDEX_ARITHMETIC_FLOPS : 0, in_elements(c, 2), f);
}

/* embedding ("embedding_backward(grad, indices, ...)") and index_select
 * ("index_select_backward(grad, self.sizes(), dim, index)") keep the
 * indices; a scalar index is select(), which keeps nothing. */
static void gather_saves(const est_cost_ctx *c, est_saved *s) {
    const est_tval *indices = est_cost_in(c, 1);
    if (est_backward_runs(c) && est_needs_grad(c, 0) && indices && indices->rank > 0) est_save_input(c, s, 1);
}

/* gather: "self: gather_backward(grad, self, dim, index, sparse_grad)". */
static void gather_elements_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    est_save_input(c, s, 0);
    est_save_input(c, s, 1);
}

/* Advanced indexing, index.Tensor: "self: index_backward(..., indices,
 * grad)"; also index_put (ScatterND): "values: grad.index(indices)". */
static void saves_indices(const est_cost_ctx *c, est_saved *s) {
    if (est_backward_runs(c)) est_save_input(c, s, 1);
}

/* scatter_reduce ("self, src: scatter_reduce_backward(grad, self, dim, index,
 * src, reduce, include_self, result)") keeps everything; scatter / index_put
 * keep the indices, scatter_add only for src's gradient. */
static void scatter_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    const char *reduction = est_node_attr_string(c->node, "reduction", "none");
    if (strcmp(reduction, "none") == 0 || (strcmp(reduction, "add") == 0 && est_needs_grad(c, 2))) {
        est_save_input(c, s, 1);
    } else if (strcmp(reduction, "add") != 0) {
        for (int i = 0; i <= 2; i++) est_save_input(c, s, i);
        est_save_output(c, s, 0);
    }
}

/* reflection_pad / replication_pad: "self: reflection_pad2d_backward(grad,
 * self, padding)"; constant_pad_nd keeps nothing. */
static void pad_saves(const est_cost_ctx *c, est_saved *s) {
    const char *mode = est_node_attr_string(c->node, "mode", "constant");
    if (est_backward_runs(c) && (strcmp(mode, "reflect") == 0 || strcmp(mode, "edge") == 0))
        est_save_input(c, s, 0);
}

/* topk: "self: value_selecting_reduction_backward(grad, dim, indices, ...)":
 * the indices, output 1. */
static void top_k_saves(const est_cost_ctx *c, est_saved *s) {
    if (est_backward_runs(c)) est_save_output(c, s, 1);
}


EST_FAMILY(index,
    {.name = "Gather", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = gather_infer, .nondiff_inputs = EST_SLOT(1), .saves = gather_saves},
    {.name = "GatherElements", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = gather_elements_infer, .nondiff_inputs = EST_SLOT(1), .saves = gather_elements_saves},
    {.name = "GatherND", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = gather_nd_infer, .nondiff_inputs = EST_SLOT(1), .saves = saves_indices},
    {.name = "Slice", .min_inputs = 1, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
     .infer = slice_infer, .nondiff_inputs = EST_SLOTS_FROM(1), .view = EST_VIEW_ALIAS},
    {.name = "Split", .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = -1,
     .infer = split_infer, .nondiff_inputs = EST_SLOT(1), .view = EST_VIEW_ALIAS},
    {.name = "Concat", .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1,
     .infer = concat_infer},
    {.name = "Tile", .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = tile_infer, .nondiff_inputs = EST_SLOTS_FROM(1)},
    {.name = "Pad", .min_inputs = 1, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
     .infer = pad_infer, .nondiff_inputs = EST_SLOTS_FROM(1), .saves = pad_saves},
    {.name = "CenterCropPad", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = center_crop_pad_infer, .nondiff_inputs = EST_SLOT(1)},
    {.name = "ScatterND", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = scatter_nd_infer, .nondiff_inputs = EST_SLOT(1), .flops = scatter_flops, .saves = scatter_saves},
    {.name = "ScatterElements", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = scatter_elements_infer, .nondiff_inputs = EST_SLOT(1), .flops = scatter_flops,
     .saves = scatter_saves},
    {.name = "Scatter", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = scatter_elements_infer, .nondiff_inputs = EST_SLOT(1), .flops = scatter_flops,
     .saves = scatter_saves},
    {.name = "OneHot", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = one_hot_infer, .nondiff_inputs = EST_SLOT(0) | EST_SLOT(1) | EST_SLOT(2)},
    {.name = "Trilu", .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = trilu_infer, .nondiff_inputs = EST_SLOT(1)},
    {.name = "TopK", .min_inputs = 1, .max_inputs = 2, .min_outputs = 2, .max_outputs = 2,
     .infer = top_k_infer, .nondiff_inputs = EST_SLOT(1), .flops = per_input_flops, .saves = top_k_saves},
    {.name = "CumSum", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = cum_sum_infer, .nondiff_inputs = EST_SLOT(1), .flops = per_input_flops},
    {.name = "ReverseSequence", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = reverse_sequence_infer, .nondiff_inputs = EST_SLOT(1)},
);
