/*
 * json_write.c: writing a graph in the JSON graph format of
 * docs/json-format.md (json_read.c loads it): straight into a malloc'd
 * string, one input, initializer and node per line; what it writes loads
 * back to the same graph. Integers above 2^53 - 1 are written as decimal
 * strings, infinities and NaN as "inf", "-inf" and "nan", float32 values
 * with the fewest digits that give the same float32 back.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "json_format.h"

/* ======================================================================== */
/* Writing                                                                  */
/* ======================================================================== */

/* A growing string; after an allocation failure it stops growing and only
 * `failed` is set, so writers check once at the end. */
typedef struct text_buf {
    char *data;
    size_t len, cap;
    bool failed;
} text_buf;

static void put_n(text_buf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void put(text_buf *b, const char *s) { put_n(b, s, strlen(s)); }

static void put_string(text_buf *b, const char *s) {
    put(b, "\"");
    for (const char *run = s;; s++) {
        unsigned char c = (unsigned char)*s;
        if (c && c != '"' && c != '\\' && c >= 0x20) continue;
        put_n(b, run, (size_t)(s - run));
        if (!c) break;
        char esc[8];
        if (c == '"' || c == '\\') snprintf(esc, sizeof esc, "\\%c", c);
        else if (c == '\n') snprintf(esc, sizeof esc, "\\n");
        else if (c == '\t') snprintf(esc, sizeof esc, "\\t");
        else snprintf(esc, sizeof esc, "\\u%04x", c);
        put(b, esc);
        run = s + 1;
    }
    put(b, "\"");
}

static void put_int(text_buf *b, int64_t v) {
    char buf[32];
    bool exact = v >= -JSON_EXACT_INT_MAX && v <= JSON_EXACT_INT_MAX;
    snprintf(buf, sizeof buf, exact ? "%lld" : "\"%lld\"", (long long)v);
    put(b, buf);
}

/* The fewest digits that read back to the same value: the same float32 when
 * `single`, the same double otherwise. */
static void put_real(text_buf *b, double v, bool single) {
    if (isnan(v) || isinf(v)) {
        put(b, isnan(v) ? "\"nan\"" : v > 0 ? "\"inf\"" : "\"-inf\"");
        return;
    }
    char buf[40];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        double back = strtod(buf, NULL);
        if (single ? (float)back == (float)v : back == v) break;
    }
    for (char *p = buf; *p; p++) /* a locale's decimal comma is not JSON */
        if (*p != '-' && *p != '+' && *p != 'e' && (*p < '0' || *p > '9')) *p = '.';
    put(b, buf);
}

static void put_key(text_buf *b, const char *key) {
    put_string(b, key);
    put(b, ": ");
}

static void put_dims(text_buf *b, const int64_t *dims, int32_t rank) {
    put(b, "[");
    for (int32_t d = 0; d < rank; d++) {
        if (d) put(b, ", ");
        put_int(b, dims[d]);
    }
    put(b, "]");
}

static void put_values(text_buf *b, const est_const *c) {
    put(b, "[");
    for (int64_t k = 0; k < c->count; k++) {
        if (k) put(b, ", ");
        if (c->f64) put_real(b, c->f64[k], holds_single(c->dtype));
        else put_int(b, c->i64[k]);
    }
    put(b, "]");
}

/* "dtype", "dims" and, when kept, "values": the body of an initializer or a
 * tensor attribute. */
static void put_tensor_body(text_buf *b, est_dtype dtype, const int64_t *dims, int32_t rank,
                            const est_const *value) {
    put_key(b, "dtype");
    put_string(b, est_dtype_name(dtype));
    put(b, ", ");
    put_key(b, "dims");
    put_dims(b, dims, rank);
    if (value) {
        put(b, ", ");
        put_key(b, "values");
        put_values(b, value);
    }
}

