/* ops_helpers.cu: the small kernels the executor, the optimizer and the op
 * families share (vx_internal.h): fill, add, mean, copy, cast between any
 * two dtypes, random values, broadcast copy, reduce-to-shape, slice. Each
 * dispatches on its tensors' dtype (float32, bfloat16, float16, int64,
 * bool where it applies). */
#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

#include "ops_bcast.cuh"
#include "vx_internal.h"

/* ---- Cast ------------------------------------------------------------------------- */

template <typename S, typename D> __global__ void k_cast(const S *s, D *d, int64_t n) {
    GRID_LOOP(i, n) d[i] = (D)s[i];
}
template <typename S> __global__ void k_cast_bool(const S *s, uint8_t *d, int64_t n) {
    GRID_LOOP(i, n) d[i] = s[i] != (S)0;
}

/* Casts with a half side: through float (S or D a float type). */
template <typename S, typename D> __global__ void k_cast_h(const S *s, D *d, int64_t n) {
    GRID_LOOP(i, n) d[i] = vxk_st<D>(vxk_ld(s[i]));
}
template <typename S> __global__ void k_cast_h_i64(const S *s, long long *d, int64_t n) {
    GRID_LOOP(i, n) d[i] = (long long)vxk_ld(s[i]);
}
template <typename S> __global__ void k_cast_h_bool(const S *s, uint8_t *d, int64_t n) {
    GRID_LOOP(i, n) d[i] = vxk_ld(s[i]) != 0.f;
}
template <typename S, typename D> __global__ void k_cast_to_h(const S *s, D *d, int64_t n) {
    GRID_LOOP(i, n) d[i] = vxk_st<D>((float)s[i]);
}

/* Any cast whose source storage is S (float, bfloat16 or half) or whose
 * destination is D (bfloat16 or half), the other side any dtype. */
template <typename S> static vx_status cast_from_float_t(vx_ctx *ctx, const vx_tensor *s, vx_tensor *d) {
    int64_t n = s->numel;
    unsigned b = blocks_for(n);
    cudaStream_t st = STREAM(ctx);
    switch (d->dtype) {
    case VX_F32: k_cast_h<S, float><<<b, TPB, 0, st>>>((const S *)s->data, (float *)d->data, n); break;
    case VX_BF16: k_cast_h<S, __nv_bfloat16><<<b, TPB, 0, st>>>((const S *)s->data, (__nv_bfloat16 *)d->data, n); break;
    case VX_F16: k_cast_h<S, __half><<<b, TPB, 0, st>>>((const S *)s->data, (__half *)d->data, n); break;
    case VX_I64: k_cast_h_i64<S><<<b, TPB, 0, st>>>((const S *)s->data, (long long *)d->data, n); break;
    default: k_cast_h_bool<S><<<b, TPB, 0, st>>>((const S *)s->data, (uint8_t *)d->data, n); break;
    }
    return launched(ctx, "Cast");
}

template <typename D> static vx_status cast_to_half_t(vx_ctx *ctx, const vx_tensor *s, vx_tensor *d) {
    int64_t n = s->numel;
    unsigned b = blocks_for(n);
    cudaStream_t st = STREAM(ctx);
    if (s->dtype == VX_I64) k_cast_to_h<long long, D><<<b, TPB, 0, st>>>((const long long *)s->data, (D *)d->data, n);
    else k_cast_to_h<uint8_t, D><<<b, TPB, 0, st>>>((const uint8_t *)s->data, (D *)d->data, n);
    return launched(ctx, "Cast");
}

