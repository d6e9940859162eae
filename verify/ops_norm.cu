/*
 * ops_norm.cu: BatchNormalization, LayerNormalization and InstanceNormalization,
 * forward and backward.
 *
 * BatchNormalization (X, scale, B, running_mean, running_var):
 *   training (run->training): batch statistics per channel over (N, spatial);
 *   saved[0] = mean, saved[1] = inverse std (float32, C each); running_mean
 *   and running_var are updated in place (momentum, unbiased variance, as
 *   PyTorch). Optional outputs 1, 2 (running stats) are the updated inputs;
 *   3, 4 (opset < 9: saved mean / inverse std) are the saved statistics.
 *   inference: running statistics, nothing saved.
 *   saves X, scale, running_mean, running_var (as PyTorch's batch_norm).
 * LayerNormalization (X, Scale, B): normalized over axes [axis, rank);
 *   saved[0] = mean, saved[1] = inverse std (one per row, in the Mean /
 *   InvStdDev output shape; those outputs, when present, are the same
 *   tensors). saves X, Scale, B.
 * InstanceNormalization and GroupNormalization: ops_groupnorm.cu (their
 *   entries are in this file's table).
 */
#include "ops_common.cuh"

/* ---- BatchNormalization ------------------------------------------------------- */

/* The per-channel sums run in `parts` blocks per channel (a channel alone
 * would leave most of the GPU idle at 64 channels), each adding its share
 * atomically; indices in int32_t where X's size allows. */
static int64_t bn_parts(int64_t C, int64_t cnt) {
    int64_t parts = (1024 + C - 1) / C, most = cnt / 2048;
    if (parts > most) parts = most;
    return parts < 1 ? 1 : parts;
}

/* Block (c, part): a[c] += sum of f over its share of channel c, where f is
 * x (center NULL) or (x - center[c])^2. */
template <typename I, typename T>
static __global__ void bn_sum_kernel(const T *x, const float *center, float *a, I N, I C, I HW, I parts) {
    __shared__ float sh[VXK_THREADS];
    I c = (I)blockIdx.x / parts, part = (I)blockIdx.x % parts;
    I cnt = N * HW, chunk = (cnt + parts - 1) / parts, end = (part + 1) * chunk < cnt ? (part + 1) * chunk : cnt;
    float m = center ? center[c] : 0.f, acc = 0.f;
    for (I j = part * chunk + (I)threadIdx.x; j < end; j += (I)blockDim.x) {
        float v = vxk_ld(x[((j / HW) * C + c) * HW + j % HW]);
        acc += center ? (v - m) * (v - m) : v;
    }
    acc = vxk_block_reduce(acc, sh, false);
    if (threadIdx.x == 0) atomicAdd(a + c, acc);
}

/* Block (c, part): sum_dy[c] += dy, sum_dyx[c] += dy * xhat over its share;
 * xhat from the batch mean (float32) or, in eval, the running mean (T),
 * and from invstd (float32) or the variance (T). */
template <typename I, typename T>
static __global__ void bn_bwd_sum_kernel(const T *dy, const T *x, const float *mean, const T *rmean,
                                         const float *invstd, const T *var, float *sum_dy, float *sum_dyx, I N, I C,
                                         I HW, I parts, float eps) {
    __shared__ float sh[VXK_THREADS];
    I c = (I)blockIdx.x / parts, part = (I)blockIdx.x % parts;
    I cnt = N * HW, chunk = (cnt + parts - 1) / parts, end = (part + 1) * chunk < cnt ? (part + 1) * chunk : cnt;
    float m = mean ? mean[c] : vxk_ld(rmean[c]), is = invstd ? invstd[c] : rsqrtf(vxk_ld(var[c]) + eps);
    float a = 0.f, b = 0.f;
    for (I j = part * chunk + (I)threadIdx.x; j < end; j += (I)blockDim.x) {
        I k = ((j / HW) * C + c) * HW + j % HW;
        a += vxk_ld(dy[k]);
        b += vxk_ld(dy[k]) * (vxk_ld(x[k]) - m) * is;
    }
    a = vxk_block_reduce(a, sh, false);
    b = vxk_block_reduce(b, sh, false);
    if (threadIdx.x == 0) {
        atomicAdd(sum_dy + c, a);
        atomicAdd(sum_dyx + c, b);
    }
}

