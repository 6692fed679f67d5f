/*
 * tensor_io.c — tensors in and out of the ONNX front end: decoding TensorProto (initializers,
 * Constant values, .pb files) in every encoding ONNX allows, and the tensor file formats the CLI
 * and the conformance runner use: ONNX TensorProto .pb and numpy .npy (format 1.0 to 3.0).
 *
 * TensorProto encodings: raw_data (little-endian bytes), the typed fields (float_data;
 * int32_data for i32, i16, i8, u16, u8, bool and the bit patterns of f16/bf16; int64_data;
 * double_data; uint64_data for u32 and u64), and external data (data_location EXTERNAL with
 * location/offset/length entries). An external file must stay inside the model's folder: absolute
 * paths, `..` components and symlinks that resolve outside are refused, as are an offset or
 * length past the end of the file. Every file read here may be hostile: all sizes are checked
 * before use. ampc assumes a little-endian host, as ONNX raw_data and '<' numpy data are.
 */
#define _XOPEN_SOURCE 700 /* realpath, pread, O_CLOEXEC under -std=c11 */
#include "onnx_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "ampc assumes a little-endian host");

/* ---- element types -------------------------------------------------------------------------- */

static const char *const onnx_dtype_names[] = {
    "UNDEFINED", "FLOAT",      "UINT8",        "INT8",          "UINT16",
    "INT16",     "INT32",      "INT64",        "STRING",        "BOOL",
    "FLOAT16",   "DOUBLE",     "UINT32",       "UINT64",        "COMPLEX64",
    "COMPLEX128", "BFLOAT16",  "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
    "FLOAT8E5M2FNUZ", "UINT4", "INT4",         "FLOAT4E2M1",    "FLOAT8E8M0",
    "UINT2",     "INT2",
};

const char *ampc_onnx_dtype_name(int32_t code, char *buf, size_t n) {
    if (code >= 0 && code < AMPC_ARRAY_LEN(onnx_dtype_names)) return onnx_dtype_names[code];
    snprintf(buf, n, "type %d", code);
    return buf;
}

ampc_status ampc_onnx_tensor_type(const Onnx__TensorProto *t, const char *what, ampc_dtype *dt,
                                  ampc_shape *s, ampc_strbuf *err) {
    char nb[32];
    if (!t->has_data_type || t->data_type == 0) {
        ampc_sb_printf(err, "%s has no data_type", what);
        return AMPC_E_PARSE;
    }
    *dt = ampc_dtype_from_onnx(t->data_type);
    if (*dt == AMPC_DTYPE_UNDEFINED) {
        ampc_sb_printf(err, "%s has element type %s, which ampc does not support", what,
                       ampc_onnx_dtype_name(t->data_type, nb, sizeof nb));
        return AMPC_E_UNSUPPORTED;
    }
    if (t->n_dims > AMPC_MAX_RANK) {
        ampc_sb_printf(err, "%s has rank %zu; ampc supports ranks up to %d", what, t->n_dims,
                       AMPC_MAX_RANK);
        return AMPC_E_UNSUPPORTED;
    }
    if (t->segment) {
        ampc_sb_printf(err, "%s is a segment of a larger tensor, which ampc does not support",
                       what);
        return AMPC_E_UNSUPPORTED;
    }
    s->rank = (int32_t)t->n_dims;
    int64_t numel = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0) {
            ampc_sb_printf(err, "%s has a negative dimension: dims[%zu] = %lld", what, i,
                           (long long)t->dims[i]);
            return AMPC_E_SHAPE;
        }
        s->dims[i] = t->dims[i];
    }
    for (size_t i = 0; i < t->n_dims; i++) /* after every dim is filled: the message prints them */
        if (!ampc_mul_ok(numel, t->dims[i], &numel)) goto overflow;
    int64_t bytes;
    if (!ampc_mul_ok(numel, (int64_t)ampc_dtype_size(*dt), &bytes)) goto overflow;
    return AMPC_OK;
overflow:;
    char sb[AMPC_SHAPE_STR_MAX];
    ampc_sb_printf(err, "%s has dims %s whose size overflows 64 bits", what,
                   ampc_shape_str(s, sb, sizeof sb));
    return AMPC_E_OVERFLOW;
}

/* ---- external data -------------------------------------------------------------------------- */

/* A non-negative decimal integer, strictly (digits only, no overflow). */
static bool parse_u64(const char *s, int64_t *out) {
    int64_t v = 0;
    if (!s || !*s) return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        if (!ampc_mul_ok(v, 10, &v) || !ampc_add_ok(v, *s - '0', &v)) return false;
    }
    *out = v;
    return true;
}

/* Refuses absolute paths and any `..` component (either slash counts as a separator, so a
 * Windows-written "..\\x" is refused too). */
