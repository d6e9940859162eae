/*
 * ops_select.cu: ScatterElements (and Scatter, its old name) and TopK,
 * forward and backward (the `select` family).
 *
 * ScatterElements (axis; reduction none, add): a copy of data with the
 *   updates written (none) or added (add) at the indices along the axis.
 *   Backward as torch.scatter / scatter_add: data's gradient is the output's
 *   with the written positions zeroed (none) or passed as is (add); the
 *   updates' gradient gathers the output's at the indices. Keeps the indices
 *   (add: only when the updates need a gradient), as the estimator's
 *   scatter_saves. mul, max and min have no kernel.
 * TopK (axis, largest, sorted): values and int64 indices, always sorted
 *   (ties: the lower index first, as torch.topk). One thread per row picks
 *   the k best in k passes: no workspace, slow for large k, but verify
 *   measures memory. Backward scatters the values' gradient into zeros at
 *   the indices (value_selecting_reduction_backward). Keeps the indices.
 * MaxUnpool: zeros with X written at its flat indices (ONNX MaxPool's, over
 *   the whole tensor); backward gathers the gradient there. Keeps the
 *   indices, as max_unpool's backward.
 * ScatterElements' negative indices count from the end; out-of-range
 * indices write nothing (and read 0).
 * Half precision: all four take bfloat16 / float16 data (ScatterElements'
 * add with the half types' atomics, TopK comparing in float32).
 */
#include "ops_common.cuh"

/* ---- ScatterElements ---------------------------------------------------------------------- */

/* Element e of indices (and updates) at coordinates c addresses data at c
 * with c[axis] replaced by the index. */
typedef struct scatter_geom {
    int rank, axis;
    int64_t idims[VX_MAX_RANK];  /* indices' dims */
    int64_t dstride[VX_MAX_RANK]; /* data's strides */
    int64_t axis_len;            /* data's dim along the axis */
} scatter_geom;

/* data offset of indices element e, or -1 when its index is out of range. */
static __device__ int64_t scatter_target(const scatter_geom &g, const int64_t *idx, int64_t e) {
    int64_t r = e, off = 0;
    for (int d = g.rank - 1; d >= 0; d--) {
        int64_t c = r % g.idims[d];
        r /= g.idims[d];
        if (d == g.axis) {
            c = idx[e];
            if (c < 0) c += g.axis_len;
            if (c < 0 || c >= g.axis_len) return -1;
        }
        off += c * g.dstride[d];
    }
    return off;
}

/* reduction add, in the storage type (the half types' own atomics) */
static __device__ __forceinline__ void scatter_add(float *p, float v) { atomicAdd(p, v); }
static __device__ __forceinline__ void scatter_add(vxk_bf16 *p, vxk_bf16 v) { atomicAdd(p, v); }
static __device__ __forceinline__ void scatter_add(vxk_f16 *p, vxk_f16 v) { atomicAdd(p, v); }
static __device__ __forceinline__ void scatter_add(unsigned long long *p, unsigned long long v) { atomicAdd(p, v); }
static __device__ __forceinline__ void scatter_add(uint8_t *, uint8_t) {} /* bool: refused before the launch */

/* mode 0: out[t] = upd[e]; 1: out[t] += upd[e]; 3: out[t] = 0 (data's
 * gradient, reduction none); 4: upd[e] = out[t] (the updates' gradient).
 * T() is zero for every storage type. */
template <typename T>
static __global__ void scatter_kernel(T *out, T *upd, const int64_t *idx, int64_t n, scatter_geom g, int mode) {
    VXK_LOOP(e, n) {
        int64_t t = scatter_target(g, idx, e);
        if (mode == 4) { upd[e] = t < 0 ? T() : out[t]; continue; }
        if (t < 0) continue;
        if (mode == 0) out[t] = upd[e];
        else if (mode == 3) out[t] = T();
        else scatter_add(&out[t], upd[e]);
    }
}

