/*
 * infer.c: binds symbolic dims and walks the nodes in topological order,
 * calling each op's rule from the registry to infer shapes and fold the small
 * integer tensors that compute shapes.
 */
#include <stdlib.h>
#include <string.h>

#include "report.h"

/* What one estimate binds: each graph input's declared shape (the file's, or
 * the one est_options.input_shapes gives) and the symbolic dims, the graph's
 * followed by those only input_shapes name. */
typedef struct binding {
    int32_t n_symbols;
    const char **symbols;       /* graph->symbols, then report->new_symbols */
    int64_t *sym_val;           /* per symbol; -1 while unbound */
    int32_t *rank;              /* per graph input, in g->inputs order */
    const est_dimdecl **dims;   /* per graph input */
    est_dimdecl *given;         /* storage of input_shapes' dims */
} binding;

static void binding_free(binding *b) {
    free(b->symbols);
    free(b->sym_val);
    free(b->rank);
    free(b->dims);
    free(b->given);
}

/* Adds a name to a comma-separated list for a message. Past 200 characters
 * the list ends with "..." and returns false: it takes no more. */
static bool list_add(char *list, size_t size, const char *name) {
    size_t len = strlen(list);
    if (len >= 200) {
        strncat(list, ", ...", size - len - 1);
        return false;
    }
    if (len) strncat(list, ", ", size - len - 1);
    strncat(list, name, size - strlen(list) - 1);
    return true;
}

/* A declared shape for a message, as --input-shape takes it: "1x3x224x224",
 * "batchx3x224x224"; "?" for a dim with neither value nor name, "" for a
 * scalar. Dim 0 is written `first` when that is not NULL. */
static void format_shape(const char *const *symbols, int32_t rank, const est_dimdecl *dims, const char *first,
                         char *buf, size_t size) {
    buf[0] = '\0';
    for (int32_t d = 0; d < rank; d++) {
        size_t len = strlen(buf);
        const char *sep = d ? "x" : "";
        if (d == 0 && first) snprintf(buf + len, size - len, "%s", first);
        else if (dims[d].value >= 0) snprintf(buf + len, size - len, "%s%lld", sep, (long long)dims[d].value);
        else snprintf(buf + len, size - len, "%s%s", sep, dims[d].sym >= 0 ? symbols[dims[d].sym] : "?");
    }
}

/* The position in g->inputs of the input named `name`, or -1. */
static int32_t input_position(const est_graph *g, const char *name) {
    int32_t t = est__graph_find(g, name);
    for (int32_t k = 0; t >= 0 && k < g->n_inputs; k++)
        if (g->inputs[k] == t) return k;
    return -1;
}

static est_status unknown_input(const est_graph *g, const char *name, est_error *err) {
    char have[256] = "";
    for (int32_t k = 0; k < g->n_inputs && list_add(have, sizeof have, g->tensors[g->inputs[k]].name); k++) {}
    return est__fail(err, EST_EINVAL, "%s: a shape is given for input '%s', but the graph has no input of that "
                     "name (its inputs: %s)", g->source, name, g->n_inputs ? have : "none");
}

static est_status check_given_dim(const est_graph *g, const est_input_shape *s, int d, est_error *err) {
    const est_dim *dim = &s->dims[d];
    if (dim->value > 0 && !dim->symbol) {
        if (dim->value > g->limits.max_dim_value)
            return est__fail(err, EST_EINVAL, "%s: input '%s' dim %d = %lld: must be between 1 and %lld", g->source,
                             s->name, d, (long long)dim->value, (long long)g->limits.max_dim_value);
        return EST_OK;
    }
    if (dim->value == 0 && dim->symbol && dim->symbol[0]) return EST_OK;
    return est__fail(err, EST_EINVAL, "%s: input '%s' dim %d: give either a size above 0 or a symbol name",
                     g->source, s->name, d);
}

/* Checks est_options.input_shapes against the graph; *n_dims gets the number
 * of dims they hold. */
