/* dropout.c: TODO ops of the dropout family. */
#include "registry.h"

EST_FAMILY(dropout,
    {.name = "__placeholder_dropout", .min_inputs = 0, .max_inputs = -1, .min_outputs = 0, .max_outputs = -1,
     .infer = est_infer_like_input0},
);
