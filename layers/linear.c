/* linear.c: TODO ops of the linear family. */
#include "registry.h"

EST_FAMILY(linear,
    {.name = "__placeholder_linear", .min_inputs = 0, .max_inputs = -1, .min_outputs = 0, .max_outputs = -1,
     .infer = est_infer_like_input0},
);
