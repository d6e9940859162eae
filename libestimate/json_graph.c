/* json_graph.c: placeholder until the JSON graph format lands. */
#include "ir.h"

est_status est_load_json_buffer(const char *text, size_t size, const char *name, est_graph **out,
                                est_error *err) {
    (void)text; (void)size;
    if (out) *out = NULL;
    return est__fail(err, EST_EUNSUPPORTED, "%s: JSON graphs are not supported yet", name ? name : "<memory>");
}

est_status est_graph_to_json(const est_graph *g, char **out, est_error *err) {
    (void)g;
    if (out) *out = NULL;
    return est__fail(err, EST_EUNSUPPORTED, "JSON output is not supported yet");
}
