/* piecewise serve: the chat page at / (tools/page/), whose files the build
 * embeds in the binary (cmake/pw_embed.cmake). */
#ifdef PW_HAVE_SERVE
#include "serve.h"

#include <string.h>

extern const char pw_page_index_html[], pw_page_chat_js[], pw_page_chat_css[];

bool serve_page_find(const char *path, serve_page *out) {
    static const char *const paths[3] = {"/", "/chat.js", "/chat.css"};
    static const char *const types[3] = {"text/html; charset=utf-8",
                                         "text/javascript; charset=utf-8",
                                         "text/css; charset=utf-8"};
    const char *const data[3] = {pw_page_index_html, pw_page_chat_js, pw_page_chat_css};
    for (int i = 0; i < 3; i++)
        if (strcmp(path, paths[i]) == 0) {
            *out = (serve_page){types[i], data[i], strlen(data[i])};
            return true;
        }
    return false;
}
#endif
