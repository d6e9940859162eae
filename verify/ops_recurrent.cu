/*
 * ops_recurrent.cu: LSTM, GRU and RNN, ONNX's one-node-per-layer form,
 * forward and backward, every direction and both layouts.
 *
 * Forward, per direction: one cuBLAS product X W^T for all steps, written
 * into the reserve; then per step the recurrent product h R^T added in place
 * and one element-wise kernel that applies the gates and writes h_t into Y.
 * Backward runs the steps in reverse with one kernel and the products
 * dG R per step, then dW = dG^T X and dX = dG W for all steps at once.
 *
 * Storage: float32, or bfloat16 / float16 in a half run, as X. The products
 * take the storage dtype (cublasGemmEx with a float32 accumulator for half),
 * the gate math runs in float32, and the reserve, Y and dG are stored in the
 * storage dtype (the products read them); the carried dh and dc stay
 * float32.
 *
 * Memory (layers/recurrent.c's verify rules follow it):
 *  - the reserve [D, T * N, K * H] in X's dtype, K slots per hidden unit:
 *      LSTM K = 5: i, o, f, c~ (activated, ONNX's gate order) and the cell C;
 *      GRU  K = 4: z, r, n and, linear_before_reset = 1, hn = R_h h + Rb_h,
 *                  or, linear_before_reset = 0, r * h_prev;
 *      RNN  K = 1: the pre-activation (backward reads h_t from Y).
 *    Training: saved[0], kept for backward. Inference: a workspace.
 *  - Y itself when the node omits it (saved[1] in training, else a workspace).
 *  - backward: a workspace of the pre-activation gradients dG [T * N, KG]
 *    in X's dtype (KG = G * H; GRU 4 * H: dz, dr, dn and dhn or d(r * h)),
 *    plus the carried dh [N, H] and, LSTM, dc [N, H], float32.
 * Saved for backward: X, W, R, B, initial_h, initial_c, Y and the reserve.
 * Strided inputs come as contiguous copies (the executor's rule), in
 * forward and again in backward; the output gradients are read in place.
 *
 * Refused (VX_EUNSUPPORTED): sequence_lens, peepholes, clip, input_forget,
 * and activations other than ONNX's defaults (RNN: Tanh or Relu).
 */
#include <strings.h>

#include "ops_common.cuh"

typedef enum cell_kind { CELL_RNN, CELL_GRU, CELL_LSTM } cell_kind;

typedef struct rnn_geom {
    cell_kind kind;
    bool relu;          /* RNN with activations Relu */
    bool lbr;           /* GRU linear_before_reset */
    bool reverse;       /* direction reverse (one direction) */
    bool layout1;       /* X [N, T, I], Y [N, T, D, H], states [N, D, H] */
    int64_t T, N, I, H, D, G;
    int64_t K;          /* reserve slots per hidden unit */
    int64_t KG;         /* dG columns */
} rnn_geom;

/* A row-major [N, H] matrix inside a larger tensor of storage type T. */
template <typename T> struct mat {
    T *p;
    int64_t ld;
};

static __device__ __forceinline__ float sigm(float x) { return 1.f / (1.f + expf(-x)); }

/* ---- geometry -------------------------------------------------------------- */

static bool default_activations(const vx_run *run, cell_kind kind, int64_t D, bool *relu) {
    *relu = false;
    if (!run->node) return true;
    const est_attr *a = NULL;
    for (int32_t k = 0; k < run->node->n_attrs; k++)
        if (strcmp(run->node->attrs[k].name, "activations") == 0) a = &run->node->attrs[k];
    if (!a) return true;
    static const char *const lstm[] = {"Sigmoid", "Tanh", "Tanh"}, *const gru[] = {"Sigmoid", "Tanh"};
    int per = kind == CELL_LSTM ? 3 : kind == CELL_GRU ? 2 : 1;
    if (a->type != EST_ATTR_STRINGS || (a->n != per && a->n != per * D)) return false;
    for (int64_t k = 0; k < a->n; k++) {
        const char *s = a->strings[k];
        if (kind == CELL_RNN) {
            bool r = strcasecmp(s, "Relu") == 0;
            if (!r && strcasecmp(s, "Tanh") != 0) return false;
            if (k > 0 && r != *relu) return false;
            *relu = r;
        } else if (strcasecmp(s, (kind == CELL_LSTM ? lstm : gru)[k % per]) != 0) {
            return false;
        }
    }
    return true;
}

