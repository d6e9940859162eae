/*
 * ops_sample.cu: ops that read X at computed (fractional) positions:
 * GridSample, RoiAlign, MaxRoiPool. Forward gathers, backward scatters onto
 * X's gradient with atomics (several outputs read the same pixels). Float32.
 *
 * GridSample (opset 16 and 20): X (N, C, D1..Dn), grid (N, O1..On, n) with
 *   n = 1..3 spatial dims (X of rank 3 to 5; the grid's last axis holds the
 *   coordinates innermost dim first: x for W, y for H, z for D), values in
 *   [-1, 1]. Modes linear / bilinear, nearest, cubic / bicubic (Keys,
 *   A = -0.75, over every spatial dim); padding zeros, border, reflection;
 *   align_corners. The ONNX reference (onnx/reference/ops/op_grid_sample.py)
 *   step by step: denormalize the coordinate, round it for nearest (half to
 *   even, nearbyint: the node tests' 3-D outputs too, though the reference's
 *   code says std::round there), clamp (border) or reflect (reflection) a coordinate outside the border,
 *   then read each tap through the padding (zeros: 0 outside; border: the
 *   clamped index; reflection: the reflected index). Backward gives X's
 *   gradient (atomic adds at the taps) and the grid's (the taps' weight
 *   derivatives, through the clamp or reflection: grid_sampler_2d_backward);
 *   it keeps X and the grid, as PyTorch does.
 * RoiAlign (opset 10 and 16): X (N, C, H, W), rois (R, 4) as x1, y1, x2, y2,
 *   batch_indices (R); mode avg or max (ONNX's max: the largest of the
 *   weighted corner values w_k * v_k over the samples, as onnxruntime);
 *   coordinate_transformation_mode half_pixel (opset 16's default) or
 *   output_half_pixel (opset 10's behaviour: no half-pixel shift, ROIs at
 *   least 1x1); sampling_ratio 0 (ceil(roi size / output size) samples per
 *   bin) or > 0. Backward to X only (rois and indices are coordinates):
 *   keeps rois and batch_indices, and X in max mode to find the winner again
 *   (layers/resample.c's verify rule counts them).
 * MaxRoiPool (opset 1): X (N, C, H, W), rois (R, 5) as batch, x1, y1, x2, y2;
 *   Caffe's ROI max pooling (rounded box corners, bins floor / ceil). Keeps
 *   the rois and an int32 arg max per output element (torchvision's
 *   roi_pool), held in a 4-byte tensor: the executor has no int32 dtype.
 */
#include <math.h>

#include "ops_common.cuh"

/* ---- GridSample ------------------------------------------------------------------- */

