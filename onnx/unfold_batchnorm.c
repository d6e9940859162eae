/*
 * unfold_batchnorm.c: a pass of the ONNX loader that puts back the
 * BatchNorm an exporter folded into a Conv.
 *
 * PyTorch runs Conv then BatchNorm, each with its own output; the BatchNorm has
 * a scale and shift (parameters) and running statistics (buffers), and in
 * training saves its input and batch statistics. Exporters fold the BatchNorm
 * into the Conv's weight and bias, which hides all of that. Two exporters say
 * so in the file:
 *  - the dynamo exporter's optimizer names its rewrite in the node's metadata
 *    ("pkg.onnxscript.rewriter.rule_name": "FuseBatchNormIntoConv"), and the
 *    FX node it came from says whether the BatchNorm trained
 *    (_native_batch_norm_legit_functional) or not (..._no_training);
 *  - the TorchScript exporter in eval mode gives the weight its fold produced a
 *    new name, "onnx::Conv_<n>", where an untouched weight keeps its module
 *    path ("layer1.0.conv1.weight").
 * The loader puts the BatchNormalization back after such a Conv, so that the
 * estimate describes the module PyTorch runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node_metadata.h"
#include "unfold_batchnorm.h"

static est_status oom(const est_graph *g, est_error *err) {
    return est__fail(err, EST_ENOMEM, "%s: out of memory while loading", g->source);
}

bool est__onnx_folded_batchnorm(const est_graph *g, const Onnx__NodeProto *p, bool *training, bool *dynamo,
                                bool *oom) {
    if (!p->op_type || strcmp(p->op_type, "Conv") != 0 || p->n_input < 2 || !p->input[1]) return false;
    char rule[256], fx[256];
    *dynamo = est__onnx_node_metadata(p, "pkg.onnxscript.rewriter.rule_name", rule, sizeof rule, oom) &&
              strstr(rule, "FuseBatchNormIntoConv");
    if (*dynamo) {
        *training = est__onnx_node_metadata(p, "pkg.torch.onnx.fx_node", fx, sizeof fx, oom) &&
                    strstr(fx, "batch_norm") && !strstr(fx, "no_training");
        return true;
    }
    *training = false;
    return strcmp(g->producer, "pytorch") == 0 && strncmp(p->input[1], "onnx::Conv_", 11) == 0;
}

static int32_t new_tensor(est_graph *g, const char *base, const char *suffix) {
    char name[512];
    snprintf(name, sizeof name, "%.400s/%s", base, suffix);
    if (est__graph_find(g, name) >= 0) return -2; /* taken: leave the model as it is */
    return est__graph_tensor(g, name);
}

/* The module the Conv of a dynamo fold ran in. The fold leaves the
 * BatchNorm's module path on the Conv ("layer1/layer1.0/layer1.0.bn1", full
 * names); the Conv's weight names its own module ("layer1.0.conv1.weight").
 * Returns the path with its last part replaced by that module, when the
 * module sits beside the BatchNorm; NULL otherwise (or out of memory). */
static char *dynamo_conv_scope(const char *bn_scope, const char *weight) {
    size_t w_len = strlen(weight), suffix = strlen(".weight");
    if (w_len <= suffix || strcmp(weight + w_len - suffix, ".weight") != 0) return NULL;
    size_t module_len = w_len - suffix;
    const char *slash = strrchr(bn_scope, '/');
    size_t path_len = slash ? (size_t)(slash - bn_scope) : 0; /* the container's path */
    size_t start = path_len; /* of the container's full name, the path's last part */
    while (start > 0 && bn_scope[start - 1] != '/') start--;
    size_t container_len = path_len - start;
    if (container_len && (module_len <= container_len + 1 ||
                          strncmp(weight, bn_scope + start, container_len) != 0 || weight[container_len] != '.'))
        return NULL;
    size_t own = container_len ? container_len + 1 : 0; /* the Conv's attribute name starts here */
    if (memchr(weight + own, '.', module_len - own)) return NULL;
    size_t cap = path_len + 1 + module_len + 1;
    char *scope = malloc(cap);
    if (scope)
        snprintf(scope, cap, "%.*s%s%.*s", (int)path_len, bn_scope, path_len ? "/" : "", (int)module_len, weight);
    return scope;
}

/* The restored BatchNorm's module: the dynamo fold's path moves to it, and
 * the Conv takes its own (dynamo_conv_scope); after a TorchScript fold, whose
 * Conv keeps its own path, a sibling module "<conv's module>_bn". */