template <typename I, typename T>
static void bn_bwd_sum_launch(cudaStream_t s, unsigned blocks, const T *dy, const T *x, const float *mean,
                              const T *rmean, const float *invstd, const T *var, float *sum_dy, float *sum_dyx, I N,
                              I C, I HW, I parts, float eps) {
    bn_bwd_sum_kernel<I, T><<<blocks, VXK_THREADS, 0, s>>>(dy, x, mean, rmean, invstd, var, sum_dy, sum_dyx, N, C,
                                                           HW, parts, eps);
}

/* mean[c] = sum / cnt, in place. */
static __global__ void bn_mean_kernel(float *mean, int64_t C, float inv_cnt) {
    VXK_LOOP(c, C) mean[c] *= inv_cnt;
}

/* invstd[c] from the sum of squared deviations it holds; running stats updated. */
template <typename T>
static __global__ void bn_invstd_kernel(const float *mean, float *invstd, T *rmean, T *rvar, int64_t C,
                                        int64_t cnt, float eps, float momentum) {
    VXK_LOOP(c, C) {
        float var = invstd[c] / (float)cnt, m = mean[c];
        invstd[c] = rsqrtf(var + eps);
        if (rmean) rmean[c] = vxk_st<T>(momentum * vxk_ld(rmean[c]) + (1.f - momentum) * m);
        if (rvar)
            rvar[c] = vxk_st<T>(momentum * vxk_ld(rvar[c]) +
                                (1.f - momentum) * (cnt > 1 ? var * cnt / (float)(cnt - 1) : var));
    }
}

static bool bn_fits32(int64_t N, int64_t C, int64_t HW) { return N * C * HW < INT32_MAX / 2; }

/* mean and invstd of X's channels (both zeroed here first); running stats updated. */
template <typename T>
static vx_status bn_stats(vx_ctx *ctx, const T *x, float *mean, float *invstd, T *rmean, T *rvar, int64_t N,
                          int64_t C, int64_t HW, float eps, float momentum) {
    cudaStream_t s = vxk_stream(ctx);
    int64_t cnt = N * HW, parts = bn_parts(C, cnt);
    unsigned blocks = (unsigned)(C * parts);
    vx_status st = vxk_zero(ctx, mean, (size_t)C * sizeof(float));
    if (!st) st = vxk_zero(ctx, invstd, (size_t)C * sizeof(float));
    if (st) return st;
    for (int pass = 0; pass < 2; pass++) {
        const float *center = pass ? mean : NULL;
        float *acc = pass ? invstd : mean;
        if (bn_fits32(N, C, HW))
            bn_sum_kernel<int32_t, T><<<blocks, VXK_THREADS, 0, s>>>(x, center, acc, (int32_t)N, (int32_t)C, (int32_t)HW,
                                                                     (int32_t)parts);
        else bn_sum_kernel<int64_t, T><<<blocks, VXK_THREADS, 0, s>>>(x, center, acc, N, C, HW, parts);
        if (pass == 0) bn_mean_kernel<<<vxk_blocks(C), VXK_THREADS, 0, s>>>(mean, C, 1.f / (float)cnt);
    }
    bn_invstd_kernel<T><<<vxk_blocks(C), VXK_THREADS, 0, s>>>(mean, invstd, rmean, rvar, C, cnt, eps, momentum);
    return vxk_check(ctx, "BatchNormalization statistics");
}

/* y = (x - mean) * istd * scale + b; istd from invstd, or from var when
 * invstd is NULL (M: float for the batch mean, T for the running mean). */
