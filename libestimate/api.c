/* api.c: est_estimate() and the report's accessors. */
#include <stdlib.h>
#include <string.h>

#include "parallel.h"

void est_options_init(est_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->mode = EST_MODE_TRAIN;
    opt->optimizer = EST_OPT_ADAM;
    opt->dtype = EST_DT_UNDEFINED;
}

static const char *const mode_names[] = {[EST_MODE_TRAIN] = "train", [EST_MODE_INFER] = "infer"};
static const char *const optimizer_names[] = {
    [EST_OPT_ADAM] = "adam", [EST_OPT_ADAMW] = "adamw", [EST_OPT_SGD] = "sgd", [EST_OPT_MOMENTUM] = "momentum",
    [EST_OPT_ADAFACTOR] = "adafactor"};
static const char *const phase_names[] = {
#define PHASE_NAME(e, name) [EST_PHASE_##e] = #name,
    EST_PHASES(PHASE_NAME)
#undef PHASE_NAME
};
static const char *const strategy_names[] = {
#define STRATEGY_NAME(e, name) [EST_STRATEGY_##e] = name,
    EST_STRATEGIES(STRATEGY_NAME)
#undef STRATEGY_NAME
};
static const char *const category_names[] = {
#define CATEGORY_NAME(e, name) [EST_CAT_##e] = #name,
    EST_CATEGORIES(CATEGORY_NAME)
#undef CATEGORY_NAME
};

const char *est_mode_name(est_mode m) { return (unsigned)m < 2 ? mode_names[m] : "unknown"; }
const char *est_optimizer_name(est_optimizer o) {
    return (unsigned)o < EST_OPT_COUNT ? optimizer_names[o] : "unknown";
}
const char *est_phase_name(est_phase p) { return (unsigned)p < EST_PHASE_COUNT ? phase_names[p] : "unknown"; }
const char *est_strategy_name(est_strategy s) {
    return (unsigned)s < EST_STRATEGY_COUNT ? strategy_names[s] : "unknown";
}
const char *est_category_name(est_category c) {
    return (unsigned)c < EST_CAT_COUNT ? category_names[c] : "unknown";
}

uint64_t est_peak_category(const est_peak *p, est_category c) {
    switch (p ? c : EST_CAT_COUNT) {
#define CATEGORY_FIELD(e, name) case EST_CAT_##e: return p->name;
    EST_CATEGORIES(CATEGORY_FIELD)
#undef CATEGORY_FIELD
    default: return 0;
    }
}

static int index_of(const char *const *names, int n, const char *name) {
    for (int i = 0; name && i < n; i++)
        if (strcmp(names[i], name) == 0) return i;
    return -1;
}

int est_mode_from_name(const char *name) { return index_of(mode_names, 2, name); }
int est_optimizer_from_name(const char *name) { return index_of(optimizer_names, EST_OPT_COUNT, name); }
int est_strategy_from_name(const char *name) { return index_of(strategy_names, EST_STRATEGY_COUNT, name); }

void est_report_free(est_report *r) {
    if (!r) return;
    for (int64_t i = 0; i < r->n_owned; i++) est__const_free(r->owned[i]);
    free(r->owned);
    free(r->tv);
    free(r->dims);
    for (int32_t i = 0; i < r->n_new_symbols; i++) free(r->new_symbols[i]);
    free(r->new_symbols);
    free(r->layers);
    free(r->infos);
    free(r->outputs);
    free(r->params);
    free(r->trains);
    for (size_t i = 0; i < r->n_tp_pairs; i++) free(r->tp_blocks[i]);
    free(r->tp_blocks);
    free(r->tp_pairs);
    free(r->tp_columns);
    free(r->events);
    free(r->live);
    free(r);
}

static inline void fill_info(const est_tval *tv, const est_tensor *tensors, int32_t t, est_tensor_info *info) {
    /* read whole before the stores, which may alias them */
    const est_tval *v = &tv[t];
    const char *name = tensors[t].name;
    est_dtype dtype = v->dtype;
    int32_t rank = v->rank;
    uint64_t elements = (uint64_t)v->elements;
    info->name = name;
    info->dtype = dtype;
    info->rank = rank;
    info->shape = v->dims;
    info->elements = elements;
    info->bytes = est__dtype_bytes(dtype, elements);
}

