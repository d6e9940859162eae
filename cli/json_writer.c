/* json_writer.c: see json_writer.h. */
#include "json_writer.h"

#include <math.h>
#include <string.h>

void jw_init(json_writer *w, FILE *f) { *w = (json_writer){.f = f}; }

static void tabs(json_writer *w, int n) {
    for (int i = 0; i < n; i++) putc('\t', w->f);
}

static void quoted(json_writer *w, const char *s) {
    static const char hex[] = "0123456789abcdef";
    putc('"', w->f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const unsigned char c = *p;
        if (c == '"' || c == '\\') {
            putc('\\', w->f);
            putc(c, w->f);
        } else if (c >= 0x20) {
            putc(c, w->f);
        } else {
            const char *short_form = c == '\b' ? "\\b" : c == '\f' ? "\\f" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                                   : c == '\t' ? "\\t" : NULL;
            if (short_form) fputs(short_form, w->f);
            else fprintf(w->f, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
        }
    }
    putc('"', w->f);
}

/* The separator and key before a value at the current level. */
static void before_value(json_writer *w, const char *key) {
    if (w->depth == 0) return;
    int d = w->depth - 1;
    bool first = w->count[d]++ == 0;
    if (w->in_array[d]) {
        if (!first) fputs(", ", w->f);
        return;
    }
    if (!first) fputs(",\n", w->f);
    tabs(w, w->depth);
    quoted(w, key ? key : "");
    fputs(":\t", w->f);
}

static void open_level(json_writer *w, const char *key, bool array) {
    before_value(w, key);
    putc(array ? '[' : '{', w->f);
    if (!array) putc('\n', w->f);
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
        putc(']', w->f);
        return;
    }
    if (!empty) putc('\n', w->f);
    tabs(w, w->depth);
    putc('}', w->f);
}

void jw_begin_object(json_writer *w, const char *key) { open_level(w, key, false); }
void jw_end_object(json_writer *w) { close_level(w, false); }
void jw_begin_array(json_writer *w, const char *key) { open_level(w, key, true); }
void jw_end_array(json_writer *w) { close_level(w, true); }

void jw_string(json_writer *w, const char *key, const char *s) {
    before_value(w, key);
    if (s) quoted(w, s);
    else fputs("null", w->f);
}

void jw_u64(json_writer *w, const char *key, uint64_t v) {
    char buf[24], *p = buf + sizeof buf;
    *--p = '\0';
    do *--p = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    before_value(w, key);
    fputs(p, w->f);
}

void jw_i64(json_writer *w, const char *key, int64_t v) {
    if (v >= 0) {
        jw_u64(w, key, (uint64_t)v);
        return;
    }
    before_value(w, key);
    fprintf(w->f, "%lld", (long long)v);
}

void jw_double(json_writer *w, const char *key, double v) {
    before_value(w, key);
    if (!isfinite(v)) fputs("null", w->f);
    else fprintf(w->f, "%.17g", v);
}

void jw_bool(json_writer *w, const char *key, bool v) {
    before_value(w, key);
    fputs(v ? "true" : "false", w->f);
}

void jw_null(json_writer *w, const char *key) {
    before_value(w, key);
    fputs("null", w->f);
}

bool jw_finish(json_writer *w) {
    putc('\n', w->f);
    return w->failed || w->depth != 0 || ferror(w->f);
}
