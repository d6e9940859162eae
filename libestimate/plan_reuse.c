/*
 * plan_reuse.c: the step's lifetime plan (lifetimes.c), kept with the
 * graph's plan (plan.c) and taken by a later estimate whose planning would
 * read the same.
 *
 * The planning reads the graph, the options (the mode, the dtype, whose
 * kernels, autocast, the checkpointed segments), which parameters train,
 * each tensor's dtype and rank and whether it is folded, and of the sizes
 * only the facts it asks (est_size_fact: a bias add's element counts, a
 * recurrent output's directions, the returns_input rules, an unreached
 * node's saves) and the saves rules' answers (the saved inputs and outputs
 * and how many extras; their bytes are sizes). These are its key. An
 * estimate of the graph at another batch or other dims mostly reads the
 * same: the kept plan's key matches and it takes the kept arrays (what its
 * cost contexts classify too, and, but under FSDP, the step's visits that
 * est__sim_compact_for_step lists), asking only the facts and the saves
 * rules (the extras' bytes are its own); otherwise it plans, and its plan
 * is kept instead.
 *
 * The kept plan is replaced, and read, under the graph's lock; an estimate
 * copying it holds it (users), so that another may replace it meanwhile;
 * one that took it holds it until its visits are copied.
 * When the host runs out of memory keeping one, nothing is kept.
 */
#include "sim.h"

/* An array the planning writes, as one estimate holds it. */
typedef struct span {
    void *at;
    size_t bytes;           /* 0: the estimate has none (without --amp, --checkpoint) */
} span;

/* list_spans' order: first what est__sim_build_contexts classifies, then
 * what the saves rules read besides (the contexts' flags as planned, which
 * nodes are unreached), then the rest. */
enum { SPANS_CLASSIFIED = 4, SPAN_FLAGS = 4, SPANS_SAVES_READ = 6, N_SPANS = 24 };

struct est_lifetime_plan {
    int32_t users;          /* estimates copying it now (under the graph's lock) */
    /* the key */
    bool train;
    est_dtype dtype;
    est_kernels kernels;
    est_amp amp;
    bool has_segs;          /* checkpointing planned, maybe no segment */
    est_segment *segs;
    int32_t n_segs;
    uint64_t *tensor_key;   /* per tensor: tensor_key() */
    est_size_fact *facts;   /* in the order the planning asked them */
    int32_t n_facts;
    est_slot_mask *saved_inputs, *saved_outputs; /* the saves rules' answers */
    int32_t *extra_first;
    /* the plan: each span's bytes; the contexts' flags as built (no input
     * strided yet), their any_grad, and their dtypes under --amp */
    void *spans[N_SPANS];
    bool *built_flags;
    bool *any_grad;
    est_dtype *float_dtype;
    est_step_visits visits; /* without --fsdp, which visits every node */
};

/* The arrays the planning writes that the step reads, in one order: their
 * bytes are the same in every estimate whose key matches. The contexts'
 * flags hold their planned strides; the saves' masks and extras are asked
 * again. */
static void list_spans(const sim *s, span spans[N_SPANS]) {
    size_t nt = (size_t)s->g->n_tensors + 1, nn = (size_t)s->g->n_nodes + 1, n_segs = (size_t)s->n_segs;
    size_t flags = 3 * est__graph_slot_counts(s->g).inputs; /* each input's grad, strided and expanded flags */
    bool segs = s->segs != NULL, amp = s->dt != NULL;
    const span list[N_SPANS] = {
        {s->needs_grad, nt * sizeof *s->needs_grad},
        {s->activation, nt * sizeof *s->activation},
        {s->param, nt * sizeof *s->param},
        {s->grad_inputs, nn * sizeof *s->grad_inputs},
        {s->ctx_flags, flags * sizeof *s->ctx_flags},
        {s->unreached, nn * sizeof *s->unreached},
        {s->base, nt * sizeof *s->base},
        {s->inplace_slot, nn * sizeof *s->inplace_slot},
        {s->saved_until, nt * sizeof *s->saved_until},
        {s->kept, nt * sizeof *s->kept},
        {s->release_first, (nn + 1) * sizeof *s->release_first},
        {s->release_order, nt * sizeof *s->release_order},
        {s->bwd_first, (nn + 1) * sizeof *s->bwd_first},
        {s->bwd_order, nt * sizeof *s->bwd_order},
        {s->seg_last_saver, segs ? n_segs * sizeof *s->seg_last_saver : 0},
        {s->recompute_until, segs ? nt * sizeof *s->recompute_until : 0},
        {s->rc_last, segs ? nt * sizeof *s->rc_last : 0},
        {s->rc_first, segs ? (nn + 1) * sizeof *s->rc_first : 0},
        {s->rc_order, segs ? nt * sizeof *s->rc_order : 0},
        {s->dt, amp ? nt * sizeof *s->dt : 0},
        {s->cast_to, amp ? nn * sizeof *s->cast_to : 0},
        {s->cast_mask, amp ? nn * sizeof *s->cast_mask : 0},
        {s->cast_saved, amp ? nn * sizeof *s->cast_saved : 0},
        {s->pcast_until, amp ? nt * sizeof *s->pcast_until : 0},
    };
    memcpy(spans, list, sizeof list);
}

