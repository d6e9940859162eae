/*
 * test_load: every export in shared/truth/onnx loads and estimates, and the
 * parameter counts agree with what PyTorch counted (truth.json).
 *
 * And a model with large embedded weights (onnx/slim.c cuts their bytes
 * before unpacking): its shapes, parameters and the small shape vector
 * stored after the weights come out as with the weights read.
 *
 * usage: test_load TRUTH_DIR MODELS_DIR
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "estimate.h"
#include "onnx.pb-c.h"
#include "slim.h"
#include "truth_util.h"

/* The TorchScript exporter drops BertModel's pooler (not on the path to
 * last_hidden_state): 768*768 weights + 768 bias. */
#define BERT_POOLER_PARAMS 590592

static double truth_params(const cJSON *truth, const char *model) {
    const cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(truth, "models"), model);
    const cJSON *n = cJSON_GetObjectItem(m, "n_params");
    return cJSON_IsNumber(n) ? n->valuedouble : -1;
}

static void check_export(const char *dir, const char *file, const cJSON *truth) {
    char path[4096], model[256];
    snprintf(path, sizeof path, "%s/onnx/%s", dir, file);
    snprintf(model, sizeof model, "%s", file);
    char *dot = strchr(model, '.');
    if (dot) *dot = '\0';
    est_error err;
    est_graph *g = NULL;
    est_status st = est_load_file(path, &g, &err);
    CHECK(st == EST_OK, "%s: %s", file, err.message);
    if (st != EST_OK) return;
    int64_t batches[] = {1, 8, 32};
    for (int b = 0; b < 3; b++) {
        est_options opt;
        est_options_init(&opt);
        opt.batch = batches[b];
        est_report *r = NULL;
        st = est_estimate(g, &opt, &r, &err);
        CHECK(st == EST_OK, "%s batch %lld: %s", file, (long long)batches[b], err.message);
        if (st != EST_OK) break;
        const est_tensor_info *out = est_report_output(r, 0);
        CHECK(out && out->rank >= 2 && out->shape[0] == batches[b], "%s: output's leading dim is not the batch",
              file);
        if (b == 0) {
            double want = truth_params(truth, model);
            double got = (double)est_report_totals(r)->param_count;
            CHECK(want > 0, "%s: no n_params in truth.json", model);
            if (strstr(file, ".legacy-train.")) {
                if (strcmp(model, "bert_base") == 0) want -= BERT_POOLER_PARAMS;
                CHECK(got == want, "%s: %.0f params, truth says %.0f", file, got, want);
            } else {
                CHECK(fabs(got - want) / want < 0.015, "%s: %.0f params, truth %.0f (more than 1.5%% off)", file,
                      got, want);
            }
            if (strcmp(file, "resnet18.legacy-train.onnx") == 0)
                CHECK(est_report_totals(r)->buffer_count == 9600, "resnet18: %llu buffer elements, want 9600",
                      (unsigned long long)est_report_totals(r)->buffer_count);
        }
        est_report_free(r);
    }
    est_graph_free(g);
}

/* Re-estimating one loaded graph at 100 batch sizes is monotone in batch and
 * equals estimating a freshly loaded copy. */
static uint64_t fresh_output_bytes(const char *path, int64_t batch) {
    est_error err;
    est_graph *g = NULL;
    est_report *r = NULL;
    est_options opt;
    est_options_init(&opt);
    opt.batch = batch;
    uint64_t bytes = 0;
    if (est_load_file(path, &g, &err) == EST_OK && est_estimate(g, &opt, &r, &err) == EST_OK)
        bytes = est_report_totals(r)->output_bytes;
    est_report_free(r);
    est_graph_free(g);
    return bytes;
}

static void check_reestimate(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/onnx/resnet18.legacy-train.onnx", dir);
    est_error err;
    est_graph *g = NULL;
    if (est_load_file(path, &g, &err) != EST_OK) return;
    uint64_t prev = 0;
    for (int64_t b = 1; b <= 100; b++) {
        est_options opt;
        est_options_init(&opt);
        opt.batch = b;
        est_report *r = NULL;
        est_status st = est_estimate(g, &opt, &r, &err);
        CHECK(st == EST_OK, "batch %lld: %s", (long long)b, err.message);
        if (st != EST_OK) break;
        uint64_t bytes = est_report_totals(r)->output_bytes;
        CHECK(bytes > prev, "output bytes not increasing at batch %lld", (long long)b);
        if (b % 25 == 0)
            CHECK(bytes == fresh_output_bytes(path, b), "batch %lld differs from a fresh load", (long long)b);
        prev = bytes;
        est_report_free(r);
    }
    est_graph_free(g);
}

