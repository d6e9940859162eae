/* output.h: the three renderings of a report (table, json, csv). */
#ifndef MEMEST_OUTPUT_H
#define MEMEST_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>

#include "estimate.h"

typedef enum { FORMAT_TABLE, FORMAT_JSON, FORMAT_CSV } output_format;

/* --gpu / --gpu-memory and --reserve (docs/capacity.md). */
typedef struct fit_info {
    const char *gpu;        /* the table's name, or NULL for --gpu-memory */
    uint64_t gpu_bytes;
    uint64_t reserve_bytes;
} fit_info;

/* The library's est_fit of it (gpu_bytes, reserve_bytes); the three below
 * are est_fit_usable, est_fit_headroom and est_fit_ok on it. */
est_fit fit_of(const fit_info *fit);
/* gpu memory - reserve, or 0 when the reserve takes it all. */
uint64_t fit_usable(const fit_info *fit);
/* usable - peak: negative when it does not fit. */
int64_t fit_headroom(const fit_info *fit, uint64_t peak);

typedef struct output_opts {
    const char *model;      /* path as the user gave it */
    bool all_layers;        /* table: also list shape-only layers */
    const fit_info *fit;    /* NULL unless --gpu or --gpu-memory */
    const est_options *opt;           /* the command line's: its --checkpoint,
                                         --trainable / --freeze and --grad-accum
                                         as given */
    bool timeline;                    /* json: the "timeline" array (--timeline) */
    size_t top;                       /* table: the largest N live at the peak (--top) */
    int64_t depth;                    /* --depth N: the layers rolled up by module; 0: not */
    const est_time *time;             /* the step's time (--gpu NAME); NULL: none */
} output_opts;

/* modules.c: --depth N, the rows of est_modules_rollup (nothing when it
 * fails). `time` may be NULL (no time columns). */
void print_modules(FILE *f, const est_report *r, int64_t depth, const est_time *time);
void csv_modules(FILE *f, const est_report *r, int64_t depth, const est_time *time);
/* output_time.c: the step's time. */
const char *human_time(char *buf, size_t n, double s); /* "1.23 ms"; "-" for 0 */
void print_time(FILE *f, const est_time *t);            /* the table's block */
void csv_time(FILE *f, const est_time *t);              /* the time rows */
/* plot.c: --plot, the step as an SVG picture (html: inside a page); 1
 * when the report has no timeline or writing failed. */
int write_plot(FILE *f, const est_report *r, const output_opts *o, bool html);
/* A CSV field, quoted where it must be. */
void csv_field(FILE *f, const char *s);

/* "every=2" or "layer1,layer2" (writes into buf and returns it); "" when
 * there is no checkpointing. */
const char *checkpoint_string(char *buf, size_t n, const est_checkpoint *ck);

/* Each returns 0, 1 when writing failed, or 2 when the report could not
 * be made (the reason printed). */
int print_table(FILE *f, const est_report *r, const output_opts *o);
int print_csv(FILE *f, const est_report *r, const output_opts *o);
int print_json(FILE *f, const est_report *r, const output_opts *o);
/* The JSON report (est_report_to_json), with --max-batch's answer when mb
 * is not NULL (cap: the search's). */
int print_json_doc(FILE *f, const est_report *r, const output_opts *o, const est_max_batch_result *mb, int64_t cap);
/* The step fits: its peak is within the usable memory, and the caching
 * allocator's replay under that limit did not run out (fragmentation). */
bool fit_ok(const fit_info *fit, uint64_t peak, const est_totals *t);
/* The table's lines on the fit: "FITS yes, headroom ..." */
void print_fit_lines(FILE *f, const fit_info *fit, uint64_t peak, const est_totals *t);

/* "1.50 MiB"; writes into buf and returns it. */
const char *human_bytes(char *buf, size_t n, uint64_t bytes);

/* output_step.c: what is live at the peak, when the estimate recorded it
 * (est_options.timeline). */
void print_live(FILE *f, const est_report *r, size_t top);        /* the table's largest N */
/* "3.63G" (decimal units; "-" for 0); writes into buf and returns it. */
const char *human_count(char *buf, size_t n, uint64_t v);
/* "1x3x224x224" (or "scalar"); writes into buf and returns it. */
const char *shape_string(char *buf, size_t n, const est_tensor_info *t);
/* "2x3x4" (also "" for rank 0, which shape_string writes "scalar"). */
const char *dims_string(char *buf, size_t n, int rank, const int64_t *shape);

#endif
