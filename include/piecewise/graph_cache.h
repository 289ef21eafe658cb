/* piecewise public API, libpiecewise: the graph cache. Included by
 * piecewise.h; may be included alone.
 *
 * Relocatable programs (piecewise/relocate.h) in a file, so that the next
 * process builds its graphs from them instead of running what they were
 * recorded from: each entry is a program with the user's key for the
 * callable it was recorded from and the descriptor it was captured for.
 * A file is written for a fingerprint (the user's hash of everything the
 * programs depend on besides themselves: model, configuration, build, ...),
 * the sizes of the persistent regions and a kernel table (launches name
 * their kernel by its index in it; the file holds a hash of the table's
 * names and argument layouts), and read back only against the same.
 *
 * Everything in a file is untrusted: counts are bounded by the bytes left
 * before anything is allocated, every index and offset is checked against
 * what it refers to, and a program is kept only if each address word of
 * each launch (the kernel's pw_kernel.args) is NULL (where the kernel
 * accepts NULL) or rebuilt from a relocation, so no address from the
 * writing process is ever used, and, where the kernel's layout declares
 * extents (pw_kernel_args.extent), what the kernel touches through each
 * word lies inside the buffer that word is relocated into. The format and
 * exactly what is checked are in docs/graph-cache.md. */
#include "piecewise.h"

#ifndef PIECEWISE_GRAPH_CACHE_H
#define PIECEWISE_GRAPH_CACHE_H

#include "piecewise/export.h"
#include "piecewise/relocate.h"
#include "piecewise/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One stored program. */
typedef struct pw_graph_cache_entry {
    int32_t key;        /* the user's name for the callable the program was recorded from */
    pw_batch_desc desc; /* the descriptor it was captured for (num_tokens >= 1) */
    pw_reloc_program *program;
} pw_graph_cache_entry;

/* Testing and fuzzing only: take the file's fingerprint (and kernel-table
 * hash) or region table, or skip the checksum, so that mutated files reach
 * the programs. */
#define PW_GRAPH_CACHE_ANY_FINGERPRINT 1u
#define PW_GRAPH_CACHE_ANY_REGIONS 2u
#define PW_GRAPH_CACHE_ANY_CHECKSUM 4u

/* What a file is written for and checked against. */
typedef struct pw_graph_cache_spec {
    uint64_t fingerprint;
    const pw_reloc_regions *regions; /* their sizes are stored and must match */
    const pw_kernel *const *kernels; /* the kernel table (NULL entries allowed) */
    int n_kernels;
    unsigned accept; /* PW_GRAPH_CACHE_ANY_*; 0 */
} pw_graph_cache_spec;

/* The entries as one file image (pw_host_free it). An entry whose program
 * launches a kernel the table lacks is PW_ERR_INVALID_ARG. */
PW_API pw_status pw_graph_cache_serialize(const pw_graph_cache_spec *spec,
                                          const pw_graph_cache_entry *entries, size_t n,
                                          unsigned char **out, size_t *size);
/* The programs of a file image. An image that is not a cache file, is
 * truncated, has a bad checksum, another format version, fingerprint or
 * region table, or another kernel table, is refused as a whole
 * (PW_ERR_PARSE, the reason in why); a program that fails validation
 * (kernel indices, argument sizes, relocations in range, every address
 * word relocated or a NULL the kernel accepts, kernel extents inside their
 * buffers) is dropped alone,
 * counted in *n_dropped and logged with its reason. *entries (free with
 * pw_graph_cache_entries_free) gets the others, kernels resolved from the
 * table. */
PW_API pw_status pw_graph_cache_parse(const void *data, size_t size,
                                      const pw_graph_cache_spec *spec,
                                      pw_graph_cache_entry **entries, size_t *n,
                                      size_t *n_dropped, char *why, size_t why_cap);
/* pw_graph_cache_parse of the file at path: a regular file, never through
 * a link, its header checked before the rest is read. PW_ERR_NOT_FOUND
 * when there is none. */
PW_API pw_status pw_graph_cache_read(const char *path, const pw_graph_cache_spec *spec,
                                     pw_graph_cache_entry **entries, size_t *n,
                                     size_t *n_dropped, char *why, size_t why_cap);
/* Writes the file at path: a new temporary file beside it (never through a
 * link or over anything there), written, synced and renamed over the old
 * file, so a reader sees the old file or the whole new one. Anything at
 * path but a regular file is left alone (PW_ERR_IO). */
PW_API pw_status pw_graph_cache_write(const char *path, const pw_graph_cache_spec *spec,
                                      const pw_graph_cache_entry *entries, size_t n);
/* Frees the programs and the array. */
PW_API void pw_graph_cache_entries_free(pw_graph_cache_entry *entries, size_t n);

#ifdef __cplusplus
}
#endif
#endif
