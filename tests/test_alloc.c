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
 * cleanup). Leaks show under ASan (detect_leaks=1) or valgrind.
 *
 * usage: test_alloc MODELS_DIR
 */
#include <stdbool.h>
#include <string.h>

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

/* Returns how many allocations the load made. */
static long fail_each_load_allocation(const char *path) {
    int wrong = 0;
    long k = 0;
    for (;; k++) {
        est_error err = {0};
        est_graph *g = NULL;
        alloc_fail_at(k);
        est_status st = est_load_file(path, &g, &err);
        if (!alloc_fail_done()) {
            CHECK(st == EST_OK, "%s: load without failures: %s", path, err.message);
            est_graph_free(g);
            break;
        }
        if (!failure_ok(st, &err, g != NULL) && !wrong++)
            printf("%s: load allocation %ld: %s: %s\n", path, k, est_status_name(st), err.message);
        est_graph_free(g);
    }
    CHECK(wrong == 0, "%s: %d of %ld failed load allocations were mishandled", path, wrong, k);
    return k;
}

static long fail_each_estimate_allocation(const char *path, const est_graph *g, est_mode mode, int64_t batch,
                                          const est_binding *dim, int64_t checkpoint_every,
                                          const est_input_shape *shape) {
    est_options opt;
    est_options_init(&opt);
    opt.input_shapes = shape;
    opt.n_input_shapes = shape ? 1 : 0;
    opt.checkpoint.every = checkpoint_every;
    opt.mode = mode;
    opt.batch = batch;
    opt.dims = dim;
    opt.n_dims = dim ? 1 : 0;
    opt.optimizer = mode == EST_MODE_TRAIN ? EST_OPT_ADAMW : EST_OPT_ADAM;
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
        if (!failure_ok(st, &err, r != NULL) && !wrong++)
            printf("%s: %s estimate allocation %ld: %s: %s\n", path, est_mode_name(mode), k, est_status_name(st),
                   err.message);
        est_report_free(r);
    }
    CHECK(wrong == 0, "%s: %d of %ld failed %s-estimate allocations were mishandled", path, wrong, k,
          est_mode_name(mode));
    return k;
}

static void check_model(const char *models_dir, const char *file, int64_t batch, const est_binding *dim) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", models_dir, file);
    long loads = fail_each_load_allocation(path);
    est_error err;
    est_graph *g = NULL;
    if (est_load_file(path, &g, &err) != EST_OK) {
        CHECK(0, "%s: %s", path, err.message);
        return;
    }
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
#endif

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODELS_DIR\n", argv[0]);
        return 2;
    }
#ifdef TEST_WRAP_ALLOC
    cJSON_Hooks hooks = {.malloc_fn = hook_malloc, .free_fn = free};
    cJSON_InitHooks(&hooks);
    const est_binding seq = {"seq", 16};
    check_model(argv[1], "lenet.onnx", 4, NULL);
    check_model(argv[1], "mlp.onnx", 4, NULL);
    check_model(argv[1], "resnet18.onnx", 2, NULL);
    check_model(argv[1], "small_cnn.json", 4, NULL);
    check_model(argv[1], "transformer_block.json", 2, &seq);
    cJSON_InitHooks(NULL);
#else
    (void)argv;
    printf("note: allocation failures are not tested (the linker has no --wrap)\n");
#endif
    return test_result("test_alloc");
}
