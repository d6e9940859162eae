/*
 * test_rules_unfold: the BatchNorms the exporters fold into their Convs,
 * restored by the ONNX loader (onnx/unfold_batchnorm.c), through the public
 * API only (libestimate/estimate.h); rules_util.h's helpers, as test_rules.
 *
 * Without arguments (a JSON graph written here, docs/json-format.md):
 *    the folded-BatchNorm unfold is the ONNX loader's: a JSON graph with the
 *    TorchScript signal (producer "pytorch", weight "onnx::Conv_1") is left
 *    as written.
 *
 * With an argument, the directory of the truth exports (shared/truth/onnx;
 * exit 77 when it is absent): folded BatchNorms restored
 * (onnx/unfold_batchnorm.c): resnet18 legacy/dynamo/dynamo-train 20 each,
 * legacy-train and squeezenet1_0 0; the dynamo-train ones train (saved
 * statistics, 5 FLOPs per element) and match the real BatchNorms of
 * legacy-train layer for layer; totals: PyTorch's 11689512 parameters and
 * 9600 buffer elements; a JSON round trip keeps 20 BatchNorms and unfolds
 * nothing more.
 *
 * usage: test_rules_unfold [TRUTH_ONNX_DIR]
 */
#include <math.h>

#include "rules_util.h"

/* ---- 4. the unfold is the ONNX loader's ------------------------------------------ */

/* A JSON graph says every node explicitly: a Conv whose weight carries the
 * TorchScript fold's name stays a lone Conv. */
static void check_json_no_unfold(void) {
    static const char text[] =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"c\", \"producer\": \"pytorch\",\n"
        " \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [1, 3, 8, 8]}],\n"
        " \"initializers\": [{\"name\": \"onnx::Conv_1\", \"dtype\": \"float32\", \"dims\": [8, 3, 3, 3]},\n"
        "                    {\"name\": \"onnx::Conv_2\", \"dtype\": \"float32\", \"dims\": [8]}],\n"
        " \"nodes\": [{\"name\": \"conv\", \"op\": \"Conv\", \"inputs\": [\"x\", \"onnx::Conv_1\", \"onnx::Conv_2\"],\n"
        "   \"outputs\": [\"y\"], \"attributes\": {\"kernel_shape\": {\"ints\": [3, 3]}}}],\n"
        " \"outputs\": [\"y\"]}\n";
    est_graph *g = load_json(text, "json conv");
    if (!g) return;
    CHECK(est_graph_unfolded_batchnorms(g) == 0, "json: %zu BatchNorms unfolded, expected 0",
          est_graph_unfolded_batchnorms(g));
    CHECK(est_graph_node_count(g) == 1, "json: %zu nodes, expected 1", est_graph_node_count(g));
    est_graph_free(g);
}

/* ---- 5. folded BatchNorm, on the truth exports ------------------------------------ */

/* resnet18 has 20 BatchNorms: bn1 (64), 8 basic blocks of 2 (4 x 64, 4 x 128,
 * 4 x 256, 4 x 512) and 3 downsamples (128, 256, 512). Channels:
 * 64 + 4*64 + 4*128 + 128 + 4*256 + 256 + 4*512 + 512 = 4800; running mean
 * and variance are 2 x 4800 = 9600 buffer elements (PyTorch's n_buffers,
 * 9620, also counts the 20 num_batches_tracked scalars, which no export
 * carries). Parameters: PyTorch's n_params, 11689512. */
#define RESNET18_PARAMS 11689512ULL
#define RESNET18_BUFFERS 9600ULL

/* The BatchNorms of a resnet18 report at batch 8, checked as training (or
 * eval) BatchNorms: a training one saves its input and two float32 statistics
 * per channel and costs 5 FLOPs per element forward; an eval one saves its
 * input and costs 2 (docs/flops.md). */
