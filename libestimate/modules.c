/* modules.c: a report's layers rolled up by module path, as torchinfo shows
 * a model (est_modules_rollup; memest --depth N; docs/output-format.md,
 * "Modules"). */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

struct est_modules {
    est_module_row *rows; /* in order of first appearance; names malloc'd */
    size_t n;
};

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

static void add_layer(est_module_row *m, const est_layer *L, const est_layer_time *lt) {
    m->layers++;
    m->param_count += L->param_count;
    m->param_bytes += L->param_bytes;
    m->output_bytes += L->output_bytes;
    m->saved_bytes += L->saved_bytes;
    m->flops_forward += L->flops_forward;
    m->flops_backward += L->flops_backward;
    if (lt) {
        m->time_forward_s += lt->forward_s;
        m->time_backward_s += lt->backward_s;
    }
}

est_status est_modules_rollup(const est_report *r, int64_t depth, const est_time *time, est_modules **out,
                              est_error *err) {
    if (!out) return est__fail(err, EST_EINVAL, "est_modules_rollup: out is NULL");
    *out = NULL;
    if (!r || depth <= 0) return est__fail(err, EST_EINVAL, "est_modules_rollup: needs a report and a depth above 0");
    size_t n = est_report_layer_count(r);
    est_modules *m = calloc(1, sizeof *m);
    if (m) m->rows = calloc(n + 1, sizeof *m->rows);
    if (!m || !m->rows) goto oom;
    for (size_t i = 0; i < n; i++) {
        const est_layer *L = est_report_layer(r, i);
        const char *name;
        size_t len = group_of(L, depth, &name), k = 0;
        while (k < m->n && !(strlen(m->rows[k].name) == len && strncmp(m->rows[k].name, name, len) == 0)) k++;
        if (k == m->n) {
            if (!(m->rows[k].name = est__strndup(name, len))) goto oom;
            m->n++;
        }
        add_layer(&m->rows[k], L, est_time_layer(time, i));
    }
    *out = m;
    return EST_OK;
oom:
    est_modules_free(m);
    return est__fail(err, EST_ENOMEM, "out of memory");
}

size_t est_modules_count(const est_modules *m) { return m ? m->n : 0; }

const est_module_row *est_modules_row(const est_modules *m, size_t i) {
    return m && i < m->n ? &m->rows[i] : NULL;
}

void est_modules_free(est_modules *m) {
    if (!m) return;
    for (size_t k = 0; m->rows && k < m->n; k++) free((char *)m->rows[k].name);
    free(m->rows);
    free(m);
}
