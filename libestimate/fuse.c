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
 *
 *   Scaled dot-product attention. Both exporters write
 *   F.scaled_dot_product_attention(q, k, v, mask, dropout_p) (nn.
 *   MultiheadAttention without weights, torchvision's ViT, Hugging Face's
 *   "sdpa" attention) with the scale split over both operands
 *   (torch/onnx/symbolic_opset14.py and onnxscript's torchlib,
 *   aten_scaled_dot_product_attention):
 *       MatMul(Mul(q, s), Mul(kT, s)) [-> Add(., mask)] -> Softmax(-1)
 *           [-> Where(IsNaN(.), 0, .)] [-> Dropout] -> MatMul(., v)
 *   where s is sqrt(scale) (a constant, a Sqrt, or a Cast of one), the
 *   Where guards rows a mask blocks entirely, and kT is k with its last two
 *   axes swapped
 *   (Transpose [0,1,3,2]; the dynamo exporter flattens to 3-D around a
 *   Transpose [0,2,1]). PyTorch runs the flash or memory-efficient kernel,
 *   which never makes the attention matrix and keeps q, k, v, the output and
 *   a logsumexp per row. Fused into one Attention node (ONNX opset 23) on
 *   q, k, v (and the mask). Attention written out by hand (eager BERT,
 *   nn.MultiheadAttention with need_weights) scales the product, or only q,
 *   and is not touched: PyTorch keeps its matrix.
 *
 *   BLOOM's GELU. Hugging Face's BloomGelu runs, in training,
 *   GeLUFunction: a torch.autograd.Function whose forward saves only x and
 *   returns bloom_gelu_forward(x), written op by op
 *   (transformers/models/bloom/modeling_bloom.py):
 *       x * 0.5 * (1.0 + tanh(0.79788456 * x * (1 + 0.044715 * x * x)))
 *   Both exporters trace the function's forward into those nine nodes, and
 *   keeping each one's saves would hold eight tensors of x's size per layer
 *   for backward; PyTorch holds x alone (per-op probe, H100, 2026-11-27:
 *   bench/accuracy/data/blind3/). Fused into one Gelu node (approximate
 *   "tanh") marked memest.bloom_gelu, whose rules (layers/activation.c) keep
 *   the temporaries the function makes op by op. The same formula with
 *   pow(x, 3) (GPT-2's NewGELUActivation) runs under autograd and is not
 *   touched.
 *
 *   GroupNorm. Both exporters write aten::group_norm(x, G, weight, bias)
 *   (torch/onnx/symbolic_opset9.py, group_norm; onnxscript's torchlib,
 *   aten_group_norm) as
 *       Reshape(x, [0, G, -1]) -> InstanceNormalization(., ones, zeros)
 *           -> Reshape(., shape of x) -> Mul(., w) -> Add(., b)
 *   with w and b the weight and bias as [C, 1, 1] (an Unsqueeze of the
 *   parameter, or the dynamo exporter's folded initializer). PyTorch's
 *   native_group_norm keeps x and two statistics per (sample, group); the
 *   chain would also keep the normalized tensor for the weight's gradient.
 *   Fused into one GroupNormalization node (opset 21: scale and bias of C)
 *   on x and the [C] parameters.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct fuse_ctx {
    est_graph *g;
    int32_t *uses;       /* per tensor: how many node inputs and graph outputs read it */
    int32_t n_counted;   /* the tensors uses[] counts: those before the pass */
    /* who reads what, indexed once, so that every match looks its readers
     * up instead of scanning the node list (a fan-out of 100k candidates
     * was quadratic); rewrites keep each node's original inputs among its
     * entries or drop the node */
    est_readers readers;
    bool out_of_memory;  /* a rewrite could not allocate: the pass fails */
} fuse_ctx;

static bool is_op(const est_graph *g, int32_t node, const char *op) {
    return node >= 0 && est__node_is(&g->nodes[node], op);
}

static int32_t producer(const est_graph *g, int32_t t) { return t >= 0 ? g->tensors[t].producer : -1; }

/* The value of a one-element constant. */
static bool scalar(const est_graph *g, int32_t t, double *out) {
    const est_const *c = est__graph_known_value(g, t, NULL);
    if (!c || c->count != 1) return false;
    *out = c->f64 ? c->f64[0] : (double)c->i64[0];
    return true;
}

/* The node consuming t, if t has exactly one reader, after node `after`,
 * and it is that op. */
static int32_t only_consumer(const fuse_ctx *f, int32_t t, const char *op, int32_t after) {
    const est_readers *rd = &f->readers;
    if (t < 0 || t >= f->n_counted || f->uses[t] != 1 || rd->start[t + 1] - rd->start[t] != 1) return -1;
    int32_t i = rd->nodes[rd->start[t]];
    return i > after && is_op(f->g, i, op) ? i : -1;
}

/* The other input of a two-input node, given one of them. */
static int32_t other_input(const est_node *n, int32_t t) {
    if (n->n_inputs != 2) return -1;
    return n->inputs[0] == t ? n->inputs[1] : n->inputs[1] == t ? n->inputs[0] : -1;
}

/* The tensor t is only read once, by the node that reads it in the pattern. */
static bool single_use(const fuse_ctx *f, int32_t t) { return t >= 0 && t < f->n_counted && f->uses[t] == 1; }

static bool near(double a, double b) { return fabs(a - b) <= 1e-6 * fabs(b); }

/* An attribute a rewrite gives a node: its name is copied. */
typedef struct new_attr {
    const char *name;
    est_attr_type type; /* EST_ATTR_INT, EST_ATTR_FLOAT or EST_ATTR_STRING */
    int64_t i;
    double f;
    const char *s;
} new_attr;

/* Rewrites node n into op_name(inputs) with the given attributes, writing
 * `out` as its output 0 (-1: it keeps its own); false when out of memory
 * (n unchanged). */
static bool rewrite_node(est_graph *g, est_node *n, const char *op_name, const int32_t *in, int n_in,
                         const new_attr *attrs, int n_attrs, int32_t out) {
    const char *op = est__graph_intern(g, op_name);
    int32_t *inputs = est__graph_ids(g, (size_t)n_in);
    est_attr *copies = n_attrs ? est__graph_attrs(g, (size_t)n_attrs) : NULL;
    bool ok = op && inputs && (copies || !n_attrs);
    for (int j = 0; ok && j < n_attrs; j++) {
        copies[j] = (est_attr){.name = est__graph_attr_text(g, attrs[j].name, strlen(attrs[j].name)),
                               .type = attrs[j].type, .i = attrs[j].i, .f = attrs[j].f};
        if (attrs[j].type == EST_ATTR_STRING) copies[j].s = est__graph_attr_text(g, attrs[j].s, strlen(attrs[j].s));
        ok = copies[j].name != NULL && (attrs[j].type != EST_ATTR_STRING || copies[j].s != NULL);
    }
    if (!ok) return false; /* what the graph's arena gave goes with the graph */
    memcpy(inputs, in, (size_t)n_in * sizeof *inputs);
    for (int32_t j = 0; j < n->n_attrs; j++) est__attr_free(&n->attrs[j]);
    n->op_type = op;
    n->inputs = inputs;
    n->n_inputs = n_in;
    n->attrs = copies;
    n->n_attrs = n_attrs;
    if (out >= 0) n->outputs[0] = out;
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

    if (!rewrite_node(g, &g->nodes[div], "Gelu", &x, 1, NULL, 0, g->nodes[half].outputs[0])) return f->out_of_memory = true, false;
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
    if (!rewrite_node(g, &g->nodes[sig], "Swish", &x, 1, NULL, 0, g->nodes[mul].outputs[0])) return f->out_of_memory = true, false;
    drop[mul] = true;
    return true;
}

/* Node i is op(t, c) or op(c, t) writing one tensor, c a scalar equal to k
 * (exact) or near it; *t gets t. */
static bool op_with_scalar(const est_graph *g, int32_t i, const char *op, double k, bool exact, int32_t *t) {
    if (!is_op(g, i, op)) return false;
    const est_node *n = &g->nodes[i];
    if (n->n_inputs != 2 || n->n_outputs != 1) return false;
    double c;
    for (int side = 0; side < 2; side++)
        if (n->inputs[side] >= 0 && scalar(g, n->inputs[1 - side], &c) && (exact ? c == k : near(c, k))) {
            *t = n->inputs[side];
            return true;
        }
    return false;
}

/* BLOOM's bloom_gelu_forward around its Tanh (the header's pattern):
 *   a = Mul(x, 0.5)  b = Mul(x, 0.79788456)  c = Mul(x, 0.044715)
 *   d = Mul(c, x)  e = Add(d, 1)  f = Mul(b, e)  t = Tanh(f)
 *   u = Add(t, 1)  y = Mul(a, u)
 * every intermediate read once, in the pattern. The first of the nine
 * nodes becomes Gelu(x) writing y; the others are dropped. */
static bool match_bloom_gelu(fuse_ctx *f, int32_t tanh, bool *drop) {
    est_graph *g = f->g;
    const est_node *tn = &g->nodes[tanh];
    if (!is_op(g, tanh, "Tanh") || tn->n_inputs != 1 || tn->n_outputs != 1 || !single_use(f, tn->inputs[0]))
        return false;
    int32_t fm = producer(g, tn->inputs[0]);
    if (!is_op(g, fm, "Mul") || g->nodes[fm].n_inputs != 2 || g->nodes[fm].n_outputs != 1) return false;
    /* f = Mul(b, e), either order */
    int32_t x = -1, inner = -1, bm = -1, em = -1;
    for (int side = 0; side < 2 && x < 0; side++) {
        bm = producer(g, g->nodes[fm].inputs[side]);
        em = producer(g, g->nodes[fm].inputs[1 - side]);
        if (!op_with_scalar(g, bm, "Mul", 0.79788456, false, &x) || !op_with_scalar(g, em, "Add", 1.0, true, &inner))
            x = -1;
    }
    if (x < 0 || !single_use(f, g->nodes[bm].outputs[0]) || !single_use(f, g->nodes[em].outputs[0]) ||
        !single_use(f, inner))
        return false;
    /* d = Mul(c, x) with c = Mul(x, 0.044715) */
    int32_t dm = producer(g, inner), cm = -1, cx = -1;
    if (!is_op(g, dm, "Mul") || g->nodes[dm].n_inputs != 2 || g->nodes[dm].n_outputs != 1) return false;
    cm = producer(g, other_input(&g->nodes[dm], x));
    if (!op_with_scalar(g, cm, "Mul", 0.044715, false, &cx) || cx != x || !single_use(f, g->nodes[cm].outputs[0])) return false;
    /* y = Mul(a, Add(t, 1)) with a = Mul(x, 0.5) */
    int32_t um = only_consumer(f, tn->outputs[0], "Add", tanh), ut = -1;
    if (um < 0 || !op_with_scalar(g, um, "Add", 1.0, true, &ut) || ut != tn->outputs[0]) return false;
    int32_t ym = only_consumer(f, g->nodes[um].outputs[0], "Mul", um), ax = -1;
    if (ym < 0 || g->nodes[ym].n_outputs != 1) return false;
    int32_t am = producer(g, other_input(&g->nodes[ym], g->nodes[um].outputs[0]));
    if (!op_with_scalar(g, am, "Mul", 0.5, false, &ax) || ax != x || !single_use(f, g->nodes[am].outputs[0])) return false;

    int32_t nodes[9] = {am, bm, cm, dm, em, fm, tanh, um, ym}, first = am;
    for (int k = 0; k < 9; k++)
        if (drop[nodes[k]]) return false;
        else if (nodes[k] < first) first = nodes[k];
    static const new_attr attrs[] = {{.name = "approximate", .type = EST_ATTR_STRING, .s = "tanh"},
                                     {.name = "memest.bloom_gelu", .type = EST_ATTR_INT, .i = 1}};
    if (!rewrite_node(g, &g->nodes[first], "Gelu", &x, 1, attrs, 2, g->nodes[ym].outputs[0]))
        return f->out_of_memory = true, false;
    for (int k = 0; k < 9; k++)
        if (nodes[k] != first) drop[nodes[k]] = true;
    return true;
}

/* Every value of a constant is `v` (count: how many). */
static bool all_equal(const est_graph *g, int32_t t, double v, int64_t *count) {
    const est_const *c = est__graph_known_value(g, t, NULL);
    if (!c || c->count < 1) return false;
    for (int64_t k = 0; k < c->count; k++)
        if ((c->f64 ? c->f64[k] : (double)c->i64[k]) != v) return false;
    *count = c->count;
    return true;
}

/* The [C] parameter behind a GroupNorm's [C, 1, 1] weight or bias: the
 * Unsqueeze's input (*unsqueeze set, to drop), or the initializer itself
 * (*folded set: the dynamo exporter folded the unsqueeze into it, and it is
 * declared [C] once the fusion is sure; *shared too when other nodes read
 * it: the exporter's optimizer merged equal initializers). -1 when it is
 * neither. */
static int32_t channel_param(const fuse_ctx *f, int32_t t, int32_t *unsqueeze, bool *folded, bool *shared) {
    const est_graph *g = f->g;
    *unsqueeze = -1;
    *folded = *shared = false;
    int32_t p = producer(g, t);
    if (p >= 0 && is_op(g, p, "Unsqueeze") && single_use(f, t)) {
        int32_t param = g->nodes[p].inputs[0];
        if (param < 0 || g->tensors[param].kind != EST_T_INITIALIZER || g->tensors[param].rank != 1) return -1;
        *unsqueeze = p;
        return param;
    }
    const est_tensor *w = &g->tensors[t];
    if (p >= 0 || t >= f->n_counted || w->kind != EST_T_INITIALIZER || w->rank != 3 || w->dims[1].value != 1 ||
        w->dims[2].value != 1)
        return -1;
    *folded = true;
    *shared = f->uses[t] > 1;
    return t;
}

/* A [C] parameter of its own for one GroupNorm, declared like the folded
 * [C, 1, 1] initializer t that the exporter's optimizer shares between
 * GroupNorms of equal values (every module had its own). -1 when out of
 * memory. */
static int32_t own_channel_param(est_graph *g, int32_t t, int32_t node) {
    char name[96];
    snprintf(name, sizeof name, "%.60s#norm%d", g->tensors[t].name, (int)node);
    int32_t c = est__graph_tensor(g, name);
    if (c < 0 || g->tensors[c].kind != EST_T_ACTIVATION) return -1;
    est_dimdecl *dims = est__graph_dims(g, 1);
    if (!dims) return -1;
    const est_tensor *src = &g->tensors[t]; /* after the add: the array may have moved */
    dims[0] = src->dims[0];
    est_tensor *dst = &g->tensors[c];
    dst->kind = EST_T_INITIALIZER;
    dst->dtype = src->dtype;
    dst->rank = 1;
    dst->dims = dims;
    return c;
}

/* Reshape(x, [0, G, -1]) -> InstanceNormalization(ones, zeros) -> Reshape
 * -> Mul(w) -> Add(b): the InstanceNormalization node becomes
 * GroupNormalization(x, w, b) writing the Add's output. */
static bool match_group_norm(fuse_ctx *f, int32_t in, bool *drop) {
    est_graph *g = f->g;
    const est_node *n = &g->nodes[in];
    if (!is_op(g, in, "InstanceNormalization") || n->n_inputs != 3 || n->n_outputs != 1) return false;
    int64_t groups, zeros;
    if (!all_equal(g, n->inputs[1], 1.0, &groups) || !all_equal(g, n->inputs[2], 0.0, &zeros) || zeros != groups)
        return false;
    int32_t before = producer(g, n->inputs[0]);
    if (!is_op(g, before, "Reshape") || !single_use(f, n->inputs[0])) return false;
    const est_const *shape = est__graph_known_value(g, g->nodes[before].inputs[1], NULL);
    if (!shape || shape->count != 3 || !shape->i64 || shape->i64[1] != groups || shape->i64[2] != -1) return false;
    int32_t x = g->nodes[before].inputs[0];
    int32_t after = only_consumer(f, n->outputs[0], "Reshape", in);
    int32_t mul = after >= 0 ? only_consumer(f, g->nodes[after].outputs[0], "Mul", after) : -1;
    int32_t add = mul >= 0 ? only_consumer(f, g->nodes[mul].outputs[0], "Add", mul) : -1;
    if (add < 0 || g->nodes[add].n_outputs != 1) return false;
    int32_t w_t = other_input(&g->nodes[mul], g->nodes[after].outputs[0]);
    int32_t b_t = other_input(&g->nodes[add], g->nodes[mul].outputs[0]);
    int32_t w_un, b_un;
    bool w_folded, b_folded, w_shared, b_shared;
    if (w_t < 0 || b_t < 0 || w_t == b_t) return false;
    int32_t w = channel_param(f, w_t, &w_un, &w_folded, &w_shared);
    int32_t b = w >= 0 ? channel_param(f, b_t, &b_un, &b_folded, &b_shared) : -1;
    if (w < 0 || b < 0) return false;
    if (w_shared && (w = own_channel_param(g, w, in)) < 0) return f->out_of_memory = true, false;
    if (b_shared && (b = own_channel_param(g, b, in)) < 0) return f->out_of_memory = true, false;
    double epsilon = 1e-5;
    for (int32_t j = 0; j < n->n_attrs; j++)
        if (strcmp(n->attrs[j].name, "epsilon") == 0 && n->attrs[j].type == EST_ATTR_FLOAT) epsilon = n->attrs[j].f;
    const int32_t inputs[3] = {x, w, b};
    const new_attr attrs[2] = {{.name = "num_groups", .type = EST_ATTR_INT, .i = groups},
                               {.name = "epsilon", .type = EST_ATTR_FLOAT, .f = epsilon}};
    if (!rewrite_node(g, &g->nodes[in], "GroupNormalization", inputs, 3, attrs, 2, g->nodes[add].outputs[0]))
        return f->out_of_memory = true, false;
    if (g->nodes[in].opset < 21) g->nodes[in].opset = 21; /* scale and bias of C */
    /* [C, 1, 1] -> [C]: the same parameter, as the module holds it */
    if (w_folded && !w_shared) g->tensors[w].rank = 1;
    if (b_folded && !b_shared) g->tensors[b].rank = 1;
    drop[before] = drop[after] = drop[mul] = drop[add] = true;
    if (w_un >= 0) drop[w_un] = true;
    if (b_un >= 0) drop[b_un] = true;
    return true;
}

/* A Transpose swapping the last two of `rank` axes. */
static bool swaps_last_two(const est_graph *g, int32_t node, int64_t rank) {
    int64_t n;
    const int64_t *perm = is_op(g, node, "Transpose") ? est_node_attr_ints(&g->nodes[node], "perm", &n) : NULL;
    if (!perm || n != rank) return false;
    for (int64_t i = 0; i < rank - 2; i++)
        if (perm[i] != i) return false;
    return perm[rank - 2] == rank - 1 && perm[rank - 1] == rank - 2;
}


/* k, given kT = k with its last two axes swapped as an exporter writes it:
 * Transpose [0,1,3,2] (TorchScript), or Reshape(Transpose [0,2,1](Reshape(k)))
 * (dynamo, through 3-D), whose view nodes go into chain[] to be dropped; or
 * one 4-D Transpose that also moves the heads (TorchScript folds
 * k.view(B, L, H, D).transpose(1, 2).transpose(-2, -1) into perm [0,2,3,1]):
 * *repermute is then that node, whose perm without the last swap gives k.
 * -1 if no match. */
static int32_t key_of(const fuse_ctx *f, int32_t kt, int32_t chain[3], int *n_chain, int32_t *repermute) {
    const est_graph *g = f->g;
    int32_t p = producer(g, kt);
    *n_chain = 0;
    *repermute = -1;
    if (!single_use(f, kt) || p < 0) return -1;
    if (swaps_last_two(g, p, 4)) {
        chain[(*n_chain)++] = p;
        return g->nodes[p].inputs[0];
    }
    int64_t n;
    if (is_op(g, p, "Transpose") && est_node_attr_ints(&g->nodes[p], "perm", &n) && n == 4) {
        *repermute = p;
        return kt;
    }
    if (!is_op(g, p, "Reshape")) return -1;
    int32_t t1 = g->nodes[p].inputs[0], p2 = producer(g, t1);
    if (!single_use(f, t1) || !swaps_last_two(g, p2, 3)) return -1;
    int32_t t2 = g->nodes[p2].inputs[0], p3 = producer(g, t2);
    if (!single_use(f, t2) || !is_op(g, p3, "Reshape")) return -1;
    chain[0] = p, chain[1] = p2, chain[2] = p3;
    *n_chain = 3;
    return g->nodes[p3].inputs[0];
}

/* sqrt(scale) as the exporters write it: a one-element constant, a Sqrt, or
 * a Cast of either. */
static bool is_scale(const est_graph *g, int32_t t) {
    double c;
    int32_t p = producer(g, t);
    if (is_op(g, p, "Cast")) return is_scale(g, g->nodes[p].inputs[0]);
    return scalar(g, t, &c) || is_op(g, p, "Sqrt");
}

/* Mul(x, s) with s a scale: the operand x, or -1. */
static int32_t scaled_operand(const fuse_ctx *f, int32_t t, int32_t *mul) {
    const est_graph *g = f->g;
    *mul = producer(g, t);
    if (!single_use(f, t) || !is_op(g, *mul, "Mul") || g->nodes[*mul].n_inputs != 2) return -1;
    for (int k = 1; k >= 0; k--)
        if (is_scale(g, g->nodes[*mul].inputs[k])) return g->nodes[*mul].inputs[1 - k];
    return -1;
}

/* Where(IsNaN(p), 0, p), which the TorchScript exporter adds after the
 * softmax when a mask is given (rows the mask blocks entirely): the Where's
 * output, with the two nodes in isnan/where; else p itself. */
static int32_t skip_nan_guard(const fuse_ctx *f, int32_t p, int32_t *isnan, int32_t *where) {
    const est_graph *g = f->g;
    *isnan = *where = -1;
    if (p < 0 || f->uses[p] != 2) return p;
    for (int32_t r = f->readers.start[p]; r < f->readers.start[p + 1]; r++) {
        int32_t i = f->readers.nodes[r];
        const est_node *n = &g->nodes[i];
        if (is_op(g, i, "IsNaN") && n->n_inputs == 1 && n->inputs[0] == p) *isnan = i;
        if (is_op(g, i, "Where") && n->n_inputs == 3 && n->inputs[2] == p) *where = i;
    }
    if (*isnan < 0 || *where < 0 || g->nodes[*where].inputs[0] != g->nodes[*isnan].outputs[0] ||
        !single_use(f, g->nodes[*isnan].outputs[0])) {
        *isnan = *where = -1;
        return p;
    }
    return g->nodes[*where].outputs[0];
}

/* x, given t = Reshape([Identity](Expand(Unsqueeze(x, axis 2)))): the
 * grouped-query repeat of a 4-D key or value's heads (transformers'
 * repeat_kv, or the exporters' decomposition of SDPA's enable_gqa; the
 * dynamo exporter without its optimizer keeps an Identity). Its nodes go
 * into nodes[] (*n of them). -1 when t is no such repeat. */
static int32_t unrepeated_kv(const fuse_ctx *f, int32_t t, int32_t nodes[4], int *n) {
    const est_graph *g = f->g;
    *n = 0;
    int32_t reshape = producer(g, t);
    if (!is_op(g, reshape, "Reshape") || !single_use(f, g->nodes[reshape].inputs[0])) return -1;
    nodes[(*n)++] = reshape;
    int32_t expand = producer(g, g->nodes[reshape].inputs[0]);
    if (is_op(g, expand, "Identity") && single_use(f, g->nodes[expand].inputs[0])) {
        nodes[(*n)++] = expand;
        expand = producer(g, g->nodes[expand].inputs[0]);
    }
    if (!is_op(g, expand, "Expand") || !single_use(f, g->nodes[expand].inputs[0])) return -1;
    int32_t unsq = producer(g, g->nodes[expand].inputs[0]);
    if (!is_op(g, unsq, "Unsqueeze")) return -1;
    const est_node *u = &g->nodes[unsq];
    int64_t count = 0;
    double axis = -1;
    const int64_t *axes = est_node_attr_ints(u, "axes", &count);
    if (axes && count == 1) axis = (double)axes[0];
    else if (!axes && u->n_inputs == 2 && !scalar(g, u->inputs[1], &axis)) return -1;
    if (axis != 2 || u->n_inputs < 1) return -1;
    nodes[(*n)++] = expand;
    nodes[(*n)++] = unsq;
    return u->inputs[0];
}

/* MatMul(Mul(q, s), Mul(kT, s)) [-> Add mask] -> Softmax -> [Dropout] ->
 * MatMul(., v): the last MatMul becomes Attention(q, k, v[, mask]), with the
 * keys and values before a grouped-query repeat (unrepeated_kv). A call
 * with a scale of 1 has no Muls: MatMul(q, kT) is taken as the same when
 * the dynamo exporter says the Softmax came from
 * aten.scaled_dot_product_attention (OPT and T5 scale q themselves or not
 * at all; a hand-written attention's softmax is its own FX call). */
static bool match_sdpa(fuse_ctx *f, int32_t sm, bool *drop) {
    est_graph *g = f->g;
    const est_node *s = &g->nodes[sm];
    if (!is_op(g, sm, "Softmax") || s->opset < 13 || s->n_inputs != 1 || s->n_outputs != 1 ||
        est_node_attr_int(s, "axis", -1) != -1 || !single_use(f, s->inputs[0]))
        return false;
    int32_t add = -1, mask = -1, mm1 = producer(g, s->inputs[0]);
    if (is_op(g, mm1, "Add") && g->nodes[mm1].n_inputs == 2) {
        add = mm1;
        int32_t a = g->nodes[add].inputs[0], b = g->nodes[add].inputs[1];
        bool first = is_op(g, producer(g, a), "MatMul");
        mm1 = producer(g, first ? a : b);
        mask = first ? b : a;
        if (!single_use(f, first ? a : b)) return false;
    }
    if (!is_op(g, mm1, "MatMul") || g->nodes[mm1].n_inputs != 2) return false;
    int32_t mul_q, mul_k, chain[3], n_chain, repermute = -1;
    int32_t q = scaled_operand(f, g->nodes[mm1].inputs[0], &mul_q);
    int32_t kt = scaled_operand(f, g->nodes[mm1].inputs[1], &mul_k);
    if ((q < 0 || kt < 0) && s->fx_sdpa && g->nodes[mm1].fx_sdpa) {
        q = g->nodes[mm1].inputs[0], kt = g->nodes[mm1].inputs[1];
        mul_q = mul_k = -1;
        if (!single_use(f, kt)) return false;
    }
    int32_t k = kt >= 0 ? key_of(f, kt, chain, &n_chain, &repermute) : -1;
    if (q < 0 || k < 0) return false;
    int32_t isnan, where, dropout = -1;
    int32_t p = skip_nan_guard(f, s->outputs[0], &isnan, &where);
    int32_t after = where >= 0 ? where : sm;
    int32_t mm2 = only_consumer(f, p, "MatMul", after);
    if (mm2 < 0 && (dropout = only_consumer(f, p, "Dropout", after)) >= 0) {
        const est_node *d = &g->nodes[dropout];
        if (d->n_outputs > 1 && d->outputs[1] >= 0 && f->uses[d->outputs[1]] > 0) return false; /* mask read */
        mm2 = only_consumer(f, d->outputs[0], "MatMul", dropout);
        p = d->outputs[0];
    }
    if (mm2 < 0 || g->nodes[mm2].inputs[0] != p || g->nodes[mm2].n_outputs != 1) return false;
    /* grouped-query attention reads the keys and values of fewer heads: SDPA
     * (enable_gqa) repeats them itself, or not at all */
    int32_t v = g->nodes[mm2].inputs[1], k_rep[4], v_rep[4];
    int nk, nv;
    int32_t k_kv = unrepeated_kv(f, k, k_rep, &nk), v_kv = unrepeated_kv(f, v, v_rep, &nv);
    bool grouped = k_kv >= 0 && v_kv >= 0 && repermute < 0;
    /* Attention(q, k, v[, mask]), one head per input for 3-D operands */
    const int32_t inputs[4] = {q, grouped ? k_kv : k, grouped ? v_kv : v, mask};
    const new_attr attrs[3] = {{.name = "q_num_heads", .type = EST_ATTR_INT, .i = 1},
                               {.name = "kv_num_heads", .type = EST_ATTR_INT, .i = 1},
                               {.name = EST_ATTENTION_DROPOUT, .type = EST_ATTR_INT, .i = 1}};
    bool dropped = dropout >= 0 || g->nodes[sm].fx_sdpa_dropout;
    if (!rewrite_node(g, &g->nodes[mm2], "Attention", inputs, mask >= 0 ? 4 : 3, attrs, dropped ? 3 : 2, -1))
        return f->out_of_memory = true, false;
    /* the repeats go unless something else reads them (a Shape) */
    for (int i = 0; grouped && i < nk && single_use(f, k); i++) drop[k_rep[i]] = true;
    for (int i = 0; grouped && i < nv && single_use(f, v); i++) drop[v_rep[i]] = true;
    if (repermute >= 0) { /* its output becomes k itself: undo the last swap */
        int64_t n;
        int64_t *perm = (int64_t *)est_node_attr_ints(&g->nodes[repermute], "perm", &n);
        int64_t t = perm[2];
        perm[2] = perm[3];
        perm[3] = t;
    }
    if (mul_q >= 0) drop[mul_q] = true;
    if (mul_k >= 0) drop[mul_k] = true;
    drop[mm1] = drop[sm] = true;
    if (add >= 0) drop[add] = true;
    if (dropout >= 0) drop[dropout] = true;
    if (where >= 0) drop[isnan] = drop[where] = true;
    for (int i = 0; i < n_chain; i++) drop[chain[i]] = true;
    return true;
}

/* A copy of Dropout node i (its data inputs; no mask output) writing a new
 * tensor; returns the tensor, -1 when out of memory. */
static int32_t clone_dropout(est_graph *g, int32_t i, int32_t serial) {
    char name[64];
    snprintf(name, sizeof name, "%.40s#split%d", g->nodes[i].name, (int)serial);
    int32_t t = est__graph_tensor(g, name);
    if (t < 0 || g->tensors[t].producer >= 0) return -1;
    est_node *c = est__graph_add_node(g);
    if (!c) return -1;
    const est_node *d = &g->nodes[i]; /* after the add: the array may have moved */
    c->name = est__graph_text(g, name);
    c->op_type = d->op_type; /* interned: shared */
    c->domain = d->domain;
    c->scope = d->scope;
    c->inputs = est__graph_ids(g, (size_t)d->n_inputs);
    c->outputs = est__graph_ids(g, 1);
    if (!c->name || !c->inputs || !c->outputs) return -1;
    memcpy(c->inputs, d->inputs, (size_t)d->n_inputs * sizeof *c->inputs);
    c->n_inputs = d->n_inputs;
    c->outputs[0] = t;
    c->n_outputs = 1;
    c->opset = d->opset;
    c->fx_args = d->fx_args;
    c->fx_arg0 = d->fx_arg0;
    c->output_held_until = -1;
    return t;
}

/* A Dropout node that stands for several: the dynamo exporter's optimizer
 * merges equal calls and takes dropouts for equal (LoRA's q, k and v each
 * drop out the same input with their own lora_dropout). PyTorch draws a
 * mask for each call and keeps each result. The readers' FX calls still
 * name the results they read (est_node.fx_arg0: "%getitem_38",
 * "%getitem_40"): readers of one result share a Dropout, and each other
 * result gets a Dropout of its own. Only readers whose first input is the
 * Dropout's output are told apart; if any reader cannot be, nothing is
 * split. Returns the nodes added, -1 when out of memory. */
/* The Dropout copy made for one further result of a merged Dropout; the
 * copies of one output are chained. */
typedef struct dropout_copy {
    uint64_t result;
    int32_t tensor;
    int32_t next;
} dropout_copy;

static int32_t split_merged_dropouts(est_graph *g) {
    bool any = false;
    for (int32_t i = 0; i < g->n_nodes && !any && est__graph_interned(g, "Dropout"); i++)
        any = est__node_is(&g->nodes[i], "Dropout");
    if (!any) return 0; /* most large graphs: no per-tensor tables to fill */
    size_t nt = (size_t)g->n_tensors + 1;
    int32_t n_orig = g->n_nodes, added = 0, n_copies = 0, cap = 0;
    int32_t *dropout = malloc(nt * sizeof *dropout); /* per tensor: the Dropout writing it, or -1 */
    int32_t *copies = malloc(nt * sizeof *copies);   /* per tensor: its first copy, or -1 */
    uint64_t *first = calloc(nt, sizeof *first);     /* the FX result its first reader names */
    uint8_t *state = calloc(nt, 1);                  /* 1: several results; 2: a reader unknown */
    dropout_copy *made = NULL;
    if (!dropout || !copies || !first || !state) added = -1;
    for (size_t t = 0; added == 0 && t < nt; t++) dropout[t] = copies[t] = -1;
    for (int32_t i = 0; added == 0 && i < n_orig; i++)
        if (is_op(g, i, "Dropout") && g->nodes[i].n_outputs > 0 && g->nodes[i].outputs[0] >= 0)
            dropout[g->nodes[i].outputs[0]] = i;
    for (int32_t r = 0; added == 0 && r < n_orig; r++)
        for (int32_t k = 0; k < g->nodes[r].n_inputs; k++) {
            int32_t t = g->nodes[r].inputs[k];
            if (t < 0 || dropout[t] < 0 || state[t] == 2) continue;
            uint64_t result = k == 0 ? g->nodes[r].fx_arg0 : 0;
            if (!result) state[t] = 2;
            else if (!first[t]) first[t] = result;
            else if (result != first[t]) state[t] = 1;
        }
    for (int32_t r = 0; added >= 0 && r < n_orig; r++) {
        int32_t t = g->nodes[r].n_inputs > 0 ? g->nodes[r].inputs[0] : -1;
        uint64_t result = t >= 0 ? g->nodes[r].fx_arg0 : 0;
        if (t < 0 || dropout[t] < 0 || state[t] != 1 || result == first[t]) continue;
        int32_t c = copies[t];
        while (c >= 0 && made[c].result != result) c = made[c].next;
        if (c < 0) { /* the first reader of this result: a Dropout of its own */
            if (n_copies == cap) {
                dropout_copy *grown = realloc(made, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *grown);
                if (!grown) {
                    added = -1;
                    break;
                }
                made = grown;
            }
            int32_t tensor = clone_dropout(g, dropout[t], added);
            if (tensor < 0) {
                added = -1;
                break;
            }
            made[n_copies] = (dropout_copy){result, tensor, copies[t]};
            copies[t] = c = n_copies++;
            added++;
        }
        g->nodes[r].inputs[0] = made[c].tensor;
    }
    free(dropout), free(copies), free(first), free(state), free(made);
    return added;
}

/* The ops the matchers start at (each one's first test): nodes of other
 * ops are passed over, and a graph without any needs no readers' index. */
static bool starts_pattern(const est_node *n) {
    return est__node_is(n, "Div") || est__node_is(n, "Sigmoid") || est__node_is(n, "Softmax") ||
           est__node_is(n, "InstanceNormalization") || est__node_is(n, "Tanh");
}

/* Counts and indexes the readers of every tensor, for the first node a
 * pattern may start at; false when out of memory. */
static bool index_readers(fuse_ctx *f) {
    f->uses = est__graph_count_reads(f->g);
    f->n_counted = f->g->n_tensors;
    return f->uses && est__graph_readers(f->g, &f->readers);
}

/* The number of rewrites, or -1 when out of memory (the load then fails:
 * an unfused graph would be a different estimate, not a smaller one). */
int32_t est__fuse_exporter_patterns(est_graph *g) {
    fuse_ctx f = {.g = g};
    bool *drop = NULL;
    int32_t fused = 0;
    bool named = est__graph_interned(g, "Div") || est__graph_interned(g, "Sigmoid") ||
                 est__graph_interned(g, "Softmax") || est__graph_interned(g, "InstanceNormalization") ||
                 est__graph_interned(g, "Tanh");
    for (int32_t i = 0; named && !f.out_of_memory && i < g->n_nodes; i++) {
        if (!starts_pattern(&g->nodes[i])) continue;
        if (!drop && (!index_readers(&f) || !(drop = calloc((size_t)g->n_nodes + 1, sizeof *drop)))) {
            f.out_of_memory = true;
            break;
        }
        if (!drop[i] && (match_gelu_erf(&f, i, drop) || match_silu(&f, i, drop) || match_sdpa(&f, i, drop) ||
                         match_group_norm(&f, i, drop) || match_bloom_gelu(&f, i, drop)))
            fused++;
    }
    if (fused && !f.out_of_memory) {
        est__graph_drop_nodes(g, drop);
        g->fused_nodes += fused;
    }
    free(f.uses);
    est__readers_free(&f.readers);
    free(drop);
    if (f.out_of_memory) return -1;
    int32_t split = split_merged_dropouts(g);
    return split < 0 ? -1 : fused + split;
}