static est_status check_input_shapes(const est_graph *g, const est_options *opt, size_t *n_dims, est_error *err) {
    *n_dims = 0;
    if (opt->n_input_shapes && !opt->input_shapes)
        return est__fail(err, EST_EINVAL, "est_options: n_input_shapes is %zu but input_shapes is NULL",
                         opt->n_input_shapes);
    for (size_t i = 0; i < opt->n_input_shapes; i++) {
        const est_input_shape *s = &opt->input_shapes[i];
        if (!s->name) return est__fail(err, EST_EINVAL, "%s: an input shape names no input", g->source);
        int32_t k = input_position(g, s->name);
        if (k < 0) return unknown_input(g, s->name, err);
        for (size_t j = 0; j < i; j++)
            if (opt->input_shapes[j].name && strcmp(opt->input_shapes[j].name, s->name) == 0)
                return est__fail(err, EST_EINVAL, "%s: input '%s' is given two shapes", g->source, s->name);
        const est_tensor *t = &g->tensors[g->inputs[k]];
        if (t->rank >= 0 && s->rank != t->rank) {
            char declared[256];
            format_shape((const char *const *)g->symbols, t->rank, t->dims, NULL, declared, sizeof declared);
            return est__fail(err, EST_EINVAL, "%s: input '%s' has rank %d (%s); the shape given has rank %d",
                             g->source, s->name, t->rank, t->rank ? declared : "a scalar", s->rank);
        }
        if (s->rank < 0 || (uint32_t)s->rank > g->limits.max_rank)
            return est__fail(err, EST_EINVAL, "%s: input '%s': the shape given has rank %d, not 0 to %u", g->source,
                             s->name, s->rank, g->limits.max_rank);
        if (s->rank > 0 && !s->dims)
            return est__fail(err, EST_EINVAL, "%s: input '%s': the shape given has no dims", g->source, s->name);
        for (int d = 0; d < s->rank; d++) {
            est_status st = check_given_dim(g, s, d, err);
            if (st != EST_OK) return st;
        }
        *n_dims += (size_t)s->rank;
    }
    return EST_OK;
}

/* The index of the symbolic dim `name`, added when new (the report keeps the
 * name, since its dims list it); -1 when out of memory. */
static int32_t intern_symbol(binding *b, est_report *r, const char *name) {
    for (int32_t s = 0; s < b->n_symbols; s++)
        if (strcmp(b->symbols[s], name) == 0) return s;
    char *copy = est__strdup(name);
    if (!copy) return -1;
    r->new_symbols[r->n_new_symbols++] = copy;
    b->symbols[b->n_symbols] = copy;
    return b->n_symbols++;
}

static est_status binding_init(binding *b, est_report *r, const est_options *opt, est_error *err) {
    const est_graph *g = r->graph;
    size_t n_given;
    est_status st = check_input_shapes(g, opt, &n_given, err);
    if (st != EST_OK) return st;
    size_t n_symbols = (size_t)g->n_symbols + n_given;
    b->symbols = calloc(n_symbols + 1, sizeof *b->symbols);
    b->sym_val = calloc(n_symbols + 1, sizeof *b->sym_val);
    b->rank = calloc((size_t)g->n_inputs + 1, sizeof *b->rank);
    b->dims = calloc((size_t)g->n_inputs + 1, sizeof *b->dims);
    b->given = calloc(n_given + 1, sizeof *b->given);
    r->new_symbols = calloc(n_given + 1, sizeof *r->new_symbols);
    if (!b->symbols || !b->sym_val || !b->rank || !b->dims || !b->given || !r->new_symbols)
        return est__fail(err, EST_ENOMEM, "out of memory");
    for (int32_t s = 0; s < g->n_symbols; s++) b->symbols[s] = g->symbols[s];
    b->n_symbols = g->n_symbols;
    for (int32_t k = 0; k < g->n_inputs; k++) {
        b->rank[k] = g->tensors[g->inputs[k]].rank;
        b->dims[k] = g->tensors[g->inputs[k]].dims;
    }
    est_dimdecl *next = b->given;
    for (size_t i = 0; i < opt->n_input_shapes; i++) {
        const est_input_shape *s = &opt->input_shapes[i];
        int32_t k = input_position(g, s->name);
        b->rank[k] = s->rank;
        b->dims[k] = next;
        for (int d = 0; d < s->rank; d++) {
            next[d] = (est_dimdecl){s->dims[d].value > 0 ? s->dims[d].value : -1, -1};
            if (s->dims[d].value == 0 && (next[d].sym = intern_symbol(b, r, s->dims[d].symbol)) < 0)
                return est__fail(err, EST_ENOMEM, "out of memory");
        }
        next += s->rank;
    }
    return EST_OK;
}