static bool location_is_safe(const char *loc, const char **why) {
    if (!*loc) {
        *why = "is empty";
        return false;
    }
    if (loc[0] == '/' || loc[0] == '\\' || (loc[0] && loc[1] == ':')) {
        *why = "is absolute; it must be relative to the model's folder";
        return false;
    }
    for (const char *p = loc; *p;) {
        const char *e = p;
        while (*e && *e != '/' && *e != '\\') e++;
        if (e - p == 2 && p[0] == '.' && p[1] == '.') {
            *why = "has a '..' component, which would leave the model's folder";
            return false;
        }
        p = *e ? e + 1 : e;
    }
    return true;
}

/* External data, in two phases: every check (location safe, file inside the folder, offset and
 * length inside the file, length equal to the tensor's size) before anything is read; then, when
 * dst is not NULL, the bytes. Both paths are resolved with realpath so symlinks count. */
static ampc_status read_external(const Onnx__TensorProto *t, const char *what,
                                 const char *base_dir, void *dst, size_t nbytes,
                                 ampc_strbuf *err) {
    const char *loc = NULL, *off_s = NULL, *len_s = NULL;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (!e || !e->key) continue;
        if (!strcmp(e->key, "location")) loc = e->value;
        else if (!strcmp(e->key, "offset")) off_s = e->value;
        else if (!strcmp(e->key, "length")) len_s = e->value;
    }
    if (!loc) {
        ampc_sb_printf(err, "%s: external data has no 'location' entry", what);
        return AMPC_E_PARSE;
    }
    const char *why;
    if (!location_is_safe(loc, &why)) {
        ampc_sb_printf(err, "%s: external data location '%s' %s", what, loc, why);
        return AMPC_E_PARSE;
    }
    if (!base_dir) {
        ampc_sb_printf(err, "%s: external data '%s' needs the model's folder, and none was given "
                       "(import the model from its file, or pass base_dir)", what, loc);
        return AMPC_E_INVALID_ARG;
    }
    int64_t offset = 0, length = (int64_t)nbytes;
    if (off_s && !parse_u64(off_s, &offset)) {
        ampc_sb_printf(err, "%s: external data offset '%s' is not a non-negative integer", what,
                       off_s);
        return AMPC_E_PARSE;
    }
    if (len_s && !parse_u64(len_s, &length)) {
        ampc_sb_printf(err, "%s: external data length '%s' is not a non-negative integer", what,
                       len_s);
        return AMPC_E_PARSE;
    }
    if (length != (int64_t)nbytes) {
        ampc_sb_printf(err, "%s: external data length %lld does not match the tensor's size "
                       "(%zu bytes)", what, (long long)length, nbytes);
        return AMPC_E_PARSE;
    }

    /* Resolve both paths, symlinks included, and require the file to lie inside the folder. */
    ampc_strbuf full = {0};
    ampc_sb_printf(&full, "%s/%s", base_dir, loc);
    char *real_dir = realpath(base_dir, NULL), *real_file = realpath(full.data, NULL);
    ampc_status st = AMPC_OK;
    int fd = -1;
    if (!real_dir || !real_file) {
        ampc_sb_printf(err, "%s: cannot open external data file '%s': %s", what, full.data,
                       strerror(errno));
        st = AMPC_E_IO;
        goto done;
    }
    size_t dl = strlen(real_dir);
    bool inside = !strncmp(real_file, real_dir, dl) &&
                  (real_file[dl] == '/' || (dl == 1 && real_dir[0] == '/'));
    if (!inside) {
        ampc_sb_printf(err, "%s: external data location '%s' resolves to '%s', outside the "
                       "model's folder '%s'", what, loc, real_file, real_dir);
        st = AMPC_E_PARSE;
        goto done;
    }
    /* O_NONBLOCK: a FIFO would block open() until a writer came, hanging the import before the
     * regular-file check below could refuse it. O_NOFOLLOW: the path is resolved already; a
     * symlink put in its place since realpath() ran is refused instead of followed. */
    fd = open(real_file, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        ampc_sb_printf(err, "%s: cannot open external data file '%s': %s", what, real_file,
                       strerror(errno));
        st = AMPC_E_IO;
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        ampc_sb_printf(err, "%s: external data location '%s' is not a regular file", what, loc);
        st = AMPC_E_IO;
        goto done;
    }
    int64_t end;
    if (!ampc_add_ok(offset, length, &end) || end > (int64_t)sb.st_size) {
        ampc_sb_printf(err, "%s: external data offset %lld + length %lld runs past the end of "
                       "'%s' (%lld bytes)", what, (long long)offset, (long long)length, loc,
                       (long long)sb.st_size);
        st = AMPC_E_PARSE;
        goto done;
    }
    for (size_t got = 0; dst && got < nbytes;) {
        ssize_t r = pread(fd, (char *)dst + got, nbytes - got, (off_t)(offset + (int64_t)got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            ampc_sb_printf(err, "%s: reading external data file '%s' failed: %s", what, loc,
                           r < 0 ? strerror(errno) : "unexpected end of file");
            st = AMPC_E_IO;
            goto done;
        }
        got += (size_t)r;
    }
done:
    if (fd >= 0) close(fd);
    free(real_dir);
    free(real_file);
    ampc_sb_free(&full);
    return st;
}

