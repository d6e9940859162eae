/*
 * test_alloc: every allocation failure along load, infer and estimate of real
 * models returns an error and leaks nothing.
 *
 * For each model (ONNX files through est_load_file, which also parses with
 * protobuf-c; JSON through cJSON), allocation k of the load fails, for k = 0,
 * 1, ... until a load makes fewer than k allocations; then the same for
 * est_estimate() in training and in inference on the loaded graph (and in
 * training with checkpointing every block, for resnet18, and with an input
 * shape that names a new symbol, for lenet). Each
 * failed call must return EST_ENOMEM (or a parse error that says "out of
 * memory", when the parser's own allocation failed) with nothing in *out; a
 * call may also succeed where the library shrugs a failure off (an optional
 * cache), but then with the same graph or the same totals as without
 * failures. Leaks show under ASan (detect_leaks=1) or valgrind.
 *
 * The models: models/, and tests/data's transformer exports of both
 * exporters. With PATHs it sweeps every file under them instead (the fuzz
 * corpora, the conformance cases): hours, so outside the suite
 * (docs/robustness.md, "Allocation failures").
 *
 * usage: test_alloc MODELS_DIR DATA_DIR [PATH...]
 */
#include <dirent.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include "cJSON.h"
#include "estimate.h"
#include "test_util.h"
#include "alloc_fail.h"

#ifdef TEST_WRAP_ALLOC
static bool failure_ok(est_status st, const est_error *err, bool produced) {
    if (st == EST_OK) return produced;
    if (produced) return false;
    return st == EST_ENOMEM || (st == EST_EPARSE && strstr(err->message, "out of memory"));
}

/* What a load that shrugged an allocation failure off must still equal. */
typedef struct graph_facts {
    size_t nodes, params, inputs, unfolded, fused;
} graph_facts;

static graph_facts facts_of(const est_graph *g) {
    return (graph_facts){est_graph_node_count(g), est_graph_param_count(g), est_graph_input_count(g),
                         est_graph_unfolded_batchnorms(g), est_graph_fused_sequences(g)};
}

static bool same_facts(graph_facts a, graph_facts b) {
    return a.nodes == b.nodes && a.params == b.params && a.inputs == b.inputs && a.unfolded == b.unfolded &&
           a.fused == b.fused;
}

/* What an estimate that shrugged an allocation failure off must still equal. */
static bool same_totals(const est_report *r, const est_totals *want) {
    const est_totals *t = est_report_totals(r);
    return t->peak_bytes == want->peak_bytes && t->reserved_bytes == want->reserved_bytes &&
           t->param_bytes == want->param_bytes && t->activations_bytes == want->activations_bytes &&
           t->temp_bytes == want->temp_bytes && t->flops_forward == want->flops_forward &&
           t->flops_backward == want->flops_backward && t->out_of_memory == want->out_of_memory;
}

/* Each failed allocation of loading path must end in ENOMEM, or in `clean`,
 * the outcome without failures (with the graph facts `want` when that is a
 * success). Returns how many allocations the load made. */
static long fail_each_load_allocation(const char *path, est_status clean, graph_facts want) {
    int wrong = 0;
    long k = 0;
    for (;; k++) {
        est_error err = {0};
        est_graph *g = NULL;
        alloc_fail_at(k);
        est_status st = est_load_file(path, &g, &err);
        if (!alloc_fail_done()) {
            CHECK(st == clean, "%s: load without failures: %s", path, st ? err.message : "succeeded");
            est_graph_free(g);
            break;
        }
        bool ok = (failure_ok(st, &err, g != NULL) && (st != EST_OK || same_facts(facts_of(g), want))) ||
                  (clean != EST_OK && st == clean);
        if (!ok && !wrong++)
            printf("%s: load allocation %ld: %s: %s\n", path, k, est_status_name(st),
                   st ? err.message : "a different graph");
        est_graph_free(g);
    }
    CHECK(wrong == 0, "%s: %d of %ld failed load allocations were mishandled", path, wrong, k);
    return k;
}

/* The options every estimate here runs with: mode at batch, with one dim
 * bound (dim may be NULL); AdamW in training. */
