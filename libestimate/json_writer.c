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

/* The rare case of puts_n and room, out of line: a sink's piece is full (a
 * string longer than a piece goes straight to the sink, leaving in *s and
 * *n what is still to copy), or the buffer must grow. With a sink the
 * buffer stays one piece, so that end > cap is the one test for both.
 * false when it cannot. */
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
    if (w->len + n + 1 > w->cap && !make_room(w, &s, &n)) return;
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

/* Where the next n bytes go (n below half a piece), with the
 * terminator's byte kept; NULL when there is no room. The caller writes at
 * most n bytes there and adds what it wrote to w->len. */
static inline char *room(json_writer *w, size_t n) {
    if (w->len + n + 1 > w->cap) {
        const char *unused = NULL;
        if (!make_room(w, &unused, &n)) return NULL;
    }
    return w->buf + w->len;
}

static inline void put(json_writer *w, char c) {
    char *out = room(w, 1);
    if (!out) return;
    *out = c;
    w->len++;
}

static inline void put_str(json_writer *w, const char *s) { puts_n(w, s, strlen(s)); }

/* Indentation: a line's tabs are the first `depth` of these, copied as a
 * whole (a fixed-size copy is two stores) over room kept for all of them. */
static const char tab_run[JW_MAX_DEPTH] = "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t";

static inline char *put_tabs(char *out, int depth) {
    memcpy(out, tab_run, sizeof tab_run);
    return out + depth;
}

/* Copies the n bytes of a key or a name: words (the last overlapping the
 * one before) rather than a call, for the short runs most of them are. */
static inline char *put_bytes(char *out, const char *s, size_t n) {
    uint64_t x;
    uint32_t half;
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&x, s + i, 8);
            memcpy(out + i, &x, 8);
        }
        memcpy(&x, s + n - 8, 8);
        memcpy(out + n - 8, &x, 8);
    } else if (n >= 4) {
        memcpy(&half, s, 4);
        memcpy(out, &half, 4);
        memcpy(&half, s + n - 4, 4);
        memcpy(out + n - 4, &half, 4);
    } else {
        for (size_t i = 0; i < n; i++) out[i] = s[i];
    }
    return out + n;
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

/* Whether the 16 bytes at s are all plain ASCII, in a few vector
 * instructions: as signed chars, bytes at or above 0x80 are negative, so
 * one comparison finds them and the control characters. */
static inline bool plain_block(const char *s) {
    typedef signed char bytes16 __attribute__((vector_size(16)));
    bytes16 x;
    memcpy(&x, s, sizeof x);
    bytes16 bad = (x < 0x20) | (x == '"') | (x == '\\');
    uint64_t half[2];
    memcpy(half, &bad, sizeof half);
    return (half[0] | half[1]) == 0;
}

/* Whether the n bytes at s are all plain ASCII: 16 bytes at a time (the
 * last block overlapping the one before), then a word, then bytes. */
static inline bool plain_bytes(const char *s, size_t n) {
    uint64_t x;
    if (n >= 16) {
        for (size_t i = 0; i + 16 < n; i += 16)
            if (!plain_block(s + i)) return false;
        return plain_block(s + n - 16);
    }
    if (n >= 8) {
        memcpy(&x, s, 8);
        if (!plain_word(x)) return false;
        memcpy(&x, s + n - 8, 8);
        return plain_word(x);
    }
    for (size_t i = 0; i < n; i++)
        if (!plain_ascii[(unsigned char)s[i]]) return false;
    return true;
}

/* Copies the n bytes at s to out as put_bytes does, checking them as
 * plain_bytes does in the same pass: false, with out partly written, when
 * one is not plain. */
