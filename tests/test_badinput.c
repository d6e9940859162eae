/*
 * test_badinput: hostile and broken models give a clear error (code, file,
 * node, reason), never a crash or a hang.
 *
 * Broken ONNX models are built here with the protobuf-c API, so every case is
 * exactly the defect it names.
 *
 * usage: test_badinput MODELS_DIR TMP_DIR
 */
#include <string.h>
#include <unistd.h>

#include "estimate.h"
#include "onnx.pb-c.h"
#include "test_util.h"

/* ---- a tiny ModelProto builder -------------------------------------------- */

#define MAXN 8

typedef struct mini_model {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    Onnx__NodeProto nodes[MAXN], *node_ptrs[MAXN];
    char *node_in[MAXN][3], *node_out[MAXN][2];
    Onnx__AttributeProto attrs[MAXN], *attr_ptrs[MAXN][1];
    Onnx__ValueInfoProto input, output, *input_ptrs[1], *output_ptrs[1];
    Onnx__TypeProto in_type, out_type;
    Onnx__TypeProto__Tensor in_tensor, out_tensor;
    Onnx__TensorShapeProto in_shape;
    Onnx__TensorShapeProto__Dimension dims[4], *dim_ptrs[4];
} mini_model;

/* A graph "x" -> nodes -> "y"; x is float32 with the given dims (a dim of
 * 0 means the symbolic "batch"). */
static void mini_init(mini_model *m, const int64_t *dims, int rank) {
    memset(m, 0, sizeof *m);
    onnx__model_proto__init(&m->model);
    onnx__graph_proto__init(&m->graph);
    onnx__operator_set_id_proto__init(&m->opset);
    m->opset.domain = "";
    m->opset.has_version = 1;
    m->opset.version = 17;
    m->opsets[0] = &m->opset;
    m->model.has_ir_version = 1;
    m->model.ir_version = 8;
    m->model.n_opset_import = 1;
    m->model.opset_import = m->opsets;
    m->model.graph = &m->graph;
    m->graph.name = "mini";
    onnx__value_info_proto__init(&m->input);
    onnx__type_proto__init(&m->in_type);
    onnx__type_proto__tensor__init(&m->in_tensor);
    onnx__tensor_shape_proto__init(&m->in_shape);
    m->input.name = "x";
    m->input.type = &m->in_type;
    m->in_type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    m->in_type.tensor_type = &m->in_tensor;
    m->in_tensor.has_elem_type = 1;
    m->in_tensor.elem_type = 1;
    m->in_tensor.shape = &m->in_shape;
    for (int d = 0; d < rank; d++) {
        onnx__tensor_shape_proto__dimension__init(&m->dims[d]);
        if (dims[d] == 0) {
            m->dims[d].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            m->dims[d].dim_param = "batch";
        } else {
            m->dims[d].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            m->dims[d].dim_value = dims[d];
        }
        m->dim_ptrs[d] = &m->dims[d];
    }
    m->in_shape.n_dim = (size_t)rank;
    m->in_shape.dim = m->dim_ptrs;
    m->input_ptrs[0] = &m->input;
    m->graph.n_input = 1;
    m->graph.input = m->input_ptrs;
    onnx__value_info_proto__init(&m->output);
    m->output.name = "y";
    m->output_ptrs[0] = &m->output;
    m->graph.n_output = 1;
    m->graph.output = m->output_ptrs;
    m->graph.node = m->node_ptrs;
}

static Onnx__NodeProto *mini_node(mini_model *m, const char *name, const char *op, const char *in0,
                                  const char *in1, const char *out) {
    size_t i = m->graph.n_node++;
    Onnx__NodeProto *n = &m->nodes[i];
    onnx__node_proto__init(n);
    n->name = (char *)name;
    n->op_type = (char *)op;
    m->node_in[i][0] = (char *)in0;
    m->node_in[i][1] = (char *)in1;
    n->n_input = in1 ? 2 : 1;
    n->input = m->node_in[i];
    m->node_out[i][0] = (char *)out;
    n->n_output = 1;
    n->output = m->node_out[i];
    m->node_ptrs[i] = n;
    return n;
}

static void mini_attr_int(mini_model *m, Onnx__NodeProto *n, const char *name, int64_t v) {
    size_t i = (size_t)(n - m->nodes);
    Onnx__AttributeProto *a = &m->attrs[i];
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
    m->attr_ptrs[i][0] = a;
    n->n_attribute = 1;
    n->attribute = m->attr_ptrs[i];
}

