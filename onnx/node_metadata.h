/* node_metadata.h: reading a NodeProto's metadata_props (node_metadata.c). */
#ifndef EST_NODE_METADATA_H
#define EST_NODE_METADATA_H

#include <stdbool.h>
#include <stddef.h>

#include "onnx.pb-c.h"

/* The node's metadata entry `key`, or NULL. The caller frees it with
 * onnx__string_string_entry_proto__free_unpacked(e, &est__onnx_pb_allocator). */
Onnx__StringStringEntryProto *est__onnx_find_metadata(const Onnx__NodeProto *p, const char *key);

/* Copies the value for `key` into buf (truncated to cap); false if absent. */
bool est__onnx_node_metadata(const Onnx__NodeProto *p, const char *key, char *buf, size_t cap);

#endif