/* ---- decoding ------------------------------------------------------------------------------- */

/* Bool elements are stored as 0 or 1 whatever non-zero byte the file holds. */
static void normalise_bool(uint8_t *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) p[i] = p[i] != 0;
}

/* "<what>: float_data has 3 values, expected 4 (f32[2,2])" */
static ampc_status count_mismatch(ampc_strbuf *err, const char *what, const char *field,
                                  size_t got, int64_t want, ampc_dtype dt, const ampc_shape *s) {
    char sb[AMPC_SHAPE_STR_MAX];
    ampc_sb_printf(err, "%s: %s has %zu values, expected %lld (%s%s)", what, field, got,
                   (long long)want, ampc_dtype_name(dt), ampc_shape_str(s, sb, sizeof sb));
    return AMPC_E_PARSE;
}

/* Values of a narrow dtype carried in a wider typed field (int32_data for 8- and 16-bit types
 * and the bits of f16/bf16; uint64_data for u32) must fit it: a value that would be truncated
 * is refused, naming the tensor, the index and the value. (bool reads any nonzero as true.) */
static ampc_status check_typed_range(const Onnx__TensorProto *t, const char *what, ampc_dtype dt,
                                     int64_t numel, ampc_strbuf *err) {
    int64_t lo, hi;
    switch (dt) {
    case AMPC_DTYPE_I8: lo = INT8_MIN, hi = INT8_MAX; break;
    case AMPC_DTYPE_U8: lo = 0, hi = UINT8_MAX; break;
    case AMPC_DTYPE_I16: lo = INT16_MIN, hi = INT16_MAX; break;
    case AMPC_DTYPE_U16:
    case AMPC_DTYPE_F16: /* the 16-bit pattern */
    case AMPC_DTYPE_BF16: lo = 0, hi = UINT16_MAX; break;
    case AMPC_DTYPE_U32:
        for (int64_t i = 0; i < numel; i++)
            if (t->uint64_data[i] > UINT32_MAX) {
                ampc_sb_printf(err, "%s: uint64_data[%lld] = %llu is outside the range of u32 (0 "
                               "to 4294967295)", what, (long long)i,
                               (unsigned long long)t->uint64_data[i]);
                return AMPC_E_PARSE;
            }
        return AMPC_OK;
    default: return AMPC_OK;
    }
    for (int64_t i = 0; i < numel; i++)
        if (t->int32_data[i] < lo || t->int32_data[i] > hi) {
            ampc_sb_printf(err, "%s: int32_data[%lld] = %d is outside the range of %s (%lld to "
                           "%lld%s)", what, (long long)i, (int)t->int32_data[i],
                           ampc_dtype_name(dt), (long long)lo, (long long)hi,
                           dt == AMPC_DTYPE_F16 || dt == AMPC_DTYPE_BF16 ? ": the value's bits"
                                                                         : "");
            return AMPC_E_PARSE;
        }
    return AMPC_OK;
}

