/*
 * sim_arrays.c: the step's per-tensor and per-node arrays (sim.h):
 * allocated before the planning, sized once the shapes are known (each
 * tensor's allocated bytes, each node's workspaces), and freed.
 */
#include "parallel.h"

/* The pages of the arrays the planning writes whole, faulted in on a second
 * thread while it runs (the largest, the cost contexts, is written first). */
static void prefault_planning_arrays(sim *s, size_t nt, size_t nn) {
    est_prefault *pf = &s->pages;
    est__prefault_add(pf, s->bwd_order, nt * sizeof *s->bwd_order);
    est__prefault_add(pf, s->bwd_first, nn * sizeof *s->bwd_first);
    est__prefault_add(pf, s->release_order, nt * sizeof *s->release_order);
    est__prefault_add(pf, s->release_first, nn * sizeof *s->release_first);
    est__prefault_add(pf, s->saved_until, nt * sizeof *s->saved_until);
    est__prefault_add(pf, s->last_use, nt * sizeof *s->last_use);
    est__prefault_add(pf, s->ws_backward, nn * sizeof *s->ws_backward);
    est__prefault_add(pf, s->ws_forward, nn * sizeof *s->ws_forward);
    est__prefault_add(pf, s->alloc_bytes, nt * sizeof *s->alloc_bytes);
    est__prefault_add(pf, s->extra_first, nn * sizeof *s->extra_first);
    est__prefault_add(pf, s->saved_outputs, nn * sizeof *s->saved_outputs);
    est__prefault_add(pf, s->saved_inputs, nn * sizeof *s->saved_inputs);
    est__prefault_add(pf, s->base, nt * sizeof *s->base);
    est__prefault_add(pf, s->ctx, nn * sizeof *s->ctx);
    est__prefault_start(pf);
}

/* The entries past the last tensor and node of the arrays the planning
 * writes whole; extra_first[0] too, which no node writes in a graph without
 * nodes. */
static void zero_sentinels(sim *s, size_t nt, size_t nn) {
    s->base[nt - 1] = s->last_use[nt - 1] = s->saved_until[nt - 1] = 0;
    s->release_order[nt - 1] = s->bwd_order[nt - 1] = 0;
    s->contiguous[nt - 1] = s->expanded[nt - 1] = s->needs_grad[nt - 1] = false;
    s->saved_inputs[nn - 1] = s->saved_outputs[nn - 1] = s->same_size[nn - 1] = s->grad_inputs[nn - 1] = 0;
    s->release_first[nn] = s->bwd_first[nn] = s->extra_first[nn] = s->extra_first[0] = 0;
}

/* The next `bytes` of block at *used, 16-aligned as malloc's; NULL where
 * block is (place_arrays measuring). */
static void *carve(char *block, size_t *used, size_t bytes) {
    void *at = block ? block + *used : NULL;
    *used += (bytes + 15) & ~(size_t)15;
    return at;
}

/* The arrays that live as long as the estimate's simulation, placed in
 * block (NULL: only measured); returns the bytes they take. One allocation,
 * not one each: their 19 mallocs and frees were 1% of the instructions of a
 * re-estimate of a resnet50. */