/* --batch on inputs of fixed leading dims: says how to make the first one
 * symbolic. */
static est_status no_batch_dim(const est_graph *g, const binding *b, est_error *err) {
    for (int32_t k = 0; k < g->n_inputs; k++) {
        if (b->rank[k] < 1) continue;
        char shape[256];
        format_shape(b->symbols, b->rank[k], b->dims[k], "batch", shape, sizeof shape);
        return est__fail(err, EST_EINVAL, "%s: batch given, but no graph input has a symbolic leading dim "
                         "(--input-shape %s=%s would give one)", g->source, g->tensors[g->inputs[k]].name, shape);
    }
    return est__fail(err, EST_EINVAL, "%s: batch given, but no graph input has a symbolic leading dim", g->source);
}

static est_status bind_symbols(const est_graph *g, binding *b, const est_options *opt, est_error *err) {
    int64_t *sym_val = b->sym_val;
    for (int32_t s = 0; s < b->n_symbols; s++) sym_val[s] = -1;
    for (size_t i = 0; i < opt->n_dims; i++) {
        const est_binding *bd = &opt->dims[i];
        if (!bd->name) return est__fail(err, EST_EINVAL, "a dim binding has no name");
        if (bd->value <= 0 || bd->value > g->limits.max_dim_value)
            return est__fail(err, EST_EINVAL, "%s: dim '%s' = %lld: must be between 1 and %lld", g->source, bd->name,
                             (long long)bd->value, (long long)g->limits.max_dim_value);
        int32_t s = 0;
        while (s < b->n_symbols && strcmp(b->symbols[s], bd->name) != 0) s++;
        if (s == b->n_symbols) {
            char have[256] = "";
            for (int32_t k = 0; k < b->n_symbols && list_add(have, sizeof have, b->symbols[k]); k++) {}
            return est__fail(err, EST_EINVAL, "%s: the model has no symbolic dim named '%s' (it has: %s)",
                             g->source, bd->name, b->n_symbols ? have : "none");
        }
        sym_val[s] = bd->value;
    }
    if (opt->batch == 0) return EST_OK;
    if (opt->batch < 0 || opt->batch > g->limits.max_dim_value)
        return est__fail(err, EST_EINVAL, "%s: batch %lld: must be between 1 and %lld", g->source,
                         (long long)opt->batch, (long long)g->limits.max_dim_value);
    bool bound_any = false;
    for (int32_t i = 0; i < g->n_inputs; i++) {
        if (b->rank[i] < 1 || b->dims[i][0].value >= 0) continue;
        bound_any = true;
        int32_t s = b->dims[i][0].sym;
        if (s < 0) continue; /* an unnamed leading dim takes the batch directly */
        if (sym_val[s] >= 0 && sym_val[s] != opt->batch)
            return est__fail(err, EST_EINVAL, "batch %lld conflicts with --dim %s=%lld", (long long)opt->batch,
                             b->symbols[s], (long long)sym_val[s]);
        sym_val[s] = opt->batch;
    }
    if (!bound_any) return no_batch_dim(g, b, err);
    return EST_OK;
}

