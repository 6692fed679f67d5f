/*
 * quant.c — the quantisation ops' parameters with their ONNX defaults (quant.h).
 */
#include "ir/quant.h"

int64_t ampc_quant_block(const ampc_node *n) {
    return ampc_attr_int_or(n, "block_size", 0);
}

void ampc_quant_range(ampc_dtype t, double *lo, double *hi) {
    switch (t) {
    case AMPC_DTYPE_I8: *lo = -128, *hi = 127; return;
    case AMPC_DTYPE_U16: *lo = 0, *hi = 65535; return;
    case AMPC_DTYPE_I16: *lo = -32768, *hi = 32767; return;
    case AMPC_DTYPE_I32: *lo = -2147483648.0, *hi = 2147483647.0; return;
    default: *lo = 0, *hi = 255; return;
    }
}

ampc_dtype ampc_quant_div_type(ampc_dtype x, ampc_dtype scale) {
    if (!ampc_dtype_is_float(x) || x == AMPC_DTYPE_F64 || scale == AMPC_DTYPE_F64)
        return AMPC_DTYPE_F64;
    if (x == AMPC_DTYPE_F16 && scale == AMPC_DTYPE_F16) return AMPC_DTYPE_F16;
    return AMPC_DTYPE_F32;
}
