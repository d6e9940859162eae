/* ops_elementwise.cu: Add, Sub, Mul, Div, Mod, Max, Min (numpy
 * broadcasting), the comparisons and logical ops, Not, RandomUniformLike,
 * Dropout, Where, Cast (the one-input activations and math are in
 * ops_unary.cu; the small kernels shared with the executor, the optimizer
 * and the shape ops in ops_helpers.cu). */
#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

#include "ops_common.cuh"
#include "vx_internal.h"

#include "ops_bcast.cuh"

/* ---- binary arithmetic ------------------------------------------------------------ */

/* Arithmetic first, then the ops whose output is bool (B_EQ on). */
enum BinOp { B_ADD, B_SUB, B_MUL, B_DIV, B_MOD, B_FMOD, B_MAX, B_MIN, B_EQ, B_GE, B_LT, B_GT, B_LE, B_AND, B_OR, B_XOR };

/* Python's remainder (the divisor's sign) and C's fmod (the dividend's). */
__device__ __forceinline__ float rem_of(float a, float b, bool c_style) {
    float r = fmodf(a, b);
    return !c_style && r != 0.f && ((r < 0.f) != (b < 0.f)) ? r + b : r;
}
__device__ __forceinline__ long long rem_of(long long a, long long b, bool c_style) {
    if (b == 0) return 0;
    long long r = a % b;
    return !c_style && r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

template <typename T> __device__ __forceinline__ T bin_apply(int op, T a, T b) {
    switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_MOD: return rem_of(a, b, false);
    case B_FMOD: return rem_of(a, b, true);
    case B_MAX: return a > b ? a : b;
    case B_MIN: return a < b ? a : b;
    default: return a / b;
    }
}

template <typename T>
__global__ void k_binary(const T *a, const T *b, T *o, int64_t n, Bc bc, int op, bool flat) {
    GRID_LOOP(i, n) {
        int64_t off[3];
        if (flat) off[0] = off[1] = i;
        else bc_offsets(bc, i, 2, off);
        o[i] = bin_apply<T>(op, a[off[0]], b[off[1]]);
    }
}

/* Half operands computed in float, the result rounded to T. */
template <typename T>
__global__ void k_binary_h(const T *a, const T *b, T *o, int64_t n, Bc bc, int op, bool flat) {
    GRID_LOOP(i, n) {
        int64_t off[3];
        if (flat) off[0] = off[1] = i;
        else bc_offsets(bc, i, 2, off);
        o[i] = vxk_st<T>(bin_apply<float>(op, vxk_ld(a[off[0]]), vxk_ld(b[off[1]])));
    }
}

/* Comparisons read T as C (float for the half types). */
template <typename T> struct CmpOf { typedef T C; };
template <> struct CmpOf<__nv_bfloat16> { typedef float C; };
template <> struct CmpOf<__half> { typedef float C; };
template <typename T> __device__ __forceinline__ typename CmpOf<T>::C cmp_ld(T v) { return v; }
template <> __device__ __forceinline__ float cmp_ld<__nv_bfloat16>(__nv_bfloat16 v) { return vxk_ld(v); }
template <> __device__ __forceinline__ float cmp_ld<__half>(__half v) { return vxk_ld(v); }

template <typename T>
__global__ void k_compare(const T *a, const T *b, uint8_t *o, int64_t n, Bc bc, int op) {
    GRID_LOOP(i, n) {
        int64_t off[3];
        bc_offsets(bc, i, 2, off);
        typename CmpOf<T>::C x = cmp_ld(a[off[0]]), y = cmp_ld(b[off[1]]);
        bool v;
        switch (op) {
        case B_EQ: v = x == y; break;
        case B_GE: v = x >= y; break;
        case B_LT: v = x < y; break;
        case B_GT: v = x > y; break;
        case B_LE: v = x <= y; break;
        case B_AND: v = x && y; break;
        case B_OR: v = x || y; break;
        default: v = (x != 0) != (y != 0); break;
        }
        o[i] = v;
    }
}

/* Gradient of one operand, written (same shape) or atomically summed
 * (broadcast operand) into gi. which: 0 for a, 1 for b. */
