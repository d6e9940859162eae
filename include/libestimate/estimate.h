/*
 * estimate.h: the public API of libestimate, the static GPU memory and FLOPs
 * estimator behind `memest`.
 *
 * A worked example: load a model once, estimate it at two batch sizes.
 *
 *     #include <libestimate/estimate.h>
 *     #include <stdio.h>
 *
 *     int main(void) {
 *         est_error err;
 *         est_graph *g = NULL;
 *         if (est_load_file("resnet18.onnx", &g, &err) != EST_OK) {
 *             fprintf(stderr, "%s\n", err.message);    // names file, node, reason
 *             return 1;
 *         }
 *         int64_t batches[] = {1, 32};
 *         for (int i = 0; i < 2; i++) {
 *             est_options opt;
 *             est_options_init(&opt);
 *             opt.batch = batches[i];
 *             est_report *r = NULL;
 *             if (est_estimate(g, &opt, &r, &err) != EST_OK) {
 *                 fprintf(stderr, "%s\n", err.message);
 *                 break;
 *             }
 *             const est_totals *t = est_report_totals(r);
 *             printf("batch %lld: %llu params, %zu layers\n",
 *                    (long long)batches[i], (unsigned long long)t->param_count,
 *                    est_report_layer_count(r));
 *             est_report_free(r);                  // the caller owns each report
 *         }
 *         est_graph_free(g);                       // and the graph
 *         return 0;
 *     }
 *
 * Ownership, in one line each:
 *  - est_graph: created by est_load_*(), owned by the caller, freed with
 *    est_graph_free(). Immutable after loading, so one graph can be estimated
 *    many times, and from several threads at once.
 *  - est_report: created by est_estimate(), owned by the caller, freed with
 *    est_report_free(). Every pointer read out of a report (names, shapes,
 *    layers) stays valid until the report is freed.
 *  - est_error: storage the caller provides (usually on the stack); it is
 *    filled on failure and never needs freeing.
 *  - Strings returned as `char *` (est_graph_to_json, est_report_to_json,
 *    est_sweep_to_json) belong to the caller and are freed with est_free().
 *  - est_time, est_modules: created by est_time_estimate() and
 *    est_modules_rollup(), owned by the caller, freed with est_time_free()
 *    and est_modules_free().
 *
 * Threads: different graphs may be loaded and estimated on different threads
 * at once, and one graph estimated from several. Only est_graph_free() of a
 * graph must not race with other uses of that graph. The library's only
 * shared mutable state is cJSON's global error position, which every cJSON
 * parse writes: JSON loads take a lock around the parse. (A program that
 * itself calls cJSON on other threads, or cJSON_InitHooks() at all, must do
 * so apart from the library's JSON loads.)
 *
 * Hostile input: a malformed file gives an error, never a crash, and the caps
 * in est_limits bound time and memory (docs/robustness.md).
 */
#ifndef ESTIMATE_H
#define ESTIMATE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(EST_BUILDING_LIBRARY) && defined(__GNUC__)
#define EST_API __attribute__((visibility("default")))
#else
#define EST_API
#endif

/* ------------------------------------------------------------------------ */
/* Error codes                                                              */
/* ------------------------------------------------------------------------ */

/* X(NAME, message). EST_OK is 0; every error is a positive value. */
#define EST_STATUS_MAP(X)                                                     \
    X(OK, "success")                                                          \
    X(ENOMEM, "out of memory")                                                \
    X(EIO, "cannot read file")                                                \
    X(EPARSE, "malformed model file")                                         \
    X(EGRAPH, "invalid graph structure")                                      \
    X(EUNSUPPORTED, "unsupported operator")                                   \
    X(EUNBOUND, "unbound symbolic dimension")                                 \
    X(ESHAPE, "shape inference failed")                                       \
    X(EATTR, "missing or ill-typed attribute")                                \
    X(EOVERFLOW, "size overflows 64 bits")                                    \
    X(ELIMIT, "resource limit exceeded")                                      \
    X(EINVAL, "invalid argument")

typedef enum est_status {
#define EST_STATUS_ENUM(name, msg) EST_##name,
    EST_STATUS_MAP(EST_STATUS_ENUM)
#undef EST_STATUS_ENUM
    EST_STATUS_COUNT
} est_status;

/* A static description of `code`, such as "out of memory". Never NULL. */
EST_API const char *est_strerror(est_status code);
/* The code's name without prefix, such as "ENOMEM". Never NULL. */
EST_API const char *est_status_name(est_status code);

/* Filled by any failing call: `code` and a message that names the file, the
 * node and the reason, e.g. "model.onnx: node 'conv1' (Conv): input 1 has
 * rank 3, expected 4". Caller-owned storage. The message is safe to print
 * on a terminal: what it quotes from the model is escaped as
 * est_escape_controls does. */
typedef struct est_error {
    est_status code;
    char message[512];
} est_error;

/* Copies text into dst (cap bytes, always NUL-terminated when cap > 0),
 * writing as \xNN every byte a terminal could act on or misread: control
 * bytes (below 0x20, and 0x7f), C1 controls (U+0080..U+009F) and bytes
 * that are not valid UTF-8. Names in a model are untrusted: a node named
 * "\x1b]0;..." would set a terminal's title. Returns the length the whole
 * escaped text needs, as snprintf does. */
EST_API size_t est_escape_controls(char *dst, size_t cap, const char *text);

/* ------------------------------------------------------------------------ */
/* Element types: the values are ONNX TensorProto.DataType's.                */
/* ------------------------------------------------------------------------ */

/* One line per type: its enum name, ONNX value, est_dtype_name() and bits
 * per element (0: no size). The enum, the names and the sizes come from it. */
#define EST_DTYPES(X) \
    X(UNDEFINED, 0, "undefined", 0) \
    X(FLOAT, 1, "float32", 32) \
    X(UINT8, 2, "uint8", 8) \
    X(INT8, 3, "int8", 8) \
    X(UINT16, 4, "uint16", 16) \
    X(INT16, 5, "int16", 16) \
    X(INT32, 6, "int32", 32) \
    X(INT64, 7, "int64", 64) \
    X(STRING, 8, "string", 0) \
    X(BOOL, 9, "bool", 8) \
    X(FLOAT16, 10, "float16", 16) \
    X(DOUBLE, 11, "float64", 64) \
    X(UINT32, 12, "uint32", 32) \
    X(UINT64, 13, "uint64", 64) \
    X(COMPLEX64, 14, "complex64", 64) \
    X(COMPLEX128, 15, "complex128", 128) \
    X(BFLOAT16, 16, "bfloat16", 16) \
    X(FLOAT8E4M3FN, 17, "float8e4m3fn", 8) \
    X(FLOAT8E4M3FNUZ, 18, "float8e4m3fnuz", 8) \
    X(FLOAT8E5M2, 19, "float8e5m2", 8) \
    X(FLOAT8E5M2FNUZ, 20, "float8e5m2fnuz", 8) \
    X(UINT4, 21, "uint4", 4) \
    X(INT4, 22, "int4", 4) \
    X(FLOAT4E2M1, 23, "float4e2m1", 4) \
    X(FLOAT8E8M0, 24, "float8e8m0", 8) \
    X(UINT2, 25, "uint2", 2) \
    X(INT2, 26, "int2", 2)