ampc_status ampc_onnx_tensor_data(const Onnx__TensorProto *t, const char *what,
                                  const char *base_dir, ampc_dtype dt, const ampc_shape *s,
                                  void *dst, ampc_strbuf *err) {
    const int64_t numel = ampc_shape_numel(s);
    const size_t esz = ampc_dtype_size(dt), nbytes = (size_t)numel * esz;
    char sb[AMPC_SHAPE_STR_MAX];

    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        ampc_status st = read_external(t, what, base_dir, dst, nbytes, err);
        if (st == AMPC_OK && dst && dt == AMPC_DTYPE_BOOL) normalise_bool(dst, numel);
        return st;
    }

    /* Which typed field this dtype uses, and how many values it holds. */
    size_t n_typed = 0;
    const char *field = NULL;
    switch (dt) {
    case AMPC_DTYPE_F32: n_typed = t->n_float_data, field = "float_data"; break;
    case AMPC_DTYPE_F64: n_typed = t->n_double_data, field = "double_data"; break;
    case AMPC_DTYPE_I64: n_typed = t->n_int64_data, field = "int64_data"; break;
    case AMPC_DTYPE_U32:
    case AMPC_DTYPE_U64: n_typed = t->n_uint64_data, field = "uint64_data"; break;
    default: n_typed = t->n_int32_data, field = "int32_data"; break;
    }

    /* Data in raw_data and in a typed field is ambiguous: neither silently wins. */
    size_t n_any = t->n_float_data + t->n_double_data + t->n_int32_data + t->n_int64_data +
                   t->n_uint64_data;
    if (t->has_raw_data && t->raw_data.len > 0 && n_any > 0) {
        ampc_sb_printf(err, "%s holds data twice, %zu bytes in raw_data and %zu values in a typed "
                       "field (float_data, int32_data...): which one is meant is ambiguous; a "
                       "tensor keeps its data in one of them", what, t->raw_data.len, n_any);
        return AMPC_E_PARSE;
    }
    /* raw_data is used when it holds bytes, or when no typed field does (an empty tensor). */
    if ((t->has_raw_data && t->raw_data.len > 0) || n_typed == 0) {
        size_t got = t->has_raw_data ? t->raw_data.len : 0;
        if (got != nbytes) {
            if (!got && numel)
                ampc_sb_printf(err, "%s has no data (%s%s needs %zu bytes in raw_data, %s or "
                               "external data)", what, ampc_dtype_name(dt),
                               ampc_shape_str(s, sb, sizeof sb), nbytes, field);
            else
                ampc_sb_printf(err, "%s: raw_data has %zu bytes, expected %zu (%s%s)", what, got,
                               nbytes, ampc_dtype_name(dt), ampc_shape_str(s, sb, sizeof sb));
            return AMPC_E_PARSE;
        }
        if (!dst) return AMPC_OK;
        if (nbytes) memcpy(dst, t->raw_data.data, nbytes);
        if (dt == AMPC_DTYPE_BOOL) normalise_bool(dst, numel);
        return AMPC_OK;
    }
    if (n_typed != (size_t)numel) return count_mismatch(err, what, field, n_typed, numel, dt, s);
    ampc_status st = check_typed_range(t, what, dt, numel, err);
    if (st != AMPC_OK || !dst) return st;

    switch (dt) {
    case AMPC_DTYPE_F32: memcpy(dst, t->float_data, nbytes); break;
    case AMPC_DTYPE_F64: memcpy(dst, t->double_data, nbytes); break;
    case AMPC_DTYPE_I64: memcpy(dst, t->int64_data, nbytes); break;
    case AMPC_DTYPE_U64: memcpy(dst, t->uint64_data, nbytes); break;
    case AMPC_DTYPE_U32:
        for (int64_t i = 0; i < numel; i++) ((uint32_t *)dst)[i] = (uint32_t)t->uint64_data[i];
        break;
    case AMPC_DTYPE_I32: memcpy(dst, t->int32_data, nbytes); break;
    case AMPC_DTYPE_I16:
    case AMPC_DTYPE_U16:
    case AMPC_DTYPE_F16: /* the 16-bit pattern in the low half of each int32 */
    case AMPC_DTYPE_BF16:
        for (int64_t i = 0; i < numel; i++) ((uint16_t *)dst)[i] = (uint16_t)t->int32_data[i];
        break;
    case AMPC_DTYPE_I8:
    case AMPC_DTYPE_U8:
        for (int64_t i = 0; i < numel; i++) ((uint8_t *)dst)[i] = (uint8_t)t->int32_data[i];
        break;
    case AMPC_DTYPE_BOOL:
        for (int64_t i = 0; i < numel; i++) ((uint8_t *)dst)[i] = t->int32_data[i] != 0;
        break;
    default: AMPC_ASSERT(!"unhandled dtype");
    }
    return AMPC_OK;
}

int64_t ampc_onnx_tensor_nbytes(const Onnx__TensorProto *t) {
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        for (size_t i = 0; i < t->n_external_data; i++) {
            const Onnx__StringStringEntryProto *e = t->external_data[i];
            int64_t v;
            if (e && e->key && !strcmp(e->key, "length") && parse_u64(e->value, &v)) return v;
        }
    }
    ampc_dtype dt = ampc_dtype_from_onnx(t->has_data_type ? t->data_type : 0);
    int64_t numel = 1;
    for (size_t i = 0; i < t->n_dims; i++)
        if (t->dims[i] < 0 || !ampc_mul_ok(numel, t->dims[i], &numel)) return 0;
    int64_t bytes;
    if (!ampc_mul_ok(numel, (int64_t)(dt ? ampc_dtype_size(dt) : 0), &bytes)) return 0;
    if (!bytes && t->has_raw_data) return (int64_t)t->raw_data.len;
    return bytes;
}

/* ---- files ---------------------------------------------------------------------------------- */

static char *take_err(ampc_strbuf *sb) { return ampc_sb_take(sb); }

/* Hands a message to the caller's err (or drops it when err is NULL). */
static void set_err(char **err, ampc_strbuf *sb) {
    if (err) *err = take_err(sb);
    else ampc_sb_free(sb);
}

/* Reads a whole regular file into a malloc'ed buffer. A file above max_bytes is refused before
 * anything is allocated; `what` then names what the limit is for. */
