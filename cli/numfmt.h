/* numfmt.h: numbers written without printf, byte for byte as printf writes
 * them (numfmt.c). */
#ifndef MEMEST_NUMFMT_H
#define MEMEST_NUMFMT_H

#include <stddef.h>
#include <stdint.h>

/* Each writes into out (room for 24 bytes; no NUL) and returns the length. */
size_t fmt_u64(char *out, uint64_t v);   /* "%" PRIu64 */
size_t fmt_i64(char *out, int64_t v);    /* "%" PRId64 */
size_t fmt_fixed2(char *out, double x);  /* "%.2f", for 1 <= x < 2^53 */

/* Appends s[0..len) to buf (n bytes, holding `used`) as snprintf(buf + used,
 * n - used, "%s", s) would: what fits, then a NUL. Returns used + len. */
size_t fmt_append(char *buf, size_t n, size_t used, const char *s, size_t len);

#endif
