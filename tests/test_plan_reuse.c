/*
 * test_plan_reuse: an estimate through a graph that earlier estimates have
 * planned (the step's lifetime plan kept with the graph, plan_reuse.c)
 * equals the estimate of a freshly loaded graph, byte for byte as JSON with
 * the timeline: for models with fusion patterns, recurrent layers, LoRA,
 * unreached backwards and plain CNNs, under autocast, checkpointing, a
 * frozen-parameter filter, verify's kernels, inference, FSDP, DDP (whose
 * first bucket's second estimate skips the allocator's replay) and tensor
 * parallelism, at batches that go back and forth through 1; one graph
 * through all of these options in turn (FSDP visits every node, where the
 * others take the kept plan's visits); and grouped-query attention whose
 * saves rule answers otherwise as its heads change (the kept plan's key
 * then matches up to the saves, and the estimate plans afresh).
 *
 * usage: test_plan_reuse MODELS_DIR DATA_DIR
 */
#include <stdbool.h>
#include <string.h>

#include "estimate.h"
#include "test_util.h"

/* Float32 attention with the query's heads a symbolic dim and two key
 * heads: grouped (the math kernel, which saves copies) at 4 heads, not
 * grouped (the fused kernel, which saves its inputs) at 2. */
static const char gqa_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"gqa\", \"opset_import\": {\"\": 23},\n"
    " \"inputs\": [{\"name\": \"q\", \"dtype\": \"float32\", \"dims\": [\"batch\", \"heads\", 8, 16]},\n"
    "  {\"name\": \"k\", \"dtype\": \"float32\", \"dims\": [\"batch\", 2, 8, 16]},\n"
    "  {\"name\": \"v\", \"dtype\": \"float32\", \"dims\": [\"batch\", 2, 8, 16]}],\n"
    " \"initializers\": [{\"name\": \"w\", \"dtype\": \"float32\", \"dims\": [16]}],\n"
    " \"nodes\": [\n"
    "  {\"name\": \"scale\", \"op\": \"Mul\", \"inputs\": [\"q\", \"w\"], \"outputs\": [\"qs\"]},\n"
    "  {\"name\": \"attn\", \"op\": \"Attention\", \"inputs\": [\"qs\", \"k\", \"v\"], \"outputs\": [\"y\"]}],\n"
    " \"outputs\": [\"y\"]}\n";

static const struct model {
    const char *dir;   /* "models" or "data"; NULL: gqa_json */
    const char *file;
    const char *dim;   /* a symbolic dim bound besides the batch, or NULL */
} models[] = {
    {NULL, "gqa", "heads"},
    {"models", "mlp.onnx", NULL},
    {"models", "lenet.onnx", NULL},
    {"models", "resnet18.onnx", NULL},
    {"models", "small_cnn.json", NULL},
    {"models", "transformer_block.json", "seq"},
    {"models", "lora_block.json", NULL},
    {"data", "lora_llama.legacy.onnx", "seq"},
    {"data", "lora_llama.dynamo.onnx", "seq"},
    {"data", "rotary_block.dynamo.onnx", NULL},
    {"data", "sdpa_bias.dynamo.onnx", NULL},
    {"data", "group_norm_shape.dynamo.onnx", NULL},
    {"data", "detach.dynamo.onnx", NULL},
    {"data", "lstm2bi.legacy.onnx", NULL},
    {"data", "lstm2bi.dynamo.onnx", NULL},
    {"data", "gru2.legacy.onnx", NULL},
    {"data", "gru2.dynamo.onnx", NULL},
    {"data", "rnn1.legacy.onnx", NULL},
};

/* Each variant's options, applied over est_options_init's. */
typedef enum { PLAIN, AMP, CHECKPOINT, FROZEN, VERIFY, INFER, AMP_CHECKPOINT_FROZEN, FSDP, DDP, TP, N_VARIANTS } variant;
static const char *const variant_names[N_VARIANTS] = {
    "plain", "amp bf16", "checkpoint every=1, sgd", "frozen *weight*", "kernels verify", "infer",
    "amp fp16, checkpoint every=1, trainable *lora*|*1*", "fsdp over 2", "ddp over 2", "tp 2"};

static const char *const frozen[] = {"*weight*"};
static const char *const trainable[] = {"*lora*"};

static void set_variant(est_options *o, variant v) {
    switch (v) {
    case PLAIN: break;
    case AMP: o->amp = EST_AMP_BF16; break;
    case CHECKPOINT:
        o->checkpoint.every = 1;
        o->optimizer = EST_OPT_SGD;
        break;
    case FROZEN:
        o->params.frozen = frozen;
        o->params.n_frozen = 1;
        break;
    case VERIFY: o->kernels = EST_KERNELS_VERIFY; break;
    case INFER: o->mode = EST_MODE_INFER; break;
    case AMP_CHECKPOINT_FROZEN:
        o->amp = EST_AMP_FP16;
        o->checkpoint.every = 1;
        o->params.trainable = trainable;
        o->params.n_trainable = 1;
        break;
    case FSDP:
        o->parallel.world_size = 2;
        o->parallel.strategy = EST_STRATEGY_FSDP;
        break;
    case DDP:
        o->parallel.world_size = 2;
        o->parallel.strategy = EST_STRATEGY_DDP;
        break;
    case TP:
        o->parallel.world_size = 2;
        o->parallel.tp = 2;
        break;
    case N_VARIANTS: break;
    }
}

