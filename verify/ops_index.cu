/*
 * ops_index.cu: Split, Pad, CumSum, Trilu, GatherND and ScatterND, forward
 * and backward (the `index` family).
 *
 * Split: views of the input, as torch.split returns them (no copy). Backward
 *   writes each piece's gradient into its place of one input-sized gradient
 *   (zeros where a piece got none; a single whole piece passes its gradient
 *   through as a view). Keeps nothing but the piece sizes (host).
 * Pad (constant, reflect, edge, wrap): a new tensor. Backward of constant
 *   reads the gradient inside the pads (constant_pad_nd's narrow + clone);
 *   the others add each output's gradient into the input element it copies.
 *   Keeps the pads (host); reflect and edge also keep the input, as
 *   reflection_pad / replication_pad backward do (it reads only its shape,
 *   as GatherElements does).
 * CumSum (exclusive, reverse): one thread per line along the axis. Backward
 *   is the cumsum the other way round with the same `exclusive`. Keeps
 *   nothing (the axis, host).
 * Trilu (upper, k): the masked copy; backward masks the gradient alike.
 *   Keeps nothing (k, host).
 * GatherND (batch_dims): backward zero-fills and atomically adds the
 *   gradient's slices. Keeps the indices.
 * ScatterND (reduction none, add, mul, max, min): a copy of data with the
 *   updates written in. Backward (none, add): data's gradient is a copy of
 *   the output's with the written slices zeroed (add: not zeroed), the
 *   updates' the output gradient's slices at the indices; keeps the indices
 *   (add: only for the updates' gradient). mul, max and min have no
 *   backward.
 * Negative indices count from the end; out-of-range ones read 0 and write
 * nothing. Indices given as host copies only are copied to a workspace.
 */
#include "ops_common.cuh"

/* ---- small host-side inputs -------------------------------------------------------- */

/* What backward needs of the node's small integer inputs (piece sizes, pads,
 * axis, k), kept in run->saved[0] as a host-only tensor: no device memory,
 * as PyTorch keeps such arguments as Python ints. */
static vx_status save_host_ints(vx_ctx *ctx, vx_run *run, const int64_t *vals, int64_t n) {
    vx_tensor *t = vx_tensor_new_host(ctx, VX_I64, 1, &n);
    if (!t) return vx_fail(ctx, VX_EOOM, "host out of memory");
    memcpy(t->host_i64, vals, (size_t)n * sizeof(int64_t));
    run->saved[0] = t;
    return VX_OK;
}

static vx_status cuda_ok(vx_ctx *ctx, cudaError_t e, const char *what) {
    if (e == cudaSuccess) return VX_OK;
    cudaGetLastError();
    return vx_fail(ctx, VX_ECUDA, "%s: %s", what, cudaGetErrorString(e));
}

static bool any_grad(const vx_run *run) {
    for (int k = 0; k < run->n_in; k++)
        if (run->need_grad[k]) return true;
    return false;
}

static const int64_t *saved_ints(vx_ctx *ctx, const vx_run *run, int64_t want, vx_status *st, const char *op) {
    const vx_tensor *t = run->saved[0];
    *st = VX_OK;
    if (!t || !t->host_i64 || t->numel < want) {
        *st = vx_fail(ctx, VX_ESHAPE, "%s backward: what the forward saved is missing", op);
        return NULL;
    }
    return t->host_i64;
}

/* ---- Split ---------------------------------------------------------------------------- */

/* The pieces' sizes along the axis: `split` (input 1 from opset 13, else an
 * attribute), or num_outputs (opset 18) / the output count: pieces of
 * ceil(d / n), the last one smaller. */
static vx_status split_sizes(vx_ctx *ctx, vx_run *run, const vx_tensor *X, int *axis, int64_t *sizes) {
    int a = vxk_axis(vxk_attr_int(run, "axis", 0), X->rank);
    if (a < 0) return vx_fail(ctx, VX_ESHAPE, "Split: axis out of range");
    int n = run->n_out;
    int64_t d = X->dims[a], cnt = 0;
    const int64_t *attr = vxk_attr_ints(run, "split", &cnt);
    if (attr) {
        if (cnt > VX_MAX_IO) return vx_fail(ctx, VX_EUNSUPPORTED, "Split: %lld pieces", (long long)cnt);
        memcpy(sizes, attr, (size_t)cnt * sizeof(int64_t));
    } else {
        vx_status st = vxk_input_ints(ctx, run, 1, sizes, &cnt, VX_MAX_IO, "Split's split");
        if (st) return st;
    }
    if (cnt > 0) {
        if (cnt != n) return vx_fail(ctx, VX_ESHAPE, "Split: %lld sizes for %d outputs", (long long)cnt, n);
        int64_t sum = 0;
        for (int k = 0; k < n; k++) {
            if (sizes[k] < 0) return vx_fail(ctx, VX_ESHAPE, "Split: negative size");
            sum += sizes[k];
        }
        if (sum != d) return vx_fail(ctx, VX_ESHAPE, "Split: sizes sum to %lld, the axis is %lld", (long long)sum, (long long)d);
    } else {
        int64_t parts = vxk_attr_int(run, "num_outputs", n);
        if (parts != n || n < 1) return vx_fail(ctx, VX_ESHAPE, "Split: num_outputs %lld for %d outputs", (long long)parts, n);
        int64_t chunk = (d + n - 1) / n;
        for (int k = 0; k < n; k++) {
            int64_t left = d - k * chunk;
            sizes[k] = left < 0 ? 0 : left < chunk ? left : chunk;
        }
    }
    *axis = a;
    return VX_OK;
}

