/*
 * vx.h: the verify executor's internal contract (verify/).
 *
 * `memest verify` runs a loaded graph on a CUDA GPU with our own kernels and
 * cuBLAS, and measures the memory it really uses. It shares the parsed graph
 * (libestimate's est_graph: nodes, tensors, attributes, declared shapes) with
 * the estimator, and nothing else: it never reads the estimator's plan,
 * saved-tensor rules or report. Every device byte goes through the tracking
 * allocator below, tagged with a category, and tensors are freed by the
 * executor's own reference counts.
 *
 * Pieces:
 *   alloc.cu      tracking allocator (vx_malloc / vx_free), peak per category
 *   tensor.cu     vx_tensor: create, view, retain / release, host copies
 *   exec.c        forward, loss, the step; steady-state second step measured
 *   exec_setup.c  dims, initializers, Constants, inputs, gradient and read plans
 *   exec_train.c  backward (reverse order), optimizer step
 *   weights.c     initializer payloads from the ONNX file (embedded or
 *                 external data), random when absent
 *   ops_*.cu      one file per op family: a vx_op table entry per op
 *   verify.c      the public entry (est_verify in estimate.h) and report
 *
 * Floating tensors are float32 on the device, or all bfloat16 / float16 in
 * a --dtype bfloat16 / float16 run (vx_float_dtype); integer tensors (indices,
 * shapes) are int64, on the device when an op reads them there, and always
 * mirrored on the host when small (<= 4096 elements) so shape ops can run on
 * the host.
 */