/* What the planning reads of tensor t besides its sizes: its dtype, its
 * rank (-1 to EST_MAX_RANK), whether it is folded and whether it trains. */
static inline uint64_t tensor_key(const est_report *r, int32_t t) {
    const est_tval *v = &r->tv[t];
    return (uint64_t)(uint32_t)v->dtype << 32 | (uint64_t)(uint8_t)v->rank << 8 | (uint64_t)(v->value != NULL) << 1 |
           (uint64_t)r->trains[t];
}

void est__lifetime_plan_free(est_lifetime_plan *p) {
    if (!p) return;
    free(p->segs);
    free(p->tensor_key);
    free(p->facts);
    free(p->saved_inputs);
    free(p->saved_outputs);
    free(p->extra_first);
    for (int j = 0; j < N_SPANS; j++) free(p->spans[j]);
    free(p->built_flags);
    free(p->any_grad);
    free(p->float_dtype);
    free(p->visits.trained);
    free(p->visits.fwd_nodes);
    free(p->visits.bwd_nodes);
    free(p->visits.fwd_runs);
    free(p->visits.fwd_allocates);
    free(p);
}

/* A copy of n bytes at src; NULL when n is 0 or out of memory (*ok false). */
static void *copy_of(const void *src, size_t n, bool *ok) {
    if (n == 0) return NULL;
    void *d = malloc(n);
    if (d) memcpy(d, src, n);
    else *ok = false;
    return d;
}

/* The plan just made, to keep; takes the facts. NULL: out of memory. */
static est_lifetime_plan *plan_to_keep(sim *s) {
    const est_graph *g = s->g;
    const est_report *r = s->r;
    est_lifetime_plan *p = malloc(sizeof *p);
    if (!p) return NULL;
    size_t nn = (size_t)g->n_nodes + 1; /* the nodes and the sentinel after them */
    bool ok = true;
    *p = (est_lifetime_plan){.train = s->train, .dtype = r->dtype, .kernels = r->kernels, .amp = r->amp,
                             .has_segs = s->segs != NULL, .n_segs = s->n_segs, .facts = s->facts,
                             .n_facts = s->n_facts};
    s->facts = NULL;
    p->segs = copy_of(s->segs, (size_t)s->n_segs * sizeof *s->segs, &ok);
    p->saved_inputs = copy_of(s->saved_inputs, nn * sizeof *s->saved_inputs, &ok);
    p->saved_outputs = copy_of(s->saved_outputs, nn * sizeof *s->saved_outputs, &ok);
    p->extra_first = copy_of(s->extra_first, nn * sizeof *s->extra_first, &ok);
    span spans[N_SPANS];
    list_spans(s, spans);
    for (int j = 0; j < N_SPANS; j++) p->spans[j] = copy_of(spans[j].at, spans[j].bytes, &ok);
    p->built_flags = copy_of(spans[SPAN_FLAGS].at, spans[SPAN_FLAGS].bytes, &ok);
    p->tensor_key = malloc(((size_t)g->n_tensors + 1) * sizeof *p->tensor_key);
    p->any_grad = malloc(nn * sizeof *p->any_grad);
    if (s->dt) p->float_dtype = malloc(nn * sizeof *p->float_dtype);
    est_step_visits *v = &p->visits;
    v->trained = malloc(((size_t)g->n_params + 1) * sizeof *v->trained);
    v->fwd_nodes = malloc(nn * sizeof *v->fwd_nodes);
    v->bwd_nodes = malloc(nn * sizeof *v->bwd_nodes);
    v->fwd_runs = malloc(nn * sizeof *v->fwd_runs);
    v->fwd_allocates = calloc((size_t)g->n_tensors + 1, sizeof *v->fwd_allocates);
    if (!ok || !p->tensor_key || !p->any_grad || (s->dt && !p->float_dtype) || !v->trained || !v->fwd_nodes ||
        !v->bwd_nodes || !v->fwd_runs || !v->fwd_allocates) {
        est__lifetime_plan_free(p);
        return NULL;
    }
    for (int32_t t = 0; t < g->n_tensors; t++) p->tensor_key[t] = tensor_key(r, t);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_cost_ctx *c = &s->ctx[i];
        p->any_grad[i] = c->any_grad;
        if (s->dt) p->float_dtype[i] = c->float_dtype;
        /* est__sim_build_contexts leaves no input strided or expanded */
        if (c->n_in) memset(p->built_flags + (est_cost_strided_flags(c) - s->ctx_flags), 0, 2 * (size_t)c->n_in);
    }
    est__sim_list_visits(s, p->any_grad, false, v);
    return p;
}

