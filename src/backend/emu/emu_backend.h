/* The emulated discrete device (PW_DEVICE_EMU, `--device emu`): the CPU
 * kernel set run under CUDA's rules, so that the device path of the
 * engine, runtime and server runs in CI without a GPU (docs/cuda.md,
 * "The emulated device").
 *
 *  - Separate memory: device allocations are mappings the host cannot
 *    touch (PROT_NONE). They become readable only while the device worker
 *    runs queued work; a host dereference faults, and the fault handler
 *    names the rule and the allocation before aborting.
 *  - Asynchronous streams: launches, copies and memsets are queued and run
 *    in order by one device worker thread when the host synchronizes the
 *    stream (the latest moment a real device could finish them), so a
 *    missing synchronization always shows.
 *  - CUDA's capture rules, each refused with an error naming the rule; the
 *    rules and what they stand for are listed in docs/cuda.md.
 *  - Graphs instantiated from a capture, replayed as a unit, updated in
 *    place when a re-capture has the same nodes; the capabilities CUDA
 *    reports (graphs, graph update, async copies, needs warm-up).
 *
 * pw_emu_init registers it (the backend registry calls it). */
#ifndef PW_EMU_BACKEND_H
#define PW_EMU_BACKEND_H

#include "piecewise.h"

#include <stdint.h>

void pw_emu_init(void);

/* Device-wide counters (all streams). */
typedef struct pw_emu_stats {
    uint64_t flushes;             /* times the worker ran a stream's queued work */
    uint64_t items_executed;      /* launches, copies and memsets run */
    uint64_t graphs_instantiated; /* device graphs made from a capture */
    uint64_t graphs_updated;      /* re-captures applied to a graph in place */
    uint64_t graph_replays;
    uint64_t device_regions;      /* device allocations held */
} pw_emu_stats;
void pw_emu_get_stats(pw_emu_stats *out);

#endif
