/*
 * tensor_parallel.c: tensor parallelism of transformer blocks (--tp N), as
 * torch.distributed.tensor.parallel applies ColwiseParallel and
 * RowwiseParallel (docs/distributed.md, "Tensor parallelism").
 *
 * In each block (checkpoint.c's block calls; the whole graph when no node
 * names a module) a linear layer is a MatMul or
 * Gemm of an activation by a 2-D parameter. From each linear's output the
 * pass walks forward through the ops that are not linears: the first linear
 * reached is its row-wise partner, and the ops walked are the region between
 * them (attention's reshapes, scores, softmax; the MLP's activation). Every
 * linear that reaches the same row linear, and nothing else, is a column:
 * q, k, v -> o; gate, up -> down; c_fc -> c_proj. A walk that leaves the
 * block or reaches a graph output, or two row linears, splits nothing.
 *
 * Split, each GPU keeps 1/tp of: the columns' weights (output features) and
 * biases, the row's weight (input features), and every activation of the
 * region, and runs 1/tp of their FLOPs. The row's output is whole again
 * (all-reduced). With sequence parallelism the rest of each block's
 * activations (norms, residual adds, dropout) are split along the sequence
 * too, but for the columns' inputs, which are all-gathered whole.
 */
#include <stdlib.h>
#include <string.h>

#include "parallel.h"

static int64_t attr_int(const est_node *n, const char *name) {
    for (int32_t a = 0; a < n->n_attrs; a++)
        if (strcmp(n->attrs[a].name, name) == 0) return n->attrs[a].i;
    return 0;
}

/* Node i's weight when it is a linear layer (a MatMul or Gemm of an
 * activation by a 2-D parameter), else -1; *out_dim gets the weight's
 * dim of output features. */
static int32_t linear_weight(const sim *s, int32_t i, int *out_dim) {
    const est_node *n = &s->g->nodes[i];
    bool gemm = strcmp(n->op_type, "Gemm") == 0;
    if (n->domain[0] || (!gemm && strcmp(n->op_type, "MatMul") != 0) || n->n_inputs < 2) return -1;
    int32_t a = n->inputs[0], w = n->inputs[1];
    if (a < 0 || w < 0 || s->g->tensors[s->base[a]].kind == EST_T_INITIALIZER || is_folded(s, a) ||
        (gemm && attr_int(n, "transA")))
        return -1; /* the data is an activation or a graph input */
    bool transposed = gemm && attr_int(n, "transB");
    int32_t by = s->g->tensors[w].producer;
    if (by >= 0 && strcmp(s->g->nodes[by].op_type, "Transpose") == 0 && s->g->nodes[by].n_inputs == 1) {
        w = s->g->nodes[by].inputs[0]; /* the TorchScript exporter's x @ W.t() */
        transposed = !transposed;
    }
    if (w < 0 || !is_param_storage(s, w) || s->r->tv[w].rank != 2) return -1;
    *out_dim = transposed ? 0 : 1;
    return w;
}

typedef struct walk {
    int32_t *stamp;  /* per node: the walk that visited it */
    int32_t *queue;  /* tensors */
    int32_t *reach;  /* per node: the row linear a linear reaches, or -1 */
    bool *region;    /* per tensor: made by a linear of the block or by an op
                        some linear's walk reaches */
} walk;

/* Whether node j merges the walk with a tensor of its own size that no
 * linear of the block made: a residual add, whose other operand is whole on
 * every GPU. A smaller operand broadcasts (a mask, rotary cos and sin). */
static bool merges_whole(const sim *s, const walk *w, int32_t j) {
    const est_node *n = &s->g->nodes[j];
    if (n->n_outputs < 1 || n->outputs[0] < 0) return false;
    uint64_t size = est_tval_elements(&s->r->tv[n->outputs[0]]);
    for (int k = 0; k < n->n_inputs; k++) {
        int32_t t = n->inputs[k];
        if (t >= 0 && !w->region[t] && s->g->tensors[s->base[t]].kind != EST_T_INITIALIZER && !is_folded(s, t) &&
            est_tval_elements(&s->r->tv[t]) == size)
            return true;
    }
    return false;
}

/* Walks forward from linear `col`'s outputs through the ops that are not
 * linears, up to node `last`, marking the ops with stamp col + 1 and, when
 * `mark`, their outputs as region. Returns the row linear reached, or -1 when
 * there is none, there are two, or the walk leaves the block, reaches a
 * graph output or (checked when not `mark`) merges with a whole tensor. */