/* Whether estimate s reads, before it asks any fact, what kept plan p's
 * planning read (est__sim_build_contexts then classifies as it did). */
static bool key_matches(const sim *s, const est_lifetime_plan *p) {
    const est_report *r = s->r;
    if (p->train != s->train || p->dtype != r->dtype || p->kernels != r->kernels || p->amp != r->amp ||
        p->has_segs != (s->segs != NULL) || p->n_segs != s->n_segs)
        return false;
    for (int32_t k = 0; k < s->n_segs; k++)
        if (p->segs[k].first != s->segs[k].first || p->segs[k].last != s->segs[k].last) return false;
    const uint64_t *key = p->tensor_key;
    int32_t n_tensors = s->g->n_tensors;
    for (int32_t t = 0; t < n_tensors; t++)
        if (key[t] != tensor_key(r, t)) return false;
    return true;
}

/* Whether this estimate answers p's facts as its planning did: those of
 * the storages (asked before the contexts have their planned strides and
 * dtypes), or those of the unreached saves (after). */
static bool facts_hold(const sim *s, const est_lifetime_plan *p, bool unreached_saves) {
    for (int32_t j = 0; j < p->n_facts; j++) {
        const est_size_fact *f = &p->facts[j];
        if ((f->kind == FACT_UNREACHED_SAVES) == unreached_saves && est__sim_fact_answer(s, f) != f->answer)
            return false;
    }
    return true;
}

/* Whether the saves rules, asked (est__sim_ask_saves), answered what they
 * answered p's planning. */
static bool saves_match(const sim *s, const est_lifetime_plan *p) {
    size_t nn = (size_t)s->g->n_nodes + 1;
    return memcmp(s->saved_inputs, p->saved_inputs, nn * sizeof *p->saved_inputs) == 0 &&
           memcmp(s->saved_outputs, p->saved_outputs, nn * sizeof *p->saved_outputs) == 0 &&
           memcmp(s->extra_first, p->extra_first, nn * sizeof *p->extra_first) == 0;
}

/* Copies p's spans from .. to - 1 into this estimate's arrays (the key
 * matched: they have the same bytes). */
static void restore_spans(sim *s, const est_lifetime_plan *p, int from, int to) {
    span spans[N_SPANS];
    list_spans(s, spans);
    for (int j = from; j < to; j++)
        if (spans[j].bytes) memcpy(spans[j].at, p->spans[j], spans[j].bytes);
}

/* The contexts as est__sim_build_contexts leaves them, and nothing asked
 * of the saves yet: the state the planning starts from. False: out of
 * memory. */
static bool unwind(sim *s) {
    memset(s->unreached, 0, ((size_t)s->g->n_nodes + 1) * sizeof *s->unreached);
    s->n_extras = 0;
    free(s->ctx_tv);
    free(s->ctx_flags);
    s->ctx_tv = NULL;
    s->ctx_flags = NULL;
    return est__sim_build_contexts(s);
}

typedef enum { NOT_TAKEN, TAKEN, OUT_OF_MEMORY } taken;

/* The contexts as est__sim_build_contexts makes them, where the key
 * matched p's: what it classifies is p's. False: out of memory. */
static bool contexts_as_kept(sim *s, const est_lifetime_plan *p) {
    if (!est__sim_point_contexts(s, p->any_grad)) return false;
    restore_spans(s, p, 0, SPANS_CLASSIFIED);
    span spans[N_SPANS];
    list_spans(s, spans);
    if (spans[SPAN_FLAGS].bytes) memcpy(s->ctx_flags, p->built_flags, spans[SPAN_FLAGS].bytes);
    return true;
}

/* Takes kept plan p, whose key matched, when this estimate's planning
 * would read the same. */
static taken take_plan(sim *s, const est_lifetime_plan *p) {
    if (!facts_hold(s, p, false)) return NOT_TAKEN;
    /* the saves rules read the planned strides and dtypes, as planning asks them */
    restore_spans(s, p, SPAN_FLAGS, SPANS_SAVES_READ);
    for (int32_t i = 0; p->float_dtype && i < s->g->n_nodes; i++) s->ctx[i].float_dtype = p->float_dtype[i];
    if (!est__sim_ask_saves(s)) return OUT_OF_MEMORY;
    if (!facts_hold(s, p, true) || !saves_match(s, p)) return unwind(s) ? NOT_TAKEN : OUT_OF_MEMORY;
    restore_spans(s, p, SPANS_SAVES_READ, N_SPANS);
    return TAKEN;
}

