/* grad_norm_pool_resize_cases.h: test_grad.cu's cases for
 * InstanceNormalization and GroupNormalization (verify/ops_norm.cu), 3-D MaxPool / AveragePool
 * (verify/ops_pool.cu), Resize / Upsample (verify/ops_resample.cu) and
 * ConvTranspose (verify/ops_conv.cu).
 * Included by test_grad.cu after its scaffolding. */

static HT ref_instancenorm(const std::vector<HT> &in, double eps) {
    const HT &X = in[0];
    int64_t N = X.dims[0], C = X.dims[1], D = X.numel() / (N * C);
    HT Y = mk(X.dims);
    for (int64_t r = 0; r < N * C; r++) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < D; j++) m += X.f[r * D + j];
        m /= (double)D;
        for (int64_t j = 0; j < D; j++) v += (X.f[r * D + j] - m) * (X.f[r * D + j] - m);
        v /= (double)D;
        for (int64_t j = 0; j < D; j++)
            Y.f[r * D + j] = (float)((X.f[r * D + j] - m) / sqrt(v + eps) * in[1].f[r % C] + in[2].f[r % C]);
    }
    return Y;
}

/* GroupNormalization: scale and bias per channel, or per group when they
 * have num_groups elements (opset 18). */
static HT ref_groupnorm(const std::vector<HT> &in, int64_t G, double eps) {
    const HT &X = in[0];
    int64_t N = X.dims[0], C = X.dims[1], S = X.numel() / (N * C), cg = C / G, D = cg * S;
    bool per_group = in[1].numel() == G && G != C;
    HT Y = mk(X.dims);
    for (int64_t r = 0; r < N * G; r++) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < D; j++) m += X.f[r * D + j];
        m /= (double)D;
        for (int64_t j = 0; j < D; j++) v += (X.f[r * D + j] - m) * (X.f[r * D + j] - m);
        v /= (double)D;
        for (int64_t j = 0; j < D; j++) {
            int64_t c = (r % G) * cg + j / S, k = per_group ? c / cg : c;
            Y.f[r * D + j] = (float)((X.f[r * D + j] - m) / sqrt(v + eps) * in[1].f[k] + in[2].f[k]);
        }
    }
    return Y;
}

/* 3-D pool, floor mode, symmetric pads p, dilation d. */
static HT ref_pool3d(const HT &X, bool max_, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p,
                     std::vector<int64_t> d, bool incl) {
    int64_t N = X.dims[0], C = X.dims[1], in[3] = {X.dims[2], X.dims[3], X.dims[4]}, out[3];
    for (int i = 0; i < 3; i++) out[i] = (in[i] + 2 * p[i] - (k[i] - 1) * d[i] - 1) / s[i] + 1;
    HT Y = mk({N, C, out[0], out[1], out[2]});
    int64_t e = 0;
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t a = 0; a < out[0]; a++)
            for (int64_t b = 0; b < out[1]; b++)
                for (int64_t c = 0; c < out[2]; c++, e++) {
                    double best = -1e30, sum = 0;
                    int64_t cnt = 0, cin = 0;
                    for (int64_t u = 0; u < k[0]; u++)
                        for (int64_t v = 0; v < k[1]; v++)
                            for (int64_t w = 0; w < k[2]; w++) {
                                int64_t z = a * s[0] - p[0] + u * d[0], h = b * s[1] - p[1] + v * d[1],
                                        x = c * s[2] - p[2] + w * d[2];
                                if (z < in[0] + p[0] && h < in[1] + p[1] && x < in[2] + p[2]) cin++;
                                if (z < 0 || z >= in[0] || h < 0 || h >= in[1] || x < 0 || x >= in[2]) continue;
                                double val = X.f[((nc * in[0] + z) * in[1] + h) * in[2] + x];
                                best = std::max(best, val);
                                sum += val;
                                cnt++;
                            }
                    Y.f[e] = (float)(max_ ? best : sum / (double)(incl ? cin : cnt));
                }
    return Y;
}

/* Resize on the host: per dim the source coordinate (ONNX's formulas), then
 * nearest (mode 'n', nearest_mode nm) or n-linear (mode 'l'). */