typedef enum est_dtype {
#define EST_DTYPE_ENUM(e, value, name, bits) EST_DT_##e = value,
    EST_DTYPES(EST_DTYPE_ENUM)
#undef EST_DTYPE_ENUM
    EST_DT_COUNT
} est_dtype;

/* Lower-case name ("float32", "int64", "bfloat16"); "undefined" if unknown. */
EST_API const char *est_dtype_name(est_dtype dt);
/* Parses a name from est_dtype_name() (also "float", "half", "fp16", "bf16").
 * Returns EST_DT_UNDEFINED when unknown. */
EST_API est_dtype est_dtype_from_name(const char *name);
/* Bytes taken by `count` elements of `dt` (sub-byte types round up). Returns
 * UINT64_MAX on overflow and 0 for strings or unknown types. */
EST_API uint64_t est_dtype_bytes(est_dtype dt, uint64_t count);

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct est_graph est_graph;

/* Loads an ONNX (.onnx) or JSON graph (.json) file; the format is chosen by
 * the file's content. Weight bytes are never kept: only names, dtypes and
 * dims, plus the values of small integer tensors that compute shapes.
 * On success *out is a new graph owned by the caller (est_graph_free). */
EST_API est_status est_load_file(const char *path, est_graph **out, est_error *err);

/* Loads an ONNX ModelProto from memory. `name` labels error messages (may be
 * NULL). The buffer is only read during the call. */
EST_API est_status est_load_onnx_buffer(const void *data, size_t size, const char *name,
                                        est_graph **out, est_error *err);

/* Loads the JSON graph format (docs/json-format.md) from memory. */
EST_API est_status est_load_json_buffer(const char *text, size_t size, const char *name,
                                        est_graph **out, est_error *err);

/* Caps on what one load or estimate may hold and do, so that a hostile or
 * broken file gives EST_ELIMIT (naming the file, the node and the cap) rather
 * than a hang, a crash or a machine out of memory. docs/robustness.md lists
 * them with their reasons. Start from est_limits_init() and change fields;
 * 0 in a field means its default. Caller-owned storage: the load functions
 * only read it during the call, and the graph keeps a copy, whose
 * max_dim_value and max_work also bound each est_estimate() of that graph. */
typedef struct est_limits {
    uint64_t max_file_bytes;    /* est_load_file*: file size; default 4 GiB */
    uint64_t max_nodes;         /* nodes in the graph; default 2^20 */
    uint64_t max_tensors;       /* named tensors (inputs, initializers, node
                                   outputs); default 2^22 */
    uint64_t max_symbols;       /* distinct symbolic dim names; default 4096 */
    uint32_t max_rank;          /* rank of any tensor; default and most 12 */
    int64_t max_dim_value;      /* any fixed dim, --batch and --dim; default and most 2^40 */
    uint64_t max_attr_elements; /* elements of one attribute (ints, floats,
                                   strings) and bytes of one string; default 2^20 */
    uint32_t max_nesting;       /* nesting of messages in an ONNX file (each
                                   subgraph level is three: graph, node,
                                   attribute) and of arrays and objects in a
                                   JSON file; default 64, at most 1000 */
    uint64_t max_work;          /* work of one estimate: one unit per node and
                                   per element folded to a constant; default 2^26 */
} est_limits;

/* Fills *lim with the defaults above. */
EST_API void est_limits_init(est_limits *lim);

/* The loaders above with caps other than the defaults. `lim` may be NULL (the
 * defaults); it is only read during the call. Otherwise as est_load_file(),
 * est_load_onnx_buffer() and est_load_json_buffer(): on success *out is a new
 * graph owned by the caller (est_graph_free). */
EST_API est_status est_load_file_limited(const char *path, const est_limits *lim, est_graph **out,
                                         est_error *err);
EST_API est_status est_load_onnx_buffer_limited(const void *data, size_t size, const char *name,
                                                const est_limits *lim, est_graph **out, est_error *err);
EST_API est_status est_load_json_buffer_limited(const char *text, size_t size, const char *name,
                                                const est_limits *lim, est_graph **out, est_error *err);

/* Frees a graph; NULL is allowed. */
EST_API void est_graph_free(est_graph *g);

/* Serialises a graph to the JSON graph format. On success *out is a
 * NUL-terminated string owned by the caller, freed with est_free(). */
EST_API est_status est_graph_to_json(const est_graph *g, char **out, est_error *err);

/* Frees memory the library handed to the caller as `char *`. */
EST_API void est_free(void *p);

/* Graph facts that need no estimate. Strings belong to the graph. */
EST_API const char *est_graph_name(const est_graph *g);      /* file name or "<memory>" */
EST_API size_t est_graph_node_count(const est_graph *g);
EST_API int64_t est_graph_opset(const est_graph *g);         /* default-domain opset */
/* The highest default-domain opset whose operators memest's rules follow
 * (ONNX 1.23's; the conformance cases check them). A model declaring a later
 * one is estimated by these rules, which the CLI says. */
#define EST_OPSET_MAX 28
/* BatchNormalizations the ONNX loader put back after a Conv into which the
 * exporter had folded them (docs/exports.md); 0 for other graphs. */
EST_API size_t est_graph_unfolded_batchnorms(const est_graph *g);
/* Op sequences an exporter expanded from one PyTorch op (the TorchScript
 * exporter's GELU) that the loader folded back into that op; 0 if none. */
EST_API size_t est_graph_fused_sequences(const est_graph *g);
EST_API size_t est_graph_input_count(const est_graph *g);
/* The parameters (weights a node may differentiate through), in file order:
 * the initializer's name and PyTorch's named_parameters() name where the
 * export records it (else the same string). NULL when i is out of range. */
EST_API size_t est_graph_param_count(const est_graph *g);
EST_API const char *est_graph_param_name(const est_graph *g, size_t i);
EST_API const char *est_graph_param_torch_name(const est_graph *g, size_t i);
EST_API const char *est_graph_input_name(const est_graph *g, size_t i);
/* The export's dtype: the floating dtype most parameter elements are
 * declared in (float32 when there is none). est_options.dtype converts the
 * tensors of this dtype, and only those. */
EST_API est_dtype est_graph_dtype(const est_graph *g);

/* ------------------------------------------------------------------------ */
/* Estimating                                                               */
/* ------------------------------------------------------------------------ */

/* Binds a symbolic dim by name, e.g. {"seq", 512}. */
typedef struct est_binding {
    const char *name;
    int64_t value;
} est_binding;

