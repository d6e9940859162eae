/* softmax.c: TODO ops of the softmax family. */
#include "registry.h"

EST_FAMILY(softmax,
    {.name = "__placeholder_softmax", .min_inputs = 0, .max_inputs = -1, .min_outputs = 0, .max_outputs = -1,
     .infer = est_infer_like_input0},
);
