/* output_step.c: the table's largest tensors live at the peak (--top;
 * JSON's "live", "snapshots" and "timeline" are the library's,
 * libestimate/step_json.c; docs/output-format.md). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "output.h"
#include "term.h"

static const char *layer_label(const est_report *r, int64_t i) {
    const est_layer *L = i >= 0 ? est_report_layer(r, (size_t)i) : NULL;
    return L ? L->label : NULL;
}

void print_live(FILE *f, const est_report *r, size_t top) {
    size_t n = est_report_live_count(r);
    if (!top || !n) return;
    char a[64], shape[128];
    fprintf(f, "  live at the peak, the largest %zu of %zu:\n", top < n ? top : n, n);
    fprintf(f, "  %11s  %-11s  %-24s  %-20s  %s\n", "bytes", "category", "what", "shape", "tensor (layer)");
    for (size_t i = 0; i < n && i < top; i++) {
        const est_live *l = est_report_live(r, i);
        if (l->rank == 0) snprintf(shape, sizeof shape, "scalar");
        else dims_string(shape, sizeof shape, l->rank, l->shape);
        const char *layer = layer_label(r, l->layer);
        fprintf(f, "  %11s  %-11s  %-24s  %-20s  %s", human_bytes(a, sizeof a, l->bytes),
                est_category_name(l->category), l->what, shape, l->tensor ? term(l->tensor) : "-");
        fprintf(f, layer ? " (%s)\n" : "\n", layer ? term(layer) : "");
    }
}
