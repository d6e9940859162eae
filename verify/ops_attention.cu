/*
 * ops_attention.cu: Attention (ONNX opset 23, and the node libestimate/
 * fuse.c makes of an exported scaled_dot_product_attention), forward and
 * backward, as SDPA's math kernel runs it: the scores of every head, the
 * mask added, a row softmax, [dropout,] the product with V.
 *
 * Inputs: Q [B, Hq, Sq, D], K [B, Hk, Skv, D], V [B, Hk, Skv, Dv] (4-D
 * only; Hq a multiple of Hk: a query head reads key head h / (Hq / Hk)), an
 * optional mask (slot 3) broadcasting to [B, Hq, Sq, Skv], float (added) or
 * bool (true: attend); attributes scale (default 1 / sqrt(D)), is_causal
 * (query q attends to keys 0..q + the past keys' count: upper-left
 * without past, offset by the cache with it, as ONNX aligns it),
 * and memest.dropout (the fused chain had a Dropout; ratio 0.1 here, as the
 * node does not carry it). A row with nothing to attend to is all zeros
 * (_safe_softmax). Past key and value (slots 4, 5) run forward only:
 * the present key and value (outputs 1, 2) are the past ones then K and V
 * along the sequence, and the scores read them. nonpad_kv_seqlen, a padded
 * mask, softcap and qk_matmul_output are refused.
 *
 * Memory (layers/linear.c's verify rules follow it):
 *  - P, the probabilities [B, Hq, Sq, Skv] in Q's dtype: saved[0] in training,
 *    else a workspace;
 *  - with dropout in training: the bool mask (saved[1]) and the dropped
 *    probabilities (saved[2]) that the second product reads;
 *  - backward: one workspace of P's size (dP, then the scores' gradient in
 *    place);
 *  - saves Q, K and V.
 * Products run as strided batched cuBLAS calls over the heads (and the
 * samples, where their strides fold), on Q, K, V and the output's
 * gradient as they are (views whose last dim is the unit stride: the
 * exporters' Transposes), so nothing is copied.
 */
#include "ops_common.cuh"

#define ATTN_DROPOUT_RATIO 0.1f

typedef struct attn_geom {
    int64_t B, Hq, Hk, Sq, Skv, D, Dv; /* Skv: the keys attended to, past ones included */
    int64_t Sp;                        /* past keys (0 without past_key) */
    float scale;
    bool causal, dropout, past;
    int64_t rows; /* B * Hq * Sq */
} attn_geom;

/* The mask's strides over [B, Hq, Sq, Skv] (0 where it broadcasts). */
typedef struct mask_map {
    int64_t st[4];
    int kind; /* 0 none, 1 float (added), 2 bool */
} mask_map;

