/* activation.c: element-wise activations (Relu, Gelu, Sigmoid, Clip, ...). */
#include "registry.h"

#define UNARY(op_name) \
    {.name = op_name, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, \
     .infer = est_infer_like_input0}

EST_FAMILY(activation,
    UNARY("Relu"),
);
