/*
 * module_names.h: PyTorch's module names (named_modules()) from the scopes
 * the exporters record, and the names reports show for layers. Internal.
 *
 * Every node's scope is a '/'-separated module path, written differently by
 * each exporter:
 *   dynamo:      "layer1/layer1.0/layer1.0.conv1"   (full names)
 *   TorchScript: "layer1/layer1.0/conv1"            (names local to the parent;
 *                "m/encoder/layer.0" for a ModuleList child)
 * A name walk turns either into named_modules() names, one per component:
 * "layer1", "layer1.0", "layer1.0.conv1".
 */
#ifndef EST_MODULE_NAMES_H
#define EST_MODULE_NAMES_H

#include "ir.h"

/* Walks a scope's components, producing each one's full name. */
typedef struct est_name_walk {
    const char *next;          /* the rest of the scope */
    char *cur, *parent;        /* full names of this component and its parent */
    size_t cur_len, parent_len;
    const char *local;         /* this component as the scope writes it */
    size_t local_len;
} est_name_walk;

/* Starts a walk over `scope`. cur and parent are the caller's, of at least
 * strlen(scope) + 2 bytes each: a full name is never longer than the path up
 * to its component. */
void est__name_walk_start(est_name_walk *w, const char *scope, char *cur, char *parent);
/* Advances to the next component: w->cur is its full name, w->parent its
 * parent's ("" for the first). False at the end. */
bool est__name_walk_next(est_name_walk *w);

/* The named_modules() name of the innermost module of `scope` ("" for the
 * model's own forward), in a new string; NULL when out of memory. */
char *est__module_name(const char *scope);

/* Whether the first len bytes of `name` are a node name the dynamo exporter
 * makes up, which says no more than the node's scope and op: "node_" and the
 * FX node or the op with a count ("node_linear_12", "node_Conv_3",
 * "node_native_dropout_4__1"), or the inliner's "n4", "n4_2" for the nodes
 * of an inlined function. */
bool est__is_dynamo_node_name(const char *name, size_t len);

/* Sets every node's module (from its scope) and label (what reports show:
 * the module for a made-up name, else the name). */
est_status est__name_modules(est_graph *g, est_error *err);

#endif