static est_status bind_input(est_report *r, const est_tensor *t, int32_t rank, const est_dimdecl *dims,
                             const binding *b, est_tval *v, const est_options *opt, est_error *err) {
    const est_graph *g = r->graph;
    v->dtype = t->dtype;
    v->rank = rank;
    int64_t count = 1;
    for (int d = 0; d < rank; d++) {
        int64_t val = dims[d].value;
        if (val < 0 && dims[d].sym >= 0) {
            const char *sym = b->symbols[dims[d].sym];
            val = b->sym_val[dims[d].sym];
            if (val < 0)
                return est__fail(err, EST_EUNBOUND,
                                 "%s: input '%s' dim %d is the symbolic dim '%s', which is not bound "
                                 "(use --dim %s=N%s)",
                                 g->source, t->name, d, sym, sym, d == 0 ? " or --batch N" : "");
        } else if (val < 0) {
            if (d == 0 && r->batch > 0) val = r->batch;
            else
                return est__fail(err, EST_EUNBOUND, "%s: input '%s' dim %d has neither a value nor a name%s",
                                 g->source, t->name, d, d == 0 ? " (use --batch N)" : "");
        }
        v->dims[d] = val;
        if (est__mul_overflow(count, val, &count) || est__dtype_bytes(t->dtype, (uint64_t)count) == UINT64_MAX)
            return est__fail(err, EST_EOVERFLOW, "%s: input '%s': its size overflows 64 bits", g->source, t->name);
    }
    v->elements = count;
    for (size_t i = 0; i < opt->n_values; i++) {
        const est_input_value *iv = &opt->values[i];
        if (!iv->name || strcmp(iv->name, t->name) != 0) continue;
        if ((int64_t)iv->count != count || (!iv->ints && !iv->floats))
            return est__fail(err, EST_EINVAL, "%s: value given for input '%s' has %zu elements, expected %lld",
                             g->source, t->name, iv->count, (long long)count);
        if (!est__const_foldable(t->dtype, count)) break; /* too large or not numeric: shapes stay unfolded */
        est_const *c = est__const_new(t->dtype, count);
        if (!c) return est__fail(err, EST_ENOMEM, "out of memory");
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

static inline void bind_initializer(const est_tensor *t, est_tval *v) {
    int64_t elements = 1; /* est__initializer_elements, in the same pass */
    for (int d = 0; d < t->rank; d++) elements *= v->dims[d] = t->dims[d].value;
    v->dtype = t->dtype;
    v->rank = t->rank;
    v->elements = elements;
    /* A parameter's values change as it trains, and what is computed from it
     * (a transposed weight) is an activation with a gradient, not a constant
     * to fold, however small the weight. One element reads as the exporters'
     * scalars (an attention scale) and stays foldable. */
    v->value = t->role == EST_ROLE_PARAM && v->elements > 1 ? NULL : t->value;
}

bool est__arity_fits(const est_node *n) {
    const est_op_def *op = n->op;
    if (n->n_inputs < op->min_inputs || (op->max_inputs >= 0 && n->n_inputs > op->max_inputs) ||
        n->n_outputs < op->min_outputs || (op->max_outputs >= 0 && n->n_outputs > op->max_outputs))
        return false;
    for (int i = 0; i < op->min_inputs; i++)
        if (n->inputs[i] < 0) return false;
    return true;
}

/* est__arity_fits, failing with what does not fit. */
static est_status check_arity(est_infer_ctx *ctx) {
    if (est__arity_fits(ctx->node)) return EST_OK;
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

/* Infers node n, tensor t's state at tv[at[t]] (at NULL: tv[t]); known:
 * its known attributes (est__plan_node_attrs); fits: its arity is known to
 * fit (est__arity_fits), else checked here. */
static est_status infer_node_in(est_report *r, const est_node *n, const est_node_attrs *known, bool fits,
                                est_tval *tv, const int32_t *at, est_error *err) {
    const est_graph *g = r->graph;
    /* Field by field: an initializer would zero all EST_MAX_IO slots of in
     * and out (16 KiB) for every node; only the first n_in and n_out are
     * read (est_in, est_set_out). */
    est_infer_ctx ctx;
    ctx.graph = g;
    ctx.node = n;
    ctx.opset = n->opset;
    ctx.known = known;
    ctx.err = err;
    ctx.owned = r->owned;
    ctx.n_owned = r->n_owned;
    ctx.cap_owned = r->cap_owned;
    ctx.out_of_memory = false;
    ctx.n_in = ctx.n_out = 0;
    if (!n->op)
        return est__fail(err, EST_EUNSUPPORTED, "%s: node '%s': op '%s' of domain '%s' is not supported",
                         g->source, n->name, n->op_type, n->domain[0] ? n->domain : "ai.onnx");
    int n_in = ctx.n_in = n->n_inputs, n_out = ctx.n_out = n->n_outputs;
    const int32_t *inputs = n->inputs, *outputs = n->outputs;
    if (at) { /* the constants' slots (est__infer_constants) */
        for (int i = 0; i < n_in; i++) ctx.in[i] = inputs[i] >= 0 ? &tv[at[inputs[i]]] : NULL;
        for (int i = 0; i < n_out; i++) ctx.out[i] = outputs[i] >= 0 ? &tv[at[outputs[i]]] : NULL;
    } else {
        for (int i = 0; i < n_in; i++) ctx.in[i] = inputs[i] >= 0 ? &tv[inputs[i]] : NULL;
        for (int i = 0; i < n_out; i++) ctx.out[i] = outputs[i] >= 0 ? &tv[outputs[i]] : NULL;
    }
    est_status st = fits ? EST_OK : check_arity(&ctx);
    if (st == EST_OK) st = n->op->infer(&ctx);
    r->owned = ctx.owned;
    r->n_owned = ctx.n_owned;
    r->cap_owned = ctx.cap_owned;
    if (ctx.out_of_memory) /* not the shape error a missing value may have led to */
        return est__fail(err, EST_ENOMEM, "%s: node '%s': out of memory folding its output", g->source, n->name);
    if (st != EST_OK) return st;
    for (int i = 0; i < n_out; i++)
        if (ctx.out[i] && ctx.out[i]->rank < 0)
            return est_op_fail(&ctx, EST_ESHAPE, "output %d's shape could not be inferred", i);
    return EST_OK;
}

/* Node i, the plan's unplanned[j] (all nodes, j == i, without a plan). */
static est_status infer_node(est_report *r, const est_plan *plan, int32_t i, int32_t j, est_error *err) {
    bool fits = plan && plan->arity_fits[j];
    return infer_node_in(r, &r->graph->nodes[i], est__plan_node_attrs(plan, i), fits, r->tv, NULL, err);
}

/* The work of one node: a unit, and one per element it folded. */
static uint64_t node_work(const est_report *r, int64_t owned_before) {
    uint64_t work = 1;
    for (int64_t k = owned_before; k < r->n_owned; k++) work += (uint64_t)r->owned[k]->count;
    return work;
}

/* Node n's outputs from the memo when its inputs are as they were there. */
static bool take_memo(est_report *r, const est_memo *m, const est_node *n) {
    for (int k = 0; k < n->n_inputs; k++) {
        int32_t t = n->inputs[k];
        if (t < 0) continue;
        if (m->slot[t] < 0 || !est__memo_same(m, m->slot[t], &r->tv[t])) return false;
    }
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0) est__memo_tval(m, m->slot[n->outputs[k]], &r->tv[n->outputs[k]]);
    return true;
}

/* The states of the constant tensors while est__infer_constants runs, in
 * slots of their own: a graph has few beside its size, and est__infer's
 * per-tensor array is live meanwhile. */
typedef struct const_states {
    int32_t *at;  /* per tensor: its slot; NOT_CONSTANT, or UNBOUND for an
                     initializer no node that ran has read yet */
    est_tval *tv;
    int32_t n, cap;
} const_states;

enum { NOT_CONSTANT = -1, UNBOUND = -2 };

/* A new slot for tensor t, unknown; false when out of memory. */
static bool const_slot(const_states *c, int32_t t) {
    if (c->n == c->cap) {
        int32_t cap = c->cap ? 2 * c->cap : 64;
        est_tval *grown = realloc(c->tv, (size_t)cap * sizeof *grown);
        if (!grown) return false;
        c->tv = grown, c->cap = cap;
    }
    c->tv[c->n] = (est_tval){.rank = -1};
    c->at[t] = c->n++;
    return true;
}

/* Slots for node n's inputs and outputs, when all its inputs are constant:
 * 1 when they are, 0 when not, -1 when out of memory. */
static int const_node_slots(const est_graph *g, const est_node *n, const_states *c) {
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0 && c->at[n->inputs[k]] == NOT_CONSTANT) return 0;
    for (int k = 0; k < n->n_inputs; k++) {
        int32_t t = n->inputs[k];
        if (t < 0 || c->at[t] != UNBOUND) continue;
        if (!const_slot(c, t)) return -1;
        bind_initializer(&g->tensors[t], &c->tv[c->at[t]]);
    }
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0 && !const_slot(c, n->outputs[k])) return -1;
    return 1;
}

