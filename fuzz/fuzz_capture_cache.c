/* Graph cache files (src/runtime/graph_cache.c) fed whole: the parser must
 * refuse or accept every input without a crash, a leak or an out-of-range
 * read, and whatever it accepts must be runnable as validated: each launch
 * names a kernel of the CPU set with its argument size, and every address
 * word of each launch is NULL or relocated into a range the parser checked.
 * The fingerprint, the region table and the checksum are taken from the
 * file, so mutations reach the programs. Seeds: fuzz/corpus/capture_cache,
 * cache files written by stories260K engines (FULL_AND_PIECEWISE and
 * PIECEWISE, sizes 1 and 2). Not named fuzz_graph_*: those targets link
 * only the graph layer. */
#include "fuzz_common.h"
#include "core/internal.h"
#include "model/graph_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const pw_kernel *table[PW_KERNEL_COUNT_];
    pw_graph_cache_kernels(PW_DEVICE_CPU, table);
    pw_graph_cache_spec spec = {0, NULL, table, PW_KERNEL_COUNT_,
                                PW_GRAPH_CACHE_ANY_FINGERPRINT | PW_GRAPH_CACHE_ANY_REGIONS |
                                    PW_GRAPH_CACHE_ANY_CHECKSUM};
    pw_graph_cache_entry *entries = NULL;
    size_t n = 0, dropped = 0;
    char why[320];
    if (pw_graph_cache_parse(data, size, &spec, &entries, &n, &dropped, why, sizeof why) != PW_OK) {
        FUZZ_CHECK(entries == NULL && n == 0, "a refused file returned programs");
        FUZZ_CHECK(why[0] != '\0', "a refused file without a reason");
        return 0;
    }
    for (size_t e = 0; e < n; e++) {
        const pw_reloc_program *c = entries[e].program;
        FUZZ_CHECK(c != NULL, "an accepted entry has no program");
        size_t rl = 0;
        for (size_t i = 0; i < c->n_launches; i++) {
            const pw_kernel_args *lay = c->kernels[i] ? c->kernels[i]->args : NULL;
            FUZZ_CHECK(lay != NULL, "launch %zu has no kernel", i);
            FUZZ_CHECK(c->arg_offsets[i + 1] - c->arg_offsets[i] == lay->size,
                       "launch %zu has the wrong argument size", i);
            for (; rl < c->n_relocs && c->relocs[rl].launch == i; rl++)
                FUZZ_CHECK(c->relocs[rl].byte + sizeof(uintptr_t) <= lay->size,
                           "relocation %zu writes past the arguments", rl);
        }
        FUZZ_CHECK(rl == c->n_relocs, "relocations out of order");
    }
    pw_graph_cache_entries_free(entries, n);
    return 0;
}
