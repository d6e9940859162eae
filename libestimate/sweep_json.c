/* sweep_json.c: a sweep's points as memest --sweep --format json writes them
 * (est_sweep_to_json; docs/capacity.md). */
#include <string.h>

#include "ir.h"
#include "report_json.h"

static void write_point(json_writer *w, const char *dim, const est_point *pt, const est_fit *fit) {
    jw_begin_object(w, NULL);
    jw_string(w, "dim", dim);
    jw_i64(w, "value", pt->value);
    if (pt->overflow) {
        jw_null(w, "peak_bytes");
        jw_bool(w, "overflow", true);
    } else {
        jw_u64(w, "peak_bytes", pt->peak.bytes);
        jw_string(w, "peak_phase", est_phase_name(pt->peak.phase));
        jw_u64(w, "params_bytes", pt->totals.params_bytes);
        jw_u64(w, "buffers_bytes", pt->totals.buffers_bytes);
        jw_u64(w, "grads_bytes", pt->totals.grads_bytes);
        jw_u64(w, "optimizer_bytes", pt->totals.optimizer_bytes);
        jw_u64(w, "activations_bytes", pt->totals.activations_bytes);
        jw_u64(w, "temp_bytes", pt->totals.temp_bytes);
        jw_u64(w, "reserved_bytes", pt->totals.reserved_bytes);
        jw_u64(w, "param_count", pt->totals.param_count);
        jw_u64(w, "flops_forward", pt->totals.flops_forward);
        jw_u64(w, "flops_backward", pt->totals.flops_backward);
    }
    if (fit) {
        jw_bool(w, "fits", est_point_fits(fit, pt) != 0);
        if (pt->overflow) jw_null(w, "headroom_bytes");
        else jw_i64(w, "headroom_bytes", est_fit_headroom(fit, pt->peak.bytes));
        if (!pt->overflow) est__jw_oom(w, "allocator_out_of_memory", &pt->totals);
    }
    jw_end_object(w);
}

est_status est_sweep_to_json(const est_options *opt, const char *dim, const est_point *points, size_t n,
                             const est_json_options *o, char **out, est_error *err) {
    if (!out) return est__fail(err, EST_EINVAL, "est_sweep_to_json: out is NULL");
    *out = NULL;
    if (!opt || !dim || (n && !points)) return est__fail(err, EST_EINVAL, "est_sweep_to_json: options, dim or points missing");
    est_json_options none;
    est_json_options_init(&none);
    if (!o) o = &none;
    bool is_batch = strcmp(dim, "batch") == 0;
    json_writer w;
    jw_init(&w);
    jw_begin_object(&w, NULL);
    jw_string(&w, "model", o->model);
    jw_string(&w, "mode", est_mode_name(opt->mode));
    jw_string(&w, "optimizer", opt->mode == EST_MODE_TRAIN ? est_optimizer_name(opt->optimizer) : NULL);
    jw_string(&w, "dtype", est_dtype_name(opt->dtype));
    if (opt->batch > 0 && !is_batch) jw_i64(&w, "batch", opt->batch);
    else jw_null(&w, "batch");
    jw_begin_object(&w, "dims"); /* the fixed bindings: the swept dim is in each point */
    for (size_t i = 0; i < opt->n_dims; i++)
        if (strcmp(opt->dims[i].name, dim) != 0) jw_i64(&w, opt->dims[i].name, opt->dims[i].value);
    jw_end_object(&w);
    if (o->fit) est__jw_fit(&w, o, 0, NULL);
    jw_begin_array(&w, "sweep");
    for (size_t i = 0; i < n; i++) write_point(&w, dim, &points[i], o->fit);
    jw_end_array(&w);
    jw_end_object(&w);
    return jw_finish(&w, out, err);
}
