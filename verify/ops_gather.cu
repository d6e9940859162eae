/*
 * ops_gather.cu: Gather, GatherElements and Transpose, forward and backward.
 *
 * Gather (data, int64 indices, axis): float32 or int64 data on the device;
 *   negative indices count from the end, out-of-range ones give 0. Backward
 *   (embedding / index_select): dData zeroed, then atomicAdd of dY rows.
 *   saves the indices.
 * GatherElements (data, indices, axis): backward scatter-adds into a zeroed
 *   dData. saves data and indices (gather_backward reads self).
 * Transpose (perm, default reversed): a copy; backward writes dY back through
 *   the same permutation (the inverse). Keeps nothing.
 * Indices given as host copies only are copied to a device workspace.
 */
#include "ops_common.cuh"

/* Half data moves as 2-byte words; its gradients add in float (vxk_ld). */
typedef unsigned short h16;

/* ---- Gather ---------------------------------------------------------------------- */

template <typename T>
static __global__ void gather_kernel(T *y, const T *x, const int64_t *idx, int64_t outer, int64_t A, int64_t nI,
                                     int64_t inner) {
    int64_t total = outer * nI * inner;
    VXK_LOOP(t, total) {
        int64_t i = t % inner, r = t / inner;
        int64_t j = r % nI, o = r / nI;
        int64_t k = idx[j];
        if (k < 0) k += A;
        y[t] = (k >= 0 && k < A) ? x[(o * A + k) * inner + i] : (T)0;
    }
}

template <typename T>
static __global__ void gather_bwd_kernel(T *dx, const T *dy, const int64_t *idx, int64_t outer, int64_t A,
                                         int64_t nI, int64_t inner) {
    int64_t total = outer * nI * inner;
    VXK_LOOP(t, total) {
        int64_t i = t % inner, r = t / inner;
        int64_t j = r % nI, o = r / nI;
        int64_t k = idx[j];
        if (k < 0) k += A;
        if (k >= 0 && k < A) vxk_atomic_add_t(dx + (o * A + k) * inner + i, vxk_ld(dy[t]));
    }
}

static vx_status gather_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "Gather needs data and indices");
    const vx_tensor *X = run->in[0], *I = run->in[1];
    if (X->rank < 1) return vx_fail(ctx, VX_ESHAPE, "Gather: data must have rank >= 1");
    int a = vxk_axis(vxk_attr_int(run, "axis", 0), X->rank);
    if (a < 0) return vx_fail(ctx, VX_ESHAPE, "Gather: axis out of range");
    if (X->rank - 1 + I->rank > VX_MAX_RANK) return vx_fail(ctx, VX_EUNSUPPORTED, "Gather: output rank too high");
    int64_t od[VX_MAX_RANK];
    int r = 0;
    for (int i = 0; i < a; i++) od[r++] = X->dims[i];
    for (int i = 0; i < I->rank; i++) od[r++] = I->dims[i];
    for (int i = a + 1; i < X->rank; i++) od[r++] = X->dims[i];
    vx_status st = vxk_new_out(ctx, run, 0, X->dtype, r, od);
    if (st) return st;
    int64_t outer = vxk_prod(X->dims, 0, a), A = X->dims[a], inner = vxk_prod(X->dims, a + 1, X->rank);
    int64_t total = run->out[0]->numel;
    if (total == 0) return VX_OK;
    if (!X->data) return vx_fail(ctx, VX_EUNSUPPORTED, "Gather: data has no device copy");
    void *ws;
    const int64_t *idx = vxk_dev_i64(ctx, I, &ws, &st);
    if (!idx) return st ? st : vx_fail(ctx, VX_ESHAPE, "Gather: no indices");
    if (X->dtype == VX_F32)
        gather_kernel<float><<<vxk_blocks(total), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (float *)run->out[0]->data, (const float *)X->data, idx, outer, A, I->numel, inner);
    else if (X->dtype == VX_I64)
        gather_kernel<int64_t><<<vxk_blocks(total), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (int64_t *)run->out[0]->data, (const int64_t *)X->data, idx, outer, A, I->numel, inner);
    else if (vx_dtype_size(X->dtype) == 2)
        gather_kernel<h16><<<vxk_blocks(total), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (h16 *)run->out[0]->data, (const h16 *)X->data, idx, outer, A, I->numel, inner);
    else /* bool: a mask's rows (BART's causal mask) */
        gather_kernel<uint8_t><<<vxk_blocks(total), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (uint8_t *)run->out[0]->data, (const uint8_t *)X->data, idx, outer, A, I->numel, inner);
    st = vxk_check(ctx, "Gather");
    vx_free(ctx, ws);
    return st;
}

