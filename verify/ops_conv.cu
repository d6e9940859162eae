/*
 * ops_conv.cu: Conv and ConvTranspose (1-D, 2-D and 3-D), forward and backward.
 *
 * General groups: im2col into a workspace then, per group, a strided batched
 * GEMM over the samples of a chunk. The batch runs in chunks so the column
 * workspace stays about the size of the output (at least one sample). A 1x1
 * convolution with unit stride and no padding reads X directly (no im2col).
 * One input channel per group (depthwise, or C == 1) runs direct kernels.
 *
 * The columns keep each chunk's samples inside each row, (C*KK, nb, P), so
 * that a group's columns of the whole chunk are one matrix.
 *
 * Backward: dX = col2im(W_g^T * dY_g) (a gather, no atomics); dW = sum over
 * chunks of dY_g * col_g^T, one product per chunk and group, on a copy of
 * the chunk's dY with its samples inside each channel (M, nb, P), a second
 * workspace (1x1 convs: a product per sample, on X and dY as they are);
 * dB = sum of dY over (N, spatial). saves X and W (one formula in PyTorch: both, whatever needs a
 * gradient).
 *
 * ConvTranspose (groups, strides, pads, output_padding, output_shape,
 * auto_pad, dilations) runs the same pieces the other way round: forward is
 * conv's dX (GEMM + col2im), dX is conv's forward (im2col + GEMM) and dW
 * conv's dW, with the same column workspace (chunked so it stays under X's
 * size). saves X and W, as Conv.
 *
 * The index kernels (im2col, col2im, depthwise) are in conv_kernels.cuh.
 */
#include "conv_kernels.cuh"

static int64_t same_pad_begin(int64_t in, int64_t k, int64_t s, int64_t d, bool upper, int64_t *out) {
    int64_t o = (in + s - 1) / s;
    int64_t total = (o - 1) * s + (k - 1) * d + 1 - in;
    if (total < 0) total = 0;
    *out = o;
    return upper ? total / 2 : total - total / 2;
}

/* An attribute list of one entry per spatial axis, right-aligned onto the
 * three axes (dflt before); false when its length is wrong. */
static bool axis_attr(const vx_run *run, const char *name, int sp, int64_t dflt, int64_t *v) {
    int64_t n;
    const int64_t *a = vxk_attr_ints(run, name, &n);
    if (a && n != sp) return false;
    for (int ax = 0; ax < AXES; ax++) v[ax] = a && ax >= AXES - sp ? a[ax - (AXES - sp)] : dflt;
    return true;
}

static vx_status conv_pads(vx_ctx *ctx, const vx_run *run, conv_geom *g) {
    const char *ap = vxk_attr_string(run, "auto_pad", "NOTSET");
    int sp = g->sp;
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        bool up = !strcmp(ap, "SAME_UPPER");
        for (int ax = 0; ax < AXES; ax++)
            g->pad[ax] = same_pad_begin(g->in[ax], g->k[ax], g->st[ax], g->dl[ax], up, &g->out[ax]);
        return VX_OK;
    }
    if (strcmp(ap, "VALID") && strcmp(ap, "NOTSET") && strcmp(ap, "")) return vx_fail(ctx, VX_EUNSUPPORTED, "Conv: auto_pad %s", ap);
    int64_t end[AXES] = {0, 0, 0};
    int64_t n;
    const int64_t *pads = strcmp(ap, "VALID") ? vxk_attr_ints(run, "pads", &n) : NULL;
    if (pads && n != 2 * sp) return vx_fail(ctx, VX_ESHAPE, "Conv: pads has %lld entries", (long long)n);
    for (int ax = 0; ax < AXES; ax++) {
        int j = ax - (AXES - sp);
        g->pad[ax] = pads && j >= 0 ? pads[j] : 0;
        end[ax] = pads && j >= 0 ? pads[sp + j] : 0;
        if (g->pad[ax] < 0 || end[ax] < 0) return vx_fail(ctx, VX_EUNSUPPORTED, "Conv: negative pads");
        int64_t extent = (g->k[ax] - 1) * g->dl[ax] + 1, padded = g->in[ax] + g->pad[ax] + end[ax];
        if (padded < extent) return vx_fail(ctx, VX_ESHAPE, "Conv: kernel larger than padded input");
        g->out[ax] = (padded - extent) / g->st[ax] + 1;
    }
    return VX_OK;
}