template <typename T, typename M>
static __global__ void bn_apply_kernel(T *y, const T *x, const M *mean, const float *invstd, const T *var,
                                       const T *scale, const T *b, int64_t C, int64_t HW, int64_t total, float eps) {
    VXK_LOOP(i, total) {
        int64_t c = (i / HW) % C;
        float is = invstd ? invstd[c] : rsqrtf(vxk_ld(var[c]) + eps);
        y[i] = vxk_st<T>((vxk_ld(x[i]) - vxk_ld(mean[c])) * is * vxk_ld(scale[c]) + vxk_ld(b[c]));
    }
}

template <typename T>
static __global__ void bn_dx_train_kernel(T *dx, const T *dy, const T *x, const float *mean,
                                          const float *invstd, const T *scale, const float *sum_dy,
                                          const float *sum_dyx, int64_t C, int64_t HW, int64_t total, float inv_cnt) {
    VXK_LOOP(i, total) {
        int64_t c = (i / HW) % C;
        float is = invstd[c], xh = (vxk_ld(x[i]) - mean[c]) * is;
        dx[i] = vxk_st<T>(vxk_ld(scale[c]) * is * (vxk_ld(dy[i]) - inv_cnt * sum_dy[c] - xh * inv_cnt * sum_dyx[c]));
    }
}

template <typename T>
static __global__ void bn_dx_eval_kernel(T *dx, const T *dy, const T *var, const T *scale, int64_t C,
                                         int64_t HW, int64_t total, float eps) {
    VXK_LOOP(i, total) {
        int64_t c = (i / HW) % C;
        dx[i] = vxk_st<T>(vxk_ld(dy[i]) * vxk_ld(scale[c]) * rsqrtf(vxk_ld(var[c]) + eps));
    }
}

/* dst = src, rounded to T (float32 sums into a half gradient). */
template <typename T> static __global__ void norm_store_kernel(T *dst, const float *src, int64_t n) {
    VXK_LOOP(i, n) dst[i] = vxk_st<T>(src[i]);
}

template <typename T> static vx_status bn_forward_t(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0];
    for (int k = 0; k < 5; k++)
        if (run->in[k]->dtype != X->dtype) return vx_fail(ctx, VX_EUNSUPPORTED, "BatchNormalization: inputs of different dtypes");
    if (X->rank < 2) return vx_fail(ctx, VX_ESHAPE, "BatchNormalization: X rank %d", X->rank);
    int64_t N = X->dims[0], C = X->dims[1], HW = vxk_prod(X->dims, 2, X->rank);
    for (int k = 1; k < 5; k++)
        if (run->in[k]->numel != C) return vx_fail(ctx, VX_ESHAPE, "BatchNormalization: input %d has %lld elements, expected %lld",
                                                   k, (long long)run->in[k]->numel, (long long)C);
    float eps = (float)vxk_attr_float(run, "epsilon", 1e-5), mom = (float)vxk_attr_float(run, "momentum", 0.9);
    const T *scale = (const T *)run->in[1]->data, *b = (const T *)run->in[2]->data;
    T *rmean = (T *)run->in[3]->data, *rvar = (T *)run->in[4]->data;
    cudaStream_t s = vxk_stream(ctx);
    vx_status st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, X->dims);
    if (st) return st;
    T *y = (T *)run->out[0]->data;
    if (run->training) {
        int64_t cd[1] = {C};
        run->saved[0] = vx_tensor_new(ctx, VX_F32, 1, cd, VX_CAT_ACTIVATIONS);
        run->saved[1] = run->saved[0] ? vx_tensor_new(ctx, VX_F32, 1, cd, VX_CAT_ACTIVATIONS) : NULL;
        if (!run->saved[1]) return vxk_oom(ctx, "BatchNormalization statistics");
        float *mean = (float *)run->saved[0]->data, *invstd = (float *)run->saved[1]->data;
        if (C > 0 && N * HW > 0) {
            if ((st = bn_stats<T>(ctx, (const T *)X->data, mean, invstd, rmean, rvar, N, C, HW, eps, mom))) return st;
            bn_apply_kernel<T, float><<<vxk_blocks(X->numel), VXK_THREADS, 0, s>>>(y, (const T *)X->data, mean, invstd,
                                                                                  (const T *)NULL, scale, b, C, HW,
                                                                                  X->numel, eps);
        }
    } else if (X->numel) {
        bn_apply_kernel<T, T><<<vxk_blocks(X->numel), VXK_THREADS, 0, s>>>(y, (const T *)X->data, rmean, NULL, rvar,
                                                                          scale, b, C, HW, X->numel, eps);
    }
    if ((st = vxk_check(ctx, "BatchNormalization"))) return st;
    /* optional outputs: updated running stats, saved statistics */
    for (int k = 1; k < run->n_out && k < 5; k++) {
        if (!vxk_has_out(run, k)) continue;
        vx_tensor *src = k <= 2 ? run->in[k + 2] : run->saved[k - 3];
        if (!src) src = run->in[k]; /* inference: the running stats */
        run->out[k] = vx_tensor_retain(src);
    }
    return VX_OK;
}

