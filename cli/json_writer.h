/*
 * json_writer.h: JSON written as it is produced, without a tree.
 *
 * Numbers are 64-bit integers printed exactly (cJSON's doubles round above
 * 2^53) or finite doubles; strings are escaped as JSON requires. The layout
 * is cJSON_Print's (a tab per level, "key":<tab>value, arrays on one line),
 * so that reports read the same whichever writer made them.
 *
 *     json_writer w;
 *     jw_init(&w, stdout);
 *     jw_begin_object(&w, NULL);         // the root: no key
 *     jw_string(&w, "model", "a.onnx");
 *     jw_begin_array(&w, "shape");
 *     jw_u64(&w, NULL, 32);              // inside an array: no key
 *     jw_end_array(&w);
 *     jw_end_object(&w);
 *     bool failed = jw_finish(&w);       // a write error, or unbalanced nesting
 *
 * Inside an object every value takes a key; inside an array, or at the top
 * level, the key is NULL. Output is gathered in the writer (64 KiB, so keep
 * it off small stacks: static or heap) and handed to the stream in blocks.
 */
#ifndef MEMEST_JSON_WRITER_H
#define MEMEST_JSON_WRITER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JW_MAX_DEPTH 32
#define JW_BUFFER 65536

typedef struct json_writer {
    FILE *f;
    size_t len;                     /* bytes in buf not yet written to f */
    char buf[JW_BUFFER];
    int depth;                      /* open objects and arrays */
    bool in_array[JW_MAX_DEPTH];    /* per level: an array, else an object */
    uint32_t count[JW_MAX_DEPTH];   /* per level: values written so far */
    bool failed;                    /* nesting too deep or unbalanced */
} json_writer;

void jw_init(json_writer *w, FILE *f);
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
/* Ends the document with a newline; true when anything failed (a write
 * error of the stream, or nesting left open). */
bool jw_finish(json_writer *w);

#endif
