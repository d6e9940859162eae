/*
 * amp.c: how each op runs under torch.autocast("cuda") (--amp), the one table
 * of autocast classes. It follows PyTorch's CUDA autocast lists
 * (aten/src/ATen/autocast_mode.cpp): matrix products and convolutions run in
 * the low dtype; the fp32 list casts low inputs up; softmax, log_softmax and
 * sum (fp32_set_opt_dtype) read low inputs directly but write float32; every
 * other op runs in the type its inputs promote to. docs/memory-model.md,
 * "Mixed precision (--amp)".
 */
#include <stdbool.h>
#include <string.h>

#include "registry.h"

typedef struct amp_entry {
    const char *name;
    est_amp_class cls;
} amp_entry;

static const amp_entry amp_table[] = {
    /* lower_precision_fp: inputs cast to the low dtype, weights cached */
    {"Conv", EST_AMP_LOW},
    {"ConvTranspose", EST_AMP_LOW},
    {"Gemm", EST_AMP_LOW},
    {"MatMul", EST_AMP_LOW},
    {"Einsum", EST_AMP_LOW},
    {"Attention", EST_AMP_LOW},
    {"MultiHeadAttention", EST_AMP_LOW},
    {"PRelu", EST_AMP_LOW},
    {"LSTM", EST_AMP_LOW},
    {"GRU", EST_AMP_LOW},
    {"RNN", EST_AMP_LOW},
    /* fp32: low inputs cast up to float32 (a copy) */
    {"LayerNormalization", EST_AMP_FP32},
    {"GroupNormalization", EST_AMP_FP32},
    {"Pow", EST_AMP_FP32},
    {"Exp", EST_AMP_FP32},
    {"Log", EST_AMP_FP32},
    {"Reciprocal", EST_AMP_FP32},
    {"Softplus", EST_AMP_FP32},
    {"Acos", EST_AMP_FP32},
    {"Asin", EST_AMP_FP32},
    {"Cosh", EST_AMP_FP32},
    {"Sinh", EST_AMP_FP32},
    {"Tan", EST_AMP_FP32},
    {"ReduceLogSumExp", EST_AMP_FP32},
    {"ReduceL1", EST_AMP_FP32},
    {"ReduceL2", EST_AMP_FP32},
    {"LpNormalization", EST_AMP_FP32},
    {"NegativeLogLikelihoodLoss", EST_AMP_FP32},
    {"SoftmaxCrossEntropyLoss", EST_AMP_FP32},
    {"Resize", EST_AMP_FP32},
    /* fp32_set_opt_dtype: computed in float32 from the low input, no copy */
    {"Softmax", EST_AMP_FP32_OUT},
    {"LogSoftmax", EST_AMP_FP32_OUT},
    {"ReduceSum", EST_AMP_FP32_OUT},
    {"ReduceProd", EST_AMP_FP32_OUT},
    {"CumSum", EST_AMP_FP32_OUT},
    /* an explicit .float() / .to(dtype): the declared type */
    {"Cast", EST_AMP_DECLARED},
    {"CastLike", EST_AMP_DECLARED},
};

est_amp_class est_amp_class_of(const est_op_def *op) {
    if (!op || !op->name) return EST_AMP_PROMOTE;
    if (op->domain && op->domain[0] && strcmp(op->domain, "com.microsoft") != 0) return EST_AMP_PROMOTE;
    for (size_t i = 0; i < sizeof amp_table / sizeof amp_table[0]; i++)
        if (strcmp(amp_table[i].name, op->name) == 0) return amp_table[i].cls;
    return EST_AMP_PROMOTE;
}

/* Ops whose floating operands TensorIterator combines by type promotion. */
static bool is_elementwise(const est_op_def *op) {
    static const char *const names[] = {"Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Where", "Concat", "Sum", "Mean"};
    if (!op || !op->name || (op->domain && op->domain[0])) return false;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i], op->name) == 0) return true;
    return false;
}

/* An initializer, or one passed through Identity (the TorchScript exporter
 * shares equal initializers so). */
static bool is_weight(const est_graph *g, int32_t t) {
    if (t < 0) return false;
    if (g->tensors[t].kind == EST_T_INITIALIZER) return true;
    int32_t p = g->tensors[t].producer;
    return p >= 0 && strcmp(g->nodes[p].op_type, "Identity") == 0 && g->nodes[p].n_inputs == 1 &&
           g->nodes[p].inputs[0] >= 0 && g->tensors[g->nodes[p].inputs[0]].kind == EST_T_INITIALIZER;
}

static bool is_linear_bias(const est_graph *g, const est_node *n, int k) {
    return est__adds_to_matmul(g, n, k) && is_weight(g, n->inputs[k]);
}

bool est_amp_operand_promotes(const est_graph *g, const est_node *n, int k, bool is_activation, int rank) {
    if (is_activation) return true;
    return is_elementwise(n->op) && rank >= 1 && !is_linear_bias(g, n, k);
}
