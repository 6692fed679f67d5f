/*
 * fuzz_ir_text.c — libFuzzer target for the IR text parser (ir/parse.c): bytes ->
 * ampc_graph_parse -> verifier -> printer -> parser.
 *
 * Any bytes either parse into a graph or fail with a message naming the line and column. A graph
 * that parses and verifies must print to text that parses back and prints the same (the golden
 * tests and `ampc --emit ir` depend on that pair); one the verifier rejects must say why.
 */
#include "fuzz.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ampc_graph *g = NULL;
    char *err = NULL;
    ampc_status st = ampc_graph_parse((const char *)data, size, &g, &err);
    if (st != AMPC_OK) {
        fuzz_check_failure(st, err, "ampc_graph_parse");
        FUZZ_CHECK(!g, "a failed parse returned a graph");
        free(err);
        return 0;
    }
    FUZZ_CHECK(g && !err, "a successful parse left no graph or an error message");
    st = ampc_graph_verify(g);
    if (st != AMPC_OK) {
        fuzz_check_failure(st, ampc_graph_errors(g), "ampc_graph_verify");
    } else {
        char *text = ampc_graph_to_text(g, true);
        FUZZ_CHECK(text, "ampc_graph_to_text failed");
        fuzz_check_text_round_trip(text, "parsed IR");
        free(text);
    }
    ampc_graph_destroy(g);
    return 0;
}
