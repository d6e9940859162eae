/*
 * ops_pool.cu: MaxPool, AveragePool (1-D and 2-D), GlobalAveragePool,
 * ReduceMean and ReduceSum, forward and backward.
 *
 * MaxPool: kernel_shape, strides, pads, dilations, ceil_mode, auto_pad; the
 *   arg-max (int64, flat over X, as ONNX's Indices output with
 *   storage_order 0) is saved[0], the Indices output itself when present.
 *   saves X (max_pool2d_with_indices_backward reads self) and the indices.
 * AveragePool: count_include_pad; saves X (avg_pool2d_backward reads self).
 * GlobalAveragePool: the mean over the spatial dims; keeps nothing (PyTorch
 *   runs adaptive_avg_pool2d(x, 1) as mean).
 * ReduceMean / ReduceSum: axes from the attribute or input 1 (read on the
 *   host), keepdims, noop_with_empty_axes; keep only the axes (a host
 *   constant; backward needs X's shape).
 */
#include "ops_common.cuh"

typedef struct pool_geom {
    int sp;
    int64_t N, C, H, W, kh, kw, sh, sw, dh, dw, ph, pw, Ho, Wo;
    int64_t peh, pew; /* end pads */
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
    if (X->rank != 3 && X->rank != 4) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: only 1-D and 2-D pooling (X rank %d)", op, X->rank);
    int sp = X->rank - 2;
    g->sp = sp;
    g->N = X->dims[0];
    g->C = X->dims[1];
    g->H = sp == 2 ? X->dims[2] : 1;
    g->W = X->dims[X->rank - 1];
    int64_t n;
    const int64_t *ks = vxk_attr_ints(run, "kernel_shape", &n);
    if (!ks || n != sp) return vx_fail(ctx, VX_ESHAPE, "%s: kernel_shape must have %d entries", op, sp);
    g->kh = sp == 2 ? ks[0] : 1;
    g->kw = ks[sp - 1];
    const int64_t *st = vxk_attr_ints(run, "strides", &n);
    if (st && n != sp) return vx_fail(ctx, VX_ESHAPE, "%s: strides has %lld entries", op, (long long)n);
    g->sh = st && sp == 2 ? st[0] : 1;
    g->sw = st ? st[sp - 1] : 1;
    const int64_t *dl = vxk_attr_ints(run, "dilations", &n);
    if (dl && n != sp) return vx_fail(ctx, VX_ESHAPE, "%s: dilations has %lld entries", op, (long long)n);
    g->dh = dl && sp == 2 ? dl[0] : 1;
    g->dw = dl ? dl[sp - 1] : 1;
    if (g->kh < 1 || g->kw < 1 || g->sh < 1 || g->sw < 1 || g->dh < 1 || g->dw < 1)
        return vx_fail(ctx, VX_ESHAPE, "%s: kernel, strides and dilations must be >= 1", op);
    if (vxk_attr_int(run, "storage_order", 0) != 0) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: storage_order 1", op);
    bool ceil_mode = vxk_attr_int(run, "ceil_mode", 0) != 0;
    const char *ap = vxk_attr_string(run, "auto_pad", "NOTSET");
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        bool up = !strcmp(ap, "SAME_UPPER");
        int64_t in[2] = {g->H, g->W}, k[2] = {g->kh, g->kw}, s[2] = {g->sh, g->sw}, d[2] = {g->dh, g->dw}, o[2], p[2];
        for (int i = 0; i < 2; i++) {
            o[i] = (in[i] + s[i] - 1) / s[i];
            int64_t total = (o[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in[i];
            if (total < 0) total = 0;
            p[i] = up ? total / 2 : total - total / 2;
        }
        g->Ho = o[0]; g->Wo = o[1]; g->ph = p[0]; g->pw = p[1];
        g->peh = (o[0] - 1) * s[0] + (k[0] - 1) * d[0] + 1 - in[0] - p[0];
        g->pew = (o[1] - 1) * s[1] + (k[1] - 1) * d[1] + 1 - in[1] - p[1];
        if (g->peh < 0) g->peh = 0;
        if (g->pew < 0) g->pew = 0;
    } else if (!strcmp(ap, "VALID") || !strcmp(ap, "NOTSET") || !strcmp(ap, "")) {
        int64_t pe_h = 0, pe_w = 0;
        if (strcmp(ap, "VALID")) {
            const int64_t *pads = vxk_attr_ints(run, "pads", &n);
            if (pads && n != 2 * sp) return vx_fail(ctx, VX_ESHAPE, "%s: pads has %lld entries", op, (long long)n);
            if (pads) {
                g->ph = sp == 2 ? pads[0] : 0;
                g->pw = pads[sp - 1];
                pe_h = sp == 2 ? pads[2] : 0;
                pe_w = pads[2 * sp - 1];
            }
        }
        if (g->ph < 0 || g->pw < 0 || pe_h < 0 || pe_w < 0) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: negative pads", op);
        g->peh = pe_h;
        g->pew = pe_w;
        g->Ho = pool_out(g->H, g->ph, pe_h, g->kh, g->sh, g->dh, ceil_mode);
        g->Wo = pool_out(g->W, g->pw, pe_w, g->kw, g->sw, g->dw, ceil_mode);
    } else {
        return vx_fail(ctx, VX_EUNSUPPORTED, "%s: auto_pad %s", op, ap);
    }
    return VX_OK;
}

static void pool_out_dims(const pool_geom *g, int64_t *yd) {
    yd[0] = g->N;
    yd[1] = g->C;
    if (g->sp == 2) { yd[2] = g->Ho; yd[3] = g->Wo; }
    else yd[2] = g->Wo;
}

static __global__ void maxpool_kernel(float *y, int64_t *idx, const float *x, pool_geom g) {
    int64_t total = g.N * g.C * g.Ho * g.Wo;
    VXK_LOOP(i, total) {
        int64_t ow = i % g.Wo, t = i / g.Wo;
        int64_t oh = t % g.Ho, nc = t / g.Ho;
        const float *xp = x + nc * g.H * g.W;
        float best = -INFINITY;
        int64_t bi = -1;
        for (int64_t a = 0; a < g.kh; a++) {
            int64_t h = oh * g.sh - g.ph + a * g.dh;
            if (h < 0 || h >= g.H) continue;
            for (int64_t b = 0; b < g.kw; b++) {
                int64_t w = ow * g.sw - g.pw + b * g.dw;
                if (w < 0 || w >= g.W) continue;
                float v = xp[h * g.W + w];
                if (v > best || bi < 0 || v != v) { best = v; bi = h * g.W + w; if (v != v) break; }
            }
        }
        y[i] = bi < 0 ? 0.f : best;
        idx[i] = bi < 0 ? -1 : nc * g.H * g.W + bi;
    }
}

static __global__ void maxpool_bwd_kernel(float *dx, const float *dy, const int64_t *idx, int64_t n) {
    VXK_LOOP(i, n) {
        int64_t k = idx[i];
        if (k >= 0) atomicAdd(dx + k, dy[i]);
    }
}

static vx_status maxpool_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "MaxPool needs X");
    const vx_tensor *X = run->in[0];
    if (X->dtype != VX_F32) return vx_fail(ctx, VX_EUNSUPPORTED, "MaxPool: float32 only");
    pool_geom g;
    vx_status st = pool_geom_make(ctx, run, X, "MaxPool", &g);
    if (st) return st;
    int64_t yd[4];
    pool_out_dims(&g, yd);
    if ((st = vxk_new_out(ctx, run, 0, VX_F32, X->rank, yd))) return st;
    if (vxk_has_out(run, 1)) {
        if ((st = vxk_new_out(ctx, run, 1, VX_I64, X->rank, yd))) return st;
        run->saved[0] = vx_tensor_retain(run->out[1]);
    } else if ((st = vxk_new_saved(ctx, run, 0, VX_I64, X->rank, yd))) {
        return st;
    }
    int64_t total = run->out[0]->numel;
    if (total == 0) return VX_OK;
    maxpool_kernel<<<vxk_blocks(total), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (float *)run->out[0]->data, (int64_t *)run->saved[0]->data, (const float *)X->data, g);
    return vxk_check(ctx, "MaxPool");
}

