/*
 * test_artifact.c — `ampc -o model.so`: the library and header written, what the library
 * exports, loading it with ampc_rt_load (two side by side), weights in a sidecar file, nothing
 * left behind on failure, and a C program linking the library: without a GPU it must get the
 * clear "no CUDA device" error; with one its outputs must match the reference evaluator.
 */
#define _GNU_SOURCE
#include "support.h"

#include "ampc_runtime.h"
#include "runtime/runtime.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A small MLP: y = relu(x @ w1 + b1) @ w2, weights from a fixed formula. */
static ampc_graph *mlp(void) {
    ampc_graph *g = ampc_graph_create("mlp");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4, 16));
    double w1[16 * 8], b1[8], w2[8 * 3];
    for (int i = 0; i < 16 * 8; i++) w1[i] = ((i * 37) % 17 - 8) / 16.0;
    for (int i = 0; i < 8; i++) b1[i] = (i - 4) / 8.0;
    for (int i = 0; i < 8 * 3; i++) w2[i] = ((i * 11) % 7 - 3) / 4.0;
    ampc_value *h = ampc_relu(g, ampc_add(g, ampc_matmul(g, x, t_const_f32(g, SHAPE(16, 8), w1)),
                                          t_const_f32(g, SHAPE(8), b1)));
    ampc_output(g, ampc_matmul(g, h, t_const_f32(g, SHAPE(8, 3), w2)), "y");
    return g;
}

static ampc_module *compile_mlp(void) {
    static const int32_t none = 0;
    ampc_compile_options o = {.archs = &none, .n_archs = 0, .no_tf32 = true};
    ampc_graph *g = mlp();
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    return m;
}

/* A fresh temporary folder for this test's files (removed at the end of a passing test). */
static void test_dir(char *dir, size_t cap, const char *name) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, cap, "%s/ampc-artifact-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
    cr_assert_not_null(mkdtemp(dir), "cannot create %s", dir);
}

