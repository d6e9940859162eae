/*
 * plan.c: what every estimate of a graph shares, computed once.
 *
 * A graph is loaded once and estimated many times (--max-batch, --sweep, a
 * library caller's loop). Part of each estimate does not depend on the
 * options: the nodes whose inputs all come from initializers and Constant
 * nodes compute the same shapes and folded values whatever the batch, the
 * dims and the input shapes (Swin's window masks, position tables). The
 * plan holds them; est__infer copies them in and skips those nodes.
 *
 * What the graph's inputs feed can still be folded the same way by every
 * estimate: Swin's masks come from Shape(x), whose spatial dims do not
 * change with the batch. The first estimate records each node that folded
 * an output (the memo); a later one whose inputs to such a node are the
 * same (dims and values) takes its outputs from the memo.
 *
 * Made by the first estimate under the graph's lock and kept until the
 * graph is freed, so that several threads may estimate one graph.
 */
#include <stdlib.h>
#include <string.h>

#include "report.h"

static void memo_free(est_memo *m) {
    if (!m) return;
    for (int64_t i = 0; i < m->n_owned; i++) est__const_free(m->owned[i]);
    free(m->owned);
    free(m->slot);
    free(m->tv);
    free(m->dims);
    free(m->work);
    free(m);
}

void est__weights_free(est_weights *w) {
    if (!w) return;
    free(w->uploaded);
    free(w->inputs);
    free(w->layers);
    free(w);
}

/* Node i's weights as est_layer counts them: the initializers it is the
 * first to read, each once; false when a count saturates. */
static bool layer_weights(const est_graph *g, int32_t i, est_layer_weights *w) {
    const est_node *n = &g->nodes[i];
    bool exact = true;
    *w = (est_layer_weights){.node = i};
    for (int32_t k = 0; k < n->n_inputs; k++) {
        int32_t t = n->inputs[k];
        if (t < 0) continue;
        const est_tensor *tt = &g->tensors[t];
        if (tt->kind != EST_T_INITIALIZER || tt->first_consumer != i) continue;
        bool seen = false; /* the same weight twice in one node counts once */
        for (int32_t j = 0; j < k; j++) seen |= n->inputs[j] == t;
        if (seen) continue;
        uint64_t elements = (uint64_t)est__initializer_elements(tt);
        uint64_t bytes = est__dtype_bytes(tt->dtype, elements);
        if (tt->role == EST_ROLE_PARAM) {
            w->param_count = est_add_sat(w->param_count, elements);
            w->param_bytes = est_add_sat(w->param_bytes, bytes);
            exact &= w->param_count != UINT64_MAX && w->param_bytes != UINT64_MAX;
        } else if (tt->role == EST_ROLE_BUFFER) {
            w->buffer_bytes = est_add_sat(w->buffer_bytes, bytes);
            exact &= w->buffer_bytes != UINT64_MAX;
        }
    }
    return exact;
}

/* *sum += v, saturating; false when the sum saturates. */
static bool add_count(uint64_t *sum, uint64_t v) {
    *sum = est_add_sat(*sum, v);
    return *sum != UINT64_MAX;
}

