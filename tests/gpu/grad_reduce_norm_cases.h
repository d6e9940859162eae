/* grad_reduce_norm_cases.h: test_grad.cu's cases for ReduceMax, ReduceMin,
 * ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum,
 * ReduceLogSumExp, ArgMax, ArgMin, Hardmax, LpNormalization and
 * MeanVarianceNormalization (verify/ops_reduce.cu), and
 * GlobalMaxPool, LpPool, GlobalLpPool (verify/ops_pool.cu) and
 * RMSNormalization and LRN (verify/ops_rmsnorm.cu).
 * Included by test_grad.cu after its scaffolding. */

/* Distinct values at least `gap` apart, shuffled: max / min keep their
 * arg position under finite differences of eps < gap / 2. */
static HT spaced(std::vector<int64_t> d, double gap) {
    HT t = randf(d);
    int64_t n = t.numel();
    for (int64_t k = 0; k < n; k++) t.f[k] = (float)((k - n / 2) * gap);
    for (int64_t k = n - 1; k > 0; k--) {
        int64_t j = (int64_t)((urand() + 1) * 0.5 * (double)(k + 1)) % (k + 1);
        std::swap(t.f[k], t.f[j]);
    }
    return t;
}

/* Values with |x| >= 0.1 (|x| and x^2 are smooth there). */
static HT away_from_zero(std::vector<int64_t> d) {
    HT t = randf(d);
    for (auto &v : t.f) v = v < 0 ? v - 0.1f : v + 0.1f;
    return t;
}

/* The Reduce* ops on the host: mode is the op name without "Reduce". */
static HT ref_reduce(const HT &X, std::vector<int> axes, bool keep, std::string mode) {
    int r = (int)X.dims.size();
    std::vector<bool> red(r, axes.empty());
    for (int a : axes) red[a < 0 ? a + r : a] = true;
    std::vector<int64_t> od, kd;
    for (int i = 0; i < r; i++) {
        kd.push_back(red[i] ? 1 : X.dims[i]);
        if (!red[i]) od.push_back(X.dims[i]);
        else if (keep) od.push_back(1);
    }
    HT Y = mk(od);
    std::vector<std::vector<double>> groups(Y.f.size());
    for (int64_t e = 0; e < X.numel(); e++) {
        int64_t rem = e, o = 0;
        std::vector<int64_t> c(r);
        for (int i = r - 1; i >= 0; i--) { c[i] = rem % X.dims[i]; rem /= X.dims[i]; }
        for (int i = 0; i < r; i++) o = o * kd[i] + (red[i] ? 0 : c[i]);
        groups[o].push_back(X.f[e]);
    }
    for (size_t k = 0; k < groups.size(); k++) {
        const std::vector<double> &g = groups[k];
        double acc = mode == "Max" ? -INFINITY : mode == "Min" ? INFINITY : mode == "Prod" ? 1 : 0, m = -INFINITY;
        for (double v : g) m = std::max(m, v);
        for (double v : g) {
            if (mode == "Max") acc = std::max(acc, v);
            else if (mode == "Min") acc = std::min(acc, v);
            else if (mode == "Prod") acc *= v;
            else if (mode == "L1") acc += fabs(v);
            else if (mode == "L2" || mode == "SumSquare") acc += v * v;
            else if (mode == "LogSum") acc += v;
            else if (mode == "LogSumExp") acc += exp(v - m);
        }
        if (mode == "L2") acc = sqrt(acc);
        if (mode == "LogSum") acc = log(acc);
        if (mode == "LogSumExp") acc = m + log(acc);
        Y.f[k] = (float)acc;
    }
    return Y;
}

/* ArgMax / ArgMin along axis. */
static HT ref_arg(const HT &X, int axis, bool keep, bool is_max, bool last) {
    int r = (int)X.dims.size();
    if (axis < 0) axis += r;
    int64_t outer = 1, inner = 1, len = X.dims[axis];
    for (int i = 0; i < axis; i++) outer *= X.dims[i];
    for (int i = axis + 1; i < r; i++) inner *= X.dims[i];
    std::vector<int64_t> od;
    for (int i = 0; i < r; i++) {
        if (i != axis) od.push_back(X.dims[i]);
        else if (keep) od.push_back(1);
    }
    std::vector<int64_t> v(outer * inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t bi = 0;
            float best = X.f[o * len * inner + in];
            for (int64_t k = 1; k < len; k++) {
                float x = X.f[(o * len + k) * inner + in];
                if ((is_max ? x > best : x < best) || (last && x == best)) { best = x; bi = k; }
            }
            v[o * inner + in] = bi;
        }
    return ints(od, v);
}

