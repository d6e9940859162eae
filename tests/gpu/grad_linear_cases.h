/* grad_linear_cases.h: test_grad.cu's cases for Gemm, MatMul, Einsum and
 * Conv (verify/ops_gemm.cu, ops_einsum.cu, ops_conv.cu). Included by
 * test_grad.cu after its scaffolding and host references. */

static void linear_cases() {
    /* Gemm */
    {
        Case c{Node("Gemm").i("transB", 1).f("alpha", 0.7).f("beta", 1.3), {randf({3, 4}), randf({5, 4}), randf({5})}, {true, true, true}};
        c.ref = [](const std::vector<HT> &in) { return ref_gemm(in[0], in[1], &in[2], false, true, 0.7, 1.3); };
        run_case("Gemm transB, alpha, beta, bias (N)", c);
        Case d{Node("Gemm").i("transA", 1), {randf({4, 3}), randf({4, 5}), randf({3, 1})}, {true, true, true}};
        d.ref = [](const std::vector<HT> &in) { return ref_gemm(in[0], in[1], &in[2], true, false, 1, 1); };
        run_case("Gemm transA, bias (M, 1)", d);
        Case e{Node("Gemm").i("transA", 1).i("transB", 1), {randf({4, 3}), randf({2, 4})}, {true, true}};
        e.ref = [](const std::vector<HT> &in) { return ref_gemm(in[0], in[1], NULL, true, true, 1, 1); };
        run_case("Gemm transA transB, no bias", e);
    }
    /* MatMul */
    {
        auto mm = [](const char *name, std::vector<int64_t> a, std::vector<int64_t> b) {
            Case c{Node("MatMul"), {randf(a), randf(b)}, {true, true}};
            c.ref = [](const std::vector<HT> &in) { return ref_matmul(in[0], in[1]); };
            run_case(name, c);
        };
        mm("MatMul 2-D", {3, 4}, {4, 5});
        mm("MatMul batch x 2-D (folded)", {2, 3, 4}, {4, 5});
        mm("MatMul batched same batch", {2, 3, 4}, {2, 4, 5});
        mm("MatMul broadcast batch dims", {2, 1, 3, 4}, {3, 4, 2});
        mm("MatMul 2-D x batch", {3, 4}, {2, 4, 5});
        mm("MatMul 1-D x batch", {4}, {2, 4, 3});
        mm("MatMul batch x 1-D", {2, 3, 4}, {4});
        mm("MatMul 1-D x 1-D", {4}, {4});
    }
    /* Einsum (two operands, matmul-like) against a host einsum over every letter */
    {
        auto ein = [](const char *name, const char *eq, std::vector<int64_t> a, std::vector<int64_t> b) {
            Case c{Node("Einsum").s("equation", eq), {randf(a), randf(b)}, {true, true}};
            std::string e; /* the equation without its spaces, for the reference's parser */
            for (const char *p = eq; *p; p++)
                if (*p != ' ') e += *p;
            c.ref = [e](const std::vector<HT> &in) {
                std::string sa = e.substr(0, e.find(',')), sb = e.substr(e.find(',') + 1, e.find('-') - e.find(',') - 1),
                            so = e.substr(e.find('>') + 1), all;
                int64_t size[128] = {0};
                for (size_t i = 0; i < sa.size(); i++) size[(int)sa[i]] = in[0].dims[i];
                for (size_t i = 0; i < sb.size(); i++) size[(int)sb[i]] = in[1].dims[i];
                for (char ch : sa + sb) if (all.find(ch) == std::string::npos) all += ch;
                std::vector<int64_t> od;
                for (char ch : so) od.push_back(size[(int)ch]);
                HT y = mk(od);
                int64_t total = 1;
                for (char ch : all) total *= size[(int)ch];
                for (int64_t t = 0; t < total; t++) {
                    int64_t at[128] = {0}, r = t;
                    for (int i = (int)all.size() - 1; i >= 0; i--) { at[(int)all[i]] = r % size[(int)all[i]]; r /= size[(int)all[i]]; }
                    auto off = [&](const std::string &s) { int64_t o = 0; for (char ch : s) o = o * size[(int)ch] + at[(int)ch]; return o; };
                    y.f[off(so)] += in[0].f[off(sa)] * in[1].f[off(sb)];
                }
                return y;
            };
            run_case(name, c);
        };
        ein("Einsum bij,bjk->bik (bmm)", "bij,bjk->bik", {2, 3, 4}, {2, 4, 5});
        ein("Einsum bhqd,bhkd->bhqk (attention scores)", "bhqd,bhkd->bhqk", {2, 3, 4, 5}, {2, 3, 6, 5});
        ein("Einsum ij,j->i (matrix-vector)", "ij,j->i", {3, 4}, {4});
        ein("Einsum ik,kj->ji (permuted output)", "ik,kj->ji", {3, 4}, {4, 5});
        ein("Einsum bn,anm->bam (batch letter in the middle)", "bn, anm -> bam", {2, 3}, {4, 3, 5});
    }
    /* Conv */
    {
        Case c{Node("Conv").i("group", 2).is("pads", {1, 1, 1, 1}).is("strides", {2, 1}).is("dilations", {1, 2}),
               {randf({2, 4, 7, 6}), randf({6, 2, 3, 3}), randf({6})}, {true, true, true}};
        c.ref = [](const std::vector<HT> &in) { return ref_conv(in[0], in[1], &in[2], 2, {1, 1, 1, 1}, {2, 1}, {1, 2}); };
        run_case("Conv 2-D group 2, pads, strides, dilations, bias", c);
        Case d{Node("Conv").i("group", 3).is("pads", {1, 1, 1, 1}), {randf({2, 3, 5, 5}), randf({6, 1, 3, 3}), randf({6})},
               {true, true, true}};
        d.ref = [](const std::vector<HT> &in) { return ref_conv(in[0], in[1], &in[2], 3, {1, 1, 1, 1}, {1, 1}, {1, 1}); };
        run_case("Conv depthwise (multiplier 2)", d);
        Case e{Node("Conv"), {randf({2, 4, 5, 5}), randf({3, 4, 1, 1})}, {true, true}};
        e.ref = [](const std::vector<HT> &in) { return ref_conv(in[0], in[1], NULL, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}); };
        run_case("Conv 1x1", e);
        Case f{Node("Conv").is("strides", {2}).is("pads", {1, 0}), {randf({2, 3, 9}), randf({4, 3, 3}), randf({4})}, {true, true, true}};
        f.ref = [](const std::vector<HT> &in) { return ref_conv(in[0], in[1], &in[2], 1, {1, 0}, {2}, {1}); };
        run_case("Conv 1-D strides, asymmetric pads", f);
        Case g{Node("Conv").s("auto_pad", "SAME_UPPER").is("strides", {2, 2}), {randf({1, 2, 6, 6}), randf({3, 2, 3, 3})}, {true, true}};
        g.ref = [](const std::vector<HT> &in) { return ref_conv(in[0], in[1], NULL, 1, {0, 0, 1, 1}, {2, 2}, {1, 1}); };
        run_case("Conv SAME_UPPER stride 2", g);
        Case h{Node("Conv").is("pads", {1, 1, 1, 1}), {randf({5, 3, 4, 4}), randf({2, 3, 3, 3})}, {true, true}};
        h.ref = [](const std::vector<HT> &in) { return ref_conv(in[0], in[1], NULL, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}); };
        run_case("Conv chunked batch (C*k*k > M)", h);
        Case k3{Node("Conv").is("pads", {1, 1, 1, 1, 1, 1}).is("strides", {1, 2, 2}),
                {randf({2, 3, 4, 5, 5}), randf({4, 3, 3, 3, 3}), randf({4})}, {true, true, true}};
        k3.ref = [](const std::vector<HT> &in) { return ref_conv3d(in[0], in[1], &in[2], 1, {1, 1, 1}, {1, 2, 2}); };
        run_case("Conv 3-D pads 1, strides (1, 2, 2), bias", k3);
        Case d3{Node("Conv").i("group", 2).is("pads", {0, 1, 1, 0, 1, 1}), {randf({1, 2, 3, 4, 4}), randf({4, 1, 2, 3, 3})},
                {true, true}};
        d3.ref = [](const std::vector<HT> &in) { return ref_conv3d(in[0], in[1], NULL, 2, {0, 1, 1}, {1, 1, 1}); };
        run_case("Conv 3-D depthwise (multiplier 2)", d3);
        Case p3{Node("Conv"), {randf({2, 3, 2, 3, 3}), randf({2, 3, 1, 1, 1})}, {true, true}};
        p3.ref = [](const std::vector<HT> &in) { return ref_conv3d(in[0], in[1], NULL, 1, {0, 0, 0}, {1, 1, 1}); };
        run_case("Conv 3-D 1x1x1", p3);
        Case g3{Node("Conv").i("group", 2).is("pads", {1, 0, 1, 1, 0, 1}).is("strides", {2, 1, 2}),
                {randf({2, 4, 5, 6, 7}), randf({4, 2, 3, 3, 2}), randf({4})}, {true, true, true}};
        g3.ref = [](const std::vector<HT> &in) { return ref_conv3d(in[0], in[1], &in[2], 2, {1, 0, 1}, {2, 1, 2}); };
        run_case("Conv 3-D group 2, strides (2, 1, 2)", g3);
        /* rows 200 wide: the staged im2col takes its output rows in runs */
        Case w3{Node("Conv").is("pads", {1, 1, 1, 1, 1, 1}), {randf({1, 2, 3, 40, 200}), randf({2, 2, 3, 3, 3})},
                {true, true}};
        w3.ref = [](const std::vector<HT> &in) { return ref_conv3d(in[0], in[1], NULL, 1, {1, 1, 1}, {1, 1, 1}); };
        run_case("Conv 3-D, output rows in runs", w3);
    }
}