static vx_status scatter_geom_of(vx_ctx *ctx, vx_run *run, const vx_tensor *data, const vx_tensor *idx,
                                 scatter_geom *g, bool *add) {
    const char *red = vxk_attr_string(run, "reduction", "none");
    *add = strcmp(red, "add") == 0;
    if (!*add && strcmp(red, "none"))
        return vx_fail(ctx, VX_EUNSUPPORTED, "ScatterElements: reduction %s (only none and add)", red);
    if (idx->rank != data->rank) return vx_fail(ctx, VX_ESHAPE, "ScatterElements: indices and data ranks differ");
    g->rank = data->rank;
    g->axis = vxk_axis(vxk_attr_int(run, "axis", 0), data->rank);
    if (g->axis < 0) return vx_fail(ctx, VX_ESHAPE, "ScatterElements: axis out of range");
    int64_t s = 1;
    for (int d = data->rank - 1; d >= 0; d--) {
        g->idims[d] = idx->dims[d];
        g->dstride[d] = s;
        s *= data->dims[d];
    }
    g->axis_len = data->dims[g->axis];
    return VX_OK;
}

template <typename T>
static void scatter_launch(cudaStream_t s, void *out, void *upd, const int64_t *idx, int64_t n, scatter_geom g,
                           int mode) {
    scatter_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, s>>>((T *)out, (T *)upd, idx, n, g, mode);
}

/* out and upd in dtype dt. */
static vx_status scatter_run(vx_ctx *ctx, const vx_tensor *idx, vx_dtype dt, void *out, void *upd, scatter_geom g,
                             int mode) {
    if (!idx->numel) return VX_OK;
    void *ws;
    vx_status st;
    const int64_t *di = vxk_dev_i64(ctx, idx, &ws, &st);
    if (!di) return st;
    cudaStream_t s = vxk_stream(ctx);
    switch (dt) {
    case VX_I64: scatter_launch<unsigned long long>(s, out, upd, di, idx->numel, g, mode); break;
    case VX_F32: scatter_launch<float>(s, out, upd, di, idx->numel, g, mode); break;
    case VX_BF16: scatter_launch<vxk_bf16>(s, out, upd, di, idx->numel, g, mode); break;
    case VX_F16: scatter_launch<vxk_f16>(s, out, upd, di, idx->numel, g, mode); break;
    default: scatter_launch<uint8_t>(s, out, upd, di, idx->numel, g, mode); break;
    }
    st = vxk_check(ctx, "ScatterElements");
    vx_free(ctx, ws);
    return st;
}

static vx_status scatter_elements_fwd(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 2)) return vx_fail(ctx, VX_ESHAPE, "ScatterElements needs data, indices and updates");
    const vx_tensor *D = run->in[0], *I = run->in[1], *U = run->in[2];
    scatter_geom g;
    bool add;
    vx_status st = scatter_geom_of(ctx, run, D, I, &g, &add);
    if (st) return st;
    if (U->numel != I->numel || U->dtype != D->dtype)
        return vx_fail(ctx, VX_ESHAPE, "ScatterElements: updates must match indices' shape and data's dtype");
    if (add && D->dtype == VX_BOOL) return vx_fail(ctx, VX_EUNSUPPORTED, "ScatterElements: add on bool data");
    if ((st = vxk_new_out(ctx, run, 0, D->dtype, D->rank, D->dims))) return st;
    size_t es = vx_dtype_size(D->dtype);
    if (D->numel && cudaMemcpyAsync(run->out[0]->data, D->data, (size_t)D->numel * es, cudaMemcpyDeviceToDevice,
                                    vxk_stream(ctx)) != cudaSuccess)
        return vx_fail(ctx, VX_ECUDA, "ScatterElements: copying data failed");
    return scatter_run(ctx, I, D->dtype, run->out[0]->data, U->data, g, add ? 1 : 0);
}

static vx_status scatter_elements_bwd(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *D = run->in[0], *I = run->in[1], *dY = run->grad_out[0];
    scatter_geom g;
    bool add;
    vx_status st = scatter_geom_of(ctx, run, D, I, &g, &add);
    if (st) return st;
    if (run->need_grad[0]) {
        if ((st = vxk_grad(ctx, run, 0))) return st;
        vx_tensor *dD = run->grad_in[0];
        if (!dY) {
            if ((st = vx_tensor_zero(ctx, dD))) return st;
        } else {
            if (dD->numel && cudaMemcpyAsync(dD->data, dY->data, (size_t)dD->numel * vx_dtype_size(dD->dtype),
                                             cudaMemcpyDeviceToDevice, vxk_stream(ctx)) != cudaSuccess)
                return vx_fail(ctx, VX_ECUDA, "ScatterElements backward: copy failed");
            if (!add && (st = scatter_run(ctx, I, dD->dtype, dD->data, NULL, g, 3))) return st;
        }
    }
    if (vxk_has_in(run, 2) && run->need_grad[2]) {
        if ((st = vxk_grad(ctx, run, 2))) return st;
        vx_tensor *dU = run->grad_in[2];
        if (!dY) return vx_tensor_zero(ctx, dU);
        return scatter_run(ctx, I, dU->dtype, dY->data, dU->data, g, 4);
    }
    return VX_OK;
}

