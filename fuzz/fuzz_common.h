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

#endif
