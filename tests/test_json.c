/*
 * test_json: the JSON graph format (docs/json-format.md): what is written
 * reads back.
 *
 *  - round trip: every ONNX model in ONNX_DIR and every JSON model in models/
 *    loads, is written, reloaded and written again to identical text; the
 *    reloaded graph equals the original field by field; and where the original
 *    estimates, the reloaded one gives the same layers, shapes and counts.
 *  - the complete example of docs/json-format.md loads.
 *  - the hand-written models of models/ load and estimate to their parameter
 *    counts and output shapes.
 * The reader on a document written in the test (every attribute type,
 * malformed variants, allocation failures) is test_json_parse; the report's
 * JSON is test_json_report.
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
#include "json_util.h"

/* ---- files ---------------------------------------------------------------------- */

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

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s ONNX_DIR SOURCE_DIR\n", argv[0]);
        return 2;
    }
    const char *onnx_dir = argv[1], *source_dir = argv[2];
    char models_dir[4096];
    snprintf(models_dir, sizeof models_dir, "%s/models", source_dir);

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

    printf("%d checks, %d failed; %d round trips compared estimates\n", checks, failures, n_estimated);
    return failures ? 1 : 0;
}