/* Hardmax: X seen as (outer, len, inner). */
static HT ref_hardmax(const HT &X, int64_t outer, int64_t len, int64_t inner) {
    HT Y = mk(X.dims);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t bi = 0;
            for (int64_t k = 1; k < len; k++)
                if (X.f[(o * len + k) * inner + in] > X.f[(o * len + bi) * inner + in]) bi = k;
            Y.f[(o * len + bi) * inner + in] = 1.f;
        }
    return Y;
}

/* ReduceMax with ties: the gradient is split evenly among them (amax's
 * backward), which finite differences cannot see. */
static void reduce_max_ties_case() {
    const vx_op *op = find_op("ReduceMax");
    Node nd("ReduceMax");
    nd.is("axes", {1});
    nd.opset = 13;
    HT x;
    x.dims = {2, 3};
    x.f = {1.f, 3.f, 3.f, 2.f, 2.f, 2.f};
    std::vector<vx_tensor *> ins{upload(x)};
    vx_run run;
    est_node en;
    int32_t outs[8];
    setup_run(&run, &en, nd, op, ins, outs, true);
    run.need_grad[0] = true;
    bool ok = op->forward(&g_ctx, &run) == VX_OK;
    HT dy;
    dy.dims = {2, 1};
    dy.f = {1.f, 6.f};
    if (ok) {
        run.grad_out[0] = upload(dy);
        ok = op->backward(&g_ctx, &run) == VX_OK && run.grad_in[0];
    }
    std::vector<float> want{0.f, 0.5f, 0.5f, 2.f, 2.f, 2.f};
    if (ok) {
        HT g = download(run.grad_in[0]);
        for (int k = 0; k < 6; k++) ok &= fabsf(g.f[k] - want[k]) < 1e-6f;
    }
    release_run(&run);
    g_checks++;
    printf("%s ReduceMax ties share the gradient\n", ok ? "ok  " : "FAIL");
    if (!ok) g_failures++;
}

/* 2-D LpPool (square kernel k, stride s, symmetric pads pd); a global pool
 * when k == 0. */
static HT ref_lppool(const HT &X, int64_t k, int64_t s, int64_t pd, double p) {
    int64_t N = X.dims[0], C = X.dims[1], H = X.dims[2], W = X.dims[3];
    int64_t kh = k ? k : H, kw = k ? k : W, Ho = (H + 2 * pd - kh) / s + 1, Wo = (W + 2 * pd - kw) / s + 1;
    HT Y = mk({N, C, Ho, Wo});
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t a = 0; a < Ho; a++)
            for (int64_t b = 0; b < Wo; b++) {
                double acc = 0;
                for (int64_t u = 0; u < kh; u++)
                    for (int64_t v = 0; v < kw; v++) {
                        int64_t h = a * s - pd + u, w = b * s - pd + v;
                        if (h >= 0 && h < H && w >= 0 && w < W) acc += pow(fabs(X.f[(nc * H + h) * W + w]), p);
                    }
                Y.f[(nc * Ho + a) * Wo + b] = (float)pow(acc, 1.0 / p);
            }
    return Y;
}

static void lp_max_pool_cases() {
    Case g{Node("GlobalMaxPool"), {spaced({2, 3, 4, 5}, 0.01)}, {true}};
    g.eps = 1e-3;
    g.ref = [](const std::vector<HT> &in) { return ref_reduce(in[0], {2, 3}, true, "Max"); };
    run_case("GlobalMaxPool 2-D", g);
    Case g1{Node("GlobalMaxPool"), {spaced({2, 3, 7}, 0.01)}, {true}};
    g1.eps = 1e-3;
    g1.ref = [](const std::vector<HT> &in) { return ref_reduce(in[0], {2}, true, "Max"); };
    run_case("GlobalMaxPool 1-D", g1);
    Case l{Node("LpPool").is("kernel_shape", {2, 2}).is("strides", {2, 2}), {away_from_zero({2, 3, 6, 6})}, {true}};
    l.ref = [](const std::vector<HT> &in) { return ref_lppool(in[0], 2, 2, 0, 2); };
    run_case("LpPool p 2, 2x2 stride 2", l);
    Case l1{Node("LpPool").i("p", 1).is("kernel_shape", {3, 3}).is("strides", {2, 2}).is("pads", {1, 1, 1, 1}),
            {away_from_zero({1, 2, 5, 5})}, {true}};
    l1.ref = [](const std::vector<HT> &in) { return ref_lppool(in[0], 3, 2, 1, 1); };
    run_case("LpPool p 1, 3x3 stride 2, pads 1", l1);
    Case l3{Node("LpPool").i("p", 3).is("kernel_shape", {2, 2}), {away_from_zero({1, 2, 4, 4})}, {true}};
    l3.ref = [](const std::vector<HT> &in) { return ref_lppool(in[0], 2, 1, 0, 3); };
    run_case("LpPool p 3, 2x2 overlapping windows", l3);
    Case gl{Node("GlobalLpPool"), {away_from_zero({2, 3, 4, 4})}, {true}};
    gl.ref = [](const std::vector<HT> &in) { return ref_lppool(in[0], 0, 1, 0, 2); };
    run_case("GlobalLpPool p 2", gl);
    Case gl3{Node("GlobalLpPool").i("p", 3), {away_from_zero({2, 2, 3, 5})}, {true}};
    gl3.ref = [](const std::vector<HT> &in) { return ref_lppool(in[0], 0, 1, 0, 3); };
    run_case("GlobalLpPool p 3", gl3);
}

