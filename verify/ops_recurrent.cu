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
 * Memory (layers/recurrent.c's verify rules follow it):
 *  - the reserve [D, T * N, K * H] float32, K slots per hidden unit:
 *      LSTM K = 5: i, o, f, c~ (activated, ONNX's gate order) and the cell C;
 *      GRU  K = 4: z, r, n and, linear_before_reset = 1, hn = R_h h + Rb_h,
 *                  or, linear_before_reset = 0, r * h_prev;
 *      RNN  K = 1: the pre-activation (backward reads h_t from Y).
 *    Training: saved[0], kept for backward. Inference: a workspace.
 *  - Y itself when the node omits it (saved[1] in training, else a workspace).
 *  - backward: a workspace of the pre-activation gradients dG [T * N, KG]
 *    (KG = G * H; GRU 4 * H: dz, dr, dn and dhn or d(r * h)), plus the
 *    carried dh [N, H] and, LSTM, dc [N, H].
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

/* A row-major [N, H] matrix inside a larger tensor. */
typedef struct mat {
    float *p;
    int64_t ld;
} mat;

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
        if (!vxk_has_in(run, k) || run->in[k]->dtype != VX_F32)
            return vx_fail(ctx, VX_EUNSUPPORTED, "%s: X, W and R must be float32", op);
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
static mat rows_at(const rnn_geom *g, float *base, int64_t cols, int64_t t) {
    mat m = {base + (g->layout1 ? t : t * g->N) * cols, g->layout1 ? g->T * cols : cols};
    return m;
}

/* Y[t, d] as an [N, H] matrix. */
static mat y_at(const rnn_geom *g, float *y, int64_t t, int d) {
    mat m;
    if (g->layout1) { m.p = y + (t * g->D + d) * g->H; m.ld = g->T * g->D * g->H; }
    else { m.p = y + (t * g->D + d) * g->N * g->H; m.ld = g->H; }
    return m;
}

/* A state tensor ([D, N, H] or [N, D, H]) at direction d, or {NULL}. */
static mat state_at(const rnn_geom *g, const vx_tensor *s, int d) {
    mat m = {NULL, g->H};
    if (!s || !s->data) return m;
    float *p = (float *)s->data;
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
static mat grad_at(const rnn_geom *g, const vx_tensor *dy, int k, int64_t t, int d) {
    mat m = {NULL, 0};
    if (!dy || !dy->data) return m;
    int64_t st[VX_MAX_RANK];
    strides_of(dy, st);
    float *p = (float *)dy->data;
    if (k == 0 && g->layout1) { m.p = p + t * st[1] + d * st[2]; m.ld = st[0]; }
    else if (k == 0) { m.p = p + t * st[0] + d * st[1]; m.ld = st[2]; }
    else if (g->layout1) { m.p = p + d * st[1]; m.ld = st[0]; }
    else { m.p = p + d * st[0]; m.ld = st[1]; }
    return m;
}

/* ---- element-wise kernels --------------------------------------------------- */

typedef struct cell_args {
    int64_t N, H;
    float *s; int64_t lds;        /* the step's reserve rows */
    const float *bias;            /* the direction's [Wb, Rb], or NULL */
    const float *h; int64_t ldh;  /* h_prev, or NULL (zeros) */
    const float *c; int64_t ldc;  /* LSTM c_prev, or NULL */
    float *y; int64_t ldy;        /* h_t */
} cell_args;

static __device__ __forceinline__ float bias_of(const float *b, int64_t k) { return b ? b[k] : 0.f; }

static __global__ void lstm_cell_kernel(cell_args a) {
    int64_t H = a.H, G = 4 * H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        float *s = a.s + n * a.lds;
        float i = sigm(s[j] + bias_of(a.bias, j) + bias_of(a.bias, G + j));
        float o = sigm(s[H + j] + bias_of(a.bias, H + j) + bias_of(a.bias, G + H + j));
        float f = sigm(s[2 * H + j] + bias_of(a.bias, 2 * H + j) + bias_of(a.bias, G + 2 * H + j));
        float c = tanhf(s[3 * H + j] + bias_of(a.bias, 3 * H + j) + bias_of(a.bias, G + 3 * H + j));
        float cp = a.c ? a.c[n * a.ldc + j] : 0.f;
        float C = f * cp + i * c;
        s[j] = i; s[H + j] = o; s[2 * H + j] = f; s[3 * H + j] = c; s[4 * H + j] = C;
        a.y[n * a.ldy + j] = o * tanhf(C);
    }
}

/* linear_before_reset = 1: slot 3 holds R_h h (the product), zero without h. */
static __global__ void gru_cell_kernel(cell_args a) {
    int64_t H = a.H, G = 3 * H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        float *s = a.s + n * a.lds;
        float z = sigm(s[j] + bias_of(a.bias, j) + bias_of(a.bias, G + j));
        float r = sigm(s[H + j] + bias_of(a.bias, H + j) + bias_of(a.bias, G + H + j));
        float hn = (a.h ? s[3 * H + j] : 0.f) + bias_of(a.bias, G + 2 * H + j);
        float nn = tanhf(s[2 * H + j] + bias_of(a.bias, 2 * H + j) + r * hn);
        float hp = a.h ? a.h[n * a.ldh + j] : 0.f;
        s[j] = z; s[H + j] = r; s[2 * H + j] = nn; s[3 * H + j] = hn;
        a.y[n * a.ldy + j] = (1.f - z) * nn + z * hp;
    }
}

/* linear_before_reset = 0, first half: z, r, and r * h_prev into slot 3. */
static __global__ void gru0_gates_kernel(cell_args a) {
    int64_t H = a.H, G = 3 * H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        float *s = a.s + n * a.lds;
        float z = sigm(s[j] + bias_of(a.bias, j) + bias_of(a.bias, G + j));
        float r = sigm(s[H + j] + bias_of(a.bias, H + j) + bias_of(a.bias, G + H + j));
        s[j] = z; s[H + j] = r;
        s[3 * H + j] = r * (a.h ? a.h[n * a.ldh + j] : 0.f);
    }
}

