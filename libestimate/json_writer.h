/*
 * json_writer.h: JSON written as it is produced, without a tree, into a
 * growing string (the reports of est_report_to_json and est_sweep_to_json),
 * or through a sink that takes each 64 KiB piece (est_report_write_json).
 *
 * Numbers are 64-bit integers printed exactly (cJSON's doubles round above
 * 2^53) or finite doubles; strings are escaped as JSON requires. The layout
 * is cJSON_Print's (a tab per level, "key":<tab>value, arrays on one line),
 * so that reports read the same whichever writer made them.
 *
 *     json_writer w;
 *     jw_init(&w);
 *     jw_begin_object(&w, NULL);         // the root: no key
 *     jw_string(&w, "model", "a.onnx");
 *     jw_begin_array(&w, "shape");
 *     jw_u64(&w, NULL, 32);              // inside an array: no key
 *     jw_end_array(&w);
 *     jw_end_object(&w);
 *     char *text;
 *     est_status st = jw_finish(&w, &text);  // the caller frees text
 *
 * Inside an object every value takes a key; inside an array, or at the top
 * level, the key is NULL. After an allocation failure the writer only
 * records it; jw_finish reports it once.
 */
#ifndef EST_JSON_WRITER_H
#define EST_JSON_WRITER_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "estimate.h"

#define JW_MAX_DEPTH 32

typedef struct json_writer {
    char *buf;                      /* the text so far (with a sink: not yet sunk), malloc'd */
    size_t len, cap;                /* with a sink, cap stays at one piece */
    est_write_fn sink;              /* NULL: keep the whole text */
    void *sink_ctx;
    bool sink_failed;               /* the sink returned nonzero */
    int depth;                      /* open objects and arrays, at most JW_MAX_DEPTH */
    bool in_array[JW_MAX_DEPTH];    /* per level: an array, else an object */
    uint32_t count[JW_MAX_DEPTH];   /* per level: values written so far */
    bool no_memory;                 /* an allocation failed */
    bool failed;                    /* nesting too deep or unbalanced */
} json_writer;

void jw_init(json_writer *w);
/* A writer that hands its text to sink(ctx, ...) in pieces of 64 KiB at
 * most; jw_finish then hands over the rest and returns no text. */
void jw_init_sink(json_writer *w, est_write_fn sink, void *ctx);

/* The writers proper take the key's length as well; the macros below give
 * it. A key the compiler knows (a string literal: the program's own names,
 * plain ASCII) has its length counted when compiling and goes out as it is;
 * any other key is JW_KEY_UNCHECKED: the writer measures it and escapes it
 * where it must. */
#define JW_KEY_UNCHECKED SIZE_MAX
void jw__begin_object(json_writer *w, const char *key, size_t key_len);
void jw__begin_array(json_writer *w, const char *key, size_t key_len);
void jw__string(json_writer *w, const char *key, size_t key_len, const char *s);
void jw__u64(json_writer *w, const char *key, size_t key_len, uint64_t v);
void jw__i64(json_writer *w, const char *key, size_t key_len, int64_t v);
void jw__double(json_writer *w, const char *key, size_t key_len, double v);
void jw__bool(json_writer *w, const char *key, size_t key_len, bool v);
void jw__null(json_writer *w, const char *key, size_t key_len);
void jw__i64_array(json_writer *w, const char *key, size_t key_len, const int64_t *v, int n);

static inline size_t jw__literal_len(const char *key) { return key ? strlen(key) : 0; }
#if defined(__GNUC__)
#define JW_KEY_LEN(key) (__builtin_constant_p(key) ? jw__literal_len(key) : JW_KEY_UNCHECKED)
#else
#define JW_KEY_LEN(key) JW_KEY_UNCHECKED
#endif

#define jw_begin_object(w, key) jw__begin_object(w, key, JW_KEY_LEN(key))
void jw_end_object(json_writer *w);
#define jw_begin_array(w, key) jw__begin_array(w, key, JW_KEY_LEN(key))
void jw_end_array(json_writer *w);
#define jw_string(w, key, s) jw__string(w, key, JW_KEY_LEN(key), s) /* s NULL writes null */
#define jw_u64(w, key, v) jw__u64(w, key, JW_KEY_LEN(key), v)
#define jw_i64(w, key, v) jw__i64(w, key, JW_KEY_LEN(key), v)
#define jw_double(w, key, v) jw__double(w, key, JW_KEY_LEN(key), v) /* not finite: null */
#define jw_bool(w, key, v) jw__bool(w, key, JW_KEY_LEN(key), v)
#define jw_null(w, key) jw__null(w, key, JW_KEY_LEN(key))
/* An array of n integers (none when n <= 0), as jw_begin_array, jw_i64
 * for each and jw_end_array write it (a shape's dims), in one call. */
#define jw_i64_array(w, key, v, n) jw__i64_array(w, key, JW_KEY_LEN(key), v, n)
/* Ends the document with a newline. EST_OK with *out the text (the caller
 * frees it; NULL with a sink), or EST_ENOMEM / EST_EINVAL (nesting left
 * open or too deep) / EST_EIO (the sink failed) with the text freed and
 * *out NULL; err, when not NULL, says which. */
est_status jw_finish(json_writer *w, char **out, est_error *err);

#endif