static est_options options_for(est_mode mode, int64_t batch, const est_binding *dim) {
    est_options opt;
    est_options_init(&opt);
    opt.mode = mode;
    opt.batch = batch;
    opt.dims = dim;
    opt.n_dims = dim ? 1 : 0;
    opt.optimizer = mode == EST_MODE_TRAIN ? EST_OPT_ADAMW : EST_OPT_ADAM;
    return opt;
}

static long fail_each_estimate_allocation(const char *path, const est_graph *g, est_mode mode, int64_t batch,
                                          const est_binding *dim, int64_t checkpoint_every,
                                          const est_input_shape *shape) {
    est_options opt = options_for(mode, batch, dim);
    opt.input_shapes = shape;
    opt.n_input_shapes = shape ? 1 : 0;
    opt.checkpoint.every = checkpoint_every;
    est_totals want;
    est_report *ref = NULL;
    est_error ref_err;
    if (est_estimate(g, &opt, &ref, &ref_err) != EST_OK) {
        CHECK(false, "%s: %s estimate: %s", path, est_mode_name(mode), ref_err.message);
        return 0;
    }
    want = *est_report_totals(ref);
    est_report_free(ref);
    int wrong = 0;
    long k = 0;
    for (;; k++) {
        est_error err = {0};
        est_report *r = NULL;
        alloc_fail_at(k);
        est_status st = est_estimate(g, &opt, &r, &err);
        if (!alloc_fail_done()) {
            CHECK(st == EST_OK, "%s: estimate without failures: %s", path, err.message);
            est_report_free(r);
            break;
        }
        bool ok = failure_ok(st, &err, r != NULL) && (st != EST_OK || same_totals(r, &want));
        if (!ok && !wrong++)
            printf("%s: %s estimate allocation %ld: %s: %s\n", path, est_mode_name(mode), k, est_status_name(st),
                   st ? err.message : "a different result");
        est_report_free(r);
    }
    CHECK(wrong == 0, "%s: %d of %ld failed %s-estimate allocations were mishandled", path, wrong, k,
          est_mode_name(mode));
    return k;
}

/* The first estimate of a graph also makes its plan (plan.c: the folds
 * every estimate shares): each of its allocations fails on a fresh load. */
static long fail_each_first_estimate_allocation(const char *path, const est_options *opt, const est_totals *want) {
    int wrong = 0;
    long k = 0;
    for (;; k++) {
        est_error err = {0};
        est_graph *g = NULL;
        if (est_load_file(path, &g, &err) != EST_OK) {
            CHECK(false, "%s: %s", path, err.message);
            return k;
        }
        est_report *r = NULL;
        alloc_fail_at(k);
        est_status st = est_estimate(g, opt, &r, &err);
        bool done = !alloc_fail_done();
        bool ok = done ? st == EST_OK : failure_ok(st, &err, r != NULL) && (st != EST_OK || same_totals(r, want));
        if (!ok && !wrong++)
            printf("%s: first estimate allocation %ld: %s: %s\n", path, k, est_status_name(st),
                   st ? err.message : "a different result");
        est_report_free(r);
        est_graph_free(g);
        if (done) break;
    }
    CHECK(wrong == 0, "%s: %d of %ld failed first-estimate allocations were mishandled", path, wrong, k);
    return k;
}

