/* optim.cu: the optimizer updates, in place (SGD, momentum, Adam/AdamW as
 * PyTorch's foreach implementation runs them). */
#include <cuda_runtime.h>

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

__global__ void k_sgd(float *p, const float *g, int64_t n, float lr) {
    GRID_LOOP(i, n) p[i] -= lr * g[i];
}
__global__ void k_momentum(float *p, const float *g, float *b, int64_t n, float lr, float mom, bool first) {
    GRID_LOOP(i, n) {
        float v = first ? g[i] : mom * b[i] + g[i];
        b[i] = v;
        p[i] -= lr * v;
    }
}
__global__ void k_moments(const float *g, float *m, float *v, int64_t n, float b1, float b2) {
    GRID_LOOP(i, n) {
        float gv = g[i];
        m[i] += (1.f - b1) * (gv - m[i]); /* lerp */
        v[i] = b2 * v[i] + (1.f - b2) * gv * gv;
    }
}
__global__ void k_denom(const float *v, float *t, int64_t n, float bc2s, float eps) {
    GRID_LOOP(i, n) t[i] = sqrtf(v[i]) / bc2s + eps;
}
__global__ void k_update(float *p, const float *m, const float *t, int64_t n, float step, float decay) {
    GRID_LOOP(i, n) p[i] = p[i] * decay - step * m[i] / t[i];
}

#define S(ctx) ((cudaStream_t)vx_stream(ctx))

extern "C" vx_status vx_k_sgd(vx_ctx *ctx, vx_tensor *p, const vx_tensor *g, float lr) {
    if (p->numel) k_sgd<<<nb(p->numel), TPB, 0, S(ctx)>>>((float *)p->data, (const float *)g->data, p->numel, lr);
    return done(ctx, "sgd");
}
extern "C" vx_status vx_k_momentum(vx_ctx *ctx, vx_tensor *p, const vx_tensor *g, vx_tensor *buf, float lr, float mom,
                                   bool first) {
    if (p->numel)
        k_momentum<<<nb(p->numel), TPB, 0, S(ctx)>>>((float *)p->data, (const float *)g->data, (float *)buf->data,
                                                     p->numel, lr, mom, first);
    return done(ctx, "momentum");
}
extern "C" vx_status vx_k_adam_moments(vx_ctx *ctx, const vx_tensor *g, vx_tensor *m, vx_tensor *v, float b1, float b2) {
    if (g->numel)
        k_moments<<<nb(g->numel), TPB, 0, S(ctx)>>>((const float *)g->data, (float *)m->data, (float *)v->data,
                                                    g->numel, b1, b2);
    return done(ctx, "adam");
}
extern "C" vx_status vx_k_adam_denom(vx_ctx *ctx, const vx_tensor *v, vx_tensor *t, float bc2s, float eps) {
    if (v->numel)
        k_denom<<<nb(v->numel), TPB, 0, S(ctx)>>>((const float *)v->data, (float *)t->data, v->numel, bc2s, eps);
    return done(ctx, "adam");
}
extern "C" vx_status vx_k_adam_update(vx_ctx *ctx, vx_tensor *p, const vx_tensor *m, const vx_tensor *t, float step,
                                      float decay) {
    if (p->numel)
        k_update<<<nb(p->numel), TPB, 0, S(ctx)>>>((float *)p->data, (const float *)m->data, (const float *)t->data,
                                                   p->numel, step, decay);
    return done(ctx, "adam");
}
