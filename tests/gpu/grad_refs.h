/* grad_refs.h: test_grad.cu's host references: matmul, Gemm, Conv (2-D and
 * 3-D), Attention, Softmax, LayerNormalization, BatchNormalization, pooling,
 * ReduceMean, Transpose, Gather and the recurrent layers, in plain loops
 * over float32. Included by test_grad.cu after its scaffolding. */

static HT mk(std::vector<int64_t> d) { HT t; t.dims = d; t.f.assign(t.numel(), 0.f); return t; }

static HT ref_matmul(const HT &A, const HT &B) {
    /* numpy matmul */
    std::vector<int64_t> ad = A.dims, bd = B.dims;
    bool a1 = ad.size() == 1, b1 = bd.size() == 1;
    if (a1) ad.insert(ad.begin(), 1);
    if (b1) bd.push_back(1);
    int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
    size_t L = std::max(ad.size(), bd.size()) - 2;
    std::vector<int64_t> ab(L, 1), bb(L, 1), ob(L);
    for (size_t i = 0; i < ad.size() - 2; i++) ab[L - (ad.size() - 2) + i] = ad[i];
    for (size_t i = 0; i < bd.size() - 2; i++) bb[L - (bd.size() - 2) + i] = bd[i];
    int64_t nb = 1;
    for (size_t i = 0; i < L; i++) { ob[i] = std::max(ab[i], bb[i]); nb *= ob[i]; }
    std::vector<int64_t> od = ob;
    if (!a1) od.push_back(M);
    if (!b1) od.push_back(N);
    HT Y = mk(od);
    for (int64_t b = 0; b < nb; b++) {
        int64_t rem = b, ao = 0, bo = 0, as = 1, bs = 1;
        for (int i = (int)L - 1; i >= 0; i--) {
            int64_t c = rem % ob[i]; rem /= ob[i];
            ao += (ab[i] == 1 ? 0 : c) * as; as *= ab[i];
            bo += (bb[i] == 1 ? 0 : c) * bs; bs *= bb[i];
        }
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) s += (double)A.f[ao * M * K + m * K + k] * B.f[bo * K * N + k * N + n];
                Y.f[b * M * N + m * N + n] = (float)s;
            }
    }
    return Y;
}

static HT ref_gemm(const HT &A, const HT &B, const HT *C, bool ta, bool tb, double alpha, double beta) {
    int64_t M = ta ? A.dims[1] : A.dims[0], K = ta ? A.dims[0] : A.dims[1], N = tb ? B.dims[0] : B.dims[1];
    HT Y = mk({M, N});
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (double)A.f[ta ? k * M + m : m * K + k] * B.f[tb ? n * K + k : k * N + n];
            double c = 0;
            if (C) {
                int r = (int)C->dims.size();
                int64_t cm = r == 2 ? C->dims[0] : 1, cn = r >= 1 ? C->dims[r - 1] : 1;
                c = C->f[(cm == 1 ? 0 : m) * cn + (cn == 1 ? 0 : n)];
            }
            Y.f[m * N + n] = (float)(alpha * s + beta * c);
        }
    return Y;
}

/* 2-D conv (1-D as H = 1) with explicit pads. */
static HT ref_conv(const HT &X, const HT &W, const HT *B, int64_t G, std::vector<int64_t> pads, std::vector<int64_t> st,
                   std::vector<int64_t> dl) {
    bool one = X.dims.size() == 3;
    int64_t N = X.dims[0], C = X.dims[1], H = one ? 1 : X.dims[2], Wd = X.dims.back();
    int64_t M = W.dims[0], Cg = W.dims[1], kh = one ? 1 : W.dims[2], kw = W.dims.back();
    int64_t ph = one ? 0 : pads[0], pw = one ? pads[0] : pads[1], peh = one ? 0 : pads[2], pew = one ? pads[1] : pads[3];
    int64_t sh = one ? 1 : st[0], sw = st.back(), dh = one ? 1 : dl[0], dw = dl.back();
    int64_t Ho = (H + ph + peh - ((kh - 1) * dh + 1)) / sh + 1, Wo = (Wd + pw + pew - ((kw - 1) * dw + 1)) / sw + 1;
    int64_t Mg = M / G;
    HT Y = one ? mk({N, M, Wo}) : mk({N, M, Ho, Wo});
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    double s = B ? B->f[m] : 0;
                    int64_t g = m / Mg;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t a = 0; a < kh; a++)
                            for (int64_t b = 0; b < kw; b++) {
                                int64_t h = oh * sh - ph + a * dh, w = ow * sw - pw + b * dw;
                                if (h < 0 || h >= H || w < 0 || w >= Wd) continue;
                                s += (double)W.f[((m * Cg + c) * kh + a) * kw + b] * X.f[((n * C + g * Cg + c) * H + h) * Wd + w];
                            }
                    Y.f[((n * M + m) * Ho + oh) * Wo + ow] = (float)s;
                }
    return Y;
}