static void check_model(const char *models_dir, const char *file, int64_t batch, const est_binding *dim) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", models_dir, file);
    est_error err;
    est_graph *g = NULL;
    if (est_load_file(path, &g, &err) != EST_OK) {
        CHECK(0, "%s: %s", path, err.message);
        return;
    }
    long loads = fail_each_load_allocation(path, EST_OK, facts_of(g));
    est_options opt = options_for(EST_MODE_TRAIN, batch, dim);
    est_report *ref = NULL;
    if (est_estimate(g, &opt, &ref, &err) == EST_OK)
        fail_each_first_estimate_allocation(path, &opt, est_report_totals(ref));
    est_report_free(ref);
    long train = fail_each_estimate_allocation(path, g, EST_MODE_TRAIN, batch, dim, 0, NULL);
    long infer = fail_each_estimate_allocation(path, g, EST_MODE_INFER, batch, dim, 0, NULL);
    /* checkpointing plans segments and allocates their state */
    if (strcmp(file, "resnet18.onnx") == 0)
        fail_each_estimate_allocation(path, g, EST_MODE_TRAIN, batch, dim, 1, NULL);
    /* an input shape's new symbol is copied into the report */
    const est_dim n_image[] = {{.symbol = "n"}, {.value = 1}, {.value = 28}, {.value = 28}};
    const est_input_shape shape = {"input", 4, n_image};
    if (strcmp(file, "lenet.onnx") == 0) fail_each_estimate_allocation(path, g, EST_MODE_INFER, batch, dim, 0, &shape);
    CHECK(loads > 10 && train > 10 && infer > 10, "%s: too few allocations seen (%ld, %ld, %ld): is --wrap in effect?",
          file, loads, train, infer);
    printf("%s: failed each of %ld load, %ld training and %ld inference allocations\n", file, loads, train, infer);
    est_graph_free(g);
}
/* Any file, valid model or not (the nightly sweep over fuzz corpora and
 * conformance cases): each failed allocation of its load, and of a training
 * estimate at batch 2 when it loads, ends in ENOMEM or in the outcome of the
 * run without failures. */
static void check_any_file(const char *path) {
    est_error err;
    est_graph *g = NULL;
    est_status clean = est_load_file(path, &g, &err);
    fail_each_load_allocation(path, clean, g ? facts_of(g) : (graph_facts){0});
    if (clean != EST_OK) return;
    est_options opt = options_for(EST_MODE_TRAIN, 2, NULL);
    est_report *ref = NULL;
    if (est_estimate(g, &opt, &ref, &err) == EST_OK) {
        est_report_free(ref);
        fail_each_estimate_allocation(path, g, EST_MODE_TRAIN, 2, NULL, 0, NULL);
    }
    est_graph_free(g);
}

/* Every regular file under path (a file or a folder), in any order. */
static void check_tree(const char *path, long *files) {
    DIR *d = opendir(path);
    if (!d) {
        check_any_file(path);
        ++*files;
        return;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        struct stat sb;
        if (stat(sub, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) check_tree(sub, files);
        else if (S_ISREG(sb.st_mode) && sb.st_size <= (1 << 20) && !strstr(e->d_name, ".pb")) {
            check_any_file(sub);
            ++*files;
        }
    }
    closedir(d);
}
#endif

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODELS_DIR DATA_DIR [PATH...]\n"
                        "  PATH: files or folders for the long sweep (fuzz corpora, conformance cases)\n",
                argv[0]);
        return 2;
    }
#ifdef TEST_WRAP_ALLOC
    cJSON_Hooks hooks = {.malloc_fn = hook_malloc, .free_fn = free};
    cJSON_InitHooks(&hooks);
    if (argc > 3) {
        long files = 0;
        for (int i = 3; i < argc; i++) check_tree(argv[i], &files);
        printf("failed each allocation of %ld files\n", files);
        cJSON_InitHooks(NULL);
        return test_result("test_alloc");
    }
    const est_binding seq = {"seq", 16};
    check_model(argv[1], "lenet.onnx", 4, NULL);
    check_model(argv[1], "mlp.onnx", 4, NULL);
    check_model(argv[1], "resnet18.onnx", 2, NULL);
    check_model(argv[1], "small_cnn.json", 4, NULL);
    check_model(argv[1], "transformer_block.json", 2, &seq);
    /* a transformer of each exporter, with fused attention and grouped
     * query heads (LoRA Llama), rotary embeddings, a dynamo Detach */
    const est_binding seq8 = {"seq", 8};
    check_model(argv[2], "lora_llama.legacy.onnx", 2, &seq8);
    check_model(argv[2], "lora_llama.dynamo.onnx", 2, &seq8);
    check_model(argv[2], "rotary_block.dynamo.onnx", 2, NULL);
    check_model(argv[2], "detach.dynamo.onnx", 2, NULL);
    cJSON_InitHooks(NULL);
#else
    (void)argv;
    printf("note: allocation failures are not tested (the linker has no --wrap)\n");
#endif
    return test_result("test_alloc");
}
