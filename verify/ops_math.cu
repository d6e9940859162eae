/*
 * ops_math.cu: the element-wise ops the two-input kernels of
 * ops_elementwise.cu and ops_unary.cu hand over to, and IsNaN / IsInf.
 *
 * Max / Min of n inputs (numpy broadcasting): PyTorch runs them as a chain
 *   of n - 1 torch.maximum / minimum, m1 = max(x0, x1), m2 = max(m1, x2)...
 *   Each link keeps both operands, so the chain keeps every input and the
 *   n - 2 intermediate results: saved[0] holds them, (n - 2) x the output's
 *   numel (broadcast to the output's shape, as layers/math.c counts them).
 *   Backward routes the gradient through the chain: at each link the winner
 *   takes it, a tie halves it (as the two-input kernel does).
 *   The Max / Min rows of ops_elementwise.cu call these for n != 2.
 * Pow with a tensor exponent (or a scalar exponent that needs a gradient):
 *   y = x ^ e, broadcasting. d/dx = g * e * x^(e-1) (0 where e == 0),
 *   d/de = g * y * log(x) (0 where x == 0 and e >= 0), as pow.Tensor_Tensor:
 *   keeps x, e, and y when e needs a gradient. Pow's row in ops_unary.cu
 *   calls these; its scalar path keeps x only.
 *   Both take float32, bfloat16 or float16 storage (float32 arithmetic; the
 *   chain's links kept in the operands' dtype; an int64 or host-only
 *   exponent converted to float32 in a workspace, as before).
 * PRelu: y = x < 0 ? slope * x : x, slope broadcasting to x
 *   (_prelu_kernel: keeps x and slope). dX = x > 0 ? g : slope * g; dSlope
 *   is x * g where x <= 0, made at x's size (a workspace) and summed to the
 *   slope's shape, as autograd's sum_to does.
 * Sum / Mean of n inputs (broadcasting): keep nothing; each input's gradient
 *   is the output's (Mean: / n) summed to its shape (a view of the output
 *   gradient for Sum when the shapes match, as add's backward passes it on).
 *   PRelu, Sum and Mean take float32, bfloat16 or float16 storage too
 *   (float32 arithmetic; PRelu's dSlope workspace in the operands' dtype);
 *   Sum also int64.
 * BitwiseNot / And / Or / Xor, BitShift (direction): int64, broadcasting,
 *   no gradient (BitShift on the bits as unsigned, a shift by 64 or more
 *   giving 0).
 * CastLike: Cast to input 1's dtype (ops_elementwise.cu's vx_k_cast); its
 *   gradient is Cast's, the output gradient passed on.
 * IsNaN / IsInf (detect_negative, detect_positive): bool, no gradient.
 */
#include "ops_common.cuh"
#include "vx_internal.h"

/* ---- broadcasting over n operands -------------------------------------------------- */

#define MM_MAX_IN 16 /* operands one kernel call takes (its parameter block stays small) */

typedef struct nbc {
    int n, rank;
    int64_t dims[VX_MAX_RANK];             /* output shape */
    int64_t st[MM_MAX_IN][VX_MAX_RANK];    /* per operand: element strides there, 0 on broadcast dims */
    int64_t gst[VX_MAX_RANK];              /* the gradient being summed (backward): dense strides */
    const void *p[MM_MAX_IN];
} nbc;

/* Operand k's strides in the output index space (through its own strides
 * when it is a strided view, read in place). */
static void nbc_strides(nbc *b, int k, const vx_tensor *t) {
    int64_t own[VX_MAX_RANK];
    vx_tensor_get_strides(t, own);
    int off = b->rank - t->rank;
    for (int d = 0; d < b->rank; d++) b->st[k][d] = d < off || t->dims[d - off] == 1 ? 0 : own[d - off];
}

/* Contiguous strides of a shape in the output index space (a gradient). */
static void nbc_dense_strides(int rank, int trank, const int64_t *tdims, int64_t *st) {
    int off = rank - trank;
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        if (d < off) { st[d] = 0; continue; }
        int64_t e = tdims[d - off];
        st[d] = e == 1 ? 0 : s;
        s *= e;
    }
}

static __device__ __forceinline__ int64_t nbc_off_by(const nbc &b, const int64_t *st, int64_t i) {
    int64_t off = 0;
    for (int d = b.rank - 1; d >= 0; d--) {
        int64_t c = i % b.dims[d];
        i /= b.dims[d];
        off += c * st[d];
    }
    return off;
}
static __device__ __forceinline__ int64_t nbc_off(const nbc &b, int k, int64_t i) { return nbc_off_by(b, b.st[k], i); }

/* ---- Max / Min of n inputs ------------------------------------------------------------ */

template <typename T> __device__ __forceinline__ T mm_pick(T a, T b, bool is_max) {
    return is_max ? (a > b ? a : b) : (a < b ? a : b);
}

