/*
 * ops_resample.cu: Resize and Upsample (modes nearest and linear), forward
 * and backward.
 *
 * Resize (X, roi, scales, sizes; opset 10: X, scales): the output size per
 *   dim from sizes (with the axes attribute, opset 18) or floor(in * scale);
 *   coordinate_transformation_mode half_pixel, pytorch_half_pixel,
 *   align_corners, asymmetric; nearest_mode round_prefer_floor,
 *   round_prefer_ceil, floor, ceil. Linear blends the two neighbours along
 *   every dim whose size or scale changes (up to 3 such dims, as PyTorch's
 *   linear / bilinear / trilinear).
 * Upsample (opset 7-9): scales (attribute, or input 1), asymmetric.
 * Half precision: X of float32, bfloat16 or float16 (the kernels blend in
 *   float32; backward adds into the gradient with the dtype's atomics).
 * Backward scatters the gradient onto the taps (upsample_nearest /
 *   upsample_linear backward): keeps nothing but the sizes and the scales,
 *   which saved[0] holds on the host (no device memory). scales and sizes
 *   are read on the host.
 */
#include "ops_common.cuh"

enum { RZ_NEAREST, RZ_LINEAR };
enum { RZ_HALF_PIXEL, RZ_PYTORCH_HALF_PIXEL, RZ_ALIGN_CORNERS, RZ_ASYMMETRIC };
enum { RZ_ROUND_PREFER_FLOOR, RZ_ROUND_PREFER_CEIL, RZ_FLOOR, RZ_CEIL };

#define RZ_MAX_LINEAR_DIMS 3

typedef struct rz_geom {
    int rank, mode, ctm, nearest;
    int64_t in[VX_MAX_RANK], out[VX_MAX_RANK];
    float scale[VX_MAX_RANK];
    bool moves[VX_MAX_RANK]; /* the dim is resampled (else output index = input index) */
} rz_geom;

/* Source coordinate of output index o along dim d. */
static __device__ __forceinline__ float rz_src(const rz_geom &g, int d, int64_t o) {
    float s = g.scale[d];
    switch (g.ctm) {
    case RZ_HALF_PIXEL: return ((float)o + 0.5f) / s - 0.5f;
    case RZ_PYTORCH_HALF_PIXEL: return g.out[d] > 1 ? ((float)o + 0.5f) / s - 0.5f : 0.f;
    case RZ_ALIGN_CORNERS: /* ONNX's length_resized: in * scale, unrounded when scales are given */
        return g.out[d] == 1 ? 0.f : (float)o * (float)(g.in[d] - 1) / ((float)g.in[d] * s - 1.f);
    default: return (float)o / s;
    }
}

static __device__ __forceinline__ int64_t rz_nearest(const rz_geom &g, float x, int64_t len) {
    float f = floorf(x);
    int64_t i;
    switch (g.nearest) {
    case RZ_ROUND_PREFER_FLOOR: i = (int64_t)(x - f == 0.5f ? f : roundf(x)); break;
    case RZ_ROUND_PREFER_CEIL: i = (int64_t)(x - f == 0.5f ? f + 1.f : roundf(x)); break;
    case RZ_FLOOR: i = (int64_t)f; break;
    default: i = (int64_t)ceilf(x); break;
    }
    return i < 0 ? 0 : i >= len ? len - 1 : i;
}

/* The taps of output element i: up to 8 input offsets and weights; count. */
static __device__ int rz_taps(const rz_geom &g, int64_t i, int64_t *off, float *w) {
    int64_t base = 0, stride = 1;
    int n = 1;
    off[0] = 0;
    w[0] = 1.f;
    for (int d = g.rank - 1; d >= 0; d--) {
        int64_t o = i % g.out[d];
        i /= g.out[d];
        if (!g.moves[d]) {
            base += o * stride;
        } else if (g.mode == RZ_NEAREST) {
            base += rz_nearest(g, rz_src(g, d, o), g.in[d]) * stride;
        } else {
            float x = rz_src(g, d, o);
            float hi = (float)(g.in[d] - 1);
            x = x < 0.f ? 0.f : x > hi ? hi : x;
            int64_t i0 = (int64_t)floorf(x), i1 = i0 + 1 < g.in[d] ? i0 + 1 : i0;
            float l = x - (float)i0;
            for (int t = 0; t < n; t++) { /* each tap splits in two along d */
                off[n + t] = off[t] + i1 * stride;
                w[n + t] = w[t] * l;
                off[t] += i0 * stride;
                w[t] *= 1.f - l;
            }
            n *= 2;
        }
        stride *= g.in[d];
    }
    for (int t = 0; t < n; t++) off[t] += base;
    return n;
}

