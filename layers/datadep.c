/*
 * datadep.c: ops whose output size depends on their input's values:
 * Compress, NonZero, Unique. They are only inferred when those values are
 * known at estimate time (folded constants); otherwise the estimate says
 * which op needs them and why.
 *
 * FLOPs (docs/flops.md); backward = 2 x forward when the data needs a
 * gradient: Compress and Unique only move data (0); NonZero 1 per input
 * element.
 */
#include <stdlib.h>
#include <string.h>

#include "registry.h"

/* ---- Compress, NonZero, Unique: data-dependent sizes ------------------------------ */

static est_status compress_infer(est_infer_ctx *ctx) {
    const est_tval *x, *cond;
    est_status st;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK || (st = est_in_req(ctx, 1, &cond)) != EST_OK) return st;
    if (cond->rank != 1) return est_op_fail(ctx, EST_ESHAPE, "condition must be 1-D");
    if (!cond->value)
        return est_op_fail(ctx, EST_EUNSUPPORTED, "the output size depends on the condition's values, which are "
                           "unknown at estimate time");
    bool has_axis = est_attr_get(ctx->node, "axis") != NULL;
    int64_t axis_attr, dims[EST_MAX_RANK];
    int axis = 0, rank = 1;
    if ((st = est_attr_int(ctx, "axis", 0, &axis_attr)) != EST_OK) return st;
    if (has_axis && (st = est_axis(ctx, axis_attr, x->rank, &axis)) != EST_OK) return st;
    int64_t len = has_axis ? x->dims[axis] : x->elements, kept = 0;
    if (cond->elements > len)
        return est_op_fail(ctx, EST_ESHAPE, "condition has %lld entries for %lld slices",
                           (long long)cond->elements, (long long)len);
    int64_t keep[1];
    for (int64_t i = 0; i < cond->elements; i++) kept += est_const_get_f(cond->value, i) != 0;
    keep[0] = kept;
    if (has_axis) {
        memcpy(dims, x->dims, sizeof dims);
        dims[axis] = kept;
        rank = x->rank;
    }
    return est_set_out(ctx, 0, x->dtype, rank, has_axis ? dims : keep);
}

/* [rank, count of non-zeros] int64, only when the input is known. */
static est_status non_zero_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if (!x->value || x->rank < 1)
        return est_op_fail(ctx, EST_EUNSUPPORTED, "the output size depends on the input's values, which are "
                           "unknown at estimate time");
    int64_t dims[2] = {x->rank, 0};
    for (int64_t k = 0; k < x->elements; k++) dims[1] += est_const_get_f(x->value, k) != 0;
    if ((st = est_set_out(ctx, 0, EST_DT_INT64, 2, dims)) != EST_OK) return st;
    est_const *c = est_fold_out(ctx, 0, EST_DT_INT64);
    int64_t idx[EST_MAX_RANK] = {0}, j = 0;
    for (int64_t k = 0; c && k < x->elements; k++) {
        if (est_const_get_f(x->value, k) != 0) {
            for (int d = 0; d < x->rank; d++) c->i64[d * dims[1] + j] = idx[d];
            j++;
        }
        est_next_index(x->rank, x->dims, idx);
    }
    return EST_OK;
}

/* The slices of a known tensor along one axis: `outer` blocks of `n` slices
 * of `inner` elements (n elements of 1 when flattened). */
typedef struct slices {
    const est_const *v;
    int64_t outer, n, inner;
} slices;

/* Orders slices a and b lexicographically. */
static int slice_cmp(const slices *s, int64_t a, int64_t b) {
    for (int64_t o = 0; o < s->outer; o++)
        for (int64_t i = 0; i < s->inner; i++) {
            int64_t ka = (o * s->n + a) * s->inner + i, kb = (o * s->n + b) * s->inner + i;
            if (s->v->i64 ? s->v->i64[ka] != s->v->i64[kb] : s->v->f64[ka] != s->v->f64[kb])
                return (s->v->i64 ? s->v->i64[ka] < s->v->i64[kb] : s->v->f64[ka] < s->v->f64[kb]) ? -1 : 1;
        }
    return 0;
}

/* Merge sort of slice numbers (qsort has no context argument in C11). */
static void sort_slices(const slices *s, int64_t *order, int64_t *tmp, int64_t n) {
    if (n < 2) return;
    int64_t h = n / 2, i = 0, j = h, k = 0;
    sort_slices(s, order, tmp, h);
    sort_slices(s, order + h, tmp, n - h);
    while (i < h && j < n) tmp[k++] = slice_cmp(s, order[j], order[i]) < 0 ? order[j++] : order[i++];
    while (i < h) tmp[k++] = order[i++];
    while (j < n) tmp[k++] = order[j++];
    memcpy(order, tmp, (size_t)n * sizeof *order);
}

/* Counts the distinct slices; -1 when out of memory. */
static int64_t count_unique(const slices *s) {
    int64_t *order = malloc((size_t)(s->n ? s->n : 1) * sizeof *order);
    int64_t *tmp = malloc((size_t)(s->n ? s->n : 1) * sizeof *tmp);
    int64_t unique = -1;
    if (order && tmp) {
        for (int64_t i = 0; i < s->n; i++) order[i] = i;
        sort_slices(s, order, tmp, s->n);
        unique = s->n > 0;
        for (int64_t i = 1; i < s->n; i++) unique += slice_cmp(s, order[i - 1], order[i]) != 0;
    }
    free(order);
    free(tmp);
    return unique;
}