template <typename T> static vx_status gather_backward_t(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0], *I = run->in[1], *dY = run->grad_out[0];
    int a = vxk_axis(vxk_attr_int(run, "axis", 0), X->rank);
    vx_status st = vxk_grad(ctx, run, 0);
    if (st) return st;
    T *dx = (T *)run->grad_in[0]->data;
    if ((st = vxk_zero(ctx, dx, (size_t)X->numel * sizeof(T)))) return st;
    if (!dY || dY->numel == 0) return VX_OK;
    int64_t outer = vxk_prod(X->dims, 0, a), A = X->dims[a], inner = vxk_prod(X->dims, a + 1, X->rank);
    void *ws;
    const int64_t *idx = vxk_dev_i64(ctx, I, &ws, &st);
    if (!idx) return st;
    gather_bwd_kernel<T><<<vxk_blocks(dY->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(dx, (const T *)dY->data, idx,
                                                                                      outer, A, I->numel, inner);
    st = vxk_check(ctx, "Gather backward");
    vx_free(ctx, ws);
    return st;
}

static vx_status gather_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "Gather backward", gather_backward_t<T>(ctx, run));
}

/* ---- GatherElements ------------------------------------------------------------ */

typedef struct ge_geom {
    int rank, axis;
    int64_t idims[VX_MAX_RANK];   /* indices (and output) dims */
    int64_t xstride[VX_MAX_RANK]; /* data strides */
    int64_t A;                    /* data dim along axis */
} ge_geom;

static __device__ __forceinline__ int64_t ge_off(const ge_geom &g, int64_t p, int64_t k) {
    int64_t off = 0;
    for (int d = g.rank - 1; d >= 0; d--) {
        int64_t c = p % g.idims[d];
        p /= g.idims[d];
        off += (d == g.axis ? k : c) * g.xstride[d];
    }
    return off;
}

/* float32 data, or int64 (RoBERTa's position ids gathered from a buffer) */
template <typename T>
static __global__ void gather_elements_kernel(T *y, const T *x, const int64_t *idx, ge_geom g, int64_t n) {
    VXK_LOOP(p, n) {
        int64_t k = idx[p];
        if (k < 0) k += g.A;
        y[p] = (k >= 0 && k < g.A) ? x[ge_off(g, p, k)] : (T)0;
    }
}

template <typename T>
static __global__ void gather_elements_bwd_kernel(T *dx, const T *dy, const int64_t *idx, ge_geom g, int64_t n) {
    VXK_LOOP(p, n) {
        int64_t k = idx[p];
        if (k < 0) k += g.A;
        if (k >= 0 && k < g.A) vxk_atomic_add_t(dx + ge_off(g, p, k), vxk_ld(dy[p]));
    }
}

