/*
 * ops_pool.cu: MaxPool, AveragePool, LpPool (1-D, 2-D and 3-D),
 * GlobalAveragePool, GlobalMaxPool, GlobalLpPool, ReduceMean and ReduceSum,
 * forward and backward.
 *
 * MaxPool: kernel_shape, strides, pads, dilations, ceil_mode, auto_pad; the
 *   arg-max (int64, flat over X, as ONNX's Indices output with
 *   storage_order 0) is saved[0], the Indices output itself when present.
 *   saves X (max_pool2d/3d_with_indices_backward read self) and the indices.
 * AveragePool: count_include_pad; saves X (avg_pool2d/3d_backward read self).
 * GlobalAveragePool: the mean over the spatial dims; keeps nothing (PyTorch
 *   runs adaptive_avg_pool2d(x, 1) as mean).
 * GlobalMaxPool: MaxPool with one window per plane; keeps X and the int64
 *   arg-max (saved[0]), as adaptive_max_pool2d.
 * LpPool / GlobalLpPool: (sum |x|^p)^(1/p) over each window, p >= 1 (an int
 *   attribute); one fused kernel that keeps X and Y.
 * ReduceMean / ReduceSum: axes from the attribute or input 1 (read on the
 *   host), keepdims, noop_with_empty_axes; keep only the axes (a host
 *   constant; backward needs X's shape).
 */
#include "ops_common.cuh"

/* Spatial geometry, 1 to 3 dims, right-aligned in [3] (a 1-D or 2-D pool
 * has depth / height 1 with a kernel of 1). */
typedef struct pool_geom {
    int sp;
    int64_t N, C;
    int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], out[3]; /* pb / pe: begin / end pads */
} pool_geom;

static int64_t pool_out(int64_t in, int64_t pb, int64_t pe, int64_t k, int64_t s, int64_t d, bool ceil_mode) {
    int64_t ek = (k - 1) * d + 1, span = in + pb + pe - ek;
    if (span < 0) return 0;
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + pb) o--; /* the last window must start inside X or its left pad */
    return o;
}

static vx_status pool_geom_make(vx_ctx *ctx, const vx_run *run, const vx_tensor *X, const char *op, pool_geom *g) {
    memset(g, 0, sizeof *g);
    if (X->rank < 3 || X->rank > 5)
        return vx_fail(ctx, VX_EUNSUPPORTED, "%s: only 1-D, 2-D and 3-D pooling (X rank %d)", op, X->rank);
    int sp = X->rank - 2, lead = 3 - sp;
    g->sp = sp;
    g->N = X->dims[0];
    g->C = X->dims[1];
    for (int i = 0; i < 3; i++) {
        g->in[i] = i < lead ? 1 : X->dims[2 + i - lead];
        g->k[i] = g->s[i] = g->d[i] = 1;
    }
    int64_t n;
    const int64_t *ks = vxk_attr_ints(run, "kernel_shape", &n);
    if (!ks || n != sp) return vx_fail(ctx, VX_ESHAPE, "%s: kernel_shape must have %d entries", op, sp);
    const int64_t *st = vxk_attr_ints(run, "strides", &n);
    if (st && n != sp) return vx_fail(ctx, VX_ESHAPE, "%s: strides has %lld entries", op, (long long)n);
    const int64_t *dl = vxk_attr_ints(run, "dilations", &n);
    if (dl && n != sp) return vx_fail(ctx, VX_ESHAPE, "%s: dilations has %lld entries", op, (long long)n);
    for (int i = 0; i < sp; i++) {
        g->k[lead + i] = ks[i];
        if (st) g->s[lead + i] = st[i];
        if (dl) g->d[lead + i] = dl[i];
    }
    for (int i = 0; i < 3; i++)
        if (g->k[i] < 1 || g->s[i] < 1 || g->d[i] < 1)
            return vx_fail(ctx, VX_ESHAPE, "%s: kernel, strides and dilations must be >= 1", op);
    if (vxk_attr_int(run, "storage_order", 0) != 0) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: storage_order 1", op);
    bool ceil_mode = vxk_attr_int(run, "ceil_mode", 0) != 0;
    const char *ap = vxk_attr_string(run, "auto_pad", "NOTSET");
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        bool up = !strcmp(ap, "SAME_UPPER");
        for (int i = lead; i < 3; i++) {
            g->out[i] = (g->in[i] + g->s[i] - 1) / g->s[i];
            int64_t total = (g->out[i] - 1) * g->s[i] + (g->k[i] - 1) * g->d[i] + 1 - g->in[i];
            if (total < 0) total = 0;
            g->pb[i] = up ? total / 2 : total - total / 2;
            g->pe[i] = total - g->pb[i];
        }
    } else if (!strcmp(ap, "VALID") || !strcmp(ap, "NOTSET") || !strcmp(ap, "")) {
        if (strcmp(ap, "VALID")) {
            const int64_t *pads = vxk_attr_ints(run, "pads", &n);
            if (pads && n != 2 * sp) return vx_fail(ctx, VX_ESHAPE, "%s: pads has %lld entries", op, (long long)n);
            for (int i = 0; pads && i < sp; i++) {
                g->pb[lead + i] = pads[i];
                g->pe[lead + i] = pads[sp + i];
            }
        }
        for (int i = 0; i < 3; i++)
            if (g->pb[i] < 0 || g->pe[i] < 0) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: negative pads", op);
        for (int i = lead; i < 3; i++)
            g->out[i] = pool_out(g->in[i], g->pb[i], g->pe[i], g->k[i], g->s[i], g->d[i], ceil_mode);
    } else {
        return vx_fail(ctx, VX_EUNSUPPORTED, "%s: auto_pad %s", op, ap);
    }
    for (int i = 0; i < lead; i++) g->out[i] = 1;
    return VX_OK;
}