static int32_t walk_from(const sim *s, const est_readers *c, walk *w, int32_t col, int32_t last, bool mark) {
    const est_graph *g = s->g;
    int32_t head = 0, tail = 0, row = -1;
    const est_node *cn = &g->nodes[col];
    for (int k = 0; k < cn->n_outputs; k++)
        if (cn->outputs[k] >= 0 && !is_folded(s, cn->outputs[k])) w->queue[tail++] = cn->outputs[k];
    while (head < tail) {
        int32_t t = w->queue[head++];
        if (mark) w->region[t] = true;
        for (int32_t o = 0; o < g->n_outputs; o++)
            if (g->outputs[o] == t) return -1; /* leaves the model */
        for (int32_t e = c->start[t]; e < c->start[t + 1]; e++) {
            int32_t j = c->nodes[e];
            if (j > last) return -1; /* leaves the block */
            int dim;
            if (linear_weight(s, j, &dim) >= 0 && g->nodes[j].inputs[0] == t) {
                if (row >= 0 && row != j) return -1; /* two row linears */
                row = j;
                continue;
            }
            if (w->stamp[j] == col + 1) continue;
            w->stamp[j] = col + 1;
            if (!mark && merges_whole(s, w, j)) return -1;
            const est_node *n = &g->nodes[j];
            for (int k = 0; k < n->n_outputs; k++)
                if (n->outputs[k] >= 0 && !is_folded(s, n->outputs[k]) && tail < g->n_tensors)
                    w->queue[tail++] = n->outputs[k];
        }
    }
    return row;
}

static const char *module_of(const est_node *n) { return n->module ? n->module : n->label; }

/* The module a pair belongs to: the longest dotted prefix its layers'
 * modules share ("m.encoder.layer.0.attention" for query and output.dense). */
static char *pair_block(const sim *s, const walk *w, int32_t first, int32_t last, int32_t row) {
    const char *m = module_of(&s->g->nodes[row]);
    size_t len = strlen(m);
    for (int32_t i = first; i <= last; i++) {
        if (w->reach[i] != row) continue;
        const char *c = module_of(&s->g->nodes[i]);
        size_t k = 0;
        while (k < len && c[k] == m[k]) k++;
        if (k < len || (c[k] && c[k] != '.')) /* back to a whole part */
            while (k > 0 && m[k] != '.') k--;
        len = k;
    }
    char *out = malloc(len + 1);
    if (out) {
        memcpy(out, m, len);
        out[len] = '\0';
    }
    return out;
}

/* What a pair shows for a layer: its module, when that is more than the
 * block's name, else its label. */
static const char *layer_name(const est_node *n, size_t block_len) {
    return n->module && strlen(n->module) > block_len ? n->module : n->label;
}

static void split_tensor(sim *s, int32_t t) {
    if (t >= 0 && !is_folded(s, t)) s->tp_split[t] = true;
}

/* The head size of column `col`'s output, when a Reshape (after its bias
 * add, if any; the TorchScript exporter's Shape reads beside it do not
 * count) views its F features as [heads, head size], as attention's
 * view(b, s, -1, head_dim) does (or as [3, E], nn.MultiheadAttention's
 * packed q, k, v); 0 when it has no such view. */
static int64_t head_size(const sim *s, const est_readers *c, int32_t col) {
    const est_graph *g = s->g;
    int32_t t = g->nodes[col].outputs[0];
    if (t < 0 || s->r->tv[t].rank < 1) return 0;
    int64_t features = s->r->tv[t].dims[s->r->tv[t].rank - 1];
    for (int hops = 0; hops < 3 && t >= 0; hops++) {
        int32_t next = -1, readers = 0; /* the one reader but Shape ops, which read no data */
        for (int32_t e = c->start[t]; e < c->start[t + 1]; e++)
            if (strcmp(g->nodes[c->nodes[e]].op_type, "Shape") != 0) next = c->nodes[e], readers++;
        if (readers != 1) return 0;
        const est_node *n = &g->nodes[next];
        const est_tval *out = n->n_outputs > 0 && n->outputs[0] >= 0 ? &s->r->tv[n->outputs[0]] : NULL;
        if (!out || n->domain[0]) return 0;
        if (strcmp(n->op_type, "Reshape") == 0) {
            int k = out->rank;
            return k >= 2 && out->dims[k - 1] > 0 && out->dims[k - 2] * out->dims[k - 1] == features &&
                           out->dims[k - 1] < features
                       ? out->dims[k - 1]
                       : 0;
        }
        if (strcmp(n->op_type, "Add") != 0) return 0;
        t = n->outputs[0];
    }
    return 0;
}

/* Marks the pair (the columns whose walk reached `row`) split, and records
 * it. A pair whose features tp does not divide is left whole; one whose
 * column would split a head is refused, as PyTorch's view of it fails. */
