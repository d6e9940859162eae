/*
 * report_json.c: a report as memest --format json writes it
 * (est_report_to_json; docs/output-format.md). The CLI prints this text and
 * the Python module parses it, so both say the same thing byte for byte.
 */
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "json_writer.h"
#include "report_json.h"

void est_json_options_init(est_json_options *o) {
    if (o) memset(o, 0, sizeof *o);
}

static void write_tensor(json_writer *w, const est_tensor_info *t) {
    jw_begin_object(w, NULL);
    jw_string(w, "name", t->name);
    jw_string(w, "dtype", est_dtype_name(t->dtype));
    jw_i64_array(w, "shape", t->shape, t->rank);
    jw_u64(w, "bytes", t->bytes);
    jw_end_object(w);
}

void est__jw_oom(json_writer *w, const char *key, const est_totals *t) {
    if (!t->out_of_memory) {
        jw_null(w, key);
        return;
    }
    jw_begin_object(w, key);
    jw_string(w, "phase", est_phase_name(t->oom_phase));
    jw_string(w, "layer", t->oom_layer);
    jw_end_object(w);
}

void est__jw_fit(json_writer *w, const est_json_options *o, uint64_t peak, const est_totals *t) {
    jw_begin_object(w, "fit");
    jw_string(w, "gpu", o->gpu);
    jw_u64(w, "gpu_memory_bytes", o->fit->gpu_bytes);
    jw_u64(w, "reserve_bytes", o->fit->reserve_bytes);
    jw_u64(w, "usable_bytes", est_fit_usable(o->fit));
    if (t) {
        jw_bool(w, "fits", est_fit_ok(o->fit, peak, t) != 0);
        jw_i64(w, "headroom_bytes", est_fit_headroom(o->fit, peak));
        est__jw_oom(w, "allocator_out_of_memory", t);
    }
    jw_end_object(w);
}

/* null for no patterns, else the list as given. */
static void write_patterns(json_writer *w, const char *key, const char *const *patterns, size_t n) {
    if (!n) {
        jw_null(w, key);
        return;
    }
    jw_begin_array(w, key);
    for (size_t i = 0; i < n; i++) jw_string(w, NULL, patterns[i]);
    jw_end_array(w);
}

/* Every parameter, with both its names and whether it trains. */
static void write_params(json_writer *w, const est_report *r) {
    jw_begin_array(w, "parameters");
    for (size_t i = 0; i < est_report_param_count(r); i++) {
        const est_param_info *p = est_report_param(r, i);
        jw_begin_object(w, NULL);
        jw_string(w, "name", p->name);
        jw_string(w, "torch_name", p->torch_name);
        jw_i64_array(w, "shape", p->shape, p->rank);
        jw_string(w, "dtype", est_dtype_name(p->dtype));
        jw_u64(w, "count", p->elements);
        jw_u64(w, "bytes", p->bytes);
        /* the gradient the step keeps for it (its .grad); 0 when frozen or in inference */
        jw_u64(w, "grad_bytes", est_report_mode(r) == EST_MODE_TRAIN && p->trainable ? p->bytes : 0);
        jw_bool(w, "trainable", p->trainable);
        jw_end_object(w);
    }
    jw_end_array(w);
}

static void write_checkpoint(json_writer *w, const est_report *r, const est_checkpoint *ck) {
    const est_totals *t = est_report_totals(r);
    if (!t->checkpoint_segments || !ck) {
        jw_null(w, "checkpoint");
        return;
    }
    jw_begin_object(w, "checkpoint");
    if (ck->every > 0) {
        jw_i64(w, "every", ck->every);
    } else {
        jw_begin_array(w, "prefixes");
        for (size_t i = 0; i < ck->n_prefixes; i++) jw_string(w, NULL, ck->prefixes[i]);
        jw_end_array(w);
    }
    jw_u64(w, "segments", t->checkpoint_segments);
    jw_end_object(w);
}

static void write_layer_time(json_writer *w, const est_time *t, size_t i) {
    const est_layer_time *lt = est_time_layer(t, i);
    if (!lt) return;
    jw_double(w, "time_forward_s", lt->forward_s);
    jw_double(w, "time_backward_s", lt->backward_s);
    jw_string(w, "time_forward_bound", est_bound_name(lt->forward_bound));
    jw_string(w, "time_backward_bound", est_bound_name(lt->backward_bound));
}

