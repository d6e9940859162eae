/* fuzz_common.h: checks every harness makes on a failed call. A harness that
 * finds a violation aborts, so libFuzzer (and the replay) report it. */
#ifndef EST_FUZZ_COMMON_H
#define EST_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* A failure must carry a valid code and a message naming the source. */
static inline void fuzz_check_error(est_status st, const est_error *err, const char *src) {
    if (st == EST_OK) return;
    if ((unsigned)st >= EST_STATUS_COUNT || err->code != st || !err->message[0] ||
        (src && !strstr(err->message, src))) {
        fprintf(stderr, "bad error report: %s: '%s'\n", est_status_name(st), err->message);
        abort();
    }
}

/* Estimates must not leave dangling pointers in a report: read every field. */
static inline unsigned long long fuzz_walk_report(const est_report *r) {
    unsigned long long sum = 0;
    for (size_t i = 0; i < est_report_layer_count(r); i++) {
        const est_layer *L = est_report_layer(r, i);
        sum += strlen(L->name) + strlen(L->op) + strlen(L->domain) + L->flops_forward + L->saved_bytes;
        for (size_t k = 0; k < L->n_inputs; k++) {
            sum += strlen(L->inputs[k].name) + L->inputs[k].bytes;
            for (int d = 0; d < L->inputs[k].rank; d++) sum += (unsigned long long)L->inputs[k].shape[d];
        }
        for (size_t k = 0; k < L->n_outputs; k++) {
            sum += strlen(L->outputs[k].name) + L->outputs[k].bytes;
            for (int d = 0; d < L->outputs[k].rank; d++) sum += (unsigned long long)L->outputs[k].shape[d];
        }
    }
    for (size_t i = 0; i < est_report_output_count(r); i++) sum += est_report_output(r, i)->bytes;
    const est_peak *p = est_report_peak(r);
    sum += p->bytes + strlen(p->layer) + est_report_totals(r)->peak_bytes;
    return sum;
}

/* What every successful estimate means, not only that it is memory-safe
 * (docs/robustness.md, "Fuzzing"): the peak holds the parameters, the
 * segments hold the peak (unless the replay ran out under a memory limit),
 * the peak's breakdown sums to the peak, no byte count is a saturated
 * UINT64_MAX, and no fit is claimed on one. */
static inline void fuzz_check_meaning(const est_report *r) {
    const est_totals *t = est_report_totals(r);
    const est_peak *p = est_report_peak(r);
    uint64_t parts = 0;
#define FUZZ_ADD_PART(e, name) parts += p->name;
    EST_CATEGORIES(FUZZ_ADD_PART)
#undef FUZZ_ADD_PART
    const char *broken = p->bytes != t->peak_bytes ? "the peak differs from totals.peak_bytes"
                         : p->bytes < t->params_bytes ? "the peak is below the parameters"
                         : !t->out_of_memory && t->reserved_bytes < p->bytes ? "reserved is below the peak"
                         : parts != p->bytes ? "the peak's breakdown does not sum to the peak"
                         : p->bytes == UINT64_MAX || t->reserved_bytes == UINT64_MAX || t->param_bytes == UINT64_MAX
                             ? "a saturated byte count"
                             : NULL;
    est_fit any = {.gpu_bytes = UINT64_MAX, .reserve_bytes = 0};
    if (!broken && p->bytes == UINT64_MAX && est_fit_ok(&any, p->bytes, t)) broken = "a fit on a saturated peak";
    if (broken) {
        fprintf(stderr, "meaning broken: %s (peak %llu, params %llu, reserved %llu, parts %llu)\n", broken,
                (unsigned long long)p->bytes, (unsigned long long)t->params_bytes,
                (unsigned long long)t->reserved_bytes, (unsigned long long)parts);
        abort();
    }
}

#endif
