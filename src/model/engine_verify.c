/* Online bitwise canary: one step in N that ran captured graphs
 * (PIECEWISE or FULL) is run again eagerly (NONE) on the same batch and
 * the two sets of logits are compared bit for bit. The kernels are
 * batch-invariant and replay must not change results, so any difference
 * is a bug (a stale pointer baked into a graph, a corrupted replay); it is
 * logged with the descriptor, the mode and the first differing row, and
 * counted. Kept out of engine.c: the step calls pw_engine_verify_step.
 *
 * Also the perturbation verify_capture runs between its two captures of a
 * descriptor (pw_engine_perturb_metadata). */
#include "model/engine_internal.h"

#include "internal.h"
#include "pw_testing.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct pw_engine_verify {
    int64_t every;
    int64_t seen; /* graph steps since the last check */
    bool plant_fault;
    pw_engine_verify_stats stats;
};

static pw_status set_verify_every(pw_engine *e, int64_t every) {
    if (every < 0)
        return pw_error(PW_ERR_INVALID_ARG, "verify_every must be >= 0 (got %" PRId64 ")", every);
    if (!e->verify) {
        e->verify = calloc(1, sizeof *e->verify);
        if (!e->verify) return pw_error(PW_ERR_OOM, "out of memory for the bitwise canary");
    }
    e->verify->every = every;
    e->verify->seen = 0;
    return PW_OK;
}

/* every rank of a tensor-parallel job re-runs the same steps (engine_tp.c) */
pw_status pw_engine_set_verify_every(pw_engine *e, int64_t every) {
    if (!e->tp) return set_verify_every(e, every);
    size_t mark;
    PW_TRY(pw_engine_tp_record_verify(e, every, &mark));
    return pw_engine_tp_settle(e, mark, set_verify_every(e, every));
}

void pw_engine_get_verify_stats(const pw_engine *e, pw_engine_verify_stats *out) {
    memset(out, 0, sizeof *out);
    if (e->verify) *out = e->verify->stats;
}

void pw_engine_verify_plant_fault(pw_engine *e) {
    if (e->verify) e->verify->plant_fault = true;
}

void pw_engine_verify_free(pw_engine *e) {
    free(e->verify);
    e->verify = NULL;
}

pw_status pw_engine_verify_step(pw_engine *e, pw_runtime_mode mode, const pw_batch_desc *desc,
                                int64_t n_padded, pw_tensor *logits, pw_engine_forward_fn forward) {
    struct pw_engine_verify *v = e->verify;
    /* n_rows: the rows the LM head computed; a step that samples nothing
     * (prefill chunks only) has no logits to compare */
    const int64_t n_rows = e->run.host.n_sample_rows;
    if (!v || v->every <= 0 || mode == PW_MODE_NONE || n_rows <= 0) return PW_OK;
    if (++v->seen < v->every) return PW_OK;
    v->seen = 0;
    int64_t vocab = pw_model_get_info(e->model)->vocab;
    size_t bytes = (size_t)n_rows * (size_t)vocab * sizeof(float);
    /* both sets of logits come to the host through the stream, wherever
     * the engine runs */
    float *replayed = pw_host_alloc(bytes), *ref = pw_host_alloc(bytes);
    pw_value eager = {0};
    pw_status st = replayed && ref ? PW_OK : PW_ERR_OOM;
    if (st == PW_OK) st = pw_stream_copy_d2h(e->stream, replayed, pw_tensor_data(logits), bytes);
    if (st == PW_OK) st = pw_stream_synchronize(e->stream);
    if (st == PW_OK && v->plant_fault) {
        /* a test flips one bit of the replayed output, as a broken graph would */
        ((unsigned char *)replayed)[(n_rows - 1) * vocab * (int64_t)sizeof(float) + 1] ^= 0x10;
        v->plant_fault = false;
    }
    /* the eager run writes the same K/V again for the same positions: the
     * cache is unchanged unless the two runs differ, which is the bug */
    if (st == PW_OK) st = forward(e, PW_MODE_NONE, desc, n_padded, &eager);
    if (st == PW_OK && eager.kind != PW_VAL_TENSOR)
        st = pw_error(PW_ERR_INTERNAL, "the eager re-run returned no logits tensor");
    if (st == PW_OK) st = pw_stream_copy_d2h(e->stream, ref, pw_tensor_data(eager.as.tensor), bytes);
    if (st == PW_OK) st = pw_stream_synchronize(e->stream);
    if (st != PW_OK) {
        pw_value_release(eager);
        pw_host_free(replayed);
        pw_host_free(ref);
        return st;
    }
    v->stats.checks++;
    for (int64_t row = 0; row < n_rows; row++) {
        if (memcmp(ref + row * vocab, replayed + row * vocab, (size_t)vocab * sizeof(float)) == 0)
            continue;
        int64_t col = 0;
        while (col < vocab &&
               memcmp(ref + row * vocab + col, replayed + row * vocab + col, sizeof(float)) == 0)
            col++;
        char buf[PW_BATCH_DESC_FORMAT_CAP];
        v->stats.mismatches++;
        snprintf(v->stats.last, sizeof v->stats.last,
                 "%s replay of %s differs from eager at row %" PRId64 " of %" PRId64
                 ", column %" PRId64 " (%.9g vs %.9g)",
                 pw_runtime_mode_name(mode), pw_batch_desc_format(desc, buf, sizeof buf), row,
                 n_rows, col, (double)replayed[row * vocab + col], (double)ref[row * vocab + col]);
        pw_log_warn("bitwise canary: %s", v->stats.last);
        break;
    }
    pw_value_release(eager);
    pw_host_free(replayed);
    pw_host_free(ref);
    return PW_OK;
}

/* ---- verify_capture's perturbation ---------------------------------------------------- */

pw_status pw_engine_perturb_metadata(void *user, int round) {
    pw_engine *e = user;
    /* Different per-step values in every persistent buffer: a kernel that
     * baked any of them into its launch arguments shows up as a diff. */
    pw_step_inputs *h = &e->run.host;
    const int64_t rows = h->max_tokens;
    for (int64_t t = 0; t < rows; t++) {
        h->positions[t] = (int32_t)(round * 3 + t % 5);
        h->token_seq[t] = (int32_t)(round % 2);
        h->input_ids[t] = (int32_t)(round + 1);
        h->slot_mapping[t] = -1;
        h->sample_rows[t] = (int32_t)((t + round) % rows);
    }
    h->n_sample_rows = (int32_t)rows; /* clamped to each launch's rows */
    PW_TRY(pw_engine_stage_inputs(e, rows));
    return pw_stream_synchronize(e->stream);
}
