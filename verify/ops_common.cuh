/*
 * ops_common.cuh: helpers the compute-kernel families (ops_gemm.cu,
 * ops_conv.cu, ops_norm.cu, ops_pool.cu, ops_softmax.cu, ops_gather.cu,
 * ops_recurrent.cu) share. Header-only (static inline), included by each .cu file.
 *
 * Conventions of those families:
 *  - forward creates run->out[k] (vx_out_new) for every present output slot;
 *  - backward creates run->grad_in[k] (vx_grad_new) for each need_grad[k];
 *    it reads the data of saved inputs / outputs only, and the dims of
 *    in[k] (which the executor keeps valid, storage or not);
 *  - on failure the kernel just returns: the executor drops what is in vx_run;
 *  - workspaces come from vx_workspace and are freed before returning.
 */
#ifndef MEMEST_OPS_COMMON_CUH
#define MEMEST_OPS_COMMON_CUH

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <string.h>

#include "vx.h"
#include "vx_half.cuh"

#define VXK_THREADS 256

static inline unsigned vxk_blocks(int64_t n) {
    int64_t b = (n + VXK_THREADS - 1) / VXK_THREADS;
    if (b < 1) b = 1;
    if (b > 65536) b = 65536; /* kernels use grid-stride loops */
    return (unsigned)b;
}

#define VXK_LOOP(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

/* Along one axis: the output position whose window puts kernel tap `tap` on
 * input position `in` (padding, dilation, stride), or -1 when none does.
 * The backward kernels that gather into an input cell (col2im, depthwise dX,
 * AveragePool dX) walk their taps with it. */
static __device__ inline int64_t vxk_window_of(int64_t in, int64_t pad, int64_t tap, int64_t dil, int64_t stride,
                                               int64_t out_size) {
    int64_t p = in + pad - tap * dil;
    if (p < 0 || p % stride) return -1;
    int64_t o = p / stride;
    return o < out_size ? o : -1;
}

static inline cudaStream_t vxk_stream(vx_ctx *ctx) { return (cudaStream_t)vx_stream(ctx); }
/* The handle in full float32: PyTorch's matmuls do not take TF32 unless
 * asked (torch.backends.cuda.matmul.allow_tf32 is False). */
static inline cublasHandle_t vxk_blas(vx_ctx *ctx) {
    cublasHandle_t h = (cublasHandle_t)vx_cublas(ctx);
    cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    return h;
}

/* The handle for convolutions' products: TF32 where the run asks for it,
 * as PyTorch's cuDNN convolutions take it by default
 * (torch.backends.cudnn.allow_tf32 is True). */
