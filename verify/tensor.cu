/* tensor.cu: vx_tensor lifetime (reference counts, views), host copies of
 * small tensors, uploads and downloads. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vx_half.cuh"
#include "vx_internal.h"

extern "C" size_t vx_dtype_size(vx_dtype dt) {
    switch (dt) {
    case VX_F32: return 4;
    case VX_I64: return 8;
    case VX_BF16: case VX_F16: return 2;
    default: return 1;
    }
}

extern "C" vx_dtype vx_float_dtype(vx_ctx *ctx) { return ctx->fdt; }

/* Host conversions between float32 and a floating storage dtype (round to
 * nearest even, as .to(torch.bfloat16) rounds). A finite value beyond
 * float16's range saturates to +-65504: the float32 exports bake
 * torch.finfo(float32).min into their attention masks, where a float16
 * model computes torch.finfo(float16).min, and -inf would turn the masked
 * products into NaN. */
extern "C" void vx_from_f32(vx_dtype dt, const float *src, void *dst, int64_t n) {
    if (dt == VX_BF16)
        for (int64_t i = 0; i < n; i++) ((__nv_bfloat16 *)dst)[i] = __float2bfloat16(src[i]);
    else if (dt == VX_F16)
        for (int64_t i = 0; i < n; i++) {
            float v = src[i];
            if (isfinite(v)) v = v > 65504.f ? 65504.f : v < -65504.f ? -65504.f : v;
            ((__half *)dst)[i] = __float2half(v);
        }
    else if (src != dst)
        memcpy(dst, src, (size_t)n * sizeof(float));
}

extern "C" void vx_to_f32(vx_dtype dt, const void *src, float *dst, int64_t n) {
    if (dt == VX_BF16)
        for (int64_t i = 0; i < n; i++) dst[i] = __bfloat162float(((const __nv_bfloat16 *)src)[i]);
    else if (dt == VX_F16)
        for (int64_t i = 0; i < n; i++) dst[i] = __half2float(((const __half *)src)[i]);
    else if (src != dst)
        memcpy(dst, src, (size_t)n * sizeof(float));
}

extern "C" vx_status vx_cuda_status(vx_ctx *ctx, int e, const char *what) {
    if (e == cudaSuccess) return VX_OK;
    cudaGetLastError();
    return vx_fail(ctx, VX_ECUDA, "%s: %s", what, cudaGetErrorString((cudaError_t)e));
}

extern "C" vx_status vx_sync(vx_ctx *ctx) {
    return vx_cuda_status(ctx, cudaStreamSynchronize((cudaStream_t)ctx->stream), "synchronize");
}

static bool set_shape(vx_tensor *t, int rank, const int64_t *dims) {
    if (rank < 0 || rank > VX_MAX_RANK) return false;
    t->rank = rank;
    t->numel = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0) return false;
        t->dims[i] = dims[i];
        t->numel *= dims[i];
    }
    return true;
}

extern "C" vx_tensor *vx_tensor_new(vx_ctx *ctx, vx_dtype dt, int rank, const int64_t *dims, vx_category cat) {
    vx_tensor *t = (vx_tensor *)calloc(1, sizeof *t);
    if (!t) return NULL;
    if (!set_shape(t, rank, dims)) {
        free(t);
        return NULL;
    }
    t->dtype = dt;
    t->cat = cat;
    t->refs = 1;
    if (t->numel > 0) {
        t->data = vx_malloc(ctx, (size_t)t->numel * vx_dtype_size(dt), cat);
        if (!t->data) {
            free(t);
            return NULL;
        }
    }
    return t;
}