template <typename T> static __global__ void rz_forward_kernel(T *y, const T *x, rz_geom g, int64_t n) {
    VXK_LOOP(i, n) {
        int64_t off[1 << RZ_MAX_LINEAR_DIMS];
        float w[1 << RZ_MAX_LINEAR_DIMS];
        int taps = rz_taps(g, i, off, w);
        float acc = 0.f;
        for (int t = 0; t < taps; t++) acc += w[t] * vxk_ld(x[off[t]]);
        y[i] = vxk_st<T>(acc);
    }
}

template <typename T> static __global__ void rz_backward_kernel(T *dx, const T *dy, rz_geom g, int64_t n) {
    VXK_LOOP(i, n) {
        int64_t off[1 << RZ_MAX_LINEAR_DIMS];
        float w[1 << RZ_MAX_LINEAR_DIMS];
        int taps = rz_taps(g, i, off, w);
        float v = vxk_ld(dy[i]);
        for (int t = 0; t < taps; t++)
            if (w[t] != 0.f) vxk_atomic_add_t(dx + off[t], w[t] * v);
    }
}

/* Mode, coordinate mode, nearest mode from the attributes. */
static vx_status rz_modes(vx_ctx *ctx, const vx_run *run, const char *op, rz_geom *g) {
    const char *mode = vxk_attr_string(run, "mode", "nearest");
    if (!strcmp(mode, "nearest")) g->mode = RZ_NEAREST;
    else if (!strcmp(mode, "linear") || !strcmp(mode, "bilinear") || !strcmp(mode, "trilinear")) g->mode = RZ_LINEAR;
    else return vx_fail(ctx, VX_EUNSUPPORTED, "%s: mode %s has no kernel (nearest and linear do)", op, mode);
    if (!strcmp(op, "Upsample")) {
        g->ctm = RZ_ASYMMETRIC;
        g->nearest = RZ_FLOOR; /* Upsample's nearest: floor of the asymmetric coordinate */
        return VX_OK;
    }
    const char *ctm = vxk_attr_string(run, "coordinate_transformation_mode", "half_pixel");
    if (!strcmp(ctm, "half_pixel")) g->ctm = RZ_HALF_PIXEL;
    else if (!strcmp(ctm, "pytorch_half_pixel")) g->ctm = RZ_PYTORCH_HALF_PIXEL;
    else if (!strcmp(ctm, "align_corners")) g->ctm = RZ_ALIGN_CORNERS;
    else if (!strcmp(ctm, "asymmetric")) g->ctm = RZ_ASYMMETRIC;
    else return vx_fail(ctx, VX_EUNSUPPORTED, "Resize: coordinate_transformation_mode %s has no kernel", ctm);
    const char *nm = vxk_attr_string(run, "nearest_mode", "round_prefer_floor");
    if (!strcmp(nm, "round_prefer_floor")) g->nearest = RZ_ROUND_PREFER_FLOOR;
    else if (!strcmp(nm, "round_prefer_ceil")) g->nearest = RZ_ROUND_PREFER_CEIL;
    else if (!strcmp(nm, "floor")) g->nearest = RZ_FLOOR;
    else if (!strcmp(nm, "ceil")) g->nearest = RZ_CEIL;
    else return vx_fail(ctx, VX_EUNSUPPORTED, "Resize: nearest_mode %s has no kernel", nm);
    if (vxk_attr_int(run, "antialias", 0)) return vx_fail(ctx, VX_EUNSUPPORTED, "Resize: antialias has no kernel");
    const char *kar = vxk_attr_string(run, "keep_aspect_ratio_policy", "stretch");
    if (strcmp(kar, "stretch")) return vx_fail(ctx, VX_EUNSUPPORTED, "Resize: keep_aspect_ratio_policy %s has no kernel", kar);
    return VX_OK;
}

