/*
 * test_json: the JSON graph format (docs/json-format.md).
 *
 *  - round trip: every ONNX model in ONNX_DIR and every JSON model in models/
 *    loads, is written, reloaded and written again to identical text; the
 *    reloaded graph equals the original field by field; and where the original
 *    estimates, the reloaded one gives the same layers, shapes and counts.
 *  - the complete example of docs/json-format.md loads.
 *  - what the base document below holds reads back as written, every
 *    attribute type included.
 *  - each malformed variant of it fails with the expected code and a message
 *    that names the node or field.
 *  - allocation failures: each allocation of a load and of a write fails in
 *    turn; every call must fail cleanly (run under valgrind or ASan to see
 *    leaks).
 *
 * usage: test_json ONNX_DIR SOURCE_DIR
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cJSON.h"
#include "ir.h"

static int checks, failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        checks++;                                                              \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                        \
            printf(__VA_ARGS__);                                               \
            printf("\n");                                                      \
        }                                                                      \
    } while (0)

/* ---- allocation failures ------------------------------------------------------ */

#ifdef TEST_JSON_WRAP_ALLOC
#define TEST_WRAP_ALLOC
#endif
#include "alloc_fail.h" /* the --wrap helpers: alloc_countdown, alloc_failed, hook_malloc */

/* ---- files ---------------------------------------------------------------------- */

static char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap + 1);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *grown = realloc(buf, (cap *= 2) + 1);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    *size = n;
    return buf;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Paths of the files in dir whose names end in `suffix`, sorted; NULL-terminated. */
static char **list_files(const char *dir, const char *suffix, size_t *count) {
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **paths = calloc(1, sizeof *paths);
    struct dirent *e;
    while (paths && (e = readdir(d))) {
        size_t len = strlen(e->d_name), sl = strlen(suffix);
        if (len < sl || strcmp(e->d_name + len - sl, suffix) != 0) continue;
        char **grown = realloc(paths, (*count + 2) * sizeof *paths);
        if (!grown) break;
        paths = grown;
        size_t plen = strlen(dir) + len + 2;
        if (!(paths[*count] = malloc(plen))) break;
        snprintf(paths[*count], plen, "%s/%s", dir, e->d_name);
        paths[++*count] = NULL;
    }
    closedir(d);
    if (paths) qsort(paths, *count, sizeof *paths, cmp_str);
    return paths;
}

static void free_list(char **paths) {
    for (size_t i = 0; paths && paths[i]; i++) free(paths[i]);
    free(paths);
}

/* ---- graph equality ---------------------------------------------------------------- */