/* The graph's kept plan, held; NULL: none. */
static est_lifetime_plan *hold_kept(const est_graph *g) {
    est_graph *mg = (est_graph *)g; /* the plan is a cache: the graph stays as loaded */
    pthread_mutex_lock(&mg->plan_lock);
    est_lifetime_plan *p = mg->plan ? mg->plan->lifetimes : NULL;
    if (p) p->users++;
    pthread_mutex_unlock(&mg->plan_lock);
    return p;
}

/* Lets go of p, which goes when it was replaced meanwhile and no other
 * estimate holds it. */
static void let_go(const est_graph *g, est_lifetime_plan *p) {
    est_graph *mg = (est_graph *)g;
    pthread_mutex_lock(&mg->plan_lock);
    bool gone = --p->users == 0 && mg->plan->lifetimes != p;
    pthread_mutex_unlock(&mg->plan_lock);
    if (gone) est__lifetime_plan_free(p);
}

/* Keeps p as the graph's plan of the step, in place of the one before. */
static void keep(const est_graph *g, est_lifetime_plan *p) {
    est_graph *mg = (est_graph *)g;
    pthread_mutex_lock(&mg->plan_lock);
    est_lifetime_plan *old = mg->plan->lifetimes;
    mg->plan->lifetimes = p;
    bool gone = old && old->users == 0;
    pthread_mutex_unlock(&mg->plan_lock);
    if (gone) est__lifetime_plan_free(old);
}

/* Whether an estimate planned the graph's step before this one, which
 * marks it planned. The first keeps no plan: a graph estimated once (a
 * memest run without --max-batch or --sweep) never reads one, and a large
 * graph's would be about a tenth more memory at the run's peak. */
static bool planned_before(const est_graph *g) {
    est_graph *mg = (est_graph *)g;
    pthread_mutex_lock(&mg->plan_lock);
    bool before = mg->plan->step_planned;
    mg->plan->step_planned = true;
    pthread_mutex_unlock(&mg->plan_lock);
    return before;
}

/* The planning of lifetimes.c, in its order. */
static bool plan_afresh(sim *s) {
    if (s->train && !est__sim_mark_unreached(s)) return false;
    est__sim_assign_storage(s);
    if (s->dt) est__sim_assign_amp_dtypes(s);
    return est__sim_plan_lifetimes(s);
}

bool est__sim_plan_step(sim *s) {
    bool has_plan = est__graph_plan(s->g) != NULL; /* else nothing is kept */
    est_lifetime_plan *kept = has_plan ? hold_kept(s->g) : NULL;
    bool same_key = kept && key_matches(s, kept);
    taken t = NOT_TAKEN;
    if (!(same_key ? contexts_as_kept(s, kept) : est__sim_build_contexts(s))) t = OUT_OF_MEMORY;
    else if (same_key) t = take_plan(s, kept);
    if (t == TAKEN) s->held_plan = kept; /* until its visits are copied */
    else if (kept) let_go(s->g, kept);
    if (t != NOT_TAKEN) return t == TAKEN;
    if (!plan_afresh(s)) return false;
    est_lifetime_plan *p = has_plan && !s->facts_lost && planned_before(s->g) ? plan_to_keep(s) : NULL;
    if (p) keep(s->g, p);
    return true;
}

bool est__sim_visits_as_kept(sim *s, est_step_visits *v) {
    const est_lifetime_plan *p = s->held_plan;
    if (!p || s->sharded) return false;
    const est_step_visits *kept = &p->visits;
    size_t nt = (size_t)s->g->n_tensors + 1;
    memcpy(v->trained, kept->trained, (size_t)kept->n_trained * sizeof *v->trained);
    memcpy(v->fwd_nodes, kept->fwd_nodes, (size_t)kept->n_fwd * sizeof *v->fwd_nodes);
    memcpy(v->fwd_runs, kept->fwd_runs, (size_t)kept->n_fwd * sizeof *v->fwd_runs);
    memcpy(v->bwd_nodes, kept->bwd_nodes, (size_t)kept->n_bwd * sizeof *v->bwd_nodes);
    memcpy(v->fwd_allocates, kept->fwd_allocates, nt * sizeof *v->fwd_allocates);
    v->n_trained = kept->n_trained, v->n_fwd = kept->n_fwd, v->n_bwd = kept->n_bwd;
    return true;
}

void est__sim_let_go_of_plan(sim *s) {
    if (s->held_plan) let_go(s->g, s->held_plan);
    s->held_plan = NULL;
}
