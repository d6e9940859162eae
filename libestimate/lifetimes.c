/*
 * lifetimes.c: the tensor-lifetime table of a step, planned before it runs
 * (sim.h). For every node: its cost context and which inputs need a
 * gradient; which backwards the loss never reaches; which tensors share a
 * storage (views, a linear layer's in-place bias add); under --amp, each
 * tensor's dtype and each op's casts. For every storage: its last forward
 * reader, the earliest node that saves it for backward (or the segment that
 * recomputes it), and so when the step may free it. simulate.c replays the
 * step from this table. Of the tensors' dims and values, the planning reads
 * only the facts it asks (ask(), logged so that plan_reuse.c may reuse the
 * table) and what the saves rules answer.
 */
#include "sim.h"

/* ---- classification --------------------------------------------------------- */

/* What set_context gives every node alike. */
typedef struct context_common {
    const est_plan *plan;
    est_dtype float_dtype;    /* the node's own under --amp (plan_amp sets it later) */
    const est_cost_shared *shared;
} context_common;

/* The pools the contexts' slices are in (every entry written by the
 * caller, absent inputs and outputs included), the facts they share (in s,
 * which outlives them) and what set_context gives each; false when out of
 * memory. */
static bool start_contexts(sim *s, context_common *common) {
    est_slot_counts slots = est__graph_slot_counts(s->g);
    size_t all_in = slots.inputs, all_out = slots.outputs;
    s->ctx_tv = malloc((all_in + all_out + 1) * sizeof *s->ctx_tv);
    s->ctx_flags = malloc((3 * all_in + 1) * sizeof *s->ctx_flags);
    s->ctx_shared = (est_cost_shared){.device = s->r->device, .kernels = s->r->kernels, .export_dtype = s->g->dtype,
                                      .train = s->train, .autocast = s->r->amp != EST_AMP_NONE};
    *common = (context_common){.plan = est__graph_plan(s->g), .float_dtype = s->r->dtype, .shared = &s->ctx_shared};
    return s->ctx_tv && s->ctx_flags;
}

/* Node i's context c, on its slices tv (its inputs' states, then its
 * outputs') and flags (per input, needs a gradient, then is strided, then
 * is expanded). */
static inline void set_context(est_cost_ctx *c, const est_node *n, int32_t i, const est_tval **tv, bool *flags,
                               bool any_grad, const context_common *common) {
    /* one literal: every field stored once */
    *c = (est_cost_ctx){.node = n, .tv = tv, .in_flags = flags, .shared = common->shared,
                        .known = est__plan_node_attrs(common->plan, i), .n_in = n->n_inputs, .n_out = n->n_outputs,
                        .float_dtype = common->float_dtype, .any_grad = any_grad};
}

/* False when out of memory. */
bool est__sim_build_contexts(sim *s) {
    context_common common;
    if (!start_contexts(s, &common)) return false;
    const est_graph *g = s->g;
    const est_tval **tv = s->ctx_tv;
    bool *flags = s->ctx_flags;
    /* the step's arrays in locals: the compiler would reload them through s
     * after every store to a bool array */
    const est_tval *vals = s->r->tv;
    const bool *trains = s->r->trains;
    bool *needs_grad = s->needs_grad, *activation = s->activation, *param = s->param;
    bool train = s->train;
    const est_tensor *tensors = g->tensors;
    const est_node *nodes = g->nodes;
    est_cost_ctx *ctx = s->ctx;
    est_slot_mask *grad_inputs = s->grad_inputs;
    int32_t n_tensors = g->n_tensors, n_nodes = g->n_nodes;
    /* only the parameters that train start the gradient flow
     * (est_options.params): a frozen weight is a constant to autograd; and
     * what each tensor is, for the step's hot loops */
    for (int32_t t = 0; t < n_tensors; t++) {
        const est_tensor *tt = &tensors[t];
        needs_grad[t] = train && trains[t];
        activation[t] = tt->kind == EST_T_ACTIVATION && vals[t].value == NULL;
        param[t] = tt->kind == EST_T_INITIALIZER && tt->role == EST_ROLE_PARAM;
    }
    for (int32_t i = 0; i < n_nodes; i++) {
        const est_node *n = &nodes[i];
        int n_in = n->n_inputs, n_out = n->n_outputs;
        const est_tval **in = tv, **out = tv + n_in;
        bool *in_grad = flags, *in_strided = flags + n_in, *in_expanded = flags + 2 * n_in; /* set_context's layout */
        bool any_grad = false;
        est_slot_mask nondiff = n->op->nondiff_inputs, takes_grad = 0;
        const int32_t *inputs = n->inputs, *outputs = n->outputs; /* locals too */
        for (int k = 0; k < n_in; k++) {
            int32_t t = inputs[k];
            in_strided[k] = in_expanded[k] = false;
            if (t < 0) {
                in[k] = NULL;
                in_grad[k] = false;
                continue;
            }
            bool grad = slot_needs_grad(nondiff, k, needs_grad[t]); /* input_needs_grad's, from locals */
            in[k] = &vals[t];
            in_grad[k] = grad;
            any_grad |= grad;
            if (k < 32) takes_grad |= (est_slot_mask)grad << k;
        }
        grad_inputs[i] = takes_grad;
        for (int k = 0; k < n_out; k++) {
            int32_t t = outputs[k];
            out[k] = t >= 0 ? &vals[t] : NULL;
            if (t < 0) continue;
            needs_grad[t] = any_grad && est__dtype_is_float(vals[t].dtype) && vals[t].value == NULL;
        }
        set_context(&ctx[i], n, i, tv, flags, any_grad, &common);
        tv += n_in + n_out;
        flags += 3 * n_in;
    }
    return true;
}