static void check_resnet_bns(const est_report *r, const char *what, bool training) {
    size_t bns = 0;
    for (size_t i = 0; r && i < est_report_layer_count(r); i++) {
        const est_layer *L = est_report_layer(r, i);
        if (strcmp(L->op, "BatchNormalization") != 0) continue;
        bns++;
        if (L->n_inputs < 1 || L->inputs[0].rank != 4) {
            CHECK(false, "%s: %s: input 0 not 4-D", what, L->name);
            continue;
        }
        uint64_t C = (uint64_t)L->inputs[0].shape[1];
        uint64_t elements = L->inputs[0].elements;
        uint64_t x = R(L->inputs[0].bytes);
        uint64_t saved = training ? x + 2 * R(C * 4) : x;
        uint64_t flops = (training ? 5 : 2) * elements;
        CHECK(L->saved_bytes == saved, "%s: %s saves %llu, expected %llu", what, L->name, U(L->saved_bytes), U(saved));
        CHECK(L->flops_forward == flops, "%s: %s forward FLOPs %llu, expected %llu", what, L->name,
              U(L->flops_forward), U(flops));
        /* scale and shift: 2 x C parameters; running mean and var: 2 x C x 4 bytes */
        CHECK(L->param_count == 2 * C, "%s: %s has %llu params, expected %llu", what, L->name, U(L->param_count),
              U(2 * C));
        CHECK(L->buffer_bytes == 2 * C * 4, "%s: %s has %llu buffer bytes, expected %llu", what, L->name,
              U(L->buffer_bytes), U(2 * C * 4));
    }
    CHECK(bns == 20, "%s: %zu BatchNorm layers, expected 20", what, bns);
}

static void check_totals(const est_report *r, const char *what, bool params) {
    if (!r) return;
    const est_totals *t = est_report_totals(r);
    if (params) CHECK(t->param_count == RESNET18_PARAMS, "%s: %llu params, expected %llu", what, U(t->param_count),
          U(RESNET18_PARAMS));
    CHECK(t->buffer_count == RESNET18_BUFFERS, "%s: %llu buffer elements, expected %llu", what, U(t->buffer_count),
          U(RESNET18_BUFFERS));
}