/* Second half: n from slot 2 (W_h x + R_h (r * h_prev)), then h_t. */
static __global__ void gru0_state_kernel(cell_args a) {
    int64_t H = a.H, G = 3 * H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        float *s = a.s + n * a.lds;
        float z = s[j];
        float nn = tanhf(s[2 * H + j] + bias_of(a.bias, 2 * H + j) + bias_of(a.bias, G + 2 * H + j));
        s[2 * H + j] = nn;
        float hp = a.h ? a.h[n * a.ldh + j] : 0.f;
        a.y[n * a.ldy + j] = (1.f - z) * nn + z * hp;
    }
}

static __global__ void rnn_cell_kernel(cell_args a, bool relu) {
    int64_t H = a.H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        float v = a.s[n * a.lds + j] + bias_of(a.bias, j) + bias_of(a.bias, H + j);
        a.y[n * a.ldy + j] = relu ? fmaxf(v, 0.f) : tanhf(v);
    }
}

/* dst[N, H] = src (or zeros when src is NULL), both with leading dims. */
static __global__ void copy_mat_kernel(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t N, int64_t H) {
    VXK_LOOP(e, N * H) {
        int64_t n = e / H, j = e % H;
        dst[n * ldd + j] = src ? src[n * lds + j] : 0.f;
    }
}

typedef struct grad_args {
    int64_t N, H;
    const float *s; int64_t lds;   /* the step's reserve rows */
    const float *h; int64_t ldh;   /* h_prev, or NULL */
    const float *c; int64_t ldc;   /* c_prev, or NULL */
    const float *y; int64_t ldy;   /* h_t (RNN) */
    const float *dy; int64_t lddy; /* dY[t, d], or NULL */
    float *dh, *dc;                /* carried, [N, H] contiguous */
    float *dg; int64_t ldg;        /* the step's dG rows */
} grad_args;