/* The indices when backward reads them: always for none (data's gradient
 * zeroes the written positions), for add only for the updates' gradient. */
static void scatter_elements_saves(const vx_run *run, uint32_t *si, uint32_t *so) {
    bool add = strcmp(vxk_attr_string(run, "reduction", "none"), "add") == 0;
    bool upd = run->n_in > 2 && run->need_grad[2];
    *si = (upd || (!add && run->need_grad[0])) ? VX_SLOT(1) : 0u;
    *so = 0;
}

/* ---- TopK ------------------------------------------------------------------------------------- */

/* Row r (outer o, inner i) is x[o * len * inner + j * inner + i], j < len. */
template <typename T>
static __global__ void topk_kernel(const T *x, T *vals, int64_t *idx, int64_t rows, int64_t len, int64_t inner,
                                   int64_t k, bool largest) {
    VXK_LOOP(r, rows) {
        int64_t o = r / inner, i = r % inner;
        const T *row = x + o * len * inner + i;
        int64_t out_base = o * k * inner + i;
        float pv = 0.f;
        int64_t pj = -1;
        for (int64_t s = 0; s < k; s++) {
            /* the best element ranked after (pv, pj): better value, ties by lower index */
            float bv = 0.f;
            int64_t bj = -1;
            for (int64_t j = 0; j < len; j++) {
                float v = vxk_ld(row[j * inner]);
                if (pj >= 0) {
                    bool after = largest ? (v < pv || (v == pv && j > pj)) : (v > pv || (v == pv && j > pj));
                    if (!after) continue;
                }
                if (bj < 0 || (largest ? v > bv : v < bv)) { bv = v; bj = j; }
            }
            vals[out_base + s * inner] = vxk_st<T>(bv);
            idx[out_base + s * inner] = bj;
            pv = bv;
            pj = bj;
        }
    }
}

template <typename T>
static vx_status topk_fwd_run(vx_ctx *ctx, vx_run *run, int64_t rows, int64_t len, int64_t inner, int64_t k) {
    topk_kernel<T><<<vxk_blocks(rows), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (const T *)run->in[0]->data, (T *)run->out[0]->data, (int64_t *)run->out[1]->data, rows, len, inner, k,
        vxk_attr_int(run, "largest", 1) != 0);
    return vxk_check(ctx, "TopK");
}

static vx_status topk_fwd(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0];
    if (!vx_dtype_is_float(X->dtype)) return vx_fail(ctx, VX_EUNSUPPORTED, "TopK: floating input only");
    int a = vxk_axis(vxk_attr_int(run, "axis", -1), X->rank);
    if (a < 0) return vx_fail(ctx, VX_ESHAPE, "TopK: axis out of range");
    int64_t k;
    if (vxk_opset(run) < 10) k = vxk_attr_int(run, "k", -1);
    else if (!vxk_has_in(run, 1) || vxk_host_i64(ctx, run->in[1], &k, 1) != 1)
        return vx_fail(ctx, VX_ESHAPE, "TopK: K must be one int64 value");
    if (k < 0 || k > X->dims[a]) return vx_fail(ctx, VX_ESHAPE, "TopK: k = %lld out of range", (long long)k);
    int64_t dims[VX_MAX_RANK];
    memcpy(dims, X->dims, sizeof dims);
    dims[a] = k;
    vx_status st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, dims);
    if (st || (st = vxk_new_out(ctx, run, 1, VX_I64, X->rank, dims))) return st;
    int64_t inner = vxk_prod(X->dims, a + 1, X->rank), rows = vxk_prod(X->dims, 0, a) * inner;
    if (!rows || !k) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, X->dtype, "TopK", topk_fwd_run<T>(ctx, run, rows, X->dims[a], inner, k));
}

