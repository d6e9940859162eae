/*
 * grad_layout_cases.h: the layout and select families' cases
 * (verify/ops_layout.cu: Tile, DepthToSpace, SpaceToDepth, ReverseSequence,
 * Col2Im, EyeLike, OneHot, the random generators; verify/ops_select.cu:
 * ScatterElements, Scatter, TopK, MaxUnpool; CenterCropPad in ops_layout.cu;
 * Size from ops_shape.c) for
 * test_grad_elementwise.cu, which includes this after grad_index_cases.h
 * (coords_of, offset_of). Forward against host references, backward against
 * finite differences; integer outputs exactly; random ones by their range
 * and moments.
 */

/* ---- host references -------------------------------------------------------------------- */

static HT ref_tile(const HT &x, std::vector<int64_t> reps) {
    std::vector<int64_t> od = x.dims;
    for (size_t d = 0; d < od.size(); d++) od[d] *= reps[d];
    HT y = mk(od);
    for (int64_t e = 0; e < y.numel(); e++) {
        std::vector<int64_t> c = coords_of(od, e);
        for (size_t d = 0; d < od.size(); d++) c[d] %= x.dims[d];
        y.f[e] = x.f[offset_of(x.dims, c)];
    }
    return y;
}

/* DepthToSpace by its ONNX definition: out[n, c, h*b+i, w*b+j] =
 * x[n, (i*b+j)*C' + c, h, w] (DCR) or x[n, c*b*b + i*b + j, h, w] (CRD). */
static HT ref_depth_to_space(const HT &x, int64_t b, bool crd) {
    int64_t N = x.dims[0], C = x.dims[1] / (b * b), H = x.dims[2], W = x.dims[3];
    HT y = mk({N, C, H * b, W * b});
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < b; i++)
                    for (int64_t w = 0; w < W; w++)
                        for (int64_t j = 0; j < b; j++) {
                            int64_t dc = crd ? c * b * b + i * b + j : (i * b + j) * C + c;
                            y.f[offset_of(y.dims, {n, c, h * b + i, w * b + j})] = x.f[offset_of(x.dims, {n, dc, h, w})];
                        }
    return y;
}

static HT ref_space_to_depth(const HT &x, int64_t b) {
    int64_t N = x.dims[0], C = x.dims[1], H = x.dims[2] / b, W = x.dims[3] / b;
    HT y = mk({N, C * b * b, H, W});
    for (int64_t e = 0; e < x.numel(); e++) {
        std::vector<int64_t> c = coords_of(x.dims, e);
        int64_t i = c[2] % b, j = c[3] % b;
        y.f[offset_of(y.dims, {c[0], (i * b + j) * C + c[1], c[2] / b, c[3] / b})] = x.f[e];
    }
    return y;
}

static HT ref_reverse_sequence(const HT &x, const std::vector<int64_t> &lens, int ta, int ba) {
    HT y = mk(x.dims);
    for (int64_t e = 0; e < x.numel(); e++) {
        std::vector<int64_t> c = coords_of(x.dims, e);
        int64_t len = lens[c[ba]];
        if (c[ta] < len) c[ta] = len - 1 - c[ta];
        y.f[e] = x.f[offset_of(x.dims, c)];
    }
    return y;
}

/* ScatterElements: red 'n'one or 'a'dd. */
static HT ref_scatter_elements(const HT &x, const HT &idx, const HT &u, int axis, char red) {
    HT y = x;
    for (int64_t e = 0; e < idx.numel(); e++) {
        std::vector<int64_t> c = coords_of(idx.dims, e);
        int64_t v = idx.i[e];
        if (v < 0) v += x.dims[axis];
        c[axis] = v;
        int64_t t = offset_of(x.dims, c);
        y.f[t] = red == 'a' ? y.f[t] + u.f[e] : u.f[e];
    }
    return y;
}

/* TopK values, sorted, ties to the lower index. */
static HT ref_topk(const HT &x, int64_t k, int axis, bool largest) {
    std::vector<int64_t> od = x.dims;
    od[axis] = k;
    HT y = mk(od);
    int64_t len = x.dims[axis];
    for (int64_t e = 0; e < y.numel(); e++) {
        std::vector<int64_t> c = coords_of(od, e);
        std::vector<std::pair<float, int64_t>> row;
        for (int64_t j = 0; j < len; j++) {
            std::vector<int64_t> cj = c;
            cj[axis] = j;
            row.push_back({x.f[offset_of(x.dims, cj)], j});
        }
        std::stable_sort(row.begin(), row.end(), [largest](const std::pair<float, int64_t> &a, const std::pair<float, int64_t> &b) {
            return largest ? a.first > b.first : a.first < b.first;
        });
        y.f[e] = row[c[axis]].first;
    }
    return y;
}

