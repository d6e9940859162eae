/*
 * param_names.c: PyTorch's names for the weights an exporter renamed.
 *
 * Both exporters fold the transpose of a linear layer's weight into a new
 * initializer with a generated name: the dynamo exporter's "val_51", the
 * TorchScript exporter's "onnx::MatMul_123". Users name parameters as
 * named_parameters() does ("layers.0.self_attn.q_proj.weight"), so that is
 * recovered where the file records it. In a dynamo export the node's FX
 * call ("pkg.torch.onnx.fx_node") reads the parameter's placeholder, "%p_"
 * plus its name with dots as underscores, and the innermost name scope is
 * its module's full name; the placeholder must spell that module's name, so
 * the rest is the attribute ("weight"). The TorchScript exporter's node
 * names are no such record (a ModuleDict entry, peft's lora_A.default,
 * appears as "default" alone), so its folded weights keep their generated
 * names; its training exports fold nothing and keep every name.
 * The exporters' optimizers also merge initializers of equal values into
 * one: every LoRA lora_B starts at zero and every norm weight at one, so all
 * of a model's lora_B weights can reach the file as one "val_55", and all
 * its RMSNorm weights as "layers.0.input_layernorm.weight". Where one generated initializer stands
 * for several parameters by these names, each node gets a tensor of its own,
 * named after its parameter, so that each parameter counts once.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "param_names.h"

/* A name an exporter generated rather than took from the module. */
static bool is_generated_name(const char *name) { return strncmp(name, "onnx::", 6) == 0 || !strchr(name, '.'); }

/* torch.export lower-cases the placeholder ("lora_A" -> "%p_..._lora_a_...")
 * and spells dots as underscores. */
static bool same_placeholder(const char *dotted, const char *placeholder, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char c = dotted[i] == '.' ? '_' : (char)tolower((unsigned char)dotted[i]);
        if (c != placeholder[i]) return false;
    }
    return true;
}

/* module.attr when one of the call's "%p_" placeholders spells the module's
 * name followed by "_attr" and module.attr is not `taken`; NULL otherwise
 * (the caller frees the result); NULL with *oom set when out of memory. */
static char *placeholder_name(const char *fx_node, const char *module, const char *const *taken, int n_taken,
                              bool *oom) {
    size_t mlen = strlen(module);
    const char *args = strstr(fx_node, "](args = (");
    for (const char *p = args ? strstr(args, "%p_") : NULL; p; p = strstr(p + 3, "%p_")) {
        const char *ph = p + 3;
        size_t len = strcspn(ph, ",) ]");
        if (len <= mlen + 1 || !same_placeholder(module, ph, mlen) || ph[mlen] != '_') continue;
        size_t attr_len = len - mlen - 1;
        char *name = malloc(mlen + 1 + attr_len + 1);
        if (!name) {
            *oom = true;
            return NULL;
        }
        memcpy(name, module, mlen);
        name[mlen] = '.';
        memcpy(name + mlen + 1, ph + mlen + 1, attr_len);
        name[mlen + 1 + attr_len] = '\0';
        bool used = false;
        for (int k = 0; k < n_taken && !used; k++) used = taken[k] && strcmp(taken[k], name) == 0;
        if (!used) return name;
        free(name);
    }
    return NULL;
}

/* The innermost module of a dynamo scope: its last '/'-separated part, which
 * name_scopes already spells in full. */
static const char *innermost(const char *scope) {
    const char *slash = strrchr(scope, '/');
    return slash ? slash + 1 : scope;
}

/* An initializer of the same dtype and dims. */
static bool same_decl(const est_tensor *a, const est_tensor *b) {
    if (a->kind != EST_T_INITIALIZER || a->dtype != b->dtype || a->rank != b->rank) return false;
    for (int32_t d = 0; d < a->rank; d++)
        if (a->dims[d].value != b->dims[d].value) return false;
    return true;
}

/* A tensor of its own for a parameter that shares a merged initializer:
 * the initializer's dtype and dims under the parameter's name. Returns its
 * index; -1 when out of memory; -2 when the name is taken by a tensor that
 * is no initializer of the same dtype and dims (the input then stays). */
