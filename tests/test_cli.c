/*
 * test_cli: the memest command line: exit codes, --help, ops, the JSON, CSV
 * and table reports, convert, and what it does with hostile names, odd
 * options and outputs that cannot be written. The training options'
 * reports are test_cli_training's; --input-shape and an export's dtype
 * test_cli_shapes'.
 *
 * usage: test_cli MEMEST MODELS_DIR TMP_DIR
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>

#include <cJSON.h>

#include "cli_json.h"

static void exit_codes(void) {
    char args[4096];
    expect_exit("--help", 0, "--batch N");
    expect_exit("--help", 0, "default: table");
    expect_exit("--help", 0, "--host-us F,FP,B,BP,OP");
    expect_exit("--version", 0, "memest ");
    expect_exit("", 2, "no model given");
    expect_exit("--bogus", 2, "unknown option '--bogus'");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch abc", models);
    expect_exit(args, 2, "--batch");
    snprintf(args, sizeof args, "%s/resnet18.onnx --dim seq", models);
    expect_exit(args, 2, "NAME=VALUE");
    snprintf(args, sizeof args, "%s/resnet18.onnx --format xml", models);
    expect_exit(args, 2, "table, json or csv");
    snprintf(args, sizeof args, "%s/no-such-model.onnx --batch 2", tmp);
    expect_exit(args, 1, "no-such-model.onnx");
    snprintf(args, sizeof args, "%s/resnet18.onnx", models);
    expect_exit(args, 1, "'batch'");
    snprintf(args, sizeof args, "%s/resnet18.onnx --dim nosuch=3 --batch 2", models);
    expect_exit(args, 1, "'nosuch'");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 32", models);
    expect_exit(args, 0, "totals");
    expect_exit("ops", 0, "Conv ");
    /* the caps of docs/robustness.md */
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 2 --max-nodes 10", models);
    expect_exit(args, 1, "max_nodes");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 2 --max-file-size=1000", models);
    expect_exit(args, 1, "max_file_bytes");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 2 --max-nodes 0", models);
    expect_exit(args, 2, "--max-nodes");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 2 --max-nodes 100000", models);
    expect_exit(args, 0, "totals");
}

/* The line of `memest ops` that starts with op (followed by a blank), or
 * NULL; *len is its length. */