static HT ref_resize(const HT &X, std::vector<int64_t> out, std::vector<double> scale, char mode, std::string ctm,
                     std::string nm) {
    int r = (int)X.dims.size();
    HT Y = mk(out);
    for (int64_t e = 0; e < Y.numel(); e++) {
        std::vector<int64_t> o(r), i0(r), i1(r);
        std::vector<double> l(r);
        int64_t t = e;
        for (int d = r - 1; d >= 0; d--) { o[d] = t % out[d]; t /= out[d]; }
        for (int d = 0; d < r; d++) {
            int64_t L = X.dims[d];
            double x;
            if (ctm == "half_pixel") x = (o[d] + 0.5) / scale[d] - 0.5;
            else if (ctm == "pytorch_half_pixel") x = out[d] > 1 ? (o[d] + 0.5) / scale[d] - 0.5 : 0;
            else if (ctm == "align_corners") x = out[d] == 1 ? 0 : o[d] * (double)(L - 1) / (L * scale[d] - 1);
            else x = o[d] / scale[d];
            if (mode == 'n') {
                double f = floor(x);
                int64_t k = nm == "floor" ? (int64_t)f : nm == "ceil" ? (int64_t)ceil(x)
                          : x - f == 0.5 ? (int64_t)(nm == "round_prefer_ceil" ? f + 1 : f) : (int64_t)llround(x);
                i0[d] = i1[d] = std::min(std::max(k, (int64_t)0), L - 1);
                l[d] = 0;
            } else {
                x = std::min(std::max(x, 0.0), (double)(L - 1));
                i0[d] = (int64_t)floor(x);
                i1[d] = std::min(i0[d] + 1, L - 1);
                l[d] = x - i0[d];
            }
        }
        double acc = 0;
        for (int m = 0; m < (1 << r); m++) {
            double w = 1;
            int64_t off = 0;
            for (int d = 0; d < r; d++) {
                bool hi = (m >> d) & 1;
                w *= hi ? l[d] : 1 - l[d];
                off = off * X.dims[d] + (hi ? i1[d] : i0[d]);
            }
            if (w != 0) acc += w * X.f[off];
        }
        Y.f[e] = (float)acc;
    }
    return Y;
}

static HT floats(std::vector<int64_t> d, std::vector<float> v) { HT t; t.dims = d; t.f = v; return t; }

/* ConvTranspose on the host, scattering: Y[n, g*Mg + m, o*s - pb + k*d] +=
 * X[n, ci, o] * W[ci, m, k]; ys: Y's spatial dims. */
static HT ref_convt(const HT &X, const HT &W, const HT *B, int64_t group, std::vector<int64_t> s,
                    std::vector<int64_t> pb, std::vector<int64_t> d, std::vector<int64_t> ys) {
    int sp = (int)X.dims.size() - 2;
    int64_t N = X.dims[0], C = X.dims[1], Mg = W.dims[1], M = Mg * group, Cg = C / group;
    int64_t xi[3] = {1, 1, 1}, kk[3] = {1, 1, 1}, yo[3] = {1, 1, 1}, S[3] = {1, 1, 1}, Pb[3] = {0, 0, 0}, D[3] = {1, 1, 1};
    for (int j = 0; j < sp; j++) {
        xi[3 - sp + j] = X.dims[2 + j];
        kk[3 - sp + j] = W.dims[2 + j];
        yo[3 - sp + j] = ys[j];
        S[3 - sp + j] = s[j];
        Pb[3 - sp + j] = pb[j];
        D[3 - sp + j] = d[j];
    }
    std::vector<int64_t> yd = {N, M};
    for (auto v : ys) yd.push_back(v);
    HT Y = mk(yd);
    int64_t XS = xi[0] * xi[1] * xi[2], YS = yo[0] * yo[1] * yo[2], KK = kk[0] * kk[1] * kk[2];
    for (int64_t n = 0; n < N; n++)
        for (int64_t ci = 0; ci < C; ci++)
            for (int64_t m = 0; m < Mg; m++)
                for (int64_t q = 0; q < XS; q++)
                    for (int64_t t = 0; t < KK; t++) {
                        int64_t o[3] = {q / (xi[1] * xi[2]), (q / xi[2]) % xi[1], q % xi[2]};
                        int64_t k[3] = {t / (kk[1] * kk[2]), (t / kk[2]) % kk[1], t % kk[2]}, off = 0;
                        bool in = true;
                        for (int a = 0; a < 3; a++) {
                            int64_t p = o[a] * S[a] - Pb[a] + k[a] * D[a];
                            in &= p >= 0 && p < yo[a];
                            off = off * yo[a] + p;
                        }
                        if (!in) continue;
                        int64_t mo = (ci / Cg) * Mg + m;
                        Y.f[(n * M + mo) * YS + off] += X.f[(n * C + ci) * XS + q] * W.f[(ci * Mg + m) * KK + t];
                    }
    if (B)
        for (int64_t e = 0; e < Y.numel(); e++) Y.f[e] += B->f[(e / YS) % M];
    return Y;
}

