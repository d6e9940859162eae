/*
 * optimizer.c: opt.step() and zero_grad(set_to_none=True) in the simulated
 * step (simulate.c): the state each optimizer creates at its first step, the
 * foreach temporaries of a step, parameter group by parameter group, and the
 * .grad tensors zero_grad drops.
 */
#include "parallel.h"

/* The optimizer's parameter groups. torch.optim steps one group at a time,
 * and a foreach step's temporaries go when its group is done. One group,
 * but under --tp with no data parallelism two: the split DTensors, then the
 * plain rest (embeddings, norms), since torch 2.11's foreach Adam refuses a
 * list that mixes them (docs/distributed.md, "Tensor parallelism"). Under
 * FSDP every parameter is a DTensor: one group. */
static int param_groups(const sim *s) {
    return s->tp_split && s->r->parallel.strategy == EST_STRATEGY_NONE ? 2 : 1;
}

static bool in_param_group(const sim *s, int32_t t, int group, int groups) {
    return groups == 1 || s->tp_split[t] == (group == 0);
}

/* One optimizer-state tensor of every parameter of a group this GPU
 * updates. */
static uint64_t group_state_bytes(const sim *s, int group, int groups) {
    uint64_t sum = 0;
    for (int32_t k = 0; k < s->n_trained; k++)
        if (in_param_group(s, s->trained[k], group, groups))
            sum = est_add_sat(sum, est__par_state_bytes(s, s->trained[k]));
    return sum;
}

static int state_per_param(const sim *s) {
    return s->r->optimizer == EST_OPT_SGD ? 0 : s->r->optimizer == EST_OPT_MOMENTUM ? 1 : 2;
}

/* Adafactor's second moment of parameter t, in elements: a row and a column
 * factor over its last two dims ("row_var": shape[:-1], "col_var":
 * shape[:-2] + shape[-1:]), or a full "variance" for a vector
 * (torch/optim/_adafactor.py, _init_group). */
static void adafactor_state(const sim *s, int32_t t, uint64_t *row, uint64_t *col) {
    const est_tval *v = &s->r->tv[t];
    if (v->rank < 2) {
        *row = est_tval_elements(v);
        *col = 0;
        return;
    }
    uint64_t lead = 1;
    for (int d = 0; d < v->rank - 2; d++) lead = est_mul_sat(lead, (uint64_t)v->dims[d]);
    *row = est_mul_sat(lead, (uint64_t)v->dims[v->rank - 2]);
    *col = est_mul_sat(lead, (uint64_t)v->dims[v->rank - 1]);
}

static uint64_t state_alloc(const sim *s, int32_t t, uint64_t elements) {
    return round_alloc(est__dtype_bytes(stored_dtype(s, t), elements));
}

/* Adafactor's default loop updates one parameter at a time: a matrix's
 * var_estimate (row_var @ col_var) is parameter-sized and becomes the
 * update in place; a vector's grad * grad and variance.clone() are two. The
 * largest of these is the step's transient. */
static void adafactor_step(sim *s) {
    uint64_t largest = 0;
    for (int32_t k = 0; k < s->n_trained; k++) {
        int32_t t = s->trained[k];
        uint64_t row, col;
        adafactor_state(s, t, &row, &col);
        uint64_t temp = col ? tensor_alloc(s, t) : est_mul_sat(2, tensor_alloc(s, t));
        if (temp > largest) largest = temp;
    }
    est__sim_observe_transient(s, EST_PHASE_OPTIMIZER, "", largest);
}

/* `per` state tensors of each parameter that trains, into the books as one
 * sum, each tensor's request checked as its allocation checks it: without
 * the replay and the timeline no one names a block. false (nothing added):
 * the sum would reach 2^64 - 1, where the books stop partway; allocate one
 * by one then. */