static void pool_out_dims(const pool_geom *g, int64_t *yd) {
    yd[0] = g->N;
    yd[1] = g->C;
    for (int i = 0; i < g->sp; i++) yd[2 + i] = g->out[3 - g->sp + i];
}

static __device__ __forceinline__ int64_t pool_plane_in(const pool_geom &g) { return g.in[0] * g.in[1] * g.in[2]; }
static __device__ __forceinline__ int64_t pool_plane_out(const pool_geom &g) { return g.out[0] * g.out[1] * g.out[2]; }

/* Output element i: its plane nc and its window's position o[3]. */
static __device__ __forceinline__ int64_t pool_unravel_out(const pool_geom &g, int64_t i, int64_t *o) {
    o[2] = i % g.out[2];
    i /= g.out[2];
    o[1] = i % g.out[1];
    i /= g.out[1];
    o[0] = i % g.out[0];
    return i / g.out[0];
}

/* Input element i: its plane nc and its cell q[3]. */
static __device__ __forceinline__ int64_t pool_unravel_in(const pool_geom &g, int64_t i, int64_t *q) {
    q[2] = i % g.in[2];
    i /= g.in[2];
    q[1] = i % g.in[1];
    i /= g.in[1];
    q[0] = i % g.in[0];
    return i / g.in[0];
}

/* The sum over window o's cells inside X of term(the cell's offset in its
 * plane): the forward of the averaging pools. */
template <typename Term>
static __device__ __forceinline__ float pool_window_sum(const pool_geom &g, const int64_t *o, Term term) {
    float acc = 0.f;
    for (int64_t a = 0; a < g.k[0]; a++) {
        int64_t z = o[0] * g.s[0] - g.pb[0] + a * g.d[0];
        if (z < 0 || z >= g.in[0]) continue;
        for (int64_t b = 0; b < g.k[1]; b++) {
            int64_t h = o[1] * g.s[1] - g.pb[1] + b * g.d[1];
            if (h < 0 || h >= g.in[1]) continue;
            for (int64_t c = 0; c < g.k[2]; c++) {
                int64_t w = o[2] * g.s[2] - g.pb[2] + c * g.d[2];
                if (w >= 0 && w < g.in[2]) acc += term((z * g.in[1] + h) * g.in[2] + w);
            }
        }
    }
    return acc;
}

