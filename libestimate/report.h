/* report.h: the estimate's result, as est_estimate() builds it. Internal. */
#ifndef EST_REPORT_H
#define EST_REPORT_H

#include "registry.h"

struct est_report {
    const est_graph *graph;
    int64_t batch;
    size_t n_dims;
    est_binding *dims;          /* names point into graph->symbols */
    size_t n_layers;
    est_layer *layers;
    est_tensor_info *infos;     /* storage behind every layer's inputs/outputs */
    size_t n_outputs;
    est_tensor_info *outputs;
    est_totals totals;
    est_peak peak;
    est_mode mode;
    est_optimizer optimizer;
    est_dtype dtype;
    est_kernels kernels;
    est_amp amp;
    est_tval *tv;               /* inferred state of every graph tensor */
    est_const **owned;          /* folded constants */
    int64_t n_owned, cap_owned;
};

/* Runs shape inference into r->tv (r->graph and options already set). */
est_status est__infer(est_report *r, const est_options *opt, est_error *err);

/* Simulates the step r->mode describes over the inferred graph: fills every
 * layer's FLOPs, saved and temp bytes, the memory totals and the peak. */
est_status est__simulate(est_report *r, est_error *err);

#endif