/* Packs the model, loads it from memory as "NAME.onnx", estimates at batch 2. */
static est_status mini_run(mini_model *m, const char *name, est_error *err) {
    size_t size = onnx__model_proto__get_packed_size(&m->model);
    uint8_t *buf = malloc(size ? size : 1);
    onnx__model_proto__pack(&m->model, buf);
    char label[256];
    snprintf(label, sizeof label, "%s.onnx", name);
    est_graph *g = NULL;
    est_status st = est_load_onnx_buffer(buf, size, label, &g, err);
    free(buf);
    if (st != EST_OK) return st;
    est_options opt;
    est_options_init(&opt);
    opt.batch = 2;
    est_report *r = NULL;
    st = est_estimate(g, &opt, &r, err);
    est_report_free(r);
    est_graph_free(g);
    return st;
}

static void expect(est_status got, est_status want, const est_error *err, const char *must1, const char *must2,
                   const char *what) {
    CHECK(got == want, "%s: got %s, want %s (%s)", what, est_status_name(got), est_status_name(want),
          got ? err->message : "no error");
    if (got == EST_OK) return;
    CHECK(!must1 || strstr(err->message, must1), "%s: message lacks '%s': %s", what, must1, err->message);
    CHECK(!must2 || strstr(err->message, must2), "%s: message lacks '%s': %s", what, must2, err->message);
}

/* ---- the cases ---------------------------------------------------------- */

static const int64_t nchw[] = {0, 3, 8, 8};

static void graph_defects(void) {
    mini_model m;
    est_error err;

    mini_init(&m, nchw, 4);
    mini_node(&m, "ok", "Relu", "x", NULL, "y");
    expect(mini_run(&m, "valid", &err), EST_OK, &err, NULL, NULL, "a valid graph");

    mini_init(&m, nchw, 4);
    mini_node(&m, "a", "Relu", "b_out", NULL, "a_out");
    mini_node(&m, "b", "Relu", "a_out", NULL, "b_out");
    mini_node(&m, "c", "Relu", "a_out", NULL, "y");
    expect(mini_run(&m, "cycle", &err), EST_EGRAPH, &err, "cycle.onnx", "cycle", "a cycle");

    mini_init(&m, nchw, 4);
    mini_node(&m, "orphan_user", "Relu", "nowhere", NULL, "y");
    expect(mini_run(&m, "orphan", &err), EST_EGRAPH, &err, "orphan_user", "'nowhere'", "an unproduced input");

    mini_init(&m, nchw, 4);
    mini_node(&m, "first", "Relu", "x", NULL, "y");
    mini_node(&m, "second", "Relu", "x", NULL, "y");
    expect(mini_run(&m, "dup", &err), EST_EGRAPH, &err, "second", "already produced", "a duplicate output");

    mini_init(&m, nchw, 4);
    mini_node(&m, "mystery", "FrobnicateV2", "x", NULL, "y");
    m.nodes[0].domain = "com.example";
    expect(mini_run(&m, "unknown", &err), EST_EUNSUPPORTED, &err, "FrobnicateV2", "com.example", "an unknown op");

    mini_init(&m, nchw, 4);
    Onnx__NodeProto *n = mini_node(&m, "sm", "Softmax", "x", NULL, "y");
    mini_attr_int(&m, n, "axis", 0);
    m.attrs[0].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    expect(mini_run(&m, "attr", &err), EST_EATTR, &err, "'sm'", "axis", "a wrong attribute type");

    const int64_t zero[] = {0, 3, 0, 8};
    mini_init(&m, zero, 4);
    m.dims[2].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    m.dims[2].dim_value = 0;
    mini_node(&m, "r", "Relu", "x", NULL, "y");
    expect(mini_run(&m, "zero", &err), EST_ESHAPE, &err, "'x'", "positive", "a zero dim");

    mini_init(&m, nchw, 4);
    m.dims[1].dim_value = -3;
    mini_node(&m, "r", "Relu", "x", NULL, "y");
    expect(mini_run(&m, "negative", &err), EST_ESHAPE, &err, "'x'", "-3", "a negative dim");

    const int64_t huge[] = {0, (int64_t)1 << 40, (int64_t)1 << 40, (int64_t)1 << 40};
    mini_init(&m, huge, 4);
    mini_node(&m, "r", "Relu", "x", NULL, "y");
    expect(mini_run(&m, "overflow", &err), EST_EOVERFLOW, &err, "'x'", "overflow", "dims overflowing 64 bits");

    mini_init(&m, nchw, 4);
    m.dims[2].dim_value = (int64_t)1 << 50;
    mini_node(&m, "r", "Relu", "x", NULL, "y");
    expect(mini_run(&m, "absurd", &err), EST_ELIMIT, &err, "'x'", "limit", "an absurd dim");

    mini_init(&m, nchw, 4);
    m.dims[1].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    m.dims[1].dim_param = "channels";
    mini_node(&m, "r", "Relu", "x", NULL, "y");
    expect(mini_run(&m, "unbound", &err), EST_EUNBOUND, &err, "'channels'", "--dim", "an unbound symbolic dim");

    mini_init(&m, nchw, 4);
    m.model.n_opset_import = 0;
    mini_node(&m, "r", "Relu", "x", NULL, "y");
    expect(mini_run(&m, "noopset", &err), EST_EUNSUPPORTED, &err, "noopset.onnx", "opset", "no opset import");

    mini_init(&m, nchw, 4);
    m.model.graph = NULL;
    expect(mini_run(&m, "nograph", &err), EST_EPARSE, &err, "nograph.onnx", "no graph", "a model without graph");
}