static vx_status rnn_geometry(vx_ctx *ctx, const vx_run *run, rnn_geom *g) {
    const char *op = run->node ? run->node->op_type : "LSTM";
    memset(g, 0, sizeof *g);
    g->kind = op[0] == 'L' ? CELL_LSTM : op[0] == 'G' ? CELL_GRU : CELL_RNN;
    g->G = g->kind == CELL_LSTM ? 4 : g->kind == CELL_GRU ? 3 : 1;
    for (int k = 0; k < 3; k++)
        if (!vxk_has_in(run, k) || !vx_dtype_is_float(run->in[k]->dtype))
            return vx_fail(ctx, VX_EUNSUPPORTED, "%s: X, W and R must be floating", op);
    for (int k = 1; k <= 6; k++)
        if (k != 4 && vxk_has_in(run, k) && run->in[k]->dtype != run->in[0]->dtype)
            return vx_fail(ctx, VX_EUNSUPPORTED, "%s: floating inputs of different dtypes", op);
    if (vxk_has_in(run, 4)) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: sequence_lens has no kernel", op);
    if (vxk_has_in(run, 7)) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: peepholes (P) have no kernel", op);
    if (vxk_attr_float(run, "clip", 0) != 0) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: clip has no kernel", op);
    if (vxk_attr_int(run, "input_forget", 0) != 0)
        return vx_fail(ctx, VX_EUNSUPPORTED, "%s: input_forget has no kernel", op);
    const char *dir = vxk_attr_string(run, "direction", "forward");
    g->D = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
    g->reverse = strcmp(dir, "reverse") == 0;
    if (!default_activations(run, g->kind, g->D, &g->relu))
        return vx_fail(ctx, VX_EUNSUPPORTED, "%s: activations other than the defaults have no kernel", op);
    g->lbr = vxk_attr_int(run, "linear_before_reset", 0) != 0;
    g->layout1 = vxk_attr_int(run, "layout", 0) == 1;
    const vx_tensor *X = run->in[0], *W = run->in[1], *R = run->in[2];
    if (X->rank != 3 || W->rank != 3 || R->rank != 3) return vx_fail(ctx, VX_ESHAPE, "%s: X, W, R must be 3-D", op);
    g->T = X->dims[g->layout1 ? 1 : 0];
    g->N = X->dims[g->layout1 ? 0 : 1];
    g->I = X->dims[2];
    g->H = R->dims[2];
    if (W->dims[0] != g->D || R->dims[0] != g->D || W->dims[1] != g->G * g->H || R->dims[1] != g->G * g->H ||
        W->dims[2] != g->I)
        return vx_fail(ctx, VX_ESHAPE, "%s: W or R does not match X and hidden_size", op);
    if (vxk_has_in(run, 3) && run->in[3]->numel != g->D * 2 * g->G * g->H)
        return vx_fail(ctx, VX_ESHAPE, "%s: B has %lld elements", op, (long long)run->in[3]->numel);
    for (int k = 5; k <= 6; k++)
        if (vxk_has_in(run, k) && run->in[k]->numel != g->D * g->N * g->H)
            return vx_fail(ctx, VX_ESHAPE, "%s: input %d has %lld elements", op, k, (long long)run->in[k]->numel);
    g->K = g->kind == CELL_LSTM ? 5 : g->kind == CELL_GRU ? 4 : 1;
    g->KG = g->kind == CELL_GRU ? 4 * g->H : g->G * g->H;
    if (!vxk_gemm_fits(g->T * g->N, g->K * g->H, g->I + g->H)) return vx_fail(ctx, VX_ESHAPE, "%s: too large", op);
    return VX_OK;
}

/* Step s of the direction's order is time step t. */
static int64_t time_of(const rnn_geom *g, int d, int64_t s) {
    bool rev = d == 1 || g->reverse;
    return rev ? g->T - 1 - s : s;
}

/* Rows of X, the reserve and dG are in X's order: (t, n) or (n, t). */
template <typename T> static mat<T> rows_at(const rnn_geom *g, T *base, int64_t cols, int64_t t) {
    mat<T> m = {base + (g->layout1 ? t : t * g->N) * cols, g->layout1 ? g->T * cols : cols};
    return m;
}

/* Y[t, d] as an [N, H] matrix. */
template <typename T> static mat<T> y_at(const rnn_geom *g, T *y, int64_t t, int d) {
    mat<T> m;
    if (g->layout1) { m.p = y + (t * g->D + d) * g->H; m.ld = g->T * g->D * g->H; }
    else { m.p = y + (t * g->D + d) * g->N * g->H; m.ld = g->H; }
    return m;
}

/* A state tensor ([D, N, H] or [N, D, H]) at direction d, or {NULL}. */
template <typename T> static mat<T> state_at(const rnn_geom *g, const vx_tensor *s, int d) {
    mat<T> m = {NULL, g->H};
    if (!s || !s->data) return m;
    T *p = (T *)s->data;
    if (g->layout1) { m.p = p + d * g->H; m.ld = g->D * g->H; }
    else { m.p = p + d * g->N * g->H; m.ld = g->H; }
    return m;
}

/* Element strides of t: its own for a strided view, else row-major. */
static void strides_of(const vx_tensor *t, int64_t *st) {
    if (t->strided) { memcpy(st, t->strides, sizeof(int64_t) * (size_t)t->rank); return; }
    int64_t s = 1;
    for (int k = t->rank - 1; k >= 0; k--) { st[k] = s; s *= t->dims[k]; }
}

/* The gradients reaching Y, Y_h and Y_c may be strided views (the gradient
 * of the exporter's Transpose after Y): read in place when the hidden unit
 * is the innermost, unit stride, dimension. Y-like tensors (k = 0) at step
 * t, state-like ones (1, 2) with t ignored; {NULL} when there is none. */
template <typename T> static mat<T> grad_at(const rnn_geom *g, const vx_tensor *dy, int k, int64_t t, int d) {
    mat<T> m = {NULL, 0};
    if (!dy || !dy->data) return m;
    int64_t st[VX_MAX_RANK];
    strides_of(dy, st);
    T *p = (T *)dy->data;
    if (k == 0 && g->layout1) { m.p = p + t * st[1] + d * st[2]; m.ld = st[0]; }
    else if (k == 0) { m.p = p + t * st[0] + d * st[1]; m.ld = st[2]; }
    else if (g->layout1) { m.p = p + d * st[1]; m.ld = st[0]; }
    else { m.p = p + d * st[0]; m.ld = st[1]; }
    return m;
}

/* ---- element-wise kernels --------------------------------------------------- */

/* Storage T (the reserve, Y, the states, dG) loaded to float32 and rounded
 * on store; the carried dh and dc are float32 whatever T. */
