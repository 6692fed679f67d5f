/*
 * kernels.h — the kernel templates of codegen/kernels/ (the .cuh files generated CUDA includes
 * as "ampc/<name>.cuh") and the headers of ir/ they include ("ampc/resize_taps.h"), embedded in
 * the binary at build time (codegen/kernels/embed.cmake).
 * Code generation names them in every unit; the NVRTC layer (compiler/nvrtc.c) hands them to
 * NVRTC as in-memory headers.
 */
#ifndef AMPC_CODEGEN_KERNELS_H
#define AMPC_CODEGEN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* One embedded file: its include name ("ampc/common.cuh") and its text (NUL-terminated, `size`
 * bytes before the NUL). */
typedef struct ampc_embedded_file {
    const char *name;
    const char *text;
    size_t size;
} ampc_embedded_file;

/* Every .cuh file of codegen/kernels/ and the shared headers of ir/, in name order; *count
 * receives their number. Static storage: never freed. */
const ampc_embedded_file *ampc_kernel_headers(int32_t *count);

#endif
