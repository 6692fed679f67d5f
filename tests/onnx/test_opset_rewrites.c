/*
 * test_opset_rewrites.c — the importer's per-opset rewrites of the signal, pooling and
 * normalisation ops, on models crafted here with protobuf-c (onnx_builder.h): GroupNormalization
 * before opset 21 (per-group scale and bias, constant or computed), RoiAlign-10 (the
 * output_half_pixel coordinates), InstanceNormalization-1 (consumed_inputs), DFT-17 (axis as an
 * attribute, default 1), LpPool-1 (a float p), BatchNormalization in training mode, and
 * Softmax-12's 2-D coercion. Expected
 * values are worked out by hand in the comments.
 */
#include "onnx_builder.h"

#include <math.h>

static ampc_graph *import_ok(mb *b) {
    ampc_graph *g = NULL;
    char *err = NULL;
    ampc_status st = mb_import(b, NULL, NULL, &g, &err);
    cr_assert_eq(st, AMPC_OK, "import failed (%s):\n%s", ampc_status_str(st), err ? err : "");
    cr_assert_null(err);
    return g;
}

static void import_fails(mb *b, ampc_status want, const char *needle) {
    ampc_graph *g = NULL;
    char *err = NULL;
    ampc_status st = mb_import(b, NULL, NULL, &g, &err);
    cr_assert_null(g);
    cr_assert_not_null(err);
    cr_assert(strstr(err, needle), "expected a message containing\n  %s\ngot\n  %s", needle, err);
    cr_assert_eq(st, want, "status %s: %s", ampc_status_str(st), err);
    free(err);
}

/* Evaluates the graph's only output with the given inputs. */
static ampc_tensor eval1(ampc_graph *g, const ampc_tensor *in, int32_t n_in) {
    ampc_tensor out;
    cr_assert_eq(ampc_graph_output_count(g), 1);
    cr_assert_eq(ampc_graph_evaluate(g, in, n_in, &out, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    return out;
}

/* The node of op `op` in g (the first one). */
static const ampc_node *find_op(const ampc_graph *g, ampc_opcode op) {
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead && g->nodes[i]->op == op) return g->nodes[i];
    cr_assert_fail("no node of op %s", ampc_op_get(op)->onnx);
    return NULL;
}

/* ---- GroupNormalization --------------------------------------------------------------------- */

/* x [1, 4, 2] in 2 groups: group 0 (channels 0, 1) holds 1, 3, 1, 3 (mean 2, variance 1), group 1
 * holds 0, 4, 0, 4 (mean 2, variance 4), so with epsilon 0 both normalise to -1, 1, -1, 1. The
 * opset-18 scale {2, 3} and bias {10, 20} apply per group: 8, 12, 8, 12, 17, 23, 17, 23. */
static const float gn_x[8] = {1, 3, 1, 3, 0, 4, 0, 4};
static const double gn_want[8] = {8, 12, 8, 12, 17, 23, 17, 23};

Test(opset_rewrites, group_norm_18_constant_per_group_params) {
    mb b;
    mb_init(&b, 8, 18);
    mb_input(&b, "x", OT_FLOAT, "1,4,2");
    float sv[2] = {2, 3}, bv[2] = {10, 20};
    mb_initializer(&b, mb_tensor_raw(&b, "scale", OT_FLOAT, 1, (int64_t[]){2}, sv, sizeof sv));
    mb_initializer(&b, mb_tensor_raw(&b, "bias", OT_FLOAT, 1, (int64_t[]){2}, bv, sizeof bv));
    Onnx__NodeProto *n = mb_node(&b, "GroupNormalization", "gn", "x,scale,bias", "y");
    mb_attr_i(&b, n, "num_groups", 2);
    mb_attr_f(&b, n, "epsilon", 0);
    mb_output(&b, "y", OT_FLOAT, NULL);
    ampc_graph *g = import_ok(&b);
    const ampc_node *gn = find_op(g, AMPC_OP_GROUP_NORM);
    cr_assert(gn->inputs[1]->data && gn->inputs[1]->shape.dims[0] == 4, "scale is per channel");
    const float *s = gn->inputs[1]->data;
    cr_assert(s[0] == 2 && s[1] == 2 && s[2] == 3 && s[3] == 3);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(1, 4, 2), (void *)gn_x);
    ampc_tensor out = eval1(g, &in, 1);
    t_expect_close(&out, SHAPE(1, 4, 2), gn_want, 1e-6, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
    mb_free(&b);
}

/* The same with scale and bias computed at run time (graph inputs): they are widened by
 * Reshape [2, 1] -> Expand [2, 2] -> Reshape [4] in the graph. */
Test(opset_rewrites, group_norm_20_runtime_per_group_params) {
    mb b;
    mb_init(&b, 8, 20);
    mb_input(&b, "x", OT_FLOAT, "1,4,2");
    mb_input(&b, "scale", OT_FLOAT, "2");
    mb_input(&b, "bias", OT_FLOAT, "2");
    Onnx__NodeProto *n = mb_node(&b, "GroupNormalization", "gn", "x,scale,bias", "y");
    mb_attr_i(&b, n, "num_groups", 2);
    mb_attr_f(&b, n, "epsilon", 0);
    mb_output(&b, "y", OT_FLOAT, NULL);
    ampc_graph *g = import_ok(&b);
    const ampc_node *gn = find_op(g, AMPC_OP_GROUP_NORM);
    cr_assert_eq(gn->inputs[1]->shape.dims[0], 4);
    cr_assert_eq(gn->inputs[1]->producer->op, AMPC_OP_RESHAPE);
    float sv[2] = {2, 3}, bv[2] = {10, 20};
    ampc_tensor in[3] = {t_tensor(AMPC_DTYPE_F32, SHAPE(1, 4, 2), (void *)gn_x),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(2), sv),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(2), bv)};
    ampc_tensor out = eval1(g, in, 3);
    t_expect_close(&out, SHAPE(1, 4, 2), gn_want, 1e-6, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
    mb_free(&b);
}

