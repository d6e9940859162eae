/* json_writer.c: see json_writer.h. */
#include "json_writer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h" /* est__fail */

#define JW_PIECE 65536 /* a sink's piece, and the string's first size */

/* Bytes a JSON string holds as they are without looking further: printable
 * ASCII but '"' and '\\' (UTF-8 takes the careful path). */
static const unsigned char plain_ascii[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

void jw_init(json_writer *w) { memset(w, 0, sizeof *w); }

void jw_init_sink(json_writer *w, est_write_fn sink, void *ctx) {
    jw_init(w);
    w->sink = sink;
    w->sink_ctx = ctx;
}

/* With a sink: the buffered text goes to it. */
static void sink_flush(json_writer *w) {
    if (w->len && !w->sink_failed && w->sink(w->sink_ctx, w->buf, w->len) != 0) w->sink_failed = true;
    w->len = 0;
}

/* The rare case of puts_n, out of line: a sink's piece is full (a string
 * longer than a piece goes straight to the sink, leaving in *s and *n what
 * is still to copy), or the buffer must grow. false when it cannot. */
static bool make_room(json_writer *w, const char **s, size_t *n) {
    if (w->no_memory) return false;
    if (w->sink && w->len + *n + 1 > JW_PIECE) {
        sink_flush(w);
        for (; *n >= JW_PIECE; *s += JW_PIECE - 1, *n -= JW_PIECE - 1)
            if (!w->sink_failed && w->sink(w->sink_ctx, *s, JW_PIECE - 1) != 0) w->sink_failed = true;
    }
    if (w->len + *n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : JW_PIECE;
        while (cap < w->len + *n + 1) cap *= 2;
        char *grown = realloc(w->buf, cap);
        if (!grown) {
            w->no_memory = true;
            return false;
        }
        w->buf = grown;
        w->cap = cap;
    }
    return true;
}

/* Appends n bytes; the common case is a comparison and a copy. The buffer
 * always keeps a byte for jw_finish's terminator. */
static inline void puts_n(json_writer *w, const char *s, size_t n) {
    size_t end = w->len + n + 1;
    if ((end > w->cap || (w->sink && end > JW_PIECE)) && !make_room(w, &s, &n)) return;
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static inline void put(json_writer *w, char c) { puts_n(w, &c, 1); }

/* Where the next n bytes go (n below a piece), with the terminator's byte
 * kept; NULL when there is no room. The caller writes them and adds n to
 * w->len. */
static inline char *room(json_writer *w, size_t n) {
    size_t end = w->len + n + 1;
    if (end > w->cap || (w->sink && end > JW_PIECE)) {
        const char *unused = NULL;
        if (!make_room(w, &unused, &n)) return NULL;
    }
    return w->buf + w->len;
}

static inline void put_str(json_writer *w, const char *s) { puts_n(w, s, strlen(s)); }

static void tabs(json_writer *w, int n) {
    static const char many[JW_MAX_DEPTH + 1] = "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t";
    puts_n(w, many, (size_t)(n < JW_MAX_DEPTH ? n : JW_MAX_DEPTH));
}

/* Whether the 8 bytes of x are all plain ASCII (plain_ascii): none below
 * 0x20, none at or above 0x80, no '"' and no '\\' (the zero-byte tests of
 * Hacker's Delight, exact for the word as a whole). */
static inline bool plain_word(uint64_t x) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = x ^ (ones * '"'), backslash = x ^ (ones * '\\');
    uint64_t bad = (x - ones * 0x20) | (quote - ones) | (backslash - ones);
    bad &= ~x & ~quote & ~backslash; /* a byte's high bit set by a borrow */
    return ((bad | x) & highs) == 0;
}

/* plain_length for a key, which is short: a byte at a time, with no call. */
static inline size_t plain_key_length(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0;
    while (plain_ascii[p[n]] && n < JW_PIECE / 4) n++;
    return p[n] == '\0' ? n : SIZE_MAX;
}

/* The length of s when every byte of it is plain ASCII (plain_ascii) and it
 * is short enough to go through room(); SIZE_MAX otherwise. */
static inline size_t plain_length(const char *s) {
    size_t n = strlen(s);
    if (n >= JW_PIECE / 4) return SIZE_MAX;
    size_t i = 0;
    for (uint64_t x; i + 8 <= n; i += 8) {
        memcpy(&x, s + i, 8);
        if (!plain_word(x)) return SIZE_MAX;
    }
    for (; i < n; i++)
        if (!plain_ascii[(unsigned char)s[i]]) return SIZE_MAX;
    return n;
}

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no
 * overlong forms, no surrogates, nothing past U+10FFFF), or 0. */
static size_t utf8_sequence(const unsigned char *p) {
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!n) return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f) || (c == 0xf0 && p[1] < 0x90) ||
        (c == 0xf4 && p[1] > 0x8f))
        return 0;
    return n;
}

/* The length of the text at p that a JSON string holds as it is: printable
 * ASCII but '"' and '\\', and well-formed UTF-8. */
static size_t plain_run(const unsigned char *p) {
    size_t run = 0;
    for (;;) {
        unsigned char c = p[run];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            run++;
            continue;
        }
        size_t n = c >= 0x80 ? utf8_sequence(p + run) : 0;
        if (!n) return run;
        run += n;
    }
}

/* A JSON string. Model names are the file's bytes: a byte that is not part
 * of well-formed UTF-8 becomes U+FFFD, so that the output is always valid
 * JSON text (RFC 8259 requires UTF-8). */