/* *sum += v, saturating; false when the sum saturates (a count too large
 * to report; UINT64_MAX in v already is one). */
static bool add_bytes(uint64_t *sum, uint64_t v) {
    *sum = est_add_sat(*sum, v);
    return *sum != UINT64_MAX;
}

/* The layers' array, allocated before shape inference, which has a large
 * one's pages faulted in on a second thread meanwhile (with its tensor
 * states', *pf). build_layers writes each layer whole, not zeroed first (a
 * 1M-node graph's layers are 160 MB). */
static est_status alloc_layers(est_report *r, est_prefault *pf, est_error *err) {
    size_t n = (size_t)r->graph->n_nodes + 1;
    r->layers = malloc(n * sizeof *r->layers);
    if (!r->layers) return est__fail(err, EST_ENOMEM, "out of memory");
    est__prefault_add(pf, r->layers, n * sizeof *r->layers);
    return EST_OK;
}

/* The layers' and the totals' counts of the graph's weights and inputs. */
static bool weigh_model(est_report *r, const est_weights *w) {
    est_totals *tot = &r->totals;
    bool exact = true;
    for (int32_t j = 0; j < w->n_layers; j++) {
        const est_layer_weights *lw = &w->layers[j];
        est_layer *L = &r->layers[lw->node];
        L->param_count = lw->param_count, L->param_bytes = lw->param_bytes, L->buffer_bytes = lw->buffer_bytes;
    }
    for (int32_t j = 0; j < w->n_inputs; j++) {
        const est_tval *v = &r->tv[w->inputs[j]];
        exact &= add_bytes(&tot->input_bytes, est__dtype_bytes(v->dtype, (uint64_t)v->elements));
    }
    tot->param_count = w->param_count;
    tot->param_bytes = w->param_bytes;
    tot->buffer_count = w->buffer_count;
    tot->buffer_bytes = w->buffer_bytes;
    tot->constant_bytes = w->constant_bytes;
    return exact && w->exact;
}

/* The layers and the totals; the layers' tensors are filled in later
 * (link_tensor_infos). */
static est_status build_layers(est_report *r, est_error *err) {
    const est_graph *g = r->graph;
    bool exact = true;
    r->layers[g->n_nodes] = (est_layer){0};
    est_totals *tot = &r->totals;
    const est_tval *tv = r->tv;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_node *n = &g->nodes[i];
        uint64_t output_bytes = 0;
        bool shape_only = n->n_outputs > 0;
        for (int32_t k = 0; k < n->n_outputs; k++) {
            int32_t t = n->outputs[k];
            if (t < 0) continue;
            exact &= add_bytes(&output_bytes, est__dtype_bytes(tv[t].dtype, (uint64_t)tv[t].elements));
            shape_only &= tv[t].value != NULL;
        }
        /* every field, in place (a literal is built aside and copied) */
        est_layer *L = &r->layers[i];
        L->name = n->name, L->op = n->op_type, L->domain = n->domain;
        L->n_inputs = 0, L->inputs = NULL, L->n_outputs = 0, L->outputs = NULL;
        L->param_count = L->param_bytes = L->buffer_bytes = 0;
        L->output_bytes = output_bytes;
        L->flops_forward = L->flops_backward = L->saved_bytes = L->temp_bytes = 0;
        L->shape_only = shape_only;
        L->segment = -1;
        L->recomputed = 0;
        L->module = n->module, L->label = n->label;
        exact &= add_bytes(&tot->output_bytes, output_bytes);
    }
    r->n_layers = (size_t)g->n_nodes;
    const est_weights *w = est__graph_weights(g);
    est_weights *own = w ? NULL : est__weights_make(g); /* no plan (out of memory): this estimate's own */
    if (!w && !own) return est__fail(err, EST_ENOMEM, "out of memory");
    exact &= weigh_model(r, w ? w : own);
    est__weights_free(own);
    if (!exact)
        return est__fail(err, EST_EOVERFLOW, "%s: the model's byte counts pass 2^64 - 1 (16 EiB); the model, the "
                         "batch or the dims are too large", g->source);
    return EST_OK;
}