#define GS_DIMS 3 /* geometry padded to 3 spatial dims (leading dims of size 1) */
enum { GS_NEAREST, GS_LINEAR, GS_CUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

typedef struct gs_geom {
    int dims, mode, pad;
    bool align;
    int64_t N, C;
    int64_t in[GS_DIMS];  /* X's spatial dims, padded */
    int64_t in_size, out_size; /* spatial elements of X and of Y per (n, c) */
} gs_geom;

/* One spatial dim's taps for one coordinate: input index (-1: a zero),
 * weight, and the weight's derivative with respect to the grid value. */
typedef struct gs_axis {
    int count;
    int64_t idx[4];
    float w[4], dw[4];
} gs_axis;

/* The reference's _gs_reflect: folds x into [lo, hi]; *slope is dx'/dx. */
static __device__ float gs_reflect(float x, float lo, float hi, float *slope) {
    float range = hi - lo;
    *slope = 1.f;
    if (range <= 0.f) { *slope = 0.f; return lo; }
    if (x < lo || x > hi) {
        bool below = x < lo;
        float dx = below ? lo - x : x - hi;
        int64_t n = (int64_t)(dx / range);
        float r = dx - (float)n * range;
        bool even = n % 2 == 0;
        *slope = even ? -1.f : 1.f;
        x = below ? (even ? lo + r : hi - r) : (even ? hi - r : lo + r);
    }
    return x;
}

/* The reference's _pixel_at_array: the index tap i reads, or -1 for zero. */
static __device__ int64_t gs_pixel(const gs_geom &g, int64_t i, int64_t len, float lo, float hi) {
    if (g.pad == GS_ZEROS) return i >= 0 && i < len ? i : -1;
    if (g.pad == GS_REFLECTION) {
        float s;
        i = (int64_t)gs_reflect((float)i, lo, hi, &s); /* truncated, as int() */
    }
    return i < 0 ? 0 : i >= len ? len - 1 : i;
}

/* Keys' cubic convolution weight at distance s, and its derivative. */
static __device__ float gs_keys(float s, float *ds) {
    const float A = -0.75f;
    float sign = s < 0.f ? -1.f : 1.f;
    s = fabsf(s);
    if (s <= 1.f) {
        *ds = sign * (3.f * (A + 2.f) * s * s - 2.f * (A + 3.f) * s);
        return ((A + 2.f) * s - (A + 3.f)) * s * s + 1.f;
    }
    *ds = sign * (3.f * A * s * s - 10.f * A * s + 8.f * A);
    return ((A * s - 5.f * A) * s + 8.f * A) * s - 4.f * A;
}

static __device__ void gs_axis_taps(const gs_geom &g, int64_t len, float gn, gs_axis *a) {
    float x = g.align ? (gn + 1.f) * 0.5f * (float)(len - 1) : ((gn + 1.f) * (float)len - 1.f) * 0.5f;
    float slope = g.align ? 0.5f * (float)(len - 1) : 0.5f * (float)len; /* dx / dgrid */
    float lo = g.align ? 0.f : -0.5f, hi = g.align ? (float)(len - 1) : (float)len - 0.5f;
    if (g.mode == GS_NEAREST) x = rintf(x);
    if (x < lo || x > hi) {
        if (g.pad == GS_BORDER) {
            x = fminf(fmaxf(x, 0.f), (float)(len - 1));
            slope = 0.f;
        } else if (g.pad == GS_REFLECTION) {
            float s;
            x = gs_reflect(x, lo, hi, &s);
            slope *= s;
        }
    }
    if (g.mode == GS_NEAREST) {
        a->count = 1;
        a->idx[0] = gs_pixel(g, (int64_t)x, len, lo, hi); /* truncated, as astype(int32) */
        a->w[0] = 1.f;
        a->dw[0] = 0.f;
        return;
    }
    float x0 = floorf(x), t = x - x0;
    int64_t i0 = (int64_t)x0;
    if (g.mode == GS_LINEAR) {
        a->count = 2;
        a->idx[0] = gs_pixel(g, i0, len, lo, hi);
        a->idx[1] = gs_pixel(g, i0 + 1, len, lo, hi);
        a->w[0] = 1.f - t;
        a->w[1] = t;
        a->dw[0] = -slope;
        a->dw[1] = slope;
        return;
    }
    a->count = 4;
    for (int k = 0; k < 4; k++) {
        float d; /* tap i0 - 1 + k sits at distance t + 1 - k */
        a->idx[k] = gs_pixel(g, i0 - 1 + k, len, lo, hi);
        a->w[k] = gs_keys(t + 1.f - (float)k, &d);
        a->dw[k] = d * slope;
    }
}

/* The taps of grid point p (flat over N and the output's spatial dims). */
static __device__ void gs_point_taps(const gs_geom &g, const float *grid, int64_t p, gs_axis *ax) {
    for (int d = 0; d < GS_DIMS; d++) {
        int real = d - (GS_DIMS - g.dims); /* the spatial dim; < 0 for padding */
        if (real < 0) {
            ax[d].count = 1;
            ax[d].idx[0] = 0;
            ax[d].w[0] = 1.f;
            ax[d].dw[0] = 0.f;
        } else {
            gs_axis_taps(g, g.in[d], grid[p * g.dims + (g.dims - 1 - real)], &ax[d]);
        }
    }
}

static __global__ void gs_forward_kernel(float *y, const float *x, const float *grid, gs_geom g) {
    VXK_LOOP(p, g.N * g.out_size) {
        gs_axis ax[GS_DIMS];
        gs_point_taps(g, grid, p, ax);
        int64_t n = p / g.out_size, o = p % g.out_size;
        for (int64_t c = 0; c < g.C; c++) {
            const float *xc = x + (n * g.C + c) * g.in_size;
            float acc = 0.f;
            for (int a = 0; a < ax[0].count; a++)
                for (int b = 0; b < ax[1].count; b++)
                    for (int e = 0; e < ax[2].count; e++) {
                        if (ax[0].idx[a] < 0 || ax[1].idx[b] < 0 || ax[2].idx[e] < 0) continue;
                        int64_t off = (ax[0].idx[a] * g.in[1] + ax[1].idx[b]) * g.in[2] + ax[2].idx[e];
                        acc += ax[0].w[a] * ax[1].w[b] * ax[2].w[e] * xc[off];
                    }
            y[(n * g.C + c) * g.out_size + o] = acc;
        }
    }
}

/* One thread per grid point: X's gradient by atomic adds at the taps, the
 * grid's summed over the channels (no other thread writes that point). */
static __global__ void gs_backward_kernel(float *dx, float *dgrid, const float *dy, const float *x, const float *grid,
                                          gs_geom g) {
    VXK_LOOP(p, g.N * g.out_size) {
        gs_axis ax[GS_DIMS];
        gs_point_taps(g, grid, p, ax);
        int64_t n = p / g.out_size, o = p % g.out_size;
        float gg[GS_DIMS] = {0.f, 0.f, 0.f};
        for (int64_t c = 0; c < g.C; c++) {
            float gy = dy[(n * g.C + c) * g.out_size + o];
            int64_t base = (n * g.C + c) * g.in_size;
            for (int a = 0; a < ax[0].count; a++)
                for (int b = 0; b < ax[1].count; b++)
                    for (int e = 0; e < ax[2].count; e++) {
                        if (ax[0].idx[a] < 0 || ax[1].idx[b] < 0 || ax[2].idx[e] < 0) continue;
                        int64_t off = base + (ax[0].idx[a] * g.in[1] + ax[1].idx[b]) * g.in[2] + ax[2].idx[e];
                        if (dx) atomicAdd(dx + off, ax[0].w[a] * ax[1].w[b] * ax[2].w[e] * gy);
                        if (dgrid) {
                            float v = x[off] * gy;
                            gg[0] += v * ax[0].dw[a] * ax[1].w[b] * ax[2].w[e];
                            gg[1] += v * ax[0].w[a] * ax[1].dw[b] * ax[2].w[e];
                            gg[2] += v * ax[0].w[a] * ax[1].w[b] * ax[2].dw[e];
                        }
                    }
        }
        if (dgrid)
            for (int real = 0; real < g.dims; real++)
                dgrid[p * g.dims + (g.dims - 1 - real)] = gg[real + GS_DIMS - g.dims];
    }
}

static vx_status gs_geometry(vx_ctx *ctx, const vx_run *run, gs_geom *g) {
    const vx_tensor *X = run->in[0], *G = run->in[1];
    memset(g, 0, sizeof *g);
    if (X->dtype != VX_F32 || G->dtype != VX_F32) return vx_fail(ctx, VX_EUNSUPPORTED, "GridSample: float32 only");
    g->dims = X->rank - 2;
    if (g->dims < 1 || g->dims > GS_DIMS)
        return vx_fail(ctx, VX_EUNSUPPORTED, "GridSample: X of rank %d; the kernel samples 1 to 3 spatial dims", X->rank);
    if (G->rank != X->rank || G->dims[0] != X->dims[0] || G->dims[G->rank - 1] != g->dims)
        return vx_fail(ctx, VX_EINVAL, "GridSample: grid must be (N, ..., %d) of X's rank", g->dims);
    const char *mode = vxk_attr_string(run, "mode", "linear");
    if (!strcmp(mode, "linear") || !strcmp(mode, "bilinear")) g->mode = GS_LINEAR;
    else if (!strcmp(mode, "nearest")) g->mode = GS_NEAREST;
    else if (!strcmp(mode, "cubic") || !strcmp(mode, "bicubic")) g->mode = GS_CUBIC;
    else return vx_fail(ctx, VX_EUNSUPPORTED, "GridSample: mode '%s' (linear, nearest or cubic)", mode);
    const char *pad = vxk_attr_string(run, "padding_mode", "zeros");
    if (!strcmp(pad, "zeros")) g->pad = GS_ZEROS;
    else if (!strcmp(pad, "border")) g->pad = GS_BORDER;
    else if (!strcmp(pad, "reflection")) g->pad = GS_REFLECTION;
    else return vx_fail(ctx, VX_EUNSUPPORTED, "GridSample: padding_mode '%s' (zeros, border or reflection)", pad);
    g->align = vxk_attr_int(run, "align_corners", 0) != 0;
    g->N = X->dims[0];
    g->C = X->dims[1];
    for (int d = 0; d < GS_DIMS; d++) {
        int real = d - (GS_DIMS - g->dims);
        g->in[d] = real < 0 ? 1 : X->dims[2 + real];
    }
    g->in_size = vxk_prod(X->dims, 2, X->rank);
    g->out_size = vxk_prod(G->dims, 1, G->rank - 1);
    return VX_OK;
}

static vx_status grid_sample_forward(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0], *G = run->in[1];
    gs_geom g;
    vx_status st = gs_geometry(ctx, run, &g);
    if (st) return st;
    int64_t yd[VX_MAX_RANK] = {X->dims[0], X->dims[1]};
    for (int d = 0; d < g.dims; d++) yd[2 + d] = G->dims[1 + d];
    if ((st = vxk_new_out(ctx, run, 0, VX_F32, X->rank, yd))) return st;
    int64_t points = g.N * g.out_size;
    if (!run->out[0]->numel) return VX_OK;
    if (!g.in_size) return vxk_zero(ctx, run->out[0]->data, (size_t)run->out[0]->numel * sizeof(float));
    gs_forward_kernel<<<vxk_blocks(points), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (float *)run->out[0]->data, (const float *)X->data, (const float *)G->data, g);
    return vxk_check(ctx, "GridSample");
}