static vx_status attn_geometry(vx_ctx *ctx, const vx_run *run, attn_geom *g, mask_map *m) {
    memset(g, 0, sizeof *g);
    memset(m, 0, sizeof *m);
    for (int k = 0; k < 3; k++)
        if (!vxk_has_in(run, k) || !vx_dtype_is_float(run->in[k]->dtype) || run->in[k]->dtype != run->in[0]->dtype ||
            run->in[k]->rank != 4)
            return vx_fail(ctx, VX_EUNSUPPORTED, "Attention: Q, K and V must be 4-D and of one floating dtype");
    g->past = vxk_has_in(run, 4) || vxk_has_in(run, 5);
    if (g->past) {
        if (!vxk_has_in(run, 4) || !vxk_has_in(run, 5))
            return vx_fail(ctx, VX_ESHAPE, "Attention: past_key and past_value come together");
        if (!vxk_has_out(run, 1) || !vxk_has_out(run, 2))
            return vx_fail(ctx, VX_EUNSUPPORTED, "Attention: past key and value without the present outputs have no kernel");
        if (run->training) return vx_fail(ctx, VX_EUNSUPPORTED, "Attention: past key and value run forward only (inference)");
        for (int k = 4; k < 6; k++)
            if (run->in[k]->dtype != run->in[0]->dtype || run->in[k]->rank != 4)
                return vx_fail(ctx, VX_EUNSUPPORTED, "Attention: past key and value must be 4-D, of Q's dtype");
    }
    if (vxk_has_in(run, 6)) return vx_fail(ctx, VX_EUNSUPPORTED, "Attention: nonpad_kv_seqlen has no kernel");
    if (vxk_attr_float(run, "softcap", 0) != 0) return vx_fail(ctx, VX_EUNSUPPORTED, "Attention: softcap has no kernel");
    for (int k = 1; k < run->n_out; k++)
        if (vxk_has_out(run, k) && !(g->past && k < 3))
            return vx_fail(ctx, VX_EUNSUPPORTED, "Attention: output %d has no kernel", k);
    const vx_tensor *Q = run->in[0], *K = run->in[1], *V = run->in[2];
    g->B = Q->dims[0];
    g->Hq = Q->dims[1];
    g->Sq = Q->dims[2];
    g->D = Q->dims[3];
    g->Hk = K->dims[1];
    g->Skv = K->dims[2];
    g->Dv = V->dims[3];
    if (K->dims[0] != g->B || V->dims[0] != g->B || K->dims[3] != g->D || V->dims[1] != g->Hk || V->dims[2] != g->Skv ||
        g->Hk < 1 || g->Hq % g->Hk)
        return vx_fail(ctx, VX_ESHAPE, "Attention: Q, K and V disagree");
    if (g->past) {
        const vx_tensor *PK = run->in[4], *PV = run->in[5];
        if (PK->dims[0] != g->B || PK->dims[1] != g->Hk || PK->dims[3] != g->D || PV->dims[0] != g->B ||
            PV->dims[1] != g->Hk || PV->dims[2] != PK->dims[2] || PV->dims[3] != g->Dv)
            return vx_fail(ctx, VX_ESHAPE, "Attention: past key and value disagree with K and V");
        g->Sp = PK->dims[2];
        g->Skv += g->Sp;
    }
    g->scale = (float)vxk_attr_float(run, "scale", g->D > 0 ? 1.0 / sqrt((double)g->D) : 1.0);
    g->causal = vxk_attr_int(run, "is_causal", 0) != 0;
    g->dropout = run->training && vxk_attr_int(run, EST_ATTENTION_DROPOUT, 0) != 0;
    g->rows = g->B * g->Hq * g->Sq;
    if (vxk_has_in(run, 3)) {
        const vx_tensor *M = run->in[3];
        if (M->dtype == run->in[0]->dtype) m->kind = 1;
        else if (M->dtype == VX_BOOL) m->kind = 2;
        else return vx_fail(ctx, VX_EUNSUPPORTED, "Attention: a float or bool mask only");
        if (M->rank > 4) return vx_fail(ctx, VX_ESHAPE, "Attention: mask rank %d", M->rank);
        /* its own strides when it is a view (an expanded mask reads in place) */
        const int64_t full[4] = {g->B, g->Hq, g->Sq, g->Skv};
        int64_t s = 1;
        for (int d = 3; d >= 0; d--) {
            int j = d - (4 - M->rank);
            int64_t e = j >= 0 ? M->dims[j] : 1;
            if (e != 1 && e != full[d]) /* a mask padded past the keys (opset 24) */
                return vx_fail(ctx, VX_EUNSUPPORTED, "Attention: a mask that does not broadcast to the scores");
            m->st[d] = e == 1 ? 0 : M->strided ? M->strides[j] : s;
            s *= e;
        }
    }
    if (!vxk_gemm_fits(g->Sq, g->Skv, g->D > g->Dv ? g->D : g->Dv)) return vx_fail(ctx, VX_ESHAPE, "Attention: too large");
    return VX_OK;
}

/* ---- kernels ----------------------------------------------------------------- */

static __device__ __forceinline__ int64_t mask_off(const mask_map &m, int64_t row, int64_t j, const attn_geom &g) {
    int64_t q = row % g.Sq, h = (row / g.Sq) % g.Hq, b = row / (g.Sq * g.Hq);
    return b * m.st[0] + h * m.st[1] + q * m.st[2] + j * m.st[3];
}

