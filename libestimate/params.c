/*
 * params.c: the model's parameters by name, and which of them train.
 *
 * A parameter has two names: the initializer's name in the file and the name
 * PyTorch's named_parameters() gives it. They are the same string unless an
 * exporter renamed the weight (est_tensor.torch_name). The user's --trainable
 * and --freeze patterns match either; est__trainable_mask() turns them into
 * one flag per tensor for the simulation.
 */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

static bool is_glob(const char *pattern) { return strpbrk(pattern, "*?[") != NULL; }

int est_name_matches(const char *pattern, const char *name) {
    if (!pattern || !name || !*pattern) return 0;
    if (is_glob(pattern)) return fnmatch(pattern, name, 0) == 0;
    return strstr(name, pattern) != NULL;
}

static const char *torch_name_of(const est_tensor *t) { return t->torch_name ? t->torch_name : t->name; }

static bool param_matches(const est_tensor *t, const char *pattern) {
    return est_name_matches(pattern, t->name) || est_name_matches(pattern, torch_name_of(t));
}

static bool matches_any(const est_tensor *t, const char *const *patterns, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (param_matches(t, patterns[i])) return true;
    return false;
}

/* The parameters a node reads, in file order, into g->params. */
/* The floating dtype most parameter elements are declared in (dims the file
 * leaves symbolic count as 1); float32 when there is no floating parameter. */
static est_dtype dominant_dtype(const est_graph *g) {
    enum { N_DT = 32 };
    double elements[N_DT] = {0};
    for (int32_t i = 0; i < g->n_params; i++) {
        const est_tensor *t = &g->tensors[g->params[i]];
        if (!est__dtype_is_float(t->dtype) || (unsigned)t->dtype >= N_DT) continue;
        double n = 1;
        for (int32_t d = 0; d < t->rank && t->dims; d++) n *= t->dims[d].value > 0 ? (double)t->dims[d].value : 1;
        elements[t->dtype] += n;
    }
    est_dtype best = EST_DT_FLOAT;
    for (int dt = 0; dt < N_DT; dt++)
        if (elements[dt] > elements[best]) best = (est_dtype)dt;
    return best;
}

est_status est__graph_list_params(est_graph *g, est_error *err) {
    free(g->params);
    g->n_params = 0;
    for (int32_t t = 0; t < g->n_tensors; t++)
        g->n_params += g->tensors[t].kind == EST_T_INITIALIZER && g->tensors[t].role == EST_ROLE_PARAM &&
                       g->tensors[t].first_consumer >= 0;
    g->params = calloc((size_t)g->n_params + 1, sizeof *g->params);
    if (!g->params) return est__fail(err, EST_ENOMEM, "%s: out of memory", g->source);
    int32_t n = 0;
    for (int32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == EST_T_INITIALIZER && g->tensors[t].role == EST_ROLE_PARAM &&
            g->tensors[t].first_consumer >= 0)
            g->params[n++] = t;
    g->dtype = dominant_dtype(g);
    return EST_OK;
}

est_dtype est_graph_dtype(const est_graph *g) { return g ? g->dtype : EST_DT_FLOAT; }

size_t est_graph_param_count(const est_graph *g) { return g ? (size_t)g->n_params : 0; }

const char *est_graph_param_name(const est_graph *g, size_t i) {
    return g && i < (size_t)g->n_params ? g->tensors[g->params[i]].name : NULL;
}

const char *est_graph_param_torch_name(const est_graph *g, size_t i) {
    return g && i < (size_t)g->n_params ? torch_name_of(&g->tensors[g->params[i]]) : NULL;
}

/* A few parameter names for an error message: the first, the last and some
 * between, so that both a model's prefix and its adapters show. */