template <typename T> static vx_status bn_backward_t(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0], *dYt = run->grad_out[0];
    /* the channel sums accumulate in float32: in the parameters' gradients
     * themselves for float, in a workspace rounded into them for half */
    const bool half = sizeof(T) != sizeof(float);
    if (!dYt) return VX_OK;
    int64_t N = X->dims[0], C = X->dims[1], HW = vxk_prod(X->dims, 2, X->rank);
    float eps = (float)vxk_attr_float(run, "epsilon", 1e-5);
    const T *x = (const T *)X->data, *dy = (const T *)dYt->data;
    const T *scale = (const T *)run->in[1]->data;
    bool train = run->training && run->saved[0] && run->saved[1];
    const T *rmean = (const T *)run->in[3]->data;
    const float *mean = train ? (const float *)run->saved[0]->data : NULL;
    const float *invstd = train ? (const float *)run->saved[1]->data : NULL;
    const T *var = (const T *)run->in[4]->data;
    cudaStream_t s = vxk_stream(ctx);
    vx_status st = VX_OK;
    float *ws = NULL;
    bool need_sums = train ? (run->need_grad[0] || run->need_grad[1] || run->need_grad[2])
                           : (run->need_grad[1] || run->need_grad[2]);
    float *sum_dy = NULL, *sum_dyx = NULL;
    if (run->need_grad[1] && (st = vxk_grad(ctx, run, 1))) goto fail;
    if (run->need_grad[2]) {
        if ((st = vxk_grad(ctx, run, 2))) goto fail;
    }
    if (run->need_grad[0] && (st = vxk_grad(ctx, run, 0))) goto fail;
    if (need_sums) {
        bool own_dy = half || !run->need_grad[2], own_dyx = half || !run->need_grad[1];
        if (own_dy || own_dyx) {
            ws = (float *)vx_workspace(ctx, (size_t)(2 * C > 0 ? 2 * C : 1) * sizeof(float));
            if (!ws) { st = vxk_oom(ctx, "BatchNormalization backward"); goto fail; }
        }
        sum_dy = own_dy ? ws : (float *)run->grad_in[2]->data;
        sum_dyx = own_dyx ? ws + C : (float *)run->grad_in[1]->data;
        if (C > 0) {
            vxk_fill_kernel<<<vxk_blocks(C), VXK_THREADS, 0, s>>>(sum_dy, C, 0.f);
            vxk_fill_kernel<<<vxk_blocks(C), VXK_THREADS, 0, s>>>(sum_dyx, C, 0.f);
            if (N * HW > 0) {
                int64_t parts = bn_parts(C, N * HW);
                unsigned blocks = (unsigned)(C * parts);
                if (bn_fits32(N, C, HW))
                    bn_bwd_sum_launch<int32_t, T>(s, blocks, dy, x, mean, rmean, invstd, var, sum_dy, sum_dyx, (int32_t)N,
                                                  (int32_t)C, (int32_t)HW, (int32_t)parts, eps);
                else
                    bn_bwd_sum_launch<int64_t, T>(s, blocks, dy, x, mean, rmean, invstd, var, sum_dy, sum_dyx, N, C, HW,
                                                  parts, eps);
            }
            if (half && run->need_grad[2])
                norm_store_kernel<T><<<vxk_blocks(C), VXK_THREADS, 0, s>>>((T *)run->grad_in[2]->data, sum_dy, C);
            if (half && run->need_grad[1])
                norm_store_kernel<T><<<vxk_blocks(C), VXK_THREADS, 0, s>>>((T *)run->grad_in[1]->data, sum_dyx, C);
        }
    }
    if (run->need_grad[0] && X->numel) {
        T *dx = (T *)run->grad_in[0]->data;
        if (train)
            bn_dx_train_kernel<T><<<vxk_blocks(X->numel), VXK_THREADS, 0, s>>>(dx, dy, x, mean, invstd, scale, sum_dy,
                                                                             sum_dyx, C, HW, X->numel, 1.f / (float)(N * HW));
        else
            bn_dx_eval_kernel<T><<<vxk_blocks(X->numel), VXK_THREADS, 0, s>>>(dx, dy, var, scale, C, HW, X->numel, eps);
    }
    if ((st = vxk_check(ctx, "BatchNormalization backward"))) goto fail;
    vx_free(ctx, ws);
    return VX_OK;
