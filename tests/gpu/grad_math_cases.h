/* grad_math_cases.h: test_grad_elementwise.cu's cases for verify/ops_math.cu:
 * Max / Min of n inputs (through ops_elementwise.cu's rows), Pow with a
 * tensor exponent (through ops_unary.cu's row), IsNaN, IsInf. Included by
 * test_grad_elementwise.cu after its scaffolding. */

/* Flat index into a tensor of dims `in` that broadcasts (right-aligned) to
 * `out`, for output element e. */
static int64_t math_bidx(const std::vector<int64_t> &out, const std::vector<int64_t> &in, int64_t e) {
    int64_t off = 0, st = 1;
    for (int d = (int)out.size() - 1, j = (int)in.size() - 1; d >= 0; d--, j--) {
        int64_t c = e % out[d];
        e /= out[d];
        if (j < 0) continue;
        if (in[j] != 1) off += c * st;
        st *= in[j];
    }
    return off;
}

static std::vector<int64_t> math_bshape(const std::vector<HT> &in) {
    size_t r = 0;
    for (auto &t : in) r = std::max(r, t.dims.size());
    std::vector<int64_t> o(r, 1);
    for (auto &t : in)
        for (size_t k = 0; k < t.dims.size(); k++) {
            int64_t &d = o[r - t.dims.size() + k];
            if (t.dims[k] != 1) d = t.dims[k];
        }
    return o;
}

/* The chain max(max(x0, x1), x2)... on the host. */
static HT ref_maxmin_n(const std::vector<HT> &in, bool mx) {
    HT o = mk(math_bshape(in));
    for (int64_t e = 0; e < o.numel(); e++) {
        double m = in[0].f[math_bidx(o.dims, in[0].dims, e)];
        for (size_t k = 1; k < in.size(); k++) {
            double v = in[k].f[math_bidx(o.dims, in[k].dims, e)];
            m = mx ? std::max(m, v) : std::min(m, v);
        }
        o.f[e] = (float)m;
    }
    return o;
}

/* Moves every operand value away (by 0.1) from the others' at each output
 * element, so finite differences do not straddle a kink. */
static void math_separate(std::vector<HT> &in) {
    std::vector<int64_t> od = math_bshape(in);
    int64_t n = 1;
    for (auto d : od) n *= d;
    for (int pass = 0; pass < 4; pass++)
        for (int64_t e = 0; e < n; e++)
            for (size_t a = 0; a < in.size(); a++)
                for (size_t b = a + 1; b < in.size(); b++) {
                    float &u = in[a].f[math_bidx(od, in[a].dims, e)];
                    float v = in[b].f[math_bidx(od, in[b].dims, e)];
                    if (fabsf(u - v) < 0.05f) u += 0.1f;
                }
}

