/* modules.c: --depth N, the layers rolled up by module path, as torchinfo
 * shows a model: each module's layers, parameters, outputs, saved bytes,
 * FLOPs and, with a time, its kernels' time (docs/output-format.md, "Modules"). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "term.h"

/* The first `depth` dot-separated parts of a layer's module: "layer1.0" at
 * depth 2 for "layer1.0.conv1"; "(model)" for the model's own forward,
 * "(unknown)" where the file does not say. */
static size_t group_of(const est_layer *L, int64_t depth, const char **name) {
    if (!L->module) {
        *name = "(unknown)";
        return strlen(*name);
    }
    if (!L->module[0]) {
        *name = "(model)";
        return strlen(*name);
    }
    *name = L->module;
    size_t len = 0;
    for (int64_t d = 0; d < depth; d++) {
        const char *dot = strchr(L->module + len, '.');
        if (!dot) return strlen(L->module);
        len = (size_t)(dot - L->module) + (d + 1 < depth ? 1 : 0);
    }
    return len;
}

bool rollup_modules(const est_report *r, int64_t depth, const est_time *time, module_rollup *out) {
    size_t n = est_report_layer_count(r);
    out->rows = calloc(n + 1, sizeof *out->rows);
    out->n = 0;
    if (!out->rows) return false;
    for (size_t i = 0; i < n; i++) {
        const est_layer *L = est_report_layer(r, i);
        const char *name;
        size_t len = group_of(L, depth, &name);
        size_t k = 0;
        while (k < out->n && !(strlen(out->rows[k].name) == len && strncmp(out->rows[k].name, name, len) == 0)) k++;
        module_row *m = &out->rows[k];
        if (k == out->n) {
            if (!(m->name = strndup(name, len))) return false;
            out->n++;
        }
        m->layers++;
        m->param_count += L->param_count;
        m->param_bytes += L->param_bytes;
        m->output_bytes += L->output_bytes;
        m->saved_bytes += L->saved_bytes;
        m->flops_forward += L->flops_forward;
        m->flops_backward += L->flops_backward;
        const est_layer_time *lt = est_time_layer(time, i);
        if (lt) {
            m->time_forward_s += lt->forward_s;
            m->time_backward_s += lt->backward_s;
        }
    }
    return true;
}

void free_rollup(module_rollup *m) {
    for (size_t k = 0; m->rows && k < m->n; k++) free(m->rows[k].name);
    free(m->rows);
    m->rows = NULL;
    m->n = 0;
}

void print_modules(FILE *f, const module_rollup *m, int64_t depth, bool time) {
    char a[64], b[64], c[64], d[64], e[64], tf[32], tb[32];
    fprintf(f, "modules at depth %" PRId64 "\n", depth);
    int w = 6;
    for (size_t k = 0; k < m->n; k++)
        if ((int)strlen(m->rows[k].name) > w) w = (int)strlen(m->rows[k].name) > 60 ? 60 : (int)strlen(m->rows[k].name);
    fprintf(f, "  %-*s  %6s  %12s  %11s  %11s  %11s  %10s  %10s", w, "module", "layers", "params", "param bytes",
            "output", "saved", "fwd flops", "bwd flops");
    if (time) fprintf(f, "  %10s  %10s", "fwd time", "bwd time");
    fputc('\n', f);
    for (size_t k = 0; k < m->n; k++) {
        const module_row *row = &m->rows[k];
        fprintf(f, "  %-*.*s  %6zu  %12" PRIu64 "  %11s  %11s  %11s  %10s  %10s", w, w, term(row->name), row->layers,
                row->param_count, human_bytes(a, sizeof a, row->param_bytes), human_bytes(b, sizeof b, row->output_bytes),
                human_bytes(c, sizeof c, row->saved_bytes), human_count(d, sizeof d, row->flops_forward),
                human_count(e, sizeof e, row->flops_backward));
        if (time)
            fprintf(f, "  %10s  %10s", human_time(tf, sizeof tf, row->time_forward_s),
                    human_time(tb, sizeof tb, row->time_backward_s));
        fputc('\n', f);
    }
    fprintf(f, "\n");
}

void write_modules(json_writer *w, const module_rollup *m, int64_t depth, bool time) {
    jw_i64(w, "depth", depth);
    jw_begin_array(w, "modules");
    for (size_t k = 0; k < m->n; k++) {
        const module_row *row = &m->rows[k];
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
}

void csv_modules(FILE *f, const module_rollup *m, bool time) {
    /* module,NAME,,,,,PARAM_COUNT,PARAM_BYTES,,OUTPUT_BYTES,,FLOPS_FORWARD,FLOPS_BACKWARD,SAVED_BYTES,,
     * (,TIME_FORWARD_S,TIME_BACKWARD_S with a time): laid out like a layer row */
    for (size_t k = 0; k < m->n; k++) {
        const module_row *row = &m->rows[k];
        fputs("module,", f);
        csv_field(f, row->name);
        fprintf(f, ",,,,,%" PRIu64 ",%" PRIu64 ",,%" PRIu64 ",,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",,", row->param_count,
                row->param_bytes, row->output_bytes, row->flops_forward, row->flops_backward, row->saved_bytes);
        if (time) fprintf(f, ",%.9g,%.9g", row->time_forward_s, row->time_backward_s);
        fputc('\n', f);
    }
}