/* Views at the pieces' offsets, with the input's strides (views of a view
 * included: the op reads its input as it is). */
static vx_status split_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "Split needs its input");
    vx_tensor *X = run->in[0];
    if (X->rank < 1) return vx_fail(ctx, VX_ESHAPE, "Split: input must have rank >= 1");
    int a;
    int64_t sizes[VX_MAX_IO + 1];
    vx_status st = split_sizes(ctx, run, X, &a, sizes);
    if (st) return st;
    int64_t xst[VX_MAX_RANK], dims[VX_MAX_RANK], start = 0;
    vx_tensor_get_strides(X, xst);
    memcpy(dims, X->dims, sizeof dims);
    for (int k = 0; k < run->n_out; k++) {
        dims[a] = sizes[k];
        int64_t numel = vxk_prod(dims, 0, X->rank);
        if (vxk_has_out(run, k)) {
            run->out[k] = vx_tensor_strided_view(ctx, X, X->rank, dims, xst, numel ? start * xst[a] : 0);
            if (!run->out[k]) return vx_fail(ctx, VX_EOOM, "host out of memory");
        }
        start += sizes[k];
    }
    if (!any_grad(run)) return VX_OK;
    /* backward's record: the axis, then the sizes */
    int64_t rec[VX_MAX_IO + 1];
    rec[0] = a;
    memcpy(rec + 1, sizes, (size_t)run->n_out * sizeof(int64_t));
    return save_host_ints(ctx, run, rec, run->n_out + 1);
}

/* torch.split's backward: the pieces' gradients concatenated, zeros for a
 * piece that got none. */
static vx_status split_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0];
    vx_status st;
    const int64_t *rec = saved_ints(ctx, run, run->n_out + 1, &st, "Split");
    if (!rec) return st;
    int a = (int)rec[0];
    const int64_t *sizes = rec + 1;
    vx_tensor *g0 = run->grad_out[0];
    if (g0 && g0->numel == X->numel) {
        /* piece 0 is the whole input (the others empty): its gradient is
         * the input's, a view, as the estimator's view rule has it */
        run->grad_in[0] = vx_tensor_view(ctx, g0, X->rank, X->dims);
        return run->grad_in[0] ? VX_OK : vx_fail(ctx, VX_EOOM, "host out of memory");
    }
    if ((st = vxk_grad(ctx, run, 0))) return st;
    if (X->numel == 0) return VX_OK;
    char *dx = (char *)run->grad_in[0]->data;
    int64_t outer = vxk_prod(X->dims, 0, a), inner = vxk_prod(X->dims, a + 1, X->rank);
    size_t es = vx_dtype_size(run->grad_in[0]->dtype);
    size_t pitch = (size_t)(X->dims[a] * inner) * es, off = 0;
    for (int k = 0; k < run->n_out; k++) {
        size_t w = (size_t)(sizes[k] * inner) * es;
        const vx_tensor *g = run->grad_out[k];
        if (w) {
            cudaError_t e = g && g->data
                ? cudaMemcpy2DAsync(dx + off, pitch, g->data, w, w, (size_t)outer, cudaMemcpyDeviceToDevice, vxk_stream(ctx))
                : cudaMemset2DAsync(dx + off, pitch, 0, w, (size_t)outer, vxk_stream(ctx));
            if ((st = cuda_ok(ctx, e, "Split backward"))) return st;
        }
        off += w;
    }
    return VX_OK;
}

/* ---- Pad ------------------------------------------------------------------------------ */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

typedef struct pad_geom {
    int rank, mode;
    int64_t xdims[VX_MAX_RANK], ydims[VX_MAX_RANK];
    int64_t begin[VX_MAX_RANK]; /* pad before each dim (negative: cropped) */
} pad_geom;

static int pad_mode(vx_ctx *ctx, const vx_run *run, vx_status *st) {
    const char *m = vxk_attr_string(run, "mode", "constant");
    *st = VX_OK;
    if (!strcmp(m, "constant")) return PAD_CONSTANT;
    if (!strcmp(m, "reflect")) return PAD_REFLECT;
    if (!strcmp(m, "edge")) return PAD_EDGE;
    if (!strcmp(m, "wrap")) return PAD_WRAP;
    *st = vx_fail(ctx, VX_EUNSUPPORTED, "Pad: mode '%s'", m);
    return -1;
}

/* Input offset that output element o copies; -1 for a constant pad cell. */
static __device__ __forceinline__ int64_t pad_src(const pad_geom &g, int64_t o) {
    int64_t off = 0, s = 1;
    for (int d = g.rank - 1; d >= 0; d--) {
        int64_t n = g.xdims[d], i = o % g.ydims[d] - g.begin[d];
        o /= g.ydims[d];
        if (i < 0 || i >= n) {
            if (g.mode == PAD_CONSTANT) return -1;
            if (g.mode == PAD_EDGE) {
                i = i < 0 ? 0 : n - 1;
            } else if (g.mode == PAD_WRAP) {
                i = (i % n + n) % n;
            } else { /* reflect, the edge not repeated: period 2 (n - 1) */
                int64_t p = 2 * (n - 1);
                i = p ? (i % p + p) % p : 0;
                if (i >= n) i = p - i;
            }
        }
        off += i * s;
        s *= n;
    }
    return off;
}

