/*
 * json_read.c: loading the JSON graph format of docs/json-format.md, for
 * models that exist only on paper (json_write.c writes it).
 *
 * Loading parses the text with cJSON, checks every field, and builds the graph
 * with the same builder functions as the ONNX loader, so both loaders end in
 * est__graph_finish(). Writing prints a graph straight into a malloc'd string,
 * one input, initializer and node per line; what it writes loads back to the
 * same graph.
 *
 * Exactness: cJSON holds numbers as doubles, so integers are exact only up to
 * 2^53 - 1. Larger ones are written as decimal strings ("9223372036854775807"),
 * and infinities and NaN as "inf", "-inf" and "nan". Float attributes and the
 * values of float tensors other than float64 are float32 by ONNX's rules: they
 * are rounded to float32 when loaded and written with the fewest digits that
 * give the same float32 back.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_read.h"

/* ---- duplicate names ------------------------------------------------------- */

typedef struct named_index {
    const char *name;
    size_t index;
} named_index;

static int cmp_named_index(const void *a, const void *b) {
    const named_index *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Finds a repeated name in names[0..n) in O(n log n). Returns 1 and the two
 * indices (*first < *second) if one repeats, 0 if none does, -1 when out of
 * memory. */
int est__json_find_duplicate(const char *const *names, size_t n, size_t *first, size_t *second) {
    if (n < 2) return 0;
    named_index *v = malloc(n * sizeof *v);
    if (!v) return -1;
    for (size_t i = 0; i < n; i++) v[i] = (named_index){names[i], i};
    qsort(v, n, sizeof *v, cmp_named_index);
    int found = 0;
    for (size_t i = 1; i < n && !found; i++)
        if (strcmp(v[i - 1].name, v[i].name) == 0) {
            *first = v[i - 1].index;
            *second = v[i].index;
            found = 1;
        }
    free(v);
    return found;
}

/* ======================================================================== */
/* Loading                                                                  */
/* ======================================================================== */

/* Here: the header, graph inputs, initializers, nodes, graph outputs and the
 * top level. The loader's state is in json_read.h; its error helpers and its
 * readers of fields, numbers and tensor declarations are json_read_values.c,
 * the reader of node attributes json_read_attrs.c. */

/* ---- header ------------------------------------------------------------------------ */

static est_status check_format(json_loader *J, const cJSON *root) {
    const char *format = NULL;
    const cJSON *version = NULL;
    est_status st = est__json_get_string(J, root, "format", true, &format);
    if (st != EST_OK) return st;
    if (strcmp(format, JSON_FORMAT_NAME) != 0)
        return est__json_fail(J, EST_EPARSE, "field 'format' is '%.64s'; a memest graph has \"%s\"", format,
                              JSON_FORMAT_NAME);
    if ((st = est__json_get_required(J, root, "version", &version)) != EST_OK) return st;
    int64_t v = 0;
    if (!cJSON_IsNumber(version) || est__json_int_from_number(version->valuedouble, &v) != NUM_OK || v < 1)
        return est__json_fail(J, EST_EPARSE, "field 'version' must be a positive integer");
    if (v > JSON_FORMAT_VERSION)
        return est__json_fail(J, EST_EUNSUPPORTED, "format version %lld is newer than this memest reads (%d)",
                              (long long)v, JSON_FORMAT_VERSION);
    return EST_OK;
}

static est_status parse_names(json_loader *J, const cJSON *root) {
    const char *name = "", *producer = "";
    est_status st = est__json_get_string(J, root, "name", false, &name);
    if (st == EST_OK) st = est__json_get_string(J, root, "producer", false, &producer);
    if (st != EST_OK) return st;
    char *n = est__strdup(name), *p = est__strdup(producer);
    if (!n || !p) {
        free(n);
        free(p);
        return est__json_oom(J);
    }
    free(J->g->name);
    free(J->g->producer);
    J->g->name = n;
    J->g->producer = p;
    return EST_OK;
}

static est_status check_opset_entry(json_loader *J, const cJSON *entry, const cJSON *opsets) {
    int64_t v = 0;
    if (!cJSON_IsNumber(entry) || est__json_int_from_number(entry->valuedouble, &v) != NUM_OK || v < 1)
        return est__json_fail(J, EST_EPARSE, "opset_import: the version of domain '%.64s' must be a positive integer",
                              key_of(entry));
    bool std = is_default_domain(key_of(entry));
    for (const cJSON *c = opsets->child; c != entry; c = c->next)
        if (strcmp(key_of(c), key_of(entry)) == 0 || (std && is_default_domain(key_of(c))))
            return est__json_fail(J, EST_EPARSE, "opset_import: domain '%.64s' is listed twice", key_of(entry));
    if (std) J->g->opset = (int64_t)entry->valuedouble;
    return EST_OK;
}

static est_status parse_opsets(json_loader *J, const cJSON *root) {
    est_status st = est__json_get_required(J, root, "opset_import", &J->opsets);
    if (st != EST_OK) return st;
    if (!cJSON_IsObject(J->opsets))
        return est__json_fail(J, EST_EPARSE, "field 'opset_import' must be an object such as {\"\": 17}");
    if (cJSON_GetArraySize(J->opsets) > JSON_MAX_DOMAINS)
        return est__json_fail(J, EST_ELIMIT, "opset_import lists more than %d domains", JSON_MAX_DOMAINS);
    for (const cJSON *c = J->opsets->child; c; c = c->next)
        if ((st = check_opset_entry(J, c, J->opsets)) != EST_OK) return st;
    if (J->g->opset == 0)
        return est__json_fail(J, EST_EUNSUPPORTED, "opset_import has no default domain (\"\"), e.g. {\"\": 17}");
    if (J->g->opset < 7)
        return est__json_fail(J, EST_EUNSUPPORTED, "opset %lld is not supported (7 and up are)",
                              (long long)J->g->opset);
    return EST_OK;
}

/* The opset of a node's domain; 0 when the domain is not imported, as ONNX. */
static int64_t domain_opset(const json_loader *J, const char *domain) {
    if (is_default_domain(domain)) return J->g->opset;
    for (const cJSON *c = J->opsets->child; c; c = c->next)
        if (strcmp(key_of(c), domain) == 0) return (int64_t)c->valuedouble;
    return 0;
}

/* ---- inputs and initializers ----------------------------------------------------------- */

static est_status check_new_tensor_name(json_loader *J, const char *name) {
    if (!name[0]) return est__json_fail(J, EST_EPARSE, "field 'name' is empty");
    int32_t t = est__graph_find(J->g, name);
    if (t < 0) return EST_OK;
    const char *was = J->g->tensors[t].kind == EST_T_INPUT ? "a graph input" : "an initializer";
    return est__json_fail(J, EST_EGRAPH, "the name '%.64s' is already used by %s", name, was);
}

static est_status add_graph_input(json_loader *J, const char *name, int32_t *out) {
    est_graph *g = J->g;
    int32_t *grown = realloc(g->inputs, (size_t)(g->n_inputs + 1) * sizeof *grown);
    if (!grown) return est__json_oom(J);
    g->inputs = grown;
    if ((*out = est__graph_tensor(g, name)) < 0) return est__json_oom(J);
    g->inputs[g->n_inputs++] = *out;
    g->tensors[*out].kind = EST_T_INPUT;
    return EST_OK;
}

static est_status parse_input(json_loader *J, const cJSON *obj, int index) {
    static const char *const fields[] = {"name", "dtype", "dims", "comment", NULL};
    est__json_set_where(J, "graph input %d", index);
    if (!cJSON_IsObject(obj)) return est__json_fail(J, EST_EPARSE, "must be an object");
    const char *name = NULL;
    const cJSON *dims = NULL;
    est_dtype dtype;
    est_status st = est__json_get_string(J, obj, "name", true, &name);
    if (st != EST_OK) return st;
    est__json_set_where(J, "graph input '%.80s'", name);
    if ((st = est__json_check_fields(J, obj, fields)) != EST_OK) return st;
    if ((st = check_new_tensor_name(J, name)) != EST_OK) return st;
    if ((st = est__json_parse_dtype(J, obj, &dtype)) != EST_OK) return st;
    if ((st = est__json_get_array(J, obj, "dims", true, &dims)) != EST_OK) return st;
    int32_t t = -1;
    if ((st = add_graph_input(J, name, &t)) != EST_OK) return st;
    J->g->tensors[t].dtype = dtype;
    return est__json_parse_input_dims(J, dims, &J->g->tensors[t]);
}

static est_status add_initializer(json_loader *J, const char *name, tensor_decl *decl) {
    int32_t t = est__graph_tensor(J->g, name);
    if (t < 0) return est__json_oom(J);
    est_tensor *tt = &J->g->tensors[t];
    tt->kind = EST_T_INITIALIZER;
    tt->dtype = decl->dtype;
    tt->rank = decl->rank;
    if (decl->rank && !(tt->dims = est__graph_dims(J->g, (size_t)decl->rank))) return est__json_oom(J);
    for (int32_t d = 0; d < decl->rank; d++) tt->dims[d] = (est_dimdecl){decl->dims[d], -1};
    tt->value = decl->value; /* the graph owns it from here */
    decl->value = NULL;
    return EST_OK;
}

static est_status parse_initializer(json_loader *J, const cJSON *obj, int index) {
    static const char *const fields[] = {"name", "dtype", "dims", "values", "comment", NULL};
    est__json_set_where(J, "initializer %d", index);
    if (!cJSON_IsObject(obj)) return est__json_fail(J, EST_EPARSE, "must be an object");
    const char *name = NULL;
    est_status st = est__json_get_string(J, obj, "name", true, &name);
    if (st != EST_OK) return st;
    est__json_set_where(J, "initializer '%.80s'", name);
    if ((st = est__json_check_fields(J, obj, fields)) != EST_OK) return st;
    if ((st = check_new_tensor_name(J, name)) != EST_OK) return st;
    tensor_decl decl = {0};
    st = est__json_parse_tensor_decl(J, obj, &decl);
    if (st == EST_OK) st = add_initializer(J, name, &decl);
    est__const_free(decl.value);
    return st;
}

typedef est_status (*item_parser)(json_loader *J, const cJSON *item, int index);

static est_status parse_list(json_loader *J, const cJSON *root, const char *key, bool required,
                             item_parser parse) {
    const cJSON *arr = NULL;
    est_status st = est__json_get_array(J, root, key, required, &arr);
    if (st != EST_OK || !arr) return st;
    int index = 0;
    for (const cJSON *item = arr->child; item; item = item->next, index++)
        if ((st = parse(J, item, index)) != EST_OK) return st;
    J->where[0] = '\0';
    return EST_OK;
}

/* ---- nodes ------------------------------------------------------------------------------------ */

/* Node inputs or outputs: tensor names, "" for an omitted optional one. */
static est_status parse_io(json_loader *J, const cJSON *obj, const char *key, bool required,
                           int32_t **ids, int32_t *n) {
    const cJSON *arr = NULL;
    est_status st = est__json_get_array(J, obj, key, required, &arr);
    if (st != EST_OK) return st;
    int count = arr ? cJSON_GetArraySize(arr) : 0;
    if (count > EST_MAX_IO) return est__json_fail(J, EST_ELIMIT, "more than %d %s", EST_MAX_IO, key);
    if (!(*ids = est__graph_ids(J->g, (size_t)count))) return est__json_oom(J);
    for (const cJSON *item = arr ? arr->child : NULL; item; item = item->next) {
        if (!cJSON_IsString(item))
            return est__json_fail(J, EST_EPARSE, "%s %d must be a tensor name (a string; \"\" when omitted)",
                                  key[0] == 'i' ? "input" : "output", (int)*n);
        int32_t t = -1;
        if (item->valuestring[0] && (t = est__graph_tensor(J->g, item->valuestring)) < 0) return est__json_oom(J);
        (*ids)[(*n)++] = t;
    }
    return EST_OK;
}

static est_status set_node_names(json_loader *J, est_node *n, const char *name, const char *op,
                                 const char *domain, int index) {
    char generated[96];
    if (!name) { /* unnamed, as the ONNX loader names it */
        snprintf(generated, sizeof generated, "%.60s_%d", op, index);
        name = generated;
    }
    if (!(n->name = est__graph_text(J->g, name)) || !(n->op_type = est__graph_intern(J->g, op)) ||
        !(n->domain = est__graph_intern(J->g, domain)))
        return est__json_oom(J);
    n->opset = domain_opset(J, domain);
    return EST_OK;
}

static est_status parse_node(json_loader *J, const cJSON *obj, int index) {
    static const char *const fields[] = {"name", "op", "domain", "scope", "inputs", "outputs", "attributes",
                                         "comment", NULL};
    est__json_set_where(J, "node %d", index);
    if (!cJSON_IsObject(obj)) return est__json_fail(J, EST_EPARSE, "must be an object");
    const char *name = NULL, *op = NULL, *domain = "";
    est_status st = est__json_get_string(J, obj, "name", false, &name);
    if (st != EST_OK) return st;
    if (name && !name[0]) return est__json_fail(J, EST_EPARSE, "field 'name' is empty (leave it out instead)");
    if (name) est__json_set_where(J, "node %d '%.80s'", index, name);
    if ((st = est__json_get_string(J, obj, "op", true, &op)) != EST_OK) return st;
    if (!op[0]) return est__json_fail(J, EST_EPARSE, "field 'op' is empty");
    if (name) est__json_set_where(J, "node %d '%.80s' (%.40s)", index, name, op);
    else est__json_set_where(J, "node %d (%.40s)", index, op);
    if ((st = est__json_check_fields(J, obj, fields)) != EST_OK) return st;
    if ((st = est__json_get_string(J, obj, "domain", false, &domain)) != EST_OK) return st;
    const char *scope = NULL; /* the module path the node ran in (docs/json-format.md) */
    if ((st = est__json_get_string(J, obj, "scope", false, &scope)) != EST_OK) return st;
    est_node *n = est__graph_add_node(J->g);
    if (!n) return est__json_oom(J);
    st = set_node_names(J, n, name, op, domain, index);
    if (st == EST_OK && scope && !(n->scope = est__graph_intern(J->g, scope))) st = est__json_oom(J);
    if (st == EST_OK) st = parse_io(J, obj, "inputs", false, &n->inputs, &n->n_inputs);
    if (st == EST_OK) st = parse_io(J, obj, "outputs", true, &n->outputs, &n->n_outputs);
    if (st == EST_OK) st = est__json_parse_attrs(J, obj, n);
    return st;
}

/* Node names label the report and every error, so they must be unique. */
static est_status check_node_names(json_loader *J) {
    est_graph *g = J->g;
    const char **names = malloc((size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof *names);
    if (!names) return est__json_oom(J);
    for (int32_t i = 0; i < g->n_nodes; i++) names[i] = g->nodes[i].name;
    size_t first, second;
    int dup = est__json_find_duplicate(names, (size_t)g->n_nodes, &first, &second);
    free(names);
    if (dup < 0) return est__json_oom(J);
    if (!dup) return EST_OK;
    const est_node *n = &g->nodes[second];
    est__json_set_where(J, "node %zu '%.80s' (%.40s)", second, n->name, n->op_type);
    return est__json_fail(J, EST_EGRAPH, "the node name is already used by node %zu", first);
}

/* ---- graph outputs ------------------------------------------------------------------------------ */

static est_status parse_outputs(json_loader *J, const cJSON *root) {
    const cJSON *arr = NULL;
    est_status st = est__json_get_array(J, root, "outputs", true, &arr);
    if (st != EST_OK) return st;
    int count = cJSON_GetArraySize(arr), k = 0;
    est_graph *g = J->g;
    if (!(g->outputs = malloc((size_t)(count ? count : 1) * sizeof *g->outputs))) return est__json_oom(J);
    for (const cJSON *item = arr->child; item; item = item->next, k++) {
        if (!cJSON_IsString(item) || !item->valuestring[0])
            return est__json_fail(J, EST_EPARSE, "graph output %d must be a tensor name", k);
        int32_t t = est__graph_find(g, item->valuestring);
        if (t < 0)
            return est__json_fail(J, EST_EGRAPH, "graph output '%.80s' is not produced by any node, graph input "
                                  "or initializer", item->valuestring);
        g->outputs[g->n_outputs++] = t;
    }
    return EST_OK;
}

/* ---- top level --------------------------------------------------------------------------------- */

/* Depth of nested arrays and objects; cJSON stops parsing at 1000 levels, so
 * this recursion is bounded. */
static uint32_t nesting(const cJSON *item) {
    uint32_t deepest = 0;
    for (const cJSON *c = item->child; c; c = c->next) {
        uint32_t d = nesting(c);
        if (d > deepest) deepest = d;
    }
    return item->child || cJSON_IsArray(item) || cJSON_IsObject(item) ? deepest + 1 : 0;
}

static est_status check_sizes(json_loader *J, const cJSON *root) {
    const est_limits *lim = &J->g->limits;
    uint32_t depth = nesting(root);
    if (depth > lim->max_nesting)
        return est__json_fail(J, EST_ELIMIT, "arrays and objects nested %u deep, above the limit of %u "
                              "(est_limits.max_nesting)", depth, lim->max_nesting);
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
    uint64_t n_nodes = cJSON_IsArray(nodes) ? (uint64_t)cJSON_GetArraySize(nodes) : 0;
    if (n_nodes > lim->max_nodes)
        return est__json_fail(J, EST_ELIMIT, "%llu nodes, above the limit of %llu (est_limits.max_nodes)",
                              (unsigned long long)n_nodes, (unsigned long long)lim->max_nodes);
    uint64_t n_tensors = 0;
    static const char *const lists[] = {"inputs", "initializers"};
    for (int i = 0; i < 2; i++) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, lists[i]);
        if (cJSON_IsArray(arr)) n_tensors += (uint64_t)cJSON_GetArraySize(arr);
    }
    if (n_tensors > lim->max_tensors)
        return est__json_fail(J, EST_ELIMIT, "%llu inputs and initializers, above the limit of %llu tensors "
                              "(est_limits.max_tensors)", (unsigned long long)n_tensors,
                              (unsigned long long)lim->max_tensors);
    return EST_OK;
}