static inline bool copy_plain(char *out, const char *s, size_t n) {
    uint64_t x;
    if (n >= 16) {
        for (size_t i = 0;; i += 16) {
            size_t at = i + 16 < n ? i : n - 16; /* the last block overlaps the one before */
            if (!plain_block(s + at)) return false;
            memcpy(out + at, s + at, 16);
            if (at == n - 16) return true;
        }
    }
    if (n >= 8) {
        memcpy(&x, s, 8);
        if (!plain_word(x)) return false;
        memcpy(out, &x, 8);
        memcpy(&x, s + n - 8, 8);
        memcpy(out + n - 8, &x, 8);
        return plain_word(x);
    }
    for (size_t i = 0; i < n; i++) {
        if (!plain_ascii[(unsigned char)s[i]]) return false;
        out[i] = s[i];
    }
    return true;
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

/* A JSON string, the careful way. Model names are the file's bytes: a byte
 * that is not part of well-formed UTF-8 becomes U+FFFD, so that the output
 * is always valid JSON text (RFC 8259 requires UTF-8). */
static void escaped(json_writer *w, const char *s) {
    static const char hex[] = "0123456789abcdef";
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

/* A key that needs escaping (or is long), after its separator: written the
 * careful way, then the room for the value as begin_value gives it. */
static char *escaped_key(json_writer *w, const char *key, bool first, size_t value_max) {
    if (!first) put_str(w, ",\n");
    puts_n(w, tab_run, (size_t)w->depth);
    escaped(w, key);
    put_str(w, ":\t");
    return room(w, value_max);
}

/* Writes what goes before a value at the current level: the separator and,
 * inside an object, the indented key. Returns where the value goes
 * (w->buf + w->len), with room for value_max bytes, or NULL when there is
 * none; the caller writes the value there and adds its length to w->len.
 * The common case, a plain key, takes one room() for the whole line; it
 * is inlined into each writer, whose values are written the same way. */
__attribute__((always_inline)) static inline char *begin_value(json_writer *w, const char *key, size_t key_len,
                                                               size_t value_max) {
    if (w->depth == 0) return room(w, value_max);
    int d = w->depth - 1;
    bool first = w->count[d]++ == 0;
    if (w->in_array[d]) {
        char *out = room(w, 2 + value_max);
        if (out && !first) {
            memcpy(out, ", ", 2);
            w->len += 2;
            out += 2;
        }
        return out;
    }
    if (!key) key = "";
    bool unchecked = key_len == JW_KEY_UNCHECKED; /* not a literal */
    if (unchecked) key_len = strlen(key);
    if (key_len >= JW_PIECE / 4 || (unchecked && !plain_bytes(key, key_len)))
        return escaped_key(w, key, first, value_max);
    char *start = room(w, 2 + sizeof tab_run + key_len + 4 + value_max), *out = start;
    if (!out) return NULL;
    if (!first) memcpy(out, ",\n", 2), out += 2;
    out = put_tabs(out, w->depth);
    *out++ = '"';
    out = put_bytes(out, key, key_len);
    memcpy(out, "\":\t", 3);
    w->len += (size_t)(out + 3 - start);
    return out + 3;
}

/* A value of n bytes written as they are. */
__attribute__((always_inline)) static inline void put_value(json_writer *w, const char *key, size_t key_len,
                                                            const char *text, size_t n) {
    char *out = begin_value(w, key, key_len, n);
    if (!out) return;
    put_bytes(out, text, n);
    w->len += n;
}

__attribute__((always_inline)) static inline void open_level(json_writer *w, const char *key, size_t key_len,
                                                             bool array) {
    put_value(w, key, key_len, array ? "[" : "{\n", array ? 1 : 2);
    if (w->depth == JW_MAX_DEPTH) {
        w->failed = true;
        return;
    }
    w->in_array[w->depth] = array;
    w->count[w->depth] = 0;
    w->depth++;
}

__attribute__((always_inline)) static inline void close_level(json_writer *w, bool array) {
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
    char *start = room(w, 1 + sizeof tab_run + 1), *out = start;
    if (!out) return;
    if (!empty) *out++ = '\n';
    out = put_tabs(out, w->depth);
    *out++ = '}';
    w->len += (size_t)(out - start);
}

void jw__begin_object(json_writer *w, const char *key, size_t key_len) { open_level(w, key, key_len, false); }
void jw_end_object(json_writer *w) { close_level(w, false); }
void jw__begin_array(json_writer *w, const char *key, size_t key_len) { open_level(w, key, key_len, true); }
void jw_end_array(json_writer *w) { close_level(w, true); }

void jw__string(json_writer *w, const char *key, size_t key_len, const char *s) {
    if (!s) {
        put_value(w, key, key_len, "null", 4);
        return;
    }
    size_t n = strlen(s);
    bool short_enough = n < JW_PIECE / 4; /* for one room() */
    char *out = begin_value(w, key, key_len, short_enough ? n + 2 : 0);
    if (!out) return;
    if (short_enough && copy_plain(out + 1, s, n)) { /* most names: copied at once */
        out[0] = '"';
        out[n + 1] = '"';
        w->len += n + 2;
        return;
    }
    escaped(w, s); /* over what copy_plain left, past w->len */
}

/* Two decimal digits for each value below 100. */
static const char digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* v's decimal digits at out, as printf's %llu writes them (20 at most);
 * returns their end. */
__attribute__((always_inline)) static inline char *put_digits(char *out, uint64_t v) {
    size_t n = 1;
    for (uint64_t t = v; t >= 10 && n < 20; t /= 10) n++;
    char *end = out + n, *p = end;
    for (; v >= 100; v /= 100) {
        p -= 2;
        memcpy(p, digit_pairs + 2 * (v % 100), 2);
    }
    if (v >= 10) {
        p -= 2;
        memcpy(p, digit_pairs + 2 * v, 2);
    } else {
        *--p = (char)('0' + v);
    }
    return end;
}

/* v's sign and digits at out, as %lld writes them; returns their end. */
__attribute__((always_inline)) static inline char *put_signed(char *out, int64_t v) {
    if (v < 0) *out++ = '-';
    return put_digits(out, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
}

void jw__u64(json_writer *w, const char *key, size_t key_len, uint64_t v) {
    char *out = begin_value(w, key, key_len, 20);
    if (out) w->len += (size_t)(put_digits(out, v) - out);
}

void jw__i64(json_writer *w, const char *key, size_t key_len, int64_t v) {
    char *start = begin_value(w, key, key_len, 21);
    if (start) w->len += (size_t)(put_signed(start, v) - start);
}

/* Arrays longer than this take the general path, so that one room() holds
 * the whole array. */
#define JW_INLINE_ARRAY 64

void jw__i64_array(json_writer *w, const char *key, size_t key_len, const int64_t *v, int n) {
    if (n > JW_INLINE_ARRAY || w->depth == JW_MAX_DEPTH) { /* the latter fails as jw_begin_array does */
        jw__begin_array(w, key, key_len);
        for (int i = 0; i < n; i++) jw__i64(w, NULL, 0, v[i]);
        jw_end_array(w);
        return;
    }
    size_t most = 2 + (n > 0 ? (size_t)n : 0) * 23; /* each "-", 20 digits and ", " */
    char *start = begin_value(w, key, key_len, most), *out = start;
    if (!out) return;
    *out++ = '[';
    for (int i = 0; i < n; i++) {
        if (i) memcpy(out, ", ", 2), out += 2;
        out = put_signed(out, v[i]);
    }
    *out++ = ']';
    w->len += (size_t)(out - start);
}

void jw__double(json_writer *w, const char *key, size_t key_len, double v) {
    char buf[32];
    if (!isfinite(v)) {
        put_value(w, key, key_len, "null", 4);
        return;
    }
    if (fabs(v) < 0x1p53 && v == (double)(int64_t)v) { /* an integer, 0 most often: %.17g's digits */
        char *start = begin_value(w, key, key_len, 21), *out = start;
        if (!out) return;
        if (signbit(v)) *out++ = '-'; /* -0 too */
        w->len += (size_t)(put_digits(out, (uint64_t)fabs(v)) - start);
        return;
    }
    int n = snprintf(buf, sizeof buf, "%.17g", v);
    put_value(w, key, key_len, buf, (size_t)n);
}

void jw__bool(json_writer *w, const char *key, size_t key_len, bool v) {
    put_value(w, key, key_len, v ? "true" : "false", v ? 4 : 5);
}

void jw__null(json_writer *w, const char *key, size_t key_len) { put_value(w, key, key_len, "null", 4); }

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