/* Per axis, the kernel's extent (from W, checked against kernel_shape)
 * and T's spatial size into dims: T is X for Conv (dims: g->in); for
 * ConvTranspose its input, the conv's output (dims: g->out). */
static vx_status conv_kernel_axes(vx_ctx *ctx, const vx_run *run, const vx_tensor *T, const vx_tensor *Wt, const char *op,
                                  int64_t *dims, conv_geom *g) {
    int64_t ks[AXES], n;
    for (int ax = 0; ax < AXES; ax++) {
        int j = ax - (AXES - g->sp);
        dims[ax] = j >= 0 ? T->dims[2 + j] : 1;
        g->k[ax] = j >= 0 ? Wt->dims[2 + j] : 1;
    }
    if (!axis_attr(run, "kernel_shape", g->sp, 1, ks)) return vx_fail(ctx, VX_ESHAPE, "%s: kernel_shape has the wrong length", op);
    if (vxk_attr_ints(run, "kernel_shape", &n))
        for (int ax = 0; ax < AXES; ax++)
            if (ks[ax] != g->k[ax]) return vx_fail(ctx, VX_ESHAPE, "%s: kernel_shape differs from W", op);
    return VX_OK;
}

/* Input pixels, kernel taps and output pixels per channel, from the axes. */
static void conv_sizes(conv_geom *g) {
    g->IS = g->in[0] * g->in[1] * g->in[2];
    g->KK = g->k[0] * g->k[1] * g->k[2];
    g->P = g->out[0] * g->out[1] * g->out[2];
}

static vx_status conv_geom_make(vx_ctx *ctx, const vx_run *run, const vx_tensor *X, const vx_tensor *Wt, conv_geom *g) {
    memset(g, 0, sizeof *g);
    if (X->rank < 3 || X->rank > 5)
        return vx_fail(ctx, VX_EUNSUPPORTED, "Conv: only 1-D, 2-D and 3-D convolutions (X rank %d)", X->rank);
    if (Wt->rank != X->rank) return vx_fail(ctx, VX_ESHAPE, "Conv: W rank %d differs from X rank %d", Wt->rank, X->rank);
    int sp = X->rank - 2;
    g->sp = sp;
    g->N = X->dims[0];
    g->C = X->dims[1];
    g->M = Wt->dims[0];
    g->G = vxk_attr_int(run, "group", 1);
    if (g->G < 1 || g->C % g->G || g->M % g->G) return vx_fail(ctx, VX_ESHAPE, "Conv: bad group %lld", (long long)g->G);
    g->Cg = g->C / g->G;
    g->Mg = g->M / g->G;
    if (Wt->dims[1] != g->Cg) return vx_fail(ctx, VX_ESHAPE, "Conv: W has %lld input channels, expected %lld",
                                             (long long)Wt->dims[1], (long long)g->Cg);
    vx_status st = conv_kernel_axes(ctx, run, X, Wt, "Conv", g->in, g);
    if (st) return st;
    if (!axis_attr(run, "strides", sp, 1, g->st)) return vx_fail(ctx, VX_ESHAPE, "Conv: strides has the wrong length");
    if (!axis_attr(run, "dilations", sp, 1, g->dl)) return vx_fail(ctx, VX_ESHAPE, "Conv: dilations has the wrong length");
    for (int ax = 0; ax < AXES; ax++)
        if (g->st[ax] < 1 || g->dl[ax] < 1) return vx_fail(ctx, VX_ESHAPE, "Conv: strides and dilations must be >= 1");
    if ((st = conv_pads(ctx, run, g))) return st;
    conv_sizes(g);
    if (!vxk_gemm_fits(g->Mg, g->P, g->Cg * g->KK)) return vx_fail(ctx, VX_EUNSUPPORTED, "Conv: too large for cuBLAS");
    return VX_OK;
}