template <typename T>
__global__ void k_binary_grad(const T *g, const T *a, const T *b, T *gi, int64_t n, Bc bc, int op, int which,
                              bool direct) {
    GRID_LOOP(i, n) {
        int64_t off[3];
        bc_offsets(bc, i, 3, off); /* 0: a, 1: b, 2: the operand receiving */
        float gv = vxk_ld(g[i]), v;
        switch (op) {
        case B_ADD: v = gv; break;
        case B_SUB: v = which ? -gv : gv; break;
        case B_MUL: v = which ? gv * vxk_ld(a[off[0]]) : gv * vxk_ld(b[off[1]]); break;
        case B_MOD:
        case B_FMOD: {
            float q = vxk_ld(a[off[0]]) / vxk_ld(b[off[1]]);
            v = which ? -gv * (op == B_MOD ? floorf(q) : truncf(q)) : gv;
            break;
        }
        case B_MAX:
        case B_MIN: { /* maximum / minimum: ties share the gradient */
            float x = vxk_ld(a[off[0]]), y = vxk_ld(b[off[1]]), mine = which ? y : x, other = which ? x : y;
            bool wins = op == B_MAX ? mine > other : mine < other;
            v = wins ? gv : mine == other ? 0.5f * gv : 0.f;
            break;
        }
        default: {
            float bv = vxk_ld(b[off[1]]);
            v = which ? -gv * vxk_ld(a[off[0]]) / (bv * bv) : gv / bv;
        }
        }
        if (direct) gi[i] = vxk_st<T>(v);
        else vxk_atomic_add(&gi[off[2]], v);
    }
}

static int bin_code(const vx_run *run) {
    static const struct {
        const char *name;
        int op;
    } codes[] = {{"Add", B_ADD}, {"Sub", B_SUB}, {"Mul", B_MUL}, {"Div", B_DIV}, {"Max", B_MAX}, {"Min", B_MIN},
                 {"Equal", B_EQ}, {"GreaterOrEqual", B_GE}, {"Less", B_LT}, {"Greater", B_GT}, {"LessOrEqual", B_LE},
                 {"And", B_AND}, {"Or", B_OR}, {"Xor", B_XOR}};
    const char *name = run->node->op_type;
    if (!strcmp(name, "Mod")) return est_node_attr_int(run->node, "fmod", 0) ? B_FMOD : B_MOD;
    for (size_t k = 0; k < sizeof codes / sizeof codes[0]; k++)
        if (!strcmp(codes[k].name, name)) return codes[k].op;
    return B_GE;
}

static vx_status binary_fwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *a = run->in[0], *b = run->in[1];
    int op = bin_code(run);
    if (run->n_in != 2 && (op == B_MAX || op == B_MIN)) /* a chain of n - 1 (ops_math.cu) */
        return vx_k_maxmin_n_fwd(ctx, run, op == B_MAX);
    if (run->n_in != 2 || !a || !b) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: only two inputs have a kernel", run->node->op_type);
    if (a->dtype != b->dtype) return vx_fail(ctx, VX_EUNSUPPORTED, "operands of different dtypes");
    vx_tensor *ab[2] = {a, b};
    Bc bc;
    memset(&bc, 0, sizeof bc);
    if (!vxk_broadcast_shape(2, ab, &bc.rank, bc.dims)) return vx_fail(ctx, VX_ESHAPE, "shapes do not broadcast");
    bc_strides_t(&bc, 0, a);
    bc_strides_t(&bc, 1, b);
    bool cmp = op >= B_EQ;
    if (op >= B_AND && a->dtype != VX_BOOL) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: bool operands only", run->node->op_type);
    vx_tensor *o = vx_out_new(ctx, run, 0, cmp ? VX_BOOL : a->dtype, bc.rank, bc.dims);
    if (!o) return VX_EOOM;
    if (!o->numel) return VX_OK;
    bool flat = a->numel == o->numel && b->numel == o->numel && !a->strided && !b->strided;
    if (cmp) {
        if (a->dtype == VX_F32)
            k_compare<float><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>((const float *)a->data, (const float *)b->data,
                                                                         (uint8_t *)o->data, o->numel, bc, op);
        else if (a->dtype == VX_I64)
            k_compare<long long><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>(
                (const long long *)a->data, (const long long *)b->data, (uint8_t *)o->data, o->numel, bc, op);
        else if (a->dtype == VX_BF16)
            k_compare<__nv_bfloat16><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>(
                (const __nv_bfloat16 *)a->data, (const __nv_bfloat16 *)b->data, (uint8_t *)o->data, o->numel, bc, op);
        else if (a->dtype == VX_F16)
            k_compare<__half><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>(
                (const __half *)a->data, (const __half *)b->data, (uint8_t *)o->data, o->numel, bc, op);
        else
            k_compare<uint8_t><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>(
                (const uint8_t *)a->data, (const uint8_t *)b->data, (uint8_t *)o->data, o->numel, bc, op);
    } else if (a->dtype == VX_F32) {
        k_binary<float><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>((const float *)a->data, (const float *)b->data,
                                                                    (float *)o->data, o->numel, bc, op, flat);
    } else if (a->dtype == VX_I64) {
        k_binary<long long><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>(
            (const long long *)a->data, (const long long *)b->data, (long long *)o->data, o->numel, bc, op, flat);
    } else if (a->dtype == VX_BF16) {
        k_binary_h<__nv_bfloat16><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>(
            (const __nv_bfloat16 *)a->data, (const __nv_bfloat16 *)b->data, (__nv_bfloat16 *)o->data, o->numel, bc, op,
            flat);
    } else if (a->dtype == VX_F16) {
        k_binary_h<__half><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>(
            (const __half *)a->data, (const __half *)b->data, (__half *)o->data, o->numel, bc, op, flat);
    } else {
        return vx_fail(ctx, VX_EUNSUPPORTED, "arithmetic on bool");
    }
    return launched(ctx, run->node->op_type);
}

