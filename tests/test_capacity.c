/*
 * test_capacity: memest --gpu, --gpu-memory, --reserve, --max-batch and
 * --sweep (docs/capacity.md), also on a fixed-batch model given a symbolic
 * batch by --input-shape, --amp and --checkpoint, through the command line;
 * and the library's capacity API (est_fit_*, est_max_batch) directly.
 *
 * usage: test_capacity MEMEST MODELS_DIR TMP_DIR
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>

#include <cJSON.h>

#include "cli_util.h"
#include "estimate.h"

/* memest ARGS --format json, parsed; NULL (and a failed check) otherwise. */
static cJSON *run_json(const char *args) {
    char full[8192], *out;
    snprintf(full, sizeof full, "%s --format json", args);
    int rc = run(full, false, &out);
    CHECK(rc == 0, "memest %s: exit %d", full, rc);
    cJSON *root = rc == 0 ? cJSON_Parse(out) : NULL;
    CHECK(rc != 0 || root, "memest %s: not JSON: %.200s", full, out);
    free(out);
    return root;
}

static double num(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    CHECK(cJSON_IsNumber(v), "field '%s' missing or not a number", name);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* memest 'MODELS/model' FLAGS exits with `want`, its output holding `msg`. */
static void expect_flags(const char *model, const char *flags, int want, const char *msg) {
    char args[4096];
    snprintf(args, sizeof args, "'%s/%s' %s", models, model, flags);
    expect_exit(args, want, msg);
}

static const char *const json_fields[] = {"model", "mode", "optimizer", "dtype", "batch", "dims",
                                          "layers", "outputs", "totals", "peak"};

/* The peak of one plain estimate, checked against its own "fit". */
static double peak_at(const char *model, int64_t batch, const char *fit_args, bool *fits) {
    char args[4096];
    snprintf(args, sizeof args, "%s/%s --batch %lld %s", models, model, (long long)batch, fit_args);
    cJSON *root = run_json(args);
    if (!root) return -1;
    for (size_t i = 0; i < sizeof json_fields / sizeof json_fields[0]; i++)
        CHECK(cJSON_GetObjectItem(root, json_fields[i]), "%s: JSON lacks '%s'", args, json_fields[i]);
    double peak = num(cJSON_GetObjectItem(root, "peak"), "bytes");
    const cJSON *fit = cJSON_GetObjectItem(root, "fit");
    CHECK(cJSON_IsObject(fit), "%s: no fit object", args);
    double usable = num(fit, "usable_bytes");
    CHECK(num(fit, "gpu_memory_bytes") - num(fit, "reserve_bytes") == usable, "usable != memory - reserve");
    CHECK(num(fit, "headroom_bytes") == usable - peak, "headroom != usable - peak");
    const cJSON *f = cJSON_GetObjectItem(fit, "fits");
    const cJSON *oom = cJSON_GetObjectItem(fit, "allocator_out_of_memory");
    CHECK(cJSON_IsNull(oom) || cJSON_IsObject(oom), "fit.allocator_out_of_memory is null or an object");
    CHECK(cJSON_IsBool(f) && cJSON_IsTrue(f) == (peak <= usable && cJSON_IsNull(oom)),
          "fits disagrees with peak <= usable and no allocator out-of-memory");
    *fits = cJSON_IsTrue(f);
    cJSON_Delete(root);
    return peak;
}

/* --max-batch's batch fits and the next does not, by plain estimates. */
static void max_batch(const char *model, const char *fit_args) {
    char args[4096];
    snprintf(args, sizeof args, "%s/%s --max-batch %s", models, model, fit_args);
    cJSON *root = run_json(args);
    if (!root) return;
    const cJSON *mb = cJSON_GetObjectItem(root, "max_batch");
    CHECK(cJSON_IsObject(mb), "%s: no max_batch object", args);
    double b = num(mb, "batch"), next = num(mb, "next_batch");
    CHECK(b >= 1 && next == b + 1, "%s: batch %.0f, next %.0f", args, b, next);
    CHECK(num(root, "batch") == b, "%s: the report is not at the max batch", args);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "fit"), "fits")), "%s: fit.fits false", args);
    bool fits_b = false, fits_next = true;
    double pb = peak_at(model, (int64_t)b, fit_args, &fits_b);
    double pn = peak_at(model, (int64_t)next, fit_args, &fits_next);
    CHECK(fits_b && !fits_next, "%s: batch %.0f fits %d, batch %.0f fits %d", args, b, fits_b, next, fits_next);
    CHECK(pb == num(mb, "peak_bytes") && pn == num(mb, "next_peak_bytes"), "%s: peaks differ from the estimates",
          args);
    /* no more estimates than doubling from batch 1 and bisecting take */
    double most = 2 * ceil(log2(next)) + 2, n = num(mb, "estimates");
    CHECK(n >= 2 && n <= most, "%s: %.0f estimates, more than %.0f", args, n, most);
    cJSON_Delete(root);
}

