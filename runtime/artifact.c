/*
 * artifact.c — opening a library written by `ampc -o model.so` (ampc_runtime.h): dlopen it
 * locally, find its entry point, check that its plan structures are laid out as this runtime's,
 * and take its plan. The file is checked before dlopen touches it: a truncated library would
 * otherwise kill the process with SIGBUS inside dlopen, which maps segments past the file's end.
 */
#define _GNU_SOURCE
#include "runtime/internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#elif defined(__powerpc64__)
#define HOST_MACHINE EM_PPC64
#endif
#define HOST_CLASS (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)
#define HOST_DATA (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB)

/* Whether [off, off + len) lies inside a file of `size` bytes (no overflow). */
static bool inside(uint64_t off, uint64_t len, uint64_t size) {
    return off <= size && len <= size - off;
}

/* The ELF header and program headers of the open file fd (size bytes) against this machine and
 * the file's size; AMPC_OK, or an error naming what is wrong. */
static ampc_status check_elf_headers(rt_err *e, const char *path, int fd, uint64_t size) {
    ElfW(Ehdr) h;
    if (size < EI_NIDENT || pread(fd, &h, size < sizeof h ? size : sizeof h, 0) < EI_NIDENT ||
        memcmp(h.e_ident, ELFMAG, SELFMAG))
        return rt_fail(e, AMPC_E_UNSUPPORTED, "'%s' is not a shared library (not an ELF file)", path);
    if (h.e_ident[EI_CLASS] != HOST_CLASS || h.e_ident[EI_DATA] != HOST_DATA)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "'%s' is a %d-bit %s-endian ELF file; this machine "
                       "loads %d-bit %s-endian ones", path,
                       h.e_ident[EI_CLASS] == ELFCLASS64 ? 64 : 32,
                       h.e_ident[EI_DATA] == ELFDATA2MSB ? "big" : "little",
                       HOST_CLASS == ELFCLASS64 ? 64 : 32, HOST_DATA == ELFDATA2MSB ? "big" : "little");
    if (size < sizeof h)
        return rt_fail(e, AMPC_E_IO, "'%s' is truncated: the ELF header ends at byte %zu, the "
                       "file has %llu bytes", path, sizeof h, (unsigned long long)size);
#ifdef HOST_MACHINE
    if (h.e_machine != HOST_MACHINE)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "'%s' is built for another machine (ELF machine %d; "
                       "this one is %d)", path, h.e_machine, HOST_MACHINE);
#endif
    if (h.e_type != ET_DYN)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "'%s' is not a shared library (ELF type %d)", path,
                       h.e_type);
    if (h.e_phentsize != sizeof(ElfW(Phdr)) || h.e_phnum == 0)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "'%s' has no usable program header table", path);
    uint64_t ph_len = (uint64_t)h.e_phnum * h.e_phentsize;
    if (!inside(h.e_phoff, ph_len, size))
        return rt_fail(e, AMPC_E_IO, "'%s' is truncated: the program header table ends at byte "
                       "%llu, the file has %llu bytes", path,
                       (unsigned long long)(h.e_phoff + ph_len), (unsigned long long)size);
    for (int i = 0; i < h.e_phnum; i++) {
        ElfW(Phdr) p;
        if (pread(fd, &p, sizeof p, (off_t)(h.e_phoff + (uint64_t)i * sizeof p)) != sizeof p)
            return rt_fail(e, AMPC_E_IO, "cannot read '%s': %s", path, strerror(errno));
        if (p.p_type == PT_LOAD && !inside(p.p_offset, p.p_filesz, size))
            return rt_fail(e, AMPC_E_IO, "'%s' is truncated: segment %d ends at byte %llu, the "
                           "file has %llu bytes", path, i,
                           (unsigned long long)p.p_offset + (unsigned long long)p.p_filesz,
                           (unsigned long long)size);
    }
    uint64_t sh_len = (uint64_t)h.e_shnum * h.e_shentsize;
    if (h.e_shoff && !inside(h.e_shoff, sh_len, size))
        return rt_fail(e, AMPC_E_IO, "'%s' is truncated: the section header table ends at byte "
                       "%llu, the file has %llu bytes", path,
                       (unsigned long long)(h.e_shoff + sh_len), (unsigned long long)size);
    return AMPC_OK;
}

/* Checks that file (named path in messages) is a regular file holding a whole shared library of this machine before
 * dlopen maps it; AMPC_OK, or an error naming the file and what is wrong. */
