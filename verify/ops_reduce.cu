/*
 * ops_reduce.cu: the Reduce* ops other than ReduceMean / ReduceSum (those
 * are in ops_pool.cu), ArgMax, ArgMin, Hardmax, LpNormalization and
 * MeanVarianceNormalization.
 *
 * ReduceMax / ReduceMin / ReduceProd / ReduceL1 / ReduceL2 / ReduceSumSquare /
 * ReduceLogSum / ReduceLogSumExp: axes from the attribute or input 1 (read
 * on the host), keepdims, noop_with_empty_axes (vxk_reduce_axes). What
 * backward keeps is PyTorch's (derivatives.yaml), as layers/reduce.c says:
 *   amax / amin: self and result; the gradient goes to the positions equal
 *     to the result, split evenly among ties (scale_grad_by_count);
 *   prod: self and result (grad * result / self; zeros handled apart);
 *   linalg_vector_norm (L1, L2): self and result;
 *   logsumexp: self and result (grad * exp(self - result));
 *   x.pow(2).sum(): self;
 *   log(sum(x)): the sum only (saved[0], output-sized).
 * ArgMax / ArgMin: axis, keepdims, select_last_index; int64, no gradient.
 * LpNormalization: x / max(||x||_p, 1e-12) along axis, p 1 or 2, as
 *   F.normalize: keeps X, the norm and the clamped norm (saved[0], saved[1],
 *   one per row: linalg_vector_norm keeps its result, the divide its
 *   divisor).
 * MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over axes
 *   (default 0, 2, 3); keeps X, the centered X, the variance and the
 *   standard deviation per row.
 * Hardmax: a one-hot of the first maximum along axis (opset < 13: of the
 *   input coerced to 2-D at axis); no gradient.
 * Half precision: every op here takes bfloat16 / float16 X (float32
 * arithmetic, stores rounded; backward's per-output counts are float32
 * workspaces). LpNormalization's norms and MeanVarianceNormalization's
 * centered X and row statistics stay float32 (what layers/norm.c counts);
 * MeanVarianceNormalization's backward steps through dX in X's dtype.
 */
#include "ops_common.cuh"

#include <math.h>

/* What one pass reduces: an element transform, a combine, a finish. */
enum red_mode {
    RM_SUM,
    RM_MAX,
    RM_MIN,
    RM_PROD,
    RM_L1,          /* sum |x| */
    RM_L2,          /* sqrt(sum x^2) */
    RM_SUMSQ,       /* sum x^2 */
    RM_SUM_EXP,     /* ref + log(sum exp(x - ref)), ref = the max (logsumexp's second pass) */
    RM_COUNT_EQ,    /* how many x == ref (amax / amin ties) */
    RM_COUNT_ZERO,  /* how many x == 0 (prod backward) */
    RM_PROD_NONZERO /* the product of the non-zero x (prod backward) */
};

/* NaN-propagating max / min, as torch.amax / amin. */
static __device__ __forceinline__ float red_max(float a, float b) { return (a > b || a != a) ? a : b; }
static __device__ __forceinline__ float red_min(float a, float b) { return (a < b || a != a) ? a : b; }

static __device__ __forceinline__ float red_init(int m) {
    return m == RM_MAX ? -INFINITY : m == RM_MIN ? INFINITY : (m == RM_PROD || m == RM_PROD_NONZERO) ? 1.f : 0.f;
}

static __device__ __forceinline__ float red_pre(int m, float x, float ref) {
    switch (m) {
    case RM_L1: return fabsf(x);
    case RM_L2: case RM_SUMSQ: return x * x;
    case RM_SUM_EXP: return expf(x - ref);
    case RM_COUNT_EQ: return x == ref ? 1.f : 0.f;
    case RM_COUNT_ZERO: return x == 0.f ? 1.f : 0.f;
    case RM_PROD_NONZERO: return x == 0.f ? 1.f : x;
    default: return x;
    }
}

static __device__ __forceinline__ float red_combine(int m, float a, float b) {
    switch (m) {
    case RM_MAX: return red_max(a, b);
    case RM_MIN: return red_min(a, b);
    case RM_PROD: case RM_PROD_NONZERO: return a * b;
    default: return a + b;
    }
}

static __device__ __forceinline__ float red_finish(int m, float acc, float ref) {
    if (m == RM_L2) return sqrtf(acc);
    if (m == RM_SUM_EXP) return ref + logf(acc);
    return acc;
}

/* logsumexp's shift: the max, or 0 when it is infinite (all -inf, or an inf). */
template <typename TR> static __device__ __forceinline__ float red_ref(int m, const TR *ref, int64_t o) {
    if (!ref) return 0.f;
    float r = vxk_ld(ref[o]);
    if (m == RM_SUM_EXP && isinf(r)) return 0.f;
    return r;
}