template <typename T>
static vx_status binary_grad_t(vx_ctx *ctx, const vx_tensor *g, const vx_tensor *a, const vx_tensor *b, vx_tensor *gi,
                               Bc bc, int op, int which, bool direct) {
    k_binary_grad<T><<<blocks_for(g->numel), TPB, 0, STREAM(ctx)>>>(
        (const T *)g->data, a->data ? (const T *)a->data : NULL, b->data ? (const T *)b->data : NULL, (T *)gi->data,
        g->numel, bc, op, which, direct);
    return VX_OK;
}

static vx_status binary_grad_launch(vx_ctx *ctx, const vx_tensor *g, const vx_tensor *a, const vx_tensor *b,
                                    vx_tensor *gi, Bc bc, int op, int which, bool direct) {
    VXK_FLOAT_DISPATCH(ctx, g->dtype, "binary backward", binary_grad_t<T>(ctx, g, a, b, gi, bc, op, which, direct));
}

static vx_status binary_bwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *a = run->in[0], *b = run->in[1], *g = run->grad_out[0];
    int op = bin_code(run);
    if (run->n_in != 2 && (op == B_MAX || op == B_MIN)) return vx_k_maxmin_n_bwd(ctx, run, op == B_MAX);
    Bc bc;
    memset(&bc, 0, sizeof bc);
    vx_tensor *ab[2] = {a, b};
    vxk_broadcast_shape(2, ab, &bc.rank, bc.dims);
    bc_strides_t(&bc, 0, a); /* saved operands may be strided views */
    bc_strides_t(&bc, 1, b);
    if (!g) return VX_OK;
    for (int k = 0; k < 2; k++) {
        if (!run->need_grad[k]) continue;
        vx_tensor *x = run->in[k];
        bool same = x->numel == g->numel;
        if (op == B_ADD && same) { /* AddBackward passes the gradient on */
            run->grad_in[k] = vx_tensor_view(ctx, g, x->rank, x->dims);
            if (!run->grad_in[k]) return VX_EOOM;
            continue;
        }
        vx_tensor *gi = vx_grad_new(ctx, run, k);
        if (!gi) return VX_EOOM;
        if (!same && vx_tensor_zero(ctx, gi)) return VX_ECUDA;
        Bc b3 = bc;
        bc_strides(&b3, 2, x->dims, x->rank);
        vx_status st = binary_grad_launch(ctx, g, a, b, gi, b3, op, k, same);
        if (st) return st;
    }
    return launched(ctx, run->node->op_type);
}

static void binary_saves(const vx_run *run, uint32_t *si, uint32_t *so) {
    int op = bin_code(run);
    *si = 0;
    *so = 0;
    if (op == B_MAX || op == B_MIN) { /* maximum / minimum: both operands (every input of a chain) */
        for (int k = 0; k < run->n_in; k++) *si |= VX_SLOT(k);
    } else if (op == B_MOD || op == B_FMOD) { /* fmod / remainder: both, for the divisor's gradient */
        if (run->need_grad[1]) *si = VX_SLOT(0) | VX_SLOT(1);
    } else if (op == B_MUL) {
        if (run->need_grad[1]) *si |= VX_SLOT(0);
        if (run->need_grad[0]) *si |= VX_SLOT(1);
    } else if (op == B_DIV) {
        *si |= VX_SLOT(1);
        if (run->need_grad[1]) *si |= VX_SLOT(0);
    }
}

