/* load.c: reading a model file and choosing its loader by content. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir.h"


/* JSON text: after a UTF-8 byte-order mark and white space, an object or an
 * array (the JSON loader then says what is wrong with an array). An ONNX
 * file starts with a field tag, never with these bytes. */
static bool looks_like_json(const unsigned char *p, size_t n) {
    size_t i = n >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF ? 3 : 0;
    for (; i < n; i++) {
        if (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n') continue;
        return p[i] == '{' || p[i] == '[';
    }
    return false;
}

/* strerror_r (the POSIX one), not strerror: loads may run on several threads. */
static est_status io_fail(est_error *err, const char *path, const char *what, int code) {
    char reason[128];
    if (strerror_r(code, reason, sizeof reason) != 0) snprintf(reason, sizeof reason, "error %d", code);
    return est__fail(err, EST_EIO, "%s: %s: %s", path, what, reason);
}

est_status est_load_file(const char *path, est_graph **out, est_error *err) {
    return est_load_file_limited(path, NULL, out, err);
}

est_status est_load_file_limited(const char *path, const est_limits *user_lim, est_graph **out, est_error *err) {
    if (!out) return est__fail(err, EST_EINVAL, "est_load_file: out is NULL");
    *out = NULL;
    if (!path) return est__fail(err, EST_EINVAL, "est_load_file: path is NULL");
    est_limits lim;
    est__limits_resolve(user_lim, &lim);
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer; the
     * check below refuses it (and any other non-file) without waiting */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return io_fail(err, path, "cannot open", errno);
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return est__fail(err, EST_EIO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > lim.max_file_bytes) {
        close(fd);
        return est__fail(err, EST_ELIMIT, "%s: file is %lld bytes, above the limit of %llu (est_limits.max_file_bytes)",
                         path, (long long)sb.st_size, (unsigned long long)lim.max_file_bytes);
    }
    size_t size = (size_t)sb.st_size;
    if (size == 0) {
        close(fd);
        return est__fail(err, EST_EPARSE, "%s: the file is empty", path);
    }
    /* Mapped, not read: the file's pages are not a heap copy of the weights. */
    void *data = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (data == MAP_FAILED) return io_fail(err, path, "cannot map", errno);
    est_status st = looks_like_json(data, size) ? est__load_json(data, size, path, &lim, out, err)
                                                : est__load_onnx(data, size, path, true, &lim, out, err);
    munmap(data, size);
    return st;
}