/* One thread per output element. out may alias ref (each reads its own ref[o] first). */
template <typename TO, typename TI, typename TR>
static __global__ void red_thread_kernel(TO *out, const TI *in, const TR *ref, vxk_reduce r, int m) {
    VXK_LOOP(o, r.n_out) {
        int64_t base = vxk_unravel(r.nk, r.kdims, r.kstride, o);
        float rv = red_ref(m, ref, o), acc = red_init(m);
        for (int64_t j = 0; j < r.n_red; j++)
            acc = red_combine(m, acc, red_pre(m, vxk_ld(in[base + vxk_unravel(r.nr, r.rdims, r.rstride, j)]), rv));
        out[o] = vxk_st<TO>(red_finish(m, acc, rv));
    }
}

/* One block per output element (few outputs, long reductions). */
template <typename TO, typename TI, typename TR>
static __global__ void red_block_kernel(TO *out, const TI *in, const TR *ref, vxk_reduce r, int m) {
    __shared__ float sh[VXK_THREADS];
    for (int64_t o = blockIdx.x; o < r.n_out; o += gridDim.x) {
        int64_t base = vxk_unravel(r.nk, r.kdims, r.kstride, o);
        float rv = red_ref(m, ref, o), acc = red_init(m);
        for (int64_t j = threadIdx.x; j < r.n_red; j += blockDim.x)
            acc = red_combine(m, acc, red_pre(m, vxk_ld(in[base + vxk_unravel(r.nr, r.rdims, r.rstride, j)]), rv));
        sh[threadIdx.x] = acc;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if ((int)threadIdx.x < s) sh[threadIdx.x] = red_combine(m, sh[threadIdx.x], sh[threadIdx.x + s]);
            __syncthreads();
        }
        if (threadIdx.x == 0) out[o] = vxk_st<TO>(red_finish(m, sh[0], rv));
        __syncthreads();
    }
}

/* out (TO) from in (TI), ref (TR: the max for logsumexp and the ties, or
 * NULL); float32 inside. */
template <typename TO, typename TI, typename TR>
static vx_status red_run(vx_ctx *ctx, TO *out, const TI *in, const TR *ref, const vxk_reduce *r, int m) {
    if (r->n_out == 0) return VX_OK;
    cudaStream_t s = vxk_stream(ctx);
    if (r->n_out < 4096 && r->n_red >= 64) {
        unsigned g = (unsigned)(r->n_out < 65536 ? r->n_out : 65536);
        red_block_kernel<<<g, VXK_THREADS, 0, s>>>(out, in, ref, *r, m);
    } else {
        red_thread_kernel<<<vxk_blocks(r->n_out), VXK_THREADS, 0, s>>>(out, in, ref, *r, m);
    }
    return vxk_check(ctx, "reduce kernel");
}

template <typename T> static __global__ void log_kernel(T *y, const T *x, int64_t n) {
    VXK_LOOP(i, n) y[i] = vxk_st<T>(logf(vxk_ld(x[i])));
}

/* Which op is which. */
typedef struct red_kind {
    const char *name;
    int mode;
} red_kind;

/* The reduction of X = in[0] (r), its reduced axes (red[]) and output shape. */
static vx_status red_setup(vx_ctx *ctx, vx_run *run, const char *op, vxk_reduce *r, bool *red, int *orank,
                           int64_t *od) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "%s needs X", op);
    const vx_tensor *X = run->in[0];
    if (!vx_dtype_is_float(X->dtype)) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: a floating X only", op);
    bool keep[VX_MAX_RANK];
    vx_status st = vxk_reduce_axes(ctx, run, op, red, orank, od);
    if (st) return st;
    for (int i = 0; i < X->rank; i++) keep[i] = !red[i];
    vxk_reduce_make(r, X->rank, X->dims, keep);
    return VX_OK;
}

template <typename T>
static vx_status red_forward_t(vx_ctx *ctx, vx_run *run, const char *op, int mode, const vxk_reduce &r, int orank,
                               const int64_t *od) {
    vx_status st;
    const T *x = (const T *)run->in[0]->data, *none = NULL;
    T *y = (T *)run->out[0]->data;
    if (!strcmp(op, "ReduceLogSum")) {
        /* log keeps the sum it was given: saved[0] (X's dtype), for backward only */
        if ((st = vxk_new_saved(ctx, run, 0, run->in[0]->dtype, orank, od))) return st;
        if (r.n_out == 0) return VX_OK;
        if ((st = red_run(ctx, (T *)run->saved[0]->data, x, none, &r, RM_SUM))) return st;
        log_kernel<T><<<vxk_blocks(r.n_out), VXK_THREADS, 0, vxk_stream(ctx)>>>(y, (const T *)run->saved[0]->data, r.n_out);
        return vxk_check(ctx, op);
    }
    if (mode == RM_SUM_EXP) {
        if ((st = red_run(ctx, y, x, none, &r, RM_MAX))) return st;
        return red_run(ctx, y, x, (const T *)y, &r, RM_SUM_EXP);
    }
    return red_run(ctx, y, x, none, &r, mode);
}