extern "C" vx_tensor *vx_tensor_new_host(vx_ctx *ctx, vx_dtype dt, int rank, const int64_t *dims) {
    (void)ctx;
    vx_tensor *t = (vx_tensor *)calloc(1, sizeof *t);
    if (!t) return NULL;
    if (!set_shape(t, rank, dims) || t->numel > VX_HOST_MAX) {
        free(t);
        return NULL;
    }
    t->dtype = dt;
    t->cat = VX_CAT_ACTIVATIONS;
    t->refs = 1;
    size_t n = t->numel ? (size_t)t->numel : 1;
    if (vx_dtype_is_float(dt)) t->host_f32 = (float *)calloc(n, sizeof(float));
    else t->host_i64 = (int64_t *)calloc(n, sizeof(int64_t));
    if (!t->host_f32 && !t->host_i64) {
        free(t);
        return NULL;
    }
    return t;
}

extern "C" vx_tensor *vx_tensor_storage(vx_tensor *t) {
    return t->base ? t->base : t;
}

/* ---- strides ---------------------------------------------------------------------- */

static void contiguous_strides(int rank, const int64_t *dims, int64_t *st) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= dims[i] > 1 ? dims[i] : 1;
    }
}

extern "C" void vx_tensor_get_strides(const vx_tensor *t, int64_t *st) {
    if (t->strided) memcpy(st, t->strides, sizeof(int64_t) * (size_t)t->rank);
    else contiguous_strides(t->rank, t->dims, st);
}

/* Sets t's strides, and strided = false when they are the contiguous ones
 * (size-1 dims ignored) or t is empty. */
static void set_strides(vx_tensor *t, const int64_t *st) {
    int64_t c[VX_MAX_RANK];
    contiguous_strides(t->rank, t->dims, c);
    bool contig = true;
    for (int i = 0; i < t->rank; i++) {
        t->strides[i] = st[i];
        if (t->dims[i] != 1 && st[i] != c[i]) contig = false;
    }
    t->strided = t->numel > 0 && !contig;
    if (!t->strided) memset(t->strides, 0, sizeof t->strides);
}

/* PyTorch's at::detail::computeStride: the strides viewing (odims, ost) as
 * ndims without a copy; false when there are none. */
static bool compute_stride(int orank, const int64_t *odims, const int64_t *ost, int nrank, const int64_t *ndims,
                           int64_t *nst) {
    int64_t numel = 1;
    for (int i = 0; i < orank; i++) numel *= odims[i];
    if (numel == 0 || orank == 0) {
        contiguous_strides(nrank, ndims, nst);
        return true;
    }
    int view_d = nrank - 1;
    int64_t chunk = ost[orank - 1], tnumel = 1, vnumel = 1;
    for (int td = orank - 1; td >= 0; td--) {
        tnumel *= odims[td];
        if (td == 0 || (odims[td - 1] != 1 && ost[td - 1] != tnumel * chunk)) {
            while (view_d >= 0 && (vnumel < tnumel || ndims[view_d] == 1)) {
                nst[view_d] = vnumel * chunk;
                vnumel *= ndims[view_d];
                view_d--;
            }
            if (vnumel != tnumel) return false;
            if (td > 0) {
                chunk = ost[td - 1];
                tnumel = 1;
                vnumel = 1;
            }
        }
    }
    return view_d == -1;
}

extern "C" vx_tensor *vx_tensor_strided_view(vx_ctx *ctx, vx_tensor *t, int rank, const int64_t *dims,
                                             const int64_t *strides, int64_t offset) {
    (void)ctx;
    vx_tensor *v = (vx_tensor *)calloc(1, sizeof *v);
    if (!v) return NULL;
    if (!set_shape(v, rank, dims)) {
        free(v);
        return NULL;
    }
    vx_tensor *base = vx_tensor_storage(t);
    v->dtype = t->dtype;
    v->cat = base->cat;
    v->refs = 1;
    set_strides(v, strides);
    if (t->data) {
        v->data = v->numel ? (char *)t->data + offset * (int64_t)vx_dtype_size(t->dtype) : t->data;
        v->base = base;
        base->refs++;
    }
    return v;
}

