/*
 * ops_groupnorm.cu: InstanceNormalization and GroupNormalization, forward
 * and backward (their table entries are ops_norm.cu's, vx_ops_norm). The
 * kernels are templates on the storage type (float, bfloat16, float16;
 * vx_half.cuh): they load to float, compute in float32 and round their
 * stores; the statistics (mean, inverse std) stay float32 in a half run.
 *
 * InstanceNormalization (X, scale, B): statistics per (n, c) over the spatial
 *   dims, as instance_norm's batch_norm on (1, N*C, ...): saved[0] = scale
 *   repeated N times (X's dtype), saved[1] = mean, saved[2] = inverse std
 *   (N*C each). saves X (not scale or B: backward reads the repeated copy).
 * GroupNormalization (X, scale, bias, num_groups): statistics per
 *   (n, group); saved[0] = mean, saved[1] = rstd; saves X and scale.
 */
#include "ops_common.cuh"

/* ---- InstanceNormalization ----------------------------------------------------------- */

/* One block per (n, c) plane of D elements: mean, inverse std, y. */
template <typename T>
static __global__ void in_forward_kernel(T *y, float *mean, float *invstd, const T *x, const T *scale, const T *b,
                                         int64_t planes, int64_t C, int64_t D, float eps) {
    __shared__ float sh[VXK_THREADS];
    for (int64_t r = blockIdx.x; r < planes; r += gridDim.x) {
        const T *xr = x + r * D;
        int64_t c = r % C;
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) s += vxk_ld(xr[j]);
        float m = vxk_block_reduce(s, sh, false) / (float)D;
        float q = 0.f;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) { float d = vxk_ld(xr[j]) - m; q += d * d; }
        float is = rsqrtf(vxk_block_reduce(q, sh, false) / (float)D + eps);
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x)
            y[r * D + j] = vxk_st<T>((vxk_ld(xr[j]) - m) * is * vxk_ld(scale[c]) + vxk_ld(b[c]));
        if (threadIdx.x == 0) { mean[r] = m; invstd[r] = is; }
    }
}

template <typename T> static __global__ void repeat_kernel(T *dst, const T *src, int64_t C, int64_t n) {
    VXK_LOOP(i, n) dst[i] = src[i % C];
}

/* The block's sums over n elements of dy and of dy * xhat, xhat = (x - m) * is,
 * in *a and *b of every thread: a plane's ds and db. */
template <typename T>
static __device__ void plane_grad_sums(const T *dy, const T *x, int64_t n, float m, float is, float *sh, float *a,
                                       float *b) {
    float sa = 0.f, sb = 0.f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        sa += vxk_ld(dy[j]);
        sb += vxk_ld(dy[j]) * (vxk_ld(x[j]) - m) * is;
    }
    *a = vxk_block_reduce(sa, sh, false);
    *b = vxk_block_reduce(sb, sh, false);
}

/* One block per plane: sum dy and sum dy * xhat (into sums[r], sums[planes + r]),
 * then dx (when wanted) as batch_norm's training backward over the plane. */
template <typename T>
static __global__ void in_backward_kernel(T *dx, float *sums, const T *dy, const T *x, const float *mean,
                                          const float *invstd, const T *wrep, int64_t planes, int64_t D) {
    __shared__ float sh[VXK_THREADS];
    for (int64_t r = blockIdx.x; r < planes; r += gridDim.x) {
        const T *xr = x + r * D, *dyr = dy + r * D;
        float m = mean[r], is = invstd[r], a, b;
        plane_grad_sums(dyr, xr, D, m, is, sh, &a, &b);
        if (threadIdx.x == 0) { sums[r] = a; sums[planes + r] = b; }
        if (!dx) continue;
        float w = vxk_ld(wrep[r]) * is, inv_d = 1.f / (float)D;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
            float xh = (vxk_ld(xr[j]) - m) * is;
            dx[r * D + j] = vxk_st<T>(w * (vxk_ld(dyr[j]) - a * inv_d - xh * b * inv_d));
        }
    }
}

/* dscale[c] = sum over n of sum dy * xhat, dbias[c] = sum over n of sum dy
 * (the backward of weight.repeat(N)). */
template <typename T>
static __global__ void in_param_kernel(T *dscale, T *dbias, const float *sums, int64_t N, int64_t C) {
    VXK_LOOP(c, C) {
        float a = 0.f, b = 0.f;
        for (int64_t n = 0; n < N; n++) { a += sums[n * C + c]; b += sums[N * C + n * C + c]; }
        if (dbias) dbias[c] = vxk_st<T>(a);
        if (dscale) dscale[c] = vxk_st<T>(b);
    }
}

