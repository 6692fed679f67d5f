/*
 * err.c — the runtime's error record (the first failure wins, context is prepended as the error
 * travels up: call -> step -> model) and the small helpers every runtime file uses: dtype sizes
 * and names, shape text, version text.
 */
#define _GNU_SOURCE /* strdup */
#include "runtime/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* vsnprintf into a fresh malloc'ed string; NULL on host OOM (the status still goes back). */
static char *vformat(const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

ampc_status rt_fail(rt_err *e, ampc_status s, const char *fmt, ...) {
    if (e->msg != NULL || e->status != AMPC_OK) return s; /* keep the first failure: the cause */
    va_list ap;
    va_start(ap, fmt);
    e->msg = vformat(fmt, ap);
    va_end(ap);
    e->status = s;
    return s;
}

void rt_err_prefix(rt_err *e, const char *fmt, ...) {
    if (e->msg == NULL) return;
    va_list ap;
    va_start(ap, fmt);
    char *pre = vformat(fmt, ap);
    va_end(ap);
    if (pre == NULL) return;
    size_t a = strlen(pre), b = strlen(e->msg);
    char *s = malloc(a + b + 1);
    if (s != NULL) {
        memcpy(s, pre, a);
        memcpy(s + a, e->msg, b + 1);
        free(e->msg);
        e->msg = s;
    }
    free(pre);
}

void rt_err_append(rt_err *e, const char *fmt, ...) {
    if (e->msg == NULL) return;
    va_list ap;
    va_start(ap, fmt);
    char *post = vformat(fmt, ap);
    va_end(ap);
    if (post == NULL) return;
    size_t a = strlen(e->msg), b = strlen(post);
    char *s = realloc(e->msg, a + b + 1);
    if (s != NULL) {
        memcpy(s + a, post, b + 1);
        e->msg = s;
    }
    free(post);
}

ampc_status rt_err_give(rt_err *e, char **err) {
    ampc_status s = e->status;
    if (s != AMPC_OK && e->msg == NULL) e->msg = strdup("out of host memory while reporting an error");
    if (err != NULL) {
        *err = s == AMPC_OK ? NULL : e->msg;
        if (s == AMPC_OK) free(e->msg);
    } else {
        free(e->msg);
    }
    e->msg = NULL;
    e->status = AMPC_OK;
    return s;
}

void rt_err_clear(rt_err *e) {
    free(e->msg);
    e->msg = NULL;
    e->status = AMPC_OK;
}

ampc_status rt_fail_call(rt_err *e, const char *lib, int rc, const char *code_name,
                         const char *lib_msg, const char *stmt, const char *func,
                         const char *file, int line) {
    const char *base = strrchr(file, '/');
    /* keep "runtime/model.c" rather than the build machine's absolute path */
    if (base != NULL) {
        const char *p = base;
        while (p > file && p[-1] != '/') p--;
        base = p > file ? p : base + 1;
    } else {
        base = file;
    }
    ampc_status s = AMPC_E_CUDA;
    if (strcmp(lib, "CUDA") == 0 &&
        (rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver))
        s = AMPC_E_NO_DEVICE;
    return rt_fail(e, s, "%s failed in %s (%s:%d): %s error %d %s: %s", stmt, func, base, line, lib,
                   rc, code_name ? code_name : "?", lib_msg ? lib_msg : "(no message)");
}

ampc_status rt_fail_cuda(rt_err *e, int rc, const char *stmt, const char *func, const char *file,
                         int line) {
    cudaError_t c = (cudaError_t)rc;
    rt_cuda_clear(); /* a non-sticky error must not surface again at the next unrelated call */
    return rt_fail_call(e, "CUDA", rc, cudaGetErrorName(c), cudaGetErrorString(c), stmt, func,
                        file, line);
}

void rt_cuda_clear(void) { (void)cudaGetLastError(); }

/* ---- dtypes, shapes, versions ---------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} dtypes[AMPC_DTYPE_COUNT] = {
    [AMPC_DTYPE_UNDEFINED] = {"undefined", 0}, [AMPC_DTYPE_F32] = {"f32", 4},
    [AMPC_DTYPE_F16] = {"f16", 2},             [AMPC_DTYPE_BF16] = {"bf16", 2},
    [AMPC_DTYPE_F64] = {"f64", 8},             [AMPC_DTYPE_I64] = {"i64", 8},
    [AMPC_DTYPE_I32] = {"i32", 4},             [AMPC_DTYPE_I16] = {"i16", 2},
    [AMPC_DTYPE_I8] = {"i8", 1},               [AMPC_DTYPE_U64] = {"u64", 8},
    [AMPC_DTYPE_U32] = {"u32", 4},             [AMPC_DTYPE_U16] = {"u16", 2},
    [AMPC_DTYPE_U8] = {"u8", 1},               [AMPC_DTYPE_BOOL] = {"bool", 1},
};

size_t rt_dtype_size(ampc_dtype t) {
    return (unsigned)t < (unsigned)AMPC_DTYPE_COUNT ? dtypes[t].size : 0;
}

const char *rt_dtype_name(ampc_dtype t) {
    return (unsigned)t < (unsigned)AMPC_DTYPE_COUNT ? dtypes[t].name : "?";
}

char *rt_shape_str(const ampc_shape *s, char *buf, size_t size) {
    size_t n = 0;
    n += (size_t)snprintf(buf, size, "[");
    int32_t rank = s->rank < 0 ? 0 : s->rank > AMPC_MAX_RANK ? AMPC_MAX_RANK : s->rank;
    for (int32_t i = 0; i < rank && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)s->dims[i]);
    if (n < size) snprintf(buf + n, size - n, "]");
    return buf;
}

bool rt_shape_numel(const ampc_shape *s, int64_t *n) {
    if (s->rank < 0 || s->rank > AMPC_MAX_RANK) return false;
    int64_t v = 1;
    for (int32_t i = 0; i < s->rank; i++)
        if (s->dims[i] < 0 || __builtin_mul_overflow(v, s->dims[i], &v)) return false;
    *n = v;
    return true;
}

char *rt_cuda_version_str(int v, char *buf, size_t size) {
    snprintf(buf, size, "%d.%d", v / 1000, (v % 1000) / 10);
    return buf;
}

char *rt_lib_version_str(int64_t v, char *buf, size_t size) {
    snprintf(buf, size, "%lld.%lld.%lld", (long long)(v / 10000), (long long)(v / 100 % 100),
             (long long)(v % 100));
    return buf;
}
