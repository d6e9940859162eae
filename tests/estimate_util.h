/*
 * estimate_util.h: what the tests of estimates share: printing a byte
 * count, the caching allocator's rounding the expected figures are derived
 * with, loading a JSON graph written in the test, and an estimate that fails
 * its check. Header-only, like test_util.h, whose CHECK counts each
 * executable's failures.
 */
#ifndef EST_ESTIMATE_UTIL_H
#define EST_ESTIMATE_UTIL_H

#include <stdint.h>
#include <string.h>

#include "estimate.h"
#include "test_util.h"

#define U(x) ((unsigned long long)(x))

/* The caching allocator's rounding: up to a multiple of 512 bytes. */
static inline uint64_t R(uint64_t bytes) { return (bytes + 511) / 512 * 512; }

static inline est_graph *load_json(const char *text, const char *name) {
    est_error err;
    est_graph *g = NULL;
    if (est_load_json_buffer(text, strlen(text), name, &g, &err) != EST_OK) {
        CHECK(false, "%s: load failed: %s", name, err.message);
        return NULL;
    }
    return g;
}

/* est_estimate of g under opt, or NULL after a failed check naming g. */
static inline est_report *estimate_checked(const est_graph *g, const est_options *opt) {
    est_error err;
    est_report *r = NULL;
    if (est_estimate(g, opt, &r, &err) != EST_OK) {
        CHECK(false, "%s: estimate failed: %s", est_graph_name(g), err.message);
        return NULL;
    }
    return r;
}

#endif