extern "C" vx_status vx_k_cast(vx_ctx *ctx, const vx_tensor *s, vx_tensor *d) {
    int64_t n = s->numel;
    if (!n) return VX_OK;
    unsigned b = blocks_for(n);
    cudaStream_t st = STREAM(ctx);
    if (s->dtype == d->dtype) {
        return vx_cuda_status(ctx, cudaMemcpyAsync(d->data, s->data, (size_t)n * vx_dtype_size(s->dtype),
                                                   cudaMemcpyDeviceToDevice, st), "Cast");
    }
    if (s->dtype == VX_BF16) return cast_from_float_t<__nv_bfloat16>(ctx, s, d);
    if (s->dtype == VX_F16) return cast_from_float_t<__half>(ctx, s, d);
    if (s->dtype == VX_F32 && vx_dtype_size(d->dtype) == 2) return cast_from_float_t<float>(ctx, s, d);
    if (d->dtype == VX_BF16) return cast_to_half_t<__nv_bfloat16>(ctx, s, d);
    if (d->dtype == VX_F16) return cast_to_half_t<__half>(ctx, s, d);
    if (s->dtype == VX_F32 && d->dtype == VX_I64) k_cast<float, long long><<<b, TPB, 0, st>>>((const float *)s->data, (long long *)d->data, n);
    else if (s->dtype == VX_F32) k_cast_bool<float><<<b, TPB, 0, st>>>((const float *)s->data, (uint8_t *)d->data, n);
    else if (s->dtype == VX_I64 && d->dtype == VX_F32) k_cast<long long, float><<<b, TPB, 0, st>>>((const long long *)s->data, (float *)d->data, n);
    else if (s->dtype == VX_I64) k_cast_bool<long long><<<b, TPB, 0, st>>>((const long long *)s->data, (uint8_t *)d->data, n);
    else if (d->dtype == VX_F32) k_cast<uint8_t, float><<<b, TPB, 0, st>>>((const uint8_t *)s->data, (float *)d->data, n);
    else k_cast<uint8_t, long long><<<b, TPB, 0, st>>>((const uint8_t *)s->data, (long long *)d->data, n);
    return launched(ctx, "Cast");
}

/* ---- shared helpers ------------------------------------------------------------------ */

template <typename T> __global__ void k_fill(T *p, int64_t n, float v) {
    GRID_LOOP(i, n) p[i] = vxk_st<T>(v);
}
__global__ void k_fill_i64(long long *p, int64_t n, long long v) {
    GRID_LOOP(i, n) p[i] = v;
}
template <typename T> __global__ void k_add(const T *a, const T *b, T *o, int64_t n) {
    GRID_LOOP(i, n) o[i] = vxk_st<T>(vxk_ld(a[i]) + vxk_ld(b[i]));
}
/* out[0] += scale * sum(x) (out float32: the mean's accumulator) */
template <typename T> __global__ void k_sum(const T *x, float *out, int64_t n, float scale) {
    __shared__ float sh[TPB];
    float s = 0.f;
    GRID_LOOP(i, n) s += vxk_ld(x[i]);
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = TPB / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, sh[0] * scale);
}
template <typename T> __global__ void k_random(T *p, int64_t n, float lo, float hi, unsigned long long seed) {
    GRID_LOOP(i, n) p[i] = vxk_st<T>(lo + (hi - lo) * vxk_rand_u01(seed, i));
}
/* Box-Muller on two draws of the same counter stream (2i, 2i + 1). */
__global__ void k_random_normal(float *p, int64_t n, float mean, float scale, unsigned long long seed) {
    GRID_LOOP(i, n) {
        float u1 = 1.0f - vxk_rand_u01(seed, 2 * i), u2 = vxk_rand_u01(seed, 2 * i + 1); /* u1 in (0, 1] */
        p[i] = mean + scale * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    }
}
/* y = (u < p) as float32 or bool (esize 4 or 1). */
__global__ void k_bernoulli(const float *prob, void *y, int64_t n, int esize, unsigned long long seed) {
    GRID_LOOP(i, n) {
        bool on = vxk_rand_u01(seed, i) < prob[i];
        if (esize == 4) ((float *)y)[i] = on ? 1.f : 0.f;
        else ((uint8_t *)y)[i] = on;
    }
}