template <typename T> struct cell_args {
    int64_t N, H;
    T *s; int64_t lds;            /* the step's reserve rows */
    const T *bias;                /* the direction's [Wb, Rb], or NULL */
    const T *h; int64_t ldh;      /* h_prev, or NULL (zeros) */
    const T *c; int64_t ldc;      /* LSTM c_prev, or NULL */
    T *y; int64_t ldy;            /* h_t */
};

/* Element k of an optional operand (the bias, h_prev, c_prev, dY), as a
 * float: zero when absent. */
template <typename T> static __device__ __forceinline__ float ld_or0(const T *p, int64_t k) {
    return p ? vxk_ld(p[k]) : 0.f;
}

template <typename T> static __global__ void lstm_cell_kernel(cell_args<T> a) {
    int64_t H = a.H, G = 4 * H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        T *s = a.s + n * a.lds;
        float i = sigm(vxk_ld(s[j]) + ld_or0(a.bias, j) + ld_or0(a.bias, G + j));
        float o = sigm(vxk_ld(s[H + j]) + ld_or0(a.bias, H + j) + ld_or0(a.bias, G + H + j));
        float f = sigm(vxk_ld(s[2 * H + j]) + ld_or0(a.bias, 2 * H + j) + ld_or0(a.bias, G + 2 * H + j));
        float c = tanhf(vxk_ld(s[3 * H + j]) + ld_or0(a.bias, 3 * H + j) + ld_or0(a.bias, G + 3 * H + j));
        float cp = ld_or0(a.c, n * a.ldc + j);
        float C = f * cp + i * c;
        s[j] = vxk_st<T>(i); s[H + j] = vxk_st<T>(o); s[2 * H + j] = vxk_st<T>(f); s[3 * H + j] = vxk_st<T>(c);
        s[4 * H + j] = vxk_st<T>(C);
        a.y[n * a.ldy + j] = vxk_st<T>(o * tanhf(C));
    }
}

/* linear_before_reset = 1: slot 3 holds R_h h (the product), zero without h. */
template <typename T> static __global__ void gru_cell_kernel(cell_args<T> a) {
    int64_t H = a.H, G = 3 * H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        T *s = a.s + n * a.lds;
        float z = sigm(vxk_ld(s[j]) + ld_or0(a.bias, j) + ld_or0(a.bias, G + j));
        float r = sigm(vxk_ld(s[H + j]) + ld_or0(a.bias, H + j) + ld_or0(a.bias, G + H + j));
        float hn = (a.h ? vxk_ld(s[3 * H + j]) : 0.f) + ld_or0(a.bias, G + 2 * H + j);
        float nn = tanhf(vxk_ld(s[2 * H + j]) + ld_or0(a.bias, 2 * H + j) + r * hn);
        float hp = ld_or0(a.h, n * a.ldh + j);
        s[j] = vxk_st<T>(z); s[H + j] = vxk_st<T>(r); s[2 * H + j] = vxk_st<T>(nn); s[3 * H + j] = vxk_st<T>(hn);
        a.y[n * a.ldy + j] = vxk_st<T>((1.f - z) * nn + z * hp);
    }
}

/* linear_before_reset = 0, first half: z, r, and r * h_prev into slot 3. */
template <typename T> static __global__ void gru0_gates_kernel(cell_args<T> a) {
    int64_t H = a.H, G = 3 * H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        T *s = a.s + n * a.lds;
        float z = sigm(vxk_ld(s[j]) + ld_or0(a.bias, j) + ld_or0(a.bias, G + j));
        float r = sigm(vxk_ld(s[H + j]) + ld_or0(a.bias, H + j) + ld_or0(a.bias, G + H + j));
        s[j] = vxk_st<T>(z); s[H + j] = vxk_st<T>(r);
        s[3 * H + j] = vxk_st<T>(r * ld_or0(a.h, n * a.ldh + j));
    }
}

/* Second half: n from slot 2 (W_h x + R_h (r * h_prev)), then h_t. */
template <typename T> static __global__ void gru0_state_kernel(cell_args<T> a) {
    int64_t H = a.H, G = 3 * H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        T *s = a.s + n * a.lds;
        float z = vxk_ld(s[j]);
        float nn = tanhf(vxk_ld(s[2 * H + j]) + ld_or0(a.bias, 2 * H + j) + ld_or0(a.bias, G + 2 * H + j));
        s[2 * H + j] = vxk_st<T>(nn);
        float hp = ld_or0(a.h, n * a.ldh + j);
        a.y[n * a.ldy + j] = vxk_st<T>((1.f - z) * nn + z * hp);
    }
}

template <typename T> static __global__ void rnn_cell_kernel(cell_args<T> a, bool relu) {
    int64_t H = a.H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        float v = vxk_ld(a.s[n * a.lds + j]) + ld_or0(a.bias, j) + ld_or0(a.bias, H + j);
        a.y[n * a.ldy + j] = vxk_st<T>(relu ? fmaxf(v, 0.f) : tanhf(v));
    }
}

/* dst[N, H] = src (or zeros when src is NULL), both with leading dims, from
 * storage TS to TD. */
template <typename TD, typename TS>
static __global__ void copy_mat_kernel(TD *dst, int64_t ldd, const TS *src, int64_t lds, int64_t N, int64_t H) {
    VXK_LOOP(e, N * H) {
        int64_t n = e / H, j = e % H;
        dst[n * ldd + j] = vxk_st<TD>(ld_or0(src, n * lds + j));
    }
}

