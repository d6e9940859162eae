/* node_metadata.c: a NodeProto's metadata_props, where the dynamo exporter
 * records the FX node, the module stack and its optimizer's rewrites. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node_metadata.h"
#include "slim.h" /* est__wire_varint */

/* NodeProto.metadata_props is field 9 in ONNX 1.16 and later; an older
 * onnx.proto (Debian's) does not name it, so protobuf-c keeps it among the
 * unknown fields. */
#define NODE_METADATA_FIELD 9

/* Whether the serialized entry p[0..n) certainly has a key other than
 * `key`: its fields read cleanly, and the last key field (StringStringEntry
 * Proto.key, field 1, the one unpack keeps) is absent or another string
 * without a NUL byte. Unpacking each entry to compare keys allocated and
 * freed every key and value of every node. Anything less clear is left to
 * unpack. */
static bool other_key(const uint8_t *p, size_t n, const char *key) {
    const uint8_t *found = NULL;
    uint64_t found_len = 0;
    for (size_t i = 0; i < n;) {
        uint64_t tag, v;
        size_t body;
        if (!est__wire_field(p, n, &i, &tag, &v, &body)) return false;
        if ((tag & 7) == 2 && tag >> 3 == 1) found = p + body, found_len = v;
    }
    if (!found) return true;
    if (memchr(found, 0, (size_t)found_len)) return false;
    return found_len != strlen(key) || memcmp(found, key, (size_t)found_len) != 0;
}

/* The entry with `key`, unpacked with allocator a; NULL when none. */
static Onnx__StringStringEntryProto *find_in(const Onnx__NodeProto *p, const char *key, bool *oom,
                                             ProtobufCAllocator *a) {
    for (unsigned i = 0; i < p->base.n_unknown_fields && !*oom; i++) {
        const ProtobufCMessageUnknownField *u = &p->base.unknown_fields[i];
        if (u->tag != NODE_METADATA_FIELD || u->wire_type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED) continue;
        /* protobuf-c keeps the field's bytes with their varint length prefix */
        size_t skip = 0;
        while (skip < u->len && (u->data[skip] & 0x80)) skip++;
        if (++skip > u->len || other_key(u->data + skip, u->len - skip, key)) continue;
        Onnx__StringStringEntryProto *e = onnx__string_string_entry_proto__unpack(a, u->len - skip, u->data + skip);
        if (!e) continue; /* malformed: as if absent (or *oom) */
        if (e->key && strcmp(e->key, key) == 0) return e;
        onnx__string_string_entry_proto__free_unpacked(e, a);
    }
    return NULL;
}

/* Entries are unpacked into a buffer on the stack (est_md_scratch):
 * malloc, free and free_unpacked cost as much as the unpack. Blocks beyond
 * it are malloc'd, chained, and freed together. */
static void *scratch_alloc(void *data, size_t size) {
    est_md_scratch *s = data;
    size_t want = (size + 15) & ~(size_t)15;
    if (want >= size && want <= sizeof s->buf - s->used) {
        void *p = s->buf + s->used;
        s->used += want;
        return p;
    }
    void **block = size > SIZE_MAX - 16 ? NULL : malloc(16 + size);
    if (!block) {
        *s->oom = true;
        return NULL;
    }
    *block = s->heap;
    s->heap = block;
    return (unsigned char *)block + 16;
}

static void scratch_free_one(void *data, void *p) {
    (void)data, (void)p; /* all at once, in est__onnx_scratch_release */
}

const char *est__onnx_metadata_value(const Onnx__NodeProto *p, const char *key, est_md_scratch *s, bool *oom) {
    s->used = 0, s->heap = NULL, s->oom = oom;
    ProtobufCAllocator on_stack = {.alloc = scratch_alloc, .free = scratch_free_one, .allocator_data = s};
    Onnx__StringStringEntryProto *e = find_in(p, key, oom, &on_stack);
    return !e ? NULL : e->value ? e->value : "";
}

void est__onnx_scratch_release(est_md_scratch *s) {
    for (void *block = s->heap, *next; block; block = next) {
        next = *(void **)block;
        free(block);
    }
    s->heap = NULL;
}

bool est__onnx_node_metadata(const Onnx__NodeProto *p, const char *key, char *buf, size_t cap, bool *oom) {
    est_md_scratch s;
    const char *value = est__onnx_metadata_value(p, key, &s, oom);
    if (value && cap) { /* as snprintf(buf, cap, "%s", value) */
        size_t len = strlen(value);
        if (len >= cap) len = cap - 1;
        memcpy(buf, value, len);
        buf[len] = '\0';
    }
    est__onnx_scratch_release(&s);
    return value != NULL;
}