/* The known contents of a graph input, for models that take a shape or an
 * index tensor as input. Exactly one of ints/floats is set; `count` elements
 * in row-major order. Only used for constant folding during shape inference. */
typedef struct est_input_value {
    const char *name;
    size_t count;
    const int64_t *ints;
    const double *floats;
} est_input_value;

/* One dim of an est_input_shape: a fixed size, or a symbolic dim by name. */
typedef struct est_dim {
    int64_t value;       /* > 0: this fixed size (symbol NULL); 0: symbolic */
    const char *symbol;  /* with value 0: the dim's name. A name the graph
                            declares is that same dim; a new name is a new
                            symbolic dim. Either is bound like the graph's:
                            by est_options.dims, or by batch when it leads
                            an input's shape. */
} est_dim;

/* Replaces the shape a graph input declares, for one estimate: a fixed
 * batch-1 export's [1, 3, 224, 224] given as [batch, 3, 224, 224] can be
 * estimated at any batch; a dynamic dim can be fixed. The rank must be the
 * declared one (any rank when the file declares none); the dtype stays. */
typedef struct est_input_shape {
    const char *name;    /* the graph input (est_graph_input_name) */
    int rank;
    const est_dim *dims; /* `rank` dims */
} est_input_shape;

/* What step to simulate. */
typedef enum est_mode {
    EST_MODE_TRAIN = 0,   /* forward under autograd, backward, optimizer step */
    EST_MODE_INFER,       /* one forward pass without autograd */
} est_mode;

/* The optimizer of a training step; its state and its step's temporaries
 * follow PyTorch's default (foreach) implementations. */
typedef enum est_optimizer {
    EST_OPT_ADAM = 0,     /* the default: the most used, and it needs the most state */
    EST_OPT_ADAMW,
    EST_OPT_SGD,
    EST_OPT_MOMENTUM,     /* SGD with momentum */
    EST_OPT_ADAFACTOR,    /* torch.optim.Adafactor: factored second moments,
                             its default single-tensor loop */
    EST_OPT_COUNT
} est_optimizer;

EST_API const char *est_mode_name(est_mode m);           /* "train", "infer" */
EST_API const char *est_optimizer_name(est_optimizer o); /* "adam", "sgd", ... */
/* Parse a name; return -1 when unknown. */
EST_API int est_mode_from_name(const char *name);
EST_API int est_optimizer_from_name(const char *name);

/* The kernel libraries the estimate assumes. Only the workspaces differ:
 * PyTorch runs Conv through cuDNN (docs/memory-model.md, "Workspaces");
 * `memest verify`'s executor runs it as im2col + cuBLAS, with a column
 * buffer of a chunk of the batch (docs/verify.md). */
typedef enum est_kernels {
    EST_KERNELS_PYTORCH = 0, /* PyTorch eager: cuDNN, cuBLAS */
    EST_KERNELS_VERIFY,      /* memest verify's executor */
} est_kernels;

/* Automatic mixed precision: the forward pass and the loss run under
 * torch.autocast("cuda", dtype=...). Weights, their gradients and the
 * optimizer state stay float32; matrix products and convolutions run in the
 * low dtype (docs/memory-model.md, "Mixed precision (--amp)"). */
typedef enum est_amp {
    EST_AMP_NONE = 0,    /* the default: every floating tensor takes est_options.dtype */
    EST_AMP_BF16,        /* autocast to bfloat16 */
    EST_AMP_FP16,        /* autocast to float16 */
} est_amp;

/* Activation checkpointing (torch.utils.checkpoint, use_reentrant=False): the
 * named segments keep only their inputs during the forward pass; backward
 * recomputes each segment's forward before its own backward
 * (docs/memory-model.md, "Activation checkpointing"). Segments come from the
 * module names the model carries (est_node scopes: ONNX node names or the
 * dynamo exporter's metadata, the JSON "scope"). Set one of the two fields;
 * all zero means no checkpointing. Ignored in inference. */
typedef struct est_checkpoint {
    /* Each outermost module whose full name (as PyTorch's named_modules()
     * gives it: "layer1", "layer1.0", "encoder.layer.3") starts with one of
     * these strings is one segment. A string that starts no module's name
     * is matched against what follows each dot of the names instead:
     * "layers.3" finds "m.layers.3" and "model.layers.3", the names an
     * export's wrapper gives the user's modules. Not owned; must outlive
     * est_estimate(). */
    const char *const *prefixes;
    size_t n_prefixes;
    /* > 0: segments of this many consecutive blocks. A block is an outermost
     * module named by an index in its container ("layer1.0", "h.11",
     * "encoder_layer_3"); blocks of one container are grouped in order, a
     * shorter last group included. */
    int64_t every;
} est_checkpoint;

/* Which parameters train (fine-tuning: LoRA adapters, a new head, the last
 * stage). A parameter trains when `trainable` is empty or one of its patterns
 * matches the parameter's name, and no pattern of `frozen` matches it. A
 * frozen parameter gets no gradient and no optimizer state, and autograd
 * keeps only what the gradients still needed require. Patterns are matched
 * by est_name_matches() against both names of a parameter (est_param_info).
 * Not owned; must outlive est_estimate(). All zero: every parameter trains. */
typedef struct est_param_filter {
    const char *const *trainable;
    size_t n_trainable;
    const char *const *frozen;
    size_t n_frozen;
} est_param_filter;

/* Whether `pattern` names `name`: a pattern holding one of * ? [ is a glob
 * (fnmatch) on the whole name; any other pattern matches every name that
 * contains it ("lora_" matches "layers.0.q_proj.lora_A.default.weight"). */
EST_API int est_name_matches(const char *pattern, const char *name);
/* Checks that every pattern of `f` matches at least one parameter of `g`
 * (by either name): EST_EINVAL naming the pattern and a few real names
 * otherwise. est_estimate() makes the same check. */
EST_API est_status est_check_param_filter(const est_graph *g, const est_param_filter *f, est_error *err);

/* ------------------------------------------------------------------------ */
/* Devices                                                                  */
/* ------------------------------------------------------------------------ */

/* A GPU as the estimate sees it. The table is static: pointers stay valid
 * for the life of the process. A figure the part lacks or that is not
 * published is 0 (docs/capacity.md, "GPUs"). */
typedef struct est_device {
    const char *name;            /* "H100-80GB": what --gpu takes */
    uint64_t memory_bytes;       /* the memory a peak is compared with */
    const char *memory_basis;    /* where that figure comes from */
    int sm_count;                /* streaming multiprocessors */
    double memory_bandwidth;     /* bytes per second */
    double flops_fp32;           /* peak dense FLOP/s: float32 on CUDA cores, */
    double flops_tf32;           /* tf32, bf16 and fp16 on tensor cores */
    double flops_bf16;
    double flops_fp16;
    int max_threads_per_sm;      /* resident threads one SM holds (CUDA's
                                    occupancy limit of its compute
                                    capability): how many blocks of a kernel
                                    fill the device */
} est_device;