static bool add_state_at_once(sim *s, int per) {
    if (!per) return true;
    uint64_t sum = 0;
    for (int32_t k = 0; k < s->n_trained; k++) {
        uint64_t bytes = est__par_state_bytes(s, s->trained[k]);
        if (!bytes) continue;
        est__sim_check_request(s, bytes);
        sum = est_add_sat(sum, est_mul_sat(bytes, (uint64_t)per));
    }
    if (s->overflow || est_add_sat(s->total, sum) == UINT64_MAX) return false;
    est__sim_alloc_unnamed(s, EST_CAT_OPTIMIZER, sum);
    return true;
}

/* The state the first step creates, per parameter that trains: momentum's
 * buffer, Adam's exp_avg and exp_avg_sq, Adafactor's factored second
 * moment. */
void est__sim_create_optimizer_state(sim *s) {
    if (s->r->optimizer == EST_OPT_ADAFACTOR) {
        for (int32_t k = 0; k < s->n_trained; k++) {
            int32_t t = s->trained[k];
            uint64_t row, col;
            adafactor_state(s, t, &row, &col);
            est__sim_alloc(s, EST_CAT_OPTIMIZER, state_alloc(s, t, row), KEY(K_OPT, t, 0));
            if (col) est__sim_alloc(s, EST_CAT_OPTIMIZER, state_alloc(s, t, col), KEY(K_OPT, t, 1));
        }
        return;
    }
    int per = state_per_param(s);
    if (!s->handed_on && add_state_at_once(s, per)) return;
    for (int32_t k = 0; k < s->n_trained; k++) {
        int32_t t = s->trained[k];
        uint64_t bytes = est__par_state_bytes(s, t);
        for (int j = 0; bytes && j < per; j++) est__sim_alloc(s, EST_CAT_OPTIMIZER, bytes, KEY(K_OPT, t, j));
    }
}

/* opt.step(). The first step creates the state. The foreach optimizers
 * update in place; Adam's step also materialises sqrt(exp_avg_sq) for every
 * parameter before the addcdiv. */
void est__sim_optimizer_step(sim *s, bool first) {
    est__sim_moment(s, EST_PHASE_OPTIMIZER, -1, "");
    if (first) est__sim_create_optimizer_state(s);
    if (s->r->optimizer == EST_OPT_ADAFACTOR) {
        adafactor_step(s);
        return;
    }
    if (s->r->optimizer != EST_OPT_ADAM && s->r->optimizer != EST_OPT_ADAMW) {
        est__sim_observe(s, EST_PHASE_OPTIMIZER, "", 0);
        return;
    }
    /* _foreach_sqrt: one temporary per parameter of the group, freed after
     * the group's update */
    int64_t *h = s->cache ? malloc(((size_t)s->n_trained + 1) * sizeof *h) : NULL;
    if (replaying(s) && !h) s->cache_failed = true;
    int groups = param_groups(s);
    for (int group = 0; group < groups; group++) {
        for (int32_t k = 0; h && k < s->n_trained; k++)
            h[k] = in_param_group(s, s->trained[k], group, groups)
                       ? est__sim_block_alloc(s, est__par_state_bytes(s, s->trained[k]))
                       : 0;
        est__sim_observe(s, EST_PHASE_OPTIMIZER, "", group_state_bytes(s, group, groups));
        for (int32_t k = 0; h && k < s->n_trained; k++) est__sim_block_release(s, h[k]);
    }
    free(h);
}

/* zero_grad(set_to_none=True): the previous step's .grad tensors go (a
 * view of a DDP bucket frees nothing). */
void est__sim_zero_grad(sim *s) {
    /* only a parameter that trains gets a .grad (grad_of_input) */
    for (int32_t k = 0; k < s->n_trained; k++)
        if (s->param_has_grad[s->trained[k]]) {
            int32_t t = s->trained[k];
            if (!s->grad_views) est__sim_release(s, EST_CAT_GRADS, tensor_alloc(s, t), KEY(K_GRAD, t, 0));
            s->param_has_grad[t] = false;
        }
    est__par_zero_grad(s);
}
