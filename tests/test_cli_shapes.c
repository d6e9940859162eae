/*
 * test_cli_shapes: the memest command's inputs: --input-shape on fixed-dim
 * JSON and ONNX models, and the dtype an export runs in (--dtype, --amp).
 *
 * usage: test_cli_shapes MEMEST MODELS_DIR TMP_DIR
 */
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>

#include <cJSON.h>

#include "cli_util.h"

/* x [1, 64] -> MatMul with W [64, 32] -> y [1, 32]: an export without
 * dynamic axes. */
static const char fixed_linear_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"fixed_linear\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [1, 64]}],\n"
    " \"initializers\": [{\"name\": \"W\", \"dtype\": \"float32\", \"dims\": [64, 32]}],\n"
    " \"nodes\": [{\"name\": \"fc\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"y\"]}],\n"
    " \"outputs\": [\"y\"]}\n";

/* memest ARGS --format json on the fixed linear graph: x and y as the layer
 * sees them must be [rows, 64] and [rows, 32] of float32, and dims must hold
 * dim=rows. */
static void check_linear_rows(const char *path, const char *flags, const char *dim, double rows) {
    char args[4096], *out;
    snprintf(args, sizeof args, "%s %s --format json", path, flags);
    int rc = run(args, true, &out);
    CHECK(rc == 0, "memest %s: exit %d: %.300s", args, rc, out);
    cJSON *root = rc == 0 ? cJSON_Parse(out) : NULL;
    free(out);
    if (!root) return;
    const cJSON *fc = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "layers"), 0);
    const cJSON *x = cJSON_GetArrayItem(cJSON_GetObjectItem(fc, "inputs"), 0);
    const cJSON *y = cJSON_GetArrayItem(cJSON_GetObjectItem(fc, "outputs"), 0);
    const cJSON *xs = cJSON_GetObjectItem(x, "shape"), *ys = cJSON_GetObjectItem(y, "shape");
    CHECK(cJSON_GetArraySize(xs) == 2 && cJSON_GetArrayItem(xs, 0)->valuedouble == rows &&
              cJSON_GetArrayItem(xs, 1)->valuedouble == 64,
          "%s: x is not %.0fx64", flags, rows);
    CHECK(cJSON_GetObjectItem(x, "bytes")->valuedouble == rows * 64 * 4, "%s: x bytes are not %.0f*64*4", flags, rows);
    CHECK(cJSON_GetArraySize(ys) == 2 && cJSON_GetArrayItem(ys, 0)->valuedouble == rows &&
              cJSON_GetArrayItem(ys, 1)->valuedouble == 32 &&
              cJSON_GetObjectItem(y, "bytes")->valuedouble == rows * 32 * 4,
          "%s: y is not %.0fx32 of %.0f*32*4 bytes", flags, rows, rows);
    const cJSON *totals = cJSON_GetObjectItem(root, "totals");
    CHECK(cJSON_GetObjectItem(totals, "input_bytes")->valuedouble == rows * 64 * 4 &&
              cJSON_GetObjectItem(totals, "output_bytes")->valuedouble == rows * 32 * 4,
          "%s: totals' input or output bytes", flags);
    const cJSON *d = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "dims"), dim);
    CHECK(dim[0] == '\0' || (d && d->valuedouble == rows), "%s: dims.%s is not %.0f", flags, dim, rows);
    cJSON_Delete(root);
}