/* RMSNormalization over [axis, rank). */
static HT ref_rmsnorm(const HT &X, const HT &S, int axis, double eps) {
    int r = (int)X.dims.size();
    if (axis < 0) axis += r;
    int64_t D = 1;
    for (int i = axis; i < r; i++) D *= X.dims[i];
    HT Y = mk(X.dims);
    for (int64_t row = 0; row < X.numel() / D; row++) {
        double q = 0;
        for (int64_t j = 0; j < D; j++) q += (double)X.f[row * D + j] * X.f[row * D + j];
        double rs = 1.0 / sqrt(q / (double)D + eps);
        for (int64_t j = 0; j < D; j++) Y.f[row * D + j] = (float)(X.f[row * D + j] * rs * S.f[j]);
    }
    return Y;
}

/* LpNormalization: x / ||x||_p along axis. */
static HT ref_lpnorm(const HT &X, int axis, int p) {
    HT n = ref_reduce(X, {axis}, true, p == 1 ? "L1" : "L2");
    int r = (int)X.dims.size();
    if (axis < 0) axis += r;
    int64_t len = X.dims[axis], inner = 1;
    for (int i = axis + 1; i < r; i++) inner *= X.dims[i];
    HT Y = mk(X.dims);
    for (int64_t e = 0; e < X.numel(); e++) Y.f[e] = X.f[e] / n.f[(e / (len * inner)) * inner + e % inner];
    return Y;
}

static void lpnorm_cases() {
    Case c{Node("LpNormalization").i("axis", 1), {randf({2, 4, 3})}, {true}};
    c.ref = [](const std::vector<HT> &in) { return ref_lpnorm(in[0], 1, 2); };
    run_case("LpNormalization p 2, axis 1", c);
    Case d{Node("LpNormalization").i("p", 1), {away_from_zero({3, 5})}, {true}};
    d.ref = [](const std::vector<HT> &in) { return ref_lpnorm(in[0], -1, 1); };
    run_case("LpNormalization p 1, axis -1", d);
}

/* MeanVarianceNormalization: (x - mean) / (std + 1e-9) over axes. */
static HT ref_mvn(const HT &X, std::vector<int> axes) {
    HT mean = ref_reduce(X, axes, true, "SumSquare"); /* for the row count */
    int r = (int)X.dims.size();
    std::vector<bool> red(r, false);
    for (int a : axes) red[a < 0 ? a + r : a] = true;
    auto row_of = [&](int64_t e) {
        int64_t rem = e, o = 0;
        std::vector<int64_t> c(r);
        for (int i = r - 1; i >= 0; i--) { c[i] = rem % X.dims[i]; rem /= X.dims[i]; }
        for (int i = 0; i < r; i++) o = o * (red[i] ? 1 : X.dims[i]) + (red[i] ? 0 : c[i]);
        return o;
    };
    int64_t cnt = X.numel() / (int64_t)mean.f.size();
    std::vector<double> s(mean.f.size(), 0.0), q(mean.f.size(), 0.0);
    for (int64_t e = 0; e < X.numel(); e++) s[row_of(e)] += X.f[e];
    for (int64_t e = 0; e < X.numel(); e++) {
        double d = X.f[e] - s[row_of(e)] / cnt;
        q[row_of(e)] += d * d;
    }
    HT Y = mk(X.dims);
    for (int64_t e = 0; e < X.numel(); e++) {
        int64_t o = row_of(e);
        Y.f[e] = (float)((X.f[e] - s[o] / cnt) / (sqrt(q[o] / cnt) + 1e-9));
    }
    return Y;
}

