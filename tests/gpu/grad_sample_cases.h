/* grad_sample_cases.h: test_grad.cu's cases for GridSample, RoiAlign and
 * MaxRoiPool (verify/ops_sample.cu). Included by test_grad.cu after its
 * scaffolding. */

/* ---- GridSample: the ONNX reference (op_grid_sample.py) on the host ---------------- */

struct GsMode {
    char mode;   /* 'l'inear, 'n'earest, 'c'ubic */
    char pad;    /* 'z'eros, 'b'order, 'r'eflection */
    bool align;
};

static double gs_ref_reflect(double x, double lo, double hi) {
    double rng = hi - lo;
    if (rng <= 0) return lo;
    if (x < lo) {
        double dx = lo - x;
        int64_t n = (int64_t)(dx / rng);
        double r = dx - n * rng;
        return n % 2 == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi;
        int64_t n = (int64_t)(dx / rng);
        double r = dx - n * rng;
        return n % 2 == 0 ? hi - r : lo + r;
    }
    return x;
}

/* _pixel_at_array's index, or -1 for a zero. */
static int64_t gs_ref_index(const GsMode &m, int64_t i, int64_t len, double lo, double hi) {
    if (m.pad == 'z') return i >= 0 && i < len ? i : -1;
    if (m.pad == 'r') i = (int64_t)gs_ref_reflect((double)i, lo, hi);
    return std::min(std::max(i, (int64_t)0), len - 1);
}

static double gs_ref_cubic(double s) { /* Keys, A = -0.75 */
    const double A = -0.75;
    s = fabs(s);
    if (s <= 1) return ((A + 2) * s - (A + 3)) * s * s + 1;
    return ((A * s - 5 * A) * s + 8 * A) * s - 4 * A;
}

/* The 1-D taps of one coordinate: indices and weights. */
static void gs_ref_taps(const GsMode &m, double gn, int64_t len, std::vector<int64_t> &idx,
                        std::vector<double> &w) {
    double x = m.align ? (gn + 1) / 2 * (len - 1) : ((gn + 1) * len - 1) / 2;
    double lo = m.align ? 0 : -0.5, hi = m.align ? len - 1 : len - 0.5;
    if (m.mode == 'n') x = nearbyint(x); /* half to even, as the node tests' 2-D and 3-D outputs */
    if (x < lo || x > hi) {
        if (m.pad == 'b') x = std::min(std::max(x, 0.0), (double)(len - 1));
        else if (m.pad == 'r') x = gs_ref_reflect(x, lo, hi);
    }
    idx.clear();
    w.clear();
    if (m.mode == 'n') { idx.push_back(gs_ref_index(m, (int64_t)x, len, lo, hi)); w.push_back(1); return; }
    int64_t x0 = (int64_t)floor(x);
    double t = x - x0;
    if (m.mode == 'l') {
        idx = {gs_ref_index(m, x0, len, lo, hi), gs_ref_index(m, x0 + 1, len, lo, hi)};
        w = {1 - t, t};
        return;
    }
    for (int k = 0; k < 4; k++) {
        idx.push_back(gs_ref_index(m, x0 - 1 + k, len, lo, hi));
        w.push_back(gs_ref_cubic(t + 1 - k));
    }
}

static HT ref_grid_sample(const HT &X, const HT &G, GsMode m) {
    int dims = (int)X.dims.size() - 2;
    int64_t N = X.dims[0], C = X.dims[1], in_size = 1, out_size = 1;
    std::vector<int64_t> yd = {N, C};
    for (int d = 0; d < dims; d++) { in_size *= X.dims[2 + d]; yd.push_back(G.dims[1 + d]); out_size *= G.dims[1 + d]; }
    HT Y = mk(yd);
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < out_size; o++) {
            std::vector<std::vector<int64_t>> idx(dims);
            std::vector<std::vector<double>> w(dims);
            for (int d = 0; d < dims; d++) /* the grid's last axis: innermost dim first */
                gs_ref_taps(m, G.f[(n * out_size + o) * dims + (dims - 1 - d)], X.dims[2 + d], idx[d], w[d]);
            for (int64_t c = 0; c < C; c++) {
                double acc = 0;
                std::vector<size_t> t(dims, 0);
                for (;;) { /* every combination of the dims' taps */
                    double wt = 1;
                    int64_t off = 0;
                    bool zero = false;
                    for (int d = 0; d < dims; d++) {
                        wt *= w[d][t[d]];
                        zero |= idx[d][t[d]] < 0;
                        off = off * X.dims[2 + d] + idx[d][t[d]];
                    }
                    if (!zero) acc += wt * X.f[(n * C + c) * in_size + off];
                    int d = dims - 1;
                    while (d >= 0 && ++t[d] == idx[d].size()) t[d--] = 0;
                    if (d < 0) break;
                }
                Y.f[(n * C + c) * out_size + o] = (float)acc;
            }
        }
    return Y;
}