template <typename T> struct grad_args {
    int64_t N, H;
    const T *s; int64_t lds;       /* the step's reserve rows */
    const T *h; int64_t ldh;       /* h_prev, or NULL */
    const T *c; int64_t ldc;       /* c_prev, or NULL */
    const T *y; int64_t ldy;       /* h_t (RNN) */
    const T *dy; int64_t lddy;     /* dY[t, d], or NULL */
    float *dh, *dc;                /* carried, [N, H] contiguous */
    T *dg; int64_t ldg;            /* the step's dG rows */
};

/* dC = dc + dh o (1 - tanh(C)^2); the gates' pre-activation gradients. */
template <typename T> static __global__ void lstm_grad_kernel(grad_args<T> a) {
    int64_t H = a.H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        const T *s = a.s + n * a.lds;
        float i = vxk_ld(s[j]), o = vxk_ld(s[H + j]), f = vxk_ld(s[2 * H + j]), c = vxk_ld(s[3 * H + j]);
        float tc = tanhf(vxk_ld(s[4 * H + j]));
        float cp = ld_or0(a.c, n * a.ldc + j);
        float dh = a.dh[e] + ld_or0(a.dy, n * a.lddy + j);
        float dC = a.dc[e] + dh * o * (1.f - tc * tc);
        T *g = a.dg + n * a.ldg;
        g[j] = vxk_st<T>(dC * c * i * (1.f - i));
        g[H + j] = vxk_st<T>(dh * tc * o * (1.f - o));
        g[2 * H + j] = vxk_st<T>(dC * cp * f * (1.f - f));
        g[3 * H + j] = vxk_st<T>(dC * i * (1.f - c * c));
        a.dc[e] = dC * f;
    }
}

/* linear_before_reset = 1. Leaves dh = dh_t o z (the direct path). */
template <typename T> static __global__ void gru_grad_kernel(grad_args<T> a) {
    int64_t H = a.H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        const T *s = a.s + n * a.lds;
        float z = vxk_ld(s[j]), r = vxk_ld(s[H + j]), nn = vxk_ld(s[2 * H + j]), hn = vxk_ld(s[3 * H + j]);
        float hp = ld_or0(a.h, n * a.ldh + j);
        float dh = a.dh[e] + ld_or0(a.dy, n * a.lddy + j);
        float dan = dh * (1.f - z) * (1.f - nn * nn);
        T *g = a.dg + n * a.ldg;
        g[j] = vxk_st<T>(dh * (hp - nn) * z * (1.f - z));
        g[H + j] = vxk_st<T>(dan * hn * r * (1.f - r));
        g[2 * H + j] = vxk_st<T>(dan);
        g[3 * H + j] = vxk_st<T>(dan * r);
        a.dh[e] = dh * z;
    }
}

/* linear_before_reset = 0, first half: dz, dn; dh = dh_t o z. */
template <typename T> static __global__ void gru0_grad_kernel(grad_args<T> a) {
    int64_t H = a.H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        const T *s = a.s + n * a.lds;
        float z = vxk_ld(s[j]), nn = vxk_ld(s[2 * H + j]);
        float hp = ld_or0(a.h, n * a.ldh + j);
        float dh = a.dh[e] + ld_or0(a.dy, n * a.lddy + j);
        T *g = a.dg + n * a.ldg;
        g[j] = vxk_st<T>(dh * (hp - nn) * z * (1.f - z));
        g[2 * H + j] = vxk_st<T>(dh * (1.f - z) * (1.f - nn * nn));
        a.dh[e] = dh * z;
    }
}

/* Second half, once slot 3 holds d(r o h_prev) = dn R_h: dr, and dh gets
 * d(r o h_prev) o r. */
template <typename T> static __global__ void gru0_reset_grad_kernel(grad_args<T> a) {
    int64_t H = a.H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        float r = vxk_ld(a.s[n * a.lds + H + j]);
        float hp = ld_or0(a.h, n * a.ldh + j);
        T *g = a.dg + n * a.ldg;
        float drh = vxk_ld(g[3 * H + j]);
        g[H + j] = vxk_st<T>(drh * hp * r * (1.f - r));
        a.dh[e] += drh * r;
    }
}

template <typename T> static __global__ void rnn_grad_kernel(grad_args<T> a, bool relu) {
    int64_t H = a.H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        float h = vxk_ld(a.y[n * a.ldy + j]);
        float dh = a.dh[e] + ld_or0(a.dy, n * a.lddy + j);
        a.dg[n * a.ldg + j] = vxk_st<T>(dh * (relu ? (h > 0.f ? 1.f : 0.f) : 1.f - h * h));
    }
}

/* dst[c] += sum over rows of src[r, c] (dst zeroed; chunks of rows summed in
 * float32, atomics). */
template <typename T>
static __global__ void column_sum_kernel(T *dst, const T *src, int64_t ld, int64_t rows, int64_t cols, int64_t per) {
    int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    int64_t r0 = (int64_t)blockIdx.y * per, r1 = r0 + per < rows ? r0 + per : rows;
    float acc = 0.f;
    for (int64_t r = r0; r < r1; r++) acc += vxk_ld(src[r * ld + c]);
    vxk_atomic_add_t(dst + c, acc);
}

template <typename T>
static void column_sum(vx_ctx *ctx, T *dst, const T *src, int64_t ld, int64_t rows, int64_t cols) {
    if (rows <= 0 || cols <= 0) return;
    int64_t chunks = rows < 256 ? rows : 256, per = (rows + chunks - 1) / chunks;
    chunks = (rows + per - 1) / per;
    dim3 grid((unsigned)((cols + VXK_THREADS - 1) / VXK_THREADS), (unsigned)chunks);
    column_sum_kernel<T><<<grid, VXK_THREADS, 0, vxk_stream(ctx)>>>(dst, src, ld, rows, cols, per);
}

