/* module_names.c: named_modules() names from scopes, and the layers' labels. */
#include <stdlib.h>
#include <string.h>

#include "module_names.h"

void est__name_walk_start(est_name_walk *w, const char *scope, char *cur, char *parent) {
    *w = (est_name_walk){.next = scope, .cur = cur, .parent = parent};
    cur[0] = parent[0] = '\0';
}

bool est__name_walk_next(est_name_walk *w) {
    if (!*w->next) return false;
    const char *c = w->next;
    size_t len = strcspn(c, "/");
    char *swap = w->parent;
    w->parent = w->cur;
    w->parent_len = w->cur_len;
    w->cur = swap;
    size_t keep = 0; /* characters of the parent's full name that precede c */
    bool first = w->local == NULL;
    if (first || (len > w->parent_len && strncmp(c, w->parent, w->parent_len) == 0 && c[w->parent_len] == '.'))
        keep = 0; /* the top, or already a full name (dynamo) */
    else if (len > w->local_len && strncmp(c, w->local, w->local_len) == 0 && c[w->local_len] == '.')
        keep = w->parent_len - w->local_len; /* "layer1.0" under "layer1" replaces the parent's last part */
    else
        keep = w->parent_len + 1; /* "encoder" under "m" is "m.encoder" */
    if (keep) {
        memcpy(w->cur, w->parent, keep - (keep == w->parent_len + 1));
        if (keep == w->parent_len + 1) w->cur[w->parent_len] = '.';
    }
    memcpy(w->cur + keep, c, len);
    w->cur[keep + len] = '\0';
    w->cur_len = keep + len;
    w->local = c;
    w->local_len = len;
    w->next = c[len] == '/' ? c + len + 1 : c + len;
    return true;
}

char *est__module_name(const char *scope) {
    size_t cap = strlen(scope) + 2;
    char *cur = malloc(cap), *parent = malloc(cap), *name = NULL;
    if (cur && parent) {
        est_name_walk w;
        est__name_walk_start(&w, scope, cur, parent);
        while (est__name_walk_next(&w)) continue;
        name = est__strdup(w.cur);
    }
    free(cur);
    free(parent);
    return name;
}

static size_t count_digits(const char *s, size_t len) {
    size_t n = 0;
    while (n < len && s[n] >= '0' && s[n] <= '9') n++;
    return n;
}

static bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

bool est__is_dynamo_node_name(const char *name, size_t len) {
    if (len > 5 && strncmp(name, "node_", 5) == 0) {
        for (size_t i = 5; i < len; i++)
            if (!is_word_char(name[i])) return false;
        return true;
    }
    if (len < 2 || name[0] != 'n') return false;
    for (size_t i = 1;;) { /* n4, n4_2: groups of digits joined by '_' */
        size_t d = count_digits(name + i, len - i);
        if (!d) return false;
        i += d;
        if (i == len) return true;
        if (name[i++] != '_') return false;
    }
}

/* Whether the name says nothing beyond the module: one the dynamo exporter
 * made up, or the name the ONNX loader gives the BatchNorm it restores after
 * such a Conv ("node_Conv_3" EST_UNFOLDED_BN_SUFFIX). */
static bool name_is_made_up(const char *name) {
    size_t len = strlen(name), suffix = strlen(EST_UNFOLDED_BN_SUFFIX);
    if (len > suffix && strcmp(name + len - suffix, EST_UNFOLDED_BN_SUFFIX) == 0) len -= suffix;
    return est__is_dynamo_node_name(name, len);
}

est_status est__name_modules(est_graph *g, est_error *err) {
    /* the nodes of one call run together and share its interned scope: a
     * name is worked out once a run */
    const char *scope = NULL, *module = NULL;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        est_node *n = &g->nodes[i];
        if (n->scope && n->scope != scope) {
            char *name = est__module_name(n->scope);
            module = name ? est__graph_intern(g, name) : NULL;
            free(name);
            if (!module) return est__fail(err, EST_ENOMEM, "%s: out of memory naming modules", g->source);
            scope = n->scope;
        }
        n->module = n->scope ? module : NULL;
        /* the model's own forward ("") names nothing better than the node */
        n->label = n->module && n->module[0] && name_is_made_up(n->name) ? n->module : n->name;
    }
    return EST_OK;
}
