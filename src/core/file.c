/* Opening, reading and creating files without trusting what is at the path
 * (include/piecewise/extend.h). The type is checked with fstat on the descriptor that is then
 * read, never on the path before opening it, so nothing can be swapped in
 * between; O_NONBLOCK makes the open of a FIFO return at once instead of
 * waiting for a writer. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *type_name(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a plain file";
}

pw_status pw_file_open_regular(const char *path, const char *what, pw_file_links links,
                               uint64_t max_bytes, int *fd, uint64_t *size) {
    *fd = -1;
    *size = 0;
    int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | (links == PW_FILE_NO_LINKS ? O_NOFOLLOW : 0);
    int f = open(path, flags);
    if (f < 0) {
        int e = errno;
        if (e == ELOOP && links == PW_FILE_NO_LINKS)
            return pw_error(PW_ERR_IO, "%s: '%s' is a symbolic link, which is not followed here", what,
                            path);
        return pw_error(PW_ERR_IO, "%s: cannot open '%s': %s", what, path, strerror(e));
    }
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return pw_error(PW_ERR_IO, "%s: cannot stat '%s': %s", what, path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return pw_error(PW_ERR_IO, "%s: '%s' is not a regular file (it is %s)", what, path,
                        type_name(st.st_mode));
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > max_bytes) {
        close(f);
        return pw_error(PW_ERR_IO, "%s: '%s' (%lld bytes) is larger than the %llu-byte limit for %s",
                        what, path, (long long)st.st_size, (unsigned long long)max_bytes, what);
    }
    /* reads of a regular file never block anyway; the descriptor goes back
     * to the ordinary mode for whoever reads or maps it */
    int fl = fcntl(f, F_GETFL);
    if (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(f);
        return pw_error(PW_ERR_IO, "%s: cannot use '%s': %s", what, path, strerror(e));
    }
    *fd = f;
    *size = (uint64_t)st.st_size;
    return PW_OK;
}

pw_status pw_file_read_exact(int fd, void *buf, size_t n, const char *what, const char *path) {
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return pw_error(PW_ERR_IO, "%s: error reading '%s': %s", what, path, strerror(errno));
        if (r == 0)
            return pw_error(PW_ERR_IO, "%s: '%s' ended early (was it changed while being read?)", what,
                            path);
        p += r;
        n -= (size_t)r;
    }
    return PW_OK;
}

pw_status pw_file_read_all(const char *path, const char *what, pw_file_links links,
                           size_t max_bytes, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    int fd;
    uint64_t size;
    PW_TRY(pw_file_open_regular(path, what, links, max_bytes, &fd, &size));
    char *buf = pw_host_alloc((size_t)size + 1);
    pw_status s = buf ? pw_file_read_exact(fd, buf, (size_t)size, what, path) : PW_ERR_OOM;
    if (s == PW_OK) {
        /* a file that grew since fstat is not the file that was checked */
        char extra;
        ssize_t r;
        while ((r = read(fd, &extra, 1)) < 0 && errno == EINTR) {}
        if (r != 0)
            s = pw_error(PW_ERR_IO, "%s: '%s' changed while being read", what, path);
    }
    close(fd);
    if (s != PW_OK) {
        pw_host_free(buf);
        return s;
    }
    buf[size] = '\0';
    *out = buf;
    *len = (size_t)size;
    return PW_OK;
}

pw_status pw_file_create_new(const char *path, const char *what, int *fd) {
    *fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (*fd >= 0) return PW_OK;
    int e = errno;
    if (e == EEXIST)
        return pw_error(PW_ERR_IO, "%s: something is already at '%s' (a file or a link); not touched",
                        what, path);
    return pw_error(PW_ERR_IO, "%s: cannot create '%s': %s", what, path, strerror(e));
}

pw_status pw_file_write_all_sync(int fd, const void *buf, size_t n, const char *what,
                                 const char *path) {
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return pw_error(PW_ERR_IO, "%s: error writing '%s': %s", what, path,
                            w < 0 ? strerror(errno) : "nothing written");
        p += w;
        n -= (size_t)w;
    }
    if (fsync(fd) != 0)
        return pw_error(PW_ERR_IO, "%s: cannot flush '%s' to disk: %s", what, path, strerror(errno));
    return PW_OK;
}
