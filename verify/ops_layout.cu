/*
 * ops_layout.cu: ops that move or make elements by position (the `layout`
 * family): Tile, DepthToSpace, SpaceToDepth, ReverseSequence, CenterCropPad, Col2Im, EyeLike,
 * OneHot, and the random generators RandomUniform, RandomNormal,
 * RandomNormalLike, Bernoulli.
 *
 * Tile: a new tensor (torch's repeat). Backward sums the tiles onto the
 *   input (sum_to_size of the [r0, d0, r1, d1, ...] view). Keeps nothing:
 *   the repeats are the gradient's dims over the input's.
 * DepthToSpace (DCR, CRD) and SpaceToDepth: PyTorch's reshape + permute +
 *   reshape, whose last reshape copies: a new tensor. Backward is the inverse
 *   permutation of the gradient. Keeps nothing.
 * ReverseSequence (batch_axis, time_axis): the first sequence_lens[b] steps
 *   of each batch entry reversed, the rest copied. Backward reverses the
 *   gradient the same way (the map is its own inverse). Keeps the lengths as
 *   a host copy only (no device memory, as the estimator counts nothing).
 * CenterCropPad: crops or zero-pads each axis around its centre; backward
 *   the inverse shift of the gradient. Keeps nothing.
 * Col2Im (dilations, pads, strides, any spatial rank): each pixel gathers
 *   the column entries of the blocks covering it; backward is im2col of the
 *   gradient. Keeps nothing.
 * EyeLike, OneHot, RandomUniform, RandomNormal, RandomNormalLike, Bernoulli:
 *   forward only (a shape, integer indices or random values: no gradient).
 *   The random ops draw from the executor's counter-based generator
 *   (ops_elementwise.cu's vx_k_random, vx_k_random_normal, vx_k_bernoulli);
 *   their `seed` attribute is ignored: the measured memory does not depend
 *   on the values.
 * Kernels that only move elements are templated on the element's size, so
 * they serve float32, bfloat16, float16, int64 and bool alike; Col2Im sums
 * in float32 whatever its storage. Half precision: every op here but
 * RandomNormal, RandomNormalLike and Bernoulli, whose generators
 * (ops_helpers.cu) write float32 only; a float output the dtype attribute
 * asks for (EyeLike, RandomUniform) is the run's float dtype.
 */
#include "ops_common.cuh"
#include "vx_internal.h"

/* ---- shared ---------------------------------------------------------------------------- */

/* ONNX TensorProto dtype -> the executor's device dtype (a floating one:
 * the run's float dtype); false when not one the executor holds (strings,
 * complex). */
static bool layout_dtype(vx_ctx *ctx, int64_t onnx, vx_dtype *dt) {
    switch (onnx) {
    case 1: case 10: case 11: case 16: *dt = vx_float_dtype(ctx); return true;
    case 9: *dt = VX_BOOL; return true;
    case 2: case 3: case 4: case 5: case 6: case 7: case 12: case 13: *dt = VX_I64; return true;
    default: return false;
    }
}

/* Calls LAUNCH<T>(...) with T the unsigned type of the element's size. */
#define LAYOUT_BY_SIZE(esize, LAUNCH, ...)                                                  \
    ((esize) == 8 ? LAUNCH<uint64_t>(__VA_ARGS__)                                           \
     : (esize) == 4 ? LAUNCH<uint32_t>(__VA_ARGS__)                                         \
     : (esize) == 2 ? LAUNCH<uint16_t>(__VA_ARGS__) : LAUNCH<uint8_t>(__VA_ARGS__))

/* The backward of an op with one differentiable input: makes grad_in[0] in
 * the input's dtype. True when that is the whole backward, *st saying how
 * it went: the gradient could not be made, or no gradient reached the
 * output (dY NULL), in which case it is zeros. */
static bool dx_or_done(vx_ctx *ctx, vx_run *run, const vx_tensor *dY, vx_status *st) {
    if ((*st = vxk_grad(ctx, run, 0))) return true;
    if (dY) return false;
    *st = vx_tensor_zero(ctx, run->grad_in[0]);
    return true;
}

/* ---- Tile ---------------------------------------------------------------------------------- */

typedef struct tile_geom {
    int rank;
    int64_t out_dims[VX_MAX_RANK], in_dims[VX_MAX_RANK];
} tile_geom;

template <typename T>
static __global__ void tile_kernel(T *y, const T *x, int64_t n, tile_geom g) {
    VXK_LOOP(e, n) {
        int64_t r = e, off = 0, stride = 1;
        for (int d = g.rank - 1; d >= 0; d--) {
            off += (r % g.out_dims[d]) % g.in_dims[d] * stride;
            r /= g.out_dims[d];
            stride *= g.in_dims[d];
        }
        y[e] = x[off];
    }
}
template <typename T>
static void tile_launch(cudaStream_t s, void *y, const void *x, int64_t n, tile_geom g) {
    tile_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, s>>>((T *)y, (const T *)x, n, g);
}

