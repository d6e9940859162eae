/*
 * sim_memory.c: what the simulated step holds, by category, and the caching
 * allocator's replay of the same allocations and frees. simulate.c says when
 * the step allocates and frees; this file keeps the books: the live bytes of
 * each category, the peak candidates, and each live block's handle by key.
 */
#include "sim.h"


static uint64_t slot_of(const handle_map *m, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (h ^ (h >> 29)) & (m->cap - 1);
}

static bool map_grow(handle_map *m) {
    uint64_t cap = m->cap ? m->cap * 2 : 1024;
    handle_map n = {.keys = calloc(cap, sizeof *n.keys), .handles = calloc(cap, sizeof *n.handles), .cap = cap};
    if (!n.keys || !n.handles) {
        free(n.keys);
        free(n.handles);
        return false;
    }
    for (uint64_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        uint64_t j = slot_of(&n, m->keys[i]);
        while (n.keys[j]) j = (j + 1) & (cap - 1);
        n.keys[j] = m->keys[i];
        n.handles[j] = m->handles[i];
        n.count++;
    }
    free(m->keys);
    free(m->handles);
    *m = n;
    return true;
}

bool est__map_put(handle_map *m, uint64_t key, int64_t handle) {
    if ((m->count + 1) * 2 > m->cap && !map_grow(m)) return false;
    uint64_t j = slot_of(m, key);
    while (m->keys[j] && m->keys[j] != key) j = (j + 1) & (m->cap - 1);
    m->count += !m->keys[j];
    m->keys[j] = key;
    m->handles[j] = handle;
    return true;
}

int64_t est__map_take(handle_map *m, uint64_t key) {
    if (!m->cap) return -1;
    uint64_t j = slot_of(m, key);
    while (m->keys[j] && m->keys[j] != key) j = (j + 1) & (m->cap - 1);
    if (!m->keys[j]) return -1;
    int64_t handle = m->handles[j];
    /* backward-shift deletion keeps every probe chain unbroken */
    for (uint64_t hole = j, k = (j + 1) & (m->cap - 1); m->keys[k]; k = (k + 1) & (m->cap - 1)) {
        uint64_t home = slot_of(m, m->keys[k]);
        if (((k - home) & (m->cap - 1)) >= ((k - hole) & (m->cap - 1))) {
            m->keys[hole] = m->keys[k];
            m->handles[hole] = m->handles[k];
            hole = k;
        }
        j = hole;
    }
    m->keys[j] = 0;
    m->count--;
    return handle;
}

/* The replay's cache of a stream; a side stream's is made at its first
 * block (NULL when host memory ran out). */
static est_cache *stream_cache(sim *s, int stream) {
    if (stream == STREAM_COMPUTE) return s->cache;
    est_cache **c = &s->side_cache[stream - 1];
    if (!*c) {
        uint64_t before = est__sim_peak_reserved(s); /* the compute stream's alone */
        if (!(*c = est__cache_new())) return NULL;
        s->peak_reserved = before;
    }
    return *c;
}

uint64_t est__sim_reserved(const sim *s) {
    uint64_t sum = s->cache ? est__cache_reserved(s->cache) : 0;
    for (int k = 0; k < STREAM_COUNT - 1; k++)
        if (s->side_cache[k]) sum += est__cache_reserved(s->side_cache[k]);
    return sum;
}

/* Whether a stream besides the compute stream has blocks: reserved bytes
 * and the device limit are then the streams' together. */
static bool several_streams(const sim *s) {
    for (int k = 0; k < STREAM_COUNT - 1; k++)
        if (s->side_cache[k]) return true;
    return false;
}

uint64_t est__sim_peak_reserved(const sim *s) {
    if (!several_streams(s)) return s->cache ? est__cache_peak_reserved(s->cache) : 0;
    return s->peak_reserved;
}

/* A block of the replay on a stream (the callers check that it is
 * replaying: without the replay, no call): its handle, or 0 when the replay
 * stops here (host memory, or the device limit: the step's out-of-memory
 * point). With several streams the device limit is what the others'
 * segments leave. */
static int64_t replay_alloc(sim *s, int stream, uint64_t bytes) {
    if (!bytes) return 0;
    est_cache *c = stream_cache(s, stream);
    if (!c) {
        s->cache_failed = true;
        return 0;
    }
    bool several = several_streams(s);
    if (several && s->r->memory_limit) {
        uint64_t others = est__sim_reserved(s) - est__cache_reserved(c);
        est__cache_set_limit(c, s->r->memory_limit > others ? s->r->memory_limit - others : 1);
    }
    int64_t h = est__cache_alloc(c, bytes);
    if (several && est__sim_reserved(s) > s->peak_reserved) s->peak_reserved = est__sim_reserved(s);
    if (h == EST__CACHE_EDEVICE && !s->device_oom) {
        s->device_oom = true;
        s->r->totals.out_of_memory = 1;
        s->r->totals.oom_phase = s->at_phase;
        const char *layer = est__sim_at_layer(s);
        s->r->totals.oom_layer = layer ? layer : "";
    } else if (h < 0) {
        s->cache_failed = true;
    }
    return h > 0 ? h : 0;
}

