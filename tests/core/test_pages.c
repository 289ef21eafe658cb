/* pw_file_cache_pages and the page-size readers (src/core/pages.c): every
 * error a caller can hit (no path or report, a missing file, a directory,
 * a FIFO: refused at once, not waited on), and on a plain file and on
 * anonymous memory the reports' invariants: the size is the file's, the
 * huge bytes never exceed the resident ones, and nothing is written. How
 * much the kernel maps in 2 MiB pages depends on the kernel and the file
 * system, so no share is asserted beyond its range. */
#include "internal.h"
#include "test_util.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_BYTES ((size_t)4 << 20)

static void check_report(const pw_file_pages *p, uint64_t size) {
    CHECK(p->size == size);
    CHECK(p->huge <= p->resident);
    CHECK(p->resident <= size + ((uint64_t)2 << 20)); /* a mapping rounds up to its pages */
}

int main(void) {
    char dir[] = "/tmp/pw_pages_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], fifo[256], missing[256];
    snprintf(path, sizeof path, "%s/w.bin", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(missing, sizeof missing, "%s/none.gguf", dir);

    pw_file_pages before, after;
    CHECK_ERR(pw_file_cache_pages(NULL, true, &before, &after), PW_ERR_INVALID_ARG,
              "cache: needs a path and two reports");
    CHECK_ERR(pw_file_cache_pages(path, true, NULL, &after), PW_ERR_INVALID_ARG, "needs a path");
    CHECK_ERR(pw_file_cache_pages(path, true, &before, NULL), PW_ERR_INVALID_ARG, "needs a path");
    CHECK_ERR(pw_file_cache_pages(missing, true, &before, &after), PW_ERR_IO, "cannot open");
    CHECK_ERR(pw_file_cache_pages(dir, true, &before, &after), PW_ERR_IO,
              "is not a regular file (it is a directory)");
    CHECK(mkfifo(fifo, 0600) == 0);
    double t0 = pw_monotonic_seconds();
    CHECK_ERR(pw_file_cache_pages(fifo, true, &before, &after), PW_ERR_IO, "(it is a FIFO)");
    CHECK(pw_monotonic_seconds() - t0 < 5.0);

    /* a plain file of pseudo-random bytes, read back unchanged */
    unsigned char *bytes = malloc(FILE_BYTES);
    CHECK(bytes != NULL);
    uint32_t x = 12345;
    for (size_t i = 0; i < FILE_BYTES; i++) bytes[i] = (unsigned char)((x = x * 1664525u + 1013904223u) >> 24);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, bytes, FILE_BYTES) == (ssize_t)FILE_BYTES);
    close(fd);
    CHECK_OK(pw_file_cache_pages(path, false, &before, &after));
    check_report(&before, FILE_BYTES);
    CHECK(memcmp(&before, &after, sizeof before) == 0); /* without recache: the same report */
    CHECK(before.resident > 0);                         /* every page was read */
    CHECK_OK(pw_file_cache_pages(path, true, &before, &after));
    check_report(&before, FILE_BYTES);
    check_report(&after, FILE_BYTES);
    size_t len = 0;
    char *back = pw_test_read_file(path, &len);
    CHECK(back && len == FILE_BYTES && memcmp(back, bytes, FILE_BYTES) == 0);
    free(back);
    free(bytes);

    /* an empty file: nothing mapped, nothing resident */
    char empty[256];
    snprintf(empty, sizeof empty, "%s/empty.bin", dir);
    fd = open(empty, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(pw_file_cache_pages(empty, true, &before, &after));
    CHECK(before.size == 0 && before.resident == 0 && before.huge == 0);

    /* the readers: nothing for no address or path, nothing for a file no
     * mapping holds, and within range for anonymous memory in use */
    size_t resident = 1;
    CHECK(pw_pages_huge_bytes(NULL, &resident) == 0 && resident == 0);
    resident = 1;
    CHECK(pw_pages_file_huge_bytes(NULL, &resident) == 0 && resident == 0);
    CHECK(pw_pages_file_huge_bytes(path, &resident) == 0 && resident == 0);
    CHECK(pw_pages_file_huge_bytes(missing, NULL) == 0);
    size_t n = (size_t)8 << 20;
    char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    memset(m, 1, n);
    size_t huge = pw_pages_huge_bytes(m + n / 2, &resident);
    CHECK(huge <= resident && resident <= n);
#ifdef __linux__
    CHECK(resident == n); /* written, so every page is resident */
#endif
    munmap(m, n);

    /* pw_pages_alloc: its own mapping on a 2 MiB boundary, zeroed, whole
     * (3 MiB: a size that is not a multiple of the huge page) */
    CHECK(pw_pages_alloc(0, true) == NULL);
    pw_pages_free(NULL, 4096); /* nothing to free: a no-op */
    for (int huge = 0; huge < 2; huge++) {
        size_t bytes = (size_t)3 << 20;
        unsigned char *a = pw_pages_alloc(bytes, huge != 0);
        CHECK(a != NULL);
        if (!a) continue;
        CHECK((uintptr_t)a % ((size_t)2 << 20) == 0);
        CHECK(a[0] == 0 && a[bytes - 1] == 0);
        memset(a, 7, bytes);
        size_t res = 0;
        CHECK(pw_pages_huge_bytes(a, &res) <= res);
        if (!huge) CHECK(pw_pages_huge_bytes(a, NULL) == 0); /* asked for small pages */
        pw_pages_free(a, bytes);
    }

    unlink(path);
    unlink(empty);
    unlink(fifo);
    rmdir(dir);
    return pw_test_finish("core_pages");
}