/* 3-D convolution: pads {d, h, w} at both ends, strides {d, h, w}, dilation 1. */
static HT ref_conv3d(const HT &X, const HT &W, const HT *B, int64_t G, std::vector<int64_t> pad, std::vector<int64_t> st) {
    int64_t N = X.dims[0], C = X.dims[1], in[3] = {X.dims[2], X.dims[3], X.dims[4]};
    int64_t M = W.dims[0], Cg = W.dims[1], k[3] = {W.dims[2], W.dims[3], W.dims[4]}, o[3];
    for (int a = 0; a < 3; a++) o[a] = (in[a] + 2 * pad[a] - k[a]) / st[a] + 1;
    int64_t Mg = M / G;
    HT Y = mk({N, M, o[0], o[1], o[2]});
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t od = 0; od < o[0]; od++)
                for (int64_t oh = 0; oh < o[1]; oh++)
                    for (int64_t ow = 0; ow < o[2]; ow++) {
                        double s = B ? B->f[m] : 0;
                        int64_t g = m / Mg;
                        for (int64_t c = 0; c < Cg; c++)
                            for (int64_t a = 0; a < k[0]; a++)
                                for (int64_t b = 0; b < k[1]; b++)
                                    for (int64_t e = 0; e < k[2]; e++) {
                                        int64_t d = od * st[0] - pad[0] + a, h = oh * st[1] - pad[1] + b,
                                                w = ow * st[2] - pad[2] + e;
                                        if (d < 0 || d >= in[0] || h < 0 || h >= in[1] || w < 0 || w >= in[2]) continue;
                                        s += (double)W.f[(((m * Cg + c) * k[0] + a) * k[1] + b) * k[2] + e] *
                                             X.f[(((n * C + g * Cg + c) * in[0] + d) * in[1] + h) * in[2] + w];
                                    }
                        Y.f[(((n * M + m) * o[0] + od) * o[1] + oh) * o[2] + ow] = (float)s;
                    }
    return Y;
}

/* Attention: Q [B, Hq, Sq, D], K, V [B, Hk, Skv, *]; an optional float mask
 * (added, broadcast from [1, 1, Sq, Skv]); causal; dropout none. */
static HT ref_attention(const std::vector<HT> &in, bool causal) {
    const HT &Q = in[0], &K = in[1], &V = in[2];
    int64_t B = Q.dims[0], Hq = Q.dims[1], Sq = Q.dims[2], D = Q.dims[3], Hk = K.dims[1], Skv = K.dims[2], Dv = V.dims[3];
    bool mask = in.size() > 3 && !in[3].f.empty();
    double scale = 1 / sqrt((double)D);
    HT Y = mk({B, Hq, Sq, Dv});
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            int64_t kv = h / (Hq / Hk);
            for (int64_t q = 0; q < Sq; q++) {
                std::vector<double> s(Skv);
                double mx = -INFINITY;
                for (int64_t j = 0; j < Skv; j++) {
                    double v = 0;
                    for (int64_t d = 0; d < D; d++)
                        v += (double)Q.f[((b * Hq + h) * Sq + q) * D + d] * K.f[((b * Hk + kv) * Skv + j) * D + d];
                    v *= scale;
                    if (mask) v += in[3].f[q * Skv + j];
                    if (causal && j > q) v = -INFINITY; /* upper-left, as ONNX */
                    s[j] = v;
                    mx = std::max(mx, v);
                }
                double sum = 0;
                for (int64_t j = 0; j < Skv; j++) sum += s[j] = exp(s[j] - mx);
                for (int64_t e = 0; e < Dv; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < Skv; j++) acc += s[j] / sum * V.f[((b * Hk + kv) * Skv + j) * Dv + e];
                    Y.f[((b * Hq + h) * Sq + q) * Dv + e] = (float)acc;
                }
            }
        }
    return Y;
}

