/* pool.c: TODO ops of the pool family. */
#include "registry.h"

EST_FAMILY(pool,
    {.name = "__placeholder_pool", .min_inputs = 0, .max_inputs = -1, .min_outputs = 0, .max_outputs = -1,
     .infer = est_infer_like_input0},
);
