/*
 * checkpoint.c: which nodes run inside the activation-checkpointing segments
 * that est_options.checkpoint names (memest --checkpoint).
 *
 * Segments come from module names: a name walk (module_names.h) turns each
 * node's scope into PyTorch's named_modules() names ("layer1", "layer1.0",
 * "layer1.0.conv1"), which is what the user writes.
 * A module call is a run of consecutive nodes in that module's scope; nodes
 * of unknown scope between two nodes of one call belong to it. simulate.c
 * replays what torch.utils.checkpoint does with each segment.
 */
#include <stdlib.h>
#include <string.h>

#include "module_names.h"
#include "report.h"

bool est__is_block_name(const char *name, size_t len) {
    size_t start = len;
    while (start > 0 && name[start - 1] != '.') start--;
    const char *last = name + start;
    size_t n = len - start, digits = 0;
    while (digits < n && last[n - 1 - digits] >= '0' && last[n - 1 - digits] <= '9') digits++;
    if (!digits) return false;
    return digits == n || last[n - 1 - digits] == '_';
}

/* Whether `name` starts with `prefix` or, with `drop_leading`, what is left
 * of it after whole leading parts go: "layers.3" matches "m.layers.3" and
 * "model.layers.3", the names an export's wrapper gives the user's module,
 * but not "xlayers.3". */
static bool starts_with(const char *name, const char *prefix, bool drop_leading) {
    size_t len = strlen(prefix);
    if (strncmp(name, prefix, len) == 0) return true;
    if (!drop_leading) return false;
    for (const char *dot = strchr(name, '.'); dot; dot = strchr(dot + 1, '.'))
        if (strncmp(dot + 1, prefix, len) == 0) return true;
    return false;
}

/* The spec, and per prefix whether it is matched with leading parts dropped:
 * only when no module's whole name starts with it, so that a direct match
 * wins over one inside a wrapper. */
typedef struct matcher {
    const est_checkpoint *spec;
    bool *drop_leading;
} matcher;

static bool matches(const matcher *m, const char *full) {
    if (m->spec->every > 0) return est__is_block_name(full, strlen(full));
    for (size_t p = 0; p < m->spec->n_prefixes; p++)
        if (starts_with(full, m->spec->prefixes[p], m->drop_leading[p])) return true;
    return false;
}

/* Sets m->drop_leading[p] for each prefix that starts no module's name. */
static void choose_prefix_matching(const est_graph *g, matcher *m, char *cur, char *parent) {
    for (size_t p = 0; p < m->spec->n_prefixes; p++) m->drop_leading[p] = true;
    est_name_walk w;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (!g->nodes[i].scope) continue;
        est__name_walk_start(&w, g->nodes[i].scope, cur, parent);
        while (est__name_walk_next(&w))
            for (size_t p = 0; p < m->spec->n_prefixes; p++)
                if (m->drop_leading[p] && starts_with(w.cur, m->spec->prefixes[p], false))
                    m->drop_leading[p] = false;
    }
}

/* Finds the outermost module of `scope` the spec matches: true with w->cur
 * its full name and w->parent its container's ("" at the top). */
static bool find_module(const matcher *m, const char *scope, est_name_walk *w, char *cur, char *parent) {
    est__name_walk_start(w, scope, cur, parent);
    while (est__name_walk_next(w))
        if (matches(m, w->cur)) {
            if (w->local == scope) w->parent[0] = '\0';
            return true;
        }
    return false;
}

typedef struct call {
    int32_t first, last;
    char *module;  /* full name */
    char *parent;  /* its container's full name ("" at the top) */
} call;

static void free_calls(call *calls, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        free(calls[i].module);
        free(calls[i].parent);
    }
    free(calls);
}