static void write_layer(json_writer *w, const est_layer *L, const est_time *time, size_t i) {
    jw_begin_object(w, NULL);
    jw_string(w, "name", L->name);
    jw_string(w, "op", L->op);
    jw_string(w, "domain", L->domain);
    jw_string(w, "module", L->module);
    jw_begin_array(w, "inputs");
    for (size_t k = 0; k < L->n_inputs; k++) write_tensor(w, &L->inputs[k]);
    jw_end_array(w);
    jw_begin_array(w, "outputs");
    for (size_t k = 0; k < L->n_outputs; k++) write_tensor(w, &L->outputs[k]);
    jw_end_array(w);
    jw_u64(w, "param_count", L->param_count);
    jw_u64(w, "param_bytes", L->param_bytes);
    jw_u64(w, "buffer_bytes", L->buffer_bytes);
    jw_u64(w, "output_bytes", L->output_bytes);
    jw_u64(w, "flops_forward", L->flops_forward);
    jw_u64(w, "flops_backward", L->flops_backward);
    jw_u64(w, "saved_bytes", L->saved_bytes);
    jw_u64(w, "temp_bytes", L->temp_bytes);
    jw_bool(w, "shape_only", L->shape_only);
    if (L->segment >= 0) jw_i64(w, "segment", L->segment);
    else jw_null(w, "segment");
    jw_bool(w, "recomputed", L->recomputed);
    if (time) write_layer_time(w, time, i);
    jw_end_object(w);
}

/* "depth" and "modules"; false when the rollup ran out of memory. */
static bool write_modules(json_writer *w, const est_report *r, int64_t depth, const est_time *time) {
    est_modules *m = NULL;
    if (est_modules_rollup(r, depth, time, &m, NULL) != EST_OK) return false;
    jw_i64(w, "depth", depth);
    jw_begin_array(w, "modules");
    for (size_t k = 0; k < est_modules_count(m); k++) {
        const est_module_row *row = est_modules_row(m, k);
        jw_begin_object(w, NULL);
        jw_string(w, "module", row->name);
        jw_u64(w, "layers", row->layers);
        jw_u64(w, "param_count", row->param_count);
        jw_u64(w, "param_bytes", row->param_bytes);
        jw_u64(w, "output_bytes", row->output_bytes);
        jw_u64(w, "saved_bytes", row->saved_bytes);
        jw_u64(w, "flops_forward", row->flops_forward);
        jw_u64(w, "flops_backward", row->flops_backward);
        if (time) {
            jw_double(w, "time_forward_s", row->time_forward_s);
            jw_double(w, "time_backward_s", row->time_backward_s);
        }
        jw_end_object(w);
    }
    jw_end_array(w);
    est_modules_free(m);
    return true;
}

static void write_totals(json_writer *w, const est_report *r) {
    const est_totals *t = est_report_totals(r);
    jw_begin_object(w, "totals");
    jw_u64(w, "layer_count", est_report_layer_count(r));
    jw_u64(w, "param_count", t->param_count);
    jw_u64(w, "param_bytes", t->param_bytes);
    jw_u64(w, "trainable_param_count", t->trainable_param_count);
    jw_u64(w, "trainable_param_bytes", t->trainable_param_bytes);
    jw_u64(w, "buffer_count", t->buffer_count);
    jw_u64(w, "buffer_bytes", t->buffer_bytes);
    jw_u64(w, "constant_bytes", t->constant_bytes);
    jw_u64(w, "input_bytes", t->input_bytes);
    jw_u64(w, "output_bytes", t->output_bytes);
    jw_u64(w, "flops_forward", t->flops_forward);
    jw_u64(w, "flops_backward", t->flops_backward);
    jw_u64(w, "params_bytes", t->params_bytes);
    jw_u64(w, "buffers_bytes", t->buffers_bytes);
    jw_u64(w, "grads_bytes", t->grads_bytes);
    jw_u64(w, "optimizer_bytes", t->optimizer_bytes);
    jw_u64(w, "activations_bytes", t->activations_bytes);
    jw_u64(w, "temp_bytes", t->temp_bytes);
    jw_u64(w, "peak_bytes", t->peak_bytes);
    jw_u64(w, "flops_recompute", t->flops_recompute);
    jw_u64(w, "reserved_bytes", t->reserved_bytes);
    jw_end_object(w);
}