/* One block per row: mask, causal, softmax in place (a row with nothing to
 * attend to stays all zeros); with dropout, the bool mask and the dropped
 * probabilities. */
template <typename T>
static __global__ void attn_softmax_kernel(T *p, const void *mask, mask_map m, attn_geom g, uint8_t *keep,
                                           T *dropped, unsigned long long seed) {
    __shared__ float sh[VXK_THREADS];
    for (int64_t r = blockIdx.x; r < g.rows; r += gridDim.x) {
        T *pr = p + r * g.Skv;
        int64_t q = r % g.Sq;
        float mx = -INFINITY;
        for (int64_t j = threadIdx.x; j < g.Skv; j += blockDim.x) {
            float v = vxk_ld(pr[j]);
            if (m.kind == 1) v += vxk_ld(((const T *)mask)[mask_off(m, r, j, g)]);
            if ((m.kind == 2 && !((const uint8_t *)mask)[mask_off(m, r, j, g)]) || (g.causal && j > q + g.Sp))
                v = -INFINITY;
            pr[j] = vxk_st<T>(v);
            mx = fmaxf(mx, v);
        }
        mx = vxk_block_reduce(mx, sh, true);
        float sum = 0.f;
        for (int64_t j = threadIdx.x; j < g.Skv; j += blockDim.x) sum += mx == -INFINITY ? 0.f : expf(vxk_ld(pr[j]) - mx);
        sum = vxk_block_reduce(sum, sh, false);
        for (int64_t j = threadIdx.x; j < g.Skv; j += blockDim.x) {
            float v = mx == -INFINITY || sum == 0.f ? 0.f : expf(vxk_ld(pr[j]) - mx) / sum;
            pr[j] = vxk_st<T>(v);
            if (keep) {
                unsigned long long z = seed + (unsigned long long)(r * g.Skv + j) * 0x9e3779b97f4a7c15ull;
                z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
                z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
                z ^= z >> 31;
                bool k = (float)(z >> 40) / 16777216.f >= ATTN_DROPOUT_RATIO;
                keep[r * g.Skv + j] = k;
                dropped[r * g.Skv + j] = vxk_st<T>(k ? v / (1.f - ATTN_DROPOUT_RATIO) : 0.f);
            }
        }
    }
}

/* In place: dP (times the dropout's keep / (1 - ratio)) -> the scores'
 * gradient P * (dP - sum(dP * P)). One block per row. */
template <typename T>
static __global__ void attn_softmax_bwd_kernel(T *dp, const T *p, const uint8_t *keep, attn_geom g) {
    __shared__ float sh[VXK_THREADS];
    for (int64_t r = blockIdx.x; r < g.rows; r += gridDim.x) {
        T *d = dp + r * g.Skv;
        const T *pr = p + r * g.Skv;
        float acc = 0.f;
        for (int64_t j = threadIdx.x; j < g.Skv; j += blockDim.x) {
            float v = vxk_ld(d[j]);
            if (keep) v = keep[r * g.Skv + j] ? v / (1.f - ATTN_DROPOUT_RATIO) : 0.f;
            d[j] = vxk_st<T>(v);
            acc += v * vxk_ld(pr[j]);
        }
        acc = vxk_block_reduce(acc, sh, false);
        for (int64_t j = threadIdx.x; j < g.Skv; j += blockDim.x)
            d[j] = vxk_st<T>(vxk_ld(pr[j]) * (vxk_ld(d[j]) - acc));
    }
}

/* The mask's gradient: the scores' gradient summed onto the mask's shape. */
template <typename T> static __global__ void attn_mask_grad_kernel(T *dm, const T *ds, mask_map m, attn_geom g) {
    VXK_LOOP(i, g.rows * g.Skv) {
        int64_t r = i / g.Skv, j = i % g.Skv;
        vxk_atomic_add_t(dm + mask_off(m, r, j, g), vxk_ld(ds[i]));
    }
}

/* ---- per-head products ---------------------------------------------------------- */

/* A 4-D operand [B, H, rows, cols] with unit stride along cols: Q, K, V
 * and the output's gradient may be views (the exporter's Transposes). */
