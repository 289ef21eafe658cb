/* Files named by a user or found in a folder: opened so that nothing but a
 * regular file is ever read (a FIFO or a device neither blocks the open nor
 * feeds an unbounded read), read with a bound the caller derives from the
 * format, and written only through a new file of our own (docs/errors.md,
 * "Files"). Not installed. */
#ifndef PW_CORE_FILE_H
#define PW_CORE_FILE_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether the last component of a path may be a symbolic link. A path the
 * user typed may be one (a models folder of links); a name inside a folder
 * the program manages (the graph cache) never is. */
typedef enum pw_file_links { PW_FILE_FOLLOW_LINKS, PW_FILE_NO_LINKS } pw_file_links;

/* Opens path for reading without blocking, checks with fstat on the open
 * descriptor that it is a regular file of at most max_bytes, and hands back
 * a blocking descriptor (close it) and the size. `what` names the file in
 * messages ("gguf", "graph file"). Errors: PW_ERR_IO (cannot open, not a
 * regular file, a link with PW_FILE_NO_LINKS, larger than max_bytes). */
PW_INTERNAL_API pw_status pw_file_open_regular(const char *path, const char *what,
                                               pw_file_links links, uint64_t max_bytes, int *fd,
                                               uint64_t *size);

/* Reads exactly n bytes from fd's current position; PW_ERR_IO with a
 * message naming what and path when it fails or the file ends first. */
PW_INTERNAL_API pw_status pw_file_read_exact(int fd, void *buf, size_t n, const char *what,
                                             const char *path);

/* The whole of a regular file of at most max_bytes, NUL-terminated (the
 * terminator not counted in *len), in pw_host_alloc memory. Errors as
 * pw_file_open_regular, plus PW_ERR_OOM and a file that changes size while
 * it is read. */
PW_INTERNAL_API pw_status pw_file_read_all(const char *path, const char *what, pw_file_links links,
                                           size_t max_bytes, char **out, size_t *len);

/* Creates path for writing, failing if anything at all is there (a file, a
 * link, dangling or not, a FIFO): O_CREAT|O_EXCL|O_NOFOLLOW. PW_ERR_IO with
 * the reason otherwise. */
PW_INTERNAL_API pw_status pw_file_create_new(const char *path, const char *what, int *fd);

/* Writes all n bytes, then fsyncs. PW_ERR_IO naming what and path on a
 * short write, a write error (a full disk) or a failed fsync. */
PW_INTERNAL_API pw_status pw_file_write_all_sync(int fd, const void *buf, size_t n,
                                                 const char *what, const char *path);

#endif