/* The array of the layers' inputs and outputs (a 1M-node graph's is 113
 * MB): allocated before the simulation, so that the heap keeps its shape
 * from one estimate to the next (allocated after, glibc trimmed and grew
 * the heap at every re-estimate of a resnet50: 4% slower), but written
 * after it (link_tensor_infos), when the simulation's arrays are freed. */
static est_status alloc_tensor_infos(est_report *r, est_error *err) {
    const est_graph *g = r->graph;
    size_t n_infos = est__graph_slot_counts(g).tensors;
    r->n_infos = n_infos;
    r->infos = malloc((n_infos + 1) * sizeof *r->infos);
    r->outputs = calloc((size_t)g->n_outputs + 1, sizeof *r->outputs);
    return r->infos && r->outputs ? EST_OK : est__fail(err, EST_ENOMEM, "out of memory");
}

/* Each layer's inputs and outputs and the graph's outputs. A large array's
 * pages are faulted in on a second thread meanwhile: not while the
 * simulation's arrays are alive, which would raise the peak. */
static void link_tensor_infos(est_report *r) {
    const est_graph *g = r->graph;
    est_prefault pf = {0};
    est__prefault_add(&pf, r->infos, (r->n_infos + 1) * sizeof *r->infos);
    est__prefault_start(&pf);
    est_tensor_info *next = r->infos;
    /* in locals: the stores to the infos and layers may alias them */
    const est_tval *tv = r->tv;
    const est_tensor *tensors = g->tensors;
    const est_node *nodes = g->nodes;
    est_layer *layers = r->layers;
    int32_t n_nodes = g->n_nodes;
    for (int32_t i = 0; i < n_nodes; i++) {
        const est_node *n = &nodes[i];
        const int32_t *inputs = n->inputs, *outputs = n->outputs;
        int n_in = n->n_inputs, n_out = n->n_outputs;
        est_tensor_info *first = next;
        for (int32_t k = 0; k < n_in; k++)
            if (inputs[k] >= 0) fill_info(tv, tensors, inputs[k], next++);
        layers[i].inputs = first;
        layers[i].n_inputs = (size_t)(next - first);
        first = next;
        for (int32_t k = 0; k < n_out; k++)
            if (outputs[k] >= 0) fill_info(tv, tensors, outputs[k], next++);
        layers[i].outputs = first;
        layers[i].n_outputs = (size_t)(next - first);
    }
    for (int32_t k = 0; k < g->n_outputs; k++) fill_info(tv, tensors, g->outputs[k], &r->outputs[k]);
    r->n_outputs = (size_t)g->n_outputs;
    est__prefault_wait(&pf);
}

/* simulate.c names the peak's layer by its node's name string itself; that
 * node gives the peak its module and label. */
/* An array the options count but do not give (n > 0 with NULL) is the
 * caller's mistake, refused before anything reads it. */
static est_status check_option_arrays(const est_options *o, est_error *err) {
    const struct {
        const void *array;
        size_t n;
        const char *name;
    } arrays[] = {
        {o->dims, o->n_dims, "dims"},
        {o->values, o->n_values, "values"},
        {o->input_shapes, o->n_input_shapes, "input_shapes"},
        {o->checkpoint.prefixes, o->checkpoint.n_prefixes, "checkpoint.prefixes"},
        {o->params.trainable, o->params.n_trainable, "params.trainable"},
        {o->params.frozen, o->params.n_frozen, "params.frozen"},
    };
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
        if (arrays[i].n && !arrays[i].array)
            return est__fail(err, EST_EINVAL, "est_estimate: est_options.%s is NULL but counts %zu", arrays[i].name,
                             arrays[i].n);
    return EST_OK;
}

static void describe_peak(est_report *r) {
    est_peak *p = &r->peak;
    p->module = NULL;
    p->label = p->layer;
    for (size_t i = 0; i < r->n_layers; i++)
        if (r->layers[i].name == p->layer) {
            p->module = r->layers[i].module;
            p->label = r->layers[i].label;
            return;
        }
}

/* The step's estimate: est_estimate's argument checks and all of its work
 * but the second estimate of DDP's first-bucket race (api.c's
 * add_first_bucket_race). Without with_tensors, the layers' inputs and
 * outputs and the graph's outputs stay unset (a capacity point keeps only
 * the peak and totals). */
