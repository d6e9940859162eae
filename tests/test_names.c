/*
 * test_names: the names reports give layers (docs/exports.md, "Layer
 * names"): named_modules() names from the exporters' scopes, the recogniser
 * of the dynamo exporter's made-up node names, each layer's module and
 * label, and the peak's. With TRUTH_ONNX_DIR, the shared exports: both
 * exporters' resnet18 name the same modules, and --checkpoint finds BERT's
 * blocks without the wrapper's "m.".
 *
 * usage: test_names [TRUTH_ONNX_DIR]   (exit 77 when the directory is absent)
 */
#include <stdbool.h>
#include <string.h>

#include "module_names.h"
#include "test_util.h"

static bool same(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }
static const char *show(const char *s) { return s ? s : "(null)"; }

static est_graph *load_file(const char *dir, const char *file) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    est_error err;
    est_graph *g = NULL;
    CHECK(est_load_file(path, &g, &err) == EST_OK, "%s: load failed: %s", file, err.message);
    return g;
}

static est_report *estimate(const est_graph *g, int64_t batch, const est_checkpoint *ck) {
    if (!g) return NULL;
    est_options opt;
    est_options_init(&opt);
    opt.batch = batch;
    if (ck) opt.checkpoint = *ck;
    est_error err;
    est_report *r = NULL;
    CHECK(est_estimate(g, &opt, &r, &err) == EST_OK, "%s: estimate failed: %s", est_graph_name(g), err.message);
    return r;
}

static const est_layer *layer_named(const est_report *r, const char *name) {
    for (size_t i = 0; r && i < est_report_layer_count(r); i++)
        if (strcmp(est_report_layer(r, i)->name, name) == 0) return est_report_layer(r, i);
    CHECK(false, "no layer '%s'", name);
    return NULL;
}

static void expect_layer(const est_report *r, const char *name, const char *module, const char *label) {
    const est_layer *L = layer_named(r, name);
    if (!L) return;
    CHECK(same(L->module, module), "%s: module '%s', expected '%s'", name, show(L->module), show(module));
    CHECK(same(L->label, label), "%s: label '%s', expected '%s'", name, show(L->label), show(label));
}

/* The peak's module and label are those of the layer it names. */
static void expect_peak_names_its_layer(const est_report *r, const char *what) {
    const est_peak *p = est_report_peak(r);
    const est_layer *L = p->layer[0] ? layer_named(r, p->layer) : NULL;
    CHECK(L != NULL, "%s: the peak is at no layer (%s)", what, est_phase_name(p->phase));
    if (!L) return;
    CHECK(same(p->module, L->module) && same(p->label, L->label),
          "%s: peak at %s: module '%s', label '%s'; the layer's are '%s', '%s'", what, p->layer, show(p->module),
          show(p->label), show(L->module), show(L->label));
}

static void check_dynamo_node_names(void) {
    static const char *const made_up[] = {"node_linear_12", "node_Conv_3", "node_native_dropout_4__1",
                                          "node_mean", "n4", "n4_2", "n12_3_1"};
    static const char *const kept[] = {"/layer1/layer1.0/conv1/Conv", "Conv_12", "Identity_283", "node_", "node",
                                       "n", "n_4", "n4_", "nx4", "node_a/b", "node_a.b", "fc_a0", "linear_12"};
    for (size_t i = 0; i < sizeof made_up / sizeof *made_up; i++)
        CHECK(est__is_dynamo_node_name(made_up[i], strlen(made_up[i])), "'%s' is made up by dynamo", made_up[i]);
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        CHECK(!est__is_dynamo_node_name(kept[i], strlen(kept[i])), "'%s' is not a dynamo name", kept[i]);
    const char *bn = "node_Conv_3" EST_UNFOLDED_BN_SUFFIX;
    CHECK(est__is_dynamo_node_name(bn, strlen("node_Conv_3")) && !est__is_dynamo_node_name(bn, strlen(bn)),
          "only the length given is read");
}

static void check_module_names(void) {
    static const struct {
        const char *scope, *module;
    } cases[] = {
        {"", ""},
        {"layer1/layer1.0/conv1", "layer1.0.conv1"},            /* TorchScript: local names */
        {"layer1/layer1.0/layer1.0.conv1", "layer1.0.conv1"},   /* dynamo: full names */
        {"m/encoder/layer.0/attention", "m.encoder.layer.0.attention"}, /* a ModuleList child */
        {"m/m.layers/m.layers.3/m.layers.3.self_attn", "m.layers.3.self_attn"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *module = est__module_name(cases[i].scope);
        CHECK(same(module, cases[i].module), "scope '%s': module '%s', expected '%s'", cases[i].scope, show(module),
              cases[i].module);
        free(module);
    }
}

/* x -> q_proj (MatMul, a made-up name) -> fc (Relu) -> Add in the model's
 * own forward -> Relu of unknown module. */
static const char names_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 64]}],\n"
    " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [64, 64]}],\n"
    " \"nodes\": [\n"
    "  {\"name\": \"node_linear_12\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"a\"],\n"
    "   \"scope\": \"layers/layers.3/layers.3.self_attn/layers.3.self_attn.q_proj\"},\n"
    "  {\"name\": \"fc\", \"op\": \"Relu\", \"inputs\": [\"a\"], \"outputs\": [\"b\"], \"scope\": \"layers/layers.3\"},\n"
    "  {\"name\": \"node_add_1\", \"op\": \"Add\", \"inputs\": [\"b\", \"a\"], \"outputs\": [\"c\"], \"scope\": \"\"},\n"
    "  {\"name\": \"node_relu_2\", \"op\": \"Relu\", \"inputs\": [\"c\"], \"outputs\": [\"y\"]}],\n"
    " \"outputs\": [\"y\"]}\n";