static bool place_batchnorm_scope(est_graph *g, est_node *conv, est_node *bn, bool dynamo) {
    if (!conv->scope) return true;
    if (dynamo) {
        char *conv_scope = dynamo_conv_scope(conv->scope, g->tensors[conv->inputs[1]].name);
        bn->scope = conv->scope;
        if (!conv_scope) return true;
        conv->scope = est__graph_intern(g, conv_scope);
        free(conv_scope);
        return conv->scope != NULL;
    }
    char name[512];
    snprintf(name, sizeof name, "%.400s%s", conv->scope, conv->scope[0] ? "_bn" : "bn");
    return (bn->scope = est__graph_intern(g, name)) != NULL;
}

/* Appends BatchNormalization(conv output) and makes the Conv write a new
 * tensor; the folded bias is dropped (the BatchNorm's shift replaces it). */
est_status est__onnx_unfold_batchnorm(est_graph *g, int32_t conv_index, bool training, bool dynamo, est_error *err) {
    est_node *conv = &g->nodes[conv_index];
    int32_t w = conv->inputs[1], y = conv->n_outputs ? conv->outputs[0] : -1;
    if (w < 0 || y < 0 || g->tensors[w].kind != EST_T_INITIALIZER || g->tensors[w].rank < 1) return EST_OK;
    int64_t channels = g->tensors[w].dims[0].value;
    if (channels <= 0) return EST_OK;
    char *conv_name = conv->name;
    int32_t ids[5];
    static const char *const suffix[5] = {"unfolded_conv_output", "unfolded_bn.scale", "unfolded_bn.bias",
                                          "unfolded_bn.running_mean", "unfolded_bn.running_var"};
    for (int k = 0; k < 5; k++) {
        ids[k] = new_tensor(g, conv_name, suffix[k]);
        if (ids[k] == -2) return EST_OK;
        if (ids[k] < 0) return oom(g, err);
    }
    for (int k = 1; k < 5; k++) {
        est_tensor *t = &g->tensors[ids[k]];
        t->kind = EST_T_INITIALIZER;
        t->dtype = g->tensors[w].dtype;
        t->rank = 1;
        if (!(t->dims = est__graph_dims(g, 1))) return oom(g, err);
        t->dims[0] = (est_dimdecl){channels, -1};
    }
    est_node *bn = est__graph_add_node(g);
    if (!bn) return oom(g, err);
    conv = &g->nodes[conv_index]; /* the node array may have moved */
    conv->outputs[0] = ids[0];
    if (conv->n_inputs > 2) conv->n_inputs = 2;
    char name[512];
    snprintf(name, sizeof name, "%.400s" EST_UNFOLDED_BN_SUFFIX, conv_name);
    bn->name = est__graph_text(g, name);
    if (!place_batchnorm_scope(g, conv, bn, dynamo)) return oom(g, err);
    bn->op_type = est__graph_intern(g, "BatchNormalization");
    bn->domain = est__graph_intern(g, "");
    bn->opset = conv->opset;
    bn->inputs = est__graph_ids(g, 5);
    bn->outputs = est__graph_ids(g, 1);
    bn->attrs = est__graph_attrs(g, 1);
    if (!bn->name || !bn->op_type || !bn->domain || !bn->inputs || !bn->outputs || !bn->attrs) return oom(g, err);
    for (int k = 0; k < 5; k++) bn->inputs[k] = ids[k];
    bn->n_inputs = 5;
    bn->outputs[0] = y;
    bn->n_outputs = 1;
    if (training && bn->opset >= 14) {
        static const char mode[] = "training_mode";
        if (!(bn->attrs[0].name = est__graph_attr_text(g, mode, sizeof mode - 1))) return oom(g, err);
        bn->attrs[0].type = EST_ATTR_INT;
        bn->attrs[0].i = 1;
        bn->n_attrs = 1;
    }
    g->unfolded_batchnorms++;
    return EST_OK;
}

/* The TorchScript exporter shares equal folded biases through Identity nodes
 * of one initializer. Once the unfold has dropped those biases, such an
 * Identity feeds nothing; removing it keeps its initializer from counting as
 * a parameter that PyTorch never had. */
est_status est__onnx_drop_dead_identities(est_graph *g, est_error *err) {
    int32_t *reads = est__graph_count_reads(g);
    bool *drop = calloc((size_t)g->n_nodes + 1, sizeof *drop);
    bool ok = reads && drop;
    if (ok) {
        for (int32_t i = 0; i < g->n_nodes; i++) {
            const est_node *n = &g->nodes[i];
            drop[i] = strcmp(n->op_type, "Identity") == 0 && n->n_inputs == 1 && n->inputs[0] >= 0 &&
                      g->tensors[n->inputs[0]].kind == EST_T_INITIALIZER && n->n_outputs == 1 &&
                      n->outputs[0] >= 0 && reads[n->outputs[0]] == 0;
        }
        est__graph_drop_nodes(g, drop);
    }
    free(reads);
    free(drop);
    return ok ? EST_OK : oom(g, err); /* not a graph that keeps PyTorch's missing parameters */
}