static const char *ops_line(const char *out, const char *op, size_t *len) {
    size_t n = strlen(op);
    for (const char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (strncmp(line, op, n) == 0 && line[n] == ' ') {
            const char *end = strchr(line, '\n');
            *len = end ? (size_t)(end - line) : strlen(line);
            return line;
        }
    return NULL;
}

/* Whether op's row of `memest ops` holds `want` (the verify word or note). */
static bool ops_row_has(const char *out, const char *op, const char *want) {
    size_t len = 0;
    const char *line = ops_line(out, op, &len);
    if (!line) return false;
    char row[512];
    snprintf(row, sizeof row, "%.*s", (int)len, line);
    return strstr(row, want) != NULL;
}

/* `memest ops`'s verify column, from the verify module where this build has
 * one (TEST_VERIFY_BUILT; it loads without a GPU), and the line that says
 * why the column is absent otherwise. */
static void ops_verify_column(void) {
    char *out = NULL;
    int rc = run("ops", false, &out);
    CHECK(rc == 0 && out && ops_line(out, "Conv", &(size_t){0}), "memest ops: exit %d: %.300s", rc, out ? out : "");
#if TEST_VERIFY_BUILT
    CHECK(out && strstr(out, "verify   note\n"), "memest ops: no verify column: %.300s", out ? out : "");
    CHECK(out && ops_row_has(out, "Relu", " fwd+bwd"), "memest ops: Relu is not fwd+bwd");
    CHECK(out && ops_row_has(out, "Equal", " fwd      bool output: no gradient"), "memest ops: Equal is not fwd");
    CHECK(out && ops_row_has(out, "Shape", " host     shape arithmetic on the host"), "memest ops: Shape is not host");
    CHECK(out && ops_row_has(out, "QLinearMatMul", " fwd      quantized inference op"),
          "memest ops: QLinearMatMul is not fwd, quantized");
    CHECK(out && strstr(out, " operators; memest verify runs ") && strstr(out, "\nverify module: ") &&
              strstr(out, " PTX)\n"), /* the module's archs: -Dverify_archs */
          "memest ops: no summary of the verify column: %.400s", out && strstr(out, "\n\n") ? strstr(out, "\n\n") : "");
#else
    printf("test_cli: memest is built without the verify module, skipping the verify column's rows\n");
    CHECK(out && strstr(out, "no verify column: this memest was built without the CUDA verify module"),
          "memest ops: says nothing of the absent verify column: %.300s", out && strstr(out, "\n\n") ? strstr(out, "\n\n") : "");
#endif
    free(out);
    /* a module that cannot be loaded: the table, and why there is no column */
    char path[4096];
    snprintf(path, sizeof path, "%s/no-such-verify-module.so", tmp);
    setenv("MEMEST_VERIFY_MODULE", path, 1);
    rc = run("ops", false, &out);
    unsetenv("MEMEST_VERIFY_MODULE");
    CHECK(rc == 0 && out && ops_row_has(out, "Conv", "conv") && !strstr(out, "verify   note") &&
              strstr(out, "\nno verify column: "),
          "memest ops without a loadable module: exit %d: %.300s", rc, out && strstr(out, "\n\n") ? strstr(out, "\n\n") : "");
    free(out);
}

static void check_tensor_json(const cJSON *t) {
    field(t, "name", is_string, "tensor");
    field(t, "dtype", is_string, "tensor");
    const cJSON *shape = field(t, "shape", is_array, "tensor");
    const cJSON *d;
    cJSON_ArrayForEach(d, shape) CHECK(cJSON_IsNumber(d) && d->valuedouble >= 0, "shape holds a non-number");
    field(t, "bytes", is_number, "tensor");
}

static void json_report(void) {
    char args[4096], *out;
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 32 --format json", models);
    int rc = run(args, false, &out);
    CHECK(rc == 0, "json report exit %d", rc);
    cJSON *root = cJSON_Parse(out);
    CHECK(root != NULL, "--format json is not valid JSON: %.200s", out);
    free(out);
    if (!root) return;
    field(root, "model", is_string, "top level");
    const cJSON *batch = field(root, "batch", is_number, "top level");
    CHECK(batch && batch->valuedouble == 32, "batch is not 32");
    const cJSON *dims = field(root, "dims", is_object, "top level");
    const cJSON *bd = cJSON_GetObjectItem(dims, "batch");
    CHECK(bd && bd->valuedouble == 32, "dims.batch is not 32");
    const cJSON *layers = field(root, "layers", is_array, "top level");
    int n = 0;
    double params = 0;
    const cJSON *L;
    cJSON_ArrayForEach(L, layers) {
        field(L, "name", is_string, "layer");
        field(L, "op", is_string, "layer");
        const cJSON *ins = field(L, "inputs", is_array, "layer"), *outs = field(L, "outputs", is_array, "layer"), *t;
        cJSON_ArrayForEach(t, ins) check_tensor_json(t);
        cJSON_ArrayForEach(t, outs) check_tensor_json(t);
        const cJSON *pc = field(L, "param_count", is_number, "layer");
        field(L, "param_bytes", is_number, "layer");
        if (pc) params += pc->valuedouble;
        n++;
    }
    CHECK(n > 50, "only %d layers", n);
    const cJSON *totals = field(root, "totals", is_object, "top level");
    const cJSON *tp = field(totals, "param_count", is_number, "totals");
    field(totals, "param_bytes", is_number, "totals");
    CHECK(tp && tp->valuedouble == params && params == 11689512, "param totals %.0f vs layer sum %.0f", tp ? tp->valuedouble : -1, params);
    /* The first conv's output at batch 32 is 32x64x112x112 float32. */
    const cJSON *first = cJSON_GetArrayItem(layers, 0);
    const cJSON *o0 = cJSON_GetArrayItem(cJSON_GetObjectItem(first, "outputs"), 0);
    const cJSON *shape = cJSON_GetObjectItem(o0, "shape");
    CHECK(cJSON_GetArraySize(shape) == 4 && cJSON_GetArrayItem(shape, 0)->valuedouble == 32 &&
              cJSON_GetArrayItem(shape, 1)->valuedouble == 64 && cJSON_GetArrayItem(shape, 2)->valuedouble == 112,
          "first layer's output shape is wrong");
    const cJSON *bytes = cJSON_GetObjectItem(o0, "bytes");
    CHECK(bytes && bytes->valuedouble == 32.0 * 64 * 112 * 112 * 4, "first layer's output bytes are wrong");
    const cJSON *module = cJSON_GetObjectItem(first, "module");
    CHECK(cJSON_IsString(module) && strcmp(module->valuestring, "conv1") == 0,
          "/conv1/Conv: module is not \"conv1\"");
    cJSON_Delete(root);
}

static const cJSON *layer_named(const cJSON *root, const char *name) {
    const cJSON *L;
    cJSON_ArrayForEach(L, cJSON_GetObjectItem(root, "layers")) {
        const cJSON *n = cJSON_GetObjectItem(L, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0) return L;
    }
    CHECK(false, "no layer '%s'", name);
    return NULL;
}

/* A dynamo export (tests/data/rotary_block.dynamo.onnx) names its nodes
 * node_<op>_<n>: JSON keeps the name and adds the module; the table, the
 * PEAK line and CSV's module column give the module. */
static void dynamo_names(void) {
    char model[4096], args[8192], *out;
    snprintf(model, sizeof model, "%s/../tests/data/rotary_block.dynamo.onnx", models);
    snprintf(args, sizeof args, "'%s' --batch 64 --format json", model);
    cJSON *root = run_json(args, "rotary block: --format json");
    if (!root) return;
    const cJSON *q = layer_named(root, "node_MatMul_7"), *pow = layer_named(root, "node_pow_1");
    const cJSON *qm = cJSON_GetObjectItem(q, "module"), *pm = cJSON_GetObjectItem(pow, "module");
    CHECK(cJSON_IsString(qm) && strcmp(qm->valuestring, "q") == 0, "node_MatMul_7: module is not \"q\"");
    CHECK(cJSON_IsString(pm) && pm->valuestring[0] == '\0', "node_pow_1: module is not \"\" (the block's forward)");
    const cJSON *peak = cJSON_GetObjectItem(root, "peak");
    const cJSON *layer = cJSON_GetObjectItem(peak, "layer"), *module = cJSON_GetObjectItem(peak, "module"),
                *phase = cJSON_GetObjectItem(peak, "phase");
    CHECK(cJSON_IsString(layer) && strncmp(layer->valuestring, "node_", 5) == 0 && cJSON_IsString(module) &&
              module->valuestring[0] && cJSON_IsString(phase),
          "rotary block: peak.layer is not the node's name or peak.module is missing");
    char want[512] = "";
    if (cJSON_IsString(module) && cJSON_IsString(phase))
        snprintf(want, sizeof want, "during %s, at layer %s\n", phase->valuestring, module->valuestring);
    cJSON_Delete(root);

    snprintf(args, sizeof args, "'%s' --batch 64", model);
    CHECK(run(args, false, &out) == 0, "rotary block: table exit code");
    CHECK(want[0] && strstr(out, want), "rotary block: the PEAK line does not say '%s'", want);
    CHECK(strstr(out, "  q  ") && !strstr(out, "node_MatMul_7"), "rotary block: the table names node_MatMul_7");
    free(out);

    snprintf(args, sizeof args, "'%s' --batch 64 --format csv", model);
    CHECK(run(args, false, &out) == 0, "rotary block: csv exit code");
    const char *row = strstr(out, "\n7,node_MatMul_7,"), *end = row ? strchr(row + 1, '\n') : NULL;
    CHECK(strstr(out, ",temp_bytes,module\n") && end && end - row > 2 && strncmp(end - 2, ",q", 2) == 0,
          "rotary block: csv lacks the module column: %.200s", out);
    free(out);
}

static void csv_and_table(void) {
    char args[4096], *out;
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 2 --format csv", models);
    CHECK(run(args, false, &out) == 0, "csv exit code");
    CHECK(strncmp(out, "index,name,op,", 14) == 0, "csv header: %.80s", out);
    CHECK(strstr(out, "\ntotal,") != NULL, "csv has no total row");
    int lines = 0;
    for (char *p = out; *p; p++) lines += *p == '\n';
    CHECK(lines > 50, "csv has %d lines", lines);
    free(out);
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 2", models);
    CHECK(run(args, false, &out) == 0, "table exit code");
    CHECK(strstr(out, "output shape") && strstr(out, "2x64x112x112") && strstr(out, "11689512"),
          "table lacks the header, a shape or the parameter total");
    free(out);
}

/* convert writes JSON that loads back to the same report. */
static void convert_round_trip(void) {
    char args[4096], *a, *b;
    snprintf(args, sizeof args, "convert %s/resnet18.onnx -o %s/resnet18.json", models, tmp);
    CHECK(run(args, true, NULL) == 0, "convert failed");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 4 --format csv", models);
    run(args, false, &a);
    snprintf(args, sizeof args, "%s/resnet18.json --batch 4 --format csv", tmp);
    int rc = run(args, true, &b);
    CHECK(rc == 0 && strcmp(a, b) == 0, "the converted model's report differs (exit %d): %.200s", rc, b);
    free(a);
    free(b);
}

/* JSON prints 64-bit counts exactly: x [2^40, 64] @ W [64, 65] is
 * 2 * 2^40 * 64 * 65 = 9147936743096320 forward FLOPs, above 2^53, which a
 * double-based writer prints as 9.14793674309632e+15. A file name with a
 * quote and a tab comes back escaped. */
static void json_exact_numbers(void) {
    char path[2048], args[4096];
    if (!write_tmp_file(path, sizeof path, "wide \"q\"\tx.json",
                        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"wide\", \"opset_import\": {\"\": 17},\n"
                        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [1099511627776, 64]}],\n"
                        " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [64, 65]}],\n"
                        " \"nodes\": [{\"name\": \"fc\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"y\"]}],\n"
                        " \"outputs\": [\"y\"]}\n"))
        return;
    snprintf(args, sizeof args, "'%s' --mode infer --format json", path);
    expect_exit(args, 0, "\"flops_forward\":\t9147936743096320");
    expect_exit(args, 0, "wide \\\"q\\\"\\tx.json\"");
}