static void file_defects(const char *models_dir, const char *tmp_dir) {
    est_error err;
    est_graph *g = NULL;
    char path[4096];

    snprintf(path, sizeof path, "%s/does-not-exist.onnx", tmp_dir);
    expect(est_load_file(path, &g, &err), EST_EIO, &err, "does-not-exist.onnx", "cannot open", "a missing file");

    snprintf(path, sizeof path, "%s/empty.onnx", tmp_dir);
    FILE *f = fopen(path, "wb");
    if (f) fclose(f);
    expect(est_load_file(path, &g, &err), EST_EPARSE, &err, "empty.onnx", "empty", "an empty file");

    snprintf(path, sizeof path, "%s/resnet18.onnx", models_dir);
    size_t size = 0;
    char *bytes = test_read_file(path, &size);
    CHECK(bytes && size > 1000, "cannot read %s", path);
    if (!bytes) return;
    /* Every truncation of a real model fails cleanly. */
    int accepted = 0;
    for (size_t cut = 0; cut < size; cut += (cut < 256 ? 1 : 97)) {
        est_status st = est_load_onnx_buffer(bytes, cut, "truncated.onnx", &g, &err);
        if (st == EST_OK) {
            accepted++;
            est_graph_free(g);
        } else {
            CHECK(strstr(err.message, "truncated.onnx") != NULL, "message lacks the file name: %s", err.message);
        }
    }
    CHECK(accepted == 0, "%d truncated copies of resnet18 were accepted", accepted);
    /* Flipped bytes: any outcome but a crash; errors name the file. */
    unsigned seed = 12345;
    for (int trial = 0; trial < 2000; trial++) {
        char *copy = malloc(size);
        memcpy(copy, bytes, size);
        for (int k = 0; k < 4; k++) {
            seed = seed * 1103515245u + 12345u;
            copy[(seed >> 8) % size] ^= (char)(1u << (seed % 8));
        }
        est_status st = est_load_onnx_buffer(copy, size, "corrupt.onnx", &g, &err);
        if (st == EST_OK) {
            est_options opt;
            est_options_init(&opt);
            opt.batch = 3;
            est_report *r = NULL;
            if (est_estimate(g, &opt, &r, &err) != EST_OK)
                CHECK(strstr(err.message, "corrupt.onnx") != NULL, "estimate error lacks the file: %s", err.message);
            est_report_free(r);
            est_graph_free(g);
        } else {
            CHECK(strstr(err.message, "corrupt.onnx") != NULL, "load error lacks the file: %s", err.message);
        }
        free(copy);
    }
    free(bytes);

    const char garbage[] = "\x0a\xff\xff\xff\xff\xff\xff\xff\xff\x7f garbage";
    expect(est_load_onnx_buffer(garbage, sizeof garbage, "garbage.onnx", &g, &err), EST_EPARSE, &err,
           "garbage.onnx", "not a valid ONNX", "random bytes");

    const char *bad_json = "{\"format\": \"memest-graph\", \"nodes\": [ }";
    expect(est_load_json_buffer(bad_json, strlen(bad_json), "bad.json", &g, &err), EST_EPARSE, &err, "bad.json",
           NULL, "invalid JSON");
}

static void option_defects(const char *models_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/resnet18.onnx", models_dir);
    est_error err;
    est_graph *g = NULL;
    if (est_load_file(path, &g, &err) != EST_OK) return;
    est_options opt;
    est_report *r = NULL;
    est_options_init(&opt);
    expect(est_estimate(g, &opt, &r, &err), EST_EUNBOUND, &err, "'batch'", "--batch", "no batch given");
    est_binding nope = {"sequence", 4};
    opt.dims = &nope;
    opt.n_dims = 1;
    expect(est_estimate(g, &opt, &r, &err), EST_EINVAL, &err, "'sequence'", "batch", "an unknown dim name");
    est_options_init(&opt);
    opt.batch = -4;
    expect(est_estimate(g, &opt, &r, &err), EST_EINVAL, &err, "batch", NULL, "a negative batch");
    est_graph_free(g);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODELS_DIR TMP_DIR\n", argv[0]);
        return 2;
    }
    graph_defects();
    file_defects(argv[1], argv[2]);
    option_defects(argv[1]);
    return test_result("test_badinput");
}
