/* gpus.c: the GPU names `memest --gpu NAME` lists (the table is the
 * library's, libestimate/device.c), and memory sizes. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"
#include "gpus.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define GB ((uint64_t)1000000000)

const char *gpu_names(char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < est_device_count() && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", est_device_at(i)->name);
    return buf;
}

bool parse_size(const char *s, uint64_t *out) {
    if (!s || !isdigit((unsigned char)s[0])) return false;
    static const struct { const char *unit; uint64_t mult; } units[] = {
        {"", 1},          {"b", 1},           {"kib", KiB},       {"mib", MiB},
        {"gib", GiB},     {"tib", GiB * KiB}, {"kb", 1000},       {"mb", 1000000},
        {"gb", GB},       {"tb", GB * 1000},
    };
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0) || isinf(v)) return false;
    for (const char *p = s; p < end; p++) /* no exponents, no hex */
        if (!isdigit((unsigned char)*p) && *p != '.') return false;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        const char *u = units[i].unit, *e = end;
        while (*u && *e && tolower((unsigned char)*e) == *u) u++, e++;
        if (*u || *e) continue;
        double bytes = v * (double)units[i].mult;
        if (bytes >= 9.2e18) return false;
        if (units[i].mult == 1 && bytes != floor(bytes)) return false; /* fractional bytes */
        *out = (uint64_t)(bytes + 0.5);
        return true;
    }
    return false;
}

bool parse_host_us(const char *s, est_host *out) {
    double v[5];
    for (int i = 0; i < 5; i++) {
        if (!s || !isdigit((unsigned char)*s)) return false;
        char *end;
        errno = 0;
        v[i] = strtod(s, &end);
        for (const char *p = s; p < end; p++) /* no exponents, no hex, no inf */
            if (!isdigit((unsigned char)*p) && *p != '.') return false;
        if (errno || !isfinite(v[i])) return false;
        if (*end != (i < 4 ? ',' : '\0')) return false;
        s = end + 1;
    }
    *out = (est_host){v[0] * 1e-6, v[1] * 1e-6, v[2] * 1e-6, v[3] * 1e-6, v[4] * 1e-6};
    return true;
}
