/* report.h: the estimate's result, as est_estimate() builds it. Internal. */
#ifndef EST_REPORT_H
#define EST_REPORT_H

#include "registry.h"

struct est_report {
    const est_graph *graph;
    int64_t batch;
    size_t n_dims;
    est_binding *dims;          /* names point into graph->symbols or
                                   new_symbols */
    char **new_symbols;         /* symbolic dims only est_options.input_shapes
                                   name, owned */
    int32_t n_new_symbols;
    size_t n_layers;
    est_layer *layers;
    est_tensor_info *infos;     /* storage behind every layer's inputs/outputs */
    size_t n_infos;             /* their count */
    size_t n_outputs;
    est_tensor_info *outputs;
    est_totals totals;
    est_peak peak;
    est_mode mode;
    est_optimizer optimizer;
    est_dtype dtype;            /* the step's dtype: what tensors of the
                                   export's dtype (graph->dtype) become */
    est_kernels kernels;
    const est_device *device;   /* est_options.device, or the default */
    est_amp amp;
    est_checkpoint checkpoint;  /* prefixes point into the caller's options */
    uint64_t memory_limit;
    bool skip_reserved;         /* est_options.skip_reserved */
    size_t n_params;
    est_param_info *params;     /* the graph's parameters, in file order */
    bool *trains;               /* per tensor: a parameter that trains */
    int64_t grad_accum;         /* micro-batches per optimizer step, >= 1 */
    est_parallel parallel;      /* est_options.parallel, world_size >= 1 */
    est_comm comm;              /* its per-step communication (parallel.c) */
    est_tp_pair *tp_pairs;      /* what --tp split (tensor_parallel.c) */
    size_t n_tp_pairs;
    char **tp_blocks;           /* per pair: its block's name, owned */
    const char **tp_columns;    /* the pairs' columns, one after another */
    size_t n_tp_columns;
    bool timeline;              /* est_options.timeline */
    est_event *events;          /* the recorded step (timeline.c) */
    size_t n_events;
    est_live *live;             /* live at the peak, the largest first */
    size_t n_live;
    est_snapshot snapshots[EST_SNAPSHOT_COUNT];
    bool have_snapshots;
    est_tval *tv;               /* inferred state of every graph tensor */
    est_const **owned;          /* folded constants */
    int64_t n_owned, cap_owned;
};

/* A checkpointed segment: the nodes first..last (execution order). */
typedef struct est_segment {
    int32_t first, last;
} est_segment;

/* checkpoint.c: the segments `spec` names, in node order and disjoint, in a
 * new array the caller frees (*out NULL and *n_out 0 on failure). EST_EINVAL
 * names the model when nothing matches. */
est_status est__plan_checkpoint(const est_graph *g, const est_checkpoint *spec, est_segment **out,
                                int32_t *n_out, est_error *err);

/* est__step_dtype for this estimate: the stored dtype of a tensor declared
 * as `declared`. */
static inline est_dtype est__stored_dtype(const est_report *r, est_dtype declared) {
    /* memest verify's executor holds every integer tensor as int64 (verify/vx.h) */
    if (r->kernels == EST_KERNELS_VERIFY && declared != EST_DT_INT64 && est__dtype_is_integer(declared))
        return EST_DT_INT64;
    return est__step_dtype(declared, r->graph->dtype, r->dtype);
}

/* params.c: fills r->params, r->trains and the trainable totals (r->tv
 * inferred, r->mode set). */
est_status est__build_params(est_report *r, const est_param_filter *f, est_error *err);

/* The nodes' input and output slots, all nodes together, and those that
 * name a tensor (not an omitted optional one). */
typedef struct est_slot_counts {
    size_t inputs, outputs, tensors;
} est_slot_counts;

/* plan.c: what every estimate of a graph shares. Per tensor, slot[t] is
 * where tv holds the inferred state of a node output that depends on no
 * graph input, -1 for the others (an initializer's state is the graph's
 * own, bound by each estimate: 1.5 million of them in a 1M-node graph made
 * a per-tensor tv of 180 MB); per node, work[i] is the work unit count of a
 * node whose outputs are all such tensors (0 for the others). owned holds
 * the folded values those tv point to. */
typedef struct est_plan {
    int32_t *slot;
    est_tval *tv;
    uint64_t *work;
    est_const **owned;
    int64_t n_owned, cap_owned;
    const struct est_memo *memo; /* set once by the first estimate */
    struct est_weights *weights; /* the graph's weights, by layer and in all */
    /* The nodes each estimate infers (work 0), in node order, and before
     * each the work of the planned nodes since the one before it. */
    int32_t *unplanned;
    uint64_t *planned_before;
    bool *arity_fits;     /* est__arity_fits of each, asked once */
    int32_t n_unplanned;
    est_slot_counts slots;
    /* Per node, its known attributes at node_attrs[attrs_at[i]], -1 for a
     * node with none. */
    int32_t *attrs_at;
    est_node_attrs *node_attrs;
    /* The step's lifetime plan of the last estimate that planned it, with
     * its key (plan_reuse.c); replaced under the graph's lock. None is kept
     * before a second estimate plans (step_planned: one has). */
    struct est_lifetime_plan *lifetimes;
    bool step_planned;
} est_plan;

typedef struct est_lifetime_plan est_lifetime_plan;
void est__lifetime_plan_free(est_lifetime_plan *p);

/* Node i's known attributes in plan p; NULL without a plan (the rules then
 * look them up by name). Inline: asked for every node of every estimate. */
