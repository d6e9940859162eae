/*
 * test_finetune: fine-tuning estimates through the public API: frozen
 * parameters (est_options.params, --trainable / --freeze), Adafactor, and
 * gradient accumulation (est_options.grad_accum), on models/lora_block.json:
 *
 *   x [B, 64] -> base   (MatMul, base.weight [64, 64])           -> b [B, 64]
 *   x         -> lora_A (MatMul, base.lora_A.default.weight [64, 8]) -> a [B, 8]
 *   a         -> lora_B (MatMul, base.lora_B.default.weight [8, 64]) -> d [B, 64]
 *   add(b, d) -> h; relu(h) -> r; r -> head (MatMul, head.weight [64, 16]) -> y [B, 16]
 *
 * Every expected figure is derived by hand below, one term per tensor, with
 * the rules of docs/memory-model.md (each tensor one allocation rounded up to
 * 512 bytes; parameters, optimizer state, the input, the previous y and the
 * loss resident; see test_simulate.c for the whole walk). What autograd keeps
 * follows derivatives.yaml: mm's "self: mm_mat1_backward(grad, mat2, ...)"
 * keeps mat2 only when self needs a gradient and "mat2:
 * mm_mat2_backward(grad, self, ...)" keeps self only when mat2 needs one.
 *
 * And PyTorch's parameter names in exports of a two-layer Llama with a LoRA
 * adapter (tests/data/make_lora_llama.py made them; onnx/param_names.c): the
 * dynamo export's folded and merged weights come back as the model's 37
 * parameters under their named_parameters() names, and its merged
 * lora_dropout calls as one Dropout each. And tensor.detach() in a dynamo
 * export (tests/data/detach.dynamo.onnx) stops the gradient.
 *
 * usage: test_finetune MODELS_DIR DATA_DIR
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate_util.h"

/* Sizes at batch 4, float32, rounded as the allocator rounds. */
enum {
    W = 64 * 64 * 4,      /* 16384 */
    A = 64 * 8 * 4,       /* 2048 */
    B = 8 * 64 * 4,       /* 2048 */
    W2 = 64 * 16 * 4,     /* 4096 */
    P = W + A + B + W2,   /* 24576 */
    X = 4 * 64 * 4,       /* the input, 1024 */
    ACT64 = 4 * 64 * 4,   /* b, d, h, r: 1024 each */
    ACT8 = 512,           /* a: 128 bytes -> 512 */
    Y = 512,              /* 256 bytes -> 512 */
    LOSS = 512,
};

static const char *adapters[] = {"lora_"};

/* dir/file, loaded; NULL (a failed check) when it does not load. */
static est_graph *load_model(const char *dir, const char *file) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    est_error err;
    est_graph *g = NULL;
    if (est_load_file(path, &g, &err) != EST_OK) CHECK(false, "load %s: %s", path, err.message);
    return g;
}

static est_report *estimate(const est_graph *g, est_optimizer o, const est_param_filter *f, int64_t accum) {
    est_options opt;
    est_options_init(&opt);
    opt.batch = 4;
    opt.optimizer = o;
    if (f) opt.params = *f;
    opt.grad_accum = accum;
    est_error err;
    est_report *r = NULL;
    if (est_estimate(g, &opt, &r, &err) != EST_OK) CHECK(false, "estimate: %s", err.message);
    return r;
}

static const est_layer *layer(const est_report *r, const char *name) {
    static const est_layer missing = {0};
    for (size_t i = 0; i < est_report_layer_count(r); i++)
        if (strcmp(est_report_layer(r, i)->name, name) == 0) return est_report_layer(r, i);
    CHECK(false, "no layer %s", name);
    return &missing;
}

static void check_peak(const est_report *r, uint64_t bytes, est_phase phase, const char *at, const char *what) {
    const est_peak *p = est_report_peak(r);
    CHECK(p->bytes == bytes, "%s: peak %llu, expected %llu", what, U(p->bytes), U(bytes));
    CHECK(p->phase == phase && strcmp(p->layer, at) == 0, "%s: peak during %s at '%s', expected %s at '%s'", what,
          est_phase_name(p->phase), p->layer, est_phase_name(phase), at);
    uint64_t sum = p->params + p->buffers + p->grads + p->optimizer + p->activations + p->temp + p->inputs + p->comm + p->other;
    CHECK(sum == p->bytes, "%s: the peak's categories sum to %llu", what, U(sum));
}