/* Every output that cannot be written fails with exit 1, naming where it
 * went and why: standard output on a full disk, and -o to one. */
static void output_failures(void) {
    static const char to_full[] = "2>&1 >/dev/full"; /* stderr to the pipe, then stdout to the full device */
    char args[4096], *err;
    static const char *const to_stdout[] = {"--batch 2", "--batch 2 --format json", "--batch 2 --format csv",
                                            "--max-batch --gpu T4", "--max-batch --gpu T4 --format json",
                                            "--sweep batch=1,2", "--sweep batch=1,2 --format csv"};
    for (size_t i = 0; i < sizeof to_stdout / sizeof *to_stdout; i++) {
        snprintf(args, sizeof args, "%s/lenet.onnx %s", models, to_stdout[i]);
        int rc = run_with(args, to_full, &err);
        CHECK(rc == 1 && strstr(err, "standard output: cannot write: No space left on device"),
              "memest %s >/dev/full: exit %d: %s", args, rc, err);
        free(err);
    }
    int rc = run_with("ops", to_full, &err);
    CHECK(rc == 1 && strstr(err, "No space left on device"), "memest ops >/dev/full: exit %d: %s", rc, err);
    free(err);
    snprintf(args, sizeof args, "convert %s/lenet.onnx -o -", models);
    rc = run_with(args, to_full, &err);
    CHECK(rc == 1 && strstr(err, "No space left on device"), "memest %s >/dev/full: exit %d: %s", args, rc, err);
    free(err);
    snprintf(args, sizeof args, "%s/lenet.onnx --batch 2 -o /dev/full", models);
    expect_exit(args, 1, "/dev/full: cannot write: No space left on device");
    snprintf(args, sizeof args, "%s/lenet.onnx --batch 2 -o %s/no-such-dir/out.txt", models, tmp);
    expect_exit(args, 1, "no-such-dir/out.txt: cannot write: No such file or directory");
}