/* dC = dc + dh o (1 - tanh(C)^2); the gates' pre-activation gradients. */
static __global__ void lstm_grad_kernel(grad_args a) {
    int64_t H = a.H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        const float *s = a.s + n * a.lds;
        float i = s[j], o = s[H + j], f = s[2 * H + j], c = s[3 * H + j], tc = tanhf(s[4 * H + j]);
        float cp = a.c ? a.c[n * a.ldc + j] : 0.f;
        float dh = a.dh[e] + (a.dy ? a.dy[n * a.lddy + j] : 0.f);
        float dC = a.dc[e] + dh * o * (1.f - tc * tc);
        float *g = a.dg + n * a.ldg;
        g[j] = dC * c * i * (1.f - i);
        g[H + j] = dh * tc * o * (1.f - o);
        g[2 * H + j] = dC * cp * f * (1.f - f);
        g[3 * H + j] = dC * i * (1.f - c * c);
        a.dc[e] = dC * f;
    }
}

/* linear_before_reset = 1. Leaves dh = dh_t o z (the direct path). */
static __global__ void gru_grad_kernel(grad_args a) {
    int64_t H = a.H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        const float *s = a.s + n * a.lds;
        float z = s[j], r = s[H + j], nn = s[2 * H + j], hn = s[3 * H + j];
        float hp = a.h ? a.h[n * a.ldh + j] : 0.f;
        float dh = a.dh[e] + (a.dy ? a.dy[n * a.lddy + j] : 0.f);
        float dan = dh * (1.f - z) * (1.f - nn * nn);
        float *g = a.dg + n * a.ldg;
        g[j] = dh * (hp - nn) * z * (1.f - z);
        g[H + j] = dan * hn * r * (1.f - r);
        g[2 * H + j] = dan;
        g[3 * H + j] = dan * r;
        a.dh[e] = dh * z;
    }
}

/* linear_before_reset = 0, first half: dz, dn; dh = dh_t o z. */
static __global__ void gru0_grad_kernel(grad_args a) {
    int64_t H = a.H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        const float *s = a.s + n * a.lds;
        float z = s[j], nn = s[2 * H + j];
        float hp = a.h ? a.h[n * a.ldh + j] : 0.f;
        float dh = a.dh[e] + (a.dy ? a.dy[n * a.lddy + j] : 0.f);
        float *g = a.dg + n * a.ldg;
        g[j] = dh * (hp - nn) * z * (1.f - z);
        g[2 * H + j] = dh * (1.f - z) * (1.f - nn * nn);
        a.dh[e] = dh * z;
    }
}

/* Second half, once slot 3 holds d(r o h_prev) = dn R_h: dr, and dh gets
 * d(r o h_prev) o r. */
static __global__ void gru0_reset_grad_kernel(grad_args a) {
    int64_t H = a.H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        float r = a.s[n * a.lds + H + j];
        float hp = a.h ? a.h[n * a.ldh + j] : 0.f;
        float *g = a.dg + n * a.ldg;
        float drh = g[3 * H + j];
        g[H + j] = drh * hp * r * (1.f - r);
        a.dh[e] += drh * r;
    }
}

static __global__ void rnn_grad_kernel(grad_args a, bool relu) {
    int64_t H = a.H;
    VXK_LOOP(e, a.N * H) {
        int64_t n = e / H, j = e % H;
        float h = a.y[n * a.ldy + j];
        float dh = a.dh[e] + (a.dy ? a.dy[n * a.lddy + j] : 0.f);
        a.dg[n * a.ldg + j] = dh * (relu ? (h > 0.f ? 1.f : 0.f) : 1.f - h * h);
    }
}

/* dst[c] += sum over rows of src[r, c] (dst zeroed; chunks of rows, atomics). */
static __global__ void column_sum_kernel(float *dst, const float *src, int64_t ld, int64_t rows, int64_t cols,
                                         int64_t per) {
    int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    int64_t r0 = (int64_t)blockIdx.y * per, r1 = r0 + per < rows ? r0 + per : rows;
    float acc = 0.f;
    for (int64_t r = r0; r < r1; r++) acc += src[r * ld + c];
    atomicAdd(dst + c, acc);
}

