/* TEST HOOKS: NOT PART OF THE API, NOT INSTALLED, NOT STABLE.
 *
 * Fault injection and oracles for piecewise's own tests, benchmarks and fuzz
 * targets. They are compiled into the static components those programs link;
 * the shared libraries do not export them. Anything here may change or go
 * without notice. */
#ifndef PW_TESTING_H
#define PW_TESTING_H

#include "piecewise_llm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Allocation-failure injection: the n-th future host allocation through
 * pw_host_alloc/calloc/realloc/strdup (counting from 1) fails with
 * PW_ERR_OOM; 0 disables (src/core/host_alloc.c). */
void pw_host_fail_nth(int64_t n);
/* The n-th future device allocation (counting from 1) of any pool fails;
 * 0 disables (src/mem/pool.c). Used to prove out-of-memory paths. */
void pw_pool_fail_nth_device_alloc(int64_t n);

/* Reference evaluator (src/graph/ir_run.c): walks the IR directly
 * (subgraphs recursively) and holds every value until the end. Same
 * conventions and submodule indexing as pw_plan_run (see pw_plan_build in
 * piecewise/graph.h); the oracle the plan and the native function are
 * compared with. */
pw_status pw_ir_run(const pw_ir *stitch, const pw_plan_options *opts, const pw_callable *submods,
                    int nsub, const pw_value *args, int nargs, pw_value *out);

/* A synthetic Llama-like graph of `layers` layers (src/graph/synthetic.c),
 * for tests and the stitching benchmark. */
pw_status pw_ir_synthetic_llama(int layers, pw_ir **out);

/* The engine's bitwise canary (src/model/engine_verify.c): the next checked
 * step flips one bit of the replayed logits before comparing, as a broken
 * graph would. */
void pw_engine_verify_plant_fault(pw_engine *e);

/* The fused ops (add_rms_norm, qkv_rope, gate_up_silu, lm_head) launch
 * their unfused kernel sequences even where the kernel set has the fused
 * kernel (src/ops/ops.c): the fallback a set without them takes, testable
 * on the CPU. Process-wide; off by default. */
void pw_ops_prefer_unfused(bool on);

#ifdef __cplusplus
}
#endif
#endif
