/* verify_cmd.c: `memest verify`: runs the model on the GPU through the
 * verify module (verify/, loaded with dlopen so that memest never needs the
 * CUDA runtime) and prints the estimate and the measurement side by side,
 * per memory category and for the peak, with relative errors. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "estimate.h"
#include "output.h"
#include "term.h"
#include "verify_cmd.h"

#if MEMEST_VERIFY_BUILT
#include "verify_load.h"
#endif

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

#if !MEMEST_VERIFY_BUILT

int run_verify(const verify_request *q, const est_graph *g) {
    (void)q;
    (void)g;
    fprintf(stderr, "memest: verify is not available: this memest was built without the CUDA verify executor "
                    "(no CUDA toolkit found, or -Dverify=disabled); rebuild with nvcc and cuBLAS present\n");
    return EXIT_FAIL;
}

#else

/* verify's phases: setup, then the estimator's. */
static const char *vx_phase_name(vx_phase p) { return p == VX_PHASE_SETUP ? "setup" : est_phase_name((est_phase)(p - 1)); }

static double rel_err(uint64_t est, uint64_t meas) {
    if (meas == 0) return est == 0 ? 0.0 : INFINITY;
    return ((double)est - (double)meas) / (double)meas;
}

static const char *err_str(char *buf, size_t n, uint64_t est, uint64_t meas) {
    if (meas == 0 && est == 0) snprintf(buf, n, "-");
    else if (meas == 0) snprintf(buf, n, "inf");
    else snprintf(buf, n, "%+.1f%%", 100.0 * rel_err(est, meas));
    return buf;
}

static void est_cats(const est_peak *p, uint64_t *c) {
    for (int k = 0; k < VX_CAT_COUNT; k++) c[k] = est_peak_category(p, (est_category)k);
}

static void print_table_v(FILE *f, const verify_request *q, const est_report *rep, const vx_result *r, bool ok,
                          double err) {
    char a[32], b[32], e[32];
    const est_peak *p = est_report_peak(rep);
    uint64_t ec[VX_CAT_COUNT];
    est_cats(p, ec);
    fprintf(f, "model: %s\n", q->model);
    fprintf(f, "step: %s", est_mode_name(q->opt.mode));
    if (q->opt.mode == EST_MODE_TRAIN) fprintf(f, ", optimizer %s", est_optimizer_name(q->opt.optimizer));
    fprintf(f, ", batch %lld, float32\n", (long long)q->opt.batch);
    fprintf(f, "device: %s\n\n", r->device_name);
    fprintf(f, "%-14s %14s %14s %9s\n", "category", "estimate", "measured", "error");
    for (int c = 0; c < VX_CAT_COUNT; c++)
        fprintf(f, "%-14s %14s %14s %9s\n", est_category_name((est_category)c), human_bytes(a, sizeof a, ec[c]),
                human_bytes(b, sizeof b, r->at_peak[c]), err_str(e, sizeof e, ec[c], r->at_peak[c]));
    fprintf(f, "%-14s %14s %14s %9s\n", "peak", human_bytes(a, sizeof a, p->bytes), human_bytes(b, sizeof b, r->peak),
            err_str(e, sizeof e, p->bytes, r->peak));
    fprintf(f, "%-14s %14s %14s\n", "peak phase", est_phase_name(p->phase), vx_phase_name(r->peak_phase));
    fprintf(f, "%-14s %14.28s %14.28s\n\n", "peak layer", p->layer && p->layer[0] ? p->layer : "-",
            r->peak_layer[0] ? r->peak_layer : "-");
    fprintf(f, "step time: %.2f ms (measured step; first step %.2f ms)\n", r->step_ms, r->first_step_ms);
    fprintf(f, "device memory (cudaMemGetInfo): total %s, CUDA context %s, cuBLAS %s (workspace %s)\n",
            human_bytes(a, sizeof a, r->device_total), human_bytes(b, sizeof b, r->context_bytes),
            human_bytes(e, sizeof e, r->cublas_bytes), human_bytes((char[32]){0}, 32, r->cublas_workspace));
    fprintf(f, "  used before the model %s, at the peak %s (executor held %s from cudaMalloc at most)\n",
            human_bytes(a, sizeof a, r->device_used_before), human_bytes(b, sizeof b, r->device_used_peak),
            human_bytes(e, sizeof e, r->reserved_peak));
    fprintf(f, "\npeak error %+.1f%%: %s the tolerance of %.1f%%\n", 100.0 * err, ok ? "within" : "ABOVE",
            q->tolerance);
}