template <typename T> struct t4 {
    const T *p;
    int64_t sb, sh, ld;
};

template <typename T> static bool t4_of(const vx_tensor *t, t4<T> *v) {
    int64_t st[4];
    if (!t || t->rank != 4) return false;
    if (t->strided) memcpy(st, t->strides, sizeof st);
    else st[3] = 1, st[2] = t->dims[3], st[1] = t->dims[2] * st[2], st[0] = t->dims[1] * st[1];
    if (st[3] != 1 && t->dims[3] > 1) return false;
    *v = t4<T>{(const T *)t->data, st[0], st[1], st[2]};
    return true;
}

template <typename T> static t4<T> t4_dense(const T *p, int64_t heads, int64_t rows, int64_t cols) {
    return t4<T>{p, heads * rows * cols, rows * cols, cols};
}

/* For every query head (b, h): C_bh = alpha * op(A_bh) op(B_kv) + beta * C_bh,
 * B indexed by the key head h / (Hq / Hk); sizes m x n x k. */
template <typename T> struct head_gemm {
    bool ta, tb;
    int64_t m, n, k;
    t4<T> A, B, C;
    float alpha, beta;
};

template <typename T> static const T *at(const t4<T> *t, int64_t b, int64_t h) { return t->p + b * t->sb + h * t->sh; }

/* C_i = alpha op(A_i) op(B_i) + beta C_i for i < count, A_i = A + i * sA...:
 * one strided batched call. */
template <typename T>
static cublasStatus_t batched(cublasHandle_t hd, const head_gemm<T> *p, const T *A, int64_t sA, const T *B,
                              int64_t sB, float beta, T *C, int64_t sC, int64_t count) {
    return vxk_gemm_strided(hd, p->ta, p->tb, p->m, p->n, p->k, p->alpha, A, p->A.ld, sA, B, p->B.ld, sB, beta, C,
                            p->C.ld, sC, count);
}

/* Whether (b, h) of t, h < heads, is one stride over b * heads + h. */
template <typename T> static bool folds(const t4<T> *t, int64_t heads) { return t->sb == heads * t->sh; }

/* For every query head (b, h): C_bh = alpha * op(A_bh) op(B_kv) + beta * C_bh,
 * B indexed by the key head h / (Hq / Hk). Query heads r, r + rep, ... share
 * nothing; each such set is one batched call per sample (one call in all
 * when the heads fold into the samples). */
template <typename T>
static vx_status per_head(vx_ctx *ctx, const attn_geom *g, const head_gemm<T> *p, const char *what) {
    cublasHandle_t hd = vxk_blas(ctx);
    int64_t rep = g->Hq / g->Hk;
    if (rep == 1 && folds(&p->A, g->Hq) && folds(&p->B, g->Hk) && folds(&p->C, g->Hq))
        return vxk_blas_check(ctx, batched(hd, p, p->A.p, p->A.sh, p->B.p, p->B.sh, p->beta, (T *)p->C.p, p->C.sh,
                                           g->B * g->Hq), what);
    for (int64_t b = 0; b < g->B; b++)
        for (int64_t r = 0; r < rep; r++) {
            cublasStatus_t s = batched(hd, p, at(&p->A, b, r), rep * p->A.sh, at(&p->B, b, 0), p->B.sh, p->beta,
                                       (T *)at(&p->C, b, r), rep * p->C.sh, g->Hk);
            if (s != CUBLAS_STATUS_SUCCESS) return vxk_blas_check(ctx, s, what);
        }
    return VX_OK;
}

/* For every key head: C_kv = alpha * the sum over its query heads h of
 * op(A_bh) op(B_bh) (the gradients of K and V under grouped-query
 * attention): the r-th query head of every key head in one batched call,
 * accumulating from r = 1. */
