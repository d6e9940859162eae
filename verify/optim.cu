/* optim.cu: the optimizer updates, in place (SGD, momentum, Adam/AdamW as
 * PyTorch's foreach implementation runs them). */
#include <cuda_runtime.h>

#include "vx_half.cuh"
#include "vx_internal.h"

#define TPB 256
#define GRID_LOOP(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static unsigned nb(int64_t n) {
    int64_t b = (n + TPB - 1) / TPB;
    if (b > 65535LL * 16) b = 65535LL * 16;
    return (unsigned)(b < 1 ? 1 : b);
}

static vx_status done(vx_ctx *ctx, const char *what) {
    cudaError_t e = cudaPeekAtLastError();
    if (e == cudaSuccess) return VX_OK;
    cudaGetLastError();
    return vx_fail(ctx, VX_ECUDA, "%s: %s", what, cudaGetErrorString(e));
}

/* Parameters, gradients and state share one storage dtype T; the update
 * computes in float32 and rounds once per store (PyTorch's foreach kernels
 * on bfloat16 parameters do the same). */
template <typename T> __global__ void k_sgd(T *p, const T *g, int64_t n, float lr) {
    GRID_LOOP(i, n) p[i] = vxk_st<T>(vxk_ld(p[i]) - lr * vxk_ld(g[i]));
}
template <typename T> __global__ void k_momentum(T *p, const T *g, T *b, int64_t n, float lr, float mom, bool first) {
    GRID_LOOP(i, n) {
        float v = first ? vxk_ld(g[i]) : mom * vxk_ld(b[i]) + vxk_ld(g[i]);
        b[i] = vxk_st<T>(v);
        p[i] = vxk_st<T>(vxk_ld(p[i]) - lr * v);
    }
}
template <typename T> __global__ void k_moments(const T *g, T *m, T *v, int64_t n, float b1, float b2) {
    GRID_LOOP(i, n) {
        float gv = vxk_ld(g[i]), mv = vxk_ld(m[i]);
        m[i] = vxk_st<T>(mv + (1.f - b1) * (gv - mv)); /* lerp */
        v[i] = vxk_st<T>(b2 * vxk_ld(v[i]) + (1.f - b2) * gv * gv);
    }
}
template <typename T> __global__ void k_denom(const T *v, T *t, int64_t n, float bc2s, float eps) {
    GRID_LOOP(i, n) t[i] = vxk_st<T>(sqrtf(vxk_ld(v[i])) / bc2s + eps);
}
template <typename T> __global__ void k_update(T *p, const T *m, const T *t, int64_t n, float step, float decay) {
    GRID_LOOP(i, n) p[i] = vxk_st<T>(vxk_ld(p[i]) * decay - step * vxk_ld(m[i]) / vxk_ld(t[i]));
}

#define S(ctx) ((cudaStream_t)vx_stream(ctx))

template <typename T> static vx_status sgd_t(vx_ctx *ctx, vx_tensor *p, const vx_tensor *g, float lr) {
    k_sgd<T><<<nb(p->numel), TPB, 0, S(ctx)>>>((T *)p->data, (const T *)g->data, p->numel, lr);
    return done(ctx, "sgd");
}
template <typename T>
static vx_status momentum_t(vx_ctx *ctx, vx_tensor *p, const vx_tensor *g, vx_tensor *buf, float lr, float mom,
                            bool first) {
    k_momentum<T><<<nb(p->numel), TPB, 0, S(ctx)>>>((T *)p->data, (const T *)g->data, (T *)buf->data, p->numel, lr,
                                                    mom, first);
    return done(ctx, "momentum");
}
template <typename T>
static vx_status moments_t(vx_ctx *ctx, const vx_tensor *g, vx_tensor *m, vx_tensor *v, float b1, float b2) {
    k_moments<T><<<nb(g->numel), TPB, 0, S(ctx)>>>((const T *)g->data, (T *)m->data, (T *)v->data, g->numel, b1, b2);
    return done(ctx, "adam");
}
template <typename T> static vx_status denom_t(vx_ctx *ctx, const vx_tensor *v, vx_tensor *t, float bc2s, float eps) {
    k_denom<T><<<nb(v->numel), TPB, 0, S(ctx)>>>((const T *)v->data, (T *)t->data, v->numel, bc2s, eps);
    return done(ctx, "adam");
}
template <typename T>
static vx_status update_t(vx_ctx *ctx, vx_tensor *p, const vx_tensor *m, const vx_tensor *t, float step, float decay) {
    k_update<T><<<nb(p->numel), TPB, 0, S(ctx)>>>((T *)p->data, (const T *)m->data, (const T *)t->data, p->numel, step,
                                                  decay);
    return done(ctx, "adam");
}

extern "C" vx_status vx_k_sgd(vx_ctx *ctx, vx_tensor *p, const vx_tensor *g, float lr) {
    if (!p->numel) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, p->dtype, "sgd", sgd_t<T>(ctx, p, g, lr));
}
extern "C" vx_status vx_k_momentum(vx_ctx *ctx, vx_tensor *p, const vx_tensor *g, vx_tensor *buf, float lr, float mom,
                                   bool first) {
    if (!p->numel) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, p->dtype, "momentum", momentum_t<T>(ctx, p, g, buf, lr, mom, first));
}
extern "C" vx_status vx_k_adam_moments(vx_ctx *ctx, const vx_tensor *g, vx_tensor *m, vx_tensor *v, float b1, float b2) {
    if (!g->numel) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, g->dtype, "adam", moments_t<T>(ctx, g, m, v, b1, b2));
}
extern "C" vx_status vx_k_adam_denom(vx_ctx *ctx, const vx_tensor *v, vx_tensor *t, float bc2s, float eps) {
    if (!v->numel) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, v->dtype, "adam", denom_t<T>(ctx, v, t, bc2s, eps));
}
extern "C" vx_status vx_k_adam_update(vx_ctx *ctx, vx_tensor *p, const vx_tensor *m, const vx_tensor *t, float step,
                                      float decay) {
    if (!p->numel) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, p->dtype, "adam", update_t<T>(ctx, p, m, t, step, decay));
}