EST_API size_t est_device_count(void);
/* The i-th known device, NULL past the end. */
EST_API const est_device *est_device_at(size_t i);
/* The device named `name` (case, '-', '_' and ' ' ignored; "H100-NVL" is
 * H100-94GB), or NULL. */
EST_API const est_device *est_device_find(const char *name);

/* How a training step is spread over GPUs: data parallelism as PyTorch runs
 * it (docs/distributed.md). The estimate is then of one GPU, the one that
 * holds the most; est_options.batch is the batch each GPU runs. One list
 * makes the enum, est_strategy_name() and the names --strategy takes. */
#define EST_STRATEGIES(X) \
    X(NONE, "none")                 /* one GPU: no data parallelism */ \
    X(DDP, "ddp")                   /* DistributedDataParallel: a replica per
                                       GPU, gradients all-reduced in buckets */ \
    X(ZERO1, "zero1")               /* DDP with ZeroRedundancyOptimizer: each
                                       GPU keeps the optimizer state of its
                                       partition of the parameters */ \
    X(FSDP, "fsdp")                 /* FSDP2 fully_shard per block, then on
                                       the model: parameters, gradients and
                                       optimizer state sharded, a block's
                                       parameters gathered while it runs */ \
    X(FSDP_GRAD_OP, "fsdp-grad-op") /* the same, reshard_after_forward=False:
                                       gathered from forward until backward */ \
    X(HSDP, "hsdp")                 /* FSDP within shard groups of
                                       est_parallel.shard_group GPUs,
                                       gradients all-reduced across them */

typedef enum est_strategy {
#define EST_STRATEGY_ENUM(e, name) EST_STRATEGY_##e,
    EST_STRATEGIES(EST_STRATEGY_ENUM)
#undef EST_STRATEGY_ENUM
    EST_STRATEGY_COUNT
} est_strategy;

EST_API const char *est_strategy_name(est_strategy s); /* "ddp", ...; "unknown" out of range */
EST_API int est_strategy_from_name(const char *name);  /* -1 when unknown */

/* DDP's first bucket (est_parallel.first_bucket). The Reducer's first
 * iteration has one bucket of every gradient; the second iteration's
 * forward builds the real buckets, and the first one goes when the process
 * group's watchdog thread reaps its last all-reduce, some time later: a
 * race with the host, so the same job's peak differs from run to run by up
 * to that bucket (docs/distributed.md, "DDP's first bucket"). */
typedef enum est_first_bucket {
    EST_FIRST_BUCKET_AUTO = 0, /* held with more than one data-parallel GPU,
                                  where one of them holds it in most jobs;
                                  released with one */
    EST_FIRST_BUCKET_HELD,     /* kept until the second iteration's backward
                                  ends: the race lost, the larger peak */
    EST_FIRST_BUCKET_RELEASED  /* freed when the buckets are rebuilt: the
                                  race won, the smaller peak */
} est_first_bucket;

/* est_options.parallel; all zero: one GPU. */
typedef struct est_parallel {
    int64_t world_size;      /* GPUs in the job; 0 or 1: one */
    est_strategy strategy;   /* needs mode EST_MODE_TRAIN */
    int64_t shard_group;     /* hsdp: GPUs per shard group; divides
                                world_size. 0 for the other strategies */
    uint64_t bucket_bytes;   /* ddp, zero1: DDP's bucket_cap_mb in bytes;
                                0: 25 MiB */
    int grad_as_bucket_view; /* ddp, zero1: gradient_as_bucket_view=True,
                                the .grad tensors are views of the buckets */
    int offload;             /* fsdp family: CPUOffloadPolicy, the sharded
                                parameters, their gradients and the
                                optimizer state live in host memory */
    int64_t tp;              /* tensor parallelism of the transformer
                                blocks over this many GPUs (dividing
                                world_size; the strategy then runs over
                                world_size / tp); 0 or 1: none */
    int sequence_parallel;   /* with tp: the blocks' other activations
                                split along the sequence too */
    est_first_bucket first_bucket; /* ddp, zero1: DDP's first bucket */
    int by_rank;             /* 1: give data-parallel rank `rank`'s figures;
                                0: the GPU that holds the most. They differ
                                under zero1 alone, whose GPUs keep different
                                partitions of the optimizer state; the other
                                strategies' GPUs are alike */
    int64_t rank;            /* with by_rank: 0 to world_size / tp - 1. In
                                a report (est_report_parallel): the rank
                                whose figures it gives */
} est_parallel;

/* A pair of linear layers tensor parallelism split: the column-wise ones
 * (their output features split) and the row-wise one they feed (its input
 * features split). Owned by the report. */
typedef struct est_tp_pair {
    const char *block;           /* the module holding them ("layers.0.self_attn") */
    size_t n_columns;
    const char *const *columns;  /* the column-wise layers: each one's module
                                    (est_layer.module), or its label where the
                                    module is no more than the block */
    const char *row;             /* the row-wise layer, named the same way */
} est_tp_pair;

/* Per-GPU communication of one optimizer step (every micro-batch's), in
 * bytes of the collectives' full buffers; 0 where a collective's group has
 * one GPU, which sends nothing. */
typedef struct est_comm {
    uint64_t all_reduce_bytes;     /* DDP's buckets; HSDP's gradient shards */
    uint64_t all_gather_bytes;     /* FSDP's parameters, gathered per group */
    uint64_t reduce_scatter_bytes; /* FSDP's gradients */
    uint64_t broadcast_bytes;      /* ZeRO-1's updated parameters */
    uint64_t buckets;              /* DDP's gradient buckets */
    uint64_t groups;               /* FSDP's parameter groups: the blocks and
                                      the model's own (the root) */
    uint64_t first_bucket_held_bytes; /* DDP's first-iteration bucket (every
                                      gradient), counted as kept through the
                                      second iteration (comm); 0 where it is
                                      counted as released at the rebuild
                                      (est_parallel.first_bucket) */
    uint64_t first_bucket_bytes;   /* DDP's first-iteration bucket, held or
                                      not; 0 without DDP */
    uint64_t peak_first_bucket_held_bytes;     /* the step's peak (per GPU)
                                      with that bucket held through the second
                                      iteration's backward, and */
    uint64_t peak_first_bucket_released_bytes; /* with it released at the
                                      rebuild: the two ends of the race, one
                                      of them est_peak.bytes; 0 without DDP */
} est_comm;

