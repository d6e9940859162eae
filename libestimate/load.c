/* load.c: reading a model file and choosing its loader by content. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir.h"

/* Largest model file accepted; see docs/robustness.md. */
#define EST_MAX_FILE_BYTES ((uint64_t)4 << 30)

static bool looks_like_json(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n') continue;
        return p[i] == '{';
    }
    return false;
}

est_status est_load_file(const char *path, est_graph **out, est_error *err) {
    if (!out) return est__fail(err, EST_EINVAL, "est_load_file: out is NULL");
    *out = NULL;
    if (!path) return est__fail(err, EST_EINVAL, "est_load_file: path is NULL");
    int fd = open(path, O_RDONLY);
    if (fd < 0) return est__fail(err, EST_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return est__fail(err, EST_EIO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > EST_MAX_FILE_BYTES) {
        close(fd);
        return est__fail(err, EST_ELIMIT, "%s: file is %lld bytes, above the limit of %llu", path,
                         (long long)sb.st_size, (unsigned long long)EST_MAX_FILE_BYTES);
    }
    size_t size = (size_t)sb.st_size;
    if (size == 0) {
        close(fd);
        return est__fail(err, EST_EPARSE, "%s: the file is empty", path);
    }
    /* Mapped, not read: the file's pages are not a heap copy of the weights. */
    void *data = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (data == MAP_FAILED) return est__fail(err, EST_EIO, "%s: cannot map: %s", path, strerror(errno));
    est_status st = looks_like_json(data, size) ? est_load_json_buffer(data, size, path, out, err)
                                                : est_load_onnx_buffer(data, size, path, out, err);
    munmap(data, size);
    return st;
}
