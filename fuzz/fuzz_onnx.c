/* fuzz_onnx: the ONNX loader on arbitrary bytes, then the JSON writer and the
 * JSON loader on what it wrote. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    est_error err;
    est_graph *g = NULL;
    est_status st = est_load_onnx_buffer(data, size, "fuzz.onnx", &g, &err);
    fuzz_check_error(st, &err, "fuzz.onnx");
    if (st != EST_OK) {
        if (g) abort(); /* a failed load leaves *out NULL */
        return 0;
    }
    char *text = NULL;
    st = est_graph_to_json(g, &text, &err);
    if (st == EST_OK) {
        est_graph *back = NULL;
        st = est_load_json_buffer(text, strlen(text), "fuzz.json", &back, &err);
        fuzz_check_error(st, &err, "fuzz.json");
        if (st == EST_OK && est_graph_node_count(back) != est_graph_node_count(g)) {
            fprintf(stderr, "round trip changed the node count\n");
            abort();
        }
        est_graph_free(back);
    } else {
        /* the JSON format cannot hold every ONNX graph (docs/json-format.md) */
        fuzz_check_error(st, &err, "fuzz.onnx");
    }
    est_free(text);
    est_graph_free(g);
    return 0;
}