/* The sizes the derivations rest on. */
static void test_sizes(void) {
    CHECK(R(4 * 8 * 4) == ACT8 && R(4 * 16 * 4) == Y && R(X) == X && P == 24576, "sizes");
}

/* 1. Only the adapter trains (--trainable lora_, SGD). */
static void test_adapter_only(const est_graph *g) {
    est_param_filter f = {.trainable = adapters, .n_trainable = 1};
    est_report *r = estimate(g, EST_OPT_SGD, &f, 0);
    if (!r) return;
    const est_totals *t = est_report_totals(r);
    CHECK(t->param_count == 6144 && t->trainable_param_count == 1024, "params %llu, trainable %llu",
          U(t->param_count), U(t->trainable_param_count));
    CHECK(t->trainable_param_bytes == A + B, "trainable bytes %llu", U(t->trainable_param_bytes));
    CHECK(t->grads_bytes == A + B, "only the adapter has gradients: %llu", U(t->grads_bytes));
    /* What each layer keeps: base needs no backward at all (x is an input,
     * its weight frozen); lora_A keeps x (resident: 0 counted); lora_B keeps
     * a for its weight's gradient; relu keeps r; head's weight is frozen, so
     * it keeps its weight (a parameter, 0 counted) for dr, and not r. */
    CHECK(layer(r, "base")->saved_bytes == 0 && layer(r, "base")->flops_backward == 0, "base runs no backward");
    CHECK(layer(r, "lora_B")->saved_bytes == ACT8, "lora_B keeps a: %llu", U(layer(r, "lora_B")->saved_bytes));
    CHECK(layer(r, "relu")->saved_bytes == ACT64, "relu keeps r");
    CHECK(layer(r, "head")->saved_bytes == 0, "frozen head keeps no input: %llu", U(layer(r, "head")->saved_bytes));
    /* head's backward makes dr only: one product of 2 * 4 * 64 * 16. */
    CHECK(layer(r, "head")->flops_backward == 2 * 4 * 64 * 16, "head backward flops %llu",
          U(layer(r, "head")->flops_backward));
    /* End of forward: a (saved by lora_B), r (saved by relu), y. */
    CHECK(t->activations_bytes == ACT8 + ACT64 + Y, "activations %llu", U(t->activations_bytes));
    /* The peak: lora_A's backward, where dA is made while da is alive and
     * dB already exists: params + dB + dA + da + x + (y + loss). */
    uint64_t peak = P + B + A + ACT8 + X + Y + LOSS;
    CHECK(peak == 31232, "derivation %llu", U(peak));
    check_peak(r, peak, EST_PHASE_BACKWARD, "lora_A", "adapter only, sgd");
    for (size_t i = 0; i < est_report_param_count(r); i++) {
        const est_param_info *p = est_report_param(r, i);
        CHECK(p->trainable == (strstr(p->name, "lora_") != NULL), "param %s trainable %d", p->name, p->trainable);
    }
    est_report_free(r);

    /* Adam: state for the adapter only (2 x (A + B)); the step's sqrt
     * temporary is adapter-sized: params + grads + state + x + y + loss +
     * sqrt(exp_avg_sq). */
    r = estimate(g, EST_OPT_ADAM, &f, 0);
    if (!r) return;
    CHECK(est_report_totals(r)->optimizer_bytes == 2 * (A + B), "adam state %llu",
          U(est_report_totals(r)->optimizer_bytes));
    uint64_t step = P + (A + B) + 2 * (A + B) + X + Y + LOSS + (A + B);
    check_peak(r, step, EST_PHASE_OPTIMIZER, "", "adapter only, adam");
    est_report_free(r);
}

/* 1b. The adapter under --amp bf16: the gradients and state stay float32
 * and cover the adapter only; the frozen weights are cast (autocast's
 * cached copies) but get no gradient. */
