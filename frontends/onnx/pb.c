/*
 * pb.c — protobuf plumbing for the ONNX front end: a wire-format walk that every buffer passes
 * before protobuf-c unpacks it (bounds and nesting depth: protobuf-c recurses without a limit, so
 * a hostile file could otherwise exhaust the stack), the ModelProto parse, and access to fields
 * by tag that works whether the onnx.proto we were generated from knows the field or not.
 *
 * The schema may be older than the model (Debian ships ONNX 1.12's, IR 8). protobuf-c keeps the
 * fields it does not know in the message's unknown_fields, each with its tag and its raw bytes
 * (a length-delimited field keeps its length prefix); ampc_onnx_pb_string/_messages read a field
 * from the struct when the descriptor has it and from there otherwise.
 */
#include "onnx_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- wire-format walk ----------------------------------------------------------------------- */

/* Reads a base-128 varint; false when it runs past end or past 10 bytes. */
static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*p >= end) return false;
        uint8_t b = *(*p)++;
        if (shift == 63 && (b & 0x7e)) return false; /* more than 64 bits */
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* Walks the fields of one message in [p, end) (base: the buffer start, for byte offsets in
 * messages). Length-delimited fields that the descriptor says are messages are walked in turn,
 * one level deeper; unknown fields and bytes are skipped after their bounds are checked. */
static bool walk(const uint8_t *base, const uint8_t *p, const uint8_t *end,
                 const ProtobufCMessageDescriptor *d, int depth, ampc_strbuf *err) {
    if (depth > AMPC_ONNX_PB_MAX_DEPTH) {
        ampc_sb_printf(err, "messages nest deeper than %d levels (at byte %zu)",
                       AMPC_ONNX_PB_MAX_DEPTH, (size_t)(p - base));
        return false;
    }
    while (p < end) {
        size_t at = (size_t)(p - base);
        uint64_t tag, v;
        if (!read_varint(&p, end, &tag)) {
            ampc_sb_printf(err, "truncated field tag at byte %zu", at);
            return false;
        }
        uint64_t field = tag >> 3;
        if (field == 0 || field > 536870911u) {
            ampc_sb_printf(err, "invalid field number %llu at byte %zu", (unsigned long long)field,
                           at);
            return false;
        }
        switch (tag & 7) {
        case 0: /* varint */
            if (!read_varint(&p, end, &v)) goto truncated;
            break;
        case 1: /* fixed64 */
            if (end - p < 8) goto truncated;
            p += 8;
            break;
        case 5: /* fixed32 */
            if (end - p < 4) goto truncated;
            p += 4;
            break;
        case 2: { /* length-delimited: bytes, strings, packed scalars, messages */
            if (!read_varint(&p, end, &v) || v > (uint64_t)(end - p)) goto truncated;
            const ProtobufCFieldDescriptor *f =
                d ? protobuf_c_message_descriptor_get_field(d, (unsigned)field) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
                !walk(base, p, p + v, f->descriptor, depth + 1, err))
                return false;
            p += v;
            break;
        }
        default:
            ampc_sb_printf(err, "unsupported wire type %d of field %llu at byte %zu",
                           (int)(tag & 7), (unsigned long long)field, at);
            return false;
        }
        continue;
    truncated:
        ampc_sb_printf(err, "field %llu at byte %zu runs past the end of the data (%zu bytes)",
                       (unsigned long long)field, at, (size_t)(end - base));
        return false;
    }
    return true;
}

bool ampc_onnx_pb_check(const void *data, size_t len, const ProtobufCMessageDescriptor *d,
                        ampc_strbuf *err) {
    const uint8_t *p = data;
    return walk(p, p, p + len, d, 0, err);
}

Onnx__ModelProto *ampc_onnx_model_parse(const void *data, size_t len, ampc_strbuf *err) {
    if (len == 0) {
        ampc_sb_puts(err, "not an ONNX model: the data is empty");
        return NULL;
    }
    ampc_strbuf why = {0};
    if (!ampc_onnx_pb_check(data, len, &onnx__model_proto__descriptor, &why)) {
        ampc_sb_printf(err, "not an ONNX model (a truncated file, or not protobuf): %s", why.data);
        ampc_sb_free(&why);
        return NULL;
    }
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, data);
    if (!m)
        ampc_sb_puts(err, "not an ONNX model: protobuf-c rejects the data (a field has the wrong "
                          "wire type, or the file is truncated or corrupt)");
    return m;
}