static inline cublasHandle_t vxk_conv_blas(vx_ctx *ctx) {
    cublasHandle_t h = (cublasHandle_t)vx_cublas(ctx);
    cublasSetMathMode(h, vx_conv_tf32(ctx) ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    return h;
}

static inline vx_status vxk_check(vx_ctx *ctx, const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return vx_fail(ctx, VX_ECUDA, "%s: %s", what, cudaGetErrorString(e));
    return VX_OK;
}

static inline vx_status vxk_blas_check(vx_ctx *ctx, cublasStatus_t s, const char *what) {
    if (s != CUBLAS_STATUS_SUCCESS) return vx_fail(ctx, VX_ECUDA, "%s: cuBLAS status %d", what, (int)s);
    return VX_OK;
}

static inline vx_status vxk_oom(vx_ctx *ctx, const char *what) {
    return vx_fail(ctx, VX_EOOM, "out of device memory (%s)", what);
}

/* ---- node / run ---------------------------------------------------------- */

/* Input k present (given and not omitted). */
static inline bool vxk_has_in(const vx_run *run, int k) { return k < run->n_in && run->in[k] != NULL; }

/* Output slot k present in the node (not omitted). */
static inline bool vxk_has_out(const vx_run *run, int k) {
    if (k >= run->n_out) return false;
    if (run->node && k < run->node->n_outputs && run->node->outputs && run->node->outputs[k] < 0) return false;
    return true;
}

static inline vx_status vxk_new_out(vx_ctx *ctx, vx_run *run, int k, vx_dtype dt, int rank, const int64_t *dims) {
    if (!vx_out_new(ctx, run, k, dt, rank, dims)) return vxk_oom(ctx, "output");
    return VX_OK;
}

/* grad_in[k], shaped like in[k], under run->grad_cat[k]. */
static inline vx_status vxk_grad(vx_ctx *ctx, vx_run *run, int k) {
    if (!vx_grad_new(ctx, run, k)) return vxk_oom(ctx, "gradient");
    return VX_OK;
}

/* A saved[] tensor (VX_CAT_ACTIVATIONS). */
static inline vx_status vxk_new_saved(vx_ctx *ctx, vx_run *run, int slot, vx_dtype dt, int rank, const int64_t *dims) {
    run->saved[slot] = vx_tensor_new(ctx, dt, rank, dims, VX_CAT_ACTIVATIONS);
    if (!run->saved[slot]) return vxk_oom(ctx, "saved for backward");
    return VX_OK;
}

/* ---- attributes ------------------------------------------------------------ */

static inline int64_t vxk_attr_int(const vx_run *run, const char *name, int64_t dflt) {
    return run->node ? est_node_attr_int(run->node, name, dflt) : dflt;
}
static inline double vxk_attr_float(const vx_run *run, const char *name, double dflt) {
    return run->node ? est_node_attr_float(run->node, name, dflt) : dflt;
}
static inline const char *vxk_attr_string(const vx_run *run, const char *name, const char *dflt) {
    return run->node ? est_node_attr_string(run->node, name, dflt) : dflt;
}
static inline const int64_t *vxk_attr_ints(const vx_run *run, const char *name, int64_t *count) {
    if (!run->node) { *count = 0; return NULL; }
    return est_node_attr_ints(run->node, name, count);
}
static inline int64_t vxk_opset(const vx_run *run) {
    if (run->opset > 0) return run->opset;
    return run->node && run->node->opset > 0 ? run->node->opset : 18;
}

/* Normalizes an axis; -1 when out of range. */
static inline int vxk_axis(int64_t axis, int rank) {
    if (axis < 0) axis += rank;
    return axis < 0 || axis >= rank ? -1 : (int)axis;
}

static inline int64_t vxk_prod(const int64_t *d, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= d[i];
    return p;
}

/* The broadcast shape of ts[0..n) (numpy's rule, right-aligned); false
 * when they do not broadcast. */
static inline bool vxk_broadcast_shape(int n, vx_tensor *const *ts, int *rank, int64_t *dims) {
    int r = 0;
    for (int k = 0; k < n; k++)
        if (ts[k]->rank > r) r = ts[k]->rank;
    for (int d = 0; d < r; d++) {
        int64_t v = 1;
        for (int k = 0; k < n; k++) {
            int off = r - ts[k]->rank;
            if (d < off) continue;
            int64_t e = ts[k]->dims[d - off];
            if (e == v || e == 1) continue;
            if (v != 1) return false;
            v = e;
        }
        dims[d] = v;
    }
    *rank = r;
    return true;
}

/* ---- integer tensors ----------------------------------------------------------- */

/* Device int64 data of t; copies the host mirror into a workspace (*ws, to be
 * vx_free'd) when t has no device storage. NULL with an error set on failure. */
static inline const int64_t *vxk_dev_i64(vx_ctx *ctx, const vx_tensor *t, void **ws, vx_status *st) {
    *ws = NULL;
    *st = VX_OK;
    if (t->dtype != VX_I64) { *st = vx_fail(ctx, VX_EUNSUPPORTED, "indices must be int64"); return NULL; }
    if (t->numel == 0) return NULL;
    if (t->data) return (const int64_t *)t->data;
    if (!t->host_i64) { *st = vx_fail(ctx, VX_ESHAPE, "integer tensor has no data"); return NULL; }
    *ws = vx_workspace(ctx, (size_t)t->numel * sizeof(int64_t));
    if (!*ws) { *st = vxk_oom(ctx, "index copy"); return NULL; }
    if (cudaMemcpyAsync(*ws, t->host_i64, (size_t)t->numel * sizeof(int64_t), cudaMemcpyHostToDevice,
                        vxk_stream(ctx)) != cudaSuccess) {
        vx_free(ctx, *ws);
        *ws = NULL;
        *st = vx_fail(ctx, VX_ECUDA, "copying indices to the device failed");
        return NULL;
    }
    return (const int64_t *)*ws;
}

/* Input k's values (its host copy: the op's host_inputs), at most cap of
 * them; *n = -1 when the input is absent. */
static inline vx_status vxk_input_ints(vx_ctx *ctx, vx_run *run, int k, int64_t *vals, int64_t *n, int64_t cap,
                                       const char *what) {
    *n = -1;
    if (!vxk_has_in(run, k)) return VX_OK;
    vx_tensor *t = run->in[k];
    if (t->numel > cap) return vx_fail(ctx, VX_EUNSUPPORTED, "%s has %lld values", what, (long long)t->numel);
    vx_status st = vx_tensor_to_host(ctx, t);
    if (st) return st;
    for (int64_t i = 0; i < t->numel; i++) vals[i] = vx_dtype_is_float(t->dtype) ? (int64_t)t->host_f32[i] : t->host_i64[i];
    *n = t->numel;
    return VX_OK;
}

/* Host values of a small int64 tensor into buf (up to cap); count, or -1. */
static inline int64_t vxk_host_i64(vx_ctx *ctx, const vx_tensor *t, int64_t *buf, int64_t cap) {
    if (!t || t->dtype != VX_I64 || t->numel > cap) return -1;
    if (t->host_i64) { memcpy(buf, t->host_i64, (size_t)t->numel * sizeof(int64_t)); return t->numel; }
    if (!t->data) return t->numel == 0 ? 0 : -1;
    if (cudaStreamSynchronize(vxk_stream(ctx)) != cudaSuccess) return -1;
    if (cudaMemcpy(buf, t->data, (size_t)t->numel * sizeof(int64_t), cudaMemcpyDeviceToHost) != cudaSuccess) return -1;
    return t->numel;
}

/* ---- shared kernels ---------------------------------------------------------------- */

/* Strides and a packed description of a generic reduction/broadcast. */
typedef struct vxk_bcast {
    int rank;
    int64_t dims[VX_MAX_RANK];    /* full (big) shape */
    int64_t sstride[VX_MAX_RANK]; /* strides of the small tensor in the big index space (0 on broadcast dims) */
} vxk_bcast;

/* The small shape (rank rs, right-aligned numpy broadcast) against the big one. */
static inline bool vxk_bcast_make(vxk_bcast *b, int rb, const int64_t *big, int rs, const int64_t *small) {
    if (rs > rb) {
        /* leading ones of the small shape may exceed the big rank */
        for (int i = 0; i < rs - rb; i++) if (small[i] != 1) return false;
        small += rs - rb;
        rs = rb;
    }
    b->rank = rb;
    int64_t st = 1;
    for (int i = rb - 1; i >= 0; i--) {
        b->dims[i] = big[i];
        int j = i - (rb - rs);
        int64_t d = j >= 0 ? small[j] : 1;
        if (d == big[i]) { b->sstride[i] = d == 1 ? 0 : st; }
        else if (d == 1) b->sstride[i] = 0;
        else return false;
        st *= d;
    }
    return true;
}

static __device__ __forceinline__ int64_t vxk_bcast_off(const vxk_bcast &b, int64_t i) {
    int64_t off = 0;
    for (int d = b.rank - 1; d >= 0; d--) {
        int64_t c = i % b.dims[d];
        i /= b.dims[d];
        off += c * b.sstride[d];
    }
    return off;
}

/* y[i] = alpha * small[bcast(i)] over the big shape. */
template <typename T>
static __global__ void vxk_bcast_copy_kernel(T *y, const T *small, vxk_bcast b, int64_t n, float alpha) {
    VXK_LOOP(i, n) y[i] = vxk_st<T>(alpha * vxk_ld(small[vxk_bcast_off(b, i)]));
}

/* A reduction of a big tensor onto a small one that broadcasts to it: the
 * small index o and the reduced index r map to a big offset. Kept dims and
 * reduced dims are listed separately (row-major in each). */
typedef struct vxk_reduce {
    int nk, nr;
    int64_t kdims[VX_MAX_RANK], kstride[VX_MAX_RANK]; /* kept dims of the big tensor, their big strides */
    int64_t rdims[VX_MAX_RANK], rstride[VX_MAX_RANK]; /* reduced dims */
    int64_t n_out, n_red;
} vxk_reduce;

/* Reduction of big (rank rb) onto small shape `keep` flags: keep[i] true keeps dim i. */
static inline void vxk_reduce_make(vxk_reduce *r, int rb, const int64_t *big, const bool *keep) {
    int64_t st[VX_MAX_RANK];
    int64_t s = 1;
    for (int i = rb - 1; i >= 0; i--) { st[i] = s; s *= big[i]; }
    r->nk = r->nr = 0;
    r->n_out = r->n_red = 1;
    for (int i = 0; i < rb; i++) {
        if (big[i] == 1) continue;
        if (keep[i]) { r->kdims[r->nk] = big[i]; r->kstride[r->nk++] = st[i]; r->n_out *= big[i]; }
        else { r->rdims[r->nr] = big[i]; r->rstride[r->nr++] = st[i]; r->n_red *= big[i]; }
    }
}

/* The big offset of index i over (dims, stride), in I (int32_t where the
 * big tensor's size allows: a 64-bit division is several 32-bit ones). */
template <typename I>
static __device__ __forceinline__ I vxk_unravel(int n, const int64_t *dims, const int64_t *stride, I i) {
    I off = 0;
    for (int d = n - 1; d >= 0; d--) {
        I c = i % (I)dims[d];
        i /= (I)dims[d];
        off += c * (I)stride[d];
    }
    return off;
}

/* One thread per output element (many outputs, short reductions). */
template <typename I, typename T>
static __global__ void vxk_reduce_thread_kernel(T *out, const T *in, vxk_reduce r, float scale, float beta) {
    VXK_LOOP(o, r.n_out) {
        I base = vxk_unravel<I>(r.nk, r.kdims, r.kstride, (I)o);
        float acc = 0.f;
        for (I j = 0; j < (I)r.n_red; j++) acc += vxk_ld(in[base + vxk_unravel<I>(r.nr, r.rdims, r.rstride, j)]);
        out[o] = vxk_st<T>(scale * acc + (beta != 0.f ? beta * vxk_ld(out[o]) : 0.f));
    }
}

/* One warp per output element (the lanes read neighbours of the reduced
 * dims: coalesced where the innermost dim is reduced). */
template <typename I, typename T>
static __global__ void vxk_reduce_warp_kernel(T *out, const T *in, vxk_reduce r, float scale, float beta) {
    int lane = threadIdx.x & 31;
    int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t o = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; o < r.n_out; o += warps) {
        I base = vxk_unravel<I>(r.nk, r.kdims, r.kstride, (I)o);
        float acc = 0.f;
        for (I j = lane; j < (I)r.n_red; j += 32) acc += vxk_ld(in[base + vxk_unravel<I>(r.nr, r.rdims, r.rstride, j)]);
        for (int k = 16; k > 0; k >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, k);
        if (lane == 0) out[o] = vxk_st<T>(scale * acc + (beta != 0.f ? beta * vxk_ld(out[o]) : 0.f));
    }
}