static vx_status grid_sample_backward(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0], *G = run->in[1], *dY = run->grad_out[0];
    gs_geom g;
    vx_status st = gs_geometry(ctx, run, &g);
    if (st) return st;
    float *dx = NULL, *dgrid = NULL;
    if (run->need_grad[0]) {
        if ((st = vxk_grad(ctx, run, 0))) return st;
        dx = (float *)run->grad_in[0]->data;
        if ((st = vxk_zero(ctx, dx, (size_t)X->numel * sizeof(float)))) return st;
    }
    if (run->need_grad[1]) {
        if ((st = vxk_grad(ctx, run, 1))) return st;
        dgrid = (float *)run->grad_in[1]->data;
        if ((st = vxk_zero(ctx, dgrid, (size_t)G->numel * sizeof(float)))) return st;
    }
    int64_t points = g.N * g.out_size;
    if (!dY || !dY->numel || !g.in_size || (!dx && !dgrid)) return VX_OK;
    gs_backward_kernel<<<vxk_blocks(points), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        dx, dgrid, (const float *)dY->data, (const float *)X->data, (const float *)G->data, g);
    return vxk_check(ctx, "GridSample backward");
}

/* ---- RoiAlign -------------------------------------------------------------------- */

typedef struct ra_geom {
    int64_t N, C, H, W, R, oh, ow;
    int64_t ratio;   /* sampling_ratio; 0: adaptive */
    float scale;     /* spatial_scale */
    bool half_pixel; /* coordinate_transformation_mode half_pixel */
    bool max_mode;
} ra_geom;