static ampc_status slurp(const char *path, int64_t max_bytes, const char *what, uint8_t **out,
                         size_t *len, ampc_strbuf *err) {
    *out = NULL;
    *len = 0;
    /* O_NONBLOCK so that a FIFO is refused below instead of blocking open() forever. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        ampc_sb_printf(err, "cannot open '%s': %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return AMPC_E_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        ampc_sb_printf(err, "cannot read '%s': not a regular file", path);
        close(fd);
        return AMPC_E_IO;
    }
    if ((int64_t)st.st_size > max_bytes) {
        ampc_sb_printf(err, "'%s' is %lld bytes, more than %s", path, (long long)st.st_size, what);
        close(fd);
        return AMPC_E_PARSE;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        ampc_sb_printf(err, "out of host memory reading '%s' (%zu bytes)", path, n);
        close(fd);
        return AMPC_E_OOM;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) {
        ampc_sb_printf(err, "reading '%s' failed after %zu of %zu bytes", path, got, n);
        free(buf);
        return AMPC_E_IO;
    }
    *out = buf;
    *len = n;
    return AMPC_OK;
}

/* Shared with import.c (contracts in onnx_internal.h). */
ampc_status ampc_onnx_slurp(const char *path, uint8_t **out, size_t *len, ampc_strbuf *err) {
    return slurp(path, AMPC_ONNX_MODEL_MAX_BYTES,
                 "an ONNX model file can hold (2 GiB, protobuf's limit); larger models keep their "
                 "weights in external data files",
                 out, len, err);
}

/* The folder part of a path ("." when there is none); malloc'ed. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return ampc_xstrdup(".");
    if (slash == path) return ampc_xstrdup("/");
    size_t n = (size_t)(slash - path);
    char *d = ampc_xmalloc(n + 1);
    memcpy(d, path, n);
    d[n] = 0;
    return d;
}

char *ampc_onnx_dir_of(const char *path) { return dir_of(path); }

/* A TensorProto file: the wire walk, the unpack, the dtype and shape, a check that the data the
 * dims claim is there, then one allocation and the decode (external data next to the file). */
static ampc_status read_pb(const char *path, const uint8_t *buf, size_t len, ampc_tensor *t,
                           char **name, ampc_strbuf *err) {
    ampc_strbuf why = {0};
    if (!ampc_onnx_pb_check(buf, len, &onnx__tensor_proto__descriptor, &why)) {
        ampc_sb_printf(err, "'%s' is neither a numpy .npy file nor an ONNX TensorProto: %s", path,
                       why.data);
        ampc_sb_free(&why);
        return AMPC_E_PARSE;
    }
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
    if (!tp) {
        ampc_sb_printf(err, "'%s' is neither a numpy .npy file nor an ONNX TensorProto", path);
        return AMPC_E_PARSE;
    }
    ampc_strbuf what = {0};
    ampc_sb_printf(&what, "tensor '%s' in '%s'", tp->name ? tp->name : "", path);
    ampc_status st = ampc_onnx_tensor_type(tp, what.data, &t->dtype, &t->shape, err);
    char *dir = dir_of(path);
    /* Check that the data is there before allocating what the dims claim. */
    if (st == AMPC_OK)
        st = ampc_onnx_tensor_data(tp, what.data, dir, t->dtype, &t->shape, NULL, err);
    if (st == AMPC_OK) {
        size_t nb = (size_t)ampc_shape_numel(&t->shape) * ampc_dtype_size(t->dtype);
        t->data = malloc(nb ? nb : 1);
        if (!t->data) {
            ampc_sb_printf(err, "out of host memory for %s (%zu bytes)", what.data, nb);
            st = AMPC_E_OOM;
        } else {
            st = ampc_onnx_tensor_data(tp, what.data, dir, t->dtype, &t->shape, t->data, err);
        }
    }
    free(dir);
    if (st == AMPC_OK && name) *name = ampc_xstrdup(tp->name ? tp->name : "");
    ampc_sb_free(&what);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return st;
}

/* numpy descr strings and the dtypes they stand for. */
static const struct {
    const char *descr;
    ampc_dtype dt;
} npy_types[] = {
    {"<f4", AMPC_DTYPE_F32}, {"<f8", AMPC_DTYPE_F64}, {"<f2", AMPC_DTYPE_F16},
    {"<i8", AMPC_DTYPE_I64}, {"<i4", AMPC_DTYPE_I32}, {"<i2", AMPC_DTYPE_I16},
    {"|i1", AMPC_DTYPE_I8},  {"<i1", AMPC_DTYPE_I8},  {"<u8", AMPC_DTYPE_U64},
    {"<u4", AMPC_DTYPE_U32}, {"<u2", AMPC_DTYPE_U16}, {"|u1", AMPC_DTYPE_U8},
    {"<u1", AMPC_DTYPE_U8},  {"|b1", AMPC_DTYPE_BOOL}, {"<b1", AMPC_DTYPE_BOOL},
};

/* A cursor over the header text: a Python dict literal such as
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } */
typedef struct npy_cur {
    const char *p, *end;
} npy_cur;

/* Skips blanks. */
static void npy_ws(npy_cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}
/* Consumes `ch` (after blanks) when it is next. */
static bool npy_eat(npy_cur *c, char ch) {
    npy_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}
/* A quoted string ('...' or "...", no escapes: numpy writes none) into buf. */
static bool npy_str(npy_cur *c, char *buf, size_t n) {
    npy_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
    char q = *c->p++;
    size_t k = 0;
    while (c->p < c->end && *c->p != q) {
        if (k + 1 >= n) return false;
        buf[k++] = *c->p++;
    }
    if (c->p >= c->end) return false;
    c->p++;
    buf[k] = 0;
    return true;
}
/* Consumes the bare word `w` (True, False) when it is next. */
static bool npy_word(npy_cur *c, const char *w) {
    npy_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && !memcmp(c->p, w, n)) {
        c->p += n;
        return true;
    }
    return false;
}

