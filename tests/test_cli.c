/*
 * test_cli: the memest command line: exit codes, --help, the JSON, CSV and
 * table reports, and --input-shape on fixed-dim JSON and ONNX models.
 *
 * usage: test_cli MEMEST MODELS_DIR TMP_DIR
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>

#include <cJSON.h>

#include "cli_util.h"

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

static const cJSON *field(const cJSON *o, const char *name, int type_check(const cJSON *), const char *ctx) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    CHECK(v && type_check(v), "%s: field '%s' missing or of the wrong type", ctx, name);
    return v;
}

static int is_number(const cJSON *v) { return cJSON_IsNumber(v); }
static int is_string(const cJSON *v) { return cJSON_IsString(v); }
static int is_array(const cJSON *v) { return cJSON_IsArray(v); }
static int is_object(const cJSON *v) { return cJSON_IsObject(v); }

static void check_tensor_json(const cJSON *t) {
    field(t, "name", is_string, "tensor");
    field(t, "dtype", is_string, "tensor");
    const cJSON *shape = field(t, "shape", is_array, "tensor");
    const cJSON *d;
    cJSON_ArrayForEach(d, shape) CHECK(cJSON_IsNumber(d) && d->valuedouble >= 0, "shape holds a non-number");
    field(t, "bytes", is_number, "tensor");
}

/* memest ARGS, which must exit 0 and print JSON: the parsed report (the
 * caller frees it), or NULL after a failed check naming `what`. */
static cJSON *run_json(const char *args, const char *what) {
    char *out;
    int rc = run(args, false, &out);
    CHECK(rc == 0, "%s: exit %d", what, rc);
    cJSON *root = rc == 0 ? cJSON_Parse(out) : NULL;
    CHECK(rc != 0 || root != NULL, "%s: not valid JSON: %.200s", what, out ? out : "");
    free(out);
    return root;
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

/* --trainable, --freeze, --grad-accum, --optimizer adafactor on the LoRA
 * block (models/lora_block.json): errors, the table line and the JSON. */
static void fine_tuning(void) {
    char args[4096];
    snprintf(args, sizeof args, "%s/lora_block.json --batch 4 --trainable nosuch", models);
    expect_exit(args, 2, "'nosuch' matches no parameter");
    expect_exit(args, 2, "'head.weight'"); /* and lists real names */
    snprintf(args, sizeof args, "%s/lora_block.json --batch 4 --freeze 'x*'", models);
    expect_exit(args, 2, "--freeze pattern 'x*'");
    snprintf(args, sizeof args, "%s/lora_block.json --batch 4 --trainable lora_,", models);
    expect_exit(args, 2, "empty pattern");
    snprintf(args, sizeof args, "%s/lora_block.json --batch 4 --mode infer --trainable lora_", models);
    expect_exit(args, 2, "training only");
    snprintf(args, sizeof args, "%s/lora_block.json --batch 4 --grad-accum 0", models);
    expect_exit(args, 2, "--grad-accum");
    snprintf(args, sizeof args, "%s/lora_block.json --batch 4 --optimizer adagrad", models);
    expect_exit(args, 2, "adafactor");
    /* verify runs --trainable (no GPU here: it gets as far as the device),
     * not --grad-accum nor adafactor, and convert takes none of them */
    snprintf(args, sizeof args, "verify %s/lora_block.json --batch 4 --trainable lora_ --grad-accum 2", models);
    expect_exit(args, 2, "--grad-accum and --optimizer adafactor are for estimating, not verify");
    snprintf(args, sizeof args, "convert %s/lora_block.json -o /dev/null --freeze lora_", models);
    expect_exit(args, 2, "--trainable and --freeze are for estimating and verify, not convert");
    /* a PEFT-looking model estimated as full fine-tuning gets a note */
    snprintf(args, sizeof args, "%s/lora_block.json --batch 4", models);
    expect_exit(args, 0, "note: 2 of the 4 parameters are LoRA adapters");
    snprintf(args, sizeof args, "%s/lora_block.json --batch 4 --trainable lora_ --optimizer adafactor --grad-accum 2",
             models);
    expect_exit(args, 0, "6144 (24.00 KiB), 1024 train (16.67%), the rest are frozen");
    expect_exit(args, 0, "optimizer adafactor, 2 micro-batches a step");
    snprintf(args, sizeof args, "%s/lora_block.json --batch 4 --trainable=lora_ --freeze '*lora_A*' --format json",
             models);
    cJSON *root = run_json(args, "fine-tuning JSON");
    if (!root) return;
    const cJSON *t = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "totals"), "trainable_param_count");
    CHECK(cJSON_IsNumber(t) && t->valuedouble == 512, "trainable_param_count: only lora_B's 512");
    const cJSON *p, *params = field(root, "parameters", is_array, "top level");
    int n = 0, trained = 0;
    cJSON_ArrayForEach(p, params) {
        const cJSON *name = field(p, "name", is_string, "parameter");
        field(p, "torch_name", is_string, "parameter");
        field(p, "shape", is_array, "parameter");
        const cJSON *tr = cJSON_GetObjectItem(p, "trainable");
        CHECK(cJSON_IsBool(tr), "parameter.trainable is not a bool");
        n++;
        if (cJSON_IsTrue(tr)) {
            trained++;
            CHECK(name && strcmp(name->valuestring, "base.lora_B.default.weight") == 0, "trained: %s",
                  name ? name->valuestring : "?");
        }
    }
    CHECK(n == 4 && trained == 1, "%d parameters, %d trained", n, trained);
    const cJSON *tp = field(root, "trainable", is_array, "top level");
    const cJSON *fp = field(root, "freeze", is_array, "top level");
    CHECK(tp && fp && cJSON_GetArraySize(tp) == 1 && cJSON_GetArraySize(fp) == 1, "patterns echoed");
    cJSON_Delete(root);
}

