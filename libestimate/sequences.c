/*
 * sequences.c: ONNX sequence ops lowered to the tensor ops they stand for.
 *
 * memest's IR holds tensors, not sequences. The dynamo exporter writes
 * aten.split(x, size, dim) and aten.split_with_sizes, read item by item, as
 * (onnxscript's torchlib, aten_split):
 *     seq = SplitToSequence(x, split, axis)
 *     y_i = SequenceAt(seq, i)        for each item the model reads
 * PyTorch's split returns views of x, so each y_i is the slice of x along
 * axis that chunk i covers: SequenceAt(seq, i) becomes
 *     Slice(x, starts = [s_i], ends = [e_i], axes = [axis])
 * (a view, as Slice is in the registry), and SplitToSequence is dropped.
 *
 * Lowered when the split is known and every reader of the sequence is a
 * SequenceAt with a known index:
 *   - split a scalar c: chunk i is [i*c, (i+1)*c), clamped by Slice at the
 *     dim's end (the last chunk may be smaller); a negative i needs the
 *     chunk count, which needs the dim, so it is not lowered;
 *   - split a list of sizes: chunk i starts at the sum of the sizes before
 *     it; a negative i counts from the list's end;
 *   - no split with keepdims = 1: chunks of 1.
 * Anything else (keepdims = 0 without a split, a sequence read by another
 * op or returned by the graph) is left in place, and the estimate then
 * names the op as unsupported.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static bool is_op(const est_node *n, const char *op) {
    return n->op_type && strcmp(n->op_type, op) == 0 && n->domain[0] == '\0';
}

static int64_t int_attr(const est_node *n, const char *name, int64_t fallback) {
    for (int32_t k = 0; k < n->n_attrs; k++)
        if (strcmp(n->attrs[k].name, name) == 0 && n->attrs[k].type == EST_ATTR_INT) return n->attrs[k].i;
    return fallback;
}

/* Chunk i's [start, end) along the axis, from the split input's value
 * (NULL: no split). False when it cannot be known without the dim. */
static bool chunk_bounds(const est_const *split, int32_t split_rank, bool keepdims, int64_t i, int64_t *start,
                         int64_t *end) {
    if (!split) {
        if (!keepdims || i < 0) return false;
        *start = i, *end = i + 1;
        return true;
    }
    if (!split->i64 || split->count < 1) return false;
    if (split_rank == 0 && split->count == 1) { /* a chunk size */
        int64_t c = split->i64[0];
        if (c < 1 || i < 0 || i > EST_MAX_DIM_VALUE / c) return false;
        *start = i * c, *end = (i + 1) * c;
        return true;
    }
    if (i < 0) i += split->count;
    if (i < 0 || i >= split->count) return false;
    int64_t s = 0;
    for (int64_t k = 0; k < i; k++) {
        if (split->i64[k] < 0 || split->i64[k] > EST_MAX_DIM_VALUE) return false;
        s += split->i64[k];
    }
    if (split->i64[i] < 0 || split->i64[i] > EST_MAX_DIM_VALUE) return false;
    *start = s, *end = s + split->i64[i];
    return true;
}

/* A new one-element int64 initializer holding v, named after node n. */
static int32_t constant_1d(est_graph *g, const est_node *n, const char *what, int64_t v) {
    char name[128];
    snprintf(name, sizeof name, "%.96s#%s", n->name, what);
    int32_t t = est__graph_tensor(g, name);
    if (t < 0 || g->tensors[t].producer >= 0 || g->tensors[t].value) return -1;
    est_tensor *tt = &g->tensors[t];
    tt->value = est__const_new(EST_DT_INT64, 1);
    tt->dims = malloc(sizeof *tt->dims);
    if (!tt->value || !tt->dims) return -1;
    tt->value->i64[0] = v;
    tt->dims[0] = (est_dimdecl){.value = 1, .sym = -1};
    tt->kind = EST_T_INITIALIZER;
    tt->dtype = EST_DT_INT64;
    tt->rank = 1;
    return t;
}

