/*
 * verify.h: the entry points of the CUDA verify executor (verify/), built as
 * a loadable module (libmemest_verify.so) so that memest itself never needs
 * the CUDA runtime: `memest verify` and the GPU tests dlopen it
 * (verify_load.h). Plain C, no CUDA types; includes only estimate.h.
 *
 * memest_verify_run() runs a loaded graph on the GPU with the executor's own
 * kernels and cuBLAS and measures, through its tracking allocator, the
 * memory of one steady-state step by category. It reads the graph (nodes,
 * tensors, attributes, declared dims, initializer roles) and never the
 * estimator's plan or report.
 */
#ifndef MEMEST_VERIFY_H
#define MEMEST_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "estimate.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MEMEST_VERIFY_ABI 2

/* What an allocation is, for the measured columns: the estimator's
 * categories (EST_CATEGORIES, docs/memory-model.md), in the same order. */
typedef enum vx_category {
#define VX_CATEGORY_ENUM(e, name) VX_CAT_##e,
    EST_CATEGORIES(VX_CATEGORY_ENUM)
#undef VX_CATEGORY_ENUM
    VX_CAT_COUNT
} vx_category;

/* The step's phases, after the setup that makes parameters and inputs. */
typedef enum vx_phase {
    VX_PHASE_SETUP,
#define VX_PHASE_ENUM(e, name) VX_PHASE_##e,
    EST_PHASES(VX_PHASE_ENUM)
#undef VX_PHASE_ENUM
} vx_phase;

/* Device storage dtypes. VX_BF16 and VX_F16 (2 bytes) hold the floating
 * tensors of a --dtype bfloat16 / float16 run; new values go at the end. */
typedef enum vx_dtype { VX_F32, VX_I64, VX_BOOL, VX_BF16, VX_F16 } vx_dtype;

typedef enum vx_status {
    VX_OK = 0,
    VX_ENOGPU,       /* no device or no CUDA runtime */
    VX_EOOM,         /* the device is out of memory: a result, not a crash */
    VX_EUNSUPPORTED, /* op, attribute or dtype the executor has no kernel for */
    VX_ESHAPE,       /* shapes the kernel cannot handle */
    VX_ECUDA,        /* a CUDA or cuBLAS call failed */
    VX_EIO,          /* reading weights failed */
    VX_EINVAL,       /* bad options (unbound dim, unsupported --dtype...) */
    VX_EDEVICE,      /* a GPU the module holds no code for (verify_archs) */
} vx_status;

/* A host tensor: graph input values given to a run, or outputs fetched.
 * data is float for VX_F32, int64_t for VX_I64, uint8_t for VX_BOOL. Inputs
 * and fetched outputs are float32 on the host in every run: a half run
 * converts them (its outputs are rounded to the half dtype first). */
typedef struct vx_value {
    const char *name;
    vx_dtype dtype;
    int rank;
    int64_t dims[8];
    int64_t numel;
    void *data;
} vx_value;

typedef struct vx_options {
    est_mode mode;              /* train: steps of forward, mean loss, backward, optimizer */
    est_optimizer optimizer;
    est_dtype dtype;            /* float32, bfloat16 or float16: the dtype of
                                   every floating tensor of the run */
    int64_t batch;              /* binds the leading symbolic dim of every input */
    const est_binding *dims;
    size_t n_dims;
    uint64_t seed;              /* random weights, inputs, dropout masks */
    int steps;                  /* steps run; the last is measured (default 2) */
    const vx_value *inputs;     /* optional input values by name (conformance) */
    size_t n_inputs;
    int fetch_outputs;          /* copy the graph outputs of the last step to the host */
    int hold_module_args;       /* keep a module call's arguments alive until it
                                   returns, as eager PyTorch does (default 1) */
    const char *weights_path;   /* ONNX file to read weights from (default: the
                                   graph's source); random when absent */
    uint64_t cublas_workspace;  /* bytes given to cuBLAS (default 32 MiB) */
    const char *const *frozen;  /* initializers (file names) that get no gradient
                                   nor optimizer state: --trainable / --freeze,
                                   resolved by the estimate; NULL: all train */
    size_t n_frozen;
    est_amp amp;                /* torch.autocast's low dtype (with dtype float32);
                                   EST_AMP_NONE: none */
} vx_options;