static void put_attr_value(text_buf *b, const est_attr *a) {
    switch (a->type) {
    case EST_ATTR_INT: put_int(b, a->i); break;
    case EST_ATTR_FLOAT: put_real(b, a->f, true); break;
    case EST_ATTR_STRING: put_string(b, a->s ? a->s : ""); break;
    case EST_ATTR_INTS: put_dims(b, a->ints, (int32_t)a->n); break;
    case EST_ATTR_FLOATS:
        put(b, "[");
        for (int64_t k = 0; k < a->n; k++) {
            if (k) put(b, ", ");
            put_real(b, a->floats[k], true);
        }
        put(b, "]");
        break;
    case EST_ATTR_STRINGS:
        put(b, "[");
        for (int64_t k = 0; k < a->n; k++) {
            if (k) put(b, ", ");
            put_string(b, a->strings[k] ? a->strings[k] : "");
        }
        put(b, "]");
        break;
    case EST_ATTR_TENSOR:
        put(b, "{");
        put_tensor_body(b, a->t_dtype, a->t_dims, a->t_rank, a->t_value);
        put(b, "}");
        break;
    default: put(b, "null"); break;
    }
}

static void put_attrs(text_buf *b, const est_node *n) {
    put(b, "{");
    for (int32_t k = 0; k < n->n_attrs; k++) {
        const est_attr *a = &n->attrs[k];
        if (k) put(b, ", ");
        put_key(b, a->name);
        put(b, "{");
        put_key(b, attr_kind_of_type(a->type)->key); /* checked by check_writable */
        put_attr_value(b, a);
        put(b, "}");
    }
    put(b, "}");
}

static void put_tensor_names(text_buf *b, const est_graph *g, const int32_t *ids, int32_t n) {
    put(b, "[");
    for (int32_t k = 0; k < n; k++) {
        if (k) put(b, ", ");
        put_string(b, ids[k] >= 0 ? g->tensors[ids[k]].name : "");
    }
    put(b, "]");
}

static void put_node(text_buf *b, const est_node *n, const est_graph *g) {
    put(b, "{");
    put_key(b, "name");
    put_string(b, n->name);
    put(b, ", ");
    put_key(b, "op");
    put_string(b, n->op_type);
    if (n->domain[0]) {
        put(b, ", ");
        put_key(b, "domain");
        put_string(b, n->domain);
    }
    if (n->scope) {
        put(b, ", ");
        put_key(b, "scope");
        put_string(b, n->scope);
    }
    put(b, ", ");
    put_key(b, "inputs");
    put_tensor_names(b, g, n->inputs, n->n_inputs);
    put(b, ", ");
    put_key(b, "outputs");
    put_tensor_names(b, g, n->outputs, n->n_outputs);
    if (n->n_attrs) {
        put(b, ", ");
        put_key(b, "attributes");
        put_attrs(b, n);
    }
    put(b, "}");
}

static void put_input(text_buf *b, const est_tensor *t, const est_graph *g) {
    put(b, "{");
    put_key(b, "name");
    put_string(b, t->name);
    put(b, ", ");
    put_key(b, "dtype");
    put_string(b, est_dtype_name(t->dtype));
    put(b, ", ");
    put_key(b, "dims");
    put(b, "[");
    for (int32_t d = 0; d < t->rank; d++) {
        if (d) put(b, ", ");
        if (t->dims[d].value >= 0) put_int(b, t->dims[d].value);
        else if (t->dims[d].sym >= 0) put_string(b, g->symbols[t->dims[d].sym]);
        else put(b, "null");
    }
    put(b, "]}");
}

static void put_initializer(text_buf *b, const est_tensor *t) {
    int64_t dims[EST_MAX_RANK];
    for (int32_t d = 0; d < t->rank; d++) dims[d] = t->dims[d].value;
    put(b, "{");
    put_key(b, "name");
    put_string(b, t->name);
    put(b, ", ");
    put_tensor_body(b, t->dtype, dims, t->rank, t->value);
    put(b, "}");
}

