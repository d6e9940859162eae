/* output.c: renders an est_report as a table, CSV or JSON. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "output.h"

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

const char *shape_string(char *buf, size_t n, const est_tensor_info *t) {
    size_t used = 0;
    buf[0] = '\0';
    if (t->rank == 0) {
        snprintf(buf, n, "scalar");
        return buf;
    }
    for (int d = 0; d < t->rank && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%" PRId64, d ? "x" : "", t->shape[d]);
    return buf;
}

uint64_t fit_usable(const fit_info *fit) {
    return fit->gpu_bytes > fit->reserve_bytes ? fit->gpu_bytes - fit->reserve_bytes : 0;
}

int64_t fit_headroom(const fit_info *fit, uint64_t peak) {
    uint64_t usable = fit_usable(fit);
    if (peak > (uint64_t)INT64_MAX) return INT64_MIN;
    return (int64_t)usable - (int64_t)peak;
}

bool fit_ok(const fit_info *fit, uint64_t peak, const est_totals *t) {
    return fit_headroom(fit, peak) >= 0 && !t->out_of_memory;
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
        int len = (int)strlen(L->label);
        if (len > w) w = len;
    }
    return w > 44 ? 44 : w;
}

static void print_name(FILE *f, const char *name, int width) {
    int len = (int)strlen(name);
    if (len <= width) fprintf(f, "%-*s", width, name);
    else fprintf(f, "...%s", name + len - (width - 3)); /* keep the informative tail */
}

int print_table(FILE *f, const est_report *r, const output_opts *o) {
    const est_totals *t = est_report_totals(r);
    char a[64], b[64];
    fprintf(f, "model: %s\n", o->model);
    if (est_report_dim_count(r)) {
        fprintf(f, "dims:");
        for (size_t i = 0; i < est_report_dim_count(r); i++) {
            const est_binding *d = est_report_dim(r, i);
            fprintf(f, " %s=%" PRId64, d->name, d->value);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
    int w = name_width(r, o->all_layers);
    fprintf(f, "%5s  %-*s  %-20s  %-24s  %10s  %11s  %11s  %10s  %10s  %11s  %10s\n", "#", w, "layer", "op",
            "output shape", "params", "param bytes", "output", "fwd flops", "bwd flops", "saved", "temp");
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
        fprintf(f, "  %-20.20s  %-24s  %10" PRIu64 "  %11s  %11s  %10s  %10s  %11s  %10s\n", L->op, shapes,
                L->param_count, L->param_bytes ? human_bytes(a, sizeof a, L->param_bytes) : "-",
                human_bytes(b, sizeof b, L->output_bytes), human_count(fw, sizeof fw, L->flops_forward),
                human_count(bw, sizeof bw, L->flops_backward),
                L->saved_bytes ? human_bytes(sv, sizeof sv, L->saved_bytes) : "-",
                L->temp_bytes ? human_bytes(tp, sizeof tp, L->temp_bytes) : "-");
    }
    fprintf(f, "\n");
    if (hidden)
        fprintf(f, "%zu shape-only layers (folded to constants) not shown; --all lists them.\n\n", hidden);
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
            p->label[0] ? ", at layer " : "", p->label);
    const struct { const char *name; uint64_t bytes; } parts[] = {
        {"params", p->params}, {"buffers", p->buffers}, {"grads", p->grads}, {"optimizer", p->optimizer},
        {"activations", p->activations}, {"temp", p->temp}, {"inputs", p->inputs}, {"other", p->other}};
    fprintf(f, "                  made of:");
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (parts[i].bytes) fprintf(f, " %s %s;", parts[i].name, human_bytes(a, sizeof a, parts[i].bytes));
    fprintf(f, "\n");
    fprintf(f, "  RESERVED        %s  the caching allocator's segments (max_memory_reserved; PEAK is\n"
               "                  max_memory_allocated), beyond what the process held before\n",
            human_bytes(a, sizeof a, t->reserved_bytes));
    if (o->fit) print_fit_lines(f, o->fit, p->bytes, t);
    return ferror(f) ? 1 : 0;
}

static void csv_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\n")) {
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