/* ---- Where ------------------------------------------------------------------------ */

template <typename T>
__global__ void k_where(const uint8_t *c, const T *x, const T *y, T *o, int64_t n, Bc bc) {
    GRID_LOOP(i, n) {
        int64_t off[3];
        bc_offsets(bc, i, 3, off);
        o[i] = c[off[0]] ? x[off[1]] : y[off[2]];
    }
}

template <typename T>
__global__ void k_where_grad(const uint8_t *c, const T *g, T *gi, int64_t n, Bc bc, int which, bool direct) {
    GRID_LOOP(i, n) {
        int64_t off[3];
        bc_offsets(bc, i, 3, off); /* 0: cond, 1: receiving operand */
        bool take = c[off[0]] ? which == 1 : which == 2;
        float v = take ? vxk_ld(g[i]) : 0.0f;
        if (direct) gi[i] = vxk_st<T>(v);
        else vxk_atomic_add(&gi[off[1]], v);
    }
}

template <typename T>
static vx_status where_grad_t(vx_ctx *ctx, const vx_tensor *c, const vx_tensor *g, vx_tensor *gi, Bc bc, int which,
                              bool direct) {
    k_where_grad<T><<<blocks_for(g->numel), TPB, 0, STREAM(ctx)>>>((const uint8_t *)c->data, (const T *)g->data,
                                                                   (T *)gi->data, g->numel, bc, which, direct);
    return VX_OK;
}

static vx_status where_grad_launch(vx_ctx *ctx, const vx_tensor *c, const vx_tensor *g, vx_tensor *gi, Bc bc, int which,
                                   bool direct) {
    VXK_FLOAT_DISPATCH(ctx, g->dtype, "Where backward", where_grad_t<T>(ctx, c, g, gi, bc, which, direct));
}

static vx_status where_fwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *c = run->in[0], *x = run->in[1], *y = run->in[2];
    if (!c || !x || !y) return vx_fail(ctx, VX_ESHAPE, "needs three inputs");
    if (c->dtype != VX_BOOL || x->dtype != y->dtype) return vx_fail(ctx, VX_EUNSUPPORTED, "dtypes");
    vx_tensor *ts[3] = {c, x, y};
    Bc bc;
    memset(&bc, 0, sizeof bc);
    if (!vxk_broadcast_shape(3, ts, &bc.rank, bc.dims)) return vx_fail(ctx, VX_ESHAPE, "shapes do not broadcast");
    for (int k = 0; k < 3; k++) bc_strides_t(&bc, k, ts[k]);
    vx_tensor *o = vx_out_new(ctx, run, 0, x->dtype, bc.rank, bc.dims);
    if (!o) return VX_EOOM;
    if (!o->numel) return VX_OK;
    if (x->dtype == VX_F32)
        k_where<float><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>((const uint8_t *)c->data, (const float *)x->data,
                                                                   (const float *)y->data, (float *)o->data, o->numel, bc);
    else if (x->dtype == VX_I64)
        k_where<long long><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>(
            (const uint8_t *)c->data, (const long long *)x->data, (const long long *)y->data, (long long *)o->data,
            o->numel, bc);
    else if (vx_dtype_size(x->dtype) == 2)
        k_where<h16><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>(
            (const uint8_t *)c->data, (const h16 *)x->data, (const h16 *)y->data, (h16 *)o->data, o->numel, bc);
    else
        k_where<uint8_t><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>(
            (const uint8_t *)c->data, (const uint8_t *)x->data, (const uint8_t *)y->data, (uint8_t *)o->data, o->numel, bc);
    return launched(ctx, "Where");
}

