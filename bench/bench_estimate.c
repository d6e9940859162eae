/*
 * bench_estimate: how long loading and estimating a large graph takes.
 *
 * Builds an ONNX model of BLOCKS transformer-style blocks in memory (12 nodes
 * each, including the Shape -> Gather -> Concat -> Reshape chains that
 * TorchScript exports carry), serialises it, then times:
 *   - load: parsing the bytes into a graph;
 *   - estimate: one full estimate of the loaded graph;
 *   - re-estimate: estimates of the same graph at other batch sizes.
 * Also times any model files given on the command line.
 *
 * usage: bench_estimate [BLOCKS] [MODEL...]      (default 500 blocks = 6,000 nodes)
 *        bench_estimate --reestimate N MODEL [skip-reserved]
 *                                                load once, N estimates (train,
 *                                                Adam, batch 1..N; without the
 *                                                allocator's replay with
 *                                                skip-reserved); prints
 *                                                "reestimate_ms <mean ms>"
 *        bench_estimate --load N MODEL           N loads of MODEL; prints
 *                                                "load_ms <mean ms>"
 *        bench_estimate --write BLOCKS PATH      write the synthetic model
 *                                                (12 nodes a block) to PATH
 * bench/speed.py drives the last two.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "estimate.h"
#include "onnx.pb-c.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- a small arena-backed model builder --------------------------------- */

typedef struct builder {
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    char **strings;
    size_t n_strings, cap_strings;
} builder;

static void *grow(void *p, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return p;
    *cap = *cap ? *cap * 2 : 256;
    return realloc(p, *cap * elem);
}

__attribute__((format(printf, 2, 3))) static char *str(builder *b, const char *fmt, ...) {
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    b->strings = grow(b->strings, &b->cap_strings, b->n_strings, sizeof *b->strings);
    return b->strings[b->n_strings++] = strdup(buf);
}

