/*
 * ops_conv.cu: Conv (1-D and 2-D), forward and backward.
 *
 * General groups: im2col into a workspace then, per group, a strided batched
 * GEMM over the samples of a chunk. The batch runs in chunks so the column
 * workspace stays about the size of the output (at least one sample). A 1x1
 * convolution with unit stride and no padding reads X directly (no im2col).
 * One input channel per group (depthwise, or C == 1) runs direct kernels.
 *
 * Backward: dX = col2im(W_g^T * dY_g) (a gather, no atomics); dW = sum over
 * samples of dY_g * col_g^T (GEMMs accumulating into dW); dB = sum of dY over
 * (N, spatial). saves X and W (one formula in PyTorch: both, whatever needs a
 * gradient).
 */
#include "ops_common.cuh"

typedef struct conv_geom {
    int sp;                    /* spatial rank: 1 or 2 */
    int64_t N, C, H, W, M, G, Cg, Mg, kh, kw, sh, sw, dh, dw, ph, pw, Ho, Wo;
} conv_geom;

static int64_t same_pad_begin(int64_t in, int64_t k, int64_t s, int64_t d, bool upper, int64_t *out) {
    int64_t o = (in + s - 1) / s;
    int64_t total = (o - 1) * s + (k - 1) * d + 1 - in;
    if (total < 0) total = 0;
    *out = o;
    return upper ? total / 2 : total - total / 2;
}

static vx_status conv_geom_make(vx_ctx *ctx, const vx_run *run, const vx_tensor *X, const vx_tensor *Wt, conv_geom *g) {
    memset(g, 0, sizeof *g);
    if (X->rank != 3 && X->rank != 4) return vx_fail(ctx, VX_EUNSUPPORTED, "Conv: only 1-D and 2-D convolutions (X rank %d)", X->rank);
    if (Wt->rank != X->rank) return vx_fail(ctx, VX_ESHAPE, "Conv: W rank %d differs from X rank %d", Wt->rank, X->rank);
    int sp = X->rank - 2;
    g->sp = sp;
    g->N = X->dims[0];
    g->C = X->dims[1];
    g->H = sp == 2 ? X->dims[2] : 1;
    g->W = X->dims[X->rank - 1];
    g->M = Wt->dims[0];
    g->G = vxk_attr_int(run, "group", 1);
    if (g->G < 1 || g->C % g->G || g->M % g->G) return vx_fail(ctx, VX_ESHAPE, "Conv: bad group %lld", (long long)g->G);
    g->Cg = g->C / g->G;
    g->Mg = g->M / g->G;
    if (Wt->dims[1] != g->Cg) return vx_fail(ctx, VX_ESHAPE, "Conv: W has %lld input channels, expected %lld",
                                             (long long)Wt->dims[1], (long long)g->Cg);
    g->kh = sp == 2 ? Wt->dims[2] : 1;
    g->kw = Wt->dims[Wt->rank - 1];
    int64_t n;
    const int64_t *ks = vxk_attr_ints(run, "kernel_shape", &n);
    if (ks && n == sp && (ks[sp - 1] != g->kw || (sp == 2 && ks[0] != g->kh)))
        return vx_fail(ctx, VX_ESHAPE, "Conv: kernel_shape differs from W");
    const int64_t *st = vxk_attr_ints(run, "strides", &n);
    if (st && n != sp) return vx_fail(ctx, VX_ESHAPE, "Conv: strides has %lld entries", (long long)n);
    g->sh = st && sp == 2 ? st[0] : 1;
    g->sw = st ? st[sp - 1] : 1;
    const int64_t *dl = vxk_attr_ints(run, "dilations", &n);
    if (dl && n != sp) return vx_fail(ctx, VX_ESHAPE, "Conv: dilations has %lld entries", (long long)n);
    g->dh = dl && sp == 2 ? dl[0] : 1;
    g->dw = dl ? dl[sp - 1] : 1;
    if (g->sh < 1 || g->sw < 1 || g->dh < 1 || g->dw < 1) return vx_fail(ctx, VX_ESHAPE, "Conv: strides and dilations must be >= 1");
    const char *ap = vxk_attr_string(run, "auto_pad", "NOTSET");
    int64_t eh = (g->kh - 1) * g->dh + 1, ew = (g->kw - 1) * g->dw + 1;
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        bool up = !strcmp(ap, "SAME_UPPER");
        g->ph = same_pad_begin(g->H, g->kh, g->sh, g->dh, up, &g->Ho);
        g->pw = same_pad_begin(g->W, g->kw, g->sw, g->dw, up, &g->Wo);
    } else if (!strcmp(ap, "VALID") || !strcmp(ap, "NOTSET") || !strcmp(ap, "")) {
        int64_t pe_h = 0, pe_w = 0;
        if (strcmp(ap, "VALID")) {
            const int64_t *pads = vxk_attr_ints(run, "pads", &n);
            if (pads && n != 2 * sp) return vx_fail(ctx, VX_ESHAPE, "Conv: pads has %lld entries", (long long)n);
            if (pads) {
                g->ph = sp == 2 ? pads[0] : 0;
                g->pw = pads[sp - 1];
                pe_h = sp == 2 ? pads[2] : 0;
                pe_w = pads[2 * sp - 1];
            }
        }
        if (g->ph < 0 || g->pw < 0 || pe_h < 0 || pe_w < 0) return vx_fail(ctx, VX_EUNSUPPORTED, "Conv: negative pads");
        g->Ho = (g->H + g->ph + pe_h - eh) / g->sh + 1;
        g->Wo = (g->W + g->pw + pe_w - ew) / g->sw + 1;
        if (g->H + g->ph + pe_h < eh || g->W + g->pw + pe_w < ew) return vx_fail(ctx, VX_ESHAPE, "Conv: kernel larger than padded input");
    } else {
        return vx_fail(ctx, VX_EUNSUPPORTED, "Conv: auto_pad %s", ap);
    }
    if (!vxk_gemm_fits(g->Mg, g->Ho * g->Wo, g->Cg * g->kh * g->kw)) return vx_fail(ctx, VX_EUNSUPPORTED, "Conv: too large for cuBLAS");
    return VX_OK;
}

