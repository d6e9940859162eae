/* grad_unary2_cases.h: test_grad_elementwise.cu's cases for the activations
 * and math ops added to verify/ops_unary.cu (Softsign .. Atanh) and to
 * verify/ops_math.cu (PRelu, Sum, Mean, the bitwise ops, CastLike).
 * Included by test_grad_elementwise.cu after its scaffolding and after
 * grad_math_cases.h (math_bidx, math_bshape). Forward against host
 * references, backward against finite differences, inputs kept inside each
 * op's domain and away from its kinks and jumps. */

/* x values in `lo + (hi - lo) * u`, u in [0, 1), moved off the points in
 * `kinks` by at least 0.05 (finite differences step 1e-2). */
static HT ranged(std::vector<int64_t> d, double lo, double hi, std::vector<double> kinks = {}) {
    HT t = randf(d);
    for (auto &v : t.f) {
        double x = lo + (hi - lo) * 0.5 * (v + 1.0);
        for (double k : kinks)
            if (fabs(x - k) < 0.05) x = k + (x < k ? -0.05 : 0.05);
        v = (float)x;
    }
    return t;
}

static void unary2_cases() {
    struct U {
        const char *op;
        double (*f)(double);
        double lo, hi;
        std::vector<double> kinks;
    };
    /* default attributes */
    static const U ops[] = {
        {"Softsign", [](double v) { return v / (1 + fabs(v)); }, -3, 3, {0}},
        {"Mish", [](double v) { return v * tanh(log1p(exp(v))); }, -3, 3, {}},
        {"LeakyRelu", [](double v) { return v >= 0 ? v : 0.01 * v; }, -2, 2, {0}},
        {"Elu", [](double v) { return v > 0 ? v : expm1(v); }, -2, 2, {0}},
        {"Celu", [](double v) { return std::max(v, 0.0) + std::min(0.0, expm1(v)); }, -2, 2, {0}},
        {"ThresholdedRelu", [](double v) { return v > 1 ? v : 0; }, -2, 3, {1}},
        {"Selu", [](double v) { return 1.0507009873554805 * (v > 0 ? v : 1.6732632423543772 * expm1(v)); }, -2, 2, {0}},
        {"Shrink", [](double v) { return v < -0.5 ? v : v > 0.5 ? v : 0; }, -2, 2, {-0.5, 0.5}},
        {"Floor", [](double v) { return floor(v); }, -3, 3, {-3, -2, -1, 0, 1, 2, 3}},
        {"Ceil", [](double v) { return ceil(v); }, -3, 3, {-3, -2, -1, 0, 1, 2, 3}},
        {"Round", [](double v) { return nearbyint(v); }, -3, 3, {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5}},
        {"Sign", [](double v) { return (double)((v > 0) - (v < 0)); }, -2, 2, {0}},
        {"Tan", [](double v) { return tan(v); }, -1.2, 1.2, {}},
        {"Asin", [](double v) { return asin(v); }, -0.9, 0.9, {}},
        {"Acos", [](double v) { return acos(v); }, -0.9, 0.9, {}},
        {"Atan", [](double v) { return atan(v); }, -3, 3, {}},
        {"Sinh", [](double v) { return sinh(v); }, -2, 2, {}},
        {"Cosh", [](double v) { return cosh(v); }, -2, 2, {}},
        {"Asinh", [](double v) { return asinh(v); }, -3, 3, {}},
        {"Acosh", [](double v) { return acosh(v); }, 1.2, 4, {}},
        {"Atanh", [](double v) { return atanh(v); }, -0.85, 0.85, {}},
    };
    for (const U &u : ops) {
        Case c{Node(u.op), {ranged({3, 7}, u.lo, u.hi, u.kinks)}, {true}};
        double (*f)(double) = u.f;
        c.ref = [f](const std::vector<HT> &in) { return ref_unary(in[0], f); };
        run_case(u.op, c);
    }
    /* attributes */
    struct A {
        const char *name;
        Node node;
        std::function<double(double)> f;
        double lo, hi;
        std::vector<double> kinks;
    };
    std::vector<A> attrs = {
        {"LeakyRelu alpha 0.2", Node("LeakyRelu").f("alpha", 0.2), [](double v) { return v >= 0 ? v : 0.2 * v; }, -2, 2, {0}},
        {"Elu alpha 0.5", Node("Elu").f("alpha", 0.5), [](double v) { return v > 0 ? v : 0.5 * expm1(v); }, -2, 2, {0}},
        {"Celu alpha 2", Node("Celu").f("alpha", 2.0),
         [](double v) { return std::max(v, 0.0) + std::min(0.0, 2 * expm1(v / 2)); }, -3, 2, {0}},
        {"ThresholdedRelu alpha -0.5", Node("ThresholdedRelu").f("alpha", -0.5), [](double v) { return v > -0.5 ? v : 0; },
         -2, 2, {-0.5}},
        {"Selu alpha 1.5, gamma 2", Node("Selu").f("alpha", 1.5).f("gamma", 2.0),
         [](double v) { return 2 * (v > 0 ? v : 1.5 * expm1(v)); }, -2, 2, {0}},
        {"Shrink lambd 1, bias 0.3", Node("Shrink").f("lambd", 1.0).f("bias", 0.3),
         [](double v) { return v < -1 ? v + 0.3 : v > 1 ? v - 0.3 : 0; }, -3, 3, {-1, 1}},
    };
    for (A &a : attrs) {
        Case c{a.node, {ranged({4, 5}, a.lo, a.hi, a.kinks)}, {true}};
        auto f = a.f;
        c.ref = [f](const std::vector<HT> &in) { return ref_unary(in[0], f); };
        run_case(a.name, c);
    }
    {
        /* halves go to even; forward only (a jump at each half) */
        HT x = mk({8});
        x.f = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 0.49f, -3.7f};
        Case c{Node("Round"), {x}, {false}};
        c.ref = [](const std::vector<HT> &in) { return ref_unary(in[0], [](double v) { return nearbyint(v); }); };
        run_case("Round halves to even", c);
        Case s{Node("Sign"), {ints({5}, {-7, 0, 3, -1, 9}, false)}, {false}};
        s.check = exact_check({-1, 0, 1, -1, 1});
        run_case("Sign int64", s);
        /* Softsign keeps its input and the denominator 1 + |x| (saved[0]) */
        Case d{Node("Softsign"), {ranged({2, 3, 4}, -3, 3, {0})}, {true}};
        d.ref = [](const std::vector<HT> &in) { return ref_unary(in[0], [](double v) { return v / (1 + fabs(v)); }); };
        d.check = [](vx_run &run, const HT &, const std::vector<float> &, const std::vector<HT> &) {
            bool ok = run.saved[0] && run.saved[0]->numel == 24;
            if (!ok) printf("  Softsign: the denominator was not kept\n");
            return ok;
        };
        run_case("Softsign keeps 1 + |x|", d);
        Case t{Node("Tan"), {transposed3(2, 3, 4)}, {true}};
        t.ref = [](const std::vector<HT> &in) { return ref_unary(in[0], [](double v) { return tan(v); }); };
        run_case("Tan strided input", t);
    }
}