/* Names from a model never reach the terminal raw: a node named with an
 * escape sequence (that would set the window title), a bell and a newline
 * that forges a "memest:" line, in the table and in an error message. */
static void hostile_names(void) {
    static const char evil[] = "evil\\u001b]0;pwned\\u0007\\nmemest: forged";
    char text[4096], path[4096], args[4200];
    snprintf(text, sizeof text,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"n\", \"opset_import\": {\"\": 17},\n"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 8]}],\n"
             " \"nodes\": [{\"name\": \"%s\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"y\"]}],\n"
             " \"outputs\": [\"y\"]}\n", evil);
    if (!write_tmp_file(path, sizeof path, "evil_names.json", text)) return;
    char *out;
    static const char *const formats[] = {"", "--format csv"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "'%s' --batch 2 %s", path, formats[i]);
        int rc = run(args, true, &out);
        CHECK(rc == 0 && !strchr(out, 0x1b) && !strchr(out, 0x07) && !strstr(out, "\nmemest: forged") &&
                  strstr(out, "evil\\x1b]0;pwned\\x07\\x0amemest: forged"),
              "memest %s: a name reached the output raw: %.400s", args, out);
        free(out);
    }
    /* the same name in an error message: the node reads a tensor nobody makes */
    snprintf(text, sizeof text,
             "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"n\", \"opset_import\": {\"\": 17},\n"
             " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [2, 8]}],\n"
             " \"nodes\": [{\"name\": \"r\", \"op\": \"Relu\", \"inputs\": [\"%s\"], \"outputs\": [\"y\"]}],\n"
             " \"outputs\": [\"y\"]}\n", evil);
    if (!write_tmp_file(path, sizeof path, "evil_input.json", text)) return;
    snprintf(args, sizeof args, "'%s'", path);
    int rc = run(args, true, &out);
    CHECK(rc == 1 && !strchr(out, 0x1b) && !strchr(out, 0x07) && !strstr(out, "\nmemest: forged") &&
              strstr(out, "\\x1b]0;pwned"),
          "memest %s: an error message carried a name raw: %.400s", args, out);
    free(out);
}