/* One sample's four corners (onnxruntime's pre_calc): offsets in the
 * (n, c) plane and bilinear weights, all zero outside [-1, H] x [-1, W]. */
typedef struct ra_corners {
    int64_t pos[4];
    float w[4];
} ra_corners;

static __device__ void ra_sample(const ra_geom &g, float y, float x, ra_corners *k) {
    if (y < -1.f || y > (float)g.H || x < -1.f || x > (float)g.W) {
        for (int i = 0; i < 4; i++) { k->pos[i] = 0; k->w[i] = 0.f; }
        return;
    }
    y = fmaxf(y, 0.f);
    x = fmaxf(x, 0.f);
    int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
    if (yl >= g.H - 1) { yh = yl = g.H - 1; y = (float)yl; } else yh = yl + 1;
    if (xl >= g.W - 1) { xh = xl = g.W - 1; x = (float)xl; } else xh = xl + 1;
    float ly = y - (float)yl, lx = x - (float)xl, hy = 1.f - ly, hx = 1.f - lx;
    k->pos[0] = yl * g.W + xl; k->w[0] = hy * hx;
    k->pos[1] = yl * g.W + xh; k->w[1] = hy * lx;
    k->pos[2] = yh * g.W + xl; k->w[2] = ly * hx;
    k->pos[3] = yh * g.W + xh; k->w[3] = ly * lx;
}

