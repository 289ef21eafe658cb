/* The tensor-parallel communicator (ops/comm.h) over MPI, and the public
 * set-up calls of include/piecewise/model.h (pw_tp_*).
 *
 * Every exchange is point-to-point and nonblocking (MPI_Isend/Irecv,
 * MPI_Improbe), waited for by this file's own loop instead of a blocking
 * MPI call, for two reasons:
 *   - a watchdog: a wait that lasts longer than the timeout
 *     (pw_tp_set_timeout, default PW_TP_DEFAULT_TIMEOUT_S) names the rank
 *     that did not answer and ends the job (MPI_Abort), so a rank that
 *     hangs without dying (stopped, deadlocked, swapped out) ends the job
 *     with a message instead of a hang; a collective could not say which
 *     rank it waits for;
 *   - no spinning: Open MPI's blocking calls poll at full speed however
 *     long they wait, so a follower rank of an idle server would burn a
 *     core. Here a wait polls (a step's messages arrive as soon as the
 *     slowest rank gets there), yielding the core after 2 ms, and after
 *     0.1 s sleeps between polls (pause_wait).
 * Point-to-point messages between two ranks on one tag are not overtaken,
 * so successive gathers and broadcasts pair up in order.
 *
 * Errors: the communicator's handler is MPI_ERRORS_RETURN, so a failed
 * call returns its code here instead of aborting somewhere inside MPI;
 * this file then prints which exchange failed and ends the whole job
 * (MPI_Abort), because the other ranks would otherwise wait for this one.
 * A rank killed outright is seen by mpirun, which ends the others and
 * exits non-zero. */
#include "ops/comm.h"

#include "internal.h"
#include "piecewise/extend.h"
#include "piecewise/model.h"
#include "pw_config.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if PW_HAVE_MPI
#include <mpi.h>

static MPI_Comm tp_comm = MPI_COMM_NULL;

/* one tag per kind of exchange, so that kinds never match each other */
enum { TAG_BCAST = 1, TAG_GATHER, TAG_COMMANDS };

/* How a wait polls: at full speed for SPIN_S; then yielding the core
 * between polls (to another rank on the same core, if any: no delay
 * otherwise) until YIELD_S; then, as the wait is no longer part of a
 * normal step (a rank is stopped, or an idle follower waits for the next
 * step), with sleeps doubling from FIRST_NAP_S up to the cap. */
#define SPIN_S 2e-3
#define YIELD_S 0.1
#define FIRST_NAP_S 50e-6
#define STEP_NAP_S 1e-3
#define IDLE_NAP_S 20e-3

/* One pause of a wait that has lasted `waited` seconds. */
static void pause_wait(double waited, double *nap, double cap) {
    if (waited < SPIN_S) return;
    if (waited < YIELD_S) {
        sched_yield();
        return;
    }
    pw_sleep_seconds(*nap);
    if (*nap < cap) *nap *= 2;
}
#endif

static int tp_rank, tp_size = 1;
static bool tp_mpi_started;
static double tp_timeout_s = PW_TP_DEFAULT_TIMEOUT_S;
/* Time inside the exchanges (pw_tp_get_comm_stats): the kernel and the
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
static _Noreturn void end_job(void) {
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* Prints why an exchange failed and ends the job. */
static _Noreturn void fail_collective(const char *what, int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    fprintf(stderr,
            "piecewise: tensor parallel rank %d of %d: %s failed (%s); ending the job\n",
            tp_rank, tp_size, what, msg);
    end_job();
}

/* Waits for the n requests; peers[i] is the rank request i exchanges
 * with. Past the timeout, names the first rank still silent and ends the
 * job. */
static void wait_requests(MPI_Request *reqs, const int *peers, int n, const char *what) {
    double t0 = pw_monotonic_seconds(), nap = FIRST_NAP_S;
    int done[2 * PW_TP_MAX_RANKS];
    for (;;) {
        int outcount = 0;
        int rc = MPI_Testsome(n, reqs, &outcount, done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) fail_collective(what, rc);
        if (outcount == MPI_UNDEFINED) return; /* every request is complete */
        double waited = pw_monotonic_seconds() - t0;
        if (waited >= tp_timeout_s) {
            int peer = -1;
            for (int i = 0; i < n && peer < 0; i++)
                if (reqs[i] != MPI_REQUEST_NULL) peer = peers[i];
            fprintf(stderr,
                    "piecewise: tensor parallel rank %d of %d: rank %d did not answer within "
                    "%g s (%s); ending the job (--tp-timeout S changes the limit)\n",
                    tp_rank, tp_size, peer, tp_timeout_s, what);
            end_job();
        }
        pause_wait(waited, &nap, STEP_NAP_S);
    }
}

