/* output.c: renders an est_report as a table, CSV or JSON. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "term.h"

const char *human_bytes(char *buf, size_t n, uint64_t bytes) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, n, "%" PRIu64 " B", bytes);
    else snprintf(buf, n, "%.2f %s", v, units[u]);
    return buf;
}

const char *human_count(char *buf, size_t n, uint64_t v) {
    static const char *const units[] = {"", "K", "M", "G", "T", "P", "E"};
    double x = (double)v;
    int u = 0;
    while (x >= 1000.0 && u < 6) {
        x /= 1000.0;
        u++;
    }
    if (v == 0) snprintf(buf, n, "-");
    else if (u == 0) snprintf(buf, n, "%" PRIu64, v);
    else snprintf(buf, n, "%.2f%s", x, units[u]);
    return buf;
}

const char *dims_string(char *buf, size_t n, int rank, const int64_t *shape) {
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < rank && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%" PRId64, d ? "x" : "", shape[d]);
    return buf;
}

const char *shape_string(char *buf, size_t n, const est_tensor_info *t) {
    if (t->rank != 0) return dims_string(buf, n, t->rank, t->shape);
    snprintf(buf, n, "scalar");
    return buf;
}

est_fit fit_of(const fit_info *fit) { return (est_fit){.gpu_bytes = fit->gpu_bytes, .reserve_bytes = fit->reserve_bytes}; }

uint64_t fit_usable(const fit_info *fit) {
    est_fit f = fit_of(fit);
    return est_fit_usable(&f);
}

int64_t fit_headroom(const fit_info *fit, uint64_t peak) {
    est_fit f = fit_of(fit);
    return est_fit_headroom(&f, peak);
}

bool fit_ok(const fit_info *fit, uint64_t peak, const est_totals *t) {
    est_fit f = fit_of(fit);
    return est_fit_ok(&f, peak, t) != 0;
}

void print_fit_lines(FILE *f, const fit_info *fit, uint64_t peak, const est_totals *t) {
    char a[64], b[64], c[64];
    int64_t h = fit_headroom(fit, peak);
    fprintf(f, "  GPU             %s%s%s, reserve %s, usable %s\n", fit->gpu ? fit->gpu : "",
            fit->gpu ? ": " : "", human_bytes(a, sizeof a, fit->gpu_bytes),
            human_bytes(b, sizeof b, fit->reserve_bytes), human_bytes(c, sizeof c, fit_usable(fit)));
    if (h >= 0 && t->out_of_memory)
        fprintf(f, "  FITS            NO: the peak fits (headroom %s), but the caching allocator's\n"
                   "                  segments do not: out of memory during %s%s%s (fragmentation)\n",
                human_bytes(a, sizeof a, (uint64_t)h), est_phase_name(t->oom_phase), t->oom_layer[0] ? ", at " : "",
                t->oom_layer);
    else if (h >= 0) fprintf(f, "  FITS            yes, headroom %s\n", human_bytes(a, sizeof a, (uint64_t)h));
    else fprintf(f, "  FITS            NO, short by %s\n", human_bytes(a, sizeof a, (uint64_t)-(h + 1) + 1));
}

static void outputs_string(char *buf, size_t n, const est_layer *L) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < L->n_outputs && used + 1 < n; k++) {
        char s[256];
        used += (size_t)snprintf(buf + used, n - used, "%s%s", k ? ", " : "", shape_string(s, sizeof s, &L->outputs[k]));
    }
}

static int name_width(const est_report *r, bool all) {
    int w = 5;
    for (size_t i = 0; i < est_report_layer_count(r); i++) {
        const est_layer *L = est_report_layer(r, i);
        if (L->shape_only && !all) continue;
        int len = (int)strlen(term(L->label));
        if (len > w) w = len;
    }
    return w > 44 ? 44 : w;
}

static void print_name(FILE *f, const char *name, int width) {
    name = term(name);
    int len = (int)strlen(name);
    if (len <= width) fprintf(f, "%-*s", width, name);
    else fprintf(f, "...%s", name + len - (width - 3)); /* keep the informative tail */
}

/* A layer's label within its block: "q_proj" for "layers.0.self_attn.q_proj". */
static const char *in_block(const char *label, const char *block, size_t len) {
    return len && strncmp(label, block, len) == 0 && label[len] == '.' ? label + len + 1 : label;
}