est_weights *est__weights_make(const est_graph *g) {
    est_weights *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    int32_t n_uploaded = 0, n_inputs = 0, n_layers = 0;
    for (int32_t t = 0; t < g->n_tensors; t++) {
        const est_tensor *tt = &g->tensors[t];
        n_uploaded += tt->kind == EST_T_INITIALIZER && tt->first_consumer >= 0;
        n_inputs += tt->kind == EST_T_INPUT;
        n_layers += tt->kind == EST_T_INITIALIZER && tt->first_consumer >= 0; /* at most one layer each */
    }
    w->uploaded = malloc(((size_t)n_uploaded + 1) * sizeof *w->uploaded);
    w->inputs = malloc(((size_t)n_inputs + 1) * sizeof *w->inputs);
    w->layers = malloc(((size_t)n_layers + 1) * sizeof *w->layers);
    if (!w->uploaded || !w->inputs || !w->layers) {
        est__weights_free(w);
        return NULL;
    }
    w->exact = true;
    for (int32_t t = 0; t < g->n_tensors; t++) {
        const est_tensor *tt = &g->tensors[t];
        if (tt->kind == EST_T_INPUT) w->inputs[w->n_inputs++] = t;
        if (tt->kind != EST_T_INITIALIZER || tt->first_consumer < 0) continue;
        w->uploaded[w->n_uploaded++] = t;
        uint64_t elements = (uint64_t)est__initializer_elements(tt);
        uint64_t bytes = est__dtype_bytes(tt->dtype, elements);
        if (tt->role == EST_ROLE_PARAM) {
            w->exact &= add_count(&w->param_count, elements);
            w->exact &= add_count(&w->param_bytes, bytes);
        } else if (tt->role == EST_ROLE_BUFFER) {
            w->exact &= add_count(&w->buffer_count, elements);
            w->exact &= add_count(&w->buffer_bytes, bytes);
        } else {
            w->exact &= add_count(&w->constant_bytes, bytes);
        }
    }
    for (int32_t i = 0; i < g->n_nodes && n_layers > 0; i++) {
        est_layer_weights lw;
        w->exact &= layer_weights(g, i, &lw);
        if (lw.param_count || lw.param_bytes || lw.buffer_bytes) w->layers[w->n_layers++] = lw;
    }
    return w;
}

static void plan_free(est_plan *p) {
    if (!p) return;
    est__weights_free(p->weights);
    est__lifetime_plan_free(p->lifetimes);
    memo_free((est_memo *)p->memo);
    for (int64_t i = 0; i < p->n_owned; i++) est__const_free(p->owned[i]);
    free(p->owned);
    free(p->slot);
    free(p->tv);
    free(p->work);
    free(p->unplanned);
    free(p->planned_before);
    free(p->arity_fits);
    free(p->attrs_at);
    free(p->node_attrs);
    free(p);
}

/* The known attribute a name may be, by its first character (no two
 * known names share one); -1 none. */
static int known_by_first_char(char c) {
    switch (c) {
    case 'g': return EST_KA_GROUP;
    case 'k': return EST_KA_KERNEL_SHAPE;
    case 's': return EST_KA_STRIDES;
    case 'd': return EST_KA_DILATIONS;
    case 'p': return EST_KA_PADS;
    case 'a': return EST_KA_AUTO_PAD;
    case 't': return EST_KA_TRAINING_MODE;
    default: return -1;
    }
}

/* Node n's known attributes, each the first of its name, in one pass over
 * its attributes (the first two characters spare most strcmp calls);
 * false when it has none. */
static bool find_known_attrs(const est_node *n, est_node_attrs *a) {
    *a = (est_node_attrs){{0}};
    bool any = false;
    for (int32_t j = 0; j < n->n_attrs; j++) {
        const est_attr *attr = &n->attrs[j];
        int k = known_by_first_char(attr->name[0]);
        if (k < 0 || a->of[k]) continue;
        const char *name = est_known_attr_names[k];
        if (attr->name[1] != name[1] || strcmp(attr->name, name) != 0) continue;
        a->of[k] = attr;
        any = true;
    }
    return any;
}

/* The plan's attrs_at and node_attrs; false when out of memory. */
static bool list_known_attrs(const est_graph *g, est_plan *p) {
    int32_t n = 0, cap = 0;
    p->attrs_at = malloc(((size_t)g->n_nodes + 1) * sizeof *p->attrs_at);
    if (!p->attrs_at) return false;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        est_node_attrs a;
        p->attrs_at[i] = -1;
        if (g->nodes[i].n_attrs == 0 || !find_known_attrs(&g->nodes[i], &a)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            est_node_attrs *grown = realloc(p->node_attrs, (size_t)cap * sizeof *grown);
            if (!grown) return false;
            p->node_attrs = grown;
        }
        p->node_attrs[n] = a;
        p->attrs_at[i] = n++;
    }
    return true;
}

const est_node_attrs est__no_node_attrs = {{0}};

/* The plan's unplanned, planned_before and arity_fits, from its work;
 * false when out of memory. */