/* ---- RoiAlign ------------------------------------------------------------------------------- */

/* x[i][j] = j on a 4x4 map, the roi (0, 0)-(2, 2), one 1x1 bin sampled once at its centre. The
 * opset-10 form has output_half_pixel coordinates: the centre is x = 1, so 1; the opset-16
 * default half_pixel shifts the roi by -0.5: x = 0.5, so 0.5. */
Test(opset_rewrites, roi_align_10_uses_output_half_pixel) {
    float xv[16], rois[4] = {0, 0, 2, 2};
    int64_t bi[1] = {0};
    for (int i = 0; i < 16; i++) xv[i] = (float)(i % 4);
    for (int form = 0; form < 2; form++) {
        mb b;
        mb_init(&b, 8, form ? 16 : 10);
        mb_input(&b, "x", OT_FLOAT, "1,1,4,4");
        mb_initializer(&b, mb_tensor_raw(&b, "rois", OT_FLOAT, 2, (int64_t[]){1, 4}, rois, 16));
        mb_initializer(&b, mb_tensor_raw(&b, "bi", OT_INT64, 1, (int64_t[]){1}, bi, 8));
        Onnx__NodeProto *n = mb_node(&b, "RoiAlign", "ra", "x,rois,bi", "y");
        mb_attr_i(&b, n, "output_height", 1);
        mb_attr_i(&b, n, "output_width", 1);
        mb_attr_i(&b, n, "sampling_ratio", 1);
        mb_output(&b, "y", OT_FLOAT, NULL);
        ampc_graph *g = import_ok(&b);
        const ampc_attr *a = ampc_ir_attr_find(find_op(g, AMPC_OP_ROI_ALIGN),
                                               "coordinate_transformation_mode");
        if (form == 0) cr_assert(a && !strcmp(a->s, "output_half_pixel"));
        ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(1, 1, 4, 4), xv);
        ampc_tensor out = eval1(g, &in, 1);
        double want[1] = {form ? 0.5 : 1.0};
        t_expect_close(&out, SHAPE(1, 1, 1, 1), want, 1e-6, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
        mb_free(&b);
    }
}

/* ---- InstanceNormalization, LpPool, DFT ----------------------------------------------------- */

/* InstanceNormalization-1 carries consumed_inputs; x = {1, 3} normalises to -1, 1 (epsilon
 * 1e-5 barely shows), then scale 2 and bias 1 give -1, 3. */
Test(opset_rewrites, instance_norm_1_consumed_inputs) {
    mb b;
    mb_init(&b, 3, 1);
    mb_input(&b, "x", OT_FLOAT, "1,1,2");
    float sv[1] = {2}, bv[1] = {1};
    mb_initializer(&b, mb_tensor_raw(&b, "s", OT_FLOAT, 1, (int64_t[]){1}, sv, 4));
    mb_initializer(&b, mb_tensor_raw(&b, "b", OT_FLOAT, 1, (int64_t[]){1}, bv, 4));
    Onnx__NodeProto *n = mb_node(&b, "InstanceNormalization", "in", "x,s,b", "y");
    mb_attr_ints(&b, n, "consumed_inputs", 3, (int64_t[]){0, 0, 0});
    mb_output(&b, "y", OT_FLOAT, NULL);
    ampc_graph *g = import_ok(&b);
    float xv[2] = {1, 3};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(1, 1, 2), xv);
    ampc_tensor out = eval1(g, &in, 1);
    double want[2] = {-1, 3};
    t_expect_close(&out, SHAPE(1, 1, 2), want, 1e-4, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
    mb_free(&b);
}

