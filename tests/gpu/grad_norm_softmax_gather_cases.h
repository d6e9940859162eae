/* grad_norm_softmax_gather_cases.h: test_grad.cu's cases for
 * BatchNormalization, LayerNormalization, pooling and reductions, softmax,
 * Gather and Transpose (verify/ops_norm.cu, ops_pool.cu, ops_reduce.cu,
 * ops_softmax.cu, ops_gather.cu). Included by test_grad.cu after its
 * scaffolding and host references. */

static void norm_softmax_gather_cases() {
    /* BatchNormalization, LayerNormalization */
    {
        HT var = randf({4});
        for (auto &v : var.f) v = fabsf(v) + 0.5f;
        Case c{Node("BatchNormalization").f("epsilon", 1e-5), {randf({3, 4, 2, 3}), randf({4}), randf({4}), randf({4}), var},
               {true, true, true, false, false}};
        c.ref = [](const std::vector<HT> &in) { return ref_batchnorm(in, true, 1e-5); };
        run_case("BatchNormalization training", c);
        Case d = c;
        d.training = false;
        d.ref = [](const std::vector<HT> &in) { return ref_batchnorm(in, false, 1e-5); };
        run_case("BatchNormalization inference", d);
        Case e{Node("BatchNormalization"), {randf({4, 3}), randf({3}), randf({3}), randf({3}), var}, {true, true, true, false, false}};
        e.in[4].dims = {3};
        e.in[4].f.resize(3);
        e.ref = [](const std::vector<HT> &in) { return ref_batchnorm(in, true, 1e-5); };
        run_case("BatchNormalization training 2-D input", e);
        Case f{Node("LayerNormalization"), {randf({2, 3, 8}), randf({8}), randf({8})}, {true, true, true}};
        f.ref = [](const std::vector<HT> &in) { return ref_layernorm(in[0], in[1], &in[2], -1, 1e-5); };
        run_case("LayerNormalization axis -1", f);
        Case g{Node("LayerNormalization").i("axis", 1), {randf({2, 3, 4}), randf({3, 4})}, {true, true}};
        g.ref = [](const std::vector<HT> &in) { return ref_layernorm(in[0], in[1], NULL, 1, 1e-5); };
        run_case("LayerNormalization axis 1, no bias", g);
    }
    /* pooling and reductions */
    {
        Case c{Node("MaxPool").is("kernel_shape", {3, 3}).is("strides", {2, 2}).is("pads", {1, 1, 1, 1}), {randf({2, 3, 7, 7})}, {true}};
        c.eps = 1e-3;
        c.ref = [](const std::vector<HT> &in) { return ref_pool(in[0], true, 3, 2, 1, 4, false); };
        run_case("MaxPool 3x3 stride 2 pad 1", c);
        Case d{Node("MaxPool").is("kernel_shape", {2, 2}).is("strides", {2, 2}).i("ceil_mode", 1), {randf({1, 2, 5, 5})}, {true}};
        d.eps = 1e-3;
        d.ref = [](const std::vector<HT> &in) { return ref_pool(in[0], true, 2, 2, 0, 3, false); };
        run_case("MaxPool ceil_mode", d);
        Case d2 = d;
        d2.node.n_out = 2;
        run_case("MaxPool with Indices output", d2);
        Case e{Node("AveragePool").is("kernel_shape", {3, 3}).is("strides", {2, 2}).is("pads", {1, 1, 1, 1}), {randf({2, 3, 7, 7})}, {true}};
        e.ref = [](const std::vector<HT> &in) { return ref_pool(in[0], false, 3, 2, 1, 4, false); };
        run_case("AveragePool exclude pad", e);
        Case f = e;
        f.node.i("count_include_pad", 1);
        f.ref = [](const std::vector<HT> &in) { return ref_pool(in[0], false, 3, 2, 1, 4, true); };
        run_case("AveragePool count_include_pad", f);
        Case g{Node("GlobalAveragePool"), {randf({2, 3, 4, 5})}, {true}};
        g.ref = [](const std::vector<HT> &in) { return ref_reduce_mean(in[0], {2, 3}, true); };
        run_case("GlobalAveragePool", g);
        Case h{Node("ReduceMean").is("axes", {1}).i("keepdims", 0), {randf({2, 3, 4})}, {true}};
        h.node.opset = 13;
        h.ref = [](const std::vector<HT> &in) { return ref_reduce_mean(in[0], {1}, false); };
        run_case("ReduceMean axes attribute, keepdims 0", h);
        HT axes = ints({2}, {0, -1});
        axes.host_only = true;
        Case k{Node("ReduceMean"), {randf({2, 3, 4}), axes}, {true, false}};
        k.ref = [](const std::vector<HT> &in) { return ref_reduce_mean(in[0], {0, 2}, true); };
        run_case("ReduceMean axes input (opset 18), host only", k);
        Case m{Node("ReduceMean"), {randf({3, 4})}, {true}};
        m.ref = [](const std::vector<HT> &in) { return ref_reduce_mean(in[0], {0, 1}, true); };
        run_case("ReduceMean all axes", m);
    }
    /* softmax */
    {
        Case c{Node("Softmax").i("axis", 1), {randf({2, 5, 3})}, {true}};
        c.ref = [](const std::vector<HT> &in) { return ref_softmax(in[0], 1, false); };
        run_case("Softmax axis 1 (strided)", c);
        Case d{Node("Softmax"), {randf({4, 7})}, {true}};
        d.ref = [](const std::vector<HT> &in) { return ref_softmax(in[0], -1, false); };
        run_case("Softmax last axis", d);
        Case e{Node("LogSoftmax"), {randf({3, 300})}, {true}};
        e.ref = [](const std::vector<HT> &in) { return ref_softmax(in[0], -1, true); };
        run_case("LogSoftmax last axis (300)", e);
        Case f{Node("Softmax"), {randf({2, 3, 4})}, {true}};
        f.node.opset = 11; /* axis 1, flattened: softmax over 12 */
        f.ref = [](const std::vector<HT> &in) {
            HT x = in[0];
            x.dims = {2, 12};
            HT y = ref_softmax(x, 1, false);
            y.dims = {2, 3, 4};
            return y;
        };
        run_case("Softmax opset 11 (coerced to 2-D)", f);
    }
    /* gather, transpose */
    {
        Case c{Node("Gather"), {randf({10, 4}), ints({2, 3}, {1, 3, 3, -1, 0, 9})}, {true, false}};
        c.ref = [](const std::vector<HT> &in) { return ref_gather(in[0], in[1], 0); };
        run_case("Gather axis 0 (embedding, repeated and negative indices)", c);
        HT hi = ints({4}, {4, 0, 2, 4});
        hi.host_only = true;
        Case d{Node("Gather").i("axis", 1), {randf({3, 5, 2}), hi}, {true, false}};
        d.ref = [](const std::vector<HT> &in) { return ref_gather(in[0], in[1], 1); };
        run_case("Gather axis 1, host-only indices", d);
        Case e{Node("GatherElements").i("axis", 1), {randf({3, 4}), ints({3, 2}, {0, 3, 1, 1, 2, -4})}, {true, false}};
        e.ref = [](const std::vector<HT> &in) {
            HT y = mk({3, 2});
            for (int r = 0; r < 3; r++)
                for (int j = 0; j < 2; j++) {
                    int64_t k = in[1].i[r * 2 + j];
                    if (k < 0) k += 4;
                    y.f[r * 2 + j] = in[0].f[r * 4 + k];
                }
            return y;
        };
        run_case("GatherElements axis 1", e);
        Case e2{Node("GatherElements").i("axis", 0), {ints({2, 3}, {10, 11, 12, 20, 21, 22}), ints({2, 3}, {1, 0, 1, 0, 0, -1})},
                {false, false}};
        e2.ref = [](const std::vector<HT> &in) {
            std::vector<int64_t> v(6);
            for (int p = 0; p < 6; p++) {
                int64_t k = in[1].i[p] < 0 ? in[1].i[p] + 2 : in[1].i[p];
                v[p] = in[0].i[k * 3 + p % 3];
            }
            return ints({2, 3}, v);
        };
        run_case("GatherElements int64 data (RoBERTa's position ids)", e2);
        Case f{Node("Transpose").is("perm", {2, 0, 1}), {randf({2, 3, 4})}, {true}};
        f.ref = [](const std::vector<HT> &in) { return ref_transpose(in[0], {2, 0, 1}); };
        run_case("Transpose perm (2, 0, 1)", f);
        Case g{Node("Transpose"), {randf({2, 3, 4, 5})}, {true}};
        g.ref = [](const std::vector<HT> &in) { return ref_transpose(in[0], {3, 2, 1, 0}); };
        run_case("Transpose default (reversed)", g);
    }
}
