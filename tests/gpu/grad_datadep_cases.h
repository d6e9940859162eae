/* grad_datadep_cases.h: test_grad_elementwise.cu's cases for NonZero,
 * Compress, Unique and Multinomial (verify/ops_datadep.cu): exact integer
 * outputs, Compress's gradient by finite differences, and inputs past one
 * compaction block (4096 elements). Included after its scaffolding. */

/* Compress on the host: slices along axis (or the flattened x) whose
 * condition entry is non-zero. */
static HT ref_compress(const HT &x, const HT &cond, int axis) {
    int64_t outer = 1, len = x.numel(), inner = 1;
    if (axis >= 0) {
        len = x.dims[axis];
        for (int d = 0; d < axis; d++) outer *= x.dims[d];
        for (size_t d = axis + 1; d < x.dims.size(); d++) inner *= x.dims[d];
    }
    std::vector<int64_t> keep;
    for (int64_t k = 0; k < (int64_t)cond.i.size() && k < len; k++)
        if (cond.i[k]) keep.push_back(k);
    std::vector<int64_t> yd = axis >= 0 ? x.dims : std::vector<int64_t>{0};
    yd[axis >= 0 ? axis : 0] = (int64_t)keep.size();
    HT y = mk(yd);
    int64_t e = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k : keep)
            for (int64_t i = 0; i < inner; i++) y.f[e++] = x.f[(o * len + k) * inner + i];
    return y;
}

/* NonZero of x on the host: (rank, count), row-major. */
static std::vector<int64_t> ref_nonzero(const HT &x) {
    std::vector<int64_t> at;
    for (int64_t e = 0; e < x.numel(); e++)
        if (x.dt == VX_F32 ? x.f[e] != 0.f : x.i[e] != 0) at.push_back(e);
    std::vector<int64_t> y(x.dims.size() * at.size());
    for (size_t k = 0; k < at.size(); k++) {
        int64_t rem = at[k];
        for (int d = (int)x.dims.size() - 1; d >= 0; d--) {
            y[d * at.size() + k] = rem % x.dims[d];
            rem /= x.dims[d];
        }
    }
    return y;
}

static Check float_check(std::vector<float> want) {
    return [want](vx_run &, const HT &y, const std::vector<float> &, const std::vector<HT> &) {
        if (y.f != want) { printf("  output differs from the host reference\n"); return false; }
        return true;
    };
}

