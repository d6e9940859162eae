/* output.c: renders an est_report as a table, CSV or JSON. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "numfmt.h"
#include "output.h"
#include "term.h"

/* buf (n bytes) holding text[0..len), cut as snprintf cuts. */
static const char *put(char *buf, size_t n, const char *text, size_t len) {
    fmt_append(buf, n, 0, text, len);
    return buf;
}

/* A unit's text and length. */
typedef struct unit {
    const char *text;
    size_t len;
} unit;

/* human_bytes's text, in text (48 bytes, no NUL); its length. */
static size_t bytes_text(char *text, uint64_t bytes) {
    static const unit units[] = {{" B", 2}, {" KiB", 4}, {" MiB", 4}, {" GiB", 4}, {" TiB", 4}, {" PiB", 4}};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    size_t len = u ? fmt_fixed2(text, v) : fmt_u64(text, bytes);
    memcpy(text + len, units[u].text, units[u].len);
    return len + units[u].len;
}

/* human_count's text, in text (48 bytes, no NUL); its length. */
static size_t count_text(char *text, uint64_t v) {
    static const unit units[] = {{"", 0}, {"K", 1}, {"M", 1}, {"G", 1}, {"T", 1}, {"P", 1}, {"E", 1}};
    if (v == 0) {
        text[0] = '-';
        return 1;
    }
    double x = (double)v;
    int u = 0;
    while (x >= 1000.0 && u < 6) {
        x /= 1000.0;
        u++;
    }
    size_t len = u ? fmt_fixed2(text, x) : fmt_u64(text, v);
    memcpy(text + len, units[u].text, units[u].len);
    return len + units[u].len;
}

const char *human_bytes(char *buf, size_t n, uint64_t bytes) {
    char text[48];
    return put(buf, n, text, bytes_text(text, bytes));
}

const char *human_count(char *buf, size_t n, uint64_t v) {
    char text[48];
    return put(buf, n, text, count_text(text, v));
}

const char *dims_string(char *buf, size_t n, int rank, const int64_t *shape) {
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < rank && used < n; d++) {
        char dim[24];
        size_t len = d ? 1 : 0;
        dim[0] = 'x';
        len += fmt_i64(dim + len, shape[d]);
        used = fmt_append(buf, n, used, dim, len);
    }
    return buf;
}

const char *shape_string(char *buf, size_t n, const est_tensor_info *t) {
    if (t->rank != 0) return dims_string(buf, n, t->rank, t->shape);
    return put(buf, n, "scalar", 6);
}

est_fit fit_of(const fit_info *fit) { return (est_fit){.gpu_bytes = fit->gpu_bytes, .reserve_bytes = fit->reserve_bytes}; }

uint64_t fit_usable(const fit_info *fit) {
    est_fit f = fit_of(fit);
    return est_fit_usable(&f);
}

int64_t fit_headroom(const fit_info *fit, uint64_t peak) {
    est_fit f = fit_of(fit);
    return est_fit_headroom(&f, peak);
}

bool fit_ok(const fit_info *fit, uint64_t peak, const est_totals *t) {
    est_fit f = fit_of(fit);
    return est_fit_ok(&f, peak, t) != 0;
}

void print_fit_lines(FILE *f, const fit_info *fit, uint64_t peak, const est_totals *t) {
    char a[64], b[64], c[64];
    int64_t h = fit_headroom(fit, peak);
    fprintf(f, "  GPU             %s%s%s, reserve %s, usable %s\n", fit->gpu ? fit->gpu : "",
            fit->gpu ? ": " : "", human_bytes(a, sizeof a, fit->gpu_bytes),
            human_bytes(b, sizeof b, fit->reserve_bytes), human_bytes(c, sizeof c, fit_usable(fit)));
    if (h >= 0 && t->out_of_memory)
        fprintf(f, "  FITS            NO: the peak fits (headroom %s), but the caching allocator's\n"
                   "                  segments do not: out of memory during %s%s%s (fragmentation)\n",
                human_bytes(a, sizeof a, (uint64_t)h), est_phase_name(t->oom_phase), t->oom_layer[0] ? ", at " : "",
                t->oom_layer);
    else if (h >= 0) fprintf(f, "  FITS            yes, headroom %s\n", human_bytes(a, sizeof a, (uint64_t)h));
    else fprintf(f, "  FITS            NO, short by %s\n", human_bytes(a, sizeof a, (uint64_t)-(h + 1) + 1));
}