extern "C" vx_status vx_k_fill(vx_ctx *ctx, vx_tensor *t, float v) {
    if (!t->numel) return VX_OK;
    if (t->dtype == VX_F32) k_fill<float><<<blocks_for(t->numel), TPB, 0, STREAM(ctx)>>>((float *)t->data, t->numel, v);
    else if (t->dtype == VX_BF16)
        k_fill<__nv_bfloat16><<<blocks_for(t->numel), TPB, 0, STREAM(ctx)>>>((__nv_bfloat16 *)t->data, t->numel, v);
    else if (t->dtype == VX_F16) /* a finite fill saturates, as vx_from_f32's constants do */
        k_fill<__half><<<blocks_for(t->numel), TPB, 0, STREAM(ctx)>>>(
            (__half *)t->data, t->numel, isfinite(v) ? fminf(fmaxf(v, -65504.f), 65504.f) : v);
    else if (t->dtype == VX_I64)
        k_fill_i64<<<blocks_for(t->numel), TPB, 0, STREAM(ctx)>>>((long long *)t->data, t->numel, (long long)v);
    else
        return vx_cuda_status(ctx, cudaMemsetAsync(t->data, v != 0, (size_t)t->numel, STREAM(ctx)), "fill");
    return launched(ctx, "fill");
}

template <typename T> static vx_status add_t(vx_ctx *ctx, const vx_tensor *a, const vx_tensor *b, vx_tensor *o) {
    k_add<T><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>((const T *)a->data, (const T *)b->data, (T *)o->data,
                                                            o->numel);
    return launched(ctx, "gradient sum");
}

extern "C" vx_status vx_k_add_inplace(vx_ctx *ctx, vx_tensor *dst, const vx_tensor *src) {
    if (!dst->numel) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, dst->dtype, "gradient sum", add_t<T>(ctx, dst, src, dst));
}

extern "C" vx_status vx_k_add(vx_ctx *ctx, const vx_tensor *a, const vx_tensor *b, vx_tensor *o) {
    if (!o->numel) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, o->dtype, "gradient sum", add_t<T>(ctx, a, b, o));
}

template <typename T> __global__ void k_store_scalar(const float *acc, T *out) { *out = vxk_st<T>(*acc); }

/* The mean accumulates in float32 (a workspace scalar for a half out, as
 * PyTorch's reduction accumulates in float), then rounds once. */
template <typename T> static vx_status mean_t(vx_ctx *ctx, const vx_tensor *x, vx_tensor *out) {
    float *acc = (float *)out->data;
    if (sizeof(T) != sizeof(float) && !(acc = (float *)vx_workspace(ctx, sizeof(float))))
        return vx_fail(ctx, VX_EOOM, "out of device memory (mean)");
    if (cudaMemsetAsync(acc, 0, sizeof(float), STREAM(ctx)) != cudaSuccess) return launched(ctx, "mean");
    if (x->numel) {
        unsigned b = blocks_for(x->numel);
        if (b > 1024) b = 1024;
        k_sum<T><<<b, TPB, 0, STREAM(ctx)>>>((const T *)x->data, acc, x->numel, 1.0f / (float)x->numel);
    }
    if (sizeof(T) != sizeof(float)) {
        k_store_scalar<T><<<1, 1, 0, STREAM(ctx)>>>(acc, (T *)out->data);
        vx_status st = launched(ctx, "mean");
        vx_free(ctx, acc);
        return st;
    }
    return launched(ctx, "mean");
}

extern "C" vx_status vx_k_mean(vx_ctx *ctx, const vx_tensor *x, vx_tensor *out) {
    VXK_FLOAT_DISPATCH(ctx, x->dtype, "mean", mean_t<T>(ctx, x, out));
}