static void column_sum(vx_ctx *ctx, float *dst, const float *src, int64_t ld, int64_t rows, int64_t cols) {
    if (rows <= 0 || cols <= 0) return;
    int64_t chunks = rows < 256 ? rows : 256, per = (rows + chunks - 1) / chunks;
    chunks = (rows + per - 1) / per;
    dim3 grid((unsigned)((cols + VXK_THREADS - 1) / VXK_THREADS), (unsigned)chunks);
    column_sum_kernel<<<grid, VXK_THREADS, 0, vxk_stream(ctx)>>>(dst, src, ld, rows, cols, per);
}

/* ---- forward ------------------------------------------------------------------ */

/* A tensor the run keeps for backward (training) or only for the call. */
static float *scratch(vx_ctx *ctx, vx_run *run, int slot, int rank, const int64_t *dims, vx_status *st) {
    if (run->training) {
        if ((*st = vxk_new_saved(ctx, run, slot, VX_F32, rank, dims))) return NULL;
        return (float *)run->saved[slot]->data;
    }
    int64_t n = vxk_prod(dims, 0, rank);
    float *p = (float *)vx_workspace(ctx, (size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!p) *st = vxk_oom(ctx, "recurrent reserve");
    return p;
}

static vx_status rnn_direction_forward(vx_ctx *ctx, const vx_run *run, const rnn_geom *g, int d, float *reserve,
                                       float *y) {
    cublasHandle_t h = vxk_blas(ctx);
    cudaStream_t stream = vxk_stream(ctx);
    int64_t H = g->H, GH = g->G * H, KH = g->K * H, TN = g->T * g->N;
    const float *W = (const float *)run->in[1]->data + d * GH * g->I;
    const float *R = (const float *)run->in[2]->data + d * GH * H;
    const float *B = vxk_has_in(run, 3) ? (const float *)run->in[3]->data + d * 2 * GH : NULL;
    float *S = reserve + d * TN * KH;
    if (vxk_blas_check(ctx, vxk_gemm(h, false, true, TN, GH, g->I, 1.f, (const float *)run->in[0]->data, g->I, W, g->I,
                                     0.f, S, KH), "recurrent input product"))
        return VX_ECUDA;
    mat h0 = state_at(g, vxk_has_in(run, 5) ? run->in[5] : NULL, d);
    mat c0 = state_at(g, vxk_has_in(run, 6) ? run->in[6] : NULL, d);
    unsigned blocks = vxk_blocks(g->N * H);
    for (int64_t s = 0; s < g->T; s++) {
        int64_t t = time_of(g, d, s), tp = s ? time_of(g, d, s - 1) : -1;
        mat st = rows_at(g, S, KH, t), hp = s ? y_at(g, y, tp, d) : h0, yt = y_at(g, y, t, d);
        mat cp = s ? rows_at(g, S, KH, tp) : c0;
        if (s && cp.p) cp.p += 4 * H;
        cell_args a = {g->N, H, st.p, st.ld, B, hp.p, hp.ld, cp.p, cp.ld, yt.p, yt.ld};
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
        case CELL_LSTM: lstm_cell_kernel<<<blocks, VXK_THREADS, 0, stream>>>(a); break;
        case CELL_RNN: rnn_cell_kernel<<<blocks, VXK_THREADS, 0, stream>>>(a, g->relu); break;
        case CELL_GRU:
            if (g->lbr) { gru_cell_kernel<<<blocks, VXK_THREADS, 0, stream>>>(a); break; }
            gru0_gates_kernel<<<blocks, VXK_THREADS, 0, stream>>>(a);
            if (hp.p && vxk_blas_check(ctx, vxk_gemm(h, false, true, g->N, H, H, 1.f, st.p + 3 * H, st.ld, R + 2 * H * H,
                                                     H, 1.f, st.p + 2 * H, st.ld), "recurrent product"))
                return VX_ECUDA;
            gru0_state_kernel<<<blocks, VXK_THREADS, 0, stream>>>(a);
            break;
        }
    }
    return vxk_check(ctx, "recurrent step");
}

