/*
 * stream.c: a model's graph one item at a time.
 *
 * Unpacking the whole ModelProto would hold every node, initializer and
 * value info of the file in memory at once, beside the graph the loader
 * builds from them: a million-node model would need both. This walks the
 * ModelProto and its GraphProto at the wire level instead. Their own
 * fields, less the graph and its items, are copied out and unpacked by
 * protobuf-c as two small "shell" messages; each item (a node, an
 * initializer, ...) is unpacked when the loader asks for it, into an arena
 * reset before the next one.
 *
 * The outcome is the one a whole unpack gives: the walk reads each field as
 * protobuf-c's unpack scans it (read_field), so it stops exactly where
 * unpack would fail, and every other byte is judged by unpack itself, in a
 * shell or an item. Repeated graph fields, which protobuf-c merges, read as
 * one graph holding all their fields in order.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "stream.h"

enum {
    WIRE_VARINT = 0, WIRE_64BIT = 1, WIRE_LEN = 2, WIRE_32BIT = 5,
    MODEL_GRAPH = 7, /* ModelProto.graph */
    ARENA_CHUNK = 64 << 10,
    SLIM_FROM = 4 << 10, /* an item below a page is unpacked as it is: its
                            weight bytes cost less to copy than to walk */
};

/* An item kind's field in GraphProto, its message and how slim.c cuts it. */
static const struct item_def {
    uint32_t tag;
    const ProtobufCMessageDescriptor *desc;
    int slim; /* an est_slim_kind, or -1: nothing to cut */
} items[EST_ITEM_KINDS] = {
    [EST_ITEM_NODE] = {1, &onnx__node_proto__descriptor, EST_SLIM_NODE},
    [EST_ITEM_INITIALIZER] = {5, &onnx__tensor_proto__descriptor, EST_SLIM_TENSOR},
    [EST_ITEM_SPARSE] = {15, &onnx__sparse_tensor_proto__descriptor, EST_SLIM_SPARSE},
    [EST_ITEM_INPUT] = {11, &onnx__value_info_proto__descriptor, -1},
    [EST_ITEM_OUTPUT] = {12, &onnx__value_info_proto__descriptor, -1},
    [EST_ITEM_VALUE_INFO] = {13, &onnx__value_info_proto__descriptor, -1},
};

/* ---- the arena ---------------------------------------------------------- */

/* protobuf-c's allocator over an est_arena: every block aligned for any
 * type, none freed before the arena is reset. One unpack makes many small
 * blocks; they are bumped off stretches of the arena, a call less each. */
enum { STRETCH = ARENA_CHUNK / 4 }; /* the most the arena packs into a chunk */

static void *arena_alloc(void *data, size_t size) {
    est_onnx_bump *b = data;
    if (size > STRETCH) {
        b->more = true;
        return est__arena_alloc(b->arena, size, EST_ARENA_ALIGN);
    }
    size_t want = size ? (size + EST_ARENA_ALIGN - 1) & ~(size_t)(EST_ARENA_ALIGN - 1) : EST_ARENA_ALIGN;
    if (want > b->left) {
        uint8_t *stretch = est__arena_alloc(b->arena, STRETCH, EST_ARENA_ALIGN);
        if (!stretch) return NULL;
        if (b->first) b->more = true;
        else b->first = stretch;
        b->at = stretch, b->left = STRETCH;
    }
    void *p = b->at;
    b->at += want, b->left -= want;
    return p;
}

static void arena_free_one(void *data, void *p) {
    (void)data, (void)p; /* all at once, in est__arena_reset */
}

static void *unpack_in(est_onnx_bump *b, const ProtobufCMessageDescriptor *desc, size_t n, const uint8_t *p) {
    ProtobufCAllocator in_arena = {.alloc = arena_alloc, .free = arena_free_one, .allocator_data = b};
    static const uint8_t none[1];
    return protobuf_c_message_unpack(desc, &in_arena, n, n ? p : none);
}

/* Empties the items' arena for the next item: only the bump goes back to
 * its first stretch when the last item fit in it, a call less an item. */
static void items_reset(est_onnx_stream *s) {
    est_onnx_bump *b = &s->item_bump;
    if (b->first && !b->more) {
        b->at = b->first, b->left = STRETCH;
        return;
    }
    est__arena_reset(&s->item, true);
    *b = (est_onnx_bump){.arena = &s->item};
}