static void mvn_cases() {
    Case c{Node("MeanVarianceNormalization"), {randf({2, 3, 2, 3})}, {true}};
    c.ref = [](const std::vector<HT> &in) { return ref_mvn(in[0], {0, 2, 3}); };
    run_case("MeanVarianceNormalization default axes (0, 2, 3)", c);
    Case d{Node("MeanVarianceNormalization").is("axes", {-1}), {randf({3, 8})}, {true}};
    d.ref = [](const std::vector<HT> &in) { return ref_mvn(in[0], {-1}); };
    run_case("MeanVarianceNormalization axes (-1)", d);
}

/* LRN across channels, ONNX's window [c - (size-1)/2, c + ceil((size-1)/2)]. */
static HT ref_lrn(const HT &X, int64_t size, double alpha, double beta, double bias) {
    int64_t N = X.dims[0], C = X.dims[1], S = X.numel() / (N * C), lo = (size - 1) / 2, hi = size - 1 - lo;
    HT Y = mk(X.dims);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++) {
                double acc = 0;
                for (int64_t k = std::max<int64_t>(0, c - lo); k <= std::min(C - 1, c + hi); k++) {
                    double v = X.f[(n * C + k) * S + s];
                    acc += v * v;
                }
                int64_t e = (n * C + c) * S + s;
                Y.f[e] = (float)(X.f[e] / pow(bias + alpha / (double)size * acc, beta));
            }
    return Y;
}

static void lrn_cases() {
    Case c{Node("LRN").i("size", 3).f("alpha", 0.5).f("beta", 0.75).f("bias", 1.0), {randf({2, 5, 2, 3})}, {true}};
    c.ref = [](const std::vector<HT> &in) { return ref_lrn(in[0], 3, 0.5, 0.75, 1.0); };
    run_case("LRN size 3", c);
    Case d{Node("LRN").i("size", 4).f("alpha", 0.3).f("bias", 2.0), {randf({1, 6, 4})}, {true}};
    d.ref = [](const std::vector<HT> &in) { return ref_lrn(in[0], 4, 0.3, 0.75, 2.0); };
    run_case("LRN even size 4 (asymmetric window), bias 2", d);
}

static void rmsnorm_cases() {
    Case c{Node("RMSNormalization"), {randf({2, 3, 8}), randf({8})}, {true, true}};
    c.node.opset = 23;
    c.ref = [](const std::vector<HT> &in) { return ref_rmsnorm(in[0], in[1], -1, 1e-5); };
    run_case("RMSNormalization axis -1", c);
    Case d{Node("RMSNormalization").i("axis", 1).f("epsilon", 1e-3), {randf({2, 3, 4}), randf({3, 4})}, {true, true}};
    d.node.opset = 23;
    d.ref = [](const std::vector<HT> &in) { return ref_rmsnorm(in[0], in[1], 1, 1e-3); };
    run_case("RMSNormalization axis 1, epsilon 1e-3", d);
    Case e{Node("RMSNormalization"), {randf({3, 300}), randf({300})}, {true, false}};
    e.node.opset = 23;
    e.ref = [](const std::vector<HT> &in) { return ref_rmsnorm(in[0], in[1], -1, 1e-5); };
    run_case("RMSNormalization rows of 300, X gradient only", e);
}