static est_status split_pair(sim *s, const est_readers *c, walk *w, int32_t first, int32_t last, int32_t row,
                             est_error *err) {
    const est_graph *g = s->g;
    est_report *r = s->r;
    int64_t tp = r->parallel.tp;
    size_t n_cols = 0;
    for (int32_t i = first; i <= last; i++) n_cols += w->reach[i] == row;
    int rdim;
    int32_t rw = linear_weight(s, row, &rdim);
    if (r->tv[rw].dims[1 - rdim] % tp) return EST_OK; /* input features do not divide: left whole */
    for (int32_t i = first; i <= last; i++) {
        int dim;
        int32_t cw = w->reach[i] == row ? linear_weight(s, i, &dim) : -1;
        if (cw >= 0 && r->tv[cw].dims[dim] % tp) return EST_OK;
    }
    for (int32_t i = first; i <= last; i++) {
        int dim;
        int32_t cw = w->reach[i] == row ? linear_weight(s, i, &dim) : -1;
        int64_t features = cw >= 0 ? r->tv[cw].dims[dim] : 0, head = cw >= 0 ? head_size(s, c, i) : 0;
        if (head && (features / tp) % head)
            return est__fail(err, EST_EINVAL, "%s: node '%s'%s%s%s: tensor parallelism %lld would split its %lld "
                             "output features, which a Reshape views as %lld x %lld (heads, or a packed q, k, v), "
                             "into parts of %lld: PyTorch's view of the split output fails; use a tp that divides "
                             "%lld",
                             g->source, g->nodes[i].name, g->nodes[i].module ? " (" : "",
                             g->nodes[i].module ? g->nodes[i].module : "", g->nodes[i].module ? ")" : "",
                             (long long)tp, (long long)features,
                             (long long)(features / head), (long long)head, (long long)(features / tp),
                             (long long)(features / head));
    }
    est_tp_pair *p = &r->tp_pairs[r->n_tp_pairs];
    p->columns = (const char **)r->tp_columns + r->n_tp_columns;
    p->n_columns = n_cols;
    if (!(p->block = r->tp_blocks[r->n_tp_pairs] = pair_block(s, w, first, last, row))) return EST_ENOMEM;
    size_t block_len = strlen(p->block);
    p->row = layer_name(&g->nodes[row], block_len);
    r->n_tp_pairs++;
    s->tp_node[row] = true;
    split_tensor(s, rw);
    uint64_t col_in = 0;
    for (int32_t i = first; i <= last; i++) {
        if (w->reach[i] != row) continue;
        r->tp_columns[r->n_tp_columns++] = layer_name(&g->nodes[i], block_len);
        int dim;
        split_tensor(s, linear_weight(s, i, &dim));
        s->tp_node[i] = true;
        for (int k = 0; k < g->nodes[i].n_outputs; k++) split_tensor(s, g->nodes[i].outputs[k]);
        col_in = est_tval_elements(&r->tv[g->nodes[i].inputs[0]]) * est__dtype_bytes(stored_dtype(s, g->nodes[i].inputs[0]), 1);
        s->tp_column_input[g->nodes[i].inputs[0]] = true;
        for (int32_t j = i; j <= last; j++) w->stamp[j] = 0; /* walk again: later walks restamped */
        walk_from(s, c, w, i, last, false);
        for (int32_t j = i + 1; j <= last; j++) {
            if (w->stamp[j] != i + 1 || j == row) continue;
            s->tp_node[j] = true;
            const est_node *n = &g->nodes[j];
            for (int k = 0; k < n->n_outputs; k++) split_tensor(s, n->outputs[k]);
            /* the column's bias, added to its output */
            for (int k = 0; k < n->n_inputs; k++)
                if (n->inputs[k] >= 0 && is_param_storage(s, n->inputs[k]) && r->tv[n->inputs[k]].rank == 1)
                    split_tensor(s, n->inputs[k]);
        }
    }
    /* per micro-batch: the row's output all-reduced, and in training the
     * columns' input gradient (reduce-scatters and all-gathers of the same
     * bytes under sequence parallelism) */
    int32_t y = g->nodes[row].outputs[0];
    uint64_t row_out = est_tval_elements(&r->tv[y]) * est__dtype_bytes(stored_dtype(s, y), 1);
    uint64_t m = (uint64_t)r->grad_accum, back = s->train ? col_in : 0, fwd = row_out;
    if (r->parallel.sequence_parallel) {
        r->comm.all_gather_bytes = est_add_sat(r->comm.all_gather_bytes, est_mul_sat(col_in + (s->train ? row_out : 0), m));
        r->comm.reduce_scatter_bytes = est_add_sat(r->comm.reduce_scatter_bytes, est_mul_sat(fwd + back, m));
    } else {
        r->comm.all_reduce_bytes = est_add_sat(r->comm.all_reduce_bytes, est_mul_sat(fwd + back, m));
    }
    return EST_OK;
}