static vx_status maxpool_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    vx_status st = vxk_grad(ctx, run, 0);
    if (st) return st;
    vx_tensor *dX = run->grad_in[0];
    if ((st = vxk_zero(ctx, dX->data, (size_t)dX->numel * sizeof(float)))) return st;
    const vx_tensor *dY = run->grad_out[0], *idx = run->saved[0];
    if (!dY || !idx || dY->numel == 0) return VX_OK;
    maxpool_bwd_kernel<<<vxk_blocks(dY->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (float *)dX->data, (const float *)dY->data, (const int64_t *)idx->data, dY->numel);
    return vxk_check(ctx, "MaxPool backward");
}

/* ---- AveragePool ------------------------------------------------------------- */

/* Divisor of window (oh, ow): the cells inside X, or inside X plus its pads. */
static __device__ __forceinline__ float avg_count(const pool_geom &g, int64_t oh, int64_t ow, bool include_pad) {
    int64_t hs = oh * g.sh - g.ph, ws = ow * g.sw - g.pw;
    int64_t ch = 0, cw = 0;
    for (int64_t a = 0; a < g.kh; a++) {
        int64_t h = hs + a * g.dh;
        if (include_pad ? (h < g.H + g.peh) : (h >= 0 && h < g.H)) ch++;
    }
    for (int64_t b = 0; b < g.kw; b++) {
        int64_t w = ws + b * g.dw;
        if (include_pad ? (w < g.W + g.pew) : (w >= 0 && w < g.W)) cw++;
    }
    /* include_pad counts cells in the padded extent only (the ceil_mode overhang is excluded, as PyTorch) */
    return (float)(ch * cw);
}