extern "C" vx_status vx_k_copy(vx_ctx *ctx, vx_tensor *dst, const vx_tensor *src) {
    if (!dst->numel) return VX_OK;
    return vx_cuda_status(ctx, cudaMemcpyAsync(dst->data, src->data, (size_t)dst->numel * vx_dtype_size(dst->dtype),
                                               cudaMemcpyDeviceToDevice, STREAM(ctx)), "copy");
}

template <typename T> static vx_status random_t(vx_ctx *ctx, vx_tensor *t, float lo, float hi, uint64_t seed) {
    k_random<T><<<blocks_for(t->numel), TPB, 0, STREAM(ctx)>>>((T *)t->data, t->numel, lo, hi,
                                                               (unsigned long long)seed);
    return launched(ctx, "random");
}

extern "C" vx_status vx_k_random(vx_ctx *ctx, vx_tensor *t, float lo, float hi, uint64_t seed) {
    if (!t->numel) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, t->dtype, "random", random_t<T>(ctx, t, lo, hi, seed));
}

extern "C" vx_status vx_k_random_normal(vx_ctx *ctx, vx_tensor *t, float mean, float scale, uint64_t seed) {
    if (!t->numel) return VX_OK;
    k_random_normal<<<blocks_for(t->numel), TPB, 0, STREAM(ctx)>>>((float *)t->data, t->numel, mean, scale,
                                                                   (unsigned long long)seed);
    return launched(ctx, "random normal");
}

extern "C" vx_status vx_k_bernoulli(vx_ctx *ctx, const vx_tensor *prob, vx_tensor *out, uint64_t seed) {
    if (!out->numel) return VX_OK;
    k_bernoulli<<<blocks_for(out->numel), TPB, 0, STREAM(ctx)>>>((const float *)prob->data, out->data, out->numel,
                                                                 (int)vx_dtype_size(out->dtype),
                                                                 (unsigned long long)seed);
    return launched(ctx, "Bernoulli");
}

/* Broadcast copy (Expand): dst[i] = src[broadcast index]. */
template <typename T> __global__ void k_bcopy(const T *s, T *d, int64_t n, Bc bc) {
    GRID_LOOP(i, n) {
        int64_t off[3];
        bc_offsets(bc, i, 1, off);
        d[i] = s[off[0]];
    }
}
template <typename T> __global__ void k_reduce_to(const T *s, T *d, int64_t n, Bc bc) {
    GRID_LOOP(i, n) {
        int64_t off[3];
        bc_offsets(bc, i, 1, off);
        vxk_atomic_add(&d[off[0]], vxk_ld(s[i]));
    }
}

template <typename T> static vx_status reduce_to_t(vx_ctx *ctx, const vx_tensor *src, vx_tensor *dst, Bc bc) {
    k_reduce_to<T><<<blocks_for(src->numel), TPB, 0, STREAM(ctx)>>>((const T *)src->data, (T *)dst->data, src->numel,
                                                                    bc);
    return launched(ctx, "reduce");
}

extern "C" vx_status vx_k_broadcast_copy(vx_ctx *ctx, const vx_tensor *src, vx_tensor *dst);
extern "C" vx_status vx_k_broadcast_copy(vx_ctx *ctx, const vx_tensor *src, vx_tensor *dst) {
    if (!dst->numel) return VX_OK;
    Bc bc;
    memset(&bc, 0, sizeof bc);
    bc.rank = dst->rank;
    memcpy(bc.dims, dst->dims, sizeof bc.dims);
    bc_strides(&bc, 0, src->dims, src->rank);
    unsigned b = blocks_for(dst->numel);
    if (dst->dtype == VX_F32) k_bcopy<float><<<b, TPB, 0, STREAM(ctx)>>>((const float *)src->data, (float *)dst->data, dst->numel, bc);
    else if (vx_dtype_size(dst->dtype) == 2) k_bcopy<h16><<<b, TPB, 0, STREAM(ctx)>>>((const h16 *)src->data, (h16 *)dst->data, dst->numel, bc);
    else if (dst->dtype == VX_I64) k_bcopy<long long><<<b, TPB, 0, STREAM(ctx)>>>((const long long *)src->data, (long long *)dst->data, dst->numel, bc);
    else k_bcopy<uint8_t><<<b, TPB, 0, STREAM(ctx)>>>((const uint8_t *)src->data, (uint8_t *)dst->data, dst->numel, bc);
    return launched(ctx, "broadcast copy");
}