/* A .npy file: "\x93NUMPY", major and minor version bytes, the header length (2 bytes little-
 * endian in 1.0, 4 in 2.0 and 3.0), the header (a Python dict literal, padded with spaces and a
 * newline), then the raw C-order data, which must be exactly what the header describes. */
static ampc_status read_npy(const char *path, const uint8_t *buf, size_t len, ampc_tensor *t,
                            char **name, ampc_strbuf *err) {
    /* Magic, version, header length (2 bytes in 1.0, 4 bytes in 2.0 and 3.0). */
    if (len < 10) goto truncated;
    int major = buf[6];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) goto truncated;
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        hstart = 12;
    } else {
        ampc_sb_printf(err, "'%s': numpy format version %d.%d is not supported (1.0 to 3.0 are)",
                       path, major, buf[7]);
        return AMPC_E_UNSUPPORTED;
    }
    if (hlen > len - hstart) goto truncated;

    npy_cur c = {(const char *)buf + hstart, (const char *)buf + hstart + hlen};
    char key[32], descr[32] = "";
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    ampc_shape s = {0};
    if (!npy_eat(&c, '{')) goto bad_header;
    while (!npy_eat(&c, '}')) {
        if (!npy_str(&c, key, sizeof key) || !npy_eat(&c, ':')) goto bad_header;
        if (!strcmp(key, "descr")) {
            if (!npy_str(&c, descr, sizeof descr)) goto bad_header;
            have_descr = true;
        } else if (!strcmp(key, "fortran_order")) {
            if (npy_word(&c, "True")) fortran = true;
            else if (!npy_word(&c, "False")) goto bad_header;
            have_order = true;
        } else if (!strcmp(key, "shape")) {
            if (!npy_eat(&c, '(')) goto bad_header;
            while (!npy_eat(&c, ')')) {
                npy_ws(&c);
                int64_t v = 0;
                const char *digits = c.p;
                while (c.p < c.end && *c.p >= '0' && *c.p <= '9')
                    if (!ampc_mul_ok(v, 10, &v) || !ampc_add_ok(v, *c.p++ - '0', &v)) {
                        ampc_sb_printf(err, "'%s': a dimension in the numpy header overflows 64 "
                                       "bits", path);
                        return AMPC_E_OVERFLOW;
                    }
                if (c.p == digits) goto bad_header;
                if (c.p < c.end && *c.p == 'L') c.p++; /* Python 2 long */
                if (s.rank == AMPC_MAX_RANK) {
                    ampc_sb_printf(err, "'%s': the array has more than %d dimensions", path,
                                   AMPC_MAX_RANK);
                    return AMPC_E_UNSUPPORTED;
                }
                s.dims[s.rank++] = v;
                if (!npy_eat(&c, ',')) {
                    if (!npy_eat(&c, ')')) goto bad_header;
                    break;
                }
            }
            have_shape = true;
        } else {
            goto bad_header;
        }
        if (!npy_eat(&c, ',')) {
            if (!npy_eat(&c, '}')) goto bad_header;
            break;
        }
    }
    if (!have_descr || !have_order || !have_shape) goto bad_header;
    if (fortran) {
        ampc_sb_printf(err, "'%s' holds a Fortran-order (column-major) array; ampc reads C order "
                       "only (save it with np.ascontiguousarray)", path);
        return AMPC_E_UNSUPPORTED;
    }
    ampc_dtype dt = AMPC_DTYPE_UNDEFINED;
    for (int i = 0; i < AMPC_ARRAY_LEN(npy_types); i++)
        if (!strcmp(descr, npy_types[i].descr)) dt = npy_types[i].dt;
    if (dt == AMPC_DTYPE_UNDEFINED) {
        if (descr[0] == '>')
            ampc_sb_printf(err, "'%s' holds big-endian data ('%s'); ampc reads little-endian "
                           "('<') data only", path, descr);
        else
            ampc_sb_printf(err, "'%s' has numpy type '%s', which ampc does not support (it reads "
                           "f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1; numpy has no bfloat16: use a "
                           ".pb file)", path, descr);
        return AMPC_E_UNSUPPORTED;
    }
    int64_t numel = 1, nbytes;
    for (int32_t i = 0; i < s.rank; i++)
        if (!ampc_mul_ok(numel, s.dims[i], &numel)) goto overflow;
    if (!ampc_mul_ok(numel, (int64_t)ampc_dtype_size(dt), &nbytes)) goto overflow;
    size_t data_at = hstart + hlen;
    if ((uint64_t)nbytes != (uint64_t)(len - data_at)) {
        char sb[AMPC_SHAPE_STR_MAX];
        ampc_sb_printf(err, "'%s': the header says %s%s (%lld bytes of data), but the file holds "
                       "%zu bytes after the header", path, descr, ampc_shape_str(&s, sb, sizeof sb),
                       (long long)nbytes, len - data_at);
        return AMPC_E_PARSE;
    }
    t->dtype = dt;
    t->shape = s;
    t->data = malloc(nbytes ? (size_t)nbytes : 1);
    if (!t->data) {
        ampc_sb_printf(err, "out of host memory reading '%s' (%lld bytes)", path,
                       (long long)nbytes);
        return AMPC_E_OOM;
    }
    if (nbytes) memcpy(t->data, buf + data_at, (size_t)nbytes);
    if (dt == AMPC_DTYPE_BOOL) normalise_bool(t->data, numel);
    if (name) {
        const char *b = strrchr(path, '/');
        b = b ? b + 1 : path;
        const char *dot = strrchr(b, '.');
        size_t n = dot && dot != b ? (size_t)(dot - b) : strlen(b);
        *name = ampc_xmalloc(n + 1);
        memcpy(*name, b, n);
        (*name)[n] = 0;
    }
    return AMPC_OK;