template <typename T>
static __global__ void pad_kernel(T *y, const T *x, pad_geom g, int64_t n, T value) {
    VXK_LOOP(o, n) {
        int64_t k = pad_src(g, o);
        y[o] = k >= 0 ? x[k] : value;
    }
}

/* constant: dx[i] = dy at i's place in the output, 0 where cropped. */
template <typename T> static __global__ void pad_crop_bwd_kernel(T *dx, const T *dy, pad_geom g, int64_t n) {
    VXK_LOOP(i, n) {
        int64_t r = i, off = 0, s = 1;
        bool in = true;
        for (int d = g.rank - 1; d >= 0; d--) {
            int64_t o = r % g.xdims[d] + g.begin[d];
            r /= g.xdims[d];
            if (o < 0 || o >= g.ydims[d]) in = false;
            off += o * s;
            s *= g.ydims[d];
        }
        dx[i] = in ? dy[off] : vxk_st<T>(0.f);
    }
}

/* reflect, edge, wrap: every output cell adds into the cell it copies. */
template <typename T> static __global__ void pad_scatter_bwd_kernel(T *dx, const T *dy, pad_geom g, int64_t n) {
    VXK_LOOP(o, n) vxk_atomic_add_t(dx + pad_src(g, o), vxk_ld(dy[o]));
}

/* pads (attribute before opset 11, else input 1) and axes (input 3, opset
 * 18) into begin[] and the output dims. */
static vx_status pad_make(vx_ctx *ctx, vx_run *run, const vx_tensor *X, pad_geom *g) {
    vx_status st;
    if ((g->mode = pad_mode(ctx, run, &st)) < 0) return st;
    g->rank = X->rank;
    int64_t pads[2 * VX_MAX_RANK], axes[VX_MAX_RANK], np = 0, na = -1;
    const int64_t *attr = vxk_attr_ints(run, "pads", &np);
    if (!attr) attr = vxk_attr_ints(run, "paddings", &np); /* opset 1 */
    if (attr) {
        if (np > 2 * VX_MAX_RANK) return vx_fail(ctx, VX_ESHAPE, "Pad: %lld pads", (long long)np);
        memcpy(pads, attr, (size_t)np * sizeof(int64_t));
    } else if ((st = vxk_input_ints(ctx, run, 1, pads, &np, 2 * VX_MAX_RANK, "Pad's pads"))) {
        return st;
    }
    if ((st = vxk_input_ints(ctx, run, 3, axes, &na, VX_MAX_RANK, "Pad's axes"))) return st;
    if (np < 0) return vx_fail(ctx, VX_ESHAPE, "Pad needs pads");
    int64_t n_axes = na >= 0 ? na : X->rank;
    if (np != 2 * n_axes) return vx_fail(ctx, VX_ESHAPE, "Pad: %lld pads for %lld axes", (long long)np, (long long)n_axes);
    int64_t end[VX_MAX_RANK];
    for (int d = 0; d < X->rank; d++) {
        g->xdims[d] = X->dims[d];
        g->begin[d] = end[d] = 0;
    }
    for (int64_t i = 0; i < n_axes; i++) {
        int d = na >= 0 ? vxk_axis(axes[i], X->rank) : (int)i;
        if (d < 0) return vx_fail(ctx, VX_ESHAPE, "Pad: axis out of range");
        g->begin[d] = pads[i];
        end[d] = pads[i + n_axes];
    }
    for (int d = 0; d < X->rank; d++) {
        g->ydims[d] = X->dims[d] + g->begin[d] + end[d];
        if (g->ydims[d] < 0) return vx_fail(ctx, VX_ESHAPE, "Pad: dim %d cropped below 0", d);
        if (g->mode != PAD_CONSTANT && X->dims[d] == 0 && g->ydims[d] > 0)
            return vx_fail(ctx, VX_ESHAPE, "Pad: cannot pad an empty dim in this mode");
    }
    return VX_OK;
}

static vx_status pad_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "Pad needs its input");
    const vx_tensor *X = run->in[0];
    pad_geom g;
    vx_status st = pad_make(ctx, run, X, &g);
    if (st) return st;
    double value = vxk_attr_float(run, "value", 0.0); /* before opset 11 */
    if (vxk_has_in(run, 2) && run->in[2]->numel) value = vx_tensor_get(ctx, run->in[2], 0);
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, g.ydims))) return st;
    int64_t n = run->out[0]->numel;
    if (n) {
        if (!X->data && X->numel) return vx_fail(ctx, VX_EUNSUPPORTED, "Pad: input has no device copy");
        void *y = run->out[0]->data;
        unsigned b = vxk_blocks(n);
        if (X->dtype == VX_F32)
            pad_kernel<float><<<b, VXK_THREADS, 0, vxk_stream(ctx)>>>((float *)y, (const float *)X->data, g, n, (float)value);
        else if (X->dtype == VX_BF16)
            pad_kernel<__nv_bfloat16><<<b, VXK_THREADS, 0, vxk_stream(ctx)>>>(
                (__nv_bfloat16 *)y, (const __nv_bfloat16 *)X->data, g, n, vxk_st<__nv_bfloat16>((float)value));
        else if (X->dtype == VX_F16)
            pad_kernel<__half><<<b, VXK_THREADS, 0, vxk_stream(ctx)>>>((__half *)y, (const __half *)X->data, g, n,
                                                                       vxk_st<__half>((float)value));
        else if (X->dtype == VX_I64)
            pad_kernel<int64_t><<<b, VXK_THREADS, 0, vxk_stream(ctx)>>>((int64_t *)y, (const int64_t *)X->data, g, n,
                                                                        (int64_t)value);
        else
            pad_kernel<uint8_t><<<b, VXK_THREADS, 0, vxk_stream(ctx)>>>((uint8_t *)y, (const uint8_t *)X->data, g, n,
                                                                        (uint8_t)(value != 0));
        if ((st = vxk_check(ctx, "Pad"))) return st;
    }
    return any_grad(run) ? save_host_ints(ctx, run, g.begin, X->rank) : VX_OK;
}

