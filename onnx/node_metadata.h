/* node_metadata.h: reading a NodeProto's metadata_props (node_metadata.c). */
#ifndef EST_NODE_METADATA_H
#define EST_NODE_METADATA_H

#include <stdbool.h>
#include <stddef.h>

#include "onnx.pb-c.h"

/* The node's metadata entry `key`, or NULL when absent, or when out of
 * memory, which also sets *oom (the caller sets it false first; the load
 * must then fail, not go on as if the entry were absent). The caller frees
 * an entry with onnx__string_string_entry_proto__free_unpacked(e,
 * &est__onnx_pb_allocator). */
Onnx__StringStringEntryProto *est__onnx_find_metadata(const Onnx__NodeProto *p, const char *key, bool *oom);

/* Copies the value for `key` into buf (truncated to cap); false if absent
 * or out of memory (*oom set). */
bool est__onnx_node_metadata(const Onnx__NodeProto *p, const char *key, char *buf, size_t cap, bool *oom);

#endif
