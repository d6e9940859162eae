/*
 * ops_index_nd.cuh: GatherND and ScatterND's kernels and forward / backward,
 * part of ops_index.cu (included there, after its host-side helpers;
 * ops_index.cu's header comment describes them). Not a translation unit of
 * its own.
 */
#ifndef MEMEST_OPS_INDEX_ND_CUH
#define MEMEST_OPS_INDEX_ND_CUH

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

template <typename T>
static __global__ void gather_nd_bwd_kernel(T *dx, const T *dy, const int64_t *idx, nd_geom g, int64_t n) {
    VXK_LOOP(t, n) {
        int64_t k = nd_src(g, idx, t);
        if (k >= 0) vxk_atomic_add_t(dx + k, vxk_ld(dy[t]));
    }
}

template <typename T> static vx_status gather_nd_bwd_run(vx_ctx *ctx, void *dx, const void *dy, const int64_t *idx,
                                                         const nd_geom &g, int64_t n) {
    gather_nd_bwd_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, vxk_stream(ctx)>>>((T *)dx, (const T *)dy, idx, g, n);
    return vxk_check(ctx, "GatherND backward");
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
    else if (es == 2) gather_nd_kernel<uint16_t><<<b, VXK_THREADS, 0, s>>>((uint16_t *)y, (const uint16_t *)X->data, idx, g, n);
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
    vx_tensor *dX = run->grad_in[0];
    if ((st = vxk_zero(ctx, dX->data, (size_t)X->numel * vx_dtype_size(dX->dtype)))) return st;
    if (!dY || dY->numel == 0) return VX_OK;
    void *ws;
    const int64_t *idx = vxk_dev_i64(ctx, I, &ws, &st);
    if (!idx) return st;
    st = [&]() -> vx_status {
        VXK_FLOAT_DISPATCH(ctx, dX->dtype, "GatherND backward",
                           gather_nd_bwd_run<T>(ctx, dX->data, dY->data, idx, g, dY->numel));
    }();
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
/* 16-bit storage: a CAS on the aligned 32-bit word that holds it, the
 * combination computed in float32 and rounded. */
static __device__ __forceinline__ unsigned short bits16(vxk_bf16 v) { return __bfloat16_as_ushort(v); }
static __device__ __forceinline__ unsigned short bits16(vxk_f16 v) { return __half_as_ushort(v); }
template <typename T> static __device__ __forceinline__ T from_bits16(unsigned short b);
template <> __device__ __forceinline__ vxk_bf16 from_bits16<vxk_bf16>(unsigned short b) { return __ushort_as_bfloat16(b); }
template <> __device__ __forceinline__ vxk_f16 from_bits16<vxk_f16>(unsigned short b) { return __ushort_as_half(b); }
template <typename T> static __device__ void atomic_combine16(T *p, float v, int red) {
    if (red == RED_ADD) {
        vxk_atomic_add_t(p, v);
        return;
    }
    unsigned *w = (unsigned *)((size_t)p & ~(size_t)3), sh = ((size_t)p & 2) ? 16u : 0u, old = *w, seen;
    do {
        seen = old;
        T now = vxk_st<T>(combine(vxk_ld(from_bits16<T>((unsigned short)(seen >> sh))), v, red));
        old = atomicCAS(w, seen, (seen & ~(0xffffu << sh)) | ((unsigned)bits16(now) << sh));
    } while (old != seen);
}
static __device__ void atomic_combine(vxk_bf16 *p, vxk_bf16 v, int red) { atomic_combine16(p, vxk_ld(v), red); }
static __device__ void atomic_combine(vxk_f16 *p, vxk_f16 v, int red) { atomic_combine16(p, vxk_ld(v), red); }
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
template <typename T>
static __global__ void scatter_nd_bwd_kernel(T *dx, T *du, const T *dy, const int64_t *idx, nd_geom g, int64_t n) {
    VXK_LOOP(t, n) {
        int64_t k = nd_src(g, idx, t);
        if (du) du[t] = k >= 0 ? dy[k] : vxk_st<T>(0.f);
        if (dx && k >= 0) dx[k] = vxk_st<T>(0.f);
    }
}

template <typename T> static vx_status scatter_nd_bwd_run(vx_ctx *ctx, void *dx, void *du, const void *dy,
                                                          const int64_t *idx, const nd_geom &g, int64_t n) {
    scatter_nd_bwd_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, vxk_stream(ctx)>>>((T *)dx, (T *)du, (const T *)dy, idx,
                                                                                g, n);
    return vxk_check(ctx, "ScatterND backward");
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
    if (red != RED_NONE && !vx_dtype_is_float(X->dtype) && X->dtype != VX_I64)
        return vx_fail(ctx, VX_EUNSUPPORTED, "ScatterND: a reduction of floating or int64 data only");
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
    else if (red != RED_NONE && X->dtype == VX_BF16)
        scatter_nd_reduce_kernel<vxk_bf16><<<b, VXK_THREADS, 0, s>>>((vxk_bf16 *)y, (const vxk_bf16 *)U->data, idx, g, n, red);
    else if (red != RED_NONE && X->dtype == VX_F16)
        scatter_nd_reduce_kernel<vxk_f16><<<b, VXK_THREADS, 0, s>>>((vxk_f16 *)y, (const vxk_f16 *)U->data, idx, g, n, red);
    else if (red != RED_NONE)
        scatter_nd_reduce_kernel<int64_t><<<b, VXK_THREADS, 0, s>>>((int64_t *)y, (const int64_t *)U->data, idx, g, n, red);
    else if (es == 4)
        scatter_nd_kernel<uint32_t><<<b, VXK_THREADS, 0, s>>>((uint32_t *)y, (const uint32_t *)U->data, idx, g, n);
    else if (es == 2)
        scatter_nd_kernel<uint16_t><<<b, VXK_THREADS, 0, s>>>((uint16_t *)y, (const uint16_t *)U->data, idx, g, n);
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
    void *dx = NULL, *du = NULL;
    size_t es = vx_dtype_size(X->dtype);
    if (gx) {
        if ((st = vxk_grad(ctx, run, 0))) return st;
        dx = run->grad_in[0]->data;
        size_t bytes = (size_t)X->numel * es;
        if (!dY) st = vxk_zero(ctx, dx, bytes);
        else if (bytes)
            st = cuda_ok(ctx, cudaMemcpyAsync(dx, dY->data, bytes, cudaMemcpyDeviceToDevice, vxk_stream(ctx)),
                         "ScatterND backward copy");
        if (st) return st;
        if (red == RED_ADD || !dY) dx = NULL; /* nothing to zero */
    }
    if (gu) {
        if ((st = vxk_grad(ctx, run, 2))) return st;
        du = run->grad_in[2]->data;
        if (!dY) {
            if ((st = vxk_zero(ctx, du, (size_t)run->in[2]->numel * es))) return st;
            du = NULL;
        }
    }
    int64_t n = run->in[2]->numel;
    if ((!dx && !du) || n == 0) return VX_OK;
    void *ws;
    const int64_t *idx = vxk_dev_i64(ctx, run->in[1], &ws, &st);
    if (!idx) return st;
    st = [&]() -> vx_status {
        VXK_FLOAT_DISPATCH(ctx, X->dtype, "ScatterND backward", scatter_nd_bwd_run<T>(ctx, dx, du, dY->data, idx, g, n));
    }();
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

#endif