static void write_tp_pairs(json_writer *w, const est_report *r) {
    jw_begin_array(w, "tp_pairs");
    for (size_t i = 0; i < est_report_tp_pair_count(r); i++) {
        const est_tp_pair *pair = est_report_tp_pair(r, i);
        jw_begin_object(w, NULL);
        jw_string(w, "block", pair->block);
        jw_begin_array(w, "columns");
        for (size_t k = 0; k < pair->n_columns; k++) jw_string(w, NULL, pair->columns[k]);
        jw_end_array(w);
        jw_string(w, "row", pair->row);
        jw_end_object(w);
    }
    jw_end_array(w);
}

/* "parallel": null on one GPU. */
static void write_parallel(json_writer *w, const est_report *r) {
    const est_parallel *p = est_report_parallel(r);
    if (p->world_size <= 1 && p->strategy == EST_STRATEGY_NONE) {
        jw_null(w, "parallel");
        return;
    }
    const est_comm *c = est_report_comm(r);
    jw_begin_object(w, "parallel");
    jw_string(w, "strategy", est_strategy_name(p->strategy));
    jw_i64(w, "world_size", p->world_size);
    jw_i64(w, "rank", p->rank);
    if (p->strategy == EST_STRATEGY_HSDP) jw_i64(w, "shard_group", p->shard_group);
    else jw_null(w, "shard_group");
    jw_bool(w, "grad_as_bucket_view", p->grad_as_bucket_view != 0);
    jw_bool(w, "offload", p->offload != 0);
    jw_i64(w, "tp", p->tp);
    jw_bool(w, "sequence_parallel", p->sequence_parallel != 0);
    write_tp_pairs(w, r);
    jw_u64(w, "buckets", c->buckets);
    jw_u64(w, "first_bucket_held_bytes", c->first_bucket_held_bytes);
    jw_u64(w, "first_bucket_bytes", c->first_bucket_bytes);
    jw_u64(w, "peak_first_bucket_held_bytes", c->peak_first_bucket_held_bytes);
    jw_u64(w, "peak_first_bucket_released_bytes", c->peak_first_bucket_released_bytes);
    jw_u64(w, "groups", c->groups);
    jw_begin_object(w, "comm_bytes");
    jw_u64(w, "all_reduce", c->all_reduce_bytes);
    jw_u64(w, "all_gather", c->all_gather_bytes);
    jw_u64(w, "reduce_scatter", c->reduce_scatter_bytes);
    jw_u64(w, "broadcast", c->broadcast_bytes);
    jw_end_object(w);
    jw_end_object(w);
}

static void write_peak(json_writer *w, const est_report *r) {
    const est_peak *p = est_report_peak(r);
    jw_begin_object(w, "peak");
    jw_u64(w, "bytes", p->bytes);
    jw_string(w, "phase", est_phase_name(p->phase));
    jw_string(w, "layer", p->layer);
    jw_string(w, "module", p->module);
    jw_begin_object(w, "breakdown");
    for (int c = 0; c < EST_CAT_COUNT; c++) jw_u64(w, est_category_name((est_category)c), est_peak_category(p, (est_category)c));
    jw_end_object(w);
    est__jw_live(w, r);
    jw_end_object(w);
}

static void write_time(json_writer *w, const est_time *t) {
    const est_step_time *st = est_time_step(t);
    const est_host *h = est_time_host(t);
    jw_begin_object(w, "time");
    jw_string(w, "gpu", st->device->name);
    jw_double(w, "step_s", st->step_s);
    jw_string(w, "bound", est_step_time_bound(st));
    jw_double(w, "host_s", st->host_s);
    jw_double(w, "device_s", st->device_total_s);
    jw_begin_object(w, "phases");
    for (int p = 0; p < EST_PHASE_COUNT; p++) {
        jw_begin_object(w, est_phase_name((est_phase)p));
        jw_double(w, "wall_s", st->phase_s[p]);
        jw_double(w, "device_s", st->device_s[p]);
        jw_end_object(w);
    }
    jw_end_object(w);
    jw_begin_object(w, "host");
    jw_double(w, "forward_op_s", h->forward_op_s);
    jw_double(w, "forward_param_s", h->forward_param_s);
    jw_double(w, "backward_op_s", h->backward_op_s);
    jw_double(w, "backward_param_s", h->backward_param_s);
    jw_double(w, "optimizer_param_s", h->optimizer_param_s);
    jw_end_object(w);
    jw_end_object(w);
}

