/*
 * capacity.c: does a step fit a GPU, and the largest batch that does
 * (docs/capacity.md). Built on est_estimate alone: a loaded graph is
 * estimated again and again, never re-parsed, and the graph's plan makes the
 * later estimates cheaper.
 */
#include <stdint.h>
#include <string.h>

#include "ir.h"

uint64_t est_fit_usable(const est_fit *fit) {
    if (!fit) return 0;
    return fit->gpu_bytes > fit->reserve_bytes ? fit->gpu_bytes - fit->reserve_bytes : 0;
}

int64_t est_fit_headroom(const est_fit *fit, uint64_t peak_bytes) {
    if (peak_bytes > (uint64_t)INT64_MAX) return INT64_MIN;
    return (int64_t)est_fit_usable(fit) - (int64_t)peak_bytes;
}

int est_fit_ok(const est_fit *fit, uint64_t peak_bytes, const est_totals *totals) {
    return est_fit_headroom(fit, peak_bytes) >= 0 && !(totals && totals->out_of_memory);
}

est_status est_estimate_point(const est_graph *g, const est_options *opt, int64_t value, est_point *pt,
                              est_error *err) {
    if (!pt) return est__fail(err, EST_EINVAL, "est_estimate_point: pt is NULL");
    memset(pt, 0, sizeof *pt);
    pt->value = value;
    est_report *r = NULL;
    est_status st = est_estimate(g, opt, &r, err);
    if (st == EST_EOVERFLOW) { /* far from fitting anything */
        pt->overflow = 1;
        pt->peak.bytes = pt->totals.peak_bytes = UINT64_MAX;
        return EST_OK;
    }
    if (st != EST_OK) return st;
    pt->totals = *est_report_totals(r);
    pt->peak = *est_report_peak(r);
    pt->peak.layer = pt->peak.module = pt->peak.label = NULL; /* they belong to the report */
    est_report_free(r);
    return EST_OK;
}

int est_point_fits(const est_fit *fit, const est_point *pt) {
    return pt && !pt->overflow && est_fit_ok(fit, pt->peak.bytes, &pt->totals);
}

/* Doubling from batch 1 until a batch does not fit or the cap is reached,
 * then bisecting between the last that fits and the first that does not. */
est_status est_max_batch(const est_graph *g, const est_options *opt, const est_fit *fit, int64_t cap,
                         est_max_batch_result *out, est_error *err) {
    if (!g || !opt || !fit || !out || cap < 1)
        return est__fail(err, EST_EINVAL, "est_max_batch: graph, options, fit or result missing, or cap < 1");
    memset(out, 0, sizeof *out);
    est_options o = *opt;
    est_point pt;
    o.batch = 1; /* batch 1 also says whether the graph has a symbolic batch at all */
    est_status st = est_estimate_point(g, &o, 1, &out->fits, err);
    if (st != EST_OK) return st;
    if (!est_point_fits(fit, &out->fits)) {
        out->next = out->fits;
        out->next_batch = 1;
        return EST_OK;
    }
    int64_t lo = 1, hi = 0;
    while (lo < cap) {
        int64_t b = lo > cap / 2 ? cap : lo * 2;
        o.batch = b;
        if ((st = est_estimate_point(g, &o, b, &pt, err)) != EST_OK) return st;
        if (!est_point_fits(fit, &pt)) {
            hi = b, out->next = pt;
            break;
        }
        lo = b, out->fits = pt;
    }
    while (hi && hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        o.batch = mid;
        if ((st = est_estimate_point(g, &o, mid, &pt, err)) != EST_OK) return st;
        if (est_point_fits(fit, &pt)) lo = mid, out->fits = pt;
        else hi = mid, out->next = pt;
    }
    out->batch = lo;
    out->next_batch = hi;
    return EST_OK;
}
