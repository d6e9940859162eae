/* step_json.c: the step over time in a JSON report: what is live at the
 * peak, the snapshots and the timeline (est_options.timeline;
 * docs/output-format.md). */
#include "report_json.h"

static const char *layer_label(const est_report *r, int64_t i) {
    const est_layer *L = i >= 0 ? est_report_layer(r, (size_t)i) : NULL;
    return L ? L->label : NULL;
}

static const char *layer_module(const est_report *r, int64_t i) {
    const est_layer *L = i >= 0 ? est_report_layer(r, (size_t)i) : NULL;
    return L ? L->module : NULL;
}

void est__jw_live(json_writer *w, const est_report *r) {
    if (!est_report_snapshot(r, EST_SNAPSHOT_PEAK)) return; /* no timeline recorded */
    jw_begin_array(w, "live");
    for (size_t i = 0; i < est_report_live_count(r); i++) {
        const est_live *l = est_report_live(r, i);
        jw_begin_object(w, NULL);
        jw_string(w, "tensor", l->tensor);
        jw_string(w, "what", l->what);
        jw_string(w, "layer", layer_label(r, l->layer));
        jw_string(w, "module", layer_module(r, l->layer));
        jw_string(w, "category", est_category_name(l->category));
        jw_u64(w, "bytes", l->bytes);
        if (l->rank < 0) {
            jw_null(w, "dtype");
            jw_null(w, "shape");
        } else {
            jw_string(w, "dtype", est_dtype_name(l->dtype));
            jw_i64_array(w, "shape", l->shape, l->rank);
        }
        jw_end_object(w);
    }
    jw_end_array(w);
}

static void write_snapshot(json_writer *w, const char *key, const est_snapshot *s) {
    jw_begin_object(w, key);
    jw_u64(w, "bytes", s->bytes);
    jw_begin_object(w, "breakdown");
    for (int c = 0; c < EST_CAT_COUNT; c++) jw_u64(w, est_category_name((est_category)c), s->category[c]);
    jw_end_object(w);
    jw_end_object(w);
}

static const char *const event_names[] = {[EST_EVENT_ALLOC] = "alloc", [EST_EVENT_FREE] = "free",
                                          [EST_EVENT_MOVE] = "move"};

static void write_event(json_writer *w, const est_report *r, const est_event *e) {
    jw_begin_object(w, NULL);
    jw_string(w, "event", event_names[e->kind]);
    jw_string(w, "phase", est_phase_name(e->phase));
    jw_string(w, "layer", layer_label(r, e->layer));
    jw_string(w, "module", layer_module(r, e->layer));
    jw_string(w, "tensor", e->tensor);
    jw_string(w, "what", e->what);
    jw_string(w, "category", est_category_name(e->category));
    jw_u64(w, "bytes", e->bytes);
    jw_u64(w, "allocated", e->allocated);
    jw_u64(w, "reserved", e->reserved);
    jw_end_object(w);
}

void est__jw_step(json_writer *w, const est_report *r, bool timeline) {
    if (!est_report_snapshot(r, EST_SNAPSHOT_PEAK)) return;
    jw_begin_object(w, "snapshots");
    write_snapshot(w, "before", est_report_snapshot(r, EST_SNAPSHOT_BEFORE));
    write_snapshot(w, "peak", est_report_snapshot(r, EST_SNAPSHOT_PEAK));
    write_snapshot(w, "after", est_report_snapshot(r, EST_SNAPSHOT_AFTER));
    jw_end_object(w);
    if (!timeline) return;
    jw_begin_array(w, "timeline");
    for (size_t i = 0; i < est_report_event_count(r); i++) write_event(w, r, est_report_event(r, i));
    jw_end_array(w);
}