/* LpPool-1 gives p as a float: p = 2.0 over windows of 2 on {3, 4, 0} gives 5 and 4; a fractional
 * p has no int form and is refused. */
Test(opset_rewrites, lp_pool_1_float_p) {
    for (int k = 0; k < 2; k++) {
        mb b;
        mb_init(&b, 3, 1);
        mb_input(&b, "x", OT_FLOAT, "1,1,3");
        Onnx__NodeProto *n = mb_node(&b, "LpPool", "lp", "x", "y");
        mb_attr_ints(&b, n, "kernel_shape", 1, (int64_t[]){2});
        mb_attr_f(&b, n, "p", k ? 2.5f : 2.0f);
        mb_output(&b, "y", OT_FLOAT, NULL);
        if (k) {
            import_fails(&b, AMPC_E_UNSUPPORTED,
                         "attribute p=2.5 (opset 1) is not supported: only whole numbers p >= 1 "
                         "are");
        } else {
            ampc_graph *g = import_ok(&b);
            cr_assert_eq(ampc_ir_attr_find(find_op(g, AMPC_OP_LP_POOL), "p")->kind, AMPC_ATTR_INT);
            float xv[3] = {3, 4, 0};
            ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(1, 1, 3), xv);
            ampc_tensor out = eval1(g, &in, 1);
            double want[2] = {5, 4};
            t_expect_close(&out, SHAPE(1, 1, 2), want, 1e-6, 0);
            ampc_tensor_free(&out);
            ampc_graph_destroy(g);
        }
        mb_free(&b);
    }
}

/* DFT-17 takes the axis as an attribute whose default is 1 (the newest form's input defaults to
 * -2): [1, 2, 3, 4] along dim 1 of [1, 4, 1] without the attribute, and along dim 0 of [4, 1, 1]
 * with axis = 0, both give 10, -2 + 2i, -2, -2 - 2i. */
Test(opset_rewrites, dft_17_axis_attribute_and_default) {
    float xv[4] = {1, 2, 3, 4};
    double want[8] = {10, 0, -2, 2, -2, 0, -2, -2};
    for (int k = 0; k < 2; k++) {
        mb b;
        mb_init(&b, 8, 17);
        mb_input(&b, "x", OT_FLOAT, k ? "4,1,1" : "1,4,1");
        Onnx__NodeProto *n = mb_node(&b, "DFT", "dft", "x", "y");
        if (k) mb_attr_i(&b, n, "axis", 0);
        mb_output(&b, "y", OT_FLOAT, NULL);
        ampc_graph *g = import_ok(&b);
        const ampc_node *d = find_op(g, AMPC_OP_DFT);
        cr_assert(d->n_inputs == 3 && d->inputs[2] && d->inputs[2]->data, "axis is input 2");
        cr_assert_eq(*(const int64_t *)d->inputs[2]->data, k ? 0 : 1);
        cr_assert_null(ampc_ir_attr_find(d, "axis"));
        ampc_tensor in = t_tensor(AMPC_DTYPE_F32, k ? SHAPE(4, 1, 1) : SHAPE(1, 4, 1), xv);
        ampc_tensor out = eval1(g, &in, 1);
        t_expect_close(&out, k ? SHAPE(4, 1, 2) : SHAPE(1, 4, 2), want, 1e-6, 1e-6);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
        mb_free(&b);
    }
}

/* ---- BatchNormalization in training mode ---------------------------------------------------- */