/* Options that say nothing or contradict themselves are usage errors (exit
 * 2), and a model of a later opset than memest knows gets a note. */
static void option_edges(void) {
    char args[8192];
    static const struct {
        const char *flags, *message;
    } cases[] = {
        {"--dim batch=4 --dim batch=8", "--dim batch given twice (4 and 8)"},
        {"--batch 2 --tolerance 5", "--tolerance is verify's"},
        {"--dim 'seq= 5' --batch 2", "positive VALUE, got 'seq= 5'"},
        {"--batch ' 4'", "--batch wants a positive integer"},
        {"--batch 9223372036854775807", "above the largest dim memest takes, 1099511627776"},
        {"--batch 9223372036854775808", "--batch wants a positive integer"},
        {"--sweep batch=2,1099511627777", "--sweep batch=1099511627777: above the largest dim"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(args, sizeof args, "%s/resnet18.onnx %s", models, cases[i].flags);
        expect_exit(args, 2, cases[i].message);
    }
    expect_exit("ops --batch 4", 2, "'ops' takes no options, got '--batch'");
    char path[4096];
    if (write_tmp_file(path, sizeof path, "opset99.json",
                       "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"o\", \"opset_import\": {\"\": 99},\n"
                       " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [2, 8]}],\n"
                       " \"nodes\": [{\"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"y\"]}],\n"
                       " \"outputs\": [\"y\"]}\n")) {
        snprintf(args, sizeof args, "'%s'", path);
        expect_exit(args, 0, "declares opset 99 of the default domain; memest's rules follow opsets up to 28");
    }
}

int main(int argc, char **argv) {
    if (!cli_test_args(argc, argv)) return 2;
    option_edges();
    output_failures();
    hostile_names();
    json_exact_numbers();
    exit_codes();
    ops_verify_column();
    json_report();
    csv_and_table();
    dynamo_names();
    convert_round_trip();
    return test_result("test_cli");
}