static bool conv_is_1x1(const conv_geom *g) {
    return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 && g->Ho == g->H && g->Wo == g->W;
}

/* Samples per chunk: the column workspace stays under the output's size. */
static int64_t conv_chunk(const conv_geom *g) {
    int64_t per = g->C * g->kh * g->kw * g->Ho * g->Wo;
    int64_t out = g->N * g->M * g->Ho * g->Wo;
    int64_t nb = per > 0 ? out / per : g->N;
    if (nb < 1) nb = 1;
    if (nb > g->N) nb = g->N;
    return nb;
}

/* col (nb, C*kh*kw, Ho*Wo) of samples [n0, n0+nb). */
static __global__ void im2col_kernel(float *col, const float *x, conv_geom g, int64_t nb) {
    int64_t P = g.Ho * g.Wo, total = nb * g.C * g.kh * g.kw * P;
    VXK_LOOP(i, total) {
        int64_t ow = i % g.Wo, t = i / g.Wo;
        int64_t oh = t % g.Ho; t /= g.Ho;
        int64_t kw_ = t % g.kw; t /= g.kw;
        int64_t kh_ = t % g.kh; t /= g.kh;
        int64_t c = t % g.C, n = t / g.C;
        int64_t h = oh * g.sh - g.ph + kh_ * g.dh, w = ow * g.sw - g.pw + kw_ * g.dw;
        col[i] = (h >= 0 && h < g.H && w >= 0 && w < g.W) ? x[((n * g.C + c) * g.H + h) * g.W + w] : 0.f;
    }
}

/* dx of samples [n0, n0+nb) = col2im(dcol): each input element gathers. */
static __global__ void col2im_kernel(float *dx, const float *dcol, conv_geom g, int64_t nb) {
    int64_t P = g.Ho * g.Wo, total = nb * g.C * g.H * g.W;
    VXK_LOOP(i, total) {
        int64_t w = i % g.W, t = i / g.W;
        int64_t h = t % g.H; t /= g.H;
        int64_t c = t % g.C, n = t / g.C;
        float acc = 0.f;
        for (int64_t a = 0; a < g.kh; a++) {
            int64_t oh = vxk_window_of(h, g.ph, a, g.dh, g.sh, g.Ho);
            if (oh < 0) continue;
            for (int64_t b = 0; b < g.kw; b++) {
                int64_t ow = vxk_window_of(w, g.pw, b, g.dw, g.sw, g.Wo);
                if (ow < 0) continue;
                acc += dcol[((n * g.C + c) * g.kh * g.kw + a * g.kw + b) * P + oh * g.Wo + ow];
            }
        }
        dx[i] = acc;
    }
}