template <typename T>
static vx_status per_kv_head(vx_ctx *ctx, const attn_geom *g, const head_gemm<T> *p, const char *what) {
    cublasHandle_t hd = vxk_blas(ctx);
    int64_t rep = g->Hq / g->Hk;
    if (rep == 1 && folds(&p->A, g->Hq) && folds(&p->B, g->Hq) && folds(&p->C, g->Hk))
        return vxk_blas_check(ctx, batched(hd, p, p->A.p, p->A.sh, p->B.p, p->B.sh, 0.f, (T *)p->C.p, p->C.sh,
                                           g->B * g->Hk), what);
    for (int64_t b = 0; b < g->B; b++)
        for (int64_t r = 0; r < rep; r++) {
            cublasStatus_t s = batched(hd, p, at(&p->A, b, r), rep * p->A.sh, at(&p->B, b, r), rep * p->B.sh,
                                       r == 0 ? 0.f : 1.f, (T *)at(&p->C, b, 0), p->C.sh, g->Hk);
            if (s != CUBLAS_STATUS_SUCCESS) return vxk_blas_check(ctx, s, what);
        }
    return VX_OK;
}

/* ---- forward, backward ----------------------------------------------------------- */

/* Q, K, V (and dY) as t4<T> views; a tensor whose last dim is not the unit
 * stride gets a contiguous copy (held in copies[], a workspace). */
template <typename T>
static vx_status operands(vx_ctx *ctx, vx_tensor *const *ts, int n, t4<T> *out, vx_tensor **copies) {
    for (int k = 0; k < n; k++) {
        copies[k] = NULL;
        if (t4_of(ts[k], &out[k])) continue;
        if (!(copies[k] = vx_contiguous(ctx, ts[k]))) return vxk_oom(ctx, "Attention operand copy");
        if (!t4_of(copies[k], &out[k])) return vx_fail(ctx, VX_ESHAPE, "Attention: operand %d is not 4-D", k);
    }
    return VX_OK;
}

/* present [B, H, Sp + S, D] = past [B, H, Sp, D] then new (a t4<T> view of
 * [B, H, S, D]) along the sequence. */
template <typename T>
static __global__ void attn_present_kernel(T *present, const T *past, t4<T> nw, int64_t B, int64_t H, int64_t Sp,
                                           int64_t S, int64_t D) {
    int64_t St = Sp + S, total = B * H * St * D;
    VXK_LOOP(i, total) {
        int64_t d = i % D, r = i / D, s = r % St, bh = r / St, h = bh % H, b = bh / H;
        present[i] = s < Sp ? past[(bh * Sp + s) * D + d] : nw.p[b * nw.sb + h * nw.sh + (s - Sp) * nw.ld + d];
    }
}

/* With past key and value: outputs 1 and 2, the present key and value, made
 * here; they replace K and V in qkv[1..2]. */
template <typename T> static vx_status attn_present(vx_ctx *ctx, vx_run *run, const attn_geom *g, t4<T> *qkv) {
    for (int k = 0; k < 2; k++) {
        int64_t dl = k ? g->Dv : g->D, pd[4] = {g->B, g->Hk, g->Skv, dl};
        vx_status st = vxk_new_out(ctx, run, 1 + k, run->in[0]->dtype, 4, pd);
        if (st) return st;
        vx_tensor *past = vx_contiguous(ctx, run->in[4 + k]);
        if (!past) return vxk_oom(ctx, "Attention past copy");
        T *present = (T *)run->out[1 + k]->data;
        int64_t total = g->B * g->Hk * g->Skv * dl;
        if (total)
            attn_present_kernel<T><<<vxk_blocks(total), VXK_THREADS, 0, vxk_stream(ctx)>>>(
                present, (const T *)past->data, qkv[1 + k], g->B, g->Hk, g->Sp, g->Skv - g->Sp, dl);
        st = vxk_check(ctx, "Attention present");
        vx_tensor_release(ctx, past);
        if (st) return st;
        qkv[1 + k] = t4_dense(present, g->Hk, g->Skv, dl);
    }
    return VX_OK;
}