static __global__ void avgpool_kernel(float *y, const float *x, pool_geom g, bool include_pad) {
    int64_t total = g.N * g.C * g.Ho * g.Wo;
    VXK_LOOP(i, total) {
        int64_t ow = i % g.Wo, t = i / g.Wo;
        int64_t oh = t % g.Ho, nc = t / g.Ho;
        const float *xp = x + nc * g.H * g.W;
        float acc = 0.f;
        for (int64_t a = 0; a < g.kh; a++) {
            int64_t h = oh * g.sh - g.ph + a * g.dh;
            if (h < 0 || h >= g.H) continue;
            for (int64_t b = 0; b < g.kw; b++) {
                int64_t w = ow * g.sw - g.pw + b * g.dw;
                if (w >= 0 && w < g.W) acc += xp[h * g.W + w];
            }
        }
        float cnt = avg_count(g, oh, ow, include_pad);
        y[i] = cnt > 0.f ? acc / cnt : 0.f;
    }
}

/* Each input cell gathers from the windows that contain it. */
static __global__ void avgpool_bwd_kernel(float *dx, const float *dy, pool_geom g, bool include_pad) {
    int64_t total = g.N * g.C * g.H * g.W;
    VXK_LOOP(i, total) {
        int64_t w = i % g.W, t = i / g.W;
        int64_t h = t % g.H, nc = t / g.H;
        const float *dyp = dy + nc * g.Ho * g.Wo;
        float acc = 0.f;
        for (int64_t a = 0; a < g.kh; a++) {
            int64_t oh = vxk_window_of(h, g.ph, a, g.dh, g.sh, g.Ho);
            if (oh < 0) continue;
            for (int64_t b = 0; b < g.kw; b++) {
                int64_t ow = vxk_window_of(w, g.pw, b, g.dw, g.sw, g.Wo);
                if (ow < 0) continue;
                float cnt = avg_count(g, oh, ow, include_pad);
                if (cnt > 0.f) acc += dyp[oh * g.Wo + ow] / cnt;
            }
        }
        dx[i] = acc;
    }
}