Test(opset_rewrites, batch_norm_training_mode_is_refused_clearly) {
    mb b;
    mb_init(&b, 8, 15);
    mb_input(&b, "x", OT_FLOAT, "1,2,3");
    float v[2] = {1, 1};
    const char *names[4] = {"s", "b", "m", "v"};
    for (int i = 0; i < 4; i++)
        mb_initializer(&b, mb_tensor_raw(&b, names[i], OT_FLOAT, 1, (int64_t[]){2}, v, 8));
    Onnx__NodeProto *n = mb_node(&b, "BatchNormalization", "bn", "x,s,b,m,v", "y,rm,rv");
    mb_attr_i(&b, n, "training_mode", 1);
    mb_output(&b, "y", OT_FLOAT, NULL);
    import_fails(&b, AMPC_E_UNSUPPORTED,
                 "training_mode=1 (running statistics outputs) is not supported: ampc compiles "
                 "inference graphs");
    mb_free(&b);

    /* Opsets 9 to 13 selected training by asking for up to five outputs. */
    mb_init(&b, 8, 9);
    mb_input(&b, "x", OT_FLOAT, "1,2,3");
    for (int i = 0; i < 4; i++)
        mb_initializer(&b, mb_tensor_raw(&b, names[i], OT_FLOAT, 1, (int64_t[]){2}, v, 8));
    mb_node(&b, "BatchNormalization", "bn", "x,s,b,m,v", "y,rm,rv,sm,sv");
    mb_output(&b, "y", OT_FLOAT, NULL);
    import_fails(&b, AMPC_E_UNSUPPORTED,
                 "node 0 'bn' (BatchNormalization): training mode (5 outputs: running and saved "
                 "statistics) is not supported: ampc compiles inference graphs");
    mb_free(&b);
}

/* ---- Softmax before opset 13 ---------------------------------------------------------------- */

/* The 2-D coercion of Softmax-12 (Flatten, Softmax, Reshape) builds one output: a node with two
 * is refused for its arity, as at any opset (it once imported with its second output unmade,
 * a graph the verifier rejected; found by fuzz_onnx). */
Test(opset_rewrites, softmax_12_with_two_outputs_is_refused) {
    mb b;
    mb_init(&b, 7, 12);
    mb_input(&b, "x", OT_FLOAT, "1,1,5,5");
    mb_node(&b, "Softmax", "sm", "x", "y,z");
    mb_output(&b, "y", OT_FLOAT, NULL);
    mb_output(&b, "z", OT_INT64, NULL);
    import_fails(&b, AMPC_E_INVALID_ARG,
                 "node 0 'sm' (Softmax): Softmax has 1 to 1 outputs, got 2");
    mb_free(&b);
}

/* ---- LayerNormalization with parameters of another float type ------------------------------- */

/* torch.onnx.export of an fp16 BERT writes f32 activations into LayerNormalization with f16
 * Scale and B. They are cast to X's type: x rows {1, 3} and {0, 4} normalise (epsilon 0) to
 * {-1, 1}; scale {2, 3} (f16, exact) and bias {10, 20} give {8, 23} for both rows. A Scale of a
 * non-float type stays an error. */
Test(opset_rewrites, layer_norm_f16_params_on_f32_input) {
    mb b;
    mb_init(&b, 8, 17);
    mb_input(&b, "x", OT_FLOAT, "2,2");
    uint16_t sv[2] = {0x4000, 0x4200}, bv[2] = {0x4900, 0x4d00}; /* 2, 3, 10, 20 in f16 */
    mb_initializer(&b, mb_tensor_raw(&b, "scale", OT_FLOAT16, 1, (int64_t[]){2}, sv, sizeof sv));
    mb_initializer(&b, mb_tensor_raw(&b, "bias", OT_FLOAT16, 1, (int64_t[]){2}, bv, sizeof bv));
    Onnx__NodeProto *n = mb_node(&b, "LayerNormalization", "ln", "x,scale,bias", "y");
    mb_attr_f(&b, n, "epsilon", 0);
    mb_output(&b, "y", OT_FLOAT, NULL);
    ampc_graph *g = import_ok(&b);
    const ampc_node *ln = find_op(g, AMPC_OP_LAYER_NORM);
    cr_assert_eq(ln->inputs[1]->dtype, AMPC_DTYPE_F32, "scale cast to x's type");
    cr_assert_eq(ln->inputs[2]->dtype, AMPC_DTYPE_F32, "bias cast to x's type");
    float x[4] = {1, 3, 0, 4};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 2), x);
    ampc_tensor out = eval1(g, &in, 1);
    t_expect_close(&out, SHAPE(2, 2), (double[]){8, 23, 8, 23}, 1e-6, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
    mb_free(&b);

    mb_init(&b, 8, 17);
    mb_input(&b, "x", OT_FLOAT, "2,2");
    int64_t iv[2] = {1, 1};
    mb_initializer(&b, mb_tensor_raw(&b, "scale", OT_INT64, 1, (int64_t[]){2}, iv, sizeof iv));
    mb_node(&b, "LayerNormalization", "ln", "x,scale", "y");
    mb_output(&b, "y", OT_FLOAT, NULL);
    import_fails(&b, AMPC_E_DTYPE, "LayerNormalization");
    mb_free(&b);
}
