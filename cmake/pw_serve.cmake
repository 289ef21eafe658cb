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

# Links the server's libraries into the CLI target and turns its code on.
function(pw_serve_link target)
  if(PW_HAVE_SERVE)
    find_package(Threads REQUIRED)
    target_compile_definitions(${target} PRIVATE PW_HAVE_SERVE=1)
    target_link_libraries(${target} PRIVATE PkgConfig::PW_CJSON Threads::Threads)
  endif()
endfunction()