typedef struct est_options {
    est_mode mode;                 /* default EST_MODE_TRAIN */
    est_optimizer optimizer;       /* default EST_OPT_ADAM */
    est_dtype dtype;               /* what the export's dtype (est_graph_dtype)
                                      becomes: parameters, gradients,
                                      optimizer state and activations of that
                                      dtype; tensors the export keeps in
                                      another floating dtype (a float32
                                      RMSNorm in a bfloat16 model) keep it.
                                      Default EST_DT_UNDEFINED: as exported */
    int64_t batch;                 /* binds the leading symbolic dim of every
                                      graph input; 0 = not given */
    const est_binding *dims;       /* binds symbolic dims by name */
    size_t n_dims;
    const est_input_value *values; /* optional known input contents */
    size_t n_values;
    const est_device *device;      /* the GPU the step runs on: the rules that
                                      depend on it (cuDNN's split-K) read it;
                                      NULL: H100-80GB, where they were
                                      measured */
    est_kernels kernels;           /* whose kernels run the ops (their
                                      workspaces differ); default
                                      EST_KERNELS_PYTORCH */
    est_amp amp;                   /* autocast; default EST_AMP_NONE. Needs
                                      dtype float32 (the master weights) */
    est_checkpoint checkpoint;     /* activation checkpointing; default none */
    uint64_t memory_limit;         /* > 0: the bytes PyTorch's caching
                                      allocator may reserve (a GPU's memory
                                      less what the process holds outside
                                      it); the replay then runs out where
                                      PyTorch would, fragmentation included,
                                      and sets totals.out_of_memory.
                                      Default 0: no limit */
    est_param_filter params;       /* which parameters train; default all */
    int64_t grad_accum;            /* micro-batches per optimizer step
                                      (gradient accumulation: the .grad
                                      tensors stay allocated through the
                                      later micro-batches' forward passes);
                                      0 or 1: none */
    const est_input_shape *input_shapes; /* shapes in place of the declared
                                      ones, at most one per input; the
                                      graph itself is not changed. Not
                                      owned; must outlive est_estimate().
                                      Default none */
    size_t n_input_shapes;
    int skip_reserved;             /* 1: no replay of the caching allocator:
                                      totals.reserved_bytes is 0 and
                                      memory_limit is not checked
                                      (totals.out_of_memory stays 0); the
                                      peak and every other figure are the
                                      same, and a training estimate takes
                                      about a third of the time. Default 0 */
    est_parallel parallel;         /* data parallelism; default one GPU */
    int timeline;                  /* 1: record every allocation and free of
                                      the step (est_report_event), and with
                                      them what is live at the peak
                                      (est_report_live) and the snapshots
                                      (est_report_snapshot). Default 0: none
                                      of the three, and a faster estimate */
} est_options;

/* Sets every option to its default (no batch, no bindings, the declared
 * input shapes). */
EST_API void est_options_init(est_options *opt);

/* Checks est_options.parallel against the other options (a strategy needs
 * training, hsdp a shard group that divides the world size, and so on):
 * EST_EINVAL with the reason otherwise. est_estimate() makes the same
 * check. */
EST_API est_status est_check_parallel(const est_options *opt, est_error *err);

typedef struct est_report est_report;

/* Infers every shape under `opt` and fills a new report owned by the caller
 * (est_report_free). Does not modify or re-parse the graph; safe to call
 * concurrently on the same graph. */
EST_API est_status est_estimate(const est_graph *g, const est_options *opt,
                                est_report **out, est_error *err);

/* Frees a report; NULL is allowed. */
EST_API void est_report_free(est_report *r);

/* One tensor as a layer sees it. Read-only, owned by the report. */
typedef struct est_tensor_info {
    const char *name;
    est_dtype dtype;
    int rank;
    const int64_t *shape;  /* `rank` dims */
    uint64_t elements;
    uint64_t bytes;
} est_tensor_info;

/* One node of the graph, in execution (topological) order. */
typedef struct est_layer {
    const char *name;      /* the node's name, or "<op>_<index>" if it has none */
    const char *op;        /* ONNX op_type */
    const char *domain;    /* "" for the standard domain */
    size_t n_inputs;
    const est_tensor_info *inputs;   /* absent optional inputs are left out */
    size_t n_outputs;
    const est_tensor_info *outputs;
    uint64_t param_count;  /* trainable weights first consumed by this layer */
    uint64_t param_bytes;
    uint64_t buffer_bytes; /* non-trainable state first consumed here
                              (BatchNorm running statistics) */
    uint64_t output_bytes; /* sum of outputs[].bytes */
    uint64_t flops_forward;
    uint64_t flops_backward; /* 0 in inference */
    uint64_t saved_bytes;  /* what autograd keeps for this layer's backward:
                              saved inputs, outputs and masks/indices/statistics,
                              each rounded like the allocator rounds */
    uint64_t temp_bytes;   /* workspace or temporaries of the forward and
                              backward kernels */
    int shape_only;        /* 1 when every output was folded to a constant:
                              the node only computes shapes */
    int64_t segment;       /* the checkpointed segment this layer runs in
                              (0, 1, ...), or -1 */
    int recomputed;        /* 1 when backward runs this layer's forward again */
    /* The PyTorch module the node ran in, by its named_modules() name in the
     * exported model ("layers.3.self_attn.q_proj"; "" for the model's own
     * forward), from the TorchScript exporter's node names, the dynamo
     * exporter's metadata or the JSON "scope"; NULL when the file does not
     * say (docs/exports.md, "Layer names"). */
    const char *module;
    /* What a report shows for the layer: `module` when the exporter made the
     * name up (the dynamo exporter's "node_linear_12"), otherwise `name`. */
    const char *label;
} est_layer;

/* The phases of a training step: where the peak (or an out-of-memory)
 * happens. One list makes the enum, est_phase_name() and the names every
 * output prints (X(ENUM_SUFFIX, name)). */
#define EST_PHASES(X) \
    X(FORWARD, forward) \
    X(BACKWARD, backward) \
    X(OPTIMIZER, optimizer)

typedef enum est_phase {
#define EST_PHASE_ENUM(e, name) EST_PHASE_##e,
    EST_PHASES(EST_PHASE_ENUM)
#undef EST_PHASE_ENUM
    EST_PHASE_COUNT
} est_phase;

/* What every allocated byte of a step is (docs/memory-model.md). One list
 * makes the enum, est_category_name(), est_peak's fields and the names the
 * table, JSON, CSV and verify print (X(ENUM_SUFFIX, name)). */
#define EST_CATEGORIES(X) \
    X(PARAMS, params) \
    X(BUFFERS, buffers) \
    X(GRADS, grads) \
    X(OPTIMIZER, optimizer) \
    X(ACTIVATIONS, activations) \
    X(TEMP, temp) \
    X(INPUTS, inputs) \
    X(COMM, comm) \
    X(OTHER, other)

typedef enum est_category {
#define EST_CATEGORY_ENUM(e, name) EST_CAT_##e,
    EST_CATEGORIES(EST_CATEGORY_ENUM)
#undef EST_CATEGORY_ENUM
    EST_CAT_COUNT
} est_category;

/* PyTorch's caching allocator rounds every block up to a multiple of this
 * many bytes (c10/cuda/CUDACachingAllocator.cpp, kMinBlockSize); memest
 * counts each tensor so rounded, and verify measures so. */