/* Y_h and Y_c: copies of the last step's h and C (the initial states, or
 * zeros, for an empty sequence). */
static vx_status rnn_final_states(vx_ctx *ctx, vx_run *run, const rnn_geom *g, const float *reserve, float *y) {
    int64_t sd[3] = {g->layout1 ? g->N : g->D, g->layout1 ? g->D : g->N, g->H};
    int64_t TN = g->T * g->N, KH = g->K * g->H;
    vx_status st;
    for (int k = 1; k <= 2; k++) {
        if (!vxk_has_out(run, k)) continue;
        if (k == 2 && g->kind != CELL_LSTM) return vx_fail(ctx, VX_ESHAPE, "%s has no Y_c", run->node->op_type);
        if ((st = vxk_new_out(ctx, run, k, VX_F32, 3, sd))) return st;
        for (int d = 0; d < g->D && g->N * g->H > 0; d++) {
            int64_t t = time_of(g, d, g->T - 1);
            mat dst = state_at(g, run->out[k], d), src;
            if (g->T == 0) src = state_at(g, vxk_has_in(run, 4 + k) ? run->in[4 + k] : NULL, d);
            else if (k == 1) src = y_at(g, y, t, d);
            else src = rows_at(g, (float *)reserve + d * TN * KH, KH, t), src.p += 4 * g->H;
            copy_mat_kernel<<<vxk_blocks(g->N * g->H), VXK_THREADS, 0, vxk_stream(ctx)>>>(dst.p, dst.ld, src.p, src.ld,
                                                                                         g->N, g->H);
        }
    }
    return vxk_check(ctx, "recurrent final states");
}

static vx_status rnn_forward(vx_ctx *ctx, vx_run *run) {
    rnn_geom g;
    vx_status st = rnn_geometry(ctx, run, &g);
    if (st) return st;
    int64_t ydims[4] = {g.T, g.D, g.N, g.H}, ydims1[4] = {g.N, g.T, g.D, g.H};
    float *y;
    if (vxk_has_out(run, 0)) {
        if ((st = vxk_new_out(ctx, run, 0, VX_F32, 4, g.layout1 ? ydims1 : ydims))) return st;
        y = (float *)run->out[0]->data;
    } else if (!(y = scratch(ctx, run, 1, 4, g.layout1 ? ydims1 : ydims, &st))) {
        return st;
    }
    int64_t rdims[3] = {g.D, g.T * g.N, g.K * g.H};
    float *reserve = scratch(ctx, run, 0, 3, rdims, &st);
    if (!reserve) return st;
    if (g.T * g.N > 0)
        for (int d = 0; d < g.D; d++)
            if ((st = rnn_direction_forward(ctx, run, &g, d, reserve, y))) return st;
    if ((st = rnn_final_states(ctx, run, &g, reserve, y))) return st;
    if (!run->training) {
        vx_free(ctx, reserve);
        if (!vxk_has_out(run, 0)) vx_free(ctx, y);
    }
    return VX_OK;
}

/* ---- backward ------------------------------------------------------------------ */

typedef struct bwd_bufs {
    float *dg, *dh, *dc;
    const vx_tensor *dy[3]; /* the gradients of Y, Y_h and Y_c, or NULL */
} bwd_bufs;

/* dh and dc of the last step: Y_h's and Y_c's gradients. */
static void seed_carry(vx_ctx *ctx, const rnn_geom *g, int d, const bwd_bufs *b) {
    cudaStream_t stream = vxk_stream(ctx);
    unsigned blocks = vxk_blocks(g->N * g->H);
    mat dyh = grad_at(g, b->dy[1], 1, 0, d), dyc = grad_at(g, b->dy[2], 2, 0, d);
    copy_mat_kernel<<<blocks, VXK_THREADS, 0, stream>>>(b->dh, g->H, dyh.p, dyh.ld, g->N, g->H);
    if (b->dc) copy_mat_kernel<<<blocks, VXK_THREADS, 0, stream>>>(b->dc, g->H, dyc.p, dyc.ld, g->N, g->H);
}