/* The sum over the windows that hold input cell q of term(the window's
 * position o[3]): the backward gathers. */
template <typename Term>
static __device__ __forceinline__ float pool_gather(const pool_geom &g, const int64_t *q, Term term) {
    float acc = 0.f;
    int64_t o[3];
    for (int64_t a = 0; a < g.k[0]; a++) {
        if ((o[0] = vxk_window_of(q[0], g.pb[0], a, g.d[0], g.s[0], g.out[0])) < 0) continue;
        for (int64_t b = 0; b < g.k[1]; b++) {
            if ((o[1] = vxk_window_of(q[1], g.pb[1], b, g.d[1], g.s[1], g.out[1])) < 0) continue;
            for (int64_t c = 0; c < g.k[2]; c++) {
                if ((o[2] = vxk_window_of(q[2], g.pb[2], c, g.d[2], g.s[2], g.out[2])) < 0) continue;
                acc += term(o);
            }
        }
    }
    return acc;
}

template <typename T> static __global__ void maxpool_kernel(T *y, int64_t *idx, const T *x, pool_geom g) {
    int64_t total = g.N * g.C * pool_plane_out(g), plane = pool_plane_in(g);
    VXK_LOOP(i, total) {
        int64_t o[3], nc = pool_unravel_out(g, i, o);
        const T *xp = x + nc * plane;
        float best = -INFINITY;
        int64_t bi = -1;
        bool nan = false;
        for (int64_t a = 0; a < g.k[0] && !nan; a++) {
            int64_t z = o[0] * g.s[0] - g.pb[0] + a * g.d[0];
            if (z < 0 || z >= g.in[0]) continue;
            for (int64_t b = 0; b < g.k[1] && !nan; b++) {
                int64_t h = o[1] * g.s[1] - g.pb[1] + b * g.d[1];
                if (h < 0 || h >= g.in[1]) continue;
                for (int64_t c = 0; c < g.k[2]; c++) {
                    int64_t w = o[2] * g.s[2] - g.pb[2] + c * g.d[2];
                    if (w < 0 || w >= g.in[2]) continue;
                    int64_t at = (z * g.in[1] + h) * g.in[2] + w;
                    float v = vxk_ld(xp[at]);
                    if (v > best || bi < 0 || v != v) { best = v; bi = at; if (v != v) { nan = true; break; } }
                }
            }
        }
        y[i] = vxk_st<T>(bi < 0 ? 0.f : best);
        idx[i] = bi < 0 ? -1 : nc * plane + bi;
    }
}

template <typename T> static __global__ void maxpool_bwd_kernel(T *dx, const T *dy, const int64_t *idx, int64_t n) {
    VXK_LOOP(i, n) {
        int64_t k = idx[i];
        if (k >= 0) vxk_atomic_add_t(dx + k, vxk_ld(dy[i]));
    }
}

/* The arg-max indices (int64, one per output element): output 1 when the
 * node has it, saved[0] when backward runs, else a workspace of the forward:
 * max_pool2d_with_indices writes them on CUDA even when nothing reads them
 * (layers/pool.c's verify rule counts that workspace). */
static vx_status pool_indices(vx_ctx *ctx, vx_run *run, int rank, const int64_t *yd, int64_t **idx) {
    vx_status st;
    if (vxk_has_out(run, 1)) {
        if ((st = vxk_new_out(ctx, run, 1, VX_I64, rank, yd))) return st;
        run->saved[0] = vx_tensor_retain(run->out[1]);
    } else if (run->training && run->need_grad[0]) {
        if ((st = vxk_new_saved(ctx, run, 0, VX_I64, rank, yd))) return st;
    } else {
        int64_t n = vxk_prod(yd, 0, rank);
        *idx = n ? (int64_t *)vx_workspace(ctx, (size_t)n * sizeof(int64_t)) : NULL;
        return n && !*idx ? vxk_oom(ctx, "MaxPool indices") : VX_OK;
    }
    *idx = (int64_t *)run->saved[0]->data;
    return VX_OK;
}

/* The max over each of g's windows into output 0, and its arg-max into the
 * indices (pool_indices): MaxPool's and GlobalMaxPool's forward. */