static bool same_real(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

static bool same_const(const est_const *a, const est_const *b) {
    if (!a || !b) return a == b;
    if (a->dtype != b->dtype || a->count != b->count || !a->f64 != !b->f64) return false;
    for (int64_t k = 0; k < a->count; k++)
        if (a->f64 ? !same_real(a->f64[k], b->f64[k]) : a->i64[k] != b->i64[k]) return false;
    return true;
}

static const char *tensor_name(const est_graph *g, int32_t t) { return t >= 0 ? g->tensors[t].name : ""; }
static const char *node_name(const est_graph *g, int32_t i) { return i >= 0 ? g->nodes[i].name : ""; }

static bool same_attr(const est_attr *a, const est_attr *b) {
    if (strcmp(a->name, b->name) != 0 || a->type != b->type) return false;
    switch (a->type) {
    case EST_ATTR_INT: return a->i == b->i;
    case EST_ATTR_FLOAT: return same_real(a->f, b->f);
    case EST_ATTR_STRING: return strcmp(a->s, b->s) == 0;
    case EST_ATTR_INTS:
        return a->n == b->n && (a->n == 0 || memcmp(a->ints, b->ints, (size_t)a->n * sizeof *a->ints) == 0);
    case EST_ATTR_FLOATS:
        if (a->n != b->n) return false;
        for (int64_t k = 0; k < a->n; k++)
            if (!same_real(a->floats[k], b->floats[k])) return false;
        return true;
    case EST_ATTR_STRINGS:
        if (a->n != b->n) return false;
        for (int64_t k = 0; k < a->n; k++)
            if (strcmp(a->strings[k], b->strings[k]) != 0) return false;
        return true;
    case EST_ATTR_TENSOR:
        return a->t_dtype == b->t_dtype && a->t_rank == b->t_rank &&
               memcmp(a->t_dims, b->t_dims, (size_t)a->t_rank * sizeof a->t_dims[0]) == 0 &&
               same_const(a->t_value, b->t_value);
    default: return true; /* kept by type only */
    }
}

static bool same_tensor(const est_graph *ga, const est_tensor *a, const est_graph *gb, const est_tensor *b) {
    if (a->kind != b->kind || a->role != b->role || a->dtype != b->dtype || a->rank != b->rank) return false;
    for (int32_t d = 0; d < a->rank; d++) {
        if (a->dims[d].value != b->dims[d].value || (a->dims[d].sym < 0) != (b->dims[d].sym < 0)) return false;
        if (a->dims[d].sym >= 0 && strcmp(ga->symbols[a->dims[d].sym], gb->symbols[b->dims[d].sym]) != 0)
            return false;
    }
    return same_const(a->value, b->value) &&
           strcmp(node_name(ga, a->producer), node_name(gb, b->producer)) == 0 &&
           strcmp(node_name(ga, a->first_consumer), node_name(gb, b->first_consumer)) == 0;
}

static bool same_ids(const est_graph *ga, const int32_t *a, const est_graph *gb, const int32_t *b, int32_t n) {
    for (int32_t k = 0; k < n; k++)
        if (strcmp(tensor_name(ga, a[k]), tensor_name(gb, b[k])) != 0) return false;
    return true;
}

static bool same_node(const est_graph *ga, const est_node *a, const est_graph *gb, const est_node *b) {
    if (strcmp(a->name, b->name) || strcmp(a->op_type, b->op_type) || strcmp(a->domain, b->domain) ||
        a->opset != b->opset || a->op != b->op || a->n_inputs != b->n_inputs ||
        a->n_outputs != b->n_outputs || a->n_attrs != b->n_attrs)
        return false;
    if (!same_ids(ga, a->inputs, gb, b->inputs, a->n_inputs) ||
        !same_ids(ga, a->outputs, gb, b->outputs, a->n_outputs))
        return false;
    for (int32_t k = 0; k < a->n_attrs; k++)
        if (!same_attr(&a->attrs[k], &b->attrs[k])) return false;
    return true;
}

/* Compares two graphs field by field; on a difference writes what differs. */
/* Tensors that a node or the graph refers to; fuse.c leaves the inner
 * tensors of a folded sequence in the table, unreferenced, and the JSON
 * writer rightly omits them. */
static bool referenced(const est_tensor *t) {
    return t->kind != EST_T_ACTIVATION || t->producer >= 0 || t->first_consumer >= 0;
}

static int32_t referenced_count(const est_graph *g) {
    int32_t n = 0;
    for (int32_t t = 0; t < g->n_tensors; t++) n += referenced(&g->tensors[t]);
    return n;
}

static bool same_graph(const est_graph *a, const est_graph *b, char *why, size_t n) {
    if (strcmp(a->name, b->name) || strcmp(a->producer, b->producer) || a->opset != b->opset ||
        referenced_count(a) != referenced_count(b) || a->n_nodes != b->n_nodes || a->n_inputs != b->n_inputs ||
        a->n_outputs != b->n_outputs || a->n_symbols != b->n_symbols) {
        snprintf(why, n, "graph header or counts differ");
        return false;
    }
    for (int32_t s = 0; s < a->n_symbols; s++)
        if (strcmp(a->symbols[s], b->symbols[s]) != 0) return snprintf(why, n, "symbol %d", (int)s), false;
    if (!same_ids(a, a->inputs, b, b->inputs, a->n_inputs) || !same_ids(a, a->outputs, b, b->outputs, a->n_outputs))
        return snprintf(why, n, "graph inputs or outputs"), false;
    for (int32_t t = 0; t < a->n_tensors; t++) {
        if (!referenced(&a->tensors[t])) continue;
        int32_t tb = est__graph_find(b, a->tensors[t].name);
        if (tb < 0 || !same_tensor(a, &a->tensors[t], b, &b->tensors[tb]))
            return snprintf(why, n, "tensor '%s'", a->tensors[t].name), false;
    }
    for (int32_t i = 0; i < a->n_nodes; i++)
        if (!same_node(a, &a->nodes[i], b, &b->nodes[i]))
            return snprintf(why, n, "node %d '%s'", (int)i, a->nodes[i].name), false;
    return true;
}

/* ---- estimates ------------------------------------------------------------------------ */

/* Batch 2 on a symbolic leading dim, every other symbol 16. */
static est_status estimate(const est_graph *g, est_report **r, est_error *err) {
    est_binding binds[64];
    size_t nb = 0;
    for (int32_t s = 0; s < g->n_symbols && nb < 64; s++)
        if (strcmp(g->symbols[s], "batch") != 0) binds[nb++] = (est_binding){g->symbols[s], 16};
    est_options opt;
    est_options_init(&opt);
    opt.batch = 2;
    opt.dims = binds;
    opt.n_dims = nb;
    return est_estimate(g, &opt, r, err);
}

static bool same_info(const est_tensor_info *a, const est_tensor_info *b) {
    return strcmp(a->name, b->name) == 0 && a->dtype == b->dtype && a->rank == b->rank &&
           memcmp(a->shape, b->shape, (size_t)a->rank * sizeof *a->shape) == 0 && a->bytes == b->bytes;
}

static void compare_reports(const char *label, const est_report *a, const est_report *b) {
    size_t n = est_report_layer_count(a);
    CHECK(n == est_report_layer_count(b), "%s: %zu layers, reloaded %zu", label, n, est_report_layer_count(b));
    for (size_t i = 0; i < n && i < est_report_layer_count(b); i++) {
        const est_layer *x = est_report_layer(a, i), *y = est_report_layer(b, i);
        bool same = strcmp(x->name, y->name) == 0 && strcmp(x->op, y->op) == 0 &&
                    x->n_outputs == y->n_outputs && x->param_count == y->param_count &&
                    x->param_bytes == y->param_bytes && x->buffer_bytes == y->buffer_bytes;
        for (size_t k = 0; same && k < x->n_outputs; k++) same = same_info(&x->outputs[k], &y->outputs[k]);
        CHECK(same, "%s: layer %zu '%s' differs after the round trip", label, i, x->name);
    }
    CHECK(memcmp(est_report_totals(a), est_report_totals(b), sizeof(est_totals)) == 0,
          "%s: totals differ after the round trip", label);
}

/* ---- round trip ----------------------------------------------------------------------- */

static int n_estimated;

static void round_trip(const char *path) {
    est_error err;
    est_graph *g1 = NULL, *g2 = NULL;
    char *t1 = NULL, *t2 = NULL;
    est_status st = est_load_file(path, &g1, &err);
    CHECK(st == EST_OK, "%s: load: %s", path, err.message);
    if (st != EST_OK) return;
    st = est_graph_to_json(g1, &t1, &err);
    CHECK(st == EST_OK && t1, "%s: to_json: %s", path, err.message);
    if (st == EST_OK) {
        st = est_load_json_buffer(t1, strlen(t1), "roundtrip.json", &g2, &err);
        CHECK(st == EST_OK, "%s: reload: %s", path, err.message);
    }
    if (g2) {
        st = est_graph_to_json(g2, &t2, &err);
        CHECK(st == EST_OK && t2 && strcmp(t1, t2) == 0, "%s: the second JSON text differs from the first", path);
        char why[256] = "";
        CHECK(same_graph(g1, g2, why, sizeof why), "%s: reloaded graph differs: %s", path, why);
        est_report *r1 = NULL, *r2 = NULL;
        est_error e1, e2;
        est_status s1 = estimate(g1, &r1, &e1), s2 = estimate(g2, &r2, &e2);
        CHECK(s1 == s2, "%s: estimate gave %s, reloaded %s", path, est_status_name(s1), est_status_name(s2));
        if (s1 == EST_OK && s2 == EST_OK) {
            compare_reports(path, r1, r2);
            n_estimated++;
        }
        est_report_free(r1);
        est_report_free(r2);
    }
    est_free(t1);
    est_free(t2);
    est_graph_free(g1);
    est_graph_free(g2);
}

static void round_trip_dir(const char *dir, const char *suffix, size_t min_files) {
    size_t n = 0;
    char **paths = list_files(dir, suffix, &n);
    CHECK(n >= min_files, "%s: expected at least %zu %s files, found %zu", dir, min_files, suffix, n);
    for (size_t i = 0; i < n; i++) round_trip(paths[i]);
    free_list(paths);
}

/* ---- the documented example -------------------------------------------------------------- */

/* Every ```json block of the doc that holds a whole graph ("format") must load. */
static void check_doc_examples(const char *source_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/json-format.md", source_dir);
    size_t size;
    char *doc = read_file(path, &size);
    CHECK(doc != NULL, "cannot read %s", path);
    if (!doc) return;
    int graphs = 0;
    for (char *p = doc; (p = strstr(p, "```json\n")) != NULL;) {
        char *body = p + 8, *end = strstr(body, "\n```");
        if (!end) break;
        p = end + 4;
        size_t len = (size_t)(end - body) + 1;
        char *format = strstr(body, "\"format\"");
        if (!format || format > end) continue;
        est_error err;
        est_graph *g = NULL;
        /* The block is not NUL-terminated where it ends: the length bounds it. */
        est_status st = est_load_json_buffer(body, len, "json-format.md", &g, &err);
        CHECK(st == EST_OK, "docs example %d: %s", graphs, err.message);
        est_graph_free(g);
        graphs++;
    }
    CHECK(graphs >= 1, "docs/json-format.md has no complete ```json example");
    free(doc);
}

/* ---- the base document -------------------------------------------------------------------- */

static const char base_doc[] =
    "{\n"
    "  \"format\": \"memest-graph\",\n"
    "  \"version\": 1,\n"
    "  \"name\": \"tiny\",\n"
    "  \"opset_import\": {\"\": 17, \"com.example\": 1},\n"
    "  \"inputs\": [\n"
    "    {\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 4]},\n"
    "    {\"name\": \"m\", \"dtype\": \"bool\", \"dims\": [null, 2]}\n"
    "  ],\n"
    "  \"initializers\": [\n"
    "    {\"name\": \"w\", \"dtype\": \"float32\", \"dims\": [4, 4]},\n"
    "    {\"name\": \"shape\", \"dtype\": \"int64\", \"dims\": [2], \"values\": [0, -1]},\n"
    "    {\"name\": \"flag\", \"dtype\": \"bool\", \"dims\": [2], \"values\": [true, 0]},\n"
    "    {\"name\": \"d\", \"dtype\": \"float64\", \"dims\": [2], \"values\": [0.1, \"nan\"]},\n"
    "    {\"name\": \"f\", \"dtype\": \"float32\", \"dims\": [], \"values\": [0.1]}\n"
    "  ],\n"
    "  \"nodes\": [\n"
    "    {\"name\": \"mm\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"y\"]},\n"
    "    {\"name\": \"act\", \"op\": \"LeakyRelu\", \"inputs\": [\"y\"], \"outputs\": [\"a\"],"
    " \"attributes\": {\"alpha\": {\"float\": 0.1}}},\n"
    "    {\"name\": \"r\", \"op\": \"Reshape\", \"inputs\": [\"a\", \"shape\"], \"outputs\": [\"z\"],"
    " \"attributes\": {\"allowzero\": {\"int\": 0}}},\n"
    "    {\"name\": \"custom\", \"op\": \"Scale\", \"domain\": \"com.example\", \"inputs\": [\"z\", \"\"],"
    " \"outputs\": [\"out\"], \"attributes\": {\"factors\": {\"floats\": [1.5, 2]}, \"axes\": {\"ints\": []},"
    " \"mode\": {\"string\": \"fast\"}, \"tags\": {\"strings\": [\"a\", \"b\\n\"]},"
    " \"bias\": {\"tensor\": {\"dtype\": \"int64\", \"dims\": [], \"values\": [\"9223372036854775807\"]}},"
    " \"body\": {\"graph\": null}, \"scale\": {\"float\": \"-inf\"}, \"big\": {\"int\": \"-9223372036854775808\"}}}\n"
    "  ],\n"
    "  \"outputs\": [\"out\"]\n"
    "}\n";

static const est_attr *find_attr(const est_node *n, const char *name) {
    for (int32_t k = 0; k < n->n_attrs; k++)
        if (strcmp(n->attrs[k].name, name) == 0) return &n->attrs[k];
    return NULL;
}

static const est_node *find_node(const est_graph *g, const char *name) {
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0) return &g->nodes[i];
    return NULL;
}

