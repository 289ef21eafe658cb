/* The tensor-parallel communicator (ops/comm.h) over MPI, and the public
 * set-up calls of include/piecewise/model.h (pw_tp_*).
 *
 * Errors: the communicator's handler is MPI_ERRORS_RETURN, so a failed
 * collective returns its code here instead of aborting somewhere inside
 * MPI; the caller then prints which collective failed and ends the whole
 * job (MPI_Abort), because the other ranks would otherwise wait in their
 * next collective forever. A rank killed outright is seen by mpirun, which
 * ends the others and exits non-zero. */
#include "ops/comm.h"

#include "internal.h"
#include "piecewise/extend.h"
#include "piecewise/model.h"
#include "pw_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if PW_HAVE_MPI
#include <mpi.h>

static MPI_Comm tp_comm = MPI_COMM_NULL;
#endif

static int tp_rank, tp_size = 1;
static bool tp_mpi_started;
/* Time inside the collectives (pw_tp_get_comm_stats): the kernel and the
 * engine call them from the thread that steps, one at a time. */
static pw_tp_comm_stats tp_stats;

int pw_comm_rank(void) { return tp_rank; }
int pw_comm_size(void) { return tp_size; }

void pw_tp_shard_range(int64_t shards, int64_t unit, int ranks, int rank, int64_t *s0,
                       int64_t *s1) {
    if (unit < 1 || shards % unit != 0 || shards / unit < ranks) unit = 1;
    int64_t units = shards / unit;
    *s0 = units * rank / ranks * unit;
    *s1 = units * (rank + 1) / ranks * unit;
}

int64_t pw_tp_gather_shards(int64_t shards, int64_t unit) {
    int64_t most = 0;
    for (int r = 0; r < tp_size; r++) {
        int64_t a, b;
        pw_tp_shard_range(shards, unit, tp_size, r, &a, &b);
        if (b - a > most) most = b - a;
    }
    return most * tp_size > shards ? most * tp_size : shards;
}

#if PW_HAVE_MPI
/* Prints why a collective failed and ends the job. */
static void fail_collective(const char *what, int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    fprintf(stderr,
            "piecewise: tensor parallel rank %d of %d: %s failed (%s); ending the job\n",
            tp_rank, tp_size, what, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}
#endif

void pw_comm_allgather_shards(const float *send, float *recv, int64_t shards, int64_t unit,
                              int64_t per_shard) {
    int64_t s0, s1;
    pw_tp_shard_range(shards, unit, tp_size, tp_rank, &s0, &s1);
    if (tp_size == 1) {
        if (send != recv) memcpy(recv, send, (size_t)(shards * per_shard) * sizeof(float));
        return;
    }
#if PW_HAVE_MPI
    int counts[PW_TP_MAX_RANKS], displs[PW_TP_MAX_RANKS];
    for (int r = 0; r < tp_size; r++) {
        int64_t a, b;
        pw_tp_shard_range(shards, unit, tp_size, r, &a, &b);
        counts[r] = (int)((b - a) * per_shard);
        displs[r] = (int)(a * per_shard);
    }
    double t0 = pw_monotonic_seconds();
    int rc = MPI_Allgatherv(send, counts[tp_rank], MPI_FLOAT, recv, counts, displs, MPI_FLOAT,
                            tp_comm);
    if (rc != MPI_SUCCESS) fail_collective("the all-reduce's gather", rc);
    tp_stats.gathers++;
    tp_stats.gather_seconds += pw_monotonic_seconds() - t0;
#else
    (void)s0, (void)s1;
#endif
}

pw_status pw_comm_bcast(void *buf, size_t bytes) {
    if (tp_size == 1) return PW_OK;
#if PW_HAVE_MPI
    if (bytes > INT32_MAX) return pw_error(PW_ERR_INVALID_ARG, "broadcast of %zu bytes", bytes);
    double t0 = pw_monotonic_seconds();
    int rc = MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, tp_comm);
    if (rc != MPI_SUCCESS) fail_collective("a broadcast from rank 0", rc);
    tp_stats.broadcasts++;
    tp_stats.broadcast_seconds += pw_monotonic_seconds() - t0;
#else
    (void)buf, (void)bytes;
#endif
    return PW_OK;
}

/* ---- public set-up (include/piecewise/model.h) ----------------------------------- */

pw_status pw_tp_init(int tp) {
    if (tp < 1 || tp > PW_TP_MAX_RANKS)
        return pw_error(PW_ERR_INVALID_ARG, "--tp %d: the degree must be 1 to %d", tp,
                        PW_TP_MAX_RANKS);
#if PW_HAVE_MPI
    if (tp == 1 && !getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE")) return PW_OK;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return pw_error(PW_ERR_UNSUPPORTED, "--tp %d: MPI could not start", tp);
        tp_mpi_started = true;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &tp_comm);
    MPI_Comm_set_errhandler(tp_comm, MPI_ERRORS_RETURN);
    int size = 1, rank = 0;
    MPI_Comm_size(tp_comm, &size);
    MPI_Comm_rank(tp_comm, &rank);
    tp_rank = rank;
    if (size != tp)
        return pw_error(PW_ERR_INVALID_ARG,
                        "--tp %d but MPI started %d process%s: run it as "
                        "'mpirun -np %d piecewise ... --tp %d'",
                        tp, size, size == 1 ? "" : "es", tp, tp);
    tp_size = size;
    return PW_OK;
#else
    if (tp == 1) return PW_OK;
    return pw_error(PW_ERR_UNSUPPORTED,
                    "--tp %d: this build has no MPI; install Open MPI (apt-get install "
                    "libopenmpi-dev openmpi-bin), rebuild, and run under 'mpirun -np %d'",
                    tp, tp);
#endif
}

void pw_tp_get_comm_stats(pw_tp_comm_stats *out) { *out = tp_stats; }

int pw_tp_rank(void) { return tp_rank; }
int pw_tp_size(void) { return tp_size; }

void pw_tp_finish(int exit_code) {
#if PW_HAVE_MPI
    if (tp_comm == MPI_COMM_NULL) return;
    if (exit_code != 0) {
        /* the others may be waiting in a collective this rank will never join */
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, exit_code);
    }
    MPI_Comm_free(&tp_comm);
    if (tp_mpi_started) MPI_Finalize();
    tp_mpi_started = false;
    tp_size = 1;
    tp_rank = 0;
#else
    (void)exit_code;
    (void)tp_mpi_started;
#endif
}