template <typename T> static vx_status maxpool_run(vx_ctx *ctx, vx_run *run, const pool_geom &g, const char *what) {
    const vx_tensor *X = run->in[0];
    int64_t yd[5];
    pool_out_dims(&g, yd);
    int64_t *idx = NULL;
    vx_status st;
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, yd)) || (st = pool_indices(ctx, run, X->rank, yd, &idx)))
        return st;
    int64_t total = run->out[0]->numel;
    if (total)
        maxpool_kernel<T><<<vxk_blocks(total), VXK_THREADS, 0, vxk_stream(ctx)>>>((T *)run->out[0]->data, idx,
                                                                                 (const T *)X->data, g);
    st = vxk_check(ctx, what);
    if (!run->saved[0]) vx_free(ctx, idx); /* the workspace: nothing reads the indices */
    return st;
}

template <typename T> static vx_status maxpool_forward_t(vx_ctx *ctx, vx_run *run) {
    pool_geom g;
    vx_status st = pool_geom_make(ctx, run, run->in[0], "MaxPool", &g);
    return st ? st : maxpool_run<T>(ctx, run, g, "MaxPool");
}

static vx_status maxpool_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "MaxPool needs X");
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "MaxPool", maxpool_forward_t<T>(ctx, run));
}

template <typename T> static vx_status maxpool_backward_t(vx_ctx *ctx, vx_run *run) {
    vx_status st = vxk_grad(ctx, run, 0);
    if (st) return st;
    vx_tensor *dX = run->grad_in[0];
    if ((st = vxk_zero(ctx, dX->data, (size_t)dX->numel * sizeof(T)))) return st;
    const vx_tensor *dY = run->grad_out[0], *idx = run->saved[0];
    if (!dY || !idx || dY->numel == 0) return VX_OK;
    maxpool_bwd_kernel<T><<<vxk_blocks(dY->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (T *)dX->data, (const T *)dY->data, (const int64_t *)idx->data, dY->numel);
    return vxk_check(ctx, "MaxPool backward");
}

static vx_status maxpool_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "MaxPool backward", maxpool_backward_t<T>(ctx, run));
}

/* ---- AveragePool ------------------------------------------------------------- */

/* Divisor of window o[3]: the cells inside X, or inside X plus its pads. */
static __device__ __forceinline__ float avg_count(const pool_geom &g, const int64_t *o, bool include_pad) {
    float cnt = 1.f;
    for (int i = 0; i < 3; i++) {
        int64_t start = o[i] * g.s[i] - g.pb[i], c = 0;
        for (int64_t a = 0; a < g.k[i]; a++) {
            int64_t p = start + a * g.d[i];
            if (include_pad ? (p < g.in[i] + g.pe[i]) : (p >= 0 && p < g.in[i])) c++;
        }
        cnt *= (float)c;
    }
    /* include_pad counts cells in the padded extent only (the ceil_mode overhang is excluded, as PyTorch) */
    return cnt;
}

template <typename T> static __global__ void avgpool_kernel(T *y, const T *x, pool_geom g, bool include_pad) {
    int64_t total = g.N * g.C * pool_plane_out(g), plane = pool_plane_in(g);
    VXK_LOOP(i, total) {
        int64_t o[3], nc = pool_unravel_out(g, i, o);
        const T *xp = x + nc * plane;
        float acc = pool_window_sum(g, o, [&](int64_t at) { return vxk_ld(xp[at]); });
        float cnt = avg_count(g, o, include_pad);
        y[i] = vxk_st<T>(cnt > 0.f ? acc / cnt : 0.f);
    }
}

/* Each input cell gathers from the windows that contain it. */
template <typename T> static __global__ void avgpool_bwd_kernel(T *dx, const T *dy, pool_geom g, bool include_pad) {
    int64_t total = g.N * g.C * pool_plane_in(g), oplane = pool_plane_out(g);
    VXK_LOOP(i, total) {
        int64_t q[3], nc = pool_unravel_in(g, i, q);
        const T *dyp = dy + nc * oplane;
        float acc = pool_gather(g, q, [&](const int64_t *o) {
            float cnt = avg_count(g, o, include_pad);
            return cnt > 0.f ? vxk_ld(dyp[(o[0] * g.out[1] + o[1]) * g.out[2] + o[2]]) / cnt : 0.f;
        });
        dx[i] = vxk_st<T>(acc);
    }
}

