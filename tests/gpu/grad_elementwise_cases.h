/* grad_elementwise_cases.h: test_grad_elementwise.cu's cases for the binary
 * ops, the comparisons and logical ops, Mod, Max and Min, Not,
 * RandomUniformLike, the unary ops, Dropout and Where
 * (verify/ops_elementwise.cu, verify/ops_unary.cu). Included by
 * test_grad_elementwise.cu after its scaffolding and host references. */

static void binary_cases() {
    struct B { const char *op; char c; };
    B ops[] = {{"Add", '+'}, {"Sub", '-'}, {"Mul", '*'}, {"Div", '/'}};
    struct S { const char *what; std::vector<int64_t> a, b; };
    S shapes[] = {
        {"same shape", {2, 3, 4}, {2, 3, 4}},
        {"[2,3,4] with [3,1]", {2, 3, 4}, {3, 1}},
        {"[2,3,4] with [4]", {2, 3, 4}, {4}},
        {"[3,1] with [2,3,4]", {3, 1}, {2, 3, 4}},
        {"[4] with [2,3,4]", {4}, {2, 3, 4}},
        {"[2,1,4] with [3,1] (both broadcast)", {2, 1, 4}, {3, 1}},
        {"scalar with [2,3]", {}, {2, 3}},
    };
    for (B &o : ops)
        for (S &s : shapes) {
            char name[160];
            snprintf(name, sizeof name, "%s %s", o.op, s.what);
            HT b = o.c == '/' ? awayf(s.b) : randf(s.b);
            Case c{Node(o.op), {randf(s.a), b}, {true, true}};
            char oc = o.c;
            c.ref = [oc](const std::vector<HT> &in) { return ref_binary(in[0], in[1], oc); };
            run_case(name, c);
        }
    /* one operand needing a gradient (Mul / Div keep only what that needs) */
    for (B &o : ops) {
        char oc = o.c;
        for (int only = 0; only < 2; only++) {
            char name[160];
            snprintf(name, sizeof name, "%s [2,3,4] with [3,1], gradient of input %d only", o.op, only);
            Case c{Node(o.op), {randf({2, 3, 4}), oc == '/' ? awayf({3, 1}) : randf({3, 1})}, {only == 0, only == 1}};
            c.ref = [oc](const std::vector<HT> &in) { return ref_binary(in[0], in[1], oc); };
            run_case(name, c);
        }
    }
    /* strided / expanded view operands (read in place: VX_STRIDED_IN | SAVED) */
    for (B &o : ops) {
        char oc = o.c;
        char name[160];
        snprintf(name, sizeof name, "%s transposed view with [4]", o.op);
        HT b = oc == '/' ? awayf({4}) : randf({4});
        Case c{Node(o.op), {transposed3(2, 3, 4), b}, {true, true}};
        c.ref = [oc](const std::vector<HT> &in) { return ref_binary(in[0], in[1], oc); };
        run_case(name, c);
        snprintf(name, sizeof name, "%s [2,3,4] with expanded view [3,4] (stride 0)", o.op);
        HT e = view_of(4, {3, 4}, {0, 1}, 0);
        if (oc == '/') { /* divisors in (0.5, 2.5) */
            for (auto &v : e.vbase) v = 1.5f + v;
            e = refresh(e);
        }
        Case d{Node(o.op), {randf({2, 3, 4}), e}, {true, true}};
        d.ref = [oc](const std::vector<HT> &in) { return ref_binary(in[0], in[1], oc); };
        run_case(name, d);
        snprintf(name, sizeof name, "%s sliced view [3,2] (offset, step 2) with itself shape", o.op);
        HT sv = view_of(24, {3, 2}, {8, 3}, 1);
        HT b2 = oc == '/' ? awayf({3, 2}) : randf({3, 2});
        Case f{Node(o.op), {sv, b2}, {true, true}};
        f.ref = [oc](const std::vector<HT> &in) { return ref_binary(in[0], in[1], oc); };
        run_case(name, f);
    }
}

/* Comparisons and logical ops (bool out), Mod, Max and Min, Not and
 * RandomUniformLike. */