/* Share of the gradient of max(mine, other) that reaches `mine`. */
__device__ __forceinline__ float mm_share(float mine, float other, bool is_max) {
    bool wins = is_max ? mine > other : mine < other;
    return wins ? 1.f : mine == other ? 0.5f : 0.f;
}

/* Storage T, compared as C: float for the floating types (a max picks one
 * operand, so half storage loses nothing), long long for int64. */
template <typename T> struct mm_io {
    typedef float C;
    static __device__ __forceinline__ float ld(T v) { return vxk_ld(v); }
    static __device__ __forceinline__ T st(float v) { return vxk_st<T>(v); }
};
template <> struct mm_io<long long> {
    typedef long long C;
    static __device__ __forceinline__ long long ld(long long v) { return v; }
    static __device__ __forceinline__ long long st(long long v) { return v; }
};

/* y = the chain; inter (when given) gets m1 .. m(n-2), numel apart. */
template <typename T> __global__ void k_maxmin_n(T *y, T *inter, int64_t numel, nbc b, bool is_max) {
    typedef mm_io<T> IO;
    VXK_LOOP(i, numel) {
        typename IO::C m = IO::ld(((const T *)b.p[0])[nbc_off(b, 0, i)]);
        for (int j = 1; j < b.n; j++) {
            m = mm_pick<typename IO::C>(m, IO::ld(((const T *)b.p[j])[nbc_off(b, j, i)]), is_max);
            if (inter && j < b.n - 1) inter[(int64_t)(j - 1) * numel + i] = IO::st(m);
        }
        y[i] = IO::st(m);
    }
}

/* Gradient of operand k through the chain: its share at the link it enters
 * (the first operand enters link 1 as the running value), times the running
 * value's share at every later link. direct: gi has the output's shape. */
template <typename T>
__global__ void k_maxmin_n_grad(const T *g, const T *inter, T *gi, int64_t numel, nbc b, int k, bool is_max,
                                bool direct) {
    VXK_LOOP(i, numel) {
        float w = 1.f;
        for (int j = 1; j < b.n; j++) {
            float prev = vxk_ld(j == 1 ? ((const T *)b.p[0])[nbc_off(b, 0, i)] : inter[(int64_t)(j - 2) * numel + i]);
            float x = vxk_ld(((const T *)b.p[j])[nbc_off(b, j, i)]);
            if (j == k) w = mm_share(x, prev, is_max);
            else if (j > k) w *= mm_share(prev, x, is_max);
            if (w == 0.f) break;
        }
        float v = w * vxk_ld(g[i]);
        if (direct) {
            gi[i] = vxk_st<T>(v);
        } else {
            vxk_atomic_add(gi + nbc_off_by(b, b.gst, i), v);
        }
    }
}

static vx_status nbc_make(vx_ctx *ctx, const vx_run *run, const char *op, nbc *b) {
    memset(b, 0, sizeof *b);
    if (run->n_in < 1 || run->n_in > MM_MAX_IN)
        return vx_fail(ctx, VX_EUNSUPPORTED, "%s: %d inputs (a kernel takes 1 to %d)", op, run->n_in, MM_MAX_IN);
    for (int k = 0; k < run->n_in; k++) {
        if (!run->in[k]) return vx_fail(ctx, VX_ESHAPE, "%s: input %d is missing", op, k);
        if (run->in[k]->dtype != run->in[0]->dtype) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: operands of different dtypes", op);
    }
    b->n = run->n_in;
    if (!vxk_broadcast_shape(run->n_in, run->in, &b->rank, b->dims)) return vx_fail(ctx, VX_ESHAPE, "%s: shapes do not broadcast", op);
    for (int k = 0; k < run->n_in; k++) {
        nbc_strides(b, k, run->in[k]);
        b->p[k] = run->in[k]->data;
    }
    return VX_OK;
}