static vx_status where_bwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *c = run->in[0], *g = run->grad_out[0];
    if (!g) return VX_OK;
    for (int k = 1; k <= 2; k++) {
        if (!run->need_grad[k]) continue;
        vx_tensor *x = run->in[k];
        vx_tensor *gi = vx_grad_new(ctx, run, k);
        if (!gi) return VX_EOOM;
        bool direct = x->numel == g->numel;
        if (!direct && vx_tensor_zero(ctx, gi)) return VX_ECUDA;
        Bc bc;
        memset(&bc, 0, sizeof bc);
        bc.rank = g->rank;
        memcpy(bc.dims, g->dims, sizeof bc.dims);
        bc_strides_t(&bc, 0, c);
        bc_strides(&bc, 1, x->dims, x->rank);
        vx_status st = where_grad_launch(ctx, c, g, gi, bc, k, direct);
        if (st) return st;
    }
    return launched(ctx, "Where backward");
}

/* ---- Not, RandomUniformLike ------------------------------------------------------- */

__global__ void k_not(const uint8_t *x, uint8_t *o, int64_t n) {
    GRID_LOOP(i, n) o[i] = !x[i];
}

static vx_status not_fwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *x = run->in[0];
    if (!x || x->dtype != VX_BOOL) return vx_fail(ctx, VX_EUNSUPPORTED, "Not: a bool input only");
    vx_tensor *o = vx_out_new(ctx, run, 0, VX_BOOL, x->rank, x->dims);
    if (!o) return VX_EOOM;
    if (o->numel) k_not<<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>((const uint8_t *)x->data, (uint8_t *)o->data, o->numel);
    return launched(ctx, "Not");
}

/* Uniform values in [low, high) shaped like the input (the dynamo
 * exporter's stochastic depth and dropout); float32 only. */
static vx_status random_like_fwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *x = run->in[0];
    int64_t dt = est_node_attr_int(run->node, "dtype", 1);
    if (!x || (dt != 1 && dt != 11 && dt != 10 && dt != 16))
        return vx_fail(ctx, VX_EUNSUPPORTED, "RandomUniformLike: a floating output only");
    vx_tensor *o = vx_out_new(ctx, run, 0, vx_float_dtype(ctx), x->rank, x->dims);
    if (!o) return VX_EOOM;
    float lo = (float)est_node_attr_float(run->node, "low", 0.0), hi = (float)est_node_attr_float(run->node, "high", 1.0);
    return vx_k_random(ctx, o, lo, hi, vx_seed(ctx));
}

/* ---- Dropout ---------------------------------------------------------------------- */

template <typename T>
__global__ void k_dropout(const T *x, T *o, uint8_t *mask, int64_t n, float p, unsigned long long seed) {
    GRID_LOOP(i, n) {
        unsigned long long z = seed + (unsigned long long)i * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        float u = (float)(z >> 40) * (1.0f / 16777216.0f);
        uint8_t keep = u >= p;
        mask[i] = keep;
        o[i] = vxk_st<T>(keep ? vxk_ld(x[i]) / (1.f - p) : 0.f);
    }
}

template <typename T>
__global__ void k_dropout_grad(const T *g, const uint8_t *mask, T *gi, int64_t n, float scale) {
    GRID_LOOP(i, n) gi[i] = vxk_st<T>(mask[i] ? vxk_ld(g[i]) * scale : 0.f);
}

template <typename T>
static vx_status dropout_launch_t(vx_ctx *ctx, const vx_tensor *x, vx_tensor *o, vx_tensor *m, float p) {
    k_dropout<T><<<blocks_for(x->numel), TPB, 0, STREAM(ctx)>>>((const T *)x->data, (T *)o->data, (uint8_t *)m->data,
                                                                x->numel, p, (unsigned long long)vx_seed(ctx));
    return VX_OK;
}

template <typename T>
static vx_status dropout_grad_t(vx_ctx *ctx, const vx_tensor *g, const vx_tensor *m, vx_tensor *gi, float scale) {
    k_dropout_grad<T><<<blocks_for(gi->numel), TPB, 0, STREAM(ctx)>>>((const T *)g->data, (const uint8_t *)m->data,
                                                                      (T *)gi->data, gi->numel, scale);
    return VX_OK;
}

static bool dropout_training(vx_ctx *ctx, const vx_run *run, float *p) {
    *p = run->opset < 12 ? (float)est_node_attr_float(run->node, "ratio", 0.5) : 0.5f;
    if (run->n_in > 1 && run->in[1] && run->in[1]->numel) *p = (float)vx_tensor_get(ctx, run->in[1], 0);
    bool training = run->training;
    if (run->n_in > 2 && run->in[2] && run->in[2]->numel) training = training && vx_tensor_get(ctx, run->in[2], 0) != 0;
    if (run->opset < 7 && est_node_attr_int(run->node, "is_test", 0)) training = false;
    return training && *p > 0.f;
}