bool est__sim_point_contexts(sim *s, const bool *any_grad) {
    context_common common;
    if (!start_contexts(s, &common)) return false;
    const est_tval **tv = s->ctx_tv, *vals = s->r->tv;
    bool *flags = s->ctx_flags;
    const est_node *nodes = s->g->nodes;
    est_cost_ctx *ctx = s->ctx;
    int32_t n_nodes = s->g->n_nodes;
    for (int32_t i = 0; i < n_nodes; i++) {
        const est_node *n = &nodes[i];
        int n_in = n->n_inputs, n_out = n->n_outputs;
        const int32_t *inputs = n->inputs, *outputs = n->outputs; /* in locals: the stores may alias them */
        for (int k = 0; k < n_in; k++) tv[k] = inputs[k] >= 0 ? &vals[inputs[k]] : NULL;
        for (int k = 0; k < n_out; k++) tv[n_in + k] = outputs[k] >= 0 ? &vals[outputs[k]] : NULL;
        set_context(&ctx[i], n, i, tv, flags, any_grad[i], &common);
        tv += n_in + n_out;
        flags += 3 * n_in;
    }
    return true;
}

/* Nodes that record a backward no gradient ever reaches: every path from
 * their outputs to the loss passes through an input that takes none (a
 * Detach, the shape input of a Reshape). peft's DoRA computes its weight norm
 * from the adapters and detaches it. PyTorch never runs such a backward, and
 * what it saved goes with the output that holds its grad_fn (plan_lifetimes).
 * False when out of memory. */
bool est__sim_mark_unreached(sim *s) {
    const est_graph *g = s->g;
    bool *reached = calloc((size_t)g->n_tensors + 1, sizeof *reached); /* per tensor: a gradient reaches it */
    if (!reached) return false;
    for (int32_t k = 0; k < g->n_outputs; k++) reached[g->outputs[k]] = s->needs_grad[g->outputs[k]];
    bool *unreached = s->unreached;
    const est_node *nodes = g->nodes; /* in locals: the bool stores may alias them */
    const est_cost_ctx *ctx = s->ctx;
    const est_slot_mask *grad_inputs = s->grad_inputs;
    for (int32_t i = g->n_nodes - 1; i >= 0; i--) {
        const est_node *n = &nodes[i];
        const est_cost_ctx *c = &ctx[i];
        if (!c->any_grad) continue; /* unreached stays false; no input takes a gradient */
        bool any = false;
        for (int k = 0; k < n->n_outputs; k++) any |= n->outputs[k] >= 0 && reached[n->outputs[k]];
        unreached[i] = !any;
        if (!any) continue;
        /* the inputs that take a gradient: below 32 from the mask */
        for (est_slot_mask m = grad_inputs[i]; m; m &= m - 1) reached[n->inputs[__builtin_ctz(m)]] = true;
        for (int k = 32; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0 && est_cost_grad_flags(c)[k]) reached[n->inputs[k]] = true;
    }
    free(reached);
    return true;
}

/* ---- the facts of the sizes the planning asks --------------------------- */

/* Whether Reshape (or Flatten) node i can view its input, a Transpose of a
 * contiguous tensor: PyTorch's view and reshape return a view exactly when
 * at::detail::computeStride finds strides for the new shape
 * (aten/src/ATen/TensorUtils.cpp), which holds when the new shape only
 * splits dims or merges dims that lie one after another in memory.
 * SegFormer's transpose(1, 2).view(B, C, H, W) is a view (per-op probe,
 * H100, 2026-11-27, bench/accuracy/data/blind4/); attention's
 * transpose(1, 2).reshape(B, N, C) merges the heads with the head size,
 * which the transpose separated, and copies. */