#define EST_ALLOC_ROUND 512

typedef struct est_totals {
    uint64_t param_count;
    uint64_t param_bytes;
    uint64_t trainable_param_count; /* parameters that train (est_options.params);
                                       0 in inference */
    uint64_t trainable_param_bytes;
    uint64_t buffer_count;
    uint64_t buffer_bytes;
    uint64_t constant_bytes;  /* other initializers (shape constants, ...) */
    uint64_t input_bytes;     /* graph inputs at the bound shapes */
    uint64_t output_bytes;    /* sum of every layer's output bytes */
    uint64_t flops_forward;
    uint64_t flops_backward;
    /* Memory by category. Sizes are rounded as the allocator rounds them. */
    uint64_t params_bytes;
    uint64_t buffers_bytes;
    uint64_t grads_bytes;      /* parameter gradients after backward */
    uint64_t optimizer_bytes;  /* optimizer state (steady state) */
    uint64_t activations_bytes;/* activations saved for backward, at their peak
                                  (the end of the forward pass); in inference,
                                  the largest set of live activations */
    uint64_t temp_bytes;       /* the largest temporary: workspaces,
                                  optimizer-step temporaries */
    uint64_t peak_bytes;       /* the simulated peak of allocated memory */
    uint64_t flops_recompute;  /* forward FLOPs that checkpointing runs again
                                  in backward (not in flops_backward) */
    uint64_t checkpoint_segments; /* segments checkpointed (0 without) */
    uint64_t reserved_bytes;   /* predicted torch.cuda.max_memory_reserved():
                                  the caching allocator's segments from
                                  creating the model through the step (three
                                  iterations in training), replayed on the
                                  simulated allocations; without the segments
                                  a process holds before (cuBLAS workspace) */
    int out_of_memory;         /* 1 when est_options.memory_limit is set and
                                  the allocator's replay cannot place a block
                                  under it, even after releasing its cached
                                  free segments (PyTorch raises
                                  OutOfMemoryError there); reserved_bytes
                                  then stops at that point */
    est_phase oom_phase;       /* where, when out_of_memory */
    const char *oom_layer;     /* the layer then ("" in the optimizer step);
                                  owned by the graph */
} est_totals;


EST_API const char *est_phase_name(est_phase p); /* "forward", "backward", "optimizer" */

/* Memory live at the peak, by category; the fields sum to `bytes`. */
typedef struct est_peak {
    uint64_t bytes;
    est_phase phase;
    const char *layer;       /* the layer running at the peak ("" for the optimizer) */
    /* bytes live at the peak, by category: params, buffers, grads, ... */
#define EST_PEAK_FIELD(e, name) uint64_t name;
    EST_CATEGORIES(EST_PEAK_FIELD)
#undef EST_PEAK_FIELD
    const char *module;      /* the layer's est_layer.module: NULL when unknown,
                                and when the peak is at no layer (the loss,
                                the optimizer step) */
    const char *label;       /* the layer's est_layer.label, else `layer` */
} est_peak;

EST_API const est_peak *est_report_peak(const est_report *r);
/* The peak's bytes of category c (0 for a c out of range). */
EST_API uint64_t est_peak_category(const est_peak *p, est_category c);
EST_API const char *est_category_name(est_category c); /* "params", ...; "unknown" out of range */

/* One parameter (a weight the model could train) and whether it trains in
 * this estimate. Owned by the report. */
typedef struct est_param_info {
    const char *name;        /* the initializer's name in the file */
    const char *torch_name;  /* PyTorch's named_parameters() name where the
                                export records it (else equal to name) */
    est_dtype dtype;         /* as the step stores it (est_options.dtype) */
    int rank;
    const int64_t *shape;
    uint64_t elements;
    uint64_t bytes;
    int trainable;           /* 1 when it gets a gradient and optimizer state */
} est_param_info;

/* The model's parameters, in the order the file declares them. */
EST_API size_t est_report_param_count(const est_report *r);
/* The i-th parameter, or NULL when i is out of range. */
EST_API const est_param_info *est_report_param(const est_report *r, size_t i);
EST_API est_mode est_report_mode(const est_report *r);
EST_API est_optimizer est_report_optimizer(const est_report *r);
EST_API est_dtype est_report_dtype(const est_report *r);
EST_API est_amp est_report_amp(const est_report *r);

/* The data parallelism the estimate is of (est_options.parallel, with
 * world_size at least 1), and its per-GPU communication. */
EST_API const est_parallel *est_report_parallel(const est_report *r);
EST_API const est_comm *est_report_comm(const est_report *r);
/* ---- the step over time (est_options.timeline) ---- */

/* One allocation or free of the simulated step, in order. Training
 * records the steady-state iteration (zero_grad to the optimizer step),
 * inference the forward pass. */
typedef enum est_event_kind {
    EST_EVENT_ALLOC = 0,
    EST_EVENT_FREE,
    EST_EVENT_MOVE,   /* the same block changes what it is (the step's
                         output, kept as the next step's "other"): a pair,
                         the old block and category, then the new */
} est_event_kind;

typedef struct est_event {
    est_event_kind kind;
    est_phase phase;
    int64_t layer;          /* the layer running (est_report_layer), -1 at
                               none: the loss, the optimizer step */
    est_category category;  /* a MOVE pair's: the block's category before
                               (the first event), then after (the second) */
    uint64_t bytes;         /* the block's, rounded as the allocator rounds */
    uint64_t block;         /* the same on a block's alloc, moves and free;
                               0 for a transient, freed by the next event */
    const char *tensor;     /* the graph tensor it holds, or NULL (a
                               workspace, a saved mask, a bucket) */
    const char *what;       /* "activation", "parameter gradient",
                               "exp_avg", "workspace and temporaries", ... */
    uint64_t allocated;     /* bytes allocated after the event */
    uint64_t reserved;      /* the caching allocator's reserved bytes after
                               it; 0 with est_options.skip_reserved */
} est_event;

EST_API size_t est_report_event_count(const est_report *r);
EST_API const est_event *est_report_event(const est_report *r, size_t i);

/* A block live at the peak. Their bytes sum to the peak. */
typedef struct est_live {
    const char *tensor;     /* as est_event.tensor */
    const char *what;
    int64_t layer;          /* the layer that allocated it, -1 at none */
    est_category category;
    uint64_t bytes;
    est_dtype dtype;        /* the tensor's, as the step stores it; */
    int rank;               /* -1 without a tensor */
    const int64_t *shape;   /* the tensor's whole shape */
} est_live;

/* What is live at the peak, the largest first. */
EST_API size_t est_report_live_count(const est_report *r);
EST_API const est_live *est_report_live(const est_report *r, size_t i);

