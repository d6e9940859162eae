/*
 * rnn_weights.c: two passes of the ONNX loader over PyTorch's recurrent
 * modules (nn.LSTM, nn.GRU, nn.RNN), which run as one cuDNN call
 * (layers/recurrent.c) but export as one ONNX node per layer.
 *
 * Weights. The TorchScript exporter reorders each layer's gates from
 * PyTorch's (i, f, g, o) to ONNX's (i, o, f, c) with Slice and Concat of the
 * parameters, then stacks the directions with Unsqueeze and Concat. PyTorch
 * does none of that: cuDNN reads the module's flat weight buffer, and its
 * backward writes the gradients into one buffer of the same size. So where
 * a W, R or B input is such a rearrangement of parameters alone, the node
 * reads one parameter of the same shape and bytes instead (named after the
 * parameters it stands for, "rnn.weight_ih_l0+rnn.weight_ih_l0_reverse"),
 * and the rearranging nodes go. The dynamo exporter folds the same reorder
 * into new initializers, which already are such parameters.
 *
 * Layers in a call. A stacked module's nodes (one scope, each layer's input
 * made from the previous layer's output) are one call: each gets the
 * attributes EST_RNN_CALL_LAYERS, their count, and EST_RNN_CALL_INPUT, the
 * first layer's input size, which size the call's workspace.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rnn_weights.h"

/* Ops that only rearrange their input 0 (Concat: every input); the other
 * inputs are shapes, axes and bounds. */
static bool rearranges(const est_node *n) {
    static const char *const ops[] = {"Concat", "Slice", "Unsqueeze", "Squeeze", "Reshape", "Transpose", "Identity"};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        if (est__node_is(n, ops[k])) return true;
    return false;
}

/* A walk over the nodes that make one weight input. */
typedef struct walk {
    const est_graph *g;
    const int32_t *producer;
    bool *in_tree;        /* per node */
    int32_t leaves[8];    /* the distinct parameters it rearranges */
    int n_leaves;
    int32_t reads[8];     /* how many times the tree reads each */
} walk;

static bool add_leaf(walk *w, int32_t t) {
    for (int k = 0; k < w->n_leaves; k++)
        if (w->leaves[k] == t) return w->reads[k]++, true;
    if (w->n_leaves == 8) return false;
    w->leaves[w->n_leaves] = t;
    w->reads[w->n_leaves++] = 1;
    return true;
}

/* Tensor t is made from initializers by rearranging alone. */
static bool collect(walk *w, int32_t t, int depth) {
    const est_tensor *tt = &w->g->tensors[t];
    if (tt->kind == EST_T_INITIALIZER) return add_leaf(w, t);
    int32_t p = w->producer[t];
    if (p < 0 || depth > 16) return false;
    const est_node *n = &w->g->nodes[p];
    if (!rearranges(n)) return false;
    w->in_tree[p] = true;
    int data = est__node_is(n, "Concat") ? n->n_inputs : 1;
    for (int k = 0; k < data; k++)
        if (n->inputs[k] < 0 || !collect(w, n->inputs[k], depth + 1)) return false;
    return true;
}

/* The shape the merged parameter takes: W and R [D, rows, cols] over D
 * parameters of [rows, cols]; B [D, 2 * rows] over 2 * D of [rows]. 0 when
 * the parameters do not make it. */
static int merged_shape(const walk *w, int slot, int64_t dirs, int64_t *dims) {
    const est_tensor *first = &w->g->tensors[w->leaves[0]];
    int want_rank = slot == 3 ? 1 : 2;
    if (w->n_leaves != (slot == 3 ? 2 : 1) * dirs || first->rank != want_rank) return 0;
    for (int k = 0; k < w->n_leaves; k++) {
        const est_tensor *t = &w->g->tensors[w->leaves[k]];
        if (t->rank != first->rank || t->dtype != first->dtype || t->role == EST_ROLE_BUFFER) return 0;
        for (int d = 0; d < t->rank; d++)
            if (t->dims[d].value <= 0 || t->dims[d].value != first->dims[d].value || t->dims[d].sym >= 0) return 0;
    }
    dims[0] = dirs;
    if (slot == 3) {
        dims[1] = 2 * first->dims[0].value;
        return 2;
    }
    dims[1] = first->dims[0].value;
    dims[2] = first->dims[1].value;
    return 3;
}

/* The parameter that stands for the leaves; -1 when out of memory, -2 when
 * its name is taken. */