/* Row-major C = alpha op(A) op(B) + beta C into the float32 carried dh, A and
 * B in the storage type: cuBLAS's float32 product for float, cublasGemmEx
 * with half inputs and a float32 output otherwise. */
static cublasStatus_t gemm_to_f32(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                                  int64_t ldc) {
    return vxk_gemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
template <typename T>
static cublasStatus_t gemm_to_f32(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                                  const T *A, int64_t lda, const T *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    cudaDataType_t dt = vxk_cuda_type<T>();
    return cublasGemmEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k,
                        &alpha, B, dt, (int)ldb, A, dt, (int)lda, &beta, C, CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT);
}

/* ---- forward ------------------------------------------------------------------ */

/* A tensor the run keeps for backward (training) or only for the call, in
 * the storage dtype dt. */
template <typename T>
static T *scratch(vx_ctx *ctx, vx_run *run, int slot, vx_dtype dt, int rank, const int64_t *dims, vx_status *st) {
    if (run->training) {
        if ((*st = vxk_new_saved(ctx, run, slot, dt, rank, dims))) return NULL;
        return (T *)run->saved[slot]->data;
    }
    int64_t n = vxk_prod(dims, 0, rank);
    T *p = (T *)vx_workspace(ctx, (size_t)(n > 0 ? n : 1) * sizeof(T));
    if (!p) *st = vxk_oom(ctx, "recurrent reserve");
    return p;
}

template <typename T>
static vx_status rnn_direction_forward(vx_ctx *ctx, const vx_run *run, const rnn_geom *g, int d, T *reserve, T *y) {
    cublasHandle_t h = vxk_blas(ctx);
    cudaStream_t stream = vxk_stream(ctx);
    int64_t H = g->H, GH = g->G * H, KH = g->K * H, TN = g->T * g->N;
    const T *W = (const T *)run->in[1]->data + d * GH * g->I;
    const T *R = (const T *)run->in[2]->data + d * GH * H;
    const T *B = vxk_has_in(run, 3) ? (const T *)run->in[3]->data + d * 2 * GH : NULL;
    T *S = reserve + d * TN * KH;
    if (vxk_blas_check(ctx, vxk_gemm(h, false, true, TN, GH, g->I, 1.f, (const T *)run->in[0]->data, g->I, W, g->I,
                                     0.f, S, KH), "recurrent input product"))
        return VX_ECUDA;
    mat<T> h0 = state_at<T>(g, vxk_has_in(run, 5) ? run->in[5] : NULL, d);
    mat<T> c0 = state_at<T>(g, vxk_has_in(run, 6) ? run->in[6] : NULL, d);
    unsigned blocks = vxk_blocks(g->N * H);
    for (int64_t s = 0; s < g->T; s++) {
        int64_t t = time_of(g, d, s), tp = s ? time_of(g, d, s - 1) : -1;
        mat<T> st = rows_at(g, S, KH, t), hp = s ? y_at(g, y, tp, d) : h0, yt = y_at(g, y, t, d);
        mat<T> cp = s ? rows_at(g, S, KH, tp) : c0;
        if (s && cp.p) cp.p += 4 * H;
        cell_args<T> a = {g->N, H, st.p, st.ld, B, hp.p, hp.ld, cp.p, cp.ld, yt.p, yt.ld};
        cublasStatus_t bs = CUBLAS_STATUS_SUCCESS;
        if (hp.p && g->kind != CELL_GRU)
            bs = vxk_gemm(h, false, true, g->N, GH, H, 1.f, hp.p, hp.ld, R, H, 1.f, st.p, st.ld);
        else if (hp.p) {
            bs = vxk_gemm(h, false, true, g->N, 2 * H, H, 1.f, hp.p, hp.ld, R, H, 1.f, st.p, st.ld);
            if (bs == CUBLAS_STATUS_SUCCESS && g->lbr)
                bs = vxk_gemm(h, false, true, g->N, H, H, 1.f, hp.p, hp.ld, R + 2 * H * H, H, 0.f, st.p + 3 * H, st.ld);
        }
        if (vxk_blas_check(ctx, bs, "recurrent product")) return VX_ECUDA;
        switch (g->kind) {
        case CELL_LSTM: lstm_cell_kernel<T><<<blocks, VXK_THREADS, 0, stream>>>(a); break;
        case CELL_RNN: rnn_cell_kernel<T><<<blocks, VXK_THREADS, 0, stream>>>(a, g->relu); break;
        case CELL_GRU:
            if (g->lbr) { gru_cell_kernel<T><<<blocks, VXK_THREADS, 0, stream>>>(a); break; }
            gru0_gates_kernel<T><<<blocks, VXK_THREADS, 0, stream>>>(a);
            if (hp.p && vxk_blas_check(ctx, vxk_gemm(h, false, true, g->N, H, H, 1.f, st.p + 3 * H, st.ld, R + 2 * H * H,
                                                     H, 1.f, st.p + 2 * H, st.ld), "recurrent product"))
                return VX_ECUDA;
            gru0_state_kernel<T><<<blocks, VXK_THREADS, 0, stream>>>(a);
            break;
        }
    }
    return vxk_check(ctx, "recurrent step");
}

/* Y_h and Y_c: copies of the last step's h and C (the initial states, or
 * zeros, for an empty sequence). */