template <typename T> static vx_status pad_backward_t(vx_ctx *ctx, vx_run *run, const pad_geom *g) {
    const vx_tensor *X = run->in[0], *Y = run->out[0], *dY = run->grad_out[0];
    T *dx = (T *)run->grad_in[0]->data;
    vx_status st;
    if (!dY || Y->numel == 0 || g->mode != PAD_CONSTANT) {
        if ((st = vxk_zero(ctx, dx, (size_t)X->numel * sizeof(T)))) return st;
        if (!dY || Y->numel == 0) return VX_OK;
        pad_scatter_bwd_kernel<T><<<vxk_blocks(Y->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(dx, (const T *)dY->data,
                                                                                            *g, Y->numel);
    } else {
        pad_crop_bwd_kernel<T><<<vxk_blocks(X->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(dx, (const T *)dY->data, *g,
                                                                                         X->numel);
    }
    return vxk_check(ctx, "Pad backward");
}

static vx_status pad_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0], *Y = run->out[0];
    pad_geom g;
    vx_status st;
    if ((g.mode = pad_mode(ctx, run, &st)) < 0) return st;
    const int64_t *begin = saved_ints(ctx, run, X->rank, &st, "Pad");
    if (!begin) return st;
    if (!Y || Y->rank != X->rank) return vx_fail(ctx, VX_ESHAPE, "Pad backward: no output shape");
    g.rank = X->rank;
    for (int d = 0; d < X->rank; d++) {
        g.xdims[d] = X->dims[d];
        g.ydims[d] = Y->dims[d];
        g.begin[d] = begin[d];
    }
    if ((st = vxk_grad(ctx, run, 0))) return st;
    if (X->numel == 0) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, run->grad_in[0]->dtype, "Pad backward", pad_backward_t<T>(ctx, run, &g));
}

/* reflection_pad / replication_pad backward keep the input (derivatives.yaml);
 * constant_pad_nd and circular keep nothing. */
static void pad_saves(const vx_run *run, uint32_t *si, uint32_t *so) {
    const char *m = vxk_attr_string(run, "mode", "constant");
    *si = !strcmp(m, "reflect") || !strcmp(m, "edge") ? VX_SLOT(0) : 0u;
    *so = 0;
}

/* ---- CumSum --------------------------------------------------------------------------- */

template <typename T>
static __global__ void cumsum_kernel(T *y, const T *x, int64_t outer, int64_t len, int64_t inner, bool exclusive,
                                     bool reverse) {
    VXK_LOOP(t, outer * inner) {
        int64_t base = (t / inner) * len * inner + t % inner;
        T acc = 0;
        for (int64_t j = 0; j < len; j++) {
            int64_t p = base + (reverse ? len - 1 - j : j) * inner;
            T v = x[p];
            if (exclusive) {
                y[p] = acc;
                acc += v;
            } else {
                acc += v;
                y[p] = acc;
            }
        }
    }
}

static vx_status cumsum_run(vx_ctx *ctx, vx_dtype dt, void *y, const void *x, const int64_t *dims, int rank, int a,
                            bool exclusive, bool reverse) {
    int64_t outer = vxk_prod(dims, 0, a), len = dims[a], inner = vxk_prod(dims, a + 1, rank);
    if (outer * len * inner == 0) return VX_OK;
    unsigned b = vxk_blocks(outer * inner);
    if (dt == VX_F32)
        cumsum_kernel<float><<<b, VXK_THREADS, 0, vxk_stream(ctx)>>>((float *)y, (const float *)x, outer, len, inner,
                                                                     exclusive, reverse);
    else
        cumsum_kernel<int64_t><<<b, VXK_THREADS, 0, vxk_stream(ctx)>>>((int64_t *)y, (const int64_t *)x, outer, len,
                                                                       inner, exclusive, reverse);
    return vxk_check(ctx, "CumSum");
}

