/* plot.c: --plot FILE.svg|.html, a picture of the simulated step: the
 * allocated bytes stacked by category over the step's events, the caching
 * allocator's reserved bytes, forward, backward and optimizer shaded, the
 * peak marked with its layer, and the GPU's usable memory with --gpu
 * (docs/output-format.md, "Plot"). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"

enum { W = 1000, H = 440, LEFT = 78, RIGHT = 150, TOP = 34, BOTTOM = 48, COLUMNS = 700 };

static const char *const category_colors[EST_CAT_COUNT] = {
    [EST_CAT_PARAMS] = "#4e79a7", [EST_CAT_BUFFERS] = "#a0cbe8", [EST_CAT_GRADS] = "#f28e2b",
    [EST_CAT_OPTIMIZER] = "#ffbe7d", [EST_CAT_ACTIVATIONS] = "#59a14f", [EST_CAT_TEMP] = "#e15759",
    [EST_CAT_INPUTS] = "#b6992d", [EST_CAT_COMM] = "#b07aa1", [EST_CAT_OTHER] = "#9c755f"};
static const char *const phase_colors[EST_PHASE_COUNT] = {"#eef4fb", "#fdf1e4", "#edf7ec"};

/* Text for SVG: XML's five escapes; control bytes (the library escaped
 * names already) dropped. */
static void xml_text(FILE *f, const char *s) {
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '&') fputs("&amp;", f);
        else if (c == '<') fputs("&lt;", f);
        else if (c == '>') fputs("&gt;", f);
        else if (c == '"') fputs("&quot;", f);
        else if (c >= 0x20) fputc(c, f);
    }
}

/* One column of the picture: the event at which the allocated bytes are
 * largest among those it covers, so that no peak is lost. */
typedef struct column {
    uint64_t cat[EST_CAT_COUNT];
    uint64_t total, reserved;
    est_phase phase;
} column;

/* Replays the events from the snapshot before the step into `cols`
 * columns; the largest total of each wins its column. */
static void fill_columns(const est_report *r, column *cols, size_t n_cols, size_t *peak_col) {
    const est_snapshot *before = est_report_snapshot(r, EST_SNAPSHOT_BEFORE);
    uint64_t cat[EST_CAT_COUNT];
    memcpy(cat, before->category, sizeof cat);
    size_t n = est_report_event_count(r);
    uint64_t best = 0;
    *peak_col = 0;
    for (size_t i = 0; i < n; i++) {
        const est_event *e = est_report_event(r, i);
        if (e->kind == EST_EVENT_ALLOC) cat[e->category] += e->bytes;
        else if (e->kind == EST_EVENT_FREE) cat[e->category] -= e->bytes;
        else if (i + 1 < n) { /* a MOVE pair: from its category to the next's */
            cat[e->category] -= e->bytes;
            cat[est_report_event(r, ++i)->category] += e->bytes;
        }
        size_t k = n > 1 ? i * (n_cols - 1) / (n - 1) : 0;
        if (e->allocated >= cols[k].total || !cols[k].total) {
            memcpy(cols[k].cat, cat, sizeof cat);
            cols[k].total = e->allocated;
        }
        cols[k].phase = e->phase; /* the column's last event's: a short optimizer step still shows */
        if (e->reserved > cols[k].reserved) cols[k].reserved = e->reserved;
        if (e->allocated > best) {
            best = e->allocated;
            *peak_col = k;
        }
    }
    for (size_t k = 1; k < n_cols; k++) /* a column no event fell in holds its left neighbour */
        if (!cols[k].total) cols[k] = cols[k - 1];
}

static double ypos(uint64_t bytes, uint64_t top) {
    return TOP + (H - TOP - BOTTOM) * (1.0 - (double)bytes / (double)top);
}

static double xpos(size_t k, size_t n) { return LEFT + (W - LEFT - RIGHT) * (n > 1 ? (double)k / (double)(n - 1) : 0); }

/* A round step for about five ticks up to `top`: 1, 2 or 5 times a power
 * of ten MiB (or of two below a MiB). */
static uint64_t tick_step(uint64_t top) {
    uint64_t mib = 1 << 20, want = top / 5 ? top / 5 : 1;
    if (want < mib) {
        uint64_t s = 1;
        while (s * 2 <= want) s *= 2;
        return s;
    }
    uint64_t p = 1;
    while (p * 10 * mib <= want) p *= 10;
    uint64_t s = want >= 5 * p * mib ? 5 * p : want >= 2 * p * mib ? 2 * p : p;
    return s * mib;
}

static void axes(FILE *f, uint64_t top) {
    char a[64];
    uint64_t step = tick_step(top);
    for (uint64_t v = 0; v <= top; v += step) {
        double y = ypos(v, top);
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", LEFT, W - RIGHT, y, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\">%s</text>\n", LEFT - 6, y + 4,
                human_bytes(a, sizeof a, v));
        if (v > UINT64_MAX - step) break;
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\">the step's allocations and frees, "
               "in order</text>\n", (LEFT + W - RIGHT) / 2, H - 14);
}

