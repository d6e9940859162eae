/* norm.c: TODO ops of the norm family. */
#include "registry.h"

EST_FAMILY(norm,
    {.name = "__placeholder_norm", .min_inputs = 0, .max_inputs = -1, .min_outputs = 0, .max_outputs = -1,
     .infer = est_infer_like_input0},
);
