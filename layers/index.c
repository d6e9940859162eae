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
 *
 * The shape rules of Gather* and Scatter* are in index_gather.c, those of
 * Slice, Split, Concat, Tile, Pad and CenterCropPad in index_slice.c
 * (index_family.h declares them). This file holds the other ops' shape
 * rules, every op's training-step rules and the family's table.
 */
#include <string.h>

#include "index_family.h"

/* ---- helpers -------------------------------------------------------------- */

/* Reads a known integer scalar (or one-element tensor) input. */
est_status est__index_known_scalar(est_infer_ctx *ctx, int i, const char *what, int64_t *out) {
    const int64_t *v;
    int64_t n;
    est_status st = est_in_known_ints(ctx, i, what, &v, &n);
    if (st != EST_OK) return st;
    if (n != 1)
        return est_op_fail(ctx, EST_ESHAPE, "the %s (input %d) must hold one value, not %lld", what, i, (long long)n);
    *out = v[0];
    return EST_OK;
}

static bool scalar_like(const est_tval *t) { return t->elements == 1 && t->rank <= 1; }

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
    } else if ((st = est__index_known_scalar(ctx, 1, "K", &k)) != EST_OK) {
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

/* An embedding's backward (embedding_dense_backward, aten/src/ATen/native/
 * cuda/Embedding.cu and EmbeddingBackwardKernel.cu) over more than 3072
 * indices sorts them and sums the gradient's rows per run of equal indices
 * in float32 partial sums: sorted and original indices and a third index
 * array (int64, n each), three int64 arrays per segment (at most
 * min(n, rows of the table) segments), and for each partial segment (at
 * most n / 10 + segments of them) an int64 offset and a row of D float32
 * partial sums. Up to 3072 indices a direct kernel needs none of it. On the
 * H100 (bench/accuracy/probe_embedding.py, bench/accuracy/data/reduce/) the
 * model is within 1.6 MiB of each of the 160 configurations over 3072
 * indices (float32 and bfloat16, 64 to 4,096 wide, 2,048 and 50,257 rows,
 * 3,073 to 65,536 indices), 120 of them within 2%; the misses are the
 * 50,257-row tables, where the weight gradient's block alone leaves up to
 * 0.9 MiB more at 3072 indices and fewer. */
static uint64_t gather_backward_workspace(const est_cost_ctx *c) {
    const est_tval *table = est_cost_in(c, 0), *indices = est_cost_in(c, 1);
    if (!est_needs_grad(c, 0) || !table || !indices || table->rank != 2 || indices->rank < 0) return 0;
    int64_t axis = est_node_attr_int(c->node, "axis", 0);
    if (axis != 0 && axis != -2) return 0;
    uint64_t n = est_tval_elements(indices), rows = (uint64_t)table->dims[0], dim = (uint64_t)table->dims[1];
    if (n <= 3072) return 0;
    uint64_t segments = n < rows ? n : rows, partial = n / 10 + segments;
    uint64_t acc = table->dtype == EST_DT_DOUBLE ? 8 : 4;
    uint64_t bytes = est_mul_sat(est_mul_sat(partial, dim), acc);
    return est_add_sat(bytes, 8 * partial + 24 * n + 24 * segments);
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
     .infer = est__gather_infer, .nondiff_inputs = EST_SLOT(1), .saves = gather_saves,
     .backward_workspace = gather_backward_workspace},
    {.name = "GatherElements", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = est__gather_elements_infer, .nondiff_inputs = EST_SLOT(1), .saves = gather_elements_saves},
    {.name = "GatherND", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = est__gather_nd_infer, .nondiff_inputs = EST_SLOT(1), .saves = saves_indices},
    {.name = "Slice", .min_inputs = 1, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
     .infer = est__slice_infer, .nondiff_inputs = EST_SLOTS_FROM(1), .view = EST_VIEW_ALIAS},
    {.name = "Split", .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = -1,
     .infer = est__split_infer, .nondiff_inputs = EST_SLOT(1), .view = EST_VIEW_ALIAS},
    {.name = "Concat", .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1,
     .infer = est__concat_infer},
    {.name = "Tile", .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = est__tile_infer, .nondiff_inputs = EST_SLOTS_FROM(1)},
    {.name = "Pad", .min_inputs = 1, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
     .infer = est__pad_infer, .nondiff_inputs = EST_SLOTS_FROM(1), .saves = pad_saves},
    {.name = "CenterCropPad", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = est__center_crop_pad_infer, .nondiff_inputs = EST_SLOT(1)},
    {.name = "ScatterND", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = est__scatter_nd_infer, .nondiff_inputs = EST_SLOT(1), .flops = scatter_flops, .saves = scatter_saves},
    {.name = "ScatterElements", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = est__scatter_elements_infer, .nondiff_inputs = EST_SLOT(1), .flops = scatter_flops,
     .saves = scatter_saves},
    {.name = "Scatter", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = est__scatter_elements_infer, .nondiff_inputs = EST_SLOT(1), .flops = scatter_flops,
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
