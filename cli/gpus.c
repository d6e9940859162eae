/* gpus.c: the GPU table behind `memest --gpu NAME`, and memory sizes.
 * docs/capacity.md lists the same table with the reasons for each figure:
 * keep the two in step. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpus.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define GB ((uint64_t)1000000000)

/* Nominal capacities: HBM parts and the GeForce cards in GiB (their memory
 * is sized in powers of two); the GDDR data-center parts sold as "N GB" in
 * decimal GB, which is a little below what nvidia-smi reports for them (a
 * safe side). Two figures are what nvidia-smi reports on the real device. */
const gpu_info gpu_table[] = {
    {.name = "T4", .memory_bytes = 16 * GB, .basis = "16 GB GDDR6, decimal"},
    {.name = "L4", .memory_bytes = 24 * GB, .basis = "24 GB GDDR6, decimal"},
    {.name = "A10G", .memory_bytes = 24 * GB, .basis = "24 GB GDDR6, decimal"},
    {.name = "L40S", .memory_bytes = 48 * GB, .basis = "48 GB GDDR6, decimal"},
    {.name = "RTX3090", .memory_bytes = 24 * GiB, .basis = "24 GiB GDDR6X"},
    {.name = "RTX4090", .memory_bytes = 24 * GiB, .basis = "24 GiB GDDR6X"},
    {.name = "V100-16GB", .memory_bytes = 16 * GiB, .basis = "16 GiB HBM2"},
    {.name = "V100-32GB", .memory_bytes = 32 * GiB, .basis = "32 GiB HBM2"},
    {.name = "A100-40GB", .memory_bytes = 40 * GiB, .basis = "40 GiB HBM2"},
    {.name = "A100-80GB", .memory_bytes = 80 * GiB, .basis = "80 GiB HBM2e"},
    {.name = "H100-80GB", .memory_bytes = 81559 * MiB, .basis = "80 GiB HBM3: 81559 MiB as nvidia-smi reports"},
    {.name = "H100-94GB", .memory_bytes = 94 * GB, .basis = "H100 NVL, 94 GB HBM3, decimal"},
    {.name = "H200", .memory_bytes = 143771 * MiB, .basis = "141 GB HBM3e: 143771 MiB as nvidia-smi reports on our machine"},
};
const size_t gpu_table_count = sizeof gpu_table / sizeof gpu_table[0];

/* Compares ignoring case and the separators '-', '_' and ' '. */
static bool same_name(const char *a, const char *b) {
    for (;;) {
        while (*a == '-' || *a == '_' || *a == ' ') a++;
        while (*b == '-' || *b == '_' || *b == ' ') b++;
        if (!*a || !*b) return !*a && !*b;
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
        a++;
        b++;
    }
}

const gpu_info *gpu_find(const char *name) {
    for (size_t i = 0; i < gpu_table_count; i++)
        if (same_name(name, gpu_table[i].name)) return &gpu_table[i];
    /* "H100-NVL" is the H100 NVL's usual name */
    if (same_name(name, "H100-NVL")) return gpu_find("H100-94GB");
    return NULL;
}

const char *gpu_names(char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < gpu_table_count && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", gpu_table[i].name);
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
