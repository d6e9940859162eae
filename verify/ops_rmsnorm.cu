/*
 * ops_rmsnorm.cu: RMSNormalization (opset 23) and LRN, forward and backward.
 *
 * RMSNormalization (X, scale): normalized over axes [axis, rank) (axis
 *   default -1), y = x * rstd * scale, rstd = 1 / sqrt(mean(x^2) + epsilon).
 *   As PyTorch's _fused_rms_norm: saved[0] = rstd (float32 whatever X's
 *   dtype, one per row, in X's shape with 1 from axis on); saves X and scale.
 * LRN: across channels, window [c - floor((size-1)/2), c + ceil((size-1)/2)],
 *   y = x / (bias + alpha / size * sum x^2)^beta. Keeps X and three X-sized
 *   tensors, as F.local_response_norm's autograd graph (layers/norm.c's
 *   lrn_saves): the window sums of squares, the base and the divisor, all
 *   float32 whatever X's dtype (as lrn_saves counts them: X's export
 *   dtype), and a float32 workspace in backward.
 */
#include "ops_common.cuh"

/* One block per row of D elements: rstd, y. */
template <typename T>
static __global__ void rms_forward_kernel(T *y, float *rstd, const T *x, const T *scale, int64_t rows, int64_t D,
                                          float eps) {
    __shared__ float sh[VXK_THREADS];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * D;
        float q = 0.f;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) q += vxk_ld(xr[j]) * vxk_ld(xr[j]);
        float rs = rsqrtf(vxk_block_reduce(q, sh, false) / (float)D + eps);
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x)
            y[r * D + j] = vxk_st<T>(vxk_ld(xr[j]) * rs * vxk_ld(scale[j]));
        if (threadIdx.x == 0) rstd[r] = rs;
    }
}

/* dx = rstd (dy scale - xhat mean(dy scale xhat)), xhat = x rstd. */
template <typename T>
static __global__ void rms_dx_kernel(T *dx, const T *dy, const T *x, const float *rstd, const T *scale, int64_t rows,
                                     int64_t D) {
    __shared__ float sh[VXK_THREADS];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * D, *dyr = dy + r * D;
        float rs = rstd[r], b = 0.f;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x)
            b += vxk_ld(dyr[j]) * vxk_ld(scale[j]) * vxk_ld(xr[j]) * rs;
        b = vxk_block_reduce(b, sh, false) / (float)D;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x)
            dx[r * D + j] = vxk_st<T>(rs * (vxk_ld(dyr[j]) * vxk_ld(scale[j]) - vxk_ld(xr[j]) * rs * b));
    }
}

/* dscale[j] += sum over a chunk of rows of dy * xhat (atomic). */
template <typename T>
static __global__ void rms_dscale_kernel(float *dscale, const T *dy, const T *x, const float *rstd,
                                         int64_t rows, int64_t D, int64_t rows_per) {
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= D) return;
    int64_t r0 = (int64_t)blockIdx.y * rows_per, r1 = r0 + rows_per < rows ? r0 + rows_per : rows;
    float a = 0.f;
    for (int64_t r = r0; r < r1; r++) a += vxk_ld(dy[r * D + j]) * vxk_ld(x[r * D + j]) * rstd[r];
    atomicAdd(dscale + j, a);
}

/* The same into a half gradient without a float32 workspace: one thread per
 * column sums every row and stores once. */
template <typename T>
static __global__ void rms_dscale_direct_kernel(T *dscale, const T *dy, const T *x, const float *rstd, int64_t rows,
                                                int64_t D) {
    VXK_LOOP(j, D) {
        float a = 0.f;
        for (int64_t r = 0; r < rows; r++) a += vxk_ld(dy[r * D + j]) * vxk_ld(x[r * D + j]) * rstd[r];
        dscale[j] = vxk_st<T>(a);
    }
}

static vx_status rms_geom(vx_ctx *ctx, const vx_run *run, const vx_tensor *X, int *axis, int64_t *rows, int64_t *D) {
    int a = vxk_axis(vxk_attr_int(run, "axis", -1), X->rank);
    if (a < 0) return vx_fail(ctx, VX_ESHAPE, "RMSNormalization: axis out of range");
    *axis = a;
    *rows = vxk_prod(X->dims, 0, a);
    *D = vxk_prod(X->dims, a, X->rank);
    return VX_OK;
}

template <typename T> static vx_status rms_forward_t(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0], *S = run->in[1];
    if (S->dtype != X->dtype) return vx_fail(ctx, VX_EUNSUPPORTED, "RMSNormalization: X and scale of different dtypes");
    int axis;
    int64_t rows, D;
    vx_status st = rms_geom(ctx, run, X, &axis, &rows, &D);
    if (st) return st;
    if (S->numel != D)
        return vx_fail(ctx, VX_EUNSUPPORTED, "RMSNormalization: scale must cover the normalized shape (no broadcast)");
    float eps = (float)vxk_attr_float(run, "epsilon", 1e-5);
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, X->dims))) return st;
    int64_t sd[VX_MAX_RANK];
    for (int i = 0; i < X->rank; i++) sd[i] = i < axis ? X->dims[i] : 1;
    if ((st = vxk_new_saved(ctx, run, 0, VX_F32, X->rank, sd))) return st; /* rstd stays float32 */
    if (rows == 0 || D == 0) return VX_OK;
    rms_forward_kernel<T><<<(unsigned)(rows < 65536 ? rows : 65536), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (T *)run->out[0]->data, (float *)run->saved[0]->data, (const T *)X->data, (const T *)S->data, rows, D, eps);
    return vxk_check(ctx, "RMSNormalization");
}