/* --world-size and --strategy: usage errors, the per-GPU lines, the JSON
 * "parallel" object, and NCCL's memory in the default reserve. */
static void data_parallel(void) {
    char args[4096];
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --strategy fsdp2", models);
    expect_exit(args, 2, "ddp, zero1, fsdp, fsdp-grad-op or hsdp");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --world-size 0 --strategy ddp", models);
    expect_exit(args, 2, "--world-size wants a number of GPUs");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --world-size 4", models);
    expect_exit(args, 2, "world size 4 needs a strategy");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --world-size 8 --strategy hsdp --shard-group 3", models);
    expect_exit(args, 2, "must divide the world size (8)");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --world-size 8 --strategy ddp --offload", models);
    expect_exit(args, 2, "CPUOffloadPolicy");
    snprintf(args, sizeof args, "verify %s/resnet18.onnx --batch 8 --world-size 2 --strategy ddp", models);
    expect_exit(args, 2, "verify runs one GPU");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --world-size 8 --strategy fsdp", models);
    expect_exit(args, 0, "per GPU of 8, fsdp: ");
    expect_exit(args, 0, "communication   a step moves all-gather ");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --world-size 2 --strategy ddp --gpu H100-80GB", models);
    /* 1 GiB + 1.5% of 81559 MiB (1282812147) + NCCL's 846 MiB on 2 GPUs */
    expect_exit(args, 0, "reserve 3.02 GiB");
    /* the first iteration's bucket of resnet18's 44.59 MiB of gradients */
    expect_exit(args, 0, "first bucket    44.59 MiB, the first iteration's");
    expect_exit(args, 0, "(a race: the peak is ");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --world-size 4 --strategy zero1", models);
    expect_exit(args, 0, "per GPU of 4, zero1 (rank ");
    expect_exit(args, 0, "'s optimizer partition, the largest): ");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --world-size 4 --strategy zero1 --rank 3", models);
    expect_exit(args, 0, "per GPU of 4, zero1 (rank 3's optimizer partition): ");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --world-size 4 --strategy zero1 --rank 4", models);
    expect_exit(args, 2, "rank 4: the data-parallel GPUs are ranks 0 to 3");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --world-size 4 --strategy zero1 --rank -1", models);
    expect_exit(args, 2, "--rank wants a GPU's rank, 0 or more, got '-1'");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --strategy ddp --ddp-first-bucket sometimes", models);
    expect_exit(args, 2, "--ddp-first-bucket wants auto, held or released, got 'sometimes'");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --strategy ddp --ddp-first-bucket held --format json",
             models);
    cJSON *race = run_json(args, "ddp held JSON");
    if (race) {
        const cJSON *rp = cJSON_GetObjectItem(race, "parallel");
        const cJSON *peak_bytes = cJSON_GetObjectItem(cJSON_GetObjectItem(race, "peak"), "bytes");
        double peak = cJSON_IsNumber(peak_bytes) ? peak_bytes->valuedouble : -1;
        const cJSON *bucket = cJSON_GetObjectItem(rp, "first_bucket_bytes");
        const cJSON *held = cJSON_GetObjectItem(rp, "peak_first_bucket_held_bytes");
        const cJSON *released = cJSON_GetObjectItem(rp, "peak_first_bucket_released_bytes");
        CHECK(cJSON_IsNumber(bucket) && cJSON_IsNumber(held) && cJSON_IsNumber(released) && held->valuedouble == peak &&
                  released->valuedouble < peak && peak - released->valuedouble <= bucket->valuedouble,
              "one GPU, first bucket held: peak %.0f is the held end, the released end lower by at most the bucket",
              peak);
        cJSON_Delete(race);
    }
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --world-size 4 --strategy hsdp --shard-group 2 --gpu H100-80GB",
             models);
    /* the same + 966 MiB for HSDP's second mesh dimension: 4256573683 bytes */
    expect_exit(args, 0, "reserve 3.96 GiB");
    snprintf(args, sizeof args, "%s/resnet18.onnx --world-size 8 --strategy fsdp --gpu-memory 8GiB --max-batch", models);
    expect_exit(args, 0, "optimizer adam, per GPU of 8 (fsdp)"); /* whose batch it is */
    snprintf(args, sizeof args, "%s/transformer_block.json --batch 2 --dim seq=64 --tp 2", models);
    expect_exit(args, 0, "per GPU of 2, tp 2");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --tp 2", models);
    expect_exit(args, 1, "no block has a pair of linear layers");
    snprintf(args, sizeof args, "verify %s/resnet18.onnx --batch 8 --tp 2", models);
    expect_exit(args, 2, "verify runs one GPU");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --world-size 8 --strategy hsdp --shard-group 4 --format json",
             models);
    cJSON *root = run_json(args, "hsdp JSON");
    if (!root) return;
    const cJSON *par = field(root, "parallel", is_object, "top level");
    const cJSON *comm = par ? field(par, "comm_bytes", is_object, "parallel") : NULL;
    const cJSON *st = par ? cJSON_GetObjectItem(par, "strategy") : NULL;
    const cJSON *group = par ? cJSON_GetObjectItem(par, "shard_group") : NULL;
    CHECK(cJSON_IsString(st) && strcmp(st->valuestring, "hsdp") == 0, "parallel.strategy is hsdp");
    CHECK(cJSON_IsNumber(group) && group->valuedouble == 4, "parallel.shard_group is 4");
    const cJSON *first = par ? cJSON_GetObjectItem(par, "first_bucket_held_bytes") : NULL;
    CHECK(cJSON_IsNumber(first) && first->valuedouble == 0, "parallel.first_bucket_held_bytes is 0 under hsdp");
    const char *keys[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"};
    for (size_t k = 0; comm && k < 4; k++) {
        const cJSON *v = field(comm, keys[k], is_number, "comm_bytes");
        CHECK(v && (k == 3 ? v->valuedouble == 0 : v->valuedouble > 0), "comm_bytes.%s", keys[k]);
    }
    const cJSON *breakdown = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "peak"), "breakdown");
    CHECK(cJSON_IsNumber(cJSON_GetObjectItem(breakdown, "comm")), "peak.breakdown.comm");
    cJSON_Delete(root);
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --format json", models);
    root = run_json(args, "one-GPU JSON");
    CHECK(root && cJSON_IsNull(cJSON_GetObjectItem(root, "parallel")), "one GPU: \"parallel\": null");
    cJSON_Delete(root);
}

