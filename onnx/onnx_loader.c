/*
 * onnx_loader.c: ModelProto -> est_graph, through the protobuf-c parser that
 * the build generates from onnx.proto, one node, initializer or value info
 * at a time (stream.c).
 *
 * Only structure is kept: names, dtypes, dims, attributes, and the values of
 * small numeric tensors (shape constants) that shape inference folds. Weight
 * bytes go with each parsed item, and weights in external files are never
 * opened.
 */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700 /* realpath() */
#endif
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "node_metadata.h"
#include "param_names.h"
#include "stream.h"
#include "tensor_values.h"
#include "onnx_loader.h"
#include "rnn_weights.h"
#include "unfold_batchnorm.h"

typedef struct loader {
    est_graph *g;
    est_error *err;
    const char *src;
    const est_limits *lim;
    const char *dir;     /* the model's folder, for external data; NULL for buffers */
    char *real_dir;      /* realpath(dir), made when first needed */
    char *checked_loc;   /* the last external-data location found inside dir */
    est_fx_names fx_names; /* what the current FX call's nodes named (param_names.c) */
    const Onnx__ModelProto *model; /* without its graph: the opsets nodes look up */
    bool bad_bytes;      /* an item did not unpack: the file is no valid protobuf */
    const char *last_scope; /* the scope the last node's name gave (interned):
                               the nodes of a call follow each other */
    size_t last_scope_len;
    const char *last_op, *last_domain; /* the last node's, interned */
} loader;

static est_status oom(loader *L) {
    return est__fail(L->err, EST_ENOMEM, "%s: out of memory while loading", L->src);
}

static const char *str_or_empty(const char *s) { return s ? s : ""; }

/* ---- external data ----------------------------------------------------------
 * Weights are never read, but a tensor's external-data location is still
 * checked: it must be a relative path inside the model's folder. A location
 * that is absolute, climbs out with "..", or (for a file load, when the file
 * exists) resolves through a symlink outside the folder is refused, so that
 * no later reader of the same model is led outside it. A missing file is
 * fine: weights may be absent. */
static est_status check_location(loader *L, const char *tensor, const char *loc) {
    if (!loc[0]) return est__fail(L->err, EST_EPARSE, "%s: tensor '%s': external data has an empty location", L->src, tensor);
    if (loc[0] == '/' || loc[0] == '\\' || (loc[0] && loc[1] == ':'))
        return est__fail(L->err, EST_EPARSE, "%s: tensor '%s': external data location '%.200s' is an absolute path; "
                         "it must be relative to the model's folder", L->src, tensor, loc);
    for (const char *c = loc; *c;) { /* each path component */
        size_t len = strcspn(c, "/\\");
        if (len == 2 && c[0] == '.' && c[1] == '.')
            return est__fail(L->err, EST_EPARSE, "%s: tensor '%s': external data location '%.200s' leaves the "
                             "model's folder", L->src, tensor, loc);
        c += len;
        if (*c) c++;
    }
    if (!L->dir) return EST_OK;
    if (L->checked_loc && strcmp(L->checked_loc, loc) == 0) return EST_OK; /* most files name one weights file */
    if (!L->real_dir) {
        L->real_dir = realpath(L->dir, NULL);
        if (!L->real_dir) return errno == ENOMEM ? oom(L) : EST_OK; /* folder gone: nothing to follow */
    }
    size_t n = strlen(L->dir) + strlen(loc) + 2;
    char *joined = malloc(n);
    if (!joined) return oom(L);
    snprintf(joined, n, "%s/%s", L->dir, loc);
    char *real = realpath(joined, NULL);
    int saved = errno;
    free(joined);
    if (!real && saved == ENOMEM) return oom(L);
    size_t dl = strlen(L->real_dir);
    bool inside = !real || /* absent weights are allowed */
                  (strncmp(real, L->real_dir, dl) == 0 && (real[dl] == '/' || (dl == 1 && L->real_dir[0] == '/')));
    free(real);
    if (!inside)
        return est__fail(L->err, EST_EPARSE, "%s: tensor '%s': external data location '%.200s' resolves outside "
                         "the model's folder (a symlink?)", L->src, tensor, loc);
    free(L->checked_loc);
    L->checked_loc = est__strdup(loc); /* NULL when out of memory: checked again next time */
    return EST_OK;
}

static est_status check_external_data(loader *L, const Onnx__TensorProto *t) {
    bool external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (!external && !t->n_external_data) return EST_OK;
    const char *loc = NULL;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (e && e->key && strcmp(e->key, "location") == 0) loc = str_or_empty(e->value);
    }
    if (!loc) {
        if (!t->n_external_data) return EST_OK; /* flagged external, nothing stored: no file to check */
        return est__fail(L->err, EST_EPARSE, "%s: tensor '%s': external data without a 'location'", L->src,
                         str_or_empty(t->name));
    }
    return check_location(L, str_or_empty(t->name), loc);
}

/* ---- graph pieces ---------------------------------------------------------- */