/* One block per output element (few outputs, long reductions). */
template <typename I, typename T>
static __global__ void vxk_reduce_block_kernel(T *out, const T *in, vxk_reduce r, float scale, float beta) {
    __shared__ float sh[VXK_THREADS];
    for (int64_t o = blockIdx.x; o < r.n_out; o += gridDim.x) {
        I base = vxk_unravel<I>(r.nk, r.kdims, r.kstride, (I)o);
        float acc = 0.f;
        for (I j = threadIdx.x; j < (I)r.n_red; j += blockDim.x)
            acc += vxk_ld(in[base + vxk_unravel<I>(r.nr, r.rdims, r.rstride, j)]);
        sh[threadIdx.x] = acc;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
            __syncthreads();
        }
        if (threadIdx.x == 0) out[o] = vxk_st<T>(scale * sh[0] + (beta != 0.f ? beta * vxk_ld(out[o]) : 0.f));
        __syncthreads();
    }
}

template <typename I, typename T>
static inline void vxk_reduce_launch(cudaStream_t s, T *out, const T *in, const vxk_reduce *r,
                                                           float scale, float beta) {
    if (r->n_out < 1024 && r->n_red >= 1024) {
        unsigned g = (unsigned)(r->n_out < 65536 ? r->n_out : 65536);
        vxk_reduce_block_kernel<I, T><<<g, VXK_THREADS, 0, s>>>(out, in, *r, scale, beta);
    } else if (r->n_red >= 32) {
        vxk_reduce_warp_kernel<I, T><<<vxk_blocks(r->n_out * 32), VXK_THREADS, 0, s>>>(out, in, *r, scale, beta);
    } else {
        vxk_reduce_thread_kernel<I, T><<<vxk_blocks(r->n_out), VXK_THREADS, 0, s>>>(out, in, *r, scale, beta);
    }
}