static const est_tensor *find_tensor(const est_graph *g, const char *name) {
    int32_t t = est__graph_find(g, name);
    return t >= 0 ? &g->tensors[t] : NULL;
}

static void check_base_tensors(const est_graph *g) {
    const est_tensor *x = find_tensor(g, "x"), *m = find_tensor(g, "m");
    CHECK(x && x->kind == EST_T_INPUT && x->rank == 2 && x->dims[0].sym >= 0 &&
          strcmp(g->symbols[x->dims[0].sym], "batch") == 0 && x->dims[1].value == 4, "input x");
    CHECK(m && m->dtype == EST_DT_BOOL && m->dims[0].value < 0 && m->dims[0].sym < 0, "input m: null dim");
    const est_tensor *shape = find_tensor(g, "shape"), *flag = find_tensor(g, "flag");
    CHECK(shape && shape->value && shape->value->i64[0] == 0 && shape->value->i64[1] == -1, "shape values");
    CHECK(flag && flag->value && flag->value->i64[0] == 1 && flag->value->i64[1] == 0, "bool values");
    const est_tensor *d = find_tensor(g, "d"), *f = find_tensor(g, "f");
    CHECK(d && d->value && d->value->f64[0] == 0.1 && isnan(d->value->f64[1]), "float64 values stay exact");
    CHECK(f && f->rank == 0 && f->value && f->value->f64[0] == (double)0.1f, "float32 values are rounded");
    const est_tensor *w = find_tensor(g, "w");
    CHECK(w && w->role == EST_ROLE_PARAM && !w->value && w->dims[0].value == 4, "weight w");
}

