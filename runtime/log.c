/*
 * log.c — the runtime's diagnostics go to the caller's function, never straight to a stream:
 * what the AMPC_*_VERBOSE variables ask for (the graph of steps, cuBLASLt's and cuDNN's choices,
 * 2:4 decisions, the tuning cache) is formatted into a line and handed to the function set by
 * ampc_rt_set_log, or dropped when none is set. One function for the process, behind a mutex.
 */
#include "runtime/internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t log_mutex = PTHREAD_MUTEX_INITIALIZER;
static ampc_rt_log_fn log_fn;
static void *log_user;

void ampc_rt_set_log(ampc_rt_log_fn fn, void *user) {
    pthread_mutex_lock(&log_mutex);
    log_fn = fn, log_user = user;
    pthread_mutex_unlock(&log_mutex);
}

void rt_log(const char *fmt, ...) {
    pthread_mutex_lock(&log_mutex);
    ampc_rt_log_fn fn = log_fn;
    void *user = log_user;
    pthread_mutex_unlock(&log_mutex);
    if (fn == NULL) return;
    char small[512], *line = small;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof small && (line = malloc((size_t)n + 1)) != NULL) {
        va_start(ap, fmt);
        vsnprintf(line, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    fn(user, line ? line : small); /* a line that did not fit in memory: its start */
    if (line != small) free(line);
}