/* instance_norm runs batch_norm on X viewed as (1, N*C, ...) with the scale
 * and bias repeated N times: training keeps X, the repeated scale (saved[0])
 * and save_mean / save_invstd per (n, c) (saved[1], saved[2]). */
/* The kernels in storage type T: the scale repeated into saved[0] (when
 * kept), then mean, inverse std (float32: saved[1], saved[2], or stats) and y. */
template <typename T> static vx_status in_forward_t(vx_ctx *ctx, vx_run *run, float *stats, float eps) {
    const vx_tensor *X = run->in[0], *S = run->in[1], *B = run->in[2];
    int64_t C = X->dims[1], D = vxk_prod(X->dims, 2, X->rank), planes = X->dims[0] * C;
    bool keep = !stats;
    if (keep && planes)
        repeat_kernel<T><<<vxk_blocks(planes), VXK_THREADS, 0, vxk_stream(ctx)>>>((T *)run->saved[0]->data,
                                                                               (const T *)S->data, C, planes);
    float *mean = keep ? (float *)run->saved[1]->data : stats, *invstd = keep ? (float *)run->saved[2]->data : stats + planes;
    if (planes > 0 && D > 0)
        in_forward_kernel<T><<<(unsigned)(planes < 65536 ? planes : 65536), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (T *)run->out[0]->data, mean, invstd, (const T *)X->data, (const T *)S->data, (const T *)B->data, planes, C,
            D, eps);
    return vxk_check(ctx, "InstanceNormalization");
}

static vx_status in_forward(vx_ctx *ctx, vx_run *run) {
    for (int k = 0; k < 3; k++)
        if (!vxk_has_in(run, k)) return vx_fail(ctx, VX_ESHAPE, "InstanceNormalization needs X, scale and B");
    const vx_tensor *X = run->in[0], *S = run->in[1], *B = run->in[2];
    if (!vx_dtype_is_float(X->dtype) || S->dtype != X->dtype || B->dtype != X->dtype)
        return vx_fail(ctx, VX_EUNSUPPORTED, "InstanceNormalization: X, scale and B of one floating dtype only");
    if (X->rank < 3) return vx_fail(ctx, VX_ESHAPE, "InstanceNormalization: X rank %d (needs N, C and spatial dims)", X->rank);
    int64_t C = X->dims[1], planes = X->dims[0] * C;
    if (S->numel != C || B->numel != C)
        return vx_fail(ctx, VX_ESHAPE, "InstanceNormalization: scale and B must have C = %lld elements", (long long)C);
    float eps = (float)vxk_attr_float(run, "epsilon", 1e-5);
    vx_status st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, X->dims);
    if (st) return st;
    bool keep = run->training && (run->need_grad[0] || run->need_grad[1] || run->need_grad[2]);
    float *ws = NULL;
    if (keep) { /* the repeated scale in X's dtype, the statistics in float32 */
        for (int k = 0; k < 3 && !st; k++) st = vxk_new_saved(ctx, run, k, k ? VX_F32 : X->dtype, 1, &planes);
        if (st) return st;
    } else {
        ws = (float *)vx_workspace(ctx, (size_t)(planes > 0 ? 2 * planes : 1) * sizeof(float));
        if (!ws) return vxk_oom(ctx, "InstanceNormalization statistics");
    }
    st = [&]() -> vx_status {
        VXK_FLOAT_DISPATCH(ctx, X->dtype, "InstanceNormalization", in_forward_t<T>(ctx, run, ws, eps));
    }();
    vx_free(ctx, ws);
    return st;
}

template <typename T> static vx_status in_backward_t(vx_ctx *ctx, vx_run *run, float *sums) {
    const vx_tensor *X = run->in[0], *dYt = run->grad_out[0];
    int64_t N = X->dims[0], C = X->dims[1], D = vxk_prod(X->dims, 2, X->rank), planes = N * C;
    T *dx = run->need_grad[0] ? (T *)run->grad_in[0]->data : NULL;
    T *dscale = run->need_grad[1] ? (T *)run->grad_in[1]->data : NULL;
    T *dbias = run->need_grad[2] ? (T *)run->grad_in[2]->data : NULL;
    cudaStream_t s = vxk_stream(ctx);
    in_backward_kernel<T><<<(unsigned)(planes < 65536 ? planes : 65536), VXK_THREADS, 0, s>>>(
        dx, sums, (const T *)dYt->data, (const T *)X->data, (const float *)run->saved[1]->data,
        (const float *)run->saved[2]->data, (const T *)run->saved[0]->data, planes, D);
    if ((dscale || dbias) && C > 0) in_param_kernel<T><<<vxk_blocks(C), VXK_THREADS, 0, s>>>(dscale, dbias, sums, N, C);
    return vxk_check(ctx, "InstanceNormalization backward");
}