/* Rank 0 sends bytes to every other rank, which receive them into buf. */
static void from_rank0(void *buf, int bytes, int tag, const char *what) {
    MPI_Request reqs[PW_TP_MAX_RANKS];
    int peers[PW_TP_MAX_RANKS], n = 0, rc = MPI_SUCCESS;
    if (tp_rank == 0) {
        for (int r = 1; r < tp_size && rc == MPI_SUCCESS; r++) {
            peers[n] = r;
            rc = MPI_Isend(buf, bytes, MPI_BYTE, r, tag, tp_comm, &reqs[n++]);
        }
    } else {
        peers[n] = 0;
        rc = MPI_Irecv(buf, bytes, MPI_BYTE, 0, tag, tp_comm, &reqs[n++]);
    }
    if (rc != MPI_SUCCESS) fail_collective(what, rc);
    wait_requests(reqs, peers, n, what);
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
    const char *what = "the all-reduce's gather";
    MPI_Request reqs[2 * PW_TP_MAX_RANKS];
    int peers[2 * PW_TP_MAX_RANKS], n = 0, rc = MPI_SUCCESS;
    double t0 = pw_monotonic_seconds();
    for (int r = 0; r < tp_size && rc == MPI_SUCCESS; r++) {
        int64_t a, b;
        pw_tp_shard_range(shards, unit, tp_size, r, &a, &b);
        if (r == tp_rank) continue;
        peers[n] = r;
        rc = MPI_Irecv(recv + a * per_shard, (int)((b - a) * per_shard), MPI_FLOAT, r, TAG_GATHER,
                       tp_comm, &reqs[n++]);
    }
    int mine = (int)((s1 - s0) * per_shard);
    for (int r = 0; r < tp_size && rc == MPI_SUCCESS; r++) {
        if (r == tp_rank) continue;
        peers[n] = r;
        rc = MPI_Isend(send, mine, MPI_FLOAT, r, TAG_GATHER, tp_comm, &reqs[n++]);
    }
    if (rc != MPI_SUCCESS) fail_collective(what, rc);
    if (recv + s0 * per_shard != send)
        memmove(recv + s0 * per_shard, send, (size_t)mine * sizeof(float));
    wait_requests(reqs, peers, n, what);
    tp_stats.gathers++;
    tp_stats.gather_seconds += pw_monotonic_seconds() - t0;
#else
    (void)s0, (void)s1;
#endif
}

#if PW_HAVE_MPI
/* from_rank0, counted with the broadcasts in tp_stats */
static void counted_from_rank0(void *buf, int bytes, int tag, const char *what) {
    double t0 = pw_monotonic_seconds();
    from_rank0(buf, bytes, tag, what);
    tp_stats.broadcasts++;
    tp_stats.broadcast_seconds += pw_monotonic_seconds() - t0;
}
#endif

pw_status pw_comm_bcast(void *buf, size_t bytes) {
    if (tp_size == 1) return PW_OK;
#if PW_HAVE_MPI
    if (bytes > INT_MAX) return pw_error(PW_ERR_INVALID_ARG, "broadcast of %zu bytes", bytes);
    counted_from_rank0(buf, (int)bytes, TAG_BCAST, "a broadcast from rank 0");
#else
    (void)buf, (void)bytes;
#endif
    return PW_OK;
}

pw_status pw_comm_send_commands(const void *buf, size_t bytes) {
    if (tp_size == 1) return PW_OK;
#if PW_HAVE_MPI
    if (tp_rank != 0) return pw_error(PW_ERR_STATE, "only rank 0 sends commands");
    if (bytes > INT_MAX) return pw_error(PW_ERR_INVALID_ARG, "%zu bytes of commands", bytes);
    counted_from_rank0((void *)buf, (int)bytes, TAG_COMMANDS, "sending rank 0's commands");
#else
    (void)buf, (void)bytes;
#endif
    return PW_OK;
}

pw_status pw_comm_recv_commands(uint8_t **buf, size_t *cap, size_t *bytes) {
    *bytes = 0;
    if (tp_size == 1 || tp_rank == 0)
        return pw_error(PW_ERR_STATE, "rank %d of %d has no rank 0 to receive commands from",
                        tp_rank, tp_size);
#if PW_HAVE_MPI
    const char *what = "receiving rank 0's commands";
    /* idle: rank 0 may have nothing to do for hours, so no timeout here */
    double t0 = pw_monotonic_seconds(), nap = FIRST_NAP_S;
    MPI_Message msg;
    MPI_Status st;
    for (;;) {
        int flag = 0;
        int rc = MPI_Improbe(0, TAG_COMMANDS, tp_comm, &flag, &msg, &st);
        if (rc != MPI_SUCCESS) fail_collective(what, rc);
        if (flag) break;
        pause_wait(pw_monotonic_seconds() - t0, &nap, IDLE_NAP_S);
    }
    double t1 = pw_monotonic_seconds();
    int count = 0;
    int rc = MPI_Get_count(&st, MPI_BYTE, &count);
    if (rc != MPI_SUCCESS || count < 0) fail_collective(what, rc);
    if ((size_t)count > *cap) {
        uint8_t *grown = pw_host_grow(*buf, 1, cap, (size_t)count, INT_MAX);
        if (!grown) fail_collective(what, MPI_ERR_NO_MEM);
        *buf = grown;
    }
    rc = MPI_Mrecv(*buf, count, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) fail_collective(what, rc);
    *bytes = (size_t)count;
    tp_stats.broadcasts++;
    tp_stats.broadcast_seconds += pw_monotonic_seconds() - t1;
    return PW_OK;
#else
    (void)buf, (void)cap;
    return PW_ERR_STATE;
#endif
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
        /* serialized: serve steps the engine on a thread of its own */
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            return pw_error(PW_ERR_UNSUPPORTED, "--tp %d: MPI could not start", tp);
        tp_mpi_started = true;
        if (provided < MPI_THREAD_SERIALIZED)
            return pw_error(PW_ERR_UNSUPPORTED,
                            "--tp %d: this MPI library cannot be called from more than one "
                            "thread (MPI_THREAD_SERIALIZED), which piecewise needs",
                            tp);
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

pw_status pw_tp_set_timeout(double seconds) {
    if (!(seconds >= 1 && seconds <= PW_TP_MAX_TIMEOUT_S))
        return pw_error(PW_ERR_INVALID_ARG,
                        "the tensor-parallel timeout must be 1 to %d seconds (got %g)",
                        PW_TP_MAX_TIMEOUT_S, seconds);
    tp_timeout_s = seconds;
    return PW_OK;
}

double pw_tp_timeout(void) { return tp_timeout_s; }

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