static Onnx__NodeProto *node(builder *b, const char *op, int n_in, char **in, char *out) {
    Onnx__NodeProto *n = calloc(1, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->name = out;
    n->n_input = (size_t)n_in;
    n->input = calloc((size_t)n_in, sizeof *n->input);
    memcpy(n->input, in, (size_t)n_in * sizeof *in);
    n->n_output = 1;
    n->output = calloc(1, sizeof *n->output);
    n->output[0] = out;
    b->nodes = grow(b->nodes, &b->cap_nodes, b->n_nodes, sizeof *b->nodes);
    b->nodes[b->n_nodes++] = n;
    return n;
}

static void attr_int(Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = calloc(1, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
    n->n_attribute = 1;
    n->attribute = calloc(1, sizeof *n->attribute);
    n->attribute[0] = a;
}

static char *init(builder *b, char *name, int32_t dtype, int rank, const int64_t *dims, const int64_t *ivals) {
    Onnx__TensorProto *t = calloc(1, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = name;
    t->has_data_type = 1;
    t->data_type = dtype;
    t->n_dims = (size_t)rank;
    t->dims = calloc((size_t)rank + 1, sizeof *t->dims);
    memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
    if (ivals) {
        t->n_int64_data = (size_t)dims[0];
        t->int64_data = calloc((size_t)dims[0], sizeof *t->int64_data);
        memcpy(t->int64_data, ivals, (size_t)dims[0] * sizeof *ivals);
    } else {
        t->has_data_location = 1; /* weights live elsewhere, as in the shared exports */
        t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    }
    b->inits = grow(b->inits, &b->cap_inits, b->n_inits, sizeof *b->inits);
    b->inits[b->n_inits++] = t;
    return name;
}

/* One block: x (B, S, 256) -> MatMul, Add, Relu, residual Add, LayerNorm,
 * and a Reshape whose target is computed from Shape like TorchScript does. */
static char *block(builder *b, int i, char *x) {
    const int64_t wd[] = {256, 256}, bd[] = {256}, one[] = {1};
    const int64_t idx0[] = {0}, idx1[] = {1}, tail[] = {256};
    char *w = init(b, str(b, "w%d", i), 1, 2, wd, NULL);
    char *bias = init(b, str(b, "b%d", i), 1, 1, bd, NULL);
    char *g = init(b, str(b, "g%d", i), 1, 1, bd, NULL);
    char *k0 = init(b, str(b, "k0_%d", i), 7, 1, one, idx0);
    char *k1 = init(b, str(b, "k1_%d", i), 7, 1, one, idx1);
    char *kt = init(b, str(b, "kt_%d", i), 7, 1, one, tail);
    char *mm = str(b, "mm%d", i), *ad = str(b, "add%d", i), *re = str(b, "relu%d", i);
    char *res = str(b, "res%d", i), *ln = str(b, "ln%d", i), *sh = str(b, "shape%d", i);
    char *gb = str(b, "gb%d", i), *gs = str(b, "gs%d", i), *cc = str(b, "cat%d", i);
    char *rs = str(b, "reshape%d", i), *id = str(b, "id%d", i), *mul = str(b, "mul%d", i);
    node(b, "MatMul", 2, (char *[]){x, w}, mm);
    node(b, "Add", 2, (char *[]){mm, bias}, ad);
    node(b, "Relu", 1, (char *[]){ad}, re);
    node(b, "Add", 2, (char *[]){re, x}, res);
    attr_int(node(b, "LayerNormalization", 2, (char *[]){res, g}, ln), "axis", -1);
    node(b, "Shape", 1, (char *[]){ln}, sh);
    attr_int(node(b, "Gather", 2, (char *[]){sh, k0}, gb), "axis", 0);
    attr_int(node(b, "Gather", 2, (char *[]){sh, k1}, gs), "axis", 0);
    attr_int(node(b, "Concat", 3, (char *[]){gb, gs, kt}, cc), "axis", 0);
    node(b, "Reshape", 2, (char *[]){ln, cc}, rs);
    node(b, "Identity", 1, (char *[]){rs}, id);
    node(b, "Mul", 2, (char *[]){id, g}, mul);
    return mul;
}

static uint8_t *build_model(int blocks, size_t *size) {
    builder b = {0};
    char *x = "x";
    for (int i = 0; i < blocks; i++) x = block(&b, i, x);
    Onnx__TensorShapeProto__Dimension d0 = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT, d1 = d0, d2 = d0;
    d0.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    d0.dim_param = "batch";
    d1.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    d1.dim_param = "seq";
    d2.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d2.dim_value = 256;
    Onnx__TensorShapeProto__Dimension *dims[] = {&d0, &d1, &d2};
    Onnx__TensorShapeProto shape = ONNX__TENSOR_SHAPE_PROTO__INIT;
    shape.n_dim = 3;
    shape.dim = dims;
    Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
    tt.has_elem_type = 1;
    tt.elem_type = 1;
    tt.shape = &shape;
    Onnx__TypeProto type = ONNX__TYPE_PROTO__INIT;
    type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type.tensor_type = &tt;
    Onnx__ValueInfoProto in = ONNX__VALUE_INFO_PROTO__INIT, out = ONNX__VALUE_INFO_PROTO__INIT;
    in.name = "x";
    in.type = &type;
    out.name = x;
    Onnx__ValueInfoProto *ins[] = {&in}, *outs[] = {&out};
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    graph.name = "bench";
    graph.n_node = b.n_nodes;
    graph.node = b.nodes;
    graph.n_initializer = b.n_inits;
    graph.initializer = b.inits;
    graph.n_input = 1;
    graph.input = ins;
    graph.n_output = 1;
    graph.output = outs;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets[] = {&opset};
    opset.domain = "";
    opset.has_version = 1;
    opset.version = 17;
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    model.has_ir_version = 1;
    model.ir_version = 8;
    model.n_opset_import = 1;
    model.opset_import = opsets;
    model.graph = &graph;
    *size = onnx__model_proto__get_packed_size(&model);
    uint8_t *buf = malloc(*size);
    onnx__model_proto__pack(&model, buf);
    for (size_t i = 0; i < b.n_nodes; i++) {
        free(b.nodes[i]->input);
        free(b.nodes[i]->output);
        if (b.nodes[i]->attribute) free(b.nodes[i]->attribute[0]);
        free(b.nodes[i]->attribute);
        free(b.nodes[i]);
    }
    for (size_t i = 0; i < b.n_inits; i++) {
        free(b.inits[i]->dims);
        free(b.inits[i]->int64_data);
        free(b.inits[i]);
    }
    for (size_t i = 0; i < b.n_strings; i++) free(b.strings[i]);
    free(b.nodes);
    free(b.inits);
    free(b.strings);
    return buf;
}

static int time_graph(const char *label, est_graph *g, double load_ms) {
    est_binding seq = {"seq", 128};
    est_options opt;
    est_options_init(&opt);
    opt.batch = 32;
    opt.dims = &seq;
    opt.n_dims = est_graph_input_count(g) && strstr(label, "synthetic") ? 1 : 0;
    est_error err;
    est_report *r = NULL;
    double t0 = now_ms();
    if (est_estimate(g, &opt, &r, &err) != EST_OK) {
        fprintf(stderr, "%s: %s\n", label, err.message);
        return 1;
    }
    double est_ms = now_ms() - t0;
    est_report_free(r);
    int reps = 20;
    t0 = now_ms();
    for (int i = 0; i < reps; i++) {
        opt.batch = 1 + i;
        if (est_estimate(g, &opt, &r, &err) != EST_OK) return 1;
        est_report_free(r);
    }
    double re_ms = (now_ms() - t0) / reps;
    printf("%-40s %7zu nodes  load %8.2f ms  estimate %8.2f ms  re-estimate %8.2f ms\n", label,
           est_graph_node_count(g), load_ms, est_ms, re_ms);
    return 0;
}

/* Mean milliseconds of one estimate of an already loaded model (its first
 * estimate, which makes the graph's plan, is not counted). */
static int reestimate(int n, const char *path, bool skip_reserved) {
    est_error err;
    est_graph *g = NULL;
    if (n < 1 || est_load_file(path, &g, &err) != EST_OK) {
        fprintf(stderr, "%s: %s\n", path, n < 1 ? "N must be positive" : err.message);
        return 1;
    }
    est_options opt;
    est_options_init(&opt);
    opt.batch = 1;
    opt.skip_reserved = skip_reserved;
    est_report *r = NULL;
    int rc = est_estimate(g, &opt, &r, &err) != EST_OK;
    est_report_free(r);
    double t0 = now_ms();
    for (int i = 0; i < n && !rc; i++) {
        opt.batch = 1 + i;
        rc = est_estimate(g, &opt, &r, &err) != EST_OK;
        est_report_free(r);
    }
    double ms = (now_ms() - t0) / n;
    if (rc) fprintf(stderr, "%s: %s\n", path, err.message);
    else printf("reestimate_ms %.4f\n", ms);
    est_graph_free(g);
    return rc;
}

/* Mean milliseconds of one est_load_file of PATH. */
static int load_only(int n, const char *path) {
    est_error err;
    double t0 = now_ms();
    for (int i = 0; i < n; i++) {
        est_graph *g = NULL;
        if (est_load_file(path, &g, &err) != EST_OK) {
            fprintf(stderr, "%s: %s\n", path, err.message);
            return 1;
        }
        est_graph_free(g);
    }
    printf("load_ms %.4f\n", (now_ms() - t0) / (n > 0 ? n : 1));
    return 0;
}

static int write_model(int blocks, const char *path) {
    size_t size;
    uint8_t *buf = build_model(blocks, &size);
    FILE *f = buf ? fopen(path, "wb") : NULL;
    int rc = !f || fwrite(buf, 1, size, f) != size;
    if (f) rc |= fclose(f) != 0;
    free(buf);
    if (rc) fprintf(stderr, "cannot write %s\n", path);
    return rc;
}

int main(int argc, char **argv) {
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "--reestimate") == 0)
        return reestimate(atoi(argv[2]), argv[3], argc == 5 && strcmp(argv[4], "skip-reserved") == 0);
    if (argc == 4 && strcmp(argv[1], "--load") == 0) return load_only(atoi(argv[2]), argv[3]);
    if (argc == 4 && strcmp(argv[1], "--write") == 0) return write_model(atoi(argv[2]), argv[3]);
    int blocks = argc > 1 ? atoi(argv[1]) : 500;
    if (blocks <= 0) blocks = 500;
    size_t size;
    uint8_t *buf = build_model(blocks, &size);
    est_error err;
    est_graph *g = NULL;
    double t0 = now_ms();
    if (est_load_onnx_buffer(buf, size, "synthetic.onnx", &g, &err) != EST_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    double load_ms = now_ms() - t0;
    free(buf);
    char label[64];
    snprintf(label, sizeof label, "synthetic (%d blocks)", blocks);
    int rc = time_graph(label, g, load_ms);
    est_graph_free(g);
    for (int i = 2; i < argc; i++) {
        t0 = now_ms();
        if (est_load_file(argv[i], &g, &err) != EST_OK) {
            fprintf(stderr, "%s\n", err.message);
            rc = 1;
            continue;
        }
        load_ms = now_ms() - t0;
        rc |= time_graph(argv[i], g, load_ms);
        est_graph_free(g);
    }
    return rc;
}
