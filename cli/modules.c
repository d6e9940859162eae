/* modules.c: --depth N in the table and CSV: the layers rolled up by module
 * path (est_modules_rollup), as torchinfo shows a model: each module's
 * layers, parameters, outputs, saved bytes, FLOPs and, with a time, its
 * kernels' time (docs/output-format.md, "Modules"). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "term.h"

void print_modules(FILE *f, const est_report *r, int64_t depth, const est_time *time) {
    est_modules *m = NULL;
    if (est_modules_rollup(r, depth, time, &m, NULL) != EST_OK) return;
    char a[64], b[64], c[64], d[64], e[64], tf[32], tb[32];
    fprintf(f, "modules at depth %" PRId64 "\n", depth);
    int w = 6;
    for (size_t k = 0; k < est_modules_count(m); k++) {
        int len = (int)strlen(est_modules_row(m, k)->name);
        if (len > w) w = len > 60 ? 60 : len;
    }
    fprintf(f, "  %-*s  %6s  %12s  %11s  %11s  %11s  %10s  %10s", w, "module", "layers", "params", "param bytes",
            "output", "saved", "fwd flops", "bwd flops");
    if (time) fprintf(f, "  %10s  %10s", "fwd time", "bwd time");
    fputc('\n', f);
    for (size_t k = 0; k < est_modules_count(m); k++) {
        const est_module_row *row = est_modules_row(m, k);
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
    est_modules_free(m);
}

void csv_modules(FILE *f, const est_report *r, int64_t depth, const est_time *time) {
    est_modules *m = NULL;
    if (est_modules_rollup(r, depth, time, &m, NULL) != EST_OK) return;
    /* module,NAME,,,,,PARAM_COUNT,PARAM_BYTES,,OUTPUT_BYTES,,FLOPS_FORWARD,FLOPS_BACKWARD,SAVED_BYTES,,
     * (,TIME_FORWARD_S,TIME_BACKWARD_S with a time): laid out like a layer row */
    for (size_t k = 0; k < est_modules_count(m); k++) {
        const est_module_row *row = est_modules_row(m, k);
        fputs("module,", f);
        csv_field(f, row->name);
        fprintf(f, ",,,,,%" PRIu64 ",%" PRIu64 ",,%" PRIu64 ",,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",,", row->param_count,
                row->param_bytes, row->output_bytes, row->flops_forward, row->flops_backward, row->saved_bytes);
        if (time) fprintf(f, ",%.9g,%.9g", row->time_forward_s, row->time_backward_s);
        fputc('\n', f);
    }
    est_modules_free(m);
}