static void remove_dir(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void write_lib(ampc_module *m, const char *path, const ampc_library_options *o) {
    char *err = NULL;
    ampc_status st = ampc_module_write_library(m, path, o, &err);
    cr_assert_eq(st, AMPC_OK, "writing %s: %s", path, err ? err : "");
    cr_assert_null(err);
}

/* The MLP written as <dir>/<name>.so in a fresh folder for test `tag`; returns its header's text
 * (so receives the library's path). */
static char *mlp_library(const char *tag, const char *name, char *dir, size_t cap, char *so,
                         size_t so_cap) {
    char h[4300];
    test_dir(dir, cap, tag);
    snprintf(so, so_cap, "%s/%s.so", dir, name);
    snprintf(h, sizeof h, "%s/%s.h", dir, name);
    ampc_module *m = compile_mlp();
    write_lib(m, so, NULL);
    ampc_module_destroy(m);
    return t_read_text(h);
}

Test(artifact, library_header_and_exports, .timeout = 120) {
    char dir[4096], so[4200], h[4200];
    test_dir(dir, sizeof dir, "exports");
    snprintf(so, sizeof so, "%s/tiny-mlp.so", dir);
    snprintf(h, sizeof h, "%s/tiny-mlp.h", dir);
    ampc_module *m = compile_mlp();
    write_lib(m, so, NULL);
    cr_assert(exists(so) && exists(h), "both the library and its header are written");
    /* The name comes from the file: "tiny-mlp" -> tiny_mlp. */
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(lib, "%s", dlerror());
    cr_assert_not_null(dlsym(lib, "tiny_mlp_create"));
    cr_assert_not_null(dlsym(lib, "tiny_mlp_run"));
    cr_assert_not_null(dlsym(lib, "tiny_mlp_enqueue"));
    cr_assert_not_null(dlsym(lib, "tiny_mlp_destroy"));
    cr_assert_not_null(dlsym(lib, AMPC_RT_ARTIFACT_SYMBOL));
    /* The runtime inside is hidden: none of its functions is visible from outside. */
    cr_assert_null(dlsym(lib, "ampc_rt_model_create"), "the runtime's symbols must be hidden");
    cr_assert_null(dlsym(lib, "ampc_blob_weights"), "the embedded blobs must be hidden");
    typedef struct {
        const char *name;
        int32_t dtype;
        const char *dtype_name;
        int32_t rank;
        int64_t dims[8];
        int64_t bytes;
    } info;
    const info *in = dlsym(lib, "tiny_mlp_inputs"), *out = dlsym(lib, "tiny_mlp_outputs");
    cr_assert(in && out);
    cr_assert_str_eq(in[0].name, "x");
    cr_assert_str_eq(in[0].dtype_name, "f32");
    cr_assert(in[0].rank == 2 && in[0].dims[0] == 4 && in[0].dims[1] == 16 && in[0].bytes == 256);
    cr_assert_str_eq(out[0].name, "y");
    cr_assert_eq(out[0].bytes, 4 * 3 * 4);
    dlclose(lib);
    FILE *f = fopen(h, "r");
    char text[16384] = {0};
    cr_assert(f && fread(text, 1, sizeof text - 1, f) > 0);
    fclose(f);
    cr_assert(strstr(text, "int tiny_mlp_create(int device, tiny_mlp_model **model, char **err);"), "%s", text);
    cr_assert(strstr(text, "#define tiny_mlp_N_INPUTS 1"), "%s", text);
    cr_assert(strstr(text, "/* input 0: 'x' f32[4,16], 256 bytes */"), "%s", text);
    ampc_module_destroy(m);
    remove_dir(dir);
}

/* <name>_device_bytes: declared in the header, 0 for NULL; on a GPU a created model reports at
 * least its arena and weights (the plan's), the libraries' workspaces on top. */
Test(artifact, device_bytes_reports_the_model_memory, .timeout = 120) {
    char dir[4096], so[4200];
    char *text = mlp_library("devbytes", "mem_mlp", dir, sizeof dir, so, sizeof so);
    cr_assert(strstr(text, "int64_t mem_mlp_device_bytes(const mem_mlp_model *model);"), "%s", text);
    free(text);
    ampc_rt_artifact *a = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_rt_load(so, &a, &err), AMPC_OK, "%s", err ? err : "");
    int64_t planned = ampc_rt_artifact_plan(a)->arena_bytes + ampc_rt_artifact_plan(a)->weights_bytes;
    ampc_rt_unload(a);
    cr_assert_gt(planned, 0);
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(lib, "%s", dlerror());
    remove_dir(dir); /* the mapping stays; nothing is left behind when the GPU part skips */
    int64_t (*device_bytes)(const void *) = (int64_t (*)(const void *))dlsym(lib, "mem_mlp_device_bytes");
    int (*create)(int, void **, char **) = (int (*)(int, void **, char **))dlsym(lib, "mem_mlp_create");
    void (*destroy)(void *) = (void (*)(void *))dlsym(lib, "mem_mlp_destroy");
    cr_assert(device_bytes && create && destroy);
    cr_assert_eq(device_bytes(NULL), 0);
    t_skip_without_gpu();
    void *model = NULL;
    cr_assert_eq(create(0, &model, &err), 0, "%s", err ? err : "");
    int64_t got = device_bytes(model);
    cr_assert_geq(got, planned, "device_bytes %lld, arena + weights %lld", (long long)got,
                  (long long)planned);
    destroy(model);
    dlclose(lib);
}

/* <name>_options_init and <name>_create_opts: declared in the header; the options the library
 * fills are the runtime's (the environment read); on a GPU, a model created with CUDA graphs
 * off by option has them off. */
Test(artifact, create_opts_takes_the_runtime_options, .timeout = 120) {
    char dir[4096], so[4200];
    char *text = mlp_library("opts", "opt_mlp", dir, sizeof dir, so, sizeof so);
    cr_assert(strstr(text, "void opt_mlp_options_init(struct ampc_rt_options *options);"), "%s",
              text);
    cr_assert(strstr(text, "int opt_mlp_create_opts(int device, const struct ampc_rt_options "
                           "*options, opt_mlp_model **model,"), "%s", text);
    free(text);
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(lib, "%s", dlerror());
    remove_dir(dir);
    void (*init)(ampc_rt_options *) = (void (*)(ampc_rt_options *))dlsym(lib, "opt_mlp_options_init");
    int (*create)(int, const ampc_rt_options *, void **, char **) =
        (int (*)(int, const ampc_rt_options *, void **, char **))dlsym(lib, "opt_mlp_create_opts");
    void (*destroy)(void *) = (void (*)(void *))dlsym(lib, "opt_mlp_destroy");
    cr_assert(init && create && destroy);
    setenv("AMPC_GEMM_TUNE", "1", 1);
    ampc_rt_options o;
    memset(&o, 0xff, sizeof o);
    init(&o);
    unsetenv("AMPC_GEMM_TUNE");
    cr_assert(o.cuda_graphs && o.zero_copy && o.gemm_tune && o.gemm_kernel == -1,
              "the library's runtime read the defaults and the environment");
    t_skip_without_gpu();
    o.cuda_graphs = false;
    void *model = NULL;
    char *err = NULL;
    cr_assert_eq(create(0, &o, &model, &err), 0, "%s", err ? err : "");
    const char *why = NULL;
    cr_assert_eq(ampc_rt_model_graph_status(model, &why), AMPC_RT_GRAPH_OFF);
    destroy(model);
    dlclose(lib);
}

