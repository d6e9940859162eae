/*
 * fuzz_pipeline: load, bind dims, infer and estimate, in training and in
 * inference. The first CONFIG_BYTES bytes choose the options; the rest is the
 * model, ONNX or JSON by content (as est_load_file chooses).
 *
 *   byte 0: bit 0 mode first estimated, bits 1-2 optimizer, bits 3-4 dtype
 *           (float32, float16, bfloat16, float64: the last must be refused),
 *           bit 5 give --batch, bit 6 checkpoint (byte 1 bit 7: a prefix of
 *           the first node's scope, else every = 1 + byte 1 bits 0-1),
 *           bit 7 a device limit of 2^(20 + byte 2 bits 0-4) bytes for the
 *           allocator's replay, and bf16 autocast when byte 1 bit 6 is set
 *   byte 1: batch - 1
 *   bytes 2-7: values of the symbolic dims, one byte each, cycled: v < 240
 *           binds v + 1, larger ones bind 2^(v - 200) (past the dim limit)
 */
#include "fuzz_common.h"
#include "ir.h"

#define CONFIG_BYTES 8

static int64_t dim_value(unsigned char v) {
    return v < 240 ? (int64_t)v + 1 : (int64_t)1 << (v - 200);
}

static bool looks_like_json(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n') continue;
        return p[i] == '{';
    }
    return false;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (size < CONFIG_BYTES) return 0;
    const unsigned char *cfg = data;
    data += CONFIG_BYTES;
    size -= CONFIG_BYTES;
    est_error err;
    est_graph *g = NULL;
    est_status st = looks_like_json(data, size)
                        ? est_load_json_buffer((const char *)data, size, "fuzz.model", &g, &err)
                        : est_load_onnx_buffer(data, size, "fuzz.model", &g, &err);
    fuzz_check_error(st, &err, "fuzz.model");
    if (st != EST_OK) return 0;

    /* Bind every symbol the graph declares (internal: the public API does not
     * list them). */
    est_binding dims[64];
    size_t n_dims = 0;
    for (int32_t s = 0; s < g->n_symbols && n_dims < 64; s++, n_dims++)
        dims[n_dims] = (est_binding){g->symbols[s], dim_value(cfg[2 + s % 6])};
    static const est_dtype dtypes[4] = {EST_DT_FLOAT, EST_DT_FLOAT16, EST_DT_BFLOAT16, EST_DT_DOUBLE};
    for (int pass = 0; pass < 2; pass++) {
        est_options opt;
        est_options_init(&opt);
        opt.mode = (est_mode)((cfg[0] & 1) ^ pass);
        opt.optimizer = (est_optimizer)((cfg[0] >> 1) & 3);
        opt.dtype = dtypes[(cfg[0] >> 3) & 3];
        /* with --batch, the dims bound by name leave the batch's symbol alone */
        opt.batch = (cfg[0] & 0x20) ? (int64_t)cfg[1] + 1 : 0;
        opt.dims = dims;
        opt.n_dims = n_dims;
        /* checkpointing by a prefix of a scope the graph has, or every N */
        char prefix[16] = "";
        const char *prefixes[1] = {prefix};
        if (cfg[0] & 0x40) {
            if (cfg[1] & 0x80) {
                const char *sc = g->n_nodes && g->nodes[0].scope ? g->nodes[0].scope : "x";
                snprintf(prefix, sizeof prefix, "%.*s", 1 + (cfg[3] & 7), *sc ? sc : "x");
                opt.checkpoint.prefixes = prefixes;
                opt.checkpoint.n_prefixes = 1;
            } else {
                opt.checkpoint.every = 1 + (cfg[1] & 3);
            }
        }
        if (cfg[0] & 0x80) {
            opt.memory_limit = (uint64_t)1 << (20 + (cfg[2] & 31));
            if ((cfg[1] & 0x40) && opt.dtype == EST_DT_FLOAT) opt.amp = EST_AMP_BF16;
        }
        est_report *r = NULL;
        st = est_estimate(g, &opt, &r, &err);
        if (st == EST_EINVAL && opt.batch) { /* a conflict with a named dim: retry without */
            opt.batch = 0;
            st = est_estimate(g, &opt, &r, &err);
        }
        fuzz_check_error(st, &err, NULL);
        if (st == EST_OK) {
            volatile unsigned long long sink = fuzz_walk_report(r);
            (void)sink;
            if (est_report_mode(r) != opt.mode) abort();
            fuzz_check_meaning(r);
        } else if (r) {
            abort();
        }
        est_report_free(r);
    }
    est_graph_free(g);
    return 0;
}