static void datadep_cases() {
    /* NonZero */
    {
        HT x = randf({2, 3});
        x.f = {0, 1.5f, 0, -2, 0, 3};
        Case a{Node("NonZero"), {x}, {false}};
        a.check = exact_check({0, 1, 1, 1, 0, 2});
        run_case("NonZero float [2, 3]", a);
        std::vector<int64_t> v(3 * 50 * 70);
        for (size_t e = 0; e < v.size(); e++) v[e] = e % 7 == 3 || e % 1000 == 0;
        HT b3 = boolt({3, 50, 70}, v);
        Case b{Node("NonZero"), {b3}, {false}};
        b.check = exact_check(ref_nonzero(b3));
        run_case("NonZero bool [3, 50, 70] (3 compaction blocks)", b);
        Case c{Node("NonZero"), {ints({4}, {0, 0, 0, 0}, false)}, {false}};
        c.check = [](vx_run &run, const HT &, const std::vector<float> &, const std::vector<HT> &) {
            return run.out[0]->rank == 2 && run.out[0]->dims[0] == 1 && run.out[0]->dims[1] == 0;
        };
        run_case("NonZero int64 all zeros: shape (1, 0)", c);
    }
    /* Compress: index_select's gradient, the index kept (saved[0]) */
    {
        HT cond = boolt({3}, {1, 0, 1});
        Case a{Node("Compress").i("axis", 1), {randf({3, 4, 2}), cond}, {true, false}};
        a.ref = [](const std::vector<HT> &in) { return ref_compress(in[0], in[1], 1); };
        run_case("Compress axis 1, condition shorter than the axis", a);
        Case b{Node("Compress"), {randf({2, 3}), boolt({5}, {0, 1, 1, 0, 1})}, {true, false}};
        b.ref = [](const std::vector<HT> &in) { return ref_compress(in[0], in[1], -1); };
        run_case("Compress flattened", b);
        std::vector<int64_t> v(9000);
        for (size_t e = 0; e < v.size(); e++) v[e] = e % 3 != 1;
        Case c{Node("Compress").i("axis", -2), {randf({9000, 2}), boolt({9000}, v)}, {true, false}};
        c.ref = [](const std::vector<HT> &in) { return ref_compress(in[0], in[1], 0); };
        run_case("Compress axis -2 over 9000 slices (3 compaction blocks)", c);
        Case d{Node("Compress").i("axis", 0), {randf({3, 2}), boolt({3}, {0, 0, 0})}, {true, false}};
        d.ref = [](const std::vector<HT> &in) { return ref_compress(in[0], in[1], 0); };
        run_case("Compress keeping nothing", d);
    }
    /* Unique: the ONNX spec's examples, one case per output */
    {
        HT x = randf({6});
        x.f = {2, 1, 1, 3, 4, 3};
        Case s{Node("Unique"), {x}, {false}};
        s.node.n_out = 4;
        s.check = float_check({1, 2, 3, 4});
        run_case("Unique sorted: Y", s);
        const char *names[] = {"indices", "inverse_indices", "counts"};
        std::vector<int64_t> sorted_want[] = {{1, 0, 3, 4}, {1, 0, 0, 2, 3, 2}, {2, 1, 2, 1}};
        std::vector<int64_t> unsorted_want[] = {{0, 1, 3, 4}, {0, 1, 1, 2, 3, 2}, {1, 2, 2, 1}};
        for (int k = 0; k < 3; k++) {
            char name[64];
            Case a = s;
            a.out = k + 1;
            a.check = exact_check(sorted_want[k]);
            snprintf(name, sizeof name, "Unique sorted: %s", names[k]);
            run_case(name, a);
            Case b = s;
            b.node.i("sorted", 0);
            b.out = k + 1;
            b.check = exact_check(unsorted_want[k]);
            snprintf(name, sizeof name, "Unique not sorted: %s", names[k]);
            run_case(name, b);
        }
        Case u = s;
        u.node.i("sorted", 0);
        u.check = float_check({2, 1, 3, 4});
        run_case("Unique not sorted: Y", u);
        HT m = randf({3, 3});
        m.f = {1, 0, 0, 1, 0, 0, 2, 3, 4};
        Case a{Node("Unique").i("axis", 0), {m}, {false}};
        a.node.n_out = 4;
        a.check = float_check({1, 0, 0, 2, 3, 4});
        run_case("Unique axis 0: Y", a);
        Case b = a;
        b.out = 2;
        b.check = exact_check({0, 0, 1});
        run_case("Unique axis 0: inverse_indices", b);
        std::vector<int64_t> big(5000);
        for (size_t e = 0; e < big.size(); e++) big[e] = (int64_t)((e * 7919) % 13);
        Case c{Node("Unique"), {ints({5000}, big, false)}, {false}};
        c.node.n_out = 4;
        c.out = 3;
        c.check = [](vx_run &, const HT &y, const std::vector<float> &, const std::vector<HT> &) {
            int64_t sum = 0;
            for (int64_t v : y.i) sum += v;
            return y.i.size() == 13 && sum == 5000;
        };
        run_case("Unique int64 over 5000 elements (2 compaction blocks): counts", c);
    }
    /* Multinomial: certain rows, and a fair coin */
    {
        HT logits = randf({3, 2});
        logits.f = {0, -40, -40, 0, 0, 0};
        Case a{Node("Multinomial").i("sample_size", 2000).i("dtype", 7), {logits}, {false}};
        a.check = [](vx_run &, const HT &y, const std::vector<float> &, const std::vector<HT> &) {
            int64_t ones = 0;
            for (int64_t j = 0; j < 2000; j++) {
                if (y.i[j] != 0 || y.i[2000 + j] != 1) return false;
                ones += y.i[4000 + j];
            }
            if (ones < 850 || ones > 1150) { printf("  Multinomial: %lld of 2000 draws at p 0.5\n", (long long)ones); return false; }
            return true;
        };
        run_case("Multinomial 2000 draws of three rows", a);
    }
}