static void drop_outputs(const est_node *n, const_states *c) {
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0) c->at[n->outputs[k]] = NOT_CONSTANT;
}

est_status est__infer_constants(const est_graph *g, est_plan *p) {
    /* p->slot holds each tensor's slot in c while the nodes run */
    const_states c = {.at = p->slot};
    for (int32_t t = 0; t < g->n_tensors; t++)
        c.at[t] = g->tensors[t].kind == EST_T_INITIALIZER ? UNBOUND : NOT_CONSTANT;
    est_report r = {.graph = g};
    uint64_t work = 0;
    est_status st = EST_OK;
    for (int32_t i = 0; i < g->n_nodes && st == EST_OK; i++) {
        const est_node *n = &g->nodes[i];
        int ready = n->op ? const_node_slots(g, n, &c) : 0;
        if (ready < 0) st = EST_ENOMEM;
        if (ready <= 0) continue;
        int64_t owned_before = r.n_owned;
        est_error err;
        if (infer_node_in(&r, n, est__plan_node_attrs(p, i), false, c.tv, c.at, &err) != EST_OK) {
            drop_outputs(n, &c); /* left to each estimate, which reports the error */
            if (err.code == EST_ENOMEM) st = EST_ENOMEM;
            continue;
        }
        uint64_t w = node_work(&r, owned_before);
        if ((work += w) > g->limits.max_work) { /* each estimate meets the limit where it did */
            drop_outputs(n, &c);
            break;
        }
        p->work[i] = w;
    }
    /* the outputs of nodes that ran, in tensor order; tensors of nodes past
     * the limit stay unplanned */
    int32_t n_planned = 0;
    for (int32_t t = 0; t < g->n_tensors; t++)
        n_planned += c.at[t] >= 0 && g->tensors[t].kind != EST_T_INITIALIZER;
    p->tv = malloc(((size_t)n_planned + 1) * sizeof *p->tv);
    n_planned = 0;
    for (int32_t t = 0; t < g->n_tensors; t++) {
        int32_t at = c.at[t];
        bool planned = p->tv && at >= 0 && g->tensors[t].kind != EST_T_INITIALIZER;
        p->slot[t] = planned ? n_planned : -1;
        if (planned) p->tv[n_planned++] = c.tv[at];
    }
    p->owned = r.owned, p->n_owned = r.n_owned, p->cap_owned = r.cap_owned;
    free(c.tv);
    return p->tv ? st : EST_ENOMEM;
}

