/*
 * infer.c: binds symbolic dims and walks the nodes in topological order,
 * calling each op's rule from the registry to infer shapes and fold the small
 * integer tensors that compute shapes.
 */
#include <stdlib.h>
#include <string.h>

#include "report.h"

static est_status bind_symbols(const est_graph *g, const est_options *opt, int64_t *sym_val,
                               est_error *err) {
    for (int32_t s = 0; s < g->n_symbols; s++) sym_val[s] = -1;
    for (size_t i = 0; i < opt->n_dims; i++) {
        const est_binding *b = &opt->dims[i];
        if (!b->name) return est__fail(err, EST_EINVAL, "a dim binding has no name");
        if (b->value <= 0 || b->value > g->limits.max_dim_value)
            return est__fail(err, EST_EINVAL, "dim '%s' = %lld: must be between 1 and %lld", b->name,
                             (long long)b->value, (long long)g->limits.max_dim_value);
        int32_t s = 0;
        while (s < g->n_symbols && strcmp(g->symbols[s], b->name) != 0) s++;
        if (s == g->n_symbols) {
            char have[256] = "";
            for (int32_t k = 0; k < g->n_symbols && strlen(have) < 200; k++) {
                strncat(have, k ? ", " : "", sizeof have - strlen(have) - 1);
                strncat(have, g->symbols[k], sizeof have - strlen(have) - 1);
            }
            return est__fail(err, EST_EINVAL, "%s: the model has no symbolic dim named '%s' (it has: %s)",
                             g->source, b->name, g->n_symbols ? have : "none");
        }
        sym_val[s] = b->value;
    }
    if (opt->batch == 0) return EST_OK;
    if (opt->batch < 0 || opt->batch > g->limits.max_dim_value)
        return est__fail(err, EST_EINVAL, "batch %lld: must be between 1 and %lld", (long long)opt->batch,
                         (long long)g->limits.max_dim_value);
    bool bound_any = false;
    for (int32_t i = 0; i < g->n_inputs; i++) {
        const est_tensor *t = &g->tensors[g->inputs[i]];
        if (t->rank < 1 || t->dims[0].value >= 0) continue;
        bound_any = true;
        int32_t s = t->dims[0].sym;
        if (s < 0) continue; /* an unnamed leading dim takes the batch directly */
        if (sym_val[s] >= 0 && sym_val[s] != opt->batch)
            return est__fail(err, EST_EINVAL, "batch %lld conflicts with --dim %s=%lld", (long long)opt->batch,
                             g->symbols[s], (long long)sym_val[s]);
        sym_val[s] = opt->batch;
    }
    if (!bound_any)
        return est__fail(err, EST_EINVAL, "%s: batch given, but no graph input has a symbolic leading dim",
                         g->source);
    return EST_OK;
}

static est_status bind_input(est_report *r, const est_tensor *t, est_tval *v, const int64_t *sym_val,
                             const est_options *opt, est_error *err) {
    const est_graph *g = r->graph;
    v->dtype = t->dtype;
    v->rank = t->rank;
    int64_t count = 1;
    for (int d = 0; d < t->rank; d++) {
        int64_t val = t->dims[d].value;
        if (val < 0 && t->dims[d].sym >= 0) {
            val = sym_val[t->dims[d].sym];
            if (val < 0)
                return est__fail(err, EST_EUNBOUND,
                                 "%s: input '%s' dim %d is the symbolic dim '%s', which is not bound "
                                 "(use --dim %s=N%s)",
                                 g->source, t->name, d, g->symbols[t->dims[d].sym],
                                 g->symbols[t->dims[d].sym], d == 0 ? " or --batch N" : "");
        } else if (val < 0) {
            if (d == 0 && r->batch > 0) val = r->batch;
            else
                return est__fail(err, EST_EUNBOUND, "%s: input '%s' dim %d has neither a value nor a name%s",
                                 g->source, t->name, d, d == 0 ? " (use --batch N)" : "");
        }
        v->dims[d] = val;
        if (est__mul_overflow(count, val, &count) || est_dtype_bytes(t->dtype, (uint64_t)count) == UINT64_MAX)
            return est__fail(err, EST_EOVERFLOW, "%s: input '%s': its size overflows 64 bits", g->source, t->name);
    }
    v->elements = count;
    for (size_t i = 0; i < opt->n_values; i++) {
        const est_input_value *iv = &opt->values[i];
        if (!iv->name || strcmp(iv->name, t->name) != 0) continue;
        if ((int64_t)iv->count != count || (!iv->ints && !iv->floats))
            return est__fail(err, EST_EINVAL, "%s: value given for input '%s' has %zu elements, expected %lld",
                             g->source, t->name, iv->count, (long long)count);
        est_const *c = est__const_new(t->dtype, count);
        if (!c) break; /* too large or not numeric: shapes stay unfolded */
        for (int64_t k = 0; k < count; k++)
            est_const_set(c, k, iv->floats ? iv->floats[k] : 0, iv->ints ? iv->ints[k] : 0, iv->floats != NULL);
        est_const **no = realloc(r->owned, (size_t)(r->n_owned + 1) * sizeof *no);
        if (!no) {
            est__const_free(c);
            return est__fail(err, EST_ENOMEM, "out of memory");
        }
        r->owned = no;
        r->owned[r->n_owned++] = c;
        r->cap_owned = r->n_owned;
        v->value = c;
    }
    return EST_OK;
}

