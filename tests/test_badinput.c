/*
 * test_badinput: hostile and broken models give a clear error (code, file,
 * node, reason), never a crash or a hang.
 *
 * Broken ONNX models are built here with the protobuf-c API, so every case is
 * exactly the defect it names.
 *
 * usage: test_badinput MODELS_DIR TMP_DIR
 */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
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

    /* A FIFO: opening it to read would wait for a writer forever; the alarm
     * ends the test if the load blocks. */
    snprintf(path, sizeof path, "%s/fifo.onnx", tmp_dir);
    unlink(path);
    CHECK(mkfifo(path, 0600) == 0, "cannot make a FIFO: %s", strerror(errno));
    alarm(20);
    expect(est_load_file(path, &g, &err), EST_EIO, &err, "fifo.onnx", "not a regular file", "a FIFO");
    alarm(0);
    unlink(path);
    expect(est_load_file("/dev/null", &g, &err), EST_EIO, &err, "/dev/null", "not a regular file", "a device");

    /* JSON that is not an object, or starts with a byte-order mark, is read
     * as JSON, not called a broken protobuf */
    snprintf(path, sizeof path, "%s/array.json", tmp_dir);
    f = fopen(path, "wb");
    if (f) fputs("[{\"format\": \"memest-graph\"}]\n", f), fclose(f);
    est_status st = est_load_file(path, &g, &err);
    CHECK(st == EST_EPARSE && strstr(err.message, "array.json") && !strstr(err.message, "protobuf"),
          "a JSON array: %s", st ? err.message : "accepted");
    snprintf(path, sizeof path, "%s/bom.json", tmp_dir);
    f = fopen(path, "wb");
    if (f) fputs("\xEF\xBB\xBF", f), fclose(f);
    char model[4096];
    snprintf(model, sizeof model, "%s/small_cnn.json", models_dir);
    size_t json_size = 0;
    char *json = test_read_file(model, &json_size);
    f = json ? fopen(path, "ab") : NULL;
    if (f) fwrite(json, 1, json_size, f), fclose(f);
    free(json);
    st = est_load_file(path, &g, &err);
    CHECK(st == EST_OK, "a JSON graph after a UTF-8 byte-order mark: %s", st ? err.message : "");
    est_graph_free(g);
    g = NULL;

    snprintf(path, sizeof path, "%s/resnet18.onnx", models_dir);
    size_t size = 0;
    char *bytes = test_read_file(path, &size);
    CHECK(bytes && size > 1000, "cannot read %s", path);
    if (!bytes) return;
    /* Every truncation of a real model fails cleanly. */
    int accepted = 0;
    for (size_t cut = 0; cut < size; cut += (cut < 256 ? 1 : 97)) {
        st = est_load_onnx_buffer(bytes, cut, "truncated.onnx", &g, &err);
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
        st = est_load_onnx_buffer(copy, size, "corrupt.onnx", &g, &err);
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
    expect(est_estimate(g, &opt, &r, &err), EST_EINVAL, &err, "resnet18.onnx", "batch", "a negative batch");
    /* arrays counted but not given: refused, not read */
    est_options_init(&opt);
    opt.batch = 2;
    opt.n_dims = 3;
    expect(est_estimate(g, &opt, &r, &err), EST_EINVAL, &err, "est_options.dims is NULL", NULL, "dims NULL, n_dims 3");
    est_options_init(&opt);
    opt.batch = 2;
    opt.n_values = 1;
    expect(est_estimate(g, &opt, &r, &err), EST_EINVAL, &err, "est_options.values is NULL", NULL, "values NULL");
    est_options_init(&opt);
    opt.batch = 2;
    opt.params.n_frozen = 2;
    expect(est_estimate(g, &opt, &r, &err), EST_EINVAL, &err, "params.frozen", NULL, "frozen NULL");
    est_graph_free(g);
}

/* The JSON loader counts the nodes before cJSON builds its tree: a file
 * with one node over the cap is refused as such even where its text is
 * broken further on (the parse would have read it all first). */