extern "C" vx_tensor *vx_tensor_view(vx_ctx *ctx, vx_tensor *t, int rank, const int64_t *dims) {
    (void)ctx;
    if (t->strided) {
        int64_t nst[VX_MAX_RANK];
        int64_t n = 1;
        for (int i = 0; i < rank; i++) n *= dims[i];
        if (rank < 0 || rank > VX_MAX_RANK || n != t->numel ||
            !compute_stride(t->rank, t->dims, t->strides, rank, dims, nst))
            return NULL;
        return vx_tensor_strided_view(ctx, t, rank, dims, nst, 0);
    }
    vx_tensor *v = (vx_tensor *)calloc(1, sizeof *v);
    if (!v) return NULL;
    if (!set_shape(v, rank, dims) || v->numel != t->numel) {
        free(v);
        return NULL;
    }
    vx_tensor *base = vx_tensor_storage(t);
    v->data = t->data;
    v->dtype = t->dtype;
    v->cat = base->cat;
    v->refs = 1;
    /* host copies are per-tensor (cheap): copy them */
    if (t->host_i64) {
        v->host_i64 = (int64_t *)malloc((size_t)(t->numel ? t->numel : 1) * sizeof(int64_t));
        if (v->host_i64) memcpy(v->host_i64, t->host_i64, (size_t)t->numel * sizeof(int64_t));
    }
    if (t->host_f32) {
        v->host_f32 = (float *)malloc((size_t)(t->numel ? t->numel : 1) * sizeof(float));
        if (v->host_f32) memcpy(v->host_f32, t->host_f32, (size_t)t->numel * sizeof(float));
    }
    if (t->data) {
        v->base = base;
        base->refs++;
    }
    return v;
}

extern "C" vx_tensor *vx_tensor_retain(vx_tensor *t) {
    if (t) t->refs++;
    return t;
}

extern "C" void vx_tensor_release(vx_ctx *ctx, vx_tensor *t) {
    if (!t) return;
    if (--t->refs > 0) return;
    if (t->base) vx_tensor_release(ctx, t->base);
    else if (t->data) vx_free(ctx, t->data);
    free(t->host_i64);
    free(t->host_f32);
    free(t);
}

extern "C" bool vx_tensor_exclusive(const vx_tensor *t) {
    return t->refs == 1 && (!t->base || t->base->refs == 1);
}

extern "C" void vx_tensor_retag(vx_ctx *ctx, vx_tensor *t, vx_category cat) {
    vx_tensor *s = vx_tensor_storage(t);
    if (s->data) vx_alloc_retag(ctx, s->data, cat);
    s->cat = cat;
    t->cat = cat;
}

extern "C" vx_status vx_tensor_upload(vx_ctx *ctx, vx_tensor *t, const void *host) {
    if (!t->numel) return VX_OK;
    return vx_cuda_status(ctx,
                          cudaMemcpyAsync(t->data, host, (size_t)t->numel * vx_dtype_size(t->dtype),
                                          cudaMemcpyHostToDevice, (cudaStream_t)ctx->stream),
                          "upload");
}

extern "C" vx_status vx_tensor_download(vx_ctx *ctx, vx_tensor *t, void *host) {
    if (!t->numel) return VX_OK;
    if (!t->data) {
        /* host-only */
        size_t n = (size_t)t->numel;
        if (vx_dtype_is_float(t->dtype)) vx_from_f32(t->dtype, t->host_f32, host, t->numel);
        else if (t->dtype == VX_I64) memcpy(host, t->host_i64, n * sizeof(int64_t));
        else
            for (size_t i = 0; i < n; i++) ((uint8_t *)host)[i] = t->host_i64[i] != 0;
        return VX_OK;
    }
    if (t->strided) {
        vx_tensor *c = vx_contiguous(ctx, t);
        if (!c) return vx_fail(ctx, VX_EOOM, "out of device memory downloading a strided tensor");
        vx_status st = vx_tensor_download(ctx, c, host);
        vx_tensor_release(ctx, c);
        return st;
    }
    vx_status st = vx_cuda_status(ctx,
                                  cudaMemcpyAsync(host, t->data, (size_t)t->numel * vx_dtype_size(t->dtype),
                                                  cudaMemcpyDeviceToHost, (cudaStream_t)ctx->stream),
                                  "download");
    return st ? st : vx_sync(ctx);
}

