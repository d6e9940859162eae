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
 * Made by the first estimate under the graph's lock and kept until the
 * graph is freed, so that several threads may estimate one graph.
 */
#include <stdlib.h>

#include "report.h"

static void plan_free(est_plan *p) {
    if (!p) return;
    for (int64_t i = 0; i < p->n_owned; i++) est__const_free(p->owned[i]);
    free(p->owned);
    free(p->tv);
    free(p->work);
    free(p);
}

static est_plan *plan_make(const est_graph *g) {
    est_plan *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->tv = calloc((size_t)g->n_tensors + 1, sizeof *p->tv);
    p->work = calloc((size_t)g->n_nodes + 1, sizeof *p->work);
    if (!p->tv || !p->work || est__infer_constants(g, p) != EST_OK) {
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