static void gpu_flags(void) {
    char args[4096];
    expect_exit("--help", 0, "--max-batch");
    expect_exit("--help", 0, "--gpu-memory SIZE");
    expect_exit("--help", 0, "default: 1GiB");
    /* the table, case and separators ignored */
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --gpu h100_80gb", models);
    expect_exit(args, 0, "H100-80GB: 79.65 GiB");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --gpu H200 --format json", models);
    expect_exit(args, 0, "\"gpu_memory_bytes\":\t150754820096");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --gpu T4 --format csv", models);
    expect_exit(args, 0, "\nfit,T4,yes,");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --gpu B9000", models);
    expect_exit(args, 2, "A100-80GB");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 8 --gpu T4 --gpu-memory 8GB", models);
    expect_exit(args, 2, "one of --gpu and --gpu-memory");
    /* sizes */
    static const struct { const char *size; double bytes; } sizes[] = {
        {"24GiB", 24.0 * 1073741824}, {"80GB", 80e9}, {"16000MiB", 16000.0 * 1048576},
        {"17179869184", 17179869184.0}, {"1.5gib", 1.5 * 1073741824}, {"512KB", 512e3}, {"2TiB", 2199023255552.0},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        snprintf(args, sizeof args, "%s/resnet18.onnx --batch 2 --gpu-memory %s", models, sizes[i].size);
        cJSON *root = run_json(args);
        if (!root) continue;
        const cJSON *fit = cJSON_GetObjectItem(root, "fit");
        CHECK(num(fit, "gpu_memory_bytes") == sizes[i].bytes, "--gpu-memory %s: %.0f bytes", sizes[i].size,
              num(fit, "gpu_memory_bytes"));
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(fit, "gpu")), "--gpu-memory: gpu is not null");
        /* 1 GiB and 1.5% of the memory (est_default_reserve) */
        double reserve = 1073741824.0 + (double)((uint64_t)sizes[i].bytes / 200 * 3);
        CHECK(num(fit, "reserve_bytes") == reserve, "--gpu-memory %s: the default reserve is %.0f, not 1 GiB + 1.5%%",
              sizes[i].size, num(fit, "reserve_bytes"));
        cJSON_Delete(root);
    }
    static const char *const bad[] = {"12XB", "GiB", "-5GiB", "0", "1e9", "0x10", "1.5", "24 GiB", "99999999999TiB"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "%s/resnet18.onnx --batch 2 --gpu-memory '%s'", models, bad[i]);
        expect_exit(args, 2, "--gpu-memory wants a size");
    }
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 2 --gpu-memory 8GiB --reserve 2.5XiB", models);
    expect_exit(args, 2, "--reserve wants a size");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 2 --reserve 1GiB", models);
    expect_exit(args, 2, "--reserve needs --gpu");
    /* --reserve changes usable; a tiny GPU does not fit */
    bool fits;
    peak_at("resnet18.onnx", 2, "--gpu-memory 8GiB --reserve 0", &fits);
    CHECK(fits, "resnet18 at batch 2 does not fit 8 GiB");
    peak_at("resnet18.onnx", 2, "--gpu-memory 100MiB --reserve 0", &fits);
    CHECK(!fits, "resnet18 at batch 2 fits 100 MiB");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 2 --gpu-memory 100MiB", models);
    expect_exit(args, 0, "FITS            NO");
}