static vx_status tile_fwd(vx_ctx *ctx, vx_run *run) {
    if (vxk_opset(run) < 6) return vx_fail(ctx, VX_EUNSUPPORTED, "Tile-1 (tiles, axis inputs) is not supported");
    const vx_tensor *X = run->in[0];
    int64_t reps[VX_MAX_RANK], n;
    vx_status st = vxk_input_ints(ctx, run, 1, reps, &n, VX_MAX_RANK, "Tile's repeats");
    if (st) return st;
    if (n != X->rank) return vx_fail(ctx, VX_ESHAPE, "Tile: %lld repeats for rank %d", (long long)n, X->rank);
    tile_geom g;
    g.rank = X->rank;
    for (int d = 0; d < X->rank; d++) {
        if (reps[d] < 0) return vx_fail(ctx, VX_ESHAPE, "Tile: negative repeat");
        g.in_dims[d] = X->dims[d];
        g.out_dims[d] = X->dims[d] * reps[d];
    }
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, g.out_dims))) return st;
    int64_t total = run->out[0]->numel;
    if (!total) return VX_OK;
    LAYOUT_BY_SIZE(vx_dtype_size(X->dtype), tile_launch, vxk_stream(ctx), run->out[0]->data, X->data, total, g);
    return vxk_check(ctx, "Tile");
}

/* repeat's backward: the gradient viewed as [r0, d0, r1, d1, ...] summed over
 * the r's (dims of 1 dropped, so any rank up to 4, and more when some
 * repeats or dims are 1). */
static vx_status tile_bwd(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0], *dY = run->grad_out[0];
    vx_status st;
    if (dx_or_done(ctx, run, dY, &st)) return st;
    if (!X->numel) return VX_OK;
    int64_t big[VX_MAX_RANK];
    bool keep[VX_MAX_RANK];
    int nb = 0;
    for (int d = 0; d < X->rank; d++) {
        int64_t r = X->dims[d] ? dY->dims[d] / X->dims[d] : 1;
        int64_t pair[2] = {r, X->dims[d]};
        for (int h = 0; h < 2; h++) {
            if (pair[h] == 1) continue;
            if (nb == VX_MAX_RANK)
                return vx_fail(ctx, VX_EUNSUPPORTED, "Tile backward: more than %d repeated or tiled dims", VX_MAX_RANK / 2);
            big[nb] = pair[h];
            keep[nb++] = h == 1;
        }
    }
    if (nb == 0) return vx_k_copy(ctx, run->grad_in[0], dY);
    vxk_reduce r;
    vxk_reduce_make(&r, nb, big, keep);
    vx_tensor *dX = run->grad_in[0];
    VXK_FLOAT_DISPATCH(ctx, dX->dtype, "Tile backward",
                       vxk_reduce_run(ctx, (T *)dX->data, (const T *)dY->data, &r, 1.f, 0.f));
}

/* ---- DepthToSpace, SpaceToDepth --------------------------------------------------------- */

/* The space tensor is (N, C, H * b, W * b), the depth one (N, C * b * b, H,
 * W); space element (n, c, h, w) is depth channel (bh * b + bw) * C + c
 * (DCR, and SpaceToDepth) or c * b * b + bh * b + bw (CRD), at (h / b, w / b),
 * with bh = h % b, bw = w % b. One thread per space element copies either
 * way. */
typedef struct d2s_geom {
    int64_t n, c, h, w, b; /* space dims: n, c, h * b, w * b */
    bool crd, to_space;
} d2s_geom;

template <typename T>
static __global__ void d2s_kernel(T *space, T *depth, int64_t total, d2s_geom g) {
    int64_t hs = g.h * g.b, ws = g.w * g.b;
    VXK_LOOP(i, total) {
        int64_t x = i % ws, y = i / ws % hs, c = i / (ws * hs) % g.c, n = i / (ws * hs * g.c);
        int64_t bh = y % g.b, bw = x % g.b;
        int64_t dc = g.crd ? (c * g.b + bh) * g.b + bw : (bh * g.b + bw) * g.c + c;
        int64_t j = ((n * g.c * g.b * g.b + dc) * g.h + y / g.b) * g.w + x / g.b;
        if (g.to_space) space[i] = depth[j];
        else depth[j] = space[i];
    }
}
template <typename T>
static void d2s_launch(cudaStream_t s, void *space, void *depth, int64_t n, d2s_geom g) {
    d2s_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, s>>>((T *)space, (T *)depth, n, g);
}

static vx_status d2s_move(vx_ctx *ctx, size_t esize, void *space, void *depth, int64_t total, d2s_geom g,
                          bool to_space) {
    if (!total) return VX_OK;
    g.to_space = to_space;
    LAYOUT_BY_SIZE(esize, d2s_launch, vxk_stream(ctx), space, depth, total, g);
    return vxk_check(ctx, "DepthToSpace / SpaceToDepth");
}

/* The geometry from the depth side (DepthToSpace's input, SpaceToDepth's
 * output) or the space side. */
