/*
 * registry.h: the single table of operators.
 *
 * Each op family has one table in one file under layers/ (a large family
 * keeps some rules in files beside it, e.g. index_gather.c) and exports one
 * array of est_op_def entries, one entry per ONNX op_type. An entry holds every rule
 * for that op: its shape inference (and constant folding), and, as the
 * estimator grows, its FLOPs, what it saves for backward and its workspace.
 *
 * To add an op: write its rules in the family's file, add an entry to that
 * file's table. To add a family: create layers/<family>.c with an
 * EST_FAMILY(<family>) table and list it in layers/registry.c and
 * layers/meson.build.
 */
#ifndef EST_REGISTRY_H
#define EST_REGISTRY_H

#include <assert.h>

#include "ir.h"

typedef struct est_infer_ctx est_infer_ctx;
typedef struct est_cost_ctx est_cost_ctx;
typedef struct est_flops est_flops;
typedef struct est_saved est_saved;

/* How an op's output 0 (for ALIAS, every output) relates to input 0's
 * storage, as PyTorch eager runs it. */
typedef enum est_view {
    EST_VIEW_NONE = 0,   /* a new tensor */
    EST_VIEW_ALIAS,      /* always views of input 0 (Squeeze, Unsqueeze, Identity, Expand, Slice, Split) */
    EST_VIEW_RESHAPE,    /* a view if input 0 is contiguous, else a copy (Reshape, Flatten) */
    EST_VIEW_PERMUTE,    /* a view whose layout is no longer contiguous (Transpose) */
} est_view;

/* A per-input-slot bit mask: bit i describes input i. */
typedef uint32_t est_slot_mask;
#define EST_SLOT(i) ((est_slot_mask)1u << (i))
#define EST_SLOTS_FROM(i) (~(est_slot_mask)0 << (i))

typedef struct est_op_def {
    const char *name;     /* ONNX op_type */
    const char *domain;   /* "" for the standard domain */
    int min_inputs, max_inputs;   /* max -1: variadic */
    int min_outputs, max_outputs;
    /* Infers output dtypes and shapes; may fold outputs to constants. */
    est_status (*infer)(est_infer_ctx *ctx);
    /* Input slots that take no gradient (indices, shapes, ratios, min/max).
     * An initializer used only here is a constant, not a parameter. */
    est_slot_mask nondiff_inputs;
    /* Input slots that take a gradient when they are computed from what
     * trains, but make no parameter: an initializer read only there is a
     * constant (an attention mask: T5's position bias trains, a stored
     * causal mask is no weight), unless the node's FX call names a
     * parameter (est_node.fx_args: a dynamo export of SDPA on a
     * trainable mask). */
    est_slot_mask nonparam_inputs;
    /* Input slots that hold non-trainable state (running statistics). */
    est_slot_mask buffer_inputs;

    /* ---- training-step rules; NULL/0 means "none" ---- */
    /* Forward and backward FLOPs (2 per multiply-add for Conv, Gemm, MatMul,
     * attention; per element for the rest, as docs/memory-model.md says). */
    void (*flops)(const est_cost_ctx *c, est_flops *f);
    /* What autograd keeps for this op's backward. */
    void (*saves)(const est_cost_ctx *c, est_saved *s);
    /* Temporary bytes the forward kernel allocates and frees (workspace). */
    uint64_t (*workspace)(const est_cost_ctx *c);
    /* Temporary bytes the backward allocates beyond the input gradients. */
    uint64_t (*backward_workspace)(const est_cost_ctx *c);
    est_view view;
    /* Inputs whose gradient is output 0's gradient itself, the same tensor,
     * when they have its shape (derivatives.yaml: add's "self: grad",
     * "other: maybe_multiply(grad, alpha)" with alpha 1). */
    est_slot_mask grad_passes_to;
    /* When set and true for a node, output 0 is input 0 itself, as PyTorch
     * returns it (a Dropout that drops nothing). */
    bool (*returns_input)(const est_cost_ctx *c);
    /* Output 0 stays alive until the innermost block call around the node
     * returns (a module named by an index: a transformer layer): the Python
     * code binds it to a variable that the layer holds (attention
     * probabilities, which Hugging Face's attention returns to its layer). */
    bool held_by_block;
    /* memest verify's kernel writes every output the node names, read or
     * not (the recurrent layers' Y carries their state from step to step):
     * an unread one is a transient of the node there. */
    bool verify_writes_unread;
} est_op_def;

typedef struct est_family {
    const char *name;
    const est_op_def *ops;
    size_t count;
} est_family;