/* The direct slot of a block's key: a tensor's storage, gradient or
 * recomputed copy, a node's saved extra; NULL for the other keys, which
 * live in the map. */
static inline int64_t *direct_slot(const sim *s, uint64_t key) {
    uint64_t kind = key >> 56, index = (key >> 16) & 0xffffffffu, slot = key & 0xffff;
    int which = kind == K_STORAGE ? 0 : kind == K_GRAD ? 1 : kind == K_RECOMPUTED ? 2 : -1;
    if (which >= 0)
        return s->by_tensor && !slot && index < (uint64_t)s->g->n_tensors ? &s->by_tensor[index * 3 + (uint64_t)which]
                                                                           : NULL;
    if (kind == K_EXTRA && s->by_extra && index < (uint64_t)s->g->n_nodes &&
        slot < (uint64_t)(s->extra_first[index + 1] - s->extra_first[index]))
        return &s->by_extra[(uint64_t)s->extra_first[index] + slot];
    return NULL;
}

static bool block_put(sim *s, uint64_t key, int64_t handle) {
    int64_t *d = direct_slot(s, key);
    if (!d) return est__map_put(&s->blocks, key, handle);
    *d = handle;
    return true;
}

/* Removes key; returns its handle, or -1 when it is not there. */
static int64_t block_take(sim *s, uint64_t key) {
    int64_t *d = direct_slot(s, key);
    if (!d) return est__map_take(&s->blocks, key);
    int64_t h = *d ? *d : -1;
    *d = 0;
    return h;
}

/* An allocation's block in the replay and its event in the timeline. */
void est__sim_replay_alloc(sim *s, est_category c, uint64_t bytes, uint64_t key) {
    int64_t h = replaying(s) ? replay_alloc(s, key_stream(key), bytes) : 0;
    /* optimizer state is never freed or moved (K_OPT): no handle to keep,
     * and the map stays small (two entries a parameter with Adam) */
    if (h > 0 && key >> 56 != K_OPT && !block_put(s, key, h)) s->cache_failed = true;
    if (s->tl) est__tl_push(s, EST_EVENT_ALLOC, c, bytes, key);
}

/* A free's block in the replay and its event in the timeline. */
void est__sim_replay_release(sim *s, est_category c, uint64_t bytes, uint64_t key) {
    if (replaying(s) && bytes) {
        int64_t h = block_take(s, key);
        est_cache *in = key_stream(key) == STREAM_COMPUTE ? s->cache : s->side_cache[key_stream(key) - 1];
        if (h >= 0 && in) est__cache_release(in, h);
    }
    if (s->tl) est__tl_push(s, EST_EVENT_FREE, c, bytes, key);
}

void est__sim_prefetch_block(const sim *s, uint64_t key) {
    const int64_t *d = direct_slot(s, key);
    if (d && *d > 0) est__cache_prefetch(s->cache, *d);
}

/* The same block under another key (a view's gradient, y kept past its
 * step), or in another category. */
static void rekey(sim *s, uint64_t from, uint64_t to) {
    if (!replaying(s)) return;
    int64_t h = block_take(s, from);
    if (h >= 0 && !block_put(s, to, h)) s->cache_failed = true;
}

void est__sim_move(sim *s, est_category from, est_category to, uint64_t bytes, uint64_t from_key, uint64_t to_key) {
    if (s->overflow) return;
    s->live[from] -= bytes;
    s->live[to] += bytes;
    rekey(s, from_key, to_key);
    if (s->tl) {
        est__tl_push(s, EST_EVENT_MOVE, from, bytes, from_key);
        est__tl_push(s, EST_EVENT_MOVE, to, bytes, to_key); /* a MOVE pair: the old key, then the new */
    }
}

/* Records a peak candidate: what is live plus a transient of `extra` bytes. */
void est__sim_observe(sim *s, est_phase phase, const char *layer, uint64_t extra) {
    if (!s->recording) return;
    if (extra > s->max_transient) s->max_transient = extra;
    if (s->live[EST_CAT_ACTIVATIONS] > s->max_activations) s->max_activations = s->live[EST_CAT_ACTIVATIONS];
    if (s->tl && extra) est__tl_transient(s, extra);
    est_peak *p = &s->r->peak;
    uint64_t at = sim_add(s, s->total, extra);
    if (s->overflow || at <= p->bytes) return;
    p->bytes = at;
    p->phase = phase;
    p->layer = layer;
#define PEAK_FROM_LIVE(e, name) p->name = s->live[EST_CAT_##e];
    EST_CATEGORIES(PEAK_FROM_LIVE)
#undef PEAK_FROM_LIVE
    p->temp += extra;
}

/* A block that only the allocator's replay sees: a transient whose bytes
 * est__sim_observe() counts as `extra`. Returns its handle, or 0. */
int64_t est__sim_block_alloc(sim *s, uint64_t bytes) {
    est__sim_check_request(s, bytes);
    return s->overflow || !replaying(s) ? 0 : replay_alloc(s, STREAM_COMPUTE, bytes);
}

void est__sim_block_release(sim *s, int64_t h) {
    if (h > 0 && replaying(s)) est__cache_release(s->cache, h);
}