template <typename T>
static vx_status rnn_final_states(vx_ctx *ctx, vx_run *run, const rnn_geom *g, T *reserve, T *y) {
    int64_t sd[3] = {g->layout1 ? g->N : g->D, g->layout1 ? g->D : g->N, g->H};
    int64_t TN = g->T * g->N, KH = g->K * g->H;
    vx_status st;
    for (int k = 1; k <= 2; k++) {
        if (!vxk_has_out(run, k)) continue;
        if (k == 2 && g->kind != CELL_LSTM) return vx_fail(ctx, VX_ESHAPE, "%s has no Y_c", run->node->op_type);
        if ((st = vxk_new_out(ctx, run, k, run->in[0]->dtype, 3, sd))) return st;
        for (int d = 0; d < g->D && g->N * g->H > 0; d++) {
            int64_t t = time_of(g, d, g->T - 1);
            mat<T> dst = state_at<T>(g, run->out[k], d), src;
            if (g->T == 0) src = state_at<T>(g, vxk_has_in(run, 4 + k) ? run->in[4 + k] : NULL, d);
            else if (k == 1) src = y_at(g, y, t, d);
            else src = rows_at(g, reserve + d * TN * KH, KH, t), src.p += 4 * g->H;
            copy_mat_kernel<T, T><<<vxk_blocks(g->N * g->H), VXK_THREADS, 0, vxk_stream(ctx)>>>(dst.p, dst.ld, src.p,
                                                                                               src.ld, g->N, g->H);
        }
    }
    return vxk_check(ctx, "recurrent final states");
}

template <typename T> static vx_status rnn_forward_t(vx_ctx *ctx, vx_run *run, const rnn_geom *g) {
    vx_dtype dt = run->in[0]->dtype;
    int64_t ydims[4] = {g->T, g->D, g->N, g->H}, ydims1[4] = {g->N, g->T, g->D, g->H};
    vx_status st;
    T *y;
    if (vxk_has_out(run, 0)) {
        if ((st = vxk_new_out(ctx, run, 0, dt, 4, g->layout1 ? ydims1 : ydims))) return st;
        y = (T *)run->out[0]->data;
    } else if (!(y = scratch<T>(ctx, run, 1, dt, 4, g->layout1 ? ydims1 : ydims, &st))) {
        return st;
    }
    int64_t rdims[3] = {g->D, g->T * g->N, g->K * g->H};
    T *reserve = scratch<T>(ctx, run, 0, dt, 3, rdims, &st);
    if (!reserve) return st;
    if (g->T * g->N > 0)
        for (int d = 0; d < g->D; d++)
            if ((st = rnn_direction_forward(ctx, run, g, d, reserve, y))) return st;
    if ((st = rnn_final_states(ctx, run, g, reserve, y))) return st;
    if (!run->training) {
        vx_free(ctx, reserve);
        if (!vxk_has_out(run, 0)) vx_free(ctx, y);
    }
    return VX_OK;
}

static vx_status rnn_forward(vx_ctx *ctx, vx_run *run) {
    rnn_geom g;
    vx_status st = rnn_geometry(ctx, run, &g);
    if (st) return st;
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "recurrent forward", rnn_forward_t<T>(ctx, run, &g));
}

/* ---- backward ------------------------------------------------------------------ */

template <typename T> struct bwd_bufs {
    T *dg;                  /* in the storage dtype: the products' operand */
    float *dh, *dc;         /* carried in float32 */
    const vx_tensor *dy[3]; /* the gradients of Y, Y_h and Y_c, or NULL */
};

/* dh and dc of the last step: Y_h's and Y_c's gradients. */
template <typename T> static void seed_carry(vx_ctx *ctx, const rnn_geom *g, int d, const bwd_bufs<T> *b) {
    cudaStream_t stream = vxk_stream(ctx);
    unsigned blocks = vxk_blocks(g->N * g->H);
    mat<T> dyh = grad_at<T>(g, b->dy[1], 1, 0, d), dyc = grad_at<T>(g, b->dy[2], 2, 0, d);
    copy_mat_kernel<float, T><<<blocks, VXK_THREADS, 0, stream>>>(b->dh, g->H, dyh.p, dyh.ld, g->N, g->H);
    if (b->dc) copy_mat_kernel<float, T><<<blocks, VXK_THREADS, 0, stream>>>(b->dc, g->H, dyc.p, dyc.ld, g->N, g->H);
}

