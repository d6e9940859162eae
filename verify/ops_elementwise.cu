/* ops_elementwise.cu: Add, Sub, Mul, Div, Mod, Max, Min (numpy
 * broadcasting), the comparisons and logical ops, Not, RandomUniformLike,
 * Dropout, Where, Cast (the one-input activations and math are in
 * ops_unary.cu); and the small
 * kernels the executor, the optimizer and the shape ops share (fill, add,
 * mean, cast, random, broadcast copy, reduce-to-shape, slice). */
#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

#include "ops_common.cuh"
#include "vx_internal.h"

#define TPB 256

static inline unsigned blocks_for(int64_t n) {
    int64_t b = (n + TPB - 1) / TPB;
    if (b > 65535LL * 16) b = 65535LL * 16;
    return (unsigned)(b < 1 ? 1 : b);
}

#define STREAM(ctx) ((cudaStream_t)vx_stream(ctx))
#define GRID_LOOP(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static vx_status launched(vx_ctx *ctx, const char *what) {
    cudaError_t e = cudaPeekAtLastError();
    if (e == cudaSuccess) return VX_OK;
    cudaGetLastError();
    return vx_fail(ctx, VX_ECUDA, "%s: %s", what, cudaGetErrorString(e));
}

/* ---- broadcasting -------------------------------------------------------------- */

/* Output index space (rank, dims) and, per operand, its strides there (0 on
 * a broadcast dim). */
struct Bc {
    int rank;
    int64_t dims[VX_MAX_RANK];
    int64_t st[3][VX_MAX_RANK];
};

static void bc_strides(Bc *bc, int which, const int64_t *dims, int rank) {
    int off = bc->rank - rank;
    int64_t s = 1;
    for (int d = bc->rank - 1; d >= 0; d--) {
        if (d < off) {
            bc->st[which][d] = 0;
            continue;
        }
        int64_t e = dims[d - off];
        bc->st[which][d] = e == 1 ? 0 : s;
        s *= e;
    }
}

/* Like bc_strides, through t's own strides when t is a strided view (an
 * expanded, sliced or transposed operand is read in place, as PyTorch's
 * TensorIterator does). */
static void bc_strides_t(Bc *bc, int which, const vx_tensor *t) {
    if (!t->strided) {
        bc_strides(bc, which, t->dims, t->rank);
        return;
    }
    int off = bc->rank - t->rank;
    for (int d = 0; d < bc->rank; d++)
        bc->st[which][d] = d < off || t->dims[d - off] == 1 ? 0 : t->strides[d - off];
}

__device__ __forceinline__ void bc_offsets(const Bc &bc, int64_t i, int nops, int64_t *off) {
    off[0] = off[1] = off[2] = 0;
    for (int d = bc.rank - 1; d >= 0; d--) {
        int64_t c = i % bc.dims[d];
        i /= bc.dims[d];
        for (int k = 0; k < nops; k++) off[k] += c * bc.st[k][d];
    }
}

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