extern const est_node_attrs est__no_node_attrs;
static inline const est_node_attrs *est__plan_node_attrs(const est_plan *p, int32_t i) {
    if (!p) return NULL;
    return p->attrs_at[i] >= 0 ? &p->node_attrs[p->attrs_at[i]] : &est__no_node_attrs;
}

/* The plan's slot counts, or counted here without a plan (out of memory). */
est_slot_counts est__graph_slot_counts(const est_graph *g);

/* The weights a layer reads first, as its est_layer counts them. */
typedef struct est_layer_weights {
    int32_t node;
    uint64_t param_count, param_bytes, buffer_bytes;
} est_layer_weights;

/* What the graph's initializers and inputs are, whatever the options:
 * the same in every estimate, read by each (api.c's totals and layers,
 * simulate.c's model creation). */
typedef struct est_weights {
    int32_t *uploaded;    /* the initializers some node reads, in tensor order */
    int32_t n_uploaded;
    int32_t *inputs;      /* the tensors of kind EST_T_INPUT, in tensor order */
    int32_t n_inputs;
    est_layer_weights *layers; /* the layers that read a weight first, in node order */
    int32_t n_layers;
    /* est_totals' counts of the uploaded initializers */
    uint64_t param_count, param_bytes, buffer_count, buffer_bytes, constant_bytes;
    bool exact;           /* no count saturated (est_add_sat) */
} est_weights;

/* An initializer's element count, as its dims give it (checked when
 * loaded): the state every estimate binds it to. */
static inline int64_t est__initializer_elements(const est_tensor *t) {
    int64_t elements = 1;
    for (int d = 0; d < t->rank; d++) elements *= t->dims[d].value;
    return elements;
}
/* The graph's weights, made (NULL: out of memory) and freed (NULL is a
 * no-op). */
est_weights *est__weights_make(const est_graph *g);
void est__weights_free(est_weights *w);
/* The graph's plan's weights; NULL when there is no plan (out of memory):
 * the caller then makes its own. */
const est_weights *est__graph_weights(const est_graph *g);

/* A tensor state as the memo keeps it: an est_tval without its
 * EST_MAX_RANK dims (a quarter of the bytes), which the memo keeps one
 * after another. */
typedef struct est_memo_tval {
    est_dtype dtype;
    int32_t rank;
    int64_t elements;
    const est_const *value;
    int64_t dims_at;      /* its rank dims start at the memo's dims[dims_at] */
} est_memo_tval;

/* What the first estimate folded that depends on graph inputs (Swin's
 * window masks come from Shape(x)): per node that folded an output, the
 * state of its inputs and outputs then. A later estimate whose inputs to
 * such a node are the same takes its outputs from here instead of folding
 * them again (plan.c). */
typedef struct est_memo {
    int32_t *slot;        /* per tensor: its index in tv, or -1 */
    est_memo_tval *tv;    /* values point into owned, the plan's or the graph's */
    int32_t n_slots, cap_slots;
    int64_t *dims;        /* the slots' dims, one after another */
    int64_t n_dims, cap_dims;
    uint64_t *work;       /* per node: its work when memoised, 0 when not */
    est_const **owned;
    int64_t n_owned;
} est_memo;

/* The memo's tensor state `slot`, whole (dims past its rank 0). */
void est__memo_tval(const est_memo *m, int32_t slot, est_tval *out);

/* The graph's plan, made on first use; NULL when out of memory (estimates
 * then infer every node). */
const est_plan *est__graph_plan(const est_graph *g);
/* The plan's memo, or NULL while no estimate has recorded one. */
const est_memo *est__plan_memo(const est_graph *g);
/* Records r's folded nodes as the plan's memo, if there is none yet (a
 * failure to record leaves it unset). */
void est__plan_record_memo(const est_graph *g, const est_report *r, const uint64_t *node_work);
/* Whether the memo's tensor state `slot` and a are the same: dtype, dims
 * and values. */
bool est__memo_same(const est_memo *m, int32_t slot, const est_tval *a);
/* infer.c: whether node n (of a supported op) has as many inputs and
 * outputs as its op takes, its required inputs present. */
bool est__arity_fits(const est_node *n);
/* infer.c: fills a plan's slot, tv, work and owned (slot and work
 * allocated, tv NULL). */
est_status est__infer_constants(const est_graph *g, est_plan *p);

/* Runs shape inference into r->tv (r->graph and options already set).
 * While the graph's plan has no memo, *memo_work is each node's work, for
 * the caller to record the memo with (est__plan_record_memo) and free; NULL
 * otherwise. The tensor states' pages are faulted in with the caller's
 * arrays in *pf, which it starts (the caller waits for it). */
est_status est__infer(est_report *r, const est_options *opt, est_prefault *pf, uint64_t **memo_work,
                      est_error *err);

/* Simulates the step r->mode describes over the inferred graph: fills every
 * layer's FLOPs, saved and temp bytes, the memory totals and the peak. */
est_status est__simulate(est_report *r, est_error *err);
/* est_estimate without its second estimate of DDP's first-bucket race
 * (est_comm's peak_first_bucket_* stay 0): the step's one peak and totals,
 * all a capacity search's points keep (api.c). The same argument checks.
 * The layers have no inputs and outputs, the report no outputs, and the
 * peak no module or label. */
est_status est__estimate_step(const est_graph *g, const est_options *opt, est_report **out, est_error *err);

#endif