static void norm_pool_resize_cases() {
    /* InstanceNormalization */
    {
        Case c{Node("InstanceNormalization"), {randf({2, 3, 4, 5}), randf({3}), randf({3})}, {true, true, true}};
        c.ref = [](const std::vector<HT> &in) { return ref_instancenorm(in, 1e-5); };
        run_case("InstanceNormalization [2,3,4,5]", c);
        Case d{Node("InstanceNormalization").f("epsilon", 1e-3), {randf({3, 2, 7}), randf({2}), randf({2})},
               {true, false, true}};
        d.ref = [](const std::vector<HT> &in) { return ref_instancenorm(in, 1e-3); };
        run_case("InstanceNormalization 1-D spatial, epsilon 1e-3, no scale gradient", d);
        Case e{Node("InstanceNormalization"), {randf({1, 2, 2, 3, 4}), randf({2}), randf({2})}, {false, true, true}};
        e.ref = [](const std::vector<HT> &in) { return ref_instancenorm(in, 1e-5); };
        run_case("InstanceNormalization 3-D spatial, parameter gradients only", e);
        Case f = c;
        f.training = false;
        f.grad = {false, false, false};
        run_case("InstanceNormalization inference", f);
    }
    /* GroupNormalization */
    {
        Case c{Node("GroupNormalization").i("num_groups", 2), {randf({2, 4, 3, 5}), randf({4}), randf({4})},
               {true, true, true}};
        c.ref = [](const std::vector<HT> &in) { return ref_groupnorm(in, 2, 1e-5); };
        run_case("GroupNormalization 2 groups of 2 channels [2,4,3,5]", c);
        Case d{Node("GroupNormalization").i("num_groups", 3).f("epsilon", 1e-3), {randf({3, 6, 7}), randf({3}), randf({3})},
               {true, true, false}};
        d.ref = [](const std::vector<HT> &in) { return ref_groupnorm(in, 3, 1e-3); };
        run_case("GroupNormalization per-group scale (opset 18), 1-D spatial", d);
        Case e{Node("GroupNormalization").i("num_groups", 1), {randf({2, 3, 2, 2, 2}), randf({3}), randf({3})},
               {false, true, true}};
        e.ref = [](const std::vector<HT> &in) { return ref_groupnorm(in, 1, 1e-5); };
        run_case("GroupNormalization one group (PoolFormer's), parameter gradients only", e);
        Case f = c;
        f.training = false;
        f.grad = {false, false, false};
        run_case("GroupNormalization inference", f);
    }
    /* 3-D pooling */
    {
        Case c{Node("MaxPool").is("kernel_shape", {2, 2, 2}).is("strides", {2, 2, 2}), {randf({1, 2, 4, 5, 4})}, {true}};
        c.eps = 1e-3;
        c.ref = [](const std::vector<HT> &in) { return ref_pool3d(in[0], true, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, false); };
        run_case("MaxPool 3-D 2x2x2 stride 2", c);
        Case d{Node("MaxPool").is("kernel_shape", {3, 3, 3}).is("strides", {2, 1, 2}).is("pads", {1, 1, 1, 1, 1, 1}),
               {randf({2, 2, 5, 4, 5})}, {true}};
        d.eps = 1e-3;
        d.ref = [](const std::vector<HT> &in) { return ref_pool3d(in[0], true, {3, 3, 3}, {2, 1, 2}, {1, 1, 1}, {1, 1, 1}, false); };
        run_case("MaxPool 3-D 3x3x3 strides (2,1,2) pad 1 (r3d_18's stem pool)", d);
        Case d2 = d;
        d2.node.n_out = 2;
        run_case("MaxPool 3-D with Indices output", d2);
        Case m{Node("MaxPool").is("kernel_shape", {2, 2, 2}).is("dilations", {2, 1, 2}), {randf({1, 1, 5, 4, 5})}, {true}};
        m.eps = 1e-3;
        m.ref = [](const std::vector<HT> &in) { return ref_pool3d(in[0], true, {2, 2, 2}, {1, 1, 1}, {0, 0, 0}, {2, 1, 2}, false); };
        run_case("MaxPool 3-D dilations (2,1,2)", m);
        Case e{Node("AveragePool").is("kernel_shape", {3, 3, 3}).is("strides", {2, 2, 2}).is("pads", {1, 1, 1, 1, 1, 1}),
               {randf({1, 2, 5, 5, 5})}, {true}};
        e.ref = [](const std::vector<HT> &in) { return ref_pool3d(in[0], false, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, false); };
        run_case("AveragePool 3-D exclude pad", e);
        Case f = e;
        f.node.i("count_include_pad", 1);
        f.ref = [](const std::vector<HT> &in) { return ref_pool3d(in[0], false, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, true); };
        run_case("AveragePool 3-D count_include_pad", f);
        Case g{Node("AveragePool").is("kernel_shape", {1, 2, 2}).is("strides", {1, 2, 2}), {randf({2, 3, 2, 4, 6})}, {true}};
        g.ref = [](const std::vector<HT> &in) { return ref_pool3d(in[0], false, {1, 2, 2}, {1, 2, 2}, {0, 0, 0}, {1, 1, 1}, false); };
        run_case("AveragePool 3-D 1x2x2", g);
    }
    /* Resize (opset 13 inputs: X, roi, scales, sizes; an empty HT is an omitted input) */
    {
        HT none;
        Case a{Node("Resize").s("mode", "nearest").s("coordinate_transformation_mode", "asymmetric").s("nearest_mode", "floor"),
               {randf({1, 2, 3, 4}), none, floats({4}, {1, 1, 2, 2})}, {true, false, false}};
        a.ref = [](const std::vector<HT> &in) { return ref_resize(in[0], {1, 2, 6, 8}, {1, 1, 2, 2}, 'n', "asymmetric", "floor"); };
        run_case("Resize nearest x2, asymmetric floor (F.interpolate nearest)", a);
        Case b{Node("Resize").s("mode", "linear").s("coordinate_transformation_mode", "pytorch_half_pixel"),
               {randf({2, 2, 3, 4}), none, floats({4}, {1, 1, 2, 2})}, {true, false, false}};
        b.ref = [](const std::vector<HT> &in) { return ref_resize(in[0], {2, 2, 6, 8}, {1, 1, 2, 2}, 'l', "pytorch_half_pixel", ""); };
        run_case("Resize bilinear x2, pytorch_half_pixel", b);
        Case c{Node("Resize").s("mode", "linear").s("coordinate_transformation_mode", "align_corners"),
               {randf({1, 2, 3, 4}), none, none, ints({4}, {1, 2, 5, 7})}, {true, false, false, false}};
        c.in[3].host_only = true;
        c.ref = [](const std::vector<HT> &in) {
            return ref_resize(in[0], {1, 2, 5, 7}, {1, 1, 5.0 / 3, 7.0 / 4}, 'l', "align_corners", "");
        };
        run_case("Resize bilinear to sizes [1,2,5,7], align_corners", c);
        Case c2{Node("Resize").s("mode", "linear").s("coordinate_transformation_mode", "align_corners"),
                {randf({1, 2, 2, 4}), none, floats({4}, {1, 1, 0.6f, 0.6f})}, {true, false, false}};
        c2.ref = [](const std::vector<HT> &in) { return ref_resize(in[0], {1, 2, 1, 2}, {1, 1, 0.6, 0.6}, 'l', "align_corners", ""); };
        run_case("Resize bilinear down by scales 0.6, align_corners (length in * scale)", c2);
        Case d{Node("Resize").s("mode", "linear").s("coordinate_transformation_mode", "half_pixel"),
               {randf({1, 1, 2, 3, 4}), none, floats({5}, {1, 1, 2, 2, 1.5f})}, {true, false, false}};
        d.ref = [](const std::vector<HT> &in) { return ref_resize(in[0], {1, 1, 4, 6, 6}, {1, 1, 2, 2, 1.5}, 'l', "half_pixel", ""); };
        run_case("Resize trilinear (2, 2, 1.5), half_pixel", d);
        Case e{Node("Resize").s("mode", "nearest"), {randf({1, 2, 6, 5}), none, none, ints({4}, {1, 2, 3, 2})},
               {true, false, false, false}};
        e.in[3].host_only = true;
        e.ref = [](const std::vector<HT> &in) {
            return ref_resize(in[0], {1, 2, 3, 2}, {1, 1, 0.5, 0.4}, 'n', "half_pixel", "round_prefer_floor");
        };
        run_case("Resize nearest down to sizes [1,2,3,2], half_pixel round_prefer_floor", e);
        Case f{Node("Resize").s("mode", "nearest").s("nearest_mode", "round_prefer_ceil").is("axes", {2, 3}),
               {randf({1, 2, 3, 4}), none, floats({2}, {1.5f, 2})}, {true, false, false}};
        f.ref = [](const std::vector<HT> &in) {
            return ref_resize(in[0], {1, 2, 4, 8}, {1, 1, 1.5, 2}, 'n', "half_pixel", "round_prefer_ceil");
        };
        run_case("Resize nearest axes (2, 3) scales (1.5, 2), round_prefer_ceil", f);
        Case g{Node("Upsample").s("mode", "nearest"), {randf({1, 2, 3, 3}), floats({4}, {1, 1, 2, 3})}, {true, false}};
        g.node.opset = 9;
        g.ref = [](const std::vector<HT> &in) { return ref_resize(in[0], {1, 2, 6, 9}, {1, 1, 2, 3}, 'n', "asymmetric", "floor"); };
        run_case("Upsample nearest (opset 9)", g);
    }
    /* ConvTranspose */
    {
        Case a{Node("ConvTranspose").is("strides", {2, 2}).is("pads", {1, 1, 1, 1}).is("output_padding", {1, 1}),
               {randf({2, 4, 3, 3}), randf({4, 3, 3, 3}), randf({3})}, {true, true, true}};
        a.ref = [](const std::vector<HT> &in) { return ref_convt(in[0], in[1], &in[2], 1, {2, 2}, {1, 1}, {1, 1}, {6, 6}); };
        run_case("ConvTranspose 3x3 stride 2 pad 1 output_padding 1, bias", a);
        Case b{Node("ConvTranspose").i("group", 2).is("strides", {2, 1}), {randf({1, 4, 3, 4}), randf({4, 2, 2, 2})},
               {true, true}};
        b.ref = [](const std::vector<HT> &in) { return ref_convt(in[0], in[1], NULL, 2, {2, 1}, {0, 0}, {1, 1}, {6, 5}); };
        run_case("ConvTranspose group 2, strides (2, 1)", b);
        Case c{Node("ConvTranspose").is("dilations", {2}).is("pads", {1, 2}), {randf({2, 3, 5}), randf({3, 2, 3})},
               {true, true}};
        c.ref = [](const std::vector<HT> &in) { return ref_convt(in[0], in[1], NULL, 1, {1}, {1}, {2}, {6}); };
        run_case("ConvTranspose 1-D dilation 2, pads (1, 2)", c);
        Case d{Node("ConvTranspose").i("group", 3).is("strides", {2, 2}).is("pads", {1, 1, 1, 1}),
               {randf({2, 3, 4, 4}), randf({3, 1, 3, 3}), randf({3})}, {true, true, true}};
        d.ref = [](const std::vector<HT> &in) { return ref_convt(in[0], in[1], &in[2], 3, {2, 2}, {1, 1}, {1, 1}, {7, 7}); };
        run_case("ConvTranspose depthwise (group 3), stride 2", d);
        Case e{Node("ConvTranspose"), {randf({2, 5, 3, 3}), randf({5, 4, 1, 1})}, {true, true}};
        e.ref = [](const std::vector<HT> &in) { return ref_convt(in[0], in[1], NULL, 1, {1, 1}, {0, 0}, {1, 1}, {3, 3}); };
        run_case("ConvTranspose 1x1 (no column buffer)", e);
        Case f{Node("ConvTranspose").is("strides", {2, 2, 2}), {randf({1, 2, 2, 3, 2}), randf({2, 2, 2, 2, 2})},
               {true, true}};
        f.ref = [](const std::vector<HT> &in) { return ref_convt(in[0], in[1], NULL, 1, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, {4, 6, 4}); };
        run_case("ConvTranspose 3-D 2x2x2 stride 2", f);
        Case g{Node("ConvTranspose").is("strides", {2, 2}).is("output_shape", {6, 6}), {randf({1, 2, 3, 3}), randf({2, 2, 3, 3})},
               {true, true}};
        g.ref = [](const std::vector<HT> &in) { return ref_convt(in[0], in[1], NULL, 1, {2, 2}, {1, 1}, {1, 1}, {6, 6}); };
        run_case("ConvTranspose output_shape (6, 6)", g);
        Case h{Node("ConvTranspose").is("strides", {3, 2}).is("output_shape", {10, 8}), {randf({1, 1, 3, 3}), randf({1, 2, 3, 3})},
               {true, true}};
        h.ref = [](const std::vector<HT> &in) { return ref_convt(in[0], in[1], NULL, 1, {3, 2}, {0, 0}, {1, 1}, {10, 8}); };
        run_case("ConvTranspose output_shape past the full extent (padded at the end)", h);
    }
}