/* --top and --timeline: the table's largest live blocks, the JSON's
 * timeline, whose largest "allocated" is the peak, and the usage errors. */
static void step_over_time(void) {
    char args[4096];
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 32 --top 3", models);
    expect_exit(args, 0, "live at the peak, the largest 3 of ");
    expect_exit(args, 0, "98.00 MiB  activations  activation                32x64x112x112");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 32 --timeline", models);
    expect_exit(args, 2, "--timeline is JSON's");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 32 --top 3 --format json", models);
    expect_exit(args, 2, "--top is the table's");
    snprintf(args, sizeof args, "%s/resnet18.onnx --top 3 --max-batch --gpu T4", models);
    expect_exit(args, 2, "not --max-batch");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --format json --timeline", models);
    cJSON *root = run_json(args, "timeline JSON");
    if (!root) return;
    const cJSON *peak = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "peak"), "bytes");
    const cJSON *tl = field(root, "timeline", is_array, "top level"), *e;
    double max = 0;
    int n = 0;
    cJSON_ArrayForEach(e, tl) {
        const cJSON *a = field(e, "allocated", is_number, "event");
        field(e, "what", is_string, "event");
        if (a && a->valuedouble > max) max = a->valuedouble;
        n++;
    }
    CHECK(n > 100 && cJSON_IsNumber(peak) && max == peak->valuedouble, "timeline: %d events, max %.0f, peak %.0f", n,
          max, cJSON_IsNumber(peak) ? peak->valuedouble : -1);
    const cJSON *params = field(root, "parameters", is_array, "top level"), *prm;
    cJSON_ArrayForEach(prm, params) field(prm, "grad_bytes", is_number, "parameter");
    const cJSON *snap = field(root, "snapshots", is_object, "top level");
    CHECK(snap && cJSON_GetObjectItem(snap, "before") && cJSON_GetObjectItem(snap, "after"), "snapshots before, after");
    cJSON_Delete(root);
}