static vx_status d2s_geom_of(vx_ctx *ctx, vx_run *run, const vx_tensor *t, bool is_depth, d2s_geom *g) {
    const char *op = run->node ? run->node->op_type : "DepthToSpace";
    int64_t b = vxk_attr_int(run, "blocksize", 0);
    if (t->rank != 4) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: rank-4 (N, C, H, W) input only", op);
    if (b < 1) return vx_fail(ctx, VX_ESHAPE, "%s: blocksize must be positive", op);
    const char *mode = vxk_attr_string(run, "mode", "DCR");
    g->crd = is_depth && strcmp(op, "DepthToSpace") == 0 && strcmp(mode, "CRD") == 0;
    if (strcmp(op, "DepthToSpace") == 0 && strcmp(mode, "CRD") && strcmp(mode, "DCR"))
        return vx_fail(ctx, VX_EUNSUPPORTED, "DepthToSpace: mode %s", mode);
    g->b = b;
    g->n = t->dims[0];
    if (is_depth) {
        if (t->dims[1] % (b * b)) return vx_fail(ctx, VX_ESHAPE, "DepthToSpace: channels not divisible by blocksize^2");
        g->c = t->dims[1] / (b * b);
        g->h = t->dims[2];
        g->w = t->dims[3];
    } else {
        if (t->dims[2] % b || t->dims[3] % b)
            return vx_fail(ctx, VX_ESHAPE, "SpaceToDepth: height and width must be multiples of blocksize");
        g->c = t->dims[1];
        g->h = t->dims[2] / b;
        g->w = t->dims[3] / b;
    }
    g->to_space = true;
    return VX_OK;
}

static vx_status depth_to_space_fwd(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0];
    d2s_geom g;
    vx_status st = d2s_geom_of(ctx, run, X, true, &g);
    if (st) return st;
    int64_t dims[4] = {g.n, g.c, g.h * g.b, g.w * g.b};
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, 4, dims))) return st;
    return d2s_move(ctx, vx_dtype_size(X->dtype), run->out[0]->data, X->data, X->numel, g, true);
}

static vx_status depth_to_space_bwd(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0], *dY = run->grad_out[0];
    d2s_geom g;
    vx_status st = d2s_geom_of(ctx, run, X, true, &g);
    if (st || dx_or_done(ctx, run, dY, &st)) return st;
    return d2s_move(ctx, vx_dtype_size(X->dtype), dY->data, run->grad_in[0]->data, X->numel, g, false);
}

static vx_status space_to_depth_fwd(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0];
    d2s_geom g;
    vx_status st = d2s_geom_of(ctx, run, X, false, &g);
    if (st) return st;
    int64_t dims[4] = {g.n, g.c * g.b * g.b, g.h, g.w};
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, 4, dims))) return st;
    return d2s_move(ctx, vx_dtype_size(X->dtype), X->data, run->out[0]->data, X->numel, g, false);
}

static vx_status space_to_depth_bwd(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0], *dY = run->grad_out[0];
    d2s_geom g;
    vx_status st = d2s_geom_of(ctx, run, X, false, &g);
    if (st || dx_or_done(ctx, run, dY, &st)) return st;
    return d2s_move(ctx, vx_dtype_size(X->dtype), run->grad_in[0]->data, dY->data, X->numel, g, true);
}

/* ---- ReverseSequence ------------------------------------------------------------------------ */

template <typename T>
static __global__ void reverse_seq_kernel(T *y, const T *x, const int64_t *lens, int64_t n, int64_t steps,
                                          int64_t tstride, int64_t batch, int64_t bstride) {
    VXK_LOOP(i, n) {
        int64_t t = i / tstride % steps, len = lens[i / bstride % batch];
        if (len > steps) len = steps;
        y[i] = x[t < len ? i + (len - 1 - 2 * t) * tstride : i];
    }
}
template <typename T>
static void reverse_seq_launch(cudaStream_t s, void *y, const void *x, const int64_t *lens, int64_t n, int64_t steps,
                               int64_t tstride, int64_t batch, int64_t bstride) {
    reverse_seq_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, s>>>((T *)y, (const T *)x, lens, n, steps, tstride, batch,
                                                                 bstride);
}

/* y = x with each batch entry's first lens[b] steps reversed; lens a host-
 * copied int64 tensor. */