/* shape_string(buf, SHAPE_TEXT, t)'s text, in out (no NUL); its length. */
enum { SHAPE_TEXT = 256 };
static size_t shape_text(char *out, const est_tensor_info *t) {
    if (t->rank == 0) {
        memcpy(out, "scalar", 6);
        return 6;
    }
    size_t len = 0;
    for (int d = 0; d < t->rank && len < SHAPE_TEXT - 1; d++) {
        if (SHAPE_TEXT - 1 - len >= 1 + 24) { /* room for "x" and fmt_i64's 24 bytes: in place, uncut */
            if (d) out[len++] = 'x';
            len += fmt_i64(out + len, t->shape[d]);
            continue;
        }
        char dim[24];
        size_t dim_len = d ? 1 : 0;
        dim[0] = 'x';
        dim_len += fmt_i64(dim + dim_len, t->shape[d]);
        if (dim_len > SHAPE_TEXT - 1 - len) dim_len = SHAPE_TEXT - 1 - len; /* cut as snprintf cuts */
        memcpy(out + len, dim, dim_len);
        len += dim_len;
    }
    return len;
}

/* The layer's output shapes, ", " between; its length. */
static size_t outputs_string(char *buf, size_t n, const est_layer *L) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < L->n_outputs && used + 1 < n; k++) {
        char s[SHAPE_TEXT];
        if (k) used = fmt_append(buf, n, used, ", ", 2);
        used = fmt_append(buf, n, used, s, shape_text(s, &L->outputs[k]));
    }
    return used < n ? used : n - 1;
}

static int name_width(const est_report *r, bool all) {
    int w = 5;
    for (size_t i = 0; i < est_report_layer_count(r); i++) {
        const est_layer *L = est_report_layer(r, i);
        if (L->shape_only && !all) continue;
        int len = (int)strlen(term(L->label));
        if (len > w) w = len;
    }
    return w > 44 ? 44 : w;
}

/* A row of the layer table, written by hand in the columns the header's
 * printf lays out: a million-node model prints a million of them. Also a
 * CSV row's fixed fields (two lists of 1024 and 512 bytes at most). It is
 * written where its text points, ROW_ROOM bytes: a table row straight into
 * the block of rows that one fwrite prints. */
enum { ROW_ROOM = 2048 }; /* the widest table row is under 900 bytes */
typedef struct row {
    char *text;
    size_t len;
} row;

static void row_put(row *r, const char *s, size_t len) {
    memcpy(r->text + r->len, s, len);
    r->len += len;
}

/* Pads with n spaces: up to 64 by copying 64 (a copy of a fixed size is a
 * few stores; the rows' columns need at most 44, and the row has room). */
static void row_pad(row *r, size_t n) {
    static const char spaces[64] = "                                                                ";
    if (n <= sizeof spaces) memcpy(r->text + r->len, spaces, sizeof spaces);
    else memset(r->text + r->len, ' ', n);
    r->len += n;
}

/* s in a column `width` wide: right-aligned as printf's %Ns, left as %-Ns. */
static void row_col(row *r, const char *s, size_t len, size_t width, bool left) {
    size_t pad = len < width ? width - len : 0;
    if (!left) row_pad(r, pad);
    row_put(r, s, len);
    if (left) row_pad(r, pad);
}

/* human_bytes(bytes), or "-" for none when dash. */
static void row_bytes(row *r, uint64_t bytes, size_t width, bool dash) {
    char a[48];
    row_pad(r, 2);
    if (!bytes && dash) row_col(r, "-", 1, width, false);
    else row_col(r, a, bytes_text(a, bytes), width, false);
}

static void row_count(row *r, uint64_t v, size_t width) {
    char a[48];
    row_pad(r, 2);
    row_col(r, a, count_text(a, v), width, false);
}

/* Layer i's row, without the time columns and the newline. A name wider
 * than the column keeps its informative tail. */