/* One step back: dG of step t and the carried dh, dc of the step before. */
template <typename T>
static cublasStatus_t step_back(vx_ctx *ctx, const vx_run *run, const rnn_geom *g, int d, int64_t s,
                                const bwd_bufs<T> *b, const T *reserve, const T *y, const T *R) {
    cublasHandle_t h = vxk_blas(ctx);
    cudaStream_t stream = vxk_stream(ctx);
    unsigned blocks = vxk_blocks(g->N * g->H);
    int64_t H = g->H, GH = g->G * H, KH = g->K * H, TN = g->T * g->N;
    T *S = (T *)reserve + d * TN * KH;
    int64_t t = time_of(g, d, s), tp = s ? time_of(g, d, s - 1) : -1;
    mat<T> st = rows_at(g, S, KH, t), dg = rows_at(g, b->dg, g->KG, t), yt = y_at(g, (T *)y, t, d);
    mat<T> hp = s ? y_at(g, (T *)y, tp, d) : state_at<T>(g, vxk_has_in(run, 5) ? run->in[5] : NULL, d);
    mat<T> cp = s ? rows_at(g, S, KH, tp) : state_at<T>(g, vxk_has_in(run, 6) ? run->in[6] : NULL, d);
    if (s && cp.p) cp.p += 4 * H;
    mat<T> dy = grad_at<T>(g, b->dy[0], 0, t, d);
    grad_args<T> a = {g->N, H, st.p, st.ld, hp.p, hp.ld, cp.p, cp.ld, yt.p, yt.ld, dy.p, dy.ld, b->dh, b->dc, dg.p, dg.ld};
    switch (g->kind) {
    case CELL_LSTM:
        lstm_grad_kernel<T><<<blocks, VXK_THREADS, 0, stream>>>(a);
        return gemm_to_f32(h, false, false, g->N, H, GH, 1.f, (const T *)dg.p, dg.ld, R, H, 0.f, b->dh, H);
    case CELL_RNN:
        rnn_grad_kernel<T><<<blocks, VXK_THREADS, 0, stream>>>(a, g->relu);
        return gemm_to_f32(h, false, false, g->N, H, GH, 1.f, (const T *)dg.p, dg.ld, R, H, 0.f, b->dh, H);
    case CELL_GRU:
        break;
    }
    cublasStatus_t bs;
    if (g->lbr) {
        gru_grad_kernel<T><<<blocks, VXK_THREADS, 0, stream>>>(a);
        bs = gemm_to_f32(h, false, false, g->N, H, H, 1.f, (const T *)dg.p + 3 * H, dg.ld, R + 2 * H * H, H, 1.f, b->dh, H);
    } else {
        gru0_grad_kernel<T><<<blocks, VXK_THREADS, 0, stream>>>(a);
        bs = vxk_gemm(h, false, false, g->N, H, H, 1.f, (const T *)dg.p + 2 * H, dg.ld, R + 2 * H * H, H, 0.f,
                      dg.p + 3 * H, dg.ld);
        gru0_reset_grad_kernel<T><<<blocks, VXK_THREADS, 0, stream>>>(a);
    }
    if (bs != CUBLAS_STATUS_SUCCESS) return bs;
    return gemm_to_f32(h, false, false, g->N, H, 2 * H, 1.f, (const T *)dg.p, dg.ld, R, H, 1.f, b->dh, H);
}

/* dR += dG^T h_prev over the direction's steps (h_prev zero: nothing). */
template <typename T>
static cublasStatus_t recurrent_weight_grad(vx_ctx *ctx, const vx_run *run, const rnn_geom *g, int d,
                                            const bwd_bufs<T> *b, const T *reserve, const T *y, T *dR) {
    cublasHandle_t h = vxk_blas(ctx);
    int64_t H = g->H, GH = g->G * H, KH = g->K * H, TN = g->T * g->N;
    for (int64_t s = 0; s < g->T; s++) {
        int64_t t = time_of(g, d, s);
        mat<T> hp = s ? y_at(g, (T *)y, time_of(g, d, s - 1), d)
                      : state_at<T>(g, vxk_has_in(run, 5) ? run->in[5] : NULL, d);
        if (!hp.p) continue;
        mat<T> dg = rows_at(g, b->dg, g->KG, t);
        cublasStatus_t bs;
        if (g->kind != CELL_GRU) {
            bs = vxk_gemm(h, true, false, GH, H, g->N, 1.f, dg.p, dg.ld, hp.p, hp.ld, 1.f, dR, H);
        } else {
            bs = vxk_gemm(h, true, false, 2 * H, H, g->N, 1.f, dg.p, dg.ld, hp.p, hp.ld, 1.f, dR, H);
            /* the candidate's rows: dhn against h_prev, or dn against r o h_prev */
            mat<T> rh = rows_at(g, (T *)reserve + d * TN * KH, KH, t);
            const T *gate = g->lbr ? dg.p + 3 * H : dg.p + 2 * H, *in = g->lbr ? hp.p : rh.p + 3 * H;
            int64_t ldin = g->lbr ? hp.ld : rh.ld;
            if (bs == CUBLAS_STATUS_SUCCESS)
                bs = vxk_gemm(h, true, false, H, H, g->N, 1.f, gate, dg.ld, in, ldin, 1.f, dR + 2 * H * H, H);
        }
        if (bs != CUBLAS_STATUS_SUCCESS) return bs;
    }
    return CUBLAS_STATUS_SUCCESS;
}

template <typename T>
static vx_status rnn_direction_backward(vx_ctx *ctx, vx_run *run, const rnn_geom *g, int d, const bwd_bufs<T> *b,
                                        const T *reserve, const T *y) {
    cublasHandle_t h = vxk_blas(ctx);
    int64_t H = g->H, GH = g->G * H, TN = g->T * g->N;
    const T *W = (const T *)run->in[1]->data, *R = (const T *)run->in[2]->data + d * GH * H;
    seed_carry(ctx, g, d, b);
    for (int64_t s = g->T - 1; s >= 0; s--)
        if (vxk_blas_check(ctx, step_back(ctx, run, g, d, s, b, reserve, y, R), "recurrent backward product"))
            return VX_ECUDA;
    unsigned blocks = vxk_blocks(g->N * H);
    for (int k = 5; k <= 6; k++) {
        if (!run->need_grad[k] || !run->grad_in[k]) continue;
        mat<T> dst = state_at<T>(g, run->grad_in[k], d);
        const float *src = k == 5 ? b->dh : b->dc;
        copy_mat_kernel<T, float><<<blocks, VXK_THREADS, 0, vxk_stream(ctx)>>>(dst.p, dst.ld, src, H, g->N, H);
    }
    if (run->need_grad[2] &&
        vxk_blas_check(ctx, recurrent_weight_grad(ctx, run, g, d, b, reserve, y, (T *)run->grad_in[2]->data + d * GH * H),
                       "recurrent weight gradient"))
        return VX_ECUDA;
    if (run->need_grad[1] &&
        vxk_blas_check(ctx, vxk_gemm(h, true, false, GH, g->I, TN, 1.f, (const T *)b->dg, g->KG,
                                     (const T *)run->in[0]->data, g->I, 0.f, (T *)run->grad_in[1]->data + d * GH * g->I,
                                     g->I),
                       "recurrent input weight gradient"))
        return VX_ECUDA;
    if (run->need_grad[0] &&
        vxk_blas_check(ctx, vxk_gemm(h, false, false, TN, g->I, GH, 1.f, (const T *)b->dg, g->KG, W + d * GH * g->I,
                                     g->I, d ? 1.f : 0.f, (T *)run->grad_in[0]->data, g->I),
                       "recurrent input gradient"))
        return VX_ECUDA;
    if (run->need_grad[3] && vxk_has_in(run, 3)) {
        T *dB = (T *)run->grad_in[3]->data + d * 2 * GH;
        column_sum(ctx, dB, (const T *)b->dg, g->KG, TN, GH); /* Wb */
        if (g->kind == CELL_GRU && g->lbr) {
            column_sum(ctx, dB + GH, (const T *)b->dg, g->KG, TN, 2 * H);
            column_sum(ctx, dB + GH + 2 * H, (const T *)b->dg + 3 * H, g->KG, TN, H);
        } else {
            column_sum(ctx, dB + GH, (const T *)b->dg, g->KG, TN, GH); /* Rb: the same sums */
        }
    }
    return vxk_check(ctx, "recurrent backward");
}

