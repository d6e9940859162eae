/* output_time.c: the step's time (est_time_estimate, with --gpu NAME) in the
 * table and CSV; JSON's is the library's (libestimate/report_json.c;
 * docs/output-format.md, "Time"). */
#include <inttypes.h>
#include <stdio.h>

#include "output.h"
#include "term.h"

const char *human_time(char *buf, size_t n, double s) {
    if (s <= 0) snprintf(buf, n, "-");
    else if (s < 1e-3) snprintf(buf, n, "%.1f us", s * 1e6);
    else if (s < 1) snprintf(buf, n, "%.2f ms", s * 1e3);
    else snprintf(buf, n, "%.2f s", s);
    return buf;
}

void print_time(FILE *f, const est_time *t) {
    const est_step_time *st = est_time_step(t);
    char a[32], b[32];
    fprintf(f, "\ntime (%s: kernels at their roofline, issued by an eager PyTorch host)\n", term(st->device->name));
    fprintf(f, "  STEP            %s  %s-bound: the GPU runs kernels %.0f%% of it\n", human_time(a, sizeof a, st->step_s),
            est_step_time_bound(st), st->step_s > 0 ? 100.0 * st->device_total_s / st->step_s : 0.0);
    for (int p = 0; p < EST_PHASE_COUNT; p++) {
        if (st->phase_s[p] <= 0 && st->device_s[p] <= 0) continue;
        fprintf(f, "  %-15s %s  kernels %s\n", est_phase_name((est_phase)p), human_time(a, sizeof a, st->phase_s[p]),
                human_time(b, sizeof b, st->device_s[p]));
    }
    fprintf(f, "  host            %s issuing the step's work\n", human_time(a, sizeof a, st->host_s));
}

/* time,PHASE,GPU,...: each phase's wall time under time_forward_s and its
 * kernels' under time_backward_s; the `step` row the whole step's and all
 * kernels'. Laid out like a layer row with the two time columns. */
void csv_time(FILE *f, const est_time *t) {
    const est_step_time *st = est_time_step(t);
    for (int p = 0; p < EST_PHASE_COUNT; p++) {
        fprintf(f, "time,%s,", est_phase_name((est_phase)p));
        csv_field(f, st->device->name);
        fprintf(f, ",,,,,,,,,,,,,,%.9g,%.9g\n", st->phase_s[p], st->device_s[p]);
    }
    fputs("time,step,", f);
    csv_field(f, st->device->name);
    fprintf(f, ",%s,,,,,,,,,,,,,%.9g,%.9g\n", est_step_time_bound(st), st->step_s, st->device_total_s);
}