static bool conv_is_1x1(const conv_geom *g) {
    for (int ax = 0; ax < AXES; ax++)
        if (g->k[ax] != 1 || g->st[ax] != 1 || g->pad[ax] != 0 || g->out[ax] != g->in[ax]) return false;
    return true;
}

/* Columns a chunk may hold whatever the output's size: 16M elements (64
 * MiB), so that a conv with few output channels (DenseNet's 3x3 convs,
 * 128 -> 32) runs a few large products instead of one per sample.
 * layers/conv.c (VERIFY_COL_FLOOR) counts the same. */
#define COL_FLOOR ((int64_t)16 << 20)

/* Samples per chunk: the column workspace stays under the output's size,
 * or COL_FLOOR when that is larger. */
static int64_t conv_chunk(const conv_geom *g) {
    int64_t per = g->C * g->KK * g->P;
    int64_t out = g->N * g->M * g->P;
    if (out < COL_FLOOR) out = COL_FLOOR;
    int64_t nb = per > 0 ? out / per : g->N;
    if (nb < 1) nb = 1;
    if (nb > g->N) nb = g->N;
    return nb;
}

template <typename T> static vx_status conv_forward_t(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "Conv needs X and W");
    const vx_tensor *X = run->in[0], *Wt = run->in[1];
    const vx_tensor *Bt = vxk_has_in(run, 2) ? run->in[2] : NULL;
    if (Wt->dtype != X->dtype || (Bt && Bt->dtype != X->dtype))
        return vx_fail(ctx, VX_EUNSUPPORTED, "Conv: inputs of different dtypes");
    conv_geom g;
    vx_status st = conv_geom_make(ctx, run, X, Wt, &g);
    if (st) return st;
    if (Bt && Bt->numel != g.M) return vx_fail(ctx, VX_ESHAPE, "Conv: B has %lld elements, expected %lld", (long long)Bt->numel, (long long)g.M);
    int64_t yd[2 + AXES] = {g.N, g.M};
    for (int j = 0; j < g.sp; j++) yd[2 + j] = g.out[AXES - g.sp + j];
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, yd))) return st;
    T *Y = (T *)run->out[0]->data;
    const T *x = (const T *)X->data, *w = (const T *)Wt->data, *b = Bt ? (const T *)Bt->data : NULL;
    cudaStream_t s = vxk_stream(ctx);
    int64_t P = g.P, Q = g.Cg * g.KK, ytotal = g.N * g.M * P;
    if (ytotal == 0) return VX_OK;
    if (g.Cg == 1) {
        conv_dw_forward(&g, s, Y, x, w, b);
        return vxk_check(ctx, "Conv depthwise");
    }
    bool direct = conv_is_1x1(&g);
    int64_t nb = conv_chunk(&g);
    T *col = NULL;
    if (!direct) {
        col = (T *)vx_workspace(ctx, (size_t)(nb * g.C * g.KK * P) * sizeof(T));
        if (!col) return vxk_oom(ctx, "Conv im2col workspace");
    }
    cublasHandle_t h = vxk_conv_blas(ctx);
    /* X itself (1x1) or the columns: sample n, group gi at B + n * sN + gi * Cg * sC, rows sT apart */
    col_layout l = direct ? (col_layout){g.C * P, P, P} : col_by_row(&g, nb);
    for (int64_t n0 = 0; n0 < g.N && !st; n0 += nb) {
        int64_t cnt = g.N - n0 < nb ? g.N - n0 : nb;
        const T *cb;
        if (direct) cb = x + n0 * g.C * P;
        else {
            conv_im2col(&g, cnt, l, s, col, x + n0 * g.C * g.IS);
            if ((st = vxk_check(ctx, "Conv im2col"))) break;
            vx_profile_section(ctx, "Conv im2col");
            cb = col;
        }
        for (int64_t gi = 0; gi < g.G && !st; gi++)
            st = vxk_blas_check(ctx, vxk_gemm_strided(h, false, false, g.Mg, P, Q, 1.f, w + gi * g.Mg * Q, Q, 0,
                                                      cb + gi * g.Cg * l.sC, l.sT, l.sN, 0.f,
                                                      Y + (n0 * g.M + gi * g.Mg) * P, P, g.M * P, cnt),
                                "Conv GEMM");
        vx_profile_section(ctx, "Conv GEMM");
    }
    if (!st && b) {
        bias_add_kernel<T><<<vxk_blocks(ytotal), VXK_THREADS, 0, s>>>(Y, b, g.M, P, ytotal);
        st = vxk_check(ctx, "Conv bias");
    }
    vx_free(ctx, col);
    return st;
}