static void layer_row(row *r, size_t i, const est_layer *L, size_t w) {
    char num[24], shapes[512];
    r->len = 0;
    row_col(r, num, fmt_u64(num, i), 5, false);
    row_pad(r, 2);
    const char *name = term(L->label), *op = term(L->op);
    size_t len = strlen(name), op_len = strlen(op);
    if (len <= w) row_col(r, name, len, w, true);
    else row_put(r, "...", 3), row_put(r, name + len - (w - 3), w - 3);
    row_pad(r, 2);
    row_col(r, op, op_len < 20 ? op_len : 20, 20, true);
    row_pad(r, 2);
    row_col(r, shapes, outputs_string(shapes, sizeof shapes, L), 24, true);
    row_pad(r, 2);
    row_col(r, num, fmt_u64(num, L->param_count), 10, false);
    row_bytes(r, L->param_bytes, 11, true);
    row_bytes(r, L->output_bytes, 11, false);
    row_count(r, L->flops_forward, 10);
    row_count(r, L->flops_backward, 10);
    row_bytes(r, L->saved_bytes, 11, true);
    row_bytes(r, L->temp_bytes, 10, true);
}

/* Table rows gathered for one fwrite: a call a row cost a tenth of the
 * table's time. */
typedef struct row_block {
    char text[64 << 10];
    size_t len;
} row_block;

static void rows_flush(row_block *b, FILE *f) {
    fwrite(b->text, 1, b->len, f);
    b->len = 0;
}

/* A row at the end of the block, with room for it and its newline. */
static row rows_next(row_block *b, FILE *f) {
    if (sizeof b->text - b->len < ROW_ROOM + 1) rows_flush(b, f);
    return (row){b->text + b->len, 0};
}

/* A layer's label within its block: "q_proj" for "layers.0.self_attn.q_proj". */
static const char *in_block(const char *label, const char *block, size_t len) {
    return len && strncmp(label, block, len) == 0 && label[len] == '.' ? label + len + 1 : label;
}

/* The strategy line and the step's communication, under the memory header. */
static void print_parallel(FILE *f, const est_report *r) {
    const est_parallel *p = est_report_parallel(r);
    if (p->world_size <= 1 && p->strategy == EST_STRATEGY_NONE) return;
    const est_comm *c = est_report_comm(r);
    char a[64];
    fprintf(f, "  per GPU of %lld, ", (long long)p->world_size);
    if (p->strategy != EST_STRATEGY_NONE) fprintf(f, "%s%s", est_strategy_name(p->strategy), p->tp > 1 ? " x " : "");
    if (p->tp > 1) fprintf(f, "tp %lld%s", (long long)p->tp, p->sequence_parallel ? " (sequence parallel)" : "");
    if (p->strategy == EST_STRATEGY_HSDP) fprintf(f, " (shard groups of %lld)", (long long)p->shard_group);
    if (p->strategy == EST_STRATEGY_ZERO1)
        fprintf(f, " (rank %lld's optimizer partition%s)", (long long)p->rank, p->by_rank ? "" : ", the largest");
    if (c->buckets) fprintf(f, ": %" PRIu64 " gradient buckets%s", c->buckets, p->grad_as_bucket_view ? " (the .grad are views)" : "");
    if (c->groups) fprintf(f, ": %" PRIu64 " parameter groups%s", c->groups, p->offload ? ", offloaded to the host" : "");
    fprintf(f, "\n  communication   a step moves");
    bool any = false;
    const struct {
        const char *what;
        uint64_t bytes;
    } moves[] = {{"all-reduce", c->all_reduce_bytes}, {"all-gather", c->all_gather_bytes},
                 {"reduce-scatter", c->reduce_scatter_bytes}, {"broadcast", c->broadcast_bytes}};
    for (size_t k = 0; k < sizeof moves / sizeof *moves; k++)
        if (moves[k].bytes) {
            fprintf(f, "%s %s %s", any ? "," : "", moves[k].what, human_bytes(a, sizeof a, moves[k].bytes));
            any = true;
        }
    fprintf(f, "%s\n", any ? "" : " nothing (one GPU per group)");
    if (c->first_bucket_bytes) { /* a race: both ends of it */
        char held[64], released[64];
        fprintf(f, "  first bucket    %s, the first iteration's, counted as %s\n"
                "                  (a race: the peak is %s held, %s released)\n",
                human_bytes(a, sizeof a, c->first_bucket_bytes),
                c->first_bucket_held_bytes ? "held through the second's backward" : "released at the second's rebuild",
                human_bytes(held, sizeof held, c->peak_first_bucket_held_bytes),
                human_bytes(released, sizeof released, c->peak_first_bucket_released_bytes));
    }
    size_t n = est_report_tp_pair_count(r);
    for (size_t i = 0; i < n; i++) { /* the pairs --tp split, a line each */
        const est_tp_pair *pair = est_report_tp_pair(r, i);
        size_t len = strlen(pair->block);
        fprintf(f, "%s%s: ", i ? "                  " : "  tp split        ", pair->block[0] ? term(pair->block) : "(model)");
        for (size_t k = 0; k < pair->n_columns; k++) fprintf(f, "%s%s", k ? ", " : "", term(in_block(pair->columns[k], pair->block, len)));
        fprintf(f, " -> %s\n", term(in_block(pair->row, pair->block, len)));
    }
}