template <typename T>
static __global__ void topk_bwd_kernel(T *dx, const T *dv, const int64_t *idx, int64_t n, int64_t k, int64_t len,
                                       int64_t inner) {
    VXK_LOOP(e, n) {
        int64_t i = e % inner, o = e / (k * inner);
        dx[(o * len + idx[e]) * inner + i] = dv[e]; /* indices of a row are distinct */
    }
}

template <typename T>
static vx_status topk_bwd_run(vx_ctx *ctx, vx_tensor *dX, const vx_tensor *dV, const vx_tensor *I, int64_t k,
                              int64_t len, int64_t inner) {
    topk_bwd_kernel<T><<<vxk_blocks(I->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (T *)dX->data, (const T *)dV->data, (const int64_t *)I->data, I->numel, k, len, inner);
    return vxk_check(ctx, "TopK backward");
}

static vx_status topk_bwd(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0], *I = run->out[1], *dV = run->grad_out[0];
    vx_status st = vxk_grad(ctx, run, 0);
    if (st || (st = vx_tensor_zero(ctx, run->grad_in[0]))) return st;
    if (!dV || !I || !I->numel) return VX_OK;
    int a = vxk_axis(vxk_attr_int(run, "axis", -1), X->rank);
    int64_t inner = vxk_prod(X->dims, a + 1, X->rank);
    VXK_FLOAT_DISPATCH(ctx, dV->dtype, "TopK backward", topk_bwd_run<T>(ctx, run->grad_in[0], dV, I, I->dims[a], X->dims[a], inner));
}

/* ---- MaxUnpool ------------------------------------------------------------------------------------ */

/* ONNX MaxPool's indices flatten the whole tensor (n, c and the spatial
 * dims), so Y[idx[i]] = X[i] over Y's flat storage; out-of-range indices
 * write nothing. Backward gathers dX[i] = dY[idx[i]]. */
/* ONNX's indices are flat over the default unpooled shape ((in - 1) *
 * stride + kernel - pads, as MaxPool's input was); an output_shape other
 * than that keeps each cell at its coordinates (the onnx reference pads
 * at the end). From flat index t over src to the flat index over dst. */
typedef struct unpool_map {
    int rank;
    bool remap;                 /* src and dst differ */
    int64_t src[VX_MAX_RANK], dst[VX_MAX_RANK];
} unpool_map;

static __device__ __forceinline__ int64_t unpool_target(const unpool_map &m, int64_t t) {
    if (!m.remap) return t;
    int64_t out = 0, stride = 1;
    for (int d = m.rank - 1; d >= 0; d--) {
        int64_t c = t % m.src[d];
        t /= m.src[d];
        if (c >= m.dst[d]) return -1;
        out += c * stride;
        stride *= m.dst[d];
    }
    return out;
}

template <typename T>
static __global__ void unpool_kernel(T *y, T *x, const int64_t *idx, int64_t n, int64_t ny, unpool_map m, bool gather) {
    VXK_LOOP(i, n) {
        int64_t t = idx[i];
        if (t >= 0) t = unpool_target(m, t);
        bool in = t >= 0 && t < ny;
        if (gather) x[i] = in ? y[t] : T(); /* T(): zero */
        else if (in) y[t] = x[i];
    }
}

/* The unpooled shape the indices count over, from X and the attributes. */
static vx_status unpool_default_dims(vx_ctx *ctx, const vx_run *run, const vx_tensor *X, int64_t *dims) {
    int n = X->rank - 2;
    int64_t nk, ns, np;
    const int64_t *k = vxk_attr_ints(run, "kernel_shape", &nk), *strides = vxk_attr_ints(run, "strides", &ns),
                  *pads = vxk_attr_ints(run, "pads", &np);
    if (!k || nk != n) return vx_fail(ctx, VX_ESHAPE, "MaxUnpool: kernel_shape needs %d values", n);
    dims[0] = X->dims[0];
    dims[1] = X->dims[1];
    for (int i = 0; i < n; i++) {
        int64_t s = strides && ns == n ? strides[i] : 1;
        int64_t p = pads && np == 2 * n ? pads[i] + pads[i + n] : 0;
        dims[2 + i] = (X->dims[2 + i] - 1) * s + k[i] - p;
        if (dims[2 + i] <= 0)
            return vx_fail(ctx, VX_ESHAPE, "MaxUnpool: output dim %d would be %lld", 2 + i, (long long)dims[2 + i]);
    }
    return VX_OK;
}

