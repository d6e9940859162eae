/*
 * ops_softmax.cu: Softmax and LogSoftmax, forward and backward.
 *
 * opset >= 13: along `axis` (default -1); before 13: over the flattened
 * dims [axis, rank) (default axis 1). X is viewed as (outer, L, inner); rows
 * with inner == 1 run a block per row, others a thread per (outer, inner).
 * Backward reads only the output (saves Y, as PyTorch's _softmax_backward_data):
 *   Softmax:    dx = y * (dy - sum(dy * y))
 *   LogSoftmax: dx = dy - exp(y) * sum(dy)
 */
#include "ops_common.cuh"

template <typename T>
static __global__ void softmax_rows_kernel(T *y, const T *x, int64_t rows, int64_t L, bool log_) {
    __shared__ float sh[VXK_THREADS];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * L;
        float m = -INFINITY;
        for (int64_t j = threadIdx.x; j < L; j += blockDim.x) m = fmaxf(m, vxk_ld(xr[j]));
        m = vxk_block_reduce(m, sh, true);
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < L; j += blockDim.x) s += expf(vxk_ld(xr[j]) - m);
        s = vxk_block_reduce(s, sh, false);
        float ls = logf(s);
        for (int64_t j = threadIdx.x; j < L; j += blockDim.x)
            y[r * L + j] = vxk_st<T>(log_ ? vxk_ld(xr[j]) - m - ls : expf(vxk_ld(xr[j]) - m) / s);
    }
}

template <typename T>
static __global__ void softmax_strided_kernel(T *y, const T *x, int64_t outer, int64_t L, int64_t inner, bool log_) {
    VXK_LOOP(t, outer * inner) {
        int64_t o = t / inner, i = t % inner;
        const T *xp = x + o * L * inner + i;
        T *yp = y + o * L * inner + i;
        float m = -INFINITY;
        for (int64_t j = 0; j < L; j++) m = fmaxf(m, vxk_ld(xp[j * inner]));
        float s = 0.f;
        for (int64_t j = 0; j < L; j++) s += expf(vxk_ld(xp[j * inner]) - m);
        float ls = logf(s);
        for (int64_t j = 0; j < L; j++) {
            float xv = vxk_ld(xp[j * inner]);
            yp[j * inner] = vxk_st<T>(log_ ? xv - m - ls : expf(xv - m) / s);
        }
    }
}

template <typename T>
static __global__ void softmax_bwd_rows_kernel(T *dx, const T *dy, const T *y, int64_t rows, int64_t L, bool log_) {
    __shared__ float sh[VXK_THREADS];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *yr = y + r * L, *dyr = dy + r * L;
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < L; j += blockDim.x)
            s += log_ ? vxk_ld(dyr[j]) : vxk_ld(dyr[j]) * vxk_ld(yr[j]);
        s = vxk_block_reduce(s, sh, false);
        for (int64_t j = threadIdx.x; j < L; j += blockDim.x) {
            float d = vxk_ld(dyr[j]), yv = vxk_ld(yr[j]);
            dx[r * L + j] = vxk_st<T>(log_ ? d - expf(yv) * s : yv * (d - s));
        }
    }
}

template <typename T>
static __global__ void softmax_bwd_strided_kernel(T *dx, const T *dy, const T *y, int64_t outer, int64_t L,
                                                  int64_t inner, bool log_) {
    VXK_LOOP(t, outer * inner) {
        int64_t o = t / inner, i = t % inner, base = o * L * inner + i;
        float s = 0.f;
        for (int64_t j = 0; j < L; j++)
            s += log_ ? vxk_ld(dy[base + j * inner]) : vxk_ld(dy[base + j * inner]) * vxk_ld(y[base + j * inner]);
        for (int64_t j = 0; j < L; j++) {
            int64_t k = base + j * inner;
            float d = vxk_ld(dy[k]), yv = vxk_ld(y[k]);
            dx[k] = vxk_st<T>(log_ ? d - expf(yv) * s : yv * (d - s));
        }
    }
}

static unsigned sm_threads(int64_t L) {
    unsigned t = 32;
    while (t < VXK_THREADS && (int64_t)t < L) t <<= 1;
    return t;
}