static vx_status cumsum_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "CumSum needs x and axis");
    const vx_tensor *X = run->in[0];
    if (X->dtype != VX_F32 && X->dtype != VX_I64) return vx_fail(ctx, VX_EUNSUPPORTED, "CumSum: float32 or int64 only");
    int64_t axis, n;
    vx_status st = vxk_input_ints(ctx, run, 1, &axis, &n, 1, "CumSum's axis");
    if (st) return st;
    int a = n == 1 ? vxk_axis(axis, X->rank < 1 ? 1 : X->rank) : -1;
    if (a < 0) return vx_fail(ctx, VX_ESHAPE, "CumSum: bad axis");
    bool exclusive = vxk_attr_int(run, "exclusive", 0) != 0, reverse = vxk_attr_int(run, "reverse", 0) != 0;
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, X->dims))) return st;
    if (X->numel && !X->data) return vx_fail(ctx, VX_EUNSUPPORTED, "CumSum: input has no device copy");
    int64_t one = 1;
    const int64_t *dims = X->rank ? X->dims : &one; /* a scalar is one line of one */
    if ((st = cumsum_run(ctx, X->dtype, run->out[0]->data, X->data, dims, X->rank ? X->rank : 1, a, exclusive, reverse)))
        return st;
    int64_t rec = a;
    return any_grad(run) ? save_host_ints(ctx, run, &rec, 1) : VX_OK;
}

/* cumsum_backward: the sum over the outputs each input reaches, i.e. the
 * cumsum of the gradient in the other direction (exclusive stays). */
static vx_status cumsum_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0], *dY = run->grad_out[0];
    vx_status st;
    const int64_t *a = saved_ints(ctx, run, 1, &st, "CumSum");
    if (!a) return st;
    float *dx;
    if (vxk_dx_or_done(ctx, run, dY, &dx, &st)) return st;
    bool exclusive = vxk_attr_int(run, "exclusive", 0) != 0, reverse = vxk_attr_int(run, "reverse", 0) != 0;
    int64_t one = 1;
    return cumsum_run(ctx, VX_F32, dx, dY->data, X->rank ? X->dims : &one, X->rank ? X->rank : 1, (int)a[0], exclusive,
                      !reverse);
}

/* ---- Trilu ----------------------------------------------------------------------------- */

/* Keeps j - i >= k (upper) or j - i <= k (lower) over the last two dims; it
 * moves bits, so T is any type of the element's size. */
template <typename T>
static __global__ void trilu_kernel(T *y, const T *x, int64_t n, int64_t rows, int64_t cols, int64_t k, bool upper) {
    VXK_LOOP(e, n) {
        int64_t j = e % cols, i = e / cols % rows;
        bool keep = upper ? j - i >= k : j - i <= k;
        y[e] = keep ? x[e] : (T)0;
    }
}

static vx_status trilu_run(vx_ctx *ctx, size_t esize, void *y, const void *x, const vx_tensor *shape, int64_t k,
                           bool upper) {
    int64_t n = shape->numel, rows = shape->dims[shape->rank - 2], cols = shape->dims[shape->rank - 1];
    if (!n) return VX_OK;
    unsigned b = vxk_blocks(n);
    cudaStream_t s = vxk_stream(ctx);
    if (esize == 4) trilu_kernel<uint32_t><<<b, VXK_THREADS, 0, s>>>((uint32_t *)y, (const uint32_t *)x, n, rows, cols, k, upper);
    else if (esize == 8) trilu_kernel<uint64_t><<<b, VXK_THREADS, 0, s>>>((uint64_t *)y, (const uint64_t *)x, n, rows, cols, k, upper);
    else trilu_kernel<uint8_t><<<b, VXK_THREADS, 0, s>>>((uint8_t *)y, (const uint8_t *)x, n, rows, cols, k, upper);
    return vxk_check(ctx, "Trilu");
}

static vx_status trilu_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "Trilu needs its input");
    const vx_tensor *X = run->in[0];
    if (X->rank < 2) return vx_fail(ctx, VX_ESHAPE, "Trilu: input must have rank >= 2");
    int64_t k = 0, n;
    vx_status st = vxk_input_ints(ctx, run, 1, &k, &n, 1, "Trilu's k");
    if (st) return st;
    if (n < 1) k = 0;
    bool upper = vxk_attr_int(run, "upper", 1) != 0;
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, X->dims))) return st;
    if (X->numel && !X->data) return vx_fail(ctx, VX_EUNSUPPORTED, "Trilu: input has no device copy");
    if ((st = trilu_run(ctx, vx_dtype_size(X->dtype), run->out[0]->data, X->data, X, k, upper))) return st;
    return any_grad(run) ? save_host_ints(ctx, run, &k, 1) : VX_OK;
}

/* triu / tril backward: the same mask on the gradient. */
static vx_status trilu_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0], *dY = run->grad_out[0];
    vx_status st;
    const int64_t *k = saved_ints(ctx, run, 1, &st, "Trilu");
    if (!k) return st;
    float *dx;
    if (vxk_dx_or_done(ctx, run, dY, &dx, &st)) return st;
    return trilu_run(ctx, sizeof(float), dx, dY->data, X, k[0], vxk_attr_int(run, "upper", 1) != 0);
}

/* ---- GatherND and ScatterND ------------------------------------------------------------ */

/* Index tuples of length m address data dims b..b+m-1 (b = batch_dims, 0 for
 * ScatterND); each tuple names a slice of `slice` elements. Element t of the
 * gathered tensor (ScatterND's updates) is element t % slice of tuple
 * t / slice, in batch tuple / per_batch. */
typedef struct nd_geom {
    int m;
    int64_t dims[VX_MAX_RANK];   /* data dims b..b+m-1 */
    int64_t stride[VX_MAX_RANK]; /* their strides in data */
    int64_t slice, per_batch, batch_stride;
} nd_geom;

