/* piecewise synth: a synthetic GGUF model at a real model's shape, with
 * random weights in a chosen quant type and another file's tokenizer
 * (src/model/synth.h), made on demand into a cache folder so benchmarks
 * at 1B-8B sizes need no download. Prints the file's path on stdout and
 * its progress on stderr. */
#include "cli.h"

#include "cli_args.h"
#include "internal.h"
#include "model/synth.h"
#include "model/synth_family.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SYNTH_DEFAULT_VOCAB "models/SmolLM2-135M-Instruct.Q4_1.gguf"

static void usage(FILE *f) {
    fprintf(f,
            "usage: piecewise synth --shape NAME --type TYPE [-o FILE] [--vocab FILE]\n"
            "                       [--seed N] [--force]\n"
            "       piecewise synth --family NAME --vocab FILE [--shape NAME] [--type TYPE]\n"
            "                       [-o FILE] [--force]\n"
            "       piecewise synth --list\n\n"
            "Writes a GGUF model with a real model's shape and random weights in one quant\n"
            "type, which piecewise and llama.cpp both load: for measuring speed and memory\n"
            "at real sizes (the text it generates is noise). Prints the file's path.\n\n"
            "  --shape NAME    1b (Llama-3.2-1B), 3b (Llama-3.2-3B), 8b (Llama-3.1-8B), tiny\n"
            "  --type TYPE     q4_0 q4_1 q8_0 q5_0 q5_1 q4_k q5_k q6_k, or q4_k_m (Q4_K\n"
            "                  with Q6_K where llama.cpp's Q4_K_M puts it)\n"
            "  -o FILE         where to write (default: the cache folder,\n"
            "                  $XDG_CACHE_HOME or ~/.cache, then piecewise/synth/SHAPE-TYPE.gguf;\n"
            "                  a file already there is reused)\n"
            "  --vocab FILE    GGUF file whose tokenizer is copied (default\n"
            "                  " SYNTH_DEFAULT_VOCAB ")\n"
            "  --seed N        random seed (default 1); same seed, same file\n"
            "  --force         replace FILE if it exists\n"
            "  --family NAME   a model of a family's architecture (llama3, mistral, qwen2,\n"
            "                  qwen3, phi3) over the vocabulary of --vocab (llama.cpp's\n"
            "                  models/ggml-vocab-*.gguf): alone, dim 256, 4 layers, F16, as\n"
            "                  the golden tests use (docs/models.md, \"What proves a\n"
            "                  family\"); --shape and --type (not q4_k_m) give it another\n"
            "                  size and weight type, for speed measurements\n"
            "  --list          print the shapes and types\n\n"
            "Sizes: 1b about 0.7-1.3 GB, 3b 1.9-3.4 GB, 8b 4.3-8.1 GB (q4_0 to q8_0).\n");
}

static void list(void) {
    printf("shapes:\n");
    for (int i = 0; i < pw_synth_shape_count(); i++) {
        const pw_synth_shape *s = pw_synth_shape_at(i);
        printf("  %-5s %-24s dim %d, %d layers, %d/%d heads, ffn %d%s\n", s->name, s->model,
               s->dim, s->n_layers, s->n_heads, s->n_kv_heads, s->ffn_dim,
               s->tied_embeddings ? ", tied embeddings" : "");
    }
    printf("types:");
    for (int i = 0; i < pw_synth_type_count(); i++) printf(" %s", pw_synth_type_at(i)->name);
    printf("\n");
}

typedef struct progress_state {
    int last_tenth;
    double start;
} progress_state;

static void progress(void *user, const char *tensor, uint64_t done, uint64_t total) {
    progress_state *p = user;
    (void)tensor;
    int tenth = total ? (int)(done * 10 / total) : 10;
    if (tenth == p->last_tenth) return;
    p->last_tenth = tenth;
    fprintf(stderr, "synth: %3d%%  %" PRIu64 " of %" PRIu64 " MB  %.1f s\n", tenth * 10,
            done >> 20, total >> 20, pw_monotonic_seconds() - p->start);
}

/* mkdir -p for the cache folder: each missing part is made 0755. */
static int make_dirs(char *path) {
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        int rc = mkdir(path, 0755);
        int e = errno;
        *p = c;
        if (rc != 0 && e != EEXIST) {
            fprintf(stderr, "piecewise: synth: cannot create folder '%.*s': %s\n",
                    (int)(p - path), path, strerror(e));
            return 1;
        }
        if (c == '\0') return 0;
    }
}