#define EST_FAMILY(fam, ...)                                                \
    static const est_op_def est_ops_##fam[] = {__VA_ARGS__};                \
    const est_family est_family_##fam = {#fam, est_ops_##fam,               \
        sizeof est_ops_##fam / sizeof est_ops_##fam[0]}

/* How an op runs under autocast (--amp); layers/amp.c holds the table. */
typedef enum est_amp_class {
    EST_AMP_PROMOTE = 0, /* the type its non-constant floating inputs promote to */
    EST_AMP_LOW,         /* floating inputs cast to the low dtype; output low */
    EST_AMP_FP32,        /* low inputs cast up to float32 (a copy); output float32 */
    EST_AMP_FP32_OUT,    /* reads low inputs directly, writes float32 */
    EST_AMP_DECLARED,    /* outputs take the declared type (Cast) */
} est_amp_class;
est_amp_class est_amp_class_of(const est_op_def *op);
/* Whether input k of promoting node n takes part in the promotion, by
 * PyTorch's rules: every floating activation; in an element-wise op (its
 * operands combined by TensorIterator) also a weight or constant of rank
 * 1 or more (ViT's class token, ConvNeXt's layer scale), but not one of
 * rank 0 (a Python scalar) nor a linear layer's bias, which the exporters
 * add after the MatMul and F.linear added in the low dtype. is_activation:
 * input k is computed in the step (not a weight nor a folded constant). */
bool est_amp_operand_promotes(const est_graph *g, const est_node *n, int k, bool is_activation, int rank);

/* Looks up an op; NULL when unsupported. */
const est_op_def *est__op_lookup(const char *domain, const char *op_type);
const char *est__op_family_of(const est_op_def *op);

/* ---- attributes the rules read at every estimate ------------------------- */

/* Attributes that rules of common ops (Conv, pooling, BatchNormalization)
 * read at every estimate: the graph's plan finds each node's once
 * (plan.c), where a lookup by name compared strings for every node of
 * every estimate. */
typedef enum est_known_attr {
    EST_KA_GROUP, EST_KA_KERNEL_SHAPE, EST_KA_STRIDES, EST_KA_DILATIONS, EST_KA_PADS, EST_KA_AUTO_PAD,
    EST_KA_TRAINING_MODE, EST_KA_COUNT
} est_known_attr;
extern const char *const est_known_attr_names[EST_KA_COUNT];
/* A node's known attributes: each the first of its name (as est_attr_get
 * finds it), NULL when absent. */
typedef struct est_node_attrs {
    const est_attr *of[EST_KA_COUNT];
} est_node_attrs;
/* Node n's attribute k: from its plan's record, or by name without one
 * (known NULL: the graph has no plan). */
static inline const est_attr *est_known_attr_get(const est_node_attrs *known, const est_node *n, est_known_attr k) {
    return known ? known->of[k] : est_attr_get(n, est_known_attr_names[k]);
}

/* ---- what an infer function sees ---------------------------------------- */

/* The inferred state of one tensor during an estimate. */
typedef struct est_tval {
    est_dtype dtype;
    int32_t rank;                 /* -1 while unknown */
    int64_t dims[EST_MAX_RANK];
    int64_t elements;
    const est_const *value;       /* known contents, or NULL */
} est_tval;

struct est_infer_ctx {
    const est_graph *graph;
    const est_node *node;
    int64_t opset;
    int n_in;
    const est_tval *in[EST_MAX_IO];  /* NULL for omitted optional inputs */
    int n_out;
    est_tval *out[EST_MAX_IO];       /* NULL for omitted optional outputs */
    const est_node_attrs *known;     /* the node's known attributes; NULL without a plan */
    est_error *err;
    est_const **owned;               /* folded constants owned by the run */
    int64_t n_owned, cap_owned;
    bool out_of_memory;              /* est_fold_out could not allocate: the node
                                        fails with EST_ENOMEM, whatever infer says */
};

/* ---- what a training-step rule sees ---------------------------------------- */

/* What every context of one estimate shares: held once per estimate, not
 * copied into each node's context (a million of them on a large graph). */
typedef struct est_cost_shared {
    const est_device *device;         /* the GPU it runs on (est_options.device; never NULL) */
    est_kernels kernels;              /* whose kernels run the ops (est_options.kernels) */
    est_dtype export_dtype;           /* the export's own float dtype (est_graph_dtype) */
    bool train;                       /* the estimate is of a training step */
    bool autocast;                    /* under --amp: a tensor's dtype in the step is
                                         not its context's (lifetimes.c's per tensor) */
} est_cost_shared;