static est_status add_initializer(loader *L, const Onnx__TensorProto *t) {
    if (!t->name || !t->name[0])
        return est__fail(L->err, EST_EPARSE, "%s: an initializer has no name", L->src);
    int64_t count;
    est_status st = est__onnx_check_tensor_dims(t, &count, L->lim, L->err, L->src);
    if (st == EST_OK) st = check_external_data(L, t);
    if (st != EST_OK) return st;
    int32_t before = L->g->n_tensors, ti = est__graph_tensor(L->g, t->name);
    if (ti < 0) return oom(L);
    if (ti < before)
        return est__fail(L->err, EST_EGRAPH, "%s: initializer '%s' is defined twice", L->src, t->name);
    est_tensor *tt = &L->g->tensors[ti];
    tt->kind = EST_T_INITIALIZER;
    tt->dtype = (est_dtype)t->data_type;
    tt->rank = (int32_t)t->n_dims;
    if (t->n_dims) {
        tt->dims = est__graph_dims(L->g, t->n_dims);
        if (!tt->dims) return oom(L);
        for (size_t d = 0; d < t->n_dims; d++) tt->dims[d] = (est_dimdecl){t->dims[d], -1};
    }
    return est__onnx_decode_values(t, count, &tt->value, L->err, L->src);
}

static est_status add_input(loader *L, const Onnx__ValueInfoProto *vi) {
    const char *name = str_or_empty(vi->name);
    if (!name[0]) return est__fail(L->err, EST_EPARSE, "%s: a graph input has no name", L->src);
    int32_t existing = est__graph_find(L->g, name);
    if (existing >= 0) {
        if (L->g->tensors[existing].kind == EST_T_INITIALIZER) return EST_OK; /* IR < 4 style */
        return est__fail(L->err, EST_EGRAPH, "%s: graph input '%s' is listed twice", L->src, name);
    }
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return est__fail(L->err, EST_EUNSUPPORTED, "%s: graph input '%s' is not a tensor", L->src, name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    int32_t ti = est__graph_tensor(L->g, name);
    if (ti < 0) return oom(L);
    est_graph *g = L->g;
    int32_t *ni = realloc(g->inputs, (size_t)(g->n_inputs + 1) * sizeof *ni);
    if (!ni) return oom(L);
    g->inputs = ni;
    g->inputs[g->n_inputs++] = ti;
    est_tensor *t = &g->tensors[ti];
    t->kind = EST_T_INPUT;
    t->dtype = tt->has_elem_type ? (est_dtype)tt->elem_type : EST_DT_UNDEFINED;
    if ((unsigned)t->dtype >= EST_DT_COUNT || t->dtype == EST_DT_UNDEFINED)
        return est__fail(L->err, EST_EUNSUPPORTED, "%s: graph input '%s' has unsupported element type %d",
                         L->src, name, (int)t->dtype);
    if (!tt->shape)
        return est__fail(L->err, EST_ESHAPE, "%s: graph input '%s' has no shape", L->src, name);
    if (tt->shape->n_dim > L->lim->max_rank)
        return est__fail(L->err, EST_ELIMIT, "%s: graph input '%s' has rank %zu, above the limit of %u (est_limits.max_rank)",
                         L->src, name, tt->shape->n_dim, L->lim->max_rank);
    t->rank = (int32_t)tt->shape->n_dim;
    if (t->rank) {
        t->dims = est__graph_dims(g, (size_t)t->rank);
        if (!t->dims) return oom(L);
    }
    for (int32_t d = 0; d < t->rank; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        t->dims[d] = (est_dimdecl){-1, -1};
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (dim->dim_value <= 0)
                return est__fail(L->err, EST_ESHAPE, "%s: graph input '%s' dim %d is %lld; dims must be positive",
                                 L->src, name, (int)d, (long long)dim->dim_value);
            if (dim->dim_value > L->lim->max_dim_value)
                return est__fail(L->err, EST_ELIMIT, "%s: graph input '%s' dim %d is %lld, above the limit of %lld "
                                 "(est_limits.max_dim_value)",
                                 L->src, name, (int)d, (long long)dim->dim_value, (long long)L->lim->max_dim_value);
            t->dims[d].value = dim->dim_value;
        } else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                   dim->dim_param && dim->dim_param[0]) {
            if ((t->dims[d].sym = est__graph_symbol(g, dim->dim_param)) == -2)
                return est__fail(L->err, EST_ELIMIT, "%s: graph input '%s': more than %llu symbolic dim names "
                                 "(est_limits.max_symbols)", L->src, name, (unsigned long long)g->limits.max_symbols);
            if (t->dims[d].sym < 0) return oom(L);
        }
    }
    return EST_OK;
}