static void test_adapter_amp(const est_graph *g) {
    est_options opt;
    est_options_init(&opt);
    opt.batch = 4;
    opt.optimizer = EST_OPT_SGD;
    opt.amp = EST_AMP_BF16;
    opt.params = (est_param_filter){.trainable = adapters, .n_trainable = 1};
    est_error err;
    est_report *r = NULL;
    if (est_estimate(g, &opt, &r, &err) != EST_OK) {
        CHECK(false, "amp: %s", err.message);
        return;
    }
    CHECK(est_report_totals(r)->grads_bytes == A + B, "amp: float32 adapter gradients only, %llu",
          U(est_report_totals(r)->grads_bytes));
    CHECK(layer(r, "base")->flops_backward == 0, "amp: the frozen base runs no backward");
    est_report_free(r);
}

/* 2. Everything trains: the same graph keeps more (head keeps r, base keeps
 * nothing more since x is an input but now runs its backward). */
static void test_all_train(const est_graph *g) {
    est_report *r = estimate(g, EST_OPT_SGD, NULL, 0);
    if (!r) return;
    const est_totals *t = est_report_totals(r);
    CHECK(t->trainable_param_count == t->param_count, "all train: %llu of %llu", U(t->trainable_param_count),
          U(t->param_count));
    CHECK(layer(r, "head")->saved_bytes == ACT64, "a trained head keeps r: %llu", U(layer(r, "head")->saved_bytes));
    CHECK(layer(r, "base")->flops_backward == 2 * 4 * 64 * 64, "base's weight gradient: %llu",
          U(layer(r, "base")->flops_backward));
    CHECK(t->grads_bytes == P, "grads %llu", U(t->grads_bytes));
    est_report_free(r);
}

/* 3. --freeze wins over --trainable: train the adapter's B only. */
static void test_freeze(const est_graph *g) {
    static const char *frozen[] = {"*lora_A*"};
    est_param_filter f = {.trainable = adapters, .n_trainable = 1, .frozen = frozen, .n_frozen = 1};
    est_report *r = estimate(g, EST_OPT_SGD, &f, 0);
    if (!r) return;
    CHECK(est_report_totals(r)->trainable_param_count == 512, "B alone: %llu",
          U(est_report_totals(r)->trainable_param_count));
    /* a needs no gradient now: lora_B keeps a for dB, lora_A runs no backward */
    CHECK(layer(r, "lora_A")->flops_backward == 0, "lora_A runs no backward");
    CHECK(layer(r, "lora_B")->saved_bytes == ACT8, "lora_B keeps a");
    est_report_free(r);
}

/* 4. Adafactor: per 2-D parameter a row factor (rows) and a column factor
 * (columns): A [64, 8]: 64 + 8 floats; B [8, 64]: 8 + 64 floats, each
 * rounded to 512 bytes. Its loop updates one parameter at a time with one
 * parameter-sized var_estimate: the step's transient is the largest trained
 * parameter, 2048 bytes. */
static void test_adafactor(const est_graph *g) {
    est_param_filter f = {.trainable = adapters, .n_trainable = 1};
    est_report *r = estimate(g, EST_OPT_ADAFACTOR, &f, 0);
    if (!r) return;
    uint64_t state = R(64 * 4) + R(8 * 4) + R(8 * 4) + R(64 * 4);
    CHECK(state == 2048, "derivation %llu", U(state));
    CHECK(est_report_totals(r)->optimizer_bytes == state, "adafactor state %llu", U(est_report_totals(r)->optimizer_bytes));
    uint64_t step = P + (A + B) + state + X + Y + LOSS + A;
    CHECK(step == 34816, "derivation %llu", U(step));
    check_peak(r, step, EST_PHASE_OPTIMIZER, "", "adafactor");
    CHECK(strcmp(est_optimizer_name(EST_OPT_ADAFACTOR), "adafactor") == 0 &&
              est_optimizer_from_name("adafactor") == EST_OPT_ADAFACTOR,
          "adafactor's name");
    est_report_free(r);
}

/* 5. Two micro-batches a step (SGD): the second one's backward adds into
 * the .grad tensors kept from the first. Its largest moment is lora_B's
 * backward: both gradients, the incoming dd, the new da, the new dB (a
 * transient added into .grad) and the saved a: params + (dA + dB) + dd + da
 * + dB' + a + x + y + loss. */
