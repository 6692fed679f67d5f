/*
 * fuzz_tensor_io.c — libFuzzer target for the tensor file readers (frontends/onnx/tensor_io.c):
 * bytes -> a file -> ampc_tensor_read_file (.npy or TensorProto .pb, told apart by content).
 *
 * The readers take a path (external data is relative to the file's folder), so each input is
 * written to one file in a private folder made at start-up (under /dev/shm when it exists, so
 * the disk is not touched per input). The file is named .npy when the input starts with numpy's
 * magic and .pb otherwise: a .npy name without the magic is refused before any parsing. A file that reads must write back, as .npy and as .pb, to
 * files that read into the same dtype, shape and bytes; one that does not must say why.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "fuzz.h"

#include <stdint.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], in_npy[96], in_pb[96], npy_path[96], pb_path[96];

static void remove_dir(void) {
    unlink(in_npy);
    unlink(in_pb);
    unlink(npy_path);
    unlink(pb_path);
    rmdir(dir);
}

static void make_dir(void) {
    snprintf(dir, sizeof dir, "%s/ampc-fuzz-XXXXXX", access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm");
    FUZZ_CHECK(mkdtemp(dir), "cannot make a folder for the inputs (%s)", dir);
    snprintf(in_npy, sizeof in_npy, "%s/input.npy", dir);
    snprintf(in_pb, sizeof in_pb, "%s/input.pb", dir);
    snprintf(npy_path, sizeof npy_path, "%s/again.npy", dir);
    snprintf(pb_path, sizeof pb_path, "%s/again.pb", dir);
    atexit(remove_dir);
}

/* Reads `path` and checks it holds exactly t (dtype, shape, bytes). */
static void check_reads_back(const char *path, const ampc_tensor *t, const char *what) {
    ampc_tensor u = {0};
    char *err = NULL;
    ampc_status st = ampc_tensor_read_file(path, &u, NULL, &err);
    FUZZ_CHECK(st == AMPC_OK, "%s written by ampc does not read back: %s", what, err);
    FUZZ_CHECK(u.dtype == t->dtype && u.shape.rank == t->shape.rank &&
                   !memcmp(u.shape.dims, t->shape.dims, sizeof(int64_t) * (size_t)t->shape.rank),
               "%s reads back with another dtype or shape", what);
    size_t nb = (size_t)ampc_shape_numel(&t->shape) * ampc_dtype_size(t->dtype);
    FUZZ_CHECK(!nb || !memcmp(u.data, t->data, nb), "%s reads back with other bytes", what);
    ampc_tensor_free(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) make_dir();
    const char *in_path = size >= 6 && !memcmp(data, "\x93NUMPY", 6) ? in_npy : in_pb;
    FILE *f = fopen(in_path, "wb");
    FUZZ_CHECK(f && fwrite(data, 1, size, f) == size && !fclose(f), "cannot write %s", in_path);

    ampc_tensor t = {0};
    char *name = NULL, *err = NULL;
    ampc_status st = ampc_tensor_read_file(in_path, &t, &name, &err);
    if (st != AMPC_OK) {
        fuzz_check_failure(st, err, "ampc_tensor_read_file");
        FUZZ_CHECK(!t.data && !name, "a failed read left data or a name behind");
        free(err);
        return 0;
    }
    FUZZ_CHECK(name && !err, "a successful read left no name or an error message");
    /* bf16 is written to .npy as f32 (numpy has no bf16), so only the .pb copy is exact. */
    if (t.dtype != AMPC_DTYPE_BF16) {
        st = ampc_tensor_write_npy(npy_path, &t, &err);
        FUZZ_CHECK(st == AMPC_OK, "writing .npy failed: %s", err);
        check_reads_back(npy_path, &t, ".npy");
    }
    st = ampc_tensor_write_pb(pb_path, &t, name, &err);
    FUZZ_CHECK(st == AMPC_OK, "writing .pb failed: %s", err);
    check_reads_back(pb_path, &t, ".pb");
    free(name);
    ampc_tensor_free(&t);
    return 0;
}