template <typename T>
static void unpool_launch(vx_ctx *ctx, void *y, void *x, const int64_t *di, int64_t n, int64_t ny, const unpool_map &m,
                          bool gather) {
    unpool_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, vxk_stream(ctx)>>>((T *)y, (T *)x, di, n, ny, m, gather);
}

/* y (shaped dst) and x (X's), both in X's dtype, through the indices I: a
 * scatter into y, or with gather a gather from it (the backward). */
static vx_status unpool_run(vx_ctx *ctx, const vx_run *run, void *y, const int64_t *dst, void *x, const vx_tensor *X,
                            bool gather) {
    const vx_tensor *I = run->in[1];
    if (!I->numel) return VX_OK;
    unpool_map m;
    m.rank = X->rank;
    vx_status st = unpool_default_dims(ctx, run, X, m.src);
    if (st) return st;
    int64_t ny = 1;
    m.remap = false;
    for (int d = 0; d < m.rank; d++) {
        m.dst[d] = dst[d];
        m.remap |= m.src[d] != dst[d];
        ny *= dst[d];
    }
    void *ws;
    const int64_t *di = vxk_dev_i64(ctx, I, &ws, &st);
    if (!di) return st;
    if (X->dtype == VX_F32) unpool_launch<float>(ctx, y, x, di, I->numel, ny, m, gather);
    else if (X->dtype == VX_BF16) unpool_launch<vxk_bf16>(ctx, y, x, di, I->numel, ny, m, gather);
    else unpool_launch<vxk_f16>(ctx, y, x, di, I->numel, ny, m, gather);
    st = vxk_check(ctx, "MaxUnpool");
    vx_free(ctx, ws);
    return st;
}

static vx_status max_unpool_fwd(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0];
    if (!vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "MaxUnpool needs X and I");
    const vx_tensor *I = run->in[1];
    if (!vx_dtype_is_float(X->dtype) || I->numel != X->numel || X->rank < 3)
        return vx_fail(ctx, VX_EUNSUPPORTED, "MaxUnpool: float X (N, C, spatial...) and one index per element");
    int64_t dims[VX_MAX_RANK];
    vx_status st;
    if (vxk_has_in(run, 2)) {
        if (vxk_host_i64(ctx, run->in[2], dims, VX_MAX_RANK) != X->rank)
            return vx_fail(ctx, VX_ESHAPE, "MaxUnpool: output_shape must have rank %d values", X->rank);
    } else if ((st = unpool_default_dims(ctx, run, X, dims))) {
        return st;
    }
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, dims))) return st;
    vx_tensor *Y = run->out[0];
    if ((st = vx_tensor_zero(ctx, Y))) return st;
    return unpool_run(ctx, run, Y->data, dims, X->data, X, false);
}

/* max_unpool's backward (max_pool_double_backward): a gather at the indices,
 * which it keeps. */
static vx_status max_unpool_bwd(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *dY = run->grad_out[0];
    vx_status st = vxk_grad(ctx, run, 0);
    if (st) return st;
    if (!dY) return vx_tensor_zero(ctx, run->grad_in[0]);
    return unpool_run(ctx, run, dY->data, dY->dims, run->grad_in[0]->data, run->in[0], true);
}

/* ---- table ---------------------------------------------------------------------------------------- */

extern "C" const vx_op vx_ops_select[] = {
    {"ScatterElements", scatter_elements_fwd, scatter_elements_bwd, VX_SLOT(1), 0, false, 0, scatter_elements_saves, 0,
     VX_HALF},
    {"Scatter", scatter_elements_fwd, scatter_elements_bwd, VX_SLOT(1), 0, false, 0, scatter_elements_saves, 0, VX_HALF},
    {"TopK", topk_fwd, topk_bwd, 0, VX_SLOT(1), false, VX_SLOT(1), NULL, 0, VX_HALF},
    {"MaxUnpool", max_unpool_fwd, max_unpool_bwd, VX_SLOT(1), 0, false, VX_SLOT(2), NULL, 0, VX_HALF},
};
extern "C" const size_t vx_ops_select_count = sizeof vx_ops_select / sizeof vx_ops_select[0];
