/*
 * index_gather.c: the index family's ops that address elements through an
 * index tensor: Gather, GatherElements and GatherND read data at the indices,
 * ScatterND, ScatterElements and Scatter write updates there (optionally
 * combined by a reduction). Shape inference and folding; their FLOPs and
 * saved-for-backward rules, and the family's table, are in index.c.
 */
#include <string.h>

#include "index_family.h"

/* Normalises index v against a dim of size n; false when out of range. */
static bool index_in(int64_t *v, int64_t n) {
    if (*v < 0) *v += n;
    return *v >= 0 && *v < n;
}

static est_status bad_index(est_infer_ctx *ctx, int64_t v, int64_t n) {
    return est_op_fail(ctx, EST_ESHAPE, "index %lld is out of range for a dim of size %lld", (long long)v,
                       (long long)n);
}

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
est_status est__gather_infer(est_infer_ctx *ctx) {
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
est_status est__gather_elements_infer(est_infer_ctx *ctx) {
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
est_status est__gather_nd_infer(est_infer_ctx *ctx) {
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

est_status est__scatter_nd_infer(est_infer_ctx *ctx) {
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

est_status est__scatter_elements_infer(est_infer_ctx *ctx) {
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