/* ---- the wire format ---------------------------------------------------- */

typedef struct wire_field {
    uint32_t tag;
    uint8_t type;
    size_t start, body, end; /* the key, the value (past a length), one past the field */
} wire_field;

/* The key at p[i..n), read as protobuf-c reads it (parse_tag_and_wiretype:
 * at most 5 bytes, the bits past 32 dropped, tag 0 refused); its length, 0
 * when unpack would fail. */
static size_t read_key(const uint8_t *p, size_t n, uint32_t *tag, uint8_t *type) {
    size_t max = n > 5 ? 5 : n;
    if ((p[0] & 0xf8) == 0) return 0;
    *type = p[0] & 7;
    *tag = (p[0] & 0x7fu) >> 3;
    if (!(p[0] & 0x80)) return 1;
    for (size_t k = 1, shift = 4; k < max; k++, shift += 7) {
        *tag |= (uint32_t)(p[k] & 0x7f) << shift;
        if (!(p[k] & 0x80)) return k + 1;
    }
    return 0;
}

/* The field at p[i..n) as protobuf-c's unpack scans it; false where that
 * scan fails (a bad key, a varint past 10 bytes, a length past 5 bytes or
 * INT_MAX or the end, a group or an unknown wire type). */
static bool read_field(const uint8_t *p, size_t n, size_t i, wire_field *f) {
    if (n - i >= 3 && p[i] >= 8 && (p[i] & 0x87) == WIRE_LEN && !(p[i + 2] & p[i + 1] & 0x80)) {
        /* most items and names: a one-byte key, a length of one or two bytes */
        size_t body = i + 2 + (p[i + 1] >> 7), len = p[i + 1] & 0x7f;
        if (p[i + 1] & 0x80) len |= (size_t)p[i + 2] << 7;
        if (len <= n - body) {
            *f = (wire_field){.tag = p[i] >> 3, .type = WIRE_LEN, .start = i, .body = body, .end = body + len};
            return true;
        }
    }
    size_t used = read_key(p + i, n - i, &f->tag, &f->type);
    if (!used) return false;
    f->start = i;
    i += used;
    size_t rem = n - i;
    switch (f->type) {
    case WIRE_VARINT: {
        size_t max = rem < 10 ? rem : 10, k = 0;
        while (k < max && (p[i + k] & 0x80)) k++;
        if (k == max) return false;
        f->body = i, f->end = i + k + 1;
        return true;
    }
    case WIRE_64BIT:
    case WIRE_32BIT: {
        size_t width = f->type == WIRE_64BIT ? 8 : 4;
        if (rem < width) return false;
        f->body = i, f->end = i + width;
        return true;
    }
    case WIRE_LEN: {
        size_t max = rem < 5 ? rem : 5, k = 0, len = 0;
        for (; k < max; k++) {
            len |= (size_t)(p[i + k] & 0x7f) << (7 * k);
            if (!(p[i + k] & 0x80)) break;
        }
        if (k == max || len > INT_MAX || k + 1 + len > rem) return false;
        f->body = i + k + 1, f->end = f->body + len;
        return true;
    }
    default:
        return false;
    }
}

/* ---- opening: the shells ------------------------------------------------ */

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

static bool append(bytes *b, const uint8_t *p, size_t n) {
    if (b->cap - b->n < n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n) cap *= 2;
        uint8_t *grown = realloc(b->p, cap);
        if (!grown) return false;
        b->p = grown, b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    return true;
}

static int item_of_tag(uint32_t tag) {
    for (int k = 0; k < EST_ITEM_KINDS; k++)
        if (items[k].tag == tag) return k;
    return -1;
}

static bool add_graph(est_onnx_stream *s, size_t at, size_t len) {
    est_onnx_span *grown = realloc(s->graphs, (s->n_graphs + 1) * sizeof *grown);
    if (!grown) return false;
    s->graphs = grown;
    s->graphs[s->n_graphs++] = (est_onnx_span){.at = at, .len = len};
    return true;
}