static vx_status sm_geom(vx_ctx *ctx, const vx_run *run, const vx_tensor *X, int64_t *outer, int64_t *L, int64_t *inner) {
    bool new_sem = vxk_opset(run) >= 13;
    int a = vxk_axis(vxk_attr_int(run, "axis", new_sem ? -1 : 1), X->rank > 0 ? X->rank : 1);
    if (a < 0) return vx_fail(ctx, VX_ESHAPE, "Softmax: axis out of range");
    if (X->rank == 0) { *outer = *L = *inner = 1; return VX_OK; }
    *outer = vxk_prod(X->dims, 0, a);
    if (new_sem) { *L = X->dims[a]; *inner = vxk_prod(X->dims, a + 1, X->rank); }
    else { *L = vxk_prod(X->dims, a, X->rank); *inner = 1; }
    return VX_OK;
}

template <typename T> static vx_status sm_forward_t(vx_ctx *ctx, vx_run *run, bool log_) {
    const vx_tensor *X = run->in[0];
    int64_t outer, L, inner;
    vx_status st = sm_geom(ctx, run, X, &outer, &L, &inner);
    if (st) return st;
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, X->dims))) return st;
    if (X->numel == 0) return VX_OK;
    T *y = (T *)run->out[0]->data;
    cudaStream_t s = vxk_stream(ctx);
    if (inner == 1)
        softmax_rows_kernel<T><<<(unsigned)(outer < 65536 ? outer : 65536), sm_threads(L), 0, s>>>(
            y, (const T *)X->data, outer, L, log_);
    else
        softmax_strided_kernel<T><<<vxk_blocks(outer * inner), VXK_THREADS, 0, s>>>(y, (const T *)X->data, outer, L,
                                                                                    inner, log_);
    return vxk_check(ctx, "Softmax");
}

static vx_status sm_forward(vx_ctx *ctx, vx_run *run, bool log_) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "Softmax needs X");
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "Softmax", sm_forward_t<T>(ctx, run, log_));
}

template <typename T> static vx_status sm_backward_t(vx_ctx *ctx, vx_run *run, bool log_) {
    const vx_tensor *Y = run->out[0], *dY = run->grad_out[0];
    int64_t outer, L, inner;
    vx_status st = sm_geom(ctx, run, Y, &outer, &L, &inner);
    if (st) return st;
    if ((st = vxk_grad(ctx, run, 0))) return st;
    T *dx = (T *)run->grad_in[0]->data;
    if (!dY) return vxk_zero(ctx, dx, (size_t)run->grad_in[0]->numel * sizeof(T));
    if (Y->numel == 0) return VX_OK;
    cudaStream_t s = vxk_stream(ctx);
    if (inner == 1)
        softmax_bwd_rows_kernel<T><<<(unsigned)(outer < 65536 ? outer : 65536), sm_threads(L), 0, s>>>(
            dx, (const T *)dY->data, (const T *)Y->data, outer, L, log_);
    else
        softmax_bwd_strided_kernel<T><<<vxk_blocks(outer * inner), VXK_THREADS, 0, s>>>(
            dx, (const T *)dY->data, (const T *)Y->data, outer, L, inner, log_);
    return vxk_check(ctx, "Softmax backward");
}

static vx_status sm_backward(vx_ctx *ctx, vx_run *run, bool log_) {
    if (!run->need_grad[0]) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, run->out[0]->dtype, "Softmax backward", sm_backward_t<T>(ctx, run, log_));
}

static vx_status softmax_forward(vx_ctx *ctx, vx_run *run) { return sm_forward(ctx, run, false); }
static vx_status softmax_backward(vx_ctx *ctx, vx_run *run) { return sm_backward(ctx, run, false); }
static vx_status logsoftmax_forward(vx_ctx *ctx, vx_run *run) { return sm_forward(ctx, run, true); }
static vx_status logsoftmax_backward(vx_ctx *ctx, vx_run *run) { return sm_backward(ctx, run, true); }

extern "C" {
const vx_op vx_ops_softmax[] = {
    {"Softmax", softmax_forward, softmax_backward, 0, VX_SLOT(0), false, 0, NULL, 0, VX_HALF},
    {"LogSoftmax", logsoftmax_forward, logsoftmax_backward, 0, VX_SLOT(0), false, 0, NULL, 0, VX_HALF},
};
const size_t vx_ops_softmax_count = sizeof vx_ops_softmax / sizeof vx_ops_softmax[0];
}
