/* capacity.c: memest --max-batch and --sweep: the loaded graph estimated
 * again and again (est_estimate never re-parses). docs/capacity.md. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>


#include "capacity.h"
#include "term.h"

typedef est_point point;

static bool point_fits(const fit_info *fit, const point *pt) {
    est_fit f = fit_of(fit);
    return est_point_fits(&f, pt) != 0;
}

static void header_lines(FILE *f, const est_options *opt, const output_opts *o) {
    char a[64], b[64], c[64];
    fprintf(f, "model: %s\n", term(o->model));
    fprintf(f, "memory: %s, %s%s%s", est_mode_name(opt->mode), est_dtype_name(opt->dtype),
            opt->mode == EST_MODE_TRAIN ? ", optimizer " : "",
            opt->mode == EST_MODE_TRAIN ? est_optimizer_name(opt->optimizer) : "");
    const est_parallel *p = &opt->parallel;
    int64_t tp = p->tp > 1 ? p->tp : 1, world = p->world_size > 0 ? p->world_size : tp;
    if (world > 1 || p->strategy != EST_STRATEGY_NONE) /* the batch and every figure are one GPU's */
        fprintf(f, ", per GPU of %lld (%s%s%s)", (long long)world,
                p->strategy != EST_STRATEGY_NONE ? est_strategy_name(p->strategy) : "",
                p->strategy != EST_STRATEGY_NONE && tp > 1 ? " x " : "", tp > 1 ? "tp" : "");
    fputc('\n', f);
    if (o->fit)
        fprintf(f, "GPU: %s%s%s, reserve %s, usable %s\n", o->fit->gpu ? o->fit->gpu : "", o->fit->gpu ? " " : "",
                human_bytes(a, sizeof a, o->fit->gpu_bytes), human_bytes(b, sizeof b, o->fit->reserve_bytes),
                human_bytes(c, sizeof c, fit_usable(o->fit)));
}

static void table_head(FILE *f, const char *dim, bool with_fit) {
    fprintf(f, "%12s  %11s  %-9s  %11s  %11s  %11s  %11s  %11s  %11s", dim, "peak", "peak in", "params", "grads",
            "optimizer", "activations", "temp", "reserved");
    if (with_fit) fprintf(f, "  %-4s  %12s", "fits", "headroom");
    fprintf(f, "\n");
}

static void table_row(FILE *f, const point *pt, const fit_info *fit) {
    char b[8][64];
    if (pt->overflow) {
        fprintf(f, "%12" PRId64 "  %11s\n", pt->value, "overflows 64 bits");
        return;
    }
    fprintf(f, "%12" PRId64 "  %11s  %-9s  %11s  %11s  %11s  %11s  %11s  %11s", pt->value,
            human_bytes(b[0], 64, pt->peak.bytes), est_phase_name(pt->peak.phase),
            human_bytes(b[1], 64, pt->totals.params_bytes), human_bytes(b[2], 64, pt->totals.grads_bytes),
            human_bytes(b[3], 64, pt->totals.optimizer_bytes), human_bytes(b[4], 64, pt->totals.activations_bytes),
            human_bytes(b[5], 64, pt->totals.temp_bytes), human_bytes(b[7], 64, pt->totals.reserved_bytes));
    if (fit) {
        int64_t h = fit_headroom(fit, pt->peak.bytes);
        snprintf(b[6], 64, "%s%s", h < 0 ? "-" : "",
                 human_bytes(b[0], 64, h < 0 ? (uint64_t)-(h + 1) + 1 : (uint64_t)h));
        /* "frag": the peak fits, the allocator's segments do not */
        fprintf(f, "  %-4s  %12s", point_fits(fit, pt) ? "yes" : h >= 0 ? "frag" : "no", b[6]);
    }
    fprintf(f, "\n");
}

static const char csv_cols[] =
    "peak_bytes,peak_phase,params_bytes,buffers_bytes,grads_bytes,optimizer_bytes,activations_bytes,temp_bytes,"
    "fits,headroom_bytes,reserved_bytes\n";

static void csv_row(FILE *f, const point *pt, const fit_info *fit) {
    if (pt->overflow) fprintf(f, ",overflow,,,,,,,");
    else
        fprintf(f, "%" PRIu64 ",%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",",
                pt->peak.bytes, est_phase_name(pt->peak.phase), pt->totals.params_bytes, pt->totals.buffers_bytes,
                pt->totals.grads_bytes, pt->totals.optimizer_bytes, pt->totals.activations_bytes, pt->totals.temp_bytes);
    if (fit && !pt->overflow)
        fprintf(f, "%s,%" PRId64 ",", point_fits(fit, pt) ? "yes" : "no", fit_headroom(fit, pt->peak.bytes));
    else if (fit) fprintf(f, "no,,");
    else fprintf(f, ",,");
    if (pt->overflow) fprintf(f, "\n");
    else fprintf(f, "%" PRIu64 "\n", pt->totals.reserved_bytes);
}