/* The calls of the modules the spec matches, in node order. */
static est_status find_calls(const est_graph *g, const est_checkpoint *spec, call **out, int32_t *n_out,
                             bool *any_scope, est_error *err) {
    size_t longest = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].scope && strlen(g->nodes[i].scope) > longest) longest = strlen(g->nodes[i].scope);
    char *buf_a = malloc(longest + 2), *buf_b = malloc(longest + 2); /* the walk's names */
    est_name_walk w;
    matcher m = {.spec = spec, .drop_leading = calloc(spec->n_prefixes + 1, sizeof *m.drop_leading)};
    call *calls = calloc((size_t)g->n_nodes + 1, sizeof *calls);
    int32_t n = 0;
    if (!buf_a || !buf_b || !m.drop_leading || !calls) goto oom;
    choose_prefix_matching(g, &m, buf_a, buf_b);
    *any_scope = false;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const char *scope = g->nodes[i].scope;
        if (!scope) continue; /* unknown: joins the call around it, if any */
        *any_scope |= *scope != '\0';
        if (!find_module(&m, scope, &w, buf_a, buf_b)) continue;
        if (n > 0 && strcmp(calls[n - 1].module, w.cur) == 0) {
            /* the same call goes on, unless a node outside it came between */
            bool outside = false;
            for (int32_t j = calls[n - 1].last + 1; j < i && !outside; j++) outside = g->nodes[j].scope != NULL;
            if (!outside) {
                calls[n - 1].last = i;
                continue;
            }
        }
        calls[n].first = calls[n].last = i;
        calls[n].module = est__strdup(w.cur);
        calls[n].parent = est__strdup(w.parent);
        n++;
        if (!calls[n - 1].module || !calls[n - 1].parent) goto oom;
    }
    free(buf_a);
    free(buf_b);
    free(m.drop_leading);
    *out = calls;
    *n_out = n;
    return EST_OK;
oom:
    free(buf_a);
    free(buf_b);
    free(m.drop_leading);
    free_calls(calls, n);
    return est__fail(err, EST_ENOMEM, "out of memory planning checkpoint segments");
}

/* every = N: consecutive calls of one container, N at a time. */
static int32_t group_blocks(const call *calls, int32_t n, int64_t every, est_segment *segs) {
    int32_t n_segs = 0;
    int64_t in_group = 0;
    for (int32_t c = 0; c < n; c++) {
        bool same_container = c > 0 && strcmp(calls[c].parent, calls[c - 1].parent) == 0;
        if (same_container && in_group < every) {
            segs[n_segs - 1].last = calls[c].last;
            in_group++;
            continue;
        }
        segs[n_segs++] = (est_segment){.first = calls[c].first, .last = calls[c].last};
        in_group = 1;
    }
    return n_segs;
}

static est_status no_segments(const est_graph *g, const est_checkpoint *spec, bool any_scope, est_error *err) {
    if (!any_scope)
        return est__fail(err, EST_EINVAL,
                         "%s: checkpointing needs module names, and this model has none (no node names a "
                         "module scope)",
                         g->source);
    if (spec->every > 0)
        return est__fail(err, EST_EINVAL,
                         "%s: checkpoint every=%lld: the model has no blocks (modules named by an index in "
                         "their container, such as layer1.0 or encoder_layer_3)",
                         g->source, (long long)spec->every);
    return est__fail(err, EST_EINVAL, "%s: checkpoint: no module name starts with '%s'%s, nor does its rest "
                     "after any dot (names look like PyTorch's named_modules(): layer1, layer1.0, "
                     "encoder.layer.3)",
                     g->source, spec->n_prefixes ? spec->prefixes[0] : "",
                     spec->n_prefixes > 1 ? " or the other prefixes" : "");
}

est_status est__plan_checkpoint(const est_graph *g, const est_checkpoint *spec, est_segment **out, int32_t *n_out,
                                est_error *err) {
    *out = NULL;
    *n_out = 0;
    if (spec->every < 0) return est__fail(err, EST_EINVAL, "checkpoint every=%lld: not a positive count", (long long)spec->every);
    if (spec->every > 0 && spec->n_prefixes)
        return est__fail(err, EST_EINVAL, "checkpoint: give prefixes or every=N, not both");
    for (size_t p = 0; p < spec->n_prefixes; p++)
        if (!spec->prefixes || !spec->prefixes[p] || !spec->prefixes[p][0])
            return est__fail(err, EST_EINVAL, "checkpoint: prefix %zu is empty", p + 1);
    call *calls = NULL;
    int32_t n_calls = 0;
    bool any_scope = false;
    est_status st = find_calls(g, spec, &calls, &n_calls, &any_scope, err);
    if (st != EST_OK) return st;
    est_segment *segs = calloc((size_t)n_calls + 1, sizeof *segs);
    if (!segs) {
        free_calls(calls, n_calls);
        return est__fail(err, EST_ENOMEM, "out of memory planning checkpoint segments");
    }
    int32_t n_segs = 0;
    if (spec->every > 0) n_segs = group_blocks(calls, n_calls, spec->every, segs);
    else
        for (int32_t c = 0; c < n_calls; c++) segs[n_segs++] = (est_segment){.first = calls[c].first, .last = calls[c].last};
    free_calls(calls, n_calls);
    if (!n_segs) {
        free(segs);
        return no_segments(g, spec, any_scope, err);
    }
    *out = segs;
    *n_out = n_segs;
    return EST_OK;
}