/* Element k of scales / sizes: from its host copy, else downloaded. */
static double rz_host_value(vx_ctx *ctx, const vx_tensor *t, int64_t k) {
    if (vx_dtype_is_float(t->dtype) && t->host_f32) return t->host_f32[k];
    if (t->dtype != VX_F32 && t->host_i64) return (double)t->host_i64[k];
    if (!t->data || cudaStreamSynchronize(vxk_stream(ctx)) != cudaSuccess) return 0;
    if (t->dtype == VX_F32) {
        float v = 0.f;
        return cudaMemcpy(&v, (const float *)t->data + k, sizeof v, cudaMemcpyDeviceToHost) == cudaSuccess ? v : 0;
    }
    if (t->dtype == VX_BF16 || t->dtype == VX_F16) { /* scales stored in a half dtype */
        uint16_t v = 0;
        if (cudaMemcpy(&v, (const uint16_t *)t->data + k, sizeof v, cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
        if (t->dtype == VX_BF16) {
            __nv_bfloat16_raw r;
            r.x = v;
            return __bfloat162float(__nv_bfloat16(r));
        }
        __half_raw r;
        r.x = v;
        return __half2float(__half(r));
    }
    int64_t v = 0;
    return cudaMemcpy(&v, (const int64_t *)t->data + k, sizeof v, cudaMemcpyDeviceToHost) == cudaSuccess ? (double)v : 0;
}

/* The geometry of the forward: output sizes and the scale per dim. */
static vx_status rz_geom_make(vx_ctx *ctx, vx_run *run, const char *op, rz_geom *g) {
    memset(g, 0, sizeof *g);
    const vx_tensor *X = run->in[0];
    g->rank = X->rank;
    vx_status st = rz_modes(ctx, run, op, g);
    if (st) return st;
    bool upsample = !strcmp(op, "Upsample");
    int64_t opset = vxk_opset(run);
    int scales_slot = upsample || opset < 11 ? 1 : 2, sizes_slot = upsample || opset < 11 ? -1 : 3;
    vx_tensor *scales = vxk_has_in(run, scales_slot) && run->in[scales_slot]->numel ? run->in[scales_slot] : NULL;
    vx_tensor *sizes = sizes_slot > 0 && vxk_has_in(run, sizes_slot) && run->in[sizes_slot]->numel ? run->in[sizes_slot] : NULL;
    /* opset 18's axes: scales / sizes list these dims only */
    int axes[VX_MAX_RANK], n_axes = X->rank;
    int64_t na;
    const int64_t *ax = vxk_attr_ints(run, "axes", &na);
    for (int d = 0; d < X->rank; d++) axes[d] = d;
    if (ax && !upsample) {
        if (na > X->rank) return vx_fail(ctx, VX_ESHAPE, "%s: %lld axes for rank %d", op, (long long)na, X->rank);
        n_axes = (int)na;
        for (int k = 0; k < n_axes; k++)
            if ((axes[k] = vxk_axis(ax[k], X->rank)) < 0) return vx_fail(ctx, VX_ESHAPE, "%s: axis out of range", op);
    }
    for (int d = 0; d < X->rank; d++) {
        g->in[d] = g->out[d] = X->dims[d];
        g->scale[d] = 1.f;
    }
    if (sizes) {
        if (sizes->numel != n_axes) return vx_fail(ctx, VX_ESHAPE, "%s: sizes has %lld values for %d dims", op, (long long)sizes->numel, n_axes);
        for (int k = 0; k < n_axes; k++) {
            int d = axes[k];
            g->out[d] = (int64_t)rz_host_value(ctx, sizes, k);
            g->scale[d] = g->in[d] ? (float)g->out[d] / (float)g->in[d] : 1.f;
        }
    } else if (scales) {
        if (scales->numel != n_axes) return vx_fail(ctx, VX_ESHAPE, "%s: scales has %lld values for %d dims", op, (long long)scales->numel, n_axes);
        for (int k = 0; k < n_axes; k++) {
            int d = axes[k];
            g->scale[d] = (float)rz_host_value(ctx, scales, k);
            if (!(g->scale[d] > 0.f)) return vx_fail(ctx, VX_ESHAPE, "%s: scale %g", op, (double)g->scale[d]);
            g->out[d] = (int64_t)floor((double)g->in[d] * (double)g->scale[d]);
        }
    } else if (upsample) { /* opset 7: the scales attribute (floats) */
        const est_attr *a = NULL;
        for (int k = 0; run->node && k < run->node->n_attrs; k++)
            if (!strcmp(run->node->attrs[k].name, "scales")) a = &run->node->attrs[k];
        if (!a || a->n != X->rank || !a->floats) return vx_fail(ctx, VX_ESHAPE, "Upsample: no scales");
        for (int d = 0; d < X->rank; d++) {
            g->scale[d] = a->floats[d];
            g->out[d] = (int64_t)floor((double)g->in[d] * (double)g->scale[d]);
        }
    } else {
        return vx_fail(ctx, VX_ESHAPE, "%s: neither scales nor sizes", op);
    }
    int moving = 0;
    for (int d = 0; d < X->rank; d++) {
        g->moves[d] = g->out[d] != g->in[d] || g->scale[d] != 1.f;
        moving += g->moves[d];
    }
    if (g->mode == RZ_LINEAR && moving > RZ_MAX_LINEAR_DIMS)
        return vx_fail(ctx, VX_EUNSUPPORTED, "%s: linear over %d dims (a kernel takes %d)", op, moving, RZ_MAX_LINEAR_DIMS);
    return VX_OK;
}

template <typename T> static vx_status rz_forward_run(vx_ctx *ctx, void *y, const void *x, const rz_geom &g, int64_t n) {
    rz_forward_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, vxk_stream(ctx)>>>((T *)y, (const T *)x, g, n);
    return VX_OK;
}

template <typename T> static vx_status rz_backward_run(vx_ctx *ctx, void *dx, const void *dy, const rz_geom &g, int64_t n) {
    rz_backward_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, vxk_stream(ctx)>>>((T *)dx, (const T *)dy, g, n);
    return VX_OK;
}

static vx_status rz_forward_common(vx_ctx *ctx, vx_run *run, const char *op) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "%s needs X", op);
    const vx_tensor *X = run->in[0];
    if (!vx_dtype_is_float(X->dtype)) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: a floating X only", op);
    rz_geom g;
    vx_status st = rz_geom_make(ctx, run, op, &g);
    if (st) return st;
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, g.out))) return st;
    /* backward's geometry: the scales, on the host (sizes are X's and Y's dims) */
    int64_t r = X->rank;
    run->saved[0] = vx_tensor_new_host(ctx, VX_F32, 1, &r);
    if (!run->saved[0]) return vx_fail(ctx, VX_EOOM, "host out of memory");
    memcpy(run->saved[0]->host_f32, g.scale, (size_t)r * sizeof(float));
    int64_t n = run->out[0]->numel;
    if (!n || !X->numel) return n ? vxk_zero(ctx, run->out[0]->data, (size_t)n * vx_dtype_size(X->dtype)) : VX_OK;
    st = [&]() -> vx_status { VXK_FLOAT_DISPATCH(ctx, X->dtype, op, rz_forward_run<T>(ctx, run->out[0]->data, X->data, g, n)); }();
    return st ? st : vxk_check(ctx, op);
}