template <typename T> static vx_status avgpool_forward_t(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0];
    pool_geom g;
    vx_status st = pool_geom_make(ctx, run, X, "AveragePool", &g);
    if (st) return st;
    int64_t yd[5];
    pool_out_dims(&g, yd);
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, yd))) return st;
    int64_t total = run->out[0]->numel;
    if (total == 0) return VX_OK;
    bool incl = vxk_attr_int(run, "count_include_pad", 0) != 0;
    avgpool_kernel<T><<<vxk_blocks(total), VXK_THREADS, 0, vxk_stream(ctx)>>>((T *)run->out[0]->data,
                                                                               (const T *)X->data, g, incl);
    return vxk_check(ctx, "AveragePool");
}

static vx_status avgpool_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "AveragePool needs X");
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "AveragePool", avgpool_forward_t<T>(ctx, run));
}

template <typename T> static vx_status avgpool_backward_t(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0], *dY = run->grad_out[0];
    pool_geom g;
    vx_status st = pool_geom_make(ctx, run, X, "AveragePool", &g);
    if (st) return st;
    if ((st = vxk_grad(ctx, run, 0))) return st;
    vx_tensor *dX = run->grad_in[0];
    if (!dY || dY->numel == 0) return vxk_zero(ctx, dX->data, (size_t)dX->numel * sizeof(T));
    if (dX->numel == 0) return VX_OK;
    bool incl = vxk_attr_int(run, "count_include_pad", 0) != 0;
    avgpool_bwd_kernel<T><<<vxk_blocks(dX->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>((T *)dX->data,
                                                                                       (const T *)dY->data, g, incl);
    return vxk_check(ctx, "AveragePool backward");
}

static vx_status avgpool_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "AveragePool backward", avgpool_backward_t<T>(ctx, run));
}

/* ---- GlobalMaxPool, LpPool, GlobalLpPool ------------------------------------------- */

/* The geometry of a global pool: one window covering each (n, c) plane. */
static vx_status global_geom_make(vx_ctx *ctx, const vx_tensor *X, const char *op, pool_geom *g) {
    memset(g, 0, sizeof *g);
    if (X->rank < 3 || X->rank > 5)
        return vx_fail(ctx, VX_EUNSUPPORTED, "%s: only 1-D, 2-D and 3-D spatial dims (X rank %d)", op, X->rank);
    int sp = X->rank - 2, lead = 3 - sp;
    g->sp = sp;
    g->N = X->dims[0];
    g->C = X->dims[1];
    for (int i = 0; i < 3; i++) {
        g->in[i] = g->k[i] = i < lead ? 1 : X->dims[2 + i - lead];
        g->s[i] = g->d[i] = g->out[i] = 1;
    }
    return VX_OK;
}

/* adaptive_max_pool: the arg-max indices (saved[0], int64 flat over X) and X
 * (autograd keeps self), as MaxPool; backward is MaxPool's scatter. */
template <typename T> static vx_status gmp_forward_t(vx_ctx *ctx, vx_run *run) {
    pool_geom g;
    vx_status st = global_geom_make(ctx, run->in[0], "GlobalMaxPool", &g);
    return st ? st : maxpool_run<T>(ctx, run, g, "GlobalMaxPool");
}

static vx_status gmp_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "GlobalMaxPool needs X");
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "GlobalMaxPool", gmp_forward_t<T>(ctx, run));
}