/* Data offset of gathered element t; -1 for an out-of-range index. */
static __device__ __forceinline__ int64_t nd_src(const nd_geom &g, const int64_t *idx, int64_t t) {
    int64_t n = t / g.slice;
    const int64_t *tuple = idx + n * g.m;
    int64_t off = (n / g.per_batch) * g.batch_stride + t % g.slice;
    for (int j = 0; j < g.m; j++) {
        int64_t k = tuple[j];
        if (k < 0) k += g.dims[j];
        if (k < 0 || k >= g.dims[j]) return -1;
        off += k * g.stride[j];
    }
    return off;
}

/* The geometry, and the gathered shape: indices.shape[:-1] + data.shape[b+m:]. */
static vx_status nd_make(vx_ctx *ctx, const char *op, const vx_tensor *X, const vx_tensor *I, int b, nd_geom *g,
                         int *rank, int64_t *dims) {
    int q = I->rank, r = X->rank;
    if (q < 1 || r < 1 || b < 0 || b >= q || b >= r) return vx_fail(ctx, VX_ESHAPE, "%s: bad ranks or batch_dims", op);
    int64_t m = I->dims[q - 1];
    if (m < 1 || m > r - b) return vx_fail(ctx, VX_ESHAPE, "%s: index tuples of %lld for rank %d", op, (long long)m, r);
    for (int d = 0; d < b; d++)
        if (I->dims[d] != X->dims[d]) return vx_fail(ctx, VX_ESHAPE, "%s: batch dims differ", op);
    if (q - 1 + r - b - m > VX_MAX_RANK) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: result rank too high", op);
    g->m = (int)m;
    g->slice = vxk_prod(X->dims, b + (int)m, r);
    for (int j = 0; j < m; j++) {
        g->dims[j] = X->dims[b + j];
        g->stride[j] = vxk_prod(X->dims, b + j + 1, r);
    }
    int64_t batches = vxk_prod(I->dims, 0, b), tuples = vxk_prod(I->dims, 0, q - 1);
    g->per_batch = batches ? tuples / batches : 1;
    if (g->per_batch < 1) g->per_batch = 1;
    g->batch_stride = vxk_prod(X->dims, b, r);
    *rank = 0;
    for (int d = 0; d < q - 1; d++) dims[(*rank)++] = I->dims[d];
    for (int d = b + (int)m; d < r; d++) dims[(*rank)++] = X->dims[d];
    return VX_OK;
}

/* y[t] = x[nd_src(t)] (gather), or x's slices zeroed / read into y. */
template <typename T>
static __global__ void gather_nd_kernel(T *y, const T *x, const int64_t *idx, nd_geom g, int64_t n) {
    VXK_LOOP(t, n) {
        int64_t k = nd_src(g, idx, t);
        y[t] = k >= 0 ? x[k] : (T)0;
    }
}

static __global__ void gather_nd_bwd_kernel(float *dx, const float *dy, const int64_t *idx, nd_geom g, int64_t n) {
    VXK_LOOP(t, n) {
        int64_t k = nd_src(g, idx, t);
        if (k >= 0) atomicAdd(dx + k, dy[t]);
    }
}

static vx_status gather_nd_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "GatherND needs data and indices");
    const vx_tensor *X = run->in[0], *I = run->in[1];
    nd_geom g;
    int rank;
    int64_t dims[VX_MAX_RANK];
    vx_status st = nd_make(ctx, "GatherND", X, I, (int)vxk_attr_int(run, "batch_dims", 0), &g, &rank, dims);
    if (st) return st;
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, rank, dims))) return st;
    int64_t n = run->out[0]->numel;
    if (n == 0) return VX_OK;
    if (!X->data) return vx_fail(ctx, VX_EUNSUPPORTED, "GatherND: data has no device copy");
    void *ws;
    const int64_t *idx = vxk_dev_i64(ctx, I, &ws, &st);
    if (!idx) return st ? st : vx_fail(ctx, VX_ESHAPE, "GatherND: no indices");
    unsigned b = vxk_blocks(n);
    cudaStream_t s = vxk_stream(ctx);
    size_t es = vx_dtype_size(X->dtype);
    void *y = run->out[0]->data;
    if (es == 4) gather_nd_kernel<uint32_t><<<b, VXK_THREADS, 0, s>>>((uint32_t *)y, (const uint32_t *)X->data, idx, g, n);
    else if (es == 8) gather_nd_kernel<uint64_t><<<b, VXK_THREADS, 0, s>>>((uint64_t *)y, (const uint64_t *)X->data, idx, g, n);
    else gather_nd_kernel<uint8_t><<<b, VXK_THREADS, 0, s>>>((uint8_t *)y, (const uint8_t *)X->data, idx, g, n);
    st = vxk_check(ctx, "GatherND");
    vx_free(ctx, ws);
    return st;
}