static vx_status rz_backward_common(vx_ctx *ctx, vx_run *run, const char *op) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0], *Y = run->out[0], *dY = run->grad_out[0];
    rz_geom g;
    memset(&g, 0, sizeof g);
    g.rank = X->rank;
    vx_status st = rz_modes(ctx, run, op, &g);
    if (st) return st;
    const vx_tensor *sc = run->saved[0];
    if (!sc || !sc->host_f32 || sc->numel != X->rank) return vx_fail(ctx, VX_ECUDA, "%s backward: scales were not kept", op);
    for (int d = 0; d < X->rank; d++) {
        g.in[d] = X->dims[d];
        g.out[d] = Y->dims[d];
        g.scale[d] = sc->host_f32[d];
        g.moves[d] = g.out[d] != g.in[d] || g.scale[d] != 1.f;
    }
    if ((st = vxk_grad(ctx, run, 0))) return st;
    vx_tensor *dX = run->grad_in[0];
    if ((st = vxk_zero(ctx, dX->data, (size_t)dX->numel * vx_dtype_size(dX->dtype)))) return st;
    if (!dY || !dY->numel || !dX->numel) return VX_OK;
    st = [&]() -> vx_status {
        VXK_FLOAT_DISPATCH(ctx, dX->dtype, op, rz_backward_run<T>(ctx, dX->data, dY->data, g, dY->numel));
    }();
    return st ? st : vxk_check(ctx, op);
}

static vx_status resize_forward(vx_ctx *ctx, vx_run *run) { return rz_forward_common(ctx, run, "Resize"); }
static vx_status resize_backward(vx_ctx *ctx, vx_run *run) { return rz_backward_common(ctx, run, "Resize"); }
static vx_status upsample_forward(vx_ctx *ctx, vx_run *run) { return rz_forward_common(ctx, run, "Upsample"); }
static vx_status upsample_backward(vx_ctx *ctx, vx_run *run) { return rz_backward_common(ctx, run, "Upsample"); }

extern "C" {
const vx_op vx_ops_resample[] = {
    /* roi, scales, sizes: read on the host; nothing kept on the device */
    {"Resize", resize_forward, resize_backward, 0, 0, false, VX_SLOT(1) | VX_SLOT(2) | VX_SLOT(3), NULL, 0, VX_HALF},
    {"Upsample", upsample_forward, upsample_backward, 0, 0, false, VX_SLOT(1), NULL, 0, VX_HALF},
};
const size_t vx_ops_resample_count = sizeof vx_ops_resample / sizeof vx_ops_resample[0];
}