static HT valuesf(std::vector<float> v) { HT t; t.dims = {(int64_t)v.size()}; t.f = v; t.host_only = true; return t; }

/* Nothing of the inputs kept on the device for backward (input k a stub). */
static Check keeps_no_input(int k) {
    return [k](vx_run &run, const HT &, const std::vector<float> &, const std::vector<HT> &) {
        if (run.in[k] && run.in[k]->data) { printf("  input %d was kept\n", k); return false; }
        return true;
    };
}

/* ---- cases -------------------------------------------------------------------------------- */

static void tile_cases() {
    Case a{Node("Tile"), {randf({2, 3, 4}), vec({1, 2, 3})}, {true, false}};
    a.ref = [](const std::vector<HT> &in) { return ref_tile(in[0], {1, 2, 3}); };
    a.check = keeps_no_input(0);
    run_case("Tile [2,3,4] by (1,2,3), keeps nothing", a);
    Case b{Node("Tile"), {randf({3, 1}), ints({2}, {2, 5}, false)}, {true, false}};
    b.ref = [](const std::vector<HT> &in) { return ref_tile(in[0], {2, 5}); };
    run_case("Tile [3,1] by (2,5), device repeats", b);
    Case c{Node("Tile"), {ints({2}, {7, 8}, false), vec({3})}, {false, false}};
    c.check = exact_check({7, 8, 7, 8, 7, 8});
    run_case("Tile int64", c);
}

static void depth_space_cases() {
    Case a{Node("DepthToSpace").i("blocksize", 2), {randf({2, 8, 2, 3})}, {true}};
    a.ref = [](const std::vector<HT> &in) { return ref_depth_to_space(in[0], 2, false); };
    a.check = keeps_no_input(0);
    run_case("DepthToSpace DCR blocksize 2", a);
    Case b{Node("DepthToSpace").i("blocksize", 2).s("mode", "CRD"), {randf({1, 12, 3, 2})}, {true}};
    b.ref = [](const std::vector<HT> &in) { return ref_depth_to_space(in[0], 2, true); };
    run_case("DepthToSpace CRD blocksize 2", b);
    Case c{Node("SpaceToDepth").i("blocksize", 2), {randf({2, 3, 4, 6})}, {true}};
    c.ref = [](const std::vector<HT> &in) { return ref_space_to_depth(in[0], 2); };
    c.check = keeps_no_input(0);
    run_case("SpaceToDepth blocksize 2", c);
    Case d{Node("SpaceToDepth").i("blocksize", 3), {randf({1, 2, 3, 6})}, {true}};
    d.ref = [](const std::vector<HT> &in) { return ref_space_to_depth(in[0], 3); };
    run_case("SpaceToDepth blocksize 3", d);
}

static void reverse_sequence_cases() {
    Case a{Node("ReverseSequence").i("time_axis", 0).i("batch_axis", 1), {randf({4, 3, 2}), vec({4, 1, 2})}, {true, false}};
    a.ref = [](const std::vector<HT> &in) { return ref_reverse_sequence(in[0], {4, 1, 2}, 0, 1); };
    a.check = keeps_no_input(1);
    run_case("ReverseSequence time 0, batch 1", a);
    Case b{Node("ReverseSequence").i("time_axis", 1).i("batch_axis", 0), {randf({3, 4}), vec({1, 2, 3})}, {true, false}};
    b.ref = [](const std::vector<HT> &in) { return ref_reverse_sequence(in[0], {1, 2, 3}, 1, 0); };
    run_case("ReverseSequence batch 0, time 1", b);
}