/* out (the kept dims, row-major) = scale * sum over the others [+ beta * out],
 * accumulated in float32 whatever the storage T. */
template <typename T>
static inline vx_status vxk_reduce_run(vx_ctx *ctx, T *out, const T *in, const vxk_reduce *r, float scale,
                                       float beta) {
    cudaStream_t s = vxk_stream(ctx);
    if (r->n_out == 0) return VX_OK;
    int64_t span = 1; /* one past the largest big offset */
    for (int d = 0; d < r->nk; d++) span += (r->kdims[d] - 1) * r->kstride[d];
    for (int d = 0; d < r->nr; d++) span += (r->rdims[d] - 1) * r->rstride[d];
    if (span < INT32_MAX / 2 && r->n_out < INT32_MAX / 2 && r->n_red < INT32_MAX / 2)
        vxk_reduce_launch<int32_t, T>(s, out, in, r, scale, beta);
    else
        vxk_reduce_launch<int64_t, T>(s, out, in, r, scale, beta);
    return vxk_check(ctx, "reduce kernel");
}

/* Sums a big tensor onto a shape that broadcasts to it (right-aligned). */
template <typename T>
static inline vx_status vxk_reduce_to(vx_ctx *ctx, T *out, int rs, const int64_t *small, const T *in, int rb,
                                      const int64_t *big, float scale) {
    bool keep[VX_MAX_RANK];
    for (int i = 0; i < rb; i++) {
        int j = i - (rb - rs);
        keep[i] = j >= 0 && small[j] == big[i];
    }
    vxk_reduce r;
    vxk_reduce_make(&r, rb, big, keep);
    return vxk_reduce_run(ctx, out, in, &r, scale, 0.f);
}

