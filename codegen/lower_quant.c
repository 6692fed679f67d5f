/*
 * lower_quant.c — generated kernels for the quantisation family (ir/infer/quant.c,
 * ir/ref/quant.c): QuantizeLinear / DequantizeLinear (per tensor, per axis, blocked) and
 * DynamicQuantizeLinear, dispatched from the elementwise and reduce lowerings. Each mirrors its
 * reference kernel step by step, at the same precision:
 *
 *   Quantize / Dequantize: a thread an element; the parameter index (per tensor / axis / block)
 *     is baked in; x / scale is rounded to the numpy result type as the reference does, then
 *     rounded half to even and saturated (kernels/quant.cuh).
 *   DynamicQuantizeLinear: one block: min / max over the tensor (both start at 0, NaN ignored),
 *     scale and zero point in f32 by thread 0, then every element quantised by the block.
 */
#include "codegen.h"
#include "ir/quant.h"

#include <stdlib.h>
#include <string.h>

static ampc_status unsupported(ampc_cg *cg, const ampc_node *n, const char *why) {
    return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_UNSUPPORTED, "%s has no generated GPU kernel %s",
                     ampc_op_get(n->op)->onnx, why);
}

static bool present(const ampc_node *n, int32_t i) { return n->n_inputs > i && n->inputs[i]; }
static bool has_out(const ampc_node *n, int32_t i) { return n->n_outputs > i && n->outputs[i]; }

/* ---- QuantizeLinear / DequantizeLinear ------------------------------------------------------ */

/* Emits "const long long q = <parameter index of element i>;" (ir/ref/quant.c's qmap). */
static void emit_qindex(ampc_cg_kernel *k, const ampc_node *n) {
    const ampc_shape *x = &n->inputs[0]->shape, *s = &n->inputs[1]->shape;
    int64_t block = ampc_quant_block(n);
    if (ampc_shape_numel(s) == 1 && s->rank <= 1 && block == 0) {
        ampc_cg_line(k, "const long long q = 0;");
        return;
    }
    const int32_t ax = ampc_axis_of(n, x->rank);
    int64_t dim = x->dims[ax], inner = 1;
    for (int32_t d = ax + 1; d < x->rank; d++) inner *= x->dims[d];
    if (!block) {
        ampc_cg_line(k, "const long long q = (i / %lldLL) %% %lldLL;", (long long)inner, (long long)dim);
        return;
    }
    ampc_cg_line(k, "const long long q = ((i / %lldLL) * %lldLL + ((i / %lldLL) %% %lldLL) / %lldLL) * "
                    "%lldLL + i %% %lldLL;",
                 (long long)(inner * dim), (long long)s->dims[ax], (long long)inner, (long long)dim,
                 (long long)block, (long long)inner, (long long)inner);
}

static ampc_status lower_qdq(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *s = n->inputs[1], *y = n->outputs[0];
    bool zp = present(n, 2), quant = n->op == AMPC_OP_QUANTIZE_LINEAR;
    int64_t count = ampc_ir_numel(y);
    if (count == 0) return AMPC_OK;
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, quant ? "quantize" : "dequantize");
    const char *px = ampc_cg_param(k, x, false), *ps = ampc_cg_param(k, s, false);
    const char *pz = zp ? ampc_cg_param(k, n->inputs[2], false) : NULL;
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    emit_qindex(k, n);
    if (quant) {
        /* x / scale in f64, rounded to the reference's result type, then rint + zero point. */
        double lo, hi;
        ampc_quant_range(y->dtype, &lo, &hi);
        ampc_cg_line(k, "double v = ampc::to_f64(%s[i]) / ampc::to_f64(%s[q]);", px, ps);
        ampc_dtype dt = ampc_quant_div_type(x->dtype, s->dtype);
        if (dt == AMPC_DTYPE_F32) ampc_cg_line(k, "v = (double)__double2float_rn(v);");
        else if (dt == AMPC_DTYPE_F16) ampc_cg_line(k, "v = (double)__half2float(__double2half(v));");
        ampc_strbuf z = {0};
        if (zp) ampc_sb_printf(&z, "(double)(long long)%s[q]", pz);
        else ampc_sb_puts(&z, "0.0");
        ampc_cg_line(k, "%s[i] = (%s)ampc::q_sat_rint(rint(v) + %s, %s, %s);", py,
                     ampc_cg_ctype(y->dtype), z.data, ampc_cg_f64(lo).s, ampc_cg_f64(hi).s);
        ampc_sb_free(&z);
    } else {
        if (zp) ampc_cg_line(k, "const long long d = (long long)%s[i] - (long long)%s[q];", px, pz);
        else ampc_cg_line(k, "const long long d = (long long)%s[i];", px);
        ampc_cg_line(k, "%s[i] = ampc::cvt<%s>((double)d * ampc::to_f64(%s[q]));", py,
                     ampc_cg_ctype(y->dtype), ps);
    }
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- DynamicQuantizeLinear ------------------------------------------------------------------ */