static est_status build_graph(json_loader *J, const cJSON *root) {
    static const char *const fields[] = {"format", "version", "name", "producer", "opset_import", "inputs",
                                         "initializers", "nodes", "outputs", "comment", NULL};
    if (!cJSON_IsObject(root)) return est__json_fail(J, EST_EPARSE, "the top level must be a JSON object");
    est_status st = check_sizes(J, root);
    if (st == EST_OK) st = est__json_check_fields(J, root, fields);
    if (st == EST_OK) st = check_format(J, root);
    if (st == EST_OK) st = parse_names(J, root);
    if (st == EST_OK) st = parse_opsets(J, root);
    if (st == EST_OK) st = parse_list(J, root, "inputs", true, parse_input);
    if (st == EST_OK) st = parse_list(J, root, "initializers", false, parse_initializer);
    if (st == EST_OK) st = parse_list(J, root, "nodes", true, parse_node);
    if (st == EST_OK) st = check_node_names(J);
    if (st == EST_OK) {
        J->where[0] = '\0';
        st = parse_outputs(J, root);
    }
    return st == EST_OK ? est__graph_finish(J->g, J->err) : st;
}

static bool is_blank(const char *text, size_t size) {
    for (size_t i = 0; i < size; i++)
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r' && text[i] != '\n') return false;
    return true;
}

