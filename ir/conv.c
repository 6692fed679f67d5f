/*
 * conv.c — the convolutions' and pools' parameters with their ONNX defaults (conv.h).
 */
#include "ir/conv.h"

ampc_conv_params ampc_conv_params_of(const ampc_node *n) {
    const bool lp = n->op == AMPC_OP_LP_POOL || n->op == AMPC_OP_GLOBAL_LP_POOL;
    return (ampc_conv_params){.group = ampc_attr_int_or(n, "group", 1),
                              .offset_group = ampc_attr_int_or(n, "offset_group", 1),
                              .relu = ampc_ir_attr_find(n, "activation") != NULL,
                              .include_pad = ampc_attr_int_or(n, "count_include_pad", 0) != 0,
                              .col_major = ampc_attr_int_or(n, "storage_order", 0) != 0,
                              .p = lp ? ampc_attr_int_or(n, "p", 2) : 1};
}

bool ampc_conv_channels_last(const ampc_node *n) {
    const bool takes = n->op == AMPC_OP_FUSED_CONV || n->op == AMPC_OP_MAX_POOL ||
                       n->op == AMPC_OP_AVERAGE_POOL;
    return takes && ampc_attr_int_or(n, "channels_last", 0) == 1;
}

/* entries [c - count, c) of ints attribute `name` into out, `dflt` each when it has fewer */
static void last_ints(const ampc_node *n, const char *name, int32_t count, int64_t dflt,
                      int64_t *out) {
    const ampc_attr *a = ampc_ir_attr_find(n, name);
    const bool given = a && a->kind == AMPC_ATTR_INTS && a->n >= count;
    for (int32_t i = 0; i < count; i++) out[i] = given ? a->ints[a->n - count + i] : dflt;
}

void ampc_col2im_window(const ampc_node *n, int32_t k, int64_t *stride, int64_t *dil, int64_t *pb,
                        int64_t *pe) {
    int64_t pads[2 * AMPC_MAX_RANK];
    last_ints(n, "strides", k, 1, stride);
    last_ints(n, "dilations", k, 1, dil);
    last_ints(n, "pads", 2 * k, 0, pads);
    for (int32_t i = 0; i < k; i++) pb[i] = pads[i], pe[i] = pads[k + i];
}

ampc_attr ampc_channels_last_attr(void) {
    return (ampc_attr){.name = "channels_last", .kind = AMPC_ATTR_INT, .i = 1};
}