static est_status copy_attr(loader *L, const est_node *n, est_attr *a, const Onnx__AttributeProto *p) {
    const char *name = str_or_empty(p->name);
    if (!(a->name = est__graph_attr_text(L->g, name, strlen(name)))) return oom(L);
    est_attr_type type = p->has_type ? (est_attr_type)p->type : EST_ATTR_UNDEFINED;
    if (type == EST_ATTR_UNDEFINED) { /* IR < 2 models leave the type out */
        if (p->n_ints) type = EST_ATTR_INTS;
        else if (p->n_floats) type = EST_ATTR_FLOATS;
        else if (p->n_strings) type = EST_ATTR_STRINGS;
        else if (p->t) type = EST_ATTR_TENSOR;
        else if (p->g) type = EST_ATTR_GRAPH;
        else if (p->has_s) type = EST_ATTR_STRING;
        else if (p->has_f) type = EST_ATTR_FLOAT;
        else type = EST_ATTR_INT;
    }
    if ((unsigned)type > EST_ATTR_TYPE_PROTOS)
        return est__fail(L->err, EST_EATTR, "%s: node '%s' (%s): attribute '%s' has unknown type %d", L->src,
                         n->name, n->op_type, a->name, (int)type);
    a->type = type;
    a->i = p->i;
    a->f = p->f;
    size_t biggest = p->s.len;
    if (p->n_ints > biggest) biggest = p->n_ints;
    if (p->n_floats > biggest) biggest = p->n_floats;
    if (p->n_strings > biggest) biggest = p->n_strings;
    for (size_t k = 0; k < p->n_strings; k++)
        if (p->strings[k].len > biggest) biggest = p->strings[k].len;
    if (biggest > L->lim->max_attr_elements)
        return est__fail(L->err, EST_ELIMIT, "%s: node '%s' (%s): attribute '%s' holds %zu elements or bytes, above "
                         "the limit of %llu (est_limits.max_attr_elements)", L->src, n->name, n->op_type, a->name,
                         biggest, (unsigned long long)L->lim->max_attr_elements);
    switch (type) {
    case EST_ATTR_STRING:
        if (!(a->s = est__graph_attr_text(L->g, (const char *)p->s.data, p->s.len))) return oom(L);
        break;
    case EST_ATTR_INTS:
        a->n = (int64_t)p->n_ints;
        if (!(a->ints = est__graph_attr_copy(L->g, p->ints, p->n_ints * sizeof *a->ints))) return oom(L);
        break;
    case EST_ATTR_FLOATS:
        a->n = (int64_t)p->n_floats;
        if (!(a->floats = est__graph_attr_room(L->g, p->n_floats * sizeof *a->floats))) return oom(L);
        for (size_t k = 0; k < p->n_floats; k++) a->floats[k] = p->floats[k];
        break;
    case EST_ATTR_STRINGS:
        a->n = (int64_t)p->n_strings;
        if (!(a->strings = est__graph_attr_room(L->g, p->n_strings * sizeof *a->strings))) return oom(L);
        for (size_t k = 0; k < p->n_strings; k++)
            if (!(a->strings[k] = est__graph_attr_text(L->g, (const char *)p->strings[k].data, p->strings[k].len)))
                return oom(L);
        break;
    case EST_ATTR_TENSOR: {
        if (!p->t)
            return est__fail(L->err, EST_EATTR, "%s: node '%s' (%s): attribute '%s' has no tensor",
                             L->src, n->name, n->op_type, a->name);
        int64_t count;
        est_status st = est__onnx_check_tensor_dims(p->t, &count, L->lim, L->err, L->src);
        if (st == EST_OK) st = check_external_data(L, p->t);
        if (st != EST_OK) return st;
        a->t_dtype = (est_dtype)p->t->data_type;
        a->t_rank = (int32_t)p->t->n_dims;
        if (!(a->t_dims = est__graph_attr_copy(L->g, p->t->dims, p->t->n_dims * sizeof *a->t_dims))) return oom(L);
        return est__onnx_decode_values(p->t, count, &a->t_value, L->err, L->src);
    }
    default:
        break; /* graphs and type protos: only the type is kept */
    }
    return EST_OK;
}

static int64_t domain_opset(const Onnx__ModelProto *m, const char *domain) {
    bool std = !domain[0] || strcmp(domain, "ai.onnx") == 0;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = str_or_empty(m->opset_import[i]->domain);
        bool dstd = !d[0] || strcmp(d, "ai.onnx") == 0;
        if ((std && dstd) || strcmp(d, domain) == 0) return m->opset_import[i]->version;
    }
    return 0;
}

/* The hash of s[0..n), never 0 (0 says "none"). */
static uint64_t name_hash(const char *s, size_t n) {
    uint64_t h = est__fnv1a(EST_FNV_START, s, n);
    return h ? h : 1;
}

/* Whether the FX call a dynamo-exported node came from reads a parameter,
 * and (*arg0) which FX value it takes first, from the node's
 * "pkg.torch.onnx.fx_node" (NULL: none). It prints the call ("%mul : ... =
 * call_function[...](args = (%x, %p_norm_weight), ...)"), and torch.export
 * names the placeholders of parameters p_<name> (buffers b_, constants c_). */
static est_fx_args fx_call_args(const char *fx_node, uint64_t *arg0) {
    *arg0 = 0;
    if (!fx_node) return EST_FX_UNKNOWN;
    const char *args = strstr(fx_node, "](args = (");
    if (args && args[10] == '%') *arg0 = name_hash(args + 10, strcspn(args + 10, ",) ]"));
    return !args ? EST_FX_UNKNOWN : strstr(args, "%p_") ? EST_FX_READS_PARAM : EST_FX_NO_PARAM;
}