/* A grid over [-1.3, 1.3) (some points outside, for the padding) whose
 * pixel coordinates keep 0.1 away from the integers and half-integers,
 * where taps, rounding and borders switch: finite differences there would
 * straddle a kink. */
static HT gs_grid(std::vector<int64_t> gd, const std::vector<int64_t> &xd, bool align) {
    HT g = randf(gd);
    int dims = (int)gd.back();
    for (size_t e = 0; e < g.f.size(); e++) {
        int64_t len = xd[2 + (dims - 1 - (int)(e % dims))];
        double n = 1.3 * g.f[e];
        double x = align ? (n + 1) / 2 * (len - 1) : ((n + 1) * len - 1) / 2;
        double frac = x - floor(x), near = fmin(fabs(frac - 0.5), fmin(frac, 1 - frac));
        if (near < 0.1) x += 0.2;
        g.f[e] = (float)(align ? 2 * x / (len - 1) - 1 : (2 * x + 1) / len - 1);
    }
    return g;
}

static void grid_sample_case(const char *name, const char *mode, const char *pad, bool align, std::vector<int64_t> xd,
                             std::vector<int64_t> gd, int64_t opset) {
    GsMode m = {mode[0] == 'b' ? (mode[2] == 'l' ? 'l' : 'c') : mode[0], pad[0], align};
    Case c{Node("GridSample").s("mode", mode).s("padding_mode", pad).i("align_corners", align),
           {randf(xd), gs_grid(gd, xd, align)}, {true, true}};
    c.node.opset = opset;
    c.eps = 1e-3;
    c.ref = [m](const std::vector<HT> &in) { return ref_grid_sample(in[0], in[1], m); };
    run_case(name, c);
}

/* ---- RoiAlign, MaxRoiPool: onnxruntime's CPU kernels on the host -------------------- */

static HT ref_roi_align(const HT &X, const HT &rois, const HT &batch, int64_t oh, int64_t ow, int64_t ratio,
                        double scale, bool half_pixel, bool max_mode) {
    int64_t C = X.dims[1], H = X.dims[2], W = X.dims[3], R = rois.dims[0];
    HT Y = mk({R, C, oh, ow});
    for (int64_t r = 0; r < R; r++) {
        double off = half_pixel ? 0.5 : 0;
        double x0 = rois.f[r * 4] * scale - off, y0 = rois.f[r * 4 + 1] * scale - off;
        double rw = rois.f[r * 4 + 2] * scale - off - x0, rh = rois.f[r * 4 + 3] * scale - off - y0;
        if (!half_pixel) { rw = std::max(rw, 1.0); rh = std::max(rh, 1.0); }
        double bh = rh / oh, bw = rw / ow;
        int64_t gh = ratio > 0 ? ratio : (int64_t)ceil(rh / oh), gw = ratio > 0 ? ratio : (int64_t)ceil(rw / ow);
        for (int64_t c = 0; c < C; c++)
            for (int64_t ph = 0; ph < oh; ph++)
                for (int64_t pw = 0; pw < ow; pw++) {
                    const float *xc = &X.f[(batch.i[r] * C + c) * H * W];
                    double acc = 0;
                    bool any = false;
                    for (int64_t iy = 0; iy < gh; iy++)
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double y = y0 + ph * bh + (iy + 0.5) * bh / gh, x = x0 + pw * bw + (ix + 0.5) * bw / gw;
                            double v[4] = {0, 0, 0, 0};
                            if (!(y < -1 || y > H || x < -1 || x > W)) {
                                y = std::max(y, 0.0);
                                x = std::max(x, 0.0);
                                int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
                                if (yl >= H - 1) { yh = yl = H - 1; y = (double)yl; } else yh = yl + 1;
                                if (xl >= W - 1) { xh = xl = W - 1; x = (double)xl; } else xh = xl + 1;
                                double ly = y - yl, lx = x - xl;
                                v[0] = (1 - ly) * (1 - lx) * xc[yl * W + xl];
                                v[1] = (1 - ly) * lx * xc[yl * W + xh];
                                v[2] = ly * (1 - lx) * xc[yh * W + xl];
                                v[3] = ly * lx * xc[yh * W + xh];
                            }
                            for (double e : v) {
                                if (!max_mode) acc += e;
                                else if (!any || e > acc) acc = e;
                                any = true;
                            }
                        }
                    if (!max_mode) acc /= (double)std::max(gh * gw, (int64_t)1);
                    Y.f[((r * C + c) * oh + ph) * ow + pw] = (float)acc;
                }
    }
    return Y;
}

