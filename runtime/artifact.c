/*
 * artifact.c — opening a library written by `ampc -o model.so` (ampc_runtime.h): dlopen it
 * locally, find its entry point, check that its plan structures are laid out as this runtime's,
 * and take its plan.
 */
#define _GNU_SOURCE
#include "runtime/internal.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

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

void ampc_rt_unload(ampc_rt_artifact *a) {
    if (!a) return;
    dlclose(a->handle);
    free(a);
}