static void test_grad_accum(const est_graph *g) {
    est_param_filter f = {.trainable = adapters, .n_trainable = 1};
    est_report *r = estimate(g, EST_OPT_SGD, &f, 2);
    if (!r) return;
    uint64_t peak = P + (A + B) + ACT64 + ACT8 + B + ACT8 + X + Y + LOSS;
    CHECK(peak == 34816, "derivation %llu", U(peak));
    check_peak(r, peak, EST_PHASE_BACKWARD, "lora_B", "grad accum 2");
    CHECK(est_report_totals(r)->grads_bytes == A + B, "grads %llu", U(est_report_totals(r)->grads_bytes));
    est_report_free(r);
    /* and a single micro-batch is the plain step */
    est_report *one = estimate(g, EST_OPT_SGD, &f, 1), *none = estimate(g, EST_OPT_SGD, &f, 0);
    if (one && none)
        CHECK(est_report_peak(one)->bytes == est_report_peak(none)->bytes, "grad_accum 1 == 0: %llu vs %llu",
              U(est_report_peak(one)->bytes), U(est_report_peak(none)->bytes));
    est_report_free(one);
    est_report_free(none);
}

/* 5b. With --dtype bfloat16 the output y is bfloat16, and the protocol's
 * loss = y.float().mean() makes a float32 copy of it, as MeanBackward's
 * float32 gradient is before its cast down: x [4, 8] -> MatMul W [8, 4096]
 * -> y [4, 4096], SGD. The backward's first moment holds W (65536 bytes in
 * bf16), x (64 -> 512), y (32768) and the loss (512), the seed (512), dy
 * (32768) and the float32 gradient of y.float() (65536): 198144, above the
 * MatMul's backward (W + x + y + loss + dy + dW 65536 = 197632). */
static void test_bf16_loss_copy(void) {
    static const char wide[] =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"wide\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 8]}],\n"
        " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [8, 4096]}],\n"
        " \"nodes\": [{\"name\": \"mm\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"y\"]}],\n"
        " \"outputs\": [\"y\"]}\n";
    est_error err;
    est_graph *g = NULL;
    if (est_load_json_buffer(wide, sizeof wide - 1, "wide.json", &g, &err) != EST_OK) {
        CHECK(false, "wide.json: %s", err.message);
        return;
    }
    est_options opt;
    est_options_init(&opt);
    opt.batch = 4;
    opt.optimizer = EST_OPT_SGD;
    opt.dtype = EST_DT_BFLOAT16;
    est_report *r = NULL;
    if (est_estimate(g, &opt, &r, &err) != EST_OK) CHECK(false, "wide: %s", err.message);
    if (r) {
        uint64_t peak = 65536 + 512 + 32768 + 512 + 512 + 32768 + 65536;
        CHECK(peak == 198144, "derivation %llu", U(peak));
        check_peak(r, peak, EST_PHASE_BACKWARD, "loss", "bf16 y.float()");
    }
    est_report_free(r);
    est_graph_free(g);
}

/* 5c. A bfloat16 export with a float32 island, as Hugging Face's RMSNorm
 * writes hidden_states.to(torch.float32): x [4, 64] bf16 -> MatMul W1 [64,
 * 64] bf16 -> h -> Cast float32 -> Sigmoid -> s (float32) -> Cast bf16 ->
 * MatMul W2 [64, 16] bf16 -> y. The export's dtype is bfloat16; --dtype
 * converts the tensors of that dtype only:
 *                       default / --dtype bfloat16   --dtype float32
 *   parameters held     (4096 + 1024) * 2 = 10240    20480
 *   Sigmoid saves s     4 * 64 * 4 = 1024            1024
 *   mm2 saves sb        4 * 64 * 2 = 512             1024
 * (mm2 keeps sb for W2's gradient; W2, which sb's gradient needs, is a
 * parameter and counted as one.) */