static vx_status avgpool_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "AveragePool needs X");
    const vx_tensor *X = run->in[0];
    if (X->dtype != VX_F32) return vx_fail(ctx, VX_EUNSUPPORTED, "AveragePool: float32 only");
    pool_geom g;
    vx_status st = pool_geom_make(ctx, run, X, "AveragePool", &g);
    if (st) return st;
    int64_t yd[4];
    pool_out_dims(&g, yd);
    if ((st = vxk_new_out(ctx, run, 0, VX_F32, X->rank, yd))) return st;
    int64_t total = run->out[0]->numel;
    if (total == 0) return VX_OK;
    bool incl = vxk_attr_int(run, "count_include_pad", 0) != 0;
    avgpool_kernel<<<vxk_blocks(total), VXK_THREADS, 0, vxk_stream(ctx)>>>((float *)run->out[0]->data,
                                                                            (const float *)X->data, g, incl);
    return vxk_check(ctx, "AveragePool");
}

static vx_status avgpool_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0], *dY = run->grad_out[0];
    pool_geom g;
    vx_status st = pool_geom_make(ctx, run, X, "AveragePool", &g);
    if (st) return st;
    if ((st = vxk_grad(ctx, run, 0))) return st;
    vx_tensor *dX = run->grad_in[0];
    if (!dY || dY->numel == 0) return vxk_zero(ctx, dX->data, (size_t)dX->numel * sizeof(float));
    if (dX->numel == 0) return VX_OK;
    bool incl = vxk_attr_int(run, "count_include_pad", 0) != 0;
    avgpool_bwd_kernel<<<vxk_blocks(dX->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>((float *)dX->data,
                                                                                    (const float *)dY->data, g, incl);
    return vxk_check(ctx, "AveragePool backward");
}

/* ---- reductions: GlobalAveragePool, ReduceMean, ReduceSum ------------------------ */

static __global__ void bcast_back_kernel(float *dx, const float *dy, vxk_bcast b, int64_t n, float scale) {
    VXK_LOOP(i, n) dx[i] = scale * dy[vxk_bcast_off(b, i)];
}

/* Forward of a reduction of X over the axes marked in red[] (by mean when
 * mean), output shape od (rank orank). */
static vx_status reduce_fwd(vx_ctx *ctx, vx_run *run, const bool *red, bool mean, int orank, const int64_t *od) {
    const vx_tensor *X = run->in[0];
    vx_status st = vxk_new_out(ctx, run, 0, VX_F32, orank, od);
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
    return vxk_reduce_run(ctx, (float *)run->out[0]->data, (const float *)X->data, &r, scale, 0.f);
}

/* dX = scale * dY broadcast back over the reduced axes. */
static vx_status reduce_bwd(vx_ctx *ctx, vx_run *run, const bool *red, bool mean) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0], *dY = run->grad_out[0];
    vx_status st = vxk_grad(ctx, run, 0);
    if (st) return st;
    vx_tensor *dX = run->grad_in[0];
    if (dX->numel == 0) return VX_OK;
    if (!dY) return vxk_zero(ctx, dX->data, (size_t)dX->numel * sizeof(float));
    int64_t kd[VX_MAX_RANK], cnt = 1;
    for (int i = 0; i < X->rank; i++) {
        kd[i] = red[i] ? 1 : X->dims[i];
        if (red[i]) cnt *= X->dims[i];
    }
    vxk_bcast b;
    vxk_bcast_make(&b, X->rank, X->dims, X->rank, kd);
    bcast_back_kernel<<<vxk_blocks(dX->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (float *)dX->data, (const float *)dY->data, b, dX->numel, mean ? 1.f / (float)cnt : 1.f);
    return vxk_check(ctx, "reduction backward");
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
    if (X->dtype != VX_F32) return vx_fail(ctx, VX_EUNSUPPORTED, "GlobalAveragePool: float32 only");
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

