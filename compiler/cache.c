/*
 * cache.c — the on-disk cache of compiled images (PTX and cubins) that compiler/nvrtc.c keeps,
 * and the SHA-256 its keys are made with.
 *
 * One entry is one file <dir>/<key>.<target>.<ptx|cubin>, holding a 48-byte header and the
 * payload:
 *     bytes 0..7    "AMPCIMG1"             magic and format version
 *     bytes 8..15   payload length          little-endian uint64
 *     bytes 16..47  SHA-256 of the payload
 * Entries are written to a temporary file in the same directory and renamed into place, which
 * POSIX makes atomic: a reader sees the old entry or the new one, never a mix, so two processes
 * compiling the same model at once are safe, and a process killed mid-write leaves at most a
 * stray temporary (".<name>.PID.XXXXXX", which ampc_cache_sweep removes once PID is gone), never
 * a torn entry. Anything that still fails the header
 * check (a truncated copy, a disk error) is treated as a miss and rewritten by the caller.
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp, fchmod, strdup, kill */
#include "compiler/nvrtc.h"

#include "ir/base.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- SHA-256 (FIPS 180-4) ------------------------------------------------------------------- */

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror32(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* Mixes one 64-byte block into the state. */
static void sha_block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25)) + ((e & f) ^ (~e & g)) +
                      sha_k[i] + w[i];
        uint32_t t2 = (ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

void ampc_sha256_init(ampc_sha256 *s) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->bytes = 0;
    s->fill = 0;
}

void ampc_sha256_update(ampc_sha256 *s, const void *data, size_t n) {
    const uint8_t *p = data;
    s->bytes += n;
    if (s->fill) {
        size_t take = AMPC_MIN(n, (size_t)(64 - s->fill));
        memcpy(s->buf + s->fill, p, take);
        s->fill += (uint32_t)take;
        p += take;
        n -= take;
        if (s->fill < 64) return;
        sha_block(s->h, s->buf);
        s->fill = 0;
    }
    for (; n >= 64; p += 64, n -= 64) sha_block(s->h, p);
    if (n) memcpy(s->buf, p, n);
    s->fill = (uint32_t)n;
}

void ampc_sha256_final(ampc_sha256 *s, uint8_t out[32]) {
    uint64_t bits = s->bytes * 8;
    uint8_t pad[72] = {0x80};
    size_t padlen = (s->fill < 56 ? 56 : 120) - s->fill;
    for (int i = 0; i < 8; i++) pad[padlen + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
    ampc_sha256_update(s, pad, padlen + 8);
    AMPC_ASSERT(s->fill == 0);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) out[4 * i + j] = (uint8_t)(s->h[i] >> (24 - 8 * j));
}

/* ---- directory ------------------------------------------------------------------------------ */

char *ampc_cache_dir_resolve(const char *dir) {
    if (dir) return *dir ? ampc_xstrdup(dir) : NULL;
    const char *env = getenv("AMPC_CACHE_DIR");
    if (env) return *env ? ampc_xstrdup(env) : NULL;
    ampc_strbuf sb = {0};
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') ampc_sb_printf(&sb, "%s/ampc", xdg); /* the spec ignores relative */
    else if (home && *home) ampc_sb_printf(&sb, "%s/.cache/ampc", home);
    else return NULL;
    return ampc_sb_take(&sb);
}

bool ampc_cache_mkdirs(const char *dir) {
    if (!*dir) {
        errno = ENOENT;
        return false;
    }
    char *path = ampc_xstrdup(dir);
    bool ok = true;
    for (char *p = path + 1; ok; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) ok = false;
        *p = c;
        if (!c) break;
    }
    struct stat st;
    if (ok && stat(path, &st) != 0) ok = false;
    else if (ok && !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        ok = false;
    }
    free(path);
    return ok;
}

/* ---- entries -------------------------------------------------------------------------------- */

enum { HEADER_BYTES = 48 };
static const char cache_magic[8] = {'A', 'M', 'P', 'C', 'I', 'M', 'G', '1'};

static void put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void sha_of(const void *data, size_t n, uint8_t out[32]) {
    ampc_sha256 s;
    ampc_sha256_init(&s);
    ampc_sha256_update(&s, data, n);
    ampc_sha256_final(&s, out);
}

