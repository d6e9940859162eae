/*
 * grad_index_cases.h: the index family's cases (verify/ops_index.cu: Split,
 * Pad, CumSum, Trilu, GatherND, ScatterND) for test_grad_elementwise.cu,
 * which includes this once, after its harness (HT, Case, run_case) and
 * before main. Forward against the host references below, backward against
 * finite differences; integer outputs exactly.
 */

/* ---- host references -------------------------------------------------------------------- */

/* Row-major coordinates of element e of dims. */
static std::vector<int64_t> coords_of(const std::vector<int64_t> &dims, int64_t e) {
    std::vector<int64_t> c(dims.size());
    for (int d = (int)dims.size() - 1; d >= 0; d--) {
        c[d] = e % dims[d];
        e /= dims[d];
    }
    return c;
}
static int64_t offset_of(const std::vector<int64_t> &dims, const std::vector<int64_t> &c) {
    int64_t off = 0;
    for (size_t d = 0; d < dims.size(); d++) off = off * dims[d] + c[d];
    return off;
}

/* numpy.pad: mode 'c'onstant, 'r'eflect, 'e'dge, 'w'rap; begin / end per dim. */
static HT ref_pad(const HT &x, std::vector<int64_t> begin, std::vector<int64_t> end, char mode, float value) {
    std::vector<int64_t> od = x.dims;
    for (size_t d = 0; d < od.size(); d++) od[d] += begin[d] + end[d];
    HT y = mk(od);
    for (int64_t e = 0; e < y.numel(); e++) {
        std::vector<int64_t> c = coords_of(od, e);
        bool pad = false;
        for (size_t d = 0; d < od.size(); d++) {
            int64_t n = x.dims[d], i = c[d] - begin[d];
            if (i >= 0 && i < n) { c[d] = i; continue; }
            if (mode == 'c') pad = true;
            else if (mode == 'e') i = i < 0 ? 0 : n - 1;
            else if (mode == 'w') i = ((i % n) + n) % n;
            else if (n == 1)
                i = 0;
            else
                while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
            c[d] = i;
        }
        y.f[e] = pad ? value : x.f[offset_of(x.dims, c)];
    }
    return y;
}

static HT ref_cumsum(const HT &x, int axis, bool exclusive, bool reverse) {
    int r = (int)x.dims.size();
    if (axis < 0) axis += r;
    HT y = mk(x.dims);
    for (int64_t e = 0; e < x.numel(); e++) {
        std::vector<int64_t> c = coords_of(x.dims, e);
        int64_t at = c[axis];
        double s = 0;
        for (int64_t j = 0; j < x.dims[axis]; j++) {
            bool in = reverse ? (exclusive ? j > at : j >= at) : (exclusive ? j < at : j <= at);
            c[axis] = j;
            if (in) s += x.f[offset_of(x.dims, c)];
        }
        y.f[e] = (float)s;
    }
    return y;
}

static HT ref_trilu(const HT &x, int64_t k, bool upper) {
    HT y = x;
    y.view = false;
    int64_t rows = x.dims[x.dims.size() - 2], cols = x.dims.back();
    for (int64_t e = 0; e < x.numel(); e++) {
        int64_t i = e / cols % rows, j = e % cols;
        if (!(upper ? j - i >= k : j - i <= k)) y.f[e] = 0.f;
    }
    return y;
}

/* Data element (offset) of gathered element e: index tuples idx (last dim
 * m) address data dims b..b+m-1; -1 when out of range. */
