/* verify_cmd.h: `memest verify` (verify_cmd.c). */
#ifndef MEMEST_VERIFY_CMD_H
#define MEMEST_VERIFY_CMD_H

#include "estimate.h"
#include "output.h"

typedef struct verify_request {
    const char *model;
    const char *out_path;
    output_format format;
    est_options opt;
    double tolerance;   /* percent */
    /* --input [NAME=]FILE.npy (repeatable): graph input values; without NAME
     * the i-th flag binds the i-th graph input. The array's shape is used. */
    const char *const *inputs;
    size_t n_inputs;
    const char *dump_dir; /* --dump-outputs DIR: the graph outputs of the
                             measured step as raw files plus outputs.json */
} verify_request;

/* Exit code: 0 the peak is within tolerance, 1 above it or the run failed
 * (no GPU, does not fit, error), 2 usage. */
int run_verify(const verify_request *q, const est_graph *g);

#endif