static void check_base_attrs(const est_graph *g) {
    const est_node *act = find_node(g, "act"), *c = find_node(g, "custom");
    CHECK(act && c, "nodes act and custom");
    if (!act || !c) return;
    const est_attr *a = find_attr(act, "alpha");
    CHECK(a && a->type == EST_ATTR_FLOAT && a->f == (double)0.1f, "alpha is a float32");
    CHECK(c->opset == 1 && strcmp(c->domain, "com.example") == 0 && g->opset == 17, "opsets");
    CHECK(c->n_inputs == 2 && c->inputs[1] == -1, "an omitted input is -1");
    a = find_attr(c, "factors");
    CHECK(a && a->type == EST_ATTR_FLOATS && a->n == 2 && a->floats[0] == 1.5 && a->floats[1] == 2, "floats");
    a = find_attr(c, "axes");
    CHECK(a && a->type == EST_ATTR_INTS && a->n == 0, "an empty ints list stays ints");
    a = find_attr(c, "mode");
    CHECK(a && a->type == EST_ATTR_STRING && strcmp(a->s, "fast") == 0, "string");
    a = find_attr(c, "tags");
    CHECK(a && a->type == EST_ATTR_STRINGS && a->n == 2 && strcmp(a->strings[1], "b\n") == 0, "strings");
    a = find_attr(c, "bias");
    CHECK(a && a->type == EST_ATTR_TENSOR && a->t_dtype == EST_DT_INT64 && a->t_rank == 0 && a->t_value &&
          a->t_value->i64[0] == INT64_MAX, "tensor attribute with an int64 beyond 2^53");
    a = find_attr(c, "body");
    CHECK(a && a->type == EST_ATTR_GRAPH, "graph attribute kept by type");
    a = find_attr(c, "scale");
    CHECK(a && a->type == EST_ATTR_FLOAT && isinf(a->f) && a->f < 0, "-inf float");
    a = find_attr(c, "big");
    CHECK(a && a->type == EST_ATTR_INT && a->i == INT64_MIN, "int64 minimum as a string");
}