fail:
    vx_free(ctx, ws);
    return st;
}

/* ---- LayerNormalization ------------------------------------------------------------ */

template <typename T>
static __global__ void ln_forward_kernel(T *y, float *mean, float *invstd, const T *x, const T *scale,
                                         const T *b, int64_t rows, int64_t D, float eps) {
    __shared__ float sh[VXK_THREADS];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * D;
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) s += vxk_ld(xr[j]);
        float m = vxk_block_reduce(s, sh, false) / (float)D;
        float q = 0.f;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) { float d = vxk_ld(xr[j]) - m; q += d * d; }
        float is = rsqrtf(vxk_block_reduce(q, sh, false) / (float)D + eps);
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x)
            y[r * D + j] = vxk_st<T>((vxk_ld(xr[j]) - m) * is * vxk_ld(scale[j]) + (b ? vxk_ld(b[j]) : 0.f));
        if (threadIdx.x == 0) { mean[r] = m; invstd[r] = is; }
    }
}

template <typename T>
static __global__ void ln_dx_kernel(T *dx, const T *dy, const T *x, const float *mean, const float *invstd,
                                    const T *scale, int64_t rows, int64_t D) {
    __shared__ float sh[VXK_THREADS];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * D, *dyr = dy + r * D;
        float m = mean[r], is = invstd[r];
        float a = 0.f, b = 0.f;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
            float g = vxk_ld(dyr[j]) * vxk_ld(scale[j]);
            a += g;
            b += g * (vxk_ld(xr[j]) - m) * is;
        }
        a = vxk_block_reduce(a, sh, false) / (float)D;
        b = vxk_block_reduce(b, sh, false) / (float)D;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
            float xh = (vxk_ld(xr[j]) - m) * is;
            dx[r * D + j] = vxk_st<T>(is * (vxk_ld(dyr[j]) * vxk_ld(scale[j]) - a - xh * b));
        }
    }
}

/* dscale[j] += sum over a chunk of rows of dy * xhat; db[j] += sum of dy (atomic). */
template <typename T>
static __global__ void ln_dparam_kernel(float *dscale, float *db, const T *dy, const T *x, const float *mean,
                                        const float *invstd, int64_t rows, int64_t D, int64_t rows_per) {
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= D) return;
    int64_t r0 = (int64_t)blockIdx.y * rows_per, r1 = r0 + rows_per < rows ? r0 + rows_per : rows;
    float a = 0.f, b = 0.f;
    for (int64_t r = r0; r < r1; r++) {
        float g = vxk_ld(dy[r * D + j]);
        b += g;
        a += g * (vxk_ld(x[r * D + j]) - mean[r]) * invstd[r];
    }
    if (dscale) atomicAdd(dscale + j, a);
    if (db) atomicAdd(db + j, b);
}

/* The same into half gradients without a float32 workspace: one thread per
 * column sums every row in a register and stores once (no atomics). */