static vx_status red_forward(vx_ctx *ctx, vx_run *run, const char *op, int mode) {
    vxk_reduce r;
    bool red[VX_MAX_RANK];
    int orank;
    int64_t od[VX_MAX_RANK];
    vx_status st = red_setup(ctx, run, op, &r, red, &orank, od);
    if (st) return st;
    vx_dtype dt = run->in[0]->dtype;
    if ((st = vxk_new_out(ctx, run, 0, dt, orank, od))) return st;
    VXK_FLOAT_DISPATCH(ctx, dt, op, red_forward_t<T>(ctx, run, op, mode, r, orank, od));
}

/* dX[i] from dY at i's output o; aux / aux2: per-output counts or products. */
template <typename T, typename TA>
static __global__ void red_bwd_kernel(T *dx, const T *dy, const T *x, const T *y, const TA *aux, const float *aux2,
                                      vxk_bcast b, int64_t n, int m) {
    VXK_LOOP(i, n) {
        int64_t o = vxk_bcast_off(b, i);
        float g = vxk_ld(dy[o]), v = x ? vxk_ld(x[i]) : 0.f, r;
        switch (m) {
        case RM_MAX: case RM_MIN: r = v == vxk_ld(y[o]) ? g / vxk_ld(aux[o]) : 0.f; break;
        case RM_PROD: {
            float zeros = vxk_ld(aux[o]);
            if (zeros == 0.f) r = g * vxk_ld(y[o]) / v;
            else if (zeros == 1.f) r = v == 0.f ? g * aux2[o] : 0.f;
            else r = 0.f;
            break;
        }
        case RM_L1: r = v > 0.f ? g : v < 0.f ? -g : 0.f; break;
        case RM_L2: r = vxk_ld(y[o]) == 0.f ? 0.f : g * v / vxk_ld(y[o]); break;
        case RM_SUMSQ: r = 2.f * v * g; break;
        case RM_SUM: r = g / vxk_ld(aux[o]); break; /* ReduceLogSum: d log(s) = ds / s */
        case RM_SUM_EXP: r = g * expf(v - vxk_ld(y[o])); break;
        default: r = 0.f;
        }
        dx[i] = vxk_st<T>(r);
    }
}

template <typename T>
static vx_status red_backward_t(vx_ctx *ctx, vx_run *run, const char *op, int mode, const vxk_reduce &r,
                                const bool *red) {
    vx_status st;
    const vx_tensor *X = run->in[0], *dY = run->grad_out[0];
    vx_tensor *dX = run->grad_in[0];
    T *dx = (T *)dX->data;
    bool logsum = !strcmp(op, "ReduceLogSum");
    /* only what the op keeps: X (not for ReduceLogSum), Y (not for
     * ReduceLogSum, ReduceSumSquare, ReduceL1) */
    bool reads_y = mode == RM_MAX || mode == RM_MIN || mode == RM_PROD || mode == RM_L2 || mode == RM_SUM_EXP;
    const T *x = logsum ? NULL : (const T *)X->data, *none = NULL;
    const T *y = reads_y ? (const T *)run->out[0]->data : NULL;
    float *aux = NULL, *aux2 = NULL;
    size_t obytes = (size_t)r.n_out * sizeof(float);
    if (mode == RM_MAX || mode == RM_MIN || mode == RM_PROD) {
        aux = (float *)vx_workspace(ctx, obytes);
        if (!aux) return vxk_oom(ctx, op);
        if ((st = red_run(ctx, aux, x, y, &r, mode == RM_PROD ? RM_COUNT_ZERO : RM_COUNT_EQ))) goto done;
        if (mode == RM_PROD) {
            aux2 = (float *)vx_workspace(ctx, obytes);
            if (!aux2) { st = vxk_oom(ctx, op); goto done; }
            if ((st = red_run(ctx, aux2, x, none, &r, RM_PROD_NONZERO))) goto done;
        }
    }
    {
        int64_t kd[VX_MAX_RANK];
        for (int i = 0; i < X->rank; i++) kd[i] = red[i] ? 1 : X->dims[i];
        vxk_bcast b;
        vxk_bcast_make(&b, X->rank, X->dims, X->rank, kd);
        unsigned nb = vxk_blocks(dX->numel);
        if (logsum) /* the sum ReduceLogSum kept, in X's dtype */
            red_bwd_kernel<T, T><<<nb, VXK_THREADS, 0, vxk_stream(ctx)>>>(
                dx, (const T *)dY->data, x, y, (const T *)run->saved[0]->data, aux2, b, dX->numel, RM_SUM);
        else
            red_bwd_kernel<T, float><<<nb, VXK_THREADS, 0, vxk_stream(ctx)>>>(dx, (const T *)dY->data, x, y, aux, aux2,
                                                                              b, dX->numel, mode);
        st = vxk_check(ctx, op);
    }
done:
    vx_free(ctx, aux);
    vx_free(ctx, aux2);
    return st;
}

