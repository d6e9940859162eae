/* stream.h: a model's graph one item at a time, as protobuf-c would unpack
 * it whole (stream.c). Internal to the ONNX loader. */
#ifndef MEMEST_ONNX_STREAM_H
#define MEMEST_ONNX_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir.h" /* est_arena */
#include "onnx.pb-c.h"
#include "slim.h"

/* The GraphProto's repeated message fields, unpacked one at a time. */
typedef enum est_onnx_item {
    EST_ITEM_NODE,
    EST_ITEM_INITIALIZER,
    EST_ITEM_SPARSE,
    EST_ITEM_INPUT,
    EST_ITEM_OUTPUT,
    EST_ITEM_VALUE_INFO,
    EST_ITEM_KINDS
} est_onnx_item;

/* A graph field's body, and where in it each kind of item starts and ends
 * (serializers write each kind together: a cursor walks only its stretch). */
typedef struct est_onnx_span {
    size_t at, len;
    size_t from[EST_ITEM_KINDS], to[EST_ITEM_KINDS];
} est_onnx_span;

/* Where protobuf-c's blocks for one unpack are bumped off (stream.c). */
typedef struct est_onnx_bump {
    est_arena *arena;
    uint8_t *at, *first; /* first: the first stretch taken from the arena */
    size_t left;
    bool more;           /* the unpack took more from the arena than that */
} est_onnx_bump;

typedef struct est_onnx_stream {
    const uint8_t *data;
    Onnx__ModelProto *model;  /* the ModelProto without its graph */
    Onnx__GraphProto *graph;  /* the GraphProto without its items; NULL when the model has no graph */
    size_t count[EST_ITEM_KINDS];
    est_onnx_span *graphs;    /* the graph field's bodies: protobuf merges repeated ones */
    size_t n_graphs;
    bool slim;                /* cut weight payloads before unpacking an item (slim.c) */
    est_slim_buf slimmed;
    est_arena shells, item;   /* protobuf-c's many small allocations of one unpack */
    est_onnx_bump item_bump;  /* an item's, in item */
} est_onnx_stream;

/* Where est__onnx_stream_next is in the items of one kind. */
typedef struct est_onnx_cursor {
    est_onnx_item kind;
    size_t graph, at;
} est_onnx_cursor;

/* Reads the serialized ModelProto data[0..size), which must outlive s:
 * unpacks the model and its graph without their items, and checks that the
 * value_info items unpack. False, with s closed, where protobuf-c's unpack
 * of the whole model would fail, or when out of memory. */
bool est__onnx_stream_open(est_onnx_stream *s, const uint8_t *data, size_t size, bool slim);

/* The next item of c's kind (an Onnx__NodeProto, Onnx__TensorProto,
 * Onnx__SparseTensorProto or Onnx__ValueInfoProto), valid until the next
 * call; NULL after the last one, or (*bad set) when its bytes do not
 * unpack or memory ran out. */
void *est__onnx_stream_next(est_onnx_stream *s, est_onnx_cursor *c, bool *bad);

/* Whether every item of every kind unpacks. */
bool est__onnx_stream_items_unpack(est_onnx_stream *s);

void est__onnx_stream_close(est_onnx_stream *s);

#endif