static void eye_one_hot_cases() {
    Case a{Node("EyeLike").i("k", 1), {randf({3, 4})}, {false}};
    a.ref = [](const std::vector<HT> &in) {
        HT y = mk(in[0].dims);
        for (int64_t r = 0; r < 3; r++)
            for (int64_t c = 0; c < 4; c++) y.f[r * 4 + c] = c - r == 1 ? 1.f : 0.f;
        return y;
    };
    run_case("EyeLike k 1", a);
    Case b{Node("EyeLike").i("k", -1).i("dtype", 7), {randf({3, 2})}, {false}};
    b.check = exact_check({0, 0, 1, 0, 0, 1});
    run_case("EyeLike k -1, int64", b);
    Case c{Node("OneHot"), {ints({2, 3}, {0, 2, -1, 1, 3, 0}, false), ints({}, {4}), valuesf({0.5f, 2.f})},
           {false, false, false}};
    c.ref = [](const std::vector<HT> &in) {
        HT y = mk({2, 3, 4});
        for (int64_t e = 0; e < 6; e++)
            for (int64_t d = 0; d < 4; d++) y.f[e * 4 + d] = ((in[0].i[e] + 4) % 4 == d) ? 2.f : 0.5f;
        return y;
    };
    run_case("OneHot axis -1, negative index, values (0.5, 2)", c);
    Case d{Node("OneHot").i("axis", 0), {ints({2}, {1, 0}, false), ints({}, {3}), vec({0, 1})}, {false, false, false}};
    d.check = exact_check({0, 1, 1, 0, 0, 0});
    run_case("OneHot axis 0, int64 values", d);
    Case e{Node("Size"), {randf({2, 3, 4})}, {false}};
    e.check = exact_check({24});
    run_case("Size", e);
}

/* mean and variance within tolerance, and a range. */
static Check moments_check(const char *what, std::vector<int64_t> dims, double mean, double var, double lo, double hi) {
    return [=](vx_run &, const HT &y, const std::vector<float> &, const std::vector<HT> &) {
        double m = 0, v = 0, mn = 1e30, mx = -1e30;
        for (float x : y.f) { m += x; mn = std::min(mn, (double)x); mx = std::max(mx, (double)x); }
        m /= (double)y.f.size();
        for (float x : y.f) v += (x - m) * (x - m);
        v /= (double)y.f.size();
        bool ok = y.dims == dims && fabs(m - mean) < 0.1 * (1 + fabs(mean)) && fabs(v - var) < 0.15 * var && mn >= lo &&
                  mx < hi;
        if (!ok) printf("  %s: mean %g var %g min %g max %g\n", what, m, v, mn, mx);
        return ok;
    };
}

static void random_cases() {
    Case a{Node("RandomUniform").is("shape", {40, 50}).f("low", 1.0).f("high", 3.0), {}, {}};
    a.check = moments_check("RandomUniform", {40, 50}, 2.0, 4.0 / 12, 1.0, 3.0);
    run_case("RandomUniform [1, 3)", a);
    Case b{Node("RandomNormal").is("shape", {64, 64}).f("mean", 2.0).f("scale", 0.5), {}, {}};
    b.check = moments_check("RandomNormal", {64, 64}, 2.0, 0.25, -1e30, 1e30);
    run_case("RandomNormal mean 2 scale 0.5", b);
    Case c{Node("RandomNormalLike"), {randf({32, 100})}, {false}};
    c.check = moments_check("RandomNormalLike", {32, 100}, 0.0, 1.0, -1e30, 1e30);
    run_case("RandomNormalLike", c);
    HT p = mk({1000});
    for (int64_t e = 0; e < 1000; e++) p.f[e] = e % 3 == 0 ? 0.f : e % 3 == 1 ? 1.f : 0.5f;
    Case d{Node("Bernoulli"), {p}, {false}};
    d.check = [](vx_run &, const HT &y, const std::vector<float> &, const std::vector<HT> &) {
        int64_t half = 0;
        for (int64_t e = 0; e < 1000; e++) {
            float want = e % 3 == 0 ? 0.f : 1.f;
            if (e % 3 == 2) { half += y.f[e] == 1.f; if (y.f[e] != 0.f && y.f[e] != 1.f) return false; continue; }
            if (y.f[e] != want) { printf("  Bernoulli: p %d gave %g\n", (int)want, y.f[e]); return false; }
        }
        if (half < 120 || half > 213) { printf("  Bernoulli: %lld of 333 at p 0.5\n", (long long)half); return false; }
        return true;
    };
    run_case("Bernoulli p 0, 1, 0.5", d);
    Case e{Node("Bernoulli").i("dtype", 9), {p}, {false}};
    e.check = [](vx_run &, const HT &y, const std::vector<float> &, const std::vector<HT> &) {
        return y.dt == VX_BOOL && y.i[0] == 0 && y.i[1] == 1;
    };
    run_case("Bernoulli bool output", e);
}