static vx_status red_backward(vx_ctx *ctx, vx_run *run, const char *op, int mode) {
    if (!run->need_grad[0]) return VX_OK;
    vxk_reduce r;
    bool red[VX_MAX_RANK];
    int orank;
    int64_t od[VX_MAX_RANK];
    vx_status st = red_setup(ctx, run, op, &r, red, &orank, od);
    if (st) return st;
    if ((st = vxk_grad(ctx, run, 0))) return st;
    vx_tensor *dX = run->grad_in[0];
    if (!run->grad_out[0]) return vxk_zero(ctx, dX->data, (size_t)dX->numel * vx_dtype_size(dX->dtype));
    if (dX->numel == 0) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, dX->dtype, op, red_backward_t<T>(ctx, run, op, mode, r, red));
}

#define RED_OP(fn, op, mode)                                                                               \
    static vx_status fn##_forward(vx_ctx *ctx, vx_run *run) { return red_forward(ctx, run, op, mode); }   \
    static vx_status fn##_backward(vx_ctx *ctx, vx_run *run) { return red_backward(ctx, run, op, mode); }

RED_OP(reducemax, "ReduceMax", RM_MAX)
RED_OP(reducemin, "ReduceMin", RM_MIN)
RED_OP(reduceprod, "ReduceProd", RM_PROD)
RED_OP(reducel1, "ReduceL1", RM_L1)
RED_OP(reducel2, "ReduceL2", RM_L2)
RED_OP(reducesumsquare, "ReduceSumSquare", RM_SUMSQ)
RED_OP(reducelogsum, "ReduceLogSum", RM_SUM)
RED_OP(reducelogsumexp, "ReduceLogSumExp", RM_SUM_EXP)

/* ---- ArgMax, ArgMin, Hardmax --------------------------------------------------- */

/* Along one axis: X seen as (outer, len, inner). */
typedef struct axis_split {
    int64_t outer, len, inner;
} axis_split;

/* The index of the max (or min) of row (o, ., in): the first one, or the last
 * when select_last; a NaN wins (as numpy / PyTorch). */
template <typename T>
static __device__ __forceinline__ int64_t arg_pick(const T *x, axis_split s, int64_t row, bool is_max, bool select_last) {
    int64_t o = row / s.inner, in = row % s.inner;
    const T *p = x + o * s.len * s.inner + in;
    int64_t bi = 0;
    float best = s.len > 0 ? vxk_ld(p[0]) : 0.f;
    for (int64_t k = 1; k < s.len && best == best; k++) {
        float v = vxk_ld(p[k * s.inner]);
        bool better = v != v || (is_max ? v > best : v < best) || (select_last && v == best);
        if (better) { best = v; bi = k; }
    }
    return bi;
}

template <typename T>
static __global__ void arg_kernel(int64_t *y, const T *x, axis_split s, bool is_max, bool select_last) {
    VXK_LOOP(row, s.outer * s.inner) y[row] = arg_pick(x, s, row, is_max, select_last);
}

template <typename T> static __global__ void hardmax_kernel(T *y, const T *x, axis_split s) {
    VXK_LOOP(row, s.outer * s.inner) {
        int64_t bi = arg_pick(x, s, row, true, false), o = row / s.inner, in = row % s.inner;
        T *q = y + o * s.len * s.inner + in;
        for (int64_t k = 0; k < s.len; k++) q[k * s.inner] = vxk_st<T>(k == bi ? 1.f : 0.f);
    }
}

template <typename T>
static vx_status arg_run(vx_ctx *ctx, int64_t *y, const void *x, axis_split s, bool is_max, bool select_last, int64_t n) {
    arg_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, vxk_stream(ctx)>>>(y, (const T *)x, s, is_max, select_last);
    return VX_OK;
}

template <typename T> static vx_status hardmax_run(vx_ctx *ctx, void *y, const void *x, axis_split s) {
    hardmax_kernel<T><<<vxk_blocks(s.outer * s.inner), VXK_THREADS, 0, vxk_stream(ctx)>>>((T *)y, (const T *)x, s);
    return VX_OK;
}

