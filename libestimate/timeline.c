/*
 * timeline.c: the recorded step as events (est_options.timeline): every
 * allocation and free sim_memory.c books in the steady-state iteration (the
 * forward pass in inference), each transient a peak was observed with as an
 * alloc and a free, and from them what is live at the peak and the
 * snapshots before, at the peak and after.
 */
#include "sim.h"

struct est_timeline {
    est_event *events;       /* every event since the model was made */
    size_t n, cap;
    size_t first, last;      /* where the recorded step's begin and end */
    bool failed;             /* the host ran out: the estimate fails */
    uint64_t before[EST_CAT_COUNT];
};

bool est__tl_new(sim *s) { return (s->tl = calloc(1, sizeof *s->tl)) != NULL; }

void est__tl_start(sim *s) {
    if (!s->tl) return;
    s->tl->first = s->tl->n;
    for (int c = 0; c < EST_CAT_COUNT; c++) s->tl->before[c] = s->live[c];
}

/* What block `key` is, and the graph tensor it holds (or NULL). */
static const char *describe(const sim *s, uint64_t key, est_category c, const char **tensor) {
    uint64_t kind = key >> 56, index = (key >> 16) & 0xffffffffu, slot = key & 0xffff;
    const est_graph *g = s->g;
    bool is_tensor = index < (uint64_t)g->n_tensors;
    *tensor = NULL;
    switch (kind) {
    case K_STORAGE:
        *tensor = is_tensor ? g->tensors[index].name : NULL;
        return c == EST_CAT_PARAMS ? "parameter" : c == EST_CAT_BUFFERS ? "buffer" : c == EST_CAT_INPUTS ? "input"
                                                                                                           : "activation";
    case K_RECOMPUTED:
        *tensor = is_tensor ? g->tensors[index].name : NULL;
        return "recomputed activation";
    case K_GRAD:
        *tensor = is_tensor ? g->tensors[index].name : NULL;
        return c == EST_CAT_GRADS ? "parameter gradient" : "activation gradient";
    case K_OPT:
        *tensor = is_tensor ? g->tensors[index].name : NULL;
        if (s->r->optimizer == EST_OPT_MOMENTUM) return "momentum_buffer";
        if (s->r->optimizer == EST_OPT_ADAFACTOR) return slot ? "col_var" : "row_var";
        return slot ? "exp_avg_sq" : "exp_avg";
    case K_EXTRA:
        return "saved for backward";
    case K_CAST:
        if (index < (uint64_t)g->n_nodes && (int64_t)slot < g->nodes[index].n_inputs && g->nodes[index].inputs[slot] >= 0)
            *tensor = g->tensors[g->nodes[index].inputs[slot]].name;
        return "autocast copy";
    case K_PCAST:
    case K_RCAST:
        *tensor = is_tensor ? g->tensors[index].name : NULL;
        return "autocast copy";
    case K_OTHER:
        if (index < (uint64_t)g->n_outputs) *tensor = g->tensors[g->outputs[index]].name;
        return index < (uint64_t)g->n_outputs ? "output, kept for the next step" : "loss";
    case K_TEMP:
        return "loss gradient";
    case K_PAR:
        switch (slot) {
        case P_UNSHARDED: *tensor = is_tensor ? g->tensors[index].name : NULL; return "gathered parameter";
        case P_GATHERED:
        case P_GATHERED_BACKWARD: return "all-gather buffer";
        case P_REDUCE_INPUT: return "reduce-scatter buffer";
        case P_SHARD_GRADS: return "gradient shards";
        case P_REDUCED: return "reduce-scatter output";
        case P_BUCKET: return "gradient bucket";
        case P_FIRST_BUCKET: return "first-iteration gradient bucket";
        case P_COALESCED: return "broadcast buffer";
        default: return "host copy";
        }
    default:
        return "workspace and temporaries";
    }
}

static est_event *next_event(struct est_timeline *tl) {
    if (tl->n == tl->cap) {
        size_t cap = tl->cap ? tl->cap * 2 : 4096;
        est_event *e = realloc(tl->events, cap * sizeof *e);
        if (!e) {
            tl->failed = true;
            return NULL;
        }
        tl->events = e;
        tl->cap = cap;
    }
    return &tl->events[tl->n++];
}

void est__tl_push(sim *s, est_event_kind kind, est_category c, uint64_t bytes, uint64_t key) {
    est_event *e = next_event(s->tl);
    if (!e) return;
    *e = (est_event){.kind = kind, .phase = s->at_phase, .layer = s->at_node, .category = c, .bytes = bytes,
                     .block = key, .allocated = s->total, .reserved = est__sim_reserved(s)};
    e->what = describe(s, key, c, &e->tensor);
}

void est__tl_transient(sim *s, uint64_t bytes) {
    est_event alloc = {.kind = EST_EVENT_ALLOC, .phase = s->at_phase, .layer = s->at_node, .category = EST_CAT_TEMP,
                       .bytes = bytes, .allocated = est_add_sat(s->total, bytes), .reserved = est__sim_reserved(s),
                       .what = "workspace and temporaries"};
    est_event *e = next_event(s->tl);
    if (!e) return;
    *e = alloc;
    /* the free is made from the copy: this second event may move the array */
    est_event *f = next_event(s->tl);
    if (f) {
        *f = alloc;
        f->kind = EST_EVENT_FREE;
        f->allocated = s->total;
    }
}

