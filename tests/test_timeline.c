/*
 * test_timeline: the step over time (est_options.timeline,
 * libestimate/timeline.c) through the public API.
 *
 * Checks:
 *  1. a Relu in inference, derived by hand: the only event is y's
 *     allocation; at the peak x and y are live; the snapshots.
 *  2. the invariants of docs/output-format.md on every model of models/ and
 *     the shared truth's exports, in training (adam, sgd), inference,
 *     under bf16 autocast, with checkpointing and under FSDP on 8 GPUs:
 *     the timeline's largest `allocated` is the peak; the live blocks sum
 *     to the peak and, by category, to its breakdown; each event's
 *     `allocated` is the previous one's plus an alloc or minus a free; a
 *     free or move names a block that is live; a steady training step ends
 *     as it began (the snapshots before and after are equal).
 *  3. without est_options.timeline nothing is recorded.
 *  4. a step of no allocation (an Identity in inference, a view): no event,
 *     and the peak's live list is what the step began with, the input.
 *  5. the event array's growth: chains of 1 to 160 blocks, every kind of
 *     event at a growth point, the invariants of 2 on each.
 *
 * usage: test_timeline MODELS_DIR TRUTH_ONNX_DIR
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate_util.h"

static const char relu_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"relu\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 100]}],\n"
    " \"nodes\": [{\"name\": \"relu\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"y\"]}],\n"
    " \"outputs\": [\"y\"]}\n";

static est_report *estimate(const est_graph *g, est_options opt, const char *what) {
    est_error err;
    est_report *r = NULL;
    opt.timeline = 1;
    if (est_estimate(g, &opt, &r, &err) != EST_OK) CHECK(false, "%s: %s", what, err.message);
    return r;
}

/* An inference pass at `batch` of the JSON graph `json`, with its timeline;
 * *g gets the graph (the caller frees both). NULL after a failed check. */
static est_report *infer_json(const char *json, const char *name, int64_t batch, est_graph **g) {
    est_error err;
    *g = NULL;
    if (est_load_json_buffer(json, strlen(json), name, g, &err) != EST_OK) {
        CHECK(false, "%s: %s", name, err.message);
        return NULL;
    }
    est_options opt;
    est_options_init(&opt);
    opt.mode = EST_MODE_INFER;
    opt.batch = batch;
    return estimate(*g, opt, name);
}

/* 1. x [4, 100] float32: 1600 bytes, one block of 2048; y the same. */
static void test_relu(void) {
    est_graph *g;
    est_report *r = infer_json(relu_json, "relu", 4, &g);
    if (r) {
        CHECK(est_report_event_count(r) == 1, "relu: %zu events, expected y's allocation", est_report_event_count(r));
        const est_event *e = est_report_event(r, 0);
        CHECK(e && e->kind == EST_EVENT_ALLOC && e->bytes == 2048 && e->allocated == 4096 && e->layer == 0 &&
              e->category == EST_CAT_ACTIVATIONS && strcmp(e->tensor, "y") == 0 && strcmp(e->what, "activation") == 0,
              "relu: the event is y's 2048-byte allocation at layer 0, 4096 after it");
        CHECK(est_report_live_count(r) == 2, "relu: %zu live, expected x and y", est_report_live_count(r));
        const est_live *a = est_report_live(r, 0), *b = est_report_live(r, 1);
        CHECK(a && b && a->bytes == 2048 && b->bytes == 2048 && a->rank == 2 && a->shape[0] == 4 && a->shape[1] == 100,
              "relu: two 2048-byte blocks of shape 4x100");
        const est_snapshot *before = est_report_snapshot(r, EST_SNAPSHOT_BEFORE);
        const est_snapshot *after = est_report_snapshot(r, EST_SNAPSHOT_AFTER);
        CHECK(before && before->bytes == 2048 && before->category[EST_CAT_INPUTS] == 2048, "relu: before, x only");
        CHECK(after && after->bytes == 4096 && after->category[EST_CAT_ACTIVATIONS] == 2048, "relu: after, x and y");
    }
    est_report_free(r);
    est_graph_free(g);
}