/* Whether an FX call of aten.scaled_dot_product_attention has a dropout_p
 * above 0: its fifth argument ("args = (%q, %k, %v, %mask, 0.1)") or the
 * keyword ("dropout_p: 0.1"). */
static bool fx_sdpa_dropout(const char *fx_node) {
    const char *kw = strstr(fx_node, "dropout_p: ");
    if (kw) return strtod(kw + 11, NULL) > 0;
    const char *args = strstr(fx_node, "](args = (");
    if (!args) return false;
    const char *a = args + 10;
    for (int comma = 0; comma < 4; comma++) {
        a = strchr(a, ',');
        if (!a) return false;
        a++;
    }
    while (*a == ' ') a++;
    return *a != '%' && strtod(a, NULL) > 0;
}

/* The module a node ran in, as est_node.scope wants it. The dynamo exporter
 * records the module path in "pkg.torch.onnx.name_scopes" (a Python list: '',
 * then one entry per module, then the op); the TorchScript exporter names the
 * node after it ("/layer1/layer1.0/conv1/Conv"). Sets *scope to the graph's
 * interned string, or NULL when neither says; false only when out of memory. */
/* The interned copy of s[0..len), the last node's when the same. */
static const char *intern_scope(loader *L, const char *s, size_t len) {
    if (L->last_scope && L->last_scope_len == len && memcmp(L->last_scope, s, len) == 0) return L->last_scope;
    const char *copy = est__graph_intern_n(L->g, s, len);
    if (copy) L->last_scope = copy, L->last_scope_len = len;
    return copy;
}

/* The n entries joined by '/' into path, NUL-terminated; the joined
 * length, cap or more when it does not fit (path then holds no scope). A
 * dynamo node lists a dozen modules: snprintf cost more than the rest of
 * the node. */
static size_t join_modules(char *path, size_t cap, char *const *entries, int n) {
    size_t len = 0;
    for (int k = 0; k < n; k++) {
        size_t el = strlen(entries[k]);
        if (k > 0 && len < cap) path[len] = '/';
        len += k > 0;
        if (len < cap && el < cap - len) memcpy(path + len, entries[k], el);
        len += el;
    }
    if (len < cap) path[len] = '\0';
    return len;
}

static bool module_scope(loader *L, const Onnx__NodeProto *p, const char *name, const char **scope) {
    char list[4096], path[4096];
    size_t len = 0;
    *scope = NULL;
    bool no_memory = false;
    bool listed = est__onnx_node_metadata(p, "pkg.torch.onnx.name_scopes", list, sizeof list, &no_memory);
    if (no_memory) return false;
    if (listed) {
        int items = 0;
        char *entries[256];
        for (char *c = list; items < 256 && (c = strchr(c, '\'')) != NULL;) {
            char *close = strchr(c + 1, '\'');
            if (!close) break;
            *close = '\0';
            entries[items++] = c + 1;
            c = close + 1;
        }
        /* entries[0] is the model itself, the last one the op */
        len = join_modules(path, sizeof path, entries + 1, items - 2);
        if (items < 1 || len >= sizeof path) return true;
        return (*scope = intern_scope(L, path, len)) != NULL;
    }
    const char *slash = strrchr(name, '/');
    if (name[0] != '/' || !slash) return true;
    len = (size_t)(slash - name);
    *scope = len > 0 ? intern_scope(L, name + 1, len - 1) : intern_scope(L, "", 0);
    return *scope != NULL;
}

/* PyTorch's names for the weights this node reads under generated names
 * (param_names.c), from its FX call in a dynamo export (`fx_node`, NULL
 * when the node has none). */
static est_status name_weights(loader *L, const Onnx__NodeProto *p, est_node *n, const char *fx_node) {
    bool reads_initializer = false;
    for (int32_t k = 0; k < n->n_inputs && !reads_initializer; k++)
        reads_initializer = n->inputs[k] >= 0 && L->g->tensors[n->inputs[k]].kind == EST_T_INITIALIZER;
    if (!fx_node || !reads_initializer || !n->scope) return EST_OK;
    /* a node the exporter's optimizer rewrote (a BatchNorm folded into its
     * Conv) keeps the FX call of another op, whose parameters it no longer
     * reads as such */
    bool no_memory = false;
    bool rewritten = est__onnx_node_metadata(p, "pkg.onnxscript.rewriter.rule_name", NULL, 0, &no_memory);
    if (no_memory) return oom(L);
    if (rewritten) return EST_OK;
    return est__name_renamed_weights(L->g, n, fx_node, &L->fx_names) ? EST_OK : oom(L);
}

/* The dynamo exporter writes aten.detach as an Identity, and ONNX has no op
 * that stops gradients; its FX call still says "aten.detach". PyTorch
 * computes nothing backward through it (peft's DoRA detaches its weight
 * norm), so the node becomes memest's Detach. False only when out of
 * memory. */
static bool detach_from_fx_call(est_graph *g, est_node *n, const char *fx_node) {
    if (!fx_node || strcmp(n->op_type, "Identity") != 0 || n->domain[0] ||
        !strstr(fx_node, "[target=torch.ops.aten.detach.default]"))
        return true;
    const char *op = est__graph_intern(g, "Detach"), *domain = est__graph_intern(g, EST_DOMAIN_MEMEST);
    if (!op || !domain) return false;
    n->op_type = op, n->domain = domain;
    return true;
}