/* The batches, through 1 and back and forth. */
static const int64_t batches[] = {8, 1, 8, 3, 64, 2, 1, 5};
#define N_BATCHES (sizeof batches / sizeof batches[0])

/* The value of dim at batch: gqa's heads go between grouped and not. */
static int64_t dim_value(const char *dim, int64_t batch) {
    if (strcmp(dim, "heads") == 0) return batch % 2 ? 2 : 4;
    return 16;
}

static est_status load(const char *path, est_graph **g, est_error *err) {
    if (strcmp(path, "gqa") == 0) return est_load_json_buffer(gqa_json, sizeof gqa_json - 1, path, g, err);
    return est_load_file(path, g, err);
}

/* The estimate of g as JSON with its timeline, or its error; NULL when out
 * of memory. */
static char *estimate_json(const est_graph *g, const char *path, const char *dim, variant v, int64_t batch) {
    est_options o;
    est_options_init(&o);
    set_variant(&o, v);
    o.batch = batch;
    o.timeline = 1;
    est_binding bound = {dim, dim ? dim_value(dim, batch) : 0};
    if (dim) {
        o.dims = &bound;
        o.n_dims = 1;
    }
    est_report *r = NULL;
    est_error err;
    char *out = NULL;
    if (est_estimate(g, &o, &r, &err) != EST_OK) {
        size_t n = strlen(err.message) + 16;
        out = malloc(n);
        if (out) snprintf(out, n, "error: %s", err.message);
        return out;
    }
    est_json_options jo;
    est_json_options_init(&jo);
    jo.model = path;
    jo.options = &o;
    jo.timeline = 1;
    if (est_report_to_json(r, &jo, &out, &err) != EST_OK) out = NULL;
    est_report_free(r);
    return out;
}

/* The first line where a and b differ, for the message. */
static int first_differing_line(const char *a, const char *b) {
    int line = 1;
    for (; *a && *a == *b; a++, b++) line += *a == '\n';
    return line;
}

/* The estimate of warm (estimated before) against a fresh load's; returns
 * whether it succeeded. */
static bool check_estimate(const est_graph *warm, const char *path, const char *dim, variant v, int64_t batch,
                           int before) {
    est_graph *cold = NULL;
    est_error err;
    if (load(path, &cold, &err) != EST_OK) {
        CHECK(false, "%s: reload: %s", path, err.message);
        return false;
    }
    char *again = estimate_json(warm, path, dim, v, batch);
    char *fresh = estimate_json(cold, path, dim, v, batch);
    bool ok = again && fresh && strncmp(fresh, "error: ", 7) != 0;
    CHECK(again && fresh, "%s, %s, batch %lld: out of memory", path, variant_names[v], (long long)batch);
    if (again && fresh)
        CHECK(strcmp(again, fresh) == 0, "%s, %s, batch %lld (after %d estimates): line %d differs from a fresh "
              "load's", path, variant_names[v], (long long)batch, before, first_differing_line(again, fresh));
    free(again);
    free(fresh);
    est_graph_free(cold);
    return ok;
}

/* Model m under variant v: each batch through one graph against a fresh
 * load; returns the estimates that succeeded. */
static int check_model(const char *path, const char *dim, variant v) {
    est_graph *warm = NULL;
    est_error err;
    if (load(path, &warm, &err) != EST_OK) {
        CHECK(false, "%s: %s", path, err.message);
        return 0;
    }
    int succeeded = 0;
    for (size_t b = 0; b < N_BATCHES; b++) succeeded += check_estimate(warm, path, dim, v, batches[b], (int)b);
    est_graph_free(warm);
    return succeeded;
}

/* One graph through every variant in turn, at each batch: no estimate's
 * options are the last one's. */
static void check_variants_in_turn(const char *path, const char *dim) {
    est_graph *warm = NULL;
    est_error err;
    if (load(path, &warm, &err) != EST_OK) {
        CHECK(false, "%s: %s", path, err.message);
        return;
    }
    int before = 0;
    for (size_t b = 0; b < N_BATCHES; b++)
        for (int v = 0; v < N_VARIANTS; v++) check_estimate(warm, path, dim, (variant)v, batches[b], before++);
    est_graph_free(warm);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_plan_reuse MODELS_DIR DATA_DIR\n");
        return 2;
    }
    int per_variant[N_VARIANTS] = {0};
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        const struct model *M = &models[m];
        char path[4096];
        if (!M->dir) snprintf(path, sizeof path, "%s", M->file);
        else snprintf(path, sizeof path, "%s/%s", strcmp(M->dir, "models") == 0 ? argv[1] : argv[2], M->file);
        for (int v = 0; v < N_VARIANTS; v++) per_variant[v] += check_model(path, M->dim, (variant)v);
        if (m < 4) check_variants_in_turn(path, M->dim); /* gqa, the MLP, LeNet, resnet18 */
    }
    /* each variant estimated something, not only errors compared */
    for (int v = 0; v < N_VARIANTS; v++)
        CHECK(per_variant[v] > 0, "%s: no model estimated", variant_names[v]);
    if (test_failures) printf("%d failures\n", test_failures);
    else printf("plan reuse: every estimate equals a fresh load's\n");
    return test_failures ? 1 : 0;
}