/* ---- PRelu, Sum, Mean ----------------------------------------------------------------- */

static HT ref_prelu(const HT &x, const HT &s) {
    HT y = mk(x.dims);
    for (int64_t e = 0; e < y.numel(); e++) {
        double v = x.f[e];
        y.f[e] = (float)(v < 0 ? s.f[math_bidx(x.dims, s.dims, e)] * v : v);
    }
    return y;
}

static HT ref_sum_n(const std::vector<HT> &in, double scale) {
    HT o = mk(math_bshape(in));
    for (int64_t e = 0; e < o.numel(); e++) {
        double acc = 0;
        for (auto &t : in) acc += t.f[math_bidx(o.dims, t.dims, e)];
        o.f[e] = (float)(acc * scale);
    }
    return o;
}

static void prelu_sum_cases() {
    struct S { const char *what; std::vector<int64_t> x, s; };
    S shapes[] = {
        {"slope [3,1] (channels)", {2, 3, 4}, {3, 1}},
        {"slope [4]", {2, 3, 4}, {4}},
        {"slope [1] (one)", {2, 3, 4}, {1}},
        {"slope like X", {3, 5}, {3, 5}},
    };
    for (S &s : shapes) {
        char name[128];
        snprintf(name, sizeof name, "PRelu %s", s.what);
        Case c{Node("PRelu"), {ranged(s.x, -2, 2, {0}), ranged(s.s, -0.5, 1.5)}, {true, true}};
        c.ref = [](const std::vector<HT> &in) { return ref_prelu(in[0], in[1]); };
        run_case(name, c);
    }
    {
        Case c{Node("PRelu"), {ranged({2, 3, 4}, -2, 2, {0}), ranged({3, 1}, 0.1, 0.9)}, {false, true}};
        c.ref = [](const std::vector<HT> &in) { return ref_prelu(in[0], in[1]); };
        run_case("PRelu gradient of slope only", c);
    }
    for (int mean = 0; mean < 2; mean++) {
        const char *op = mean ? "Mean" : "Sum";
        char name[128];
        snprintf(name, sizeof name, "%s of 3, broadcasting [2,3,4] [3,1] [4]", op);
        Case c{Node(op), {randf({2, 3, 4}), randf({3, 1}), randf({4})}, {true, true, true}};
        double k3 = mean ? 1.0 / 3 : 1.0;
        c.ref = [k3](const std::vector<HT> &in) { return ref_sum_n(in, k3); };
        run_case(name, c);
        snprintf(name, sizeof name, "%s of 2, same shape", op);
        Case d{Node(op), {randf({3, 5}), randf({3, 5})}, {true, true}};
        double k2 = mean ? 0.5 : 1.0;
        d.ref = [k2](const std::vector<HT> &in) { return ref_sum_n(in, k2); };
        run_case(name, d);
        snprintf(name, sizeof name, "%s of 1", op);
        Case e{Node(op), {randf({2, 3})}, {true}};
        e.ref = [](const std::vector<HT> &in) { return ref_sum_n(in, 1.0); };
        run_case(name, e);
        snprintf(name, sizeof name, "%s of 4, [1,3] [2,1] [2,3] [] (one gradient)", op);
        Case f{Node(op), {randf({1, 3}), randf({2, 1}), randf({2, 3}), randf({})}, {false, true, false, true}};
        double k4 = mean ? 0.25 : 1.0;
        f.ref = [k4](const std::vector<HT> &in) { return ref_sum_n(in, k4); };
        run_case(name, f);
    }
    {
        Case k{Node("Sum"), {ints({3}, {1, -2, 3}, false), ints({1}, {10}, false)}, {false, false}};
        k.check = exact_check({11, 8, 13});
        run_case("Sum int64", k);
    }
}

