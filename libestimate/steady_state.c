/*
 * steady_state.c: the state the first training iteration leaves, derived
 * instead of simulated where only the recorded iteration reads it.
 *
 * Without the caching allocator's replay, a timeline or data parallelism,
 * the first iteration only sets up the state the recorded second starts
 * from: the starting state (the model and input created) plus the optimizer
 * state, the parameters' .grad tensors and the bound y and loss. That state
 * is derived here, and the derivation is checked, not assumed:
 *
 * An iteration's allocations, frees and flag changes follow from the plan,
 * from whether it is the first, and from the state saved here (the
 * per-tensor flags and each category's live bytes); the first differs from
 * a later one only in creating the optimizer state and in freeing no
 * previous y and loss, and its zero_grad frees nothing. Both zero_grads
 * leave the same flags, so both iterations then do the same; call their
 * common net effect Q. The recorded iteration from the derived state D
 * ends in D - grads(D) + Q - freed y; the first from the starting state S
 * ends in S + Q + optimizer state. When the recorded iteration ends in D
 * (every flag, every category's live bytes) and freed as the previous y and
 * loss what the derivation bound, Q = grads(D) + bound y, and the first
 * iteration would have ended in D. Otherwise S is put back and the first
 * iteration runs. An overflow or an allocation PyTorch refuses anywhere on
 * the way also puts S back: the first iteration then says where.
 */
#include "sim.h"

/* A per-tensor array an iteration changes, and its copy from the starting
 * state. */
typedef struct saved_array {
    void *array;
    void *start;
    size_t bytes;
} saved_array;

enum { MAX_SAVED = 8 };

struct est_steady {
    uint64_t live[EST_CAT_COUNT], total;             /* the starting state's */
    uint64_t derived_live[EST_CAT_COUNT], derived_total;
    uint64_t y_bound;                                /* the y and loss the derivation binds */
    uint64_t too_large;
    const char *too_large_at;
    uint64_t max_transient, max_activations, flops_recompute;
    est_peak peak;
    int n_saved;
    saved_array saved[MAX_SAVED];
    bool *derived_grads;                             /* param_has_grad of the derived state */
};

/* The first iteration's state is only read by the recorded one: no replay
 * of the allocator, no timeline and no data-parallel wrapper (whose hooks
 * count iterations) sees it. */
static bool applies(const sim *s) {
    return s->train && !s->cache && !s->tl && !s->par && !s->overflow && !s->too_large && !s->cache_failed;
}

static void add_saved(struct est_steady *st, void *array, size_t elem) {
    if (array) st->saved[st->n_saved++] = (saved_array){array, NULL, elem};
}

static const saved_array *saved_of(const struct est_steady *st, const void *array) {
    for (int k = 0; k < st->n_saved; k++)
        if (st->saved[k].array == array) return &st->saved[k];
    return NULL;
}

/* Lists the per-tensor arrays an iteration changes and copies them after
 * the struct; false: out of memory. */
static struct est_steady *save_start(sim *s) {
    struct est_steady probe = {0};
    /* the int32_t arrays first: every copy then starts aligned for its type
     * (no grad_key0 or grad_serial: without the replay and the timeline the
     * gradients' blocks take no keys) */
    add_saved(&probe, s->grad_block, sizeof *s->grad_block);
    add_saved(&probe, s->rc_last, sizeof *s->rc_last);
    add_saved(&probe, s->allocated, sizeof *s->allocated);
    add_saved(&probe, s->param_has_grad, sizeof *s->param_has_grad);
    add_saved(&probe, s->pcast_live, sizeof *s->pcast_live);
    add_saved(&probe, s->recomputed, sizeof *s->recomputed);
    add_saved(&probe, s->rc_pcast_live, sizeof *s->rc_pcast_live);
    size_t n = (size_t)s->g->n_tensors, total = n * sizeof *s->param_has_grad; /* derived_grads */
    for (int k = 0; k < probe.n_saved; k++) {
        probe.saved[k].bytes *= n;
        total += probe.saved[k].bytes;
    }
    struct est_steady *st = malloc(sizeof *st + total);
    if (!st) return NULL;
    *st = probe;
    char *next = (char *)(st + 1);
    for (int k = 0; k < st->n_saved; k++) {
        st->saved[k].start = next;
        memcpy(next, st->saved[k].array, st->saved[k].bytes);
        next += st->saved[k].bytes;
    }
    st->derived_grads = (bool *)next;
    memcpy(st->live, s->live, sizeof st->live);
    st->total = s->total;
    st->too_large = s->too_large;
    st->too_large_at = s->too_large_at;
    st->max_transient = s->max_transient;
    st->max_activations = s->max_activations;
    st->flops_recompute = s->r->totals.flops_recompute;
    st->peak = s->r->peak;
    return st;
}