static void compare_cases() {
    HT a = randf({2, 3}), b = randf({3});
    a.f[1] = b.f[1]; /* a tie */
    struct C { const char *op; bool (*f)(double, double); };
    static const C cmps[] = {
        {"Less", [](double x, double y) { return x < y; }},
        {"Greater", [](double x, double y) { return x > y; }},
        {"LessOrEqual", [](double x, double y) { return x <= y; }},
        {"Equal", [](double x, double y) { return x == y; }},
    };
    for (const C &c : cmps) {
        std::vector<int64_t> want(6);
        for (int e = 0; e < 6; e++) want[e] = c.f(a.f[e], b.f[e % 3]);
        Case k{Node(c.op), {a, b}, {false, false}};
        k.check = exact_check(want);
        char name[96];
        snprintf(name, sizeof name, "%s [2,3] with [3] on the device", c.op);
        run_case(name, k);
    }
    {
        Case k{Node("Less"), {ints({4}, {-3, 5, 7, 2}, false), ints({1}, {4}, false)}, {false, false}};
        k.check = exact_check({1, 0, 0, 1});
        run_case("Less int64 with a broadcast scalar", k);
    }
    HT p = boolt({2, 2}, {1, 1, 0, 0}), q = boolt({2, 2}, {1, 0, 1, 0});
    struct L { const char *op; std::vector<int64_t> want; };
    static const L logic[] = {{"And", {1, 0, 0, 0}}, {"Or", {1, 1, 1, 0}}, {"Xor", {0, 1, 1, 0}}};
    for (const L &l : logic) {
        Case k{Node(l.op), {p, q}, {false, false}};
        k.check = exact_check(l.want);
        run_case(l.op, k);
    }
    {
        Case k{Node("Not"), {p}, {false}};
        k.check = exact_check({0, 0, 1, 1});
        run_case("Not", k);
    }
    {
        /* Python's remainder takes the divisor's sign, fmod the dividend's */
        Case k{Node("Mod"), {ints({4}, {7, -7, 7, -7}, false), ints({4}, {3, 3, -3, -3}, false)}, {false, false}};
        k.check = exact_check({1, 2, -2, -1});
        run_case("Mod int64", k);
        Case f{Node("Mod").i("fmod", 1), {ints({4}, {7, -7, 7, -7}, false), ints({4}, {3, 3, -3, -3}, false)}, {false, false}};
        f.check = exact_check({1, -1, 1, -1});
        run_case("Mod int64 fmod", f);
        HT x = randf({3, 4}), d = awayf({4});
        for (auto &v : x.f) v *= 5;
        Case g{Node("Mod").i("fmod", 1), {x, d}, {true, true}};
        g.eps = 1e-3;
        g.ref = [](const std::vector<HT> &in) {
            HT y = mk(in[0].dims);
            for (int64_t e = 0; e < y.numel(); e++) y.f[e] = (float)fmod(in[0].f[e], in[1].f[e % 4]);
            return y;
        };
        run_case("Mod float fmod, gradients of both", g);
    }
    for (const char *op : {"Max", "Min"}) {
        HT x = randf({2, 3, 4}), y = randf({3, 1});
        for (int64_t e = 0; e < 24; e++) /* no near-ties, where finite differences straddle the kink */
            if (fabsf(x.f[e] - y.f[(e / 4) % 3]) < 0.05f) x.f[e] += 0.1f;
        bool mx = op[1] == 'a';
        Case k{Node(op), {x, y}, {true, true}};
        k.ref = [mx](const std::vector<HT> &in) {
            HT o = mk(in[0].dims);
            for (int64_t e = 0; e < o.numel(); e++) {
                double u = in[0].f[e], v = in[1].f[(e / 4) % 3];
                o.f[e] = (float)(mx ? std::max(u, v) : std::min(u, v));
            }
            return o;
        };
        char name[64];
        snprintf(name, sizeof name, "%s [2,3,4] with [3,1]", op);
        run_case(name, k);
    }
    {
        Case k{Node("Abs"), {ints({4}, {-3, 5, 0, -1}, false)}, {false}};
        k.check = exact_check({3, 5, 0, 1});
        run_case("Abs int64", k);
        Case n{Node("Neg"), {ints({3}, {-3, 5, 0}, false)}, {false}};
        n.check = exact_check({3, -5, 0});
        run_case("Neg int64", n);
    }
    {
        Case k{Node("RandomUniformLike").f("low", -2.0).f("high", 3.0), {randf({64, 33})}, {false}};
        k.check = [](vx_run &, const HT &y, const std::vector<float> &, const std::vector<HT> &) {
            double lo = 1e9, hi = -1e9, mean = 0;
            for (float v : y.f) { lo = std::min(lo, (double)v); hi = std::max(hi, (double)v); mean += v; }
            mean /= (double)y.f.size();
            bool ok = y.dims == std::vector<int64_t>{64, 33} && lo >= -2 && hi < 3 && fabs(mean - 0.5) < 0.2;
            if (!ok) printf("  RandomUniformLike: min %g max %g mean %g\n", lo, hi, mean);
            return ok;
        };
        run_case("RandomUniformLike [-2, 3)", k);
    }
}