typedef struct vx_result {
    vx_status status;
    char message[512];
    char device_name[128];
    /* The measured step, from the tracking allocator (bytes rounded to 512). */
    uint64_t peak;
    uint64_t at_peak[VX_CAT_COUNT];
    vx_phase peak_phase;
    char peak_layer[128];
    uint64_t resident_before;       /* allocated when the measured step began */
    uint64_t resident_after;        /* allocated after it */
    double step_ms;                 /* wall time of the measured step (synchronised) */
    double first_step_ms;
    /* Device level (cudaMemGetInfo). */
    uint64_t device_total;
    uint64_t context_bytes;         /* used right after creating the context
                                       (includes other processes on the device) */
    uint64_t cublas_bytes;          /* handle plus its workspace */
    uint64_t cublas_workspace;
    uint64_t device_used_before;    /* used before the model was set up */
    uint64_t device_used_peak;      /* most used at any moment after that */
    uint64_t reserved_peak;         /* most bytes the executor held from cudaMalloc
                                       (live plus its cache of freed blocks) */
    /* Out of memory (status VX_EOOM). */
    uint64_t failed_request;
    uint64_t free_at_failure;
    vx_phase fail_phase;
    char fail_layer[128];
    /* Graph outputs of the last step when fetch_outputs was set. */
    size_t n_outputs;
    vx_value *outputs;
    size_t nodes;                   /* nodes run per forward */
} vx_result;

typedef void (*memest_verify_options_init_fn)(vx_options *o);
typedef vx_status (*memest_verify_run_fn)(const est_graph *g, const vx_options *o, vx_result *r);
typedef void (*memest_verify_result_free_fn)(vx_result *r);
typedef int (*memest_verify_abi_fn)(void);
/* Optional symbols (conformance tools, `memest ops`; verify_load.h leaves
 * them NULL when a module lacks them). None creates a CUDA context. */
typedef int (*memest_verify_has_op_fn)(const char *op_type);
typedef int (*memest_verify_device_count_fn)(char *msg, size_t msg_size);
typedef int (*memest_verify_op_info_fn)(const char *op_type, const char *domain, int *has_backward,
                                        const char **note);
typedef const char *(*memest_verify_archs_fn)(void);

/* What memest_verify_op_info() says the executor does with an op. */
enum {
    MEMEST_VERIFY_OP_NONE = 0,   /* no kernel: a graph holding it is refused */
    MEMEST_VERIFY_OP_DEVICE = 1, /* a CUDA (or cuBLAS) kernel */
    MEMEST_VERIFY_OP_HOST = 2,   /* host shape arithmetic (Shape, Range) or a
                                    value made at setup (Constant) */
};

/* The module's symbols. */
void memest_verify_options_init(vx_options *o);
/* Fills *r (zeroed first); returns r->status. r->message says what failed. */
vx_status memest_verify_run(const est_graph *g, const vx_options *o, vx_result *r);
void memest_verify_result_free(vx_result *r);
int memest_verify_abi(void);
/* 1 when the executor has a kernel (device or host) for op_type of the
 * standard ONNX domain ("Constant" included), else 0. Attributes, dtypes
 * and shapes a kernel refuses still show up as VX_EUNSUPPORTED at run time. */
int memest_verify_has_op(const char *op_type);
/* The CUDA devices memest_verify_run() could use: cudaGetDeviceCount's
 * count, 0 when it fails or finds none (msg, if given, then says why). This
 * initialises the CUDA runtime in the calling process (do it after fork,
 * not before). */
int memest_verify_device_count(char *msg, size_t msg_size);
/* Optional (`memest ops`). What the executor does with op_type of `domain`
 * (NULL or "" is ai.onnx): MEMEST_VERIFY_OP_*. *has_backward (if given) is 1
 * when a device kernel also has a backward. *note (if given) is a short
 * static reason for a forward-only, host or missing op, else NULL. */
int memest_verify_op_info(const char *op_type, const char *domain, int *has_backward, const char **note);
/* Optional. The GPU code the module holds, from the build's verify_archs
 * option, e.g. "sm_80, sm_86, sm_89, sm_90 + compute_90 PTX". */
const char *memest_verify_archs(void);

#ifdef __cplusplus
}
#endif

#endif
