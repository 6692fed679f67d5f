/*
 * runtime.h — the runtime's interface inside ampc: everything of include/ampc_runtime.h (model
 * create / run / profile / destroy, devices, provider libraries) plus the plan contract
 * (runtime/plan.h) and the checks the compiler can run on a plan without a GPU.
 *
 * Who uses it: the JIT path (compiler/) builds a plan and runs it in-process; a generated
 * library's model.c embeds a plan and calls the same functions; codegen's tests call
 * ampc_rt_plan_check to validate the plans they emit on machines without a GPU.
 *
 * What codegen must know (the runtime checks each of these and names the step that breaks one):
 *   - Refs lie inside their space; steps never write the weights space; graph inputs live in the
 *     arena and their ref's bytes are numel * dtype size of their shape.
 *   - Element alignment: every operand's offset is a multiple of its element size. cuBLASLt is
 *     told the real alignment of each operand (up to 256 bytes) and picks algorithms accordingly,
 *     so 16-byte-aligned operands and batch strides get the fast kernels.
 *   - GEMM: row-major operands (the runtime computes D^T = B^T A^T in cuBLASLt's column-major
 *     terms, which needs no transposes); the bias dtype equals D's dtype; the epilogue is NONE,
 *     BIAS, RELU or BIAS_RELU: cuBLASLt's GELU epilogue is the tanh approximation, not ONNX's erf
 *     form, so GELU is rejected (lower it to a kernel); k = 0 is rejected (lower to a memset or a
 *     bias broadcast); m = 0 or n = 0 is a no-op. A/B and C/D dtypes: f32 -> f32 (TF32 when
 *     math says so), f64 -> f64, f16 -> f16 or f32, bf16 -> bf16 or f32; math TF32 is ignored
 *     for operands other than f32. A batch stride of 0 shares an operand across the batch.
 *   - Convolution: cuDNN's legacy API takes symmetric pads only: pad_begin != pad_end on any
 *     spatial dim is AMPC_E_UNSUPPORTED (pad the input with a kernel first); out dims must be the
 *     ones the pads, strides and dilations give; f32, f16, bf16, f64; 1-D runs as 2-D with H = 1;
 *     n = 0 is a no-op; tensors stay below 2^31 elements. Layout NC(D)HW, packed. ConvTranspose
 *     weights are [C_in, C_out/groups, k...] as in ONNX (output_padding < stride). Bias is
 *     [C_out] of the conv's dtype; the residual z has y's shape; y = relu(conv + z + bias).
 *   - Copies may not overlap; a copy's destination holds at least src.bytes.
 *   - Inputs are copied into their refs before the first step (a slot may be reused once its
 *     input is dead); outputs are copied out after the last step, so an output's slot must not
 *     be overwritten after the step that produces it.
 *   - Kernels: the parameter list of the extern "C" kernel must match the plan's args (count
 *     and sizes: pointers and i64 are 8 bytes, i32 and f32 4), checked at load; a grid with a
 *     zero dimension launches nothing; dynamic shared memory above 48 KiB is opted in.
 */
#ifndef AMPC_RT_RUNTIME_H
#define AMPC_RT_RUNTIME_H

#include "ampc_runtime.h"
#include "runtime/plan.h"

/* Checks `plan` without a GPU: the version, every ref against its space, the inputs and outputs,
 * the images (every unit has one), and each step against its provider's static rules (the list
 * above). AMPC_OK, or AMPC_E_INVALID_ARG for a malformed plan and AMPC_E_UNSUPPORTED for a step
 * no provider can run, with *err naming the step ("step 3 (Conv 'conv_1'): ..."). */
ampc_status ampc_rt_plan_check(const ampc_rt_plan *plan, char **err);

#endif /* AMPC_RT_RUNTIME_H */