/* The ModelProto's fields but its graphs into shell; the graphs' spans. */
static bool split_model(est_onnx_stream *s, size_t size, bytes *shell) {
    wire_field f;
    for (size_t i = 0; i < size; i = f.end) {
        if (!read_field(s->data, size, i, &f)) return false;
        bool ok = f.tag == MODEL_GRAPH && f.type == WIRE_LEN ? add_graph(s, f.body, f.end - f.body)
                                                             : append(shell, s->data + f.start, f.end - f.start);
        if (!ok) return false;
    }
    return true;
}

/* The graphs' fields but their items into shell; the items counted, and
 * each kind's stretch of each graph noted. */
static bool split_graphs(est_onnx_stream *s, bytes *shell) {
    wire_field f;
    for (size_t g = 0; g < s->n_graphs; g++) {
        est_onnx_span *span = &s->graphs[g];
        const uint8_t *p = s->data + span->at;
        for (size_t i = 0; i < span->len; i = f.end) {
            if (!read_field(p, span->len, i, &f)) return false;
            int kind = f.type == WIRE_LEN ? item_of_tag(f.tag) : -1;
            if (kind < 0) {
                if (!append(shell, p + f.start, f.end - f.start)) return false;
                continue;
            }
            if (span->to[kind] == 0) span->from[kind] = f.start;
            span->to[kind] = f.end;
            s->count[kind]++;
        }
    }
    return true;
}

static bool kind_unpacks(est_onnx_stream *s, est_onnx_item kind) {
    est_onnx_cursor c = {.kind = kind};
    bool bad = false;
    while (est__onnx_stream_next(s, &c, &bad)) {}
    return !bad;
}

bool est__onnx_stream_open(est_onnx_stream *s, const uint8_t *data, size_t size, bool slim) {
    *s = (est_onnx_stream){.data = data, .slim = slim, .shells.chunk = ARENA_CHUNK, .item.chunk = ARENA_CHUNK};
    s->item_bump.arena = &s->item;
    bytes model = {0}, graph = {0};
    bool ok = split_model(s, size, &model) && split_graphs(s, &graph);
    est_onnx_bump shells = {.arena = &s->shells};
    if (ok) ok = (s->model = unpack_in(&shells, &onnx__model_proto__descriptor, model.n, model.p)) != NULL;
    if (ok && s->n_graphs)
        ok = (s->graph = unpack_in(&shells, &onnx__graph_proto__descriptor, graph.n, graph.p)) != NULL;
    free(model.p);
    free(graph.p);
    if (ok) ok = kind_unpacks(s, EST_ITEM_VALUE_INFO);
    if (!ok) est__onnx_stream_close(s);
    return ok;
}

/* ---- items ------------------------------------------------------------- */

static void *unpack_item(est_onnx_stream *s, const struct item_def *d, const uint8_t *p, size_t n, bool *bad) {
    items_reset(s);
    if (s->slim && d->slim >= 0 && n >= SLIM_FROM) p = est__onnx_slim(p, n, (est_slim_kind)d->slim, &s->slimmed, &n);
    void *m = unpack_in(&s->item_bump, d->desc, n, p);
    if (!m) *bad = true;
    return m;
}

void *est__onnx_stream_next(est_onnx_stream *s, est_onnx_cursor *c, bool *bad) {
    const struct item_def *d = &items[c->kind];
    *bad = false;
    for (; c->graph < s->n_graphs; c->graph++, c->at = 0) {
        const est_onnx_span *span = &s->graphs[c->graph];
        const uint8_t *p = s->data + span->at;
        if (c->at < span->from[c->kind]) c->at = span->from[c->kind];
        wire_field f;
        while (c->at < span->to[c->kind] && read_field(p, span->len, c->at, &f)) { /* open read every field */
            c->at = f.end;
            if (f.tag == d->tag && f.type == WIRE_LEN) return unpack_item(s, d, p + f.body, f.end - f.body, bad);
        }
    }
    return NULL;
}

bool est__onnx_stream_items_unpack(est_onnx_stream *s) {
    for (int k = 0; k < EST_ITEM_KINDS; k++)
        if (!kind_unpacks(s, (est_onnx_item)k)) return false;
    return true;
}

void est__onnx_stream_close(est_onnx_stream *s) {
    est__arena_reset(&s->shells, false);
    est__arena_reset(&s->item, false);
    free(s->graphs);
    free(s->slimmed.data);
    *s = (est_onnx_stream){0};
}