static vx_status reverse_seq_run(vx_ctx *ctx, vx_run *run, size_t esize, void *y, const void *x,
                                 const vx_tensor *shape, const vx_tensor *lens) {
    int ta = vxk_axis(vxk_attr_int(run, "time_axis", 0), shape->rank);
    int ba = vxk_axis(vxk_attr_int(run, "batch_axis", 1), shape->rank);
    if (shape->rank < 2 || ta < 0 || ba < 0 || ta == ba || ta > 1 || ba > 1)
        return vx_fail(ctx, VX_EUNSUPPORTED, "ReverseSequence: time_axis and batch_axis must be 0 and 1");
    if (lens->numel != shape->dims[ba]) return vx_fail(ctx, VX_ESHAPE, "ReverseSequence: one length per batch entry");
    if (!shape->numel) return VX_OK;
    void *ws;
    vx_status st;
    const int64_t *dl = vxk_dev_i64(ctx, lens, &ws, &st);
    if (!dl) return st;
    int64_t tstride = vxk_prod(shape->dims, ta + 1, shape->rank), bstride = vxk_prod(shape->dims, ba + 1, shape->rank);
    LAYOUT_BY_SIZE(esize, reverse_seq_launch, vxk_stream(ctx), y, x, dl, shape->numel, shape->dims[ta], tstride,
                   shape->dims[ba], bstride);
    st = vxk_check(ctx, "ReverseSequence");
    vx_free(ctx, ws); /* stream-ordered, as ops_index.cu's index copies */
    return st;
}

static vx_status reverse_seq_fwd(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0];
    if (!vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "ReverseSequence needs sequence_lens");
    vx_tensor *lens = run->in[1];
    vx_status st = vx_tensor_to_host(ctx, lens);
    if (st) return st;
    if (lens->dtype != VX_I64 || !lens->host_i64)
        return vx_fail(ctx, VX_EUNSUPPORTED, "ReverseSequence: int64 sequence_lens of at most %d entries", VX_HOST_MAX);
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, X->dims))) return st;
    if ((st = reverse_seq_run(ctx, run, vx_dtype_size(X->dtype), run->out[0]->data, X->data, X, lens))) return st;
    if (!run->need_grad[0]) return VX_OK;
    /* The lengths for backward, on the host only: no device memory. */
    vx_tensor *keep = vx_tensor_new_host(ctx, VX_I64, 1, &lens->numel);
    if (!keep) return vx_fail(ctx, VX_EOOM, "host out of memory");
    memcpy(keep->host_i64, lens->host_i64, (size_t)lens->numel * sizeof(int64_t));
    run->saved[0] = keep;
    return VX_OK;
}

static vx_status reverse_seq_bwd(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0], *dY = run->grad_out[0];
    if (!run->saved[0]) return vx_fail(ctx, VX_ESHAPE, "ReverseSequence backward: the lengths were not kept");
    vx_status st;
    if (dx_or_done(ctx, run, dY, &st)) return st;
    return reverse_seq_run(ctx, run, vx_dtype_size(X->dtype), run->grad_in[0]->data, dY->data, X, run->saved[0]);
}

/* ---- CenterCropPad ------------------------------------------------------------------------------- */

/* y[c] = x[c + off] where that is inside x, else 0, per dim: one kernel
 * crops (off > 0) and pads (off < 0); backward runs it with the dims swapped
 * and -off. */
typedef struct shift_geom {
    int rank;
    int64_t ydims[VX_MAX_RANK], xdims[VX_MAX_RANK], off[VX_MAX_RANK];
} shift_geom;

template <typename T> static __global__ void shift_copy_kernel(T *y, const T *x, int64_t n, shift_geom g) {
    VXK_LOOP(e, n) {
        int64_t r = e, xo = 0, stride = 1;
        bool in = true;
        for (int d = g.rank - 1; d >= 0; d--) {
            int64_t c = r % g.ydims[d] + g.off[d];
            r /= g.ydims[d];
            in = in && c >= 0 && c < g.xdims[d];
            xo += c * stride;
            stride *= g.xdims[d];
        }
        y[e] = in ? x[xo] : T(); /* T(): zero bits, +0.0 of every float dtype */
    }
}
template <typename T> static void shift_copy_launch(cudaStream_t s, void *y, const void *x, int64_t n, shift_geom g) {
    shift_copy_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, s>>>((T *)y, (const T *)x, n, g);
}

/* onnx's center_crop_pad: crop start (dim - target) / 2, pad before
 * (target - dim) / 2, both rounded down. */
static void center_offsets(const vx_tensor *x, const int64_t *target, int64_t *off) {
    for (int d = 0; d < x->rank; d++)
        off[d] = target[d] <= x->dims[d] ? (x->dims[d] - target[d]) / 2 : -((target[d] - x->dims[d]) / 2);
}

/* y and x of one element size, esize bytes. */
static vx_status shift_copy(vx_ctx *ctx, size_t esize, void *y, const int64_t *ydims, const void *x,
                            const int64_t *xdims, int rank, const int64_t *off, int64_t n) {
    if (!n) return VX_OK;
    shift_geom g;
    g.rank = rank;
    for (int d = 0; d < rank; d++) { g.ydims[d] = ydims[d]; g.xdims[d] = xdims[d]; g.off[d] = off[d]; }
    LAYOUT_BY_SIZE(esize, shift_copy_launch, vxk_stream(ctx), y, x, n, g);
    return vxk_check(ctx, "CenterCropPad");
}

