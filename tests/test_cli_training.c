/*
 * test_cli_training: the memest command's reports of a training step under
 * its options: fine-tuning (--trainable, --freeze, --grad-accum, Adafactor),
 * data parallelism, the timeline, the module rollup, and the step's time
 * with --gpu.
 *
 * usage: test_cli_training MEMEST MODELS_DIR TMP_DIR
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>

#include <cJSON.h>

#include "cli_json.h"

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
    fine_tuning();
    data_parallel();
    step_over_time();
    module_rollup();
    step_time();
    return test_result("test_cli_training");
}