template <typename T>
__global__ void k_compare(const T *a, const T *b, uint8_t *o, int64_t n, Bc bc, int op) {
    GRID_LOOP(i, n) {
        int64_t off[3];
        bc_offsets(bc, i, 2, off);
        T x = a[off[0]], y = b[off[1]];
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
__global__ void k_binary_grad(const float *g, const float *a, const float *b, float *gi, int64_t n, Bc bc, int op,
                              int which, bool direct) {
    GRID_LOOP(i, n) {
        int64_t off[3];
        bc_offsets(bc, i, 3, off); /* 0: a, 1: b, 2: the operand receiving */
        float gv = g[i], v;
        switch (op) {
        case B_ADD: v = gv; break;
        case B_SUB: v = which ? -gv : gv; break;
        case B_MUL: v = which ? gv * a[off[0]] : gv * b[off[1]]; break;
        case B_MOD:
        case B_FMOD: {
            float q = a[off[0]] / b[off[1]];
            v = which ? -gv * (op == B_MOD ? floorf(q) : truncf(q)) : gv;
            break;
        }
        case B_MAX:
        case B_MIN: { /* maximum / minimum: ties share the gradient */
            float x = a[off[0]], y = b[off[1]], mine = which ? y : x, other = which ? x : y;
            bool wins = op == B_MAX ? mine > other : mine < other;
            v = wins ? gv : mine == other ? 0.5f * gv : 0.f;
            break;
        }
        default: {
            float bv = b[off[1]];
            v = which ? -gv * a[off[0]] / (bv * bv) : gv / bv;
        }
        }
        if (direct) gi[i] = v;
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
        else
            k_compare<uint8_t><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>(
                (const uint8_t *)a->data, (const uint8_t *)b->data, (uint8_t *)o->data, o->numel, bc, op);
    } else if (a->dtype == VX_F32) {
        k_binary<float><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>((const float *)a->data, (const float *)b->data,
                                                                    (float *)o->data, o->numel, bc, op, flat);
    } else if (a->dtype == VX_I64) {
        k_binary<long long><<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>(
            (const long long *)a->data, (const long long *)b->data, (long long *)o->data, o->numel, bc, op, flat);
    } else {
        return vx_fail(ctx, VX_EUNSUPPORTED, "arithmetic on bool");
    }
    return launched(ctx, run->node->op_type);
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
        k_binary_grad<<<blocks_for(g->numel), TPB, 0, STREAM(ctx)>>>(
            (const float *)g->data, a->data ? (const float *)a->data : NULL, b->data ? (const float *)b->data : NULL,
            (float *)gi->data, g->numel, b3, op, k, same);
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

__global__ void k_where_grad(const uint8_t *c, const float *g, float *gi, int64_t n, Bc bc, int which, bool direct) {
    GRID_LOOP(i, n) {
        int64_t off[3];
        bc_offsets(bc, i, 3, off); /* 0: cond, 1: receiving operand */
        bool take = c[off[0]] ? which == 1 : which == 2;
        float v = take ? g[i] : 0.0f;
        if (direct) gi[i] = v;
        else vxk_atomic_add(&gi[off[1]], v);
    }
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
        k_where_grad<<<blocks_for(g->numel), TPB, 0, STREAM(ctx)>>>((const uint8_t *)c->data, (const float *)g->data,
                                                                    (float *)gi->data, g->numel, bc, k, direct);
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
    vx_tensor *o = vx_out_new(ctx, run, 0, VX_F32, x->rank, x->dims);
    if (!o) return VX_EOOM;
    float lo = (float)est_node_attr_float(run->node, "low", 0.0), hi = (float)est_node_attr_float(run->node, "high", 1.0);
    return vx_k_random(ctx, o, lo, hi, vx_seed(ctx));
}

/* ---- Dropout ---------------------------------------------------------------------- */

__global__ void k_dropout(const float *x, float *o, uint8_t *mask, int64_t n, float p, unsigned long long seed) {
    GRID_LOOP(i, n) {
        unsigned long long z = seed + (unsigned long long)i * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        float u = (float)(z >> 40) * (1.0f / 16777216.0f);
        uint8_t keep = u >= p;
        mask[i] = keep;
        o[i] = keep ? x[i] / (1.f - p) : 0.f;
    }
}

__global__ void k_dropout_grad(const float *g, const uint8_t *mask, float *gi, int64_t n, float scale) {
    GRID_LOOP(i, n) gi[i] = mask[i] ? g[i] * scale : 0.f;
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
    if (!x || x->dtype != VX_F32) return vx_fail(ctx, VX_EUNSUPPORTED, "needs a float32 input");
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
    vx_tensor *o = vx_out_new(ctx, run, 0, VX_F32, x->rank, x->dims);
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
    if (x->numel)
        k_dropout<<<blocks_for(x->numel), TPB, 0, STREAM(ctx)>>>((const float *)xc->data, (float *)o->data,
                                                                (uint8_t *)m->data, x->numel, p,
                                                                (unsigned long long)vx_seed(ctx));
    vx_tensor_release(ctx, xc);
    return launched(ctx, "Dropout");
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
    if (gi->numel)
        k_dropout_grad<<<blocks_for(gi->numel), TPB, 0, STREAM(ctx)>>>(
            (const float *)g->data, (const uint8_t *)m->data, (float *)gi->data, gi->numel, 1.f / (1.f - p));
    return launched(ctx, "Dropout backward");
}

/* ---- Cast ------------------------------------------------------------------------- */

template <typename S, typename D> __global__ void k_cast(const S *s, D *d, int64_t n) {
    GRID_LOOP(i, n) d[i] = (D)s[i];
}
template <typename S> __global__ void k_cast_bool(const S *s, uint8_t *d, int64_t n) {
    GRID_LOOP(i, n) d[i] = s[i] != (S)0;
}

extern "C" vx_status vx_k_cast(vx_ctx *ctx, const vx_tensor *s, vx_tensor *d) {
    int64_t n = s->numel;
    if (!n) return VX_OK;
    unsigned b = blocks_for(n);
    cudaStream_t st = STREAM(ctx);
    if (s->dtype == d->dtype) {
        return vx_cuda_status(ctx, cudaMemcpyAsync(d->data, s->data, (size_t)n * vx_dtype_size(s->dtype),
                                                   cudaMemcpyDeviceToDevice, st), "Cast");
    }
    if (s->dtype == VX_F32 && d->dtype == VX_I64) k_cast<float, long long><<<b, TPB, 0, st>>>((const float *)s->data, (long long *)d->data, n);
    else if (s->dtype == VX_F32) k_cast_bool<float><<<b, TPB, 0, st>>>((const float *)s->data, (uint8_t *)d->data, n);
    else if (s->dtype == VX_I64 && d->dtype == VX_F32) k_cast<long long, float><<<b, TPB, 0, st>>>((const long long *)s->data, (float *)d->data, n);
    else if (s->dtype == VX_I64) k_cast_bool<long long><<<b, TPB, 0, st>>>((const long long *)s->data, (uint8_t *)d->data, n);
    else if (d->dtype == VX_F32) k_cast<uint8_t, float><<<b, TPB, 0, st>>>((const uint8_t *)s->data, (float *)d->data, n);
    else k_cast<uint8_t, long long><<<b, TPB, 0, st>>>((const uint8_t *)s->data, (long long *)d->data, n);
    return launched(ctx, "Cast");
}

static vx_dtype onnx_to_vx(int64_t to) {
    switch (to) {
    case 1: case 10: case 11: case 16: return VX_F32;
    case 9: return VX_BOOL;
    default: return VX_I64;
    }
}

static vx_status cast_fwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *x = run->in[0];
    vx_dtype to = onnx_to_vx(est_node_attr_int(run->node, "to", 1));
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

static vx_status cast_bwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *g = run->grad_out[0];
    if (!g || !run->need_grad[0] || run->in[0]->dtype != VX_F32) return VX_OK;
    run->grad_in[0] = vx_tensor_view(ctx, g, g->rank, g->dims);
    return run->grad_in[0] ? VX_OK : VX_EOOM;
}

/* ---- shared helpers ------------------------------------------------------------------ */

__global__ void k_fill(float *p, int64_t n, float v) {
    GRID_LOOP(i, n) p[i] = v;
}
__global__ void k_fill_i64(long long *p, int64_t n, long long v) {
    GRID_LOOP(i, n) p[i] = v;
}
__global__ void k_add(const float *a, const float *b, float *o, int64_t n) {
    GRID_LOOP(i, n) o[i] = a[i] + b[i];
}
__global__ void k_sum(const float *x, float *out, int64_t n, float scale) {
    __shared__ float sh[TPB];
    float s = 0.f;
    GRID_LOOP(i, n) s += x[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = TPB / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, sh[0] * scale);
}
/* Counter-based uniform in [0, 1) for element i (splitmix64 of seed + i):
 * no generator state, so every random op is one pass with no extra memory. */
static __device__ __forceinline__ float rand_u01(unsigned long long seed, int64_t i) {
    unsigned long long z = seed + (unsigned long long)i * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}
__global__ void k_random(float *p, int64_t n, float lo, float hi, unsigned long long seed) {
    GRID_LOOP(i, n) p[i] = lo + (hi - lo) * rand_u01(seed, i);
}
/* Box-Muller on two draws of the same counter stream (2i, 2i + 1). */
__global__ void k_random_normal(float *p, int64_t n, float mean, float scale, unsigned long long seed) {
    GRID_LOOP(i, n) {
        float u1 = 1.0f - rand_u01(seed, 2 * i), u2 = rand_u01(seed, 2 * i + 1); /* u1 in (0, 1] */
        p[i] = mean + scale * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    }
}
/* y = (u < p) as float32 or bool (esize 4 or 1). */
__global__ void k_bernoulli(const float *prob, void *y, int64_t n, int esize, unsigned long long seed) {
    GRID_LOOP(i, n) {
        bool on = rand_u01(seed, i) < prob[i];
        if (esize == 4) ((float *)y)[i] = on ? 1.f : 0.f;
        else ((uint8_t *)y)[i] = on;
    }
}

extern "C" vx_status vx_k_fill(vx_ctx *ctx, vx_tensor *t, float v) {
    if (!t->numel) return VX_OK;
    if (t->dtype == VX_F32) k_fill<<<blocks_for(t->numel), TPB, 0, STREAM(ctx)>>>((float *)t->data, t->numel, v);
    else if (t->dtype == VX_I64)
        k_fill_i64<<<blocks_for(t->numel), TPB, 0, STREAM(ctx)>>>((long long *)t->data, t->numel, (long long)v);
    else
        return vx_cuda_status(ctx, cudaMemsetAsync(t->data, v != 0, (size_t)t->numel, STREAM(ctx)), "fill");
    return launched(ctx, "fill");
}

extern "C" vx_status vx_k_add_inplace(vx_ctx *ctx, vx_tensor *dst, const vx_tensor *src) {
    if (!dst->numel) return VX_OK;
    k_add<<<blocks_for(dst->numel), TPB, 0, STREAM(ctx)>>>((const float *)dst->data, (const float *)src->data,
                                                           (float *)dst->data, dst->numel);
    return launched(ctx, "gradient sum");
}

extern "C" vx_status vx_k_add(vx_ctx *ctx, const vx_tensor *a, const vx_tensor *b, vx_tensor *o) {
    if (!o->numel) return VX_OK;
    k_add<<<blocks_for(o->numel), TPB, 0, STREAM(ctx)>>>((const float *)a->data, (const float *)b->data,
                                                         (float *)o->data, o->numel);
    return launched(ctx, "gradient sum");
}

extern "C" vx_status vx_k_mean(vx_ctx *ctx, const vx_tensor *x, vx_tensor *out) {
    if (cudaMemsetAsync(out->data, 0, sizeof(float), STREAM(ctx)) != cudaSuccess) return launched(ctx, "mean");
    if (!x->numel) return VX_OK;
    unsigned b = blocks_for(x->numel);
    if (b > 1024) b = 1024;
    k_sum<<<b, TPB, 0, STREAM(ctx)>>>((const float *)x->data, (float *)out->data, x->numel, 1.0f / (float)x->numel);
    return launched(ctx, "mean");
}

extern "C" vx_status vx_k_copy(vx_ctx *ctx, vx_tensor *dst, const vx_tensor *src) {
    if (!dst->numel) return VX_OK;
    return vx_cuda_status(ctx, cudaMemcpyAsync(dst->data, src->data, (size_t)dst->numel * vx_dtype_size(dst->dtype),
                                               cudaMemcpyDeviceToDevice, STREAM(ctx)), "copy");
}

extern "C" vx_status vx_k_random(vx_ctx *ctx, vx_tensor *t, float lo, float hi, uint64_t seed) {
    if (!t->numel) return VX_OK;
    k_random<<<blocks_for(t->numel), TPB, 0, STREAM(ctx)>>>((float *)t->data, t->numel, lo, hi,
                                                            (unsigned long long)seed);
    return launched(ctx, "random");
}

extern "C" vx_status vx_k_random_normal(vx_ctx *ctx, vx_tensor *t, float mean, float scale, uint64_t seed) {
    if (!t->numel) return VX_OK;
    k_random_normal<<<blocks_for(t->numel), TPB, 0, STREAM(ctx)>>>((float *)t->data, t->numel, mean, scale,
                                                                   (unsigned long long)seed);
    return launched(ctx, "random normal");
}

extern "C" vx_status vx_k_bernoulli(vx_ctx *ctx, const vx_tensor *prob, vx_tensor *out, uint64_t seed) {
    if (!out->numel) return VX_OK;
    k_bernoulli<<<blocks_for(out->numel), TPB, 0, STREAM(ctx)>>>((const float *)prob->data, out->data, out->numel,
                                                                 (int)vx_dtype_size(out->dtype),
                                                                 (unsigned long long)seed);
    return launched(ctx, "Bernoulli");
}

/* Broadcast copy (Expand): dst[i] = src[broadcast index]. */
template <typename T> __global__ void k_bcopy(const T *s, T *d, int64_t n, Bc bc) {
    GRID_LOOP(i, n) {
        int64_t off[3];
        bc_offsets(bc, i, 1, off);
        d[i] = s[off[0]];
    }
}
__global__ void k_reduce_to(const float *s, float *d, int64_t n, Bc bc) {
    GRID_LOOP(i, n) {
        int64_t off[3];
        bc_offsets(bc, i, 1, off);
        vxk_atomic_add(&d[off[0]], s[i]);
    }
}

extern "C" vx_status vx_k_broadcast_copy(vx_ctx *ctx, const vx_tensor *src, vx_tensor *dst);
extern "C" vx_status vx_k_broadcast_copy(vx_ctx *ctx, const vx_tensor *src, vx_tensor *dst) {
    if (!dst->numel) return VX_OK;
    Bc bc;
    memset(&bc, 0, sizeof bc);
    bc.rank = dst->rank;
    memcpy(bc.dims, dst->dims, sizeof bc.dims);
    bc_strides(&bc, 0, src->dims, src->rank);
    unsigned b = blocks_for(dst->numel);
    if (dst->dtype == VX_F32) k_bcopy<float><<<b, TPB, 0, STREAM(ctx)>>>((const float *)src->data, (float *)dst->data, dst->numel, bc);
    else if (dst->dtype == VX_I64) k_bcopy<long long><<<b, TPB, 0, STREAM(ctx)>>>((const long long *)src->data, (long long *)dst->data, dst->numel, bc);
    else k_bcopy<uint8_t><<<b, TPB, 0, STREAM(ctx)>>>((const uint8_t *)src->data, (uint8_t *)dst->data, dst->numel, bc);
    return launched(ctx, "broadcast copy");
}

/* dst (zeroed here) = src summed over the dims dst broadcasts along. */
extern "C" vx_status vx_k_reduce_to(vx_ctx *ctx, const vx_tensor *src, vx_tensor *dst);
extern "C" vx_status vx_k_reduce_to(vx_ctx *ctx, const vx_tensor *src, vx_tensor *dst) {
    vx_status st = vx_tensor_zero(ctx, dst);
    if (st || !src->numel) return st;
    Bc bc;
    memset(&bc, 0, sizeof bc);
    bc.rank = src->rank;
    memcpy(bc.dims, src->dims, sizeof bc.dims);
    bc_strides(&bc, 0, dst->dims, dst->rank);
    k_reduce_to<<<blocks_for(src->numel), TPB, 0, STREAM(ctx)>>>((const float *)src->data, (float *)dst->data,
                                                                 src->numel, bc);
    return launched(ctx, "reduce");
}

/* Slice: dst[i] = src[start + idx * step] per dim; backward scatters. */
struct Sl {
    int rank;
    int64_t dims[VX_MAX_RANK];   /* dst dims */
    int64_t sst[VX_MAX_RANK];    /* src stride * step */
    int64_t base;                /* src offset of dst[0] */
};
template <typename T> __global__ void k_slice(const T *s, T *d, int64_t n, Sl sl, bool scatter) {
    GRID_LOOP(i, n) {
        int64_t r = i, off = sl.base;
        for (int k = sl.rank - 1; k >= 0; k--) {
            off += (r % sl.dims[k]) * sl.sst[k];
            r /= sl.dims[k];
        }
        if (scatter) ((T *)s)[off] = d[i];
        else d[i] = s[off];
    }
}

/* starts/steps per dim of src (already normalised); dst has the slice's dims.
 * scatter: write dst's values into src at the slice (backward). */
extern "C" vx_status vx_k_slice(vx_ctx *ctx, vx_tensor *src, vx_tensor *dst, const int64_t *starts,
                                const int64_t *steps, int scatter);
extern "C" vx_status vx_k_slice(vx_ctx *ctx, vx_tensor *src, vx_tensor *dst, const int64_t *starts,
                                const int64_t *steps, int scatter) {
    if (!dst->numel) return VX_OK;
    Sl sl;
    memset(&sl, 0, sizeof sl);
    sl.rank = src->rank;
    int64_t s = 1;
    for (int k = src->rank - 1; k >= 0; k--) {
        sl.dims[k] = dst->dims[k];
        sl.sst[k] = s * steps[k];
        sl.base += starts[k] * s;
        s *= src->dims[k];
    }
    unsigned b = blocks_for(dst->numel);
    if (src->dtype == VX_F32) k_slice<float><<<b, TPB, 0, STREAM(ctx)>>>((const float *)src->data, (float *)dst->data, dst->numel, sl, scatter);
    else if (src->dtype == VX_I64) k_slice<long long><<<b, TPB, 0, STREAM(ctx)>>>((const long long *)src->data, (long long *)dst->data, dst->numel, sl, scatter);
    else k_slice<uint8_t><<<b, TPB, 0, STREAM(ctx)>>>((const uint8_t *)src->data, (uint8_t *)dst->data, dst->numel, sl, scatter);
    return launched(ctx, "Slice");
}

/* ---- table ----------------------------------------------------------------------- */

extern "C" const vx_op vx_ops_elementwise[] = {
    {"Add", binary_fwd, binary_bwd, 0, 0, false, 0, binary_saves, VX_STRIDED_IN | VX_STRIDED_SAVED},
    {"Sub", binary_fwd, binary_bwd, 0, 0, false, 0, binary_saves, VX_STRIDED_IN | VX_STRIDED_SAVED},
    {"Mul", binary_fwd, binary_bwd, VX_SLOT(0) | VX_SLOT(1), 0, false, 0, binary_saves, VX_STRIDED_IN | VX_STRIDED_SAVED},
    {"Div", binary_fwd, binary_bwd, VX_SLOT(0) | VX_SLOT(1), 0, false, 0, binary_saves, VX_STRIDED_IN | VX_STRIDED_SAVED},
    {"Mod", binary_fwd, binary_bwd, 0, 0, false, 0, binary_saves, VX_STRIDED_IN | VX_STRIDED_SAVED},
    {"Max", binary_fwd, binary_bwd, 0, 0, false, 0, binary_saves, VX_STRIDED_IN | VX_STRIDED_SAVED},
    {"Min", binary_fwd, binary_bwd, 0, 0, false, 0, binary_saves, VX_STRIDED_IN | VX_STRIDED_SAVED},
    {"Equal", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN},
    {"GreaterOrEqual", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN},
    {"Less", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN},
    {"Greater", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN},
    {"LessOrEqual", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN},
    {"And", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN},
    {"Or", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN},
    {"Xor", binary_fwd, NULL, 0, 0, false, 0, NULL, VX_STRIDED_IN},
    {"Not", not_fwd, NULL, 0, 0, false, 0, NULL, 0},
    {"RandomUniformLike", random_like_fwd, NULL, 0, 0, false, 0, NULL, 0},
    {"Where", where_fwd, where_bwd, VX_SLOT(0), 0, false, 0, NULL, VX_STRIDED_IN | VX_STRIDED_SAVED},
    {"Dropout", dropout_fwd, dropout_bwd, VX_SLOT(1) | VX_SLOT(2), VX_SLOT(1), false, VX_SLOT(1) | VX_SLOT(2),
     dropout_saves, VX_STRIDED_IN},
    {"Cast", cast_fwd, cast_bwd, 0, 0, false, 0, NULL, VX_STRIDED_IN | VX_STRIDED_SAVED | VX_STRIDED_GRAD},
};
extern "C" const size_t vx_ops_elementwise_count = sizeof vx_ops_elementwise / sizeof vx_ops_elementwise[0];