static size_t place_arrays(sim *s, char *block, size_t nt, size_t nn) {
    size_t used = 0;
    s->base = carve(block, &used, nt * sizeof *s->base);
    s->needs_grad = carve(block, &used, nt * sizeof *s->needs_grad);
    s->release_first = carve(block, &used, (nn + 1) * sizeof *s->release_first);
    s->release_order = carve(block, &used, nt * sizeof *s->release_order);
    s->saved_until = carve(block, &used, nt * sizeof *s->saved_until);
    s->activation = carve(block, &used, nt * sizeof *s->activation);
    s->param = carve(block, &used, nt * sizeof *s->param);
    s->grad_block = carve(block, &used, nt * sizeof *s->grad_block);
    s->saved_inputs = carve(block, &used, nn * sizeof *s->saved_inputs);
    s->saved_outputs = carve(block, &used, nn * sizeof *s->saved_outputs);
    s->extra_first = carve(block, &used, (nn + 1) * sizeof *s->extra_first);
    s->same_size = carve(block, &used, nn * sizeof *s->same_size);
    s->grad_inputs = carve(block, &used, nn * sizeof *s->grad_inputs); /* est__sim_build_contexts writes each */
    s->bwd_first = carve(block, &used, (nn + 1) * sizeof *s->bwd_first);
    s->bwd_order = carve(block, &used, nt * sizeof *s->bwd_order);
    s->inplace_slot = carve(block, &used, nn * sizeof *s->inplace_slot);
    /* written for every tensor and node (est__sim_size) */
    s->alloc_bytes = carve(block, &used, nt * sizeof *s->alloc_bytes);
    s->ws_forward = carve(block, &used, nn * sizeof *s->ws_forward);
    s->ws_backward = carve(block, &used, nn * sizeof *s->ws_backward);
    return used;
}

bool est__sim_alloc_arrays(sim *s) {
    size_t nt = (size_t)s->g->n_tensors + 1, nn = (size_t)s->g->n_nodes + 1;
    s->weights = est__graph_weights(s->g);
    if (!s->weights) s->weights = s->own_weights = est__weights_make(s->g);
    if (!s->weights) return false;
    /* the planning writes every tensor's and node's entry of the arrays
     * malloc'd here (lifetimes.c); their last, a sentinel, is zeroed below */
    s->arrays = malloc(place_arrays(s, NULL, nt, nn));
    if (!s->arrays) return false;
    place_arrays(s, s->arrays, nt, nn);
    memset(s->grad_block, 0xff, nt * sizeof *s->grad_block); /* every entry -1: no gradient */
    /* freed once the step is planned (est__sim_compact_for_step) */
    s->contiguous = malloc(nt * sizeof *s->contiguous);
    s->expanded = malloc(nt * sizeof *s->expanded);
    s->last_use = malloc(nt * sizeof *s->last_use);
    s->ctx = malloc(nn * sizeof *s->ctx); /* est__sim_build_contexts writes each */
    s->allocated = calloc(nt, sizeof *s->allocated);
    s->kept = calloc(nt, sizeof *s->kept);
    s->grad_key0 = calloc(nt, sizeof *s->grad_key0);
    s->param_has_grad = calloc(nt, sizeof *s->param_has_grad);
    s->unreached = calloc(nn, sizeof *s->unreached);
    if (!s->contiguous || !s->expanded || !s->last_use || !s->ctx || !s->allocated || !s->kept || !s->grad_key0 ||
        !s->param_has_grad || !s->unreached)
        return false;
    zero_sentinels(s, nt, nn);
    prefault_planning_arrays(s, nt, nn);
    if (s->r->amp != EST_AMP_NONE) {
        s->low = s->r->amp == EST_AMP_FP16 ? EST_DT_FLOAT16 : EST_DT_BFLOAT16;
        s->dt = calloc(nt, sizeof *s->dt);
        s->cast_to = calloc(nn, sizeof *s->cast_to);
        s->cast_mask = calloc(nn, sizeof *s->cast_mask);
        s->cast_saved = calloc(nn, sizeof *s->cast_saved);
        s->pcast_until = calloc(nt, sizeof *s->pcast_until);
        s->pcast_live = calloc(nt, sizeof *s->pcast_live);
        if (!s->dt || !s->cast_to || !s->cast_mask || !s->cast_saved || !s->pcast_until || !s->pcast_live)
            return false;
    }
    return true;
}

/* Node i's workspace as its `rule` gives it, one GPU's share, rounded. */
static uint64_t node_workspace(sim *s, int32_t i, uint64_t (*rule)(const est_cost_ctx *)) {
    uint64_t bytes = rule(&s->ctx[i]);
    if (s->tp_node && s->tp_node[i]) bytes /= (uint64_t)s->r->parallel.tp; /* --tp: a GPU runs 1/tp of the op */
    return round_alloc(bytes);
}