static vx_status dropout_fwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *x = run->in[0];
    if (!x || !vx_dtype_is_float(x->dtype)) return vx_fail(ctx, VX_EUNSUPPORTED, "needs a floating input");
    float p;
    bool has_mask = run->n_out > 1 && run->node->outputs[1] >= 0;
    if (!dropout_training(ctx, run, &p)) {
        /* eval: the input itself */
        run->out[0] = vx_tensor_view(ctx, x, x->rank, x->dims);
        if (!run->out[0]) return VX_EOOM;
        if (has_mask) {
            vx_tensor *m = vx_out_new(ctx, run, 1, VX_BOOL, x->rank, x->dims);
            if (!m) return VX_EOOM;
            if (m->numel && cudaMemsetAsync(m->data, 1, (size_t)m->numel, STREAM(ctx)) != cudaSuccess)
                return launched(ctx, "Dropout");
        }
        return VX_OK;
    }
    vx_tensor *o = vx_out_new(ctx, run, 0, x->dtype, x->rank, x->dims);
    if (!o) return VX_EOOM;
    vx_tensor *m;
    if (has_mask) {
        m = vx_out_new(ctx, run, 1, VX_BOOL, x->rank, x->dims);
    } else {
        m = vx_tensor_new(ctx, VX_BOOL, x->rank, x->dims, VX_CAT_ACTIVATIONS);
        run->saved[0] = m;
    }
    if (!m) return VX_EOOM;
    vx_tensor *xc = vx_contiguous(ctx, x); /* a strided input: a temporary copy */
    if (!xc) return VX_EOOM;
    vx_status st = VX_OK;
    if (x->numel) {
        vx_dtype dt = x->dtype;
        st = dt == VX_BF16 ? dropout_launch_t<__nv_bfloat16>(ctx, xc, o, m, p)
             : dt == VX_F16 ? dropout_launch_t<__half>(ctx, xc, o, m, p)
                            : dropout_launch_t<float>(ctx, xc, o, m, p);
    }
    vx_tensor_release(ctx, xc);
    return st ? st : launched(ctx, "Dropout");
}

/* The mask output is kept for backward only when the op drops (its output
 * is then a new tensor, not a view of the input): at::dropout returns its
 * input when p is 0 or it is not training, and keeps no mask. */
static void dropout_saves(const vx_run *run, uint32_t *si, uint32_t *so) {
    *si = VX_SLOT(1) | VX_SLOT(2); /* ratio and training_mode: host constants */
    bool drops = run->out[0] && !run->out[0]->base;
    *so = drops && run->n_out > 1 && run->node->outputs[1] >= 0 ? VX_SLOT(1) : 0;
}

static vx_status dropout_bwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *g = run->grad_out[0];
    if (!g || !run->need_grad[0]) return VX_OK;
    float p;
    bool tr = dropout_training(ctx, run, &p);
    vx_tensor *m = run->saved[0] ? run->saved[0] : (run->n_out > 1 ? run->out[1] : NULL);
    if (!tr || !m || !m->data) {
        run->grad_in[0] = vx_tensor_view(ctx, g, g->rank, g->dims);
        return run->grad_in[0] ? VX_OK : VX_EOOM;
    }
    vx_tensor *gi = vx_grad_new(ctx, run, 0);
    if (!gi) return VX_EOOM;
    if (gi->numel) {
        vx_dtype dt = g->dtype;
        float sc = 1.f / (1.f - p);
        vx_status st = dt == VX_BF16 ? dropout_grad_t<__nv_bfloat16>(ctx, g, m, gi, sc)
                       : dt == VX_F16 ? dropout_grad_t<__half>(ctx, g, m, gi, sc)
                                      : dropout_grad_t<float>(ctx, g, m, gi, sc);
        if (st) return st;
    }
    return launched(ctx, "Dropout backward");
}

/* ---- Cast (its kernels: vx_k_cast, ops_helpers.cu) --------------------------------- */

/* A float `to` is the run's float dtype (--dtype converts every float
 * tensor of the graph, as model.to(dtype) does). */
static vx_dtype onnx_to_vx(vx_ctx *ctx, int64_t to) {
    switch (to) {
    case 1: case 10: case 11: case 16: return vx_float_dtype(ctx);
    case 9: return VX_BOOL;
    default: return VX_I64;
    }
}