static void check_models_dir(const char *dir) {
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d) return;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        const char *ext = strrchr(e->d_name, '.');
        if (!ext || (strcmp(ext, ".onnx") && strcmp(ext, ".json"))) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        est_error err;
        est_graph *g = NULL;
        est_status st = est_load_file(path, &g, &err);
        CHECK(st == EST_OK, "%s: %s", e->d_name, err.message);
        if (st == EST_OK) {
            est_options opt;
            est_options_init(&opt);
            opt.batch = 4;
            est_binding seq = {"seq", 128};
            if (strstr(e->d_name, "transformer")) {
                opt.dims = &seq;
                opt.n_dims = 1;
            }
            est_report *r = NULL;
            st = est_estimate(g, &opt, &r, &err);
            CHECK(st == EST_OK, "%s: %s", e->d_name, err.message);
            est_report_free(r);
            n++;
        }
        est_graph_free(g);
    }
    closedir(d);
    CHECK(n >= 4, "models/ holds %d loadable models, want at least 4", n);
}

/* The pages wholly inside the first run of `len` bytes `fill` in buf[0..n)
 * made unreadable: a read of them ends the test with SIGSEGV. */
static void protect_run(uint8_t *buf, size_t n, uint8_t fill, size_t len) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), run = 0;
    for (size_t i = 0; i < n; i++) {
        run = buf[i] == fill ? run + 1 : 0;
        if (run < len) continue;
        uintptr_t from = ((uintptr_t)(buf + i + 1 - len) + page - 1) & ~(uintptr_t)(page - 1);
        uintptr_t to = (uintptr_t)(buf + i + 1) & ~(uintptr_t)(page - 1);
        CHECK(to > from && mprotect((void *)from, to - from, PROT_NONE) == 0, "embedded: mprotect failed");
        return;
    }
    CHECK(false, "embedded: no run of %zu bytes 0x%02x", len, fill);
}

/* x [batch, 4096] -> MatMul W [4096, 256] (4 MiB of raw_data, no byte 0)
 * -> h -> Reshape(h, shape = [-1, 16]) -> y [16 batch, 16], with an unused
 * int64 initializer of 100,000 six-byte varints (600 KB, packed int64_data,
 * no byte 0) and the shape vector last, after both. The load must not read
 * W's bytes: the pages inside them are unreadable (a scan for NUL bytes
 * once read on through them). Estimated in inference at batch 2: y is
 * [32, 16]; one parameter of 1,048,576 elements. */