/* What every iteration reads of a tensor's or a node's size, computed once:
 * tensors' allocated bytes, nodes' workspaces. */
void est__sim_size(sim *s) {
    const est_graph *g = s->g;
    uint64_t *alloc_bytes = s->alloc_bytes;
    int32_t n_tensors = g->n_tensors;
    if (!s->dt && !s->tp_split) { /* stored_dtype and local_elements, from locals */
        const est_report *r = s->r;
        const est_tval *tv = r->tv;
        est_dtype stored[EST_DT_COUNT]; /* est__stored_dtype of each dtype, asked once */
        for (int dt = 0; dt < EST_DT_COUNT; dt++) stored[dt] = est__stored_dtype(r, (est_dtype)dt);
        for (int32_t t = 0; t < n_tensors; t++) {
            est_dtype dt = tv[t].dtype;
            dt = (unsigned)dt < EST_DT_COUNT ? stored[dt] : est__stored_dtype(r, dt);
            alloc_bytes[t] = round_alloc(est__dtype_bytes(dt, est_tval_elements(&tv[t])));
        }
    } else {
        for (int32_t t = 0; t < n_tensors; t++)
            alloc_bytes[t] = round_alloc(est__dtype_bytes(stored_dtype(s, t), local_elements(s, t)));
    }
    /* read only where the node runs: its forward when it is not
     * shape-only, its backward when it has one; 0 elsewhere */
    const est_layer *layers = s->r->layers;
    const est_cost_ctx *ctx = s->ctx;
    uint64_t *ws_forward = s->ws_forward, *ws_backward = s->ws_backward;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_op_def *op = g->nodes[i].op; /* most ops have no workspace rule: 0, no call */
        ws_forward[i] = !layers[i].shape_only && op->workspace ? node_workspace(s, i, op->workspace) : 0;
        ws_backward[i] = ctx[i].any_grad && op->backward_workspace ? node_workspace(s, i, op->backward_workspace) : 0;
    }
}

void est__sim_free(sim *s) {
    est__prefault_wait(&s->pages);
    est__sim_let_go_of_plan(s); /* a failed estimate's, between planning and compacting */
    free(s->arrays);
    free(s->unreached);
    free(s->contiguous);
    free(s->expanded);
    free(s->allocated);
    free(s->last_use);
    free(s->kept);
    free(s->trained);
    free(s->fwd_nodes);
    free(s->bwd_nodes);
    free(s->fwd_runs);
    free(s->fwd_allocates);
    free(s->grad_key0);
    free(s->gblocks);
    free(s->param_has_grad);
    free(s->ctx);
    free(s->ctx_tv);
    free(s->ctx_flags);
    free(s->any_grad);
    free(s->extra_alloc);
    free(s->dt);
    free(s->cast_to);
    free(s->cast_mask);
    free(s->cast_saved);
    free(s->pcast_until);
    free(s->pcast_live);
    free(s->segs);
    free(s->seg_of);
    free(s->seg_last_saver);
    free(s->seg_done);
    free(s->recompute_until);
    free(s->recomputed);
    free(s->rc_first);
    free(s->rc_order);
    free(s->rc_last);
    free(s->rc_pcast_until);
    free(s->rc_pcast_live);
    free(s->facts);
    est__par_free(s);
    if (s->tl) est__tl_finish(s, &(est_error){0}); /* a failed estimate's: frees it */
    free(s->tp_split);
    free(s->tp_node);
    free(s->tp_column_input);
    est__cache_destroy(s->cache);
    for (int k = 0; k < STREAM_COUNT - 1; k++) est__cache_destroy(s->side_cache[k]);
    free(s->blocks.keys);
    free(s->blocks.handles);
    free(s->by_tensor);
    free(s->by_extra);
    est__weights_free(s->own_weights);
}