static vx_status in_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0] && !run->need_grad[1] && !run->need_grad[2]) return VX_OK; /* nothing asked (inference) */
    const vx_tensor *X = run->in[0], *dYt = run->grad_out[0];
    int64_t D = vxk_prod(X->dims, 2, X->rank), planes = X->dims[0] * X->dims[1];
    vx_status st = VX_OK;
    for (int k = 0; k < 3 && !st; k++)
        if (run->need_grad[k]) st = vxk_grad(ctx, run, k);
    if (st) return st;
    if (!dYt || planes == 0 || D == 0) { /* no gradient flows: zeros */
        for (int k = 0; k < 3 && !st; k++)
            if (run->need_grad[k])
                st = vxk_zero(ctx, run->grad_in[k]->data,
                              (size_t)run->grad_in[k]->numel * vx_dtype_size(run->grad_in[k]->dtype));
        return st;
    }
    if (!run->saved[0] || !run->saved[1] || !run->saved[2])
        return vx_fail(ctx, VX_ECUDA, "InstanceNormalization backward: statistics were not kept");
    float *sums = (float *)vx_workspace(ctx, (size_t)(2 * planes) * sizeof(float));
    if (!sums) return vxk_oom(ctx, "InstanceNormalization backward");
    st = [&]() -> vx_status {
        VXK_FLOAT_DISPATCH(ctx, X->dtype, "InstanceNormalization backward", in_backward_t<T>(ctx, run, sums));
    }();
    vx_free(ctx, sums);
    return st;
}

/* ---- GroupNormalization --------------------------------------------------------------- */

/* The group's scale or bias of channel c: per channel (opset 21, and the
 * fused GroupNorm of libestimate/fuse.c) or per group (opset 18). */
template <typename T>
static __device__ __forceinline__ float gn_param(const T *p, int64_t c, int64_t cg, bool per_group) {
    return vxk_ld(per_group ? p[c / cg] : p[c]);
}

/* One block per (n, g) row of D = (C / G) x spatial contiguous elements:
 * mean, rstd, y. */
template <typename T>
static __global__ void gn_forward_kernel(T *y, float *mean, float *rstd, const T *x, const T *scale, const T *b,
                                         int64_t rows, int64_t G, int64_t cg, int64_t S, bool per_group, float eps) {
    __shared__ float sh[VXK_THREADS];
    int64_t D = cg * S;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * D;
        int64_t c0 = (r % G) * cg;
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) s += vxk_ld(xr[j]);
        float m = vxk_block_reduce(s, sh, false) / (float)D;
        float q = 0.f;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) { float d = vxk_ld(xr[j]) - m; q += d * d; }
        float rs = rsqrtf(vxk_block_reduce(q, sh, false) / (float)D + eps);
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
            int64_t c = c0 + j / S;
            y[r * D + j] = vxk_st<T>((vxk_ld(xr[j]) - m) * rs * gn_param(scale, c, cg, per_group) +
                                     gn_param(b, c, cg, per_group));
        }
        if (threadIdx.x == 0) { mean[r] = m; rstd[r] = rs; }
    }
}

/* dx per (n, g) row, as native_group_norm_backward: with dyw = dy * scale,
 * dx = rstd (dyw - mean(dyw) - xhat mean(dyw xhat)). */
template <typename T>
static __global__ void gn_dx_kernel(T *dx, const T *dy, const T *x, const float *mean, const float *rstd, const T *scale,
                                    int64_t rows, int64_t G, int64_t cg, int64_t S, bool per_group) {
    __shared__ float sh[VXK_THREADS];
    int64_t D = cg * S;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * D, *dyr = dy + r * D;
        int64_t c0 = (r % G) * cg;
        float m = mean[r], rs = rstd[r], a = 0.f, b = 0.f;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
            float dyw = vxk_ld(dyr[j]) * gn_param(scale, c0 + j / S, cg, per_group);
            a += dyw;
            b += dyw * (vxk_ld(xr[j]) - m) * rs;
        }
        a = vxk_block_reduce(a, sh, false) / (float)D;
        b = vxk_block_reduce(b, sh, false) / (float)D;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
            float dyw = vxk_ld(dyr[j]) * gn_param(scale, c0 + j / S, cg, per_group);
            dx[r * D + j] = vxk_st<T>(rs * (dyw - a - (vxk_ld(xr[j]) - m) * rs * b));
        }
    }
}