template <typename T>
static __global__ void ln_dparam_direct_kernel(T *dscale, T *db, const T *dy, const T *x, const float *mean,
                                               const float *invstd, int64_t rows, int64_t D) {
    VXK_LOOP(j, D) {
        float a = 0.f, b = 0.f;
        for (int64_t r = 0; r < rows; r++) {
            float g = vxk_ld(dy[r * D + j]);
            b += g;
            a += g * (vxk_ld(x[r * D + j]) - mean[r]) * invstd[r];
        }
        if (dscale) dscale[j] = vxk_st<T>(a);
        if (db) db[j] = vxk_st<T>(b);
    }
}

static vx_status ln_geom(vx_ctx *ctx, const vx_run *run, const vx_tensor *X, int *axis, int64_t *rows, int64_t *D) {
    int a = vxk_axis(vxk_attr_int(run, "axis", -1), X->rank);
    if (a < 0) return vx_fail(ctx, VX_ESHAPE, "LayerNormalization: axis out of range");
    *axis = a;
    *rows = vxk_prod(X->dims, 0, a);
    *D = vxk_prod(X->dims, a, X->rank);
    return VX_OK;
}

template <typename T> static vx_status ln_forward_t(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0], *S = run->in[1], *B = vxk_has_in(run, 2) ? run->in[2] : NULL;
    if (S->dtype != X->dtype || (B && B->dtype != X->dtype))
        return vx_fail(ctx, VX_EUNSUPPORTED, "LayerNormalization: inputs of different dtypes");
    int axis;
    int64_t rows, D;
    vx_status st = ln_geom(ctx, run, X, &axis, &rows, &D);
    if (st) return st;
    if (S->numel != D || (B && B->numel != D))
        return vx_fail(ctx, VX_EUNSUPPORTED, "LayerNormalization: Scale and B must cover the normalized shape");
    float eps = (float)vxk_attr_float(run, "epsilon", 1e-5);
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, X->dims))) return st;
    int64_t sd[VX_MAX_RANK];
    for (int i = 0; i < X->rank; i++) sd[i] = i < axis ? X->dims[i] : 1;
    run->saved[0] = vx_tensor_new(ctx, VX_F32, X->rank, sd, VX_CAT_ACTIVATIONS);
    run->saved[1] = run->saved[0] ? vx_tensor_new(ctx, VX_F32, X->rank, sd, VX_CAT_ACTIVATIONS) : NULL;
    if (!run->saved[1]) return vxk_oom(ctx, "LayerNormalization statistics");
    if (rows > 0 && D > 0) {
        ln_forward_kernel<T><<<(unsigned)(rows < 65536 ? rows : 65536), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (T *)run->out[0]->data, (float *)run->saved[0]->data, (float *)run->saved[1]->data,
            (const T *)X->data, (const T *)S->data, B ? (const T *)B->data : NULL, rows, D, eps);
        if ((st = vxk_check(ctx, "LayerNormalization"))) return st;
    }
    for (int k = 1; k <= 2; k++)
        if (vxk_has_out(run, k)) run->out[k] = vx_tensor_retain(run->saved[k - 1]);
    return VX_OK;
}