static HT ref_softmax(const HT &X, int axis, bool log_) {
    int r = (int)X.dims.size();
    if (axis < 0) axis += r;
    int64_t outer = 1, L = X.dims[axis], inner = 1;
    for (int i = 0; i < axis; i++) outer *= X.dims[i];
    for (int i = axis + 1; i < r; i++) inner *= X.dims[i];
    HT Y = mk(X.dims);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double m = -1e30, s = 0;
            for (int64_t j = 0; j < L; j++) m = std::max(m, (double)X.f[(o * L + j) * inner + i]);
            for (int64_t j = 0; j < L; j++) s += exp(X.f[(o * L + j) * inner + i] - m);
            for (int64_t j = 0; j < L; j++) {
                double v = X.f[(o * L + j) * inner + i] - m;
                Y.f[(o * L + j) * inner + i] = (float)(log_ ? v - log(s) : exp(v) / s);
            }
        }
    return Y;
}

static HT ref_layernorm(const HT &X, const HT &S, const HT *B, int axis, double eps) {
    int r = (int)X.dims.size();
    if (axis < 0) axis += r;
    int64_t rows = 1, D = 1;
    for (int i = 0; i < r; i++) (i < axis ? rows : D) *= X.dims[i];
    HT Y = mk(X.dims);
    for (int64_t o = 0; o < rows; o++) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < D; j++) m += X.f[o * D + j];
        m /= D;
        for (int64_t j = 0; j < D; j++) v += (X.f[o * D + j] - m) * (X.f[o * D + j] - m);
        v /= D;
        for (int64_t j = 0; j < D; j++)
            Y.f[o * D + j] = (float)((X.f[o * D + j] - m) / sqrt(v + eps) * S.f[j] + (B ? B->f[j] : 0));
    }
    return Y;
}

static HT ref_batchnorm(const std::vector<HT> &in, bool train, double eps) {
    const HT &X = in[0];
    int64_t N = X.dims[0], C = X.dims[1], HW = X.numel() / (N * C);
    HT Y = mk(X.dims);
    for (int64_t c = 0; c < C; c++) {
        double m = 0, v = 0;
        if (train) {
            for (int64_t n = 0; n < N; n++) for (int64_t p = 0; p < HW; p++) m += X.f[(n * C + c) * HW + p];
            m /= N * HW;
            for (int64_t n = 0; n < N; n++) for (int64_t p = 0; p < HW; p++) { double d = X.f[(n * C + c) * HW + p] - m; v += d * d; }
            v /= N * HW;
        } else { m = in[3].f[c]; v = in[4].f[c]; }
        for (int64_t n = 0; n < N; n++)
            for (int64_t p = 0; p < HW; p++)
                Y.f[(n * C + c) * HW + p] = (float)((X.f[(n * C + c) * HW + p] - m) / sqrt(v + eps) * in[1].f[c] + in[2].f[c]);
    }
    return Y;
}

/* 2-D pool with explicit output size. */
static HT ref_pool(const HT &X, bool max_, int64_t k, int64_t s, int64_t p, int64_t Ho, bool incl) {
    int64_t N = X.dims[0], C = X.dims[1], H = X.dims[2], W = X.dims[3];
    HT Y = mk({N, C, Ho, Ho});
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t oh = 0; oh < Ho; oh++)
            for (int64_t ow = 0; ow < Ho; ow++) {
                double best = -1e30, sum = 0;
                int64_t cnt = 0, cin = 0;
                for (int64_t a = 0; a < k; a++)
                    for (int64_t b = 0; b < k; b++) {
                        int64_t h = oh * s - p + a, w = ow * s - p + b;
                        if (h < H + p && w < W + p) cin++;
                        if (h < 0 || h >= H || w < 0 || w >= W) continue;
                        double v = X.f[(nc * H + h) * W + w];
                        best = std::max(best, v);
                        sum += v;
                        cnt++;
                    }
                Y.f[(nc * Ho + oh) * Ho + ow] = (float)(max_ ? best : sum / (incl ? cin : cnt));
            }
    return Y;
}