static void test_float32_island(void) {
    static const char island[] =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"island\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"bfloat16\", \"dims\": [\"batch\", 64]}],\n"
        " \"initializers\": [{\"name\": \"W1\", \"dtype\": \"bfloat16\", \"dims\": [64, 64]},\n"
        "   {\"name\": \"W2\", \"dtype\": \"bfloat16\", \"dims\": [64, 16]}],\n"
        " \"nodes\": [{\"name\": \"mm1\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W1\"], \"outputs\": [\"h\"]},\n"
        "  {\"name\": \"up\", \"op\": \"Cast\", \"inputs\": [\"h\"], \"outputs\": [\"hf\"],\n"
        "   \"attributes\": {\"to\": {\"int\": 1}}},\n"
        "  {\"name\": \"sig\", \"op\": \"Sigmoid\", \"inputs\": [\"hf\"], \"outputs\": [\"s\"]},\n"
        "  {\"name\": \"down\", \"op\": \"Cast\", \"inputs\": [\"s\"], \"outputs\": [\"sb\"],\n"
        "   \"attributes\": {\"to\": {\"int\": 16}}},\n"
        "  {\"name\": \"mm2\", \"op\": \"MatMul\", \"inputs\": [\"sb\", \"W2\"], \"outputs\": [\"y\"]}],\n"
        " \"outputs\": [\"y\"]}\n";
    est_error err;
    est_graph *g = NULL;
    if (est_load_json_buffer(island, sizeof island - 1, "island.json", &g, &err) != EST_OK) {
        CHECK(false, "island.json: %s", err.message);
        return;
    }
    CHECK(est_graph_dtype(g) == EST_DT_BFLOAT16, "island: export dtype %s", est_dtype_name(est_graph_dtype(g)));
    static const struct {
        est_dtype dtype;
        est_dtype step;
        uint64_t params, sig_saves, mm2_saves;
    } cases[] = {
        {EST_DT_UNDEFINED, EST_DT_BFLOAT16, 10240, 1024, 512},
        {EST_DT_BFLOAT16, EST_DT_BFLOAT16, 10240, 1024, 512},
        {EST_DT_FLOAT, EST_DT_FLOAT, 20480, 1024, 1024},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        est_options opt;
        est_options_init(&opt);
        opt.batch = 4;
        opt.optimizer = EST_OPT_SGD;
        opt.dtype = cases[c].dtype;
        const char *what = cases[c].dtype ? est_dtype_name(cases[c].dtype) : "as exported";
        est_report *r = NULL;
        if (est_estimate(g, &opt, &r, &err) != EST_OK) {
            CHECK(false, "island %s: %s", what, err.message);
            continue;
        }
        CHECK(est_report_dtype(r) == cases[c].step, "island %s: step dtype %s", what,
              est_dtype_name(est_report_dtype(r)));
        CHECK(est_report_totals(r)->params_bytes == cases[c].params, "island %s: parameters %llu, expected %llu",
              what, U(est_report_totals(r)->params_bytes), U(cases[c].params));
        CHECK(est_report_param(r, 0)->dtype == cases[c].step, "island %s: W1 is %s", what,
              est_dtype_name(est_report_param(r, 0)->dtype));
        CHECK(layer(r, "sig")->saved_bytes == cases[c].sig_saves, "island %s: Sigmoid saves %llu, expected %llu",
              what, U(layer(r, "sig")->saved_bytes), U(cases[c].sig_saves));
        CHECK(layer(r, "mm2")->saved_bytes == cases[c].mm2_saves, "island %s: mm2 saves %llu, expected %llu", what,
              U(layer(r, "mm2")->saved_bytes), U(cases[c].mm2_saves));
        est_report_free(r);
    }
    est_graph_free(g);
}

/* 5d. tensor.detach() in a dynamo export (tests/data/make_detach.py): the
 * Identity whose FX call is aten.detach becomes memest's Detach, and the
 * Identity of aten.alias stays. In Mul(h, sd) with sd = detach(sigmoid(h)),
 * only h needs a gradient: mul's "self: grad * other" keeps sd (4 x 64 x 4 =
 * 1024 bytes), and "other: grad * self", which would keep h too, is not
 * computed. */
static void test_detach(const char *data_dir) {
    est_graph *g = load_model(data_dir, "detach.dynamo.onnx");
    est_report *r = g ? estimate(g, EST_OPT_SGD, NULL, 1) : NULL;
    if (r) {
        const char *detach = layer(r, "node_detach")->op, *alias = layer(r, "node_alias")->op;
        CHECK(detach && strcmp(detach, "Detach") == 0, "node_detach is %s, expected Detach", detach);
        CHECK(alias && strcmp(alias, "Identity") == 0, "node_alias is %s, expected Identity", alias);
        CHECK(layer(r, "node_mul")->saved_bytes == 1024, "Mul(h, detached) saves %llu, expected sd's 1024",
              U(layer(r, "node_mul")->saved_bytes));
    }
    est_report_free(r);
    est_graph_free(g);
}