/* 56 bytes a node on a 64-bit machine: every estimate builds one per node,
 * and they are alive at the 1M-node graph's peak; out and each flag array
 * are found from n_in rather than pointed at. */
struct est_cost_ctx {
    const est_node *node;             /* its opset is the node's (est_node.opset) */
    /* Per-slot arrays owned by the caller that built the context; rules read
     * them through est_cost_in, est_cost_out, est_needs_grad and
     * est_cost_strided, which bound the index. */
    const est_tval **tv;              /* n_in + n_out: the inputs' states, then the
                                         outputs' (NULL for omitted ones) */
    bool *in_flags;                   /* 3 * n_in: per input, needs a gradient
                                         (est_cost_grad_flags), then is a non-contiguous
                                         view of a Transpose (est_cost_strided_flags),
                                         then is a view of an Expand that broadcasts
                                         (est_cost_expanded_flags) */
    const est_cost_shared *shared;    /* the estimate's; rules read it through
                                         est_cost_train and the like */
    const est_node_attrs *known;      /* the node's known attributes; NULL without a plan */
    int n_in, n_out;
    est_dtype float_dtype;            /* the dtype tensors of the export's float dtype
                                         take in this estimate (the node's under --amp) */
    bool any_grad;                    /* some input needs a gradient: backward runs */
};
/* static_assert (assert.h): verify's CUDA sources read this header as C++ */
static_assert(sizeof(void *) != 8 || sizeof(struct est_cost_ctx) <= 56,
              "est_cost_ctx grew: every estimate holds one per node");

/* The context's flag arrays, n_in entries each, for whoever builds it. */
static inline bool *est_cost_grad_flags(const est_cost_ctx *c) { return c->in_flags; }
static inline bool *est_cost_strided_flags(const est_cost_ctx *c) { return c->in_flags + c->n_in; }
static inline bool *est_cost_expanded_flags(const est_cost_ctx *c) { return c->in_flags + 2 * c->n_in; }

/* The estimate's facts every node shares (est_cost_shared). */
static inline bool est_cost_train(const est_cost_ctx *c) { return c->shared->train; }
static inline est_kernels est_cost_kernels(const est_cost_ctx *c) { return c->shared->kernels; }
static inline est_dtype est_cost_export_dtype(const est_cost_ctx *c) { return c->shared->export_dtype; }
static inline const est_device *est_cost_device(const est_cost_ctx *c) { return c->shared->device; }
static inline bool est_cost_autocast(const est_cost_ctx *c) { return c->shared->autocast; }

struct est_flops {
    uint64_t fwd;
    uint64_t bwd;
};

#define EST_MAX_EXTRA 4
struct est_saved {
    est_slot_mask inputs;    /* inputs kept alive until this op's backward */
    est_slot_mask outputs;   /* outputs kept alive until this op's backward */
    int n_extra;             /* tensors made only for backward: masks, indices, statistics */
    uint64_t extra_bytes[EST_MAX_EXTRA];
};

/* Bytes of tensor t (0 for NULL). */
uint64_t est_tval_bytes(const est_tval *t);
/* Adds an extra saved tensor of `bytes`. */
void est_save_extra(est_saved *s, uint64_t bytes);

/* ---- helpers for infer functions (layers/op_util.c) ---------------------- */