static HT ref_reduce_mean(const HT &X, std::vector<int> axes, bool keep) {
    int r = (int)X.dims.size();
    std::vector<bool> red(r, false);
    for (int a : axes) red[a < 0 ? a + r : a] = true;
    std::vector<int64_t> od, kd;
    int64_t cnt = 1;
    for (int i = 0; i < r; i++) {
        kd.push_back(red[i] ? 1 : X.dims[i]);
        if (red[i]) { cnt *= X.dims[i]; if (keep) od.push_back(1); }
        else od.push_back(X.dims[i]);
    }
    HT Y = mk(od);
    std::vector<double> acc(Y.f.size(), 0.0);
    std::vector<int64_t> idx(r, 0);
    for (int64_t e = 0; e < X.numel(); e++) {
        int64_t rem = e, o = 0;
        std::vector<int64_t> c(r);
        for (int i = r - 1; i >= 0; i--) { c[i] = rem % X.dims[i]; rem /= X.dims[i]; }
        for (int i = 0; i < r; i++) o = o * kd[i] + (red[i] ? 0 : c[i]);
        acc[o] += X.f[e];
    }
    for (size_t k = 0; k < acc.size(); k++) Y.f[k] = (float)(acc[k] / cnt);
    return Y;
}

static HT ref_transpose(const HT &X, std::vector<int64_t> perm) {
    int r = (int)X.dims.size();
    std::vector<int64_t> od(r), st(r);
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) { st[i] = s; s *= X.dims[i]; }
    for (int i = 0; i < r; i++) od[i] = X.dims[perm[i]];
    HT Y = mk(od);
    for (int64_t o = 0; o < X.numel(); o++) {
        int64_t rem = o, off = 0;
        for (int i = r - 1; i >= 0; i--) { off += (rem % od[i]) * st[perm[i]]; rem /= od[i]; }
        Y.f[o] = X.f[off];
    }
    return Y;
}

static HT ref_gather(const HT &X, const HT &I, int axis) {
    int r = (int)X.dims.size();
    int64_t outer = 1, A = X.dims[axis], inner = 1;
    for (int i = 0; i < axis; i++) outer *= X.dims[i];
    for (int i = axis + 1; i < r; i++) inner *= X.dims[i];
    std::vector<int64_t> od(X.dims.begin(), X.dims.begin() + axis);
    od.insert(od.end(), I.dims.begin(), I.dims.end());
    od.insert(od.end(), X.dims.begin() + axis + 1, X.dims.end());
    HT Y = mk(od);
    int64_t nI = (int64_t)I.i.size();
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < nI; j++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t k = I.i[j] < 0 ? I.i[j] + A : I.i[j];
                Y.f[(o * nI + j) * inner + i] = X.f[(o * A + k) * inner + i];
            }
    return Y;
}

/* ONNX's LSTM ('L', gates i, o, f, c), GRU ('G', z, r, h) and RNN ('R'), in
 * double; inputs X, W, R, [B], [sequence_lens: empty], [initial_h],
 * [initial_c]. Returns output `out`: Y, Y_h or Y_c. */