/* Sequence parallelism: the block's other activations, split along the
 * sequence, but for the columns' inputs. */
static void split_sequence(sim *s, int32_t first, int32_t last) {
    for (int32_t i = first; i <= last; i++) {
        const est_node *n = &s->g->nodes[i];
        for (int k = 0; k < n->n_outputs; k++) {
            int32_t t = n->outputs[k];
            if (t >= 0 && !s->tp_column_input[t] && is_activation_storage(s, s->base[t])) split_tensor(s, t);
        }
    }
}

static est_status plan_block(sim *s, const est_readers *c, walk *w, int32_t first, int32_t last, est_error *err) {
    int dim;
    for (int32_t i = first; i <= last; i++) /* what the linears' walks reach, together */
        if (linear_weight(s, i, &dim) >= 0) walk_from(s, c, w, i, last, true);
    for (int32_t i = first; i <= last; i++) w->stamp[i] = 0;
    for (int32_t i = first; i <= last; i++)
        w->reach[i] = linear_weight(s, i, &dim) >= 0 ? walk_from(s, c, w, i, last, false) : -1;
    for (int32_t row = first; row <= last; row++) {
        bool reached = false;
        for (int32_t i = first; i <= last && !reached; i++) reached = w->reach[i] == row;
        est_status st = reached ? split_pair(s, c, w, first, last, row, err) : EST_OK;
        if (st != EST_OK) return st;
    }
    return EST_OK;
}

est_status est__tp_plan(sim *s, est_error *err) {
    est_report *r = s->r;
    if (r->parallel.tp <= 1) return EST_OK;
    const est_graph *g = s->g;
    size_t nt = (size_t)g->n_tensors + 1, nn = (size_t)g->n_nodes + 1;
    est_segment *blocks = NULL;
    int32_t n_blocks = 0;
    est_error ignored;
    est_status st = est__plan_checkpoint(g, &(est_checkpoint){.every = 1}, &blocks, &n_blocks, &ignored);
    if (st == EST_ENOMEM) return est__fail(err, EST_ENOMEM, "out of memory planning tensor parallelism");
    if (!n_blocks && g->n_nodes && (blocks = malloc(sizeof *blocks))) { /* no module names: one block */
        blocks[0] = (est_segment){.first = 0, .last = g->n_nodes - 1};
        n_blocks = 1;
    }
    est_readers c = {0};
    walk w = {.stamp = calloc(nn, sizeof *w.stamp), .queue = malloc(nt * sizeof *w.queue),
              .reach = malloc(nn * sizeof *w.reach), .region = calloc(nt, sizeof *w.region)};
    s->tp_split = calloc(nt, sizeof *s->tp_split);
    s->tp_node = calloc(nn, sizeof *s->tp_node);
    s->tp_column_input = calloc(nt, sizeof *s->tp_column_input);
    r->tp_pairs = calloc(nn, sizeof *r->tp_pairs);
    r->tp_blocks = calloc(nn, sizeof *r->tp_blocks);
    r->tp_columns = calloc(nn, sizeof *r->tp_columns);
    st = EST_OK;
    if (!w.stamp || !w.queue || !w.reach || !w.region || !s->tp_split || !s->tp_node || !s->tp_column_input || !r->tp_pairs ||
        !r->tp_blocks || !r->tp_columns || !est__graph_readers(g, &c))
        st = EST_ENOMEM;
    for (int32_t b = 0; st == EST_OK && b < n_blocks; b++) {
        size_t before = r->n_tp_pairs;
        st = plan_block(s, &c, &w, blocks[b].first, blocks[b].last, err);
        if (st == EST_OK && r->parallel.sequence_parallel && r->n_tp_pairs > before)
            split_sequence(s, blocks[b].first, blocks[b].last);
    }
    free(blocks);
    est__readers_free(&c);
    free(w.stamp);
    free(w.queue);
    free(w.reach);
    free(w.region);
    if (st == EST_ENOMEM) return est__fail(err, EST_ENOMEM, "out of memory planning tensor parallelism");
    if (st != EST_OK) return st; /* a pair refused, err says why */
    if (!r->n_tp_pairs)
        return est__fail(err, EST_EINVAL, "%s: tensor parallelism %lld: no block has a pair of linear layers to split "
                         "(column-wise, then row-wise, as attention and MLP blocks do, with dims that %lld "
                         "divides)", g->source, (long long)r->parallel.tp, (long long)r->parallel.tp);
    /* what the split ops keep for backward, split too */
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (s->tp_node[i])
            for (int32_t e = s->extra_first[i]; e < s->extra_first[i + 1]; e++)
                s->extra_alloc[e] = (s->extra_alloc[e] + (uint64_t)r->parallel.tp - 1) / (uint64_t)r->parallel.tp;
    return EST_OK;
}
