/* capacity.h: memest --max-batch and --sweep (docs/capacity.md). */
#ifndef MEMEST_CAPACITY_H
#define MEMEST_CAPACITY_H

#include "estimate.h"
#include "output.h"

#define MAX_SWEEP_POINTS 256

typedef struct sweep_spec {
    const char *name;           /* "batch" (binds --batch) or a symbolic dim */
    int64_t values[MAX_SWEEP_POINTS];
    size_t n;
} sweep_spec;

/* Each returns an exit code: 0 ok, 1 the model could not be estimated or
 * writing failed. `opt` is the command line's (run_max_batch changes its
 * batch for the report and restores it). `max_batch` caps the search (the
 * graph's max_dim_value). */
int run_max_batch(FILE *f, const est_graph *g, est_options *opt, int64_t max_batch, output_format fmt,
                  const output_opts *o);
int run_sweep(FILE *f, const est_graph *g, const est_options *opt, const sweep_spec *sw, output_format fmt,
              const output_opts *o);

#endif