static __global__ void bias_add_kernel(float *y, const float *b, int64_t M, int64_t P, int64_t total) {
    VXK_LOOP(i, total) y[i] += b[(i / P) % M];
}

/* ---- one input channel per group: direct kernels ---- */

static __global__ void dw_forward_kernel(float *y, const float *x, const float *w, const float *b, conv_geom g) {
    int64_t total = g.N * g.M * g.Ho * g.Wo;
    VXK_LOOP(i, total) {
        int64_t ow = i % g.Wo, t = i / g.Wo;
        int64_t oh = t % g.Ho; t /= g.Ho;
        int64_t m = t % g.M, n = t / g.M;
        int64_t c = m / g.Mg;
        const float *xp = x + (n * g.C + c) * g.H * g.W;
        const float *wp = w + m * g.kh * g.kw;
        float acc = b ? b[m] : 0.f;
        for (int64_t a = 0; a < g.kh; a++) {
            int64_t h = oh * g.sh - g.ph + a * g.dh;
            if (h < 0 || h >= g.H) continue;
            for (int64_t bb = 0; bb < g.kw; bb++) {
                int64_t ww = ow * g.sw - g.pw + bb * g.dw;
                if (ww < 0 || ww >= g.W) continue;
                acc += wp[a * g.kw + bb] * xp[h * g.W + ww];
            }
        }
        y[i] = acc;
    }
}

static __global__ void dw_dx_kernel(float *dx, const float *dy, const float *w, conv_geom g) {
    int64_t total = g.N * g.C * g.H * g.W;
    VXK_LOOP(i, total) {
        int64_t wx = i % g.W, t = i / g.W;
        int64_t h = t % g.H; t /= g.H;
        int64_t c = t % g.C, n = t / g.C;
        float acc = 0.f;
        for (int64_t j = 0; j < g.Mg; j++) {
            int64_t m = c * g.Mg + j;
            const float *dyp = dy + (n * g.M + m) * g.Ho * g.Wo;
            const float *wp = w + m * g.kh * g.kw;
            for (int64_t a = 0; a < g.kh; a++) {
                int64_t oh = vxk_window_of(h, g.ph, a, g.dh, g.sh, g.Ho);
                if (oh < 0) continue;
                for (int64_t b = 0; b < g.kw; b++) {
                    int64_t ow = vxk_window_of(wx, g.pw, b, g.dw, g.sw, g.Wo);
                    if (ow < 0) continue;
                    acc += wp[a * g.kw + b] * dyp[oh * g.Wo + ow];
                }
            }
        }
        dx[i] = acc;
    }
}

/* One block per weight element, reducing over (N, Ho, Wo). */
static __global__ void dw_dw_kernel(float *dw, const float *dy, const float *x, conv_geom g) {
    __shared__ float sh[VXK_THREADS];
    int64_t nw = g.M * g.kh * g.kw, P = g.Ho * g.Wo;
    for (int64_t e = blockIdx.x; e < nw; e += gridDim.x) {
        int64_t b = e % g.kw, a = (e / g.kw) % g.kh, m = e / (g.kw * g.kh);
        int64_t c = m / g.Mg;
        float acc = 0.f;
        for (int64_t j = threadIdx.x; j < g.N * P; j += blockDim.x) {
            int64_t n = j / P, p = j % P;
            int64_t oh = p / g.Wo, ow = p % g.Wo;
            int64_t h = oh * g.sh - g.ph + a * g.dh, w = ow * g.sw - g.pw + b * g.dw;
            if (h >= 0 && h < g.H && w >= 0 && w < g.W)
                acc += dy[(n * g.M + m) * P + p] * x[((n * g.C + c) * g.H + h) * g.W + w];
        }
        sh[threadIdx.x] = acc;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
            __syncthreads();
        }
        if (threadIdx.x == 0) dw[e] = sh[0];
        __syncthreads();
    }
}