/* Every tensor's state before the nodes run: the plan's, an initializer's,
 * or unknown (rank -1), each written once (a 1M-node graph's are 180 MB). */
static void init_tensor_states(est_report *r, const est_plan *plan) {
    const est_graph *g = r->graph;
    /* in locals: the stores to tv may alias the graph's and the plan's ints */
    int32_t n_tensors = g->n_tensors;
    const est_tensor *tensors = g->tensors;
    const int32_t *slot = plan ? plan->slot : NULL;
    const est_tval *planned = plan ? plan->tv : NULL;
    est_tval *tv = r->tv;
    for (int32_t t = 0; t < n_tensors; t++) {
        if (slot && slot[t] >= 0) {
            tv[t] = planned[slot[t]];
            continue;
        }
        if (tensors[t].kind == EST_T_INITIALIZER) {
            bind_initializer(&tensors[t], &tv[t]);
            continue;
        }
        /* unknown: nothing reads the dims of a rank -1 state, and setting
         * one writes the dims it has (zeroing all EST_MAX_RANK of them was
         * 1.6% of the instructions of a re-estimate of a resnet50) */
        tv[t].dtype = EST_DT_UNDEFINED;
        tv[t].rank = -1;
        tv[t].elements = 0;
        tv[t].value = NULL;
    }
    tv[n_tensors] = (est_tval){.rank = 0};
}

