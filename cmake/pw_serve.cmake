# piecewise serve needs libmicrohttpd (HTTP) and cJSON (JSON), found with
# pkg-config. Without them the CLI builds without the server and
# `piecewise serve` says how to get it; the serve tests skip.
find_package(PkgConfig QUIET)
set(PW_HAVE_SERVE OFF)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PW_MHD QUIET IMPORTED_TARGET libmicrohttpd)
  pkg_check_modules(PW_CJSON QUIET IMPORTED_TARGET libcjson)
  if(PW_MHD_FOUND AND PW_CJSON_FOUND)
    set(PW_HAVE_SERVE ON)
  endif()
endif()
message(STATUS "piecewise: serve (libmicrohttpd + cJSON) ${PW_HAVE_SERVE}")

# Links the server's libraries into the CLI target and turns its code on.
function(pw_serve_link target)
  if(PW_HAVE_SERVE)
    find_package(Threads REQUIRED)
    target_compile_definitions(${target} PRIVATE PW_HAVE_SERVE=1)
    target_link_libraries(${target} PRIVATE PkgConfig::PW_MHD PkgConfig::PW_CJSON Threads::Threads)
  endif()
endfunction()