/* The interned copy of s, *last when the same: nodes mostly share their
 * domain and often follow one of the same op. */
static const char *intern_again(loader *L, const char *s, const char **last) {
    if (*last && strcmp(*last, s) == 0) return *last;
    const char *copy = est__graph_intern(L->g, s);
    if (copy) *last = copy;
    return copy;
}

static est_status build_node(loader *L, const Onnx__NodeProto *p, int32_t index, const char *fx_node) {
    est_node *n = est__graph_add_node(L->g);
    if (!n) return oom(L);
    const char *op = str_or_empty(p->op_type);
    if (!(n->op_type = intern_again(L, op, &L->last_op)) ||
        !(n->domain = intern_again(L, str_or_empty(p->domain), &L->last_domain)))
        return oom(L);
    if (p->name && p->name[0]) n->name = est__graph_text(L->g, p->name);
    else {
        char buf[96];
        snprintf(buf, sizeof buf, "%.60s_%d", op[0] ? op : "node", (int)index);
        n->name = est__graph_text(L->g, buf);
    }
    if (!n->name || !module_scope(L, p, n->name, &n->scope) || !detach_from_fx_call(L->g, n, fx_node)) return oom(L);
    n->fx_args = fx_call_args(fx_node, &n->fx_arg0);
    n->fx_sdpa = fx_node && strstr(fx_node, "target=torch.ops.aten.scaled_dot_product_attention") != NULL;
    n->fx_sdpa_dropout = n->fx_sdpa && fx_sdpa_dropout(fx_node);
    if (!op[0]) return est__fail(L->err, EST_EPARSE, "%s: node '%s' has no op_type", L->src, n->name);
    if (p->n_input > EST_MAX_IO || p->n_output > EST_MAX_IO)
        return est__fail(L->err, EST_ELIMIT, "%s: node '%s' (%s): more than %d inputs or outputs",
                         L->src, n->name, op, EST_MAX_IO);
    n->opset = domain_opset(L->model, n->domain);
    n->inputs = est__graph_ids(L->g, p->n_input);
    n->outputs = est__graph_ids(L->g, p->n_output);
    n->attrs = p->n_attribute ? est__graph_attrs(L->g, p->n_attribute) : NULL; /* most nodes have none */
    if (!n->inputs || !n->outputs || (!n->attrs && p->n_attribute)) return oom(L);
    for (size_t k = 0; k < p->n_input; k++) {
        n->inputs[k] = -1;
        if (p->input[k] && p->input[k][0] && (n->inputs[k] = est__graph_tensor(L->g, p->input[k])) < 0)
            return oom(L);
        n->n_inputs++;
    }
    for (size_t k = 0; k < p->n_output; k++) {
        n->outputs[k] = -1;
        if (p->output[k] && p->output[k][0] && (n->outputs[k] = est__graph_tensor(L->g, p->output[k])) < 0)
            return oom(L);
        n->n_outputs++;
    }
    for (size_t k = 0; k < p->n_attribute; k++) {
        est_status st = copy_attr(L, n, &n->attrs[n->n_attrs++], p->attribute[k]);
        if (st != EST_OK) return st;
    }
    return name_weights(L, p, n, fx_node);
}

/* Adds node p; its FX call's metadata (dynamo exports) is read once. */
static est_status add_node(loader *L, const Onnx__NodeProto *p, int32_t index) {
    bool no_memory = false;
    est_md_scratch scratch;
    const char *fx = est__onnx_metadata_value(p, "pkg.torch.onnx.fx_node", &scratch, &no_memory);
    est_status st = no_memory ? oom(L) : build_node(L, p, index, fx);
    est__onnx_scratch_release(&scratch);
    return st;
}

/* ---- the graph, item by item (stream.c) ----------------------------------- */

static est_status not_protobuf(est_error *err, const char *src) {
    return est__fail(err, EST_EPARSE, "%s: not a valid ONNX protobuf (truncated or corrupt, or out of memory)", src);
}

/* What the loader does with one item of the graph, the index-th of its kind. */
typedef est_status (*item_fn)(loader *L, const void *item, size_t index);

static est_status for_each_item(loader *L, est_onnx_stream *s, est_onnx_item kind, item_fn fn) {
    est_onnx_cursor c = {.kind = kind};
    bool bad = false;
    const void *item;
    for (size_t i = 0; (item = est__onnx_stream_next(s, &c, &bad)) != NULL; i++) {
        est_status st = fn(L, item, i);
        if (st != EST_OK) return st;
    }
    if (!bad) return EST_OK;
    L->bad_bytes = true;
    return not_protobuf(L->err, L->src);
}

static est_status initializer_item(loader *L, const void *item, size_t index) {
    (void)index;
    return add_initializer(L, item);
}