static vx_status cast_fwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *x = run->in[0];
    vx_dtype to = onnx_to_vx(ctx, est_node_attr_int(run->node, "to", 1));
    if (to == x->dtype) {
        run->out[0] = vx_tensor_view(ctx, x, x->rank, x->dims);
        return run->out[0] ? VX_OK : VX_EOOM;
    }
    vx_tensor *o = vx_out_new(ctx, run, 0, to, x->rank, x->dims);
    if (!o) return VX_EOOM;
    vx_tensor *xc = vx_contiguous(ctx, x); /* a strided input: a temporary copy */
    if (!xc) return VX_EOOM;
    vx_status st = vx_k_cast(ctx, xc, o);
    vx_tensor_release(ctx, xc);
    return st;
}

/* The gradient passes through, cast back to the input's float dtype where
 * the cast changed it (ToCopyBackward). */
static vx_status cast_bwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *g = run->grad_out[0];
    if (!g || !run->need_grad[0] || !vx_dtype_is_float(run->in[0]->dtype)) return VX_OK;
    if (g->dtype == run->in[0]->dtype) {
        run->grad_in[0] = vx_tensor_view(ctx, g, g->rank, g->dims);
        return run->grad_in[0] ? VX_OK : VX_EOOM;
    }
    vx_tensor *gi = vx_grad_new(ctx, run, 0);
    if (!gi) return VX_EOOM;
    vx_tensor *gc = vx_contiguous(ctx, g);
    if (!gc) return VX_EOOM;
    vx_status st = vx_k_cast(ctx, gc, gi);
    vx_tensor_release(ctx, gc);
    return st;
}

/* ---- table ----------------------------------------------------------------------- */

extern "C" const vx_op vx_ops_elementwise[] = {
    {"Add", binary_fwd, binary_bwd, 0, 0, false, 0, binary_saves, VX_STRIDED_IN | VX_STRIDED_SAVED, VX_HALF},
    {"Sub", binary_fwd, binary_bwd, 0, 0, false, 0, binary_saves, VX_STRIDED_IN | VX_STRIDED_SAVED, VX_HALF},
    {"Mul", binary_fwd, binary_bwd, VX_SLOT(0) | VX_SLOT(1), 0, false, 0, binary_saves, VX_STRIDED_IN | VX_STRIDED_SAVED, VX_HALF},
    {"Div", binary_fwd, binary_bwd, VX_SLOT(0) | VX_SLOT(1), 0, false, 0, binary_saves, VX_STRIDED_IN | VX_STRIDED_SAVED, VX_HALF},
    {"Mod", binary_fwd, binary_bwd, 0, 0, false, 0, binary_saves, VX_STRIDED_IN | VX_STRIDED_SAVED, VX_HALF},
    {"Max", binary_fwd, binary_bwd, 0, 0, false, 0, binary_saves, VX_STRIDED_IN | VX_STRIDED_SAVED, VX_HALF},
    {"Min", binary_fwd, binary_bwd, 0, 0, false, 0, binary_saves, VX_STRIDED_IN | VX_STRIDED_SAVED, VX_HALF},
    {"Equal", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN, VX_HALF},
    {"GreaterOrEqual", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN, VX_HALF},
    {"Less", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN, VX_HALF},
    {"Greater", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN, VX_HALF},
    {"LessOrEqual", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN, VX_HALF},
    {"And", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN},
    {"Or", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN},
    {"Xor", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN},
    {"Not", not_fwd, NULL, 0, 0, false, 0, NULL, 0},
    {"RandomUniformLike", random_like_fwd, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Where", where_fwd, where_bwd, VX_SLOT(0), 0, false, 0, NULL, VX_STRIDED_IN | VX_STRIDED_SAVED, VX_HALF},
    {"Dropout", dropout_fwd, dropout_bwd, VX_SLOT(1) | VX_SLOT(2), VX_SLOT(1), false, VX_SLOT(1) | VX_SLOT(2),
     dropout_saves, VX_STRIDED_IN, VX_HALF},
    {"Cast", cast_fwd, cast_bwd, 0, 0, false, 0, NULL, VX_STRIDED_IN | VX_STRIDED_SAVED | VX_STRIDED_GRAD, VX_HALF},
};
extern "C" const size_t vx_ops_elementwise_count = sizeof vx_ops_elementwise / sizeof vx_ops_elementwise[0];