/* atomicAdd(p, v) from every lane; where the whole warp adds to one
 * address (a broadcast operand's gradient: a channel, a row), the warp sums
 * first in float32 and one lane adds (into half storage with sm_80's
 * bfloat16 atomicAdd, sm_70's half). Thousands of lanes on one address
 * serialize. */
template <typename T> static __device__ __forceinline__ void vxk_atomic_add(T *p, float v) {
    unsigned mask = __activemask();
    if (mask == 0xffffffffu) {
        T *p0 = (T *)__shfl_sync(mask, (unsigned long long)p, 0);
        if (__all_sync(mask, p == p0)) {
            for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(mask, v, o);
            if ((threadIdx.x & 31) == 0) vxk_atomic_add_t(p, v);
            return;
        }
    }
    vxk_atomic_add_t(p, v);
}

/* The max or the sum of v over the block (every thread passes its value;
 * sh holds blockDim.x floats); every thread gets the result. */
static __device__ float vxk_block_reduce(float v, float *sh, bool is_max) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            float o = sh[threadIdx.x + s];
            sh[threadIdx.x] = is_max ? fmaxf(sh[threadIdx.x], o) : sh[threadIdx.x] + o;
        }
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

static __global__ void vxk_fill_kernel(float *y, int64_t n, float v) {
    VXK_LOOP(i, n) y[i] = v;
}