/* --max-batch's answer, after the report at that batch. */
static void write_max_batch(json_writer *w, const est_max_batch_result *mb, int64_t cap) {
    jw_begin_object(w, "max_batch");
    jw_i64(w, "batch", mb->batch);
    if (mb->batch) jw_u64(w, "peak_bytes", mb->fits.peak.bytes);
    else jw_null(w, "peak_bytes");
    if (mb->next_batch) jw_i64(w, "next_batch", mb->next_batch);
    else jw_null(w, "next_batch");
    if (mb->next_batch && !mb->next.overflow) jw_u64(w, "next_peak_bytes", mb->next.peak.bytes);
    else jw_null(w, "next_peak_bytes");
    jw_i64(w, "search_cap", cap);
    jw_i64(w, "estimates", mb->estimates);
    jw_end_object(w);
}

/* The echo of the options: what was asked, before what was found. */
static void write_request(json_writer *w, const est_report *r, const est_options *opt) {
    jw_string(w, "mode", est_mode_name(est_report_mode(r)));
    jw_string(w, "optimizer",
              est_report_mode(r) == EST_MODE_TRAIN ? est_optimizer_name(est_report_optimizer(r)) : NULL);
    jw_string(w, "dtype", est_dtype_name(est_report_dtype(r)));
    if (est_report_amp(r) != EST_AMP_NONE) jw_string(w, "amp", est_report_amp(r) == EST_AMP_BF16 ? "bf16" : "fp16");
    write_checkpoint(w, r, opt ? &opt->checkpoint : NULL);
    jw_i64(w, "grad_accum", opt && opt->grad_accum > 1 ? opt->grad_accum : 1);
    write_parallel(w, r);
    const est_param_filter *f = opt ? &opt->params : NULL;
    write_patterns(w, "trainable", f ? f->trainable : NULL, f ? f->n_trainable : 0);
    write_patterns(w, "freeze", f ? f->frozen : NULL, f ? f->n_frozen : 0);
    if (est_report_batch(r) > 0) jw_i64(w, "batch", est_report_batch(r));
    else jw_null(w, "batch");
    jw_begin_object(w, "dims");
    for (size_t i = 0; i < est_report_dim_count(r); i++) jw_i64(w, est_report_dim(r, i)->name, est_report_dim(r, i)->value);
    jw_end_object(w);
}

/* The report's members into the root object; false when out of memory. */
static bool write_report(json_writer *w, const est_report *r, const est_json_options *o) {
    jw_string(w, "model", o->model);
    write_request(w, r, o->options);
    jw_begin_array(w, "layers");
    for (size_t i = 0; i < est_report_layer_count(r); i++) write_layer(w, est_report_layer(r, i), o->time, i);
    jw_end_array(w);
    write_params(w, r);
    if (o->depth > 0 && !write_modules(w, r, o->depth, o->time)) return false;
    jw_begin_array(w, "outputs");
    for (size_t k = 0; k < est_report_output_count(r); k++) write_tensor(w, est_report_output(r, k));
    jw_end_array(w);
    write_totals(w, r);
    write_peak(w, r);
    est__jw_step(w, r, o->timeline != 0);
    if (o->fit) est__jw_fit(w, o, est_report_peak(r)->bytes, est_report_totals(r));
    if (o->time) write_time(w, o->time);
    if (o->max_batch) write_max_batch(w, o->max_batch, o->max_batch_cap);
    return true;
}

/* The whole document into w, which keeps it or sinks it. */
static est_status write_document(json_writer *w, const est_report *r, const est_json_options *o, char **out,
                                 est_error *err) {
    est_json_options none;
    est_json_options_init(&none);
    jw_begin_object(w, NULL);
    if (!write_report(w, r, o ? o : &none)) w->no_memory = true;
    jw_end_object(w);
    return jw_finish(w, out, err);
}

est_status est_report_to_json(const est_report *r, const est_json_options *o, char **out, est_error *err) {
    if (!out) return est__fail(err, EST_EINVAL, "est_report_to_json: out is NULL");
    *out = NULL;
    if (!r) return est__fail(err, EST_EINVAL, "est_report_to_json: report is NULL");
    json_writer w;
    jw_init(&w);
    return write_document(&w, r, o, out, err);
}

est_status est_report_write_json(const est_report *r, const est_json_options *o, est_write_fn write, void *ctx,
                                 est_error *err) {
    if (!r || !write) return est__fail(err, EST_EINVAL, "est_report_write_json: %s is NULL", r ? "write" : "report");
    json_writer w;
    jw_init_sink(&w, write, ctx);
    char *none = NULL;
    return write_document(&w, r, o, &none, err);
}