template <typename T> static vx_status attention_forward_t(vx_ctx *ctx, vx_run *run) {
    attn_geom g;
    mask_map m;
    vx_status st = attn_geometry(ctx, run, &g, &m);
    if (st) return st;
    int64_t yd[4] = {g.B, g.Hq, g.Sq, g.Dv}, pd[4] = {g.B, g.Hq, g.Sq, g.Skv};
    if ((st = vxk_new_out(ctx, run, 0, run->in[0]->dtype, 4, yd))) return st;
    T *P = NULL;
    uint8_t *keep = NULL;
    T *dropped = NULL;
    t4<T> qkv[3];
    vx_tensor *copies[3] = {NULL, NULL, NULL};
    if (run->training) {
        if ((st = vxk_new_saved(ctx, run, 0, run->in[0]->dtype, 4, pd))) goto done;
        P = (T *)run->saved[0]->data;
    } else if (!(P = (T *)vx_workspace(ctx, (size_t)(g.rows * g.Skv > 0 ? g.rows * g.Skv : 1) * sizeof(T)))) {
        st = vxk_oom(ctx, "Attention probabilities");
        goto done;
    }
    if (g.dropout && g.rows * g.Skv > 0) {
        if ((st = vxk_new_saved(ctx, run, 1, VX_BOOL, 4, pd)) ||
            (st = vxk_new_saved(ctx, run, 2, run->in[0]->dtype, 4, pd)))
            goto done;
        keep = (uint8_t *)run->saved[1]->data;
        dropped = (T *)run->saved[2]->data;
    }
    if ((st = operands(ctx, run->in, 3, qkv, copies))) goto done;
    if (g.past && (st = attn_present(ctx, run, &g, qkv))) goto done;
    if (g.rows * g.Skv == 0 || g.Dv == 0) {
        if (run->out[0]->numel) st = vxk_zero(ctx, run->out[0]->data, (size_t)run->out[0]->numel * sizeof(T));
        goto done;
    }
    {
        /* scores: scale * Q_h K_kv^T */
        head_gemm<T> s = {false, true, g.Sq, g.Skv, g.D, qkv[0], qkv[1], t4_dense(P, g.Hq, g.Sq, g.Skv), g.scale, 0.f};
        if ((st = per_head(ctx, &g, &s, "Attention scores"))) goto done;
        const void *mask = m.kind ? run->in[3]->data : NULL;
        attn_softmax_kernel<T><<<(unsigned)(g.rows < 65536 ? g.rows : 65536), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            P, mask, m, g, keep, dropped, (unsigned long long)vx_seed(ctx));
        if ((st = vxk_check(ctx, "Attention softmax"))) goto done;
        /* Y = P' V_kv */
        head_gemm<T> o = {false, false, g.Sq, g.Dv, g.Skv, t4_dense(dropped ? dropped : P, g.Hq, g.Sq, g.Skv), qkv[2],
                       t4_dense((T *)run->out[0]->data, g.Hq, g.Sq, g.Dv), 1.f, 0.f};
        st = per_head(ctx, &g, &o, "Attention output");
    }
done:
    for (int k = 0; k < 3; k++) vx_tensor_release(ctx, copies[k]);
    if (!run->training && P) vx_free(ctx, P);
    return st;
}

