/*
 * numfmt.c: numbers written without printf.
 *
 * A million-node model prints a million table rows, each with a dozen
 * numbers; printf's parsing of the format and its general float conversion
 * were most of that time. These write the same bytes: "%.2f" rounds the
 * double's exact binary value to two decimals, ties to even, as glibc does.
 */
#include <string.h>

#include "numfmt.h"

/* "00" to "99": two digits a division. */
static const char pairs[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                               "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                               "8081828384858687888990919293949596979899";

/* 10^1 to 10^19: how many digits a number has. */
static const uint64_t tens[19] = {
    UINT64_C(10), UINT64_C(100), UINT64_C(1000), UINT64_C(10000), UINT64_C(100000), UINT64_C(1000000),
    UINT64_C(10000000), UINT64_C(100000000), UINT64_C(1000000000), UINT64_C(10000000000),
    UINT64_C(100000000000), UINT64_C(1000000000000), UINT64_C(10000000000000), UINT64_C(100000000000000),
    UINT64_C(1000000000000000), UINT64_C(10000000000000000), UINT64_C(100000000000000000),
    UINT64_C(1000000000000000000), UINT64_C(10000000000000000000)};

/* The digits go straight to their places, the last first: digits written
 * into a buffer and copied out at once made each read wait for the small
 * writes before it. */
size_t fmt_u64(char *out, uint64_t v) {
    size_t n = 1;
    while (n < 20 && v >= tens[n - 1]) n++;
    for (size_t at = n; v >= 100; v /= 100) {
        at -= 2;
        memcpy(out + at, pairs + 2 * (v % 100), 2);
    }
    if (v >= 10) memcpy(out, pairs + 2 * v, 2);
    else out[0] = (char)('0' + v);
    return n;
}

size_t fmt_i64(char *out, int64_t v) {
    if (v >= 0) return fmt_u64(out, (uint64_t)v);
    out[0] = '-';
    return 1 + fmt_u64(out + 1, (uint64_t)0 - (uint64_t)v);
}

size_t fmt_fixed2(char *out, double x) {
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    /* x = m / 2^s exactly, s in [0, 52] for 1 <= x < 2^53 */
    uint64_t m = (bits & (((uint64_t)1 << 52) - 1)) | ((uint64_t)1 << 52);
    unsigned s = 1075 - (unsigned)((bits >> 52) & 0x7ff);
    if (s == 0) { /* 2^52 <= x < 2^53: a whole number, and no shift by s - 1 */
        size_t n = fmt_u64(out, m);
        memcpy(out + n, ".00", 3);
        return n + 3;
    }
    uint64_t mask = ((uint64_t)1 << s) - 1, whole = m >> s;
    uint64_t hundredths = (m & mask) * 100; /* below 2^59 */
    uint64_t cents = hundredths >> s, rest = hundredths & mask, half = (uint64_t)1 << (s - 1);
    if (rest > half || (rest == half && (cents & 1))) cents++;
    if (cents == 100) whole++, cents = 0;
    size_t n = fmt_u64(out, whole);
    out[n++] = '.';
    out[n++] = (char)('0' + cents / 10);
    out[n++] = (char)('0' + cents % 10);
    return n;
}

size_t fmt_append(char *buf, size_t n, size_t used, const char *s, size_t len) {
    if (used < n) {
        size_t room = n - used - 1, k = len < room ? len : room;
        memcpy(buf + used, s, k);
        buf[used + k] = '\0';
    }
    return used + len;
}
