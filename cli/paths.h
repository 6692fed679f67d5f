/*
 * paths.h — the files a run of the `ampc` command may write, and the file names it makes from
 * names in a model (paths.c; in the tool's library, so tests reach it). Nothing here prints:
 * each check returns false with a malloc'ed message in *err that names the files and the rule.
 */
#ifndef AMPC_CLI_PATHS_H
#define AMPC_CLI_PATHS_H

#include "cli/cli.h"

/* Checks every output the command line names before any work: none empty, each in a folder that
 * exists and is writable, none an existing file that is not a regular one (a device, FIFO,
 * socket or folder), none the same file as an input of the run (the model, the IR text, --input
 * and --calibrate files, a library's weights file), no two the same file. */
bool ampc_cli_check_paths(const ampc_cli_options *o, char **err);

/* Checks one output of the run (`what` names it in messages, e.g. "-o", "--report", "output
 * 'y'"): not empty, not a file that is not regular, not an input of the run. Called again just
 * before each file is put in place. */
bool ampc_cli_check_output(const ampc_cli_options *o, const char *what, const char *path,
                           char **err);

/* File names (without extension) for n names taken from a model: bytes other than letters,
 * digits, '_', '-' and '.' become '_', a leading '.' becomes '_', an empty name "_", at most 200
 * bytes; names that then coincide get "_2", "_3"... (a name that was already plain keeps its
 * file name). A malloc'ed array of n malloc'ed strings; free with ampc_cli_file_names_free. */
char **ampc_cli_file_names(const char *const *names, int32_t n);
void ampc_cli_file_names_free(char **files, int32_t n);

/* The name for messages: bytes below 0x20, 0x7f and '\'' written as \xNN (malloc'ed). */
char *ampc_cli_quote(const char *name);

/* DIR/FILE (FILE a name from ampc_cli_file_names plus its extension) for reading: true with
 * *path (malloc'ed) when it exists and is a regular file inside DIR; true with *path NULL when
 * there is none; false with *err when it is a link leading outside DIR or not a regular file. */
bool ampc_cli_file_in_dir(const char *dir, const char *file, char **path, char **err);

#endif