/* Opens a top-level list member: one element per line follows. */
static void open_list(text_buf *b, const char *key) {
    put(b, ",\n  ");
    put_key(b, key);
    put(b, "[");
}

static void list_item(text_buf *b, bool first) { put(b, first ? "\n    " : ",\n    "); }

static void close_list(text_buf *b, bool empty) { put(b, empty ? "]" : "\n  ]"); }

/* Every non-default domain the nodes use, in order of first use, with its
 * opset. Returns false when there are more than the format allows. */
typedef struct domain_list {
    int n;
    const char *names[JSON_MAX_DOMAINS];
    int64_t opsets[JSON_MAX_DOMAINS];
} domain_list;

static bool collect_domains(const est_graph *g, domain_list *list) {
    list->n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_node *n = &g->nodes[i];
        if (is_default_domain(n->domain) || n->opset <= 0) continue; /* 0: not imported */
        int k = 0;
        while (k < list->n && strcmp(list->names[k], n->domain) != 0) k++;
        if (k < list->n) continue;
        if (list->n + 1 >= JSON_MAX_DOMAINS) return false; /* the default domain takes one */
        list->names[list->n] = n->domain;
        list->opsets[list->n++] = n->opset;
    }
    return true;
}

static void put_opsets(text_buf *b, const est_graph *g, const domain_list *domains) {
    put(b, ",\n  ");
    put_key(b, "opset_import");
    put(b, "{\"\": ");
    put_int(b, g->opset);
    for (int k = 0; k < domains->n; k++) {
        put(b, ", ");
        put_key(b, domains->names[k]);
        put_int(b, domains->opsets[k]);
    }
    put(b, "}");
}

static void put_header(text_buf *b, const est_graph *g, const domain_list *domains) {
    put(b, "{\n  ");
    put_key(b, "format");
    put_string(b, JSON_FORMAT_NAME);
    put(b, ",\n  ");
    put_key(b, "version");
    put_int(b, JSON_FORMAT_VERSION);
    put(b, ",\n  ");
    put_key(b, "name");
    put_string(b, g->name);
    if (g->producer[0]) {
        put(b, ",\n  ");
        put_key(b, "producer");
        put_string(b, g->producer);
    }
    put_opsets(b, g, domains);
}

static void put_graph(text_buf *b, const est_graph *g, const domain_list *domains) {
    put_header(b, g, domains);
    open_list(b, "inputs");
    for (int32_t i = 0; i < g->n_inputs; i++) {
        list_item(b, i == 0);
        put_input(b, &g->tensors[g->inputs[i]], g);
    }
    close_list(b, g->n_inputs == 0);
    open_list(b, "initializers");
    bool first = true;
    for (int32_t t = 0; t < g->n_tensors; t++) {
        if (g->tensors[t].kind != EST_T_INITIALIZER) continue;
        list_item(b, first);
        put_initializer(b, &g->tensors[t]);
        first = false;
    }
    close_list(b, first);
    open_list(b, "nodes");
    for (int32_t i = 0; i < g->n_nodes; i++) {
        list_item(b, i == 0);
        put_node(b, &g->nodes[i], g);
    }
    close_list(b, g->n_nodes == 0);
    put(b, ",\n  ");
    put_key(b, "outputs");
    put_tensor_names(b, g, g->outputs, g->n_outputs);
    put(b, "\n}\n");
}

/* ---- what the format cannot hold --------------------------------------------------------------- */

static bool dims_exact(const int64_t *dims, int32_t rank) {
    for (int32_t d = 0; d < rank; d++)
        if (dims[d] > JSON_EXACT_INT_MAX) return false;
    return true;
}