/* The box of roi r in X's pixels: start (y, x), bin size and sample grid. */
typedef struct ra_box {
    int64_t n; /* batch index; -1 when out of range */
    float y0, x0, bin_h, bin_w;
    int64_t grid_h, grid_w;
} ra_box;

static __device__ ra_box ra_box_of(const ra_geom &g, const float *rois, const int64_t *batch, int64_t r) {
    ra_box b;
    float off = g.half_pixel ? 0.5f : 0.f;
    const float *q = rois + r * 4;
    b.n = batch[r] >= 0 && batch[r] < g.N ? batch[r] : -1;
    b.x0 = q[0] * g.scale - off;
    b.y0 = q[1] * g.scale - off;
    float rw = q[2] * g.scale - off - b.x0, rh = q[3] * g.scale - off - b.y0;
    if (!g.half_pixel) { /* opset 10: malformed ROIs forced to 1x1 */
        rw = fmaxf(rw, 1.f);
        rh = fmaxf(rh, 1.f);
    }
    b.bin_h = rh / (float)g.oh;
    b.bin_w = rw / (float)g.ow;
    b.grid_h = g.ratio > 0 ? g.ratio : (int64_t)ceilf(rh / (float)g.oh);
    b.grid_w = g.ratio > 0 ? g.ratio : (int64_t)ceilf(rw / (float)g.ow);
    return b;
}

/* Sample (iy, ix) of bin (ph, pw). */
static __device__ void ra_bin_sample(const ra_geom &g, const ra_box &b, int64_t ph, int64_t pw, int64_t iy,
                                     int64_t ix, ra_corners *k) {
    float y = b.y0 + (float)ph * b.bin_h + ((float)iy + 0.5f) * b.bin_h / (float)b.grid_h;
    float x = b.x0 + (float)pw * b.bin_w + ((float)ix + 0.5f) * b.bin_w / (float)b.grid_w;
    ra_sample(g, y, x, k);
}

/* Output element i (r, c, ph, pw): its value; in max mode also the plane
 * offset of the winning weighted corner and its weight (-1: none). */
static __device__ float ra_output(const ra_geom &g, const float *x, const float *rois, const int64_t *batch,
                                  int64_t i, int64_t *win_pos, float *win_w) {
    int64_t pw = i % g.ow, ph = (i / g.ow) % g.oh, c = (i / (g.ow * g.oh)) % g.C, r = i / (g.ow * g.oh * g.C);
    ra_box b = ra_box_of(g, rois, batch, r);
    *win_pos = -1;
    *win_w = 0.f;
    if (b.n < 0) return 0.f;
    const float *xc = x + (b.n * g.C + c) * g.H * g.W;
    float acc = 0.f;
    bool any = false;
    for (int64_t iy = 0; iy < b.grid_h; iy++)
        for (int64_t ix = 0; ix < b.grid_w; ix++) {
            ra_corners k;
            ra_bin_sample(g, b, ph, pw, iy, ix, &k);
            if (!g.max_mode) {
                for (int j = 0; j < 4; j++) acc += k.w[j] * xc[k.pos[j]];
                continue;
            }
            for (int j = 0; j < 4; j++) {
                float v = k.w[j] * xc[k.pos[j]];
                if (!any || v > acc) { acc = v; *win_pos = k.pos[j]; *win_w = k.w[j]; }
                any = true;
            }
        }
    if (!g.max_mode) acc /= (float)max(b.grid_h * b.grid_w, (int64_t)1);
    return acc;
}

static __global__ void ra_forward_kernel(float *y, const float *x, const float *rois, const int64_t *batch,
                                         ra_geom g, int64_t n) {
    VXK_LOOP(i, n) {
        int64_t pos;
        float w;
        y[i] = ra_output(g, x, rois, batch, i, &pos, &w);
    }
}

