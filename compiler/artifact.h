/*
 * artifact.h — writing a compiled module as a shared library (`ampc MODEL -o model.so`):
 * host_c.c writes the C (the plan as data, the entry point, model.h and its functions),
 * artifact.c embeds the images and weights, runs the C compiler and puts the files in place.
 */
#ifndef AMPC_COMPILER_ARTIFACT_H
#define AMPC_COMPILER_ARTIFACT_H

#include "ampc.h"

/* How the library holds its weights: embedded (sidecar NULL), or in the file of that name next
 * to the library. */
typedef struct ampc_artifact_layout {
    const char *sidecar;
    const char *math_note; /* appended to the module's math string (ampc_library_options) */
} ampc_artifact_layout;

/* The host C of library `name` (a C identifier), malloc'ed. */
char *ampc_artifact_host_c(const ampc_module *m, const char *name, const ampc_artifact_layout *l);
/* model.h for library `name`; `source` (the model's file, may be NULL) is named in its comment. */
char *ampc_artifact_header(const ampc_module *m, const char *name, const char *source);

/* Whether `name` can be a library's C prefix (a C identifier of at most 200 characters, no
 * keyword, not reserved); false with *err (malloc'ed) saying why. */
bool ampc_artifact_name_ok(const char *name, char **err);

/* What building a library needs, found as ampc_module_write_library would: the C compiler
 * (`cc` as given, else $CC, else "cc", looked up on PATH) and the runtime archive. Fills both
 * paths; AMPC_E_IO with *err saying which is missing. */
ampc_status ampc_artifact_toolchain(const char *cc, char *cc_path, size_t cc_cap, char *runtime,
                                    size_t runtime_cap, char **err);

/* Removes PATH.tmp.PID files beside PATH whose process PID no longer runs (the temporaries of
 * killed compiles); never the file of a live process. ampc_module_write_library calls it for the
 * library, its header and its weights file before writing them. */
void ampc_artifact_sweep_stale(const char *path);

/* Where ampc_module_write_library puts the header of library `path` when the options name none:
 * the path with ".h" for ".so" ("m.so" -> "m.h"), else with ".h" added (malloc'ed). */
char *ampc_artifact_header_path(const char *path);
/* Whether the library of m, written with options o, keeps its weights in "<library>.weights". */
bool ampc_artifact_has_sidecar(const ampc_module *m, const ampc_library_options *o);
/* Whether a file may be written at path: its folder exists and can be written, and it is not an
 * existing file that is not regular (a device, FIFO, socket, folder) nor the same file as source
 * (the model, may be NULL). AMPC_E_IO or AMPC_E_INVALID_ARG with *err naming both otherwise. */
ampc_status ampc_artifact_check_target(const char *path, const char *source, char **err);

#endif