/* 5e. A backward no gradient reaches: x [4, 64] -> mm1 (W1) -> h -> mm2
 * (W2) -> q -> Detach -> qd; y = h + qd. mm2 records a backward that saves h
 * (for W2's gradient), but the loss reaches q only through the Detach, so
 * PyTorch never runs it and frees h with q's grad_fn, after the Add. So:
 * mm2 saves nothing and counts no backward FLOPs; W2 gets no gradient (the
 * gradients are W1's 64 x 64 x 4 = 16384 bytes); the activations at the end
 * of the forward pass are y alone (1024 bytes), not h + y. */
static void test_unreached_backward(void) {
    static const char json[] =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"unreached\",\n"
        " \"opset_import\": {\"\": 17, \"ai.memest\": 1},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 64]}],\n"
        " \"initializers\": [{\"name\": \"W1\", \"dtype\": \"float32\", \"dims\": [64, 64]},\n"
        "   {\"name\": \"W2\", \"dtype\": \"float32\", \"dims\": [64, 64]}],\n"
        " \"nodes\": [{\"name\": \"mm1\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W1\"], \"outputs\": [\"h\"]},\n"
        "  {\"name\": \"mm2\", \"op\": \"MatMul\", \"inputs\": [\"h\", \"W2\"], \"outputs\": [\"q\"]},\n"
        "  {\"name\": \"stop\", \"op\": \"Detach\", \"domain\": \"ai.memest\", \"inputs\": [\"q\"], "
        "\"outputs\": [\"qd\"]},\n"
        "  {\"name\": \"add\", \"op\": \"Add\", \"inputs\": [\"h\", \"qd\"], \"outputs\": [\"y\"]}],\n"
        " \"outputs\": [\"y\"]}\n";
    est_error err;
    est_graph *g = NULL;
    if (est_load_json_buffer(json, sizeof json - 1, "unreached.json", &g, &err) != EST_OK) {
        CHECK(false, "unreached.json: %s", err.message);
        return;
    }
    est_report *r = estimate(g, EST_OPT_SGD, NULL, 1);
    if (r) {
        CHECK(layer(r, "mm2")->saved_bytes == 0, "unreached mm2 saves %llu", U(layer(r, "mm2")->saved_bytes));
        CHECK(layer(r, "mm2")->flops_backward == 0, "unreached mm2 counts %llu backward FLOPs",
              U(layer(r, "mm2")->flops_backward));
        CHECK(layer(r, "mm1")->flops_backward > 0, "mm1's backward runs (W1's gradient)");
        CHECK(est_report_totals(r)->grads_bytes == 16384, "gradients %llu, expected W1's 16384",
              U(est_report_totals(r)->grads_bytes));
        CHECK(est_report_totals(r)->activations_bytes == 1024, "activations %llu, expected y's 1024",
              U(est_report_totals(r)->activations_bytes));
    }
    est_report_free(r);
    est_graph_free(g);
}

/* 6. Patterns: substring, glob, and the error for a pattern that names
 * nothing. */
static void test_patterns(const est_graph *g) {
    CHECK(est_name_matches("lora_", "layers.0.q_proj.lora_A.default.weight"), "substring");
    CHECK(!est_name_matches("lora_", "layers.0.q_proj.weight"), "substring miss");
    CHECK(est_name_matches("layers.*.q_proj.*", "layers.3.q_proj.weight"), "glob");
    CHECK(!est_name_matches("q_proj.*", "layers.3.q_proj.weight"), "a glob matches the whole name");
    CHECK(!est_name_matches("", "x") && !est_name_matches(NULL, "x"), "empty pattern");
    CHECK(est_graph_param_count(g) == 4, "4 parameters, got %zu", est_graph_param_count(g));
    CHECK(strcmp(est_graph_param_name(g, 1), "base.lora_A.default.weight") == 0, "file order");
    CHECK(est_graph_param_name(g, 4) == NULL, "out of range");
    static const char *none[] = {"no_such_weight"};
    est_param_filter f = {.trainable = none, .n_trainable = 1};
    est_error err;
    CHECK(est_check_param_filter(g, &f, &err) == EST_EINVAL, "a pattern that names nothing");
    CHECK(strstr(err.message, "'no_such_weight'") && strstr(err.message, "base.weight") &&
              strstr(err.message, "head.weight"),
          "the error names the pattern and real names: %s", err.message);
    est_options opt;
    est_options_init(&opt);
    opt.batch = 4;
    opt.params = f;
    est_report *r = NULL;
    CHECK(est_estimate(g, &opt, &r, &err) == EST_EINVAL && !r, "est_estimate refuses it too");
    opt.params = (est_param_filter){0};
    opt.grad_accum = -1;
    CHECK(est_estimate(g, &opt, &r, &err) == EST_EINVAL && !r, "a negative grad_accum");
}