/* --depth N: the modules' sums are the totals; CSV's module, breakdown and
 * param rows. */
static void module_rollup(void) {
    char args[4096], *out;
    static const char *const sums[][2] = {{"param_count", "param_count"}, {"param_bytes", "param_bytes"},
                                          {"output_bytes", "output_bytes"}, {"flops_forward", "flops_forward"},
                                          {"flops_backward", "flops_backward"}};
    for (int depth = 1; depth <= 3; depth++) {
        snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --depth %d --format json", models, depth);
        cJSON *root = run_json(args, "--depth JSON");
        if (!root) return;
        const cJSON *mods = field(root, "modules", is_array, "top level"), *m;
        const cJSON *totals = cJSON_GetObjectItem(root, "totals");
        for (size_t k = 0; k < sizeof sums / sizeof *sums; k++) {
            double sum = 0;
            cJSON_ArrayForEach(m, mods) sum += cJSON_GetObjectItem(m, sums[k][0])->valuedouble;
            const cJSON *t = cJSON_GetObjectItem(totals, sums[k][1]);
            CHECK(cJSON_IsNumber(t) && t->valuedouble == sum, "depth %d: modules' %s sum to %.0f, totals %.0f", depth,
                  sums[k][0], sum, cJSON_IsNumber(t) ? t->valuedouble : -1);
        }
        if (depth == 1) CHECK(cJSON_GetArraySize(mods) == 11, "depth 1: %d modules, expected 11", cJSON_GetArraySize(mods));
        cJSON_Delete(root);
    }
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 32 --depth 1", models);
    expect_exit(args, 0, "  layer1       14        147968   578.00 KiB");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 32 --depth 1 --format csv --checkpoint every=1", models);
    CHECK(run(args, false, &out) == 0, "csv exit");
    CHECK(out && strstr(out, "\nmodule,layer1,,,,,147968,591872,,") && strstr(out, "\nbreakdown,comm,,,,,,,,0,,,,,,\n") &&
              strstr(out, "\nparam,conv1.weight,,,64x3x7x7,float32,9408,37632,,37632,1,,,,,conv1.weight\n") &&
              strstr(out, "\ncheckpoint,every=1,8,,"),
          "csv: module, breakdown, param and checkpoint rows");
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

/* The step's time with --gpu NAME (docs/output-format.md, "Time"). conv1 of
 * resnet18 at batch 32 on the H100 is bound by memory: it reads 19267584 +
 * 37632 bytes and writes 102760448, over 0.86 of 3.35 TB/s: 42.4 us; its
 * backward twice the bytes: 84.7 us (its 7.55 GFLOPs at 0.55 of TF32's
 * 494.7 TFLOP/s take 27.8 us). */
static void step_time(void) {
    char args[4096], *out = NULL;
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 32 --gpu H100-80GB --depth 1", models);
    expect_exit(args, 0, "    temp    fwd time    bwd time\n");
    expect_exit(args, 0, "118.74 MiB     42.4 us     84.7 us\n");
    expect_exit(args, 0, "time (H100-80GB: kernels at their roofline, issued by an eager PyTorch host)\n  STEP   ");
    expect_exit(args, 0, "bwd flops    fwd time    bwd time\n  conv1 ");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 32 --gpu-memory 80GB", models);
    CHECK(run(args, false, &out) == 0 && out && !strstr(out, "fwd time") && !strstr(out, "\ntime ("),
          "no time without --gpu NAME");
    free(out);
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 32 --host-us 1,2,3", models);
    expect_exit(args, 2, "--host-us wants five costs");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 32 --host-us 1,2,3,4,1e3 --gpu T4", models);
    expect_exit(args, 2, "--host-us wants five costs");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 32 --host-us 1,2,3,4,-5 --gpu T4", models);
    expect_exit(args, 2, "--host-us wants five costs");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 32 --host-us 1,2,3,4,5", models);
    expect_exit(args, 2, "--host-us times one estimate's step: it needs --gpu NAME");
    snprintf(args, sizeof args, "%s/resnet18.onnx --max-batch --host-us 1,2,3,4,5 --gpu T4", models);
    expect_exit(args, 2, "--host-us times one estimate's step");
    /* a free host: the step is its kernels, one after another */
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 32 --gpu H200 --host-us 0,0,0,0,0 --depth 2 --format json",
             models);
    cJSON *root = run_json(args, "--gpu JSON");
    if (!root) return;
    const cJSON *t = field(root, "time", is_object, "top level");
    const cJSON *phases = field(t, "phases", is_object, "time"), *ph, *L, *m;
    double step = cJSON_GetObjectItem(t, "step_s")->valuedouble, dev = cJSON_GetObjectItem(t, "device_s")->valuedouble;
    double walls = 0, kernels = 0, layers = 0, modules = 0;
    cJSON_ArrayForEach(ph, phases) {
        walls += field(ph, "wall_s", is_number, "phase")->valuedouble;
        kernels += field(ph, "device_s", is_number, "phase")->valuedouble;
    }
    cJSON_ArrayForEach(L, cJSON_GetObjectItem(root, "layers")) {
        layers += field(L, "time_forward_s", is_number, "layer")->valuedouble +
                  field(L, "time_backward_s", is_number, "layer")->valuedouble;
        field(L, "time_forward_bound", is_string, "layer");
    }
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(root, "modules"))
        modules += field(m, "time_forward_s", is_number, "module")->valuedouble +
                   field(m, "time_backward_s", is_number, "module")->valuedouble;
    double opt = cJSON_GetObjectItem(cJSON_GetObjectItem(phases, "optimizer"), "device_s")->valuedouble;
    CHECK(fabs(step - dev) < 1e-12 && fabs(walls - step) < 1e-12 && fabs(kernels - dev) < 1e-12,
          "free host: step %g, kernels %g, phases %g and %g", step, dev, walls, kernels);
    CHECK(fabs(layers + opt - dev) < 1e-12 && fabs(modules - layers) < 1e-12, "layers %g + optimizer %g, modules %g, "
          "kernels %g", layers, opt, modules, dev);
    CHECK(!strcmp(cJSON_GetObjectItem(t, "gpu")->valuestring, "H200") &&
              !strcmp(cJSON_GetObjectItem(t, "bound")->valuestring, "gpu") &&
              cJSON_GetObjectItem(cJSON_GetObjectItem(t, "host"), "forward_op_s")->valuedouble == 0,
          "time's gpu, bound and host");
    cJSON_Delete(root);
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 32 --gpu H100-80GB --depth 1 --format csv", models);
    CHECK(run(args, false, &out) == 0 && out, "csv with --gpu");
    CHECK(out && strstr(out, ",temp_bytes,module,time_forward_s,time_backward_s\n") &&
              strstr(out, ",conv1,4.23") && strstr(out, "\ntime,step,H100-80GB,host,,,,,,,,,,,,,0.0"),
          "csv: time columns and rows: %.300s", out ? strstr(out, "\ntime,") : "");
    for (char *line = out; line && *line;) { /* every row has the header's 18 fields */
        char *end = strchr(line, '\n');
        int commas = 0;
        for (char *c = line; c < end; c++) commas += *c == ',';
        CHECK(commas == 17, "csv row of %d fields: %.*s", commas + 1, (int)(end - line), line);
        line = end + 1;
    }
    free(out);
}

int main(int argc, char **argv) {
    if (!cli_test_args(argc, argv)) return 2;
    option_edges();
    output_failures();
    hostile_names();
    json_exact_numbers();
    export_dtype();
    exit_codes();
    ops_verify_column();
    json_report();
    csv_and_table();
    fine_tuning();
    data_parallel();
    step_over_time();
    module_rollup();
    step_time();
    dynamo_names();
    convert_round_trip();
    input_shape();
    return test_result("test_cli");
}