static __global__ void ra_backward_kernel(float *dx, const float *dy, const float *x, const float *rois,
                                          const int64_t *batch, ra_geom g, int64_t n) {
    VXK_LOOP(i, n) {
        int64_t c = (i / (g.ow * g.oh)) % g.C, r = i / (g.ow * g.oh * g.C);
        ra_box b = ra_box_of(g, rois, batch, r);
        if (b.n < 0) continue;
        float *dxc = dx + (b.n * g.C + c) * g.H * g.W;
        if (g.max_mode) {
            int64_t pos;
            float w;
            ra_output(g, x, rois, batch, i, &pos, &w);
            if (pos >= 0) atomicAdd(dxc + pos, w * dy[i]);
            continue;
        }
        int64_t pw = i % g.ow, ph = (i / g.ow) % g.oh;
        float gy = dy[i] / (float)max(b.grid_h * b.grid_w, (int64_t)1);
        for (int64_t iy = 0; iy < b.grid_h; iy++)
            for (int64_t ix = 0; ix < b.grid_w; ix++) {
                ra_corners k;
                ra_bin_sample(g, b, ph, pw, iy, ix, &k);
                for (int j = 0; j < 4; j++)
                    if (k.w[j] != 0.f) atomicAdd(dxc + k.pos[j], k.w[j] * gy);
            }
    }
}

static vx_status ra_geometry(vx_ctx *ctx, const vx_run *run, ra_geom *g) {
    const vx_tensor *X = run->in[0], *rois = run->in[1], *batch = run->in[2];
    memset(g, 0, sizeof *g);
    if (X->dtype != VX_F32 || rois->dtype != VX_F32 || batch->dtype != VX_I64)
        return vx_fail(ctx, VX_EUNSUPPORTED, "RoiAlign: float32 X and rois, int64 batch_indices only");
    if (X->rank != 4 || rois->rank != 2 || rois->dims[1] != 4 || batch->rank != 1 || batch->dims[0] != rois->dims[0])
        return vx_fail(ctx, VX_EINVAL, "RoiAlign: X must be (N, C, H, W), rois (R, 4), batch_indices (R)");
    const char *mode = vxk_attr_string(run, "mode", "avg");
    if (strcmp(mode, "avg") && strcmp(mode, "max"))
        return vx_fail(ctx, VX_EUNSUPPORTED, "RoiAlign: mode '%s' (avg or max)", mode);
    /* opset 10 has no attribute and behaves as output_half_pixel */
    const char *ctm = vxk_attr_string(run, "coordinate_transformation_mode",
                                      vxk_opset(run) >= 16 ? "half_pixel" : "output_half_pixel");
    if (strcmp(ctm, "half_pixel") && strcmp(ctm, "output_half_pixel"))
        return vx_fail(ctx, VX_EUNSUPPORTED, "RoiAlign: coordinate_transformation_mode '%s'", ctm);
    g->N = X->dims[0];
    g->C = X->dims[1];
    g->H = X->dims[2];
    g->W = X->dims[3];
    g->R = rois->dims[0];
    g->oh = vxk_attr_int(run, "output_height", 1);
    g->ow = vxk_attr_int(run, "output_width", 1);
    g->ratio = vxk_attr_int(run, "sampling_ratio", 0);
    g->scale = (float)vxk_attr_float(run, "spatial_scale", 1.0);
    g->half_pixel = !strcmp(ctm, "half_pixel");
    g->max_mode = !strcmp(mode, "max");
    if (g->oh < 1 || g->ow < 1 || g->ratio < 0)
        return vx_fail(ctx, VX_EINVAL, "RoiAlign: output sizes must be positive and sampling_ratio >= 0");
    return VX_OK;
}

static vx_status roi_align_forward(vx_ctx *ctx, vx_run *run) {
    ra_geom g;
    vx_status st = ra_geometry(ctx, run, &g);
    if (st) return st;
    int64_t yd[4] = {g.R, g.C, g.oh, g.ow};
    if ((st = vxk_new_out(ctx, run, 0, VX_F32, 4, yd))) return st;
    int64_t n = run->out[0]->numel;
    if (!n) return VX_OK;
    if (!run->in[0]->numel) return vxk_zero(ctx, run->out[0]->data, (size_t)n * sizeof(float));
    ra_forward_kernel<<<vxk_blocks(n), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (float *)run->out[0]->data, (const float *)run->in[0]->data, (const float *)run->in[1]->data,
        (const int64_t *)run->in[2]->data, g, n);
    return vxk_check(ctx, "RoiAlign");
}