static void check_labels(void) {
    est_graph *g = NULL;
    est_error err;
    CHECK(est_load_json_buffer(names_json, strlen(names_json), "names.json", &g, &err) == EST_OK, "load: %s",
          err.message);
    est_report *r = estimate(g, 1024, NULL);
    if (r) {
        expect_layer(r, "node_linear_12", "layers.3.self_attn.q_proj", "layers.3.self_attn.q_proj");
        expect_layer(r, "fc", "layers.3", "fc");                   /* a name of its own stays */
        expect_layer(r, "node_add_1", "", "node_add_1");           /* the model's forward names nothing */
        expect_layer(r, "node_relu_2", NULL, "node_relu_2");      /* no scope */
        expect_peak_names_its_layer(r, "names.json");
    }
    est_report_free(r);
    est_graph_free(g);
}

/* A dynamo export (tests/data/make_rotary_block.py): the Linear q is MatMul
 * and Add, both in module "q"; nodes of the block's own forward keep their
 * names. */
static void check_rotary_block(void) {
    est_graph *g = load_file(TEST_DATA_DIR, "rotary_block.dynamo.onnx");
    est_report *r = estimate(g, 64, NULL);
    if (r) {
        expect_layer(r, "node_MatMul_7", "q", "q");
        expect_layer(r, "node_linear", "q", "q");
        expect_layer(r, "node_linear_1", "out", "out");
        expect_layer(r, "node_pow_1", "", "node_pow_1");
        expect_peak_names_its_layer(r, "rotary block");
        const est_peak *p = est_report_peak(r);
        CHECK(p->module && p->module[0] && same(p->label, p->module),
              "rotary block: the peak (at %s) shows its module, got label '%s'", p->layer, show(p->label));
    }
    est_report_free(r);
    est_graph_free(g);
}

/* Two GroupNorms as the dynamo exporter decomposes them, under FX calls
 * that name each one's weight and bias (tests/data/make_group_norm_shape.py):
 * the shared int64 shape and the InstanceNormalization's shared ones and
 * zeros keep their names and values, while the weights and the biases the
 * optimizer merged are split back by their FX calls, the Add's bias taking
 * the call's placeholder that its Mul has not (PyTorch's names,
 * est_param_info.torch_name). */
static void check_group_norm_shape(void) {
    static const char *const want[] = {"norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"};
    est_graph *g = load_file(TEST_DATA_DIR, "group_norm_shape.dynamo.onnx");
    est_report *r = estimate(g, 4, NULL);
    if (r) {
        size_t found = 0;
        for (size_t i = 0; i < est_report_param_count(r); i++) {
            const est_param_info *p = est_report_param(r, i);
            if (p->elements != 32) continue;
            CHECK(found < 4 && same(p->torch_name, want[found]), "parameter of 32 elements %zu is %s, expected %s",
                  found, show(p->torch_name), found < 4 ? want[found] : "none");
            found++;
        }
        CHECK(found == 4, "%zu parameters of 32 elements, expected each GroupNorm's weight and bias", found);
        const est_layer *reshape = layer_named(r, "node_Reshape_29");
        CHECK(reshape && reshape->n_inputs == 2 && same(reshape->inputs[1].name, "val_5"),
              "the second Reshape reads its shape as %s", reshape && reshape->n_inputs == 2 ? reshape->inputs[1].name : "?");
        const est_layer *in = layer_named(r, "node_InstanceNormalization_30");
        CHECK(in && in->n_inputs == 3 && same(in->inputs[1].name, "val_9") && same(in->inputs[2].name, "val_12"),
              "the second InstanceNormalization reads %s and %s", in && in->n_inputs == 3 ? in->inputs[1].name : "?",
              in && in->n_inputs == 3 ? in->inputs[2].name : "?");
    }
    est_report_free(r);
    est_graph_free(g);
}

/* The Conv and BatchNorm layers of r, in order, into out (at most cap). */
static size_t conv_and_bn_layers(const est_report *r, const est_layer **out, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < est_report_layer_count(r) && n < cap; i++) {
        const est_layer *L = est_report_layer(r, i);
        if (!strcmp(L->op, "Conv") || !strcmp(L->op, "BatchNormalization")) out[n++] = L;
    }
    return n;
}