template <typename T> static vx_status ln_backward_t(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0], *S = run->in[1], *dYt = run->grad_out[0];
    if (!dYt) return VX_OK;
    int axis;
    int64_t rows, D;
    vx_status st = ln_geom(ctx, run, X, &axis, &rows, &D);
    if (st) return st;
    const T *x = (const T *)X->data, *dy = (const T *)dYt->data;
    const float *mean = (const float *)run->saved[0]->data, *invstd = (const float *)run->saved[1]->data;
    cudaStream_t s = vxk_stream(ctx);
    bool ds = run->need_grad[1], db = run->n_in > 2 && run->need_grad[2] && vxk_has_in(run, 2);
    /* float: the parameter sums accumulate atomically in the gradients;
     * half: a column per thread, no workspace */
    const bool half = sizeof(T) != sizeof(float);
    if (run->need_grad[0]) {
        if ((st = vxk_grad(ctx, run, 0))) goto fail;
        if (rows > 0 && D > 0)
            ln_dx_kernel<T><<<(unsigned)(rows < 65536 ? rows : 65536), VXK_THREADS, 0, s>>>(
                (T *)run->grad_in[0]->data, dy, x, mean, invstd, (const T *)S->data, rows, D);
    }
    if (ds && (st = vxk_grad(ctx, run, 1))) goto fail;
    if (db && (st = vxk_grad(ctx, run, 2))) goto fail;
    if ((ds || db) && D > 0) {
        if (half) {
            ln_dparam_direct_kernel<T><<<vxk_blocks(D), VXK_THREADS, 0, s>>>(
                ds ? (T *)run->grad_in[1]->data : NULL, db ? (T *)run->grad_in[2]->data : NULL, dy, x, mean, invstd,
                rows, D);
            goto done;
        }
        float *dsp = ds ? (float *)run->grad_in[1]->data : NULL, *dbp = db ? (float *)run->grad_in[2]->data : NULL;
        if (dsp && (st = vxk_zero(ctx, dsp, (size_t)D * sizeof(float)))) goto fail;
        if (dbp && (st = vxk_zero(ctx, dbp, (size_t)D * sizeof(float)))) goto fail;
        if (rows > 0) {
            int64_t chunks = rows < 256 ? rows : 256;
            int64_t per = (rows + chunks - 1) / chunks;
            chunks = (rows + per - 1) / per;
            dim3 grid((unsigned)((D + VXK_THREADS - 1) / VXK_THREADS), (unsigned)chunks);
            ln_dparam_kernel<T><<<grid, VXK_THREADS, 0, s>>>(dsp, dbp, dy, x, mean, invstd, rows, D, per);
        }
    }
done:
    if ((st = vxk_check(ctx, "LayerNormalization backward"))) goto fail;
    return VX_OK;
fail:
    return st;
}

static vx_status bn_forward(vx_ctx *ctx, vx_run *run) {
    for (int k = 0; k < 5; k++)
        if (!vxk_has_in(run, k)) return vx_fail(ctx, VX_ESHAPE, "BatchNormalization needs 5 inputs");
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "BatchNormalization", bn_forward_t<T>(ctx, run));
}
static vx_status bn_backward(vx_ctx *ctx, vx_run *run) {
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "BatchNormalization", bn_backward_t<T>(ctx, run));
}
static vx_status ln_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "LayerNormalization needs X and Scale");
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "LayerNormalization", ln_forward_t<T>(ctx, run));
}
static vx_status ln_backward(vx_ctx *ctx, vx_run *run) {
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "LayerNormalization", ln_backward_t<T>(ctx, run));
}

/* ---- InstanceNormalization, GroupNormalization: ops_groupnorm.cu ----------------------- */

extern "C" {
vx_status vx_norm_in_forward(vx_ctx *ctx, vx_run *run);
vx_status vx_norm_in_backward(vx_ctx *ctx, vx_run *run);
vx_status vx_norm_gn_forward(vx_ctx *ctx, vx_run *run);
vx_status vx_norm_gn_backward(vx_ctx *ctx, vx_run *run);
}

extern "C" {
const vx_op vx_ops_norm[] = {
    {"BatchNormalization", bn_forward, bn_backward, VX_SLOT(0) | VX_SLOT(1) | VX_SLOT(3) | VX_SLOT(4), 0, false, 0, NULL,
     0, VX_HALF},
    {"LayerNormalization", ln_forward, ln_backward, VX_SLOT(0) | VX_SLOT(1) | VX_SLOT(2), 0, false, 0, NULL, 0, VX_HALF},
    {"InstanceNormalization", vx_norm_in_forward, vx_norm_in_backward, VX_SLOT(0), 0, false, 0, NULL, 0, VX_HALF},
    {"GroupNormalization", vx_norm_gn_forward, vx_norm_gn_backward, VX_SLOT(0) | VX_SLOT(1), 0, false, 0, NULL, 0,
     VX_HALF},
};
const size_t vx_ops_norm_count = sizeof vx_ops_norm / sizeof vx_ops_norm[0];
}
