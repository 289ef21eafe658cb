/* Option parsing helpers shared by the subcommands. Each prints a clear
 * message naming the option on error and returns non-zero (or NULL). */
#ifndef PW_CLI_ARGS_H
#define PW_CLI_ARGS_H

#include "piecewise.h"

/* The value after argv[*i] (advances *i), or NULL with a message. */
const char *pw_cli_value(int argc, char **argv, int *i);
/* Integer / float option value within [lo, hi]; 0 on success. */
int pw_cli_int(int argc, char **argv, int *i, int64_t lo, int64_t hi, int64_t *out);
int pw_cli_double(int argc, char **argv, int *i, double lo, double hi, double *out);
/* "1,4,16" into out; returns the count or -1 with a message. */
int pw_cli_int_list(const char *text, int64_t *out, int cap, const char *option);
/* auto|none|piecewise|full|full_decode_only|full_and_piecewise; 0 on success. */
int pw_cli_parse_mode(const char *text, pw_graph_mode *out);

/* The generation options run and chat share: --mode, --device, --temp,
 * --top-k, --top-p, --seed, --threads. Returns 1 if argv[*i] was one of
 * them (consumed, advancing *i), 0 if not, -1 on a bad value (message
 * printed). */
int pw_cli_generation_option(int argc, char **argv, int *i, pw_engine_config *cfg,
                             pw_sampling_params *sp, int64_t *threads);

/* Appends piece[0..n) to the NUL-terminated buffer *text (*len bytes used
 * of *cap), growing it by doubling; false, buffer unchanged, when out of
 * memory. */
bool pw_cli_text_append(char **text, size_t *len, size_t *cap, const char *piece, size_t n);

/* ---- capture options (distinct-piece capture, the graph cache) ---------- */

/* --no-distinct-capture and --graph-cache DIR, for run, chat, serve and
 * bench. Returns 1 if argv[*i] was one of them (consumed), 0 if not, -1 on
 * a bad value (message printed). */
int pw_cli_capture_option(int argc, char **argv, int *i, pw_engine_config *cfg);
#define PW_CLI_CAPTURE_OPTIONS_HELP                                                            \
    "  --graph-cache DIR          keep captured graphs in DIR and start from them next\n"     \
    "                             time (docs/graph-cache.md)\n"                              \
    "  --no-distinct-capture      capture every layer's piece for real instead of\n"         \
    "                             patching one capture per distinct piece\n"

#endif