void est__tl_end(sim *s) {
    if (!s->tl) return;
    s->tl->last = s->tl->n;
    est_snapshot *after = &s->r->snapshots[EST_SNAPSHOT_AFTER];
    est_snapshot *before = &s->r->snapshots[EST_SNAPSHOT_BEFORE];
    *after = *before = (est_snapshot){0};
    for (int c = 0; c < EST_CAT_COUNT; c++) {
        before->category[c] = s->tl->before[c];
        before->bytes = est_add_sat(before->bytes, s->tl->before[c]);
        after->category[c] = s->live[c];
        after->bytes = est_add_sat(after->bytes, s->live[c]);
    }
}

/* ---- what is live at the peak ------------------------------------------------ */

/* The first event of the recorded step at which its allocated bytes reach
 * the peak; when none does, the peak is the step's start (an inference pass
 * of views allocates nothing): the event before it, or SIZE_MAX when there
 * is none. */
static size_t peak_event(const struct est_timeline *tl, uint64_t peak) {
    for (size_t i = tl->first; i < tl->last; i++)
        if (tl->events[i].kind == EST_EVENT_ALLOC && tl->events[i].allocated == peak) return i;
    return tl->first ? tl->first - 1 : SIZE_MAX;
}

static int by_bytes(const void *a, const void *b) {
    const est_live *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static est_live live_of(const sim *s, const est_event *e) {
    est_live l = {.tensor = e->tensor, .what = e->what, .layer = e->layer, .category = e->category,
                  .bytes = e->bytes, .rank = -1};
    int32_t t = e->tensor ? est__graph_find(s->g, e->tensor) : -1;
    if (t >= 0 && s->r->tv[t].rank >= 0) {
        l.dtype = stored_dtype(s, t);
        /* an autocast copy has the dtype it was cast to */
        uint64_t kind = e->block >> 56;
        if (kind == K_CAST) l.dtype = s->cast_to[(e->block >> 16) & 0xffffffffu];
        else if (kind == K_PCAST || kind == K_RCAST) l.dtype = s->low;
        l.rank = s->r->tv[t].rank;
        l.shape = s->r->tv[t].dims;
    }
    return l;
}

/* Replays every event from the model's creation to the peak's: the blocks
 * alive then, the largest first, into r->live. */
static bool live_at_peak(sim *s, est_report *r) {
    struct est_timeline *tl = s->tl;
    size_t at = peak_event(tl, r->peak.bytes);
    handle_map alive = {0}; /* block -> its event's index + 1 */
    est_live *live = NULL;
    bool ok = true;
    for (size_t i = 0; ok && at != SIZE_MAX && i <= at; i++) {
        est_event *e = &tl->events[i];
        if (!e->block) continue; /* a transient, freed by the next event */
        if (e->kind == EST_EVENT_ALLOC) {
            ok = est__map_put(&alive, e->block, (int64_t)i + 1);
        } else if (e->kind == EST_EVENT_FREE) {
            est__map_take(&alive, e->block);
        } else if (i + 1 < tl->n) { /* a MOVE pair: the old key, then the new */
            int64_t was = est__map_take(&alive, e->block);
            i++;
            if (was > 0) {
                tl->events[was - 1].category = tl->events[i].category; /* it is that now */
                ok = est__map_put(&alive, tl->events[i].block, was);
            }
        }
    }
    size_t n = 0;
    if (ok && (live = calloc(alive.count + 2, sizeof *live))) {
        for (uint64_t k = 0; k < alive.cap; k++)
            if (alive.keys[k]) live[n++] = live_of(s, &tl->events[alive.handles[k] - 1]);
        if (at != SIZE_MAX && at >= tl->first && !tl->events[at].block)
            live[n++] = live_of(s, &tl->events[at]); /* the peak's transient */
        qsort(live, n, sizeof *live, by_bytes);
    }
    free(alive.keys);
    free(alive.handles);
    r->live = live;
    r->n_live = n;
    return ok && live;
}

est_status est__tl_finish(sim *s, est_error *err) {
    struct est_timeline *tl = s->tl;
    if (!tl) return EST_OK;
    est_report *r = s->r;
    bool ok = !tl->failed && live_at_peak(s, r);
    if (ok && (r->events = malloc((tl->last - tl->first + 1) * sizeof *r->events))) {
        r->n_events = tl->last - tl->first;
        memcpy(r->events, tl->events + tl->first, r->n_events * sizeof *r->events);
        r->snapshots[EST_SNAPSHOT_PEAK].bytes = r->peak.bytes;
        for (int c = 0; c < EST_CAT_COUNT; c++)
            r->snapshots[EST_SNAPSHOT_PEAK].category[c] = est_peak_category(&r->peak, (est_category)c);
        r->have_snapshots = true;
    } else {
        ok = false;
    }
    free(tl->events);
    free(tl);
    s->tl = NULL;
    return ok ? EST_OK : est__fail(err, EST_ENOMEM, "out of memory recording the step's timeline");
}
