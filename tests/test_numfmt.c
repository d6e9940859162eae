/*
 * test_numfmt: the CLI's number writers (cli/numfmt.c) write what printf
 * writes, byte for byte: "%.2f" on the doubles the table's byte and FLOP
 * columns divide down (ties among them, 0.125 and the like, round to even),
 * and the integers at their extremes.
 */
#include <inttypes.h>
#include <string.h>

#include "numfmt.h"
#include "test_util.h"

static uint64_t rng = 88172645463325252u;

static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void check_fixed2(double x) {
    char got[64], want[64];
    got[fmt_fixed2(got, x)] = '\0';
    snprintf(want, sizeof want, "%.2f", x);
    CHECK(strcmp(got, want) == 0, "%.17g: '%s', printf writes '%s'", x, got, want);
}

/* What human_bytes and human_count divide a count down to. */
static double divided(uint64_t v, double by, int max_units) {
    double x = (double)v;
    for (int u = 0; x >= by && u < max_units; u++) x /= by;
    return x;
}

int main(void) {
    for (uint64_t k = 8; k < 200000; k++) check_fixed2((double)k / 8.0); /* every tie */
    for (uint64_t k = 1000; k < 300000; k++) check_fixed2((double)k / 1000.0);
    for (int i = 0; i < 300000 && test_failures < 10; i++) {
        uint64_t v = next() >> (next() % 64);
        if (v >= 1024) check_fixed2(divided(v, 1024.0, 5));
        if (v >= 1000) check_fixed2(divided(v, 1000.0, 6));
    }
    check_fixed2(9007199254740991.0);
    const int64_t ints[] = {0, 1, -1, 9, 10, -10, 123456789, INT64_MAX, INT64_MIN};
    for (size_t k = 0; k < sizeof ints / sizeof *ints; k++) {
        char got[32], want[32];
        got[fmt_i64(got, ints[k])] = '\0';
        snprintf(want, sizeof want, "%" PRId64, ints[k]);
        CHECK(strcmp(got, want) == 0, "'%s', printf writes '%s'", got, want);
        got[fmt_u64(got, (uint64_t)ints[k])] = '\0';
        snprintf(want, sizeof want, "%" PRIu64, (uint64_t)ints[k]);
        CHECK(strcmp(got, want) == 0, "'%s', printf writes '%s'", got, want);
    }
    char buf[8] = "";
    size_t used = fmt_append(buf, sizeof buf, 0, "1x2", 3);
    used = fmt_append(buf, sizeof buf, used, "x345678", 7);
    CHECK(used == 10 && strcmp(buf, "1x2x345") == 0, "appended '%s', %zu", buf, used);
    return test_result("test_numfmt");
}