/* memest ARGS --format json: the sweep rows' peaks (n of them), false when
 * it fails or has another number of rows. */
static bool sweep_peaks(const char *args, double *peaks, int n) {
    cJSON *root = run_json(args);
    const cJSON *arr = root ? cJSON_GetObjectItem(root, "sweep") : NULL;
    bool ok = cJSON_GetArraySize(arr) == n;
    CHECK(ok, "memest %s: %d sweep rows, expected %d", args, cJSON_GetArraySize(arr), n);
    for (int i = 0; ok && i < n; i++) peaks[i] = num(cJSON_GetArrayItem(arr, i), "peak_bytes");
    cJSON_Delete(root);
    return ok;
}

/* --input-shape gives the fixed-batch small_cnn at `path` its symbolic batch
 * back: --max-batch and --sweep then answer as for models/small_cnn.json;
 * and a symbol it introduces can be swept by name. */
static void fixed_batch_input_shape(const char *path) {
    char args[4096];
    snprintf(args, sizeof args, "%s --input-shape input=batchx3x32x32 --max-batch --gpu T4", path);
    cJSON *fixed = run_json(args);
    snprintf(args, sizeof args, "%s/small_cnn.json --max-batch --gpu T4", models);
    cJSON *symbolic = run_json(args);
    if (fixed && symbolic) {
        double a = num(cJSON_GetObjectItem(fixed, "max_batch"), "batch");
        double b = num(cJSON_GetObjectItem(symbolic, "max_batch"), "batch");
        CHECK(a == b && a > 1, "--input-shape on the fixed small_cnn: max batch %.0f, the symbolic one's %.0f", a, b);
    }
    cJSON_Delete(fixed);
    cJSON_Delete(symbolic);
    double pf[2], ps[2];
    snprintf(args, sizeof args, "%s --input-shape input=batchx3x32x32 --sweep batch=1,4", path);
    bool f_ok = sweep_peaks(args, pf, 2);
    snprintf(args, sizeof args, "%s/small_cnn.json --sweep batch=1,4", models);
    if (f_ok && sweep_peaks(args, ps, 2))
        CHECK(pf[0] == ps[0] && pf[1] == ps[1] && pf[1] > pf[0],
              "--input-shape sweep %.0f, %.0f; the symbolic model's %.0f, %.0f", pf[0], pf[1], ps[0], ps[1]);
    /* the spatial size as a new symbol: global average pooling takes any */
    snprintf(args, sizeof args, "%s --input-shape input=2x3xsidexside --sweep side=32,64", path);
    if (sweep_peaks(args, pf, 2)) CHECK(pf[1] > pf[0], "--sweep side=32,64: peaks %.0f, %.0f", pf[0], pf[1]);
    snprintf(args, sizeof args, "%s --input-shape input=2x3xsidexside --sweep side=32,64 --format csv", path);
    expect_exit(args, 0, "\nside,64,");
    snprintf(args, sizeof args, "%s --input-shape input=2x3xsidexside --max-batch --gpu T4", path);
    expect_exit(args, 1, "no graph input has a symbolic leading dim");
}