static void check_base_text(const est_graph *g) {
    char *text = NULL;
    est_error err;
    CHECK(est_graph_to_json(g, &text, &err) == EST_OK, "to_json: %s", err.message);
    if (!text) return;
    static const char *const want[] = {
        "\"dims\": [\"batch\", 4]", "\"dims\": [null, 2]", "\"values\": [1, 0]", "\"values\": [0.1, \"nan\"]",
        "\"alpha\": {\"float\": 0.1}", "\"axes\": {\"ints\": []}", "\"inputs\": [\"z\", \"\"]",
        "\"values\": [\"9223372036854775807\"]", "{\"float\": \"-inf\"}", "\"body\": {\"graph\": null}",
        "\"tags\": {\"strings\": [\"a\", \"b\\n\"]}", "\"opset_import\": {\"\": 17, \"com.example\": 1}",
        "\"allowzero\": {\"int\": 0}", "\"domain\": \"com.example\"", "{\"int\": \"-9223372036854775808\"}",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK(strstr(text, want[i]) != NULL, "to_json output lacks %s", want[i]);
    est_free(text);
}

static void check_base(void) {
    est_error err;
    est_graph *g = NULL;
    /* Exactly the document's bytes, in a buffer with no NUL after them. */
    size_t len = strlen(base_doc);
    char *exact = malloc(len);
    memcpy(exact, base_doc, len);
    est_status st = est_load_json_buffer(exact, len, "base.json", &g, &err);
    free(exact);
    CHECK(st == EST_OK, "the base document must load: %s", err.message);
    if (st != EST_OK) return;
    check_base_tensors(g);
    check_base_attrs(g);
    check_base_text(g);
    est_graph_free(g);
}

/* ---- malformed documents -------------------------------------------------------------------- */

typedef struct bad_case {
    const char *find;      /* a piece of base_doc ... */
    const char *replace;   /* ... and what replaces it */
    est_status code;
    const char *expect1, *expect2; /* pieces the message must hold (expect2 may be NULL) */
} bad_case;

static const bad_case bad_cases[] = {
    /* syntax */
    {"\"version\": 1,", "\"version\": 1,,", EST_EPARSE, "invalid JSON", "line 3"},
    {"\"outputs\": [\"out\"]\n}", "\"outputs\": [\"out\"]\n} x", EST_EPARSE, "unexpected text after", "line 24"},
    /* header */
    {"\"version\": 1", "\"version\": 2", EST_EUNSUPPORTED, "version 2", NULL},
    {"\"version\": 1", "\"version\": \"1\"", EST_EPARSE, "'version'", NULL},
    {"\"memest-graph\"", "\"onnx-graph\"", EST_EPARSE, "'format'", NULL},
    {"\"format\": \"memest-graph\",", "", EST_EPARSE, "missing field 'format'", NULL},
    {"\"name\": \"tiny\",", "\"name\": \"tiny\", \"nodez\": [],", EST_EPARSE, "unknown field 'nodez'", NULL},
    {"\"name\": \"tiny\",", "\"name\": \"tiny\", \"name\": \"again\",", EST_EPARSE, "field 'name' appears twice", NULL},
    {"\"name\": \"tiny\",", "\"name\": 7,", EST_EPARSE, "field 'name' must be a string", NULL},
    {"\"opset_import\": {\"\": 17, \"com.example\": 1},", "", EST_EPARSE, "missing field 'opset_import'", NULL},
    {"\"\": 17, ", "", EST_EUNSUPPORTED, "default domain", NULL},
    {"\"\": 17", "\"\": 6", EST_EUNSUPPORTED, "opset 6", NULL},
    {"\"\": 17", "\"\": 17.5", EST_EPARSE, "opset_import", NULL},
    {"\"\": 17, ", "\"\": 17, \"ai.onnx\": 17, ", EST_EPARSE, "'ai.onnx' is listed twice", NULL},
    /* graph inputs */
    {"[\"batch\", 4]", "[\"batch\", -4]", EST_ESHAPE, "graph input 'x'", "dim 1 is -4"},
    {"[\"batch\", 4]", "[\"batch\", 0]", EST_ESHAPE, "graph input 'x'", "dims must be positive"},
    {"[\"batch\", 4]", "[\"batch\", 2199023255553]", EST_ELIMIT, "graph input 'x'", "above the limit"},
    {"[\"batch\", 4]", "[\"batch\", 1e300]", EST_ELIMIT, "graph input 'x'", "dim 1"},
    {"[\"batch\", 4]", "[\"batch\", 4.5]", EST_EPARSE, "graph input 'x'", "whole numbers"},
    {"[\"batch\", 4]", "[\"\", 4]", EST_EPARSE, "graph input 'x'", "dim 0 is an empty name"},
    {"[\"batch\", 4]", "[\"batch\", true]", EST_EPARSE, "graph input 'x'", "dim 1 must be"},
    {"[\"batch\", 4]", "[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]", EST_ELIMIT, "graph input 'x'", "rank 13"},
    {"\"float32\", \"dims\": [\"batch\"", "\"floatt\", \"dims\": [\"batch\"", EST_EPARSE, "graph input 'x'",
     "unknown dtype 'floatt'"},
    {", \"dims\": [\"batch\", 4]}", "}", EST_EPARSE, "graph input 'x'", "missing field 'dims'"},
    {"{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 4]}", "\"x\"", EST_EPARSE, "graph input 0",
     "must be an object"},
    {"{\"name\": \"m\"", "{\"name\": \"x\"", EST_EGRAPH, "graph input 'x'", "already used by a graph input"},
    {"{\"name\": \"m\", ", "{\"name\": \"m\", \"shape\": [], ", EST_EPARSE, "graph input 'm'", "unknown field 'shape'"},
    /* initializers */
    {"\"dims\": [4, 4]}", "\"dims\": [4294967296, 4294967296]}", EST_EOVERFLOW, "initializer 'w'", "overflows"},
    {"\"dims\": [4, 4]}", "\"dims\": [4, 1e300]}", EST_EOVERFLOW, "initializer 'w'", "dim 1"},
    {"\"dims\": [4, 4]}", "\"dims\": [4, -1]}", EST_ESHAPE, "initializer 'w'", "dim 1 is -1"},
    {"\"dims\": [4, 4]}", "\"dims\": [4, \"n\"]}", EST_EPARSE, "initializer 'w'", "dim 1 must be an integer"},
    {"\"dims\": [4, 4]}", "\"dims\": [300, 300], \"values\": []}", EST_ELIMIT, "initializer 'w'", "at most"},
    {"\"values\": [0, -1]", "\"values\": [0, -1, 3]", EST_EPARSE, "initializer 'shape'", "'values' has 3"},
    {"\"values\": [0, -1]", "\"values\": [0, 0.5]", EST_EPARSE, "initializer 'shape'", "value 1"},
    {"\"values\": [0, -1]", "\"values\": [0, 9007199254740993]", EST_EPARSE, "initializer 'shape'", "decimal string"},
    {"\"values\": [0, -1]", "\"values\": [0, \"99999999999999999999\"]", EST_EPARSE, "initializer 'shape'",
     "int64 range"},
    {"\"values\": [0, -1]", "\"values\": [0, \"12a\"]", EST_EPARSE, "initializer 'shape'", "value 1"},
    {"\"values\": [0.1, \"nan\"]", "\"values\": [0.1, \"infinity\"]", EST_EPARSE, "initializer 'd'", "value 1"},
    {"\"values\": [0.1]}", "\"values\": [1e39]}", EST_EPARSE, "initializer 'f'", "float32 range"},
    {"\"name\": \"shape\", \"dtype\": \"int64\"", "\"name\": \"shape\", \"dtype\": \"string\"", EST_EPARSE,
     "initializer 'shape'", "numeric"},
    {"{\"name\": \"w\", \"dtype\"", "{\"name\": \"x\", \"dtype\"", EST_EGRAPH, "initializer 'x'",
     "already used by a graph input"},
    {"{\"name\": \"shape\", \"dtype\"", "{\"name\": \"w\", \"dtype\"", EST_EGRAPH, "initializer 'w'",
     "already used by an initializer"},
    {"{\"name\": \"w\", ", "{", EST_EPARSE, "initializer 0", "missing field 'name'"},
    /* nodes */
    {"\"op\": \"MatMul\", ", "", EST_EPARSE, "node 0 'mm'", "missing field 'op'"},
    {"\"op\": \"MatMul\", ", "\"op\": \"\", ", EST_EPARSE, "node 0 'mm'", "'op' is empty"},
    {"\"name\": \"mm\", ", "\"name\": \"\", ", EST_EPARSE, "node 0", "'name' is empty"},
    {"\"inputs\": [\"x\", \"w\"]", "\"inputs\": \"x\"", EST_EPARSE, "node 0 'mm' (MatMul)", "'inputs' must be an array"},
    {"\"inputs\": [\"x\", \"w\"]", "\"inputs\": [\"x\", 1]", EST_EPARSE, "node 0 'mm' (MatMul)", "input 1"},
    {", \"outputs\": [\"y\"]", "", EST_EPARSE, "node 0 'mm' (MatMul)", "missing field 'outputs'"},
    {"\"outputs\": [\"y\"]", "\"outputs\": [\"y\"], \"attrs\": {}", EST_EPARSE, "node 0 'mm'", "unknown field 'attrs'"},
    {"\"name\": \"act\"", "\"name\": \"mm\"", EST_EGRAPH, "node 1 'mm' (LeakyRelu)", "already used by node 0"},
    {"\"inputs\": [\"y\"]", "\"inputs\": [\"ghost\"]", EST_EGRAPH, "'act'", "'ghost'"},
    {"\"outputs\": [\"a\"]", "\"outputs\": [\"y\"]", EST_EGRAPH, "'act'", "already produced"},
    {"\"outputs\": [\"a\"]", "\"outputs\": [\"x\"]", EST_EGRAPH, "'act'", "redefines a graph input"},
    {"\"inputs\": [\"x\", \"w\"]", "\"inputs\": [\"z\", \"w\"]", EST_EGRAPH, "cycle", NULL},
    /* attributes */
    {"\"alpha\": {\"float\": 0.1}", "\"alpha\": 0.1", EST_EATTR, "node 1 'act' (LeakyRelu)", "attribute 'alpha'"},
    {"\"name\": \"act\", \"op\": \"LeakyRelu\", \"inputs\": [\"y\"], \"outputs\": [\"a\"], \"attributes\": "
     "{\"alpha\": {\"float\": 0.1}}",
     "\"op\": \"LeakyRelu\", \"inputs\": [\"y\"], \"outputs\": [\"a\"], \"attributes\": {\"alpha\": {\"float\": []}}",
     EST_EATTR, "node 1 (LeakyRelu)", "attribute 'alpha' must be {\"float\": X}"},
    {"{\"floats\": [1.5, 2]}", "{\"floats\": [1.5, \"x\"]}", EST_EATTR, "attribute 'factors' must be {\"floats\": [...]}",
     "element 1"},
    {"{\"ints\": []}", "{\"ints\": [1, 2.5]}", EST_EATTR, "node 3 'custom' (Scale): attribute 'axes' must be "
     "{\"ints\": [...]}", "element 1 must be a whole number"},
    {"{\"ints\": []}", "{\"ints\": {}}", EST_EATTR, "attribute 'axes' must be {\"ints\": [...]}", NULL},
    {"{\"strings\": [\"a\", \"b\\n\"]}", "{\"strings\": [\"a\", 2]}", EST_EATTR, "attribute 'tags'", "element 1"},
    {"{\"string\": \"fast\"}", "{\"string\": 1}", EST_EATTR, "attribute 'mode' must be {\"string\"", NULL},
    {"{\"int\": 0}", "{\"int32\": 0}", EST_EATTR, "attribute 'allowzero'", "unknown type 'int32'"},
    {"{\"int\": 0}", "{\"int\": 0, \"float\": 0}", EST_EATTR, "attribute 'allowzero'", "one type key"},
    {"{\"int\": 0}", "{}", EST_EATTR, "attribute 'allowzero'", "one type key"},
    {"{\"int\": 0}", "{\"int\": 0.5}", EST_EATTR, "attribute 'allowzero' must be {\"int\": N}", "whole number"},
    {"{\"int\": 0}", "{\"int\": 1e17}", EST_EATTR, "attribute 'allowzero'", "decimal string"},
    {"{\"float\": 0.1}", "{\"float\": 1e39}", EST_EATTR, "attribute 'alpha'", "float32 range"},
    {"{\"float\": 0.1}", "{\"float\": \"fast\"}", EST_EATTR, "attribute 'alpha'", "\"inf\""},
    {"\"allowzero\": {\"int\": 0}", "\"allowzero\": {\"int\": 0}, \"allowzero\": {\"int\": 1}", EST_EATTR,
     "attribute 'allowzero' appears twice", NULL},
    {"\"allowzero\": {\"int\": 0}", "\"\": {\"int\": 0}", EST_EATTR, "empty name", NULL},
    {"\"attributes\": {\"allowzero\"", "\"attributes\": [], \"x\": {\"allowzero\"", EST_EPARSE, "node 2 'r'",
     "unknown field 'x'"},
    {"\"values\": [\"9223372036854775807\"]", "\"values\": [1, 2]", EST_EPARSE, "attribute 'bias'", "'values' has 2"},
    {"\"dtype\": \"int64\", \"dims\": [], \"values\": [\"92", "\"dtype\": \"int65\", \"dims\": [], \"values\": [\"92",
     EST_EPARSE, "node 3 'custom' (Scale): attribute 'bias'", "unknown dtype 'int65'"},
    {"\"dims\": [], \"values\": [\"92", "\"dims\": [-1], \"values\": [\"92", EST_ESHAPE, "attribute 'bias'", "dim 0"},
    {"\"dims\": [], \"values\": [\"92", "\"dims\": [], \"extra\": 1, \"values\": [\"92", EST_EPARSE,
     "attribute 'bias'", "unknown field 'extra'"},
    {"{\"graph\": null}", "{\"graph\": {}}", EST_EATTR, "attribute 'body' must be {\"graph\": null}", NULL},
    /* graph outputs */
    {"\"outputs\": [\"out\"]\n}", "\"outputs\": [\"nope\"]\n}", EST_EGRAPH, "graph output 'nope'", NULL},
    {"\"outputs\": [\"out\"]\n}", "\"outputs\": [\"out\", 3]\n}", EST_EPARSE, "graph output 1", NULL},
    {"\"outputs\": [\"out\"]\n}", "\"outputs\": \"out\"\n}", EST_EPARSE, "field 'outputs' must be an array", NULL},
};

/* base_doc with the first `find` replaced; NULL when `find` is not in it. */
static char *apply_case(const char *find, const char *replace) {
    const char *at = strstr(base_doc, find);
    if (!at) return NULL;
    size_t head = (size_t)(at - base_doc), flen = strlen(find), rlen = strlen(replace);
    size_t total = strlen(base_doc) - flen + rlen;
    char *doc = malloc(total + 1);
    memcpy(doc, base_doc, head);
    memcpy(doc + head, replace, rlen);
    strcpy(doc + head + rlen, at + flen);
    return doc;
}

static void expect_failure(const char *label, const char *text, size_t len, est_status code,
                           const char *expect1, const char *expect2) {
    static int not_a_graph;
    est_error err = {0};
    est_graph *g = (est_graph *)&not_a_graph; /* must be reset to NULL on failure */
    est_status st = est_load_json_buffer(text, len, "bad.json", &g, &err);
    CHECK(st == code, "%s: expected %s, got %s: %s", label, est_status_name(code), est_status_name(st),
          st ? err.message : "(loaded)");
    if (st == EST_OK) est_graph_free(g);
    else CHECK(g == NULL, "%s: *out is not NULL after a failure", label);
    if (st == EST_OK) return;
    CHECK(strncmp(err.message, "bad.json: ", 10) == 0, "%s: message does not name the file: %s", label, err.message);
    CHECK(strstr(err.message, expect1) != NULL, "%s: message lacks \"%s\": %s", label, expect1, err.message);
    if (expect2) CHECK(strstr(err.message, expect2) != NULL, "%s: message lacks \"%s\": %s", label, expect2, err.message);
}

static void check_bad_cases(void) {
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        char label[64];
        snprintf(label, sizeof label, "bad case %zu", i);
        char *doc = apply_case(c->find, c->replace);
        CHECK(doc != NULL, "%s: '%s' is not in the base document", label, c->find);
        if (!doc) continue;
        expect_failure(label, doc, strlen(doc), c->code, c->expect1, c->expect2);
        free(doc);
    }
    expect_failure("empty", "  \n", 3, EST_EPARSE, "empty", NULL);
    expect_failure("zero bytes", "", 0, EST_EPARSE, "empty", NULL);
    expect_failure("not an object", "[1, 2]", 6, EST_EPARSE, "top level must be a JSON object", NULL);
    expect_failure("a string", "\"memest-graph\"", 14, EST_EPARSE, "top level", NULL);
}