/* y and loss as the first iteration leaves them bound: each output's
 * activation storage once (allocated marks the ones bound; the starting
 * flags are put back after), and the loss. */
static void bind_y(sim *s, struct est_steady *st) {
    const est_graph *g = s->g;
    for (int32_t k = 0; k < g->n_outputs; k++) {
        int32_t b = s->base[g->outputs[k]];
        if (s->allocated[b] || !is_activation_storage(s, b)) continue;
        s->allocated[b] = true;
        est__sim_alloc(s, EST_CAT_OTHER, tensor_alloc(s, b), KEY(K_OTHER, k, 0));
        st->y_bound = est_add_sat(st->y_bound, tensor_alloc(s, b));
    }
    est__sim_alloc(s, EST_CAT_OTHER, EST_ALLOC_ROUND, KEY(K_OTHER, g->n_outputs, 0));
    st->y_bound = est_add_sat(st->y_bound, EST_ALLOC_ROUND);
    const saved_array *allocated = saved_of(st, s->allocated);
    memcpy(s->allocated, allocated->start, allocated->bytes);
}

/* The .grad the first backward leaves on each parameter that trains and
 * needs one: into the books as one sum, each request checked (no one names
 * the blocks here, and an overflow or a refused request puts the starting
 * state back). */
static void create_grads(sim *s) {
    uint64_t sum = 0;
    for (int32_t k = 0; k < s->n_trained; k++) {
        int32_t t = s->trained[k];
        if (!s->needs_grad[t]) continue;
        est__sim_check_request(s, tensor_alloc(s, t));
        sum = est_add_sat(sum, tensor_alloc(s, t));
        s->param_has_grad[t] = true;
    }
    est__sim_alloc_unnamed(s, EST_CAT_GRADS, sum);
}

struct est_steady *est__steady_begin(sim *s) {
    if (!applies(s)) return NULL;
    struct est_steady *st = save_start(s);
    if (!st) return NULL;
    est__sim_moment(s, EST_PHASE_OPTIMIZER, -1, "");
    bind_y(s, st);
    create_grads(s);
    est__sim_create_optimizer_state(s);
    memcpy(st->derived_live, s->live, sizeof st->derived_live);
    st->derived_total = s->total;
    memcpy(st->derived_grads, s->param_has_grad, (size_t)s->g->n_tensors * sizeof *s->param_has_grad);
    return st;
}

/* Whether the recorded iteration ended in the derived state. */
static bool back_to_derived(const sim *s, const struct est_steady *st) {
    if (s->overflow || s->too_large || s->cache_failed || st->y_bound == UINT64_MAX || s->y_freed != st->y_bound ||
        s->total != st->derived_total || memcmp(s->live, st->derived_live, sizeof st->derived_live) != 0)
        return false;
    for (int k = 0; k < st->n_saved; k++) {
        const void *want = st->saved[k].array == s->param_has_grad ? st->derived_grads : st->saved[k].start;
        if (memcmp(st->saved[k].array, want, st->saved[k].bytes) != 0) return false;
    }
    return true;
}

/* The starting state, and the report as before the recorded iteration
 * (only a recorded iteration writes the layers' temporaries and recompute
 * marks). */
static void put_back(sim *s, const struct est_steady *st) {
    for (int k = 0; k < st->n_saved; k++) memcpy(st->saved[k].array, st->saved[k].start, st->saved[k].bytes);
    memcpy(s->live, st->live, sizeof s->live);
    s->total = st->total;
    s->overflow = false;
    s->too_large = st->too_large;
    s->too_large_at = st->too_large_at;
    s->cache_failed = false;
    s->max_transient = st->max_transient;
    s->max_activations = st->max_activations;
    s->r->peak = st->peak;
    s->r->totals.flops_recompute = st->flops_recompute;
    for (int32_t i = 0; i < s->g->n_nodes; i++) {
        s->r->layers[i].temp_bytes = 0;
        s->r->layers[i].recomputed = 0;
    }
}

bool est__steady_confirm(sim *s, struct est_steady *st) {
    bool confirmed = back_to_derived(s, st);
    if (!confirmed) put_back(s, st);
    free(st);
    return confirmed;
}