static void unary_cases() {
    auto gelu = [](double v) { return 0.5 * v * (1 + erf(v / sqrt(2.0))); };
    {
        HT x = randf({3, 5});
        for (auto &v : x.f) if (fabsf(v) < 0.05f) v = 0.3f; /* away from the kink */
        Case c{Node("Relu"), {x}, {true}};
        c.ref = [](const std::vector<HT> &in) { return ref_unary(in[0], [](double v) { return v > 0 ? v : 0; }); };
        run_case("Relu", c);
        HT xs = transposed3(2, 3, 4);
        for (auto &v : xs.vbase) if (fabsf(v) < 0.05f) v = -0.3f;
        xs = refresh(xs);
        Case d{Node("Relu"), {xs}, {true}};
        d.ref = c.ref;
        run_case("Relu strided input", d);
    }
    {
        HT x = randf({4, 6});
        for (auto &v : x.f) { v *= 2; if (fabsf(v + 0.5f) < 0.03f || fabsf(v - 0.7f) < 0.03f) v = 0.1f; }
        Case c{Node("Clip"), {x, scalarf(-0.5f), scalarf(0.7f)}, {true, false, false}};
        c.ref = [](const std::vector<HT> &in) { return ref_unary(in[0], [](double v) { return std::min(std::max(v, -0.5), 0.7); }); };
        run_case("Clip min, max (host inputs)", c);
        Case d{Node("Clip"), {x, scalarf(-0.5f, false), scalarf(0.7f, false)}, {true, false, false}};
        d.ref = c.ref;
        run_case("Clip min, max (device inputs)", d);
        Case e{Node("Clip"), {x, scalarf(-0.5f)}, {true, false}};
        e.ref = [](const std::vector<HT> &in) { return ref_unary(in[0], [](double v) { return std::max(v, -0.5); }); };
        run_case("Clip min only", e);
        Case f{Node("Clip"), {x, absent(), scalarf(0.7f)}, {true, false, false}};
        f.ref = [](const std::vector<HT> &in) { return ref_unary(in[0], [](double v) { return std::min(v, 0.7); }); };
        run_case("Clip max only (min omitted)", f);
        Case g{Node("Clip").f("min", -0.5).f("max", 0.7).ops(6), {x}, {true}};
        g.ref = c.ref;
        run_case("Clip opset 6 (attributes)", g);
        Case h{Node("Clip"), {x}, {true}};
        h.ref = [](const std::vector<HT> &in) { return ref_unary(in[0], [](double v) { return v; }); };
        run_case("Clip without bounds", h);
    }
    {
        Case c{Node("Erf"), {randf({3, 7})}, {true}};
        c.ref = [](const std::vector<HT> &in) { return ref_unary(in[0], [](double v) { return erf(v); }); };
        run_case("Erf", c);
        HT x = randf({2, 9});
        for (auto &v : x.f) v *= 3;
        Case d{Node("Gelu"), {x}, {true}};
        d.ref = [gelu](const std::vector<HT> &in) { return ref_unary(in[0], gelu); };
        run_case("Gelu (erf form)", d);
        Case e{Node("Gelu").s("approximate", "tanh"), {x}, {true}};
        e.ref = [](const std::vector<HT> &in) {
            return ref_unary(in[0], [](double v) { return 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); });
        };
        run_case("Gelu approximate tanh", e);
        Case f{Node("Gelu"), {transposed3(2, 3, 4)}, {true}};
        f.ref = [gelu](const std::vector<HT> &in) { return ref_unary(in[0], gelu); };
        run_case("Gelu strided input", f);
    }
    /* ops_unary.cu's table: each against its host function, and backward
     * against finite differences (x in (-2, 2), or (0.5, 2.5) where the
     * function needs a positive input, away from the kinks) */
    struct U {
        const char *op;
        double (*f)(double);
        bool positive;
    };
    static const U ops[] = {
        {"Tanh", [](double v) { return tanh(v); }, false},
        {"Sigmoid", [](double v) { return 1 / (1 + exp(-v)); }, false},
        {"Sqrt", [](double v) { return sqrt(v); }, true},
        {"Reciprocal", [](double v) { return 1 / v; }, true},
        {"Exp", [](double v) { return exp(v); }, false},
        {"Neg", [](double v) { return -v; }, false},
        {"Abs", [](double v) { return fabs(v); }, false},
        {"Log", [](double v) { return log(v); }, true},
        {"Sin", [](double v) { return sin(v); }, false},
        {"Cos", [](double v) { return cos(v); }, false},
        {"Softplus", [](double v) { return log1p(exp(v)); }, false},
        {"HardSwish", [](double v) { return v * std::min(std::max(v + 3, 0.0), 6.0) / 6; }, false},
        {"HardSigmoid", [](double v) { return std::min(std::max(0.2 * v + 0.5, 0.0), 1.0); }, false},
        {"Swish", [](double v) { return v / (1 + exp(-v)); }, false},
    };
    for (const U &u : ops) {
        HT x = randf({3, 6});
        for (auto &v : x.f) {
            v = u.positive ? 1.5f + v : 2 * v;
            if (fabsf(v) < 0.05f) v = 0.3f; /* Abs's kink */
        }
        Case c{Node(u.op), {x}, {true}};
        double (*f)(double) = u.f;
        c.ref = [f](const std::vector<HT> &in) { return ref_unary(in[0], f); };
        run_case(u.op, c);
    }
    {
        HT x = randf({4, 5});
        for (auto &v : x.f) v = 1.5f + v;
        Case c{Node("HardSigmoid").f("alpha", 0.3).f("beta", 0.1), {x}, {true}};
        c.ref = [](const std::vector<HT> &in) {
            return ref_unary(in[0], [](double v) { return std::min(std::max(0.3 * v + 0.1, 0.0), 1.0); });
        };
        run_case("HardSigmoid alpha 0.3, beta 0.1", c);
        Case d{Node("Swish").f("alpha", 1.7), {randf({4, 5})}, {true}};
        d.ref = [](const std::vector<HT> &in) { return ref_unary(in[0], [](double v) { return v / (1 + exp(-1.7 * v)); }); };
        run_case("Swish alpha 1.7", d);
        Case e{Node("Pow"), {x, scalarf(2.f)}, {true, false}};
        e.ref = [](const std::vector<HT> &in) { return ref_unary(in[0], [](double v) { return v * v; }); };
        run_case("Pow, host exponent 2", e);
        Case f{Node("Pow"), {x, scalarf(-0.5f)}, {true, false}};
        f.ref = [](const std::vector<HT> &in) { return ref_unary(in[0], [](double v) { return 1 / sqrt(v); }); };
        run_case("Pow, host exponent -0.5", f);
        Case g{Node("Tanh"), {transposed3(2, 3, 4)}, {true}};
        g.ref = [](const std::vector<HT> &in) { return ref_unary(in[0], [](double v) { return tanh(v); }); };
        run_case("Tanh strided input", g);
    }
}