static ampc_status lower_dynamic_quantize(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t count = ampc_ir_numel(x);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "dynamic_quantize");
    const char *px = ampc_cg_param(k, x, false);
    const char *py = has_out(n, 0) ? ampc_cg_param(k, n->outputs[0], true) : NULL;
    const char *ps = has_out(n, 1) ? ampc_cg_param(k, n->outputs[1], true) : NULL;
    const char *pz = has_out(n, 2) ? ampc_cg_param(k, n->outputs[2], true) : NULL;
    ampc_cg_line(k, "__shared__ float smn[256], smx[256], sh_scale, sh_zp;");
    ampc_cg_line(k, "const int t = threadIdx.x;");
    /* Both extremes start at 0 and NaN never compares: as the reference. */
    ampc_cg_line(k, "float mn = 0.0f, mx = 0.0f;");
    ampc_cg_open(k, "for (long long e = t; e < %lldLL; e += 256)", (long long)count);
    ampc_cg_line(k, "const float v = %s[e];", px);
    ampc_cg_line(k, "if (v < mn) mn = v;");
    ampc_cg_line(k, "if (v > mx) mx = v;");
    ampc_cg_close(k);
    ampc_cg_line(k, "smn[t] = mn;");
    ampc_cg_line(k, "smx[t] = mx;");
    ampc_cg_line(k, "__syncthreads();");
    ampc_cg_open(k, "for (int w = 128; w > 0; w >>= 1)");
    ampc_cg_open(k, "if (t < w)");
    ampc_cg_line(k, "if (smn[t + w] < smn[t]) smn[t] = smn[t + w];");
    ampc_cg_line(k, "if (smx[t + w] > smx[t]) smx[t] = smx[t + w];");
    ampc_cg_close(k);
    ampc_cg_line(k, "__syncthreads();");
    ampc_cg_close(k);
    /* Scale and zero point in f32, each step rounded as the reference's volatile floats. */
    ampc_cg_open(k, "if (t == 0)");
    ampc_cg_line(k, "const float scale = __fdiv_rn(__fsub_rn(smx[0], smn[0]), 255.0f);");
    ampc_cg_line(k, "float zpf = 0.0f;");
    ampc_cg_line(k, "if (scale != 0.0f) zpf = (float)ampc::q_sat_rint((double)__fsub_rn(0.0f, "
                    "__fdiv_rn(smn[0], scale)), 0.0, 255.0);");
    ampc_cg_line(k, "sh_scale = scale;");
    ampc_cg_line(k, "sh_zp = zpf;");
    if (ps) ampc_cg_line(k, "%s[0] = scale;", ps);
    if (pz) ampc_cg_line(k, "%s[0] = (unsigned char)zpf;", pz);
    ampc_cg_close(k);
    ampc_cg_line(k, "__syncthreads();");
    if (py) {
        ampc_cg_line(k, "const float scale = sh_scale;");
        ampc_cg_line(k, "const double zpf = (double)sh_zp;");
        ampc_cg_open(k, "for (long long e = t; e < %lldLL; e += 256)", (long long)count);
        ampc_cg_line(k, "const float q = scale != 0.0f ? __fdiv_rn(%s[e], scale) : 0.0f;", px);
        ampc_cg_line(k, "%s[e] = (unsigned char)ampc::q_sat_rint(rint((double)q) + zpf, 0.0, 255.0);", py);
        ampc_cg_close(k);
    }
    const uint32_t grid[3] = {1, 1, 1}, block[3] = {256, 1, 1};
    return ampc_cg_kernel_end_launch(k, grid, block, 0);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

ampc_status ampc_cg_lower_quant(ampc_cg *cg, const ampc_node *n) {
    switch (n->op) {
    case AMPC_OP_QUANTIZE_LINEAR: case AMPC_OP_DEQUANTIZE_LINEAR: return lower_qdq(cg, n);
    case AMPC_OP_DYNAMIC_QUANTIZE_LINEAR: return lower_dynamic_quantize(cg, n);
    default: return unsupported(cg, n, "yet");
    }
}
