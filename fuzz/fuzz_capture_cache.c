/* Graph cache files (src/model/graph_cache.c) fed whole: the parser must
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
#include "ops/kernel_set.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pw_graph_cache_env env = {0, true, NULL, 0, true, true, pw_kernel_set_for(PW_DEVICE_CPU)};
    pw_program *list = NULL;
    size_t dropped = 0;
    char why[320];
    if (pw_graph_cache_parse(data, size, &env, &list, &dropped, why, sizeof why) != PW_OK) {
        FUZZ_CHECK(list == NULL, "a refused file returned programs");
        FUZZ_CHECK(why[0] != '\0', "a refused file without a reason");
        return 0;
    }
    for (pw_program *p = list, *next; p; p = next) {
        next = p->next;
        FUZZ_CHECK(p->from_cache && p->relocatable, "an accepted program is not runnable");
        size_t rl = 0;
        const pw_reloc_program *c = p->code;
        for (size_t i = 0; i < c->n_launches; i++) {
            const pw_kernel_args *lay = pw_kernel_args_of(p->kernel_ids[i]);
            FUZZ_CHECK(lay && c->kernels[i] && c->kernels[i]->args == lay,
                       "launch %zu has no kernel", i);
            FUZZ_CHECK(c->arg_offsets[i + 1] - c->arg_offsets[i] == lay->size,
                       "launch %zu has the wrong argument size", i);
            for (; rl < c->n_relocs && c->relocs[rl].launch == i; rl++)
                FUZZ_CHECK(c->relocs[rl].byte + sizeof(uintptr_t) <= lay->size,
                           "relocation %zu writes past the arguments", rl);
        }
        FUZZ_CHECK(rl == c->n_relocs, "relocations out of order");
        pw_program_free(p);
    }
    return 0;
}
