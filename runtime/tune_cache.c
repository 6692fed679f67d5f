/*
 * tune_cache.c — the tuning cache: the algorithm each library step chose by timing at model
 * creation, kept in a text file so that the next creation on the same GPU with the same library
 * takes the same choice without timing again. Timings a few microseconds apart pick differently
 * from one creation to the next (a ResNet-50 at batch 1 measured 0.346 to 0.400 ms from three
 * creations of one library); with the cache the first choice holds until the file goes.
 *
 * The file: AMPC_TUNE_CACHE names it; "off" (or empty) turns the cache off; by default
 * $XDG_CACHE_HOME/ampc/tuning.txt, else $HOME/.cache/ampc/tuning.txt. One entry a line,
 * "KEY<tab>VALUE"; the key names the GPU (name, compute capability), the library and its
 * version, and the problem (every field that decides the choice), the value is the provider's
 * (an algorithm number, an engine configuration's place in cuDNN's heuristics list). Lines that
 * do not parse are skipped, a later entry for a key replaces an earlier one, and an entry whose
 * choice no longer runs sends the provider back to timing. Writing takes the file's entries
 * first (another process may have added some), then replaces the file through a temporary file
 * and a rename, so a reader never sees half a file. A cache that cannot be read or written
 * costs the timing and nothing else: no error reaches the caller (AMPC_TUNE_VERBOSE=1 says
 * what happened on stderr).
 */
#define _POSIX_C_SOURCE 200809L
#include "runtime/internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { TUNE_KEY_MAX = 512, TUNE_VAL_MAX = 128 };

typedef struct tune_entry {
    char *key, *val;
} tune_entry;

static pthread_mutex_t tune_mutex = PTHREAD_MUTEX_INITIALIZER;
static tune_entry *entries;
static int32_t n_entries, cap_entries;
static bool loaded;

/* The process's AMPC_TUNE_VERBOSE (the cache is the process's, not a model's). */
static bool verbose(void) { return rt_env_tune_verbose(); }

/* The cache file's path into buf, or false when the cache is off. */
static bool cache_path(char *buf, size_t n) { return rt_env_tune_cache_path(buf, n); }

static tune_entry *find(const char *key) {
    for (int32_t i = 0; i < n_entries; i++)
        if (strcmp(entries[i].key, key) == 0) return &entries[i];
    return NULL;
}

/* Sets key to val in memory; false on OOM. */
static bool set(const char *key, const char *val) {
    tune_entry *t = find(key);
    if (t) {
        char *v = strdup(val);
        if (!v) return false;
        free(t->val);
        t->val = v;
        return true;
    }
    if (n_entries == cap_entries) {
        int32_t cap = cap_entries ? 2 * cap_entries : 64;
        tune_entry *grown = realloc(entries, (size_t)cap * sizeof *grown);
        if (!grown) return false;
        entries = grown, cap_entries = cap;
    }
    char *k = strdup(key), *v = strdup(val);
    if (!k || !v) {
        free(k);
        free(v);
        return false;
    }
    entries[n_entries++] = (tune_entry){k, v};
    return true;
}

/* Reads the file's entries into memory (those of keys already held are replaced). */
static void read_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        if (verbose() && errno != ENOENT)
            rt_log("tuning cache %s not read: %s", path, strerror(errno));
        return;
    }
    char line[TUNE_KEY_MAX + TUNE_VAL_MAX + 4];
    while (fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n') { /* too long: skip to the line's end */
            int c;
            while (len && (c = fgetc(f)) != EOF && c != '\n') {}
            continue;
        }
        line[len - 1] = '\0';
        char *tab = strchr(line, '\t');
        if (line[0] == '#' || !tab || tab == line || tab[1] == '\0' || strchr(tab + 1, '\t')) continue;
        *tab = '\0';
        (void)set(line, tab + 1);
    }
    fclose(f);
}

static void load_once(void) {
    char path[4096];
    if (loaded) return;
    loaded = true;
    if (cache_path(path, sizeof path)) read_file(path);
}

/* mkdir -p of path's folder. */
static void make_folder(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            (void)mkdir(dir, 0755);
            *p = '/';
        }
    (void)mkdir(dir, 0755);
}

/* Writes every entry to path through a temporary file and a rename. */
static void write_file(const char *path) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    make_folder(path);
    FILE *f = fopen(tmp, "w");
    bool ok = f != NULL && fprintf(f, "# ampc tuning cache: KEY<tab>VALUE a line (runtime/tune_cache.c)\n") > 0;
    for (int32_t i = 0; ok && i < n_entries; i++)
        ok = fprintf(f, "%s\t%s\n", entries[i].key, entries[i].val) > 0;
    if (f && fclose(f) != 0) ok = false;
    if (ok && rename(tmp, path) == 0) return;
    if (verbose()) rt_log("tuning cache %s not written: %s", path, strerror(errno));
    (void)remove(tmp);
}

bool rt_tune_get(const char *key, char *val, size_t n) {
    pthread_mutex_lock(&tune_mutex);
    load_once();
    const tune_entry *t = find(key);
    bool hit = t && strlen(t->val) < n;
    if (hit) memcpy(val, t->val, strlen(t->val) + 1);
    pthread_mutex_unlock(&tune_mutex);
    if (verbose()) rt_log("tuning cache %s: %s", hit ? "hit" : "miss", key);
    return hit;
}

void rt_tune_put(const char *key, const char *val) {
    char path[4096];
    if (strlen(key) >= TUNE_KEY_MAX || strlen(val) >= TUNE_VAL_MAX || strpbrk(key, "\t\n") ||
        strpbrk(val, "\t\n") || key[0] == '#' || !cache_path(path, sizeof path))
        return;
    pthread_mutex_lock(&tune_mutex);
    load_once();
    read_file(path); /* what other processes wrote since */
    if (set(key, val)) write_file(path);
    pthread_mutex_unlock(&tune_mutex);
}

bool ampc_rt_tuning_cache(char *path, size_t n, int32_t *entries) {
    char p[4096];
    if (entries) *entries = 0;
    if (!path || n == 0 || !cache_path(p, sizeof p) || strlen(p) >= n) return false;
    memcpy(path, p, strlen(p) + 1);
    FILE *f = entries ? fopen(p, "r") : NULL;
    if (!f) return true;
    char line[TUNE_KEY_MAX + TUNE_VAL_MAX + 4];
    while (fgets(line, sizeof line, f))
        *entries += line[0] != '#' && strchr(line, '\t') != NULL;
    fclose(f);
    return true;
}

void rt_tune_forget(void) {
    pthread_mutex_lock(&tune_mutex);
    for (int32_t i = 0; i < n_entries; i++) free(entries[i].key), free(entries[i].val);
    free(entries);
    entries = NULL;
    n_entries = cap_entries = 0;
    loaded = false;
    pthread_mutex_unlock(&tune_mutex);
}
