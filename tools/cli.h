/* Subcommands of the piecewise CLI. Each returns a process exit code:
 * 0 success, 1 runtime failure, 2 usage error. */
#ifndef PW_CLI_H
#define PW_CLI_H

#include "piecewise_llm.h"

typedef int (*pw_cli_fn)(int argc, char **argv);

int pw_cmd_demo(int argc, char **argv);
int pw_cmd_bench(int argc, char **argv);
int pw_cmd_compile(int argc, char **argv);
/* Validates g, splits it unless it already has call_module nodes, and writes the form `emit` (graph, split, plan, c, dot, graph-dot) to out_path (NULL: stdout). Returns an exit code. */
int pw_compile_emit(const pw_ir *g, const char *emit, const char *const *split_ops, int n_split_ops, const char *out_path);
int pw_cmd_run(int argc, char **argv);
int pw_cmd_inspect(int argc, char **argv);
int pw_cmd_chat(int argc, char **argv);
int pw_cmd_serve(int argc, char **argv);
int pw_cmd_synth(int argc, char **argv);
int pw_cmd_perplexity(int argc, char **argv);
int pw_cmd_cache(int argc, char **argv);

/* Prints "piecewise: <what>: <last error>" to stderr and returns 1. */
int pw_cli_fail(const char *what, pw_status s);
/* fflush(stdout), remembering why the first failure failed: main reports
 * a failed write to standard output once, after the command, and exits
 * non-zero (tools/piecewise.c). */
void pw_cli_flush_stdout(void);
/* True if argv[i] is -h or --help. */
int pw_cli_wants_help(int argc, char **argv);

#endif
