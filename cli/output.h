/* output.h: the three renderings of a report (table, json, csv). */
#ifndef MEMEST_OUTPUT_H
#define MEMEST_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>

#include "estimate.h"

typedef enum { FORMAT_TABLE, FORMAT_JSON, FORMAT_CSV } output_format;

typedef struct output_opts {
    const char *model;      /* path as the user gave it */
    bool all_layers;        /* table: also list shape-only layers */
} output_opts;

/* Each returns 0, or 1 when writing failed. */
int print_table(FILE *f, const est_report *r, const output_opts *o);
int print_csv(FILE *f, const est_report *r, const output_opts *o);
int print_json(FILE *f, const est_report *r, const output_opts *o);

/* "1.50 MiB"; writes into buf and returns it. */
const char *human_bytes(char *buf, size_t n, uint64_t bytes);
/* "3.63G" (decimal units; "-" for 0); writes into buf and returns it. */
const char *human_count(char *buf, size_t n, uint64_t v);
/* "1x3x224x224" (or "scalar"); writes into buf and returns it. */
const char *shape_string(char *buf, size_t n, const est_tensor_info *t);

#endif