static void phases(FILE *f, const column *cols, size_t n) {
    for (size_t k = 0; k < n;) {
        size_t j = k;
        while (j + 1 < n && cols[j + 1].phase == cols[k].phase) j++;
        double x0 = xpos(k, n), x1 = xpos(j, n);
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>\n", x0, TOP, x1 - x0 + 1,
                H - TOP - BOTTOM, phase_colors[cols[k].phase]);
        if (x1 - x0 > 40)
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"11\" fill=\"#555\">%s</text>\n",
                    (x0 + x1) / 2, TOP - 6, est_phase_name(cols[k].phase));
        k = j + 1;
    }
}

/* One category's band: the polygon between the sums below it and with it. */
static void band(FILE *f, const column *cols, size_t n, int c, uint64_t top) {
    fprintf(f, "<polygon class=\"cat-%s\" fill=\"%s\" points=\"", est_category_name((est_category)c), category_colors[c]);
    for (size_t k = 0; k < n; k++) {
        uint64_t upto = 0;
        for (int d = 0; d <= c; d++) upto += cols[k].cat[d];
        fprintf(f, "%.1f,%.1f ", xpos(k, n), ypos(upto, top));
    }
    for (size_t k = n; k-- > 0;) {
        uint64_t below = 0;
        for (int d = 0; d < c; d++) below += cols[k].cat[d];
        fprintf(f, "%.1f,%.1f ", xpos(k, n), ypos(below, top));
    }
    fputs("\"/>\n", f);
}

static void legend(FILE *f, const column *cols, size_t n) {
    int y = TOP + 4;
    for (int c = EST_CAT_COUNT - 1; c >= 0; c--) {
        bool any = false;
        for (size_t k = 0; k < n && !any; k++) any = cols[k].cat[c] != 0;
        if (!any) continue;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>", W - RIGHT + 14, y,
                category_colors[c]);
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s</text>\n", W - RIGHT + 32, y + 10,
                est_category_name((est_category)c));
        y += 18;
    }
    fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#333\" stroke-width=\"1.5\"/>", W - RIGHT + 14,
            W - RIGHT + 26, y + 6, y + 6);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\">reserved</text>\n", W - RIGHT + 32, y + 10);
}

int write_plot(FILE *f, const est_report *r, const output_opts *o, bool html) {
    const est_snapshot *before = est_report_snapshot(r, EST_SNAPSHOT_BEFORE);
    if (!before) return 1;
    column *cols = calloc(COLUMNS, sizeof *cols);
    if (!cols) return 1;
    size_t n = est_report_event_count(r) < COLUMNS ? est_report_event_count(r) : COLUMNS, peak_col = 0;
    if (n) {
        fill_columns(r, cols, n, &peak_col);
    } else { /* a step of no allocation: what it began with */
        n = 1;
        memcpy(cols[0].cat, before->category, sizeof cols[0].cat);
        cols[0].total = before->bytes;
        cols[0].phase = est_report_peak(r)->phase;
    }
    const est_peak *p = est_report_peak(r);
    uint64_t top = p->bytes;
    for (size_t k = 0; k < n; k++)
        if (cols[k].reserved > top) top = cols[k].reserved;
    uint64_t usable = o->fit ? fit_usable(o->fit) : 0;
    if (usable > top && usable < top * 2) top = usable;
    top += top / 20 + 1;
    if (html) {
        fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>memest: ", f);
        xml_text(f, o->model);
        fputs("</title></head><body style=\"font-family: sans-serif\">\n", f);
    }
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\">\n<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H, W, H, W, H);
    fputs("<title>", f);
    xml_text(f, o->model);
    fputs("</title>\n", f);
    phases(f, cols, n);
    axes(f, top);
    for (int c = 0; c < EST_CAT_COUNT; c++) band(f, cols, n, c, top);
    fputs("<polyline class=\"reserved\" fill=\"none\" stroke=\"#333\" stroke-width=\"1.5\" points=\"", f);
    for (size_t k = 0; k < n; k++) fprintf(f, "%.1f,%.1f ", xpos(k, n), ypos(cols[k].reserved, top));
    fputs("\"/>\n", f);
    char a[64], b[64];
    if (usable) {
        if (usable <= top)
            fprintf(f, "<line class=\"gpu\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" "
                       "stroke-dasharray=\"6 4\"/>\n<text x=\"%d\" y=\"%.1f\" font-size=\"11\" fill=\"#c00\">",
                    LEFT, W - RIGHT, ypos(usable, top), ypos(usable, top), LEFT + 4, ypos(usable, top) - 4);
        else
            fprintf(f, "<text class=\"gpu\" x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#c00\">", LEFT + 4, TOP + 12);
        fprintf(f, "%s usable on %s%s</text>\n", human_bytes(a, sizeof a, usable), o->fit->gpu ? o->fit->gpu : "the GPU",
                usable <= top ? "" : " (above the chart)");
    }
    double px = xpos(peak_col, n), py = ypos(p->bytes, top);
    fprintf(f, "<circle class=\"peak\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#000\"/>\n", px, py);
    fprintf(f, "<text class=\"peak\" x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"%s\">peak %s, %s",
            px + (px > W / 2 ? -8 : 8), py - 8, px > W / 2 ? "end" : "start", human_bytes(b, sizeof b, p->bytes),
            est_phase_name(p->phase));
    if (p->label && p->label[0]) {
        fputs(" at ", f);
        xml_text(f, p->label);
    }
    fputs("</text>\n", f);
    legend(f, cols, n);
    fputs("</svg>\n", f);
    if (html) fputs("</body></html>\n", f);
    free(cols);
    return ferror(f) ? 1 : 0;
}