static vx_status ge_make(vx_ctx *ctx, const vx_run *run, const vx_tensor *X, const vx_tensor *I, ge_geom *g) {
    if (X->rank != I->rank || X->rank < 1) return vx_fail(ctx, VX_ESHAPE, "GatherElements: data and indices ranks differ");
    int a = vxk_axis(vxk_attr_int(run, "axis", 0), X->rank);
    if (a < 0) return vx_fail(ctx, VX_ESHAPE, "GatherElements: axis out of range");
    g->rank = X->rank;
    g->axis = a;
    g->A = X->dims[a];
    int64_t s = 1;
    for (int i = X->rank - 1; i >= 0; i--) {
        g->idims[i] = I->dims[i];
        g->xstride[i] = s;
        s *= X->dims[i];
        if (i != a && I->dims[i] > X->dims[i]) return vx_fail(ctx, VX_ESHAPE, "GatherElements: indices larger than data");
    }
    return VX_OK;
}

static vx_status gather_elements_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "GatherElements needs data and indices");
    const vx_tensor *X = run->in[0], *I = run->in[1];
    if (X->dtype == VX_BOOL) return vx_fail(ctx, VX_EUNSUPPORTED, "GatherElements: floating or int64 data only");
    ge_geom g;
    vx_status st = ge_make(ctx, run, X, I, &g);
    if (st) return st;
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, I->rank, I->dims))) return st;
    if (I->numel == 0) return VX_OK;
    void *ws, *xws = NULL;
    const int64_t *idx = vxk_dev_i64(ctx, I, &ws, &st);
    if (!idx) return st;
    if (X->dtype == VX_F32) {
        gather_elements_kernel<float><<<vxk_blocks(I->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (float *)run->out[0]->data, (const float *)X->data, idx, g, I->numel);
    } else if (vx_dtype_size(X->dtype) == 2) {
        gather_elements_kernel<h16><<<vxk_blocks(I->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (h16 *)run->out[0]->data, (const h16 *)X->data, idx, g, I->numel);
    } else {
        const int64_t *x = vxk_dev_i64(ctx, X, &xws, &st); /* a host-mirrored integer tensor is uploaded */
        if (!x) {
            vx_free(ctx, ws);
            return st;
        }
        gather_elements_kernel<int64_t><<<vxk_blocks(I->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (int64_t *)run->out[0]->data, x, idx, g, I->numel);
    }
    st = vxk_check(ctx, "GatherElements");
    vx_free(ctx, ws);
    vx_free(ctx, xws);
    return st;
}

template <typename T> static vx_status gather_elements_backward_t(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0], *I = run->in[1], *dY = run->grad_out[0];
    ge_geom g;
    vx_status st = ge_make(ctx, run, X, I, &g);
    if (st) return st;
    if ((st = vxk_grad(ctx, run, 0))) return st;
    T *dx = (T *)run->grad_in[0]->data;
    if ((st = vxk_zero(ctx, dx, (size_t)X->numel * sizeof(T)))) return st;
    if (!dY || I->numel == 0) return VX_OK;
    void *ws;
    const int64_t *idx = vxk_dev_i64(ctx, I, &ws, &st);
    if (!idx) return st;
    gather_elements_bwd_kernel<T><<<vxk_blocks(I->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        dx, (const T *)dY->data, idx, g, I->numel);
    st = vxk_check(ctx, "GatherElements backward");
    vx_free(ctx, ws);
    return st;
}

static vx_status gather_elements_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "GatherElements backward", gather_elements_backward_t<T>(ctx, run));
}

/* ---- Transpose ------------------------------------------------------------------ */

typedef struct perm_geom {
    int rank;
    int64_t odims[VX_MAX_RANK];   /* output dims */
    int64_t istride[VX_MAX_RANK]; /* input stride of output dim i (stride of input dim perm[i]) */
} perm_geom;

/* forward: y[o] = x[in(o)]; backward (scatter): dx[in(o)] = dy[o]. */
template <typename T>
static __global__ void permute_kernel(T *dst, const T *src, perm_geom g, int64_t n, bool scatter) {
    VXK_LOOP(o, n) {
        int64_t p = o, off = 0;
        for (int d = g.rank - 1; d >= 0; d--) {
            off += (p % g.odims[d]) * g.istride[d];
            p /= g.odims[d];
        }
        if (scatter) dst[off] = src[o];
        else dst[o] = src[off];
    }
}