static vx_status conv_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "Conv needs X");
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "Conv", conv_forward_t<T>(ctx, run));
}

template <typename T> static vx_status conv_backward_t(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0], *Wt = run->in[1], *dYt = run->grad_out[0];
    if (!dYt) return VX_OK;
    conv_geom g;
    vx_status st = conv_geom_make(ctx, run, X, Wt, &g);
    if (st) return st;
    const T *x = (const T *)X->data, *w = (const T *)Wt->data, *dy = (const T *)dYt->data;
    cudaStream_t s = vxk_stream(ctx);
    cublasHandle_t h = vxk_conv_blas(ctx);
    int64_t P = g.P, Q = g.Cg * g.KK, CQ = g.C * g.KK;
    bool need_dx = run->need_grad[0], need_dw = run->need_grad[1];
    bool need_db = run->n_in > 2 && run->need_grad[2] && vxk_has_in(run, 2);
    T *col = NULL, *dyt = NULL;
    if (need_dx && (st = vxk_grad(ctx, run, 0))) goto fail;
    if (need_dw && (st = vxk_grad(ctx, run, 1))) goto fail;
    if (need_db) {
        if ((st = vxk_grad(ctx, run, 2))) goto fail;
        int64_t big[3] = {g.N, g.M, P}, small[2] = {g.M, 1};
        if ((st = vxk_reduce_to(ctx, (T *)run->grad_in[2]->data, 2, small, dy, 3, big, 1.f))) goto fail;
    }
    if (g.N * P == 0 || g.M == 0) {
        if (need_dx) st = vxk_zero(ctx, run->grad_in[0]->data, (size_t)X->numel * sizeof(T));
        if (!st && need_dw) st = vxk_zero(ctx, run->grad_in[1]->data, (size_t)Wt->numel * sizeof(T));
        if (st) goto fail;
        return VX_OK;
    }
    if (g.Cg == 1) {
        if (need_dx) {
            conv_dw_dx(&g, s, (T *)run->grad_in[0]->data, dy, w);
            if ((st = vxk_check(ctx, "Conv depthwise dX"))) goto fail;
        }
        if (need_dw) {
            conv_dw_dw(&g, s, (T *)run->grad_in[1]->data, dy, x);
            if ((st = vxk_check(ctx, "Conv depthwise dW"))) goto fail;
        }
        return VX_OK;
    }
    {
        bool direct = conv_is_1x1(&g);
        int64_t nb = conv_chunk(&g);
        col_layout l = direct ? (col_layout){g.C * P, P, P} : col_by_row(&g, nb);
        if (!direct && (need_dx || need_dw)) {
            col = (T *)vx_workspace(ctx, (size_t)(nb * CQ * P) * sizeof(T));
            if (!col) { st = vxk_oom(ctx, "Conv backward workspace"); goto fail; }
        }
        if (!direct && need_dw) {
            dyt = (T *)vx_workspace(ctx, (size_t)(nb * g.M * P) * sizeof(T));
            if (!dyt) { st = vxk_oom(ctx, "Conv backward workspace"); goto fail; }
        }
        if (need_dx) {
            T *dx = (T *)run->grad_in[0]->data;
            for (int64_t n0 = 0; n0 < g.N && !st; n0 += nb) {
                int64_t cnt = g.N - n0 < nb ? g.N - n0 : nb;
                T *dc = direct ? dx + n0 * g.C * P : col;
                for (int64_t gi = 0; gi < g.G && !st; gi++)
                    st = vxk_blas_check(ctx, vxk_gemm_strided(h, true, false, Q, P, g.Mg, 1.f, w + gi * g.Mg * Q, Q, 0,
                                                              dy + (n0 * g.M + gi * g.Mg) * P, P, g.M * P, 0.f,
                                                              dc + gi * g.Cg * l.sC, l.sT, l.sN, cnt),
                                        "Conv dX GEMM");
                vx_profile_section(ctx, "Conv dX GEMM");
                if (!st && !direct) {
                    conv_col2im(&g, cnt, l, s, dx + n0 * g.C * g.IS, col);
                    st = vxk_check(ctx, "Conv col2im");
                    vx_profile_section(ctx, "Conv col2im");
                }
            }
            if (st) goto fail;
        }
        if (need_dw) {
            T *dw = (T *)run->grad_in[1]->data;
            if ((st = vxk_zero(ctx, dw, (size_t)Wt->numel * sizeof(T)))) goto fail;
            for (int64_t n0 = 0; n0 < g.N && !st; n0 += nb) {
                int64_t cnt = g.N - n0 < nb ? g.N - n0 : nb;
                if (direct) { /* X itself: a product per sample */
                    for (int64_t n = 0; n < cnt && !st; n++)
                        for (int64_t gi = 0; gi < g.G && !st; gi++)
                            st = vxk_blas_check(ctx, vxk_gemm(h, false, true, g.Mg, Q, P, 1.f,
                                                              dy + ((n0 + n) * g.M + gi * g.Mg) * P, P,
                                                              x + (n0 + n) * g.C * P + gi * Q * P, P, 1.f,
                                                              dw + gi * g.Mg * Q, Q),
                                                "Conv dW GEMM");
                    continue;
                }
                conv_im2col(&g, cnt, l, s, col, x + n0 * g.C * g.IS);
                conv_samples_inner(&g, cnt, s, dyt, dy + n0 * g.M * P);
                if ((st = vxk_check(ctx, "Conv im2col"))) break;
                vx_profile_section(ctx, "Conv im2col");
                /* dW_g += dY_g (Mg x cnt*P) col_g^T: the chunk's samples in one product */
                for (int64_t gi = 0; gi < g.G && !st; gi++)
                    st = vxk_blas_check(ctx, vxk_gemm(h, false, true, g.Mg, Q, cnt * P, 1.f, dyt + gi * g.Mg * cnt * P,
                                                      cnt * P, col + gi * g.Cg * l.sC, l.sT, 1.f, dw + gi * g.Mg * Q, Q),
                                        "Conv dW GEMM");
                vx_profile_section(ctx, "Conv dW GEMM");
            }
            if (st) goto fail;
        }
    }
    vx_free(ctx, dyt);
    vx_free(ctx, col);
    return VX_OK;