static void check_invariants(const est_report *r, bool steady, const char *what) {
    const est_peak *p = est_report_peak(r);
    uint64_t max = 0, running = 0, live_sum = 0, by_cat[EST_CAT_COUNT] = {0};
    size_t n = est_report_event_count(r);
    const est_snapshot *before = est_report_snapshot(r, EST_SNAPSHOT_BEFORE);
    CHECK(before != NULL, "%s: no snapshots", what);
    if (!before) return;
    running = before->bytes;
    /* the blocks alive, for frees and moves: allocated within the step, or
     * (unknown here) before it, which only the step's frees reveal */
    uint64_t *alive = calloc(n + 1, sizeof *alive);
    size_t n_alive = 0;
    int unmatched = 0, steps = 0;
    for (size_t i = 0; i < n; i++) {
        const est_event *e = est_report_event(r, i);
        uint64_t expect = e->kind == EST_EVENT_ALLOC ? running + e->bytes
                          : e->kind == EST_EVENT_FREE ? running - e->bytes : running;
        if (e->allocated != expect) steps++;
        running = e->allocated;
        if (e->allocated > max) max = e->allocated;
        if (!alive || !e->block) continue;
        if (e->kind == EST_EVENT_ALLOC) {
            alive[n_alive++] = e->block;
            continue;
        }
        size_t k = n_alive;
        while (k > 0 && alive[k - 1] != e->block) k--;
        if (k) alive[k - 1] = 0;
        else unmatched++; /* made before the step: fine once, for a free or a move's old key */
        if (e->kind == EST_EVENT_MOVE && i + 1 < n) alive[n_alive++] = est_report_event(r, ++i)->block;
    }
    free(alive);
    CHECK(steps == 0, "%s: %d events whose allocated bytes do not follow from the one before", what, steps);
    CHECK(max == p->bytes, "%s: the timeline's largest allocated %llu, the peak %llu", what, U(max), U(p->bytes));
    for (size_t i = 0; i < est_report_live_count(r); i++) {
        const est_live *l = est_report_live(r, i);
        live_sum += l->bytes;
        by_cat[l->category] += l->bytes;
        CHECK(i == 0 || est_report_live(r, i - 1)->bytes >= l->bytes, "%s: live not largest first", what);
    }
    CHECK(live_sum == p->bytes, "%s: live blocks sum to %llu, the peak is %llu", what, U(live_sum), U(p->bytes));
    for (int c = 0; c < EST_CAT_COUNT; c++)
        CHECK(by_cat[c] == est_peak_category(p, (est_category)c), "%s: live %s %llu, the peak's %llu", what,
              est_category_name((est_category)c), U(by_cat[c]), U(est_peak_category(p, (est_category)c)));
    const est_snapshot *at = est_report_snapshot(r, EST_SNAPSHOT_PEAK), *after = est_report_snapshot(r, EST_SNAPSHOT_AFTER);
    CHECK(at && at->bytes == p->bytes, "%s: the peak snapshot is not the peak", what);
    if (steady)
        CHECK(after && after->bytes == before->bytes && memcmp(after->category, before->category, sizeof after->category) == 0,
              "%s: a steady step ends with %llu, began with %llu", what, U(after ? after->bytes : 0), U(before->bytes));
    (void)unmatched;
}

static int checked; /* estimates whose invariants were checked */