static vx_status center_crop_pad_fwd(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0];
    if (!vx_dtype_is_float(X->dtype)) return vx_fail(ctx, VX_EUNSUPPORTED, "CenterCropPad: floating input only");
    int64_t shape[VX_MAX_RANK], ns, na, dims[VX_MAX_RANK];
    vx_status st = vxk_input_ints(ctx, run, 1, shape, &ns, VX_MAX_RANK, "CenterCropPad's shape");
    if (st) return st;
    const int64_t *axes = vxk_attr_ints(run, "axes", &na);
    if (!axes) na = X->rank;
    if (ns != na) return vx_fail(ctx, VX_ESHAPE, "CenterCropPad: %lld sizes for %lld axes", (long long)ns, (long long)na);
    memcpy(dims, X->dims, sizeof dims);
    for (int64_t i = 0; i < na; i++) {
        int a = axes ? vxk_axis(axes[i], X->rank) : (int)i;
        if (a < 0 || shape[i] < 0) return vx_fail(ctx, VX_ESHAPE, "CenterCropPad: bad axis or size");
        dims[a] = shape[i];
    }
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, dims))) return st;
    int64_t off[VX_MAX_RANK];
    center_offsets(X, dims, off);
    return shift_copy(ctx, vx_dtype_size(X->dtype), run->out[0]->data, dims, X->data, X->dims, X->rank, off,
                      run->out[0]->numel);
}

/* The inverse shift of the gradient: its cropped parts get 0, its padding is
 * dropped. Keeps nothing (the offsets come from the two shapes). */
static vx_status center_crop_pad_bwd(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0], *dY = run->grad_out[0];
    vx_status st;
    if (dx_or_done(ctx, run, dY, &st)) return st;
    int64_t off[VX_MAX_RANK];
    center_offsets(X, dY->dims, off);
    for (int d = 0; d < X->rank; d++) off[d] = -off[d];
    return shift_copy(ctx, vx_dtype_size(X->dtype), run->grad_in[0]->data, X->dims, dY->data, dY->dims, X->rank, off,
                      X->numel);
}

/* ---- Col2Im ----------------------------------------------------------------------------------------- */

/* Input (N, C * prod(block), L), output (N, C, image...): each image pixel
 * sums the column entries whose block covers it (a gather per pixel, no
 * atomics); backward is im2col of the gradient. Keeps nothing, as
 * torch's col2im. */
typedef struct col2im_geom {
    int n;                                           /* spatial dims */
    int64_t image[VX_MAX_RANK], block[VX_MAX_RANK], blocks[VX_MAX_RANK];
    int64_t dil[VX_MAX_RANK], stride[VX_MAX_RANK], pad[VX_MAX_RANK];
    int64_t channels, kprod, L, pixels;
} col2im_geom;

template <typename T> static __global__ void col2im_kernel(T *img, const T *col, int64_t total, col2im_geom g) {
    VXK_LOOP(e, total) {
        int64_t nc = e / g.pixels, px = e % g.pixels;
        int64_t x[VX_MAX_RANK];
        for (int d = g.n - 1; d >= 0; d--) { x[d] = px % g.image[d]; px /= g.image[d]; }
        float acc = 0.f;
        for (int64_t t = 0; t < g.kprod; t++) {
            int64_t r = t, l = 0, lstride = 1;
            bool hit = true;
            for (int d = g.n - 1; d >= 0 && hit; d--) {
                int64_t o = vxk_window_of(x[d], g.pad[d], r % g.block[d], g.dil[d], g.stride[d], g.blocks[d]);
                r /= g.block[d];
                hit = o >= 0;
                l += o * lstride;
                lstride *= g.blocks[d];
            }
            if (hit) acc += vxk_ld(col[(nc * g.kprod + t) * g.L + l]);
        }
        img[e] = vxk_st<T>(acc);
    }
}

/* dcol[(n, c * kprod + t), l] = dimg[n, c, pixel of block l's tap t], 0 in the padding. */
template <typename T> static __global__ void im2col_kernel(T *col, const T *img, int64_t total, col2im_geom g) {
    VXK_LOOP(e, total) {
        int64_t l = e % g.L, t = e / g.L % g.kprod, nc = e / (g.L * g.kprod);
        int64_t off = 0, stride = 1;
        bool in = true;
        for (int d = g.n - 1; d >= 0; d--) {
            int64_t o = l % g.blocks[d], k = t % g.block[d];
            l /= g.blocks[d];
            t /= g.block[d];
            int64_t xd = o * g.stride[d] - g.pad[d] + k * g.dil[d];
            in = in && xd >= 0 && xd < g.image[d];
            off += xd * stride;
            stride *= g.image[d];
        }
        col[e] = in ? img[nc * g.pixels + off] : T(); /* T(): zero */
    }
}