/* Reduced axes of ReduceMean / ReduceSum; *noop when nothing is reduced. */
static vx_status reduce_axes(vx_ctx *ctx, vx_run *run, const char *op, bool *red, int *orank, int64_t *od) {
    const vx_tensor *X = run->in[0];
    int64_t buf[VX_MAX_RANK * 2];
    const int64_t *axes = NULL;
    int64_t n = 0;
    bool from_input = vxk_has_in(run, 1);
    if (from_input) {
        n = vxk_host_i64(ctx, run->in[1], buf, VX_MAX_RANK * 2);
        if (n < 0) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: axes must be a small int64 tensor", op);
        axes = buf;
    } else {
        axes = vxk_attr_ints(run, "axes", &n);
    }
    bool keepdims = vxk_attr_int(run, "keepdims", 1) != 0;
    bool noop_empty = vxk_attr_int(run, "noop_with_empty_axes", 0) != 0;
    for (int i = 0; i < X->rank; i++) red[i] = n == 0 && !noop_empty;
    for (int64_t k = 0; k < n; k++) {
        int a = vxk_axis(axes[k], X->rank);
        if (a < 0) return vx_fail(ctx, VX_ESHAPE, "%s: axis %lld out of range", op, (long long)axes[k]);
        red[a] = true;
    }
    *orank = 0;
    for (int i = 0; i < X->rank; i++) {
        if (!red[i]) od[(*orank)++] = X->dims[i];
        else if (keepdims) od[(*orank)++] = 1;
    }
    return VX_OK;
}

static vx_status reduce_forward_common(vx_ctx *ctx, vx_run *run, const char *op, bool mean) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "%s needs X", op);
    if (run->in[0]->dtype != VX_F32) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: float32 only", op);
    bool red[VX_MAX_RANK];
    int64_t od[VX_MAX_RANK];
    int orank;
    vx_status st = reduce_axes(ctx, run, op, red, &orank, od);
    if (st) return st;
    return reduce_fwd(ctx, run, red, mean, orank, od);
}

static vx_status reduce_backward_common(vx_ctx *ctx, vx_run *run, const char *op, bool mean) {
    bool red[VX_MAX_RANK];
    int64_t od[VX_MAX_RANK];
    int orank;
    vx_status st = reduce_axes(ctx, run, op, red, &orank, od);
    if (st) return st;
    return reduce_bwd(ctx, run, red, mean);
}

static vx_status reducemean_forward(vx_ctx *ctx, vx_run *run) { return reduce_forward_common(ctx, run, "ReduceMean", true); }
static vx_status reducemean_backward(vx_ctx *ctx, vx_run *run) { return reduce_backward_common(ctx, run, "ReduceMean", true); }
static vx_status reducesum_forward(vx_ctx *ctx, vx_run *run) { return reduce_forward_common(ctx, run, "ReduceSum", false); }
static vx_status reducesum_backward(vx_ctx *ctx, vx_run *run) { return reduce_backward_common(ctx, run, "ReduceSum", false); }

extern "C" {
const vx_op vx_ops_pool[] = {
    {"MaxPool", maxpool_forward, maxpool_backward, VX_SLOT(0), 0, false, 0, NULL},
    {"AveragePool", avgpool_forward, avgpool_backward, VX_SLOT(0), 0, false, 0, NULL},
    {"GlobalAveragePool", gap_forward, gap_backward, 0, 0, false, 0, NULL},
    {"ReduceMean", reducemean_forward, reducemean_backward, VX_SLOT(1), 0, false, VX_SLOT(1), NULL},
    {"ReduceSum", reducesum_forward, reducesum_backward, VX_SLOT(1), 0, false, VX_SLOT(1), NULL},
};
const size_t vx_ops_pool_count = sizeof vx_ops_pool / sizeof vx_ops_pool[0];
}
