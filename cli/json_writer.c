/* json_writer.c: see json_writer.h. */
#include "json_writer.h"

#include <math.h>
#include <string.h>

void jw_init(json_writer *w, FILE *f) {
    w->f = f;
    w->len = 0;
    w->depth = 0;
    w->failed = false;
}

static void flush(json_writer *w) {
    if (w->len && fwrite(w->buf, 1, w->len, w->f) != w->len) w->failed = true;
    w->len = 0;
}

static void put(json_writer *w, char c) {
    if (w->len == sizeof w->buf) flush(w);
    w->buf[w->len++] = c;
}

static void puts_n(json_writer *w, const char *s, size_t n) {
    if (w->len + n > sizeof w->buf) {
        flush(w);
        if (n > sizeof w->buf) {
            if (fwrite(s, 1, n, w->f) != n) w->failed = true;
            return;
        }
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static void put_str(json_writer *w, const char *s) { puts_n(w, s, strlen(s)); }

static void tabs(json_writer *w, int n) {
    for (int i = 0; i < n; i++) put(w, '\t');
}

static void quoted(json_writer *w, const char *s) {
    static const char hex[] = "0123456789abcdef";
    put(w, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const unsigned char c = *p;
        if (c == '"' || c == '\\') {
            put(w, '\\');
            put(w, (char)c);
        } else if (c >= 0x20) {
            size_t run = 1; /* the plain characters from here, copied at once */
            while (p[run] >= 0x20 && p[run] != '"' && p[run] != '\\') run++;
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
    if (!first) put_str(w, ",\n");
    tabs(w, w->depth);
    quoted(w, key ? key : "");
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

void jw_u64(json_writer *w, const char *key, uint64_t v) {
    char buf[24], *p = buf + sizeof buf;
    *--p = '\0';
    do *--p = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    before_value(w, key);
    put_str(w, p);
}

void jw_i64(json_writer *w, const char *key, int64_t v) {
    if (v >= 0) {
        jw_u64(w, key, (uint64_t)v);
        return;
    }
    char buf[24];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    before_value(w, key);
    put_str(w, buf);
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

bool jw_finish(json_writer *w) {
    put(w, '\n');
    flush(w);
    return w->failed || w->depth != 0 || ferror(w->f);
}