truncated:
    ampc_sb_printf(err, "'%s': the numpy header is truncated (%zu bytes in the file)", path, len);
    return AMPC_E_PARSE;
bad_header:
    ampc_sb_printf(err, "'%s': the numpy header is not a dict with 'descr', 'fortran_order' and "
                   "'shape' (at header byte %zu)", path,
                   (size_t)(c.p - ((const char *)buf + hstart)));
    return AMPC_E_PARSE;
overflow:
    ampc_sb_printf(err, "'%s': the array's size overflows 64 bits", path);
    return AMPC_E_OVERFLOW;
}

/* Public entry points (contracts in ampc.h). A file is .npy when it starts with the numpy magic;
 * a .npy name without it is an error, anything else is read as a TensorProto. */
ampc_status ampc_tensor_read_file(const char *path, ampc_tensor *t, char **name, char **err) {
    if (err) *err = NULL;
    if (name) *name = NULL;
    if (!t) return AMPC_E_INVALID_ARG;
    memset(t, 0, sizeof *t);
    ampc_strbuf sb = {0};
    if (!path) {
        ampc_sb_puts(&sb, "ampc_tensor_read_file: path is NULL");
        set_err(err, &sb);
        return AMPC_E_INVALID_ARG;
    }
    uint8_t *buf;
    size_t len;
    ampc_status st = slurp(path, INT64_MAX, "", &buf, &len, &sb);
    if (st == AMPC_OK) {
        size_t pl = strlen(path);
        bool npy_ext = pl >= 4 && !strcmp(path + pl - 4, ".npy");
        if (len >= 6 && !memcmp(buf, "\x93NUMPY", 6)) {
            st = read_npy(path, buf, len, t, name, &sb);
        } else if (npy_ext) {
            ampc_sb_printf(&sb, "'%s' is not a numpy .npy file: it does not start with the "
                           "\\x93NUMPY magic", path);
            st = AMPC_E_PARSE;
        } else {
            st = read_pb(path, buf, len, t, name, &sb);
        }
        free(buf);
    }
    if (st != AMPC_OK) {
        free(t->data);
        memset(t, 0, sizeof *t);
        set_err(err, &sb);
    } else {
        ampc_sb_free(&sb);
    }
    return st;
}

/* Checks a tensor handed to a writer: dtype, rank, dims, size, data. */
static bool tensor_ok(const ampc_tensor *t, size_t *nbytes, ampc_strbuf *err) {
    if (!t || t->dtype <= AMPC_DTYPE_UNDEFINED || t->dtype >= AMPC_DTYPE_COUNT ||
        t->shape.rank < 0 || t->shape.rank > AMPC_MAX_RANK) {
        ampc_sb_puts(err, "the tensor has an invalid dtype or rank");
        return false;
    }
    int64_t numel = 1, nb;
    for (int32_t i = 0; i < t->shape.rank; i++)
        if (t->shape.dims[i] < 0 || !ampc_mul_ok(numel, t->shape.dims[i], &numel)) {
            ampc_sb_puts(err, "the tensor has a negative dimension or a size that overflows");
            return false;
        }
    if (!ampc_mul_ok(numel, (int64_t)ampc_dtype_size(t->dtype), &nb)) {
        ampc_sb_puts(err, "the tensor's size overflows 64 bits");
        return false;
    }
    if (nb && !t->data) {
        ampc_sb_puts(err, "the tensor's data is NULL");
        return false;
    }
    *nbytes = (size_t)nb;
    return true;
}