/* One step back: dG of step t and the carried dh, dc of the step before. */
static cublasStatus_t step_back(vx_ctx *ctx, const vx_run *run, const rnn_geom *g, int d, int64_t s,
                                const bwd_bufs *b, const float *reserve, const float *y, const float *R) {
    cublasHandle_t h = vxk_blas(ctx);
    cudaStream_t stream = vxk_stream(ctx);
    unsigned blocks = vxk_blocks(g->N * g->H);
    int64_t H = g->H, GH = g->G * H, KH = g->K * H, TN = g->T * g->N;
    const float *S = reserve + d * TN * KH;
    int64_t t = time_of(g, d, s), tp = s ? time_of(g, d, s - 1) : -1;
    mat st = rows_at(g, (float *)S, KH, t), dg = rows_at(g, b->dg, g->KG, t), yt = y_at(g, (float *)y, t, d);
    mat hp = s ? y_at(g, (float *)y, tp, d) : state_at(g, vxk_has_in(run, 5) ? run->in[5] : NULL, d);
    mat cp = s ? rows_at(g, (float *)S, KH, tp) : state_at(g, vxk_has_in(run, 6) ? run->in[6] : NULL, d);
    if (s && cp.p) cp.p += 4 * H;
    mat dy = grad_at(g, b->dy[0], 0, t, d);
    grad_args a = {g->N, H, st.p, st.ld, hp.p, hp.ld, cp.p, cp.ld, yt.p, yt.ld, dy.p, dy.ld, b->dh, b->dc, dg.p, dg.ld};
    switch (g->kind) {
    case CELL_LSTM:
        lstm_grad_kernel<<<blocks, VXK_THREADS, 0, stream>>>(a);
        return vxk_gemm(h, false, false, g->N, H, GH, 1.f, dg.p, dg.ld, R, H, 0.f, b->dh, H);
    case CELL_RNN:
        rnn_grad_kernel<<<blocks, VXK_THREADS, 0, stream>>>(a, g->relu);
        return vxk_gemm(h, false, false, g->N, H, GH, 1.f, dg.p, dg.ld, R, H, 0.f, b->dh, H);
    case CELL_GRU:
        break;
    }
    cublasStatus_t bs;
    if (g->lbr) {
        gru_grad_kernel<<<blocks, VXK_THREADS, 0, stream>>>(a);
        bs = vxk_gemm(h, false, false, g->N, H, H, 1.f, dg.p + 3 * H, dg.ld, R + 2 * H * H, H, 1.f, b->dh, H);
    } else {
        gru0_grad_kernel<<<blocks, VXK_THREADS, 0, stream>>>(a);
        bs = vxk_gemm(h, false, false, g->N, H, H, 1.f, dg.p + 2 * H, dg.ld, R + 2 * H * H, H, 0.f, dg.p + 3 * H, dg.ld);
        gru0_reset_grad_kernel<<<blocks, VXK_THREADS, 0, stream>>>(a);
    }
    if (bs != CUBLAS_STATUS_SUCCESS) return bs;
    return vxk_gemm(h, false, false, g->N, H, 2 * H, 1.f, dg.p, dg.ld, R, H, 1.f, b->dh, H);
}