static est_status sparse_item(loader *L, const void *item, size_t index) {
    (void)index;
    const Onnx__SparseTensorProto *sp = item;
    if (!sp->values) return est__fail(L->err, EST_EPARSE, "%s: sparse initializer without values", L->src);
    Onnx__TensorProto dense = *sp->values; /* name and dtype from values, dims from the sparse */
    dense.n_dims = sp->n_dims;
    dense.dims = sp->dims;
    dense.has_raw_data = 0;
    dense.n_float_data = dense.n_int32_data = dense.n_int64_data = dense.n_double_data = 0;
    dense.n_uint64_data = 0;
    dense.has_data_location = 1;
    dense.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL; /* no values */
    return add_initializer(L, &dense);
}

static est_status input_item(loader *L, const void *item, size_t index) {
    (void)index;
    return add_input(L, item);
}

/* A node, and the BatchNorm an exporter folded into it. */
static est_status node_item(loader *L, const void *item, size_t index) {
    bool training, dynamo, no_memory = false;
    est_status st = add_node(L, item, (int32_t)index);
    bool folded = st == EST_OK && est__onnx_folded_batchnorm(L->g, item, &training, &dynamo, &no_memory);
    if (no_memory) return oom(L);
    return folded ? est__onnx_unfold_batchnorm(L->g, L->g->n_nodes - 1, training, dynamo, L->err) : st;
}

static est_status output_item(loader *L, const void *item, size_t index) {
    (void)index;
    const char *name = str_or_empty(((const Onnx__ValueInfoProto *)item)->name);
    int32_t t = est__graph_find(L->g, name);
    if (t < 0) return est__fail(L->err, EST_EGRAPH, "%s: graph output '%s' is not produced by any node", L->src, name);
    L->g->outputs[L->g->n_outputs++] = t;
    return EST_OK;
}

/* The model's own fields: IR version, opsets, names; the caps on its items. */
static est_status read_model(loader *L, const est_onnx_stream *s) {
    est_graph *g = L->g;
    const Onnx__ModelProto *m = s->model;
    const Onnx__GraphProto *gp = s->graph;
    if (!gp) return est__fail(L->err, EST_EPARSE, "%s: the model has no graph (not an ONNX model?)", L->src);
    g->ir_version = m->has_ir_version ? m->ir_version : 0;
    if (g->ir_version < 3)
        return est__fail(L->err, EST_EPARSE, "%s: IR version %lld is not supported (3 and up are)",
                         L->src, (long long)g->ir_version);
    g->opset = domain_opset(m, "");
    if (g->opset == 0)
        return est__fail(L->err, EST_EUNSUPPORTED, "%s: the model imports no default-domain opset", L->src);
    if (g->opset < 7)
        return est__fail(L->err, EST_EUNSUPPORTED, "%s: opset %lld is not supported (7 and up are)",
                         L->src, (long long)g->opset);
    free(g->name);
    free(g->producer);
    g->name = est__strdup(str_or_empty(gp->name));
    g->producer = est__strdup(str_or_empty(m->producer_name));
    if (!g->name || !g->producer) return oom(L);

    /* Caps before building: est__graph_finish() checks the built graph again. */
    const size_t *count = s->count;
    if (count[EST_ITEM_NODE] > L->lim->max_nodes)
        return est__fail(L->err, EST_ELIMIT, "%s: %zu nodes, above the limit of %llu (est_limits.max_nodes)", L->src,
                         count[EST_ITEM_NODE], (unsigned long long)L->lim->max_nodes);
    size_t tensors = count[EST_ITEM_INITIALIZER] + count[EST_ITEM_SPARSE] + count[EST_ITEM_INPUT];
    if (tensors > L->lim->max_tensors)
        return est__fail(L->err, EST_ELIMIT, "%s: %zu initializers and inputs, above the limit of %llu tensors "
                         "(est_limits.max_tensors)", L->src, tensors, (unsigned long long)L->lim->max_tensors);
    return EST_OK;
}

/* The pages of the arrays the items fill, faulted in on a second thread
 * while they are unpacked: the nodes, as many tensors as one output a node
 * makes (not the reserve's spare eighth), and the name map. A graph that
 * outgrows the reserve moves its tensors meanwhile: populating their old
 * pages then fails, which ends the thread, or finds them mapped anew,
 * whose contents it keeps. */
static void prefault_graph(est_graph *g, const size_t *count, est_prefault *pf) {
    size_t tensors = count[EST_ITEM_INITIALIZER] + count[EST_ITEM_SPARSE] + count[EST_ITEM_INPUT] + count[EST_ITEM_NODE];
    est__prefault_add(pf, g->nodes, (size_t)g->cap_nodes * sizeof *g->nodes);
    est__prefault_add(pf, g->tensors, (tensors < (size_t)g->cap_tensors ? tensors : (size_t)g->cap_tensors) *
                                          sizeof *g->tensors);
    est__prefault_add(pf, g->names.slots, g->names.cap * sizeof *g->names.slots);
    est__prefault_start(pf);
}