static int32_t merged_param(est_graph *g, const walk *w, int rank, const int64_t *dims) {
    char name[1024];
    size_t used = 0;
    name[0] = '\0';
    for (int k = 0; k < w->n_leaves && used < sizeof name; k++)
        used += (size_t)snprintf(name + used, sizeof name - used, "%s%s", k ? "+" : "", g->tensors[w->leaves[k]].name);
    if (used >= sizeof name || est__graph_find(g, name) >= 0) return -2;
    int32_t ti = est__graph_tensor(g, name);
    if (ti < 0) return -1;
    est_tensor *t = &g->tensors[ti];
    t->kind = EST_T_INITIALIZER;
    t->dtype = g->tensors[w->leaves[0]].dtype;
    t->dims = est__graph_dims(g, (size_t)rank);
    if (!t->dims) return -1;
    t->rank = rank;
    for (int d = 0; d < rank; d++) t->dims[d] = (est_dimdecl){dims[d], -1};
    return ti;
}

static int64_t directions(const est_node *n) {
    for (int32_t k = 0; k < n->n_attrs; k++)
        if (strcmp(n->attrs[k].name, "direction") == 0 && n->attrs[k].type == EST_ATTR_STRING && n->attrs[k].s)
            return strcmp(n->attrs[k].s, "bidirectional") == 0 ? 2 : 1;
    return 1;
}

/* Gives node i's weight input `slot` the parameter it rearranges, and marks
 * the rearranging nodes in drop_candidates. 0 done or left as it is, -1 out
 * of memory. */
static int merge_weight(est_graph *g, const int32_t *producer, const int32_t *reads, int32_t i, int slot,
                        bool *in_tree, bool *drop_candidates) {
    est_node *n = &g->nodes[i];
    if (slot >= n->n_inputs || n->inputs[slot] < 0 || producer[n->inputs[slot]] < 0) return 0;
    memset(in_tree, 0, (size_t)g->n_nodes * sizeof *in_tree);
    walk w = {.g = g, .producer = producer, .in_tree = in_tree};
    if (!collect(&w, n->inputs[slot], 0) || w.n_leaves == 0) return 0;
    for (int k = 0; k < w.n_leaves; k++)
        if (reads[w.leaves[k]] != w.reads[k]) return 0; /* read elsewhere too: PyTorch would hold it apart */
    int64_t dims[3];
    int rank = merged_shape(&w, slot, directions(n), dims);
    if (!rank) return 0;
    int32_t t = merged_param(g, &w, rank, dims);
    if (t == -1) return -1;
    if (t < 0) return 0;
    n->inputs[slot] = t;
    for (int32_t p = 0; p < g->n_nodes; p++) drop_candidates[p] |= in_tree[p];
    return 0;
}

/* Drops the candidates nothing reads any more, repeatedly (a Concat's
 * inputs go once the Concat has). false when out of memory. */
static bool drop_unread(est_graph *g, bool *candidates) {
    for (;;) {
        int32_t *reads = est__graph_count_reads(g);
        bool *drop = calloc((size_t)g->n_nodes + 1, sizeof *drop);
        if (!reads || !drop) {
            free(reads);
            free(drop);
            return false;
        }
        bool any = false;
        for (int32_t i = 0; i < g->n_nodes; i++) {
            if (!candidates[i]) continue;
            bool unread = true;
            for (int k = 0; k < g->nodes[i].n_outputs; k++)
                if (g->nodes[i].outputs[k] >= 0 && reads[g->nodes[i].outputs[k]]) unread = false;
            drop[i] = unread;
            any |= unread;
        }
        if (any) {
            /* keep the candidates' flags lined up with the nodes that stay */
            int32_t kept = 0;
            for (int32_t i = 0; i < g->n_nodes; i++)
                if (!drop[i]) candidates[kept++] = candidates[i];
            est__graph_drop_nodes(g, drop);
        }
        free(reads);
        free(drop);
        if (!any) return true;
    }
}

/* ---- layers in a call ----------------------------------------------------- */

/* The RNN node whose output X comes from through views and inter-layer
 * dropout, or -1. */
static int32_t previous_layer(const est_graph *g, const int32_t *producer, const est_node *n) {
    int32_t t = n->n_inputs ? n->inputs[0] : -1;
    for (int hops = 0; t >= 0 && producer[t] >= 0 && hops < 8; hops++) {
        const est_node *p = &g->nodes[producer[t]];
        if (est__node_is_recurrent(p)) return p->scope && n->scope && p->scope == n->scope && p->outputs[0] == t ? producer[t] : -1;
        bool passes = est__node_is(p, "Transpose") || est__node_is(p, "Reshape") || est__node_is(p, "Squeeze") ||
                      est__node_is(p, "Unsqueeze") || est__node_is(p, "Identity") || est__node_is(p, "Dropout");
        if (!passes || p->n_inputs < 1) return -1;
        t = p->inputs[0];
    }
    return -1;
}