/* ---- bitwise, CastLike ----------------------------------------------------------------- */

static void bitwise_cases() {
    HT a = ints({2, 3}, {12, -1, 0, 5, 255, -8}, false), b = ints({3}, {10, 3, 7}, false);
    {
        Case k{Node("BitwiseNot"), {a}, {false}};
        k.check = exact_check({~12ll, ~-1ll, ~0ll, ~5ll, ~255ll, ~-8ll});
        run_case("BitwiseNot int64", k);
    }
    struct B { const char *op; long long (*f)(long long, long long); };
    static const B ops[] = {
        {"BitwiseAnd", [](long long x, long long y) { return x & y; }},
        {"BitwiseOr", [](long long x, long long y) { return x | y; }},
        {"BitwiseXor", [](long long x, long long y) { return x ^ y; }},
    };
    for (const B &o : ops) {
        std::vector<int64_t> want(6);
        for (int e = 0; e < 6; e++) want[e] = o.f(a.i[e], b.i[e % 3]);
        Case k{Node(o.op), {a, b}, {false, false}};
        k.check = exact_check(want);
        char name[96];
        snprintf(name, sizeof name, "%s int64 [2,3] with [3]", o.op);
        run_case(name, k);
    }
    {
        HT x = ints({4}, {1, 16, 255, 3}, false), s = ints({4}, {0, 2, 4, 64}, false);
        Case l{Node("BitShift").s("direction", "LEFT"), {x, s}, {false, false}};
        l.check = exact_check({1, 64, 4080, 0});
        run_case("BitShift LEFT", l);
        Case r{Node("BitShift").s("direction", "RIGHT"), {x, ints({1}, {2}, false)}, {false, false}};
        r.check = exact_check({0, 4, 63, 0});
        run_case("BitShift RIGHT by a broadcast scalar", r);
    }
    {
        HT x = mk({4});
        x.f = {1.7f, -2.2f, 0.f, 3.f};
        Case k{Node("CastLike"), {x, ints({1}, {0}, false)}, {false, false}};
        k.check = exact_check({1, -2, 0, 3});
        run_case("CastLike float to int64", k);
        Case f{Node("CastLike"), {ints({3}, {4, -1, 0}, false), randf({2})}, {false, false}};
        f.ref = [](const std::vector<HT> &) { HT y = mk({3}); y.f = {4.f, -1.f, 0.f}; return y; };
        run_case("CastLike int64 to float", f);
        Case g{Node("CastLike"), {randf({2, 3}), randf({1})}, {true, false}};
        g.ref = [](const std::vector<HT> &in) { return in[0]; };
        run_case("CastLike float to float (gradient passed on)", g);
    }
}