static void scatter_elements_cases() {
    HT idx = ints({2, 3}, {1, 0, 2, 3, -2, 0}, false); /* distinct per row: 'none' has one writer per cell */
    Case a{Node("ScatterElements").i("axis", 1), {randf({2, 4}), idx, randf({2, 3})}, {true, false, true}};
    a.ref = [](const std::vector<HT> &in) { return ref_scatter_elements(in[0], in[1], in[2], 1, 'n'); };
    run_case("ScatterElements axis 1, negative index", a);
    HT dup = ints({3, 2}, {0, 1, 2, 1, 0, 1}, false);
    Case b{Node("ScatterElements").s("reduction", "add"), {randf({3, 2}), dup, randf({3, 2})}, {true, false, true}};
    b.ref = [](const std::vector<HT> &in) { return ref_scatter_elements(in[0], in[1], in[2], 0, 'a'); };
    run_case("ScatterElements add axis 0, duplicates", b);
    Case c{Node("ScatterElements").s("reduction", "add"), {randf({3, 2}), dup, randf({3, 2})}, {true, false, false}};
    c.ref = b.ref;
    c.check = keeps_no_input(1);
    run_case("ScatterElements add, data gradient only (indices not kept)", c);
    Case d{Node("Scatter").ops(9).i("axis", 0), {randf({3, 3}), ints({1, 3}, {2, 0, 1}), randf({1, 3})}, {true, false, true}};
    d.ref = [](const std::vector<HT> &in) { return ref_scatter_elements(in[0], in[1], in[2], 0, 'n'); };
    run_case("Scatter (opset 9), host indices", d);
    Case e{Node("ScatterElements"), {ints({3}, {1, 2, 3}, false), ints({2}, {2, 0}, false), ints({2}, {9, 8}, false)},
           {false, false, false}};
    e.check = exact_check({8, 2, 9});
    run_case("ScatterElements int64", e);
}

static void topk_cases() {
    Node two("TopK");
    two.n_out = 2;
    /* values 0.15 apart in each row: finite differences of 0.01 never
     * reorder them, which would move a gradient between output slots */
    HT spaced = randf({3, 7});
    const float levels[7] = {0.9f, -0.3f, 0.45f, -0.75f, 0.15f, 0.6f, -0.15f};
    for (int r = 0; r < 3; r++)
        for (int j = 0; j < 7; j++) spaced.f[r * 7 + j] = levels[(j + 3 * r) % 7];
    Case a{two, {spaced, vec({3})}, {true, false}};
    a.ref = [](const std::vector<HT> &in) { return ref_topk(in[0], 3, 1, true); };
    a.check = keeps_no_input(0);
    run_case("TopK largest 3 of 7, keeps only the indices", a);
    Node low = two;
    low.i("axis", 0).i("largest", 0);
    Case b{low, {randf({5, 2, 3}), vec({2})}, {true, false}};
    b.ref = [](const std::vector<HT> &in) { return ref_topk(in[0], 2, 0, false); };
    run_case("TopK smallest 2 along axis 0", b);
    Case c{two, {randf({2, 4}), vec({4})}, {false, false}};
    c.out = 1;
    c.check = [](vx_run &, const HT &y, const std::vector<float> &, const std::vector<HT> &) {
        if (y.dt != VX_I64 || y.i.size() != 8) return false;
        for (int r = 0; r < 2; r++) {
            std::vector<int64_t> s(y.i.begin() + 4 * r, y.i.begin() + 4 * r + 4);
            std::sort(s.begin(), s.end());
            if (s != std::vector<int64_t>{0, 1, 2, 3}) { printf("  TopK indices are not a permutation\n"); return false; }
        }
        return true;
    };
    run_case("TopK indices (k = length: a permutation)", c);
}

