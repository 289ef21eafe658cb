/* The graph cache (src/runtime/graph_cache.c, src/model/engine_cache.c, docs/graph-cache.md):
 *  - a first engine with graph_cache_dir writes one file; a second engine
 *    with the same model and configuration makes every graph from it (no
 *    plan runs: graphs_from_cache counts them all) and gives the same tokens
 *    as an engine without the cache, in every mode, with and without
 *    distinct-piece capture;
 *  - with verify_capture, every graph made from the file is checked byte for
 *    byte against a real capture;
 *  - a truncated file, a file of garbage, a flipped byte (checksum) and a
 *    file of another format are ignored with a warning and the engine
 *    captures; a program whose kernel id the set lacks is dropped alone and
 *    captured, the others still come from the file; so is a forged launch
 *    whose sizes would make its kernel touch bytes past its buffers;
 *  - a file of another build (fingerprint salt) or of other kernels (kernel
 *    table hash) under this build's name is refused as a whole, everything
 *    is captured and the file rewritten;
 *  - another configuration (capture sizes) writes another file. */
#include "piecewise_llm.h"
#include "engine_runs.h"
#include "test_util.h"
#include "internal.h"

#include "model/engine_internal.h"
#include "model/gguf_writer.h"
#include "model/graph_cache.h"
#include "ops/kernel_args.h"

#include <dirent.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_OUT 10

static const int64_t sizes[] = {1, 2, 4, 8};

static pw_status make_engine(pw_model *m, pw_graph_mode mode, const char *dir, bool distinct,
                             bool verify, int n_sizes, pw_engine **e) {
    pw_engine_config cfg;
    pw_engine_config_init(&cfg);
    cfg.mode = mode;
    cfg.max_num_seqs = 4;
    cfg.max_num_batched_tokens = 16;
    cfg.progress = PW_PROGRESS_OFF;
    cfg.print_capture_totals = false;
    cfg.capture_distinct = distinct;
    cfg.verify_capture = verify;
    cfg.capture_sizes = sizes;
    cfg.n_capture_sizes = n_sizes;
    cfg.graph_cache_dir = dir;
    return pw_engine_new(m, &cfg, e);
}

static pw_status run_tokens(pw_engine *e, pw_model *m, int32_t out[2][MAX_OUT]) {
    static const char *const prompts[2] = {"hello world", "a b c d e f g"};
    return run_staggered(e, m, prompts, 2, MAX_OUT, 300, &out[0][0]);
}

/* The one cache file in dir (its path in buf); false when there is not exactly one. */
static bool cache_file(const char *dir, char *buf, size_t cap, int *count) {
    DIR *d = opendir(dir);
    *count = 0;
    if (!d) return false;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "graphs-", 7) != 0) continue;
        (*count)++;
        snprintf(buf, cap, "%s/%s", dir, de->d_name);
    }
    closedir(d);
    return *count == 1;
}

static unsigned char *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return b;
}

static void spit(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(data, 1, size, f) == size);
    fclose(f);
}

/* An engine started with the cache in place: how many graphs came from it. */
static uint64_t warm_graphs(pw_model *m, const char *dir, const int32_t ref[2][MAX_OUT]) {
    pw_engine *e = NULL;
    CHECK_OK(make_engine(m, PW_GRAPH_FULL_AND_PIECEWISE, dir, true, false, 4, &e));
    if (!e) return 0;
    pw_engine_stats st;
    pw_engine_get_stats(e, &st);
    int32_t got[2][MAX_OUT];
    CHECK_OK(run_tokens(e, m, got));
    CHECK(memcmp(ref, got, sizeof got) == 0);
    pw_engine_free(e);
    return st.graphs_from_cache;
}

