/* shape.c: TODO ops of the shape family. */
#include "registry.h"

EST_FAMILY(shape,
    {.name = "__placeholder_shape", .min_inputs = 0, .max_inputs = -1, .min_outputs = 0, .max_outputs = -1,
     .infer = est_infer_like_input0},
);