static void crop_unpool_cases() {
    /* crop axis 0 from 5 to 3 (start 1), pad axis 1 from 4 to 7 (1 before, 2 after) */
    Case a{Node("CenterCropPad"), {randf({5, 4}), vec({3, 7})}, {true, false}};
    a.ref = [](const std::vector<HT> &in) {
        HT y = mk({3, 7});
        for (int64_t r = 0; r < 3; r++)
            for (int64_t c = 0; c < 7; c++) y.f[r * 7 + c] = c >= 1 && c < 5 ? in[0].f[(r + 1) * 4 + c - 1] : 0.f;
        return y;
    };
    a.check = keeps_no_input(0);
    run_case("CenterCropPad crop and pad", a);
    Case b{Node("CenterCropPad").is("axes", {-2}), {randf({2, 6, 3}), vec({3})}, {true, false}};
    b.ref = [](const std::vector<HT> &in) { return ref_split_piece(in[0], 1, 1, 3); };
    run_case("CenterCropPad axes (-2), odd crop", b);
    /* kernel 2, stride 2: each pooled element names one cell of its window */
    HT x = randf({1, 2, 2, 2});
    std::vector<int64_t> iv;
    for (int64_t c = 0; c < 2; c++)
        for (int64_t h = 0; h < 2; h++)
            for (int64_t w = 0; w < 2; w++) iv.push_back(c * 16 + (2 * h + (h + c) % 2) * 4 + 2 * w + (w + c + h) % 2);
    HT idx = ints({1, 2, 2, 2}, iv, false);
    Case c{Node("MaxUnpool").is("kernel_shape", {2, 2}).is("strides", {2, 2}), {x, idx}, {true, false}};
    c.ref = [](const std::vector<HT> &in) {
        HT y = mk({1, 2, 4, 4});
        for (int64_t e = 0; e < in[0].numel(); e++) y.f[in[1].i[e]] = in[0].f[e];
        return y;
    };
    run_case("MaxUnpool 2x2 stride 2", c);
    Case d{Node("MaxUnpool").is("kernel_shape", {2, 2}).is("strides", {2, 2}), {x, idx, vec({1, 2, 5, 4})},
           {true, false, false}};
    /* the indices count over the default shape (1, 2, 4, 4); output_shape
     * keeps each cell at its coordinates (the onnx reference, and the node
     * test test_maxunpool_export_with_output_shape) */
    d.ref = [](const std::vector<HT> &in) {
        HT y = mk({1, 2, 5, 4});
        for (int64_t e = 0; e < in[0].numel(); e++) {
            int64_t t = in[1].i[e], w = t % 4, h = t / 4 % 4, c = t / 16;
            y.f[(c * 5 + h) * 4 + w] = in[0].f[e];
        }
        return y;
    };
    run_case("MaxUnpool with output_shape", d);
}

/* Col2Im, 2-D: out[n, c, y, x] sums in[n, c * kh * kw + tap, block] over the
 * blocks and taps that land on (y, x). */
static HT ref_col2im(const HT &x, std::vector<int64_t> img, std::vector<int64_t> blk, std::vector<int64_t> pads,
                     std::vector<int64_t> st) {
    int64_t N = x.dims[0], K = blk[0] * blk[1], C = x.dims[1] / K;
    int64_t bh = (img[0] + pads[0] + pads[2] - blk[0]) / st[0] + 1, bw = (img[1] + pads[1] + pads[3] - blk[1]) / st[1] + 1;
    HT y = mk({N, C, img[0], img[1]});
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t ky = 0; ky < blk[0]; ky++)
                for (int64_t kx = 0; kx < blk[1]; kx++)
                    for (int64_t oy = 0; oy < bh; oy++)
                        for (int64_t ox = 0; ox < bw; ox++) {
                            int64_t py = oy * st[0] - pads[0] + ky, px = ox * st[1] - pads[1] + kx;
                            if (py < 0 || py >= img[0] || px < 0 || px >= img[1]) continue;
                            y.f[((n * C + c) * img[0] + py) * img[1] + px] +=
                                x.f[((n * C * K) + c * K + ky * blk[1] + kx) * (bh * bw) + oy * bw + ox];
                        }
    return y;
}

static void col2im_cases() {
    Case a{Node("Col2Im"), {randf({1, 8, 12}), vec({4, 5}), vec({2, 2})}, {true, false, false}};
    a.ref = [](const std::vector<HT> &in) { return ref_col2im(in[0], {4, 5}, {2, 2}, {0, 0, 0, 0}, {1, 1}); };
    a.check = keeps_no_input(0);
    run_case("Col2Im 2x2 blocks over 4x5, keeps nothing", a);
    Case b{Node("Col2Im").is("pads", {1, 1, 1, 1}).is("strides", {2, 2}), {randf({2, 9, 9}), vec({5, 5}), vec({3, 3})},
           {true, false, false}};
    b.ref = [](const std::vector<HT> &in) { return ref_col2im(in[0], {5, 5}, {3, 3}, {1, 1, 1, 1}, {2, 2}); };
    run_case("Col2Im 3x3 blocks, pads 1, strides 2", b);
}

static void layout_cases() {
    tile_cases();
    depth_space_cases();
    reverse_sequence_cases();
    eye_one_hot_cases();
    random_cases();
    scatter_elements_cases();
    topk_cases();
    crop_unpool_cases();
    col2im_cases();
}