static vx_status perm_make(vx_ctx *ctx, const vx_run *run, const vx_tensor *X, perm_geom *g) {
    int64_t n;
    const int64_t *perm = vxk_attr_ints(run, "perm", &n);
    if (perm && n != X->rank) return vx_fail(ctx, VX_ESHAPE, "Transpose: perm has %lld entries for rank %d", (long long)n, X->rank);
    int64_t st[VX_MAX_RANK], s = 1;
    for (int i = X->rank - 1; i >= 0; i--) { st[i] = s; s *= X->dims[i]; }
    bool seen[VX_MAX_RANK] = {false};
    g->rank = X->rank;
    for (int i = 0; i < X->rank; i++) {
        int64_t p = perm ? perm[i] : X->rank - 1 - i;
        if (p < 0) p += X->rank;
        if (p < 0 || p >= X->rank || seen[p]) return vx_fail(ctx, VX_ESHAPE, "Transpose: bad perm");
        seen[p] = true;
        g->odims[i] = X->dims[p];
        g->istride[i] = st[p];
    }
    return VX_OK;
}

static vx_status transpose_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "Transpose needs X");
    const vx_tensor *X = run->in[0];
    if (X->dtype == VX_BOOL) return vx_fail(ctx, VX_EUNSUPPORTED, "Transpose: floating or int64 only");
    perm_geom g;
    vx_status st = perm_make(ctx, run, X, &g);
    if (st) return st;
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, g.odims))) return st;
    if (X->numel == 0) return VX_OK;
    if (!X->data) return vx_fail(ctx, VX_EUNSUPPORTED, "Transpose: input has no device copy");
    if (X->dtype == VX_F32)
        permute_kernel<float><<<vxk_blocks(X->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (float *)run->out[0]->data, (const float *)X->data, g, X->numel, false);
    else if (vx_dtype_size(X->dtype) == 2)
        permute_kernel<h16><<<vxk_blocks(X->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (h16 *)run->out[0]->data, (const h16 *)X->data, g, X->numel, false);
    else
        permute_kernel<int64_t><<<vxk_blocks(X->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (int64_t *)run->out[0]->data, (const int64_t *)X->data, g, X->numel, false);
    return vxk_check(ctx, "Transpose");
}

static vx_status transpose_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    const vx_tensor *X = run->in[0], *dY = run->grad_out[0];
    perm_geom g;
    vx_status st = perm_make(ctx, run, X, &g);
    if (st) return st;
    if ((st = vxk_grad(ctx, run, 0))) return st;
    vx_tensor *dX = run->grad_in[0];
    if (!dY) return vxk_zero(ctx, dX->data, (size_t)dX->numel * vx_dtype_size(dX->dtype));
    if (X->numel == 0) return VX_OK;
    if (vx_dtype_size(dX->dtype) == 2)
        permute_kernel<h16><<<vxk_blocks(X->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (h16 *)dX->data, (const h16 *)dY->data, g, X->numel, true);
    else
        permute_kernel<float><<<vxk_blocks(X->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            (float *)dX->data, (const float *)dY->data, g, X->numel, true);
    return vxk_check(ctx, "Transpose backward");
}

extern "C" {
const vx_op vx_ops_gather[] = {
    {"Gather", gather_forward, gather_backward, VX_SLOT(1), 0, false, 0, NULL, 0, VX_HALF},
    {"GatherElements", gather_elements_forward, gather_elements_backward, VX_SLOT(0) | VX_SLOT(1), 0, false, 0, NULL, 0,
     VX_HALF},
    {"Transpose", transpose_forward, transpose_backward, 0, 0, false, 0, NULL, 0, VX_HALF},
};
const size_t vx_ops_gather_count = sizeof vx_ops_gather / sizeof vx_ops_gather[0];
}
