/* grad_recurrent_attention_cases.h: test_grad.cu's cases for LSTM, GRU, RNN
 * and Attention (verify/ops_recurrent.cu, ops_attention.cu). Included by
 * test_grad.cu after its scaffolding and host references. */

static void recurrent_attention_cases() {
    /* recurrent layers: T 3, N 2, I 3, H 4 */
    {
        auto rnn_case = [](const char *name, RnnSpec sp, bool bias, bool h0, bool c0, int n_out, int loss_out) {
            int64_t T = 3, N = 2, I = 3, H = 4, D = sp.D, G = sp.kind == 'L' ? 4 : sp.kind == 'G' ? 3 : 1;
            Node nd(sp.kind == 'L' ? "LSTM" : sp.kind == 'G' ? "GRU" : "RNN");
            nd.i("hidden_size", H);
            if (D == 2) nd.s("direction", "bidirectional");
            if (sp.layout1) nd.i("layout", 1);
            if (sp.kind == 'G') nd.i("linear_before_reset", sp.lbr ? 1 : 0);
            if (sp.relu) nd.ss("activations", {"Relu"});
            nd.n_out = n_out;
            std::vector<int64_t> state = sp.layout1 ? std::vector<int64_t>{N, D, H} : std::vector<int64_t>{D, N, H};
            std::vector<HT> in = {randf(sp.layout1 ? std::vector<int64_t>{N, T, I} : std::vector<int64_t>{T, N, I}),
                                  randf({D, G * H, I}), randf({D, G * H, H})};
            std::vector<bool> grad = {true, true, true};
            in.push_back(bias ? randf({D, 2 * G * H}) : HT());
            grad.push_back(bias);
            if (h0 || c0) { in.push_back(HT()); grad.push_back(false); }
            if (h0 || c0) { in.push_back(h0 ? randf(state) : HT()); grad.push_back(h0); }
            if (c0) { in.push_back(randf(state)); grad.push_back(true); }
            Case c{nd, in, grad};
            c.loss_out = loss_out;
            if (sp.relu) c.eps = 1e-3;
            c.ref = [sp, loss_out](const std::vector<HT> &x) { return ref_rnn(sp, x, loss_out); };
            run_case(name, c);
        };
        rnn_case("LSTM bidirectional, B, initial_h, initial_c (Y)", {'L', 2, false, false, false}, true, true, true, 3, 0);
        rnn_case("LSTM forward, no B, no initial state (Y_h)", {'L', 1, false, false, false}, false, false, false, 2, 1);
        rnn_case("LSTM bidirectional, initial_c (Y_c)", {'L', 2, false, false, false}, true, false, true, 3, 2);
        rnn_case("LSTM layout 1, bidirectional (Y_h)", {'L', 2, true, false, false}, true, true, true, 2, 1);
        rnn_case("GRU linear_before_reset 1, bidirectional, B, initial_h (Y)", {'G', 2, false, true, false}, true, true, false, 2, 0);
        rnn_case("GRU linear_before_reset 1, no initial state (Y_h)", {'G', 1, false, true, false}, true, false, false, 2, 1);
        rnn_case("GRU linear_before_reset 0, B, initial_h (Y)", {'G', 1, false, false, false}, true, true, false, 2, 0);
        rnn_case("GRU linear_before_reset 0, bidirectional (Y_h)", {'G', 2, false, false, false}, true, false, false, 2, 1);
        rnn_case("RNN tanh bidirectional, B, initial_h (Y)", {'R', 2, false, false, false}, true, true, false, 2, 0);
        rnn_case("RNN Relu layout 1, initial_h (Y_h)", {'R', 1, true, false, true}, true, true, false, 2, 1);
    }

    /* Attention */
    {
        Case a{Node("Attention"), {randf({2, 2, 3, 5}), randf({2, 2, 4, 5}), randf({2, 2, 4, 3})}, {true, true, true}};
        a.ref = [](const std::vector<HT> &in) { return ref_attention(in, false); };
        run_case("Attention [2, 2, 3, 5] x 4 keys", a);
        Case m{Node("Attention"), {randf({2, 2, 3, 5}), randf({2, 2, 4, 5}), randf({2, 2, 4, 3}), randf({1, 1, 3, 4})},
               {true, true, true, true}};
        m.ref = [](const std::vector<HT> &in) { return ref_attention(in, false); };
        run_case("Attention, float mask [1, 1, 3, 4] with its gradient", m);
        Case q{Node("Attention"), {randf({1, 4, 3, 4}), randf({1, 2, 3, 4}), randf({1, 2, 3, 2})}, {true, true, true}};
        q.ref = [](const std::vector<HT> &in) { return ref_attention(in, false); };
        run_case("Attention grouped-query (4 query heads, 2 key heads)", q);
        Case c{Node("Attention").i("is_causal", 1), {randf({1, 2, 4, 3}), randf({1, 2, 4, 3}), randf({1, 2, 4, 3})},
               {true, true, true}};
        c.ref = [](const std::vector<HT> &in) { return ref_attention(in, true); };
        run_case("Attention is_causal", c);
        Case d{Node("Attention").i("memest.dropout", 1), {randf({1, 2, 4, 3}), randf({1, 2, 5, 3}), randf({1, 2, 5, 3})},
               {true, true, true}};
        run_case("Attention with dropout (a fixed mask: finite differences only)", d);
    }
}