static vx_status conv_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "Conv needs X and W");
    const vx_tensor *X = run->in[0], *Wt = run->in[1];
    const vx_tensor *Bt = vxk_has_in(run, 2) ? run->in[2] : NULL;
    if (X->dtype != VX_F32 || Wt->dtype != VX_F32 || (Bt && Bt->dtype != VX_F32))
        return vx_fail(ctx, VX_EUNSUPPORTED, "Conv: float32 only");
    conv_geom g;
    vx_status st = conv_geom_make(ctx, run, X, Wt, &g);
    if (st) return st;
    if (Bt && Bt->numel != g.M) return vx_fail(ctx, VX_ESHAPE, "Conv: B has %lld elements, expected %lld", (long long)Bt->numel, (long long)g.M);
    int64_t yd[4] = {g.N, g.M, g.Ho, g.Wo};
    if (g.sp == 1) yd[2] = g.Wo;
    if ((st = vxk_new_out(ctx, run, 0, VX_F32, X->rank, yd))) return st;
    float *Y = (float *)run->out[0]->data;
    const float *x = (const float *)X->data, *w = (const float *)Wt->data, *b = Bt ? (const float *)Bt->data : NULL;
    cudaStream_t s = vxk_stream(ctx);
    int64_t P = g.Ho * g.Wo, Q = g.Cg * g.kh * g.kw, ytotal = g.N * g.M * P;
    if (ytotal == 0) return VX_OK;
    if (g.Cg == 1) {
        dw_forward_kernel<<<vxk_blocks(ytotal), VXK_THREADS, 0, s>>>(Y, x, w, b, g);
        return vxk_check(ctx, "Conv depthwise");
    }
    bool direct = conv_is_1x1(&g);
    int64_t nb = conv_chunk(&g);
    float *col = NULL;
    if (!direct) {
        col = (float *)vx_workspace(ctx, (size_t)(nb * g.C * g.kh * g.kw * P) * sizeof(float));
        if (!col) return vxk_oom(ctx, "Conv im2col workspace");
    }
    cublasHandle_t h = vxk_blas(ctx);
    for (int64_t n0 = 0; n0 < g.N && !st; n0 += nb) {
        int64_t cnt = g.N - n0 < nb ? g.N - n0 : nb;
        const float *cb;
        if (direct) cb = x + n0 * g.C * P;
        else {
            im2col_kernel<<<vxk_blocks(cnt * g.C * g.kh * g.kw * P), VXK_THREADS, 0, s>>>(col, x + n0 * g.C * g.H * g.W, g, cnt);
            if ((st = vxk_check(ctx, "Conv im2col"))) break;
            cb = col;
        }
        for (int64_t gi = 0; gi < g.G && !st; gi++)
            st = vxk_blas_check(ctx, vxk_gemm_strided(h, false, false, g.Mg, P, Q, 1.f, w + gi * g.Mg * Q, Q, 0,
                                                      cb + gi * Q * P, P, g.C * g.kh * g.kw * P, 0.f,
                                                      Y + (n0 * g.M + gi * g.Mg) * P, P, g.M * P, cnt),
                                "Conv GEMM");
    }
    if (!st && b) {
        bias_add_kernel<<<vxk_blocks(ytotal), VXK_THREADS, 0, s>>>(Y, b, g.M, P, ytotal);
        st = vxk_check(ctx, "Conv bias");
    }
    vx_free(ctx, col);
    return st;
}

