/* How the kernel holds mapped memory in pages, and a file's cached pages
 * brought into 2 MiB folios (include/piecewise/extend.h).
 *
 * Decode reads every weight once per token. Over 4 KiB pages each 4 KiB of
 * weights costs a TLB walk: one core of the AMD EPYC test host streamed
 * 1-18% slower than over 2 MiB pages (`piecewise bench peak` measures
 * both), and decode ran about 7% slower (docs/gguf.md). The
 * model file is mapped with huge-page advice (model/gguf.c), which makes
 * the kernel read uncached parts of it in 2 MiB folios; parts already
 * cached keep the folios their writer (a download, a copy) made. The only
 * way to change those is to drop them and read them again, which is what
 * pw_file_cache_pages does when asked. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* /proc/self/smaps: a header line per mapping ("lo-hi perms offset dev
 * inode path"), then its fields, one per line. Sums, over the mappings
 * that hold addr (path NULL) or map the file at path (addr NULL), the
 * resident bytes and the huge-page ones. Lines are bounded; a line longer
 * than the buffer is read in pieces, none of which parses as a header or a
 * field it is not. */
static void smaps_sum(const void *addr, const char *path, size_t *resident, size_t *huge) {
    *resident = 0;
    *huge = 0;
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f) return;
    char line[PATH_MAX + 160];
    bool inside = false, line_start = true;
    while (fgets(line, sizeof line, f)) {
        bool whole = strchr(line, '\n') != NULL;
        bool at_start = line_start;
        line_start = whole;
        if (!at_start) continue; /* the rest of a long line */
        unsigned long lo, hi, kb;
        char dash;
        int name_at = 0;
        if (sscanf(line, "%lx%c%lx %*s %*s %*s %*s %n", &lo, &dash, &hi, &name_at) == 3 &&
            dash == '-') {
            if (addr) {
                inside = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
            } else {
                char *name = line + name_at;
                name[strcspn(name, "\n")] = 0;
                inside = whole && name_at > 0 && strcmp(name, path) == 0;
            }
            continue;
        }
        if (!inside) continue;
        if (sscanf(line, "AnonHugePages: %lu kB", &kb) == 1 ||
            sscanf(line, "FilePmdMapped: %lu kB", &kb) == 1 ||
            sscanf(line, "ShmemPmdMapped: %lu kB", &kb) == 1)
            *huge += (size_t)kb * 1024;
        else if (sscanf(line, "Rss: %lu kB", &kb) == 1)
            *resident += (size_t)kb * 1024;
    }
    fclose(f);
}

size_t pw_pages_huge_bytes(const void *addr, size_t *resident) {
    size_t r = 0, h = 0;
    if (addr) smaps_sum(addr, NULL, &r, &h);
    if (resident) *resident = r;
    return h;
}

size_t pw_pages_file_huge_bytes(const char *path, size_t *resident) {
    size_t r = 0, h = 0;
    char real[PATH_MAX];
    if (path && realpath(path, real)) smaps_sum(NULL, real, &r, &h);
    if (resident) *resident = r;
    return h;
}

#define HUGE_PAGE ((size_t)2 << 20)

void *pw_pages_alloc(size_t bytes, bool huge) {
    if (bytes == 0 || bytes > SIZE_MAX - 2 * HUGE_PAGE) return NULL;
    size_t len = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    /* mapped with a huge page to spare, then trimmed to the boundary, so
     * that the region is a mapping of its own that pw_pages_free unmaps */
    char *raw = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *p = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
    if (p > raw) munmap(raw, (size_t)(p - raw));
    if (raw + len + HUGE_PAGE > p + len) munmap(p + len, (size_t)(raw + len + HUGE_PAGE - (p + len)));
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
    (void)madvise(p, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#else
    (void)huge;
#endif
    return p;
}

void pw_pages_free(void *p, size_t bytes) {
    if (!p || bytes == 0) return;
    munmap(p, (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
}

/* Maps fd's size bytes with huge-page advice, reads a byte of every page
 * (what is not cached is read from disk), and reports what is resident. */
static pw_status touch_all(int fd, uint64_t size, const char *path, pw_file_pages *out) {
    *out = (pw_file_pages){.size = size};
    if (size == 0) return PW_OK;
    void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED)
        return pw_error(PW_ERR_IO, "cache: cannot map '%s': %s", path, strerror(errno));
#ifdef MADV_HUGEPAGE
    (void)madvise(m, (size_t)size, MADV_HUGEPAGE);
#endif
    const volatile unsigned char *p = m;
    unsigned sum = 0;
    for (uint64_t off = 0; off < size; off += 4096) sum += p[off];
    (void)sum;
    size_t resident;
    out->huge = pw_pages_huge_bytes(m, &resident);
    out->resident = resident;
    munmap(m, (size_t)size);
    return PW_OK;
}

pw_status pw_file_cache_pages(const char *path, bool recache, pw_file_pages *before,
                              pw_file_pages *after) {
    if (!path || !before || !after)
        return pw_error(PW_ERR_INVALID_ARG, "cache: needs a path and two reports");
    *before = *after = (pw_file_pages){0};
    int fd;
    uint64_t size;
    PW_TRY(pw_file_open_regular(path, "cache", PW_FILE_FOLLOW_LINKS, (uint64_t)PTRDIFF_MAX, &fd,
                                &size));
    pw_status s = touch_all(fd, size, path, before);
    *after = *before;
    if (s == PW_OK && recache && before->huge < before->resident) {
        /* drops the cached pages no process maps (ours is gone); the next
         * touch reads them again through the advised mapping */
        int e = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        if (e != 0)
            s = pw_error(PW_ERR_IO, "cache: cannot drop the cached pages of '%s': %s", path,
                         strerror(e));
        else
            s = touch_all(fd, size, path, after);
    }
    close(fd);
    return s;
}
