/* grad_shape_cases.h: test_grad_elementwise.cu's cases for the shape ops:
 * Expand, Reshape, Flatten, Squeeze, Unsqueeze, Slice, Concat, Cast and
 * Identity (verify/ops_shape.c), on contiguous and strided inputs. Included
 * by test_grad_elementwise.cu after its scaffolding and host references. */

static void shape_cases() {
    /* Expand */
    {
        Case a{Node("Expand"), {randf({3, 1}), vec({2, 3, 4})}, {true, false}};
        a.ref = [](const std::vector<HT> &in) { return ref_expand(in[0], in[1]); };
        run_case("Expand [3,1] to [2,3,4]", a);
        Case b{Node("Expand"), {randf({2, 3, 1}), vec({4})}, {true, false}};
        b.ref = a.ref;
        run_case("Expand [2,3,1] with shape [4] (rank of x)", b);
        Case c{Node("Expand"), {randf({2, 1, 4}), ints({3}, {1, 3, 1}, false)}, {true, false}};
        c.ref = a.ref;
        run_case("Expand with shape 1s, device shape", c);
        Case d{Node("Expand"), {transposed3(2, 1, 3), vec({4, 2, 5, 3})}, {true, false}};
        d.ref = a.ref;
        run_case("Expand strided input", d);
        Case e{Node("Expand"), {randf({2, 3}), vec({2, 3})}, {true, false}};
        e.ref = a.ref;
        run_case("Expand to the same shape", e);
    }
    /* Slice */
    {
        struct S { const char *name; std::vector<int64_t> dims, st, en, ax, sp; bool strided; };
        S cases[] = {
            {"Slice axes 0 and 2, steps 1", {5, 6, 4}, {1, 1}, {4, 3}, {0, 2}, {1, 1}, false},
            {"Slice negative starts / ends", {5, 6, 4}, {-4, -3}, {-1, 100}, {1, 0}, {}, false},
            {"Slice steps 2 and 3", {5, 6, 4}, {0, 1}, {5, 6}, {0, 1}, {2, 3}, false},
            {"Slice negative step (reverse)", {5, 6, 4}, {-1}, {-100}, {1}, {-1}, false},
            {"Slice negative steps -2, negative axis", {5, 6, 4}, {4, 3}, {0, -7}, {0, -1}, {-2, -2}, false},
            {"Slice without axes", {5, 6, 4}, {1, 2}, {3, 5}, {}, {}, false},
            {"Slice to INT64_MAX", {5, 6, 4}, {2}, {INT64_MAX}, {1}, {}, false},
            {"Slice empty result", {5, 6, 4}, {3}, {3}, {0}, {}, false},
            {"Slice strided input", {4, 5, 6}, {1, -1}, {3, 0}, {2, 1}, {1, -2}, true},
        };
        for (S &s : cases) {
            HT x = s.strided ? transposed3(s.dims[0], s.dims[1], s.dims[2]) : randf(s.dims);
            Case c{Node("Slice"), {x, vec(s.st), vec(s.en)}, {true, false, false}};
            if (!s.ax.empty() || !s.sp.empty()) c.in.push_back(s.ax.empty() ? absent() : vec(s.ax));
            if (!s.sp.empty()) c.in.push_back(vec(s.sp));
            c.grad.resize(c.in.size(), false);
            auto st = s.st, en = s.en, ax = s.ax, sp = s.sp;
            c.ref = [st, en, ax, sp](const std::vector<HT> &in) { return ref_slice(in[0], st, en, ax, sp); };
            run_case(s.name, c);
        }
        HT x = randf({5, 6, 4});
        Case d{Node("Slice"), {x, ints({2}, {1, -5}, false), ints({2}, {4, -1}, false), ints({2}, {0, 1}, false),
                               ints({2}, {2, 1}, false)},
               {true, false, false, false, false}};
        d.ref = [](const std::vector<HT> &in) { return ref_slice(in[0], {1, -5}, {4, -1}, {0, 1}, {2, 1}); };
        run_case("Slice device starts / ends / axes / steps", d);
        Case e{Node("Slice").is("starts", {1, 0}).is("ends", {3, -1}).is("axes", {0, 2}).ops(9), {x}, {true}};
        e.ref = [](const std::vector<HT> &in) { return ref_slice(in[0], {1, 0}, {3, -1}, {0, 2}, {}); };
        run_case("Slice opset 9 (attributes)", e);
    }
    /* Concat */
    {
        Case a{Node("Concat").i("axis", 1), {randf({2, 3, 4}), randf({2, 1, 4}), randf({2, 2, 4})}, {true, true, true}};
        a.ref = [](const std::vector<HT> &in) { return ref_concat(in, 1); };
        run_case("Concat axis 1", a);
        Case b{Node("Concat").i("axis", -1), {randf({2, 3, 4}), randf({2, 3, 1}), randf({2, 3, 2})}, {true, false, true}};
        b.ref = [](const std::vector<HT> &in) { return ref_concat(in, -1); };
        run_case("Concat axis -1, middle input without gradient", b);
        Case c{Node("Concat").i("axis", 0), {randf({1, 5}), randf({3, 5})}, {false, true}};
        c.ref = [](const std::vector<HT> &in) { return ref_concat(in, 0); };
        run_case("Concat axis 0, gradient of the second only", c);
        Case d{Node("Concat").i("axis", 1), {transposed3(2, 3, 4), randf({2, 2, 4})}, {true, true}};
        d.ref = [](const std::vector<HT> &in) { return ref_concat(in, 1); };
        run_case("Concat strided input", d);
    }
    /* reshapes */
    {
        Case a{Node("Reshape"), {randf({2, 3, 4}), vec({0, -1, 2})}, {true, false}};
        a.ref = reshaped({2, 6, 2});
        run_case("Reshape [2,3,4] to (0, -1, 2)", a);
        Case b{Node("Reshape"), {transposed3(2, 3, 4), vec({6, 4})}, {true, false}};
        b.ref = reshaped({6, 4});
        run_case("Reshape strided input (a copy)", b);
        Case b2{Node("Reshape"), {transposed3(2, 3, 4), vec({2, 3, 2, 2})}, {true, false}};
        b2.ref = reshaped({2, 3, 2, 2});
        run_case("Reshape strided input splitting a dim (a view)", b2);
        Case c{Node("Flatten").i("axis", 2), {randf({2, 3, 4, 5})}, {true}};
        c.ref = reshaped({6, 20});
        run_case("Flatten axis 2", c);
        Case d{Node("Flatten"), {transposed3(2, 3, 4)}, {true}};
        d.ref = reshaped({2, 12});
        run_case("Flatten strided input", d);
        Case e{Node("Unsqueeze"), {randf({3, 4}), vec({0, -1})}, {true, false}};
        e.ref = reshaped({1, 3, 4, 1});
        run_case("Unsqueeze axes (0, -1)", e);
        Case f{Node("Unsqueeze").is("axes", {1}).ops(11), {transposed3(2, 3, 4)}, {true}};
        f.ref = reshaped({2, 1, 3, 4});
        run_case("Unsqueeze opset 11 (attribute), strided input", f);
        Case g{Node("Squeeze"), {randf({1, 3, 1, 4}), vec({-2})}, {true, false}};
        g.ref = reshaped({1, 3, 4});
        run_case("Squeeze axis -2", g);
        Case h{Node("Squeeze"), {randf({1, 3, 1, 4})}, {true}};
        h.ref = reshaped({3, 4});
        run_case("Squeeze all 1s", h);
        Case k{Node("Identity"), {randf({2, 5})}, {true}};
        k.ref = reshaped({2, 5});
        run_case("Identity", k);
    }
    /* Cast float -> float */
    {
        Case a{Node("Cast").i("to", 1), {randf({3, 4})}, {true}};
        a.ref = reshaped({3, 4});
        run_case("Cast float to float", a);
        Case b{Node("Cast").i("to", 1), {transposed3(2, 3, 4)}, {true}};
        b.ref = reshaped({2, 3, 4});
        run_case("Cast float to float, strided input", b);
    }
}