/* index backward: zeros_like(data).index_put_(indices, grad, accumulate). */
static vx_status gather_nd_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0], *I = run->in[1], *dY = run->grad_out[0];
    nd_geom g;
    int rank;
    int64_t dims[VX_MAX_RANK];
    vx_status st = nd_make(ctx, "GatherND", X, I, (int)vxk_attr_int(run, "batch_dims", 0), &g, &rank, dims);
    if (st) return st;
    if ((st = vxk_grad(ctx, run, 0))) return st;
    float *dx = (float *)run->grad_in[0]->data;
    if ((st = vxk_zero(ctx, dx, (size_t)X->numel * sizeof(float)))) return st;
    if (!dY || dY->numel == 0) return VX_OK;
    void *ws;
    const int64_t *idx = vxk_dev_i64(ctx, I, &ws, &st);
    if (!idx) return st;
    gather_nd_bwd_kernel<<<vxk_blocks(dY->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(dx, (const float *)dY->data, idx,
                                                                                      g, dY->numel);
    st = vxk_check(ctx, "GatherND backward");
    vx_free(ctx, ws);
    return st;
}

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static int scatter_reduction(const vx_run *run) {
    const char *r = vxk_attr_string(run, "reduction", "none");
    return !strcmp(r, "none") ? RED_NONE : !strcmp(r, "add") ? RED_ADD : !strcmp(r, "mul") ? RED_MUL
         : !strcmp(r, "max") ? RED_MAX : !strcmp(r, "min") ? RED_MIN : -1;
}

template <typename T> static __device__ __forceinline__ T combine(T a, T b, int red) {
    return red == RED_ADD ? a + b : red == RED_MUL ? a * b : red == RED_MAX ? (a > b ? a : b) : (a < b ? a : b);
}

/* p = combine(p, v) atomically: duplicate indices accumulate. */
static __device__ void atomic_combine(float *p, float v, int red) {
    if (red == RED_ADD) {
        atomicAdd(p, v);
        return;
    }
    int *q = (int *)p, old = *q, seen;
    do {
        seen = old;
        old = atomicCAS(q, seen, __float_as_int(combine(__int_as_float(seen), v, red)));
    } while (old != seen);
}
static __device__ void atomic_combine(int64_t *p, int64_t v, int red) {
    unsigned long long *q = (unsigned long long *)p, old = *q, seen;
    do {
        seen = old;
        old = atomicCAS(q, seen, (unsigned long long)combine((int64_t)seen, v, red));
    } while (old != seen);
}

template <typename T>
static __global__ void scatter_nd_kernel(T *y, const T *u, const int64_t *idx, nd_geom g, int64_t n) {
    VXK_LOOP(t, n) {
        int64_t k = nd_src(g, idx, t);
        if (k >= 0) y[k] = u[t];
    }
}

template <typename T>
static __global__ void scatter_nd_reduce_kernel(T *y, const T *u, const int64_t *idx, nd_geom g, int64_t n, int red) {
    VXK_LOOP(t, n) {
        int64_t k = nd_src(g, idx, t);
        if (k >= 0) atomic_combine(y + k, u[t], red);
    }
}

/* Backward: dx's written slices zeroed, du the gradient's slices. */
static __global__ void scatter_nd_bwd_kernel(float *dx, float *du, const float *dy, const int64_t *idx, nd_geom g,
                                             int64_t n) {
    VXK_LOOP(t, n) {
        int64_t k = nd_src(g, idx, t);
        if (du) du[t] = k >= 0 ? dy[k] : 0.f;
        if (dx && k >= 0) dx[k] = 0.f;
    }
}

/* updates must be indices.shape[:-1] + data.shape[m:]. */
static vx_status scatter_nd_make(vx_ctx *ctx, const vx_run *run, nd_geom *g) {
    const vx_tensor *X = run->in[0], *I = run->in[1], *U = run->in[2];
    int rank;
    int64_t dims[VX_MAX_RANK];
    vx_status st = nd_make(ctx, "ScatterND", X, I, 0, g, &rank, dims);
    if (st) return st;
    if (U->rank != rank || memcmp(U->dims, dims, (size_t)rank * sizeof(int64_t)))
        return vx_fail(ctx, VX_ESHAPE, "ScatterND: updates do not match the indices");
    return VX_OK;
}

static vx_status scatter_nd_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1) || !vxk_has_in(run, 2))
        return vx_fail(ctx, VX_ESHAPE, "ScatterND needs data, indices and updates");
    const vx_tensor *X = run->in[0], *I = run->in[1], *U = run->in[2];
    int red = scatter_reduction(run);
    if (red < 0) return vx_fail(ctx, VX_EUNSUPPORTED, "ScatterND: reduction '%s'", vxk_attr_string(run, "reduction", ""));
    if (red > RED_ADD && (run->need_grad[0] || run->need_grad[2]))
        return vx_fail(ctx, VX_EUNSUPPORTED, "ScatterND: no backward for reduction '%s'", vxk_attr_string(run, "reduction", ""));
    if (U->dtype != X->dtype) return vx_fail(ctx, VX_ESHAPE, "ScatterND: data and updates differ in dtype");
    if (red != RED_NONE && X->dtype != VX_F32 && X->dtype != VX_I64)
        return vx_fail(ctx, VX_EUNSUPPORTED, "ScatterND: a reduction of float32 or int64 only");
    nd_geom g;
    vx_status st = scatter_nd_make(ctx, run, &g);
    if (st) return st;
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, X->dims))) return st;
    size_t es = vx_dtype_size(X->dtype);
    void *y = run->out[0]->data;
    if (X->numel == 0) return VX_OK;
    if (!X->data || (U->numel && !U->data)) return vx_fail(ctx, VX_EUNSUPPORTED, "ScatterND: input has no device copy");
    st = cuda_ok(ctx, cudaMemcpyAsync(y, X->data, (size_t)X->numel * es, cudaMemcpyDeviceToDevice, vxk_stream(ctx)),
                 "ScatterND copy");
    if (st) return st;
    int64_t n = U->numel;
    if (n == 0) return VX_OK;
    void *ws;
    const int64_t *idx = vxk_dev_i64(ctx, I, &ws, &st);
    if (!idx) return st ? st : vx_fail(ctx, VX_ESHAPE, "ScatterND: no indices");
    unsigned b = vxk_blocks(n);
    cudaStream_t s = vxk_stream(ctx);
    if (red != RED_NONE && X->dtype == VX_F32)
        scatter_nd_reduce_kernel<float><<<b, VXK_THREADS, 0, s>>>((float *)y, (const float *)U->data, idx, g, n, red);
    else if (red != RED_NONE)
        scatter_nd_reduce_kernel<int64_t><<<b, VXK_THREADS, 0, s>>>((int64_t *)y, (const int64_t *)U->data, idx, g, n, red);
    else if (es == 4)
        scatter_nd_kernel<uint32_t><<<b, VXK_THREADS, 0, s>>>((uint32_t *)y, (const uint32_t *)U->data, idx, g, n);
    else if (es == 8)
        scatter_nd_kernel<uint64_t><<<b, VXK_THREADS, 0, s>>>((uint64_t *)y, (const uint64_t *)U->data, idx, g, n);
    else
        scatter_nd_kernel<uint8_t><<<b, VXK_THREADS, 0, s>>>((uint8_t *)y, (const uint8_t *)U->data, idx, g, n);
    st = vxk_check(ctx, "ScatterND");
    vx_free(ctx, ws);
    return st;
}