static int print_json_v(FILE *f, const verify_request *q, const est_report *rep, const vx_result *r, bool ok,
                        double err) {
    const est_peak *p = est_report_peak(rep);
    uint64_t ec[VX_CAT_COUNT];
    est_cats(p, ec);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", q->model);
    cJSON_AddStringToObject(root, "mode", est_mode_name(q->opt.mode));
    if (q->opt.mode == EST_MODE_TRAIN) cJSON_AddStringToObject(root, "optimizer", est_optimizer_name(q->opt.optimizer));
    cJSON_AddNumberToObject(root, "batch", (double)q->opt.batch);
    cJSON_AddStringToObject(root, "dtype", est_dtype_name(q->opt.dtype));
    cJSON_AddStringToObject(root, "device", r->device_name);
    cJSON *cats = cJSON_AddObjectToObject(root, "categories");
    for (int c = 0; c < VX_CAT_COUNT; c++) {
        cJSON *o = cJSON_AddObjectToObject(cats, est_category_name((est_category)c));
        cJSON_AddNumberToObject(o, "estimate", (double)ec[c]);
        cJSON_AddNumberToObject(o, "measured", (double)r->at_peak[c]);
        double e = rel_err(ec[c], r->at_peak[c]);
        if (isfinite(e)) cJSON_AddNumberToObject(o, "error", e);
        else cJSON_AddNullToObject(o, "error");
    }
    cJSON *pk = cJSON_AddObjectToObject(root, "peak");
    cJSON_AddNumberToObject(pk, "estimate", (double)p->bytes);
    cJSON_AddNumberToObject(pk, "measured", (double)r->peak);
    if (isfinite(err)) cJSON_AddNumberToObject(pk, "error", err);
    else cJSON_AddNullToObject(pk, "error");
    cJSON_AddStringToObject(pk, "estimate_phase", est_phase_name(p->phase));
    cJSON_AddStringToObject(pk, "measured_phase", vx_phase_name(r->peak_phase));
    cJSON_AddStringToObject(pk, "estimate_layer", p->layer ? p->layer : "");
    cJSON_AddStringToObject(pk, "measured_layer", r->peak_layer);
    cJSON_AddNumberToObject(root, "tolerance", q->tolerance / 100.0);
    cJSON_AddBoolToObject(root, "within_tolerance", ok);
    cJSON_AddNumberToObject(root, "step_ms", r->step_ms);
    cJSON_AddNumberToObject(root, "first_step_ms", r->first_step_ms);
    cJSON *dev = cJSON_AddObjectToObject(root, "device_memory");
    cJSON_AddNumberToObject(dev, "total", (double)r->device_total);
    cJSON_AddNumberToObject(dev, "context", (double)r->context_bytes);
    cJSON_AddNumberToObject(dev, "cublas", (double)r->cublas_bytes);
    cJSON_AddNumberToObject(dev, "cublas_workspace", (double)r->cublas_workspace);
    cJSON_AddNumberToObject(dev, "used_before", (double)r->device_used_before);
    cJSON_AddNumberToObject(dev, "used_peak", (double)r->device_used_peak);
    cJSON_AddNumberToObject(dev, "executor_reserved_peak", (double)r->reserved_peak);
    cJSON_AddNumberToObject(root, "resident_before_step", (double)r->resident_before);
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    if (!s) return 1;
    fprintf(f, "%s\n", s);
    free(s);
    return 0;
}