/* The strategy line and the step's communication, under the memory header. */
static void print_parallel(FILE *f, const est_report *r) {
    const est_parallel *p = est_report_parallel(r);
    if (p->world_size <= 1 && p->strategy == EST_STRATEGY_NONE) return;
    const est_comm *c = est_report_comm(r);
    char a[64];
    fprintf(f, "  per GPU of %lld, ", (long long)p->world_size);
    if (p->strategy != EST_STRATEGY_NONE) fprintf(f, "%s%s", est_strategy_name(p->strategy), p->tp > 1 ? " x " : "");
    if (p->tp > 1) fprintf(f, "tp %lld%s", (long long)p->tp, p->sequence_parallel ? " (sequence parallel)" : "");
    if (p->strategy == EST_STRATEGY_HSDP) fprintf(f, " (shard groups of %lld)", (long long)p->shard_group);
    if (c->buckets) fprintf(f, ": %" PRIu64 " gradient buckets%s", c->buckets, p->grad_as_bucket_view ? " (the .grad are views)" : "");
    if (c->groups) fprintf(f, ": %" PRIu64 " parameter groups%s", c->groups, p->offload ? ", offloaded to the host" : "");
    fprintf(f, "\n  communication   a step moves");
    bool any = false;
    const struct {
        const char *what;
        uint64_t bytes;
    } moves[] = {{"all-reduce", c->all_reduce_bytes}, {"all-gather", c->all_gather_bytes},
                 {"reduce-scatter", c->reduce_scatter_bytes}, {"broadcast", c->broadcast_bytes}};
    for (size_t k = 0; k < sizeof moves / sizeof *moves; k++)
        if (moves[k].bytes) {
            fprintf(f, "%s %s %s", any ? "," : "", moves[k].what, human_bytes(a, sizeof a, moves[k].bytes));
            any = true;
        }
    fprintf(f, "%s\n", any ? "" : " nothing (one GPU per group)");
    if (c->first_bucket_held_bytes)
        fprintf(f, "  first bucket    %s, the first iteration's, held through the second's forward and backward\n",
                human_bytes(a, sizeof a, c->first_bucket_held_bytes));
    size_t n = est_report_tp_pair_count(r);
    for (size_t i = 0; i < n; i++) { /* the pairs --tp split, a line each */
        const est_tp_pair *pair = est_report_tp_pair(r, i);
        size_t len = strlen(pair->block);
        fprintf(f, "%s%s: ", i ? "                  " : "  tp split        ", pair->block[0] ? term(pair->block) : "(model)");
        for (size_t k = 0; k < pair->n_columns; k++) fprintf(f, "%s%s", k ? ", " : "", term(in_block(pair->columns[k], pair->block, len)));
        fprintf(f, " -> %s\n", term(in_block(pair->row, pair->block, len)));
    }
}

