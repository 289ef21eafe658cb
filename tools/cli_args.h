/* Option parsing helpers shared by the subcommands. Each prints a clear
 * message naming the option on error and returns non-zero (or NULL). */
#ifndef PW_CLI_ARGS_H
#define PW_CLI_ARGS_H

#include "piecewise_llm.h"

/* The value after argv[*i] (advances *i), or NULL with a message. */
const char *pw_cli_value(int argc, char **argv, int *i);
/* Integer / float option value within [lo, hi]; 0 on success. */
int pw_cli_int(int argc, char **argv, int *i, int64_t lo, int64_t hi, int64_t *out);
int pw_cli_double(int argc, char **argv, int *i, double lo, double hi, double *out);
/* "1,4,16" into out; returns the count or -1 with a message. */
int pw_cli_int_list(const char *text, int64_t *out, int cap, const char *option);
/* auto|none|piecewise|full|full_decode_only|full_and_piecewise; 0 on success. */
int pw_cli_parse_mode(const char *text, pw_graph_mode *out);

/* "512M", "2GiB", "1048576": a byte count with an optional binary suffix
 * (K/KiB, M/MiB, G/GiB; K = 1024). 0 on success, else 1 with a message
 * naming `option`. */
int pw_cli_parse_bytes(const char *text, const char *option, size_t *out);

/* The memory and capture options run, chat, serve and bench share:
 * --memory-budget BYTES, --capture eager|lazy, --graph-budget BYTES. Same
 * return convention as pw_cli_generation_option. */
int pw_cli_capture_option(int argc, char **argv, int *i, pw_engine_config *cfg);
/* Their --help lines. */
#define PW_CLI_CAPTURE_HELP                                                                    \
    "  --memory-budget BYTES      device memory for weights, buffers, graphs and the KV\n"     \
    "                             cache (e.g. 512M, 2GiB); the KV cache gets what the\n"       \
    "                             others leave (default: no budget, 16384 positions)\n"        \
    "  --capture eager|lazy       capture every size at start-up (eager, default) or\n"        \
    "                             each size the first time a step uses it (lazy)\n"            \
    "  --graph-budget BYTES       lazy only: bytes of recorded graphs to keep; the least\n"    \
    "                             recently used sizes are freed past it\n"

/* The generation options run and chat share (the capture options above
 * included): --mode, --device, --temp,
 * --top-k, --top-p, --seed, --threads. Returns 1 if argv[*i] was one of
 * them (consumed, advancing *i), 0 if not, -1 on a bad value (message
 * printed). */
int pw_cli_generation_option(int argc, char **argv, int *i, pw_engine_config *cfg,
                             pw_sampling_params *sp, int64_t *threads);

/* Appends piece[0..n) to the NUL-terminated buffer *text (*len bytes used
 * of *cap), growing it with pw_host_grow; false, buffer unchanged and
 * PW_ERR_OOM's message set, when out of memory: the caller must not go on
 * with a text that lost a piece. */
bool pw_cli_text_append(char **text, size_t *len, size_t *cap, const char *piece, size_t n);

/* ---- capture options (distinct-piece capture, the graph cache) ---------- */

/* --no-distinct-capture and --graph-cache DIR, for run, chat, serve and
 * bench. Returns 1 if argv[*i] was one of them (consumed), 0 if not, -1 on
 * a bad value (message printed). */
int pw_cli_graph_cache_option(int argc, char **argv, int *i, pw_engine_config *cfg);
#define PW_CLI_GRAPH_CACHE_HELP                                                            \
    "  --graph-cache DIR          keep captured graphs in DIR and start from them next\n"     \
    "                             time (docs/graph-cache.md)\n"                              \
    "  --no-distinct-capture      capture every layer's piece for real instead of\n"         \
    "                             patching one capture per distinct piece\n"


/* ---- tensor parallelism (docs/tensor-parallel.md) ------------------------ */

/* --tp N and --tp-timeout S (the watchdog, pw_tp_set_timeout) for run,
 * serve, chat and bench model. Returns 1 if argv[*i] was one (consumed), 0
 * if not, -1 on a bad value (message printed). *tp stays 0 without it. */
int pw_cli_tp_option(int argc, char **argv, int *i, int64_t *tp);
#define PW_CLI_TP_HELP                                                                     \
    "  --tp N                     tensor parallelism over N processes, started as\n"        \
    "                             'mpirun -np N piecewise ... --tp N'; the tokens are the\n" \
    "                             same bits at every N (--tp 1: one process, same order)\n" \
    "  --tp-timeout S             end the job when a rank has not answered for S seconds\n" \
    "                             within a step (default 60)\n"
/* Loads the model: the whole of it without --tp (tp 0), or, after joining
 * the job of tp ranks, this rank's slice. The other ranks' standard output
 * goes to /dev/null (rank 0 speaks for the job) and, with cfg, their
 * progress is off; errors still reach standard error. Returns 0, or the
 * exit code after printing the error. */
int pw_cli_load_model(const char *cmd, const char *path, int64_t tp, pw_engine_config *cfg,
                      pw_model **out);
/* One line per rank on standard error (every rank, quiet or not): its
 * weight and KV-cache bytes, its peak resident memory, and the time its
 * steps spent in the collectives since `since` (taken after start-up, so
 * that the captures' all-reduces are left out). */
void pw_cli_print_tp_rank(const pw_engine *engine, const pw_tp_comm_stats *since);

#endif
