/* The "tools" and "tool_choice" fields of a chat request: the tool
 * definitions the model's chat template receives as `tools`. piecewise
 * shows the tools to the model; it does not read tool calls out of the
 * answer, which comes back as text (docs/serve.md). */
#ifdef PW_HAVE_SERVE
#include "serve.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#define SERVE_MAX_TOOLS 128
#define SERVE_MAX_TOOL_NAME 64

/* OpenAI's rule for function names: 1 to 64 of a-z A-Z 0-9 _ -. */
static bool tool_name_ok(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > SERVE_MAX_TOOL_NAME) return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-'))
            return false;
    }
    return true;
}

static bool bad_tool(serve_error *err, int i, const char *field, const char *what) {
    char param[64];
    snprintf(param, sizeof param, "tools[%d]%s", i, field);
    serve_error_set(err, 400, "invalid_request_error", param, "invalid_value", "'%s' %s", param, what);
    return false;
}

/* {"type": "function", "function": {"name", "description"?, "parameters"?,
 * "strict"?}} */
static bool check_tool(const cJSON *t, int i, serve_error *err) {
    if (!cJSON_IsObject(t)) return bad_tool(err, i, "", "must be an object");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0)
        return bad_tool(err, i, ".type", "must be \"function\"");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
    if (!cJSON_IsObject(f)) return bad_tool(err, i, ".function", "must be an object");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
    if (!cJSON_IsString(name) || !tool_name_ok(name->valuestring))
        return bad_tool(err, i, ".function.name",
                        "must be 1 to 64 letters, digits, underscores or dashes");
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(f, "description");
    if (desc && !cJSON_IsString(desc) && !cJSON_IsNull(desc))
        return bad_tool(err, i, ".function.description", "must be a string");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(f, "parameters");
    if (params && !cJSON_IsObject(params) && !cJSON_IsNull(params))
        return bad_tool(err, i, ".function.parameters", "must be a JSON Schema object");
    const cJSON *strict = cJSON_GetObjectItemCaseSensitive(f, "strict");
    if (strict && !cJSON_IsBool(strict) && !cJSON_IsNull(strict))
        return bad_tool(err, i, ".function.strict", "must be true or false");
    return true;
}

bool serve_chat_tools(const cJSON *root, char **tools_json, serve_error *err) {
    *tools_json = NULL;
    const cJSON *choice = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    bool none = false;
    if (choice && !cJSON_IsNull(choice)) {
        if (cJSON_IsString(choice) && strcmp(choice->valuestring, "none") == 0) {
            none = true;
        } else if (!cJSON_IsString(choice) || strcmp(choice->valuestring, "auto") != 0) {
            /* "required" and a named function ask for a constrained answer */
            serve_error_set(err, 400, "invalid_request_error", "tool_choice", "unsupported_value",
                            "'tool_choice' must be \"auto\" or \"none\": piecewise does not "
                            "force the answer to be a tool call");
            return false;
        }
    }
    const cJSON *ptc = cJSON_GetObjectItemCaseSensitive(root, "parallel_tool_calls");
    if (ptc && !cJSON_IsBool(ptc) && !cJSON_IsNull(ptc)) {
        serve_error_set(err, 400, "invalid_request_error", "parallel_tool_calls", "invalid_value",
                        "'parallel_tool_calls' must be true or false");
        return false;
    }
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (!tools || cJSON_IsNull(tools)) return true;
    if (!cJSON_IsArray(tools)) {
        serve_error_set(err, 400, "invalid_request_error", "tools", "invalid_value",
                        "'tools' must be an array of tools");
        return false;
    }
    int n = cJSON_GetArraySize(tools);
    if (n > SERVE_MAX_TOOLS) {
        serve_error_set(err, 400, "invalid_request_error", "tools", "invalid_value",
                        "'tools' holds %d tools; at most %d are accepted", n, SERVE_MAX_TOOLS);
        return false;
    }
    int i = 0;
    for (const cJSON *t = tools->child; t; t = t->next, i++)
        if (!check_tool(t, i, err)) return false;
    /* "none": the model is not to call a tool, so it is not shown any */
    if (n == 0 || none) return true;
    *tools_json = cJSON_PrintUnformatted(tools);
    if (!*tools_json) {
        serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        return false;
    }
    return true;
}
#endif
