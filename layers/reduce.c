/* reduce.c: TODO ops of the reduce family. */
#include "registry.h"

EST_FAMILY(reduce,
    {.name = "__placeholder_reduce", .min_inputs = 0, .max_inputs = -1, .min_outputs = 0, .max_outputs = -1,
     .infer = est_infer_like_input0},
);