static void json_node_cap(void) {
    enum { CAP = 1000 };
    size_t cap = 64 + (CAP + 1) * 64;
    char *text = malloc(cap);
    size_t n = (size_t)snprintf(text, cap, "{\"format\": \"memest-graph\", \"version\": 1, \"nodes\": [");
    for (int i = 0; i <= CAP; i++)
        n += (size_t)snprintf(text + n, cap - n, "%s{\"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"y%d\"]}",
                              i ? ", " : "", i);
    snprintf(text + n, cap - n, "], \"outputs\": [ BROKEN");
    est_limits lim;
    est_limits_init(&lim);
    lim.max_nodes = CAP;
    est_graph *g = NULL;
    est_error err;
    expect(est_load_json_buffer_limited(text, strlen(text), "many.json", &lim, &g, &err), EST_ELIMIT, &err,
           "many.json", "more than 1000 nodes", "one node over the JSON node cap, before parsing");
    lim.max_nodes = CAP + 1; /* within the cap: the parse finds the broken text */
    expect(est_load_json_buffer_limited(text, strlen(text), "many.json", &lim, &g, &err), EST_EPARSE, &err,
           "many.json", "invalid JSON", "the same file within the cap");
    free(text);
}

/* ---- limits ------------------------------------------------------------ */

