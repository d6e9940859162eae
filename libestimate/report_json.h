/* report_json.h: the pieces of the JSON reports that more than one file
 * writes (report_json.c, step_json.c, sweep_json.c). */
#ifndef EST_REPORT_JSON_H
#define EST_REPORT_JSON_H

#include <stdbool.h>

#include "estimate.h"
#include "json_writer.h"

/* `key`: null, or {"phase", "layer"} where the allocator's replay ran out. */
void est__jw_oom(json_writer *w, const char *key, const est_totals *t);
/* "fit": o->fit and o->gpu; with the step's totals `t` (NULL for none) it
 * adds "fits", "headroom_bytes" and "allocator_out_of_memory" for a peak of
 * `peak` bytes. */
void est__jw_fit(json_writer *w, const est_json_options *o, uint64_t peak, const est_totals *t);
/* step_json.c: the peak's "live", and "snapshots" (with `timeline`, the
 * "timeline" too); nothing when the report recorded no timeline. */
void est__jw_live(json_writer *w, const est_report *r);
void est__jw_step(json_writer *w, const est_report *r, bool timeline);

#endif