static int32_t split_merged(est_graph *g, int32_t merged, const char *name) {
    int32_t t = est__graph_find(g, name);
    if (t >= 0) return same_decl(&g->tensors[t], &g->tensors[merged]) ? t : -2;
    if ((t = est__graph_tensor(g, name)) < 0) return -1;
    est_tensor *src = &g->tensors[merged], *dst = &g->tensors[t];
    dst->kind = EST_T_INITIALIZER;
    dst->dtype = src->dtype;
    dst->rank = src->rank;
    if (src->rank > 0) {
        dst->dims = est__graph_dims(g, (size_t)src->rank);
        if (!dst->dims) return -1;
        memcpy(dst->dims, src->dims, (size_t)src->rank * sizeof *dst->dims);
    }
    return t;
}

/* The FX call reads `name` as a placeholder of this kind ("%p_": a
 * parameter, "%b_": a registered buffer). */
static bool reads_placeholder(const char *fx_node, const char *kind, const char *name) {
    const char *args = strstr(fx_node, "](args = (");
    size_t len = strlen(name);
    for (const char *p = args ? strstr(args, kind) : NULL; p; p = strstr(p + 3, kind))
        if (strcspn(p + 3, ",) ]") == len && same_placeholder(name, p + 3, len)) return true;
    return false;
}

/* The name a tensor goes by: PyTorch's where it was recovered. */
static const char *known_name(const est_tensor *t) { return t->torch_name ? t->torch_name : t->name; }

/* PyTorch's name for a parameter node n reads, or NULL when its FX call
 * does not say: the first of the call's placeholders of n's module that
 * neither another input of n nor an earlier node of the call has. */
static char *torch_name_for(const est_graph *g, const est_node *n, const char *fx_node, const est_fx_names *call,
                            bool *oom) {
    const char *taken[EST_MAX_IO + EST_FX_NAMES_MAX];
    int n_taken = 0;
    for (int j = 0; j < n->n_inputs; j++) taken[n_taken++] = n->inputs[j] >= 0 ? g->tensors[n->inputs[j]].name : NULL;
    for (int j = 0; j < call->n; j++) taken[n_taken++] = known_name(&g->tensors[call->named[j]]);
    return placeholder_name(fx_node, innermost(n->scope), taken, n_taken, oom);
}

static void note_named(est_fx_names *call, int32_t t) {
    for (int j = 0; j < call->n; j++)
        if (call->named[j] == t) return;
    if (call->n < EST_FX_NAMES_MAX) call->named[call->n++] = t;
}

bool est__name_renamed_weights(est_graph *g, est_node *n, const char *fx_node, est_fx_names *call) {
    if (!fx_node || !n->scope || !n->scope[0]) return true;
    uint64_t hash = est__str_hash(fx_node, strlen(fx_node)); /* FX calls print at length */
    if (call->call != hash) *call = (est_fx_names){.call = hash};
    for (int k = 0; k < n->n_inputs; k++) {
        int32_t t = n->inputs[k];
        if (t < 0 || g->tensors[t].kind != EST_T_INITIALIZER) continue;
        /* a registered buffer (rotary inv_freq), which the file cannot tell
         * from a weight */
        if (reads_placeholder(fx_node, "%b_", g->tensors[t].name)) {
            g->tensors[t].torch_buffer = true;
            continue;
        }
        /* parameters are floating point; an integer initializer the call
         * reads is a shape or an index (aten.group_norm's Reshape targets) */
        if (!est__dtype_is_float(g->tensors[t].dtype)) continue;
        /* aten.group_norm's decomposition normalizes through an
         * InstanceNormalization with a scale of ones and a bias of zeros per
         * group; the module's weight and bias come after it, in the Mul and
         * the Add (fuse.c folds them back) */
        if (k > 0 && est__node_is(n, "InstanceNormalization")) continue;
        /* a module's own name can still stand for merged parameters (equal
         * norm weights), which the FX call tells apart */
        bool generated = is_generated_name(g->tensors[t].name);
        if (!generated && reads_placeholder(fx_node, "%p_", g->tensors[t].name)) { /* named right */
            note_named(call, t);
            continue;
        }
        bool oom = false;
        char *name = torch_name_for(g, n, fx_node, call, &oom);
        if (oom) return false; /* not a graph that keeps merged parameters merged */
        if (!name) continue;
        const char *have = g->tensors[t].torch_name ? g->tensors[t].torch_name : generated ? NULL : g->tensors[t].name;
        if (!have) {
            g->tensors[t].torch_name = name;
            note_named(call, t);
            continue;
        }
        int32_t own = strcmp(have, name) == 0 ? t : split_merged(g, t, name);
        free(name);
        if (own == -1) return false;
        if (own >= 0) {
            n->inputs[k] = own;
            note_named(call, own);
        }
    }
    return true;
}
