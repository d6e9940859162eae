/* node_metadata.h: reading a NodeProto's metadata_props (node_metadata.c). */
#ifndef EST_NODE_METADATA_H
#define EST_NODE_METADATA_H

#include <stdbool.h>
#include <stddef.h>

#include "onnx.pb-c.h"

/* Where est__onnx_metadata_value unpacks an entry. */
typedef struct est_md_scratch {
    _Alignas(16) unsigned char buf[2048]; /* left unset: only what is allocated is written */
    size_t used;
    void *heap; /* blocks beyond buf, malloc'd, each led by the next one's address */
    bool *oom;
} est_md_scratch;

/* The value of the node's metadata entry `key` ("" when the entry has
 * none), valid until est__onnx_scratch_release(s), which the caller calls
 * either way; NULL when absent, or when out of memory, which also sets *oom
 * (the caller sets it false first; the load must then fail, not go on as if
 * the entry were absent). */
const char *est__onnx_metadata_value(const Onnx__NodeProto *p, const char *key, est_md_scratch *s, bool *oom);
void est__onnx_scratch_release(est_md_scratch *s);

/* Copies the value for `key` into buf (truncated to cap); false if absent
 * or out of memory (*oom set). */
bool est__onnx_node_metadata(const Onnx__NodeProto *p, const char *key, char *buf, size_t cap, bool *oom);

#endif