static __global__ void vxk_scale_kernel(float *y, const float *x, int64_t n, float a) {
    VXK_LOOP(i, n) y[i] = a * x[i];
}

static inline vx_status vxk_zero(vx_ctx *ctx, void *p, size_t bytes) {
    if (!bytes) return VX_OK;
    if (cudaMemsetAsync(p, 0, bytes, vxk_stream(ctx)) != cudaSuccess) return vx_fail(ctx, VX_ECUDA, "cudaMemset failed");
    return VX_OK;
}

/* The backward of an op with one differentiable input: makes grad_in[0]
 * (*dx its data). True when that is the whole backward, *st saying how it
 * went: the gradient could not be made, or the output took no gradient
 * (dY NULL), in which case dx is zeros. */
static inline bool vxk_dx_or_done(vx_ctx *ctx, vx_run *run, const vx_tensor *dY, float **dx, vx_status *st) {
    if ((*st = vxk_grad(ctx, run, 0))) return true;
    *dx = (float *)run->grad_in[0]->data;
    if (dY) return false;
    *st = vxk_zero(ctx, *dx, (size_t)run->grad_in[0]->numel * sizeof(float));
    return true;
}

/* ---- fast division ----------------------------------------------------------------- */

/* n / d for n < 2^31 as a multiply-high and a shift (the divisor's magic
 * number, as PyTorch's IntDivider and libdivide make it). */
typedef struct vxk_fdiv {
    uint32_t d, m, s;
} vxk_fdiv;

static inline vxk_fdiv vxk_fdiv_make(uint32_t d) {
    vxk_fdiv f;
    f.d = d ? d : 1;
    f.s = 0;
    while (f.s < 32 && (1ull << f.s) < f.d) f.s++;
    f.m = (uint32_t)(((1ull << 32) * ((1ull << f.s) - f.d)) / f.d + 1);
    return f;
}

static __device__ __forceinline__ uint32_t vxk_fdiv_div(vxk_fdiv f, uint32_t n) {
    return (__umulhi(n, f.m) + n) >> f.s;
}

/* ---- cuBLAS, row-major ------------------------------------------------------------ */

/* Row-major C (m x n, leading dim ldc) = alpha * op(A) (m x k) * op(B) (k x n) + beta * C,
 * where A is stored row-major with leading dim lda (its column count as stored). */
static inline cublasStatus_t vxk_gemm(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                                      const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                                      int64_t ldc) {
    return cublasSgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha,
                       B, (int)ldb, A, (int)lda, &beta, C, (int)ldc);
}

static inline cublasStatus_t vxk_gemm_strided(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                              float alpha, const float *A, int64_t lda, int64_t sA, const float *B,
                                              int64_t ldb, int64_t sB, float beta, float *C, int64_t ldc, int64_t sC,
                                              int64_t batch) {
    if (batch == 1)
        return vxk_gemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    return cublasSgemmStridedBatched(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m,
                                     (int)k, &alpha, B, (int)ldb, sB, A, (int)lda, sA, &beta, C, (int)ldc, sC,
                                     (int)batch);
}

/* The same on half storage: cublasGemmEx / cublasGemmStridedBatchedEx with
 * bfloat16 or float16 inputs and output and a float32 accumulator, as
 * PyTorch's half matmuls run. Overloads of vxk_gemm / vxk_gemm_strided, so
 * a kernel templated on its storage type calls one name. */
