/* ops_registry.c: vx_find_op over every op family's table (vx.h), and
 * vx_find_host_op over the host-side shape arithmetic (ops_shape.c). */
#include <string.h>

#include "vx_internal.h"

typedef struct family {
    const vx_op *ops;
    const size_t *count;
} family;

static const family families[] = {
    {vx_ops_elementwise, &vx_ops_elementwise_count},
    {vx_ops_unary, &vx_ops_unary_count},
    {vx_ops_math, &vx_ops_math_count},
    {vx_ops_shape, &vx_ops_shape_count},
#ifndef VX_NO_FAMILY_GEMM
    {vx_ops_gemm, &vx_ops_gemm_count},
#endif
#ifndef VX_NO_FAMILY_QUANT
    {vx_ops_quant, &vx_ops_quant_count},
#endif
#ifndef VX_NO_FAMILY_CONV
    {vx_ops_conv, &vx_ops_conv_count},
#endif
#ifndef VX_NO_FAMILY_NORM
    {vx_ops_norm, &vx_ops_norm_count},
#endif
#ifndef VX_NO_FAMILY_POOL
    {vx_ops_pool, &vx_ops_pool_count},
#endif
#ifndef VX_NO_FAMILY_SOFTMAX
    {vx_ops_softmax, &vx_ops_softmax_count},
#endif
#ifndef VX_NO_FAMILY_GATHER
    {vx_ops_gather, &vx_ops_gather_count},
#endif
#ifndef VX_NO_FAMILY_ATTENTION
    {vx_ops_attention, &vx_ops_attention_count},
#endif
#ifndef VX_NO_FAMILY_RECURRENT
    {vx_ops_recurrent, &vx_ops_recurrent_count},
#endif
#ifndef VX_NO_FAMILY_EINSUM
    {vx_ops_einsum, &vx_ops_einsum_count},
#endif
#ifndef VX_NO_FAMILY_SELECT
    {vx_ops_select, &vx_ops_select_count},
#endif
#ifndef VX_NO_FAMILY_LAYOUT
    {vx_ops_layout, &vx_ops_layout_count},
#endif
#ifndef VX_NO_FAMILY_INDEX
    {vx_ops_index, &vx_ops_index_count},
#endif
#ifndef VX_NO_FAMILY_RESAMPLE
    {vx_ops_resample, &vx_ops_resample_count},
#endif
#ifndef VX_NO_FAMILY_REDUCE
    {vx_ops_reduce, &vx_ops_reduce_count},
#endif
#ifndef VX_NO_FAMILY_RMSNORM
    {vx_ops_rmsnorm, &vx_ops_rmsnorm_count},
#endif
#ifndef VX_NO_FAMILY_SAMPLE
    {vx_ops_sample, &vx_ops_sample_count},
#endif
#ifndef VX_NO_FAMILY_DATADEP
    {vx_ops_datadep, &vx_ops_datadep_count},
#endif
};

const vx_op *vx_find_op(const char *op_type) {
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (size_t i = 0; i < *families[f].count; i++)
            if (strcmp(families[f].ops[i].name, op_type) == 0) return &families[f].ops[i];
    return NULL;
}

const vx_op *vx_find_host_op(const char *op_type) {
    for (size_t i = 0; i < vx_host_ops_count; i++)
        if (strcmp(vx_host_ops[i].name, op_type) == 0) return &vx_host_ops[i];
    return NULL;
}