static HT ref_max_roi_pool(const HT &X, const HT &rois, int64_t PH, int64_t PW, double scale) {
    int64_t C = X.dims[1], H = X.dims[2], W = X.dims[3], R = rois.dims[0];
    HT Y = mk({R, C, PH, PW});
    for (int64_t r = 0; r < R; r++) {
        const float *q = &rois.f[r * 5];
        int64_t b = (int64_t)q[0], x1 = (int64_t)round(q[1] * scale), y1 = (int64_t)round(q[2] * scale);
        int64_t x2 = (int64_t)round(q[3] * scale), y2 = (int64_t)round(q[4] * scale);
        double bh = (double)std::max(y2 - y1 + 1, (int64_t)1) / PH, bw = (double)std::max(x2 - x1 + 1, (int64_t)1) / PW;
        for (int64_t c = 0; c < C; c++)
            for (int64_t ph = 0; ph < PH; ph++)
                for (int64_t pw = 0; pw < PW; pw++) {
                    int64_t hs = std::min(std::max((int64_t)floor(ph * bh) + y1, (int64_t)0), H);
                    int64_t he = std::min(std::max((int64_t)ceil((ph + 1) * bh) + y1, (int64_t)0), H);
                    int64_t ws = std::min(std::max((int64_t)floor(pw * bw) + x1, (int64_t)0), W);
                    int64_t we = std::min(std::max((int64_t)ceil((pw + 1) * bw) + x1, (int64_t)0), W);
                    double best = he <= hs || we <= ws ? 0 : -1e30;
                    for (int64_t h = hs; h < he; h++)
                        for (int64_t w = ws; w < we; w++) best = std::max(best, (double)X.f[((b * C + c) * H + h) * W + w]);
                    Y.f[((r * C + c) * PH + ph) * PW + pw] = (float)best;
                }
    }
    return Y;
}