fail:
    vx_free(ctx, dyt);
    vx_free(ctx, col);
    return st;
}

static vx_status conv_backward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "Conv needs X");
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "Conv", conv_backward_t<T>(ctx, run));
}

/* ---- ConvTranspose --------------------------------------------------------------- */

/* ConvTranspose is the data gradient of the conv that maps Y back to X: the
 * geometry here is that conv's (its input Y: in[], IS, C = W.dims[1] * group;
 * its output X: out[], P, M = X's channels), so W (C_X, M/group, k...) is
 * that conv's weight as it stands and the kernels above serve unchanged:
 * forward = GEMM W_g^T X_g + col2im (conv's dX), dX = im2col(dY) + GEMM
 * (conv's forward), dW = X_g im2col(dY)_g^T (conv's dW). */
static vx_status convt_geom_make(vx_ctx *ctx, const vx_run *run, const vx_tensor *X, const vx_tensor *Wt, conv_geom *g) {
    memset(g, 0, sizeof *g);
    if (X->rank < 3 || X->rank > 5)
        return vx_fail(ctx, VX_EUNSUPPORTED, "ConvTranspose: only 1-D, 2-D and 3-D (X rank %d)", X->rank);
    if (Wt->rank != X->rank) return vx_fail(ctx, VX_ESHAPE, "ConvTranspose: W rank %d differs from X rank %d", Wt->rank, X->rank);
    int sp = X->rank - 2;
    g->sp = sp;
    g->N = X->dims[0];
    g->M = X->dims[1];
    g->G = vxk_attr_int(run, "group", 1);
    if (Wt->dims[0] != g->M) return vx_fail(ctx, VX_ESHAPE, "ConvTranspose: W has %lld input channels, X %lld",
                                            (long long)Wt->dims[0], (long long)g->M);
    if (g->G < 1 || g->M % g->G) return vx_fail(ctx, VX_ESHAPE, "ConvTranspose: bad group %lld", (long long)g->G);
    g->Cg = Wt->dims[1];
    g->C = g->Cg * g->G;
    g->Mg = g->M / g->G;
    int64_t op[AXES], n;
    vx_status st = conv_kernel_axes(ctx, run, X, Wt, "ConvTranspose", g->out, g);
    if (st) return st;
    if (!axis_attr(run, "strides", sp, 1, g->st) || !axis_attr(run, "dilations", sp, 1, g->dl) ||
        !axis_attr(run, "output_padding", sp, 0, op))
        return vx_fail(ctx, VX_ESHAPE, "ConvTranspose: strides, dilations or output_padding has the wrong length");
    const char *ap = vxk_attr_string(run, "auto_pad", "NOTSET");
    bool same = !strncmp(ap, "SAME", 4), upper = !strcmp(ap, "SAME_UPPER");
    if (!same && strcmp(ap, "VALID") && strcmp(ap, "NOTSET") && strcmp(ap, ""))
        return vx_fail(ctx, VX_EUNSUPPORTED, "ConvTranspose: auto_pad %s", ap);
    const int64_t *pads = same || !strcmp(ap, "VALID") ? NULL : vxk_attr_ints(run, "pads", &n);
    if (pads && n != 2 * sp) return vx_fail(ctx, VX_ESHAPE, "ConvTranspose: pads has %lld entries", (long long)n);
    const int64_t *oshape = vxk_attr_ints(run, "output_shape", &n);
    if (oshape && n < sp) return vx_fail(ctx, VX_ESHAPE, "ConvTranspose: output_shape has %lld entries", (long long)n);
    if (oshape) oshape += n - sp; /* (N, C, spatial) or spatial only */
    for (int ax = 0; ax < AXES; ax++) {
        int j = ax - (AXES - sp);
        if (g->st[ax] < 1 || g->dl[ax] < 1 || op[ax] < 0)
            return vx_fail(ctx, VX_ESHAPE, "ConvTranspose: strides and dilations must be >= 1");
        int64_t full = g->st[ax] * (g->out[ax] - 1) + op[ax] + (g->k[ax] - 1) * g->dl[ax] + 1;
        if (j < 0) { g->in[ax] = 1; continue; }
        if (oshape || same) { /* the pads follow from the wanted size */
            g->in[ax] = oshape ? oshape[j] : g->out[ax] * g->st[ax];
            int64_t total = full - g->in[ax];
            /* a larger output_shape than the full extent pads at the end, as output_padding */
            g->pad[ax] = total < 0 ? 0 : upper ? total / 2 : total - total / 2;
        } else {
            g->pad[ax] = pads ? pads[j] : 0;
            g->in[ax] = full - g->pad[ax] - (pads ? pads[sp + j] : 0);
        }
        if (g->pad[ax] < 0) return vx_fail(ctx, VX_EUNSUPPORTED, "ConvTranspose: negative pads");
        if (g->in[ax] < 1) return vx_fail(ctx, VX_ESHAPE, "ConvTranspose: output dim %d would be %lld", 2 + j, (long long)g->in[ax]);
    }
    conv_sizes(g);
    if (!vxk_gemm_fits(g->Cg * g->KK, g->P, g->Mg)) return vx_fail(ctx, VX_EUNSUPPORTED, "ConvTranspose: too large for cuBLAS");
    return VX_OK;
}