/* Memory by category at three moments of the recorded step. */
typedef enum est_snapshot_at {
    EST_SNAPSHOT_BEFORE = 0,  /* before it: what the previous step left */
    EST_SNAPSHOT_PEAK,        /* at the peak (est_report_peak) */
    EST_SNAPSHOT_AFTER,       /* after it: the steady state */
    EST_SNAPSHOT_COUNT
} est_snapshot_at;

typedef struct est_snapshot {
    uint64_t bytes;
    uint64_t category[EST_CAT_COUNT];
} est_snapshot;

/* NULL without est_options.timeline, or for `at` out of range. */
EST_API const est_snapshot *est_report_snapshot(const est_report *r, est_snapshot_at at);

/* The pairs --tp split, in node order; 0 without tensor parallelism. */
EST_API size_t est_report_tp_pair_count(const est_report *r);
EST_API const est_tp_pair *est_report_tp_pair(const est_report *r, size_t i);

EST_API size_t est_report_layer_count(const est_report *r);
/* The i-th layer, or NULL when i is out of range. */
EST_API const est_layer *est_report_layer(const est_report *r, size_t i);
EST_API const est_totals *est_report_totals(const est_report *r);
EST_API int64_t est_report_batch(const est_report *r);   /* 0 if none */
/* The symbolic dims that were bound, in order of first appearance (the
 * graph's, then those only est_options.input_shapes name). */
EST_API size_t est_report_dim_count(const est_report *r);
EST_API const est_binding *est_report_dim(const est_report *r, size_t i);
/* Graph outputs, with their inferred shapes. */
EST_API size_t est_report_output_count(const est_report *r);
EST_API const est_tensor_info *est_report_output(const est_report *r, size_t i);

/* ------------------------------------------------------------------------ */
/* Operator registry                                                        */
/* ------------------------------------------------------------------------ */

/* Number of supported operators, and the i-th one's op_type and domain
 * (static strings). Used by `memest ops`. */
EST_API size_t est_op_count(void);
EST_API const char *est_op_name(size_t i);
EST_API const char *est_op_domain(size_t i);
EST_API const char *est_op_family(size_t i);

EST_API const char *est_version(void);

/* ------------------------------------------------------------------------ */
/* Capacity: does a step fit a GPU, and the largest batch that does          */
/* ------------------------------------------------------------------------ */

/* A GPU's memory, and what the framework holds beyond the estimate (the
 * CUDA context, the allocator's slack): docs/capacity.md. */
typedef struct est_fit {
    uint64_t gpu_bytes;      /* est_device.memory_bytes, or a size given */
    uint64_t reserve_bytes;
} est_fit;

/* The default reserve of a GPU of gpu_bytes for a job spread as `par`
 * (NULL: one GPU, no process group): 1 GiB for what is gone before PyTorch
 * allocates (the CUDA context, what CUDA cannot allocate) and 1.5% of the
 * memory for the estimate's error at the limit; with a strategy or tensor
 * parallelism, NCCL's own memory too (docs/capacity.md). */
EST_API uint64_t est_default_reserve(uint64_t gpu_bytes, const est_parallel *par);
/* gpu_bytes - reserve_bytes, 0 when the reserve takes it all. */
EST_API uint64_t est_fit_usable(const est_fit *fit);
/* usable - peak: negative when it does not fit (INT64_MIN past 2^63). */
EST_API int64_t est_fit_headroom(const est_fit *fit, uint64_t peak_bytes);
/* 1 when a step fits: its peak is within the usable memory, and the caching
 * allocator's replay under est_options.memory_limit (give it
 * est_fit_usable()) did not run out (totals->out_of_memory: fragmentation). */
EST_API int est_fit_ok(const est_fit *fit, uint64_t peak_bytes, const est_totals *totals);

/* One estimate's figures, as the searches and sweeps keep them. */
typedef struct est_point {
    int64_t value;           /* the batch or dim value it was estimated at */
    int overflow;            /* its sizes overflow 64 bits: it fits nothing */
    est_totals totals;
    est_peak peak;           /* layer, module and label are NULL */
} est_point;

/* est_estimate into a point: an EST_EOVERFLOW is a point that fits nothing
 * (overflow set, peak UINT64_MAX), not an error. */
EST_API est_status est_estimate_point(const est_graph *g, const est_options *opt, int64_t value, est_point *pt,
                                      est_error *err);
/* 1 when the point fits (est_fit_ok, and no overflow). */
EST_API int est_point_fits(const est_fit *fit, const est_point *pt);

typedef struct est_max_batch_result {
    int64_t batch;           /* the largest batch that fits; 0 when batch 1 does not */
    int64_t next_batch;      /* the smallest that does not; 0 when every batch up to the cap fits */
    est_point fits;          /* the point at `batch` (at batch 1 when it is 0) */
    est_point next;          /* the point at `next_batch`, when it is not 0 */
    int64_t estimates;       /* how many estimates the search took, batch 1 included */
} est_max_batch_result;

/* The largest batch in 1..cap whose step fits `fit` under `opt` (its batch
 * is ignored; set its memory_limit to est_fit_usable(fit)): lines through
 * the estimates' peaks, from batches 1 and 16 on, find where the peak meets
 * the usable memory, and the search gallops from there and bisects (docs/
 * capacity.md), so usually 6 to 14 estimates. A graph without a symbolic
 * batch fails as est_estimate does. */
EST_API est_status est_max_batch(const est_graph *g, const est_options *opt, const est_fit *fit, int64_t cap,
                                 est_max_batch_result *out, est_error *err);

/* ------------------------------------------------------------------------ */
/* Time: the step on a GPU, issued by an eager PyTorch host                 */
/* ------------------------------------------------------------------------ */

/* What the host (Python and PyTorch's eager dispatch) spends issuing the
 * step's work, in seconds: the GPU cannot start a kernel before the host
 * has issued it (docs/time-model.md). est_host_init() fills the defaults. */
typedef struct est_host {
    double forward_op_s;      /* per layer the forward pass runs */
    double forward_param_s;   /* per parameter a forward layer reads */
    double backward_op_s;     /* per layer backward runs (autograd's node) */
    double backward_param_s;  /* per trainable parameter (AccumulateGrad) */
    double optimizer_param_s; /* per trainable parameter in the optimizer step */
} est_host;

/* The defaults: the eager probe of bench/accuracy/time_layers.py on the
 * nvidia-h100-x1 machine, scaled as docs/time-model.md says. */
EST_API void est_host_init(est_host *h);

/* What limits a kernel's time in the roofline. */
typedef enum est_bound {
    EST_BOUND_NONE = 0,   /* no kernel: a view, a shape-only layer, no backward */
    EST_BOUND_COMPUTE,    /* FLOPs over the unit's FLOP/s */
    EST_BOUND_MEMORY,     /* bytes over the memory bandwidth */
    EST_BOUND_LAUNCH,     /* the shortest time a kernel takes */
} est_bound;
EST_API const char *est_bound_name(est_bound b); /* "none", "compute", "memory", "launch" */