static void check_model(const char *path) {
    est_error err;
    est_graph *g = NULL;
    if (est_load_file(path, &g, &err) != EST_OK) {
        CHECK(false, "%s: %s", path, err.message);
        return;
    }
    struct {
        const char *name;
        est_mode mode;
        est_optimizer opt;
        est_amp amp;
        int64_t every;
        est_strategy strategy;
    } cases[] = {
        {"adam", EST_MODE_TRAIN, EST_OPT_ADAM, EST_AMP_NONE, 0, EST_STRATEGY_NONE},
        {"sgd", EST_MODE_TRAIN, EST_OPT_SGD, EST_AMP_NONE, 0, EST_STRATEGY_NONE},
        {"infer", EST_MODE_INFER, EST_OPT_ADAM, EST_AMP_NONE, 0, EST_STRATEGY_NONE},
        {"amp bf16", EST_MODE_TRAIN, EST_OPT_ADAM, EST_AMP_BF16, 0, EST_STRATEGY_NONE},
        {"checkpoint every=1", EST_MODE_TRAIN, EST_OPT_ADAM, EST_AMP_NONE, 1, EST_STRATEGY_NONE},
        {"fsdp on 8", EST_MODE_TRAIN, EST_OPT_ADAM, EST_AMP_NONE, 0, EST_STRATEGY_FSDP},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        est_options opt;
        est_options_init(&opt);
        opt.mode = cases[k].mode;
        opt.optimizer = cases[k].opt;
        opt.batch = 4;
        if (est_graph_dtype(g) == EST_DT_FLOAT) opt.amp = cases[k].amp;
        else if (cases[k].amp) continue;
        opt.checkpoint.every = cases[k].every;
        if (cases[k].strategy) opt.parallel = (est_parallel){.world_size = 8, .strategy = cases[k].strategy};
        /* the JSON models bind seq; a model without blocks refuses every=1 */
        est_binding seq = {"seq", 16};
        opt.dims = &seq;
        opt.n_dims = 1;
        char what[4200];
        snprintf(what, sizeof what, "%s %s", path, cases[k].name);
        opt.timeline = 1;
        est_report *r = NULL;
        est_status st = est_estimate(g, &opt, &r, &err);
        if (st == EST_EINVAL && strstr(err.message, "no symbolic dim named 'seq'")) {
            opt.n_dims = 0;
            st = est_estimate(g, &opt, &r, &err);
        }
        if (st != EST_OK) {
            CHECK(cases[k].every && (strstr(err.message, "blocks") || strstr(err.message, "module names")), "%s: %s",
                  what, err.message);
            continue;
        }
        check_invariants(r, cases[k].mode == EST_MODE_TRAIN, what);
        checked++;
        est_report_free(r);
    }
    est_graph_free(g);
}

static void check_folder(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    if (!d) {
        printf("test_timeline: %s not found, skipping it\n", dir);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name), sl = strlen(suffix);
        if (len < sl || strcmp(e->d_name + len - sl, suffix) != 0) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        check_model(path);
    }
    closedir(d);
}

/* 4. */
static void test_no_events(void) {
    static const char ident_json[] =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"ident\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 4]}],\n"
        " \"nodes\": [{\"name\": \"id\", \"op\": \"Identity\", \"inputs\": [\"x\"], \"outputs\": [\"y\"]}],\n"
        " \"outputs\": [\"y\"]}\n";
    est_graph *g;
    est_report *r = infer_json(ident_json, "ident", 2, &g);
    if (r) {
        const est_live *l = est_report_live(r, 0);
        CHECK(est_report_event_count(r) == 0, "ident: %zu events, expected none", est_report_event_count(r));
        CHECK(est_report_live_count(r) == 1 && l && l->bytes == 512 && l->category == EST_CAT_INPUTS &&
                  est_report_peak(r)->bytes == 512,
              "ident: the input's 512 bytes are the peak and all that is live");
    }
    est_report_free(r);
    est_graph_free(g);
}

/* 5. The event array grows while the step runs; a transient's free, the
 * second of its two events, may be the one that moves it. Chains of 1 to
 * 160 blocks (MatMul, a bias Add, Relu, a residual Add, LayerNormalization
 * and a Mul by its scale, whose gradients are summed: a transient, over
 * [batch, 8, 64]) put every kind of event at the array's growth points
 * (64, 73, 118, 127, 143 and 152 blocks a transient's); the invariants of 2
 * hold on each, and the sanitizer build sees any read of the old array. */