static int64_t ref_nd_offset(const std::vector<int64_t> &xd, const HT &idx, int b, int64_t e,
                             std::vector<int64_t> *gathered_dims) {
    int64_t m = idx.dims.back(), slice = 1, batches = 1, tuples = 1;
    for (size_t d = b + m; d < xd.size(); d++) slice *= xd[d];
    for (int d = 0; d < b; d++) batches *= idx.dims[d];
    for (size_t d = 0; d + 1 < idx.dims.size(); d++) tuples *= idx.dims[d];
    if (gathered_dims) {
        gathered_dims->assign(idx.dims.begin(), idx.dims.end() - 1);
        for (size_t d = b + m; d < xd.size(); d++) gathered_dims->push_back(xd[d]);
    }
    int64_t n = e / slice;
    std::vector<int64_t> c(xd.size());
    std::vector<int64_t> bd(xd.begin(), xd.begin() + b), rest(xd.begin() + b + m, xd.end());
    std::vector<int64_t> bc = coords_of(bd, n / (tuples / batches)), rc = coords_of(rest, e % slice);
    for (int d = 0; d < b; d++) c[d] = bc[d];
    for (int64_t j = 0; j < m; j++) {
        int64_t k = idx.i[n * m + j];
        if (k < 0) k += xd[b + j];
        if (k < 0 || k >= xd[b + j]) return -1;
        c[b + j] = k;
    }
    for (size_t d = 0; d < rest.size(); d++) c[b + m + d] = rc[d];
    return offset_of(xd, c);
}

static HT ref_gather_nd(const HT &x, const HT &idx, int b) {
    std::vector<int64_t> od;
    ref_nd_offset(x.dims, idx, b, 0, &od);
    HT y = mk(od);
    for (int64_t e = 0; e < y.numel(); e++) {
        int64_t k = ref_nd_offset(x.dims, idx, b, e, NULL);
        y.f[e] = k >= 0 ? x.f[k] : 0.f;
    }
    return y;
}

/* reduction: 'n'one, 'a'dd, 'm'ul, 'x' max, 'i' min; updates in order. */
static HT ref_scatter_nd(const HT &x, const HT &idx, const HT &u, char red) {
    HT y = x;
    y.view = false;
    for (int64_t e = 0; e < u.numel(); e++) {
        int64_t k = ref_nd_offset(x.dims, idx, 0, e, NULL);
        if (k < 0) continue;
        float &v = y.f[k], w = u.f[e];
        v = red == 'n' ? w : red == 'a' ? v + w : red == 'm' ? v * w : red == 'x' ? std::max(v, w) : std::min(v, w);
    }
    return y;
}

static HT ref_split_piece(const HT &x, int axis, int64_t start, int64_t size) {
    return ref_slice(x, {start}, {start + size}, {axis}, {});
}

/* ---- cases ------------------------------------------------------------------------------- */

static Node split_node(int n_out) {
    Node n("Split");
    n.n_out = n_out;
    return n;
}

static void split_cases() {
    HT x = randf({4, 6, 3});
    for (int k = 0; k < 3; k++) {
        int64_t starts[] = {0, 1, 4}, sizes[] = {1, 3, 2};
        Case c{split_node(3).i("axis", 1), {x, vec({1, 3, 2})}, {true, false}};
        c.out = k;
        int64_t st = starts[k], sz = sizes[k];
        c.ref = [st, sz](const std::vector<HT> &in) { return ref_split_piece(in[0], 1, st, sz); };
        /* a piece along a middle axis is a strided view, not a copy */
        c.check = [](vx_run &run, const HT &, const std::vector<float> &, const std::vector<HT> &) {
            for (int j = 0; j < 3; j++)
                if (!run.out[j] || !run.out[j]->strided) { printf("  piece %d is not a strided view\n", j); return false; }
            return true;
        };
        char name[96];
        snprintf(name, sizeof name, "Split axis 1 sizes (1,3,2) input, piece %d", k);
        run_case(name, c);
    }
    Case a{split_node(3).i("axis", -1).i("num_outputs", 3), {randf({2, 7})}, {true}};
    a.out = 2;
    a.ref = [](const std::vector<HT> &in) { return ref_split_piece(in[0], 1, 6, 1); };
    run_case("Split num_outputs 3 of 7, axis -1, last (smaller) piece", a);
    Case b{split_node(2).is("split", {1, 2}).ops(11), {randf({3, 4})}, {true}};
    b.out = 1;
    b.ref = [](const std::vector<HT> &in) { return ref_split_piece(in[0], 0, 1, 2); };
    run_case("Split opset 11 (attribute), axis 0", b);
    Case c{split_node(2).i("axis", 1).ops(13), {randf({2, 6})}, {true}};
    c.out = 1;
    c.ref = [](const std::vector<HT> &in) { return ref_split_piece(in[0], 1, 3, 3); };
    run_case("Split opset 13 equal parts without split", c);
    Case d{split_node(2).i("axis", 2), {transposed3(4, 5, 6), vec({2, 4})}, {true, false}};
    d.out = 1;
    d.ref = [](const std::vector<HT> &in) { return ref_split_piece(in[0], 2, 2, 4); };
    run_case("Split strided input, axis 2", d);
    Case e{split_node(3).i("axis", 0), {randf({3, 2}), ints({3}, {0, 3, 0}, false)}, {true, false}};
    e.out = 1;
    e.ref = [](const std::vector<HT> &in) { return ref_split_piece(in[0], 0, 0, 3); };
    run_case("Split with empty pieces, device split", e);
    Case f{split_node(1).i("axis", 1), {randf({3, 4})}, {true}};
    f.ref = reshaped({3, 4});
    run_case("Split into one piece (gradient passed through)", f);
}