static vx_status roi_align_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    ra_geom g;
    vx_status st = ra_geometry(ctx, run, &g);
    if (st || (st = vxk_grad(ctx, run, 0))) return st;
    vx_tensor *dX = run->grad_in[0];
    const vx_tensor *dY = run->grad_out[0];
    if ((st = vxk_zero(ctx, dX->data, (size_t)dX->numel * sizeof(float)))) return st;
    if (!dY || !dY->numel || !dX->numel) return VX_OK;
    ra_backward_kernel<<<vxk_blocks(dY->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (float *)dX->data, (const float *)dY->data, g.max_mode ? (const float *)run->in[0]->data : NULL,
        (const float *)run->in[1]->data, (const int64_t *)run->in[2]->data, g, dY->numel);
    return vxk_check(ctx, "RoiAlign backward");
}

/* Max mode finds the winner again in X: it keeps X too. */
static void roi_align_saves(const vx_run *run, uint32_t *si, uint32_t *so) {
    *so = 0;
    *si = VX_SLOT(1) | VX_SLOT(2);
    if (!strcmp(vxk_attr_string(run, "mode", "avg"), "max")) *si |= VX_SLOT(0);
}

/* ---- MaxRoiPool ------------------------------------------------------------------- */

typedef struct mrp_geom {
    int64_t N, C, H, W, R, ph, pw;
    float scale;
} mrp_geom;

/* Output i (r, c, ph, pw): the max over its bin, and the bin's arg max as an
 * offset in the (n, c) plane (-1 for an empty bin, whose output is 0). */
static __global__ void mrp_forward_kernel(float *y, int32_t *argmax, const float *x, const float *rois, mrp_geom g,
                                          int64_t n) {
    VXK_LOOP(i, n) {
        int64_t pw = i % g.pw, ph = (i / g.pw) % g.ph, c = (i / (g.pw * g.ph)) % g.C, r = i / (g.pw * g.ph * g.C);
        const float *q = rois + r * 5;
        int64_t b = (int64_t)q[0];
        int64_t x1 = (int64_t)roundf(q[1] * g.scale), y1 = (int64_t)roundf(q[2] * g.scale);
        int64_t x2 = (int64_t)roundf(q[3] * g.scale), y2 = (int64_t)roundf(q[4] * g.scale);
        float bh = (float)max(y2 - y1 + 1, (int64_t)1) / (float)g.ph, bw = (float)max(x2 - x1 + 1, (int64_t)1) / (float)g.pw;
        int64_t hs = min(max((int64_t)floorf((float)ph * bh) + y1, (int64_t)0), g.H);
        int64_t he = min(max((int64_t)ceilf((float)(ph + 1) * bh) + y1, (int64_t)0), g.H);
        int64_t ws = min(max((int64_t)floorf((float)pw * bw) + x1, (int64_t)0), g.W);
        int64_t we = min(max((int64_t)ceilf((float)(pw + 1) * bw) + x1, (int64_t)0), g.W);
        float best = 0.f;
        int32_t arg = -1;
        if (b >= 0 && b < g.N && he > hs && we > ws) {
            const float *xc = x + (b * g.C + c) * g.H * g.W;
            best = -INFINITY;
            for (int64_t h = hs; h < he; h++)
                for (int64_t w = ws; w < we; w++)
                    if (xc[h * g.W + w] > best || arg < 0) { best = xc[h * g.W + w]; arg = (int32_t)(h * g.W + w); }
        }
        y[i] = best;
        if (argmax) argmax[i] = arg;
    }
}

static __global__ void mrp_backward_kernel(float *dx, const float *dy, const int32_t *argmax, const float *rois,
                                           mrp_geom g, int64_t n) {
    VXK_LOOP(i, n) {
        if (argmax[i] < 0) continue;
        int64_t c = (i / (g.pw * g.ph)) % g.C, r = i / (g.pw * g.ph * g.C), b = (int64_t)rois[r * 5];
        atomicAdd(dx + (b * g.C + c) * g.H * g.W + argmax[i], dy[i]);
    }
}

