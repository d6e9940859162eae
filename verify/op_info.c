/* op_info.c: what the executor does with each op, for `memest ops`'s verify
 * column (memest_verify_op_info, verify.h). Built from the op tables
 * (vx_find_op, vx_find_host_op), so a kernel shows up as soon as its family
 * registers it; the notes below only say why, where that is known. */
#include <stdio.h>
#include <string.h>

#include "vx_internal.h"

#define VX_EXPORT __attribute__((visibility("default")))

bool vx_domain_runs(const char *domain) {
    return !domain || !domain[0] || strcmp(domain, "ai.onnx") == 0 || strcmp(domain, "ai.memest") == 0;
}

typedef struct op_note {
    const char *op_type;
    const char *note;
} op_note;

/* Why no gradient flows through a forward-only kernel. The default, for
 * ops not listed: "no gradient flows through it". */
static const op_note forward_only_notes[] = {
    {"MatMulInteger", "quantized inference op: no gradient; its integers held as int64, as --kernels verify counts them"},
    {"QLinearMatMul", "quantized inference op: no gradient; its integers held as int64, as --kernels verify counts them"},
    {"Equal", "bool output: no gradient"},
    {"Less", "bool output: no gradient"},
    {"LessOrEqual", "bool output: no gradient"},
    {"Greater", "bool output: no gradient"},
    {"GreaterOrEqual", "bool output: no gradient"},
    {"And", "bool output: no gradient"},
    {"Or", "bool output: no gradient"},
    {"Xor", "bool output: no gradient"},
    {"Not", "bool output: no gradient"},
    {"IsNaN", "bool output: no gradient"},
    {"IsInf", "bool output: no gradient"},
    {"ArgMax", "integer output: no gradient"},
    {"ArgMin", "integer output: no gradient"},
    {"Hardmax", "one-hot of the arg max: no gradient"},
    {"ConstantOfShape", "reads only a shape: no gradient"},
    {"EyeLike", "reads only a shape: no gradient"},
    {"Size", "reads only a shape: no gradient"},
    {"RandomUniformLike", "random values: no gradient"},
    {"RandomUniform", "random values: no gradient"},
    {"RandomNormal", "random values: no gradient"},
    {"RandomNormalLike", "random values: no gradient"},
    {"Bernoulli", "random values: no gradient"},
    {"OneHot", "made from integer indices: no gradient"},
    {"Detach", "stops the gradient (tensor.detach())"},
    {"BitwiseNot", "integer output: no gradient"},
    {"BitwiseAnd", "integer output: no gradient"},
    {"BitwiseOr", "integer output: no gradient"},
    {"BitwiseXor", "integer output: no gradient"},
    {"BitShift", "integer output: no gradient"},
    {"NonZero", "integer output: no gradient; one device-to-host sync sizes it"},
    {"Unique", "no gradient (as torch.unique); one device-to-host sync sizes it"},
    {"Multinomial", "random integer samples: no gradient"},
};

static const char *find_note(const op_note *notes, size_t n, const char *op_type) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(notes[i].op_type, op_type) == 0) return notes[i].note;
    return NULL;
}

/* The note of an op whose kernels also take bfloat16 and float16 tensors
 * (vx_op.dtypes): the others run float32 only, and a --dtype bfloat16 /
 * float16 run refuses them. Valid until the next call. */
static const char *with_half(const char *why) {
    static char buf[256];
    if (!why) return "runs in bfloat16 / float16 too (--dtype)";
    snprintf(buf, sizeof buf, "%s; runs in bfloat16 / float16 too", why);
    return buf;
}

VX_EXPORT int memest_verify_op_info(const char *op_type, const char *domain, int *has_backward, const char **note) {
    int backward = 0, kind = MEMEST_VERIFY_OP_NONE;
    const char *why = NULL;
    if (!op_type) {
        why = "no op type";
    } else if (!vx_domain_runs(domain)) {
        why = "the executor runs the ai.onnx and ai.memest domains";
    } else if (strcmp(op_type, "Constant") == 0) {
        kind = MEMEST_VERIFY_OP_HOST;
        why = "made once at setup, uploaded where a kernel reads it";
    } else {
        const vx_op *op = vx_find_op(op_type), *hop = vx_find_host_op(op_type);
        if (op && !op->host_only) {
            kind = MEMEST_VERIFY_OP_DEVICE;
            backward = op->backward != NULL;
            if (!backward) {
                why = find_note(forward_only_notes, sizeof forward_only_notes / sizeof forward_only_notes[0], op_type);
                if (!why) why = "no gradient flows through it";
            }
            if (op->dtypes & VX_HALF) why = with_half(why);
        } else if (op || hop) {
            kind = MEMEST_VERIFY_OP_HOST;
            why = "shape arithmetic on the host: no device memory, no gradient";
        } /* else no kernel: no note */
    }
    if (has_backward) *has_backward = backward;
    if (note) *note = why;
    return kind;
}