est_status est__infer(est_report *r, const est_options *opt, est_prefault *pf, uint64_t **memo_work,
                      est_error *err) {
    const est_graph *g = r->graph;
    binding b = {0};
    est_status st = EST_OK;
    *memo_work = NULL;
    /* before the plan, which the first estimate makes: its pages are
     * faulted in meanwhile */
    r->tv = malloc(((size_t)g->n_tensors + 1) * sizeof *r->tv);
    est__prefault_add(pf, r->tv, ((size_t)g->n_tensors + 1) * sizeof *r->tv);
    est__prefault_start(pf);
    const est_plan *plan = est__graph_plan(g);
    if (!r->tv) {
        st = est__fail(err, EST_ENOMEM, "out of memory");
        goto out;
    }
    init_tensor_states(r, plan);
    if ((st = binding_init(&b, r, opt, err)) != EST_OK || (st = bind_symbols(g, &b, opt, err)) != EST_OK) goto out;
    r->n_dims = 0;
    r->dims = calloc((size_t)b.n_symbols + 1, sizeof *r->dims);
    if (!r->dims) {
        st = est__fail(err, EST_ENOMEM, "out of memory");
        goto out;
    }
    for (int32_t s = 0; s < b.n_symbols; s++)
        if (b.sym_val[s] > 0) r->dims[r->n_dims++] = (est_binding){b.symbols[s], b.sym_val[s]};
    for (int32_t k = 0; k < g->n_inputs && st == EST_OK; k++) {
        int32_t t = g->inputs[k];
        st = bind_input(r, &g->tensors[t], b.rank[k], b.dims[k], &b, &r->tv[t], opt, err);
    }
    /* Work: a unit per node and per element folded to a constant, so that a
     * graph of many nodes each folding a large constant ends with ELIMIT. */
    uint64_t work = 0;
    const est_memo *memo = plan ? est__plan_memo(g) : NULL;
    uint64_t *works = plan && !memo ? calloc((size_t)g->n_nodes + 1, sizeof *works) : NULL; /* to record one */
    *memo_work = works;
    /* the nodes the plan did not infer once for all (all nodes without one) */
    int32_t n_run = plan ? plan->n_unplanned : g->n_nodes;
    for (int32_t j = 0; j < n_run && st == EST_OK; j++) {
        int32_t i = plan ? plan->unplanned[j] : j;
        if (plan) work += plan->planned_before[j];
        if (memo && memo->work[i] && take_memo(r, memo, &g->nodes[i])) {
            work += memo->work[i];
        } else {
            int64_t owned_before = r->n_owned;
            st = infer_node(r, plan, i, j, err);
            uint64_t w = node_work(r, owned_before);
            work += w;
            if (works) works[i] = w;
        }
        if (st == EST_OK && work > g->limits.max_work)
            st = est__fail(err, EST_ELIMIT, "%s: node '%s' (%s): the estimate's work (nodes and folded elements) "
                           "passes the limit of %llu (est_limits.max_work)", g->source, g->nodes[i].name,
                           g->nodes[i].op_type, (unsigned long long)g->limits.max_work);
    }
out:
    binding_free(&b);
    return st;
}