/* dR += dG^T h_prev over the direction's steps (h_prev zero: nothing). */
static cublasStatus_t recurrent_weight_grad(vx_ctx *ctx, const vx_run *run, const rnn_geom *g, int d,
                                            const bwd_bufs *b, const float *reserve, const float *y, float *dR) {
    cublasHandle_t h = vxk_blas(ctx);
    int64_t H = g->H, GH = g->G * H, KH = g->K * H, TN = g->T * g->N;
    for (int64_t s = 0; s < g->T; s++) {
        int64_t t = time_of(g, d, s);
        mat hp = s ? y_at(g, (float *)y, time_of(g, d, s - 1), d)
                   : state_at(g, vxk_has_in(run, 5) ? run->in[5] : NULL, d);
        if (!hp.p) continue;
        mat dg = rows_at(g, b->dg, g->KG, t);
        cublasStatus_t bs;
        if (g->kind != CELL_GRU) {
            bs = vxk_gemm(h, true, false, GH, H, g->N, 1.f, dg.p, dg.ld, hp.p, hp.ld, 1.f, dR, H);
        } else {
            bs = vxk_gemm(h, true, false, 2 * H, H, g->N, 1.f, dg.p, dg.ld, hp.p, hp.ld, 1.f, dR, H);
            /* the candidate's rows: dhn against h_prev, or dn against r o h_prev */
            mat rh = rows_at(g, (float *)reserve + d * TN * KH, KH, t);
            const float *gate = g->lbr ? dg.p + 3 * H : dg.p + 2 * H, *in = g->lbr ? hp.p : rh.p + 3 * H;
            int64_t ldin = g->lbr ? hp.ld : rh.ld;
            if (bs == CUBLAS_STATUS_SUCCESS)
                bs = vxk_gemm(h, true, false, H, H, g->N, 1.f, gate, dg.ld, in, ldin, 1.f, dR + 2 * H * H, H);
        }
        if (bs != CUBLAS_STATUS_SUCCESS) return bs;
    }
    return CUBLAS_STATUS_SUCCESS;
}

static vx_status rnn_direction_backward(vx_ctx *ctx, vx_run *run, const rnn_geom *g, int d, const bwd_bufs *b,
                                        const float *reserve, const float *y) {
    cublasHandle_t h = vxk_blas(ctx);
    int64_t H = g->H, GH = g->G * H, TN = g->T * g->N;
    const float *W = (const float *)run->in[1]->data, *R = (const float *)run->in[2]->data + d * GH * H;
    seed_carry(ctx, g, d, b);
    for (int64_t s = g->T - 1; s >= 0; s--)
        if (vxk_blas_check(ctx, step_back(ctx, run, g, d, s, b, reserve, y, R), "recurrent backward product"))
            return VX_ECUDA;
    unsigned blocks = vxk_blocks(g->N * H);
    for (int k = 5; k <= 6; k++) {
        if (!run->need_grad[k] || !run->grad_in[k]) continue;
        mat dst = state_at(g, run->grad_in[k], d);
        const float *src = k == 5 ? b->dh : b->dc;
        copy_mat_kernel<<<blocks, VXK_THREADS, 0, vxk_stream(ctx)>>>(dst.p, dst.ld, src, H, g->N, H);
    }
    if (run->need_grad[2] &&
        vxk_blas_check(ctx, recurrent_weight_grad(ctx, run, g, d, b, reserve, y, (float *)run->grad_in[2]->data + d * GH * H),
                       "recurrent weight gradient"))
        return VX_ECUDA;
    if (run->need_grad[1] &&
        vxk_blas_check(ctx, vxk_gemm(h, true, false, GH, g->I, TN, 1.f, b->dg, g->KG, (const float *)run->in[0]->data,
                                     g->I, 0.f, (float *)run->grad_in[1]->data + d * GH * g->I, g->I),
                       "recurrent input weight gradient"))
        return VX_ECUDA;
    if (run->need_grad[0] &&
        vxk_blas_check(ctx, vxk_gemm(h, false, false, TN, g->I, GH, 1.f, b->dg, g->KG, W + d * GH * g->I, g->I,
                                     d ? 1.f : 0.f, (float *)run->grad_in[0]->data, g->I),
                       "recurrent input gradient"))
        return VX_ECUDA;
    if (run->need_grad[3] && vxk_has_in(run, 3)) {
        float *dB = (float *)run->grad_in[3]->data + d * 2 * GH;
        column_sum(ctx, dB, b->dg, g->KG, TN, GH); /* Wb */
        if (g->kind == CELL_GRU && g->lbr) {
            column_sum(ctx, dB + GH, b->dg, g->KG, TN, 2 * H);
            column_sum(ctx, dB + GH + 2 * H, b->dg + 3 * H, g->KG, TN, H);
        } else {
            column_sum(ctx, dB + GH, b->dg, g->KG, TN, GH); /* Rb: the same sums */
        }
    }
    return vxk_check(ctx, "recurrent backward");
}