static ampc_status check_library_file(rt_err *e, const char *file, const char *path) {
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        rt_fail(e, AMPC_E_IO, "cannot open '%s' as a shared library: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return AMPC_E_IO;
    }
    ampc_status s = AMPC_OK;
    if (!S_ISREG(st.st_mode))
        s = rt_fail(e, AMPC_E_IO, "cannot open '%s' as a shared library: not a regular file (%s)",
                    path, S_ISDIR(st.st_mode) ? "a folder" : S_ISFIFO(st.st_mode) ? "a FIFO"
                                                                     : "a device or socket");
    else
        s = check_elf_headers(e, path, fd, (uint64_t)st.st_size);
    close(fd);
    return s;
}

struct ampc_rt_artifact {
    void *handle;
    const ampc_rt_artifact_entry *entry;
    const ampc_rt_plan *plan;
};

ampc_status ampc_rt_load(const char *path, ampc_rt_artifact **out, char **err) {
    rt_err e = {0};
    if (err) *err = NULL;
    if (!out || !path) {
        rt_fail(&e, AMPC_E_INVALID_ARG, "ampc_rt_load: NULL %s", out ? "path" : "out");
        return rt_err_give(&e, err);
    }
    *out = NULL;
    /* dlopen searches the library path for a bare name; a file name means the file. */
    char *file = strchr(path, '/') ? strdup(path) : NULL;
    if (!file && (file = malloc(strlen(path) + 3))) strcat(strcpy(file, "./"), path);
    if (file && check_library_file(&e, file, path) != AMPC_OK) {
        free(file);
        return rt_err_give(&e, err);
    }
    void *h = file ? dlopen(file, RTLD_NOW | RTLD_LOCAL) : NULL;
    free(file);
    if (!h) {
        rt_fail(&e, AMPC_E_IO, "cannot open '%s' as a shared library: %s", path, dlerror());
        return rt_err_give(&e, err);
    }
    const ampc_rt_artifact_entry *(*entry_fn)(void) = NULL;
    *(void **)&entry_fn = dlsym(h, AMPC_RT_ARTIFACT_SYMBOL);
    const ampc_rt_artifact_entry *en = entry_fn ? entry_fn() : NULL;
    if (!en) {
        rt_fail(&e, AMPC_E_UNSUPPORTED, "'%s' is not a library written by ampc (it has no %s)",
                path, AMPC_RT_ARTIFACT_SYMBOL);
    } else if (en->abi != AMPC_RT_ARTIFACT_ABI || en->plan_version != AMPC_RT_PLAN_VERSION ||
               en->plan_size != (int32_t)sizeof(ampc_rt_plan) ||
               en->step_size != (int32_t)sizeof(ampc_rt_step) ||
               en->io_size != (int32_t)sizeof(ampc_rt_io) ||
               en->image_size != (int32_t)sizeof(ampc_rt_image)) {
        rt_fail(&e, AMPC_E_UNSUPPORTED,
                "'%s' was written by ampc %s (library ABI %d, plan version %d, plan/step/io/image "
                "sizes %d/%d/%d/%d); this runtime reads ABI %d, plan version %d, sizes "
                "%d/%d/%d/%d: rebuild the library with this ampc",
                path, en->ampc_version, en->abi, en->plan_version, en->plan_size, en->step_size,
                en->io_size, en->image_size, AMPC_RT_ARTIFACT_ABI, AMPC_RT_PLAN_VERSION,
                (int)sizeof(ampc_rt_plan), (int)sizeof(ampc_rt_step), (int)sizeof(ampc_rt_io),
                (int)sizeof(ampc_rt_image));
    } else {
        const ampc_rt_plan *plan = NULL;
        char *msg = NULL;
        ampc_status st = en->plan(&plan, &msg);
        if (st != AMPC_OK) {
            rt_fail(&e, st, "%s: %s", path, msg ? msg : "cannot read its plan");
            free(msg);
        } else {
            ampc_rt_artifact *a = calloc(1, sizeof *a);
            if (!a) {
                rt_fail(&e, AMPC_E_OOM, "out of host memory opening '%s'", path);
            } else {
                *a = (ampc_rt_artifact){h, en, plan};
                *out = a;
                return AMPC_OK;
            }
        }
    }
    dlclose(h);
    return rt_err_give(&e, err);
}

const ampc_rt_plan *ampc_rt_artifact_plan(const ampc_rt_artifact *a) { return a ? a->plan : NULL; }
const char *ampc_rt_artifact_name(const ampc_rt_artifact *a) { return a ? a->entry->name : ""; }
const char *ampc_rt_artifact_version(const ampc_rt_artifact *a) {
    return a ? a->entry->ampc_version : "";
}
const char *ampc_rt_artifact_math(const ampc_rt_artifact *a) {
    return a && a->entry->math ? a->entry->math : "";
}

void ampc_rt_unload(ampc_rt_artifact *a) {
    if (!a) return;
    dlclose(a->handle);
    free(a);
}
