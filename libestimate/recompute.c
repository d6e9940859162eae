/*
 * recompute.c: activation checkpointing in the simulated step
 * (est_options.checkpoint: torch.utils.checkpoint, use_reentrant=False). The
 * forward of a segment keeps only its inputs; when backward first needs a
 * tensor the segment's ops would have saved, the segment's forward runs again
 * up to its last op that saves anything (docs/memory-model.md,
 * "Activation checkpointing (--checkpoint)").
 */
#include "sim.h"

/* The segments of est_options.checkpoint and the per-node and per-tensor
 * state of their recomputes. */
est_status est__sim_plan_segments(sim *s, size_t nt, size_t nn, est_error *err) {
    est_status st = est__plan_checkpoint(s->g, &s->r->checkpoint, &s->segs, &s->n_segs, err);
    if (st != EST_OK) return st;
    s->seg_of = malloc(nn * sizeof *s->seg_of);
    s->seg_last_saver = malloc(((size_t)s->n_segs + 1) * sizeof *s->seg_last_saver);
    s->seg_done = calloc((size_t)s->n_segs + 1, sizeof *s->seg_done);
    s->recompute_until = calloc(nt, sizeof *s->recompute_until);
    s->recomputed = calloc(nt, sizeof *s->recomputed);
    s->rc_first = calloc(nn + 1, sizeof *s->rc_first);
    s->rc_order = calloc(nt, sizeof *s->rc_order);
    s->rc_last = calloc(nt, sizeof *s->rc_last);
    if (s->r->amp != EST_AMP_NONE) {
        s->rc_pcast_until = calloc(nt, sizeof *s->rc_pcast_until);
        s->rc_pcast_live = calloc(nt, sizeof *s->rc_pcast_live);
        if (!s->rc_pcast_until || !s->rc_pcast_live) return est__fail(err, EST_ENOMEM, "out of memory simulating the step");
    }
    if (!s->seg_of || !s->seg_last_saver || !s->seg_done || !s->recompute_until || !s->recomputed || !s->rc_first ||
        !s->rc_order || !s->rc_last)
        return est__fail(err, EST_ENOMEM, "out of memory simulating the step");
    for (size_t i = 0; i < nn; i++) s->seg_of[i] = -1;
    for (int32_t seg = 0; seg < s->n_segs; seg++) {
        s->seg_last_saver[seg] = -1;
        for (int32_t i = s->segs[seg].first; i <= s->segs[seg].last; i++) {
            s->seg_of[i] = seg;
            s->r->layers[i].segment = seg;
        }
    }
    s->r->totals.checkpoint_segments = (uint64_t)s->n_segs;
    return EST_OK;
}

/* --amp: the recompute runs under autocast again, with an autocast cache of
 * its own. For each parameter whose low copy an op of first..end saves, the
 * earliest such op keeps it. */
static void plan_recomputed_casts(sim *s, int32_t first, int32_t end) {
    for (int32_t j = first; j <= end; j++)
        for (int k = 0; k < s->g->nodes[j].n_inputs && k < 32; k++)
            if (is_cast(s, j, k) && cached_cast(s, j, k)) s->rc_pcast_until[s->base[s->g->nodes[j].inputs[k]]] = INT32_MAX;
    for (int32_t j = end; j >= first; j--)
        for (int k = 0; k < s->g->nodes[j].n_inputs && k < 32; k++)
            if (is_cast(s, j, k) && cached_cast(s, j, k) && (s->cast_saved[j] & EST_SLOT(k)))
                s->rc_pcast_until[s->base[s->g->nodes[j].inputs[k]]] = j;
}

/* Node j's autocast copies in a recompute: made before it runs (a
 * parameter's once per recompute); after it, the per-use copies its backward
 * does not keep are freed. */
static void recompute_casts(sim *s, int32_t j, bool after) {
    const est_node *n = &s->g->nodes[j];
    for (int k = 0; k < n->n_inputs; k++) {
        if (!is_cast(s, j, k)) continue;
        if (cached_cast(s, j, k)) {
            int32_t b = s->base[n->inputs[k]];
            if (after || s->rc_pcast_live[b]) continue;
            s->rc_pcast_live[b] = true;
            est__sim_alloc(s, EST_CAT_ACTIVATIONS, cast_bytes(s, j, k), KEY(K_RCAST, b, 0));
        } else if (!after) {
            est__sim_alloc(s, EST_CAT_ACTIVATIONS, cast_bytes(s, j, k), cast_key(s, j, k));
        } else if (!(s->cast_saved[j] & EST_SLOT(k))) {
            est__sim_release(s, EST_CAT_ACTIVATIONS, cast_bytes(s, j, k), cast_key(s, j, k));
        }
    }
}

