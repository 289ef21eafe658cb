/* piecewise: the command-line entry point. One binary, one subcommand per
 * concern; each lives in its own file under tools/ or bench/. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

typedef struct pw_cli_command {
    const char *name;
    pw_cli_fn fn;
    const char *summary;
} pw_cli_command;

static const pw_cli_command commands[] = {
    {"demo", pw_cmd_demo, "capture and replay a small computation on the CPU, step by step"},
    {"bench", pw_cmd_bench, "run a benchmark suite (piecewise bench --help)"},
    {"compile", pw_cmd_compile, "split a graph and print its stitching plan, C source or DOT"},
    {"run", pw_cmd_run, "generate text from prompts with a GGUF model"},
    {"inspect", pw_cmd_inspect, "print a GGUF file's metadata, tensor table and tokenizer"},
    {"chat", pw_cmd_chat, "chat interactively with a model that has a chat template"},
    {"serve", pw_cmd_serve, "serve a model over HTTP with OpenAI's API (continuous batching)"},
    {"perplexity", pw_cmd_perplexity, "perplexity and KL divergence of a model on a text (llama.cpp's method)"},
    {"cache", pw_cmd_cache, "read a model file into the page cache in 2 MiB pages, which decode reads faster"},
    {"synth", pw_cmd_synth, "write a synthetic model at a real model's shape (1B-8B) for benchmarks"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: piecewise <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'piecewise <command> --help' for a command's options.\n"
               "Environment: PW_LOG_LEVEL=error|warn|info|debug (default warn).\n");
}

int pw_cli_fail(const char *what, pw_status s) {
    fprintf(stderr, "piecewise: %s: %s (%s)\n", what, pw_last_error(), pw_status_name(s));
    return 1;
}

int pw_cli_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return 1;
    return 0;
}

static int run_command(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("piecewise %s\n", pw_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "piecewise: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}

/* The reason the first failed flush of standard output gave (0: none). */
static int stdout_errno;

void pw_cli_flush_stdout(void) {
    errno = 0;
    if (fflush(stdout) != 0 && !stdout_errno) stdout_errno = errno ? errno : EIO;
}

/* stdio reports a failed write to standard output (a full disk, /dev/full,
 * a closed descriptor) only through the stream's error flag, and a command
 * that streams text has nothing useful to do about it midway. So it is
 * checked once, here, after every command (coreutils' close_stdout): output
 * that was lost never ends in exit status 0. */
static int check_stdout(int rc) {
    pw_cli_flush_stdout();
    if (!ferror(stdout)) return rc;
    int e = stdout_errno;
    fprintf(stderr, "piecewise: error writing standard output%s%s\n", e ? ": " : "",
            e ? strerror(e) : "");
    return rc ? rc : 1;
}

int main(int argc, char **argv) {
    int rc = check_stdout(run_command(argc, argv));
    /* a tensor-parallel job ends together: an error ends every rank */
    pw_tp_finish(rc);
    return rc;
}