#ifndef MEMEST_VX_H
#define MEMEST_VX_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* libestimate's IR and the est_node_attr_* helpers (layers/registry.h):
 * kernels read attributes with est_node_attr_int / _float / _string / _ints
 * (the verify module links libestimate's static library). */
#include "ir.h"
#include "registry.h"
#include "verify_kernels.h"
#include "verify.h"

#define VX_MAX_RANK 8
/* Inputs or outputs of a node: dynamo's unrolled nn.RNN concatenates its 256
 * steps. Slot masks (VX_SLOT) are 32 bits: a slot past 31 is never saved nor
 * read on the host. */
#define VX_MAX_IO 256
#define VX_ALLOC_ROUND EST_ALLOC_ROUND /* as PyTorch's caching allocator rounds */

/* vx_category, vx_phase, vx_dtype, vx_status (and the module's entry
 * points, vx_options, vx_result) are in verify.h. */

/* ---- tracking allocator --------------------------------------------------- */

typedef struct vx_alloc_stats {
    uint64_t live[VX_CAT_COUNT];    /* bytes now, rounded to VX_ALLOC_ROUND */
    uint64_t total;                 /* sum of live */
    uint64_t peak;                  /* highest total since the last reset */
    uint64_t at_peak[VX_CAT_COUNT]; /* live[] at that moment */
    vx_phase peak_phase;
    char peak_layer[128];           /* node running at the peak, "" outside nodes */
    uint64_t failed_request;        /* bytes of the allocation that failed, 0 if none */
    uint64_t free_at_failure;       /* cudaMemGetInfo free bytes then */
} vx_alloc_stats;

typedef struct vx_ctx vx_ctx;

/* Device memory of `bytes`, counted under `cat` (rounded up to 512). NULL
 * when the device is out of memory (stats.failed_request is then set). */
void *vx_malloc(vx_ctx *ctx, size_t bytes, vx_category cat);
/* Frees what vx_malloc returned; NULL is ignored. */
void vx_free(vx_ctx *ctx, void *p);
/* A transient workspace inside one kernel call (counted as VX_CAT_TEMP). */
void *vx_workspace(vx_ctx *ctx, size_t bytes);

/* ---- tensors ----------------------------------------------------------------- */

/* Residency. Floating tensors live on the device in their dtype (float32,
 * bfloat16, float16); their host copy is float32 whatever the dtype (the
 * conversion happens on upload and download). Integer tensors
 * are int64 and bool tensors uint8 (1 byte) on the device. Small tensors
 * (<= VX_HOST_MAX elements) may in addition, or instead, have a host copy:
 * host_i64 for VX_I64 and VX_BOOL (0/1), host_f32 for the floating dtypes. Shape
 * arithmetic (Shape, Gather of a shape, Concat of dims, ...) runs on the host
 * and its results have data == NULL: like PyTorch's Python ints they take no
 * device memory. Before a device kernel runs, the executor uploads every
 * host-only input (vx_tensor_to_device) except the slots in the op's
 * host_inputs mask, for which it makes sure the host copy exists instead
 * (vx_tensor_to_host): kernels read Reshape's shape, Clip's min/max, Slice's
 * starts..., Dropout's ratio there. */
#define VX_HOST_MAX EST_VERIFY_HOST_MAX

typedef struct vx_tensor {
    void *data;                   /* device; NULL for an empty or host-only tensor */
    int64_t *host_i64;            /* host copy of a small integer / bool tensor, or NULL */
    vx_dtype dtype;
    int rank;
    int64_t dims[VX_MAX_RANK];
    int64_t numel;
    vx_category cat;
    int refs;                     /* freed at 0 */
    struct vx_tensor *base;       /* views share base's storage (retained) */
    float *host_f32;              /* host copy of a small float tensor (constants), or NULL */
    /* Layout. false: contiguous row-major (every tensor vx_tensor_new makes).
     * true: a strided view (Transpose, Expand, Slice, and reshapes of those
     * that need no copy, as PyTorch's computeStride allows): element
     * (i0..in) lives at data + sum(ik * strides[k]) elements (strides may be
     * 0 on an expanded dim, negative for a negative Slice step). data points
     * at the view's first element, inside base's storage. Kernels read plain
     * contiguous memory unless their vx_op.strided says otherwise: the
     * executor hands them vx_contiguous copies (VX_CAT_TEMP) for the call. */
    bool strided;
    int64_t strides[VX_MAX_RANK];
} vx_tensor;

/* Bytes per element on the device (4, 8, 1, 2, 2). */
size_t vx_dtype_size(vx_dtype dt);
/* float32, bfloat16 or float16: the dtypes kernels compute on. */
static inline bool vx_dtype_is_float(vx_dtype dt) { return dt == VX_F32 || dt == VX_BF16 || dt == VX_F16; }
static inline const char *vx_dtype_name(vx_dtype dt) {
    static const char *const names[] = {"float32", "int64", "bool", "bfloat16", "float16"};
    return (unsigned)dt < sizeof names / sizeof names[0] ? names[dt] : "?";
}
/* The run's floating dtype (--dtype): the graph's float tensors are stored
 * in it, and a kernel making a float tensor from no float input (a Cast to
 * float, ConstantOfShape, random values) makes it in this dtype. */
vx_dtype vx_float_dtype(vx_ctx *ctx);
/* Makes sure t has device storage (uploads a host-only tensor, counted under
 * t->cat); VX_EOOM when the device is full. */
vx_status vx_tensor_to_device(vx_ctx *ctx, vx_tensor *t);
/* Makes sure a small tensor has its host copy (downloads it; synchronises). */
vx_status vx_tensor_to_host(vx_ctx *ctx, vx_tensor *t);
/* A host-only tensor (data NULL) with room for its host copy; numel must be
 * <= VX_HOST_MAX. NULL when out of host memory. */
vx_tensor *vx_tensor_new_host(vx_ctx *ctx, vx_dtype dt, int rank, const int64_t *dims);
/* Element k of a tensor as a double, from its host copy (downloading it
 * first if needed). */
double vx_tensor_get(vx_ctx *ctx, vx_tensor *t, int64_t k);

/* A new contiguous tensor (refs = 1), or NULL when out of memory. */
vx_tensor *vx_tensor_new(vx_ctx *ctx, vx_dtype dt, int rank, const int64_t *dims, vx_category cat);
/* A view of t's storage with another shape of the same numel (refs = 1).
 * For a strided t, NULL when no strides express the new shape (use
 * vx_tensor_reshape then). */
vx_tensor *vx_tensor_view(vx_ctx *ctx, vx_tensor *t, int rank, const int64_t *dims);
/* Strided views (tensor.cu). A view of t's storage with the given dims,
 * element strides and element offset from t->data (relative to t's own
 * layout: strides here are in elements of the storage). refs = 1. */
vx_tensor *vx_tensor_strided_view(vx_ctx *ctx, vx_tensor *t, int rank, const int64_t *dims, const int64_t *strides,
                                  int64_t offset);
/* t's element strides (its own when strided, else the contiguous ones). */
void vx_tensor_get_strides(const vx_tensor *t, int64_t *strides);
/* t itself (retained) when contiguous, else a contiguous copy under VX_CAT_TEMP
 * (PyTorch's .contiguous() inside a kernel). NULL when out of memory. */
vx_tensor *vx_contiguous(vx_ctx *ctx, vx_tensor *t);
/* torch.reshape: a view when the layout allows it (always for a contiguous
 * t), else a contiguous copy under cat. NULL when out of memory. */
vx_tensor *vx_tensor_reshape(vx_ctx *ctx, vx_tensor *t, int rank, const int64_t *dims, vx_category cat);
vx_tensor *vx_tensor_retain(vx_tensor *t);
void vx_tensor_release(vx_ctx *ctx, vx_tensor *t); /* NULL ignored */

/* ---- ops ----------------------------------------------------------------------- */

/* One node while it runs: the executor fills in[], out[] shapes are the
 * kernel's to decide (it creates out[] with vx_tensor_new). In backward the
 * executor fills grad_out[] (NULL for an output with no gradient) and
 * need_grad[]; the kernel creates grad_in[k] for each k with need_grad[k].
 * `saved` holds what the op made only for its backward (masks, indices,
 * statistics); the executor releases it after backward. */
typedef struct vx_run {
    const est_node *node;
    int n_in, n_out;
    vx_tensor *in[VX_MAX_IO], *out[VX_MAX_IO];
    vx_tensor *grad_out[VX_MAX_IO], *grad_in[VX_MAX_IO];
    bool need_grad[VX_MAX_IO];
    bool training;                /* train mode (Dropout drops, BatchNorm uses batch stats) */
    vx_tensor *saved[4];
    /* Set by the executor. Create out[k] with out_cat[k] and grad_in[k] with
     * grad_cat[k] (vx_out_new / vx_grad_new do it): VX_CAT_ACTIVATIONS for forward
     * outputs, VX_CAT_GRADS for a parameter's first gradient, VX_CAT_TEMP for
     * activation gradients; saved[] tensors are VX_CAT_ACTIVATIONS. */
    vx_category out_cat[VX_MAX_IO];
    vx_category grad_cat[VX_MAX_IO];
    int64_t opset;                /* the node's opset */
    const est_graph *graph;       /* the graph: declared dtypes of the node's tensors */
} vx_run;

/* out[k] = a new tensor under run->out_cat[k] (NULL when out of memory). */
vx_tensor *vx_out_new(vx_ctx *ctx, vx_run *run, int k, vx_dtype dt, int rank, const int64_t *dims);
/* grad_in[k] = a new tensor shaped like in[k], under run->grad_cat[k]. Its
 * contents are undefined (zero it when accumulating into it). */
vx_tensor *vx_grad_new(vx_ctx *ctx, vx_run *run, int k);
/* Zero-fills t's device storage on the context's stream. */
vx_status vx_tensor_zero(vx_ctx *ctx, vx_tensor *t);

typedef vx_status (*vx_kernel_fn)(vx_ctx *ctx, vx_run *run);

/* Bits of input / output slots. */
#define VX_SLOT(k) ((k) < 32 ? 1u << (k) : 0u)

/* One op's executor entry. `saves_inputs` / `saves_outputs` say which
 * tensors backward reads: the executor keeps exactly those alive until the
 * node's backward, and frees everything else after its last forward reader.
 * The rule is the kernel's own (what backward() dereferences), independent of
 * the estimator's registry. */
typedef struct vx_op {
    const char *name;             /* ONNX op_type, default domain */
    vx_kernel_fn forward;
    vx_kernel_fn backward;        /* NULL: no gradient flows through (shape ops) */
    uint32_t saves_inputs, saves_outputs;
    bool host_only;               /* runs on host mirrors (Shape, Gather of shapes...) */
    /* Input slots the kernel reads on the host (see Residency above). */
    uint32_t host_inputs;
    /* Optional: what backward reads when it depends on need_grad (Mul keeps
     * an operand only when its partner needs a gradient). Called after the
     * forward; overrides saves_inputs / saves_outputs. */
    void (*saves_fn)(const vx_run *run, uint32_t *saves_inputs, uint32_t *saves_outputs);
    /* Which strided (non-contiguous) tensors the kernel reads as they are
     * (VX_STRIDED_* bits); the executor gives it vx_contiguous copies of the
     * others, VX_CAT_TEMP, freed when the kernel returns. 0 for most kernels. */
    uint32_t strided;
    /* VX_HALF: the kernels also take bfloat16 and float16 tensors (they load
     * and store the storage dtype and compute in float32). Without it the
     * executor refuses to run the op on a half tensor. */
    uint32_t dtypes;
} vx_op;
#define VX_HALF 1u
#define VX_STRIDED_IN 1u    /* forward: in[] */
#define VX_STRIDED_SAVED 2u /* backward: in[] and out[] */
#define VX_STRIDED_GRAD 4u  /* backward: grad_out[] */
/* New fields go at the end, so positional initialisers
 * {name, forward, backward, saves_inputs, saves_outputs, host_only} stay valid.
 *
 * Contract for kernels, in short:
 *  - forward: create every present output (run->node->outputs[k] >= 0) with
 *    vx_out_new, or as a view (vx_tensor_view) of an input; create saved[]
 *    tensors for backward; return VX_EOOM when an allocation returns NULL.
 *  - backward: for each k with need_grad[k], create grad_in[k] (vx_grad_new)
 *    and fill it; grad_out[j] may be NULL (that output got no gradient:
 *    treat as zeros). Do not release inputs, outputs, grads or saved[]: the
 *    executor owns every reference in vx_run and drops them itself.
 *  - temporaries: vx_workspace (VX_CAT_TEMP); free with vx_free, or leave them:
 *    the executor frees what a kernel left after it returns.
 *  - run everything on vx_stream(ctx); report launch errors with
 *    vx_fail(ctx, VX_ECUDA, ...). */

/* The op table (ops_*.cu register into it through vx_ops_<family> arrays).
 * Each family file defines its array and count with C linkage, e.g. in
 * ops_gemm.cu:
 *     extern "C" const vx_op vx_ops_gemm[] = { {"Gemm", gemm_fwd, gemm_bwd, ...}, ... };
 *     extern "C" const size_t vx_ops_gemm_count = sizeof vx_ops_gemm / sizeof vx_ops_gemm[0];
 * ops_registry.c (vx_find_op) searches every family below. */
extern const vx_op vx_ops_gemm[];        extern const size_t vx_ops_gemm_count;        /* Gemm, MatMul */
extern const vx_op vx_ops_quant[];       extern const size_t vx_ops_quant_count;       /* MatMulInteger, QLinearMatMul (ops_quant.cu) */
extern const vx_op vx_ops_conv[];        extern const size_t vx_ops_conv_count;        /* Conv, ConvTranspose */
extern const vx_op vx_ops_norm[];        extern const size_t vx_ops_norm_count;        /* BatchNormalization, LayerNormalization, InstanceNormalization */
extern const vx_op vx_ops_pool[];        extern const size_t vx_ops_pool_count;        /* MaxPool, AveragePool (1-D to 3-D), GlobalAveragePool, ReduceMean, ReduceSum */
extern const vx_op vx_ops_softmax[];     extern const size_t vx_ops_softmax_count;     /* Softmax */
extern const vx_op vx_ops_gather[];      extern const size_t vx_ops_gather_count;      /* Gather, GatherElements, Transpose (a copy; the executor finds ops_shape.c's view first) */
extern const vx_op vx_ops_attention[];    extern const size_t vx_ops_attention_count;    /* Attention */
extern const vx_op vx_ops_resample[];     extern const size_t vx_ops_resample_count;     /* Resize, Upsample (ops_resample.cu) */
extern const vx_op vx_ops_recurrent[];    extern const size_t vx_ops_recurrent_count;    /* LSTM, GRU, RNN */
extern const vx_op vx_ops_reduce[];       extern const size_t vx_ops_reduce_count;       /* ReduceMax..ReduceLogSumExp, ArgMax, ArgMin, Hardmax, LpNormalization, MeanVarianceNormalization (ops_reduce.cu) */
extern const vx_op vx_ops_rmsnorm[];      extern const size_t vx_ops_rmsnorm_count;      /* RMSNormalization, LRN (ops_rmsnorm.cu) */
extern const vx_op vx_ops_einsum[];      extern const size_t vx_ops_einsum_count;      /* Einsum of two operands as a batched matmul (ops_einsum.cu) */
extern const vx_op vx_ops_select[];      extern const size_t vx_ops_select_count;      /* ScatterElements, Scatter, TopK, MaxUnpool (ops_select.cu) */
extern const vx_op vx_ops_layout[];      extern const size_t vx_ops_layout_count;      /* Tile, DepthToSpace, SpaceToDepth, ReverseSequence, CenterCropPad, Col2Im, EyeLike, OneHot, RandomUniform, RandomNormal(Like), Bernoulli (ops_layout.cu) */
extern const vx_op vx_ops_index[];       extern const size_t vx_ops_index_count;       /* Split (views), Pad, CumSum, Trilu, GatherND, ScatterND (ops_index.cu) */
extern const vx_op vx_ops_elementwise[]; extern const size_t vx_ops_elementwise_count; /* Add..Cast (ops_elementwise.cu) */
extern const vx_op vx_ops_unary[];       extern const size_t vx_ops_unary_count;       /* Relu, Tanh, Sigmoid.. (ops_unary.cu) */
extern const vx_op vx_ops_math[];        extern const size_t vx_ops_math_count;        /* IsNaN, IsInf, PRelu, Sum, Mean, Bitwise*, BitShift, CastLike; n-input Max/Min and tensor Pow helpers (ops_math.cu) */
extern const vx_op vx_ops_sample[];      extern const size_t vx_ops_sample_count;      /* GridSample, RoiAlign, MaxRoiPool (ops_sample.cu) */
extern const vx_op vx_ops_datadep[];     extern const size_t vx_ops_datadep_count;     /* NonZero, Compress, Unique, Multinomial (ops_datadep.cu) */
extern const vx_op vx_ops_shape[];       extern const size_t vx_ops_shape_count;       /* Reshape..Slice, Transpose (views), Concat (ops_shape.c) */
const vx_op *vx_find_op(const char *op_type);

/* ---- helpers kernels share --------------------------------------------------- */

/* The cuBLAS handle of the context (created once; its workspace is reported
 * separately). */
void *vx_cublas(vx_ctx *ctx);
/* Under MEMEST_VERIFY_PROFILE, the time since the last mark goes to `what`
 * (a kernel's part: "Conv im2col"); otherwise nothing. */
void vx_profile_section(vx_ctx *ctx, const char *what);
/* Whether convolutions' products run in TF32 (vxk_conv_blas). */
bool vx_conv_tf32(vx_ctx *ctx);
/* The CUDA stream kernels run on. */
void *vx_stream(vx_ctx *ctx);
/* Sets *err's message for the node and returns st. */
vx_status vx_fail(vx_ctx *ctx, vx_status st, const char *fmt, ...);
/* Deterministic random numbers (Dropout masks, absent weights). */
uint64_t vx_seed(vx_ctx *ctx);
/* Host-side ops for tensors whose inputs are all host-only (shape
 * arithmetic): ops_shape.c. The executor tries these first when every
 * present input of a node has data == NULL. */
const vx_op *vx_find_host_op(const char *op_type);

#ifdef __cplusplus
}
#endif

#endif
