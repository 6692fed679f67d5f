/*
 * terminal.c — what the `ampc` executable prints passes through one filter: stdout and stderr
 * become streams that write to file descriptors 1 and 2 with every control byte and every byte
 * that is not UTF-8 escaped as \xHH (ampc_sb_put_terminal_text). A model's names and strings
 * reach the terminal in messages, tables and run output; through the filter an escape sequence
 * in a name (ESC [ 2 J clears the screen, OSC sequences set the window title or write to the
 * clipboard) prints as text instead of acting. '\n' and '\t' pass, and so does UTF-8.
 */
#define _GNU_SOURCE /* fopencookie */
#include "cli/cli.h"

#include "compiler/tool.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* One filtered stream: its file descriptor and the start of a UTF-8 sequence that the next
 * write completes. */
typedef struct term_stream {
    int fd;
    unsigned char pending[4];
    size_t n_pending;
} term_stream;

static FILE *raw_stderr; /* the process's own stderr, before the filter */

/* Writes n bytes to fd; false on an error. */
static bool write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Filters the pending bytes and buf (all of them when final) onto t's descriptor. */
static bool filter_out(term_stream *t, const char *buf, size_t size, bool final) {
    ampc_strbuf in = {0}, out = {0};
    for (size_t i = 0; i < t->n_pending; i++) ampc_sb_putc(&in, (char)t->pending[i]);
    for (size_t i = 0; i < size; i++) ampc_sb_putc(&in, buf[i]);
    size_t used = in.len ? ampc_sb_put_terminal_text(&out, in.data, in.len, final) : 0;
    t->n_pending = in.len - used; /* under 4: an incomplete UTF-8 sequence */
    if (t->n_pending) memcpy(t->pending, in.data + used, t->n_pending);
    bool ok = out.len == 0 || write_all(t->fd, out.data, out.len);
    ampc_sb_free(&in);
    ampc_sb_free(&out);
    return ok;
}

static ssize_t term_write(void *cookie, const char *buf, size_t size) {
    if (!size) return 0;
    return filter_out(cookie, buf, size, false) ? (ssize_t)size : -1;
}

static int term_close(void *cookie) { return filter_out(cookie, "", 0, true) ? 0 : EOF; }

/* A filtered stream onto t->fd, buffered as `mode` (_IONBF, _IOLBF, _IOFBF); NULL on failure. */
static FILE *term_open(term_stream *t, int mode) {
    cookie_io_functions_t io = {.read = NULL, .write = term_write, .seek = NULL, .close = term_close};
    FILE *f = fopencookie(t, "w", io);
    if (f && setvbuf(f, NULL, mode, mode == _IONBF ? 0 : BUFSIZ) != 0) {
        fclose(f);
        return NULL;
    }
    return f;
}

void ampc_cli_terminal_install(void) {
    static term_stream out_s = {.fd = 1}, err_s = {.fd = 2};
    if (raw_stderr) return;
    fflush(stdout);
    fflush(stderr);
    FILE *out = term_open(&out_s, isatty(1) ? _IOLBF : _IOFBF);
    FILE *err = term_open(&err_s, _IONBF);
    if (!out || !err) { /* left as they were: printing still works */
        if (out) fclose(out);
        if (err) fclose(err);
        return;
    }
    raw_stderr = stderr;
    stdout = out;
    stderr = err;
}

FILE *ampc_cli_raw_stderr(void) { return raw_stderr ? raw_stderr : stderr; }
