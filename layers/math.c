/* math.c: TODO ops of the math family. */
#include "registry.h"

EST_FAMILY(math,
    {.name = "__placeholder_math", .min_inputs = 0, .max_inputs = -1, .min_outputs = 0, .max_outputs = -1,
     .infer = est_infer_like_input0},
);