static void math_cases() {
    /* Max / Min of n inputs */
    for (const char *op : {"Max", "Min"}) {
        bool mx = op[1] == 'a';
        std::vector<HT> in = {randf({2, 3, 4}), randf({3, 1}), randf({4})};
        math_separate(in);
        Case k{Node(op), in, {true, true, true}};
        k.ref = [mx](const std::vector<HT> &x) { return ref_maxmin_n(x, mx); };
        char name[96];
        snprintf(name, sizeof name, "%s of 3: [2,3,4], [3,1], [4]", op);
        run_case(name, k);
        std::vector<HT> in4 = {randf({2, 1, 4}), randf({3, 1}), randf({1}), randf({2, 3, 4})};
        math_separate(in4);
        Case f{Node(op), in4, {true, false, true, true}};
        f.ref = [mx](const std::vector<HT> &x) { return ref_maxmin_n(x, mx); };
        snprintf(name, sizeof name, "%s of 4, broadcasting, input 1 without gradient", op);
        run_case(name, f);
    }
    {
        /* ties between two operands halve the gradient at that link: x0 == x1
         * (> x2) in some elements, x2 == max(x0, x1) in others */
        HT a = randf({2, 5}), b = randf({2, 5}), c = randf({2, 5});
        for (int64_t e = 0; e < 10; e++) {
            b.f[e] = a.f[e] + (e % 2 ? 0.3f : -0.3f);
            c.f[e] = std::max(a.f[e], b.f[e]) - 0.4f;
        }
        b.f[0] = a.f[0];           /* x0 == x1 > x2 */
        b.f[3] = a.f[3];
        c.f[5] = std::max(a.f[5], b.f[5]); /* x2 ties the running max */
        Case k{Node("Max"), {a, b, c}, {true, true, true}};
        k.ref = [](const std::vector<HT> &x) { return ref_maxmin_n(x, true); };
        k.check = [](vx_run &, const HT &, const std::vector<float> &R, const std::vector<HT> &g) {
            bool ok = fabsf(g[0].f[0] - 0.5f * R[0]) < 1e-6f && fabsf(g[1].f[0] - 0.5f * R[0]) < 1e-6f &&
                      g[2].f[0] == 0.f && fabsf(g[2].f[5] - 0.5f * R[5]) < 1e-6f;
            if (!ok) printf("  Max ties: gradients %g %g %g, %g (want %g, %g)\n", g[0].f[0], g[1].f[0], g[2].f[0],
                            g[2].f[5], 0.5 * R[0], 0.5 * R[5]);
            return ok;
        };
        run_case("Max of 3 with ties", k);
        Case m{Node("Min"), {ints({4}, {3, -1, 7, 2}, false), ints({1}, {2}, false), ints({4}, {5, 0, 1, 2}, false)},
               {false, false, false}};
        m.check = exact_check({2, -1, 1, 2});
        run_case("Min of 3 int64", m);
        Case s{Node("Max"), {randf({3, 2})}, {true}};
        s.ref = [](const std::vector<HT> &x) { return x[0]; };
        run_case("Max of 1 (the input)", s);
    }
    /* Pow with a tensor exponent (positive bases: log(x) for the exponent's gradient) */
    {
        HT x = randf({3, 4}), e = randf({4});
        for (auto &v : x.f) v = 1.5f + v;
        for (auto &v : e.f) v = 2 * v;
        auto ref_pow = [](const std::vector<HT> &in) {
            HT o = mk(math_bshape(in));
            for (int64_t k = 0; k < o.numel(); k++) {
                double b = in[0].dt == VX_F32 ? in[0].f[math_bidx(o.dims, in[0].dims, k)] : 0;
                double p = in[1].dt == VX_F32 ? (double)in[1].f[math_bidx(o.dims, in[1].dims, k)]
                                              : (double)in[1].i[math_bidx(o.dims, in[1].dims, k)];
                o.f[k] = (float)pow(b, p);
            }
            return o;
        };
        Case c{Node("Pow"), {x, e}, {true, true}};
        c.eps = 1e-3;
        c.ref = ref_pow;
        run_case("Pow [3,4] ^ [4], gradients of both", c);
        Case d{Node("Pow"), {x, e}, {false, true}};
        d.eps = 1e-3;
        d.ref = ref_pow;
        run_case("Pow, gradient of the exponent only (keeps the result)", d);
        HT base = scalarf(2.f, false), ex = randf({2, 6});
        Case f{Node("Pow"), {base, ex}, {true, true}};
        f.eps = 1e-3;
        f.ref = ref_pow;
        run_case("Pow scalar base ^ [2,6] exponent", f);
        Case g{Node("Pow"), {x, ints({4}, {0, 1, 2, 3})}, {true, false}};
        g.ref = ref_pow;
        run_case("Pow [3,4] ^ host int64 [4]", g);
        Case h{Node("Pow"), {x, scalarf(1.5f, false)}, {true, true}};
        h.eps = 1e-3;
        h.ref = ref_pow;
        run_case("Pow, a one-element exponent that needs a gradient", h);
    }
    /* IsNaN, IsInf */
    {
        HT x = randf({6});
        x.f[1] = NAN;
        x.f[2] = INFINITY;
        x.f[4] = -INFINITY;
        Case n{Node("IsNaN"), {x}, {false}};
        n.check = exact_check({0, 1, 0, 0, 0, 0});
        run_case("IsNaN", n);
        Case i{Node("IsInf"), {x}, {false}};
        i.check = exact_check({0, 0, 1, 0, 1, 0});
        run_case("IsInf", i);
        Case p{Node("IsInf").i("detect_negative", 0), {x}, {false}};
        p.check = exact_check({0, 0, 1, 0, 0, 0});
        run_case("IsInf detect_negative 0", p);
        Case q{Node("IsInf").i("detect_positive", 0), {x}, {false}};
        q.check = exact_check({0, 0, 0, 0, 1, 0});
        run_case("IsInf detect_positive 0", q);
    }
}