static void pad_cases() {
    HT x = randf({2, 3, 4});
    Case a{Node("Pad"), {x, vec({0, 1, 2, 0, 2, 1}), scalarf(0.5f)}, {true, false, false}};
    a.ref = [](const std::vector<HT> &in) { return ref_pad(in[0], {0, 1, 2}, {0, 2, 1}, 'c', 0.5f); };
    run_case("Pad constant 0.5", a);
    Case b{Node("Pad"), {x, vec({0, -1, 1, 1, 0, -2})}, {true, false}};
    b.ref = [](const std::vector<HT> &in) { return ref_pad(in[0], {0, -1, 1}, {1, 0, -2}, 'c', 0.f); };
    run_case("Pad constant with negative pads (crops)", b);
    HT img = randf({1, 2, 4, 5});
    Case c{Node("Pad").s("mode", "reflect"), {img, vec({0, 0, 2, 3, 0, 0, 1, 4})}, {true, false}};
    c.ref = [](const std::vector<HT> &in) { return ref_pad(in[0], {0, 0, 2, 3}, {0, 0, 1, 4}, 'r', 0.f); };
    run_case("Pad reflect", c);
    Case d{Node("Pad").s("mode", "edge"), {x, vec({1, 0, 2, 0, 3, 1})}, {true, false}};
    d.ref = [](const std::vector<HT> &in) { return ref_pad(in[0], {1, 0, 2}, {0, 3, 1}, 'e', 0.f); };
    run_case("Pad edge", d);
    Case e{Node("Pad").s("mode", "wrap").ops(19), {randf({3, 4}), vec({1, 2, 2, 1})}, {true, false}};
    e.ref = [](const std::vector<HT> &in) { return ref_pad(in[0], {1, 2}, {2, 1}, 'w', 0.f); };
    run_case("Pad wrap (opset 19)", e);
    Case f{Node("Pad"), {x, vec({1, 2}), absent(), vec({-1})}, {true, false, false, false}};
    f.ref = [](const std::vector<HT> &in) { return ref_pad(in[0], {0, 0, 1}, {0, 0, 2}, 'c', 0.f); };
    run_case("Pad axes (-1) (opset 18)", f);
    Case g{Node("Pad").is("pads", {1, 0, 0, 2}).f("value", 1.5).ops(2), {randf({3, 2})}, {true}};
    g.ref = [](const std::vector<HT> &in) { return ref_pad(in[0], {1, 0}, {0, 2}, 'c', 1.5f); };
    run_case("Pad opset 2 (attributes)", g);
    Case h{Node("Pad"), {ints({2, 2}, {1, 2, 3, 4}, false), vec({1, 0, 0, 1}), ints({}, {7})}, {false, false, false}};
    h.check = exact_check({7, 7, 7, 1, 2, 7, 3, 4, 7});
    run_case("Pad int64 constant 7", h);
    /* reflect keeps its input (reflection_pad backward), constant nothing */
    Case k{Node("Pad").s("mode", "reflect"), {randf({3, 4}), vec({1, 1, 1, 1})}, {true, false}};
    k.check = [](vx_run &run, const HT &, const std::vector<float> &, const std::vector<HT> &) {
        if (!run.in[0]->data) { printf("  reflect did not keep its input\n"); return false; }
        return true;
    };
    run_case("Pad reflect keeps its input", k);
}