/* "line 3, column 14 (byte 52), near '...'" for a syntax error at `at`. */
static est_status syntax_error(const char *text, size_t size, size_t at, const char *src, const char *what,
                               est_error *err) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at; i++) {
        column = text[i] == '\n' ? 1 : column + 1;
        line += text[i] == '\n';
    }
    char near[24];
    size_t k = 0;
    for (; k < sizeof near - 1 && at + k < size && text[at + k] != '\n'; k++) {
        unsigned char c = (unsigned char)text[at + k];
        near[k] = c >= 32 && c < 127 ? (char)c : '?';
    }
    near[k] = '\0';
    return est__fail(err, EST_EPARSE, "%s: %s at line %zu, column %zu (byte %zu), near '%s'", src, what, line,
                     column, at, near);
}

/* The elements of the top-level object's "nodes" array, counted in one pass
 * over the text before cJSON builds a tree of it all (a 720 MB file would be
 * parsed before its node count was refused); stops past `cap`. Malformed
 * text is counted as far as it goes: the parse says what is wrong. */
static uint64_t count_nodes(const char *text, size_t size, uint64_t cap) {
    int depth = 0;
    bool in_nodes = false, key_nodes = false;
    uint64_t n = 0;
    for (size_t i = 0; i < size && n <= cap; i++) {
        char c = text[i];
        if (c == '"') {
            size_t start = ++i;
            while (i < size && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
            if (i >= size) break; /* unterminated (an escape may step past the end): the parse says so */
            if (depth == 1) key_nodes = i - start == 5 && memcmp(text + start, "nodes", 5) == 0;
            continue;
        }
        if (c == '{' || c == '[') {
            if (depth == 1 && c == '[' && key_nodes) in_nodes = true;
            else if (depth == 2 && in_nodes && c == '{') n++;
            depth++;
        } else if (c == '}' || c == ']') {
            depth--;
            if (depth == 1) in_nodes = false;
        } else if (c == ',' && depth == 1) {
            key_nodes = false;
        }
    }
    return n;
}

/* cJSON writes its global error position (the one cJSON_GetErrorPtr()
 * reads) on every parse: the library's only shared mutable state, so parses
 * take turns. */
static pthread_mutex_t cjson_parse_lock = PTHREAD_MUTEX_INITIALIZER;

/* Parses exactly `size` bytes (no NUL needed) as one JSON value. */
static est_status parse_text(const char *text, size_t size, const char *src, cJSON **out, est_error *err) {
    /* The parse end comes back through the argument, not from the global. */
    const char *end = NULL;
    pthread_mutex_lock(&cjson_parse_lock);
    *out = cJSON_ParseWithLengthOpts(text, size, &end, 0);
    pthread_mutex_unlock(&cjson_parse_lock);
    size_t at = end && end >= text && end <= text + size ? (size_t)(end - text) : 0;
    if (!*out) return syntax_error(text, size, at, src, "invalid JSON (or out of memory)", err);
    while (at < size && (text[at] == ' ' || text[at] == '\t' || text[at] == '\r' || text[at] == '\n')) at++;
    if (at == size) return EST_OK;
    cJSON_Delete(*out);
    *out = NULL;
    return syntax_error(text, size, at, src, "unexpected text after the graph", err);
}

est_status est_load_json_buffer(const char *text, size_t size, const char *name, est_graph **out,
                                est_error *err) {
    return est__load_json(text, size, name, NULL, out, err);
}

est_status est_load_json_buffer_limited(const char *text, size_t size, const char *name, const est_limits *lim,
                                        est_graph **out, est_error *err) {
    return est__load_json(text, size, name, lim, out, err);
}

est_status est__load_json(const char *text, size_t size, const char *name, const est_limits *user_lim,
                          est_graph **out, est_error *err) {
    if (!out) return est__fail(err, EST_EINVAL, "est_load_json_buffer: out is NULL");
    *out = NULL;
    const char *src = name ? name : "<memory>";
    if (!text && size) return est__fail(err, EST_EINVAL, "%s: text is NULL", src);
    est_limits lim;
    est__limits_resolve(user_lim, &lim);
    if (size > lim.max_file_bytes)
        return est__fail(err, EST_ELIMIT, "%s: %zu bytes, above the limit of %llu (est_limits.max_file_bytes)", src,
                         size, (unsigned long long)lim.max_file_bytes);
    if (size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) text += 3, size -= 3; /* a UTF-8 byte-order mark */
    if (is_blank(text, size)) return est__fail(err, EST_EPARSE, "%s: the file is empty", src);
    uint64_t nodes = count_nodes(text, size, lim.max_nodes);
    if (nodes > lim.max_nodes)
        return est__fail(err, EST_ELIMIT, "%s: more than %llu nodes (est_limits.max_nodes), refused before parsing",
                         src, (unsigned long long)lim.max_nodes);
    cJSON *root = NULL;
    est_status st = parse_text(text, size, src, &root, err);
    if (st != EST_OK) return st;
    json_loader J = {.g = est__graph_new(src), .err = err, .src = src};
    if (J.g) J.g->limits = lim;
    st = J.g ? build_graph(&J, root) : est__fail(err, EST_ENOMEM, "%s: out of memory", src);
    cJSON_Delete(root);
    if (st != EST_OK) {
        est_graph_free(J.g);
        return st;
    }
    *out = J.g;
    return EST_OK;
}