static void max_batch_search(void) {
    char args[4096];
    max_batch("resnet18.onnx", "--gpu T4");
    max_batch("resnet18.onnx", "--gpu-memory 3GiB --reserve 512MiB");
    max_batch("resnet18.onnx", "--gpu-memory 3GiB --mode infer --optimizer sgd");
    max_batch("mlp.onnx", "--gpu-memory 2GiB");
    max_batch("transformer_block.json", "--gpu-memory 4GiB --dim seq=512");
    /* batch 1 does not fit: max batch 0, exit 0 */
    snprintf(args, sizeof args, "%s/resnet18.onnx --max-batch --gpu-memory 100MiB", models);
    expect_exit(args, 0, "max batch: 0: batch 1 does not fit");
    snprintf(args, sizeof args, "%s/resnet18.onnx --max-batch --gpu-memory 100MiB", models);
    cJSON *root = run_json(args);
    if (root) {
        const cJSON *mb = cJSON_GetObjectItem(root, "max_batch");
        CHECK(num(mb, "batch") == 0 && num(mb, "next_batch") == 1 && cJSON_IsNull(cJSON_GetObjectItem(mb, "peak_bytes")),
              "max_batch at 100 MiB is not 0");
        CHECK(num(mb, "estimates") == 1, "max_batch at 100 MiB took %.0f estimates, not 1", num(mb, "estimates"));
        cJSON_Delete(root);
    }
    snprintf(args, sizeof args, "%s/resnet18.onnx --max-batch --gpu T4 --format csv", models);
    expect_exit(args, 0, "role,batch,peak_bytes,");
    /* usage */
    snprintf(args, sizeof args, "%s/resnet18.onnx --max-batch", models);
    expect_exit(args, 2, "--max-batch needs --gpu");
    snprintf(args, sizeof args, "%s/resnet18.onnx --max-batch --gpu T4 --batch 4", models);
    expect_exit(args, 2, "drop --batch");
    /* a graph without a symbolic batch: small_cnn.json with the batch fixed */
    char path[2048], *text;
    snprintf(path, sizeof path, "%s/small_cnn.json", models);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "cannot read %s", path);
    if (!f) return;
    text = calloc(1, 1 << 20);
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    fclose(f);
    text[n] = '\0';
    char *b = strstr(text, "\"batch\"");
    CHECK(b != NULL, "small_cnn.json has no batch dim");
    if (b) {
        memcpy(b, "      1", 7);
        snprintf(path, sizeof path, "%s/fixed_batch.json", tmp);
        f = fopen(path, "wb");
        fwrite(text, 1, n, f);
        fclose(f);
        snprintf(args, sizeof args, "%s --max-batch --gpu T4", path);
        expect_exit(args, 1, "no graph input has a symbolic leading dim");
        fixed_batch_input_shape(path);
    }
    free(text);
}

static void sweep(void) {
    char args[4096];
    snprintf(args, sizeof args, "%s/resnet18.onnx --sweep batch=1,8,32,64 --gpu A100-40GB", models);
    cJSON *root = run_json(args);
    if (root) {
        const cJSON *fit = cJSON_GetObjectItem(root, "fit");
        /* 40 GiB less the default reserve, 1 GiB + 1.5% (42949672960 / 200 * 3 = 644245092) */
        CHECK(cJSON_IsObject(fit) && num(fit, "usable_bytes") == 40.0 * 1073741824 - 1073741824 - 644245092,
              "sweep fit");
        const cJSON *arr = cJSON_GetObjectItem(root, "sweep"), *pt;
        CHECK(cJSON_GetArraySize(arr) == 4, "sweep has %d rows", cJSON_GetArraySize(arr));
        double last_value = 0, last_peak = 0, last_act = 0;
        cJSON_ArrayForEach(pt, arr) {
            static const char *const names[] = {"peak_bytes", "params_bytes", "grads_bytes", "optimizer_bytes",
                                                "activations_bytes", "temp_bytes"};
            for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) num(pt, names[i]);
            CHECK(cJSON_IsBool(cJSON_GetObjectItem(pt, "fits")), "sweep row lacks fits");
            double v = num(pt, "value"), peak = num(pt, "peak_bytes"), act = num(pt, "activations_bytes");
            CHECK(v > last_value && peak > last_peak && act > last_act, "sweep not monotone at batch %.0f", v);
            CHECK(num(pt, "params_bytes") == 46760960, "params change with the batch");
            double res = num(pt, "reserved_bytes");
            CHECK(res >= peak && (uint64_t)res % (2u << 20) == 0,
                  "sweep row %.0f: reserved %.0f must hold the peak %.0f in whole 2 MiB segments", v, res, peak);
            /* each row equals a plain estimate */
            bool fits;
            CHECK(peak_at("resnet18.onnx", (int64_t)v, "--gpu A100-40GB", &fits) == peak, "row %.0f differs", v);
            last_value = v, last_peak = peak, last_act = act;
        }
        cJSON_Delete(root);
    }
    snprintf(args, sizeof args, "%s/resnet18.onnx --sweep batch=1,8 --format csv", models);
    expect_exit(args, 0, "dim,value,peak_bytes,");
    expect_exit(args, 0, "fits,headroom_bytes,reserved_bytes\n");
    snprintf(args, sizeof args, "%s/resnet18.onnx --sweep batch=1,8", models);
    expect_exit(args, 0, "activations");
    snprintf(args, sizeof args, "%s/transformer_block.json --batch 2 --sweep seq=64,128,256 --format csv", models);
    expect_exit(args, 0, "\nseq,256,");
    snprintf(args, sizeof args, "%s/transformer_block.json --batch 2 --dim seq=8 --sweep seq=64,128", models);
    expect_exit(args, 0, "         128");
    snprintf(args, sizeof args, "%s/resnet18.onnx --sweep batch=1,x", models);
    expect_exit(args, 2, "--sweep wants positive integers");
    snprintf(args, sizeof args, "%s/resnet18.onnx --sweep batch", models);
    expect_exit(args, 2, "NAME=V1,V2");
    snprintf(args, sizeof args, "%s/resnet18.onnx --batch 2 --sweep nosuch=1,2", models);
    expect_exit(args, 1, "'nosuch'");
    snprintf(args, sizeof args, "%s/resnet18.onnx --sweep batch=1,2 --max-batch --gpu T4", models);
    expect_exit(args, 2, "one of --max-batch and --sweep");
}