/* ---- fields by tag -------------------------------------------------------------------------- */

void ampc_onnx_pb_pool_free(ampc_onnx_pb_pool *p) {
    for (int32_t i = 0; i < p->n; i++) protobuf_c_message_free_unpacked(p->msgs[i], NULL);
    free(p->msgs);
    memset(p, 0, sizeof *p);
}

/* The payload of an unknown length-delimited field (its data starts with the length varint). */
static bool unknown_payload(const ProtobufCMessageUnknownField *u, const uint8_t **p, size_t *len) {
    if (u->wire_type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED) return false;
    const uint8_t *q = u->data, *end = u->data + u->len;
    uint64_t v;
    if (!read_varint(&q, end, &v) || v != (uint64_t)(end - q)) return false;
    *p = q;
    *len = (size_t)v;
    return true;
}

bool ampc_onnx_pb_string(const ProtobufCMessage *m, uint32_t tag, const char **s, size_t *len) {
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(m->descriptor, tag);
    if (f) {
        if (f->label == PROTOBUF_C_LABEL_REPEATED) return false;
        const char *base = (const char *)m;
        if (f->type == PROTOBUF_C_TYPE_STRING) {
            const char *v = *(char *const *)(const void *)(base + f->offset);
            if (!v) return false;
            *s = v;
            *len = strlen(v);
            return true;
        }
        if (f->type == PROTOBUF_C_TYPE_BYTES) {
            const ProtobufCBinaryData *b = (const void *)(base + f->offset);
            if (!b->data) return false;
            *s = (const char *)b->data;
            *len = b->len;
            return true;
        }
        return false;
    }
    bool found = false;
    for (unsigned i = 0; i < m->n_unknown_fields; i++) { /* the last occurrence wins */
        const uint8_t *p;
        size_t n;
        if (m->unknown_fields[i].tag == tag && unknown_payload(&m->unknown_fields[i], &p, &n)) {
            *s = (const char *)p;
            *len = n;
            found = true;
        }
    }
    return found;
}

int32_t ampc_onnx_pb_messages(const ProtobufCMessage *m, uint32_t tag,
                              const ProtobufCMessageDescriptor *d, ampc_onnx_pb_pool *pool,
                              ProtobufCMessage *const **out) {
    *out = NULL;
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(m->descriptor, tag);
    if (f) {
        if (f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE ||
            f->descriptor != d)
            return 0;
        const char *base = (const char *)m;
        size_t n = *(const size_t *)(const void *)(base + f->quantifier_offset);
        *out = *(ProtobufCMessage *const *const *)(const void *)(base + f->offset);
        return (int32_t)n;
    }
    int32_t first = pool->n;
    for (unsigned i = 0; i < m->n_unknown_fields; i++) {
        const uint8_t *p;
        size_t n;
        if (m->unknown_fields[i].tag != tag || !unknown_payload(&m->unknown_fields[i], &p, &n))
            continue;
        ampc_strbuf why = {0};
        bool ok = ampc_onnx_pb_check(p, n, d, &why);
        ampc_sb_free(&why);
        ProtobufCMessage *msg = ok ? protobuf_c_message_unpack(d, NULL, n, p) : NULL;
        if (!msg) continue; /* a malformed newer field: ignored like any unknown field */
        if (pool->n == pool->cap) {
            pool->cap = pool->cap ? pool->cap * 2 : 8;
            pool->msgs = ampc_xrealloc(pool->msgs, (size_t)pool->cap * sizeof *pool->msgs);
        }
        pool->msgs[pool->n++] = msg;
    }
    /* No message found leaves pool->msgs NULL: NULL + 0 is undefined behaviour in C. */
    *out = pool->n > first ? pool->msgs + first : NULL;
    return pool->n - first;
}