Test(artifact, loads_side_by_side_and_matches_the_module, .timeout = 120) {
    char dir[4096], a[4200], b[4200];
    test_dir(dir, sizeof dir, "pair");
    snprintf(a, sizeof a, "%s/first.so", dir);
    snprintf(b, sizeof b, "%s/second.so", dir);
    ampc_module *m = compile_mlp();
    write_lib(m, a, NULL);
    ampc_library_options o = {.name = "other_model"};
    write_lib(m, b, &o);
    ampc_rt_artifact *la = NULL, *lb = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_rt_load(a, &la, &err), AMPC_OK, "%s", err ? err : "");
    cr_assert_eq(ampc_rt_load(b, &lb, &err), AMPC_OK, "%s", err ? err : "");
    cr_assert_str_eq(ampc_rt_artifact_name(la), "first");
    cr_assert_str_eq(ampc_rt_artifact_name(lb), "other_model");
    cr_assert_str_eq(ampc_rt_artifact_version(la), AMPC_VERSION_STRING);
    const ampc_rt_plan *pa = ampc_rt_artifact_plan(la), *pb = ampc_rt_artifact_plan(lb);
    cr_assert(pa && pb && pa != pb, "each library has its own plan");
    /* The embedded plan is the module's, byte for byte where it matters. */
    cr_assert_eq(pa->n_steps, ampc_module_step_count(m));
    cr_assert_eq(pa->arena_bytes, ampc_module_arena_bytes(m));
    cr_assert_geq(pa->weights_bytes, (16 * 8 + 8 + 8 * 3) * 4, "every weight is embedded");
    cr_assert_eq(memcmp(pa->weights, pb->weights, (size_t)pa->weights_bytes), 0);
    for (int32_t i = 0; i < pa->n_images; i++)
        if (pa->images[i].kind == AMPC_RT_IMAGE_PTX)
            cr_assert_str_eq(pa->images[i].data, ampc_module_ptx(m, pa->images[i].unit));
    char *check = NULL;
    cr_assert_eq(ampc_rt_plan_check(pa, &check), AMPC_OK, "%s", check ? check : "");
    ampc_rt_unload(la);
    ampc_rt_unload(lb);
    ampc_module_destroy(m);
    remove_dir(dir);
}

Test(artifact, weights_in_a_sidecar_file, .timeout = 120) {
    char dir[4096], so[4200], side[4300], moved[4400];
    test_dir(dir, sizeof dir, "sidecar");
    snprintf(so, sizeof so, "%s/big.so", dir);
    snprintf(side, sizeof side, "%s.weights", so);
    snprintf(moved, sizeof moved, "%s.away", side);
    ampc_module *m = compile_mlp();
    ampc_library_options o = {.sidecar_bytes = 1};
    write_lib(m, so, &o);
    cr_assert(exists(side), "weights above the threshold go next to the library");
    ampc_rt_artifact *a = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_rt_load(so, &a, &err), AMPC_OK, "%s", err ? err : "");
    cr_assert_not_null(ampc_rt_artifact_plan(a)->weights);
    ampc_rt_unload(a);
    /* Without its weights file the library says which file it needs. */
    cr_assert_eq(rename(side, moved), 0);
    cr_assert_eq(ampc_rt_load(so, &a, &err), AMPC_E_IO);
    cr_assert_null(a);
    cr_assert(err && strstr(err, "big.so.weights") && strstr(err, "next to the library"), "%s", err);
    free(err);
    ampc_module_destroy(m);
    remove_dir(dir);
}

