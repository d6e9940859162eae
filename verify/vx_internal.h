/*
 * vx_internal.h: what the executor's own files share (alloc.cu, tensor.cu,
 * exec.c, exec_setup.c, exec_train.c, weights.c, verify.c, ops_elementwise.cu,
 * ops_helpers.cu, ops_shape.c, optim.cu).
 * Kernel files of other families need only vx.h.
 */
#ifndef MEMEST_VX_INTERNAL_H
#define MEMEST_VX_INTERNAL_H

#include "vx.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vx_block {   /* a live allocation */
    void *p;
    uint64_t bytes;         /* rounded */
    vx_category cat;
} vx_block;

typedef struct vx_free_block {
    void *p;
    uint64_t bytes;
} vx_free_block;

struct vx_ctx {
    /* allocator (alloc.cu) */
    vx_alloc_stats stats;
    vx_phase phase;
    const est_node *node;       /* node running, or NULL */
    vx_block *blocks;           /* open addressing on p; p == NULL empty, (void*)1 tombstone */
    uint64_t blocks_cap, blocks_used;
    vx_free_block *cache;       /* freed blocks kept for reuse (exact size) */
    uint64_t cache_n, cache_cap;
    uint64_t reserved, reserved_peak;
    uint64_t device_total, device_free_min;
    bool track_device;
    FILE *trace;                /* $MEMEST_VERIFY_TRACE: every alloc and free, or NULL */
    void **ws;                  /* workspaces of the running kernel */
    int ws_n, ws_cap;
    /* CUDA */
    void *stream;
    void *cublas;
    void *cublas_ws;
    uint64_t cublas_ws_bytes;
    bool conv_tf32;             /* Conv's products in TF32 (vxk_conv_blas) */
    struct vx_profile *prof;    /* the measured step's profile, or NULL (profile.c) */
    uint64_t seed;
    uint64_t rng_calls;
    vx_dtype fdt;               /* the run's floating dtype (--dtype) */
    /* errors */
    char message[512];
};

/* alloc.cu */
void vx_alloc_init(vx_ctx *ctx);
void vx_alloc_shutdown(vx_ctx *ctx);          /* frees the cache and every live block */
void vx_alloc_reset_peak(vx_ctx *ctx);
void vx_alloc_retag(vx_ctx *ctx, void *p, vx_category cat);
void vx_alloc_free_workspaces(vx_ctx *ctx);   /* what the running kernel left */
void vx_alloc_empty_cache(vx_ctx *ctx);
void vx_alloc_sample_device(vx_ctx *ctx);     /* updates device_free_min */
/* Device free / total; 0 on failure. */
int vx_mem_info(uint64_t *free_b, uint64_t *total_b);

/* tensor.cu */
/* Moves t's storage (and views' base) to category cat. */
void vx_tensor_retag(vx_ctx *ctx, vx_tensor *t, vx_category cat);
/* A contiguous copy of t under cat. */
vx_tensor *vx_tensor_clone(vx_ctx *ctx, vx_tensor *t, vx_category cat);
/* A contiguous copy of floating t in floating dtype dt under cat (strided t
 * read in place). NULL when out of memory or on a launch error. */
vx_tensor *vx_tensor_cast(vx_ctx *ctx, vx_tensor *t, vx_dtype dt, vx_category cat);
/* Copies host data (float / int64 / uint8 by dtype) into t's device storage. */
vx_status vx_tensor_upload(vx_ctx *ctx, vx_tensor *t, const void *host);
/* Host conversions between float32 values and a floating dtype's storage
 * (n elements; the identity for VX_F32). */
void vx_from_f32(vx_dtype dt, const float *src, void *dst, int64_t n);
void vx_to_f32(vx_dtype dt, const void *src, float *dst, int64_t n);
/* Copies t to host memory (caller-allocated, numel * dtype size). */
vx_status vx_tensor_download(vx_ctx *ctx, vx_tensor *t, void *host);
/* Storage owner of t (t or its base). */
vx_tensor *vx_tensor_storage(vx_tensor *t);
bool vx_tensor_exclusive(const vx_tensor *t);
vx_status vx_cuda_status(vx_ctx *ctx, int cuda_err, const char *what);
vx_status vx_sync(vx_ctx *ctx);

