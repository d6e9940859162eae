/* fuzz_json: the JSON graph loader on arbitrary text, then the writer, whose
 * output must load back. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    est_error err;
    est_graph *g = NULL;
    est_status st = est_load_json_buffer((const char *)data, size, "fuzz.json", &g, &err);
    fuzz_check_error(st, &err, "fuzz.json");
    if (st != EST_OK) {
        if (g) abort();
        return 0;
    }
    char *text = NULL;
    st = est_graph_to_json(g, &text, &err);
    if (st == EST_OK) {
        est_graph *back = NULL;
        st = est_load_json_buffer(text, strlen(text), "back.json", &back, &err);
        fuzz_check_error(st, &err, "back.json");
        if (st != EST_OK) {
            fprintf(stderr, "what the writer wrote does not load back: %s\n", err.message);
            abort();
        }
        est_graph_free(back);
    }
    est_free(text);
    est_graph_free(g);
    return 0;
}