/* Reports a failure naming the node: "node 'x' (Op): <reason>". */
est_status est_op_fail(est_infer_ctx *ctx, est_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif

    ;

/* Input i, or NULL when it is absent or beyond the node's inputs. Inline,
 * as the next: every node's infer reads its inputs at every estimate. */
static inline const est_tval *est_in(const est_infer_ctx *ctx, int i) {
    return i >= 0 && i < ctx->n_in ? ctx->in[i] : NULL;
}
/* Input i, failing with a clear message when absent. */
static inline est_status est_in_req(est_infer_ctx *ctx, int i, const est_tval **out) {
    *out = est_in(ctx, i);
    if (!*out) return est_op_fail(ctx, EST_EGRAPH, "required input %d is missing", i);
    if ((*out)->rank < 0) return est_op_fail(ctx, EST_ESHAPE, "input %d has an unknown shape", i);
    return EST_OK;
}

/* Sets output i's dtype and shape (checks dims and the element count); a no-op
 * for an omitted output. */
est_status est_set_out(est_infer_ctx *ctx, int i, est_dtype dt, int rank, const int64_t *dims);
/* Copies an input's dtype and shape to output i. */
est_status est_set_out_like(est_infer_ctx *ctx, int i, const est_tval *src);
/* Allocates a constant for output i (whose shape must already be set), owned
 * by the run. NULL when the output is not folded (too large, a dtype kept
 * without values) or on allocation failure; callers skip folding either way,
 * and an allocation failure also sets ctx->out_of_memory, which fails the
 * node with EST_ENOMEM once its infer returns. */
est_const *est_fold_out(est_infer_ctx *ctx, int i, est_dtype dt);
/* est_fold_out with the elements unset (not zeroed), for a rule that writes
 * every one or drops the value. */
est_const *est_fold_out_unset(est_infer_ctx *ctx, int i, est_dtype dt);

/* Attributes (est_attr_get and est_node_attr_* are the IR's: ir.h). */
/* Fails with EST_EATTR when present with the wrong type. */
est_status est_attr_int(est_infer_ctx *ctx, const char *name, int64_t dflt, int64_t *out);
est_status est_attr_float(est_infer_ctx *ctx, const char *name, double dflt, double *out);
/* *out NULL when absent. */
est_status est_attr_string(est_infer_ctx *ctx, const char *name, const char **out);
/* *n = -1 when absent. */
est_status est_attr_ints(est_infer_ctx *ctx, const char *name, const int64_t **vals, int64_t *n);
est_status est_attr_floats(est_infer_ctx *ctx, const char *name, const double **vals, int64_t *n);
/* est_attr_int and est_attr_ints of a known attribute. */
est_status est_known_int(est_infer_ctx *ctx, est_known_attr k, int64_t dflt, int64_t *out);
est_status est_known_ints(est_infer_ctx *ctx, est_known_attr k, const int64_t **vals, int64_t *n);

/* Normalises a possibly negative axis against rank; fails when out of range. */
est_status est_axis(est_infer_ctx *ctx, int64_t axis, int rank, int *out);

/* Reads a constant integer input as a list (e.g. Reshape's shape). Sets *n to
 * -1 when the input's contents are unknown. */
est_status est_in_ints(est_infer_ctx *ctx, int i, const int64_t **vals, int64_t *n);

/* Numpy-style broadcast of two shapes. */
est_status est_broadcast(est_infer_ctx *ctx, int ra, const int64_t *a, int rb, const int64_t *b,
                         int *rank, int64_t *dims);

/* Reads element k of a constant as int64 / double whatever its storage. */
int64_t est_const_get_i(const est_const *c, int64_t k);
double est_const_get_f(const est_const *c, int64_t k);
/* Stores a value converted to c's dtype (integers truncate, bool is != 0). */
void est_const_set(est_const *c, int64_t k, double f, int64_t i, bool from_float);



/* ---- shared rules ------------------------------------------------------- */

/* Output = input 0's dtype and shape (element-wise unary ops). */
est_status est_infer_like_input0(est_infer_ctx *ctx);

/* Spatial output size of a sliding window (Conv, pooling) over `n` spatial
 * dims, following ONNX's auto_pad, pads, strides, dilations and ceil_mode.
 * Reads those attributes from the node. */
est_status est_window_out(est_infer_ctx *ctx, int n, const int64_t *in, const int64_t *kernel,
                          bool ceil_mode, int64_t *out);
/* ---- helpers for training-step rules (layers/op_util.c) ------------------ */

/* bytes as one allocation takes them (EST_ALLOC_ROUND): a rule whose
 * workspace is several allocations sums them rounded. */
uint64_t est_alloc_bytes(uint64_t bytes);
/* Elements of t; 0 when t is absent or its shape unknown. Inline, as the
 * three below: the rules call them for every node of every estimate. */
static inline uint64_t est_tval_elements(const est_tval *t) {
    return t && t->rank >= 0 && t->elements > 0 ? (uint64_t)t->elements : 0;
}
/* Input or output i of the node, NULL when absent. */
static inline const est_tval *est_cost_in(const est_cost_ctx *c, int i) {
    return i >= 0 && i < c->n_in ? c->tv[i] : NULL;
}
static inline const est_tval *est_cost_out(const est_cost_ctx *c, int i) {
    return i >= 0 && i < c->n_out ? c->tv[c->n_in + i] : NULL;
}
/* True when input i is present and needs a gradient. */
static inline bool est_needs_grad(const est_cost_ctx *c, int i) {
    return est_cost_in(c, i) && est_cost_grad_flags(c)[i];
}
/* True when input i is present and a non-contiguous view (of a Transpose). */
static inline bool est_cost_strided(const est_cost_ctx *c, int i) {
    return est_cost_in(c, i) && est_cost_strided_flags(c)[i];
}
/* True when input i is present and a view of an Expand that broadcasts: its
 * storage holds fewer elements than it has (a stride-0 dim). */
static inline bool est_cost_expanded(const est_cost_ctx *c, int i) {
    return est_cost_in(c, i) && est_cost_expanded_flags(c)[i];
}
/* True when the op's backward does work: some input needs a gradient and
 * output 0 is floating (bool and integer outputs carry no gradient). */
static inline bool est_backward_runs(const est_cost_ctx *c) {
    const est_tval *y = est_cost_out(c, 0);
    return c->any_grad && y && est__dtype_is_float(y->dtype);
}
/* Element-wise FLOPs: fwd = per_element * elements; bwd = 2 * fwd when the
 * backward runs (docs/flops.md). */
static inline void est_flops_per_element(const est_cost_ctx *c, uint64_t per_element, uint64_t elements,
                                         est_flops *f) {
    f->fwd = est_mul_sat(per_element, elements);
    f->bwd = est_backward_runs(c) ? est_mul_sat(2, f->fwd) : 0;
}
/* Marks input i saved for backward. Skips absent inputs and inputs whose
 * contents are known: constants and small weights, which PyTorch holds as
 * Python numbers or persistent tensors, never as activations. Inline, as
 * the next: every node's rule calls them at every estimate. */
static inline void est_save_input(const est_cost_ctx *c, est_saved *s, int i) {
    const est_tval *t = est_cost_in(c, i);
    if (t && !t->value && i < 32) s->inputs |= EST_SLOT(i); /* the mask has 32 slots */
}
/* Marks output i saved for backward (when present). */
static inline void est_save_output(const est_cost_ctx *c, est_saved *s, int i) {
    if (est_cost_out(c, i) && i < 32) s->outputs |= EST_SLOT(i);
}
/* est_node_attr_int and est_node_attr_ints of a known attribute of the node. */
static inline int64_t est_cost_attr_int(const est_cost_ctx *c, est_known_attr k, int64_t dflt) {
    const est_attr *a = est_known_attr_get(c->known, c->node, k);
    return a && a->type == EST_ATTR_INT ? a->i : dflt;
}
static inline const int64_t *est_cost_attr_ints(const est_cost_ctx *c, est_known_attr k, int64_t *count) {
    const est_attr *a = est_known_attr_get(c->known, c->node, k);
    bool ok = a && a->type == EST_ATTR_INTS;
    *count = ok ? a->n : 0;
    return ok ? a->ints : NULL;
}
/* sum_to.c: the workspace of ATen's reduction kernel summing `rows` rows of
 * `cols` columns into one row (grad.sum(0): a bias gradient), on `dev`. */
uint64_t est_column_sum_workspace(const est_device *dev, uint64_t rows, uint64_t cols);
/* The workspace of summing output 0's gradient down to input i's broadcast
 * shape (autograd's sum_to): a column sum when the dims input i broadcasts
 * over lead its shape, else 0 (not modelled). */
uint64_t est_sum_to_workspace(const est_cost_ctx *c, int i);
/* Bytes of `count` statistics (mean, inverse std) PyTorch keeps for x:
 * float32, or float64 when x is double. */
uint64_t est_stat_bytes(const est_tval *x, uint64_t count);
/* Bytes of t as the estimate stores it: float_dtype when t has the export's
 * dtype, else its own. */
static inline uint64_t est_cost_bytes(const est_cost_ctx *c, const est_tval *t) {
    if (!t) return 0;
    return est__dtype_bytes(est__step_dtype(t->dtype, est_cost_export_dtype(c), c->float_dtype), est_tval_elements(t));
}
/* dims[from] * ... * dims[to - 1] (1 for an empty range). */
int64_t est_dims_product(int from, int to, const int64_t *dims);

/* Folding helpers shared by the shape and index families. */
void est_const_copy(est_const *dst, int64_t k, const est_const *src, int64_t j);
void est_strides(int rank, const int64_t *dims, int64_t *strides);
void est_next_index(int rank, const int64_t *dims, int64_t *idx);


/* The name of node input i, or "" when absent. */
const char *est_in_name(const est_infer_ctx *ctx, int i);
/* Reads integer input i whose values an output shape depends on (`what`
 * names it in errors); fails clearly when they are unknown at estimate time. */
est_status est_in_known_ints(est_infer_ctx *ctx, int i, const char *what, const int64_t **vals, int64_t *n);
/* Writes dims as "[2, 3, 4]" into buf, for error messages; returns buf. */
const char *est_dims_str(char *buf, size_t size, int rank, const int64_t *dims);

#endif