/* --amp: the JSON says so, the step is smaller than float32's (activations
 * in bf16), weights and optimizer state stay float32, and bad or
 * conflicting values are usage errors. */
static void amp_flags(void) {
    char args[4096], *out32 = NULL, *out16 = NULL;
    snprintf(args, sizeof args, "'%s/resnet18.onnx' --batch 32 --format json", models);
    run(args, false, &out32);
    snprintf(args, sizeof args, "'%s/resnet18.onnx' --batch 32 --amp bf16 --format json", models);
    run(args, false, &out16);
    cJSON *a = cJSON_Parse(out32), *b = cJSON_Parse(out16);
    CHECK(a && b, "--amp: JSON did not parse");
    if (a && b) {
        const cJSON *amp = cJSON_GetObjectItem(b, "amp");
        CHECK(cJSON_IsString(amp) && strcmp(amp->valuestring, "bf16") == 0, "--amp bf16: no \"amp\": \"bf16\"");
        CHECK(!cJSON_GetObjectItem(a, "amp"), "without --amp: an \"amp\" key");
        double pa = cJSON_GetObjectItem(cJSON_GetObjectItem(a, "peak"), "bytes")->valuedouble;
        double pb = cJSON_GetObjectItem(cJSON_GetObjectItem(b, "peak"), "bytes")->valuedouble;
        CHECK(pb < pa, "--amp bf16 peak %.0f not below float32's %.0f", pb, pa);
        const cJSON *ta = cJSON_GetObjectItem(a, "totals"), *tb = cJSON_GetObjectItem(b, "totals");
        CHECK(cJSON_GetObjectItem(ta, "params_bytes")->valuedouble == cJSON_GetObjectItem(tb, "params_bytes")->valuedouble &&
                  cJSON_GetObjectItem(ta, "optimizer_bytes")->valuedouble ==
                      cJSON_GetObjectItem(tb, "optimizer_bytes")->valuedouble,
              "--amp changed the float32 parameters or optimizer state");
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(out32);
    free(out16);
    expect_flags("resnet18.onnx", "--batch 8 --amp fp32", 2, "--amp wants bf16 or fp16");
    expect_flags("resnet18.onnx", "--batch 8 --amp bf16 --dtype float16", 2, "does not combine");
}

static double json_peak(const cJSON *root) {
    return num(cJSON_GetObjectItem(root, "peak"), "bytes");
}

/* --checkpoint: the JSON names the segments and the recomputed layers, the
 * peak falls as segments get finer (every=2 keeps fewer inputs than the
 * whole model, every=1 keeps less than every=2 on resnet18), the table says
 * so, and bad values are usage errors (2) while a prefix that matches no
 * module of this model is a failure (1). */
static void checkpoint_flags(void) {
    char args[4096];
    snprintf(args, sizeof args, "'%s/resnet18.onnx' --batch 32", models);
    cJSON *plain = run_json(args);
    snprintf(args, sizeof args, "'%s/resnet18.onnx' --batch 32 --checkpoint every=1", models);
    cJSON *every1 = run_json(args);
    snprintf(args, sizeof args, "'%s/resnet18.onnx' --batch 32 --checkpoint layer1,layer2", models);
    cJSON *prefix = run_json(args);
    if (plain && every1 && prefix) {
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(plain, "checkpoint")), "without --checkpoint: \"checkpoint\" is not null");
        const cJSON *ck = cJSON_GetObjectItem(every1, "checkpoint");
        CHECK(cJSON_IsObject(ck) && num(ck, "every") == 1 && num(ck, "segments") == 8,
              "--checkpoint every=1: resnet18's 8 blocks (layer1.0 ... layer4.1) are the segments");
        const cJSON *pk = cJSON_GetObjectItem(prefix, "checkpoint");
        const cJSON *pre = cJSON_GetObjectItem(pk, "prefixes");
        CHECK(cJSON_IsArray(pre) && cJSON_GetArraySize(pre) == 2 && num(pk, "segments") == 2,
              "--checkpoint layer1,layer2: two prefixes, two segments");
        double p0 = json_peak(plain), p1 = json_peak(every1), p2 = json_peak(prefix);
        CHECK(p1 < p0 && p2 < p0, "checkpointing must lower resnet18's peak: %.0f, every=1 %.0f, prefix %.0f", p0, p1,
              p2);
        double rec = num(cJSON_GetObjectItem(every1, "totals"), "flops_recompute");
        double fwd = num(cJSON_GetObjectItem(every1, "totals"), "flops_forward");
        CHECK(rec > 0.5 * fwd && rec < fwd, "every=1 recomputes most but not all of the forward: %.0f of %.0f", rec,
              fwd);
        const cJSON *layers = cJSON_GetObjectItem(every1, "layers"), *l;
        int in_seg = 0, recomputed = 0;
        cJSON_ArrayForEach(l, layers) {
            in_seg += cJSON_IsNumber(cJSON_GetObjectItem(l, "segment"));
            recomputed += cJSON_IsTrue(cJSON_GetObjectItem(l, "recomputed"));
        }
        CHECK(in_seg > 0 && recomputed > 0 && recomputed <= in_seg, "layers: %d in segments, %d recomputed", in_seg,
              recomputed);
    }
    cJSON_Delete(plain);
    cJSON_Delete(every1);
    cJSON_Delete(prefix);
    expect_flags("resnet18.onnx", "--batch 8 --checkpoint every=1", 0, "8 segments; backward recomputes");
    /* the predicted reserved memory in the table and in CSV */
    expect_flags("resnet18.onnx", "--batch 8", 0, "RESERVED ");
    expect_flags("resnet18.onnx", "--batch 8 --format csv", 0, "\nreserved,,,,,,,,,");
    expect_flags("resnet18.onnx", "--batch 8 --checkpoint every=0", 2, "positive N");
    expect_flags("resnet18.onnx", "--batch 8 --checkpoint layer1,,layer2", 2, "empty prefix");
    expect_flags("resnet18.onnx", "--batch 8 --checkpoint every=1 --amp bf16", 0, "8 segments");
    expect_flags("resnet18.onnx", "--batch 8 --checkpoint every=1 --mode infer", 2, "training only");
    expect_flags("resnet18.onnx", "--batch 8 --checkpoint encoder.layer", 1, "no module name starts with 'encoder.layer'");
}

