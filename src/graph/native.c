/* Native stitching: the plan's C source compiled at run time with the
 * system C compiler into a shared object, loaded with dlopen and called
 * directly. Without a working compiler it falls back to the plan. */
#include "plan_internal.h"
#include "gen_abi.h" /* after piecewise.h: the runtime table only */
#include "pw_config.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The runtime table of the generated function (gen_abi.h). Reference
 * counts change here, with the interpreter's fast path, and nowhere in the
 * generated code. */
static pw_value rt_retain(pw_value v) {
    pw_plan_value_retain(v);
    return v;
}

static void rt_release(pw_value v) { pw_plan_value_release(v); }

static pw_status rt_tuple(int n, const pw_value *items, pw_value *out) {
    pw_tuple *t;
    pw_status s = pw_tuple_new(n, &t);
    if (s != PW_OK) {
        for (int i = 0; i < n; i++) pw_value_release(items[i]);
        *out = pw_value_none();
        return s;
    }
    for (int i = 0; i < n; i++) pw_tuple_set(t, i, items[i]);
    *out = pw_value_tuple(t);
    return PW_OK;
}

static pw_status rt_failed(pw_status s, const char *graph, const char *node) {
    return pw_error_context(s, "stitching %s: node %s", graph, node);
}

static pw_status rt_no_submodule(int index, const char *graph, const char *node) {
    return pw_error(PW_ERR_INVALID_ARG, "stitching %s: node %s: submodule %d has no callable", graph,
                    node, index);
}

static const pw_stitch_rt runtime = {rt_retain, rt_release, pw_plan_getitem, rt_tuple, rt_failed,
                                     rt_no_submodule};

struct pw_native {
    const pw_plan *plan;
    void *handle;
    pw_stitch_fn fn;
};

/* A compiler command, possibly with flags ("gcc -m64"). It goes to the shell
 * unquoted, so only characters the shell takes literally are accepted. */
#define PW_CC_ACCEPTED "a compiler command such as gcc or '/usr/bin/cc -m64', of letters, digits, spaces and -_./+=,:@"
static bool valid_compiler(const char *v) {
    for (const char *c = v; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr(" -_./+=,:@", *c)) return false;
    return true;
}

static const char *compiler(void) {
    const char *cc = pw_env_string("PW_CC", valid_compiler, PW_CC_ACCEPTED, "CC or " PW_C_COMPILER);
    if (!cc) cc = pw_env_string("CC", valid_compiler, PW_CC_ACCEPTED, PW_C_COMPILER);
    if (!cc) cc = PW_C_COMPILER;
    return cc;
}

/* The temporary directory's paths go to the shell in single quotes and into
 * fixed buffers (dir below). */
#define PW_TMPDIR_MAX 400
static bool valid_tmpdir(const char *v) {
    struct stat st;
    return v[0] == '/' && strlen(v) < PW_TMPDIR_MAX && !strchr(v, '\'') && stat(v, &st) == 0 &&
           S_ISDIR(st.st_mode);
}

/* The function is straight-line code run once per call. Past a few
 * hundred nodes fetching it costs more than its instructions (measured
 * with bench stitch: -Os beat -O2 at 80 layers, lost at 8), so large
 * plans are compiled for size. */
#define PW_NATIVE_SIZE_OPT_NODES 300

static const char *optimization(const pw_plan *plan) {
    return plan->nnodes > PW_NATIVE_SIZE_OPT_NODES ? "-Os" : "-O2";
}

static bool write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