/* The two exporters write resnet18's modules differently (TorchScript names
 * its nodes "/layer1/layer1.0/conv1/Conv"; dynamo records full names, and
 * folds each BatchNorm into its Conv, which the loader restores): both must
 * give every Conv and BatchNorm the same module, each Conv the module of its
 * weight, and the peak the same module. */
static void check_resnet18(const char *dir) {
    est_graph *gl = load_file(dir, "resnet18.legacy-train.onnx"), *gd = load_file(dir, "resnet18.dynamo-train.onnx");
    est_report *rl = estimate(gl, 32, NULL), *rd = estimate(gd, 32, NULL);
    if (rl && rd) {
        const est_layer *ls[64], *ds[64];
        size_t nl = conv_and_bn_layers(rl, ls, 64), nd = conv_and_bn_layers(rd, ds, 64);
        CHECK(nl == 40 && nd == 40, "resnet18: %zu (TorchScript) and %zu (dynamo) Convs and BatchNorms, expected 40",
              nl, nd);
        for (size_t i = 0; i < nl && i < nd; i++) {
            const est_layer *L = ls[i], *D = ds[i];
            CHECK(!strcmp(L->op, D->op) && L->module && same(L->module, D->module),
                  "resnet18: %s '%s' (TorchScript) against %s '%s' (dynamo)", L->op, show(L->module), D->op,
                  show(D->module));
            CHECK(same(L->label, L->name) && same(D->label, D->module),
                  "resnet18: labels '%s' (TorchScript, the name) and '%s' (dynamo, the module)", L->label, D->label);
            if (strcmp(D->op, "Conv") != 0 || !D->module || D->n_inputs < 2) continue;
            char weight[256];
            snprintf(weight, sizeof weight, "%s.weight", D->module);
            CHECK(!strcmp(D->inputs[1].name, weight), "resnet18 dynamo: the Conv of module '%s' reads '%s'",
                  D->module, D->inputs[1].name);
        }
        const est_peak *pl = est_report_peak(rl), *pd = est_report_peak(rd);
        expect_peak_names_its_layer(rd, "resnet18 dynamo");
        CHECK(pl->module && same(pl->module, pd->module) && same(pd->label, pd->module),
              "resnet18: peak module '%s' (TorchScript), '%s' (dynamo), dynamo label '%s'", show(pl->module),
              show(pd->module), show(pd->label));
    }
    est_report_free(rl);
    est_report_free(rd);
    est_graph_free(gl);
    est_graph_free(gd);
}

/* BERT's exports wrap the model (attribute m): the user's "encoder.layer.3"
 * is "m.encoder.layer.3" in both. */
static void check_bert_checkpoint(const char *dir) {
    static const char *const files[] = {"bert_base.dynamo-train.onnx", "bert_base.legacy-train.onnx"};
    static const char *const user[] = {"encoder.layer.3"}, *const full[] = {"m.encoder.layer.3"};
    for (size_t f = 0; f < 2; f++) {
        est_graph *g = load_file(dir, files[f]);
        est_report *a = estimate(g, 2, &(est_checkpoint){.prefixes = user, .n_prefixes = 1});
        est_report *b = estimate(g, 2, &(est_checkpoint){.prefixes = full, .n_prefixes = 1});
        if (a && b) {
            CHECK(est_report_totals(a)->checkpoint_segments == 1, "%s: %llu segments for encoder.layer.3", files[f],
                  (unsigned long long)est_report_totals(a)->checkpoint_segments);
            size_t in_segment = 0;
            for (size_t i = 0; i < est_report_layer_count(a); i++) {
                const est_layer *L = est_report_layer(a, i);
                CHECK(L->segment == est_report_layer(b, i)->segment, "%s: %s: segment %lld without m., %lld with",
                      files[f], L->name, (long long)L->segment, (long long)est_report_layer(b, i)->segment);
                if (L->segment < 0 || !L->module) continue;
                in_segment++;
                CHECK(strncmp(L->module, "m.encoder.layer.3", 17) == 0, "%s: %s of module '%s' in the segment",
                      files[f], L->name, L->module);
            }
            CHECK(in_segment > 10, "%s: %zu layers in encoder.layer.3's segment", files[f], in_segment);
        }
        est_report_free(a);
        est_report_free(b);
        est_graph_free(g);
    }
}

int main(int argc, char **argv) {
    if (argc > 2) {
        fprintf(stderr, "usage: %s [TRUTH_ONNX_DIR]\n", argv[0]);
        return 2;
    }
    if (argc == 2) {
        if (!test_have_file(argv[1], "resnet18.dynamo-train.onnx", "test_names", "the shared exports")) return 77;
        check_resnet18(argv[1]);
        check_bert_checkpoint(argv[1]);
        return test_result("test_names (shared exports)");
    }
    check_dynamo_node_names();
    check_module_names();
    check_labels();
    check_rotary_block();
    check_group_norm_shape();
    return test_result("test_names");
}