static bool add_int_attr(est_graph *g, est_node *n, const char *key, int64_t value) {
    est_attr *a = est__graph_attrs(g, (size_t)n->n_attrs + 1);
    char *name = est__graph_attr_text(g, key, strlen(key));
    if (!a || !name) return false;
    if (n->n_attrs) memcpy(a, n->attrs, (size_t)n->n_attrs * sizeof *a);
    a[n->n_attrs] = (est_attr){.name = name, .type = EST_ATTR_INT, .i = value};
    n->attrs = a;
    n->n_attrs++;
    return true;
}

/* The input size a layer's W declares: its last dim ([D, G * H, I], or the
 * [G * H, I] parameter a lone Unsqueeze makes it from); 0 when unknown. */
static int64_t declared_input(const est_graph *g, const int32_t *producer, const est_node *n) {
    int32_t t = n->n_inputs >= 2 ? n->inputs[1] : -1;
    for (int hops = 0; t >= 0 && producer[t] >= 0 && hops < 8; hops++) {
        const est_node *p = &g->nodes[producer[t]];
        if (!rearranges(p) || p->n_inputs < 1) return 0;
        t = p->inputs[0];
    }
    if (t < 0) return 0;
    const est_tensor *w = &g->tensors[t];
    if (w->kind != EST_T_INITIALIZER || w->rank < 2 || w->dims[w->rank - 1].sym >= 0) return 0;
    return w->dims[w->rank - 1].value;
}

static bool mark_call_layers(est_graph *g, const int32_t *producer) {
    int32_t *first = malloc(((size_t)g->n_nodes + 1) * sizeof *first); /* per node: its call's first layer */
    int32_t *count = calloc((size_t)g->n_nodes + 1, sizeof *count);
    bool ok = first && count;
    for (int32_t i = 0; ok && i < g->n_nodes; i++) first[i] = i;
    for (int32_t i = 0; ok && i < g->n_nodes; i++) {
        if (!est__node_is_recurrent(&g->nodes[i])) continue;
        /* prev is done when the file lists nodes in order; when it does
         * not (the sort comes later), first[prev] is still a node */
        int32_t prev = previous_layer(g, producer, &g->nodes[i]);
        if (prev >= 0) first[i] = first[prev];
        count[first[i]]++;
    }
    for (int32_t i = 0; ok && i < g->n_nodes; i++) {
        if (!est__node_is_recurrent(&g->nodes[i]) || count[first[i]] < 2) continue;
        int64_t input = declared_input(g, producer, &g->nodes[first[i]]);
        ok = add_int_attr(g, &g->nodes[i], EST_RNN_CALL_LAYERS, count[first[i]]) &&
             (input <= 0 || add_int_attr(g, &g->nodes[i], EST_RNN_CALL_INPUT, input));
    }
    free(first);
    free(count);
    return ok;
}

static int32_t *producers(const est_graph *g) {
    int32_t *producer = malloc(((size_t)g->n_tensors + 1) * sizeof *producer);
    if (!producer) return NULL;
    for (int32_t t = 0; t < g->n_tensors; t++) producer[t] = -1;
    for (int32_t i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_outputs; k++)
            if (g->nodes[i].outputs[k] >= 0) producer[g->nodes[i].outputs[k]] = i;
    return producer;
}

est_status est__onnx_rnn_weights(est_graph *g, est_error *err) {
    bool any = false;
    bool named = est__graph_interned(g, "LSTM") || est__graph_interned(g, "GRU") || est__graph_interned(g, "RNN");
    for (int32_t i = 0; i < g->n_nodes && !any && named; i++) any = est__node_is_recurrent(&g->nodes[i]);
    if (!any) return EST_OK;
    int32_t *producer = producers(g), *reads = est__graph_count_reads(g);
    bool *in_tree = calloc((size_t)g->n_nodes + 1, sizeof *in_tree);
    bool *candidates = calloc((size_t)g->n_nodes + 1, sizeof *candidates);
    bool ok = producer && reads && in_tree && candidates;
    for (int32_t i = 0; ok && i < g->n_nodes; i++)
        for (int slot = 1; ok && slot <= 3 && est__node_is_recurrent(&g->nodes[i]); slot++)
            ok = merge_weight(g, producer, reads, i, slot, in_tree, candidates) == 0;
    if (ok) ok = drop_unread(g, candidates);
    free(producer);
    producer = ok ? producers(g) : NULL;
    if (ok) ok = producer && mark_call_layers(g, producer);
    free(producer);
    free(reads);
    free(in_tree);
    free(candidates);
    return ok ? EST_OK : est__fail(err, EST_ENOMEM, "%s: out of memory while loading", g->source);
}
