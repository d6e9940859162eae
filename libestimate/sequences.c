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
    tt->dims = est__graph_dims(g, 1);
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
    const char *op = est__graph_intern(g, "Slice");
    int32_t *inputs = est__graph_ids(g, 4);
    if (ta < 0 || !op || !inputs) return false;
    est_node *n = &g->nodes[at];
    inputs[0] = x, inputs[1] = ts, inputs[2] = te, inputs[3] = ta;
    n->op_type = op;
    n->inputs = inputs;
    n->n_inputs = 4;
    n->op = NULL;
    return true;
}

/* The index SequenceAt node n reads, when it is one reading `seq` as its
 * sequence and a known index; false otherwise. */
static bool sequence_at(const est_graph *g, const est_node *n, int32_t seq, int64_t *index) {
    if (!est__node_is(n, "SequenceAt") || n->n_inputs != 2 || n->n_outputs != 1 || n->inputs[0] != seq ||
        n->inputs[1] == seq)
        return false;
    const est_const *idx = est__graph_known_value(g, n->inputs[1], NULL);
    if (!idx || !idx->i64 || idx->count != 1) return false;
    *index = idx->i64[0];
    return true;
}

/* Whether only SequenceAt nodes whose chunk is known read `seq`, no graph
 * output among its readers. */
static bool readers_lowerable(const est_graph *g, const est_readers *rd, const int32_t *reads, int32_t seq,
                              const est_const *split, int32_t split_rank, bool keepdims) {
    if (reads[seq] != rd->start[seq + 1] - rd->start[seq]) return false; /* a graph output */
    for (int32_t r = rd->start[seq]; r < rd->start[seq + 1]; r++) {
        int64_t index, s, e;
        if (!sequence_at(g, &g->nodes[rd->nodes[r]], seq, &index) ||
            !chunk_bounds(split, split_rank, keepdims, index, &s, &e))
            return false;
    }
    return true;
}

int32_t est__lower_sequences(est_graph *g) {
    bool any = false;
    for (int32_t i = 0; i < g->n_nodes && !any && est__graph_interned(g, "SplitToSequence"); i++)
        any = est__node_is(&g->nodes[i], "SplitToSequence");
    if (!any) return 0; /* most graphs: no readers' index to build */
    int32_t *reads = est__graph_count_reads(g);
    est_readers rd = {0};
    bool *drop = calloc((size_t)g->n_nodes + 1, sizeof *drop);
    int32_t lowered = 0;
    if (!reads || !drop || !est__graph_readers(g, &rd)) lowered = -1;
    for (int32_t i = 0; lowered >= 0 && i < g->n_nodes; i++) {
        const est_node *sp = &g->nodes[i];
        if (!est__node_is(sp, "SplitToSequence") || sp->n_inputs < 1 || sp->n_outputs != 1 || sp->outputs[0] < 0)
            continue;
        int32_t x = sp->inputs[0], seq = sp->outputs[0];
        const est_const *split = NULL;
        int32_t split_rank = -1;
        if (sp->n_inputs > 1 && sp->inputs[1] >= 0 &&
            !(split = est__graph_known_value(g, sp->inputs[1], &split_rank)))
            continue;
        bool keepdims = est_node_attr_int(sp, "keepdims", 1) != 0;
        int64_t axis = est_node_attr_int(sp, "axis", 0);
        if (!readers_lowerable(g, &rd, reads, seq, split, split_rank, keepdims)) continue;
        for (int32_t r = rd.start[seq]; r < rd.start[seq + 1] && lowered >= 0; r++) {
            int64_t index, s, e;
            sequence_at(g, &g->nodes[rd.nodes[r]], seq, &index);
            chunk_bounds(split, split_rank, keepdims, index, &s, &e);
            if (!rewrite_as_slice(g, rd.nodes[r], x, s, e, axis)) lowered = -1;
        }
        if (lowered >= 0) drop[i] = true, lowered++;
    }
    if (lowered > 0) est__graph_drop_nodes(g, drop);
    free(reads), free(drop);
    est__readers_free(&rd);
    return lowered;
}