/* Every cut of the base document before its final brace is invalid JSON; each
 * cut sits in a buffer of exactly that size, so a read past it shows under
 * valgrind or ASan. */
static void check_truncations(void) {
    size_t len = strrchr(base_doc, '}') - base_doc;
    int wrong = 0;
    for (size_t cut = 1; cut <= len; cut++) {
        char *buf = malloc(cut);
        memcpy(buf, base_doc, cut);
        est_error err;
        est_graph *g = NULL;
        est_status st = est_load_json_buffer(buf, cut, "cut.json", &g, &err);
        if (st != EST_EPARSE || g || !strstr(err.message, "line")) {
            if (!wrong++) printf("cut at %zu: %s %s\n", cut, est_status_name(st), st ? err.message : "");
        }
        est_graph_free(g);
        free(buf);
    }
    CHECK(wrong == 0, "%d truncated documents did not fail with EPARSE and a line number", wrong);
}

/* More than EST_MAX_IO inputs on one node. */
static void check_io_limit(void) {
    char inputs[EST_MAX_IO * 8 + 64] = "\"inputs\": [\"x\"";
    for (int k = 0; k < EST_MAX_IO; k++) strcat(inputs, ", \"x\"");
    strcat(inputs, "]");
    char *doc = apply_case("\"inputs\": [\"x\", \"w\"]", inputs);
    CHECK(doc != NULL, "io limit case");
    char limit[64];
    snprintf(limit, sizeof limit, "more than %d inputs", EST_MAX_IO);
    if (doc) expect_failure("io limit", doc, strlen(doc), EST_ELIMIT, "node 0 'mm'", limit);
    free(doc);
}