/* Rewrites SequenceAt node `at` into Slice(x, start, end, axis). */
static bool rewrite_as_slice(est_graph *g, int32_t at, int32_t x, int64_t start, int64_t end, int64_t axis) {
    int32_t ts = constant_1d(g, &g->nodes[at], "starts", start);
    int32_t te = ts < 0 ? -1 : constant_1d(g, &g->nodes[at], "ends", end);
    int32_t ta = te < 0 ? -1 : constant_1d(g, &g->nodes[at], "axes", axis);
    char *op = est__strdup("Slice");
    int32_t *inputs = malloc(4 * sizeof *inputs);
    if (ta < 0 || !op || !inputs) {
        free(op), free(inputs);
        return false;
    }
    est_node *n = &g->nodes[at];
    inputs[0] = x, inputs[1] = ts, inputs[2] = te, inputs[3] = ta;
    free(n->op_type), free(n->inputs);
    n->op_type = op;
    n->inputs = inputs;
    n->n_inputs = 4;
    n->op = NULL;
    return true;
}

/* Whether every reader of sequence `seq` is a SequenceAt whose chunk is known. */
static bool readers_lowerable(const est_graph *g, const int32_t *readers_of, int32_t seq, const est_const *split,
                              int32_t split_rank, bool keepdims, int32_t expected) {
    int32_t seen = 0;
    for (int32_t r = readers_of[seq]; r >= 0 && r < g->n_nodes; r++) {
        const est_node *n = &g->nodes[r];
        for (int32_t k = 0; k < n->n_inputs; k++) {
            if (n->inputs[k] != seq) continue;
            seen++;
            int64_t s, e;
            const est_const *idx = n->n_inputs == 2 ? est__graph_known_value(g, n->inputs[1], NULL) : NULL;
            if (!is_op(n, "SequenceAt") || k != 0 || n->n_outputs != 1 || !idx || !idx->i64 || idx->count != 1 ||
                !chunk_bounds(split, split_rank, keepdims, idx->i64[0], &s, &e))
                return false;
        }
    }
    return seen == expected;
}

int32_t est__lower_sequences(est_graph *g) {
    int32_t *reads = est__graph_count_reads(g);
    int32_t *first_reader = malloc(((size_t)g->n_tensors + 1) * sizeof *first_reader);
    bool *drop = calloc((size_t)g->n_nodes + 1, sizeof *drop);
    int32_t lowered = 0, n_nodes = g->n_nodes;
    if (!reads || !first_reader || !drop) lowered = -1;
    for (int32_t t = 0; lowered == 0 && t < g->n_tensors; t++) first_reader[t] = -1;
    for (int32_t i = n_nodes - 1; lowered == 0 && i >= 0; i--)
        for (int32_t k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0) first_reader[g->nodes[i].inputs[k]] = i;
    for (int32_t i = 0; lowered >= 0 && i < n_nodes; i++) {
        const est_node *sp = &g->nodes[i];
        if (!is_op(sp, "SplitToSequence") || sp->n_inputs < 1 || sp->n_outputs != 1 || sp->outputs[0] < 0) continue;
        int32_t x = sp->inputs[0], seq = sp->outputs[0];
        const est_const *split = NULL;
        int32_t split_rank = -1;
        if (sp->n_inputs > 1 && sp->inputs[1] >= 0 &&
            !(split = est__graph_known_value(g, sp->inputs[1], &split_rank)))
            continue;
        bool keepdims = int_attr(sp, "keepdims", 1) != 0;
        int64_t axis = int_attr(sp, "axis", 0);
        int32_t graph_reads = reads[seq];
        for (int32_t r = first_reader[seq]; r >= 0 && r < n_nodes; r++)
            for (int32_t k = 0; k < g->nodes[r].n_inputs; k++) graph_reads -= g->nodes[r].inputs[k] == seq;
        if (graph_reads != 0 || !readers_lowerable(g, first_reader, seq, split, split_rank, keepdims, reads[seq])) continue;
        for (int32_t r = first_reader[seq]; r >= 0 && r < n_nodes && lowered >= 0; r++) {
            if (g->nodes[r].n_inputs != 2 || g->nodes[r].inputs[0] != seq) continue;
            int64_t s, e;
            chunk_bounds(split, split_rank, keepdims, est__graph_known_value(g, g->nodes[r].inputs[1], NULL)->i64[0],
                         &s, &e);
            if (!rewrite_as_slice(g, r, x, s, e, axis)) lowered = -1;
        }
        if (lowered >= 0) drop[i] = true, lowered++;
    }
    if (lowered > 0) est__graph_drop_nodes(g, drop);
    free(reads), free(first_reader), free(drop);
    return lowered;
}