/* --input: a NumPy .npy file (format 1.0 / 2.0 / 3.0, C order, '<f4',
 * '<i8' or '|b1') into v (data malloc'ed). 0 on success, else why says. */
static int load_npy(const char *path, vx_value *v, char *why, size_t wn) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, wn, "%s: cannot read", path);
        return 1;
    }
    unsigned char pre[12];
    size_t hl = 0, pl;
    int rc = 1;
    char *hdr = NULL;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        snprintf(why, wn, "%s: not a .npy file", path);
        goto done;
    }
    if (pre[6] == 1) {
        hl = pre[8] | (size_t)pre[9] << 8;
        pl = 10;
    } else {
        if (fread(pre + 10, 1, 2, f) != 2) goto bad;
        hl = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
        pl = 12;
    }
    (void)pl;
    if (hl > (1u << 20) || !(hdr = calloc(1, hl + 1)) || fread(hdr, 1, hl, f) != hl) goto bad;
    const char *d = strstr(hdr, "'descr'"), *fo = strstr(hdr, "'fortran_order'"), *sh = strstr(hdr, "'shape'");
    if (!d || !fo || !sh) goto bad;
    d = strchr(d + 7, '\'');
    if (!d) goto bad;
    size_t es;
    if (strncmp(d, "'<f4'", 5) == 0) v->dtype = VX_F32, es = 4;
    else if (strncmp(d, "'<i8'", 5) == 0) v->dtype = VX_I64, es = 8;
    else if (strncmp(d, "'|b1'", 5) == 0) v->dtype = VX_BOOL, es = 1;
    else {
        snprintf(why, wn, "%s: dtype %.5s (float32, int64 or bool wanted)", path, d);
        goto done;
    }
    fo = strchr(fo + 15, ':');
    while (fo && *++fo == ' ') {}
    if (!fo || strncmp(fo, "False", 5) != 0) {
        snprintf(why, wn, "%s: Fortran order is not supported", path);
        goto done;
    }
    sh = strchr(sh, '(');
    if (!sh) goto bad;
    v->rank = 0;
    v->numel = 1;
    for (const char *p = sh + 1; *p && *p != ')';) {
        char *end;
        long long x = strtoll(p, &end, 10);
        if (end == p) {
            p++;
            continue;
        }
        if (v->rank == 8 || x < 0) goto bad;
        v->dims[v->rank++] = x;
        v->numel *= x;
        p = end;
    }
    size_t bytes = (size_t)v->numel * es;
    v->data = malloc(bytes ? bytes : 1);
    if (!v->data || fread(v->data, 1, bytes, f) != bytes) {
        snprintf(why, wn, "%s: short file (%lld elements expected)", path, (long long)v->numel);
        goto done;
    }
    rc = 0;
    goto done;
bad:
    snprintf(why, wn, "%s: malformed .npy header", path);
done:
    if (rc) {
        free(v->data);
        v->data = NULL;
    }
    free(hdr);
    fclose(f);
    return rc;
}

/* --dump-outputs: DIR/output_K.bin and DIR/outputs.json. */
static int dump_outputs(const char *dir, const verify_request *q, const vx_result *r) {
    static const char *dt_names[] = {"float32", "int64", "bool"};
    mkdir(dir, 0777);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", q->model);
    cJSON_AddStringToObject(root, "mode", est_mode_name(q->opt.mode));
    cJSON *arr = cJSON_AddArrayToObject(root, "outputs");
    int bad = 0;
    for (size_t k = 0; k < r->n_outputs; k++) {
        const vx_value *v = &r->outputs[k];
        char file[64], path[4096];
        snprintf(file, sizeof file, "output_%zu.bin", k);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "name", v->name ? v->name : "");
        cJSON_AddStringToObject(o, "dtype", dt_names[v->dtype]);
        cJSON *shape = cJSON_AddArrayToObject(o, "shape");
        for (int i = 0; i < v->rank; i++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)v->dims[i]));
        cJSON_AddStringToObject(o, "file", file);
        FILE *f = fopen(path, "wb");
        size_t bytes = v->data ? (size_t)v->numel * (v->dtype == VX_F32 ? 4 : v->dtype == VX_I64 ? 8 : 1) : 0;
        if (!f || fwrite(v->data ? v->data : "", 1, bytes, f) != bytes) bad = 1;
        if (f && fclose(f)) bad = 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/outputs.json", dir);
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    FILE *f = fopen(path, "w");
    if (!s || !f || fprintf(f, "%s\n", s) < 0) bad = 1;
    if (f && fclose(f)) bad = 1;
    free(s);
    if (bad) fprintf(stderr, "memest: %s: writing the outputs failed: %s\n", term(dir), strerror(errno));
    return bad;
}