/* dst (zeroed here) = src summed over the dims dst broadcasts along. */
extern "C" vx_status vx_k_reduce_to(vx_ctx *ctx, const vx_tensor *src, vx_tensor *dst);
extern "C" vx_status vx_k_reduce_to(vx_ctx *ctx, const vx_tensor *src, vx_tensor *dst) {
    vx_status st = vx_tensor_zero(ctx, dst);
    if (st || !src->numel) return st;
    Bc bc;
    memset(&bc, 0, sizeof bc);
    bc.rank = src->rank;
    memcpy(bc.dims, src->dims, sizeof bc.dims);
    bc_strides(&bc, 0, dst->dims, dst->rank);
    VXK_FLOAT_DISPATCH(ctx, dst->dtype, "reduce", reduce_to_t<T>(ctx, src, dst, bc));
}

/* Slice: dst[i] = src[start + idx * step] per dim; backward scatters. */
struct Sl {
    int rank;
    int64_t dims[VX_MAX_RANK];   /* dst dims */
    int64_t sst[VX_MAX_RANK];    /* src stride * step */
    int64_t base;                /* src offset of dst[0] */
};
template <typename T> __global__ void k_slice(const T *s, T *d, int64_t n, Sl sl, bool scatter) {
    GRID_LOOP(i, n) {
        int64_t r = i, off = sl.base;
        for (int k = sl.rank - 1; k >= 0; k--) {
            off += (r % sl.dims[k]) * sl.sst[k];
            r /= sl.dims[k];
        }
        if (scatter) ((T *)s)[off] = d[i];
        else d[i] = s[off];
    }
}

/* starts/steps per dim of src (already normalised); dst has the slice's dims.
 * scatter: write dst's values into src at the slice (backward). */
extern "C" vx_status vx_k_slice(vx_ctx *ctx, vx_tensor *src, vx_tensor *dst, const int64_t *starts,
                                const int64_t *steps, int scatter);
extern "C" vx_status vx_k_slice(vx_ctx *ctx, vx_tensor *src, vx_tensor *dst, const int64_t *starts,
                                const int64_t *steps, int scatter) {
    if (!dst->numel) return VX_OK;
    Sl sl;
    memset(&sl, 0, sizeof sl);
    sl.rank = src->rank;
    int64_t s = 1;
    for (int k = src->rank - 1; k >= 0; k--) {
        sl.dims[k] = dst->dims[k];
        sl.sst[k] = s * steps[k];
        sl.base += starts[k] * s;
        s *= src->dims[k];
    }
    unsigned b = blocks_for(dst->numel);
    if (vx_dtype_size(src->dtype) == 2) k_slice<h16><<<b, TPB, 0, STREAM(ctx)>>>((const h16 *)src->data, (h16 *)dst->data, dst->numel, sl, scatter);
    else if (src->dtype == VX_F32) k_slice<float><<<b, TPB, 0, STREAM(ctx)>>>((const float *)src->data, (float *)dst->data, dst->numel, sl, scatter);
    else if (src->dtype == VX_I64) k_slice<long long><<<b, TPB, 0, STREAM(ctx)>>>((const long long *)src->data, (long long *)dst->data, dst->numel, sl, scatter);
    else k_slice<uint8_t><<<b, TPB, 0, STREAM(ctx)>>>((const uint8_t *)src->data, (uint8_t *)dst->data, dst->numel, sl, scatter);
    return launched(ctx, "Slice");
}