Test(artifact, failures_leave_nothing_behind) {
    char dir[4096], so[4200], h[4200];
    test_dir(dir, sizeof dir, "fail");
    snprintf(so, sizeof so, "%s/m.so", dir);
    snprintf(h, sizeof h, "%s/m.h", dir);
    ampc_module *m = compile_mlp();
    char *err = NULL;
    ampc_library_options bad_cc = {.cc = "/nonexistent/cc"};
    cr_assert_neq(ampc_module_write_library(m, so, &bad_cc, &err), AMPC_OK);
    cr_assert(err && strstr(err, "/nonexistent/cc") && strstr(err, "not found"), "%s", err ? err : "");
    free(err);
    cr_assert(!exists(so) && !exists(h), "no library or header after a failed build");
    ampc_library_options bad_name = {.name = "9lives"};
    cr_assert_eq(ampc_module_write_library(m, so, &bad_name, &err), AMPC_E_INVALID_ARG);
    cr_assert(err && strstr(err, "'9lives' is not a C identifier"), "%s", err ? err : "");
    free(err);
    cr_assert_eq(ampc_rt_load("/nonexistent/model.so", &(ampc_rt_artifact *){NULL}, &err), AMPC_E_IO);
    cr_assert(err && strstr(err, "/nonexistent/model.so"), "%s", err ? err : "");
    free(err);
    ampc_module_destroy(m);
    remove_dir(dir);
}

/* A process id that no longer runs: a child that exited and was reaped. */
static pid_t dead_pid(void) {
    pid_t p = fork();
    cr_assert_geq(p, 0);
    if (p == 0) _exit(0);
    cr_assert_eq(waitpid(p, NULL, 0), p);
    return p;
}

static void touch(const char *path) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs("half a library", f);
    fclose(f);
}

/* A compile killed while writing m.so leaves m.so.tmp.PID (and m.h.tmp.PID, m.so.weights.tmp.PID)
 * beside it; the next write of m.so removes those whose process is gone, and keeps the
 * temporaries of a compile still running, other names, and other targets' temporaries. */
Test(artifact, stale_temporaries_of_killed_compiles_are_swept, .timeout = 120) {
    char dir[4096], so[4200], stale[8][4300];
    test_dir(dir, sizeof dir, "sweep");
    snprintf(so, sizeof so, "%s/m.so", dir);
    pid_t dead = dead_pid();
    pid_t live = fork(); /* a compile still running: a child that waits to be killed */
    cr_assert_geq(live, 0);
    if (live == 0) {
        pause();
        _exit(0);
    }
    const char *fmt_gone[] = {"%s/m.so.tmp.%ld", "%s/m.h.tmp.%ld", "%s/m.so.weights.tmp.%ld"};
    const char *fmt_kept[] = {"%s/m.so.tmp.%ld", "%s/m.h.tmp.%ld", "%s/other.so.tmp.%ld",
                              "%s/m.so.tmp.%ldx", "%s/m.so.tmp.0%ld"};
    for (int i = 0; i < 3; i++) snprintf(stale[i], sizeof stale[i], fmt_gone[i], dir, (long)dead);
    for (int i = 0; i < 5; i++)
        snprintf(stale[3 + i], sizeof stale[3 + i], fmt_kept[i], dir, (long)(i < 2 ? live : dead));
    for (int i = 0; i < 8; i++) touch(stale[i]);
    ampc_module *m = compile_mlp();
    write_lib(m, so, NULL);
    kill(live, SIGKILL);
    waitpid(live, NULL, 0);
    cr_assert(exists(so), "the library is written");
    for (int i = 0; i < 3; i++) cr_assert(!exists(stale[i]), "%s (a dead process's) must be removed", stale[i]);
    for (int i = 3; i < 8; i++) cr_assert(exists(stale[i]), "%s must be left alone", stale[i]);
    ampc_module_destroy(m);
    remove_dir(dir);
}

/* A compile killed while building leaves its work folder $TMPDIR/ampc-lib-PID-XXXXXX; the next
 * library written removes those of dead processes (with their files) and keeps a running
 * compile's, a folder without a pid, and a folder holding a subfolder. */