static vx_status col2im_geom_of(vx_ctx *ctx, vx_run *run, const vx_tensor *X, col2im_geom *g) {
    int64_t ni, nb;
    vx_status st;
    if ((st = vxk_input_ints(ctx, run, 1, g->image, &ni, VX_MAX_RANK, "Col2Im's image_shape")) ||
        (st = vxk_input_ints(ctx, run, 2, g->block, &nb, VX_MAX_RANK, "Col2Im's block_shape")))
        return st;
    if (X->rank != 3 || ni < 1 || ni != nb || ni > VX_MAX_RANK - 2)
        return vx_fail(ctx, VX_ESHAPE, "Col2Im: input (N, C * prod(block), L) with matching image and block shapes");
    g->n = (int)ni;
    int64_t nd, ns, np;
    const int64_t *dil = vxk_attr_ints(run, "dilations", &nd), *str = vxk_attr_ints(run, "strides", &ns),
                  *pads = vxk_attr_ints(run, "pads", &np);
    g->kprod = 1;
    g->L = 1;
    g->pixels = 1;
    for (int d = 0; d < g->n; d++) {
        g->dil[d] = dil && nd == ni ? dil[d] : 1;
        g->stride[d] = str && ns == ni ? str[d] : 1;
        g->pad[d] = pads && np == 2 * ni ? pads[d] : 0;
        int64_t pad_end = pads && np == 2 * ni ? pads[d + ni] : 0;
        if (g->block[d] < 1 || g->dil[d] < 1 || g->stride[d] < 1)
            return vx_fail(ctx, VX_ESHAPE, "Col2Im: block, dilations and strides must be positive");
        g->blocks[d] = (g->image[d] + g->pad[d] + pad_end - g->dil[d] * (g->block[d] - 1) - 1) / g->stride[d] + 1;
        g->kprod *= g->block[d];
        g->L *= g->blocks[d];
        g->pixels *= g->image[d];
    }
    if (X->dims[1] % g->kprod || X->dims[2] != g->L)
        return vx_fail(ctx, VX_ESHAPE, "Col2Im: input dims do not match the blocks (%lld of them)", (long long)g->L);
    g->channels = X->dims[1] / g->kprod;
    return VX_OK;
}

template <typename T> static vx_status col2im_run(vx_ctx *ctx, void *img, const void *col, int64_t total, const col2im_geom &g) {
    col2im_kernel<T><<<vxk_blocks(total), VXK_THREADS, 0, vxk_stream(ctx)>>>((T *)img, (const T *)col, total, g);
    return vxk_check(ctx, "Col2Im");
}

template <typename T> static vx_status im2col_run(vx_ctx *ctx, void *col, const void *img, int64_t total, const col2im_geom &g) {
    im2col_kernel<T><<<vxk_blocks(total), VXK_THREADS, 0, vxk_stream(ctx)>>>((T *)col, (const T *)img, total, g);
    return vxk_check(ctx, "Col2Im backward");
}

static vx_status col2im_fwd(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0];
    if (!vx_dtype_is_float(X->dtype)) return vx_fail(ctx, VX_EUNSUPPORTED, "Col2Im: floating input only");
    col2im_geom g;
    vx_status st = col2im_geom_of(ctx, run, X, &g);
    if (st) return st;
    int64_t dims[VX_MAX_RANK] = {X->dims[0], g.channels};
    for (int d = 0; d < g.n; d++) dims[2 + d] = g.image[d];
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, 2 + g.n, dims))) return st;
    int64_t total = run->out[0]->numel;
    if (!total) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, X->dtype, "Col2Im", col2im_run<T>(ctx, run->out[0]->data, X->data, total, g));
}

static vx_status col2im_bwd(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0], *dY = run->grad_out[0];
    col2im_geom g;
    vx_status st = col2im_geom_of(ctx, run, X, &g);
    if (st || dx_or_done(ctx, run, dY, &st)) return st;
    if (!X->numel) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, X->dtype, "Col2Im backward",
                       im2col_run<T>(ctx, run->grad_in[0]->data, dY->data, X->numel, g));
}

/* ---- EyeLike, OneHot ------------------------------------------------------------------------- */

/* T(): zero of every storage type */
template <typename T>
static __global__ void eye_kernel(T *y, int64_t n, int64_t cols, int64_t k, T one) {
    VXK_LOOP(e, n) y[e] = e % cols - e / cols == k ? one : T();
}

static vx_status eye_like_fwd(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0];
    if (X->rank != 2) return vx_fail(ctx, VX_ESHAPE, "EyeLike: rank-2 input only");
    vx_dtype dt = X->dtype;
    int64_t onnx_dt = vxk_attr_int(run, "dtype", -1);
    if (onnx_dt >= 0 && !layout_dtype(ctx, onnx_dt, &dt))
        return vx_fail(ctx, VX_EUNSUPPORTED, "EyeLike: dtype %lld", (long long)onnx_dt);
    vx_status st = vxk_new_out(ctx, run, 0, dt, 2, X->dims);
    if (st || !X->numel) return st;
    int64_t n = X->numel, cols = X->dims[1], k = vxk_attr_int(run, "k", 0);
    cudaStream_t s = vxk_stream(ctx);
    void *y = run->out[0]->data;
    if (dt == VX_F32) eye_kernel<float><<<vxk_blocks(n), VXK_THREADS, 0, s>>>((float *)y, n, cols, k, 1.f);
    else if (dt == VX_BF16)
        eye_kernel<vxk_bf16><<<vxk_blocks(n), VXK_THREADS, 0, s>>>((vxk_bf16 *)y, n, cols, k, vxk_st<vxk_bf16>(1.f));
    else if (dt == VX_F16)
        eye_kernel<vxk_f16><<<vxk_blocks(n), VXK_THREADS, 0, s>>>((vxk_f16 *)y, n, cols, k, vxk_st<vxk_f16>(1.f));
    else if (dt == VX_I64) eye_kernel<int64_t><<<vxk_blocks(n), VXK_THREADS, 0, s>>>((int64_t *)y, n, cols, k, 1);
    else eye_kernel<uint8_t><<<vxk_blocks(n), VXK_THREADS, 0, s>>>((uint8_t *)y, n, cols, k, 1);
    return vxk_check(ctx, "EyeLike");
}