/* index_put backward: data's gradient is the output's with the written
 * slices zeroed (accumulate: the output's as is); the updates' is
 * grad.index(indices). */
static vx_status scatter_nd_backward(vx_ctx *ctx, vx_run *run) {
    bool gx = run->need_grad[0], gu = run->n_in > 2 && run->need_grad[2];
    if (!gx && !gu) return VX_OK;
    int red = scatter_reduction(run);
    if (red != RED_NONE && red != RED_ADD) return vx_fail(ctx, VX_EUNSUPPORTED, "ScatterND: no backward for this reduction");
    const vx_tensor *X = run->in[0], *dY = run->grad_out[0];
    nd_geom g;
    vx_status st = scatter_nd_make(ctx, run, &g);
    if (st) return st;
    float *dx = NULL, *du = NULL;
    if (gx) {
        if ((st = vxk_grad(ctx, run, 0))) return st;
        dx = (float *)run->grad_in[0]->data;
        size_t bytes = (size_t)X->numel * sizeof(float);
        if (!dY) st = vxk_zero(ctx, dx, bytes);
        else if (bytes)
            st = cuda_ok(ctx, cudaMemcpyAsync(dx, dY->data, bytes, cudaMemcpyDeviceToDevice, vxk_stream(ctx)),
                         "ScatterND backward copy");
        if (st) return st;
        if (red == RED_ADD || !dY) dx = NULL; /* nothing to zero */
    }
    if (gu) {
        if ((st = vxk_grad(ctx, run, 2))) return st;
        du = (float *)run->grad_in[2]->data;
        if (!dY) {
            if ((st = vxk_zero(ctx, du, (size_t)run->in[2]->numel * sizeof(float)))) return st;
            du = NULL;
        }
    }
    int64_t n = run->in[2]->numel;
    if ((!dx && !du) || n == 0) return VX_OK;
    void *ws;
    const int64_t *idx = vxk_dev_i64(ctx, run->in[1], &ws, &st);
    if (!idx) return st;
    scatter_nd_bwd_kernel<<<vxk_blocks(n), VXK_THREADS, 0, vxk_stream(ctx)>>>(dx, du, (const float *)dY->data, idx, g, n);
    st = vxk_check(ctx, "ScatterND backward");
    vx_free(ctx, ws);
    return st;
}

/* The indices, unless the only gradient is data's of an accumulating scatter
 * (index_put's "accumulate ? grad : ..."). */
static void scatter_nd_saves(const vx_run *run, uint32_t *si, uint32_t *so) {
    bool gu = run->n_in > 2 && run->need_grad[2];
    *si = scatter_reduction(run) == RED_NONE || gu ? VX_SLOT(1) : 0u;
    *so = 0;
}

extern "C" {
const vx_op vx_ops_index[] = {
    {"Split", split_forward, split_backward, 0, 0, false, VX_SLOT(1), NULL, VX_STRIDED_IN, VX_HALF},
    {"Pad", pad_forward, pad_backward, 0, 0, false, VX_SLOT(1) | VX_SLOT(2) | VX_SLOT(3), pad_saves, 0, VX_HALF},
    {"CumSum", cumsum_forward, cumsum_backward, 0, 0, false, VX_SLOT(1), NULL, 0},
    {"Trilu", trilu_forward, trilu_backward, 0, 0, false, VX_SLOT(1), NULL, 0},
    {"GatherND", gather_nd_forward, gather_nd_backward, VX_SLOT(1), 0, false, 0, NULL, 0},
    {"ScatterND", scatter_nd_forward, scatter_nd_backward, VX_SLOT(1), 0, false, 0, scatter_nd_saves, 0},
};
const size_t vx_ops_index_count = sizeof vx_ops_index / sizeof vx_ops_index[0];
}