static vx_status arg_forward(vx_ctx *ctx, vx_run *run, const char *op, bool is_max) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "%s needs X", op);
    const vx_tensor *X = run->in[0];
    if (!vx_dtype_is_float(X->dtype)) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: a floating X only", op);
    int rank = X->rank > 0 ? X->rank : 1;
    int axis = vxk_axis(vxk_attr_int(run, "axis", 0), rank);
    if (axis < 0) return vx_fail(ctx, VX_ESHAPE, "%s: axis out of range", op);
    bool keepdims = vxk_attr_int(run, "keepdims", 1) != 0;
    bool select_last = vxk_attr_int(run, "select_last_index", 0) != 0;
    axis_split s = {vxk_prod(X->dims, 0, axis), X->rank ? X->dims[axis] : 1, vxk_prod(X->dims, axis + 1, X->rank)};
    if (s.len == 0 && s.outer * s.inner > 0) return vx_fail(ctx, VX_ESHAPE, "%s: empty axis", op);
    int64_t od[VX_MAX_RANK];
    int orank = 0;
    for (int i = 0; i < X->rank; i++) {
        if (i != axis) od[orank++] = X->dims[i];
        else if (keepdims) od[orank++] = 1;
    }
    vx_status st = vxk_new_out(ctx, run, 0, VX_I64, orank, od);
    if (st || run->out[0]->numel == 0) return st;
    st = [&]() -> vx_status {
        VXK_FLOAT_DISPATCH(ctx, X->dtype, op, arg_run<T>(ctx, (int64_t *)run->out[0]->data, X->data, s, is_max,
                                                         select_last, run->out[0]->numel));
    }();
    return st ? st : vxk_check(ctx, op);
}

static vx_status argmax_forward(vx_ctx *ctx, vx_run *run) { return arg_forward(ctx, run, "ArgMax", true); }
static vx_status argmin_forward(vx_ctx *ctx, vx_run *run) { return arg_forward(ctx, run, "ArgMin", false); }

static vx_status hardmax_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "Hardmax needs X");
    const vx_tensor *X = run->in[0];
    if (!vx_dtype_is_float(X->dtype)) return vx_fail(ctx, VX_EUNSUPPORTED, "Hardmax: a floating X only");
    bool coerce_2d = vxk_opset(run) < 13; /* opset 1-11: Hardmax over dims[axis:] flattened */
    int axis = vxk_axis(vxk_attr_int(run, "axis", coerce_2d ? 1 : -1), X->rank);
    if (axis < 0) return vx_fail(ctx, VX_ESHAPE, "Hardmax: axis out of range (X rank %d)", X->rank);
    axis_split s;
    if (coerce_2d) s = {vxk_prod(X->dims, 0, axis), vxk_prod(X->dims, axis, X->rank), 1};
    else s = {vxk_prod(X->dims, 0, axis), X->dims[axis], vxk_prod(X->dims, axis + 1, X->rank)};
    vx_status st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, X->dims);
    if (st || run->out[0]->numel == 0) return st;
    st = [&]() -> vx_status { VXK_FLOAT_DISPATCH(ctx, X->dtype, "Hardmax", hardmax_run<T>(ctx, run->out[0]->data, X->data, s)); }();
    return st ? st : vxk_check(ctx, "Hardmax");
}

/* Backward reads the axes (input 1, a host constant) to map dX onto dY. */
/* ---- LpNormalization --------------------------------------------------------- */

#define LPN_EPS 1e-12f /* F.normalize's default eps */

/* One thread per row (o, ., in): norm, clamped norm (float32 whatever T), y. */
template <typename T>
static __global__ void lpnorm_kernel(T *y, float *norm, float *clamped, const T *x, axis_split s, int p) {
    VXK_LOOP(row, s.outer * s.inner) {
        int64_t o = row / s.inner, in = row % s.inner;
        const T *xr = x + o * s.len * s.inner + in;
        float acc = 0.f;
        for (int64_t k = 0; k < s.len; k++) {
            float v = vxk_ld(xr[k * s.inner]);
            acc += p == 1 ? fabsf(v) : v * v;
        }
        float n = p == 1 ? acc : sqrtf(acc), c = n > LPN_EPS ? n : LPN_EPS;
        norm[row] = n;
        clamped[row] = c;
        T *yr = y + o * s.len * s.inner + in;
        for (int64_t k = 0; k < s.len; k++) yr[k * s.inner] = vxk_st<T>(vxk_ld(xr[k * s.inner]) / c);
    }
}

/* dx = dy / c - (sum dy x) / c^2 * dn/dx, dn/dx = x / n (p 2) or sign(x) (p 1),
 * zero where the clamp held n. */
template <typename T>
static __global__ void lpnorm_bwd_kernel(T *dx, const T *dy, const T *x, const float *norm, const float *clamped,
                                         axis_split s, int p) {
    VXK_LOOP(row, s.outer * s.inner) {
        int64_t o = row / s.inner, in = row % s.inner, base = o * s.len * s.inner + in;
        float n = norm[row], c = clamped[row], dot = 0.f;
        for (int64_t k = 0; k < s.len; k++) dot += vxk_ld(dy[base + k * s.inner]) * vxk_ld(x[base + k * s.inner]);
        bool through = n > LPN_EPS;
        for (int64_t k = 0; k < s.len; k++) {
            float v = vxk_ld(x[base + k * s.inner]);
            float dn = !through ? 0.f : p == 1 ? (v > 0.f ? 1.f : v < 0.f ? -1.f : 0.f) : v / n;
            dx[base + k * s.inner] = vxk_st<T>(vxk_ld(dy[base + k * s.inner]) / c - dot / (c * c) * dn);
        }
    }
}