/* Output element (outer, d, inner) is `on` where indices[outer, inner] == d
 * (negative indices count from depth), else `off`. */
/* An index as int64: floating ones truncated. */
static __device__ __forceinline__ int64_t index_value(int64_t v) { return v; }
template <typename F> static __device__ __forceinline__ int64_t index_value(F v) { return (int64_t)vxk_ld(v); }

template <typename T, typename I>
static __global__ void one_hot_kernel(T *y, const I *idx, int64_t n, int64_t depth, int64_t inner, T off, T on) {
    VXK_LOOP(e, n) {
        int64_t in = e % inner, d = e / inner % depth, outer = e / (inner * depth);
        int64_t v = index_value(idx[outer * inner + in]);
        if (v < 0) v += depth;
        y[e] = v == d ? on : off;
    }
}

/* The launch for I's index type: int64 or a floating storage. */
template <typename T>
static vx_status one_hot_by_index(vx_ctx *ctx, T *y, const vx_tensor *I, int64_t n, int64_t depth, int64_t inner, T off,
                                  T on) {
    cudaStream_t s = vxk_stream(ctx);
    unsigned b = vxk_blocks(n);
    switch (I->dtype) {
    case VX_I64: one_hot_kernel<<<b, VXK_THREADS, 0, s>>>(y, (const int64_t *)I->data, n, depth, inner, off, on); break;
    case VX_F32: one_hot_kernel<<<b, VXK_THREADS, 0, s>>>(y, (const float *)I->data, n, depth, inner, off, on); break;
    case VX_BF16: one_hot_kernel<<<b, VXK_THREADS, 0, s>>>(y, (const vxk_bf16 *)I->data, n, depth, inner, off, on); break;
    default: one_hot_kernel<<<b, VXK_THREADS, 0, s>>>(y, (const vxk_f16 *)I->data, n, depth, inner, off, on); break;
    }
    return vxk_check(ctx, "OneHot");
}

static vx_status one_hot_fwd(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 2)) return vx_fail(ctx, VX_ESHAPE, "OneHot needs indices, depth and values");
    const vx_tensor *I = run->in[0];
    vx_tensor *V = run->in[2];
    int64_t depth, nd;
    vx_status st = vxk_input_ints(ctx, run, 1, &depth, &nd, 1, "OneHot's depth");
    if (st) return st;
    if (nd != 1 || depth < 1) return vx_fail(ctx, VX_ESHAPE, "OneHot: depth must be one positive value");
    if ((st = vx_tensor_to_host(ctx, V))) return st;
    if (V->numel != 2 || V->dtype == VX_BOOL) return vx_fail(ctx, VX_EUNSUPPORTED, "OneHot: two numeric values");
    if (I->dtype == VX_BOOL) return vx_fail(ctx, VX_EUNSUPPORTED, "OneHot: bool indices");
    int a = vxk_axis(vxk_attr_int(run, "axis", -1), I->rank + 1);
    if (a < 0) return vx_fail(ctx, VX_ESHAPE, "OneHot: axis out of range");
    int64_t dims[VX_MAX_RANK];
    if (I->rank + 1 > VX_MAX_RANK) return vx_fail(ctx, VX_EUNSUPPORTED, "OneHot: indices of rank %d", I->rank);
    for (int d = 0, j = 0; d <= I->rank; d++) dims[d] = d == a ? depth : I->dims[j++];
    if ((st = vxk_new_out(ctx, run, 0, V->dtype, I->rank + 1, dims))) return st;
    int64_t n = run->out[0]->numel, inner = vxk_prod(I->dims, a, I->rank);
    if (!n) return VX_OK;
    void *y = run->out[0]->data;
    if (V->dtype == VX_I64) return one_hot_by_index(ctx, (int64_t *)y, I, n, depth, inner, V->host_i64[0], V->host_i64[1]);
    VXK_FLOAT_DISPATCH(ctx, V->dtype, "OneHot",
                       one_hot_by_index(ctx, (T *)y, I, n, depth, inner, vxk_st<T>(V->host_f32[0]),
                                        vxk_st<T>(V->host_f32[1])));
}