int print_csv(FILE *f, const est_report *r, const output_opts *o) {
    fprintf(f, "index,name,op,domain,output_shapes,output_dtypes,param_count,param_bytes,buffer_bytes,output_bytes,shape_only,"
               "flops_forward,flops_backward,saved_bytes,temp_bytes,module\n");
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
        fputc('\n', f);
    }
    const est_totals *t = est_report_totals(r);
    fprintf(f, "total,,,,,,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",,%" PRIu64 ",%" PRIu64 ",%" PRIu64
               ",%" PRIu64 ",\n",
            t->param_count, t->param_bytes, t->buffer_bytes, t->output_bytes, t->flops_forward, t->flops_backward,
            t->activations_bytes, t->temp_bytes);
    const est_peak *p = est_report_peak(r);
    fputs("peak,", f);
    fprintf(f, "%s,", est_phase_name(p->phase));
    csv_field(f, p->layer);
    fprintf(f, ",,,,,,,%" PRIu64 ",,,,,,", p->bytes);
    csv_field(f, p->module ? p->module : "");
    fputc('\n', f);
    /* reserved,,,,,,,,,BYTES: laid out like the peak row */
    fprintf(f, "reserved,,,,,,,,,%" PRIu64 ",,,,,,\n", t->reserved_bytes);
    if (o->fit) {
        /* fit,GPU,yes|no,,,,,,,HEADROOM_BYTES: laid out like the peak row */
        fputs("fit,", f);
        csv_field(f, o->fit->gpu ? o->fit->gpu : "");
        fprintf(f, ",%s,,,,,,,%" PRId64 ",,,,,,\n", fit_ok(o->fit, p->bytes, t) ? "yes" : "no",
                fit_headroom(o->fit, p->bytes));
    }
    return ferror(f) ? 1 : 0;
}

cJSON *oom_json(const est_totals *t) {
    if (!t->out_of_memory) return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "phase", est_phase_name(t->oom_phase));
    cJSON_AddStringToObject(o, "layer", t->oom_layer);
    return o;
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

static cJSON *tensor_json(const est_tensor_info *t) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddStringToObject(o, "dtype", est_dtype_name(t->dtype));
    cJSON *shape = cJSON_AddArrayToObject(o, "shape");
    for (int d = 0; d < t->rank; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
    cJSON_AddNumberToObject(o, "bytes", (double)t->bytes);
    return o;
}

cJSON *fit_json(const fit_info *fit, uint64_t peak, const est_totals *t) {
    cJSON *o = cJSON_CreateObject();
    if (fit->gpu) cJSON_AddStringToObject(o, "gpu", fit->gpu);
    else cJSON_AddNullToObject(o, "gpu");
    cJSON_AddNumberToObject(o, "gpu_memory_bytes", (double)fit->gpu_bytes);
    cJSON_AddNumberToObject(o, "reserve_bytes", (double)fit->reserve_bytes);
    cJSON_AddNumberToObject(o, "usable_bytes", (double)fit_usable(fit));
    if (t) {
        cJSON_AddBoolToObject(o, "fits", fit_ok(fit, peak, t));
        cJSON_AddNumberToObject(o, "headroom_bytes", (double)fit_headroom(fit, peak));
        cJSON_AddItemToObject(o, "allocator_out_of_memory", oom_json(t));
    }
    return o;
}

int print_json(FILE *f, const est_report *r, const output_opts *o) {
    cJSON *root = report_json(r, o);
    return root ? print_json_root(f, root) : 1;
}

int print_json_root(FILE *f, cJSON *root) {
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return 1;
    fputs(text, f);
    fputc('\n', f);
    cJSON_free(text);
    return ferror(f) ? 1 : 0;
}

/* null for no patterns, else the list as given. */
static cJSON *patterns_json(const char *const *patterns, size_t n) {
    if (!n) return cJSON_CreateNull();
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(patterns[i]));
    return a;
}

/* Every parameter, with both its names and whether it trains. */
static cJSON *params_json(const est_report *r) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < est_report_param_count(r); i++) {
        const est_param_info *p = est_report_param(r, i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", p->name);
        cJSON_AddStringToObject(o, "torch_name", p->torch_name);
        cJSON *shape = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < p->rank; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)p->shape[d]));
        cJSON_AddStringToObject(o, "dtype", est_dtype_name(p->dtype));
        cJSON_AddNumberToObject(o, "count", (double)p->elements);
        cJSON_AddNumberToObject(o, "bytes", (double)p->bytes);
        cJSON_AddBoolToObject(o, "trainable", p->trainable);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