/* Packs the model and loads it under `lim`, then estimates at batch 2. */
static est_status mini_run_limited(mini_model *m, const char *name, const est_limits *lim, est_error *err) {
    size_t size = onnx__model_proto__get_packed_size(&m->model);
    uint8_t *buf = malloc(size ? size : 1);
    onnx__model_proto__pack(&m->model, buf);
    est_graph *g = NULL;
    est_status st = est_load_onnx_buffer_limited(buf, size, name, lim, &g, err);
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

/* Appends a varint. */
static size_t put_varint(uint8_t *p, uint64_t v) {
    size_t n = 0;
    do {
        p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

/* Builds, inside out, a model whose graph nests `levels` subgraphs:
 * graph { node { attribute { g: graph { node { ... } } } } }. The caller frees. */
static uint8_t *nested_model(long levels, size_t *size) {
    size_t cap = (size_t)levels * 3 * 12 + 64, start = cap;
    uint8_t *buf = malloc(cap), head[16];
    /* tags: GraphProto.node = 1, NodeProto.attribute = 5, AttributeProto.g = 6 */
    static const uint8_t tags[3] = {0x32, 0x2a, 0x0a};
    for (long l = 0; l < levels; l++)
        for (int k = 0; k < 3; k++) {
            size_t len = cap - start, h = 0;
            head[h++] = tags[k];
            h += put_varint(head + h, len);
            start -= h;
            memcpy(buf + start, head, h);
        }
    /* ModelProto: ir_version 8, opset_import {version 17}, graph */
    size_t len = cap - start, h = 0;
    uint8_t model_head[32] = {0x08, 0x08, 0x42, 0x02, 0x10, 0x11, 0x3a};
    h = 7 + put_varint(model_head + 7, len);
    start -= h;
    memcpy(buf + start, model_head, h);
    memmove(buf, buf + start, cap - start);
    *size = cap - start;
    return buf;
}

/* m's bytes with its graph as two graph fields, a then b (protobuf merges
 * repeated message fields), and `tail` appended to b's bytes. The caller
 * frees. */
static uint8_t *split_graph(mini_model *m, Onnx__GraphProto *a, Onnx__GraphProto *b, const uint8_t *tail,
                            size_t tail_n, size_t *size) {
    m->model.graph = NULL;
    size_t head = onnx__model_proto__get_packed_size(&m->model), na = onnx__graph_proto__get_packed_size(a),
           nb = onnx__graph_proto__get_packed_size(b);
    uint8_t *buf = malloc(head + na + nb + tail_n + 32);
    size_t n = onnx__model_proto__pack(&m->model, buf);
    buf[n++] = 0x3a; /* ModelProto.graph = 7, length-delimited */
    n += put_varint(buf + n, na);
    n += onnx__graph_proto__pack(a, buf + n);
    buf[n++] = 0x3a;
    n += put_varint(buf + n, nb + tail_n);
    n += onnx__graph_proto__pack(b, buf + n);
    memcpy(buf + n, tail, tail_n);
    m->model.graph = &m->graph;
    *size = n + tail_n;
    return buf;
}

/* The loader unpacks one node at a time (onnx/stream.c), yet answers as an
 * unpack of the whole file: repeated graph fields make one graph, and a
 * corrupt node anywhere makes the file invalid, even after a node that the
 * graph refuses. */
static void streamed_defects(void) {
    /* GraphProto.node = 1, holding a NodeProto whose name (3) claims 5 bytes of 1 */
    static const uint8_t corrupt_node[] = {0x0a, 0x03, 0x1a, 0x05, 'a'};
    for (int k = 0; k < 4; k++) {
        mini_model m;
        mini_init(&m, nchw, 4);
        mini_node(&m, "r1", k >= 2 ? NULL : "Relu", "x", NULL, "h");
        mini_node(&m, "r2", "Relu", "h", NULL, "y");
        Onnx__GraphProto a, b;
        onnx__graph_proto__init(&a);
        onnx__graph_proto__init(&b);
        a.n_input = 1, a.input = m.graph.input, a.n_node = 1, a.node = m.graph.node;
        b.name = "mini", b.n_node = 1, b.node = m.graph.node + 1, b.n_output = 1, b.output = m.graph.output;
        size_t size;
        uint8_t *buf = split_graph(&m, &a, &b, corrupt_node, k % 2 ? sizeof corrupt_node : 0, &size);
        est_graph *g = NULL;
        est_error err;
        est_status st = est_load_onnx_buffer(buf, size, "split.onnx", &g, &err);
        if (k == 0) {
            expect(st, EST_OK, &err, NULL, NULL, "a graph in two graph fields");
            CHECK(est_graph_node_count(g) == 2, "a graph in two graph fields: %zu nodes, want 2", est_graph_node_count(g));
        } else if (k == 2) {
            expect(st, EST_EPARSE, &err, "split.onnx", "node 'r1' has no op_type", "a node without op_type");
        } else {
            expect(st, EST_EPARSE, &err, "split.onnx", "not a valid ONNX protobuf",
                   k == 1 ? "a corrupt node" : "a corrupt node after a node without op_type");
        }
        est_graph_free(g);
        free(buf);
    }
}

static void limit_defects(const char *models_dir, const char *tmp_dir) {
    mini_model m;
    est_error err;
    est_limits lim;

    est_limits_init(&lim);
    CHECK(lim.max_nodes > 1000 && lim.max_rank == 12 && lim.max_dim_value == (int64_t)1 << 40 && lim.max_nesting == 64,
          "unexpected defaults");

    mini_init(&m, nchw, 4);
    mini_node(&m, "a", "Relu", "x", NULL, "h1");
    mini_node(&m, "b", "Relu", "h1", NULL, "h2");
    mini_node(&m, "c", "Relu", "h2", NULL, "y");
    expect(mini_run_limited(&m, "three.onnx", NULL, &err), EST_OK, &err, NULL, NULL, "3 nodes, default limits");
    est_limits_init(&lim);
    lim.max_nodes = 2;
    expect(mini_run_limited(&m, "three.onnx", &lim, &err), EST_ELIMIT, &err, "three.onnx", "max_nodes", "max_nodes");
    est_limits_init(&lim);
    lim.max_tensors = 3;
    expect(mini_run_limited(&m, "three.onnx", &lim, &err), EST_ELIMIT, &err, "three.onnx", "max_tensors", "max_tensors");
    est_limits_init(&lim);
    lim.max_work = 2;
    expect(mini_run_limited(&m, "three.onnx", &lim, &err), EST_ELIMIT, &err, "'c'", "max_work", "max_work");
    est_limits_init(&lim);
    lim.max_rank = 3;
    expect(mini_run_limited(&m, "three.onnx", &lim, &err), EST_ELIMIT, &err, "'x'", "max_rank", "max_rank");
    est_limits_init(&lim);
    lim.max_dim_value = 4;
    expect(mini_run_limited(&m, "three.onnx", &lim, &err), EST_ELIMIT, &err, "'x'", "max_dim_value", "max_dim_value");
    est_limits_init(&lim);
    lim.max_symbols = 1;
    m.dims[1].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    m.dims[1].dim_param = "channels";
    expect(mini_run_limited(&m, "three.onnx", &lim, &err), EST_ELIMIT, &err, "'x'", "max_symbols", "max_symbols");

    mini_init(&m, nchw, 4);
    Onnx__NodeProto *n = mini_node(&m, "sm", "Softmax", "x", NULL, "y");
    mini_attr_int(&m, n, "axis", 1);
    int64_t many[40] = {0};
    m.attrs[0].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    m.attrs[0].n_ints = 40;
    m.attrs[0].ints = many;
    est_limits_init(&lim);
    lim.max_attr_elements = 32;
    expect(mini_run_limited(&m, "attr.onnx", &lim, &err), EST_ELIMIT, &err, "'sm'", "max_attr_elements",
           "max_attr_elements");

    /* Subgraphs nested 100,000 deep: protobuf-c would recurse once per
     * message and overflow the stack; the loader refuses first. */
    size_t size;
    uint8_t *deep = nested_model(100000, &size);
    est_graph *g = NULL;
    expect(est_load_onnx_buffer(deep, size, "deep.onnx", &g, &err), EST_ELIMIT, &err, "deep.onnx", "nested",
           "subgraphs nested 100000 deep");
    CHECK(strstr(err.message, "node 0") != NULL, "the nesting error names no node: %s", err.message);
    free(deep);
    deep = nested_model(10, &size); /* 32 messages deep: within the default */
    est_status st = est_load_onnx_buffer(deep, size, "shallow.onnx", &g, &err);
    CHECK(st != EST_ELIMIT, "10 nested subgraphs hit a limit: %s", err.message);
    est_graph_free(g);
    g = NULL;
    free(deep);

    /* JSON: nesting, nodes, attributes. */
    char doc[8192];
    char deep_comment[400] = "";
    for (int i = 0; i < 70; i++) strcat(deep_comment, "[");
    for (int i = 0; i < 70; i++) strcat(deep_comment, "]");
    snprintf(doc, sizeof doc,
             "{\"format\": \"memest-graph\", \"version\": 1, \"opset_import\": {\"\": 17}, \"comment\": %s,"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 4]}],"
             " \"nodes\": [{\"name\": \"r1\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"h\"]},"
             " {\"name\": \"r2\", \"op\": \"Relu\", \"inputs\": [\"h\"], \"outputs\": [\"y\"],"
             " \"attributes\": {\"junk\": {\"ints\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}}}],"
             " \"outputs\": [\"y\"]}", deep_comment);
    expect(est_load_json_buffer(doc, strlen(doc), "deep.json", &g, &err), EST_ELIMIT, &err, "deep.json",
           "max_nesting", "JSON nested 72 deep");
    snprintf(doc, sizeof doc,
             "{\"format\": \"memest-graph\", \"version\": 1, \"opset_import\": {\"\": 17},"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 4]}],"
             " \"nodes\": [{\"name\": \"r1\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"h\"]},"
             " {\"name\": \"r2\", \"op\": \"Relu\", \"inputs\": [\"h\"], \"outputs\": [\"y\"],"
             " \"attributes\": {\"junk\": {\"ints\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}}}],"
             " \"outputs\": [\"y\"]}");
    st = est_load_json_buffer(doc, strlen(doc), "ok.json", &g, &err);
    CHECK(st == EST_OK, "the JSON base document: %s", err.message);
    est_graph_free(g);
    g = NULL;
    est_limits_init(&lim);
    lim.max_nodes = 1;
    expect(est_load_json_buffer_limited(doc, strlen(doc), "nodes.json", &lim, &g, &err), EST_ELIMIT, &err,
           "nodes.json", "max_nodes", "JSON max_nodes");
    est_limits_init(&lim);
    lim.max_attr_elements = 8;
    expect(est_load_json_buffer_limited(doc, strlen(doc), "attr.json", &lim, &g, &err), EST_ELIMIT, &err,
           "node 1 'r2'", "max_attr_elements", "JSON max_attr_elements");
    est_limits_init(&lim);
    lim.max_rank = 1;
    expect(est_load_json_buffer_limited(doc, strlen(doc), "rank.json", &lim, &g, &err), EST_ELIMIT, &err,
           "rank.json", "max_rank", "JSON max_rank");

    /* File size. */
    char path[4096];
    snprintf(path, sizeof path, "%s/lenet.onnx", models_dir);
    est_limits_init(&lim);
    lim.max_file_bytes = 1000;
    expect(est_load_file_limited(path, &lim, &g, &err), EST_ELIMIT, &err, "lenet.onnx", "max_file_bytes",
           "max_file_bytes");
    st = est_load_file_limited(path, NULL, &g, &err);
    CHECK(st == EST_OK, "lenet.onnx with NULL limits: %s", err.message);
    est_graph_free(g);
    (void)tmp_dir;
}