static vx_status lpnorm_geom(vx_ctx *ctx, const vx_run *run, axis_split *s, int *p, int64_t *sd) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "LpNormalization needs X");
    const vx_tensor *X = run->in[0];
    if (!vx_dtype_is_float(X->dtype)) return vx_fail(ctx, VX_EUNSUPPORTED, "LpNormalization: a floating X only");
    int axis = vxk_axis(vxk_attr_int(run, "axis", -1), X->rank);
    if (axis < 0) return vx_fail(ctx, VX_ESHAPE, "LpNormalization: axis out of range");
    int64_t pi = vxk_attr_int(run, "p", 2);
    if (pi != 1 && pi != 2) return vx_fail(ctx, VX_EUNSUPPORTED, "LpNormalization: p %lld (only 1 and 2)", (long long)pi);
    *p = (int)pi;
    *s = {vxk_prod(X->dims, 0, axis), X->dims[axis], vxk_prod(X->dims, axis + 1, X->rank)};
    for (int i = 0; i < X->rank; i++) sd[i] = i == axis ? 1 : X->dims[i];
    return VX_OK;
}

template <typename T> static vx_status lpnorm_forward_t(vx_ctx *ctx, vx_run *run, const axis_split &s, int p) {
    lpnorm_kernel<T><<<vxk_blocks(s.outer * s.inner), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (T *)run->out[0]->data, (float *)run->saved[0]->data, (float *)run->saved[1]->data,
        (const T *)run->in[0]->data, s, p);
    return vxk_check(ctx, "LpNormalization");
}

/* The norms stay float32 (saved[0], saved[1]), as layers/norm.c's
 * lpnorm_saves counts them (X's export dtype). */
static vx_status lpnorm_forward(vx_ctx *ctx, vx_run *run) {
    axis_split s;
    int p;
    int64_t sd[VX_MAX_RANK];
    vx_status st = lpnorm_geom(ctx, run, &s, &p, sd);
    if (st) return st;
    const vx_tensor *X = run->in[0];
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, X->dims))) return st;
    if ((st = vxk_new_saved(ctx, run, 0, VX_F32, X->rank, sd))) return st;
    if ((st = vxk_new_saved(ctx, run, 1, VX_F32, X->rank, sd))) return st;
    if (s.outer * s.inner == 0) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, X->dtype, "LpNormalization", lpnorm_forward_t<T>(ctx, run, s, p));
}

template <typename T> static vx_status lpnorm_backward_t(vx_ctx *ctx, vx_run *run, const axis_split &s, int p) {
    lpnorm_bwd_kernel<T><<<vxk_blocks(s.outer * s.inner), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (T *)run->grad_in[0]->data, (const T *)run->grad_out[0]->data, (const T *)run->in[0]->data,
        (const float *)run->saved[0]->data, (const float *)run->saved[1]->data, s, p);
    return vxk_check(ctx, "LpNormalization backward");
}

static vx_status lpnorm_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    axis_split s;
    int p;
    int64_t sd[VX_MAX_RANK];
    vx_status st = lpnorm_geom(ctx, run, &s, &p, sd);
    if (st) return st;
    if ((st = vxk_grad(ctx, run, 0))) return st;
    vx_tensor *dX = run->grad_in[0];
    if (!run->grad_out[0] || dX->numel == 0) return vxk_zero(ctx, dX->data, (size_t)dX->numel * vx_dtype_size(dX->dtype));
    VXK_FLOAT_DISPATCH(ctx, dX->dtype, "LpNormalization backward", lpnorm_backward_t<T>(ctx, run, s, p));
}

/* ---- MeanVarianceNormalization --------------------------------------------------- */

#define MVN_EPS 1e-9f /* ONNX's function body: (X - mean) / (sqrt(var) + 1e-9) */

template <typename T>
static __global__ void mvn_center_kernel(float *c, const T *x, const float *mean, vxk_bcast b, int64_t n) {
    VXK_LOOP(i, n) c[i] = vxk_ld(x[i]) - mean[vxk_bcast_off(b, i)];
}

static __global__ void mvn_std_kernel(float *var, float *sd, int64_t rows, float inv_cnt) {
    VXK_LOOP(r, rows) {
        var[r] *= inv_cnt;
        sd[r] = sqrtf(var[r]);
    }
}

template <typename T>
static __global__ void mvn_apply_kernel(T *y, const float *c, const float *sd, vxk_bcast b, int64_t n) {
    VXK_LOOP(i, n) y[i] = vxk_st<T>(c[i] / (sd[vxk_bcast_off(b, i)] + MVN_EPS));
}

template <typename T> static __global__ void mvn_mul_kernel(T *p, const T *dy, const float *c, int64_t n) {
    VXK_LOOP(i, n) p[i] = vxk_st<T>(vxk_ld(dy[i]) * c[i]);
}