extern "C" vx_status vx_tensor_to_device(vx_ctx *ctx, vx_tensor *t) {
    if (t->data || t->numel == 0) return VX_OK;
    size_t n = (size_t)t->numel;
    void *tmp = NULL;
    const void *src;
    if (t->dtype == VX_F32) {
        if (!t->host_f32) return vx_fail(ctx, VX_ECUDA, "tensor without storage");
        src = t->host_f32;
    } else if (vx_dtype_is_float(t->dtype)) {
        if (!t->host_f32) return vx_fail(ctx, VX_ECUDA, "tensor without storage");
        void *h = malloc(n * vx_dtype_size(t->dtype));
        if (!h) return vx_fail(ctx, VX_EOOM, "host out of memory");
        vx_from_f32(t->dtype, t->host_f32, h, t->numel);
        src = tmp = h;
    } else if (t->dtype == VX_I64) {
        if (!t->host_i64) return vx_fail(ctx, VX_ECUDA, "tensor without storage");
        src = t->host_i64;
    } else {
        if (!t->host_i64) return vx_fail(ctx, VX_ECUDA, "tensor without storage");
        uint8_t *b = (uint8_t *)malloc(n);
        if (!b) return vx_fail(ctx, VX_EOOM, "host out of memory");
        for (size_t i = 0; i < n; i++) b[i] = t->host_i64[i] != 0;
        src = tmp = b;
    }
    t->data = vx_malloc(ctx, n * vx_dtype_size(t->dtype), t->cat);
    if (!t->data) {
        free(tmp);
        return vx_fail(ctx, VX_EOOM, "out of device memory uploading a %lld-element tensor", (long long)n);
    }
    vx_status st = vx_tensor_upload(ctx, t, src);
    if (tmp) {
        vx_sync(ctx);
        free(tmp);
    }
    return st;
}

extern "C" vx_status vx_tensor_to_host(vx_ctx *ctx, vx_tensor *t) {
    if (vx_dtype_is_float(t->dtype) ? t->host_f32 != NULL : t->host_i64 != NULL) return VX_OK;
    if (t->numel > VX_HOST_MAX)
        return vx_fail(ctx, VX_EUNSUPPORTED, "a %lld-element tensor read on the host (limit %d)",
                       (long long)t->numel, VX_HOST_MAX);
    size_t n = (size_t)(t->numel ? t->numel : 1);
    if (!t->data) return vx_fail(ctx, VX_ECUDA, "tensor without storage");
    if (t->dtype == VX_F32) {
        t->host_f32 = (float *)calloc(n, sizeof(float));
        if (!t->host_f32) return vx_fail(ctx, VX_EOOM, "host out of memory");
        return vx_tensor_download(ctx, t, t->host_f32);
    }
    if (vx_dtype_is_float(t->dtype)) {
        void *h = malloc(n * vx_dtype_size(t->dtype));
        t->host_f32 = (float *)calloc(n, sizeof(float));
        vx_status st = h && t->host_f32 ? vx_tensor_download(ctx, t, h) : vx_fail(ctx, VX_EOOM, "host out of memory");
        if (!st) vx_to_f32(t->dtype, h, t->host_f32, t->numel);
        free(h);
        if (st) { /* no half-made copy left behind */
            free(t->host_f32);
            t->host_f32 = NULL;
        }
        return st;
    }
    t->host_i64 = (int64_t *)calloc(n, sizeof(int64_t));
    if (!t->host_i64) return vx_fail(ctx, VX_EOOM, "host out of memory");
    if (t->dtype == VX_I64) return vx_tensor_download(ctx, t, t->host_i64);
    uint8_t *b = (uint8_t *)malloc(n);
    if (!b) return vx_fail(ctx, VX_EOOM, "host out of memory");
    vx_status st = vx_tensor_download(ctx, t, b);
    for (size_t i = 0; i < (size_t)t->numel; i++) t->host_i64[i] = b[i];
    free(b);
    return st;
}