static est_status build_graph(loader *L, est_onnx_stream *s) {
    est_graph *g = L->g;
    L->model = s->model;
    est_status st = read_model(L, s);
    /* a node has an output or more: an eighth more spares copying the
     * tensors to a twice larger array when a few nodes have two; pages never
     * written cost nothing */
    const size_t *count = s->count;
    if (st == EST_OK && !est__graph_reserve(g, count[EST_ITEM_NODE], count[EST_ITEM_INITIALIZER] +
                                                count[EST_ITEM_SPARSE] + count[EST_ITEM_INPUT] +
                                                count[EST_ITEM_NODE] + count[EST_ITEM_NODE] / 8))
        st = oom(L);
    est_prefault pf = {0};
    if (st == EST_OK) prefault_graph(g, count, &pf);
    if (st == EST_OK) st = for_each_item(L, s, EST_ITEM_INITIALIZER, initializer_item);
    if (st == EST_OK) st = for_each_item(L, s, EST_ITEM_SPARSE, sparse_item);
    if (st == EST_OK) st = for_each_item(L, s, EST_ITEM_INPUT, input_item);
    if (st == EST_OK) st = for_each_item(L, s, EST_ITEM_NODE, node_item);
    est__prefault_wait(&pf); /* before the passes below move or free the arrays */
    if (st == EST_OK && g->unfolded_batchnorms) st = est__onnx_drop_dead_identities(g, L->err);
    if (st == EST_OK) st = est__onnx_rnn_weights(g, L->err);
    if (st != EST_OK) return st;
    g->outputs = malloc((count[EST_ITEM_OUTPUT] ? count[EST_ITEM_OUTPUT] : 1) * sizeof *g->outputs);
    if (!g->outputs) return oom(L);
    st = for_each_item(L, s, EST_ITEM_OUTPUT, output_item);
    return st == EST_OK ? est__graph_finish(g, L->err) : st;
}

/* ---- nesting ------------------------------------------------------------------
 * protobuf-c's unpack recurses once per nested message, and a hostile file can
 * nest subgraphs (or TypeProtos) thousands deep in a few kilobytes, enough to
 * overflow the stack. This walks the wire format along the schema's message
 * fields first, iteratively within a message and recursing only up to
 * max_nesting. Malformed bytes are left for unpack to reject.
 * The same walk refuses a string field holding a NUL byte: protobuf-c hands
 * strings over as C strings, which end there, so memest would read another
 * name or location than the file holds ("ok\0/../../etc/passwd").
 * NUL bytes are found by memchr within the bytes asked about, from where
 * the walk is on, never again behind it (the walk goes through the file in
 * order), so that every name that ends before the last NUL byte found is
 * passed over. A message of at most WHOLE_CHECK_BYTES that holds none and
 * is too short to nest past the limit (each level takes a key and a length:
 * n bytes nest at most n / 2 deeper) is passed over whole: most of a
 * graph's items are. A longer one is walked, so that the weights in an
 * initializer's bytes are never read (the file's pages stay on disk). */
#define WHOLE_CHECK_BYTES 4096

/* Field `id` of desc, as protobuf_c_message_descriptor_get_field finds it:
 * desc->fields is sorted by id, and ONNX numbers its fields from 1 with few
 * gaps, so field id sits at index id - 1 or a few below. */
static const ProtobufCFieldDescriptor *field_of(const ProtobufCMessageDescriptor *desc, uint64_t id) {
    if (id == 0 || !desc->n_fields) return NULL;
    size_t k = id <= desc->n_fields ? (size_t)id - 1 : desc->n_fields - 1;
    while (k > 0 && desc->fields[k].id > id) k--;
    return desc->fields[k].id == id ? &desc->fields[k] : NULL;
}

/* What check_nesting has looked at: no NUL byte lies from the last place
 * looked from up to clean_to, which is one when at_nul. */
typedef struct nul_finder {
    const uint8_t *clean_to;
    bool at_nul;
} nul_finder;

/* Whether q[0..n) holds a NUL byte; q lies at or after every place asked
 * about before. Reads no byte outside q[0..n), and none twice. */
static bool holds_nul(nul_finder *nf, const uint8_t *q, size_t n) {
    const uint8_t *from = q, *end = q + n;
    if (q <= nf->clean_to) {
        if (end <= nf->clean_to) return false;
        if (nf->at_nul) return true;
        from = nf->clean_to;
    }
    const uint8_t *found = memchr(from, 0, (size_t)(end - from));
    nf->clean_to = found ? found : end;
    nf->at_nul = found != NULL;
    return found != NULL;
}

/* Walks the message p[0..n) of type desc, `depth` deep (the ModelProto is
 * 1); `node` is the index of the graph's node it lies in (-1: none), and
 * *next_node counts the graph's nodes. */