static char *chain_json(int blocks) {
    size_t cap = 1024 + (size_t)blocks * 1200, n = 0;
    char *j = malloc(cap);
    if (!j) return NULL;
    n += (size_t)snprintf(j + n, cap - n, "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"chain\", "
                          "\"opset_import\": {\"\": 17}, \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", "
                          "\"dims\": [\"batch\", 8, 64]}], \"initializers\": [");
    for (int b = 0; b < blocks; b++)
        n += (size_t)snprintf(j + n, cap - n, "%s{\"name\": \"w%d\", \"dtype\": \"float32\", \"dims\": [64, 64]}, "
                              "{\"name\": \"b%d\", \"dtype\": \"float32\", \"dims\": [64]}, "
                              "{\"name\": \"g%d\", \"dtype\": \"float32\", \"dims\": [64]}", b ? ", " : "", b, b, b);
    n += (size_t)snprintf(j + n, cap - n, "], \"nodes\": [");
    for (int b = 0; b < blocks; b++) {
        char h[16];
        snprintf(h, sizeof h, b ? "y%d" : "x", b - 1);
        n += (size_t)snprintf(j + n, cap - n,
                              "%s{\"name\": \"mm%d\", \"op\": \"MatMul\", \"inputs\": [\"%s\", \"w%d\"], \"outputs\": [\"m%d\"]}, "
                              "{\"name\": \"add%d\", \"op\": \"Add\", \"inputs\": [\"m%d\", \"b%d\"], \"outputs\": [\"a%d\"]}, "
                              "{\"name\": \"relu%d\", \"op\": \"Relu\", \"inputs\": [\"a%d\"], \"outputs\": [\"r%d\"]}, "
                              "{\"name\": \"res%d\", \"op\": \"Add\", \"inputs\": [\"r%d\", \"%s\"], \"outputs\": [\"s%d\"]}, "
                              "{\"name\": \"ln%d\", \"op\": \"LayerNormalization\", \"inputs\": [\"s%d\", \"g%d\"], "
                              "\"outputs\": [\"l%d\"], \"attributes\": {\"axis\": {\"int\": -1}}}, "
                              "{\"name\": \"mul%d\", \"op\": \"Mul\", \"inputs\": [\"l%d\", \"g%d\"], \"outputs\": [\"y%d\"]}",
                              b ? ", " : "", b, h, b, b, b, b, b, b, b, b, b, b, b, h, b, b, b, b, b, b, b, b, b);
    }
    snprintf(j + n, cap - n, "], \"outputs\": [\"y%d\"]}", blocks - 1);
    return j;
}

static void test_growth(void) {
    for (int blocks = 1; blocks <= 160; blocks++) {
        char *json = chain_json(blocks), what[32];
        snprintf(what, sizeof what, "chain of %d", blocks);
        est_graph *g = NULL;
        est_error err;
        if (!json || est_load_json_buffer(json, strlen(json), what, &g, &err) != EST_OK) {
            CHECK(false, "%s: %s", what, json ? err.message : "out of memory");
            free(json);
            return;
        }
        est_options opt;
        est_options_init(&opt);
        opt.batch = 4;
        opt.timeline = 1;
        est_report *r = estimate(g, opt, what);
        if (r) check_invariants(r, true, what);
        est_report_free(r);
        est_graph_free(g);
        free(json);
    }
}

/* 3. */
static void test_off(const char *models) {
    char path[4096];
    snprintf(path, sizeof path, "%s/resnet18.onnx", models);
    est_error err;
    est_graph *g = NULL;
    if (est_load_file(path, &g, &err) != EST_OK) return;
    est_options opt;
    est_options_init(&opt);
    opt.batch = 2;
    est_report *r = NULL;
    if (est_estimate(g, &opt, &r, &err) == EST_OK)
        CHECK(!est_report_event_count(r) && !est_report_live_count(r) && !est_report_snapshot(r, EST_SNAPSHOT_PEAK),
              "without timeline: nothing recorded");
    est_report_free(r);
    est_graph_free(g);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        printf("usage: test_timeline MODELS_DIR TRUTH_ONNX_DIR\n");
        return 2;
    }
    test_relu();
    check_folder(argv[1], ".onnx");
    check_folder(argv[1], ".json");
    check_folder(argv[2], "-train.onnx");
    test_off(argv[1]);
    test_no_events();
    test_growth();
    printf("test_timeline: invariants checked on %d estimates\n", checked);
    CHECK(checked >= 30, "only %d estimates checked", checked);
    return test_result("test_timeline");
}