template <typename T> static vx_status convt_forward_t(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "ConvTranspose needs X and W");
    const vx_tensor *X = run->in[0], *Wt = run->in[1];
    const vx_tensor *Bt = vxk_has_in(run, 2) ? run->in[2] : NULL;
    if (Wt->dtype != X->dtype || (Bt && Bt->dtype != X->dtype))
        return vx_fail(ctx, VX_EUNSUPPORTED, "ConvTranspose: inputs of different dtypes");
    conv_geom g;
    vx_status st = convt_geom_make(ctx, run, X, Wt, &g);
    if (st) return st;
    if (Bt && Bt->numel != g.C)
        return vx_fail(ctx, VX_ESHAPE, "ConvTranspose: B has %lld elements, expected %lld", (long long)Bt->numel, (long long)g.C);
    int64_t yd[2 + AXES] = {g.N, g.C};
    for (int j = 0; j < g.sp; j++) yd[2 + j] = g.in[AXES - g.sp + j];
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, X->rank, yd))) return st;
    T *Y = (T *)run->out[0]->data;
    const T *x = (const T *)X->data, *w = (const T *)Wt->data;
    cudaStream_t s = vxk_stream(ctx);
    int64_t P = g.P, Q = g.Cg * g.KK, CQ = g.C * g.KK, ytotal = g.N * g.C * g.IS;
    if (ytotal == 0) return VX_OK;
    if (P == 0 || g.M == 0) {
        st = vxk_zero(ctx, Y, (size_t)ytotal * sizeof(T));
    } else if (g.Cg == 1) {
        conv_dw_dx(&g, s, Y, x, w);
        st = vxk_check(ctx, "ConvTranspose depthwise");
    } else {
        bool direct = conv_is_1x1(&g);
        int64_t nb = conv_chunk(&g);
        T *col = NULL;
        if (!direct && !(col = (T *)vx_workspace(ctx, (size_t)(nb * CQ * P) * sizeof(T))))
            return vxk_oom(ctx, "ConvTranspose column workspace");
        cublasHandle_t h = vxk_conv_blas(ctx);
        for (int64_t n0 = 0; n0 < g.N && !st; n0 += nb) {
            int64_t cnt = g.N - n0 < nb ? g.N - n0 : nb;
            T *dc = direct ? Y + n0 * g.C * P : col;
            for (int64_t gi = 0; gi < g.G && !st; gi++)
                st = vxk_blas_check(ctx, vxk_gemm_strided(h, true, false, Q, P, g.Mg, 1.f, w + gi * g.Mg * Q, Q, 0,
                                                          x + (n0 * g.M + gi * g.Mg) * P, P, g.M * P, 0.f,
                                                          dc + gi * Q * P, P, CQ * P, cnt),
                                    "ConvTranspose GEMM");
            if (!st && !direct) {
                conv_col2im(&g, cnt, col_by_sample(&g), s, Y + n0 * g.C * g.IS, col);
                st = vxk_check(ctx, "ConvTranspose col2im");
            }
        }
        vx_free(ctx, col);
    }
    if (!st && Bt) {
        bias_add_kernel<T><<<vxk_blocks(ytotal), VXK_THREADS, 0, s>>>(Y, (const T *)Bt->data, g.C, g.IS, ytotal);
        st = vxk_check(ctx, "ConvTranspose bias");
    }
    return st;
}