static est_status check_writable_attrs(const est_graph *g, const est_node *n, est_error *err) {
    const char **names = malloc((size_t)(n->n_attrs ? n->n_attrs : 1) * sizeof *names);
    if (!names) return est__fail(err, EST_ENOMEM, "out of memory writing JSON");
    est_status st = EST_OK;
    for (int32_t k = 0; k < n->n_attrs && st == EST_OK; k++) {
        const est_attr *a = &n->attrs[k];
        names[k] = a->name;
        if (!a->name[0] || !attr_kind_of_type(a->type) || a->type == EST_ATTR_UNDEFINED)
            st = est__fail(err, EST_EATTR, "%s: node '%s' (%s): attribute '%s' has a name or type (%d) that "
                           "the JSON format cannot hold", g->source, n->name, n->op_type, a->name, (int)a->type);
        else if (a->type == EST_ATTR_TENSOR && !dims_exact(a->t_dims, a->t_rank))
            st = est__fail(err, EST_ELIMIT, "%s: node '%s' (%s): attribute '%s' has a dim above 2^53",
                           g->source, n->name, n->op_type, a->name);
    }
    size_t first, second;
    int dup = st == EST_OK ? est__json_find_duplicate(names, (size_t)n->n_attrs, &first, &second) : 0;
    if (dup < 0) st = est__fail(err, EST_ENOMEM, "out of memory writing JSON");
    if (dup > 0)
        st = est__fail(err, EST_EATTR, "%s: node '%s' (%s): attribute '%s' appears twice; the JSON format "
                       "needs unique attribute names", g->source, n->name, n->op_type, names[first]);
    free(names);
    return st;
}

static est_status check_writable_nodes(const est_graph *g, est_error *err) {
    const char **names = malloc((size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof *names);
    if (!names) return est__fail(err, EST_ENOMEM, "out of memory writing JSON");
    for (int32_t i = 0; i < g->n_nodes; i++) names[i] = g->nodes[i].name;
    size_t first, second;
    int dup = est__json_find_duplicate(names, (size_t)g->n_nodes, &first, &second);
    est_status st = EST_OK;
    if (dup < 0) st = est__fail(err, EST_ENOMEM, "out of memory writing JSON");
    if (dup > 0)
        st = est__fail(err, EST_EGRAPH, "%s: node name '%s' is used by two nodes; the JSON format needs "
                       "unique node names", g->source, names[first]);
    free(names);
    for (int32_t i = 0; i < g->n_nodes && st == EST_OK; i++) st = check_writable_attrs(g, &g->nodes[i], err);
    return st;
}

static est_status check_writable_initializers(const est_graph *g, est_error *err) {
    for (int32_t t = 0; t < g->n_tensors; t++) {
        const est_tensor *tt = &g->tensors[t];
        if (tt->kind != EST_T_INITIALIZER) continue;
        for (int32_t d = 0; d < tt->rank; d++)
            if (tt->dims[d].value > JSON_EXACT_INT_MAX)
                return est__fail(err, EST_ELIMIT, "%s: initializer '%s' has a dim above 2^53", g->source, tt->name);
    }
    return EST_OK;
}

est_status est_graph_to_json(const est_graph *g, char **out, est_error *err) {
    if (!out) return est__fail(err, EST_EINVAL, "est_graph_to_json: out is NULL");
    *out = NULL;
    if (!g) return est__fail(err, EST_EINVAL, "est_graph_to_json: graph is NULL");
    domain_list *domains = malloc(sizeof *domains);
    if (!domains) return est__fail(err, EST_ENOMEM, "%s: out of memory writing JSON", g->source);
    est_status st = check_writable_initializers(g, err);
    if (st == EST_OK) st = check_writable_nodes(g, err);
    if (st == EST_OK && !collect_domains(g, domains))
        st = est__fail(err, EST_ELIMIT, "%s: the graph uses more than %d opset domains", g->source,
                       JSON_MAX_DOMAINS);
    if (st != EST_OK) {
        free(domains);
        return st;
    }
    text_buf b = {0};
    put_graph(&b, g, domains);
    free(domains);
    if (b.failed) {
        free(b.data);
        return est__fail(err, EST_ENOMEM, "%s: out of memory writing JSON", g->source);
    }
    *out = b.data; /* the caller frees it with est_free() */
    return EST_OK;
}