/* The gradient on the centered x: dy / (s + e) through y, and through the
 * variance: -c * sum(dy c) / ((s + e)^2 s cnt). */
template <typename T>
static __global__ void mvn_dc_kernel(T *dc, const T *dy, const float *c, const float *sd, const float *dot, vxk_bcast b,
                                     int64_t n, float inv_cnt) {
    VXK_LOOP(i, n) {
        int64_t o = vxk_bcast_off(b, i);
        float s = sd[o], d = s + MVN_EPS;
        dc[i] = vxk_st<T>(vxk_ld(dy[i]) / d - (s > 0.f ? c[i] * dot[o] / (d * d * s) * inv_cnt : 0.f));
    }
}

template <typename T> static __global__ void mvn_sub_kernel(T *dx, const float *m, vxk_bcast b, int64_t n) {
    VXK_LOOP(i, n) dx[i] = vxk_st<T>(vxk_ld(dx[i]) - m[vxk_bcast_off(b, i)]);
}

/* rows = scale * the sums of `in` over the reduced dims, in float32:
 * vxk_reduce_run for float32 storage, red_run and a scale for half. */
static vx_status mvn_row_sums(vx_ctx *ctx, float *rows, const float *in, const vxk_reduce *r, float scale) {
    return vxk_reduce_run(ctx, rows, in, r, scale, 0.f);
}
template <typename T>
static vx_status mvn_row_sums(vx_ctx *ctx, float *rows, const T *in, const vxk_reduce *r, float scale) {
    vx_status st = red_run(ctx, rows, in, (const float *)NULL, r, RM_SUM);
    if (st || r->n_out == 0) return st;
    vxk_scale_kernel<<<vxk_blocks(r->n_out), VXK_THREADS, 0, vxk_stream(ctx)>>>(rows, rows, r->n_out, scale);
    return vxk_check(ctx, "MeanVarianceNormalization row sums");
}

typedef struct mvn_geom {
    vxk_reduce r;
    vxk_bcast b;
    int64_t sd[VX_MAX_RANK], cnt;
} mvn_geom;

static vx_status mvn_geom_make(vx_ctx *ctx, const vx_run *run, mvn_geom *g) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "MeanVarianceNormalization needs X");
    const vx_tensor *X = run->in[0];
    if (!vx_dtype_is_float(X->dtype)) return vx_fail(ctx, VX_EUNSUPPORTED, "MeanVarianceNormalization: a floating X only");
    static const int64_t default_axes[] = {0, 2, 3};
    int64_t n;
    const int64_t *axes = vxk_attr_ints(run, "axes", &n);
    if (!axes) { axes = default_axes; n = 3; }
    bool keep[VX_MAX_RANK];
    for (int i = 0; i < X->rank; i++) keep[i] = true;
    for (int64_t k = 0; k < n; k++) {
        int a = vxk_axis(axes[k], X->rank);
        if (a < 0) return vx_fail(ctx, VX_ESHAPE, "MeanVarianceNormalization: axis %lld out of range", (long long)axes[k]);
        keep[a] = false;
    }
    g->cnt = 1;
    for (int i = 0; i < X->rank; i++) {
        g->sd[i] = keep[i] ? X->dims[i] : 1;
        if (!keep[i]) g->cnt *= X->dims[i];
    }
    vxk_reduce_make(&g->r, X->rank, X->dims, keep);
    vxk_bcast_make(&g->b, X->rank, X->dims, X->rank, g->sd);
    return VX_OK;
}

template <typename T> static vx_status mvn_forward_t(vx_ctx *ctx, vx_run *run, const mvn_geom &g) {
    const T *x = (const T *)run->in[0]->data;
    int64_t n = run->in[0]->numel, rows = run->saved[1]->numel;
    float *c = (float *)run->saved[0]->data, *var = (float *)run->saved[1]->data, *sd = (float *)run->saved[2]->data;
    cudaStream_t s = vxk_stream(ctx);
    /* the mean goes through var's storage, which the variance then overwrites */
    vx_status st = mvn_row_sums(ctx, var, x, &g.r, 1.f / (float)g.cnt);
    if (st) return st;
    mvn_center_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, s>>>(c, x, var, g.b, n);
    if ((st = red_run(ctx, var, (const float *)c, (const float *)NULL, &g.r, RM_SUMSQ))) return st;
    mvn_std_kernel<<<vxk_blocks(rows), VXK_THREADS, 0, s>>>(var, sd, rows, 1.f / (float)g.cnt);
    mvn_apply_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, s>>>((T *)run->out[0]->data, c, sd, g.b, n);
    return vxk_check(ctx, "MeanVarianceNormalization");
}

/* Keeps X (the variance's E[X^2] reads it), the centered X (saved[0]), the
 * variance and the standard deviation per row (saved[1], saved[2]), as
 * layers/norm.c's mvn_saves: float32 whatever X's dtype (the rule counts
 * them in X's export dtype). */