static est_status estimate_step(const est_graph *g, const est_options *opt, bool with_tensors, est_report **out,
                                est_error *err) {
    *out = NULL;
    est_status opt_st = check_option_arrays(opt, err);
    if (opt_st != EST_OK) return opt_st;
    est_report *r = calloc(1, sizeof *r);
    if (!r) return est__fail(err, EST_ENOMEM, "out of memory");
    r->graph = g;
    r->batch = opt->batch;
    r->mode = opt->mode;
    r->optimizer = opt->optimizer;
    r->dtype = opt->dtype == EST_DT_UNDEFINED ? g->dtype : opt->dtype;
    r->kernels = opt->kernels;
    r->device = opt->device ? opt->device : est__default_device();
    r->amp = opt->amp;
    r->checkpoint = opt->checkpoint;
    r->memory_limit = opt->memory_limit;
    r->skip_reserved = opt->skip_reserved != 0;
    r->timeline = opt->timeline != 0;
    r->grad_accum = opt->grad_accum > 1 ? opt->grad_accum : 1;
    r->parallel = opt->parallel;
    if (r->parallel.tp < 1) r->parallel.tp = 1;
    if (r->parallel.world_size < 1) r->parallel.world_size = r->parallel.tp;
    est_status st = EST_OK;
    if ((unsigned)r->mode > EST_MODE_INFER || (unsigned)r->optimizer >= EST_OPT_COUNT ||
        (unsigned)r->kernels > EST_KERNELS_VERIFY)
        st = est__fail(err, EST_EINVAL, "est_estimate: invalid mode, optimizer or kernels");
    else if (r->dtype != EST_DT_FLOAT && r->dtype != EST_DT_FLOAT16 && r->dtype != EST_DT_BFLOAT16 &&
             r->dtype != g->dtype)
        st = est__fail(err, EST_EINVAL, "est_estimate: dtype %s is not float32, float16 or bfloat16",
                       est_dtype_name(r->dtype));
    else if ((unsigned)r->amp > EST_AMP_FP16)
        st = est__fail(err, EST_EINVAL, "est_estimate: invalid amp");
    else if (r->amp != EST_AMP_NONE && r->dtype != EST_DT_FLOAT)
        st = est__fail(err, EST_EINVAL, "est_estimate: amp needs float32 weights, not %s (est_options.dtype float32 "
                       "converts a %s export)", est_dtype_name(r->dtype), est_dtype_name(g->dtype));
    else if (opt->grad_accum < 0 || opt->grad_accum > EST_MAX_GRAD_ACCUM)
        st = est__fail(err, EST_EINVAL, "est_estimate: grad_accum %lld is not between 1 and %d",
                       (long long)opt->grad_accum, EST_MAX_GRAD_ACCUM);
    else if ((st = est_check_parallel(opt, err)) == EST_OK) st = est_check_param_filter(g, &opt->params, err);
    uint64_t *memo_work = NULL;
    est_prefault pf = {0};
    if (st == EST_OK) st = alloc_layers(r, &pf, err);
    bool inferred = st == EST_OK && (st = est__infer(r, opt, &pf, &memo_work, err)) == EST_OK;
    est__prefault_wait(&pf);
    if (st == EST_OK) st = build_layers(r, err);
    if (st == EST_OK) st = est__build_params(r, &opt->params, err);
    if (st == EST_OK && with_tensors) st = alloc_tensor_infos(r, err);
    if (st == EST_OK) st = est__simulate(r, err);
    if (st == EST_OK && with_tensors) link_tensor_infos(r);
    /* recorded after the simulation, whose freed arrays the memo's tensor
     * states then reuse */
    if (inferred && memo_work) est__plan_record_memo(g, r, memo_work);
    free(memo_work);
    if (st == EST_OK && with_tensors) describe_peak(r);
    r->checkpoint = (est_checkpoint){0}; /* its strings are the caller's */
    if (st != EST_OK) {
        est_report_free(r);
        return st;
    }
    *out = r;
    return EST_OK;
}

/* DDP's first bucket is a race (est_first_bucket): the report gives the
 * step's peak at both ends of it, the other end from a second estimate
 * without the replay of the allocator. */