static void sample_names(const est_graph *g, char *buf, size_t size) {
    enum { SHOWN = 6 };
    buf[0] = '\0';
    int32_t n = g->n_params;
    for (int32_t k = 0; k < SHOWN && k < n; k++) {
        int32_t i = n <= SHOWN ? k : (int32_t)((int64_t)k * (n - 1) / (SHOWN - 1));
        const char *name = torch_name_of(&g->tensors[g->params[i]]);
        size_t len = strlen(buf);
        if (len + strlen(name) + 8 >= size) break;
        snprintf(buf + len, size - len, "%s'%s'", k ? ", " : "", name);
    }
}

static est_status check_patterns(const est_graph *g, const char *const *patterns, size_t n, const char *flag,
                                 est_error *err) {
    for (size_t p = 0; p < n; p++) {
        if (!patterns[p] || !*patterns[p]) return est__fail(err, EST_EINVAL, "%s: an empty pattern", flag);
        bool hit = false;
        for (int32_t i = 0; i < g->n_params && !hit; i++) hit = param_matches(&g->tensors[g->params[i]], patterns[p]);
        if (hit) continue;
        char names[400];
        sample_names(g, names, sizeof names);
        return est__fail(err, EST_EINVAL, "%s: %s pattern '%s' matches no parameter (%d parameters, named like %s)",
                         g->source, flag, patterns[p], (int)g->n_params, g->n_params ? names : "none");
    }
    return EST_OK;
}

est_status est_check_param_filter(const est_graph *g, const est_param_filter *f, est_error *err) {
    if (!g || !f) return est__fail(err, EST_EINVAL, "est_check_param_filter: graph or filter is NULL");
    if ((f->n_trainable && !f->trainable) || (f->n_frozen && !f->frozen))
        return est__fail(err, EST_EINVAL, "est_check_param_filter: a pattern list is NULL");
    est_status st = check_patterns(g, f->trainable, f->n_trainable, "--trainable", err);
    return st == EST_OK ? check_patterns(g, f->frozen, f->n_frozen, "--freeze", err) : st;
}

bool est__param_trains(const est_tensor *t, const est_param_filter *f) {
    if (f->n_trainable && !matches_any(t, f->trainable, f->n_trainable)) return false;
    return !matches_any(t, f->frozen, f->n_frozen);
}

/* ---- the report's list ------------------------------------------------------ */

est_status est__build_params(est_report *r, const est_param_filter *f, est_error *err) {
    const est_graph *g = r->graph;
    /* each entry written whole below, not zeroed first */
    r->params = malloc(((size_t)g->n_params + 1) * sizeof *r->params);
    r->trains = calloc((size_t)g->n_tensors + 1, sizeof *r->trains);
    if (!r->params || !r->trains) return est__fail(err, EST_ENOMEM, "out of memory");
    r->params[g->n_params] = (est_param_info){0};
    bool every_param_trains = !f->n_trainable && !f->n_frozen; /* no pattern to match */
    for (int32_t i = 0; i < g->n_params; i++) {
        int32_t t = g->params[i];
        const est_tensor *tt = &g->tensors[t];
        const est_tval *v = &r->tv[t];
        est_param_info *p = &r->params[i];
        *p = (est_param_info){.name = tt->name, .torch_name = torch_name_of(tt),
                              .dtype = est__stored_dtype(r, v->dtype), .rank = v->rank, .shape = v->dims,
                              .elements = (uint64_t)v->elements};
        p->bytes = est__dtype_bytes(p->dtype, p->elements);
        p->trainable = r->mode == EST_MODE_TRAIN && (every_param_trains || est__param_trains(tt, f));
        r->trains[t] = p->trainable;
        if (!p->trainable) continue;
        r->totals.trainable_param_count += p->elements;
        r->totals.trainable_param_bytes += p->bytes;
    }
    r->n_params = (size_t)g->n_params;
    return EST_OK;
}

size_t est_report_param_count(const est_report *r) { return r ? r->n_params : 0; }

const est_param_info *est_report_param(const est_report *r, size_t i) {
    return r && i < r->n_params ? &r->params[i] : NULL;
}