static vx_status mrp_geometry(vx_ctx *ctx, const vx_run *run, mrp_geom *g) {
    const vx_tensor *X = run->in[0], *rois = run->in[1];
    memset(g, 0, sizeof *g);
    if (X->dtype != VX_F32 || rois->dtype != VX_F32) return vx_fail(ctx, VX_EUNSUPPORTED, "MaxRoiPool: float32 only");
    if (X->rank != 4 || rois->rank != 2 || rois->dims[1] != 5)
        return vx_fail(ctx, VX_EINVAL, "MaxRoiPool: X must be (N, C, H, W) and rois (R, 5)");
    int64_t np;
    const int64_t *pooled = vxk_attr_ints(run, "pooled_shape", &np);
    if (!pooled || np != 2 || pooled[0] < 1 || pooled[1] < 1)
        return vx_fail(ctx, VX_EINVAL, "MaxRoiPool: pooled_shape must hold two positive sizes");
    if (X->dims[2] * X->dims[3] > INT32_MAX)
        return vx_fail(ctx, VX_EUNSUPPORTED, "MaxRoiPool: an H x W plane over 2^31 elements (int32 arg max)");
    g->N = X->dims[0];
    g->C = X->dims[1];
    g->H = X->dims[2];
    g->W = X->dims[3];
    g->R = rois->dims[0];
    g->ph = pooled[0];
    g->pw = pooled[1];
    g->scale = (float)vxk_attr_float(run, "spatial_scale", 1.0);
    return VX_OK;
}

static vx_status max_roi_pool_forward(vx_ctx *ctx, vx_run *run) {
    mrp_geom g;
    vx_status st = mrp_geometry(ctx, run, &g);
    if (st) return st;
    int64_t yd[4] = {g.R, g.C, g.ph, g.pw};
    if ((st = vxk_new_out(ctx, run, 0, VX_F32, 4, yd))) return st;
    int32_t *argmax = NULL;
    /* the arg max only when backward reads it: an int32 per output element,
     * in a 4-byte (float32) tensor as the rule counts it */
    if (run->training && run->need_grad[0]) {
        if ((st = vxk_new_saved(ctx, run, 0, VX_F32, 4, yd))) return st;
        argmax = (int32_t *)run->saved[0]->data;
    }
    int64_t n = run->out[0]->numel;
    if (!n) return VX_OK;
    mrp_forward_kernel<<<vxk_blocks(n), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (float *)run->out[0]->data, argmax, (const float *)run->in[0]->data, (const float *)run->in[1]->data, g, n);
    return vxk_check(ctx, "MaxRoiPool");
}

static vx_status max_roi_pool_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    mrp_geom g;
    vx_status st = mrp_geometry(ctx, run, &g);
    if (st || (st = vxk_grad(ctx, run, 0))) return st;
    vx_tensor *dX = run->grad_in[0];
    const vx_tensor *dY = run->grad_out[0];
    if ((st = vxk_zero(ctx, dX->data, (size_t)dX->numel * sizeof(float)))) return st;
    if (!dY || !dY->numel) return VX_OK;
    if (!run->saved[0]) return vx_fail(ctx, VX_ECUDA, "MaxRoiPool backward: the arg max was not kept");
    mrp_backward_kernel<<<vxk_blocks(dY->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (float *)dX->data, (const float *)dY->data, (const int32_t *)run->saved[0]->data,
        (const float *)run->in[1]->data, g, dY->numel);
    return vxk_check(ctx, "MaxRoiPool backward");
}

extern "C" {
const vx_op vx_ops_sample[] = {
    {"GridSample", grid_sample_forward, grid_sample_backward, VX_SLOT(0) | VX_SLOT(1), 0, false},
    {"RoiAlign", roi_align_forward, roi_align_backward, VX_SLOT(1) | VX_SLOT(2), 0, false, 0, roi_align_saves},
    {"MaxRoiPool", max_roi_pool_forward, max_roi_pool_backward, VX_SLOT(1), 0, false},
};
const size_t vx_ops_sample_count = sizeof vx_ops_sample / sizeof vx_ops_sample[0];
}