/* Per (n, c) plane of S elements: sum dy into sums[p] and sum dy * xhat into
 * sums[planes + p] (the N x C ds and db of PyTorch's kernel). */
template <typename T>
static __global__ void gn_plane_sums_kernel(float *sums, const T *dy, const T *x, const float *mean, const float *rstd,
                                            int64_t planes, int64_t C, int64_t G, int64_t cg, int64_t S) {
    __shared__ float sh[VXK_THREADS];
    for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
        int64_t r = (p / C) * G + (p % C) / cg; /* its (n, g) row */
        const T *xp = x + p * S, *dyp = dy + p * S;
        float a, b;
        plane_grad_sums(dyp, xp, S, mean[r], rstd[r], sh, &a, &b);
        if (threadIdx.x == 0) { sums[p] = a; sums[planes + p] = b; }
    }
}

/* dscale and dbias: the plane sums over n (and over a group's channels
 * when the parameters are per group). */
template <typename T>
static __global__ void gn_param_kernel(T *dscale, T *dbias, const float *sums, int64_t N, int64_t C, int64_t cg,
                                       int64_t n_params, bool per_group) {
    VXK_LOOP(k, n_params) {
        int64_t c_from = per_group ? k * cg : k, c_to = per_group ? c_from + cg : k + 1;
        float a = 0.f, b = 0.f;
        for (int64_t n = 0; n < N; n++)
            for (int64_t c = c_from; c < c_to; c++) { a += sums[n * C + c]; b += sums[N * C + n * C + c]; }
        if (dbias) dbias[k] = vxk_st<T>(a);
        if (dscale) dscale[k] = vxk_st<T>(b);
    }
}

typedef struct gn_geom {
    int64_t N, C, G, cg, S, rows;
    bool per_group;
} gn_geom;

static vx_status gn_geometry(vx_ctx *ctx, const vx_run *run, gn_geom *g) {
    const vx_tensor *X = run->in[0], *Sc = run->in[1], *B = run->in[2];
    if (X->rank < 2) return vx_fail(ctx, VX_ESHAPE, "GroupNormalization: X rank %d (needs N and C)", X->rank);
    g->N = X->dims[0];
    g->C = X->dims[1];
    g->G = vxk_attr_int(run, "num_groups", 0);
    if (g->G <= 0 || g->C % g->G)
        return vx_fail(ctx, VX_ESHAPE, "GroupNormalization: num_groups %lld does not divide the %lld channels",
                       (long long)g->G, (long long)g->C);
    g->cg = g->C / g->G;
    g->S = vxk_prod(X->dims, 2, X->rank);
    g->rows = g->N * g->G;
    g->per_group = Sc->numel == g->G && g->G != g->C;
    int64_t want = g->per_group ? g->G : g->C;
    if (Sc->numel != want || B->numel != want)
        return vx_fail(ctx, VX_ESHAPE, "GroupNormalization: scale and bias must have C = %lld (or num_groups) elements",
                       (long long)g->C);
    return VX_OK;
}

template <typename T> static vx_status gn_forward_t(vx_ctx *ctx, vx_run *run, const gn_geom &g, float *mean, float *rstd) {
    if (g.rows > 0 && g.cg * g.S > 0)
        gn_forward_kernel<T><<<(unsigned)(g.rows < 65536 ? g.rows : 65536), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (T *)run->out[0]->data, mean, rstd, (const T *)run->in[0]->data, (const T *)run->in[1]->data,
            (const T *)run->in[2]->data, g.rows, g.G, g.cg, g.S, g.per_group, (float)vxk_attr_float(run, "epsilon", 1e-5));
    return vxk_check(ctx, "GroupNormalization");
}

/* native_group_norm keeps X, the scale, and mean and rstd per (n, group)
 * (saved[0], saved[1]; float32 in a half run too, as layers/norm.c counts them). */