/* ---- the API's own argument checks ------------------------------------------------------------ */

static void check_arguments(void) {
    est_error err;
    est_graph *g = NULL;
    char *text = (char *)&err;
    CHECK(est_load_json_buffer(base_doc, strlen(base_doc), NULL, NULL, &err) == EST_EINVAL, "NULL out");
    CHECK(est_load_json_buffer(NULL, 5, NULL, &g, &err) == EST_EINVAL && !g, "NULL text");
    CHECK(est_graph_to_json(NULL, &text, &err) == EST_EINVAL && !text, "NULL graph");
    CHECK(est_load_json_buffer(base_doc, strlen(base_doc), NULL, &g, NULL) == EST_OK, "NULL err on success");
    CHECK(est_graph_to_json(g, NULL, NULL) == EST_EINVAL, "NULL text out");
    CHECK(g && strcmp(est_graph_name(g), "<memory>") == 0, "unnamed buffers are <memory>");
    est_graph_free(g);
    CHECK(est_load_json_buffer("{", 1, NULL, &g, &err) == EST_EPARSE && strstr(err.message, "<memory>: "),
          "errors of unnamed buffers name <memory>: %s", err.message);
}

/* ---- models/ ------------------------------------------------------------------------------------ */

typedef struct model_expect {
    const char *file;
    uint64_t params;
    int64_t out_dims[3];
    int out_rank;
} model_expect;

/* The hand-written models load; once every op they use has rules, their
 * estimates must give these parameter counts and output shapes. */
static void check_models(const char *source_dir) {
    static const model_expect models[] = {
        {"small_cnn.json", 5434, {2, 10}, 2},
        {"transformer_block.json", 3152384, {2, 16, 512}, 3},
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/models/%s", source_dir, models[i].file);
        est_error err;
        est_graph *g = NULL;
        est_status st = est_load_file(path, &g, &err);
        CHECK(st == EST_OK, "%s: %s", path, err.message);
        if (st != EST_OK) continue;
        bool all_ops = true;
        for (int32_t k = 0; k < g->n_nodes; k++) all_ops &= g->nodes[k].op != NULL;
        est_report *r = NULL;
        st = all_ops ? estimate(g, &r, &err) : EST_EUNSUPPORTED;
        if (st == EST_OK) {
            const est_tensor_info *out = est_report_output(r, 0);
            CHECK(est_report_totals(r)->param_count == models[i].params, "%s: %llu params, expected %llu",
                  models[i].file, (unsigned long long)est_report_totals(r)->param_count,
                  (unsigned long long)models[i].params);
            CHECK(out && out->rank == models[i].out_rank &&
                  memcmp(out->shape, models[i].out_dims, (size_t)out->rank * sizeof *out->shape) == 0,
                  "%s: output shape", models[i].file);
        } else if (all_ops) {
            CHECK(st == EST_EUNSUPPORTED, "%s: estimate: %s", models[i].file, err.message);
        } else {
            printf("note: %s: not every op has rules yet; its estimate is not checked\n", models[i].file);
        }
        est_report_free(r);
        est_graph_free(g);
    }
}

/* ---- allocation failures --------------------------------------------------------------------------- */

#ifdef TEST_JSON_WRAP_ALLOC
/* Fails allocation k of `text`'s load, for k = 0, 1, ... until a load makes
 * fewer allocations than k. Each failed load must report ENOMEM (or EPARSE,
 * when cJSON's own allocation failed) and leave *out NULL. */
static void fail_each_load_allocation(const char *label, const char *text, size_t len) {
    cJSON_Hooks hooks = {.malloc_fn = hook_malloc, .free_fn = free};
    cJSON_InitHooks(&hooks);
    int wrong = 0;
    long k = 0;
    for (;; k++) {
        est_error err;
        est_graph *g = NULL;
        alloc_failed = 0;
        alloc_countdown = k;
        est_status st = est_load_json_buffer(text, len, label, &g, &err);
        alloc_countdown = -1;
        if (!alloc_failed) {
            CHECK(st == EST_OK, "%s: load without failures: %s", label, err.message);
            est_graph_free(g);
            break;
        }
        /* classify_initializers() may shrug off a failure: OK is allowed too. */
        bool fine = st == EST_OK ? g != NULL
                                 : !g && (st == EST_ENOMEM ||
                                          (st == EST_EPARSE && strstr(err.message, "out of memory")));
        if (!fine && !wrong++) printf("allocation %ld: %s: %s\n", k, est_status_name(st), err.message);
        est_graph_free(g);
    }
    cJSON_InitHooks(NULL);
    CHECK(wrong == 0 && k > 10, "%s: %d of %ld failed allocations were mishandled", label, wrong, k);
}

static void fail_each_write_allocation(const char *label, const est_graph *g) {
    int wrong = 0;
    long k = 0;
    for (;; k++) {
        est_error err;
        char *text = NULL;
        alloc_failed = 0;
        alloc_countdown = k;
        est_status st = est_graph_to_json(g, &text, &err);
        alloc_countdown = -1;
        if (!alloc_failed) {
            CHECK(st == EST_OK && text, "%s: write without failures", label);
            est_free(text);
            break;
        }
        if ((st != EST_ENOMEM || text) && !wrong++) printf("write allocation %ld: %s\n", k, est_status_name(st));
        est_free(text);
    }
    CHECK(wrong == 0 && k > 1, "%s: %d of %ld failed write allocations were mishandled", label, wrong, k);
}

