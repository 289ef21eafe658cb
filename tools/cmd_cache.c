/* piecewise cache: a model file brought into the page cache in 2 MiB pages
 * (pw_file_cache_pages, src/core/pages.c). Decode reads every weight once
 * per token, and reads over 2 MiB pages skip the TLB walks that 4 KiB
 * pages cost; a file just downloaded or copied sits in the small pages its
 * writer made until the kernel drops them. This drops them and reads the
 * file again, once; every later load maps it in 2 MiB pages. */
#include "cli.h"

#include "internal.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: piecewise cache MODEL.gguf [--check]\n\n"
               "Reads MODEL into the page cache and says how much of it the kernel maps\n"
               "in 2 MiB pages, which decode reads faster than 4 KiB ones (docs/gguf.md,\n"
               "\"The mapping and its page size\"). Where part of it sits in small pages,\n"
               "drops the file's cached pages that no process maps and reads them again\n"
               "from disk, in 2 MiB folios where the kernel makes them for files.\n"
               "Nothing is written. A running engine that maps the file keeps its pages;\n"
               "stop it first for the whole file to be read again.\n\n"
               "  --check   report only: read what is not cached, drop nothing\n");
}

static double share(const pw_file_pages *p) {
    return p->resident ? 100.0 * (double)p->huge / (double)p->resident : 0.0;
}

int pw_cmd_cache(int argc, char **argv) {
    if (pw_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *path = NULL;
    bool check = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--check") == 0) {
            check = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "piecewise cache: unknown option '%s'\n\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (path) {
            fprintf(stderr, "piecewise cache: one file at a time ('%s' and '%s')\n", path, argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    pw_file_pages before, after;
    double t0 = pw_monotonic_seconds();
    pw_status s = pw_file_cache_pages(path, !check, &before, &after);
    if (s != PW_OK) return pw_cli_fail("cache", s);
    char size[32];
    printf("%s: %s, %.1f%% of it in 2 MiB pages\n", path,
           pw_format_bytes((size_t)before.size, size, sizeof size), share(&before));
    if (!check && after.huge != before.huge)
        printf("read again in %.1f s: %.1f%% in 2 MiB pages\n", pw_monotonic_seconds() - t0,
               share(&after));
    if (check && before.huge < before.resident)
        printf("(without --check, the part in small pages is read again)\n");
    if (!check && after.size >= ((uint64_t)4 << 20) && after.huge == 0)
        printf("note: the kernel maps this file in small pages only (no huge pages for files\n"
               "of its file system here, or another process maps its small pages)\n");
    return 0;
}