/* Reads exactly n bytes (retrying short reads); false on error or early end of file. */
static bool read_full(int fd, void *buf, size_t n) {
    uint8_t *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

static bool write_full(int fd, const void *buf, size_t n) {
    const uint8_t *p = buf;
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

bool ampc_cache_get(const char *dir, const char *name, void **data, int64_t *size) {
    *data = NULL;
    *size = 0;
    ampc_strbuf path = {0};
    ampc_sb_printf(&path, "%s/%s", dir, name);
    int fd = open(path.data, O_RDONLY | O_CLOEXEC);
    ampc_sb_free(&path);
    if (fd < 0) return false;
    bool ok = false;
    uint8_t *payload = NULL;
    uint8_t head[HEADER_BYTES], sum[32];
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < HEADER_BYTES) goto done;
    if (!read_full(fd, head, HEADER_BYTES) || memcmp(head, cache_magic, 8) != 0) goto done;
    uint64_t n = get_le64(head + 8);
    if (n != (uint64_t)st.st_size - HEADER_BYTES) goto done; /* truncated or grown */
    payload = malloc(n ? n : 1);
    if (!payload || !read_full(fd, payload, n)) goto done;
    sha_of(payload, n, sum);
    if (memcmp(sum, head + 16, 32) != 0) goto done;
    *data = payload;
    *size = (int64_t)n;
    payload = NULL;
    ok = true;
done:
    free(payload);
    close(fd);
    return ok;
}

/* The pid written at s, digits up to the character `stop` (NUL: the end), when its process is
 * gone (kill(pid, 0) fails with ESRCH); 0 otherwise: not such digits, this process, alive, or
 * liveness unknown (EPERM: another user's process). *end: past the digits. */
long ampc_dead_pid_at(const char *s, char stop, const char **end) {
    size_t n = strspn(s, "0123456789");
    *end = s + n;
    if (n == 0 || n > 10 || *s == '0' || s[n] != stop) return 0;
    errno = 0;
    long long pid = strtoll(s, NULL, 10);
    if (errno || pid > INT_MAX || (pid_t)pid == getpid()) return 0;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) return 0;
    return (long)pid;
}

/* Removes the temporaries .<name>.PID.XXXXXX of writers killed mid-write: regular files whose
 * PID no longer runs. Errors are ignored: tidying, never a reason to fail. */
void ampc_cache_sweep(const char *dir) {
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name, *end;
        const char *dot = name[0] == '.' ? strchr(name + 1, '.') : NULL;
        /* .<key>.<target>.<kind>.PID.XXXXXX: the pid is the last dot-field but one */
        const char *tail = dot ? strrchr(name, '.') : NULL;
        if (!tail || strlen(tail) != 7) continue;
        const char *p = tail - 1;
        while (p > name && *p != '.') p--;
        if (p <= dot || !ampc_dead_pid_at(p + 1, '.', &end) || end != tail) continue;
        struct stat st;
        if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            (void)unlinkat(dirfd(d), name, 0);
    }
    closedir(d);
}

bool ampc_cache_put(const char *dir, const char *name, const void *data, int64_t size) {
    AMPC_ASSERT(size >= 0);
    uint8_t head[HEADER_BYTES];
    memcpy(head, cache_magic, 8);
    put_le64(head + 8, (uint64_t)size);
    sha_of(data, (size_t)size, head + 16);

    ampc_strbuf tmp = {0}, final = {0};
    ampc_sb_printf(&tmp, "%s/.%s.%ld.XXXXXX", dir, name, (long)getpid());
    ampc_sb_printf(&final, "%s/%s", dir, name);
    bool ok = false;
    int fd = mkstemp(tmp.data);
    if (fd >= 0) {
        /* mkstemp makes 0600; entries are plain build products, readable like any other. */
        ok = fchmod(fd, 0644) == 0 && write_full(fd, head, HEADER_BYTES) &&
             write_full(fd, data, (size_t)size);
        ok = (close(fd) == 0) && ok;
        if (ok) ok = rename(tmp.data, final.data) == 0;
        if (!ok) unlink(tmp.data);
    }
    ampc_sb_free(&tmp);
    ampc_sb_free(&final);
    return ok;
}