/* The library's fit arithmetic by hand, and est_max_batch against estimates
 * of the batch it returns and the next: resnet18 on a 2 GiB card with a
 * 256 MiB reserve. */
static void library_api(void) {
    est_fit fit = {.gpu_bytes = (uint64_t)2 << 30, .reserve_bytes = (uint64_t)256 << 20};
    CHECK(est_fit_usable(&fit) == (uint64_t)1792 << 20, "usable %llu", (unsigned long long)est_fit_usable(&fit));
    CHECK(est_fit_headroom(&fit, (uint64_t)1800 << 20) == -((int64_t)8 << 20), "headroom");
    CHECK(est_fit_headroom(&fit, UINT64_MAX) == INT64_MIN, "headroom past 2^63");
    est_totals oom = {.out_of_memory = 1};
    CHECK(est_fit_ok(&fit, 1 << 20, NULL) && !est_fit_ok(&fit, 1 << 20, &oom), "fragmentation fails the fit");
    est_fit none = {.gpu_bytes = 1 << 20, .reserve_bytes = 2 << 20};
    CHECK(est_fit_usable(&none) == 0, "a reserve above the memory leaves 0");
    /* the default reserve of an 80 GB card (80e9 bytes): 1 GiB + 1.5%, then
     * NCCL's: 564 MiB with a process group of one GPU, 846 MiB on more, 966
     * MiB more under hsdp, 378 MiB more with tensor parallelism */
    const uint64_t card = 80000000000ull, base = ((uint64_t)1 << 30) + card / 200 * 3, MiB = (uint64_t)1 << 20;
    const struct {
        est_parallel par;
        uint64_t nccl;
    } reserves[] = {
        {{0}, 0},
        {{.world_size = 1, .strategy = EST_STRATEGY_DDP}, 564 * MiB},
        {{.world_size = 8, .strategy = EST_STRATEGY_FSDP}, 846 * MiB},
        {{.world_size = 8, .strategy = EST_STRATEGY_HSDP, .shard_group = 4}, (846 + 966) * MiB},
        {{.world_size = 2, .tp = 2}, (846 + 378) * MiB},
        {{.world_size = 8, .strategy = EST_STRATEGY_FSDP, .tp = 2}, (846 + 378) * MiB},
    };
    CHECK(est_default_reserve(card, NULL) == base, "default reserve %llu", (unsigned long long)base);
    for (size_t i = 0; i < sizeof reserves / sizeof reserves[0]; i++)
        CHECK(est_default_reserve(card, &reserves[i].par) == base + reserves[i].nccl, "reserve %zu: %llu, expected %llu",
              i, (unsigned long long)est_default_reserve(card, &reserves[i].par),
              (unsigned long long)(base + reserves[i].nccl));

    char path[4096];
    snprintf(path, sizeof path, "%s/resnet18.onnx", models);
    est_graph *g = NULL;
    est_error err;
    if (est_load_file(path, &g, &err) != EST_OK) {
        CHECK(false, "%s: %s", path, err.message);
        return;
    }
    est_options opt;
    est_options_init(&opt);
    opt.memory_limit = est_fit_usable(&fit);
    est_max_batch_result mb;
    if (est_max_batch(g, &opt, &fit, 4096, &mb, &err) != EST_OK) {
        CHECK(false, "est_max_batch: %s", err.message);
    } else {
        CHECK(mb.batch > 1 && mb.next_batch == mb.batch + 1, "max batch %lld, next %lld", (long long)mb.batch,
              (long long)mb.next_batch);
        est_point at, next;
        opt.batch = mb.batch;
        CHECK(est_estimate_point(g, &opt, mb.batch, &at, &err) == EST_OK && est_point_fits(&fit, &at) &&
                  at.peak.bytes == mb.fits.peak.bytes,
              "batch %lld must fit with the peak the search reported", (long long)mb.batch);
        opt.batch = mb.next_batch;
        CHECK(est_estimate_point(g, &opt, mb.next_batch, &next, &err) == EST_OK && !est_point_fits(&fit, &next),
              "batch %lld must not fit", (long long)mb.next_batch);
    }
    CHECK(est_max_batch(g, &opt, &fit, 0, &mb, &err) == EST_EINVAL, "a cap of 0 is EINVAL");
    est_graph_free(g);
}

int main(int argc, char **argv) {
    if (!cli_test_args(argc, argv)) return 2;
    library_api();
    gpu_flags();
    max_batch_search();
    sweep();
    amp_flags();
    checkpoint_flags();
    return test_result("test_capacity");
}
