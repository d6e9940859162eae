/*
 * test_json_report: the report's JSON (est_report_to_json,
 * est_report_write_json; docs/json-format.md).
 *
 *  - a node name that is not UTF-8: U+FFFD for each bad byte, and the JSON
 *    stays valid UTF-8.
 *  - the report streamed in pieces is est_report_to_json's text; a sink that
 *    fails makes it EST_EIO.
 *
 * usage: test_json_report SOURCE_DIR
 */
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cJSON.h"
#include "ir.h"
#include "json_util.h"

/* Whether text is well-formed UTF-8 (RFC 3629), checked here apart from
 * the writer's own check. */
static bool valid_utf8(const unsigned char *p) {
    while (*p) {
        unsigned c = *p, n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (!n || (n == 2 && c < 0xc2) || (n == 4 && c > 0xf4)) return false;
        unsigned long cp = n == 1 ? c : c & (0x7f >> n);
        for (unsigned i = 1; i < n; i++) {
            if ((p[i] & 0xc0) != 0x80) return false;
            cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return false;
        p += n;
    }
    return true;
}

/* A node name that is not UTF-8 (names are the file's bytes): the report's
 * JSON holds U+FFFD for each bad byte, keeps good multi-byte characters,
 * and stays valid UTF-8. */
static void check_report_names_not_utf8(void) {
    static const char text[] =
        "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"n\", \"opset_import\": {\"\": 17},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [2, 3]}],\n"
        " \"nodes\": [{\"name\": \"r\xff" "e\xc3\xa9\xed\xa0\x80\", \"op\": \"Relu\", \"inputs\": [\"x\"], \"outputs\": [\"y\"]}],\n"
        " \"outputs\": [\"y\"]}\n";
    est_error err;
    est_graph *g = NULL;
    est_report *r = NULL;
    char *json = NULL;
    est_status st = est_load_json_buffer(text, sizeof text - 1, "names.json", &g, &err);
    CHECK(st == EST_OK, "names.json: load: %s", err.message);
    if (st == EST_OK) {
        est_options opt;
        est_options_init(&opt);
        st = est_estimate(g, &opt, &r, &err);
        CHECK(st == EST_OK, "names.json: estimate: %s", err.message);
    }
    if (r) {
        st = est_report_to_json(r, NULL, &json, &err);
        CHECK(st == EST_OK && json, "names.json: to_json: %s", err.message);
    }
    if (json) {
        /* 0xff and the encoded surrogate (ED A0 80, three bytes) are not UTF-8 */
        CHECK(strstr(json, "\"r\\ufffde\xc3\xa9\\ufffd\\ufffd\\ufffd\"") != NULL, "names.json: the bad bytes are not U+FFFD");
        CHECK(valid_utf8((const unsigned char *)json), "names.json: the report's JSON is not valid UTF-8");
    }
    est_free(json);
    est_report_free(r);
    est_graph_free(g);
}

/* est_report_write_json's sink in the test: the pieces joined, and how
 * many; fail_after > 0 refuses that piece. */
typedef struct pieces {
    char *text;
    size_t len, count, largest;
    size_t fail_after;
} pieces;

static int collect(void *ctx, const char *data, size_t n) {
    pieces *p = ctx;
    if (p->fail_after && p->count + 1 == p->fail_after) return 1;
    char *grown = realloc(p->text, p->len + n + 1);
    if (!grown) return 1;
    memcpy(grown + p->len, data, n);
    p->text = grown;
    p->len += n;
    p->text[p->len] = '\0';
    p->count++;
    if (n > p->largest) p->largest = n;
    return 0;
}

/* The report streamed (est_report_write_json) is est_report_to_json's text,
 * in pieces of 64 KiB at most; a sink that fails makes it EST_EIO.
 * resnet18's report is some 150 KB: several pieces. */
static void check_streamed_report(const char *source_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/models/resnet18.onnx", source_dir);
    est_error err;
    est_graph *g = NULL;
    est_report *r = NULL;
    char *text = NULL;
    if (est_load_file(path, &g, &err) != EST_OK) {
        CHECK(false, "%s: %s", path, err.message);
        return;
    }
    est_options opt;
    est_options_init(&opt);
    opt.batch = 32;
    est_status st = est_estimate(g, &opt, &r, &err);
    CHECK(st == EST_OK, "resnet18: estimate: %s", err.message);
    if (r) st = est_report_to_json(r, NULL, &text, &err);
    pieces p = {0};
    if (r && text) {
        st = est_report_write_json(r, NULL, collect, &p, &err);
        CHECK(st == EST_OK, "streamed report: %s", err.message);
        CHECK(p.text && strcmp(p.text, text) == 0, "streamed report differs from est_report_to_json's (%zu against %zu bytes)",
              p.len, strlen(text));
        CHECK(p.count >= 2 && p.largest <= 65536, "streamed report: %zu pieces, the largest %zu bytes", p.count, p.largest);
        pieces bad = {.fail_after = 2};
        st = est_report_write_json(r, NULL, collect, &bad, &err);
        CHECK(st == EST_EIO, "a failing sink: %s, expected EST_EIO", est_status_name(st));
        free(bad.text);
    }
    free(p.text);
    est_free(text);
    est_report_free(r);
    est_graph_free(g);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s SOURCE_DIR\n", argv[0]);
        return 2;
    }
    const char *source_dir = argv[1];

    check_report_names_not_utf8();
    check_streamed_report(source_dir);

    return json_test_result();
}