/* Dropout training: y = x * mask / (1 - p) and dx = dy * mask / (1 - p) with
 * the mask the forward kept (output 1, or saved[0]). */
static Check dropout_check(float p, const HT x) {
    return [p, x](vx_run &run, const HT &y, const std::vector<float> &R, const std::vector<HT> &grads) {
        vx_tensor *m = run.saved[0] ? run.saved[0] : run.n_out > 1 ? run.out[1] : NULL;
        if (!m || !m->data) { printf("  no dropout mask kept\n"); return false; }
        HT mh = download(m);
        int64_t kept = 0;
        bool ok = true;
        for (size_t e = 0; e < y.f.size(); e++) {
            double s = mh.i[e] ? 1.0 / (1.0 - p) : 0.0;
            kept += mh.i[e] != 0;
            if (!close(y.f[e], x.f[e] * s, 1e-5, 1e-5)) ok = false;
            if (!grads[0].f.empty() && !close(grads[0].f[e], R[e] * s, 1e-5, 1e-5)) ok = false;
        }
        double frac = (double)kept / (double)y.f.size();
        if (fabs(frac - (1 - p)) > 0.1) { printf("  kept %.3f of the elements, ratio %.2f\n", frac, p); ok = false; }
        if (!ok) printf("  Dropout output or gradient differs from x * mask / (1 - ratio)\n");
        return ok;
    };
}

