/* ops_cmd.c: `memest ops`: every operator the estimator has a rule for, and
 * what `memest verify` runs it with, as the verify module itself says
 * (memest_verify_op_info): forward and backward kernels, forward only, host
 * shape arithmetic, or no kernel and why. Without the module the table
 * still prints, and one line says why the verify column is absent. */
#include <stdbool.h>
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700 /* realpath() */
#endif
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"
#include "ops_cmd.h"
#include "term.h"

#if MEMEST_VERIFY_BUILT
#include "verify_load.h"
#endif

enum { EXIT_OK = 0, EXIT_FAIL = 1 };

/* The widths fit the longest op (MeanVarianceNormalization), family and
 * domain names; a longer name only pushes its own row. */
#define OPS_ROW "%-27s %-11s %-10s %-8s %s\n"

/* The verify module's answer for one op: its column and note. */
typedef struct verify_column {
    bool present;                    /* the module is loaded */
    char absent_why[600];            /* else why not */
    const char *archs;               /* the module's GPU code, or NULL */
    const char *path;                /* where it was loaded from */
#if MEMEST_VERIFY_BUILT
    vx_module module;
    char real_path[PATH_MAX];
#endif
} verify_column;

static void verify_column_open(verify_column *v) {
    memset(v, 0, sizeof *v);
#if MEMEST_VERIFY_BUILT
    char why[512];
    if (!vx_module_open(&v->module, why, sizeof why)) {
        snprintf(v->absent_why, sizeof v->absent_why, "cannot load the verify module: %s", why);
        return;
    }
    if (!v->module.op_info && !v->module.has_op) {
        snprintf(v->absent_why, sizeof v->absent_why, "the verify module %.400s is too old to list its ops",
                 v->module.path);
        return;
    }
    v->present = true;
    /* <exe>/../verify/ as the loader found it, without the ".." */
    v->path = realpath(v->module.path, v->real_path) ? v->real_path : v->module.path;
    v->archs = v->module.archs ? v->module.archs() : NULL;
#else
    snprintf(v->absent_why, sizeof v->absent_why,
             "this memest was built without the CUDA verify module (no CUDA toolkit found, or -Dverify=disabled)");
#endif
}

/* The column's word for op i and its note (NULL when none). */
static const char *verify_word(verify_column *v, size_t i, const char **note) {
    *note = NULL;
#if MEMEST_VERIFY_BUILT
    if (v->module.op_info) {
        int backward = 0;
        int kind = v->module.op_info(est_op_name(i), est_op_domain(i), &backward, note);
        if (kind == MEMEST_VERIFY_OP_HOST) return "host";
        if (kind == MEMEST_VERIFY_OP_DEVICE) return backward ? "fwd+bwd" : "fwd";
        return "no";
    }
    /* an older module: whether it has a kernel, not which */
    return v->module.has_op(est_op_name(i)) ? "yes" : "no";
#else
    (void)v;
    (void)i;
    return "no";
#endif
}

int list_ops(void) {
    out_file o;
    if (!out_open(&o, NULL)) return EXIT_FAIL;
    verify_column v;
    verify_column_open(&v);
    size_t n = est_op_count();
    size_t both = 0, forward = 0, host = 0, other = 0;
    if (v.present) fprintf(o.f, OPS_ROW, "op", "family", "domain", "verify", "note");
    else fprintf(o.f, "%-27s %-11s %s\n", "op", "family", "domain");
    for (size_t i = 0; i < n; i++) {
        const char *d = est_op_domain(i);
        d = d[0] ? d : "ai.onnx";
        if (!v.present) {
            fprintf(o.f, "%-27s %-11s %s\n", est_op_name(i), est_op_family(i), d);
            continue;
        }
        const char *note, *word = verify_word(&v, i, &note);
        if (strcmp(word, "fwd+bwd") == 0) both++;
        else if (strcmp(word, "fwd") == 0) forward++;
        else if (strcmp(word, "host") == 0) host++;
        else if (strcmp(word, "yes") == 0) other++;
        fprintf(o.f, "%-27s %-11s %-10s ", est_op_name(i), est_op_family(i), d);
        if (note) fprintf(o.f, "%-8s %s\n", word, term(note));
        else fprintf(o.f, "%s\n", word); /* no trailing blanks */
    }
    if (!v.present) {
        fprintf(o.f, "\n%zu operators\nno verify column: %s\n", n, term(v.absent_why));
        return out_close(&o, false) ? EXIT_OK : EXIT_FAIL;
    }
    size_t runs = both + forward + host + other;
    fprintf(o.f, "\n%zu operators; memest verify runs %zu of them (%zu fwd+bwd, %zu fwd, %zu host", n, runs, both,
            forward, host);
    if (other) fprintf(o.f, ", %zu yes", other);
    fprintf(o.f, ") and refuses %zu (no)\n", n - runs);
    fprintf(o.f, "verify: fwd+bwd = forward and backward kernels, fwd = forward only (no gradient flows), host = "
                 "shape arithmetic on the host, no = no kernel%s\n", other ? ", yes = a kernel (an older module)" : "");
    fprintf(o.f, "verify module: %s", term(v.path));
    if (v.archs) fprintf(o.f, " (%s)", term(v.archs));
    fprintf(o.f, "\n");
    return out_close(&o, false) ? EXIT_OK : EXIT_FAIL;
}