static est_status check_nesting(loader *L, nul_finder *nf, const uint8_t *p, size_t n,
                                const ProtobufCMessageDescriptor *desc, uint32_t depth, long node, long *next_node) {
    size_t i = 0;
    uint64_t last_id = 0; /* repeated fields come in runs: one lookup a run */
    const ProtobufCFieldDescriptor *f = NULL;
    while (i < n) {
        uint64_t key, v;
        size_t body;
        if (!est__wire_field(p, n, &i, &key, &v, &body)) return EST_OK; /* groups or garbage: unpack decides */
        if ((key & 7) == 2) {
            if (key >> 3 != last_id) f = field_of(desc, key >> 3);
            last_id = key >> 3;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                long sub_node = node;
                if (desc == &onnx__graph_proto__descriptor && depth == 2 && f->id == 1) sub_node = (*next_node)++;
                if (depth + 1 > L->lim->max_nesting) {
                    if (node >= 0)
                        return est__fail(L->err, EST_ELIMIT, "%s: node %ld of the graph: messages nested more than "
                                         "%u deep (subgraphs in attributes; est_limits.max_nesting)", L->src, node,
                                         L->lim->max_nesting);
                    return est__fail(L->err, EST_ELIMIT, "%s: messages nested more than %u deep (est_limits.max_nesting)",
                                     L->src, L->lim->max_nesting);
                }
                if (v <= WHOLE_CHECK_BYTES && depth + 1 + v / 2 <= L->lim->max_nesting &&
                    !holds_nul(nf, p + body, (size_t)v))
                    continue;
                est_status st = check_nesting(L, nf, p + body, (size_t)v, (const ProtobufCMessageDescriptor *)f->descriptor,
                                              depth + 1, sub_node, next_node);
                if (st != EST_OK) return st;
            } else if (f && f->type == PROTOBUF_C_TYPE_STRING && holds_nul(nf, p + body, (size_t)v)) {
                const char *msg = desc->short_name ? desc->short_name : "message";
                if (node >= 0)
                    return est__fail(L->err, EST_EPARSE, "%s: node %ld of the graph: a %s's field '%s' holds a NUL "
                                     "byte, which no name or location may", L->src, node, msg, f->name);
                return est__fail(L->err, EST_EPARSE, "%s: a %s's field '%s' holds a NUL byte, which no name or "
                                 "location may", L->src, msg, f->name);
            }
        }
    }
    return EST_OK;
}

est_status est__load_onnx(const void *data, size_t size, const char *name, bool is_path,
                          const est_limits *user_lim, est_graph **out, est_error *err) {
    if (!out) return est__fail(err, EST_EINVAL, "est_load_onnx_buffer: out is NULL");
    *out = NULL;
    const char *src = name ? name : "<memory>";
    if (!data && size) return est__fail(err, EST_EINVAL, "%s: data is NULL", src);
    if (size == 0) return est__fail(err, EST_EPARSE, "%s: the file is empty", src);
    est_limits lim;
    est__limits_resolve(user_lim, &lim);
    if (size > lim.max_file_bytes)
        return est__fail(err, EST_ELIMIT, "%s: %zu bytes, above the limit of %llu (est_limits.max_file_bytes)", src,
                         size, (unsigned long long)lim.max_file_bytes);
    loader L = {.err = err, .src = src, .lim = &lim};
    long next_node = 0; /* check_nesting counts the graph's nodes */
    nul_finder nf = {.clean_to = data, .at_nul = false};
    est_status st = check_nesting(&L, &nf, data, size, &onnx__model_proto__descriptor, 1, -1, &next_node);
    if (st != EST_OK) return st;
    /* the node cap before anything is unpacked (build_graph checks again) */
    if ((uint64_t)next_node > lim.max_nodes)
        return est__fail(err, EST_ELIMIT, "%s: %ld nodes, above the limit of %llu (est_limits.max_nodes)", src,
                         next_node, (unsigned long long)lim.max_nodes);
    est_onnx_stream stream;
    /* weights cut before an item is unpacked, never copied; below 4 MiB
     * there is little to cut and the walk would cost more than the copy */
    if (!est__onnx_stream_open(&stream, data, size, size >= ((size_t)4 << 20))) return not_protobuf(err, src);
    /* External data is relative to the model's folder: the path's, for a file. */
    char *dir = NULL;
    if (is_path && name) {
        const char *slash = strrchr(name, '/');
        size_t len = slash ? (size_t)(slash - name) + (slash == name) : 1;
        if ((dir = malloc(len + 1))) {
            memcpy(dir, slash ? name : ".", len);
            dir[len] = '\0';
        }
    }
    L.dir = dir;
    L.g = est__graph_new(src);
    if (L.g) L.g->limits = lim;
    st = !L.g || (is_path && name && !dir) ? est__fail(err, EST_ENOMEM, "%s: out of memory", src)
                                           : build_graph(&L, &stream);
    /* a whole unpack refuses a corrupt item before anything is built */
    if (st != EST_OK && !L.bad_bytes && !est__onnx_stream_items_unpack(&stream)) st = not_protobuf(err, src);
    est__onnx_stream_close(&stream);
    free(dir);
    free(L.real_dir);
    free(L.checked_loc);
    if (st != EST_OK) {
        est_graph_free(L.g);
        return st;
    }
    *out = L.g;
    return EST_OK;
}

est_status est_load_onnx_buffer_limited(const void *data, size_t size, const char *name, const est_limits *lim,
                                        est_graph **out, est_error *err) {
    return est__load_onnx(data, size, name, false, lim, out, err);
}

est_status est_load_onnx_buffer(const void *data, size_t size, const char *name, est_graph **out,
                                est_error *err) {
    return est__load_onnx(data, size, name, false, NULL, out, err);
}