static void bind_initializer(const est_tensor *t, est_tval *v) {
    v->dtype = t->dtype;
    v->rank = t->rank;
    v->elements = 1;
    for (int d = 0; d < t->rank; d++) {
        v->dims[d] = t->dims[d].value;
        v->elements *= t->dims[d].value; /* checked when loaded */
    }
    /* A parameter's values change as it trains, and what is computed from it
     * (a transposed weight) is an activation with a gradient, not a constant
     * to fold, however small the weight. One element reads as the exporters'
     * scalars (an attention scale) and stays foldable. */
    v->value = t->role == EST_ROLE_PARAM && v->elements > 1 ? NULL : t->value;
}

static est_status check_arity(est_infer_ctx *ctx) {
    const est_op_def *op = ctx->node->op;
    int n_in = ctx->node->n_inputs, n_out = ctx->node->n_outputs;
    if (n_in < op->min_inputs || (op->max_inputs >= 0 && n_in > op->max_inputs))
        return est_op_fail(ctx, EST_EGRAPH, "has %d inputs; %s takes %d to %d", n_in, op->name,
                           op->min_inputs, op->max_inputs);
    if (n_out < op->min_outputs || (op->max_outputs >= 0 && n_out > op->max_outputs))
        return est_op_fail(ctx, EST_EGRAPH, "has %d outputs; %s makes %d to %d", n_out, op->name,
                           op->min_outputs, op->max_outputs);
    for (int i = 0; i < op->min_inputs && i < n_in; i++)
        if (ctx->node->inputs[i] < 0) return est_op_fail(ctx, EST_EGRAPH, "required input %d is empty", i);
    return EST_OK;
}

static est_status infer_node(est_report *r, const est_node *n, est_error *err) {
    const est_graph *g = r->graph;
    est_infer_ctx ctx = {.graph = g, .node = n, .opset = n->opset, .err = err,
                         .owned = r->owned, .n_owned = r->n_owned, .cap_owned = r->cap_owned};
    if (!n->op)
        return est__fail(err, EST_EUNSUPPORTED, "%s: node '%s': op '%s' of domain '%s' is not supported",
                         g->source, n->name, n->op_type, n->domain[0] ? n->domain : "ai.onnx");
    ctx.n_in = n->n_inputs;
    ctx.n_out = n->n_outputs;
    for (int i = 0; i < n->n_inputs; i++) ctx.in[i] = n->inputs[i] >= 0 ? &r->tv[n->inputs[i]] : NULL;
    for (int i = 0; i < n->n_outputs; i++) ctx.out[i] = n->outputs[i] >= 0 ? &r->tv[n->outputs[i]] : NULL;
    est_status st = check_arity(&ctx);
    if (st == EST_OK) st = n->op->infer(&ctx);
    r->owned = ctx.owned;
    r->n_owned = ctx.n_owned;
    r->cap_owned = ctx.cap_owned;
    if (st != EST_OK) return st;
    for (int i = 0; i < n->n_outputs; i++)
        if (ctx.out[i] && ctx.out[i]->rank < 0)
            return est_op_fail(&ctx, EST_ESHAPE, "output %d's shape could not be inferred", i);
    return EST_OK;
}

est_status est__infer(est_report *r, const est_options *opt, est_error *err) {
    const est_graph *g = r->graph;
    r->tv = calloc((size_t)g->n_tensors + 1, sizeof *r->tv);
    int64_t *sym_val = calloc((size_t)g->n_symbols + 1, sizeof *sym_val);
    est_status st = EST_OK;
    if (!r->tv || !sym_val) {
        st = est__fail(err, EST_ENOMEM, "out of memory");
        goto out;
    }
    for (int32_t t = 0; t < g->n_tensors; t++) r->tv[t].rank = -1;
    if ((st = bind_symbols(g, opt, sym_val, err)) != EST_OK) goto out;
    r->n_dims = 0;
    r->dims = calloc((size_t)g->n_symbols + 1, sizeof *r->dims);
    if (!r->dims) {
        st = est__fail(err, EST_ENOMEM, "out of memory");
        goto out;
    }
    for (int32_t s = 0; s < g->n_symbols; s++)
        if (sym_val[s] > 0) r->dims[r->n_dims++] = (est_binding){g->symbols[s], sym_val[s]};
    for (int32_t t = 0; t < g->n_tensors && st == EST_OK; t++) {
        const est_tensor *tt = &g->tensors[t];
        if (tt->kind == EST_T_INITIALIZER) bind_initializer(tt, &r->tv[t]);
        else if (tt->kind == EST_T_INPUT) st = bind_input(r, tt, &r->tv[t], sym_val, opt, err);
    }
    /* Work: a unit per node and per element folded to a constant, so that a
     * graph of many nodes each folding a large constant ends with ELIMIT. */
    uint64_t work = 0;
    for (int32_t i = 0; i < g->n_nodes && st == EST_OK; i++) {
        int64_t owned_before = r->n_owned;
        st = infer_node(r, &g->nodes[i], err);
        work++;
        for (int64_t k = owned_before; k < r->n_owned; k++) work += (uint64_t)r->owned[k]->count;
        if (st == EST_OK && work > g->limits.max_work)
            st = est__fail(err, EST_ELIMIT, "%s: node '%s' (%s): the estimate's work (nodes and folded elements) "
                           "passes the limit of %llu (est_limits.max_work)", g->source, g->nodes[i].name,
                           g->nodes[i].op_type, (unsigned long long)g->limits.max_work);
    }
out:
    free(sym_val);
    return st;
}