int print_table(FILE *f, const est_report *r, const output_opts *o) {
    const est_totals *t = est_report_totals(r);
    char a[64], b[64];
    fprintf(f, "model: %s\n", term(o->model));
    if (est_report_dim_count(r)) {
        fprintf(f, "dims:");
        for (size_t i = 0; i < est_report_dim_count(r); i++) {
            const est_binding *d = est_report_dim(r, i);
            fprintf(f, " %s=%" PRId64, term(d->name), d->value);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
    int w = name_width(r, o->all_layers);
    fprintf(f, "%5s  %-*s  %-20s  %-24s  %10s  %11s  %11s  %10s  %10s  %11s  %10s", "#", w, "layer", "op",
            "output shape", "params", "param bytes", "output", "fwd flops", "bwd flops", "saved", "temp");
    if (o->time) fprintf(f, "  %10s  %10s", "fwd time", "bwd time");
    fputc('\n', f);
    size_t hidden = 0;
    for (size_t i = 0; i < est_report_layer_count(r); i++) {
        const est_layer *L = est_report_layer(r, i);
        if (L->shape_only && !o->all_layers) {
            hidden++;
            continue;
        }
        char shapes[512];
        outputs_string(shapes, sizeof shapes, L);
        fprintf(f, "%5zu  ", i);
        print_name(f, L->label, w);
        char fw[32], bw[32], sv[64], tp[64];
        fprintf(f, "  %-20.20s  %-24s  %10" PRIu64 "  %11s  %11s  %10s  %10s  %11s  %10s", term(L->op), shapes,
                L->param_count, L->param_bytes ? human_bytes(a, sizeof a, L->param_bytes) : "-",
                human_bytes(b, sizeof b, L->output_bytes), human_count(fw, sizeof fw, L->flops_forward),
                human_count(bw, sizeof bw, L->flops_backward),
                L->saved_bytes ? human_bytes(sv, sizeof sv, L->saved_bytes) : "-",
                L->temp_bytes ? human_bytes(tp, sizeof tp, L->temp_bytes) : "-");
        const est_layer_time *lt = est_time_layer(o->time, i);
        if (lt)
            fprintf(f, "  %10s  %10s", human_time(fw, sizeof fw, lt->forward_s), human_time(bw, sizeof bw, lt->backward_s));
        fputc('\n', f);
    }
    fprintf(f, "\n");
    if (hidden)
        fprintf(f, "%zu shape-only layers (folded to constants) not shown; --all lists them.\n\n", hidden);
    module_rollup m = {0};
    if (o->depth && rollup_modules(r, o->depth, o->time, &m)) print_modules(f, &m, o->depth, o->time != NULL);
    free_rollup(&m);
    fprintf(f, "totals\n");
    fprintf(f, "  layers          %zu\n", est_report_layer_count(r));
    fprintf(f, "  parameters      %" PRIu64 " (%s)", t->param_count, human_bytes(a, sizeof a, t->param_bytes));
    if (est_report_mode(r) != EST_MODE_TRAIN) fprintf(f, "\n");
    else if (t->trainable_param_count == t->param_count) fprintf(f, ", all train\n");
    else
        fprintf(f, ", %" PRIu64 " train (%.2f%%), the rest are frozen\n", t->trainable_param_count,
                t->param_count ? 100.0 * (double)t->trainable_param_count / (double)t->param_count : 0.0);
    fprintf(f, "  buffers         %" PRIu64 " (%s)\n", t->buffer_count, human_bytes(a, sizeof a, t->buffer_bytes));
    fprintf(f, "  constants       %s\n", human_bytes(a, sizeof a, t->constant_bytes));
    fprintf(f, "  inputs          %s\n", human_bytes(a, sizeof a, t->input_bytes));
    fprintf(f, "  layer outputs   %s (sum over all layers)\n", human_bytes(a, sizeof a, t->output_bytes));
    fprintf(f, "  flops           %s forward, %s backward\n", human_count(a, sizeof a, t->flops_forward),
            human_count(b, sizeof b, t->flops_backward));
    char accum[48] = "";
    if (o->grad_accum > 1) snprintf(accum, sizeof accum, ", %lld micro-batches a step", (long long)o->grad_accum);
    fprintf(f, "\nmemory (%s, %s%s%s%s%s)\n", est_mode_name(est_report_mode(r)), est_dtype_name(est_report_dtype(r)),
            est_report_mode(r) == EST_MODE_TRAIN ? ", optimizer " : "",
            est_report_mode(r) == EST_MODE_TRAIN ? est_optimizer_name(est_report_optimizer(r)) : "",
            est_report_amp(r) == EST_AMP_BF16 ? ", amp bf16" : est_report_amp(r) == EST_AMP_FP16 ? ", amp fp16" : "",
            accum);
    if (t->checkpoint_segments) {
        char spec[512];
        fprintf(f, "  checkpoint      %s: %" PRIu64 " segments; backward recomputes %s FLOPs of forward\n",
                checkpoint_string(spec, sizeof spec, o->checkpoint), t->checkpoint_segments,
                human_count(a, sizeof a, t->flops_recompute));
    }
    print_parallel(f, r);
    fprintf(f, "  parameters      %s\n", human_bytes(a, sizeof a, t->params_bytes));
    fprintf(f, "  buffers         %s\n", human_bytes(a, sizeof a, t->buffers_bytes));
    fprintf(f, "  gradients       %s\n", human_bytes(a, sizeof a, t->grads_bytes));
    fprintf(f, "  optimizer state %s\n", human_bytes(a, sizeof a, t->optimizer_bytes));
    fprintf(f, "  activations     %s (%s)\n", human_bytes(a, sizeof a, t->activations_bytes),
            est_report_mode(r) == EST_MODE_TRAIN ? "saved for backward, at the end of the forward pass"
                                                 : "the most alive at once in the forward pass");
    fprintf(f, "  largest temp    %s\n", human_bytes(a, sizeof a, t->temp_bytes));
    const est_peak *p = est_report_peak(r);
    fprintf(f, "  PEAK            %s  during %s%s%s\n", human_bytes(a, sizeof a, p->bytes), est_phase_name(p->phase),
            p->label[0] ? ", at layer " : "", term(p->label));
    fprintf(f, "                  made of:");
    for (int c = 0; c < EST_CAT_COUNT; c++)
        if (est_peak_category(p, (est_category)c))
            fprintf(f, " %s %s;", est_category_name((est_category)c),
                    human_bytes(a, sizeof a, est_peak_category(p, (est_category)c)));
    fprintf(f, "\n");
    fprintf(f, "  RESERVED        %s  the caching allocator's segments (max_memory_reserved; PEAK is\n"
               "                  max_memory_allocated), beyond what the process held before\n",
            human_bytes(a, sizeof a, t->reserved_bytes));
    print_live(f, r, o->top);
    if (o->fit) print_fit_lines(f, o->fit, p->bytes, t);
    if (o->time) print_time(f, o->time);
    return ferror(f) ? 1 : 0;
}

void csv_field(FILE *f, const char *s) {
    s = term(s); /* no control byte, so no newline either */
    if (!strpbrk(s, ",\"")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* Ends a row: with a time, two more fields (empty, or a layer's times). */
static void csv_eol(FILE *f, const output_opts *o, const est_layer_time *lt) {
    if (lt) fprintf(f, ",%.9g,%.9g", lt->forward_s, lt->backward_s);
    else if (o->time) fputs(",,", f);
    fputc('\n', f);
}

/* param,NAME,,,SHAPE,DTYPE,COUNT,BYTES,,GRAD_BYTES,TRAINABLE,,,,,TORCH_NAME: one row per parameter,
 * laid out like a layer row (its gradient's bytes under output_bytes, 1 or
 * 0 under shape_only, PyTorch's name under module). */
static void csv_params(FILE *f, const est_report *r, const output_opts *o) {
    bool train = est_report_mode(r) == EST_MODE_TRAIN;
    for (size_t i = 0; i < est_report_param_count(r); i++) {
        const est_param_info *p = est_report_param(r, i);
        char shape[256];
        dims_string(shape, sizeof shape, p->rank, p->shape);
        fputs("param,", f);
        csv_field(f, p->name);
        fprintf(f, ",,,%s,%s,%" PRIu64 ",%" PRIu64 ",,%" PRIu64 ",%d,,,,,", shape, est_dtype_name(p->dtype), p->elements,
                p->bytes, train && p->trainable ? p->bytes : 0, p->trainable);
        csv_field(f, p->torch_name);
        csv_eol(f, o, NULL);
    }
}

int print_csv(FILE *f, const est_report *r, const output_opts *o) {
    fprintf(f, "index,name,op,domain,output_shapes,output_dtypes,param_count,param_bytes,buffer_bytes,output_bytes,shape_only,"
               "flops_forward,flops_backward,saved_bytes,temp_bytes,module");
    if (o->time) fputs(",time_forward_s,time_backward_s", f);
    fputc('\n', f);
    for (size_t i = 0; i < est_report_layer_count(r); i++) {
        const est_layer *L = est_report_layer(r, i);
        char shapes[1024] = "", dtypes[512] = "";
        size_t us = 0, ud = 0;
        for (size_t k = 0; k < L->n_outputs; k++) {
            char s[256];
            if (us < sizeof shapes)
                us += (size_t)snprintf(shapes + us, sizeof shapes - us, "%s%s", k ? ";" : "",
                                       shape_string(s, sizeof s, &L->outputs[k]));
            if (ud < sizeof dtypes)
                ud += (size_t)snprintf(dtypes + ud, sizeof dtypes - ud, "%s%s", k ? ";" : "",
                                       est_dtype_name(L->outputs[k].dtype));
        }
        fprintf(f, "%zu,", i);
        csv_field(f, L->name);
        fputc(',', f);
        csv_field(f, L->op);
        fputc(',', f);
        csv_field(f, L->domain);
        fprintf(f, ",%s,%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64
                   ",%" PRIu64 ",",
                shapes, dtypes, L->param_count, L->param_bytes, L->buffer_bytes, L->output_bytes, L->shape_only,
                L->flops_forward, L->flops_backward, L->saved_bytes, L->temp_bytes);
        csv_field(f, L->module ? L->module : "");
        csv_eol(f, o, est_time_layer(o->time, i));
    }
    module_rollup m = {0};
    if (o->depth && rollup_modules(r, o->depth, o->time, &m)) csv_modules(f, &m, o->time != NULL);
    free_rollup(&m);
    const est_totals *t = est_report_totals(r);
    fprintf(f, "total,,,,,,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",,%" PRIu64 ",%" PRIu64 ",%" PRIu64
               ",%" PRIu64 ",",
            t->param_count, t->param_bytes, t->buffer_bytes, t->output_bytes, t->flops_forward, t->flops_backward,
            t->activations_bytes, t->temp_bytes);
    csv_eol(f, o, NULL);
    const est_peak *p = est_report_peak(r);
    fputs("peak,", f);
    fprintf(f, "%s,", est_phase_name(p->phase));
    csv_field(f, p->layer);
    fprintf(f, ",,,,,,,%" PRIu64 ",,,,,,", p->bytes);
    csv_field(f, p->module ? p->module : "");
    csv_eol(f, o, NULL);
    /* breakdown,CATEGORY,,,,,,,,BYTES: the peak's categories, laid out like it */
    for (int c = 0; c < EST_CAT_COUNT; c++) {
        fprintf(f, "breakdown,%s,,,,,,,,%" PRIu64 ",,,,,,", est_category_name((est_category)c),
                est_peak_category(p, (est_category)c));
        csv_eol(f, o, NULL);
    }
    /* reserved,,,,,,,,,BYTES: laid out like the peak row */
    fprintf(f, "reserved,,,,,,,,,%" PRIu64 ",,,,,,", t->reserved_bytes);
    csv_eol(f, o, NULL);
    if (t->checkpoint_segments) {
        /* checkpoint,SPEC,SEGMENTS,,,,,,,,,RECOMPUTED_FLOPS: the FLOPs under flops_forward */
        char spec[512];
        fputs("checkpoint,", f);
        csv_field(f, checkpoint_string(spec, sizeof spec, o->checkpoint));
        fprintf(f, ",%" PRIu64 ",,,,,,,,,%" PRIu64 ",,,,", t->checkpoint_segments, t->flops_recompute);
        csv_eol(f, o, NULL);
    }
    csv_params(f, r, o);
    if (o->fit) {
        /* fit,GPU,yes|no|frag,,,,,,,HEADROOM_BYTES: laid out like the peak row; frag: the peak is
         * within the usable memory, the allocator's segments are not */
        const char *verdict = fit_ok(o->fit, p->bytes, t) ? "yes" : fit_headroom(o->fit, p->bytes) >= 0 ? "frag" : "no";
        fputs("fit,", f);
        csv_field(f, o->fit->gpu ? o->fit->gpu : "");
        fprintf(f, ",%s,,,,,,,%" PRId64 ",,,,,,", verdict, fit_headroom(o->fit, p->bytes));
        csv_eol(f, o, NULL);
    }
    if (o->time) csv_time(f, o->time);
    return ferror(f) ? 1 : 0;
}

void write_oom(json_writer *w, const char *key, const est_totals *t) {
    if (!t->out_of_memory) {
        jw_null(w, key);
        return;
    }
    jw_begin_object(w, key);
    jw_string(w, "phase", est_phase_name(t->oom_phase));
    jw_string(w, "layer", t->oom_layer);
    jw_end_object(w);
}

const char *checkpoint_string(char *buf, size_t n, const est_checkpoint *ck) {
    buf[0] = '\0';
    if (!ck || !n) return buf;
    if (ck->every > 0) {
        snprintf(buf, n, "every=%lld", (long long)ck->every);
        return buf;
    }
    size_t used = 0;
    for (size_t i = 0; i < ck->n_prefixes && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? "," : "", ck->prefixes[i]);
    return buf;
}

static void write_tensor(json_writer *w, const est_tensor_info *t) {
    jw_begin_object(w, NULL);
    jw_string(w, "name", t->name);
    jw_string(w, "dtype", est_dtype_name(t->dtype));
    jw_begin_array(w, "shape");
    for (int d = 0; d < t->rank; d++) jw_i64(w, NULL, t->shape[d]);
    jw_end_array(w);
    jw_u64(w, "bytes", t->bytes);
    jw_end_object(w);
}

void write_fit(json_writer *w, const char *key, const fit_info *fit, uint64_t peak, const est_totals *t) {
    jw_begin_object(w, key);
    jw_string(w, "gpu", fit->gpu);
    jw_u64(w, "gpu_memory_bytes", fit->gpu_bytes);
    jw_u64(w, "reserve_bytes", fit->reserve_bytes);
    jw_u64(w, "usable_bytes", fit_usable(fit));
    if (t) {
        jw_bool(w, "fits", fit_ok(fit, peak, t));
        jw_i64(w, "headroom_bytes", fit_headroom(fit, peak));
        write_oom(w, "allocator_out_of_memory", t);
    }
    jw_end_object(w);
}

int print_json(FILE *f, const est_report *r, const output_opts *o) {
    static json_writer w; /* 64 KiB: not on the stack */
    jw_init(&w, f);
    jw_begin_object(&w, NULL);
    write_report_members(&w, r, o);
    jw_end_object(&w);
    return jw_finish(&w) ? 1 : 0;
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
        jw_begin_array(w, "shape");
        for (int d = 0; d < p->rank; d++) jw_i64(w, NULL, p->shape[d]);
        jw_end_array(w);
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

static void write_checkpoint(json_writer *w, const est_report *r, const output_opts *o) {
    const est_totals *t = est_report_totals(r);
    if (!t->checkpoint_segments || !o->checkpoint) {
        jw_null(w, "checkpoint");
        return;
    }
    jw_begin_object(w, "checkpoint");
    if (o->checkpoint->every > 0) {
        jw_i64(w, "every", o->checkpoint->every);
    } else {
        jw_begin_array(w, "prefixes");
        for (size_t i = 0; i < o->checkpoint->n_prefixes; i++) jw_string(w, NULL, o->checkpoint->prefixes[i]);
        jw_end_array(w);
    }
    jw_u64(w, "segments", t->checkpoint_segments);
    jw_end_object(w);
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
    if (p->strategy == EST_STRATEGY_HSDP) jw_i64(w, "shard_group", p->shard_group);
    else jw_null(w, "shard_group");
    jw_bool(w, "grad_as_bucket_view", p->grad_as_bucket_view != 0);
    jw_bool(w, "offload", p->offload != 0);
    jw_i64(w, "tp", p->tp);
    jw_bool(w, "sequence_parallel", p->sequence_parallel != 0);
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
    jw_u64(w, "buckets", c->buckets);
    jw_u64(w, "first_bucket_held_bytes", c->first_bucket_held_bytes);
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
    write_live(w, r);
    jw_end_object(w);
}

void write_report_members(json_writer *w, const est_report *r, const output_opts *o) {
    jw_string(w, "model", o->model);
    jw_string(w, "mode", est_mode_name(est_report_mode(r)));
    jw_string(w, "optimizer",
              est_report_mode(r) == EST_MODE_TRAIN ? est_optimizer_name(est_report_optimizer(r)) : NULL);
    jw_string(w, "dtype", est_dtype_name(est_report_dtype(r)));
    if (est_report_amp(r) != EST_AMP_NONE) jw_string(w, "amp", est_report_amp(r) == EST_AMP_BF16 ? "bf16" : "fp16");
    write_checkpoint(w, r, o);
    jw_i64(w, "grad_accum", o->grad_accum > 1 ? o->grad_accum : 1);
    write_parallel(w, r);
    write_patterns(w, "trainable", o->params ? o->params->trainable : NULL, o->params ? o->params->n_trainable : 0);
    write_patterns(w, "freeze", o->params ? o->params->frozen : NULL, o->params ? o->params->n_frozen : 0);
    if (est_report_batch(r) > 0) jw_i64(w, "batch", est_report_batch(r));
    else jw_null(w, "batch");
    jw_begin_object(w, "dims");
    for (size_t i = 0; i < est_report_dim_count(r); i++) jw_i64(w, est_report_dim(r, i)->name, est_report_dim(r, i)->value);
    jw_end_object(w);
    jw_begin_array(w, "layers");
    for (size_t i = 0; i < est_report_layer_count(r); i++) write_layer(w, est_report_layer(r, i), o->time, i);
    jw_end_array(w);
    write_params(w, r);
    module_rollup m = {0};
    if (o->depth && rollup_modules(r, o->depth, o->time, &m)) write_modules(w, &m, o->depth, o->time != NULL);
    free_rollup(&m);
    jw_begin_array(w, "outputs");
    for (size_t k = 0; k < est_report_output_count(r); k++) write_tensor(w, est_report_output(r, k));
    jw_end_array(w);
    write_totals(w, r);
    write_peak(w, r);
    write_step(w, r, o->timeline);
    if (o->fit) write_fit(w, "fit", o->fit, est_report_peak(r)->bytes, est_report_totals(r));
    if (o->time) write_time(w, o->time, o->host);
}