/* "module": the named_modules() name, or null when the model does not say. */
static void add_module(cJSON *o, const char *module) {
    if (module) cJSON_AddStringToObject(o, "module", module);
    else cJSON_AddNullToObject(o, "module");
}

cJSON *report_json(const est_report *r, const output_opts *o) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", o->model);
    cJSON_AddStringToObject(root, "mode", est_mode_name(est_report_mode(r)));
    if (est_report_mode(r) == EST_MODE_TRAIN)
        cJSON_AddStringToObject(root, "optimizer", est_optimizer_name(est_report_optimizer(r)));
    else cJSON_AddNullToObject(root, "optimizer");
    cJSON_AddStringToObject(root, "dtype", est_dtype_name(est_report_dtype(r)));
    if (est_report_amp(r) != EST_AMP_NONE)
        cJSON_AddStringToObject(root, "amp", est_report_amp(r) == EST_AMP_BF16 ? "bf16" : "fp16");
    const est_totals *ct = est_report_totals(r);
    if (ct->checkpoint_segments && o->checkpoint) {
        cJSON *ck = cJSON_AddObjectToObject(root, "checkpoint");
        if (o->checkpoint->every > 0) cJSON_AddNumberToObject(ck, "every", (double)o->checkpoint->every);
        else {
            cJSON *pre = cJSON_AddArrayToObject(ck, "prefixes");
            for (size_t i = 0; i < o->checkpoint->n_prefixes; i++)
                cJSON_AddItemToArray(pre, cJSON_CreateString(o->checkpoint->prefixes[i]));
        }
        cJSON_AddNumberToObject(ck, "segments", (double)ct->checkpoint_segments);
    } else {
        cJSON_AddNullToObject(root, "checkpoint");
    }
    cJSON_AddNumberToObject(root, "grad_accum", o->grad_accum > 1 ? (double)o->grad_accum : 1.0);
    cJSON_AddItemToObject(root, "trainable", patterns_json(o->params ? o->params->trainable : NULL,
                                                           o->params ? o->params->n_trainable : 0));
    cJSON_AddItemToObject(root, "freeze", patterns_json(o->params ? o->params->frozen : NULL,
                                                        o->params ? o->params->n_frozen : 0));
    if (est_report_batch(r) > 0) cJSON_AddNumberToObject(root, "batch", (double)est_report_batch(r));
    else cJSON_AddNullToObject(root, "batch");
    cJSON *dims = cJSON_AddObjectToObject(root, "dims");
    for (size_t i = 0; i < est_report_dim_count(r); i++) {
        const est_binding *d = est_report_dim(r, i);
        cJSON_AddNumberToObject(dims, d->name, (double)d->value);
    }
    cJSON *layers = cJSON_AddArrayToObject(root, "layers");
    for (size_t i = 0; i < est_report_layer_count(r); i++) {
        const est_layer *L = est_report_layer(r, i);
        cJSON *l = cJSON_CreateObject();
        cJSON_AddStringToObject(l, "name", L->name);
        cJSON_AddStringToObject(l, "op", L->op);
        cJSON_AddStringToObject(l, "domain", L->domain);
        add_module(l, L->module);
        cJSON *ins = cJSON_AddArrayToObject(l, "inputs");
        for (size_t k = 0; k < L->n_inputs; k++) cJSON_AddItemToArray(ins, tensor_json(&L->inputs[k]));
        cJSON *outs = cJSON_AddArrayToObject(l, "outputs");
        for (size_t k = 0; k < L->n_outputs; k++) cJSON_AddItemToArray(outs, tensor_json(&L->outputs[k]));
        cJSON_AddNumberToObject(l, "param_count", (double)L->param_count);
        cJSON_AddNumberToObject(l, "param_bytes", (double)L->param_bytes);
        cJSON_AddNumberToObject(l, "buffer_bytes", (double)L->buffer_bytes);
        cJSON_AddNumberToObject(l, "output_bytes", (double)L->output_bytes);
        cJSON_AddNumberToObject(l, "flops_forward", (double)L->flops_forward);
        cJSON_AddNumberToObject(l, "flops_backward", (double)L->flops_backward);
        cJSON_AddNumberToObject(l, "saved_bytes", (double)L->saved_bytes);
        cJSON_AddNumberToObject(l, "temp_bytes", (double)L->temp_bytes);
        cJSON_AddBoolToObject(l, "shape_only", L->shape_only);
        if (L->segment >= 0) cJSON_AddNumberToObject(l, "segment", (double)L->segment);
        else cJSON_AddNullToObject(l, "segment");
        cJSON_AddBoolToObject(l, "recomputed", L->recomputed);
        cJSON_AddItemToArray(layers, l);
    }
    cJSON_AddItemToObject(root, "parameters", params_json(r));
    cJSON *outs = cJSON_AddArrayToObject(root, "outputs");
    for (size_t k = 0; k < est_report_output_count(r); k++)
        cJSON_AddItemToArray(outs, tensor_json(est_report_output(r, k)));
    const est_totals *t = est_report_totals(r);
    cJSON *tot = cJSON_AddObjectToObject(root, "totals");
    cJSON_AddNumberToObject(tot, "layer_count", (double)est_report_layer_count(r));
    cJSON_AddNumberToObject(tot, "param_count", (double)t->param_count);
    cJSON_AddNumberToObject(tot, "param_bytes", (double)t->param_bytes);
    cJSON_AddNumberToObject(tot, "trainable_param_count", (double)t->trainable_param_count);
    cJSON_AddNumberToObject(tot, "trainable_param_bytes", (double)t->trainable_param_bytes);
    cJSON_AddNumberToObject(tot, "buffer_count", (double)t->buffer_count);
    cJSON_AddNumberToObject(tot, "buffer_bytes", (double)t->buffer_bytes);
    cJSON_AddNumberToObject(tot, "constant_bytes", (double)t->constant_bytes);
    cJSON_AddNumberToObject(tot, "input_bytes", (double)t->input_bytes);
    cJSON_AddNumberToObject(tot, "output_bytes", (double)t->output_bytes);
    cJSON_AddNumberToObject(tot, "flops_forward", (double)t->flops_forward);
    cJSON_AddNumberToObject(tot, "flops_backward", (double)t->flops_backward);
    cJSON_AddNumberToObject(tot, "params_bytes", (double)t->params_bytes);
    cJSON_AddNumberToObject(tot, "buffers_bytes", (double)t->buffers_bytes);
    cJSON_AddNumberToObject(tot, "grads_bytes", (double)t->grads_bytes);
    cJSON_AddNumberToObject(tot, "optimizer_bytes", (double)t->optimizer_bytes);
    cJSON_AddNumberToObject(tot, "activations_bytes", (double)t->activations_bytes);
    cJSON_AddNumberToObject(tot, "temp_bytes", (double)t->temp_bytes);
    cJSON_AddNumberToObject(tot, "peak_bytes", (double)t->peak_bytes);
    cJSON_AddNumberToObject(tot, "flops_recompute", (double)t->flops_recompute);
    cJSON_AddNumberToObject(tot, "reserved_bytes", (double)t->reserved_bytes);
    const est_peak *p = est_report_peak(r);
    cJSON *peak = cJSON_AddObjectToObject(root, "peak");
    cJSON_AddNumberToObject(peak, "bytes", (double)p->bytes);
    cJSON_AddStringToObject(peak, "phase", est_phase_name(p->phase));
    cJSON_AddStringToObject(peak, "layer", p->layer);
    add_module(peak, p->module);
    cJSON *live = cJSON_AddObjectToObject(peak, "breakdown");
    cJSON_AddNumberToObject(live, "params", (double)p->params);
    cJSON_AddNumberToObject(live, "buffers", (double)p->buffers);
    cJSON_AddNumberToObject(live, "grads", (double)p->grads);
    cJSON_AddNumberToObject(live, "optimizer", (double)p->optimizer);
    cJSON_AddNumberToObject(live, "activations", (double)p->activations);
    cJSON_AddNumberToObject(live, "temp", (double)p->temp);
    cJSON_AddNumberToObject(live, "inputs", (double)p->inputs);
    cJSON_AddNumberToObject(live, "other", (double)p->other);
    if (o->fit) cJSON_AddItemToObject(root, "fit", fit_json(o->fit, p->bytes, t));
    return root;
}