int print_table(FILE *f, const est_report *r, const output_opts *o) {
    const est_totals *t = est_report_totals(r);
    char a[64], b[64];
    fprintf(f, "model: %s\n", term(o->model));
    if (est_report_dim_count(r)) {
        fprintf(f, "dims:");
        for (size_t i = 0; i < est_report_dim_count(r); i++) {
            const est_binding *d = est_report_dim(r, i);
            fprintf(f, " %s=%" PRId64, term(d->name), d->value);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
    int w = name_width(r, o->all_layers);
    fprintf(f, "%5s  %-*s  %-20s  %-24s  %10s  %11s  %11s  %10s  %10s  %11s  %10s", "#", w, "layer", "op",
            "output shape", "params", "param bytes", "output", "fwd flops", "bwd flops", "saved", "temp");
    if (o->time) fprintf(f, "  %10s  %10s", "fwd time", "bwd time");
    fputc('\n', f);
    size_t hidden = 0;
    row_block rows;
    rows.len = 0;
    for (size_t i = 0; i < est_report_layer_count(r); i++) {
        const est_layer *L = est_report_layer(r, i);
        if (L->shape_only && !o->all_layers) {
            hidden++;
            continue;
        }
        row line = rows_next(&rows, f);
        layer_row(&line, i, L, (size_t)w);
        rows.len += line.len;
        const est_layer_time *lt = est_time_layer(o->time, i);
        if (lt) {
            rows_flush(&rows, f);
            fprintf(f, "  %10s  %10s\n", human_time(a, sizeof a, lt->forward_s), human_time(b, sizeof b, lt->backward_s));
            continue;
        }
        rows.text[rows.len++] = '\n';
    }
    rows_flush(&rows, f);
    fprintf(f, "\n");
    if (hidden)
        fprintf(f, "%zu shape-only layers (folded to constants) not shown; --all lists them.\n\n", hidden);
    if (o->depth) print_modules(f, r, o->depth, o->time);
    fprintf(f, "totals\n");
    fprintf(f, "  layers          %zu\n", est_report_layer_count(r));
    fprintf(f, "  parameters      %" PRIu64 " (%s)", t->param_count, human_bytes(a, sizeof a, t->param_bytes));
    if (est_report_mode(r) != EST_MODE_TRAIN) fprintf(f, "\n");
    else if (t->trainable_param_count == t->param_count) fprintf(f, ", all train\n");
    else
        fprintf(f, ", %" PRIu64 " train (%.2f%%), the rest are frozen\n", t->trainable_param_count,
                t->param_count ? 100.0 * (double)t->trainable_param_count / (double)t->param_count : 0.0);
    fprintf(f, "  buffers         %" PRIu64 " (%s)\n", t->buffer_count, human_bytes(a, sizeof a, t->buffer_bytes));
    fprintf(f, "  constants       %s\n", human_bytes(a, sizeof a, t->constant_bytes));
    fprintf(f, "  inputs          %s\n", human_bytes(a, sizeof a, t->input_bytes));
    fprintf(f, "  layer outputs   %s (sum over all layers)\n", human_bytes(a, sizeof a, t->output_bytes));
    fprintf(f, "  flops           %s forward, %s backward\n", human_count(a, sizeof a, t->flops_forward),
            human_count(b, sizeof b, t->flops_backward));
    char accum[48] = "";
    if (o->opt->grad_accum > 1) snprintf(accum, sizeof accum, ", %lld micro-batches a step", (long long)o->opt->grad_accum);
    fprintf(f, "\nmemory (%s, %s%s%s%s%s)\n", est_mode_name(est_report_mode(r)), est_dtype_name(est_report_dtype(r)),
            est_report_mode(r) == EST_MODE_TRAIN ? ", optimizer " : "",
            est_report_mode(r) == EST_MODE_TRAIN ? est_optimizer_name(est_report_optimizer(r)) : "",
            est_report_amp(r) == EST_AMP_BF16 ? ", amp bf16" : est_report_amp(r) == EST_AMP_FP16 ? ", amp fp16" : "",
            accum);
    if (t->checkpoint_segments) {
        char spec[512];
        fprintf(f, "  checkpoint      %s: %" PRIu64 " segments; backward recomputes %s FLOPs of forward\n",
                checkpoint_string(spec, sizeof spec, &o->opt->checkpoint), t->checkpoint_segments,
                human_count(a, sizeof a, t->flops_recompute));
    }
    print_parallel(f, r);
    fprintf(f, "  parameters      %s\n", human_bytes(a, sizeof a, t->params_bytes));
    fprintf(f, "  buffers         %s\n", human_bytes(a, sizeof a, t->buffers_bytes));
    fprintf(f, "  gradients       %s\n", human_bytes(a, sizeof a, t->grads_bytes));
    fprintf(f, "  optimizer state %s\n", human_bytes(a, sizeof a, t->optimizer_bytes));
    fprintf(f, "  activations     %s (%s)\n", human_bytes(a, sizeof a, t->activations_bytes),
            est_report_mode(r) == EST_MODE_TRAIN ? "saved for backward, at the end of the forward pass"
                                                 : "the most alive at once in the forward pass");
    fprintf(f, "  largest temp    %s\n", human_bytes(a, sizeof a, t->temp_bytes));
    const est_peak *p = est_report_peak(r);
    fprintf(f, "  PEAK            %s  during %s%s%s\n", human_bytes(a, sizeof a, p->bytes), est_phase_name(p->phase),
            p->label[0] ? ", at layer " : "", term(p->label));
    fprintf(f, "                  made of:");
    for (int c = 0; c < EST_CAT_COUNT; c++)
        if (est_peak_category(p, (est_category)c))
            fprintf(f, " %s %s;", est_category_name((est_category)c),
                    human_bytes(a, sizeof a, est_peak_category(p, (est_category)c)));
    fprintf(f, "\n");
    fprintf(f, "  RESERVED        %s  the caching allocator's segments (max_memory_reserved; PEAK is\n"
               "                  max_memory_allocated), beyond what the process held before\n",
            human_bytes(a, sizeof a, t->reserved_bytes));
    print_live(f, r, o->top);
    if (o->fit) print_fit_lines(f, o->fit, p->bytes, t);
    if (o->time) print_time(f, o->time);
    return ferror(f) ? 1 : 0;
}

/* The length of s when it is printable ASCII with no ',' or '"', which a
 * CSV field holds as it is (and term() returns unchanged); SIZE_MAX else. */
static size_t csv_plain_length(const char *s) {
    size_t n = 0;
    for (unsigned char c; (c = (unsigned char)s[n]) != '\0'; n++)
        if (c < 0x20 || c >= 0x7f || c == ',' || c == '"') return SIZE_MAX;
    return n;
}

void csv_field(FILE *f, const char *s) {
    size_t n = s ? csv_plain_length(s) : SIZE_MAX;
    if (n != SIZE_MAX) { /* most names */
        fwrite(s, 1, n, f);
        return;
    }
    s = term(s); /* no control byte, so no newline either */
    if (!strpbrk(s, ",\"")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* Ends a row: with a time, two more fields (empty, or a layer's times). */
/* ",%.9g" of x: an integer below 1e9 (0, for most layers' times) is its
 * digits, as printf writes it, without printf's cost. */
static void csv_seconds(FILE *f, double x) {
    if (fabs(x) < 1e9 && x == (double)(int64_t)x) {
        char text[24];
        size_t len = 0;
        text[len++] = ',';
        if (signbit(x)) text[len++] = '-'; /* -0 too */
        len += fmt_u64(text + len, (uint64_t)fabs(x));
        fwrite(text, 1, len, f);
        return;
    }
    fprintf(f, ",%.9g", x);
}

static void csv_eol(FILE *f, const output_opts *o, const est_layer_time *lt) {
    if (lt) csv_seconds(f, lt->forward_s), csv_seconds(f, lt->backward_s);
    else if (o->time) fputs(",,", f);
    fputc('\n', f);
}

/* param,NAME,,,SHAPE,DTYPE,COUNT,BYTES,,GRAD_BYTES,TRAINABLE,,,,,TORCH_NAME: one row per parameter,
 * laid out like a layer row (its gradient's bytes under output_bytes, 1 or
 * 0 under shape_only, PyTorch's name under module). */
static void csv_params(FILE *f, const est_report *r, const output_opts *o) {
    bool train = est_report_mode(r) == EST_MODE_TRAIN;
    for (size_t i = 0; i < est_report_param_count(r); i++) {
        const est_param_info *p = est_report_param(r, i);
        char shape[256];
        dims_string(shape, sizeof shape, p->rank, p->shape);
        fputs("param,", f);
        csv_field(f, p->name);
        fprintf(f, ",,,%s,%s,%" PRIu64 ",%" PRIu64 ",,%" PRIu64 ",%d,,,,,", shape, est_dtype_name(p->dtype), p->elements,
                p->bytes, train && p->trainable ? p->bytes : 0, p->trainable);
        csv_field(f, p->torch_name);
        csv_eol(f, o, NULL);
    }
}

/* ",N": a CSV field. */
static void row_u64(row *r, uint64_t v) {
    r->text[r->len++] = ',';
    r->len += fmt_u64(r->text + r->len, v);
}

static void row_i64(row *r, int64_t v) {
    r->text[r->len++] = ',';
    r->len += fmt_i64(r->text + r->len, v);
}

/* A layer's outputs as its row lists them: shapes, then dtypes, each joined
 * by ';' and cut as snprintf into these buffers cuts. */
static void output_lists(const est_layer *L, char *shapes, size_t n_shapes, char *dtypes, size_t n_dtypes) {
    size_t us = 0, ud = 0;
    shapes[0] = dtypes[0] = '\0';
    for (size_t k = 0; k < L->n_outputs; k++) {
        char s[256];
        const char *dtype = est_dtype_name(L->outputs[k].dtype);
        shape_string(s, sizeof s, &L->outputs[k]);
        us = fmt_append(shapes, n_shapes, us, ";", k ? 1 : 0);
        us = fmt_append(shapes, n_shapes, us, s, strlen(s));
        ud = fmt_append(dtypes, n_dtypes, ud, ";", k ? 1 : 0);
        ud = fmt_append(dtypes, n_dtypes, ud, dtype, strlen(dtype));
    }
}

/* index,name,op,domain,...: one layer's CSV row, its numbers written by
 * hand (fprintf's format parsing cost more than the fields). */
static void csv_layer(FILE *f, const est_layer *L, size_t i, const output_opts *o) {
    char shapes[1024], dtypes[512];
    output_lists(L, shapes, sizeof shapes, dtypes, sizeof dtypes);
    char text[ROW_ROOM];
    row r = {text, 0};
    r.len = fmt_u64(r.text, i);
    r.text[r.len++] = ',';
    fwrite(r.text, 1, r.len, f);
    csv_field(f, L->name);
    fputc(',', f);
    csv_field(f, L->op);
    fputc(',', f);
    csv_field(f, L->domain);
    r.len = 0;
    r.text[r.len++] = ',';
    row_put(&r, shapes, strlen(shapes));
    r.text[r.len++] = ',';
    row_put(&r, dtypes, strlen(dtypes));
    row_u64(&r, L->param_count);
    row_u64(&r, L->param_bytes);
    row_u64(&r, L->buffer_bytes);
    row_u64(&r, L->output_bytes);
    row_i64(&r, L->shape_only);
    row_u64(&r, L->flops_forward);
    row_u64(&r, L->flops_backward);
    row_u64(&r, L->saved_bytes);
    row_u64(&r, L->temp_bytes);
    r.text[r.len++] = ',';
    fwrite(r.text, 1, r.len, f);
    csv_field(f, L->module ? L->module : "");
    csv_eol(f, o, est_time_layer(o->time, i));
}

int print_csv(FILE *f, const est_report *r, const output_opts *o) {
    fprintf(f, "index,name,op,domain,output_shapes,output_dtypes,param_count,param_bytes,buffer_bytes,output_bytes,shape_only,"
               "flops_forward,flops_backward,saved_bytes,temp_bytes,module");
    if (o->time) fputs(",time_forward_s,time_backward_s", f);
    fputc('\n', f);
    for (size_t i = 0; i < est_report_layer_count(r); i++) csv_layer(f, est_report_layer(r, i), i, o);
    if (o->depth) csv_modules(f, r, o->depth, o->time);
    const est_totals *t = est_report_totals(r);
    fprintf(f, "total,,,,,,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",,%" PRIu64 ",%" PRIu64 ",%" PRIu64
               ",%" PRIu64 ",",
            t->param_count, t->param_bytes, t->buffer_bytes, t->output_bytes, t->flops_forward, t->flops_backward,
            t->activations_bytes, t->temp_bytes);
    csv_eol(f, o, NULL);
    const est_peak *p = est_report_peak(r);
    fputs("peak,", f);
    fprintf(f, "%s,", est_phase_name(p->phase));
    csv_field(f, p->layer);
    fprintf(f, ",,,,,,,%" PRIu64 ",,,,,,", p->bytes);
    csv_field(f, p->module ? p->module : "");
    csv_eol(f, o, NULL);
    /* breakdown,CATEGORY,,,,,,,,BYTES: the peak's categories, laid out like it */
    for (int c = 0; c < EST_CAT_COUNT; c++) {
        fprintf(f, "breakdown,%s,,,,,,,,%" PRIu64 ",,,,,,", est_category_name((est_category)c),
                est_peak_category(p, (est_category)c));
        csv_eol(f, o, NULL);
    }
    /* reserved,,,,,,,,,BYTES: laid out like the peak row */
    fprintf(f, "reserved,,,,,,,,,%" PRIu64 ",,,,,,", t->reserved_bytes);
    csv_eol(f, o, NULL);
    if (t->checkpoint_segments) {
        /* checkpoint,SPEC,SEGMENTS,,,,,,,,,RECOMPUTED_FLOPS: the FLOPs under flops_forward */
        char spec[512];
        fputs("checkpoint,", f);
        csv_field(f, checkpoint_string(spec, sizeof spec, &o->opt->checkpoint));
        fprintf(f, ",%" PRIu64 ",,,,,,,,,%" PRIu64 ",,,,", t->checkpoint_segments, t->flops_recompute);
        csv_eol(f, o, NULL);
    }
    csv_params(f, r, o);
    if (o->fit) {
        /* fit,GPU,yes|no|frag,,,,,,,HEADROOM_BYTES: laid out like the peak row; frag: the peak is
         * within the usable memory, the allocator's segments are not */
        const char *verdict = fit_ok(o->fit, p->bytes, t) ? "yes" : fit_headroom(o->fit, p->bytes) >= 0 ? "frag" : "no";
        fputs("fit,", f);
        csv_field(f, o->fit->gpu ? o->fit->gpu : "");
        fprintf(f, ",%s,,,,,,,%" PRId64 ",,,,,,", verdict, fit_headroom(o->fit, p->bytes));
        csv_eol(f, o, NULL);
    }
    if (o->time) csv_time(f, o->time);
    return ferror(f) ? 1 : 0;
}

const char *checkpoint_string(char *buf, size_t n, const est_checkpoint *ck) {
    buf[0] = '\0';
    if (!ck || !n) return buf;
    if (ck->every > 0) {
        snprintf(buf, n, "every=%lld", (long long)ck->every);
        return buf;
    }
    size_t used = 0;
    for (size_t i = 0; i < ck->n_prefixes && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? "," : "", ck->prefixes[i]);
    return buf;
}

/* The library's JSON options for what the command line asked. */
static est_json_options json_options_of(const output_opts *o, est_fit *fit) {
    est_json_options j;
    est_json_options_init(&j);
    j.model = o->model;
    j.options = o->opt;
    j.timeline = o->timeline;
    j.depth = o->depth;
    if (o->fit) {
        *fit = fit_of(o->fit);
        j.fit = fit;
        j.gpu = o->fit->gpu;
    }
    j.time = o->time;
    return j;
}

/* est_report_write_json's sink: the report streams to f as it is made. */
static int write_file(void *f, const char *data, size_t n) { return fwrite(data, 1, n, (FILE *)f) == n ? 0 : 1; }

int print_json_doc(FILE *f, const est_report *r, const output_opts *o, const est_max_batch_result *mb, int64_t cap) {
    est_fit fit;
    est_json_options j = json_options_of(o, &fit);
    j.max_batch = mb;
    j.max_batch_cap = cap;
    est_error err;
    if (est_report_write_json(r, &j, write_file, f, &err) != EST_OK) {
        if (err.code == EST_EIO) return 1; /* the caller names the file that could not be written */
        fprintf(stderr, "memest: %s\n", err.message);
        return 2;
    }
    return 0;
}

int print_json(FILE *f, const est_report *r, const output_opts *o) { return print_json_doc(f, r, o, NULL, 0); }
