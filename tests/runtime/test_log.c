/*
 * test_log.c — the runtime prints nothing itself: what AMPC_*_VERBOSE asks it to tell goes, a line
 * at a time, to the function ampc_rt_set_log set, and nowhere without one (stderr stays empty).
 * Exercised without a GPU through the tuning cache's lookups (AMPC_TUNE_VERBOSE=1).
 */
#define _GNU_SOURCE /* setenv */
#include "support.h"

#include "runtime/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct lines {
    int n;
    char last[256];
} lines;

static void collect(void *user, const char *line) {
    lines *l = user;
    l->n++;
    snprintf(l->last, sizeof l->last, "%s", line);
}

/* A lookup of a key no cache holds, with stderr sent to a file; returns the bytes written to it. */
static long lookup_with_stderr_captured(const char *dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/stderr.txt", dir);
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path, "w+");
    cr_assert_not_null(f);
    dup2(fileno(f), 2);
    char val[64];
    cr_assert_not(rt_tune_get("test_log:no-such-key", val, sizeof val));
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fclose(f);
    return bytes;
}

Test(runtime_log, verbose_lines_go_to_the_callback_and_nowhere_else) {
    char *d = t_tmpdir("log"), cache[600];
    snprintf(cache, sizeof cache, "%s/tuning.txt", d);
    setenv("AMPC_TUNE_CACHE", cache, 1);
    setenv("AMPC_TUNE_VERBOSE", "1", 1);
    lines l = {0};
    ampc_rt_set_log(collect, &l);
    cr_assert_eq(lookup_with_stderr_captured(d), 0, "the runtime wrote to stderr itself");
    cr_assert_eq(l.n, 1);
    cr_assert_str_eq(l.last, "tuning cache miss: test_log:no-such-key");
    ampc_rt_set_log(NULL, NULL);
    cr_assert_eq(lookup_with_stderr_captured(d), 0, "no function set: nothing printed");
    cr_assert_eq(l.n, 1, "no function set: nothing delivered");
    unsetenv("AMPC_TUNE_VERBOSE");
    ampc_rt_set_log(collect, &l);
    cr_assert_eq(lookup_with_stderr_captured(d), 0);
    cr_assert_eq(l.n, 1, "not asked for (AMPC_TUNE_VERBOSE unset): nothing");
    ampc_rt_set_log(NULL, NULL);
    t_rmdir_all(d);
}