/* y = (sum over the window of |x|^p)^(1/p); pads add nothing. */
template <typename T> static __global__ void lppool_kernel(T *y, const T *x, pool_geom g, float p) {
    int64_t total = g.N * g.C * pool_plane_out(g), plane = pool_plane_in(g);
    VXK_LOOP(i, total) {
        int64_t o[3], nc = pool_unravel_out(g, i, o);
        const T *xp = x + nc * plane;
        float acc = pool_window_sum(g, o, [&](int64_t at) {
            float v = fabsf(vxk_ld(xp[at]));
            return p == 1.f ? v : p == 2.f ? v * v : powf(v, p);
        });
        y[i] = vxk_st<T>(p == 1.f ? acc : p == 2.f ? sqrtf(acc) : powf(acc, 1.f / p));
    }
}

/* dx = sum over the windows holding x of dy * sign(x) |x|^(p-1) / y^(p-1). */
template <typename T>
static __global__ void lppool_bwd_kernel(T *dx, const T *dy, const T *x, const T *y, pool_geom g, float p) {
    int64_t total = g.N * g.C * pool_plane_in(g), oplane = pool_plane_out(g);
    VXK_LOOP(i, total) {
        int64_t q[3], nc = pool_unravel_in(g, i, q);
        const T *dyp = dy + nc * oplane, *yp = y + nc * oplane;
        float v = vxk_ld(x[i]), sgn = v > 0.f ? 1.f : v < 0.f ? -1.f : 0.f, xv = p == 1.f ? 1.f : powf(fabsf(v), p - 1.f);
        float acc = pool_gather(g, q, [&](const int64_t *o) {
            int64_t at = (o[0] * g.out[1] + o[1]) * g.out[2] + o[2];
            float yv = vxk_ld(yp[at]), yd = p == 1.f ? 1.f : powf(yv, p - 1.f);
            return yd > 0.f ? vxk_ld(dyp[at]) / yd : 0.f;
        });
        dx[i] = vxk_st<T>(acc * sgn * xv);
    }
}

template <typename T>
static vx_status lppool_run(vx_ctx *ctx, void *y, const void *x, const pool_geom &g, float p, int64_t total) {
    lppool_kernel<T><<<vxk_blocks(total), VXK_THREADS, 0, vxk_stream(ctx)>>>((T *)y, (const T *)x, g, p);
    return VX_OK;
}

template <typename T> static vx_status lppool_bwd_run(vx_ctx *ctx, vx_run *run, const pool_geom &g, float p) {
    vx_tensor *dX = run->grad_in[0];
    lppool_bwd_kernel<T><<<vxk_blocks(dX->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (T *)dX->data, (const T *)run->grad_out[0]->data, (const T *)run->in[0]->data, (const T *)run->out[0]->data, g, p);
    return VX_OK;
}

static vx_status lp_geom(vx_ctx *ctx, vx_run *run, bool global, pool_geom *g, float *p) {
    const char *op = global ? "GlobalLpPool" : "LpPool";
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "%s needs X", op);
    const vx_tensor *X = run->in[0];
    if (!vx_dtype_is_float(X->dtype)) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: a floating X only", op);
    int64_t pi = vxk_attr_int(run, "p", 2);
    if (pi < 1) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: p %lld (only p >= 1)", op, (long long)pi);
    *p = (float)pi;
    return global ? global_geom_make(ctx, X, op, g) : pool_geom_make(ctx, run, X, op, g);
}

/* A fused kernel: backward keeps X and Y (layers/pool.c's --kernels verify
 * rule), not the pow / avg_pool / abs / relu intermediates of F.lp_pool2d. */
static vx_status lppool_forward_common(vx_ctx *ctx, vx_run *run, bool global) {
    pool_geom g;
    float p;
    vx_status st = lp_geom(ctx, run, global, &g, &p);
    if (st) return st;
    const vx_tensor *X = run->in[0];
    int64_t yd[5];
    pool_out_dims(&g, yd);
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, yd))) return st;
    int64_t total = run->out[0]->numel;
    if (total == 0) return VX_OK;
    st = [&]() -> vx_status {
        VXK_FLOAT_DISPATCH(ctx, X->dtype, "LpPool", lppool_run<T>(ctx, run->out[0]->data, X->data, g, p, total));
    }();
    return st ? st : vxk_check(ctx, global ? "GlobalLpPool" : "LpPool");
}