static vx_status convt_forward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "ConvTranspose needs X");
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "ConvTranspose", convt_forward_t<T>(ctx, run));
}

template <typename T> static vx_status convt_backward_t(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0], *Wt = run->in[1], *dYt = run->grad_out[0];
    if (!dYt) return VX_OK;
    conv_geom g;
    vx_status st = convt_geom_make(ctx, run, X, Wt, &g);
    if (st) return st;
    const T *x = (const T *)X->data, *w = (const T *)Wt->data, *dy = (const T *)dYt->data;
    cudaStream_t s = vxk_stream(ctx);
    cublasHandle_t h = vxk_conv_blas(ctx);
    int64_t P = g.P, Q = g.Cg * g.KK, CQ = g.C * g.KK;
    bool need_dx = run->need_grad[0], need_dw = run->need_grad[1];
    bool need_db = run->n_in > 2 && run->need_grad[2] && vxk_has_in(run, 2);
    T *col = NULL, *dx = NULL, *dw = NULL;
    if (need_dx && (st = vxk_grad(ctx, run, 0))) return st;
    if (need_dw && (st = vxk_grad(ctx, run, 1))) return st;
    if (need_dx) dx = (T *)run->grad_in[0]->data;
    if (need_dw) dw = (T *)run->grad_in[1]->data;
    if (need_db) {
        if ((st = vxk_grad(ctx, run, 2))) return st;
        int64_t big[3] = {g.N, g.C, g.IS}, small[2] = {g.C, 1};
        if ((st = vxk_reduce_to(ctx, (T *)run->grad_in[2]->data, 2, small, dy, 3, big, 1.f))) return st;
    }
    if (dw && (st = vxk_zero(ctx, dw, (size_t)Wt->numel * sizeof(T)))) return st;
    if (g.N * P == 0 || g.C == 0 || (!dx && !dw)) {
        if (dx) st = vxk_zero(ctx, dx, (size_t)X->numel * sizeof(T));
        return st;
    }
    if (g.Cg == 1) {
        if (dx) conv_dw_forward<T>(&g, s, dx, dy, w, NULL);
        if (dw) conv_dw_dw(&g, s, dw, x, dy);
        return vxk_check(ctx, "ConvTranspose depthwise backward");
    }
    bool direct = conv_is_1x1(&g);
    int64_t nb = conv_chunk(&g);
    if (!direct && !(col = (T *)vx_workspace(ctx, (size_t)(nb * CQ * P) * sizeof(T))))
        return vxk_oom(ctx, "ConvTranspose backward workspace");
    /* one im2col of dY per chunk serves dX and dW */
    for (int64_t n0 = 0; n0 < g.N && !st; n0 += nb) {
        int64_t cnt = g.N - n0 < nb ? g.N - n0 : nb;
        const T *cb;
        if (direct) cb = dy + n0 * g.C * P;
        else {
            conv_im2col(&g, cnt, col_by_sample(&g), s, col, dy + n0 * g.C * g.IS);
            if ((st = vxk_check(ctx, "ConvTranspose im2col"))) break;
            cb = col;
        }
        for (int64_t gi = 0; dx && gi < g.G && !st; gi++)
            st = vxk_blas_check(ctx, vxk_gemm_strided(h, false, false, g.Mg, P, Q, 1.f, w + gi * g.Mg * Q, Q, 0,
                                                      cb + gi * Q * P, P, CQ * P, 0.f, dx + (n0 * g.M + gi * g.Mg) * P, P,
                                                      g.M * P, cnt),
                                "ConvTranspose dX GEMM");
        for (int64_t n = 0; dw && n < cnt && !st; n++)
            for (int64_t gi = 0; gi < g.G && !st; gi++)
                st = vxk_blas_check(ctx, vxk_gemm(h, false, true, g.Mg, Q, P, 1.f, x + ((n0 + n) * g.M + gi * g.Mg) * P, P,
                                                  cb + n * CQ * P + gi * Q * P, P, 1.f, dw + gi * g.Mg * Q, Q),
                                    "ConvTranspose dW GEMM");
    }
    vx_free(ctx, col);
    return st;
}

static vx_status convt_backward(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0)) return vx_fail(ctx, VX_ESHAPE, "ConvTranspose needs X");
    VXK_FLOAT_DISPATCH(ctx, run->in[0]->dtype, "ConvTranspose", convt_backward_t<T>(ctx, run));
}

extern "C" {
const vx_op vx_ops_conv[] = {
    {"Conv", conv_forward, conv_backward, VX_SLOT(0) | VX_SLOT(1), 0, false, 0, NULL, 0, VX_HALF},
    /* convolution_backward with transposed = true: X and W as Conv */
    {"ConvTranspose", convt_forward, convt_backward, VX_SLOT(0) | VX_SLOT(1), 0, false, 0, NULL, 0, VX_HALF},
};
const size_t vx_ops_conv_count = sizeof vx_ops_conv / sizeof vx_ops_conv[0];
}