static void check_embedded_weights(void) {
    enum { ROWS = 4096, COLS = 256, BIG = 100000 };
    Onnx__TensorProto w, big, shape, *inits[3] = {&w, &big, &shape};
    int64_t w_dims[2] = {ROWS, COLS}, big_dims[1] = {BIG}, shape_dims[1] = {2}, shape_vals[2] = {-1, 16};
    onnx__tensor_proto__init(&w);
    w.name = "W", w.has_data_type = 1, w.data_type = 1, w.n_dims = 2, w.dims = w_dims;
    w.has_raw_data = 1, w.raw_data.len = (size_t)ROWS * COLS * 4, w.raw_data.data = malloc(w.raw_data.len);
    if (w.raw_data.data) memset(w.raw_data.data, 0x41, w.raw_data.len);
    onnx__tensor_proto__init(&big);
    big.name = "big", big.has_data_type = 1, big.data_type = 7, big.n_dims = 1, big.dims = big_dims;
    big.n_int64_data = BIG, big.int64_data = malloc(BIG * sizeof *big.int64_data);
    for (int i = 0; big.int64_data && i < BIG; i++) big.int64_data[i] = (int64_t)1 << 40;
    onnx__tensor_proto__init(&shape);
    shape.name = "shape", shape.has_data_type = 1, shape.data_type = 7, shape.n_dims = 1, shape.dims = shape_dims;
    shape.n_int64_data = 2, shape.int64_data = shape_vals;
    Onnx__NodeProto mm, rs, *nodes[2] = {&mm, &rs};
    char *mm_in[2] = {"x", "W"}, *mm_out[1] = {"h"}, *rs_in[2] = {"h", "shape"}, *rs_out[1] = {"y"};
    onnx__node_proto__init(&mm);
    mm.name = "mm", mm.op_type = "MatMul", mm.n_input = 2, mm.input = mm_in, mm.n_output = 1, mm.output = mm_out;
    onnx__node_proto__init(&rs);
    rs.name = "rs", rs.op_type = "Reshape", rs.n_input = 2, rs.input = rs_in, rs.n_output = 1, rs.output = rs_out;
    Onnx__TensorShapeProto__Dimension d0, d1, *dims[2] = {&d0, &d1};
    onnx__tensor_shape_proto__dimension__init(&d0);
    d0.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM, d0.dim_param = "batch";
    onnx__tensor_shape_proto__dimension__init(&d1);
    d1.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE, d1.dim_value = ROWS;
    Onnx__TensorShapeProto shp;
    onnx__tensor_shape_proto__init(&shp);
    shp.n_dim = 2, shp.dim = dims;
    Onnx__TypeProto__Tensor tt;
    onnx__type_proto__tensor__init(&tt);
    tt.has_elem_type = 1, tt.elem_type = 1, tt.shape = &shp;
    Onnx__TypeProto type;
    onnx__type_proto__init(&type);
    type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, type.tensor_type = &tt;
    Onnx__ValueInfoProto in, out, *ins[1] = {&in}, *outs[1] = {&out};
    onnx__value_info_proto__init(&in);
    in.name = "x", in.type = &type;
    onnx__value_info_proto__init(&out);
    out.name = "y";
    Onnx__GraphProto graph;
    onnx__graph_proto__init(&graph);
    graph.name = "embedded", graph.n_node = 2, graph.node = nodes, graph.n_initializer = 3, graph.initializer = inits;
    graph.n_input = 1, graph.input = ins, graph.n_output = 1, graph.output = outs;
    Onnx__OperatorSetIdProto opset, *opsets[1] = {&opset};
    onnx__operator_set_id_proto__init(&opset);
    opset.domain = "", opset.has_version = 1, opset.version = 17;
    Onnx__ModelProto model;
    onnx__model_proto__init(&model);
    model.has_ir_version = 1, model.ir_version = 8, model.n_opset_import = 1, model.opset_import = opsets;
    model.graph = &graph;
    size_t size = onnx__model_proto__get_packed_size(&model);
    uint8_t *buf = w.raw_data.data && big.int64_data
                       ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                       : NULL;
    if (buf == MAP_FAILED) buf = NULL;
    CHECK(buf != NULL, "embedded: out of memory");
    CHECK(size > (size_t)ROWS * COLS * 4 + 500000, "embedded: %zu bytes packed", size);
    est_graph *g = NULL;
    est_report *r = NULL;
    est_error err;
    if (buf) {
        onnx__model_proto__pack(&model, buf);
        /* what unpack sees: W's and big's bytes cut (their values are never
         * read), the shape vector whole */
        for (int k = 0; k < 3; k++) {
            size_t n = onnx__tensor_proto__get_packed_size(inits[k]), slim_n = 0;
            uint8_t *item = malloc(n);
            est_slim_buf slimmed = {0};
            if (item) onnx__tensor_proto__pack(inits[k], item);
            const uint8_t *cut = item ? est__onnx_slim(item, n, EST_SLIM_TENSOR, &slimmed, &slim_n) : NULL;
            CHECK(cut && (k == 2 ? cut == item : slim_n < 100), "embedded: %s slimmed to %zu bytes of %zu",
                  inits[k]->name, slim_n, n);
            free(slimmed.data);
            free(item);
        }
        protect_run(buf, size, 0x41, w.raw_data.len);
        if (est_load_onnx_buffer(buf, size, "embedded.onnx", &g, &err) != EST_OK)
            CHECK(false, "embedded: load failed: %s", err.message);
    }
    if (g) {
        est_options opt;
        est_options_init(&opt);
        opt.mode = EST_MODE_INFER;
        opt.batch = 2;
        if (est_estimate(g, &opt, &r, &err) != EST_OK) CHECK(false, "embedded: estimate failed: %s", err.message);
    }
    if (r) {
        const est_tensor_info *y = est_report_output(r, 0);
        CHECK(y->rank == 2 && y->shape[0] == 32 && y->shape[1] == 16, "embedded: y is %lldx%lld, expected 32x16",
              (long long)(y->rank > 0 ? y->shape[0] : -1), (long long)(y->rank > 1 ? y->shape[1] : -1));
        CHECK(est_report_totals(r)->param_count == (uint64_t)ROWS * COLS, "embedded: %llu parameters",
              (unsigned long long)est_report_totals(r)->param_count);
    }
    est_report_free(r);
    est_graph_free(g);
    if (buf) munmap(buf, size);
    free(w.raw_data.data);
    free(big.int64_data);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TRUTH_DIR MODELS_DIR\n", argv[0]);
        return 2;
    }
    check_embedded_weights();
    bool absent;
    cJSON *truth = test_load_truth(argv[1], &absent);
    if (absent) return test_failures ? test_result("test_load") : 77;
    char path[4096];
    snprintf(path, sizeof path, "%s/onnx", argv[1]);
    DIR *d = opendir(path);
    int files = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".onnx") != 0) continue;
        check_export(argv[1], e->d_name, truth);
        files++;
    }
    if (d) closedir(d);
    CHECK(files == 28, "found %d exports, expected 28", files);
    check_reestimate(argv[1]);
    check_models_dir(argv[2]);
    cJSON_Delete(truth);
    return test_result("test_load");
}