static vx_status lppool_backward_common(vx_ctx *ctx, vx_run *run, bool global) {
    if (!run->need_grad[0]) return VX_OK;
    pool_geom g;
    float p;
    vx_status st = lp_geom(ctx, run, global, &g, &p);
    if (st) return st;
    if ((st = vxk_grad(ctx, run, 0))) return st;
    vx_tensor *dX = run->grad_in[0];
    const vx_tensor *dY = run->grad_out[0];
    if (!dY || dY->numel == 0) return vxk_zero(ctx, dX->data, (size_t)dX->numel * vx_dtype_size(dX->dtype));
    if (dX->numel == 0) return VX_OK;
    st = [&]() -> vx_status { VXK_FLOAT_DISPATCH(ctx, dX->dtype, "LpPool backward", lppool_bwd_run<T>(ctx, run, g, p)); }();
    if (st) return st;
    return vxk_check(ctx, global ? "GlobalLpPool backward" : "LpPool backward");
}

static vx_status lppool_forward(vx_ctx *ctx, vx_run *run) { return lppool_forward_common(ctx, run, false); }
static vx_status lppool_backward(vx_ctx *ctx, vx_run *run) { return lppool_backward_common(ctx, run, false); }
static vx_status glppool_forward(vx_ctx *ctx, vx_run *run) { return lppool_forward_common(ctx, run, true); }
static vx_status glppool_backward(vx_ctx *ctx, vx_run *run) { return lppool_backward_common(ctx, run, true); }

/* ---- reductions: GlobalAveragePool, ReduceMean, ReduceSum ------------------------ */

template <typename T>
static __global__ void bcast_back_kernel(T *dx, const T *dy, vxk_bcast b, int64_t n, float scale) {
    VXK_LOOP(i, n) dx[i] = vxk_st<T>(scale * vxk_ld(dy[vxk_bcast_off(b, i)]));
}

/* Forward of a reduction of X over the axes marked in red[] (by mean when
 * mean), output shape od (rank orank). */
template <typename T>
static vx_status reduce_fwd_t(vx_ctx *ctx, vx_run *run, const bool *red, bool mean, int orank, const int64_t *od) {
    const vx_tensor *X = run->in[0];
    vx_status st = vxk_new_out(ctx, run, 0, X->dtype, orank, od);
    if (st) return st;
    bool keep[VX_MAX_RANK];
    int64_t cnt = 1;
    for (int i = 0; i < X->rank; i++) {
        keep[i] = !red[i];
        if (red[i]) cnt *= X->dims[i];
    }
    vxk_reduce r;
    vxk_reduce_make(&r, X->rank, X->dims, keep);
    float scale = mean ? (cnt > 0 ? 1.f / (float)cnt : NAN) : 1.f;
    return vxk_reduce_run(ctx, (T *)run->out[0]->data, (const T *)X->data, &r, scale, 0.f);
}

static vx_status reduce_fwd(vx_ctx *ctx, vx_run *run, const bool *red, bool mean, int orank, const int64_t *od) {
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, run->node->op_type, reduce_fwd_t<T>(ctx, run, red, mean, orank, od));
}

/* dX = scale * dY broadcast back over the reduced axes. */
template <typename T> static vx_status reduce_bwd_t(vx_ctx *ctx, vx_run *run, const bool *red, bool mean) {
    const vx_tensor *X = run->in[0], *dY = run->grad_out[0];
    vx_status st = vxk_grad(ctx, run, 0);
    if (st) return st;
    vx_tensor *dX = run->grad_in[0];
    T *dx = (T *)dX->data;
    if (!dY) return vxk_zero(ctx, dx, (size_t)dX->numel * sizeof(T));
    if (dX->numel == 0) return VX_OK;
    int64_t kd[VX_MAX_RANK], cnt = 1;
    for (int i = 0; i < X->rank; i++) {
        kd[i] = red[i] ? 1 : X->dims[i];
        if (red[i]) cnt *= X->dims[i];
    }
    vxk_bcast b;
    vxk_bcast_make(&b, X->rank, X->dims, X->rank, kd);
    bcast_back_kernel<T><<<vxk_blocks(dX->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        dx, (const T *)dY->data, b, dX->numel, mean ? 1.f / (float)cnt : 1.f);
    return vxk_check(ctx, "reduction backward");
}