static bool list_unplanned(const est_graph *g, est_plan *p) {
    int32_t n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) n += p->work[i] == 0;
    p->unplanned = malloc(((size_t)n + 1) * sizeof *p->unplanned);
    p->planned_before = malloc(((size_t)n + 1) * sizeof *p->planned_before);
    p->arity_fits = malloc(((size_t)n + 1) * sizeof *p->arity_fits);
    if (!p->unplanned || !p->planned_before || !p->arity_fits) return false;
    uint64_t since = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (p->work[i]) {
            since += p->work[i];
            continue;
        }
        p->unplanned[p->n_unplanned] = i;
        p->arity_fits[p->n_unplanned] = g->nodes[i].op && est__arity_fits(&g->nodes[i]);
        p->planned_before[p->n_unplanned++] = since;
        since = 0;
    }
    return true;
}

static est_slot_counts count_slots(const est_graph *g) {
    est_slot_counts c = {0};
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_node *n = &g->nodes[i];
        c.inputs += (size_t)n->n_inputs;
        c.outputs += (size_t)n->n_outputs;
        for (int k = 0; k < n->n_inputs; k++) c.tensors += n->inputs[k] >= 0;
        for (int k = 0; k < n->n_outputs; k++) c.tensors += n->outputs[k] >= 0;
    }
    return c;
}

static est_plan *plan_make(const est_graph *g) {
    est_plan *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->slot = malloc(((size_t)g->n_tensors + 1) * sizeof *p->slot);
    p->work = calloc((size_t)g->n_nodes + 1, sizeof *p->work);
    p->slots = count_slots(g);
    p->weights = est__weights_make(g);
    if (!p->slot || !p->work || !p->weights || !list_known_attrs(g, p) || est__infer_constants(g, p) != EST_OK ||
        !list_unplanned(g, p)) {
        plan_free(p);
        return NULL;
    }
    return p;
}

const est_plan *est__graph_plan(const est_graph *g) {
    est_graph *mg = (est_graph *)g; /* the plan is a cache: the graph stays as loaded */
    pthread_mutex_lock(&mg->plan_lock);
    if (!mg->plan && (mg->plan = plan_make(g)) != NULL) mg->plan_free = plan_free;
    const est_plan *p = mg->plan;
    pthread_mutex_unlock(&mg->plan_lock);
    return p;
}

est_slot_counts est__graph_slot_counts(const est_graph *g) {
    const est_plan *p = est__graph_plan(g);
    return p ? p->slots : count_slots(g);
}

const est_weights *est__graph_weights(const est_graph *g) {
    const est_plan *p = est__graph_plan(g);
    return p ? p->weights : NULL;
}

static bool values_same(const est_const *x, const est_const *y) {
    if (x == y) return true;
    if (!x || !y || x->count != y->count || x->dtype != y->dtype || !x->i64 != !y->i64) return false;
    size_t n = (size_t)x->count * (x->i64 ? sizeof *x->i64 : sizeof *x->f64);
    return memcmp(x->i64 ? (const void *)x->i64 : (const void *)x->f64,
                  y->i64 ? (const void *)y->i64 : (const void *)y->f64, n) == 0;
}

bool est__memo_same(const est_memo *m, int32_t slot, const est_tval *a) {
    const est_memo_tval *v = &m->tv[slot];
    if (a->dtype != v->dtype || a->rank != v->rank || a->elements != v->elements) return false;
    for (int32_t d = 0; d < a->rank; d++) /* a few dims: compared here, not by a call */
        if (a->dims[d] != m->dims[v->dims_at + d]) return false;
    return values_same(a->value, v->value);
}

const est_memo *est__plan_memo(const est_graph *g) {
    est_graph *mg = (est_graph *)g;
    pthread_mutex_lock(&mg->plan_lock);
    const est_memo *m = mg->plan ? mg->plan->memo : NULL;
    pthread_mutex_unlock(&mg->plan_lock);
    return m;
}