static vx_status rnn_backward(vx_ctx *ctx, vx_run *run) {
    rnn_geom g;
    vx_status st = rnn_geometry(ctx, run, &g);
    if (st) return st;
    bool any = false;
    for (int k = 0; k < run->n_in && k < 7; k++) any |= run->need_grad[k] && k != 4;
    if (!any || !run->saved[0]) return VX_OK;
    vx_status st_fail = VX_OK;
    const float *reserve = (const float *)run->saved[0]->data;
    const float *y = vxk_has_out(run, 0) ? (const float *)run->out[0]->data : (const float *)run->saved[1]->data;
    for (int k = 0; k < run->n_in && k < 7; k++)
        if (run->need_grad[k] && k != 4 && vxk_has_in(run, k) && (st = vxk_grad(ctx, run, k))) return st;
    for (int k = 2; k <= 3; k++)
        if (run->grad_in[k] && (st = vxk_zero(ctx, run->grad_in[k]->data, (size_t)run->grad_in[k]->numel * 4)))
            return st;
    if (run->grad_in[0] && g.T * g.N == 0 && (st = vxk_zero(ctx, run->grad_in[0]->data, (size_t)run->grad_in[0]->numel * 4)))
        return st;
    if (run->grad_in[1] && g.T * g.N == 0 && (st = vxk_zero(ctx, run->grad_in[1]->data, (size_t)run->grad_in[1]->numel * 4)))
        return st;
    /* a gradient whose hidden unit is not the unit stride: a contiguous copy */
    bwd_bufs b = {NULL, NULL, NULL, {NULL, NULL, NULL}};
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
    int64_t TN = g.T * g.N, NH = g.N * g.H;
    if (st_fail) st = st_fail;
    else b.dg = (float *)vx_workspace(ctx, (size_t)(TN * g.KG > 0 ? TN * g.KG : 1) * sizeof(float));
    b.dh = b.dg ? (float *)vx_workspace(ctx, (size_t)(NH > 0 ? NH : 1) * sizeof(float)) : NULL;
    b.dc = b.dh && g.kind == CELL_LSTM ? (float *)vx_workspace(ctx, (size_t)(NH > 0 ? NH : 1) * sizeof(float)) : NULL;
    if (!st && (!b.dh || (g.kind == CELL_LSTM && !b.dc))) st = vxk_oom(ctx, "recurrent backward");
    for (int d = 0; !st && d < g.D && NH > 0; d++) st = rnn_direction_backward(ctx, run, &g, d, &b, reserve, y);
    vx_free(ctx, b.dc);
    vx_free(ctx, b.dh);
    vx_free(ctx, b.dg);
    for (int k = 0; k < 3; k++) vx_tensor_release(ctx, copies[k]);
    return st;
}

/* X, W, R, B, initial_h, initial_c; Y. sequence_lens (4) and P (7) are refused. */
#define RNN_SAVES_IN (VX_SLOT(0) | VX_SLOT(1) | VX_SLOT(2) | VX_SLOT(3) | VX_SLOT(5) | VX_SLOT(6))
/* The output gradients are read in place (grad_at); strided inputs come as
 * contiguous copies. */
#define RNN_OP(name) {name, rnn_forward, rnn_backward, RNN_SAVES_IN, VX_SLOT(0), false, 0, NULL, VX_STRIDED_GRAD}

extern "C" {
const vx_op vx_ops_recurrent[] = {RNN_OP("LSTM"), RNN_OP("GRU"), RNN_OP("RNN")};
const size_t vx_ops_recurrent_count = sizeof vx_ops_recurrent / sizeof vx_ops_recurrent[0];
}