static void check_onnx(const char *dir) {
    static const struct {
        const char *file;
        size_t unfolded;
    } counts[] = {
        {"resnet18.legacy.onnx", 20},       /* TorchScript eval: onnx::Conv_<n> weights */
        {"resnet18.dynamo.onnx", 20},       /* dynamo: FuseBatchNormIntoConv metadata */
        {"resnet18.dynamo-train.onnx", 20}, /* the same, from model.train() */
        {"resnet18.legacy-train.onnx", 0},  /* BatchNorms kept as nodes */
        {"squeezenet1_0.legacy.onnx", 0},   /* no BatchNorm */
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        est_graph *g = load_export(dir, counts[i].file);
        if (!g) continue;
        CHECK(est_graph_unfolded_batchnorms(g) == counts[i].unfolded, "%s: %zu BatchNorms unfolded, expected %zu",
              counts[i].file, est_graph_unfolded_batchnorms(g), counts[i].unfolded);
        est_graph_free(g);
    }

    /* Training step at batch 8 with each resnet18 export. */
    est_graph *dt = load_export(dir, "resnet18.dynamo-train.onnx");
    est_graph *de = load_export(dir, "resnet18.dynamo.onnx");
    est_graph *le = load_export(dir, "resnet18.legacy.onnx");
    est_graph *lt = load_export(dir, "resnet18.legacy-train.onnx");
    est_report *rdt = run(dt, EST_MODE_TRAIN, 8), *rde = run(de, EST_MODE_TRAIN, 8);
    est_report *rle = run(le, EST_MODE_TRAIN, 8), *rlt = run(lt, EST_MODE_TRAIN, 8);

    /* dynamo-train: the fx node says _native_batch_norm_legit_functional: training */
    check_resnet_bns(rdt, "resnet18.dynamo-train", true);
    /* eval exports: the restored BatchNorms use their running statistics */
    check_resnet_bns(rde, "resnet18.dynamo", false);
    check_resnet_bns(rle, "resnet18.legacy", false);
    /* the real BatchNorms of legacy-train, for comparison */
    check_resnet_bns(rlt, "resnet18.legacy-train", true);

    /* Every restored one matches legacy-train's real BatchNorm at the same
     * place (both graphs run in module order). */
    if (rdt && rlt) {
        size_t a = 0, b = 0, na = est_report_layer_count(rdt), nb = est_report_layer_count(rlt);
        for (;;) {
            while (a < na && strcmp(est_report_layer(rdt, a)->op, "BatchNormalization") != 0) a++;
            while (b < nb && strcmp(est_report_layer(rlt, b)->op, "BatchNormalization") != 0) b++;
            if (a >= na || b >= nb) break;
            const est_layer *A = est_report_layer(rdt, a), *B = est_report_layer(rlt, b);
            CHECK(A->saved_bytes == B->saved_bytes && A->flops_forward == B->flops_forward &&
                      A->flops_backward == B->flops_backward && A->param_count == B->param_count &&
                      A->buffer_bytes == B->buffer_bytes && A->outputs[0].elements == B->outputs[0].elements,
                  "%s vs %s: saved %llu/%llu flops %llu/%llu", A->name, B->name, U(A->saved_bytes),
                  U(B->saved_bytes), U(A->flops_forward), U(B->flops_forward));
            a++, b++;
        }
        CHECK(a >= na && b >= nb, "dynamo-train and legacy-train differ in BatchNorm count");
    }

    check_totals(rdt, "resnet18.dynamo-train", true);
    check_totals(rde, "resnet18.dynamo", true);
    check_totals(rlt, "resnet18.legacy-train", true);
    /* The TorchScript exporter shares equal folded biases through Identity
     * nodes (Identity_0..15 copying onnx::Conv_194, _209, _224, _239); once
     * the unfold drops the biases the loader drops those dead Identities, so
     * their 960 elements do not count as parameters. */
    check_totals(rle, "resnet18.legacy", true);

    /* A JSON round trip carries the restored BatchNorms as ordinary nodes: the
     * same node count, 20 BatchNorm layers, nothing unfolded a second time. */
    if (le) {
        char *json = NULL;
        est_error err;
        if (est_graph_to_json(le, &json, &err) != EST_OK) CHECK(false, "to_json: %s", err.message);
        else {
            est_graph *back = load_json(json, "resnet18.legacy.json");
            if (back) {
                CHECK(est_graph_unfolded_batchnorms(back) == 0, "round trip: %zu unfolded again",
                      est_graph_unfolded_batchnorms(back));
                CHECK(est_graph_node_count(back) == est_graph_node_count(le), "round trip: %zu nodes, was %zu",
                      est_graph_node_count(back), est_graph_node_count(le));
                est_report *rb = run(back, EST_MODE_TRAIN, 8);
                CHECK(count_op(rb, "BatchNormalization") == 20, "round trip: %zu BatchNorms",
                      count_op(rb, "BatchNormalization"));
                check_totals(rb, "resnet18.legacy round trip", false);
                est_report_free(rb);
                est_graph_free(back);
            }
            est_free(json);
        }
    }

    est_report_free(rdt);
    est_report_free(rde);
    est_report_free(rle);
    est_report_free(rlt);
    est_graph_free(dt);
    est_graph_free(de);
    est_graph_free(le);
    est_graph_free(lt);
}

int main(int argc, char **argv) {
    if (argc > 2) {
        fprintf(stderr, "usage: %s [TRUTH_ONNX_DIR]\n", argv[0]);
        return 2;
    }
    if (argc == 2) {
        if (!test_have_file(argv[1], "resnet18.legacy.onnx", "test_rules_unfold", "the ONNX checks")) return 77;
        check_onnx(argv[1]);
        return test_result("test_rules_unfold (onnx)");
    }
    check_json_no_unfold();
    return test_result("test_rules_unfold");
}