/* First line of the compiler's complaint, for the notice. */
static void first_line(const char *path, char *buf, size_t cap) {
    buf[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return;
    if (fgets(buf, (int)cap, f)) buf[strcspn(buf, "\n")] = 0;
    fclose(f);
}

/* Compiles and loads; on failure fills why and returns false. */
static bool compile_and_load(const pw_plan *plan, const char *source, pw_native *n, char *why, size_t cap) {
    const char *tmp = pw_env_string("TMPDIR", valid_tmpdir,
                                    "an existing directory, as an absolute path under 400 characters without '",
                                    "/tmp");
    if (!tmp) tmp = "/tmp";
    char dir[512];
    snprintf(dir, sizeof dir, "%s/pw-native-XXXXXX", tmp);
    if (!mkdtemp(dir)) {
        snprintf(why, cap, "cannot create a temporary directory under %s", tmp);
        return false;
    }
    char src[600], so[600], log[600];
    snprintf(src, sizeof src, "%s/stitch.c", dir);
    snprintf(so, sizeof so, "%s/stitch.so", dir);
    snprintf(log, sizeof log, "%s/cc.log", dir);
    bool ok = false;
    if (!write_file(src, source)) {
        snprintf(why, cap, "cannot write %s", src);
    } else {
        pw_sb cmd = {0};
        /* CC may carry flags ("gcc -m64"), so it goes to the shell unquoted */
        pw_sb_printf(&cmd, "%s %s -shared -fPIC -o '%s' '%s' 2>'%s' >&2", compiler(), optimization(plan), so,
                     src, log);
        char *line = NULL;
        if (pw_sb_finish(&cmd, &line) != PW_OK) {
            snprintf(why, cap, "out of memory");
        } else {
            int rc = system(line);
            if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
                char msg[256];
                first_line(log, msg, sizeof msg);
                snprintf(why, cap, "'%s' failed (exit %d)%s%s", compiler(),
                         rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, msg[0] ? ": " : "", msg);
            } else if (!(n->handle = dlopen(so, RTLD_NOW | RTLD_LOCAL))) {
                snprintf(why, cap, "dlopen: %s", dlerror());
            } else {
                void *sym = dlsym(n->handle, plan->function_name);
                if (!sym) {
                    snprintf(why, cap, "dlsym %s: %s", plan->function_name, dlerror());
                    dlclose(n->handle);
                    n->handle = NULL;
                } else {
                    /* POSIX: function pointers and data pointers convert */
                    memcpy(&n->fn, &sym, sizeof sym);
                    ok = true;
                }
            }
            pw_host_free(line);
        }
    }
    /* the loaded mapping outlives the files */
    unlink(src);
    unlink(so);
    unlink(log);
    rmdir(dir);
    return ok;
}

pw_status pw_native_compile(const pw_plan *plan, pw_native **out) {
    *out = NULL;
    if (!plan) return pw_error(PW_ERR_INVALID_ARG, "pw_native_compile: no plan");
    pw_native *n = pw_host_calloc(1, sizeof *n);
    if (!n) return PW_ERR_OOM;
    n->plan = plan;
    char *source;
    pw_status s = pw_plan_emit_c(plan, &source);
    if (s != PW_OK) {
        pw_host_free(n);
        return s;
    }
    char why[512];
    if (!compile_and_load(plan, source, n, why, sizeof why))
        pw_log_warn("native stitching unavailable (%s); running the plan instead", why);
    pw_host_free(source);
    *out = n;
    return PW_OK;
}

void pw_native_free(pw_native *n) {
    if (!n) return;
    if (n->handle) dlclose(n->handle);
    pw_host_free(n);
}

bool pw_native_is_compiled(const pw_native *n) { return n && n->fn; }

pw_status pw_native_run(const pw_native *n, const pw_callable *submods, int nsub,
                        const pw_value *args, int nargs, pw_value *out) {
    if (!n->fn) return pw_plan_run(n->plan, submods, nsub, args, nargs, out);
    *out = pw_value_none();
    PW_TRY(pw_plan_check_call(n->plan, submods, nsub, nargs));
    pw_status s = n->fn(&runtime, n->plan->fns, submods, n->plan->consts, args, out);
    if (s != PW_OK) *out = pw_value_none();
    return s;
}