/* The recompute's autocast exits: its cached parameter copies that no
 * backward keeps are freed. */
static void exit_recompute_autocast(sim *s, int32_t first, int32_t end) {
    for (int32_t j = first; j <= end; j++)
        for (int k = 0; k < s->g->nodes[j].n_inputs && k < 32; k++) {
            if (!is_cast(s, j, k) || !cached_cast(s, j, k)) continue;
            int32_t b = s->base[s->g->nodes[j].inputs[k]];
            if (s->rc_pcast_live[b] && s->rc_pcast_until[b] == INT32_MAX) {
                est__sim_release(s, EST_CAT_ACTIVATIONS, cast_bytes(s, j, k), KEY(K_RCAST, b, 0));
                s->rc_pcast_live[b] = false;
            }
        }
}

/* Backward first needs a saved tensor of segment seg: its forward runs again
 * (with grad, so its ops save as usual) up to its last node that saves
 * anything; what no recomputed op saves is freed after its last reader. */
void est__sim_recompute_segment(sim *s, int32_t seg) {
    const est_segment *S = &s->segs[seg];
    int32_t end = s->seg_last_saver[seg];
    s->seg_done[seg] = true;
    /* a shape-only node does not run again: its reads keep nothing alive
     * (a tensor only a Shape reads is freed as soon as it is made) */
    for (int32_t j = S->first; j <= end; j++)
        for (int k = 0; !s->r->layers[j].shape_only && k < s->g->nodes[j].n_inputs; k++)
            if (s->g->nodes[j].inputs[k] >= 0) s->rc_last[s->base[s->g->nodes[j].inputs[k]]] = j;
    if (s->dt) plan_recomputed_casts(s, S->first, end);
    for (int32_t j = S->first; j <= end; j++) {
        const est_node *n = &s->g->nodes[j];
        est_layer *L = &s->r->layers[j];
        if (L->shape_only) continue;
        est__sim_moment(s, EST_PHASE_BACKWARD, j, NULL);
        if (s->recording) {
            L->recomputed = 1;
            s->r->totals.flops_recompute = est_add_sat(s->r->totals.flops_recompute, L->flops_forward);
        }
        for (int k = 0; k < n->n_outputs; k++) {
            int32_t t = n->outputs[k];
            if (t < 0 || is_folded(s, t) || s->base[t] != t || s->recomputed[t]) continue;
            est__sim_alloc(s, EST_CAT_ACTIVATIONS, tensor_alloc(s, t), KEY(K_RECOMPUTED, t, 0));
            s->recomputed[t] = true;
        }
        if (s->dt) recompute_casts(s, j, false);
        for (int32_t e = s->extra_first[j]; e < s->extra_first[j + 1]; e++)
            est__sim_alloc(s, EST_CAT_ACTIVATIONS, s->extra_alloc[e], KEY(K_EXTRA, j, e - s->extra_first[j]));
        uint64_t ws = s->ws_forward[j];
        est__sim_observe_transient(s, EST_PHASE_BACKWARD, n->name, ws);
        if (s->dt) recompute_casts(s, j, true);
        for (int k = 0; k < n->n_inputs + n->n_outputs; k++) {
            int32_t t = k < n->n_inputs ? n->inputs[k] : n->outputs[k - n->n_inputs];
            if (t < 0) continue;
            int32_t b = s->base[t];
            if (s->recomputed[b] && s->recompute_until[b] == INT32_MAX && s->rc_last[b] <= j) {
                est__sim_release(s, EST_CAT_ACTIVATIONS, tensor_alloc(s, b), KEY(K_RECOMPUTED, b, 0));
                s->recomputed[b] = false;
            }
        }
    }
    for (int32_t j = S->first; j <= end; j++)
        for (int k = 0; k < s->g->nodes[j].n_inputs; k++)
            if (s->g->nodes[j].inputs[k] >= 0) s->rc_last[s->base[s->g->nodes[j].inputs[k]]] = -1;
    if (s->dt) exit_recompute_autocast(s, S->first, end);
}