static vx_status rms_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "RMSNormalization needs X and scale");
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "RMSNormalization", rms_forward_t<T>(ctx, run));
}

template <typename T> static vx_status rms_backward_t(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0], *S = run->in[1], *dYt = run->grad_out[0];
    int axis;
    int64_t rows, D;
    vx_status st = rms_geom(ctx, run, X, &axis, &rows, &D);
    if (st) return st;
    bool dx = run->need_grad[0], ds = run->need_grad[1];
    if (dx && (st = vxk_grad(ctx, run, 0))) return st;
    if (ds && (st = vxk_grad(ctx, run, 1))) return st;
    if (!dYt || rows == 0 || D == 0) {
        if (dx && (st = vxk_zero(ctx, run->grad_in[0]->data, (size_t)X->numel * sizeof(T)))) return st;
        if (ds && (st = vxk_zero(ctx, run->grad_in[1]->data, (size_t)S->numel * sizeof(T)))) return st;
        return VX_OK;
    }
    const T *x = (const T *)X->data, *dy = (const T *)dYt->data;
    const float *rstd = (const float *)run->saved[0]->data;
    cudaStream_t s = vxk_stream(ctx);
    if (dx)
        rms_dx_kernel<T><<<(unsigned)(rows < 65536 ? rows : 65536), VXK_THREADS, 0, s>>>(
            (T *)run->grad_in[0]->data, dy, x, rstd, (const T *)S->data, rows, D);
    if (ds && sizeof(T) != sizeof(float)) {
        rms_dscale_direct_kernel<T><<<vxk_blocks(D), VXK_THREADS, 0, s>>>((T *)run->grad_in[1]->data, dy, x, rstd,
                                                                          rows, D);
    } else if (ds) {
        if ((st = vxk_zero(ctx, run->grad_in[1]->data, (size_t)D * sizeof(float)))) return st;
        int64_t chunks = rows < 256 ? rows : 256, per = (rows + chunks - 1) / chunks;
        chunks = (rows + per - 1) / per;
        dim3 grid((unsigned)((D + VXK_THREADS - 1) / VXK_THREADS), (unsigned)chunks);
        rms_dscale_kernel<T><<<grid, VXK_THREADS, 0, s>>>((float *)run->grad_in[1]->data, dy, x, rstd, rows, D, per);
    }
    return vxk_check(ctx, "RMSNormalization backward");
}

static vx_status rms_backward(vx_ctx *ctx, vx_run *run) {
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "RMSNormalization backward", rms_backward_t<T>(ctx, run));
}

/* ---- LRN ------------------------------------------------------------------------- */

/* Channel c's window: [c - lo, c + hi], lo = floor((size - 1) / 2) (ONNX's). */
typedef struct lrn_geom {
    int64_t C, S, n, lo, hi;
    float alpha_n, beta, bias; /* alpha_n = alpha / size */
} lrn_geom;

/* sq = window sum of x^2, base = bias + alpha / size * sq, div = base^beta, y = x / div. */
template <typename T>
static __global__ void lrn_forward_kernel(T *y, float *sq, float *base, float *div, const T *x, lrn_geom g) {
    VXK_LOOP(i, g.n) {
        int64_t s = i % g.S, c = (i / g.S) % g.C, plane = i - (c * g.S + s);
        float acc = 0.f;
        for (int64_t k = c - g.lo; k <= c + g.hi; k++)
            if (k >= 0 && k < g.C) { float v = vxk_ld(x[plane + k * g.S + s]); acc += v * v; }
        float b = g.bias + g.alpha_n * acc, d = powf(b, g.beta);
        sq[i] = acc;
        base[i] = b;
        div[i] = d;
        y[i] = vxk_st<T>(vxk_ld(x[i]) / d);
    }
}

/* t = d loss / d sq = -dy x beta alpha_n / (div base). */
template <typename T>
static __global__ void lrn_t_kernel(float *t, const T *dy, const T *x, const float *base, const float *div, lrn_geom g) {
    VXK_LOOP(i, g.n) t[i] = -vxk_ld(dy[i]) * vxk_ld(x[i]) * g.beta * g.alpha_n / (div[i] * base[i]);
}