extern "C" double vx_tensor_get(vx_ctx *ctx, vx_tensor *t, int64_t k) {
    if (k < 0 || k >= t->numel) return 0;
    if (vx_tensor_to_host(ctx, t) != VX_OK) return 0;
    return vx_dtype_is_float(t->dtype) ? (double)t->host_f32[k] : (double)t->host_i64[k];
}

extern "C" vx_status vx_tensor_zero(vx_ctx *ctx, vx_tensor *t) {
    if (!t->numel || !t->data) return VX_OK;
    return vx_cuda_status(ctx,
                          cudaMemsetAsync(t->data, 0, (size_t)t->numel * vx_dtype_size(t->dtype),
                                          (cudaStream_t)ctx->stream),
                          "memset");
}

/* dst (contiguous) = src read through its strides. */
struct vx_sgeom {
    int rank;
    int64_t dims[VX_MAX_RANK];
    int64_t st[VX_MAX_RANK];
};
/* Element i's offset in a tensor of geometry g. */
static __device__ __forceinline__ int64_t sgeom_offset(const vx_sgeom &g, int64_t i) {
    int64_t off = 0;
    for (int k = g.rank - 1; k >= 0; k--) {
        off += (i % g.dims[k]) * g.st[k];
        i /= g.dims[k];
    }
    return off;
}

static vx_sgeom sgeom_of(const vx_tensor *t) {
    vx_sgeom g;
    memset(&g, 0, sizeof g);
    g.rank = t->rank;
    memcpy(g.dims, t->dims, sizeof g.dims);
    memcpy(g.st, t->strides, sizeof g.st);
    return g;
}

static unsigned copy_blocks(int64_t n) {
    int64_t nb = (n + 255) / 256;
    return (unsigned)(nb > 65535LL * 16 ? 65535LL * 16 : nb < 1 ? 1 : nb);
}

template <typename T> __global__ void k_strided_copy(const T *s, T *d, int64_t n, vx_sgeom g) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        d[i] = s[sgeom_offset(g, i)];
}

static vx_status strided_copy(vx_ctx *ctx, const vx_tensor *src, vx_tensor *dst) {
    if (!dst->numel) return VX_OK;
    vx_sgeom g = sgeom_of(src);
    unsigned b = copy_blocks(dst->numel);
    cudaStream_t s = (cudaStream_t)ctx->stream;
    switch (vx_dtype_size(src->dtype)) {
    case 4: k_strided_copy<float><<<b, 256, 0, s>>>((const float *)src->data, (float *)dst->data, dst->numel, g); break;
    case 2: /* bfloat16, float16: moved as 2-byte words */
        k_strided_copy<unsigned short><<<b, 256, 0, s>>>((const unsigned short *)src->data, (unsigned short *)dst->data,
                                                         dst->numel, g);
        break;
    case 8: k_strided_copy<long long><<<b, 256, 0, s>>>((const long long *)src->data, (long long *)dst->data, dst->numel, g); break;
    default: k_strided_copy<uint8_t><<<b, 256, 0, s>>>((const uint8_t *)src->data, (uint8_t *)dst->data, dst->numel, g);
    }
    return vx_cuda_status(ctx, cudaPeekAtLastError(), "strided copy");
}

extern "C" vx_tensor *vx_contiguous(vx_ctx *ctx, vx_tensor *t) {
    if (!t->strided || !t->data) return vx_tensor_retain(t);
    return vx_tensor_clone(ctx, t, VX_CAT_TEMP);
}

extern "C" vx_tensor *vx_tensor_reshape(vx_ctx *ctx, vx_tensor *t, int rank, const int64_t *dims, vx_category cat) {
    vx_tensor *v = vx_tensor_view(ctx, t, rank, dims);
    if (v || !t->strided) return v;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    if (n != t->numel) return NULL;
    vx_tensor *c = vx_tensor_clone(ctx, t, cat);
    if (!c) return NULL;
    c->rank = rank;
    memcpy(c->dims, dims, sizeof(int64_t) * (size_t)rank);
    return c;
}