static void print_oom(FILE *f, const verify_request *q, const vx_result *r, const est_report *rep) {
    char a[32], b[32], c[32];
    if (q->format == FORMAT_JSON) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "model", q->model);
        cJSON_AddBoolToObject(root, "fits", 0);
        cJSON_AddNumberToObject(root, "requested_bytes", (double)r->failed_request);
        cJSON_AddNumberToObject(root, "free_bytes", (double)r->free_at_failure);
        cJSON_AddNumberToObject(root, "device_total", (double)r->device_total);
        cJSON_AddStringToObject(root, "phase", vx_phase_name(r->fail_phase));
        cJSON_AddStringToObject(root, "layer", r->fail_layer);
        if (rep) cJSON_AddNumberToObject(root, "estimated_peak", (double)est_report_peak(rep)->bytes);
        cJSON_AddStringToObject(root, "message", r->message);
        char *s = cJSON_Print(root);
        cJSON_Delete(root);
        if (s) fprintf(f, "%s\n", s);
        free(s);
        return;
    }
    fprintf(f, "model: %s\ndevice: %s (%s)\n", q->model, r->device_name, human_bytes(c, sizeof c, r->device_total));
    fprintf(f, "does not fit: an allocation of %s failed with %s free (%s%s%s)\n",
            human_bytes(a, sizeof a, r->failed_request), human_bytes(b, sizeof b, r->free_at_failure),
            vx_phase_name(r->fail_phase), r->fail_layer[0] ? ", node " : "", r->fail_layer);
    if (rep) fprintf(f, "estimated peak: %s\n", human_bytes(a, sizeof a, est_report_peak(rep)->bytes));
}