static est_status unique_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st;
    if ((st = est_in_req(ctx, 0, &x)) != EST_OK) return st;
    if (!x->value)
        return est_op_fail(ctx, EST_EUNSUPPORTED, "the output size depends on the input's values, which are "
                           "unknown at estimate time");
    bool has_axis = est_attr_get(ctx->node, "axis") != NULL;
    int64_t axis_attr, dims[EST_MAX_RANK];
    int axis = 0;
    if ((st = est_attr_int(ctx, "axis", 0, &axis_attr)) != EST_OK) return st;
    if (has_axis && (st = est_axis(ctx, axis_attr, x->rank, &axis)) != EST_OK) return st;
    int64_t n = has_axis ? x->dims[axis] : x->elements;
    slices sl = {x->value, has_axis ? est_dims_product(0, axis, x->dims) : 1, n,
                 has_axis ? est_dims_product(axis + 1, x->rank, x->dims) : 1};
    int64_t u = count_unique(&sl);
    if (u < 0) return est_op_fail(ctx, EST_ENOMEM, "out of memory");
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = u;
    if ((st = est_set_out(ctx, 0, x->dtype, has_axis ? x->rank : 1, has_axis ? dims : &u)) != EST_OK) return st;
    if ((st = est_set_out(ctx, 1, EST_DT_INT64, 1, &u)) != EST_OK) return st;
    if ((st = est_set_out(ctx, 2, EST_DT_INT64, 1, &n)) != EST_OK) return st;
    return est_set_out(ctx, 3, EST_DT_INT64, 1, &u);
}

/* ---- training-step rules ------------------------------------------------- */

/* NonZero tests every input element. */
static void non_zero_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, 1, est_tval_elements(est_cost_in(c, 0)), f);
}

/* Compress is index_select(x, axis, nonzero(condition)): the int64 index,
 * one per kept slice, exists only for backward. */
static void compress_saves(const est_cost_ctx *c, est_saved *s) {
    const est_tval *y = est_cost_out(c, 0);
    if (!est_backward_runs(c) || !y) return;
    int64_t axis = est_node_attr_int(c->node, "axis", INT64_MIN);
    if (axis != INT64_MIN && axis < 0) axis += y->rank;
    bool along_axis = axis != INT64_MIN && axis >= 0 && axis < y->rank;
    uint64_t kept = along_axis ? (uint64_t)y->dims[axis] : est_tval_elements(y);
    est_save_extra(s, est__dtype_bytes(EST_DT_INT64, kept));
}

/* memest verify's kernels (verify/ops_datadep.cu) size their output by a
 * stream compaction: one int64 count per block of this many elements, a
 * workspace held to the end of the kernel. */
#define VERIFY_COMPACT_BLOCK 4096

static uint64_t verify_compact_workspace(uint64_t elements) {
    uint64_t blocks = (elements + VERIFY_COMPACT_BLOCK - 1) / VERIFY_COMPACT_BLOCK;
    return est_alloc_bytes(est__dtype_bytes(EST_DT_INT64, blocks));
}

/* Compress under verify: the compaction over the condition, and, when no
 * backward keeps it (compress_saves), the kept slices' int64 index. */
static uint64_t compress_workspace(const est_cost_ctx *c) {
    if (est_cost_kernels(c) != EST_KERNELS_VERIFY) return 0;
    uint64_t ws = verify_compact_workspace(est_tval_elements(est_cost_in(c, 1)));
    const est_tval *y = est_cost_out(c, 0);
    if (est_backward_runs(c) || !y) return ws;
    int64_t axis = est_node_attr_int(c->node, "axis", INT64_MIN);
    if (axis != INT64_MIN && axis < 0) axis += y->rank;
    bool along_axis = axis != INT64_MIN && axis >= 0 && axis < y->rank;
    uint64_t kept = along_axis ? (uint64_t)y->dims[axis] : est_tval_elements(y);
    return est_add_sat(ws, est_alloc_bytes(est__dtype_bytes(EST_DT_INT64, kept)));
}

/* NonZero under verify: the compaction over the input. */
static uint64_t non_zero_workspace(const est_cost_ctx *c) {
    if (est_cost_kernels(c) != EST_KERNELS_VERIFY) return 0;
    return verify_compact_workspace(est_tval_elements(est_cost_in(c, 0)));
}

/* Unique under verify: the compaction over the n slices (elements when
 * flattened) and the unique slices' first occurrences, twice (found, then
 * sorted): 2 u int64. */
static uint64_t unique_workspace(const est_cost_ctx *c) {
    const est_tval *x = est_cost_in(c, 0), *y = est_cost_out(c, 0);
    if (est_cost_kernels(c) != EST_KERNELS_VERIFY || !x || !y) return 0;
    int64_t axis = est_node_attr_int(c->node, "axis", INT64_MIN);
    if (axis != INT64_MIN && axis < 0) axis += x->rank;
    bool along_axis = axis != INT64_MIN && axis >= 0 && axis < x->rank && axis < y->rank;
    uint64_t n = along_axis ? (uint64_t)x->dims[axis] : est_tval_elements(x);
    uint64_t u = along_axis ? (uint64_t)y->dims[axis] : est_tval_elements(y);
    return est_add_sat(verify_compact_workspace(n), est_alloc_bytes(est__dtype_bytes(EST_DT_INT64, est_mul_sat(2, u))));
}

EST_FAMILY(datadep,
    {.name = "Compress", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = compress_infer, .nondiff_inputs = EST_SLOT(1), .saves = compress_saves,
     .workspace = compress_workspace},
    {.name = "NonZero", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = non_zero_infer, .nondiff_inputs = EST_SLOT(0), .flops = non_zero_flops,
     .workspace = non_zero_workspace},
    {.name = "Unique", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 4,
     .infer = unique_infer, .workspace = unique_workspace},
);