extern "C" vx_status vx_k_maxmin_n_fwd(vx_ctx *ctx, vx_run *run, bool is_max) {
    const char *op = is_max ? "Max" : "Min";
    nbc b;
    vx_status st = nbc_make(ctx, run, op, &b);
    if (st) return st;
    vx_dtype dt = run->in[0]->dtype;
    if (!vx_dtype_is_float(dt) && dt != VX_I64) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: floating or int64 operands only", op);
    vx_tensor *y = vx_out_new(ctx, run, 0, dt, b.rank, b.dims);
    if (!y) return VX_EOOM;
    bool any_grad = false;
    for (int k = 0; k < run->n_in; k++) any_grad |= run->need_grad[k];
    void *inter = NULL;
    if (run->training && any_grad && dt != VX_I64 && run->n_in > 2) { /* the chain's links, in the operands' dtype */
        int64_t n = (int64_t)(run->n_in - 2) * y->numel;
        if ((st = vxk_new_saved(ctx, run, 0, dt, 1, &n))) return st;
        inter = run->saved[0]->data;
    }
    if (!y->numel) return VX_OK;
    unsigned nb = vxk_blocks(y->numel);
    cudaStream_t s = vxk_stream(ctx);
    if (dt == VX_F32)
        k_maxmin_n<float><<<nb, VXK_THREADS, 0, s>>>((float *)y->data, (float *)inter, y->numel, b, is_max);
    else if (dt == VX_BF16)
        k_maxmin_n<vxk_bf16><<<nb, VXK_THREADS, 0, s>>>((vxk_bf16 *)y->data, (vxk_bf16 *)inter, y->numel, b, is_max);
    else if (dt == VX_F16)
        k_maxmin_n<vxk_f16><<<nb, VXK_THREADS, 0, s>>>((vxk_f16 *)y->data, (vxk_f16 *)inter, y->numel, b, is_max);
    else
        k_maxmin_n<long long><<<vxk_blocks(y->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>((long long *)y->data, NULL,
                                                                                          y->numel, b, is_max);
    return vxk_check(ctx, op);
}

template <typename T>
static vx_status maxmin_grad_run(vx_ctx *ctx, const vx_tensor *g, const void *inter, vx_tensor *gi, const nbc &b, int k,
                                 bool is_max, bool direct) {
    k_maxmin_n_grad<T><<<vxk_blocks(g->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (const T *)g->data, (const T *)inter, (T *)gi->data, g->numel, b, k, is_max, direct);
    return VX_OK;
}

extern "C" vx_status vx_k_maxmin_n_bwd(vx_ctx *ctx, vx_run *run, bool is_max) {
    const char *op = is_max ? "Max backward" : "Min backward";
    const vx_tensor *g = run->grad_out[0];
    nbc b;
    vx_status st = nbc_make(ctx, run, op, &b);
    if (st) return st;
    if (run->n_in > 2 && (!run->saved[0] || !run->saved[0]->data) && g && g->numel)
        return vx_fail(ctx, VX_ECUDA, "%s: the chain's intermediate results were not kept", op);
    const void *inter = run->n_in > 2 && run->saved[0] ? run->saved[0]->data : NULL;
    for (int k = 0; k < run->n_in; k++) {
        if (!run->need_grad[k]) continue;
        vx_tensor *gi = vx_grad_new(ctx, run, k);
        if (!gi) return VX_EOOM;
        bool direct = g && gi->numel == g->numel;
        if (!direct && (st = vx_tensor_zero(ctx, gi))) return st;
        if (!g || !g->numel) continue;
        nbc_dense_strides(b.rank, gi->rank, gi->dims, b.gst);
        st = [&]() -> vx_status {
            VXK_FLOAT_DISPATCH(ctx, gi->dtype, op, maxmin_grad_run<T>(ctx, g, inter, gi, b, k, is_max, direct));
        }();
        if (st || (st = vxk_check(ctx, op))) return st;
    }
    return VX_OK;
}

/* ---- Pow with a tensor exponent ------------------------------------------------------ */

/* Operand of Pow as device data: itself when it is a floating tensor on the
 * device (*dt its dtype), else a float32 workspace (*ws, *dt VX_F32)
 * holding its host copy (a constant) or its int64 values converted. */
static __global__ void k_i64_to_f32(const long long *s, float *d, int64_t n) {
    VXK_LOOP(i, n) d[i] = (float)s[i];
}

static const void *pow_operand(vx_ctx *ctx, const vx_tensor *t, void **ws, vx_dtype *dt, vx_status *st) {
    *ws = NULL;
    *st = VX_OK;
    *dt = t->dtype;
    if (vx_dtype_is_float(t->dtype) && t->data) return t->data;
    if (!vx_dtype_is_float(t->dtype) && t->dtype != VX_I64) { *st = vx_fail(ctx, VX_EUNSUPPORTED, "Pow: bool operand"); return NULL; }
    *dt = VX_F32;
    size_t n = (size_t)(t->numel ? t->numel : 1);
    *ws = vx_workspace(ctx, n * sizeof(float));
    if (!*ws) { *st = vxk_oom(ctx, "Pow operand"); return NULL; }
    float *d = (float *)*ws;
    if (t->dtype == VX_I64 && t->data) {
        if (t->numel) k_i64_to_f32<<<vxk_blocks(t->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>((const long long *)t->data, d, t->numel);
        *st = vxk_check(ctx, "Pow operand");
        return *st ? NULL : d;
    }
    /* host only: pageable copies are staged before cudaMemcpyAsync returns */
    float *h = (float *)malloc(n * sizeof(float));
    if (!h) { *st = vx_fail(ctx, VX_EOOM, "host out of memory"); return NULL; }
    for (int64_t i = 0; i < t->numel; i++)
        h[i] = vx_dtype_is_float(t->dtype) ? (t->host_f32 ? t->host_f32[i] : 0.f) : (float)(t->host_i64 ? t->host_i64[i] : 0);
    cudaError_t e = cudaMemcpyAsync(d, h, (size_t)t->numel * sizeof(float), cudaMemcpyHostToDevice, vxk_stream(ctx));
    free(h);
    if ((vx_dtype_is_float(t->dtype) ? !t->host_f32 : !t->host_i64) && t->numel)
        *st = vx_fail(ctx, VX_ESHAPE, "Pow: operand has no data");
    else if (e != cudaSuccess)
        *st = vx_fail(ctx, VX_ECUDA, "Pow: upload failed");
    return *st ? NULL : d;
}

/* T: the base's (and result's) storage; TE: the exponent's (T, or float for
 * a converted one). */
template <typename T, typename TE> __global__ void k_pow(const T *x, const TE *e, T *y, int64_t n, nbc b) {
    VXK_LOOP(i, n) y[i] = vxk_st<T>(powf(vxk_ld(x[nbc_off(b, 0, i)]), vxk_ld(e[nbc_off(b, 1, i)])));
}

/* which 0: dX = g * e * x^(e-1); which 1: dE = g * y * log(x); summed into
 * gi (T: the exponent's gradient exists only where TE is T) through b.gst
 * when that operand broadcasts. */
template <typename T, typename TE>
__global__ void k_pow_grad(const T *g, const T *x, const TE *e, const T *y, T *gi, int64_t n, nbc b, int which,
                           bool direct) {
    VXK_LOOP(i, n) {
        float xv = vxk_ld(x[nbc_off(b, 0, i)]), ev = vxk_ld(e[nbc_off(b, 1, i)]), v;
        if (which == 0) v = ev == 0.f ? 0.f : vxk_ld(g[i]) * ev * powf(xv, ev - 1.f);
        else v = xv == 0.f && ev >= 0.f ? 0.f : vxk_ld(g[i]) * vxk_ld(y[i]) * logf(xv);
        if (direct) gi[i] = vxk_st<T>(v);
        else vxk_atomic_add(gi + nbc_off_by(b, b.gst, i), v);
    }
}

/* Pow takes this path (not ops_unary.cu's scalar one) when the exponent has
 * more than one element or needs a gradient. */
extern "C" bool vx_pow_tensor_path(const vx_run *run) {
    return run->n_in >= 2 && run->in[1] && (run->in[1]->numel != 1 || run->need_grad[1]);
}

static vx_status pow_geom(vx_ctx *ctx, const vx_run *run, nbc *b) {
    memset(b, 0, sizeof *b);
    vx_tensor *xe[2] = {run->in[0], run->in[1]};
    if (!xe[0] || !xe[1]) return vx_fail(ctx, VX_ESHAPE, "Pow needs X and Y");
    if (!vx_dtype_is_float(xe[0]->dtype)) return vx_fail(ctx, VX_EUNSUPPORTED, "Pow: a floating base only");
    if (vx_dtype_is_float(xe[1]->dtype) && xe[1]->dtype != xe[0]->dtype)
        return vx_fail(ctx, VX_EUNSUPPORTED, "Pow: base and exponent of different floating dtypes");
    b->n = 2;
    if (!vxk_broadcast_shape(2, xe, &b->rank, b->dims)) return vx_fail(ctx, VX_ESHAPE, "Pow: shapes do not broadcast");
    /* operands are contiguous here (Pow's row reads no strided tensor) */
    nbc_dense_strides(b->rank, xe[0]->rank, xe[0]->dims, b->st[0]);
    nbc_dense_strides(b->rank, xe[1]->rank, xe[1]->dims, b->st[1]);
    return VX_OK;
}

template <typename T>
static vx_status pow_fwd_run(vx_ctx *ctx, const void *x, const void *e, vx_dtype edt, vx_tensor *y, const nbc &b) {
    unsigned nb = vxk_blocks(y->numel);
    if (edt == VX_F32)
        k_pow<T, float><<<nb, VXK_THREADS, 0, vxk_stream(ctx)>>>((const T *)x, (const float *)e, (T *)y->data, y->numel, b);
    else
        k_pow<T, T><<<nb, VXK_THREADS, 0, vxk_stream(ctx)>>>((const T *)x, (const T *)e, (T *)y->data, y->numel, b);
    return vxk_check(ctx, "Pow");
}

template <typename T>
static vx_status pow_bwd_run(vx_ctx *ctx, const vx_tensor *g, const void *x, const void *e, vx_dtype edt, const void *y,
                             vx_tensor *gi, const nbc &b, int k, bool direct) {
    unsigned nb = vxk_blocks(g->numel);
    if (edt == VX_F32)
        k_pow_grad<T, float><<<nb, VXK_THREADS, 0, vxk_stream(ctx)>>>((const T *)g->data, (const T *)x, (const float *)e,
                                                                      (const T *)y, (T *)gi->data, g->numel, b, k, direct);
    else
        k_pow_grad<T, T><<<nb, VXK_THREADS, 0, vxk_stream(ctx)>>>((const T *)g->data, (const T *)x, (const T *)e,
                                                                  (const T *)y, (T *)gi->data, g->numel, b, k, direct);
    return vxk_check(ctx, "Pow backward");
}

extern "C" vx_status vx_k_pow_tensor_fwd(vx_ctx *ctx, vx_run *run) {
    nbc b;
    vx_status st = pow_geom(ctx, run, &b);
    if (st) return st;
    vx_dtype dt = run->in[0]->dtype, xdt, edt;
    vx_tensor *y = vx_out_new(ctx, run, 0, dt, b.rank, b.dims);
    if (!y) return VX_EOOM;
    if (!y->numel) return VX_OK;
    void *wx, *we = NULL;
    const void *x = pow_operand(ctx, run->in[0], &wx, &xdt, &st);
    if (!x) return st;
    const void *e = pow_operand(ctx, run->in[1], &we, &edt, &st);
    if (e && xdt != dt) st = vx_fail(ctx, VX_EUNSUPPORTED, "Pow: a base with no device copy");
    else if (e) st = [&]() -> vx_status { VXK_FLOAT_DISPATCH(ctx, dt, "Pow", pow_fwd_run<T>(ctx, x, e, edt, y, b)); }();
    vx_free(ctx, wx);
    vx_free(ctx, we);
    return st;
}

extern "C" vx_status vx_k_pow_tensor_bwd(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *g = run->grad_out[0];
    nbc b;
    vx_status st = pow_geom(ctx, run, &b);
    if (st) return st;
    void *wx = NULL, *we = NULL;
    const void *x = NULL, *e = NULL;
    vx_dtype dt = run->in[0]->dtype, xdt = dt, edt = dt;
    for (int k = 0; k < 2 && !st; k++) {
        if (!run->need_grad[k]) continue;
        vx_tensor *gi = vx_grad_new(ctx, run, k);
        if (!gi) { st = VX_EOOM; break; }
        bool direct = g && gi->numel == g->numel;
        if (!direct && (st = vx_tensor_zero(ctx, gi))) break;
        if (!g || !g->numel) continue;
        if (!x && !(x = pow_operand(ctx, run->in[0], &wx, &xdt, &st))) break;
        if (!e && !(e = pow_operand(ctx, run->in[1], &we, &edt, &st))) break;
        if (xdt != dt || gi->dtype != dt) { st = vx_fail(ctx, VX_EUNSUPPORTED, "Pow backward: operand dtypes differ"); break; }
        const void *y = NULL;
        if (k == 1) {
            if (!run->out[0] || !run->out[0]->data) { st = vx_fail(ctx, VX_ECUDA, "Pow backward: the result was not kept"); break; }
            y = run->out[0]->data;
        }
        nbc_dense_strides(b.rank, gi->rank, gi->dims, b.gst);
        st = [&]() -> vx_status {
            VXK_FLOAT_DISPATCH(ctx, dt, "Pow backward", pow_bwd_run<T>(ctx, g, x, e, edt, y, gi, b, k, direct));
        }();
    }
    vx_free(ctx, wx);
    vx_free(ctx, we);
    return st;
}

/* ---- PRelu ---------------------------------------------------------------------------- */

template <typename T> __global__ void k_prelu(const T *x, const T *slope, T *y, int64_t n, nbc b) {
    VXK_LOOP(i, n) {
        float v = vxk_ld(x[i]);
        y[i] = vxk_st<T>(v < 0.f ? vxk_ld(slope[nbc_off(b, 1, i)]) * v : v);
    }
}

/* dx (when given) and the full-size dSlope terms (when given) */
template <typename T>
__global__ void k_prelu_grad(const T *g, const T *x, const T *slope, T *dx, T *dslope_full, int64_t n, nbc b) {
    VXK_LOOP(i, n) {
        float v = vxk_ld(x[i]), gv = vxk_ld(g[i]);
        if (dx) dx[i] = vxk_st<T>(v > 0.f ? gv : vxk_ld(slope[nbc_off(b, 1, i)]) * gv);
        if (dslope_full) dslope_full[i] = vxk_st<T>(v > 0.f ? 0.f : v * gv);
    }
}

/* The slope broadcasts one way, to X: the output has X's shape. */
static vx_status prelu_geom(vx_ctx *ctx, const vx_run *run, nbc *b) {
    memset(b, 0, sizeof *b);
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "PRelu needs X and slope");
    const vx_tensor *x = run->in[0], *sl = run->in[1];
    if (!vx_dtype_is_float(x->dtype) || sl->dtype != x->dtype)
        return vx_fail(ctx, VX_EUNSUPPORTED, "PRelu: floating operands of one dtype only");
    vx_tensor *xs[2] = {run->in[0], run->in[1]};
    b->n = 2;
    if (!vxk_broadcast_shape(2, xs, &b->rank, b->dims) || b->rank != x->rank || memcmp(b->dims, x->dims, sizeof(int64_t) * x->rank))
        return vx_fail(ctx, VX_ESHAPE, "PRelu: slope does not broadcast to X");
    nbc_dense_strides(b->rank, x->rank, x->dims, b->st[0]);
    nbc_dense_strides(b->rank, sl->rank, sl->dims, b->st[1]);
    return VX_OK;
}

template <typename T> static vx_status prelu_fwd_run(vx_ctx *ctx, const vx_tensor *x, const vx_tensor *sl, vx_tensor *y, const nbc &b) {
    k_prelu<T><<<vxk_blocks(y->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>((const T *)x->data, (const T *)sl->data,
                                                                           (T *)y->data, y->numel, b);
    return vxk_check(ctx, "PRelu");
}

static vx_status prelu_fwd(vx_ctx *ctx, vx_run *run) {
    nbc b;
    vx_status st = prelu_geom(ctx, run, &b);
    if (st) return st;
    const vx_tensor *x = run->in[0];
    vx_tensor *y = vx_out_new(ctx, run, 0, x->dtype, x->rank, x->dims);
    if (!y) return VX_EOOM;
    if (!y->numel) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, x->dtype, "PRelu", prelu_fwd_run<T>(ctx, x, run->in[1], y, b));
}

/* dSlope summed over broadcast dims: its full-size terms first (a slope of
 * X's shape takes them directly; else a workspace of X's size and dtype) */
template <typename T>
static vx_status prelu_bwd_run(vx_ctx *ctx, const vx_tensor *g, const vx_tensor *x, const vx_tensor *sl, vx_tensor *dx,
                               vx_tensor *dslope, const nbc &b) {
    T *full = NULL;
    if (dslope) full = dslope->numel == g->numel ? (T *)dslope->data : (T *)vx_workspace(ctx, (size_t)g->numel * sizeof(T));
    if (dslope && !full) return vxk_oom(ctx, "PRelu backward");
    k_prelu_grad<T><<<vxk_blocks(g->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (const T *)g->data, (const T *)x->data, (const T *)sl->data, dx ? (T *)dx->data : NULL, full, g->numel, b);
    vx_status st = vxk_check(ctx, "PRelu backward");
    if (!st && dslope && full != dslope->data)
        st = vxk_reduce_to(ctx, (T *)dslope->data, dslope->rank, dslope->dims, (const T *)full, x->rank, x->dims, 1.f);
    if (dslope && full != dslope->data) vx_free(ctx, full);
    return st;
}

static vx_status prelu_bwd(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *g = run->grad_out[0];
    nbc b;
    vx_status st = prelu_geom(ctx, run, &b);
    if (st) return st;
    const vx_tensor *x = run->in[0], *sl = run->in[1];
    vx_tensor *dx = NULL, *dslope = NULL;
    if (run->need_grad[0] && !(dx = vx_grad_new(ctx, run, 0))) return VX_EOOM;
    if (run->need_grad[1] && !(dslope = vx_grad_new(ctx, run, 1))) return VX_EOOM;
    if (!g || !g->numel) { /* no gradient reached the output: zeros */
        if (dx && (st = vx_tensor_zero(ctx, dx))) return st;
        return dslope ? vx_tensor_zero(ctx, dslope) : VX_OK;
    }
    if ((dx || dslope) && (!x->data || !sl->data)) return vx_fail(ctx, VX_ECUDA, "PRelu backward: X or slope not kept");
    VXK_FLOAT_DISPATCH(ctx, x->dtype, "PRelu backward", prelu_bwd_run<T>(ctx, g, x, sl, dx, dslope, b));
}

/* ---- Sum, Mean of n inputs -------------------------------------------------------------- */

/* Accumulated as mm_io's C: float for the floating types, int64 for int64. */
template <typename T> __global__ void k_sum_n(T *y, int64_t numel, nbc b, float scale) {
    typedef mm_io<T> IO;
    typedef typename IO::C C;
    VXK_LOOP(i, numel) {
        C acc = 0;
        for (int j = 0; j < b.n; j++) acc += IO::ld(((const T *)b.p[j])[nbc_off(b, j, i)]);
        y[i] = IO::st(scale == 1.f ? acc : (C)((float)acc * scale));
    }
}

template <typename T> static vx_status sum_fwd_run(vx_ctx *ctx, vx_tensor *y, const nbc &b, float scale, const char *op) {
    k_sum_n<T><<<vxk_blocks(y->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>((T *)y->data, y->numel, b, scale);
    return vxk_check(ctx, op);
}

static vx_status sum_mean_fwd(vx_ctx *ctx, vx_run *run) {
    const char *op = run->node->op_type;
    bool mean = !strcmp(op, "Mean");
    nbc b;
    vx_status st = nbc_make(ctx, run, op, &b);
    if (st) return st;
    vx_dtype dt = run->in[0]->dtype;
    if (!vx_dtype_is_float(dt) && (mean || dt != VX_I64))
        return vx_fail(ctx, VX_EUNSUPPORTED, "%s: %s operands only", op, mean ? "floating" : "floating or int64");
    vx_tensor *y = vx_out_new(ctx, run, 0, dt, b.rank, b.dims);
    if (!y) return VX_EOOM;
    if (!y->numel) return VX_OK;
    float scale = mean ? 1.f / (float)run->n_in : 1.f;
    if (dt == VX_I64) return sum_fwd_run<long long>(ctx, y, b, 1.f, op);
    VXK_FLOAT_DISPATCH(ctx, dt, op, sum_fwd_run<T>(ctx, y, b, scale, op));
}

static vx_status sum_mean_bwd(vx_ctx *ctx, vx_run *run) {
    bool mean = !strcmp(run->node->op_type, "Mean");
    vx_tensor *g = run->grad_out[0];
    float scale = mean ? 1.f / (float)run->n_in : 1.f;
    for (int k = 0; k < run->n_in; k++) {
        if (!run->need_grad[k]) continue;
        const vx_tensor *x = run->in[k];
        bool same = g && g->rank == x->rank && !memcmp(g->dims, x->dims, sizeof(int64_t) * x->rank);
        if (same && !mean) { /* passed on, as add's backward does */
            run->grad_in[k] = vx_tensor_view(ctx, g, g->rank, g->dims);
            if (!run->grad_in[k]) return VX_EOOM;
            continue;
        }
        vx_tensor *gi = vx_grad_new(ctx, run, k);
        if (!gi) return VX_EOOM;
        vx_status st = !g || !g->numel ? vx_tensor_zero(ctx, gi) : [&]() -> vx_status {
            VXK_FLOAT_DISPATCH(ctx, gi->dtype, run->node->op_type,
                               vxk_reduce_to(ctx, (T *)gi->data, gi->rank, gi->dims, (const T *)g->data, g->rank,
                                             g->dims, scale));
        }();
        if (st) return st;
    }
    return VX_OK;
}

/* ---- BitwiseNot, BitwiseAnd / Or / Xor, BitShift ---------------------------------------- */

typedef enum bit_op { BIT_NOT, BIT_AND, BIT_OR, BIT_XOR, BIT_LEFT, BIT_RIGHT } bit_op;

/* The result wrapped to the declared integer type the executor holds as
 * int64: its low `bits` bits, sign-extended for a signed type. */
__global__ void k_bitwise(long long *y, int64_t numel, nbc b, int op, int bits, bool is_signed) {
    VXK_LOOP(i, numel) {
        unsigned long long u = (unsigned long long)((const long long *)b.p[0])[nbc_off(b, 0, i)], v = 0, r;
        if (op != BIT_NOT) v = (unsigned long long)((const long long *)b.p[1])[nbc_off(b, 1, i)];
        switch (op) {
        case BIT_NOT: r = ~u; break;
        case BIT_AND: r = u & v; break;
        case BIT_OR: r = u | v; break;
        case BIT_XOR: r = u ^ v; break;
        case BIT_LEFT: r = v >= 64 ? 0 : u << v; break;
        default: r = v >= 64 ? 0 : u >> v; break;
        }
        if (bits < 64) {
            r &= (1ull << bits) - 1;
            if (is_signed && (r >> (bits - 1) & 1)) r |= ~0ull << bits;
        }
        y[i] = (long long)r;
    }
}

static vx_status bitwise_fwd(vx_ctx *ctx, vx_run *run) {
    const char *op = run->node->op_type;
    int code;
    if (!strcmp(op, "BitwiseNot")) code = BIT_NOT;
    else if (!strcmp(op, "BitwiseAnd")) code = BIT_AND;
    else if (!strcmp(op, "BitwiseOr")) code = BIT_OR;
    else if (!strcmp(op, "BitwiseXor")) code = BIT_XOR;
    else {
        const char *dir = vxk_attr_string(run, "direction", "");
        if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT"))
            return vx_fail(ctx, VX_EUNSUPPORTED, "BitShift: direction \"%s\" (LEFT or RIGHT)", dir);
        code = !strcmp(dir, "LEFT") ? BIT_LEFT : BIT_RIGHT;
    }
    if (run->n_in != (code == BIT_NOT ? 1 : 2)) return vx_fail(ctx, VX_ESHAPE, "%s: %d inputs", op, run->n_in);
    nbc b;
    vx_status st = nbc_make(ctx, run, op, &b);
    if (st) return st;
    if (run->in[0]->dtype != VX_I64) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: int64 operands only", op);
    vx_tensor *y = vx_out_new(ctx, run, 0, VX_I64, b.rank, b.dims);
    if (!y) return VX_EOOM;
    if (!y->numel) return VX_OK;
    /* the result has input 0's type (declared when it is a graph input or
     * an initializer; a node's output often is not) */
    est_dtype dt = EST_DT_INT64;
    for (int k = 0; run->graph && k < 2 && dt == EST_DT_INT64; k++) {
        int32_t t = k ? run->node->outputs[0] : run->node->inputs[0];
        if (t >= 0 && run->graph->tensors[t].dtype != EST_DT_UNDEFINED) dt = run->graph->tensors[t].dtype;
    }
    int bits = dt == EST_DT_INT8 || dt == EST_DT_UINT8 ? 8 : dt == EST_DT_INT16 || dt == EST_DT_UINT16 ? 16
               : dt == EST_DT_INT32 || dt == EST_DT_UINT32 ? 32 : 64;
    bool is_signed = dt == EST_DT_INT8 || dt == EST_DT_INT16 || dt == EST_DT_INT32;
    k_bitwise<<<vxk_blocks(y->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>((long long *)y->data, y->numel, b, code, bits,
                                                                         is_signed);
    return vxk_check(ctx, op);
}

/* ---- CastLike ------------------------------------------------------------------------- */

static vx_status cast_like_fwd(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "CastLike needs input and target_type");
    vx_tensor *x = run->in[0];
    vx_dtype to = run->in[1]->dtype;
    if (to == x->dtype) { /* as Cast: a view */
        run->out[0] = vx_tensor_view(ctx, x, x->rank, x->dims);
        return run->out[0] ? VX_OK : VX_EOOM;
    }
    vx_tensor *o = vx_out_new(ctx, run, 0, to, x->rank, x->dims);
    if (!o) return VX_EOOM;
    return vx_k_cast(ctx, x, o);
}

/* Cast's: the output gradient passed on to a float input. */
static vx_status cast_like_bwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *g = run->grad_out[0];
    if (!g || !run->need_grad[0] || run->in[0]->dtype != VX_F32) return VX_OK;
    run->grad_in[0] = vx_tensor_view(ctx, g, g->rank, g->dims);
    return run->grad_in[0] ? VX_OK : VX_EOOM;
}

/* ---- IsNaN, IsInf ------------------------------------------------------------------- */

__global__ void k_isnan_isinf(const float *x, uint8_t *y, int64_t n, bool nan, bool neg, bool pos) {
    VXK_LOOP(i, n) {
        float v = x[i];
        y[i] = nan ? v != v : (isinf(v) && ((v < 0.f && neg) || (v > 0.f && pos)));
    }
}

static vx_status isnan_isinf_fwd(vx_ctx *ctx, vx_run *run) {
    const char *op = run->node->op_type;
    bool nan = !strcmp(op, "IsNaN");
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "%s needs X", op);
    const vx_tensor *x = run->in[0];
    vx_status st = vxk_new_out(ctx, run, 0, VX_BOOL, x->rank, x->dims);
    if (st || !x->numel) return st;
    if (x->dtype != VX_F32) /* integers are never NaN nor infinite */
        return vxk_zero(ctx, run->out[0]->data, (size_t)x->numel);
    bool neg = vxk_attr_int(run, "detect_negative", 1) != 0, pos = vxk_attr_int(run, "detect_positive", 1) != 0;
    k_isnan_isinf<<<vxk_blocks(x->numel), VXK_THREADS, 0, vxk_stream(ctx)>>>((const float *)x->data,
                                                                              (uint8_t *)run->out[0]->data, x->numel,
                                                                              nan, neg, pos);
    return vxk_check(ctx, op);
}