int pw_cmd_synth(int argc, char **argv) {
    if (pw_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *shape_name = NULL, *type_name = NULL, *out = NULL, *vocab = SYNTH_DEFAULT_VOCAB;
    const char *family = NULL;
    bool vocab_given = false;
    int64_t seed = 1;
    bool force = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--list") == 0) {
            list();
            return 0;
        } else if (strcmp(a, "--shape") == 0) {
            if (!(shape_name = pw_cli_value(argc, argv, &i))) return 2;
        } else if (strcmp(a, "--family") == 0) {
            if (!(family = pw_cli_value(argc, argv, &i))) return 2;
        } else if (strcmp(a, "--type") == 0) {
            if (!(type_name = pw_cli_value(argc, argv, &i))) return 2;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (!(out = pw_cli_value(argc, argv, &i))) return 2;
        } else if (strcmp(a, "--vocab") == 0) {
            if (!(vocab = pw_cli_value(argc, argv, &i))) return 2;
            vocab_given = true;
        } else if (strcmp(a, "--seed") == 0) {
            if (pw_cli_int(argc, argv, &i, 0, INT64_MAX, &seed)) return 2;
        } else if (strcmp(a, "--force") == 0) {
            force = true;
        } else {
            fprintf(stderr, "piecewise: synth: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    pw_synth_family_config fam;
    if (family) {
        if (pw_synth_family_preset(family, &fam) != PW_OK) {
            fprintf(stderr, "piecewise: synth: %s\n", pw_last_error());
            return 2;
        }
    } else if (!shape_name || !type_name) {
        fprintf(stderr, "piecewise: synth: --shape and --type are required\n");
        usage(stderr);
        return 2;
    }
    const pw_synth_shape *shape = shape_name ? pw_synth_shape_find(shape_name) : NULL;
    const pw_synth_type *type = type_name ? pw_synth_type_find(type_name) : NULL;
    if (shape_name && !shape) {
        fprintf(stderr, "piecewise: synth: unknown shape '%s' (piecewise synth --list)\n",
                shape_name);
        return 2;
    }
    if (type_name && !type) {
        fprintf(stderr, "piecewise: synth: unknown type '%s' (piecewise synth --list)\n",
                type_name);
        return 2;
    }
    if (family && (shape || type)) {
        if (type && type->q4_k_m) {
            fprintf(stderr, "piecewise: synth: --family takes one weight type, not the q4_k_m mix\n");
            return 2;
        }
        pw_synth_family_resize(&fam, shape, type ? type->dtype : fam.weight_dtype);
    }

    /* The default vocabulary is the main job's model, found from the
     * repository root; say so before anything is written elsewhere. */
    struct stat vb;
    if (!vocab_given && stat(vocab, &vb) != 0) {
        fprintf(stderr,
                "piecewise: synth: no --vocab given, and the default '%s' is not in the current "
                "folder; run scripts/fetch-model.sh from the repository root, run synth there, "
                "or give --vocab FILE\n",
                vocab);
        return 2;
    }

    char path[4096];
    bool cached = !out;
    if (cached) {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        int n = xdg && *xdg ? snprintf(path, sizeof path, "%s/piecewise/synth", xdg)
                : home && *home ? snprintf(path, sizeof path, "%s/.cache/piecewise/synth", home)
                                : -1;
        if (n < 0) {
            fprintf(stderr, "piecewise: synth: neither XDG_CACHE_HOME nor HOME is set; give -o FILE\n");
            return 2;
        }
        if ((size_t)n >= sizeof path - 64) {
            fprintf(stderr, "piecewise: synth: cache folder path too long; give -o FILE\n");
            return 2;
        }
        if (make_dirs(path)) return 1;
        if (family)
            snprintf(path + n, sizeof path - (size_t)n, "/family-%s%s%s%s%s.gguf", family,
                     shape ? "-" : "", shape ? shape->name : "", type ? "-" : "",
                     type ? type->name : "");
        else
            snprintf(path + n, sizeof path - (size_t)n, "/%s-%s.gguf", shape->name, type->name);
    } else if ((size_t)snprintf(path, sizeof path, "%s", out) >= sizeof path) {
        fprintf(stderr, "piecewise: synth: output path too long\n");
        return 2;
    }

    struct stat sb;
    if (lstat(path, &sb) == 0) {
        if (!S_ISREG(sb.st_mode)) {
            fprintf(stderr, "piecewise: synth: '%s' exists and is not a plain file; not touched\n",
                    path);
            return 1;
        }
        if (!force && cached) {
            fprintf(stderr, "synth: %s is already made\n", path);
            printf("%s\n", path);
            return 0;
        }
        if (!force) {
            fprintf(stderr, "piecewise: synth: '%s' exists; --force replaces it\n", path);
            return 1;
        }
        if (unlink(path) != 0) {
            fprintf(stderr, "piecewise: synth: cannot remove '%s': %s\n", path, strerror(errno));
            return 1;
        }
    }

    if (family) {
        fprintf(stderr, "synth: writing %s (%s family over %s)\n", path, family, vocab);
        pw_status fs = pw_synth_family_write(&fam, vocab, path);
        if (fs != PW_OK) return pw_cli_fail("synth", fs);
        printf("%s\n", path);
        return 0;
    }
    progress_state ps = {.last_tenth = -1, .start = pw_monotonic_seconds()};
    pw_synth_config cfg = {.shape = shape, .type = type, .vocab_path = vocab,
                           .seed = (uint64_t)seed, .progress = progress, .progress_user = &ps};
    fprintf(stderr, "synth: writing %s (%s shape, %s)\n", path, shape->model, type->name);
    pw_status s = pw_synth_write(&cfg, path);
    if (s != PW_OK) return pw_cli_fail("synth", s);
    printf("%s\n", path);
    return 0;
}