/* ---- RandomUniform, RandomNormal, RandomNormalLike, Bernoulli ---------------------------------- */

/* The output: dims from the `shape` attribute, or like input 0 (the *Like
 * ops); a floating dtype (1, 10, 11, 16), made as `made` (the run's float
 * dtype where the kernel writes it, else float32). */
static vx_status random_out(vx_ctx *ctx, vx_run *run, bool like, const char *op, vx_dtype made) {
    vx_dtype dt;
    int64_t onnx_dt = vxk_attr_int(run, "dtype", 1);
    if (!layout_dtype(ctx, onnx_dt, &dt) || !vx_dtype_is_float(dt))
        return vx_fail(ctx, VX_EUNSUPPORTED, "%s: a floating output only", op);
    if (like) {
        const vx_tensor *X = run->in[0];
        return vxk_new_out(ctx, run, 0, made, X->rank, X->dims);
    }
    int64_t rank;
    const int64_t *shape = vxk_attr_ints(run, "shape", &rank);
    if (!shape || rank > VX_MAX_RANK) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: needs a shape of rank <= %d", op, VX_MAX_RANK);
    return vxk_new_out(ctx, run, 0, made, (int)rank, shape);
}

static vx_status random_uniform_fwd(vx_ctx *ctx, vx_run *run) {
    vx_status st = random_out(ctx, run, false, "RandomUniform", vx_float_dtype(ctx));
    if (st) return st;
    return vx_k_random(ctx, run->out[0], (float)vxk_attr_float(run, "low", 0.0), (float)vxk_attr_float(run, "high", 1.0),
                       vx_seed(ctx));
}

static vx_status random_normal_any(vx_ctx *ctx, vx_run *run, bool like) {
    vx_status st = random_out(ctx, run, like, like ? "RandomNormalLike" : "RandomNormal", VX_F32);
    if (st) return st;
    return vx_k_random_normal(ctx, run->out[0], (float)vxk_attr_float(run, "mean", 0.0),
                              (float)vxk_attr_float(run, "scale", 1.0), vx_seed(ctx));
}
static vx_status random_normal_fwd(vx_ctx *ctx, vx_run *run) { return random_normal_any(ctx, run, false); }
static vx_status random_normal_like_fwd(vx_ctx *ctx, vx_run *run) { return random_normal_any(ctx, run, true); }

/* Bernoulli: 1 with probability p[i]; float32 or bool output (dtype, else
 * the input's). */
static vx_status bernoulli_fwd(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *P = run->in[0];
    if (P->dtype != VX_F32) return vx_fail(ctx, VX_EUNSUPPORTED, "Bernoulli: floating probabilities only");
    vx_dtype dt = VX_F32;
    int64_t onnx_dt = vxk_attr_int(run, "dtype", 1);
    if (!layout_dtype(ctx, onnx_dt, &dt) || dt == VX_I64)
        return vx_fail(ctx, VX_EUNSUPPORTED, "Bernoulli: a float or bool output only");
    vx_status st = vxk_new_out(ctx, run, 0, dt, P->rank, P->dims);
    if (st) return st;
    return vx_k_bernoulli(ctx, P, run->out[0], vx_seed(ctx));
}

/* ---- table ---------------------------------------------------------------------------------------- */

extern "C" const vx_op vx_ops_layout[] = {
    {"Tile", tile_fwd, tile_bwd, 0, 0, false, VX_SLOT(1) | VX_SLOT(2), NULL, 0, VX_HALF},
    {"DepthToSpace", depth_to_space_fwd, depth_to_space_bwd, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"SpaceToDepth", space_to_depth_fwd, space_to_depth_bwd, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"ReverseSequence", reverse_seq_fwd, reverse_seq_bwd, 0, 0, false, VX_SLOT(1), NULL, 0, VX_HALF},
    {"CenterCropPad", center_crop_pad_fwd, center_crop_pad_bwd, 0, 0, false, VX_SLOT(1), NULL, 0, VX_HALF},
    /* backward reads the image and block shapes again (host ints: no device bytes) */
    {"Col2Im", col2im_fwd, col2im_bwd, VX_SLOT(1) | VX_SLOT(2), 0, false, VX_SLOT(1) | VX_SLOT(2), NULL, 0, VX_HALF},
    {"EyeLike", eye_like_fwd, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"OneHot", one_hot_fwd, NULL, 0, 0, false, VX_SLOT(1) | VX_SLOT(2), NULL, 0, VX_HALF},
    {"RandomUniform", random_uniform_fwd, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"RandomNormal", random_normal_fwd, NULL, 0, 0, false, 0, NULL, 0},
    {"RandomNormalLike", random_normal_like_fwd, NULL, 0, 0, false, 0, NULL, 0},
    {"Bernoulli", bernoulli_fwd, NULL, 0, 0, false, 0, NULL, 0},
};
extern "C" const size_t vx_ops_layout_count = sizeof vx_ops_layout / sizeof vx_ops_layout[0];
