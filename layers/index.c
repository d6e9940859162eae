/* index.c: TODO ops of the index family. */
#include "registry.h"

EST_FAMILY(index,
    {.name = "__placeholder_index", .min_inputs = 0, .max_inputs = -1, .min_outputs = 0, .max_outputs = -1,
     .infer = est_infer_like_input0},
);