/* ops_helpers.cu: helpers the executor, the optimizer and the op families
 * use; each dispatches on its tensors' dtypes. */
vx_status vx_k_fill(vx_ctx *ctx, vx_tensor *t, float v);
vx_status vx_k_add_inplace(vx_ctx *ctx, vx_tensor *dst, const vx_tensor *src);     /* same numel */
vx_status vx_k_add(vx_ctx *ctx, const vx_tensor *a, const vx_tensor *b, vx_tensor *out); /* same numel */
vx_status vx_k_mean(vx_ctx *ctx, const vx_tensor *x, vx_tensor *out);              /* out: 1 element */
vx_status vx_k_copy(vx_ctx *ctx, vx_tensor *dst, const vx_tensor *src);            /* same numel and dtype */
vx_status vx_k_cast(vx_ctx *ctx, const vx_tensor *src, vx_tensor *dst);           /* any dtypes, same numel */
vx_status vx_k_random(vx_ctx *ctx, vx_tensor *t, float lo, float hi, uint64_t seed);
vx_status vx_k_random_normal(vx_ctx *ctx, vx_tensor *t, float mean, float scale, uint64_t seed); /* float32 */
vx_status vx_k_bernoulli(vx_ctx *ctx, const vx_tensor *prob, vx_tensor *out, uint64_t seed); /* out f32 or bool */

/* ops_math.cu: Max / Min of n != 2 inputs (ops_elementwise.cu's rows hand
 * them over) and Pow with a tensor exponent (ops_unary.cu's row). */
vx_status vx_k_maxmin_n_fwd(vx_ctx *ctx, vx_run *run, bool is_max);
vx_status vx_k_maxmin_n_bwd(vx_ctx *ctx, vx_run *run, bool is_max);
bool vx_pow_tensor_path(const vx_run *run); /* exponent of more than one element, or needing a gradient */
vx_status vx_k_pow_tensor_fwd(vx_ctx *ctx, vx_run *run);
vx_status vx_k_pow_tensor_bwd(vx_ctx *ctx, vx_run *run);

/* optim.cu */
vx_status vx_k_sgd(vx_ctx *ctx, vx_tensor *p, const vx_tensor *g, float lr);
vx_status vx_k_momentum(vx_ctx *ctx, vx_tensor *p, const vx_tensor *g, vx_tensor *buf, float lr, float mom, bool first);
/* exp_avg = b1*m + (1-b1)*g; exp_avg_sq = b2*v + (1-b2)*g^2 (in place). */
vx_status vx_k_adam_moments(vx_ctx *ctx, const vx_tensor *g, vx_tensor *m, vx_tensor *v, float b1, float b2);
/* tmp = sqrt(v) / sqrt(bc2) + eps */
vx_status vx_k_adam_denom(vx_ctx *ctx, const vx_tensor *v, vx_tensor *tmp, float bc2_sqrt, float eps);
/* p = p * decay - step_size * m / tmp */
vx_status vx_k_adam_update(vx_ctx *ctx, vx_tensor *p, const vx_tensor *m, const vx_tensor *tmp, float step_size,
                            float decay);

/* weights.c */
typedef struct vx_weights vx_weights;
/* Opens an ONNX file's initializers and Constant values; *out NULL (no
 * error) when the path is not an ONNX file. */
vx_status vx_weights_open(const char *path, vx_weights **out, char *msg, size_t msg_size);
/* Copies the payload of `name` converted to dt (float / int64 / uint8) into
 * dst (numel elements). False when the file has no bytes for it (absent
 * external data) or the element count differs. */
bool vx_weights_get(vx_weights *w, const char *name, vx_dtype dt, int64_t numel, void *dst);
void vx_weights_free(vx_weights *w);

/* ops_shape.c */
extern const vx_op vx_host_ops[];
extern const size_t vx_host_ops_count;

/* op_info.c: whether the executor runs nodes of this domain (NULL, "",
 * ai.onnx, ai.memest). */
bool vx_domain_runs(const char *domain);

/* splitmix64 */
static inline uint64_t vx_mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

#ifdef __cplusplus
}
#endif

#endif
