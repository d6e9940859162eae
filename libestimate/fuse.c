/*
 * fuse.c: op sequences that an exporter expanded from one PyTorch op, folded
 * back into that op.
 *
 * Memory follows what PyTorch runs, not what the ONNX file spells out. When an
 * exporter writes one aten op as several ONNX nodes, estimating the nodes one
 * by one would keep every intermediate tensor alive for backward, where the
 * fused PyTorch kernel keeps only what its own backward needs. Each pattern
 * here is matched exactly as the exporter writes it, so a model whose author
 * really wrote those separate ops (and so really keeps the intermediates) is
 * not touched when the order or constants differ.
 *
 * Patterns:
 *   GELU, erf form. The TorchScript exporter below opset 20 writes
 *   aten::gelu(x) as (torch/onnx/symbolic_opset9.py, gelu):
 *       Mul(Mul(x, Add(Erf(Div(x, sqrt(2))), 1)), 0.5)
 *   PyTorch's gelu saves only x. Fused into one Gelu node.
 *
 *   SiLU. Both exporters write aten::silu(x) (nn.SiLU, the swish of
 *   EfficientNet and of LLaMA-style MLPs) as Mul(x, Sigmoid(x)), the sigmoid
 *   read by nothing else. PyTorch's silu keeps only x and makes no sigmoid
 *   tensor. Fused into one Swish node (ONNX opset 24). A model that writes
 *   x * torch.sigmoid(x) by hand exports the same nodes and is fused too,
 *   though PyTorch then keeps the sigmoid as well: a known limit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct fuse_ctx {
    est_graph *g;
    int32_t *uses; /* per tensor: how many node inputs and graph outputs read it */
} fuse_ctx;

static bool is_op(const est_graph *g, int32_t node, const char *op) {
    return node >= 0 && g->nodes[node].op_type && strcmp(g->nodes[node].op_type, op) == 0 &&
           g->nodes[node].domain[0] == '\0';
}

static int32_t producer(const est_graph *g, int32_t t) { return t >= 0 ? g->tensors[t].producer : -1; }

/* The value of a one-element constant: an initializer with its values, or a
 * Constant node's `value`. */
static bool scalar(const est_graph *g, int32_t t, double *out) {
    if (t < 0) return false;
    const est_const *c = g->tensors[t].value;
    int32_t p = producer(g, t);
    if (!c && is_op(g, p, "Constant"))
        for (int32_t k = 0; k < g->nodes[p].n_attrs; k++)
            if (strcmp(g->nodes[p].attrs[k].name, "value") == 0) c = g->nodes[p].attrs[k].t_value;
    if (!c || c->count != 1) return false;
    *out = c->f64 ? c->f64[0] : (double)c->i64[0];
    return true;
}

/* The node consuming t, if t has exactly one reader and it is that op. */
static int32_t only_consumer(const fuse_ctx *f, int32_t t, const char *op, int32_t after) {
    if (t < 0 || f->uses[t] != 1) return -1;
    for (int32_t i = after + 1; i < f->g->n_nodes; i++) {
        const est_node *n = &f->g->nodes[i];
        for (int32_t k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] == t) return is_op(f->g, i, op) ? i : -1;
    }
    return -1;
}

/* The other input of a two-input node, given one of them. */
static int32_t other_input(const est_node *n, int32_t t) {
    if (n->n_inputs != 2) return -1;
    return n->inputs[0] == t ? n->inputs[1] : n->inputs[1] == t ? n->inputs[0] : -1;
}

static bool near(double a, double b) { return fabs(a - b) <= 1e-6 * fabs(b); }

/* Rewrites node `first` (an op without attributes) into a one-input
 * `op_name` on x that writes `out`. */
static bool rewrite_unary(est_graph *g, int32_t first, const char *op_name, int32_t x, int32_t out) {
    char *op = est__strdup(op_name);
    int32_t *inputs = malloc(sizeof *inputs);
    if (!op || !inputs) {
        free(op);
        free(inputs);
        return false; /* out of memory: leave the graph as it is */
    }
    inputs[0] = x;
    est_node *n = &g->nodes[first];
    free(n->op_type);
    free(n->inputs);
    n->op_type = op;
    n->inputs = inputs;
    n->n_inputs = 1;
    n->outputs[0] = out;
    n->op = NULL;
    return true;
}

/* Div(x, sqrt 2) -> Erf -> Add(., 1) -> Mul(x, .) -> Mul(., 0.5): the Div
 * node becomes Gelu(x) writing the last Mul's output; the rest are dropped. */
static bool match_gelu_erf(fuse_ctx *f, int32_t div, bool *drop) {
    est_graph *g = f->g;
    const est_node *d = &g->nodes[div];
    double c;
    if (!is_op(g, div, "Div") || d->n_inputs != 2 || d->n_outputs != 1 || !scalar(g, d->inputs[1], &c) ||
        !near(c, sqrt(2.0)))
        return false;
    int32_t x = d->inputs[0];
    int32_t erf = only_consumer(f, d->outputs[0], "Erf", div);
    if (erf < 0) return false;
    int32_t add = only_consumer(f, g->nodes[erf].outputs[0], "Add", erf);
    if (add < 0 || !scalar(g, other_input(&g->nodes[add], g->nodes[erf].outputs[0]), &c) || c != 1.0) return false;
    int32_t mul = only_consumer(f, g->nodes[add].outputs[0], "Mul", add);
    if (mul < 0 || other_input(&g->nodes[mul], g->nodes[add].outputs[0]) != x) return false;
    int32_t half = only_consumer(f, g->nodes[mul].outputs[0], "Mul", mul);
    if (half < 0 || !scalar(g, other_input(&g->nodes[half], g->nodes[mul].outputs[0]), &c) || c != 0.5)
        return false;
    if (g->nodes[half].n_outputs != 1) return false;

    if (!rewrite_unary(g, div, "Gelu", x, g->nodes[half].outputs[0])) return false;
    drop[erf] = drop[add] = drop[mul] = drop[half] = true;
    return true;
}

/* Sigmoid(x) -> Mul(x, .): the Sigmoid node becomes Swish(x) writing the
 * Mul's output. */
static bool match_silu(fuse_ctx *f, int32_t sig, bool *drop) {
    est_graph *g = f->g;
    const est_node *s = &g->nodes[sig];
    if (!is_op(g, sig, "Sigmoid") || s->n_inputs != 1 || s->n_outputs != 1 || s->inputs[0] < 0) return false;
    int32_t x = s->inputs[0];
    int32_t mul = only_consumer(f, s->outputs[0], "Mul", sig);
    if (mul < 0 || other_input(&g->nodes[mul], s->outputs[0]) != x || g->nodes[mul].n_outputs != 1) return false;
    if (!rewrite_unary(g, sig, "Swish", x, g->nodes[mul].outputs[0])) return false;
    drop[mul] = true;
    return true;
}

int32_t est__fuse_exporter_patterns(est_graph *g) {
    fuse_ctx f = {.g = g, .uses = est__graph_count_reads(g)};
    bool *drop = calloc((size_t)g->n_nodes + 1, sizeof *drop);
    int32_t fused = 0;
    if (f.uses && drop) {
        for (int32_t i = 0; i < g->n_nodes; i++)
            if (!drop[i] && (match_gelu_erf(&f, i, drop) || match_silu(&f, i, drop))) fused++;
    }
    if (fused) {
        est__graph_drop_nodes(g, drop);
        g->fused_nodes += fused;
    }
    free(f.uses);
    free(drop);
    return fused;
}