extern "C" vx_tensor *vx_tensor_clone(vx_ctx *ctx, vx_tensor *t, vx_category cat) {
    vx_tensor *c = vx_tensor_new(ctx, t->dtype, t->rank, t->dims, cat);
    if (!c) return NULL;
    if (t->strided && t->numel && t->data) {
        if (strided_copy(ctx, t, c) != VX_OK) {
            vx_tensor_release(ctx, c);
            return NULL;
        }
        return c;
    }
    if (t->numel && t->data &&
        cudaMemcpyAsync(c->data, t->data, (size_t)t->numel * vx_dtype_size(t->dtype), cudaMemcpyDeviceToDevice,
                        (cudaStream_t)ctx->stream) != cudaSuccess) {
        cudaGetLastError();
        vx_tensor_release(ctx, c);
        return NULL;
    }
    return c;
}

extern "C" vx_tensor *vx_out_new(vx_ctx *ctx, vx_run *run, int k, vx_dtype dt, int rank, const int64_t *dims) {
    vx_tensor *t = vx_tensor_new(ctx, dt, rank, dims, run->out_cat[k]);
    run->out[k] = t;
    return t;
}

extern "C" vx_tensor *vx_grad_new(vx_ctx *ctx, vx_run *run, int k) {
    vx_tensor *x = run->in[k];
    /* a gradient has its input's dtype (float32 for an integer input's) */
    vx_dtype dt = vx_dtype_is_float(x->dtype) ? x->dtype : VX_F32;
    vx_tensor *t = vx_tensor_new(ctx, dt, x->rank, x->dims, run->grad_cat[k]);
    run->grad_in[k] = t;
    return t;
}

/* d (contiguous, storage D) = s (storage S, read through its strides when
 * strided) converted through float. */
template <typename S, typename D> __global__ void k_cast_strided(const S *s, D *d, int64_t n, vx_sgeom g, bool strided) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        d[i] = vxk_st<D>(vxk_ld(s[strided ? sgeom_offset(g, i) : i]));
}

template <typename S> static void cast_from(const vx_tensor *t, vx_tensor *c, const vx_sgeom &g, unsigned b, cudaStream_t s) {
    const S *src = (const S *)t->data;
    switch (c->dtype) {
    case VX_F32: k_cast_strided<S, float><<<b, 256, 0, s>>>(src, (float *)c->data, c->numel, g, t->strided); break;
    case VX_BF16: k_cast_strided<S, __nv_bfloat16><<<b, 256, 0, s>>>(src, (__nv_bfloat16 *)c->data, c->numel, g, t->strided); break;
    default: k_cast_strided<S, __half><<<b, 256, 0, s>>>(src, (__half *)c->data, c->numel, g, t->strided); break;
    }
}

extern "C" vx_tensor *vx_tensor_cast(vx_ctx *ctx, vx_tensor *t, vx_dtype dt, vx_category cat) {
    if (!vx_dtype_is_float(t->dtype) || !vx_dtype_is_float(dt)) return NULL;
    vx_tensor *c = vx_tensor_new(ctx, dt, t->rank, t->dims, cat);
    if (!c || !c->numel || !t->data) return c;
    vx_sgeom g = sgeom_of(t);
    unsigned b = copy_blocks(c->numel);
    cudaStream_t s = (cudaStream_t)ctx->stream;
    switch (t->dtype) {
    case VX_F32: cast_from<float>(t, c, g, b, s); break;
    case VX_BF16: cast_from<__nv_bfloat16>(t, c, g, b, s); break;
    default: cast_from<__half>(t, c, g, b, s); break;
    }
    if (vx_cuda_status(ctx, cudaPeekAtLastError(), "autocast copy") != VX_OK) {
        vx_tensor_release(ctx, c);
        return NULL;
    }
    return c;
}