static vx_status mvn_forward(vx_ctx *ctx, vx_run *run) {
    mvn_geom g;
    vx_status st = mvn_geom_make(ctx, run, &g);
    if (st) return st;
    const vx_tensor *X = run->in[0];
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, X->dims))) return st;
    if ((st = vxk_new_saved(ctx, run, 0, VX_F32, X->rank, X->dims))) return st;
    if ((st = vxk_new_saved(ctx, run, 1, VX_F32, X->rank, g.sd))) return st;
    if ((st = vxk_new_saved(ctx, run, 2, VX_F32, X->rank, g.sd))) return st;
    if (X->numel == 0) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, X->dtype, "MeanVarianceNormalization", mvn_forward_t<T>(ctx, run, g));
}

/* dX holds dy * c, then dc, then dc - mean(dc) (in X's dtype). */
template <typename T> static vx_status mvn_backward_t(vx_ctx *ctx, vx_run *run, const mvn_geom &g, float *row) {
    int64_t n = run->grad_in[0]->numel;
    T *dx = (T *)run->grad_in[0]->data;
    const T *dy = (const T *)run->grad_out[0]->data;
    const float *c = (const float *)run->saved[0]->data, *sd = (const float *)run->saved[2]->data;
    cudaStream_t s = vxk_stream(ctx);
    float inv_cnt = 1.f / (float)g.cnt;
    mvn_mul_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, s>>>(dx, dy, c, n);
    vx_status st = mvn_row_sums(ctx, row, (const T *)dx, &g.r, 1.f);
    if (st) return st;
    mvn_dc_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, s>>>(dx, dy, c, sd, row, g.b, n, inv_cnt);
    if ((st = mvn_row_sums(ctx, row, (const T *)dx, &g.r, inv_cnt))) return st;
    mvn_sub_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, s>>>(dx, row, g.b, n);
    return vxk_check(ctx, "MeanVarianceNormalization backward");
}

static vx_status mvn_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    mvn_geom g;
    vx_status st = mvn_geom_make(ctx, run, &g);
    if (st) return st;
    if ((st = vxk_grad(ctx, run, 0))) return st;
    vx_tensor *dX = run->grad_in[0];
    int64_t rows = run->saved[1]->numel;
    if (!run->grad_out[0] || dX->numel == 0) return vxk_zero(ctx, dX->data, (size_t)dX->numel * vx_dtype_size(dX->dtype));
    float *row = (float *)vx_workspace(ctx, (size_t)rows * sizeof(float));
    if (!row) return vxk_oom(ctx, "MeanVarianceNormalization backward");
    st = [&]() -> vx_status {
        VXK_FLOAT_DISPATCH(ctx, dX->dtype, "MeanVarianceNormalization backward", mvn_backward_t<T>(ctx, run, g, row));
    }();
    vx_free(ctx, row);
    return st;
}

#define X_AXES (VX_SLOT(0) | VX_SLOT(1))
extern "C" {
const vx_op vx_ops_reduce[] = {
    {"ReduceMax", reducemax_forward, reducemax_backward, X_AXES, VX_SLOT(0), false, VX_SLOT(1), NULL, 0, VX_HALF},
    {"ReduceMin", reducemin_forward, reducemin_backward, X_AXES, VX_SLOT(0), false, VX_SLOT(1), NULL, 0, VX_HALF},
    {"ReduceProd", reduceprod_forward, reduceprod_backward, X_AXES, VX_SLOT(0), false, VX_SLOT(1), NULL, 0, VX_HALF},
    {"ReduceL1", reducel1_forward, reducel1_backward, X_AXES, VX_SLOT(0), false, VX_SLOT(1), NULL, 0, VX_HALF},
    {"ReduceL2", reducel2_forward, reducel2_backward, X_AXES, VX_SLOT(0), false, VX_SLOT(1), NULL, 0, VX_HALF},
    {"ReduceSumSquare", reducesumsquare_forward, reducesumsquare_backward, X_AXES, 0, false, VX_SLOT(1),
     NULL, 0, VX_HALF},
    {"ReduceLogSum", reducelogsum_forward, reducelogsum_backward, VX_SLOT(1), 0, false, VX_SLOT(1), NULL, 0, VX_HALF},
    {"ReduceLogSumExp", reducelogsumexp_forward, reducelogsumexp_backward, X_AXES, VX_SLOT(0), false,
     VX_SLOT(1), NULL, 0, VX_HALF},
    {"ArgMax", argmax_forward, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"ArgMin", argmin_forward, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Hardmax", hardmax_forward, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"LpNormalization", lpnorm_forward, lpnorm_backward, VX_SLOT(0), 0, false, 0, NULL, 0, VX_HALF},
    {"MeanVarianceNormalization", mvn_forward, mvn_backward, VX_SLOT(0), 0, false, 0, NULL, 0, VX_HALF},
};
const size_t vx_ops_reduce_count = sizeof vx_ops_reduce / sizeof vx_ops_reduce[0];
}
