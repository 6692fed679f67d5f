/*
 * fuzz_onnx.c — libFuzzer target for the ONNX front end: bytes -> ampc_onnx_import_buffer ->
 * verifier -> printer -> parser.
 *
 * The input is a serialized ModelProto. Whatever the bytes, the import either succeeds with a
 * graph the verifier accepts and whose printed IR parses back to the same text, or fails with a
 * status and a message (no graph). A symbolic dim 0 is bound to batch 2 so models with a batch
 * dim reach the builder. External data is refused (no base folder): the file-side rules have
 * their own Criterion tests (tests/onnx/test_import.c).
 */
#include "fuzz.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ampc_import_options o = {.max_batch = 2};
    ampc_graph *g = NULL;
    char *err = NULL;
    ampc_status st = ampc_onnx_import_buffer(data, size, NULL, &o, &g, &err);
    if (st != AMPC_OK) {
        fuzz_check_failure(st, err, "ampc_onnx_import_buffer");
        FUZZ_CHECK(!g, "a failed import returned a graph");
        free(err);
        return 0;
    }
    FUZZ_CHECK(g && !err, "a successful import left no graph or an error message");
    st = ampc_graph_verify(g);
    FUZZ_CHECK(st == AMPC_OK, "an imported graph fails the verifier:\n%s", ampc_graph_errors(g));
    char *text = ampc_graph_to_text(g, true);
    FUZZ_CHECK(text, "ampc_graph_to_text failed");
    fuzz_check_text_round_trip(text, "imported model");
    free(text);
    ampc_graph_destroy(g);
    return 0;
}