/* ---- external data ------------------------------------------------------ */

/* A model "x" + "w" -> "y" whose initializer w keeps its bytes in an external
 * file at `location`, written to DIR/NAME; returns the status of loading it
 * from there. */
static est_status load_external(const char *dir, const char *name, const char *location, est_error *err) {
    mini_model m;
    mini_init(&m, nchw, 4);
    mini_node(&m, "add", "Add", "x", "w", "y");
    Onnx__TensorProto w, *wp = &w;
    onnx__tensor_proto__init(&w);
    int64_t dims[1] = {8};
    w.name = "w";
    w.has_data_type = 1;
    w.data_type = 1;
    w.n_dims = 1;
    w.dims = dims;
    w.has_data_location = 1;
    w.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    Onnx__StringStringEntryProto loc, *locp = &loc;
    onnx__string_string_entry_proto__init(&loc);
    loc.key = "location";
    loc.value = (char *)location;
    w.n_external_data = 1;
    w.external_data = &locp;
    m.graph.n_initializer = 1;
    m.graph.initializer = &wp;
    size_t size = onnx__model_proto__get_packed_size(&m.model);
    uint8_t *buf = malloc(size);
    onnx__model_proto__pack(&m.model, buf);
    /* a \x01 in the location becomes a NUL byte in the file, which no C
     * string could have carried into the packing */
    uint8_t *at = memmem(buf, size, location, strlen(location));
    for (size_t k = 0; at && k < strlen(location); k++)
        if (at[k] == 1) at[k] = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(buf, 1, size, f);
        fclose(f);
    }
    free(buf);
    est_graph *g = NULL;
    est_status st = est_load_file(path, &g, err);
    est_graph_free(g);
    return st;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void external_data_defects(const char *tmp_dir) {
    char dir[2048], path[4096], outside[4096];
    snprintf(dir, sizeof dir, "%.2000s/extdata", tmp_dir);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/weights.bin", dir);
    write_file(path, "0123456789abcdef0123456789abcdef");
    snprintf(outside, sizeof outside, "%s/outside-secret.bin", tmp_dir);
    write_file(outside, "secret");
    snprintf(path, sizeof path, "%s/escape.bin", dir);
    unlink(path);
    /* a link with an innocent name that points out of the folder */
    CHECK(symlink("../outside-secret.bin", path) == 0, "cannot make a symlink: %s", strerror(errno));
    snprintf(path, sizeof path, "%s/sub", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/sub/inner.bin", dir);
    write_file(path, "0123456789abcdef0123456789abcdef");

    est_error err;
    expect(load_external(dir, "inside.onnx", "weights.bin", &err), EST_OK, &err, NULL, NULL, "external data inside");
    expect(load_external(dir, "sub.onnx", "sub/inner.bin", &err), EST_OK, &err, NULL, NULL,
           "external data in a subfolder");
    expect(load_external(dir, "absent.onnx", "not-there.bin", &err), EST_OK, &err, NULL, NULL,
           "external data absent");
    expect(load_external(dir, "dotdot.onnx", "../outside-secret.bin", &err), EST_EPARSE, &err, "dotdot.onnx",
           "leaves the model's folder", "external data ../");
    expect(load_external(dir, "dotdot2.onnx", "sub/../../outside-secret.bin", &err), EST_EPARSE, &err, "'w'",
           "leaves", "external data sub/../../");
    expect(load_external(dir, "absolute.onnx", "/etc/passwd", &err), EST_EPARSE, &err, "'w'", "absolute",
           "external data at an absolute path");
    expect(load_external(dir, "symlink.onnx", "escape.bin", &err), EST_EPARSE, &err, "'w'", "outside",
           "external data through a symlink out of the folder");
    expect(load_external(dir, "nul.onnx", "weights.bin\x01/../../outside-secret.bin", &err), EST_EPARSE, &err,
           "nul.onnx", "NUL byte", "external data whose location holds a NUL byte");
    expect(load_external(dir, "empty.onnx", "", &err), EST_EPARSE, &err, "'w'", "empty location",
           "external data with an empty location");
}

/* est_escape_controls: what a terminal could act on becomes \xNN, valid
 * UTF-8 text stays; error messages quote names through it. */
static void escaping(void) {
    char buf[128];
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain/name.0", "plain/name.0"},
        {"\x1b]0;title\x07", "\\x1b]0;title\\x07"},
        {"a\nmemest: forged\r", "a\\x0amemest: forged\\x0d"},
        {"del\x7f", "del\\x7f"},
        {"caf\xc3\xa9 \xe6\x97\xa5", "caf\xc3\xa9 \xe6\x97\xa5"},  /* valid UTF-8 stays */
        {"c1\xc2\x9b[2J", "c1\\xc2\\x9b[2J"},                   /* U+009B, the 8-bit CSI */
        {"bad\xff\xc3", "bad\\xff\\xc3"},                         /* not UTF-8 */
        {"long\xe0\x80\x80", "long\\xe0\\x80\\x80"},              /* an overlong form */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t need = est_escape_controls(buf, sizeof buf, cases[i].in);
        CHECK(strcmp(buf, cases[i].out) == 0 && need == strlen(cases[i].out), "escape case %zu: got '%s'", i, buf);
    }
    CHECK(est_escape_controls(buf, 4, "\x1b\x1b") == 8 && strcmp(buf, "\\x1") == 0, "a short buffer: '%s'", buf);
    mini_model m;
    est_error err;
    mini_init(&m, nchw, 4);
    mini_node(&m, "evil\x1b[2J\nmemest: forged", "Relu", "nowhere", NULL, "y");
    expect(mini_run(&m, "escape", &err), EST_EGRAPH, &err, "evil\\x1b[2J\\x0amemest: forged", NULL,
           "a node name with controls, quoted escaped");
    CHECK(!strchr(err.message, '\x1b') && !strchr(err.message, '\n'), "the message carries controls raw");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODELS_DIR TMP_DIR\n", argv[0]);
        return 2;
    }
    graph_defects();
    escaping();
    file_defects(argv[1], argv[2]);
    option_defects(argv[1]);
    json_node_cap();
    limit_defects(argv[1], argv[2]);
    streamed_defects();
    external_data_defects(argv[2]);
    return test_result("test_badinput");
}