template <typename T> static vx_status rnn_backward_t(vx_ctx *ctx, vx_run *run, const rnn_geom *g) {
    vx_status st = VX_OK, st_fail = VX_OK;
    const T *reserve = (const T *)run->saved[0]->data;
    const T *y = vxk_has_out(run, 0) ? (const T *)run->out[0]->data : (const T *)run->saved[1]->data;
    for (int k = 0; k < run->n_in && k < 7; k++)
        if (run->need_grad[k] && k != 4 && vxk_has_in(run, k) && (st = vxk_grad(ctx, run, k))) return st;
    for (int k = 2; k <= 3; k++)
        if (run->grad_in[k] && (st = vxk_zero(ctx, run->grad_in[k]->data, (size_t)run->grad_in[k]->numel * sizeof(T))))
            return st;
    for (int k = 0; k <= 1 && g->T * g->N == 0; k++)
        if (run->grad_in[k] && (st = vxk_zero(ctx, run->grad_in[k]->data, (size_t)run->grad_in[k]->numel * sizeof(T))))
            return st;
    /* a gradient whose hidden unit is not the unit stride: a contiguous copy */
    bwd_bufs<T> b = {NULL, NULL, NULL, {NULL, NULL, NULL}};
    vx_tensor *copies[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3 && k < run->n_out; k++) {
        vx_tensor *dy = run->grad_out[k];
        int64_t strides[VX_MAX_RANK];
        b.dy[k] = dy;
        if (!dy || !dy->strided) continue;
        strides_of(dy, strides);
        if (strides[dy->rank - 1] == 1) continue;
        if (!(copies[k] = vx_contiguous(ctx, dy))) st_fail = vxk_oom(ctx, "recurrent output gradient");
        b.dy[k] = copies[k];
    }
    int64_t TN = g->T * g->N, NH = g->N * g->H;
    if (st_fail) st = st_fail;
    else b.dg = (T *)vx_workspace(ctx, (size_t)(TN * g->KG > 0 ? TN * g->KG : 1) * sizeof(T));
    b.dh = b.dg ? (float *)vx_workspace(ctx, (size_t)(NH > 0 ? NH : 1) * sizeof(float)) : NULL;
    b.dc = b.dh && g->kind == CELL_LSTM ? (float *)vx_workspace(ctx, (size_t)(NH > 0 ? NH : 1) * sizeof(float)) : NULL;
    if (!st && (!b.dh || (g->kind == CELL_LSTM && !b.dc))) st = vxk_oom(ctx, "recurrent backward");
    for (int d = 0; !st && d < g->D && NH > 0; d++) st = rnn_direction_backward(ctx, run, g, d, &b, reserve, y);
    vx_free(ctx, b.dc);
    vx_free(ctx, b.dh);
    vx_free(ctx, b.dg);
    for (int k = 0; k < 3; k++) vx_tensor_release(ctx, copies[k]);
    return st;
}

static vx_status rnn_backward(vx_ctx *ctx, vx_run *run) {
    rnn_geom g;
    vx_status st = rnn_geometry(ctx, run, &g);
    if (st) return st;
    bool any = false;
    for (int k = 0; k < run->n_in && k < 7; k++) any |= run->need_grad[k] && k != 4;
    if (!any || !run->saved[0]) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "recurrent backward", rnn_backward_t<T>(ctx, run, &g));
}

/* X, W, R, B, initial_h, initial_c; Y. sequence_lens (4) and P (7) are refused. */
#define RNN_SAVES_IN (VX_SLOT(0) | VX_SLOT(1) | VX_SLOT(2) | VX_SLOT(3) | VX_SLOT(5) | VX_SLOT(6))
/* The output gradients are read in place (grad_at); strided inputs come as
 * contiguous copies. */
#define RNN_OP(name) {name, rnn_forward, rnn_backward, RNN_SAVES_IN, VX_SLOT(0), false, 0, NULL, VX_STRIDED_GRAD, VX_HALF}

extern "C" {
const vx_op vx_ops_recurrent[] = {RNN_OP("LSTM"), RNN_OP("GRU"), RNN_OP("RNN")};
const size_t vx_ops_recurrent_count = sizeof vx_ops_recurrent / sizeof vx_ops_recurrent[0];
}