static void reduce_cases() {
    auto reduce = [](const char *name, Node nd, HT x, std::vector<int> axes, bool keep, double eps) {
        std::string mode = nd.op.substr(6);
        Case c{nd, {x}, {true}};
        c.eps = eps;
        c.ref = [axes, keep, mode](const std::vector<HT> &in) { return ref_reduce(in[0], axes, keep, mode); };
        run_case(name, c);
    };
    auto attr13 = [](const char *op) { Node n(op); n.opset = 13; return n; };
    reduce("ReduceMax axes attribute, keepdims 0", attr13("ReduceMax").is("axes", {1}).i("keepdims", 0),
           spaced({2, 3, 4}, 0.05), {1}, false, 1e-3);
    {
        HT axes = ints({1}, {-1});
        axes.host_only = true;
        Case c{Node("ReduceMax"), {spaced({3, 5}, 0.05), axes}, {true, false}};
        c.eps = 1e-3;
        c.ref = [](const std::vector<HT> &in) { return ref_reduce(in[0], {-1}, true, "Max"); };
        run_case("ReduceMax axes input -1 (opset 18), host only", c);
    }
    reduce("ReduceMax long rows (block kernel)", attr13("ReduceMax").is("axes", {1}), spaced({2, 100}, 0.01), {1}, true,
           1e-3);
    reduce("ReduceMin all axes", attr13("ReduceMin"), spaced({3, 4}, 0.05), {}, true, 1e-3);
    reduce("ReduceMin axes {0, 2}", attr13("ReduceMin").is("axes", {0, 2}), spaced({2, 3, 4}, 0.05), {0, 2}, true,
           1e-3);
    {
        Case c{Node("ReduceMin").i("noop_with_empty_axes", 1), {spaced({2, 3}, 0.05)}, {true}};
        c.ref = [](const std::vector<HT> &in) { return in[0]; };
        run_case("ReduceMin noop_with_empty_axes (identity)", c);
    }
    reduce("ReduceProd axes {0, 2}", attr13("ReduceProd").is("axes", {0, 2}), away_from_zero({2, 3, 4}), {0, 2}, true,
           1e-2);
    {
        HT x = away_from_zero({3, 4});
        x.f[1] = 0.f;                 /* one zero in row 0 */
        x.f[8] = 0.f, x.f[10] = 0.f;  /* two in row 2 */
        reduce("ReduceProd rows with zeros", attr13("ReduceProd").is("axes", {-1}).i("keepdims", 0), x, {-1}, false, 1e-2);
    }
    reduce("ReduceL1 axes {1}, keepdims 0", attr13("ReduceL1").is("axes", {1}).i("keepdims", 0),
           away_from_zero({2, 3, 4}), {1}, false, 1e-2);
    reduce("ReduceL2 axes {-1}", attr13("ReduceL2").is("axes", {-1}), randf({3, 5}), {-1}, true, 1e-2);
    reduce("ReduceL2 all axes", attr13("ReduceL2"), randf({4, 30}), {}, true, 1e-2);
    reduce("ReduceSumSquare axes {0}", attr13("ReduceSumSquare").is("axes", {0}), randf({3, 4}), {0}, true, 1e-2);
    {
        HT x = randf({2, 3, 4});
        for (auto &v : x.f) v = fabsf(v) + 0.5f;
        reduce("ReduceLogSum axes {1}", attr13("ReduceLogSum").is("axes", {1}), x, {1}, true, 1e-2);
    }
    reduce("ReduceLogSumExp axes {1}, keepdims 0", attr13("ReduceLogSumExp").is("axes", {1}).i("keepdims", 0),
           randf({2, 3, 4}), {1}, false, 1e-2);
    reduce("ReduceLogSumExp long rows (block kernel)", attr13("ReduceLogSumExp").is("axes", {-1}), randf({3, 200}), {-1},
           true, 1e-2);
    reduce_max_ties_case();

    /* ArgMax, ArgMin, Hardmax: forward only */
    {
        Case c{Node("ArgMax").i("axis", 1), {spaced({2, 4, 3}, 0.05)}, {false}};
        c.ref = [](const std::vector<HT> &in) { return ref_arg(in[0], 1, true, true, false); };
        run_case("ArgMax axis 1, keepdims", c);
        HT tied = randf({3, 6});
        for (auto &v : tied.f) v = roundf(v * 2.f); /* many ties */
        Case d{Node("ArgMin").i("axis", -1).i("keepdims", 0).i("select_last_index", 1), {tied}, {false}};
        d.ref = [](const std::vector<HT> &in) { return ref_arg(in[0], -1, false, false, true); };
        run_case("ArgMin axis -1, keepdims 0, select_last_index", d);
        Case e{Node("ArgMax").i("axis", -1), {tied}, {false}};
        e.ref = [](const std::vector<HT> &in) { return ref_arg(in[0], -1, true, true, false); };
        run_case("ArgMax ties: first index", e);
        Case h{Node("Hardmax").i("axis", 1), {spaced({2, 4, 3}, 0.05)}, {false}};
        h.node.opset = 13;
        h.ref = [](const std::vector<HT> &in) { return ref_hardmax(in[0], 2, 4, 3); };
        run_case("Hardmax axis 1 (opset 13)", h);
        Case k{Node("Hardmax"), {spaced({2, 4, 3}, 0.05)}, {false}};
        k.node.opset = 11; /* axis 1, coerced to (2, 12) */
        k.ref = [](const std::vector<HT> &in) { return ref_hardmax(in[0], 2, 12, 1); };
        run_case("Hardmax opset 11 (coerced to 2-D)", k);
    }
    lp_max_pool_cases();
    rmsnorm_cases();
    lpnorm_cases();
    mvn_cases();
    lrn_cases();
}
