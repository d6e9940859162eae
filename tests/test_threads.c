/*
 * test_threads: the library on several threads at once. Each thread loads
 * its own copy of every model and estimates it at several batch sizes and in
 * both modes, while all threads also estimate one shared graph; every result
 * must equal the single-threaded one. (Run the ASan build, or build with
 * -Db_sanitize=thread, to see races.)
 *
 * usage: test_threads MODELS_DIR
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "estimate.h"
#include "test_util.h"

#define N_THREADS 4
#define N_BATCHES 3

static const struct model {
    const char *file;
    const char *dim;   /* a symbolic dim to bind besides the batch, or NULL */
} models[] = {
    {"lenet.onnx", NULL}, {"mlp.onnx", NULL}, {"resnet18.onnx", NULL},
    {"small_cnn.json", NULL}, {"transformer_block.json", "seq"},
};
#define N_MODELS (sizeof models / sizeof models[0])
static const int64_t batches[N_BATCHES] = {1, 8, 32};

/* What is compared: the totals, the peak and a digest of every layer. */
typedef struct result {
    est_status status;
    est_totals totals;
    uint64_t peak;
    uint64_t layer_digest;
    size_t layers;
} result;

typedef struct work {
    const char *models_dir;
    const est_graph *shared;      /* estimated by every thread */
    result own[N_MODELS][2][N_BATCHES];
    result shared_res[2][N_BATCHES];
    int load_failures;
} work;

static result estimate(const est_graph *g, const char *dim, est_mode mode, int64_t batch) {
    result res;
    memset(&res, 0, sizeof res);
    est_options opt;
    est_options_init(&opt);
    opt.mode = mode;
    opt.batch = batch;
    est_binding b = {dim, 64};
    if (dim) {
        opt.dims = &b;
        opt.n_dims = 1;
    }
    est_report *r = NULL;
    est_error err;
    res.status = est_estimate(g, &opt, &r, &err);
    if (res.status != EST_OK) return res;
    res.totals = *est_report_totals(r);
    res.peak = est_report_peak(r)->bytes;
    res.layers = est_report_layer_count(r);
    for (size_t i = 0; i < res.layers; i++) {
        const est_layer *L = est_report_layer(r, i);
        res.layer_digest = res.layer_digest * 1000003u + L->flops_forward + 3 * L->saved_bytes + 7 * L->output_bytes +
                           11 * L->temp_bytes + strlen(L->name);
    }
    est_report_free(r);
    return res;
}

static void run_all(work *w) {
    for (size_t m = 0; m < N_MODELS; m++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", w->models_dir, models[m].file);
        est_graph *g = NULL;
        est_error err;
        if (est_load_file(path, &g, &err) != EST_OK) {
            w->load_failures++;
            continue;
        }
        for (int mode = 0; mode < 2; mode++)
            for (int b = 0; b < N_BATCHES; b++)
                w->own[m][mode][b] = estimate(g, models[m].dim, (est_mode)mode, batches[b]);
        est_graph_free(g);
    }
    for (int mode = 0; mode < 2; mode++)
        for (int b = 0; b < N_BATCHES; b++)
            w->shared_res[mode][b] = estimate(w->shared, NULL, (est_mode)mode, batches[b]);
}

static void *thread_main(void *arg) {
    for (int round = 0; round < 3; round++) run_all(arg);
    return NULL;
}

static bool same(const result *a, const result *b) {
    return a->status == b->status && memcmp(&a->totals, &b->totals, sizeof a->totals) == 0 && a->peak == b->peak &&
           a->layer_digest == b->layer_digest && a->layers == b->layers;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODELS_DIR\n", argv[0]);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/resnet18.onnx", argv[1]);
    est_graph *shared = NULL;
    est_error err;
    if (est_load_file(path, &shared, &err) != EST_OK) {
        printf("%s\n", err.message);
        return 1;
    }
    static work reference, per_thread[N_THREADS];
    reference.models_dir = argv[1];
    reference.shared = shared;
    run_all(&reference);
    CHECK(reference.load_failures == 0, "%d models did not load", reference.load_failures);
    for (size_t m = 0; m < N_MODELS; m++)
        CHECK(reference.own[m][0][1].status == EST_OK && reference.own[m][0][1].peak > 0, "%s: no reference estimate",
              models[m].file);

    pthread_t threads[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        per_thread[t].models_dir = argv[1];
        per_thread[t].shared = shared;
        CHECK(pthread_create(&threads[t], NULL, thread_main, &per_thread[t]) == 0, "pthread_create");
    }
    for (int t = 0; t < N_THREADS; t++) pthread_join(threads[t], NULL);
    for (int t = 0; t < N_THREADS; t++) {
        CHECK(per_thread[t].load_failures == 0, "thread %d: %d loads failed", t, per_thread[t].load_failures);
        for (size_t m = 0; m < N_MODELS; m++)
            for (int mode = 0; mode < 2; mode++)
                for (int b = 0; b < N_BATCHES; b++)
                    CHECK(same(&per_thread[t].own[m][mode][b], &reference.own[m][mode][b]),
                          "thread %d: %s %s batch %lld differs from the single-threaded estimate", t, models[m].file,
                          est_mode_name((est_mode)mode), (long long)batches[b]);
        for (int mode = 0; mode < 2; mode++)
            for (int b = 0; b < N_BATCHES; b++)
                CHECK(same(&per_thread[t].shared_res[mode][b], &reference.shared_res[mode][b]),
                      "thread %d: shared graph, %s batch %lld differs", t, est_mode_name((est_mode)mode),
                      (long long)batches[b]);
    }
    est_graph_free(shared);
    return test_result("test_threads");
}