static void input_shape(void) {
    char path[2048], args[4096];
    if (!write_tmp_file(path, sizeof path, "fixed_linear.json", fixed_linear_json)) return;
    /* the declared shape, then overridden: a new leading symbol takes
     * --batch or --dim, in either spelling of the flag and the dims */
    check_linear_rows(path, "", "", 1);
    check_linear_rows(path, "--input-shape x=batchx64 --batch 8", "batch", 8);
    check_linear_rows(path, "--input-shape=x=rows,64 --dim rows=8", "rows", 8);
    check_linear_rows(path, "--input-shape x=3x64", "", 3);
    /* a fixed model and --batch: the message says what to add */
    snprintf(args, sizeof args, "%s --batch 8", path);
    expect_exit(args, 1, "fixed_linear.json: batch given, but no graph input has a symbolic leading dim "
                         "(--input-shape x=batchx64 would give one)");
    /* model errors (1): they name the file, the input and the reason */
    snprintf(args, sizeof args, "%s --input-shape y=batchx64 --batch 8", path);
    expect_exit(args, 1, "fixed_linear.json: a shape is given for input 'y', but the graph has no input of that name "
                         "(its inputs: x)");
    snprintf(args, sizeof args, "%s --input-shape x=batchx64x1 --batch 8", path);
    expect_exit(args, 1, "fixed_linear.json: input 'x' has rank 2 (1x64); the shape given has rank 3");
    snprintf(args, sizeof args, "%s --input-shape x=batchx64", path);
    expect_exit(args, 1, "input 'x' dim 0 is the symbolic dim 'batch', which is not bound");
    snprintf(args, sizeof args, "%s --input-shape x=8x63", path);
    expect_exit(args, 1, "node 'fc' (MatMul)");
    snprintf(args, sizeof args, "%s --input-shape x=batchx64 --dim nosuch=2 --batch 8", path);
    expect_exit(args, 1, "no symbolic dim named 'nosuch' (it has: batch)");
    /* usage errors (2) */
    static const struct {
        const char *flags, *msg;
    } usage[] = {
        {"--input-shape x", "--input-shape wants NAME=DIMS such as input=1x3x224x224, got 'x'"},
        {"--input-shape x=", "--input-shape wants NAME=DIMS"},
        {"--input-shape =1x64", "--input-shape wants NAME=DIMS"},
        {"--input-shape x=1xx64", "--input-shape x=1xx64: dim 1 is empty"},
        {"--input-shape x=1x64x", "--input-shape x=1x64x: dim 2 is empty"},
        {"--input-shape x=1x0", "--input-shape x=1x0: dim 1 is 0; sizes must be positive integers"},
        {"--input-shape x=1x6a", "dim 1 '6a' is neither a positive integer nor a name (letters, digits and _, "
                                 "not starting with a digit)"},
        {"--input-shape x=1,-64", "dim 1 '-64' is neither"},
        {"--input-shape x=1x64 --input-shape x=2x64", "--input-shape: input 'x' is given twice"},
        {"--input-shape x=1x1x1x1x1x1x1x1x1x1x1x1x1", "more than 12 dims"},
        {"--input-shape", "--input-shape needs NAME=DIMS"},
    };
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        snprintf(args, sizeof args, "%s %s", path, usage[i].flags);
        expect_exit(args, 2, usage[i].msg);
    }
    snprintf(args, sizeof args, "verify %s --input-shape x=1x64", path);
    expect_exit(args, 2, "--input-shape is for estimating, not verify");
    expect_exit("--help", 0, "--input-shape NAME=DIMS");

    /* an ONNX export with a fixed batch of 1 (tests/data/make_lenet_batch1.py):
     * its batch comes back with --input-shape, as the first layer's output
     * shape shows */
    snprintf(path, sizeof path, "%s/lenet_batch1.onnx", TEST_DATA_DIR);
    snprintf(args, sizeof args, "%s --batch 16", path);
    expect_exit(args, 1, "(--input-shape input=batchx1x28x28 would give one)");
    snprintf(args, sizeof args, "%s --input-shape input=batchx1x28x28 --batch 16 --format csv", path);
    expect_exit(args, 0, "16x6x28x28");
    snprintf(args, sizeof args, "%s --input-shape input=batchx1x28x28 --sweep batch=1,4", path);
    expect_exit(args, 0, "           4  ");
    snprintf(args, sizeof args, "%s --input-shape input=batchx3x28x28 --batch 2", path);
    expect_exit(args, 1, "node '/c1/Conv' (Conv)");
    snprintf(args, sizeof args, "%s --input-shape input=batchx28x28 --batch 2", path);
    expect_exit(args, 1, "input 'input' has rank 4 (1x1x28x28); the shape given has rank 3");
}

/* A bfloat16 export runs in bfloat16 unless --dtype converts it; --amp
 * needs float32 weights and says how to get them. */
static void export_dtype(void) {
    char path[2048], args[4096];
    if (!write_tmp_file(path, sizeof path, "bf16_linear.json",
                        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"bf16_linear\", \"opset_import\": {\"\": 17},\n"
                        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"bfloat16\", \"dims\": [\"batch\", 64]}],\n"
                        " \"initializers\": [{\"name\": \"W\", \"dtype\": \"bfloat16\", \"dims\": [64, 32]}],\n"
                        " \"nodes\": [{\"name\": \"fc\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"W\"], \"outputs\": [\"y\"]}],\n"
                        " \"outputs\": [\"y\"]}\n"))
        return;
    snprintf(args, sizeof args, "%s --batch 4 --format json", path);
    expect_exit(args, 0, "\"dtype\":\t\"bfloat16\"");
    snprintf(args, sizeof args, "%s --batch 4 --dtype float32 --format json", path);
    expect_exit(args, 0, "\"dtype\":\t\"float32\"");
    snprintf(args, sizeof args, "%s --batch 4 --amp bf16", path);
    expect_exit(args, 2, "--amp keeps float32 weights, and ");
    snprintf(args, sizeof args, "%s --batch 4 --amp bf16", path);
    expect_exit(args, 2, "bf16_linear.json's are bfloat16: add --dtype float32");
    snprintf(args, sizeof args, "%s --batch 4 --amp bf16 --dtype float32", path);
    expect_exit(args, 0, "PEAK");
}

int main(int argc, char **argv) {
    if (!cli_test_args(argc, argv)) return 2;
    export_dtype();
    input_shape();
    return test_result("test_cli_shapes");
}