/* c, with a reference the memo owns; NULL when out of memory. */
static est_const *own_ref(est_memo *m, est_const *c, int64_t *cap) {
    if (m->n_owned == *cap) {
        int64_t ncap = *cap ? 2 * *cap : 64;
        est_const **no = realloc(m->owned, (size_t)ncap * sizeof *no);
        if (!no) return NULL;
        m->owned = no, *cap = ncap;
    }
    return m->owned[m->n_owned++] = est__const_ref(c);
}

void est__memo_tval(const est_memo *m, int32_t slot, est_tval *out) {
    const est_memo_tval *v = &m->tv[slot];
    *out = (est_tval){.dtype = v->dtype, .rank = v->rank, .elements = v->elements, .value = v->value};
    for (int32_t d = 0; d < v->rank; d++) out->dims[d] = m->dims[v->dims_at + d]; /* a few: no call */
}

/* Gives tensor t a slot holding r's state of it (its value shared). */
static bool memo_tensor(est_memo *m, const est_report *r, int32_t t, int64_t *cap) {
    if (m->slot[t] >= 0) return true;
    const est_tval *v = &r->tv[t];
    int32_t rank = v->rank > 0 ? v->rank : 0;
    if (m->n_slots == m->cap_slots) {
        int32_t ncap = m->cap_slots ? 2 * m->cap_slots : 64;
        est_memo_tval *ntv = realloc(m->tv, (size_t)ncap * sizeof *ntv);
        if (!ntv) return false;
        m->tv = ntv, m->cap_slots = ncap;
    }
    if (m->n_dims + rank > m->cap_dims) {
        int64_t ncap = m->cap_dims ? 2 * m->cap_dims : 256;
        int64_t *nd = realloc(m->dims, (size_t)ncap * sizeof *nd);
        if (!nd) return false;
        m->dims = nd, m->cap_dims = ncap;
    }
    const est_plan *p = r->graph->plan;
    /* its value is the plan's or the graph's, alive as long */
    bool planned = p && (p->slot[t] >= 0 || r->graph->tensors[t].kind == EST_T_INITIALIZER);
    const est_const *value = v->value;
    if (value && !planned && !(value = own_ref(m, (est_const *)value, cap))) return false;
    m->tv[m->n_slots] = (est_memo_tval){.dtype = v->dtype, .rank = v->rank, .elements = v->elements,
                                        .value = value, .dims_at = m->n_dims};
    if (rank) memcpy(m->dims + m->n_dims, v->dims, (size_t)rank * sizeof *m->dims); /* dims is NULL until a rank */
    m->n_dims += rank;
    m->slot[t] = m->n_slots++;
    return true;
}

static est_memo *memo_make(const est_graph *g, const est_report *r, const uint64_t *node_work) {
    est_memo *m = calloc(1, sizeof *m);
    int64_t cap = 0;
    if (!m || !(m->slot = malloc(((size_t)g->n_tensors + 1) * sizeof *m->slot)) ||
        !(m->work = calloc((size_t)g->n_nodes + 1, sizeof *m->work))) {
        memo_free(m);
        return NULL;
    }
    for (int32_t t = 0; t < g->n_tensors; t++) m->slot[t] = -1;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_node *n = &g->nodes[i];
        bool folded = false;
        for (int k = 0; k < n->n_outputs; k++) folded |= n->outputs[k] >= 0 && r->tv[n->outputs[k]].value != NULL;
        if (!folded || !node_work[i] || (g->plan && g->plan->work[i])) continue;
        bool ok = true;
        for (int k = 0; ok && k < n->n_inputs; k++) ok = n->inputs[k] < 0 || memo_tensor(m, r, n->inputs[k], &cap);
        for (int k = 0; ok && k < n->n_outputs; k++) ok = n->outputs[k] < 0 || memo_tensor(m, r, n->outputs[k], &cap);
        if (!ok) {
            memo_free(m);
            return NULL;
        }
        m->work[i] = node_work[i];
    }
    return m;
}

void est__plan_record_memo(const est_graph *g, const est_report *r, const uint64_t *node_work) {
    est_graph *mg = (est_graph *)g;
    pthread_mutex_lock(&mg->plan_lock);
    if (mg->plan && !mg->plan->memo) mg->plan->memo = memo_make(g, r, node_work);
    pthread_mutex_unlock(&mg->plan_lock);
}