template <typename T> static vx_status attention_backward_t(vx_ctx *ctx, vx_run *run) {
    attn_geom g;
    mask_map m;
    vx_status st = attn_geometry(ctx, run, &g, &m);
    if (st) return st;
    if (!run->grad_out[0] || !run->saved[0]) return VX_OK;
    const T *P = (const T *)run->saved[0]->data;
    const uint8_t *keep = g.dropout && run->saved[1] ? (const uint8_t *)run->saved[1]->data : NULL;
    const T *Pd = g.dropout && run->saved[2] ? (const T *)run->saved[2]->data : P;
    for (int k = 0; k < 4; k++)
        if (run->need_grad[k] && vxk_has_in(run, k) && (st = vxk_grad(ctx, run, k))) return st;
    if (g.rows * g.Skv == 0) {
        for (int k = 0; k < 4; k++)
            if (run->grad_in[k] && (st = vxk_zero(ctx, run->grad_in[k]->data, (size_t)run->grad_in[k]->numel * sizeof(T))))
                return st;
        return VX_OK;
    }
    vx_tensor *ops[4] = {run->in[0], run->in[1], run->in[2], run->grad_out[0]}, *copies[4];
    t4<T> v[4];
    T *dS = NULL;
    bool scores = run->need_grad[0] || run->need_grad[1] || (run->n_in > 3 && run->need_grad[3]);
    t4<T> grads[3];
    for (int k = 0; k < 3; k++)
        grads[k] = run->grad_in[k] ? t4_dense((T *)run->grad_in[k]->data, k ? g.Hk : g.Hq, k ? g.Skv : g.Sq,
                                              k == 2 ? g.Dv : g.D)
                                   : t4<T>{NULL, 0, 0, 0};
    if ((st = operands(ctx, ops, 4, v, copies))) goto done;
    if (run->need_grad[2]) { /* dV_kv = sum over its query heads of P'_h^T dY_h */
        head_gemm<T> p = {true, false, g.Skv, g.Dv, g.Sq, t4_dense(Pd, g.Hq, g.Sq, g.Skv), v[3], grads[2], 1.f, 0.f};
        if ((st = per_kv_head(ctx, &g, &p, "Attention dV"))) goto done;
    }
    if (!scores) goto done;
    if (!(dS = (T *)vx_workspace(ctx, (size_t)(g.rows * g.Skv) * sizeof(T)))) {
        st = vxk_oom(ctx, "Attention backward");
        goto done;
    }
    {
        t4<T> ds = t4_dense(dS, g.Hq, g.Sq, g.Skv);
        /* dP = dY_h V_kv^T, then the softmax's backward in place */
        head_gemm<T> p = {false, true, g.Sq, g.Skv, g.Dv, v[3], v[2], ds, 1.f, 0.f};
        if ((st = per_head(ctx, &g, &p, "Attention dP"))) goto done;
        attn_softmax_bwd_kernel<T><<<(unsigned)(g.rows < 65536 ? g.rows : 65536), VXK_THREADS, 0, vxk_stream(ctx)>>>(
            dS, P, keep, g);
        if ((st = vxk_check(ctx, "Attention softmax backward"))) goto done;
        if (run->n_in > 3 && run->need_grad[3] && run->grad_in[3]) {
            if ((st = vxk_zero(ctx, run->grad_in[3]->data, (size_t)run->grad_in[3]->numel * sizeof(T)))) goto done;
            attn_mask_grad_kernel<T><<<vxk_blocks(g.rows * g.Skv), VXK_THREADS, 0, vxk_stream(ctx)>>>(
                (T *)run->grad_in[3]->data, dS, m, g);
            if ((st = vxk_check(ctx, "Attention mask gradient"))) goto done;
        }
        if (run->need_grad[0]) { /* dQ_h = scale * dS_h K_kv */
            head_gemm<T> q = {false, false, g.Sq, g.D, g.Skv, ds, v[1], grads[0], g.scale, 0.f};
            if ((st = per_head(ctx, &g, &q, "Attention dQ"))) goto done;
        }
        if (run->need_grad[1]) { /* dK_kv = scale * the sum of dS_h^T Q_h */
            head_gemm<T> k = {true, false, g.Skv, g.D, g.Sq, ds, v[0], grads[1], g.scale, 0.f};
            st = per_kv_head(ctx, &g, &k, "Attention dK");
        }
    }
done:
    vx_free(ctx, dS);
    for (int k = 0; k < 4; k++) vx_tensor_release(ctx, copies[k]);
    return st;
}

static vx_status attention_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "Attention needs Q");
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "Attention", attention_forward_t<T>(ctx, run));
}

static vx_status attention_backward(vx_ctx *ctx, vx_run *run) {
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "Attention backward", attention_backward_t<T>(ctx, run));
}

/* Keeps Q, K and V (the mask's gradient needs none of its values); reads
 * Q, K, V and the output's gradient in place when they are views. */
extern "C" {
const vx_op vx_ops_attention[] = {
    {"Attention", attention_forward, attention_backward, VX_SLOT(0) | VX_SLOT(1) | VX_SLOT(2), 0, false, 0, NULL,
     VX_STRIDED_IN | VX_STRIDED_SAVED | VX_STRIDED_GRAD, VX_HALF},
};
const size_t vx_ops_attention_count = sizeof vx_ops_attention / sizeof vx_ops_attention[0];
}