/* Creates `path` and writes a then b; errors name the file and the system's reason. */
static ampc_status write_all(const char *path, const void *a, size_t na, const void *b, size_t nb,
                             ampc_strbuf *err) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        ampc_sb_printf(err, "cannot create '%s': %s", path, strerror(errno));
        return AMPC_E_IO;
    }
    bool ok = fwrite(a, 1, na, f) == na && (!nb || fwrite(b, 1, nb, f) == nb);
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        ampc_sb_printf(err, "writing '%s' failed: %s", path, strerror(errno));
        return AMPC_E_IO;
    }
    return AMPC_OK;
}

ampc_status ampc_tensor_write_npy(const char *path, const ampc_tensor *t, char **err) {
    if (err) *err = NULL;
    ampc_strbuf sb = {0};
    size_t nbytes;
    if (!path || !tensor_ok(t, &nbytes, &sb)) {
        if (!path) ampc_sb_puts(&sb, "ampc_tensor_write_npy: path is NULL");
        set_err(err, &sb);
        return AMPC_E_INVALID_ARG;
    }
    ampc_dtype dt = t->dtype == AMPC_DTYPE_BF16 ? AMPC_DTYPE_F32 : t->dtype;
    const char *descr = NULL;
    for (int i = 0; i < AMPC_ARRAY_LEN(npy_types) && !descr; i++)
        if (npy_types[i].dt == dt) descr = npy_types[i].descr;
    AMPC_ASSERT(descr);

    /* Header: magic, version 1.0, length, dict padded with spaces to a 64-byte boundary. */
    ampc_strbuf h = {0};
    ampc_sb_printf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int32_t i = 0; i < t->shape.rank; i++) /* numpy's tuples: (3,) and (2, 3) */
        ampc_sb_printf(&h, "%lld%s", (long long)t->shape.dims[i],
                       t->shape.rank == 1 ? "," : i + 1 < t->shape.rank ? ", " : "");
    ampc_sb_puts(&h, "), }");
    while ((10 + h.len + 1) % 64) ampc_sb_putc(&h, ' ');
    ampc_sb_putc(&h, '\n');
    size_t total = 10 + h.len;
    uint8_t *head = ampc_xmalloc(total);
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    head[8] = (uint8_t)(h.len & 0xff);
    head[9] = (uint8_t)(h.len >> 8);
    memcpy(head + 10, h.data, h.len);
    ampc_sb_free(&h);

    const void *body = t->data;
    float *widened = NULL;
    if (t->dtype == AMPC_DTYPE_BF16) { /* numpy has no bfloat16: widen, exactly, to f32 */
        int64_t n = ampc_shape_numel(&t->shape);
        widened = malloc((size_t)(n ? n : 1) * sizeof *widened);
        if (!widened) {
            free(head);
            ampc_sb_puts(&sb, "out of host memory widening bf16 to f32");
            set_err(err, &sb);
            return AMPC_E_OOM;
        }
        for (int64_t i = 0; i < n; i++)
            widened[i] = ampc_bf16_to_f32(((const uint16_t *)t->data)[i]);
        body = widened;
        nbytes = (size_t)n * sizeof *widened;
    }
    ampc_status st = write_all(path, head, total, body, nbytes, &sb);
    free(head);
    free(widened);
    if (st != AMPC_OK) set_err(err, &sb);
    else ampc_sb_free(&sb);
    return st;
}

ampc_status ampc_tensor_write_pb(const char *path, const ampc_tensor *t, const char *name,
                                 char **err) {
    if (err) *err = NULL;
    ampc_strbuf sb = {0};
    size_t nbytes;
    if (!path || !tensor_ok(t, &nbytes, &sb)) {
        if (!path) ampc_sb_puts(&sb, "ampc_tensor_write_pb: path is NULL");
        set_err(err, &sb);
        return AMPC_E_INVALID_ARG;
    }
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    int64_t dims[AMPC_MAX_RANK];
    for (int32_t i = 0; i < t->shape.rank; i++) dims[i] = t->shape.dims[i];
    tp.n_dims = (size_t)t->shape.rank;
    tp.dims = dims;
    tp.has_data_type = 1;
    tp.data_type = ampc_dtype_to_onnx(t->dtype);
    tp.name = (char *)(name ? name : "");
    tp.has_raw_data = 1;
    tp.raw_data.len = nbytes;
    tp.raw_data.data = t->data;
    size_t n = onnx__tensor_proto__get_packed_size(&tp);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        ampc_sb_printf(&sb, "out of host memory serialising '%s' (%zu bytes)", path, n);
        set_err(err, &sb);
        return AMPC_E_OOM;
    }
    onnx__tensor_proto__pack(&tp, buf);
    ampc_status st = write_all(path, buf, n, NULL, 0, &sb);
    free(buf);
    if (st != AMPC_OK) set_err(err, &sb);
    else ampc_sb_free(&sb);
    return st;
}