static void dropout_cases() {
    HT x = randf({16, 32});
    auto ident = [](const std::vector<HT> &in) { HT y = in[0]; y.view = false; return y; };
    Case a{Node("Dropout"), {x, scalarf(0.3f)}, {true, false}};
    a.training = false;
    a.ref = ident;
    run_case("Dropout eval (identity)", a);
    Case b{Node("Dropout"), {x, scalarf(0.3f), boolt({}, {0}, true)}, {true, false, false}};
    b.ref = ident;
    run_case("Dropout training_mode false (identity)", b);
    Case c{Node("Dropout"), {x, scalarf(0.3f), boolt({}, {1}, true)}, {true, false, false}};
    c.eps = 1e-3;
    c.check = dropout_check(0.3f, x);
    run_case("Dropout training, ratio 0.3 (saved mask)", c);
    Case d = c;
    d.node.n_out = 2;
    run_case("Dropout training, ratio 0.3, mask output", d);
    Case e{Node("Dropout").f("ratio", 0.5).ops(10), {x}, {true}};
    e.eps = 1e-3;
    e.check = dropout_check(0.5f, x);
    run_case("Dropout opset 10 training (ratio attribute)", e);
    Case f{Node("Dropout"), {x}, {true}};
    f.eps = 1e-3;
    f.check = dropout_check(0.5f, x);
    run_case("Dropout training default ratio 0.5", f);
    HT xs = transposed3(4, 8, 16);
    Case g{Node("Dropout"), {xs, scalarf(0.25f)}, {true, false}};
    g.eps = 1e-3;
    g.check = dropout_check(0.25f, xs);
    run_case("Dropout training strided input", g);
    Case h{Node("Dropout"), {x, scalarf(0.3f)}, {true, false}};
    h.training = false;
    h.node.n_out = 2;
    h.ref = ident;
    run_case("Dropout eval with mask output", h);
}

static void where_cases() {
    auto wref = [](const std::vector<HT> &in) { return ref_where(in[0], in[1], in[2]); };
    std::vector<int64_t> cv(12);
    for (auto &v : cv) v = urand() > 0;
    Case a{Node("Where"), {boolt({3, 4}, cv), randf({3, 4}), randf({3, 4})}, {false, true, true}};
    a.ref = wref;
    run_case("Where same shapes", a);
    std::vector<int64_t> cb(8);
    for (auto &v : cb) v = urand() > 0;
    Case b{Node("Where"), {boolt({2, 1, 4}, cb), randf({3, 4}), randf({2, 3, 1})}, {false, true, true}};
    b.ref = wref;
    run_case("Where broadcast cond [2,1,4], x [3,4], y [2,3,1]", b);
    Case c{Node("Where"), {boolt({2, 1, 4}, cb), randf({}), randf({2, 3, 4})}, {false, true, true}};
    c.ref = wref;
    run_case("Where scalar x", c);
    Case d{Node("Where"), {boolt({3, 4}, cv), view_of(4, {3, 4}, {0, 1}, 0), randf({3, 4})}, {false, true, false}};
    d.ref = wref;
    run_case("Where expanded view x, gradient of x only", d);
}