template <typename T>
static inline cublasStatus_t vxk_gemm_half(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                           float alpha, const T *A, int64_t lda, int64_t sA, const T *B, int64_t ldb,
                                           int64_t sB, float beta, T *C, int64_t ldc, int64_t sC, int64_t batch) {
    cudaDataType_t dt = vxk_cuda_type<T>();
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (batch == 1)
        return cublasGemmEx(h, opb, opa, (int)n, (int)m, (int)k, &alpha, B, dt, (int)ldb, A, dt, (int)lda, &beta, C, dt,
                            (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return cublasGemmStridedBatchedEx(h, opb, opa, (int)n, (int)m, (int)k, &alpha, B, dt, (int)ldb, sB, A, dt,
                                      (int)lda, sA, &beta, C, dt, (int)ldc, sC, (int)batch, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT);
}
#define VXK_GEMM_HALF_OVERLOADS(T)                                                                                     \
    static inline cublasStatus_t vxk_gemm(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k,         \
                                          float alpha, const T *A, int64_t lda, const T *B, int64_t ldb, float beta,   \
                                          T *C, int64_t ldc) {                                                         \
        return vxk_gemm_half<T>(h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);                 \
    }                                                                                                                  \
    static inline cublasStatus_t vxk_gemm_strided(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, \
                                                  float alpha, const T *A, int64_t lda, int64_t sA, const T *B,        \
                                                  int64_t ldb, int64_t sB, float beta, T *C, int64_t ldc, int64_t sC,  \
                                                  int64_t batch) {                                                     \
        return vxk_gemm_half<T>(h, ta, tb, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);          \
    }
VXK_GEMM_HALF_OVERLOADS(__nv_bfloat16)
VXK_GEMM_HALF_OVERLOADS(__half)

/* Matrix sizes cuBLAS (int) can take. */
static inline bool vxk_gemm_fits(int64_t m, int64_t n, int64_t k) {
    return m >= 0 && n >= 0 && k >= 0 && m < INT32_MAX && n < INT32_MAX && k < INT32_MAX;
}

/* saves_fn of the products (Gemm, MatMul, Conv): input 0 when input 1 needs a
 * gradient, input 1 when input 0 does. */
static inline void vxk_product_saves(const vx_run *run, uint32_t *si, uint32_t *so) {
    *si = (run->need_grad[1] ? VX_SLOT(0) : 0u) | (run->need_grad[0] ? VX_SLOT(1) : 0u);
    *so = 0;
}

/* ---- Reduce* axes (ops_pool.cu, ops_reduce.cu) ---------------------------------------- */

/* The Reduce* ops' reduced axes (red[], over X = in[0]) and output shape:
 * axes from input 1 (opset 18, read on the host) or the attribute,
 * keepdims, noop_with_empty_axes (nothing reduced then). */
static inline vx_status vxk_reduce_axes(vx_ctx *ctx, vx_run *run, const char *op, bool *red, int *orank, int64_t *od) {
    const vx_tensor *X = run->in[0];
    int64_t buf[VX_MAX_RANK * 2];
    const int64_t *axes = NULL;
    int64_t n = 0;
    bool from_input = vxk_has_in(run, 1);
    if (from_input) {
        n = vxk_host_i64(ctx, run->in[1], buf, VX_MAX_RANK * 2);
        if (n < 0) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: axes must be a small int64 tensor", op);
        axes = buf;
    } else {
        axes = vxk_attr_ints(run, "axes", &n);
    }
    bool keepdims = vxk_attr_int(run, "keepdims", 1) != 0;
    bool noop_empty = vxk_attr_int(run, "noop_with_empty_axes", 0) != 0;
    for (int i = 0; i < X->rank; i++) red[i] = n == 0 && !noop_empty;
    for (int64_t k = 0; k < n; k++) {
        int a = vxk_axis(axes[k], X->rank);
        if (a < 0) return vx_fail(ctx, VX_ESHAPE, "%s: axis %lld out of range", op, (long long)axes[k]);
        red[a] = true;
    }
    *orank = 0;
    for (int i = 0; i < X->rank; i++) {
        if (!red[i]) od[(*orank)++] = X->dims[i];
        else if (keepdims) od[(*orank)++] = 1;
    }
    return VX_OK;
}

/* Counter-based uniform in [0, 1) for element i (splitmix64 of seed + i):
 * no generator state, so every random op is one pass with no extra memory. */
static __device__ __forceinline__ float vxk_rand_u01(unsigned long long seed, int64_t i) {
    unsigned long long z = seed + (unsigned long long)i * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

#endif