/* 1 when a write failed; the caller's out_close says which and why. */
static int finish(FILE *f, int bad) { return bad || ferror(f) ? 1 : 0; }

int run_max_batch(FILE *f, const est_graph *g, est_options *opt, int64_t max_batch, output_format fmt,
                  const output_opts *o) {
    const fit_info *fit = o->fit;
    est_error err;
    est_fit ef = fit_of(fit);
    est_max_batch_result mb;
    if (est_max_batch(g, opt, &ef, max_batch, &mb, &err) != EST_OK) {
        fprintf(stderr, "memest: --max-batch: %s\n", err.message);
        return 1;
    }
    int64_t lo = mb.batch, hi = mb.next_batch, saved = opt->batch;
    const point lo_pt = mb.fits, hi_pt = mb.next;

    char a[64], a2[64];
    int bad = 0;
    if (fmt == FORMAT_JSON) {
        /* the whole report at the largest batch that fits (batch 1 when none does) */
        est_report *r = NULL;
        opt->batch = lo ? lo : 1;
        est_status s = est_estimate(g, opt, &r, &err);
        opt->batch = saved;
        if (s != EST_OK) {
            fprintf(stderr, "memest: %s\n", err.message);
            return 1;
        }
        bad = print_json_doc(f, r, o, &mb, max_batch);
        est_report_free(r);
        if (bad == 2) return 1;
    } else if (fmt == FORMAT_CSV) {
        fprintf(f, "role,batch,%s", csv_cols);
        if (lo) {
            fprintf(f, "max_batch,%" PRId64 ",", lo);
            csv_row(f, &lo_pt, fit);
        }
        if (hi) {
            fprintf(f, "next_batch,%" PRId64 ",", hi);
            csv_row(f, &hi_pt, fit);
        }
    } else {
        header_lines(f, opt, o);
        fprintf(f, "\n");
        if (!lo)
            fprintf(f, "max batch: 0: batch 1 does not fit (peak %s, usable %s)\n",
                    human_bytes(a, sizeof a, lo_pt.peak.bytes), human_bytes(a2, sizeof a2, fit_usable(fit)));
        else if (!hi)
            fprintf(f, "max batch: %" PRId64 ": every batch up to the search cap fits\n", lo);
        else fprintf(f, "max batch: %" PRId64 " (batch %" PRId64 " does not fit)\n", lo, hi);
        fprintf(f, "\n");
        table_head(f, "batch", true);
        if (lo) table_row(f, &lo_pt, fit);
        if (hi) table_row(f, &hi_pt, fit);
    }
    return finish(f, bad);
}

int run_sweep(FILE *f, const est_graph *g, const est_options *opt, const sweep_spec *sw, output_format fmt,
              const output_opts *o) {
    point *pts = calloc(sw->n, sizeof *pts);
    if (!pts) {
        fprintf(stderr, "memest: --sweep: out of memory\n");
        return 1;
    }
    est_error err;
    size_t done = 0;
    if (est_sweep(g, opt, sw->name, sw->values, sw->n, pts, &done, &err) != EST_OK) {
        if (done < sw->n) fprintf(stderr, "memest: --sweep %s=%" PRId64 ": %s\n", sw->name, sw->values[done], err.message);
        else fprintf(stderr, "memest: --sweep: %s\n", err.message);
        free(pts);
        return 1;
    }
    int bad = 0;
    if (fmt == FORMAT_JSON) {
        est_fit fit = o->fit ? fit_of(o->fit) : (est_fit){0};
        est_json_options j;
        est_json_options_init(&j);
        j.model = o->model;
        j.fit = o->fit ? &fit : NULL;
        j.gpu = o->fit ? o->fit->gpu : NULL;
        char *text = NULL;
        if (est_sweep_to_json(opt, sw->name, pts, sw->n, &j, &text, &err) != EST_OK) {
            fprintf(stderr, "memest: %s\n", err.message);
            free(pts);
            return 1;
        }
        bad = fputs(text, f) == EOF;
        est_free(text);
    } else if (fmt == FORMAT_CSV) {
        fprintf(f, "dim,value,%s", csv_cols);
        for (size_t i = 0; i < sw->n; i++) {
            fprintf(f, "%s,%" PRId64 ",", sw->name, sw->values[i]);
            csv_row(f, &pts[i], o->fit);
        }
    } else {
        header_lines(f, opt, o);
        fprintf(f, "\n");
        table_head(f, sw->name, o->fit != NULL);
        for (size_t i = 0; i < sw->n; i++) table_row(f, &pts[i], o->fit);
    }
    free(pts);
    return finish(f, bad);
}