/* 7. The exports of tests/data/make_lora_llama.py: PyTorch counts 37
 * parameters of 25,760 elements, 1,024 of them in the 16 LoRA matrices.
 * The dynamo export reads the linear weights through generated names
 * (val_N), all eight lora_B through one merged initializer and all five
 * RMSNorm weights through one, and the lora_dropout of q, k and v through
 * one Dropout; the TorchScript training export keeps every name and call.
 * rotary_emb.inv_freq is a buffer, not a parameter. */
static void test_export_names(const char *data_dir, const char *file) {
    est_graph *g = load_model(data_dir, file);
    if (!g) return;
    est_error err;
    size_t n = est_graph_param_count(g);
    CHECK(n == 37, "%s: %zu parameters, PyTorch has 37", file, n);
    int lora = 0, distinct = 1;
    for (size_t i = 0; i < n; i++) {
        const char *name = est_graph_param_torch_name(g, i);
        lora += strstr(name, ".lora_A.default.weight") || strstr(name, ".lora_B.default.weight");
        CHECK(strncmp(name, "m.base_model.model.", 19) == 0, "%s: '%s' is no named_parameters() name", file, name);
        for (size_t j = 0; j < i; j++) distinct &= strcmp(name, est_graph_param_torch_name(g, j)) != 0;
    }
    CHECK(lora == 16 && distinct, "%s: %d LoRA matrices (16), names distinct: %d", file, lora, distinct);
    static const char *const one_b[] = {"m.base_model.model.model.layers.1.self_attn.v_proj.lora_B.default.weight"};
    est_param_filter f = {.trainable = one_b, .n_trainable = 1};
    CHECK(est_check_param_filter(g, &f, &err) == EST_OK, "%s: layer 1's v_proj lora_B is nameable", file);
    est_options opt;
    est_options_init(&opt);
    opt.batch = 2;
    est_binding seq = {"seq", 8};
    opt.dims = &seq;
    opt.n_dims = 1;
    opt.params = (est_param_filter){.trainable = adapters, .n_trainable = 1};
    est_report *r = NULL;
    if (est_estimate(g, &opt, &r, &err) != EST_OK) CHECK(false, "%s: %s", file, err.message);
    if (r) {
        const est_totals *t = est_report_totals(r);
        CHECK(t->param_count == 25760 && t->trainable_param_count == 1024, "%s: %llu parameters, %llu train", file,
              U(t->param_count), U(t->trainable_param_count));
        CHECK(t->grads_bytes == 16 * 512, "%s: 16 adapter gradients of 256 bytes each, 512 rounded: %llu", file,
              U(t->grads_bytes));
        /* one lora_dropout per adapted projection, 4 a layer: the dynamo
         * file holds 4 in all (q, k and v merged), fuse.c splits them back */
        size_t dropouts = 0;
        for (size_t i = 0; i < est_report_layer_count(r); i++)
            dropouts += strcmp(est_report_layer(r, i)->op, "Dropout") == 0;
        CHECK(dropouts == 8, "%s: %zu Dropout layers, PyTorch runs 8", file, dropouts);
    }
    est_report_free(r);
    est_graph_free(g);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODELS_DIR DATA_DIR\n", argv[0]);
        return 2;
    }
    test_export_names(argv[2], "lora_llama.dynamo.onnx");
    test_export_names(argv[2], "lora_llama.legacy.onnx");
    test_detach(argv[2]);
    test_unreached_backward();
    test_sizes();
    est_graph *g = load_model(argv[1], "lora_block.json");
    if (g) {
        test_adapter_only(g);
        test_adapter_amp(g);
        test_all_train(g);
        test_freeze(g);
        test_adafactor(g);
        test_grad_accum(g);
        test_patterns(g);
        test_bf16_loss_copy();
        test_float32_island();
    }
    est_graph_free(g);
    return test_result("test_finetune");
}