static void cumsum_cases() {
    struct C { const char *name; std::vector<int64_t> dims; int axis; bool excl, rev; };
    C cases[] = {
        {"CumSum axis 1", {3, 5, 2}, 1, false, false},
        {"CumSum exclusive, axis 0", {4, 3}, 0, true, false},
        {"CumSum reverse, axis -1", {2, 3, 6}, -1, false, true},
        {"CumSum exclusive and reverse", {4, 6}, 1, true, true},
        {"CumSum 1-D", {9}, 0, false, false},
    };
    for (C &s : cases) {
        Case c{Node("CumSum").i("exclusive", s.excl).i("reverse", s.rev), {randf(s.dims), ints({}, {s.axis})},
               {true, false}};
        int axis = s.axis;
        bool excl = s.excl, rev = s.rev;
        c.ref = [axis, excl, rev](const std::vector<HT> &in) { return ref_cumsum(in[0], axis, excl, rev); };
        run_case(s.name, c);
    }
    Case d{Node("CumSum"), {randf({3, 4}), ints({1}, {1}, false)}, {true, false}};
    d.ref = [](const std::vector<HT> &in) { return ref_cumsum(in[0], 1, false, false); };
    run_case("CumSum device axis", d);
    /* position ids from an attention mask */
    Case e{Node("CumSum"), {ints({2, 4}, {1, 1, 0, 1, 0, 1, 1, 1}, false), ints({}, {1})}, {false, false}};
    e.check = exact_check({1, 2, 2, 3, 0, 1, 2, 3});
    run_case("CumSum int64", e);
}

static void trilu_cases() {
    struct T { const char *name; std::vector<int64_t> dims; bool upper, has_k; int64_t k; };
    T cases[] = {
        {"Trilu upper, k 0", {2, 4, 5}, true, true, 0},
        {"Trilu lower, k -1", {2, 4, 5}, false, true, -1},
        {"Trilu upper, k 2, more rows than columns", {5, 3}, true, true, 2},
        {"Trilu lower without k", {3, 3}, false, false, 0},
        {"Trilu upper, k past the matrix", {3, 4}, true, true, 10},
        {"Trilu upper without k, batch of 3", {3, 2, 4}, true, false, 0},
    };
    for (T &s : cases) {
        Case c{Node("Trilu").i("upper", s.upper), {randf(s.dims)}, {true}};
        if (s.has_k) {
            c.in.push_back(ints({}, {s.k}));
            c.grad.push_back(false);
        }
        int64_t k = s.k;
        bool upper = s.upper;
        c.ref = [k, upper](const std::vector<HT> &in) { return ref_trilu(in[0], k, upper); };
        run_case(s.name, c);
    }
    Case d{Node("Trilu").i("upper", 0), {ints({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}, false)}, {false}};
    d.check = exact_check({1, 0, 0, 4, 5, 0, 7, 8, 9});
    run_case("Trilu lower int64", d);
}