/* dx = dy / div + 2 x * sum of t over the channels whose window holds c. */
template <typename T>
static __global__ void lrn_dx_kernel(T *dx, const T *dy, const T *x, const float *div, const float *t, lrn_geom g) {
    VXK_LOOP(i, g.n) {
        int64_t s = i % g.S, c = (i / g.S) % g.C, plane = i - (c * g.S + s);
        float acc = 0.f;
        for (int64_t k = c - g.hi; k <= c + g.lo; k++)
            if (k >= 0 && k < g.C) acc += t[plane + k * g.S + s];
        dx[i] = vxk_st<T>(vxk_ld(dy[i]) / div[i] + 2.f * vxk_ld(x[i]) * acc);
    }
}

static vx_status lrn_geom_make(vx_ctx *ctx, const vx_run *run, lrn_geom *g) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "LRN needs X");
    const vx_tensor *X = run->in[0];
    if (!vx_dtype_is_float(X->dtype)) return vx_fail(ctx, VX_EUNSUPPORTED, "LRN: a floating X only");
    if (X->rank < 2) return vx_fail(ctx, VX_ESHAPE, "LRN: X rank %d (needs N, C, ...)", X->rank);
    int64_t size = vxk_attr_int(run, "size", 0);
    if (size < 1) return vx_fail(ctx, VX_ESHAPE, "LRN: size must be given and positive");
    g->C = X->dims[1];
    g->S = vxk_prod(X->dims, 2, X->rank);
    g->n = X->numel;
    g->lo = (size - 1) / 2;
    g->hi = size - 1 - g->lo;
    g->alpha_n = (float)(vxk_attr_float(run, "alpha", 1e-4) / (double)size);
    g->beta = (float)vxk_attr_float(run, "beta", 0.75);
    g->bias = (float)vxk_attr_float(run, "bias", 1.0);
    return VX_OK;
}

/* As F.local_response_norm's autograd graph: X and three X-sized tensors
 * (the window sums of squares, the base, the divisor; saved[0..2]). */
template <typename T> static vx_status lrn_forward_t(vx_ctx *ctx, vx_run *run, const lrn_geom &g) {
    lrn_forward_kernel<T><<<vxk_blocks(g.n), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (T *)run->out[0]->data, (float *)run->saved[0]->data, (float *)run->saved[1]->data,
        (float *)run->saved[2]->data, (const T *)run->in[0]->data, g);
    return vxk_check(ctx, "LRN");
}

static vx_status lrn_forward(vx_ctx *ctx, vx_run *run) {
    lrn_geom g;
    vx_status st = lrn_geom_make(ctx, run, &g);
    if (st) return st;
    const vx_tensor *X = run->in[0];
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, X->dims))) return st;
    for (int k = 0; k < 3; k++)
        if ((st = vxk_new_saved(ctx, run, k, VX_F32, X->rank, X->dims))) return st;
    if (g.n == 0) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, X->dtype, "LRN", lrn_forward_t<T>(ctx, run, g));
}

template <typename T>
static vx_status lrn_backward_t(vx_ctx *ctx, vx_run *run, const lrn_geom &g, const vx_tensor *dY, float *t) {
    const T *x = (const T *)run->in[0]->data, *dy = (const T *)dY->data;
    const float *base = (const float *)run->saved[1]->data, *div = (const float *)run->saved[2]->data;
    cudaStream_t s = vxk_stream(ctx);
    lrn_t_kernel<T><<<vxk_blocks(g.n), VXK_THREADS, 0, s>>>(t, dy, x, base, div, g);
    lrn_dx_kernel<T><<<vxk_blocks(g.n), VXK_THREADS, 0, s>>>((T *)run->grad_in[0]->data, dy, x, div, t, g);
    return vxk_check(ctx, "LRN backward");
}

static vx_status lrn_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    lrn_geom g;
    vx_status st = lrn_geom_make(ctx, run, &g);
    if (st) return st;
    vx_tensor *dX = vx_grad_new(ctx, run, 0);
    if (!dX) return vxk_oom(ctx, "gradient");
    const vx_tensor *dY = run->grad_out[0];
    if (!dY || g.n == 0) return vxk_zero(ctx, dX->data, (size_t)dX->numel * vx_dtype_size(dX->dtype));
    float *t = (float *)vx_workspace(ctx, (size_t)g.n * sizeof(float));
    if (!t) return vxk_oom(ctx, "LRN backward");
    st = [&]() -> vx_status { VXK_FLOAT_DISPATCH(ctx, dX->dtype, "LRN backward", lrn_backward_t<T>(ctx, run, g, dY, t)); }();
    vx_free(ctx, t);
    return st;
}

extern "C" {
const vx_op vx_ops_rmsnorm[] = {
    {"RMSNormalization", rms_forward, rms_backward, VX_SLOT(0) | VX_SLOT(1), 0, false, 0, NULL, 0, VX_HALF},
    {"LRN", lrn_forward, lrn_backward, VX_SLOT(0), 0, false, 0, NULL, 0, VX_HALF},
};
const size_t vx_ops_rmsnorm_count = sizeof vx_ops_rmsnorm / sizeof vx_ops_rmsnorm[0];
}
