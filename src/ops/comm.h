/* The tensor-parallel communicator: the ranks of one model split across
 * processes (mpirun -np N piecewise ... --tp N), and the few collectives
 * the engine and the all-reduce kernel use. It lives in the ops layer so
 * that a kernel can reach it: a recorded all-reduce launch replays its
 * collective through the process's one communicator, set up once by
 * pw_tp_init (include/piecewise/model.h) before any model is loaded.
 *
 * Without MPI at build time (pw_config.h: PW_HAVE_MPI 0) there is one
 * rank; every collective is then the identity.
 *
 * Shards: a row-parallel product splits its K dimension into a number of
 * shards fixed by the model (model_tp.c), and rank r owns the contiguous
 * range pw_tp_shard_range gives. The rule depends only on (shards, unit,
 * ranks, rank), so every rank computes everyone's ranges. */
#ifndef PW_OPS_COMM_H
#define PW_OPS_COMM_H

#include "piecewise.h"

#include <stddef.h>
#include <stdint.h>

/* Most ranks a job may have. */
#define PW_TP_MAX_RANKS 64

/* This process's rank and the number of ranks (0 and 1 before pw_tp_init
 * or without MPI). */
int pw_comm_rank(void);
int pw_comm_size(void);

/* Shards [*s0, *s1) of `shards` that rank `rank` of `ranks` owns. The
 * shards come in units of `unit` consecutive shards (the query heads of
 * one KV-head group): while there are at least as many units as ranks, a
 * rank owns whole units, balanced, the first ranks holding the smaller
 * share; with more ranks than units, the shards are balanced on their own.
 * A unit that does not divide `shards` counts as 1. */
void pw_tp_shard_range(int64_t shards, int64_t unit, int ranks, int rank, int64_t *s0,
                       int64_t *s1);

/* Shards a gather buffer holds: `shards`, or with several ranks every
 * rank's share padded to the largest (a device all-gather of equal counts,
 * docs/cuda.md), whichever is more. */
int64_t pw_tp_gather_shards(int64_t shards, int64_t unit);

/* Every rank's `per_shard` floats times its shard count (pw_tp_shard_range
 * of shards and unit), gathered in rank order (so in shard order) into
 * recv [shards * per_shard]. Identity copy with one rank. On failure
 * prints the reason and ends the job: it runs inside a kernel, which has no
 * status to return, and a rank that stops taking part in a collective would
 * hang the others. */
void pw_comm_allgather_shards(const float *send, float *recv, int64_t shards, int64_t unit,
                              int64_t per_shard);

/* bytes from rank 0 to every rank (no-op with one rank). A rank that does
 * not answer within the timeout (pw_tp_set_timeout) ends the job, named. */
pw_status pw_comm_bcast(void *buf, size_t bytes);

/* The engine's command stream (model/engine_tp.c): rank 0 sends one
 * message of `bytes` to every other rank; each of them waits for the next
 * one, as long as it takes (an idle server has nothing to send), sleeping
 * between polls, and receives it into *buf (grown to *cap as needed). */
pw_status pw_comm_send_commands(const void *buf, size_t bytes);
pw_status pw_comm_recv_commands(uint8_t **buf, size_t *cap, size_t *bytes);

#endif