static void gather_nd_cases() {
    Case a{Node("GatherND"), {randf({3, 4, 5}), ints({2, 2}, {0, 1, 2, -1}, false)}, {true, false}};
    a.ref = [](const std::vector<HT> &in) { return ref_gather_nd(in[0], in[1], 0); };
    run_case("GatherND pairs into [3,4,5], negative index", a);
    Case b{Node("GatherND"), {randf({3, 4}), ints({3, 2}, {0, 0, 2, 3, 0, 0}, false)}, {true, false}};
    b.ref = a.ref;
    run_case("GatherND whole tuples, a duplicate (summed in backward)", b);
    Case c{Node("GatherND").i("batch_dims", 1), {randf({2, 3, 4}), ints({2, 2, 1}, {0, 2, 1, 1}, false)}, {true, false}};
    c.ref = [](const std::vector<HT> &in) { return ref_gather_nd(in[0], in[1], 1); };
    run_case("GatherND batch_dims 1", c);
    Case d{Node("GatherND").i("batch_dims", 1), {randf({2, 3, 4}), ints({2, 2}, {1, 3, 2, 0})}, {true, false}};
    d.ref = c.ref;
    run_case("GatherND batch_dims 1, scalars, host indices", d);
    Case e{Node("GatherND"), {ints({2, 2}, {5, 6, 7, 8}, false), ints({2, 1}, {1, 0}, false)}, {false, false}};
    e.check = exact_check({7, 8, 5, 6});
    run_case("GatherND int64 data", e);
}

static void scatter_nd_cases() {
    HT rows = ints({2, 1}, {1, -1}, false);
    Case a{Node("ScatterND"), {randf({4, 3}), rows, randf({2, 3})}, {true, false, true}};
    a.ref = [](const std::vector<HT> &in) { return ref_scatter_nd(in[0], in[1], in[2], 'n'); };
    run_case("ScatterND rows, negative index", a);
    Case b{Node("ScatterND"), {randf({3, 4}), ints({3, 2}, {0, 1, 2, 3, 1, 0}), randf({3})}, {true, false, true}};
    b.ref = a.ref;
    run_case("ScatterND elements, host indices", b);
    HT dup = ints({3, 1}, {0, 2, 0}, false);
    Case c{Node("ScatterND").s("reduction", "add"), {randf({4, 3}), dup, randf({3, 3})}, {true, false, true}};
    c.ref = [](const std::vector<HT> &in) { return ref_scatter_nd(in[0], in[1], in[2], 'a'); };
    run_case("ScatterND add, duplicate indices", c);
    /* an accumulating scatter's data gradient passes through: no indices kept */
    Case d{Node("ScatterND").s("reduction", "add"), {randf({4, 3}), dup, randf({3, 3})}, {true, false, false}};
    d.ref = c.ref;
    d.check = [](vx_run &run, const HT &, const std::vector<float> &, const std::vector<HT> &) {
        if (run.in[1]->data) { printf("  the indices were kept\n"); return false; }
        return true;
    };
    run_case("ScatterND add, data gradient only", d);
    Case e{Node("ScatterND").s("reduction", "mul"), {randf({4, 3}), dup, randf({3, 3})}, {false, false, false}};
    e.ref = [](const std::vector<HT> &in) { return ref_scatter_nd(in[0], in[1], in[2], 'm'); };
    run_case("ScatterND mul (forward)", e);
    Case f{Node("ScatterND").s("reduction", "max"), {randf({4, 3}), dup, randf({3, 3})}, {false, false, false}};
    f.ref = [](const std::vector<HT> &in) { return ref_scatter_nd(in[0], in[1], in[2], 'x'); };
    run_case("ScatterND max (forward)", f);
    Case g{Node("ScatterND").s("reduction", "min"), {randf({4, 3}), dup, randf({3, 3})}, {false, false, false}};
    g.ref = [](const std::vector<HT> &in) { return ref_scatter_nd(in[0], in[1], in[2], 'i'); };
    run_case("ScatterND min (forward)", g);
    Case h{Node("ScatterND"), {ints({4}, {1, 2, 3, 4}, false), ints({2, 1}, {3, 0}, false), ints({2}, {9, 8}, false)},
           {false, false, false}};
    h.check = exact_check({8, 2, 3, 9});
    run_case("ScatterND int64 data", h);
}

static void index_cases() {
    split_cases();
    pad_cases();
    cumsum_cases();
    trilu_cases();
    gather_nd_cases();
    scatter_nd_cases();
}