static vx_status reduce_bwd(vx_ctx *ctx, vx_run *run, const bool *red, bool mean) {
    if (!run->need_grad[0]) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "reduction backward", reduce_bwd_t<T>(ctx, run, red, mean));
}

static void gap_axes(const vx_tensor *X, bool *red, int64_t *od) {
    for (int i = 0; i < X->rank; i++) {
        red[i] = i >= 2;
        od[i] = i >= 2 ? 1 : X->dims[i];
    }
}

static vx_status gap_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "GlobalAveragePool needs X");
    const vx_tensor *X = run->in[0];
    if (X->rank < 2) return vx_fail(ctx, VX_ESHAPE, "GlobalAveragePool: X rank %d", X->rank);
    bool red[VX_MAX_RANK];
    int64_t od[VX_MAX_RANK];
    gap_axes(X, red, od);
    return reduce_fwd(ctx, run, red, true, X->rank, od);
}

static vx_status gap_backward(vx_ctx *ctx, vx_run *run) {
    bool red[VX_MAX_RANK];
    int64_t od[VX_MAX_RANK];
    gap_axes(run->in[0], red, od);
    return reduce_bwd(ctx, run, red, true);
}

static vx_status reduce_forward_common(vx_ctx *ctx, vx_run *run, const char *op, bool mean) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "%s needs X", op);
    bool red[VX_MAX_RANK];
    int64_t od[VX_MAX_RANK];
    int orank;
    vx_status st = vxk_reduce_axes(ctx, run, op, red, &orank, od);
    if (st) return st;
    return reduce_fwd(ctx, run, red, mean, orank, od);
}

static vx_status reduce_backward_common(vx_ctx *ctx, vx_run *run, const char *op, bool mean) {
    bool red[VX_MAX_RANK];
    int64_t od[VX_MAX_RANK];
    int orank;
    vx_status st = vxk_reduce_axes(ctx, run, op, red, &orank, od);
    if (st) return st;
    return reduce_bwd(ctx, run, red, mean);
}

static vx_status reducemean_forward(vx_ctx *ctx, vx_run *run) { return reduce_forward_common(ctx, run, "ReduceMean", true); }
static vx_status reducemean_backward(vx_ctx *ctx, vx_run *run) { return reduce_backward_common(ctx, run, "ReduceMean", true); }
static vx_status reducesum_forward(vx_ctx *ctx, vx_run *run) { return reduce_forward_common(ctx, run, "ReduceSum", false); }
static vx_status reducesum_backward(vx_ctx *ctx, vx_run *run) { return reduce_backward_common(ctx, run, "ReduceSum", false); }

extern "C" {
const vx_op vx_ops_pool[] = {
    {"MaxPool", maxpool_forward, maxpool_backward, VX_SLOT(0), 0, false, 0, NULL, 0, VX_HALF},
    {"AveragePool", avgpool_forward, avgpool_backward, VX_SLOT(0), 0, false, 0, NULL, 0, VX_HALF},
    {"GlobalAveragePool", gap_forward, gap_backward, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"GlobalMaxPool", gmp_forward, maxpool_backward, VX_SLOT(0), 0, false, 0, NULL, 0, VX_HALF},
    {"LpPool", lppool_forward, lppool_backward, VX_SLOT(0), VX_SLOT(0), false, 0, NULL, 0, VX_HALF},
    {"GlobalLpPool", glppool_forward, glppool_backward, VX_SLOT(0), VX_SLOT(0), false, 0, NULL, 0, VX_HALF},
    {"ReduceMean", reducemean_forward, reducemean_backward, VX_SLOT(1), 0, false, VX_SLOT(1), NULL, 0, VX_HALF},
    {"ReduceSum", reducesum_forward, reducesum_backward, VX_SLOT(1), 0, false, VX_SLOT(1), NULL, 0, VX_HALF},
};
const size_t vx_ops_pool_count = sizeof vx_ops_pool / sizeof vx_ops_pool[0];
}