static est_status add_first_bucket_race(const est_graph *g, const est_options *opt, est_report *r, est_error *err) {
    est_comm *c = &r->comm;
    if (!c->first_bucket_bytes) return EST_OK;
    bool held = c->first_bucket_held_bytes != 0;
    est_options other = *opt;
    other.parallel.first_bucket = held ? EST_FIRST_BUCKET_RELEASED : EST_FIRST_BUCKET_HELD;
    other.skip_reserved = 1;
    other.timeline = 0;
    est_report *o = NULL;
    est_status st = estimate_step(g, &other, false, &o, err);
    if (st != EST_OK) return st;
    c->peak_first_bucket_held_bytes = held ? r->peak.bytes : o->peak.bytes;
    c->peak_first_bucket_released_bytes = held ? o->peak.bytes : r->peak.bytes;
    est_report_free(o);
    return EST_OK;
}

static est_status checked_estimate_step(const est_graph *g, const est_options *opt, bool with_tensors,
                                        est_report **out, est_error *err) {
    if (!out) return est__fail(err, EST_EINVAL, "est_estimate: out is NULL");
    *out = NULL;
    if (!g) return est__fail(err, EST_EINVAL, "est_estimate: graph is NULL");
    est_options defaults;
    if (!opt) {
        est_options_init(&defaults);
        opt = &defaults;
    }
    return estimate_step(g, opt, with_tensors, out, err);
}

est_status est__estimate_step(const est_graph *g, const est_options *opt, est_report **out, est_error *err) {
    return checked_estimate_step(g, opt, false, out, err);
}

est_status est_estimate(const est_graph *g, const est_options *opt, est_report **out, est_error *err) {
    est_status st = checked_estimate_step(g, opt, true, out, err);
    /* without options there is no strategy, and so no race */
    if (st == EST_OK && opt && (st = add_first_bucket_race(g, opt, *out, err)) != EST_OK) {
        est_report_free(*out);
        *out = NULL;
    }
    return st;
}

size_t est_report_layer_count(const est_report *r) { return r ? r->n_layers : 0; }
const est_layer *est_report_layer(const est_report *r, size_t i) {
    return r && i < r->n_layers ? &r->layers[i] : NULL;
}
const est_totals *est_report_totals(const est_report *r) { return r ? &r->totals : NULL; }
int64_t est_report_batch(const est_report *r) { return r ? r->batch : 0; }
size_t est_report_dim_count(const est_report *r) { return r ? r->n_dims : 0; }
const est_binding *est_report_dim(const est_report *r, size_t i) {
    return r && i < r->n_dims ? &r->dims[i] : NULL;
}
size_t est_report_output_count(const est_report *r) { return r ? r->n_outputs : 0; }
const est_tensor_info *est_report_output(const est_report *r, size_t i) {
    return r && i < r->n_outputs ? &r->outputs[i] : NULL;
}
const est_peak *est_report_peak(const est_report *r) { return r ? &r->peak : NULL; }
est_mode est_report_mode(const est_report *r) { return r ? r->mode : EST_MODE_TRAIN; }
est_optimizer est_report_optimizer(const est_report *r) { return r ? r->optimizer : EST_OPT_ADAM; }
est_dtype est_report_dtype(const est_report *r) { return r ? r->dtype : EST_DT_FLOAT; }
est_amp est_report_amp(const est_report *r) { return r ? r->amp : EST_AMP_NONE; }
const est_parallel *est_report_parallel(const est_report *r) { return r ? &r->parallel : NULL; }
const est_comm *est_report_comm(const est_report *r) { return r ? &r->comm : NULL; }
size_t est_report_event_count(const est_report *r) { return r ? r->n_events : 0; }
const est_event *est_report_event(const est_report *r, size_t i) { return r && i < r->n_events ? &r->events[i] : NULL; }
size_t est_report_live_count(const est_report *r) { return r ? r->n_live : 0; }
const est_live *est_report_live(const est_report *r, size_t i) { return r && i < r->n_live ? &r->live[i] : NULL; }
const est_snapshot *est_report_snapshot(const est_report *r, est_snapshot_at at) {
    return r && r->have_snapshots && (unsigned)at < EST_SNAPSHOT_COUNT ? &r->snapshots[at] : NULL;
}
size_t est_report_tp_pair_count(const est_report *r) { return r ? r->n_tp_pairs : 0; }
const est_tp_pair *est_report_tp_pair(const est_report *r, size_t i) {
    return r && i < r->n_tp_pairs ? &r->tp_pairs[i] : NULL;
}
