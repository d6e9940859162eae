/*
 * index_slice.c: the index family's ops that cut, join, repeat or pad along
 * axes: Slice, Split, Concat, Tile, Pad and CenterCropPad. Shape inference
 * and folding (they carry the shape vectors of exports); their training-step
 * rules, and the family's table, are in index.c.
 */
#include <string.h>

#include "index_family.h"

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

est_status est__slice_infer(est_infer_ctx *ctx) {
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

est_status est__split_infer(est_infer_ctx *ctx) {
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

est_status est__concat_infer(est_infer_ctx *ctx) {
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

est_status est__tile_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    int64_t dims[EST_MAX_RANK];
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    memcpy(dims, x->dims, sizeof dims);
    if (ctx->opset < 6) { /* Tile-1: scalar inputs tiles and axis */
        int64_t tiles, axis_v;
        int axis;
        if ((st = est__index_known_scalar(ctx, 1, "tiles", &tiles)) != EST_OK) return st;
        if ((st = est__index_known_scalar(ctx, 2, "axis", &axis_v)) != EST_OK) return st;
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

est_status est__pad_infer(est_infer_ctx *ctx) {
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
est_status est__center_crop_pad_infer(est_infer_ctx *ctx) {
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