extern "C" {
const vx_op vx_ops_math[] = {
    {"IsNaN", isnan_isinf_fwd, NULL, 0, 0, false, 0, NULL, 0},
    {"IsInf", isnan_isinf_fwd, NULL, 0, 0, false, 0, NULL, 0},
    {"PRelu", prelu_fwd, prelu_bwd, VX_SLOT(0) | VX_SLOT(1), 0, false, 0, NULL, 0, VX_HALF},
    /* the output gradient, summed to each input's shape: no input kept */
    {"Sum", sum_mean_fwd, sum_mean_bwd, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Mean", sum_mean_fwd, sum_mean_bwd, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"BitwiseNot", bitwise_fwd, NULL, 0, 0, false, 0, NULL, 0},
    {"BitwiseAnd", bitwise_fwd, NULL, 0, 0, false, 0, NULL, 0},
    {"BitwiseOr", bitwise_fwd, NULL, 0, 0, false, 0, NULL, 0},
    {"BitwiseXor", bitwise_fwd, NULL, 0, 0, false, 0, NULL, 0},
    {"BitShift", bitwise_fwd, NULL, 0, 0, false, 0, NULL, 0},
    /* input 1 gives only its dtype: no gradient flows into it */
    {"CastLike", cast_like_fwd, cast_like_bwd, 0, 0, false, 0, NULL, 0},
};
const size_t vx_ops_math_count = sizeof vx_ops_math / sizeof vx_ops_math[0];
}