int run_verify(const verify_request *q, const est_graph *g) {
    if (q->opt.dtype != EST_DT_FLOAT && q->opt.dtype != EST_DT_BFLOAT16 && q->opt.dtype != EST_DT_FLOAT16) {
        fprintf(stderr, "memest: verify runs float32, bfloat16 or float16 (--dtype %s is estimated, not measured)\n",
                est_dtype_name(q->opt.dtype));
        return EXIT_USAGE;
    }
    if (q->format == FORMAT_CSV) {
        fprintf(stderr, "memest: verify prints table or json\n");
        return EXIT_USAGE;
    }
    est_error err;
    est_report *rep = NULL;
    if (est_estimate(g, &q->opt, &rep, &err) != EST_OK) {
        fprintf(stderr, "memest: %s\n", err.message);
        return EXIT_FAIL;
    }
    char why[512];
    vx_module m;
    if (!vx_module_open(&m, why, sizeof why)) {
        fprintf(stderr, "memest: verify needs the CUDA runtime and a GPU: cannot load the verify module: %s\n", why);
        est_report_free(rep);
        return EXIT_FAIL;
    }
    vx_options o;
    m.options_init(&o);
    o.mode = q->opt.mode;
    o.optimizer = q->opt.optimizer;
    o.dtype = q->opt.dtype;
    o.amp = q->opt.amp;
    o.batch = q->opt.batch;
    o.dims = q->opt.dims;
    o.n_dims = q->opt.n_dims;
    /* --input values */
    vx_value in[64];
    size_t n_in = 0;
    int in_rc = EXIT_OK;
    for (size_t i = 0; i < q->n_inputs && i < 64 && in_rc == EXIT_OK; i++) {
        const char *spec = q->inputs[i], *file = spec, *name = NULL;
        const char *eq = strchr(spec, '=');
        size_t ng = est_graph_input_count(g);
        if (eq)
            for (size_t k = 0; k < ng; k++) {
                const char *gn = est_graph_input_name(g, k);
                if (gn && strlen(gn) == (size_t)(eq - spec) && strncmp(gn, spec, (size_t)(eq - spec)) == 0) {
                    name = gn;
                    file = eq + 1;
                }
            }
        if (!name) {
            if (i >= ng) {
                fprintf(stderr, "memest: --input %s: the graph has %zu inputs\n", spec, ng);
                in_rc = EXIT_USAGE;
                break;
            }
            name = est_graph_input_name(g, i);
        }
        memset(&in[n_in], 0, sizeof in[n_in]);
        in[n_in].name = name;
        if (load_npy(file, &in[n_in], why, sizeof why)) {
            fprintf(stderr, "memest: --input %s\n", why);
            in_rc = EXIT_USAGE;
            break;
        }
        n_in++;
    }
    if (in_rc != EXIT_OK) {
        for (size_t i = 0; i < n_in; i++) free(in[i].data);
        est_report_free(rep);
        return in_rc;
    }
    o.inputs = in;
    o.n_inputs = n_in;
    o.fetch_outputs = q->dump_dir != NULL;
    /* --trainable / --freeze: the estimate resolved which parameters train */
    size_t n_params = est_report_param_count(rep), n_frozen = 0;
    const char **frozen = n_params ? calloc(n_params, sizeof *frozen) : NULL;
    if (n_params && !frozen) {
        fprintf(stderr, "memest: out of memory\n");
        for (size_t i = 0; i < n_in; i++) free(in[i].data);
        est_report_free(rep);
        return EXIT_FAIL;
    }
    for (size_t i = 0; i < n_params; i++)
        if (!est_report_param(rep, i)->trainable) frozen[n_frozen++] = est_report_param(rep, i)->name;
    o.frozen = frozen;
    o.n_frozen = n_frozen;
    vx_result r;
    vx_status st = m.run(g, &o, &r);
    free(frozen);
    for (size_t i = 0; i < n_in; i++) free(in[i].data);
    out_file out;
    if (!out_open(&out, q->out_path)) {
        m.result_free(&r);
        est_report_free(rep);
        return EXIT_FAIL;
    }
    FILE *f = out.f;
    int rc;
    if (st == VX_ENOGPU) {
        fprintf(stderr, "memest: verify needs a CUDA GPU: %s\n", term(r.message));
        rc = EXIT_FAIL;
    } else if (st == VX_EDEVICE) {
        fprintf(stderr, "memest: verify: %s\n", term(r.message));
        rc = EXIT_FAIL;
    } else if (st == VX_EOOM) {
        print_oom(f, q, &r, rep);
        rc = EXIT_FAIL;
    } else if (st != VX_OK) {
        fprintf(stderr, "memest: verify %s: %s\n", term(q->model), term(r.message));
        rc = EXIT_FAIL;
    } else {
        double e = rel_err(est_report_peak(rep)->bytes, r.peak);
        bool ok = isfinite(e) && fabs(e) * 100.0 <= q->tolerance;
        if (q->format == FORMAT_JSON) print_json_v(f, q, rep, &r, ok, e);
        else print_table_v(f, q, rep, &r, ok, e);
        rc = ok ? EXIT_OK : EXIT_FAIL;
        if (q->dump_dir && dump_outputs(q->dump_dir, q, &r)) rc = EXIT_FAIL;
    }
    if (!out_close(&out, false)) rc = EXIT_FAIL;
    m.result_free(&r);
    vx_module_close(&m);
    est_report_free(rep);
    return rc;
}

#endif
