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
 * Half precision: Pad, CumSum (a float32 running sum), Trilu, GatherND and
 * ScatterND also take bfloat16 / float16 data (ScatterND's mul / max / min
 * through a compare-and-swap of the 32-bit word holding the element).
 * GatherND and ScatterND are in ops_index_nd.cuh, included below.
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

/* The running sum's type: float for the floating storage types (a half
 * cumsum accumulates in float32, as PyTorch's does), int64 for int64. */
template <typename T> struct cs_acc {
    typedef float A;
    static __device__ __forceinline__ float ld(T v) { return vxk_ld(v); }
    static __device__ __forceinline__ T st(float a) { return vxk_st<T>(a); }
};
template <> struct cs_acc<int64_t> {
    typedef int64_t A;
    static __device__ __forceinline__ int64_t ld(int64_t v) { return v; }
    static __device__ __forceinline__ int64_t st(int64_t a) { return a; }
};

template <typename T>
static __global__ void cumsum_kernel(T *y, const T *x, int64_t outer, int64_t len, int64_t inner, bool exclusive,
                                     bool reverse) {
    typedef cs_acc<T> C;
    VXK_LOOP(t, outer * inner) {
        int64_t base = (t / inner) * len * inner + t % inner;
        typename C::A acc = 0;
        for (int64_t j = 0; j < len; j++) {
            int64_t p = base + (reverse ? len - 1 - j : j) * inner;
            typename C::A v = C::ld(x[p]);
            if (exclusive) {
                y[p] = C::st(acc);
                acc += v;
            } else {
                acc += v;
                y[p] = C::st(acc);
            }
        }
    }
}

static vx_status cumsum_run(vx_ctx *ctx, vx_dtype dt, void *y, const void *x, const int64_t *dims, int rank, int a,
                            bool exclusive, bool reverse) {
    int64_t outer = vxk_prod(dims, 0, a), len = dims[a], inner = vxk_prod(dims, a + 1, rank);
    if (outer * len * inner == 0) return VX_OK;
    unsigned b = vxk_blocks(outer * inner);
    cudaStream_t s = vxk_stream(ctx);
    if (dt == VX_F32)
        cumsum_kernel<float><<<b, VXK_THREADS, 0, s>>>((float *)y, (const float *)x, outer, len, inner, exclusive, reverse);
    else if (dt == VX_BF16)
        cumsum_kernel<vxk_bf16><<<b, VXK_THREADS, 0, s>>>((vxk_bf16 *)y, (const vxk_bf16 *)x, outer, len, inner,
                                                          exclusive, reverse);
    else if (dt == VX_F16)
        cumsum_kernel<vxk_f16><<<b, VXK_THREADS, 0, s>>>((vxk_f16 *)y, (const vxk_f16 *)x, outer, len, inner, exclusive,
                                                         reverse);
    else
        cumsum_kernel<int64_t><<<b, VXK_THREADS, 0, vxk_stream(ctx)>>>((int64_t *)y, (const int64_t *)x, outer, len,
                                                                       inner, exclusive, reverse);
    return vxk_check(ctx, "CumSum");
}

static vx_status cumsum_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "CumSum needs x and axis");
    const vx_tensor *X = run->in[0];
    if (!vx_dtype_is_float(X->dtype) && X->dtype != VX_I64)
        return vx_fail(ctx, VX_EUNSUPPORTED, "CumSum: a floating or int64 input only");
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
    if ((st = vxk_grad(ctx, run, 0))) return st;
    vx_tensor *dX = run->grad_in[0];
    if (!dY) return vxk_zero(ctx, dX->data, (size_t)dX->numel * vx_dtype_size(dX->dtype));
    bool exclusive = vxk_attr_int(run, "exclusive", 0) != 0, reverse = vxk_attr_int(run, "reverse", 0) != 0;
    int64_t one = 1;
    return cumsum_run(ctx, dX->dtype, dX->data, dY->data, X->rank ? X->dims : &one, X->rank ? X->rank : 1, (int)a[0], exclusive,
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
    else if (esize == 2) trilu_kernel<uint16_t><<<b, VXK_THREADS, 0, s>>>((uint16_t *)y, (const uint16_t *)x, n, rows, cols, k, upper);
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
    if ((st = vxk_grad(ctx, run, 0))) return st;
    vx_tensor *dX = run->grad_in[0];
    size_t es = vx_dtype_size(dX->dtype);
    if (!dY) return vxk_zero(ctx, dX->data, (size_t)dX->numel * es);
    return trilu_run(ctx, es, dX->data, dY->data, X, k[0], vxk_attr_int(run, "upper", 1) != 0);
}

#include "ops_index_nd.cuh" /* GatherND and ScatterND */

extern "C" {
const vx_op vx_ops_index[] = {
    {"Split", split_forward, split_backward, 0, 0, false, VX_SLOT(1), NULL, VX_STRIDED_IN, VX_HALF},
    {"Pad", pad_forward, pad_backward, 0, 0, false, VX_SLOT(1) | VX_SLOT(2) | VX_SLOT(3), pad_saves, 0, VX_HALF},
    {"CumSum", cumsum_forward, cumsum_backward, 0, 0, false, VX_SLOT(1), NULL, 0, VX_HALF},
    {"Trilu", trilu_forward, trilu_backward, 0, 0, false, VX_SLOT(1), NULL, 0, VX_HALF},
    {"GatherND", gather_nd_forward, gather_nd_backward, VX_SLOT(1), 0, false, 0, NULL, 0, VX_HALF},
    {"ScatterND", scatter_nd_forward, scatter_nd_backward, VX_SLOT(1), 0, false, 0, scatter_nd_saves, 0, VX_HALF},
};
const size_t vx_ops_index_count = sizeof vx_ops_index / sizeof vx_ops_index[0];
}