static void sample_cases() {
    /* GridSample: 2-D (opset 16's mode names) and 3-D / 1-D (opset 20's) */
    grid_sample_case("GridSample bilinear zeros", "bilinear", "zeros", false, {2, 3, 4, 5}, {2, 3, 4, 2}, 16);
    grid_sample_case("GridSample bilinear border align_corners", "bilinear", "border", true, {1, 2, 5, 4}, {1, 4, 3, 2}, 16);
    grid_sample_case("GridSample bilinear reflection", "bilinear", "reflection", false, {2, 2, 3, 4}, {2, 3, 3, 2}, 16);
    grid_sample_case("GridSample bilinear reflection align_corners", "bilinear", "reflection", true, {1, 2, 4, 4},
                     {1, 3, 3, 2}, 16);
    grid_sample_case("GridSample nearest zeros", "nearest", "zeros", false, {1, 3, 4, 5}, {1, 3, 4, 2}, 16);
    grid_sample_case("GridSample nearest border", "nearest", "border", false, {1, 2, 4, 3}, {1, 3, 3, 2}, 16);
    grid_sample_case("GridSample bicubic zeros", "bicubic", "zeros", false, {1, 2, 5, 5}, {1, 3, 4, 2}, 16);
    grid_sample_case("GridSample bicubic border align_corners", "bicubic", "border", true, {1, 2, 5, 4}, {1, 3, 3, 2}, 16);
    grid_sample_case("GridSample cubic reflection (opset 20)", "cubic", "reflection", false, {1, 1, 5, 5}, {1, 3, 3, 2}, 20);
    grid_sample_case("GridSample 3-D linear zeros", "linear", "zeros", false, {1, 2, 3, 4, 3}, {1, 2, 3, 2, 3}, 20);
    grid_sample_case("GridSample 3-D linear border align_corners", "linear", "border", true, {2, 1, 3, 3, 4}, {2, 2, 2, 2, 3},
                     20);
    grid_sample_case("GridSample 3-D nearest reflection", "nearest", "reflection", false, {1, 2, 3, 4, 3}, {1, 2, 2, 3, 3},
                     20);
    grid_sample_case("GridSample 1-D linear reflection", "linear", "reflection", false, {2, 2, 6}, {2, 5, 1}, 20);

    /* RoiAlign: X [2, 3, 8, 8], three boxes */
    HT rois = floats({3, 4}, {0.6f, 1.2f, 5.3f, 6.1f, 2.2f, 0.4f, 7.4f, 3.3f, 1.1f, 2.7f, 3.9f, 7.8f});
    HT batch = ints({3}, {1, 0, 1});
    {
        Case a{Node("RoiAlign").i("output_height", 3).i("output_width", 2).i("sampling_ratio", 2),
               {randf({2, 3, 8, 8}), rois, batch}, {true, false, false}};
        a.node.opset = 16;
        a.ref = [](const std::vector<HT> &in) { return ref_roi_align(in[0], in[1], in[2], 3, 2, 2, 1.0, true, false); };
        run_case("RoiAlign avg half_pixel sampling_ratio 2", a);
        Case b{Node("RoiAlign").i("output_height", 2).i("output_width", 3).f("spatial_scale", 0.5),
               {randf({2, 3, 8, 8}), rois, batch}, {true, false, false}};
        b.node.opset = 10;
        b.ref = [](const std::vector<HT> &in) { return ref_roi_align(in[0], in[1], in[2], 2, 3, 0, 0.5, false, false); };
        run_case("RoiAlign avg opset 10 (output_half_pixel), adaptive sampling, spatial_scale 0.5", b);
        Case c{Node("RoiAlign").s("mode", "max").s("coordinate_transformation_mode", "output_half_pixel")
                   .i("output_height", 2).i("output_width", 2),
               {randf({2, 3, 8, 8}), rois, batch}, {true, false, false}};
        c.node.opset = 16;
        c.eps = 1e-3;
        c.ref = [](const std::vector<HT> &in) { return ref_roi_align(in[0], in[1], in[2], 2, 2, 0, 1.0, false, true); };
        run_case("RoiAlign max output_half_pixel (keeps X)", c);
    }
    /* MaxRoiPool: boxes as (batch, x1, y1, x2, y2) */
    {
        HT boxes = floats({3, 5}, {1, 0.4f, 1.2f, 5.3f, 6.1f, 0, 2.2f, 0.4f, 7.4f, 3.3f, 1, 3.1f, 2.7f, 3.9f, 7.8f});
        Case a{Node("MaxRoiPool").is("pooled_shape", {2, 3}), {randf({2, 3, 8, 8}), boxes}, {true, false}};
        a.node.opset = 1;
        a.eps = 1e-3;
        a.ref = [](const std::vector<HT> &in) { return ref_max_roi_pool(in[0], in[1], 2, 3, 1.0); };
        run_case("MaxRoiPool 2x3 (keeps the int32 arg max)", a);
        Case b{Node("MaxRoiPool").is("pooled_shape", {3, 3}).f("spatial_scale", 0.5), {randf({2, 2, 6, 7}), boxes},
               {true, false}};
        b.node.opset = 1;
        b.eps = 1e-3;
        b.ref = [](const std::vector<HT> &in) { return ref_max_roi_pool(in[0], in[1], 3, 3, 0.5); };
        run_case("MaxRoiPool 3x3 spatial_scale 0.5 (bins sharing pixels)", b);
    }
}