static vx_status gn_forward(vx_ctx *ctx, vx_run *run) {
    for (int k = 0; k < 3; k++)
        if (!vxk_has_in(run, k)) return vx_fail(ctx, VX_ESHAPE, "GroupNormalization needs X, scale and bias");
    const vx_tensor *X = run->in[0];
    if (!vx_dtype_is_float(X->dtype) || run->in[1]->dtype != X->dtype || run->in[2]->dtype != X->dtype)
        return vx_fail(ctx, VX_EUNSUPPORTED, "GroupNormalization: X, scale and bias of one floating dtype only");
    gn_geom g;
    vx_status st = gn_geometry(ctx, run, &g);
    if (st || (st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, X->dims))) return st;
    bool keep = run->training && (run->need_grad[0] || run->need_grad[1] || run->need_grad[2]);
    float *ws = NULL;
    if (keep) {
        for (int k = 0; k < 2 && !st; k++) st = vxk_new_saved(ctx, run, k, VX_F32, 1, &g.rows);
        if (st) return st;
    } else if (!(ws = (float *)vx_workspace(ctx, (size_t)(g.rows > 0 ? 2 * g.rows : 1) * sizeof(float)))) {
        return vxk_oom(ctx, "GroupNormalization statistics");
    }
    float *mean = keep ? (float *)run->saved[0]->data : ws, *rstd = keep ? (float *)run->saved[1]->data : ws + g.rows;
    st = [&]() -> vx_status { VXK_FLOAT_DISPATCH(ctx, X->dtype, "GroupNormalization", gn_forward_t<T>(ctx, run, g, mean, rstd)); }();
    vx_free(ctx, ws);
    return st;
}

template <typename T> static vx_status gn_backward_t(vx_ctx *ctx, vx_run *run, const gn_geom &g, float *sums) {
    T *dx = run->need_grad[0] ? (T *)run->grad_in[0]->data : NULL;
    T *dscale = run->need_grad[1] ? (T *)run->grad_in[1]->data : NULL;
    T *dbias = run->need_grad[2] ? (T *)run->grad_in[2]->data : NULL;
    const T *dy = (const T *)run->grad_out[0]->data, *x = (const T *)run->in[0]->data;
    const float *mean = (const float *)run->saved[0]->data, *rstd = (const float *)run->saved[1]->data;
    cudaStream_t s = vxk_stream(ctx);
    unsigned row_blocks = (unsigned)(g.rows < 65536 ? g.rows : 65536);
    if (dx)
        gn_dx_kernel<T><<<row_blocks, VXK_THREADS, 0, s>>>(dx, dy, x, mean, rstd, (const T *)run->in[1]->data, g.rows,
                                                           g.G, g.cg, g.S, g.per_group);
    if (sums) {
        int64_t planes = g.N * g.C, n_params = g.per_group ? g.G : g.C;
        gn_plane_sums_kernel<T><<<(unsigned)(planes < 65536 ? planes : 65536), VXK_THREADS, 0, s>>>(
            sums, dy, x, mean, rstd, planes, g.C, g.G, g.cg, g.S);
        gn_param_kernel<T><<<vxk_blocks(n_params), VXK_THREADS, 0, s>>>(dscale, dbias, sums, g.N, g.C, g.cg, n_params,
                                                                        g.per_group);
    }
    return vxk_check(ctx, "GroupNormalization backward");
}

static vx_status gn_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0] && !run->need_grad[1] && !run->need_grad[2]) return VX_OK; /* nothing asked (inference) */
    const vx_tensor *X = run->in[0], *dYt = run->grad_out[0];
    gn_geom g;
    vx_status st = gn_geometry(ctx, run, &g);
    for (int k = 0; k < 3 && !st; k++)
        if (run->need_grad[k]) st = vxk_grad(ctx, run, k);
    if (st) return st;
    if (!dYt || g.rows == 0 || g.cg * g.S == 0) { /* no gradient flows: zeros */
        for (int k = 0; k < 3 && !st; k++)
            if (run->need_grad[k])
                st = vxk_zero(ctx, run->grad_in[k]->data,
                              (size_t)run->grad_in[k]->numel * vx_dtype_size(run->grad_in[k]->dtype));
        return st;
    }
    if (!run->saved[0] || !run->saved[1])
        return vx_fail(ctx, VX_ECUDA, "GroupNormalization backward: statistics were not kept");
    float *sums = NULL;
    if ((run->need_grad[1] || run->need_grad[2]) &&
        !(sums = (float *)vx_workspace(ctx, (size_t)(2 * g.N * g.C) * sizeof(float))))
        return vxk_oom(ctx, "GroupNormalization backward");
    st = [&]() -> vx_status {
        VXK_FLOAT_DISPATCH(ctx, X->dtype, "GroupNormalization backward", gn_backward_t<T>(ctx, run, g, sums));
    }();
    vx_free(ctx, sums);
    return st;
}

extern "C" {
vx_status vx_norm_in_forward(vx_ctx *ctx, vx_run *run) { return in_forward(ctx, run); }
vx_status vx_norm_in_backward(vx_ctx *ctx, vx_run *run) { return in_backward(ctx, run); }
vx_status vx_norm_gn_forward(vx_ctx *ctx, vx_run *run) { return gn_forward(ctx, run); }
vx_status vx_norm_gn_backward(vx_ctx *ctx, vx_run *run) { return gn_backward(ctx, run); }
}