Test(artifact, work_folders_of_killed_compiles_are_swept, .timeout = 120) {
    char root[4096], so[4200], f[6][4400];
    test_dir(root, sizeof root, "tmpdir");
    char *old = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
    setenv("TMPDIR", root, 1);
    pid_t dead = dead_pid(), live = fork();
    cr_assert_geq(live, 0);
    if (live == 0) {
        pause();
        _exit(0);
    }
    snprintf(f[0], sizeof f[0], "%s/ampc-lib-%ld-aaaaaa", root, (long)dead);      /* gone */
    snprintf(f[1], sizeof f[1], "%s/ampc-lib-%ld-bbbbbb", root, (long)live);      /* kept */
    snprintf(f[2], sizeof f[2], "%s/ampc-lib-cccccc", root);                      /* kept */
    snprintf(f[3], sizeof f[3], "%s/ampc-lib-%ld-dddddd", root, (long)dead);      /* kept: */
    snprintf(f[4], sizeof f[4], "%s/ampc-lib-%ld-dddddd/sub", root, (long)dead);  /* a folder in */
    for (int i = 0; i < 5; i++) cr_assert_eq(mkdir(f[i], 0700), 0, "%s", f[i]);
    snprintf(f[5], sizeof f[5], "%s/ampc-lib-%ld-aaaaaa/plan.c", root, (long)dead);
    touch(f[5]);
    snprintf(so, sizeof so, "%s/m.so", root);
    ampc_module *m = compile_mlp();
    write_lib(m, so, NULL);
    kill(live, SIGKILL);
    waitpid(live, NULL, 0);
    if (old) setenv("TMPDIR", old, 1); else unsetenv("TMPDIR");
    free(old);
    cr_assert(exists(so));
    cr_assert(!exists(f[0]), "%s (a dead compile's) must be removed with its files", f[0]);
    for (int i = 1; i < 5; i++) cr_assert(exists(f[i]), "%s must be left alone", f[i]);
    ampc_module_destroy(m);
    remove_dir(root);
}

/* A C program that includes the generated header and links the library: it prints the first
 * output, or the error. */
static const char app_c[] =
    "#include \"app_mlp.h\"\n"
    "#include <stdio.h>\n#include <stdlib.h>\n"
    "int main(void) {\n"
    "    float x[4 * 16], y[4 * 3];\n"
    "    for (int i = 0; i < 4 * 16; i++) x[i] = (float)((i % 9) - 4) / 4.0f;\n"
    "    app_mlp_model *m = NULL;\n"
    "    char *err = NULL;\n"
    "    int rc = app_mlp_create(0, &m, &err);\n"
    "    if (rc == 0) {\n"
    "        const void *in[app_mlp_N_INPUTS] = {x};\n"
    "        void *out[app_mlp_N_OUTPUTS] = {y};\n"
    "        rc = app_mlp_run(m, in, out, NULL, &err);\n"
    "    }\n"
    "    if (rc != 0) { printf(\"error %d: %s\\n\", rc, err); free(err); return 1; }\n"
    "    for (int i = 0; i < 4 * 3; i++) printf(\"%.9g\\n\", y[i]);\n"
    "    app_mlp_destroy(m);\n"
    "    return 0;\n"
    "}\n";

Test(artifact, c_program_links_the_library, .timeout = 120) {
    char dir[4096], path[4300], cmd[16384];
    test_dir(dir, sizeof dir, "app");
    snprintf(path, sizeof path, "%s/app_mlp.so", dir);
    ampc_module *m = compile_mlp();
    write_lib(m, path, NULL);
    ampc_module_destroy(m);
    snprintf(path, sizeof path, "%s/app.c", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f && fputs(app_c, f) >= 0 && fclose(f) == 0);
    snprintf(cmd, sizeof cmd, "cd '%s' && cc %s -std=c11 -Wall -Werror -o app app.c ./app_mlp.so "
                              "-Wl,-rpath,'$ORIGIN' > cc.log 2>&1 && ./app > out.txt 2>&1",
             dir, strlen(AMPC_SANITIZE_FLAGS) ? AMPC_SANITIZE_FLAGS : "");
    int rc = system(cmd);
    snprintf(path, sizeof path, "%s/out.txt", dir);
    f = fopen(path, "r");
    char out[4096] = {0};
    if (f) {
        size_t n = fread(out, 1, sizeof out - 1, f);
        out[n] = 0;
        fclose(f);
    }
    int32_t count = 0, n_dev = 0;
    char *derr = NULL;
    if (ampc_rt_device_count(&n_dev, &derr) != AMPC_OK) {
        /* No GPU here: the program must start, fail cleanly and say why. */
        cr_assert_neq(rc, 0, "the program reports the error through its exit status");
        cr_assert(strstr(out, "error 12: no CUDA device: "), "expected the no-device error, got: %s", out);
        free(derr);
        remove_dir(dir);
        return;
    }
    cr_assert_eq(rc, 0, "the C program failed: %s", out);
    /* On a GPU: the library's outputs against the reference evaluator. */
    ampc_graph *g = mlp();
    float x[4 * 16];
    for (int i = 0; i < 4 * 16; i++) x[i] = (float)((i % 9) - 4) / 4.0f;
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(4, 16), x);
    ampc_tensor ref;
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, &ref, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    float got[12];
    char *p = out;
    for (; count < 12; count++) {
        char *end;
        got[count] = strtof(p, &end);
        if (end == p) break;
        p = end;
    }
    cr_assert_eq(count, 12, "12 outputs printed: %s", out);
    ampc_tensor gt = t_tensor(AMPC_DTYPE_F32, SHAPE(4, 3), got);
    char msg[512];
    cr_assert(t_tensors_close(&gt, &ref, 1e-5, 1e-5, "y", msg, sizeof msg), "%s", msg);
    ampc_tensor_free(&ref);
    ampc_graph_destroy(g);
    remove_dir(dir);
}

