# piecewise serve needs cJSON (JSON), found with pkg-config; its HTTP/1.1
# server is its own (tools/serve_http.c, tools/serve_framing.c). Without
# cJSON the CLI builds without the server and `piecewise serve` says how to
# get it; the serve tests skip.
find_package(PkgConfig QUIET)
set(PW_HAVE_SERVE OFF)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PW_CJSON QUIET IMPORTED_TARGET libcjson)
  if(PW_CJSON_FOUND)
    set(PW_HAVE_SERVE ON)
  endif()
endif()
message(STATUS "piecewise: serve (cJSON) ${PW_HAVE_SERVE}")

# The chat page the server answers at / (tools/page/), embedded in the
# binary at build time (cmake/pw_embed.cmake): no file is read at run time.
set(PW_PAGE_FILES index.html chat.js chat.css)

# Links the server's libraries into the CLI target and turns its code on.
function(pw_serve_link target)
  if(PW_HAVE_SERVE)
    find_package(Threads REQUIRED)
    target_compile_definitions(${target} PRIVATE PW_HAVE_SERVE=1)
    target_link_libraries(${target} PRIVATE PkgConfig::PW_CJSON Threads::Threads)
    foreach(f ${PW_PAGE_FILES})
      string(MAKE_C_IDENTIFIER "${f}" name)
      pw_embed_text(${target} ${PROJECT_SOURCE_DIR}/tools/page/${f} pw_page_${name})
    endforeach()
  endif()
endfunction()