static void check_allocation_failures(const char *source_dir) {
    fail_each_load_allocation("base.json", base_doc, strlen(base_doc));
    char path[4096];
    snprintf(path, sizeof path, "%s/models/transformer_block.json", source_dir);
    size_t size;
    char *text = read_file(path, &size);
    CHECK(text != NULL, "cannot read %s", path);
    if (text) fail_each_load_allocation("transformer_block.json", text, size);
    est_graph *g = NULL;
    est_error err;
    if (est_load_json_buffer(base_doc, strlen(base_doc), "base.json", &g, &err) == EST_OK)
        fail_each_write_allocation("base.json", g);
    est_graph_free(g);
    free(text);
}
#else
static void check_allocation_failures(const char *source_dir) {
    (void)source_dir;
    printf("note: allocation failures are not tested (the linker has no --wrap)\n");
}
#endif

/* Whether text is well-formed UTF-8 (RFC 3629), checked here apart from
 * the writer's own check. */
static bool valid_utf8(const unsigned char *p) {
    while (*p) {
        unsigned c = *p, n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (!n || (n == 2 && c < 0xc2) || (n == 4 && c > 0xf4)) return false;
        unsigned long cp = n == 1 ? c : c & (0x7f >> n);
        for (unsigned i = 1; i < n; i++) {
            if ((p[i] & 0xc0) != 0x80) return false;
            cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return false;
        p += n;
    }
    return true;
}

/* A node name that is not UTF-8 (names are the file's bytes): the report's
 * JSON holds U+FFFD for each bad byte, keeps good multi-byte characters,
 * and stays valid UTF-8. */
static void check_report_names_not_utf8(void) {
    static const char text[] =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"n\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [2, 3]}],\n"
        " \"nodes\": [{\"name\": \"r\xff" "e\xc3\xa9\xed\xa0\x80\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"y\"]}],\n"
        " \"outputs\": [\"y\"]}\n";
    est_error err;
    est_graph *g = NULL;
    est_report *r = NULL;
    char *json = NULL;
    est_status st = est_load_json_buffer(text, sizeof text - 1, "names.json", &g, &err);
    CHECK(st == EST_OK, "names.json: load: %s", err.message);
    if (st == EST_OK) {
        est_options opt;
        est_options_init(&opt);
        st = est_estimate(g, &opt, &r, &err);
        CHECK(st == EST_OK, "names.json: estimate: %s", err.message);
    }
    if (r) {
        st = est_report_to_json(r, NULL, &json, &err);
        CHECK(st == EST_OK && json, "names.json: to_json: %s", err.message);
    }
    if (json) {
        /* 0xff and the encoded surrogate (ED A0 80, three bytes) are not UTF-8 */
        CHECK(strstr(json, "\"r\\ufffde\xc3\xa9\\ufffd\\ufffd\\ufffd\"") != NULL, "names.json: the bad bytes are not U+FFFD");
        CHECK(valid_utf8((const unsigned char *)json), "names.json: the report's JSON is not valid UTF-8");
    }
    est_free(json);
    est_report_free(r);
    est_graph_free(g);
}

/* est_report_write_json's sink in the test: the pieces joined, and how
 * many; fail_after > 0 refuses that piece. */
typedef struct pieces {
    char *text;
    size_t len, count, largest;
    size_t fail_after;
} pieces;

static int collect(void *ctx, const char *data, size_t n) {
    pieces *p = ctx;
    if (p->fail_after && p->count + 1 == p->fail_after) return 1;
    char *grown = realloc(p->text, p->len + n + 1);
    if (!grown) return 1;
    memcpy(grown + p->len, data, n);
    p->text = grown;
    p->len += n;
    p->text[p->len] = '\0';
    p->count++;
    if (n > p->largest) p->largest = n;
    return 0;
}

/* The report streamed (est_report_write_json) is est_report_to_json's text,
 * in pieces of 64 KiB at most; a sink that fails makes it EST_EIO.
 * resnet18's report is some 150 KB: several pieces. */
static void check_streamed_report(const char *source_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/models/resnet18.onnx", source_dir);
    est_error err;
    est_graph *g = NULL;
    est_report *r = NULL;
    char *text = NULL;
    if (est_load_file(path, &g, &err) != EST_OK) {
        CHECK(false, "%s: %s", path, err.message);
        return;
    }
    est_options opt;
    est_options_init(&opt);
    opt.batch = 32;
    est_status st = est_estimate(g, &opt, &r, &err);
    CHECK(st == EST_OK, "resnet18: estimate: %s", err.message);
    if (r) st = est_report_to_json(r, NULL, &text, &err);
    pieces p = {0};
    if (r && text) {
        st = est_report_write_json(r, NULL, collect, &p, &err);
        CHECK(st == EST_OK, "streamed report: %s", err.message);
        CHECK(p.text && strcmp(p.text, text) == 0, "streamed report differs from est_report_to_json's (%zu against %zu bytes)",
              p.len, strlen(text));
        CHECK(p.count >= 2 && p.largest <= 65536, "streamed report: %zu pieces, the largest %zu bytes", p.count, p.largest);
        pieces bad = {.fail_after = 2};
        st = est_report_write_json(r, NULL, collect, &bad, &err);
        CHECK(st == EST_EIO, "a failing sink: %s, expected EST_EIO", est_status_name(st));
        free(bad.text);
    }
    free(p.text);
    est_free(text);
    est_report_free(r);
    est_graph_free(g);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s ONNX_DIR SOURCE_DIR\n", argv[0]);
        return 2;
    }
    const char *onnx_dir = argv[1], *source_dir = argv[2];
    char models_dir[4096];
    snprintf(models_dir, sizeof models_dir, "%s/models", source_dir);

    check_arguments();
    check_base();
    check_bad_cases();
    check_truncations();
    check_io_limit();
    check_report_names_not_utf8();
    check_streamed_report(source_dir);
    check_doc_examples(source_dir);
    check_models(source_dir);
    round_trip_dir(models_dir, ".json", 2);
    DIR *d = opendir(onnx_dir);
    if (d) {
        closedir(d);
        round_trip_dir(onnx_dir, ".onnx", 1);
    } else {
        printf("note: %s not found; ONNX round trips skipped\n", onnx_dir);
    }
    round_trip_dir(models_dir, ".onnx", 0);
    check_allocation_failures(source_dir);

    printf("%d checks, %d failed; %d round trips compared estimates\n", checks, failures, n_estimated);
    return failures ? 1 : 0;
}