/* The first n bytes of src copied to dst. */
static void copy_head(const char *src, const char *dst, long long n) {
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "head -c %lld '%s' > '%s'", n, src, dst);
    cr_assert_eq(system(cmd), 0);
}

/* ampc_rt_load refuses, before dlopen (where a truncated file dies of SIGBUS), a file cut short
 * anywhere (in the ELF header, at the end of the first segment, before the section headers), a
 * file that is not ELF, and a folder: each message names the file and what is wrong. */
Test(artifact, truncated_or_foreign_files_are_refused_before_dlopen, .timeout = 120) {
    char dir[4096], so[4200], cut[4200];
    test_dir(dir, sizeof dir, "truncated");
    snprintf(so, sizeof so, "%s/whole.so", dir);
    snprintf(cut, sizeof cut, "%s/cut.so", dir);
    ampc_module *m = compile_mlp();
    write_lib(m, so, NULL);
    ampc_module_destroy(m);
    struct stat st;
    cr_assert_eq(stat(so, &st), 0);
    const struct {
        long long bytes;
        const char *want;
    } cases[] = {
        {40, "is truncated: the ELF header ends at byte 64, the file has 40 bytes"},
        {4096, "is truncated: segment "},
        {(long long)st.st_size - 1, "is truncated: the section header table ends at byte "},
        {3, "is not a shared library (not an ELF file)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        copy_head(so, cut, cases[i].bytes);
        ampc_rt_artifact *a = NULL;
        char *err = NULL;
        cr_assert_neq(ampc_rt_load(cut, &a, &err), AMPC_OK, "%lld bytes loaded", cases[i].bytes);
        cr_assert_null(a);
        cr_assert(err && strstr(err, "cut.so") && strstr(err, cases[i].want), "%lld bytes: %s",
                  cases[i].bytes, err ? err : "");
        free(err);
    }
    ampc_rt_artifact *a = NULL;
    char *err = NULL;
    cr_assert_neq(ampc_rt_load(dir, &a, &err), AMPC_OK);
    cr_assert(err && strstr(err, "not a regular file (a folder)"), "%s", err ? err : "");
    free(err);
    cr_assert_eq(ampc_rt_load(so, &a, &err), AMPC_OK, "the whole file loads: %s", err ? err : "");
    ampc_rt_unload(a);
    remove_dir(dir);
}

/* The library writer refuses, before building, a path in a missing folder, a FIFO, and the
 * model's own file (also as the derived header), naming the files; none is changed. */
Test(artifact, targets_are_checked_before_building, .timeout = 120) {
    char dir[4096], p[4300], model[4300];
    test_dir(dir, sizeof dir, "targets");
    ampc_module *m = compile_mlp();
    char *err = NULL;
    snprintf(p, sizeof p, "%s/missing/m.so", dir);
    cr_assert_eq(ampc_module_write_library(m, p, NULL, &err), AMPC_E_IO);
    cr_assert(err && strstr(err, "/missing' does not exist") && !strstr(err, "command:"), "%s", err);
    free(err);
    snprintf(p, sizeof p, "%s/fifo.so", dir);
    cr_assert_eq(mkfifo(p, 0600), 0);
    cr_assert_eq(ampc_module_write_library(m, p, NULL, &err), AMPC_E_INVALID_ARG);
    cr_assert(err && strstr(err, "fifo.so' is a FIFO, not a regular file"), "%s", err);
    free(err);
    struct stat st;
    cr_assert(stat(p, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO stays");
    snprintf(model, sizeof model, "%s/m.h", dir);
    touch(model);
    snprintf(p, sizeof p, "%s/m.so", dir);
    ampc_library_options o = {.source = model};
    cr_assert_eq(ampc_module_write_library(m, p, &o, &err), AMPC_E_INVALID_ARG);
    cr_assert(err && strstr(err, "m.h' is the model being compiled") && strstr(err, "same file"),
              "%s", err);
    free(err);
    cr_assert(!exists(p), "no library");
    cr_assert_eq(ampc_module_write_library(m, "", NULL, &err), AMPC_E_INVALID_ARG);
    cr_assert(err && strstr(err, "path is empty"), "%s", err);
    free(err);
    ampc_module_destroy(m);
    remove_dir(dir);
}

/* A program whose stdout is a file prints a line, then writes a library (which runs the C
 * compiler in a child process): the line is in the file once, not again from the child. */
Test(artifact, buffered_output_is_not_repeated_by_the_compiler_child, .timeout = 120) {
    char dir[4096], so[4200], log[4200];
    test_dir(dir, sizeof dir, "flush");
    snprintf(so, sizeof so, "%s/m.so", dir);
    snprintf(log, sizeof log, "%s/out.txt", dir);
    ampc_module *m = compile_mlp();
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (!freopen(log, "w", stdout)) _exit(3);
        printf("before the library\n"); /* buffered: stdout is a file */
        ampc_library_options o = {.cc = "/nonexistent/cc"}; /* the child's exec fails */
        char *err = NULL;
        (void)ampc_module_write_library(m, so, &o, &err);
        o.cc = NULL;
        int rc = ampc_module_write_library(m, so, &o, &err) == AMPC_OK ? 0 : 4;
        fflush(stdout);
        _exit(rc);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
    FILE *f = fopen(log, "r");
    char text[4096] = {0};
    cr_assert(f && fread(text, 1, sizeof text - 1, f) > 0);
    fclose(f);
    cr_assert_str_eq(text, "before the library\n");
    ampc_module_destroy(m);
    remove_dir(dir);
}

/* The library's soname is its file name: a program links it as ./app_mlp.so or, named
 * libapp_mlp.so, with -lapp_mlp, and finds it at start through -Wl,-rpath,'$ORIGIN' (ldd
 * resolves it in the program's folder); without the run path it cannot start. */
Test(artifact, programs_find_the_library_through_its_soname, .timeout = 120) {
    char dir[4096], path[4300], cmd[16384];
    test_dir(dir, sizeof dir, "soname");
    snprintf(path, sizeof path, "%s/libapp_mlp.so", dir);
    ampc_module *m = compile_mlp();
    ampc_library_options o = {.name = "app_mlp", .header = NULL};
    write_lib(m, path, &o);
    ampc_module_destroy(m);
    snprintf(path, sizeof path, "%s/app.c", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f && fputs(app_c, f) >= 0 && fclose(f) == 0);
    snprintf(cmd, sizeof cmd, "cd '%s' && cp libapp_mlp.h app_mlp.h && "
             "cc %s -std=c11 -o app app.c -L. -lapp_mlp -Wl,-rpath,'$ORIGIN' > cc.log 2>&1 && "
             "ldd ./app | grep -q 'libapp_mlp.so => %s/./libapp_mlp.so\\|libapp_mlp.so => %s/libapp_mlp.so' "
             "&& cc %s -std=c11 -o bare app.c -L. -lapp_mlp > cc2.log 2>&1 && "
             "! ./bare > bare.txt 2>&1 && grep -q 'libapp_mlp.so: cannot open shared object' bare.txt",
             dir, strlen(AMPC_SANITIZE_FLAGS) ? AMPC_SANITIZE_FLAGS : "", dir, dir,
             strlen(AMPC_SANITIZE_FLAGS) ? AMPC_SANITIZE_FLAGS : "");
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    remove_dir(dir);
}