static vx_status conv_backward(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0], *Wt = run->in[1], *dYt = run->grad_out[0];
    if (!dYt) return VX_OK;
    conv_geom g;
    vx_status st = conv_geom_make(ctx, run, X, Wt, &g);
    if (st) return st;
    const float *x = (const float *)X->data, *w = (const float *)Wt->data, *dy = (const float *)dYt->data;
    cudaStream_t s = vxk_stream(ctx);
    cublasHandle_t h = vxk_blas(ctx);
    int64_t P = g.Ho * g.Wo, Q = g.Cg * g.kh * g.kw, CQ = g.C * g.kh * g.kw;
    bool need_dx = run->need_grad[0], need_dw = run->need_grad[1];
    bool need_db = run->n_in > 2 && run->need_grad[2] && vxk_has_in(run, 2);
    float *col = NULL;
    if (need_dx && (st = vxk_grad(ctx, run, 0))) goto fail;
    if (need_dw && (st = vxk_grad(ctx, run, 1))) goto fail;
    if (need_db) {
        if ((st = vxk_grad(ctx, run, 2))) goto fail;
        int64_t big[3] = {g.N, g.M, P}, small[2] = {g.M, 1};
        if ((st = vxk_reduce_to(ctx, (float *)run->grad_in[2]->data, 2, small, dy, 3, big, 1.f))) goto fail;
    }
    if (g.N * P == 0 || g.M == 0) {
        if (need_dx) st = vxk_zero(ctx, run->grad_in[0]->data, (size_t)X->numel * sizeof(float));
        if (!st && need_dw) st = vxk_zero(ctx, run->grad_in[1]->data, (size_t)Wt->numel * sizeof(float));
        if (st) goto fail;
        return VX_OK;
    }
    if (g.Cg == 1) {
        if (need_dx) {
            dw_dx_kernel<<<vxk_blocks(X->numel), VXK_THREADS, 0, s>>>((float *)run->grad_in[0]->data, dy, w, g);
            if ((st = vxk_check(ctx, "Conv depthwise dX"))) goto fail;
        }
        if (need_dw) {
            int64_t nw = Wt->numel;
            dw_dw_kernel<<<(unsigned)(nw < 65536 ? nw : 65536), VXK_THREADS, 0, s>>>((float *)run->grad_in[1]->data, dy, x, g);
            if ((st = vxk_check(ctx, "Conv depthwise dW"))) goto fail;
        }
        return VX_OK;
    }
    {
        bool direct = conv_is_1x1(&g);
        int64_t nb = conv_chunk(&g);
        if (!direct && (need_dx || need_dw)) {
            col = (float *)vx_workspace(ctx, (size_t)(nb * CQ * P) * sizeof(float));
            if (!col) { st = vxk_oom(ctx, "Conv backward workspace"); goto fail; }
        }
        if (need_dx) {
            float *dx = (float *)run->grad_in[0]->data;
            for (int64_t n0 = 0; n0 < g.N && !st; n0 += nb) {
                int64_t cnt = g.N - n0 < nb ? g.N - n0 : nb;
                float *dc = direct ? dx + n0 * g.C * P : col;
                for (int64_t gi = 0; gi < g.G && !st; gi++)
                    st = vxk_blas_check(ctx, vxk_gemm_strided(h, true, false, Q, P, g.Mg, 1.f, w + gi * g.Mg * Q, Q, 0,
                                                              dy + (n0 * g.M + gi * g.Mg) * P, P, g.M * P, 0.f,
                                                              dc + gi * Q * P, P, CQ * P, cnt),
                                        "Conv dX GEMM");
                if (!st && !direct) {
                    col2im_kernel<<<vxk_blocks(cnt * g.C * g.H * g.W), VXK_THREADS, 0, s>>>(dx + n0 * g.C * g.H * g.W, col, g, cnt);
                    st = vxk_check(ctx, "Conv col2im");
                }
            }
            if (st) goto fail;
        }
        if (need_dw) {
            float *dw = (float *)run->grad_in[1]->data;
            if ((st = vxk_zero(ctx, dw, (size_t)Wt->numel * sizeof(float)))) goto fail;
            for (int64_t n0 = 0; n0 < g.N && !st; n0 += nb) {
                int64_t cnt = g.N - n0 < nb ? g.N - n0 : nb;
                const float *cb;
                if (direct) cb = x + n0 * g.C * P;
                else {
                    im2col_kernel<<<vxk_blocks(cnt * CQ * P), VXK_THREADS, 0, s>>>(col, x + n0 * g.C * g.H * g.W, g, cnt);
                    if ((st = vxk_check(ctx, "Conv im2col"))) break;
                    cb = col;
                }
                for (int64_t n = 0; n < cnt && !st; n++)
                    for (int64_t gi = 0; gi < g.G && !st; gi++)
                        st = vxk_blas_check(ctx, vxk_gemm(h, false, true, g.Mg, Q, P, 1.f,
                                                          dy + ((n0 + n) * g.M + gi * g.Mg) * P, P,
                                                          cb + n * CQ * P + gi * Q * P, P, 1.f, dw + gi * g.Mg * Q, Q),
                                            "Conv dW GEMM");
            }
            if (st) goto fail;
        }
    }
    vx_free(ctx, col);
    return VX_OK;
fail:
    vx_free(ctx, col);
    return st;
}

extern "C" {
const vx_op vx_ops_conv[] = {
    {"Conv", conv_forward, conv_backward, VX_SLOT(0) | VX_SLOT(1), 0, false, 0, NULL},
};
const size_t vx_ops_conv_count = sizeof vx_ops_conv / sizeof vx_ops_conv[0];
}