struct RnnSpec {
    char kind;
    int D;
    bool layout1, lbr, relu;
};
static HT ref_rnn(const RnnSpec &sp, const std::vector<HT> &in, int out) {
    const HT &X = in[0], &W = in[1], &R = in[2];
    bool L1 = sp.layout1;
    int64_t T = X.dims[L1 ? 1 : 0], N = X.dims[L1 ? 0 : 1], I = X.dims[2], H = R.dims[2], D = sp.D;
    int64_t G = sp.kind == 'L' ? 4 : sp.kind == 'G' ? 3 : 1;
    auto present = [&](size_t k) { return in.size() > k && !in[k].f.empty(); };
    HT Y = L1 ? mk({N, T, D, H}) : mk({T, D, N, H});
    HT S = L1 ? mk({N, D, H}) : mk({D, N, H}), C = S;
    auto yi = [&](int64_t t, int64_t d, int64_t n, int64_t j) { return L1 ? ((n * T + t) * D + d) * H + j : ((t * D + d) * N + n) * H + j; };
    auto si = [&](int64_t d, int64_t n, int64_t j) { return L1 ? (n * D + d) * H + j : (d * N + n) * H + j; };
    auto xi = [&](int64_t t, int64_t n, int64_t i) { return L1 ? (n * T + t) * I + i : (t * N + n) * I + i; };
    auto sg = [](double v) { return 1.0 / (1.0 + exp(-v)); };
    for (int64_t d = 0; d < D; d++) {
        std::vector<double> h(N * H, 0.0), c(N * H, 0.0);
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < H; j++) {
                if (present(5)) h[n * H + j] = in[5].f[si(d, n, j)];
                if (present(6)) c[n * H + j] = in[6].f[si(d, n, j)];
            }
        auto wx = [&](int64_t t, int64_t n, int64_t g) {
            double v = present(3) ? in[3].f[d * 2 * G * H + g] : 0.0;
            for (int64_t i = 0; i < I; i++) v += (double)W.f[(d * G * H + g) * I + i] * X.f[xi(t, n, i)];
            return v;
        };
        auto rh = [&](const std::vector<double> &hv, int64_t n, int64_t g) {
            double v = present(3) ? in[3].f[d * 2 * G * H + G * H + g] : 0.0;
            for (int64_t k = 0; k < H; k++) v += (double)R.f[(d * G * H + g) * H + k] * hv[n * H + k];
            return v;
        };
        for (int64_t s = 0; s < T; s++) {
            int64_t t = d == 1 ? T - 1 - s : s;
            std::vector<double> hn(N * H), cn(N * H), rhv(N * H);
            if (sp.kind == 'G' && !sp.lbr) /* r o h_prev for every unit first */
                for (int64_t n = 0; n < N; n++)
                    for (int64_t j = 0; j < H; j++) rhv[n * H + j] = sg(wx(t, n, H + j) + rh(h, n, H + j)) * h[n * H + j];
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; j < H; j++) {
                    int64_t e = n * H + j;
                    if (sp.kind == 'L') {
                        double i_ = sg(wx(t, n, j) + rh(h, n, j)), o = sg(wx(t, n, H + j) + rh(h, n, H + j));
                        double f = sg(wx(t, n, 2 * H + j) + rh(h, n, 2 * H + j));
                        double cc = tanh(wx(t, n, 3 * H + j) + rh(h, n, 3 * H + j));
                        cn[e] = f * c[e] + i_ * cc;
                        hn[e] = o * tanh(cn[e]);
                    } else if (sp.kind == 'G') {
                        double z = sg(wx(t, n, j) + rh(h, n, j)), r = sg(wx(t, n, H + j) + rh(h, n, H + j));
                        double cand = sp.lbr ? wx(t, n, 2 * H + j) + r * rh(h, n, 2 * H + j) : wx(t, n, 2 * H + j) + rh(rhv, n, 2 * H + j);
                        hn[e] = (1 - z) * tanh(cand) + z * h[e];
                    } else {
                        double v = wx(t, n, j) + rh(h, n, j);
                        hn[e] = sp.relu ? (v > 0 ? v : 0) : tanh(v);
                    }
                }
            h = hn;
            if (sp.kind == 'L') c = cn;
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; j < H; j++) Y.f[yi(t, d, n, j)] = (float)h[n * H + j];
        }
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < H; j++) {
                S.f[si(d, n, j)] = (float)h[n * H + j];
                C.f[si(d, n, j)] = (float)c[n * H + j];
            }
    }
    return out == 0 ? Y : out == 1 ? S : C;
}