int main(void) {
    char model_path[] = "/tmp/pw_test_cache_model_XXXXXX";
    int fd = mkstemp(model_path);
    if (fd < 0) pw_test_skip("no temporary file");
    close(fd);
    pw_tiny_llama_config tc = pw_tiny_llama_default_config();
    tc.n_layers = 4;
    CHECK_OK(pw_tiny_llama_write_file(&tc, model_path));
    pw_model *m = NULL;
    CHECK_OK(pw_model_load(model_path, &m));
    unlink(model_path);
    if (!m) return pw_test_finish("model_engine_distinct_cache");
    char dir[] = "/tmp/pw_test_cache_dir_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);

    /* reference tokens: eager, no cache */
    int32_t ref[2][MAX_OUT], got[2][MAX_OUT];
    pw_engine *e = NULL;
    CHECK_OK(make_engine(m, PW_GRAPH_NONE, NULL, false, false, 4, &e));
    if (e) CHECK_OK(run_tokens(e, m, ref));
    pw_engine_free(e);

    /* cold: captures, writes the file */
    e = NULL;
    CHECK_OK(make_engine(m, PW_GRAPH_FULL_AND_PIECEWISE, dir, true, false, 4, &e));
    pw_engine_stats cold = {0};
    if (e) {
        pw_engine_get_stats(e, &cold);
        CHECK_EQ_INT((int64_t)cold.graphs_from_cache, 0);
        CHECK_OK(run_tokens(e, m, got));
        CHECK(memcmp(ref, got, sizeof got) == 0);
    }
    pw_engine_free(e);
    char file[4096];
    int n_files = 0;
    CHECK(cache_file(dir, file, sizeof file, &n_files));

    /* warm: every graph from the file */
    uint64_t warm = warm_graphs(m, dir, ref);
    printf("cold %" PRIu64 " graphs, warm %" PRIu64 " from the cache\n", cold.graphs_captured,
           warm);
    CHECK_EQ_INT((int64_t)warm, (int64_t)cold.graphs_captured);

    /* warm, checked: each graph from the file equals a real capture */
    e = NULL;
    CHECK_OK(make_engine(m, PW_GRAPH_FULL_AND_PIECEWISE, dir, true, true, 4, &e));
    pw_engine_free(e);

    /* every mode, with and without distinct-piece capture, from the cache
     * (each configuration writes its own file first) */
    static const pw_graph_mode modes[] = {PW_GRAPH_PIECEWISE, PW_GRAPH_FULL,
                                          PW_GRAPH_FULL_AND_PIECEWISE};
    for (size_t mi = 0; mi < PW_ARRAY_LEN(modes); mi++)
        for (int distinct = 0; distinct < 2; distinct++)
            for (int round = 0; round < 2; round++) {
                e = NULL;
                CHECK_OK(make_engine(m, modes[mi], dir, distinct, false, 4, &e));
                if (!e) continue;
                pw_engine_stats st;
                pw_engine_get_stats(e, &st);
                if (round == 1) CHECK_EQ_INT((int64_t)st.graphs_from_cache, (int64_t)st.graphs_captured);
                CHECK_OK(run_tokens(e, m, got));
                if (memcmp(ref, got, sizeof got) != 0) {
                    printf("tokens differ: mode %s, distinct %d, round %d\n",
                           pw_graph_mode_name(modes[mi]), distinct, round);
                    CHECK(false);
                }
                pw_engine_free(e);
            }

    /* another configuration, another file */
    e = NULL;
    CHECK_OK(make_engine(m, PW_GRAPH_FULL_AND_PIECEWISE, dir, true, false, 3, &e));
    pw_engine_free(e);
    CHECK(!cache_file(dir, file, sizeof file, &n_files));
    CHECK(n_files >= 2);
    /* back to the first configuration's file (4 sizes, distinct, default mode) */
    {
        e = NULL;
        CHECK_OK(make_engine(m, PW_GRAPH_FULL_AND_PIECEWISE, NULL, true, false, 4, &e));
        pw_engine_free(e);
    }
    /* find it again: write into a fresh folder */
    char dir2[] = "/tmp/pw_test_cache_dir2_XXXXXX";
    CHECK(mkdtemp(dir2) != NULL);
    e = NULL;
    CHECK_OK(make_engine(m, PW_GRAPH_FULL_AND_PIECEWISE, dir2, true, false, 4, &e));
    pw_engine_free(e);
    CHECK(cache_file(dir2, file, sizeof file, &n_files));
    size_t size = 0;
    unsigned char *good = slurp(file, &size);
    CHECK(good != NULL && size > 64);

    if (good) {
        /* damaged files: ignored, everything captured, tokens right */
        unsigned char *bad = malloc(size);
        memcpy(bad, good, size);
        spit(file, good, size / 2); /* truncated */
        CHECK_EQ_INT((int64_t)warm_graphs(m, dir2, ref), 0);
        spit(file, good, size);
        CHECK(warm_graphs(m, dir2, ref) > 0);
        bad[size / 3] ^= 0x40; /* a flipped bit: the checksum */
        spit(file, bad, size);
        CHECK_EQ_INT((int64_t)warm_graphs(m, dir2, ref), 0);
        memset(bad, 0x5a, size); /* garbage */
        spit(file, bad, size);
        CHECK_EQ_INT((int64_t)warm_graphs(m, dir2, ref), 0);
        spit(file, "", 0); /* empty */
        CHECK_EQ_INT((int64_t)warm_graphs(m, dir2, ref), 0);

        /* one program with a kernel id the set lacks: dropped alone. The
         * first launch of the first program: its id follows the header,
         * the region table and that program's fixed fields and arguments;
         * the parser finds it for us. */
        pw_engine *probe = NULL;
        CHECK_OK(make_engine(m, PW_GRAPH_FULL_AND_PIECEWISE, NULL, true, false, 4, &probe));
        if (probe) {
            const pw_kernel *table[PW_KERNEL_COUNT_];
            pw_graph_cache_kernels(PW_DEVICE_CPU, table);
            pw_graph_cache_spec spec = {0, NULL, table, PW_KERNEL_COUNT_,
                                        PW_GRAPH_CACHE_ANY_FINGERPRINT | PW_GRAPH_CACHE_ANY_REGIONS};
            pw_graph_cache_entry *entries = NULL;
            size_t n_programs = 0, dropped = 0;
            char why[256];
            CHECK_OK(pw_graph_cache_parse(good, size, &spec, &entries, &n_programs, &dropped, why,
                                          sizeof why));
            CHECK_EQ_INT((int64_t)dropped, 0);
            pw_graph_cache_entries_free(entries, n_programs);
            CHECK(n_programs > 0);
            /* corrupt the first program's first kernel id and fix the checksum */
            memcpy(bad, good, size);
            uint64_t n_regions;
            memcpy(&n_regions, good + 32, 8);
            size_t off = 40 + 8 * (size_t)n_regions + 8; /* the first program */
            uint32_t nargs;
            memcpy(&nargs, good + off + 24, 4);
            off += 28 + (size_t)nargs * (8 + 8 * 2 * PW_MAX_DIMS + 16) + 4;
            uint16_t kid = 0x7fff;
            memcpy(bad + off, &kid, 2);
            uint64_t h = pw_fnv1a(PW_FNV1A_BASIS, bad, size > 8 ? size - 8 : 0);
            memcpy(bad + size - 8, &h, 8);
            size_t n_left = 0;
            CHECK_OK(pw_graph_cache_parse(bad, size, &spec, &entries, &n_left, &dropped, why,
                                          sizeof why));
            CHECK_EQ_INT((int64_t)dropped, 1);
            CHECK_EQ_INT((int64_t)n_left, (int64_t)n_programs - 1);
            pw_graph_cache_entries_free(entries, n_left);
            spit(file, bad, size);
            uint64_t w = warm_graphs(m, dir2, ref);
            CHECK(w > 0 && w < warm);

            /* a forged launch whose addresses are all relocated in range but
             * whose sizes reach past its buffers (a matmul's k or a norm's
             * dim made 64 times larger): the kernel would write past its
             * block, so the program is dropped and captured */
            memcpy(bad, good, size);
            size_t at = off - 4; /* the first program's launch count */
            uint32_t n_launches;
            memcpy(&n_launches, good + at, 4);
            at += 4;
            bool forged = false;
            for (uint32_t li = 0; li < n_launches && !forged && at + 4 <= size; li++) {
                uint16_t id, nb;
                memcpy(&id, good + at, 2);
                memcpy(&nb, good + at + 2, 2);
                unsigned char *args = bad + at + 4;
                size_t field = SIZE_MAX;
                if (id == PW_KERNEL_MATMUL) field = offsetof(pw_k_matmul_args, k);
                else if (id == PW_KERNEL_MATMUL_QUANT) field = offsetof(pw_k_matmul_quant_args, k);
                else if (id == PW_KERNEL_RMS_NORM || id == PW_KERNEL_ADD_RMS_NORM)
                    field = offsetof(pw_k_rms_norm_args, dim);
                else if (id == PW_KERNEL_EMBEDDING) field = offsetof(pw_k_embedding_args, dim);
                if (field != SIZE_MAX && field + 8 <= nb) {
                    int64_t v;
                    memcpy(&v, args + field, 8);
                    v *= 64;
                    memcpy(args + field, &v, 8);
                    forged = true;
                }
                at += 4 + nb;
            }
            CHECK(forged);
            h = pw_fnv1a(PW_FNV1A_BASIS, bad, size > 8 ? size - 8 : 0);
            memcpy(bad + size - 8, &h, 8);
            CHECK_OK(pw_graph_cache_parse(bad, size, &spec, &entries, &n_left, &dropped, why,
                                          sizeof why));
            CHECK_EQ_INT((int64_t)dropped, 1);
            CHECK_EQ_INT((int64_t)n_left, (int64_t)n_programs - 1);
            pw_graph_cache_entries_free(entries, n_left);
            spit(file, bad, size);
            w = warm_graphs(m, dir2, ref); /* tokens still right: the rest captured */
            CHECK(w > 0 && w < warm);

            /* a file of another build (another salt in the fingerprint) or
             * of other kernels (another kernel-table hash), under this
             * build's name: refused as a whole, everything captured, and
             * the file rewritten, so the next engine starts from it */
            for (int field = 0; field < 2; field++) {
                memcpy(bad, good, size);
                bad[field ? 24 : 16] ^= 0x01;
                h = pw_fnv1a(PW_FNV1A_BASIS, bad, size > 8 ? size - 8 : 0);
                memcpy(bad + size - 8, &h, 8);
                spit(file, bad, size);
                pw_graph_cache_spec strict = {0, NULL, table, PW_KERNEL_COUNT_,
                                              PW_GRAPH_CACHE_ANY_FINGERPRINT};
                memcpy(&strict.fingerprint, good + 16, 8);
                strict.accept = PW_GRAPH_CACHE_ANY_REGIONS;
                CHECK_EQ_INT(pw_graph_cache_parse(bad, size, &strict, &entries, &n_left,
                                                  &dropped, why, sizeof why),
                             PW_ERR_PARSE);
                CHECK(strstr(why, field ? "other kernels" : "another model, configuration or "
                                                            "build") != NULL);
                CHECK_EQ_INT((int64_t)warm_graphs(m, dir2, ref), 0);
                CHECK_EQ_INT((int64_t)warm_graphs(m, dir2, ref), (int64_t)warm);
            }
            pw_engine_free(probe);
        }
        free(bad);
        free(good);
    }

    /* SmolLM2 (quantized, 30 layers) when models/ has it: cold, then warm
     * with every graph from the file checked against a real capture */
    char smol_buf[4096];
    const char *smol = pw_test_model_path("PW_SMOLLM2_GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf",
                                          smol_buf, sizeof smol_buf);
    pw_model *sm = NULL;
    if (smol) CHECK_OK(pw_model_load(smol, &sm));
    if (sm) {
        int32_t sref[2][MAX_OUT], sgot[2][MAX_OUT];
        e = NULL;
        CHECK_OK(make_engine(sm, PW_GRAPH_NONE, NULL, false, false, 4, &e));
        if (e) CHECK_OK(run_tokens(e, sm, sref));
        pw_engine_free(e);
        for (int round = 0; round < 2; round++) {
            e = NULL;
            CHECK_OK(make_engine(sm, PW_GRAPH_FULL_AND_PIECEWISE, dir2, true, round == 1, 4, &e));
            if (!e) continue;
            pw_engine_stats st;
            pw_engine_get_stats(e, &st);
            printf("SmolLM2 %s: %" PRIu64 " graphs, %" PRIu64 " from the cache\n",
                   round ? "warm, checked" : "cold", st.graphs_captured, st.graphs_from_cache);
            if (round == 1) CHECK_EQ_INT((int64_t)st.graphs_from_cache, (int64_t)st.graphs_captured);
            CHECK_OK(run_tokens(e, sm, sgot));
            CHECK(memcmp(sref, sgot, sizeof sgot) == 0);
            pw_engine_free(e);
        }
        pw_model_free(sm);
    } else if (!smol) {
        pw_test_skip_part("SmolLM2-135M-Instruct.Q4_1.gguf not fetched (scripts/fetch-model.sh)");
    }

    /* clean up both folders */
    for (int k = 0; k < 2; k++) {
        const char *dd = k ? dir2 : dir;
        DIR *d = opendir(dd);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (de->d_name[0] == '.') continue;
            char p[4200];
            snprintf(p, sizeof p, "%s/%s", dd, de->d_name);
            unlink(p);
        }
        if (d) closedir(d);
        rmdir(dd);
    }
    pw_model_free(m);
    return pw_test_finish("model_engine_distinct_cache");
}
