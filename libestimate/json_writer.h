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

#include "estimate.h"

#define JW_MAX_DEPTH 32

typedef struct json_writer {
    char *buf;                      /* the text so far (with a sink: not yet sunk), malloc'd */
    size_t len, cap;
    est_write_fn sink;              /* NULL: keep the whole text */
    void *sink_ctx;
    bool sink_failed;               /* the sink returned nonzero */
    int depth;                      /* open objects and arrays */
    bool in_array[JW_MAX_DEPTH];    /* per level: an array, else an object */
    uint32_t count[JW_MAX_DEPTH];   /* per level: values written so far */
    bool no_memory;                 /* an allocation failed */
    bool failed;                    /* nesting too deep or unbalanced */
} json_writer;

void jw_init(json_writer *w);
/* A writer that hands its text to sink(ctx, ...) in pieces of 64 KiB at
 * most; jw_finish then hands over the rest and returns no text. */
void jw_init_sink(json_writer *w, est_write_fn sink, void *ctx);
void jw_begin_object(json_writer *w, const char *key);
void jw_end_object(json_writer *w);
void jw_begin_array(json_writer *w, const char *key);
void jw_end_array(json_writer *w);
void jw_string(json_writer *w, const char *key, const char *s); /* NULL writes null */
void jw_u64(json_writer *w, const char *key, uint64_t v);
void jw_i64(json_writer *w, const char *key, int64_t v);
void jw_double(json_writer *w, const char *key, double v);      /* not finite: null */
void jw_bool(json_writer *w, const char *key, bool v);
void jw_null(json_writer *w, const char *key);
/* Ends the document with a newline. EST_OK with *out the text (the caller
 * frees it; NULL with a sink), or EST_ENOMEM / EST_EINVAL (nesting left
 * open or too deep) / EST_EIO (the sink failed) with the text freed and
 * *out NULL; err, when not NULL, says which. */
est_status jw_finish(json_writer *w, char **out, est_error *err);

#endif