static void quoted(json_writer *w, const char *s) {
    static const char hex[] = "0123456789abcdef";
    size_t n = plain_length(s);
    if (n != SIZE_MAX) { /* most names and every key: copied at once */
        char *out = room(w, n + 2);
        if (!out) return;
        out[0] = '"';
        memcpy(out + 1, s, n);
        out[n + 1] = '"';
        w->len += n + 2;
        return;
    }
    put(w, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const unsigned char c = *p;
        if (c == '"' || c == '\\') {
            put(w, '\\');
            put(w, (char)c);
        } else if (c >= 0x80 && !utf8_sequence(p)) {
            put_str(w, "\\ufffd");
        } else if (c >= 0x20) {
            size_t run = plain_run(p); /* copied at once */
            puts_n(w, (const char *)p, run);
            p += run - 1;
        } else {
            const char *short_form = c == '\b' ? "\\b" : c == '\f' ? "\\f" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                                   : c == '\t' ? "\\t" : NULL;
            if (short_form) {
                put_str(w, short_form);
            } else {
                char u[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], '\0'};
                put_str(w, u);
            }
        }
    }
    put(w, '"');
}

/* The separator and key before a value at the current level. */
static void before_value(json_writer *w, const char *key) {
    if (w->depth == 0) return;
    int d = w->depth - 1;
    bool first = w->count[d]++ == 0;
    if (w->in_array[d]) {
        if (!first) put_str(w, ", ");
        return;
    }
    if (!key) key = "";
    size_t n = plain_key_length(key);
    if (n != SIZE_MAX && w->depth <= JW_MAX_DEPTH) { /* the line's start in one copy */
        size_t lead = first ? 0 : 2, len = lead + (size_t)w->depth + n + 4;
        char *out = room(w, len);
        if (!out) return;
        if (lead) out[0] = ',', out[1] = '\n';
        out += lead;
        for (int level = 0; level < w->depth; level++) *out++ = '\t';
        out[0] = '"';
        memcpy(out + 1, key, n);
        memcpy(out + 1 + n, "\":\t", 3);
        w->len += len;
        return;
    }
    if (!first) put_str(w, ",\n");
    tabs(w, w->depth);
    quoted(w, key);
    put_str(w, ":\t");
}

static void open_level(json_writer *w, const char *key, bool array) {
    before_value(w, key);
    put(w, array ? '[' : '{');
    if (!array) put(w, '\n');
    if (w->depth == JW_MAX_DEPTH) {
        w->failed = true;
        return;
    }
    w->in_array[w->depth] = array;
    w->count[w->depth] = 0;
    w->depth++;
}

static void close_level(json_writer *w, bool array) {
    if (w->depth == 0 || w->in_array[w->depth - 1] != array) {
        w->failed = true;
        return;
    }
    bool empty = w->count[w->depth - 1] == 0;
    w->depth--;
    if (array) {
        put(w, ']');
        return;
    }
    if (!empty) put(w, '\n');
    tabs(w, w->depth);
    put(w, '}');
}

void jw_begin_object(json_writer *w, const char *key) { open_level(w, key, false); }
void jw_end_object(json_writer *w) { close_level(w, false); }
void jw_begin_array(json_writer *w, const char *key) { open_level(w, key, true); }
void jw_end_array(json_writer *w) { close_level(w, true); }

void jw_string(json_writer *w, const char *key, const char *s) {
    before_value(w, key);
    if (s) quoted(w, s);
    else put_str(w, "null");
}

/* v's decimal digits, with a minus sign when negative, as printf's %lld
 * and %llu write them. */
static void put_integer(json_writer *w, const char *key, uint64_t magnitude, bool negative) {
    char buf[24], *p = buf + sizeof buf;
    do *--p = (char)('0' + magnitude % 10);
    while ((magnitude /= 10) != 0);
    if (negative) *--p = '-';
    before_value(w, key);
    puts_n(w, p, (size_t)(buf + sizeof buf - p));
}

void jw_u64(json_writer *w, const char *key, uint64_t v) { put_integer(w, key, v, false); }

void jw_i64(json_writer *w, const char *key, int64_t v) {
    put_integer(w, key, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, v < 0);
}

void jw_double(json_writer *w, const char *key, double v) {
    char buf[32];
    if (isfinite(v)) snprintf(buf, sizeof buf, "%.17g", v);
    before_value(w, key);
    put_str(w, isfinite(v) ? buf : "null");
}

void jw_bool(json_writer *w, const char *key, bool v) {
    before_value(w, key);
    put_str(w, v ? "true" : "false");
}

void jw_null(json_writer *w, const char *key) {
    before_value(w, key);
    put_str(w, "null");
}

est_status jw_finish(json_writer *w, char **out, est_error *err) {
    put(w, '\n');
    if (!w->no_memory) w->buf[w->len] = '\0'; /* puts_n keeps a byte for it */
    if (w->sink && !w->no_memory) sink_flush(w);
    est_status st = w->no_memory ? est__fail(err, EST_ENOMEM, "out of memory")
                    : w->failed || w->depth != 0 ? est__fail(err, EST_EINVAL, "JSON writer: unbalanced nesting")
                    : w->sink_failed             ? est__fail(err, EST_EIO, "JSON writer: the output could not be written")
                                                 : EST_OK;
    if (st != EST_OK || w->sink) {
        free(w->buf);
        w->buf = NULL;
    }
    *out = w->buf;
    w->buf = NULL;
    return st;
}