static bool reshape_view_possible(const sim *s, int32_t i) {
    const est_graph *g = s->g;
    const est_tval *tv = s->r->tv;
    int32_t tin = g->nodes[i].inputs[0], tr = g->tensors[tin].producer;
    const est_node *t = &g->nodes[tr];
    const est_tval *src = &tv[t->inputs[0]], *old = &tv[tin], *out = &tv[g->nodes[i].outputs[0]];
    int r = old->rank;
    if (r < 1 || src->rank != r || out->rank < 0 || old->elements == 0) return false;
    int64_t count, src_stride[EST_MAX_RANK], stride[EST_MAX_RANK];
    const int64_t *perm = est_node_attr_ints(t, "perm", &count);
    if (perm && count != r) return false;
    src_stride[r - 1] = 1;
    for (int d = r - 2; d >= 0; d--) src_stride[d] = src_stride[d + 1] * src->dims[d + 1];
    for (int d = 0; d < r; d++) {
        int64_t from = perm ? perm[d] : r - 1 - d;
        if (from < 0 || from >= r) return false;
        stride[d] = src_stride[from];
    }
    /* computeStride: each chunk of old dims that lie one after another in
     * memory must be covered by whole new dims */
    int view_d = out->rank - 1;
    int64_t chunk_base = stride[r - 1], tensor_numel = 1, view_numel = 1;
    for (int d = r - 1; d >= 0; d--) {
        tensor_numel *= old->dims[d];
        if (d == 0 || (old->dims[d - 1] != 1 && stride[d - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || out->dims[view_d] == 1)) view_numel *= out->dims[view_d--];
            if (view_numel != tensor_numel) return false;
            if (d > 0) {
                chunk_base = stride[d - 1];
                tensor_numel = view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

uint32_t est__sim_fact_answer(const sim *s, const est_size_fact *f) {
    const est_node *n = &s->g->nodes[f->node];
    const est_tval *tv = s->r->tv;
    switch ((est_fact_kind)f->kind) {
    case FACT_BIAS_FITS:
        return tv[n->inputs[f->slot]].elements == tv[n->outputs[0]].elements;
    case FACT_ONE_DIRECTION:
        return tv[n->inputs[0]].rank == 4 && tv[n->inputs[0]].dims[1] == 1;
    case FACT_RETURNS_INPUT:
        return n->op->returns_input(&s->ctx[f->node]);
    case FACT_RESHAPE_VIEW:
        return reshape_view_possible(s, f->node);
    case FACT_EXPANDS:
        return tv[n->outputs[0]].elements > tv[n->inputs[0]].elements;
    case FACT_UNREACHED_SAVES:
        break;
    }
    est_saved sv = {0};
    n->op->saves(&s->ctx[f->node], &sv);
    return sv.inputs;
}

/* The answer to a fact of node i's sizes, logged for the plan's reuse. */
static uint32_t ask(sim *s, est_fact_kind kind, int32_t i, int slot) {
    est_size_fact f = {.node = i, .kind = (uint8_t)kind, .slot = (int8_t)slot};
    f.answer = est__sim_fact_answer(s, &f);
    if (s->n_facts == s->cap_facts) {
        int32_t cap = s->cap_facts ? 2 * s->cap_facts : 64;
        est_size_fact *grown = realloc(s->facts, (size_t)cap * sizeof *grown);
        if (!grown) {
            s->facts_lost = true; /* the plan is not kept; this estimate goes on */
            return f.answer;
        }
        s->facts = grown;
        s->cap_facts = cap;
    }
    s->facts[s->n_facts++] = f;
    return f.answer;
}

/* ---- storage ------------------------------------------------------------- */

/* Tensor out is stored in tensor in's storage, laid out alike. */
static void share_storage(sim *s, int32_t out, int32_t in) {
    s->base[out] = s->base[in];
    s->contiguous[out] = s->contiguous[in];
    s->expanded[out] = s->expanded[in];
}

/* A linear layer's bias, added to its product: PyTorch's linear runs addmm,
 * or matmul then add_ in place, so the sum is the product's storage. The
 * exporters write MatMul then Add(product, bias); when nothing else reads
 * the product, the Add writes into it. */
static void bias_add_in_place(sim *s, int32_t i) {
    const est_graph *g = s->g;
    const est_node *n = &g->nodes[i];
    s->inplace_slot[i] = -1;
    /* memest verify's executor writes every sum anew */
    if (s->r->kernels != EST_KERNELS_PYTORCH || n->n_outputs != 1) return;
    for (int k = 0; k < 2; k++) {
        if (!est__adds_to_matmul(g, n, 1 - k)) continue; /* also: the node has two inputs to read */
        int32_t prod = n->inputs[k], bias = n->inputs[1 - k];
        if (bias < 0 || g->tensors[prod].readers != 1 || s->base[prod] != prod) continue;
        /* a weight, or a view of one (the TorchScript exporter shares equal
         * initializers through Identity nodes) */
        if (g->tensors[s->base[bias]].kind != EST_T_INITIALIZER || s->r->tv[bias].rank != 1) continue;
        if (!ask(s, FACT_BIAS_FITS, i, k)) continue; /* the product's elements are the sum's */
        share_storage(s, n->outputs[0], prod);
        s->inplace_slot[i] = (int8_t)k;
        return;
    }
}

/* Which storage each tensor uses: views share their input's. */
/* A recurrent layer's Y in ONNX's [seq, directions, batch, hidden], turned
 * by Transpose(perm 0, 2, 1, 3) into [seq, batch, directions, hidden]: that
 * is the layout cuDNN writes PyTorch's output in ([seq, batch, directions *
 * hidden]), so the exporter's Transpose and the Reshape after it are views of
 * one contiguous tensor, as in PyTorch, not a copy. memest verify's
 * executor writes ONNX's layout, which that Transpose keeps only when it
 * moves a single direction. */
static bool rnn_output_in_torch_layout(sim *s, int32_t i) {
    const est_node *n = &s->g->nodes[i];
    int32_t y = n->inputs[0], p = s->g->tensors[y].producer;
    if (p < 0) return false;
    const est_node *rnn = &s->g->nodes[p];
    if (!est__node_is_recurrent(rnn) || rnn->outputs[0] != y || est_node_attr_int(rnn, "layout", 0) != 0) return false;
    int64_t count;
    const int64_t *perm = est_node_attr_ints(n, "perm", &count);
    if (!perm || count != 4 || perm[0] != 0 || perm[1] != 2 || perm[2] != 1 || perm[3] != 3) return false;
    if (s->r->kernels == EST_KERNELS_PYTORCH) return true;
    return ask(s, FACT_ONE_DIRECTION, i, 0);
}

/* Tensor t is a Transpose of a contiguous tensor, under PyTorch's kernels
 * (memest verify's executor copies a strided Reshape input). */
static bool reshape_of_transpose(const sim *s, int32_t t) {
    int32_t p = s->g->tensors[t].producer;
    if (s->r->kernels != EST_KERNELS_PYTORCH || p < 0) return false;
    const est_node *n = &s->g->nodes[p];
    return est__node_is(n, "Transpose") && n->n_inputs >= 1 && n->inputs[0] >= 0 && s->contiguous[n->inputs[0]] &&
           s->base[t] == s->base[n->inputs[0]];
}

/* Node i's outputs' storage: input 0's when it is a view of it or writes
 * into it. in and out: its first input and output, out not folded. */
static void assign_output_storage(sim *s, int32_t i, int32_t in, int32_t out) {
    const est_node *n = &s->g->nodes[i];
    switch (n->op->view) {
    case EST_VIEW_ALIAS:
        /* every output: Split's pieces are views of one storage, as
         * torch.split / chunk return them */
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0 && !is_folded(s, n->outputs[k])) share_storage(s, n->outputs[k], in);
        /* an Expand that broadcasts: a view whose storage holds fewer
         * elements than it has (layers/linear.c's copy for bmm) */
        if (est__node_is(n, "Expand") && s->r->kernels == EST_KERNELS_PYTORCH && ask(s, FACT_EXPANDS, i, 0))
            s->expanded[out] = true;
        break;
    case EST_VIEW_PERMUTE:
        s->base[out] = s->base[in];
        s->contiguous[out] = rnn_output_in_torch_layout(s, i);
        s->expanded[out] = s->expanded[in];
        break;
    case EST_VIEW_RESHAPE:
        if (s->contiguous[in]) {
            share_storage(s, out, in);
        } else if (reshape_of_transpose(s, in) && ask(s, FACT_RESHAPE_VIEW, i, 0)) {
            s->base[out] = s->base[in]; /* a strided view, as the Transpose is */
            s->contiguous[out] = false;
        }
        break;
    default:
        if (n->op->returns_input && ask(s, FACT_RETURNS_INPUT, i, 0)) {
            share_storage(s, out, in);
            s->inplace_slot[i] = 0; /* its gradient passes through too */
            break;
        }
        bias_add_in_place(s, i);
        break;
    }
}

void est__sim_assign_storage(sim *s) {
    const est_graph *g = s->g;
    memset(s->inplace_slot, -1, ((size_t)g->n_nodes + 1) * sizeof *s->inplace_slot);
    int32_t *base = s->base;
    bool *contiguous = s->contiguous;
    int32_t n_tensors = g->n_tensors, n_nodes = g->n_nodes;
    for (int32_t t = 0; t < n_tensors; t++) {
        base[t] = t;
        contiguous[t] = true;
    }
    memset(s->expanded, 0, (size_t)n_tensors * sizeof *s->expanded);
    /* the nodes with an input and an output not folded, in a tight loop */
    const est_node *nodes = g->nodes;
    const est_tval *vals = s->r->tv;
    for (int32_t i = 0; i < n_nodes; i++) {
        const est_node *n = &nodes[i];
        if (n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs < 1 || n->outputs[0] < 0) continue;
        if (vals[n->outputs[0]].value != NULL) continue; /* is_folded */
        assign_output_storage(s, i, n->inputs[0], n->outputs[0]);
    }
}



/* memest verify's executor runs each kernel in one dtype: every floating
 * input whose dtype is not the op's is copied to it, non-differentiable
 * inputs and weights included (a promoting op's float32 bias or running
 * statistics to the low dtype, Softmax's low input up to float32).
 * PyTorch's kernels read most such mixes as they are. */
static void verify_casts(sim *s, int32_t i, est_amp_class cls, est_dtype out) {
    const est_node *n = &s->g->nodes[i];
    if (cls == EST_AMP_DECLARED) return;
    est_dtype want = cls == EST_AMP_LOW ? s->low : cls == EST_AMP_PROMOTE ? out : s->r->dtype;
    s->cast_mask[i] = 0;
    for (int k = 0; k < n->n_inputs && k < 32; k++) {
        int32_t t = n->inputs[k];
        if (t < 0 || is_folded(s, t) || !est__dtype_is_float(s->r->tv[t].dtype)) continue;
        if (s->dt[t] != want) s->cast_mask[i] |= EST_SLOT(k);
    }
    s->cast_to[i] = want;
}

/* --amp: the dtype of every tensor, in forward order, from each op's autocast
 * class (layers/amp.c), and which inputs each op copies to another dtype. */
void est__sim_assign_amp_dtypes(sim *s) {
    const est_graph *g = s->g;
    est_dtype hi = s->r->dtype;
    for (int32_t t = 0; t < g->n_tensors; t++) {
        s->dt[t] = est__stored_dtype(s->r, s->r->tv[t].dtype);
        s->pcast_until[t] = INT32_MAX;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_node *n = &g->nodes[i];
        est_amp_class cls = est_amp_class_of(n->op);
        est_dtype out = hi;
        bool any_act = false, all_low = true;
        for (int k = 0; k < n->n_inputs; k++) {
            int32_t t = n->inputs[k];
            if (t < 0 || !est__dtype_is_float(s->r->tv[t].dtype)) continue;
            bool folded = is_folded(s, t);
            bool diff = k >= 32 || !((n->op->nondiff_inputs | n->op->nonparam_inputs) & EST_SLOT(k));
            if (!folded && cls == EST_AMP_LOW && diff && s->dt[t] != s->low && k < 32) s->cast_mask[i] |= EST_SLOT(k);
            if (!folded && cls == EST_AMP_FP32 && diff && s->dt[t] != hi && k < 32) s->cast_mask[i] |= EST_SLOT(k);
            bool act = !folded && g->tensors[s->base[t]].kind != EST_T_INITIALIZER;
            if (!est_amp_operand_promotes(g, n, k, act, s->r->tv[t].rank)) continue;
            any_act = true;
            if (s->dt[t] != s->low) all_low = false;
        }
        if (cls == EST_AMP_LOW) out = s->low;
        else if (cls == EST_AMP_PROMOTE && any_act && all_low) out = s->low;
        s->cast_to[i] = cls == EST_AMP_LOW ? s->low : hi;
        if (s->r->kernels == EST_KERNELS_VERIFY) verify_casts(s, i, cls, out);
        for (int k = 0; k < n->n_outputs; k++) {
            int32_t t = n->outputs[k];
            if (t >= 0 && est__dtype_is_float(s->r->tv[t].dtype) && !is_folded(s, t)) s->dt[t] = out;
        }
        s->ctx[i].float_dtype = cls == EST_AMP_LOW ? s->low : out;
    }
}





/* Counting sort of items by the node key[item] names (items whose key is not
 * a node are left out): node i's items are order[first[i] .. first[i + 1]). */
static void bucket_by_node(const int32_t *key, int32_t n_items, int32_t n_nodes, int32_t *first, int32_t *order) {
    memset(first, 0, ((size_t)n_nodes + 1) * sizeof *first);
    /* a key is a node when 0 <= key < n_nodes: one unsigned compare */
    for (int32_t t = 0; t < n_items; t++)
        if ((uint32_t)key[t] < (uint32_t)n_nodes) first[key[t] + 1]++;
    for (int32_t i = 0; i < n_nodes; i++) first[i + 1] += first[i];
    for (int32_t t = 0; t < n_items; t++)
        if ((uint32_t)key[t] < (uint32_t)n_nodes) order[first[key[t]]++] = t;
    for (int32_t i = n_nodes; i > 0; i--) first[i] = first[i - 1];
    first[0] = 0;
}


/* Where a save of storage b by node i keeps it: inside a checkpointed
 * segment, only the recomputed copy is kept (from the recompute to i's
 * backward); elsewhere the tensor itself, until i's backward. */
static inline void note_saved(sim *s, int32_t i, int32_t b) {
    int32_t seg = segment_of(s, i);
    if (seg >= 0) {
        int32_t producer = s->g->tensors[b].producer;
        if (producer >= s->segs[seg].first && i < s->recompute_until[b]) s->recompute_until[b] = i;
        return; /* a segment input is kept by the checkpoint itself */
    }
    if (i < s->saved_until[b]) s->saved_until[b] = i;
}

/* The checkpoint keeps each segment's activation inputs until the backward
 * of its first node. */
static void keep_segment_inputs(sim *s) {
    for (int32_t seg = 0; seg < s->n_segs; seg++) {
        const est_segment *S = &s->segs[seg];
        for (int32_t i = S->first; i <= S->last; i++) {
            const est_node *n = &s->g->nodes[i];
            for (int k = 0; k < n->n_inputs; k++) {
                if (n->inputs[k] < 0) continue;
                int32_t b = s->base[n->inputs[k]];
                if (is_activation_storage(s, b) && s->g->tensors[b].producer < S->first && S->first < s->saved_until[b])
                    s->saved_until[b] = S->first;
            }
        }
    }
}

/* What an unreached node saved lives as long as its outputs do (their
 * grad_fn holds it). In reverse, so that a later node's extension of a
 * storage is known when an earlier one reads it. */
static void keep_unreached_saves(sim *s) {
    const est_graph *g = s->g;
    const bool *unreached = s->unreached;
    for (int32_t i = g->n_nodes - 1; i >= 0; i--) {
        if (!unreached[i]) continue;
        const est_node *n = &g->nodes[i];
        if (!n->op->saves) continue;
        est_slot_mask saved = ask(s, FACT_UNREACHED_SAVES, i, 0);
        int32_t until = i;
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0 && s->last_use[s->base[n->outputs[k]]] > until)
                until = s->last_use[s->base[n->outputs[k]]];
        for (int k = 0; k < n->n_inputs && k < 32; k++)
            if ((saved & EST_SLOT(k)) && n->inputs[k] >= 0 && s->last_use[s->base[n->inputs[k]]] < until)
                s->last_use[s->base[n->inputs[k]]] = until;
    }
}

/* Room in extra_alloc for n extras, a node's (EST_MAX_EXTRA) more than it
 * holds at most; false: out of memory. */
static bool room_for_extras(sim *s, int32_t n) {
    if (n <= s->cap_extras) return true;
    int32_t cap = s->cap_extras ? 2 * s->cap_extras : 256;
    uint64_t *e = realloc(s->extra_alloc, (size_t)cap * sizeof *e);
    if (!e) return false;
    s->extra_alloc = e;
    s->cap_extras = cap;
    return true;
}

/* Keeps what node i's backward saves (sv); false: out of memory. */
static bool keep_saves(sim *s, int32_t i, const est_saved *sv) {
    int32_t first = s->n_extras, n_extra = sv->n_extra;
    if (!room_for_extras(s, first + n_extra)) return false;
    uint64_t *extra = s->extra_alloc + first;
    for (int e = 0; e < n_extra; e++) extra[e] = sv->extra_bytes[e];
    s->n_extras = first + n_extra;
    s->saved_inputs[i] = sv->inputs;
    s->saved_outputs[i] = sv->outputs;
    s->extra_first[i] = first;
    s->extra_first[i + 1] = first + n_extra;
    return true;
}

/* Whether node i's rule is asked what its backward saves: a backward that
 * runs in a training step (its context c). */
static inline bool saves_asked(bool train, const est_cost_ctx *c, const est_node *n, bool unreached) {
    return train && c->any_grad && n->op->saves && !unreached;
}

bool est__sim_ask_saves(sim *s) {
    /* in locals: the stores to the saves' arrays would make the compiler
     * reload every field read through s at every node */
    const est_node *nodes = s->g->nodes;
    const est_cost_ctx *ctx = s->ctx;
    const bool *unreached = s->unreached;
    est_slot_mask *saved_inputs = s->saved_inputs, *saved_outputs = s->saved_outputs;
    int32_t *extra_first = s->extra_first;
    int32_t n_nodes = s->g->n_nodes, n_extras = s->n_extras;
    bool train = s->train;
    for (int32_t i = 0; i < n_nodes; i++) {
        extra_first[i] = n_extras;
        if (!saves_asked(train, &ctx[i], &nodes[i], unreached[i])) {
            saved_inputs[i] = saved_outputs[i] = 0; /* keep_saves of nothing */
            continue;
        }
        est_saved sv = {0};
        nodes[i].op->saves(&ctx[i], &sv);
        if (!room_for_extras(s, n_extras + sv.n_extra)) return false;
        for (int e = 0; e < sv.n_extra; e++) s->extra_alloc[n_extras + e] = sv.extra_bytes[e];
        n_extras += sv.n_extra;
        saved_inputs[i] = sv.inputs;
        saved_outputs[i] = sv.outputs;
    }
    extra_first[n_nodes] = n_extras;
    s->n_extras = n_extras;
    return true;
}

/* What extend_last_uses reads, loaded once for all nodes: its stores to
 * last_use and the strided flags would make the compiler reload every field read
 * through s at every node. */
typedef struct lifetime_arrays {
    const est_tensor *tensors;
    const est_node *nodes;
    const est_cost_ctx *ctx;
    const int32_t *base;
    const bool *contiguous;
    const bool *expanded;
    int32_t *last_use;
    bool pytorch;
} lifetime_arrays;

/* Storage lifetimes up to node i: each storage lives until its last reader
 * or anything that holds it. And which of its inputs are non-contiguous
 * views (its context's strided flags, false from est__sim_build_contexts on),
 * before its rules are asked what it saves. */
static inline void extend_last_uses(const lifetime_arrays *a, int32_t i) {
    const est_node *n = &a->nodes[i];
    int32_t *last_use = a->last_use;
    const int32_t *base = a->base;
    const bool *contiguous = a->contiguous;
    bool *strided = est_cost_strided_flags(&a->ctx[i]), *expanded = est_cost_expanded_flags(&a->ctx[i]);
    bool pytorch = a->pytorch;
    /* the node's arrays too: a store to strided may alias them */
    const int32_t *inputs = n->inputs, *held_until = n->input_held_until;
    int n_in = n->n_inputs;
    for (int k = 0; k < n_in; k++) {
        int32_t t = inputs[k];
        if (t < 0) continue;
        if (k < EST_MAX_IO) {
            strided[k] = !contiguous[t];
            expanded[k] = a->expanded[t];
        }
        int32_t b = base[t];
        /* read here, and referenced until the module call that reads it returns */
        int32_t held = held_until ? held_until[k] : -1;
        if (last_use[b] < i) last_use[b] = i;
        if (last_use[b] < held) last_use[b] = held;
    }
    /* a view's storage must outlive the view's own readers; a forward's
     * frame may keep a submodule's output (module_calls.c), which memest
     * verify's executor does not */
    for (int k = 0; k < n->n_outputs; k++) {
        if (n->outputs[k] < 0) continue;
        int32_t b = base[n->outputs[k]], frame = a->tensors[n->outputs[k]].frame_held_until;
        if (last_use[b] < i) last_use[b] = i;
        if (pytorch && last_use[b] < frame) last_use[b] = frame;
    }
    /* held by the block around it (attention probabilities; Python's
     * reference, which memest verify's executor does not keep) */
    if (pytorch && n->output_held_until > i && n->n_outputs > 0 && n->outputs[0] >= 0 &&
        last_use[base[n->outputs[0]]] < n->output_held_until)
        last_use[base[n->outputs[0]]] = n->output_held_until;
}

/* What node i's backward saves (its rule asked), kept and noted on the
 * storages; false: out of memory. */
static bool plan_saves(sim *s, int32_t i) {
    const est_node *n = &s->g->nodes[i];
    est_saved sv = {0};
    n->op->saves(&s->ctx[i], &sv);
    if (!keep_saves(s, i, &sv)) return false;
    for (est_slot_mask m = sv.inputs & slots_below(n->n_inputs); m; m &= m - 1) {
        int k = __builtin_ctz(m);
        if (n->inputs[k] < 0) continue;
        int32_t b = s->base[n->inputs[k]];
        if (is_cast(s, i, k)) { /* the backward keeps the copy, not the original */
            s->cast_saved[i] |= EST_SLOT(k);
            /* a checkpointed op's copy is kept from the recompute on */
            if (cached_cast(s, i, k) && segment_of(s, i) < 0 && i < s->pcast_until[b]) s->pcast_until[b] = i;
            continue;
        }
        note_saved(s, i, b);
    }
    for (est_slot_mask m = sv.outputs & slots_below(n->n_outputs); m; m &= m - 1) {
        int k = __builtin_ctz(m);
        if (n->outputs[k] >= 0) note_saved(s, i, s->base[n->outputs[k]]);
    }
    int32_t seg = segment_of(s, i);
    if (seg >= 0 && (sv.inputs || sv.outputs || sv.n_extra)) s->seg_last_saver[seg] = i;
    return true;
}

/* Of the last uses, keeps only those of storages the forward may free: an
 * activation's, not an output of the graph, saved by no backward (all
 * fixed by now); the others' last_use becomes -1, which leaves them out
 * of the release lists. */
static void keep_forward_releases(sim *s) {
    int32_t *last_use = s->last_use;
    const bool *activation = s->activation, *kept = s->kept;
    const int32_t *saved_until = s->saved_until;
    int32_t n_tensors = s->g->n_tensors;
    for (int32_t t = 0; t < n_tensors; t++)
        if (!activation[t] || kept[t] || saved_until[t] != INT32_MAX) last_use[t] = -1;
}

bool est__sim_plan_lifetimes(sim *s) {
    const est_graph *g = s->g;
    int32_t *last_use = s->last_use, *saved_until = s->saved_until;
    int32_t n_tensors = g->n_tensors, n_nodes = g->n_nodes;
    for (int32_t t = 0; t < n_tensors; t++) {
        last_use[t] = -1;
        saved_until[t] = INT32_MAX;
    }
    for (int32_t t = 0; s->segs && t < g->n_tensors; t++) {
        s->recompute_until[t] = INT32_MAX;
        s->rc_last[t] = -1;
    }
    /* the nodes whose backward saves nothing, in a tight loop over locals */
    const est_node *nodes = g->nodes;
    const est_cost_ctx *ctx = s->ctx;
    const bool *unreached = s->unreached;
    est_slot_mask *saved_inputs = s->saved_inputs, *saved_outputs = s->saved_outputs;
    int32_t *extra_first = s->extra_first;
    bool train = s->train;
    const lifetime_arrays arrays = {.tensors = g->tensors, .nodes = nodes, .ctx = ctx, .base = s->base,
                                    .contiguous = s->contiguous, .expanded = s->expanded, .last_use = last_use,
                                    .pytorch = s->r->kernels == EST_KERNELS_PYTORCH};
    for (int32_t i = 0; i < n_nodes; i++) {
        extend_last_uses(&arrays, i);
        if (saves_asked(train, &ctx[i], &nodes[i], unreached[i])) {
            if (!plan_saves(s, i)) return false;
            continue;
        }
        saved_inputs[i] = saved_outputs[i] = 0; /* keep_saves of nothing */
        extra_first[i] = extra_first[i + 1] = s->n_extras;
    }
    keep_unreached_saves(s);
    for (int32_t k = 0; k < g->n_outputs; k++) s->kept[s->base[g->outputs[k]]] = true;
    keep_segment_inputs(s);
    keep_forward_releases(s);
    bucket_by_node(s->last_use, g->n_tensors, g->n_nodes, s->release_first, s->release_order);
    bucket_by_node(s->saved_until, g->n_tensors, g->n_nodes, s->bwd_first, s->bwd_order);
    if (s->segs) bucket_by_node(s->recompute_until, g->n_tensors, g->n_nodes, s->rc_first, s->rc_order);
    return true;
}

/* Per node: what the step reads of its context (any_grad), and the inputs
 * whose gradient may be its output's, as many elements as it (read by its
 * backward only, where it has one). In locals: the stores would make the
 * compiler reload every field read through s. */
static void keep_gradient_figures(sim *s) {
    const est_graph *g = s->g;
    const est_tval *vals = s->r->tv;
    const est_cost_ctx *ctx = s->ctx;
    const int8_t *inplace_slot = s->inplace_slot;
    bool *any_grad = s->any_grad;
    est_slot_mask *same_size = s->same_size;
    const est_node *nodes = g->nodes;
    int32_t n_nodes = g->n_nodes;
    for (int32_t i = 0; i < n_nodes; i++) {
        const est_node *n = &nodes[i];
        any_grad[i] = ctx[i].any_grad;
        same_size[i] = 0; /* every entry written: the array is not zeroed */
        if (!any_grad[i]) continue;
        int32_t out = n->n_outputs ? n->outputs[0] : -1;
        if (out < 0) continue;
        est_slot_mask shares = n->op->grad_passes_to;
        if (n->op->view != EST_VIEW_NONE) shares |= EST_SLOT(0);
        if (inplace_slot[i] >= 0 && inplace_slot[i] < 32) shares |= EST_SLOT(inplace_slot[i]);
        est_slot_mask same = 0;
        for (int k = 0; k < n->n_inputs && k < 32 && shares >> k; k++) {
            int32_t t = n->inputs[k];
            if ((shares & EST_SLOT(k)) && t >= 0 && vals[out].elements == vals[t].elements) same |= EST_SLOT(k);
        }
        same_size[i] = same;
    }
}

/* Which of node n's outputs the forward allocates when n runs: those of
 * their own storage, not folded, that the step needs (fwd_allocates; the
 * rest of it is zeroed). A node's output is an activation, so `activation`
 * says whether it was folded. */
static void mark_forward_allocations(const sim *s, const est_node *n, bool *allocates) {
    /* in locals: the stores to allocates may alias them */
    const bool *activation = s->activation;
    const int32_t *base = s->base;
    for (int k = 0; k < n->n_outputs; k++) {
        int32_t t = n->outputs[k];
        if (t >= 0 && activation[t] && base[t] == t) allocates[t] = own_output_needed(s, t);
    }
}

/* The forward may do something at node i when it runs it, frees a storage
 * after it or --fsdp gathers around it; the backward when it runs it, frees
 * what it saved (extras, autocast copies, storages, recomputed tensors) or
 * --fsdp gathers around it. One pass over locals. */
void est__sim_list_visits(const sim *s, const bool *any_grad, bool all, est_step_visits *v) {
    const bool *trains = s->r->trains; /* in locals: the stores to trained may alias them */
    const int32_t *params = s->g->params;
    int32_t *trained = v->trained, n_trained = 0;
    for (int32_t k = 0; k < s->g->n_params; k++)
        if (trains[params[k]]) trained[n_trained++] = params[k];
    v->n_trained = n_trained;
    int32_t n_nodes = s->g->n_nodes, n_fwd = 0, n_bwd = 0;
    int32_t *fwd = v->fwd_nodes, *bwd = v->bwd_nodes;
    bool *runs = v->fwd_runs, *allocates = v->fwd_allocates;
    const est_node *nodes = s->g->nodes;
    const int32_t *release = s->release_first;
    const est_layer *layers = s->r->layers;
    const int32_t *extra = s->extra_first, *saved = s->bwd_first;
    const int32_t *rc = s->segs ? s->rc_first : NULL;
    const est_slot_mask *cast_saved = s->cast_saved;
    for (int32_t i = 0; i < n_nodes; i++) {
        if (all || !layers[i].shape_only || release[i] < release[i + 1]) {
            runs[n_fwd] = !layers[i].shape_only;
            fwd[n_fwd++] = i;
        }
        mark_forward_allocations(s, &nodes[i], allocates);
        if (all || any_grad[i] || extra[i] < extra[i + 1] || (cast_saved && cast_saved[i]) || saved[i] < saved[i + 1] ||
            (rc && rc[i] < rc[i + 1]))
            bwd[n_bwd++] = i;
    }
    v->n_fwd = n_fwd;
    v->n_bwd = n_bwd;
}

bool est__sim_compact_for_step(sim *s) {
    const est_graph *g = s->g;
    size_t nn = (size_t)g->n_nodes + 1;
    s->any_grad = malloc(nn * sizeof *s->any_grad);
    s->trained = malloc(((size_t)g->n_params + 1) * sizeof *s->trained);
    s->fwd_nodes = malloc(nn * sizeof *s->fwd_nodes);
    s->bwd_nodes = malloc(nn * sizeof *s->bwd_nodes);
    s->fwd_runs = malloc(nn * sizeof *s->fwd_runs);
    s->fwd_allocates = calloc((size_t)g->n_tensors + 1, sizeof *s->fwd_allocates);
    if (!s->any_grad || !s->trained || !s->fwd_nodes || !s->bwd_nodes || !s->fwd_runs || !s->fwd_allocates)
        return false;
    keep_gradient_figures(s);
    for (int32_t e = 0; e < s->n_extras; e++) s->extra_alloc[e] = round_alloc(s->extra_alloc[e]);
    est_step_visits v = {.trained = s->trained, .fwd_nodes = s->fwd_nodes, .bwd_nodes = s->bwd_nodes,
                         .fwd_runs = s->fwd_runs, .fwd_allocates = s->fwd_allocates};
    if (!est__sim_visits_as_kept(s, &v)) est__sim_list_visits(s, s->any_grad, s->sharded, &v);
    est__sim_let_go_of_plan(s);
    s->n_trained = v.n_trained;
    s->n_fwd_nodes = v.n_fwd;
    s->n_bwd_nodes = v.n_bwd;
    free(s->ctx);
    free(s->ctx_tv);
    free(s->ctx_flags);
    free(s->last_use);   /* the release lists hold what the step needs of it */
    free(s->contiguous);
    free(s->expanded);
    s->ctx = NULL;
    s->ctx_tv = NULL;
    s->ctx_flags = NULL;
    s->last_use = NULL;
    s->contiguous = NULL;
    s->expanded = NULL;
    return true;
}