/* One layer's kernels on the device (the GPU's time, not the host's). */
typedef struct est_layer_time {
    double forward_s;         /* its forward kernels (recomputation not included) */
    double backward_s;        /* its backward kernels; 0 in inference */
    est_bound forward_bound, backward_bound;
} est_layer_time;

/* The step's time, per micro-batch summed over est_options.grad_accum. */
typedef struct est_step_time {
    double step_s;            /* from the first issue to the last kernel's end */
    double phase_s[EST_PHASE_COUNT];  /* wall time of forward, backward and
                                         optimizer, each ending when its last
                                         kernel does (recomputation is backward's) */
    double device_s[EST_PHASE_COUNT]; /* kernel time in each phase */
    double host_s;            /* the host's issue time, all phases */
    double device_total_s;    /* kernel time, all phases */
    const est_device *device; /* the GPU it ran on */
} est_step_time;

typedef struct est_time est_time;

/* Times the estimate's step on `dev` (NULL: the report's device,
 * est_options.device or the H100) with the host `host` (NULL: the
 * defaults): every kernel's roofline time, and the step as two clocks, the
 * host issuing and the GPU running (docs/time-model.md). On success *out is
 * owned by the caller (est_time_free). EST_EINVAL for a host cost that is
 * negative or not finite. */
EST_API est_status est_time_estimate(const est_report *r, const est_device *dev, const est_host *host,
                                     est_time **out, est_error *err);
EST_API const est_step_time *est_time_step(const est_time *t);
/* Layer i's time (the report's layer order), NULL when out of range. */
EST_API const est_layer_time *est_time_layer(const est_time *t, size_t i);
EST_API void est_time_free(est_time *t);
/* The host costs `t` was timed with (est_time_estimate's `host`, or the
 * defaults). NULL for a NULL t. */
EST_API const est_host *est_time_host(const est_time *t);
/* "host" when the host takes longer to issue the step's work than the GPU
 * takes to run its kernels, else "gpu". */
EST_API const char *est_step_time_bound(const est_step_time *st);

/* ------------------------------------------------------------------------ */
/* Modules: the layers rolled up by module path (memest --depth N)          */
/* ------------------------------------------------------------------------ */

/* One module's layers summed, as torchinfo shows a model. */
typedef struct est_module_row {
    const char *name;         /* the module path's first `depth` parts
                                 ("layer1.0"); "(model)" for the model's own
                                 forward, "(unknown)" where the file does
                                 not say */
    size_t layers;
    uint64_t param_count, param_bytes, output_bytes, saved_bytes, flops_forward, flops_backward;
    double time_forward_s, time_backward_s; /* its layers' kernels; 0 without a time */
} est_module_row;

typedef struct est_modules est_modules;

/* Rolls the report's layers up by the first `depth` (> 0) parts of their
 * module path, in order of first appearance; with `time` (may be NULL) each
 * row sums its layers' kernel times too. On success *out is owned by the
 * caller (est_modules_free); it does not point into the report. */
EST_API est_status est_modules_rollup(const est_report *r, int64_t depth, const est_time *time, est_modules **out,
                                      est_error *err);
EST_API size_t est_modules_count(const est_modules *m);
/* The i-th row, or NULL when i is out of range. */
EST_API const est_module_row *est_modules_row(const est_modules *m, size_t i);
EST_API void est_modules_free(est_modules *m);

/* ------------------------------------------------------------------------ */
/* Sweeps: one graph estimated at each value of a dim                       */
/* ------------------------------------------------------------------------ */

/* Estimates `g` under `opt` at each of the n values of `dim`: "batch" sets
 * est_options.batch, any other name binds that symbolic dim (in place of
 * opt's binding of it, if any). points[i] gets the i-th (est_estimate_point:
 * an overflow is a point, not an error). On failure *done (may be NULL)
 * says how many points were estimated, so values[*done] is the one that
 * failed. `opt` is only read. */
EST_API est_status est_sweep(const est_graph *g, const est_options *opt, const char *dim, const int64_t *values,
                             size_t n, est_point *points, size_t *done, est_error *err);

/* ------------------------------------------------------------------------ */
/* Reports as JSON (docs/output-format.md): what `memest --format json` prints */
/* ------------------------------------------------------------------------ */

/* What a JSON report says beyond the report: the figures the CLI's flags
 * add. est_json_options_init() zeroes it (a plain report). Nothing is owned;
 * everything is only read during the call. */
typedef struct est_json_options {
    const char *model;        /* "model": the path as the user gave it (NULL: null) */
    const est_options *options; /* the options the report was estimated with:
                                   its checkpoint, params and grad_accum are
                                   echoed ("checkpoint", "trainable",
                                   "freeze", "grad_accum"); NULL: none */
    int timeline;             /* 1: the "timeline" array of every allocation
                                 and free (the report needs est_options.timeline,
                                 which also gives "peak.live" and "snapshots") */
    int64_t depth;            /* > 0: "depth" and "modules", the layers rolled
                                 up by module path (est_modules_rollup) */
    const est_fit *fit;       /* "fit": the GPU's memory and the verdict; NULL: none */
    const char *gpu;          /* the fit's GPU name ("fit.gpu"); NULL for a bare size */
    const est_time *time;     /* "time" and each layer's time_*; NULL: none */
    const est_max_batch_result *max_batch; /* "max_batch" after the report
                                 (memest --max-batch: the report is then of
                                 the largest batch that fits, or of batch 1) */
    int64_t max_batch_cap;    /* its "search_cap": est_max_batch's cap */
} est_json_options;

EST_API void est_json_options_init(est_json_options *o);

/* The report as memest --format json writes it, byte for byte, including
 * the final newline. On success *out is a NUL-terminated string owned by the
 * caller (est_free). `o` may be NULL (est_json_options_init's). */
EST_API est_status est_report_to_json(const est_report *r, const est_json_options *o, char **out, est_error *err);

/* Where est_report_write_json sends the text: called with each piece in
 * order (64 KiB at most, not NUL-terminated); nonzero stops the writing,
 * which then fails with EST_EIO. */
typedef int (*est_write_fn)(void *ctx, const char *data, size_t n);

/* The same text as est_report_to_json, handed to write(ctx, ...) as it is
 * made, so that a report too large to hold twice (a million layers) streams
 * to a file in constant memory. The pieces joined are est_report_to_json's
 * string. */
EST_API est_status est_report_write_json(const est_report *r, const est_json_options *o, est_write_fn write, void *ctx,
                                         est_error *err);

/* A sweep's points (est_sweep under `opt`, of `dim`) as memest --sweep
 * --format json writes them; of `o`, model, fit and gpu are read. On success
 * *out is owned by the caller (est_free). */
EST_API est_status est_sweep_to_json(const est_options *opt, const char *dim, const est_point *points, size_t n,
                                     const est_json_options *o, char **out, est_error *err);

#ifdef __cplusplus
}
#endif
#endif /* ESTIMATE_H */
